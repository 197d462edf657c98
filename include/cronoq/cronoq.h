/*
 * libcronoq: multi-resource admission control.
 *
 * This header is the reference for the core API. Every declaration says what
 * it does, who owns what, whether it is thread-safe, may block, or may be
 * called from a grant callback, and which error codes it returns.
 *
 * The model in one paragraph: a *pool* holds named resources: integer
 * *budgets* and *device pools* (N devices, each shared in exact fractions or
 * taken whole). A *request* names several resources and an amount of each;
 * it is built once and reused. Acquiring a request fills a
 * caller-owned *grant* with all the units at once, or with none. A request
 * that does not fit waits in the pool's FIFO-with-reservation queue (the
 * README states the rule precisely). Releasing the grant returns every unit,
 * exactly once.
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

/* The version the library was built as, "MAJOR.MINOR.PATCH". Thread-safe. */
CQ_EXPORT const char *cq_version_string(void);

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
  XX(EPARSE, -16, "text could not be parsed")

enum cq_errno {
#define CQ_ERRNO_ENUM_(name, value, msg) CQ_##name = (value),
  CQ_ERRNO_MAP(CQ_ERRNO_ENUM_)
#undef CQ_ERRNO_ENUM_
      CQ_ERRNO_MIN_ = -16
};

/* A message for an error code; a fixed string for unknown codes. Thread-safe.
 */
CQ_EXPORT const char *cq_strerror(int err);

/* The code's name without the CQ_ prefix ("EBUSY"); "UNKNOWN" for unknown
 * codes and "OK" for 0. Thread-safe. */
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
 * Thread-safe.
 */
CQ_EXPORT int64_t cq_now(void);

/* ------------------------------------------------------------------------ */
/* Pool                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct cq_pool cq_pool;

/*
 * Allocator hooks: all three functions or none. `arg` is passed through.
 * The library allocates only when the pool and its resources are created or
 * changed, never on the acquire and release paths.
 */
typedef struct cq_allocator {
  void *(*alloc)(size_t size, void *arg);
  void *(*realloc)(void *ptr, size_t size, void *arg);
  void (*free)(void *ptr, void *arg);
  void *arg;
} cq_allocator;

/* A pool's clock: returns the current time in milliseconds. */
typedef int64_t (*cq_clock_fn)(void *arg);

/* Pool option flags (cq_pool_config.flags). */
enum cq_pool_flags {
  /*
   * Staged claims: a waiter claims the resources it lacks one at a time, in
   * the pool's resource order, instead of all at once. See the README for
   * the trade-off; the default (0) claims everything lacking at once.
   */
  CQ_POOL_STAGED_CLAIMS = 1u << 0,
  /*
   * Manual timers: deadlines of waiting requests (blocking and callback)
   * expire only when the host calls cq_pool_expire(). No timer thread is
   * started. Required with a custom clock, useful on event loops and in
   * simulations.
   */
  CQ_POOL_MANUAL_TIMERS = 1u << 1
};

/* Pool configuration. Zero means default for every field. */
typedef struct cq_pool_config {
  unsigned flags;            /* enum cq_pool_flags, or-ed */
  const cq_allocator *alloc; /* NULL: malloc/realloc/free; copied */
  cq_clock_fn clock;         /* NULL: cq_now(); needs CQ_POOL_MANUAL_TIMERS */
  void *clock_arg;
  void *data; /* for the caller, see cq_pool_data() */
} cq_pool_config;

#define CQ_POOL_CONFIG_INIT                                                    \
  { 0u, NULL, NULL, NULL, NULL }

/*
 * Create a pool. `cfg` may be NULL for all defaults. On success *out is the
 * new pool, which the caller destroys with cq_pool_destroy().
 * Returns 0, CQ_EINVAL (NULL out, incomplete allocator, unknown flag, a clock
 * without manual timers) or CQ_ENOMEM.
 */
