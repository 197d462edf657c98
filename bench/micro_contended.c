/*
 * Micro-benchmarks under contention: 2, 4 and 16 threads issuing mixed
 * multi-resource requests (acquire, hold briefly, release) on one pool,
 * against the allocator people write by hand: one mutex, one condition
 * variable, a broadcast on every release, and every waiter re-checking its
 * request when it wakes.
 *
 * The workload. Four budgets of 4 units each. Every request names 1 to 3 of
 * them, 1 to 3 units of each, drawn from a seeded generator per thread, so
 * that both allocators see exactly the same sequence of requests on every
 * thread. A thread acquires (blocking, no deadline), holds for a fixed bit
 * releases, and goes on with its next request at once: as much contention
 * as the threads can make. Requests are built before the clock starts.
 *
 * Two kinds of hold, each a group of figures of its own:
 * - blocking, 20 us: the thread sleeps while it holds, as a task does that
 *   holds a connection or a device while it waits for it to answer. This
 *   is the work admission control exists for: holders are off the CPU, so
 *   waiters pile up whenever the units run out, and how an allocator wakes
 *   them decides the throughput.
 * - busy, of 0.1, 0.5 and 5 us (counter updates, calibrated here): the
 *   thread holds the units only while it runs. On few cores this is the
 *   worst case for a fair allocator: a unit handed to a sleeping waiter
 *   stays unused until the scheduler runs it, while the hand-rolled
 *   allocator lets whichever thread runs take it (and makes the waiter try
 *   again later). libcronoq's barging window lets running threads take it
 *   too, during the first 10 ms of each wait. bench/README.md discusses
 *   the figures.
 * The two allocators run in turns within each repetition, so that a machine
 * that speeds up or slows down moves both alike.
 *
 * What is reported, per thread count:
 * - grants per second (all threads' grants over the wall time from the
 *   first thread through the start gate to the last one done), against
 *   the hand-rolled allocator;
 * - wake-ups per waited grant. A grant that did not have to wait involves
 *   no wake-up in either allocator, so dividing by every grant would mostly
 *   measure how often requests wait; dividing by the grants that waited
 *   measures what a wait costs. For the hand-rolled allocator a wake-up is
 *   a return from pthread_cond_wait and a waited grant an acquire that
 *   called it at least once. For libcronoq both come from cq_pool_stats:
 *   `wakeups` counts the threads it woke (to end a wait, or to try again
 *   in the barging window) and `waited_grants` the grants to requests that
 *   had to wait. The goal is at most 2.
 * - every acquire's time to its grant: the p99 and the longest of all
 *   repetitions, whose goal is the barging window plus 5 ms.
 * - in the notes, what both allocators look like from the kernel's side:
 *   voluntary context switches per grant (every time a thread went to
 *   sleep, on the condition variable, the semaphore or a contended mutex),
 *   counted the same way for both, so the wake-up figures do not rest on
 *   the library's own counters alone.
 *
 * Every repetition checks itself: no budget is ever over its capacity while
 * held (each holder adds what it holds to a shared tally and checks it),
 * every acquire and release succeeded, all units are back at the end, and
 * each budget's grant count is the one the request sequences imply.
 */
#include "harness.h"

#include <cronoq/cronoq.h>

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#define N_BUDGETS 4
#define CAPACITY 4
/* A request's shape is its amount of each budget, 0..3, as the base-4
 * digits of a code: budget b's amount is (code >> 2b) & 3. */
#define N_CODES 256

static const int thread_counts[] = {2, 4, 16};
#define N_COUNTS 3

static void must(int rc, const char *what) {
  if (rc != 0)
    cqb_fail("%s: %s", what, cq_err_name(rc));
}

static int amount_of(unsigned code, int b) {
  return (int)((code >> (2 * b)) & 3u);
}

/* The blocking hold. */
#define HOLD_SLEEP_NS 20000

struct hold_kind {
  const char *group;     /* of its figures */
  long sleep_ns;         /* the blocking hold; 0: a busy one */
  long busy_ns;          /* the busy hold: this long of counter updates */
  long grants[3];        /* per run: quick, default, full */
  double goal[N_COUNTS]; /* the floor on grants/s against hand-rolled */
};

