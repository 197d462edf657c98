/*
 * The waiting policy, scenario by scenario. Waiters are callbacks, so every
 * step is deterministic: the recorder's log says who was granted, in which
 * order, after which event.
 */
#define CQT_POOL_FIXTURE
#include "support/cqt.h"

static int setup_strict(void **state) {
  (void)state;
  return setup_with_flags(CQ_POOL_STRICT_ORDER);
}

static int setup_staged(void **state) {
  (void)state;
  return setup_with_flags(CQ_POOL_STAGED_CLAIMS);
}

/* Submit `spec` for slot s with no deadline. */
static void submit(cqt_slot *s, const char *name, cq_req *req,
                   const char *spec) {
  cqt_slot_init(s, &rec, name);
  cqt_req(req, pool, spec);
  assert_cq_ok(cq_grant_submit(pool, &s->grant, req, CQ_NEVER, cqt_record_cb));
}

/* Hold `spec` now (it must fit). */
static void hold(cq_grant *g, cq_req *req, const char *spec) {
  cq_grant_init(g);
  cqt_req(req, pool, spec);
  assert_cq_ok(cq_grant_try(pool, g, req));
}

/* 1. All-or-nothing. */
static void test_request_is_granted_all_at_once_or_not_at_all(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "db", 4));
  assert_cq_ok(cq_budget_add(pool, "license", 3));

  /* {db:1, license:5} fails at submission, in every style, holding nothing. */
  cq_req bad;
  cqt_req(&bad, pool, "db:1 license:5");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_err(cq_grant_try(pool, &g, &bad), CQ_ENEVER);
  assert_string_equal(cq_grant_error(&g),
                      "request asks license:5 but its capacity is 3");
  assert_cq_err(cq_grant_acquire(pool, &g, &bad, CQ_NEVER), CQ_ENEVER);
  cqt_slot never;
  cqt_slot_init(&never, &rec, "N");
  assert_cq_err(
      cq_grant_submit(pool, &never.grant, &bad, CQ_NEVER, cqt_record_cb),
      CQ_ENEVER);
  assert_int_equal(never.calls, 0); /* refused: the callback never runs */
  assert_false(cq_grant_is_held(&g));
  assert_int_equal(cqt_budget(pool, "db").in_use, 0);
  assert_int_equal(cqt_budget(pool, "license").in_use, 0);
  assert_int_equal(cqt_waiting(pool), 0);

  cq_req good;
  hold(&g, &good, "db:1 license:1");
  assert_int_equal(cqt_budget(pool, "db").in_use, 1);
  assert_int_equal(cqt_budget(pool, "license").in_use, 1);
  assert_int_equal(cq_grant_held(&g, "db"), 1);
  assert_int_equal(cq_grant_held(&g, "license"), 1);

  /* A request that fits on db but not on license takes neither. */
  cq_req both;
  cq_grant h1, h2;
  hold(&h1, &both, "license:2");
  cqt_req(&both, pool, "db:1 license:1");
  cq_grant_init(&h2);
  assert_cq_err(cq_grant_try(pool, &h2, &both), CQ_EBUSY);
  assert_int_equal(cqt_budget(pool, "db").in_use, 1);
  assert_int_equal(cqt_budget(pool, "license").in_use, 3);
  assert_false(cq_grant_is_held(&h2));

  assert_cq_ok(cq_grant_release(pool, &g));
  assert_cq_ok(cq_grant_release(pool, &h1));
  assert_int_equal(cqt_budget(pool, "db").in_use, 0);
  assert_int_equal(cqt_budget(pool, "license").in_use, 0);
}

/*
 * Found by the bad-input catalogue: an amount near INT64_MAX once passed the
 * lock-free path's room check, whose sum used + need overflowed, and was
 * granted on a budget of 100. It must fail as never-fitting, and the lock-free
 * path must also respect a capacity shrunk below what is held.
 */
