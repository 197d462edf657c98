/*
 * What the storm suites share (storm.h): the scale of this build, the
 * recorder of broken checks, the mixed-traffic model with its checker
 * thread, and waits that give up. The declarations in storm.h say what each
 * function does and on which thread it may run.
 */
#include "storm.h"

/* ------------------------------------------------------------------------ */
/* The build and the scale                                                   */
/* ------------------------------------------------------------------------ */

#if defined(__SANITIZE_THREAD__)
#define STORM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STORM_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define STORM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STORM_ASAN 1
#endif
#endif

bool storm_under_valgrind(void) {
  const char *v = getenv("CRONOQ_UNDER_VALGRIND");
  if (v != NULL && *v != '\0' && strcmp(v, "0") != 0)
    return true;
  const char *pre = getenv("LD_PRELOAD");
  return pre != NULL && strstr(pre, "vgpreload") != NULL;
}

const char *storm_build(void) {
  if (storm_under_valgrind())
    return "valgrind";
#if defined(STORM_TSAN)
  return "tsan";
#elif defined(STORM_ASAN)
  return "asan";
#else
  return "native";
#endif
}

double storm_scale(void) {
  double scale = 1.0;
  const char *s = getenv("CRONOQ_STRESS_SCALE");
  if (s != NULL && *s != '\0') {
    double v = strtod(s, NULL);
    if (v > 0)
      scale = v;
  }
  /* How much slower than native each build runs these storms, measured on
   * a 2-core machine (valgrind serialises the threads besides). */
  if (storm_under_valgrind())
    return scale / 12;
#if defined(STORM_TSAN)
  return scale / 2;
#elif defined(STORM_ASAN)
  return scale / 2;
#else
  return scale;
#endif
}

long storm_n(long n, long min) {
  double v = (double)n * storm_scale();
  return v < (double)min ? min : (long)v;
}

int64_t storm_seconds(void) {
  const char *s = getenv("CRONOQ_STRESS_SECONDS");
  if (s != NULL && *s != '\0' && atol(s) > 0)
    return atol(s);
  return storm_under_valgrind() ? 12 : 6;
}

void storm_await_growth(atomic_llong *count, long long by, int64_t give_up) {
  long long from = atomic_load(count);
  while (atomic_load(count) < from + by && cq_now() < give_up)
    cqt_sleep_ms(1);
}

/* ------------------------------------------------------------------------ */
/* Broken checks on worker threads                                           */
/* ------------------------------------------------------------------------ */

atomic_int storm_failures;
static char storm_first_failure[512];
static pthread_mutex_t storm_failure_lock = PTHREAD_MUTEX_INITIALIZER;

void storm_fail(const char *fmt, ...) {
  pthread_mutex_lock(&storm_failure_lock);
  if (atomic_fetch_add(&storm_failures, 1) == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(storm_first_failure, sizeof(storm_first_failure), fmt, ap);
    va_end(ap);
  }
  pthread_mutex_unlock(&storm_failure_lock);
}

void storm_failures_reset(void) {
  atomic_store(&storm_failures, 0);
  storm_first_failure[0] = '\0';
}

void storm_assert_no_failures(void) {
  int n = atomic_load(&storm_failures);
  if (n != 0) {
    pthread_mutex_lock(&storm_failure_lock);
    char first[sizeof(storm_first_failure)];
    memcpy(first, storm_first_failure, sizeof(first));
    pthread_mutex_unlock(&storm_failure_lock);
    fail_msg("%d broken checks; first: %s", n, first);
  }
}

