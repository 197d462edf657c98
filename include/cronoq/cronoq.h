/*
 * libcronoq: multi-resource admission control.
 *
 * This header is the reference for the core API. Every function says what
 * it does, who owns what, whether it is thread-safe, whether it may block
 * and whether it may be called from a callback (in the words defined below,
 * under "Threads, blocking and callbacks"), and which error codes it
 * returns.
 *
 * The model in one paragraph: a *pool* holds named resources: integer
 * *budgets* and *device pools* (N devices, each shared in exact fractions or
 * taken whole). A *request* names several resources and an amount of each;
 * it is built once and reused. Acquiring a request fills a
 * caller-owned *grant* with all the units at once, or with none. A request
 * that does not fit waits in the pool's FIFO-with-reservation queue (the
 * docs/POLICY.md states the rule precisely). Releasing the grant returns every
 * unit, exactly once.
 *
 * Platforms. libcronoq runs on Linux, and is written for any POSIX system
 * that has what it needs: POSIX threads, unnamed semaphores (sem_init()),
 * condition variables timed on CLOCK_MONOTONIC (pthread_condattr_setclock()),
 * a monotonic clock (clock_gettime()), and posix_spawn() and poll() for GPU
 * detection. Building it takes a C11 compiler (atomics, _Thread_local);
 * this header is plain C99 and C++11. A blocked cq_grant_acquire() waits with
 * sem_clockwait() on the monotonic clock where glibc 2.30 or later has it;
 * with an older glibc or another C library it waits with sem_timedwait() on
 * the wall clock for the time left, so that setting the wall clock back
 * during a wait makes that deadline pass late (never early). It is tested
 * on Debian 12, x86-64, with gcc 12 and clang 14, and only there. It is
 * written for 64-bit targets; 32-bit ones are untested, and on 32-bit x86,
 * which aligns uint64_t to 4 bytes inside structs, cq_req and cq_grant come
 * out 4 bytes short of the sizes the library asserts, so it does not build
 * there. macOS (no unnamed semaphores, no pthread_condattr_setclock()) and
 * Windows (the platform layer and GPU detection are POSIX only) are not
 * supported yet; the export macro's _WIN32 branch is the only part of a
 * Windows port that exists.
 *
 * Threads, blocking and callbacks. Each function's description states these
 * facts, in these words:
 * - "Thread-safe": any thread may call it, at the same time as other calls
 *   on the same pool, within the rules at the end of this header ("What
 *   stays undefined behaviour"), e.g. one grant in one call at a time.
 *   "Not thread-safe against X" names what must not run at the same time.
 * - "Never blocks": it waits for nothing, not even the pool lock.
 *   "Takes the pool lock briefly": it holds the pool's one mutex for work
 *   bounded by the size of the pool and its queue, never across a wait, a
 *   grant callback or the event hook (the allocator hooks and a pool's
 *   clock do run under it), and may wait for other threads' turns at it.
 *   "Lock-free when it can": an acquire of a request that names only
 *   budgets and classes and has no hold limit, and the release of the
 *   grant it made, skip the lock while no waiter claims those budgets, in
 *   a pool with neither an event hook nor CQ_POOL_BACKFILL. An acquire
 *   takes the lock too once a blocking acquire's barging window has passed
 *   (see CQ_BARGE_DEFAULT_MS), and on a pool with its own clock while one
 *   sleeps in its window (the clock is read under the lock). "May block"
 *   says what it waits for.
 * - "Runs callbacks": before it returns, on the calling thread, it may run
 *   the grant callbacks of the attempts it decided (its own, and waiters it
 *   granted or failed) and deliver pending events to the event hook, so it
 *   takes as long as they do. Called from inside a callback it queues them
 *   instead: they run in order right after the current callback returns,
 *   which keeps the stack flat.
 * - "Callable from a callback": it may be called from a grant callback
 *   (cq_grant_cb, and cq_uv_cb on its loop) and from the event hook, which
 *   run with no library lock held. A call that may block is not, and
 *   neither is cq_pool_destroy(): see the end of this header.
 * A pool starts at most one thread of its own, its timer thread (see
 * CQ_POOL_MANUAL_TIMERS): it expires the deadlines of callback waiters,
 * runs their callbacks, and marks grants that outlive their hold limit.
 *
 * Copyright (c) 2026 the libcronoq authors. MIT licence, see LICENSE.
 */
#ifndef CRONOQ_CRONOQ_H
#define CRONOQ_CRONOQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version and export                                                        */
/* ------------------------------------------------------------------------ */

#define CQ_VERSION_MAJOR 0
#define CQ_VERSION_MINOR 1
#define CQ_VERSION_PATCH 0
/* One number that grows with every release: MAJOR * 1000000 + MINOR * 1000 +
 * PATCH, for compile-time checks (`#if CQ_VERSION_NUMBER >= 1000`). */
#define CQ_VERSION_NUMBER                                                      \
  (CQ_VERSION_MAJOR * 1000000 + CQ_VERSION_MINOR * 1000 + CQ_VERSION_PATCH)

#if defined(CRONOQ_STATIC)
#define CQ_EXPORT
#elif defined(_WIN32)
#if defined(CRONOQ_BUILDING)
#define CQ_EXPORT __declspec(dllexport)
#else
#define CQ_EXPORT __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define CQ_EXPORT __attribute__((visibility("default")))
#else
#define CQ_EXPORT
#endif

/* The version the library was built as, "MAJOR.MINOR.PATCH". Thread-safe;
 * never blocks; callable from a callback. */
CQ_EXPORT const char *cq_version_string(void);

/* The same as a number (CQ_VERSION_NUMBER of the library, which may differ
 * from the header's when an application runs against a newer library).
 * Thread-safe; never blocks; callable from a callback. */
CQ_EXPORT int cq_version_number(void);

/*
 * ABI policy. While the version is 0.x, the shared library's SOVERSION is
 * "0.MINOR": a new minor version may break the ABI, a new patch version
 * never does. Within one SOVERSION:
 * - functions are only added, never changed or removed;
 * - caller-owned storage (cq_req, cq_grant, and cq_uv_req in the adapter)
 *   keeps its size and alignment. The library leaves headroom in it (it
 *   uses about half of cq_grant and a third of cq_req today) and may use
 *   more of it later; cq_req_size() and cq_grant_size() report the sizes the
 *   library was built with, for bindings that allocate the storage
 *   themselves;
 * - configuration and statistics structs keep their layout and end in
 *   reserved fields; a later version may give a reserved field a meaning,
 *   where zero keeps today's behaviour. Initialise a configuration struct
 *   with its _INIT macro (all zeros), or zero it; the library fills a stats
 *   struct whole, reserved fields included (as zeros).
 */
#if defined(__cplusplus)
#define CQ_ZERO_INIT_                                                          \
  {}
#else
#define CQ_ZERO_INIT_                                                          \
  { 0 }
#endif

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Every function that can fail returns an int: 0 on success, one of these
 * negative codes on failure. A failed call changes nothing, unless its
 * description says otherwise.
 *
 * XX(name, value, message). The table is also walked by the tests.
 */
#define CQ_ERRNO_MAP(XX)                                                       \
  XX(EINVAL, -1, "invalid argument")                                           \
  XX(ENOMEM, -2, "out of memory")                                              \
  XX(EBUSY, -3, "resources are busy: the request would have to wait")          \
  XX(ETIMEDOUT, -4, "deadline passed before the request was granted")          \
  XX(ECANCELED, -5, "request was cancelled")                                   \
  XX(ECLOSED, -6, "pool is closed")                                            \
  XX(ENEVER, -7, "request can never be satisfied: it exceeds a capacity")      \
  XX(ENOENT, -8, "unknown resource")                                           \
  XX(EEXIST, -9, "name already in use")                                        \
  XX(EINUSE, -10, "still held or waited on")                                   \
  XX(ESTATE, -11, "grant is not in a state that allows this")                  \
  XX(EPOOL, -12, "grant or request belongs to another pool")                   \
  XX(ERANGE, -13, "value out of range")                                        \
  XX(ETOOMANY, -14, "too many items")                                          \
  XX(ESYS, -15, "system call failed")                                          \
  XX(EPARSE, -16, "text could not be parsed")                                  \
  XX(EUNAVAILABLE, -17, "the pool's server cannot be reached")                 \
  XX(EACCES, -18,                                                              \
     "the pool's server refused this user or a permission, or runs code "      \
     "that is not this library's")

