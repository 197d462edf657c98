/*
 * One Redis server shared by several namespaces, applications or teams:
 * the operator loads the code, applications run it with the documented ACL
 * and nothing more, a pool runs no code but its own, a session's leases
 * are its own, and what the server says is checked before it is read.
 * Also what a client is told: refused credentials, an evicting server.
 */
#include "fleet_procs.h"

#include <dirent.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#ifndef CRONOQ_SOURCE_DIR
#error "CRONOQ_SOURCE_DIR: the source tree, for docs/OPERATIONS.md and the Lua"
#endif

/* Where the ACL lines a user types are written. */
#define ACL_DOC CRONOQ_SOURCE_DIR "/docs/OPERATIONS.md"

/* ------------------------------------------------------------------------ */
/* Commands as a user                                                        */
/* ------------------------------------------------------------------------ */

/* Run argv on the test server as `user` (NULL: the default user); the
 * reply (the caller frees it), or NULL. */
static redisReply *as(const char *user, const char *pass, int argc,
                      const char **argv) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectUnixWithTimeout(fleet_server.sock, tv);
  assert_non_null(c);
  assert_int_equal(c->err, 0);
  if (user != NULL) {
    redisReply *a = redisCommand(c, "AUTH %s %s", user, pass);
    assert_non_null(a);
    assert_int_not_equal(a->type, REDIS_REPLY_ERROR);
    freeReplyObject(a);
  }
  redisReply *r = redisCommandArgv(c, argc, argv, NULL);
  redisFree(c);
  return r;
}

/* Whether argv, run as `user`, is refused by the ACL. */
static bool refused(const char *user, const char *pass, int argc,
                    const char **argv) {
  redisReply *r = as(user, pass, argc, argv);
  bool no = r != NULL && r->type == REDIS_REPLY_ERROR &&
            strncmp(r->str, "NOPERM", 6) == 0;
  if (r != NULL && !no)
    printf("not refused: %s %s: %s\n", argv[0], argc > 1 ? argv[1] : "",
           r->type == REDIS_REPLY_ERROR ? r->str : "(done)");
  if (r != NULL)
    freeReplyObject(r);
  return no;
}

/* Run a command line (words separated by spaces) as the default user:
 * true when the server did not answer an error. */
static bool run_line(const char *line) {
  static char copy[2048];
  snprintf(copy, sizeof(copy), "%s", line);
  const char *argv[128];
  int argc = 0;
  for (char *w = strtok(copy, " "); w != NULL && argc < 128;
       w = strtok(NULL, " "))
    argv[argc++] = w;
  redisReply *r = as(NULL, NULL, argc, argv);
  bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
  if (r != NULL && !ok)
    printf("%s: %s\n", argv[0], r->str);
  if (r != NULL)
    freeReplyObject(r);
  return ok;
}

/* The line of the ACL doc that starts (after spaces) with `start`. */
static void doc_line(const char *start, char *buf, size_t len) {
  FILE *f = fopen(ACL_DOC, "r");
  assert_non_null(f);
  char line[2048];
  buf[0] = '\0';
  while (fgets(line, sizeof(line), f) != NULL) {
    const char *at = line + strspn(line, " ");
    if (strncmp(at, start, strlen(start)) == 0) {
      snprintf(buf, len, "%.*s", (int)strcspn(at, "\r\n"), at);
      break;
    }
  }
  fclose(f);
  if (buf[0] == '\0')
    fail_msg("%s has no line starting \"%s\"", ACL_DOC, start);
}

/* The documented operator and application users (of namespace prod), made
 * on the server with `extra` appended to the application's line ("" for
 * none), and the library loaded by the operator with cq_fleet_load(). */
static void documented_users(const char *extra) {
  fleet_server_up();
  char admin[2048], app[2048], line[2300];
  doc_line("ACL SETUSER cronoq-admin ", admin, sizeof(admin));
  doc_line("ACL SETUSER cronoq ", app, sizeof(app));
  assert_true(run_line(admin));
  snprintf(line, sizeof(line), "%s%s%s", app, extra[0] ? " " : "", extra);
  assert_true(run_line(line));
  char url[400];
  snprintf(url, sizeof(url), "unix://cronoq-admin:adminsecret@%s",
           fleet_server.sock);
  int rc = cq_fleet_load(url, NULL, 0);
  if (rc != 0)
    fail_msg("cq_fleet_load: %s: %s", cq_err_name(rc), cq_fleet_error());
}

