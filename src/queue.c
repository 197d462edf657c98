/*
 * The waiting policy: FIFO with reservation.
 *
 * Everything here runs with the pool lock held; policy.h is the only way
 * in. docs/POLICY.md states the same rule for users; this comment states it
 * for the code, whole.
 *
 * Terms.
 * - Waiters are ordered by arrival (seq; smaller is older).
 * - free(r) = capacity - used, never below 0; 0 while a lone grant holds r.
 * - A waiter *claims* a resource when an examination finds that it lacks it.
 *   A claim stays until the waiter is granted or leaves. The oldest waiter
 *   holding a claim on r is r's *claimant*. For a budget, min(free(r), the
 *   claimant's need) is withheld for it; the rest is *open*.
 * - On a device pool every claimer reserves, in arrival order, from what
 *   the older ones left: one device, the most free, for a fraction; the n
 *   most free for n whole devices (place.h), chosen again whenever
 *   capacities change. Budgets keep one claimant: withholding for every
 *   waiter would make them strict FIFO.
 * - What r offers a request of arrival seq s: on a budget, everything free
 *   if the claimant is s itself, or younger, or there is none, and
 *   otherwise only what is open; on a device pool, the devices that no
 *   claimer older than s reserves. A request is *covered* on r when its
 *   need fits in that. A younger claimer never restricts an older
 *   request.
 *
 * Examining a request (a new arrival, or a waiter):
 * - covered on every resource: it is granted, all at once;
 * - otherwise it claims each resource it is not covered on (with staged
 *   claims only the first, in resource order), and its *blocker* becomes the
 *   first resource, in resource order, on which it is not covered.
 *   A try does not claim anything: it only reports busy.
 *
 * When a waiter is examined again: only when its blocker covers it again.
 * After every change that can make that happen (units freed, a claimant
 * granted or leaving), the pool repeatedly examines the oldest waiter whose
 * blocker covers it, until there is none. Examinations only ever make the
 * resources tighter for waiters younger than the one examined, so this is a
 * single oldest-first pass, and only resources that changed ("dirty") need
 * to be walked. At rest, no waiter is covered by its blocker.
 *
 * Why nothing starves: the oldest waiter's claims are never taken over (no
 * one is older), what is withheld for it on a claimed resource only grows,
 * and each examination can add claims but never drop one. So after at most
 * one examination per resource it names, everything it lacks is claimed and
 * accumulating, and it is granted once holders release enough. Then the next
 * waiter is the oldest.
 *
 * Why nothing else is blocked: only the claimant's own need is withheld, and
 * only on resources some waiter lacked. Requests that fit in the rest, or
 * that name other resources, are granted at once.
 *
 * The lock-free clause. While no waiter claims a budget (its contended bit
 * is clear), acquires of requests that name only budgets, with no hold
 * limit, take their units with atomic steps on the usage words and no lock
 * (budget.c), and their releases give them back the same way; a lone
 * request, or a budget with a claimant, sends them to the lock. Nothing is
 * withheld on a budget nobody claims, so such a grant is one the rule would
 * make too. A claim set between a lock-free grant's check and its take is
 * settled in examine(); a lock-free release that finds its budget contended
 * has the waiters there examined (cq__policy_fast_released()). With an
 * event hook or backfill every acquire and release takes the lock.
 *
 * Bounded barging. A blocking acquire that does not fit first sleeps for up
 * to the pool's window T without claiming (a *sleeper*): what comes back
 * stays in the pool for whoever runs, and each release wakes one sleeper
 * that fits (nudge_one(), one outstanding at a time) to try again as a new
 * arrival would, withholdings and reservations respected. A sleeper names
 * its budgets with the sleepers bit, so that lock-free releases come here
 * to wake it, while lock-free acquires still go past it. Its window ends at
 * arrival + T on the pool's clock (wake_until), whether or not its thread
 * runs then: from that moment it claims its place by its arrival
 * (sleeper_claims()) and is a waiter like any other. Whoever comes first
 * makes it so: its own thread when it wakes, the expiry, and every other
 * entry point that can grant, which first ends the windows that have
 * passed (windows_end()); lock-free acquires stop at the end of the oldest
 * window (cq_pool.fast_until, kept by fast_gate(); on a pool with its own
 * clock, which is read under the lock only, while anyone sleeps) and come
 * here. So an attempt that arrives after a sleeper's first T never
 * overtakes it. A lock-free acquire that read the clock before the end may
 * still take units just after it: it arrived within the window. Callback
 * waiters and backfill pools have no window.
 *
 * The backfill exception (CQ_POOL_BACKFILL, backfill.c). The head is the
 * oldest waiter and its shadow time S the earliest moment it would fit by
 * the holders' declared hold limits. A younger request with a limit that is
 * covered once the head's withholding is disregarded may be granted before
 * S when it ends by S, or when the head still fits at S with it running.
 * Backfill respects one claimant per resource, device pools included (the
 * oldest claimer's reservation there, not every claimer's).
 * So a request with a limit may pass a waiting head, and the guarantee
 * becomes: with every holder keeping its limit, the head is granted no
 * later than its sticky S, save for the specification's three exceptions (an
 * ordinary grant of what the head has not claimed, or of a device it has
 * not reserved, and a capacity shrunk after S was computed). Units coming
 * back anywhere let the waiters behind the head try again, whatever blocks
 * them.
 */
#include "pool.h"

#include "backfill.h"
#include "place.h"
#include "validate.h"

static inline struct cq__grant *bnode_grant(const cq__rbnode *n) {
  return CQ__CONTAINER_OF(n, struct cq__grant, bnode);
}

static inline struct cq__gitem *claim_item(const cq__rbnode *n) {
  return CQ__CONTAINER_OF(n, struct cq__gitem, u.claim);
}

static inline struct cq__grant *item_grant(const struct cq__gitem *it) {
  return cq__item_grant(it);
}

static int seq_cmp(uint64_t a, uint64_t b) { return (a > b) - (a < b); }