enum cq_errno {
#define CQ_ERRNO_ENUM_(name, value, msg) CQ_##name = (value),
  CQ_ERRNO_MAP(CQ_ERRNO_ENUM_)
#undef CQ_ERRNO_ENUM_
      CQ_ERRNO_MIN_ = -18
};

/* A message for an error code; a fixed string for unknown codes.
 * Thread-safe; never blocks; callable from a callback. */
CQ_EXPORT const char *cq_strerror(int err);

/* The code's name without the CQ_ prefix ("EBUSY"); "UNKNOWN" for unknown
 * codes and "OK" for 0. Thread-safe; never blocks; callable from a
 * callback. */
CQ_EXPORT const char *cq_err_name(int err);

/* ------------------------------------------------------------------------ */
/* Time                                                                      */
/* ------------------------------------------------------------------------ */

/* A deadline that never passes. */
#define CQ_NEVER INT64_MAX

/*
 * Milliseconds on the system's monotonic clock. Deadlines are absolute
 * values on this clock (or on a pool's own clock, see cq_pool_config).
 * A deadline that has already passed means "try once, do not wait".
 * Thread-safe; never blocks; callable from a callback.
 */
CQ_EXPORT int64_t cq_now(void);

/* ------------------------------------------------------------------------ */
/* Pool                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct cq_pool cq_pool;

/*
 * Allocator hooks: all three functions or none. `arg` is passed through.
 * The library allocates only when the pool and its resources are created or
 * changed, for snapshots of more than 64 resources and for metrics, never
 * on the acquire and release paths. The hooks may run with the pool lock
 * held (see the end of this header).
 */
typedef struct cq_allocator {
  void *(*alloc)(size_t size, void *arg);
  void *(*realloc)(void *ptr, size_t size, void *arg);
  void (*free)(void *ptr, void *arg);
  void *arg;
} cq_allocator;

/* A pool's clock: returns the current time in milliseconds. It is called
 * with the pool lock held, on any thread that uses the pool: it must be
 * thread-safe and quick, and must not call the library on this pool. */
typedef int64_t (*cq_clock_fn)(void *arg);

/* Pool option flags (cq_pool_config.flags). */
enum cq_pool_flags {
  /*
   * Staged claims: a waiter claims the resources it lacks one at a time, in
   * the pool's resource order, instead of all at once. See docs/POLICY.md for
   * the trade-off; the default (0) claims everything lacking at once.
   */
  CQ_POOL_STAGED_CLAIMS = 1u << 0,
  /*
   * Manual timers: deadlines of waiting requests (blocking and callback)
   * expire only when the host calls cq_pool_expire(). No timer thread is
   * started. Required with a custom clock, useful on event loops and in
   * simulations.
   */
  CQ_POOL_MANUAL_TIMERS = 1u << 1,
  /*
   * Backfill: a request that declares a hold limit (cq_req_set_hold_limit())
   * may use capacity withheld for the oldest waiter when that delays the
   * waiter no later than its shadow time: the earliest moment it would fit,
   * going by the holders' declared limits. With it, a request whose limit
   * ends before that moment may pass a waiting head; requests without a
   * limit never do. Every acquire and release then takes the pool lock,
   * so that the shadow time sees them. See docs/POLICY.md, "Backfill".
   */
  CQ_POOL_BACKFILL = 1u << 2,
  /*
   * Strict order: no barging window (cq_pool_config.barge_ms) for blocking
   * acquires. A release then hands what it frees straight to the oldest
   * waiter that fits, which keeps it while its thread wakes.
   */
  CQ_POOL_STRICT_ORDER = 1u << 3
};

/*
 * Bounded barging. A blocking acquire (cq_grant_acquire()) that does not
 * fit first sleeps for up to a window T without claiming anything: what is
 * released meanwhile goes back to the pool, where threads that are running
 * may take it, and each release wakes one sleeping acquire that fits to try
 * again, as a new arrival would. Once it has waited T, the acquire claims
 * its place by its arrival, exactly as every waiter does under
 * "FIFO with reservation" (docs/POLICY.md): what it needs is withheld for it
 * and handed to it directly. The window ends at arrival + T on the pool's
 * clock whether or not the acquire's thread runs then (descheduled,
 * stopped in a debugger, starved): the first call on the pool after that
 * moment that can grant anything (an acquire, a try, a release, a cancel,
 * cq_pool_expire()) finds it claiming, and a lock-free acquire that starts
 * later takes the lock to see it. The fairness bound: a blocking acquire
 * can be overtaken only by attempts that arrive during its first T of
 * waiting; from then on it has the queue's guarantee, ordered by when it
 * arrived. Callback and libuv waiters always claim at once. Backfill pools
 * have no window. On a pool with manual timers T is measured on the pool's
 * clock, and cq_pool_expire()'s next deadline includes the window's end.
 */
#define CQ_BARGE_DEFAULT_MS 10
#define CQ_BARGE_MAX_MS INT64_C(3600000)

/*
 * What happened, for a host's logging or tracing (see cq_event_fn).
 * XX(NAME, value, "name", what it means); the table also makes
 * cq_event_type_name().
 */
#define CQ_EVENT_MAP(XX)                                                       \
  XX(GRANTED, 1, "granted", "an attempt got its units (wait_ms: how long)")    \
  XX(PARKED, 2, "parked", "an attempt did not fit and waits")                  \
  XX(RESERVED, 3, "reserved", "a waiter became the claimant of `resource`")    \
  XX(RELEASED, 4, "released", "a grant gave its units back")                   \
  XX(TIMED_OUT, 5, "timed_out", "a waiter's deadline passed")                  \
  XX(CANCELLED, 6, "cancelled", "a waiter was cancelled")                      \
  XX(CLOSED, 7, "closed", "a waiter failed because the pool closed")           \
  XX(NEVER, 8, "never", "a waiter failed: a capacity shrank below it")         \
  XX(OVERDUE, 9, "overdue",                                                    \
     "a grant outlived its hold limit (it keeps its units; wait_ms: its "      \
     "limit)")                                                                 \
  XX(LOST, 10, "lost",                                                         \
     "a holder lost its lease: its units are the pool's again (fleet pools)")  \
  XX(WARNING, 11, "warning",                                                   \
     "something an operator should fix, named in `resource` (fleet pools: "    \
     "a server setting this user may not read)")

typedef enum cq_event_type {
#define CQ_EVENT_ENUM_(name, value, text, help) CQ_EVENT_##name = (value),
  CQ_EVENT_MAP(CQ_EVENT_ENUM_)
#undef CQ_EVENT_ENUM_
      CQ_EVENT_MAX_ = 11
} cq_event_type;

/* The event type's name ("granted", "timed_out", ...), or "unknown".
 * Thread-safe; never blocks; callable from a callback. */
CQ_EXPORT const char *cq_event_type_name(int type);

typedef struct cq_event {
  cq_event_type type;
  uint64_t attempt;     /* identifies the attempt across its events */
  void *data;           /* the grant's `data` when the event happened */
  const char *resource; /* CQ_EVENT_RESERVED: the resource; CQ_EVENT_WARNING:
                           what to fix; else NULL */
  int64_t time_ms;      /* on the pool's clock */
  int64_t wait_ms;      /* CQ_EVENT_GRANTED: time spent waiting */
  uint64_t reserved_[4];
} cq_event;

