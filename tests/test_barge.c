/*
 * Bounded barging: a blocking acquire that does not fit sleeps for up to
 * the pool's window T without claiming anything, so running threads may
 * overtake it; each release wakes one sleeper that fits to try again; once
 * T has passed it claims its place by arrival, and from then on nobody
 * overtakes it. Callback waiters and backfill pools never sleep this way;
 * CQ_POOL_STRICT_ORDER turns the window off.
 *
 * Pools with manual timers and a virtual clock make the window's end a step
 * of the test; one pool with its own clock shows the same without one.
 * With manual timers a sleeper's thread wakes only when nudged: that is how
 * the tests hold it back while its window passes.
 */
#include "support/cqt.h"

static int64_t now_ms;
static int64_t test_clock(void *arg) {
  (void)arg;
  return now_ms;
}

static cq_pool *pool;
static cqt_rec rec;

/* A pool with budget b of 2, with a virtual clock and manual timers or with
 * its own clock (`flags` may still ask manual timers: then the system's
 * clock, and sleepers that wake only when nudged). */
static cq_pool *make_pool(unsigned flags, int64_t barge_ms, bool manual) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = flags | (manual ? CQ_POOL_MANUAL_TIMERS : 0u);
  if (manual)
    cfg.clock = test_clock;
  cfg.barge_ms = barge_ms;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  assert_cq_ok(cq_budget_add(p, "b", 2));
  return p;
}

static int setup(void **state) {
  (void)state;
  now_ms = 1000;
  cqt_rec_init(&rec);
  pool = make_pool(0, 10, true);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return cqt_fixture_teardown(pool);
}

/* Run the test on a pool of its own instead. */
static void replace_pool(unsigned flags, int64_t barge_ms, bool manual) {
  assert_cq_ok(cq_pool_destroy(pool));
  pool = make_pool(flags, barge_ms, manual);
}

static cq_pool_stats stats(void) {
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(pool, &st));
  return st;
}

/* Hold `spec` now (it must fit). */
static void hold(cq_grant *g, cq_req *r, const char *spec) {
  cqt_req(r, pool, spec);
  cq_grant_init(g);
  assert_cq_ok(cq_grant_try(pool, g, r));
}

/* Wait (generously) until the acquirer's call has returned. */
static void wait_returned(cqt_acquirer *a) {
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (!cqt_acquire_returned(a)) {
    if (cq_now() > give_up)
      fail_msg("the blocking acquire never returned");
    cqt_sleep_ms(1);
  }
}

/* Move the virtual clock and let the pool see it. */
static void advance_to(int64_t t) {
  now_ms = t;
  assert_cq_ok(cq_pool_expire(pool, NULL));
}

/* ------------------------------------------------------------------------ */

/* The scene most tests start from: H holds 1 of b's 2, and A, a blocking
 * acquire of 2 on a thread of its own, has arrived and waits. */
struct scene {
  cq_grant h, t;
  cq_req rh, r1, r2;
  cqt_acquirer a;
};

static void scene_start(struct scene *sc, bool wait_for_a) {
  hold(&sc->h, &sc->rh, "b:1");
  cqt_req(&sc->r1, pool, "b:1");
  cqt_req(&sc->r2, pool, "b:2");
  cqt_acquire_start(&sc->a, pool, &sc->r2, CQ_NEVER);
  if (wait_for_a)
    cqt_wait_for_waiters(pool, 1);
}

/* Whether a try of the free unit is refused (it is withheld for A). */
static bool try_refused(struct scene *sc) {
  cq_grant_init(&sc->t);
  int rc = cq_grant_try(pool, &sc->t, &sc->r1);
  if (rc == 0)
    assert_cq_ok(cq_grant_release(pool, &sc->t));
  else
    assert_int_equal(rc, CQ_EBUSY);
  return rc != 0;
}

/* A has claimed its place: it outwaited its window, the free unit is
 * withheld for it, and a try of that unit is refused. */
static void expect_a_claims(struct scene *sc) {
  assert_int_equal(stats().converted, 1);
  assert_int_equal(cqt_budget(pool, "b").withheld, 1);
  assert_true(try_refused(sc));
}

/* H releases; A is granted, and releases. */
static void scene_end(struct scene *sc) {
  assert_cq_ok(cq_grant_release(pool, &sc->h));
  assert_cq_ok(cqt_acquire_join(&sc->a));
  assert_cq_ok(cq_grant_release(pool, &sc->a.grant));
}

/* H holds 1 of 2; A asks 2 and sleeps. Within its window A claims nothing:
 * a try of the 1 free unit succeeds (strict order would withhold it). */
