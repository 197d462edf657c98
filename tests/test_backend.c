/*
 * Pools served by a backend (cronoq_backend.h): every call of the public API
 * on such a pool, on a request built for it or on a grant bound to it,
 * reaches the backend's operation with its arguments, and a grant of
 * another pool, or of none, never does (support/foreign.h); the calls the
 * core answers for every kind of pool (specs, amounts as text, cancel,
 * messages, metrics, the pool's data) work on it through those operations;
 * and a backend is refused an incomplete table.
 *
 * The backend here records each operation it is asked and answers from a
 * small table of its own: one budget ("db", 8), one class ("jobs", 2) and
 * one device pool ("gpu", 2 devices).
 */
#include "support/cqt.h"
#include "support/foreign.h"

#include "cronoq/cronoq_backend.h"

#include <stdarg.h>

#define LOG_MAX 1024

static struct {
  char log[LOG_MAX];
  int rc;         /* what the int operations return */
  int metrics_rc; /* what metrics_get returns */
  cq_pool *pool;
  void *impl;
  const cq_req *last_req;
  const cq_grant *last_grant;
  cq_grant_cb last_cb;
  int64_t last_deadline;
  int last_status;
  int busy;        /* what grant_is_idle says: 1, the grant waits or holds */
  int waits;       /* what grant_is_held says: 1, the grant waits or is idle */
  char detail[96]; /* what last_error says: the last conflict's values */
} rec;

#if defined(__GNUC__)
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#endif
static void note(const char *fmt, ...) {
  size_t used = strlen(rec.log);
  if (used > 0 && used + 1 < LOG_MAX)
    rec.log[used++] = ' ';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rec.log + used, LOG_MAX - used, fmt, ap);
  va_end(ap);
}

static void expect_log(const char *want) {
  assert_string_equal(rec.log, want);
  rec.log[0] = '\0';
}

/* What the backend keeps in a request's area: the items as asked. */
struct breq {
  int n;
  struct {
    char name[CQ_NAME_MAX + 1];
    int64_t amount;
    int mode;
  } items[4];
};
_Static_assert(sizeof(struct breq) <= CQ_BACKEND_REQ_BYTES,
               "the backend's request fits its area");

static struct breq *breq_of(cq_req *r) { return cq_backend_req_area(r); }

static int b_close(cq_pool *p) {
  note("close%s", p == rec.pool ? "" : "?");
  return rec.rc;
}
static int b_destroy(cq_pool *p) {
  note("destroy%s", cq_backend_impl(p) == rec.impl ? "" : "?");
  return rec.rc;
}
static int b_expire(cq_pool *p, int64_t *next) {
  (void)p;
  if (next != NULL)
    *next = 42;
  note("expire");
  return rec.rc;
}
static int b_stats_get(cq_pool *p, cq_pool_stats *out) {
  (void)p;
  memset(out, 0, sizeof(*out));
  out->waiting = 3;
  out->backfilled = 5;
  note("stats_get");
  return rec.rc;
}
static int fill(const char *name, cq_resource_stats *out);

static int b_budget_add(cq_pool *p, const char *name, int64_t cap, int kind,
                        unsigned flags) {
  (void)p;
  note("budget_add(%s,%lld,%d,%u)", name, (long long)cap, kind, flags);
  /* A name of the table accepts only what it is (as a shared backend
   * does); the others are added. */
  cq_resource_stats st;
  rec.detail[0] = '\0';
  if (rec.rc == 0 && fill(name, &st) == 0 &&
      (st.kind != kind || st.capacity != cap)) {
    snprintf(rec.detail, sizeof(rec.detail), "%s is %lld here, not %lld", name,
             (long long)st.capacity, (long long)cap);
    return CQ_EEXIST;
  }
  return rec.rc;
}
static int b_set_capacity(cq_pool *p, const char *name, int64_t cap, int kind) {
  (void)p;
  note("set_capacity(%s,%lld,%d)", name, (long long)cap, kind);
  return rec.rc;
}
static int b_resource_remove(cq_pool *p, const char *name) {
  (void)p;
  note("remove(%s)", name);
  return rec.rc;
}

/* The backend's resources, as snapshots. */
static int fill(const char *name, cq_resource_stats *out) {
  memset(out, 0, sizeof(*out));
  snprintf(out->name, sizeof(out->name), "%s", name);
  if (strcmp(name, "db") == 0) {
    out->kind = CQ_KIND_BUDGET;
    out->capacity = 8;
    out->in_use = 2;
  } else if (strcmp(name, "jobs") == 0) {
    out->kind = CQ_KIND_CLASS;
    out->capacity = 2;
  } else if (strcmp(name, "gpu") == 0) {
    out->kind = CQ_KIND_DEVICES;
    out->capacity = 2000;
    out->in_use = 500;
    out->devices = out->online = 2;
  } else {
    return CQ_ENOENT;
  }
  out->wait.count = 1;
  for (int b = 0; b < CQ_WAIT_BUCKETS; b++)
    out->wait.below[b] = 1;
  return 0;
}

