/*
 * The fleet pool under stress: eight worker processes do random
 * multi-resource work on one namespace (two budgets and this host's device
 * pool; tries, blocking acquires with short deadlines, releases and partial
 * releases, up to three grants held at once; half of them with releases
 * that wait for no reply, CQ_FLEET_ASYNC_RELEASE), while a checker process
 * changes the budgets' capacities and runs the namespace's own checker
 * (src/fleet/lua/fsck.lua) again and again, and the parent SIGKILLs
 * workers (starting new processes in their place) and SIGSTOPs others,
 * some past their TTL, then SIGCONTs them.
 *
 * What must hold:
 * - during the run and after it: in use is what the leases hold, on every
 *   budget and device, and never above capacity (above the capacity before
 *   a shrink only, until in use has come below the new one);
 * - each worker's own ledger (what it believes it holds, in a shared
 *   mapping) adds up with the others to what the server's leases hold,
 *   once the killed workers' sessions have expired, and each worker was
 *   told once of every lease it lost (CQ_EVENT_LOST);
 * - once every worker has ended, every unit has come back: nothing in use,
 *   nobody waiting.
 *
 * The parent has no threads and no pool while it forks (a forked child of
 * a threaded parent is what TSan cannot follow); it opens one only at the
 * end. Every loop is bounded; the counts printed are measurements.
 * CRONOQ_FLEET_STRESS_GRANTS=<n> runs until n grants in all (long mode).
 */
#include "fleet_procs.h"
#include "fleet_test.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>

int cq__fleet_fsck(cq_pool *pool, char *problems, size_t len);
int cq__fleet_fsck_capacity(cq_pool *pool, char *problems, size_t len);

#define WORKERS 8
#define SLOTS 3 /* grants a worker holds at once at most */
#define GPUS 4
#define TTL_MS 1000
#define HEARTBEAT_MS 200

enum { MEM, LIC, GPU, NRES };
static const char *const res_name[NRES] = {"mem", "licence", "gpu"};
/* Capacities move within these; no request asks more than the least. */
static const int64_t cap_lo[2] = {5, 1}, cap_hi[2] = {12, 4};

/* A worker's ledger, read by the parent through a sequence counter (odd
 * while the worker writes). */
struct ledger {
  _Atomic uint64_t seq;
  _Atomic int64_t held[NRES];
  _Atomic int64_t leases;
  _Atomic int64_t lost_seen;   /* grants found not held any more */
  _Atomic int64_t lost_events; /* CQ_EVENT_LOST raised */
  _Atomic int64_t untold;      /* of lost_seen, those with no event yet */
  _Atomic int64_t told_twice;  /* attempts with two CQ_EVENT_LOST */
};

enum { RUN, HOLD, RELEASE };

struct shared {
  _Atomic int phase;
  _Atomic int checker_stop;
  _Atomic uint64_t grants;
  struct ledger w[WORKERS];
};

static struct shared *sh;
static const char *stress_ns;

static cq_pool *stress_open(cq_event_fn on_event, void *arg,
                            unsigned fleet_flags) {
  cq_fleet_opts o = short_ttl_opts(TTL_MS, HEARTBEAT_MS, on_event);
  o.event_arg = arg;
  o.fleet_flags = fleet_flags;
  return child_open(stress_ns, &o);
}

/* ------------------------------------------------------------------------ */
/* A worker                                                                  */
/* ------------------------------------------------------------------------ */

struct held {
  cq_grant g;
  bool used;
  int64_t amount[NRES];
};

/* Each attempt of a worker carries a number in its grant's `data`; the
 * event hook marks the attempts it was told were lost. */
#define TOLD_CAP (1u << 22)
static _Atomic unsigned char *told_of;
static struct ledger *my_ledger;

struct worker {
  int index;
  cq_pool *pool;
  struct ledger *led;
  struct held h[SLOTS];
  uintptr_t attempts;
  uintptr_t *untold; /* attempts seen lost that no event told of yet */
  size_t n_untold, cap_untold;
  int failures;
};

