/*
 * Grants across kinds of pools: an in-process grant passed with a fleet
 * pool, and a fleet grant passed with an in-process pool or with a fleet
 * pool of another namespace. Every pool answers them as an in-process pool
 * answers a grant of another in-process pool: by the grant's state where
 * it is bound, CQ_EPOOL when it is in the state the call needs (held for a
 * release, waiting for a cancel), CQ_ESTATE when it is not; a grant bound
 * to no pool is idle. Nothing reaches the pool the grant is not bound to,
 * and the grant keeps what it holds and its place.
 *
 * Before, a fleet pool handed another pool's grant to its backend, which
 * read its own state in storage that was not its own and said CQ_ESTATE,
 * "not held", of a grant that held units; and an in-process pool said the
 * same of a held fleet grant.
 */
#include "fleet_test.h"
#include "support/foreign.h"

/* A namespace of this suite's own: "kinds" and a number. */
static const char *kinds_ns(void) {
  static char ns[32];
  static int n;
  snprintf(ns, sizeof(ns), "kinds%d", ++n);
  return ns;
}

static cq_pool *local_pool(int64_t db) {
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_budget_add(p, "db", db));
  return p;
}

static cq_pool *fleet_pool(int64_t db) {
  cq_pool *p = fleet_open_as(kinds_ns(), "h", NULL);
  assert_cq_ok(cq_budget_add(p, "db", db));
  return p;
}

static int64_t in_use(cq_pool *p) {
  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(p, "db", &st));
  return st.in_use;
}

static void
test_an_in_process_grant_passed_to_a_fleet_pool_is_another_pools(void **s) {
  (void)s;
  fleet_server_up();
  cq_pool *local = local_pool(4), *other = local_pool(4),
          *fleet = fleet_pool(4);
  struct cqt_grants k;
  cqt_grants_start(&k, local, "db:1", "db:4");
  /* The fleet pool answers as the other in-process pool does. */
  cq_pool *const elsewhere[] = {fleet, other};
  cqt_expect_foreign(elsewhere, 2, &k.held, CQT_HELD);
  cqt_expect_foreign(elsewhere, 2, &k.waiting, CQT_WAITING);
  cqt_expect_foreign(elsewhere, 2, &k.unbound, CQT_IDLE);
  uint64_t fence;
  assert_cq_err(cq_fleet_grant_fence(&k.held, &fence), CQ_EINVAL);
  assert_cq_err(cq_fleet_grant_fence(&k.unbound, &fence), CQ_EINVAL);
  assert_false(cq_grant_is_held(&k.unbound));

  /* Nothing reached the fleet pool; the grants are as they were, and in
   * their own pool they end, once each. */
  assert_int_equal(in_use(fleet), 0);
  cqt_grants_unchanged(&k);
  assert_int_equal(in_use(local), 1);
  assert_int_equal(cqt_waiting(local), 1);
  cqt_grants_end(&k, local);
  cqt_expect_foreign(elsewhere, 2, &k.held, CQT_IDLE);
  assert_int_equal(in_use(local), 0);
  assert_cq_ok(cq_pool_destroy(fleet));
  assert_cq_ok(cq_pool_destroy(other));
  assert_cq_ok(cq_pool_destroy(local));
}

static void
test_a_fleet_grant_passed_to_an_in_process_pool_is_another_pools(void **s) {
  (void)s;
  fleet_server_up();
  cq_pool *fleet = fleet_pool(1), *fleet2 = fleet_pool(1),
          *local = local_pool(1);
  struct cqt_grants k;
  cqt_grants_start(&k, fleet, "db:1", "db:1");
  /* The in-process pool answers as the fleet pool of another namespace. */
  cq_pool *const elsewhere[] = {local, fleet2};
  cqt_expect_foreign(elsewhere, 2, &k.held, CQT_HELD);
  cqt_expect_foreign(elsewhere, 2, &k.waiting, CQT_WAITING);

  /* Nothing changed: the lease is held, the waiter waits. */
  cqt_grants_unchanged(&k);
  assert_int_equal(in_use(fleet), 1);
  assert_int_equal(in_use(local), 0);
  assert_int_equal(in_use(fleet2), 0);
  /* In their own pool: the release goes to the waiter, each ends once. */
  assert_cq_ok(cq_grant_release(fleet, &k.held));
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (atomic_load(&cqt_told) == CQT_NOT_TOLD) {
    if (cq_now() > give_up)
      fail_msg("the waiter was never granted");
    cqt_sleep_ms(1);
  }
  assert_int_equal(atomic_load(&cqt_told), 0);
  cqt_expect_foreign(elsewhere, 2, &k.held, CQT_IDLE);
  cqt_expect_foreign(elsewhere, 2, &k.waiting, CQT_HELD);
  assert_cq_ok(cq_grant_release(fleet, &k.waiting));
  assert_cq_err(cq_grant_release(fleet, &k.waiting), CQ_ESTATE);
  cqt_expect_foreign(elsewhere, 2, &k.waiting, CQT_IDLE);
  assert_int_equal(in_use(fleet), 0);
  assert_cq_ok(cq_pool_destroy(local));
  assert_cq_ok(cq_pool_destroy(fleet2));
  assert_cq_ok(cq_pool_destroy(fleet));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_an_in_process_grant_passed_to_a_fleet_pool_is_another_pools),
      cmocka_unit_test(
          test_a_fleet_grant_passed_to_an_in_process_pool_is_another_pools),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
