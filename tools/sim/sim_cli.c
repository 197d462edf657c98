/*
 * The simulator's suites, as cronoq-sim and cronoq-bench run them:
 * - `sim` builds the workload (synthetic, or the trace), runs it through
 *   every policy on each pool, prints what each policy achieved, records
 *   the figures and their goals, and draws the charts when asked
 *   (--plot DIR);
 * - `backfill` runs backfill at three loads with four kinds of hold
 *   limits against libcronoq without it, strict FIFO and greedy.
 * With --seeds N each pool runs N seeds; a goal is then judged on the
 * median of its ratio over the seeds, and the worst seed is reported (for
 * the machine's goals against FIFO, judged too, over the seeds where a
 * device blocked the head: see struct sim_result). --event-log CLASS
 * prints the events around the longest wait of that class (explain.c).
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
    .window_start_ms = -1,
    .explain_class = -1,
    .explain_policy = -1,
};

#define DEFAULT_LOAD 0.8
#define GOAL_LOAD 0.8 /* the backfill goals' load */
#define DEFAULT_WORKERS 4
#define UTIL_BINS 300 /* points per utilisation line */
#define CDF_POINTS 200
#define EXPLAIN_ROWS 200 /* most rows per list of an event log */

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/* Options given that only some workloads take. */
static bool censored_given, window_given;

/* A duration: seconds, or a number with s, m, h or d. Exits (2) if not. */
static int64_t duration_arg(const char *opt, const char *text) {
  static const struct {
    char suffix;
    double seconds;
  } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
  char buf[64];
  snprintf(buf, sizeof(buf), "%s", text);
  size_t len = strlen(buf);
  double scale = 1;
  for (size_t u = 0; len > 1 && u < sizeof(units) / sizeof(units[0]); u++)
    if (buf[len - 1] == units[u].suffix) {
      scale = units[u].seconds;
      buf[len - 1] = '\0';
    }
  return (int64_t)llround(cqb_number_arg(opt, buf, 0, 1e12) * scale * 1000);
}

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

/* --censored drop|keep|cap:DURATION */
static void censored(const char *text) {
  struct cqb_sim_opts *o = &cqb_sim_opts;
  if (strcmp(text, "drop") == 0) {
    o->censored = WL_CENSORED_DROP;
  } else if (strcmp(text, "keep") == 0) {
    o->censored = WL_CENSORED_KEEP;
  } else if (strncmp(text, "cap:", 4) == 0) {
    o->censored = WL_CENSORED_CAP;
    o->censored_cap_ms = duration_arg("--censored cap:", text + 4);
  } else {
    fprintf(stderr, "%s: --censored is drop, keep or cap:DURATION, not '%s'\n",
            cqb_opts.program, text);
    exit(2);
  }
  censored_given = true;
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
  } else if (strcmp(a, "--seeds") == 0) {
    o->seeds = (unsigned)cqb_number_arg(a, v, 1, CQB_SEEDS_MAX);
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
  } else if (strcmp(a, "--censored") == 0) {
    censored(v);
  } else if (strcmp(a, "--window-start") == 0) {
    o->window_start_ms = duration_arg(a, v);
    window_given = true;
  } else if (strcmp(a, "--event-log") == 0) {
    o->explain_class = sim_class_of(v);
    if (o->explain_class < 0)
      bad_name(a, v, "cpu-only, fractional, whole-gpu, multi-gpu or small");
  } else if (strcmp(a, "--event-policy") == 0) {
    o->explain_policy = sim_policy_of(v);
    if (o->explain_policy < 0)
      bad_name(a, v, "a policy the tables name (libcronoq, strict-fifo, ...)");
  } else if (strcmp(a, "--event-window") == 0) {
    o->explain_window_ms = duration_arg(a, v);
  } else {
    return 0;
  }
  return 2;
}

static void refuse(const char *why) {
  fprintf(stderr, "%s: %s\n", cqb_opts.program, why);
  exit(2);
}

void cqb_sim_options_done(void) {
  const struct cqb_sim_opts *o = &cqb_sim_opts;
  if (o->trace == NULL && (censored_given || window_given))
    refuse("--censored and --window-start treat a trace's pods: they need "
           "--trace FILE");
  if (o->plot_dir != NULL && o->seeds > 1)
    refuse("--plot draws the runs of one seed: leave out --seeds");
  if (o->explain_class < 0 &&
      (o->explain_policy >= 0 || o->explain_window_ms > 0))
    refuse("--event-policy and --event-window shape the event log: they need "
           "--event-log CLASS");
}

