/*
 * cronoq-bench fleet: the fleet pool against what people write by hand on
 * Redis, and against the in-process pool, all measured in the same run,
 * against a redis-server the bench starts itself on a Unix socket:
 * - uncontended acquire + release, of one budget and of four, against the
 *   INCR/DECR pair of the same budgets over the same socket (one command a
 *   round trip, as such a semaphore is written), a sorted-set lease
 *   semaphore (one Lua script to acquire, ZREM to release) and the
 *   in-process pool;
 * - grants per second with 1, 2, 4 and 8 processes on a budget of 2
 *   units, against the same loops on the INCR/DECR counter and the
 *   sorted-set semaphore (which retry at once when refused: neither is fair
 *   nor all-or-nothing), and against the in-process pool with as many
 *   threads;
 * - the latency from a release in one process to the grant of a waiter
 *   blocked in another, against the same handoff between two threads of
 *   an in-process pool;
 * - the cost of a decision with 10, 1,000 and 10,000 waiters: a release
 *   that grants the oldest of N waiting callback acquires, against the
 *   same figure at N = 10.
 * Every figure checks its own result (every unit back, the counts
 * expected). Processes are forked before any pool exists in the bench's
 * own process, and report through pipes.
 */
#include "fleet_bench.h"
#include "harness.h"

#include "cronoq/cronoq_fleet.h"
#include "redis_harness.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* The fleet library's switch for tests (src/fleet/fleet.h): new
 * connections run the operations as scripts, not as functions. */
extern _Atomic bool cq__fleet_no_functions;

static struct cqr_server srv;
static int ns_counter;

static const char *new_ns(char *buf, size_t len) {
  snprintf(buf, len, "bench%d", ++ns_counter);
  return buf;
}

/* A pool on namespace `ns` with `fleet_flags` (enum cq_fleet_flags). */
static cq_pool *open_pool_with(const char *ns, unsigned fleet_flags) {
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.host = "bench";
  o.fleet_flags = fleet_flags | CQ_FLEET_NEW_NAMESPACE;
  cq_pool *p = NULL;
  int rc = cq_fleet_open(&p, srv.url, ns, &o);
  if (rc != 0)
    cqb_fail("cq_fleet_open: %s: %s", cq_err_name(rc), cq_fleet_error());
  return p;
}

static cq_pool *open_pool(const char *ns) { return open_pool_with(ns, 0); }

static void must(int rc, const char *what) {
  if (rc != 0)
    cqb_fail("%s: %s %s", what, cq_err_name(rc), cq_fleet_error());
}

static redisContext *connect_raw(void) {
  redisContext *c = redisConnectUnix(srv.sock);
  if (c == NULL || c->err != 0)
    cqb_fail("cannot connect to the bench's redis-server");
  return c;
}

static long long cmd_int(redisContext *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(c, fmt, ap);
  va_end(ap);
  if (r == NULL)
    cqb_fail("redis: %s", c->errstr);
  long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
  freeReplyObject(r);
  return v;
}

static long ops(long quick, long dflt, long full) {
  return cqb_opts.size == CQB_QUICK  ? quick
         : cqb_opts.size == CQB_FULL ? full
                                     : dflt;
}

/* ------------------------------------------------------------------------ */
/* The hand-written semaphores                                               */
/* ------------------------------------------------------------------------ */

/* A sorted-set lease semaphore, as the usual Java and Node libraries keep
 * one: members are holders, scored by when they took it; expired ones are
 * dropped on the way. Neither fair nor all-or-nothing across semaphores. */
static const char zset_acquire[] =
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])\n"
    "if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then\n"
    "  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])\n"
    "  return 1\n"
    "end\n"
    "return 0\n";
static char zset_sha[41];

static void load_zset(redisContext *c) {
  redisReply *r = redisCommand(c, "SCRIPT LOAD %s", zset_acquire);
  if (r == NULL || r->type != REDIS_REPLY_STRING)
    cqb_fail("SCRIPT LOAD of the sorted-set semaphore");
  memcpy(zset_sha, r->str, 41);
  freeReplyObject(r);
}

/* One attempt of each: 1 taken, 0 refused. */
static int counter_take(redisContext *c, const char *key, int cap) {
  if (cmd_int(c, "INCRBY %s 1", key) <= cap)
    return 1;
  cmd_int(c, "DECRBY %s 1", key);
  return 0;
}

