/*
 * The fleet pool's foundation: URLs and names, opening a namespace and a
 * session, declarations shared by processes, and a grant that goes to the
 * server and back.
 */
#include "fleet_test.h"

#include "fleet.h"

static void test_urls_parse_or_explain_what_is_wrong(void **state) {
  (void)state;
  struct fl_url u;
  char err[160];
  assert_cq_ok(fl_url_parse("redis://localhost", &u, err, sizeof(err)));
  assert_string_equal(u.host, "localhost");
  assert_int_equal(u.port, 6379);
  assert_int_equal(u.db, 0);
  assert_cq_ok(fl_url_parse("redis://alice:s3cr@t@db.example:6380/2", &u, err,
                            sizeof(err)));
  assert_string_equal(u.user, "alice");
  assert_string_equal(u.password, "s3cr@t");
  assert_string_equal(u.host, "db.example");
  assert_int_equal(u.port, 6380);
  assert_int_equal(u.db, 2);
  assert_cq_ok(fl_url_parse("redis://[::1]:7000", &u, err, sizeof(err)));
  assert_string_equal(u.host, "::1");
  assert_int_equal(u.port, 7000);
  assert_cq_ok(
      fl_url_parse("unix:///run/redis/redis.sock?db=3", &u, err, sizeof(err)));
  assert_true(u.unix_socket);
  assert_string_equal(u.path, "/run/redis/redis.sock");
  assert_int_equal(u.db, 3);
  assert_cq_ok(fl_url_parse("unix://pw@/tmp/r.sock", &u, err, sizeof(err)));
  assert_string_equal(u.password, "pw");
  assert_string_equal(u.path, "/tmp/r.sock");

  static const char *const bad[][2] = {
      {"http://localhost", "expected redis://"},
      {"redis://", "host is empty"},
      {"redis://host:0", "port must be a number from 1 to 65535"},
      {"redis://host:99999", "port"},
      {"redis://host:12ab", "port"},
      {"redis://host/x", "database must be a number"},
      {"redis://ho st", "unexpected character ' '"},
      {"unix://tmp/r.sock", "absolute path"},
      {"unix:///tmp/r.sock?database=1", "expected ?db=N"},
      {"redis://[::1", "unclosed '['"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = '\0';
    assert_cq_err(fl_url_parse(bad[i][0], &u, err, sizeof(err)), CQ_EINVAL);
    if (strstr(err, bad[i][1]) == NULL)
      fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i][0], err, bad[i][1]);
  }
}

static void
test_names_follow_the_core_rules_and_hosts_join_with_at(void **state) {
  (void)state;
  assert_cq_ok(fl_name_check("warehouse-db", false));
  assert_cq_ok(fl_name_check("a/b.c_d", false));
  assert_cq_err(fl_name_check("gpu@hostA", false), CQ_EINVAL);
  assert_cq_ok(fl_name_check("gpu@hostA", true));
  assert_cq_err(fl_name_check("gpu@a@b", true), CQ_EINVAL);
  assert_cq_err(fl_name_check("@host", true), CQ_EINVAL);
  assert_cq_err(fl_name_check("gpu@", true), CQ_EINVAL);
  assert_cq_err(fl_name_check("", false), CQ_EINVAL);
  assert_cq_ok(fl_namespace_check("prod.eu-1_a"));
  assert_cq_err(fl_namespace_check("a{b}"), CQ_EINVAL);
  assert_cq_err(fl_namespace_check("a:b"), CQ_EINVAL);
}

static void test_a_server_that_cannot_be_reached_fails_closed(void **state) {
  (void)state;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.timeout_ms = 300;
  cq_pool *p = NULL;
  assert_cq_err(cq_fleet_open(&p, "unix:///nonexistent/cronoq.sock", "x", &o),
                CQ_EUNAVAILABLE);
  assert_null(p);
  /* The message names the URL the caller gave, and says why. */
  printf("open: %s\n", cq_fleet_error());
  assert_non_null(strstr(cq_fleet_error(), "unix:///nonexistent/cronoq.sock"));
  assert_non_null(strstr(cq_fleet_error(), "cannot be reached"));
}

/* Messages name the URL with its password replaced by "***": a URL that
 * cannot be parsed, a server that cannot be reached, a password given
 * alone or after a user name (and one holding '@' or '/'). */
static void test_messages_hide_the_urls_password(void **state) {
  (void)state;
  static const struct {
    const char *url, *shown;
    int rc;
  } cases[] = {
      {"redis://:s3cret@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0",
       CQ_EUNAVAILABLE},
      {"redis://cronoq:s3cret@127.0.0.1:1", "redis://cronoq:***@127.0.0.1:1",
       CQ_EUNAVAILABLE},
      {"unix://s3cret@/nonexistent/cronoq.sock",
       "unix://***@/nonexistent/cronoq.sock", CQ_EUNAVAILABLE},
      {"redis://cronoq:s3c@ret@bad host:6379", "redis://cronoq:***@bad host",
       CQ_EINVAL},
      {"redis://u:s3cret@h:99999", "redis://u:***@h:99999", CQ_EINVAL},
      {"unix://u:s3cret@relative.sock", "unix://u:***@relative.sock",
       CQ_EINVAL},
      /* A password holding '/' (base64 ones do), which once passed for
       * the start of a path: the URL was refused, the password shown. */
      {"redis://cronoq:s3c/ret@127.0.0.1:1", "redis://cronoq:***@127.0.0.1:1",
       CQ_EUNAVAILABLE},
      {"redis://s3c/ret@127.0.0.1:1/0", "redis://***@127.0.0.1:1/0",
       CQ_EUNAVAILABLE},
      {"unix://cronoq:s3c/ret@/nonexistent/cronoq.sock",
       "unix://cronoq:***@/nonexistent/cronoq.sock", CQ_EUNAVAILABLE},
      {"redis://cronoq:s3c/ret@host:99999", "redis://cronoq:***@host:99999",
       CQ_EINVAL},
      {"unix://cronoq:s3c/ret@relative.sock", "unix://cronoq:***@relative.sock",
       CQ_EINVAL},
  };
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.timeout_ms = 300;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    cq_pool *p = NULL;
    assert_cq_err(cq_fleet_open(&p, cases[i].url, "x", &o), cases[i].rc);
    const char *msg = cq_fleet_error();
    printf("open %s: %s\n", cases[i].shown, msg);
    if (strstr(msg, "s3c") != NULL || strstr(msg, cases[i].shown) == NULL)
      fail_msg("\"%s\" should name \"%s\"", msg, cases[i].shown);
  }
}