/* A pool of namespace `ns` as the documented application user. */
static int open_as_app(const char *ns, cq_fleet_opts *o, cq_pool **out) {
  char url[400];
  snprintf(url, sizeof(url), "unix://cronoq:secret@%s", fleet_server.sock);
  o->fleet_flags |= CQ_FLEET_NEW_NAMESPACE;
  if (o->host == NULL)
    o->host = "h";
  return cq_fleet_open(out, url, ns, o);
}

static cq_pool *app_pool(const char *ns) {
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  cq_pool *p = NULL;
  int rc = open_as_app(ns, &o, &p);
  if (rc != 0)
    fail_msg("open as the documented user: %s: %s", cq_err_name(rc),
             cq_fleet_error());
  return p;
}

static void forget_users(void) {
  assert_true(run_line("ACL DELUSER cronoq cronoq-admin"));
}

/* ------------------------------------------------------------------------ */
/* The documented ACL                                                        */
/* ------------------------------------------------------------------------ */

/* A second process of namespace prod, as the documented user, started before
 * the test's own pool (a process with threads may not fork under TSan):
 * once the licence is declared and held, it waits for it, says so, and
 * says when it is granted. */
static int waiter_main(void *arg, int fd) {
  (void)arg;
  char url[400];
  snprintf(url, sizeof(url), "unix://cronoq:secret@%s", fleet_server.sock);
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.host = "w";
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE;
  cq_pool *p = NULL;
  if (cq_fleet_open(&p, url, "prod", &o) != 0) {
    fprintf(stderr, "waiter: %s\n", cq_fleet_error());
    return 2;
  }
  cq_req req;
  static cq_grant g;
  cq_resource_stats rs = {0};
  for (int i = 0; i < 3000 && (cq_resource_stats_get(p, "licence", &rs) != 0 ||
                               rs.in_use != 1);
       i++)
    cqt_sleep_ms(10);
  if (rs.in_use != 1 || cq_req_init(&req, p) != 0 ||
      cq_req_add(&req, "licence", 1) != 0)
    return 2;
  cq_grant_init(&g);
  say(fd, "waiting\n");
  int rc = cq_grant_acquire(p, &g, &req, cq_now() + 30000);
  say(fd, "granted %s\n", cq_err_name(rc));
  if (rc == 0)
    (void)cq_grant_release(p, &g);
  cq_pool_destroy(p);
  return 0;
}

int cq__fleet_fsck(cq_pool *pool, char *problems, size_t len); /* tests */
uint64_t cq__fleet_beats(cq_pool *pool);

/* docs/OPERATIONS.md's ACL lines, exactly as printed: the operator's user loads
 * the library, and the application's runs open, try, a blocking acquire,
 * a release that wakes another process, heartbeats, stats and fsck (the
 * line once lacked +time, and then +publish). */
static void test_the_documented_acl_runs_every_operation_of_a_pool(void **st) {
  (void)st;
  documented_users("");
  int fd;
  pid_t pid = spawn(waiter_main, NULL, &fd);
  cq_pool *p = app_pool("prod");
  assert_cq_ok(cq_budget_add(p, "licence", 1));
  cq_req req;
  cqt_req(&req, p, "licence:1");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &req));
  char line[128];
  read_line(fd, line, sizeof(line), 30000);
  assert_string_equal(line, "waiting");
  /* Its waiter is on the server: then the release hands it the licence. */
  for (int i = 0;
       i < 3000 && cqr_int(&fleet_server, "ZCARD", "cq:{prod}:Q", NULL) != 1;
       i++)
    cqt_sleep_ms(10);
  assert_int_equal(cqr_int(&fleet_server, "ZCARD", "cq:{prod}:Q", NULL), 1);
  assert_cq_ok(cq_grant_release(p, &g));
  read_line(fd, line, sizeof(line), 30000);
  assert_string_equal(line, "granted OK");
  assert_int_equal(reap(pid, 30000), 0);
  close(fd);
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_acquire(p, &g, &req, cq_now() + 10000));
  assert_cq_ok(cq_grant_release(p, &g));
  uint64_t beats = cq__fleet_beats(p);
  for (int i = 0; i < 6000 && cq__fleet_beats(p) == beats; i++)
    cqt_sleep_ms(5);
  assert_true(cq__fleet_beats(p) > beats);
  cq_resource_stats rs;
  assert_cq_ok(cq_resource_stats_get(p, "licence", &rs));
  assert_int_equal(rs.grants, 3);
  cq_fleet_stats fs = CQ_FLEET_STATS_INIT;
  assert_cq_ok(cq_fleet_stats_get(p, &fs));
  assert_int_equal(fs.settings_unchecked, 0); /* +info reads it */
  char problems[512];
  assert_cq_ok(cq__fleet_fsck(p, problems, sizeof(problems)));
  assert_string_equal(problems, "");
  assert_cq_ok(cq_pool_destroy(p));
  /* cronoq acl prints the rules docs/OPERATIONS.md gives. */
  char rules[1024], app[2048];
  assert_cq_ok(cq_fleet_acl("prod", rules, sizeof(rules)));
  doc_line("ACL SETUSER cronoq ", app, sizeof(app));
  assert_string_equal(app + strlen("ACL SETUSER cronoq on >secret "), rules);
  forget_users();
}

