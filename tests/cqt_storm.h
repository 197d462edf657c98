/*
 * Shared by the storm suites (test_storm.c, test_uv_storm.c; issue #8,
 * "Concurrency stress"): how large a storm is on this build, how worker
 * threads report a broken check, and the mixed-traffic model both suites
 * drive: one pool of budgets, classes and a device pool, random requests
 * over it, the holders' own tallies and a checker thread.
 *
 * Sizes. Every storm is a fixed number of operations times a scale:
 * CRONOQ_STRESS_SCALE (default 1) times a factor for slow builds, since a
 * storm that takes 5 s natively takes minutes under valgrind (which runs one
 * thread at a time) or ThreadSanitizer. Valgrind is recognised by
 * CRONOQ_UNDER_VALGRIND, which tests/reliability/storm.cmake sets when the
 * tests run under it, or by the preload valgrind puts in the environment
 * when a suite is run under it by hand; the sanitizers by the compiler's
 * own macros. A storm also stops issuing new operations after
 * storm_seconds(), so that a slow machine runs a shorter storm rather than
 * a longer one; that only ever shortens the storm and nothing asserts on
 * it. Waits for outcomes use CQT_PATIENCE_MS: no duration is ever asserted.
 *
 * Races. Both suites cancel from threads of their own all along, so under
 * ThreadSanitizer they also check that a cancel racing its target is no
 * data race. The two races they found in the library, both fixed, each
 * have a reproducer in its suite that guards the fix.
 *
 * Worker threads never call cmocka: its failures longjmp on the main
 * thread's stack. They record the first broken check with STORM_CHECK and
 * the main thread asserts that none was recorded.
 */
#ifndef CRONOQ_TEST_STORM_H
#define CRONOQ_TEST_STORM_H

#include "cq_test.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

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

static inline bool storm_under_valgrind(void) {
  const char *v = getenv("CRONOQ_UNDER_VALGRIND");
  if (v != NULL && *v != '\0' && strcmp(v, "0") != 0)
    return true;
  const char *pre = getenv("LD_PRELOAD");
  return pre != NULL && strstr(pre, "vgpreload") != NULL;
}

