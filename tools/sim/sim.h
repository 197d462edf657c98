/*
 * The workload simulator (tools/sim): jobs, workloads (synthetic or from
 * the production trace), the pools they run on, the policies compared, and
 * the figures measured. sim.c runs a workload through a policy on a virtual
 * clock; workload.c builds workloads; policies.c holds the reference
 * schedulers that libcronoq is compared with; explain.c prints the events
 * around a job's wait. The command around them is sim_cli.c (the sim and
 * backfill suites) and main.c (cronoq-sim).
 */
#ifndef CRONOQ_SIM_SIM_H
#define CRONOQ_SIM_SIM_H

#include <cronoq/cronoq.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Job classes, for the per-class figures. */
enum sim_class {
  SIM_CPU_ONLY = 0,   /* no GPU */
  SIM_FRACTIONAL = 1, /* a fraction of one GPU (< 1) */
  SIM_WHOLE = 2,      /* one whole GPU */
  SIM_MULTI = 3,      /* 2 or more whole GPUs */
  SIM_CLASSES = 4,
  /* Not a class of its own: CPU-only and fractional jobs together, for the
   * figures (and the event log) of small jobs. */
  SIM_SMALL = SIM_CLASSES
};

/* What a job asks for its GPUs. */
enum sim_gpu { SIM_GPU_NONE = 0, SIM_GPU_FRACTION = 1, SIM_GPU_WHOLE = 2 };

/* One job: arrival and run time in milliseconds of virtual time. */
struct sim_job {
  int64_t arrival_ms;
  int64_t duration_ms;
  int64_t cpu_milli;  /* CPU, in thousandths of a vCPU */
  int64_t memory_mib; /* memory */
  uint8_t gpu;        /* enum sim_gpu */
  uint8_t cls;        /* enum sim_class */
  int64_t gpu_amount; /* thousandths of a GPU (fraction) or whole GPUs */
  int64_t limit_ms;   /* declared hold limit (backfill); 0: none */
};

/* A workload: jobs in arrival order, and what reading it skipped. */
struct workload {
  struct sim_job *jobs;
  size_t n;
  size_t cap;
  size_t never_ran; /* trace pods that never ran (no scheduled time) */
  size_t malformed; /* trace rows that could not be read */
  /* The trace's window: its earliest deletion time (ms; 0 without rows, and
   * for synthetic workloads). See wl_censor(). */
  int64_t window_start_ms;
};

/* A pool shape: what the simulated machine or rack has. */
struct pool_shape {
  const char *name; /* "machine" or "rack" */
  uint32_t gpus;
  int64_t cpu_milli;
  int64_t memory_mib;
};

extern const struct pool_shape SIM_MACHINE; /* 8 GPUs, 96 vCPUs, 768 GiB */
extern const struct pool_shape SIM_RACK;    /* 64 GPUs, 768 vCPUs, 6 TiB */

/* ------------------------------------------------------------------------ */
/* Workloads (workload.c)                                                    */
/* ------------------------------------------------------------------------ */

void wl_free(struct workload *w);

/* Append a job; returns 0 or -1 (out of memory). */
int wl_push(struct workload *w, const struct sim_job *job);

/*
 * The built-in synthetic workload, modelled on the production trace
 * (shared/traces/README.md): job classes, fractional GPU sizes and run
 * times as profiled there; CPU and memory per job class, from the same
 * file (workload.c says why and gives the figures). Arrivals are left at 0;
 * see wl_poisson_arrivals(). Deterministic for a seed. Replaces what `w`
 * held (zeroed, or a workload); on -1 it is left empty.
 */
int wl_synthetic(struct workload *w, size_t n, uint64_t seed);

/*
 * Read the trace CSV (the openb pod list columns: name, cpu_milli,
 * memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
 * deletion_time, scheduled_time). Each pod that ran becomes a job arriving
 * at its creation time and running for deletion - scheduled; pods that
 * never ran are skipped and counted (w->never_ran). Malformed rows are
 * reported on `errors` with their line number and counted (w->malformed).
 * w->window_start_ms is the earliest deletion time of the rows read (pods
 * that never ran included: they were deleted in the window too). All the
 * pods are kept; wl_censor() treats those created before the window.
 * Returns 0, or -1 if the file cannot be opened or read (reported too).
 */