/* A password may hold '/' (base64 passwords do) and '@', and a socket
 * path '@': each is parsed whole, in redis:// and in unix:// URLs (a '/'
 * in the password once passed for the start of a path). */
static void test_a_password_holding_a_slash_is_parsed_whole(void **state) {
  (void)state;
  struct fl_url u;
  char err[160];
  assert_cq_ok(fl_url_parse("redis://alice:ab/c@d+e@db.example:6380/2", &u, err,
                            sizeof(err)));
  assert_string_equal(u.user, "alice");
  assert_string_equal(u.password, "ab/c@d+e");
  assert_string_equal(u.host, "db.example");
  assert_int_equal(u.port, 6380);
  assert_int_equal(u.db, 2);
  assert_cq_ok(fl_url_parse("unix://alice:ab/c@/run/r@dis/redis.sock", &u, err,
                            sizeof(err)));
  assert_string_equal(u.password, "ab/c");
  assert_string_equal(u.path, "/run/r@dis/redis.sock");
  assert_cq_ok(
      fl_url_parse("unix:///run/r@dis/redis.sock", &u, err, sizeof(err)));
  assert_string_equal(u.password, "");
  assert_string_equal(u.path, "/run/r@dis/redis.sock");
}

static void test_bad_options_are_refused_with_a_reason(void **state) {
  (void)state;
  fleet_server_up();
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  cq_pool *p = NULL;
  o.flags = CQ_POOL_BACKFILL;
  assert_cq_err(cq_fleet_open(&p, fleet_server.url, "x", &o), CQ_EINVAL);
  assert_non_null(strstr(cq_fleet_error(), "backfill"));
  o.flags = 0;
  o.ttl_ms = 1000;
  o.heartbeat_ms = 600;
  assert_cq_err(cq_fleet_open(&p, fleet_server.url, "x", &o), CQ_EINVAL);
  assert_non_null(strstr(cq_fleet_error(), "three heartbeat intervals"));
  o = (cq_fleet_opts)CQ_FLEET_OPTS_INIT;
  o.host = "bad host";
  assert_cq_err(cq_fleet_open(&p, fleet_server.url, "x", &o), CQ_EINVAL);
  assert_cq_err(cq_fleet_open(&p, fleet_server.url, "a b", NULL), CQ_EINVAL);
  assert_cq_err(cq_fleet_open(&p, "redis//x", "x", NULL), CQ_EINVAL);
  assert_null(p);
}

static void
test_open_makes_a_namespace_and_a_session_that_destroy_ends(void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *p = fleet_open_as(ns, "hostA", NULL);
  assert_true(cq_fleet_is_fleet(p));
  assert_string_equal(cq_fleet_host(p), "hostA");
  char key[96], v[64];
  snprintf(key, sizeof(key), "cq:{%s}:meta", ns);
  cqr_str(&fleet_server, v, sizeof(v), "HGET", key, "schema", NULL);
  assert_string_equal(v, "2");
  snprintf(key, sizeof(key), "cq:{%s}:S", ns);
  assert_int_equal(cqr_int(&fleet_server, "ZCARD", key, NULL), 1);
  cq_pool *q = fleet_open_as(ns, "hostB", NULL);
  assert_int_equal(cqr_int(&fleet_server, "ZCARD", key, NULL), 2);
  assert_cq_ok(cq_pool_destroy(q));
  assert_cq_ok(cq_pool_destroy(p));
  assert_int_equal(cqr_int(&fleet_server, "ZCARD", key, NULL), 0);
}

static void test_a_namespace_keeps_its_claims_option(void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.flags = CQ_POOL_STAGED_CLAIMS;
  cq_pool *p = fleet_open_as(ns, "hostA", &o);
  cq_pool *q = NULL;
  o.flags = 0;
  o.host = "hostB";
  assert_cq_err(cq_fleet_open(&q, fleet_server.url, ns, &o), CQ_EINVAL);
  const char *e = cq_fleet_error();
  if (strstr(e, "staged claims") == NULL ||
      strstr(e, "claims all at once") == NULL)
    fail_msg("the message names both options: %s", e);
  assert_cq_ok(cq_pool_destroy(p));
}

/* A declaration of an existing budget or class with another capacity is
 * accepted and the namespace keeps its live capacity (a capacity changed
 * while it ran, cq_budget_set_capacity(), outlives the processes that
 * declared the first one): a process restarted with its first spec once
 * failed with '"licence" has capacity 5 ... not 3'. The process then keeps
 * the live capacity as what it declared, for a loss of state. */
static void test_a_declaration_adopts_the_namespaces_live_capacity(void **st) {
  (void)st;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *a = fleet_open_as(ns, "hostA", NULL);
  assert_cq_ok(cq_budget_add(a, "licence", 3));
  assert_cq_ok(cq_class_add(a, "predict", 2));
  assert_cq_ok(cq_budget_set_capacity(a, "licence", 5));
  assert_cq_ok(cq_class_set_max(a, "predict", 4));
  assert_cq_ok(cq_pool_destroy(a));
  /* Restarted with its first spec. */
  cq_pool *b = fleet_open_as(ns, "hostA", NULL);
  char err[256];
  assert_cq_ok(
      cq_pool_add_spec(b, "licence=3,predict:class=2", NULL, err, sizeof(err)));
  assert_cq_ok(cq_budget_add(b, "licence", 3));
  assert_int_equal(cqt_budget(b, "licence").capacity, 5);
  cq_resource_stats rs;
  assert_cq_ok(cq_resource_stats_get(b, "predict", &rs));
  assert_int_equal(rs.capacity, 4);
  assert_cq_ok(cq_pool_destroy(b));
}

