/*
 * The bench harness: timing, repetitions, the results table and its CSV and
 * JSON forms, the machine description and the progress bar.
 *
 * Every figure is the median of several repetitions, with their min and max.
 * A figure may name a baseline measured in the same run; its ratio is
 * median / baseline median, and a goal is a bound on that ratio.
 */
#ifndef CRONOQ_BENCH_HARNESS_H
#define CRONOQ_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

enum cqb_size { CQB_QUICK, CQB_DEFAULT, CQB_FULL };

struct cqb_opts {
  enum cqb_size size;
  int reps;         /* repetitions per figure */
  const char *csv;  /* path, or NULL */
  const char *json; /* path, or NULL */
  int progress;     /* draw the progress bar */
};

extern struct cqb_opts cqb_opts;

/* Nanoseconds on the monotonic clock. */
int64_t cqb_now_ns(void);

/* One repetition: runs the measured work and returns its figure (e.g. ns per
 * operation). Returns a negative value when the work failed its own check. */
typedef double (*cqb_rep_fn)(void *arg);

struct cqb_stat {
  double med, min, max;
};

/* Median, min and max of n values (n <= 64). */
struct cqb_stat cqb_summarise(const double *values, int n);

/* Run `fn` cqb_opts.reps times and summarise. Exits on a failed check. */
struct cqb_stat cqb_measure(const char *what, cqb_rep_fn fn, void *arg);

/* Record a figure. `base` and `goal_max_ratio` may be NULL / 0. */
void cqb_figure(const char *group, const char *name, const char *unit,
                struct cqb_stat s, const char *base_name,
                const struct cqb_stat *base, double goal_max_ratio);

/* A figure that is a rate: its goal is a floor on the ratio. */
void cqb_figure_min(const char *group, const char *name, const char *unit,
                    struct cqb_stat s, const char *base_name,
                    const struct cqb_stat *base, double goal_min_ratio);

/* A single value (e.g. a deterministic simulation figure), written to the
 * CSV and JSON but left out of the table: its suite prints its own. */
void cqb_value(const char *group, const char *name, const char *unit,
               double value);

/* A note printed under the table. */
void cqb_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Abort the run: a benchmark's own check failed. */
void cqb_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* Pin the calling thread to one CPU (modulo the CPUs there are), or let it
 * run anywhere again. Cross-thread figures pin their two threads to two
 * CPUs, so that every wake-up crosses CPUs the same way on both sides of a
 * comparison: unpinned, the scheduler sometimes puts both on one CPU, and
 * a wake-up then costs a third of a cross-CPU one. */
void cqb_pin_to(int cpu);
void cqb_unpin(void);

/* Progress: announce the number of steps, then tick once per step. */
void cqb_progress_plan(int steps);
void cqb_progress_tick(const char *label);

/* Print the header (machine, build), the tables and the notes; write the
 * CSV and JSON. */
void cqb_print_header(void);
void cqb_print_figures(void); /* the figures added since the last call */
void cqb_print_notes(void);
void cqb_write_outputs(void);

/* Suites. Each adds its figures; `plan` returns its number of steps. */
int cqb_micro_core_plan(void);
void cqb_micro_core(void);
int cqb_micro_devices_plan(void);
void cqb_micro_devices(void);
int cqb_micro_uv_plan(void);
void cqb_micro_uv(void);
int cqb_micro_contended_plan(void);
void cqb_micro_contended(void);
int cqb_micro_backfill_plan(void);
void cqb_micro_backfill(void);

/* The simulator suite (sim_cli.c) and its options. */
struct cqb_sim_opts {
  const char *pool;  /* "machine", "rack" or NULL for both */
  const char *trace; /* trace CSV, or NULL for the synthetic workload */
  double load;       /* offered GPU load; 0: the default (see sim_cli.c) */
  unsigned replay;   /* times the trace is repeated; 0: once */
  size_t jobs;       /* synthetic jobs per pool; 0: by run size */
  uint64_t seed;
  unsigned workers;          /* static split's K; 0: 4 */
  unsigned vcpus;            /* the pools' vCPUs instead of their own; 0: own */
  const char *plot_dir;      /* write charts there, or NULL */
  double limit_lo, limit_hi; /* jobs' hold limits: run time times f, f
                                uniform in [lo, hi] */
  double no_limit;           /* share of jobs that declare none */
};

extern struct cqb_sim_opts cqb_sim_opts;

int cqb_sim_plan(void);
void cqb_sim(void);
/* The backfill sweep: loads and hold-limit variants, backfill against
 * libcronoq without it, strict FIFO and greedy. */
int cqb_backfill_plan(void);
void cqb_backfill(void);

#endif /* CRONOQ_BENCH_HARNESS_H */
