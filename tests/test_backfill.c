/*
 * Hold limits and backfill (CQ_POOL_BACKFILL): the hand-worked cases of the
 * specification's "Backfill" section, each a test, on a pool that runs on the
 * test's own clock (manual timers), so that every time below is exact.
 *
 * Notation in the comments: A holds cpu:6 until 100 means A was granted 6
 * units of `cpu` at time 0 with a hold limit of 100 ms. H is the head: the
 * oldest waiter. S is its shadow time.
 */
#include "support/cqt.h"

#include <stdbool.h>

static int64_t now_ms;
static int64_t test_clock(void *arg) {
  (void)arg;
  return now_ms;
}

/* Events seen by the hook: their types, in order. */
static cq_event_type events[64];
static int64_t event_wait[64];
static int n_events;
static void on_event(const cq_event *ev, void *arg) {
  (void)arg;
  if (n_events < 64) {
    event_wait[n_events] = ev->wait_ms;
    events[n_events++] = ev->type;
  }
}

static cq_pool *pool;
static cqt_rec rec;

static cq_pool *make_pool(unsigned flags, bool hook) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = flags | CQ_POOL_MANUAL_TIMERS;
  cfg.clock = test_clock;
  if (hook)
    cfg.on_event = on_event;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  return p;
}

static int setup(void **state) {
  (void)state;
  now_ms = 0;
  n_events = 0;
  cqt_rec_init(&rec);
  pool = make_pool(CQ_POOL_BACKFILL, true);
  assert_cq_ok(cq_budget_add(pool, "cpu", 10));
  assert_cq_ok(cq_budget_add(pool, "mem", 10));
  assert_cq_ok(cq_budget_add(pool, "other", 10));
  assert_cq_ok(cq_devices_add(pool, "gpu", 8, NULL));
  return 0;
}

/* Run the test on a pool of its own instead of the fixture's; teardown
 * checks and destroys it as usual. */
static void replace_pool(unsigned flags, bool hook) {
  assert_cq_ok(cq_pool_destroy(pool));
  pool = make_pool(flags, hook);
}

static int teardown(void **state) {
  (void)state;
  assert_int_equal(cqt_waiting(pool), 0);
  assert_cq_ok(cq_pool_destroy(pool));
  pthread_mutex_destroy(&rec.lock);
  return 0;
}

/* A job: its request (items from a spec, a limit) and its grant. */
struct job {
  cq_req req;
  cqt_slot slot;
};

static void job_make(struct job *j, const char *name, const char *spec,
                     int64_t limit_ms) {
  assert_cq_ok(cq_req_init(&j->req, pool));
  if (cq_req_parse(&j->req, spec) != 0)
    fail_msg("spec %s: %s", spec, cq_req_error(&j->req));
  assert_cq_ok(cq_req_set_hold_limit(&j->req, limit_ms));
  cqt_slot_init(&j->slot, &rec, name);
}

/* Submit at the current time; returns whether it was granted at once. */
static bool job_submit(struct job *j, const char *name, const char *spec,
                       int64_t limit_ms) {
  job_make(j, name, spec, limit_ms);
  assert_cq_ok(
      cq_grant_submit(pool, &j->slot.grant, &j->req, CQ_NEVER, cqt_record_cb));
  return j->slot.calls == 1 && j->slot.status == 0;
}

static bool granted(const struct job *j) {
  return j->slot.calls == 1 && j->slot.status == 0;
}

static void release(struct job *j) {
  assert_cq_ok(cq_grant_release(pool, &j->slot.grant));
}

static void cancel(struct job *j) {
  assert_cq_ok(cq_grant_cancel(pool, &j->slot.grant));
}

/* Move the clock and let the pool see it. */
static void advance_to(int64_t t) {
  now_ms = t;
  assert_cq_ok(cq_pool_expire(pool, NULL));
}

static cq_pool_stats stats(void) {
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(pool, &st));
  return st;
}

/* ------------------------------------------------------------------------ */

