/*
 * The bad-input catalogue of the reliability suite.
 *
 * A table of misuses. Each entry names a category and the misuse, the error
 * the header promises for it, and optionally a step that brings the
 * fixture into the state the misuse needs (a closed pool, a released
 * grant). Every entry runs on a fresh fixture:
 *
 *   pool P (manual timers): device pool gpu (4 devices), budgets db = 10,
 *   mem = 100, tmp = 5, b0..b16 = 1, class jobs = 2;
 *   holders: g_db {db:3}, g_frac {gpu:0.5}, g_whole {gpu: 2 whole},
 *   g_mem {mem:1} (granted without the lock); a waiter g_wait {db:8}
 *   (callback, no deadline) that claims db; an idle grant g_idle; requests
 *   r_v {mem:1, class jobs} and r_tmp {tmp:1} for misuses to work on;
 *   pool Q: budget db = 10, held by g_q {db:1}.
 *
 * Around the misuse the whole fixture is snapshotted (both pools' stats,
 * every resource's and device's figures, every request's items, every
 * busy grant's internal state and what every grant holds, the callback
 * count), and the two snapshots must be equal: a refused call changes
 * nothing. Where the header promises an explanation (cq_req_error(),
 * cq_grant_error(), a spec's err buffer, a GPU list's error) it must not be
 * empty. Finally the fixture is taken down: waiters cancelled, holders
 * released, and both pools must then be destroyed without CQ_EINUSE.
 *
 * The last entries are the misuses this catalogue found handled wrongly
 * when it was written; each is described where it is listed.
 */
#include "support/cqt.h"

#include "cq_internal.h"

#ifdef CQT_WITH_UV
#include "cronoq/cronoq_uv.h"
#endif

/* ------------------------------------------------------------------------ */
/* The fixture                                                               */
/* ------------------------------------------------------------------------ */

enum { R_DB, R_FRAC, R_WHOLE, R_BIG, R_MEM, R_Q, R_V, R_TMP, N_REQS };
enum { G_DB, G_FRAC, G_WHOLE, G_WAIT, G_MEM, G_Q, G_IDLE, N_GRANTS };

struct mfx {
  cq_pool *p, *q;
  cq_req req[N_REQS];
  cq_grant g[N_GRANTS];
  int cb_calls;
  /* Scratch for the misuses: not part of the snapshot. */
  cq_req scratch;
  cq_grant gscratch;
  char err[160];
  cq_gpu_list list;
  cq_pool_stats pst;
  cq_resource_stats rst[4];
  cq_device_stats dst;
  cq_room room;
  size_t n;
  int64_t v;
  char buf[64];
};

static struct mfx F;

static void count_cb(cq_grant *g, int status) {
  (void)g;
  (void)status;
  F.cb_calls++;
}

static void build(cq_req *r, cq_pool *p, const char *spec) {
  assert_cq_ok(cq_req_init(r, p));
  int rc = cq_req_parse(r, spec);
  if (rc != 0)
    fail_msg("fixture request %s: %s", spec, cq_req_error(r));
}

static void fx_open(void) {
  memset(&F, 0, sizeof(F));
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_MANUAL_TIMERS;
  assert_cq_ok(cq_pool_create(&F.p, &cfg));
  assert_cq_ok(cq_pool_add_spec(
      F.p, "gpu=4, db=10, mem=100, tmp=5, jobs:class=2", NULL, NULL, 0));
  for (int i = 0; i <= 16; i++) {
    char name[8];
    snprintf(name, sizeof(name), "b%d", i);
    assert_cq_ok(cq_budget_add(F.p, name, 1));
  }
  assert_cq_ok(cq_pool_create(&F.q, NULL));
  assert_cq_ok(cq_budget_add(F.q, "db", 10));

  build(&F.req[R_DB], F.p, "db=3");
  build(&F.req[R_FRAC], F.p, "gpu=0.5");
  build(&F.req[R_WHOLE], F.p, "gpu=2");
  build(&F.req[R_BIG], F.p, "db=8");
  build(&F.req[R_MEM], F.p, "mem=1");
  build(&F.req[R_Q], F.q, "db=1");
  build(&F.req[R_V], F.p, "mem=1, class=jobs");
  build(&F.req[R_TMP], F.p, "tmp=1");
  for (int i = 0; i < N_GRANTS; i++)
    cq_grant_init(&F.g[i]);
  cq_grant_init(&F.gscratch);

  assert_cq_ok(cq_grant_try(F.p, &F.g[G_DB], &F.req[R_DB]));
  assert_cq_ok(cq_grant_try(F.p, &F.g[G_FRAC], &F.req[R_FRAC]));
  assert_cq_ok(cq_grant_try(F.p, &F.g[G_WHOLE], &F.req[R_WHOLE]));
  assert_cq_ok(cq_grant_try(F.p, &F.g[G_MEM], &F.req[R_MEM]));
  assert_cq_ok(
      cq_grant_submit(F.p, &F.g[G_WAIT], &F.req[R_BIG], CQ_NEVER, count_cb));
  assert_cq_ok(cq_grant_try(F.q, &F.g[G_Q], &F.req[R_Q]));
  assert_int_equal(cqt_waiting(F.p), 1);
  assert_int_equal(F.cb_calls, 0);
}

/* Everything back, then both pools must go. */
static void fx_close(void) {
  cq_grant *all[N_GRANTS + 1];
  for (int i = 0; i < N_GRANTS; i++)
    all[i] = &F.g[i];
  all[N_GRANTS] = &F.gscratch;
  for (int i = 0; i <= N_GRANTS; i++) {
    cq_pool *home = cq__grant_of(all[i])->pool;
    if (home != NULL && cq__gstate(cq__grant_of(all[i])) == CQ__G_WAITING)
      assert_cq_ok(cq_grant_cancel(home, all[i]));
  }
  for (int i = 0; i <= N_GRANTS; i++) {
    cq_pool *home = cq__grant_of(all[i])->pool;
    if (home != NULL && cq_grant_is_held(all[i]))
      assert_cq_ok(cq_grant_release(home, all[i]));
  }
  cq_gpu_list_free(&F.list);
  assert_cq_ok(cq_pool_destroy(F.p));
  assert_cq_ok(cq_pool_destroy(F.q));
}

/* A busy grant's internal state, field by field (the storage has padding
 * that the library never writes). */
struct grant_view {
  unsigned state, style, lockfree, n_items, blocker, limited, overdue;
  uint64_t seq, gseq;
  const void *req, *pool, *park;
  cq_grant_cb cb;
  int status;
  int64_t deadline_ms, t_enqueue, limit_ms, limit_end;
  struct {
    const struct cq__res *res;
    unsigned flags, index, mode;
    int64_t held; /* holding only */
    int32_t dev;
  } it[CQ_REQ_MAX_ITEMS];
};

static void grant_view(const struct cq__grant *g, struct grant_view *v) {
  memset(v, 0, sizeof(*v));
  v->state = cq__gstate(g);
  v->style = g->style;
  v->lockfree = g->lockfree;
  v->n_items = g->n_items;
  v->blocker = g->blocker;
  v->limited = g->limited;
  v->overdue = g->overdue;
  v->seq = g->seq;
  v->gseq = g->gseq;
  v->req = g->req;
  v->pool = g->pool;
  v->cb = g->cb;
  v->park = g->park;
  v->status = g->status;
  v->deadline_ms = g->deadline_ms;
  v->t_enqueue = g->t_enqueue;
  v->limit_ms = g->limit_ms;
  v->limit_end = g->limit_end;
  for (unsigned i = 0; i < g->n_items && i < CQ_REQ_MAX_ITEMS; i++) {
    v->it[i].res = g->it[i].res;
    v->it[i].flags = g->it[i].flags;
    v->it[i].index = g->it[i].index;
    v->it[i].mode = g->it[i].mode;
    if (v->state == CQ__G_HELD) {
      v->it[i].held = g->it[i].u.hold.held;
      v->it[i].dev = g->it[i].u.hold.dev;
    }
  }
}

/* What a refused call must not change. */
#define SNAP_RES 32

struct snap {
  cq_pool_stats ps, qs;
  size_t np, nq;
  cq_resource_stats pr[SNAP_RES], qr[2];
  cq_device_stats dev[4];
  struct req_view {
    uint32_t magic, n_items, flags;
    const cq_pool *pool;
    int64_t limit_ms;
    struct {
      const struct cq__res *res;
      int64_t amount;
      unsigned mode;
    } items[CQ_REQ_MAX_ITEMS];
  } req[N_REQS];
  struct {
    int held;
    int64_t db, gpu, mem;
    size_t n_devs;
    uint32_t devs[4];
    struct grant_view raw; /* while waiting or held */
  } g[N_GRANTS];
  int cb_calls;
};

