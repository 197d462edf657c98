/*
 * The differential interpreter (see diff.h). Each operation is applied to
 * both pools with the same arguments; then the interpreter compares:
 * - the return codes, and for failures the messages (the fleet pool names
 *   a device pool "d2@h" where the in-process pool says "d2");
 * - the callbacks run during the operation, in order, with their statuses;
 * - per slot: idle, waiting or held, and what it holds of every resource,
 *   devices included;
 * - per resource: kind, capacity, in use, withheld, peak, waiting, grants,
 *   timeouts, cancellations, devices online; per device: used, whole,
 *   online, reserved, peak, grants; the pool's waiting and waited grants.
 * Waiting times are not compared: the in-process pool measures them on the
 * virtual clock, the fleet pool on the server's.
 */
#include "diff.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "cronoq/cronoq_fleet.h"
#include "support/prog.h"

int cq__fleet_dump(cq_pool *pool, cq_resource_stats *res, size_t res_cap,
                   size_t *n_res, cq_device_stats *devs, size_t dev_cap,
                   size_t *n_devs, cq_pool_stats *ps);
int cq__fleet_fsck(cq_pool *pool, char *problems, size_t len);

df_env df_server;
df_totals df_total;

#define RES_MAX 10
#define DEV_MAX 5
#define SLOT_MAX 12
#define ITEMS_MAX 6
#define OUT_MAX 64

const char *df_fail_name(int kind) {
  static const char *const names[DF_FAIL_NKINDS] = {
      "none", "setup",    "return code", "callbacks", "message",
      "slot", "resource", "device",      "pool",      "fsck"};
  return kind >= 0 && kind < DF_FAIL_NKINDS ? names[kind] : "unknown";
}

int df_same_failure(const df_result *a, const df_result *b) {
  if (a->kind != b->kind)
    return 0;
  if (a->kind != DF_FAIL_RC)
    return 1;
  return a->lib_rc == b->lib_rc && a->fleet_rc == b->fleet_rc &&
         a->call != NULL && b->call != NULL && strcmp(a->call, b->call) == 0;
}

struct meta {
  bool live;
  int kind; /* enum cq_resource_kind */
  bool lone;
  int64_t cap;
  int ndev;
  char name[16];
};

typedef struct side side;

typedef struct dslot {
  cq_grant grant;
  cq_req req;
  side *owner;
  int index;
  bool waiting; /* a callback is due */
} dslot;

struct out {
  int slot, status;
  char msg[160];
};

struct side {
  cq_pool *pool;
  bool fleet;
  dslot ls[SLOT_MAX];
  int nouts;
  struct out outs[OUT_MAX];
};

typedef struct item {
  int res;
  int mode; /* 0 units, 1 fraction, 2 whole, 3 class */
  int64_t amount;
} item;

typedef struct run {
  side s[2]; /* 0: in-process, 1: fleet */
  int64_t now;
  int nres;
  struct meta res[RES_MAX];
  FILE *trace;
  df_result *out;
  bool failed;
} run;

static int64_t run_clock(void *arg) { return ((run *)arg)->now; }

static bool fail(run *r, int kind, const char *fmt, ...) {
  if (r->failed)
    return false;
  r->failed = true;
  r->out->kind = kind;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->out->why, sizeof(r->out->why), fmt, ap);
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

/* The fleet pool's words without its host: "d2@h" is "d2". */
static void unhost(char *s) {
  for (char *at; (at = strstr(s, "@h")) != NULL;)
    memmove(at, at + 2, strlen(at + 2) + 1);
}

