/*
 * Fleet pools under failure, each failure caused for real on this machine:
 * a holder process killed or stopped, the server stopped, restarted with
 * and without its data, failed over to a replica that missed writes, its
 * subscribers cut, paused, out of memory; a namespace of another schema.
 * Every test starts the servers it needs (Unix sockets in temporary
 * directories, a loopback port only where replication needs one) and
 * stops them by PID. A reply applied after the local deadline (it came
 * late, or its thread was descheduled) is the one failure made with a
 * test hook (cq__fleet_late_reply()), so that it happens every run.
 *
 * Times are short (TTL 1 s, heartbeat 200 ms) and every wait is bounded
 * by many times what it should take. What the tests print (recovery
 * times, the over-admission window of a failover) are measurements, never
 * assertions.
 */
#include "fleet_procs.h"
#include "fleet_test.h"

#include "fleet.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

int cq__fleet_fsck(cq_pool *pool, char *problems, size_t len);
void cq__fleet_late_reply(cq_pool *pool, uint32_t which);
uint32_t cq__fleet_late_pending(cq_pool *pool);

#define TTL_MS 1000
#define HEARTBEAT_MS 200

/* The servers of the tests that stop or restart theirs (static: the
 * harness stops them at exit, also after a failed test). */
static struct cqr_server srv, pri, rep;

/* Bounded waits: `cond` polled every 5 ms for at most `ms`. */
#define WAIT_FOR(cond, ms)                                                     \
  for (int64_t wait_until_ = cq_now() + (ms);                                  \
       !(cond) && cq_now() < wait_until_;)                                     \
  cqt_sleep_ms(5)

/* What a pool's event hook saw. */
struct seen {
  _Atomic int lost, granted, released;
  _Atomic int64_t first_lost_ms; /* cq_now() of the first lost lease */
};

static void on_event(const cq_event *ev, void *arg) {
  struct seen *s = arg;
  if (ev->type == CQ_EVENT_LOST) {
    int64_t zero = 0;
    atomic_compare_exchange_strong(&s->first_lost_ms, &zero, cq_now());
    atomic_fetch_add(&s->lost, 1);
  } else if (ev->type == CQ_EVENT_GRANTED) {
    atomic_fetch_add(&s->granted, 1);
  } else if (ev->type == CQ_EVENT_RELEASED) {
    atomic_fetch_add(&s->released, 1);
  }
}

static cq_pool *open_at(const char *url, const char *ns, struct seen *seen,
                        int64_t ttl_ms) {
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.host = "h";
  o.ttl_ms = ttl_ms;
  o.max_ttl_ms = ttl_ms;
  o.heartbeat_ms = HEARTBEAT_MS;
  o.timeout_ms = 2000;
  o.on_event = seen != NULL ? on_event : NULL;
  o.event_arg = seen;
  o.fleet_flags = CQ_FLEET_AUDIT | CQ_FLEET_NEW_NAMESPACE;
  cq_pool *p = NULL;
  int rc = cq_fleet_open(&p, url, ns, &o);
  if (rc != 0)
    fail_msg("cq_fleet_open(%s, %s): %s: %s", url, ns, cq_err_name(rc),
             cq_fleet_error());
  return p;
}

static int64_t in_use(cq_pool *p, const char *name) {
  cq_resource_stats st;
  int rc = cq_resource_stats_get(p, name, &st);
  return rc == 0 ? st.in_use : rc;
}

static void assert_fsck_clean(cq_pool *p) {
  char problems[1024];
  assert_cq_ok(cq__fleet_fsck(p, problems, sizeof(problems)));
  if (problems[0] != '\0')
    fail_msg("fsck: %s", problems);
}

static cq_fleet_stats fleet_stats(cq_pool *p) {
  cq_fleet_stats st = CQ_FLEET_STATS_INIT;
  assert_cq_ok(cq_fleet_stats_get(p, &st));
  return st;
}

static void req_of(cq_req *r, cq_pool *p, const char *name, int64_t n) {
  assert_cq_ok(cq_req_init(r, p));
  assert_cq_ok(cq_req_add(r, name, n));
}

/* Destroy a pool, releasing first what it may still hold. */
static void done(cq_pool *p) { assert_cq_ok(cq_pool_destroy(p)); }

/* A callback waiter: what it got, when, and its fencing token. */
struct cb_rec {
  _Atomic int status; /* 1: not yet */
  _Atomic int64_t at;
  _Atomic uint64_t fence;
  _Atomic int order; /* the how-manieth callback of the test */
  cq_pool *pool;
  bool release; /* release at once, in the callback */
};

static _Atomic int cb_count;

static void cb(cq_grant *g, int status) {
  struct cb_rec *r = g->data;
  uint64_t f = 0;
  if (status == 0)
    (void)cq_fleet_grant_fence(g, &f);
  atomic_store(&r->fence, f);
  atomic_store(&r->at, cq_now());
  atomic_store(&r->order, atomic_fetch_add(&cb_count, 1) + 1);
  if (status == 0 && r->release)
    (void)cq_grant_release(r->pool, g);
  atomic_store(&r->status, status);
}

static void submit(cq_pool *p, cq_grant *g, struct cb_rec *rec,
                   const cq_req *req, bool release) {
  *rec = (struct cb_rec){.status = 1, .pool = p, .release = release};
  cq_grant_init(g);
  g->data = rec;
  assert_cq_ok(cq_grant_submit(p, g, req, CQ_NEVER, cb));
}

/* Two pools (two sessions) on one namespace of the server at `url`, both
 * declaring "licence" of `cap`: a asks 1 of it, b asks `b_ask`; with
 * `hold`, a holds its unit (t->g). */
struct two {
  struct seen sa, sb;
  cq_pool *a, *b;
  cq_req ra, rb;
  cq_grant g;
};

static void two_up(struct two *t, const char *url, int cap, int b_ask,
                   int64_t ttl_ms, bool hold) {
  memset(&t->sa, 0, sizeof(t->sa));
  memset(&t->sb, 0, sizeof(t->sb));
  const char *ns = fleet_new_ns();
  t->a = open_at(url, ns, &t->sa, ttl_ms);
  t->b = open_at(url, ns, &t->sb, ttl_ms);
  assert_cq_ok(cq_budget_add(t->a, "licence", cap));
  assert_cq_ok(cq_budget_add(t->b, "licence", cap));
  req_of(&t->ra, t->a, "licence", 1);
  req_of(&t->rb, t->b, "licence", b_ask);
  cq_grant_init(&t->g);
  if (hold)
    assert_cq_ok(cq_grant_acquire(t->a, &t->g, &t->ra, cq_now() + 5000));
}

/* The end of a test of two pools on the test's own server: the namespace
 * is checked, and everything goes. */