static void test_huge_amount_is_never_granted_on_the_fast_path(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "mem", 100));
  cq_req one, huge, rest;
  cq_grant g1, g2, g3;
  hold(&g1, &one, "mem:1");

  assert_cq_ok(cq_req_init(&huge, pool));
  assert_cq_ok(cq_req_add(&huge, "mem", INT64_MAX));
  cq_grant_init(&g2);
  assert_cq_err(cq_grant_try(pool, &g2, &huge), CQ_ENEVER);
  assert_false(cq_grant_is_held(&g2));
  assert_int_equal(cqt_budget(pool, "mem").in_use, 1);

  /* Shrink below what is held: nothing more may be taken, lock-free or not. */
  assert_cq_ok(cq_grant_release(pool, &g1));
  hold(&g1, &one, "mem:60");
  assert_cq_ok(cq_budget_set_capacity(pool, "mem", 50));
  cqt_req(&rest, pool, "mem:1");
  cq_grant_init(&g3);
  assert_cq_err(cq_grant_try(pool, &g3, &rest), CQ_EBUSY);
  assert_int_equal(cqt_budget(pool, "mem").in_use, 60);
  assert_cq_ok(cq_grant_release(pool, &g1));
  assert_cq_ok(cq_grant_try(pool, &g3, &rest));
  assert_cq_ok(cq_grant_release(pool, &g3));
  assert_int_equal(cqt_budget(pool, "mem").in_use, 0);
}

/* 2. FIFO with reservation within a budget. */
static void test_head_waiter_keeps_what_frees_until_it_fits(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 5));
  cq_req r0, ra, rb;
  cq_grant held;
  cqt_slot a, b;
  hold(&held, &r0, "b:1");
  submit(&a, "A", &ra, "b:5");
  submit(&b, "B", &rb, "b:3");
  assert_log(&rec, "");
  assert_int_equal(cqt_budget(pool, "b").withheld, 4);

  assert_cq_ok(cq_grant_release(pool, &held)); /* release 1 */
  assert_log(&rec, "A");
  assert_cq_ok(cq_grant_release_part(pool, &a.grant, "b", 1)); /* release 1 */
  assert_log(&rec, "A");
  assert_int_equal(cqt_budget(pool, "b").withheld, 1);
  assert_cq_ok(cq_grant_release_part(pool, &a.grant, "b", 2)); /* release 2 */
  assert_log(&rec, "A B");
  assert_int_equal(cq_grant_held(&a.grant, "b"), 2);
  assert_int_equal(cq_grant_held(&b.grant, "b"), 3);

  assert_cq_ok(cq_grant_release(pool, &a.grant));
  assert_cq_ok(cq_grant_release(pool, &b.grant));
  assert_int_equal(cqt_budget(pool, "b").in_use, 0);
}

/* 3. No head-of-line blocking across resources. */
static void test_waiter_on_one_resource_does_not_block_others(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "gpu-slots", 2));
  assert_cq_ok(cq_budget_add(pool, "db", 4));
  cq_req r0, ra, rb, rc;
  cq_grant full;
  cqt_slot a, b, c;
  hold(&full, &r0, "gpu-slots:2");
  submit(&a, "A", &ra, "gpu-slots:2");
  submit(&b, "B", &rb, "db:1");
  assert_log(&rec, "B"); /* granted at once, past the waiting A */
  submit(&c, "C", &rc, "gpu-slots:1");

  assert_cq_ok(cq_grant_release_part(pool, &full, "gpu-slots", 1));
  assert_log(&rec, "B"); /* the freed slot is withheld for A, not given to C */
  assert_cq_ok(cq_grant_release(pool, &full));
  assert_log(&rec, "B A");
  assert_cq_ok(cq_grant_release(pool, &a.grant));
  assert_log(&rec, "B A C");
  assert_cq_ok(cq_grant_release(pool, &b.grant));
  assert_cq_ok(cq_grant_release(pool, &c.grant));
}

