/*
 * libcronoq's backend interface: how a second implementation of the pool
 * plugs in behind the same public API.
 *
 * Applications never include this header. A backend library does: the
 * fleet pool (libcronoq_fleet), whose state lives in a Redis server, is one.
 * It creates a pool with cq_backend_pool_create() and a table of operations;
 * from then on every call of <cronoq/cronoq.h> on that pool, on a request
 * built for it or on a grant that attempted it, is passed to the table. The
 * specification's specification, and each function's description in cronoq.h,
 * are the contract both implementations obey: same arguments, same outcomes,
 * same error codes, the same callback rules (a callback runs exactly once
 * when the call returned 0, never when it returned < 0, with no library
 * lock held). Where a call cannot have the same meaning on a backend, the
 * backend returns the code its own header documents.
 *
 * Some calls are answered by the core for every kind of pool, on top of the
 * public API, so a backend does not implement them: cq_pool_data(),
 * cq_pool_add_spec(), cq_req_parse(), cq_req_add_str(), cq_req_add() and
 * its variants (which become req_add below), cq_req_error() and
 * cq_grant_error() (from the message in the header), cq_grant_cancel()
 * (abort with CQ_ECANCELED), cq_grant_init(), cq_pool_write_metrics()
 * (formatted from stats_get, pool_snapshot, device_stats_get and the
 * optional metrics_get), and
 * everything that takes no pool (cq_now(), errors, parsing amounts, GPU
 * detection).
 *
 * Storage. The first CQ_BACKEND_HEADER_BYTES of the private storage of a
 * cq_req and of a cq_grant belong to the core: 8 bytes of its own, the pool
 * the object was last bound to, and the message of its last failure
 * (CQ_BACKEND_MSG_MAX bytes, NUL-terminated), which the backend writes
 * through cq_backend_req_msg() and cq_backend_grant_msg(). The rest is the
 * backend's, with the sizes below. The core writes the header before it
 * passes the object on:
 * - cq_req_init() binds the request to the pool (and empties its message)
 *   before calling req_init;
 * - an acquire (try, acquire, submit) binds the grant to the pool (and
 *   empties its message) before calling the backend; a grant that still
 *   waits or holds in the pool it is bound to, of either kind, is refused
 *   with CQ_ESTATE first, and nothing changes (grant_is_idle);
 * - cq_grant_init() zeroes the whole grant, header included.
 * Calls that take only a request or a grant (cq_req_add, cq_grant_held...)
 * find the pool in the header. A grant whose header names no pool is idle
 * and answers as an idle grant without reaching any backend. A call that
 * takes a pool and a grant (a release, a partial release, an abort)
 * reaches the pool's backend only with a grant bound to that pool; a grant
 * of another pool, in-process or another backend's, is answered by the
 * core as an in-process pool answers a grant of another pool: CQ_EPOOL
 * when the grant is, where it is bound, in the state the call needs (held
 * for a release, waiting for an abort), else CQ_ESTATE. To know the state
 * of a backend's grant the core asks that grant's own backend
 * (grant_is_held, then grant_is_idle), and nothing else. The core may
 * copy a request's storage (cq_req_parse() parses into a copy and copies it
 * back on success), so a backend's request must hold no pointer into
 * itself.
 *
 * Thread-safety: the core adds no lock around a backend's operations; the
 * backend must be as thread-safe as cronoq.h says of each call.
 *
 * Copyright (c) 2026 the libcronoq authors. MIT licence, see LICENSE.
 */
#ifndef CRONOQ_CRONOQ_BACKEND_H
#define CRONOQ_CRONOQ_BACKEND_H

#include <cronoq/cronoq.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CQ_BACKEND_MSG_MAX 160
#define CQ_BACKEND_HEADER_BYTES (16 + CQ_BACKEND_MSG_MAX)

/* Bytes of a request's and of a grant's storage that a backend may use,
 * starting at cq_backend_req_area() and cq_backend_grant_area(); 8-byte
 * aligned. */
#define CQ_BACKEND_REQ_BYTES                                                   \
  (sizeof(((cq_req *)0)->cq_private) - CQ_BACKEND_HEADER_BYTES)
#define CQ_BACKEND_GRANT_BYTES                                                 \
  (sizeof(((cq_grant *)0)->cq_private) - CQ_BACKEND_HEADER_BYTES)

static inline void *cq_backend_req_area(cq_req *req) {
  return (char *)req->cq_private + CQ_BACKEND_HEADER_BYTES;
}
static inline const void *cq_backend_req_area_c(const cq_req *req) {
  return (const char *)req->cq_private + CQ_BACKEND_HEADER_BYTES;
}
static inline void *cq_backend_grant_area(cq_grant *grant) {
  return (char *)grant->cq_private + CQ_BACKEND_HEADER_BYTES;
}
static inline const void *cq_backend_grant_area_c(const cq_grant *grant) {
  return (const char *)grant->cq_private + CQ_BACKEND_HEADER_BYTES;
}