static void
test_a_sleeping_acquire_claims_nothing_so_a_try_may_overtake_it(void **s) {
  (void)s;
  struct scene sc;
  scene_start(&sc, true);
  assert_int_equal(cqt_budget(pool, "b").withheld, 0);
  assert_false(try_refused(&sc)); /* overtakes A */
  assert_int_equal(stats().converted, 0);
  assert_cq_ok(cq_pool_close(pool));
  assert_int_equal(cqt_acquire_join(&sc.a), CQ_ECLOSED);
  assert_cq_ok(cq_grant_release(pool, &sc.h));
}

/* The same, until the window ends: then A claims, the free unit is
 * withheld for it, a try is refused, and the release goes to A. */
static void
test_once_its_window_has_passed_it_claims_its_place_and_nobody_overtakes(
    void **s) {
  (void)s;
  struct scene sc;
  scene_start(&sc, true);
  int64_t next = 0;
  assert_cq_ok(cq_pool_expire(pool, &next));
  assert_int_equal(next, 1010); /* the window's end, on the pool's clock */
  advance_to(1009);
  assert_int_equal(stats().converted, 0);
  advance_to(1010);
  expect_a_claims(&sc);
  scene_end(&sc);
}

/*
 * The window ends at arrival + T whatever A's thread does. Here its thread
 * is held back: on a pool with manual timers it wakes only when nudged, and
 * nothing calls cq_pool_expire(). Only the clock moves. The first call on
 * the pool after the window finds A claiming its place: a try (lock-free:
 * b names only budgets), a release, a later arrival that takes the lock.
 */
static void test_a_sleeper_whose_window_passed_is_claimed_by_a_try(void **s) {
  (void)s;
  struct scene sc;
  scene_start(&sc, true);
  now_ms = 1009;
  assert_false(try_refused(&sc)); /* within the window: it may overtake */
  now_ms = 1010;
  assert_true(try_refused(&sc)); /* past it: the free unit is A's */
  expect_a_claims(&sc);
  scene_end(&sc);
}

extern _Atomic int cq__grant_hold_woken; /* tests: see src/grant.c */

/* A sleeper woken by a release (it fits now) is one woken thread: when its
 * window ends before that thread runs and another event grants it, the
 * wake-up it was given is its outcome's, not a second one (the count was
 * two, and the bench's handoff check failed on a loaded machine). */
static void
test_a_nudged_sleeper_granted_by_another_event_is_woken_once(void **s) {
  (void)s;
  struct scene sc;
  scene_start(&sc, true);
  atomic_store(&cq__grant_hold_woken, 1);
  now_ms = 1005;
  assert_cq_ok(cq_grant_release(pool, &sc.h)); /* A fits: woken, held back */
  assert_int_equal(stats().wakeups, 1);
  advance_to(1010); /* its window ends: it claims, and is granted */
  assert_int_equal(stats().converted, 1);
  assert_int_equal(cqt_budget(pool, "b").in_use, 2);
  atomic_store(&cq__grant_hold_woken, 0);
  assert_cq_ok(cqt_acquire_join(&sc.a));
  assert_int_equal(stats().wakeups, 1);
  assert_cq_ok(cq_grant_release(pool, &sc.a.grant));
}

/* H and H2 hold a unit each; after A's window H2 releases, which does not
 * make A fit, yet from then on the unit is withheld for A. */
static void
test_a_sleeper_whose_window_passed_is_claimed_by_a_release(void **s) {
  (void)s;
  struct scene sc;
  scene_start(&sc, true);
  cq_grant h2;
  cq_req r;
  hold(&h2, &r, "b:1"); /* overtakes A, within the window */
  now_ms = 1010;
  assert_cq_ok(cq_grant_release(pool, &h2));
  expect_a_claims(&sc);
  scene_end(&sc);
}

/* The same for a lock-free try on a pool that keeps the system's clock
 * (its own clock is read under the lock only): with manual timers A's
 * thread still waits to be nudged, and once the clock has passed A's
 * window the try takes the lock, where A claims. */
static void
test_a_lock_free_try_after_the_window_finds_the_sleeper_claiming(void **s) {
  (void)s;
  replace_pool(CQ_POOL_MANUAL_TIMERS, 1, false);
  struct scene sc;
  scene_start(&sc, true);
  int64_t past = cq_now() + 1; /* A's window ends by then */
  while (cq_now() < past)
    cqt_sleep_ms(1);
  assert_true(try_refused(&sc));
  expect_a_claims(&sc);
  scene_end(&sc);
}

/* C arrives after A's window with a request that always takes the lock (it
 * has a hold limit); the unit it asks is free, but A claims first, so C
 * waits behind A. */