static const struct hold_kind hold_kinds[] = {
    {"contended, blocking hold",
     HOLD_SLEEP_NS,
     0,
     {3000, 10000, 100000},
     {0.95, 1.0, 1.0}},
    {"contended, busy hold 0.1 us",
     0,
     100,
     {24000, 60000, 1000000},
     {1.0, 1.0, 1.0}},
    {"contended, busy hold 0.5 us",
     0,
     500,
     {24000, 60000, 1000000},
     {1.0, 1.0, 1.0}},
    {"contended, busy hold 5 us",
     0,
     5000,
     {6000, 20000, 200000},
     {1.0, 1.0, 1.0}},
};
#define N_HOLDS (sizeof(hold_kinds) / sizeof(hold_kinds[0]))

static const struct hold_kind *hold; /* the kind being measured */

/* Total grants per run, shared among the threads: the same amount of work
 * at every thread count, so that each count takes about as long. */
static long grants_per_run(void) {
  return hold->grants[cqb_opts.size == CQB_QUICK  ? 0
                      : cqb_opts.size == CQB_FULL ? 2
                                                  : 1];
}

/* ------------------------------------------------------------------------ */
/* The workload                                                              */
/* ------------------------------------------------------------------------ */

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* One request: 1 to 3 distinct budgets (each count equally likely), 1 to 3
 * units of each. */
static uint8_t draw_code(uint64_t *x) {
  int k = 1 + (int)(xorshift(x) % 3);
  int order[N_BUDGETS] = {0, 1, 2, 3};
  unsigned code = 0;
  for (int i = 0; i < k; i++) { /* a partial Fisher-Yates shuffle */
    int j = i + (int)(xorshift(x) % (uint64_t)(N_BUDGETS - i));
    int b = order[j];
    order[j] = order[i];
    order[i] = b;
    code |= (unsigned)(1 + xorshift(x) % 3) << (2 * b);
  }
  return (uint8_t)code;
}

static void spin(long n) {
  volatile unsigned sink = 0;
  for (long i = 0; i < n; i++)
    sink = sink + 1;
}

static long hold_spins; /* the busy hold, in counter updates */

static void hold_work(void) {
  if (hold->sleep_ns > 0) {
    struct timespec ts = {0, hold->sleep_ns};
    nanosleep(&ts, NULL);
    return;
  }
  spin(hold_spins);
}

/* The cost of one hold: the fastest of a few batches, so that a preemption
 * does not count. */
static double hold_ns(void) {
  double best = 1e300;
  for (int k = 0; k < 5; k++) {
    int64_t t0 = cqb_now_ns();
    for (int i = 0; i < 2000; i++)
      hold_work();
    double ns = (double)(cqb_now_ns() - t0) / 2000.0;
    if (ns < best)
      best = ns;
  }
  return best;
}

/* Find the counter updates that make a busy hold last busy_ns here: start
 * from a guess and correct it by what it measured, a few times. */
static void calibrate_hold(void) {
  if (hold->sleep_ns > 0)
    return;
  hold_spins = hold->busy_ns;
  for (int k = 0; k < 4; k++) {
    double ns = hold_ns();
    if (ns > 0)
      hold_spins = (long)((double)hold_spins * (double)hold->busy_ns / ns) + 1;
  }
}

/* The hand-rolled allocator. */
struct hand {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int64_t free[N_BUDGETS];
};

static int hand_fits(const struct hand *h, unsigned code) {
  for (int b = 0; b < N_BUDGETS; b++)
    if (amount_of(code, b) > h->free[b])
      return 0;
  return 1;
}

/* Per-budget tally of the units held right now, kept by the holders
 * themselves: the check that an allocator never hands out more than the
 * capacity. One cache line each, so the tally adds no false sharing. */
struct tally {
  alignas(64) _Atomic int64_t held;
};

struct run;

struct worker {
  alignas(64) struct run *run;
  const uint8_t *codes;
  long ops;
  pthread_t thread;
  /* Counted by the thread itself; read after the join. */
  long wakeups;        /* hand-rolled: returns from pthread_cond_wait */
  long waited;         /* hand-rolled: acquires that waited at all */
  long futile;         /* hand-rolled: wake-ups that found no fit */
  long context_sw;     /* voluntary context switches while running */
  int64_t *waits;      /* ns each acquire took, ops of them */
  int64_t t_start;     /* when it left the start gate */
  int64_t t_end;       /* when it finished its requests */
  const char *failure; /* NULL, or what failed */
};