/* A holds cpu:6 until 100; H asks cpu:8 and waits, the 4 free withheld for
 * it (min(free, need)). S = 100, when A's 6 come back.
 * Y asks cpu:3 for 50 ms at 10: it ends at 60, before S: backfilled into
 * what is withheld for H. */
static void
test_young_short_job_backfills_capacity_withheld_for_claimant(void **state) {
  (void)state;
  struct job a, h, y;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  advance_to(10);
  assert_true(job_submit(&y, "Y", "cpu=3", 50));
  assert_int_equal(stats().backfilled, 1);
  /* Without a limit the same request waits behind H. */
  struct job z;
  assert_false(job_submit(&z, "Z", "cpu=1", 0));
  advance_to(60);
  release(&y);
  advance_to(100);
  release(&a); /* H gets 8 at S, then Z one of the 2 left */
  assert_log(&rec, "A Y H Z");
  release(&h);
  release(&z);
  assert_int_equal(stats().late_heads, 0);
}

/* The same, but Y would hold 3 until 510, past S, and H needs 8 of the 10
 * at S: backfilling it would delay H, so it waits. */
static void test_young_long_job_is_not_backfilled(void **state) {
  (void)state;
  struct job a, h, y;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  advance_to(10);
  assert_false(job_submit(&y, "Y", "cpu=3", 500));
  assert_int_equal(stats().backfilled, 0);
  advance_to(100);
  release(&a);
  assert_log(&rec, "A H");
  release(&h);
  assert_true(granted(&y));
  release(&y);
}

/* H asks cpu:5; at S = 100 there will be 10 free, so a job of 2 that runs
 * past S still leaves H its 5: it uses only capacity H will not need, and
 * is backfilled however long it runs. */
static void
test_young_job_on_capacity_head_will_not_need_backfills(void **state) {
  (void)state;
  struct job a, h, y;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=5", 0));
  advance_to(10);
  assert_true(job_submit(&y, "Y", "cpu=2", 1000000));
  assert_int_equal(stats().backfilled, 1);
  advance_to(100);
  release(&a);
  assert_true(granted(&h)); /* at S, with Y still running */
  release(&h);
  release(&y);
  assert_int_equal(stats().late_heads, 0);
}

/* The edge of "ends by S": with S = 100, a job granted at 10 with a limit
 * of 90 ends at S and is backfilled; one with 91 would hold 3 units past S,
 * when H needs 8 of the 10, and is not. */
static void test_job_ending_exactly_at_shadow_backfills(void **state) {
  (void)state;
  struct job a, h, y, y2;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  advance_to(10);
  assert_false(job_submit(&y2, "Y2", "cpu=3", 91));
  assert_true(job_submit(&y, "Y", "cpu=3", 90));
  advance_to(100);
  release(&y);
  release(&a);
  assert_true(granted(&h));
  release(&h);
  assert_true(granted(&y2));
  release(&y2);
}

/* Long backfills share what H will not need at S, and no more. A holds
 * cpu:6 until 100; H asks cpu:7, so at S = 100 it leaves 3 of the 10. Y1
 * (2) and Y2 (1), both running long, take those 3; Y3 (1) would leave H
 * short and waits. At 100 H gets exactly its 7. */
static void test_long_backfills_share_what_head_will_not_need(void **state) {
  (void)state;
  struct job a, h, y1, y2, y3;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=7", 0));
  advance_to(10);
  assert_true(job_submit(&y1, "Y1", "cpu=2", 1000000));
  assert_true(job_submit(&y2, "Y2", "cpu=1", 1000000));
  assert_false(job_submit(&y3, "Y3", "cpu=1", 1000000));
  assert_int_equal(stats().backfilled, 2);
  advance_to(100);
  release(&a);
  assert_true(granted(&h));
  assert_false(granted(&y3));
  release(&h);
  assert_true(granted(&y3));
  release(&y1);
  release(&y2);
  release(&y3);
  assert_int_equal(stats().late_heads, 0);
}