static void test_declarations_that_match_are_accepted_and_conflicts_name_both(
    void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *a = fleet_open_as(ns, "hostA", NULL);
  cq_pool *b = fleet_open_as(ns, "hostB", NULL);
  assert_cq_ok(cq_budget_add(a, "licence", 3));
  assert_cq_ok(cq_budget_add(b, "licence", 3));
  assert_cq_err(cq_class_add(b, "licence", 3), CQ_EEXIST);
  assert_non_null(strstr(cq_fleet_error(), "is a budget"));
  assert_non_null(strstr(cq_fleet_error(), "not a class"));
  assert_cq_err(cq_budget_add_ex(b, "licence", 3, CQ_BUDGET_LONE), CQ_EEXIST);
  assert_non_null(strstr(cq_fleet_error(), "lone-request allowance"));
  assert_cq_ok(cq_class_add(a, "predict", 2));
  assert_cq_ok(cq_class_add(b, "predict", 2));

  /* Per-host device pools: each host its own, the same host alike. */
  const char *ids[] = {"GPU-a", "GPU-b"};
  assert_cq_ok(cq_devices_add(a, "gpu", 2, ids));
  assert_cq_ok(cq_devices_add(b, "gpu", 1, NULL));
  cq_pool *a2 = fleet_open_as(ns, "hostA", NULL);
  assert_cq_ok(cq_devices_add(a2, "gpu", 2, ids));
  assert_cq_err(cq_devices_add(a2, "gpu", 1, NULL), CQ_EEXIST);
  assert_non_null(strstr(cq_fleet_error(), "GPU-a,GPU-b"));
  assert_cq_err(cq_devices_add(a2, "gpu@hostB", 1, NULL), CQ_EINVAL);
  /* A budget cannot take a device pool's name, nor the other way. */
  assert_cq_err(cq_budget_add(a, "gpu", 4), CQ_EEXIST);
  assert_non_null(strstr(cq_fleet_error(), "per-host device pools"));
  assert_cq_err(cq_devices_add(a, "licence", 1, NULL), CQ_EEXIST);

  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(a, "gpu", &st));
  assert_string_equal(st.name, "gpu@hostA");
  assert_int_equal(st.devices, 2);
  assert_cq_ok(cq_resource_stats_get(b, "gpu", &st));
  assert_string_equal(st.name, "gpu@hostB");
  assert_int_equal(st.devices, 1);
  assert_cq_ok(cq_resource_stats_get(b, "gpu@hostA", &st));
  assert_int_equal(st.capacity, 2000);
  size_t n;
  cq_resource_stats all[8];
  assert_cq_ok(cq_pool_snapshot(a, all, 8, &n));
  assert_int_equal(n, 4); /* device pools first, then in the order added */
  assert_string_equal(all[0].name, "gpu@hostA");
  assert_string_equal(all[1].name, "gpu@hostB");
  assert_string_equal(all[2].name, "licence");
  assert_string_equal(all[3].name, "predict");
  assert_cq_ok(cq_pool_destroy(a2));
  assert_cq_ok(cq_pool_destroy(b));
  assert_cq_ok(cq_pool_destroy(a));
}

static void test_a_grant_is_a_lease_with_a_growing_fence(void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *a = fleet_open_as(ns, "hostA", NULL);
  assert_cq_ok(cq_budget_add(a, "db", 3));
  const char *ids[] = {"GPU-0", "GPU-1"};
  assert_cq_ok(cq_devices_add(a, "gpu", 2, ids));
  cq_req req;
  assert_cq_ok(cq_req_init(&req, a));
  assert_cq_ok(cq_req_add(&req, "db", 2));
  assert_cq_ok(cq_req_add_fraction(&req, "gpu", 500));
  assert_int_equal(cq_req_count(&req), 2);
  assert_cq_err(cq_req_add(&req, "nope", 1), CQ_ENOENT);
  assert_string_equal(cq_req_error(&req),
                      "request asks unknown resource \"nope\"");
  assert_cq_err(cq_req_add(&req, "gpu", 1), CQ_EINVAL);
  assert_string_equal(cq_req_error(&req),
                      "gpu is a device pool: ask a fraction or whole "
                      "devices");
  cq_grant g1, g2;
  cq_grant_init(&g1);
  cq_grant_init(&g2);
  assert_cq_ok(cq_grant_try(a, &g1, &req));
  assert_true(cq_grant_is_held(&g1));
  assert_int_equal(cq_grant_held(&g1, "db"), 2);
  assert_int_equal(cq_grant_held(&g1, "gpu"), 500);
  assert_int_equal(cq_grant_held(&g1, "gpu@hostA"), 500);
  char vis[64];
  assert_cq_ok(cq_grant_cuda_visible(&g1, "gpu", vis, sizeof(vis)));
  assert_string_equal(vis, "GPU-0");
  uint64_t f1, f2;
  assert_cq_ok(cq_fleet_grant_fence(&g1, &f1));
  assert_cq_err(cq_grant_try(a, &g2, &req), CQ_EBUSY);
  cq_req one;
  assert_cq_ok(cq_req_init(&one, a));
  assert_cq_ok(cq_req_add(&one, "db", 1));
  assert_cq_ok(cq_grant_try(a, &g2, &one));
  assert_cq_ok(cq_fleet_grant_fence(&g2, &f2));
  assert_true(f2 > f1);
  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(a, "db", &st));
  assert_int_equal(st.in_use, 3);
  assert_int_equal(st.grants, 2);
  assert_cq_ok(cq_grant_release(a, &g1));
  assert_cq_err(cq_grant_release(a, &g1), CQ_ESTATE);
  assert_false(cq_grant_is_held(&g1));
  assert_cq_err(cq_fleet_grant_fence(&g1, &f1), CQ_ESTATE);
  assert_cq_ok(cq_grant_release(a, &g2));
  assert_cq_ok(cq_resource_stats_get(a, "db", &st));
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.peak, 3);
  assert_cq_ok(cq_pool_destroy(a));
}