/* 4. A waiter claims only what it lacks. */
static void test_waiter_claims_only_what_it_lacks(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "db", 10));
  assert_cq_ok(cq_budget_add(pool, "gpu-slots", 1));
  cq_req r0, r1, ra, rb, rc;
  cq_grant db3, gpu;
  cqt_slot a, b, c;
  hold(&db3, &r0, "db:3");
  hold(&gpu, &r1, "gpu-slots:1");

  submit(&a, "A", &ra, "gpu-slots:1 db:5");
  assert_log(&rec, "");
  assert_int_equal(cqt_budget(pool, "db").withheld, 0); /* not claimed */
  submit(&b, "B", &rb, "db:7");
  assert_log(&rec, "B"); /* A did not lack db, so B gets it */

  assert_cq_ok(cq_grant_release(pool, &gpu)); /* withheld for A */
  assert_int_equal(cqt_budget(pool, "gpu-slots").withheld, 1);
  assert_log(&rec, "B"); /* A now lacks db and claims it */
  submit(&c, "C", &rc, "db:1");
  assert_log(&rec, "B"); /* C waits behind A's claim on db */

  assert_cq_ok(cq_grant_release(pool, &b.grant));
  assert_log(&rec, "B A C");
  assert_cq_ok(cq_grant_release(pool, &a.grant));
  assert_cq_ok(cq_grant_release(pool, &c.grant));
  assert_cq_ok(cq_grant_release(pool, &db3));
}

/* 5, default: a waiter claims everything it lacks at once. */
static void test_default_claims_every_lacking_resource_at_once(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "gpu-slots", 4));
  assert_cq_ok(cq_budget_add(pool, "cpu", 8));
  cq_req r0, r1, ra, rb;
  cq_grant gpus, cpus;
  cqt_slot a, b;
  hold(&gpus, &r0, "gpu-slots:4");
  hold(&cpus, &r1, "cpu:6");
  submit(&a, "A", &ra, "gpu-slots:1 cpu:4");
  submit(&b, "B", &rb, "cpu:2");
  assert_log(&rec, ""); /* A claimed cpu too: the 2 free are withheld */
  assert_int_equal(cqt_budget(pool, "cpu").withheld, 2);

  assert_cq_ok(cq_grant_release(pool, &cpus));
  assert_log(&rec, "B"); /* 8 free: 4 withheld for A, B fits in the rest */
  assert_cq_ok(cq_grant_release_part(pool, &gpus, "gpu-slots", 1));
  assert_log(&rec, "B A");
  assert_cq_ok(cq_grant_release(pool, &gpus));
  assert_cq_ok(cq_grant_release(pool, &a.grant));
  assert_cq_ok(cq_grant_release(pool, &b.grant));
}

/* 5, option: staged claims. */
static void test_staged_claims_take_one_resource_at_a_time(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "gpu-slots", 4));
  assert_cq_ok(cq_budget_add(pool, "cpu", 8));
  cq_req r0, r1, ra, rb, rc;
  cq_grant gpus, cpus;
  cqt_slot a, b, c;
  hold(&gpus, &r0, "gpu-slots:4");
  hold(&cpus, &r1, "cpu:6");
  submit(&a, "A", &ra, "gpu-slots:1 cpu:4");
  assert_int_equal(cqt_budget(pool, "cpu").withheld, 0);
  submit(&b, "B", &rb, "cpu:2");
  assert_log(&rec, "B"); /* A claimed gpu-slots only */

  assert_cq_ok(cq_grant_release_part(pool, &gpus, "gpu-slots", 1));
  assert_int_equal(cqt_budget(pool, "gpu-slots").withheld, 1);
  submit(&c, "C", &rc, "cpu:1");
  assert_log(&rec, "B"); /* now A claims cpu, and C waits behind it */

  assert_cq_ok(cq_grant_release(pool, &cpus));
  assert_log(&rec, "B A C");
  assert_cq_ok(cq_grant_release(pool, &gpus));
  assert_cq_ok(cq_grant_release(pool, &a.grant));
  assert_cq_ok(cq_grant_release(pool, &b.grant));
  assert_cq_ok(cq_grant_release(pool, &c.grant));
}