static void on_lost(const cq_event *ev, void *arg) {
  (void)arg;
  if (ev->type != CQ_EVENT_LOST)
    return;
  atomic_fetch_add(&my_ledger->lost_events, 1);
  if (atomic_fetch_or(&told_of[(uintptr_t)ev->data % TOLD_CAP], 1) & 1)
    atomic_fetch_add(&my_ledger->told_twice, 1);
}

/* The lost attempts no event has told of yet, in the ledger. */
static void untold_update(struct worker *w) {
  size_t n = 0;
  for (size_t i = 0; i < w->n_untold; i++)
    if (!(atomic_load(&told_of[w->untold[i] % TOLD_CAP]) & 1))
      w->untold[n++] = w->untold[i];
  w->n_untold = n;
  atomic_store(&w->led->untold, (int64_t)n);
}

static void ledger_add(struct worker *w, const int64_t *amount, int sign,
                       int leases) {
  atomic_fetch_add(&w->led->seq, 1);
  for (int r = 0; r < NRES; r++)
    atomic_fetch_add(&w->led->held[r], sign * amount[r]);
  atomic_fetch_add(&w->led->leases, leases);
  atomic_fetch_add(&w->led->seq, 1);
}

/* The slot's grant is gone: released (lost 0) or found lost. */
static void slot_clear(struct worker *w, struct held *s, bool lost) {
  ledger_add(w, s->amount, -1, -1);
  if (lost) {
    atomic_fetch_add(&w->led->lost_seen, 1);
    if (w->n_untold == w->cap_untold) {
      w->cap_untold = w->cap_untold ? 2 * w->cap_untold : 64;
      w->untold = realloc(w->untold, w->cap_untold * sizeof(*w->untold));
      if (w->untold == NULL)
        _exit(2);
    }
    w->untold[w->n_untold++] = (uintptr_t)s->g.data;
  }
  s->used = false;
}

/* Grants that lost their lease (a pause past the local deadline) leave
 * the ledger. One that reads as not held may not have been told yet: its
 * release tells it (CQ_ESTATE) and hands the grant back for reuse. */
static void sweep_lost(struct worker *w) {
  for (int i = 0; i < SLOTS; i++)
    if (w->h[i].used && !cq_grant_is_held(&w->h[i].g)) {
      int rc = cq_grant_release(w->pool, &w->h[i].g);
      if (rc != CQ_ESTATE) {
        fprintf(stderr, "stress worker %d: a grant not held released: %s\n",
                w->index, cq_err_name(rc));
        w->failures++;
      }
      slot_clear(w, &w->h[i], true);
    }
  untold_update(w);
}

static void slot_release(struct worker *w, struct held *s) {
  int rc = cq_grant_release(w->pool, &s->g);
  if (rc != 0 && rc != CQ_ESTATE) {
    fprintf(stderr, "stress worker %d: release: %s\n", w->index,
            cq_err_name(rc));
    w->failures++;
  }
  slot_clear(w, s, rc == CQ_ESTATE);
}

/* A random request of 1-3 resources. */
static void build_request(cq_req *req, unsigned *seed) {
  for (;;) {
    unsigned r = (unsigned)rand_r(seed);
    int items = 0;
    if (r % 3 == 0)
      items += cq_req_add(req, "licence", 1) == 0;
    if (r % 5 != 0)
      items += cq_req_add(req, "mem", 1 + (r >> 4) % 4) == 0;
    switch ((r >> 8) % 4) {
    case 0:
      items += cq_req_add_fraction(req, "gpu", 250 * (1 + (r >> 12) % 4)) == 0;
      break;
    case 1:
      items += cq_req_add_devices(req, "gpu", 1 + (r >> 12) % 2) == 0;
      break;
    default:
      break;
    }
    if (items > 0)
      return;
  }
}