struct run {
  int use_cq; /* libcronoq, else the hand-rolled allocator */
  int threads;
  pthread_barrier_t gate;
  cq_pool *pool;
  cq_req *reqs; /* N_CODES, built for the codes in use */
  struct hand hand;
  struct tally tally[N_BUDGETS];
  struct worker *workers;
};

/* Count what `code` holds into the tally; report an over-grant. */
static int tally_take(struct run *r, unsigned code) {
  int ok = 1;
  for (int b = 0; b < N_BUDGETS; b++) {
    int64_t a = amount_of(code, b);
    if (a != 0 &&
        atomic_fetch_add_explicit(&r->tally[b].held, a, memory_order_relaxed) +
                a >
            CAPACITY)
      ok = 0;
  }
  return ok;
}

static void tally_give(struct run *r, unsigned code) {
  for (int b = 0; b < N_BUDGETS; b++) {
    int64_t a = amount_of(code, b);
    if (a != 0)
      atomic_fetch_sub_explicit(&r->tally[b].held, a, memory_order_relaxed);
  }
}

static long voluntary_switches(void) {
#ifdef RUSAGE_THREAD
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0)
    return ru.ru_nvcsw;
#endif
  return 0;
}

static void run_cq(struct worker *w) {
  struct run *r = w->run;
  cq_grant g;
  cq_grant_init(&g);
  for (long i = 0; i < w->ops; i++) {
    unsigned code = w->codes[i];
    int64_t t0 = cqb_now_ns();
    if (cq_grant_acquire(r->pool, &g, &r->reqs[code], CQ_NEVER) != 0) {
      w->failure = "cq_grant_acquire";
      return;
    }
    w->waits[i] = cqb_now_ns() - t0;
    int ok = tally_take(r, code);
    hold_work();
    tally_give(r, code);
    /* Release before giving up, so the other threads can finish. */
    if (cq_grant_release(r->pool, &g) != 0) {
      w->failure = "cq_grant_release";
      return;
    }
    if (!ok) {
      w->failure = "a budget was over its capacity";
      return;
    }
  }
}

/* Lock, wait until the request fits (re-checking after every wake-up),
 * take; lock, give back, wake everyone. What people write by hand. */
