/*
 * The bench harness: see harness.h.
 */
#include "harness.h"

#include <cronoq/cronoq.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef CRONOQ_BUILD_TYPE
#define CRONOQ_BUILD_TYPE "unknown"
#endif

struct cqb_opts cqb_opts = {CQB_DEFAULT,    0,      NULL, NULL, 0,
                            "cronoq-bench", "bench"};

struct figure {
  char group[32];
  char name[96];
  char unit[16];
  struct cqb_stat s;
  char base_name[64];
  struct cqb_stat base;
  int has_base;
  double ratio;
  double goal;
  int goal_is_min; /* the goal is a floor on the ratio, not a ceiling */
  int quiet;       /* in the CSV and JSON only, not in the table */
};

static struct figure *figures;
static size_t n_figures, cap_figures;
static char notes[64][256];
static int n_notes;

int64_t cqb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

struct cqb_stat cqb_summarise(const double *values, int n) {
  double v[64];
  if (n > 64)
    n = 64;
  memcpy(v, values, (size_t)n * sizeof(v[0]));
  qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
  struct cqb_stat s = {v[n / 2], v[0], v[n - 1]};
  if (n % 2 == 0)
    s.med = (v[n / 2 - 1] + v[n / 2]) / 2;
  return s;
}

static int reps_wanted(void) {
  return cqb_opts.reps < 1 ? 1 : cqb_opts.reps > 64 ? 64 : cqb_opts.reps;
}

static double one_rep(const char *what, cqb_rep_fn fn, void *arg) {
  double v = fn(arg);
  if (v < 0)
    cqb_fail("%s: the benchmark's own check failed", what);
  return v;
}

struct cqb_stat cqb_measure(const char *what, cqb_rep_fn fn, void *arg) {
  double v[64];
  int reps = reps_wanted();
  for (int i = 0; i < reps; i++)
    v[i] = one_rep(what, fn, arg);
  return cqb_summarise(v, reps);
}

void cqb_measure_turns(struct cqb_turn *turns, int n) {
  double v[8][64];
  int reps = reps_wanted();
  if (n > 8)
    cqb_fail("cqb_measure_turns: %d measurements, at most 8", n);
  for (int i = 0; i < reps; i++)
    for (int t = 0; t < n; t++)
      v[t][i] = one_rep(turns[t].what, turns[t].fn, turns[t].arg);
  for (int t = 0; t < n; t++)
    turns[t].stat = cqb_summarise(v[t], reps);
}

void cqb_figure(const char *group, const char *name, const char *unit,
                struct cqb_stat s, const char *base_name,
                const struct cqb_stat *base, double goal_max_ratio) {
  if (n_figures == cap_figures) {
    cap_figures = cap_figures ? cap_figures * 2 : 64;
    figures = realloc(figures, cap_figures * sizeof(*figures));
    if (figures == NULL)
      cqb_fail("out of memory");
  }
  struct figure *f = &figures[n_figures++];
  memset(f, 0, sizeof(*f));
  snprintf(f->group, sizeof(f->group), "%s", group);
  snprintf(f->name, sizeof(f->name), "%s", name);
  snprintf(f->unit, sizeof(f->unit), "%s", unit);
  f->s = s;
  if (base != NULL) {
    f->has_base = 1;
    f->base = *base;
    snprintf(f->base_name, sizeof(f->base_name), "%s", base_name);
    /* Against a zero baseline: both zero is no difference (0, so that
     * a ceiling counts as met); anything more is infinitely worse. */
    f->ratio = base->med > 0 ? s.med / base->med : s.med > 0 ? INFINITY : 0;
  }
  f->goal = goal_max_ratio;
}

void cqb_figure_min(const char *group, const char *name, const char *unit,
                    struct cqb_stat s, const char *base_name,
                    const struct cqb_stat *base, double goal_min_ratio) {
  cqb_figure(group, name, unit, s, base_name, base, goal_min_ratio);
  figures[n_figures - 1].goal_is_min = 1;
}

