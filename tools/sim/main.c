/*
 * cronoq-sim: the workload simulator's own command. It runs the suites of
 * sim_cli.c, as `cronoq-bench sim` and `cronoq-bench backfill` do, and
 * reports through the bench harness.
 *
 *   cronoq-sim [sim|backfill|all] [options]   (see usage() below)
 */
#include "harness.h"
#include "sim_cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f, "usage: cronoq-sim [sim|backfill|all] [options]\n"
             "\n"
             "  sim            a cluster workload on a virtual clock through\n"
             "                 libcronoq, strict FIFO, greedy first-fit and a\n"
             "                 static split (the default)\n"
             "  backfill       loads 0.5, 0.8 and 0.95 with hold limits of\n"
             "                 several kinds: backfill against libcronoq\n"
             "                 without it, strict FIFO and greedy\n"
             "  all            both\n"
             "\n");
  cqb_options_usage(f);
  fprintf(f, "\n");
  cqb_sim_usage(f);
}

int main(int argc, char **argv) {
  static const char *const commands[] = {"sim", "backfill", "all", NULL};
  cqb_opts.program = "cronoq-sim";
  cqb_opts.title = "simulator";
  const char *cmd =
      cqb_parse_args(argc, argv, commands, cqb_sim_parse_option, usage);
  cqb_sim_options_done();

  bool all = strcmp(cmd, "all") == 0;
  bool sim = all || strcmp(cmd, "sim") == 0;
  bool backfill = all || strcmp(cmd, "backfill") == 0;
  cqb_become_multithreaded();
  cqb_print_header();
  fflush(stdout);
  cqb_progress_plan((sim ? cqb_sim_plan() : 0) +
                    (backfill ? cqb_backfill_plan() : 0));
  if (sim)
    cqb_sim();
  if (backfill)
    cqb_backfill();
  cqb_print_notes();
  cqb_write_outputs();
  return 0;
}