struct blocking_arg {
  cq_req *req;
  cq_grant grant;
  int rc;
};

static void *blocking_acquire(void *arg) {
  struct blocking_arg *a = arg;
  a->rc = cq_grant_acquire(pool, &a->grant, a->req, CQ_NEVER);
  return NULL;
}

/* 8. try never barges. */
static void test_try_does_not_overtake_a_waiting_head(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 3));
  cq_req r0, ra, r1;
  cq_grant two;
  cqt_slot a;
  hold(&two, &r0, "b:2");
  submit(&a, "A", &ra, "b:3");
  assert_int_equal(cqt_budget(pool, "b").withheld, 1);

  cqt_req(&r1, pool, "b:1");
  cq_grant t;
  cq_grant_init(&t);
  assert_cq_err(cq_grant_try(pool, &t, &r1), CQ_EBUSY);

  struct blocking_arg blocked = {&r1, {0}, 1};
  cq_grant_init(&blocked.grant);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, blocking_acquire, &blocked), 0);
  cqt_wait_for_waiters(pool, 2); /* queued behind A, not granted the 1 */
  assert_int_equal(cqt_budget(pool, "b").in_use, 2);

  assert_cq_ok(cq_grant_release(pool, &two));
  assert_log(&rec, "A");
  assert_int_equal(cqt_waiting(pool), 1);
  assert_cq_ok(cq_grant_release(pool, &a.grant));
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_cq_ok(blocked.rc);
  assert_int_equal(cq_grant_held(&blocked.grant, "b"), 1);
  assert_cq_ok(cq_grant_release(pool, &blocked.grant));
}

/* 9a. Cancelling the head grants the waiters behind it that now fit. */
static void test_cancelling_the_head_grants_those_behind(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 4));
  cq_req r0, ra, rb, rc;
  cq_grant two;
  cqt_slot a, b, c;
  hold(&two, &r0, "b:2");
  submit(&a, "A", &ra, "b:4");
  submit(&b, "B", &rb, "b:2");
  submit(&c, "C", &rc, "b:1");
  assert_log(&rec, "");
  assert_cq_ok(cq_grant_cancel(pool, &a.grant));
  assert_log(&rec, "A! B"); /* A's callback runs once, cancelled; B fits */
  assert_int_equal(a.status, CQ_ECANCELED);
  assert_int_equal(a.calls, 1);
  assert_cq_err(cq_grant_cancel(pool, &a.grant), CQ_ESTATE);
  assert_cq_err(cq_grant_release(pool, &a.grant), CQ_ESTATE);
  assert_cq_ok(cq_grant_release(pool, &two));
  assert_log(&rec, "A! B C");
  assert_cq_ok(cq_grant_release(pool, &b.grant));
  assert_cq_ok(cq_grant_release(pool, &c.grant));
}

/* 11. Close fails every waiter and every later acquire; destroy refuses
 * while anything is held or waits. */
static void test_close_fails_waiters_and_destroy_refuses_when_busy(void **s) {
  (void)s;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r0, ra;
  cq_grant one;
  cqt_slot a;
  hold(&one, &r0, "b:1");
  submit(&a, "A", &ra, "b:1");

  struct blocking_arg blocked = {&ra, {0}, 1};
  cq_grant_init(&blocked.grant);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, blocking_acquire, &blocked), 0);
  cqt_wait_for_waiters(pool, 2);
  assert_cq_err(cq_pool_destroy(pool), CQ_EINUSE);

  assert_cq_ok(cq_pool_close(pool));
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(blocked.rc, CQ_ECLOSED);
  assert_int_equal(a.status, CQ_ECLOSED);
  assert_int_equal(a.calls, 1);
  assert_cq_ok(cq_pool_close(pool)); /* idempotent */

  cq_grant late;
  cq_grant_init(&late);
  assert_cq_err(cq_grant_try(pool, &late, &ra), CQ_ECLOSED);
  assert_cq_err(cq_grant_acquire(pool, &late, &ra, CQ_NEVER), CQ_ECLOSED);
  assert_cq_err(cq_grant_submit(pool, &late, &ra, CQ_NEVER, cqt_record_cb),
                CQ_ECLOSED);
  assert_cq_err(cq_pool_destroy(pool), CQ_EINUSE); /* `one` is still held */
  assert_cq_ok(cq_grant_release(pool, &one));
  assert_int_equal(cqt_budget(pool, "b").in_use, 0);
}

