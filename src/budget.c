/*
 * Budgets and classes: the usage word (budget.h) and the acquires and
 * releases that need no lock.
 *
 * A budget's free units are capacity - used. What is withheld is derived,
 * never stored (queue.c): the budget's claimant has min(free, its need) set
 * aside, and only the rest is open to younger requests. A claimant sets the
 * word's contended bit, which sends every acquire and release of the budget
 * to the lock, where the withholding is respected; while no waiter claims
 * the budget, acquires and releases are single atomic steps on the word. A
 * thread asleep in its barging window sets the sleepers bit instead, which
 * sends only releases to the lock, to wake it.
 */
#include "grant.h"

bool cq__budget_take(struct cq__res *r, int64_t need, bool lone) {
  int64_t cap = cq__res_capacity(r);
  uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
  do {
    if (need > cq__w_free(w, cap)) /* not used + need: it may overflow */
      return false;
  } while (!atomic_compare_exchange_weak_explicit(
      &r->word, &w, (w + (uint64_t)need) | (lone ? CQ__W_LONE : 0),
      memory_order_acq_rel, memory_order_relaxed));
  cq__peak_raise(r, cq__w_used(w) + need);
  return true;
}

void cq__budget_put(struct cq__res *r, int64_t amount, bool lone_ends) {
  /* The lone bit is known set when it ends: subtracting it clears it. */
  atomic_fetch_sub_explicit(&r->word,
                            (uint64_t)amount + (lone_ends ? CQ__W_LONE : 0),
                            memory_order_acq_rel);
}

void cq__budget_contend(struct cq__res *r, bool contended) {
  if (contended)
    atomic_fetch_or_explicit(&r->word, CQ__W_CONTENDED, memory_order_acq_rel);
  else
    atomic_fetch_and_explicit(&r->word, ~CQ__W_CONTENDED, memory_order_acq_rel);
}

void cq__budget_sleepers(struct cq__res *r, bool sleepers) {
  if (sleepers)
    atomic_fetch_or_explicit(&r->word, CQ__W_SLEEPERS, memory_order_acq_rel);
  else
    atomic_fetch_and_explicit(&r->word, ~CQ__W_SLEEPERS, memory_order_acq_rel);
}

int cq__budget_remove(struct cq__res *r) {
  uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
  do {
    if (cq__w_used(w) != 0)
      return CQ_EINUSE;
  } while (!atomic_compare_exchange_weak_explicit(
      &r->word, &w, w | CQ__W_REMOVED, memory_order_acq_rel,
      memory_order_relaxed));
  return 0;
}

void cq__budget_harvest(struct cq__res *r) {
  uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
  /* Lock-free attempts add to the count and take back what they added when
   * they fail, concurrently with this: take a step only while the field
   * holds it, checked in the same atomic step, so that it never borrows
   * from the state bits above it. */
  while (cq__w_count(w) >= CQ__W_COUNT_HARVEST) {
    uint64_t next = w - CQ__W_COUNT_HARVEST * CQ__W_COUNT_ONE;
    if (atomic_compare_exchange_weak_explicit(
            &r->word, &w, next, memory_order_relaxed, memory_order_relaxed)) {
      r->grants_total += CQ__W_COUNT_HARVEST;
      w = next;
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Without the lock                                                          */
/* ------------------------------------------------------------------------ */

int cq__budget_fast_take(struct cq__grant *g, const struct cq__req *req,
                         uint32_t *uncounted) {
  unsigned i;
  *uncounted = 0;
  for (i = 0; i < req->n_items; i++) {
    struct cq__res *r = req->items[i].res;
    int64_t cap = cq__res_capacity(r);
    if (cq__is_lone(r, req->items[i].amount, cap))
      goto undo; /* a lone grant sets the lone bit, under the lock */
    uint64_t need = (uint64_t)req->items[i].amount;
    uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
    do {
      if ((w & (CQ__W_CONTENDED | CQ__W_REMOVED | CQ__W_LONE)) != 0 ||
          cq__w_count(w) >= CQ__W_COUNT_FAST_LIMIT ||
          (int64_t)need > cap - cq__w_used(w))
        goto undo; /* compared with what is left: used + need may overflow */
    } while (!atomic_compare_exchange_weak_explicit(
        &r->word, &w, w + need + CQ__W_COUNT_ONE, memory_order_acq_rel,
        memory_order_relaxed));
    cq__peak_raise(r, cq__w_used(w) + (int64_t)need);
    g->it[i].res = r;
    g->it[i].u.hold.held = (int64_t)need;
  }
  g->n_items = (uint8_t)req->n_items;
  g->lockfree = 1;
  return 1;

undo:;
  /* Give back what was taken, uncounted. A waiter may have arrived
   * meanwhile; then those units must reach it through a sweep. A harvest
   * under the lock may have moved this attempt's count into grants_total
   * meanwhile, and left the field empty: then only the units come back
   * here, and the caller takes the count off grants_total. */
  bool sweep = false;
  while (i-- > 0) {
    struct cq__res *r = req->items[i].res;
    uint64_t held = (uint64_t)g->it[i].u.hold.held, back;
    uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
    do
      back = held + (cq__w_count(w) > 0 ? CQ__W_COUNT_ONE : 0);
    while (!atomic_compare_exchange_weak_explicit(
        &r->word, &w, w - back, memory_order_acq_rel, memory_order_relaxed));
    if (back == held)
      *uncounted |= 1u << i;
    sweep |= (w & (CQ__W_CONTENDED | CQ__W_SLEEPERS)) != 0;
  }
  return sweep ? -1 : 0;
}

bool cq__budget_fast_give(struct cq__grant *g) {
  bool sweep = false;
  for (unsigned i = 0; i < g->n_items; i++) {
    uint64_t w = atomic_fetch_sub_explicit(&g->it[i].res->word,
                                           (uint64_t)g->it[i].u.hold.held,
                                           memory_order_acq_rel);
    sweep |= (w & (CQ__W_CONTENDED | CQ__W_SLEEPERS)) != 0;
  }
  return sweep;
}
