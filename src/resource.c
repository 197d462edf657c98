/*
 * Resources: the table (names, slots, uids, the resource order, the
 * graveyard). An object of the core: it calls nothing above it. Budgets
 * and classes are declared, resized and removed through the API in
 * declare.c, device pools in device.c.
 *
 * Requests and grants point at resources directly, and lock-free acquires
 * read them without the lock, so a resource's memory lives as long as the
 * pool. The table's slots only serve lookups by name.
 */
#include "pool.h"

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
