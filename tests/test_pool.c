/*
 * Pool lifetime and configuration: argument checks, allocator hooks (every
 * allocation is freed), budget names and stats.
 */
#include "support/cqt.h"

static int64_t zero_clock(void *arg) {
  (void)arg;
  return 0;
}

static void test_create_checks_its_arguments(void **state) {
  (void)state;
  cq_pool *p = NULL;
  assert_cq_err(cq_pool_create(NULL, NULL), CQ_EINVAL);
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = 1u << 20;
  assert_cq_err(cq_pool_create(&p, &cfg), CQ_EINVAL);
  assert_null(p);

  cfg.flags = 0;
  cq_allocator half = {NULL, NULL, NULL, NULL};
  cfg.alloc = &half;
  assert_cq_err(cq_pool_create(&p, &cfg), CQ_EINVAL);

  cfg.alloc = NULL;
  cfg.reserved_[6] = 1; /* a later version's option is refused, not ignored */
  assert_cq_err(cq_pool_create(&p, &cfg), CQ_EINVAL);
  assert_null(p);
  cfg.reserved_[6] = 0;

  /* The barging window: 0 (the default), up to an hour; never negative. */
  cfg.barge_ms = -1;
  assert_cq_err(cq_pool_create(&p, &cfg), CQ_EINVAL);
  assert_null(p);
  cfg.barge_ms = CQ_BARGE_MAX_MS + 1;
  assert_cq_err(cq_pool_create(&p, &cfg), CQ_EINVAL);
  assert_null(p);
  cfg.barge_ms = CQ_BARGE_MAX_MS;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  assert_cq_ok(cq_pool_destroy(p));
  p = NULL;
  cfg.barge_ms = 0;

  cq_pool_config clocked = CQ_POOL_CONFIG_INIT;
  clocked.clock = zero_clock;
  assert_cq_err(cq_pool_create(&p, &clocked), CQ_EINVAL); /* needs manual */
  assert_null(p);

  int tag = 7;
  cq_pool_config data = CQ_POOL_CONFIG_INIT;
  data.data = &tag;
  assert_cq_ok(cq_pool_create(&p, &data));
  assert_ptr_equal(cq_pool_data(p), &tag);
  assert_cq_ok(cq_pool_destroy(p));
  assert_cq_ok(cq_pool_destroy(NULL));
  assert_cq_err(cq_pool_close(NULL), CQ_EINVAL);
}

struct counting {
  long allocs;
  long frees;
  long fail_at; /* fail the n-th allocation (1-based); 0: never */
};

static void *c_alloc(size_t size, void *arg) {
  struct counting *c = arg;
  if (c->fail_at != 0 && c->allocs + 1 == c->fail_at)
    return NULL;
  c->allocs++;
  return malloc(size);
}

static void *c_realloc(void *ptr, size_t size, void *arg) {
  struct counting *c = arg;
  if (c->fail_at != 0 && c->allocs + 1 == c->fail_at)
    return NULL;
  if (ptr == NULL)
    c->allocs++;
  return realloc(ptr, size);
}

static void c_free(void *ptr, void *arg) {
  struct counting *c = arg;
  if (ptr != NULL)
    c->frees++;
  free(ptr);
}

static void test_allocator_hooks_see_every_allocation(void **state) {
  (void)state;
  struct counting c = {0, 0, 0};
  cq_allocator a = {c_alloc, c_realloc, c_free, &c};
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &a;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  char name[16];
  for (int i = 0; i < 20; i++) {
    snprintf(name, sizeof(name), "b%d", i);
    assert_cq_ok(cq_budget_add(p, name, 1));
  }
  assert_true(c.allocs > 20);
  assert_cq_ok(cq_pool_destroy(p));
  assert_int_equal(c.allocs, c.frees);
}

static void test_out_of_memory_changes_nothing(void **state) {
  (void)state;
  for (long n = 1; n < 8; n++) {
    struct counting c = {0, 0, 0};
    cq_allocator a = {c_alloc, c_realloc, c_free, &c};
    cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
    cfg.alloc = &a;
    cq_pool *p = NULL;
    c.fail_at = n;
    int rc = cq_pool_create(&p, &cfg);
    if (rc != 0) {
      assert_int_equal(rc, CQ_ENOMEM);
      assert_int_equal(c.allocs, c.frees);
      continue;
    }
    /* Fail one of the budget additions' allocations. */
    int added = 0;
    for (int i = 0; i < 10; i++) {
      char name[16];
      snprintf(name, sizeof(name), "b%d", i);
      rc = cq_budget_add(p, name, 1);
      if (rc == CQ_ENOMEM) {
        cq_resource_stats st;
        assert_cq_err(cq_resource_stats_get(p, name, &st), CQ_ENOENT);
        c.fail_at = 0;
        assert_cq_ok(cq_budget_add(p, name, 1)); /* usable afterwards */
      } else {
        assert_cq_ok(rc);
      }
      added++;
    }
    assert_int_equal(added, 10);
    assert_cq_ok(cq_pool_destroy(p));
    assert_int_equal(c.allocs, c.frees);
  }
}