void cqb_sim_usage(FILE *f) {
  fprintf(
      f,
      "simulator options:\n"
      "  --pool P       machine (8 GPUs, 96 vCPUs, 768 GiB) or rack (64\n"
      "                 GPUs, 768 vCPUs, 6 TiB); default both\n"
      "  --trace FILE   replay a trace CSV (the openb pod list format)\n"
      "                 instead of the synthetic workload\n"
      "  --censored HOW the trace's pods created before its window: drop\n"
      "                 (the default), keep, or cap:DURATION (kept, run\n"
      "                 times capped; DURATION in s, or with s, m, h or d)\n"
      "  --window-start S  where the trace window starts, in the trace's\n"
      "                 seconds (default: its earliest deletion time)\n"
      "  --load RHO     Poisson arrivals at offered GPU load RHO (default\n"
      "                 0.8; with --trace, the trace's own arrivals); for\n"
      "                 backfill, only that load instead of 0.5, 0.8, 0.95\n"
      "  --replay N     repeat the trace N times\n"
      "  --jobs N       synthetic jobs per pool (default by size)\n"
      "  --seed S       seed of the workload, arrivals and limits (default 1)\n"
      "  --seeds N      run N seeds from S on: a row per seed, goals on\n"
      "                 the median over the seeds, the worst reported\n"
      "  --workers K    workers of the static split (default 4)\n"
      "  --vcpus N      give the pool N vCPUs instead of its own\n"
      "  --limit-factor LO[-HI]  jobs declare hold limits of run time\n"
      "                 times f, f uniform in [LO, HI] (default 1-3)\n"
      "  --no-limit P   a share P of jobs declares no limit (default 0)\n"
      "  --plot DIR     write chart data, a gnuplot script and (with\n"
      "                 gnuplot installed) PNG charts into DIR\n"
      "  --event-log CLASS  print the events around the longest wait of\n"
      "                 CLASS (cpu-only, fractional, whole-gpu, multi-gpu,\n"
      "                 small) on each pool; with --seeds, on the seed where\n"
      "                 it is longest against strict FIFO's\n"
      "  --event-policy P   the policy the log follows (default libcronoq;\n"
      "                 for backfill, libcronoq-backfill with f in [1,3])\n"
      "  --event-window DURATION  log only the end of the wait\n");
}

/* ------------------------------------------------------------------------ */
/* Sizes, pools and seeds                                                    */
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

static unsigned n_seeds(void) {
  return cqb_sim_opts.seeds > 0 ? cqb_sim_opts.seeds : 1;
}

static unsigned sim_reps(void) {
  /* Deterministic schedules: the repetitions only time the runs, and runs
   * over several seeds show no timing. */
  return cqb_opts.size == CQB_QUICK || n_seeds() > 1 ? 1
                                                     : (unsigned)cqb_opts.reps;
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

static int selected_shapes(void) {
  int n = 0;
  for (size_t i = 0; i < N_SHAPES; i++)
    n += shape_selected(SHAPES[i]);
  return n;
}

int cqb_sim_plan(void) {
  return selected_shapes() * SIM_POLICIES * (int)(sim_reps() * n_seeds());
}

/* "seed 1" or "seeds 1-10" */
static void seeds_text(char *buf, size_t len) {
  uint64_t first = cqb_sim_opts.seed;
  if (n_seeds() == 1)
    snprintf(buf, len, "seed %llu", (unsigned long long)first);
  else
    snprintf(buf, len, "seeds %llu-%llu", (unsigned long long)first,
             (unsigned long long)(first + n_seeds() - 1));
}

/* ------------------------------------------------------------------------ */
/* Workloads                                                                 */
/* ------------------------------------------------------------------------ */

/* Give the jobs hold limits as the options say (for the backfill policy;
 * the others ignore them). */
static void default_limits(struct workload *w, uint64_t seed) {
  const struct cqb_sim_opts *o = &cqb_sim_opts;
  wl_hold_limits(w, o->limit_lo, o->limit_hi, o->no_limit, seed + 2);
}

/* Treat the trace's censored pods as the options say; append what was
 * done to `what` at `at`. Returns the new end of `what`. */
static int censor(struct workload *w, char *what, size_t len, int at) {
  const struct cqb_sim_opts *o = &cqb_sim_opts;
  int64_t start =
      o->window_start_ms >= 0 ? o->window_start_ms : w->window_start_ms;
  size_t capped = 0;
  size_t early = wl_censor(w, o->censored, start, o->censored_cap_ms, &capped);
  char cap[16];
  at += snprintf(what + at, len - (size_t)at,
                 "; %zu pod%s created before the trace window (day %.1f) ",
                 early, early == 1 ? "" : "s", (double)start / 86400000.0);
  if (o->censored == WL_CENSORED_DROP)
    at += snprintf(what + at, len - (size_t)at, "dropped");
  else if (o->censored == WL_CENSORED_KEEP)
    at += snprintf(what + at, len - (size_t)at, "kept");
  else
    at += snprintf(
        what + at, len - (size_t)at,
        "kept, run times capped at %s (%zu shortened)",
        sim_duration((double)o->censored_cap_ms / 1000.0, cap, sizeof(cap)),
        capped);
  return at;
}

/* Build the workload for `shape` and `seed`: synthetic, or the trace;
 * Poisson arrivals at `load` (0: the default for the synthetic workload,
 * the trace's own arrivals for the trace). Says what it built in `what`. */
static int build_workload(struct workload *w, const struct pool_shape *shape,
                          double load, uint64_t seed, char *what, size_t len) {
  const struct cqb_sim_opts *o = &cqb_sim_opts;
  char seeds[64];
  seeds_text(seeds, sizeof(seeds));
  memset(w, 0, sizeof(*w));
  if (o->trace == NULL) {
    if (load <= 0)
      load = DEFAULT_LOAD;
    size_t n = synthetic_jobs(shape);
    if (wl_synthetic(w, n, seed) != 0)
      return -1;
    wl_poisson_arrivals(w, load, shape->gpus, seed + 1);
    default_limits(w, seed);
    snprintf(what, len,
             "synthetic workload, %zu jobs, %s, offered GPU load %.2f", n,
             seeds, load);
    return 0;
  }
  if (wl_read_trace(w, o->trace, stderr) != 0)
    return -1;
  size_t pods = w->n;
  int at = snprintf(what, len,
                    "trace %s: %zu pods that ran (%zu never ran, %zu "
                    "malformed rows skipped)",
                    o->trace, pods, w->never_ran, w->malformed);
  at = censor(w, what, len, at);
  unsigned times = o->replay > 0 ? o->replay : 1;
  if (times > 1 && wl_replay(w, times) != 0)
    return -1;
  default_limits(w, seed);
  if (times > 1)
    at += snprintf(what + at, len - (size_t)at, "; replayed %ux", times);
  if (load > 0) {
    wl_poisson_arrivals(w, load, shape->gpus, seed + 1);
    snprintf(what + at, len - (size_t)at,
             "; Poisson arrivals at offered GPU load %.2f, %s", load, seeds);
  } else {
    snprintf(what + at, len - (size_t)at, "; the trace's own arrivals, %s",
             seeds);
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Runs                                                                      */
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

static struct sim_opts run_opts(int policy) {
  struct sim_opts so;
  memset(&so, 0, sizeof(so));
  so.policy = policy;
  so.static_workers =
      cqb_sim_opts.workers > 0 ? cqb_sim_opts.workers : DEFAULT_WORKERS;
  return so;
}

static void run_policy(const struct workload *w, const struct pool_shape *shape,
                       int policy, struct policy_run *pr, bool plot) {
  unsigned reps = sim_reps();
  for (unsigned rep = 0; rep < reps; rep++) {
    struct sim_opts so = run_opts(policy);
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

/* The share of the time anyone waited during which a device blocked the
 * head (see struct sim_result), or 0. */
static double blocked_share(const struct sim_result *r) {
  return r->head_waiting_s > 0 ? r->head_device_blocked_s / r->head_waiting_s
                               : 0;
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
           sim_duration(r->makespan_s, ms, sizeof(ms)),
           r->makespan_s / r->lower_bound_s, r->util_gpu, r->util_cpu,
           r->util_mem, r->passed_over,
           sim_duration(r->longest_passed_over_s, pm, sizeof(pm)), wall.med,
           cpu.med > 0 ? (double)r->decisions / cpu.med : 0);
  }
  printf("  waits p50 / p99 / max, per class:\n");
  printf("  %-17s", "policy");
  for (int c = 0; c < SIM_CLASSES; c++)
    printf(" %24s", sim_class_name(c));
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
                 sim_duration(wt->p50_s, a, sizeof(a)),
                 sim_duration(wt->p99_s, b, sizeof(b)),
                 sim_duration(wt->max_s, x, sizeof(x)));
      printf(" %24s", cell);
    }
    printf("\n");
  }
  const struct sim_result *cq = &runs[SIM_CRONOQ].r;
  char blocked[16], waited[16];
  printf("  a device blocked the head (libcronoq): %s, for %s of the %s "
         "anyone waited (%.1f%%)\n",
         cq->head_device_blocked_s > 0 ? "yes" : "no",
         sim_duration(cq->head_device_blocked_s, blocked, sizeof(blocked)),
         sim_duration(cq->head_waiting_s, waited, sizeof(waited)),
         100 * blocked_share(cq));
  printf("\n");
}

