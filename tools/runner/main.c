/*
 * cronoq-run: run shell commands from a job file, each once the resources
 * it names are granted, as many at once as the resources allow.
 *
 *   cronoq-run --resources gpu=auto,warehouse-db=10 jobs.txt
 *
 * This file reads the options, builds the pool from the resource spec and
 * the children's environment, and turns the outcome into the exit status:
 * 0 every job succeeded, 1 a job failed or could not run, 2 a usage, spec
 * or job-file error (nothing ran), 128+N after signal N (SIGINT: 130).
 * The run itself is in run.c; the job file format in jobfile.c.
 */
#include "runner.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CRONOQ_RUN_VERSION
#define CRONOQ_RUN_VERSION "unknown" /* set by the build */
#endif

extern char **environ;

static const char usage_text[] =
    "usage: cronoq-run --resources SPEC [--timeout DURATION] [--gpu-pool NAME]\n"
    "                  [--json] [--no-progress] [JOBFILE]\n"
    "\n"
    "Run the jobs of JOBFILE (standard input when absent or \"-\"), each as\n"
    "soon as the resources it asks for are free.\n"
    "\n"
    "  --resources SPEC    what there is, e.g. gpu=auto,warehouse-db=10,\n"
    "                      memory_mib=24576 (gpu=4: four devices, no GPU\n"
    "                      needed; NAME:class=N: at most N jobs of a class)\n"
    "  --timeout DURATION  stop a job running longer (SIGTERM, then SIGKILL\n"
    "                      2 s later): seconds (90, 1.5) or with a unit\n"
    "                      (90s, 15m, 2h, 1d)\n"
    "  --gpu-pool NAME     the device pool whose ids CUDA_VISIBLE_DEVICES\n"
    "                      lists (default: gpu); other pools never appear\n"
    "                      in it\n"
    "  --json              print the summary as one JSON document\n"
    "  --no-progress       no live progress line on stderr\n"
    "  --version           the runner's version and the library's\n"
    "  -h, --help          this text\n"
    "\n"
    "A job is one line: a request spec, \" -- \", a shell command:\n"
    "  gpu=0.5,memory_mib=8192 -- python train.py --fold 3\n"
    "  warehouse-db=1,class=etl -- ./export.sh\n"
    "  -- echo needs nothing\n"
    "Blank lines and lines starting with '#' are skipped.\n"
    "\n"
    "Exit status: 0 all jobs succeeded, 1 a job failed or did not run,\n"
    "2 usage or spec error, 130 interrupted.\n";

struct options {
  const char *resources;
  const char *gpu_pool; /* NULL: "gpu", if there is one */
  const char *jobfile; /* NULL or "-": standard input */
  int64_t timeout_ms;
  bool json;
  bool no_progress;
};

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

/* The value of option `name` given as "--name VALUE" or "--name=VALUE";
 * NULL if argv[*i] is not that option. Sets *missing when it is but the
 * value is not there. */
static const char *option_value(int argc, char **argv, int *i, const char *name,
                                bool *missing) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0)
    return NULL;
  if (argv[*i][n] == '=')
    return argv[*i] + n + 1;
  if (argv[*i][n] != '\0')
    return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    return NULL;
  }
  return argv[++*i];
}

/* Returns -1 to go on, or the exit status. */
static int parse_options(int argc, char **argv, struct options *o) {
  bool only_files = false;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value;
    bool missing = false;
    if (only_files || arg[0] != '-' || strcmp(arg, "-") == 0) {
      if (o->jobfile != NULL)
        return usage_error("one job file at most (got '%s' too)", arg);
      o->jobfile = arg;
    } else if (strcmp(arg, "--") == 0) {
      only_files = true;
    } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      fputs(usage_text, stdout);
      return 0;
    } else if (strcmp(arg, "--version") == 0) {
      printf("cronoq-run %s (libcronoq %s)\n", CRONOQ_RUN_VERSION,
             cq_version_string());
      return 0;
    } else if (strcmp(arg, "--json") == 0) {
      o->json = true;
    } else if (strcmp(arg, "--no-progress") == 0) {
      o->no_progress = true;
    } else if ((value = option_value(argc, argv, &i, "--resources",
                                     &missing)) != NULL) {
      o->resources = value;
    } else if ((value = option_value(argc, argv, &i, "--gpu-pool",
                                     &missing)) != NULL) {
      o->gpu_pool = value;
    } else if ((value = option_value(argc, argv, &i, "--timeout", &missing)) !=
               NULL) {
      if (parse_duration(value, &o->timeout_ms) != 0)
        return usage_error("--timeout wants a duration above 0: seconds "
                           "(90, 1.5) or with a unit (90s, 15m, 2h, 1d), "
                           "not '%s'",
                           value);
    } else if (missing) {
      return usage_error("option '%s' needs a value", arg);
    } else {
      return usage_error("unknown option '%s'", arg);
    }
  }
  if (o->resources == NULL)
    return usage_error("%s", "--resources SPEC is required");
  return -1;
}

