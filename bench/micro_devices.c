/*
 * Micro-benchmarks of device pools: what placement costs as the number of
 * devices grows, against the same figure at 8 devices, measured in turns within
 * each repetition. The goal is logarithmic growth, so each figure's bound is
 * log2(N) / log2(8).
 *
 * The pools are partly filled first (fractions of random sizes), so that
 * the devices have many different amounts free and placement has to search.
 */
#include "harness.h"

#include <cronoq/cronoq.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t sizes[] = {8, 64, 1024};
#define N_SIZES 3

struct devpool {
  cq_pool *pool;
  cq_req frac, whole, mixed;
  cq_grant *fill;
  size_t n_fill;
  long ops;
};

static void must(int rc, const char *what) {
  if (rc != 0)
    cqb_fail("%s: %s", what, cq_err_name(rc));
}

static void devpool_setup(struct devpool *d, uint32_t n, long ops) {
  memset(d, 0, sizeof(*d));
  d->ops = ops;
  must(cq_pool_create(&d->pool, NULL), "pool");
  must(cq_devices_add(d->pool, "gpu", n, NULL), "devices");
  must(cq_budget_add(d->pool, "cpu", 1 << 30), "cpu");
  must(cq_budget_add(d->pool, "memory_mib", 1 << 30), "memory");
  must(cq_req_init(&d->frac, d->pool), "req");
  must(cq_req_add_fraction(&d->frac, "gpu", 250), "frac");
  must(cq_req_init(&d->whole, d->pool), "req");
  must(cq_req_add_devices(&d->whole, "gpu", 1), "whole");
  must(cq_req_init(&d->mixed, d->pool), "req");
  must(cq_req_add_fraction(&d->mixed, "gpu", 250), "mixed gpu");
  must(cq_req_add(&d->mixed, "cpu", 4), "mixed cpu");
  must(cq_req_add(&d->mixed, "memory_mib", 8192), "mixed memory");

  /* Fill about 60% with fractions of 50..950 thousandths, leaving a few
   * devices entirely free for the whole-device figure. */
  d->fill = calloc((size_t)n * 2, sizeof(cq_grant));
  if (d->fill == NULL)
    cqb_fail("out of memory");
  uint64_t x = 0x2545F4914F6CDD1Dull ^ n;
  cq_req r;
  for (uint32_t i = 0; i < n * 2 && d->n_fill < (size_t)n * 2; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    must(cq_req_init(&r, d->pool), "req");
    must(cq_req_add_fraction(&r, "gpu", 50 + (int64_t)(x % 901)), "fill");
    if (cq_grant_try(d->pool, &d->fill[d->n_fill], &r) == 0)
      d->n_fill++;
    cq_resource_stats st;
    must(cq_resource_stats_get(d->pool, "gpu", &st), "stats");
    if (st.in_use >= (int64_t)n * 600)
      break;
  }
}

static void devpool_teardown(struct devpool *d) {
  for (size_t i = 0; i < d->n_fill; i++)
    must(cq_grant_release(d->pool, &d->fill[i]), "release fill");
  must(cq_pool_destroy(d->pool), "destroy");
  free(d->fill);
}

static double rep_try_release(struct devpool *d, const cq_req *req) {
  cq_grant g;
  cq_grant_init(&g);
  cq_resource_stats before, after;
  must(cq_resource_stats_get(d->pool, "gpu", &before), "stats");
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < d->ops; i++) {
    if (cq_grant_try(d->pool, &g, req) != 0 ||
        cq_grant_release(d->pool, &g) != 0)
      return -1;
  }
  int64_t t1 = cqb_now_ns();
  must(cq_resource_stats_get(d->pool, "gpu", &after), "stats");
  if (after.in_use != before.in_use)
    return -1;
  return (double)(t1 - t0) / (double)d->ops;
}

void cqb_micro_devices(void) {
  long ops = cqb_opts.size == CQB_QUICK  ? 20000
             : cqb_opts.size == CQB_FULL ? 1000000
                                         : 200000;
  int reps = cqb_opts.reps;
  struct devpool dp[N_SIZES];
  double frac[N_SIZES][64], whole[N_SIZES][64], mixed[N_SIZES][64];
  for (int k = 0; k < N_SIZES; k++)
    devpool_setup(&dp[k], sizes[k], ops);
  for (int rep = 0; rep < reps; rep++) {
    for (int k = 0; k < N_SIZES; k++) {
      frac[k][rep] = rep_try_release(&dp[k], &dp[k].frac);
      whole[k][rep] = rep_try_release(&dp[k], &dp[k].whole);
      mixed[k][rep] = rep_try_release(&dp[k], &dp[k].mixed);
      if (frac[k][rep] < 0 || whole[k][rep] < 0 || mixed[k][rep] < 0)
        cqb_fail("device placement: the benchmark's own check failed");
    }
    cqb_progress_tick("device placement");
  }
  struct cqb_stat f8 = cqb_summarise(frac[0], reps);
  struct cqb_stat w8 = cqb_summarise(whole[0], reps);
  struct cqb_stat m8 = cqb_summarise(mixed[0], reps);
  for (int k = 0; k < N_SIZES; k++) {
    double goal = log2((double)sizes[k]) / log2(8.0);
    char fig[96];
    snprintf(fig, sizeof(fig), "place 0.25 GPU: try + release, %u devices",
             sizes[k]);
    cqb_figure("devices", fig, "ns/op", cqb_summarise(frac[k], reps),
               "same at 8 devices", &f8, goal);
    snprintf(fig, sizeof(fig), "place 1 whole GPU: try + release, %u devices",
             sizes[k]);
    cqb_figure("devices", fig, "ns/op", cqb_summarise(whole[k], reps),
               "same at 8 devices", &w8, goal);
    snprintf(fig, sizeof(fig), "{gpu:0.25, cpu, memory}: %u devices", sizes[k]);
    cqb_figure("devices", fig, "ns/op", cqb_summarise(mixed[k], reps),
               "same at 8 devices", &m8, goal);
    devpool_teardown(&dp[k]);
  }
  cqb_note("devices: pools filled to about 60%% with fractions of random "
           "sizes; goal log2(N)/log2(8): 2.00x at 64, 3.33x at 1024");
}

int cqb_micro_devices_plan(void) { return cqb_opts.reps; }
