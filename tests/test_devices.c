/*
 * Device pools: fractions and whole devices, per-device admission, best-fit
 * placement, reservation on devices (scenarios 1-8), validation, exactness, and
 * the grant's device ids. State is written as free capacity per device, in
 * thousandths.
 */
#define CQT_POOL_FIXTURE
#include "support/cqt.h"

#include <stdlib.h>

/* Free thousandths of each device of pool "gpu", as "500 400". */
static const char *free_str(void) {
  static char buf[256];
  cq_resource_stats ps;
  assert_cq_ok(cq_resource_stats_get(pool, "gpu", &ps));
  buf[0] = '\0';
  for (uint32_t i = 0; i < ps.devices; i++) {
    cq_device_stats d;
    assert_cq_ok(cq_device_stats_get(pool, "gpu", i, &d));
    char one[32];
    snprintf(one, sizeof(one), "%s%lld", i ? " " : "",
             (long long)(CQ_DEVICE_MILLI - d.used_milli));
    strcat(buf, one);
  }
  return buf;
}

/* The devices of "gpu" that some waiter reserves, as a bit mask. */
static unsigned reserved_mask(void) {
  cq_resource_stats ps;
  assert_cq_ok(cq_resource_stats_get(pool, "gpu", &ps));
  unsigned mask = 0;
  for (uint32_t i = 0; i < ps.devices; i++) {
    cq_device_stats d;
    assert_cq_ok(cq_device_stats_get(pool, "gpu", i, &d));
    if (d.reserved)
      mask |= 1u << i;
  }
  return mask;
}

/* The one device a held grant has on "gpu". */
static int device_of(cq_grant *g) {
  uint32_t idx[4];
  assert_int_equal(cq_grant_devices(g, "gpu", idx, 4), 1);
  return (int)idx[0];
}

static void frac_req(cq_req *r, int64_t milli) {
  assert_cq_ok(cq_req_init(r, pool));
  assert_cq_ok(cq_req_add_fraction(r, "gpu", milli));
}

static void whole_req(cq_req *r, int64_t n) {
  assert_cq_ok(cq_req_init(r, pool));
  assert_cq_ok(cq_req_add_devices(r, "gpu", n));
}

/* Take a fraction now; it must fit. Returns its device. */
static int take(cq_grant *g, cq_req *r, int64_t milli) {
  frac_req(r, milli);
  cq_grant_init(g);
  assert_cq_ok(cq_grant_try(pool, g, r));
  return device_of(g);
}

static void submit_frac(cqt_slot *s, const char *name, cq_req *r,
                        int64_t milli) {
  frac_req(r, milli);
  cqt_slot_init(s, &rec, name);
  assert_cq_ok(cq_grant_submit(pool, &s->grant, r, CQ_NEVER, cqt_record_cb));
}

static void submit_whole(cqt_slot *s, const char *name, cq_req *r, int64_t n) {
  whole_req(r, n);
  cqt_slot_init(s, &rec, name);
  assert_cq_ok(cq_grant_submit(pool, &s->grant, r, CQ_NEVER, cqt_record_cb));
}

/* Two devices at [500, 400]: 0.5 lands on device 0, 0.6 on device 1. */
static void two_at_500_400(cq_grant *h0, cq_grant *h1, cq_req *r0, cq_req *r1) {
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  assert_int_equal(take(h0, r0, 500), 0);
  assert_int_equal(take(h1, r1, 600), 1);
  assert_string_equal(free_str(), "500 400");
}

/* Scenario 1. */
static void
test_fraction_waiter_reserves_one_device_others_use_the_rest(void **state) {
  (void)state;
  cq_grant h0, h1;
  cq_req r0, r1, ra, rb;
  cqt_slot t1, t2;
  two_at_500_400(&h0, &h1, &r0, &r1);
  submit_frac(&t1, "T1", &ra, 600);
  assert_log(&rec, "");
  assert_int_equal(reserved_mask(), 1u << 0);
  submit_frac(&t2, "T2", &rb, 300);
  assert_log(&rec, "T2");
  assert_int_equal(device_of(&t2.grant), 1);
  assert_cq_ok(cq_grant_cancel(pool, &t1.grant));
  assert_cq_ok(cq_grant_release(pool, &t2.grant));
  assert_cq_ok(cq_grant_release(pool, &h0));
  assert_cq_ok(cq_grant_release(pool, &h1));
}