static void
test_a_sleeper_whose_window_passed_goes_before_a_later_arrival(void **s) {
  (void)s;
  struct scene sc;
  scene_start(&sc, true);
  now_ms = 1010;
  cq_req rl;
  cqt_req(&rl, pool, "b:1");
  assert_cq_ok(cq_req_set_hold_limit(&rl, 1000));
  cqt_slot c;
  cqt_slot_init(&c, &rec, "C");
  assert_cq_ok(cq_grant_submit(pool, &c.grant, &rl, CQ_NEVER, cqt_record_cb));
  assert_log(&rec, ""); /* waits: the free unit is withheld for A */
  expect_a_claims(&sc);
  assert_cq_ok(cq_grant_release(pool, &sc.h));
  assert_cq_ok(cqt_acquire_join(&sc.a));
  assert_log(&rec, "");
  assert_cq_ok(cq_grant_release(pool, &sc.a.grant));
  assert_log(&rec, "C");
  assert_cq_ok(cq_grant_release(pool, &c.grant));
  assert_int_equal(cqt_budget(pool, "b").in_use, 0);
}

/* A claims in its place by arrival, ahead of younger waiters: C (a
 * callback, which claims at once) arrived after A, yet A goes first. */
static void test_a_converted_acquire_goes_before_younger_waiters(void **s) {
  (void)s;
  struct scene sc;
  scene_start(&sc, true);
  advance_to(1005);
  cqt_slot c;
  cqt_slot_init(&c, &rec, "C");
  assert_cq_ok(
      cq_grant_submit(pool, &c.grant, &sc.r2, CQ_NEVER, cqt_record_cb));
  advance_to(1010); /* A's window ends; it claims before C */
  assert_cq_ok(cq_grant_release(pool, &sc.h));
  assert_cq_ok(cqt_acquire_join(&sc.a));
  assert_log(&rec, "");
  assert_cq_ok(cq_grant_release(pool, &sc.a.grant));
  assert_log(&rec, "C");
  assert_cq_ok(cq_grant_release(pool, &c.grant));
}

/* With its own clock the pool needs no expire: the sleeping thread ends its
 * window by itself, and from then on its order is strict. */
static void
test_after_the_window_the_order_is_strict_on_a_pool_with_its_own_clock(
    void **s) {
  (void)s;
  replace_pool(0, 1, false);
  struct scene sc;
  scene_start(&sc, false);
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (stats().converted == 0) {
    if (cq_now() > give_up)
      fail_msg("the acquire never claimed its place");
    cqt_sleep_ms(1);
  }
  assert_int_equal(cqt_budget(pool, "b").withheld, 1);
  assert_true(try_refused(&sc));
  scene_end(&sc);
}

/* CQ_POOL_STRICT_ORDER: no window. A claims at once, as before bounded
 * barging: the free unit is withheld, a try is refused, nothing converts. */
static void test_a_zero_window_gives_todays_grant_order(void **s) {
  (void)s;
  replace_pool(CQ_POOL_STRICT_ORDER, 0, true);
  struct scene sc;
  scene_start(&sc, true);
  assert_int_equal(cqt_budget(pool, "b").withheld, 1);
  assert_true(try_refused(&sc));
  cqt_slot c;
  cqt_slot_init(&c, &rec, "C");
  assert_cq_ok(
      cq_grant_submit(pool, &c.grant, &sc.r2, CQ_NEVER, cqt_record_cb));
  scene_end(&sc); /* A first, as it arrived first */
  assert_log(&rec, "C");
  assert_cq_ok(cq_grant_release(pool, &c.grant));
  assert_int_equal(stats().converted, 0);
}

/* Backfill pools have no window: the shadow time counts on every waiter's
 * place. */
static void test_backfill_pools_have_no_window(void **s) {
  (void)s;
  replace_pool(CQ_POOL_BACKFILL, 10, true);
  struct scene sc;
  scene_start(&sc, true);
  assert_true(try_refused(&sc));
  scene_end(&sc);
}

/* Four sleepers on a budget of one unit, with a window that never ends
 * here: every release wakes exactly one, which takes the unit itself. */
#define SLEEPERS 4
static void test_each_release_wakes_one_sleeper_that_fits(void **s) {
  (void)s;
  replace_pool(0, CQ_BARGE_MAX_MS, false);
  assert_cq_ok(cq_budget_set_capacity(pool, "b", 1));
  cq_grant h;
  cq_req r1;
  hold(&h, &r1, "b:1");
  static cqt_acquirer a[SLEEPERS];
  for (int i = 0; i < SLEEPERS; i++) {
    cqt_acquire_start(&a[i], pool, &r1, CQ_NEVER);
    cqt_wait_for_waiters(pool, (uint64_t)i + 1);
  }
  cq_pool_stats before = stats();
  cq_grant *holder = &h;
  bool done[SLEEPERS] = {false};
  for (int k = 0; k < SLEEPERS; k++) {
    assert_cq_ok(cq_grant_release(pool, holder));
    /* Exactly one returns: the one woken. */
    int64_t give_up = cq_now() + CQT_PATIENCE_MS;
    int got = -1;
    while (got < 0) {
      for (int i = 0; i < SLEEPERS; i++)
        if (!done[i] && cqt_acquire_returned(&a[i]))
          got = i;
      if (got < 0 && cq_now() > give_up)
        fail_msg("no sleeper took the unit");
      if (got < 0)
        cqt_sleep_ms(1);
    }
    done[got] = true;
    assert_cq_ok(cqt_acquire_join(&a[got]));
    assert_int_equal(cqt_waiting(pool), (uint64_t)(SLEEPERS - 1 - k));
    holder = &a[got].grant;
  }
  assert_cq_ok(cq_grant_release(pool, holder));
  cq_pool_stats after = stats();
  assert_int_equal(after.waited_grants - before.waited_grants, SLEEPERS);
  assert_int_equal(after.wakeups - before.wakeups, SLEEPERS);
  assert_int_equal(after.converted, 0);
}

