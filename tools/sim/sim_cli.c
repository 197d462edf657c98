/*
 * The simulator's suites, as cronoq-sim and cronoq-bench run them:
 * - `sim` builds the workload (synthetic, or the trace), runs it through
 *   every policy on each pool, prints what each policy achieved, records
 *   the figures and their goals, and draws the charts when asked
 *   (--plot DIR);
 * - `backfill` runs backfill at three loads with four kinds of hold
 *   limits against libcronoq without it, strict FIFO and greedy.
 *
 * A simulation is deterministic: repeating it gives the same schedule, so
 * each repetition is checked against the first, and only the timing columns
 * (wall time, decisions per CPU second) vary from one to the next; they are
 * medians.
 */
#include "sim_cli.h"

#include "harness.h"
#include "sim.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct cqb_sim_opts cqb_sim_opts = {
    .seed = 1,
    .limit_lo = 1,
    .limit_hi = 3,
};

#define DEFAULT_LOAD 0.8
#define DEFAULT_WORKERS 4
#define UTIL_BINS 300 /* points per utilisation line */
#define CDF_POINTS 200

static const char *const CLASS_NAMES[SIM_CLASSES] = {"cpu-only", "fractional",
                                                     "whole-gpu", "multi-gpu"};

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/* --limit-factor LO[-HI]: hold limits are run times times f, f uniform in
 * [LO, HI] (both at least 1: limits are honest). */
static void limit_factor(const char *text) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%s", text);
  char *dash = strchr(buf, '-');
  if (dash != NULL)
    *dash = '\0';
  cqb_sim_opts.limit_lo = cqb_number_arg("--limit-factor", buf, 1, 1000);
  cqb_sim_opts.limit_hi =
      dash != NULL ? cqb_number_arg("--limit-factor", dash + 1, 1, 1000)
                   : cqb_sim_opts.limit_lo;
  if (cqb_sim_opts.limit_hi < cqb_sim_opts.limit_lo) {
    fprintf(stderr, "%s: --limit-factor LO-HI needs LO <= HI\n",
            cqb_opts.program);
    exit(2);
  }
}

static void bad_name(const char *opt, const char *text, const char *what) {
  fprintf(stderr, "%s: %s takes %s, not '%s'\n", cqb_opts.program, opt, what,
          text);
  exit(2);
}

int cqb_sim_parse_option(int argc, char **argv, int i) {
  struct cqb_sim_opts *o = &cqb_sim_opts;
  const char *a = argv[i];
  const char *v = i + 1 < argc ? argv[i + 1] : NULL;
  if (v == NULL)
    return 0; /* every option here takes a value */
  if (strcmp(a, "--pool") == 0) {
    if (strcmp(v, "machine") != 0 && strcmp(v, "rack") != 0)
      bad_name(a, v, "machine or rack");
    o->pool = v;
  } else if (strcmp(a, "--trace") == 0) {
    o->trace = v;
  } else if (strcmp(a, "--load") == 0) {
    o->load = cqb_number_arg(a, v, 0.01, 100);
  } else if (strcmp(a, "--replay") == 0) {
    o->replay = (unsigned)cqb_number_arg(a, v, 1, 1000);
  } else if (strcmp(a, "--jobs") == 0) {
    o->jobs = (size_t)cqb_number_arg(a, v, 1, 1e8);
  } else if (strcmp(a, "--seed") == 0) {
    o->seed = (uint64_t)cqb_number_arg(a, v, 0, 1e15);
  } else if (strcmp(a, "--workers") == 0) {
    o->workers = (unsigned)cqb_number_arg(a, v, 1, 64);
  } else if (strcmp(a, "--vcpus") == 0) {
    o->vcpus = (unsigned)cqb_number_arg(a, v, 1, 1e6);
  } else if (strcmp(a, "--limit-factor") == 0) {
    limit_factor(v);
  } else if (strcmp(a, "--no-limit") == 0) {
    o->no_limit = cqb_number_arg(a, v, 0, 1);
  } else if (strcmp(a, "--plot") == 0) {
    o->plot_dir = v;
  } else {
    return 0;
  }
  return 2;
}