/* A holds cpu:6 without a limit: H (cpu:8) cannot fit without A's units,
 * so S is unknown and nothing is backfilled, not even a 1 ms job. */
static void
test_unlimited_holder_head_needs_makes_shadow_unknown(void **state) {
  (void)state;
  struct job a, h, y;
  assert_true(job_submit(&a, "A", "cpu=6", 0));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  assert_false(job_submit(&y, "Y", "cpu=1", 1));
  assert_int_equal(stats().backfilled, 0);
  release(&a);
  assert_log(&rec, "A H Y");
  release(&h);
  release(&y);
}

/* U holds cpu:2 without a limit, A cpu:6 until 100. H (cpu:8) fits at 100
 * without U's units (2 free + A's 6): S is known, and backfill goes on. */
static void
test_unlimited_holder_head_does_not_need_keeps_shadow_known(void **state) {
  (void)state;
  struct job u, a, h, y;
  assert_true(job_submit(&u, "U", "cpu=2", 0));
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  advance_to(10);
  assert_true(job_submit(&y, "Y", "cpu=2", 50));
  advance_to(60);
  release(&y);
  advance_to(100);
  release(&a);
  assert_true(granted(&h));
  release(&h);
  release(&u);
}

/* A outlives its limit: at 100 it is overdue (an event, a count) and keeps
 * its units. For the next head it holds for ever: H2 cannot fit without
 * it, so its S is unknown and a 1 ms job is not backfilled. */
static void test_overdue_holder_raises_event_and_holds_for_ever(void **state) {
  (void)state;
  struct job a, h, h2, y;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  assert_false(job_submit(&h2, "H2", "cpu=7", 0));
  int64_t next;
  assert_cq_ok(cq_pool_expire(pool, &next));
  assert_int_equal(next, 100); /* the pool's next timer: A's limit */
  n_events = 0;
  advance_to(100);
  assert_int_equal(stats().overdue, 1);
  assert_int_equal(n_events, 1);
  assert_int_equal(events[0], CQ_EVENT_OVERDUE);
  assert_int_equal(event_wait[0], 100); /* the limit it outlived */
  assert_cq_ok(cq_pool_expire(pool, &next));
  assert_int_equal(next, CQ_NEVER);
  assert_int_equal(cqt_budget(pool, "cpu").in_use, 6); /* kept */
  cancel(&h);
  assert_false(job_submit(&y, "Y", "cpu=1", 1));
  assert_int_equal(stats().backfilled, 0);
  release(&a);
  assert_true(granted(&h2));
  release(&h2);
  assert_true(granted(&y));
  release(&y);
}

/* H asks cpu:8 and mem:5; it lacks only cpu, so it claims only cpu. S = 100
 * (A's cpu back; mem free). A backfill computes it. Then B takes mem:8 as an
 * ordinary grant until 1000, which H had not claimed: H will now fit only at
 * 1000, but S stays 100. A job that ends by 1000 but not by 100, and that
 * would leave H short at 100, is not backfilled; H, granted at 1000, counts
 * as a late head. A recomputation (forced by a capacity change elsewhere)
 * keeps the earlier S too. */
static void
test_shadow_does_not_move_later_when_base_grant_takes_unclaimed(void **state) {
  (void)state;
  struct job a, h, y, b, y2;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8,mem=5", 0));
  advance_to(10);
  assert_true(job_submit(&y, "Y", "cpu=1", 50)); /* S computed: 100 */
  assert_true(job_submit(&b, "B", "mem=8", 990));
  assert_int_equal(stats().backfilled, 1); /* B was an ordinary grant */
  assert_cq_ok(cq_budget_set_capacity(pool, "other", 11));
  advance_to(20);
  assert_false(job_submit(&y2, "Y2", "cpu=1", 500)); /* 520 > S = 100 */
  advance_to(60);
  release(&y);
  advance_to(100);
  release(&a);
  assert_false(granted(&h)); /* short of mem */
  advance_to(1000);
  release(&b);
  assert_true(granted(&h));
  assert_int_equal(stats().late_heads, 1);
  release(&h);
  assert_true(granted(&y2));
  release(&y2);
}

