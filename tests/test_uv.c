/*
 * The libuv adapter: callbacks on the loop thread, releases from
 * other threads, no lost wake-ups, timeouts, cancels from each thread,
 * close with waiters, re-entrant callbacks, two loops on one pool, a loop
 * that closes cleanly (uv_loop_close succeeds; ASan and valgrind check the
 * leaks), and every refusal of every adapter call changing nothing.
 */
#include "support/cqt.h"

#include "cronoq/cronoq_uv.h"

#include <stdatomic.h>

static cq_pool *pool;
static uv_loop_t loop;
static cq_uv *adapter;
static uv_thread_t loop_thread;

static int setup(void **state) {
  (void)state;
  if (cq_pool_create(&pool, NULL) != 0 || uv_loop_init(&loop) != 0)
    return -1;
  loop_thread = uv_thread_self();
  return cq_uv_init(&adapter, &loop, pool, NULL);
}

static int closed_count;
static void on_closed(cq_uv *uv) {
  (void)uv;
  closed_count++;
}

/* Close the adapter (if a test has not) and the loop: it must close. */
static int teardown(void **state) {
  (void)state;
  if (adapter != NULL) {
    int rc = cq_uv_close(adapter, on_closed);
    assert_true(rc == 0 || rc == CQ_ECLOSED);
  }
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0); /* nothing left behind */
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(pool, &st));
  assert_int_equal(st.waiting, 0);
  assert_cq_ok(cq_pool_destroy(pool));
  return 0;
}

struct outcome {
  int calls;
  int status;
  int on_loop_thread;
  int64_t at;
};

static void record(cq_uv_req *r, int status) {
  struct outcome *o = r->data;
  uv_thread_t self = uv_thread_self();
  o->calls++;
  o->status = status;
  o->on_loop_thread = uv_thread_equal(&self, &loop_thread);
  o->at = cq_now();
}

static void hold(cq_grant *g, cq_req *r, const char *spec) {
  cqt_req(r, pool, spec);
  cq_grant_init(g);
  assert_cq_ok(cq_grant_try(pool, g, r));
}

struct releaser {
  cq_grant *grant;
  int delay_ms;
};

static void release_later(void *arg) {
  struct releaser *rl = arg;
  cqt_sleep_ms(rl->delay_ms);
  assert_cq_ok(cq_grant_release(pool, rl->grant));
}

/* The callback runs on the loop thread, also when a release on another
 * thread decides the outcome. */
static void test_callback_runs_on_the_loop_thread(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cqt_req(&r, pool, "b:1");
  cq_uv_req now, later;
  cq_uv_req_init(&now);
  cq_uv_req_init(&later);
  struct outcome o1 = {0, 1, 0, 0}, o2 = {0, 1, 0, 0};
  now.data = &o1;
  later.data = &o2;
  assert_cq_ok(cq_uv_acquire(adapter, &now, &r, CQ_NEVER, record));
  assert_int_equal(o1.calls, 1); /* it fit at once */
  assert_true(o1.on_loop_thread);
  assert_cq_ok(cq_uv_acquire(adapter, &later, &r, CQ_NEVER, record));
  assert_int_equal(o2.calls, 0);
  /* Hand `now`'s grant to another thread, which releases it. */
  struct releaser rl = {&now.grant, 20};
  uv_thread_t t;
  assert_int_equal(uv_thread_create(&t, release_later, &rl), 0);
  while (o2.calls == 0)
    uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(uv_thread_join(&t), 0);
  assert_int_equal(o2.status, 0);
  assert_true(o2.on_loop_thread);
  assert_int_equal(cq_grant_held(&later.grant, "b"), 1);
  assert_cq_ok(cq_uv_release(&later));
}

