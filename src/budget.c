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

int cq_budget_add(cq_pool *pool, const char *name, int64_t capacity) {
  if (pool == NULL || cq__name_check(name) != 0)
    return CQ_EINVAL;
  if (capacity < 0 || capacity > CQ_BUDGET_MAX)
    return CQ_ERANGE;
  cq__mutex_lock(&pool->lock);
  struct cq__res *r;
  int rc = cq__res_add(pool, name, CQ__RES_BUDGET, &r);
  if (rc == 0)
    atomic_store_explicit(&r->capacity, capacity, memory_order_relaxed);
  cq__mutex_unlock(&pool->lock);
  return rc;
}

int cq_budget_stats_get(cq_pool *pool, const char *name, cq_budget_stats *out) {
  if (pool == NULL || name == NULL || out == NULL)
    return CQ_EINVAL;
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = cq__res_find(pool, name);
  if (r == NULL || r->kind != CQ__RES_BUDGET) {
    cq__mutex_unlock(&pool->lock);
    return CQ_ENOENT;
  }
  /* One read of the word, so in_use and grants agree with each other. */
  uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);
  int64_t peak = atomic_load_explicit(&r->peak, memory_order_relaxed);
  out->capacity = cq__res_capacity(r);
  out->in_use = cq__w_used(w);
  out->withheld = cq__budget_withheld(r, out->in_use);
  /* A lock-free grant raises the peak just after taking its units. */
  out->peak = peak > out->in_use ? peak : out->in_use;
  out->waiting = r->n_waiting;
  out->grants = r->grants_total + cq__w_count(w);
  cq__mutex_unlock(&pool->lock);
  return 0;
}