/* Eight devices; A holds 0.5 of device 0 until 100; H asks all 8 whole and
 * reserves them. S = 100. A fraction that ends by 100 is backfilled, best
 * fit: onto device 0, which is busy until S anyway. One that would run past
 * S is not: H needs every device at S. */
static void test_eight_device_claimant_with_fractions_backfilled(void **state) {
  (void)state;
  struct job a, h, y, y2;
  assert_true(job_submit(&a, "A", "gpu=0.5", 100));
  assert_false(job_submit(&h, "H", "gpu=8", 0));
  advance_to(10);
  assert_true(job_submit(&y, "Y", "gpu=0.25", 50));
  uint32_t dev = 99;
  assert_int_equal(cq_grant_devices(&y.slot.grant, "gpu", &dev, 1), 1);
  assert_int_equal(dev, 0);
  assert_false(job_submit(&y2, "Y2", "gpu=0.25", 500));
  advance_to(60);
  release(&y);
  advance_to(100);
  release(&a);
  assert_true(granted(&h));
  release(&h);
  assert_true(granted(&y2));
  release(&y2);
  assert_int_equal(stats().late_heads, 0);
}

/* A fractional claimant: a pool of two devices, A holds 0.6 of device 0
 * until 100 and B all of device 1 until 200. H asks 0.5 and reserves device
 * 0, the most free. S = 100. Y (0.3 until 60) fits only on device 0:
 * backfilled there, as it ends by S. Y2 (0.1, running long) also fits only
 * on device 0, and at S device 0 will still have 0.9 for H: backfilled,
 * however long it runs. */
static void test_fractional_claimant_and_its_reserved_device(void **state) {
  (void)state;
  replace_pool(CQ_POOL_BACKFILL, false);
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  struct job a, b, h, y, y2;
  assert_true(job_submit(&a, "A", "gpu=0.6", 100));
  assert_true(job_submit(&b, "B", "gpu=1", 200)); /* device 1, whole */
  assert_false(job_submit(&h, "H", "gpu=0.5", 0));
  advance_to(10);
  assert_true(job_submit(&y, "Y", "gpu=0.3", 50));
  uint32_t dev = 99;
  assert_int_equal(cq_grant_devices(&y.slot.grant, "gpu", &dev, 1), 1);
  assert_int_equal(dev, 0);
  assert_true(job_submit(&y2, "Y2", "gpu=0.1", 1000000));
  assert_int_equal(cq_grant_devices(&y2.slot.grant, "gpu", &dev, 1), 1);
  assert_int_equal(dev, 0);
  assert_int_equal(stats().backfilled, 2);
  advance_to(60);
  release(&y);
  advance_to(100);
  release(&a);
  assert_true(granted(&h));
  assert_int_equal(stats().late_heads, 0);
  release(&h);
  release(&y2);
  release(&b);
}

/* Backfill respects one claimant per device pool, as on a budget, not the
 * reservation of every waiter. H (cpu:8) is the head, S = 100. Three
 * devices at [0.2, 0.3, 0.4] free; W1 and W2 (0.5 each, no limit) wait
 * behind H, W1 reserving device 2 and W2 device 1. Y (0.3 until 60) is
 * backfilled onto W2's device 1, which an ordinary grant could not use;
 * Y2 (0.4 until 60) would fit only on device 2, the claimant W1's, and
 * waits. */