static void run_hand(struct worker *w) {
  struct run *r = w->run;
  struct hand *h = &r->hand;
  for (long i = 0; i < w->ops; i++) {
    unsigned code = w->codes[i];
    int64_t t0 = cqb_now_ns();
    pthread_mutex_lock(&h->lock);
    if (!hand_fits(h, code)) {
      w->waited++;
      do {
        pthread_cond_wait(&h->cond, &h->lock);
        w->wakeups++;
        if (!hand_fits(h, code))
          w->futile++;
        else
          break;
      } while (1);
    }
    for (int b = 0; b < N_BUDGETS; b++)
      h->free[b] -= amount_of(code, b);
    pthread_mutex_unlock(&h->lock);
    w->waits[i] = cqb_now_ns() - t0;

    int ok = tally_take(r, code);
    hold_work();
    tally_give(r, code);

    pthread_mutex_lock(&h->lock);
    for (int b = 0; b < N_BUDGETS; b++)
      h->free[b] += amount_of(code, b);
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    if (!ok) {
      w->failure = "a budget was over its capacity";
      return;
    }
  }
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct run *r = w->run;
  /* Sleep as long as asked: the default slack of 50 us would make the
   * blocking hold three times as long as it says. */
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  pthread_barrier_wait(&r->gate);
  long cs0 = voluntary_switches();
  w->t_start = cqb_now_ns();
  if (r->use_cq)
    run_cq(w);
  else
    run_hand(w);
  w->t_end = cqb_now_ns();
  w->context_sw = voluntary_switches() - cs0;
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* One repetition                                                            */
/* ------------------------------------------------------------------------ */

/* The request sequences of one thread count, and what they imply. */
struct plan {
  int threads;
  long ops;       /* per thread */
  uint8_t *codes; /* threads x ops */
  int used[N_CODES];
  uint64_t budget_grants[N_BUDGETS];
};

static void plan_make(struct plan *p, int threads) {
  memset(p, 0, sizeof(*p));
  p->threads = threads;
  p->ops = grants_per_run() / threads;
  p->codes = malloc((size_t)threads * (size_t)p->ops);
  if (p->codes == NULL)
    cqb_fail("out of memory");
  for (int t = 0; t < threads; t++) {
    /* A seed per thread (not per thread count), so thread t issues the
     * same requests at every count. */
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
    for (long i = 0; i < p->ops; i++) {
      uint8_t c = draw_code(&x);
      p->codes[(size_t)t * (size_t)p->ops + (size_t)i] = c;
      p->used[c] = 1;
      for (int b = 0; b < N_BUDGETS; b++)
        p->budget_grants[b] += amount_of(c, b) != 0;
    }
  }
}

/* What one repetition of one allocator measured. */
struct result {
  double grants_per_s;
  double wakeups_per_waited; /* per grant that waited */
  double waited_share;       /* grants that waited / all grants */
  double futile_per_waited;  /* hand-rolled: wake-ups that found no fit */
  double switches_per_grant; /* voluntary context switches */
  double wait_p99_us;        /* of every acquire's time to its grant */
  double wait_max_ms;
};

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static const char budget_names[N_BUDGETS][4] = {"c0", "c1", "c2", "c3"};

static struct result run_once(const struct plan *p, int use_cq) {
  struct run r;
  memset(&r, 0, sizeof(r));
  r.use_cq = use_cq;
  r.threads = p->threads;
  long total = (long)p->threads * p->ops;
  if (use_cq) {
    must(cq_pool_create(&r.pool, NULL), "pool");
    for (int b = 0; b < N_BUDGETS; b++)
      must(cq_budget_add(r.pool, budget_names[b], CAPACITY), "budget");
    r.reqs = calloc(N_CODES, sizeof(cq_req));
    if (r.reqs == NULL)
      cqb_fail("out of memory");
    for (unsigned c = 0; c < N_CODES; c++) {
      if (!p->used[c])
        continue;
      must(cq_req_init(&r.reqs[c], r.pool), "req");
      for (int b = 0; b < N_BUDGETS; b++)
        if (amount_of(c, b) != 0)
          must(cq_req_add(&r.reqs[c], budget_names[b], amount_of(c, b)),
               "req add");
    }
  } else {
    pthread_mutex_init(&r.hand.lock, NULL);
    pthread_cond_init(&r.hand.cond, NULL);
    for (int b = 0; b < N_BUDGETS; b++)
      r.hand.free[b] = CAPACITY;
  }
  r.workers = calloc((size_t)p->threads, sizeof(struct worker));
  if (r.workers == NULL ||
      pthread_barrier_init(&r.gate, NULL, (unsigned)p->threads + 1) != 0)
    cqb_fail("out of memory");
  for (int t = 0; t < p->threads; t++) {
    struct worker *w = &r.workers[t];
    w->run = &r;
    w->codes = p->codes + (size_t)t * (size_t)p->ops;
    w->ops = p->ops;
    w->waits = calloc((size_t)p->ops + 1, sizeof(int64_t));
    if (w->waits == NULL)
      cqb_fail("out of memory");
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
      cqb_fail("cannot start thread %d of %d", t + 1, p->threads);
  }
  /* Only the work is timed, from the first thread through the gate to the
   * last one done: on few cores this thread may well not run again until
   * the workers have finished, so its own clock would miss the span. */
  pthread_barrier_wait(&r.gate);
  for (int t = 0; t < p->threads; t++)
    pthread_join(r.workers[t].thread, NULL);
  int64_t t0 = INT64_MAX, t1 = 0;
  for (int t = 0; t < p->threads; t++) {
    if (r.workers[t].t_start < t0)
      t0 = r.workers[t].t_start;
    if (r.workers[t].t_end > t1)
      t1 = r.workers[t].t_end;
  }

  const char *who = use_cq ? "libcronoq" : "hand-rolled";
  long wakeups = 0, waited = 0, futile = 0, switches = 0;
  for (int t = 0; t < p->threads; t++) {
    const struct worker *w = &r.workers[t];
    if (w->failure != NULL)
      cqb_fail("contended, %d threads, %s: %s", p->threads, who, w->failure);
    wakeups += w->wakeups;
    waited += w->waited;
    futile += w->futile;
    switches += w->context_sw;
  }
  for (int b = 0; b < N_BUDGETS; b++)
    if (atomic_load(&r.tally[b].held) != 0)
      cqb_fail("contended, %s: the tally of %s did not return to 0", who,
               budget_names[b]);

  if (use_cq) {
    cq_pool_stats ps;
    must(cq_pool_stats_get(r.pool, &ps), "stats");
    if (ps.waiting != 0)
      cqb_fail("contended, %s: %llu requests still waiting", who,
               (unsigned long long)ps.waiting);
    if (ps.waited_grants > (uint64_t)total)
      cqb_fail("contended, %s: %llu waited grants of %ld", who,
               (unsigned long long)ps.waited_grants, total);
    for (int b = 0; b < N_BUDGETS; b++) {
      cq_resource_stats rs;
      must(cq_resource_stats_get(r.pool, budget_names[b], &rs), "stats");
      if (rs.in_use != 0 || rs.grants != p->budget_grants[b])
        cqb_fail("contended, %s: %s has %lld in use and %llu grants "
                 "(expected 0 and %llu)",
                 who, budget_names[b], (long long)rs.in_use,
                 (unsigned long long)rs.grants,
                 (unsigned long long)p->budget_grants[b]);
    }
    wakeups = (long)ps.wakeups;
    waited = (long)ps.waited_grants;
    must(cq_pool_destroy(r.pool), "destroy");
    free(r.reqs);
  } else {
    for (int b = 0; b < N_BUDGETS; b++)
      if (r.hand.free[b] != CAPACITY)
        cqb_fail("contended, %s: %s has %lld free of %d", who, budget_names[b],
                 (long long)r.hand.free[b], CAPACITY);
    pthread_mutex_destroy(&r.hand.lock);
    pthread_cond_destroy(&r.hand.cond);
  }
  pthread_barrier_destroy(&r.gate);
  int64_t *all = malloc((size_t)total * sizeof(int64_t));
  if (all == NULL)
    cqb_fail("out of memory");
  for (int t = 0; t < p->threads; t++) {
    memcpy(all + (size_t)t * (size_t)p->ops, r.workers[t].waits,
           (size_t)p->ops * sizeof(int64_t));
    free(r.workers[t].waits);
  }
  qsort(all, (size_t)total, sizeof(int64_t), cmp_i64);
  double p99 = (double)all[(size_t)((double)(total - 1) * 0.99)] / 1e3;
  double longest = (double)all[total - 1] / 1e6;
  free(all);
  free(r.workers);

  struct result res;
  res.grants_per_s = (double)total * 1e9 / (double)(t1 - t0);
  /* Nothing waited, nothing woken: 0, which no goal counts against. */
  res.wakeups_per_waited = waited > 0 ? (double)wakeups / (double)waited : 0;
  res.waited_share = (double)waited / (double)total;
  res.futile_per_waited = waited > 0 ? (double)futile / (double)waited : 0;
  res.switches_per_grant = (double)switches / (double)total;
  res.wait_p99_us = p99;
  res.wait_max_ms = longest;
  return res;
}

/* ------------------------------------------------------------------------ */
/* The suite                                                                 */
/* ------------------------------------------------------------------------ */

static void bench_threads(int threads, double goal) {
  struct plan p;
  plan_make(&p, threads);
  int reps = cqb_opts.reps > 64 ? 64 : cqb_opts.reps;
  double cq_rate[64], hand_rate[64], cq_wake[64], hand_wake[64];
  double cq_p99[64], cq_max[64], hand_p99[64], hand_max[64];
  double cq_waited = 0, hand_waited = 0, hand_futile = 0;
  double cq_switch = 0, hand_switch = 0;
  int cq_exact = 0, cq_reps_waited = 0; /* one wake-up per waited grant */
  for (int rep = 0; rep < reps; rep++) {
    struct result h = run_once(&p, 0);
    struct result c = run_once(&p, 1);
    hand_rate[rep] = h.grants_per_s;
    hand_wake[rep] = h.wakeups_per_waited;
    cq_rate[rep] = c.grants_per_s;
    cq_wake[rep] = c.wakeups_per_waited;
    cq_p99[rep] = c.wait_p99_us;
    cq_max[rep] = c.wait_max_ms;
    hand_p99[rep] = h.wait_p99_us;
    hand_max[rep] = h.wait_max_ms;
    cq_reps_waited += c.waited_share > 0;
    cq_exact += c.waited_share > 0 && c.wakeups_per_waited == 1.0;
    cq_waited += c.waited_share / reps;
    hand_waited += h.waited_share / reps;
    hand_futile += h.futile_per_waited / reps;
    cq_switch += c.switches_per_grant / reps;
    hand_switch += h.switches_per_grant / reps;
  }
  free(p.codes);

  struct cqb_stat base = cqb_summarise(hand_rate, reps);
  char fig[96], base_name[64];
  snprintf(fig, sizeof(fig), "grants/s, %d threads", threads);
  snprintf(base_name, sizeof(base_name), "hand-rolled, %d threads", threads);
  cqb_figure_min(hold->group, fig, "grants/s", cqb_summarise(cq_rate, reps),
                 base_name, &base, goal);
  /* These goals are absolute (wake-ups per waited grant, the longest wait),
   * so their baseline is a constant of 1: the ratio is then the figure
   * itself and the harness checks the goal like any other. */
  struct cqb_stat one = {1.0, 1.0, 1.0};
  snprintf(fig, sizeof(fig), "wake-ups per waited grant, %d threads", threads);
  cqb_figure(hold->group, fig, "wakeups/grant", cqb_summarise(cq_wake, reps),
             "1", &one, 2.0);
  /* The longest wait of all repetitions: the barging window plus 5 ms. */
  struct cqb_stat longest = cqb_summarise(cq_max, reps);
  longest.med = longest.max;
  snprintf(fig, sizeof(fig), "longest wait (of all reps), %d threads", threads);
  cqb_figure(hold->group, fig, "ms", longest, "1 ms", &one,
             (double)CQ_BARGE_DEFAULT_MS + 5.0);
  snprintf(fig, sizeof(fig), "p99 wait, %d threads", threads);
  cqb_figure(hold->group, fig, "us", cqb_summarise(cq_p99, reps), NULL, NULL,
             0);
  struct cqb_stat hand_longest = cqb_summarise(hand_max, reps);
  hand_longest.med = hand_longest.max;
  snprintf(fig, sizeof(fig), "baseline: hand-rolled longest wait, %d threads",
           threads);
  cqb_figure(hold->group, fig, "ms", hand_longest, NULL, NULL, 0);
  snprintf(fig, sizeof(fig), "baseline: hand-rolled p99 wait, %d threads",
           threads);
  cqb_figure(hold->group, fig, "us", cqb_summarise(hand_p99, reps), NULL, NULL,
             0);
  snprintf(fig, sizeof(fig), "baseline: hand-rolled grants/s, %d threads",
           threads);
  cqb_figure(hold->group, fig, "grants/s", base, NULL, NULL, 0);
  snprintf(fig, sizeof(fig), "baseline: hand-rolled wake-ups, %d threads",
           threads);
  cqb_figure(hold->group, fig, "wakeups/grant", cqb_summarise(hand_wake, reps),
             NULL, NULL, 0);
  cqb_note("%s, %d threads: %.0f%% of grants waited (hand-rolled %.0f%%); "
           "libcronoq woke exactly once per waited grant in %d of %d reps "
           "that waited",
           hold->group, threads, cq_waited * 100, hand_waited * 100, cq_exact,
           cq_reps_waited);
#ifdef RUSAGE_THREAD
  cqb_note("%s, %d threads: voluntary context switches per grant: "
           "libcronoq %.2f, hand-rolled %.2f; hand-rolled wake-ups that found "
           "no fit: %.2f per waited grant",
           hold->group, threads, cq_switch, hand_switch, hand_futile);
#else
  (void)cq_switch;
  (void)hand_switch;
  cqb_note("%s, %d threads: hand-rolled wake-ups that found no fit: "
           "%.2f per waited grant",
           hold->group, threads, hand_futile);
#endif
}

int cqb_micro_contended_plan(void) { return (int)(N_HOLDS * N_COUNTS); }

void cqb_micro_contended(void) {
  for (size_t k = 0; k < N_HOLDS; k++) {
    hold = &hold_kinds[k];
    calibrate_hold();
    if (hold->sleep_ns > 0)
      cqb_note("%s: 4 budgets of %d units; requests of 1-3 budgets x 1-3 "
               "units; %ld grants per run; hold: sleep %ld us; libcronoq's "
               "barging window: the default, %d ms",
               hold->group, CAPACITY, grants_per_run(), hold->sleep_ns / 1000,
               CQ_BARGE_DEFAULT_MS);
    else
      cqb_note("%s: as above, %ld grants per run; hold: %.0f ns of busy work",
               hold->group, grants_per_run(), hold_ns());
    for (int i = 0; i < N_COUNTS; i++) {
      bench_threads(thread_counts[i], hold->goal[i]);
      cqb_progress_tick(hold->group);
    }
  }
}