static void one_step(struct worker *w, cq_req *reqs, int nreq, unsigned *seed) {
  unsigned r = (unsigned)rand_r(seed);
  int slot = (int)(r % SLOTS);
  struct held *s = &w->h[slot];
  if (!s->used) {
    cq_grant_init(&s->g);
    s->g.data = (void *)++w->attempts;
    cq_req *req = &reqs[(r >> 4) % (unsigned)nreq];
    /* Only a worker that holds nothing waits: holding while waiting would
     * let the workers stall each other until their deadlines. */
    bool holds = false;
    for (int i = 0; i < SLOTS; i++)
      holds |= w->h[i].used;
    int rc = holds || (r >> 8) % 4 == 0
                 ? cq_grant_try(w->pool, &s->g, req)
                 : cq_grant_acquire(w->pool, &s->g, req,
                                    cq_now() + 50 + (r >> 12) % 350);
    if (rc == 0) {
      for (int k = 0; k < NRES; k++)
        s->amount[k] = cq_grant_held(&s->g, res_name[k]);
      s->used = true;
      ledger_add(w, s->amount, 1, 1);
      atomic_fetch_add(&sh->grants, 1);
    } else if (rc != CQ_EBUSY && rc != CQ_ETIMEDOUT && rc != CQ_EUNAVAILABLE) {
      fprintf(stderr, "stress worker %d: acquire: %s %s\n", w->index,
              cq_err_name(rc), cq_grant_error(&s->g));
      w->failures++;
    }
  } else if ((r >> 8) % 4 == 0 && s->amount[MEM] > 1) {
    /* A part release that could not reach the server in time may have
     * been applied: it is called again until it says (the same part
     * number, so applied once), as the header asks of a caller. */
    int rc = CQ_EUNAVAILABLE;
    for (int k = 0; k < 100 && rc == CQ_EUNAVAILABLE; k++)
      rc = cq_grant_release_part(w->pool, &s->g, "mem", 1);
    if (rc == 0) {
      int64_t one[NRES] = {1, 0, 0};
      ledger_add(w, one, -1, 0);
      s->amount[MEM]--;
    } else if (rc == CQ_ESTATE) {
      slot_clear(w, s, true);
    } else {
      fprintf(stderr, "stress worker %d: release part: %s\n", w->index,
              cq_err_name(rc));
      w->failures++;
    }
  } else if ((r >> 8) % 4 == 1) {
    slot_release(w, s);
  }
  /* Holding a while, so that a pause finds leases to lose. */
  if ((r >> 20) % 4 == 0)
    usleep((r >> 22) % 3000);
}

