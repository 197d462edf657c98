/*
 * cronoq-bench: what libcronoq gains over what its users would use
 * otherwise, measured side by side in one run.
 *
 *   cronoq-bench [micro|all] [--quick|--full] [--reps N] [--csv FILE]
 *                [--json FILE] [--no-progress]
 */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: cronoq-bench [micro|all] [options]\n"
          "\n"
          "  micro          the micro-benchmarks, each against its baseline\n"
          "  all            everything (the default)\n"
          "\n"
          "  --quick        small sizes (seconds; used in CI)\n"
          "  --full         large sizes (minutes)\n"
          "  --reps N       repetitions per figure (default 5; quick 3)\n"
          "  --csv FILE     also write the figures as CSV\n"
          "  --json FILE    also write the figures as JSON\n"
          "  --no-progress  no progress bar on stderr\n"
          "  -h, --help     this text\n");
}

static void *nothing(void *arg) { return arg; }

/*
 * Host schedulers are multi-threaded. glibc drops the atomic instructions
 * from mutexes while a process has never had a second thread, which would
 * make every mutex baseline unrealistically cheap; so start one first.
 */
static void become_multithreaded(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, nothing, NULL) != 0 ||
      pthread_join(t, NULL) != 0)
    cqb_fail("cannot start a thread");
}

int main(int argc, char **argv) {
  const char *cmd = "all";
  int reps = 0;
  cqb_opts.progress = isatty(STDERR_FILENO);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "micro") == 0 || strcmp(a, "all") == 0) {
      cmd = a;
    } else if (strcmp(a, "--quick") == 0) {
      cqb_opts.size = CQB_QUICK;
    } else if (strcmp(a, "--full") == 0) {
      cqb_opts.size = CQB_FULL;
    } else if (strcmp(a, "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < 1 || reps > 64) {
        fprintf(stderr, "cronoq-bench: --reps takes 1..64\n");
        return 2;
      }
    } else if (strcmp(a, "--csv") == 0 && i + 1 < argc) {
      cqb_opts.csv = argv[++i];
    } else if (strcmp(a, "--json") == 0 && i + 1 < argc) {
      cqb_opts.json = argv[++i];
    } else if (strcmp(a, "--no-progress") == 0) {
      cqb_opts.progress = 0;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "cronoq-bench: unknown argument '%s'\n\n", a);
      usage(stderr);
      return 2;
    }
  }
  cqb_opts.reps = reps ? reps : cqb_opts.size == CQB_QUICK ? 3 : 5;

  become_multithreaded();
  cqb_print_header();
  fflush(stdout);
  (void)cmd; /* micro is the whole of "all" until the simulator lands */
  int steps = cqb_micro_core_plan() + cqb_micro_devices_plan();
#ifdef CRONOQ_BENCH_UV
  steps += cqb_micro_uv_plan();
#endif
  cqb_progress_plan(steps);
  cqb_micro_core();
  cqb_micro_devices();
#ifdef CRONOQ_BENCH_UV
  cqb_micro_uv();
#endif
  cqb_print_results();
  cqb_write_outputs();
  return 0;
}