static void counter_give(redisContext *c, const char *key) {
  cmd_int(c, "DECRBY %s 1", key);
}

/* The floor under any design that keeps leases on the server with one
 * function per operation: the commands of the fleet pool's uncontended
 * try (6) and release (5), on keys laid out as a namespace's, with the
 * arguments the library sends, and no decision at all (the record is
 * written back as it was read). What a try + release costs above this is
 * the policy's own work. */
static const char floor_lib[] =
    "#!lua name=cqbench\n"
    "redis.register_function('floor_try', function(KEYS, ARGV)\n"
    "  local call, P, sid = redis.call, KEYS[1], ARGV[1]\n"
    "  call('HGET', P .. 'meta', 'head')\n"
    "  call('EXISTS', P .. 's:' .. sid)\n"
    "  local x = call('HGET', P .. 'r:' .. ARGV[10], 'x')\n"
    "  call('HSET', P .. 'r:' .. ARGV[10], 'x', x)\n"
    "  local fence = call('HINCRBY', P .. 'meta', 'fence', '1')\n"
    "  call('HSET', P .. 'L:' .. sid, ARGV[5], x)\n"
    "  return {0, 0, 1, 'g ' .. ARGV[5] .. ' ' .. fence .. ' 1'}\n"
    "end)\n"
    "redis.register_function('floor_release', function(KEYS, ARGV)\n"
    "  local call, P, sid = redis.call, KEYS[1], ARGV[1]\n"
    "  call('HGET', P .. 'meta', 'head')\n"
    "  call('HGET', P .. 'L:' .. sid, ARGV[5])\n"
    "  local x = call('HGET', P .. 'r:b0', 'x')\n"
    "  call('HSET', P .. 'r:b0', 'x', x)\n"
    "  call('HDEL', P .. 'L:' .. sid, ARGV[5])\n"
    "  return {0, 0, 0}\n"
    "end)\n";

static void load_floor(redisContext *c) {
  redisReply *r = redisCommand(c, "FUNCTION LOAD REPLACE %s", floor_lib);
  if (r == NULL || r->type != REDIS_REPLY_STRING)
    cqb_fail("FUNCTION LOAD of the floor");
  freeReplyObject(r);
  cmd_int(c, "HSET cq:{floor}:meta head %s fence 0", "2 0 0 0 0");
  cmd_int(c, "HSET cq:{floor}:s:s1 ttl 60000");
  cmd_int(c, "HSET cq:{floor}:r:b0 x %s", "fourteen packed counters");
}

static void floor_pair(redisContext *c) {
  cmd_int(c, "FCALL floor_try 1 cq:{floor}: s1 4096 0 bench x1 t 0 1 u b0 1 1");
  cmd_int(c, "FCALL floor_release 1 cq:{floor}: s1 4096 0 bench x1");
}

static int zset_take(redisContext *c, const char *key, int cap, long id) {
  return (int)cmd_int(c, "EVALSHA %s 1 %s %lld 30000 %d %ld", zset_sha, key,
                      (long long)cq_now(), cap, id);
}

static void zset_give(redisContext *c, const char *key, long id) {
  cmd_int(c, "ZREM %s %ld", key, id);
}

/* ------------------------------------------------------------------------ */
/* Uncontended acquire + release                                             */
/* ------------------------------------------------------------------------ */

struct unc {
  cq_pool *pool;
  cq_req req;
  redisContext *c;
  int budgets;
  long n;
};

static double rep_fleet_unc(void *arg) {
  struct unc *u = arg;
  cq_grant g;
  cq_grant_init(&g);
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < u->n; i++)
    if (cq_grant_try(u->pool, &g, &u->req) != 0 ||
        cq_grant_release(u->pool, &g) != 0)
      return -1;
  int64_t t1 = cqb_now_ns();
  cq_resource_stats st;
  if (cq_resource_stats_get(u->pool, "b0", &st) != 0 || st.in_use != 0)
    return -1;
  return (double)(t1 - t0) / (double)u->n;
}

