/*
 * The waiting policy: FIFO with reservation.
 *
 * Everything here runs with the pool lock held. The README states the same
 * rule for users; this comment states it for the code.
 *
 * Terms.
 * - Waiters are ordered by arrival (seq; smaller is older).
 * - free(r) = capacity - used, never below 0.
 * - A waiter *claims* a resource when an examination finds that it lacks it.
 *   A claim stays until the waiter is granted or leaves. The oldest waiter
 *   holding a claim on r is r's *claimant*. For a budget, min(free(r), the
 *   claimant's need) is withheld for it; the rest is *open*.
 * - What r offers a request of arrival seq s: everything free if the
 *   claimant is s itself, or younger, or there is none; otherwise only what
 *   is open. A request is *covered* on r when its need fits in that.
 *   A younger claimant never restricts an older request.
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
 */
#include "cq_internal.h"

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

static int blocked_key_cmp(const cq__rbnode *n, const void *key) {
  return seq_cmp(bnode_grant(n)->seq, *(const uint64_t *)key);
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

static inline struct cq__res *item_res(const cq_pool *p,
                                       const struct cq__grant *g, unsigned i) {
  (void)p;
  return g->it[i].res;
}

/* ------------------------------------------------------------------------ */
/* Budgets: what is free, withheld and open                                  */
/* ------------------------------------------------------------------------ */

/* What a usage word leaves free of capacity `cap`: nothing while a lone
 * grant holds the budget, else capacity - used, never below 0. */
static inline int64_t word_free(uint64_t w, int64_t cap) {
  if (w & CQ__W_LONE)
    return 0;
  int64_t f = cap - cq__w_used(w);
  return f > 0 ? f : 0;
}

static inline int64_t budget_free(const struct cq__res *r) {
  return word_free(atomic_load_explicit(&r->word, memory_order_acquire),
                   cq__res_capacity(r));
}

static const struct cq__gitem *claimant_item(const struct cq__res *r) {
  cq__rbnode *n = cq__rb_first(&r->claims);
  return n != NULL ? claim_item(n) : NULL;
}

int64_t cq__budget_withheld(const struct cq__res *r, uint64_t word) {
  const struct cq__gitem *c = claimant_item(r);
  if (c == NULL)
    return 0;
  int64_t f = word_free(word, cq__res_capacity(r));
  int64_t need = cq__item_need(item_grant(c), c->index);
  return need < f ? need : f;
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

const struct cq__gitem *cq__excl_for(const struct cq__res *r,
                                     const struct cq__grant *g,
                                     const struct cq__grant *ignore) {
  return older_claimant(r, g->seq, ignore);
}

/* Units of budget r offered to a request of arrival `seq`. */
static int64_t budget_offer(const struct cq__res *r, uint64_t seq,
                            const struct cq__grant *ignore) {
  int64_t f = budget_free(r);
  const struct cq__gitem *c = older_claimant(r, seq, ignore);
  if (c != NULL) {
    int64_t need = cq__item_need(item_grant(c), c->index);
    f -= need < f ? need : f;
  }
  return f;
}

int64_t cq__budget_open(const struct cq__res *r) {
  return budget_offer(r, UINT64_MAX, NULL);
}

/* Whether item i of g fits what its resource offers g, with the
 * withholding of `ignore` (the head, when backfilling) disregarded. */
static bool covered_as(const cq_pool *p, const struct cq__grant *g, unsigned i,
                       const struct cq__grant *ignore) {
  struct cq__res *r = item_res(p, g, i);
  if (r->kind == CQ__RES_DEVICES)
    return cq__dev_fits(r, g->it[i].mode, cq__item_need(g, i),
                        older_claimant(r, g->seq, ignore));
  return cq__item_need(g, i) <= budget_offer(r, g->seq, ignore);
}

static bool covered(const cq_pool *p, const struct cq__grant *g, unsigned i) {
  return covered_as(p, g, i, NULL);
}

/* ------------------------------------------------------------------------ */
/* Claims, dirty resources                                                   */
/* ------------------------------------------------------------------------ */

void cq__res_mark_dirty(cq_pool *p, struct cq__res *r, uint64_t after_seq) {
  p->bf.kick = true;
  if (!r->dirty) {
    r->dirty = true;
    r->walk_seq = after_seq;
    r->dirty_next = p->dirty_head;
    p->dirty_head = r;
  } else if (after_seq < r->walk_seq) {
    r->walk_seq = after_seq;
  }
}

void cq__units_returned(cq_pool *p, struct cq__res *r, uint64_t after_seq) {
  if (r->blocked.count != 0 ||
      ((p->flags & CQ_POOL_BACKFILL) && p->queue_head != NULL &&
       p->queue_head->qnext != NULL))
    cq__res_mark_dirty(p, r, after_seq);
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
  struct cq__res *r = item_res(p, g, i);
  if (r->claims.count == 0)
    atomic_fetch_or_explicit(&r->word, CQ__W_CONTENDED, memory_order_acq_rel);
  cq__rb_insert(&r->claims, &it->u.claim, claim_cmp);
  it->flags |= CQ__IT_CLAIMED;
  if (cq__rb_first(&r->claims) == &it->u.claim) {
    cq__event(p, CQ_EVENT_RESERVED, g, r, 0);
    if (r->blocked.count != 0)
      cq__res_mark_dirty(p, r, g->seq);
  }
}

/* Drop every claim of g; where g was the claimant, the next oldest claimer
 * takes over and the waiters blocked there are walked again. */
static void drop_claims(cq_pool *p, struct cq__grant *g) {
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__gitem *it = &g->it[i];
    if (!(it->flags & CQ__IT_CLAIMED))
      continue;
    struct cq__res *r = item_res(p, g, i);
    bool was_claimant = cq__rb_first(&r->claims) == &it->u.claim;
    cq__rb_remove(&r->claims, &it->u.claim);
    it->flags &= (uint8_t)~CQ__IT_CLAIMED;
    if (r->claims.count == 0)
      atomic_fetch_and_explicit(&r->word, ~CQ__W_CONTENDED,
                                memory_order_acq_rel);
    if (was_claimant && r->claims.count != 0)
      cq__event(p, CQ_EVENT_RESERVED,
                item_grant(claim_item(cq__rb_first(&r->claims))), r, 0);
    if (was_claimant) /* what it withheld is open again */
      cq__units_returned(p, r, g->seq);
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
    if (covered(p, g, i))
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
/* Granting, queueing, leaving                                               */
/* ------------------------------------------------------------------------ */

static void examine(cq_pool *p, struct cq__grant *g, struct cq__ctx *ctx);

void cq__attempt_start(cq_pool *p, struct cq__grant *g,
                       const struct cq__req *req) {
  g->pool = p;
  g->req = req;
  g->seq = p->next_seq++;
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
      cq__res_harvest(r);
  }
}

/* Take `need` units of budget r if they are free; never beyond capacity.
 * A lone take (need is then the whole capacity, so nothing may be held)
 * also sets the lone bit, in the same step, so that no lock-free acquire
 * slips in beside it. */
static bool budget_take(struct cq__res *r, int64_t need, bool lone) {
  int64_t cap = cq__res_capacity(r);
  uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
  do {
    if (need > word_free(w, cap)) /* not used + need: it may overflow */
      return false;
  } while (!atomic_compare_exchange_weak_explicit(
      &r->word, &w, (w + (uint64_t)need) | (lone ? CQ__W_LONE : 0),
      memory_order_acq_rel, memory_order_relaxed));
  cq__peak_raise(r, cq__w_used(w) + need);
  return true;
}

/* Whether item i of g, arriving or waiting, is a lone request now. */
static bool item_lone(const struct cq__grant *g, unsigned i) {
  const struct cq__res *r = g->it[i].res;
  return r->kind == CQ__RES_BUDGET &&
         cq__is_lone(r, g->req->items[i].amount, cq__res_capacity(r));
}

static void budget_put(struct cq__res *r, int64_t amount) {
  atomic_fetch_sub_explicit(&r->word, (uint64_t)amount, memory_order_acq_rel);
}

/*
 * Take every unit g asks for, or none; devices[i] receives where device
 * items were placed, with the reservations of `ignore` (the head, when
 * backfilling) disregarded. Under the lock a contended budget only ever gains
 * free units, and device pools change only under the lock, so what covered()
 * saw is still there; an uncontended budget may have been taken by a lock-free
 * acquire meanwhile, and then this fails and the caller examines g again.
 */
static bool take_units(cq_pool *p, struct cq__grant *g, int32_t *devices,
                       const struct cq__grant *ignore) {
  /* Budgets first: only they can fail. */
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = item_res(p, g, i);
    if (r->kind != CQ__RES_DEVICES &&
        !budget_take(r, cq__item_need(g, i), item_lone(g, i))) {
      while (i-- > 0)
        if (item_res(p, g, i)->kind != CQ__RES_DEVICES)
          budget_put(item_res(p, g, i), cq__item_need(g, i));
      return false;
    }
  }
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = item_res(p, g, i);
    if (r->kind == CQ__RES_DEVICES)
      devices[i] = cq__dev_take(r, g->it[i].mode, cq__item_need(g, i),
                                older_claimant(r, g->seq, ignore));
  }
  return true;
}

