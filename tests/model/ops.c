/*
 * The operation-sequence interpreter (see ops.h). One run owns a pool with
 * manual timers on its own virtual clock, a slot per grant (the library's
 * cq_grant and cq_req, the model's m_slot), and logs of the callbacks each
 * side ran during the current operation. After every operation it compares:
 * - the operation's return code and the callbacks run, in order;
 * - per slot: idle, waiting or held, and what it holds of every resource,
 *   devices included;
 * - per resource: capacity, in use, withheld, waiting; per device: used,
 *   whole, online, reserved; the pool's waiting, backfilled and late heads;
 * and checks the invariants on what the library reports: in-use within
 * capacity on every budget, class and device after every operation (see
 * check_capacity() for a capacity shrunk below what is held), in-use = the
 * sum of the grants, withheld within the waiters' needs and the free units,
 * no partial grants, and, with backfill and every holder keeping its limit,
 * no head granted after its sticky shadow time except where the specification
 * allows it. A failure is recorded with its kind (enum mo_fail), so that
 * the shrinker keeps only programs that fail the same way.
 *
 * With CQ_POOL_BACKFILL the interpreter keeps every hold limit: advancing
 * the clock releases each limited grant at its limit end, and expires the
 * deadlines that pass on the way at their time; at one moment the releases
 * come first (see op_advance()).
 */
#include "ops.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "cq_internal.h"
#include "cronoq/cronoq.h"
#include "model.h"
#include "support/prog.h"

int mo_sabotage_in_use;
int mo_sabotage_waiting;
mo_totals mo_total;

const char *mo_fail_name(int kind) {
  static const char *const names[MO_FAIL_NKINDS] = {
      [MO_FAIL_NONE] = "none",
      [MO_FAIL_SETUP] = "setup",
      [MO_FAIL_RC] = "return code",
      [MO_FAIL_CALLBACKS] = "callbacks",
      [MO_FAIL_SLOT] = "slot",
      [MO_FAIL_PARTIAL] = "partial grant",
      [MO_FAIL_RESOURCE] = "resource",
      [MO_FAIL_SUM] = "sum of the grants",
      [MO_FAIL_CAPACITY] = "capacity",
      [MO_FAIL_WITHHELD] = "withheld",
      [MO_FAIL_DEVICE] = "device",
      [MO_FAIL_POOL] = "pool",
      [MO_FAIL_PROMISE] = "promise",
      [MO_FAIL_MODEL] = "model",
      [MO_FAIL_DESTROY] = "destroy",
      [MO_FAIL_SABOTAGE_IN_USE] = "sabotage in use",
      [MO_FAIL_SABOTAGE_WAITING] = "sabotage waiting",
  };
  return kind >= 0 && kind < MO_FAIL_NKINDS && names[kind] != NULL ? names[kind]
                                                                   : "unknown";
}

int mo_same_failure(const mo_result *a, const mo_result *b) {
  if (a->kind != b->kind)
    return 0;
  if (a->kind != MO_FAIL_RC)
    return 1;
  return a->lib_rc == b->lib_rc && a->model_rc == b->model_rc &&
         a->call != NULL && b->call != NULL && strcmp(a->call, b->call) == 0;
}

unsigned mo_pool_flags(uint8_t flags_byte) {
  unsigned f = 0;
  if (flags_byte & 1)
    f |= CQ_POOL_STAGED_CLAIMS;
  if (flags_byte & 2)
    f |= CQ_POOL_BACKFILL;
  /* Bit 8: no barging window. The model's waiters are callbacks, which the
   * window never touches: both modes must agree with it alike. */
  if (flags_byte & 8)
    f |= CQ_POOL_STRICT_ORDER;
  return f;
}

typedef struct run run;

typedef struct lslot {
  cq_grant grant;
  cq_req req;
  run *owner;
  int index;
  bool waiting; /* submitted, callback not run yet */
} lslot;

struct run {
  cq_pool *pool;
  int64_t now;
  m_model m;
  char names[M_RES_MAX][16];
  lslot ls[M_SLOT_MAX];
  int nlouts;
  m_out louts[M_OUT_MAX];
  FILE *trace;
  mo_result *res;
  bool failed;
  /* What the library reported after the previous operation, for
   * check_capacity(): in use per resource and device, and the slots held. */
  int64_t prev_in_use[M_RES_MAX];
  int64_t prev_dev_used[M_RES_MAX][M_DEV_MAX];
  uint32_t prev_held;
};

static int64_t run_clock(void *arg) { return ((run *)arg)->now; }

/* The event hook only turns the lock-free paths off (see mo_run()). */
static void on_event(const cq_event *ev, void *arg) {
  (void)ev;
  (void)arg;
}

static void on_grant(cq_grant *g, int status) {
  lslot *ls = (lslot *)g->data;
  run *r = ls->owner;
  ls->waiting = false;
  if (r->nlouts < M_OUT_MAX)
    r->louts[r->nlouts++] = (m_out){ls->index, status};
}

/* Record the run's first failure, of `kind` (enum mo_fail). Returns
 * whether this one was recorded. */
static bool fail(run *r, int kind, const char *fmt, ...) {
  if (r->failed)
    return false;
  r->failed = true;
  r->res->kind = kind;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->res->why, sizeof(r->res->why), fmt, ap);
  va_end(ap);
  return true;
}

static void tr(run *r, const char *fmt, ...) {
  if (r->trace == NULL)
    return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(r->trace, fmt, ap);
  va_end(ap);
}

