/*
 * The bench harness: timing, repetitions, the results table and its CSV and
 * JSON forms, the machine description, the progress bar and the options
 * every bench program takes. cronoq-bench (main.c) and the simulator's
 * command, cronoq-sim (tools/sim), report through it.
 *
 * Every figure is the median of several repetitions, with their min and max.
 * A figure may name a baseline measured in the same run; its ratio is
 * median / baseline median, and a goal is a bound on that ratio.
 */
#ifndef CRONOQ_BENCH_HARNESS_H
#define CRONOQ_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cqb_size { CQB_QUICK, CQB_DEFAULT, CQB_FULL };

struct cqb_opts {
  enum cqb_size size;
  int reps;            /* repetitions per figure */
  const char *csv;     /* path, or NULL */
  const char *json;    /* path, or NULL */
  int progress;        /* draw the progress bar */
  const char *program; /* the command's name, for its messages */
  const char *title;   /* what the header says it runs: "bench" */
};

extern struct cqb_opts cqb_opts;

/*
 * A bench program's command line: one of `commands` (NULL-terminated; the
 * first is the default), the options every bench program takes (--quick,
 * --full, --reps N, --csv FILE, --json FILE, --no-progress) and those
 * `more` parses (it returns how many arguments argv[i] and its value use,
 * or 0 if argv[i] is not one of its options). -h or --help prints `usage`
 * and exits 0; anything else is reported with the usage, exit 2; so is a
 * bad value. Returns the command.
 */
const char *cqb_parse_args(int argc, char **argv, const char *const *commands,
                           int (*more)(int argc, char **argv, int i),
                           void (*usage)(FILE *f));
void cqb_options_usage(FILE *f); /* the common options' usage lines */

/* An option's number in [lo, hi], or exit (2) with a message. */
double cqb_number_arg(const char *opt, const char *text, double lo, double hi);

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

/* One of the measurements that cqb_measure_turns() runs by turns. */
struct cqb_turn {
  const char *what;
  cqb_rep_fn fn;
  void *arg;
  struct cqb_stat stat; /* the result */
};

/* Run n measurements (n <= 8) cqb_opts.reps times each, one repetition of
 * each in turn, and summarise each into its `stat`: a machine whose speed
 * drifts during the run then slows them all alike, and the ratios between
 * them hold. Exits on a failed check. */
void cqb_measure_turns(struct cqb_turn *turns, int n);

/* Record a figure. `base` and `goal_max_ratio` may be NULL / 0. */
void cqb_figure(const char *group, const char *name, const char *unit,
                struct cqb_stat s, const char *base_name,
                const struct cqb_stat *base, double goal_max_ratio);

/* A figure that is a rate: its goal is a floor on the ratio. */
void cqb_figure_min(const char *group, const char *name, const char *unit,
                    struct cqb_stat s, const char *base_name,
                    const struct cqb_stat *base, double goal_min_ratio);

/* A figure whose values are already ratios against `base_name` (one per
 * seed, say): median, min and max of them, the ratio column showing the
 * median. `goal`: a ceiling on it, a floor when negative, none when 0. */
void cqb_ratio(const char *group, const char *name, struct cqb_stat ratios,
               const char *base_name, double goal);

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

/*
 * Host schedulers are multi-threaded. glibc drops the atomic instructions
 * from mutexes while a process has never had a second thread, which would
 * make every mutex baseline (and every library call) unrealistically
 * cheap; so a bench program starts one before it measures anything.
 */
void cqb_become_multithreaded(void);

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
/* The goals met and missed, and what a missed goal means; last. */
void cqb_print_summary(void);
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
int cqb_micro_deep_plan(void);
void cqb_micro_deep(void);

#endif /* CRONOQ_BENCH_HARNESS_H */
