/*
 * Event logs: what happened around one job's wait, rebuilt from a run's
 * events (sim_run() records them when asked). They explain a figure: the
 * longest wait of a class, who held what while the job waited, and which
 * younger jobs started before it.
 *
 * The state at a moment comes from the events alone: a job holds its
 * units from its start event to its end event, and waits from its arrival
 * event to its start or reject event. Events are in the order the run made
 * them, so their times never decrease; "before t" means every event with
 * a time below t, so a list of the events from t on starts where the
 * state before t leaves off.
 */
#include "sim.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const CLASS_NAMES[SIM_SMALL + 1] = {
    "cpu-only", "fractional", "whole-gpu", "multi-gpu", "small"};

const char *sim_class_name(int cls) {
  return cls >= 0 && cls <= SIM_SMALL ? CLASS_NAMES[cls] : "?";
}

int sim_class_of(const char *name) {
  for (int c = 0; c <= SIM_SMALL; c++)
    if (strcmp(name, CLASS_NAMES[c]) == 0)
      return c;
  return -1;
}

const char *sim_duration(double s, char *buf, size_t len) {
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

static bool in_class(const struct sim_job *j, int cls) {
  if (cls == SIM_SMALL)
    return j->cls == SIM_CPU_ONLY || j->cls == SIM_FRACTIONAL;
  return j->cls == cls;
}

/* When each job arrived, started and ended (-1: it did not). */
struct job_times {
  int64_t arrive, start, end;
};

static struct job_times *job_times(const struct workload *w,
                                   const struct sim_events *e) {
  struct job_times *t = malloc((w->n ? w->n : 1) * sizeof(*t));
  if (t == NULL)
    return NULL;
  for (size_t i = 0; i < w->n; i++)
    t[i] = (struct job_times){-1, -1, -1};
  for (size_t k = 0; k < e->n; k++) {
    const struct sim_event *ev = &e->ev[k];
    if (ev->kind == SIM_EV_ARRIVE)
      t[ev->job].arrive = ev->t_ms;
    else if (ev->kind == SIM_EV_START)
      t[ev->job].start = ev->t_ms;
    else if (ev->kind == SIM_EV_END)
      t[ev->job].end = ev->t_ms;
  }
  return t;
}

static long longest(const struct workload *w, const struct job_times *t,
                    int cls) {
  long best = -1;
  int64_t best_wait = -1;
  for (size_t i = 0; i < w->n; i++) {
    if (!in_class(&w->jobs[i], cls) || t[i].start < 0)
      continue;
    int64_t wait = t[i].start - t[i].arrive;
    if (wait > best_wait) {
      best_wait = wait;
      best = (long)i;
    }
  }
  return best;
}

long sim_longest_wait(const struct workload *w, const struct sim_events *e,
                      int cls) {
  struct job_times *t = job_times(w, e);
  if (t == NULL)
    return -1;
  long best = longest(w, t, cls);
  free(t);
  return best;
}

/* ------------------------------------------------------------------------ */
/* Printing                                                                  */
/* ------------------------------------------------------------------------ */

struct log {
  FILE *out;
  const struct workload *w;
  const struct job_times *t;
  size_t limit;
};

/* "job 3 (multi-gpu; 2 GPUs, 1 vCPUs, 100 MiB)" */
static void print_job(const struct log *lg, size_t i) {
  const struct sim_job *j = &lg->w->jobs[i];
  fprintf(lg->out, "job %zu (%s; ", i, sim_class_name(j->cls));
  if (j->gpu == SIM_GPU_FRACTION)
    fprintf(lg->out, "%g GPU", (double)j->gpu_amount / 1000.0);
  else if (j->gpu == SIM_GPU_WHOLE)
    fprintf(lg->out, "%lld GPU%s", (long long)j->gpu_amount,
            j->gpu_amount == 1 ? "" : "s");
  else
    fprintf(lg->out, "no GPU");
  fprintf(lg->out, ", %g vCPUs, %lld MiB)", (double)j->cpu_milli / 1000.0,
          (long long)j->memory_mib);
}

/* A moment: its seconds, and the same as people read it. */
static void print_when(const struct log *lg, int64_t t_ms) {
  char d[16];
  double s = (double)t_ms / 1000.0;
  fprintf(lg->out, "%12.0fs %7s", s, sim_duration(s, d, sizeof(d)));
}

/* Row `k` of a list; `rows` says what each is. */
typedef void (*row_fn)(const struct log *lg, const void *rows, size_t k);

/* Print n rows, or the first and last limit/2 and a count of the rest. */
static void print_rows(const struct log *lg, const void *rows, size_t n,
                       row_fn row) {
  size_t head = n, tail = 0;
  if (lg->limit > 0 && n > lg->limit) {
    tail = lg->limit / 2;
    head = lg->limit - tail;
  }
  for (size_t k = 0; k < head; k++)
    row(lg, rows, k);
  if (tail > 0)
    fprintf(lg->out, "    ... %zu left out ...\n", n - head - tail);
  for (size_t k = n - tail; k < n; k++)
    row(lg, rows, k);
}

static void holder_row(const struct log *lg, const void *rows, size_t k) {
  size_t i = ((const size_t *)rows)[k];
  char a[16], b[16];
  fprintf(lg->out, "    ");
  print_job(lg, i);
  fprintf(lg->out, " since %s, until %s\n",
          sim_duration((double)lg->t[i].start / 1000.0, a, sizeof(a)),
          sim_duration((double)lg->t[i].end / 1000.0, b, sizeof(b)));
}

static void waiter_row(const struct log *lg, const void *rows, size_t k) {
  size_t i = ((const size_t *)rows)[k];
  char a[16];
  fprintf(lg->out, "    ");
  print_job(lg, i);
  fprintf(lg->out, " since %s\n",
          sim_duration((double)lg->t[i].arrive / 1000.0, a, sizeof(a)));
}

/* Who holds units and who waits ahead of job `me` after the first `k`
 * events; `state` is scratch for every job. */
static void print_state(const struct log *lg, const struct sim_events *e,
                        size_t k, size_t me, unsigned char *state, size_t *rows,
                        const char *when) {
  enum { PENDING, WAITING, RUNNING, OVER };
  memset(state, PENDING, lg->w->n);
  for (size_t i = 0; i < k; i++) {
    const struct sim_event *ev = &e->ev[i];
    state[ev->job] = ev->kind == SIM_EV_ARRIVE  ? WAITING
                     : ev->kind == SIM_EV_START ? RUNNING
                                                : OVER;
  }
  size_t n = 0;
  for (size_t i = 0; i < lg->w->n; i++)
    if (state[i] == RUNNING)
      rows[n++] = i;
  fprintf(lg->out, "  %s, %zu job%s hold%s units%s\n", when, n,
          n == 1 ? "" : "s", n == 1 ? "s" : "", n > 0 ? ":" : "");
  print_rows(lg, rows, n, holder_row);
  n = 0;
  size_t behind = 0;
  for (size_t i = 0; i < lg->w->n; i++) {
    if (state[i] == WAITING && i < me)
      rows[n++] = i;
    else if (state[i] == WAITING && i > me)
      behind++;
  }
  if (n == 0)
    fprintf(lg->out, "  and no older job waits ahead of it");
  else
    fprintf(lg->out, "  and %zu older job%s wait%s ahead of it", n,
            n == 1 ? "" : "s", n == 1 ? "s" : "");
  fprintf(lg->out, " (%zu younger behind)%s\n", behind, n > 0 ? ":" : "");
  print_rows(lg, rows, n, waiter_row);
}

struct window {
  const struct sim_events *e;
  size_t first;   /* the window's first event */
  size_t me;      /* the job explained */
  size_t started; /* its start event */
};

static void event_row(const struct log *lg, const void *rows, size_t k) {
  const struct window *win = rows;
  size_t at = win->first + k;
  const struct sim_event *ev = &win->e->ev[at];
  static const char *const KINDS[] = {"arrive", "start", "end", "reject"};
  fprintf(lg->out, "  ");
  print_when(lg, ev->t_ms);
  fprintf(lg->out, "  %-6s ", KINDS[ev->kind]);
  print_job(lg, ev->job);
  if (ev->job == win->me)
    fprintf(lg->out, "  <- this job");
  else if (ev->kind == SIM_EV_START && ev->job > win->me && at < win->started)
    fprintf(lg->out, "  <- younger, started first");
  fprintf(lg->out, "\n");
}

int sim_explain(FILE *out, const struct workload *w, const struct sim_events *e,
                int cls, int64_t window_ms, size_t limit) {
  struct job_times *t = job_times(w, e);
  unsigned char *state = malloc(w->n ? w->n : 1);
  size_t *rows = malloc((w->n ? w->n : 1) * sizeof(*rows));
  long found = t != NULL ? longest(w, t, cls) : -1;
  if (found < 0 || state == NULL || rows == NULL) {
    free(t);
    free(state);
    free(rows);
    return -1;
  }
  size_t me = (size_t)found;
  struct log lg = {out, w, t, limit};
  int64_t from = t[me].arrive, to = t[me].start;
  bool whole = window_ms <= 0 || to - from <= window_ms;
  if (!whole)
    from = to - window_ms;

  char a[16], b[16], c[16], d[16];
  fprintf(out, "event log: the longest %s wait\n  ", sim_class_name(cls));
  print_job(&lg, me);
  fprintf(
      out, " arrived at %s, started at %s: waited %s, ran %s\n",
      sim_duration((double)t[me].arrive / 1000.0, a, sizeof(a)),
      sim_duration((double)t[me].start / 1000.0, b, sizeof(b)),
      sim_duration((double)(t[me].start - t[me].arrive) / 1000.0, c, sizeof(c)),
      sim_duration((double)(t[me].end - t[me].start) / 1000.0, d, sizeof(d)));
  fprintf(out, "  window: %s to %s, %s\n",
          sim_duration((double)from / 1000.0, a, sizeof(a)),
          sim_duration((double)to / 1000.0, b, sizeof(b)),
          whole ? "its whole wait" : "the end of its wait");

  struct window win = {e, 0, me, 0};
  while (win.first < e->n && e->ev[win.first].t_ms < from)
    win.first++;
  size_t last = win.first; /* one past the window's last event */
  while (last < e->n && e->ev[last].t_ms <= to)
    last++;
  for (size_t k = win.first; k < last; k++)
    if (e->ev[k].job == me && e->ev[k].kind == SIM_EV_START)
      win.started = k;
  size_t before_start = win.started;
  while (before_start > 0 && e->ev[before_start - 1].t_ms == to)
    before_start--;

  print_state(&lg, e, win.first, me, state, rows, "as the window opens");
  fprintf(out, "  %zu event%s in the window:\n", last - win.first,
          last - win.first == 1 ? "" : "s");
  print_rows(&lg, &win, last - win.first, event_row);
  print_state(&lg, e, before_start, me, state, rows, "just before it started");
  free(t);
  free(state);
  free(rows);
  return 0;
}
