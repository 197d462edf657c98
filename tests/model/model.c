/*
 * The reference model (see model.h). Each function below is one sentence of
 * the specification (docs/POLICY.md), computed from the whole state:
 * - free(r) = capacity - held, never below 0;
 * - the claimant of r is the oldest waiter with a claim on r; for it
 *   min(free(r), its need) is withheld (device pools: the devices it
 *   reserves), and requests younger than it see only the rest;
 * - examining a request grants it when it is covered on every resource,
 *   else it claims what it lacks (only the first, with staged claims) and
 *   blocks on the first resource it lacks;
 * - after every change the oldest waiter whose blocker covers it is
 *   examined, again and again, until none is;
 * - with backfill, a request with a hold limit younger than the head may use
 *   what the head withholds when that does not delay the head past its
 *   sticky shadow time; the waiters behind the head try again after every
 *   change, whatever blocks them (units coming back anywhere, a new head or
 *   S, a capacity change).
 *
 * Points the specification leaves open, where the model follows the library's
 * own choices (each is said again at its line). Everything else is the
 * specification:
 * - Resource order: device pools first, then budgets and classes as one
 *   group, in the order added (not budgets, then classes) (order_key()).
 * - Deadlines: a deadline equal to now has passed. An expiry lets every
 *   waiter whose deadline passed leave, earliest deadline first, then
 *   oldest, before anyone is examined again; and every expiry sweeps, even
 *   when no deadline passed (m_expire()).
 * - A capacity shrunk or a device taken offline fails the waiters that can
 *   now never fit oldest first, then sweeps (capacity_changed()).
 * - Which changes sweep: every change does, except the release of a grant
 *   of a request that names nothing, which sweeps only when an arrival since
 *   the last sweep became the claimant of a resource some waiter is blocked
 *   on (m->pending; m_submit(), m_release()).
 * - What a device pool withholds, as cq_resource_stats.withheld: the free
 *   thousandths on the devices its claimant reserves (m_withheld()).
 * - Holding for ever (backfill): a holder whose limit ends at or before the
 *   moment S is computed, and that still holds, counts as holding for ever
 *   (the library marks a grant overdue at its limit end; the specification does
 * not say whether "within" the limit includes its end). What was computed then
 * is kept until S is computed again, so the model judges by the time of that
 * computation, not by now (head_fits_at()).
 * - When S is first computed ("when first needed"): at the end of every
 *   sweep that leaves two waiters or more, and when a request with a limit
 *   arrives that is not covered. A head waiting alone has none yet (sweep(),
 *   backfill_ok(), shadow_refresh()).
 * - When S is computed again ("a holder that counted in it"): the holders
 *   counted are every holder present when S was computed, whether or not S
 *   depends on its end; none when S is unknown, so a holder for ever that
 *   makes S unknown does not bring S back when it leaves (only a new head
 *   or a capacity change does). When a later S is computed and the earlier
 *   kept (sticky), the holders present then are the ones counted
 *   (counted_by(), shadow_refresh(), m_release()).
 * - A head is a waiter and its arrival: one that leaves and comes back is a
 *   new head, with a new S and no excuse carried over (shadow_refresh()).
 * - The specification's exceptions to the promise, as the model applies them
 *   (shadow_check_grant(), capacity_shrank()): the model does not follow
 *   which device S counts on, so it takes any ordinary grant on a device
 *   pool the head has claimed, once S is computed, as the device exception,
 *   and counts those late heads apart (device_late_heads; test_model.c keeps
 *   a program that shows one); and any capacity shrunk, or device taken
 *   offline, while the head has a computed S excuses it, whether or not the
 *   head needs that resource. Both are coarser than the specification: they can
 *   only excuse a late head, never make the model grant differently, and
 *   late heads are still compared with cq_pool_stats.late_heads.
 */
#include "model.h"

#include <string.h>

#include "cronoq/cronoq.h"

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static uint64_t order_key(const m_model *m, int r) {
  /* Device pools first, then budgets and classes, in the order added. */
  return ((m->res[r].kind == M_DEVICES ? 0ull : 1ull) << 32) | m->res[r].added;
}

void m_req_sort(const m_model *m, m_req *req) {
  for (int i = 1; i < req->n; i++)
    for (int j = i; j > 0 && order_key(m, req->items[j].res) <
                                 order_key(m, req->items[j - 1].res);
         j--) {
      m_item t = req->items[j];
      req->items[j] = req->items[j - 1];
      req->items[j - 1] = t;
    }
}

bool m_names(const m_req *req, int res) {
  for (int i = 0; i < req->n; i++)
    if (req->items[i].res == res)
      return true;
  return false;
}

static int find_item(const m_req *req, int res) {
  for (int i = 0; i < req->n; i++)
    if (req->items[i].res == res)
      return i;
  return -1;
}

/* Nothing is free while a lone grant holds the budget (docs/POLICY.md, "lone
 * requests": it runs alone, whatever the capacity does meanwhile). */
static int64_t budget_free(const m_res *r) {
  if (r->lone_held)
    return 0;
  return r->cap > r->used ? r->cap - r->used : 0;
}