/* The message buffers of the header, CQ_BACKEND_MSG_MAX bytes each. */
static inline char *cq_backend_req_msg(cq_req *req) {
  return (char *)req->cq_private + 16;
}
static inline char *cq_backend_grant_msg(cq_grant *grant) {
  return (char *)grant->cq_private + 16;
}

/* How req_add is asked for an amount. */
enum cq_backend_mode {
  CQ_BACKEND_UNITS = 0,    /* cq_req_add(): units of a budget */
  CQ_BACKEND_FRACTION = 1, /* cq_req_add_fraction(): thousandths of a device */
  CQ_BACKEND_WHOLE = 2,    /* cq_req_add_devices(): whole devices */
  CQ_BACKEND_CLASS = 3     /* cq_req_set_class(): amount is 1 */
};

/* What a backend's pools are (cq_backend_ops.flags). */
enum cq_backend_flags {
  /*
   * The pool's state is shared with other processes (a fleet pool's
   * namespace), so its resources are declared by every process that uses
   * them: a declaration (budget_add, devices_add) that matches what the
   * pool has returns 0 and changes nothing, and one that conflicts returns
   * CQ_EEXIST. cq_pool_add_spec() then declares every item of a spec,
   * names the pool has included, and leaves what it declared before a
   * failing item in place, since another process may use it already.
   * Without the flag a spec refuses every name the pool has and undoes
   * what it added when an item fails, as on an in-process pool.
   */
  CQ_BACKEND_SHARED = 1u << 0
};

/*
 * A figure of a backend's own for cq_pool_write_metrics() (metrics_get):
 * the family cronoq_<name> (a counter: cronoq_<name>_total) with one
 * sample and no labels, after the pool's families. A backend names its
 * figures after itself ("fleet_reconnects") so that they meet no core
 * name; names are lower-case letters, digits and '_', and help texts one
 * line. The strings are the backend's and must outlive the pool.
 */
typedef struct cq_backend_metric {
  const char *name; /* after "cronoq_", without "_total" */
  const char *help;
  int counter; /* 1: a counter (never decreases), 0: a gauge */
  double value;
} cq_backend_metric;

/* The most figures of its own a backend exports. */
#define CQ_BACKEND_METRICS_MAX 32

/*
 * The operations. Each has the contract of the cronoq.h function named in
 * its comment, with the same arguments; the core has already checked that
 * the pool, request or grant pointer is not NULL, that a grant belongs to
 * this backend (a grant passed with a pool is bound to that pool; one
 * passed alone, to one of this backend's pools), and that a request passed
 * to an acquire was built for that pool. Every pointer must be set, except
 * those of the last section, the optional operations, which may be NULL.
 */
