/*
 * cronoq-bench: what libcronoq gains over what its users would use
 * otherwise, measured side by side in one run.
 *
 *   cronoq-bench [micro|sim|backfill|fleet|fleet-failure|all] [options]
 *   (see usage())
 *
 * The sim and backfill suites are the simulator's (tools/sim/sim_cli.c),
 * the same that cronoq-sim runs.
 */
#include "harness.h"
#include "sim_cli.h"
#ifdef CRONOQ_BENCH_FLEET
#include "fleet_bench.h"
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: cronoq-bench [micro|sim|backfill|fleet|fleet-failure|all]"
          " [options]\n"
          "\n"
          "  micro          the micro-benchmarks, each against its baseline\n"
          "  deep           only the deep-queue figures of micro\n"
          "  contended      only the contended figures of micro\n"
          "  core           only the core figures of micro (uncontended,\n"
          "                 handoff, parked waiters)\n"
          "  sim            the workload simulator (tools/sim, also its own\n"
          "                 command cronoq-sim): libcronoq against strict\n"
          "                 FIFO, greedy first-fit and a static split\n"
          "  backfill       the simulator at loads 0.5, 0.8 and 0.95 with\n"
          "                 hold limits of several kinds: backfill against\n"
          "                 libcronoq without it, strict FIFO and greedy\n"
          "  fleet          fleet pools against INCR/DECR counters and a\n"
          "                 sorted-set semaphore, on a redis-server the\n"
          "                 bench starts (not part of all)\n"
          "  fleet-failure  fleet pools' recovery: the time from a holder's\n"
          "                 SIGKILL to a waiter's grant, and the lost-lease\n"
          "                 events of a holder paused past its TTL, over\n"
          "                 many trials (not part of all)\n"
          "     --kills N   kill trials (100; 10 with --quick)\n"
          "     --pauses N  pause trials (100; 10 with --quick)\n"
          "  all            micro, sim and backfill (the default)\n"
          "\n");
  cqb_options_usage(f);
  fprintf(f, "\n");
  cqb_sim_usage(f);
}

/* The simulator's options, and fleet-failure's. */
static int parse_option(int argc, char **argv, int i) {
#ifdef CRONOQ_BENCH_FLEET
  int n = cqb_fleet_failure_parse_option(argc, argv, i);
  if (n > 0)
    return n;
#endif
  return cqb_sim_parse_option(argc, argv, i);
}

int main(int argc, char **argv) {
  static const char *const commands[] = {
      "all",  "micro",     "sim",   "backfill",      "deep",
      "core", "contended", "fleet", "fleet-failure", NULL};
  const char *cmd = cqb_parse_args(argc, argv, commands, parse_option, usage);
  cqb_sim_options_done();

  cqb_become_multithreaded();
  cqb_print_header();
  fflush(stdout);
  bool all = strcmp(cmd, "all") == 0;
  bool micro = all || strcmp(cmd, "micro") == 0;
  bool sim = all || strcmp(cmd, "sim") == 0;
  bool backfill = all || strcmp(cmd, "backfill") == 0;
  bool deep = micro || strcmp(cmd, "deep") == 0;
  bool contended = micro || strcmp(cmd, "contended") == 0;
  bool core = micro || strcmp(cmd, "core") == 0;
  bool fleet = strcmp(cmd, "fleet") == 0;
  bool fleet_failure = strcmp(cmd, "fleet-failure") == 0;
  int steps = 0;
#ifdef CRONOQ_BENCH_FLEET
  if (fleet)
    steps += cqb_fleet_plan();
  if (fleet_failure)
    steps += cqb_fleet_failure_plan();
#else
  if (fleet || fleet_failure) {
    fprintf(stderr, "cronoq-bench: built without the fleet pool (hiredis)\n");
    return 2;
  }
#endif
  if (core)
    steps += cqb_micro_core_plan();
  if (micro) {
    steps += cqb_micro_devices_plan() + cqb_micro_backfill_plan();
#ifdef CRONOQ_BENCH_UV
    steps += cqb_micro_uv_plan();
#endif
  }
  if (deep)
    steps += cqb_micro_deep_plan();
  if (contended)
    steps += cqb_micro_contended_plan();
  if (sim)
    steps += cqb_sim_plan();
  if (backfill)
    steps += cqb_backfill_plan();
  cqb_progress_plan(steps);
  if (core)
    cqb_micro_core();
  if (micro) {
    cqb_micro_devices();
    cqb_micro_backfill();
#ifdef CRONOQ_BENCH_UV
    cqb_micro_uv();
#endif
  }
  if (contended)
    cqb_micro_contended();
  if (deep)
    cqb_micro_deep();
#ifdef CRONOQ_BENCH_FLEET
  if (fleet)
    cqb_fleet();
  if (fleet_failure)
    cqb_fleet_failure();
#endif
  cqb_print_figures();
  if (sim)
    cqb_sim(); /* its own tables, each pool's figures after them */
  if (backfill)
    cqb_backfill();
  cqb_print_notes();
  cqb_write_outputs();
  cqb_print_summary();
  return 0;
}
