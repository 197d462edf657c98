/*
 * The simulator: a discrete-event simulation on a virtual clock. Each job
 * arrives, asks for its resources, runs for its duration once granted, and
 * releases. Time moves from one event to the next (an arrival, or a job
 * ending); nothing sleeps.
 *
 * Every policy runs on the real library, which keeps the books of who holds
 * what and places fractions and whole GPUs on devices by its rules, so the
 * policies differ only in who they let start when:
 * - libcronoq (default or staged claims): every job is submitted with the
 *   callback API when it arrives; the library's waiting policy decides. The
 *   pool runs on the simulation's clock (manual timers).
 * - strict FIFO, greedy first-fit and the static split are the reference
 *   schedulers of policies.c: they keep their own queues and only ever
 *   try, so the library never queues anything for them.
 *
 * What is measured: the makespan and its lower bound, average use of each
 * resource, waits per class, how many jobs a younger job overtook and the
 * longest time any of them waited after that, how long a device blocked
 * the oldest waiter, and the library calls made per second of CPU. The run
 * checks its own books at the end: every job ran or was rejected, and
 * every unit came back. On request it records every event, for
 * sim_explain().
 */
#include "sim.h"

#include "policies.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *sim_policy_name(int policy) {
  switch (policy) {
  case SIM_CRONOQ:
    return "libcronoq";
  case SIM_CRONOQ_STAGED:
    return "libcronoq-staged";
  case SIM_FIFO:
    return "strict-fifo";
  case SIM_GREEDY:
    return "greedy";
  case SIM_STATIC:
    return "static-split";
  case SIM_CRONOQ_BACKFILL:
    return "libcronoq-backfill";
  default:
    return "?";
  }
}

int sim_policy_of(const char *name) {
  for (int p = 0; p < SIM_POLICIES; p++)
    if (strcmp(name, sim_policy_name(p)) == 0)
      return p;
  return -1;
}

/* Whether the job fits the pool at all: what every policy can run. */
static bool fits_shape(const struct sim_job *j,
                       const struct pool_shape *shape) {
  if (j->gpu == SIM_GPU_WHOLE && j->gpu_amount > (int64_t)shape->gpus)
    return false;
  if (j->gpu == SIM_GPU_FRACTION && shape->gpus == 0)
    return false;
  return j->cpu_milli <= shape->cpu_milli && j->memory_mib <= shape->memory_mib;
}

/* The bound over the jobs `ran` says ran (all that fit, when NULL). */
static double lower_bound(const struct workload *w,
                          const struct pool_shape *shape, const bool *ran) {
  double gpu = 0, cpu = 0, mem = 0, latest = 0;
  for (size_t i = 0; i < w->n; i++) {
    const struct sim_job *j = &w->jobs[i];
    if (ran != NULL ? !ran[i] : !fits_shape(j, shape))
      continue;
    double d = (double)j->duration_ms / 1000.0;
    gpu += wl_gpu_demand(j) * d;
    cpu += (double)j->cpu_milli * d;
    mem += (double)j->memory_mib * d;
    double end = (double)(j->arrival_ms + j->duration_ms) / 1000.0;
    if (end > latest)
      latest = end;
  }
  double bound = latest;
  if (shape->gpus > 0 && gpu / shape->gpus > bound)
    bound = gpu / shape->gpus;
  if (cpu / (double)shape->cpu_milli > bound)
    bound = cpu / (double)shape->cpu_milli;
  if (mem / (double)shape->memory_mib > bound)
    bound = mem / (double)shape->memory_mib;
  return bound;
}

double sim_lower_bound(const struct workload *w,
                       const struct pool_shape *shape) {
  return lower_bound(w, shape, NULL);
}

/* ------------------------------------------------------------------------ */
/* The event loop                                                            */
/* ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double quantile(double *v, size_t n, double q) {
  if (n == 0)
    return 0;
  size_t k = (size_t)ceil(q * (double)n);
  if (k == 0)
    k = 1;
  return v[k - 1];
}

/* A min-heap of running jobs by end time (ties by job index, for
 * determinism). */