/* The text layer of the core, on a fleet pool: resource specs (with GPU
 * detection), request specs, and the metrics. */
static void test_specs_and_metrics_work_on_a_fleet_pool(void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *a = fleet_open_as(ns, "hostA", NULL);
  cq_pool *b = fleet_open_as(ns, "hostB", NULL);
  char err[256];
  assert_int_equal(setenv("CRONOQ_NUM_GPUS", "2", 1), 0);
  assert_cq_ok(
      cq_pool_add_spec(a, "licence=2,gpu=auto", NULL, err, sizeof(err)));
  /* Another host, the same spec: the licence the namespace has (a
   * matching declaration, accepted) and its own gpu. */
  assert_cq_ok(
      cq_pool_add_spec(b, "licence=2,gpu=auto", NULL, err, sizeof(err)));
  assert_int_equal(unsetenv("CRONOQ_NUM_GPUS"), 0);
  /* A conflicting one (another kind) is refused, with what the namespace
   * has, and changes nothing. */
  assert_cq_err(cq_pool_add_spec(b, "licence:class=3", NULL, err, sizeof(err)),
                CQ_EEXIST);
  char want[256];
  snprintf(want, sizeof(want),
           "resource spec: cannot add \"licence\" (item at column 1): "
           "\"licence\" is a budget in namespace \"%s\", not a class",
           ns);
  assert_string_equal(err, want);
  cq_resource_stats lic;
  assert_cq_ok(cq_resource_stats_get(a, "licence", &lic));
  assert_int_equal(lic.capacity, 2);

  /* {gpu: 0.5, licence: 1} on this host's gpu, whole or not at all. */
  cq_req req;
  assert_cq_ok(cq_req_init(&req, a));
  assert_cq_ok(cq_req_parse(&req, "gpu=0.5,licence=1"));
  assert_int_equal(cq_req_count(&req), 2);
  cq_req bad;
  assert_cq_ok(cq_req_init(&bad, a));
  assert_cq_err(cq_req_parse(&bad, "gpu=0.5,nope=1"), CQ_ENOENT);
  assert_int_equal(cq_req_count(&bad), 0); /* all or nothing */
  cq_grant g1, g2, g3;
  cq_grant_init(&g1);
  cq_grant_init(&g2);
  cq_grant_init(&g3);
  assert_cq_ok(cq_grant_try(a, &g1, &req));
  char vis[64];
  assert_cq_ok(cq_grant_cuda_visible(&g1, "gpu", vis, sizeof(vis)));
  assert_string_equal(vis, "0");
  cq_req breq;
  assert_cq_ok(cq_req_init(&breq, b));
  assert_cq_ok(cq_req_parse(&breq, "gpu=2,licence=1"));
  assert_cq_ok(cq_grant_try(b, &g2, &breq)); /* hostB's two gpus */
  assert_int_equal(cq_grant_held(&g2, "gpu@hostB"), 2000);
  /* The licence is the fleet's: both are out. */
  assert_cq_err(cq_grant_try(a, &g3, &req), CQ_EBUSY);

  static char text[FLEET_TEXT_MAX];
  text[0] = '\0';
  assert_cq_ok(cq_pool_write_metrics(a, fleet_collect, text));
  assert_non_null(strstr(text, "cronoq_in_use{resource=\"licence\"} 2"));
  assert_non_null(strstr(text, "resource=\"gpu@hostA\""));
  assert_non_null(strstr(text, "resource=\"gpu@hostB\""));

  assert_cq_ok(cq_grant_release(a, &g1));
  assert_cq_ok(cq_grant_release(b, &g2));
  assert_cq_ok(cq_pool_destroy(b));
  assert_cq_ok(cq_pool_destroy(a));
}

/* The least a waiter of wait_program() waits, in ms: more than the bounds
 * of 1, 4 and 16 ms, so that those buckets count exactly the six grants
 * that did not wait, whatever the machine's speed. */
#define WAITED_MS 20

static void flag_cb(cq_grant *g, int status) {
  atomic_store((_Atomic int *)g->data, status == 0 ? 1 : -1);
}

/* One program for both kinds of pool: on "db" (capacity 1), six grants at
 * once (the last one held), then one that waits at least WAITED_MS for it. */
static void wait_program(cq_pool *p) {
  assert_cq_ok(cq_budget_add(p, "db", 1));
  cq_req r;
  assert_cq_ok(cq_req_init(&r, p));
  assert_cq_ok(cq_req_add(&r, "db", 1));
  cq_grant g, w;
  for (int i = 0; i < 5; i++) {
    cq_grant_init(&g);
    assert_cq_ok(cq_grant_try(p, &g, &r));
    assert_cq_ok(cq_grant_release(p, &g));
  }
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &r));
  _Atomic int granted = 0;
  cq_grant_init(&w);
  w.data = (void *)&granted;
  assert_cq_ok(cq_grant_submit(p, &w, &r, CQ_NEVER, flag_cb));
  cqt_sleep_ms(WAITED_MS);
  assert_cq_ok(cq_grant_release(p, &g));
  for (int i = 0; i < CQT_PATIENCE_MS / 5 && atomic_load(&granted) == 0; i++)
    cqt_sleep_ms(5);
  assert_int_equal(atomic_load(&granted), 1);
  assert_cq_ok(cq_grant_release(p, &w));
}