/* A release from another thread grants a waiting loop request. */
static void
test_release_from_another_thread_grants_a_loop_request(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 2));
  cq_req two, one;
  cq_grant held;
  hold(&held, &two, "b:2");
  cqt_req(&one, pool, "b:1");
  cq_uv_req w;
  cq_uv_req_init(&w);
  struct outcome o = {0, 1, 0, 0};
  w.data = &o;
  assert_cq_ok(cq_uv_acquire(adapter, &w, &one, CQ_NEVER, record));
  struct releaser rl = {&held, 10};
  uv_thread_t t;
  assert_int_equal(uv_thread_create(&t, release_later, &rl), 0);
  while (o.calls == 0)
    uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(uv_thread_join(&t), 0);
  assert_int_equal(o.status, 0);
  assert_true(o.on_loop_thread);
  assert_cq_ok(cq_uv_release(&w));
}

/* Ping-pong on a budget of 1 between the loop and another thread: every
 * release by the thread must reach the loop, or the loop stops short. */
#define PINGS 10000

struct pingpong {
  cq_req req;
  cq_uv_req uvreq;
  int loop_grants;
  atomic_int thread_grants;
};

static struct pingpong pp;

static void pp_granted(cq_uv_req *r, int status) {
  assert_int_equal(status, 0);
  pp.loop_grants++;
  assert_cq_ok(cq_uv_release(r)); /* on the loop: grants the thread */
  if (pp.loop_grants < PINGS)
    assert_cq_ok(cq_uv_acquire(adapter, r, &pp.req, CQ_NEVER, pp_granted));
  else
    assert_cq_ok(cq_uv_close(adapter, on_closed));
}

static void pp_thread(void *arg) {
  (void)arg;
  cq_grant g;
  cq_grant_init(&g);
  for (int i = 0; i < PINGS; i++) {
    if (cq_grant_acquire(pool, &g, &pp.req, CQ_NEVER) != 0)
      return;
    atomic_fetch_add(&pp.thread_grants, 1);
    if (cq_grant_release(pool, &g) != 0) /* grants the loop, from here */
      return;
  }
}

static void
test_ten_thousand_cross_thread_releases_lose_no_wakeup(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  memset(&pp, 0, sizeof(pp));
  cqt_req(&pp.req, pool, "b:1");
  assert_cq_ok(
      cq_uv_acquire(adapter, &pp.uvreq, &pp.req, CQ_NEVER, pp_granted));
  uv_thread_t t;
  assert_int_equal(uv_thread_create(&t, pp_thread, NULL), 0);
  closed_count = 0;
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0); /* until closed */
  assert_int_equal(uv_thread_join(&t), 0);
  assert_int_equal(pp.loop_grants, PINGS);
  assert_int_equal(atomic_load(&pp.thread_grants), PINGS);
  assert_int_equal(closed_count, 1);
  adapter = NULL;
  assert_int_equal(cqt_budget(pool, "b").in_use, 0);
}

/* record(), and the loop's uv_run() returns: a timer that fires at the top
 * of a UV_RUN_ONCE iteration runs before the poll, and the poll would then
 * block with nothing left to wait for but the adapter's async handle. */
static void record_and_stop(cq_uv_req *r, int status) {
  record(r, status);
  uv_stop(&loop);
}

static void test_timeout_fires_no_earlier_than_its_deadline(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cq_grant held;
  hold(&held, &r, "b:1");
  cq_uv_req w, soon;
  cq_uv_req_init(&w);
  cq_uv_req_init(&soon);
  struct outcome o = {0, 1, 0, 0}, o2 = {0, 1, 0, 0};
  w.data = &o;
  soon.data = &o2;
  int64_t deadline = cq_now() + 60;
  assert_cq_ok(cq_uv_acquire(adapter, &w, &r, deadline, record_and_stop));
  assert_cq_ok(
      cq_uv_acquire(adapter, &soon, &r, deadline - 40, record_and_stop));
  while (o.calls == 0)
    uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(o2.calls, 1);
  assert_int_equal(o2.status, CQ_ETIMEDOUT);
  assert_true(o2.at >= deadline - 40);
  assert_int_equal(o.status, CQ_ETIMEDOUT);
  assert_true(o.at >= deadline);
  assert_true(o.on_loop_thread);
  /* A deadline already past makes one attempt, on the spot. */
  struct outcome o3 = {0, 1, 0, 0};
  w.data = &o3;
  assert_cq_ok(cq_uv_acquire(adapter, &w, &r, cq_now() - 1, record));
  assert_int_equal(o3.calls, 1);
  assert_int_equal(o3.status, CQ_ETIMEDOUT);
  assert_cq_ok(cq_grant_release(pool, &held));
}

