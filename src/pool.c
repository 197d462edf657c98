/*
 * The pool: its lifetime, its lock, its allocator and its timers.
 *
 * Timers. Every waiter with a finite deadline sits in `deadlines`, ordered by
 * (deadline, arrival). A blocking waiter times itself out with a timed wait
 * on its own condition variable. A callback waiter has no thread of its own,
 * so the pool starts one timer thread the first time such a waiter parks; it
 * sleeps until the earliest deadline and expires what is due. With
 * CQ_POOL_MANUAL_TIMERS nothing times out by itself: cq_pool_expire(), called
 * by the host, is the only way deadlines pass. Hold limits (backfill.c) are
 * timed the same way: the timer thread, or cq_pool_expire(), marks grants
 * that outlive theirs overdue.
 */
#include "cq_internal.h"

#include <stdlib.h>
#include <string.h>

void *cq__alloc(const cq_pool *p, size_t size) {
  return p->alloc.alloc(size, p->alloc.arg);
}

void *cq__realloc(const cq_pool *p, void *ptr, size_t size) {
  return p->alloc.realloc(ptr, size, p->alloc.arg);
}

void cq__free(const cq_pool *p, void *ptr) {
  if (ptr != NULL)
    p->alloc.free(ptr, p->alloc.arg);
}

#define KNOWN_FLAGS                                                            \
  (CQ_POOL_STAGED_CLAIMS | CQ_POOL_MANUAL_TIMERS | CQ_POOL_BACKFILL)

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
  for (size_t i = 0; i < sizeof(cfg->reserved_) / sizeof(cfg->reserved_[0]);
       i++)
    if (cfg->reserved_[i] != 0)
      return CQ_EINVAL; /* a later version's option: refuse, never ignore */

  cq_allocator alloc = cq__sys_allocator();
  if (cfg->alloc != NULL) {
    const cq_allocator *a = cfg->alloc;
    if (a->alloc == NULL || a->realloc == NULL || a->free == NULL)
      return CQ_EINVAL;
    alloc = *a;
  }

  cq_pool *p = alloc.alloc(sizeof(*p), alloc.arg);
  if (p == NULL)
    return CQ_ENOMEM;
  memset(p, 0, sizeof(*p));
  p->alloc = alloc;
  p->flags = cfg->flags;
  p->clock = cfg->clock;
  p->clock_arg = cfg->clock_arg;
  p->data = cfg->data;
  p->next_seq = 1;
  p->next_gseq = 1;
  p->bf.S = CQ_NEVER;
  p->on_event = cfg->on_event;
  p->event_arg = cfg->event_arg;
  if (p->on_event != NULL) {
    p->ev_cap = cfg->event_buffer ? cfg->event_buffer : 4096;
    p->events = alloc.alloc(p->ev_cap * sizeof(*p->events), alloc.arg);
    if (p->events == NULL) {
      alloc.free(p, alloc.arg);
      return CQ_ENOMEM;
    }
  }

  if (cq__mutex_init(&p->lock) != 0)
    goto fail_mutex;
  if (cq__cond_init(&p->timer_cond) != 0)
    goto fail_cond;
  *out = p;
  return 0;

fail_cond:
  cq__mutex_destroy(&p->lock);
fail_mutex:
  if (p->events != NULL)
    alloc.free(p->events, alloc.arg);
  alloc.free(p, alloc.arg);
  return CQ_ESYS;
}

void *cq_pool_data(const cq_pool *pool) {
  return pool != NULL ? pool->data : NULL;
}

int cq_pool_close(cq_pool *pool) {
  if (pool == NULL)
    return CQ_EINVAL;
  struct cq__ctx ctx;
  cq__ctx_init(&ctx, pool);
  cq__mutex_lock(&pool->lock);
  atomic_store(&pool->closed, true);
  /* Everyone leaves; nobody is left to be granted, so no sweep. */
  while (pool->queue_head != NULL)
    cq__waiter_leave(pool, pool->queue_head, CQ_ECLOSED, &ctx);
  pool->dirty_head = NULL;
  for (uint32_t i = 0; i < pool->n_slots; i++)
    if (pool->res[i] != NULL)
      pool->res[i]->dirty = false;
  cq__mutex_unlock(&pool->lock);
  cq__ctx_finish(&ctx);
  return 0;
}