/*
 * Event hook. Called in the order events happened, never with a library
 * lock held, on some thread that used the pool right after; `ev` is valid
 * during the call only. It must not block for long and must not destroy the
 * pool; it may call other functions of the library. Events are buffered
 * (cq_pool_config.event_buffer); when the hook falls behind, the oldest
 * undelivered events are dropped and counted (cq_pool_stats.events_dropped).
 * With a hook, every acquire and release takes the pool lock, where events
 * are ordered: the lock-free paths are off.
 */
typedef void (*cq_event_fn)(const cq_event *ev, void *arg);

/* Pool configuration. Zero means default for every field. */
typedef struct cq_pool_config {
  unsigned flags;            /* enum cq_pool_flags, or-ed */
  const cq_allocator *alloc; /* NULL: malloc/realloc/free; copied */
  cq_clock_fn clock;         /* NULL: cq_now(); needs CQ_POOL_MANUAL_TIMERS */
  void *clock_arg;
  void *data;            /* for the caller, see cq_pool_data() */
  cq_event_fn on_event;  /* NULL: no events */
  void *event_arg;       /* passed to on_event */
  uint32_t event_buffer; /* events held for the hook; 0: 4096 */
  int64_t barge_ms;      /* barging window T for blocking acquires, up to
                            CQ_BARGE_MAX_MS; 0: CQ_BARGE_DEFAULT_MS (10);
                            CQ_POOL_STRICT_ORDER for none */
  uint64_t reserved_[7]; /* must be zero */
} cq_pool_config;

#define CQ_POOL_CONFIG_INIT CQ_ZERO_INIT_

/*
 * Create a pool. `cfg` may be NULL for all defaults. On success *out is the
 * new pool, which the caller destroys with cq_pool_destroy(). Thread-safe
 * (it shares nothing); never blocks; callable from a callback.
 * Returns 0, CQ_EINVAL (NULL out, incomplete allocator, unknown flag, a clock
 * without manual timers, barge_ms below 0 or above CQ_BARGE_MAX_MS, a
 * reserved field not zero), CQ_ENOMEM or CQ_ESYS
 * (the mutex or the monotonic condition variable could not be made).
 */
CQ_EXPORT int cq_pool_create(cq_pool **out, const cq_pool_config *cfg);

/*
 * Close the pool: every waiting request fails with CQ_ECLOSED (blocking
 * callers return it, callbacks run with it), and every later acquire fails
 * the same way. Holders keep their grants and must still release them.
 * Idempotent. Thread-safe; takes the pool lock briefly; runs callbacks
 * (with CQ_ECLOSED); callable from a callback. Returns 0 or CQ_EINVAL.
 */
CQ_EXPORT int cq_pool_close(cq_pool *pool);

/*
 * Destroy the pool and free everything it owns. Refused with CQ_EINUSE while
 * any grant is held (whatever it holds: a grant that gave every unit back
 * early, or one of an empty request, is still held until it is released)
 * or any request waits: release, cancel or close first.
 * Accepts NULL (returns 0). Not thread-safe against any other call on the
 * same pool. May block: it takes the pool lock, then joins the pool's timer
 * thread, which first finishes a callback it may be running. Not callable
 * from a callback or the event hook of this pool.
 * Returns 0, CQ_EINUSE, or CQ_ESTATE when called on the pool's timer
 * thread (that is, from a callback it runs).
 */
CQ_EXPORT int cq_pool_destroy(cq_pool *pool);

/* The `data` pointer given in the configuration; NULL for a NULL pool.
 * Thread-safe; never blocks; callable from a callback. */
CQ_EXPORT void *cq_pool_data(const cq_pool *pool);

/*
 * Expire waiting requests whose deadline has passed on the pool's clock,
 * mark grants that outlived their hold limit overdue, and report the
 * earliest deadline or limit still pending in *next_deadline_ms (CQ_NEVER
 * when none; may be NULL). Meant for pools with CQ_POOL_MANUAL_TIMERS; it is
 * harmless on others. Thread-safe; takes the pool lock briefly; runs
 * callbacks (of the expired requests, and of waiters that then fit);
 * callable from a callback. Returns 0 or CQ_EINVAL.
 */
CQ_EXPORT int cq_pool_expire(cq_pool *pool, int64_t *next_deadline_ms);

/* A consistent snapshot of the pool as a whole. */
/*
 * Its fields, XX(name, "gauge" or "counter", what it counts): the one table
 * the struct and the Prometheus exposition are made from, so that every
 * figure is exported (cronoq_pool_<name>, counters with _total).
 */
#define CQ_POOL_STATS_MAP(XX)                                                  \
  XX(waiting, "gauge", "Requests waiting now.")                                \
  XX(waited_grants, "counter", "Grants to requests that had to wait.")         \
  XX(wakeups, "counter", "Blocked threads woken: one per outcome.")            \
  XX(events_dropped, "counter",                                                \
     "Events the event hook fell too far behind for.")                         \
  XX(overdue, "counter", "Grants that outlived their hold limit.")             \
  XX(backfilled, "counter", "Grants made by backfill.")                        \
  XX(late_heads, "counter",                                                    \
     "Oldest waiters granted after their shadow time (backfill).")             \
  XX(converted, "counter",                                                     \
     "Blocking acquires that outwaited the barging window and claimed.")

typedef struct cq_pool_stats {
#define CQ_POOL_STATS_FIELD_(name, type, help) uint64_t name;
  CQ_POOL_STATS_MAP(CQ_POOL_STATS_FIELD_)
#undef CQ_POOL_STATS_FIELD_
  uint64_t reserved_[7];
} cq_pool_stats;

/* Fill *out. Thread-safe; takes the pool lock briefly; callable from a
 * callback. Returns 0 or CQ_EINVAL. */
CQ_EXPORT int cq_pool_stats_get(cq_pool *pool, cq_pool_stats *out);

/* ------------------------------------------------------------------------ */
/* Budgets                                                                   */
/* ------------------------------------------------------------------------ */

/* Longest resource name, in bytes, not counting the terminating NUL. */
#define CQ_NAME_MAX 63

/* Largest capacity of a budget: 2^40 - 1 units. */
#define CQ_BUDGET_MAX ((int64_t)1099511627775)

/*
 * Add a budget: a named resource of `capacity` interchangeable units
 * ("warehouse-db" 10 connections, "memory_mib" 24576). A name is 1 to
 * CQ_NAME_MAX bytes of letters, digits and "_-./", unique in the pool.
 * Budgets take part in the resource order (used by staged claims) in the
 * order they are added. Thread-safe; takes the pool lock briefly; callable
 * from a callback.
 * Returns 0, CQ_EINVAL (bad name or pointer), CQ_ERANGE (capacity negative
 * or above CQ_BUDGET_MAX), CQ_EEXIST (name taken), CQ_ETOOMANY (the pool's
 * table of 65535 resources is full) or CQ_ENOMEM.
 */
CQ_EXPORT int cq_budget_add(cq_pool *pool, const char *name, int64_t capacity);

/* Budget flags (cq_budget_add_ex). */
enum cq_budget_flags {
  /*
   * Lone-request allowance: a request for more than the capacity is not
   * refused; it is granted when nothing else holds the budget, and then
   * holds all of it. While such a lone grant is held nothing else is
   * granted on the budget, whatever the capacity does meanwhile and
   * whatever it gives back early; at a capacity of 0 a lone request waits
   * (it needs the whole capacity, and at least one unit), as every request
   * on the budget then does. Without the flag a request for more than the
   * capacity fails with CQ_ENEVER.
   */
  CQ_BUDGET_LONE = 1u << 0
};