static void two_down(cq_pool *a, cq_pool *b) {
  assert_fsck_clean(a);
  done(a);
  done(b);
  cqr_stop(&srv);
}

/* A server of the test's own, and a pool on it that holds one unit of
 * "licence" (of `cap`), with its request. */
struct rig {
  struct seen seen;
  cq_pool *p;
  cq_req req;
  cq_grant held;
};

static void rig_up(struct rig *r, int cap) {
  if (srv.pid == 0) {
    cqr_start(&srv, NULL);
    (void)fleet_new_ns();
  }
  memset(&r->seen, 0, sizeof(r->seen));
  r->p = open_at(srv.url, fleet_ns, &r->seen, TTL_MS);
  assert_cq_ok(cq_budget_add(r->p, "licence", cap));
  req_of(&r->req, r->p, "licence", 1);
  cq_grant_init(&r->held);
  assert_cq_ok(cq_grant_acquire(r->p, &r->held, &r->req, cq_now() + 5000));
}

/* A try on the rig that fails with `code`, its message saying `says`. */
static void rig_try_fails(struct rig *r, int code, const char *says) {
  cq_grant t;
  cq_grant_init(&t);
  assert_cq_err(cq_grant_try(r->p, &t, &r->req), code);
  printf("%s: %s\n", cq_err_name(code), cq_grant_error(&t));
  assert_non_null(strstr(cq_grant_error(&t), says));
}

/* A try on the rig that succeeds (within `ms`: a quarantine may end
 * first), released; then the namespace is checked and everything goes. */
static void rig_works_then_down(struct rig *r, int ms) {
  cq_grant t;
  cq_grant_init(&t);
  int rc = CQ_EBUSY;
  for (int64_t end = cq_now() + ms;
       (rc = cq_grant_try(r->p, &t, &r->req)) != 0 && cq_now() < end;)
    cqt_sleep_ms(25);
  assert_cq_ok(rc);
  assert_cq_ok(cq_grant_release(r->p, &t));
  assert_fsck_clean(r->p);
  done(r->p);
  cqr_stop(&srv);
}

/* ------------------------------------------------------------------------ */
/* 1. A holder killed                                                        */
/* ------------------------------------------------------------------------ */

struct child_arg {
  const char *url, *ns;
  int hold;       /* units of "licence" to hold */
  int wait_extra; /* then units to wait for (a waiter of its own) */
};

/* Hold, say so (with the fencing token), then wait for SIGKILL. */
static int holder_main(void *arg, int fd) {
  const struct child_arg *a = arg;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.host = "h";
  o.ttl_ms = TTL_MS;
  o.max_ttl_ms = TTL_MS;
  o.heartbeat_ms = HEARTBEAT_MS;
  cq_pool *p = NULL;
  if (cq_fleet_open(&p, a->url, a->ns, &o) != 0) {
    fprintf(stderr, "child: %s\n", cq_fleet_error());
    return 2;
  }
  cq_req req;
  static cq_grant g, w;
  if (cq_budget_add(p, "licence", 2) != 0 || cq_req_init(&req, p) != 0 ||
      cq_req_add(&req, "licence", a->hold) != 0)
    return 2;
  cq_grant_init(&g);
  if (cq_grant_acquire(p, &g, &req, cq_now() + 30000) != 0)
    return 2;
  uint64_t fence = 0;
  (void)cq_fleet_grant_fence(&g, &fence);
  if (a->wait_extra > 0) {
    cq_req more;
    if (cq_req_init(&more, p) != 0 ||
        cq_req_add(&more, "licence", a->wait_extra) != 0)
      return 2;
    static struct cb_rec rec = {.status = 1};
    cq_grant_init(&w);
    w.data = &rec;
    if (cq_grant_submit(p, &w, &more, CQ_NEVER, cb) != 0)
      return 2;
  }
  say(fd, "held %" PRIu64 "\n", fence);
  for (;;)
    pause(); /* until SIGKILL */
}

static pid_t start_holder(struct child_arg *a, int *fd) {
  pid_t pid = spawn(holder_main, a, fd);
  char line[128];
  read_line(*fd, line, sizeof(line), 30000);
  assert_memory_equal(line, "held", 4);
  return pid;
}

static void
test_a_killed_holders_units_come_back_its_waiters_vanish_others_go_in_order(
    void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  struct child_arg a = {fleet_server.url, ns, 2, 1};
  int fd;
  pid_t holder = start_holder(&a, &fd);
  /* The holder's own waiter is queued first; then this process's two. */
  char key[128];
  snprintf(key, sizeof(key), "cq:{%s}:Q", ns);
  WAIT_FOR(cqr_int(&fleet_server, "ZCARD", key, NULL) == 1, 10000);
  cq_pool *p = open_at(fleet_server.url, ns, NULL, TTL_MS);
  assert_cq_ok(cq_budget_add(p, "licence", 2));
  cq_req two, one;
  req_of(&two, p, "licence", 2);
  req_of(&one, p, "licence", 1);
  cq_grant g1, g2;
  struct cb_rec r1, r2;
  atomic_store(&cb_count, 0);
  submit(p, &g1, &r1, &two, true);
  submit(p, &g2, &r2, &one, false);
  assert_int_equal(cqr_int(&fleet_server, "ZCARD", key, NULL), 3);

  int64_t killed = cq_now();
  assert_int_equal(kill(holder, SIGKILL), 0);
  WAIT_FOR(atomic_load(&r2.status) != 1, 30000);
  assert_cq_ok(atomic_load(&r1.status));
  assert_cq_ok(atomic_load(&r2.status));
  /* In arrival order: the request for two is not passed by the one for
   * one, and the fencing tokens say the same. */
  assert_int_equal(atomic_load(&r1.order), 1);
  assert_int_equal(atomic_load(&r2.order), 2);
  assert_true(atomic_load(&r1.fence) < atomic_load(&r2.fence));
  printf("SIGKILL: units back and granted after %" PRId64
         " ms (TTL %d ms + heartbeat %d ms)\n",
         atomic_load(&r1.at) - killed, TTL_MS, HEARTBEAT_MS);
  /* The dead process's waiter is gone, and nothing else waits. */
  assert_int_equal(cqr_int(&fleet_server, "ZCARD", key, NULL), 0);
  assert_int_equal(in_use(p, "licence"), 1);
  assert_cq_ok(cq_grant_release(p, &g2));
  assert_int_equal(in_use(p, "licence"), 0);
  assert_fsck_clean(p);
  done(p);
  reap(holder, 10000);
  close(fd);
}

/* ------------------------------------------------------------------------ */
/* 2 and 10. A holder cut off past its TTL: the server stopped               */
/* ------------------------------------------------------------------------ */

