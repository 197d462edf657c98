/*
 * The test-support library, part two: what the storm suites share
 * (test_storm.c on the core API, test_uv_storm.c through the libuv
 * adapter). How large a storm is on this build, how worker threads report a
 * broken check, and the mixed-traffic model both suites drive: one pool of
 * budgets, classes and a device pool, random requests over it, the holders'
 * own tallies and a checker thread. The functions live in storm.c.
 *
 * Sizes. Every storm is a fixed number of operations times a scale:
 * CRONOQ_STRESS_SCALE (default 1) times a factor for slow builds, since a
 * storm that takes 5 s natively takes minutes under valgrind (which runs one
 * thread at a time) or ThreadSanitizer. Valgrind is recognised by
 * CRONOQ_UNDER_VALGRIND, which tests/CMakeLists.txt sets for every test
 * when the tests run under it, or by the preload valgrind puts in the
 * environment when a suite is run under it by hand; the sanitizers by the
 * compiler's own macros (storm.c is built with the same flags as the
 * suites). A storm also stops issuing new operations after
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
 * the main thread asserts that none was recorded. The functions below that
 * may fail the test say "main thread only"; the others are safe anywhere.
 */
#ifndef CRONOQ_TEST_SUPPORT_STORM_H
#define CRONOQ_TEST_SUPPORT_STORM_H

#include "cqt.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#if defined(__GNUC__)
#define STORM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define STORM_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------------ */
/* The build and the scale                                                   */
/* ------------------------------------------------------------------------ */

bool storm_under_valgrind(void);

/* What this run is ("native", "asan", "tsan", "valgrind"), for the figures
 * printed in the logs. */
const char *storm_build(void);

/* CRONOQ_STRESS_SCALE times the factor of this build. */
double storm_scale(void);

/* `n` operations at this scale, at least `min`. */
long storm_n(long n, long min);

/* Seconds after which a storm issues no new operations. */
int64_t storm_seconds(void);

/* Let a storm run until `count` has grown by `by` from now, or until
 * `give_up` (a hang guard: reaching it is not itself a failure). */
void storm_await_growth(atomic_llong *count, long long by, int64_t give_up);

/* ------------------------------------------------------------------------ */
/* Broken checks on worker threads                                           */
/* ------------------------------------------------------------------------ */

/* How many checks broke since storm_failures_reset(); any thread may read
 * it, to stop early. */
extern atomic_int storm_failures;

/* Count a broken check and keep the message of the first; any thread. */
void storm_fail(const char *fmt, ...) STORM_PRINTF(1, 2);

#define STORM_CHECK(cond, ...)                                                 \
  do {                                                                         \
    if (!(cond))                                                               \
      storm_fail(__VA_ARGS__);                                                 \
  } while (0)

void storm_failures_reset(void);

/* Fail the test with the count and the first message. Main thread only. */
void storm_assert_no_failures(void);

/* A xorshift step. Inline: the storms draw from it in their inner loops,
 * and it touches nothing but the caller's state. */
static inline uint64_t storm_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A pause of a few microseconds, or none: holders keep their units for a
 * moment so that others queue behind them. */
void storm_dawdle(uint64_t *rng);

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

extern const char *const st_names[ST_NRES];
/* Devices for the device pool, units for budgets, workers for classes. */
extern const int64_t st_caps[ST_NRES];

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
 * take the locked paths, and backfill where the pool allows it). Main
 * thread only.
 */
void st_model_init(struct st_model *m, cq_pool *pool, uint64_t seed,
                   int64_t hold_limit_ms);

/* Count the outcome of an attempt at request k that did not get its units. */
void st_count_failure(struct st_model *m, int k, int status);

/*
 * The holder of a fresh grant of request k checks what it got and adds it
 * to the tallies, which must stay within every capacity: a tally over a
 * capacity means two grants overlapped that should not have. Safe on any
 * thread, in a callback too.
 */
void st_hold(struct st_model *m, const cq_grant *g, int k, struct st_held *h,
             uint64_t *rng);

/* Take a holding off the tallies, just before its release. */
void st_unhold(struct st_model *m, const struct st_held *h);

/* The pool's own figures, as any thread may read them at any moment. */
void st_check_stats(struct st_model *m);

/* Start the checker thread and wait for its first check, so that it reads
 * the pool all through the storm that follows, however short; and stop it.
 * Main thread only. */
void st_checker_start(struct st_model *m);
void st_checker_stop(struct st_model *m);

/*
 * At rest: nothing held, withheld, reserved or waiting; the tallies back at
 * zero; the pool's grant, cancellation and placement counts equal the ones
 * the holders kept; its timeouts at most theirs (an attempt whose deadline
 * had passed never waited, and the pool counts only waiters). Main thread
 * only.
 */
void st_check_quiescent(struct st_model *m);

/* Everything the pool knows, for a storm that stopped making progress. */
void st_dump_pool(cq_pool *pool);

/*
 * Wait, generously, until *done reaches n; on giving up, print the pool and
 * fail with `what`. The threads that are stuck stay stuck: the suite fails.
 * Main thread only.
 */
void storm_wait_for(atomic_int *done, int n, cq_pool *pool, const char *what);

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
void storm_cond_init(pthread_cond_t *c);

/* One wait on `c` (whose mutex `m` is held) until at most `give_up_ms` on
 * cq_now()'s clock; the caller checks its condition again, and the time. */
void storm_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m,
                           int64_t give_up_ms);

/* A thread whose end can be waited for with a limit (POSIX has no timed
 * join). */
struct storm_thread {
  pthread_t id;
  void *(*fn)(void *);
  void *arg;
  atomic_int done;
};

void storm_thread_start(struct storm_thread *t, void *(*fn)(void *), void *arg);

/*
 * Join n threads that finish once the storm, at most storm_seconds() long,
 * is over. Main thread only. On giving up, print the pool and fail with
 * the first broken check, which a thread stuck waiting records itself.
 */
void storm_join_all(struct storm_thread *t, int n, cq_pool *pool,
                    const char *what);

#endif /* CRONOQ_TEST_SUPPORT_STORM_H */