/* cq_budget_add() with flags (enum cq_budget_flags). Thread-safe; takes the
 * pool lock briefly; callable from a callback. Returns as cq_budget_add(),
 * and CQ_EINVAL for an unknown flag. */
CQ_EXPORT int cq_budget_add_ex(cq_pool *pool, const char *name,
                               int64_t capacity, unsigned flags);

/*
 * Change a budget's capacity while it is in use. Growing grants the waiters
 * that now fit, at once. Shrinking takes nothing from holders: new grants
 * wait until in-use drops below the new capacity, and waiters that can now
 * never fit fail with CQ_ENEVER (their callbacks run, blocked threads
 * return it). Setting the current value does nothing. Thread-safe; takes
 * the pool lock briefly; runs callbacks; callable from a callback.
 * Returns 0, CQ_EINVAL, CQ_ENOENT (no such budget) or CQ_ERANGE.
 */
CQ_EXPORT int cq_budget_set_capacity(cq_pool *pool, const char *name,
                                     int64_t capacity);

/* ------------------------------------------------------------------------ */
/* Classes                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * A class is a named concurrency cap: a request of class "predict" is
 * granted only while fewer than `max_workers` grants of that class are held.
 * It waits in the same queue, by the same rule, as for any resource (a
 * class behaves as a budget of max_workers units, one per grant). Class
 * names share the pool's namespace with resources. Thread-safe; takes the
 * pool lock briefly; callable from a callback. Returns as cq_budget_add().
 */
CQ_EXPORT int cq_class_add(cq_pool *pool, const char *name,
                           int64_t max_workers);

/* Change a class's max_workers, with the rules and returns of
 * cq_budget_set_capacity() (CQ_ENOENT: no such class). Thread-safe; takes
 * the pool lock briefly; runs callbacks; callable from a callback. */
CQ_EXPORT int cq_class_set_max(cq_pool *pool, const char *name,
                               int64_t max_workers);

/* ------------------------------------------------------------------------ */
/* Resources: removal and snapshots                                          */
/* ------------------------------------------------------------------------ */

/*
 * Remove a budget, class or device pool. Refused with CQ_EINUSE while any
 * held grant names it (also one that gave all its units of it back early)
 * or any request waiting names it. Requests built with it
 * fail with CQ_ENOENT from then on. Thread-safe; takes the pool lock
 * briefly; callable from a callback.
 * Returns 0, CQ_EINVAL, CQ_ENOENT or CQ_EINUSE.
 */
CQ_EXPORT int cq_resource_remove(cq_pool *pool, const char *name);

/* The kinds of resource. */
enum cq_resource_kind {
  CQ_KIND_BUDGET = 1,
  CQ_KIND_DEVICES = 2,
  CQ_KIND_CLASS = 3
};

/* The wait histogram's bounds: below[i] counts waits under 2^i ms. */
#define CQ_WAIT_BUCKETS 28

/* Waiting times of the requests granted on a resource. */
typedef struct cq_wait_stats {
  uint64_t count; /* grants measured: every grant, 0 ms when at once */
  int64_t p50_ms; /* median, from a histogram (within 1/8 of the value) */
  int64_t p99_ms; /* 99th percentile, likewise */
  int64_t max_ms; /* exact */
  int64_t sum_ms; /* of all the waits: sum_ms / count is the mean */
  /* Cumulative: grants that waited less than 2^i ms, exactly (waits are
   * counted in whole milliseconds), from under 1 ms (i = 0, granted at
   * once) to under 2^27 ms (37 hours); `count` includes the longer ones. */
  uint64_t below[CQ_WAIT_BUCKETS];
} cq_wait_stats;

/*
 * A consistent snapshot of one resource, taken under the pool's lock. For a
 * device pool the amounts are in thousandths of a device over all its
 * devices (see cq_device_stats_get() per device); for a class they count
 * workers.
 */
typedef struct cq_resource_stats {
  char name[CQ_NAME_MAX + 1];
  int kind;               /* enum cq_resource_kind */
  unsigned flags;         /* enum cq_budget_flags */
  int64_t capacity;       /* units (device pools: online devices x 1000) */
  int64_t in_use;         /* held by grants */
  int64_t withheld;       /* free, but set aside: for a budget's claimant; on
                             a device pool, what reserved devices have free */
  int64_t peak;           /* highest in_use seen */
  uint64_t waiting;       /* waiting requests that name it */
  uint64_t grants;        /* grants that included it, ever */
  uint64_t timeouts;      /* waiters that named it and timed out, ever */
  uint64_t cancellations; /* waiters that named it and were cancelled */
  cq_wait_stats wait;
  uint32_t devices; /* device pools: devices, and of which online */
  uint32_t online;
  uint64_t reserved_[8];
} cq_resource_stats;

/* Snapshot of resource `name`. Thread-safe; takes the pool lock briefly;
 * callable from a callback. Returns 0, CQ_EINVAL or CQ_ENOENT. */
CQ_EXPORT int cq_resource_stats_get(cq_pool *pool, const char *name,
                                    cq_resource_stats *out);

/*
 * Snapshot of every resource, in resource order, all taken at one moment:
 * fills up to `cap` entries and sets *count to how many there are (which
 * may exceed `cap`). Thread-safe; takes the pool lock briefly; callable
 * from a callback. Returns 0, CQ_EINVAL or CQ_ENOMEM (more than 64
 * resources, and their list could not be allocated).
 */
CQ_EXPORT int cq_pool_snapshot(cq_pool *pool, cq_resource_stats *out,
                               size_t cap, size_t *count);

/* ------------------------------------------------------------------------ */
/* Device pools                                                              */
/* ------------------------------------------------------------------------ */

/*
 * A device pool is a named set of N devices (GPUs, accelerators). Each device
 * has a capacity of exactly one device, counted in thousandths: a request
 * asks either a fraction f of one device (1..CQ_DEVICE_MILLI thousandths,
 * never spanning two devices) or n whole devices. Admission is decided per
 * device, never on the sum. Device pools come first in the resource order.
 */
#define CQ_DEVICE_MILLI 1000

/* Most devices in one pool, and the longest device id (bytes, no NUL). */
#define CQ_DEVICES_MAX 65536
#define CQ_DEVICE_ID_MAX 95

/*
 * Add a device pool of `count` devices (0 allowed: every request on it then
 * fails as never satisfiable). `ids` gives each device's physical id or UUID,
 * as CUDA_VISIBLE_DEVICES should name it (e.g. "0", "GPU-8e0c..."); NULL
 * names them "0".."count-1". The ids are copied. Thread-safe; takes the
 * pool lock briefly; callable from a callback.
 * Returns 0, CQ_EINVAL (bad name; an id empty, too long, with a comma, '=',
 * a blank, a control or a non-ASCII byte, or given to two devices),
 * CQ_ERANGE (count above CQ_DEVICES_MAX), CQ_EEXIST, CQ_ETOOMANY (as
 * cq_budget_add()) or CQ_ENOMEM.
 */
CQ_EXPORT int cq_devices_add(cq_pool *pool, const char *name, size_t count,
                             const char *const *ids);

/*
 * Parse a device amount for configuration and command lines: "0.25" is 250
 * thousandths, "2" or "2.0" is 2000 (two whole devices). At most three
 * decimals: a finer fraction is refused (CQ_ERANGE), never rounded to 0.
 * Thread-safe; never blocks; callable from a callback.
 * Returns 0, CQ_EINVAL (NULL), CQ_EPARSE (not a decimal number) or
 * CQ_ERANGE (zero, negative, finer than 1/1000, or too large).
 */
CQ_EXPORT int cq_device_amount_parse(const char *text, int64_t *milli);

