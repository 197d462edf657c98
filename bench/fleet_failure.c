/*
 * cronoq-bench fleet-failure: how a fleet pool recovers from the failures
 * of its holders, as distributions over many trials, against the bounds
 * docs/OPERATIONS.md states, on a redis-server the bench starts itself:
 * - kills: a holder process is SIGKILLed while it holds a licence of 1 that
 *   a live process waits for in a blocking acquire; the time from the kill
 *   to that grant, min / p50 / p90 / max, against TTL + one heartbeat
 *   interval (the bound; the goal is within 10% of it);
 * - pauses: a holder is SIGSTOPped until its lease has gone to the waiter
 *   (past its TTL), then SIGCONTed: how many CQ_EVENT_LOST it gets in the
 *   trial (the goal: exactly one, in every trial), and the time from its
 *   local deadline, and from the SIGCONT, to the event.
 * A short TTL (500 ms, heartbeat 100 ms) keeps 100 trials of each within
 * about two minutes. Processes are forked before any pool exists in the
 * bench's own process; each reports through a pipe, and the bench talks to
 * the waiter and the paused holder through another. Every wait is bounded.
 */
#include "fleet_bench.h"
#include "harness.h"
#include "lines.h"

#include "cronoq/cronoq_fleet.h"
#include "redis_harness.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define TTL_MS 500
#define HEARTBEAT_MS 100
#define MAX_TRIALS 100000

static int opt_kills = -1, opt_pauses = -1;
static struct cqr_server srv;
static char ns[32];

int cqb_fleet_failure_parse_option(int argc, char **argv, int i) {
  if (i + 1 >= argc)
    return 0;
  if (strcmp(argv[i], "--kills") == 0)
    opt_kills = (int)cqb_number_arg(argv[i], argv[i + 1], 0, MAX_TRIALS);
  else if (strcmp(argv[i], "--pauses") == 0)
    opt_pauses = (int)cqb_number_arg(argv[i], argv[i + 1], 0, MAX_TRIALS);
  else
    return 0;
  return 2;
}

/* ------------------------------------------------------------------------ */
/* Child processes and their pipes                                          */
/* ------------------------------------------------------------------------ */

struct child {
  pid_t pid;
  int in;  /* the child's lines */
  int out; /* commands to it */
};

static struct child fork_child(int (*fn)(int in, int out)) {
  int up[2], down[2];
  if (pipe(up) != 0 || pipe(down) != 0)
    cqb_fail("pipe failed");
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0)
    cqb_fail("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(up[0]);
    close(down[1]);
    _exit(fn(down[0], up[1]));
  }
  close(up[1]);
  close(down[0]);
  return (struct child){pid, up[0], down[1]};
}

static void child_end(struct child *c) {
  close(c->out);
  int64_t give_up = cq_now() + 10000;
  int status;
  while (waitpid(c->pid, &status, WNOHANG) != c->pid) {
    if (cq_now() > give_up) {
      kill(c->pid, SIGKILL);
      waitpid(c->pid, &status, 0);
      break;
    }
    usleep(2000);
  }
  close(c->in);
}

static void expect(struct child *c, const char *want, char *line, size_t len) {
  read_line(c->in, line, len, 30000);
  if (strncmp(line, want, strlen(want)) != 0)
    cqb_fail("fleet-failure: expected \"%s\" from a child, got \"%s\"", want,
             line);
}

/* ------------------------------------------------------------------------ */
/* The processes                                                             */
/* ------------------------------------------------------------------------ */

static _Atomic int lost_events;
static _Atomic int64_t lost_at_ms;  /* the first event's time */
static _Atomic int64_t deadline_ms; /* the lost session's local deadline */

/* The paused holder's pool: at its first CQ_EVENT_LOST of a trial, the
 * deadline of the session lost, as the pool recorded it at the loss (a
 * new session's deadline would say nothing about the one missed). */