static int b_resource_stats_get(cq_pool *p, const char *name,
                                cq_resource_stats *out) {
  (void)p;
  note("resource_stats_get(%s)", name);
  return fill(name, out);
}
static int b_pool_snapshot(cq_pool *p, cq_resource_stats *out, size_t cap,
                           size_t *count) {
  (void)p;
  static const char *const names[] = {"gpu", "db", "jobs"};
  for (size_t i = 0; i < 3 && i < cap; i++)
    fill(names[i], &out[i]);
  *count = 3;
  note("pool_snapshot(%zu)", cap);
  return 0;
}
static int b_devices_add(cq_pool *p, const char *name, size_t count,
                         const char *const *ids) {
  (void)p;
  note("devices_add(%s,%zu,%s)", name, count, ids != NULL ? ids[0] : "-");
  return rec.rc;
}
static int b_device_stats_get(cq_pool *p, const char *name, uint32_t index,
                              cq_device_stats *out) {
  (void)p;
  memset(out, 0, sizeof(*out));
  snprintf(out->id, sizeof(out->id), "%s-%u", name, index);
  out->index = index;
  out->online = 1;
  out->used_milli = index == 0 ? 500 : 0;
  note("device_stats_get(%s,%u)", name, index);
  return 0;
}
static int b_device_set_online(cq_pool *p, const char *name, uint32_t index,
                               int online) {
  (void)p;
  note("set_online(%s,%u,%d)", name, index, online);
  return rec.rc;
}
static int b_req_init(cq_req *req, cq_pool *p) {
  note("req_init%s", cq_backend_req_pool(req) == p ? "" : "?");
  memset(breq_of(req), 0, sizeof(struct breq));
  return 0;
}
static int b_req_add(cq_req *req, const char *resource, int64_t amount,
                     int mode) {
  note("req_add(%s,%lld,%d)", resource, (long long)amount, mode);
  if (rec.rc != 0) {
    snprintf(cq_backend_req_msg(req), CQ_BACKEND_MSG_MAX, "refused %s",
             resource);
    return rec.rc;
  }
  struct breq *b = breq_of(req);
  if (b->n == 4)
    return CQ_ETOOMANY;
  snprintf(b->items[b->n].name, sizeof(b->items[b->n].name), "%s", resource);
  b->items[b->n].amount = amount;
  b->items[b->n].mode = mode;
  b->n++;
  return 0;
}
static int b_req_set_hold_limit(cq_req *req, int64_t limit_ms) {
  (void)req;
  note("hold_limit(%lld)", (long long)limit_ms);
  return rec.rc;
}
static size_t b_req_count(const cq_req *req) {
  note("req_count");
  return (size_t)((const struct breq *)cq_backend_req_area_c(req))->n;
}
static int b_grant_try(cq_pool *p, cq_grant *g, const cq_req *req) {
  (void)p;
  rec.last_grant = g;
  rec.last_req = req;
  note("try%s", cq_backend_grant_pool(g) == p ? "" : "?");
  snprintf(cq_backend_grant_msg(g), CQ_BACKEND_MSG_MAX, "busy here");
  return rec.rc;
}
static int b_grant_acquire(cq_pool *p, cq_grant *g, const cq_req *req,
                           int64_t deadline) {
  (void)p;
  rec.last_grant = g;
  rec.last_req = req;
  rec.last_deadline = deadline;
  note("acquire");
  return rec.rc;
}
static int b_grant_submit(cq_pool *p, cq_grant *g, const cq_req *req,
                          int64_t deadline, cq_grant_cb cb) {
  (void)p;
  rec.last_grant = g;
  rec.last_req = req;
  rec.last_deadline = deadline;
  rec.last_cb = cb;
  note("submit");
  return rec.rc;
}
/* The operations on a grant and a pool mark with '?' a grant that is not
 * this pool's: the core must never pass one. */