/* Scenario 2. */
static void test_freed_capacity_goes_to_the_waiter_reserving_it(void **state) {
  (void)state;
  cq_grant h0, h1;
  cq_req r0, r1, ra, rb;
  cqt_slot t1, t2;
  two_at_500_400(&h0, &h1, &r0, &r1);
  submit_frac(&t1, "T1", &ra, 600);
  submit_frac(&t2, "T2", &rb, 700);
  assert_log(&rec, "");
  assert_cq_ok(cq_grant_release_device(pool, &h0, "gpu", 0, 100));
  assert_log(&rec, "T1");
  assert_int_equal(device_of(&t1.grant), 0);
  assert_cq_ok(cq_grant_release_device(pool, &h1, "gpu", 1, 300));
  assert_log(&rec, "T1 T2");
  assert_int_equal(device_of(&t2.grant), 1);
  assert_string_equal(free_str(), "0 0");
  assert_cq_ok(cq_grant_release(pool, &t1.grant));
  assert_cq_ok(cq_grant_release(pool, &t2.grant));
  assert_cq_ok(cq_grant_release(pool, &h0));
  assert_cq_ok(cq_grant_release(pool, &h1));
  assert_string_equal(free_str(), "1000 1000");
}

/* Scenario 3. */
static void
test_younger_waiter_is_granted_on_an_unreserved_device(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  cq_grant h0, h1;
  cq_req r0, r1, ra, rb;
  cqt_slot t1, t2;
  assert_int_equal(take(&h0, &r0, 500), 0);
  assert_int_equal(take(&h1, &r1, 800), 1);
  assert_string_equal(free_str(), "500 200");
  submit_frac(&t1, "T1", &ra, 600);
  submit_frac(&t2, "T2", &rb, 400);
  assert_log(&rec, "");
  assert_cq_ok(cq_grant_release_device(pool, &h1, "gpu", 1, 200));
  assert_log(&rec, "T2");
  assert_int_equal(device_of(&t2.grant), 1);
  assert_cq_ok(cq_grant_release(pool, &h0));
  assert_log(&rec, "T2 T1");
  assert_int_equal(device_of(&t1.grant), 0);
  assert_cq_ok(cq_grant_release(pool, &t1.grant));
  assert_cq_ok(cq_grant_release(pool, &t2.grant));
  assert_cq_ok(cq_grant_release(pool, &h1));
}

/* Scenario 4, the specification's worked example step by step. */
static void test_reservation_moves_to_the_device_with_most_free(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 3, NULL));
  cq_grant h[3];
  cq_req rh[3], ra, rb, ry;
  cqt_slot t1, t2, y;
  for (int i = 0; i < 3; i++)
    assert_int_equal(take(&h[i], &rh[i], 1000), i);
  submit_frac(&t1, "T1", &ra, 700);
  assert_int_equal(reserved_mask(), 1u << 0);
  submit_frac(&t2, "T2", &rb, 600);
  assert_int_equal(reserved_mask(), 1u << 0 | 1u << 1);
  assert_cq_ok(cq_grant_release_device(pool, &h[1], "gpu", 1, 500));
  /* Device 1 is now T1's, and T2 reserves the next, device 0: nothing is
   * granted. */
  assert_log(&rec, "");
  assert_int_equal(reserved_mask(), 1u << 1 | 1u << 0);
  assert_cq_ok(cq_grant_release_device(pool, &h[2], "gpu", 2, 600));
  assert_string_equal(free_str(), "0 500 600");
  assert_int_equal(reserved_mask(), 1u << 2 | 1u << 1);
  assert_log(&rec, ""); /* T2 may not take T1's device 2 */
  submit_frac(&y, "Y", &ry, 400);
  assert_log(&rec, "");                  /* Y fits only on reserved devices */
  assert_int_equal(reserved_mask(), 7u); /* Y reserves device 0 */
  assert_cq_ok(cq_grant_release_device(pool, &h[1], "gpu", 1, 100));
  assert_log(&rec, "T2");
  assert_int_equal(device_of(&t2.grant), 2);
  assert_int_equal(reserved_mask(), 1u << 1 | 1u << 0);
  assert_cq_ok(cq_grant_release_device(pool, &h[1], "gpu", 1, 100));
  assert_log(&rec, "T2 T1");
  assert_int_equal(device_of(&t1.grant), 1);
  assert_string_equal(free_str(), "0 0 0");
  assert_cq_ok(cq_grant_release(pool, &t1.grant));
  assert_log(&rec, "T2 T1 Y");
  assert_int_equal(device_of(&y.grant), 1);
  assert_cq_ok(cq_grant_release(pool, &y.grant));
  assert_cq_ok(cq_grant_release(pool, &t2.grant));
  for (int i = 0; i < 3; i++)
    assert_cq_ok(cq_grant_release(pool, &h[i]));
}

