/*
 * What backfill costs a decision: acquire + release of a request with a hold
 * limit, with N limited grants held, backfill on against off, for N = 10, 1,000
 * and 100,000.
 *
 * On: a head waits for the whole budget, so every acquire is a backfill
 * decision: the request is not covered (everything free is withheld for the
 * head), its limit ends before the head's shadow time, and it is granted
 * past the head; its release sweeps (the head is looked at again) and the
 * shadow time stays put. Off: the same N holders and the same request on a
 * pool without backfill and without a head, so the request is granted the
 * ordinary way. Both keep the grant in the pool's tree of limits (an
 * insertion and a removal among N), so the ratio is what the shadow time,
 * the head and the backfill checks add. Both pools run on a clock that
 * stands still, so no limit passes during the run. Goal: within 2x at
 * every size.
 */
#include "harness.h"

#include <cronoq/cronoq.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void must(int rc, const char *what) {
  if (rc != 0)
    cqb_fail("backfill cost: %s: %s", what, cq_err_name(rc));
}

static int64_t still_clock(void *arg) {
  (void)arg;
  return 0;
}

static const long sizes[] = {10, 1000, 100000};
#define N_SIZES 3

struct setup {
  cq_pool *pool;
  cq_req hold, op, head_req;
  cq_grant *holders; /* n */
  cq_grant head;
  long n;
  long ops;
  bool on;
};

static void head_cb(cq_grant *g, int status) {
  (void)g;
  if (status != 0 && status != CQ_ECLOSED)
    cqb_fail("backfill cost: the head ended with %s", cq_err_name(status));
}

static void setup_make(struct setup *s, long n, bool on) {
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->on = on;
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_MANUAL_TIMERS | (on ? CQ_POOL_BACKFILL : 0);
  cfg.clock = still_clock;
  must(cq_pool_create(&s->pool, &cfg), "pool");
  /* Room for the holders and one more unit, which the head withholds. */
  must(cq_budget_add(s->pool, "x", n + 1), "budget");
  must(cq_req_init(&s->hold, s->pool), "req");
  must(cq_req_add(&s->hold, "x", 1), "req");
  must(cq_req_set_hold_limit(&s->hold, 1000000000), "limit");
  must(cq_req_init(&s->op, s->pool), "req");
  must(cq_req_add(&s->op, "x", 1), "req");
  must(cq_req_set_hold_limit(&s->op, 1000), "limit");
  s->holders = calloc((size_t)n, sizeof(cq_grant));
  if (s->holders == NULL)
    cqb_fail("out of memory for %ld grants", n);
  for (long i = 0; i < n; i++)
    must(cq_grant_try(s->pool, &s->holders[i], &s->hold), "holder");
  if (on) {
    must(cq_req_init(&s->head_req, s->pool), "req");
    must(cq_req_add(&s->head_req, "x", n + 1), "req");
    cq_grant_init(&s->head);
    must(cq_grant_submit(s->pool, &s->head, &s->head_req, CQ_NEVER, head_cb),
         "head");
  }
}

static void setup_free(struct setup *s) {
  must(cq_pool_close(s->pool), "close");
  for (long i = 0; i < s->n; i++)
    must(cq_grant_release(s->pool, &s->holders[i]), "release");
  must(cq_pool_destroy(s->pool), "destroy");
  free(s->holders);
}

static double rep_ops(void *arg) {
  struct setup *s = arg;
  cq_pool_stats before, after;
  must(cq_pool_stats_get(s->pool, &before), "stats");
  cq_grant g;
  cq_grant_init(&g);
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < s->ops; i++) {
    if (cq_grant_try(s->pool, &g, &s->op) != 0 ||
        cq_grant_release(s->pool, &g) != 0)
      return -1;
  }
  int64_t t1 = cqb_now_ns();
  must(cq_pool_stats_get(s->pool, &after), "stats");
  /* On: every one was a backfill past the waiting head. Off: none. */
  uint64_t want = s->on ? (uint64_t)s->ops : 0;
  if (after.backfilled - before.backfilled != want ||
      after.waiting != (s->on ? 1u : 0u))
    return -1;
  return (double)(t1 - t0) / (double)s->ops;
}

int cqb_micro_backfill_plan(void) { return N_SIZES; }

void cqb_micro_backfill(void) {
  long ops = cqb_opts.size == CQB_QUICK  ? 20000
             : cqb_opts.size == CQB_FULL ? 1000000
                                         : 200000;
  for (int k = 0; k < N_SIZES; k++) {
    struct setup on, off;
    setup_make(&on, sizes[k], true);
    setup_make(&off, sizes[k], false);
    on.ops = off.ops = ops;
    double v_on[64], v_off[64];
    int reps = cqb_opts.reps;
    for (int rep = 0; rep < reps; rep++) {
      /* In turns, so that drift moves both alike. */
      v_off[rep] = rep_ops(&off);
      v_on[rep] = rep_ops(&on);
      if (v_on[rep] < 0 || v_off[rep] < 0)
        cqb_fail("backfill cost: the benchmark's own check failed");
    }
    struct cqb_stat base = cqb_summarise(v_off, reps);
    char fig[96], base_name[64];
    snprintf(fig, sizeof(fig), "acquire + release, %ld limited holders",
             sizes[k]);
    snprintf(base_name, sizeof(base_name), "backfill off, %ld holders",
             sizes[k]);
    cqb_figure("backfill cost", fig, "ns/op", cqb_summarise(v_on, reps),
               base_name, &base, 2.0);
    setup_free(&on);
    setup_free(&off);
    cqb_progress_tick("backfill cost");
  }
}