/* Wait for the licence; say when it came; hold it until killed. */
static int waiter_main(void *arg, int fd) {
  const struct child_arg *a = arg;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.host = "h";
  o.ttl_ms = TTL_MS;
  o.max_ttl_ms = TTL_MS;
  o.heartbeat_ms = HEARTBEAT_MS;
  o.timeout_ms = 20000;
  cq_pool *p = NULL;
  if (cq_fleet_open(&p, a->url, a->ns, &o) != 0)
    return 2;
  cq_req req;
  static cq_grant g;
  if (cq_budget_add(p, "licence", 1) != 0 || cq_req_init(&req, p) != 0 ||
      cq_req_add(&req, "licence", 1) != 0)
    return 2;
  /* Started before the parent had threads (a fork of a threaded process
   * is the sanitizers' trouble); it waits behind the parent's lease. */
  cq_resource_stats st;
  for (int i = 0; i < 3000; i++) {
    if (cq_resource_stats_get(p, "licence", &st) == 0 && st.in_use == 1)
      break;
    usleep(10000);
  }
  cq_grant_init(&g);
  say(fd, "waiting\n");
  /* Its own session may be lost too while the server is stopped: the
   * attempt fails (CQ_EUNAVAILABLE), and it waits again. */
  int rc = CQ_EUNAVAILABLE;
  for (int i = 0; i < 100 && rc == CQ_EUNAVAILABLE; i++)
    rc = cq_grant_acquire(p, &g, &req, cq_now() + 60000);
  say(fd, "granted %s %" PRId64 "\n", cq_err_name(rc), cq_now());
  for (;;)
    pause();
}

static void
test_a_cut_off_holder_is_told_at_its_deadline_before_the_lease_moves(
    void **state) {
  (void)state;
  cqr_start(&srv, NULL);
  struct child_arg a = {srv.url, fleet_new_ns(), 1, 0};
  int fd;
  pid_t waiter = spawn(waiter_main, &a, &fd);
  struct rig r;
  rig_up(&r, 1);
  cq_pool *p = r.p;
  cq_grant *g = &r.held;
  struct seen *seen = &r.seen;
  char line[128];
  read_line(fd, line, sizeof(line), 30000);
  assert_string_equal(line, "waiting");
  cqt_sleep_ms(2 * HEARTBEAT_MS);

  /* The server stops: nobody reaches it for longer than the TTL. */
  int64_t stopped = cq_now();
  cqr_kill(&srv, SIGSTOP);
  WAIT_FOR(atomic_load(&seen->lost) > 0, 20000);
  assert_int_equal(atomic_load(&seen->lost), 1);
  assert_false(cq_grant_is_held(g));
  /* New grants fail closed meanwhile, with a clear code, quickly. */
  int64_t t0 = cq_now();
  rig_try_fails(&r, CQ_EUNAVAILABLE, "cannot be reached");
  printf("stalled server: the try failed after %" PRId64 " ms\n",
         cq_now() - t0);
  cqt_sleep_ms(TTL_MS / 2);
  cqr_kill(&srv, SIGCONT);

  /* The waiter in the other process gets the lease once the server
   * expires this session: after this process was told. */
  read_line(fd, line, sizeof(line), 30000);
  char status[16];
  int64_t granted = 0;
  assert_int_equal(sscanf(line, "granted %15s %" SCNd64, status, &granted), 2);
  assert_string_equal(status, "OK");
  int64_t lost_at = atomic_load(&seen->first_lost_ms);
  printf("stalled server: lost-lease event %" PRId64
         " ms after the stop, the lease moved %" PRId64 " ms after it\n",
         lost_at - stopped, granted - stopped);
  assert_true(lost_at < granted);
  /* A release after the loss is refused and changes no one's lease. */
  assert_cq_err(cq_grant_release(p, g), CQ_ESTATE);
  cqt_sleep_ms(2 * HEARTBEAT_MS);
  assert_int_equal(atomic_load(&seen->lost), 1);
  assert_int_equal(in_use(p, "licence"), 1);
  cq_fleet_stats st = fleet_stats(p);
  assert_int_equal(st.leases_lost, 1);
  assert_true(st.sessions >= 2);
  /* The pool works again: the other process dies, its unit comes back. */
  assert_int_equal(kill(waiter, SIGKILL), 0);
  reap(waiter, 10000);
  close(fd);
  rig_works_then_down(&r, 20000);
}

/* ------------------------------------------------------------------------ */
/* 3. A restart with AOF                                                     */
/* ------------------------------------------------------------------------ */

static const char *const aof[] = {"--appendonly", "yes", "--appendfsync",
                                  "always", NULL};

static void
test_a_restart_with_aof_keeps_sessions_and_grants_exactly(void **state) {
  (void)state;
  cqr_start(&srv, aof);
  struct two tw;
  /* A TTL longer than the restart takes. */
  two_up(&tw, srv.url, 1, 1, 4000, true);
  cq_pool *a = tw.a, *b = tw.b;
  uint64_t f1 = 0;
  assert_cq_ok(cq_fleet_grant_fence(&tw.g, &f1));
  cq_grant w;
  struct cb_rec rw;
  submit(b, &w, &rw, &tw.rb, false);

  int64_t t0 = cq_now();
  cqr_restart(&srv, aof);
  printf("AOF restart took %" PRId64 " ms\n", cq_now() - t0);
  /* Both reconnect and heartbeat: sessions and the lease survive. */
  cqt_sleep_ms(3 * HEARTBEAT_MS);
  assert_true(cq_grant_is_held(&tw.g));
  assert_cq_ok(cq_grant_release(a, &tw.g));
  WAIT_FOR(atomic_load(&rw.status) != 1, 20000);
  assert_cq_ok(atomic_load(&rw.status));
  /* No grant lost or made twice: the next token. */
  assert_int_equal(atomic_load(&rw.fence), f1 + 1);
  assert_int_equal(atomic_load(&tw.sa.lost) + atomic_load(&tw.sb.lost), 0);
  assert_int_equal(fleet_stats(a).sessions, 1);
  assert_int_equal(fleet_stats(b).sessions, 1);
  assert_true(fleet_stats(a).reconnects + fleet_stats(b).reconnects >= 1);
  assert_int_equal(in_use(a, "licence"), 1);
  assert_cq_ok(cq_grant_release(b, &w));
  two_down(a, b);
}

/* ------------------------------------------------------------------------ */
/* 4. A restart that lost the state                                          */
/* ------------------------------------------------------------------------ */

