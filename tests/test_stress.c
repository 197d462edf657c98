/*
 * Threads against the pool: the oldest waiter is not starved by a steady stream
 * of small requests, on one budget or on several, and random multi-budget
 * traffic in every acquire style never over-admits and leaves everything free
 * at the end.
 *
 * Worker threads never call cmocka (its failures longjmp on the main
 * thread's stack); they record the first broken check, and the main thread
 * asserts that none was recorded.
 */
#include "support/cqt.h"

#include <sched.h>
#include <stdatomic.h>

static cq_pool *pool;
static atomic_int stop;
static atomic_int failures;
static char first_failure[256];
static pthread_mutex_t failure_lock = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      pthread_mutex_lock(&failure_lock);                                       \
      if (atomic_fetch_add(&failures, 1) == 0)                                 \
        snprintf(first_failure, sizeof(first_failure), __VA_ARGS__);           \
      pthread_mutex_unlock(&failure_lock);                                     \
    }                                                                          \
  } while (0)

static int setup(void **state) {
  (void)state;
  atomic_store(&stop, 0);
  atomic_store(&failures, 0);
  first_failure[0] = '\0';
  return cq_pool_create(&pool, NULL);
}

static int teardown(void **state) {
  (void)state;
  if (atomic_load(&failures) != 0)
    fail_msg("%d broken checks; first: %s", atomic_load(&failures),
             first_failure);
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(pool, &st));
  assert_int_equal(st.waiting, 0);
  assert_cq_ok(cq_pool_destroy(pool)); /* refused if anything were held */
  return 0;
}

static uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* ------------------------------------------------------------------------ */
/* 6. No starvation, one budget                                              */
/* ------------------------------------------------------------------------ */

struct churn {
  cq_req *req;
  long cycles;
};

/* Holds one unit, then keeps releasing it and acquiring it again. */
static void *churn_one(void *arg) {
  struct churn *c = arg;
  cq_grant g;
  cq_grant_init(&g);
  CHECK(cq_grant_acquire(pool, &g, c->req, CQ_NEVER) == 0, "churn first");
  while (!atomic_load(&stop)) {
    CHECK(cq_grant_release(pool, &g) == 0, "churn release");
    int rc = cq_grant_acquire(pool, &g, c->req, CQ_NEVER);
    CHECK(rc == 0, "churn acquire: %s", cq_err_name(rc));
    c->cycles++;
  }
  CHECK(cq_grant_release(pool, &g) == 0, "churn final release");
  return NULL;
}

static void test_large_request_is_not_starved_on_one_budget(void **state) {
  (void)state;
  enum { N = 4 };
  assert_cq_ok(cq_budget_add(pool, "b", N));
  cq_req one, all;
  cqt_req(&one, pool, "b:1");
  cqt_req(&all, pool, "b:4");
  pthread_t th[N];
  struct churn c[N];
  for (int i = 0; i < N; i++) {
    c[i].req = &one;
    c[i].cycles = 0;
    assert_int_equal(pthread_create(&th[i], NULL, churn_one, &c[i]), 0);
  }
  while (cqt_budget(pool, "b").in_use < N)
    cqt_sleep_ms(1);
  cqt_sleep_ms(20); /* let the churn run */
  cq_grant big;
  cq_grant_init(&big);
  assert_cq_ok(cq_grant_acquire(pool, &big, &all, cq_now() + CQT_PATIENCE_MS));
  assert_int_equal(cq_grant_held(&big, "b"), N);
  assert_cq_ok(cq_grant_release(pool, &big));
  atomic_store(&stop, 1);
  for (int i = 0; i < N; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  assert_int_equal(cqt_budget(pool, "b").in_use, 0);
}

/* ------------------------------------------------------------------------ */
/* 7. No starvation, several budgets                                         */
/* ------------------------------------------------------------------------ */

/* Keeps taking and releasing one unit of its budget. */
static void *stream(void *arg) {
  struct churn *c = arg;
  cq_grant g;
  cq_grant_init(&g);
  while (!atomic_load(&stop)) {
    int rc = cq_grant_acquire(pool, &g, c->req, cq_now() + 5);
    if (rc == 0) {
      c->cycles++;
      CHECK(cq_grant_release(pool, &g) == 0, "stream release");
    } else {
      CHECK(rc == CQ_ETIMEDOUT, "stream acquire: %s", cq_err_name(rc));
    }
  }
  return NULL;
}

static void test_request_for_two_budgets_is_not_starved(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "x", 1));
  assert_cq_ok(cq_budget_add(pool, "y", 1));
  cq_req rx, ry, rxy;
  cqt_req(&rx, pool, "x:1");
  cqt_req(&ry, pool, "y:1");
  cqt_req(&rxy, pool, "x:1 y:1");
  pthread_t th[4];
  struct churn c[4] = {{&rx, 0}, {&rx, 0}, {&ry, 0}, {&ry, 0}};
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&th[i], NULL, stream, &c[i]), 0);
  cqt_sleep_ms(20);
  for (int round = 0; round < 20; round++) {
    cq_grant a;
    cq_grant_init(&a);
    assert_cq_ok(cq_grant_acquire(pool, &a, &rxy, cq_now() + CQT_PATIENCE_MS));
    assert_int_equal(cq_grant_held(&a, "x"), 1);
    assert_int_equal(cq_grant_held(&a, "y"), 1);
    assert_cq_ok(cq_grant_release(pool, &a));
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  assert_true(c[0].cycles + c[1].cycles > 0);
  assert_true(c[2].cycles + c[3].cycles > 0);
}

