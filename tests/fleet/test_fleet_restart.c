/*
 * A server that lost a namespace's state (a restart without persistence, a
 * flush): whoever creates the namespace again, nothing is granted before
 * every holder of the lost state has passed its own deadline, and fencing
 * tokens never repeat.
 *
 * Each scenario stops a holder process (SIGSTOP) across the restart, so
 * that it cannot notice the loss, and checks the order of two events on
 * the one monotonic clock of the machine: the holder's local deadline, and
 * the first grant made after the restart.
 */
#include "fleet_procs.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

static struct cqr_server srv;

/* A holder: the first to open the namespace, with TTL ttl_ms (and the
 * namespace's longest, max_ttl_ms); `grants` grants of the licence, each
 * told ("f <fence>"), then one held ("held <fence>") until its lease is
 * lost, told as "lost <its local deadline>". */
struct holder {
  const char *url;
  const char *ns;
  int64_t ttl_ms, max_ttl_ms;
  int grants;
};

static int holder_main(void *arg, int fd) {
  const struct holder *h = arg;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* it is: the server is new */
  o.host = "h";
  o.ttl_ms = h->ttl_ms;
  o.max_ttl_ms = h->max_ttl_ms;
  o.heartbeat_ms = h->ttl_ms / 4;
  cq_pool *p = NULL;
  if (cq_fleet_open(&p, h->url, h->ns, &o) != 0) {
    fprintf(stderr, "holder: %s\n", cq_fleet_error());
    return 2;
  }
  cq_req req;
  static cq_grant g;
  if (cq_budget_add(p, "licence", 1) != 0 || cq_req_init(&req, p) != 0 ||
      cq_req_add(&req, "licence", 1) != 0)
    return 2;
  uint64_t fence = 0;
  for (int i = 0; i <= h->grants; i++) {
    cq_grant_init(&g);
    if (cq_grant_acquire(p, &g, &req, cq_now() + 10000) != 0 ||
        cq_fleet_grant_fence(&g, &fence) != 0)
      return 2;
    if (i == h->grants)
      break;
    say(fd, "f %" PRIu64 "\n", fence);
    if (cq_grant_release(p, &g) != 0)
      return 2;
  }
  say(fd, "held %" PRIu64 "\n", fence);
  /* Stopped here; once resumed, the lease is lost by its deadline. */
  cq_fleet_stats st = CQ_FLEET_STATS_INIT;
  for (int i = 0; i < 6000; i++) {
    cq_fleet_stats_get(p, &st);
    if (st.leases_lost > 0)
      break;
    cqt_sleep_ms(10);
  }
  say(fd, "lost %" PRId64 "\n", st.leases_lost > 0 ? st.lost_deadline_ms : -1);
  (void)cq_grant_release(p, &g);
  cq_pool_destroy(p);
  return 0;
}

/* What a restart race saw: the holder's fences before it and its local
 * deadline; the first grant after it, its time and fence. */
struct race {
  uint64_t before[64];
  int n_before;
  int64_t deadline;
  int64_t granted_at;
  uint64_t after_fence;
};

/* Start a holder (ttl_ms, the namespace's max_ttl_ms), stop it while it
 * holds, restart the server without its state, then open a process that
 * never knew the namespace (fresh_ttl_ms, the same max_ttl_ms) and let
 * `after` run on it; resume the holder and read its deadline. */
static void restart_race(const char *ns, int64_t ttl_ms, int64_t max_ttl_ms,
                         int64_t fresh_ttl_ms, int grants,
                         void (*after)(cq_pool *p, struct race *r),
                         struct race *r) {
  memset(r, 0, sizeof(*r));
  struct holder h = {srv.url, ns, ttl_ms, max_ttl_ms, grants};
  int fd;
  pid_t pid = spawn(holder_main, &h, &fd);
  char line[128];
  for (;;) {
    read_line(fd, line, sizeof(line), 30000);
    uint64_t f;
    if (sscanf(line, "f %" SCNu64, &f) == 1 && r->n_before < 64) {
      r->before[r->n_before++] = f;
      continue;
    }
    assert_int_equal(sscanf(line, "held %" SCNu64, &f), 1);
    r->before[r->n_before++] = f;
    break;
  }
  assert_int_equal(kill(pid, SIGSTOP), 0);
  cqr_restart(&srv, NULL); /* nothing on disk: the state is gone */

  cq_fleet_opts o = CQ_FLEET_OPTS_INIT; /* not new: it may not know */
  o.host = "fresh";
  o.ttl_ms = fresh_ttl_ms;
  o.max_ttl_ms = max_ttl_ms;
  o.heartbeat_ms = fresh_ttl_ms / 4;
  cq_pool *p = NULL;
  int rc = cq_fleet_open(&p, srv.url, ns, &o);
  if (rc != 0)
    fail_msg("open: %s: %s", cq_err_name(rc), cq_fleet_error());
  assert_cq_ok(cq_budget_add(p, "licence", 1));
  after(p, r);

  assert_int_equal(kill(pid, SIGCONT), 0);
  read_line(fd, line, sizeof(line), 60000);
  assert_int_equal(sscanf(line, "lost %" SCNd64, &r->deadline), 1);
  assert_true(r->deadline > 0);
  assert_int_equal(reap(pid, 30000), 0);
  close(fd);
  assert_cq_ok(cq_pool_destroy(p));
}

