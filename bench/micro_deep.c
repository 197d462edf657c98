/*
 * Deep queues: what a decision costs while N waiters that fit nowhere wait,
 * against the same decision with none waiting, measured in turns within
 * each repetition. The goal: at most 2x the N = 0 cost, up to N = 10^5.
 *
 * Budgets. cpu has capacity 100 and 50 free. The oldest waiter W asks for
 * the only GPU (held) and 10 cpu, which it claims: 10 of the 50 free are
 * withheld for it and 40 are open. N waiters ask 95 cpu each, more than is
 * open, and wait blocked on cpu. A try + release of 1 cpu is granted from
 * the open units, and each release makes the pool ask which of the waiters
 * blocked on cpu now fits (none): walked one by one, that costs N steps.
 *
 * Device pools. Eight devices, each 0.6 held and the rest in 0.001 grants;
 * N waiters ask 0.5 each. The measured decision is the release of one of
 * the 3,200 small grants: every one makes the pool ask which waiter fits
 * (none, 0.4 free at most). Every waiter reserves a device in arrival
 * order, so with N >= 8 no new request may use any device: the small grants
 * are taken back, between timings, with the waiters cancelled and
 * submitted again. A try that finds everything reserved is the other
 * figure.
 */
#include "harness.h"

#include <cronoq/cronoq.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void must(int rc, const char *what) {
  if (rc != 0)
    cqb_fail("%s: %s", what, cq_err_name(rc));
}

static void waiter_cb(cq_grant *g, int status) {
  (void)g;
  (void)status;
}

static const long deep_sizes[] = {0, 100, 10000, 100000};
#define N_SIZES 4

static int n_sizes(void) { return cqb_opts.size == CQB_QUICK ? 3 : N_SIZES; }

struct deep {
  cq_pool *pool;
  cq_req probe; /* the measured request */
  cq_req wait;  /* what each of the N waiters asks */
  cq_grant *waiters;
  long n;
  cq_grant *small; /* device pools: the small grants */
  long n_small;
};

static void submit_waiters(struct deep *d) {
  for (long i = 0; i < d->n; i++)
    must(
        cq_grant_submit(d->pool, &d->waiters[i], &d->wait, CQ_NEVER, waiter_cb),
        "waiter");
}

static void cancel_waiters(struct deep *d) {
  for (long i = 0; i < d->n; i++)
    must(cq_grant_cancel(d->pool, &d->waiters[i]), "cancel");
}

static void alloc_waiters(struct deep *d, long n) {
  d->n = n;
  d->waiters = calloc((size_t)n + 1, sizeof(cq_grant));
  if (d->waiters == NULL)
    cqb_fail("out of memory for %ld waiters", n);
}

static void expect_waiting(struct deep *d, uint64_t n) {
  cq_pool_stats st;
  must(cq_pool_stats_get(d->pool, &st), "stats");
  if (st.waiting != n)
    cqb_fail("deep queues: %llu waiting, expected %llu",
             (unsigned long long)st.waiting, (unsigned long long)n);
}

/* ------------------------------------------------------------------------ */
/* Budgets                                                                   */
/* ------------------------------------------------------------------------ */

struct budget_deep {
  struct deep d;
  cq_grant gpu, half, other_half, head;
  cq_req r_gpu, r_half, r_head, r_big;
};