/* ------------------------------------------------------------------------ */
/* 12. Stress: random multi-budget traffic, every style                      */
/* ------------------------------------------------------------------------ */

#define N_BUDGETS 4
static const char *budget_names[N_BUDGETS] = {"a", "b", "c", "d"};
static const int64_t budget_caps[N_BUDGETS] = {3, 2, 4, 1};
static atomic_llong shadow[N_BUDGETS]; /* units the workers believe they hold */

#define N_REQS 24
static cq_req reqs[N_REQS];
static int64_t req_amount[N_REQS][N_BUDGETS];

struct worker {
  uint64_t rng;
  long granted, busy, timed_out, cancelled;
  /* callback completion */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int outcome; /* 1 = pending */
  cq_grant grant;
};

static void worker_cb(cq_grant *g, int status) {
  struct worker *w = g->data;
  pthread_mutex_lock(&w->lock);
  CHECK(w->outcome == 1, "callback ran twice");
  w->outcome = status;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

static void check_budgets(void) {
  for (int b = 0; b < N_BUDGETS; b++) {
    cq_resource_stats st;
    CHECK(cq_resource_stats_get(pool, budget_names[b], &st) == 0, "stats");
    CHECK(st.in_use <= st.capacity, "%s in use %lld > capacity",
          budget_names[b], (long long)st.in_use);
    CHECK(st.in_use + st.withheld <= st.capacity, "%s in use + withheld",
          budget_names[b]);
    CHECK(st.in_use >= 0 && st.withheld >= 0, "%s negative", budget_names[b]);
  }
}

static void hold_and_release(struct worker *w, int k) {
  for (int b = 0; b < N_BUDGETS; b++) {
    long long now =
        atomic_fetch_add(&shadow[b], req_amount[k][b]) + req_amount[k][b];
    CHECK(now <= budget_caps[b], "%s over-admitted: %lld", budget_names[b],
          now);
  }
  if (xorshift(&w->rng) % 4 == 0)
    check_budgets();
  for (int b = 0; b < N_BUDGETS; b++)
    atomic_fetch_sub(&shadow[b], req_amount[k][b]);
  CHECK(cq_grant_release(pool, &w->grant) == 0, "release");
  w->granted++;
}

static void *stress_worker(void *arg) {
  struct worker *w = arg;
  for (int iter = 0; iter < 2000; iter++) {
    int k = (int)(xorshift(&w->rng) % N_REQS);
    int style = (int)(xorshift(&w->rng) % 3);
    int rc;
    if (style == 0) {
      rc = cq_grant_try(pool, &w->grant, &reqs[k]);
      if (rc == CQ_EBUSY) {
        w->busy++;
        continue;
      }
      CHECK(rc == 0, "try: %s", cq_err_name(rc));
    } else if (style == 1) {
      int64_t deadline = cq_now() + (int64_t)(xorshift(&w->rng) % 4);
      rc = cq_grant_acquire(pool, &w->grant, &reqs[k], deadline);
      if (rc == CQ_ETIMEDOUT) {
        w->timed_out++;
        continue;
      }
      CHECK(rc == 0, "acquire: %s", cq_err_name(rc));
    } else {
      w->outcome = 1;
      int64_t deadline = xorshift(&w->rng) % 2 ? CQ_NEVER : cq_now() + 3;
      rc = cq_grant_submit(pool, &w->grant, &reqs[k], deadline, worker_cb);
      CHECK(rc == 0, "submit: %s", cq_err_name(rc));
      if (xorshift(&w->rng) % 3 == 0) {
        int crc = cq_grant_cancel(pool, &w->grant);
        CHECK(crc == 0 || crc == CQ_ESTATE, "cancel: %s", cq_err_name(crc));
      }
      pthread_mutex_lock(&w->lock);
      while (w->outcome == 1)
        pthread_cond_wait(&w->cond, &w->lock);
      rc = w->outcome;
      pthread_mutex_unlock(&w->lock);
      if (rc == CQ_ECANCELED || rc == CQ_ETIMEDOUT) {
        w->cancelled++;
        continue;
      }
      CHECK(rc == 0, "callback status: %s", cq_err_name(rc));
    }
    if (rc == 0)
      hold_and_release(w, k);
  }
  return NULL;
}

static void *monitor(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    check_budgets();
    sched_yield();
  }
  return NULL;
}