/* The Redis commands one Lua source calls (call('X', rc('X',
 * redis.pcall('X', ...): each must be one the ACL rules grant. Returns how
 * many calls it found. */
static int commands_granted(const char *path, const char *rules) {
  FILE *in = fopen(path, "r");
  assert_non_null(in);
  int seen = 0;
  char line[1024];
  while (fgets(line, sizeof(line), in) != NULL) {
    for (char *at = strstr(line, "('"); at != NULL; at = strstr(at + 2, "('")) {
      const char *w = at + 2;
      size_t n = strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
      bool is_call = (at >= line + 4 && strncmp(at - 4, "call", 4) == 0) ||
                     (at >= line + 2 && strncmp(at - 2, "rc", 2) == 0);
      if (!is_call || n == 0 || w[n] != '\'')
        continue;
      char want[40] = " +";
      for (size_t k = 0; k < n && k < 30; k++)
        want[2 + k] = (char)(w[k] - 'A' + 'a');
      want[2 + (n < 30 ? n : 30)] = '\0';
      char padded[1100];
      snprintf(padded, sizeof(padded), " %s ", rules);
      strcat(want, " ");
      if (strstr(padded, want) == NULL)
        fail_msg("%s calls %.*s, which the ACL does not grant", path, (int)n,
                 w);
      seen++;
    }
  }
  fclose(in);
  return seen;
}

/* Every command the library's code calls is one the ACL grants: the
 * rules are read from cq_fleet_acl(), the calls from every Lua source
 * (the modules of src/fleet/lua/lib/ and the operations' bodies). */
static void
test_every_command_the_library_calls_is_granted_by_its_acl(void **st) {
  (void)st;
  char rules[1024];
  assert_cq_ok(cq_fleet_acl("prod", rules, sizeof(rules)));
  static const char *const dirs[] = {"src/fleet/lua", "src/fleet/lua/lib"};
  int seen = 0, files = 0;
  for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/%s", CRONOQ_SOURCE_DIR, dirs[d]);
    DIR *list = opendir(dir);
    assert_non_null(list);
    for (struct dirent *e = readdir(list); e != NULL; e = readdir(list)) {
      size_t len = strlen(e->d_name);
      if (len < 5 || strcmp(e->d_name + len - 4, ".lua") != 0)
        continue;
      char path[800];
      snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
      seen += commands_granted(path, rules);
      files++;
    }
    closedir(list);
  }
  assert_true(files >= 17);
  assert_true(seen > 100);
}

/* The application's user may change nothing but its namespace's keys: not
 * the server's functions (once, a tenant's FUNCTION LOAD REPLACE made every
 * namespace over-admit, and its FUNCTION FLUSH deleted the other
 * applications' functions), not its configuration, not another
 * namespace. */
