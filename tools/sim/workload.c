/*
 * Workloads for the simulator: the synthetic workload modelled on the
 * production trace's profile, the trace reader and its censored pods,
 * replay and Poisson arrivals. See sim.h.
 *
 * Invariants kept here:
 * - A workload's jobs are in arrival order (non-decreasing arrival_ms).
 *   The trace reader sorts stably if the file is not; replay shifts each
 *   copy past the last arrival; Poisson arrivals are a running sum.
 * - wl_synthetic() and wl_read_trace() replace what the workload held (its
 *   previous jobs are released), so `w` must be zeroed or hold a workload.
 *   Whenever a function here returns -1, `w` is left empty (as by
 *   wl_free()), except wl_replay(), which then leaves it unchanged.
 * - Every job made here has its class set by wl_classify(); a fraction of
 *   exactly one GPU is always stored as one whole GPU.
 *
 * Randomness comes from splitmix64, seeded per purpose, so that a workload
 * and its arrivals drawn with the same seed are still independent, and the
 * results do not depend on the C library's rand(). Results are identical
 * for a seed on one platform; across platforms, libm's log/exp/erfc may
 * differ in the last bit.
 */
#include "sim.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 8 GPUs, 96 vCPUs, 768 GiB; a rack is eight of them. */
const struct pool_shape SIM_MACHINE = {
    .name = "machine", .gpus = 8, .cpu_milli = 96000, .memory_mib = 786432};
const struct pool_shape SIM_RACK = {
    .name = "rack", .gpus = 64, .cpu_milli = 768000, .memory_mib = 6291456};

/* ------------------------------------------------------------------------ */
/* The growable array                                                         */
/* ------------------------------------------------------------------------ */

void wl_free(struct workload *w) {
  if (w == NULL)
    return;
  free(w->jobs);
  memset(w, 0, sizeof(*w));
}

/* Make room for `need` jobs; grows geometrically so pushes are amortised
 * O(1). Returns 0 or -1 (out of memory or a size that cannot be). */
static int reserve(struct workload *w, size_t need) {
  if (need <= w->cap)
    return 0;
  size_t cap = w->cap < 64 ? 64 : w->cap;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  if (cap > SIZE_MAX / sizeof(struct sim_job))
    return -1;
  struct sim_job *jobs = realloc(w->jobs, cap * sizeof(struct sim_job));
  if (jobs == NULL)
    return -1;
  w->jobs = jobs;
  w->cap = cap;
  return 0;
}

