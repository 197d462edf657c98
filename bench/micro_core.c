/*
 * Micro-benchmarks of the core, each against a baseline measured in the
 * same run:
 * - uncontended try + release of 1- and 4-budget requests, against a pthread
 *   mutex lock/unlock with a counter update (and against the hand-rolled
 *   semaphore a user would write: check-and-take, then give back);
 * - handoff: a release on one thread granting a waiter blocked on another,
 *   against a pthread mutex + condition variable handoff;
 * - acquire + release with N requests parked, on the same budget and on
 *   another one, against the same figure at N = 10 (flatness).
 * Every benchmark checks its own result (units back, counts as expected).
 */
#include "harness.h"

#include <cronoq/cronoq.h>

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long uncontended_ops(void) {
  return cqb_opts.size == CQB_QUICK  ? 200000
         : cqb_opts.size == CQB_FULL ? 5000000
                                     : 1000000;
}

static void must(int rc, const char *what) {
  if (rc != 0)
    cqb_fail("%s: %s", what, cq_err_name(rc));
}

/* ------------------------------------------------------------------------ */
/* Uncontended                                                               */
/* ------------------------------------------------------------------------ */

struct unc {
  cq_pool *pool;
  cq_req req;
  int n_budgets;
  long ops;
};

static double rep_try_release(void *arg) {
  struct unc *u = arg;
  cq_grant g;
  cq_grant_init(&g);
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < u->ops; i++) {
    if (cq_grant_try(u->pool, &g, &u->req) != 0 ||
        cq_grant_release(u->pool, &g) != 0)
      return -1;
  }
  int64_t t1 = cqb_now_ns();
  cq_resource_stats st;
  if (cq_resource_stats_get(u->pool, "b0", &st) != 0 || st.in_use != 0)
    return -1;
  return (double)(t1 - t0) / (double)u->ops;
}

struct mutex_counter {
  pthread_mutex_t lock;
  long counter;
  long ops;
};

/* The literal baseline: one lock, a counter update, one unlock. */
static double rep_mutex_counter(void *arg) {
  struct mutex_counter *m = arg;
  m->counter = 0;
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < m->ops; i++) {
    pthread_mutex_lock(&m->lock);
    m->counter++;
    pthread_mutex_unlock(&m->lock);
  }
  int64_t t1 = cqb_now_ns();
  return m->counter == m->ops ? (double)(t1 - t0) / (double)m->ops : -1;
}

/* What users write by hand: take under the lock if it fits, give back under
 * the lock. Two lock/unlock pairs per task, like try + release. */
static double rep_hand_semaphore(void *arg) {
  struct mutex_counter *m = arg;
  long used = 0, taken = 0, cap = 1 << 20;
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < m->ops; i++) {
    pthread_mutex_lock(&m->lock);
    if (used + 1 <= cap) {
      used++;
      taken++;
    }
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_lock(&m->lock);
    used--;
    pthread_mutex_unlock(&m->lock);
  }
  int64_t t1 = cqb_now_ns();
  return taken == m->ops && used == 0 ? (double)(t1 - t0) / (double)m->ops : -1;
}

/* The floor under any lock-free multi-budget acquire and release: one
 * atomic add and one atomic subtract on each budget's word, each word on a
 * cache line of its own, as the budgets' are. */
struct floor {
  struct {
    alignas(64) _Atomic uint64_t word;
  } b[4];
  int n_budgets;
  long ops;
};

static double rep_atomic_floor(void *arg) {
  struct floor *f = arg;
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < f->ops; i++) {
    for (int k = 0; k < f->n_budgets; k++)
      atomic_fetch_add_explicit(&f->b[k].word, 1, memory_order_acq_rel);
    for (int k = 0; k < f->n_budgets; k++)
      atomic_fetch_sub_explicit(&f->b[k].word, 1, memory_order_acq_rel);
  }
  int64_t t1 = cqb_now_ns();
  for (int k = 0; k < f->n_budgets; k++)
    if (atomic_load(&f->b[k].word) != 0)
      return -1;
  return (double)(t1 - t0) / (double)f->ops;
}