CQ_EXPORT int cq_pool_create(cq_pool **out, const cq_pool_config *cfg);

/*
 * Close the pool: every waiting request fails with CQ_ECLOSED (blocking
 * callers return it, callbacks run with it), and every later acquire fails
 * the same way. Holders keep their grants and must still release them.
 * Idempotent. Thread-safe. Callable from a callback. Returns 0 or CQ_EINVAL.
 */
CQ_EXPORT int cq_pool_close(cq_pool *pool);

/*
 * Destroy the pool and free everything it owns. Refused with CQ_EINUSE while
 * any grant is held or any request waits: release, cancel or close first.
 * Accepts NULL (returns 0). Not thread-safe against other calls on the same
 * pool; must not be called from a grant callback of this pool.
 */
CQ_EXPORT int cq_pool_destroy(cq_pool *pool);

/* The `data` pointer given in the configuration. */
CQ_EXPORT void *cq_pool_data(const cq_pool *pool);

/*
 * Expire waiting requests whose deadline has passed on the pool's clock and
 * report the earliest deadline still pending in *next_deadline_ms (CQ_NEVER
 * when none; may be NULL). Meant for pools with CQ_POOL_MANUAL_TIMERS; it is
 * harmless on others. Callbacks of expired requests run on the calling
 * thread before this returns. Thread-safe. Returns 0 or CQ_EINVAL.
 */
CQ_EXPORT int cq_pool_expire(cq_pool *pool, int64_t *next_deadline_ms);

/* A consistent snapshot of the pool as a whole. */
typedef struct cq_pool_stats {
  uint64_t waiting;       /* requests waiting now */
  uint64_t waited_grants; /* grants to requests that had to wait, ever */
  uint64_t wakeups;       /* blocked threads woken: one per outcome */
} cq_pool_stats;

/* Fill *out under the pool's lock. Thread-safe. Returns 0 or CQ_EINVAL. */
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
 * order they are added. Thread-safe.
 * Returns 0, CQ_EINVAL (bad name or pointer), CQ_ERANGE (capacity negative
 * or above CQ_BUDGET_MAX), CQ_EEXIST (name taken) or CQ_ENOMEM.
 */
CQ_EXPORT int cq_budget_add(cq_pool *pool, const char *name, int64_t capacity);

/* A consistent snapshot of one budget. */
typedef struct cq_budget_stats {
  int64_t capacity; /* units the budget has */
  int64_t in_use;   /* units held by grants */
  int64_t withheld; /* free units set aside for the budget's claimant */
  int64_t peak;     /* highest in_use seen */
  uint64_t waiting; /* waiting requests that ask for this budget */
  uint64_t grants;  /* grants that included this budget, ever */
} cq_budget_stats;

/*
 * Fill *out with a snapshot of budget `name`, taken under the pool's lock so
 * the figures agree with each other. Thread-safe.
 * Returns 0, CQ_EINVAL or CQ_ENOENT.
 */
CQ_EXPORT int cq_budget_stats_get(cq_pool *pool, const char *name,
                                  cq_budget_stats *out);

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
 * names them "0".."count-1". The ids are copied. Thread-safe.
 * Returns 0, CQ_EINVAL (bad name, id empty, too long or with a comma or
 * space), CQ_ERANGE (count above CQ_DEVICES_MAX), CQ_EEXIST or CQ_ENOMEM.
 */
CQ_EXPORT int cq_devices_add(cq_pool *pool, const char *name, size_t count,
                             const char *const *ids);

/*
 * Parse a device amount for configuration and command lines: "0.25" is 250
 * thousandths, "2" or "2.0" is 2000 (two whole devices). At most three
 * decimals: a finer fraction is refused (CQ_ERANGE), never rounded to 0.
 * Returns 0, CQ_EINVAL (NULL), CQ_EPARSE (not a decimal number) or
 * CQ_ERANGE (zero, negative, finer than 1/1000, or too large).
 */