/* Scenario 5. */
static void
test_whole_device_waiter_holds_nothing_and_reserves_its_devices(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 3, NULL));
  cq_grant h;
  cq_req rh, ra, rb;
  cqt_slot all3, small;
  assert_int_equal(take(&h, &rh, 600), 0);
  submit_whole(&all3, "ALL", &ra, 3);
  assert_string_equal(free_str(), "400 1000 1000"); /* holds nothing */
  submit_frac(&small, "SMALL", &rb, 200);
  assert_log(&rec, ""); /* every device is reserved for ALL */
  assert_cq_ok(cq_grant_release(pool, &h));
  assert_log(&rec, "ALL");
  uint32_t idx[3];
  assert_int_equal(cq_grant_devices(&all3.grant, "gpu", idx, 3), 3);
  assert_int_equal(idx[0], 0);
  assert_int_equal(idx[1], 1);
  assert_int_equal(idx[2], 2);
  assert_cq_ok(cq_grant_release(pool, &all3.grant));
  assert_log(&rec, "ALL SMALL");
  assert_cq_ok(cq_grant_release(pool, &small.grant));
}

/* Scenario 6. */
static void
test_cancelling_a_multi_device_waiter_lets_the_next_take_over(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  cq_grant h0, h1;
  cq_req r1, ra, rb;
  whole_req(&r1, 1);
  cq_grant_init(&h0);
  cq_grant_init(&h1);
  assert_cq_ok(cq_grant_try(pool, &h0, &r1));
  assert_cq_ok(cq_grant_try(pool, &h1, &r1));
  assert_int_equal(device_of(&h0), 0);
  assert_int_equal(device_of(&h1), 1);
  cqt_slot two, one;
  submit_whole(&two, "TWO", &ra, 2);
  submit_whole(&one, "ONE", &rb, 1);
  assert_cq_ok(cq_grant_cancel(pool, &two.grant));
  assert_cq_ok(cq_grant_release(pool, &h0));
  assert_log(&rec, "TWO! ONE");
  assert_int_equal(device_of(&one.grant), 0);
  assert_cq_ok(cq_grant_release(pool, &one.grant));
  assert_cq_ok(cq_grant_release(pool, &h1));
}

/* Scenario 7. */
static void test_each_fraction_grant_names_exactly_one_device(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 3, NULL));
  cq_grant g[6];
  cq_req r[6];
  int seen[3] = {0, 0, 0};
  for (int i = 0; i < 6; i++)
    seen[take(&g[i], &r[i], 500)]++;
  assert_int_equal(seen[0], 2);
  assert_int_equal(seen[1], 2);
  assert_int_equal(seen[2], 2);
  for (int i = 0; i < 6; i++)
    assert_cq_ok(cq_grant_release(pool, &g[i]));
}

/* Scenario 8. */
static void
test_placement_packs_fractions_and_keeps_whole_devices_free(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 4, NULL));
  cq_grant two, a, b, c;
  cq_req r2, ra, rb, rc;
  whole_req(&r2, 2);
  cq_grant_init(&two);
  assert_cq_ok(cq_grant_try(pool, &two, &r2));
  uint32_t idx[2];
  assert_int_equal(cq_grant_devices(&two, "gpu", idx, 2), 2);
  assert_int_equal(idx[0], 0);
  assert_int_equal(idx[1], 1);
  assert_int_equal(take(&a, &ra, 400), 2);
  assert_int_equal(take(&b, &rb, 700), 3);
  assert_int_equal(take(&c, &rc, 300), 3); /* exact fit */
  assert_string_equal(free_str(), "0 0 600 0");
  cq_grant *all[] = {&two, &a, &b, &c};
  for (int i = 0; i < 4; i++)
    assert_cq_ok(cq_grant_release(pool, all[i]));
  assert_string_equal(free_str(), "1000 1000 1000 1000");
}

static void test_admission_is_per_device_never_by_the_sum(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  cq_grant h0, h1, t;
  cq_req r0, r1, r8;
  assert_int_equal(take(&h0, &r0, 600), 0);
  assert_int_equal(take(&h1, &r1, 500), 1); /* 0.4 left on device 0 */
  assert_cq_ok(cq_grant_release_device(pool, &h0, "gpu", 0, 100));
  assert_string_equal(free_str(), "500 500");
  frac_req(&r8, 800);
  cq_grant_init(&t);
  assert_cq_err(cq_grant_try(pool, &t, &r8), CQ_EBUSY);
  cqt_slot w;
  cqt_slot_init(&w, &rec, "W");
  assert_cq_ok(cq_grant_submit(pool, &w.grant, &r8, CQ_NEVER, cqt_record_cb));
  assert_log(&rec, "");
  assert_cq_ok(cq_grant_release(pool, &h1));
  assert_log(&rec, "W");
  assert_int_equal(device_of(&w.grant), 1);
  assert_cq_ok(cq_grant_release(pool, &w.grant));
  assert_cq_ok(cq_grant_release(pool, &h0));
}