static void cancel_from_thread(void *arg) { assert_cq_ok(cq_uv_cancel(arg)); }

static void
test_cancel_works_from_the_loop_and_from_another_thread(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cq_grant held;
  hold(&held, &r, "b:1");
  cq_uv_req a, b;
  cq_uv_req_init(&a);
  cq_uv_req_init(&b);
  struct outcome oa = {0, 1, 0, 0}, ob = {0, 1, 0, 0};
  a.data = &oa;
  b.data = &ob;
  assert_cq_ok(cq_uv_acquire(adapter, &a, &r, CQ_NEVER, record));
  assert_cq_ok(cq_uv_acquire(adapter, &b, &r, CQ_NEVER, record));
  assert_cq_ok(cq_uv_cancel(&a)); /* loop thread: delivered at once */
  assert_int_equal(oa.calls, 1);
  assert_int_equal(oa.status, CQ_ECANCELED);
  assert_cq_err(cq_uv_cancel(&a), CQ_ESTATE);
  uv_thread_t t;
  assert_int_equal(uv_thread_create(&t, cancel_from_thread, &b), 0);
  assert_int_equal(uv_thread_join(&t), 0);
  while (ob.calls == 0)
    uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(ob.status, CQ_ECANCELED);
  assert_true(ob.on_loop_thread);
  assert_int_equal(ob.calls, 1);
  assert_cq_ok(cq_grant_release(pool, &held));
}

static void
test_close_fails_pending_waiters_and_refuses_new_ones(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cq_grant held;
  hold(&held, &r, "b:1");
  cq_uv_req w[3];
  struct outcome o[3];
  for (int i = 0; i < 3; i++) {
    memset(&o[i], 0, sizeof(o[i]));
    cq_uv_req_init(&w[i]);
    w[i].data = &o[i];
    int64_t deadline = i == 2 ? cq_now() + 100000 : CQ_NEVER;
    assert_cq_ok(cq_uv_acquire(adapter, &w[i], &r, deadline, record));
  }
  closed_count = 0;
  assert_cq_ok(cq_uv_close(adapter, on_closed));
  for (int i = 0; i < 3; i++) {
    assert_int_equal(o[i].calls, 1);
    assert_int_equal(o[i].status, CQ_ECLOSED);
  }
  cq_uv_req late;
  cq_uv_req_init(&late);
  assert_cq_err(cq_uv_acquire(adapter, &late, &r, CQ_NEVER, record),
                CQ_ECLOSED);
  assert_cq_err(cq_uv_close(adapter, on_closed), CQ_ECLOSED);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(closed_count, 1);
  adapter = NULL;
  assert_cq_ok(cq_grant_release(pool, &held));
  assert_int_equal(cqt_waiting(pool), 0);
}

/* Callbacks that acquire again, release, and close the adapter. */
static cq_req re_req;
static int re_calls;
static cq_uv_req re_a, re_b;

static void re_cb(cq_uv_req *r, int status) {
  re_calls++;
  if (re_calls == 1) {
    /* Granted: release, then acquire again with the same req, inside. */
    assert_int_equal(status, 0);
    assert_cq_ok(cq_uv_release(r));
    assert_cq_ok(cq_uv_acquire(adapter, r, &re_req, CQ_NEVER, re_cb));
  } else if (re_calls == 2) {
    /* Granted again at once, from within the acquire above. */
    assert_int_equal(status, 0);
    assert_cq_ok(cq_uv_acquire(adapter, &re_b, &re_req, CQ_NEVER, re_cb));
  } else if (re_calls == 3) {
    /* re_b, cancelled while it waited. */
    assert_int_equal(status, CQ_ECANCELED);
  }
}