/* Record the units taken by take_units() as held (claims already gone). */
static void hold_units(cq_pool *p, struct cq__grant *g, const int32_t *devices,
                       int64_t now) {
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = item_res(p, g, i);
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
    cq__held_count(p, g, +1);
  cq__gstate_set(g, CQ__G_HELD);
  cq__limit_granted(p, g, now);
}

/* Whether g is covered on every item, with `ignore`'s withholding
 * disregarded. */
static bool covered_all(const cq_pool *p, const struct cq__grant *g,
                        const struct cq__grant *ignore) {
  for (unsigned i = 0; i < g->n_items; i++)
    if (!covered_as(p, g, i, ignore))
      return false;
  return true;
}

/* The head that g, holding a limit, may backfill past now; else NULL. */
static const struct cq__grant *
backfill_past(cq_pool *p, const struct cq__grant *g, int64_t now) {
  if (!(p->flags & CQ_POOL_BACKFILL) || g->req->limit_ms <= 0)
    return NULL;
  const struct cq__grant *h = cq__bf_head(p, now);
  return h != g ? h : NULL;
}

bool cq__arrival_try(cq_pool *p, struct cq__grant *g) {
  int32_t devices[CQ_REQ_MAX_ITEMS];
  int64_t now = cq__pool_now(p);
  const struct cq__grant *h = NULL;
  if (!covered_all(p, g, NULL)) {
    /* A request with a limit may still backfill past the head. */
    h = backfill_past(p, g, now);
    if (h == NULL || !covered_all(p, g, h) || !cq__bf_allows(p, g, now))
      return false;
  }
  if (!take_units(p, g, devices, h))
    return false;
  hold_units(p, g, devices, now);
  if (h != NULL)
    p->backfilled++;
  cq__event(p, CQ_EVENT_GRANTED, g, NULL, 0);
  return true;
}

