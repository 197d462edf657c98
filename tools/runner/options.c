/*
 * The command line: one table of options, from which both the parser and
 * --help are made, so that no option can be missing from the help (the
 * man page and the completion are checked against the help by a test).
 *
 *   cronoq-run [OPTION]... [JOBFILE]
 *   cronoq-run [OPTION]... COMMAND [WORD]... ::: ARG... [::: ARG...]...
 *   cronoq-run [OPTION]... COMMAND [WORD]... :::: ARGFILE...
 *   ... | cronoq-run [OPTION]... COMMAND [WORD]...
 *
 * Options come first, as with GNU parallel: the first word that is not an
 * option starts the input, and every word after it is the input's, so a
 * command's own options ("echo -n {}") are never taken for the runner's.
 * A word before it that starts with '-' and is not an option is refused,
 * never run. Short options bundle ("-kj4"). Then one word is a job file;
 * several words, one with a placeholder ({}, {1}, {#}, ...), or words
 * before an input source (":::", "::::", ":::+", "::::+") are a command
 * template, run once per combination of its sources' values.
 *
 * Every value is checked here, strictly, and a bad one is a usage error
 * (status 2) before anything runs.
 */
#include "runner.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CRONOQ_RUN_VERSION
#define CRONOQ_RUN_VERSION "unknown" /* set by the build */
#endif

enum opt_id {
  OPT_RESOURCES,
  OPT_POOL,
  OPT_NAMESPACE,
  OPT_NEW_NAMESPACE,
  OPT_JOBS,
  OPT_REQUEST,
  OPT_TIMEOUT,
  OPT_KILL_GRACE,
  OPT_RETRIES,
  OPT_HALT,
  OPT_JOBLOG,
  OPT_RESUME,
  OPT_RESUME_FAILED,
  OPT_GROUP,
  OPT_LINE_BUFFER,
  OPT_UNGROUP,
  OPT_TAG,
  OPT_RESULTS,
  OPT_PROGRESS,
  OPT_BAR,
  OPT_ETA,
  OPT_NO_PROGRESS,
  OPT_SUMMARY,
  OPT_JSON,
  OPT_FOLLOW,
  OPT_ARG_FILE,
  OPT_MAX_ARGS,
  OPT_MAX_REPLACE_ARGS,
  OPT_CONTEXT_REPLACE,
  OPT_COLSEP,
  OPT_KEEP_ORDER,
  OPT_DELAY,
  OPT_DRY_RUN,
  OPT_GPU_POOL,
  OPT_DEVICE_ENV,
  OPT_VERSION,
  OPT_HELP
};

struct opt_def {
  enum opt_id id;
  const char *name; /* without the leading "--"; NULL: none (-N, -X, as
                       GNU parallel has them) */
  char short_name;  /* 0: none */
  const char *arg;  /* NULL: a flag */
  const char *help; /* lines after the first are indented */
};