static void test_destroy_refuses_while_a_request_waits(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r0, ra;
  cq_grant one;
  cqt_slot a;
  hold(&one, &r0, "b:1");
  submit(&a, "A", &ra, "b:1");
  assert_cq_ok(cq_grant_release(pool, &one));
  assert_log(&rec, "A");
  assert_cq_err(cq_pool_destroy(pool), CQ_EINUSE);
  assert_cq_ok(cq_grant_release(pool, &a.grant));
  cqt_slot b;
  hold(&one, &r0, "b:1");
  submit(&b, "B", &ra, "b:1");
  assert_cq_err(cq_pool_destroy(pool), CQ_EINUSE);
  assert_cq_ok(cq_grant_cancel(pool, &b.grant));
  assert_cq_ok(cq_grant_release(pool, &one));
}

/* Each blocked thread is woken once, when its own outcome is decided. In
 * strict order (setup_strict): in a barging window a thread may wake by
 * its own timer at the end of its window and take what is free, and
 * nobody woke it (TSan in CI once slowed a run enough for that: 7
 * wake-ups for 8 grants). */
enum { WAKE_N = 8 };
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done_order[WAKE_N];
static int n_done;

struct waker_arg {
  struct blocking_arg b;
  int index;
};

static void *acquire_and_report(void *arg) {
  struct waker_arg *w = arg;
  blocking_acquire(&w->b);
  pthread_mutex_lock(&done_lock);
  done_order[n_done++] = w->index;
  pthread_cond_signal(&done_cond);
  pthread_mutex_unlock(&done_lock);
  return NULL;
}

static void test_each_grant_wakes_exactly_one_thread(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req r1;
  cq_grant one;
  hold(&one, &r1, "b:1");
  struct waker_arg args[WAKE_N];
  pthread_t th[WAKE_N];
  n_done = 0;
  for (int i = 0; i < WAKE_N; i++) {
    args[i].b.req = &r1;
    args[i].b.rc = 1;
    args[i].index = i;
    cq_grant_init(&args[i].b.grant);
    assert_int_equal(pthread_create(&th[i], NULL, acquire_and_report, &args[i]),
                     0);
  }
  cqt_wait_for_waiters(pool, WAKE_N);
  cq_pool_stats before;
  assert_cq_ok(cq_pool_stats_get(pool, &before));
  assert_cq_ok(cq_grant_release(pool, &one));
  /* Each granted thread's grant is released in turn, granting the next. */
  for (int k = 0; k < WAKE_N; k++) {
    pthread_mutex_lock(&done_lock);
    while (n_done <= k)
      pthread_cond_wait(&done_cond, &done_lock);
    int i = done_order[k];
    pthread_mutex_unlock(&done_lock);
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_cq_ok(args[i].b.rc);
    assert_cq_ok(cq_grant_release(pool, &args[i].b.grant));
  }
  cq_pool_stats after;
  assert_cq_ok(cq_pool_stats_get(pool, &after));
  assert_int_equal(after.waited_grants - before.waited_grants, WAKE_N);
  assert_int_equal(after.wakeups - before.wakeups, WAKE_N);
}

/*
 * The oldest waiter that fits is found past many that do not. cpu has 100;
 * W (the only GPU, held, and cpu:10) waits first and claims both. Behind it
 * wait 1000 more: the first 500 ask cpu:95, the next 500 cpu:30. Each time
 * 50 come back, 10 are withheld for W and 40 are open, which one cpu:30
 * fits: they are granted one at a time in arrival order, s500 first, and
 * no cpu:95 ever is.
 */