int cq__lockfree_take(struct cq__grant *g, const struct cq__req *req,
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
    sweep |= (w & CQ__W_CONTENDED) != 0;
  }
  return sweep ? -1 : 0;
}

bool cq__lockfree_give_all(struct cq__grant *g) {
  bool sweep = false;
  for (unsigned i = 0; i < g->n_items; i++) {
    uint64_t w = atomic_fetch_sub_explicit(&g->it[i].res->word,
                                           (uint64_t)g->it[i].u.hold.held,
                                           memory_order_acq_rel);
    sweep |= (w & CQ__W_CONTENDED) != 0;
  }
  return sweep;
}

void cq__mark_contended_dirty(cq_pool *p, struct cq__grant *g) {
  for (unsigned i = 0; i < g->n_items; i++)
    if (g->it[i].res->blocked.count != 0)
      cq__res_mark_dirty(p, g->it[i].res, 0);
}

static void queue_unlink(cq_pool *p, struct cq__grant *g) {
  if (g->qprev != NULL)
    g->qprev->qnext = g->qnext;
  else
    p->queue_head = g->qnext;
  if (g->qnext != NULL)
    g->qnext->qprev = g->qprev;
  else
    p->queue_tail = g->qprev;
  g->qprev = g->qnext = NULL;
}