static int blocked_cmp(const cq__rbnode *a, const cq__rbnode *b) {
  return seq_cmp(bnode_grant(a)->seq, bnode_grant(b)->seq);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* A blocked tree is augmented: each waiter carries the least that any
 * waiter in its subtree asks of the resource (blocked_need, blocked_need_min in
 * grant.h), so that "which is the oldest waiter that fits?" is a descent. */
static bool blocked_aug(cq__rbnode *n) {
  struct cq__grant *g = bnode_grant(n);
  bool changed = false;
  for (int k = 0; k < 2; k++) {
    int64_t m = g->blocked_need[k];
    for (int d = 0; d < 2; d++)
      if (n->child[d] != NULL)
        m = min64(m, bnode_grant(n->child[d])->blocked_need_min[k]);
    changed |= g->blocked_need_min[k] != m;
    g->blocked_need_min[k] = m;
  }
  return changed;
}

/* Block g on its item i: in the blocked tree of i's resource, with what it
 * asks there. */
static void block_on(struct cq__grant *g, unsigned i) {
  const struct cq__gitem *it = &g->it[i];
  int64_t amount = g->req->items[i].amount;
  bool whole = it->res->kind == CQ__RES_DEVICES && it->mode == CQ__MODE_WHOLE;
  g->blocker = (uint8_t)i;
  g->blocked_need[0] = whole ? INT64_MAX : amount;
  g->blocked_need[1] = whole ? amount : INT64_MAX;
  cq__rb_insert_aug(&it->res->blocked, &g->bnode, blocked_cmp, blocked_aug);
}

static void unblock(struct cq__grant *g) {
  cq__rb_remove_aug(&g->it[g->blocker].res->blocked, &g->bnode, blocked_aug);
}

static int claim_cmp(const cq__rbnode *a, const cq__rbnode *b) {
  return seq_cmp(item_grant(claim_item(a))->seq,
                 item_grant(claim_item(b))->seq);
}

static int deadline_cmp(const cq__rbnode *a, const cq__rbnode *b) {
  const struct cq__grant *ga = CQ__CONTAINER_OF(a, struct cq__grant, dnode);
  const struct cq__grant *gb = CQ__CONTAINER_OF(b, struct cq__grant, dnode);
  if (ga->deadline_ms != gb->deadline_ms)
    return ga->deadline_ms < gb->deadline_ms ? -1 : 1;
  return seq_cmp(ga->seq, gb->seq);
}

/* ------------------------------------------------------------------------ */
/* What is free, withheld, open and reserved                                 */
/* ------------------------------------------------------------------------ */

/* The claimant's item on r, or NULL: the one lookup of it. */
static const struct cq__gitem *claimant_item(const struct cq__res *r) {
  cq__rbnode *n = cq__rb_first(&r->claims);
  return n != NULL ? claim_item(n) : NULL;
}

/* The claimant's item on r when its reservation applies to a request of
 * arrival `seq` (the claimant is older) and it is not `ignore`'s (backfill
 * past the head ignores the head's), else NULL. */
static const struct cq__gitem *older_claimant(const struct cq__res *r,
                                              uint64_t seq,
                                              const struct cq__grant *ignore) {
  const struct cq__gitem *c = claimant_item(r);
  if (c == NULL || item_grant(c)->seq >= seq || item_grant(c) == ignore)
    return NULL;
  return c;
}

/* How many devices a claimer of a device pool reserves: one for a
 * fraction, n for n whole devices. */
static int64_t dev_want(const struct cq__gitem *c) {
  return c->mode == CQ__MODE_WHOLE ? cq__item_ask(c)->amount : 1;
}

/* How many devices of r the claimers older than `seq` reserve: they
 * reserve in arrival order, each the most free of what the older ones
 * left, so together they hold the first that many devices in reservation
 * order (place.h). Past the online devices nothing is left. */
static int64_t reserved_before(const struct cq__res *r, uint64_t seq) {
  cq__rbnode *last = cq__rb_last(&r->claims);
  if (last == NULL || item_grant(claim_item(last))->seq < seq)
    return r->claim_want; /* younger than every claimer: a new arrival */
  int64_t count = 0;
  for (cq__rbnode *n = cq__rb_first(&r->claims);
       n != NULL && count < (int64_t)r->n_online; n = cq__rb_next(n)) {
    const struct cq__gitem *c = claim_item(n);
    if (item_grant(c)->seq >= seq)
      break;
    count += dev_want(c);
  }
  return count;
}

/* What a backfill younger than head h must leave on device pool r: only
 * the claimant's reservation, and nothing when the claimant is h. As on a
 * budget, backfill respects one claimant; honouring every waiter's
 * reservation would leave it nothing once waiters outnumber devices. */
static int64_t reserved_for_backfill(const struct cq__res *r, uint64_t seq,
                                     const struct cq__grant *h) {
  const struct cq__gitem *c = claimant_item(r);
  if (c == NULL || item_grant(c) == h || item_grant(c)->seq >= seq)
    return 0;
  return dev_want(c);
}

/* How many devices of r a request of arrival `seq` may not use: what the
 * older claimers reserve, or when backfilling past `ignore` what backfill
 * respects. */
static int64_t reserved_for(const struct cq__res *r, uint64_t seq,
                            const struct cq__grant *ignore) {
  return ignore != NULL ? reserved_for_backfill(r, seq, ignore)
                        : reserved_before(r, seq);
}

uint64_t cq__reserved_devices_for(struct cq__res *r, const struct cq__grant *g,
                                  const struct cq__grant *ignore) {
  return cq__dev_reserve(r, reserved_for(r, g->seq, ignore));
}

uint64_t cq__policy_reservation(struct cq__res *r) {
  return cq__dev_reserve(r, r->claim_want);
}

int64_t cq__policy_withheld(struct cq__res *r, uint64_t word) {
  if (r->kind == CQ__RES_DEVICES)
    return cq__dev_withheld(r, r->claim_want);
  const struct cq__gitem *c = claimant_item(r);
  if (c == NULL)
    return 0;
  int64_t f = cq__w_free(word, cq__res_capacity(r));
  int64_t need = cq__item_need(item_grant(c), c->index);
  return need < f ? need : f;
}

/* Units of budget r offered to a request of arrival `seq`. */
static int64_t budget_offer(const struct cq__res *r, uint64_t seq,
                            const struct cq__grant *ignore) {
  int64_t f = cq__budget_free(r);
  const struct cq__gitem *c = older_claimant(r, seq, ignore);
  if (c != NULL) {
    int64_t need = cq__item_need(item_grant(c), c->index);
    f -= need < f ? need : f;
  }
  return f;
}

int64_t cq__policy_open(const struct cq__res *r) {
  return budget_offer(r, UINT64_MAX, NULL);
}

/* Whether item i of g fits what its resource offers a request of arrival
 * `seq` (g's own, or UINT64_MAX for a sleeper, which tries as a new
 * arrival), with the withholding of `ignore` (the head, when backfilling)
 * disregarded. */
static bool covered_at(const struct cq__grant *g, unsigned i, uint64_t seq,
                       const struct cq__grant *ignore) {
  struct cq__res *r = g->it[i].res;
  if (r->kind == CQ__RES_DEVICES) {
    /* Once every online device is reserved nothing is left to use. */
    int64_t count = reserved_for(r, seq, ignore);
    return count < (int64_t)r->n_online &&
           cq__dev_fits(r, g->it[i].mode, cq__item_need(g, i),
                        cq__dev_reserve(r, count));
  }
  return cq__item_need(g, i) <= budget_offer(r, seq, ignore);
}

static bool covered(const struct cq__grant *g, unsigned i) {
  return covered_at(g, i, g->seq, NULL);
}

/* Whether g is covered on every item at arrival `seq`, with `ignore`'s
 * withholding disregarded. */
static bool covered_all_at(const struct cq__grant *g, uint64_t seq,
                           const struct cq__grant *ignore) {
  for (unsigned i = 0; i < g->n_items; i++)
    if (!covered_at(g, i, seq, ignore))
      return false;
  return true;
}

static bool covered_all(const struct cq__grant *g,
                        const struct cq__grant *ignore) {
  return covered_all_at(g, g->seq, ignore);
}

/* ------------------------------------------------------------------------ */
/* Claims, dirty resources                                                   */
/* ------------------------------------------------------------------------ */

static void mark_dirty(cq_pool *p, struct cq__res *r, uint64_t after_seq) {
  p->bf.kick = true;
  if (!r->dirty) {
    r->dirty = true;
    r->walk_seq = after_seq;
    r->dirty_next = p->q.dirty;
    p->q.dirty = r;
  } else if (after_seq < r->walk_seq) {
    r->walk_seq = after_seq;
  }
}

/* Units of r came back, or were withheld by a waiter that left (seq): walk
 * its blocked waiters younger than after_seq again, and in a backfill pool
 * let the waiters behind the head try too, whatever blocks them. */
static void units_returned(cq_pool *p, struct cq__res *r, uint64_t after_seq) {
  if (r->blocked.count != 0 || ((p->flags & CQ_POOL_BACKFILL) &&
                                p->q.head != NULL && p->q.head->qnext != NULL))
    mark_dirty(p, r, after_seq);
  if (r->n_sleepers != 0)
    p->q.nudge = true;
}

/*
 * Record that waiter g claims item i. If it became the claimant, younger
 * waiters blocked there may now be offered more (its need can be smaller
 * than the previous claimant's), so the resource is walked again from g on.
 */
static void claim(cq_pool *p, struct cq__grant *g, unsigned i) {
  struct cq__gitem *it = &g->it[i];
  if (it->flags & CQ__IT_CLAIMED)
    return;
  struct cq__res *r = it->res;
  if (r->claims.count == 0)
    cq__budget_contend(r, true);
  cq__rb_insert(&r->claims, &it->u.claim, claim_cmp);
  it->flags |= CQ__IT_CLAIMED;
  if (r->kind == CQ__RES_DEVICES)
    r->claim_want += dev_want(it);
  if (cq__rb_first(&r->claims) == &it->u.claim) {
    cq__event(p, CQ_EVENT_RESERVED, g, r, 0);
    if (r->blocked.count != 0)
      mark_dirty(p, r, g->seq);
  }
}

/* Drop every claim of g; where g was the claimant, the next oldest claimer
 * takes over and the waiters blocked there are walked again. */
static void drop_claims(cq_pool *p, struct cq__grant *g) {
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__gitem *it = &g->it[i];
    if (!(it->flags & CQ__IT_CLAIMED))
      continue;
    struct cq__res *r = it->res;
    bool was_claimant = cq__rb_first(&r->claims) == &it->u.claim;
    if (r->kind == CQ__RES_DEVICES)
      r->claim_want -= dev_want(it);
    cq__rb_remove(&r->claims, &it->u.claim);
    it->flags &= (uint8_t)~CQ__IT_CLAIMED;
    if (r->claims.count == 0)
      cq__budget_contend(r, false);
    if (was_claimant && r->claims.count != 0)
      cq__event(p, CQ_EVENT_RESERVED,
                item_grant(claim_item(cq__rb_first(&r->claims))), r, 0);
    /* What it withheld is open again; on a device pool every claimer's
     * reservation shaped what younger ones may use. */
    if (was_claimant || r->kind == CQ__RES_DEVICES)
      units_returned(p, r, g->seq);
  }
}