/* Every value of one pool's runs, for the CSV and JSON; `prefix` names
 * the seed when there are several. */
static void record_values(const char *group, const char *prefix,
                          struct policy_run *runs) {
  unsigned reps = sim_reps();
  for (int p = 0; p < SIM_POLICIES; p++) {
    const struct sim_result *r = &runs[p].r;
    const char *pn = sim_policy_name(p);
    char name[128];
#define VALUE(label, unit, v)                                                  \
  do {                                                                         \
    snprintf(name, sizeof(name), "%s%s %s", prefix, pn, label);                \
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
      snprintf(label, sizeof(label), "%s wait p50", sim_class_name(c));
      VALUE(label, "s", r->wait[c].p50_s);
      snprintf(label, sizeof(label), "%s wait p99", sim_class_name(c));
      VALUE(label, "s", r->wait[c].p99_s);
      snprintf(label, sizeof(label), "%s wait max", sim_class_name(c));
      VALUE(label, "s", r->wait[c].max_s);
    }
    VALUE("head blocked by a device", "s", r->head_device_blocked_s);
    VALUE("time anyone waited", "s", r->head_waiting_s);
    if (n_seeds() == 1)
      VALUE("wall time", "s", cqb_summarise(runs[p].wall, (int)reps).med);
#undef VALUE
    if (n_seeds() > 1)
      continue;
    double dps[64];
    for (unsigned i = 0; i < reps; i++)
      dps[i] = runs[p].cpu[i] > 0 ? (double)r->decisions / runs[p].cpu[i] : 0;
    snprintf(name, sizeof(name), "%s decisions per CPU second", pn);
    cqb_figure(group, name, "1/s", cqb_summarise(dps, (int)reps), NULL, NULL,
               0);
  }
}

/* ------------------------------------------------------------------------ */
/* Goals                                                                     */
/* ------------------------------------------------------------------------ */

/* What a goal compares. */
enum metric {
  M_GPU_USE,
  M_MAKESPAN,
  M_BOUND, /* the run's lower bound on its makespan */
  M_CPU_P99,
  M_FRAC_P99,
  M_SMALL_P99,
  M_MULTI_MAX
};