void cq__enqueue(cq_pool *p, struct cq__grant *g, struct cq__ctx *ctx) {
  g->qprev = p->queue_tail;
  g->qnext = NULL;
  if (p->queue_tail != NULL)
    p->queue_tail->qnext = g;
  else
    p->queue_head = g;
  p->queue_tail = g;
  p->n_waiters++;
  g->limited_waiter = g->req->limit_ms > 0;
  p->bf.candidates += g->limited_waiter;
  g->t_enqueue = cq__pool_now(p);
  for (unsigned i = 0; i < g->n_items; i++)
    item_res(p, g, i)->n_waiting++;

  /* Block on the first item for now; examine() moves g to its real
   * blocker, or grants it if lock-free releases freed enough meanwhile. */
  g->blocker = 0;
  cq__rb_insert(&item_res(p, g, 0)->blocked, &g->bnode, blocked_cmp);
  if (g->deadline_ms != CQ_NEVER)
    cq__rb_insert(&p->deadlines, &g->dnode, deadline_cmp);
  cq__gstate_set(g, CQ__G_WAITING);
  cq__event(p, CQ_EVENT_PARKED, g, NULL, 0);
  examine(p, g, ctx);
}

/* Take g out of every waiting structure (claims included). */
static void dequeue(cq_pool *p, struct cq__grant *g) {
  CQ__ASSERT(cq__gstate(g) == CQ__G_WAITING);
  drop_claims(p, g);
  cq__rb_remove(&item_res(p, g, g->blocker)->blocked, &g->bnode);
  if (g->deadline_ms != CQ_NEVER)
    cq__rb_remove(&p->deadlines, &g->dnode);
  for (unsigned i = 0; i < g->n_items; i++)
    item_res(p, g, i)->n_waiting--;
  queue_unlink(p, g);
  p->n_waiters--;
  p->bf.candidates -= g->limited_waiter;
  g->limited_waiter = 0;
}

/* Tell a waiter its attempt is over: wake its thread or queue its callback. */
static void notify(cq_pool *p, struct cq__grant *g, struct cq__ctx *ctx) {
  if (g->style == CQ__STYLE_BLOCKING) {
    p->wakeups++;
    g->ready_next = ctx->wake; /* woken by cq__ctx_wake() after unlock */
    ctx->wake = g;
  } else {
    g->ready_next = NULL;
    *ctx->ready_tail = g;
    ctx->ready_tail = &g->ready_next;
  }
}

static void grant_waiter(cq_pool *p, struct cq__grant *g,
                         const int32_t *devices, struct cq__ctx *ctx) {
  int64_t now = cq__pool_now(p);
  cq__bf_head_granted(p, g, now);
  dequeue(p, g);
  hold_units(p, g, devices, now);
  int64_t waited = now - g->t_enqueue;
  for (unsigned i = 0; i < g->n_items; i++)
    cq__hist_add(&item_res(p, g, i)->wait, waited);
  cq__event(p, CQ_EVENT_GRANTED, g, NULL, waited);
  p->waited_grants++;
  g->status = 0;
  notify(p, g, ctx);
}

void cq__waiter_leave(cq_pool *p, struct cq__grant *g, int status,
                      struct cq__ctx *ctx) {
  for (unsigned i = 0; i < g->n_items; i++) {
    if (status == CQ_ETIMEDOUT)
      item_res(p, g, i)->timeouts++;
    else if (status == CQ_ECANCELED)
      item_res(p, g, i)->cancels++;
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
  notify(p, g, ctx);
}

void cq__give_back(cq_pool *p, struct cq__grant *g, unsigned i,
                   int64_t amount) {
  struct cq__res *r = item_res(p, g, i);
  if (r->kind == CQ__RES_DEVICES)
    cq__dev_put(r, g->it[i].mode, g->it[i].u.hold.dev, amount);
  else
    budget_put(r, amount);
  g->it[i].u.hold.held -= amount;
  cq__units_returned(p, r, 0);
}

void cq__give_back_all(cq_pool *p, struct cq__grant *g) {
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__gitem *it = &g->it[i];
    if (it->flags & CQ__IT_LONE) {
      /* The lone grant leaves: the budget is open again, with what it gave
       * back early too (the bit is known set: subtracting it clears it). */
      it->flags &= (uint8_t)~CQ__IT_LONE;
      atomic_fetch_sub_explicit(&it->res->word, CQ__W_LONE,
                                memory_order_acq_rel);
    }
    cq__give_back(p, g, i, it->u.hold.held);
  }
  cq__held_count(p, g, -1);
}

void cq__held_count(cq_pool *p, struct cq__grant *g, int delta) {
  p->n_held += (uint64_t)(int64_t)delta;
  for (unsigned i = 0; i < g->n_items; i++)
    g->it[i].res->n_holders += (uint64_t)(int64_t)delta;
}

