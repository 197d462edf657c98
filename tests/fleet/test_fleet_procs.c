/*
 * Fleet pools across processes: several processes share a namespace's
 * budgets and this host's devices, a holder is killed, a holder is paused
 * past its TTL. Each child process opens its own pool; the parent only
 * starts the server, the children and the checks, and reads the
 * namespace's audit log (CQ_FLEET_AUDIT) to replay every grant and release
 * in the server's order.
 *
 * Children report through a pipe and leave with _exit(), never through
 * cmocka, so that only the parent asserts. Every wait is bounded; the
 * times printed are measurements, not assertions.
 */
#include "fleet_procs.h"
#include "fleet_test.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Four processes, one namespace                                             */
/* ------------------------------------------------------------------------ */

#define LICENCE 3
#define MEM 10
#define GPUS 4

struct worker_arg {
  const char *ns;
  int index;
  int iterations;
};

struct worker {
  cq_pool *pool;
  int fd;
  unsigned seed;
  int iterations;
  pthread_mutex_t *ledger_mu;
  int failures;
};

/* One grant in the ledger: "<fence> <mem> <licence> <gpu thousandths>". */
static void ledger(struct worker *w, cq_grant *g) {
  uint64_t fence = 0;
  if (cq_fleet_grant_fence(g, &fence) != 0)
    w->failures++;
  pthread_mutex_lock(w->ledger_mu);
  say(w->fd, "L %" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64 "\n", fence,
      cq_grant_held(g, "mem"), cq_grant_held(g, "licence"),
      cq_grant_held(g, "gpu"));
  pthread_mutex_unlock(w->ledger_mu);
}

static void *work(void *arg) {
  struct worker *w = arg;
  for (int i = 0; i < w->iterations; i++) {
    cq_req req;
    if (cq_req_init(&req, w->pool) != 0) {
      w->failures++;
      continue;
    }
    unsigned r = (unsigned)rand_r(&w->seed);
    if (r % 3 == 0)
      cq_req_add(&req, "licence", 1);
    if (r % 5 != 0)
      cq_req_add(&req, "mem", 1 + (r >> 4) % 4);
    switch ((r >> 8) % 4) {
    case 0:
      cq_req_add_fraction(&req, "gpu", 250 * (1 + (r >> 12) % 4));
      break;
    case 1:
      cq_req_add_devices(&req, "gpu", 1 + (r >> 12) % 2);
      break;
    default:
      break;
    }
    cq_grant g;
    cq_grant_init(&g);
    int rc = (r >> 16) % 4 == 0
                 ? cq_grant_try(w->pool, &g, &req)
                 : cq_grant_acquire(w->pool, &g, &req, cq_now() + 60000);
    if (rc == CQ_EBUSY)
      continue;
    if (rc != 0) {
      fprintf(stderr, "child: acquire: %s %s\n", cq_err_name(rc),
              cq_grant_error(&g));
      w->failures++;
      continue;
    }
    ledger(w, &g);
    usleep((r >> 20) % 400);
    if ((r >> 24) % 5 == 0 && cq_grant_held(&g, "mem") > 1)
      if (cq_grant_release_part(w->pool, &g, "mem", 1) != 0)
        w->failures++;
    if (cq_grant_release(w->pool, &g) != 0)
      w->failures++;
  }
  return NULL;
}

static int worker_main(void *arg, int fd) {
  const struct worker_arg *a = arg;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.host = "h";
  o.fleet_flags = CQ_FLEET_AUDIT | CQ_FLEET_NEW_NAMESPACE;
  o.max_ttl_ms = FLEET_TEST_MAX_TTL_MS;
  cq_pool *p = child_open(a->ns, &o);
  /* Every process declares the same resources: accepted. */
  if (cq_budget_add(p, "licence", LICENCE) != 0 ||
      cq_budget_add(p, "mem", MEM) != 0 ||
      cq_devices_add(p, "gpu", GPUS, NULL) != 0) {
    fprintf(stderr, "child: declare: %s\n", cq_fleet_error());
    return 2;
  }
  say(fd, "ready\n");
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  struct worker w[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    w[i] = (struct worker){
        p, fd, (unsigned)(a->index * 31 + i + 1), a->iterations, &mu, 0};
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  int failures = 0;
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    failures += w[i].failures;
  }
  int rc = cq_pool_destroy(p);
  say(fd, "done %d %d\n", failures, rc);
  return failures == 0 && rc == 0 ? 0 : 1;
}