static double metric(const struct sim_result *r, enum metric m) {
  switch (m) {
  case M_GPU_USE:
    return r->util_gpu;
  case M_MAKESPAN:
    return r->makespan_s;
  case M_BOUND:
    return r->lower_bound_s;
  case M_CPU_P99:
    return r->wait[SIM_CPU_ONLY].p99_s;
  case M_FRAC_P99:
    return r->wait[SIM_FRACTIONAL].p99_s;
  case M_SMALL_P99:
    return r->small.p99_s;
  case M_MULTI_MAX:
    return r->wait[SIM_MULTI].max_s;
  }
  return 0;
}

/*
 * A goal: metric `m` of run `run` against metric `base_m` of run `base`
 * (indices into a seed's runs: policies for the sim suite, the sweep's
 * runs for backfill), a ceiling on their ratio (a floor when negative, none
 * when 0). `blocked`: over several seeds, the worst seed where a device
 * blocked the head is held to the bound as well as the median.
 */
struct goal_def {
  const char *pool;
  const char *name;  /* as the figures table shows it */
  const char *label; /* its column in the per-seed table */
  const char *unit;
  int run;
  enum metric m;
  const char *base_name;
  int base;
  enum metric base_m;
  double bound;
  bool blocked;
};

static double ratio_of(double v, double b) {
  /* As the harness does: both zero is no difference, more is infinite. */
  return b > 0 ? v / b : v > 0 ? INFINITY : 0;
}

static double goal_ratio(const struct goal_def *g,
                         const struct sim_result *runs) {
  return ratio_of(metric(&runs[g->run], g->m),
                  metric(&runs[g->base], g->base_m));
}

/* One seed: each goal of the pool against its baseline, as figures. */
static void goals_one_seed(const char *group, const struct pool_shape *shape,
                           const struct goal_def *goals, size_t n,
                           const struct sim_result *runs) {
  for (size_t i = 0; i < n; i++) {
    const struct goal_def *g = &goals[i];
    if (strcmp(g->pool, shape->name) != 0)
      continue;
    double v = metric(&runs[g->run], g->m);
    double b = metric(&runs[g->base], g->base_m);
    struct cqb_stat vs = {v, v, v}, bs = {b, b, b};
    if (g->bound < 0)
      cqb_figure_min(group, g->name, g->unit, vs, g->base_name, &bs, -g->bound);
    else
      cqb_figure(group, g->name, g->unit, vs, g->base_name, &bs, g->bound);
  }
}

/* Several seeds' runs of one pool, `stride` results apart. */
struct seed_set {
  const struct sim_result *runs;
  size_t stride;
  unsigned n;
  int blocked_run; /* the run whose head the "device blocked" flag is of */
};

static const struct sim_result *seed_runs(const struct seed_set *ss,
                                          unsigned k) {
  return ss->runs + (size_t)k * ss->stride;
}

static bool seed_blocked(const struct seed_set *ss, unsigned k) {
  return seed_runs(ss, k)[ss->blocked_run].head_device_blocked_s > 0;
}

/* The worst ratio of goal `g` over the seeds (the flagged ones only when
 * `only_blocked`); NAN when there is none. */
static double worst_ratio(const struct goal_def *g, const struct seed_set *ss,
                          bool only_blocked) {
  double worst = NAN;
  for (unsigned k = 0; k < ss->n; k++) {
    if (only_blocked && !seed_blocked(ss, k))
      continue;
    double r = goal_ratio(g, seed_runs(ss, k));
    if (isnan(worst) || (g->bound < 0 ? r < worst : r > worst))
      worst = r;
  }
  return worst;
}

static void print_ratio(double r) {
  if (isnan(r))
    printf(" %14s", "-");
  else
    printf(" %14.2f", r);
}

/*
 * Several seeds: a table of every goal's ratio per seed, its median and
 * its worst; then each goal's median as a figure held to the bound, and
 * the worst as a figure beside it (held to the bound too where the goal
 * asks it of every seed where a device blocked the head).
 */