static void closer_cb(cq_uv_req *r, int status) {
  assert_int_equal(status, 0);
  assert_cq_ok(cq_uv_release(r));
  assert_cq_ok(cq_uv_close(adapter, on_closed)); /* from a callback */
}

static void test_callbacks_may_acquire_release_and_close(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cqt_req(&re_req, pool, "b:1");
  re_calls = 0;
  assert_cq_ok(cq_uv_acquire(adapter, &re_a, &re_req, CQ_NEVER, re_cb));
  assert_int_equal(re_calls, 2); /* re_b now waits: re_a holds the unit */
  cq_uv_req c;
  cq_uv_req_init(&c);
  assert_cq_ok(cq_uv_acquire(adapter, &c, &re_req, CQ_NEVER, closer_cb));
  closed_count = 0;
  assert_cq_ok(cq_uv_cancel(&re_b)); /* c is next in line */
  assert_int_equal(re_calls, 3);
  assert_cq_ok(cq_uv_release(&re_a)); /* grants c, whose callback closes */
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(closed_count, 1);
  adapter = NULL;
}

/* Two loops on two threads share one pool; each callback runs on its own
 * loop's thread. */
struct side {
  uv_loop_t loop;
  cq_uv *uv;
  uv_thread_t thread;
  cq_req *req;
  cq_uv_req ureq;
  int grants, wrong_thread, target;
  atomic_int *total;
};

static void side_cb(cq_uv_req *r, int status) {
  struct side *s = r->data;
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &s->thread))
    s->wrong_thread++;
  if (status != 0)
    return;
  s->grants++;
  atomic_fetch_add(s->total, 1);
  (void)cq_uv_release(r);
  if (s->grants < s->target)
    (void)cq_uv_acquire(s->uv, r, s->req, CQ_NEVER, side_cb);
  else
    (void)cq_uv_close(s->uv, NULL);
}

static void side_main(void *arg) {
  struct side *s = arg;
  s->thread = uv_thread_self();
  if (uv_loop_init(&s->loop) != 0 || cq_uv_init(&s->uv, &s->loop, pool, NULL))
    return;
  s->ureq.data = s;
  (void)cq_uv_acquire(s->uv, &s->ureq, s->req, CQ_NEVER, side_cb);
  (void)uv_run(&s->loop, UV_RUN_DEFAULT);
  s->target = uv_loop_close(&s->loop) == 0 ? s->target : -1;
}

static void test_two_loops_share_one_pool(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cqt_req(&r, pool, "b:1");
  atomic_int total = 0;
  struct side s[2];
  uv_thread_t t[2];
  for (int i = 0; i < 2; i++) {
    memset(&s[i], 0, sizeof(s[i]));
    s[i].req = &r;
    s[i].target = 2000;
    s[i].total = &total;
    assert_int_equal(uv_thread_create(&t[i], side_main, &s[i]), 0);
  }
  for (int i = 0; i < 2; i++) {
    assert_int_equal(uv_thread_join(&t[i]), 0);
    assert_int_equal(s[i].grants, 2000);
    assert_int_equal(s[i].wrong_thread, 0);
    assert_int_equal(s[i].target, 2000); /* its loop closed cleanly */
  }
  assert_int_equal(atomic_load(&total), 4000);
  assert_int_equal(cqt_budget(pool, "b").in_use, 0);
}

/* A grant outlives the adapter it came through: close, let the loop free
 * the adapter, then release. */