void storm_dawdle(uint64_t *rng) {
  unsigned r = (unsigned)(storm_rand(rng) % 8);
  if (r < 3)
    return;
  if (r < 7) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------ */
/* The mixed-traffic model                                                   */
/* ------------------------------------------------------------------------ */

const char *const st_names[ST_NRES] = {"gpu", "cpu", "mem",  "db",
                                       "lic", "etl", "train"};
const int64_t st_caps[ST_NRES] = {ST_DEVICES, 8, 32, 3, 1, 3, 2};

void st_model_init(struct st_model *m, cq_pool *pool, uint64_t seed,
                   int64_t hold_limit_ms) {
  memset(m, 0, sizeof(*m));
  m->pool = pool;
  assert_cq_ok(cq_devices_add(pool, st_names[ST_GPU], ST_DEVICES, NULL));
  for (int r = ST_CPU; r <= ST_LIC; r++)
    assert_cq_ok(cq_budget_add(pool, st_names[r], st_caps[r]));
  assert_cq_ok(cq_class_add(pool, st_names[ST_ETL], st_caps[ST_ETL]));
  assert_cq_ok(cq_class_add(pool, st_names[ST_TRAIN], st_caps[ST_TRAIN]));
  static const int64_t fractions[] = {100, 250, 300, 500, 700, 1000};
  for (int k = 0; k < ST_NREQS; k++) {
    struct st_req *q = &m->reqs[k];
    assert_cq_ok(cq_req_init(&q->req, pool));
    bool any = false;
    while (!any) {
      /* A third of the requests name the device pool. */
      if (storm_rand(&seed) % 3 == 0) {
        q->gpu_whole = storm_rand(&seed) % 3 == 0;
        if (q->gpu_whole) {
          /* Mostly 1 or 2 devices, now and then all of them. */
          q->amount[ST_GPU] = storm_rand(&seed) % 8 == 0
                                  ? ST_DEVICES
                                  : 1 + (int64_t)(storm_rand(&seed) % 2);
          assert_cq_ok(cq_req_add_devices(&q->req, "gpu", q->amount[ST_GPU]));
        } else {
          q->amount[ST_GPU] = fractions[storm_rand(&seed) % 6];
          assert_cq_ok(cq_req_add_fraction(&q->req, "gpu", q->amount[ST_GPU]));
        }
        any = true;
      }
      for (int r = ST_CPU; r <= ST_LIC; r++) {
        if (storm_rand(&seed) % 3 != 0)
          continue;
        int64_t most = st_caps[r] < 4 ? st_caps[r] : st_caps[r] / 2;
        q->amount[r] = 1 + (int64_t)(storm_rand(&seed) % (uint64_t)most);
        assert_cq_ok(cq_req_add(&q->req, st_names[r], q->amount[r]));
        any = true;
      }
    }
    unsigned c = (unsigned)(storm_rand(&seed) % 4);
    if (c < 2) {
      int r = c == 0 ? ST_ETL : ST_TRAIN;
      q->amount[r] = 1;
      assert_cq_ok(cq_req_set_class(&q->req, st_names[r]));
    }
    if (hold_limit_ms > 0 && k % 2 == 1)
      assert_cq_ok(cq_req_set_hold_limit(&q->req, hold_limit_ms));
  }
}

void st_count_failure(struct st_model *m, int k, int status) {
  for (int r = 0; r < ST_NRES; r++) {
    if (m->reqs[k].amount[r] == 0)
      continue;
    if (status == CQ_ETIMEDOUT)
      atomic_fetch_add(&m->timeouts[r], 1);
    else if (status == CQ_ECANCELED)
      atomic_fetch_add(&m->cancels[r], 1);
  }
}

void st_hold(struct st_model *m, const cq_grant *g, int k, struct st_held *h,
             uint64_t *rng) {
  const struct st_req *q = &m->reqs[k];
  h->k = k;
  h->ndev = 0;
  STORM_CHECK(cq_grant_is_held(g), "granted request %d is not held", k);
  for (int r = ST_CPU; r < ST_NRES; r++) {
    if (q->amount[r] == 0)
      continue;
    atomic_fetch_add(&m->grants[r], 1);
    long long now = atomic_fetch_add(&m->tally[r], q->amount[r]) + q->amount[r];
    STORM_CHECK(now <= st_caps[r], "%s over-admitted: %lld held of %lld",
                st_names[r], now, (long long)st_caps[r]);
  }
  /* Asking the grant takes the pool lock: only now and then for budgets. */
  if (storm_rand(rng) % 4 == 0) {
    for (int r = ST_CPU; r <= ST_LIC; r++)
      STORM_CHECK(cq_grant_held(g, st_names[r]) == q->amount[r],
                  "grant of request %d holds %lld of %s, asked %lld", k,
                  (long long)cq_grant_held(g, st_names[r]), st_names[r],
                  (long long)q->amount[r]);
  }
  if (q->amount[ST_GPU] == 0)
    return;
  atomic_fetch_add(&m->grants[ST_GPU], 1);
  h->ndev = cq_grant_devices(g, "gpu", h->dev, ST_DEVICES);
  int64_t held = cq_grant_held(g, "gpu");
  size_t want = q->gpu_whole ? (size_t)q->amount[ST_GPU] : 1;
  int64_t milli = q->gpu_whole ? CQ_DEVICE_MILLI : q->amount[ST_GPU];
  STORM_CHECK(h->ndev == want, "request %d holds %zu devices, asked %zu", k,
              h->ndev, want);
  STORM_CHECK(held == milli * (int64_t)want,
              "request %d holds %lld thousandths of gpu, asked %lld", k,
              (long long)held, (long long)(milli * (int64_t)want));
  if (h->ndev > want)
    h->ndev = 0; /* broken already; keep the tallies sane */
  atomic_fetch_add(&m->placements, (long long)h->ndev);
  for (size_t i = 0; i < h->ndev; i++) {
    STORM_CHECK(h->dev[i] < ST_DEVICES, "device index %u", (unsigned)h->dev[i]);
    if (h->dev[i] >= ST_DEVICES) {
      h->ndev = i;
      break;
    }
    h->dev_milli[i] = milli;
    long long now = atomic_fetch_add(&m->dev_tally[h->dev[i]], milli) + milli;
    STORM_CHECK(now <= CQ_DEVICE_MILLI,
                "device %u over-admitted: %lld thousandths held",
                (unsigned)h->dev[i], now);
  }
}

void st_unhold(struct st_model *m, const struct st_held *h) {
  const struct st_req *q = &m->reqs[h->k];
  for (int r = ST_CPU; r < ST_NRES; r++)
    if (q->amount[r] != 0)
      atomic_fetch_sub(&m->tally[r], q->amount[r]);
  for (size_t i = 0; i < h->ndev; i++)
    atomic_fetch_sub(&m->dev_tally[h->dev[i]], h->dev_milli[i]);
}

void st_check_stats(struct st_model *m) {
  for (int r = 0; r < ST_NRES; r++) {
    cq_resource_stats st;
    int rc = cq_resource_stats_get(m->pool, st_names[r], &st);
    STORM_CHECK(rc == 0, "stats of %s: %s", st_names[r], cq_err_name(rc));
    if (rc != 0)
      continue;
    STORM_CHECK(st.in_use >= 0 && st.withheld >= 0,
                "%s: in use %lld, withheld %lld", st_names[r],
                (long long)st.in_use, (long long)st.withheld);
    /* With churn a shrink leaves holders their units: only the highest
     * capacity bounds what is held, and nothing is withheld beyond what
     * is free. */
    int64_t most = r == ST_GPU ? ST_DEVICES * CQ_DEVICE_MILLI : st_caps[r];
    int64_t cap = m->churn ? most : st.capacity;
    int64_t room = st.capacity > st.in_use ? st.capacity - st.in_use : 0;
    if (r == ST_GPU && m->churn)
      room = st.capacity; /* in use may be on devices now offline */
    STORM_CHECK(st.in_use <= cap, "%s: in use %lld > capacity %lld",
                st_names[r], (long long)st.in_use, (long long)cap);
    STORM_CHECK(st.withheld <= room,
                "%s: in use %lld, withheld %lld, capacity %lld", st_names[r],
                (long long)st.in_use, (long long)st.withheld,
                (long long)st.capacity);
    STORM_CHECK(st.peak <= cap, "%s: peak %lld > capacity %lld", st_names[r],
                (long long)st.peak, (long long)cap);
  }
  for (uint32_t d = 0; d < ST_DEVICES; d++) {
    cq_device_stats ds;
    int rc = cq_device_stats_get(m->pool, "gpu", d, &ds);
    STORM_CHECK(rc == 0, "stats of device %u: %s", (unsigned)d,
                cq_err_name(rc));
    if (rc != 0)
      continue;
    STORM_CHECK(ds.used_milli >= 0 && ds.used_milli <= CQ_DEVICE_MILLI,
                "device %u: %lld thousandths in use", (unsigned)d,
                (long long)ds.used_milli);
    STORM_CHECK(!ds.whole || ds.used_milli == CQ_DEVICE_MILLI,
                "device %u held whole with %lld thousandths", (unsigned)d,
                (long long)ds.used_milli);
    STORM_CHECK(ds.peak_milli <= CQ_DEVICE_MILLI,
                "device %u: peak %lld thousandths", (unsigned)d,
                (long long)ds.peak_milli);
  }
}

static void *st_checker_main(void *arg) {
  struct st_model *m = arg;
  while (!atomic_load(&m->stop_checker)) {
    st_check_stats(m);
    atomic_fetch_add(&m->checks, 1);
    sched_yield();
  }
  return NULL;
}

void st_checker_start(struct st_model *m) {
  atomic_store(&m->stop_checker, 0);
  assert_int_equal(pthread_create(&m->checker, NULL, st_checker_main, m), 0);
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (atomic_load(&m->checks) == 0) {
    if (cq_now() > give_up)
      fail_msg("the checker made no check in %d s", CQT_PATIENCE_MS / 1000);
    sched_yield();
  }
}

void st_checker_stop(struct st_model *m) {
  atomic_store(&m->stop_checker, 1);
  assert_int_equal(pthread_join(m->checker, NULL), 0);
}

void st_check_quiescent(struct st_model *m) {
  st_check_stats(m);
  storm_assert_no_failures();
  assert_int_equal(cqt_waiting(m->pool), 0);
  for (int r = 0; r < ST_NRES; r++) {
    cq_resource_stats st;
    assert_cq_ok(cq_resource_stats_get(m->pool, st_names[r], &st));
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.withheld, 0);
    assert_int_equal(st.waiting, 0);
    assert_int_equal(atomic_load(&m->tally[r]), 0);
    if (st.grants != (uint64_t)atomic_load(&m->grants[r]) ||
        st.cancellations != (uint64_t)atomic_load(&m->cancels[r]) ||
        st.timeouts > (uint64_t)atomic_load(&m->timeouts[r]))
      fail_msg("%s: the pool counts %llu grants, %llu cancellations, %llu "
               "timeouts; the holders %lld, %lld, %lld",
               st_names[r], (unsigned long long)st.grants,
               (unsigned long long)st.cancellations,
               (unsigned long long)st.timeouts, atomic_load(&m->grants[r]),
               atomic_load(&m->cancels[r]), atomic_load(&m->timeouts[r]));
  }
  long long placed = 0;
  for (uint32_t d = 0; d < ST_DEVICES; d++) {
    cq_device_stats ds;
    assert_cq_ok(cq_device_stats_get(m->pool, "gpu", d, &ds));
    assert_int_equal(ds.used_milli, 0);
    assert_false(ds.whole);
    assert_false(ds.reserved);
    assert_int_equal(atomic_load(&m->dev_tally[d]), 0);
    placed += (long long)ds.grants;
  }
  assert_int_equal(placed, atomic_load(&m->placements));
  /* No storm removes a resource, so none may answer CQ_ENOENT ("which was
   * removed"): headroom checks every request against the resources as they
   * are (without a grant, so without events). The count of lock-free grants
   * once borrowed into the usage word's state bits and removed a budget for
   * good. */
  for (int k = 0; k < ST_NREQS; k++) {
    int64_t copies;
    int rc = cq_req_headroom(m->pool, &m->reqs[k].req, &copies);
    if (rc != 0)
      fail_msg("request %d: headroom %s: a resource reported as removed", k,
               cq_err_name(rc));
  }
}

