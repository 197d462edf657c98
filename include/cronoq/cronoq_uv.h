/*
 * libcronoq's libuv adapter: waiting requests complete as callbacks on a
 * libuv loop, and the loop drives the release path.
 *
 * One adapter (cq_uv) serves one loop; several loops, each with its own
 * adapter and thread, can share one pool. Acquire on the loop's thread; the
 * callback runs exactly once, on that thread: granted, timed out (a uv timer
 * keeps the deadlines), cancelled or closed. Release and cancel from any
 * thread: a release made on another thread wakes the loop through a uv_async
 * handle, whose wake-ups coalesce (each drains every outcome that is ready);
 * a release made on the loop's thread needs no round trip.
 *
 * A library of its own, built on the core's public API only: CMake
 * `find_package(cronoq COMPONENTS uv)` and target cronoq::cronoq_uv (or
 * cronoq::cronoq_uv_static), or pkg-config `cronoq_uv`. The core library
 * has no libuv dependency.
 *
 * Copyright (c) 2026 the libcronoq authors. MIT licence, see LICENSE.
 */
#ifndef CRONOQ_CRONOQ_UV_H
#define CRONOQ_CRONOQ_UV_H

#include <cronoq/cronoq.h>
#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The adapter's own export macro: as CQ_EXPORT, keyed on the adapter's
 * build (CRONOQ_UV_BUILDING); CRONOQ_STATIC for the static libraries. */
#if defined(CRONOQ_STATIC)
#define CQ_UV_EXPORT
#elif defined(_WIN32)
#if defined(CRONOQ_UV_BUILDING)
#define CQ_UV_EXPORT __declspec(dllexport)
#else
#define CQ_UV_EXPORT __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define CQ_UV_EXPORT __attribute__((visibility("default")))
#else
#define CQ_UV_EXPORT
#endif

typedef struct cq_uv cq_uv;

/*
 * One acquire on a loop, and once granted the units it holds (in `grant`).
 * The caller owns the storage: zero it or call cq_uv_req_init() before the
 * first use; it must stay where it is from cq_uv_acquire() until the
 * callback has run, and while the grant is held.
 */
typedef struct cq_uv_req {
  void *data;     /* for the caller */
  cq_grant grant; /* the core grant: held after a successful callback */
  uint64_t cq_private[16];
} cq_uv_req;

/*
 * Outcome of cq_uv_acquire(), on the loop's thread, exactly once: `status`
 * is 0 when granted (release it later with cq_uv_release()), or
 * CQ_ETIMEDOUT, CQ_ECANCELED, CQ_ECLOSED (the adapter or the pool closed)
 * or CQ_ENEVER, holding nothing. It may acquire again (the same req
 * included), release, cancel or close the adapter; it must not block, or
 * the loop stops.
 */
typedef void (*cq_uv_cb)(cq_uv_req *req, int status);

/* Reset `req` to idle. Never on a pending or held req. It touches only
 * `req`: any thread; never blocks; callable from a callback. */
CQ_UV_EXPORT void cq_uv_req_init(cq_uv_req *req);

/* Called on the loop's thread once the adapter's handles are closed; the
 * adapter is freed when it returns. */
typedef void (*cq_uv_close_cb)(cq_uv *uv);

/*
 * Create an adapter for `loop` and `pool`: it owns a uv_async_t, a
 * uv_timer_t and a uv_idle_t on the loop until cq_uv_close(). The calling
 * thread becomes the adapter's loop thread, so call it on the thread that
 * runs the loop. `alloc` may be NULL (malloc/free). Loop thread only; never
 * blocks (it takes no pool lock); callable from a callback on that thread.
 * Returns 0, CQ_EINVAL, CQ_ENOMEM or CQ_ESYS (a uv call failed; if a handle
 * was already made, the loop frees the half-made adapter when it next
 * runs).
 */