static void on_grant(cq_grant *g, int status) {
  dslot *ls = (dslot *)g->data;
  side *s = ls->owner;
  ls->waiting = false;
  if (s->nouts < OUT_MAX) {
    struct out *o = &s->outs[s->nouts++];
    o->slot = ls->index;
    o->status = status;
    snprintf(o->msg, sizeof(o->msg), "%s",
             status == CQ_ENEVER ? cq_grant_error(g) : "");
    unhost(o->msg);
  }
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

#define LIT(op) (((op)->b[0] & DF_LITERAL) != 0)

static const int64_t fractions[8] = {250, 500, 700, 1000, 100, 300, 600, 800};

static int pick_res(const run *r, uint8_t b) {
  if (r->nres == 0)
    return -1;
  int i = b % r->nres;
  return r->res[i].live ? i : -1;
}

/* The items op b2..b5 asks (see ops.c of the model test for the same
 * scheme): resource i when bits i % 8 and (i + 4) % 8 of b2 are both set
 * (literal: bit i), with amounts from b3..b5. */
static int choose_items(const run *r, const df_op *op, item *items) {
  int n = 0, k = 0;
  bool has_class = false;
  uint8_t sel = LIT(op) ? op->b[2]
                        : (uint8_t)(op->b[2] & (op->b[2] >> 4 | op->b[2] << 4));
  for (int i = 0; i < r->nres && n < ITEMS_MAX; i++) {
    const struct meta *m = &r->res[i];
    if (!m->live || !(sel & (1u << (i % 8))))
      continue;
    uint8_t lit = op->b[3 + k % 3];
    uint8_t amt = (uint8_t)(lit ^ (uint8_t)(i * 37));
    k++;
    item it = {i, 0, 0};
    if (m->kind == CQ_KIND_BUDGET) {
      int64_t cap = m->cap > 0 ? m->cap : 1;
      it.amount = (amt & 0x70) == 0 ? m->cap + 1 + amt % 2 : 1 + amt % cap;
      if (LIT(op))
        it.amount = lit > 0 ? lit : 1;
    } else if (m->kind == CQ_KIND_CLASS) {
      if (has_class)
        continue;
      has_class = true;
      it.mode = 3;
      it.amount = 1;
    } else if (LIT(op) ? (lit & 0x80) != 0 : (amt & 0x80) != 0) {
      it.mode = 2;
      it.amount = 1 + amt % (m->ndev >= 3 ? 3 : m->ndev > 0 ? m->ndev : 1);
      if (LIT(op))
        it.amount = (lit & 0x7f) > 0 ? lit & 0x7f : 1;
    } else {
      it.mode = 1;
      it.amount = fractions[amt % 8];
      if (LIT(op))
        it.amount = lit == 0 ? 1 : lit >= 100 ? 1000 : lit * 10;
    }
    items[n++] = it;
  }
  return n;
}

static int build_req(run *r, side *s, cq_req *req, const item *items, int n) {
  if (cq_req_init(req, s->pool) != 0)
    return -1;
  for (int i = 0; i < n; i++) {
    const char *name = r->res[items[i].res].name;
    int rc =
        items[i].mode == 0   ? cq_req_add(req, name, items[i].amount)
        : items[i].mode == 1 ? cq_req_add_fraction(req, name, items[i].amount)
        : items[i].mode == 2 ? cq_req_add_devices(req, name, items[i].amount)
                             : cq_req_set_class(req, name);
    if (rc != 0) {
      fail(r, DF_FAIL_SETUP, "%s: building a request on %s: %s: %s",
           s->fleet ? "fleet" : "in-process", name, cq_err_name(rc),
           cq_req_error(req));
      return rc;
    }
  }
  return 0;
}

static void trace_items(run *r, const item *items, int n) {
  tr(r, " {");
  for (int i = 0; i < n; i++) {
    const char *name = r->res[items[i].res].name;
    if (items[i].mode == 3)
      tr(r, " class=%s", name);
    else if (items[i].mode == 2)
      tr(r, " %s:%" PRId64 "dev", name, items[i].amount);
    else if (items[i].mode == 1)
      tr(r, " %s:%" PRId64 "m", name, items[i].amount);
    else
      tr(r, " %s:%" PRId64, name, items[i].amount);
  }
  tr(r, " }");
}

/* ------------------------------------------------------------------------ */
/* Comparison                                                                */
/* ------------------------------------------------------------------------ */

static void expect_rc(run *r, const char *what, int lrc, int frc) {
  tr(r, " -> %s", cq_err_name(lrc));
  if (lrc != frc &&
      fail(r, DF_FAIL_RC, "%s returned %s in-process, %s on the fleet", what,
           cq_err_name(lrc), cq_err_name(frc))) {
    r->out->call = what;
    r->out->lib_rc = lrc;
    r->out->fleet_rc = frc;
  }
}

/* The messages of a failed attempt on both sides. */
static void expect_msg(run *r, const char *what, const char *lib,
                       const char *fleet) {
  char a[200], b[200];
  snprintf(a, sizeof(a), "%s", lib);
  snprintf(b, sizeof(b), "%s", fleet);
  unhost(b);
  if (strcmp(a, b) != 0)
    fail(r, DF_FAIL_MESSAGE, "%s: in-process says \"%s\", the fleet \"%s\"",
         what, a, b);
}

static void compare_outs(run *r) {
  side *l = &r->s[0], *f = &r->s[1];
  bool same = l->nouts == f->nouts;
  for (int i = 0; same && i < l->nouts; i++)
    same = l->outs[i].slot == f->outs[i].slot &&
           l->outs[i].status == f->outs[i].status;
  if (!same) {
    char a[256] = "", b[256] = "";
    for (int i = 0; i < l->nouts; i++)
      snprintf(a + strlen(a), sizeof(a) - strlen(a), " s%d:%s", l->outs[i].slot,
               cq_err_name(l->outs[i].status));
    for (int i = 0; i < f->nouts; i++)
      snprintf(b + strlen(b), sizeof(b) - strlen(b), " s%d:%s", f->outs[i].slot,
               cq_err_name(f->outs[i].status));
    fail(r, DF_FAIL_CALLBACKS, "callbacks differ: in-process [%s ] fleet [%s ]",
         a, b);
    return;
  }
  for (int i = 0; i < l->nouts; i++)
    if (strcmp(l->outs[i].msg, f->outs[i].msg) != 0)
      fail(r, DF_FAIL_MESSAGE, "s%d's failure: in-process \"%s\", fleet \"%s\"",
           l->outs[i].slot, l->outs[i].msg, f->outs[i].msg);
}

static uint32_t devices_of(cq_grant *g, const char *name) {
  uint32_t idx[DEV_MAX + 1];
  size_t n = cq_grant_devices(g, name, idx, DEV_MAX + 1);
  uint32_t mask = 0;
  for (size_t i = 0; i < n && i <= DEV_MAX; i++)
    mask |= 1u << idx[i];
  return mask;
}

static int slot_state(dslot *ls) {
  return cq_grant_is_held(&ls->grant) ? 2 : ls->waiting ? 1 : 0;
}

/* Every resource, and every device after its pool, of one side. */
struct snap {
  size_t nres, ndev;
  cq_resource_stats res[RES_MAX];
  cq_device_stats dev[RES_MAX * DEV_MAX];
  cq_pool_stats pool;
};

static int take_snap(run *r, side *s, struct snap *out) {
  memset(out, 0, sizeof(*out));
  if (s->fleet)
    return cq__fleet_dump(s->pool, out->res, RES_MAX, &out->nres, out->dev,
                          RES_MAX * DEV_MAX, &out->ndev, &out->pool);
  int rc = cq_pool_stats_get(s->pool, &out->pool);
  if (rc != 0)
    return rc;
  if ((rc = cq_pool_snapshot(s->pool, out->res, RES_MAX, &out->nres)) != 0)
    return rc;
  for (size_t i = 0; i < out->nres; i++)
    for (uint32_t d = 0;
         out->res[i].kind == CQ_KIND_DEVICES && d < out->res[i].devices; d++)
      if ((rc = cq_device_stats_get(s->pool, out->res[i].name, d,
                                    &out->dev[out->ndev++])) != 0)
        return rc;
  (void)r;
  return 0;
}

static void compare(run *r) {
  compare_outs(r);
  side *l = &r->s[0], *f = &r->s[1];
  for (int s = 0; s < SLOT_MAX; s++) {
    int ls = slot_state(&l->ls[s]), fs = slot_state(&f->ls[s]);
    static const char *const st[] = {"idle", "waiting", "held"};
    if (ls != fs) {
      fail(r, DF_FAIL_SLOT, "s%d is %s in-process, %s on the fleet", s, st[ls],
           st[fs]);
      return;
    }
    for (int i = 0; i < r->nres; i++) {
      if (!r->res[i].live)
        continue;
      const char *name = r->res[i].name;
      int64_t a = cq_grant_held(&l->ls[s].grant, name);
      int64_t b = cq_grant_held(&f->ls[s].grant, name);
      if (a != b)
        fail(r, DF_FAIL_SLOT,
             "s%d holds %" PRId64 " of %s in-process, %" PRId64 " on the fleet",
             s, a, name, b);
      if (r->res[i].kind == CQ_KIND_DEVICES &&
          devices_of(&l->ls[s].grant, name) !=
              devices_of(&f->ls[s].grant, name))
        fail(r, DF_FAIL_SLOT,
             "s%d holds devices %#x of %s in-process, %#x on "
             "the fleet",
             s, devices_of(&l->ls[s].grant, name), name,
             devices_of(&f->ls[s].grant, name));
    }
  }
  static struct snap a, b;
  int rc = take_snap(r, l, &a);
  if (rc == 0)
    rc = take_snap(r, f, &b);
  if (rc != 0) {
    fail(r, DF_FAIL_SETUP, "snapshot: %s: %s", cq_err_name(rc),
         cq_fleet_error());
    return;
  }
  if (a.nres != b.nres || a.ndev != b.ndev) {
    fail(r, DF_FAIL_RESOURCE,
         "%zu resources and %zu devices in-process, %zu "
         "and %zu on the fleet",
         a.nres, a.ndev, b.nres, b.ndev);
    return;
  }
  for (size_t i = 0; i < a.nres; i++) {
    cq_resource_stats *x = &a.res[i], *y = &b.res[i];
    unhost(y->name);
    if (strcmp(x->name, y->name) != 0 || x->kind != y->kind ||
        x->flags != y->flags || x->capacity != y->capacity ||
        x->in_use != y->in_use || x->withheld != y->withheld ||
        x->peak != y->peak || x->waiting != y->waiting ||
        x->grants != y->grants || x->timeouts != y->timeouts ||
        x->cancellations != y->cancellations ||
        x->wait.count != y->wait.count || x->devices != y->devices ||
        x->online != y->online)
      fail(r, DF_FAIL_RESOURCE,
           "%s: in-process cap %" PRId64 " use %" PRId64 " withheld %" PRId64
           " peak %" PRId64 " waiting %" PRIu64 " grants %" PRIu64
           " timeouts %" PRIu64 " cancels %" PRIu64 " waits %" PRIu64
           "; fleet (%s) %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
           " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
           x->name, x->capacity, x->in_use, x->withheld, x->peak, x->waiting,
           x->grants, x->timeouts, x->cancellations, x->wait.count, y->name,
           y->capacity, y->in_use, y->withheld, y->peak, y->waiting, y->grants,
           y->timeouts, y->cancellations, y->wait.count);
  }
  for (size_t i = 0; i < a.ndev; i++) {
    cq_device_stats *x = &a.dev[i], *y = &b.dev[i];
    if (strcmp(x->id, y->id) != 0 || x->index != y->index ||
        x->online != y->online || x->whole != y->whole ||
        x->reserved != y->reserved || x->used_milli != y->used_milli ||
        x->peak_milli != y->peak_milli || x->grants != y->grants)
      fail(r, DF_FAIL_DEVICE,
           "device %zu (%s): in-process online %d whole %d reserved %d used "
           "%" PRId64 " peak %" PRId64 " grants %" PRIu64 "; fleet %d %d %d "
           "%" PRId64 " %" PRId64 " %" PRIu64,
           i, x->id, x->online, x->whole, x->reserved, x->used_milli,
           x->peak_milli, x->grants, y->online, y->whole, y->reserved,
           y->used_milli, y->peak_milli, y->grants);
  }
  if (a.pool.waiting != b.pool.waiting ||
      a.pool.waited_grants != b.pool.waited_grants)
    fail(r, DF_FAIL_POOL,
         "pool: in-process waiting %" PRIu64 " waited grants %" PRIu64
         ", fleet %" PRIu64 " %" PRIu64,
         a.pool.waiting, a.pool.waited_grants, b.pool.waiting,
         b.pool.waited_grants);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

/* Whether a request already waits naming one of the device pools of
 * `items`: a second claimant there reserves behind the first. */
static bool device_waited_on(run *r, const item *items, int n) {
  for (int i = 0; i < n; i++) {
    cq_resource_stats st;
    if (r->res[items[i].res].kind == CQ_KIND_DEVICES &&
        cq_resource_stats_get(r->s[0].pool, r->res[items[i].res].name, &st) ==
            0 &&
        st.waiting > 0)
      return true;
  }
  return false;
}

static void count_grant(run *r, const item *items, int n) {
  df_total.granted_at_once++;
  for (int i = 0; i < n; i++) {
    const struct meta *m = &r->res[items[i].res];
    df_total.device_items += m->kind == CQ_KIND_DEVICES;
    df_total.whole_items += items[i].mode == 2;
    df_total.class_items += m->kind == CQ_KIND_CLASS;
    df_total.lone_grants += m->lone && items[i].amount > m->cap;
  }
}

static void op_acquire(run *r, const df_op *op, int code) {
  int s = op->b[1] % SLOT_MAX;
  item items[ITEMS_MAX];
  int n = choose_items(r, op, items);
  static const char *const what[] = {"try", "submit", "acquire"};
  int w = code == DF_TRY ? 0 : code == DF_SUBMIT ? 1 : 2;
  tr(r, "%s s%d", what[w], s);
  trace_items(r, items, n);
  int64_t deadline = CQ_NEVER;
  if (code == DF_SUBMIT) {
    unsigned v = op->b[7] % 8;
    deadline = v == 0 ? r->now : v < 6 ? r->now + 7 * (int64_t)v : CQ_NEVER;
    if (LIT(op))
      deadline = op->b[7] == 255 ? CQ_NEVER : r->now + op->b[7];
    if (deadline == CQ_NEVER)
      tr(r, " deadline=never");
    else
      tr(r, " deadline=+%" PRId64, deadline - r->now);
  }
  bool behind = code == DF_SUBMIT && device_waited_on(r, items, n);
  int rc[2];
  for (int k = 0; k < 2 && !r->failed; k++) {
    side *sd = &r->s[k];
    dslot *ls = &sd->ls[s];
    cq_req scratch;
    bool idle = slot_state(ls) == 0;
    cq_req *req = idle ? &ls->req : &scratch;
    if (build_req(r, sd, req, items, n) != 0)
      return;
    if (code == DF_TRY) {
      rc[k] = cq_grant_try(sd->pool, &ls->grant, req);
    } else if (code == DF_SUBMIT) {
      bool was = ls->waiting;
      ls->waiting = true;
      rc[k] = cq_grant_submit(sd->pool, &ls->grant, req, deadline, on_grant);
      if (rc[k] != 0)
        ls->waiting = was;
    } else {
      rc[k] = cq_grant_acquire(sd->pool, &ls->grant, req, r->now);
    }
  }
  if (r->failed)
    return;
  expect_rc(r, what[w], rc[0], rc[1]);
  if (rc[0] == CQ_ENEVER || rc[0] == CQ_ENOENT)
    expect_msg(r, what[w], cq_grant_error(&r->s[0].ls[s].grant),
               cq_grant_error(&r->s[1].ls[s].grant));
  df_total.busy += rc[0] == CQ_EBUSY || rc[0] == CQ_ETIMEDOUT;
  df_total.never += rc[0] == CQ_ENEVER;
  if (rc[0] == 0 && cq_grant_is_held(&r->s[0].ls[s].grant) &&
      (code != DF_SUBMIT || r->s[0].nouts > 0))
    count_grant(r, items, n);
  else if (rc[0] == 0 && r->s[0].ls[s].waiting) {
    df_total.parked++;
    df_total.device_queued += behind;
  }
}

/* A slot's k-th item that is a budget, for a partial release: its name,
 * or NULL. */
static const char *part_target(run *r, int s, uint8_t k) {
  int seen = 0, pick = -1;
  for (int i = 0; i < r->nres; i++)
    if (r->res[i].live && r->res[i].kind == CQ_KIND_BUDGET &&
        cq_grant_held(&r->s[0].ls[s].grant, r->res[i].name) > 0)
      seen++;
  if (seen == 0)
    return NULL;
  int want = k % seen;
  for (int i = 0; i < r->nres && pick < 0; i++)
    if (r->res[i].live && r->res[i].kind == CQ_KIND_BUDGET &&
        cq_grant_held(&r->s[0].ls[s].grant, r->res[i].name) > 0 && want-- == 0)
      pick = i;
  return r->res[pick].name;
}

/* Give back part of what a slot holds: units of a budget, or of a device
 * pool part of a fraction or one whole device. */
static void op_part(run *r, const df_op *op) {
  int s = op->b[1] % SLOT_MAX;
  cq_grant *lg = &r->s[0].ls[s].grant;
  const char *name = part_target(r, s, op->b[2]);
  int dev_pool = -1;
  if (name == NULL || (op->b[4] & 1)) {
    for (int i = 0; i < r->nres; i++)
      if (r->res[i].live && r->res[i].kind == CQ_KIND_DEVICES &&
          cq_grant_held(lg, r->res[i].name) > 0)
        dev_pool = i;
  }
  int rc[2];
  if (dev_pool >= 0) {
    const char *dn = r->res[dev_pool].name;
    uint32_t idx[DEV_MAX];
    size_t nd = cq_grant_devices(lg, dn, idx, DEV_MAX);
    uint32_t d = idx[op->b[3] % (nd > 0 ? nd : 1)];
    int64_t held = cq_grant_held(lg, dn);
    int64_t milli = held % 1000 != 0 ? 1 + op->b[3] % held : 1000;
    if (op->b[5] % 8 == 0)
      milli = held + 1; /* out of range, on both sides */
    tr(r, "release part s%d %s/%u %" PRId64 "m", s, dn, d, milli);
    for (int k = 0; k < 2; k++)
      rc[k] = cq_grant_release_device(r->s[k].pool, &r->s[k].ls[s].grant, dn, d,
                                      milli);
  } else {
    if (name == NULL)
      name = r->nres > 0 ? r->res[op->b[2] % r->nres].name : "none";
    int64_t held = cq_grant_held(lg, name);
    int64_t amount = held > 0 ? 1 + op->b[3] % held : 1;
    tr(r, "release part s%d %s:%" PRId64, s, name, amount);
    for (int k = 0; k < 2; k++)
      rc[k] = cq_grant_release_part(r->s[k].pool, &r->s[k].ls[s].grant, name,
                                    amount);
  }
  expect_rc(r, "release part", rc[0], rc[1]);
  df_total.parts += rc[0] == 0;
}

static void do_expire(run *r, int64_t t) {
  r->now = t;
  int rc[2];
  for (int k = 0; k < 2; k++)
    rc[k] = cq_pool_expire(r->s[k].pool, NULL);
  expect_rc(r, "expire", rc[0], rc[1]);
}

static void add_res(run *r, int kind, int64_t cap, bool lone, int ndev) {
  if (r->nres >= RES_MAX)
    return;
  struct meta *m = &r->res[r->nres];
  memset(m, 0, sizeof(*m));
  m->live = true;
  m->kind = kind;
  m->cap = cap;
  m->lone = lone;
  m->ndev = ndev;
  snprintf(m->name, sizeof(m->name), "%c%d",
           kind == CQ_KIND_BUDGET  ? 'b'
           : kind == CQ_KIND_CLASS ? 'c'
                                   : 'd',
           r->nres);
  int rc[2];
  for (int k = 0; k < 2; k++) {
    cq_pool *p = r->s[k].pool;
    rc[k] = kind == CQ_KIND_BUDGET
                ? cq_budget_add_ex(p, m->name, cap, lone ? CQ_BUDGET_LONE : 0u)
            : kind == CQ_KIND_CLASS
                ? cq_class_add(p, m->name, cap)
                : cq_devices_add(p, m->name, (size_t)ndev, NULL);
  }
  tr(r, "add %s %s cap=%" PRId64 "%s",
     kind == CQ_KIND_DEVICES ? "devices"
     : kind == CQ_KIND_CLASS ? "class"
                             : "budget",
     m->name, kind == CQ_KIND_DEVICES ? (int64_t)ndev : cap,
     lone ? " lone" : "");
  r->nres++;
  expect_rc(r, "add", rc[0], rc[1]);
}

static void step(run *r, const df_op *op) {
  int code = (op->b[0] & 0x7f) % DF_NCODES;
  int rc[2];
  switch (code) {
  case DF_ADD_BUDGET:
    add_res(r, CQ_KIND_BUDGET, LIT(op) ? op->b[1] : op->b[1] % 10, op->b[2] & 1,
            0);
    return;
  case DF_ADD_CLASS:
    add_res(r, CQ_KIND_CLASS,
            LIT(op)             ? op->b[1]
            : op->b[1] % 8 == 0 ? 0
                                : 1 + op->b[1] % 3,
            false, 0);
    return;
  case DF_ADD_DEVICES: {
    int n = op->b[1] % 16 == 0 ? 0 : 1 + op->b[1] % DEV_MAX;
    if (LIT(op))
      n = op->b[1] < DEV_MAX ? op->b[1] : DEV_MAX;
    add_res(r, CQ_KIND_DEVICES, 0, false, n);
    return;
  }
  case DF_REMOVE: {
    int i = pick_res(r, op->b[1]);
    if (i < 0)
      return;
    tr(r, "remove %s", r->res[i].name);
    for (int k = 0; k < 2; k++)
      rc[k] = cq_resource_remove(r->s[k].pool, r->res[i].name);
    expect_rc(r, "remove", rc[0], rc[1]);
    if (rc[0] == 0)
      r->res[i].live = false;
    return;
  }
  case DF_TRY:
  case DF_SUBMIT:
  case DF_ACQUIRE_NOW:
    op_acquire(r, op, code);
    return;
  case DF_CANCEL:
  case DF_TIMEOUT: {
    int s = op->b[1] % SLOT_MAX;
    int status = code == DF_CANCEL ? CQ_ECANCELED : CQ_ETIMEDOUT;
    tr(r, "%s s%d", code == DF_CANCEL ? "cancel" : "time out", s);
    for (int k = 0; k < 2; k++)
      rc[k] = cq_grant_abort(r->s[k].pool, &r->s[k].ls[s].grant, status);
    expect_rc(r, code == DF_CANCEL ? "cancel" : "time out", rc[0], rc[1]);
    return;
  }
  case DF_RELEASE: {
    int s = op->b[1] % SLOT_MAX;
    tr(r, "release s%d", s);
    for (int k = 0; k < 2; k++)
      rc[k] = cq_grant_release(r->s[k].pool, &r->s[k].ls[s].grant);
    expect_rc(r, "release", rc[0], rc[1]);
    return;
  }
  case DF_ADVANCE: {
    int64_t dt = LIT(op) ? op->b[1] : 1 + op->b[1] % 24;
    tr(r, "advance +%" PRId64, dt);
    do_expire(r, r->now + dt);
    return;
  }
  case DF_SET_CAP: {
    int i = pick_res(r, op->b[1]);
    if (i < 0 || r->res[i].kind == CQ_KIND_DEVICES)
      return;
    int64_t cap = LIT(op) ? op->b[2] : op->b[2] % 10;
    tr(r, "set %s to %" PRId64, r->res[i].name, cap);
    for (int k = 0; k < 2; k++)
      rc[k] = r->res[i].kind == CQ_KIND_CLASS
                  ? cq_class_set_max(r->s[k].pool, r->res[i].name, cap)
                  : cq_budget_set_capacity(r->s[k].pool, r->res[i].name, cap);
    expect_rc(r, "set capacity", rc[0], rc[1]);
    if (rc[0] == 0)
      r->res[i].cap = cap;
    return;
  }
  case DF_ONLINE: {
    int i = pick_res(r, op->b[1]);
    if (i < 0 || r->res[i].kind != CQ_KIND_DEVICES || r->res[i].ndev == 0)
      return;
    int d = op->b[2] % r->res[i].ndev;
    bool on = op->b[3] & 1;
    tr(r, "device %s/%d %s", r->res[i].name, d, on ? "online" : "offline");
    for (int k = 0; k < 2; k++)
      rc[k] =
          cq_device_set_online(r->s[k].pool, r->res[i].name, (uint32_t)d, on);
    expect_rc(r, "online", rc[0], rc[1]);
    return;
  }
  case DF_PART:
    op_part(r, op);
    return;
  default:
    return;
  }
}

static void drain(run *r) {
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < 2; k++)
      for (int s = 0; s < SLOT_MAX; s++) {
        dslot *ls = &r->s[k].ls[s];
        if (ls->waiting)
          cq_grant_cancel(r->s[k].pool, &ls->grant);
        if (cq_grant_is_held(&ls->grant))
          cq_grant_release(r->s[k].pool, &ls->grant);
      }
}

/* The in-process pool's hook: it only turns the lock-free paths off. Those
 * raise a budget's peak for a moment when an attempt takes units and then
 * finds a later budget full; the peak then counts units no grant held,
 * which no server-side decision reproduces. */
static void no_events(const cq_event *ev, void *arg) {
  (void)ev;
  (void)arg;
}

static int open_sides(run *r, uint8_t flags) {
  unsigned pf = (flags & 1) ? CQ_POOL_STAGED_CLAIMS : 0;
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = pf | CQ_POOL_MANUAL_TIMERS;
  cfg.clock = run_clock;
  cfg.clock_arg = r;
  cfg.on_event = no_events;
  if (cq_pool_create(&r->s[0].pool, &cfg) != 0)
    return -1;
  static unsigned ns_counter;
  char ns[32];
  snprintf(ns, sizeof(ns), "diff%u", ++ns_counter);
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.flags = pf | CQ_POOL_MANUAL_TIMERS;
  o.clock = run_clock;
  o.clock_arg = r;
  o.host = "h";
  o.ttl_ms = 120000;
  o.max_ttl_ms = 120000;
  o.heartbeat_ms = 10000;
  o.timeout_ms = 30000;
  static const uint32_t steps[4] = {0, 16, 3, 0};
  o.script_steps = steps[(flags >> 1) & 3];
  if (cq_fleet_open(&r->s[1].pool, df_server.url, ns, &o) != 0) {
    cq_pool_destroy(r->s[0].pool);
    return -1;
  }
  r->s[1].fleet = true;
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < SLOT_MAX; s++) {
      dslot *ls = &r->s[k].ls[s];
      cq_grant_init(&ls->grant);
      ls->grant.data = ls;
      ls->owner = &r->s[k];
      ls->index = s;
    }
  return 0;
}