static void bench_uncontended(void) {
  struct mutex_counter m;
  pthread_mutex_init(&m.lock, NULL);
  m.ops = uncontended_ops();
  struct cqb_stat base = cqb_measure("mutex counter", rep_mutex_counter, &m);
  struct cqb_stat sem = cqb_measure("hand semaphore", rep_hand_semaphore, &m);
  cqb_progress_tick("uncontended baselines");

  for (int nb = 1; nb <= 4; nb += 3) {
    struct unc u;
    u.ops = m.ops;
    u.n_budgets = nb;
    must(cq_pool_create(&u.pool, NULL), "pool");
    must(cq_req_init(&u.req, u.pool), "req");
    for (int b = 0; b < nb; b++) {
      char name[8];
      snprintf(name, sizeof(name), "b%d", b);
      must(cq_budget_add(u.pool, name, 1 << 20), "budget");
      must(cq_req_add(&u.req, name, 1), "req add");
    }
    struct floor fl;
    memset(&fl, 0, sizeof(fl));
    fl.n_budgets = nb;
    fl.ops = m.ops;
    struct cqb_stat s = cqb_measure("try+release", rep_try_release, &u);
    struct cqb_stat floor = cqb_measure("atomic floor", rep_atomic_floor, &fl);
    char fig[96], floor_name[64];
    snprintf(fig, sizeof(fig), "try + release, %d-budget request", nb);
    cqb_figure("uncontended", fig, "ns/op", s, "mutex lock+counter+unlock",
               &base, nb == 1 ? 2.0 : 4.0);
    snprintf(fig, sizeof(fig), "try + release, %d-budget (vs atomic floor)",
             nb);
    snprintf(floor_name, sizeof(floor_name), "%d atomic add+sub pairs", nb);
    cqb_figure("uncontended", fig, "ns/op", s, floor_name, &floor,
               nb == 4 ? 1.25 : 0);
    snprintf(fig, sizeof(fig), "baseline: %d atomic add+sub pairs", nb);
    cqb_figure("uncontended", fig, "ns/op", floor, NULL, NULL, 0);
    snprintf(fig, sizeof(fig), "try + release, %d-budget (vs hand-rolled)", nb);
    cqb_figure("uncontended", fig, "ns/op", s, "hand-rolled try+release", &sem,
               0);
    must(cq_pool_destroy(u.pool), "destroy");
    cqb_progress_tick("uncontended try + release");
  }
  cqb_figure("uncontended", "baseline: mutex lock+counter+unlock", "ns/op",
             base, NULL, NULL, 0);
  cqb_figure("uncontended", "baseline: hand-rolled try+release", "ns/op", sem,
             NULL, NULL, 0);
  pthread_mutex_destroy(&m.lock);
}

/* ------------------------------------------------------------------------ */
/* Handoff                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * One-way handoff latency: the waiter thread blocks; once it is known to be
 * blocked, the main thread takes the time and releases (or signals); the
 * waiter takes the time as soon as it returns. Each repetition averages
 * `rounds` handoffs. Only the handoff itself is inside the timed span.
 */
struct handoff {
  cq_pool *pool;
  cq_req req;
  long rounds;
  _Atomic int64_t t_release; /* when the main thread released */
  _Atomic long ready;        /* rounds the main thread has set up */
  _Atomic long done;         /* rounds the waiter has finished */
  int64_t total_ns;          /* sum of (returned - released) */
  int failed;
  /* baseline */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int waiting, flag;
};

static void *handoff_waiter(void *arg) {
  struct handoff *h = arg;
  cqb_pin_to(1);
  cq_grant g;
  cq_grant_init(&g);
  for (long i = 0; i < h->rounds; i++) {
    while (atomic_load(&h->ready) <= i) /* the main thread holds the unit */
      sched_yield();
    if (cq_grant_acquire(h->pool, &g, &h->req, CQ_NEVER) != 0)
      h->failed = 1;
    h->total_ns += cqb_now_ns() - atomic_load(&h->t_release);
    if (cq_grant_release(h->pool, &g) != 0)
      h->failed = 1;
    atomic_store(&h->done, i + 1);
  }
  return NULL;
}

static double rep_handoff(void *arg) {
  struct handoff *h = arg;
  h->total_ns = 0;
  h->failed = 0;
  atomic_store(&h->ready, 0);
  atomic_store(&h->done, 0);
  must(cq_pool_create(&h->pool, NULL), "pool");
  must(cq_budget_add(h->pool, "b", 1), "budget");
  must(cq_req_init(&h->req, h->pool), "req");
  must(cq_req_add(&h->req, "b", 1), "req add");
  cq_grant mine;
  cq_grant_init(&mine);
  pthread_t t;
  pthread_create(&t, NULL, handoff_waiter, h);
  for (long i = 0; i < h->rounds; i++) {
    while (atomic_load(&h->done) < i) /* the waiter let go of round i-1 */
      sched_yield();
    must(cq_grant_try(h->pool, &mine, &h->req), "take");
    atomic_store(&h->ready, i + 1);
    cq_pool_stats st;
    do { /* until the waiter is blocked on the unit we hold */
      must(cq_pool_stats_get(h->pool, &st), "stats");
      if (st.waiting == 0)
        sched_yield();
    } while (st.waiting == 0);
    atomic_store(&h->t_release, cqb_now_ns());
    must(cq_grant_release(h->pool, &mine), "release");
  }
  pthread_join(t, NULL);
  cq_pool_stats st;
  must(cq_pool_stats_get(h->pool, &st), "stats");
  must(cq_pool_destroy(h->pool), "destroy");
  /* Every round woke the waiter exactly once. */
  if (h->failed || st.wakeups != (uint64_t)h->rounds)
    return -1;
  return (double)h->total_ns / (double)h->rounds;
}