int wl_read_trace(struct workload *w, const char *path, FILE *errors);

/*
 * What becomes of a trace's censored pods: those created before the trace
 * window. The trace holds the pods deleted in a window of about 34 days,
 * from its earliest deletion time on; a pod created before that is in it
 * only because it lived long enough to be deleted inside the window, so its
 * run time, not the workload's arrivals, put it there (a length-biased
 * sample). Steady-state queueing studies leave such pods out.
 */
enum wl_censored {
  WL_CENSORED_DROP = 0, /* left out (the default) */
  WL_CENSORED_KEEP = 1, /* kept as they are */
  WL_CENSORED_CAP = 2   /* kept, each run time capped */
};

/*
 * Treat the jobs that arrive before `window_start_ms` (on a trace as read,
 * before any replay or new arrivals: then a job's arrival is its pod's
 * creation time) as `how` says. Dropping them also moves time 0 to the
 * window's start, so that the jobs left arrive as they did within it;
 * capping shortens every run time longer than `cap_ms` to it. Returns the
 * number of jobs that arrived before the window; *capped, when not NULL,
 * is set to how many run times the cap shortened. Jobs keep their order.
 */
size_t wl_censor(struct workload *w, int how, int64_t window_start_ms,
                 int64_t cap_ms, size_t *capped);

/* Repeat the jobs `times` times in all, each copy shifted after the last
 * arrival of the one before. */
int wl_replay(struct workload *w, unsigned times);

/*
 * Replace the arrivals with a Poisson process, keeping the jobs' order, at
 * an offered GPU load `load` on a pool with `gpus` GPUs: the arrival rate is
 * load * gpus / mean(GPU demand * duration). Deterministic for a seed.
 */
void wl_poisson_arrivals(struct workload *w, double load, uint32_t gpus,
                         uint64_t seed);

/*
 * Give every job a hold limit: its run time times f, f uniform in
 * [f_lo, f_hi] (users over-estimate: f >= 1 keeps every limit honest), or
 * no limit with probability `no_limit_share`. Deterministic for a seed.
 */
void wl_hold_limits(struct workload *w, double f_lo, double f_hi,
                    double no_limit_share, uint64_t seed);

/* The class of a job from what it asks (sets job->cls). */
void wl_classify(struct sim_job *job);

/* GPU demand of a job in GPUs (a fraction, or whole GPUs). */
double wl_gpu_demand(const struct sim_job *job);

/* ------------------------------------------------------------------------ */
/* Simulation (sim.c)                                                        */
/* ------------------------------------------------------------------------ */

enum sim_policy {
  SIM_CRONOQ = 0,          /* libcronoq, default claims */
  SIM_CRONOQ_STAGED = 1,   /* libcronoq, staged claims */
  SIM_FIFO = 2,            /* strict global FIFO: the head blocks the rest */
  SIM_GREEDY = 3,          /* greedy first-fit, no reservation */
  SIM_STATIC = 4,          /* static split into K workers, each FIFO */
  SIM_CRONOQ_BACKFILL = 5, /* libcronoq with backfill on the jobs' limits */
  SIM_POLICIES = 6
};

const char *sim_policy_name(int policy);

/* Per-class waiting times, in seconds. */
struct sim_waits {
  size_t jobs;
  double p50_s, p99_s, max_s;
};