static void on_event(const cq_event *ev, void *arg) {
  if (ev->type != CQ_EVENT_LOST || atomic_fetch_add(&lost_events, 1) != 0)
    return;
  atomic_store(&lost_at_ms, cq_now());
  cq_pool *const *p = arg;
  cq_fleet_stats st = CQ_FLEET_STATS_INIT;
  if (*p != NULL && cq_fleet_stats_get(*p, &st) == 0)
    atomic_store(&deadline_ms, st.lost_deadline_ms);
}

static cq_pool *open_licence(cq_event_fn fn, cq_pool **self, cq_req *req) {
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.host = "bench";
  o.ttl_ms = TTL_MS;
  o.heartbeat_ms = HEARTBEAT_MS;
  o.on_event = fn;
  o.event_arg = self;
  cq_pool *p = NULL;
  if (cq_fleet_open(&p, srv.url, ns, &o) != 0 ||
      cq_budget_add(p, "licence", 1) != 0 || cq_req_init(req, p) != 0 ||
      cq_req_add(req, "licence", 1) != 0) {
    fprintf(stderr, "fleet-failure child: %s\n", cq_fleet_error());
    _exit(2);
  }
  if (self != NULL)
    *self = p;
  return p;
}

/* The waiter: on each "w", a blocking acquire; says when it was granted
 * (nanoseconds, monotonic) and releases. */
static int waiter_main(int in, int out) {
  cq_req req;
  cq_pool *p = open_licence(NULL, NULL, &req);
  say(out, "ready\n");
  char cmd[16];
  for (int i = 0; i < 2 * MAX_TRIALS; i++) {
    read_line(in, cmd, sizeof(cmd), 600000);
    if (strcmp(cmd, "w") != 0)
      break;
    cq_grant g;
    cq_grant_init(&g);
    int rc = cq_grant_acquire(p, &g, &req, cq_now() + 30000);
    say(out, "granted %s %" PRId64 "\n", cq_err_name(rc), cqb_now_ns());
    if (rc == 0)
      cq_grant_release(p, &g);
  }
  cq_pool_destroy(p);
  return 0;
}

/* A holder to be killed: takes the licence, says so, waits for SIGKILL. */
static int killed_main(int in, int out) {
  (void)in;
  cq_req req;
  cq_pool *p = open_licence(NULL, NULL, &req);
  cq_grant g;
  cq_grant_init(&g);
  if (cq_grant_acquire(p, &g, &req, cq_now() + 30000) != 0)
    return 2;
  say(out, "held\n");
  for (int i = 0; i < 600; i++)
    sleep(1); /* until SIGKILL; bounded all the same */
  return 0;
}

/* The paused holder: on each "h", takes the licence and says so; it is
 * stopped and resumed; then it says how many CQ_EVENT_LOST came (waiting
 * a while for a second), the event's time and the deadline it missed. */