/* The audit log's entries, oldest first. */
static redisReply *audit_log(const char *ns) {
  redisContext *c = redisConnectUnix(fleet_server.sock);
  assert_true(c != NULL && c->err == 0);
  char key[96];
  snprintf(key, sizeof(key), "cq:{%s}:audit", ns);
  redisReply *r = redisCommand(c, "LRANGE %s 0 -1", key);
  redisFree(c);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_ARRAY);
  return r;
}

/* What one lease holds, while it is held (for the replay). */
struct lease {
  char id[40];
  int64_t mem, licence;
  int64_t gpu[GPUS]; /* thousandths per device */
  bool live;
};

static struct lease *lease_of(struct lease *ls, size_t n, const char *id) {
  for (size_t i = 0; i < n; i++)
    if (ls[i].live && strcmp(ls[i].id, id) == 0)
      return &ls[i];
  return NULL;
}

static void
test_four_processes_share_budgets_and_devices_exactly(void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  int iterations = env_int("CRONOQ_FLEET_PROCS_ITERATIONS", 150);
  struct worker_arg args[4];
  pid_t pid[4];
  int fd[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (struct worker_arg){ns, i, iterations};
    pid[i] = spawn(worker_main, &args[i], &fd[i]);
  }
  /* Each child's ledger: every grant it got, by fencing token. */
  static char fences[4 * 2 * 1000][64];
  size_t nledger = 0;
  for (int i = 0; i < 4; i++) {
    char line[256];
    for (;;) {
      read_line(fd[i], line, sizeof(line), 300000);
      if (line[0] == 'L' && nledger < sizeof(fences) / sizeof(fences[0]))
        snprintf(fences[nledger++], sizeof(fences[0]), "%.63s", line + 2);
      else if (strncmp(line, "ready", 5) != 0)
        break;
    }
    if (strncmp(line, "done 0 0", 8) != 0)
      fail_msg("worker %d ended with \"%s\"", i, line);
    assert_int_equal(reap(pid[i], 60000), 0);
    close(fd[i]);
  }

  /* Replay the server's log: at every grant, nothing above capacity, what
   * it found free is what the replay says is free, and it took nothing of
   * what was withheld for an older claimant (budgets) or reserved for one
   * (devices). */
  redisReply *log = audit_log(ns);
  static struct lease ls[4 * 2 * 1000];
  size_t nls = 0, grants = 0;
  int64_t mem = 0, lic = 0, gpu[GPUS] = {0};
  int64_t peak_mem = 0, peak_lic = 0;
  for (size_t e = 0; e < log->elements; e++) {
    const char *s = log->element[e]->str;
    char id[40], name[80];
    if (s[0] == 'G') {
      uint64_t fence;
      int n, at;
      assert_int_equal(
          sscanf(s, "G %39s %" SCNu64 " %d%n", id, &fence, &n, &at), 3);
      struct lease *l = &ls[nls++];
      memset(l, 0, sizeof(*l));
      snprintf(l->id, sizeof(l->id), "%s", id);
      l->live = true;
      char check[64];
      snprintf(check, sizeof(check), "%" PRIu64 " ", fence);
      for (int k = 0; k < n; k++) {
        char devs[64], why1[32], why2[64];
        long long held;
        int used;
        assert_int_equal(sscanf(s + at, " %79s %lld %63s %31s %63s%n", name,
                                &held, devs, why1, why2, &used),
                         5);
        at += used;
        if (strcmp(name, "gpu@h") == 0) {
          /* Devices: none of them reserved for an older claimant. */
          for (char *d = devs; *d != '\0' && *d != '-';) {
            int x = atoi(d);
            assert_true(x >= 0 && x < GPUS);
            for (char *w = why2; *w != '\0' && *w != '-';) {
              if (atoi(w) == x)
                fail_msg("grant %s took device %d, reserved for an older "
                         "claimant: %s",
                         id, x, s);
              w += strcspn(w, ",");
              if (*w == ',')
                w++;
            }
            int ndev = 1;
            for (const char *c = devs; *c != '\0'; c++)
              ndev += *c == ',';
            int64_t each = held / ndev;
            l->gpu[x] += each;
            gpu[x] += each;
            if (gpu[x] > 1000)
              fail_msg("device %d over one device after %s", x, s);
            d += strcspn(d, ",");
            if (*d == ',')
              d++;
          }
          continue;
        }
        int64_t *use = strcmp(name, "mem") == 0 ? &mem : &lic;
        int64_t cap = strcmp(name, "mem") == 0 ? MEM : LICENCE;
        long long free_before = atoll(why1), withheld = atoll(why2);
        if (free_before != cap - *use)
          fail_msg("%s found %lld free, the replay says %" PRId64 ": %s", id,
                   free_before, cap - *use, s);
        if (held > free_before - withheld)
          fail_msg("%s took %lld of %s with %lld free and %lld withheld for "
                   "an older claimant",
                   id, held, name, free_before, withheld);
        *use += held;
        *(strcmp(name, "mem") == 0 ? &l->mem : &l->licence) += held;
        if (*use > cap)
          fail_msg("%s above capacity after %s", name, s);
      }
      peak_mem = mem > peak_mem ? mem : peak_mem;
      peak_lic = lic > peak_lic ? lic : peak_lic;
      /* The child's ledger has this very grant. */
      bool found = false;
      for (size_t k = 0; k < nledger && !found; k++)
        found = strncmp(fences[k], check, strlen(check)) == 0;
      if (!found)
        fail_msg("grant %s (fence %" PRIu64 ") is in no child's ledger", id,
                 fence);
      grants++;
    } else if (s[0] == 'p') {
      long long amount;
      int dev;
      assert_int_equal(
          sscanf(s, "p %39s %79s %lld %d", id, name, &amount, &dev), 4);
      struct lease *l = lease_of(ls, nls, id);
      assert_non_null(l);
      assert_string_equal(name, "mem");
      l->mem -= amount;
      mem -= amount;
    } else if (s[0] == 'r') {
      assert_int_equal(sscanf(s, "r %39s", id), 1);
      struct lease *l = lease_of(ls, nls, id);
      if (l == NULL)
        fail_msg("release of %s, which holds nothing", id);
      mem -= l->mem;
      lic -= l->licence;
      for (int d = 0; d < GPUS; d++)
        gpu[d] -= l->gpu[d];
      l->live = false;
    }
  }
  freeReplyObject(log);
  printf("four processes: %zu grants (ledgers: %zu), peak mem %" PRId64
         " of %d, licence %" PRId64 " of %d; every unit came back\n",
         grants, nledger, peak_mem, MEM, peak_lic, LICENCE);
  assert_int_equal(grants, nledger);
  assert_int_equal(mem, 0);
  assert_int_equal(lic, 0);
  for (int d = 0; d < GPUS; d++)
    assert_int_equal(gpu[d], 0);
  assert_true(grants > 100);
  /* The server agrees: nothing held, nothing waiting. */
  cq_pool *p = fleet_open_as(ns, "h", NULL);
  assert_int_equal(cqt_budget(p, "mem").in_use, 0);
  assert_int_equal(cqt_budget(p, "licence").in_use, 0);
  assert_int_equal(cqt_budget(p, "gpu").in_use, 0);
  assert_int_equal(cqt_budget(p, "mem").peak <= MEM, 1);
  assert_int_equal(cqt_waiting(p), 0);
  assert_cq_ok(cq_pool_destroy(p));
}

