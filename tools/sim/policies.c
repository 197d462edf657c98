/*
 * The policies the simulator compares. libcronoq is the library itself:
 * each job is submitted when it arrives and its callback starts it. The
 * others are reference schedulers of the kind the library replaces, kept
 * small so that each can be checked by hand (tests/test_sim.c does):
 *
 * - strict FIFO: one queue; only its head may start, so a job that does
 *   not fit blocks everything behind it;
 * - greedy first-fit: whenever something ends, every waiting job that fits
 *   starts, oldest first; nothing is held back for anyone, so a large job
 *   waits until enough happens to be free at once;
 * - libcronoq with backfill: the library with CQ_POOL_BACKFILL, every
 *   request declaring its job's hold limit;
 * - static split: K workers, each with 1/K of every budget and of the GPUs
 *   in a pool of its own, and a FIFO queue of its own; jobs go to the
 *   workers in turn (round robin), and a job larger than one worker's share
 *   is rejected.
 *
 * The reference schedulers only ever try (cq_grant_try) on pools where no
 * one waits, so the library does their book-keeping and GPU placement and
 * none of their deciding: all policies place fractions on devices by the
 * same best-fit rule, and differ only in who may start when.
 */
#include "policies.h"

#include <stdlib.h>
#include <string.h>

#define STATIC_WORKERS_MAX 64

struct pstate {
  cq_pool *pools[STATIC_WORKERS_MAX];
  unsigned npools;
  /* static split: each worker's FIFO queue */
  struct sjob *qhead[STATIC_WORKERS_MAX], *qtail[STATIC_WORKERS_MAX];
  unsigned rr;
  bool limits; /* requests declare the jobs' hold limits */
  bool broken; /* a call failed that cannot: the run is void */
};

static struct pstate *state_of(struct sim *s) { return s->state; }

static int64_t sim_clock(void *arg) { return ((struct sim *)arg)->now_ms; }