CQ_UV_EXPORT int cq_uv_init(cq_uv **out, uv_loop_t *loop, cq_pool *pool,
                            const cq_allocator *alloc);

/*
 * Acquire `request` for `req`, on the loop's thread, without blocking it.
 * `deadline_ms` is absolute on the cq_now() clock (CQ_NEVER: no limit; a
 * deadline already past: one attempt). If this returns < 0 the callback
 * never runs and nothing changed, neither the req nor the adapter that a
 * pending req belongs to; else it runs once, possibly before this returns
 * when the request fits at once. Loop thread only; never waits for units:
 * lock-free when it can, else takes the pool lock briefly (as
 * cq_grant_submit()); runs callbacks; callable from a callback on the
 * loop's thread.
 * Returns 0, CQ_ECLOSED (the adapter is closing, or the pool closed),
 * CQ_ESTATE (req pending, on this adapter or another, or still held) or
 * another refusal of cq_grant_submit() (CQ_ENEVER, CQ_ENOENT, CQ_EPOOL,
 * CQ_EINVAL, or CQ_ESYS for a request with a hold limit when the pool's
 * timer thread could not be started).
 */
CQ_UV_EXPORT int cq_uv_acquire(cq_uv *uv, cq_uv_req *req, const cq_req *request,
                               int64_t deadline_ms, cq_uv_cb cb);

/*
 * Cancel a pending acquire, from any thread. Its callback then runs on the
 * loop with CQ_ECANCELED, unless the grant won the race (then with 0): on
 * the loop's thread as "Runs callbacks" in cronoq.h says, from another
 * thread once the loop wakes. Any thread (but see the end of cronoq.h for
 * a req that moves between pools); takes the pool lock briefly; runs
 * callbacks; callable from a callback.
 * Returns 0 when it cancelled, CQ_ESTATE when the outcome was already
 * decided, or CQ_EINVAL (NULL, or never acquired).
 */
CQ_UV_EXPORT int cq_uv_cancel(cq_uv_req *req);

/*
 * Release a granted req, from any thread: its units return to the pool at
 * once, and waiters that now fit are granted (an adapter's callbacks run on
 * its loop; those of core callback waiters of the pool may run on this
 * thread). Also after the adapter was closed and freed: a grant outlives
 * its adapter. Any thread, one call per req at a time; lock-free when it
 * can, else takes the pool lock briefly; runs callbacks; callable from a
 * callback. Returns as cq_grant_release().
 */
CQ_UV_EXPORT int cq_uv_release(cq_uv_req *req);

/*
 * Close the adapter, on the loop's thread (a callback may do it): every
 * pending acquire fails with CQ_ECLOSED (one already granted but not yet
 * delivered gives its units back first), later acquires are refused, and
 * the adapter's handles are closed; then, from the loop, `cb` (may be NULL)
 * runs and the adapter is freed. Once it has, uv_loop_close() succeeds as
 * far as the adapter is concerned. Loop thread only; takes the pool lock
 * briefly per pending acquire; runs their callbacks, as "Runs callbacks" in
 * cronoq.h says (those whose outcome is on its way from another thread run
 * later, from the loop); callable from a callback on the loop's thread.
 * Returns 0, CQ_EINVAL or CQ_ECLOSED (already closing).
 */
CQ_UV_EXPORT int cq_uv_close(cq_uv *uv, cq_uv_close_cb cb);

/* The pool and the loop of an adapter; its `data` pointer for the caller
 * (the pointer it holds is the caller's to guard). Any thread, until the
 * close callback has run; never block; callable from a callback. */
CQ_UV_EXPORT cq_pool *cq_uv_pool(const cq_uv *uv);
CQ_UV_EXPORT uv_loop_t *cq_uv_loop(const cq_uv *uv);
CQ_UV_EXPORT void **cq_uv_data(cq_uv *uv);

#ifdef __cplusplus
}
#endif

#endif /* CRONOQ_CRONOQ_UV_H */