static void test_grant_can_be_released_after_the_adapter_closed(void **s) {
  (void)s;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cqt_req(&r, pool, "b:1");
  cq_uv_req held;
  cq_uv_req_init(&held);
  struct outcome o = {0, 1, 0, 0};
  held.data = &o;
  assert_cq_ok(cq_uv_acquire(adapter, &held, &r, CQ_NEVER, record));
  assert_int_equal(o.status, 0);
  closed_count = 0;
  assert_cq_ok(cq_uv_close(adapter, on_closed));
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(closed_count, 1); /* freed */
  adapter = NULL;
  assert_int_equal(cqt_budget(pool, "b").in_use, 1);
  assert_cq_ok(cq_uv_release(&held));
  assert_int_equal(cqt_budget(pool, "b").in_use, 0);
  assert_cq_err(cq_uv_cancel(&held), CQ_ESTATE);
}

static void test_bad_arguments_are_refused(void **state) {
  (void)state;
  cq_uv *uv;
  assert_cq_err(cq_uv_init(NULL, &loop, pool, NULL), CQ_EINVAL);
  assert_cq_err(cq_uv_init(&uv, NULL, pool, NULL), CQ_EINVAL);
  assert_cq_err(cq_uv_init(&uv, &loop, NULL, NULL), CQ_EINVAL);
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cqt_req(&r, pool, "b:5");
  cq_uv_req u;
  cq_uv_req_init(&u);
  struct outcome o = {0, 1, 0, 0};
  u.data = &o;
  assert_cq_err(cq_uv_acquire(adapter, &u, &r, CQ_NEVER, record), CQ_ENEVER);
  assert_int_equal(o.calls, 0);
  assert_cq_err(cq_uv_acquire(adapter, &u, &r, CQ_NEVER, NULL), CQ_EINVAL);
  assert_ptr_equal(cq_uv_pool(adapter), pool);
  assert_ptr_equal(cq_uv_loop(adapter), &loop);
  *cq_uv_data(adapter) = &o;
  assert_ptr_equal(*cq_uv_data(adapter), &o);
}

/* ------------------------------------------------------------------------ */
/* Refusals change nothing                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Every refusal of every adapter call, made on a req in each state it can
 * be in, must change nothing: not the req's bytes, nor the adapter it is
 * pending on, nor the pool it holds units of. Each case starts from a
 * fixture of its own, on the suite's loop:
 *
 *   pool P: budget b = 1, served by adapters A, B and D;
 *   pool Q: budget q = 1, served by adapter C;
 *   a plain grant `blocker` on P, holding b:1 where the state needs it.
 *
 * The req under test is, by state: never acquired; pending on A with a
 * deadline (so also among A's deadlines); held through A; or finished
 * through A (cancelled). After the refused call its life goes on through
 * A: a pending req is granted when the blocker is released, by A's
 * callback; a held one is released into P. Then every adapter closes, and
 * the loop must end with them (a bounded wait: a corrupted adapter never
 * finishes closing).
 */
enum { RS_NEVER, RS_PENDING, RS_HELD, RS_DONE, RS_COUNT };
static const char *const rs_names[RS_COUNT] = {"never acquired", "pending",
                                               "held", "finished"};

#define NOT_REFUSED 1 /* in that state the call succeeds: not tried */

struct rfx {
  cq_pool *p, *q;
  cq_uv *a, *b, *c, *d; /* NULL once closed */
  cq_req r_b, r_big, r_q, r_qbig;
  cq_grant blocker;
  cq_uv_req req;
  struct outcome by_a;
  int by_others; /* callbacks of refused calls: must stay 0 */
  int closed, closed_by_second;
};

static struct rfx R;

static void rf_other_cb(cq_uv_req *r, int status) {
  (void)r;
  (void)status;
  R.by_others++;
}

/* Each adapter's data points at its slot in R, emptied once it closed. */
static void rf_closed(cq_uv *uv) {
  cq_uv **slot = *cq_uv_data(uv);
  *slot = NULL;
  R.closed++;
}