/* ------------------------------------------------------------------------ */
/* A holder killed, a holder paused                                          */
/* ------------------------------------------------------------------------ */

#define TTL_MS 1000
#define HEARTBEAT_MS 200

struct holder_arg {
  const char *ns;
  bool count_lost; /* report lost-lease events */
  int seats;       /* the licence's capacity: leases the holder takes, one
                      seat each, and what the waiter asks at once */
  uint32_t steps;  /* the waiter's script share (0: the default) */
};

static _Atomic int lost_events;

static void count_lost(const cq_event *ev, void *arg) {
  (void)arg;
  if (ev->type == CQ_EVENT_LOST)
    atomic_fetch_add(&lost_events, 1);
}

/* A child's pool with the short TTL of these tests, budget "licence" of
 * a->seats, and a request for `amount` of it. */
static cq_pool *licence_pool(const struct holder_arg *a, cq_event_fn on_event,
                             uint32_t steps, cq_req *req, int amount) {
  cq_fleet_opts o = short_ttl_opts(TTL_MS, HEARTBEAT_MS, on_event);
  o.script_steps = steps;
  cq_pool *p = child_open(a->ns, &o);
  if (cq_budget_add(p, "licence", a->seats) != 0 || cq_req_init(req, p) != 0 ||
      cq_req_add(req, "licence", amount) != 0)
    _exit(2);
  return p;
}