int df_run(uint8_t flags, const df_op *ops, size_t n, FILE *trace,
           df_result *res) {
  static run r;
  memset(&r, 0, sizeof(r));
  memset(res, 0, sizeof(*res));
  res->failed_at = -1;
  r.out = res;
  r.trace = trace;
  r.now = 1000;
  if (df_server.flush != NULL)
    df_server.flush(df_server.flush_arg);
  if (open_sides(&r, flags) != 0) {
    res->kind = DF_FAIL_SETUP;
    res->failed_at = 0;
    snprintf(res->why, sizeof(res->why), "cannot open the pools: %s",
             cq_fleet_error());
    return 1;
  }
  tr(&r, "pools%s, script share %u\n", (flags & 1) ? " staged" : "",
     (flags >> 1) & 3);
  for (size_t k = 0; k < n && !r.failed; k++) {
    r.s[0].nouts = r.s[1].nouts = 0;
    tr(&r, "%3zu: t=%" PRId64 " ", k, r.now);
    step(&r, &ops[k]);
    if (!r.failed)
      compare(&r);
    for (int i = 0; i < r.s[0].nouts; i++) {
      tr(&r, "; cb s%d %s", r.s[0].outs[i].slot,
         cq_err_name(r.s[0].outs[i].status));
      int st = r.s[0].outs[i].status;
      bool own = (ops[k].b[0] & 0x7f) % DF_NCODES == DF_SUBMIT &&
                 r.s[0].outs[i].slot == ops[k].b[1] % SLOT_MAX;
      df_total.granted_after_wait += st == 0 && !own;
      df_total.timed_out += st == CQ_ETIMEDOUT;
      df_total.cancelled += st == CQ_ECANCELED;
      df_total.failed_never += st == CQ_ENEVER;
    }
    tr(&r, "\n");
    res->ops_run = k + 1;
    df_total.ops++;
    if (r.failed)
      res->failed_at = (long)k;
  }
  if (!r.failed) {
    char problems[400];
    if (cq__fleet_fsck(r.s[1].pool, problems, sizeof(problems)) != 0 ||
        problems[0] != '\0') {
      r.failed = true;
      res->kind = DF_FAIL_FSCK;
      res->failed_at = (long)n - 1;
      snprintf(res->why, sizeof(res->why), "fleet fsck: %s", problems);
    }
  }
  drain(&r);
  for (int k = 0; k < 2; k++)
    if (cq_pool_destroy(r.s[k].pool) != 0 && !r.failed) {
      r.failed = true;
      res->kind = DF_FAIL_SETUP;
      res->failed_at = (long)n;
      snprintf(res->why, sizeof(res->why),
               "%s pool not destroyed after "
               "draining",
               k ? "fleet" : "in-process");
    }
  return r.failed ? 1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Generation and shrinking                                                  */
/* ------------------------------------------------------------------------ */

#define splitmix cqt_splitmix

void df_generate(uint64_t seed, uint8_t *flags, df_op *ops, size_t n) {
  uint64_t x = seed * 0x2545f4914f6cdd1dull + 7;
  /* Staged claims one program in four; the fleet's script share: all of
   * the work in half the programs, 16 or 3 calls in the rest. */
  uint64_t f = splitmix(&x);
  *flags = (uint8_t)(((f & 3) == 0 ? 1 : 0) | (((f >> 2) % 4) << 1));
  static const int weight[DF_NCODES] = {2,  1, 2, 1, 10, 30, 5,
                                        10, 8, 4, 4, 2,  3,  2};
  int total = 0;
  for (int c = 0; c < DF_NCODES; c++)
    total += weight[c];
  int setup = 3 + (int)(splitmix(&x) % 4);
  for (size_t k = 0; k < n; k++) {
    uint64_t v = splitmix(&x);
    memcpy(ops[k].b, &v, DF_OP_BYTES);
    int code;
    if ((int)k < setup) {
      code = k == 0 ? DF_ADD_BUDGET : (int)(splitmix(&x) % 3);
    } else {
      int pick = (int)(splitmix(&x) % (uint64_t)total);
      for (code = 0; pick >= weight[code]; code++)
        pick -= weight[code];
    }
    ops[k].b[0] = (uint8_t)code;
  }
}

/* Whether the program still fails the way `want` did (see cqt_prog_fails). */
static bool still_fails(uint8_t flags, const void *ops, size_t n, void *want) {
  df_result res;
  return df_run(flags, ops, n, NULL, &res) != 0 && df_same_failure(&res, want);
}

size_t df_shrink(uint8_t *flags, df_op *ops, size_t n) {
  df_result want;
  if (df_run(*flags, ops, n, NULL, &want) == 0)
    return n;
  if (want.failed_at >= 0 && (size_t)want.failed_at < n)
    n = (size_t)want.failed_at + 1;
  if (n > DF_SHRINK_MAX)
    return n;
  static df_op trial[DF_SHRINK_MAX];
  /* The pool options too: staged claims, the fleet's script share. */
  return cqt_prog_shrink(flags, ops, n, sizeof(*ops), 7, trial, still_fails,
                         &want);
}