void st_dump_pool(cq_pool *pool) {
  cq_pool_stats ps;
  if (cq_pool_stats_get(pool, &ps) == 0)
    print_message("pool: %llu waiting, %llu waited grants, %llu wake-ups\n",
                  (unsigned long long)ps.waiting,
                  (unsigned long long)ps.waited_grants,
                  (unsigned long long)ps.wakeups);
  cq_resource_stats st[16];
  size_t n = 0;
  if (cq_pool_snapshot(pool, st, 16, &n) != 0)
    return;
  for (size_t i = 0; i < n && i < 16; i++)
    print_message("%s: capacity %lld, in use %lld, withheld %lld, waiting "
                  "%llu, grants %llu\n",
                  st[i].name, (long long)st[i].capacity,
                  (long long)st[i].in_use, (long long)st[i].withheld,
                  (unsigned long long)st[i].waiting,
                  (unsigned long long)st[i].grants);
}

void storm_wait_for(atomic_int *done, int n, cq_pool *pool, const char *what) {
  int64_t give_up = cq_now() + storm_seconds() * 1000 + CQT_PATIENCE_MS;
  while (atomic_load(done) < n) {
    if (cq_now() > give_up) {
      st_dump_pool(pool);
      fail_msg("%s: %d of %d finished after %d s", what, atomic_load(done), n,
               (int)((storm_seconds() * 1000 + CQT_PATIENCE_MS) / 1000));
    }
    cqt_sleep_ms(2);
  }
}