/* One blocking acquire of the licence, then its release. */
static void acquire_once(cq_pool *p, struct race *r) {
  cq_req req;
  cqt_req(&req, p, "licence:1");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_acquire(p, &g, &req, cq_now() + 30000));
  r->granted_at = cq_now();
  assert_cq_ok(cq_fleet_grant_fence(&g, &r->after_fence));
  assert_cq_ok(cq_grant_release(p, &g));
}

/* A process that never opened the namespace finds it missing after the
 * restart and creates it: it waits out the quarantine like any other, and
 * is granted only once the stopped holder's deadline has passed (it was
 * granted about 80 ms after the restart, within the holder's deadline). */
static void
test_a_process_new_to_a_lost_namespace_is_granted_after_the_old_holders_deadline(
    void **state) {
  (void)state;
  cqr_start(&srv, NULL);
  struct race r;
  restart_race("first", 1500, 1500, 1500, 0, acquire_once, &r);
  printf("granted %" PRId64 " ms after the holder's deadline\n",
         r.granted_at - r.deadline);
  assert_true(r.granted_at > r.deadline);
  cqr_stop(&srv);
}

/* The quarantine is the namespace's longest TTL, not that of whoever
 * notices the loss: a 1 s-TTL process creating the namespace again waits
 * for the 3 s-TTL holder's deadline. */
static void
test_the_quarantine_outlasts_the_longest_ttl_not_the_noticers(void **state) {
  (void)state;
  cqr_start(&srv, NULL);
  struct race r;
  restart_race("twottls", 3000, 3000, 1000, 0, acquire_once, &r);
  printf("a 1 s-TTL process granted %" PRId64
         " ms after the 3 s-TTL holder's deadline\n",
         r.granted_at - r.deadline);
  assert_true(r.granted_at > r.deadline);
  cqr_stop(&srv);
}

/* Twenty grants after the restart, their fences kept. */
static uint64_t after_fences[20];

static void acquire_twenty(cq_pool *p, struct race *r) {
  cq_req req;
  cqt_req(&req, p, "licence:1");
  for (int i = 0; i < 20; i++) {
    cq_grant g;
    cq_grant_init(&g);
    assert_cq_ok(cq_grant_acquire(p, &g, &req, cq_now() + 30000));
    assert_cq_ok(cq_fleet_grant_fence(&g, &after_fences[i]));
    assert_cq_ok(cq_grant_release(p, &g));
  }
  r->granted_at = cq_now();
}

/* Fencing tokens never repeat across a lost state: every token granted
 * after the restart is greater than every token granted before it, the
 * stopped holder's included (a fresh namespace once began again at 1, and
 * the next grant had the stopped holder's token). */
static void test_tokens_after_a_lost_state_are_greater_than_every_token_before(
    void **state) {
  (void)state;
  cqr_start(&srv, NULL);
  struct race r;
  restart_race("tokens", 1000, 1000, 1000, 20, acquire_twenty, &r);
  uint64_t most = 0;
  for (int i = 0; i < r.n_before; i++) {
    assert_true(i == 0 || r.before[i] > r.before[i - 1]);
    if (r.before[i] > most)
      most = r.before[i];
  }
  for (int i = 0; i < 20; i++) {
    assert_true(after_fences[i] > most);
    assert_true(i == 0 || after_fences[i] > after_fences[i - 1]);
  }
  printf("tokens: %d before up to %" PRIu64 ", 20 after from %" PRIu64 "\n",
         r.n_before, most, after_fences[0]);
  cqr_stop(&srv);
}