/* The hand-written semaphores on the same budgets: `zset` picks which. */
static double hand_unc(struct unc *u, bool zset) {
  static const char *const keys[2][4] = {{"c0", "c1", "c2", "c3"},
                                         {"z0", "z1", "z2", "z3"}};
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < u->n; i++) {
    for (int b = 0; b < u->budgets; b++)
      if (!(zset ? zset_take(u->c, keys[1][b], 1000000, i)
                 : counter_take(u->c, keys[0][b], 1000000)))
        return -1;
    for (int b = 0; b < u->budgets; b++) {
      if (zset)
        zset_give(u->c, keys[1][b], i);
      else
        counter_give(u->c, keys[0][b]);
    }
  }
  int64_t t1 = cqb_now_ns();
  if (cmd_int(u->c, zset ? "ZCARD z0" : "GET c0") != 0)
    return -1;
  return (double)(t1 - t0) / (double)u->n;
}

static double rep_counter_unc(void *arg) { return hand_unc(arg, false); }
static double rep_zset_unc(void *arg) { return hand_unc(arg, true); }

static double rep_floor_unc(void *arg) {
  struct unc *u = arg;
  int64_t t0 = cqb_now_ns();
  for (long i = 0; i < u->n; i++)
    floor_pair(u->c);
  int64_t t1 = cqb_now_ns();
  if (cmd_int(u->c, "HLEN cq:{floor}:L:s1") != 0)
    return -1;
  return (double)(t1 - t0) / (double)u->n;
}

/* A try + release of one budget on a pool of its own, opened as scripts
 * (`scripts`) or with `fleet_flags`, for `base`'s loop. */
static void variant_unc(struct unc *v, const struct unc *base, bool scripts,
                        unsigned fleet_flags) {
  char ns[32];
  *v = *base;
  atomic_store(&cq__fleet_no_functions, scripts);
  v->pool = open_pool_with(new_ns(ns, sizeof(ns)), fleet_flags);
  atomic_store(&cq__fleet_no_functions, false);
  must(cq_budget_add(v->pool, "b0", 1000000), "cq_budget_add");
  must(cq_req_init(&v->req, v->pool), "cq_req_init");
  must(cq_req_add(&v->req, "b0", 1), "cq_req_add");
}

/* The fleet pool and the hand-written semaphores on the same budgets,
 * measured by turns (cqb_measure_turns()): on a machine whose speed
 * drifts, the ratios hold. With one budget, the same as scripts (as on a
 * server without functions: what the library saves), with releases that
 * wait for no reply, on pools of their own, and the floor of its
 * commands (floor_lib). */
static void uncontended(void) {
  char ns[32];
  for (int budgets = 1; budgets <= 4; budgets += 3) {
    struct unc u = {.budgets = budgets, .n = ops(2000, 20000, 100000)};
    u.c = connect_raw();
    load_zset(u.c);
    load_floor(u.c);
    u.pool = open_pool(new_ns(ns, sizeof(ns)));
    must(cq_req_init(&u.req, u.pool), "cq_req_init");
    for (int b = 0; b < budgets; b++) {
      char name[8];
      snprintf(name, sizeof(name), "b%d", b);
      must(cq_budget_add(u.pool, name, 1000000), "cq_budget_add");
      must(cq_req_add(&u.req, name, 1), "cq_req_add");
    }
    struct unc scripts = {0}, async = {0};
    struct cqb_turn t[6] = {
        {.what = "INCR/DECR pairs", .fn = rep_counter_unc, .arg = &u},
        {.what = "sorted-set semaphore", .fn = rep_zset_unc, .arg = &u},
        {.what = "fleet try + release", .fn = rep_fleet_unc, .arg = &u},
        {.what = "as scripts", .fn = rep_fleet_unc, .arg = &scripts},
        {.what = "CQ_FLEET_ASYNC_RELEASE", .fn = rep_fleet_unc, .arg = &async},
        {.what = "the floor", .fn = rep_floor_unc, .arg = &u},
    };
    if (budgets == 1) {
      variant_unc(&scripts, &u, true, 0);
      variant_unc(&async, &u, false, CQ_FLEET_ASYNC_RELEASE);
    }
    cqb_measure_turns(t, budgets == 1 ? 6 : 3);
    char what[64];
    snprintf(what, sizeof(what), "fleet try + release, %d budget%s", budgets,
             budgets > 1 ? "s" : "");
    cqb_figure("fleet uncontended", what, "ns", t[2].stat, "INCR/DECR pairs",
               &t[0].stat, budgets == 1 ? 1.5 : 0);
    if (budgets == 1) {
      cqb_figure("fleet uncontended",
                 "fleet try + release, 1 budget, as scripts (EVALSHA)", "ns",
                 t[3].stat, "INCR/DECR pairs", &t[0].stat, 0);
      cqb_figure("fleet uncontended",
                 "fleet try + release, 1 budget, CQ_FLEET_ASYNC_RELEASE", "ns",
                 t[4].stat, "INCR/DECR pairs", &t[0].stat, 0);
      cqb_figure("fleet uncontended",
                 "the floor: its 11 commands, no decision (floor_lib)", "ns",
                 t[5].stat, "INCR/DECR pairs", &t[0].stat, 0);
      cq_pool_destroy(scripts.pool);
      cq_pool_destroy(async.pool);
    }
    snprintf(what, sizeof(what), "sorted-set semaphore, %d budget%s", budgets,
             budgets > 1 ? "s" : "");
    cqb_figure("fleet uncontended", what, "ns", t[1].stat, "INCR/DECR pairs",
               &t[0].stat, 0);
    cqb_progress_tick("fleet uncontended");
    cq_pool_destroy(u.pool);
    redisFree(u.c);
  }
  /* The in-process pool on the same request, for scale. */
  cq_pool *p;
  must(cq_pool_create(&p, NULL), "cq_pool_create");
  struct unc u = {.pool = p, .budgets = 1, .n = ops(200000, 1000000, 5000000)};
  must(cq_budget_add(p, "b0", 1000000), "cq_budget_add");
  must(cq_req_init(&u.req, p), "cq_req_init");
  must(cq_req_add(&u.req, "b0", 1), "cq_req_add");
  struct cqb_stat inproc = cqb_measure("in-process", rep_fleet_unc, &u);
  cqb_figure("fleet uncontended", "in-process try + release, 1 budget", "ns",
             inproc, NULL, NULL, 0);
  cq_pool_destroy(p);
}

