/*
 * Cancellation and deadlines: who wins a race, that nothing is held after
 * losing, and that an expiry never comes early and lets the waiters behind
 * move.
 */
#define CQT_POOL_FIXTURE
#include "support/cqt.h"

#include <stdatomic.h>

struct blocking_arg {
  cq_req *req;
  cq_grant grant;
  int64_t deadline;
  int rc;
  int64_t returned_at;
};

static void *blocking_acquire(void *arg) {
  struct blocking_arg *a = arg;
  a->rc = cq_grant_acquire(pool, &a->grant, a->req, a->deadline);
  a->returned_at = cq_now();
  return NULL;
}

static void start_blocking(pthread_t *th, struct blocking_arg *a, cq_req *req,
                           int64_t deadline) {
  a->req = req;
  a->deadline = deadline;
  a->rc = 1;
  cq_grant_init(&a->grant);
  assert_int_equal(pthread_create(th, NULL, blocking_acquire, a), 0);
}

/* 9b: a cancel before the units arrive wins, and the units stay free. */
static void test_cancel_before_units_arrive_wins(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cqt_req(&r, pool, "b:1");
  cq_grant one;
  cq_grant_init(&one);
  assert_cq_ok(cq_grant_try(pool, &one, &r));

  pthread_t th;
  struct blocking_arg w;
  start_blocking(&th, &w, &r, CQ_NEVER);
  cqt_wait_for_waiters(pool, 1);
  assert_cq_ok(cq_grant_cancel(pool, &w.grant));
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(w.rc, CQ_ECANCELED);
  assert_false(cq_grant_is_held(&w.grant));

  cqt_slot cb;
  cqt_slot_init(&cb, &rec, "C");
  assert_cq_ok(cq_grant_submit(pool, &cb.grant, &r, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_grant_cancel(pool, &cb.grant));
  assert_int_equal(cb.calls, 1);
  assert_int_equal(cb.status, CQ_ECANCELED);

  assert_cq_ok(cq_grant_release(pool, &one));
  assert_int_equal(cqt_budget(pool, "b").in_use, 0);
  assert_log(&rec, "C!");
}

struct race {
  cq_grant *holder;
  cq_grant *waiter;
  pthread_barrier_t go;
  int release_rc;
  int cancel_rc;
};

static void *race_release(void *arg) {
  struct race *r = arg;
  pthread_barrier_wait(&r->go);
  r->release_rc = cq_grant_release(pool, r->holder);
  return NULL;
}

static void *race_cancel(void *arg) {
  struct race *r = arg;
  pthread_barrier_wait(&r->go);
  r->cancel_rc = cq_grant_cancel(pool, r->waiter);
  return NULL;
}

/* 9c: a grant/cancel race ends granted (units held) or cancelled (nothing
 * held), never both and never neither. */
static void test_grant_cancel_race_has_exactly_one_winner(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cqt_req(&r, pool, "b:1");
  int granted = 0, cancelled = 0;
  for (int round = 0; round < 300; round++) {
    cq_grant holder;
    cq_grant_init(&holder);
    assert_cq_ok(cq_grant_try(pool, &holder, &r));
    pthread_t th, tr, tc;
    struct blocking_arg w;
    start_blocking(&th, &w, &r, CQ_NEVER);
    cqt_wait_for_waiters(pool, 1);

    struct race race = {&holder, &w.grant, {{0}}, 1, 1};
    pthread_barrier_init(&race.go, NULL, 2);
    assert_int_equal(pthread_create(&tr, NULL, race_release, &race), 0);
    assert_int_equal(pthread_create(&tc, NULL, race_cancel, &race), 0);
    assert_int_equal(pthread_join(tr, NULL), 0);
    assert_int_equal(pthread_join(tc, NULL), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    pthread_barrier_destroy(&race.go);
    assert_cq_ok(race.release_rc);

    if (w.rc == 0) {
      assert_int_equal(race.cancel_rc, CQ_ESTATE);
      assert_int_equal(cqt_budget(pool, "b").in_use, 1);
      assert_cq_ok(cq_grant_release(pool, &w.grant));
      granted++;
    } else {
      assert_int_equal(w.rc, CQ_ECANCELED);
      assert_cq_ok(race.cancel_rc);
      assert_false(cq_grant_is_held(&w.grant));
      cancelled++;
    }
    assert_int_equal(cqt_budget(pool, "b").in_use, 0);
    assert_int_equal(cqt_waiting(pool), 0);
  }
  assert_int_equal(granted + cancelled, 300);
  print_message("race outcomes: %d granted, %d cancelled\n", granted,
                cancelled);
}

/* 10: an expired timed acquire reports timed out no earlier than its
 * deadline, holds nothing, and the waiters behind it move. On a pool in
 * strict order, so that A claims (and has withheld) from the start. */
static void test_expired_wait_times_out_and_lets_others_move(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 4));
  cq_req r2, r4;
  cqt_req(&r2, pool, "b:2");
  cqt_req(&r4, pool, "b:4");
  cq_grant two;
  cq_grant_init(&two);
  assert_cq_ok(cq_grant_try(pool, &two, &r2));

  pthread_t th;
  struct blocking_arg a;
  int64_t deadline = cq_now() + 50;
  start_blocking(&th, &a, &r4, deadline);
  cqt_wait_for_waiters(pool, 1);

  cqt_slot b;
  cqt_slot_init(&b, &rec, "B");
  assert_cq_ok(cq_grant_submit(pool, &b.grant, &r2, CQ_NEVER, cqt_record_cb));
  assert_log(&rec, ""); /* the 2 free units are withheld for A */

  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(a.rc, CQ_ETIMEDOUT);
  assert_true(a.returned_at >= deadline);
  assert_false(cq_grant_is_held(&a.grant));
  assert_log(&rec, "B"); /* re-evaluated when A left */
  assert_cq_ok(cq_grant_release(pool, &b.grant));
  assert_cq_ok(cq_grant_release(pool, &two));
}