static void rf_closed_second(cq_uv *uv) {
  (void)uv;
  R.closed_by_second++;
}

static void rf_adapter(cq_uv **slot, cq_pool *p) {
  assert_cq_ok(cq_uv_init(slot, &loop, p, NULL));
  *cq_uv_data(*slot) = slot;
}

static int rf_acquire_again_on_its_adapter(void) {
  return cq_uv_acquire(R.a, &R.req, &R.r_b, cq_now() + 60000, rf_other_cb);
}
static int rf_acquire_on_another_adapter_of_its_pool(void) {
  return cq_uv_acquire(R.b, &R.req, &R.r_b, cq_now() + 60000, rf_other_cb);
}
static int rf_acquire_on_an_adapter_of_another_pool(void) {
  return cq_uv_acquire(R.c, &R.req, &R.r_q, cq_now() + 60000, rf_other_cb);
}
static int rf_acquire_what_never_fits(void) {
  return cq_uv_acquire(R.a, &R.req, &R.r_big, CQ_NEVER, rf_other_cb);
}
static int rf_acquire_what_never_fits_on_another_pool(void) {
  return cq_uv_acquire(R.c, &R.req, &R.r_qbig, cq_now() + 60000, rf_other_cb);
}
static int rf_acquire_a_request_of_another_pool(void) {
  return cq_uv_acquire(R.a, &R.req, &R.r_q, CQ_NEVER, rf_other_cb);
}
static int rf_acquire_without_a_callback(void) {
  return cq_uv_acquire(R.b, &R.req, &R.r_b, CQ_NEVER, NULL);
}
static int rf_acquire_on_a_closing_adapter(void) {
  assert_cq_ok(cq_uv_close(R.d, rf_closed));
  return cq_uv_acquire(R.d, &R.req, &R.r_b, CQ_NEVER, rf_other_cb);
}
static int rf_acquire_on_a_closed_pool(void) {
  assert_cq_ok(cq_pool_close(R.q));
  return cq_uv_acquire(R.c, &R.req, &R.r_q, CQ_NEVER, rf_other_cb);
}
static int rf_cancel(void) { return cq_uv_cancel(&R.req); }
static int rf_release(void) { return cq_uv_release(&R.req); }
static int rf_close_twice(void) {
  assert_cq_ok(cq_uv_close(R.d, rf_closed));
  return cq_uv_close(R.d, rf_closed_second);
}

struct refusal {
  const char *name;
  int (*call)(void);
  int expect[RS_COUNT]; /* by state; NOT_REFUSED: not tried */
};

#define NR NOT_REFUSED
static const struct refusal refusals[] = {
    {"acquire_again_on_its_adapter",
     rf_acquire_again_on_its_adapter,
     {NR, CQ_ESTATE, CQ_ESTATE, NR}},
    {"acquire_on_another_adapter_of_its_pool",
     rf_acquire_on_another_adapter_of_its_pool,
     {NR, CQ_ESTATE, CQ_ESTATE, NR}},
    {"acquire_on_an_adapter_of_another_pool",
     rf_acquire_on_an_adapter_of_another_pool,
     {NR, CQ_ESTATE, CQ_ESTATE, NR}},
    {"acquire_what_never_fits",
     rf_acquire_what_never_fits,
     {CQ_ENEVER, CQ_ESTATE, CQ_ESTATE, CQ_ENEVER}},
    {"acquire_what_never_fits_on_another_pool",
     rf_acquire_what_never_fits_on_another_pool,
     {CQ_ENEVER, CQ_ESTATE, CQ_ESTATE, CQ_ENEVER}},
    {"acquire_a_request_of_another_pool",
     rf_acquire_a_request_of_another_pool,
     {CQ_EPOOL, CQ_ESTATE, CQ_EPOOL, CQ_EPOOL}},
    {"acquire_without_a_callback",
     rf_acquire_without_a_callback,
     {CQ_EINVAL, CQ_EINVAL, CQ_EINVAL, CQ_EINVAL}},
    {"acquire_on_a_closing_adapter",
     rf_acquire_on_a_closing_adapter,
     {CQ_ECLOSED, CQ_ECLOSED, CQ_ECLOSED, CQ_ECLOSED}},
    {"acquire_on_a_closed_pool",
     rf_acquire_on_a_closed_pool,
     {CQ_ECLOSED, CQ_ESTATE, CQ_ESTATE, CQ_ECLOSED}},
    {"cancel", rf_cancel, {CQ_EINVAL, NR, CQ_ESTATE, CQ_ESTATE}},
    {"release", rf_release, {CQ_EINVAL, CQ_ESTATE, NR, CQ_ESTATE}},
    {"close_twice",
     rf_close_twice,
     {CQ_ECLOSED, CQ_ECLOSED, CQ_ECLOSED, CQ_ECLOSED}},
};
#undef NR
#define N_REFUSALS (sizeof(refusals) / sizeof(refusals[0]))

