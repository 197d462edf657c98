/*
 * The resource table: names, slots, uids and the resource order.
 *
 * Requests and grants point at resources directly, and lock-free acquires
 * read them without the lock, so a resource's memory lives as long as the
 * pool. The table's slots only serve lookups by name.
 */
#include "cq_internal.h"

#include <string.h>

int cq__name_check(const char *name) {
  if (name == NULL)
    return CQ_EINVAL;
  size_t len = 0;
  for (const char *c = name; *c != '\0'; c++, len++) {
    bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.' ||
              *c == '/';
    if (!ok || len >= CQ_NAME_MAX)
      return CQ_EINVAL;
  }
  return len == 0 ? CQ_EINVAL : 0;
}

struct cq__res *cq__res_find(cq_pool *p, const char *name) {
  for (uint32_t i = 0; i < p->n_slots; i++) {
    struct cq__res *r = p->res[i];
    if (r != NULL && strcmp(r->name, name) == 0)
      return r;
  }
  return NULL;
}

int cq__res_add(cq_pool *p, const char *name, enum cq__res_kind kind,
                struct cq__res **out) {
  if (cq__res_find(p, name) != NULL)
    return CQ_EEXIST;

  uint32_t slot = 0;
  while (slot < p->n_slots && p->res[slot] != NULL)
    slot++;
  if (slot == p->n_slots) {
    if (p->n_slots == UINT16_MAX)
      return CQ_ETOOMANY;
    if (p->n_slots == p->cap_slots) {
      uint32_t cap = p->cap_slots ? p->cap_slots * 2 : 8;
      if (cap > UINT16_MAX)
        cap = UINT16_MAX;
      struct cq__res **grown = cq__realloc(p, p->res, cap * sizeof(*grown));
      if (grown == NULL)
        return CQ_ENOMEM;
      p->res = grown;
      p->cap_slots = cap;
    }
  }

  struct cq__res *r = cq__alloc(p, sizeof(*r));
  if (r == NULL)
    return CQ_ENOMEM;
  memset(r, 0, sizeof(*r));
  memcpy(r->name, name, strlen(name) + 1);
  r->uid = ++p->next_uid;
  r->slot = (uint16_t)slot;
  r->kind = (uint8_t)kind;

  if (slot == p->n_slots)
    p->n_slots++;
  p->res[slot] = r;
  *out = r;
  return 0;
}

void cq__res_free(cq_pool *p, struct cq__res *r) {
  if (r != NULL)
    cq__free(p, r->devs);
  cq__free(p, r);
}

void cq__res_harvest(struct cq__res *r) {
  uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
  /* Lock-free attempts add to the count and take back what they added when
   * they fail, concurrently with this: take a step only while the field
   * holds it, checked in the same atomic step, so that it never borrows
   * from the state bits above it. */
  while (cq__w_count(w) >= CQ__W_COUNT_HARVEST) {
    uint64_t next = w - CQ__W_COUNT_HARVEST * CQ__W_COUNT_ONE;
    if (atomic_compare_exchange_weak_explicit(&r->word, &w, next,
                                              memory_order_relaxed,
                                              memory_order_relaxed)) {
      r->grants_total += CQ__W_COUNT_HARVEST;
      w = next;
    }
  }
}

int cq_resource_remove(cq_pool *pool, const char *name) {
  if (pool == NULL || name == NULL)
    return CQ_EINVAL;
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = cq__res_find(pool, name);
  /* Held grants that may hold none of its units any more still name it. */
  int rc = r == NULL                                  ? CQ_ENOENT
           : r->n_waiting != 0 || r->n_holders != 0 ? CQ_EINUSE
                                                      : 0;
  if (rc == 0) {
    /* Lock-free acquires may race: mark it removed only while nothing is
     * held, in the same atomic step that they check. */
    uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
    do {
      if (cq__w_used(w) != 0) {
        rc = CQ_EINUSE;
        break;
      }
    } while (!atomic_compare_exchange_weak_explicit(
        &r->word, &w, w | CQ__W_REMOVED, memory_order_acq_rel,
        memory_order_relaxed));
  }
  if (rc == 0) {
    pool->res[r->slot] = NULL;
    r->grave_next = pool->graveyard;
    pool->graveyard = r;
  }
  cq__mutex_unlock(&pool->lock);
  return rc;
}