static void budget_setup(struct budget_deep *b, long n) {
  memset(b, 0, sizeof(*b));
  struct deep *d = &b->d;
  must(cq_pool_create(&d->pool, NULL), "pool");
  must(cq_budget_add(d->pool, "cpu", 100), "cpu");
  must(cq_devices_add(d->pool, "gpu", 1, NULL), "gpu");
  must(cq_req_init(&b->r_gpu, d->pool), "req");
  must(cq_req_add_devices(&b->r_gpu, "gpu", 1), "req gpu");
  must(cq_grant_try(d->pool, &b->gpu, &b->r_gpu), "hold the gpu");
  must(cq_req_init(&b->r_half, d->pool), "req");
  must(cq_req_add(&b->r_half, "cpu", 50), "req half");
  must(cq_grant_try(d->pool, &b->half, &b->r_half), "half");
  must(cq_grant_try(d->pool, &b->other_half, &b->r_half), "other half");
  /* W lacks both, so it claims both, and keeps its cpu claim once half
   * the cpu is back. */
  must(cq_req_init(&b->r_head, d->pool), "req");
  must(cq_req_add_devices(&b->r_head, "gpu", 1), "req head gpu");
  must(cq_req_add(&b->r_head, "cpu", 10), "req head cpu");
  must(cq_grant_submit(d->pool, &b->head, &b->r_head, CQ_NEVER, waiter_cb),
       "head");
  must(cq_grant_release(d->pool, &b->other_half), "other half back");
  must(cq_req_init(&d->wait, d->pool), "req");
  must(cq_req_add(&d->wait, "cpu", 95), "req wait");
  alloc_waiters(d, n);
  submit_waiters(d);
  must(cq_req_init(&d->probe, d->pool), "req");
  must(cq_req_add(&d->probe, "cpu", 1), "req probe");
  must(cq_req_init(&b->r_big, d->pool), "req");
  must(cq_req_add(&b->r_big, "cpu", 95), "req big");
  expect_waiting(d, (uint64_t)n + 1);
}

static void budget_teardown(struct budget_deep *b) {
  struct deep *d = &b->d;
  must(cq_pool_close(d->pool), "close");
  must(cq_grant_release(d->pool, &b->half), "release");
  must(cq_grant_release(d->pool, &b->gpu), "release");
  must(cq_pool_destroy(d->pool), "destroy");
  free(d->waiters);
}

/* Try + release of 1 cpu from the open units; every release asks which
 * waiter now fits. */
static double rep_budget_release(struct budget_deep *b, long ops) {
  cq_grant g;
  cq_grant_init(&g);
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < ops; i++)
    if (cq_grant_try(b->d.pool, &g, &b->d.probe) != 0 ||
        cq_grant_release(b->d.pool, &g) != 0)
      return -1;
  int64_t t1 = cqb_now_ns();
  return (double)(t1 - t0) / (double)ops;
}

/* A try of 95 cpu, refused: only 40 are open. */
static double rep_budget_busy(struct budget_deep *b, long ops) {
  cq_grant g;
  cq_grant_init(&g);
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < ops; i++)
    if (cq_grant_try(b->d.pool, &g, &b->r_big) != CQ_EBUSY)
      return -1;
  int64_t t1 = cqb_now_ns();
  return (double)(t1 - t0) / (double)ops;
}

/* ------------------------------------------------------------------------ */
/* Device pools                                                              */
/* ------------------------------------------------------------------------ */

#define DEVICES 8
#define SMALL_MILLI 1

struct dev_deep {
  struct deep d;
  cq_grant base[DEVICES];
  cq_req r_base, r_small;
};

static void take_small(struct dev_deep *v) {
  struct deep *d = &v->d;
  for (long i = 0; i < d->n_small; i++)
    must(cq_grant_try(d->pool, &d->small[i], &v->r_small), "small");
}

static void dev_setup(struct dev_deep *v, long n) {
  memset(v, 0, sizeof(*v));
  struct deep *d = &v->d;
  must(cq_pool_create(&d->pool, NULL), "pool");
  must(cq_devices_add(d->pool, "gpu", DEVICES, NULL), "gpu");
  must(cq_req_init(&v->r_base, d->pool), "req");
  must(cq_req_add_fraction(&v->r_base, "gpu", 600), "req base");
  for (int i = 0; i < DEVICES; i++)
    must(cq_grant_try(d->pool, &v->base[i], &v->r_base), "base");
  must(cq_req_init(&v->r_small, d->pool), "req");
  must(cq_req_add_fraction(&v->r_small, "gpu", SMALL_MILLI), "req small");
  d->n_small = DEVICES * (CQ_DEVICE_MILLI - 600) / SMALL_MILLI;
  d->small = calloc((size_t)d->n_small, sizeof(cq_grant));
  if (d->small == NULL)
    cqb_fail("out of memory");
  take_small(v);
  must(cq_req_init(&d->wait, d->pool), "req");
  must(cq_req_add_fraction(&d->wait, "gpu", 500), "req wait");
  alloc_waiters(d, n);
  submit_waiters(d);
  must(cq_req_init(&d->probe, d->pool), "req");
  must(cq_req_add_fraction(&d->probe, "gpu", 300), "req probe");
  expect_waiting(d, (uint64_t)n);
}