static void
test_the_oldest_waiter_that_fits_is_found_past_many_that_do_not(void **state) {
  (void)state;
  enum { N = 1000, FIRST_SMALL = 500, STEPS = 12 };
  assert_cq_ok(cq_budget_add(pool, "cpu", 100));
  assert_cq_ok(cq_devices_add(pool, "gpu", 1, NULL));
  cq_grant gpu, h1, h2;
  cq_req r_gpu, r_half, r_w, r_big, r_small;
  assert_cq_ok(cq_req_init(&r_gpu, pool));
  assert_cq_ok(cq_req_add_devices(&r_gpu, "gpu", 1));
  cq_grant_init(&gpu);
  assert_cq_ok(cq_grant_try(pool, &gpu, &r_gpu));
  hold(&h1, &r_half, "cpu:50");
  hold(&h2, &r_half, "cpu:50");
  static cqt_slot w, many[N];
  static char names[N][8];
  cqt_slot_init(&w, &rec, "W");
  assert_cq_ok(cq_req_init(&r_w, pool));
  assert_cq_ok(cq_req_add_devices(&r_w, "gpu", 1));
  assert_cq_ok(cq_req_add(&r_w, "cpu", 10));
  assert_cq_ok(cq_grant_submit(pool, &w.grant, &r_w, CQ_NEVER, cqt_record_cb));
  cqt_req(&r_big, pool, "cpu:95");
  cqt_req(&r_small, pool, "cpu:30");
  for (int i = 0; i < N; i++) {
    snprintf(names[i], sizeof(names[i]), "s%d", i);
    cqt_slot_init(&many[i], &rec, names[i]);
    assert_cq_ok(cq_grant_submit(pool, &many[i].grant,
                                 i < FIRST_SMALL ? &r_big : &r_small, CQ_NEVER,
                                 cqt_record_cb));
  }
  assert_log(&rec, "");
  assert_cq_ok(cq_grant_release(pool, &h2));
  char expect[STEPS * 8] = "s500";
  assert_log(&rec, expect);
  for (int k = 1; k < STEPS; k++) {
    assert_cq_ok(cq_grant_release(pool, &many[FIRST_SMALL + k - 1].grant));
    strcat(expect, " ");
    strcat(expect, names[FIRST_SMALL + k]);
    assert_log(&rec, expect);
  }
  assert_cq_ok(cq_grant_release(pool, &many[FIRST_SMALL + STEPS - 1].grant));
  /* Close to finish the others. */
  assert_cq_ok(cq_pool_close(pool));
  assert_int_equal(cqt_waiting(pool), 0);
  assert_cq_ok(cq_grant_release(pool, &many[FIRST_SMALL + STEPS].grant));
  assert_cq_ok(cq_grant_release(pool, &h1));
  assert_cq_ok(cq_grant_release(pool, &gpu));
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_request_is_granted_all_at_once_or_not_at_all),
      T(test_head_waiter_keeps_what_frees_until_it_fits),
      T(test_waiter_on_one_resource_does_not_block_others),
      T(test_waiter_claims_only_what_it_lacks),
      T(test_default_claims_every_lacking_resource_at_once),
      cmocka_unit_test_setup_teardown(
          test_staged_claims_take_one_resource_at_a_time, setup_staged,
          teardown),
      T(test_huge_amount_is_never_granted_on_the_fast_path),
      T(test_try_does_not_overtake_a_waiting_head),
      T(test_cancelling_the_head_grants_those_behind),
      T(test_close_fails_waiters_and_destroy_refuses_when_busy),
      T(test_destroy_refuses_while_a_request_waits),
      cmocka_unit_test_setup_teardown(test_each_grant_wakes_exactly_one_thread,
                                      setup_strict, teardown),
      T(test_the_oldest_waiter_that_fits_is_found_past_many_that_do_not),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