/* The unit is held by a lock-free grant; a sleeper wants it. The lock-free
 * release must come to the lock to wake the sleeper (the budget's sleepers
 * bit), or the sleeper would sleep out its window, which here never ends. */
static void test_a_lock_free_release_wakes_a_sleeper(void **s) {
  (void)s;
  replace_pool(0, CQ_BARGE_MAX_MS, false);
  cq_grant h;
  cq_req r2;
  hold(&h, &r2, "b:2");
  cqt_acquirer a;
  cqt_acquire_start(&a, pool, &r2, CQ_NEVER);
  cqt_wait_for_waiters(pool, 1);
  assert_cq_ok(cq_grant_release(pool, &h));
  wait_returned(&a);
  assert_cq_ok(cqt_acquire_join(&a));
  assert_cq_ok(cq_grant_release(pool, &a.grant));
}

/* A sleeper leaves on every path with its outcome and holds nothing:
 * cancelled, timed out, failed by a shrink, closed. */
static void test_sleepers_leave_on_every_path_holding_nothing(void **s) {
  (void)s;
  replace_pool(0, CQ_BARGE_MAX_MS, false);
  cq_grant h;
  cq_req rh, r2;
  hold(&h, &rh, "b:1");
  cqt_req(&r2, pool, "b:2");
  cqt_acquirer a;

  cqt_acquire_start(&a, pool, &r2, CQ_NEVER);
  cqt_wait_for_waiters(pool, 1);
  assert_cq_ok(cq_grant_cancel(pool, &a.grant));
  assert_int_equal(cqt_acquire_join(&a), CQ_ECANCELED);

  cqt_acquire_start(&a, pool, &r2, cq_now() + 20);
  assert_int_equal(cqt_acquire_join(&a), CQ_ETIMEDOUT);
  assert_true(a.returned_at >= a.deadline);

  cqt_acquire_start(&a, pool, &r2, CQ_NEVER);
  cqt_wait_for_waiters(pool, 1);
  assert_cq_ok(cq_budget_set_capacity(pool, "b", 1));
  assert_int_equal(cqt_acquire_join(&a), CQ_ENEVER);
  assert_cq_ok(cq_budget_set_capacity(pool, "b", 2));

  cqt_acquire_start(&a, pool, &r2, CQ_NEVER);
  cqt_wait_for_waiters(pool, 1);
  assert_cq_ok(cq_pool_close(pool));
  assert_int_equal(cqt_acquire_join(&a), CQ_ECLOSED);

  assert_false(cq_grant_is_held(&a.grant));
  assert_int_equal(cqt_budget(pool, "b").in_use, 1);
  assert_int_equal(cqt_waiting(pool), 0);
  assert_cq_ok(cq_grant_release(pool, &h));
  assert_int_equal(cqt_budget(pool, "b").in_use, 0);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_a_sleeping_acquire_claims_nothing_so_a_try_may_overtake_it),
      T(test_once_its_window_has_passed_it_claims_its_place_and_nobody_overtakes),
      T(test_a_sleeper_whose_window_passed_is_claimed_by_a_try),
      T(test_a_sleeper_whose_window_passed_is_claimed_by_a_release),
      T(test_a_nudged_sleeper_granted_by_another_event_is_woken_once),
      T(test_a_lock_free_try_after_the_window_finds_the_sleeper_claiming),
      T(test_a_sleeper_whose_window_passed_goes_before_a_later_arrival),
      T(test_a_converted_acquire_goes_before_younger_waiters),
      T(test_after_the_window_the_order_is_strict_on_a_pool_with_its_own_clock),
      T(test_a_zero_window_gives_todays_grant_order),
      T(test_backfill_pools_have_no_window),
      T(test_each_release_wakes_one_sleeper_that_fits),
      T(test_a_lock_free_release_wakes_a_sleeper),
      T(test_sleepers_leave_on_every_path_holding_nothing),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