/*
 * Claim what g lacks (only the first lack with staged claims) and return the
 * index of the first item it lacks, or -1 when it is covered everywhere.
 */
static int claim_lacks(cq_pool *p, struct cq__grant *g) {
  bool staged = (p->flags & CQ_POOL_STAGED_CLAIMS) != 0;
  int first = -1;
  for (unsigned i = 0; i < g->n_items; i++) {
    if (covered(g, i))
      continue;
    if (first < 0)
      first = (int)i;
    else if (staged)
      break;
    claim(p, g, i);
  }
  return first;
}

/* ------------------------------------------------------------------------ */
/* Holding                                                                   */
/* ------------------------------------------------------------------------ */

/* Whether item i of g, arriving or waiting, is a lone request now. */
static bool item_lone(const struct cq__grant *g, unsigned i) {
  const struct cq__res *r = g->it[i].res;
  return r->kind == CQ__RES_BUDGET &&
         cq__is_lone(r, g->req->items[i].amount, cq__res_capacity(r));
}

/* Count held grant g (delta +1) among the pool's held grants and its
 * resources' holders, or stop counting it (-1). */
static void count_held(cq_pool *p, struct cq__grant *g, int delta) {
  p->q.n_held += (uint64_t)(int64_t)delta;
  for (unsigned i = 0; i < g->n_items; i++)
    g->it[i].res->n_holders += (uint64_t)(int64_t)delta;
  if (delta > 0) {
    g->qprev = NULL;
    g->qnext = p->q.holders;
    if (p->q.holders != NULL)
      p->q.holders->qprev = g;
    p->q.holders = g;
    return;
  }
  if (g->qprev != NULL)
    g->qprev->qnext = g->qnext;
  else
    p->q.holders = g->qnext;
  if (g->qnext != NULL)
    g->qnext->qprev = g->qprev;
  g->qprev = g->qnext = NULL;
}

/*
 * Take every unit g asks for, or none; devices[i] receives where device
 * items were placed, as for a request of arrival `seq`, with the
 * reservations of `ignore` (the head, when backfilling) disregarded. Under
 * the lock a contended budget only ever gains
 * free units, and device pools change only under the lock, so what covered()
 * saw is still there; an uncontended budget may have been taken by a lock-free
 * acquire meanwhile, and then this fails and the caller examines g again.
 */
static bool take_units(struct cq__grant *g, int32_t *devices, uint64_t seq,
                       const struct cq__grant *ignore) {
  /* Budgets first: only they can fail. */
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = g->it[i].res;
    if (r->kind != CQ__RES_DEVICES &&
        !cq__budget_take(r, cq__item_need(g, i), item_lone(g, i))) {
      while (i-- > 0)
        if (g->it[i].res->kind != CQ__RES_DEVICES)
          cq__budget_put(g->it[i].res, cq__item_need(g, i), item_lone(g, i));
      return false;
    }
  }
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = g->it[i].res;
    if (r->kind == CQ__RES_DEVICES)
      devices[i] =
          cq__dev_take(r, g->it[i].mode, cq__item_need(g, i),
                       cq__dev_reserve(r, reserved_for(r, seq, ignore)));
  }
  return true;
}

/* Record the units taken by take_units() as held (claims already gone). */
static void hold_units(cq_pool *p, struct cq__grant *g, const int32_t *devices,
                       int64_t now) {
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = g->it[i].res;
    r->grants_total++;
    int64_t need = cq__item_need(g, i);
    if (g->it[i].mode == CQ__MODE_WHOLE)
      need *= CQ_DEVICE_MILLI;
    if (item_lone(g, i)) {
      g->it[i].flags |= CQ__IT_LONE;
      g->lockfree = 0; /* its release clears the lone bit, under the lock */
    }
    g->it[i].u.hold.held = need;
    g->it[i].u.hold.dev = r->kind == CQ__RES_DEVICES ? devices[i] : -1;
  }
  /* A grant that may be released without the lock holds units on every
   * budget it names until then; the others are counted (cq_pool_destroy). */
  if (!g->lockfree)
    count_held(p, g, +1);
  cq__gstate_set(g, CQ__G_HELD);
  cq__limit_granted(p, g, now);
  g->req = NULL; /* the request may go once its attempt is granted */
}

/* Give back `amount` of item i that g holds. */
static void give_back(cq_pool *p, struct cq__grant *g, unsigned i,
                      int64_t amount, bool lone_ends) {
  struct cq__res *r = g->it[i].res;
  if (r->kind == CQ__RES_DEVICES)
    cq__dev_put(r, g->it[i].mode, g->it[i].u.hold.dev, amount);
  else
    cq__budget_put(r, amount, lone_ends);
  g->it[i].u.hold.held -= amount;
  units_returned(p, r, 0);
}