static void
test_an_application_user_may_not_change_the_servers_functions(void **st) {
  (void)st;
  documented_users("");
  const char *u = "cronoq", *pw = "secret";
  char name[80];
  snprintf(name, sizeof(name), "%s", cq_fleet_library());
  const char *load[] = {"FUNCTION", "LOAD", "REPLACE",
                        "#!lua name=cronoq_x\nreturn 1"};
  assert_true(refused(u, pw, 4, load));
  const char *flush[] = {"FUNCTION", "FLUSH"};
  assert_true(refused(u, pw, 2, flush));
  const char *del[] = {"FUNCTION", "DELETE", name};
  assert_true(refused(u, pw, 3, del));
  const char *restore[] = {"FUNCTION", "RESTORE", "x"};
  assert_true(refused(u, pw, 3, restore));
  const char *all[] = {"FLUSHALL"};
  assert_true(refused(u, pw, 1, all));
  const char *config[] = {"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"};
  assert_true(refused(u, pw, 4, config));
  const char *eval[] = {"EVAL", "return 1", "0"};
  assert_true(refused(u, pw, 3, eval));
  const char *other[] = {"HSET", "cq:{other}:meta", "head", "x"};
  assert_true(refused(u, pw, 4, other));
  const char *mine[] = {"HSET", "cq:{prod}:scratch", "x", "1"};
  assert_false(refused(u, pw, 4, mine));
  forget_users();
}

/* ------------------------------------------------------------------------ */
/* A pool runs no code but its own                                           */
/* ------------------------------------------------------------------------ */

/* The server's library of this version's name, with `tail` appended to
 * its code, loaded over the real one. */
static void load_other_code(const char *tail) {
  char name[80];
  snprintf(name, sizeof(name), "%s", cq_fleet_library());
  const char *list[] = {"FUNCTION", "LIST", "LIBRARYNAME", name, "WITHCODE"};
  redisReply *r = as(NULL, NULL, 5, list);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_ARRAY);
  assert_int_equal(r->elements, 1);
  const redisReply *lib = r->element[0];
  const char *code = NULL;
  for (size_t k = 0; k + 1 < lib->elements; k += 2)
    if (strcmp(lib->element[k]->str, "library_code") == 0)
      code = lib->element[k + 1]->str;
  assert_non_null(code);
  size_t len = strlen(code) + strlen(tail) + 1;
  char *other = malloc(len);
  snprintf(other, len, "%s%s", code, tail);
  freeReplyObject(r);
  const char *load[] = {"FUNCTION", "LOAD", "REPLACE", other};
  r = as(NULL, NULL, 4, load);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_STRING);
  freeReplyObject(r);
  free(other);
}

/* Code of the library's name that is not the library's own is never run:
 * a pool refuses to open on it, a pool already open stops using it at its
 * next check, and the operator's load puts the real code back. */
static void
test_code_of_the_librarys_name_that_is_not_its_own_is_refused(void **st) {
  (void)st;
  fleet_server_up();
  cq_pool *p = fleet_open_as(fleet_new_ns(), "h", NULL); /* loads it */
  assert_cq_ok(cq_budget_add(p, "db", 1));
  load_other_code("\n-- not the library's\n");
  cq_pool *q = NULL;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.host = "h";
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE;
  assert_cq_err(cq_fleet_open(&q, fleet_server.url, fleet_new_ns(), &o),
                CQ_EACCES);
  printf("replaced: %s\n", cq_fleet_error());
  assert_non_null(strstr(cq_fleet_error(), "not this library's code"));
  assert_non_null(strstr(cq_fleet_error(), "cronoq load --replace"));
  /* The operator's load without --replace leaves it, and says so. */
  assert_cq_err(cq_fleet_load(fleet_server.url, NULL, 0), CQ_EEXIST);
  assert_cq_ok(cq_fleet_load(fleet_server.url, NULL, CQ_FLEET_LOAD_REPLACE));
  assert_cq_ok(cq_fleet_open(&q, fleet_server.url, fleet_new_ns(), &o));
  assert_cq_ok(cq_pool_destroy(q));
  assert_cq_ok(cq_pool_destroy(p));
}

/* Without a library it may run, an application's user is told the
 * command the operator must run; once the operator has, it works. */
static void
test_without_its_library_a_user_is_told_what_the_operator_must_run(void **st) {
  (void)st;
  documented_users("");
  assert_true(run_line("FUNCTION FLUSH"));
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  cq_pool *p = NULL;
  assert_cq_err(open_as_app("prod", &o, &p), CQ_EACCES);
  printf("no library: %s\n", cq_fleet_error());
  assert_non_null(strstr(cq_fleet_error(), "cronoq load"));
  assert_non_null(strstr(cq_fleet_error(), "\"cronoq\""));
  char url[400];
  snprintf(url, sizeof(url), "unix://cronoq-admin:adminsecret@%s",
           fleet_server.sock);
  assert_cq_ok(cq_fleet_load(url, NULL, 0));
  o = (cq_fleet_opts)CQ_FLEET_OPTS_INIT;
  assert_cq_ok(open_as_app("prod", &o, &p));
  assert_cq_ok(cq_pool_destroy(p));
  forget_users();
}