/* The exposition's buckets of "db": each `le` in ms (-1 for +Inf) and its
 * count, in order; returns how many. */
static int db_buckets(cq_pool *p, double le_ms[], uint64_t count[], int cap) {
  static char text[FLEET_TEXT_MAX];
  text[0] = '\0';
  assert_cq_ok(cq_pool_write_metrics(p, fleet_collect, text));
  static const char prefix[] =
      "\ncronoq_wait_seconds_bucket{resource=\"db\",le=\"";
  int n = 0;
  for (const char *at = strstr(text, prefix); at != NULL && n < cap;
       at = strstr(at + 1, prefix)) {
    const char *le = at + strlen(prefix);
    le_ms[n] = strncmp(le, "+Inf", 4) == 0 ? -1 : strtod(le, NULL) * 1000;
    const char *v = strstr(le, "} ");
    assert_non_null(v);
    count[n++] = strtoull(v + 2, NULL, 10);
  }
  return n;
}

/* A fleet pool's waiting-time histogram counts as an in-process pool's:
 * the same program gives the same buckets, in the exposition and in the
 * snapshot (a fleet pool once gave 0 in every finite bucket). Buckets
 * above WAITED_MS hold the waiter or not depending on how long it waited,
 * so they are checked only for what they must be: between the two. */
static void test_a_fleet_pools_wait_buckets_count_as_in_process(void **state) {
  (void)state;
  fleet_server_up();
  cq_pool *local, *fleet = fleet_open_as(fleet_new_ns(), "hostA", NULL);
  assert_cq_ok(cq_pool_create(&local, NULL));
  cq_pool *pools[2] = {local, fleet};
  double le[2][64];
  uint64_t count[2][64];
  int n[2];
  for (int k = 0; k < 2; k++) {
    wait_program(pools[k]);
    cq_resource_stats st;
    assert_cq_ok(cq_resource_stats_get(pools[k], "db", &st));
    assert_int_equal(st.wait.count, 7);
    for (int b = 0; b < CQ_WAIT_BUCKETS; b++) {
      if ((1 << b) <= WAITED_MS)
        assert_int_equal(st.wait.below[b], 6);
      assert_true(st.wait.below[b] >= 6 && st.wait.below[b] <= 7);
    }
    n[k] = db_buckets(pools[k], le[k], count[k], 64);
    assert_true(n[k] > 4);
    assert_true(le[k][n[k] - 1] < 0); /* +Inf last */
    assert_int_equal(count[k][n[k] - 1], 7);
    for (int i = 0; i < n[k] - 1; i++) {
      if (le[k][i] <= WAITED_MS)
        assert_int_equal(count[k][i], 6);
      assert_true(count[k][i] >= 6 && count[k][i] <= count[k][i + 1]);
    }
  }
  assert_int_equal(n[0], n[1]);
  for (int i = 0; i < n[0]; i++) {
    assert_true(le[0][i] == le[1][i]);
    if (le[0][i] >= 0 && le[0][i] <= WAITED_MS)
      assert_int_equal(count[0][i], count[1][i]);
  }
  assert_cq_ok(cq_pool_destroy(fleet));
  assert_cq_ok(cq_pool_destroy(local));
}

/* A spec that fails on a fleet pool keeps what it declared before the
 * failing item: another process may be using it already. */
static void
test_a_failed_spec_on_a_fleet_pool_keeps_what_it_declared_before(void **s) {
  (void)s;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *a = fleet_open_as(ns, "hostA", NULL);
  cq_pool *b = fleet_open_as(ns, "hostB", NULL);
  char err[256];
  assert_cq_ok(cq_pool_add_spec(a, "licence=2", NULL, err, sizeof(err)));
  assert_cq_err(cq_pool_add_spec(b, "mem=64,licence:class=3,late=1", NULL, err,
                                 sizeof(err)),
                CQ_EEXIST);
  assert_non_null(strstr(err, "\"licence\" (item at column 8)"));
  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(a, "mem", &st));
  assert_int_equal(st.capacity, 64);
  assert_cq_ok(cq_resource_stats_get(a, "licence", &st));
  assert_int_equal(st.capacity, 2);
  assert_cq_err(cq_resource_stats_get(a, "late", &st), CQ_ENOENT);
  /* Bad syntax still declares nothing. */
  assert_cq_err(cq_pool_add_spec(b, "other=1,licence=", NULL, err, sizeof(err)),
                CQ_EPARSE);
  assert_cq_err(cq_resource_stats_get(a, "other", &st), CQ_ENOENT);
  assert_cq_ok(cq_pool_destroy(b));
  assert_cq_ok(cq_pool_destroy(a));
}

/* One try and release of "db" on `p`, and which way the server ran them:
 * true when through the library (FCALL), false as scripts. */
static bool try_and_release_ran_as_functions(cq_pool *p) {
  char ok[16];
  cqr_str(&fleet_server, ok, sizeof(ok), "CONFIG", "RESETSTAT", NULL);
  assert_string_equal(ok, "OK");
  cq_req req;
  assert_cq_ok(cq_req_init(&req, p));
  assert_cq_ok(cq_req_add(&req, "db", 1));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &req));
  assert_cq_ok(cq_grant_release(p, &g));
  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(p, "db", &st));
  assert_int_equal(st.in_use, 0);
  char info[8192];
  cqr_str(&fleet_server, info, sizeof(info), "INFO", "commandstats", NULL);
  bool fcall = strstr(info, "cmdstat_fcall:") != NULL;
  bool scripts = strstr(info, "cmdstat_evalsha:") != NULL ||
                 strstr(info, "cmdstat_eval:") != NULL;
  assert_true(fcall != scripts);
  return fcall;
}