/* A pool of `shape` divided by `parts`, on the run's clock. */
static int open_pool(struct sim *s, unsigned flags, unsigned parts,
                     cq_pool **out) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = flags | CQ_POOL_MANUAL_TIMERS;
  cfg.clock = sim_clock;
  cfg.clock_arg = s;
  if (cq_pool_create(out, &cfg) != 0)
    return -1;
  /* Resource order matters to staged claims: GPUs first. */
  uint32_t gpus = s->shape->gpus / parts;
  if ((gpus > 0 && cq_devices_add(*out, "gpu", gpus, NULL) != 0) ||
      cq_budget_add(*out, "cpu", s->shape->cpu_milli / parts) != 0 ||
      cq_budget_add(*out, "memory", s->shape->memory_mib / parts) != 0) {
    cq_pool_destroy(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

/* Write the job's request for `pool` into j->req, with its hold limit if
 * `limits`. Returns 0, or a library error (the job cannot be asked for at
 * all there). */
static int build_req(cq_pool *pool, struct sjob *j, bool limits) {
  const struct sim_job *job = j->job;
  int rc = cq_req_init(&j->req, pool);
  if (rc == 0 && limits)
    rc = cq_req_set_hold_limit(&j->req, job->limit_ms);
  if (rc == 0 && job->gpu == SIM_GPU_FRACTION)
    rc = cq_req_add_fraction(&j->req, "gpu", job->gpu_amount);
  else if (rc == 0 && job->gpu == SIM_GPU_WHOLE)
    rc = cq_req_add_devices(&j->req, "gpu", job->gpu_amount);
  if (rc == 0 && job->cpu_milli > 0)
    rc = cq_req_add(&j->req, "cpu", job->cpu_milli);
  if (rc == 0 && job->memory_mib > 0)
    rc = cq_req_add(&j->req, "memory", job->memory_mib);
  return rc;
}

static int close_pools(struct sim *s) {
  struct pstate *ps = state_of(s);
  int rc = ps->broken ? -1 : 0;
  for (unsigned i = 0; i < ps->npools; i++) {
    cq_pool_stats st;
    if (cq_pool_stats_get(ps->pools[i], &st) != 0 || st.waiting != 0)
      rc = -1;
    s->backfilled += st.backfilled;
    s->late_heads += st.late_heads;
    s->overdue += st.overdue;
    if (cq_pool_destroy(ps->pools[i]) != 0)
      rc = -1;
  }
  free(ps);
  s->state = NULL;
  return rc;
}

static int alloc_state(struct sim *s) {
  s->state = calloc(1, sizeof(struct pstate));
  return s->state == NULL ? -1 : 0;
}

/* Try to start `j` on `pool`: 1 if it started, 0 if it must wait, -1 if it
 * was rejected (can never fit there). */
static int try_start(struct sim *s, cq_pool *pool, struct sjob *j) {
  s->decisions++;
  int rc = cq_grant_try(pool, &j->grant, &j->req);
  if (rc == 0) {
    sim_started(s, j);
    return 1;
  }
  if (rc == CQ_EBUSY)
    return 0;
  if (rc != CQ_ENEVER)
    state_of(s)->broken = true;
  sim_rejected(s, j);
  return -1;
}

static void release(struct sim *s, cq_pool *pool, struct sjob *j) {
  s->decisions++;
  if (cq_grant_release(pool, &j->grant) != 0)
    state_of(s)->broken = true;
}

/* ------------------------------------------------------------------------ */
/* libcronoq                                                                 */
/* ------------------------------------------------------------------------ */

static void on_grant(cq_grant *grant, int status) {
  struct sjob *j = grant->data;
  if (status == 0)
    sim_started(j->sim, j);
  else
    state_of(j->sim)->broken = true; /* nothing times out or shrinks */
}

static int cronoq_open_flags(struct sim *s, unsigned flags) {
  if (alloc_state(s) != 0)
    return -1;
  struct pstate *ps = state_of(s);
  if (open_pool(s, flags, 1, &ps->pools[0]) != 0) {
    free(ps);
    s->state = NULL;
    return -1;
  }
  ps->npools = 1;
  return 0;
}

static int cronoq_open(struct sim *s) { return cronoq_open_flags(s, 0); }

static int staged_open(struct sim *s) {
  return cronoq_open_flags(s, CQ_POOL_STAGED_CLAIMS);
}

static int backfill_open(struct sim *s) {
  if (cronoq_open_flags(s, CQ_POOL_BACKFILL) != 0)
    return -1;
  state_of(s)->limits = true;
  return 0;
}

static void cronoq_arrive(struct sim *s, struct sjob *j) {
  cq_pool *pool = state_of(s)->pools[0];
  if (build_req(pool, j, state_of(s)->limits) != 0) {
    sim_rejected(s, j);
    return;
  }
  cq_grant_init(&j->grant);
  j->grant.data = j;
  s->decisions++;
  int rc = cq_grant_submit(pool, &j->grant, &j->req, CQ_NEVER, on_grant);
  if (rc == CQ_ENEVER)
    sim_rejected(s, j);
  else if (rc != 0)
    state_of(s)->broken = true;
}

static void cronoq_finish(struct sim *s, struct sjob *j) {
  release(s, state_of(s)->pools[0], j);
}

/* ------------------------------------------------------------------------ */
/* Strict FIFO and greedy first-fit                                          */
/* ------------------------------------------------------------------------ */

static int single_open(struct sim *s) { return cronoq_open_flags(s, 0); }

/* Start jobs from the head of the run's waiting list while they fit. */
static void fifo_drain(struct sim *s) {
  cq_pool *pool = state_of(s)->pools[0];
  while (s->waiting_head != NULL && try_start(s, pool, s->waiting_head) != 0)
    ;
}

static void fifo_arrive(struct sim *s, struct sjob *j) {
  if (build_req(state_of(s)->pools[0], j, false) != 0) {
    sim_rejected(s, j);
    return;
  }
  /* Behind a waiting head it cannot start, and nothing has freed up. */
  if (s->waiting_head == j)
    fifo_drain(s);
}

static void fifo_finish(struct sim *s, struct sjob *j) {
  release(s, state_of(s)->pools[0], j);
  fifo_drain(s);
}

/* Whether the job could fit in what is free in total: a cheap filter
 * before asking the library, which also knows how the GPUs are split. */
static bool may_fit(const struct sim *s, const struct sjob *j) {
  return j->gpu_milli <= (int64_t)s->shape->gpus * 1000 - s->used_gpu_milli &&
         j->job->cpu_milli <= s->shape->cpu_milli - s->used_cpu_milli &&
         j->job->memory_mib <= s->shape->memory_mib - s->used_mem_mib;
}

static void greedy_arrive(struct sim *s, struct sjob *j) {
  cq_pool *pool = state_of(s)->pools[0];
  if (build_req(pool, j, state_of(s)->limits) != 0) {
    sim_rejected(s, j);
    return;
  }
  try_start(s, pool, j);
}

static void greedy_finish(struct sim *s, struct sjob *j) {
  cq_pool *pool = state_of(s)->pools[0];
  release(s, pool, j);
  struct sjob *next;
  for (struct sjob *w = s->waiting_head; w != NULL; w = next) {
    next = w->next;
    if (may_fit(s, w))
      try_start(s, pool, w);
  }
}

/* ------------------------------------------------------------------------ */
/* Static split                                                              */
/* ------------------------------------------------------------------------ */

static int static_open(struct sim *s) {
  unsigned k = s->opts->static_workers;
  if (k == 0 || k > STATIC_WORKERS_MAX || s->shape->gpus % k != 0)
    return -1;
  if (alloc_state(s) != 0)
    return -1;
  struct pstate *ps = state_of(s);
  for (unsigned i = 0; i < k; i++) {
    if (open_pool(s, 0, k, &ps->pools[i]) != 0) {
      close_pools(s);
      return -1;
    }
    ps->npools++;
  }
  return 0;
}

/* Start jobs from the head of worker `w`'s queue while they fit. */
static void static_drain(struct sim *s, unsigned w) {
  struct pstate *ps = state_of(s);
  while (ps->qhead[w] != NULL) {
    struct sjob *j = ps->qhead[w];
    if (try_start(s, ps->pools[w], j) == 0)
      return;
    ps->qhead[w] = j->qnext;
    if (ps->qhead[w] == NULL)
      ps->qtail[w] = NULL;
  }
}

static void static_arrive(struct sim *s, struct sjob *j) {
  struct pstate *ps = state_of(s);
  unsigned w = ps->rr++ % ps->npools;
  j->worker = w;
  if (build_req(ps->pools[w], j, false) != 0) {
    sim_rejected(s, j);
    return;
  }
  j->qnext = NULL;
  if (ps->qtail[w] != NULL)
    ps->qtail[w]->qnext = j;
  else
    ps->qhead[w] = j;
  ps->qtail[w] = j;
  if (ps->qhead[w] == j)
    static_drain(s, w);
}

static void static_finish(struct sim *s, struct sjob *j) {
  release(s, state_of(s)->pools[j->worker], j);
  static_drain(s, j->worker);
}

/* ------------------------------------------------------------------------ */
/* What blocks the head                                                      */
/* ------------------------------------------------------------------------ */

bool sim_gpus_fit(struct sim *s, const struct sjob *j) {
  const struct pstate *ps = state_of(s);
  unsigned pool_i = ps->npools > 1 ? j->worker : 0;
  uint32_t gpus = s->shape->gpus / (ps->npools > 0 ? ps->npools : 1);
  int64_t need = j->job->gpu_amount;
  int64_t whole_free = 0;
  for (uint32_t d = 0; d < gpus; d++) {
    cq_device_stats ds;
    if (cq_device_stats_get(ps->pools[pool_i], "gpu", d, &ds) != 0) {
      state_of(s)->broken = true;
      return true;
    }
    if (!ds.online)
      continue;
    if (j->job->gpu == SIM_GPU_FRACTION && !ds.whole &&
        CQ_DEVICE_MILLI - ds.used_milli >= need)
      return true;
    if (j->job->gpu == SIM_GPU_WHOLE && ds.used_milli == 0 &&
        ++whole_free >= need)
      return true;
  }
  return false;
}

/* ------------------------------------------------------------------------ */

static const struct sim_policy_ops OPS[SIM_POLICIES] = {
    [SIM_CRONOQ] = {cronoq_open, cronoq_arrive, cronoq_finish, close_pools},
    [SIM_CRONOQ_STAGED] = {staged_open, cronoq_arrive, cronoq_finish,
                           close_pools},
    [SIM_FIFO] = {single_open, fifo_arrive, fifo_finish, close_pools},
    [SIM_GREEDY] = {single_open, greedy_arrive, greedy_finish, close_pools},
    [SIM_STATIC] = {static_open, static_arrive, static_finish, close_pools},
    [SIM_CRONOQ_BACKFILL] = {backfill_open, cronoq_arrive, cronoq_finish,
                             close_pools},
};

const struct sim_policy_ops *sim_policy_ops(int policy) {
  if (policy < 0 || policy >= SIM_POLICIES)
    return NULL;
  return &OPS[policy];
}