static const char *kind_name(int kind) {
  return kind == M_BUDGET ? "budget" : kind == M_CLASS ? "class" : "devices";
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                  */
/* ------------------------------------------------------------------------ */

/* Literal operations (b0 & MO_LITERAL) take their arguments as written. */
#define LIT(op) (((op)->b[0] & MO_LITERAL) != 0)

static const int64_t fractions[8] = {250, 500, 700, 1000, 100, 300, 600, 800};

/* The live resource `b` designates (modulo the resources added), or -1. */
static int pick_res(const run *r, uint8_t b) {
  if (r->m.nres == 0)
    return -1;
  int i = b % r->m.nres;
  return r->m.res[i].live ? i : -1;
}

/*
 * Build slot request bytes b[2..6] into both sides: b2 selects resources
 * (resource i when bits i % 8 and (i + 4) % 8 are both set, so a request
 * names a quarter of them: collisions without most requests being never
 * satisfiable), b3..b5 the amounts, mostly within today's capacity, b6 the
 * hold limit (none when b6 % 4 == 0, or b6 % 8 == 0 with backfill). Returns
 * false if the library refused
 * to build it.
 */
static bool build_req(run *r, const mo_op *op, cq_req *lreq, m_req *mreq) {
  memset(mreq, 0, sizeof(*mreq));
  if (cq_req_init(lreq, r->pool) != 0) {
    fail(r, MO_FAIL_SETUP, "cq_req_init failed");
    return false;
  }
  bool has_class = false;
  int k = 0;
  for (int i = 0; i < r->m.nres && mreq->n < M_ITEMS_MAX; i++) {
    const m_res *res = &r->m.res[i];
    uint8_t sel = LIT(op)
                      ? op->b[2]
                      : (uint8_t)(op->b[2] & (op->b[2] >> 4 | op->b[2] << 4));
    if (!res->live || !(sel & (1u << (i % 8))))
      continue;
    uint8_t lit = op->b[3 + k % 3];
    uint8_t amt = (uint8_t)(lit ^ (uint8_t)(i * 37));
    k++;
    m_item it = {i, 0, false};
    int rc;
    if (res->kind == M_BUDGET) {
      /* One time in eight more than the capacity (never satisfiable, or a
       * lone request). */
      int64_t cap = res->cap > 0 ? res->cap : 1;
      it.amount = (amt & 0x70) == 0 ? res->cap + 1 + amt % 2 : 1 + amt % cap;
      if (LIT(op))
        it.amount = lit > 0 ? lit : 1;
      rc = cq_req_add(lreq, r->names[i], it.amount);
      tr(r, " %s:%" PRId64, r->names[i], it.amount);
      mo_total.lone_at_zero += res->lone && res->cap == 0;
    } else if (res->kind == M_CLASS) {
      if (has_class)
        continue;
      has_class = true;
      it.amount = 1;
      rc = cq_req_set_class(lreq, r->names[i]);
      tr(r, " class=%s", r->names[i]);
    } else if (LIT(op) ? (lit & 0x80) != 0 : (amt & 0x80) != 0) {
      it.whole = true;
      it.amount = 1 + amt % (res->ndev >= 3  ? 3
                             : res->ndev > 0 ? res->ndev
                                             : 1);
      if (LIT(op))
        it.amount = (lit & 0x7f) > 0 ? lit & 0x7f : 1;
      rc = cq_req_add_devices(lreq, r->names[i], it.amount);
      tr(r, " %s:%" PRId64 "dev", r->names[i], it.amount);
    } else {
      it.amount = fractions[amt % 8];
      if (LIT(op))
        it.amount = lit == 0 ? 1 : lit >= 100 ? M_MILLI : lit * 10;
      rc = cq_req_add_fraction(lreq, r->names[i], it.amount);
      tr(r, " %s:%s%" PRId64 "m", r->names[i], "", it.amount);
    }
    if (rc != 0) {
      fail(r, MO_FAIL_SETUP, "building a request on %s failed: %s: %s",
           r->names[i], cq_err_name(rc), cq_req_error(lreq));
      return false;
    }
    mreq->items[mreq->n++] = it;
  }
  /* With backfill most requests declare a limit: a holder for ever makes
   * the head's shadow time unknown, and then nothing is backfilled. */
  int none = (r->m.flags & CQ_POOL_BACKFILL) ? 8 : 4;
  mreq->limit_ms = (op->b[6] % none == 0) ? 0 : 1 + (op->b[6] >> 3) % 40;
  if (LIT(op))
    mreq->limit_ms = op->b[6];
  if (mreq->limit_ms > 0) {
    tr(r, " limit=%" PRId64, mreq->limit_ms);
    if (cq_req_set_hold_limit(lreq, mreq->limit_ms) != 0) {
      fail(r, MO_FAIL_SETUP, "cq_req_set_hold_limit failed");
      return false;
    }
  }
  return true;
}

/* ------------------------------------------------------------------------ */
/* Comparison and invariants                                                 */
/* ------------------------------------------------------------------------ */

static int64_t lib_held(run *r, int s, int res) {
  return cq_grant_held(&r->ls[s].grant, r->names[res]);
}

static uint32_t lib_devices(run *r, int s, int res) {
  uint32_t idx[M_DEV_MAX + 1];
  size_t n =
      cq_grant_devices(&r->ls[s].grant, r->names[res], idx, M_DEV_MAX + 1);
  uint32_t mask = 0;
  for (size_t i = 0; i < n && i <= M_DEV_MAX; i++)
    mask |= 1u << idx[i];
  return mask;
}

static void compare_outs(run *r) {
  const m_model *m = &r->m;
  bool same = r->nlouts == m->nouts;
  for (int i = 0; same && i < m->nouts; i++)
    same = r->louts[i].slot == m->outs[i].slot &&
           r->louts[i].status == m->outs[i].status;
  if (same)
    return;
  char lib[256] = "", mod[256] = "";
  for (int i = 0; i < r->nlouts; i++)
    snprintf(lib + strlen(lib), sizeof(lib) - strlen(lib), " s%d:%s",
             r->louts[i].slot, cq_err_name(r->louts[i].status));
  for (int i = 0; i < m->nouts; i++)
    snprintf(mod + strlen(mod), sizeof(mod) - strlen(mod), " s%d:%s",
             m->outs[i].slot, cq_err_name(m->outs[i].status));
  fail(r, MO_FAIL_CALLBACKS, "callbacks differ: library [%s ] model [%s ]", lib,
       mod);
}

/* No partial grants: a held slot holds exactly its request. */
static void check_whole_grant(run *r, int s) {
  const m_slot *g = &r->m.slot[s];
  if (g->partial)
    return; /* it gave part back early; compare() checks what it holds */
  for (int i = 0; i < g->req.n; i++) {
    const m_item *it = &g->req.items[i];
    const m_res *res = &r->m.res[it->res];
    int64_t held = lib_held(r, s, it->res);
    int64_t want = it->amount;
    if (res->kind == M_DEVICES) {
      uint32_t devs = lib_devices(r, s, it->res);
      int n = 0;
      for (uint32_t x = devs; x != 0; x &= x - 1)
        n++;
      if (it->whole ? (n != it->amount || held != it->amount * M_MILLI)
                    : (n != 1 || held != it->amount))
        fail(r, MO_FAIL_PARTIAL,
             "partial grant: s%d holds %" PRId64 " on %d devices of %s", s,
             held, n, r->names[it->res]);
      continue;
    }
    if (res->kind == M_BUDGET && res->lone && it->amount > g->held[i])
      want = g->held[i]; /* a lone request holds the capacity of its grant */

    if (held != want)
      fail(r, MO_FAIL_PARTIAL,
           "partial grant: s%d holds %" PRId64 " of %s, asked %" PRId64, s,
           held, r->names[it->res], want);
  }
}

/*
 * In use within capacity, on a budget or class (d < 0) or on device d of a
 * device pool (capacity: a whole device online, nothing offline). The
 * docs/POLICY.md lets a capacity shrink below what is held ("nothing is taken
 * from holders"), and a device go offline under its holders; then in use stays
 * above capacity until they release, but nothing may be granted there while
 * it is, and in use may not grow. `granted`: the operation granted
 * something there (seen by the library or the model). A device in use
 * beyond a whole device is wrong whatever came before.
 */
static void check_capacity(run *r, int i, int d, int64_t cap, int64_t used,
                           bool granted) {
  int64_t *prev = d < 0 ? &r->prev_in_use[i] : &r->prev_dev_used[i][d];
  char where[32];
  if (d < 0)
    snprintf(where, sizeof(where), "%s", r->names[i]);
  else
    snprintf(where, sizeof(where), "%s/%d", r->names[i], d);
  if (used > cap) {
    if (d >= 0 && used > M_MILLI)
      fail(r, MO_FAIL_CAPACITY, "%s: in use %" PRId64 " of one device", where,
           used);
    else if (granted)
      fail(r, MO_FAIL_CAPACITY,
           "%s: a grant while in use %" PRId64 " is above capacity %" PRId64,
           where, used, cap);
    else if (used > *prev)
      fail(r, MO_FAIL_CAPACITY,
           "%s: in use grew from %" PRId64 " to %" PRId64
           ", above capacity %" PRId64,
           where, *prev, used, cap);
  }
  *prev = used;
}

static void compare(run *r, uint32_t granted_now) {
  m_model *m = &r->m;
  if (m->broken != NULL)
    fail(r, MO_FAIL_MODEL, "the model broke: %s", m->broken);
  compare_outs(r);
  /* What the library granted during the operation: the slots held now that
   * were not before (a slot is granted at most once in an operation). */
  uint32_t held_now = 0, lib_res = 0, lib_dev[M_RES_MAX] = {0};
  for (int s = 0; s < M_SLOT_MAX; s++) {
    if (!cq_grant_is_held(&r->ls[s].grant))
      continue;
    held_now |= 1u << s;
    if (r->prev_held & (1u << s))
      continue;
    for (int i = 0; i < m->nres; i++) {
      if (!m->res[i].live || lib_held(r, s, i) == 0)
        continue;
      lib_res |= 1u << i;
      if (m->res[i].kind == M_DEVICES)
        lib_dev[i] |= lib_devices(r, s, i);
    }
  }
  r->prev_held = held_now;
  /* Slots. */
  for (int s = 0; s < M_SLOT_MAX; s++) {
    int lstate = cq_grant_is_held(&r->ls[s].grant) ? M_HELD
                 : r->ls[s].waiting                ? M_WAITING
                                                   : M_IDLE;
    if (lstate != m->slot[s].state) {
      fail(r, MO_FAIL_SLOT, "s%d is %s in the library, %s in the model", s,
           lstate == M_HELD ? "held"
           : lstate         ? "waiting"
                            : "idle",
           m->slot[s].state == M_HELD ? "held"
           : m->slot[s].state         ? "waiting"
                                      : "idle");
      return;
    }
    for (int i = 0; i < m->nres; i++) {
      if (!m->res[i].live)
        continue;
      int64_t lh = lib_held(r, s, i), mh = m_slot_held(m, s, i);
      if (lh != mh)
        fail(r, MO_FAIL_SLOT,
             "s%d holds %" PRId64 " of %s in the library, %" PRId64
             " in the model",
             s, lh, r->names[i], mh);
      if (m->res[i].kind == M_DEVICES &&
          lib_devices(r, s, i) != m_slot_devices(m, s, i))
        fail(r, MO_FAIL_SLOT,
             "s%d holds devices %#x of %s in the library, %#x in the model", s,
             lib_devices(r, s, i), r->names[i], m_slot_devices(m, s, i));
    }
    if (lstate == M_HELD)
      check_whole_grant(r, s);
  }
  /* Resources. */
  for (int i = 0; i < m->nres; i++) {
    const m_res *res = &m->res[i];
    if (!res->live)
      continue;
    cq_resource_stats st;
    int rc = cq_resource_stats_get(r->pool, r->names[i], &st);
    if (rc != 0) {
      fail(r, MO_FAIL_RESOURCE, "stats of %s: %s", r->names[i],
           cq_err_name(rc));
      return;
    }
    int64_t cap = res->cap, used = res->used, sum = 0;
    if (res->kind == M_DEVICES) {
      cap = 0;
      used = 0;
      for (int d = 0; d < res->ndev; d++) {
        cap += res->dev_online[d] ? M_MILLI : 0;
        used += res->dev_used[d];
      }
    }
    for (int s = 0; s < M_SLOT_MAX; s++)
      sum += lib_held(r, s, i);
    if (st.grants != res->grants)
      fail(r, MO_FAIL_RESOURCE,
           "%s: library counts %" PRIu64 " grants, the model %" PRIu64,
           r->names[i], st.grants, res->grants);
    if (st.capacity != cap || st.in_use != used ||
        st.waiting != m_waiting_on(m, i))
      fail(r, MO_FAIL_RESOURCE,
           "%s %s: library capacity %" PRId64 " in use %" PRId64
           " waiting %" PRIu64 ", model %" PRId64 " %" PRId64 " %" PRIu64,
           kind_name(res->kind), r->names[i], st.capacity, st.in_use,
           st.waiting, cap, used, m_waiting_on(m, i));
    if (st.in_use != sum)
      fail(r, MO_FAIL_SUM,
           "%s: in use %" PRId64 " but the grants hold %" PRId64, r->names[i],
           st.in_use, sum);
    if (res->kind != M_DEVICES)
      check_capacity(r, i, -1, st.capacity, st.in_use,
                     ((granted_now | lib_res) >> i) & 1);
    /* Budgets and classes withhold at most the claimant's need and what is
     * free; device pools withhold whole devices (docs/POLICY.md, "Reservation
     * on devices"), checked per device below. */
    if (res->kind != M_DEVICES &&
        (st.withheld > m_waiters_need(m, i) ||
         (st.withheld > 0 && st.withheld > st.capacity - st.in_use)))
      fail(r, MO_FAIL_WITHHELD,
           "%s: withholds %" PRId64 " for waiters needing %" PRId64,
           r->names[i], st.withheld, m_waiters_need(m, i));
    if (st.withheld != m_withheld(m, i))
      fail(r, MO_FAIL_WITHHELD,
           "%s: withheld %" PRId64 " in the library, %" PRId64 " in the model",
           r->names[i], st.withheld, m_withheld(m, i));
    if (mo_sabotage_in_use > 0 && res->kind == M_BUDGET &&
        st.in_use >= mo_sabotage_in_use)
      fail(r, MO_FAIL_SABOTAGE_IN_USE, "sabotage: %s in use %" PRId64,
           r->names[i], st.in_use);
    if (mo_sabotage_waiting > 0 && res->kind == M_BUDGET &&
        st.waiting >= (uint64_t)mo_sabotage_waiting)
      fail(r, MO_FAIL_SABOTAGE_WAITING, "sabotage: %s has %" PRIu64 " waiting",
           r->names[i], st.waiting);
    if (res->kind != M_DEVICES)
      continue;
    uint32_t rsv = m_reserved_devices(m, i);
    int lrsv = 0;
    int c = m_claimant(m, i);
    for (int d = 0; d < res->ndev; d++) {
      cq_device_stats ds;
      if (cq_device_stats_get(r->pool, r->names[i], (uint32_t)d, &ds) != 0) {
        fail(r, MO_FAIL_DEVICE, "device stats of %s/%d", r->names[i], d);
        return;
      }
      lrsv += ds.reserved != 0;
      check_capacity(r, i, d, ds.online ? M_MILLI : 0, ds.used_milli,
                     ((m->granted_dev[i] | lib_dev[i]) >> d) & 1);
      if (ds.whole && ds.used_milli != M_MILLI)
        fail(r, MO_FAIL_DEVICE, "%s/%d: held whole but used %" PRId64,
             r->names[i], d, ds.used_milli);
      if (ds.used_milli != res->dev_used[d] ||
          (ds.whole != 0) != res->dev_whole[d] ||
          (ds.online != 0) != res->dev_online[d] ||
          (ds.reserved != 0) != ((rsv >> d) & 1))
        fail(r, MO_FAIL_DEVICE,
             "%s/%d: library used %" PRId64 " whole %d online %d "
             "reserved %d, model %" PRId64 " %d %d %d",
             r->names[i], d, ds.used_milli, ds.whole, ds.online, ds.reserved,
             res->dev_used[d], res->dev_whole[d], res->dev_online[d],
             (int)((rsv >> d) & 1));
    }
    /* What is reserved never exceeds what the claimers need together: one
     * device for a fraction, n for n whole devices; nothing without one. */
    int64_t need_devs = 0;
    for (int w = 0; w < M_SLOT_MAX; w++) {
      const m_slot *sl = &m->slot[w];
      for (int k = 0; sl->state == M_WAITING && k < sl->req.n; k++)
        if (sl->req.items[k].res == i && (sl->claims & (1u << k)))
          need_devs += sl->req.items[k].whole ? sl->req.items[k].amount : 1;
    }
    (void)c;
    if (lrsv > need_devs)
      fail(r, MO_FAIL_DEVICE,
           "%s: %d devices reserved for claimers needing %" PRId64, r->names[i],
           lrsv, need_devs);
  }
  cq_pool_stats ps;
  cq_pool_stats_get(r->pool, &ps);
  if (ps.waiting != m_waiting(m) || ps.backfilled != m->backfilled ||
      ps.late_heads != m->late_heads)
    fail(r, MO_FAIL_POOL,
         "pool: library waiting %" PRIu64 " backfilled %" PRIu64
         " late heads %" PRIu64 ", model %" PRIu64 " %" PRIu64 " %" PRIu64,
         ps.waiting, ps.backfilled, ps.late_heads, m_waiting(m), m->backfilled,
         m->late_heads);
  if (m->broken_promises != 0)
    fail(r, MO_FAIL_PROMISE, "a head was granted after its sticky shadow time");
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

static void expect_rc(run *r, const char *what, int lrc, int mrc) {
  tr(r, " -> %s", cq_err_name(lrc));
  if (lrc != mrc &&
      fail(r, MO_FAIL_RC, "%s returned %s in the library, %s in the model",
           what, cq_err_name(lrc), cq_err_name(mrc))) {
    r->res->call = what;
    r->res->lib_rc = lrc;
    r->res->model_rc = mrc;
  }
}

static void add_res(run *r, int i, const char *prefix) {
  snprintf(r->names[i], sizeof(r->names[i]), "%s%d", prefix, i);
}

static void count_acquire(run *r, int s, int rc, int code) {
  const m_slot *g = &r->m.slot[s];
  if (rc == CQ_EBUSY || rc == CQ_ETIMEDOUT)
    mo_total.busy++;
  else if (rc == CQ_ENEVER)
    mo_total.never++;
  else if (rc == 0 && g->state == M_WAITING)
    mo_total.parked++;
  if (rc != 0 || g->state != M_HELD || (code == MO_SUBMIT && r->m.nouts == 0))
    return;
  mo_total.granted_at_once++;
  for (int i = 0; i < g->req.n; i++) {
    const m_res *res = &r->m.res[g->req.items[i].res];
    mo_total.device_items += res->kind == M_DEVICES;
    mo_total.whole_device_items += g->req.items[i].whole;
    mo_total.class_items += res->kind == M_CLASS;
    mo_total.lone_grants +=
        res->kind == M_BUDGET && res->lone && g->req.items[i].amount > res->cap;
  }
}

static void op_acquire(run *r, const mo_op *op, int code) {
  int s = op->b[1] % M_SLOT_MAX;
  lslot *ls = &r->ls[s];
  static const char *const what[] = {"try", "submit", "acquire"};
  int w = code == MO_TRY ? 0 : code == MO_SUBMIT ? 1 : 2;
  tr(r, "%s s%d {", what[w], s);
  m_req mreq;
  cq_req scratch;
  /* A slot in use keeps its request (it may still be waiting on it). */
  cq_req *lreq = r->m.slot[s].state == M_IDLE ? &ls->req : &scratch;
  if (!build_req(r, op, lreq, &mreq))
    return;
  tr(r, " }");
  int64_t deadline = CQ_NEVER;
  if (code == MO_SUBMIT) {
    unsigned v = op->b[7] % 8;
    deadline = v == 0 ? r->now : v < 6 ? r->now + 7 * (int64_t)v : CQ_NEVER;
    if (LIT(op))
      deadline = op->b[7] == 255 ? CQ_NEVER : r->now + op->b[7];
    if (deadline == CQ_NEVER)
      tr(r, " deadline=never");
    else
      tr(r, " deadline=+%" PRId64, deadline - r->now);
  }
  int lrc, mrc;
  if (code == MO_TRY) {
    lrc = cq_grant_try(r->pool, &ls->grant, lreq);
    mrc = m_try(&r->m, s, &mreq);
  } else if (code == MO_SUBMIT) {
    bool was_waiting = ls->waiting;
    ls->waiting = true;
    lrc = cq_grant_submit(r->pool, &ls->grant, lreq, deadline, on_grant);
    if (lrc != 0)
      ls->waiting = was_waiting;
    mrc = m_submit(&r->m, s, &mreq, deadline);
  } else {
    /* A blocking acquire with a deadline already past: one attempt. */
    lrc = cq_grant_acquire(r->pool, &ls->grant, lreq, r->now);
    if (r->m.slot[s].state != M_IDLE) {
      mrc = CQ_ESTATE;
    } else {
      mrc = m_try(&r->m, s, &mreq);
      if (mrc == CQ_EBUSY)
        mrc = CQ_ETIMEDOUT;
    }
  }
  expect_rc(r, what[w], lrc, mrc);
  count_acquire(r, s, mrc, code);
}

/* Release in both, at the current time. */
static void do_release(run *r, int s) {
  int lrc = cq_grant_release(r->pool, &r->ls[s].grant);
  int mrc = m_release(&r->m, s);
  expect_rc(r, "release", lrc, mrc);
}

/* Move the clock to t and expire in both. */
static void do_expire(run *r, int64_t t) {
  r->now = t;
  int64_t next;
  int lrc = cq_pool_expire(r->pool, &next);
  m_expire(&r->m, t);
  expect_rc(r, "expire", lrc, 0);
}

/*
 * Advance the clock. With backfill every holder keeps its limit, so time
 * moves event by event, as a pool with a timer would see it: each limited
 * grant is released at its limit end, and the deadlines that pass before
 * it are expired at their time, first. At one moment the releases come
 * first, then the expiry (which treats a deadline, or a limit end, equal
 * to now as passed): a holder released at its limit end kept its limit,
 * and a waiter whose deadline is that moment still waits when the release
 * happens (with CQ_POOL_MANUAL_TIMERS deadlines pass only in
 * cq_pool_expire), so it may still be granted, or passed by a backfill.
 */
static void op_advance(run *r, const mo_op *op) {
  int64_t dt = LIT(op) ? op->b[1] : 1 + op->b[1] % 24;
  int64_t target = r->now + dt;
  tr(r, "advance +%" PRId64 " (to %" PRId64 ")", dt, target);
  while ((r->m.flags & CQ_POOL_BACKFILL) && !r->failed) {
    int first = -1;
    int64_t deadline = M_INF;
    for (int s = 0; s < M_SLOT_MAX; s++) {
      const m_slot *g = &r->m.slot[s];
      if (g->state == M_HELD && g->end <= target &&
          (first < 0 || g->end < r->m.slot[first].end))
        first = s;
      if (g->state == M_WAITING && g->deadline < deadline)
        deadline = g->deadline;
    }
    if (first < 0)
      break;
    int64_t t = r->m.slot[first].end;
    if (deadline < t) {
      /* Later than now (those up to now have been expired); never back. */
      int64_t at = deadline > r->now ? deadline : r->now;
      tr(r, "; expire at %" PRId64, at);
      do_expire(r, at);
      continue;
    }
    if (t > r->now)
      r->now = r->m.now = t;
    tr(r, "; release s%d at its limit end %" PRId64, first, t);
    do_release(r, first);
  }
  do_expire(r, target);
}

/*
 * Give part of a grant back early: `amount` units of a budget or class
 * (all it holds one time in four, so grants come to hold nothing), or on
 * a device pool one device it holds: all of a fraction or of a whole
 * device, or half a fraction. Arguments that name nothing it holds are
 * passed on as they are, so the refusals are compared too.
 */
static void op_release_part(run *r, const mo_op *op) {
  m_model *m = &r->m;
  int s = op->b[1] % M_SLOT_MAX;
  int i = pick_res(r, op->b[2]);
  /* Mostly a held slot and a resource it names, so that grants come to
   * hold nothing often; one time in eight as the bytes say. */
  int held_slots[M_SLOT_MAX], nheld = 0;
  for (int k = 0; k < M_SLOT_MAX; k++)
    if (m->slot[k].state == M_HELD && m->slot[k].req.n > 0)
      held_slots[nheld++] = k;
  if (!LIT(op) && op->b[1] % 8 != 0 && nheld > 0) {
    s = held_slots[op->b[1] % nheld];
    const m_req *q = &m->slot[s].req;
    i = q->items[op->b[2] % q->n].res;
  }
  if (i < 0 || !m->res[i].live)
    return;
  int64_t held = m_slot_held(m, s, i);
  int lrc, mrc;
  if (m->res[i].kind != M_DEVICES) {
    int64_t amount = op->b[3] % 4 == 0 ? held : op->b[3] % 4;
    if (LIT(op))
      amount = op->b[3];
    tr(r, "release part s%d %s:%" PRId64, s, r->names[i], amount);
    lrc = cq_grant_release_part(r->pool, &r->ls[s].grant, r->names[i], amount);
    mrc = m_release_part(m, s, i, amount);
  } else {
    uint32_t devs = m_slot_devices(m, s, i);
    int dev = 0, k = 0;
    for (int d = 0; d < M_DEV_MAX; d++)
      if (devs & (1u << d) && k++ <= (op->b[3] >> 2) % 2)
        dev = d;
    int64_t on = 0;
    for (int d = 0; d < M_DEV_MAX; d++)
      if (devs & (1u << d))
        on = held / (k > 0 ? k : 1);
    int64_t milli = op->b[3] % 2 == 0 || on < 2 ? on : on / 2;
    if (LIT(op)) {
      dev = op->b[3] % M_DEV_MAX;
      milli = op->b[4] * 10;
    }
    tr(r, "release device s%d %s/%d %" PRId64 "m", s, r->names[i], dev, milli);
    lrc = cq_grant_release_device(r->pool, &r->ls[s].grant, r->names[i],
                                  (uint32_t)dev, milli);
    mrc = m_release_device(m, s, i, dev, milli);
  }
  expect_rc(r, "release part", lrc, mrc);
  if (mrc != 0)
    return;
  mo_total.partial_releases++;
  int64_t left = 0;
  for (int k = 0; k < m->nres; k++)
    left += m_slot_held(m, s, k);
  mo_total.emptied += left == 0;
}

/* Destroying a pool that something still holds or waits on is refused.
 * When nothing does it would succeed, and the run would lose its pool, so
 * the interpreter does not try. */
static void op_destroy(run *r) {
  int mrc = m_destroy_rc(&r->m);
  tr(r, "destroy");
  if (mrc == 0) {
    tr(r, " (skipped: nothing is held or waits)");
    return;
  }
  int lrc = cq_pool_destroy(r->pool);
  if (lrc == 0)
    r->pool = NULL; /* destroyed under its holders: nothing more can run */
  expect_rc(r, "cq_pool_destroy", lrc, mrc);
  mo_total.destroys_refused += lrc == CQ_EINUSE;
}

static void step(run *r, const mo_op *op) {
  m_model *m = &r->m;
  int code = (op->b[0] & 0x7f) % MO_NCODES;
  switch (code) {
  case MO_ADD_BUDGET: {
    int64_t cap = LIT(op) ? op->b[1] : op->b[1] % 10;
    bool lone = op->b[2] & 1;
    int i = m_add_budget(m, cap, lone);
    if (i < 0)
      return;
    add_res(r, i, "b");
    tr(r, "add budget %s cap=%" PRId64 "%s", r->names[i], cap,
       lone ? " lone" : "");
    int lrc =
        cq_budget_add_ex(r->pool, r->names[i], cap, lone ? CQ_BUDGET_LONE : 0u);
    expect_rc(r, "cq_budget_add_ex", lrc, 0);
    return;
  }
  case MO_ADD_CLASS: {
    int64_t max = LIT(op) ? op->b[1] : op->b[1] % 8 == 0 ? 0 : 1 + op->b[1] % 3;
    int i = m_add_class(m, max);
    if (i < 0)
      return;
    add_res(r, i, "c");
    tr(r, "add class %s max=%" PRId64, r->names[i], max);
    expect_rc(r, "cq_class_add", cq_class_add(r->pool, r->names[i], max), 0);
    return;
  }
  case MO_ADD_DEVICES: {
    int n = op->b[1] % 16 == 0 ? 0 : 1 + op->b[1] % M_DEV_MAX;
    if (LIT(op))
      n = op->b[1] < M_DEV_MAX ? op->b[1] : M_DEV_MAX;
    int i = m_add_devices(m, n);
    if (i < 0)
      return;
    add_res(r, i, "d");
    tr(r, "add devices %s n=%d", r->names[i], n);
    expect_rc(r, "cq_devices_add",
              cq_devices_add(r->pool, r->names[i], (size_t)n, NULL), 0);
    return;
  }
  case MO_REMOVE: {
    int i = pick_res(r, op->b[1]);
    if (i < 0)
      return;
    tr(r, "remove %s", r->names[i]);
    int lrc = cq_resource_remove(r->pool, r->names[i]);
    expect_rc(r, "cq_resource_remove", lrc, m_remove(m, i));
    return;
  }
  case MO_TRY:
  case MO_SUBMIT:
  case MO_ACQUIRE_NOW:
    op_acquire(r, op, code);
    return;
  case MO_CANCEL: {
    int s = op->b[1] % M_SLOT_MAX;
    tr(r, "cancel s%d", s);
    int lrc = cq_grant_cancel(r->pool, &r->ls[s].grant);
    expect_rc(r, "cancel", lrc, m_cancel(m, s));
    return;
  }
  case MO_RELEASE: {
    int s = op->b[1] % M_SLOT_MAX;
    tr(r, "release s%d", s);
    do_release(r, s);
    return;
  }
  case MO_ADVANCE:
    op_advance(r, op);
    return;
  case MO_SET_CAP: {
    int i = pick_res(r, op->b[1]);
    if (i < 0 || m->res[i].kind == M_DEVICES)
      return;
    int64_t cap = LIT(op) ? op->b[2] : op->b[2] % 10;
    tr(r, "set %s %s to %" PRId64, kind_name(m->res[i].kind), r->names[i], cap);
    int lrc = m->res[i].kind == M_CLASS
                  ? cq_class_set_max(r->pool, r->names[i], cap)
                  : cq_budget_set_capacity(r->pool, r->names[i], cap);
    expect_rc(r, "set capacity", lrc, m_set_capacity(m, i, cap));
    return;
  }
  case MO_ONLINE: {
    int i = pick_res(r, op->b[1]);
    if (i < 0 || m->res[i].kind != M_DEVICES || m->res[i].ndev == 0)
      return;
    int d = op->b[2] % m->res[i].ndev;
    bool on = op->b[3] & 1;
    tr(r, "device %s/%d %s", r->names[i], d, on ? "online" : "offline");
    int lrc = cq_device_set_online(r->pool, r->names[i], (uint32_t)d, on);
    expect_rc(r, "cq_device_set_online", lrc, m_set_online(m, i, d, on));
    return;
  }
  case MO_RELEASE_PART:
    op_release_part(r, op);
    return;
  case MO_DESTROY:
    op_destroy(r);
    return;
  default:
    return;
  }
}

/* Release and cancel whatever is left, so the pool can be destroyed. */
static void drain(run *r) {
  for (int s = 0; s < M_SLOT_MAX; s++)
    if (r->ls[s].waiting)
      cq_grant_cancel(r->pool, &r->ls[s].grant);
  for (int pass = 0; pass < 2; pass++)
    for (int s = 0; s < M_SLOT_MAX; s++) {
      if (cq_grant_is_held(&r->ls[s].grant))
        cq_grant_release(r->pool, &r->ls[s].grant);
      if (r->ls[s].waiting)
        cq_grant_cancel(r->pool, &r->ls[s].grant);
    }
}

int mo_run(uint8_t flags, const mo_op *ops, size_t n, FILE *trace,
           mo_result *res) {
  static run r; /* large; one run at a time per process */
  memset(&r, 0, sizeof(r));
  memset(res, 0, sizeof(*res));
  res->failed_at = -1;
  r.res = res;
  r.trace = trace;
  r.now = 1000;
  unsigned pflags = mo_pool_flags(flags);
  m_init(&r.m, pflags, r.now);
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = pflags | CQ_POOL_MANUAL_TIMERS;
  cfg.clock = run_clock;
  cfg.clock_arg = &r;
  /* Flags bit 4: an event hook, which turns the lock-free paths off (every
   * acquire and release takes the lock), so both paths are compared. A
   * backfill pool never takes them (docs/POLICY.md, "Hold limits": the shadow
   * time must see every grant and every release), hook or not. */
  if (flags & 4)
    cfg.on_event = on_event;
  if (cq_pool_create(&r.pool, &cfg) != 0) {
    snprintf(res->why, sizeof(res->why), "cq_pool_create failed");
    res->failed_at = 0;
    res->kind = MO_FAIL_SETUP;
    return 1;
  }
  for (int s = 0; s < M_SLOT_MAX; s++) {
    cq_grant_init(&r.ls[s].grant);
    r.ls[s].grant.data = &r.ls[s];
    r.ls[s].owner = &r;
    r.ls[s].index = s;
  }
  tr(&r, "pool%s%s%s%s\n", (pflags & CQ_POOL_STAGED_CLAIMS) ? " staged" : "",
     (pflags & CQ_POOL_BACKFILL) ? " backfill" : "",
     (pflags & CQ_POOL_STRICT_ORDER) ? " strict" : "",
     cfg.on_event != NULL ? " hook" : "");
  for (size_t k = 0; k < n && !r.failed; k++) {
    r.nlouts = 0;
    m_begin_op(&r.m);
    tr(&r, "%3zu: t=%" PRId64 " ", k, r.now);
    step(&r, &ops[k]);
    if (r.pool != NULL) {
      /* The library's own invariants, from the inside, after every one. */
      cq__mutex_lock(&r.pool->lock);
      cq__policy_check(r.pool, true);
      cq__mutex_unlock(&r.pool->lock);
    }
    uint32_t granted_now = r.m.granted_res;
    compare(&r, granted_now);
    for (int i = 0; i < r.nlouts; i++)
      tr(&r, "; cb s%d %s", r.louts[i].slot, cq_err_name(r.louts[i].status));
    tr(&r, "\n");
    res->ops_run = k + 1;
    mo_total.ops++;
    for (int i = 0; i < r.m.nouts; i++) {
      int st = r.m.outs[i].status;
      bool waited = !((ops[k].b[0] & 0x7f) % MO_NCODES == MO_SUBMIT &&
                      r.m.outs[i].slot == ops[k].b[1] % M_SLOT_MAX);
      mo_total.granted_after_wait += st == 0 && waited;
      mo_total.timed_out += st == CQ_ETIMEDOUT;
      mo_total.cancelled += st == CQ_ECANCELED;
      mo_total.failed_never += st == CQ_ENEVER;
    }
    int code = (ops[k].b[0] & 0x7f) % MO_NCODES;
    mo_total.capacity_changes += code == MO_SET_CAP;
    mo_total.offline += code == MO_ONLINE && !(ops[k].b[3] & 1);
    if (r.failed)
      res->failed_at = (long)k;
  }
  if (!r.failed)
    tr(&r,
       "backfilled %" PRIu64 ", late heads %" PRIu64
       " (late after a device grant %" PRIu64 ")\n",
       r.m.backfilled, r.m.late_heads, r.m.device_late_heads);
  mo_total.backfilled += r.m.backfilled;
  mo_total.late_heads += r.m.late_heads;
  mo_total.device_late_heads += r.m.device_late_heads;
  if (r.pool == NULL)
    return 1; /* destroyed under its holders (op_destroy) */
  drain(&r);
  if (cq_pool_destroy(r.pool) != 0 && !r.failed) {
    r.failed = true;
    res->failed_at = (long)n;
    res->kind = MO_FAIL_DESTROY;
    snprintf(res->why, sizeof(res->why),
             "the pool could not be destroyed after draining");
  }
  return r.failed ? 1 : 0;
}

int model_run_bytes(const uint8_t *data, size_t size, char *why,
                    size_t why_len) {
  if (size == 0)
    return 0;
  size_t n = (size - 1) / MO_OP_BYTES;
  if (n > 4096)
    n = 4096;
  static mo_op ops[4096];
  memcpy(ops, data + 1, n * MO_OP_BYTES);
  mo_result res;
  int rc = mo_run(data[0], ops, n, NULL, &res);
  if (rc != 0 && why != NULL && why_len > 0)
    snprintf(why, why_len, "op %ld: %s", res.failed_at, res.why);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Generation and shrinking */
/* ------------------------------------------------------------------------ */

#define splitmix cqt_splitmix

void mo_generate(uint64_t seed, uint8_t *flags, mo_op *ops, size_t n) {
  uint64_t x = seed;
  *flags = (uint8_t)(splitmix(&x) & 15);
  /* Weights per code, in enum order. */
  static const int weight[MO_NCODES] = {2,  1, 2, 1, 10, 30, 5,
                                        10, 8, 4, 4, 2,  4,  1};
  /* One program in four is about backfill: a budget and a device pool that
   * stay, so that what the head withholds is what most requests lack. */
  static const int weight_bf[MO_NCODES] = {0,  0, 0, 0, 10, 30, 4,
                                           10, 8, 3, 3, 2,  3,  1};
  bool bf = splitmix(&x) % 4 == 0;
  const int *w = bf ? weight_bf : weight;
  if (bf)
    *flags = (uint8_t)(*flags | 2);
  int total = 0;
  for (int c = 0; c < MO_NCODES; c++)
    total += w[c];
  int setup = bf ? 2 : 3 + (int)(splitmix(&x) % 4);
  for (size_t k = 0; k < n; k++) {
    uint64_t v = splitmix(&x);
    memcpy(ops[k].b, &v, MO_OP_BYTES);
    int code;
    if ((int)k < setup) {
      code = k == 0 ? MO_ADD_BUDGET
             : bf   ? MO_ADD_DEVICES
                    : (int)(splitmix(&x) % 3); /* budget, class or devices */
      if (bf) /* capacities large enough to share */
        ops[k].b[1] = (uint8_t)(ops[k].b[1] | 4);
    } else {
      int pick = (int)(splitmix(&x) % (uint64_t)total);
      for (code = 0; pick >= w[code]; code++)
        pick -= w[code];
    }
    ops[k].b[0] = (uint8_t)code;
    /* Backfill programs name the budget, the devices or both. */
    static const uint8_t both[3] = {0x11, 0x22, 0x33};
    if (bf && (code == MO_TRY || code == MO_SUBMIT || code == MO_ACQUIRE_NOW))
      ops[k].b[2] = both[ops[k].b[2] % 3];
  }
}

/* Whether the program still fails the way `want` did (see cqt_prog_fails). */
static bool still_fails(uint8_t flags, const void *ops, size_t n, void *want) {
  mo_result res;
  return mo_run(flags, ops, n, NULL, &res) != 0 && mo_same_failure(&res, want);
}

size_t mo_shrink(uint8_t *flags, mo_op *ops, size_t n) {
  mo_result want;
  if (mo_run(*flags, ops, n, NULL, &want) == 0)
    return n;
  if (want.failed_at >= 0 && (size_t)want.failed_at < n)
    n = (size_t)want.failed_at + 1;
  static mo_op trial[MO_SHRINK_MAX];
  if (n > MO_SHRINK_MAX)
    return n;
  /* The pool options too: staged claims, backfill, the event hook. */
  return cqt_prog_shrink(flags, ops, n, sizeof(*ops), 7, trial, still_fails,
                         &want);
}