/* ------------------------------------------------------------------------ */
/* The sweep                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * The oldest waiter blocked on dirty resource r, younger than r's walk
 * position, that r now covers. Waiters passed over are not covered, and stay
 * so for the rest of this sweep unless r is marked again.
 */
static struct cq__grant *next_candidate(cq_pool *p, struct cq__res *r) {
  uint64_t from = r->walk_seq + 1;
  cq__rbnode *n = cq__rb_first(&r->blocked);
  /* Usually the walk starts at the oldest: no descent needed. */
  if (n != NULL && bnode_grant(n)->seq < from)
    n = cq__rb_lower_bound(&r->blocked, &from, blocked_key_cmp);
  if (r->kind == CQ__RES_DEVICES) {
    if (!cq__dev_any_free(r))
      return NULL;
    for (; n != NULL; n = cq__rb_next(n)) {
      struct cq__grant *w = bnode_grant(n);
      if (covered(p, w, w->blocker))
        return w;
      r->walk_seq = w->seq;
    }
    return NULL;
  }
  if (budget_free(r) == 0)
    return NULL;
  const struct cq__gitem *c = claimant_item(r);
  uint64_t claimant_seq = c != NULL ? item_grant(c)->seq : UINT64_MAX;
  for (; n != NULL; n = cq__rb_next(n)) {
    struct cq__grant *w = bnode_grant(n);
    int64_t offer = budget_offer(r, w->seq, NULL);
    if (cq__item_need(w, w->blocker) <= offer)
      return w;
    /* Past the claimant everyone is offered the same open units. */
    if (offer == 0 && claimant_seq < w->seq)
      break;
    r->walk_seq = w->seq;
  }
  return NULL;
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
static void examine(cq_pool *p, struct cq__grant *g, struct cq__ctx *ctx) {
  for (;;) {
    int first = claim_lacks(p, g);
    if (first < 0) {
      int32_t devices[CQ_REQ_MAX_ITEMS];
      if (take_units(p, g, devices, NULL)) {
        grant_waiter(p, g, devices, ctx);
        return;
      }
      continue;
    }
    if ((unsigned)first != g->blocker) {
      cq__rb_remove(&item_res(p, g, g->blocker)->blocked, &g->bnode);
      g->blocker = (uint8_t)first;
      cq__rb_insert(&item_res(p, g, (unsigned)first)->blocked, &g->bnode,
                    blocked_cmp);
    }
    if (!covered(p, g, (unsigned)first))
      return;
  }
}

void cq__fail_unsatisfiable(cq_pool *p, struct cq__ctx *ctx) {
  struct cq__grant *g = p->queue_head;
  while (g != NULL) {
    struct cq__grant *next = g->qnext;
    int rc = cq__req_validate(p, g->req, g->msg);
    if (rc != 0)
      cq__waiter_leave(p, g, CQ_ENEVER, ctx);
    g = next;
  }
}

static void sweep_once(cq_pool *p, struct cq__ctx *ctx) {
  for (;;) {
    struct cq__grant *best = NULL;
    struct cq__res **link = &p->dirty_head;
    while (*link != NULL) {
      struct cq__res *r = *link;
      struct cq__grant *w = next_candidate(p, r);
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
    for (struct cq__res *r = p->dirty_head; r != NULL; r = r->dirty_next)
      if (r->walk_seq < best->seq)
        r->walk_seq = best->seq;
    examine(p, best, ctx);
  }
}

/*
 * Backfill the waiters behind the head that may pass it now, oldest first.
 * Returns whether any was granted. Only after something changed that can
 * make one fit (units freed, a new head or shadow time), since it walks the
 * queue.
 */
static bool backfill_pass(cq_pool *p, struct cq__ctx *ctx) {
  if (!(p->flags & CQ_POOL_BACKFILL) || p->queue_head == NULL ||
      p->queue_head->qnext == NULL)
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
    int32_t devices[CQ_REQ_MAX_ITEMS];
    if (w->req->limit_ms > 0 && covered_all(p, w, h) &&
        cq__bf_allows(p, w, now) && take_units(p, w, devices, h)) {
      grant_waiter(p, w, devices, ctx);
      p->backfilled++;
      any = true;
    }
  }
  return any;
}

void cq__sweep(cq_pool *p, struct cq__ctx *ctx) {
  do
    sweep_once(p, ctx);
  while (backfill_pass(p, ctx) && p->dirty_head != NULL);
}