/* ------------------------------------------------------------------------ */
/* Granting, queueing, leaving                                               */
/* ------------------------------------------------------------------------ */

static void examine(cq_pool *p, struct cq__grant *g, struct cq__outbox *o);
static void sweep(cq_pool *p, struct cq__outbox *o);
static void settle(cq_pool *p, struct cq__outbox *o);
static bool windows_end(cq_pool *p, struct cq__outbox *o);
static void fast_gate(cq_pool *p);

void cq__policy_init(cq_pool *p, int64_t barge_ms) {
  p->q.next_seq = 1;
  /* Backfill's shadow time counts on every waiter's place: no window. */
  p->q.barge_ms = (p->flags & CQ_POOL_BACKFILL) ? 0 : barge_ms;
  fast_gate(p);
  cq__bf_init(&p->bf);
}

void cq__policy_bind(cq_pool *p, struct cq__grant *g,
                     const struct cq__req *req) {
  g->pool = p;
  g->req = req;
  g->seq = p->q.next_seq++;
  g->n_items = (uint8_t)req->n_items;
  /* With an event hook releases take the lock too, to record the event;
   * with backfill, so that the shadow time sees them. */
  g->lockfree = (req->flags & CQ__REQ_LOCKFREE) != 0 && cq__pool_lockfree(p);
  g->status = 0;
  g->msg[0] = '\0';
  for (unsigned i = 0; i < req->n_items; i++) {
    struct cq__res *r = req->items[i].res;
    g->it[i].res = r;
    g->it[i].flags = 0;
    g->it[i].index = (uint8_t)i;
    g->it[i].mode = req->items[i].mode;
    /* Lock-free grants stop when their count field fills: empty it. */
    if (cq__w_count(atomic_load_explicit(&r->word, memory_order_relaxed)) >=
        CQ__W_COUNT_HARVEST)
      cq__budget_harvest(r);
  }
}

/* The head that g, holding a limit, may backfill past now; else NULL. */
static const struct cq__grant *
backfill_past(cq_pool *p, const struct cq__grant *g, int64_t now) {
  if (!(p->flags & CQ_POOL_BACKFILL) || g->req->limit_ms <= 0)
    return NULL;
  const struct cq__grant *h = cq__bf_head(p, now);
  return h != g ? h : NULL;
}

bool cq__policy_arrive(cq_pool *p, struct cq__grant *g, struct cq__outbox *o) {
  /* Sleepers past their window claim before the new arrival is looked at:
   * it is younger than all of them. */
  if (windows_end(p, o))
    settle(p, o);
  int32_t devices[CQ_REQ_MAX_ITEMS] = {0};
  int64_t now = cq__pool_now(p);
  const struct cq__grant *h = NULL;
  if (!covered_all(g, NULL)) {
    /* A request with a limit may still backfill past the head. */
    h = backfill_past(p, g, now);
    if (h == NULL || !covered_all(g, h) || !cq__bf_allows(p, g, now))
      return false;
  }
  if (!take_units(g, devices, g->seq, h))
    return false;
  hold_units(p, g, devices, now);
  if (h != NULL)
    p->bf.backfilled++;
  cq__event(p, CQ_EVENT_GRANTED, g, NULL, 0);
  return true;
}

static void queue_unlink(cq_pool *p, struct cq__grant *g) {
  if (g->qprev != NULL)
    g->qprev->qnext = g->qnext;
  else
    p->q.head = g->qnext;
  if (g->qnext != NULL)
    g->qnext->qprev = g->qprev;
  else
    p->q.tail = g->qprev;
  g->qprev = g->qnext = NULL;
}

/* Link g into the queue in arrival order: at the tail for a new arrival,
 * further in for a sleeper that claims its place. */
static void queue_link(cq_pool *p, struct cq__grant *g) {
  struct cq__grant *after = p->q.tail;
  while (after != NULL && after->seq > g->seq)
    after = after->qprev;
  g->qprev = after;
  g->qnext = after != NULL ? after->qnext : p->q.head;
  if (g->qnext != NULL)
    g->qnext->qprev = g;
  else
    p->q.tail = g;
  if (after != NULL)
    after->qnext = g;
  else
    p->q.head = g;
  p->q.n_waiters++;
  g->limited_waiter = g->req->limit_ms > 0;
  p->bf.candidates += g->limited_waiter;
}

/* What every waiter, asleep or queued, starts with. */
static void start_waiting(cq_pool *p, struct cq__grant *g,
                          int64_t deadline_ms) {
  g->deadline_ms = deadline_ms;
  g->t_enqueue = cq__pool_now(p);
  g->woken = 0;
  for (unsigned i = 0; i < g->n_items; i++)
    g->it[i].res->n_waiting++;
  if (g->deadline_ms != CQ_NEVER)
    cq__rb_insert(&p->q.deadlines, &g->dnode, deadline_cmp);
  cq__gstate_set(g, CQ__G_WAITING);
  cq__event(p, CQ_EVENT_PARKED, g, NULL, 0);
}

void cq__policy_enqueue(cq_pool *p, struct cq__grant *g, int64_t deadline_ms,
                        struct cq__outbox *o) {
  queue_link(p, g);
  start_waiting(p, g, deadline_ms);
  /* Block on the first item for now; examine() moves g to its real
   * blocker, or grants it if lock-free releases freed enough meanwhile. */
  block_on(g, 0);
  examine(p, g, o);
}

/* Take g out of every waiting structure (claims included). */
static void sleeper_unlink(cq_pool *p, struct cq__grant *g);

static void dequeue(cq_pool *p, struct cq__grant *g) {
  CQ__ASSERT(cq__gstate(g) == CQ__G_WAITING);
  if (g->deadline_ms != CQ_NEVER)
    cq__rb_remove(&p->q.deadlines, &g->dnode);
  for (unsigned i = 0; i < g->n_items; i++)
    g->it[i].res->n_waiting--;
  if (g->asleep) {
    sleeper_unlink(p, g);
    return;
  }
  drop_claims(p, g);
  unblock(g);
  queue_unlink(p, g);
  p->q.n_waiters--;
  p->bf.candidates -= g->limited_waiter;
  g->limited_waiter = 0;
}

/* Tell a waiter its attempt is over: wake its thread or queue its callback.
 * A thread that decided its own outcome (p->q.self) is awake already; one
 * nudged that has not run since (its window ended meanwhile, and another
 * event decided it) was counted woken when it was nudged. */
static void notify(cq_pool *p, struct cq__grant *g, struct cq__outbox *o) {
  if (g == p->q.self) {
    atomic_store_explicit(&g->posted, 1, memory_order_relaxed);
    return;
  }
  if (g->style == CQ__STYLE_BLOCKING && !g->woken)
    p->q.wakeups++;
  cq__outbox_post(o, g);
}