/* ------------------------------------------------------------------------ */
/* Waits that give up                                                        */
/* ------------------------------------------------------------------------ */

void storm_cond_init(pthread_cond_t *c) {
  pthread_condattr_t attr;
  assert_int_equal(pthread_condattr_init(&attr), 0);
  assert_int_equal(pthread_condattr_setclock(&attr, CLOCK_MONOTONIC), 0);
  assert_int_equal(pthread_cond_init(c, &attr), 0);
  (void)pthread_condattr_destroy(&attr);
}

void storm_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m,
                           int64_t give_up_ms) {
  struct timespec ts;
  ts.tv_sec = (time_t)(give_up_ms / 1000);
  ts.tv_nsec = (long)(give_up_ms % 1000) * 1000000L;
  (void)pthread_cond_timedwait(c, m, &ts);
}

static void *storm_thread_main(void *arg) {
  struct storm_thread *t = arg;
  t->fn(t->arg);
  atomic_store(&t->done, 1);
  return NULL;
}

void storm_thread_start(struct storm_thread *t, void *(*fn)(void *),
                        void *arg) {
  t->fn = fn;
  t->arg = arg;
  atomic_init(&t->done, 0);
  assert_int_equal(pthread_create(&t->id, NULL, storm_thread_main, t), 0);
}

void storm_join_all(struct storm_thread *t, int n, cq_pool *pool,
                    const char *what) {
  int64_t give_up = cq_now() + storm_seconds() * 1000 + CQT_PATIENCE_MS;
  for (int i = 0; i < n; i++) {
    while (!atomic_load(&t[i].done) && cq_now() <= give_up)
      cqt_sleep_ms(2);
    if (!atomic_load(&t[i].done)) {
      STORM_CHECK(false, "%s: thread %d of %d still running after %d s", what,
                  i, n,
                  (int)((storm_seconds() * 1000 + CQT_PATIENCE_MS) / 1000));
      st_dump_pool(pool);
      storm_assert_no_failures();
    }
    assert_int_equal(pthread_join(t[i].id, NULL), 0);
  }
}