/* Run the loop until no handle is left on it, within the patience. */
static int rf_loop_ends(void) {
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (uv_run(&loop, UV_RUN_NOWAIT) != 0) {
    if (cq_now() > give_up)
      return 0;
    cqt_sleep_ms(1);
  }
  return 1;
}

static void rf_open(int st) {
  memset(&R, 0, sizeof(R));
  assert_cq_ok(cq_pool_create(&R.p, NULL));
  assert_cq_ok(cq_budget_add(R.p, "b", 1));
  assert_cq_ok(cq_pool_create(&R.q, NULL));
  assert_cq_ok(cq_budget_add(R.q, "q", 1));
  cqt_req(&R.r_b, R.p, "b:1");
  cqt_req(&R.r_big, R.p, "b:2");
  cqt_req(&R.r_q, R.q, "q:1");
  cqt_req(&R.r_qbig, R.q, "q:2");
  rf_adapter(&R.a, R.p);
  rf_adapter(&R.b, R.p);
  rf_adapter(&R.c, R.q);
  rf_adapter(&R.d, R.p);
  cq_grant_init(&R.blocker);
  cq_uv_req_init(&R.req);
  R.req.data = &R.by_a;
  if (st == RS_PENDING || st == RS_DONE)
    assert_cq_ok(cq_grant_try(R.p, &R.blocker, &R.r_b));
  if (st != RS_NEVER)
    assert_cq_ok(cq_uv_acquire(R.a, &R.req, &R.r_b, cq_now() + 60000, record));
  if (st == RS_DONE)
    assert_cq_ok(cq_uv_cancel(&R.req));
  int decided = st == RS_HELD || st == RS_DONE;
  assert_int_equal(R.by_a.calls, decided);
  if (decided)
    assert_int_equal(R.by_a.status, st == RS_HELD ? 0 : CQ_ECANCELED);
}

/* The req's life after the refusal, through A, then everything closes. */
static void rf_finish(int st) {
  if (st == RS_PENDING) {
    assert_int_equal(R.by_a.calls, 0);
    assert_cq_ok(cq_grant_release(R.p, &R.blocker)); /* grants it, on A */
    assert_int_equal(R.by_a.calls, 1);
    assert_int_equal(R.by_a.status, 0);
    assert_int_equal(cq_grant_held(&R.req.grant, "b"), 1);
  }
  if (st == RS_PENDING || st == RS_HELD)
    assert_cq_ok(cq_uv_release(&R.req));
  if (st == RS_DONE) {
    assert_cq_err(cq_uv_cancel(&R.req), CQ_ESTATE);
    assert_cq_ok(cq_grant_release(R.p, &R.blocker));
  }
  if (st == RS_NEVER)
    assert_cq_err(cq_uv_release(&R.req), CQ_EINVAL);
  assert_int_equal(R.by_a.calls, st != RS_NEVER);
  assert_int_equal(R.by_others, 0);
  assert_int_equal(cqt_budget(R.p, "b").in_use, 0);
  assert_int_equal(cqt_budget(R.q, "q").in_use, 0);
  assert_cq_ok(cq_uv_close(R.a, rf_closed));
  assert_cq_ok(cq_uv_close(R.b, rf_closed));
  assert_cq_ok(cq_uv_close(R.c, rf_closed));
  int rc = cq_uv_close(R.d, rf_closed); /* some cases closed it already */
  assert_true(rc == 0 || rc == CQ_ECLOSED);
  if (!rf_loop_ends())
    fail_msg("the adapters did not all close");
  assert_int_equal(R.closed, 4);
  assert_int_equal(R.closed_by_second, 0);
  assert_int_equal(cqt_waiting(R.p), 0);
  assert_cq_ok(cq_pool_destroy(R.p));
  assert_cq_ok(cq_pool_destroy(R.q));
  R.p = R.q = NULL;
}