/* ------------------------------------------------------------------------ */
/* Writes and what follows them                                              */
/* ------------------------------------------------------------------------ */

/* A callback that keeps its status in the grant's data: 1 when granted. */
static void note(cq_grant *g, int status) {
  atomic_store((_Atomic int *)g->data, status == 0 ? 1 : status);
}

/* A release that grants another session's waiter writes first, then wakes
 * it: a wake-up the ACL refuses (no PUBLISH) must not fail the release
 * after the writes (the releaser once believed it still held the unit
 * while the waiter was granted it). The waiter learns it at a heartbeat. */
static void
test_a_release_whose_wake_up_is_refused_has_still_released(void **st) {
  (void)st;
  documented_users("-publish");
  cq_pool *a = app_pool("prod");
  cq_pool *b = app_pool("prod");
  assert_cq_ok(cq_budget_add(a, "licence", 1));
  cq_req ra, rb;
  cqt_req(&ra, a, "licence:1");
  cqt_req(&rb, b, "licence:1");
  cq_grant g, w;
  cq_grant_init(&g);
  cq_grant_init(&w);
  assert_cq_ok(cq_grant_try(a, &g, &ra));
  _Atomic int granted = 0;
  w.data = (void *)&granted;
  assert_cq_ok(cq_grant_submit(b, &w, &rb, CQ_NEVER, note));
  assert_cq_ok(cq_grant_release(a, &g));
  assert_false(cq_grant_is_held(&g));
  for (int i = 0; i < 3000 && atomic_load(&granted) == 0; i++)
    cqt_sleep_ms(10);
  assert_int_equal(atomic_load(&granted), 1);
  assert_cq_ok(cq_grant_release(b, &w));
  cq_resource_stats rs;
  assert_cq_ok(cq_resource_stats_get(a, "licence", &rs));
  assert_int_equal(rs.in_use, 0);
  assert_cq_ok(cq_pool_destroy(b));
  assert_cq_ok(cq_pool_destroy(a));
  forget_users();
}

/* ------------------------------------------------------------------------ */
/* A session's leases are its own                                            */
/* ------------------------------------------------------------------------ */

/* FCALL of operation `op` as session `sid` with `secret`, then `args`:
 * the reply's status. */
static long long forged(const char *ns, const char *op, const char *sid,
                        const char *secret, int nargs, const char **args) {
  char fn[128], prefix[96];
  snprintf(fn, sizeof(fn), "%s_%s", cq_fleet_library(), op);
  snprintf(prefix, sizeof(prefix), "cq:{%s}:", ns);
  const char *argv[24] = {"FCALL", fn,  "1", prefix, sid,
                          "4096",  "0", "h", secret};
  int argc = 9;
  assert_true(argc + nargs <= 24);
  for (int i = 0; i < nargs; i++)
    argv[argc++] = args[i];
  redisReply *r = as(NULL, NULL, argc, argv);
  assert_non_null(r);
  if (r->type == REDIS_REPLY_ERROR)
    fail_msg("%s: %s", op, r->str);
  assert_int_equal(r->type, REDIS_REPLY_ARRAY);
  long long st = r->element[0]->integer;
  freeReplyObject(r);
  return st;
}

/* Another client of the namespace reads a session's id and its lease's id
 * from the keys, and calls the library's own operations with them: without
 * the session's secret, a release, a partial release, an abort, a
 * heartbeat and an end are refused, and the holder keeps its lease (once,
 * the holder believed it held for up to a heartbeat while another process
 * was granted its unit). */