/* Our environment without the two variables each child gets its own value
 * of, and two slots for them before the terminating NULL. */
static char **child_environment(size_t *slot) {
  static const char *const own[] = {"CUDA_VISIBLE_DEVICES=", "CRONOQ_GRANT="};
  size_t n = 0;
  while (environ[n] != NULL)
    n++;
  char **env = calloc(n + 3, sizeof(*env));
  if (env == NULL)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    bool ours = false;
    for (size_t j = 0; j < sizeof(own) / sizeof(own[0]); j++)
      ours = ours || strncmp(environ[i], own[j], strlen(own[j])) == 0;
    if (!ours)
      env[k++] = environ[i];
  }
  *slot = k;
  return env;
}

/* Build the pool and read the jobs into `r`. Returns -1, or the exit
 * status of a failure (the reason printed). */
static int prepare(struct runner *r, const struct options *o) {
  int rc = cq_pool_create(&r->pool, NULL);
  if (rc != 0) {
    fprintf(stderr, "cronoq-run: %s\n", cq_strerror(rc));
    return 2;
  }
  char err[256] = "";
  rc = cq_pool_add_spec(r->pool, o->resources, NULL, err, sizeof(err));
  if (rc != 0) {
    fprintf(stderr, "cronoq-run: %s\n", err[0] != '\0' ? err : cq_strerror(rc));
    return 2;
  }
  /* The GPU pool: the one named, which must be a device pool, or "gpu"
   * when there is one. */
  cq_resource_stats st;
  const char *gpu = o->gpu_pool != NULL ? o->gpu_pool : "gpu";
  rc = cq_resource_stats_get(r->pool, gpu, &st);
  if (rc == 0 && st.kind == CQ_KIND_DEVICES) {
    r->gpu_pool = gpu;
  } else if (o->gpu_pool != NULL) {
    fprintf(stderr,
            "cronoq-run: --gpu-pool %s: --resources has no device pool of "
            "that name\n",
            o->gpu_pool);
    return 2;
  }
  /* Room for every resource: they are only added here. (+ 1: calloc(0)
   * may return NULL, which would read as out of memory.) */
  (void)cq_pool_snapshot(r->pool, NULL, 0, &r->snapshot_cap);
  r->snapshot = calloc(r->snapshot_cap + 1, sizeof(*r->snapshot));
  r->env = child_environment(&r->env_slot);
  if (r->snapshot == NULL || r->env == NULL) {
    fprintf(stderr, "cronoq-run: out of memory\n");
    return 2;
  }

  bool from_stdin = o->jobfile == NULL || strcmp(o->jobfile, "-") == 0;
  const char *name = from_stdin ? "standard input" : o->jobfile;
  FILE *in = from_stdin ? stdin : fopen(o->jobfile, "r");
  if (in == NULL) {
    fprintf(stderr, "cronoq-run: %s: %s\n", o->jobfile, strerror(errno));
    return 2;
  }
  rc = jobs_read(in, name, r->pool, &r->jobs, &r->n_jobs);
  if (!from_stdin)
    fclose(in);
  return rc == 0 ? -1 : 2;
}

int main(int argc, char **argv) {
  /* A reader of our output that went away (`| head`, a closed ssh session)
   * must not kill the runner while its jobs run in groups of their own:
   * writes then fail with EPIPE, which the runner ignores. The children
   * get the default back (libuv resets every disposition in the child), so
   * a job in a pipeline still stops on SIGPIPE as it would in a shell. */
  struct sigaction ignore;
  memset(&ignore, 0, sizeof(ignore));
  ignore.sa_handler = SIG_IGN;
  (void)sigaction(SIGPIPE, &ignore, NULL);

  struct options o = {0};
  int status = parse_options(argc, argv, &o);
  if (status >= 0)
    return status;

  struct runner r;
  memset(&r, 0, sizeof(r));
  r.timeout_ms = o.timeout_ms;
  r.progress = !o.no_progress && isatty(2);
  status = prepare(&r, &o);
  if (status < 0) {
    int rc = runner_run(&r);
    if (rc < 0) {
      status = 2;
    } else {
      if (o.json)
        report_json(&r, stdout);
      else
        report_table(&r, stdout);
      if (r.interrupted != 0)
        status = 128 + r.interrupted;
      else
        status = (r.failed > 0 || rc != 0) ? 1 : 0;
    }
  }
  /* Every grant was released as its job ended: the pool must be idle. */
  int rc = cq_pool_destroy(r.pool);
  if (rc != 0) {
    fprintf(stderr, "cronoq-run: internal error: pool still in use: %s\n",
            cq_strerror(rc));
    if (status == 0)
      status = 1;
  }
  jobs_free(r.jobs, r.n_jobs);
  free(r.env);
  free(r.snapshot);
  return status;
}