static void test_every_refusal_changes_nothing(void **state) {
  const struct refusal *rf = *state;
  for (int st = 0; st < RS_COUNT; st++) {
    if (rf->expect[st] == NOT_REFUSED)
      continue;
    rf_open(st);
    cq_uv_req before = R.req;
    int rc = rf->call();
    if (rc != rf->expect[st])
      fail_msg("%s on a %s req returned %s, expected %s", rf->name,
               rs_names[st], cq_err_name(rc), cq_err_name(rf->expect[st]));
    if (before.data != R.req.data || memcmp(before.cq_private, R.req.cq_private,
                                            sizeof(before.cq_private)) != 0)
      fail_msg("%s on a %s req changed the req", rf->name, rs_names[st]);
    rf_finish(st);
  }
}

static int rf_setup(void **state) {
  (void)state;
  memset(&R, 0, sizeof(R));
  return uv_loop_init(&loop);
}

/* After a failure too, and without waiting for ever: whatever is still
 * open is closed, and the loop closed if it can be. */
static int rf_teardown(void **state) {
  (void)state;
  cq_uv **open[] = {&R.a, &R.b, &R.c, &R.d};
  for (size_t i = 0; i < sizeof(open) / sizeof(open[0]); i++)
    if (*open[i] != NULL)
      (void)cq_uv_close(*open[i], rf_closed);
  if (!rf_loop_ends())
    return -1; /* the failure is reported; what it corrupted stays */
  if (uv_loop_close(&loop) != 0)
    return -1;
  if (R.p != NULL)
    (void)cq_pool_close(R.p);
  if (R.q != NULL)
    (void)cq_pool_close(R.q);
  return 0;
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  static const struct CMUnitTest fixed[] = {
      T(test_callback_runs_on_the_loop_thread),
      T(test_release_from_another_thread_grants_a_loop_request),
      T(test_ten_thousand_cross_thread_releases_lose_no_wakeup),
      T(test_timeout_fires_no_earlier_than_its_deadline),
      T(test_cancel_works_from_the_loop_and_from_another_thread),
      T(test_close_fails_pending_waiters_and_refuses_new_ones),
      T(test_callbacks_may_acquire_release_and_close),
      T(test_two_loops_share_one_pool),
      T(test_grant_can_be_released_after_the_adapter_closed),
      T(test_bad_arguments_are_refused),
  };
#undef T
  enum { N_FIXED = sizeof(fixed) / sizeof(fixed[0]) };
  static struct CMUnitTest tests[N_FIXED + N_REFUSALS];
  static char names[N_REFUSALS][96];
  memcpy(tests, fixed, sizeof(fixed));
  for (size_t i = 0; i < N_REFUSALS; i++) {
    snprintf(names[i], sizeof(names[i]), "refusal_changes_nothing/%s",
             refusals[i].name);
    struct CMUnitTest t = {names[i], test_every_refusal_changes_nothing,
                           rf_setup, rf_teardown, (void *)&refusals[i]};
    tests[N_FIXED + i] = t;
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
