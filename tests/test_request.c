/*
 * Requests and grants as objects: building and validating requests, reuse,
 * and the misuses that must be refused without changing anything (double
 * release, release into another pool, partial releases out of range).
 */
#include "support/cqt.h"

static cq_pool *pool, *other;

static int setup(void **state) {
  (void)state;
  if (cq_pool_create(&pool, NULL) != 0 || cq_pool_create(&other, NULL) != 0)
    return -1;
  if (cq_budget_add(pool, "warehouse-db", 10) != 0 ||
      cq_budget_add(pool, "license", 3) != 0 ||
      cq_budget_add(other, "warehouse-db", 10) != 0)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  assert_cq_ok(cq_pool_destroy(other));
  return cq_pool_destroy(pool);
}

static void
test_request_over_capacity_names_resource_amount_capacity(void **s) {
  (void)s;
  cq_req r;
  assert_cq_ok(cq_req_init(&r, pool));
  /* Built as it is: capacities may change; every acquire checks it. */
  assert_cq_ok(cq_req_add(&r, "warehouse-db", 12));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_err(cq_grant_try(pool, &g, &r), CQ_ENEVER);
  assert_string_equal(cq_grant_error(&g),
                      "request asks warehouse-db:12 but its capacity is 10");
  assert_int_equal(cqt_budget(pool, "warehouse-db").in_use, 0);
  assert_cq_ok(cq_budget_set_capacity(pool, "warehouse-db", 12));
  assert_cq_ok(cq_grant_try(pool, &g, &r));
  assert_string_equal(cq_grant_error(&g), "");
  assert_cq_ok(cq_grant_release(pool, &g));
  assert_cq_ok(cq_budget_set_capacity(pool, "warehouse-db", 10));
}

static void test_bad_items_are_refused_with_distinct_codes(void **s) {
  (void)s;
  cq_req r;
  assert_cq_err(cq_req_init(NULL, pool), CQ_EINVAL);
  assert_cq_err(cq_req_init(&r, NULL), CQ_EINVAL);
  assert_cq_ok(cq_req_init(&r, pool));
  assert_cq_err(cq_req_add(&r, "gpu", 1), CQ_ENOENT);
  assert_string_equal(cq_req_error(&r),
                      "request asks unknown resource \"gpu\"");
  assert_cq_err(cq_req_add(&r, "license", 0), CQ_ERANGE);
  assert_cq_err(cq_req_add(&r, "license", -2), CQ_ERANGE);
  assert_string_equal(cq_req_error(&r),
                      "request asks license:-2 but amounts must be positive");
  assert_cq_err(cq_req_add(&r, NULL, 1), CQ_EINVAL);
  assert_cq_ok(cq_req_add(&r, "license", 1));
  assert_cq_err(cq_req_add(&r, "license", 1), CQ_EEXIST);
  assert_int_equal(cq_req_count(&r), 1);

  cq_req junk;
  memset(&junk, 0x5a, sizeof(junk));
  assert_cq_err(cq_req_add(&junk, "license", 1), CQ_EINVAL);
}

static void test_request_names_at_most_the_item_limit(void **s) {
  (void)s;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  cq_req r;
  assert_cq_ok(cq_req_init(&r, p));
  char name[16];
  for (int i = 0; i <= CQ_REQ_MAX_ITEMS; i++) {
    snprintf(name, sizeof(name), "b%02d", i);
    assert_cq_ok(cq_budget_add(p, name, 5));
    if (i < CQ_REQ_MAX_ITEMS)
      assert_cq_ok(cq_req_add(&r, name, 1));
    else
      assert_cq_err(cq_req_add(&r, name, 1), CQ_ETOOMANY);
  }
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &r));
  assert_int_equal(cqt_budget(p, "b15").in_use, 1);
  assert_cq_ok(cq_grant_release(p, &g));
  assert_cq_ok(cq_pool_destroy(p));
}

static void test_empty_request_is_always_granted(void **s) {
  (void)s;
  cq_req empty;
  assert_cq_ok(cq_req_init(&empty, pool));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &empty));
  assert_true(cq_grant_is_held(&g));
  assert_cq_ok(cq_grant_release(pool, &g));
  assert_cq_err(cq_grant_release(pool, &g), CQ_ESTATE);
  assert_cq_ok(cq_grant_acquire(pool, &g, &empty, 0));
  assert_cq_ok(cq_grant_release(pool, &g));
  cqt_rec rec;
  cqt_slot slot;
  cqt_rec_init(&rec);
  cqt_slot_init(&slot, &rec, "E");
  assert_cq_ok(cq_grant_submit(pool, &slot.grant, &empty, 0, cqt_record_cb));
  assert_log(&rec, "E");
  assert_cq_ok(cq_grant_release(pool, &slot.grant));
}