static void
test_a_restart_without_state_quarantines_then_works_from_redeclarations(
    void **state) {
  (void)state;
  cqr_start(&srv, NULL);
  struct two tw;
  two_up(&tw, srv.url, 2, 2, TTL_MS, true);
  cq_pool *a = tw.a, *b = tw.b;

  cqr_restart(&srv, NULL); /* nothing on disk: everything is gone */
  int64_t t0 = cq_now();
  WAIT_FOR(atomic_load(&tw.sa.lost) > 0, 20000);
  assert_int_equal(atomic_load(&tw.sa.lost), 1);
  assert_false(cq_grant_is_held(&tw.g));
  /* Quarantined: nothing is granted; a try says why, with the time left
   * (what a blocking acquire would do is wait). */
  cq_grant t;
  cq_grant_init(&t);
  int rc = cq_grant_try(b, &t, &tw.rb);
  printf("state lost: the holder was told after %" PRId64
         " ms; a try meanwhile: %s: %s\n",
         cq_now() - t0, cq_err_name(rc), cq_grant_error(&t));
  assert_cq_err(rc, CQ_EBUSY);
  assert_non_null(strstr(cq_grant_error(&t), "is quarantined"));
  /* After one TTL, the requests built before work again, on what the
   * processes declared again. */
  for (int i = 0; i < 200 && (rc = cq_grant_try(b, &t, &tw.rb)) != 0; i++)
    cqt_sleep_ms(25);
  assert_cq_ok(rc);
  printf("state lost: granted again %" PRId64 " ms after the restart\n",
         cq_now() - t0);
  assert_int_equal(in_use(b, "licence"), 2);
  assert_cq_ok(cq_grant_release(b, &t));
  cq_grant_init(&tw.g);
  assert_cq_ok(cq_grant_acquire(a, &tw.g, &tw.ra, cq_now() + 5000));
  assert_cq_ok(cq_grant_release(a, &tw.g));
  assert_true(fleet_stats(a).state_losses + fleet_stats(b).state_losses >= 1);
  assert_int_equal(atomic_load(&tw.sa.lost), 1);
  two_down(a, b);
}

/* ------------------------------------------------------------------------ */
/* 5. Failover to a replica that missed writes                               */
/* ------------------------------------------------------------------------ */

/* A loopback port free now. */
static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &len), 0);
  close(s);
  return ntohs(sa.sin_port);
}

/* Point `link` at `target`, atomically (a rename over the old link). */
static void point(const char *link, const char *target) {
  char tmp[400];
  snprintf(tmp, sizeof(tmp), "%s.new", link);
  unlink(tmp);
  assert_int_equal(symlink(target, tmp), 0);
  assert_int_equal(rename(tmp, link), 0);
}

static bool replica_synced(const struct cqr_server *primary) {
  /* WAIT: the replicas that acknowledged every write so far. */
  return cqr_int(primary, "WAIT", "1", "1000", NULL) == 1;
}

static void
test_a_failover_that_lost_writes_is_detected_and_reported(void **state) {
  (void)state;
  char port[16];
  snprintf(port, sizeof(port), "%d", free_port());
  const char *const pri_opts[] = {"--port", port, "--bind", "127.0.0.1", NULL};
  const char *const rep_opts[] = {"--replicaof", "127.0.0.1", port, NULL};
  cqr_start(&pri, pri_opts);
  cqr_start(&rep, rep_opts);
  /* The clients' URL is a link the test moves, as a DNS name or a
   * proxy would be moved to the promoted replica. */
  char link[320], url[340];
  snprintf(link, sizeof(link), "%s/primary.sock", pri.dir);
  point(link, pri.sock);
  snprintf(url, sizeof(url), "unix://%s", link);

  const char *ns = fleet_new_ns();
  struct seen seen = {0};
  cq_pool *p = open_at(url, ns, &seen, 4000);
  assert_cq_ok(cq_budget_add(p, "licence", 3));
  cq_req req;
  req_of(&req, p, "licence", 1);
  cq_grant kept, missed;
  cq_grant_init(&kept);
  cq_grant_init(&missed);
  assert_cq_ok(cq_grant_acquire(p, &kept, &req, cq_now() + 5000));
  WAIT_FOR(replica_synced(&pri), 20000);
  assert_true(replica_synced(&pri));

  /* The replica misses the next grant (stopped, and its link cut, so that
   * nothing waits for it in a socket buffer); the primary dies. */
  cqr_kill(&rep, SIGSTOP);
  (void)cqr_int(&pri, "CLIENT", "KILL", "TYPE", "replica", NULL);
  assert_cq_ok(cq_grant_acquire(p, &missed, &req, cq_now() + 5000));
  uint64_t missed_fence = 0;
  assert_cq_ok(cq_fleet_grant_fence(&missed, &missed_fence));
  cqr_kill(&pri, SIGKILL);
  cqr_kill(&rep, SIGCONT);
  char reply[64];
  cqr_str(&rep, reply, sizeof(reply), "REPLICAOF", "NO", "ONE", NULL);
  assert_string_equal(reply, "OK");
  int64_t moved = cq_now();
  point(link, rep.sock);

  WAIT_FOR(fleet_stats(p).rollbacks > 0 && atomic_load(&seen.lost) > 0, 20000);
  int64_t window = cq_now() - moved;
  cq_fleet_stats st = fleet_stats(p);
  printf("failover: sessions %" PRIu64 " lost %" PRIu64 " rollbacks %" PRIu64
         " reconnects %" PRIu64 " unavailable %" PRIu64 "\n",
         st.sessions, st.leases_lost, st.rollbacks, st.reconnects,
         st.unavailable);
  printf("failover: rollback detected %" PRId64
         " ms after the clients moved (heartbeat %d ms): the window in which "
         "the missed lease's units could be granted twice\n",
         window, HEARTBEAT_MS);
  assert_true(st.rollbacks >= 1);
  /* The lease the replica never had is lost, once; the other is kept. */
  assert_int_equal(atomic_load(&seen.lost), 1);
  assert_false(cq_grant_is_held(&missed));
  assert_true(cq_grant_is_held(&kept));
  /* Fencing tokens keep growing past the ones handed out before. */
  cq_grant again;
  cq_grant_init(&again);
  assert_cq_ok(cq_grant_acquire(p, &again, &req, cq_now() + 5000));
  uint64_t f = 0;
  assert_cq_ok(cq_fleet_grant_fence(&again, &f));
  assert_true(f > missed_fence);
  assert_cq_ok(cq_grant_release(p, &again));
  assert_cq_ok(cq_grant_release(p, &kept));
  assert_int_equal(in_use(p, "licence"), 0);
  assert_fsck_clean(p);
  done(p);
  cqr_stop(&rep);
  cqr_stop(&pri);
}

/* ------------------------------------------------------------------------ */
/* 6. Lost wake-ups                                                          */
/* ------------------------------------------------------------------------ */