static void dev_teardown(struct dev_deep *v) {
  struct deep *d = &v->d;
  must(cq_pool_close(d->pool), "close");
  for (long i = 0; i < d->n_small; i++)
    must(cq_grant_release(d->pool, &d->small[i]), "release");
  for (int i = 0; i < DEVICES; i++)
    must(cq_grant_release(d->pool, &v->base[i]), "release");
  must(cq_pool_destroy(d->pool), "destroy");
  free(d->waiters);
  free(d->small);
}

/* Release every small grant (timed), then put the pool back as it was. */
static double rep_dev_release(struct dev_deep *v) {
  struct deep *d = &v->d;
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < d->n_small; i++)
    if (cq_grant_release(d->pool, &d->small[i]) != 0)
      return -1;
  int64_t t1 = cqb_now_ns();
  expect_waiting(d, (uint64_t)d->n);
  cancel_waiters(d);
  take_small(v);
  submit_waiters(d);
  return (double)(t1 - t0) / (double)d->n_small;
}

/* A try of 0.3, refused: nothing is free (and with waiters, everything is
 * reserved). */
static double rep_dev_busy(struct dev_deep *v, long ops) {
  cq_grant g;
  cq_grant_init(&g);
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < ops; i++)
    if (cq_grant_try(v->d.pool, &g, &v->d.probe) != CQ_EBUSY)
      return -1;
  int64_t t1 = cqb_now_ns();
  return (double)(t1 - t0) / (double)ops;
}

/* ------------------------------------------------------------------------ */

static void report(const char *what, double v[N_SIZES][64], int reps) {
  struct cqb_stat zero = cqb_summarise(v[0], reps);
  for (int k = 0; k < n_sizes(); k++) {
    char fig[112];
    snprintf(fig, sizeof(fig), "%s, N=%ld waiting", what, deep_sizes[k]);
    cqb_figure("deep queues", fig, "ns/op", cqb_summarise(v[k], reps),
               k == 0 ? NULL : "same at N=0", k == 0 ? NULL : &zero,
               k == 0 ? 0 : 2.0);
  }
}

void cqb_micro_deep(void) {
  long ops = cqb_opts.size == CQB_QUICK  ? 20000
             : cqb_opts.size == CQB_FULL ? 1000000
                                         : 200000;
  int reps = cqb_opts.reps;
  static double rel[N_SIZES][64], busy[N_SIZES][64];

  /* Budgets, every size set up at once and measured in turns. */
  static struct budget_deep b[N_SIZES];
  for (int k = 0; k < n_sizes(); k++)
    budget_setup(&b[k], deep_sizes[k]);
  for (int rep = 0; rep < reps; rep++) {
    for (int k = 0; k < n_sizes(); k++) {
      rel[k][rep] = rep_budget_release(&b[k], ops);
      busy[k][rep] = rep_budget_busy(&b[k], ops);
      if (rel[k][rep] < 0 || busy[k][rep] < 0)
        cqb_fail("deep queues (budget): the benchmark's own check failed");
    }
    cqb_progress_tick("deep queues, budgets");
  }
  for (int k = 0; k < n_sizes(); k++)
    budget_teardown(&b[k]);
  report("budget: try + release of 1 unit", rel, reps);
  report("budget: a try refused", busy, reps);

  /* Device pools, the same way. */
  static struct dev_deep v[N_SIZES];
  for (int k = 0; k < n_sizes(); k++)
    dev_setup(&v[k], deep_sizes[k]);
  for (int rep = 0; rep < reps; rep++) {
    for (int k = 0; k < n_sizes(); k++) {
      busy[k][rep] = rep_dev_busy(&v[k], ops);
      rel[k][rep] = rep_dev_release(&v[k]);
      if (rel[k][rep] < 0 || busy[k][rep] < 0)
        cqb_fail("deep queues (devices): the benchmark's own check failed");
    }
    cqb_progress_tick("deep queues, devices");
  }
  for (int k = 0; k < n_sizes(); k++)
    dev_teardown(&v[k]);
  report("8 devices: release of 0.001", rel, reps);
  report("8 devices: a try refused", busy, reps);
}

int cqb_micro_deep_plan(void) { return 2 * cqb_opts.reps; }