static void test_budget_names_are_validated(void **state) {
  (void)state;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  char longest[CQ_NAME_MAX + 1], too_long[CQ_NAME_MAX + 2];
  memset(longest, 'a', CQ_NAME_MAX);
  longest[CQ_NAME_MAX] = '\0';
  memset(too_long, 'b', CQ_NAME_MAX + 1);
  too_long[CQ_NAME_MAX + 1] = '\0';

  assert_cq_err(cq_budget_add(p, "", 1), CQ_EINVAL);
  assert_cq_err(cq_budget_add(p, NULL, 1), CQ_EINVAL);
  assert_cq_err(cq_budget_add(p, too_long, 1), CQ_EINVAL);
  assert_cq_err(cq_budget_add(p, "has space", 1), CQ_EINVAL);
  assert_cq_err(cq_budget_add(p, "a=b", 1), CQ_EINVAL);
  assert_cq_err(cq_budget_add(p, "a,b", 1), CQ_EINVAL);
  assert_cq_err(cq_budget_add(NULL, "db", 1), CQ_EINVAL);
  assert_cq_err(cq_budget_add(p, "db", -1), CQ_ERANGE);
  assert_cq_ok(cq_budget_add(p, longest, 1));
  assert_cq_ok(cq_budget_add(p, "warehouse-db", 10));
  assert_cq_ok(cq_budget_add(p, "memory_mib", 24576));
  assert_cq_ok(cq_budget_add(p, "zero", 0));
  assert_cq_err(cq_budget_add(p, "warehouse-db", 3), CQ_EEXIST);

  cq_resource_stats st = cqt_budget(p, "warehouse-db");
  assert_int_equal(st.capacity, 10);
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.withheld, 0);
  assert_int_equal(st.waiting, 0);
  assert_int_equal(st.peak, 0);
  assert_cq_err(cq_resource_stats_get(p, "nope", &st), CQ_ENOENT);
  assert_cq_err(cq_resource_stats_get(p, "db", NULL), CQ_EINVAL);
  assert_cq_ok(cq_pool_destroy(p));
}

static void test_stats_agree_with_each_other(void **state) {
  (void)state;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_budget_add(p, "b", 10));
  cq_req r6, r7, r1;
  cqt_req(&r6, p, "b:6");
  cqt_req(&r7, p, "b:7");
  cqt_req(&r1, p, "b:1");
  cq_grant g6, g1;
  cq_grant_init(&g6);
  cq_grant_init(&g1);
  assert_cq_ok(cq_grant_try(p, &g6, &r6));
  cqt_rec rec;
  cqt_slot s;
  cqt_rec_init(&rec);
  cqt_slot_init(&s, &rec, "S");
  assert_cq_ok(cq_grant_submit(p, &s.grant, &r7, CQ_NEVER, cqt_record_cb));

  cq_resource_stats st = cqt_budget(p, "b");
  assert_int_equal(st.capacity, 10);
  assert_int_equal(st.in_use, 6);
  assert_int_equal(st.withheld, 4); /* all 4 free units, for S's 7 */
  assert_int_equal(st.waiting, 1);
  assert_int_equal(st.peak, 6);
  assert_true(st.in_use + st.withheld <= st.capacity);
  assert_cq_err(cq_grant_try(p, &g1, &r1), CQ_EBUSY);

  assert_cq_ok(cq_grant_release(p, &g6));
  st = cqt_budget(p, "b");
  assert_int_equal(st.in_use, 7);
  assert_int_equal(st.withheld, 0);
  assert_int_equal(st.waiting, 0);
  assert_int_equal(st.peak, 7);
  assert_cq_ok(cq_grant_release(p, &s.grant));
  assert_int_equal(cqt_budget(p, "b").peak, 7);
  assert_cq_ok(cq_pool_destroy(p));
}

/* Lock-free grants are counted in a narrow field of the usage word that is
 * emptied under the lock; the totals must stay exact well past its range. */
static void test_grant_counts_stay_exact_past_the_lockfree_counter(void **s) {
  (void)s;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_budget_add(p, "b", 1));
  cq_req r;
  cqt_req(&r, p, "b:1");
  cq_grant g;
  cq_grant_init(&g);
  const long n = (1L << 21) + (1L << 20) + 12345;
  for (long i = 0; i < n; i++) {
    assert_cq_ok(cq_grant_try(p, &g, &r));
    assert_cq_ok(cq_grant_release(p, &g));
  }
  cq_resource_stats st = cqt_budget(p, "b");
  assert_int_equal(st.grants, (uint64_t)n);
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.peak, 1);
  assert_cq_ok(cq_pool_destroy(p));
}