static void
test_grants_arrive_when_wake_ups_are_cut_again_and_again(void **state) {
  (void)state;
  fleet_server_up();
  struct two tw;
  two_up(&tw, fleet_server.url, 1, 1, TTL_MS, false);
  cq_pool *a = tw.a, *b = tw.b;
  int64_t worst = 0;
  for (int i = 0; i < 15; i++) {
    cq_grant g, w;
    struct cb_rec rw;
    cq_grant_init(&g);
    assert_cq_ok(cq_grant_acquire(a, &g, &tw.ra, cq_now() + 5000));
    submit(b, &w, &rw, &tw.rb, false);
    /* Every subscriber of the server is cut, before the grant is sent. */
    (void)cqr_int(&fleet_server, "CLIENT", "KILL", "TYPE", "pubsub", NULL);
    int64_t t0 = cq_now();
    assert_cq_ok(cq_grant_release(a, &g));
    WAIT_FOR(atomic_load(&rw.status) != 1, 20000);
    assert_cq_ok(atomic_load(&rw.status));
    if (atomic_load(&rw.at) - t0 > worst)
      worst = atomic_load(&rw.at) - t0;
    assert_cq_ok(cq_grant_release(b, &w));
  }
  printf("lost wake-ups: 15 grants, the slowest arrived %" PRId64
         " ms after its release (heartbeat %d ms)\n",
         worst, HEARTBEAT_MS);
  assert_int_equal(in_use(a, "licence"), 0);
  assert_fsck_clean(a);
  done(a);
  done(b);
}

/* ------------------------------------------------------------------------ */
/* 8. A stalled server                                                       */
/* ------------------------------------------------------------------------ */

static void
test_a_stalled_server_keeps_deadlines_and_delivers_releases_once(void **s) {
  (void)s;
  cqr_start(&srv, NULL);
  struct two tw;
  /* The stall is shorter than the TTL: sessions survive it. */
  two_up(&tw, srv.url, 1, 1, 5000, true);
  cq_pool *a = tw.a, *b = tw.b;

  char reply[64];
  cqr_str(&srv, reply, sizeof(reply), "CLIENT", "PAUSE", "1500", "ALL", NULL);
  assert_string_equal(reply, "OK");
  int64_t t0 = cq_now();
  /* A blocking acquire keeps its deadline (a heartbeat interval at
   * least, for the round trip). */
  cq_grant w;
  cq_grant_init(&w);
  assert_cq_err(cq_grant_acquire(b, &w, &tw.rb, cq_now() + 300), CQ_ETIMEDOUT);
  int64_t t1 = cq_now();
  /* A try fails fast, with a clear code. */
  cq_grant t;
  cq_grant_init(&t);
  assert_cq_err(cq_grant_try(b, &t, &tw.rb), CQ_EUNAVAILABLE);
  int64_t t2 = cq_now();
  /* A release during the stall returns, and is delivered afterwards. */
  assert_cq_ok(cq_grant_release(a, &tw.g));
  int64_t t3 = cq_now();
  printf("stall: acquire (deadline 300 ms) gave up after %" PRId64
         " ms, a try after %" PRId64
         " ms (%s), a release returned after %" PRId64 " ms\n",
         t1 - t0, t2 - t1, cq_grant_error(&t), t3 - t2);
  /* After the stall: the release arrived once, the attempts that may have
   * reached the server were ended, and nothing is held or waiting. */
  WAIT_FOR(in_use(a, "licence") == 0 && fleet_stats(a).deferred == 1, 20000);
  assert_int_equal(in_use(a, "licence"), 0);
  assert_int_equal(fleet_stats(a).deferred, 1);
  cq_resource_stats st;
  WAIT_FOR(cq_resource_stats_get(a, "licence", &st) == 0 && st.waiting == 0 &&
               st.in_use == 0,
           20000);
  assert_int_equal(st.waiting, 0);
  assert_int_equal(st.in_use, 0);
  assert_int_equal(atomic_load(&tw.sa.lost), 0);
  cq_grant_init(&w);
  assert_cq_ok(cq_grant_acquire(b, &w, &tw.rb, cq_now() + 5000));
  assert_int_equal(in_use(a, "licence"), 1);
  assert_cq_ok(cq_grant_release(b, &w));
  two_down(a, b);
}

/* A stall that begins while the background thread has no subscription
 * (here the server cuts it off in the very transaction that pauses the
 * server): each new try to subscribe is let in and never answered. The
 * holder is told at its local deadline all the same, while the server
 * still stalls. Before, the thread tried to subscribe again and again,
 * and told nobody until the stall ended. */
static void
test_a_stall_that_cuts_the_subscription_still_tells_holders_at_the_deadline(
    void **state) {
  (void)state;
  struct rig r;
  rig_up(&r, 1);
  static const char *const cut[] = {"CLIENT", "KILL", "TYPE", "pubsub", NULL};
  static const char *const pause[] = {"CLIENT", "PAUSE", "5000", "ALL", NULL};
  const char *const *const both[] = {cut, pause, NULL};
  int64_t t0 = cq_now();
  assert_int_equal(cqr_atomically(&srv, both), 2);
  WAIT_FOR(atomic_load(&r.seen.lost) > 0, 20000);
  assert_int_equal(atomic_load(&r.seen.lost), 1);
  assert_false(cq_grant_is_held(&r.held));
  int64_t told = atomic_load(&r.seen.first_lost_ms) - t0;
  printf("stall without a subscription: the holder was told %" PRId64
         " ms into the 5000 ms stall (TTL %d ms)\n",
         told, TTL_MS);
  assert_true(told < 5000); /* the server still stalled */
  rig_works_then_down(&r, 20000);
}

/* ------------------------------------------------------------------------ */
/* 9. Out of memory                                                          */
/* ------------------------------------------------------------------------ */

static void
test_a_server_out_of_memory_grants_nothing_and_says_so(void **state) {
  (void)state;
  struct rig r;
  rig_up(&r, 3);
  char reply[64];
  cqr_str(&srv, reply, sizeof(reply), "CONFIG", "SET", "maxmemory", "1", NULL);
  assert_string_equal(reply, "OK");
  rig_try_fails(&r, CQ_ENOMEM, "out of memory");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_err(cq_grant_acquire(r.p, &g, &r.req, cq_now() + 1000), CQ_ENOMEM);
  /* Holders keep their leases (heartbeats run), and releases work. */
  cqt_sleep_ms(TTL_MS + HEARTBEAT_MS);
  assert_true(cq_grant_is_held(&r.held));
  assert_int_equal(atomic_load(&r.seen.lost), 0);
  assert_cq_ok(cq_grant_release(r.p, &r.held));
  assert_int_equal(in_use(r.p, "licence"), 0);

  cqr_str(&srv, reply, sizeof(reply), "CONFIG", "SET", "maxmemory", "0", NULL);
  assert_string_equal(reply, "OK");
  rig_works_then_down(&r, 0);
}