static bool ends_before(const struct sjob *a, const struct sjob *b) {
  if (a->end_ms != b->end_ms)
    return a->end_ms < b->end_ms;
  return a->index < b->index;
}

static void heap_push(struct sim *s, struct sjob *j) {
  size_t i = s->heap_n++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!ends_before(j, s->heap[up]))
      break;
    s->heap[i] = s->heap[up];
    i = up;
  }
  s->heap[i] = j;
}

static struct sjob *heap_pop(struct sim *s) {
  struct sjob *top = s->heap[0];
  struct sjob *last = s->heap[--s->heap_n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= s->heap_n)
      break;
    if (c + 1 < s->heap_n && ends_before(s->heap[c + 1], s->heap[c]))
      c++;
    if (!ends_before(s->heap[c], last))
      break;
    s->heap[i] = s->heap[c];
    i = c;
  }
  if (s->heap_n > 0)
    s->heap[i] = last;
  return top;
}

/* Whether a device blocks the head `j` now (see struct sim_result). What
 * is free in total settles most cases without asking the library. */
static bool device_blocks(struct sim *s, const struct sjob *j) {
  if (j->job->gpu == SIM_GPU_NONE)
    return false;
  if (j->gpu_milli > (int64_t)s->shape->gpus * 1000 - s->used_gpu_milli)
    return true;
  return !sim_gpus_fit(s, j);
}

/* Move the clock to `t`, adding what was in use meanwhile to the areas,
 * and the time the head waited (and was blocked by a device) to theirs:
 * between two events nothing changes. */
static void advance(struct sim *s, int64_t t) {
  double dt = (double)(t - s->now_ms) / 1000.0;
  s->area_gpu += (double)s->used_gpu_milli / 1000.0 * dt;
  s->area_cpu += (double)s->used_cpu_milli * dt;
  s->area_mem += (double)s->used_mem_mib * dt;
  if (t > s->now_ms && s->waiting_head != NULL) {
    s->head_waiting_ms += t - s->now_ms;
    if (device_blocks(s, s->waiting_head))
      s->head_blocked_ms += t - s->now_ms;
  }
  s->now_ms = t;
}

/* Room for every event a run can have: each job arrives, then starts and
 * ends or is rejected. */
static int events_open(struct sim_events *e, size_t jobs) {
  e->n = 0;
  e->ev = jobs <= (SIZE_MAX / sizeof(*e->ev) - 1) / 3
              ? malloc((3 * jobs + 1) * sizeof(*e->ev))
              : NULL;
  return e->ev == NULL ? -1 : 0;
}

static void note_event(struct sim *s, const struct sjob *j, int kind) {
  if (s->events != NULL)
    s->events->ev[s->events->n++] =
        (struct sim_event){s->now_ms, j->index, kind};
}

void sim_events_free(struct sim_events *e) {
  if (e == NULL)
    return;
  free(e->ev);
  e->ev = NULL;
  e->n = 0;
}

static void note_use(struct sim *s) {
  if (s->opts->timeline != NULL)
    fprintf(s->opts->timeline, "%.3f %.3f %.3f %.3f\n",
            (double)s->now_ms / 1000.0, (double)s->used_gpu_milli / 1000.0,
            (double)s->used_cpu_milli / 1000.0, (double)s->used_mem_mib);
}

/* The job leaves the waiting list. When it leaves to start, every older job
 * still waiting has now been passed over. The jobs already passed over are
 * a prefix of the list (they are older than any job that was not), so
 * marking costs O(1) amortised. */
static void unlink_waiting(struct sim *s, struct sjob *j, bool started) {
  for (struct sjob *p = s->first_unmarked;
       started && p != NULL && p->index < j->index; p = p->next) {
    p->passed_at = s->now_ms;
    s->first_unmarked = p->next;
  }
  if (s->first_unmarked == j)
    s->first_unmarked = j->next;
  if (j->prev != NULL)
    j->prev->next = j->next;
  else
    s->waiting_head = j->next;
  if (j->next != NULL)
    j->next->prev = j->prev;
  else
    s->waiting_tail = j->prev;
  j->prev = j->next = NULL;
}