static void *cond_waiter(void *arg) {
  struct handoff *h = arg;
  cqb_pin_to(1);
  for (long i = 0; i < h->rounds; i++) {
    pthread_mutex_lock(&h->lock);
    h->waiting = 1;
    while (!h->flag)
      pthread_cond_wait(&h->cond, &h->lock);
    h->flag = 0;
    h->waiting = 0;
    pthread_mutex_unlock(&h->lock);
    h->total_ns += cqb_now_ns() - atomic_load(&h->t_release);
  }
  return NULL;
}

static double rep_cond_handoff(void *arg) {
  struct handoff *h = arg;
  h->total_ns = 0;
  pthread_mutex_init(&h->lock, NULL);
  pthread_cond_init(&h->cond, NULL);
  h->waiting = h->flag = 0;
  pthread_t t;
  pthread_create(&t, NULL, cond_waiter, h);
  for (long i = 0; i < h->rounds; i++) {
    for (;;) { /* until the waiter is blocked (and the last round is done) */
      pthread_mutex_lock(&h->lock);
      int ready = h->waiting && !h->flag;
      pthread_mutex_unlock(&h->lock);
      if (ready)
        break;
      sched_yield();
    }
    atomic_store(&h->t_release, cqb_now_ns());
    pthread_mutex_lock(&h->lock);
    h->flag = 1;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
  }
  pthread_join(t, NULL);
  pthread_mutex_destroy(&h->lock);
  pthread_cond_destroy(&h->cond);
  return (double)h->total_ns / (double)h->rounds;
}

static void bench_handoff(void) {
  struct handoff h;
  memset(&h, 0, sizeof(h));
  h.rounds = cqb_opts.size == CQB_QUICK  ? 500
             : cqb_opts.size == CQB_FULL ? 20000
                                         : 3000;
  /* In turns, so that both see the same machine; thread placement makes
   * single repetitions noisy, so take three times as many. */
  double vb[64], vs[64];
  int reps = cqb_opts.reps * 3 > 64 ? 64 : cqb_opts.reps * 3;
  cqb_pin_to(0);
  for (int rep = 0; rep < reps; rep++) {
    vb[rep] = rep_cond_handoff(&h);
    vs[rep] = rep_handoff(&h);
    if (vb[rep] < 0 || vs[rep] < 0)
      cqb_fail("handoff: the benchmark's own check failed");
  }
  cqb_unpin();
  struct cqb_stat base = cqb_summarise(vb, reps);
  struct cqb_stat s = cqb_summarise(vs, reps);
  cqb_figure("handoff", "release -> blocked waiter returns (one way)", "ns", s,
             "mutex+condvar signal -> waiter returns", &base, 1.5);
  cqb_progress_tick("handoff");
}

/* ------------------------------------------------------------------------ */
/* With N requests parked                                                    */
/* ------------------------------------------------------------------------ */

struct parked {
  cq_pool *pool;
  cq_req rx, ry;
  cq_grant *grants;  /* N + 1 */
  cq_grant *current; /* holder of x */
  long n;
  long ops;
};

static void parked_cb(cq_grant *g, int status) {
  if (status == 0)
    ((struct parked *)g->data)->current = g;
}

static void parked_setup(struct parked *pk, long n) {
  pk->n = n;
  must(cq_pool_create(&pk->pool, NULL), "pool");
  must(cq_budget_add(pk->pool, "x", 1), "budget x");
  must(cq_budget_add(pk->pool, "y", 1), "budget y");
  must(cq_req_init(&pk->rx, pk->pool), "req");
  must(cq_req_add(&pk->rx, "x", 1), "req add");
  must(cq_req_init(&pk->ry, pk->pool), "req");
  must(cq_req_add(&pk->ry, "y", 1), "req add");
  pk->grants = calloc((size_t)n + 1, sizeof(cq_grant));
  if (pk->grants == NULL)
    cqb_fail("out of memory for %ld grants", n);
  for (long i = 0; i <= n; i++)
    pk->grants[i].data = pk;
  must(cq_grant_try(pk->pool, &pk->grants[0], &pk->rx), "first holder");
  pk->current = &pk->grants[0];
  for (long i = 1; i <= n; i++)
    must(
        cq_grant_submit(pk->pool, &pk->grants[i], &pk->rx, CQ_NEVER, parked_cb),
        "park");
}