static int64_t dev_free(const m_res *r, int d) {
  return r->dev_whole[d] ? 0 : M_MILLI - r->dev_used[d];
}

static uint32_t online_mask(const m_res *r) {
  uint32_t mask = 0;
  for (int d = 0; d < r->ndev; d++)
    if (r->dev_online[d])
      mask |= 1u << d;
  return mask;
}

static int popcount32(uint32_t x) {
  int n = 0;
  for (; x != 0; x &= x - 1)
    n++;
  return n;
}

/* Whether an item is a lone request: larger than its budget, which has
 * the lone-request allowance. */
static bool item_lone(const m_model *m, const m_item *it) {
  const m_res *r = &m->res[it->res];
  return r->kind == M_BUDGET && r->lone && it->amount > r->cap;
}

/* What an item needs of its budget or class: a class item needs one
 * worker; a lone request needs exactly the capacity, so it fits only when
 * nothing else holds the budget, and at least one unit, so that at a
 * capacity of 0 it waits (docs/POLICY.md, lone requests). */
static int64_t item_need(const m_model *m, const m_item *it) {
  const m_res *r = &m->res[it->res];
  if (r->kind == M_CLASS)
    return 1;
  if (item_lone(m, it))
    return r->cap > 0 ? r->cap : 1;
  return it->amount;
}

static void out(m_model *m, int s, int status) {
  if (m->nouts < M_OUT_MAX)
    m->outs[m->nouts++] = (m_out){s, status};
  else
    m->broken = "too many callbacks in one operation";
}

/* ------------------------------------------------------------------------ */
/* Resources                                                                 */
/* ------------------------------------------------------------------------ */

void m_init(m_model *m, unsigned flags, int64_t now) {
  memset(m, 0, sizeof(*m));
  m->flags = flags;
  m->now = now;
  m->next_seq = 1;
  m->shadow.head = -1;
  m->shadow.at = M_INF;
}

void m_begin_op(m_model *m) {
  m->nouts = 0;
  m->granted_res = 0;
  memset(m->granted_dev, 0, sizeof(m->granted_dev));
}

static int add_res(m_model *m, int kind) {
  if (m->nres >= M_RES_MAX)
    return -1;
  m_res *r = &m->res[m->nres];
  memset(r, 0, sizeof(*r));
  r->live = true;
  r->kind = kind;
  r->added = m->next_added++;
  return m->nres++;
}

int m_add_budget(m_model *m, int64_t cap, bool lone) {
  int i = add_res(m, M_BUDGET);
  if (i >= 0) {
    m->res[i].cap = cap;
    m->res[i].lone = lone;
  }
  return i;
}

int m_add_class(m_model *m, int64_t max_workers) {
  int i = add_res(m, M_CLASS);
  if (i >= 0)
    m->res[i].cap = max_workers;
  return i;
}

int m_add_devices(m_model *m, int ndev) {
  int i = add_res(m, M_DEVICES);
  if (i >= 0) {
    m->res[i].ndev = ndev;
    for (int d = 0; d < ndev; d++)
      m->res[i].dev_online[d] = true;
  }
  return i;
}