void cqb_ratio(const char *group, const char *name, struct cqb_stat ratios,
               const char *base_name, double goal) {
  struct cqb_stat one = {1, 1, 1};
  cqb_figure(group, name, "x", ratios, base_name, &one,
             goal < 0 ? -goal : goal);
  figures[n_figures - 1].goal_is_min = goal < 0;
}

void cqb_value(const char *group, const char *name, const char *unit,
               double value) {
  struct cqb_stat s = {value, value, value};
  cqb_figure(group, name, unit, s, NULL, NULL, 0);
  figures[n_figures - 1].quiet = 1;
}

/* Equal within rounding counts as met: two sums of the same terms in
 * another order can differ in the last bits. */
static int goal_met(const struct figure *f) {
  double slack = 1e-9 * f->goal;
  return f->goal_is_min ? f->ratio >= f->goal - slack
                        : f->ratio <= f->goal + slack;
}

void cqb_note(const char *fmt, ...) {
  if (n_notes == 64)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(notes[n_notes++], sizeof(notes[0]), fmt, ap);
  va_end(ap);
}

void cqb_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "\n%s: ", cqb_opts.program);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(2);
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

double cqb_number_arg(const char *opt, const char *text, double lo, double hi) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= lo && v <= hi)) {
    fprintf(stderr, "%s: %s takes a number in [%g, %g], not '%s'\n",
            cqb_opts.program, opt, lo, hi, text);
    exit(2);
  }
  return v;
}

/* The common options: how many arguments argv[i] uses, 0 if none. */
static int parse_option(int argc, char **argv, int i) {
  const char *a = argv[i];
  const char *v = i + 1 < argc ? argv[i + 1] : NULL;
  if (strcmp(a, "--quick") == 0) {
    cqb_opts.size = CQB_QUICK;
  } else if (strcmp(a, "--full") == 0) {
    cqb_opts.size = CQB_FULL;
  } else if (strcmp(a, "--no-progress") == 0) {
    cqb_opts.progress = 0;
  } else if (strcmp(a, "--reps") == 0 && v != NULL) {
    cqb_opts.reps = atoi(v);
    if (cqb_opts.reps < 1 || cqb_opts.reps > 64) {
      fprintf(stderr, "%s: --reps takes 1..64\n", cqb_opts.program);
      exit(2);
    }
    return 2;
  } else if (strcmp(a, "--csv") == 0 && v != NULL) {
    cqb_opts.csv = v;
    return 2;
  } else if (strcmp(a, "--json") == 0 && v != NULL) {
    cqb_opts.json = v;
    return 2;
  } else {
    return 0;
  }
  return 1;
}

const char *cqb_parse_args(int argc, char **argv, const char *const *commands,
                           int (*more)(int argc, char **argv, int i),
                           void (*usage)(FILE *f)) {
  const char *cmd = commands[0];
  cqb_opts.progress = isatty(STDERR_FILENO);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *const *c = commands;
    while (*c != NULL && strcmp(a, *c) != 0)
      c++;
    int used;
    if (*c != NULL) {
      cmd = *c;
    } else if ((used = parse_option(argc, argv, i)) > 0 ||
               (used = more(argc, argv, i)) > 0) {
      i += used - 1;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\n\n", cqb_opts.program, a);
      usage(stderr);
      exit(2);
    }
  }
  if (cqb_opts.reps == 0)
    cqb_opts.reps = cqb_opts.size == CQB_QUICK ? 3 : 5;
  return cmd;
}

void cqb_options_usage(FILE *f) {
  fprintf(f, "  --quick        small sizes (seconds; used in CI)\n"
             "  --full         large sizes (minutes)\n"
             "  --reps N       repetitions per figure (default 5; quick 3)\n"
             "  --csv FILE     also write the figures as CSV\n"
             "  --json FILE    also write the figures as JSON\n"
             "  --no-progress  no progress bar on stderr\n"
             "  -h, --help     this text\n");
}

static void *nothing(void *arg) { return arg; }

void cqb_become_multithreaded(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, nothing, NULL) != 0 ||
      pthread_join(t, NULL) != 0)
    cqb_fail("cannot start a thread");
}