/* How many calls of `cmd` an INFO commandstats text counts. */
static long long calls_of(const char *info, const char *cmd) {
  char key[48];
  snprintf(key, sizeof(key), "cmdstat_%s:calls=", cmd);
  const char *at = strstr(info, key);
  return at != NULL ? atoll(at + strlen(key)) : 0;
}

/* An uncontended try + release of one budget takes the quick path
 * (docs/FLEET.md, "The uncontended case"): per pair, the namespace's head
 * twice, the session's secret once, the resource's one field read and written
 * twice, a fencing token, the lease written, read and removed, and
 * nothing else. A quick path that gave up on it would read again. */
static void
test_an_uncontended_try_and_release_make_eleven_commands(void **state) {
  (void)state;
  fleet_server_up();
  cq_pool *p = fleet_open_quiet(fleet_new_ns(), "h", 0); /* while it counts */
  assert_cq_ok(cq_budget_add(p, "db", 4));
  cq_req req;
  cqt_req(&req, p, "db:1");
  cq_grant g;
  cq_grant_init(&g);
  char ok[16];
  cqr_str(&fleet_server, ok, sizeof(ok), "CONFIG", "RESETSTAT", NULL);
  assert_string_equal(ok, "OK");
  for (int i = 0; i < 10; i++) {
    assert_cq_ok(cq_grant_try(p, &g, &req));
    assert_cq_ok(cq_grant_release(p, &g));
  }
  char info[8192];
  cqr_str(&fleet_server, info, sizeof(info), "INFO", "commandstats", NULL);
  assert_int_equal(calls_of(info, "fcall"), 20);
  /* Five per pair, one of them the session's record, for its secret. */
  assert_int_equal(calls_of(info, "hget"), 60);
  assert_int_equal(calls_of(info, "exists"), 0);
  assert_int_equal(calls_of(info, "zscore"), 0);
  assert_int_equal(calls_of(info, "hset"), 30);
  assert_int_equal(calls_of(info, "hincrby"), 10);
  assert_int_equal(calls_of(info, "hdel"), 10);
  long long all = 0;
  for (const char *at = strstr(info, ":calls="); at != NULL;
       at = strstr(at + 1, ":calls="))
    all += atoll(at + strlen(":calls="));
  /* The 20 calls, their 110 commands, and CONFIG RESETSTAT itself. */
  assert_int_equal(all, 20 + 110 + 1);
  assert_cq_ok(cq_pool_destroy(p));
}

static _Atomic int told_status = 1;
static void tell_status(cq_grant *g, int status) {
  (void)g;
  atomic_store(&told_status, status);
}

/* A grant that waits or holds in a fleet pool is refused by an acquire on
 * another pool, fleet or in-process, with CQ_ESTATE, and stays its pool's:
 * the waiter can still be cancelled there, the holder released. Before,
 * another fleet pool rebound it (then refused it), and an in-process pool
 * took it over. */
static void
test_a_grant_busy_in_a_fleet_pool_is_refused_by_another_pool(void **state) {
  (void)state;
  fleet_server_up();
  cq_pool *pools[3] = {fleet_open_as(fleet_new_ns(), "h", NULL),
                       fleet_open_as(fleet_new_ns(), "h", NULL), NULL};
  assert_cq_ok(cq_pool_create(&pools[2], NULL));
  cq_req reqs[3];
  for (int i = 0; i < 3; i++) {
    assert_cq_ok(cq_budget_add(pools[i], "db", 1));
    cqt_req(&reqs[i], pools[i], "db:1");
  }
  cq_pool *a = pools[0], *b = pools[1], *local = pools[2];
  cq_req *ra = &reqs[0], *rb = &reqs[1], *rl = &reqs[2];
  cq_grant held, waiting;
  cq_grant_init(&held);
  cq_grant_init(&waiting);
  assert_cq_ok(cq_grant_try(a, &held, ra));
  assert_cq_ok(cq_grant_submit(a, &waiting, ra, CQ_NEVER, tell_status));
  cq_grant *busy[] = {&held, &waiting};
  for (int i = 0; i < 2; i++) {
    assert_cq_err(cq_grant_try(b, busy[i], rb), CQ_ESTATE);
    assert_cq_err(cq_grant_acquire(b, busy[i], rb, cq_now() + 10), CQ_ESTATE);
    assert_cq_err(cq_grant_try(local, busy[i], rl), CQ_ESTATE);
    assert_cq_err(cq_grant_submit(local, busy[i], rl, CQ_NEVER, tell_status),
                  CQ_ESTATE);
    assert_ptr_equal(cq_backend_grant_pool(busy[i]), a);
  }
  assert_true(cq_grant_is_held(&held));
  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(b, "db", &st));
  assert_int_equal(st.in_use, 0);
  assert_cq_ok(cq_resource_stats_get(local, "db", &st));
  assert_int_equal(st.in_use, 0);
  assert_cq_ok(cq_grant_cancel(a, &waiting));
  assert_int_equal(atomic_load(&told_status), CQ_ECANCELED);
  assert_cq_ok(cq_grant_release(a, &held));
  /* Idle again, either may go elsewhere. */
  assert_cq_ok(cq_grant_try(local, &held, rl));
  assert_cq_ok(cq_grant_release(local, &held));
  assert_cq_ok(cq_grant_try(b, &waiting, rb));
  assert_cq_ok(cq_grant_release(b, &waiting));
  assert_cq_ok(cq_pool_destroy(local));
  assert_cq_ok(cq_pool_destroy(b));
  assert_cq_ok(cq_pool_destroy(a));
}

static void count_lost(const cq_event *ev, void *arg) {
  if (ev->type == CQ_EVENT_LOST)
    atomic_fetch_add((_Atomic int *)arg, 1);
}

/* A partial release of a lease the server no longer has (its session was
 * ended, say while the process was stopped) returns CQ_ESTATE, "not
 * held": the grant is then idle, told lost once, and free to reuse.
 * Before, it stayed in the pool's list of held grants, and a caller that
 * re-initialised it, as CQ_ESTATE allows, broke that list. */