static void grant_waiter(cq_pool *p, struct cq__grant *g,
                         const int32_t *devices, struct cq__outbox *o) {
  int64_t now = cq__pool_now(p);
  cq__bf_head_granted(p, g, now);
  dequeue(p, g);
  hold_units(p, g, devices, now);
  int64_t waited = now - g->t_enqueue;
  for (unsigned i = 0; i < g->n_items; i++)
    cq__hist_add(&g->it[i].res->wait, waited);
  cq__event(p, CQ_EVENT_GRANTED, g, NULL, waited);
  p->q.waited_grants++;
  g->status = 0;
  notify(p, g, o);
}

/* Waiter g leaves with `status` (not 0) and is told; no sweep. */
static void leave(cq_pool *p, struct cq__grant *g, int status,
                  struct cq__outbox *o) {
  for (unsigned i = 0; i < g->n_items; i++) {
    if (status == CQ_ETIMEDOUT)
      g->it[i].res->timeouts++;
    else if (status == CQ_ECANCELED)
      g->it[i].res->cancels++;
  }
  dequeue(p, g);
  cq__gstate_set(g, CQ__G_IDLE);
  g->status = status;
  cq__event(p,
            status == CQ_ETIMEDOUT   ? CQ_EVENT_TIMED_OUT
            : status == CQ_ECANCELED ? CQ_EVENT_CANCELLED
            : status == CQ_ECLOSED   ? CQ_EVENT_CLOSED
                                     : CQ_EVENT_NEVER,
            g, NULL, 0);
  notify(p, g, o);
}

void cq__policy_leave(cq_pool *p, struct cq__grant *g, int status,
                      struct cq__outbox *o) {
  leave(p, g, status, o);
  windows_end(p, o);
  sweep(p, o);
}

/* ------------------------------------------------------------------------ */
/* Units coming back                                                         */
/* ------------------------------------------------------------------------ */

static void nudge_one(cq_pool *p, struct cq__outbox *o);

/* End an event that may have left resources to walk, or a sleeper to
 * wake. */
static void settle(cq_pool *p, struct cq__outbox *o) {
  if (p->q.dirty != NULL)
    sweep(p, o);
  else
    nudge_one(p, o);
}

void cq__policy_release(cq_pool *p, struct cq__grant *g, struct cq__outbox *o) {
  cq__limit_released(p, g);
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__gitem *it = &g->it[i];
    /* A lone grant leaves: the budget opens again, with what it gave back
     * early too. */
    bool lone = (it->flags & CQ__IT_LONE) != 0;
    it->flags &= (uint8_t)~CQ__IT_LONE;
    give_back(p, g, i, it->u.hold.held, lone);
  }
  count_held(p, g, -1);
  cq__gstate_set(g, CQ__G_IDLE);
  cq__event(p, CQ_EVENT_RELEASED, g, NULL, 0);
  windows_end(p, o);
  settle(p, o);
}

/*
 * A lock-free grant holds units on every budget it names until its
 * release, which is how cq_pool_destroy() sees it. One that gives units
 * back early could come to hold none, so from then on it is counted among
 * the held grants, and released under the lock.
 */
static void adopt(cq_pool *p, struct cq__grant *g) {
  if (!g->lockfree)
    return;
  g->lockfree = 0;
  g->limited = 0;
  g->overdue = 0;
  g->limit_ms = 0;
  count_held(p, g, +1);
}

void cq__policy_give_back(cq_pool *p, struct cq__grant *g, unsigned i,
                          int64_t amount, struct cq__outbox *o) {
  cq__bf_invalidate(p); /* the head's projection counted it whole */
  adopt(p, g);
  give_back(p, g, i, amount, false);
  windows_end(p, o);
  settle(p, o);
}

void cq__policy_give_back_device(cq_pool *p, struct cq__grant *g, unsigned i,
                                 uint32_t index, int64_t milli,
                                 struct cq__outbox *o) {
  struct cq__gitem *it = &g->it[i];
  cq__bf_invalidate(p);
  if (it->mode == CQ__MODE_FRACTION) {
    give_back(p, g, i, milli, false);
  } else {
    cq__dev_put_one(it->res, &it->u.hold.dev, index);
    it->u.hold.held -= CQ_DEVICE_MILLI;
    units_returned(p, it->res, 0);
  }
  windows_end(p, o);
  settle(p, o);
}

void cq__policy_fast_released(cq_pool *p, struct cq__grant *g,
                              struct cq__outbox *o) {
  for (unsigned i = 0; i < g->n_items; i++)
    units_returned(p, g->it[i].res, 0);
  windows_end(p, o);
  settle(p, o);
}

void cq__policy_fast_failed(cq_pool *p, const struct cq__req *req,
                            uint32_t uncounted, bool contended,
                            struct cq__outbox *o) {
  for (unsigned i = 0; uncounted != 0; i++, uncounted >>= 1)
    if (uncounted & 1)
      req->items[i].res->grants_total--; /* harvested before it was undone */
  if (!contended)
    return;
  /* Units taken for a moment went back to a contended budget, or one a
   * sleeper names. */
  for (unsigned i = 0; i < req->n_items; i++)
    units_returned(p, req->items[i].res, 0);
  sweep(p, o);
}

/* ------------------------------------------------------------------------ */
/* Bounded barging                                                           */
/* ------------------------------------------------------------------------ */

/* Count sleeper g on its resources (delta +1) or stop (-1); a budget's
 * sleepers bit is set while any sleeper names it, so that lock-free
 * releases come to the lock to wake one. */
static void count_sleeper(struct cq__grant *g, int delta) {
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = g->it[i].res;
    r->n_sleepers += (uint64_t)(int64_t)delta;
    if (r->kind != CQ__RES_DEVICES &&
        r->n_sleepers == (delta > 0 ? UINT64_C(1) : UINT64_C(0)))
      cq__budget_sleepers(r, delta > 0);
  }
}

static void sleeper_unlink(cq_pool *p, struct cq__grant *g) {
  bool oldest = g->qprev == NULL;
  if (g->qprev != NULL)
    g->qprev->qnext = g->qnext;
  else
    p->q.sleepers = g->qnext;
  if (g->qnext != NULL)
    g->qnext->qprev = g->qprev;
  else
    p->q.sleepers_tail = g->qprev;
  g->qprev = g->qnext = NULL;
  p->q.n_sleepers--;
  count_sleeper(g, -1);
  g->asleep = 0;
  if (oldest)
    fast_gate(p);
  if (p->q.nudged == g) { /* what it was woken for may fit another */
    p->q.nudged = NULL;
    p->q.nudge = true;
  }
}

/* Sleeper g tries as a new arrival would: granted, or nothing changes. */
static bool sleeper_try(cq_pool *p, struct cq__grant *g, struct cq__outbox *o) {
  int32_t devices[CQ_REQ_MAX_ITEMS] = {0};
  if (!covered_all_at(g, UINT64_MAX, NULL) ||
      !take_units(g, devices, UINT64_MAX, NULL))
    return false;
  grant_waiter(p, g, devices, o);
  return true;
}

/* Sleeper g's window has passed: it claims its place by arrival, and waits
 * as any waiter does. */
static void sleeper_claims(cq_pool *p, struct cq__grant *g,
                           struct cq__outbox *o) {
  sleeper_unlink(p, g);
  p->q.converted++;
  queue_link(p, g);
  block_on(g, 0);
  examine(p, g, o);
}

/* Every sleeper whose window has passed by `now` claims its place, oldest
 * first: they went to sleep in arrival order, each for the same window. */