static void test_one_request_serves_many_attempts(void **s) {
  (void)s;
  cq_req r;
  cqt_req(&r, pool, "warehouse-db:2 license:1");
  cq_grant g[3];
  for (int i = 0; i < 3; i++) {
    cq_grant_init(&g[i]);
    assert_cq_ok(cq_grant_try(pool, &g[i], &r));
  }
  assert_int_equal(cqt_budget(pool, "warehouse-db").in_use, 6);
  assert_int_equal(cqt_budget(pool, "license").in_use, 3);
  cq_grant more;
  cq_grant_init(&more);
  assert_cq_err(cq_grant_try(pool, &more, &r), CQ_EBUSY);
  for (int i = 0; i < 3; i++)
    assert_cq_ok(cq_grant_release(pool, &g[i]));
  for (int round = 0; round < 1000; round++) {
    assert_cq_ok(cq_grant_try(pool, &g[0], &r));
    assert_cq_ok(cq_grant_release(pool, &g[0]));
  }
  assert_int_equal(cqt_budget(pool, "warehouse-db").in_use, 0);
}

static void test_releasing_twice_is_refused_and_changes_nothing(void **s) {
  (void)s;
  cq_req r;
  cqt_req(&r, pool, "license:2");
  cq_grant a, b;
  cq_grant_init(&a);
  cq_grant_init(&b);
  assert_cq_ok(cq_grant_try(pool, &a, &r));
  assert_cq_ok(cq_grant_release(pool, &a));
  assert_cq_ok(cq_grant_try(pool, &b, &r));
  assert_cq_err(cq_grant_release(pool, &a), CQ_ESTATE);
  assert_int_equal(cqt_budget(pool, "license").in_use, 2);
  assert_cq_ok(cq_grant_release(pool, &b));
  assert_int_equal(cqt_budget(pool, "license").in_use, 0);

  cq_grant fresh;
  cq_grant_init(&fresh);
  assert_cq_err(cq_grant_release(pool, &fresh), CQ_ESTATE);
  assert_cq_err(cq_grant_cancel(pool, &fresh), CQ_ESTATE);
  assert_cq_err(cq_grant_release(NULL, &fresh), CQ_EINVAL);
  assert_cq_err(cq_grant_release(pool, NULL), CQ_EINVAL);
}

static void test_grant_cannot_be_released_into_another_pool(void **s) {
  (void)s;
  cq_req r;
  cqt_req(&r, pool, "warehouse-db:4");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &r));
  assert_cq_err(cq_grant_release(other, &g), CQ_EPOOL);
  assert_cq_err(cq_grant_release_part(other, &g, "warehouse-db", 1), CQ_EPOOL);
  assert_int_equal(cqt_budget(pool, "warehouse-db").in_use, 4);
  assert_int_equal(cqt_budget(other, "warehouse-db").in_use, 0);
  assert_true(cq_grant_is_held(&g));

  cq_grant h;
  cq_grant_init(&h);
  assert_cq_err(cq_grant_try(other, &h, &r), CQ_EPOOL); /* request of pool */
  assert_cq_err(cq_grant_try(pool, &g, &r), CQ_ESTATE); /* grant in use */
  assert_cq_ok(cq_grant_release(pool, &g));
}

static void test_partial_release_returns_exactly_what_it_names(void **s) {
  (void)s;
  cq_req r;
  cqt_req(&r, pool, "warehouse-db:5 license:2");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &r));
  assert_cq_err(cq_grant_release_part(pool, &g, "warehouse-db", 6), CQ_ERANGE);
  assert_cq_err(cq_grant_release_part(pool, &g, "warehouse-db", 0), CQ_ERANGE);
  assert_cq_err(cq_grant_release_part(pool, &g, "nope", 1), CQ_ENOENT);
  assert_cq_err(cq_grant_release_part(pool, &g, NULL, 1), CQ_EINVAL);
  assert_int_equal(cqt_budget(pool, "warehouse-db").in_use, 5);
  assert_cq_ok(cq_grant_release_part(pool, &g, "warehouse-db", 3));
  assert_int_equal(cqt_budget(pool, "warehouse-db").in_use, 2);
  assert_int_equal(cq_grant_held(&g, "warehouse-db"), 2);
  assert_cq_ok(cq_grant_release_part(pool, &g, "warehouse-db", 2));
  assert_cq_err(cq_grant_release_part(pool, &g, "warehouse-db", 1), CQ_ERANGE);
  assert_cq_ok(cq_grant_release(pool, &g));
  assert_int_equal(cqt_budget(pool, "warehouse-db").in_use, 0);
  assert_int_equal(cqt_budget(pool, "license").in_use, 0);
  assert_int_equal(cq_grant_held(&g, "license"), 0);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_request_over_capacity_names_resource_amount_capacity),
      T(test_bad_items_are_refused_with_distinct_codes),
      cmocka_unit_test(test_request_names_at_most_the_item_limit),
      T(test_empty_request_is_always_granted),
      T(test_one_request_serves_many_attempts),
      T(test_releasing_twice_is_refused_and_changes_nothing),
      T(test_grant_cannot_be_released_into_another_pool),
      T(test_partial_release_returns_exactly_what_it_names),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