/* Pin the calling thread to one CPU (modulo the CPUs there are), so that
 * every handoff crosses the same way: one CPU to another. */
void cqb_pin_to(int cpu) {
#ifdef __linux__
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 2)
    return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % n, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#else
  (void)cpu;
#endif
}

void cqb_unpin(void) {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  for (long i = 0; i < n && i < CPU_SETSIZE; i++)
    CPU_SET(i, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#endif
}

/* ------------------------------------------------------------------------ */
/* Progress                                                                  */
/* ------------------------------------------------------------------------ */

static int progress_total, progress_done;
static int64_t progress_start;

void cqb_progress_plan(int steps) {
  progress_total = steps;
  progress_done = 0;
  progress_start = cqb_now_ns();
}

void cqb_progress_tick(const char *label) {
  progress_done++;
  if (!cqb_opts.progress || progress_total <= 0)
    return;
  int width = 30;
  int filled = progress_done * width / progress_total;
  double secs = (double)(cqb_now_ns() - progress_start) / 1e9;
  fprintf(stderr, "\r[%.*s%*s] %3d%% %5.1fs %-40.40s", filled,
          "##############################", width - filled, "",
          progress_done * 100 / progress_total, secs, label);
  if (progress_done == progress_total)
    fprintf(stderr, "\r%*s\r", width + 60, "");
  fflush(stderr);
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

static void cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL)
    return;
  char line[256];
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "model name", 10) == 0) {
      char *colon = strchr(line, ':');
      if (colon != NULL) {
        colon += 2;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, len, "%s", colon);
      }
      break;
    }
  }
  fclose(f);
}

static const char *size_name(void) {
  return cqb_opts.size == CQB_QUICK  ? "quick"
         : cqb_opts.size == CQB_FULL ? "full"
                                     : "default";
}

void cqb_print_header(void) {
  char cpu[128];
  cpu_model(cpu, sizeof(cpu));
  printf("libcronoq %s %s: %s run, %d repetitions per figure "
         "(median [min..max])\n",
         cq_version_string(), cqb_opts.title, size_name(), cqb_opts.reps);
  printf("machine: %s, %ld cores; build type: %s\n\n", cpu,
         sysconf(_SC_NPROCESSORS_ONLN), CRONOQ_BUILD_TYPE);
}

static const char *goal_mark(const struct figure *f) {
  if (f->goal <= 0 || !f->has_base)
    return "";
  return goal_met(f) ? "met" : "MISSED";
}

static size_t n_printed; /* figures already in a table */

void cqb_print_figures(void) {
  const char *group = "";
  for (size_t i = n_printed; i < n_figures; i++) {
    const struct figure *f = &figures[i];
    if (f->quiet)
      continue;
    if (strcmp(group, f->group) != 0) {
      group = f->group;
      printf("== %s\n", group);
      printf("  %-44s %12s %23s  %-7s %-30s %7s  %s\n", "figure", "median",
             "[min..max]", "unit", "baseline (median)", "ratio", "goal");
    }
    char range[64], base[96] = "", ratio[16] = "", goal[32] = "";
    snprintf(range, sizeof(range), "[%.4g..%.4g]", f->s.min, f->s.max);
    if (f->has_base) {
      snprintf(base, sizeof(base), "%s (%.4g)", f->base_name, f->base.med);
      snprintf(ratio, sizeof(ratio), "%.2fx", f->ratio);
    }
    if (f->goal > 0)
      snprintf(goal, sizeof(goal), "%s %.2fx %s",
               f->goal_is_min ? ">=" : "<=", f->goal, goal_mark(f));
    printf("  %-44s %12.4g %23s  %-7s %-30s %7s  %s\n", f->name, f->s.med,
           range, f->unit, base, ratio, goal);
  }
  n_printed = n_figures;
  fflush(stdout);
}

void cqb_print_notes(void) {
  if (n_notes > 0) {
    printf("\nnotes:\n");
    for (int i = 0; i < n_notes; i++)
      printf("  - %s\n", notes[i]);
  }
}