/* A snapshot of one device. */
typedef struct cq_device_stats {
  char id[CQ_DEVICE_ID_MAX + 1]; /* physical id or UUID */
  uint32_t index;                /* position in the pool, 0-based */
  int online;                    /* takes new work */
  int whole;                     /* held whole by one grant */
  int reserved;                  /* reserved by a waiter */
  int64_t used_milli;            /* thousandths held */
  int64_t peak_milli;            /* highest used_milli seen */
  uint64_t grants;               /* grants placed on this device, ever */
  uint64_t reserved_[4];
} cq_device_stats;

/* Fill *out for device `index` of pool `name`. Thread-safe; takes the pool
 * lock briefly; callable from a callback.
 * Returns 0, CQ_EINVAL or CQ_ENOENT (no such pool or device). */
CQ_EXPORT int cq_device_stats_get(cq_pool *pool, const char *name,
                                  uint32_t index, cq_device_stats *out);

/*
 * Take device `index` offline (online = 0): it takes no new work, and its
 * holders keep it until they release. Waiters that can then never fit (more
 * whole devices than remain online, or any request when none does) fail
 * with CQ_ENEVER. Bringing it back online grants the waiters that now fit.
 * Thread-safe; takes the pool lock briefly; runs callbacks; callable from a
 * callback. Returns 0, CQ_EINVAL or CQ_ENOENT.
 */
CQ_EXPORT int cq_device_set_online(cq_pool *pool, const char *name,
                                   uint32_t index, int online);

/* ------------------------------------------------------------------------ */
/* GPU detection                                                             */
/* ------------------------------------------------------------------------ */

/* Options of cq_gpu_detect(); zero means default. */
typedef struct cq_detect_opts {
  /* The command to run as `<nvidia_smi> -L`. NULL: $CRONOQ_NVIDIA_SMI if it
   * is set and not empty; else, and for "", "nvidia-smi" (looked up in
   * PATH). */
  const char *nvidia_smi;
  int64_t timeout_ms;        /* for the command; 0: 5000 */
  const cq_allocator *alloc; /* NULL: malloc/realloc/free */
  uint64_t reserved_[4];     /* must be zero */
} cq_detect_opts;

#define CQ_DETECT_OPTS_INIT CQ_ZERO_INIT_

/* What detection found: `count` device ids, and where they came from. */
typedef struct cq_gpu_list {
  size_t count;
  char **ids;          /* count ids, owned by the list */
  const char *source;  /* "CRONOQ_NUM_GPUS", "CUDA_VISIBLE_DEVICES",
                          "nvidia-smi" or "none" */
  char error[160];     /* why detection failed, naming the variable or the
                          command and the offending text */
  cq_allocator alloc_; /* private */
  size_t cap_;         /* private */
} cq_gpu_list;

/*
 * Find this machine's GPUs, first match wins:
 * 1. CRONOQ_NUM_GPUS, an explicit count: ids "0".."n-1";
 * 2. CUDA_VISIBLE_DEVICES: its comma-separated entries, indices or UUIDs,
 *    become the ids (whitespace around entries is ignored; an empty value
 *    means no GPUs);
 * 3. the output of `nvidia-smi -L`, run with a timeout: the GPUs' UUIDs
 *    (or their indices where a line has no UUID).
 * No GPU found is a list of 0. A missing, failing or hung nvidia-smi means no
 * GPUs, not an error. Free the list with cq_gpu_list_free() in every case.
 * May block: step 3 starts nvidia-smi as a child process and waits for its
 * output and its exit for up to opts->timeout_ms (5 s by default), then
 * kills it (SIGKILL) and waits at most 0.5 s more for it to end, so the
 * call returns after about opts->timeout_ms + 0.5 s at most. A child that
 * outlives its kill longer (one stuck in a driver call ends only when the
 * call returns) is left behind, a zombie once it ends until the process
 * reaps it.
 * Processes that other threads start meanwhile inherit no end of the pipe
 * from the child (it is close-on-exec), so they cannot hold detection up.
 * Detection waits for its child by its pid, so in a process that reaps
 * every child (SIGCHLD ignored, or waitpid(-1)) step 3 finds nothing.
 * Thread-safe, except against a thread that changes the environment (it
 * reads it with getenv()); it touches no pool. Not callable from a
 * callback, since it may block.
 * Returns 0, CQ_EPARSE (an unparsable variable or output; see out->error),
 * CQ_EINVAL (NULL out, incomplete allocator, a reserved field not zero) or
 * CQ_ENOMEM.
 */
CQ_EXPORT int cq_gpu_detect(cq_gpu_list *out, const cq_detect_opts *opts);

/* Free what cq_gpu_detect() allocated; the list becomes empty. Thread-safe
 * for distinct lists; never blocks; callable from a callback. */
CQ_EXPORT void cq_gpu_list_free(cq_gpu_list *list);

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

/* Most resources one request can name. */
#define CQ_REQ_MAX_ITEMS 16

/*
 * A request: a set of (resource, amount) pairs for one pool. It is built once
 * and reused for any number of attempts, also by several threads at once.
 * The caller owns the storage (embed it, put it on the stack); the library
 * never allocates for it, so it needs no destroy call. It must stay valid
 * and unchanged while an attempt made with it is waiting.
 */
typedef struct cq_req {
  void *data; /* for the caller */
  uint64_t cq_private[127];
} cq_req; /* 1 KiB */

/*
 * Make `req` an empty request on `pool`. An empty request is always granted
 * at once and holds nothing. It touches only `req`: not thread-safe against
 * other uses of it (see the end of this header); never blocks; callable
 * from a callback. Returns 0 or CQ_EINVAL.
 */
CQ_EXPORT int cq_req_init(cq_req *req, cq_pool *pool);

/*
 * Add `amount` units of budget `resource` to the request. The name, the
 * amount's sign and duplicates are checked now; whether the amount fits the
 * capacity is checked by every acquire, since capacities can change (a
 * request larger than its budget then fails at once with CQ_ENEVER, its
 * message naming resource, amount and capacity). On failure the request is
 * unchanged and cq_req_error() says why. Not thread-safe against other uses
 * of the same request (attempts with it, other changes; see the end of this
 * header); takes the pool lock briefly, to look the name up; callable from
 * a callback.
 * Returns 0, CQ_EINVAL (NULL, not initialised, a device pool or a class),
 * CQ_ENOENT (no such resource), CQ_ERANGE (amount zero or negative),
 * CQ_EEXIST (the request already names it) or CQ_ETOOMANY.
 */
CQ_EXPORT int cq_req_add(cq_req *req, const char *resource, int64_t amount);

/*
 * Add a fraction of one device of pool `resource`: `milli` thousandths,
 * 1..CQ_DEVICE_MILLI. The grant holds it on one device, chosen best-fit.
 * Not thread-safe against other uses of `req`; takes the pool lock briefly;
 * callable from a callback.
 * Returns as cq_req_add(); CQ_ERANGE for a fraction out of range. (An
 * acquire fails with CQ_ENEVER while the pool has no device online.)
 */
CQ_EXPORT int cq_req_add_fraction(cq_req *req, const char *resource,
                                  int64_t milli);

/*
 * Add `count` whole devices of pool `resource`, all or nothing: nothing is
 * held while the request waits. Not thread-safe against other uses of
 * `req`; takes the pool lock briefly; callable from a callback.
 * Returns as cq_req_add(). (An acquire fails with CQ_ENEVER while the pool
 * has fewer devices online: `request asks 3 devices of gpu but it has 2`.)
 */
CQ_EXPORT int cq_req_add_devices(cq_req *req, const char *resource,
                                 int64_t count);

/*
 * Add an amount given as text, for configuration and command lines: units
 * of a budget ("10"), or for a device pool a fraction ("0.5") or whole
 * devices ("2"); "1.5" is not a valid amount of a device pool. Not
 * thread-safe against other uses of `req`; takes the pool lock briefly;
 * callable from a callback. Returns as the calls above, or CQ_EPARSE.
 */