/* The namespace's longest TTL is part of it: a process that gives another,
 * or a TTL longer than it, is refused, and the namespace is unchanged. */
static void
test_every_process_of_a_namespace_gives_the_same_longest_ttl(void **state) {
  (void)state;
  cqr_start(&srv, NULL);
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE;
  o.host = "h";
  o.ttl_ms = 2000;
  o.max_ttl_ms = 3000;
  cq_pool *a = NULL, *b = NULL;
  assert_cq_ok(cq_fleet_open(&a, srv.url, "maxttl", &o));
  o.max_ttl_ms = 0; /* the default, 10 s */
  assert_cq_err(cq_fleet_open(&b, srv.url, "maxttl", &o), CQ_EINVAL);
  assert_non_null(strstr(cq_fleet_error(), "max_ttl_ms 3000, not 10000"));
  assert_null(b);
  o.max_ttl_ms = 3000;
  o.ttl_ms = 4000;
  assert_cq_err(cq_fleet_open(&b, srv.url, "maxttl", &o), CQ_EINVAL);
  assert_non_null(strstr(cq_fleet_error(), "longer than the namespace's"));
  o.ttl_ms = 1000;
  assert_cq_ok(cq_fleet_open(&b, srv.url, "maxttl", &o));
  assert_cq_ok(cq_pool_destroy(b));
  assert_cq_ok(cq_pool_destroy(a));
  cqr_stop(&srv);
}

static void on_granted(cq_grant *g, int status) {
  _Atomic int *order = g->data;
  static _Atomic int next = 1;
  atomic_store(order, status == 0 ? atomic_fetch_add(&next, 1) : -1);
}

/* A namespace created without CQ_FLEET_NEW_NAMESPACE is quarantined for
 * its longest TTL: a try says so (CQ_EBUSY, with the time left), and
 * acquires wait in line and are granted in arrival order once it ends. */
static void
test_acquires_in_a_quarantine_wait_and_go_in_arrival_order(void **state) {
  (void)state;
  cqr_start(&srv, NULL);
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.host = "h";
  o.ttl_ms = 1000;
  o.max_ttl_ms = 1000;
  o.heartbeat_ms = 250;
  cq_pool *p = NULL;
  assert_cq_ok(cq_fleet_open(&p, srv.url, "quarantined", &o));
  cq_fleet_stats st = CQ_FLEET_STATS_INIT;
  assert_cq_ok(cq_fleet_stats_get(p, &st));
  assert_true(st.quarantine_ms > 0);
  assert_cq_ok(cq_budget_add(p, "licence", 1));
  cq_req req;
  cqt_req(&req, p, "licence:1");
  cq_grant t;
  cq_grant_init(&t);
  assert_cq_err(cq_grant_try(p, &t, &req), CQ_EBUSY);
  assert_non_null(strstr(cq_grant_error(&t), "is quarantined"));
  cq_grant w[3];
  _Atomic int order[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) {
    cq_grant_init(&w[i]);
    w[i].data = &order[i];
    assert_cq_ok(cq_grant_submit(p, &w[i], &req, CQ_NEVER, on_granted));
  }
  for (int i = 0; i < 3; i++) {
    for (int k = 0; k < 3000 && atomic_load(&order[i]) == 0; k++)
      cqt_sleep_ms(10);
    assert_int_equal(atomic_load(&order[i]), i + 1);
    for (int j = i + 1; j < 3; j++)
      assert_int_equal(atomic_load(&order[j]), 0);
    assert_cq_ok(cq_grant_release(p, &w[i]));
  }
  assert_cq_ok(cq_grant_try(p, &t, &req));
  assert_cq_ok(cq_grant_release(p, &t));
  assert_cq_ok(cq_pool_destroy(p));
  cqr_stop(&srv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_a_process_new_to_a_lost_namespace_is_granted_after_the_old_holders_deadline),
      cmocka_unit_test(
          test_the_quarantine_outlasts_the_longest_ttl_not_the_noticers),
      cmocka_unit_test(
          test_tokens_after_a_lost_state_are_greater_than_every_token_before),
      cmocka_unit_test(
          test_every_process_of_a_namespace_gives_the_same_longest_ttl),
      cmocka_unit_test(
          test_acquires_in_a_quarantine_wait_and_go_in_arrival_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