static void goals_seeds(const char *group, const struct pool_shape *shape,
                        const struct goal_def *goals, size_t n,
                        const struct seed_set *ss) {
  const struct goal_def *mine[32];
  size_t m = 0;
  for (size_t i = 0; i < n && m < 32; i++)
    if (strcmp(goals[i].pool, shape->name) == 0)
      mine[m++] = &goals[i];
  printf("  per seed, each goal's ratio to its baseline in the same seed (* "
         "worst: over the seeds where a device blocked the head):\n");
  printf("  %-6s %-16s", "seed", "device-blocked");
  for (size_t i = 0; i < m; i++) {
    char label[32];
    snprintf(label, sizeof(label), "%s%s", mine[i]->label,
             mine[i]->blocked ? "*" : "");
    printf(" %14s", label);
  }
  printf("\n");
  unsigned blocked = 0;
  for (unsigned k = 0; k < ss->n; k++) {
    const struct sim_result *runs = seed_runs(ss, k);
    char flag[32];
    snprintf(flag, sizeof(flag), "%-3s %5.1f%%",
             seed_blocked(ss, k) ? "yes" : "no",
             100 * blocked_share(&runs[ss->blocked_run]));
    blocked += seed_blocked(ss, k);
    printf("  %-6llu %-16s", (unsigned long long)(cqb_sim_opts.seed + k), flag);
    for (size_t i = 0; i < m; i++)
      print_ratio(goal_ratio(mine[i], runs));
    printf("\n");
  }
  double ratios[CQB_SEEDS_MAX];
  struct cqb_stat med[32];
  printf("  %-23s", "median");
  for (size_t i = 0; i < m; i++) {
    for (unsigned k = 0; k < ss->n; k++)
      ratios[k] = goal_ratio(mine[i], seed_runs(ss, k));
    med[i] = cqb_summarise(ratios, (int)ss->n);
    print_ratio(med[i].med);
  }
  printf("\n  %-23s", "worst");
  for (size_t i = 0; i < m; i++)
    print_ratio(worst_ratio(mine[i], ss, mine[i]->blocked));
  printf("\n  a device blocked the head in %u of %u seeds\n\n", blocked, ss->n);

  for (size_t i = 0; i < m; i++) {
    const struct goal_def *g = mine[i];
    char name[128], base[96];
    snprintf(base, sizeof(base), "%s, same seed", g->base_name);
    snprintf(name, sizeof(name), "%s (median)", g->name);
    cqb_ratio(group, name, med[i], base, g->bound);
    double w = worst_ratio(g, ss, g->blocked);
    if (isnan(w))
      continue; /* no seed where a device blocked the head */
    struct cqb_stat ws = {w, w, w};
    snprintf(name, sizeof(name), "%s (worst%s)", g->name,
             g->blocked ? "*" : "");
    cqb_ratio(group, name, ws, base, g->blocked ? g->bound : 0);
  }
  cqb_note("%s: goals over %u seeds are held to the median; (worst) is the "
           "worst seed, (worst*) the worst of the seeds where a device "
           "blocked the head (%u of them), held to the bound too",
           group, ss->n, blocked);
}

/* The goals of either kind, for one seed or several. */
static void goals_record(const char *group, const struct pool_shape *shape,
                         const struct goal_def *goals, size_t n,
                         const struct seed_set *ss) {
  if (ss->n == 1)
    goals_one_seed(group, shape, goals, n, ss->runs);
  else
    goals_seeds(group, shape, goals, n, ss);
}

/*
 * The sim suite's goals, against the baselines measured in the same run.
 * The two pools have different goals (see bench/README.md): the rack's
 * test the reservation against greedy and FIFO, the machine's that
 * draining for whole-machine jobs costs nothing over FIFO.
 */
static const struct goal_def SIM_GOALS[] = {
    {"machine", "libcronoq GPU utilisation", "gpu/greedy", "fraction",
     SIM_CRONOQ, M_GPU_USE, "greedy", SIM_GREEDY, M_GPU_USE, 0, false},
    {"machine", "libcronoq makespan", "makespan/fifo", "s", SIM_CRONOQ,
     M_MAKESPAN, "strict-fifo", SIM_FIFO, M_MAKESPAN, 1.00, true},
    {"machine", "libcronoq p99 wait, CPU-only", "cpu-p99/fifo", "s", SIM_CRONOQ,
     M_CPU_P99, "strict-fifo", SIM_FIFO, M_CPU_P99, 0.6, false},
    {"machine", "staged p99 wait, CPU-only", "staged-cpu/fifo", "s",
     SIM_CRONOQ_STAGED, M_CPU_P99, "strict-fifo", SIM_FIFO, M_CPU_P99, 0,
     false},
    {"machine", "libcronoq max wait, multi-GPU", "multi-max/fifo", "s",
     SIM_CRONOQ, M_MULTI_MAX, "strict-fifo", SIM_FIFO, M_MULTI_MAX, 1.00, true},
    {"machine", "greedy max wait, multi-GPU", "greedy-multi", "s", SIM_GREEDY,
     M_MULTI_MAX, "strict-fifo", SIM_FIFO, M_MULTI_MAX, 0, false},
    {"rack", "libcronoq GPU utilisation", "gpu/greedy", "fraction", SIM_CRONOQ,
     M_GPU_USE, "greedy", SIM_GREEDY, M_GPU_USE, -0.98, false},
    {"rack", "libcronoq makespan", "makespan/bound", "s", SIM_CRONOQ,
     M_MAKESPAN, "lower bound", SIM_CRONOQ, M_BOUND, 1.03, false},
    {"rack", "libcronoq p99 wait, CPU-only", "cpu-p99/fifo", "s", SIM_CRONOQ,
     M_CPU_P99, "strict-fifo", SIM_FIFO, M_CPU_P99, 0.22, false},
    {"rack", "staged p99 wait, CPU-only", "staged-cpu/fifo", "s",
     SIM_CRONOQ_STAGED, M_CPU_P99, "strict-fifo", SIM_FIFO, M_CPU_P99, 0.03,
     false},
    {"rack", "libcronoq max wait, multi-GPU", "multi-max/fifo", "s", SIM_CRONOQ,
     M_MULTI_MAX, "strict-fifo", SIM_FIFO, M_MULTI_MAX, 1.25, false},
    {"rack", "greedy max wait, multi-GPU", "greedy-multi", "s", SIM_GREEDY,
     M_MULTI_MAX, "strict-fifo", SIM_FIFO, M_MULTI_MAX, 0, false},
    {"rack", "libcronoq p99 wait, fractional", "frac-p99/fifo", "s", SIM_CRONOQ,
     M_FRAC_P99, "strict-fifo", SIM_FIFO, M_FRAC_P99, 1.00, false},
};
#define N_SIM_GOALS (sizeof(SIM_GOALS) / sizeof(SIM_GOALS[0]))