/* A deadline already past makes one attempt and never waits. */
static void test_past_deadline_tries_once(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cqt_req(&r, pool, "b:1");
  cq_grant g, h;
  cq_grant_init(&g);
  cq_grant_init(&h);
  assert_cq_ok(cq_grant_acquire(pool, &g, &r, cq_now() - 1));
  assert_cq_err(cq_grant_acquire(pool, &h, &r, 0), CQ_ETIMEDOUT);
  assert_int_equal(cqt_waiting(pool), 0);

  cqt_slot s;
  cqt_slot_init(&s, &rec, "S");
  assert_cq_ok(cq_grant_submit(pool, &s.grant, &r, 0, cqt_record_cb));
  assert_int_equal(s.calls, 1);
  assert_int_equal(s.status, CQ_ETIMEDOUT);
  assert_int_equal(cqt_waiting(pool), 0);
  assert_cq_ok(cq_grant_release(pool, &g));
}

static int64_t cb_deadline;
static atomic_int_fast64_t cb_fired_at;

static void timed_cb(cq_grant *g, int status) {
  cqt_record_cb(g, status);
  atomic_store(&cb_fired_at, cq_now());
}

/* Callback waiters time out on the pool's timer thread. */
static void test_callback_deadline_fires_no_earlier_than_due(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cqt_req(&r, pool, "b:1");
  cq_grant one;
  cq_grant_init(&one);
  assert_cq_ok(cq_grant_try(pool, &one, &r));

  cqt_slot s;
  cqt_slot_init(&s, &rec, "S");
  atomic_store(&cb_fired_at, 0);
  cb_deadline = cq_now() + 40;
  assert_cq_ok(cq_grant_submit(pool, &s.grant, &r, cb_deadline, timed_cb));
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (atomic_load(&cb_fired_at) == 0) {
    assert_true(cq_now() < give_up);
    cqt_sleep_ms(1);
  }
  assert_true(atomic_load(&cb_fired_at) >= cb_deadline);
  assert_log(&rec, "S!");
  assert_int_equal(s.status, CQ_ETIMEDOUT);
  assert_cq_ok(cq_grant_release(pool, &one));
}

