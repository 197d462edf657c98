/*
 * Budgets and classes (budget.c): the usage word, through which acquires
 * and releases that do not involve a waiter need no lock, and the
 * operations on it.
 *
 * The word, updated with single atomic operations:
 *   bits  0..39  units in use
 *   bits 40..59  grants made without the lock, not yet moved into
 *                grants_total (moved under the lock before the field fills)
 *   bit  60      sleepers: a blocked acquire sleeps in its barging window
 *                (queue.c) and names this budget; acquires may still skip
 *                the lock, but releases must take it to wake one
 *   bit  61      lone: a lone request holds the budget; nothing else may be
 *                granted on it, whatever the units and the capacity
 *   bit  62      removed: the resource is gone, every acquire must fail
 *   bit  63      contended: some waiter claims this budget; acquires must
 *                take the lock (to respect what is withheld) and releases
 *                must sweep
 *
 * The count field never borrows from or carries into the state bits: every
 * subtraction from it is conditional, in the same compare-and-swap, on the
 * field holding at least what is taken (the harvest, and the undo of a
 * lock-free attempt that failed), and an addition happens only while the
 * field is below the fast limit, so it never exceeds that limit. The
 * harvest threshold is a build option (CRONOQ_HARVEST_SHIFT) so that tests
 * can make every run cross it many times.
 */
#ifndef CRONOQ_BUDGET_H
#define CRONOQ_BUDGET_H

#include "resource.h"

#ifndef CQ_HARVEST_SHIFT
#define CQ_HARVEST_SHIFT 18
#endif
#define CQ__W_USED_MASK ((UINT64_C(1) << 40) - 1)
#define CQ__W_COUNT_SHIFT 40
#define CQ__W_COUNT_BITS 20
#define CQ__W_COUNT_ONE (UINT64_C(1) << CQ__W_COUNT_SHIFT)
#define CQ__W_COUNT_MASK                                                       \
  (((UINT64_C(1) << CQ__W_COUNT_BITS) - 1) << CQ__W_COUNT_SHIFT)
#define CQ__W_COUNT_HARVEST                                                    \
  (UINT64_C(1) << CQ_HARVEST_SHIFT)                      /* moved at a time */
#define CQ__W_COUNT_FAST_LIMIT (CQ__W_COUNT_HARVEST * 2) /* lock-free below */
#define CQ__W_SLEEPERS (UINT64_C(1) << 60)
#define CQ__W_LONE (UINT64_C(1) << 61)
#define CQ__W_REMOVED (UINT64_C(1) << 62)
#define CQ__W_CONTENDED (UINT64_C(1) << 63)

_Static_assert(CQ_BUDGET_MAX == (int64_t)CQ__W_USED_MASK,
               "a budget's capacity fits the usage word's units field");
_Static_assert(CQ__W_COUNT_FAST_LIMIT <=
                   (CQ__W_COUNT_MASK >> CQ__W_COUNT_SHIFT),
               "the count field holds every value up to the fast limit");
_Static_assert(CQ_HARVEST_SHIFT >= 1 && CQ_HARVEST_SHIFT <= 18,
               "the harvest threshold fits the count field");

static inline int64_t cq__w_used(uint64_t w) {
  return (int64_t)(w & CQ__W_USED_MASK);
}
static inline uint64_t cq__w_count(uint64_t w) {
  return (w & CQ__W_COUNT_MASK) >> CQ__W_COUNT_SHIFT;
}

/* What a usage word leaves free of capacity `cap`: nothing while a lone
 * grant holds the budget, else capacity - used, never below 0. */
static inline int64_t cq__w_free(uint64_t w, int64_t cap) {
  if (w & CQ__W_LONE)
    return 0;
  int64_t f = cap - cq__w_used(w);
  return f > 0 ? f : 0;
}

static inline uint64_t cq__res_word(const struct cq__res *r) {
  return atomic_load_explicit(&r->word, memory_order_acquire);
}

/* Units held (thousandths, for a device pool). */
static inline int64_t cq__res_used(const struct cq__res *r) {
  return cq__w_used(cq__res_word(r));
}

static inline int64_t cq__budget_free(const struct cq__res *r) {
  return cq__w_free(cq__res_word(r), cq__res_capacity(r));
}

/* Whether `amount` of budget-like resource r is a lone request: larger
 * than the capacity, on a budget with the lone-request allowance. */
static inline bool cq__is_lone(const struct cq__res *r, int64_t amount,
                               int64_t capacity) {
  return (r->flags & CQ_BUDGET_LONE) && amount > capacity;
}

/* What `amount` of budget-like resource r takes: a lone request takes the
 * whole capacity, and needs at least one unit, so that on a lone budget of
 * capacity 0 it waits instead of holding nothing; else the amount. */
static inline int64_t cq__need_at(const struct cq__res *r, int64_t amount,
                                  int64_t capacity) {
  if (!cq__is_lone(r, amount, capacity))
    return amount;
  return capacity > 0 ? capacity : 1;
}

/* Take `need` units under the lock if they are free; never beyond
 * capacity. A lone take (need is the whole capacity, so nothing may be
 * held) also sets the lone bit, in the same step, so that no lock-free
 * acquire slips in beside it. */
bool cq__budget_take(struct cq__res *r, int64_t need, bool lone);
/* Give back `amount` units; `lone_ends` clears the lone bit in the same
 * step (a lone grant's release). */
void cq__budget_put(struct cq__res *r, int64_t amount, bool lone_ends);
/* Set or clear the contended bit (a first claim came, the last went). */
void cq__budget_contend(struct cq__res *r, bool contended);
/* Set or clear the sleepers bit (a first sleeper came, the last went). */
void cq__budget_sleepers(struct cq__res *r, bool sleepers);
/* Mark the budget removed while nothing is held, in the step lock-free
 * acquires check. 0 or CQ_EINUSE. */
int cq__budget_remove(struct cq__res *r);
/* Move lock-free grant counts into grants_total. Lock held. */
void cq__budget_harvest(struct cq__res *r);

struct cq__grant;
struct cq__req;
/* The lock-free paths (policy.h names them for the callers). */
int cq__budget_fast_take(struct cq__grant *g, const struct cq__req *req,
                         uint32_t *uncounted);
bool cq__budget_fast_give(struct cq__grant *g);

#endif /* CRONOQ_BUDGET_H */