/*
 * cq_pool_destroy() is refused while any grant is held, whatever it holds:
 * a grant that gave every unit back early, or one of an empty request, is
 * still held, and its release reads the pool. Once destroy looked only at
 * the units in use, and the later release read freed memory.
 */
static void test_destroy_is_refused_while_a_grant_holds_nothing(void **state) {
  (void)state;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_budget_add(p, "db", 4));
  assert_cq_ok(cq_devices_add(p, "gpu", 2, NULL));
  cq_req units, frac, whole, empty;
  cqt_req(&units, p, "db:2");
  assert_cq_ok(cq_req_init(&frac, p));
  assert_cq_ok(cq_req_add_fraction(&frac, "gpu", 500));
  assert_cq_ok(cq_req_init(&whole, p));
  assert_cq_ok(cq_req_add_devices(&whole, "gpu", 1));
  assert_cq_ok(cq_req_init(&empty, p));
  cq_grant g[4];
  const cq_req *reqs[4] = {&units, &frac, &whole, &empty};
  for (int i = 0; i < 4; i++) {
    cq_grant_init(&g[i]);
    assert_cq_ok(cq_grant_try(p, &g[i], reqs[i])); /* units: lock-free */
  }
  uint32_t dev[2];
  assert_cq_ok(cq_grant_release_part(p, &g[0], "db", 2));
  assert_int_equal(cq_grant_devices(&g[1], "gpu", dev, 1), 1);
  assert_cq_ok(cq_grant_release_device(p, &g[1], "gpu", dev[0], 500));
  assert_int_equal(cq_grant_devices(&g[2], "gpu", dev, 1), 1);
  assert_cq_ok(
      cq_grant_release_device(p, &g[2], "gpu", dev[0], CQ_DEVICE_MILLI));
  assert_int_equal(cqt_budget(p, "db").in_use, 0);
  assert_int_equal(cqt_budget(p, "gpu").in_use, 0);
  /* Each grant, released in turn, still keeps the pool. */
  for (int i = 0; i < 4; i++) {
    assert_true(cq_grant_is_held(&g[i]));
    assert_cq_err(cq_pool_destroy(p), CQ_EINUSE);
    assert_cq_ok(cq_grant_release(p, &g[i]));
  }
  assert_cq_ok(cq_pool_destroy(p));
}

/* The same rule for one resource: a held grant that gave back every unit of
 * it still names it, and removing it is refused until the grant goes. */
static void test_remove_is_refused_while_a_grant_names_it(void **state) {
  (void)state;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_budget_add(p, "db", 4));
  cq_req r;
  cqt_req(&r, p, "db:3");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &r));
  assert_cq_ok(cq_grant_release_part(p, &g, "db", 3));
  assert_cq_err(cq_resource_remove(p, "db"), CQ_EINUSE);
  assert_cq_ok(cq_grant_release(p, &g));
  assert_int_equal(cqt_budget(p, "db").grants, 1);
  assert_cq_ok(cq_resource_remove(p, "db"));
  assert_cq_ok(cq_pool_destroy(p));
}

/* The detail a grant gives is its last attempt's: an attempt refused for a
 * closed pool does not show why an earlier one failed. */
static void test_grant_error_is_the_last_attempts_own(void **state) {
  (void)state;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_budget_add(p, "db", 2));
  cq_req big, small;
  cqt_req(&big, p, "db:3");
  cqt_req(&small, p, "db:1");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_err(cq_grant_try(p, &g, &big), CQ_ENEVER);
  assert_non_null(strstr(cq_grant_error(&g), "capacity is 2"));
  assert_cq_ok(cq_pool_close(p));
  assert_cq_err(cq_grant_try(p, &g, &small), CQ_ECLOSED);
  assert_string_equal(cq_grant_error(&g), "");
  assert_cq_ok(cq_pool_destroy(p));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grant_counts_stay_exact_past_the_lockfree_counter),
      cmocka_unit_test(test_create_checks_its_arguments),
      cmocka_unit_test(test_allocator_hooks_see_every_allocation),
      cmocka_unit_test(test_out_of_memory_changes_nothing),
      cmocka_unit_test(test_budget_names_are_validated),
      cmocka_unit_test(test_stats_agree_with_each_other),
      cmocka_unit_test(test_destroy_is_refused_while_a_grant_holds_nothing),
      cmocka_unit_test(test_remove_is_refused_while_a_grant_names_it),
      cmocka_unit_test(test_grant_error_is_the_last_attempts_own),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
