/*
 * The API of declarations: budgets and classes added and resized, and any
 * resource removed. Each call checks its arguments, takes the pool's lock,
 * changes the resource table (resource.c) and, for a capacity change,
 * tells the policy (policy.h), whose decisions are delivered after the
 * lock (outbox.h). Device pools are declared by device.c.
 */
#include "pool.h"
#include "util/name.h"

/* ------------------------------------------------------------------------ */
/* Budgets and classes                                                       */
/* ------------------------------------------------------------------------ */

static int add_budget_like(cq_pool *pool, const char *name, int64_t capacity,
                           uint8_t kind, unsigned flags) {
  CQ__TO_BACKEND(pool, budget_add, pool, name, capacity, kind, flags);
  if (pool == NULL || cq__name_check(name) != 0 ||
      (flags & ~(unsigned)CQ_BUDGET_LONE) != 0)
    return CQ_EINVAL;
  if (capacity < 0 || capacity > CQ_BUDGET_MAX)
    return CQ_ERANGE;
  cq__mutex_lock(&pool->lock);
  struct cq__res *r;
  int rc = cq__res_add(&pool->tab, &pool->alloc, name, kind, &r);
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
  CQ__TO_BACKEND(pool, set_capacity, pool, name, capacity, kind);
  if (capacity < 0 || capacity > CQ_BUDGET_MAX)
    return CQ_ERANGE;
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = cq__res_find(&pool->tab, name);
  if (r == NULL || r->kind != kind) {
    cq__mutex_unlock(&pool->lock);
    return CQ_ENOENT;
  }
  int64_t old = cq__res_capacity(r);
  if (capacity != old) {
    atomic_store_explicit(&r->capacity, capacity, memory_order_relaxed);
    cq__policy_capacity_changed(pool, r, capacity < old, &o);
  }
  CQ__POLICY_CHECK(pool);
  cq__mutex_unlock(&pool->lock);
  cq__outbox_flush(&o);
  return 0;
}

int cq_budget_set_capacity(cq_pool *pool, const char *name, int64_t capacity) {
  return set_capacity(pool, name, capacity, CQ__RES_BUDGET);
}

int cq_class_set_max(cq_pool *pool, const char *name, int64_t max_workers) {
  return set_capacity(pool, name, max_workers, CQ__RES_CLASS);
}

/* ------------------------------------------------------------------------ */
/* Removal                                                                   */
/* ------------------------------------------------------------------------ */

int cq_resource_remove(cq_pool *pool, const char *name) {
  if (pool == NULL || name == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, resource_remove, pool, name);
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = cq__res_find(&pool->tab, name);
  /* Held grants that may hold none of its units any more still name it. */
  int rc = r == NULL                                ? CQ_ENOENT
           : r->n_waiting != 0 || r->n_holders != 0 ? CQ_EINUSE
                                                    : 0;
  /* Lock-free acquires may race: it is marked removed only while nothing
   * is held, in the same atomic step that they check. */
  if (rc == 0)
    rc = cq__budget_remove(r);
  if (rc == 0)
    cq__res_bury(&pool->tab, r);
  cq__mutex_unlock(&pool->lock);
  return rc;
}