static bool claim_due(cq_pool *p, int64_t now, struct cq__outbox *o) {
  bool any = false;
  for (; p->q.sleepers != NULL && p->q.sleepers->wake_until <= now; any = true)
    sleeper_claims(p, p->q.sleepers, o);
  return any;
}

/* The windows that have passed end now, whatever their threads do: where
 * an event that can grant begins. The clock is read only while someone
 * sleeps. Returns whether any ended; then what their claims left to walk
 * is the event's to sweep. */
static bool windows_end(cq_pool *p, struct cq__outbox *o) {
  return p->q.sleepers != NULL && claim_due(p, cq__pool_now(p), o);
}

/* Tell lock-free acquires how long they may go past the sleepers: until
 * the oldest window ends (pool.h). Whenever the oldest sleeper changes. */
static void fast_gate(cq_pool *p) {
  cq__pool_fast_until_set(p, p->q.sleepers != NULL ? p->q.sleepers->wake_until
                                                   : CQ_NEVER);
}

/* Wake the oldest sleeper that fits, unless one is already on its way:
 * one at a time, so that a release wakes one thread, not all. */
static void nudge_one(cq_pool *p, struct cq__outbox *o) {
  if (!p->q.nudge || p->q.nudged != NULL)
    return;
  p->q.nudge = false;
  for (struct cq__grant *g = p->q.sleepers; g != NULL; g = g->qnext)
    if (covered_all_at(g, UINT64_MAX, NULL)) {
      p->q.nudged = g;
      p->q.wakeups++;
      g->woken = 1;
      o->nudge = g->park;
      return;
    }
}

void cq__policy_sleep(cq_pool *p, struct cq__grant *g, int64_t deadline_ms,
                      struct cq__outbox *o) {
  g->qnext = NULL;
  g->qprev = p->q.sleepers_tail;
  if (g->qprev != NULL)
    g->qprev->qnext = g;
  else
    p->q.sleepers = g;
  p->q.sleepers_tail = g;
  p->q.n_sleepers++;
  g->asleep = 1;
  count_sleeper(g, +1);
  start_waiting(p, g, deadline_ms);
  g->wake_until = g->t_enqueue + p->q.barge_ms;
  if (p->q.sleepers == g)
    fast_gate(p);
  /* A lock-free release that ran before the sleepers bit was set did not
   * come to the lock: look once more, now that it is. */
  p->q.self = g;
  sleeper_try(p, g, o);
  p->q.self = NULL;
}

void cq__policy_woken(cq_pool *p, struct cq__grant *g, struct cq__outbox *o) {
  g->woken = 0; /* it runs: a later wake-up is a new one */
  if (!g->asleep)
    return; /* it claims its place already: the sweep grants it */
  if (p->q.nudged == g)
    p->q.nudged = NULL;
  p->q.self = g;
  /* Its own window among them, once it has passed: then it claims. */
  bool ended = windows_end(p, o);
  if (g->asleep)
    sleeper_try(p, g, o);
  if (ended)
    settle(p, o);
  p->q.self = NULL;
  /* What is left may fit another sleeper. */
  p->q.nudge = p->q.n_sleepers != 0;
  nudge_one(p, o);
}

bool cq__policy_asleep(const struct cq__grant *g, int64_t *until) {
  *until = g->wake_until;
  return g->asleep != 0;
}

/* ------------------------------------------------------------------------ */
/* The sweep                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * next_candidate() for a device pool: the claimers in arrival order, each
 * allowed what the older ones do not reserve (reserved_before() as it
 * goes); once they reserve every online device, nobody younger can fit.
 */
static struct cq__grant *next_device_candidate(struct cq__res *r) {
  /* Nobody fits when no device has room for the smallest fraction asked
   * and too few are free for the fewest whole devices asked. */
  const struct cq__grant *top = bnode_grant(r->blocked.root);
  if (!cq__dev_may_fit(r, top->blocked_need_min[0], top->blocked_need_min[1]))
    return NULL;
  int64_t count = 0;
  for (cq__rbnode *n = cq__rb_first(&r->claims);
       n != NULL && count < (int64_t)r->n_online; n = cq__rb_next(n)) {
    const struct cq__gitem *c = claim_item(n);
    struct cq__grant *w = item_grant(c);
    if (w->seq > r->walk_seq && w->blocker == c->index) {
      if (cq__dev_fits(r, c->mode, cq__item_need(w, c->index),
                       cq__dev_reserve(r, count)))
        return w;
      r->walk_seq = w->seq;
    }
    count += dev_want(c);
  }
  return NULL;
}

/*
 * The oldest waiter in subtree n of budget r's blocked tree, of arrival
 * `from` or younger, whose need (cq__need_at(), which keeps the order of
 * amounts, so the subtree's least amount gives its least need) is at most
 * `offer`. Subtrees whose least need is larger are never entered.
 */
static struct cq__grant *oldest_within(const struct cq__res *r, cq__rbnode *n,
                                       uint64_t from, int64_t offer) {
  int64_t cap = cq__res_capacity(r);
  while (n != NULL &&
         cq__need_at(r, bnode_grant(n)->blocked_need_min[0], cap) <= offer) {
    struct cq__grant *g = bnode_grant(n);
    if (g->seq >= from) {
      struct cq__grant *w = oldest_within(r, n->child[0], from, offer);
      if (w != NULL)
        return w;
      if (cq__need_at(r, g->blocked_need[0], cap) <= offer)
        return g;
    }
    n = n->child[1];
  }
  return NULL;
}

/*
 * The oldest waiter blocked on dirty resource r, younger than r's walk
 * position, that r now covers: a descent of the blocked tree, however many
 * wait there and fit nowhere.
 */
static struct cq__grant *next_candidate(struct cq__res *r) {
  if (r->blocked.root == NULL)
    return NULL;
  if (r->kind == CQ__RES_DEVICES)
    return next_device_candidate(r);
  int64_t free = cq__budget_free(r);
  if (free == 0)
    return NULL;
  uint64_t from = r->walk_seq + 1;
  int64_t open = free;
  const struct cq__gitem *c = claimant_item(r);
  if (c != NULL) {
    /* Blocked waiters have claimed r, so a claimant blocked here is the
     * oldest of them, and the one offered everything free. */
    struct cq__grant *cg = item_grant(c);
    int64_t need = cq__item_need(cg, c->index);
    if (bnode_grant(cq__rb_first(&r->blocked)) == cg && cg->seq >= from &&
        need <= free)
      return cg;
    open -= min64(need, free);
  }
  return open > 0 ? oldest_within(r, r->blocked.root, from, open) : NULL;
}

/*
 * Examine waiter g: grant it, or claim what it lacks and block it on the
 * first. Two races with lock-free acquires and releases are settled here:
 * - a lock-free acquire may take units of a budget g had not claimed
 *   between covered() and take_units(); g then lacks it, and claims it on
 *   the next round, after which no lock-free acquire can take it;
 * - a lock-free release may return units of the blocker after g found it
 *   lacking and before g's claim made it contended; such a release does not
 *   sweep, so the blocker is checked once more after the claim.
 * Without other threads neither race happens and this is one round.
 */