static const struct opt_def opts[] = {
    {OPT_RESOURCES, "resources", 'r', "SPEC",
     "what there is, e.g. gpu=auto,db=10,mem_mib=24576\n"
     "(gpu=4: four devices, no GPU needed; NAME:class=N:\n"
     "at most N jobs of a class; NAME:devices=N: another\n"
     "device pool)"},
    {OPT_POOL, "pool", 0, "URL",
     "share the pool with every runner of the namespace on\n"
     "a Redis server (redis://host:port/db, unix:///path);\n"
     "-j stays this runner's own"},
    {OPT_NAMESPACE, "namespace", 0, "NAME",
     "the namespace of --pool (default: cronoq-run)"},
    {OPT_NEW_NAMESPACE, "new-namespace", 0, NULL,
     "for a namespace no process used before: grant at\n"
     "once, without the quarantine of a new namespace"},
    {OPT_JOBS, "jobs", 'j', "N|P%|+N|-N",
     "at most N jobs that name nothing at once; P% of the\n"
     "CPUs, or N more or fewer than them (0: no limit;\n"
     "default: one per CPU); this runner's own"},
    {OPT_REQUEST, "request", 0, "SPEC",
     "what a job that names nothing asks, e.g. gpu=0.5\n"
     "(default: jobs=1, one of the -j slots)"},
    {OPT_TIMEOUT, "timeout", 0, "DURATION",
     "stop a job that runs longer: seconds (90, 1.5) or\n"
     "with a unit (90s, 15m, 2h, 1d); a line's timeout=\n"
     "overrides it; a job with a limit may backfill"},
    {OPT_KILL_GRACE, "kill-grace", 0, "DURATION",
     "from SIGTERM to SIGKILL when a job is stopped (2)"},
    {OPT_RETRIES, "retries", 0, "N",
     "run a failed job again, up to N more times; a retry\n"
     "queues again"},
    {OPT_HALT, "halt", 0, "WHEN",
     "stop once jobs fail: soon,fail=N (start no more),\n"
     "now,fail=N (also stop the running ones), fail=P%\n"
     "(of all the jobs), never (the default)"},
    {OPT_JOBLOG, "joblog", 0, "FILE",
     "a line per job, tab separated, in GNU parallel's\n"
     "format, with the grant after"},
    {OPT_RESUME, "resume", 0, NULL, "skip the jobs the joblog has"},
    {OPT_RESUME_FAILED, "resume-failed", 0, NULL,
     "skip the jobs the joblog has as succeeded"},
    {OPT_GROUP, "group", 0, NULL, "print each job's output whole when it ends"},
    {OPT_LINE_BUFFER, "line-buffer", 0, NULL,
     "print each job's output in whole lines as it comes"},
    {OPT_UNGROUP, "ungroup", 'u', NULL,
     "let the jobs write to stdout and stderr directly"},
    {OPT_TAG, "tag", 0, NULL, "start each line of output with the job's label"},
    {OPT_RESULTS, "results", 0, "DIR",
     "write each job's output to DIR/SEQ/stdout and\n"
     "DIR/SEQ/stderr instead of printing it"},
    {OPT_PROGRESS, "progress", 0, NULL,
     "a progress line on stderr, also off a terminal"},
    {OPT_BAR, "bar", 0, NULL, "the same as --progress"},
    {OPT_ETA, "eta", 0, NULL, "the same as --progress"},
    {OPT_NO_PROGRESS, "no-progress", 0, NULL, "no progress line"},
    {OPT_SUMMARY, "summary", 0, "failed|full|none",
     "the jobs the summary on stderr lists, with the\n"
     "totals (default: failed; full: every job)"},
    {OPT_JSON, "json", 0, "FILE",
     "the summary as one JSON document in FILE (\"-\":\n"
     "stdout, and the jobs' stdout goes to stderr)"},
    {OPT_FOLLOW, "follow", 0, NULL,
     "start jobs as their lines arrive on a pipe or FIFO,\n"
     "until it ends"},
    {OPT_ARG_FILE, "arg-file", 'a', "FILE",
     "an input source: the lines of FILE (:::: FILE)"},
    {OPT_MAX_ARGS, "max-args", 'n', "N",
     "N values per job, {1} to {N} (0: one, inserted\n"
     "as none)"},
    {OPT_MAX_REPLACE_ARGS, NULL, 'N', "N", "the same as -n"},
    {OPT_CONTEXT_REPLACE, NULL, 'X', NULL,
     "the values spread evenly over the -j slots; a word\n"
     "with {} is repeated once per value in its job"},
    {OPT_COLSEP, "colsep", 'C', "REGEX",
     "split each value into columns {1}, {2}, ... at REGEX\n"
     "(extended; \\t: a tab), blanks trimmed"},
    {OPT_KEEP_ORDER, "keep-order", 'k', NULL,
     "print the jobs' output in input order"},
    {OPT_DELAY, "delay", 0, "DURATION",
     "start no two jobs closer together than DURATION"},
    {OPT_DRY_RUN, "dry-run", 0, NULL, "print each job's command, run none"},
    {OPT_GPU_POOL, "gpu-pool", 0, "NAME",
     "the device pool of CUDA_VISIBLE_DEVICES and\n"
     "CRONOQ_GPU_FRACTION (default: gpu)"},
    {OPT_DEVICE_ENV, "device-env", 0, "POOL=VAR",
     "also set VAR to the ids of the job's devices on\n"
     "POOL (HIP_VISIBLE_DEVICES, ...); repeatable"},
    {OPT_VERSION, "version", 0, NULL, "the runner's and the library's version"},
    {OPT_HELP, "help", 'h', NULL, "this text"},
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

static const char usage_head[] =
    "usage: cronoq-run [OPTION]... [JOBFILE]\n"
    "       cronoq-run [OPTION]... COMMAND [WORD]... ::: ARG... [::: ARG...]\n"
    "       cronoq-run [OPTION]... COMMAND [WORD]... :::: ARGFILE...\n"
    "\n"
    "Run jobs, each as soon as the resources it asks for are free.\n"
    "Options come before the command; every word after it is its own.\n"
    "\n";

static const char usage_tail[] =
    "\n"
    "A job file has one job per line: a request spec, \" -- \", a command:\n"
    "  gpu=0.5,memory_mib=8192,timeout=2h,name=fold-3 -- python train.py 3\n"
    "  warehouse-db=1,class=etl -- ./export.sh\n"
    "  make test          (no \" -- \": asks what --request says)\n"
    "timeout= and name= are the runner's; the rest is the library's request\n"
    "spec. Blank lines and lines starting with '#' are skipped. JOBFILE\n"
    "absent or \"-\": standard input.\n"
    "\n"
    "A template runs once per combination of its input sources' values\n"
    "(::: ARG..., :::: FILE..., -a FILE; :::+ and ::::+ link a source to\n"
    "the one before), with {} the values (quoted for the shell), {.}\n"
    "without the extension, {/} the base name, {//} the directory, {/.}\n"
    "the base name without extension, {1} {2.} ... the same for one value,\n"
    "{#} the job's number and {%} its slot; without any, the values are\n"
    "appended.\n"
    "\n"
    "Each job gets CUDA_VISIBLE_DEVICES and CRONOQ_GPU_FRACTION (its GPUs\n"
    "and its share of each), CRONOQ_GRANT (all it holds), CRONOQ_JOB_SEQ,\n"
    "CRONOQ_JOB_SLOT and CRONOQ_JOB_NAME.\n"
    "\n"
    "Exit status: 0 every job succeeded, 1 a job failed or did not run,\n"
    "2 usage or spec error, 3 halted by --halt, 128+N stopped by signal N.\n";

static void print_help(void) {
  fputs(usage_head, stdout);
  for (size_t i = 0; i < N_OPTS; i++) {
    const struct opt_def *d = &opts[i];
    char head[64];
    if (d->name == NULL)
      snprintf(head, sizeof(head), "-%c%s%s", d->short_name,
               d->arg != NULL ? " " : "", d->arg != NULL ? d->arg : "");
    else
      snprintf(head, sizeof(head), "%c%c%c --%s%s%s",
               d->short_name != 0 ? '-' : ' ',
               d->short_name != 0 ? d->short_name : ' ',
               d->short_name != 0 ? ',' : ' ', d->name,
               d->arg != NULL ? " " : "", d->arg != NULL ? d->arg : "");
    printf("  %-26s", head);
    if (strlen(head) > 26)
      printf("\n  %-26s", "");
    for (const char *p = d->help; *p != '\0';) {
      size_t n = strcspn(p, "\n");
      printf("%.*s\n", (int)n, p);
      p += n;
      if (*p == '\n') {
        p++;
        printf("  %-26s", "");
      }
    }
  }
  fputs(usage_tail, stdout);
}

/* The option that argv word `arg` names, as written, without a value it
 * carries: a value may be a secret (the password in a --pool URL). */
static const char *opt_word(const char *arg, char *buf, size_t len) {
  size_t n = arg[1] == '-' ? strcspn(arg, "=") : 2;
  snprintf(buf, len, "%.*s", (int)n, arg);
  return buf;
}

static int usage_error(const char *fmt, const char *arg) {
  fputs("cronoq-run: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\nTry 'cronoq-run --help'.\n", stderr);
  return 2;
}

/* Longest duration accepted: about 31 years, far inside what an int64_t
 * of milliseconds and a uv timer hold. */
#define DURATION_MAX_S 1000000000

/*
 * A duration, strictly: decimal digits, an optional fraction ".digits", an
 * optional unit (s, m, h, d; seconds without one). Nothing else: strtod()
 * would also take hexadecimal ("0x10" as 16), exponents, "inf", "nan",
 * signs and leading blanks. Rounded up to whole milliseconds, so that a
 * tiny duration is not 0. Returns 0, or -1 for text that is not one, zero
 * or too long.
 */
int parse_duration(const char *text, int64_t *ms) {
  const char *p = text;
  int64_t whole = 0;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    whole = whole * 10 + (*p - '0');
    if (whole > DURATION_MAX_S)
      return -1;
  }
  /* Thousandths of the unit, rounded up from the fraction's digits. */
  int64_t milli = 0;
  if (*p == '.') {
    p++;
    if (*p < '0' || *p > '9')
      return -1;
    int64_t scale = 100;
    bool rest = false;
    for (; *p >= '0' && *p <= '9'; p++) {
      if (scale > 0)
        milli += (*p - '0') * scale;
      else
        rest = rest || *p != '0';
      scale /= 10;
    }
    milli += rest;
  }
  int64_t unit_s = 1;
  if (*p != '\0') {
    const char *units = "smhd";
    static const int64_t seconds[] = {1, 60, 3600, 86400};
    const char *u = strchr(units, *p);
    if (u == NULL || p[1] != '\0')
      return -1;
    unit_s = seconds[u - units];
  }
  if (whole * unit_s > DURATION_MAX_S)
    return -1;
  int64_t v = whole * unit_s * 1000 + milli * unit_s;
  if (v == 0)
    return -1;
  *ms = v;
  return 0;
}

