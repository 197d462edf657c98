/*
 * What the simulator and its policies share: the state of one run (struct
 * sim), each job's state in it (struct sjob), and the operations every
 * policy provides. Internal to the simulator.
 */
#ifndef CRONOQ_SIM_POLICIES_H
#define CRONOQ_SIM_POLICIES_H

#include "sim.h"

#include <stdbool.h>

enum sjob_state {
  SJOB_PENDING = 0, /* not arrived yet */
  SJOB_WAITING,
  SJOB_RUNNING,
  SJOB_DONE,
  SJOB_REJECTED
};

/* One job in a run. */
struct sjob {
  const struct sim_job *job;
  struct sim *sim;
  size_t index; /* arrival order */
  int state;    /* enum sjob_state */
  int64_t start_ms, end_ms;
  int64_t passed_at;        /* when a younger job first started before it; -1 */
  int64_t gpu_milli;        /* GPU demand, in thousandths */
  struct sjob *prev, *next; /* the run's waiting list, oldest first */
  struct sjob *qnext;       /* a static worker's queue */
  unsigned worker;          /* the static worker it went to */
  cq_req req;
  cq_grant grant;
};

struct sim_policy_ops;

/* One run. */
struct sim {
  const struct workload *w;
  const struct pool_shape *shape;
  const struct sim_opts *opts;
  const struct sim_policy_ops *policy;
  struct sjob *jobs;
  struct sjob **heap; /* running jobs, by end time */
  size_t heap_n;
  int64_t now_ms;
  int64_t used_gpu_milli, used_cpu_milli, used_mem_mib;
  double area_gpu, area_cpu, area_mem; /* use integrated over time */
  struct sjob *waiting_head, *waiting_tail;
  struct sjob *first_unmarked; /* oldest waiting job not yet passed over */
  size_t rejected;
  uint64_t decisions; /* library calls that decide: acquires, releases */
  uint64_t backfilled, late_heads, overdue; /* the pools' counts */
  int64_t head_waiting_ms, head_blocked_ms; /* see struct sim_result */
  struct sim_events *events;                /* opts->events, being filled */
  void *state;                              /* the policy's own */
};

/* A policy. open() sets up its pools; arrive() and finish() are called as
 * jobs arrive and end (the run's books are already updated); close() tears
 * down and returns -1 if its books do not balance. */
struct sim_policy_ops {
  int (*open)(struct sim *s);
  void (*arrive)(struct sim *s, struct sjob *j);
  void (*finish)(struct sim *s, struct sjob *j);
  int (*close)(struct sim *s);
};

const struct sim_policy_ops *sim_policy_ops(int policy);

/* Called by the policies: `j` starts now, or is rejected (it can never
 * run). */
void sim_started(struct sim *s, struct sjob *j);
void sim_rejected(struct sim *s, struct sjob *j);

/* Whether the devices of the pool `j` runs on, as their holders hold them,
 * could take j's GPU ask (see struct sim_result: what blocks the head).
 * Called by the simulator on a waiting job that asks for GPUs. */
bool sim_gpus_fit(struct sim *s, const struct sjob *j);

#endif /* CRONOQ_SIM_POLICIES_H */