void cqb_sim_usage(FILE *f) {
  fprintf(f,
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

/* ------------------------------------------------------------------------ */
/* Sizes and pools                                                           */
/* ------------------------------------------------------------------------ */

/* Synthetic jobs per pool by run size: enough for the rack to reach a
 * steady state, small enough for the default run to take seconds. */
static size_t synthetic_jobs(const struct pool_shape *shape) {
  if (cqb_sim_opts.jobs > 0)
    return cqb_sim_opts.jobs;
  size_t per_gpu = cqb_opts.size == CQB_QUICK  ? 40
                   : cqb_opts.size == CQB_FULL ? 1000
                                               : 250;
  return per_gpu * shape->gpus;
}

static unsigned sim_reps(void) {
  /* Deterministic schedules: the repetitions only time the runs. */
  return cqb_opts.size == CQB_QUICK ? 1 : (unsigned)cqb_opts.reps;
}

static const struct pool_shape *const SHAPES[] = {&SIM_MACHINE, &SIM_RACK};
#define N_SHAPES (sizeof(SHAPES) / sizeof(SHAPES[0]))

static bool shape_selected(const struct pool_shape *shape) {
  return cqb_sim_opts.pool == NULL ||
         strcmp(cqb_sim_opts.pool, shape->name) == 0;
}

/* The pool as the options ask for it (--vcpus). */
static struct pool_shape shape_as_asked(const struct pool_shape *shape) {
  struct pool_shape s = *shape;
  if (cqb_sim_opts.vcpus > 0)
    s.cpu_milli = (int64_t)cqb_sim_opts.vcpus * 1000;
  return s;
}

int cqb_sim_plan(void) {
  int steps = 0;
  for (size_t i = 0; i < N_SHAPES; i++)
    if (shape_selected(SHAPES[i]))
      steps += SIM_POLICIES * (int)sim_reps();
  return steps;
}

/* ------------------------------------------------------------------------ */
/* Formatting                                                                */
/* ------------------------------------------------------------------------ */

/* A duration as people read it: 42s, 7.5m, 3.2h, 12d. */
static const char *human(double s, char *buf, size_t len) {
  if (s < 60)
    snprintf(buf, len, "%.0fs", s);
  else if (s < 3600)
    snprintf(buf, len, "%.1fm", s / 60);
  else if (s < 86400)
    snprintf(buf, len, "%.1fh", s / 3600);
  else
    snprintf(buf, len, "%.1fd", s / 86400);
  return buf;
}

/* ------------------------------------------------------------------------ */
/* One pool                                                                  */
/* ------------------------------------------------------------------------ */

struct policy_run {
  struct sim_result r;
  double wall[64], cpu[64];
  FILE *timeline;             /* for the chart, or NULL */
  double *waits[SIM_CLASSES]; /* for the chart, or NULL */
};

/* Whether two runs made the same schedule (timing aside). */
static bool same_schedule(const struct sim_result *a,
                          const struct sim_result *b) {
  if (a->jobs != b->jobs || a->rejected != b->rejected ||
      a->makespan_s != b->makespan_s || a->passed_over != b->passed_over ||
      a->longest_passed_over_s != b->longest_passed_over_s ||
      a->decisions != b->decisions || a->util_gpu != b->util_gpu)
    return false;
  for (int c = 0; c < SIM_CLASSES; c++)
    if (a->wait[c].jobs != b->wait[c].jobs ||
        a->wait[c].p99_s != b->wait[c].p99_s ||
        a->wait[c].max_s != b->wait[c].max_s)
      return false;
  return true;
}

/* Give the jobs hold limits as the options say (for the backfill policy;
 * the others ignore them). */
static void default_limits(struct workload *w) {
  const struct cqb_sim_opts *o = &cqb_sim_opts;
  wl_hold_limits(w, o->limit_lo, o->limit_hi, o->no_limit, o->seed + 2);
}

/* Build the workload for `shape`: synthetic, or the trace; Poisson arrivals
 * at `load` (0: the default for the synthetic workload, the trace's own
 * arrivals for the trace). Says what it built in `what`. */
static int build_workload(struct workload *w, const struct pool_shape *shape,
                          double load, char *what, size_t len) {
  const struct cqb_sim_opts *o = &cqb_sim_opts;
  memset(w, 0, sizeof(*w));
  if (o->trace == NULL) {
    if (load <= 0)
      load = DEFAULT_LOAD;
    size_t n = synthetic_jobs(shape);
    if (wl_synthetic(w, n, o->seed) != 0)
      return -1;
    wl_poisson_arrivals(w, load, shape->gpus, o->seed + 1);
    default_limits(w);
    snprintf(what, len,
             "synthetic workload, %zu jobs, seed %llu, offered GPU load %.2f",
             n, (unsigned long long)o->seed, load);
    return 0;
  }
  if (wl_read_trace(w, o->trace, stderr) != 0)
    return -1;
  size_t pods = w->n;
  unsigned times = o->replay > 0 ? o->replay : 1;
  if (times > 1 && wl_replay(w, times) != 0)
    return -1;
  default_limits(w);
  int at = snprintf(what, len,
                    "trace %s: %zu pods that ran (%zu never ran, %zu "
                    "malformed rows skipped)",
                    o->trace, pods, w->never_ran, w->malformed);
  if (times > 1)
    at += snprintf(what + at, len - (size_t)at, ", replayed %ux", times);
  if (load > 0) {
    wl_poisson_arrivals(w, load, shape->gpus, o->seed + 1);
    snprintf(what + at, len - (size_t)at,
             ", Poisson arrivals at offered GPU load %.2f", load);
  } else {
    snprintf(what + at, len - (size_t)at, ", the trace's own arrivals");
  }
  return 0;
}

static void run_policy(const struct workload *w, const struct pool_shape *shape,
                       int policy, struct policy_run *pr, bool plot) {
  unsigned reps = sim_reps();
  for (unsigned rep = 0; rep < reps; rep++) {
    struct sim_opts so;
    memset(&so, 0, sizeof(so));
    so.policy = policy;
    so.static_workers =
        cqb_sim_opts.workers > 0 ? cqb_sim_opts.workers : DEFAULT_WORKERS;
    if (plot && rep == 0) {
      pr->timeline = tmpfile();
      if (pr->timeline == NULL)
        cqb_fail("cannot create a temporary file: %s", strerror(errno));
      so.timeline = pr->timeline;
      for (int c = 0; c < SIM_CLASSES; c++) {
        pr->waits[c] = malloc((w->n + 1) * sizeof(double));
        if (pr->waits[c] == NULL)
          cqb_fail("out of memory");
        so.wait_samples[c] = pr->waits[c];
      }
    }
    struct sim_result r;
    if (sim_run(w, shape, &so, &r) != 0)
      cqb_fail("sim: %s on %s: the run's books do not balance",
               sim_policy_name(policy), shape->name);
    if (rep == 0)
      pr->r = r;
    else if (!same_schedule(&pr->r, &r))
      cqb_fail("sim: %s on %s: a repetition made a different schedule",
               sim_policy_name(policy), shape->name);
    pr->wall[rep] = r.wall_s;
    pr->cpu[rep] = r.cpu_s;
    char label[64];
    snprintf(label, sizeof(label), "sim %s %s", shape->name,
             sim_policy_name(policy));
    cqb_progress_tick(label);
  }
}

static void print_tables(const struct pool_shape *shape, const char *what,
                         struct policy_run *runs) {
  unsigned reps = sim_reps();
  printf("== sim: %s pool (%u GPUs, %lld vCPUs, %lld GiB); %s\n", shape->name,
         shape->gpus, (long long)(shape->cpu_milli / 1000),
         (long long)(shape->memory_mib / 1024), what);
  printf("  lower bound on the makespan: %.0f s (%.1f days)\n",
         runs[0].r.lower_bound_s, runs[0].r.lower_bound_s / 86400);
  printf("  %-17s %6s %5s %10s %6s %5s %5s %5s %9s %10s %8s %12s\n", "policy",
         "jobs", "rej", "makespan", "/bound", "gpu", "cpu", "mem", "overtaken",
         "passed-max", "wall", "decisions/s");
  for (int p = 0; p < SIM_POLICIES; p++) {
    const struct sim_result *r = &runs[p].r;
    struct cqb_stat wall = cqb_summarise(runs[p].wall, (int)reps);
    struct cqb_stat cpu = cqb_summarise(runs[p].cpu, (int)reps);
    char ms[16], pm[16];
    printf("  %-17s %6zu %5zu %10s %6.3f %5.3f %5.3f %5.3f %9zu %10s %7.3fs "
           "%12.3g\n",
           sim_policy_name(p), r->jobs, r->rejected,
           human(r->makespan_s, ms, sizeof(ms)),
           r->makespan_s / r->lower_bound_s, r->util_gpu, r->util_cpu,
           r->util_mem, r->passed_over,
           human(r->longest_passed_over_s, pm, sizeof(pm)), wall.med,
           cpu.med > 0 ? (double)r->decisions / cpu.med : 0);
  }
  printf("  waits p50 / p99 / max, per class:\n");
  printf("  %-17s", "policy");
  for (int c = 0; c < SIM_CLASSES; c++)
    printf(" %24s", CLASS_NAMES[c]);
  printf("\n");
  for (int p = 0; p < SIM_POLICIES; p++) {
    printf("  %-17s", sim_policy_name(p));
    for (int c = 0; c < SIM_CLASSES; c++) {
      const struct sim_waits *wt = &runs[p].r.wait[c];
      char a[16], b[16], x[16], cell[64];
      if (wt->jobs == 0)
        snprintf(cell, sizeof(cell), "-");
      else
        snprintf(cell, sizeof(cell), "%s / %s / %s",
                 human(wt->p50_s, a, sizeof(a)), human(wt->p99_s, b, sizeof(b)),
                 human(wt->max_s, x, sizeof(x)));
      printf(" %24s", cell);
    }
    printf("\n");
  }
  printf("\n");
}

/* A single-valued figure against a baseline of the same run. `bound`: a
 * ceiling on the ratio, a floor when negative, none when 0. */
static void goal(const char *group, const char *name, const char *unit,
                 double value, const char *base_name, double base_value,
                 double bound) {
  struct cqb_stat v = {value, value, value};
  struct cqb_stat b = {base_value, base_value, base_value};
  if (bound < 0)
    cqb_figure_min(group, name, unit, v, base_name, &b, -bound);
  else
    cqb_figure(group, name, unit, v, base_name, &b, bound);
}

/* The figures of one pool: every value for the CSV and JSON, and the goals
 * (bench/README.md) for the table. */
static void record(const struct pool_shape *shape, struct policy_run *runs) {
  char group[32];
  snprintf(group, sizeof(group), "sim %s%s", shape->name,
           cqb_sim_opts.trace != NULL ? " (trace)" : "");
  unsigned reps = sim_reps();
  for (int p = 0; p < SIM_POLICIES; p++) {
    const struct sim_result *r = &runs[p].r;
    const char *pn = sim_policy_name(p);
    char name[96];
#define VALUE(label, unit, v)                                                  \
  do {                                                                         \
    snprintf(name, sizeof(name), "%s %s", pn, label);                          \
    cqb_value(group, name, unit, v);                                           \
  } while (0)
    VALUE("jobs run", "jobs", (double)r->jobs);
    VALUE("jobs rejected", "jobs", (double)r->rejected);
    VALUE("makespan", "s", r->makespan_s);
    VALUE("makespan / lower bound", "x", r->makespan_s / r->lower_bound_s);
    VALUE("GPU utilisation", "fraction", r->util_gpu);
    VALUE("CPU utilisation", "fraction", r->util_cpu);
    VALUE("memory utilisation", "fraction", r->util_mem);
    VALUE("jobs overtaken", "jobs", (double)r->passed_over);
    VALUE("longest passed over", "s", r->longest_passed_over_s);
    for (int c = 0; c < SIM_CLASSES; c++) {
      char label[64];
      snprintf(label, sizeof(label), "%s wait p50", CLASS_NAMES[c]);
      VALUE(label, "s", r->wait[c].p50_s);
      snprintf(label, sizeof(label), "%s wait p99", CLASS_NAMES[c]);
      VALUE(label, "s", r->wait[c].p99_s);
      snprintf(label, sizeof(label), "%s wait max", CLASS_NAMES[c]);
      VALUE(label, "s", r->wait[c].max_s);
    }
    VALUE("wall time", "s", cqb_summarise(runs[p].wall, (int)reps).med);
#undef VALUE
    double dps[64];
    for (unsigned i = 0; i < reps; i++)
      dps[i] = runs[p].cpu[i] > 0 ? (double)r->decisions / runs[p].cpu[i] : 0;
    snprintf(name, sizeof(name), "%s decisions per CPU second", pn);
    cqb_figure(group, name, "1/s", cqb_summarise(dps, (int)reps), NULL, NULL,
               0);
  }

  /* The goals, against the baselines measured in the same run. The two
   * pools have different goals (see bench/README.md): the rack's tests the
   * reservation against greedy and FIFO, the machine's only that draining
   * for whole-machine jobs costs nothing over FIFO. */
  const struct sim_result *cq = &runs[SIM_CRONOQ].r;
  const struct sim_result *staged = &runs[SIM_CRONOQ_STAGED].r;
  const struct sim_result *fifo = &runs[SIM_FIFO].r;
  const struct sim_result *greedy = &runs[SIM_GREEDY].r;
  bool rack = strcmp(shape->name, "rack") == 0;
  goal(group, "libcronoq GPU utilisation", "fraction", cq->util_gpu, "greedy",
       greedy->util_gpu, rack ? -0.98 : 0);
  goal(group, "libcronoq makespan", "s", cq->makespan_s,
       rack ? "lower bound" : "strict-fifo",
       rack ? cq->lower_bound_s : fifo->makespan_s, rack ? 1.03 : 1.00);
  goal(group, "libcronoq p99 wait, CPU-only", "s", cq->wait[SIM_CPU_ONLY].p99_s,
       "strict-fifo", fifo->wait[SIM_CPU_ONLY].p99_s, rack ? 0.22 : 0.6);
  goal(group, "staged p99 wait, CPU-only", "s",
       staged->wait[SIM_CPU_ONLY].p99_s, "strict-fifo",
       fifo->wait[SIM_CPU_ONLY].p99_s, rack ? 0.03 : 0);
  goal(group, "libcronoq max wait, multi-GPU", "s", cq->wait[SIM_MULTI].max_s,
       "strict-fifo", fifo->wait[SIM_MULTI].max_s, rack ? 1.25 : 1.00);
  goal(group, "greedy max wait, multi-GPU", "s", greedy->wait[SIM_MULTI].max_s,
       "strict-fifo", fifo->wait[SIM_MULTI].max_s, 0);
}

/* ------------------------------------------------------------------------ */
/* Charts                                                                    */
/* ------------------------------------------------------------------------ */

/* mkdir -p: 0, or -1 with errno set. */
static int make_dirs(const char *dir) {
  char path[4096];
  if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  for (char *c = path + 1; *c != '\0'; c++) {
    if (*c != '/')
      continue;
    *c = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
      return -1;
    *c = '/';
  }
  return mkdir(path, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static FILE *open_in(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (f == NULL)
    cqb_fail("cannot write %s: %s", path, strerror(errno));
  return f;
}

/* Utilisation over time, averaged into bins over [0, span): read back a
 * run's timeline (time, GPUs, vCPUs, MiB in use from then on). */
static void write_util(FILE *out, FILE *timeline,
                       const struct pool_shape *shape, double span) {
  double sum[UTIL_BINS][3];
  memset(sum, 0, sizeof(sum));
  double width = span / UTIL_BINS;
  double t0 = 0, use[3] = {0, 0, 0}, t, u[3];
  rewind(timeline);
  for (;;) {
    int got = fscanf(timeline, "%lf %lf %lf %lf", &t, &u[0], &u[1], &u[2]);
    bool end = got != 4;
    if (end)
      t = span;
    /* Spread use[] over [t0, t) into the bins it overlaps. */
    size_t first = (size_t)(t0 / width), last = (size_t)(t / width);
    for (size_t bin = first; bin <= last && bin < UTIL_BINS; bin++) {
      double a = fmax(t0, (double)bin * width);
      double b = fmin(t, (double)(bin + 1) * width);
      if (b > a)
        for (int k = 0; k < 3; k++)
          sum[bin][k] += use[k] * (b - a);
    }
    if (end)
      break;
    t0 = t;
    memcpy(use, u, sizeof(use));
  }
  double cap[3] = {shape->gpus, (double)shape->cpu_milli / 1000,
                   (double)shape->memory_mib};
  for (size_t i = 0; i < UTIL_BINS; i++) {
    fprintf(out, "%.4f", ((double)i + 0.5) * width / 86400);
    for (int k = 0; k < 3; k++)
      fprintf(out, " %.4f", sum[i][k] / (width * cap[k]));
    fprintf(out, "\n");
  }
}

static void write_charts_data(const char *dir, const struct pool_shape *shape,
                              struct policy_run *runs, FILE *script) {
  double span = 0;
  for (int p = 0; p < SIM_POLICIES; p++)
    span = fmax(span, runs[p].r.makespan_s);
  if (span <= 0)
    span = 1;
  char name[256];

  /* Utilisation: one file per policy, three panels. */
  for (int p = 0; p < SIM_POLICIES; p++) {
    snprintf(name, sizeof(name), "util-%s-%s.dat", shape->name,
             sim_policy_name(p));
    FILE *f = open_in(dir, name);
    fprintf(f, "# days gpu cpu memory (fraction of capacity, binned)\n");
    write_util(f, runs[p].timeline, shape, span);
    fclose(f);
  }
  fprintf(script,
          "set terminal pngcairo size 1200,1000 font ',10'\n"
          "set output 'utilisation-%s.png'\n"
          "set multiplot layout 3,1 title 'Resource utilisation over time, "
          "%s pool'\n"
          "set key outside right\nset yrange [0:1.05]\nset grid\n"
          "set xlabel 'time (days)'\n",
          shape->name, shape->name);
  static const char *const RES[3] = {"GPU", "CPU", "memory"};
  for (int k = 0; k < 3; k++) {
    fprintf(script, "set title '%s'\n", RES[k]);
    fprintf(script, "plot ");
    for (int p = 0; p < SIM_POLICIES; p++)
      fprintf(script,
              "%s'util-%s-%s.dat' using 1:%d with lines lw 1.5 dt %d "
              "title '%s'",
              p ? ", \\\n     " : "", shape->name, sim_policy_name(p), k + 2,
              p + 1, sim_policy_name(p));
    fprintf(script, "\n");
  }
  fprintf(script, "unset multiplot\n\n");

  /* Wait-time CDFs: one panel per class, one line per policy. */
  fprintf(script,
          "set terminal pngcairo size 1200,900 font ',10'\n"
          "set output 'waits-%s.png'\n"
          "set multiplot layout 2,2 title 'Wait time CDF per job class, %s "
          "pool (waits under 1 s drawn at 1 s)'\n"
          "set logscale x\nset format x '10^{%%L}'\nset yrange [0:1]\n"
          "set key inside bottom right opaque\n"
          "set xlabel 'wait (s)'\nset ylabel 'fraction of jobs'\n",
          shape->name, shape->name);
  for (int c = 0; c < SIM_CLASSES; c++) {
    fprintf(script, "set title '%s'\n", CLASS_NAMES[c]);
    int plotted = 0;
    for (int p = 0; p < SIM_POLICIES; p++) {
      const struct sim_waits *wt = &runs[p].r.wait[c];
      if (wt->jobs == 0)
        continue;
      snprintf(name, sizeof(name), "waits-%s-%s-%s.dat", shape->name,
               CLASS_NAMES[c], sim_policy_name(p));
      FILE *f = open_in(dir, name);
      fprintf(f, "# wait_s fraction_of_jobs\n");
      const double *v = runs[p].waits[c]; /* sorted by sim_run */
      for (int i = 0; i <= CDF_POINTS; i++) {
        size_t k = (size_t)((double)i / CDF_POINTS * (double)(wt->jobs - 1));
        fprintf(f, "%.3f %.5f\n", fmax(v[k], 1.0),
                (double)(k + 1) / (double)wt->jobs);
      }
      fclose(f);
      fprintf(script, "%s'%s' using 1:2 with steps lw 1.5 dt %d title '%s'",
              plotted++ ? ", \\\n     " : "plot ", name, p + 1,
              sim_policy_name(p));
    }
    if (plotted == 0)
      fprintf(script, "set label 1 'no jobs' at graph 0.5,0.5 center\n"
                      "plot NaN notitle\nunset label 1");
    fprintf(script, "\n");
  }
  fprintf(script, "unset multiplot\nunset logscale x\nset format x\n"
                  "unset xlabel\n"
                  "unset ylabel\nset yrange [*:*]\n\n");

  /* Makespan over the lower bound. */
  snprintf(name, sizeof(name), "makespan-%s.dat", shape->name);
  FILE *f = open_in(dir, name);
  fprintf(f, "# policy makespan/lower_bound\n");
  for (int p = 0; p < SIM_POLICIES; p++)
    fprintf(f, "%s %.4f\n", sim_policy_name(p),
            runs[p].r.makespan_s / runs[p].r.lower_bound_s);
  fclose(f);
  fprintf(script,
          "set terminal pngcairo size 900,500 font ',10'\n"
          "set output 'makespan-%s.png'\n"
          "set title 'Makespan / lower bound, %s pool (1 is optimal)'\n"
          "set style fill solid 0.6\nset boxwidth 0.6\nset yrange [0:*]\n"
          "set grid ytics\nunset key\n"
          "plot '%s' using 0:2:xtic(1) with boxes, "
          "1 with lines dt 2 lc rgb 'black'\n\n",
          shape->name, shape->name, name);
}

/* Run gnuplot on the script in `dir`, without a shell. Returns 0, -1 if
 * gnuplot is not installed, or 1 if it failed. */
static int run_gnuplot(const char *dir) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return 1;
  if (pid == 0) {
    if (chdir(dir) != 0)
      _exit(126);
    /* gnuplot's own complaints go to stderr; keep stdout for the table */
    if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
      _exit(126);
    /* $CRONOQ_GNUPLOT names another gnuplot (the tests name a missing
     * one, to check what happens without it). */
    const char *gnuplot = getenv("CRONOQ_GNUPLOT");
    if (gnuplot == NULL || *gnuplot == '\0')
      gnuplot = "gnuplot";
    execlp(gnuplot, gnuplot, "plots.gp", (char *)NULL);
    _exit(errno == ENOENT ? 127 : 126);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return 1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------------ */

void cqb_sim(void) {
  const char *dir = cqb_sim_opts.plot_dir;
  FILE *script = NULL;
  if (dir != NULL) {
    if (make_dirs(dir) != 0)
      cqb_fail("cannot create %s: %s", dir, strerror(errno));
    script = open_in(dir, "plots.gp");
    fprintf(script, "# Charts of a simulator run: gnuplot plots.gp\n\n");
  }
  for (size_t i = 0; i < N_SHAPES; i++) {
    if (!shape_selected(SHAPES[i]))
      continue;
    struct pool_shape resized = shape_as_asked(SHAPES[i]);
    const struct pool_shape *shape = &resized;
    struct workload w;
    char what[512];
    if (build_workload(&w, shape, cqb_sim_opts.load, what, sizeof(what)) != 0)
      cqb_fail("sim: cannot build the workload%s%s",
               cqb_sim_opts.trace ? " from " : "",
               cqb_sim_opts.trace ? cqb_sim_opts.trace : "");
    struct policy_run runs[SIM_POLICIES];
    memset(runs, 0, sizeof(runs));
    for (int p = 0; p < SIM_POLICIES; p++)
      run_policy(&w, shape, p, &runs[p], dir != NULL);
    print_tables(shape, what, runs);
    record(shape, runs);
    cqb_print_figures();
    printf("\n");
    if (dir != NULL)
      write_charts_data(dir, shape, runs, script);
    for (int p = 0; p < SIM_POLICIES; p++) {
      if (runs[p].timeline != NULL)
        fclose(runs[p].timeline);
      for (int c = 0; c < SIM_CLASSES; c++)
        free(runs[p].waits[c]);
    }
    wl_free(&w);
  }
  fflush(stdout);
  if (script != NULL) {
    fclose(script);
    int rc = run_gnuplot(dir);
    if (rc == 0)
      cqb_note("charts: %s/*.png (from %s/plots.gp)", dir, dir);
    else if (rc < 0)
      cqb_note("chart data written to %s; gnuplot is not installed: "
               "apt-get install gnuplot-nox, then cd %s && gnuplot plots.gp",
               dir, dir);
    else
      cqb_note("chart data written to %s, but gnuplot failed on plots.gp "
               "(see its messages above)",
               dir);
  }
}

/* ------------------------------------------------------------------------ */
/* The backfill sweep                                                        */
/* ------------------------------------------------------------------------ */

static const double SWEEP_LOADS[] = {0.5, 0.8, 0.95};
#define N_LOADS (sizeof(SWEEP_LOADS) / sizeof(SWEEP_LOADS[0]))

/* How the jobs declare their limits: run time times f, f uniform in
 * [lo, hi]; `none` of them declare none. */
static const struct limit_variant {
  const char *name;
  double lo, hi, none;
} VARIANTS[] = {
    {"f in [1,3]", 1, 3, 0},
    {"f = 1", 1, 1, 0},
    {"f in [1,10]", 1, 10, 0},
    {"f in [1,3], 5% none", 1, 3, 0.05},
};
#define N_VARIANTS (sizeof(VARIANTS) / sizeof(VARIANTS[0]))

/* What backfill is compared with; their runs do not depend on limits. */
static const int BASES[] = {SIM_CRONOQ, SIM_FIFO, SIM_GREEDY};
#define N_BASES (sizeof(BASES) / sizeof(BASES[0]))

int cqb_backfill_plan(void) {
  int steps = 0;
  for (size_t i = 0; i < N_SHAPES; i++)
    if (shape_selected(SHAPES[i]))
      steps += (int)(N_LOADS * (N_BASES + N_VARIANTS));
  return steps;
}

static struct sim_result sweep_run(const struct workload *w,
                                   const struct pool_shape *shape, int policy) {
  struct sim_opts so;
  memset(&so, 0, sizeof(so));
  so.policy = policy;
  so.static_workers = DEFAULT_WORKERS;
  struct sim_result r;
  if (sim_run(w, shape, &so, &r) != 0)
    cqb_fail("backfill: %s on %s: the run's books do not balance",
             sim_policy_name(policy), shape->name);
  char label[64];
  snprintf(label, sizeof(label), "backfill %s %s", shape->name,
           sim_policy_name(policy));
  cqb_progress_tick(label);
  return r;
}

static void sweep_row(double load, const char *limits,
                      const struct sim_result *r) {
  char mw[16], sp[16], cp[16];
  printf("  %4.2f  %-20s %-19s %5.3f %8.3f %10s %10s %10s %8llu %6llu\n", load,
         limits, sim_policy_name(r->policy), r->util_gpu,
         r->makespan_s / r->lower_bound_s,
         human(r->wait[SIM_MULTI].max_s, mw, sizeof(mw)),
         human(r->small.p99_s, sp, sizeof(sp)),
         human(r->wait[SIM_CPU_ONLY].p99_s, cp, sizeof(cp)),
         (unsigned long long)r->backfilled, (unsigned long long)r->late_heads);
}

/* Every value of one run, for the CSV and JSON. */
static void sweep_values(const char *group, double load, const char *limits,
                         const struct sim_result *r) {
  char prefix[96], name[160];
  snprintf(prefix, sizeof(prefix), "%s, load %.2f%s%s",
           sim_policy_name(r->policy), load, limits ? ", " : "",
           limits ? limits : "");
#define V(label, unit, v)                                                      \
  do {                                                                         \
    snprintf(name, sizeof(name), "%s: %s", prefix, label);                     \
    cqb_value(group, name, unit, v);                                           \
  } while (0)
  V("GPU utilisation", "fraction", r->util_gpu);
  V("makespan / lower bound", "x", r->makespan_s / r->lower_bound_s);
  V("multi-GPU max wait", "s", r->wait[SIM_MULTI].max_s);
  V("small p99 wait", "s", r->small.p99_s);
  V("CPU-only p99 wait", "s", r->wait[SIM_CPU_ONLY].p99_s);
  V("backfilled", "grants", (double)r->backfilled);
  V("late heads", "heads", (double)r->late_heads);
#undef V
}

/* The backfill goals (bench/README.md), at load 0.8. */
static void sweep_goals(const char *group, const struct pool_shape *shape,
                        const struct sim_result *base,
                        const struct sim_result *bf) {
  const struct sim_result *fifo = &base[1], *greedy = &base[2];
  const struct sim_result *f13 = &bf[0], *none5 = &bf[3];
  if (strcmp(shape->name, "machine") == 0) {
    goal(group, "GPU use, f in [1,3]", "fraction", f13->util_gpu, "greedy",
         greedy->util_gpu, -1.00);
    goal(group, "makespan, f in [1,3]", "s", f13->makespan_s, "lower bound",
         f13->lower_bound_s, 1.10);
    goal(group, "makespan vs greedy, f in [1,3]", "s", f13->makespan_s,
         "greedy", greedy->makespan_s, 1.00);
    goal(group, "multi-GPU max wait, f in [1,3]", "s",
         f13->wait[SIM_MULTI].max_s, "strict-fifo", fifo->wait[SIM_MULTI].max_s,
         0.55);
    goal(group, "small p99 wait, f in [1,3]", "s", f13->small.p99_s,
         "strict-fifo", fifo->small.p99_s, 0.30);
    goal(group, "GPU use, 5% without limit", "fraction", none5->util_gpu,
         "greedy", greedy->util_gpu, -0.95);
    goal(group, "multi-GPU max wait, 5% without", "s",
         none5->wait[SIM_MULTI].max_s, "strict-fifo",
         fifo->wait[SIM_MULTI].max_s, 0.65);
  } else {
    goal(group, "makespan, f in [1,3]", "s", f13->makespan_s, "lower bound",
         f13->lower_bound_s, 1.02);
    goal(group, "CPU-only p99 wait, f in [1,3]", "s",
         f13->wait[SIM_CPU_ONLY].p99_s, "strict-fifo",
         fifo->wait[SIM_CPU_ONLY].p99_s, 0.16);
  }
}

void cqb_backfill(void) {
  for (size_t i = 0; i < N_SHAPES; i++) {
    if (!shape_selected(SHAPES[i]))
      continue;
    struct pool_shape resized = shape_as_asked(SHAPES[i]);
    const struct pool_shape *shape = &resized;
    char group[32];
    snprintf(group, sizeof(group), "backfill %s%s", shape->name,
             cqb_sim_opts.trace != NULL ? " (trace)" : "");
    bool header = false;
    uint64_t late = 0;
    for (size_t l = 0; l < N_LOADS; l++) {
      struct workload w;
      char what[512];
      if (build_workload(&w, shape, SWEEP_LOADS[l], what, sizeof(what)) != 0)
        cqb_fail("backfill: cannot build the workload");
      if (!header) {
        printf("== backfill: %s pool (%u GPUs, %lld vCPUs, %lld GiB); %s\n",
               shape->name, shape->gpus, (long long)(shape->cpu_milli / 1000),
               (long long)(shape->memory_mib / 1024), what);
        printf("  %4s  %-20s %-19s %5s %8s %10s %10s %10s %8s %6s\n", "load",
               "limits", "policy", "gpu", "/bound", "multi max", "small p99",
               "cpu p99", "backfill", "late");
        header = true;
      }
      struct sim_result base[N_BASES], bf[N_VARIANTS];
      for (size_t b = 0; b < N_BASES; b++) {
        base[b] = sweep_run(&w, shape, BASES[b]);
        sweep_row(SWEEP_LOADS[l], "-", &base[b]);
        sweep_values(group, SWEEP_LOADS[l], NULL, &base[b]);
      }
      for (size_t v = 0; v < N_VARIANTS; v++) {
        wl_hold_limits(&w, VARIANTS[v].lo, VARIANTS[v].hi, VARIANTS[v].none,
                       cqb_sim_opts.seed + 2);
        bf[v] = sweep_run(&w, shape, SIM_CRONOQ_BACKFILL);
        sweep_row(SWEEP_LOADS[l], VARIANTS[v].name, &bf[v]);
        sweep_values(group, SWEEP_LOADS[l], VARIANTS[v].name, &bf[v]);
        if (VARIANTS[v].none == 0)
          late += bf[v].late_heads;
      }
      if (SWEEP_LOADS[l] == 0.8)
        sweep_goals(group, shape, base, bf);
      wl_free(&w);
    }
    printf("  small: CPU-only and fractional jobs; late: heads granted after "
           "their shadow time\n\n");
    cqb_note("%s: %llu heads granted after their shadow time with honest "
             "limits (every variant but the one with jobs without a limit)",
             group, (unsigned long long)late);
    cqb_print_figures();
    printf("\n");
  }
}