/* ------------------------------------------------------------------------ */
/* 10. Unreachable mid-run; the backoff                                      */
/* ------------------------------------------------------------------------ */

static void
test_a_server_gone_mid_run_fails_closed_and_holders_are_told(void **state) {
  (void)state;
  struct rig r;
  rig_up(&r, 2);
  int64_t t0 = cq_now();
  cqr_kill(&srv, SIGKILL);
  rig_try_fails(&r, CQ_EUNAVAILABLE, "cannot be reached");
  WAIT_FOR(atomic_load(&r.seen.lost) > 0, 20000);
  printf("server gone: the holder was told after %" PRId64
         " ms (its local deadline: TTL %d ms - a fifth, from its last "
         "heartbeat)\n",
         atomic_load(&r.seen.first_lost_ms) - t0, TTL_MS);
  assert_int_equal(atomic_load(&r.seen.lost), 1);
  assert_false(cq_grant_is_held(&r.held));
  assert_cq_err(cq_grant_release(r.p, &r.held), CQ_ESTATE);
  cq_fleet_stats st = fleet_stats(r.p);
  assert_true(st.unavailable >= 1);
  assert_int_equal(st.leases_lost, 1);
  /* Back (without its state): after the quarantine the pool works. */
  cqr_launch(&srv, NULL);
  WAIT_FOR(fleet_stats(r.p).reconnects >= 1, 20000);
  assert_true(fleet_stats(r.p).reconnects >= 1);
  assert_int_equal(atomic_load(&r.seen.lost), 1);
  rig_works_then_down(&r, 10000);
}

/* The value of the sample `name` (no labels) in an exposition. */
static uint64_t sample(const char *text, const char *name) {
  char want[96];
  snprintf(want, sizeof(want), "\n%s ", name);
  const char *at = strstr(text, want);
  if (at == NULL)
    fail_msg("the metrics have no %s", name);
  return strtoull(at + strlen(want), NULL, 10);
}

/* The fleet's counters as `p`'s metrics show them, each checked against
 * cq_fleet_stats_get() at the same moment: one the background thread
 * counted nothing in (else again), of a scrape that reached the server
 * (a reconnecting pool may need a few tries). */
static cq_fleet_stats exported_fleet_stats(cq_pool *p) {
  static char text[FLEET_TEXT_MAX];
  for (int64_t end = cq_now() + 20000; cq_now() < end; cqt_sleep_ms(5)) {
    cq_fleet_stats before = fleet_stats(p);
    text[0] = '\0';
    if (cq_pool_write_metrics(p, fleet_collect, text) != 0)
      continue;
    cq_fleet_stats st = fleet_stats(p);
    if (memcmp(&before, &st, sizeof(st)) != 0)
      continue;
    static const char *const families[] = {
        "# TYPE cronoq_fleet_sessions_total counter\n",
        "# TYPE cronoq_fleet_leases_lost_total counter\n",
        "# TYPE cronoq_fleet_unavailable_total counter\n",
        "# HELP cronoq_fleet_reconnects_total "};
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
      if (strstr(text, families[i]) == NULL)
        fail_msg("the metrics have no \"%s\"", families[i]);
    assert_int_equal(sample(text, "cronoq_fleet_sessions_total"), st.sessions);
    assert_int_equal(sample(text, "cronoq_fleet_leases_lost_total"),
                     st.leases_lost);
    assert_int_equal(sample(text, "cronoq_fleet_state_losses_total"),
                     st.state_losses);
    assert_int_equal(sample(text, "cronoq_fleet_rollbacks_total"),
                     st.rollbacks);
    assert_int_equal(sample(text, "cronoq_fleet_reconnects_total"),
                     st.reconnects);
    assert_int_equal(sample(text, "cronoq_fleet_unavailable_total"),
                     st.unavailable);
    assert_int_equal(sample(text, "cronoq_fleet_deferred_total"), st.deferred);
    assert_int_equal(sample(text, "cronoq_fleet_reconciled_total"),
                     st.reconciled);
    return st;
  }
  fail_msg("no scrape of the pool's metrics held still for 20 s");
  return fleet_stats(p);
}

/* The fleet's counters are in the pool's Prometheus metrics, as
 * cq_fleet_stats_get() has them: none at first but the session; after
 * the server was gone and came back, the calls that failed, the lease
 * lost and the reconnection. */
static void test_the_fleets_failure_counters_are_in_its_metrics(void **state) {
  (void)state;
  struct rig r;
  rig_up(&r, 2);
  cq_fleet_stats st = exported_fleet_stats(r.p);
  assert_int_equal(st.sessions, 1);
  assert_int_equal(st.leases_lost, 0);
  assert_int_equal(st.unavailable, 0);
  assert_int_equal(st.reconnects, 0);
  cqr_kill(&srv, SIGKILL);
  rig_try_fails(&r, CQ_EUNAVAILABLE, "cannot be reached");
  WAIT_FOR(atomic_load(&r.seen.lost) > 0, 20000);
  assert_int_equal(atomic_load(&r.seen.lost), 1);
  cqr_launch(&srv, NULL);
  WAIT_FOR(fleet_stats(r.p).reconnects >= 1, 20000);
  st = exported_fleet_stats(r.p);
  assert_true(st.unavailable >= 1);
  assert_int_equal(st.leases_lost, 1);
  assert_true(st.reconnects >= 1);
  assert_cq_err(cq_grant_release(r.p, &r.held), CQ_ESTATE);
  rig_works_then_down(&r, 10000);
}