void sim_started(struct sim *s, struct sjob *j) {
  note_event(s, j, SIM_EV_START);
  unlink_waiting(s, j, true);
  j->state = SJOB_RUNNING;
  j->start_ms = s->now_ms;
  j->end_ms = s->now_ms + j->job->duration_ms;
  s->used_gpu_milli += j->gpu_milli;
  s->used_cpu_milli += j->job->cpu_milli;
  s->used_mem_mib += j->job->memory_mib;
  heap_push(s, j);
  note_use(s);
}

void sim_rejected(struct sim *s, struct sjob *j) {
  note_event(s, j, SIM_EV_REJECT);
  unlink_waiting(s, j, false);
  j->state = SJOB_REJECTED;
  s->rejected++;
}

static void arrive(struct sim *s, struct sjob *j) {
  note_event(s, j, SIM_EV_ARRIVE);
  j->state = SJOB_WAITING;
  j->prev = s->waiting_tail;
  j->next = NULL;
  if (s->waiting_tail != NULL)
    s->waiting_tail->next = j;
  else
    s->waiting_head = j;
  s->waiting_tail = j;
  if (s->first_unmarked == NULL)
    s->first_unmarked = j;
  s->policy->arrive(s, j);
}

static void finish(struct sim *s, struct sjob *j) {
  note_event(s, j, SIM_EV_END);
  j->state = SJOB_DONE;
  s->used_gpu_milli -= j->gpu_milli;
  s->used_cpu_milli -= j->job->cpu_milli;
  s->used_mem_mib -= j->job->memory_mib;
  s->policy->finish(s, j);
  note_use(s);
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void summarise(struct sim *s, struct sim_result *out) {
  size_t counts[SIM_CLASSES] = {0};
  double *waits[SIM_CLASSES];
  for (int c = 0; c < SIM_CLASSES; c++)
    waits[c] = s->opts->wait_samples[c] != NULL
                   ? s->opts->wait_samples[c]
                   : malloc((s->w->n + 1) * sizeof(double));
  double *small = malloc((s->w->n + 1) * sizeof(double));
  size_t n_small = 0;
  int64_t last_end = 0;
  for (size_t i = 0; i < s->w->n; i++) {
    struct sjob *j = &s->jobs[i];
    if (s->opts->start_ms != NULL)
      s->opts->start_ms[i] = j->state == SJOB_DONE ? j->start_ms : -1;
    if (j->state != SJOB_DONE)
      continue;
    int c = j->job->cls;
    double wait = (double)(j->start_ms - j->job->arrival_ms) / 1000.0;
    if (waits[c] != NULL)
      waits[c][counts[c]] = wait;
    counts[c]++;
    if (small != NULL && (c == SIM_CPU_ONLY || c == SIM_FRACTIONAL))
      small[n_small++] = wait;
    if (j->end_ms > last_end)
      last_end = j->end_ms;
    if (j->passed_at >= 0) {
      out->passed_over++;
      double t = (double)(j->start_ms - j->passed_at) / 1000.0;
      if (t > out->longest_passed_over_s)
        out->longest_passed_over_s = t;
    }
  }
  out->jobs = s->w->n - s->rejected;
  out->rejected = s->rejected;
  out->makespan_s = (double)last_end / 1000.0;
  /* Over the jobs this run ran: the static split rejects some that the
   * pool could run, and its bound is that of the rest. */
  bool *ran = malloc((s->w->n + 1) * sizeof(bool));
  if (ran != NULL) {
    for (size_t i = 0; i < s->w->n; i++)
      ran[i] = s->jobs[i].state == SJOB_DONE;
    out->lower_bound_s = lower_bound(s->w, s->shape, ran);
    free(ran);
  } else {
    out->lower_bound_s = sim_lower_bound(s->w, s->shape);
  }
  double span = out->makespan_s > 0 ? out->makespan_s : 1;
  out->util_gpu =
      s->shape->gpus > 0 ? s->area_gpu / (s->shape->gpus * span) : 0;
  out->util_cpu = s->area_cpu / ((double)s->shape->cpu_milli * span);
  out->util_mem = s->area_mem / ((double)s->shape->memory_mib * span);
  for (int c = 0; c < SIM_CLASSES; c++) {
    struct sim_waits *wt = &out->wait[c];
    wt->jobs = counts[c];
    if (waits[c] != NULL && counts[c] > 0) {
      /* Sorted in place: the caller's arrays come back sorted. */
      qsort(waits[c], counts[c], sizeof(double), cmp_double);
      wt->p50_s = quantile(waits[c], counts[c], 0.50);
      wt->p99_s = quantile(waits[c], counts[c], 0.99);
      wt->max_s = waits[c][counts[c] - 1];
    }
    if (waits[c] != s->opts->wait_samples[c])
      free(waits[c]);
  }
  out->small.jobs = n_small;
  if (small != NULL && n_small > 0) {
    qsort(small, n_small, sizeof(double), cmp_double);
    out->small.p50_s = quantile(small, n_small, 0.50);
    out->small.p99_s = quantile(small, n_small, 0.99);
    out->small.max_s = small[n_small - 1];
  }
  free(small);
}

int sim_run(const struct workload *w, const struct pool_shape *shape,
            const struct sim_opts *opts, struct sim_result *out) {
  memset(out, 0, sizeof(*out));
  out->policy = opts->policy;
  struct sim s;
  memset(&s, 0, sizeof(s));
  s.w = w;
  s.shape = shape;
  s.opts = opts;
  s.jobs = calloc(w->n ? w->n : 1, sizeof(*s.jobs));
  s.heap = calloc(w->n ? w->n : 1, sizeof(*s.heap));
  if (opts->events != NULL && events_open(opts->events, w->n) == 0)
    s.events = opts->events;
  if (s.jobs == NULL || s.heap == NULL ||
      (opts->events != NULL && s.events == NULL)) {
    free(s.jobs);
    free(s.heap);
    return -1;
  }
  for (size_t i = 0; i < w->n; i++) {
    s.jobs[i].job = &w->jobs[i];
    s.jobs[i].sim = &s;
    s.jobs[i].index = i;
    s.jobs[i].passed_at = -1;
    s.jobs[i].gpu_milli = (int64_t)llround(wl_gpu_demand(&w->jobs[i]) * 1000);
  }
  s.policy = sim_policy_ops(opts->policy);
  int rc = s.policy == NULL ? -1 : s.policy->open(&s);

  double wall0 = wall_seconds(), cpu0 = cpu_seconds();
  size_t next = 0;
  while (rc == 0 && (next < w->n || s.heap_n > 0)) {
    /* Ends before arrivals at the same instant: what frees up is there for
     * whoever arrives then. */
    if (s.heap_n > 0 &&
        (next == w->n || s.heap[0]->end_ms <= w->jobs[next].arrival_ms)) {
      struct sjob *j = heap_pop(&s);
      advance(&s, j->end_ms);
      finish(&s, j);
    } else {
      advance(&s, w->jobs[next].arrival_ms);
      arrive(&s, &s.jobs[next]);
      next++;
    }
  }
  out->wall_s = wall_seconds() - wall0;
  out->cpu_s = cpu_seconds() - cpu0;

  if (rc == 0) {
    /* Check the books: everyone ran or was rejected, all units are back. */
    if (s.waiting_head != NULL || s.used_gpu_milli != 0 ||
        s.used_cpu_milli != 0 || s.used_mem_mib != 0)
      rc = -1;
    for (size_t i = 0; rc == 0 && i < w->n; i++)
      if (s.jobs[i].state != SJOB_DONE && s.jobs[i].state != SJOB_REJECTED)
        rc = -1;
  }
  if (s.policy != NULL && s.policy->close(&s) != 0)
    rc = -1;
  out->decisions = s.decisions;
  out->backfilled = s.backfilled;
  out->late_heads = s.late_heads;
  out->overdue = s.overdue;
  out->head_waiting_s = (double)s.head_waiting_ms / 1000.0;
  out->head_device_blocked_s = (double)s.head_blocked_ms / 1000.0;
  if (rc == 0)
    summarise(&s, out);
  else
    sim_events_free(opts->events);
  free(s.jobs);
  free(s.heap);
  return rc;
}