/* ------------------------------------------------------------------------ */
/* Event logs                                                                */
/* ------------------------------------------------------------------------ */

/* The longest wait of the log's class under run `run` against FIFO's run
 * `fifo` of the same seed. */
static double explain_ratio(const struct sim_result *runs, int run, int fifo) {
  int c = cqb_sim_opts.explain_class;
  const struct sim_waits *a =
      c == SIM_SMALL ? &runs[run].small : &runs[run].wait[c];
  const struct sim_waits *b =
      c == SIM_SMALL ? &runs[fifo].small : &runs[fifo].wait[c];
  return ratio_of(a->max_s, b->max_s);
}

/* The seed of the log: the one where the class's longest wait under `run`
 * is longest against FIFO's, the first among equals. */
static unsigned explain_seed(const struct seed_set *ss, int run, int fifo) {
  unsigned best = 0;
  for (unsigned k = 1; k < ss->n; k++)
    if (explain_ratio(seed_runs(ss, k), run, fifo) >
        explain_ratio(seed_runs(ss, best), run, fifo))
      best = k;
  return best;
}

/* Run `policy` on `w` once more, recording its events, and print the log
 * of the class the options name. */
static void explain(const char *title, const struct workload *w,
                    const struct pool_shape *shape, int policy) {
  const struct cqb_sim_opts *o = &cqb_sim_opts;
  struct sim_events events = {NULL, 0};
  struct sim_opts so = run_opts(policy);
  so.events = &events;
  struct sim_result r;
  if (sim_run(w, shape, &so, &r) != 0)
    cqb_fail("event log: %s on %s: the run's books do not balance",
             sim_policy_name(policy), shape->name);
  printf("== event log: %s, %s\n", title, sim_policy_name(policy));
  if (sim_explain(stdout, w, &events, o->explain_class, o->explain_window_ms,
                  EXPLAIN_ROWS) != 0)
    printf("  no %s job ran\n", sim_class_name(o->explain_class));
  printf("\n");
  sim_events_free(&events);
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
    fprintf(script, "set title '%s'\n", sim_class_name(c));
    int plotted = 0;
    for (int p = 0; p < SIM_POLICIES; p++) {
      const struct sim_waits *wt = &runs[p].r.wait[c];
      if (wt->jobs == 0)
        continue;
      snprintf(name, sizeof(name), "waits-%s-%s-%s.dat", shape->name,
               sim_class_name(c), sim_policy_name(p));
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
/* The sim suite                                                             */
/* ------------------------------------------------------------------------ */

/* The workload of `shape` for seed `seed` at the suite's load, or exit. */
static void sim_workload(struct workload *w, const struct pool_shape *shape,
                         double load, uint64_t seed, char *what, size_t len,
                         const char *suite) {
  if (build_workload(w, shape, load, seed, what, len) != 0)
    cqb_fail("%s: cannot build the workload%s%s", suite,
             cqb_sim_opts.trace ? " from " : "",
             cqb_sim_opts.trace ? cqb_sim_opts.trace : "");
}

static void free_runs(struct policy_run *runs) {
  for (int p = 0; p < SIM_POLICIES; p++) {
    if (runs[p].timeline != NULL)
      fclose(runs[p].timeline);
    for (int c = 0; c < SIM_CLASSES; c++)
      free(runs[p].waits[c]);
  }
}

/* One pool: every seed through every policy, its tables and figures. */
static void sim_pool(const struct pool_shape *shape, const char *dir,
                     FILE *script) {
  const struct cqb_sim_opts *o = &cqb_sim_opts;
  unsigned seeds = n_seeds();
  char group[32];
  snprintf(group, sizeof(group), "sim %s%s", shape->name,
           o->trace != NULL ? " (trace)" : "");
  struct sim_result *all = calloc((size_t)seeds * SIM_POLICIES, sizeof(*all));
  if (all == NULL)
    cqb_fail("out of memory");
  char what[512];
  for (unsigned k = 0; k < seeds; k++) {
    struct workload w;
    sim_workload(&w, shape, o->load, o->seed + k, what, sizeof(what), "sim");
    struct policy_run runs[SIM_POLICIES];
    memset(runs, 0, sizeof(runs));
    for (int p = 0; p < SIM_POLICIES; p++) {
      run_policy(&w, shape, p, &runs[p], dir != NULL);
      all[(size_t)k * SIM_POLICIES + (size_t)p] = runs[p].r;
    }
    char prefix[32] = "";
    if (seeds > 1)
      snprintf(prefix, sizeof(prefix),
               "seed %llu: ", (unsigned long long)(o->seed + k));
    else
      print_tables(shape, what, runs);
    record_values(group, prefix, runs);
    if (dir != NULL)
      write_charts_data(dir, shape, runs, script);
    free_runs(runs);
    wl_free(&w);
  }
  if (seeds > 1)
    printf("== sim: %s pool (%u GPUs, %lld vCPUs, %lld GiB); %s\n", shape->name,
           shape->gpus, (long long)(shape->cpu_milli / 1000),
           (long long)(shape->memory_mib / 1024), what);
  struct seed_set ss = {all, SIM_POLICIES, seeds, SIM_CRONOQ};
  goals_record(group, shape, SIM_GOALS, N_SIM_GOALS, &ss);
  cqb_print_figures();
  printf("\n");
  if (o->explain_class >= 0) {
    int policy = o->explain_policy >= 0 ? o->explain_policy : SIM_CRONOQ;
    unsigned k = explain_seed(&ss, policy, SIM_FIFO);
    struct workload w;
    sim_workload(&w, shape, o->load, o->seed + k, what, sizeof(what), "sim");
    char title[96];
    snprintf(title, sizeof(title), "sim %s, seed %llu", shape->name,
             (unsigned long long)(o->seed + k));
    explain(title, &w, shape, policy);
    wl_free(&w);
  }
  free(all);
}

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
    sim_pool(&resized, dir, script);
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
#define N_SWEEP (N_BASES + N_VARIANTS) /* a seed's runs at one load */

/* The sweep's runs of a seed: the bases, then backfill with each kind of
 * limits. */
enum { B_CRONOQ, B_FIFO, B_GREEDY, B_F13, B_F1, B_F110, B_NONE5 };

/* The loads swept: --load's alone, or all three. */
static size_t sweep_loads(const double **loads) {
  static double one;
  if (cqb_sim_opts.load > 0) {
    one = cqb_sim_opts.load;
    *loads = &one;
    return 1;
  }
  *loads = SWEEP_LOADS;
  return N_LOADS;
}

int cqb_backfill_plan(void) {
  const double *loads;
  size_t n = sweep_loads(&loads);
  return selected_shapes() * (int)(n * N_SWEEP * n_seeds());
}

static struct sim_result sweep_run(const struct workload *w,
                                   const struct pool_shape *shape, int policy) {
  struct sim_opts so = run_opts(policy);
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

/* Give the jobs the limits of variant `v`. */
static void variant_limits(struct workload *w, size_t v, uint64_t seed) {
  wl_hold_limits(w, VARIANTS[v].lo, VARIANTS[v].hi, VARIANTS[v].none, seed + 2);
}

static void sweep_row(uint64_t seed, double load, const char *limits,
                      const struct sim_result *r) {
  char mw[16], sp[16], cp[16];
  if (n_seeds() > 1)
    printf("  %4llu", (unsigned long long)seed);
  printf("  %4.2f  %-20s %-19s %5.3f %8.3f %10s %10s %10s %8llu %6llu\n", load,
         limits, sim_policy_name(r->policy), r->util_gpu,
         r->makespan_s / r->lower_bound_s,
         sim_duration(r->wait[SIM_MULTI].max_s, mw, sizeof(mw)),
         sim_duration(r->small.p99_s, sp, sizeof(sp)),
         sim_duration(r->wait[SIM_CPU_ONLY].p99_s, cp, sizeof(cp)),
         (unsigned long long)r->backfilled, (unsigned long long)r->late_heads);
}

/* Every value of one run, for the CSV and JSON. */
static void sweep_values(const char *group, uint64_t seed, double load,
                         const char *limits, const struct sim_result *r) {
  char prefix[128], name[192], seed_part[32] = "";
  if (n_seeds() > 1)
    snprintf(seed_part, sizeof(seed_part), ", seed %llu",
             (unsigned long long)seed);
  snprintf(prefix, sizeof(prefix), "%s, load %.2f%s%s%s",
           sim_policy_name(r->policy), load, seed_part, limits ? ", " : "",
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

/* The backfill goals, at load 0.8. */
static const struct goal_def BACKFILL_GOALS[] = {
    {"machine", "GPU use, f in [1,3]", "gpu/greedy", "fraction", B_F13,
     M_GPU_USE, "greedy", B_GREEDY, M_GPU_USE, -1.00, false},
    {"machine", "makespan, f in [1,3]", "makespan/bound", "s", B_F13,
     M_MAKESPAN, "lower bound", B_F13, M_BOUND, 1.10, false},
    {"machine", "makespan vs greedy, f in [1,3]", "makespan/greedy", "s", B_F13,
     M_MAKESPAN, "greedy", B_GREEDY, M_MAKESPAN, 1.00, false},
    {"machine", "multi-GPU max wait, f in [1,3]", "multi-max/fifo", "s", B_F13,
     M_MULTI_MAX, "strict-fifo", B_FIFO, M_MULTI_MAX, 0.55, false},
    {"machine", "small p99 wait, f in [1,3]", "small-p99/fifo", "s", B_F13,
     M_SMALL_P99, "strict-fifo", B_FIFO, M_SMALL_P99, 0.30, false},
    {"machine", "GPU use, 5% without limit", "5%:gpu/greedy", "fraction",
     B_NONE5, M_GPU_USE, "greedy", B_GREEDY, M_GPU_USE, -0.95, false},
    {"machine", "multi-GPU max wait, 5% without", "5%:multi/fifo", "s", B_NONE5,
     M_MULTI_MAX, "strict-fifo", B_FIFO, M_MULTI_MAX, 0.65, false},
    {"rack", "makespan, f in [1,3]", "makespan/bound", "s", B_F13, M_MAKESPAN,
     "lower bound", B_F13, M_BOUND, 1.02, false},
    {"rack", "CPU-only p99 wait, f in [1,3]", "cpu-p99/fifo", "s", B_F13,
     M_CPU_P99, "strict-fifo", B_FIFO, M_CPU_P99, 0.16, false},
};
#define N_BACKFILL_GOALS (sizeof(BACKFILL_GOALS) / sizeof(BACKFILL_GOALS[0]))

/* The sweep's run that follows `policy` for the event log (backfill: with
 * f in [1,3]), or exit if the sweep has none. */
static int sweep_index(int policy) {
  if (policy < 0 || policy == SIM_CRONOQ_BACKFILL)
    return B_F13;
  for (size_t b = 0; b < N_BASES; b++)
    if (BASES[b] == policy)
      return (int)b;
  cqb_fail("--event-policy %s: the backfill sweep runs libcronoq, "
           "strict-fifo, greedy and libcronoq-backfill",
           sim_policy_name(policy));
}

/* One seed at one load: every run of the sweep, its rows and values. */
static void sweep_seed(const char *group, const struct pool_shape *shape,
                       double load, uint64_t seed, struct sim_result *runs,
                       bool *header) {
  struct workload w;
  char what[512];
  sim_workload(&w, shape, load, seed, what, sizeof(what), "backfill");
  if (!*header) {
    printf("== backfill: %s pool (%u GPUs, %lld vCPUs, %lld GiB); %s\n",
           shape->name, shape->gpus, (long long)(shape->cpu_milli / 1000),
           (long long)(shape->memory_mib / 1024), what);
    if (n_seeds() > 1)
      printf("  %4s", "seed");
    printf("  %4s  %-20s %-19s %5s %8s %10s %10s %10s %8s %6s\n", "load",
           "limits", "policy", "gpu", "/bound", "multi max", "small p99",
           "cpu p99", "backfill", "late");
    *header = true;
  }
  for (size_t b = 0; b < N_BASES; b++) {
    runs[b] = sweep_run(&w, shape, BASES[b]);
    sweep_row(seed, load, "-", &runs[b]);
    sweep_values(group, seed, load, NULL, &runs[b]);
  }
  for (size_t v = 0; v < N_VARIANTS; v++) {
    variant_limits(&w, v, seed);
    runs[N_BASES + v] = sweep_run(&w, shape, SIM_CRONOQ_BACKFILL);
    sweep_row(seed, load, VARIANTS[v].name, &runs[N_BASES + v]);
    sweep_values(group, seed, load, VARIANTS[v].name, &runs[N_BASES + v]);
  }
  wl_free(&w);
}

static void backfill_pool(const struct pool_shape *shape) {
  const struct cqb_sim_opts *o = &cqb_sim_opts;
  unsigned seeds = n_seeds();
  const double *loads;
  size_t n_loads = sweep_loads(&loads);
  char group[32];
  snprintf(group, sizeof(group), "backfill %s%s", shape->name,
           o->trace != NULL ? " (trace)" : "");
  struct sim_result *all =
      calloc((size_t)seeds * n_loads * N_SWEEP, sizeof(*all));
  if (all == NULL)
    cqb_fail("out of memory");
  bool header = false;
  uint64_t late = 0;
  size_t goal_load = n_loads; /* the load the goals are at, if swept */
  for (size_t l = 0; l < n_loads; l++) {
    if (loads[l] == GOAL_LOAD)
      goal_load = l;
    for (unsigned k = 0; k < seeds; k++) {
      struct sim_result *runs = all + ((size_t)k * n_loads + l) * N_SWEEP;
      sweep_seed(group, shape, loads[l], o->seed + k, runs, &header);
      for (size_t v = 0; v < N_VARIANTS; v++)
        if (VARIANTS[v].none == 0)
          late += runs[N_BASES + v].late_heads;
    }
  }
  printf("  small: CPU-only and fractional jobs; late: heads granted after "
         "their shadow time\n\n");
  cqb_note("%s: %llu heads granted after their shadow time with honest "
           "limits (every variant but the one with jobs without a limit)",
           group, (unsigned long long)late);
  /* Load l of seed k is at all + (k * n_loads + l) * N_SWEEP. */
  struct seed_set ss = {NULL, n_loads * N_SWEEP, seeds, B_CRONOQ};
  if (goal_load < n_loads) {
    ss.runs = all + goal_load * N_SWEEP;
    goals_record(group, shape, BACKFILL_GOALS, N_BACKFILL_GOALS, &ss);
  }
  cqb_print_figures();
  printf("\n");
  if (o->explain_class >= 0) {
    size_t l = goal_load < n_loads ? goal_load : 0;
    int run = sweep_index(o->explain_policy);
    ss.runs = all + l * N_SWEEP;
    unsigned k = explain_seed(&ss, run, B_FIFO);
    struct workload w;
    char what[512];
    sim_workload(&w, shape, loads[l], o->seed + k, what, sizeof(what),
                 "backfill");
    if (run >= (int)N_BASES)
      variant_limits(&w, (size_t)run - N_BASES, o->seed + k);
    char title[128];
    snprintf(title, sizeof(title), "backfill %s, load %.2f, seed %llu%s%s",
             shape->name, loads[l], (unsigned long long)(o->seed + k),
             run >= (int)N_BASES ? ", " : "",
             run >= (int)N_BASES ? VARIANTS[run - (int)N_BASES].name : "");
    explain(title, &w, shape,
            run >= (int)N_BASES ? SIM_CRONOQ_BACKFILL : BASES[run]);
    wl_free(&w);
  }
  free(all);
}

void cqb_backfill(void) {
  for (size_t i = 0; i < N_SHAPES; i++) {
    if (!shape_selected(SHAPES[i]))
      continue;
    struct pool_shape resized = shape_as_asked(SHAPES[i]);
    backfill_pool(&resized);
  }
}
