/*
 * Resources: the table (names, slots, uids, the resource order, the
 * graveyard), and their administration through the API: adding budgets and
 * classes, changing their capacity, removing any resource. Device pools are
 * added by device.c; what a capacity change means for waiters is the
 * policy's.
 *
 * Requests and grants point at resources directly, and lock-free acquires
 * read them without the lock, so a resource's memory lives as long as the
 * pool. The table's slots only serve lookups by name.
 */
#include "pool.h"
#include "util/name.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* The table                                                                 */
/* ------------------------------------------------------------------------ */

struct cq__res *cq__res_find(const struct cq__restab *t, const char *name) {
  for (uint32_t i = 0; i < t->n_slots; i++) {
    struct cq__res *r = t->res[i];
    if (r != NULL && strcmp(r->name, name) == 0)
      return r;
  }
  return NULL;
}

int cq__res_add(struct cq__restab *t, const cq_allocator *a, const char *name,
                enum cq__res_kind kind, struct cq__res **out) {
  if (cq__res_find(t, name) != NULL)
    return CQ_EEXIST;

  uint32_t slot = 0;
  while (slot < t->n_slots && t->res[slot] != NULL)
    slot++;
  if (slot == t->n_slots) {
    if (t->n_slots == UINT16_MAX)
      return CQ_ETOOMANY;
    if (t->n_slots == t->cap_slots) {
      uint32_t cap = t->cap_slots ? t->cap_slots * 2 : 8;
      if (cap > UINT16_MAX)
        cap = UINT16_MAX;
      struct cq__res **grown = cq__realloc(a, t->res, cap * sizeof(*grown));
      if (grown == NULL)
        return CQ_ENOMEM;
      t->res = grown;
      t->cap_slots = cap;
    }
  }

  struct cq__res *r = cq__alloc(a, sizeof(*r));
  if (r == NULL)
    return CQ_ENOMEM;
  memset(r, 0, sizeof(*r));
  memcpy(r->name, name, strlen(name) + 1);
  r->uid = ++t->next_uid;
  r->slot = (uint16_t)slot;
  r->kind = (uint8_t)kind;

  if (slot == t->n_slots)
    t->n_slots++;
  t->res[slot] = r;
  *out = r;
  return 0;
}

void cq__res_bury(struct cq__restab *t, struct cq__res *r) {
  t->res[r->slot] = NULL;
  r->grave_next = t->graveyard;
  t->graveyard = r;
}

static void res_free(const cq_allocator *a, struct cq__res *r) {
  if (r != NULL)
    cq__free(a, r->devs);
  cq__free(a, r);
}

void cq__restab_free(struct cq__restab *t, const cq_allocator *a) {
  for (uint32_t i = 0; i < t->n_slots; i++)
    res_free(a, t->res[i]);
  while (t->graveyard != NULL) {
    struct cq__res *r = t->graveyard;
    t->graveyard = r->grave_next;
    res_free(a, r);
  }
  cq__free(a, t->res);
  memset(t, 0, sizeof(*t));
}

size_t cq__res_ordered(const struct cq__restab *t, struct cq__res **out,
                       size_t cap) {
  size_t n = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < t->n_slots; i++) {
      struct cq__res *r = t->res[i];
      if (r == NULL || (r->kind == CQ__RES_DEVICES) != (pass == 0))
        continue;
      if (n < cap)
        out[n] = r;
      n++;
    }
  }
  /* Within a group, uids grow with the order of addition; slots may not. */
  for (size_t i = 1; i < n && i < cap; i++) {
    struct cq__res *r = out[i];
    size_t j = i;
    while (j > 0 && cq__rank(out[j - 1]->kind, out[j - 1]->uid) >
                        cq__rank(r->kind, r->uid)) {
      out[j] = out[j - 1];
      j--;
    }
    out[j] = r;
  }
  return n;
}

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