static void test_ten_tenths_fill_a_device_exactly(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 1, NULL));
  cq_req tenth;
  frac_req(&tenth, 100);
  cq_grant g[11];
  for (int i = 0; i < 10; i++) {
    cq_grant_init(&g[i]);
    assert_cq_ok(cq_grant_try(pool, &g[i], &tenth));
  }
  assert_string_equal(free_str(), "0");
  cq_grant_init(&g[10]);
  assert_cq_err(cq_grant_try(pool, &g[10], &tenth), CQ_EBUSY);
  for (int i = 0; i < 10; i++)
    assert_cq_ok(cq_grant_release(pool, &g[i]));
  assert_string_equal(free_str(), "1000");
}

static void test_a_device_is_held_whole_or_in_fractions_not_both(void **s) {
  (void)s;
  assert_cq_ok(cq_devices_add(pool, "gpu", 1, NULL));
  cq_grant f, w;
  cq_req rf, rw;
  take(&f, &rf, 1);
  whole_req(&rw, 1);
  cq_grant_init(&w);
  assert_cq_err(cq_grant_try(pool, &w, &rw), CQ_EBUSY);
  assert_cq_ok(cq_grant_release(pool, &f));
  assert_cq_ok(cq_grant_try(pool, &w, &rw));
  cq_device_stats d;
  assert_cq_ok(cq_device_stats_get(pool, "gpu", 0, &d));
  assert_true(d.whole);
  cq_grant_init(&f);
  assert_cq_err(cq_grant_try(pool, &f, &rf), CQ_EBUSY);
  assert_cq_ok(cq_grant_release(pool, &w));
}

static void test_devices_and_budgets_are_granted_all_or_nothing(void **s) {
  (void)s;
  assert_cq_ok(cq_devices_add(pool, "gpu", 1, NULL));
  assert_cq_ok(cq_budget_add(pool, "warehouse-db", 1));
  cq_req db, mixed;
  cq_grant hold;
  cqt_req(&db, pool, "warehouse-db:1");
  cq_grant_init(&hold);
  assert_cq_ok(cq_grant_try(pool, &hold, &db));
  assert_cq_ok(cq_req_init(&mixed, pool));
  assert_cq_ok(cq_req_add_fraction(&mixed, "gpu", 500));
  assert_cq_ok(cq_req_add(&mixed, "warehouse-db", 1));
  cqt_slot m;
  cqt_slot_init(&m, &rec, "M");
  assert_cq_ok(
      cq_grant_submit(pool, &m.grant, &mixed, CQ_NEVER, cqt_record_cb));
  assert_string_equal(free_str(), "1000"); /* nothing held while waiting */
  assert_cq_ok(cq_grant_release(pool, &hold));
  assert_log(&rec, "M");
  assert_string_equal(free_str(), "500");
  assert_int_equal(cq_grant_held(&m.grant, "gpu"), 500);
  assert_int_equal(cq_grant_held(&m.grant, "warehouse-db"), 1);
  assert_cq_ok(cq_grant_release(pool, &m.grant));
}

