/*
 * The pool (pool.c): the lock and the parts that modules own. One mutex
 * guards everything reachable from the pool, including the grants that
 * wait on it or hold units of it; callbacks and the event hook run with no
 * lock held.
 */
#ifndef CRONOQ_POOL_H
#define CRONOQ_POOL_H

#include "event.h"
#include "policy.h"
#include "resource.h"
#include "util/timer.h"

struct cq_pool {
  /* A pool served by a backend (cronoq_backend.h) has only these two set;
   * every call on it goes to the backend. */
  const cq_backend_ops *backend;
  void *backend_impl;

  cq__mutex lock;
  cq_allocator alloc;
  unsigned flags;
  cq_clock_fn clock;
  void *clock_arg;
  void *data;
  _Atomic bool closed;
  /* Until when, on the pool's clock, acquires may try the lock-free clause
   * (grant.c reads it in the one load that path spends on the pool):
   * CQ_NEVER while no blocking acquire sleeps in its barging window; while
   * one does, the end of the oldest sleeper's window, after which acquires
   * take the lock, where that window ends (queue.c); CQ__FAST_CLOSED once
   * the pool is closed. Written under the lock. */
  _Atomic int64_t fast_until;

  struct cq__restab tab;  /* resource.c */
  struct cq__queue q;     /* queue.c */
  struct cq__bf bf;       /* backfill.c */
  struct cq__events ev;   /* event.c */
  struct cq__timer timer; /* deadlines of callback waiters, hold limits */
};

/* Whether acquires and releases may skip the lock: not where an event hook
 * records them in order, nor where the backfill shadow time must see them. */
static inline bool cq__pool_lockfree(const cq_pool *p) {
  return p->ev.hook == NULL && !(p->flags & CQ_POOL_BACKFILL);
}

static inline int64_t cq__pool_now(const cq_pool *p) {
  return p->clock ? p->clock(p->clock_arg) : cq_now();
}

/* fast_until of a closed pool: before every clock reading. */
#define CQ__FAST_CLOSED INT64_MIN

/* Let acquires go lock-free until `until` (CQ_NEVER: no limit), or never
 * again once the pool is closed. Lock held. */
static inline void cq__pool_fast_until_set(cq_pool *p, int64_t until) {
  if (atomic_load_explicit(&p->closed, memory_order_relaxed))
    until = CQ__FAST_CLOSED;
  atomic_store_explicit(&p->fast_until, until, memory_order_relaxed);
}

/* Whether an acquire may try the lock-free clause now (see fast_until).
 * The clock is read only while a sleeper's window is open, and a pool's
 * own clock never: it is called with the lock held (cq_clock_fn), so such
 * a pool's acquires take the lock while anyone sleeps. */
static inline bool cq__pool_fast_open(const cq_pool *p) {
  int64_t until = atomic_load_explicit(&p->fast_until, memory_order_relaxed);
  return until == CQ_NEVER ||
         (until != CQ__FAST_CLOSED && p->clock == NULL && cq_now() < until);
}

/* Whether `p` is served by a backend: every call passes to it. */
static inline bool cq__pool_remote(const cq_pool *p) {
  return p->backend != NULL;
}

/* At the top of a public function: pass the call on a pool served by a
 * backend to it (cronoq_backend.h), with the same arguments. */
#define CQ__TO_BACKEND(pool, op, ...)                                          \
  do {                                                                         \
    if ((pool) != NULL && (pool)->backend != NULL)                             \
      return (pool)->backend->op(__VA_ARGS__);                                 \
  } while (0)

/* The pool a request or a grant was last bound to (its header), or NULL. */
static inline cq_pool *cq__req_pool(const cq_req *req) {
  return cq_backend_req_pool(req);
}
static inline cq_pool *cq__grant_pool(const cq_grant *grant) {
  return grant != NULL ? cq__grant_ofc(grant)->pool : NULL;
}

/* Free the shell of a pool served by a backend (backend.c). */
void cq__backend_pool_free(cq_pool *pool);

#endif /* CRONOQ_POOL_H */