/* What one run measured. */
struct sim_result {
  int policy;
  size_t jobs;          /* jobs run */
  size_t rejected;      /* never fit (the pool, or a static worker's share) */
  double makespan_s;    /* time 0 to the last completion */
  double lower_bound_s; /* over the jobs run (see sim_lower_bound()) */
  double util_gpu, util_cpu, util_mem; /* average, over the makespan */
  struct sim_waits wait[SIM_CLASSES];
  size_t passed_over;           /* jobs a later job started before */
  double longest_passed_over_s; /* longest a job waited after that */
  double wall_s;                /* real time the run took */
  double cpu_s;                 /* CPU time it took */
  uint64_t decisions;           /* scheduling calls made (acquires, releases) */
  struct sim_waits small;       /* CPU-only and fractional jobs together */
  uint64_t backfilled;          /* libcronoq: grants made by backfill */
  uint64_t late_heads;          /* libcronoq: heads granted after their shadow
                                   time */
  uint64_t overdue; /* libcronoq: grants that outlived their limit */
  /*
   * The head is the oldest job waiting. A device blocks it when it asks
   * for GPUs and the devices, as the running jobs hold them, cannot take
   * its ask: n whole GPUs need n devices of which nobody holds any part, a
   * fraction needs one device with that much free. What waiters have
   * reserved does not count as held: only the holders' units do. Measured
   * between events, where the state is constant.
   */
  double head_waiting_s;        /* time during which some job waited */
  double head_device_blocked_s; /* of that, time a device blocked the head */
};

/* Options of a run. */
struct sim_opts {
  int policy;
  unsigned static_workers; /* K for SIM_STATIC */
  FILE *timeline;          /* if set: "time_s used_gpu used_cpu used_mem"
                              per change, for the charts */
  double *wait_samples[SIM_CLASSES]; /* if set: each job's wait, seconds,
                                        sorted, wait[c].jobs of them */
  int64_t *start_ms;         /* if set: each job's start time (w->n), -1 when it
                                was rejected */
  struct sim_events *events; /* if set: every event of the run, for
                                sim_explain(); free with sim_events_free() */
};

/* Run `w` on a pool of `shape` under opts->policy. Returns 0, or -1 on a
 * failed check (the simulation verifies its own accounting). */
int sim_run(const struct workload *w, const struct pool_shape *shape,
            const struct sim_opts *opts, struct sim_result *out);

/* The lower bound on the makespan of `w` on `shape`, in seconds, over the
 * jobs that fit the pool: the larger of, over resources, total demand *
 * duration / capacity, and the latest arrival plus duration. (A run's
 * result holds the bound over the jobs it ran.) */
double sim_lower_bound(const struct workload *w,
                       const struct pool_shape *shape);

/* ------------------------------------------------------------------------ */
/* Event logs (explain.c)                                                    */
/* ------------------------------------------------------------------------ */

enum sim_event_kind {
  SIM_EV_ARRIVE = 0,
  SIM_EV_START = 1,
  SIM_EV_END = 2,
  SIM_EV_REJECT = 3
};

/* One event of a run: at t_ms, job `job` (its index in the workload). */
struct sim_event {
  int64_t t_ms;
  size_t job;
  int kind; /* enum sim_event_kind */
};

/* A run's events in the order they happened; sim_run() fills it. */
struct sim_events {
  struct sim_event *ev;
  size_t n;
};

void sim_events_free(struct sim_events *e);

/*
 * Print the events around the longest wait of class `cls` (or SIM_SMALL)
 * in a run of `w` whose events are `e`: the job, who held what and who
 * waited ahead of it as the window opened, every event in the window
 * (younger jobs that started first are marked), and who held what just
 * before it started. The window is its whole wait, or its last
 * `window_ms` when that is shorter (0: the whole wait). At most `limit`
 * rows of each list are printed, the first and the last halves, with a
 * count of those left out. Returns 0, or -1 if no job of the class ran.
 */
int sim_explain(FILE *out, const struct workload *w, const struct sim_events *e,
                int cls, int64_t window_ms, size_t limit);

/* The job that sim_explain() explains (-1 if none ran): the longest wait
 * of class `cls`, the oldest job among equal waits. */
long sim_longest_wait(const struct workload *w, const struct sim_events *e,
                      int cls);

/* A duration as people read it: 42s, 7.5m, 3.2h, 12.0d. */
const char *sim_duration(double seconds, char *buf, size_t len);

/* The names of the classes ("cpu-only", ...; "small" for SIM_SMALL), and
 * the class of a name (-1 if none). */
const char *sim_class_name(int cls);
int sim_class_of(const char *name);

/* The policy of a name (sim_policy_name()), -1 if none. */
int sim_policy_of(const char *name);

#endif /* CRONOQ_SIM_SIM_H */