static void test_bad_device_requests_fail_at_once_and_change_nothing(void **s) {
  (void)s;
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  cq_req r;
  assert_cq_ok(cq_req_init(&r, pool));
  assert_cq_err(cq_req_add_fraction(&r, "gpu", 0), CQ_ERANGE);
  assert_cq_err(cq_req_add_fraction(&r, "gpu", -250), CQ_ERANGE);
  assert_cq_err(cq_req_add_fraction(&r, "gpu", 1500), CQ_ERANGE);
  assert_string_equal(cq_req_error(&r),
                      "request asks gpu:1.5 but a fraction must be above 0 "
                      "and at most 1");
  assert_cq_err(cq_req_add_str(&r, "gpu", "1.5"), CQ_ERANGE);
  assert_non_null(strstr(cq_req_error(&r), "not a valid amount"));
  assert_cq_err(cq_req_add_str(&r, "gpu", "0.0005"), CQ_ERANGE);
  assert_cq_err(cq_req_add_str(&r, "gpu", "half"), CQ_EPARSE);
  cq_req three;
  whole_req(&three, 3);
  cq_grant t;
  cq_grant_init(&t);
  assert_cq_err(cq_grant_try(pool, &t, &three), CQ_ENEVER);
  assert_string_equal(cq_grant_error(&t),
                      "request asks 3 devices of gpu but it has 2");
  assert_string_equal(free_str(), "1000 1000");
  assert_cq_err(cq_req_add_devices(&r, "gpu", 0), CQ_ERANGE);
  assert_cq_err(cq_req_add_fraction(&r, "tpu", 500), CQ_ENOENT);
  assert_cq_err(cq_req_add(&r, "gpu", 1), CQ_EINVAL); /* units of devices */
  assert_int_equal(cq_req_count(&r), 0);

  assert_cq_ok(cq_req_add_str(&r, "gpu", "0.25"));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &r));
  int dev = device_of(&g);
  assert_cq_err(cq_grant_release_device(pool, &g, "gpu", 7, 250), CQ_ENOENT);
  assert_cq_err(cq_grant_release_device(pool, &g, "gpu", (uint32_t)!dev, 250),
                CQ_ENOENT);
  assert_cq_err(cq_grant_release_device(pool, &g, "gpu", (uint32_t)dev, 251),
                CQ_ERANGE);
  assert_cq_err(cq_grant_release_part(pool, &g, "gpu", 100), CQ_EINVAL);
  assert_int_equal(cq_grant_held(&g, "gpu"), 250);
  assert_string_equal(free_str(), dev == 0 ? "750 1000" : "1000 750");
  assert_cq_ok(cq_grant_release(pool, &g));

  /* A pool without devices refuses every request as never satisfiable. */
  assert_cq_ok(cq_devices_add(pool, "none", 0, NULL));
  cq_req none_f, none_w;
  assert_cq_ok(cq_req_init(&none_f, pool));
  assert_cq_ok(cq_req_add_fraction(&none_f, "none", 100));
  assert_cq_ok(cq_req_init(&none_w, pool));
  assert_cq_ok(cq_req_add_devices(&none_w, "none", 1));
  cq_grant_init(&t);
  assert_cq_err(cq_grant_acquire(pool, &t, &none_f, CQ_NEVER), CQ_ENEVER);
  assert_string_equal(cq_grant_error(&t),
                      "request asks none:0.1 but none has no device");
  assert_cq_err(cq_grant_acquire(pool, &t, &none_w, CQ_NEVER), CQ_ENEVER);
}

static void test_device_amounts_parse_exactly(void **s) {
  (void)s;
  int64_t m = 0;
  assert_cq_ok(cq_device_amount_parse("0.25", &m));
  assert_int_equal(m, 250);
  assert_cq_ok(cq_device_amount_parse("2", &m));
  assert_int_equal(m, 2000);
  assert_cq_ok(cq_device_amount_parse("0.1", &m));
  assert_int_equal(m, 100);
  assert_cq_ok(cq_device_amount_parse("1.000", &m));
  assert_int_equal(m, 1000);
  assert_cq_ok(cq_device_amount_parse(".5", &m));
  assert_int_equal(m, 500);
  assert_cq_ok(cq_device_amount_parse("0.1250", &m));
  assert_int_equal(m, 125);
  assert_cq_err(cq_device_amount_parse("0.0005", &m), CQ_ERANGE);
  assert_cq_err(cq_device_amount_parse("0.1255", &m), CQ_ERANGE);
  assert_cq_err(cq_device_amount_parse("0", &m), CQ_ERANGE);
  assert_cq_err(cq_device_amount_parse("0.000", &m), CQ_ERANGE);
  assert_cq_err(cq_device_amount_parse("-0.5", &m), CQ_ERANGE);
  assert_cq_err(cq_device_amount_parse("", &m), CQ_EPARSE);
  assert_cq_err(cq_device_amount_parse("1.", &m), CQ_EPARSE);
  assert_cq_err(cq_device_amount_parse("1e3", &m), CQ_EPARSE);
  assert_cq_err(cq_device_amount_parse(" 1", &m), CQ_EPARSE);
  assert_cq_err(cq_device_amount_parse("99999999999999", &m), CQ_ERANGE);
  assert_cq_err(cq_device_amount_parse(NULL, &m), CQ_EINVAL);
  assert_int_equal(m, 125); /* failures leave the output alone */
}

/* Fewer rounds where each one is a server's round trip (the suite's fleet
 * build, tests/fleet). */
#ifndef CQT_FRACTION_ROUNDS
#define CQT_FRACTION_ROUNDS 100000
#endif