CQ_EXPORT int cq_device_amount_parse(const char *text, int64_t *milli);

/* A consistent snapshot of a device pool as a whole. */
typedef struct cq_devices_stats {
  uint32_t devices;       /* devices in the pool */
  uint32_t online;        /* of which take new work */
  int64_t in_use_milli;   /* thousandths held, all devices */
  int64_t withheld_milli; /* free thousandths on devices reserved for the
                             pool's claimant */
  uint64_t waiting;       /* waiting requests that ask for this pool */
  uint64_t grants;        /* grants that included this pool, ever */
} cq_devices_stats;

CQ_EXPORT int cq_devices_stats_get(cq_pool *pool, const char *name,
                                   cq_devices_stats *out);

/* A snapshot of one device. */
typedef struct cq_device_stats {
  char id[CQ_DEVICE_ID_MAX + 1]; /* physical id or UUID */
  uint32_t index;                /* position in the pool, 0-based */
  int online;                    /* takes new work */
  int whole;                     /* held whole by one grant */
  int reserved;                  /* reserved for the pool's claimant */
  int64_t used_milli;            /* thousandths held */
  int64_t peak_milli;            /* highest used_milli seen */
  uint64_t grants;               /* grants placed on this device, ever */
} cq_device_stats;

/* Fill *out for device `index` of pool `name`. Thread-safe.
 * Returns 0, CQ_EINVAL or CQ_ENOENT (no such pool or device). */
CQ_EXPORT int cq_device_stats_get(cq_pool *pool, const char *name,
                                  uint32_t index, cq_device_stats *out);

/* ------------------------------------------------------------------------ */
/* GPU detection                                                             */
/* ------------------------------------------------------------------------ */

/* Options of cq_gpu_detect(); zero means default. */
typedef struct cq_detect_opts {
  /* The command to run as `<nvidia_smi> -L`. NULL: $CRONOQ_NVIDIA_SMI if
   * set, else "nvidia-smi" (looked up in PATH). */
  const char *nvidia_smi;
  int64_t timeout_ms;        /* for the command; 0: 5000 */
  const cq_allocator *alloc; /* NULL: malloc/realloc/free */
} cq_detect_opts;

#define CQ_DETECT_OPTS_INIT                                                    \
  { NULL, 0, NULL }

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
 * Returns 0, CQ_EPARSE (an unparsable variable or output; see out->error),
 * CQ_EINVAL or CQ_ENOMEM.
 */
CQ_EXPORT int cq_gpu_detect(cq_gpu_list *out, const cq_detect_opts *opts);

/* Free what cq_gpu_detect() allocated; the list becomes empty. */
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
  uint64_t cq_private[80];
} cq_req;

/*
 * Make `req` an empty request on `pool`. An empty request is always granted
 * at once and holds nothing. Returns 0 or CQ_EINVAL.
 */
CQ_EXPORT int cq_req_init(cq_req *req, cq_pool *pool);

/*
 * Add `amount` units of budget `resource` to the request. The amount is
 * checked against the budget now; the acquire calls check again, since
 * capacities can change. On failure the request is unchanged and
 * cq_req_error() says why, naming the resource, the amount and the capacity
 * (`request asks warehouse-db:12 but its capacity is 10`). Not thread-safe
 * against attempts using the same request.
 * Returns 0, CQ_EINVAL (NULL, not initialised), CQ_ENOENT (no such budget),
 * CQ_ERANGE (amount zero or negative), CQ_ENEVER (more than the capacity),
 * CQ_EEXIST (the request already names it) or CQ_ETOOMANY.
 */
CQ_EXPORT int cq_req_add(cq_req *req, const char *resource, int64_t amount);

/*
 * Add a fraction of one device of pool `resource`: `milli` thousandths,
 * 1..CQ_DEVICE_MILLI. The grant holds it on one device, chosen best-fit.
 * Returns as cq_req_add(); CQ_ERANGE for a fraction out of range, CQ_ENEVER
 * when the pool has no device online.
 */
