/*
 * The simulator's suites, as cronoq-sim and cronoq-bench run them: `sim`
 * (every policy on each pool) and `backfill` (the backfill sweep), their
 * options and their usage text. They report through the bench harness
 * (bench/harness.h). See sim_cli.c.
 */
#ifndef CRONOQ_SIM_CLI_H
#define CRONOQ_SIM_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CQB_SEEDS_MAX 64

struct cqb_sim_opts {
  const char *pool;     /* "machine", "rack" or NULL for both */
  const char *trace;    /* trace CSV, or NULL for the synthetic workload */
  double load;          /* offered GPU load; 0: the default (see sim_cli.c) */
  unsigned replay;      /* times the trace is repeated; 0: once */
  size_t jobs;          /* synthetic jobs per pool; 0: by run size */
  uint64_t seed;        /* the first seed */
  unsigned seeds;       /* seeds run, from `seed` on; 0: one */
  unsigned workers;     /* static split's K; 0: 4 */
  unsigned vcpus;       /* the pools' vCPUs instead of their own; 0: own */
  const char *plot_dir; /* write charts there, or NULL */
  double limit_lo, limit_hi; /* jobs' hold limits: run time times f, f
                                uniform in [lo, hi] */
  double no_limit;           /* share of jobs that declare none */
  int censored;              /* enum wl_censored, for a trace */
  int64_t censored_cap_ms;   /* WL_CENSORED_CAP: the cap */
  int64_t window_start_ms;   /* the trace window's start; -1: the trace's
                                earliest deletion time */
  int explain_class;         /* the event log's class; -1: no log */
  int explain_policy;        /* the policy it follows; -1: the suite's */
  int64_t explain_window_ms; /* its window; 0: the whole wait */
};

extern struct cqb_sim_opts cqb_sim_opts;

/* Parse the simulator's option at argv[i]: returns how many arguments it
 * uses (1 or 2), or 0 if it is none of them; exits (2) with a message on a
 * bad value. cqb_sim_options_done() checks them together (exits likewise). */
int cqb_sim_parse_option(int argc, char **argv, int i);
void cqb_sim_options_done(void);
void cqb_sim_usage(FILE *f); /* their lines of the usage text */

/* The suites; `plan` returns the number of progress steps. */
int cqb_sim_plan(void);
void cqb_sim(void);
/* The backfill sweep: loads and hold-limit variants, backfill against
 * libcronoq without it, strict FIFO and greedy. */
int cqb_backfill_plan(void);
void cqb_backfill(void);

#endif /* CRONOQ_SIM_CLI_H */