static void test_random_fractions_come_back_exactly(void **s) {
  (void)s;
  enum { DEVICES = 8, HELD = 14, ROUNDS = CQT_FRACTION_ROUNDS };
  assert_cq_ok(cq_devices_add(pool, "gpu", DEVICES, NULL));
  static cq_req reqs[1000];
  for (int m = 1; m <= 1000; m++)
    frac_req(&reqs[m - 1], m);
  cq_grant held[HELD];
  int64_t amount[HELD];
  for (int i = 0; i < HELD; i++) {
    cq_grant_init(&held[i]);
    amount[i] = 0;
  }
  uint64_t x = 12345;
  long taken = 0;
  int64_t total = 0;
  for (int round = 0; round < ROUNDS; round++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    int slot = (int)(x % HELD);
    if (amount[slot] != 0) {
      assert_cq_ok(cq_grant_release(pool, &held[slot]));
      total -= amount[slot];
      amount[slot] = 0;
    }
    int64_t m = 1 + (int64_t)((x >> 20) % 1000);
    if (cq_grant_try(pool, &held[slot], &reqs[m - 1]) == 0) {
      amount[slot] = m;
      total += m;
      taken++;
    }
    if (round % 997 == 0) {
      cq_resource_stats st;
      assert_cq_ok(cq_resource_stats_get(pool, "gpu", &st));
      assert_int_equal(st.in_use, total);
    }
  }
  for (int i = 0; i < HELD; i++)
    if (amount[i] != 0)
      assert_cq_ok(cq_grant_release(pool, &held[i]));
  assert_true(taken > ROUNDS / 4);
  assert_string_equal(free_str(), "1000 1000 1000 1000 1000 1000 1000 1000");
}

static void test_grant_names_its_devices_for_cuda_visible_devices(void **s) {
  (void)s;
  const char *ids[] = {"GPU-0a1b", "GPU-2c3d", "7"};
  assert_cq_ok(cq_devices_add(pool, "gpu", 3, ids));
  cq_req r2, rf;
  cq_grant g2, gf;
  whole_req(&r2, 2);
  cq_grant_init(&g2);
  assert_cq_ok(cq_grant_try(pool, &g2, &r2));
  char buf[64];
  assert_cq_ok(cq_grant_cuda_visible(&g2, "gpu", buf, sizeof(buf)));
  assert_string_equal(buf, "GPU-0a1b,GPU-2c3d");
  assert_cq_ok(cq_grant_cuda_visible(&g2, NULL, buf, sizeof(buf)));
  assert_string_equal(buf, "GPU-0a1b,GPU-2c3d");
  assert_cq_err(cq_grant_cuda_visible(&g2, "gpu", buf, 10), CQ_ERANGE);
  assert_string_equal(buf, "");
  take(&gf, &rf, 300);
  assert_cq_ok(cq_grant_cuda_visible(&gf, NULL, buf, sizeof(buf)));
  assert_string_equal(buf, "7");
  cq_device_stats d;
  assert_cq_ok(cq_device_stats_get(pool, "gpu", 2, &d));
  assert_string_equal(d.id, "7");
  assert_int_equal(d.used_milli, 300);

  /* A whole-device grant can give one device back early. */
  assert_cq_err(cq_grant_release_device(pool, &g2, "gpu", 0, 500), CQ_ERANGE);
  assert_cq_ok(cq_grant_release_device(pool, &g2, "gpu", 0, CQ_DEVICE_MILLI));
  assert_cq_ok(cq_grant_cuda_visible(&g2, NULL, buf, sizeof(buf)));
  assert_string_equal(buf, "GPU-2c3d");
  assert_cq_err(cq_grant_release_device(pool, &g2, "gpu", 0, CQ_DEVICE_MILLI),
                CQ_ENOENT);
  assert_cq_ok(cq_grant_release(pool, &g2));
  assert_cq_ok(cq_grant_release(pool, &gf));
  assert_cq_err(cq_grant_cuda_visible(&gf, NULL, buf, sizeof(buf)), CQ_ENOENT);

  const char *bad[] = {"GPU-1,GPU-2"};
  assert_cq_err(cq_devices_add(pool, "gpu2", 1, bad), CQ_EINVAL);
  const char *empty[] = {""};
  assert_cq_err(cq_devices_add(pool, "gpu2", 1, empty), CQ_EINVAL);
  assert_cq_err(cq_devices_add(pool, "gpu", 1, NULL), CQ_EEXIST);
}

/* ------------------------------------------------------------------------ */
/* Every device waiter reserves, in arrival order                            */
/* ------------------------------------------------------------------------ */