static void
test_backfill_respects_one_device_claimant_not_every_waiter(void **state) {
  (void)state;
  replace_pool(CQ_POOL_BACKFILL, false);
  assert_cq_ok(cq_budget_add(pool, "cpu", 10));
  assert_cq_ok(cq_devices_add(pool, "gpu", 3, NULL));
  struct job a, d[3], h, w1, w2, y, y2;
  static const char *const held[3] = {"gpu=0.8", "gpu=0.7", "gpu=0.6"};
  for (int i = 0; i < 3; i++)
    assert_true(job_submit(&d[i], "D", held[i], 1000));
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  assert_false(job_submit(&w1, "W1", "gpu=0.5", 0));
  assert_false(job_submit(&w2, "W2", "gpu=0.5", 0));
  cq_device_stats ds;
  assert_cq_ok(cq_device_stats_get(pool, "gpu", 0, &ds));
  assert_false(ds.reserved);
  advance_to(10);
  assert_true(job_submit(&y, "Y", "gpu=0.3", 50));
  uint32_t dev = 99;
  assert_int_equal(cq_grant_devices(&y.slot.grant, "gpu", &dev, 1), 1);
  assert_int_equal(dev, 1);
  assert_int_equal(stats().backfilled, 1);
  assert_false(job_submit(&y2, "Y2", "gpu=0.4", 50));
  advance_to(60);
  release(&y);
  cancel(&y2);
  advance_to(100);
  release(&a);
  assert_true(granted(&h));
  release(&h);
  advance_to(1000);
  for (int i = 0; i < 3; i++)
    release(&d[i]);
  assert_true(granted(&w1));
  assert_true(granted(&w2));
  release(&w1);
  release(&w2);
  assert_int_equal(stats().late_heads, 0);
}

/* H1 (cpu:8) has S = 100; H2 (cpu:10) behind it would have S = 300. Y
 * (cpu:2 until 160) cannot pass H1 and waits. Cancelling H1 hands the claim
 * to H2 with a fresh S = 300: Y, waiting, is backfilled at once. */
static void
test_cancelled_head_hands_claim_and_fresh_shadow_to_next(void **state) {
  (void)state;
  struct job a, b, h1, h2, y;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_true(job_submit(&b, "B", "cpu=2", 300));
  assert_false(job_submit(&h1, "H1", "cpu=8", 0));
  assert_false(job_submit(&h2, "H2", "cpu=10", 0));
  advance_to(10);
  assert_false(job_submit(&y, "Y", "cpu=2", 150));
  cancel(&h1);
  assert_true(granted(&y));
  assert_int_equal(stats().backfilled, 1);
  advance_to(100);
  release(&a);
  advance_to(160);
  release(&y);
  advance_to(300);
  release(&b);
  assert_true(granted(&h2));
  release(&h2);
  assert_int_equal(stats().late_heads, 0);
}

/* The promise through a timeout and capacity changes: A holds cpu:6 until
 * 100, H asks cpu:8 (S = 100). W waits with a deadline and times out; Y is
 * backfilled until 50; the capacity grows to 12, then shrinks to 9. H is
 * granted at 100, when A lets go: no later than S. */
static void test_timeouts_and_capacity_changes_keep_the_promise(void **state) {
  (void)state;
  struct job a, h, w, y;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  job_make(&w, "W", "cpu=5", 0);
  assert_cq_ok(cq_grant_submit(pool, &w.slot.grant, &w.req, 40, cqt_record_cb));
  advance_to(10);
  assert_true(job_submit(&y, "Y", "cpu=2", 40));
  advance_to(40);
  assert_int_equal(w.slot.status, CQ_ETIMEDOUT);
  advance_to(50);
  release(&y);
  assert_cq_ok(cq_budget_set_capacity(pool, "cpu", 12));
  assert_false(granted(&h)); /* 12 - 6 = 6 < 8 */
  advance_to(70);
  assert_cq_ok(cq_budget_set_capacity(pool, "cpu", 9));
  advance_to(100);
  release(&a);
  assert_true(granted(&h));
  release(&h);
  assert_int_equal(stats().late_heads, 0);
}

/* With backfill on, a try without a limit still never passes a waiter that
 * has claimed what it needs; a try with a limit that ends by S does. */