CQ_EXPORT int cq_req_add_str(cq_req *req, const char *resource,
                             const char *amount);

/*
 * Give the request a class (see cq_class_add()): each grant of it counts as
 * one worker of the class. Not thread-safe against other uses of `req`;
 * takes the pool lock briefly; callable from a callback.
 * Returns as cq_req_add(); CQ_EINVAL if `name` is not a class.
 */
CQ_EXPORT int cq_req_set_class(cq_req *req, const char *name);

/*
 * Declare a hold limit: every grant of this request is released within
 * `limit_ms` milliseconds of being granted (the host enforces it, e.g. as
 * the attempt's timeout). 0 removes the limit. A grant that outlives its
 * limit keeps its units; it raises CQ_EVENT_OVERDUE and is counted in
 * cq_pool_stats.overdue. With CQ_POOL_BACKFILL the limit lets the request
 * backfill. Requests with a limit always take the pool lock (their grants
 * are kept in order of their ends). Not thread-safe against other uses of
 * `req`; never blocks; callable from a callback.
 * Returns 0, CQ_EINVAL (uninitialised request) or CQ_ERANGE (negative, or
 * above 2^53 ms).
 */
CQ_EXPORT int cq_req_set_hold_limit(cq_req *req, int64_t limit_ms);

/*
 * Add the items of a request spec, for command lines and configuration:
 * `gpu=0.5,warehouse-db=1,class=predict`. Each item is `resource=amount`
 * (see cq_req_add_str()) or `class=name`; blanks around items and `=` are
 * allowed. A resource name may carry one '@' with a word on each side,
 * `gpu@hostB=0.5`: another host's device pool on a fleet pool (the pool
 * decides whether the name exists). All or nothing: on failure the request
 * is unchanged and cq_req_error() points at the offending character, e.g.
 * `request spec: expected '=' after "gpu" at column 4`. Not thread-safe
 * against other uses of `req` (it writes the whole request back); takes
 * the pool lock briefly, per item; callable from a callback.
 * Returns 0, CQ_EPARSE, or an error of the cq_req_add*() calls.
 */
CQ_EXPORT int cq_req_parse(cq_req *req, const char *spec);

/* Number of resources the request names. Not thread-safe against changes
 * of `req` (attempts with it are fine); never blocks; callable from a
 * callback. */
CQ_EXPORT size_t cq_req_count(const cq_req *req);

/* Why the last call that changed `req` failed (cq_req_add*(),
 * cq_req_set_class(), cq_req_set_hold_limit(), cq_req_parse()); "" when it
 * succeeded. Not thread-safe against changes of `req`; never blocks;
 * callable from a callback. */
CQ_EXPORT const char *cq_req_error(const cq_req *req);

/* ------------------------------------------------------------------------ */
/* Grants                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * A grant: one attempt at a request and, once granted, the units it holds.
 * The caller owns the storage. Zero it or call cq_grant_init() before first
 * use; it can be reused for a new attempt once released or finished. While
 * an attempt waits or holds units the storage must stay where it is.
 */
typedef struct cq_grant {
  void *data; /* for the caller */
  uint64_t cq_private[255];
} cq_grant; /* 2 KiB */

/* sizeof(cq_req) and sizeof(cq_grant) as the library was built, for
 * bindings that allocate them. Thread-safe; never block; callable from a
 * callback. */
CQ_EXPORT size_t cq_req_size(void);
CQ_EXPORT size_t cq_grant_size(void);

/*
 * Callback of cq_grant_submit(). `status` is 0 when granted (the grant now
 * holds the units and must be released), or CQ_ETIMEDOUT, CQ_ECANCELED,
 * CQ_ECLOSED or CQ_ENEVER (a capacity shrank below the request), in which
 * case nothing is held. It runs exactly once, with no library lock held, on
 * whichever thread completed the attempt: the submitting thread, a thread
 * whose call decided it (a release, a cancel, a close, a capacity or
 * device change, cq_pool_expire()), or the pool's timer thread. It may
 * release, cancel, or submit again (the same grant included); it must not
 * block in cq_grant_acquire() or anything else, nor destroy the pool.
 */
typedef void (*cq_grant_cb)(cq_grant *grant, int status);

/* Reset `grant` to the idle state. Never on a waiting or held grant (see
 * the end of this header). It touches only `grant`; never blocks; callable
 * from a callback. */
CQ_EXPORT void cq_grant_init(cq_grant *grant);

/*
 * Try to acquire `req` without waiting. Either everything is granted at
 * once (returns 0; release it later) or nothing: CQ_EBUSY when the units are
 * not free, or are withheld for an older waiter (a try never overtakes a
 * waiter that has claimed what it needs). Thread-safe; never waits for
 * units: lock-free when it can, else takes the pool lock briefly; runs
 * callbacks (a lock-free try that fails midway gives units back, which may
 * grant a waiter); callable from a callback.
 * Returns 0, CQ_EBUSY, CQ_ENEVER (details in cq_grant_error()), CQ_ENOENT
 * (a resource was removed), CQ_ECLOSED, CQ_EPOOL, CQ_ESTATE (grant in use:
 * it waits or holds, in this pool or in another one, which keeps it) or
 * CQ_EINVAL.
 */
CQ_EXPORT int cq_grant_try(cq_pool *pool, cq_grant *grant, const cq_req *req);

/*
 * Acquire `req`, waiting until it is granted or `deadline_ms` passes
 * (absolute, on the pool's clock; CQ_NEVER to wait without limit, a past
 * deadline for one attempt without waiting). The waiting request can be
 * cancelled from another thread with cq_grant_cancel(). Thread-safe. May
 * block until it is granted, the deadline passes (with
 * CQ_POOL_MANUAL_TIMERS, only cq_pool_expire() passes it), it is cancelled,
 * the pool closes or a capacity shrinks below it; it sleeps on its
 * thread's own parker, holding no lock. For its first T of waiting (the
 * pool's barging window, see CQ_BARGE_DEFAULT_MS) it claims nothing and may
 * be overtaken; then it claims its place by arrival. Lock-free when it
 * can, else takes the pool lock briefly; runs callbacks. Not callable from
 * a callback.
 * Returns 0 (granted), CQ_ETIMEDOUT, CQ_ECANCELED, CQ_ECLOSED, CQ_ENEVER,
 * CQ_ENOENT, CQ_EPOOL, CQ_ESTATE, CQ_EINVAL or CQ_ENOMEM (the thread's
 * parker could not be made).
 */
CQ_EXPORT int cq_grant_acquire(cq_pool *pool, cq_grant *grant,
                               const cq_req *req, int64_t deadline_ms);

/*
 * Acquire `req` without blocking the caller: returns at once, and `cb` runs
 * exactly once with the outcome (see cq_grant_cb), possibly before this
 * returns when the request fits at once. If this returns < 0 the callback
 * never runs and nothing changed. Thread-safe; never waits for units:
 * lock-free when it can, else takes the pool lock briefly; may start the
 * pool's timer thread; runs callbacks (this one's included); callable from
 * a callback.
 * Returns 0, CQ_ENEVER, CQ_ENOENT, CQ_ECLOSED, CQ_EPOOL, CQ_ESTATE, CQ_EINVAL
 * or CQ_ESYS (the timer thread could not be started).
 */
CQ_EXPORT int cq_grant_submit(cq_pool *pool, cq_grant *grant, const cq_req *req,
                              int64_t deadline_ms, cq_grant_cb cb);

