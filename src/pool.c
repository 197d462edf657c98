/*
 * The pool through the API: its lifetime, its timers, expiry and its own
 * figures.
 *
 * Timers. Every waiter with a finite deadline sits in the policy's deadline
 * tree. A blocking waiter times itself out with a timed park, and wakes the
 * same way at the end of its barging window; but the window ends then
 * whether its thread runs or not: the next call on the pool that can grant
 * anything finds it past (queue.c). A callback waiter has no thread of its
 * own, so the pool starts one timer thread the first time such a waiter
 * parks (or a grant with a hold limit is made); it sleeps until the
 * earliest deadline or limit end and lets the policy expire what is due.
 * With CQ_POOL_MANUAL_TIMERS nothing times out by itself: cq_pool_expire(),
 * called by the host, is the only way deadlines pass and limits end.
 */
#include "pool.h"

#include <string.h>

#define KNOWN_FLAGS                                                            \
  (CQ_POOL_STAGED_CLAIMS | CQ_POOL_MANUAL_TIMERS | CQ_POOL_BACKFILL |          \
   CQ_POOL_STRICT_ORDER)

/* The timer thread's work, with the lock held: expire what is due, deliver
 * it without the lock, again until nothing more is due. */
static int64_t timer_fire(void *arg) {
  cq_pool *p = arg;
  for (;;) {
    struct cq__outbox o;
    cq__outbox_init(&o, p);
    cq__policy_expire(p, cq_now(), &o);
    CQ__POLICY_CHECK(p);
    if (!cq__outbox_pending(&o) && p->ev.count == 0)
      return cq__policy_next_deadline(p);
    cq__mutex_unlock(&p->lock);
    cq__outbox_flush(&o);
    cq__mutex_lock(&p->lock);
  }
}

int cq_pool_create(cq_pool **out, const cq_pool_config *cfg) {
  static const cq_pool_config defaults = CQ_POOL_CONFIG_INIT;
  if (out == NULL)
    return CQ_EINVAL;
  if (cfg == NULL)
    cfg = &defaults;
  if ((cfg->flags & ~(unsigned)KNOWN_FLAGS) != 0)
    return CQ_EINVAL;
  if (cfg->clock != NULL && !(cfg->flags & CQ_POOL_MANUAL_TIMERS))
    return CQ_EINVAL;
  if (cfg->barge_ms < 0 || cfg->barge_ms > CQ_BARGE_MAX_MS)
    return CQ_EINVAL;
  for (size_t i = 0; i < sizeof(cfg->reserved_) / sizeof(cfg->reserved_[0]);
       i++)
    if (cfg->reserved_[i] != 0)
      return CQ_EINVAL; /* a later version's option: refuse, never ignore */
  if (cq__allocator_check(cfg->alloc) != 0)
    return CQ_EINVAL;
  cq_allocator alloc = cfg->alloc != NULL ? *cfg->alloc : cq__sys_allocator();

  cq_pool *p = cq__alloc(&alloc, sizeof(*p));
  if (p == NULL)
    return CQ_ENOMEM;
  memset(p, 0, sizeof(*p));
  p->alloc = alloc;
  p->flags = cfg->flags;
  p->clock = cfg->clock;
  p->clock_arg = cfg->clock_arg;
  p->data = cfg->data;
  cq__policy_init(p, (cfg->flags & CQ_POOL_STRICT_ORDER) ? 0
                     : cfg->barge_ms != 0                ? cfg->barge_ms
                                                         : CQ_BARGE_DEFAULT_MS);
  if (cq__events_init(&p->ev, &alloc, cfg->on_event, cfg->event_arg,
                      cfg->event_buffer) != 0) {
    cq__free(&alloc, p);
    return CQ_ENOMEM;
  }
  if (cq__mutex_init(&p->lock) != 0)
    goto fail_mutex;
  if (cq__timer_init(&p->timer, &p->lock, timer_fire, p) != 0)
    goto fail_timer;
  *out = p;
  return 0;

fail_timer:
  cq__mutex_destroy(&p->lock);
fail_mutex:
  cq__events_free(&p->ev, &alloc);
  cq__free(&alloc, p);
  return CQ_ESYS;
}

void *cq_pool_data(const cq_pool *pool) {
  return pool != NULL ? pool->data : NULL;
}

int cq_pool_close(cq_pool *pool) {
  if (pool == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, close, pool);
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  cq__mutex_lock(&pool->lock);
  atomic_store(&pool->closed, true);
  cq__pool_fast_until_set(pool, CQ__FAST_CLOSED);
  cq__policy_close(pool, &o);
  CQ__POLICY_CHECK(pool);
  cq__mutex_unlock(&pool->lock);
  cq__outbox_flush(&o);
  return 0;
}

int cq_pool_destroy(cq_pool *pool) {
  if (pool == NULL)
    return 0;
  if (cq__pool_remote(pool)) {
    int rc = pool->backend->destroy(pool);
    if (rc == 0)
      cq__backend_pool_free(pool);
    return rc;
  }
  cq__mutex_lock(&pool->lock);
  /* Grants made or adopted under the lock are counted, whatever they hold
   * now; lock-free ones hold units until they are released. */
  bool held = pool->q.n_held != 0;
  for (uint32_t i = 0; i < pool->tab.n_slots; i++)
    if (pool->tab.res[i] != NULL && cq__res_used(pool->tab.res[i]) != 0)
      held = true;
  bool waiting = pool->q.n_waiters != 0 || pool->q.n_sleepers != 0;
  int rc = waiting || held                   ? CQ_EINUSE
           : cq__timer_is_self(&pool->timer) ? CQ_ESTATE
                                             : 0;
  cq__mutex_unlock(&pool->lock);
  if (rc != 0)
    return rc;
  cq__timer_destroy(&pool->timer);
  cq__restab_free(&pool->tab, &pool->alloc);
  cq__events_free(&pool->ev, &pool->alloc);
  cq__mutex_destroy(&pool->lock);
  cq_allocator alloc = pool->alloc;
  cq__free(&alloc, pool);
  return 0;
}

int cq_pool_expire(cq_pool *pool, int64_t *next_deadline_ms) {
  if (pool == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, expire, pool, next_deadline_ms);
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  cq__mutex_lock(&pool->lock);
  cq__policy_expire(pool, cq__pool_now(pool), &o);
  if (next_deadline_ms != NULL)
    *next_deadline_ms = cq__policy_next_deadline(pool);
  CQ__POLICY_CHECK(pool);
  cq__mutex_unlock(&pool->lock);
  cq__outbox_flush(&o);
  return 0;
}