static void
test_a_part_release_of_a_lease_the_server_lost_leaves_the_grant_idle(
    void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  _Atomic int lost = 0;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.on_event = count_lost;
  o.event_arg = (void *)&lost;
  cq_pool *p = fleet_open_as(ns, "h", &o);
  assert_cq_ok(cq_budget_add(p, "db", 4));
  cq_req req;
  cqt_req(&req, p, "db:2");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &req));
  char sessions[96], leases[160], sid[64];
  snprintf(sessions, sizeof(sessions), "cq:{%s}:S", ns);
  cqr_str(&fleet_server, sid, sizeof(sid), "EVAL",
          "return redis.call('ZRANGE', KEYS[1], 0, 0)[1]", "1", sessions, NULL);
  snprintf(leases, sizeof(leases), "cq:{%s}:L:%s", ns, sid);
  assert_int_equal(cqr_int(&fleet_server, "DEL", leases, NULL), 1);
  assert_cq_err(cq_grant_release_part(p, &g, "db", 1), CQ_ESTATE);
  assert_false(cq_grant_is_held(&g));
  assert_int_equal(atomic_load(&lost), 1);
  assert_cq_err(cq_grant_release(p, &g), CQ_ESTATE);
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &req));
  assert_cq_ok(cq_grant_release(p, &g));
  assert_int_equal(atomic_load(&lost), 1);
  assert_cq_ok(cq_pool_destroy(p));
}

int cq__fleet_fsck(cq_pool *pool, char *problems, size_t len); /* tests */

/* A session is alive while its record is (the try's check reads nothing
 * else): the record and the session's entry by expiry must come and go
 * together, and fsck says where they do not. */
static void
test_fsck_names_a_session_whose_record_and_entry_disagree(void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *p = fleet_open_quiet(ns, "h", 0); /* no heartbeat meanwhile */
  char problems[1024], sessions[96], sid[64], record[160], aside[96];
  snprintf(sessions, sizeof(sessions), "cq:{%s}:S", ns);
  cqr_str(&fleet_server, sid, sizeof(sid), "EVAL",
          "return redis.call('ZRANGE', KEYS[1], 0, 0)[1]", "1", sessions, NULL);
  assert_true(sid[0] != '\0');
  snprintf(record, sizeof(record), "cq:{%s}:s:%s", ns, sid);
  snprintf(aside, sizeof(aside), "cq:{%s}:aside", ns);
  assert_cq_ok(cq__fleet_fsck(p, problems, sizeof(problems)));
  assert_string_equal(problems, "");
  /* The entry without its record. */
  assert_int_equal(cqr_int(&fleet_server, "EXISTS", record, NULL), 1);
  char ok[16];
  cqr_str(&fleet_server, ok, sizeof(ok), "RENAME", record, aside, NULL);
  assert_string_equal(ok, "OK");
  assert_cq_ok(cq__fleet_fsck(p, problems, sizeof(problems)));
  char want[160];
  snprintf(want, sizeof(want), "session %s has no record", sid);
  assert_non_null(strstr(problems, want));
  cqr_str(&fleet_server, ok, sizeof(ok), "RENAME", aside, record, NULL);
  assert_string_equal(ok, "OK");
  /* A record without its entry. */
  snprintf(record, sizeof(record), "cq:{%s}:s:ghost", ns);
  assert_int_equal(cqr_int(&fleet_server, "HSET", record, "ttl", "1", NULL), 1);
  assert_cq_ok(cq__fleet_fsck(p, problems, sizeof(problems)));
  assert_non_null(strstr(problems, "session ghost has a record but no entry"));
  assert_int_equal(cqr_int(&fleet_server, "DEL", record, NULL), 1);
  assert_cq_ok(cq__fleet_fsck(p, problems, sizeof(problems)));
  assert_string_equal(problems, "");
  assert_cq_ok(cq_pool_destroy(p));
}

static void test_scripts_come_back_after_script_flush(void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  /* As on a server without functions. */
  atomic_store(&cq__fleet_no_functions, true);
  cq_pool *a = fleet_open_as(ns, "hostA", NULL);
  atomic_store(&cq__fleet_no_functions, false);
  assert_cq_ok(cq_budget_add(a, "db", 1));
  char ok[16];
  cqr_str(&fleet_server, ok, sizeof(ok), "SCRIPT", "FLUSH", NULL);
  assert_string_equal(ok, "OK");
  assert_false(try_and_release_ran_as_functions(a));
  assert_false(try_and_release_ran_as_functions(a));
  assert_cq_ok(cq_pool_destroy(a));
}

static void test_the_library_comes_back_after_function_flush(void **state) {
  (void)state;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *a = fleet_open_as(ns, "hostA", NULL);
  assert_cq_ok(cq_budget_add(a, "db", 1));
  assert_true(try_and_release_ran_as_functions(a));
  char ok[16];
  cqr_str(&fleet_server, ok, sizeof(ok), "FUNCTION", "FLUSH", NULL);
  assert_string_equal(ok, "OK");
  assert_true(try_and_release_ran_as_functions(a));
  assert_true(try_and_release_ran_as_functions(a));
  assert_cq_ok(cq_pool_destroy(a));
}

/* The library's constants, as a server reads them, are the C headers':
 * the prelude is run with a last line that returns each of them, and the
 * text is compared with what the headers say. */