static const char *foreign(cq_pool *p, const cq_grant *g) {
  return cq_backend_grant_pool(g) == p ? "" : "?";
}
static int b_grant_abort(cq_pool *p, cq_grant *g, int status) {
  rec.last_grant = g;
  rec.last_status = status;
  note("abort(%s)%s", cq_err_name(status), foreign(p, g));
  return rec.rc;
}
static int b_grant_release(cq_pool *p, cq_grant *g) {
  rec.last_grant = g;
  note("release%s", foreign(p, g));
  return rec.rc;
}
static int b_grant_release_part(cq_pool *p, cq_grant *g, const char *res,
                                int64_t amount) {
  note("release_part(%s,%lld)%s", res, (long long)amount, foreign(p, g));
  return rec.rc;
}
static int b_grant_release_device(cq_pool *p, cq_grant *g, const char *res,
                                  uint32_t index, int64_t milli) {
  note("release_device(%s,%u,%lld)%s", res, index, (long long)milli,
       foreign(p, g));
  return rec.rc;
}
static size_t b_grant_devices(const cq_grant *g, const char *res,
                              uint32_t *indices, size_t cap) {
  (void)g;
  note("devices(%s)", res != NULL ? res : "-");
  if (cap > 0)
    indices[0] = 1;
  return 1;
}
static int b_grant_cuda_visible(const cq_grant *g, const char *res, char *buf,
                                size_t len) {
  (void)g;
  (void)res;
  note("cuda_visible");
  snprintf(buf, len, "GPU-x");
  return 0;
}
static int64_t b_grant_held(const cq_grant *g, const char *res) {
  (void)g;
  note("held(%s)", res);
  return 7;
}
static int b_grant_is_held(const cq_grant *g) {
  (void)g;
  note("is_held");
  return !rec.waits;
}
static int b_grant_is_idle(const cq_grant *g) {
  (void)g;
  note("is_idle");
  return !rec.busy;
}
static int b_req_headroom(cq_pool *p, const cq_req *req, int64_t *copies) {
  (void)p;
  (void)req;
  *copies = 9;
  note("headroom");
  return rec.rc;
}
static int b_tasks_validate(cq_pool *p, const cq_task *tasks, size_t n,
                            cq_problem_fn fn, void *arg) {
  (void)p;
  (void)tasks;
  (void)fn;
  (void)arg;
  note("validate(%zu)", n);
  return rec.rc;
}
static int b_pool_room(cq_pool *p, const char *job_class, cq_room *out) {
  (void)p;
  memset(out, 0, sizeof(*out));
  out->kind = CQ_ROOM_UNLIMITED;
  note("room(%s)", job_class != NULL ? job_class : "-");
  return rec.rc;
}

static const char *b_last_error(const cq_pool *p) {
  (void)p;
  return rec.detail;
}

static int b_metrics_get(cq_pool *p, cq_backend_metric *out, size_t cap,
                         size_t *count) {
  (void)p;
  note("metrics_get");
  assert_true(cap >= 2);
  out[0] = (cq_backend_metric){"recorder_calls", "Calls the recorder answered.",
                               1, 42};
  out[1] = (cq_backend_metric){"recorder_ratio", "A gauge of the recorder's.",
                               0, 0.25};
  *count = 2;
  return rec.metrics_rc;
}

static const cq_backend_ops ops = {
    .size = sizeof(cq_backend_ops),
    .name = "recorder",
    .close = b_close,
    .destroy = b_destroy,
    .expire = b_expire,
    .stats_get = b_stats_get,
    .budget_add = b_budget_add,
    .set_capacity = b_set_capacity,
    .resource_remove = b_resource_remove,
    .resource_stats_get = b_resource_stats_get,
    .pool_snapshot = b_pool_snapshot,
    .devices_add = b_devices_add,
    .device_stats_get = b_device_stats_get,
    .device_set_online = b_device_set_online,
    .req_init = b_req_init,
    .req_add = b_req_add,
    .req_set_hold_limit = b_req_set_hold_limit,
    .req_count = b_req_count,
    .grant_try = b_grant_try,
    .grant_acquire = b_grant_acquire,
    .grant_submit = b_grant_submit,
    .grant_abort = b_grant_abort,
    .grant_release = b_grant_release,
    .grant_release_part = b_grant_release_part,
    .grant_release_device = b_grant_release_device,
    .grant_devices = b_grant_devices,
    .grant_cuda_visible = b_grant_cuda_visible,
    .grant_held = b_grant_held,
    .grant_is_held = b_grant_is_held,
    .grant_is_idle = b_grant_is_idle,
    .req_headroom = b_req_headroom,
    .tasks_validate = b_tasks_validate,
    .pool_room = b_pool_room,
    .last_error = b_last_error,
    .metrics_get = b_metrics_get,
};

static int impl_token;
static int data_token;

static int setup(void **state) {
  (void)state;
  memset(&rec, 0, sizeof(rec));
  rec.impl = &impl_token;
  return cq_backend_pool_create(&rec.pool, &ops, rec.impl, &data_token);
}

static int teardown(void **state) {
  (void)state;
  rec.rc = 0;
  rec.log[0] = '\0';
  assert_cq_ok(cq_pool_destroy(rec.pool));
  assert_string_equal(rec.log, "destroy");
  return 0;
}

static void cb(cq_grant *g, int status) {
  (void)g;
  (void)status;
}