static int worker_main(void *arg, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  struct worker w = {.index = (int)(intptr_t)arg};
  w.led = &sh->w[w.index];
  my_ledger = w.led;
  told_of = calloc(TOLD_CAP, 1);
  if (told_of == NULL)
    _exit(2);
  /* Half the workers do not wait for their releases' replies. */
  w.pool =
      stress_open(on_lost, NULL, w.index % 2 == 1 ? CQ_FLEET_ASYNC_RELEASE : 0);
  unsigned seed = (unsigned)getpid() * 2654435761u;
  enum { NREQ = 12 };
  cq_req reqs[NREQ];
  for (int i = 0; i < NREQ; i++) {
    if (cq_req_init(&reqs[i], w.pool) != 0)
      _exit(2);
    build_request(&reqs[i], &seed);
  }
  say(fd, "ready\n");
  /* Bounded: the parent ends the run long before. */
  for (long step = 0; step < 100000000L && atomic_load(&sh->phase) == RUN;
       step++) {
    sweep_lost(&w);
    one_step(&w, reqs, NREQ, &seed);
  }
  /* Hold what is held; keep the ledger true until told to release. */
  for (int i = 0; i < 60000 && atomic_load(&sh->phase) == HOLD; i++) {
    sweep_lost(&w);
    usleep(10000);
  }
  for (int i = 0; i < SLOTS; i++)
    if (w.h[i].used)
      slot_release(&w, &w.h[i]);
  int rc = cq_pool_destroy(w.pool);
  free(w.untold);
  free((void *)told_of);
  say(fd, "done %d %d\n", w.failures, rc);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The checker: capacity changes and fsck, until told to stop              */
/* ------------------------------------------------------------------------ */

static int checker_main(void *arg, int fd) {
  (void)arg;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  cq_pool *p = stress_open(NULL, NULL, 0);
  int64_t cap[2] = {10, 3}, ceiling[2] = {10, 3};
  if (cq_budget_add(p, "mem", cap[MEM]) != 0 ||
      cq_budget_add(p, "licence", cap[LIC]) != 0 ||
      cq_devices_add(p, "gpu", GPUS, NULL) != 0) {
    fprintf(stderr, "stress checker: declare: %s\n", cq_fleet_error());
    _exit(2);
  }
  say(fd, "ready\n");
  unsigned seed = 12345;
  long checks = 0, problems = 0, changes = 0;
  for (int i = 0; i < 1000000 && !atomic_load(&sh->checker_stop); i++) {
    usleep(20000 + (unsigned)rand_r(&seed) % 60000);
    if (rand_r(&seed) % 4 == 0) {
      int b = rand_r(&seed) % 2;
      int64_t c =
          cap_lo[b] + rand_r(&seed) % (unsigned)(cap_hi[b] - cap_lo[b] + 1);
      if (cq_budget_set_capacity(p, res_name[b], c) == 0) {
        /* After a shrink in use may stay above the new capacity (nothing
         * is taken from holders), never above the old one. */
        if (c < cap[b] && cap[b] > ceiling[b])
          ceiling[b] = cap[b];
        cap[b] = c;
        changes++;
      }
    }
    bool shrinking = false;
    for (int b = 0; b < 2; b++) {
      int64_t used = cqt_budget(p, res_name[b]).in_use;
      if (used <= cap[b])
        ceiling[b] = cap[b]; /* grants keep it there from now on */
      if (used > ceiling[b]) {
        fprintf(stderr,
                "stress checker: %s in use %" PRId64 " above %" PRId64 "\n",
                res_name[b], used, ceiling[b]);
        problems++;
      }
      shrinking |= ceiling[b] > cap[b];
    }
    char why[2048];
    int rc = shrinking ? cq__fleet_fsck(p, why, sizeof(why))
                       : cq__fleet_fsck_capacity(p, why, sizeof(why));
    checks++;
    if (rc != 0 || why[0] != '\0') {
      fprintf(stderr, "stress checker: fsck %s: %s\n", cq_err_name(rc), why);
      problems++;
    }
  }
  int rc = cq_pool_destroy(p);
  say(fd, "fsck %ld %ld %ld %d\n", checks, problems, changes, rc);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The parent                                                                */
/* ------------------------------------------------------------------------ */

struct proc {
  pid_t pid;
  int fd;
  int64_t resume_at; /* paused until then; 0 when running */
};

static void start_worker(struct proc *w, int i) {
  memset(&sh->w[i], 0, sizeof(sh->w[i]));
  w->pid = spawn(worker_main, (void *)(intptr_t)i, &w->fd);
  w->resume_at = 0;
  char line[64];
  read_line(w->fd, line, sizeof(line), 30000);
  if (strcmp(line, "ready") != 0)
    fail_msg("worker %d did not start: \"%s\"", i, line);
}

static void read_ledger(int i, int64_t *held, int64_t *leases, int64_t *untold,
                        int64_t *twice) {
  struct ledger *l = &sh->w[i];
  for (int tries = 0; tries < 100000; tries++) {
    uint64_t s = atomic_load(&l->seq);
    for (int r = 0; r < NRES; r++)
      held[r] = atomic_load(&l->held[r]);
    *leases = atomic_load(&l->leases);
    *untold = atomic_load(&l->untold);
    *twice = atomic_load(&l->told_twice);
    if (s % 2 == 0 && atomic_load(&l->seq) == s)
      return;
    usleep(100);
  }
  fail_msg("worker %d's ledger never settled", i);
}

/* The leases of every session in the namespace. */
static long long server_leases(void) {
  redisContext *c = redisConnectUnix(fleet_server.sock);
  assert_true(c != NULL && c->err == 0);
  redisReply *s = redisCommand(c, "ZRANGE cq:{%s}:S 0 -1", stress_ns);
  assert_true(s != NULL && s->type == REDIS_REPLY_ARRAY);
  long long n = 0;
  for (size_t i = 0; i < s->elements; i++) {
    redisReply *h =
        redisCommand(c, "HLEN cq:{%s}:L:%s", stress_ns, s->element[i]->str);
    assert_true(h != NULL && h->type == REDIS_REPLY_INTEGER);
    n += h->integer;
    freeReplyObject(h);
  }
  freeReplyObject(s);
  redisFree(c);
  return n;
}

/* Whether the live workers' ledgers add up to the server's leases, and each
 * was told of every lost lease once; says what differs in `why`. */
static bool ledgers_agree(cq_pool *p, char *why, size_t len) {
  int64_t sum[NRES] = {0}, leases = 0;
  for (int i = 0; i < WORKERS; i++) {
    int64_t held[NRES], n, untold, twice;
    read_ledger(i, held, &n, &untold, &twice);
    if (untold != 0 || twice != 0) {
      snprintf(why, len,
               "worker %d: %" PRId64 " leases lost and not told, %" PRId64
               " told twice",
               i, untold, twice);
      return false;
    }
    for (int r = 0; r < NRES; r++)
      sum[r] += held[r];
    leases += n;
  }
  for (int r = 0; r < NRES; r++) {
    int64_t used = cqt_budget(p, res_name[r]).in_use;
    if (used != sum[r]) {
      snprintf(why, len, "%s: in use %" PRId64 ", the ledgers hold %" PRId64,
               res_name[r], used, sum[r]);
      return false;
    }
  }
  long long n = server_leases();
  if (n != leases) {
    snprintf(why, len, "%lld leases, the ledgers hold %" PRId64, n, leases);
    return false;
  }
  return true;
}

/* `capacity`: in use within capacity too (not while the checker's last
 * shrink may still be above what is in use: it checks that itself). */
static void assert_fsck_clean(cq_pool *p, bool capacity) {
  char why[2048];
  assert_cq_ok(capacity ? cq__fleet_fsck_capacity(p, why, sizeof(why))
                        : cq__fleet_fsck(p, why, sizeof(why)));
  if (why[0] != '\0')
    fail_msg("fsck: %s", why);
}

static void
test_fleet_stress_nothing_is_over_admitted_or_lost_under_kills_and_pauses(
    void **state) {
  (void)state;
  fleet_server_up();
  stress_ns = fleet_new_ns();
  long target = env_int("CRONOQ_FLEET_STRESS_GRANTS", 0);
  bool long_mode = target > 0;
  if (!long_mode)
    target = env_int("CRONOQ_FLEET_STRESS_SHORT", 5000);
  const int min_events = long_mode ? 0 : 12; /* kills and pauses each */
  sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(sh != MAP_FAILED);
  memset(sh, 0, sizeof(*sh));

  struct proc checker;
  checker.pid = spawn(checker_main, NULL, &checker.fd);
  char line[256];
  read_line(checker.fd, line, sizeof(line), 30000);
  assert_string_equal(line, "ready");
  struct proc w[WORKERS];
  for (int i = 0; i < WORKERS; i++)
    start_worker(&w[i], i);

  /* Kills and pauses until the grants are made. A hang guard, not a timing
   * check: about 100 grants a second is the least seen under valgrind. */
  unsigned seed = 777;
  long kills = 0, pauses = 0;
  int64_t give_up = cq_now() + 60000 + target * 10;
  while ((long)atomic_load(&sh->grants) < target || kills < min_events ||
         pauses < min_events) {
    if (cq_now() > give_up)
      fail_msg("the run stalled: %" PRIu64 " grants of %ld",
               atomic_load(&sh->grants), target);
    cqt_sleep_ms(20 + rand_r(&seed) % 100);
    for (int i = 0; i < WORKERS; i++)
      if (w[i].resume_at != 0 && cq_now() >= w[i].resume_at) {
        assert_int_equal(kill(w[i].pid, SIGCONT), 0);
        w[i].resume_at = 0;
      }
    int i = rand_r(&seed) % WORKERS;
    unsigned what = (unsigned)rand_r(&seed) % 12;
    if (what == 0) {
      /* Killed while it works, perhaps while paused: a new process takes
       * its place, with a ledger of its own. */
      assert_int_equal(kill(w[i].pid, SIGKILL), 0);
      reap(w[i].pid, 10000);
      close(w[i].fd);
      start_worker(&w[i], i);
      kills++;
    } else if (what == 1) {
      /* Paused: one that holds leases, where one does. */
      for (int k = 0; k < WORKERS; k++) {
        int j = (i + k) % WORKERS;
        if (w[j].resume_at == 0 && atomic_load(&sh->w[j].leases) > 0) {
          i = j;
          break;
        }
      }
      if (w[i].resume_at != 0)
        continue;
      /* Paused from a third of the TTL to twice it. */
      assert_int_equal(kill(w[i].pid, SIGSTOP), 0);
      w[i].resume_at = cq_now() + TTL_MS / 3 + rand_r(&seed) % (2 * TTL_MS);
      pauses++;
    }
  }
  for (int i = 0; i < WORKERS; i++)
    if (w[i].resume_at != 0)
      assert_int_equal(kill(w[i].pid, SIGCONT), 0);
  atomic_store(&sh->phase, HOLD);

  /* No more forks: the parent may have a pool (and its threads) now. The
   * killed workers' sessions expire, the paused ones' lost leases leave
   * their ledgers and the server; then both sides agree. Bounded. */
  cq_pool *p = stress_open(NULL, NULL, 0);
  char why[256] = "";
  bool agree = false;
  for (int i = 0; i < 600 && !agree; i++) {
    agree = ledgers_agree(p, why, sizeof(why));
    if (!agree)
      cqt_sleep_ms(50);
  }
  if (!agree)
    fail_msg("the ledgers never agreed with the server: %s", why);
  int64_t leases_lost = 0, told = 0;
  for (int i = 0; i < WORKERS; i++) {
    leases_lost += atomic_load(&sh->w[i].lost_seen);
    told += atomic_load(&sh->w[i].lost_events);
  }
  assert_fsck_clean(p, false);

  atomic_store(&sh->phase, RELEASE);
  for (int i = 0; i < WORKERS; i++) {
    read_line(w[i].fd, line, sizeof(line), 60000);
    if (strcmp(line, "done 0 0") != 0)
      fail_msg("worker %d ended with \"%s\"", i, line);
    assert_int_equal(reap(w[i].pid, 30000), 0);
    close(w[i].fd);
  }
  atomic_store(&sh->checker_stop, 1);
  long checks = 0, problems = 0, changes = 0;
  int crc = -1;
  read_line(checker.fd, line, sizeof(line), 60000);
  assert_int_equal(
      sscanf(line, "fsck %ld %ld %ld %d", &checks, &problems, &changes, &crc),
      4);
  assert_int_equal(reap(checker.pid, 30000), 0);
  close(checker.fd);

  /* Every unit of every process, the dead ones' too, has come back. */
  int64_t lost = -1;
  for (int i = 0; i < 600 && lost != 0; i++) {
    lost = 0;
    for (int r = 0; r < NRES; r++)
      lost += cqt_budget(p, res_name[r]).in_use;
    if (lost != 0)
      cqt_sleep_ms(50);
  }
  assert_fsck_clean(p, true);
  uint64_t waiting = cqt_waiting(p);
  printf("stress: %" PRIu64 " grants, %ld kills, %ld pauses, %ld fsck checks, "
         "%ld capacity changes, %" PRId64
         " leases lost by live workers (%" PRId64
         " CQ_EVENT_LOST, none twice), over-admissions %ld, lost units %" PRId64
         "\n",
         atomic_load(&sh->grants), kills, pauses, checks, changes, leases_lost,
         told, problems, lost);
  assert_int_equal(problems, 0);
  assert_int_equal(crc, 0);
  assert_true(checks > 0);
  assert_int_equal(lost, 0);
  assert_int_equal(waiting, 0);
  assert_cq_ok(cq_pool_destroy(p));
  munmap(sh, sizeof(*sh));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_fleet_stress_nothing_is_over_admitted_or_lost_under_kills_and_pauses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