/* Hold the licence, say so, and then either sleep (to be killed) or wait
 * for the lost-lease event after a pause, and report it. */
static int holder_main(void *arg, int fd) {
  const struct holder_arg *a = arg;
  cq_req req;
  cq_pool *p = licence_pool(a, a->count_lost ? count_lost : NULL, 0, &req, 1);
  static cq_grant seats[64];
  for (int i = 0; i < a->seats; i++) {
    cq_grant_init(&seats[i]);
    if (cq_grant_acquire(p, &seats[i], &req, cq_now() + 30000) != 0)
      return 2;
  }
  cq_grant *g = &seats[0];
  say(fd, "held\n");
  if (!a->count_lost) {
    for (;;)
      pause(); /* until SIGKILL */
  }
  /* Paused and resumed by the parent; the event comes once the local
   * deadline is seen to have passed. Bounded: 30 s. */
  for (int i = 0; i < 3000 && atomic_load(&lost_events) == 0; i++)
    usleep(10000);
  /* Give a second report time to come, if one would. */
  usleep(5 * HEARTBEAT_MS * 1000);
  int held = cq_grant_is_held(g);
  int rel = cq_grant_release(p, g);
  say(fd, "lost %d held %d release %s\n", atomic_load(&lost_events), held,
      cq_err_name(rel));
  cq_pool_destroy(p);
  return 0;
}

/* Wait for the licence: report when it came, on the monotonic clock. */
static int waiter_main(void *arg, int fd) {
  const struct holder_arg *a = arg;
  cq_req req;
  cq_pool *p = licence_pool(a, NULL, a->steps, &req, a->seats);
  cq_grant g;
  cq_grant_init(&g);
  say(fd, "waiting\n");
  int rc = cq_grant_acquire(p, &g, &req, cq_now() + 30000);
  say(fd, "granted %s %" PRId64 "\n", cq_err_name(rc), cq_now());
  if (rc == 0)
    cq_grant_release(p, &g);
  cq_pool_destroy(p);
  return 0;
}

/* A holder process and a waiter process on one licence. */
struct pair {
  struct holder_arg a;
  pid_t holder, waiter;
  int hfd, wfd;
};

static void pair_start(struct pair *p, bool count_lost, int seats,
                       uint32_t steps) {
  fleet_server_up();
  p->a = (struct holder_arg){fleet_new_ns(), count_lost, seats, steps};
  char line[256];
  p->holder = spawn(holder_main, &p->a, &p->hfd);
  read_line(p->hfd, line, sizeof(line), 30000);
  assert_string_equal(line, "held");
  p->waiter = spawn(waiter_main, &p->a, &p->wfd);
  read_line(p->wfd, line, sizeof(line), 30000);
  assert_string_equal(line, "waiting");
}

/* The waiter's grant: when it came. */
static int64_t pair_granted(struct pair *p) {
  char line[256], status[16];
  int64_t at = 0;
  read_line(p->wfd, line, sizeof(line), 60000);
  assert_int_equal(sscanf(line, "granted %15s %" SCNd64, status, &at), 2);
  assert_string_equal(status, "OK");
  return at;
}

static void
test_a_killed_holders_units_go_to_a_waiter_in_another_process(void **state) {
  (void)state;
  struct pair p;
  pair_start(&p, false, 1, 0);
  cqt_sleep_ms(2 * HEARTBEAT_MS); /* it waits, and stays waiting */
  int64_t killed = cq_now();
  assert_int_equal(kill(p.holder, SIGKILL), 0);
  int64_t at = pair_granted(&p);
  printf("SIGKILL: the waiter was granted %" PRId64 " ms after the kill "
         "(TTL %d ms + heartbeat %d ms)\n",
         at - killed, TTL_MS, HEARTBEAT_MS);
  assert_int_equal(reap(p.waiter, 30000), 0);
  reap(p.holder, 30000);
  close(p.hfd);
  close(p.wfd);
}

static void
test_a_paused_holder_loses_its_lease_once_and_the_waiter_gets_it(void **state) {
  (void)state;
  struct pair p;
  pair_start(&p, true, 1, 0);
  assert_int_equal(kill(p.holder, SIGSTOP), 0);
  /* Past its TTL, the waiter (another process) is granted. */
  (void)pair_granted(&p);
  assert_int_equal(kill(p.holder, SIGCONT), 0);
  /* The holder is told once, holds nothing, and its release is refused. */
  char line[256];
  read_line(p.hfd, line, sizeof(line), 60000);
  assert_string_equal(line, "lost 1 held 0 release ESTATE");
  assert_int_equal(reap(p.waiter, 30000), 0);
  assert_int_equal(reap(p.holder, 30000), 0);
  close(p.hfd);
  close(p.wfd);
}