static void
test_another_client_cannot_end_a_sessions_lease_with_its_ids(void **st) {
  (void)st;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *p = fleet_open_as(ns, "h", NULL);
  assert_cq_ok(cq_budget_add(p, "db", 2));
  cq_req req;
  cqt_req(&req, p, "db:2");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &req));
  char key[96], sid[64], leases[192], id[64];
  snprintf(key, sizeof(key), "cq:{%s}:S", ns);
  cqr_str(&fleet_server, sid, sizeof(sid), "EVAL",
          "return redis.call('ZRANGE', KEYS[1], 0, 0)[1]", "1", key, NULL);
  snprintf(leases, sizeof(leases), "cq:{%s}:L:%s", ns, sid);
  cqr_str(&fleet_server, id, sizeof(id), "EVAL",
          "return redis.call('HKEYS', KEYS[1])[1]", "1", leases, NULL);
  assert_true(sid[0] != '\0' && id[0] != '\0');
  const char *guess = "00000000000000000000000000000000";
  const char *rel[] = {id};
  assert_int_equal(forged(ns, "release", sid, guess, 1, rel), CQ_EACCES);
  const char *part[] = {id, "1", "u", "db", "1"};
  assert_int_equal(forged(ns, "part", sid, guess, 5, part), CQ_EACCES);
  const char *abort[] = {"-5", id};
  assert_int_equal(forged(ns, "abort", sid, guess, 2, abort), CQ_EACCES);
  const char *beat[] = {"0", "1", "1", "0"};
  assert_int_equal(forged(ns, "heartbeat", sid, guess, 4, beat), CQ_EACCES);
  const char *end[] = {sid, guess};
  assert_int_equal(forged(ns, "end", "x", guess, 2, end), CQ_EACCES);
  /* An open that would take the session's id over is refused too. */
  const char *open[] = {"2", "0", "h", "1",     "1000", "0",
                        ns,  "",  "0", "60000", "1"};
  assert_int_equal(forged(ns, "open", sid, guess, 11, open), CQ_EACCES);
  assert_true(cq_grant_is_held(&g));
  assert_int_equal(cqt_budget(p, "db").in_use, 2);
  assert_int_equal(cqr_int(&fleet_server, "HLEN", leases, NULL), 1);
  assert_cq_ok(cq_grant_release(p, &g));
  assert_int_equal(cqt_budget(p, "db").in_use, 0);
  assert_cq_ok(cq_pool_destroy(p));
}

/* ------------------------------------------------------------------------ */
/* What a client is told                                                     */
/* ------------------------------------------------------------------------ */

static int open_url(const char *url, cq_pool **p) {
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE;
  o.host = "h";
  o.timeout_ms = 2000;
  *p = NULL;
  return cq_fleet_open(p, url, fleet_new_ns(), &o);
}

/* Refused credentials are not an outage: a wrong password, a missing one
 * and a user without a password each answer CQ_EACCES at once, naming the
 * user and never the password (a missing password once read "cannot be
 * reached: SCRIPT LOAD: Connection reset by peer", and a user without a
 * password connected as the default user). */
static void
test_refused_credentials_have_their_own_code_and_name_the_user(void **st) {
  (void)st;
  fleet_server_up();
  assert_true(run_line("ACL SETUSER alice on >right ~* &* +@all"));
  char url[400];
  cq_pool *p;
  snprintf(url, sizeof(url), "unix://alice:WRONGPW@%s", fleet_server.sock);
  int64_t t0 = cq_now();
  assert_cq_err(open_url(url, &p), CQ_EACCES);
  printf("wrong password (%" PRId64 " ms): %s\n", cq_now() - t0,
         cq_fleet_error());
  assert_non_null(strstr(cq_fleet_error(), "refused user \"alice\""));
  assert_null(strstr(cq_fleet_error(), "WRONGPW"));
  /* A user and no password: that user, never the default one. */
  snprintf(url, sizeof(url), "unix://alice:@%s", fleet_server.sock);
  assert_cq_err(open_url(url, &p), CQ_EACCES);
  assert_non_null(strstr(cq_fleet_error(), "given no password"));
  snprintf(url, sizeof(url), "unix://alice:right@%s", fleet_server.sock);
  assert_cq_ok(open_url(url, &p));
  assert_cq_ok(cq_pool_destroy(p));
  /* A server that wants a password, given none. */
  assert_true(run_line("ACL SETUSER default resetpass >dpw"));
  assert_cq_err(open_url(fleet_server.url, &p), CQ_EACCES);
  printf("no password: %s\n", cq_fleet_error());
  assert_non_null(strstr(cq_fleet_error(), "wants a user and password"));
  redisReply *r = as("default", "dpw", 4,
                     (const char *[]){"ACL", "SETUSER", "default", "nopass"});
  assert_non_null(r);
  freeReplyObject(r);
  assert_true(run_line("ACL DELUSER alice"));
}

/* A server whose eviction policy could drop a namespace's keys is refused
 * at open, saying what to set (it was accepted silently). */
