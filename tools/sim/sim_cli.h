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

/* Parse the simulator's option at argv[i]: returns how many arguments it
 * uses (1 or 2), or 0 if it is none of them; exits (2) with a message on a
 * bad value. */
int cqb_sim_parse_option(int argc, char **argv, int i);
void cqb_sim_usage(FILE *f); /* their lines of the usage text */

/* The suites; `plan` returns the number of progress steps. */
int cqb_sim_plan(void);
void cqb_sim(void);
/* The backfill sweep: loads and hold-limit variants, backfill against
 * libcronoq without it, strict FIFO and greedy. */
int cqb_backfill_plan(void);
void cqb_backfill(void);

#endif /* CRONOQ_SIM_CLI_H */