/* A dead session's leases come back a share of the work at a time: the
 * waiter's scripts may do 4 Redis calls each, and the holder had 40
 * leases; its heartbeats reclaim them over several scripts, and then it is
 * granted the 40 seats at once. */
static void
test_a_dead_session_with_many_leases_is_reclaimed_in_shares(void **state) {
  (void)state;
  struct pair p;
  pair_start(&p, false, 40, 4);
  assert_int_equal(kill(p.holder, SIGKILL), 0);
  (void)pair_granted(&p);
  assert_int_equal(reap(p.waiter, 30000), 0);
  reap(p.holder, 30000);
  close(p.hfd);
  close(p.wfd);
}

/* ------------------------------------------------------------------------ */
/* Every process of a host declares with the same spec                       */
/* ------------------------------------------------------------------------ */

/* One worker of host "h": declare `gpu=auto,licence=2` (two GPUs, from
 * CRONOQ_NUM_GPUS), try a conflicting `licence:class=3`, and take
 * {gpu: 0.5, licence: 1} once. Says "spec <rc> conflict <rc> grant <rc>
 * gpu <held> | <spec message>". */
static int spec_main(void *arg, int fd) {
  const char *ns = arg;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.max_ttl_ms = FLEET_TEST_MAX_TTL_MS;
  o.host = "h";
  setenv("CRONOQ_NUM_GPUS", "2", 1);
  cq_pool *p = child_open(ns, &o);
  char err[256] = "", conflict_err[256] = "";
  int rc = cq_pool_add_spec(p, "gpu=auto,licence=2", NULL, err, sizeof(err));
  int conflict = cq_pool_add_spec(p, "licence:class=3", NULL, conflict_err,
                                  sizeof(conflict_err));
  cq_req req;
  cq_grant g;
  cq_grant_init(&g);
  int got = rc;
  if (got == 0)
    got = cq_req_init(&req, p);
  if (got == 0)
    got = cq_req_parse(&req, "gpu=0.5,licence=1");
  if (got == 0)
    got = cq_grant_try(p, &g, &req);
  say(fd, "spec %s conflict %s grant %s gpu %" PRId64 " | %s\n",
      cq_err_name(rc), cq_err_name(conflict), cq_err_name(got),
      cq_grant_held(&g, "gpu"), err);
  if (got == 0 && cq_grant_release(p, &g) != 0)
    return 1;
  return cq_pool_destroy(p) == 0 ? 0 : 1;
}

static void
test_a_second_process_on_a_host_declares_the_same_spec(void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  /* The first worker creates what the spec names, the second finds it:
   * both run the same spec, and both are refused the conflicting one. */
  for (int i = 0; i < 2; i++) {
    int fd;
    pid_t pid = spawn(spec_main, (void *)ns, &fd);
    char line[512];
    read_line(fd, line, sizeof(line), 60000);
    assert_string_equal(line, "spec OK conflict EEXIST grant OK gpu 500 | ");
    assert_int_equal(reap(pid, 60000), 0);
    close(fd);
  }
  /* The conflicts changed nothing. */
  cq_pool *p = fleet_open_as(ns, "h", NULL);
  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(p, "licence", &st));
  assert_int_equal(st.capacity, 2);
  assert_int_equal(st.grants, 2);
  assert_int_equal(st.in_use, 0);
  assert_cq_ok(cq_resource_stats_get(p, "gpu", &st));
  assert_string_equal(st.name, "gpu@h");
  assert_int_equal(st.devices, 2);
  size_t n;
  cq_resource_stats all[4];
  assert_cq_ok(cq_pool_snapshot(p, all, 4, &n));
  assert_int_equal(n, 2);
  assert_cq_ok(cq_pool_destroy(p));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_four_processes_share_budgets_and_devices_exactly),
      cmocka_unit_test(
          test_a_killed_holders_units_go_to_a_waiter_in_another_process),
      cmocka_unit_test(
          test_a_paused_holder_loses_its_lease_once_and_the_waiter_gets_it),
      cmocka_unit_test(
          test_a_dead_session_with_many_leases_is_reclaimed_in_shares),
      cmocka_unit_test(test_a_second_process_on_a_host_declares_the_same_spec),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