void cqb_print_summary(void) {
  int met = 0, missed = 0;
  for (size_t i = 0; i < n_figures; i++) {
    const struct figure *f = &figures[i];
    if (f->goal <= 0 || !f->has_base)
      continue;
    if (goal_met(f))
      met++;
    else
      missed++;
  }
  printf("\nsummary: %d of %d goals met, %d missed%s\n", met, met + missed,
         missed, missed > 0 ? " (marked MISSED above)" : "");
  if (missed > 0)
    printf("  A missed goal is a figure, not a failure: each goal is a ratio "
           "against a\n  baseline measured in this same run, and a loaded "
           "or small machine moves\n  some baselines more than the library. "
           "bench/README.md explains each\n  goal and the figures measured "
           "on a quiet machine.\n");
  printf("  The bench checked its own results: it exits 0 when they were "
         "right, and\n  non-zero only when one was wrong or it could not "
         "run.\n");
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

void cqb_write_outputs(void) {
  if (cqb_opts.csv != NULL) {
    FILE *f = fopen(cqb_opts.csv, "w");
    if (f == NULL)
      cqb_fail("cannot write %s", cqb_opts.csv);
    fprintf(f, "group,figure,unit,median,min,max,baseline,baseline_median,"
               "ratio,goal_ratio,goal\n");
    for (size_t i = 0; i < n_figures; i++) {
      const struct figure *x = &figures[i];
      fprintf(f, "\"%s\",\"%s\",%s,%.6g,%.6g,%.6g,\"%s\",", x->group, x->name,
              x->unit, x->s.med, x->s.min, x->s.max, x->base_name);
      if (x->has_base)
        fprintf(f, "%.6g,%.4f,", x->base.med, x->ratio);
      else
        fprintf(f, ",,");
      if (x->goal > 0)
        fprintf(f, "%s%.2f,%s\n", x->goal_is_min ? ">=" : "<=", x->goal,
                goal_mark(x));
      else
        fprintf(f, ",\n");
    }
    fclose(f);
  }
  if (cqb_opts.json != NULL) {
    FILE *f = fopen(cqb_opts.json, "w");
    if (f == NULL)
      cqb_fail("cannot write %s", cqb_opts.json);
    char cpu[128];
    cpu_model(cpu, sizeof(cpu));
    fprintf(f, "{\n  \"version\": ");
    json_str(f, cq_version_string());
    fprintf(f, ",\n  \"cpu\": ");
    json_str(f, cpu);
    fprintf(f, ",\n  \"cores\": %ld,\n  \"build_type\": ",
            sysconf(_SC_NPROCESSORS_ONLN));
    json_str(f, CRONOQ_BUILD_TYPE);
    fprintf(f, ",\n  \"size\": \"%s\",\n  \"repetitions\": %d,\n", size_name(),
            cqb_opts.reps);
    fprintf(f, "  \"figures\": [\n");
    for (size_t i = 0; i < n_figures; i++) {
      const struct figure *x = &figures[i];
      fprintf(f, "    {\"group\": ");
      json_str(f, x->group);
      fprintf(f, ", \"figure\": ");
      json_str(f, x->name);
      fprintf(f, ", \"unit\": ");
      json_str(f, x->unit);
      fprintf(f, ", \"median\": %.6g, \"min\": %.6g, \"max\": %.6g", x->s.med,
              x->s.min, x->s.max);
      if (x->has_base) {
        fprintf(f, ", \"baseline\": ");
        json_str(f, x->base_name);
        fprintf(f, ", \"baseline_median\": %.6g", x->base.med);
        if (isfinite(x->ratio))
          fprintf(f, ", \"ratio\": %.4f", x->ratio);
        else
          fprintf(f, ", \"ratio\": null"); /* JSON has no infinity */
      }
      if (x->goal > 0)
        fprintf(f, ", \"%s\": %.2f, \"goal_met\": %s",
                x->goal_is_min ? "goal_min_ratio" : "goal_max_ratio", x->goal,
                goal_met(x) ? "true" : "false");
      fprintf(f, "}%s\n", i + 1 < n_figures ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    fclose(f);
  }
}