static void snap_take(struct snap *s) {
  memset(s, 0, sizeof(*s));
  assert_cq_ok(cq_pool_stats_get(F.p, &s->ps));
  assert_cq_ok(cq_pool_stats_get(F.q, &s->qs));
  assert_cq_ok(cq_pool_snapshot(F.p, s->pr, SNAP_RES, &s->np));
  assert_cq_ok(cq_pool_snapshot(F.q, s->qr, 2, &s->nq));
  assert_true(s->np <= SNAP_RES && s->nq <= 2);
  for (uint32_t d = 0; d < 4; d++)
    assert_cq_ok(cq_device_stats_get(F.p, "gpu", d, &s->dev[d]));
  for (int i = 0; i < N_REQS; i++) {
    const struct cq__req *r = cq__req_ofc(&F.req[i]);
    s->req[i].magic = r->magic;
    s->req[i].n_items = r->n_items;
    s->req[i].flags = r->flags;
    s->req[i].pool = r->pool;
    s->req[i].limit_ms = r->limit_ms;
    for (unsigned k = 0; k < r->n_items && k < CQ_REQ_MAX_ITEMS; k++) {
      s->req[i].items[k].res = r->items[k].res;
      s->req[i].items[k].amount = r->items[k].amount;
      s->req[i].items[k].mode = r->items[k].mode;
    }
  }
  for (int i = 0; i < N_GRANTS; i++) {
    const cq_grant *g = &F.g[i];
    s->g[i].held = cq_grant_is_held(g);
    s->g[i].db = cq_grant_held(g, "db");
    s->g[i].gpu = cq_grant_held(g, "gpu");
    s->g[i].mem = cq_grant_held(g, "mem");
    s->g[i].n_devs = cq_grant_devices(g, "gpu", s->g[i].devs, 4);
    /* An idle grant's storage is scratch for the next attempt. */
    if (cq__gstate(cq__grant_ofc(g)) != CQ__G_IDLE)
      grant_view(cq__grant_ofc(g), &s->g[i].raw);
  }
  s->cb_calls = F.cb_calls;
}

static void snap_equal(const char *name, const struct snap *a,
                       const struct snap *b) {
#define SAME(field, what)                                                      \
  do {                                                                         \
    if (memcmp(&a->field, &b->field, sizeof(a->field)) != 0)                   \
      fail_msg("%s changed %s", name, what);                                   \
  } while (0)
  SAME(ps, "pool P's stats");
  SAME(qs, "pool Q's stats");
  SAME(np, "pool P's resources");
  SAME(nq, "pool Q's resources");
  for (size_t i = 0; i < a->np; i++)
    if (memcmp(&a->pr[i], &b->pr[i], sizeof(a->pr[i])) != 0)
      fail_msg("%s changed resource %s (in use %lld -> %lld, waiting %llu -> "
               "%llu)",
               name, a->pr[i].name, (long long)a->pr[i].in_use,
               (long long)b->pr[i].in_use, (unsigned long long)a->pr[i].waiting,
               (unsigned long long)b->pr[i].waiting);
  SAME(qr, "pool Q's budget");
  SAME(dev, "a device");
  for (int i = 0; i < N_REQS; i++)
    if (memcmp(&a->req[i], &b->req[i], sizeof(a->req[i])) != 0)
      fail_msg("%s changed request %d", name, i);
  for (int i = 0; i < N_GRANTS; i++)
    if (memcmp(&a->g[i], &b->g[i], sizeof(a->g[i])) != 0)
      fail_msg("%s changed grant %d", name, i);
  SAME(cb_calls, "the callback count (a refused call ran a callback)");
#undef SAME
}

/* ------------------------------------------------------------------------ */
/* Steps that set the scene, before the snapshot                             */
/* ------------------------------------------------------------------------ */

static void close_p(void) { assert_cq_ok(cq_pool_close(F.p)); }
static void release_db(void) {
  assert_cq_ok(cq_grant_release(F.p, &F.g[G_DB])); /* g_wait is granted */
}
static void release_mem(void) {
  assert_cq_ok(cq_grant_release(F.p, &F.g[G_MEM])); /* lock-free */
}
static void remove_tmp(void) { assert_cq_ok(cq_resource_remove(F.p, "tmp")); }

/* ------------------------------------------------------------------------ */
/* Misuses that need more than one expression                                */
/* ------------------------------------------------------------------------ */

static int pool_stats_null_pool(void) {
  return cq_pool_stats_get(NULL, &F.pst);
}

static int pool_create_unknown_flag(void) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = 1u << 12;
  cq_pool *p = NULL;
  int rc = cq_pool_create(&p, &cfg);
  assert_null(p);
  return rc;
}

static int64_t fixed_clock(void *arg) {
  (void)arg;
  return 0;
}
static int pool_create_clock_without_manual_timers(void) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.clock = fixed_clock;
  cq_pool *p = NULL;
  int rc = cq_pool_create(&p, &cfg);
  assert_null(p);
  return rc;
}

static void *no_alloc(size_t size, void *arg) {
  (void)size;
  (void)arg;
  fail_msg("an incomplete allocator was used");
  return NULL;
}
static void no_free(void *ptr, void *arg) {
  (void)ptr;
  (void)arg;
  fail_msg("an incomplete allocator was used");
}
/* Allocators missing one function: all three or none. */
static const cq_allocator incomplete = {no_alloc, NULL, no_free, NULL};
#ifdef CQT_WITH_UV
static void *no_realloc(void *ptr, size_t size, void *arg) {
  (void)ptr;
  return no_alloc(size, arg);
}
static const cq_allocator no_free_hook = {no_alloc, no_realloc, NULL, NULL};
#endif

static int pool_create_incomplete_allocator(void) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &incomplete;
  cq_pool *p = NULL;
  int rc = cq_pool_create(&p, &cfg);
  assert_null(p);
  return rc;
}

static int detect_incomplete_allocator(void) {
  cq_detect_opts o = CQ_DETECT_OPTS_INIT;
  o.alloc = &incomplete;
  return cq_gpu_detect(&F.list, &o);
}

static char name64[CQ_NAME_MAX + 2];    /* 64 bytes: one too many */
static char id96[CQ_DEVICE_ID_MAX + 2]; /* 96 bytes: one too many */
static char spec_name64[CQ_NAME_MAX + 8];
static char req_value70[80];

static int devices_add_ids(const char *a, const char *b) {
  const char *ids[] = {a, b};
  return cq_devices_add(F.p, "acc", 2, ids);
}

/* A request on the stack, built and tried on the idle grant. */
static int try_units(const char *resource, int64_t amount) {
  cq_req r;
  assert_cq_ok(cq_req_init(&r, F.p));
  assert_cq_ok(cq_req_add(&r, resource, amount));
  return cq_grant_try(F.p, &F.g[G_IDLE], &r);
}

static int try_whole(int64_t n) {
  cq_req r;
  assert_cq_ok(cq_req_init(&r, F.p));
  assert_cq_ok(cq_req_add_devices(&r, "gpu", n));
  return cq_grant_try(F.p, &F.g[G_IDLE], &r);
}

static int req_seventeen_items(void) {
  assert_cq_ok(cq_req_init(&F.scratch, F.p));
  for (int i = 0; i < CQ_REQ_MAX_ITEMS; i++) {
    char name[8];
    snprintf(name, sizeof(name), "b%d", i);
    assert_cq_ok(cq_req_add(&F.scratch, name, 1));
  }
  int rc = cq_req_add(&F.scratch, "b16", 1);
  assert_int_equal(cq_req_count(&F.scratch), CQ_REQ_MAX_ITEMS);
  assert_string_not_equal(cq_req_error(&F.scratch), "");
  return rc;
}

static cq_req zeroed_req; /* never initialised */

static int try_empty(void) {
  assert_cq_ok(cq_req_init(&F.scratch, F.p));
  return cq_grant_try(F.p, &F.g[G_IDLE], &F.scratch);
}

static int tasks_with_foreign_request(void) {
  cq_task t[] = {{"mine", &F.req[R_DB]}, {"foreign", &F.req[R_Q]}};
  return cq_tasks_validate(F.p, t, 2, NULL, NULL);
}

static int tasks_with_null_request(void) {
  cq_task t[] = {{"none", NULL}};
  return cq_tasks_validate(F.p, t, 1, NULL, NULL);
}

static int spec_n(const char *spec, size_t len) {
  return cq__pool_add_spec_n(F.p, spec, len, NULL, F.err, sizeof(F.err));
}
#define SPEC_N(lit) spec_n(lit, sizeof(lit) - 1)

static int req_parse_n(const char *spec, size_t len) {
  return cq__req_parse_n(&F.req[R_V], spec, len);
}
#define REQ_N(lit) req_parse_n(lit, sizeof(lit) - 1)

/* Detection from one variable; the list must end empty with a message. */
static int detect_with(const char *var, const char *value) {
  assert_int_equal(unsetenv("CRONOQ_NUM_GPUS"), 0);
  assert_int_equal(unsetenv("CUDA_VISIBLE_DEVICES"), 0);
  assert_int_equal(setenv(var, value, 1), 0);
  int rc = cq_gpu_detect(&F.list, NULL);
  assert_int_equal(unsetenv(var), 0);
  assert_int_equal(F.list.count, 0);
  return rc;
}

static int spec_with_bad_detection(void) {
  assert_int_equal(unsetenv("CUDA_VISIBLE_DEVICES"), 0);
  assert_int_equal(setenv("CRONOQ_NUM_GPUS", "lots", 1), 0);
  int rc = cq_pool_add_spec(F.p, "n=1, acc:devices=auto", NULL, F.err,
                            sizeof(F.err));
  assert_int_equal(unsetenv("CRONOQ_NUM_GPUS"), 0);
  return rc;
}

static int parse_list(int (*parse)(const char *, cq_gpu_list *),
                      const char *text) {
  memset(&F.list, 0, sizeof(F.list));
  F.list.alloc_ = cq__sys_allocator();
  return parse(text, &F.list);
}