/*
 * Cancel a waiting attempt. If it still waits it ends with CQ_ECANCELED: a
 * blocked cq_grant_acquire() returns that, or the callback runs with it on
 * this thread (see "Runs callbacks" at the top), and nothing is held. An
 * attempt already decided is left as it is. Thread-safe, also against the
 * grant's owner; takes the pool lock briefly; runs callbacks; callable from
 * a callback.
 * Returns 0 when it cancelled, CQ_ESTATE when the grant was not waiting
 * (already granted, finished or never started), CQ_EPOOL or CQ_EINVAL.
 */
CQ_EXPORT int cq_grant_cancel(cq_pool *pool, cq_grant *grant);

/*
 * End a waiting attempt with `status`: CQ_ECANCELED (as cq_grant_cancel()),
 * CQ_ETIMEDOUT or CQ_ECLOSED. For hosts that keep their own timers or
 * close their own part of a pool, such as the libuv adapter. Same rules and
 * returns as cq_grant_cancel(), and CQ_EINVAL for another status.
 * Thread-safe, also against the grant's owner; takes the pool lock briefly;
 * runs callbacks; callable from a callback.
 */
CQ_EXPORT int cq_grant_abort(cq_pool *pool, cq_grant *grant, int status);

/*
 * Release a held grant: every unit it holds returns to the pool at once and
 * the waiters that now fit are granted. Releasing twice, or into another
 * pool, is refused and changes nothing. Thread-safe, one call per grant
 * at a time (see the end of this header); lock-free when it can, else takes
 * the pool lock briefly; runs callbacks (of the waiters it granted);
 * callable from a callback.
 * Returns 0, CQ_ESTATE (not held), CQ_EPOOL or CQ_EINVAL.
 */
CQ_EXPORT int cq_grant_release(cq_pool *pool, cq_grant *grant);

/*
 * Return part of a held grant early: `amount` units of budget `resource`.
 * The grant keeps the rest, and cq_grant_release() later returns only that.
 * It stays held, also when it comes to hold nothing. A lone grant (see
 * CQ_BUDGET_LONE) keeps its budget to itself until it is released.
 * Thread-safe, one call per grant at a time; takes the pool lock briefly;
 * runs callbacks; callable from a callback.
 * Returns 0, CQ_ESTATE (not held), CQ_ENOENT (the grant holds no such
 * resource), CQ_ERANGE (amount not in 1..held), CQ_EPOOL or CQ_EINVAL
 * (also for a device pool: see cq_grant_release_device()).
 */
CQ_EXPORT int cq_grant_release_part(cq_pool *pool, cq_grant *grant,
                                    const char *resource, int64_t amount);

/*
 * Return part of a held device grant early: `milli` thousandths on device
 * `index` (a fraction grant's device), or a whole device (milli =
 * CQ_DEVICE_MILLI) of a whole-device grant. Thread-safe, one call per
 * grant at a time; takes the pool lock briefly; runs callbacks; callable
 * from a callback.
 * Returns 0, CQ_ESTATE, CQ_EPOOL, CQ_EINVAL, CQ_ENOENT (no such device, or
 * the grant holds nothing there) or CQ_ERANGE (more than held, or part of a
 * whole device).
 */
CQ_EXPORT int cq_grant_release_device(cq_pool *pool, cq_grant *grant,
                                      const char *resource, uint32_t index,
                                      int64_t milli);

/*
 * The devices a held grant has on pool `resource` (NULL: the first device
 * pool it names): up to `cap` indices into `indices`, lowest first.
 * Thread-safe, but not against a release of the grant or a new attempt
 * with it; takes the pool lock briefly; callable from a callback.
 * Returns how many it holds (which may exceed `cap`), 0 if none.
 */
CQ_EXPORT size_t cq_grant_devices(const cq_grant *grant, const char *resource,
                                  uint32_t *indices, size_t cap);

/*
 * Format the value of CUDA_VISIBLE_DEVICES for a held grant's devices on
 * pool `resource` (NULL: the first device pool it names): their ids, comma
 * separated, as the pool was created with. Thread-safe, but not against a
 * release of the grant or a new attempt with it; takes the pool lock
 * briefly; callable from a callback.
 * Returns 0, CQ_ENOENT (no devices held there), CQ_ERANGE (buffer too small;
 * it holds "") or CQ_EINVAL.
 */
CQ_EXPORT int cq_grant_cuda_visible(const cq_grant *grant, const char *resource,
                                    char *buf, size_t len);

/* Units of `resource` the grant holds now (thousandths for a device pool);
 * 0 if none or not held. Thread-safe, but not against a release of the
 * grant or a new attempt with it; takes the pool lock briefly; callable
 * from a callback. */
CQ_EXPORT int64_t cq_grant_held(const cq_grant *grant, const char *resource);

/* Whether the grant is held (1), also when it gave every unit back early or
 * its request was empty, or not (0). Thread-safe; never blocks; callable
 * from a callback. */
CQ_EXPORT int cq_grant_is_held(const cq_grant *grant);

/*
 * The detail of the last failed attempt with this grant, such as
 * `request asks warehouse-db:12 but its capacity is 10`; "" if none. Not
 * thread-safe against an attempt with the same grant (it reads the message
 * without a lock); never blocks; callable from a callback.
 */
CQ_EXPORT const char *cq_grant_error(const cq_grant *grant);

/* ------------------------------------------------------------------------ */
/* For host schedulers                                                       */
/* ------------------------------------------------------------------------ */

/*
 * Headroom: how many more copies of `req` could be granted right now, one
 * after another, counting class caps and what is withheld or reserved for
 * waiters. A host uses it to decide how many workers to start. *copies is
 * INT64_MAX for an empty request. Thread-safe; takes the pool lock briefly;
 * callable from a callback.
 * Returns 0, CQ_EINVAL, CQ_EPOOL, CQ_ENOENT (a resource was removed) or
 * CQ_ENEVER (the request can never fit; *copies is 0).
 */
CQ_EXPORT int cq_req_headroom(cq_pool *pool, const cq_req *req,
                              int64_t *copies);

/* A task of a pipeline: its name and its request. */
typedef struct cq_task {
  const char *name;
  const cq_req *req;
} cq_task;

/* Called by cq_tasks_validate() for each problem found. */
typedef void (*cq_problem_fn)(size_t task, int err, const char *message,
                              void *arg);

/*
 * Startup validation of a whole set of tasks: reports every request that can
 * never fit, each with a message naming the task and the resource, e.g.
 * `task "predict" requires gpu:8 but the pool only has 1`. It does not stop
 * at the first problem. `fn` runs on the calling thread with no lock held,
 * so it may call the library. Thread-safe; takes the pool lock briefly,
 * once per task; callable from a callback.
 * Returns 0 when every task can run, CQ_ENEVER (or CQ_ENOENT, CQ_EPOOL for
 * the first such problem) otherwise, or CQ_EINVAL.
 */
CQ_EXPORT int cq_tasks_validate(cq_pool *pool, const cq_task *tasks, size_t n,
                                cq_problem_fn fn, void *arg);

/* How much room there is for one more job, for pull-based runners. */
enum cq_room_kind {
  CQ_ROOM_NONE = 0,       /* no job can start now */
  CQ_ROOM_LIMITED = 1,    /* a job fits within the amounts listed */
  CQ_ROOM_EVERYTHING = 2, /* the pool is idle and every budget allows a lone
                             request: any job fits, however large */
  CQ_ROOM_UNLIMITED = 3   /* no resource limits jobs (only a job cap, which
                             is not reached) */
};

#define CQ_ROOM_MAX 32

typedef struct cq_room {
  int kind; /* enum cq_room_kind */
  size_t count;
  struct {
    char name[CQ_NAME_MAX + 1];
    int64_t units; /* open units after reservations (devices: thousandths
                      free on devices not reserved) */
    int64_t largest_milli; /* device pools: the largest fraction that fits */
    uint32_t whole;        /* device pools: entirely free devices */
  } items[CQ_ROOM_MAX];    /* budgets and device pools, resource order */
} cq_room;