static int64_t virtual_now;
static int64_t virtual_clock(void *arg) {
  (void)arg;
  return virtual_now;
}

/* With manual timers and a virtual clock, deadlines pass only when the host
 * says so, and exactly at their time. */
static void test_manual_timers_expire_on_the_virtual_clock(void **state) {
  (void)state;
  cq_pool *vp;
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_MANUAL_TIMERS;
  cfg.clock = virtual_clock;
  virtual_now = 1000;
  assert_cq_ok(cq_pool_create(&vp, &cfg));
  assert_cq_ok(cq_budget_add(vp, "b", 1));
  cq_req r;
  cqt_req(&r, vp, "b:1");
  cq_grant one;
  cq_grant_init(&one);
  assert_cq_ok(cq_grant_try(vp, &one, &r));

  cqt_slot s, t;
  cqt_slot_init(&s, &rec, "S");
  cqt_slot_init(&t, &rec, "T");
  assert_cq_ok(cq_grant_submit(vp, &s.grant, &r, 1100, cqt_record_cb));
  assert_cq_ok(cq_grant_submit(vp, &t.grant, &r, 1200, cqt_record_cb));
  int64_t next = 0;
  virtual_now = 1099;
  assert_cq_ok(cq_pool_expire(vp, &next));
  assert_int_equal(next, 1100);
  assert_log(&rec, "");
  virtual_now = 1100;
  assert_cq_ok(cq_pool_expire(vp, &next));
  assert_log(&rec, "S!");
  assert_int_equal(next, 1200);
  assert_cq_ok(cq_grant_release(vp, &one));
  assert_log(&rec, "S! T");
  assert_cq_ok(cq_pool_expire(vp, &next));
  assert_int_equal(next, CQ_NEVER);
  assert_cq_ok(cq_grant_release(vp, &t.grant));
  assert_cq_ok(cq_pool_destroy(vp));
}

/* Hosts with timers of their own end waits with the status they mean. */
static void test_abort_ends_a_wait_with_the_status_given(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r;
  cqt_req(&r, pool, "b:1");
  cq_grant one;
  cq_grant_init(&one);
  assert_cq_ok(cq_grant_try(pool, &one, &r));
  cqt_slot t, c;
  cqt_slot_init(&t, &rec, "T");
  cqt_slot_init(&c, &rec, "C");
  assert_cq_ok(cq_grant_submit(pool, &t.grant, &r, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_grant_submit(pool, &c.grant, &r, CQ_NEVER, cqt_record_cb));
  assert_cq_err(cq_grant_abort(pool, &t.grant, CQ_EBUSY), CQ_EINVAL);
  assert_cq_ok(cq_grant_abort(pool, &t.grant, CQ_ETIMEDOUT));
  assert_cq_ok(cq_grant_abort(pool, &c.grant, CQ_ECLOSED));
  assert_int_equal(t.status, CQ_ETIMEDOUT);
  assert_int_equal(c.status, CQ_ECLOSED);
  assert_cq_err(cq_grant_abort(pool, &t.grant, CQ_ETIMEDOUT), CQ_ESTATE);
  assert_int_equal(cqt_budget(pool, "b").timeouts, 1);
  assert_cq_ok(cq_grant_release(pool, &one));
  assert_log(&rec, "T! C!");
}

/* A pool without a barging window: a blocking acquire claims at once. */
static int setup_strict(void **state) {
  (void)state;
  return setup_with_flags(CQ_POOL_STRICT_ORDER);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_cancel_before_units_arrive_wins),
      T(test_grant_cancel_race_has_exactly_one_winner),
      cmocka_unit_test_setup_teardown(
          test_expired_wait_times_out_and_lets_others_move, setup_strict,
          teardown),
      T(test_past_deadline_tries_once),
      T(test_callback_deadline_fires_no_earlier_than_due),
      T(test_manual_timers_expire_on_the_virtual_clock),
      T(test_abort_ends_a_wait_with_the_status_given),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