typedef struct cq_backend_ops {
  size_t size;      /* sizeof(cq_backend_ops) the backend was built with */
  const char *name; /* for messages, e.g. "fleet" */
  unsigned flags;   /* enum cq_backend_flags */

  /* Pool */
  int (*close)(cq_pool *pool);   /* cq_pool_close */
  int (*destroy)(cq_pool *pool); /* cq_pool_destroy: frees the backend's
                                    state; the core then frees the pool */
  int (*expire)(cq_pool *pool, int64_t *next_deadline_ms); /* cq_pool_expire */
  int (*stats_get)(cq_pool *pool, cq_pool_stats *out); /* cq_pool_stats_get */

  /* Resources. kind is CQ_KIND_BUDGET or CQ_KIND_CLASS. */
  int (*budget_add)(cq_pool *pool, const char *name, int64_t capacity, int kind,
                    unsigned flags); /* cq_budget_add_ex,
                                        cq_class_add */
  int (*set_capacity)(cq_pool *pool, const char *name, int64_t capacity,
                      int kind); /* cq_budget_set_capacity,
                                    cq_class_set_max */
  int (*resource_remove)(cq_pool *pool, const char *name);
  int (*resource_stats_get)(cq_pool *pool, const char *name,
                            cq_resource_stats *out);
  int (*pool_snapshot)(cq_pool *pool, cq_resource_stats *out, size_t cap,
                       size_t *count);
  int (*devices_add)(cq_pool *pool, const char *name, size_t count,
                     const char *const *ids);
  int (*device_stats_get)(cq_pool *pool, const char *name, uint32_t index,
                          cq_device_stats *out);
  int (*device_set_online)(cq_pool *pool, const char *name, uint32_t index,
                           int online);

  /* Requests */
  int (*req_init)(cq_req *req, cq_pool *pool); /* the header is written */
  int (*req_add)(cq_req *req, const char *resource, int64_t amount,
                 int mode); /* enum cq_backend_mode */
  int (*req_set_hold_limit)(cq_req *req, int64_t limit_ms);
  size_t (*req_count)(const cq_req *req);

  /* Grants */
  int (*grant_try)(cq_pool *pool, cq_grant *grant, const cq_req *req);
  int (*grant_acquire)(cq_pool *pool, cq_grant *grant, const cq_req *req,
                       int64_t deadline_ms);
  int (*grant_submit)(cq_pool *pool, cq_grant *grant, const cq_req *req,
                      int64_t deadline_ms, cq_grant_cb cb);
  int (*grant_abort)(cq_pool *pool, cq_grant *grant, int status);
  int (*grant_release)(cq_pool *pool, cq_grant *grant);
  int (*grant_release_part)(cq_pool *pool, cq_grant *grant,
                            const char *resource, int64_t amount);
  int (*grant_release_device)(cq_pool *pool, cq_grant *grant,
                              const char *resource, uint32_t index,
                              int64_t milli);
  size_t (*grant_devices)(const cq_grant *grant, const char *resource,
                          uint32_t *indices, size_t cap);
  int (*grant_cuda_visible)(const cq_grant *grant, const char *resource,
                            char *buf, size_t len);
  int64_t (*grant_held)(const cq_grant *grant, const char *resource);
  /* cq_grant_is_held; the core also asks it, then grant_is_idle, when
   * the grant is passed with another pool (see the top). */
  int (*grant_is_held)(const cq_grant *grant);
  /* Whether the grant neither waits nor holds units in this pool (as after
   * cq_grant_init(), a release, or an attempt that ended without a grant):
   * only then may an acquire, on this pool or another, bind it again. */
  int (*grant_is_idle)(const cq_grant *grant);

  /* For host schedulers */
  int (*req_headroom)(cq_pool *pool, const cq_req *req, int64_t *copies);
  int (*tasks_validate)(cq_pool *pool, const cq_task *tasks, size_t n,
                        cq_problem_fn fn, void *arg);
  int (*pool_room)(cq_pool *pool, const char *job_class, cq_room *out);

  /* Optional operations (NULL: the backend has none) */
  /* The detail of the calling thread's last failed call on `pool`, such as
   * `"licence" has capacity 2 in namespace "demo", not 3`; NULL or "" if
   * none. The core puts it into the message of a failed declaration in
   * cq_pool_add_spec(), in place of cq_strerror()'s text. A pool is shared
   * by threads, so the detail is the calling thread's (thread-local on
   * the backend's side), valid until that thread's next call. */
  const char *(*last_error)(const cq_pool *pool);
  /* The backend's own figures for cq_pool_write_metrics() (a fleet pool's
   * failures, say): at most `cap` (CQ_BACKEND_METRICS_MAX) into `out`, the
   * same ones in the same order at every call, and how many into *count.
   * Called on the thread that writes the metrics, after the pool's
   * figures were taken; it may block as the other operations do. Returns
   * 0, or a code that cq_pool_write_metrics() returns, having written
   * nothing. */
  int (*metrics_get)(cq_pool *pool, cq_backend_metric *out, size_t cap,
                     size_t *count);
} cq_backend_ops;

/*
 * Create a pool served by `ops` (which must outlive the pool) with the
 * backend's own state `impl`; `data` is what cq_pool_data() returns.
 * Returns 0, CQ_EINVAL (NULL, an ops table of another size, an unknown
 * flag, or a NULL operation) or CQ_ENOMEM.
 */
CQ_EXPORT int cq_backend_pool_create(cq_pool **out, const cq_backend_ops *ops,
                                     void *impl, void *data);

/* The `impl` of a backend pool; NULL for an in-process pool. */
CQ_EXPORT void *cq_backend_impl(const cq_pool *pool);

/* The table a backend pool was created with, so that a backend can tell
 * its own pools from another backend's (compare it with its table) and the
 * core's text layer can read a backend's flags; NULL for an in-process
 * pool or NULL. Thread-safe; never blocks. */
CQ_EXPORT const cq_backend_ops *cq_backend_ops_of(const cq_pool *pool);

/* The pool a request or a grant was last bound to (its header); NULL if
 * none. */
CQ_EXPORT cq_pool *cq_backend_req_pool(const cq_req *req);
CQ_EXPORT cq_pool *cq_backend_grant_pool(const cq_grant *grant);

#ifdef __cplusplus
}
#endif

#endif /* CRONOQ_CRONOQ_BACKEND_H */