static void test_every_pool_call_reaches_the_backend(void **state) {
  (void)state;
  cq_pool *p = rec.pool;
  assert_ptr_equal(cq_backend_impl(p), &impl_token);
  assert_ptr_equal(cq_backend_ops_of(p), &ops);
  assert_ptr_equal(cq_pool_data(p), &data_token);
  assert_cq_ok(cq_budget_add(p, "db", 8));
  assert_cq_ok(cq_budget_add_ex(p, "mem", 64, CQ_BUDGET_LONE));
  assert_cq_ok(cq_class_add(p, "jobs", 2));
  assert_cq_ok(cq_budget_set_capacity(p, "db", 9));
  assert_cq_ok(cq_class_set_max(p, "jobs", 3));
  const char *ids[] = {"GPU-a", "GPU-b"};
  assert_cq_ok(cq_devices_add(p, "gpu", 2, ids));
  assert_cq_ok(cq_device_set_online(p, "gpu", 1, 0));
  assert_cq_ok(cq_resource_remove(p, "mem"));
  expect_log("budget_add(db,8,1,0) budget_add(mem,64,1,1) "
             "budget_add(jobs,2,3,0) set_capacity(db,9,1) "
             "set_capacity(jobs,3,3) devices_add(gpu,2,GPU-a) "
             "set_online(gpu,1,0) remove(mem)");
  cq_pool_stats ps;
  assert_cq_ok(cq_pool_stats_get(p, &ps));
  assert_int_equal(ps.backfilled, 5);
  int64_t next = 0;
  assert_cq_ok(cq_pool_expire(p, &next));
  assert_int_equal(next, 42);
  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(p, "db", &st));
  assert_int_equal(st.capacity, 8);
  cq_device_stats ds;
  assert_cq_ok(cq_device_stats_get(p, "gpu", 0, &ds));
  cq_room room;
  assert_cq_ok(cq_pool_room(p, "jobs", &room));
  assert_int_equal(room.kind, CQ_ROOM_UNLIMITED);
  assert_cq_ok(cq_pool_close(p));
  expect_log("stats_get expire resource_stats_get(db) device_stats_get(gpu,0) "
             "room(jobs) close");
  /* A backend's refusal comes back as it is. */
  rec.rc = CQ_EEXIST;
  assert_cq_err(cq_budget_add(p, "db", 8), CQ_EEXIST);
  rec.rc = 0;
  rec.log[0] = '\0';
}

static void test_every_request_and_grant_call_reaches_the_backend(void **s) {
  (void)s;
  cq_pool *p = rec.pool;
  cq_req r;
  assert_cq_ok(cq_req_init(&r, p));
  assert_ptr_equal(cq_backend_req_pool(&r), p);
  assert_cq_ok(cq_req_add(&r, "db", 2));
  assert_cq_ok(cq_req_add_fraction(&r, "gpu", 500));
  assert_cq_ok(cq_req_set_class(&r, "jobs"));
  assert_cq_ok(cq_req_set_hold_limit(&r, 1000));
  assert_int_equal(cq_req_count(&r), 3);
  expect_log("req_init req_add(db,2,0) req_add(gpu,500,1) req_add(jobs,1,3) "
             "hold_limit(1000) req_count");
  cq_grant g;
  cq_grant_init(&g);
  assert_null(cq_backend_grant_pool(&g));
  assert_int_equal(cq_grant_is_held(&g), 0); /* idle: no backend asked */
  assert_string_equal(rec.log, "");
  assert_cq_ok(cq_grant_try(p, &g, &r));
  assert_ptr_equal(rec.last_grant, &g);
  assert_ptr_equal(rec.last_req, &r);
  assert_ptr_equal(cq_backend_grant_pool(&g), p);
  assert_string_equal(cq_grant_error(&g), "busy here");
  assert_int_equal(cq_grant_is_held(&g), 1);
  assert_int_equal(cq_grant_held(&g, "db"), 7);
  uint32_t idx[2];
  assert_int_equal(cq_grant_devices(&g, "gpu", idx, 2), 1);
  assert_int_equal(idx[0], 1);
  char vis[32];
  assert_cq_ok(cq_grant_cuda_visible(&g, NULL, vis, sizeof(vis)));
  assert_string_equal(vis, "GPU-x");
  assert_cq_ok(cq_grant_release_part(p, &g, "db", 1));
  assert_cq_ok(cq_grant_release_device(p, &g, "gpu", 1, 250));
  assert_cq_ok(cq_grant_release(p, &g));
  expect_log("try is_held held(db) devices(gpu) cuda_visible "
             "release_part(db,1) release_device(gpu,1,250) release");
  assert_cq_ok(cq_grant_acquire(p, &g, &r, 77));
  assert_int_equal(rec.last_deadline, 77);
  assert_cq_ok(cq_grant_submit(p, &g, &r, 88, cb));
  assert_ptr_equal(rec.last_cb, cb);
  assert_cq_ok(cq_grant_cancel(p, &g));
  assert_cq_ok(cq_grant_abort(p, &g, CQ_ETIMEDOUT));
  int64_t copies = 0;
  assert_cq_ok(cq_req_headroom(p, &r, &copies));
  assert_int_equal(copies, 9);
  cq_task t = {"t", &r};
  assert_cq_ok(cq_tasks_validate(p, &t, 1, NULL, NULL));
  /* A grant bound to the pool before: asked whether it is idle first. */
  expect_log("is_idle acquire is_idle submit abort(ECANCELED) "
             "abort(ETIMEDOUT) headroom validate(1)");
  /* What the core checks first never reaches the backend. */
  assert_cq_err(cq_grant_submit(p, &g, &r, 0, NULL), CQ_EINVAL);
  assert_cq_err(cq_grant_try(p, NULL, &r), CQ_EINVAL);
  assert_string_equal(rec.log, "");
}