static void test_try_without_limit_never_barges(void **state) {
  (void)state;
  struct job a, h;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  cq_req plain, limited;
  assert_cq_ok(cq_req_init(&plain, pool));
  assert_cq_ok(cq_req_add(&plain, "cpu", 2));
  assert_cq_ok(cq_req_init(&limited, pool));
  assert_cq_ok(cq_req_add(&limited, "cpu", 2));
  assert_cq_ok(cq_req_set_hold_limit(&limited, 30));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_err(cq_grant_try(pool, &g, &plain), CQ_EBUSY);
  assert_cq_ok(cq_grant_try(pool, &g, &limited));
  assert_cq_ok(cq_grant_release(pool, &g));
  release(&a);
  release(&h);
}

/* Without CQ_POOL_BACKFILL a limit changes nothing about who goes first. */
static void test_limits_without_backfill_do_not_pass_the_head(void **state) {
  (void)state;
  replace_pool(0, false);
  assert_cq_ok(cq_budget_add(pool, "cpu", 10));
  struct job a, h, y;
  assert_true(job_submit(&a, "A", "cpu=6", 100));
  assert_false(job_submit(&h, "H", "cpu=8", 0));
  assert_false(job_submit(&y, "Y", "cpu=1", 1));
  release(&a);
  release(&h);
  release(&y);
  assert_int_equal(stats().backfilled, 0);
}

/* Bad limits are refused with a message and change nothing. */
static void test_hold_limit_arguments(void **state) {
  (void)state;
  cq_req req;
  assert_cq_err(cq_req_set_hold_limit(NULL, 5), CQ_EINVAL);
  memset(&req, 0, sizeof(req));
  assert_cq_err(cq_req_set_hold_limit(&req, 5), CQ_EINVAL); /* not init'd */
  assert_cq_ok(cq_req_init(&req, pool));
  assert_cq_ok(cq_req_add(&req, "cpu", 1));
  assert_cq_ok(cq_req_set_hold_limit(&req, 5));
  assert_cq_err(cq_req_set_hold_limit(&req, -1), CQ_ERANGE);
  assert_non_null(strstr(cq_req_error(&req), "hold limit -1 ms"));
  assert_cq_err(cq_req_set_hold_limit(&req, INT64_MAX), CQ_ERANGE);
  /* Still the 5 ms limit: it goes overdue at 5. */
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &req));
  advance_to(5);
  assert_int_equal(stats().overdue, 1);
  assert_cq_ok(cq_grant_release(pool, &g));
  /* 0 removes it: nothing goes overdue. */
  assert_cq_ok(cq_req_set_hold_limit(&req, 0));
  assert_cq_ok(cq_grant_try(pool, &g, &req));
  advance_to(1000000);
  assert_int_equal(stats().overdue, 1);
  assert_cq_ok(cq_grant_release(pool, &g));
  /* The flag is known. */
  cq_pool *p;
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_BACKFILL;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  assert_cq_ok(cq_pool_destroy(p));
}

/* On a pool with its own timer thread, a grant that outlives its limit is
 * marked overdue without anyone calling in. */
static void test_overdue_by_the_timer_thread(void **state) {
  (void)state;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_budget_add(p, "cpu", 1));
  cq_req req;
  assert_cq_ok(cq_req_init(&req, p));
  assert_cq_ok(cq_req_add(&req, "cpu", 1));
  assert_cq_ok(cq_req_set_hold_limit(&req, 5));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &req));
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  cq_pool_stats st;
  do {
    cqt_sleep_ms(1);
    assert_cq_ok(cq_pool_stats_get(p, &st));
  } while (st.overdue == 0 && cq_now() < give_up);
  assert_int_equal(st.overdue, 1);
  assert_cq_ok(cq_grant_release(p, &g));
  assert_cq_ok(cq_pool_destroy(p));
}

/*
 * Found by the model-based test, in its shrunk form. On budgets b0 = 3 and b1 =
 * 1: A holds b0:1 until 10, B holds b1:1 with no limit; H asks b0:3 (S = 10). C
 * asks b0:1 and is cancelled, which runs the backfill pass for nothing. W asks
 * b0:1 and b1:1 for 5 ms: it is blocked on b0, where H withholds the 2 free.
 * When B releases b1, on which no one is blocked, W fits once H's withholding
 * is disregarded and ends at 5, before S: it is backfilled then, not left
 * waiting until b0 frees.
 */