int wl_push(struct workload *w, const struct sim_job *job) {
  if (w->n == SIZE_MAX || reserve(w, w->n + 1) != 0)
    return -1;
  w->jobs[w->n++] = *job;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Classes                                                                    */
/* ------------------------------------------------------------------------ */

void wl_classify(struct sim_job *job) {
  switch (job->gpu) {
  case SIM_GPU_FRACTION:
    if (job->gpu_amount == 1000) {
      /* One form per request: a full share is a whole GPU, so whole-device
       * placement applies to it. */
      job->gpu = SIM_GPU_WHOLE;
      job->gpu_amount = 1;
      job->cls = SIM_WHOLE;
    } else {
      /* A "fraction" above one GPU is no valid request; it is classed by
       * what it asks (more than one GPU) and left for sim_run to refuse. */
      job->cls = job->gpu_amount < 1000 ? SIM_FRACTIONAL : SIM_MULTI;
    }
    return;
  case SIM_GPU_WHOLE:
    job->cls = job->gpu_amount >= 2 ? SIM_MULTI : SIM_WHOLE;
    return;
  default:
    job->cls = SIM_CPU_ONLY;
    return;
  }
}

double wl_gpu_demand(const struct sim_job *job) {
  switch (job->gpu) {
  case SIM_GPU_FRACTION:
    return (double)job->gpu_amount / 1000.0;
  case SIM_GPU_WHOLE:
    return (double)job->gpu_amount;
  default:
    return 0.0;
  }
}

/* ------------------------------------------------------------------------ */
/* Random numbers                                                             */
/* ------------------------------------------------------------------------ */

struct rng {
  uint64_t state;
};

/* Streams of one seed: XORed into it so each use draws its own numbers. */
#define STREAM_SYNTHETIC UINT64_C(0x6a09e667f3bcc908)
#define STREAM_ARRIVALS UINT64_C(0xbb67ae8584caa73b)
#define STREAM_LIMITS UINT64_C(0x3c6ef372fe94f82b)

static void rng_init(struct rng *r, uint64_t seed, uint64_t stream) {
  r->state = seed ^ stream;
}

/* splitmix64 (Steele, Lea, Flood 2014): passes BigCrush, any seed works. */
static uint64_t rng_next(struct rng *r) {
  uint64_t z = (r->state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Uniform in [0, 1), 53 random bits. */
static double rng_unit(struct rng *r) {
  return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Exponential with mean 1. 1 - u is in (0, 1], so the log is finite. */
static double rng_exponential(struct rng *r) { return -log(1.0 - rng_unit(r)); }

/* Two independent standard normals (Box-Muller). */
static void rng_normal_pair(struct rng *r, double *z1, double *z2) {
  const double two_pi = 6.283185307179586;
  double radius = sqrt(2.0 * rng_exponential(r));
  double angle = two_pi * rng_unit(r);
  *z1 = radius * cos(angle);
  *z2 = radius * sin(angle);
}

/* The standard normal CDF, in [0, 1]. */
static double normal_cdf(double z) { return 0.5 * erfc(-z / sqrt(2.0)); }

/* ------------------------------------------------------------------------ */
/* The synthetic workload                                                     */
/* ------------------------------------------------------------------------ */

/*
 * What the trace's 8,152 pods ask for their GPUs, with the number of pods
 * that ask it (shared/traces/README.md): the class shares, the fractional
 * sizes and the 16:15:44 split of multi-GPU pods all follow from drawing
 * one row of this table in proportion to its pods. The README names the
 * ten commonest fractional sizes; the other ten and their counts (118 pods)
 * are the file's own.
 */
static const struct gpu_ask {
  uint8_t gpu;
  int32_t amount; /* thousandths (fraction) or whole GPUs */
  uint32_t pods;
} gpu_asks[] = {
    {SIM_GPU_NONE, 0, 1088},      {SIM_GPU_FRACTION, 810, 1078},
    {SIM_GPU_FRACTION, 470, 750}, {SIM_GPU_FRACTION, 320, 328},
    {SIM_GPU_FRACTION, 650, 253}, {SIM_GPU_FRACTION, 230, 140},
    {SIM_GPU_FRACTION, 460, 128}, {SIM_GPU_FRACTION, 590, 75},
    {SIM_GPU_FRACTION, 160, 74},  {SIM_GPU_FRACTION, 550, 72},
    {SIM_GPU_FRACTION, 220, 62},  {SIM_GPU_FRACTION, 370, 47},
    {SIM_GPU_FRACTION, 110, 24},  {SIM_GPU_FRACTION, 480, 19},
    {SIM_GPU_FRACTION, 50, 7},    {SIM_GPU_FRACTION, 330, 7},
    {SIM_GPU_FRACTION, 350, 6},   {SIM_GPU_FRACTION, 270, 4},
    {SIM_GPU_FRACTION, 440, 2},   {SIM_GPU_FRACTION, 140, 1},
    {SIM_GPU_FRACTION, 290, 1},   {SIM_GPU_WHOLE, 1, 3911},
    {SIM_GPU_WHOLE, 2, 16},       {SIM_GPU_WHOLE, 4, 15},
    {SIM_GPU_WHOLE, 8, 44},
};
#define GPU_ASKS (sizeof(gpu_asks) / sizeof(gpu_asks[0]))

/*
 * CPU and memory per job class. In the trace they depend strongly on the
 * class: a pod sharing a fraction of a GPU asks a median of 4 vCPUs and
 * 15 GiB, a pod on one whole GPU 11.4 vCPUs and 47 GiB, a multi-GPU pod 64
 * vCPUs and 257 GiB. Drawing GPU jobs from the all-pod distribution
 * whatever their class would give them asks no trace pod has (a fraction
 * of a GPU with 24 vCPUs or more; the trace's fractional pods ask 12 at
 * most), and make the CPU a workload asks per GPU-second swing with the few
 * jobs that happen to run longest: the default rack workload (16,000 jobs,
 * seed 1) would ask 17.3 vCPU-seconds per GPU-second where the trace asks
 * 13.5, a CPU load past 1 on a pool with 12 vCPUs per GPU at an offered
 * GPU load of 0.8. Drawn per class, it asks 14.6. So each class draws
 * from its own profile. Mixed in the trace's class shares, they give back
 * the all-pod distribution, not exactly (interpolating each class spreads
 * the trace's steps otherwise than interpolating all pods) but within a
 * few points of its CDF; tests/test_workload.c checks the classes, the
 * mixture, and the CPU and memory asked per GPU-second.
 *
 * The profiles are percentiles of each class's rows in the trace file (all
 * 8,152 rows, linear interpolation between order statistics; the README
 * profiles all pods only). Between them a job's value is interpolated
 * linearly. The trace's values are few (45 distinct cpu_milli, 57
 * memory_mib), so neighbouring percentiles are often equal: such a flat run
 * is an atom, a share of jobs asking exactly that value, as in the trace.
 * Run times stay common to all classes.
 */
#define PROFILE_POINTS 9
static const double profile_q[PROFILE_POINTS] = {
    0.00, 0.05, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 1.00,
};

/*
 * The copula: pods that ask more CPU ask more memory, within a class as
 * well as across. `rank_correlation` is Spearman's rho of cpu_milli and
 * memory_mib over the class's rows. For CPU-only pods the trace's is
 * -0.05, which is within two standard errors (about 0.03 for 1,088 pods)
 * of none; their two asks are drawn independently (0) rather than coupled
 * by noise.
 */
static const struct class_profile {
  double cpu_milli[PROFILE_POINTS];
  double memory_mib[PROFILE_POINTS];
  double rank_correlation;
} class_profiles[SIM_CLASSES] = {
    /* 1,088 pods */
    [SIM_CPU_ONLY] = {{8000, 8000, 12500, 12500, 32000, 32000, 32000, 32000,
                       32000},
                      {8192, 30517, 49152, 51200, 57344, 57344, 57344, 61225.4,
                       65536},
                      0.0},
    /* 3,078 pods */
    [SIM_FRACTIONAL] = {{1000, 3152, 3152, 4000, 8000, 11908, 11908, 11908,
                         12000},
                        {2048, 5600, 5600, 15258, 30517, 47104, 47104, 47104,
                         47104},
                        0.96},
    /* 3,911 pods */
    [SIM_WHOLE] = {{1000, 3152, 9810, 11400, 12000, 16000, 18708, 24200, 24200},
                   {0, 5600, 24576, 48128, 49152, 64512, 77824, 93184, 125952},
                   0.61},
    /* 75 pods */
    [SIM_MULTI] = {{6000, 15540, 32100, 64200, 88000, 88000, 120000, 120200,
                    120200},
                   {43008, 65536, 132096, 263168, 327680, 327680, 640000,
                    737280, 737280},
                   0.97},
};

/* Run time in seconds, deletion - scheduled, of all classes alike. The
 * profile starts at p1; the 0-quantile is set at 10 s. */
#define RUN_TIME_POINTS 11
static const double run_time_q[RUN_TIME_POINTS] = {
    0.00, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 1.00,
};
static const double run_time_s[RUN_TIME_POINTS] = {
    10, 23, 50, 73, 175, 616, 2241, 7764, 18064, 114348, 12537496,
};

enum scale { LINEAR, LOGARITHMIC };

/*
 * The u-quantile of the distribution whose q[i]-quantile is x[i],
 * interpolated linearly in x or in log x (x > 0 then). Equal neighbouring
 * x make a flat run (an atom), equal neighbouring q a jump; neither divides
 * by zero.
 */
static double quantile(const double *q, const double *x, size_t n, double u,
                       enum scale scale) {
  for (size_t i = 1; i < n; i++) {
    if (u > q[i] && i + 1 < n)
      continue;
    double span = q[i] - q[i - 1];
    double f = span > 0 ? (u - q[i - 1]) / span : 1.0;
    if (scale == LOGARITHMIC)
      return x[i - 1] * pow(x[i] / x[i - 1], f);
    return x[i - 1] + f * (x[i] - x[i - 1]);
  }
  return x[n - 1];
}

int wl_synthetic(struct workload *w, size_t n, uint64_t seed) {
  wl_free(w);
  if (reserve(w, n) != 0)
    return -1;

  uint32_t pods = 0;
  for (size_t i = 0; i < GPU_ASKS; i++)
    pods += gpu_asks[i].pods;
  /* A Gaussian copula per class keeps both marginals exactly as profiled;
   * its normal correlation is 2 sin(pi r / 6) for a rank correlation r. */
  const double pi_over_6 = 0.5235987755982988;
  double rho[SIM_CLASSES];
  for (int c = 0; c < SIM_CLASSES; c++)
    rho[c] = 2.0 * sin(pi_over_6 * class_profiles[c].rank_correlation);

  struct rng r;
  rng_init(&r, seed, STREAM_SYNTHETIC);
  for (size_t j = 0; j < n; j++) {
    struct sim_job job;
    memset(&job, 0, sizeof(job));

    /* The high 32 bits scaled to [0, pods): an integer, so it cannot round
     * up to `pods` the way a double times pods can. */
    uint32_t row = (uint32_t)(((rng_next(&r) >> 32) * pods) >> 32);
    size_t k = 0;
    while (row >= gpu_asks[k].pods) {
      row -= gpu_asks[k].pods;
      k++;
    }
    job.gpu = gpu_asks[k].gpu;
    job.gpu_amount = gpu_asks[k].amount;
    wl_classify(&job);

    const struct class_profile *profile = &class_profiles[job.cls];
    double z_cpu, z_other;
    rng_normal_pair(&r, &z_cpu, &z_other);
    double u_cpu = normal_cdf(z_cpu);
    double u_memory =
        normal_cdf(rho[job.cls] * z_cpu +
                   sqrt(1.0 - rho[job.cls] * rho[job.cls]) * z_other);
    job.cpu_milli = (int64_t)llround(
        quantile(profile_q, profile->cpu_milli, PROFILE_POINTS, u_cpu, LINEAR));
    job.memory_mib = (int64_t)llround(quantile(
        profile_q, profile->memory_mib, PROFILE_POINTS, u_memory, LINEAR));

    double seconds = quantile(run_time_q, run_time_s, RUN_TIME_POINTS,
                              rng_unit(&r), LOGARITHMIC);
    job.duration_ms = (int64_t)llround(seconds * 1000.0);

    w->jobs[w->n++] = job;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The trace reader                                                           */
/* ------------------------------------------------------------------------ */

static const char *const trace_columns[] = {
    "name",          "cpu_milli",      "memory_mib",
    "num_gpu",       "gpu_milli",      "gpu_spec",
    "qos",           "pod_phase",      "creation_time",
    "deletion_time", "scheduled_time",
};
#define TRACE_FIELDS (sizeof(trace_columns) / sizeof(trace_columns[0]))

enum trace_field {
  F_NAME,
  F_CPU_MILLI,
  F_MEMORY_MIB,
  F_NUM_GPU,
  F_GPU_MILLI,
  F_GPU_SPEC,
  F_QOS,
  F_POD_PHASE,
  F_CREATION,
  F_DELETION,
  F_SCHEDULED
};

/* Numbers above this are refused, so seconds always convert to
 * milliseconds without overflow. */
#define TRACE_NUMBER_MAX (INT64_MAX / 1000)

/* "<path>:<line>: <message>" on `errors` (line 0: no line). */
static void report(FILE *errors, const char *path, size_t line, const char *fmt,
                   ...) {
  if (errors == NULL)
    return;
  va_list ap;
  va_start(ap, fmt);
  if (line > 0)
    fprintf(errors, "%s:%zu: ", path, line);
  else
    fprintf(errors, "%s: ", path);
  vfprintf(errors, fmt, ap);
  fputc('\n', errors);
  va_end(ap);
}

/* One line of any length, without its "\n" or "\r\n". */
struct line_reader {
  FILE *file;
  char *buf;
  size_t cap;
  size_t len;
};

/* Room for one more byte. Returns 0 or -1 (out of memory). */
static int line_grow(struct line_reader *lr) {
  size_t cap = lr->cap < 256 ? 256 : lr->cap * 2;
  char *buf = cap > lr->cap ? realloc(lr->buf, cap) : NULL;
  if (buf == NULL)
    return -1;
  lr->buf = buf;
  lr->cap = cap;
  return 0;
}

/* Returns 1 (a line, NUL-terminated in lr->buf), 0 (end of file, or a read
 * error: see ferror) or -1 (out of memory). A last line without "\n" is a
 * line. */
static int read_line(struct line_reader *lr) {
  lr->len = 0;
  int c;
  while ((c = getc(lr->file)) != EOF && c != '\n') {
    if (lr->len + 1 >= lr->cap && line_grow(lr) != 0)
      return -1;
    lr->buf[lr->len++] = (char)c;
  }
  if (c == EOF && (lr->len == 0 || ferror(lr->file)))
    return 0;
  if (lr->buf == NULL && line_grow(lr) != 0)
    return -1;
  if (lr->len > 0 && lr->buf[lr->len - 1] == '\r')
    lr->len--;
  lr->buf[lr->len] = '\0';
  return 1;
}

/* Split the line at commas in place. Returns the number of fields; only
 * the first `max` are stored. */
static size_t split_fields(char *line, char **fields, size_t max) {
  size_t n = 0;
  for (char *start = line;; n++) {
    char *comma = strchr(start, ',');
    if (n < max)
      fields[n] = start;
    if (comma == NULL)
      return n + 1;
    *comma = '\0';
    start = comma + 1;
  }
}

/* A non-negative integer field. Returns 0, or -1 with the reason in `why`. */
static int parse_number(const char *text, enum trace_field field, int64_t *out,
                        char *why, size_t why_size) {
  const char *name = trace_columns[field];
  if (*text == '\0') {
    snprintf(why, why_size, "%s is empty", name);
    return -1;
  }
  const char *digits = *text == '-' ? text + 1 : text;
  int64_t value = 0;
  int too_large = 0;
  const char *p;
  for (p = digits; *p >= '0' && *p <= '9'; p++) {
    int digit = *p - '0';
    if (value > (TRACE_NUMBER_MAX - digit) / 10)
      too_large = 1;
    else
      value = value * 10 + digit;
  }
  if (p == digits || *p != '\0')
    snprintf(why, why_size, "%s '%.40s' is not a number", name, text);
  else if (digits != text)
    snprintf(why, why_size, "%s %.40s is negative", name, text);
  else if (too_large)
    snprintf(why, why_size, "%s %.40s is too large", name, text);
  else {
    *out = value;
    return 0;
  }
  return -1;
}

enum row_kind { ROW_JOB, ROW_NEVER_RAN, ROW_MALFORMED };

/* One data row (already split into TRACE_FIELDS fields) as a job; its
 * deletion time, in ms, goes to *deletion_ms unless the row is malformed.
 * name, gpu_spec, qos and pod_phase are not used: the simulator has no GPU
 * models or QoS classes, and scheduled_time tells whether a pod ran. */
static enum row_kind parse_row(char **fields, struct sim_job *job,
                               int64_t *deletion_ms, char *why,
                               size_t why_size) {
  static const enum trace_field numeric[] = {
      F_CPU_MILLI, F_MEMORY_MIB, F_NUM_GPU, F_GPU_MILLI, F_CREATION, F_DELETION,
  };
  int64_t value[TRACE_FIELDS] = {0};
  for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++) {
    enum trace_field f = numeric[i];
    if (parse_number(fields[f], f, &value[f], why, why_size) != 0)
      return ROW_MALFORMED;
  }

  memset(job, 0, sizeof(*job));
  int64_t num_gpu = value[F_NUM_GPU], gpu_milli = value[F_GPU_MILLI];
  if (num_gpu == 0) {
    /* gpu_milli is 0 for CPU-only pods; anything else is ambiguous. */
    if (gpu_milli != 0) {
      snprintf(why, why_size, "gpu_milli %lld without a GPU (num_gpu 0)",
               (long long)gpu_milli);
      return ROW_MALFORMED;
    }
    job->gpu = SIM_GPU_NONE;
  } else if (gpu_milli < 1 || gpu_milli > 1000) {
    snprintf(why, why_size, "gpu_milli %lld is outside 1..1000 for a GPU pod",
             (long long)gpu_milli);
    return ROW_MALFORMED;
  } else if (num_gpu == 1) {
    job->gpu = SIM_GPU_FRACTION;
    job->gpu_amount = gpu_milli;
  } else if (gpu_milli != 1000) {
    snprintf(why, why_size,
             "num_gpu %lld with gpu_milli %lld: several GPUs are whole "
             "(gpu_milli 1000)",
             (long long)num_gpu, (long long)gpu_milli);
    return ROW_MALFORMED;
  } else {
    job->gpu = SIM_GPU_WHOLE;
    job->gpu_amount = num_gpu;
  }

  *deletion_ms = value[F_DELETION] * 1000;
  /* Checked after the rest, so a broken pending row counts as malformed. */
  if (fields[F_SCHEDULED][0] == '\0')
    return ROW_NEVER_RAN;
  int64_t scheduled;
  if (parse_number(fields[F_SCHEDULED], F_SCHEDULED, &scheduled, why,
                   why_size) != 0)
    return ROW_MALFORMED;
  if (value[F_DELETION] < scheduled) {
    snprintf(why, why_size, "deletion_time %lld is before scheduled_time %lld",
             (long long)value[F_DELETION], (long long)scheduled);
    return ROW_MALFORMED;
  }

  job->cpu_milli = value[F_CPU_MILLI];
  job->memory_mib = value[F_MEMORY_MIB];
  job->arrival_ms = value[F_CREATION] * 1000;
  job->duration_ms = (value[F_DELETION] - scheduled) * 1000;
  wl_classify(job);
  return ROW_JOB;
}

/* The header line: the openb columns, in order. Returns 0 or -1. */
static int check_header(char *line, char *why, size_t why_size) {
  char *fields[TRACE_FIELDS];
  size_t n = split_fields(line, fields, TRACE_FIELDS);
  if (n != TRACE_FIELDS) {
    snprintf(why, why_size,
             "the header has %zu columns; the openb pod list has %zu "
             "(name,cpu_milli,...,scheduled_time)",
             n, TRACE_FIELDS);
    return -1;
  }
  for (size_t i = 0; i < TRACE_FIELDS; i++) {
    if (strcmp(fields[i], trace_columns[i]) != 0) {
      snprintf(why, why_size, "header column %zu is '%.40s', expected '%s'",
               i + 1, fields[i], trace_columns[i]);
      return -1;
    }
  }
  return 0;
}

/* Sort by arrival, keeping the file's order among equal arrivals (a
 * bottom-up merge sort: qsort is not stable). Returns 0 or -1. */
static int sort_by_arrival(struct sim_job *jobs, size_t n) {
  size_t i = 1;
  while (i < n && jobs[i - 1].arrival_ms <= jobs[i].arrival_ms)
    i++;
  if (i >= n)
    return 0;
  struct sim_job *spare = malloc(n * sizeof(*spare));
  if (spare == NULL)
    return -1;
  struct sim_job *from = jobs, *to = spare;
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = lo + width < n ? lo + width : n;
      size_t hi = mid + width < n ? mid + width : n;
      size_t a = lo, b = mid, k = lo;
      while (a < mid && b < hi)
        to[k++] =
            from[b].arrival_ms < from[a].arrival_ms ? from[b++] : from[a++];
      while (a < mid)
        to[k++] = from[a++];
      while (b < hi)
        to[k++] = from[b++];
    }
    struct sim_job *t = from;
    from = to;
    to = t;
  }
  if (from != jobs)
    memcpy(jobs, from, n * sizeof(*jobs));
  free(spare);
  return 0;
}

int wl_read_trace(struct workload *w, const char *path, FILE *errors) {
  wl_free(w);
  FILE *file = fopen(path, "r");
  if (file == NULL) {
    report(errors, path, 0, "cannot open: %s", strerror(errno));
    return -1;
  }

  struct line_reader lr = {file, NULL, 0, 0};
  char why[256];
  size_t line = 1;
  int64_t window_start_ms = INT64_MAX;
  int failed = 1;
  int rc = read_line(&lr);
  if (rc < 0)
    report(errors, path, line, "out of memory");
  else if (rc == 0 && ferror(file))
    report(errors, path, 0, "read error: %s", strerror(errno));
  else if (rc == 0)
    report(errors, path, line, "empty file: no openb pod list header");
  else if (check_header(lr.buf, why, sizeof(why)) != 0)
    report(errors, path, line, "%s", why);
  else
    failed = 0;

  while (!failed && (rc = read_line(&lr)) == 1) {
    line++;
    /* A blank line holds no pod, so nothing is lost by passing it over. */
    if (lr.len == 0)
      continue;
    /* A NUL would end the fields early and hide the rest of the line. */
    int has_nul = strlen(lr.buf) != lr.len;
    char *fields[TRACE_FIELDS];
    size_t n = split_fields(lr.buf, fields, TRACE_FIELDS);
    struct sim_job job;
    int64_t deletion_ms = 0;
    enum row_kind kind = ROW_MALFORMED;
    if (has_nul)
      snprintf(why, sizeof(why), "the line holds a NUL byte");
    else if (n != TRACE_FIELDS)
      snprintf(why, sizeof(why), "%zu fields, expected %zu", n, TRACE_FIELDS);
    else
      kind = parse_row(fields, &job, &deletion_ms, why, sizeof(why));

    /* Every pod that was deleted, run or not, tells where the window is. */
    if (kind != ROW_MALFORMED && deletion_ms < window_start_ms)
      window_start_ms = deletion_ms;
    if (kind == ROW_MALFORMED) {
      report(errors, path, line, "%s", why);
      w->malformed++;
    } else if (kind == ROW_NEVER_RAN) {
      w->never_ran++;
    } else if (wl_push(w, &job) != 0) {
      report(errors, path, line, "out of memory");
      failed = 1;
    }
  }
  if (!failed && rc < 0) {
    report(errors, path, line + 1, "out of memory");
    failed = 1;
  } else if (!failed && ferror(file)) {
    report(errors, path, 0, "read error after line %zu: %s", line,
           strerror(errno));
    failed = 1;
  }
  free(lr.buf);
  fclose(file);
  if (!failed && sort_by_arrival(w->jobs, w->n) != 0) {
    report(errors, path, 0, "out of memory sorting %zu jobs", w->n);
    failed = 1;
  }
  if (failed) {
    wl_free(w);
    return -1;
  }
  w->window_start_ms = window_start_ms == INT64_MAX ? 0 : window_start_ms;
  return 0;
}

size_t wl_censor(struct workload *w, int how, int64_t window_start_ms,
                 int64_t cap_ms, size_t *capped) {
  size_t early = 0, shortened = 0, kept = 0;
  for (size_t i = 0; i < w->n; i++) {
    struct sim_job *j = &w->jobs[i];
    if (j->arrival_ms >= window_start_ms) {
      if (how == WL_CENSORED_DROP)
        j->arrival_ms -= window_start_ms;
      w->jobs[kept++] = *j;
      continue;
    }
    early++;
    if (how == WL_CENSORED_DROP)
      continue;
    if (how == WL_CENSORED_CAP && j->duration_ms > cap_ms) {
      j->duration_ms = cap_ms;
      shortened++;
    }
    w->jobs[kept++] = *j;
  }
  w->n = kept;
  if (capped != NULL)
    *capped = shortened;
  return early;
}

/* ------------------------------------------------------------------------ */
/* Replay and arrivals                                                        */
/* ------------------------------------------------------------------------ */

int wl_replay(struct workload *w, unsigned times) {
  if (times == 0)
    return -1;
  size_t n = w->n;
  if (n == 0 || times == 1)
    return 0;
  int64_t first = w->jobs[0].arrival_ms, last = first;
  for (size_t i = 1; i < n; i++) {
    if (w->jobs[i].arrival_ms < first)
      first = w->jobs[i].arrival_ms;
    if (w->jobs[i].arrival_ms > last)
      last = w->jobs[i].arrival_ms;
  }
  /* Copy k starts k periods of (last + 1) ms after time 0, which is after
   * every arrival of the copy before only if no arrival is negative. */
  if (first < 0 || last == INT64_MAX ||
      last + 1 > (INT64_MAX - last) / (int64_t)(times - 1))
    return -1;
  if (n > SIZE_MAX / times || reserve(w, n * times) != 0)
    return -1;
  int64_t period_ms = last + 1;
  for (unsigned copy = 1; copy < times; copy++) {
    struct sim_job *to = w->jobs + (size_t)copy * n;
    for (size_t i = 0; i < n; i++) {
      to[i] = w->jobs[i];
      to[i].arrival_ms += period_ms * (int64_t)copy;
    }
  }
  w->n = n * times;
  return 0;
}

void wl_poisson_arrivals(struct workload *w, double load, uint32_t gpus,
                         uint64_t seed) {
  if (w->n == 0)
    return;
  double gpu_work_s = 0, run_s = 0;
  for (size_t i = 0; i < w->n; i++) {
    double seconds = (double)w->jobs[i].duration_ms / 1000.0;
    gpu_work_s += wl_gpu_demand(&w->jobs[i]) * seconds;
    run_s += seconds;
  }
  double n = (double)w->n;
  double rate = gpu_work_s > 0 ? load * gpus / (gpu_work_s / n) : 0;
  /*
   * Without GPU work (CPU-only jobs, zero run times), or without a positive
   * load on some GPUs, there is no GPU load to aim at; the jobs then arrive
   * at mean gaps of (mean run time) / n, all within about one mean run
   * time, so they still overlap and contend. If every run time is 0 too,
   * every job arrives at 0.
   */
  double mean_gap_ms =
      rate > 0 && isfinite(rate) ? 1000.0 / rate : run_s / n / n * 1000.0;

  struct rng r;
  rng_init(&r, seed, STREAM_ARRIVALS);
  /* Rounding the running sum, not each gap, so rounding does not drift. */
  double t_ms = 0;
  w->jobs[0].arrival_ms = 0;
  for (size_t i = 1; i < w->n; i++) {
    t_ms += rng_exponential(&r) * mean_gap_ms;
    /* A vanishing load can push the sum past int64; llround cannot hold
     * it there. */
    w->jobs[i].arrival_ms =
        t_ms < (double)INT64_MAX ? (int64_t)llround(t_ms) : INT64_MAX;
  }
}

void wl_hold_limits(struct workload *w, double f_lo, double f_hi,
                    double no_limit_share, uint64_t seed) {
  struct rng r;
  rng_init(&r, seed, STREAM_LIMITS);
  for (size_t i = 0; i < w->n; i++) {
    struct sim_job *j = &w->jobs[i];
    /* Both draws every time, so that one job's limit does not depend on
     * whether an earlier one declared none. */
    double f = f_lo + (f_hi - f_lo) * rng_unit(&r);
    bool none = rng_unit(&r) < no_limit_share;
    double limit = ceil((double)j->duration_ms * f);
    j->limit_ms = none ? 0 : limit < 1 ? 1 : (int64_t)limit;
  }
}