static void test_random_traffic_never_over_admits_and_ends_free(void **state) {
  (void)state;
  enum { WORKERS = 8 };
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int b = 0; b < N_BUDGETS; b++) {
    assert_cq_ok(cq_budget_add(pool, budget_names[b], budget_caps[b]));
    atomic_store(&shadow[b], 0);
  }
  for (int k = 0; k < N_REQS; k++) {
    assert_cq_ok(cq_req_init(&reqs[k], pool));
    unsigned mask = 0;
    while (mask == 0)
      mask = (unsigned)(xorshift(&seed) % (1u << N_BUDGETS));
    for (int b = 0; b < N_BUDGETS; b++) {
      req_amount[k][b] = 0;
      if (mask & (1u << b)) {
        req_amount[k][b] = 1 + (int64_t)(xorshift(&seed) % budget_caps[b]);
        assert_cq_ok(cq_req_add(&reqs[k], budget_names[b], req_amount[k][b]));
      }
    }
  }
  pthread_t th[WORKERS], mon;
  static struct worker w[WORKERS];
  for (int i = 0; i < WORKERS; i++) {
    memset(&w[i], 0, sizeof(w[i]));
    w[i].rng = seed + (uint64_t)i * 7919;
    pthread_mutex_init(&w[i].lock, NULL);
    pthread_cond_init(&w[i].cond, NULL);
    cq_grant_init(&w[i].grant);
    w[i].grant.data = &w[i];
    assert_int_equal(pthread_create(&th[i], NULL, stress_worker, &w[i]), 0);
  }
  assert_int_equal(pthread_create(&mon, NULL, monitor, NULL), 0);
  long granted = 0, busy = 0, timed = 0, cancelled = 0;
  for (int i = 0; i < WORKERS; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    granted += w[i].granted;
    busy += w[i].busy;
    timed += w[i].timed_out;
    cancelled += w[i].cancelled;
  }
  atomic_store(&stop, 1);
  assert_int_equal(pthread_join(mon, NULL), 0);
  print_message("granted %ld, busy %ld, timed out %ld, cancelled %ld\n",
                granted, busy, timed, cancelled);
  assert_true(granted > 0);
  for (int b = 0; b < N_BUDGETS; b++) {
    cq_resource_stats st = cqt_budget(pool, budget_names[b]);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.withheld, 0);
    assert_int_equal(st.waiting, 0);
    assert_true(st.peak <= st.capacity);
    assert_int_equal(atomic_load(&shadow[b]), 0);
  }
  for (int i = 0; i < WORKERS; i++) {
    pthread_mutex_destroy(&w[i].lock);
    pthread_cond_destroy(&w[i].cond);
  }
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_large_request_is_not_starved_on_one_budget),
      T(test_request_for_two_budgets_is_not_starved),
      T(test_random_traffic_never_over_admits_and_ends_free),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