static int paused_main(int in, int out) {
  cq_req req;
  static cq_pool *self; /* the event hook's: set once the pool is open */
  cq_pool *p = open_licence(on_event, &self, &req);
  say(out, "ready\n");
  char cmd[16];
  for (int i = 0; i < MAX_TRIALS; i++) {
    read_line(in, cmd, sizeof(cmd), 600000);
    if (strcmp(cmd, "h") != 0)
      break;
    atomic_store(&lost_events, 0);
    atomic_store(&deadline_ms, 0);
    cq_grant g;
    cq_grant_init(&g);
    int rc = cq_grant_acquire(p, &g, &req, cq_now() + 30000);
    say(out, "held %s\n", cq_err_name(rc));
    read_line(in, cmd, sizeof(cmd), 600000); /* "r": resumed */
    for (int k = 0; k < 1000 && atomic_load(&lost_events) == 0; k++)
      usleep(5000);
    usleep(5 * HEARTBEAT_MS * 1000); /* a second event would come by now */
    say(out, "lost %d %" PRId64 " %" PRId64 " %d\n", atomic_load(&lost_events),
        atomic_load(&lost_at_ms), atomic_load(&deadline_ms),
        cq_grant_is_held(&g));
    cq_grant_release(p, &g); /* CQ_ESTATE: it holds nothing */
  }
  cq_pool_destroy(p);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The trials                                                                */
/* ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(const double *sorted, int n, double p) {
  int i = (int)(p * (n - 1) + 0.5);
  return sorted[i];
}

/* Whether the server has a waiter queued in the namespace. */
static bool waiter_queued(redisContext *c) {
  redisReply *r = redisCommand(c, "ZCARD cq:{%s}:Q", ns);
  bool queued = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer > 0;
  freeReplyObject(r);
  return queued;
}

static void wait_queued(redisContext *c) {
  for (int i = 0; i < 10000 && !waiter_queued(c); i++)
    usleep(1000);
  if (!waiter_queued(c))
    cqb_fail("fleet-failure: the waiter never queued");
}

/* The time from the kill to the waiter's grant, in ms, of n trials. */
static void kills(struct child *waiter, redisContext *c, int n) {
  double *ms = calloc((size_t)n, sizeof(*ms));
  if (ms == NULL)
    cqb_fail("out of memory");
  char line[128];
  for (int t = 0; t < n; t++) {
    struct child h = fork_child(killed_main);
    expect(&h, "held", line, sizeof(line));
    say(waiter->out, "w\n");
    wait_queued(c);
    int64_t killed = cqb_now_ns();
    kill(h.pid, SIGKILL);
    expect(waiter, "granted OK", line, sizeof(line));
    int64_t at = 0;
    if (sscanf(line, "granted OK %" SCNd64, &at) != 1)
      cqb_fail("fleet-failure: \"%s\"", line);
    ms[t] = (double)(at - killed) / 1e6;
    child_end(&h);
    cqb_progress_tick("fleet-failure kills");
  }
  qsort(ms, (size_t)n, sizeof(*ms), cmp_double);
  double bound = TTL_MS + HEARTBEAT_MS;
  struct cqb_stat b = {bound, bound, bound};
  const char *g = "fleet failure: a holder killed";
  cqb_figure(g, "TTL + heartbeat (the bound)", "ms", b, NULL, NULL, 0);
  struct cqb_stat s50 = {pct(ms, n, 0.5), ms[0], ms[n - 1]};
  struct cqb_stat s90 = {pct(ms, n, 0.9), pct(ms, n, 0.9), pct(ms, n, 0.9)};
  struct cqb_stat smax = {ms[n - 1], ms[n - 1], ms[n - 1]};
  cqb_figure(g, "kill to the waiter's grant, p50 (min..max)", "ms", s50,
             "TTL + heartbeat (the bound)", &b, 1.10);
  cqb_figure(g, "kill to the waiter's grant, p90", "ms", s90,
             "TTL + heartbeat (the bound)", &b, 1.10);
  cqb_figure(g, "kill to the waiter's grant, max", "ms", smax,
             "TTL + heartbeat (the bound)", &b, 1.10);
  cqb_note("fleet-failure: %d kills: min %.1f, p50 %.1f, p90 %.1f, max %.1f "
           "ms; bound TTL %d + heartbeat %d = %.0f ms (max / bound %.3f)",
           n, ms[0], pct(ms, n, 0.5), pct(ms, n, 0.9), ms[n - 1], TTL_MS,
           HEARTBEAT_MS, bound, ms[n - 1] / bound);
  free(ms);
}

/* Lost-lease events per trial, and the times to the event, of n trials. */
static void pauses(struct child *waiter, redisContext *c, int n) {
  double *late = calloc((size_t)n, sizeof(*late));
  double *resume = calloc((size_t)n, sizeof(*resume));
  if (late == NULL || resume == NULL)
    cqb_fail("out of memory");
  struct child h = fork_child(paused_main);
  char line[128];
  expect(&h, "ready", line, sizeof(line));
  int once = 0, never = 0, twice = 0, still_held = 0, timed = 0;
  for (int t = 0; t < n; t++) {
    say(h.out, "h\n");
    expect(&h, "held OK", line, sizeof(line));
    kill(h.pid, SIGSTOP);
    /* Stopped until the lease has moved: past the server's deadline. */
    say(waiter->out, "w\n");
    wait_queued(c);
    expect(waiter, "granted OK", line, sizeof(line));
    int64_t resumed = cq_now();
    kill(h.pid, SIGCONT);
    say(h.out, "r\n");
    read_line(h.in, line, sizeof(line), 30000);
    int count = -1, held = -1;
    int64_t at = 0, deadline = 0;
    if (sscanf(line, "lost %d %" SCNd64 " %" SCNd64 " %d", &count, &at,
               &deadline, &held) != 4)
      cqb_fail("fleet-failure: \"%s\"", line);
    once += count == 1;
    never += count == 0;
    twice += count > 1;
    still_held += held != 0;
    if (count >= 1 && deadline > 0) {
      late[timed] = (double)(at - deadline);
      resume[timed++] = (double)(at - resumed);
    }
    cqb_progress_tick("fleet-failure pauses");
  }
  say(h.out, "q\n");
  child_end(&h);
  const char *g = "fleet failure: a holder paused past its TTL";
  struct cqb_stat share = {100.0 * once / n, 100.0 * once / n,
                           100.0 * once / n};
  cqb_figure(g, "trials told exactly once (CQ_EVENT_LOST)", "%", share, NULL,
             NULL, 0);
  if (timed > 0) {
    qsort(late, (size_t)timed, sizeof(*late), cmp_double);
    qsort(resume, (size_t)timed, sizeof(*resume), cmp_double);
    struct cqb_stat l = {pct(late, timed, 0.5), late[0], late[timed - 1]};
    struct cqb_stat r = {pct(resume, timed, 0.5), resume[0], resume[timed - 1]};
    cqb_figure(g, "local deadline to the event, p50 (min..max)", "ms", l, NULL,
               NULL, 0);
    cqb_figure(g, "SIGCONT to the event, p50 (min..max)", "ms", r, NULL, NULL,
               0);
    cqb_note("fleet-failure: %d pauses: told once %d, never %d, twice or "
             "more %d, still held after %d; local deadline to the event "
             "p50 %.0f ms (max %.0f; the process was stopped past it), "
             "SIGCONT to the event p50 %.0f ms (max %.0f)",
             n, once, never, twice, still_held, pct(late, timed, 0.5),
             late[timed - 1], pct(resume, timed, 0.5), resume[timed - 1]);
  }
  free(late);
  free(resume);
  if (once != n || still_held != 0)
    cqb_fail("fleet-failure: %d of %d pauses were not told exactly once, %d "
             "grants still held",
             n - once, n, still_held);
}

static int n_kills(void) {
  return opt_kills >= 0 ? opt_kills : cqb_opts.size == CQB_QUICK ? 10 : 100;
}

static int n_pauses(void) {
  return opt_pauses >= 0 ? opt_pauses : cqb_opts.size == CQB_QUICK ? 10 : 100;
}

int cqb_fleet_failure_plan(void) { return n_kills() + n_pauses(); }

void cqb_fleet_failure(void) {
  if (!cqr_available()) {
    cqb_note("fleet-failure: redis-server is not installed: no figures");
    return;
  }
  cqr_start(&srv, NULL);
  snprintf(ns, sizeof(ns), "failure");
  struct child waiter = fork_child(waiter_main);
  char line[64];
  expect(&waiter, "ready", line, sizeof(line));
  redisContext *c = redisConnectUnix(srv.sock);
  if (c == NULL || c->err != 0)
    cqb_fail("cannot connect to the bench's redis-server");
  if (n_kills() > 0)
    kills(&waiter, c, n_kills());
  if (n_pauses() > 0)
    pauses(&waiter, c, n_pauses());
  say(waiter.out, "q\n");
  child_end(&waiter);
  redisFree(c);
  cqb_note("fleet-failure: TTL %d ms, heartbeat %d ms; a redis-server on a "
           "Unix socket, started by the bench",
           TTL_MS, HEARTBEAT_MS);
  cqr_stop(&srv);
}