static void
test_the_reconnection_backoff_grows_is_capped_and_jittered(void **state) {
  (void)state;
  /* From 10 ms, doubling, times [0.5, 1.5). */
  for (uint32_t n = 0; n < 40; n++) {
    int64_t base = (int64_t)10 << (n < 10 ? n : 10);
    if (base > 1000)
      base = 1000;
    assert_int_equal(fl_backoff_ms(n, 1000, 0.0), base / 2);
    int64_t top = fl_backoff_ms(n, 1000, 0.999999);
    assert_true(top < base * 3 / 2 && top >= base * 3 / 2 - 1);
    assert_true(fl_backoff_ms(n + 1, 1000, 0.5) >= fl_backoff_ms(n, 1000, 0.5));
  }
  assert_int_equal(fl_backoff_ms(0, 1000, 0.5), 10);
  assert_int_equal(fl_backoff_ms(3, 1000, 0.5), 80);
  assert_int_equal(fl_backoff_ms(30, 1000, 0.5), 1000);
  /* Jitter: processes cut off together spread out. */
  int64_t lo = INT64_MAX, hi = 0;
  for (int i = 0; i < 1000; i++) {
    double r = fl_random();
    assert_true(r >= 0.0 && r < 1.0);
    int64_t v = fl_backoff_ms(5, 1000, r);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  assert_true(lo >= 160 && hi < 480);
  assert_true(hi - lo > 160); /* over half the range, in 1000 draws */
}

/* ------------------------------------------------------------------------ */
/* 11. Another schema                                                        */
/* ------------------------------------------------------------------------ */

/* A new namespace with a budget and no session; its meta key in `meta`. */
static const char *namespace_left(char *meta, size_t len) {
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *p = open_at(fleet_server.url, ns, NULL, TTL_MS);
  assert_cq_ok(cq_budget_add(p, "licence", 2));
  done(p);
  snprintf(meta, len, "cq:{%s}:meta", ns);
  return ns;
}

static void
test_a_namespace_of_another_schema_is_refused_and_left_as_it_is(void **st) {
  (void)st;
  char meta[96], before[64], after[64];
  const char *ns = namespace_left(meta, sizeof(meta));
  assert_int_equal(
      cqr_int(&fleet_server, "HSET", meta, "head", "0 0 0 0 0", NULL), 0);
  long long keys = cqr_int(&fleet_server, "DBSIZE", NULL);
  cqr_str(&fleet_server, before, sizeof(before), "HGET", meta, "fence", NULL);
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.host = "h";
  cq_pool *q = NULL;
  assert_cq_err(cq_fleet_open(&q, fleet_server.url, ns, &o), CQ_EINVAL);
  assert_null(q);
  printf("another schema: %s\n", cq_fleet_error());
  assert_non_null(strstr(cq_fleet_error(), "schema version 0"));
  assert_int_equal(cqr_int(&fleet_server, "DBSIZE", NULL), keys);
  cqr_str(&fleet_server, after, sizeof(after), "HGET", meta, "fence", NULL);
  assert_string_equal(before, after);
  char head[16];
  cqr_str(&fleet_server, head, sizeof(head), "HGET", meta, "head", NULL);
  assert_string_equal(head, "0 0 0 0 0");
}

/* A namespace written by a library of the first layout has no head, only
 * its schema field: it is refused by version, not taken for a new one. */
static void
test_a_namespace_of_an_older_layout_is_refused_by_its_version(void **st) {
  (void)st;
  char meta[96];
  const char *ns = namespace_left(meta, sizeof(meta));
  assert_int_equal(cqr_int(&fleet_server, "HDEL", meta, "head", NULL), 1);
  assert_int_equal(cqr_int(&fleet_server, "HSET", meta, "schema", "1", NULL),
                   0);
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.host = "h";
  cq_pool *q = NULL;
  assert_cq_err(cq_fleet_open(&q, fleet_server.url, ns, &o), CQ_EINVAL);
  assert_non_null(strstr(cq_fleet_error(), "schema version 1"));
  assert_int_equal(cqr_int(&fleet_server, "HEXISTS", meta, "head", NULL), 0);
}

/* ------------------------------------------------------------------------ */
/* 13. A pool that lost its connection is destroyed cleanly                  */
/* ------------------------------------------------------------------------ */

static void
test_a_pool_cut_off_from_its_server_is_destroyed_cleanly(void **state) {
  (void)state;
  cqr_start(&srv, NULL);
  struct seen seen = {0};
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.host = "h";
  o.ttl_ms = TTL_MS;
  o.max_ttl_ms = TTL_MS;
  o.heartbeat_ms = HEARTBEAT_MS;
  o.timeout_ms = 300;
  o.on_event = on_event;
  o.event_arg = &seen;
  cq_pool *p = NULL;
  assert_cq_ok(cq_fleet_open(&p, srv.url, fleet_new_ns(), &o));
  assert_cq_ok(cq_budget_add(p, "licence", 1));
  cq_req req;
  req_of(&req, p, "licence", 1);
  cq_grant g, w;
  struct cb_rec rw;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_acquire(p, &g, &req, cq_now() + 5000));
  submit(p, &w, &rw, &req, false); /* it waits: fails when cut off */
  cqr_kill(&srv, SIGKILL);
  WAIT_FOR(atomic_load(&rw.status) != 1, 20000);
  assert_cq_err(atomic_load(&rw.status), CQ_EUNAVAILABLE);
  WAIT_FOR(atomic_load(&seen.lost) > 0, 20000);
  assert_int_equal(atomic_load(&seen.lost), 1);
  assert_cq_ok(cq_pool_destroy(p));
  cqr_stop(&srv);
}

/* ------------------------------------------------------------------------ */
/* 14. Replies applied after the local deadline                              */
/* ------------------------------------------------------------------------ */

static void
test_a_heartbeat_answered_after_the_local_deadline_does_not_revive_the_session(
    void **state) {
  (void)state;
  struct rig r;
  rig_up(&r, 1);
  /* The next heartbeat's reply is applied past the local deadline (as
   * when it came late, or the thread was descheduled before applying it);
   * no other call runs meanwhile to notice the deadline first. */
  cq__fleet_late_reply(r.p, FL_LATE_HEARTBEAT);
  bool unheld = false, revived = false;
  for (int64_t end = cq_now() + 20000;
       atomic_load(&r.seen.lost) == 0 && cq_now() < end; cqt_sleep_ms(2)) {
    int held = cq_grant_is_held(&r.held);
    revived |= unheld && held;
    unheld |= !held;
  }
  /* Once it reads as not held it stays so, and the loss is told, once. */
  assert_false(revived);
  assert_int_equal(atomic_load(&r.seen.lost), 1);
  assert_false(cq_grant_is_held(&r.held));
  assert_cq_err(cq_grant_release(r.p, &r.held), CQ_ESTATE);
  /* The old session is ended on the server: its unit comes back. */
  WAIT_FOR(in_use(r.p, "licence") == 0, 20000);
  assert_int_equal(in_use(r.p, "licence"), 0);
  cqt_sleep_ms(2 * HEARTBEAT_MS);
  assert_int_equal(atomic_load(&r.seen.lost), 1);
  cq_fleet_stats st = fleet_stats(r.p);
  assert_int_equal(st.leases_lost, 1);
  assert_true(st.sessions >= 2);
  /* Told once the deadline of the session lost had passed. */
  assert_true(st.lost_deadline_ms > 0);
  assert_true(atomic_load(&r.seen.first_lost_ms) >= st.lost_deadline_ms);
  rig_works_then_down(&r, 10000);
}

/* An acquire on the rig (a try, or a blocking acquire that would wait)
 * whose reply is applied only after the background thread found the
 * session lost: the acquire holds the connection meanwhile, so that no
 * heartbeat gets through. It fails with CQ_EUNAVAILABLE and holds nothing
 * here; what it made on the server goes with the old session. */