static void test_an_evicting_server_is_refused_at_open(void **st) {
  (void)st;
  fleet_server_up();
  assert_true(run_line("CONFIG SET maxmemory-policy allkeys-lru"));
  cq_pool *p;
  assert_cq_err(open_url(fleet_server.url, &p), CQ_EINVAL);
  printf("evicting: %s\n", cq_fleet_error());
  assert_non_null(strstr(cq_fleet_error(), "allkeys-lru"));
  assert_non_null(strstr(cq_fleet_error(), "noeviction"));
  assert_cq_err(cq_fleet_load(fleet_server.url, NULL, 0), CQ_EINVAL);
  assert_true(run_line("CONFIG SET maxmemory-policy noeviction"));
  assert_cq_ok(open_url(fleet_server.url, &p));
  assert_cq_ok(cq_pool_destroy(p));
}

static void on_warning(const cq_event *ev, void *arg) {
  if (ev->type == CQ_EVENT_WARNING && ev->resource != NULL &&
      strcmp(ev->resource, "maxmemory-policy") == 0)
    atomic_fetch_add((_Atomic int *)arg, 1);
}

/* A user that may read the eviction policy neither with CONFIG GET nor
 * with INFO opens all the same, and is told: a warning event and the
 * stats. */
static void test_a_policy_the_user_may_not_read_is_warned_of(void **st) {
  (void)st;
  documented_users("-info");
  _Atomic int warned = 0;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.on_event = on_warning;
  o.event_arg = (void *)&warned;
  cq_pool *p = NULL;
  assert_cq_ok(open_as_app("prod", &o, &p));
  cq_fleet_stats fs = CQ_FLEET_STATS_INIT;
  assert_cq_ok(cq_fleet_stats_get(p, &fs));
  assert_int_equal(fs.settings_unchecked, 1);
  assert_cq_ok(cq_budget_add(p, "licence", 1)); /* delivers the events */
  for (int i = 0; i < 3000 && atomic_load(&warned) == 0; i++)
    cqt_sleep_ms(10);
  assert_int_equal(atomic_load(&warned), 1);
  assert_cq_ok(cq_pool_destroy(p));
  forget_users();
}

/* ------------------------------------------------------------------------ */
/* What the server says is input                                             */
/* ------------------------------------------------------------------------ */

int cq__fleet_read_entry(cq_pool *pool, const cq_req *req, const char *id,
                         const char *entry);

/* An acquire's reply, granted at once, as the library reads it: every
 * truncation of a good one, and garbage, is refused without reading past
 * its end (ASan once found strcspn reading past a short entry). */
static void
test_a_malformed_grant_in_a_reply_is_refused_not_read_past_its_end(void **st) {
  (void)st;
  fleet_server_up();
  cq_pool *p = fleet_open_as(fleet_new_ns(), "h", NULL);
  assert_cq_ok(cq_budget_add(p, "db", 4));
  const char *ids[] = {"g0", "g1"};
  assert_cq_ok(cq_devices_add(p, "gpu", 2, ids));
  cq_req req;
  assert_cq_ok(cq_req_init(&req, p));
  assert_cq_ok(cq_req_add_fraction(&req, "gpu", 500));
  assert_cq_ok(cq_req_add(&req, "db", 2));
  const char *good = "g s1.7 1796308997769297 500:1 2";
  assert_int_equal(cq__fleet_read_entry(p, &req, "s1.7", good), 0);
  /* Every prefix but the whole: cut anywhere, it is not a grant. */
  char cut[64];
  size_t n = strlen(good);
  for (size_t k = 0; k < n; k++) {
    memcpy(cut, good, k);
    cut[k] = '\0';
    if (cq__fleet_read_entry(p, &req, "s1.7", cut) != -1)
      fail_msg("read as a grant: \"%s\"", cut);
  }
  static const char *const garbage[] = {
      "",
      "g",
      "g ",
      "g s1.7",
      "x s1.7 -4 late",
      "g s1.8 1 500:1 2",  /* another attempt's */
      "g s1.7 -1 500:1 2", /* a negative token */
      "g s1.7 99999999999999999999 500:1 2",
      "g s1.7 9007199254740992 500:1 2", /* 2^53: not exact in Lua */
      "g s1.7 5 500:9 2",                /* a device the pool does not have */
      "g s1.7 5 500:-1 2",
      "g s1.7 5 500: 2",
      "g s1.7 5 -500:1 2",
      "g s1.7 5 500:1 2 junk",
      "g s1.7 5 500:1,0,1,0,1,0,1 2",
      "gs1.7 5 500:1 2",
      "\xff\xfe",
  };
  for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
    if (cq__fleet_read_entry(p, &req, "s1.7", garbage[i]) != -1)
      fail_msg("read as a grant: \"%s\"", garbage[i]);
  assert_cq_ok(cq_pool_destroy(p));
}