/* A count: decimal digits only, at most `max`; `percent` set when it ends
 * in '%' (allowed when percent is not NULL). Returns 0 or -1. */
static int parse_count(const char *text, int64_t max, int64_t *out,
                       bool *percent) {
  const char *p = text;
  int64_t v = 0;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (*p - '0');
    if (v > max)
      return -1;
  }
  if (percent != NULL)
    *percent = false;
  if (*p == '%' && percent != NULL) {
    *percent = true;
    p++;
  }
  if (*p != '\0')
    return -1;
  *out = v;
  return 0;
}

int64_t options_cpus(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 ? cpus : 1;
}

/* -j as GNU parallel reads it: N jobs (0: no limit), P% of the online
 * CPUs, or +N / -N of them; at least one, except for 0. */
static int parse_jobs(const char *text, int64_t *jobs) {
  bool percent;
  int64_t v;
  int sign = *text == '+' ? 1 : *text == '-' ? -1 : 0;
  if (parse_count(text + (sign != 0), 1000000, &v, &percent) != 0 ||
      (sign != 0 && percent))
    return -1;
  int64_t cpus = options_cpus();
  if (percent) {
    if (v == 0)
      return -1; /* 0% is not "no limit" */
    v = cpus * v / 100;
  } else if (sign != 0) {
    v = cpus + sign * v;
  } else {
    *jobs = v;
    return 0;
  }
  *jobs = v < 1 ? 1 : v;
  return 0;
}

