/*
 * cronoq-bench: what libcronoq gains over what its users would use
 * otherwise, measured side by side in one run.
 *
 *   cronoq-bench [micro|sim|all] [options]   (see usage() below)
 */
#include "harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: cronoq-bench [micro|sim|backfill|all] [options]\n"
          "\n"
          "  micro          the micro-benchmarks, each against its baseline\n"
          "  sim            the workload simulator: libcronoq against strict\n"
          "                 FIFO, greedy first-fit and a static split\n"
          "  backfill       the simulator at loads 0.5, 0.8 and 0.95 with\n"
          "                 hold limits of several kinds: backfill against\n"
          "                 libcronoq without it, strict FIFO and greedy\n"
          "  all            all three (the default)\n"
          "\n"
          "  --quick        small sizes (seconds; used in CI)\n"
          "  --full         large sizes (minutes)\n"
          "  --reps N       repetitions per figure (default 5; quick 3)\n"
          "  --csv FILE     also write the figures as CSV\n"
          "  --json FILE    also write the figures as JSON\n"
          "  --no-progress  no progress bar on stderr\n"
          "  -h, --help     this text\n"
          "\n"
          "simulator options:\n"
          "  --pool P       machine (8 GPUs, 96 vCPUs, 768 GiB) or rack (64\n"
          "                 GPUs, 768 vCPUs, 6 TiB); default both\n"
          "  --trace FILE   replay a trace CSV (the openb pod list format)\n"
          "                 instead of the synthetic workload\n"
          "  --load RHO     Poisson arrivals at offered GPU load RHO (default\n"
          "                 0.8; with --trace, the trace's own arrivals)\n"
          "  --replay N     repeat the trace N times\n"
          "  --jobs N       synthetic jobs per pool (default by size)\n"
          "  --seed S       seed of the synthetic workload (default 1)\n"
          "  --workers K    workers of the static split (default 4)\n"
          "  --vcpus N      give the pool N vCPUs instead of its own\n"
          "  --limit-factor LO[-HI]  jobs declare hold limits of run time\n"
          "                 times f, f uniform in [LO, HI] (default 1-3)\n"
          "  --no-limit P   a share P of jobs declares no limit (default 0)\n"
          "  --plot DIR     write chart data, a gnuplot script and (with\n"
          "                 gnuplot installed) PNG charts into DIR\n");
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

/* Parse a number option's value, or exit with a message. */
static double number_arg(const char *opt, const char *text, double lo,
                         double hi) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= lo && v <= hi)) {
    fprintf(stderr, "cronoq-bench: %s takes a number in [%g, %g], not '%s'\n",
            opt, lo, hi, text);
    exit(2);
  }
  return v;
}

/* --limit-factor LO[-HI]: hold limits are run times times f, f uniform in
 * [LO, HI] (both at least 1: limits are honest). */
static void limit_factor(const char *text) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%s", text);
  char *dash = strchr(buf, '-');
  if (dash != NULL)
    *dash = '\0';
  cqb_sim_opts.limit_lo = number_arg("--limit-factor", buf, 1, 1000);
  cqb_sim_opts.limit_hi = dash != NULL
                              ? number_arg("--limit-factor", dash + 1, 1, 1000)
                              : cqb_sim_opts.limit_lo;
  if (cqb_sim_opts.limit_hi < cqb_sim_opts.limit_lo) {
    fprintf(stderr, "cronoq-bench: --limit-factor LO-HI needs LO <= HI\n");
    exit(2);
  }
}

int main(int argc, char **argv) {
  const char *cmd = "all";
  int reps = 0;
  cqb_sim_opts.seed = 1;
  cqb_sim_opts.limit_lo = 1;
  cqb_sim_opts.limit_hi = 3;
  cqb_opts.progress = isatty(STDERR_FILENO);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "micro") == 0 || strcmp(a, "sim") == 0 ||
        strcmp(a, "backfill") == 0 || strcmp(a, "all") == 0) {
      cmd = a;
    } else if (strcmp(a, "--pool") == 0 && v != NULL) {
      if (strcmp(v, "machine") != 0 && strcmp(v, "rack") != 0) {
        fprintf(stderr, "cronoq-bench: --pool is machine or rack\n");
        return 2;
      }
      cqb_sim_opts.pool = argv[++i];
    } else if (strcmp(a, "--trace") == 0 && v != NULL) {
      cqb_sim_opts.trace = argv[++i];
    } else if (strcmp(a, "--load") == 0 && v != NULL) {
      cqb_sim_opts.load = number_arg(a, argv[++i], 0.01, 100);
    } else if (strcmp(a, "--replay") == 0 && v != NULL) {
      cqb_sim_opts.replay = (unsigned)number_arg(a, argv[++i], 1, 1000);
    } else if (strcmp(a, "--jobs") == 0 && v != NULL) {
      cqb_sim_opts.jobs = (size_t)number_arg(a, argv[++i], 1, 1e8);
    } else if (strcmp(a, "--seed") == 0 && v != NULL) {
      cqb_sim_opts.seed = (uint64_t)number_arg(a, argv[++i], 0, 1e15);
    } else if (strcmp(a, "--workers") == 0 && v != NULL) {
      cqb_sim_opts.workers = (unsigned)number_arg(a, argv[++i], 1, 64);
    } else if (strcmp(a, "--vcpus") == 0 && v != NULL) {
      cqb_sim_opts.vcpus = (unsigned)number_arg(a, argv[++i], 1, 1e6);
    } else if (strcmp(a, "--limit-factor") == 0 && v != NULL) {
      limit_factor(argv[++i]);
    } else if (strcmp(a, "--no-limit") == 0 && v != NULL) {
      cqb_sim_opts.no_limit = number_arg(a, argv[++i], 0, 1);
    } else if (strcmp(a, "--plot") == 0 && v != NULL) {
      cqb_sim_opts.plot_dir = argv[++i];
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
  bool all = strcmp(cmd, "all") == 0;
  bool micro = all || strcmp(cmd, "micro") == 0;
  bool sim = all || strcmp(cmd, "sim") == 0;
  bool backfill = all || strcmp(cmd, "backfill") == 0;
  int steps = 0;
  if (micro) {
    steps += cqb_micro_core_plan() + cqb_micro_contended_plan() +
             cqb_micro_devices_plan() + cqb_micro_backfill_plan();
#ifdef CRONOQ_BENCH_UV
    steps += cqb_micro_uv_plan();
#endif
  }
  if (sim)
    steps += cqb_sim_plan();
  if (backfill)
    steps += cqb_backfill_plan();
  cqb_progress_plan(steps);
  if (micro) {
    cqb_micro_core();
    cqb_micro_contended();
    cqb_micro_devices();
    cqb_micro_backfill();
#ifdef CRONOQ_BENCH_UV
    cqb_micro_uv();
#endif
  }
  cqb_print_figures();
  if (sim)
    cqb_sim(); /* its own tables, each pool's figures after them */
  if (backfill)
    cqb_backfill();
  cqb_print_notes();
  cqb_write_outputs();
  return 0;
}