static void examine(cq_pool *p, struct cq__grant *g, struct cq__outbox *o) {
  for (;;) {
    int first = claim_lacks(p, g);
    if (first < 0) {
      int32_t devices[CQ_REQ_MAX_ITEMS] = {0};
      if (take_units(g, devices, g->seq, NULL)) {
        grant_waiter(p, g, devices, o);
        return;
      }
      continue;
    }
    if ((unsigned)first != g->blocker) {
      unblock(g);
      block_on(g, (unsigned)first);
    }
    if (!covered(g, (unsigned)first))
      return;
  }
}

/* Fail every waiter that can no longer ever fit (a capacity shrank, a
 * device went offline) with CQ_ENEVER. */
static void fail_unsatisfiable(cq_pool *p, struct cq__outbox *o) {
  struct cq__grant *lists[2] = {p->q.head, p->q.sleepers};
  for (int k = 0; k < 2; k++) {
    struct cq__grant *g = lists[k];
    while (g != NULL) {
      struct cq__grant *next = g->qnext;
      if (cq__validate(g->req, g->msg) != 0)
        leave(p, g, CQ_ENEVER, o);
      g = next;
    }
  }
}

static void sweep_once(cq_pool *p, struct cq__outbox *o) {
  for (;;) {
    struct cq__grant *best = NULL;
    struct cq__res **link = &p->q.dirty;
    while (*link != NULL) {
      struct cq__res *r = *link;
      struct cq__grant *w = next_candidate(r);
      if (w == NULL) {
        r->dirty = false;
        *link = r->dirty_next;
        continue;
      }
      if (best == NULL || w->seq < best->seq)
        best = w;
      link = &r->dirty_next;
    }
    if (best == NULL)
      return;
    /* Nothing older than best can be covered now: move every walk past it. */
    for (struct cq__res *r = p->q.dirty; r != NULL; r = r->dirty_next)
      if (r->walk_seq < best->seq)
        r->walk_seq = best->seq;
    examine(p, best, o);
  }
}

/*
 * Backfill the waiters behind the head that may pass it now, oldest first.
 * Returns whether any was granted. Only after something changed that can
 * make one fit (units freed, a new head or shadow time), since it walks the
 * queue.
 */
static bool backfill_pass(cq_pool *p, struct cq__outbox *o) {
  if (!(p->flags & CQ_POOL_BACKFILL) || p->q.head == NULL ||
      p->q.head->qnext == NULL)
    return false;
  int64_t now = cq__pool_now(p);
  const struct cq__grant *h = cq__bf_head(p, now);
  if (h == NULL || !p->bf.kick)
    return false;
  p->bf.kick = false;
  if (p->bf.candidates == 0)
    return false; /* no waiter has a limit: none may pass the head */
  bool any = false;
  struct cq__grant *next;
  for (struct cq__grant *w = h->qnext; w != NULL; w = next) {
    next = w->qnext;
    int32_t devices[CQ_REQ_MAX_ITEMS] = {0};
    if (w->req->limit_ms > 0 && covered_all(w, h) && cq__bf_allows(p, w, now) &&
        take_units(w, devices, w->seq, h)) {
      grant_waiter(p, w, devices, o);
      p->bf.backfilled++;
      any = true;
    }
  }
  return any;
}

/* Examine waiters that may now fit, oldest first, until none can; then let
 * waiters pass the head where backfill allows it, and again. */
static void sweep(cq_pool *p, struct cq__outbox *o) {
  do
    sweep_once(p, o);
  while (backfill_pass(p, o) && p->q.dirty != NULL);
  nudge_one(p, o);
}

/* ------------------------------------------------------------------------ */
/* Capacities, time, closing                                                 */
/* ------------------------------------------------------------------------ */

void cq__policy_capacity_changed(cq_pool *p, struct cq__res *r, bool tighter,
                                 struct cq__outbox *o) {
  cq__bf_invalidate(p);
  if (tighter)
    fail_unsatisfiable(p, o);
  /* Growing frees units; shrinking may change what a lone claimant needs,
   * and devices coming and going move reservations. Either way the waiters
   * here are looked at again. */
  if (r->blocked.count != 0)
    mark_dirty(p, r, 0);
  if (r->n_sleepers != 0)
    p->q.nudge = true;
  windows_end(p, o);
  sweep(p, o);
}

void cq__policy_expire(cq_pool *p, int64_t now, struct cq__outbox *o) {
  cq__limits_expire(p, now);
  cq__rbnode *n;
  while ((n = cq__rb_first(&p->q.deadlines)) != NULL) {
    struct cq__grant *g = CQ__CONTAINER_OF(n, struct cq__grant, dnode);
    if (g->deadline_ms > now)
      break;
    leave(p, g, CQ_ETIMEDOUT, o);
  }
  claim_due(p, now, o);
  sweep(p, o);
}

int64_t cq__policy_next_deadline(const cq_pool *p) {
  int64_t next = cq__limits_first(p);
  cq__rbnode *n = cq__rb_first(&p->q.deadlines);
  if (n != NULL)
    next =
        min64(next, CQ__CONTAINER_OF(n, struct cq__grant, dnode)->deadline_ms);
  /* With its own clock a sleeper wakes itself when its window ends. */
  if ((p->flags & CQ_POOL_MANUAL_TIMERS) && p->q.sleepers != NULL)
    next = min64(next, p->q.sleepers->wake_until);
  return next;
}

void cq__policy_close(cq_pool *p, struct cq__outbox *o) {
  /* Everyone leaves; nobody is left to be granted, so no sweep. */
  while (p->q.head != NULL)
    leave(p, p->q.head, CQ_ECLOSED, o);
  while (p->q.sleepers != NULL)
    leave(p, p->q.sleepers, CQ_ECLOSED, o);
  for (struct cq__res *r = p->q.dirty; r != NULL; r = r->dirty_next)
    r->dirty = false;
  p->q.dirty = NULL;
}

/* ------------------------------------------------------------------------ */
/* The invariant checker                                                     */
/* ------------------------------------------------------------------------ */

static int check_blocked_cmp(const cq__rbnode *a, const cq__rbnode *b) {
  return blocked_cmp(a, b);
}

/* What the counted holders hold of r, over all its devices or in units. */
static int64_t holders_hold(const cq_pool *p, const struct cq__res *r,
                            uint64_t *holders) {
  int64_t sum = 0;
  *holders = 0;
  for (const struct cq__grant *g = p->q.holders; g != NULL; g = g->qnext)
    for (unsigned i = 0; i < g->n_items; i++)
      if (g->it[i].res == r) {
        sum += g->it[i].u.hold.held;
        (*holders)++;
      }
  return sum;
}

/* What the counted holders hold of device d of r. */
static int64_t holders_hold_device(const cq_pool *p, const struct cq__res *r,
                                   uint32_t d) {
  int64_t sum = 0;
  for (const struct cq__grant *g = p->q.holders; g != NULL; g = g->qnext)
    for (unsigned i = 0; i < g->n_items; i++) {
      const struct cq__gitem *it = &g->it[i];
      if (it->res != r)
        continue;
      if (it->mode == CQ__MODE_FRACTION)
        sum += it->u.hold.dev == (int32_t)d ? it->u.hold.held : 0;
      else
        for (int32_t k = it->u.hold.dev; k >= 0; k = r->devs[k].whole_next)
          sum += k == (int32_t)d ? CQ_DEVICE_MILLI : 0;
    }
  return sum;
}

/* Whether every waiter blocked on r has claimed r, says what it asks
 * there, and carries the least over its subtree. */