/* ------------------------------------------------------------------------ */
/* Grants per second with N processes                                        */
/* ------------------------------------------------------------------------ */

#define SHARED_CAP 2

enum kind { K_FLEET, K_COUNTER, K_ZSET };

/* One process's loop for `ms`: take, give back, count. */
static long loop_for(enum kind k, const char *ns, int64_t ms, int index) {
  long grants = 0;
  int64_t end = cq_now() + ms;
  if (k == K_FLEET) {
    cq_pool *p = open_pool(ns);
    cq_req req;
    if (cq_budget_add(p, "jobs", SHARED_CAP) != 0 ||
        cq_req_init(&req, p) != 0 || cq_req_add(&req, "jobs", 1) != 0)
      return -1;
    cq_grant g;
    cq_grant_init(&g);
    while (cq_now() < end) {
      if (cq_grant_acquire(p, &g, &req, end) != 0)
        break;
      grants++;
      if (cq_grant_release(p, &g) != 0)
        return -1;
    }
    cq_pool_destroy(p);
    return grants;
  }
  redisContext *c = connect_raw();
  char key[64];
  snprintf(key, sizeof(key), "%s:%s", ns, k == K_COUNTER ? "c" : "z");
  long id = (long)index << 32;
  while (cq_now() < end) {
    if (k == K_COUNTER ? counter_take(c, key, SHARED_CAP)
                       : zset_take(c, key, SHARED_CAP, id)) {
      grants++;
      if (k == K_COUNTER)
        counter_give(c, key);
      else
        zset_give(c, key, id);
      id++;
    }
  }
  redisFree(c);
  return grants;
}

/* Fork n processes running the loop; the sum of their grants per second. */
static double processes(enum kind k, int n, int64_t ms) {
  char ns[32];
  new_ns(ns, sizeof(ns));
  int fds[8][2];
  pid_t pids[8];
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < n; i++) {
    if (pipe(fds[i]) != 0)
      cqb_fail("pipe");
    pids[i] = fork();
    if (pids[i] < 0)
      cqb_fail("fork");
    if (pids[i] == 0) {
      close(fds[i][0]);
      long g = loop_for(k, ns, ms, i);
      ssize_t w = write(fds[i][1], &g, sizeof(g));
      _exit(w == (ssize_t)sizeof(g) ? 0 : 1);
    }
    close(fds[i][1]);
  }
  long total = 0;
  bool ok = true;
  for (int i = 0; i < n; i++) {
    long g = -1;
    if (read(fds[i][0], &g, sizeof(g)) != (ssize_t)sizeof(g) || g < 0)
      ok = false;
    total += g;
    close(fds[i][0]);
    int status;
    waitpid(pids[i], &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok)
    return -1;
  return (double)total * 1000.0 / (double)ms;
}