/* Garbage written into a session's inbox, and published on its channel,
 * while an attempt waits: entries that are not well formed are dropped,
 * one that names the attempt but cannot be read fails it with CQ_ESYS, and
 * the pool goes on. */
static void
test_garbage_in_a_sessions_inbox_and_channel_is_read_safely(void **st) {
  (void)st;
  fleet_server_up();
  const char *ns = fleet_new_ns();
  cq_pool *p = fleet_open_as(ns, "h", NULL);
  assert_cq_ok(cq_budget_add(p, "db", 1));
  cq_req req;
  cqt_req(&req, p, "db:1");
  cq_grant g, w;
  cq_grant_init(&g);
  cq_grant_init(&w);
  assert_cq_ok(cq_grant_try(p, &g, &req));
  _Atomic int told = 0;
  w.data = (void *)&told;
  assert_cq_ok(cq_grant_submit(p, &w, &req, CQ_NEVER, note));
  char key[96], wid[64], sid[64], inbox[192], channel[192];
  snprintf(key, sizeof(key), "cq:{%s}:Q", ns);
  cqr_str(&fleet_server, wid, sizeof(wid), "EVAL",
          "return redis.call('ZRANGE', KEYS[1], 0, 0)[1]", "1", key, NULL);
  snprintf(sid, sizeof(sid), "%.*s", (int)strcspn(wid, "."), wid);
  snprintf(inbox, sizeof(inbox), "cq:{%s}:in:%s", ns, sid);
  snprintf(channel, sizeof(channel), "cq:{%s}:ch:%s", ns, sid);
  static const char *const junk[] = {"",    "g",   "x",           "g ",
                                     "x  ", "zzz", "g nodot 1 1", "x a.b"};
  for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
    assert_true(cqr_int(&fleet_server, "RPUSH", inbox, junk[i], NULL) > 0);
    (void)cqr_int(&fleet_server, "PUBLISH", channel, junk[i], NULL);
  }
  char bad[96];
  snprintf(bad, sizeof(bad), "g %s 12", wid); /* its id, no holdings */
  (void)cqr_int(&fleet_server, "PUBLISH", channel, bad, NULL);
  assert_true(cqr_int(&fleet_server, "RPUSH", inbox, bad, NULL) > 0);
  for (int i = 0; i < 3000 && atomic_load(&told) == 0; i++)
    cqt_sleep_ms(10);
  assert_int_equal(atomic_load(&told), CQ_ESYS);
  assert_cq_ok(cq_grant_release(p, &g));
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_acquire(p, &g, &req, cq_now() + 10000));
  assert_cq_ok(cq_grant_release(p, &g));
  assert_cq_ok(cq_pool_destroy(p));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_documented_acl_runs_every_operation_of_a_pool),
      cmocka_unit_test(
          test_every_command_the_library_calls_is_granted_by_its_acl),
      cmocka_unit_test(
          test_an_application_user_may_not_change_the_servers_functions),
      cmocka_unit_test(
          test_code_of_the_librarys_name_that_is_not_its_own_is_refused),
      cmocka_unit_test(
          test_without_its_library_a_user_is_told_what_the_operator_must_run),
      cmocka_unit_test(
          test_a_release_whose_wake_up_is_refused_has_still_released),
      cmocka_unit_test(
          test_another_client_cannot_end_a_sessions_lease_with_its_ids),
      cmocka_unit_test(
          test_refused_credentials_have_their_own_code_and_name_the_user),
      cmocka_unit_test(test_an_evicting_server_is_refused_at_open),
      cmocka_unit_test(test_a_policy_the_user_may_not_read_is_warned_of),
      cmocka_unit_test(
          test_a_malformed_grant_in_a_reply_is_refused_not_read_past_its_end),
      cmocka_unit_test(
          test_garbage_in_a_sessions_inbox_and_channel_is_read_safely),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