static bool check_blocked_summaries(const struct cq__res *r) {
  for (cq__rbnode *n = cq__rb_first(&r->blocked); n != NULL;
       n = cq__rb_next(n)) {
    const struct cq__grant *g = bnode_grant(n);
    const struct cq__gitem *it = &g->it[g->blocker];
    bool whole = r->kind == CQ__RES_DEVICES && it->mode == CQ__MODE_WHOLE;
    int64_t amount = g->req->items[g->blocker].amount;
    if (it->res != r || !(it->flags & CQ__IT_CLAIMED) ||
        g->blocked_need[0] != (whole ? INT64_MAX : amount) ||
        g->blocked_need[1] != (whole ? amount : INT64_MAX))
      return false;
    for (int k = 0; k < 2; k++) {
      int64_t m = g->blocked_need[k];
      for (int d = 0; d < 2; d++)
        if (n->child[d] != NULL)
          m = min64(m, bnode_grant(n->child[d])->blocked_need_min[k]);
      if (g->blocked_need_min[k] != m)
        return false;
    }
  }
  return true;
}

static void check_resource(const cq_pool *p, struct cq__res *r) {
  uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);
  /* The contended bit is set if and only if some waiter claims r. */
  CQ__ASSERT(((w & CQ__W_CONTENDED) != 0) == (r->claims.count != 0));
  CQ__ASSERT(cq__rb_check(&r->claims, claim_cmp) >= 0);
  CQ__ASSERT(cq__rb_check(&r->blocked, check_blocked_cmp) >= 0);
  CQ__ASSERT(check_blocked_summaries(r));
  uint64_t holders;
  int64_t held = holders_hold(p, r, &holders);
  CQ__ASSERT(holders == r->n_holders);
  if (r->kind != CQ__RES_DEVICES) {
    /* What the holders hold adds up to what is used; where grants may skip
     * the lock, those hold the rest, uncounted. */
    CQ__ASSERT(cq__pool_lockfree(p) ? held <= cq__w_used(w)
                                    : held == cq__w_used(w));
    return;
  }
  /* Devices are only ever held under the lock: exactly, device by device. */
  CQ__ASSERT(held == cq__w_used(w));
  CQ__ASSERT(cq__dev_tree_check(r));
  uint32_t online = 0;
  for (uint32_t d = 0; d < r->n_devs; d++) {
    const struct cq__dev *dev = &r->devs[d];
    CQ__ASSERT(holders_hold_device(p, r, d) == dev->used);
    CQ__ASSERT(dev->used >= 0 && dev->used <= CQ_DEVICE_MILLI);
    CQ__ASSERT(!dev->whole || dev->used == CQ_DEVICE_MILLI);
    online += dev->online;
  }
  CQ__ASSERT(online == r->n_online && r->by_free.count == r->n_online);
}

void cq__policy_check(cq_pool *p, bool alone) {
  /* The queue: by arrival, its counts, its trees. */
  uint64_t n = 0, candidates = 0, blocked = 0;
  const struct cq__grant *prev = NULL;
  for (const struct cq__grant *g = p->q.head; g != NULL; g = g->qnext) {
    CQ__ASSERT(cq__gstate(g) == CQ__G_WAITING);
    CQ__ASSERT(g->qprev == prev && (prev == NULL || prev->seq < g->seq));
    CQ__ASSERT(g->blocker < g->n_items);
    candidates += g->limited_waiter;
    /* At rest, no waiter is covered by its blocker (sweeps see to it).
     * A lock-free release may just have given units to a budget it is
     * blocked on, and be on its way to the lock: only a pool used by one
     * thread, or one without lock-free paths, is at rest for budgets. */
    const struct cq__res *b = g->it[g->blocker].res;
    if (b->kind == CQ__RES_DEVICES || alone || !cq__pool_lockfree(p))
      CQ__ASSERT(!covered(g, g->blocker));
    prev = g;
    n++;
  }
  CQ__ASSERT(prev == p->q.tail && n == p->q.n_waiters);
  CQ__ASSERT(candidates == p->bf.candidates);
  /* The sleepers: by arrival, each for the same window, claiming nothing;
   * the one nudged among them. */
  uint64_t sleepers = 0;
  bool nudged_found = p->q.nudged == NULL;
  prev = NULL;
  for (const struct cq__grant *g = p->q.sleepers; g != NULL; g = g->qnext) {
    CQ__ASSERT(cq__gstate(g) == CQ__G_WAITING && g->asleep &&
               g->style == CQ__STYLE_BLOCKING);
    CQ__ASSERT(g->qprev == prev && (prev == NULL || prev->seq < g->seq));
    CQ__ASSERT(prev == NULL || prev->wake_until <= g->wake_until);
    for (unsigned i = 0; i < g->n_items; i++)
      CQ__ASSERT(!(g->it[i].flags & CQ__IT_CLAIMED));
    nudged_found |= g == p->q.nudged;
    prev = g;
    sleepers++;
  }
  CQ__ASSERT(prev == p->q.sleepers_tail && sleepers == p->q.n_sleepers);
  CQ__ASSERT(nudged_found);
  CQ__ASSERT(p->q.barge_ms > 0 || sleepers == 0);
  /* Lock-free acquires stop where the oldest window ends (fast_gate()). */
  CQ__ASSERT(atomic_load(&p->fast_until) ==
             (atomic_load(&p->closed) ? CQ__FAST_CLOSED
              : p->q.sleepers != NULL ? p->q.sleepers->wake_until
                                      : CQ_NEVER));
  uint64_t held = 0;
  for (const struct cq__grant *g = p->q.holders; g != NULL; g = g->qnext) {
    CQ__ASSERT(cq__gstate(g) == CQ__G_HELD && !g->lockfree);
    held++;
  }
  CQ__ASSERT(held == p->q.n_held);
  /* Per resource: the waiting counts, the claims, what is held. */
  for (uint32_t s = 0; s < p->tab.n_slots; s++) {
    struct cq__res *r = p->tab.res[s];
    if (r == NULL)
      continue;
    uint64_t waiting = 0, claims = 0, asleep = 0;
    for (const struct cq__grant *g = p->q.head; g != NULL; g = g->qnext)
      for (unsigned i = 0; i < g->n_items; i++)
        if (g->it[i].res == r) {
          waiting++;
          claims += (g->it[i].flags & CQ__IT_CLAIMED) != 0;
        }
    for (const struct cq__grant *g = p->q.sleepers; g != NULL; g = g->qnext)
      for (unsigned i = 0; i < g->n_items; i++)
        asleep += g->it[i].res == r;
    CQ__ASSERT(waiting + asleep == r->n_waiting && claims == r->claims.count);
    CQ__ASSERT(asleep == r->n_sleepers);
    /* A budget's sleepers bit is set exactly while a sleeper names it. */
    if (r->kind != CQ__RES_DEVICES)
      CQ__ASSERT(((cq__res_word(r) & CQ__W_SLEEPERS) != 0) == (asleep != 0));
    blocked += r->blocked.count;
    check_resource(p, r);
  }
  CQ__ASSERT(blocked == p->q.n_waiters);
  CQ__ASSERT(cq__rb_check(&p->q.deadlines, deadline_cmp) >= 0);
  CQ__ASSERT(cq__bf_check(p));
}