/* Specs, amounts as text and messages are the core's, for every pool. */
static void test_specs_and_messages_work_on_a_backend_pool(void **state) {
  (void)state;
  cq_pool *p = rec.pool;
  char err[160];
  assert_cq_ok(cq_pool_add_spec(p, "tpu:devices=2,licence=3,etl:class=4", NULL,
                                err, sizeof(err)));
  /* Every name is checked first, then everything added. */
  expect_log("resource_stats_get(tpu) resource_stats_get(licence) "
             "resource_stats_get(etl) devices_add(tpu,2,-) "
             "budget_add(licence,3,1,0) budget_add(etl,4,3,0)");
  /* A name the pool has already is refused before anything is added. */
  assert_cq_err(cq_pool_add_spec(p, "x=1,db=2", NULL, err, sizeof(err)),
                CQ_EEXIST);
  assert_non_null(strstr(err, "\"db\" already exists"));
  expect_log("resource_stats_get(x) resource_stats_get(db)");
  cq_req r;
  assert_cq_ok(cq_req_init(&r, p));
  assert_cq_ok(cq_req_parse(&r, "gpu=0.25,db=2,class=jobs"));
  expect_log("req_init resource_stats_get(gpu) req_add(gpu,250,1) "
             "resource_stats_get(db) req_add(db,2,0) req_add(jobs,1,3)");
  assert_int_equal(breq_of(&r)->n, 3);
  /* A failed parse leaves the request as it was, the backend's area too. */
  rec.rc = CQ_ERANGE;
  assert_cq_err(cq_req_parse(&r, "db=1"), CQ_ERANGE);
  assert_int_equal(breq_of(&r)->n, 3);
  assert_non_null(strstr(cq_req_error(&r), "refused db"));
  rec.rc = 0;
  assert_cq_err(cq_req_add_str(&r, "nosuch", "0.5"), CQ_ENOENT);
  assert_string_equal(cq_req_error(&r),
                      "request asks unknown resource \"nosuch\"");
  rec.log[0] = '\0';
}

/* On a shared backend every item of a spec is declared, names the pool has
 * included (the backend accepts a match), and a failed item undoes
 * nothing: what was declared may be another process's already. */
static void
test_a_shared_backend_is_asked_every_spec_item_and_keeps_them(void **state) {
  (void)state;
  static cq_backend_ops shared; /* must outlive its pool */
  shared = ops;
  shared.flags = CQ_BACKEND_SHARED;
  cq_pool *p = NULL;
  assert_cq_ok(cq_backend_pool_create(&p, &shared, rec.impl, NULL));
  assert_ptr_equal(cq_backend_ops_of(p), &shared);
  char err[256];
  assert_cq_ok(
      cq_pool_add_spec(p, "db=8,x=1,jobs:class=2", NULL, err, sizeof(err)));
  expect_log("budget_add(db,8,1,0) budget_add(x,1,1,0) budget_add(jobs,2,3,0)");
  assert_cq_err(cq_pool_add_spec(p, "y=1,db=9,z=2", NULL, err, sizeof(err)),
                CQ_EEXIST);
  expect_log("budget_add(y,1,1,0) budget_add(db,9,1,0)");
  /* The backend's own detail, in place of the code's text. */
  assert_string_equal(err, "resource spec: cannot add \"db\" (item at column "
                           "5): db is 8 here, not 9");
  /* The syntax is still checked whole before anything is declared. */
  assert_cq_err(cq_pool_add_spec(p, "y=1,db=", NULL, err, sizeof(err)),
                CQ_EPARSE);
  assert_cq_err(cq_pool_add_spec(p, "y=1,y=1", NULL, err, sizeof(err)),
                CQ_EEXIST);
  expect_log("");
  assert_cq_ok(cq_pool_destroy(p));
  expect_log("destroy");
}