/* What this run is, for the figures printed in the logs. */
static inline const char *storm_build(void) {
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

static inline double storm_scale(void) {
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

/* `n` operations at this scale, at least `min`. */
static inline long storm_n(long n, long min) {
  double v = (double)n * storm_scale();
  return v < (double)min ? min : (long)v;
}

/* Seconds after which a storm issues no new operations. */
static inline int64_t storm_seconds(void) {
  const char *s = getenv("CRONOQ_STRESS_SECONDS");
  if (s != NULL && *s != '\0' && atol(s) > 0)
    return atol(s);
  return storm_under_valgrind() ? 12 : 6;
}

/* Let a storm run until `count` has grown by `by` from now, or until
 * `give_up` (a hang guard: reaching it is not itself a failure). */
static inline void storm_await_growth(atomic_llong *count, long long by,
                                      int64_t give_up) {
  long long from = atomic_load(count);
  while (atomic_load(count) < from + by && cq_now() < give_up)
    cqt_sleep_ms(1);
}

/* ------------------------------------------------------------------------ */
/* Broken checks on worker threads                                           */
/* ------------------------------------------------------------------------ */

static atomic_int storm_failures;
static char storm_first_failure[512];
static pthread_mutex_t storm_failure_lock = PTHREAD_MUTEX_INITIALIZER;

#define STORM_CHECK(cond, ...)                                                 \
  do {                                                                         \
    if (!(cond)) {                                                             \
      pthread_mutex_lock(&storm_failure_lock);                                 \
      if (atomic_fetch_add(&storm_failures, 1) == 0)                           \
        snprintf(storm_first_failure, sizeof(storm_first_failure),             \
                 __VA_ARGS__);                                                 \
      pthread_mutex_unlock(&storm_failure_lock);                               \
    }                                                                          \
  } while (0)

static inline void storm_failures_reset(void) {
  atomic_store(&storm_failures, 0);
  storm_first_failure[0] = '\0';
}

/* Main thread only. */
static inline void storm_assert_no_failures(void) {
  int n = atomic_load(&storm_failures);
  if (n != 0) {
    pthread_mutex_lock(&storm_failure_lock);
    char first[sizeof(storm_first_failure)];
    memcpy(first, storm_first_failure, sizeof(first));
    pthread_mutex_unlock(&storm_failure_lock);
    fail_msg("%d broken checks; first: %s", n, first);
  }
}

static inline uint64_t storm_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A pause of a few microseconds, or none: holders keep their units for a
 * moment so that others queue behind them. */
static inline void storm_dawdle(uint64_t *rng) {
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

/*
 * The device pool comes first, then budgets, then classes: the pool's own
 * resource order, which staged claims follow.
 */
enum { ST_GPU, ST_CPU, ST_MEM, ST_DB, ST_LIC, ST_ETL, ST_TRAIN, ST_NRES };
#define ST_DEVICES 4
#define ST_NREQS 40

static const char *const st_names[ST_NRES] = {"gpu", "cpu", "mem",  "db",
                                              "lic", "etl", "train"};
/* Devices for the device pool, units for budgets, workers for classes. */
static const int64_t st_caps[ST_NRES] = {ST_DEVICES, 8, 32, 3, 1, 3, 2};

struct st_req {
  cq_req req;
  int64_t amount[ST_NRES]; /* gpu: thousandths, or devices when gpu_whole */
  bool gpu_whole;
};

/* What a holder took note of, to take it off its tallies again. */
struct st_held {
  int k;
  size_t ndev;
  uint32_t dev[ST_DEVICES];
  int64_t dev_milli[ST_DEVICES];
};

struct st_model {
  cq_pool *pool;
  struct st_req reqs[ST_NREQS];
  /* What the holders believe is held: never above a capacity. */
  atomic_llong tally[ST_NRES];
  atomic_llong dev_tally[ST_DEVICES];
  /* Outcomes, per resource the request named. */
  atomic_llong grants[ST_NRES];
  atomic_llong timeouts[ST_NRES];
  atomic_llong cancels[ST_NRES];
  atomic_llong placements; /* devices placed on, over all grants */
  /* Capacities change during the storm (never above st_caps), so the pool
   * may hold more than a capacity that just shrank. */
  bool churn;
  /* The checker thread. */
  atomic_int stop_checker;
  atomic_llong checks;
  pthread_t checker;
};

/*
 * Build the pool's resources and ST_NREQS random requests from `seed`. With
 * `hold_limit_ms` every other request declares that hold limit (they then
 * take the locked paths, and backfill where the pool allows it).
 */
static inline void st_model_init(struct st_model *m, cq_pool *pool,
                                 uint64_t seed, int64_t hold_limit_ms) {
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

/* Count the outcome of an attempt at request k that did not get its units. */
static inline void st_count_failure(struct st_model *m, int k, int status) {
  for (int r = 0; r < ST_NRES; r++) {
    if (m->reqs[k].amount[r] == 0)
      continue;
    if (status == CQ_ETIMEDOUT)
      atomic_fetch_add(&m->timeouts[r], 1);
    else if (status == CQ_ECANCELED)
      atomic_fetch_add(&m->cancels[r], 1);
  }
}

/*
 * The holder of a fresh grant of request k checks what it got and adds it
 * to the tallies, which must stay within every capacity: a tally over a
 * capacity means two grants overlapped that should not have. Safe on any
 * thread, in a callback too.
 */
static inline void st_hold(struct st_model *m, const cq_grant *g, int k,
                           struct st_held *h, uint64_t *rng) {
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

/* Take a holding off the tallies, just before its release. */
static inline void st_unhold(struct st_model *m, const struct st_held *h) {
  const struct st_req *q = &m->reqs[h->k];
  for (int r = ST_CPU; r < ST_NRES; r++)
    if (q->amount[r] != 0)
      atomic_fetch_sub(&m->tally[r], q->amount[r]);
  for (size_t i = 0; i < h->ndev; i++)
    atomic_fetch_sub(&m->dev_tally[h->dev[i]], h->dev_milli[i]);
}

/* The pool's own figures, as any thread may read them at any moment. */
static inline void st_check_stats(struct st_model *m) {
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

/* Start the checker and wait for its first check, so that it reads the
 * pool all through the storm that follows, however short. */
static inline void st_checker_start(struct st_model *m) {
  atomic_store(&m->stop_checker, 0);
  assert_int_equal(pthread_create(&m->checker, NULL, st_checker_main, m), 0);
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (atomic_load(&m->checks) == 0) {
    if (cq_now() > give_up)
      fail_msg("the checker made no check in %d s", CQT_PATIENCE_MS / 1000);
    sched_yield();
  }
}

static inline void st_checker_stop(struct st_model *m) {
  atomic_store(&m->stop_checker, 1);
  assert_int_equal(pthread_join(m->checker, NULL), 0);
}

/*
 * At rest: nothing held, withheld, reserved or waiting; the tallies back at
 * zero; the pool's grant, cancellation and placement counts equal the ones
 * the holders kept; its timeouts at most theirs (an attempt whose deadline
 * had passed never waited, and the pool counts only waiters).
 */
static inline void st_check_quiescent(struct st_model *m) {
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

/* Everything the pool knows, for a storm that stopped making progress. */
static inline void st_dump_pool(cq_pool *pool) {
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

/*
 * Wait, generously, until *done reaches n; on giving up, print the pool and
 * fail with `what`. The threads that are stuck stay stuck: the suite fails.
 */
static inline void storm_wait_for(atomic_int *done, int n, cq_pool *pool,
                                  const char *what) {
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

/*
 * A storm that stops making progress must fail with what it knows rather
 * than hang until ctest kills it: every wait of the suites gives up after
 * CQT_PATIENCE_MS (more for a whole storm) and records a broken check. The
 * limit only guards against a hang; no duration is a success criterion.
 */

/* A condition variable on the monotonic clock, the clock of cq_now(). */
static inline void storm_cond_init(pthread_cond_t *c) {
  pthread_condattr_t attr;
  assert_int_equal(pthread_condattr_init(&attr), 0);
  assert_int_equal(pthread_condattr_setclock(&attr, CLOCK_MONOTONIC), 0);
  assert_int_equal(pthread_cond_init(c, &attr), 0);
  (void)pthread_condattr_destroy(&attr);
}

/* One wait on `c` (whose mutex `m` is held) until at most `give_up_ms` on
 * cq_now()'s clock; the caller checks its condition again, and the time. */
static inline void storm_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m,
                                         int64_t give_up_ms) {
  struct timespec ts;
  ts.tv_sec = (time_t)(give_up_ms / 1000);
  ts.tv_nsec = (long)(give_up_ms % 1000) * 1000000L;
  (void)pthread_cond_timedwait(c, m, &ts);
}

/* A thread whose end can be waited for with a limit (POSIX has no timed
 * join). */
struct storm_thread {
  pthread_t id;
  void *(*fn)(void *);
  void *arg;
  atomic_int done;
};

static void *storm_thread_main(void *arg) {
  struct storm_thread *t = arg;
  t->fn(t->arg);
  atomic_store(&t->done, 1);
  return NULL;
}

static inline void storm_thread_start(struct storm_thread *t,
                                      void *(*fn)(void *), void *arg) {
  t->fn = fn;
  t->arg = arg;
  atomic_init(&t->done, 0);
  assert_int_equal(pthread_create(&t->id, NULL, storm_thread_main, t), 0);
}

/*
 * Join n threads that finish once the storm, at most storm_seconds() long,
 * is over. Main thread only. On giving up, print the pool and fail with
 * the first broken check, which a thread stuck waiting records itself.
 */
static inline void storm_join_all(struct storm_thread *t, int n, cq_pool *pool,
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

#endif /* CRONOQ_TEST_STORM_H */