/*
 * The rule a GPU pool's reviewers reached: T1 takes the device with the
 * most free capacity, T2 the next, and so on; later requests may still
 * use what no one reserved. Devices at [500, 600] free: T1 asks 0.7
 * and reserves device 1 (0.6 free), so a young 0.1 still goes to device 0.
 * T2 asks 0.55, which only device 1 could hold: it does not take T1's
 * device, it waits and reserves the next, device 0, and then a young 0.1
 * waits too, where one reserving waiter would have let it in.
 */
static void test_t1_reserves_the_most_free_device_and_t2_the_next(void **s) {
  (void)s;
  cq_grant h0, h1, y;
  cq_req r0, r1, ra, rb, ry, rz;
  cqt_slot t1, t2, z;
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  assert_int_equal(take(&h0, &r0, 500), 0);
  assert_int_equal(take(&h1, &r1, 600), 1);
  assert_cq_ok(cq_grant_release_device(pool, &h1, "gpu", 1, 200));
  assert_string_equal(free_str(), "500 600");
  submit_frac(&t1, "T1", &ra, 700);
  assert_int_equal(reserved_mask(), 1u << 1);
  /* A young request still uses the device nobody reserves. */
  assert_int_equal(take(&y, &ry, 100), 0);
  assert_cq_ok(cq_grant_release(pool, &y));
  submit_frac(&t2, "T2", &rb, 550);
  assert_log(&rec, ""); /* T2 does not take T1's device */
  assert_int_equal(reserved_mask(), 1u << 1 | 1u << 0);
  submit_frac(&z, "Z", &rz, 100);
  assert_log(&rec, ""); /* both devices are reserved now */
  /* 0.2 more on device 1: T1 is granted there, then Z on what T2 leaves. */
  assert_cq_ok(cq_grant_release_device(pool, &h1, "gpu", 1, 200));
  assert_log(&rec, "T1 Z");
  assert_int_equal(device_of(&t1.grant), 1);
  assert_int_equal(device_of(&z.grant), 1);
  assert_int_equal(reserved_mask(), 1u << 0); /* T2 waits for device 0 */
  assert_cq_ok(cq_grant_release(pool, &h0));
  assert_log(&rec, "T1 Z T2");
  assert_int_equal(device_of(&t2.grant), 0);
  assert_cq_ok(cq_grant_release(pool, &t1.grant));
  assert_cq_ok(cq_grant_release(pool, &t2.grant));
  assert_cq_ok(cq_grant_release(pool, &z.grant));
  assert_cq_ok(cq_grant_release(pool, &h1));
}

/* T1 needs 2 GPUs while T2 waits for 0.5: T1 reserves both, and T2 does
 * not take one of them when it comes free, though 0.5 would fit there. */
static void test_a_two_gpu_waiter_keeps_both_from_a_younger_fraction(void **s) {
  (void)s;
  cq_grant h0, h1;
  cq_req r0, r1, ra, rb;
  cqt_slot t1, t2;
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  assert_int_equal(take(&h0, &r0, 400), 0);
  assert_int_equal(take(&h1, &r1, 700), 1);
  submit_whole(&t1, "T1", &ra, 2);
  submit_frac(&t2, "T2", &rb, 500);
  assert_log(&rec, ""); /* device 0 has 0.6 free, but T1 reserves it */
  assert_int_equal(reserved_mask(), 3u);
  assert_cq_ok(cq_grant_release(pool, &h0));
  assert_log(&rec, "");
  assert_string_equal(free_str(), "1000 300");
  assert_cq_ok(cq_grant_release(pool, &h1));
  assert_log(&rec, "T1");
  assert_cq_ok(cq_grant_release(pool, &t1.grant));
  assert_log(&rec, "T1 T2");
  assert_cq_ok(cq_grant_release(pool, &t2.grant));
}

/*
 * A long-running workload's pattern in miniature, on devices at [400, 300,
 * 300] free: S (0.9) waits first and reserves device 0, W (2 whole devices)
 * waits behind it, and a small young job Y arrives. With only the oldest
 * waiter reserving, Y went to device 1, one W needs, and held it, and W
 * started late; now W reserves devices 1 and 2, so Y waits, and runs beside
 * S once S is granted.
 */