/* A backend without last_error (an optional operation) is accepted, and a
 * failed declaration in a spec is explained with the code's text. */
static void test_a_backend_without_a_detail_gets_the_codes_text(void **state) {
  (void)state;
  static cq_backend_ops plain; /* must outlive its pool */
  plain = ops;
  plain.flags = CQ_BACKEND_SHARED;
  plain.last_error = NULL;
  cq_pool *p = NULL;
  assert_cq_ok(cq_backend_pool_create(&p, &plain, rec.impl, NULL));
  char err[256];
  assert_cq_err(cq_pool_add_spec(p, "db=9", NULL, err, sizeof(err)), CQ_EEXIST);
  assert_string_equal(err, "resource spec: cannot add \"db\" (item at column "
                           "1): name already in use");
  /* An empty detail is no detail either. */
  plain.last_error = b_last_error;
  rec.rc = CQ_ERANGE;
  assert_cq_err(cq_pool_add_spec(p, "x=1", NULL, err, sizeof(err)), CQ_ERANGE);
  assert_string_equal(err, "resource spec: cannot add \"x\" (item at column "
                           "1): value out of range");
  rec.rc = 0;
  rec.log[0] = '\0';
  assert_cq_ok(cq_pool_destroy(p));
  rec.log[0] = '\0';
}

static int collect(const char *text, size_t len, void *arg) {
  char **buf = arg;
  size_t have = *buf != NULL ? strlen(*buf) : 0;
  char *grown = realloc(*buf, have + len + 1);
  assert_non_null(grown);
  memcpy(grown + have, text, len);
  grown[have + len] = '\0';
  *buf = grown;
  return 0;
}

static void test_metrics_of_a_backend_pool_come_from_its_snapshots(void **s) {
  (void)s;
  char *text = NULL;
  assert_cq_ok(cq_pool_write_metrics(rec.pool, collect, &text));
  expect_log("stats_get pool_snapshot(0) pool_snapshot(3) "
             "device_stats_get(gpu,0) device_stats_get(gpu,1) metrics_get");
  assert_non_null(strstr(text, "cronoq_pool_waiting 3\n"));
  assert_non_null(strstr(text, "cronoq_in_use{resource=\"db\"} 2\n"));
  assert_non_null(strstr(text, "cronoq_in_use{resource=\"gpu\"} 0.5\n"));
  assert_non_null(strstr(
      text, "cronoq_device_in_use{resource=\"gpu\",device=\"gpu-0\"} 0.5\n"));
  assert_non_null(strstr(text, "cronoq_class_capacity{class=\"jobs\"} 2\n"));
  free(text);
}

/* A backend's own figures (metrics_get) come after the pool's, each a
 * family with its help and type, counters with _total; a backend without
 * them has none, and one whose figures fail fails the metrics, which
 * then write nothing. */
static void
test_a_backends_own_figures_follow_the_pools_in_the_metrics(void **s) {
  (void)s;
  char *text = NULL;
  assert_cq_ok(cq_pool_write_metrics(rec.pool, collect, &text));
  const char *own =
      "# HELP cronoq_recorder_calls_total Calls the recorder answered.\n"
      "# TYPE cronoq_recorder_calls_total counter\n"
      "cronoq_recorder_calls_total 42\n"
      "# HELP cronoq_recorder_ratio A gauge of the recorder's.\n"
      "# TYPE cronoq_recorder_ratio gauge\n"
      "cronoq_recorder_ratio 0.25\n";
  const char *at = strstr(text, own);
  assert_non_null(at);
  assert_string_equal(at, own); /* last */
  assert_true(strstr(text, "cronoq_class_capacity") < at);
  free(text);
  text = NULL;

  static cq_backend_ops plain; /* must outlive its pool */
  plain = ops;
  plain.metrics_get = NULL;
  cq_pool *p = NULL;
  assert_cq_ok(cq_backend_pool_create(&p, &plain, rec.impl, NULL));
  assert_cq_ok(cq_pool_write_metrics(p, collect, &text));
  assert_null(strstr(text, "cronoq_recorder_"));
  assert_non_null(strstr(text, "cronoq_class_capacity{class=\"jobs\"} 2\n"));
  free(text);
  text = NULL;
  assert_cq_ok(cq_pool_destroy(p));

  rec.metrics_rc = CQ_EUNAVAILABLE;
  rec.log[0] = '\0';
  assert_cq_err(cq_pool_write_metrics(rec.pool, collect, &text),
                CQ_EUNAVAILABLE);
  assert_null(text);
  assert_non_null(strstr(rec.log, "metrics_get"));
  rec.log[0] = '\0';
}

static int never_called(cq_pool *p) {
  (void)p;
  return 0;
}