CQ_EXPORT int cq_req_add_fraction(cq_req *req, const char *resource,
                                  int64_t milli);

/*
 * Add `count` whole devices of pool `resource`, all or nothing: nothing is
 * held while the request waits. Returns as cq_req_add(); CQ_ENEVER when the
 * pool has fewer devices online (`request asks 3 devices of gpu but it has
 * 2`).
 */
CQ_EXPORT int cq_req_add_devices(cq_req *req, const char *resource,
                                 int64_t count);

/*
 * Add an amount given as text, for configuration and command lines: units
 * of a budget ("10"), or for a device pool a fraction ("0.5") or whole
 * devices ("2"); "1.5" is not a valid amount of a device pool. Returns as
 * the calls above, or CQ_EPARSE.
 */
CQ_EXPORT int cq_req_add_str(cq_req *req, const char *resource,
                             const char *amount);

/* Number of resources the request names. */
CQ_EXPORT size_t cq_req_count(const cq_req *req);

/* The message of the last failed cq_req_add() on `req`; "" if none. */
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
  uint64_t cq_private[128];
} cq_grant;

/*
 * Callback of cq_grant_submit(). `status` is 0 when granted (the grant now
 * holds the units and must be released), or CQ_ETIMEDOUT, CQ_ECANCELED,
 * CQ_ECLOSED or CQ_ENEVER (a capacity shrank below the request), in which
 * case nothing is held. It runs exactly once, with no library lock held, on
 * whichever thread completed the attempt: the submitting thread, a thread
 * that released or cancelled, or the pool's timer thread. It may release,
 * cancel, or submit again (the same grant included); it must not block in
 * cq_grant_acquire() or destroy the pool.
 */
typedef void (*cq_grant_cb)(cq_grant *grant, int status);

/* Reset `grant` to the idle state. Never on a waiting or held grant. */
CQ_EXPORT void cq_grant_init(cq_grant *grant);

/*
 * Try to acquire `req` without waiting. Either everything is granted at
 * once (returns 0; release it later) or nothing: CQ_EBUSY when the units are
 * not free, or are withheld for an older waiter (a try never overtakes a
 * waiter that has claimed what it needs). Never waits, thread-safe, callable
 * from a callback.
 * Returns 0, CQ_EBUSY, CQ_ENEVER (details in cq_grant_error()), CQ_ENOENT
 * (a resource was removed), CQ_ECLOSED, CQ_EPOOL, CQ_ESTATE (grant in use) or
 * CQ_EINVAL.
 */
CQ_EXPORT int cq_grant_try(cq_pool *pool, cq_grant *grant, const cq_req *req);

/*
 * Acquire `req`, waiting until it is granted or `deadline_ms` passes
 * (absolute, on the pool's clock; CQ_NEVER to wait without limit, a past
 * deadline for one attempt without waiting). The waiting request can be
 * cancelled from another thread with cq_grant_cancel(). May block;
 * thread-safe; never call it from a callback.
 * Returns 0 (granted), CQ_ETIMEDOUT, CQ_ECANCELED, CQ_ECLOSED, CQ_ENEVER,
 * CQ_ENOENT, CQ_EPOOL, CQ_ESTATE, CQ_EINVAL or CQ_ESYS.
 */
CQ_EXPORT int cq_grant_acquire(cq_pool *pool, cq_grant *grant,
                               const cq_req *req, int64_t deadline_ms);

/*
 * Acquire `req` without blocking the caller: returns at once, and `cb` runs
 * exactly once with the outcome (see cq_grant_cb), possibly before this
 * returns when the request fits at once. If this returns < 0 the callback
 * never runs and nothing changed. Thread-safe; callable from a callback.
 * Returns 0, CQ_ENEVER, CQ_ENOENT, CQ_ECLOSED, CQ_EPOOL, CQ_ESTATE, CQ_EINVAL
 * or CQ_ESYS (the timer thread could not be started).
 */