int cq_pool_destroy(cq_pool *pool) {
  if (pool == NULL)
    return 0;
  cq__mutex_lock(&pool->lock);
  /* Grants made or adopted under the lock are counted, whatever they hold
   * now; lock-free ones hold units until they are released. */
  bool held = pool->n_held != 0;
  for (uint32_t i = 0; i < pool->n_slots; i++)
    if (pool->res[i] != NULL && cq__res_used(pool->res[i]) != 0)
      held = true;
  if (pool->n_waiters != 0 || held) {
    cq__mutex_unlock(&pool->lock);
    return CQ_EINUSE;
  }
  bool joining = pool->timer_running;
  if (joining && pthread_equal(pthread_self(), pool->timer)) {
    cq__mutex_unlock(&pool->lock);
    return CQ_ESTATE;
  }
  pool->timer_stop = true;
  (void)pthread_cond_signal(&pool->timer_cond);
  cq__mutex_unlock(&pool->lock);
  if (joining)
    (void)pthread_join(pool->timer, NULL);

  for (uint32_t i = 0; i < pool->n_slots; i++)
    cq__res_free(pool, pool->res[i]);
  while (pool->graveyard != NULL) {
    struct cq__res *r = pool->graveyard;
    pool->graveyard = r->grave_next;
    cq__res_free(pool, r);
  }
  cq__free(pool, pool->res);
  cq__free(pool, pool->events);
  (void)pthread_cond_destroy(&pool->timer_cond);
  cq__mutex_destroy(&pool->lock);
  pool->alloc.free(pool, pool->alloc.arg);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Timers                                                                    */
/* ------------------------------------------------------------------------ */

void cq__expire_due(cq_pool *p, int64_t now, struct cq__ctx *ctx) {
  cq__limits_expire(p, now);
  cq__rbnode *n;
  while ((n = cq__rb_first(&p->deadlines)) != NULL) {
    struct cq__grant *g = CQ__CONTAINER_OF(n, struct cq__grant, dnode);
    if (g->deadline_ms > now)
      break;
    cq__waiter_leave(p, g, CQ_ETIMEDOUT, ctx);
  }
  cq__sweep(p, ctx);
}

/* The earliest waiter deadline or hold limit end, or CQ_NEVER. */
static int64_t first_deadline(const cq_pool *p) {
  int64_t limit = cq__limits_first(p);
  cq__rbnode *n = cq__rb_first(&p->deadlines);
  if (n == NULL)
    return limit;
  int64_t d = CQ__CONTAINER_OF(n, struct cq__grant, dnode)->deadline_ms;
  return d < limit ? d : limit;
}

static void *timer_main(void *arg) {
  cq_pool *p = arg;
  cq__mutex_lock(&p->lock);
  while (!p->timer_stop) {
    struct cq__ctx ctx;
    cq__ctx_init(&ctx, p);
    cq__expire_due(p, cq_now(), &ctx);
    if (ctx.ready_head != NULL || ctx.wake != NULL || p->ev_count != 0) {
      cq__mutex_unlock(&p->lock);
      cq__ctx_finish(&ctx);
      cq__mutex_lock(&p->lock);
      continue;
    }
    p->timer_wake_ms = first_deadline(p);
    cq__cond_wait(&p->timer_cond, &p->lock, p->timer_wake_ms);
  }
  cq__mutex_unlock(&p->lock);
  return NULL;
}

int cq__timer_ensure(cq_pool *p) {
  if (p->timer_running || (p->flags & CQ_POOL_MANUAL_TIMERS))
    return 0;
  p->timer_wake_ms = CQ_NEVER;
  if (pthread_create(&p->timer, NULL, timer_main, p) != 0)
    return CQ_ESYS;
  p->timer_running = true;
  return 0;
}

void cq__timer_kick(cq_pool *p, int64_t deadline_ms) {
  if (p->timer_running && deadline_ms < p->timer_wake_ms) {
    p->timer_wake_ms = deadline_ms;
    (void)pthread_cond_signal(&p->timer_cond);
  }
}

int cq_pool_expire(cq_pool *pool, int64_t *next_deadline_ms) {
  if (pool == NULL)
    return CQ_EINVAL;
  struct cq__ctx ctx;
  cq__ctx_init(&ctx, pool);
  cq__mutex_lock(&pool->lock);
  cq__expire_due(pool, cq__pool_now(pool), &ctx);
  if (next_deadline_ms != NULL)
    *next_deadline_ms = first_deadline(pool);
  cq__mutex_unlock(&pool->lock);
  cq__ctx_finish(&ctx);
  return 0;
}

int cq_pool_stats_get(cq_pool *pool, cq_pool_stats *out) {
  if (pool == NULL || out == NULL)
    return CQ_EINVAL;
  cq__mutex_lock(&pool->lock);
  out->waiting = pool->n_waiters;
  out->waited_grants = pool->waited_grants;
  out->wakeups = pool->wakeups;
  out->events_dropped = pool->events_dropped;
  out->overdue = pool->overdue;
  out->backfilled = pool->backfilled;
  out->late_heads = pool->late_heads;
  cq__mutex_unlock(&pool->lock);
  return 0;
}