static void test_the_librarys_constants_are_the_c_headers(void **state) {
  (void)state;
  fleet_server_up();
  static const char names[] =
      "EINVAL, ENOMEM, EBUSY, ETIMEDOUT, ECANCELED, ECLOSED, ENEVER, ENOENT, "
      "EEXIST, EINUSE, ESTATE, EPOOL, ERANGE, ETOOMANY, ESYS, EPARSE, "
      "EUNAVAILABLE, EACCES, OK, WAITING, OWED, NOSESSION, NONS, UNKNOWN, "
      "QUARANTINE, SCHEMA, BUDGET, DEVICES, CLASS, LONE, MILLI, "
      "HIST_SUB_BITS, HIST_SUB, HIST_TOP_EXP, HIST_BUCKETS";
  char want[512];
  int n = snprintf(want, sizeof(want),
                   "%d %d %d %d %d %d %d %d %d %d %d %d "
                   "%d %d %d %d %d %d",
                   CQ_EINVAL, CQ_ENOMEM, CQ_EBUSY, CQ_ETIMEDOUT, CQ_ECANCELED,
                   CQ_ECLOSED, CQ_ENEVER, CQ_ENOENT, CQ_EEXIST, CQ_EINUSE,
                   CQ_ESTATE, CQ_EPOOL, CQ_ERANGE, CQ_ETOOMANY, CQ_ESYS,
                   CQ_EPARSE, CQ_EUNAVAILABLE, CQ_EACCES);
  n += snprintf(want + n, sizeof(want) - (size_t)n, " %d %d %d %d %d %d %d",
                FL_R_OK, FL_R_WAITING, FL_R_OWED, FL_R_NOSESSION, FL_R_NONS,
                FL_R_UNKNOWN, FL_R_QUARANTINE);
  snprintf(want + n, sizeof(want) - (size_t)n, " %s %d %d %d %u %d %d %d %d %d",
           FL_SCHEMA, CQ_KIND_BUDGET, CQ_KIND_DEVICES, CQ_KIND_CLASS,
           (unsigned)CQ_BUDGET_LONE, CQ_DEVICE_MILLI, 3, 8, 44,
           8 + (44 - 3 + 1) * 8);
  /* The prelude without its "#!lua" line, then the question. */
  const char *text = strchr(fl_lua_prelude, '\n');
  assert_non_null(text);
  size_t len = fl_lua_prelude_len - (size_t)(text - fl_lua_prelude);
  char *script = malloc(len + sizeof(names) + 64);
  assert_non_null(script);
  int at = snprintf(script, len + 1, "%s", text);
  snprintf(script + at, sizeof(names) + 64, "\nreturn table.concat({%s}, ' ')",
           names);
  char got[512];
  cqr_str(&fleet_server, got, sizeof(got), "EVAL", script, "0", NULL);
  free(script);
  assert_string_equal(got, want);
}

static void test_a_user_that_may_not_load_functions_runs_scripts(void **state) {
  (void)state;
  fleet_server_up();
  char ok[16];
  cqr_str(&fleet_server, ok, sizeof(ok), "ACL", "SETUSER", "nofunc", "reset",
          "on", ">pw", "~*", "&*", "+@all", "-function", NULL);
  assert_string_equal(ok, "OK");
  cqr_str(&fleet_server, ok, sizeof(ok), "FUNCTION", "FLUSH", NULL);
  assert_string_equal(ok, "OK");
  const char *ns = fleet_new_ns();
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.username = "nofunc";
  o.password = "pw";
  cq_pool *a = fleet_open_as(ns, "hostA", &o);
  assert_cq_ok(cq_budget_add(a, "db", 1));
  assert_false(try_and_release_ran_as_functions(a));
  /* Another user's pool loads the library; this user still runs scripts
   * (it may not load the library, so it does not count on it). One pool is
   * open at a time while the server's command counts are read: they are
   * the whole server's. */
  assert_cq_ok(cq_pool_destroy(a));
  cq_pool *b = fleet_open_as(ns, "hostB", NULL);
  assert_true(try_and_release_ran_as_functions(b));
  assert_cq_ok(cq_pool_destroy(b));
  a = fleet_open_as(ns, "hostA", &o);
  assert_false(try_and_release_ran_as_functions(a));
  assert_cq_ok(cq_pool_destroy(a));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_urls_parse_or_explain_what_is_wrong),
      cmocka_unit_test(test_names_follow_the_core_rules_and_hosts_join_with_at),
      cmocka_unit_test(test_a_server_that_cannot_be_reached_fails_closed),
      cmocka_unit_test(test_messages_hide_the_urls_password),
      cmocka_unit_test(test_a_password_holding_a_slash_is_parsed_whole),
      cmocka_unit_test(test_bad_options_are_refused_with_a_reason),
      cmocka_unit_test(
          test_open_makes_a_namespace_and_a_session_that_destroy_ends),
      cmocka_unit_test(test_a_namespace_keeps_its_claims_option),
      cmocka_unit_test(
          test_declarations_that_match_are_accepted_and_conflicts_name_both),
      cmocka_unit_test(test_a_declaration_adopts_the_namespaces_live_capacity),
      cmocka_unit_test(test_a_grant_is_a_lease_with_a_growing_fence),
      cmocka_unit_test(test_specs_and_metrics_work_on_a_fleet_pool),
      cmocka_unit_test(test_a_fleet_pools_wait_buckets_count_as_in_process),
      cmocka_unit_test(
          test_a_failed_spec_on_a_fleet_pool_keeps_what_it_declared_before),
      cmocka_unit_test(test_scripts_come_back_after_script_flush),
      cmocka_unit_test(test_the_library_comes_back_after_function_flush),
      cmocka_unit_test(
          test_an_uncontended_try_and_release_make_eleven_commands),
      cmocka_unit_test(
          test_fsck_names_a_session_whose_record_and_entry_disagree),
      cmocka_unit_test(
          test_a_grant_busy_in_a_fleet_pool_is_refused_by_another_pool),
      cmocka_unit_test(
          test_a_part_release_of_a_lease_the_server_lost_leaves_the_grant_idle),
      cmocka_unit_test(test_a_user_that_may_not_load_functions_runs_scripts),
      cmocka_unit_test(test_the_librarys_constants_are_the_c_headers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