static void
test_release_no_one_is_blocked_on_still_lets_backfill_run(void **state) {
  (void)state;
  replace_pool(CQ_POOL_BACKFILL, true);
  assert_cq_ok(cq_budget_add(pool, "b0", 3));
  assert_cq_ok(cq_budget_add(pool, "b1", 1));
  struct job a, b, h, c, w;
  assert_true(job_submit(&a, "A", "b0=1", 10));
  assert_true(job_submit(&b, "B", "b1=1", 0));
  assert_false(job_submit(&h, "H", "b0=3", 0));
  assert_false(job_submit(&c, "C", "b0=1", 0));
  cancel(&c);
  assert_false(job_submit(&w, "W", "b0=1,b1=1", 5));
  release(&b);
  assert_true(granted(&w));
  assert_int_equal(stats().backfilled, 1);
  release(&w);
  advance_to(10);
  release(&a);
  assert_true(granted(&h));
  release(&h);
  assert_int_equal(stats().late_heads, 0);
}

/*
 * Found by the model-based test: a grant made without the lock was released
 * without the lock, so the head's projection never learnt of it. In a backfill
 * pool, with no event hook, nothing takes the lock-free path now. `slot` is a
 * class of 2. S1 takes slot:1 with no limit; A holds cpu:6 and slot:1 until
 * 100; H asks cpu:8 and slot:1 (S = 100: A frees both). Y asks slot:1 for 50 ms
 * at 60, ending at 110, after S: not yet, since at S only A's slot comes back
 * and H takes it. At 70 S1 releases: at S two slots are free, one for H and one
 * for Y, so Y is backfilled.
 */
static void
test_release_of_unlimited_grant_updates_the_shadow_projection(void **state) {
  (void)state;
  replace_pool(CQ_POOL_BACKFILL, false); /* no hook */
  assert_cq_ok(cq_budget_add(pool, "cpu", 10));
  assert_cq_ok(cq_class_add(pool, "slot", 2));
  struct job s1, a, h, y;
  assert_true(job_submit(&s1, "S1", "class=slot", 0));
  assert_true(job_submit(&a, "A", "cpu=6,class=slot", 100));
  assert_false(job_submit(&h, "H", "cpu=8,class=slot", 0));
  advance_to(60);
  assert_false(job_submit(&y, "Y", "class=slot", 50));
  advance_to(70);
  release(&s1);
  assert_true(granted(&y));
  release(&y);
  advance_to(100);
  release(&a);
  assert_true(granted(&h));
  release(&h);
  assert_int_equal(stats().late_heads, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(test_young_short_job_backfills_capacity_withheld_for_claimant),
      T(test_young_long_job_is_not_backfilled),
      T(test_young_job_on_capacity_head_will_not_need_backfills),
      T(test_job_ending_exactly_at_shadow_backfills),
      T(test_long_backfills_share_what_head_will_not_need),
      T(test_unlimited_holder_head_needs_makes_shadow_unknown),
      T(test_unlimited_holder_head_does_not_need_keeps_shadow_known),
      T(test_overdue_holder_raises_event_and_holds_for_ever),
      T(test_shadow_does_not_move_later_when_base_grant_takes_unclaimed),
      T(test_eight_device_claimant_with_fractions_backfilled),
      T(test_fractional_claimant_and_its_reserved_device),
      T(test_backfill_respects_one_device_claimant_not_every_waiter),
      T(test_cancelled_head_hands_claim_and_fresh_shadow_to_next),
      T(test_timeouts_and_capacity_changes_keep_the_promise),
      T(test_try_without_limit_never_barges),
      T(test_limits_without_backfill_do_not_pass_the_head),
      T(test_hold_limit_arguments),
      T(test_overdue_by_the_timer_thread),
      T(test_release_no_one_is_blocked_on_still_lets_backfill_run),
      T(test_release_of_unlimited_grant_updates_the_shadow_projection),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
