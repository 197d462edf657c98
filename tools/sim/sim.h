/*
 * The workload simulator (tools/sim): jobs, workloads (synthetic or from
 * the production trace), the pools they run on, the policies compared, and
 * the figures measured. sim.c runs a workload through a policy on a virtual
 * clock; workload.c builds workloads; policies.c holds the reference
 * schedulers that libcronoq is compared with.
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
  SIM_CLASSES = 4
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
 * Returns 0, or -1 if the file cannot be opened or read (reported too).
 */
int wl_read_trace(struct workload *w, const char *path, FILE *errors);

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
};

/* Options of a run. */
struct sim_opts {
  int policy;
  unsigned static_workers; /* K for SIM_STATIC */
  FILE *timeline;          /* if set: "time_s used_gpu used_cpu used_mem"
                              per change, for the charts */
  double *wait_samples[SIM_CLASSES]; /* if set: each job's wait, seconds,
                                        sorted, wait[c].jobs of them */
  int64_t *start_ms; /* if set: each job's start time (w->n), -1 when it
                        was rejected */
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

#endif /* CRONOQ_SIM_SIM_H */