struct inproc_loop {
  cq_pool *pool;
  cq_req req;
  int64_t end;
  long grants;
};

static void *inproc_worker(void *arg) {
  struct inproc_loop *l = arg;
  cq_grant g;
  cq_grant_init(&g);
  long n = 0;
  while (cq_now() < l->end &&
         cq_grant_acquire(l->pool, &g, &l->req, l->end) == 0) {
    n++;
    cq_grant_release(l->pool, &g);
  }
  atomic_fetch_add((_Atomic long *)&l->grants, n);
  return NULL;
}

static double threads(int n, int64_t ms) {
  struct inproc_loop l = {0};
  must(cq_pool_create(&l.pool, NULL), "cq_pool_create");
  must(cq_budget_add(l.pool, "jobs", SHARED_CAP), "cq_budget_add");
  must(cq_req_init(&l.req, l.pool), "cq_req_init");
  must(cq_req_add(&l.req, "jobs", 1), "cq_req_add");
  l.end = cq_now() + ms;
  pthread_t t[8];
  for (int i = 0; i < n; i++)
    pthread_create(&t[i], NULL, inproc_worker, &l);
  for (int i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  cq_pool_destroy(l.pool);
  return (double)l.grants * 1000.0 / (double)ms;
}

struct tput {
  enum kind k;
  int n;
  int64_t ms;
  bool in_process;
};

static double rep_tput(void *arg) {
  struct tput *t = arg;
  return t->in_process ? threads(t->n, t->ms) : processes(t->k, t->n, t->ms);
}

static void throughput(void) {
  int64_t ms = ops(300, 1000, 3000);
  for (int n = 1; n <= 8; n *= 2) {
    char what[80];
    struct tput t = {K_COUNTER, n, ms, false};
    snprintf(what, sizeof(what), "INCR/DECR counter, %d processes", n);
    struct cqb_stat counter = cqb_measure(what, rep_tput, &t);
    t.k = K_ZSET;
    struct cqb_stat zset = cqb_measure(what, rep_tput, &t);
    t.in_process = true;
    struct cqb_stat inproc = cqb_measure(what, rep_tput, &t);
    t.in_process = false;
    t.k = K_FLEET;
    snprintf(what, sizeof(what), "fleet, %d process%s", n, n > 1 ? "es" : "");
    struct cqb_stat fleet = cqb_measure(what, rep_tput, &t);
    cqb_figure_min("fleet grants/s (budget of 2)", what, "grants/s", fleet,
                   "INCR/DECR counter", &counter, 0);
    snprintf(what, sizeof(what), "sorted-set semaphore, %d process%s", n,
             n > 1 ? "es" : "");
    cqb_figure_min("fleet grants/s (budget of 2)", what, "grants/s", zset,
                   "INCR/DECR counter", &counter, 0);
    snprintf(what, sizeof(what), "in-process, %d thread%s", n,
             n > 1 ? "s" : "");
    cqb_figure_min("fleet grants/s (budget of 2)", what, "grants/s", inproc,
                   NULL, NULL, 0);
    cqb_progress_tick("fleet grants/s");
  }
}

/* ------------------------------------------------------------------------ */
/* Handoff: a release in one process, the grant in another                   */
/* ------------------------------------------------------------------------ */

/* Take turns on a budget of 1 with the other side: acquire, note the time,
 * tell the other (it waits), release. The other's grant time minus the
 * release time is one handoff. Returns the median handoff in ns, measured
 * by the side that was granted. */
struct turn {
  cq_pool *pool;
  cq_req req;
  int rounds;
  int id;
  _Atomic int64_t *released; /* shared: when the last release happened */
  int64_t *lat;
};

static _Atomic int64_t *mmap_shared(size_t len) {
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  if (m == MAP_FAILED)
    cqb_fail("mmap");
  memset(m, 0, len);
  return m;
}

static void munmap_shared(void *m, size_t len) { munmap(m, len); }

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void take_turns(struct turn *t) {
  cq_grant g;
  cq_grant_init(&g);
  for (int i = 0; i < t->rounds; i++) {
    if (cq_grant_acquire(t->pool, &g, &t->req, cq_now() + 60000) != 0)
      return;
    int64_t now = cqb_now_ns();
    int64_t rel = atomic_load(t->released);
    if (rel > 0)
      t->lat[i] = now - rel;
    /* Let the other side queue behind us before we release (not on the
     * last round of the side that finishes last: nobody comes). */
    cq_resource_stats st;
    int64_t give_up = cq_now() + 200;
    for (int k = 0; k < 100000 && cq_now() < give_up; k++) {
      if (cq_resource_stats_get(t->pool, "turn", &st) != 0 || st.waiting > 0)
        break;
      sched_yield();
    }
    atomic_store(t->released, cqb_now_ns());
    cq_grant_release(t->pool, &g);
  }
}

static void *turn_thread(void *arg) {
  take_turns(arg);
  return NULL;
}

static double median(int64_t *v, int n) {
  int m = 0;
  for (int i = 0; i < n; i++)
    if (v[i] > 0)
      v[m++] = v[i];
  if (m == 0)
    return -1;
  qsort(v, (size_t)m, sizeof(*v), cmp_i64);
  return (double)v[m / 2];
}

static double rep_handoff_fleet(void *arg) {
  int rounds = *(int *)arg;
  char ns[32];
  new_ns(ns, sizeof(ns));
  /* The two processes share the release time through a shared mapping. */
  _Atomic int64_t *shared = mmap_shared(sizeof(int64_t) * (2 + 2 * rounds));
  int64_t *lat = (int64_t *)(shared + 1);
  atomic_store(shared, 0);
  fflush(stdout);
  pid_t pid[2];
  for (int s = 0; s < 2; s++) {
    pid[s] = fork();
    if (pid[s] == 0) {
      struct turn t = {.rounds = rounds,
                       .id = s,
                       .released = shared,
                       .lat = lat + s * rounds};
      t.pool = open_pool(ns);
      if (cq_budget_add(t.pool, "turn", 1) != 0 ||
          cq_req_init(&t.req, t.pool) != 0 ||
          cq_req_add(&t.req, "turn", 1) != 0)
        _exit(1);
      take_turns(&t);
      cq_pool_destroy(t.pool);
      _exit(0);
    }
  }
  bool ok = true;
  for (int s = 0; s < 2; s++) {
    int status;
    waitpid(pid[s], &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  double m = ok ? median(lat, 2 * rounds) : -1;
  munmap_shared(shared, sizeof(int64_t) * (2 + 2 * rounds));
  return m;
}

static double rep_handoff_threads(void *arg) {
  int rounds = *(int *)arg;
  _Atomic int64_t released = 0;
  int64_t *lat = calloc((size_t)(2 * rounds), sizeof(*lat));
  /* Strict order, as on the fleet pool: with the barging window, the
   * releasing thread could take every turn while the other starves, then
   * the other take its turns alone, each waiting in vain for a partner. */
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_STRICT_ORDER;
  cq_pool *p;
  must(cq_pool_create(&p, &cfg), "cq_pool_create");
  must(cq_budget_add(p, "turn", 1), "cq_budget_add");
  struct turn t[2];
  pthread_t th[2];
  for (int s = 0; s < 2; s++) {
    t[s] = (struct turn){.pool = p,
                         .rounds = rounds,
                         .id = s,
                         .released = &released,
                         .lat = lat + s * rounds};
    must(cq_req_init(&t[s].req, p), "cq_req_init");
    must(cq_req_add(&t[s].req, "turn", 1), "cq_req_add");
    pthread_create(&th[s], NULL, turn_thread, &t[s]);
  }
  for (int s = 0; s < 2; s++)
    pthread_join(th[s], NULL);
  cq_pool_destroy(p);
  double m = median(lat, 2 * rounds);
  free(lat);
  return m;
}

static void handoff(void) {
  int rounds = (int)ops(100, 500, 2000);
  struct cqb_stat threads_s =
      cqb_measure("in-process handoff", rep_handoff_threads, &rounds);
  struct cqb_stat fleet =
      cqb_measure("fleet handoff", rep_handoff_fleet, &rounds);
  cqb_figure("fleet handoff", "release in one process to the grant in another",
             "ns", fleet, "in-process, between two threads", &threads_s, 0);
  cqb_progress_tick("fleet handoff");
}

/* ------------------------------------------------------------------------ */
/* Decision cost with N waiters                                              */
/* ------------------------------------------------------------------------ */

struct dec {
  cq_pool *pool;
  cq_req req;
  cq_grant *grants; /* n + 1: the holder and the waiters */
  int n;
  long rounds;
  int holder;  /* index of the grant that holds the unit */
  int granted; /* index of the grant the last release granted */
};

static struct dec *dec_now;

static void dec_cb(cq_grant *g, int status) {
  if (status == 0)
    dec_now->granted = (int)(g - dec_now->grants);
}

/* Each round releases the holder, which grants the oldest waiter (its
 * callback runs within the release), and queues the released grant again
 * behind the others (not timed), so that n wait throughout. */
static double rep_decision(void *arg) {
  struct dec *d = arg;
  dec_now = d;
  int holder = d->holder;
  int64_t sum = 0;
  for (long i = 0; i < d->rounds; i++) {
    d->granted = -1;
    int64_t t0 = cqb_now_ns();
    if (cq_grant_release(d->pool, &d->grants[holder]) != 0 || d->granted < 0)
      return -1;
    sum += cqb_now_ns() - t0;
    cq_grant_init(&d->grants[holder]);
    if (cq_grant_submit(d->pool, &d->grants[holder], &d->req, CQ_NEVER,
                        dec_cb) != 0)
      return -1;
    holder = d->granted;
  }
  d->holder = holder;
  return (double)sum / (double)d->rounds;
}

static struct cqb_stat decision(int n, struct dec *d, char *ns, size_t len) {
  d->n = n;
  d->holder = 0;
  d->rounds = ops(50, 200, 1000);
  d->pool = open_pool(new_ns(ns, len));
  must(cq_budget_add(d->pool, "b", 1), "cq_budget_add");
  must(cq_req_init(&d->req, d->pool), "cq_req_init");
  must(cq_req_add(&d->req, "b", 1), "cq_req_add");
  d->grants = calloc((size_t)n + 1, sizeof(*d->grants));
  dec_now = d;
  must(cq_grant_try(d->pool, &d->grants[0], &d->req), "cq_grant_try");
  for (int i = 1; i <= n; i++)
    must(cq_grant_submit(d->pool, &d->grants[i], &d->req, CQ_NEVER, dec_cb),
         "cq_grant_submit");
  char what[64];
  snprintf(what, sizeof(what), "decision, %d waiters", n);
  struct cqb_stat s = cqb_measure(what, rep_decision, d);
  cq_pool_close(d->pool);
  for (int i = 0; i <= n; i++)
    if (cq_grant_is_held(&d->grants[i]))
      cq_grant_release(d->pool, &d->grants[i]);
  cq_pool_destroy(d->pool);
  free(d->grants);
  return s;
}

/* The group's name fits the harness's 31 characters; the figure is a
 * release that grants the oldest of n waiters. */
#define DECISION_GROUP "fleet decision (release)"

static void decisions(void) {
  char ns[32];
  struct dec d;
  struct cqb_stat base = decision(10, &d, ns, sizeof(ns));
  cqb_figure(DECISION_GROUP, "10 waiters", "ns", base, NULL, NULL, 0);
  for (int n = 1000; n <= 10000; n *= 10) {
    if (n == 10000 && cqb_opts.size == CQB_QUICK)
      n = 3000;
    struct cqb_stat s = decision(n, &d, ns, sizeof(ns));
    char what[64];
    snprintf(what, sizeof(what), "%d waiters", n);
    cqb_figure(DECISION_GROUP, what, "ns", s, "10 waiters", &base,
               n >= 10000 ? 2.0 : 0);
    cqb_progress_tick("fleet decisions");
    if (n == 3000)
      break;
  }
}

/* ------------------------------------------------------------------------ */

int cqb_fleet_plan(void) { return 2 + 4 + 1 + 2; }

void cqb_fleet(void) {
  if (!cqr_available()) {
    cqb_note("fleet: redis-server is not installed: no fleet figures");
    return;
  }
  cqr_start(&srv, NULL);
  uncontended();
  throughput();
  handoff();
  decisions();
  cqb_note("fleet: a redis-server on a Unix socket, started by the bench; "
           "every figure is a median of %d repetitions",
           cqb_opts.reps);
  cqr_stop(&srv);
}