/*
 * Room query: what is free for a new job, per budget and device pool,
 * after reservations. `job_class` (may be NULL) is the class that caps the
 * number of jobs; when it is at its cap the room is CQ_ROOM_NONE, as it is
 * when any budget has nothing open. Thread-safe; takes the pool lock
 * briefly; callable from a callback.
 * Returns 0, CQ_EINVAL or CQ_ENOENT (no such class).
 */
CQ_EXPORT int cq_pool_room(cq_pool *pool, const char *job_class, cq_room *out);

/*
 * Declare resources from one string, for command lines and environment
 * variables: `gpu=auto,warehouse-db=10,memory_mib=24576,license=3`.
 * - `gpu=auto` adds a device pool from GPU detection (cq_gpu_detect() with
 *   `detect`, which may be NULL); `gpu=4` adds 4 devices. `gpu` is a device
 *   pool; another name is one with the option `:devices` (`tpu:devices=8`).
 * - Other names are budgets; `name:lone=N` turns on the lone-request
 *   allowance.
 * - `name:class=N` adds a class of N workers.
 * All or nothing: on failure nothing is added and `err` (may be NULL) says
 * what and where, e.g. `resource spec: expected '=' after "warehouse-db" at
 * column 13`; the one exception is a resource it added that another thread
 * began to use before this call failed: that one stays. On a pool shared
 * with other processes (a fleet pool, <cronoq/cronoq_fleet.h>) a name the
 * pool has may be declared again: a matching item is accepted and changes
 * nothing, a conflicting one fails with CQ_EEXIST, and the items declared
 * before a failing one stay, as another process may use them already
 * (the syntax is still checked whole first). Thread-safe; takes
 * the pool lock briefly, per item. With `gpu=auto` it may block in
 * cq_gpu_detect() and is then not callable from a callback; otherwise it
 * is.
 * Returns 0, CQ_EPARSE, CQ_EEXIST (a name is taken or repeated), CQ_ERANGE,
 * CQ_ENOMEM, CQ_ETOOMANY (the pool's table is full) or CQ_EINVAL.
 */
CQ_EXPORT int cq_pool_add_spec(cq_pool *pool, const char *spec,
                               const cq_detect_opts *detect, char *err,
                               size_t err_len);

/* Receives text from cq_pool_write_metrics(); a non-zero return stops it. */
typedef int (*cq_write_fn)(const char *text, size_t len, void *arg);

/*
 * Write a snapshot of the whole pool in the Prometheus text exposition
 * format (version 0.0.4). A host serves it on its metrics endpoint. Every
 * figure of cq_pool_stats (cronoq_pool_<name>), of cq_resource_stats
 * (cronoq_<name> with label `resource`, and cronoq_class_<name> with label
 * `class` for classes) and of cq_device_stats (cronoq_device_<name> with
 * labels `resource` and `device`) is exported, counters with _total;
 * waiting times are the histogram cronoq_wait_seconds (and
 * cronoq_class_wait_seconds), with buckets at powers of four of a
 * millisecond whose counts are exact, so that the scrapes of several
 * processes add up; cronoq_build_info{version,abi} is 1. A pool served by
 * a backend adds figures of its own (a fleet pool: the counters of
 * cq_fleet_stats, cronoq_fleet_<name>_total). On an in-process pool the
 * snapshot is taken at one moment; `write` is called after, on the
 * calling thread without the lock, so it may call the library.
 * Thread-safe; takes the pool lock briefly, and allocates the snapshot
 * under it; callable from a callback.
 * Returns 0, CQ_EINVAL, CQ_ENOMEM, or what `write` returned when it stopped.
 */
CQ_EXPORT int cq_pool_write_metrics(cq_pool *pool, cq_write_fn write,
                                    void *arg);

/* ------------------------------------------------------------------------ */
/* What stays undefined behaviour, and why                                  */
/* ------------------------------------------------------------------------ */

/*
 * Every misuse that the library can detect cheaply returns an error and
 * changes nothing (tests/test_misuse.c tries each one). The library cannot
 * detect the misuses below. Each would need a handle table or a reference
 * count checked on every call, or a lock on the lock-free paths. Their
 * behaviour is undefined: a crash, a lost or doubled unit, a hang.
 *
 * - Using a pool after cq_pool_destroy(). This includes requests and
 *   grants bound to it: they point into the pool (its resources, its
 *   lock).
 * - Destroying a pool while another thread is inside any call on it. A
 *   pool with nothing held and no waiter can still be in use: a thread may
 *   be blocked on its lock, or finishing a lock-free release (the units go
 *   back first; the pool lock is taken after that, to wake a waiter that
 *   may have left meanwhile). The event hook must not destroy the pool
 *   either: the thread delivering events takes the pool lock again after
 *   each one. (A destroy from the pool's own timer thread is detected and
 *   refused with CQ_ESTATE.)
 * - Freeing, moving, copying or re-initialising (cq_grant_init(),
 *   cq_uv_req_init()) a grant while its attempt waits or holds units. A
 *   waiting grant is a node in the pool's queue and trees. A copy of a held
 *   grant passes the held check too, so releasing the copy and the original
 *   returns the units twice. Likewise for a cq_uv_req from cq_uv_acquire()
 *   until its callback has run and, once granted, until it is released.
 * - Freeing or changing a request while an attempt made with it waits: the
 *   waiter reads its items. Once the attempt is granted or has finished,
 *   the request may go.
 * - Changing one cq_req from two threads at once, or while an attempt uses
 *   it (cq_req_add*(), cq_req_set_class(), cq_req_parse(),
 *   cq_req_set_hold_limit(), cq_req_init()). Lock-free attempts read the
 *   items without a lock, and cq_req_parse() writes the whole request back.
 *   Many threads may acquire with the same request once it is built.
 * - Passing one grant to two calls at once: two acquires, two releases, or
 *   a release and a cq_grant_release_part(). The lock-free paths check the
 *   grant's state and change it in two steps, so two concurrent releases
 *   can both succeed and return the units twice. "Releasing twice is
 *   refused" holds for releases that happen one after the other.
 *   cq_grant_cancel() and cq_grant_abort() are the exception: they may race
 *   with the grant from any thread.
 * - A request or grant that was neither zeroed nor initialised. The check
 *   is a magic number or a state byte, so storage that was never set can
 *   pass it.
 * - Calling cq_grant_acquire(), or anything else that blocks, from a grant
 *   callback or the event hook. The callback may run on the pool's timer
 *   thread, and then no deadline of the pool passes while it blocks. It may
 *   also run on a thread that queues the callbacks it triggers behind the
 *   current one, so a wait for units that one of those would release never
 *   ends. On a libuv loop the loop itself stops.
 * - Allocator hooks that are not thread-safe, when the pool is used from
 *   several threads. The hooks run on whichever thread adds a resource,
 *   takes a large snapshot, writes metrics or detects GPUs, sometimes with
 *   the pool lock held: they must not call libcronoq on the same pool (the
 *   lock is not recursive). They must return memory aligned as malloc()'s.
 * - Calling the libuv adapter's cq_uv_init(), cq_uv_acquire() or
 *   cq_uv_close() off the loop's thread (its pending list and timer have no
 *   lock), or using a cq_uv after its close callback has run. cq_uv_cancel()
 *   and cq_uv_release() may be called from any thread, except that a
 *   cq_uv_req acquired again through an adapter of another pool must not be
 *   cancelled meanwhile from another thread: the cancel may reach the old
 *   pool while the new one binds the grant.
 * - Calling any function of the library from a signal handler: the pool
 *   lock is a mutex, which is not async-signal-safe.
 */

#ifdef __cplusplus
}
#endif

#endif /* CRONOQ_CRONOQ_H */