/* A grant bound to the backend pool that waits or holds there cannot be
 * taken over by an acquire on any pool, of either kind, its own included:
 * the core asks the backend, refuses with CQ_ESTATE and leaves the grant
 * bound as it was. Once the backend says it is idle, another pool may
 * bind it. */
static void
test_a_grant_busy_in_a_backend_pool_is_refused_by_any_acquire(void **state) {
  (void)state;
  cq_pool *p = rec.pool, *local, *other;
  assert_cq_ok(cq_pool_create(&local, NULL));
  assert_cq_ok(cq_budget_add(local, "db", 4));
  assert_cq_ok(cq_backend_pool_create(&other, &ops, rec.impl, NULL));
  cq_req r, rl, ro;
  assert_cq_ok(cq_req_init(&r, p));
  assert_cq_ok(cq_req_init(&rl, local));
  assert_cq_ok(cq_req_add(&rl, "db", 1));
  assert_cq_ok(cq_req_init(&ro, other));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &r));
  rec.busy = 1;
  rec.log[0] = '\0';
  assert_cq_err(cq_grant_try(local, &g, &rl), CQ_ESTATE);
  assert_cq_err(cq_grant_acquire(local, &g, &rl, 0), CQ_ESTATE);
  assert_cq_err(cq_grant_submit(local, &g, &rl, CQ_NEVER, cb), CQ_ESTATE);
  assert_cq_err(cq_grant_try(other, &g, &ro), CQ_ESTATE);
  assert_cq_err(cq_grant_submit(other, &g, &ro, CQ_NEVER, cb), CQ_ESTATE);
  expect_log("is_idle is_idle is_idle is_idle is_idle");
  assert_ptr_equal(cq_backend_grant_pool(&g), p);
  assert_string_equal(cq_grant_error(&g), "busy here");
  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(local, "db", &st));
  assert_int_equal(st.in_use, 0);
  /* Its own pool asks too: the backend's background work may be writing
   * the grant. */
  assert_cq_err(cq_grant_try(p, &g, &r), CQ_ESTATE);
  expect_log("is_idle");
  rec.busy = 0;
  assert_cq_ok(cq_grant_try(local, &g, &rl));
  expect_log("is_idle");
  assert_ptr_equal(cq_backend_grant_pool(&g), local);
  assert_cq_ok(cq_grant_release(local, &g));
  /* And the other way: a grant waiting in an in-process pool is refused
   * by the backend pool, which is not asked. */
  cq_grant h;
  cq_grant_init(&h);
  cq_req all;
  assert_cq_ok(cq_req_init(&all, local));
  assert_cq_ok(cq_req_add(&all, "db", 4));
  assert_cq_ok(cq_grant_try(local, &h, &all));
  assert_cq_ok(cq_grant_submit(local, &g, &rl, CQ_NEVER, cb));
  assert_cq_err(cq_grant_try(p, &g, &r), CQ_ESTATE);
  assert_cq_err(cq_grant_try(other, &h, &ro), CQ_ESTATE);
  expect_log("");
  assert_ptr_equal(cq_backend_grant_pool(&g), local);
  assert_cq_ok(cq_grant_cancel(local, &g));
  assert_cq_ok(cq_grant_release(local, &h));
  rec.log[0] = '\0';
  assert_cq_ok(cq_pool_destroy(other));
  rec.log[0] = '\0';
  assert_cq_ok(cq_pool_destroy(local));
}

/* An in-process grant, held or waiting, or a grant bound to no pool, passed
 * with the backend's pool never reaches the backend: the core answers as
 * another in-process pool does (support/foreign.h), and the grant keeps
 * what it holds and its place. Before, the backend was handed it, and a
 * backend that reads its state from its area would say CQ_ESTATE, "not
 * held", of a grant that held units. */
static void
test_a_grant_of_another_pool_is_answered_without_the_backend(void **state) {
  (void)state;
  cq_pool *local, *other;
  assert_cq_ok(cq_pool_create(&local, NULL));
  assert_cq_ok(cq_pool_create(&other, NULL));
  assert_cq_ok(cq_budget_add(local, "db", 4));
  struct cqt_grants k;
  cqt_grants_start(&k, local, "db:1", "db:4"); /* held lock-free */
  rec.log[0] = '\0';
  cq_pool *const elsewhere[] = {rec.pool, other};
  cqt_expect_foreign(elsewhere, 2, &k.held, CQT_HELD);
  cqt_expect_foreign(elsewhere, 2, &k.waiting, CQT_WAITING);
  cqt_expect_foreign(elsewhere, 2, &k.unbound, CQT_IDLE);
  /* Nor do the calls that take only a grant. */
  assert_int_equal(cq_grant_is_held(&k.unbound), 0);
  assert_int_equal(cq_grant_held(&k.unbound, "db"), 0);
  expect_log("");

  /* Nothing changed: the grant holds, the waiter waits, in their pool,
   * where they end once each. */
  cqt_grants_unchanged(&k);
  assert_int_equal(cqt_budget(local, "db").in_use, 1);
  assert_int_equal(cqt_waiting(local), 1);
  cqt_grants_end(&k, local);
  /* Released, it is idle everywhere. */
  cqt_expect_foreign(elsewhere, 2, &k.held, CQT_IDLE);
  expect_log("");
  assert_int_equal(cqt_budget(local, "db").in_use, 0);
  assert_cq_ok(cq_pool_destroy(other));
  assert_cq_ok(cq_pool_destroy(local));
}