int m_remove(m_model *m, int res) {
  for (int s = 0; s < M_SLOT_MAX; s++)
    if (m->slot[s].state != M_IDLE && m_names(&m->slot[s].req, res))
      return CQ_EINUSE;
  m->res[res].live = false;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Claimants, reservations, coverage                                         */
/* ------------------------------------------------------------------------ */

int m_claimant(const m_model *m, int res) {
  int best = -1;
  for (int s = 0; s < M_SLOT_MAX; s++) {
    const m_slot *w = &m->slot[s];
    if (w->state != M_WAITING)
      continue;
    int i = find_item(&w->req, res);
    if (i >= 0 && (w->claims & (1u << i)) &&
        (best < 0 || w->seq < m->slot[best].seq))
      best = s;
  }
  return best;
}

int m_head(const m_model *m) {
  int best = -1;
  for (int s = 0; s < M_SLOT_MAX; s++)
    if (m->slot[s].state == M_WAITING &&
        (best < 0 || m->slot[s].seq < m->slot[best].seq))
      best = s;
  return best;
}

/* The n online devices outside `taken` with the most free capacity, ties
 * to the lowest index: what a claimer reserves (one for a fraction) from
 * what older claimers left. */
static uint32_t most_free(const m_res *r, int n, uint32_t taken) {
  uint32_t picked = 0;
  for (int k = 0; k < n; k++) {
    int best = -1;
    for (int d = 0; d < r->ndev; d++)
      if (r->dev_online[d] && !((picked | taken) & (1u << d)) &&
          (best < 0 || dev_free(r, d) > dev_free(r, best)))
        best = d;
    if (best < 0)
      break;
    picked |= 1u << best;
  }
  return picked;
}

/* The devices of `res` that the waiters claiming it and older than `seq`
 * reserve: each, in arrival order, reserves from what the older ones left
 * (docs/POLICY.md, "Reservation on devices"). A backfill (`ignore` is the head)
 * respects only the oldest claimer's reservation, and not even that when
 * it is the head's: one claimant per resource, as on budgets. */
static uint32_t reserved_before(const m_model *m, int res, uint64_t seq,
                                int ignore) {
  uint32_t taken = 0;
  uint64_t after = 0;
  for (;;) {
    /* The next claimer in arrival order. */
    int c = -1;
    for (int s = 0; s < M_SLOT_MAX; s++) {
      const m_slot *w = &m->slot[s];
      int i = find_item(&w->req, res);
      if (w->state == M_WAITING && i >= 0 && (w->claims & (1u << i)) &&
          w->seq > after && (c < 0 || w->seq < m->slot[c].seq))
        c = s;
    }
    if (c < 0 || m->slot[c].seq >= seq)
      return taken;
    after = m->slot[c].seq;
    if (c == ignore)
      return taken;
    const m_item *it = &m->slot[c].req.items[find_item(&m->slot[c].req, res)];
    taken |= most_free(&m->res[res], it->whole ? (int)it->amount : 1, taken);
    if (ignore >= 0)
      return taken;
  }
}

uint32_t m_reserved_devices(const m_model *m, int res) {
  return reserved_before(m, res, UINT64_MAX, -1);
}

int64_t m_withheld(const m_model *m, int res) {
  const m_res *r = &m->res[res];
  if (r->kind != M_DEVICES) {
    int c = m_claimant(m, res);
    if (c < 0)
      return 0;
    const m_item *it = &m->slot[c].req.items[find_item(&m->slot[c].req, res)];
    return min64(budget_free(r), item_need(m, it));
  }
  /* Device pools: the free thousandths on the reserved devices. */
  int64_t sum = 0;
  uint32_t rsv = m_reserved_devices(m, res);
  for (int d = 0; d < r->ndev; d++)
    if (rsv & (1u << d))
      sum += dev_free(r, d);
  return sum;
}

/*
 * Where a device item goes among the devices in `allowed` (online ones
 * only): a fraction best fit (least free capacity that fits, ties to the
 * lowest index), n whole devices the lowest-index entirely free ones.
 * Returns the mask of devices, 0 if it does not fit.
 */
static uint32_t place(const m_res *r, const m_item *it, uint32_t allowed) {
  allowed &= online_mask(r);
  if (!it->whole) {
    int best = -1;
    for (int d = 0; d < r->ndev; d++)
      if ((allowed & (1u << d)) && dev_free(r, d) >= it->amount &&
          (best < 0 || dev_free(r, d) < dev_free(r, best)))
        best = d;
    return best < 0 ? 0 : 1u << best;
  }
  uint32_t picked = 0;
  int n = 0;
  for (int d = 0; d < r->ndev && n < it->amount; d++)
    if ((allowed & (1u << d)) && r->dev_used[d] == 0 && !r->dev_whole[d]) {
      picked |= 1u << d;
      n++;
    }
  return n == it->amount && n > 0 ? picked : 0;
}

/* Whether the claimant of `res` restricts a request of arrival `seq`:
 * it is older than the request, and not `ignore` (backfill disregards the
 * head's withholding). */
static int restricting(const m_model *m, int res, uint64_t seq, int ignore) {
  int c = m_claimant(m, res);
  if (c < 0 || c == ignore || m->slot[c].seq >= seq)
    return -1;
  return c;
}

/* The devices a request of arrival `seq` may use on `res`: those no older
 * claimer reserves. */
static uint32_t usable_devices(const m_model *m, int res, uint64_t seq,
                               int ignore) {
  return online_mask(&m->res[res]) & ~reserved_before(m, res, seq, ignore);
}

static bool covered_item(const m_model *m, uint64_t seq, const m_item *it,
                         int ignore) {
  const m_res *r = &m->res[it->res];
  if (r->kind == M_DEVICES)
    return place(r, it, usable_devices(m, it->res, seq, ignore)) != 0;
  int64_t avail = budget_free(r);
  int c = restricting(m, it->res, seq, ignore);
  if (c >= 0) {
    const m_req *cr = &m->slot[c].req;
    avail -= min64(avail, item_need(m, &cr->items[find_item(cr, it->res)]));
  }
  return item_need(m, it) <= avail;
}

/* The first item (in resource order) the request is not covered on; -1 if
 * it is covered on all; its uncovered items in *lacking. */
static int first_lacking(const m_model *m, const m_req *req, uint64_t seq,
                         int ignore, uint32_t *lacking) {
  int first = -1;
  uint32_t lack = 0;
  for (int i = 0; i < req->n; i++)
    if (!covered_item(m, seq, &req->items[i], ignore)) {
      lack |= 1u << i;
      if (first < 0)
        first = i;
    }
  if (lacking != NULL)
    *lacking = lack;
  return first;
}

bool m_never(const m_model *m, const m_req *req) {
  for (int i = 0; i < req->n; i++) {
    const m_item *it = &req->items[i];
    const m_res *r = &m->res[it->res];
    switch (r->kind) {
    case M_BUDGET:
      if (!r->lone && it->amount > r->cap)
        return true;
      break;
    case M_CLASS:
      if (r->cap < 1)
        return true;
      break;
    default: {
      int online = popcount32(online_mask(r));
      if (online == 0 || (it->whole && it->amount > online))
        return true;
    }
    }
  }
  return false;
}

static bool has_blocked(const m_model *m, int res) {
  for (int s = 0; s < M_SLOT_MAX; s++) {
    const m_slot *w = &m->slot[s];
    if (w->state == M_WAITING && w->req.items[w->blocker].res == res)
      return true;
  }
  return false;
}

/* Waiter s claims the items in `bits`. */
static void add_claims(m_model *m, int s, uint32_t bits) {
  m->slot[s].claims |= bits & ((1u << m->slot[s].req.n) - 1);
}

/* Waiter s leaves the queue (granted or not) with its claims. */
static void drop_claims(m_model *m, int s) { m->slot[s].claims = 0; }

/* ------------------------------------------------------------------------ */
/* Granting                                                                  */
/* ------------------------------------------------------------------------ */

static void shadow_check_grant(m_model *m, int s, bool backfill);

/* Give slot s everything its request names, placing devices as a request
 * of arrival `seq` would be placed (with `ignore`'s reservation
 * disregarded for a backfill). */
static void grant(m_model *m, int s, uint64_t seq, int ignore, bool backfill) {
  m_slot *g = &m->slot[s];
  uint32_t where[M_ITEMS_MAX];
  for (int i = 0; i < g->req.n; i++) {
    const m_item *it = &g->req.items[i];
    where[i] = 0;
    if (m->res[it->res].kind == M_DEVICES) {
      where[i] =
          place(&m->res[it->res], it, usable_devices(m, it->res, seq, ignore));
      if (where[i] == 0)
        m->broken = "granting a device item that does not fit";
    }
  }
  shadow_check_grant(m, s, backfill);
  if (g->state == M_WAITING)
    drop_claims(m, s);
  memset(g->held, 0, sizeof(g->held));
  memset(g->dev_held, 0, sizeof(g->dev_held));
  for (int i = 0; i < g->req.n; i++) {
    const m_item *it = &g->req.items[i];
    m_res *r = &m->res[it->res];
    m->granted_res |= 1u << it->res;
    m->granted_dev[it->res] |= where[i];
    r->grants++;
    if (r->kind != M_DEVICES) {
      if (item_lone(m, it)) {
        g->lone |= 1u << i;
        r->lone_held = true;
      }
      g->held[i] = item_need(m, it);
      r->used += g->held[i];
      continue;
    }
    for (int d = 0; d < r->ndev; d++) {
      if (!(where[i] & (1u << d)))
        continue;
      int64_t milli = it->whole ? M_MILLI : it->amount;
      g->dev_held[i][d] = milli;
      g->held[i] += milli;
      r->dev_used[d] += milli;
      r->dev_whole[d] = it->whole;
    }
  }
  g->state = M_HELD;
  g->claims = 0;
  g->backfilled = backfill;
  g->end = g->req.limit_ms > 0 ? m->now + g->req.limit_ms : M_INF;
  if (backfill)
    m->backfilled++;
}

static void ungrant(m_model *m, int s) {
  m_slot *g = &m->slot[s];
  for (int i = 0; i < g->req.n; i++) {
    m_res *r = &m->res[g->req.items[i].res];
    if (r->kind != M_DEVICES) {
      r->used -= g->held[i];
      if (g->lone & (1u << i))
        r->lone_held = false;
      continue;
    }
    for (int d = 0; d < r->ndev; d++) {
      if (g->dev_held[i][d] == 0)
        continue;
      r->dev_used[d] -= g->dev_held[i][d];
      r->dev_whole[d] = false;
    }
  }
  memset(g->held, 0, sizeof(g->held));
  memset(g->dev_held, 0, sizeof(g->dev_held));
  g->state = M_IDLE;
}

/* ------------------------------------------------------------------------ */
/* Backfill: the head's sticky shadow time                                   */
/* ------------------------------------------------------------------------ */

/*
 * Whether the head's request fits at time t going by the holders' limits:
 * holders whose limit ends by t have given back what they hold, on their
 * very devices; the others (no limit, or later) still hold. A holder whose
 * limit had ended by `base`, the time S was computed, and who still held
 * then, counts as holding for ever: its limit had passed (the library
 * marks such a grant overdue at its end; the specification does not say whether
 * "within" the limit includes its end). The library keeps what it
 * computed at `base` until something makes it compute S again, so the
 * model judges by `base` too, not by now.
 * `extra`, when
 * >= 0, is one more holder for ever, placed at `extra_where` per item.
 * Everything free is the head's (nobody is older).
 */
static bool head_fits_at(const m_model *m, int h, int64_t t, int64_t base,
                         int extra, const uint32_t *extra_where) {
  const m_req *hr = &m->slot[h].req;
  for (int i = 0; i < hr->n; i++) {
    const m_item *it = &hr->items[i];
    m_res r = m->res[it->res];
    for (int s = 0; s < M_SLOT_MAX; s++) {
      const m_slot *g = &m->slot[s];
      if (g->state != M_HELD || g->end > t || g->end <= base)
        continue;
      int k = find_item(&g->req, it->res);
      if (k < 0)
        continue;
      r.used -= g->held[k];
      if (g->lone & (1u << k))
        r.lone_held = false;
      for (int d = 0; d < r.ndev; d++)
        if (g->dev_held[k][d] > 0) {
          r.dev_used[d] -= g->dev_held[k][d];
          r.dev_whole[d] = false;
        }
    }
    if (extra >= 0) {
      const m_req *er = &m->slot[extra].req;
      int k = find_item(er, it->res);
      if (k >= 0) {
        const m_item *eit = &er->items[k];
        if (r.kind != M_DEVICES)
          r.used += item_need(m, eit);
        if (item_lone(m, eit))
          r.lone_held = true;
        for (int d = 0; d < r.ndev; d++)
          if (extra_where[k] & (1u << d)) {
            r.dev_used[d] += eit->whole ? M_MILLI : eit->amount;
            r.dev_whole[d] = r.dev_whole[d] || eit->whole;
          }
      }
    }
    if (r.kind == M_DEVICES) {
      if (place(&r, it, ~0u) == 0)
        return false;
    } else if (item_need(m, it) > budget_free(&r)) {
      return false;
    }
  }
  return true;
}

/* The holders whose release makes S be computed again. The specification says
 * "a holder that counted in it"; the library counts every holder present
 * when S was computed (one that ends after S shapes what the head finds at
 * S too, and its early release can bring S earlier), and none when S is
 * unknown (so a holder for ever that makes S unknown does not bring S back
 * when it leaves; only a new head or a capacity change does). The model
 * follows the library. */
static uint32_t counted_by(const m_model *m, int64_t at) {
  uint32_t counted = 0;
  for (int s = 0; s < M_SLOT_MAX && at != M_INF; s++)
    if (m->slot[s].state == M_HELD)
      counted |= 1u << s;
  return counted;
}

/* Compute S for head h now: the earliest of now and the limit ends at which
 * it fits; M_INF (unknown) if it fits only with a holder for ever. Sets the
 * slots counted in it. */
static int64_t shadow_compute(const m_model *m, int h, uint32_t *counted) {
  int64_t best = head_fits_at(m, h, m->now, m->now, -1, NULL) ? m->now : M_INF;
  for (int s = 0; s < M_SLOT_MAX && best != m->now; s++) {
    const m_slot *g = &m->slot[s];
    if (g->state == M_HELD && g->end != M_INF && g->end > m->now &&
        g->end < best && head_fits_at(m, h, g->end, m->now, -1, NULL))
      best = g->end;
  }
  *counted = counted_by(m, best);
  return best;
}

/* A new head starts a new shadow; a stale one is computed again, keeping
 * the earlier. The library computes S at the end of every sweep that
 * leaves two waiters or more, and when a request with a limit arrives that
 * is not covered (docs/POLICY.md: "computed when first needed"); the
 * interpreter calls this at the same points so that the sticky value matches.
 */
static void shadow_refresh(m_model *m) {
  m_shadow *sh = &m->shadow;
  int h = m_head(m);
  if (h < 0) {
    sh->head = -1;
    return;
  }
  if (sh->head != h || sh->seq != m->slot[h].seq) {
    sh->head = h;
    sh->seq = m->slot[h].seq;
    sh->computed = false;
    sh->at = M_INF;
    sh->excused = false;
    sh->device_excused = false;
  }
  if (sh->computed && !sh->stale)
    return;
  uint32_t counted;
  int64_t s = shadow_compute(m, h, &counted);
  if (s <= sh->at) {
    sh->at = s;
    sh->counted = counted;
  } else {
    /* Sticky: keep the earlier S; the holders counted are those that end
     * by it. */
    sh->counted = counted_by(m, sh->at);
  }
  sh->computed = true;
  sh->computed_at = m->now;
  sh->stale = false;
}

/* Whether a backfill of slot s (younger than the head, with a limit,
 * covered once the head's withholding is disregarded; of arrival `seq`,
 * UINT64_MAX for a new arrival) keeps the head's promise: it ends by S, or
 * the head still fits at S with it running, placed where the devices that
 * older claimers reserve (the head's disregarded) let it go. */
static bool backfill_allows(m_model *m, int s, uint64_t seq) {
  const m_shadow *sh = &m->shadow;
  const m_slot *g = &m->slot[s];
  if (g->req.limit_ms <= 0 || sh->at == M_INF || m->now >= sh->at)
    return false;
  if (m->now + g->req.limit_ms <= sh->at)
    return true;
  uint32_t where[M_ITEMS_MAX];
  for (int i = 0; i < g->req.n; i++) {
    const m_item *it = &g->req.items[i];
    where[i] = m->res[it->res].kind == M_DEVICES
                   ? place(&m->res[it->res], it,
                           usable_devices(m, it->res, seq, sh->head))
                   : 0;
  }
  return head_fits_at(m, sh->head, sh->at, sh->computed_at, s, where);
}

/* Whether slot s (waiting, or arriving with seq M_INF) may backfill past
 * the head now. */
static bool backfill_ok(m_model *m, int s, uint64_t seq) {
  if (!(m->flags & CQ_POOL_BACKFILL) || m->slot[s].req.limit_ms <= 0)
    return false;
  int h = m_head(m);
  if (h < 0 || h == s)
    return false;
  shadow_refresh(m);
  if (m->shadow.at == M_INF || m->now >= m->shadow.at)
    return false;
  if (first_lacking(m, &m->slot[s].req, seq, h, NULL) >= 0)
    return false;
  return backfill_allows(m, s, seq);
}

/*
 * The promise, checked when a grant is made: the head granted after its
 * sticky S is late; late is allowed only when one of the specification's
 * exceptions applies. Grants made while the head waits are watched for
 * them:
 * - an ordinary grant of a resource the head names but had not claimed;
 * - on a device pool, an ordinary grant of a device the head has not
 *   reserved: the head reserves the devices with the most free capacity
 *   now, while S may count on another device, one a holder leaves at its
 *   limit; a younger request may take that device and hold it past S. The
 *   model takes any ordinary grant on a device pool the head has claimed,
 *   once S is computed, as such, and counts these late heads apart
 *   (device_late_heads); test_model.c keeps a program that shows one;
 * - a capacity shrunk, or a device taken offline, after S was computed
 *   (capacity_shrank()).
 */
static void shadow_check_grant(m_model *m, int s, bool backfill) {
  m_shadow *sh = &m->shadow;
  if (!(m->flags & CQ_POOL_BACKFILL) || sh->head < 0)
    return;
  if (s == sh->head && m->slot[s].seq == sh->seq) {
    if (sh->computed && sh->at != M_INF && m->now > sh->at) {
      m->late_heads++;
      if (!sh->excused && sh->device_excused)
        m->device_late_heads++;
      else if (!sh->excused)
        m->broken_promises++;
    }
    sh->head = -1;
    return;
  }
  if (backfill || m->slot[sh->head].state != M_WAITING)
    return;
  const m_slot *h = &m->slot[sh->head];
  for (int i = 0; i < h->req.n; i++) {
    int res = h->req.items[i].res;
    if (!m_names(&m->slot[s].req, res))
      continue;
    if (!(h->claims & (1u << i)))
      sh->excused = true;
    else if (m->res[res].kind == M_DEVICES && sh->computed)
      sh->device_excused = true;
  }
}

/* ------------------------------------------------------------------------ */
/* Examining and the sweep                                                   */
/* ------------------------------------------------------------------------ */

/* Examine waiter s: grant it, or claim what it lacks and block it on the
 * first resource it lacks. */
static void examine(m_model *m, int s) {
  m_slot *w = &m->slot[s];
  uint32_t lack;
  int first = first_lacking(m, &w->req, w->seq, -1, &lack);
  if (first < 0) {
    grant(m, s, w->seq, -1, false);
    out(m, s, 0);
    return;
  }
  add_claims(m, s, (m->flags & CQ_POOL_STAGED_CLAIMS) ? 1u << first : lack);
  w->blocker = first;
}

/* A backfill pass: the waiters behind the head that may pass it now are
 * granted, oldest first. Returns whether any was. */
static bool backfill_pass(m_model *m) {
  bool any = false;
  for (uint64_t seq = 0;;) {
    int next = -1;
    for (int s = 0; s < M_SLOT_MAX; s++)
      if (m->slot[s].state == M_WAITING && m->slot[s].seq > seq &&
          (next < 0 || m->slot[s].seq < m->slot[next].seq))
        next = s;
    if (next < 0)
      return any;
    seq = m->slot[next].seq;
    if (backfill_ok(m, next, seq)) {
      grant(m, next, seq, m->shadow.head, true);
      out(m, next, 0);
      any = true;
    }
  }
}

/* After every change that can let a waiter fit: examine the oldest waiter
 * whose blocker covers it until none does; then, with backfill and a head
 * with someone behind it, let waiters pass the head where the rule allows
 * (docs/POLICY.md: "Units coming back anywhere let the waiters behind H try
 * again, whatever blocked them"), and sweep again if that granted any.
 * A pass that grants nothing changes nothing, so the model passes after
 * every change rather than deciding which changes could matter. */
static void sweep(m_model *m) {
  m->pending = false;
  for (int rounds = 0;; rounds++) {
    if (rounds > 100000) {
      m->broken = "the sweep does not end";
      return;
    }
    int best = -1;
    for (int s = 0; s < M_SLOT_MAX; s++) {
      const m_slot *w = &m->slot[s];
      if (w->state == M_WAITING &&
          covered_item(m, w->seq, &w->req.items[w->blocker], -1) &&
          (best < 0 || w->seq < m->slot[best].seq))
        best = s;
    }
    if (best >= 0) {
      examine(m, best);
      continue;
    }
    if (!(m->flags & CQ_POOL_BACKFILL) || m_waiting(m) < 2)
      return;
    /* S is computed here, at the end of every sweep that leaves two
     * waiters or more (see shadow_refresh()). */
    shadow_refresh(m);
    if (m->shadow.at == M_INF || m->now >= m->shadow.at || !backfill_pass(m))
      return;
  }
}

/* ------------------------------------------------------------------------ */
/* Acquires, cancel, release                                                 */
/* ------------------------------------------------------------------------ */

/* An arrival: granted at once (normally or by backfill), or not. */
static bool arrive(m_model *m, int s, const m_req *req) {
  m_slot *g = &m->slot[s];
  memset(g, 0, sizeof(*g));
  g->req = *req;
  m_req_sort(m, &g->req);
  if (first_lacking(m, &g->req, UINT64_MAX, -1, NULL) < 0) {
    grant(m, s, UINT64_MAX, -1, false);
    return true;
  }
  if (backfill_ok(m, s, UINT64_MAX)) {
    grant(m, s, UINT64_MAX, m->shadow.head, true);
    return true;
  }
  return false;
}

int m_try(m_model *m, int s, const m_req *req) {
  if (m->slot[s].state != M_IDLE)
    return CQ_ESTATE;
  if (m_never(m, req))
    return CQ_ENEVER;
  if (arrive(m, s, req))
    return 0;
  memset(&m->slot[s], 0, sizeof(m->slot[s]));
  return CQ_EBUSY;
}

int m_submit(m_model *m, int s, const m_req *req, int64_t deadline) {
  if (m->slot[s].state != M_IDLE)
    return CQ_ESTATE;
  if (m_never(m, req))
    return CQ_ENEVER;
  if (arrive(m, s, req)) {
    out(m, s, 0);
    return 0;
  }
  m_slot *g = &m->slot[s];
  if (deadline != M_INF && m->now >= deadline) {
    /* A deadline already past: one attempt, then timed out, nothing left
     * behind. */
    memset(g, 0, sizeof(*g));
    out(m, s, CQ_ETIMEDOUT);
    return 0;
  }
  g->state = M_WAITING;
  g->seq = m->next_seq++;
  g->deadline = deadline;
  uint32_t lack;
  int first = first_lacking(m, &g->req, g->seq, -1, &lack);
  uint32_t bits = (m->flags & CQ_POOL_STAGED_CLAIMS) ? 1u << first : lack;
  add_claims(m, s, bits);
  /* Where it became the claimant of a resource some waiter is blocked on
   * (itself included: it is blocked on its first item while it claims),
   * the library leaves the resource for its next sweep to walk (see
   * m_release()). */
  g->blocker = 0;
  for (int i = 0; i < g->req.n; i++)
    if ((bits & (1u << i)) && m_claimant(m, g->req.items[i].res) == s &&
        has_blocked(m, g->req.items[i].res))
      m->pending = true;
  g->blocker = first;
  return 0;
}

/* A waiter leaves with `status` (its callback runs). */
static void leave(m_model *m, int s, int status) {
  drop_claims(m, s);
  memset(&m->slot[s], 0, sizeof(m->slot[s]));
  out(m, s, status);
}

int m_cancel(m_model *m, int s) {
  if (m->slot[s].state != M_WAITING)
    return CQ_ESTATE;
  leave(m, s, CQ_ECANCELED);
  sweep(m);
  return 0;
}

int m_release(m_model *m, int s) {
  if (m->slot[s].state != M_HELD)
    return CQ_ESTATE;
  if (m->shadow.counted & (1u << s)) {
    m->shadow.stale = true;
    m->shadow.counted &= ~(1u << s);
  }
  /* A grant of a request that names nothing gives nothing back, a change
   * that can let no one fit; the library sweeps then only if an arrival
   * left a resource to walk (m->pending), and that sweep may compute S. */
  bool gives_back = m->slot[s].req.n > 0;
  ungrant(m, s);
  memset(&m->slot[s], 0, sizeof(m->slot[s]));
  if (gives_back || m->pending)
    sweep(m);
  return 0;
}

/* Part of a grant comes back early: what it gives back is free at once,
 * and the head's S is computed again when next needed (the library counted
 * the holder whole in it). */
static void gave_back_part(m_model *m, int s) {
  m->slot[s].partial = true;
  m->shadow.stale = true;
  sweep(m);
}

int m_release_part(m_model *m, int s, int res, int64_t amount) {
  m_slot *g = &m->slot[s];
  if (g->state != M_HELD)
    return CQ_ESTATE;
  int i = m->res[res].live ? find_item(&g->req, res) : -1;
  if (i < 0)
    return CQ_ENOENT;
  if (m->res[res].kind == M_DEVICES)
    return CQ_EINVAL; /* devices: cq_grant_release_device() */
  if (amount <= 0 || amount > g->held[i])
    return CQ_ERANGE;
  g->held[i] -= amount;
  m->res[res].used -= amount;
  gave_back_part(m, s);
  return 0;
}

int m_release_device(m_model *m, int s, int res, int dev, int64_t milli) {
  m_slot *g = &m->slot[s];
  if (g->state != M_HELD)
    return CQ_ESTATE;
  m_res *r = &m->res[res];
  int i = r->live && r->kind == M_DEVICES ? find_item(&g->req, res) : -1;
  if (i < 0 || dev < 0 || dev >= r->ndev || g->dev_held[i][dev] == 0)
    return CQ_ENOENT;
  if (g->req.items[i].whole ? milli != M_MILLI
                            : milli <= 0 || milli > g->dev_held[i][dev])
    return CQ_ERANGE;
  g->dev_held[i][dev] -= milli;
  g->held[i] -= milli;
  r->dev_used[dev] -= milli;
  if (g->req.items[i].whole)
    r->dev_whole[dev] = false;
  gave_back_part(m, s);
  return 0;
}

int m_destroy_rc(const m_model *m) {
  for (int s = 0; s < M_SLOT_MAX; s++)
    if (m->slot[s].state != M_IDLE)
      return CQ_EINUSE;
  return 0;
}

/* Waiters that can now never fit fail first, oldest first; then the
 * sweep. */
static void capacity_changed(m_model *m) {
  m->shadow.stale = true;
  for (;;) {
    int oldest = -1;
    for (int s = 0; s < M_SLOT_MAX; s++)
      if (m->slot[s].state == M_WAITING && m_never(m, &m->slot[s].req) &&
          (oldest < 0 || m->slot[s].seq < m->slot[oldest].seq))
        oldest = s;
    if (oldest < 0)
      break;
    leave(m, oldest, CQ_ENEVER);
  }
  sweep(m);
}

/* A capacity that shrinks, or a device that goes offline, after the head's
 * S was computed may delay it past S: S never moves later, but the head no
 * longer fits at it. The specification's promise excepts it. (A shrink before S
 * is computed is in S, and excuses nothing; a head that changed since S
 * was computed gets a new shadow, excuse cleared, when next needed.) */
static void capacity_shrank(m_model *m) {
  if (m->shadow.head >= 0 && m->shadow.computed)
    m->shadow.excused = true;
}

int m_set_capacity(m_model *m, int res, int64_t cap) {
  if (m->res[res].cap == cap)
    return 0;
  if (cap < m->res[res].cap)
    capacity_shrank(m);
  m->res[res].cap = cap;
  capacity_changed(m);
  return 0;
}

int m_set_online(m_model *m, int res, int dev, bool online) {
  if (m->res[res].dev_online[dev] == online)
    return 0;
  if (!online)
    capacity_shrank(m);
  m->res[res].dev_online[dev] = online;
  capacity_changed(m);
  return 0;
}

/* Every waiter whose deadline has passed leaves (earliest deadline first,
 * then oldest), and only then the sweep runs. The specification does not say
 * whether a waiter whose deadline passed may still be granted by the
 * departure of another that expires in the same call; the library expires
 * them all first, and so does the model. */
void m_expire(m_model *m, int64_t now) {
  m->now = now;
  for (;;) {
    int first = -1;
    for (int s = 0; s < M_SLOT_MAX; s++) {
      const m_slot *w = &m->slot[s];
      if (w->state == M_WAITING && w->deadline != M_INF && w->deadline <= now &&
          (first < 0 || w->deadline < m->slot[first].deadline ||
           (w->deadline == m->slot[first].deadline &&
            w->seq < m->slot[first].seq)))
        first = s;
    }
    if (first < 0)
      break;
    leave(m, first, CQ_ETIMEDOUT);
  }
  /* The library sweeps on every expiry, even when no deadline passed; the
   * sweep computes S when two or more wait, which fixes the sticky S. */
  sweep(m);
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */
/* ------------------------------------------------------------------------ */

uint64_t m_waiting_on(const m_model *m, int res) {
  uint64_t n = 0;
  for (int s = 0; s < M_SLOT_MAX; s++)
    if (m->slot[s].state == M_WAITING && m_names(&m->slot[s].req, res))
      n++;
  return n;
}

uint64_t m_waiting(const m_model *m) {
  uint64_t n = 0;
  for (int s = 0; s < M_SLOT_MAX; s++)
    n += m->slot[s].state == M_WAITING;
  return n;
}

int64_t m_slot_held(const m_model *m, int s, int res) {
  const m_slot *g = &m->slot[s];
  int i = find_item(&g->req, res);
  return g->state == M_HELD && i >= 0 ? g->held[i] : 0;
}

uint32_t m_slot_devices(const m_model *m, int s, int res) {
  const m_slot *g = &m->slot[s];
  int i = find_item(&g->req, res);
  uint32_t mask = 0;
  if (g->state == M_HELD && i >= 0)
    for (int d = 0; d < M_DEV_MAX; d++)
      if (g->dev_held[i][d] > 0)
        mask |= 1u << d;
  return mask;
}

int64_t m_waiters_need(const m_model *m, int res) {
  int64_t sum = 0;
  const m_res *r = &m->res[res];
  for (int s = 0; s < M_SLOT_MAX; s++) {
    const m_slot *w = &m->slot[s];
    int i = find_item(&w->req, res);
    if (w->state != M_WAITING || i < 0)
      continue;
    const m_item *it = &w->req.items[i];
    sum += r->kind == M_DEVICES
               ? (it->whole ? it->amount * M_MILLI : it->amount)
               : item_need(m, it);
  }
  return sum;
}