CQ_EXPORT int cq_grant_submit(cq_pool *pool, cq_grant *grant, const cq_req *req,
                              int64_t deadline_ms, cq_grant_cb cb);

/*
 * Cancel a waiting attempt. If it still waits it ends with CQ_ECANCELED: a
 * blocked cq_grant_acquire() returns that, or the callback runs with it
 * (on this thread, before this returns). Nothing is held afterwards.
 * Thread-safe; callable from a callback.
 * Returns 0 when it cancelled, CQ_ESTATE when the grant was not waiting
 * (already granted, finished or never started), CQ_EPOOL or CQ_EINVAL.
 */
CQ_EXPORT int cq_grant_cancel(cq_pool *pool, cq_grant *grant);

/*
 * Release a held grant: every unit it holds returns to the pool at once and
 * the waiters that now fit are granted. Releasing twice, or into another
 * pool, is refused and changes nothing. Thread-safe; callable from a
 * callback; callbacks of waiters granted by this release may run on this
 * thread before it returns.
 * Returns 0, CQ_ESTATE (not held), CQ_EPOOL or CQ_EINVAL.
 */
CQ_EXPORT int cq_grant_release(cq_pool *pool, cq_grant *grant);

/*
 * Return part of a held grant early: `amount` units of budget `resource`.
 * The grant keeps the rest, and cq_grant_release() later returns only that.
 * Thread-safe; callable from a callback.
 * Returns 0, CQ_ESTATE (not held), CQ_ENOENT (the grant holds no such
 * resource), CQ_ERANGE (amount not in 1..held), CQ_EPOOL or CQ_EINVAL.
 */
CQ_EXPORT int cq_grant_release_part(cq_pool *pool, cq_grant *grant,
                                    const char *resource, int64_t amount);

/*
 * Return part of a held device grant early: `milli` thousandths on device
 * `index` (a fraction grant's device), or a whole device (milli =
 * CQ_DEVICE_MILLI) of a whole-device grant. Thread-safe.
 * Returns 0, CQ_ESTATE, CQ_EPOOL, CQ_EINVAL, CQ_ENOENT (no such device, or
 * the grant holds nothing there) or CQ_ERANGE (more than held, or part of a
 * whole device).
 */
CQ_EXPORT int cq_grant_release_device(cq_pool *pool, cq_grant *grant,
                                      const char *resource, uint32_t index,
                                      int64_t milli);

/*
 * The devices a held grant has on pool `resource` (NULL: the first device
 * pool it names): up to `cap` indices into `indices`, lowest first. Returns
 * how many it holds (which may exceed `cap`), 0 if none.
 */
CQ_EXPORT size_t cq_grant_devices(const cq_grant *grant, const char *resource,
                                  uint32_t *indices, size_t cap);

/*
 * Format the value of CUDA_VISIBLE_DEVICES for a held grant's devices on
 * pool `resource` (NULL: the first device pool it names): their ids, comma
 * separated, as the pool was created with. Returns 0, CQ_ENOENT (no devices
 * held there), CQ_ERANGE (buffer too small; it holds "") or CQ_EINVAL.
 */
CQ_EXPORT int cq_grant_cuda_visible(const cq_grant *grant, const char *resource,
                                    char *buf, size_t len);

/* Units of `resource` the grant holds now (thousandths for a device pool);
 * 0 if none or not held. */
CQ_EXPORT int64_t cq_grant_held(const cq_grant *grant, const char *resource);

/* Whether the grant holds units now (1) or not (0). */
CQ_EXPORT int cq_grant_is_held(const cq_grant *grant);

/*
 * The detail of the last failed attempt with this grant, such as
 * `request asks warehouse-db:12 but its capacity is 10`; "" if none.
 */
CQ_EXPORT const char *cq_grant_error(const cq_grant *grant);

#ifdef __cplusplus
}
#endif

#endif /* CRONOQ_CRONOQ_H */
