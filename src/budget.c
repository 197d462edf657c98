/*
 * Budgets: named resources of interchangeable integer units.
 *
 * A budget's free units are capacity - used. What is withheld is derived,
 * never stored: the budget's claimant (the oldest waiter that claimed it)
 * has min(free, its need) set aside, and only the rest is open to younger
 * requests. queue.c decides who is granted; this file adds budgets and
 * reports on them.
 */
#include "cq_internal.h"

static int add_budget_like(cq_pool *pool, const char *name, int64_t capacity,
                           uint8_t kind, unsigned flags) {
  if (pool == NULL || cq__name_check(name) != 0 ||
      (flags & ~(unsigned)CQ_BUDGET_LONE) != 0)
    return CQ_EINVAL;
  if (capacity < 0 || capacity > CQ_BUDGET_MAX)
    return CQ_ERANGE;
  cq__mutex_lock(&pool->lock);
  struct cq__res *r;
  int rc = cq__res_add(pool, name, kind, &r);
  if (rc == 0) {
    r->flags = (uint8_t)flags;
    atomic_store_explicit(&r->capacity, capacity, memory_order_relaxed);
  }
  cq__mutex_unlock(&pool->lock);
  return rc;
}

int cq_budget_add(cq_pool *pool, const char *name, int64_t capacity) {
  return add_budget_like(pool, name, capacity, CQ__RES_BUDGET, 0);
}

int cq_budget_add_ex(cq_pool *pool, const char *name, int64_t capacity,
                     unsigned flags) {
  return add_budget_like(pool, name, capacity, CQ__RES_BUDGET, flags);
}

int cq_class_add(cq_pool *pool, const char *name, int64_t max_workers) {
  return add_budget_like(pool, name, max_workers, CQ__RES_CLASS, 0);
}

/* Set the capacity of a budget-like resource of `kind`. */
static int set_capacity(cq_pool *pool, const char *name, int64_t capacity,
                        uint8_t kind) {
  if (pool == NULL || name == NULL)
    return CQ_EINVAL;
  if (capacity < 0 || capacity > CQ_BUDGET_MAX)
    return CQ_ERANGE;
  struct cq__ctx ctx;
  cq__ctx_init(&ctx, pool);
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = cq__res_find(pool, name);
  if (r == NULL || r->kind != kind) {
    cq__mutex_unlock(&pool->lock);
    return CQ_ENOENT;
  }
  int64_t old = cq__res_capacity(r);
  if (capacity != old) {
    atomic_store_explicit(&r->capacity, capacity, memory_order_relaxed);
    cq__bf_invalidate(pool);
    if (capacity < old)
      cq__fail_unsatisfiable(pool, &ctx);
    /* Growing frees units; shrinking may change what a lone claimant
     * needs. Either way the waiters here are looked at again. */
    if (r->blocked.count != 0)
      cq__res_mark_dirty(pool, r, 0);
    cq__sweep(pool, &ctx);
  }
  cq__mutex_unlock(&pool->lock);
  cq__ctx_finish(&ctx);
  return 0;
}

int cq_budget_set_capacity(cq_pool *pool, const char *name, int64_t capacity) {
  return set_capacity(pool, name, capacity, CQ__RES_BUDGET);
}

int cq_class_set_max(cq_pool *pool, const char *name, int64_t max_workers) {
  return set_capacity(pool, name, max_workers, CQ__RES_CLASS);
}