static void parked_teardown(struct parked *pk) {
  must(cq_pool_close(pk->pool), "close");
  must(cq_grant_release(pk->pool, pk->current), "release");
  must(cq_pool_destroy(pk->pool), "destroy");
  free(pk->grants);
}

/* The holder of x releases (granting the oldest parked request) and parks
 * again at the back: the queue stays N long. */
static double rep_parked_same(void *arg) {
  struct parked *pk = arg;
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < pk->ops; i++) {
    cq_grant *prev = pk->current;
    if (cq_grant_release(pk->pool, prev) != 0 || pk->current == prev)
      return -1;
    if (cq_grant_submit(pk->pool, prev, &pk->rx, CQ_NEVER, parked_cb) != 0)
      return -1;
  }
  int64_t t1 = cqb_now_ns();
  cq_pool_stats st;
  if (cq_pool_stats_get(pk->pool, &st) != 0 || st.waiting != (uint64_t)pk->n)
    return -1;
  return (double)(t1 - t0) / (double)pk->ops;
}

/* With N parked on x, try + release of a request for y. */
static double rep_parked_other(void *arg) {
  struct parked *pk = arg;
  cq_grant g;
  cq_grant_init(&g);
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < pk->ops; i++) {
    if (cq_grant_try(pk->pool, &g, &pk->ry) != 0 ||
        cq_grant_release(pk->pool, &g) != 0)
      return -1;
  }
  int64_t t1 = cqb_now_ns();
  return (double)(t1 - t0) / (double)pk->ops;
}

static const long parked_sizes_default[] = {10, 100, 1000, 10000, 100000};
static const long parked_sizes_quick[] = {10, 100, 1000, 10000};

/*
 * All sizes are set up at once and measured in turn within each repetition,
 * so that a machine that speeds up or slows down during the run affects
 * every size alike and the ratios to N = 10 stay meaningful.
 */
static void bench_parked(void) {
  const long *sizes =
      cqb_opts.size == CQB_QUICK ? parked_sizes_quick : parked_sizes_default;
  int n_sizes = cqb_opts.size == CQB_QUICK ? 4 : 5;
  long ops = cqb_opts.size == CQB_QUICK  ? 20000
             : cqb_opts.size == CQB_FULL ? 500000
                                         : 100000;
  struct parked pk[5];
  double same[5][64], other[5][64];
  for (int k = 0; k < n_sizes; k++) {
    memset(&pk[k], 0, sizeof(pk[k]));
    parked_setup(&pk[k], sizes[k]);
    pk[k].ops = ops;
  }
  int reps = cqb_opts.reps;
  for (int rep = 0; rep < reps; rep++) {
    for (int k = 0; k < n_sizes; k++) {
      same[k][rep] = rep_parked_same(&pk[k]);
      other[k][rep] = rep_parked_other(&pk[k]);
      if (same[k][rep] < 0 || other[k][rep] < 0)
        cqb_fail("parked waiters: the benchmark's own check failed");
    }
  }
  struct cqb_stat same10 = cqb_summarise(same[0], reps);
  struct cqb_stat other10 = cqb_summarise(other[0], reps);
  for (int k = 0; k < n_sizes; k++) {
    char fig[96];
    snprintf(fig, sizeof(fig), "release + re-park, N=%ld parked, same budget",
             sizes[k]);
    cqb_figure("parked", fig, "ns/op", cqb_summarise(same[k], reps),
               "same at N=10", &same10, 2.0);
    snprintf(fig, sizeof(fig), "try + release, N=%ld parked on another",
             sizes[k]);
    cqb_figure("parked", fig, "ns/op", cqb_summarise(other[k], reps),
               "same at N=10", &other10, 2.0);
    parked_teardown(&pk[k]);
    cqb_progress_tick("parked waiters");
  }
}

int cqb_micro_core_plan(void) {
  return 3 + 1 + (cqb_opts.size == CQB_QUICK ? 4 : 5);
}

void cqb_micro_core(void) {
  bench_uncontended();
  bench_handoff();
  bench_parked();
}