/* And the other way: the backend's grant passed with an in-process pool,
 * or with another pool of the backend, is answered as a grant of another
 * pool, by the state the backend gives it (grant_is_held, grant_is_idle);
 * no operation of either pool is asked to release or abort it. */
static void test_a_backend_grant_passed_to_another_pool_is_answered_as_foreign(
    void **state) {
  (void)state;
  cq_pool *p = rec.pool, *local, *other;
  assert_cq_ok(cq_pool_create(&local, NULL));
  assert_cq_ok(cq_backend_pool_create(&other, &ops, rec.impl, NULL));
  cq_req r;
  assert_cq_ok(cq_req_init(&r, p));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &r));
  rec.log[0] = '\0';
  cq_pool *const elsewhere[] = {local, other};
  rec.busy = 1; /* held */
  cqt_expect_foreign(elsewhere, 2, &g, CQT_HELD);
  rec.waits = 1; /* waiting */
  cqt_expect_foreign(elsewhere, 2, &g, CQT_WAITING);
  rec.busy = 0; /* idle */
  cqt_expect_foreign(elsewhere, 2, &g, CQT_IDLE);
  /* Only the grant's own backend was asked, and only what state it is in. */
  for (char *w = strtok(rec.log, " "); w != NULL; w = strtok(NULL, " "))
    if (strcmp(w, "is_held") != 0 && strcmp(w, "is_idle") != 0)
      fail_msg("the backend was asked %s", w);
  rec.log[0] = '\0';
  /* In its own pool the backend decides, as before. */
  rec.waits = 0;
  assert_cq_ok(cq_grant_release(p, &g));
  expect_log("release");
  assert_cq_ok(cq_pool_destroy(other));
  rec.log[0] = '\0';
  assert_cq_ok(cq_pool_destroy(local));
}

static void test_an_incomplete_backend_is_refused(void **state) {
  (void)state;
  cq_backend_ops partial = ops;
  partial.grant_abort = NULL;
  cq_pool *p = NULL;
  assert_cq_err(cq_backend_pool_create(&p, &partial, NULL, NULL), CQ_EINVAL);
  cq_backend_ops other = ops;
  other.size = sizeof(ops) - sizeof(void *);
  assert_cq_err(cq_backend_pool_create(&p, &other, NULL, NULL), CQ_EINVAL);
  assert_cq_err(cq_backend_pool_create(NULL, &ops, NULL, NULL), CQ_EINVAL);
  cq_backend_ops unknown = ops;
  unknown.flags = 1u << 7;
  assert_cq_err(cq_backend_pool_create(&p, &unknown, NULL, NULL), CQ_EINVAL);
  assert_null(p);
  (void)never_called;
  /* An in-process pool has no backend. */
  cq_pool *local;
  assert_cq_ok(cq_pool_create(&local, NULL));
  assert_null(cq_backend_impl(local));
  assert_null(cq_backend_ops_of(local));
  assert_null(cq_backend_ops_of(NULL));
  assert_cq_ok(cq_pool_destroy(local));
  /* A backend that refuses to be destroyed keeps its pool. */
  rec.rc = CQ_EINUSE;
  assert_cq_err(cq_pool_destroy(rec.pool), CQ_EINUSE);
  rec.rc = 0;
  rec.log[0] = '\0';
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_every_pool_call_reaches_the_backend),
      T(test_every_request_and_grant_call_reaches_the_backend),
      T(test_specs_and_messages_work_on_a_backend_pool),
      T(test_a_shared_backend_is_asked_every_spec_item_and_keeps_them),
      T(test_a_backend_without_a_detail_gets_the_codes_text),
      T(test_metrics_of_a_backend_pool_come_from_its_snapshots),
      T(test_a_backends_own_figures_follow_the_pools_in_the_metrics),
      T(test_a_grant_busy_in_a_backend_pool_is_refused_by_any_acquire),
      T(test_a_grant_of_another_pool_is_answered_without_the_backend),
      T(test_a_backend_grant_passed_to_another_pool_is_answered_as_foreign),
      T(test_an_incomplete_backend_is_refused),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