static void
test_a_small_young_job_leaves_an_older_multi_gpu_waiters_devices(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 3, NULL));
  cq_grant h[3];
  cq_req rh[3], rs, rw, ry;
  cqt_slot sm, w, y;
  const int64_t held[3] = {600, 700, 700};
  for (int i = 0; i < 3; i++)
    assert_int_equal(take(&h[i], &rh[i], held[i]), i);
  submit_frac(&sm, "S", &rs, 900);
  submit_whole(&w, "W", &rw, 2);
  submit_frac(&y, "Y", &ry, 50);
  assert_log(&rec, ""); /* 0.05 would fit anywhere, but all are reserved */
  assert_int_equal(reserved_mask(), 7u);
  assert_cq_ok(cq_grant_release(pool, &h[0]));
  assert_log(&rec, "S Y"); /* S on device 0; Y beside it, off W's devices */
  assert_int_equal(device_of(&sm.grant), 0);
  assert_int_equal(device_of(&y.grant), 0);
  assert_cq_ok(cq_grant_release(pool, &h[1]));
  assert_cq_ok(cq_grant_release(pool, &h[2]));
  assert_log(&rec, "S Y W"); /* W is not delayed by Y */
  uint32_t idx[2];
  assert_int_equal(cq_grant_devices(&w.grant, "gpu", idx, 2), 2);
  assert_int_equal(idx[0], 1);
  assert_int_equal(idx[1], 2);
  assert_cq_ok(cq_grant_release(pool, &sm.grant));
  assert_cq_ok(cq_grant_release(pool, &y.grant));
  assert_cq_ok(cq_grant_release(pool, &w.grant));
}

static void test_device_pools_come_first_in_staged_claims(void **state) {
  (void)state;
  cq_pool *staged;
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_STAGED_CLAIMS;
  assert_cq_ok(cq_pool_create(&staged, &cfg));
  /* The budget is added first, yet the device pool is claimed first. */
  assert_cq_ok(cq_budget_add(staged, "cpu", 8));
  assert_cq_ok(cq_devices_add(staged, "gpu", 1, NULL));
  cq_req gpu, cpu6, job, cpu2;
  assert_cq_ok(cq_req_init(&gpu, staged));
  assert_cq_ok(cq_req_add_devices(&gpu, "gpu", 1));
  cqt_req(&cpu6, staged, "cpu:6");
  cq_grant hg, hc, c2;
  cq_grant_init(&hg);
  cq_grant_init(&hc);
  assert_cq_ok(cq_grant_try(staged, &hg, &gpu));
  assert_cq_ok(cq_grant_try(staged, &hc, &cpu6));
  assert_cq_ok(cq_req_init(&job, staged));
  assert_cq_ok(cq_req_add(&job, "cpu", 4));
  assert_cq_ok(cq_req_add_devices(&job, "gpu", 1));
  cqt_slot j;
  cqt_slot_init(&j, &rec, "J");
  assert_cq_ok(
      cq_grant_submit(staged, &j.grant, &job, CQ_NEVER, cqt_record_cb));
  /* J lacks both, but claims only the GPU: CPU jobs keep flowing. */
  cqt_req(&cpu2, staged, "cpu:2");
  cq_grant_init(&c2);
  assert_cq_ok(cq_grant_try(staged, &c2, &cpu2));
  assert_cq_ok(cq_grant_release(staged, &c2));
  assert_cq_ok(cq_grant_release(staged, &hg));
  assert_cq_ok(cq_grant_release(staged, &hc));
  assert_log(&rec, "J");
  assert_cq_ok(cq_grant_release(staged, &j.grant));
  assert_cq_ok(cq_pool_destroy(staged));
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_fraction_waiter_reserves_one_device_others_use_the_rest),
      T(test_freed_capacity_goes_to_the_waiter_reserving_it),
      T(test_younger_waiter_is_granted_on_an_unreserved_device),
      T(test_reservation_moves_to_the_device_with_most_free),
      T(test_whole_device_waiter_holds_nothing_and_reserves_its_devices),
      T(test_cancelling_a_multi_device_waiter_lets_the_next_take_over),
      T(test_each_fraction_grant_names_exactly_one_device),
      T(test_placement_packs_fractions_and_keeps_whole_devices_free),
      T(test_admission_is_per_device_never_by_the_sum),
      T(test_ten_tenths_fill_a_device_exactly),
      T(test_a_device_is_held_whole_or_in_fractions_not_both),
      T(test_devices_and_budgets_are_granted_all_or_nothing),
      T(test_bad_device_requests_fail_at_once_and_change_nothing),
      T(test_device_amounts_parse_exactly),
      T(test_random_fractions_come_back_exactly),
      T(test_grant_names_its_devices_for_cuda_visible_devices),
      T(test_device_pools_come_first_in_staged_claims),
      T(test_t1_reserves_the_most_free_device_and_t2_the_next),
      T(test_a_two_gpu_waiter_keeps_both_from_a_younger_fraction),
      T(test_a_small_young_job_leaves_an_older_multi_gpu_waiters_devices),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