#ifdef CQT_WITH_UV
static cq_uv_req uv_idle_req;
static int uv_init_with(uv_loop_t *loop, cq_pool *pool,
                        const cq_allocator *alloc) {
  cq_uv *uv = NULL;
  int rc = cq_uv_init(&uv, loop, pool, alloc);
  assert_null(uv);
  return rc;
}
static int uv_init_no_loop(void) { return uv_init_with(NULL, F.p, NULL); }
/* On a loop of its own, which must be left without a handle. */
static int uv_init_on_a_loop(cq_pool *pool, const cq_allocator *alloc) {
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  int rc = uv_init_with(&loop, pool, alloc);
  assert_int_equal(uv_loop_alive(&loop), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  return rc;
}
static void uv_cb(cq_uv_req *r, int status) {
  (void)r;
  (void)status;
  F.cb_calls++;
}
static int uv_acquire_null_uv(void) {
  cq_uv_req_init(&uv_idle_req);
  return cq_uv_acquire(NULL, &uv_idle_req, &F.req[R_DB], CQ_NEVER, uv_cb);
}
static int uv_release_idle(void) {
  cq_uv_req_init(&uv_idle_req);
  return cq_uv_release(&uv_idle_req);
}
static int uv_cancel_idle(void) {
  cq_uv_req_init(&uv_idle_req);
  return cq_uv_cancel(&uv_idle_req);
}
#endif

/* ------------------------------------------------------------------------ */
/* The catalogue                                                             */
/* ------------------------------------------------------------------------ */

/* What must explain itself after the refusal. */
enum {
  EXPLAINS_REQ = 1,   /* cq_req_error(r_v) */
  EXPLAINS_GRANT = 2, /* cq_grant_error(g_idle) */
  EXPLAINS_SPEC = 4,  /* the err buffer */
  EXPLAINS_LIST = 8   /* F.list.error */
};

struct misuse {
  const char *category;
  const char *name;
  void (*prep)(void);
  int (*fn)(void);
  int expect;
  unsigned explains;
};

#define NO_PREP NULL
#define GP(i) (&F.g[G_##i])
#define RQ(i) (&F.req[R_##i])

/*
 * X(category, name, prep, expected, explains, expression). The expression
 * is the misuse; F is the fixture.
 */
#define MISUSES(X)                                                             \
  /* NULL pointers, where the header promises an error. */                     \
  X(null, pool_create_null_out, NO_PREP, CQ_EINVAL, 0,                         \
    cq_pool_create(NULL, NULL))                                                \
  X(null, pool_close_null, NO_PREP, CQ_EINVAL, 0, cq_pool_close(NULL))         \
  X(null, pool_destroy_null_is_accepted, NO_PREP, 0, 0, cq_pool_destroy(NULL)) \
  X(null, pool_expire_null, NO_PREP, CQ_EINVAL, 0, cq_pool_expire(NULL, NULL)) \
  X(null, pool_stats_null_out, NO_PREP, CQ_EINVAL, 0,                          \
    cq_pool_stats_get(F.p, NULL))                                              \
  X(null, pool_stats_null_pool, NO_PREP, CQ_EINVAL, 0, pool_stats_null_pool()) \
  X(null, budget_add_null_pool, NO_PREP, CQ_EINVAL, 0,                         \
    cq_budget_add(NULL, "n", 1))                                               \
  X(null, budget_add_null_name, NO_PREP, CQ_EINVAL, 0,                         \
    cq_budget_add(F.p, NULL, 1))                                               \
  X(null, budget_add_ex_null_name, NO_PREP, CQ_EINVAL, 0,                      \
    cq_budget_add_ex(F.p, NULL, 1, CQ_BUDGET_LONE))                            \
  X(null, class_add_null_name, NO_PREP, CQ_EINVAL, 0,                          \
    cq_class_add(F.p, NULL, 1))                                                \
  X(null, set_capacity_null_pool, NO_PREP, CQ_EINVAL, 0,                       \
    cq_budget_set_capacity(NULL, "db", 5))                                     \
  X(null, set_capacity_null_name, NO_PREP, CQ_EINVAL, 0,                       \
    cq_budget_set_capacity(F.p, NULL, 5))                                      \
  X(null, class_set_max_null_name, NO_PREP, CQ_EINVAL, 0,                      \
    cq_class_set_max(F.p, NULL, 5))                                            \
  X(null, resource_remove_null_name, NO_PREP, CQ_EINVAL, 0,                    \
    cq_resource_remove(F.p, NULL))                                             \
  X(null, resource_remove_null_pool, NO_PREP, CQ_EINVAL, 0,                    \
    cq_resource_remove(NULL, "tmp"))                                           \
  X(null, resource_stats_null_out, NO_PREP, CQ_EINVAL, 0,                      \
    cq_resource_stats_get(F.p, "db", NULL))                                    \
  X(null, resource_stats_null_name, NO_PREP, CQ_EINVAL, 0,                     \
    cq_resource_stats_get(F.p, NULL, F.rst))                                   \
  X(null, snapshot_null_count, NO_PREP, CQ_EINVAL, 0,                          \
    cq_pool_snapshot(F.p, F.rst, 4, NULL))                                     \
  X(null, snapshot_null_out_with_room, NO_PREP, CQ_EINVAL, 0,                  \
    cq_pool_snapshot(F.p, NULL, 4, &F.n))                                      \
  X(null, devices_add_null_name, NO_PREP, CQ_EINVAL, 0,                        \
    cq_devices_add(F.p, NULL, 2, NULL))                                        \
  X(null, devices_add_null_id, NO_PREP, CQ_EINVAL, 0,                          \
    devices_add_ids("0", NULL))                                                \
  X(null, device_amount_parse_null_text, NO_PREP, CQ_EINVAL, 0,                \
    cq_device_amount_parse(NULL, &F.v))                                        \
  X(null, device_amount_parse_null_out, NO_PREP, CQ_EINVAL, 0,                 \
    cq_device_amount_parse("0.5", NULL))                                       \
  X(null, device_stats_null_out, NO_PREP, CQ_EINVAL, 0,                        \
    cq_device_stats_get(F.p, "gpu", 0, NULL))                                  \
  X(null, set_online_null_name, NO_PREP, CQ_EINVAL, 0,                         \
    cq_device_set_online(F.p, NULL, 0, 0))                                     \
  X(null, gpu_detect_null_out, NO_PREP, CQ_EINVAL, 0,                          \
    cq_gpu_detect(NULL, NULL))                                                 \
  X(null, req_init_null_req, NO_PREP, CQ_EINVAL, 0, cq_req_init(NULL, F.p))    \
  X(null, req_init_null_pool, NO_PREP, CQ_EINVAL, 0,                           \
    cq_req_init(&F.scratch, NULL))                                             \
  X(null, req_add_null_req, NO_PREP, CQ_EINVAL, 0, cq_req_add(NULL, "db", 1))  \
  X(null, req_add_null_resource, NO_PREP, CQ_EINVAL, 0,                        \
    cq_req_add(RQ(V), NULL, 1))                                                \
  X(null, req_add_fraction_null_resource, NO_PREP, CQ_EINVAL, 0,               \
    cq_req_add_fraction(RQ(V), NULL, 500))                                     \
  X(null, req_add_str_null_amount, NO_PREP, CQ_EINVAL, 0,                      \
    cq_req_add_str(RQ(V), "db", NULL))                                         \
  X(null, req_add_str_null_resource, NO_PREP, CQ_EINVAL, 0,                    \
    cq_req_add_str(RQ(V), NULL, "1"))                                          \
  X(null, req_set_class_null, NO_PREP, CQ_EINVAL, 0,                           \
    cq_req_set_class(RQ(V), NULL))                                             \
  X(null, req_parse_null_spec, NO_PREP, CQ_EINVAL, 0,                          \
    cq_req_parse(RQ(V), NULL))                                                 \
  X(null, req_parse_null_req, NO_PREP, CQ_EINVAL, 0,                           \
    cq_req_parse(NULL, "db=1"))                                                \
  X(null, hold_limit_null_req, NO_PREP, CQ_EINVAL, 0,                          \
    cq_req_set_hold_limit(NULL, 10))                                           \
  X(null, try_null_pool, NO_PREP, CQ_EINVAL, 0,                                \
    cq_grant_try(NULL, GP(IDLE), RQ(DB)))                                      \
  X(null, try_null_grant, NO_PREP, CQ_EINVAL, 0,                               \
    cq_grant_try(F.p, NULL, RQ(DB)))                                           \
  X(null, try_null_req, NO_PREP, CQ_EINVAL, 0,                                 \
    cq_grant_try(F.p, GP(IDLE), NULL))                                         \
  X(null, acquire_null_req, NO_PREP, CQ_EINVAL, 0,                             \
    cq_grant_acquire(F.p, GP(IDLE), NULL, 0))                                  \
  X(null, acquire_null_pool, NO_PREP, CQ_EINVAL, 0,                            \
    cq_grant_acquire(NULL, GP(IDLE), RQ(DB), 0))                               \
  X(null, submit_null_callback, NO_PREP, CQ_EINVAL, 0,                         \
    cq_grant_submit(F.p, GP(IDLE), RQ(DB), CQ_NEVER, NULL))                    \
  X(null, submit_null_pool, NO_PREP, CQ_EINVAL, 0,                             \
    cq_grant_submit(NULL, GP(IDLE), RQ(DB), CQ_NEVER, count_cb))               \
  X(null, cancel_null_grant, NO_PREP, CQ_EINVAL, 0,                            \
    cq_grant_cancel(F.p, NULL))                                                \
  X(null, cancel_null_pool, NO_PREP, CQ_EINVAL, 0,                             \
    cq_grant_cancel(NULL, GP(WAIT)))                                           \
  X(null, abort_null_pool, NO_PREP, CQ_EINVAL, 0,                              \
    cq_grant_abort(NULL, GP(WAIT), CQ_ETIMEDOUT))                              \
  X(null, release_null_grant, NO_PREP, CQ_EINVAL, 0,                           \
    cq_grant_release(F.p, NULL))                                               \
  X(null, release_null_pool, NO_PREP, CQ_EINVAL, 0,                            \
    cq_grant_release(NULL, GP(DB)))                                            \
  X(null, release_part_null_resource, NO_PREP, CQ_EINVAL, 0,                   \
    cq_grant_release_part(F.p, GP(DB), NULL, 1))                               \
  X(null, release_part_null_pool, NO_PREP, CQ_EINVAL, 0,                       \
    cq_grant_release_part(NULL, GP(DB), "db", 1))                              \
  X(null, release_device_null_resource, NO_PREP, CQ_EINVAL, 0,                 \
    cq_grant_release_device(F.p, GP(FRAC), NULL, 0, 100))                      \
  X(null, cuda_visible_null_buf, NO_PREP, CQ_EINVAL, 0,                        \
    cq_grant_cuda_visible(GP(FRAC), "gpu", NULL, 8))                           \
  X(null, cuda_visible_null_grant, NO_PREP, CQ_EINVAL, 0,                      \
    cq_grant_cuda_visible(NULL, "gpu", F.buf, sizeof(F.buf)))                  \
  X(null, headroom_null_copies, NO_PREP, CQ_EINVAL, 0,                         \
    cq_req_headroom(F.p, RQ(DB), NULL))                                        \
  X(null, headroom_null_req, NO_PREP, CQ_EINVAL, 0,                            \
    cq_req_headroom(F.p, NULL, &F.v))                                          \
  X(null, tasks_validate_null_tasks, NO_PREP, CQ_EINVAL, 0,                    \
    cq_tasks_validate(F.p, NULL, 2, NULL, NULL))                               \
  X(null, tasks_validate_null_request, NO_PREP, CQ_EINVAL, 0,                  \
    tasks_with_null_request())                                                 \
  X(null, room_null_out, NO_PREP, CQ_EINVAL, 0, cq_pool_room(F.p, NULL, NULL)) \
  X(null, add_spec_null_spec, NO_PREP, CQ_EINVAL, EXPLAINS_SPEC,               \
    cq_pool_add_spec(F.p, NULL, NULL, F.err, sizeof(F.err)))                   \
  X(null, add_spec_null_pool, NO_PREP, CQ_EINVAL, EXPLAINS_SPEC,               \
    cq_pool_add_spec(NULL, "n=1", NULL, F.err, sizeof(F.err)))                 \
  X(null, write_metrics_null_writer, NO_PREP, CQ_EINVAL, 0,                    \
    cq_pool_write_metrics(F.p, NULL, NULL))                                    \
                                                                               \
  /* Names: empty, overlong, duplicate, bytes a name cannot have. */           \
  X(names, budget_add_empty_name, NO_PREP, CQ_EINVAL, 0,                       \
    cq_budget_add(F.p, "", 1))                                                 \
  X(names, budget_add_64_byte_name, NO_PREP, CQ_EINVAL, 0,                     \
    cq_budget_add(F.p, name64, 1))                                             \
  X(names, class_add_64_byte_name, NO_PREP, CQ_EINVAL, 0,                      \
    cq_class_add(F.p, name64, 1))                                              \
  X(names, devices_add_64_byte_name, NO_PREP, CQ_EINVAL, 0,                    \
    cq_devices_add(F.p, name64, 1, NULL))                                      \
  X(names, devices_add_empty_name, NO_PREP, CQ_EINVAL, 0,                      \
    cq_devices_add(F.p, "", 1, NULL))                                          \
  X(names, budget_add_duplicate, NO_PREP, CQ_EEXIST, 0,                        \
    cq_budget_add(F.p, "db", 5))                                               \
  X(names, budget_add_named_as_a_device_pool, NO_PREP, CQ_EEXIST, 0,           \
    cq_budget_add(F.p, "gpu", 5))                                              \
  X(names, class_add_named_as_a_budget, NO_PREP, CQ_EEXIST, 0,                 \
    cq_class_add(F.p, "db", 5))                                                \
  X(names, devices_add_named_as_a_class, NO_PREP, CQ_EEXIST, 0,                \
    cq_devices_add(F.p, "jobs", 2, NULL))                                      \
  X(names, budget_add_with_space, NO_PREP, CQ_EINVAL, 0,                       \
    cq_budget_add(F.p, "a b", 1))                                              \
  X(names, budget_add_with_comma, NO_PREP, CQ_EINVAL, 0,                       \
    cq_budget_add(F.p, "a,b", 1))                                              \
  X(names, budget_add_with_equals, NO_PREP, CQ_EINVAL, 0,                      \
    cq_budget_add(F.p, "a=b", 1))                                              \
  X(names, budget_add_with_colon, NO_PREP, CQ_EINVAL, 0,                       \
    cq_budget_add(F.p, "a:lone", 1))                                           \
  X(names, budget_add_with_tab, NO_PREP, CQ_EINVAL, 0,                         \
    cq_budget_add(F.p, "a\tb", 1))                                             \
  X(names, budget_add_with_control_byte, NO_PREP, CQ_EINVAL, 0,                \
    cq_budget_add(F.p, "a\x01", 1))                                            \
  X(names, budget_add_utf8_name, NO_PREP, CQ_EINVAL, 0,                        \
    cq_budget_add(F.p, "caf\xc3\xa9", 1))                                      \
  X(names, budget_add_invalid_utf8_name, NO_PREP, CQ_EINVAL, 0,                \
    cq_budget_add(F.p, "a\xff", 1))                                            \
  X(names, class_add_with_quote, NO_PREP, CQ_EINVAL, 0,                        \
    cq_class_add(F.p, "a\"b", 1))                                              \
  X(names, devices_add_id_with_comma, NO_PREP, CQ_EINVAL, 0,                   \
    devices_add_ids("0,1", "2"))                                               \
  X(names, devices_add_empty_id, NO_PREP, CQ_EINVAL, 0,                        \
    devices_add_ids("0", ""))                                                  \
  X(names, devices_add_96_byte_id, NO_PREP, CQ_EINVAL, 0,                      \
    devices_add_ids(id96, "1"))                                                \
  X(names, devices_add_id_with_space, NO_PREP, CQ_EINVAL, 0,                   \
    devices_add_ids("GPU 0", "1"))                                             \
  X(names, devices_add_id_invalid_utf8, NO_PREP, CQ_EINVAL, 0,                 \
    devices_add_ids("GPU-\xff", "1"))                                          \
                                                                               \
  /* Amounts: negative, zero, overflowing. */                                  \
  X(amounts, budget_add_negative, NO_PREP, CQ_ERANGE, 0,                       \
    cq_budget_add(F.p, "n", -1))                                               \
  X(amounts, budget_add_above_max, NO_PREP, CQ_ERANGE, 0,                      \
    cq_budget_add(F.p, "n", CQ_BUDGET_MAX + 1))                                \
  X(amounts, budget_add_int64_min, NO_PREP, CQ_ERANGE, 0,                      \
    cq_budget_add(F.p, "n", INT64_MIN))                                        \
  X(amounts, class_add_negative, NO_PREP, CQ_ERANGE, 0,                        \
    cq_class_add(F.p, "n", -1))                                                \
  X(amounts, class_add_int64_max, NO_PREP, CQ_ERANGE, 0,                       \
    cq_class_add(F.p, "n", INT64_MAX))                                         \
  X(amounts, set_capacity_negative, NO_PREP, CQ_ERANGE, 0,                     \
    cq_budget_set_capacity(F.p, "db", -1))                                     \
  X(amounts, class_set_max_negative, NO_PREP, CQ_ERANGE, 0,                    \
    cq_class_set_max(F.p, "jobs", -1))                                         \
  X(amounts, devices_add_too_many, NO_PREP, CQ_ERANGE, 0,                      \
    cq_devices_add(F.p, "acc", (size_t)CQ_DEVICES_MAX + 1, NULL))              \
  X(amounts, devices_add_size_max, NO_PREP, CQ_ERANGE, 0,                      \
    cq_devices_add(F.p, "acc", SIZE_MAX, NULL))                                \
  X(amounts, req_add_zero, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,                   \
    cq_req_add(RQ(V), "db", 0))                                                \
  X(amounts, req_add_negative, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,               \
    cq_req_add(RQ(V), "db", -3))                                               \
  X(amounts, req_add_int64_min, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,              \
    cq_req_add(RQ(V), "db", INT64_MIN))                                        \
  X(amounts, req_add_devices_zero, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,           \
    cq_req_add_devices(RQ(V), "gpu", 0))                                       \
  X(amounts, req_add_devices_negative, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,       \
    cq_req_add_devices(RQ(V), "gpu", -2))                                      \
  X(amounts, req_add_str_negative, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,           \
    cq_req_add_str(RQ(V), "db", "-1"))                                         \
  X(amounts, req_add_str_above_budget_max, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,   \
    cq_req_add_str(RQ(V), "db", "1099511627776"))                              \
  X(amounts, req_add_str_overflowing_int64, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,  \
    cq_req_add_str(RQ(V), "db", "99999999999999999999999"))                    \
  X(amounts, req_add_str_exponent, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,           \
    cq_req_add_str(RQ(V), "db", "1e3"))                                        \
  X(amounts, req_add_str_hex, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,                \
    cq_req_add_str(RQ(V), "db", "0x10"))                                       \
  X(amounts, req_add_str_empty, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,              \
    cq_req_add_str(RQ(V), "db", ""))                                           \
  X(amounts, req_add_str_fraction_of_a_budget, NO_PREP, CQ_EPARSE,             \
    EXPLAINS_REQ, cq_req_add_str(RQ(V), "db", "0.5"))                          \
  X(amounts, acquire_more_than_capacity, NO_PREP, CQ_ENEVER, EXPLAINS_GRANT,   \
    try_units("tmp", 6))                                                       \
  X(amounts, acquire_more_than_capacity_of_a_held_budget, NO_PREP, CQ_ENEVER,  \
    EXPLAINS_GRANT, try_units("db", 11))                                       \
  X(amounts, acquire_more_devices_than_the_pool_has, NO_PREP, CQ_ENEVER,       \
    EXPLAINS_GRANT, try_whole(5))                                              \
  X(amounts, acquire_int64_max_units_of_an_idle_budget, NO_PREP, CQ_ENEVER,    \
    EXPLAINS_GRANT, try_units("tmp", INT64_MAX))                               \
  X(amounts, acquire_int64_max_units_of_a_claimed_budget, NO_PREP, CQ_ENEVER,  \
    EXPLAINS_GRANT, try_units("db", INT64_MAX))                                \
  X(amounts, release_part_zero, NO_PREP, CQ_ERANGE, 0,                         \
    cq_grant_release_part(F.p, GP(DB), "db", 0))                               \
  X(amounts, release_part_negative, NO_PREP, CQ_ERANGE, 0,                     \
    cq_grant_release_part(F.p, GP(DB), "db", -1))                              \
  X(amounts, release_part_more_than_held, NO_PREP, CQ_ERANGE, 0,               \
    cq_grant_release_part(F.p, GP(DB), "db", 4))                               \
  X(amounts, release_part_int64_max, NO_PREP, CQ_ERANGE, 0,                    \
    cq_grant_release_part(F.p, GP(DB), "db", INT64_MAX))                       \
  X(amounts, release_part_of_a_device_pool, NO_PREP, CQ_EINVAL, 0,             \
    cq_grant_release_part(F.p, GP(FRAC), "gpu", 100))                          \
                                                                               \
  /* Fractions of a device out of range or not representable. */               \
  X(fractions, add_fraction_zero, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,            \
    cq_req_add_fraction(RQ(V), "gpu", 0))                                      \
  X(fractions, add_fraction_above_one, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,       \
    cq_req_add_fraction(RQ(V), "gpu", CQ_DEVICE_MILLI + 1))                    \
  X(fractions, add_fraction_negative, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,        \
    cq_req_add_fraction(RQ(V), "gpu", -250))                                   \
  X(fractions, add_fraction_int64_max, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,       \
    cq_req_add_fraction(RQ(V), "gpu", INT64_MAX))                              \
  X(fractions, add_str_finer_than_a_thousandth, NO_PREP, CQ_ERANGE,            \
    EXPLAINS_REQ, cq_req_add_str(RQ(V), "gpu", "0.0005"))                      \
  X(fractions, add_str_one_and_a_half, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,       \
    cq_req_add_str(RQ(V), "gpu", "1.5"))                                       \
  X(fractions, add_str_negative, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,             \
    cq_req_add_str(RQ(V), "gpu", "-0.5"))                                      \
  X(fractions, add_str_zero, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,                 \
    cq_req_add_str(RQ(V), "gpu", "0.000"))                                     \
  X(fractions, add_str_two_points, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,           \
    cq_req_add_str(RQ(V), "gpu", "0.5.5"))                                     \
  X(fractions, add_str_no_decimals, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,          \
    cq_req_add_str(RQ(V), "gpu", "1."))                                        \
  X(fractions, add_str_nan, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,                  \
    cq_req_add_str(RQ(V), "gpu", "nan"))                                       \
  X(fractions, amount_parse_too_many_devices, NO_PREP, CQ_ERANGE, 0,           \
    cq_device_amount_parse("65537", &F.v))                                     \
  X(fractions, amount_parse_ten_thousandth, NO_PREP, CQ_ERANGE, 0,             \
    cq_device_amount_parse("0.0001", &F.v))                                    \
  X(fractions, amount_parse_plus_sign, NO_PREP, CQ_EPARSE, 0,                  \
    cq_device_amount_parse("+0.5", &F.v))                                      \
  X(fractions, fraction_of_a_budget, NO_PREP, CQ_EINVAL, EXPLAINS_REQ,         \
    cq_req_add_fraction(RQ(V), "db", 500))                                     \
  X(fractions, whole_devices_of_a_budget, NO_PREP, CQ_EINVAL, EXPLAINS_REQ,    \
    cq_req_add_devices(RQ(V), "db", 1))                                        \
  X(fractions, units_of_a_device_pool, NO_PREP, CQ_EINVAL, EXPLAINS_REQ,       \
    cq_req_add(RQ(V), "gpu", 1))                                               \
  X(fractions, release_device_more_than_held, NO_PREP, CQ_ERANGE, 0,           \
    cq_grant_release_device(F.p, GP(FRAC), "gpu", 0, 501))                     \
  X(fractions, release_device_zero, NO_PREP, CQ_ERANGE, 0,                     \
    cq_grant_release_device(F.p, GP(FRAC), "gpu", 0, 0))                       \
  X(fractions, release_device_negative, NO_PREP, CQ_ERANGE, 0,                 \
    cq_grant_release_device(F.p, GP(FRAC), "gpu", 0, -100))                    \
  X(fractions, release_device_part_of_a_whole_device, NO_PREP, CQ_ERANGE, 0,   \
    cq_grant_release_device(F.p, GP(WHOLE), "gpu", 1, 500))                    \
                                                                               \
  /* Unknown resources, classes and devices. */                                \
  X(unknown, req_add_unknown_resource, NO_PREP, CQ_ENOENT, EXPLAINS_REQ,       \
    cq_req_add(RQ(V), "nosuch", 1))                                            \
  X(unknown, req_add_str_unknown_resource, NO_PREP, CQ_ENOENT, EXPLAINS_REQ,   \
    cq_req_add_str(RQ(V), "nosuch", "1"))                                      \
  X(unknown, req_set_class_unknown, NO_PREP, CQ_ENOENT, EXPLAINS_REQ,          \
    cq_req_set_class(RQ(TMP), "nosuch"))                                       \
  X(unknown, req_set_class_to_a_budget, NO_PREP, CQ_EINVAL, EXPLAINS_REQ,      \
    cq_req_set_class(RQ(V), "db"))                                             \
  X(unknown, req_add_a_class_as_units, NO_PREP, CQ_EINVAL, EXPLAINS_REQ,       \
    cq_req_add(RQ(V), "jobs", 1))                                              \
  X(unknown, set_capacity_unknown, NO_PREP, CQ_ENOENT, 0,                      \
    cq_budget_set_capacity(F.p, "nosuch", 5))                                  \
  X(unknown, set_capacity_of_a_class, NO_PREP, CQ_ENOENT, 0,                   \
    cq_budget_set_capacity(F.p, "jobs", 5))                                    \
  X(unknown, set_capacity_of_a_device_pool, NO_PREP, CQ_ENOENT, 0,             \
    cq_budget_set_capacity(F.p, "gpu", 5))                                     \
  X(unknown, class_set_max_of_a_budget, NO_PREP, CQ_ENOENT, 0,                 \
    cq_class_set_max(F.p, "db", 5))                                            \
  X(unknown, resource_remove_unknown, NO_PREP, CQ_ENOENT, 0,                   \
    cq_resource_remove(F.p, "nosuch"))                                         \
  X(unknown, resource_remove_twice, remove_tmp, CQ_ENOENT, 0,                  \
    cq_resource_remove(F.p, "tmp"))                                            \
  X(unknown, resource_stats_unknown, NO_PREP, CQ_ENOENT, 0,                    \
    cq_resource_stats_get(F.p, "nosuch", F.rst))                               \
  X(unknown, device_stats_unknown_pool, NO_PREP, CQ_ENOENT, 0,                 \
    cq_device_stats_get(F.p, "nosuch", 0, &F.dst))                             \
  X(unknown, device_stats_of_a_budget, NO_PREP, CQ_ENOENT, 0,                  \
    cq_device_stats_get(F.p, "db", 0, &F.dst))                                 \
  X(unknown, device_stats_index_out_of_range, NO_PREP, CQ_ENOENT, 0,           \
    cq_device_stats_get(F.p, "gpu", 4, &F.dst))                                \
  X(unknown, set_offline_index_out_of_range, NO_PREP, CQ_ENOENT, 0,            \
    cq_device_set_online(F.p, "gpu", 4, 0))                                    \
  X(unknown, set_online_index_uint32_max, NO_PREP, CQ_ENOENT, 0,               \
    cq_device_set_online(F.p, "gpu", UINT32_MAX, 1))                           \
  X(unknown, set_offline_a_budget, NO_PREP, CQ_ENOENT, 0,                      \
    cq_device_set_online(F.p, "db", 0, 0))                                     \
  X(unknown, room_unknown_class, NO_PREP, CQ_ENOENT, 0,                        \
    cq_pool_room(F.p, "nosuch", &F.room))                                      \
  X(unknown, room_budget_as_class, NO_PREP, CQ_ENOENT, 0,                      \
    cq_pool_room(F.p, "db", &F.room))                                          \
  X(unknown, release_part_unknown_resource, NO_PREP, CQ_ENOENT, 0,             \
    cq_grant_release_part(F.p, GP(DB), "nosuch", 1))                           \
  X(unknown, release_part_resource_not_held, NO_PREP, CQ_ENOENT, 0,            \
    cq_grant_release_part(F.p, GP(DB), "mem", 1))                              \
  X(unknown, release_device_index_out_of_range, NO_PREP, CQ_ENOENT, 0,         \
    cq_grant_release_device(F.p, GP(FRAC), "gpu", 4, 100))                     \
  X(unknown, release_device_not_held_there, NO_PREP, CQ_ENOENT, 0,             \
    cq_grant_release_device(F.p, GP(FRAC), "gpu", 3, 100))                     \
  X(unknown, release_device_uint32_max, NO_PREP, CQ_ENOENT, 0,                 \
    cq_grant_release_device(F.p, GP(WHOLE), "gpu", UINT32_MAX, 1000))          \
  X(unknown, cuda_visible_of_a_budget_grant, NO_PREP, CQ_ENOENT, 0,            \
    cq_grant_cuda_visible(GP(DB), NULL, F.buf, sizeof(F.buf)))                 \
  X(unknown, acquire_removed_resource, remove_tmp, CQ_ENOENT, EXPLAINS_GRANT,  \
    cq_grant_try(F.p, GP(IDLE), RQ(TMP)))                                      \
  X(unknown, submit_removed_resource, remove_tmp, CQ_ENOENT, 0,                \
    cq_grant_submit(F.p, GP(IDLE), RQ(TMP), CQ_NEVER, count_cb))               \
  X(unknown, headroom_removed_resource, remove_tmp, CQ_ENOENT, 0,              \
    cq_req_headroom(F.p, RQ(TMP), &F.v))                                       \
                                                                               \
  /* Requests: duplicates, too many items, uninitialised, foreign. */          \
  X(requests, req_add_duplicate, NO_PREP, CQ_EEXIST, EXPLAINS_REQ,             \
    cq_req_add(RQ(V), "mem", 2))                                               \
  X(requests, req_set_class_twice, NO_PREP, CQ_EEXIST, EXPLAINS_REQ,           \
    cq_req_set_class(RQ(V), "jobs"))                                           \
  X(requests, req_add_seventeenth_item, NO_PREP, CQ_ETOOMANY, 0,               \
    req_seventeen_items())                                                     \
  X(requests, hold_limit_negative, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,           \
    cq_req_set_hold_limit(RQ(V), -1))                                          \
  X(requests, hold_limit_above_max, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,          \
    cq_req_set_hold_limit(RQ(V), CQ__LIMIT_MAX + 1))                           \
  X(requests, hold_limit_int64_max, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,          \
    cq_req_set_hold_limit(RQ(V), INT64_MAX))                                   \
  X(requests, uninitialised_req_try, NO_PREP, CQ_EINVAL, 0,                    \
    cq_grant_try(F.p, GP(IDLE), &zeroed_req))                                  \
  X(requests, uninitialised_req_add, NO_PREP, CQ_EINVAL, 0,                    \
    cq_req_add(&zeroed_req, "db", 1))                                          \
  X(requests, uninitialised_req_hold_limit, NO_PREP, CQ_EINVAL, 0,             \
    cq_req_set_hold_limit(&zeroed_req, 10))                                    \
  X(requests, uninitialised_req_headroom, NO_PREP, CQ_EINVAL, 0,               \
    cq_req_headroom(F.p, &zeroed_req, &F.v))                                   \
  X(requests, uninitialised_req_parse, NO_PREP, CQ_EINVAL, 0,                  \
    cq_req_parse(&zeroed_req, "db=1"))                                         \
  X(requests, foreign_req_try, NO_PREP, CQ_EPOOL, 0,                           \
    cq_grant_try(F.p, GP(IDLE), RQ(Q)))                                        \
  X(requests, foreign_req_submit, NO_PREP, CQ_EPOOL, 0,                        \
    cq_grant_submit(F.p, GP(IDLE), RQ(Q), CQ_NEVER, count_cb))                 \
  X(requests, foreign_req_headroom, NO_PREP, CQ_EPOOL, 0,                      \
    cq_req_headroom(F.p, RQ(Q), &F.v))                                         \
  X(requests, foreign_req_in_tasks, NO_PREP, CQ_EPOOL, 0,                      \
    tasks_with_foreign_request())                                              \
                                                                               \
  /* Grants: twice, into another pool, in the wrong state. */                  \
  X(grants, release_twice, release_db, CQ_ESTATE, 0,                           \
    cq_grant_release(F.p, GP(DB)))                                             \
  X(grants, release_twice_lock_free, release_mem, CQ_ESTATE, 0,                \
    cq_grant_release(F.p, GP(MEM)))                                            \
  X(grants, release_never_acquired, NO_PREP, CQ_ESTATE, 0,                     \
    cq_grant_release(F.p, GP(IDLE)))                                           \
  X(grants, release_a_waiting_grant, NO_PREP, CQ_ESTATE, 0,                    \
    cq_grant_release(F.p, GP(WAIT)))                                           \
  X(grants, release_into_another_pool, NO_PREP, CQ_EPOOL, 0,                   \
    cq_grant_release(F.q, GP(DB)))                                             \
  X(grants, release_lock_free_into_another_pool, NO_PREP, CQ_EPOOL, 0,         \
    cq_grant_release(F.q, GP(MEM)))                                            \
  X(grants, release_device_grant_into_another_pool, NO_PREP, CQ_EPOOL, 0,      \
    cq_grant_release(F.q, GP(WHOLE)))                                          \
  X(grants, release_part_into_another_pool, NO_PREP, CQ_EPOOL, 0,              \
    cq_grant_release_part(F.q, GP(DB), "db", 1))                               \
  X(grants, release_part_of_a_released_grant, release_db, CQ_ESTATE, 0,        \
    cq_grant_release_part(F.p, GP(DB), "db", 1))                               \
  X(grants, release_device_of_an_idle_grant, NO_PREP, CQ_ESTATE, 0,            \
    cq_grant_release_device(F.p, GP(IDLE), "gpu", 0, 100))                     \
  X(grants, cancel_after_the_grant, NO_PREP, CQ_ESTATE, 0,                     \
    cq_grant_cancel(F.p, GP(DB)))                                              \
  X(grants, cancel_after_a_lock_free_grant, NO_PREP, CQ_ESTATE, 0,             \
    cq_grant_cancel(F.p, GP(MEM)))                                             \
  X(grants, cancel_after_a_waiter_was_granted, release_db, CQ_ESTATE, 0,       \
    cq_grant_cancel(F.p, GP(WAIT)))                                            \
  X(grants, cancel_never_started, NO_PREP, CQ_ESTATE, 0,                       \
    cq_grant_cancel(F.p, GP(IDLE)))                                            \
  X(grants, cancel_into_another_pool, NO_PREP, CQ_EPOOL, 0,                    \
    cq_grant_cancel(F.q, GP(WAIT)))                                            \
  X(grants, abort_with_status_ebusy, NO_PREP, CQ_EINVAL, 0,                    \
    cq_grant_abort(F.p, GP(WAIT), CQ_EBUSY))                                   \
  X(grants, abort_with_status_zero, NO_PREP, CQ_EINVAL, 0,                     \
    cq_grant_abort(F.p, GP(WAIT), 0))                                          \
  X(grants, try_with_a_held_grant, NO_PREP, CQ_ESTATE, 0,                      \
    cq_grant_try(F.p, GP(DB), RQ(DB)))                                         \
  X(grants, try_with_a_waiting_grant, NO_PREP, CQ_ESTATE, 0,                   \
    cq_grant_try(F.p, GP(WAIT), RQ(MEM)))                                      \
  X(grants, acquire_with_a_held_grant, NO_PREP, CQ_ESTATE, 0,                  \
    cq_grant_acquire(F.p, GP(FRAC), RQ(MEM), 0))                               \
  X(grants, submit_with_a_held_grant, NO_PREP, CQ_ESTATE, 0,                   \
    cq_grant_submit(F.p, GP(MEM), RQ(MEM), CQ_NEVER, count_cb))                \
  X(grants, cuda_visible_of_an_idle_grant, NO_PREP, CQ_ENOENT, 0,              \
    cq_grant_cuda_visible(GP(IDLE), "gpu", F.buf, sizeof(F.buf)))              \
  X(grants, cuda_visible_buffer_too_small, NO_PREP, CQ_ERANGE, 0,              \
    cq_grant_cuda_visible(GP(WHOLE), "gpu", F.buf, 3))                         \
  X(grants, cuda_visible_zero_length, NO_PREP, CQ_EINVAL, 0,                   \
    cq_grant_cuda_visible(GP(WHOLE), "gpu", F.buf, 0))                         \
  X(grants, remove_a_held_resource, NO_PREP, CQ_EINUSE, 0,                     \
    cq_resource_remove(F.p, "gpu"))                                            \
  X(grants, remove_a_lock_free_held_resource, NO_PREP, CQ_EINUSE, 0,           \
    cq_resource_remove(F.p, "mem"))                                            \
  X(grants, remove_a_held_and_waited_on_resource, NO_PREP, CQ_EINUSE, 0,       \
    cq_resource_remove(F.p, "db"))                                             \
                                                                               \
  /* Closed pools, and destroying with holders (refused, not forced). */       \
  X(closed, try_on_a_closed_pool, close_p, CQ_ECLOSED, 0,                      \
    cq_grant_try(F.p, GP(IDLE), RQ(V)))                                        \
  X(closed, lock_free_try_on_a_closed_pool, close_p, CQ_ECLOSED, 0,            \
    cq_grant_try(F.p, GP(IDLE), RQ(MEM)))                                      \
  X(closed, empty_request_on_a_closed_pool, close_p, CQ_ECLOSED, 0,            \
    try_empty())                                                               \
  X(closed, acquire_on_a_closed_pool, close_p, CQ_ECLOSED, 0,                  \
    cq_grant_acquire(F.p, GP(IDLE), RQ(TMP), CQ_NEVER))                        \
  X(closed, submit_on_a_closed_pool, close_p, CQ_ECLOSED, 0,                   \
    cq_grant_submit(F.p, GP(IDLE), RQ(FRAC), CQ_NEVER, count_cb))              \
  X(closed, close_twice_is_harmless, close_p, 0, 0, cq_pool_close(F.p))        \
  X(closed, cancel_a_waiter_the_close_failed, close_p, CQ_ESTATE, 0,           \
    cq_grant_cancel(F.p, GP(WAIT)))                                            \
  X(closed, destroy_with_holders_and_a_waiter, NO_PREP, CQ_EINUSE, 0,          \
    cq_pool_destroy(F.p))                                                      \
  X(closed, destroy_with_holders_only, release_db, CQ_EINUSE, 0,               \
    cq_pool_destroy(F.p))                                                      \
  X(closed, destroy_a_closed_pool_with_holders, close_p, CQ_EINUSE, 0,         \
    cq_pool_destroy(F.p))                                                      \
  X(closed, destroy_other_pool_with_a_holder, NO_PREP, CQ_EINUSE, 0,           \
    cq_pool_destroy(F.q))                                                      \
                                                                               \
  /* Capacity overflow on growth. */                                           \
  X(overflow, set_capacity_above_max, NO_PREP, CQ_ERANGE, 0,                   \
    cq_budget_set_capacity(F.p, "db", CQ_BUDGET_MAX + 1))                      \
  X(overflow, set_capacity_int64_max, NO_PREP, CQ_ERANGE, 0,                   \
    cq_budget_set_capacity(F.p, "mem", INT64_MAX))                             \
  X(overflow, class_set_max_int64_max, NO_PREP, CQ_ERANGE, 0,                  \
    cq_class_set_max(F.p, "jobs", INT64_MAX))                                  \
  X(overflow, spec_budget_above_max, NO_PREP, CQ_ERANGE, EXPLAINS_SPEC,        \
    cq_pool_add_spec(F.p, "n=1099511627776", NULL, F.err, sizeof(F.err)))      \
  X(overflow, spec_budget_overflowing_int64, NO_PREP, CQ_ERANGE,               \
    EXPLAINS_SPEC,                                                             \
    cq_pool_add_spec(F.p, "n=1, m=999999999999999999999999", NULL, F.err,      \
                     sizeof(F.err)))                                           \
  X(overflow, spec_too_many_devices, NO_PREP, CQ_ERANGE, EXPLAINS_SPEC,        \
    cq_pool_add_spec(F.p, "acc:devices=65537", NULL, F.err, sizeof(F.err)))    \
                                                                               \
  /* Specs: embedded NUL, invalid UTF-8, and every syntax error class. */      \
  X(specs, spec_embedded_nul, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,               \
    SPEC_N("n1=1\0n2=2"))                                                      \
  X(specs, spec_nul_only, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC, SPEC_N("\0"))     \
  X(specs, spec_nul_in_a_name, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,              \
    SPEC_N("n\0x=1"))                                                          \
  X(specs, spec_nul_after_the_last_item, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,    \
    SPEC_N("n=1\0"))                                                           \
  X(specs, spec_invalid_utf8, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,               \
    SPEC_N("n=\xff"))                                                          \
  X(specs, spec_overlong_utf8, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,              \
    SPEC_N("n\xc0\xae=1"))                                                     \
  X(specs, spec_truncated_utf8, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,             \
    SPEC_N("n=1,\xe2\x82"))                                                    \
  X(specs, spec_utf8_name, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,                  \
    SPEC_N("caf\xc3\xa9=1"))                                                   \
  X(specs, spec_name_of_64_bytes, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,           \
    cq_pool_add_spec(F.p, spec_name64, NULL, F.err, sizeof(F.err)))            \
  X(specs, spec_existing_name, NO_PREP, CQ_EEXIST, EXPLAINS_SPEC,              \
    cq_pool_add_spec(F.p, "n=1, db=5", NULL, F.err, sizeof(F.err)))            \
  X(specs, spec_name_repeated, NO_PREP, CQ_EEXIST, EXPLAINS_SPEC,              \
    cq_pool_add_spec(F.p, "n=1, n=2", NULL, F.err, sizeof(F.err)))             \
  X(specs, spec_empty, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,                      \
    cq_pool_add_spec(F.p, "", NULL, F.err, sizeof(F.err)))                     \
  X(specs, spec_blanks_only, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,                \
    cq_pool_add_spec(F.p, " \t ", NULL, F.err, sizeof(F.err)))                 \
  X(specs, spec_trailing_comma, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,             \
    cq_pool_add_spec(F.p, "n=1,", NULL, F.err, sizeof(F.err)))                 \
  X(specs, spec_bad_second_item_adds_nothing, NO_PREP, CQ_EPARSE,              \
    EXPLAINS_SPEC,                                                             \
    cq_pool_add_spec(F.p, "n=1, m=x", NULL, F.err, sizeof(F.err)))             \
  X(specs, spec_option_twice, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,               \
    cq_pool_add_spec(F.p, "n:lone:lone=1", NULL, F.err, sizeof(F.err)))        \
  X(specs, spec_conflicting_options, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,        \
    cq_pool_add_spec(F.p, "n:lone:class=1", NULL, F.err, sizeof(F.err)))       \
  X(specs, spec_unknown_option, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,             \
    cq_pool_add_spec(F.p, "n:big=1", NULL, F.err, sizeof(F.err)))              \
  X(specs, spec_auto_for_a_budget, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,          \
    cq_pool_add_spec(F.p, "n=auto", NULL, F.err, sizeof(F.err)))               \
  X(specs, spec_negative_capacity, NO_PREP, CQ_EPARSE, EXPLAINS_SPEC,          \
    cq_pool_add_spec(F.p, "n=-1", NULL, F.err, sizeof(F.err)))                 \
  X(specs, spec_failed_detection_adds_nothing, NO_PREP, CQ_EPARSE,             \
    EXPLAINS_SPEC, spec_with_bad_detection())                                  \
  X(specs, req_spec_embedded_nul, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,            \
    REQ_N("db=1\0tmp=1"))                                                      \
  X(specs, req_spec_nul_in_a_value, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,          \
    REQ_N("db=1\0"))                                                           \
  X(specs, req_spec_invalid_utf8, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,            \
    REQ_N("db=\xe2\x82"))                                                      \
  X(specs, req_spec_utf8_name, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,               \
    REQ_N("d\xc3\xa9=1"))                                                      \
  X(specs, req_spec_missing_equals, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,          \
    cq_req_parse(RQ(V), "db"))                                                 \
  X(specs, req_spec_empty_value, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,             \
    cq_req_parse(RQ(V), "db="))                                                \
  X(specs, req_spec_value_of_70_bytes, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,       \
    cq_req_parse(RQ(V), req_value70))                                          \
  X(specs, req_spec_options_not_allowed, NO_PREP, CQ_EPARSE, EXPLAINS_REQ,     \
    cq_req_parse(RQ(V), "db:lone=1"))                                          \
  X(specs, req_spec_repeated_item, NO_PREP, CQ_EEXIST, EXPLAINS_REQ,           \
    cq_req_parse(RQ(TMP), "db=1, db=2"))                                       \
  X(specs, req_spec_item_already_named, NO_PREP, CQ_EEXIST, EXPLAINS_REQ,      \
    cq_req_parse(RQ(V), "mem=1"))                                              \
  X(specs, req_spec_unknown_resource_adds_nothing, NO_PREP, CQ_ENOENT,         \
    EXPLAINS_REQ, cq_req_parse(RQ(V), "tmp=1, nosuch=1"))                      \
  X(specs, req_spec_class_is_a_budget, NO_PREP, CQ_EINVAL, EXPLAINS_REQ,       \
    cq_req_parse(RQ(TMP), "class=db"))                                         \
  X(specs, req_spec_one_and_a_half_devices, NO_PREP, CQ_ERANGE, EXPLAINS_REQ,  \
    cq_req_parse(RQ(V), "gpu=1.5"))                                            \
                                                                               \
  /* GPU detection: unusable variables and output. */                          \
  X(detect, num_gpus_not_a_number, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,          \
    detect_with("CRONOQ_NUM_GPUS", "two"))                                     \
  X(detect, num_gpus_negative, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,              \
    detect_with("CRONOQ_NUM_GPUS", "-1"))                                      \
  X(detect, num_gpus_too_many, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,              \
    detect_with("CRONOQ_NUM_GPUS", "65537"))                                   \
  X(detect, num_gpus_invalid_utf8, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,          \
    detect_with("CRONOQ_NUM_GPUS", "1\xff"))                                   \
  X(detect, cuda_visible_repeated_entry, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,    \
    detect_with("CUDA_VISIBLE_DEVICES", "0,1,0"))                              \
  X(detect, cuda_visible_empty_entry, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,       \
    detect_with("CUDA_VISIBLE_DEVICES", "0,,1"))                               \
  X(detect, cuda_visible_bare_prefix, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,       \
    detect_with("CUDA_VISIBLE_DEVICES", "GPU-"))                               \
  X(detect, cuda_visible_invalid_utf8, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,      \
    detect_with("CUDA_VISIBLE_DEVICES", "GPU-\xc3"))                           \
  X(detect, nvidia_smi_unexpected_line, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,     \
    parse_list(cq__parse_nvidia_smi, "GPU 0: X (UUID: GPU-1)\nhello\n"))       \
  X(detect, nvidia_smi_mig_before_a_gpu, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,    \
    parse_list(cq__parse_nvidia_smi, "  MIG 1g Device 0: (UUID: MIG-1)\n"))    \
  X(detect, nvidia_smi_invalid_utf8_line, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,   \
    parse_list(cq__parse_nvidia_smi, "GPU 0: X (UUID: GPU-1)\n\xff\n"))        \
  X(detect, nvidia_smi_no_colon, NO_PREP, CQ_EPARSE, EXPLAINS_LIST,            \
    parse_list(cq__parse_nvidia_smi, "GPU 0 X\n"))                             \
                                                                               \
  /* Flags and options that do not exist. */                                   \
  X(flags, pool_create_unknown_flag, NO_PREP, CQ_EINVAL, 0,                    \
    pool_create_unknown_flag())                                                \
  X(flags, pool_create_clock_without_manual_timers, NO_PREP, CQ_EINVAL, 0,     \
    pool_create_clock_without_manual_timers())                                 \
  X(flags, pool_create_incomplete_allocator, NO_PREP, CQ_EINVAL, 0,            \
    pool_create_incomplete_allocator())                                        \
  X(flags, budget_add_ex_unknown_flag, NO_PREP, CQ_EINVAL, 0,                  \
    cq_budget_add_ex(F.p, "n", 1, 1u << 1))                                    \
  X(flags, budget_add_ex_every_flag, NO_PREP, CQ_EINVAL, 0,                    \
    cq_budget_add_ex(F.p, "n", 1, ~0u))                                        \
  X(flags, detect_incomplete_allocator, NO_PREP, CQ_EINVAL, 0,                 \
    detect_incomplete_allocator())

#ifdef CQT_WITH_UV
#define UV_MISUSES(X)                                                          \
  X(uv, uv_init_null_out, NO_PREP, CQ_EINVAL, 0,                               \
    cq_uv_init(NULL, NULL, F.p, NULL))                                         \
  X(uv, uv_init_null_loop, NO_PREP, CQ_EINVAL, 0, uv_init_no_loop())           \
  X(uv, uv_init_null_pool, NO_PREP, CQ_EINVAL, 0,                              \
    uv_init_on_a_loop(NULL, NULL))                                             \
  X(uv, uv_init_incomplete_allocator, NO_PREP, CQ_EINVAL, 0,                   \
    uv_init_on_a_loop(F.p, &no_free_hook))                                     \
  X(uv, uv_acquire_null_adapter, NO_PREP, CQ_EINVAL, 0, uv_acquire_null_uv())  \
  X(uv, uv_release_never_acquired, NO_PREP, CQ_EINVAL, 0, uv_release_idle())   \
  X(uv, uv_cancel_never_acquired, NO_PREP, CQ_EINVAL, 0, uv_cancel_idle())     \
  X(uv, uv_release_null, NO_PREP, CQ_EINVAL, 0, cq_uv_release(NULL))           \
  X(uv, uv_cancel_null, NO_PREP, CQ_EINVAL, 0, cq_uv_cancel(NULL))             \
  X(uv, uv_close_null, NO_PREP, CQ_EINVAL, 0, cq_uv_close(NULL, NULL))
#else
#define UV_MISUSES(X)
#endif

/*
 * Misuses this catalogue found handled wrongly when it was written, fixed
 * since; they stay as regression entries.
 *
 * - acquire_int64_max_units_of_a_held_lock_free_budget: a try of
 *   {mem: INT64_MAX} while mem (capacity 100, uncontended) had 1 unit in
 *   use was GRANTED. The lock-free path checked `used + need > cap`, which
 *   overflowed, and adding INT64_MAX to the usage word wrapped its used
 *   field to 0: the whole capacity could then be granted again. It now
 *   compares the need with what is left.
 * - uv_init_allocator_without_realloc: cq_allocator says "all three
 *   functions or none", and cq_pool_create() and cq_gpu_detect() refused an
 *   allocator without realloc, but cq_uv_init() accepted it.
 * - devices_add_repeated_id: cq_devices_add(pool, "acc", 2, {"0", "0"})
 *   succeeded, and a grant of both devices then named one GPU twice in
 *   CUDA_VISIBLE_DEVICES. Repeated ids are now refused with CQ_EINVAL.
 */
#ifdef CQT_WITH_UV
static const cq_allocator no_realloc_hook = {no_alloc, NULL, no_free, NULL};
#define FIXED_UV_MISUSES(X)                                                    \
  X(fixed, uv_init_allocator_without_realloc, NO_PREP, CQ_EINVAL, 0,           \
    uv_init_on_a_loop(F.p, &no_realloc_hook))
#else
#define FIXED_UV_MISUSES(X)
#endif
#define FIXED_MISUSES(X)                                                       \
  X(fixed, acquire_int64_max_units_of_a_held_lock_free_budget, NO_PREP,        \
    CQ_ENEVER, EXPLAINS_GRANT, try_units("mem", INT64_MAX))                    \
  X(fixed, devices_add_repeated_id, NO_PREP, CQ_EINVAL, 0,                     \
    devices_add_ids("0", "0"))                                                 \
  FIXED_UV_MISUSES(X)

#define DEFINE_MISUSE(cat, name, prep, expect, explains, expr)                 \
  static int misuse_##name(void) { return (expr); }
MISUSES(DEFINE_MISUSE)
UV_MISUSES(DEFINE_MISUSE)
FIXED_MISUSES(DEFINE_MISUSE)
#undef DEFINE_MISUSE

#define ENTRY(cat, name, prep, expect, explains, expr)                         \
  {#cat, #name, prep, misuse_##name, expect, explains},
static const struct misuse catalogue[] = {MISUSES(ENTRY) UV_MISUSES(ENTRY)
                                              FIXED_MISUSES(ENTRY)};
#undef ENTRY

#define N_MISUSES (sizeof(catalogue) / sizeof(catalogue[0]))

/* ------------------------------------------------------------------------ */
/* Running it                                                                */
/* ------------------------------------------------------------------------ */

static void test_misuse(void **state) {
  const struct misuse *m = *state;
  static struct snap before, after;
  fx_open();
  if (m->prep != NULL)
    m->prep();
  snap_take(&before);
  F.err[0] = '\0';
  int rc = m->fn();
  if (rc != m->expect)
    fail_msg("%s/%s returned %s (%d), expected %s", m->category, m->name,
             cq_err_name(rc), rc, cq_err_name(m->expect));
  snap_take(&after);
  snap_equal(m->name, &before, &after);
  if ((m->explains & EXPLAINS_REQ) && cq_req_error(RQ(V))[0] == '\0' &&
      cq_req_error(RQ(TMP))[0] == '\0')
    fail_msg("%s: the request's error says nothing", m->name);
  if ((m->explains & EXPLAINS_GRANT) && cq_grant_error(GP(IDLE))[0] == '\0')
    fail_msg("%s: the grant's error says nothing", m->name);
  if ((m->explains & EXPLAINS_SPEC) && F.err[0] == '\0')
    fail_msg("%s: the spec's error says nothing", m->name);
  if ((m->explains & EXPLAINS_LIST) && F.list.error[0] == '\0')
    fail_msg("%s: the GPU list's error says nothing", m->name);
  fx_close();
}

/* Printed for docs/RELIABILITY.md. */
static void test_report_the_catalogue(void **state) {
  (void)state;
  size_t by_cat[16] = {0};
  const char *cats[16] = {0};
  size_t n_cats = 0;
  for (size_t i = 0; i < N_MISUSES; i++) {
    size_t c = 0;
    while (c < n_cats && strcmp(cats[c], catalogue[i].category) != 0)
      c++;
    if (c == n_cats)
      cats[n_cats++] = catalogue[i].category;
    by_cat[c]++;
  }
  for (size_t c = 0; c < n_cats; c++)
    printf("  %-10s %3zu\n", cats[c], by_cat[c]);
  printf("Misuses in the catalogue: %zu\n", N_MISUSES);
}

/* The refusals that must never run a callback really did not. */
static void test_refused_submit_never_runs_its_callback(void **state) {
  (void)state;
  fx_open();
  int before = F.cb_calls;
  assert_cq_err(cq_grant_submit(F.p, GP(IDLE), RQ(Q), CQ_NEVER, count_cb),
                CQ_EPOOL);
  assert_cq_err(cq_grant_submit(F.p, GP(DB), RQ(DB), CQ_NEVER, count_cb),
                CQ_ESTATE);
  cq_req big;
  assert_cq_ok(cq_req_init(&big, F.p));
  assert_cq_ok(cq_req_add(&big, "tmp", 6));
  assert_cq_err(cq_grant_submit(F.p, GP(IDLE), &big, CQ_NEVER, count_cb),
                CQ_ENEVER);
  assert_cq_ok(cq_pool_close(F.p));
  before = F.cb_calls; /* the close failed the waiter */
  assert_cq_err(cq_grant_submit(F.p, GP(IDLE), RQ(TMP), 0, count_cb),
                CQ_ECLOSED);
  assert_int_equal(F.cb_calls, before);
  fx_close();
}

int main(void) {
  memset(name64, 'n', CQ_NAME_MAX + 1);
  memset(id96, '7', CQ_DEVICE_ID_MAX + 1);
  memset(spec_name64, 'n', CQ_NAME_MAX + 1);
  memcpy(spec_name64 + CQ_NAME_MAX + 1, "=1", 3);
  memcpy(req_value70, "db=", 3);
  memset(req_value70 + 3, '1', 70);
  assert_int_equal(unsetenv("CRONOQ_NUM_GPUS"), 0);
  assert_int_equal(unsetenv("CUDA_VISIBLE_DEVICES"), 0);
  static struct CMUnitTest tests[N_MISUSES + 2];
  static char names[N_MISUSES][96];
  size_t n = 0;
  for (size_t i = 0; i < N_MISUSES; i++) {
    snprintf(names[i], sizeof(names[i]), "%s/%s", catalogue[i].category,
             catalogue[i].name);
    struct CMUnitTest t = {names[i], test_misuse, NULL, NULL,
                           (void *)&catalogue[i]};
    tests[n++] = t;
  }
  struct CMUnitTest cb =
      cmocka_unit_test(test_refused_submit_never_runs_its_callback);
  struct CMUnitTest report = cmocka_unit_test(test_report_the_catalogue);
  tests[n++] = cb;
  tests[n++] = report;
  return _cmocka_run_group_tests("test_misuse", tests, n, NULL, NULL);
}