/* --halt: "never", or [soon|now,]fail=N|P% ("soon" when not said). */
static int parse_halt(const char *text, struct options *o) {
  if (strcmp(text, "never") == 0) {
    o->halt = HALT_NEVER;
    return 0;
  }
  o->halt = HALT_SOON;
  if (strncmp(text, "soon,", 5) == 0) {
    text += 5;
  } else if (strncmp(text, "now,", 4) == 0) {
    o->halt = HALT_NOW;
    text += 4;
  }
  if (strncmp(text, "fail=", 5) != 0)
    return -1;
  if (parse_count(text + 5, 1000000000, &o->halt_fail, &o->halt_percent) != 0 ||
      o->halt_fail < 1 || (o->halt_percent && o->halt_fail > 100))
    return -1;
  return 0;
}

/* --device-env POOL=VAR: an environment variable name for VAR. */
static int parse_device_env(const char *text, struct options *o) {
  const char *eq = strchr(text, '=');
  if (eq == NULL || eq == text || eq[1] == '\0' ||
      o->n_device_env == RUNNER_DEVICE_ENV_MAX)
    return -1;
  const char *var = eq + 1;
  if (!((*var >= 'A' && *var <= 'Z') || (*var >= 'a' && *var <= 'z') ||
        *var == '_'))
    return -1;
  if (var[strspn(var, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789_")] != '\0')
    return -1;
  /* The pool name is checked against the pool later; it is cut here. */
  static char pools[RUNNER_DEVICE_ENV_MAX][CQ_NAME_MAX + 1];
  size_t n = (size_t)(eq - text);
  if (n > CQ_NAME_MAX)
    return -1;
  memcpy(pools[o->n_device_env], text, n);
  pools[o->n_device_env][n] = '\0';
  o->device_env[o->n_device_env].pool = pools[o->n_device_env];
  o->device_env[o->n_device_env].var = var;
  o->n_device_env++;
  return 0;
}

/* Whether a word has a placeholder of the template. */
static bool has_placeholder(const char *s) {
  struct mark m;
  for (; *s != '\0'; s++)
    if (template_mark(s, &m) > 0)
      return true;
  return false;
}

/* The long option that argv word `arg` ("--name" or "--name=value")
 * names, with its value when the word carries it; NULL if none does. */
static const struct opt_def *find_long(const char *arg,
                                       const char **inline_value) {
  const char *name = arg + 2;
  size_t n = strcspn(name, "=");
  *inline_value = name[n] == '=' ? name + n + 1 : NULL;
  for (size_t i = 0; i < N_OPTS; i++)
    if (opts[i].name != NULL && strlen(opts[i].name) == n &&
        strncmp(opts[i].name, name, n) == 0)
      return &opts[i];
  return NULL;
}

static const struct opt_def *find_short(char c) {
  for (size_t i = 0; i < N_OPTS; i++)
    if (opts[i].short_name != 0 && opts[i].short_name == c)
      return &opts[i];
  return NULL;
}

/* Whether argv word `w` names one of the runner's options. */
static bool is_option(const char *w) {
  const char *value;
  if (w[0] != '-' || w[1] == '\0')
    return false;
  return w[1] == '-' ? w[2] != '\0' && find_long(w, &value) != NULL
                     : find_short(w[1]) != NULL;
}

/* Apply one option. Returns -1 to go on, or the exit status. */
static int apply(const struct opt_def *d, const char *v, struct options *o) {
  switch (d->id) {
  case OPT_RESOURCES:
    o->resources = v;
    break;
  case OPT_POOL:
    o->pool_url = v;
    break;
  case OPT_NAMESPACE:
    o->pool_ns = v;
    break;
  case OPT_NEW_NAMESPACE:
    o->new_namespace = true;
    break;
  case OPT_JOBS:
    o->jobs_given = true;
    if (parse_jobs(v, &o->jobs) != 0)
      return usage_error("-j wants a number of jobs (0: no limit), a "
                         "percentage of the CPUs (50%%) or a number more or "
                         "fewer than them (+2, -1), not '%s'",
                         v);
    break;
  case OPT_REQUEST:
    o->request = v;
    break;
  case OPT_TIMEOUT:
    if (parse_duration(v, &o->timeout_ms) != 0)
      return usage_error("--timeout wants a duration above 0: seconds "
                         "(90, 1.5) or with a unit (90s, 15m, 2h, 1d), "
                         "not '%s'",
                         v);
    break;
  case OPT_KILL_GRACE:
    if (parse_duration(v, &o->kill_grace_ms) != 0)
      return usage_error("--kill-grace wants a duration above 0 (2, 0.5, "
                         "10s), not '%s'",
                         v);
    break;
  case OPT_RETRIES: {
    int64_t n;
    if (parse_count(v, 1000000, &n, NULL) != 0)
      return usage_error("--retries wants a number of retries, not '%s'", v);
    o->retries = (unsigned)n;
    break;
  }
  case OPT_HALT:
    if (parse_halt(v, o) != 0)
      return usage_error("--halt wants never, soon,fail=N, now,fail=N or "
                         "fail=P%% (1 to 100), not '%s'",
                         v);
    break;
  case OPT_JOBLOG:
    o->joblog = v;
    break;
  case OPT_RESUME:
    o->resume = RESUME_DONE;
    break;
  case OPT_RESUME_FAILED:
    o->resume = RESUME_FAILED;
    break;
  case OPT_GROUP:
    o->output = OUTPUT_GROUP;
    break;
  case OPT_LINE_BUFFER:
    o->output = OUTPUT_LINE;
    break;
  case OPT_UNGROUP:
    o->output = OUTPUT_UNGROUPED;
    break;
  case OPT_TAG:
    o->tag = true;
    break;
  case OPT_RESULTS:
    if (*v == '\0')
      return usage_error("%s", "--results wants a directory");
    o->results = v;
    break;
  case OPT_PROGRESS:
  case OPT_BAR:
  case OPT_ETA:
    o->progress = 1;
    break;
  case OPT_NO_PROGRESS:
    o->progress = 0;
    break;
  case OPT_SUMMARY:
    /* "all" was the full table's name before it stopped being the
     * default; it still is. */
    if (strcmp(v, "full") == 0 || strcmp(v, "all") == 0)
      o->summary = SUMMARY_FULL;
    else if (strcmp(v, "failed") == 0)
      o->summary = SUMMARY_FAILED;
    else if (strcmp(v, "none") == 0)
      o->summary = SUMMARY_NONE;
    else
      return usage_error("--summary wants failed, full or none, not '%s'", v);
    break;
  case OPT_JSON:
    if (*v == '\0')
      return usage_error("%s", "--json wants a file (\"-\": stdout)");
    o->json = v;
    break;
  case OPT_FOLLOW:
    o->follow = true;
    break;
  case OPT_ARG_FILE:
    if (o->n_sources == RUNNER_SOURCES_MAX)
      return usage_error("at most %s input sources", "32");
    o->sources[o->n_sources++].path = v;
    break;
  case OPT_MAX_ARGS:
  case OPT_MAX_REPLACE_ARGS:
    if (parse_count(v, 1000000, &o->max_args, NULL) != 0)
      return usage_error("-n and -N want a number of values per job, "
                         "not '%s'",
                         v);
    break;
  case OPT_CONTEXT_REPLACE:
    o->context_replace = true;
    break;
  case OPT_COLSEP:
    if (*v == '\0')
      return usage_error("%s", "--colsep wants a regular expression");
    o->colsep = v;
    break;
  case OPT_KEEP_ORDER:
    o->keep_order = true;
    break;
  case OPT_DELAY:
    if (parse_duration(v, &o->delay_ms) != 0)
      return usage_error("--delay wants a duration above 0 (0.5, 2, 1m), "
                         "not '%s'",
                         v);
    break;
  case OPT_DRY_RUN:
    o->dry_run = true;
    break;
  case OPT_GPU_POOL:
    o->gpu_pool = v;
    break;
  case OPT_DEVICE_ENV:
    if (parse_device_env(v, o) != 0)
      return usage_error("--device-env wants POOL=VARIABLE (at most 8), "
                         "not '%s'",
                         v);
    break;
  case OPT_VERSION:
    printf("cronoq-run %s (libcronoq %s)\n", CRONOQ_RUN_VERSION,
           cq_version_string());
    return 0;
  case OPT_HELP:
    print_help();
    return 0;
  }
  return -1;
}

/* An input source marker: 1 ":::", 2 "::::", 3 ":::+", 4 "::::+"; 0. */
static int source_marker(const char *w) {
  static const char *const markers[] = {":::", "::::", ":::+", "::::+"};
  for (int i = 0; i < 4; i++)
    if (strcmp(w, markers[i]) == 0)
      return i + 1;
  return 0;
}

/* The input sources from argv[k] (a marker) on. Returns -1 to go on, or
 * the exit status. */
static int input_sources(int argc, char **argv, int k, struct options *o) {
  while (k < argc) {
    int marker = source_marker(argv[k]);
    int from = k + 1, to = from;
    while (to < argc && source_marker(argv[to]) == 0)
      to++;
    if (to == from)
      return usage_error("%s wants at least one argument", argv[k]);
    bool files = marker == 2 || marker == 4, linked = marker >= 3;
    /* ":::" is one source of its words; "::::" one source per file. */
    for (int w = from; w < (files ? to : from + 1); w++) {
      if (o->n_sources == RUNNER_SOURCES_MAX)
        return usage_error("at most %s input sources", "32");
      struct arg_source *src = &o->sources[o->n_sources++];
      src->path = files ? argv[w] : NULL;
      src->words = files ? NULL : argv + from;
      src->n_words = files ? 0 : to - from;
      src->linked = linked && o->n_sources > 1;
    }
    k = to;
  }
  return -1;
}

/* A job file followed by more words is a template whose command is the
 * file, which cannot run: the words are the runner's options, put after
 * the input ("cronoq-run jobs.txt -j 4"), where they are not options. */
static int misplaced_options(char **words, int n) {
  struct stat st;
  if (n < 2 || stat(words[0], &st) != 0 || !S_ISREG(st.st_mode) ||
      access(words[0], X_OK) == 0)
    return -1;
  for (int i = 1; i < n; i++)
    if (is_option(words[i])) {
      fprintf(stderr,
              "cronoq-run: '%s' comes after the job file '%s': options come "
              "before the input (cronoq-run %s ... %s)\n",
              words[i], words[0], words[i], words[0]);
      return 2;
    }
  return -1;
}

/* The words after the options: a job file, or a template and its input
 * sources. Returns -1 to go on, or the exit status. */
static int input_words(int argc, char **argv, int i, struct options *o) {
  int first = i, end = i;
  while (end < argc && source_marker(argv[end]) == 0)
    end++;
  size_t options_sources = o->n_sources; /* -a FILE */
  int status = input_sources(argc, argv, end, o);
  if (status >= 0)
    return status;
  int n = end - first;
  bool templ =
      o->n_sources > 0 || n > 1 || (n == 1 && has_placeholder(argv[first]));
  if (!templ) {
    if (n == 1)
      o->jobfile = argv[first];
    return -1;
  }
  if (n == 0)
    return usage_error("%s", options_sources == o->n_sources
                                 ? "--arg-file wants a command template"
                                 : "a command is wanted before ::: or ::::");
  if ((status = misplaced_options(argv + first, n)) >= 0)
    return status;
  o->template_words = argv + first;
  o->n_template_words = n;
  return -1;
}

/* Apply the option word argv[*i] (and its value, which may be the next
 * word). Returns -1 to go on, or the exit status. */
static int option_word(int argc, char **argv, int *i, struct options *o) {
  const char *arg = argv[*i];
  char word[64];
  if (arg[1] == '-') {
    const char *value;
    const struct opt_def *d = find_long(arg, &value);
    if (d == NULL)
      return usage_error("unknown option '%s'",
                         opt_word(arg, word, sizeof(word)));
    if (d->arg == NULL && value != NULL)
      return usage_error("option '%s' takes no value",
                         opt_word(arg, word, sizeof(word)));
    if (d->arg != NULL && value == NULL) {
      if (*i + 1 >= argc)
        return usage_error("option '%s' needs a value", arg);
      value = argv[++*i];
    }
    return apply(d, value, o);
  }
  /* Short options bundle: flags, then at most one that takes a value,
   * which is the rest of the word or the next word ("-kj4", "-kj 4"). */
  for (const char *p = arg + 1; *p != '\0'; p++) {
    const struct opt_def *d = find_short(*p);
    snprintf(word, sizeof(word), "-%c", *p);
    if (d == NULL)
      return usage_error("unknown option '%s'", word);
    const char *value = NULL;
    if (d->arg != NULL) {
      if (p[1] != '\0')
        value = p + 1;
      else if (*i + 1 < argc)
        value = argv[++*i];
      else
        return usage_error("option '%s' needs a value", word);
    }
    int status = apply(d, value, o);
    if (status >= 0 || value != NULL)
      return status;
  }
  return -1;
}

int options_parse(int argc, char **argv, struct options *o) {
  memset(o, 0, sizeof(*o));
  o->jobs = options_cpus();
  o->progress = -1;
  o->kill_grace_ms = RUNNER_KILL_GRACE_MS;
  o->summary = SUMMARY_FAILED;
  o->max_args = -1;
  int i = 1;
  for (; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      i++;
      break;
    }
    if (arg[0] != '-' || strcmp(arg, "-") == 0)
      break; /* the input starts */
    int status = option_word(argc, argv, &i, o);
    if (status >= 0)
      return status;
  }
  int status = input_words(argc, argv, i, o);
  if (status >= 0)
    return status;
  if (o->resume != RESUME_NONE && o->joblog == NULL)
    return usage_error("%s", "--resume and --resume-failed need --joblog FILE");
  if (o->results != NULL)
    o->output = OUTPUT_RESULTS;
  if (o->pool_ns != NULL && o->pool_url == NULL)
    return usage_error("%s", "--namespace wants --pool URL");
  if (o->new_namespace && o->pool_url == NULL)
    return usage_error("%s", "--new-namespace wants --pool URL");
  if (o->template_words == NULL &&
      (o->max_args >= 0 || o->context_replace || o->colsep != NULL))
    return usage_error("%s", "-n, -N, -X and --colsep want a command "
                             "template");
  /* --follow starts jobs as values arrive: one source, read as it comes. */
  if (o->follow && args_whole(o))
    return usage_error("%s", "--follow reads one input source as it comes; "
                             "not several, nor with -X");
  return -1;
}
