/*
 * Resources (resource.c): one named budget, class or device pool, and the
 * pool's table of them.
 *
 * A resource is allocated on its own and, once added, stays allocated until
 * the pool is destroyed, even after it is removed: requests and grants point
 * at it directly, and lock-free acquires read it without the lock. The
 * table's slots only serve lookups by name; removed resources wait in the
 * graveyard.
 */
#ifndef CRONOQ_RESOURCE_H
#define CRONOQ_RESOURCE_H

#include "util/alloc.h"
#include "util/hist.h"
#include "util/rbtree.h"

enum cq__res_kind {
  CQ__RES_BUDGET = CQ_KIND_BUDGET,
  CQ__RES_DEVICES = CQ_KIND_DEVICES,
  CQ__RES_CLASS = CQ_KIND_CLASS /* a budget of workers, one per grant */
};

/*
 * Resource order: device pools, then the others, each group in the order
 * added (uids grow with every addition). Staged claims and the order in which
 * a waiter's lacks are checked both follow it. A resource's rank never
 * changes.
 */
static inline uint64_t cq__rank(uint8_t kind, uint32_t uid) {
  return ((uint64_t)(kind != CQ__RES_DEVICES) << 32) | uid;
}

struct cq__dev; /* place.h */

struct cq__res {
  char name[CQ_NAME_MAX + 1];
  uint32_t uid;  /* unique for the pool's lifetime */
  uint16_t slot; /* index in the pool's table */
  uint8_t kind;  /* enum cq__res_kind */
  uint8_t flags; /* enum cq_budget_flags; fixed when added */

  _Atomic uint64_t word;    /* budgets and classes: budget.h; device pools:
                               the sum of their devices' thousandths */
  _Atomic int64_t capacity; /* changed only under the lock */
  _Atomic int64_t peak;     /* highest use seen */
  uint64_t grants_total;    /* grants counted under the lock */
  uint64_t n_waiting;       /* waiters whose request names this resource */
  uint64_t n_holders;       /* held grants naming it that the policy counts
                               (policy.h, struct cq__queue.n_held) */
  uint64_t timeouts;        /* waiters naming it that timed out */
  uint64_t cancels;         /* waiters naming it that were cancelled */
  struct cq__hist wait;     /* waiting times of the grants that waited */

  /* The policy's (queue.c). Claims: item nodes of waiters that claimed this
   * resource, by arrival; the first is the claimant, for which what is free
   * is withheld. Non-empty exactly when a budget's contended bit is set.
   * Blocked: waiters whose blocker is this resource, by arrival. */
  cq__rbtree claims;
  cq__rbtree blocked;
  int64_t claim_want;  /* device pools: devices the claimers reserve in all */
  uint64_t n_sleepers; /* sleepers (queue.c) whose request names it; on a
                          budget, the sleepers bit is set while not 0 */
  struct cq__res *dirty_next; /* the sweep's list of resources to walk */
  bool dirty;
  uint64_t walk_seq; /* waiters blocked here with seq > walk_seq remain */

  /* Device pools (place.h). */
  struct cq__dev *devs;
  uint32_t n_devs;
  uint32_t n_online;
  cq__rbtree by_free;
  uint64_t stamp; /* last reservation stamp handed out */

  /* Backfill (backfill.c): this resource is one the head waiter names when
   * bf_mark equals the pool's bf.stamp; bf_free is then what a budget will
   * have free at the shadow time (devices keep theirs per device). */
  uint64_t bf_mark;
  int64_t bf_free;

  struct cq__res *grave_next; /* removed resources, kept until destroy */
};

static inline int64_t cq__res_capacity(const struct cq__res *r) {
  return atomic_load_explicit(&r->capacity, memory_order_relaxed);
}

/* Raise the peak to at least `used`. */
static inline void cq__peak_raise(struct cq__res *r, int64_t used) {
  int64_t peak = atomic_load_explicit(&r->peak, memory_order_relaxed);
  while (used > peak && !atomic_compare_exchange_weak_explicit(
                            &r->peak, &peak, used, memory_order_relaxed,
                            memory_order_relaxed)) {
  }
}

/* The pool's resources. Slots may be NULL after a removal. */
struct cq__restab {
  struct cq__res **res;
  uint32_t n_slots;
  uint32_t cap_slots;
  uint32_t next_uid;
  struct cq__res *graveyard; /* removed: requests may still point at them */
};

/* Look a resource up by name; NULL if none. Lock held. */
struct cq__res *cq__res_find(const struct cq__restab *t, const char *name);
/* Add a resource of `kind` to the table; fills *out. Lock held.
 * 0, CQ_EEXIST, CQ_ETOOMANY or CQ_ENOMEM. */
int cq__res_add(struct cq__restab *t, const cq_allocator *a, const char *name,
                enum cq__res_kind kind, struct cq__res **out);
/* Take a resource out of the table into the graveyard. Lock held. */
void cq__res_bury(struct cq__restab *t, struct cq__res *r);
/* Free every resource, removed ones included, and the table. */
void cq__restab_free(struct cq__restab *t, const cq_allocator *a);
/* The resources in resource order, device pools first: fills up to `cap`
 * pointers and returns how many there are. Lock held. */
size_t cq__res_ordered(const struct cq__restab *t, struct cq__res **out,
                       size_t cap);

#endif /* CRONOQ_RESOURCE_H */