static void late_acquire_holds_nothing(struct rig *r, bool blocking) {
  char queue[128];
  snprintf(queue, sizeof(queue), "cq:{%s}:Q", fleet_ns);
  cq_grant g;
  cq_grant_init(&g);
  cq__fleet_late_reply(r->p, FL_LATE_ACQUIRE);
  int rc = blocking ? cq_grant_acquire(r->p, &g, &r->req, cq_now() + 20000)
                    : cq_grant_try(r->p, &g, &r->req);
  printf("%s: %s\n", cq_err_name(rc), cq_grant_error(&g));
  assert_cq_err(rc, CQ_EUNAVAILABLE);
  assert_non_null(strstr(cq_grant_error(&g), "lost while"));
  assert_false(cq_grant_is_held(&g));
  assert_cq_err(cq_grant_release(r->p, &g), CQ_ESTATE);
  /* Told so, its caller may take the grant back at once: nothing of the
   * pool's still points at it (the background thread walks the held list
   * when it heartbeats). */
  cq_grant_init(&g);
  /* The lease held before went with the session, told once. */
  WAIT_FOR(atomic_load(&r->seen.lost) > 0, 20000);
  assert_int_equal(atomic_load(&r->seen.lost), 1);
  assert_false(cq_grant_is_held(&r->held));
  /* On the server: nothing in use, nothing waiting. */
  WAIT_FOR(in_use(r->p, "licence") == 0 &&
               cqr_int(&srv, "ZCARD", queue, NULL) == 0,
           20000);
  assert_int_equal(in_use(r->p, "licence"), 0);
  assert_int_equal(cqr_int(&srv, "ZCARD", queue, NULL), 0);
  /* Nothing was taken for a failover. */
  cq_fleet_stats st = fleet_stats(r->p);
  assert_int_equal(st.rollbacks, 0);
  assert_int_equal(st.leases_lost, 1);
  assert_int_equal(atomic_load(&r->seen.granted), 1); /* r->held's alone */
  rig_works_then_down(r, 10000);
}

static void
test_an_acquire_granted_after_its_session_was_lost_holds_nothing(void **st) {
  (void)st;
  struct rig r;
  rig_up(&r, 2); /* room: the try is granted at once on the server */
  late_acquire_holds_nothing(&r, false);
}

static void
test_an_acquire_parked_after_its_session_was_lost_does_not_wait(void **st) {
  (void)st;
  struct rig r;
  rig_up(&r, 1); /* full: the acquire is parked on the server */
  late_acquire_holds_nothing(&r, true);
}

/* Once the rig's submit has its grant and waits at the hook, the server
 * stops, so that the session is lost before the callback runs. */
static void *stop_the_server_at_the_hook(void *arg) {
  cq_pool *p = arg;
  for (int i = 0; i < 20000 && (cq__fleet_late_pending(p) & FL_LATE_GRANTED);
       i++)
    cqt_sleep_ms(1);
  cqr_kill(&srv, SIGSTOP);
  return NULL;
}

/* A callback acquire granted at once whose lease is lost before its
 * callback runs (the background thread found the session lost meanwhile)
 * is told CQ_EUNAVAILABLE, as its state says, and the loss comes as an
 * event. Before, the callback was told 0 for a grant no longer held: the
 * submitting thread wrote the status over the loss, unlocked. */
static void
test_a_callback_granted_at_once_then_lost_is_told_of_the_loss(void **state) {
  (void)state;
  struct rig r;
  rig_up(&r, 2); /* room: the submit is granted at once */
  cq__fleet_late_reply(r.p, FL_LATE_GRANTED);
  pthread_t stopper;
  assert_int_equal(
      pthread_create(&stopper, NULL, stop_the_server_at_the_hook, r.p), 0);
  struct cb_rec rec;
  cq_grant g;
  submit(r.p, &g, &rec, &r.req, false);
  assert_int_equal(pthread_join(stopper, NULL), 0);
  cqr_kill(&srv, SIGCONT);
  assert_int_equal(atomic_load(&rec.status), CQ_EUNAVAILABLE);
  assert_false(cq_grant_is_held(&g));
  assert_cq_err(cq_grant_release(r.p, &g), CQ_ESTATE);
  assert_int_equal(atomic_load(&r.seen.lost), 2); /* it and r.held */
  assert_false(cq_grant_is_held(&r.held));
  WAIT_FOR(in_use(r.p, "licence") == 0, 20000);
  assert_int_equal(in_use(r.p, "licence"), 0);
  rig_works_then_down(&r, 10000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_a_killed_holders_units_come_back_its_waiters_vanish_others_go_in_order),
      cmocka_unit_test(
          test_a_cut_off_holder_is_told_at_its_deadline_before_the_lease_moves),
      cmocka_unit_test(
          test_a_restart_with_aof_keeps_sessions_and_grants_exactly),
      cmocka_unit_test(
          test_a_restart_without_state_quarantines_then_works_from_redeclarations),
      cmocka_unit_test(
          test_a_failover_that_lost_writes_is_detected_and_reported),
      cmocka_unit_test(
          test_grants_arrive_when_wake_ups_are_cut_again_and_again),
      cmocka_unit_test(
          test_a_stalled_server_keeps_deadlines_and_delivers_releases_once),
      cmocka_unit_test(
          test_a_stall_that_cuts_the_subscription_still_tells_holders_at_the_deadline),
      cmocka_unit_test(test_a_server_out_of_memory_grants_nothing_and_says_so),
      cmocka_unit_test(
          test_a_server_gone_mid_run_fails_closed_and_holders_are_told),
      cmocka_unit_test(test_the_fleets_failure_counters_are_in_its_metrics),
      cmocka_unit_test(
          test_the_reconnection_backoff_grows_is_capped_and_jittered),
      cmocka_unit_test(
          test_a_namespace_of_another_schema_is_refused_and_left_as_it_is),
      cmocka_unit_test(
          test_a_namespace_of_an_older_layout_is_refused_by_its_version),
      cmocka_unit_test(
          test_a_pool_cut_off_from_its_server_is_destroyed_cleanly),
      cmocka_unit_test(
          test_a_heartbeat_answered_after_the_local_deadline_does_not_revive_the_session),
      cmocka_unit_test(
          test_an_acquire_granted_after_its_session_was_lost_holds_nothing),
      cmocka_unit_test(
          test_an_acquire_parked_after_its_session_was_lost_does_not_wait),
      cmocka_unit_test(
          test_a_callback_granted_at_once_then_lost_is_told_of_the_loss),
  };
  /* One test, for a look at it alone: CQT_FILTER=<name or pattern>. */
  if (getenv("CQT_FILTER") != NULL)
    cmocka_set_test_filter(getenv("CQT_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
