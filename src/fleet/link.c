/*
 * The command connection: connecting, loading the scripts, and running one
 * script with retries.
 *
 * A call that cannot tell whether the server ran it (the connection broke,
 * the reply did not come in time) is sent again, flagged as a retry, after
 * reconnecting with a jittered exponential backoff. Every script is
 * idempotent for a retry: an acquire carries the caller's id and finds the
 * lease or waiter an earlier copy made; a release or abort of something
 * already gone reports it unknown, which the caller reads as done. So a
 * retry yields exactly one outcome. A server that answers but cannot run
 * scripts now (loading its data after a restart, busy with a long script,
 * a replica) is tried again the same way. After the pool's timeout, or
 * the call's own limit, the call fails closed with CQ_EUNAVAILABLE:
 * nothing is assumed granted. Each attempt waits for its reply at most a
 * heartbeat interval, so that a stalled server is tried again on a fresh
 * connection rather than waited for.
 *
 * While the server cannot be reached, a connection is tried at most once
 * per backoff interval, whichever thread asks: a call that would have to
 * wait for the next attempt beyond its limit fails at once.
 *
 * Scripts are run with EVALSHA and, when the server does not know them
 * (after a restart or SCRIPT FLUSH), with EVAL, which loads them again.
 */
#include "fleet.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

redisReply *fl_command(redisContext *c, int argc, const char **argv,
                       const size_t *lens) {
  /* A server that closed the connection must not kill the process with
   * SIGPIPE: blocked in this thread while writing, and a pending one is
   * taken before it is unblocked again. */
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  bool was_pending = false;
  sigset_t pending;
  if (sigpending(&pending) == 0)
    was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  redisReply *r = redisCommandArgv(c, argc, argv, lens);
  if (!was_pending && sigpending(&pending) == 0 &&
      sigismember(&pending, SIGPIPE) == 1) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return r;
}

void fl_args_init(struct fl_args *a) {
  a->n = 0;
  a->until = CQ_NEVER;
}

void fl_arg_n(struct fl_args *a, const char *s, size_t len) {
  if (a->n < FL_ARGS_MAX) {
    a->v[a->n] = s;
    a->len[a->n] = len;
    a->n++;
  }
}

void fl_arg(struct fl_args *a, const char *s) { fl_arg_n(a, s, strlen(s)); }

void fl_arg_i(struct fl_args *a, int64_t v) {
  if (a->n < FL_ARGS_MAX) {
    int n = snprintf(a->nums[a->n], sizeof(a->nums[0]), "%lld", (long long)v);
    fl_arg_n(a, a->nums[a->n], (size_t)n);
  }
}

void fl_arg_c(struct fl_args *a, char c) {
  if (a->n < FL_ARGS_MAX) {
    a->nums[a->n][0] = c;
    a->nums[a->n][1] = '\0';
    fl_arg_n(a, a->nums[a->n], 1);
  }
}

static struct timeval tv_of(int64_t ms) {
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
  return tv;
}

/* Send one command and check that it answered OK (AUTH, SELECT). */
static bool simple(redisContext *c, int argc, const char **argv, char *err,
                   size_t len) {
  redisReply *r = fl_command(c, argc, argv, NULL);
  if (r == NULL) {
    snprintf(err, len, "%s: %s", argv[0], c->errstr);
    return false;
  }
  bool ok = r->type != REDIS_REPLY_ERROR;
  if (!ok)
    snprintf(err, len, "%s: %s", argv[0], r->str);
  freeReplyObject(r);
  return ok;
}

redisContext *fl_connect(const struct fl_pool *fp, int64_t wait_ms, char *err,
                         size_t len) {
  struct timeval tv = tv_of(wait_ms > 0 ? wait_ms : 1);
  redisContext *c =
      fp->url.unix_socket
          ? redisConnectUnixWithTimeout(fp->url.path, tv)
          : redisConnectWithTimeout(fp->url.host, fp->url.port, tv);
  if (c == NULL) {
    snprintf(err, len, "cannot connect: out of memory");
    return NULL;
  }
  if (c->err != 0) {
    if (fp->url.unix_socket)
      snprintf(err, len, "cannot connect to %s: %s", fp->url.path, c->errstr);
    else
      snprintf(err, len, "cannot connect to %s:%d: %s", fp->url.host,
               fp->url.port, c->errstr);
    redisFree(c);
    return NULL;
  }
  (void)redisSetTimeout(c, tv);
  const char *user = fp->url.user[0] != '\0' ? fp->url.user : fp->opts.username;
  const char *pass =
      fp->url.password[0] != '\0' ? fp->url.password : fp->opts.password;
  if (pass != NULL && pass[0] != '\0') {
    const char *argv[3] = {"AUTH", user != NULL ? user : pass, pass};
    if (!simple(c, user != NULL && user[0] != '\0' ? 3 : 2, argv, err, len)) {
      redisFree(c);
      return NULL;
    }
  }
  if (fp->url.db != 0) {
    char db[16];
    snprintf(db, sizeof(db), "%d", fp->url.db);
    const char *argv[2] = {"SELECT", db};
    if (!simple(c, 2, argv, err, len)) {
      redisFree(c);
      return NULL;
    }
  }
  return c;
}

static char *texts[FL_S_COUNT];
static size_t text_len[FL_S_COUNT];
static pthread_once_t texts_once = PTHREAD_ONCE_INIT;

/* Scripts that free memory or keep leases alive run on a server that is
 * out of memory (maxmemory with noeviction), so that holders keep their
 * leases and units come back; the others are refused whole there. */
static bool allow_oom(int s) {
  return s != FL_S_ACQUIRE && s != FL_S_DECLARE && s != FL_S_OPEN &&
         s != FL_S_SETCAP && s != FL_S_ONLINE && s != FL_S_REMOVE;
}

static void texts_build(void) {
  static const char plain[] = "#!lua\n", oom[] = "#!lua flags=allow-oom\n";
  size_t skip = strncmp(fl_lua_prelude, plain, sizeof(plain) - 1) == 0
                    ? sizeof(plain) - 1
                    : 0;
  for (int s = 0; s < FL_S_COUNT; s++) {
    bool may_oom = allow_oom(s);
    const char *head = may_oom ? oom : plain;
    size_t hlen = may_oom ? sizeof(oom) - 1 : sizeof(plain) - 1;
    size_t n = hlen + fl_lua_prelude_len - skip + fl_lua_body_len[s];
    char *t = malloc(n + 1);
    if (t == NULL)
      continue;
    memcpy(t, head, hlen);
    memcpy(t + hlen, fl_lua_prelude + skip, fl_lua_prelude_len - skip);
    memcpy(t + hlen + fl_lua_prelude_len - skip, fl_lua_body[s],
           fl_lua_body_len[s] + 1);
    texts[s] = t;
    text_len[s] = n;
  }
}

const char *fl_script_text(enum fl_script s, size_t *len) {
  pthread_once(&texts_once, texts_build);
  *len = text_len[s];
  return texts[s];
}

/* The scripts' SHA1s: the same for every connection and pool, learnt
 * once per process from SCRIPT LOAD. A server that lost them (a restart,
 * SCRIPT FLUSH) answers NOSCRIPT, and EVAL loads them again. */
static char shas[FL_S_COUNT][41];
static bool shas_known;
static pthread_mutex_t shas_mu = PTHREAD_MUTEX_INITIALIZER;

static bool load_scripts(struct fl_pool *fp, char *err, size_t len) {
  struct fl_link *l = &fp->link;
  pthread_mutex_lock(&shas_mu);
  bool ok = true;
  for (int s = 0; s < FL_S_COUNT && !shas_known && ok; s++) {
    size_t n;
    const char *text = fl_script_text((enum fl_script)s, &n);
    if (text == NULL) {
      snprintf(err, len, "out of memory");
      ok = false;
      break;
    }
    const char *argv[3] = {"SCRIPT", "LOAD", text};
    size_t lens[3] = {6, 4, n};
    redisReply *r = fl_command(l->c, 3, argv, lens);
    if (r == NULL) {
      snprintf(err, len, "SCRIPT LOAD: %s", l->c->errstr);
      ok = false;
      break;
    }
    ok = r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok)
      memcpy(shas[s], r->str, 41);
    else
      snprintf(err, len, "SCRIPT LOAD: %s",
               r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    freeReplyObject(r);
    if (ok && s == FL_S_COUNT - 1)
      shas_known = true;
  }
  if (ok)
    memcpy(l->sha, shas, sizeof(shas));
  pthread_mutex_unlock(&shas_mu);
  l->loaded = ok;
  return ok;
}

double fl_random(void) {
  static _Thread_local unsigned seed;
  if (seed == 0)
    seed = (unsigned)cq_now() ^ (unsigned)(uintptr_t)&seed ^
           (unsigned)getpid() * 2654435761u;
  return (double)rand_r(&seed) / ((double)RAND_MAX + 1.0);
}

int64_t fl_backoff_ms(uint32_t n, int64_t cap_ms, double r) {
  int64_t base = (int64_t)10 << (n < 10 ? n : 10);
  if (base > cap_ms)
    base = cap_ms;
  return (int64_t)((double)base * (0.5 + r));
}

int fl_link_lock(struct fl_pool *fp, int64_t until) {
  if (until == CQ_NEVER) {
    pthread_mutex_lock(&fp->link.mu);
    return 0;
  }
  if (pthread_mutex_trylock(&fp->link.mu) == 0)
    return 0;
  /* The monotonic limit as a wall-clock time, which timedlock takes. */
  int64_t left = until - cq_now();
  if (left <= 0)
    return FL_ELATE;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(left / 1000);
  ts.tv_nsec += (long)(left % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return pthread_mutex_timedlock(&fp->link.mu, &ts) == 0 ? 0 : FL_ELATE;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The longest a backoff waits: a heartbeat interval, so that a server
 * that is back is found again within about one. */
static int64_t backoff_cap(const struct fl_pool *fp) {
  return fp->heartbeat_ms < 1280 ? fp->heartbeat_ms : 1280;
}

/* Make sure the link is connected, by `give_up` (link.mu held). False
 * with the reason in `err`, and *late when the next attempt the backoff
 * allows comes after `give_up`. */
static bool ensure_connected(struct fl_pool *fp, int64_t give_up, bool *late,
                             char *err, size_t len) {
  struct fl_link *l = &fp->link;
  *late = false;
  if (l->c != NULL)
    return true;
  int64_t now = cq_now();
  if (l->next_connect > now) {
    if (l->next_connect >= give_up) {
      *late = true;
      if (err[0] == '\0')
        snprintf(err, len, "not reached; next attempt in %lld ms",
                 (long long)(l->next_connect - now));
      return false;
    }
    sleep_ms(l->next_connect - now);
  }
  int64_t wait = give_up - cq_now();
  if (wait > fp->timeout_ms)
    wait = fp->timeout_ms;
  l->c = fl_connect(fp, wait, err, len);
  if (l->c != NULL && !l->loaded && !load_scripts(fp, err, len)) {
    redisFree(l->c);
    l->c = NULL;
  }
  if (l->c == NULL) {
    l->next_connect =
        cq_now() + fl_backoff_ms(l->backoff++, backoff_cap(fp), fl_random());
    return false;
  }
  if (l->down || l->backoff > 0) {
    pthread_mutex_lock(&fp->mu);
    fp->stats.reconnects++;
    pthread_mutex_unlock(&fp->mu);
  }
  return true;
}

static void drop_connection(struct fl_link *l) {
  if (l->c != NULL)
    redisFree(l->c);
  l->c = NULL;
}

/* Errors a server gives when it cannot run a script now but will later:
 * loading its data, busy with a long script, a replica (after a failover,
 * before the clients' name points at the new primary), a primary without
 * enough replicas. The call is sent again until its limit. */
static bool transient(const char *e) {
  static const char *const words[] = {"LOADING",    "BUSY",       "READONLY",
                                      "MASTERDOWN", "NOREPLICAS", "TRYAGAIN"};
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
    if (strncmp(e, words[i], strlen(words[i])) == 0 &&
        (e[strlen(words[i])] == ' ' || e[strlen(words[i])] == '\0'))
      return true;
  return false;
}

int fl_call_locked(struct fl_pool *fp, enum fl_script script, struct fl_args *a,
                   redisReply **out, char *err, size_t len) {
  struct fl_link *l = &fp->link;
  const char *argv[FL_ARGS_MAX + 8];
  size_t lens[FL_ARGS_MAX + 8];
  int n = 0;
  /* A copy: the background thread may mark the session lost meanwhile
   * (under mu alone), and a call already bound to it goes as it is. */
  char sid[sizeof(fp->sid)];
  pthread_mutex_lock(&fp->mu);
  memcpy(sid, fp->sid, sizeof(sid));
  pthread_mutex_unlock(&fp->mu);
  argv[n] = "EVALSHA", lens[n++] = 7;
  argv[n] = NULL, lens[n++] = 40; /* the SHA, set below */
  argv[n] = "1", lens[n++] = 1;
  argv[n] = fp->prefix, lens[n++] = strlen(fp->prefix);
  argv[n] = sid, lens[n++] = strlen(sid);
  argv[n] = fp->steps, lens[n++] = strlen(fp->steps);
  int retry_at = n;
  argv[n] = "0", lens[n++] = 1;
  argv[n] = fp->host, lens[n++] = strlen(fp->host);
  for (int i = 0; i < a->n; i++) {
    argv[n] = a->v[i];
    lens[n++] = a->len[i];
  }

  int64_t give_up = cq_now() + fp->timeout_ms;
  if (a->until < give_up)
    give_up = a->until;
  /* One attempt waits this long for its reply: a stalled server is tried
   * again on a new connection, as a retry. */
  int64_t per_try = fp->heartbeat_ms > 50 ? fp->heartbeat_ms : 50;
  char why[FL_MSG_MAX] = "";
  bool sent = false;
  for (int attempt = 0;; attempt++) {
    int64_t now = cq_now();
    if (attempt > 0 && now >= give_up)
      break;
    bool late;
    if (!ensure_connected(fp, give_up, &late, why, sizeof(why))) {
      if (late)
        break;
      continue;
    }
    int64_t wait = give_up - cq_now();
    if (wait > per_try)
      wait = per_try;
    (void)redisSetTimeout(l->c, tv_of(wait > 0 ? wait : 1));
    argv[retry_at] = sent ? "1" : "0";
    bool eval = false;
    redisReply *r;
    for (;;) {
      argv[0] = eval ? "EVAL" : "EVALSHA";
      lens[0] = eval ? 4 : 7;
      size_t tlen;
      const char *text = fl_script_text(script, &tlen);
      argv[1] = eval ? text : l->sha[script];
      lens[1] = eval ? tlen : 40;
      l->sent_ms = cq_now();
      sent = true;
      r = fl_command(l->c, n, argv, lens);
      if (r != NULL && r->type == REDIS_REPLY_ERROR &&
          strncmp(r->str, "NOSCRIPT", 8) == 0 && !eval) {
        freeReplyObject(r);
        eval = true;
        continue;
      }
      break;
    }
    if (r != NULL && l->drop_replies > 0) {
      /* Tests: the reply is lost as a timeout would lose it. */
      l->drop_replies--;
      freeReplyObject(r);
      r = NULL;
      snprintf(why, sizeof(why), "reply dropped (test)");
      drop_connection(l);
      continue;
    }
    if (r == NULL) {
      snprintf(why, sizeof(why), "%s", l->c->errstr);
      drop_connection(l);
      l->next_connect =
          cq_now() + fl_backoff_ms(l->backoff++, backoff_cap(fp), fl_random());
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR && transient(r->str)) {
      snprintf(why, sizeof(why), "%s", r->str);
      freeReplyObject(r);
      int64_t pause = fl_backoff_ms(l->backoff++, backoff_cap(fp), fl_random());
      if (cq_now() + pause >= give_up)
        break;
      sleep_ms(pause);
      continue;
    }
    l->down = false;
    l->backoff = 0;
    l->next_connect = 0;
    if (r->type == REDIS_REPLY_ERROR) {
      bool oom = strncmp(r->str, "OOM", 3) == 0;
      if (oom)
        snprintf(err, len,
                 "the server is out of memory (maxmemory, noeviction) and "
                 "refused the call: %s",
                 r->str);
      else
        snprintf(err, len, "the server refused a script: %s", r->str);
      freeReplyObject(r);
      return oom ? CQ_ENOMEM : CQ_ESYS;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) {
      snprintf(err, len, "the server sent an unexpected reply");
      freeReplyObject(r);
      return CQ_ESYS;
    }
    *out = r;
    return 0;
  }
  l->down = true;
  char where[FL_MSG_MAX];
  fl_url_text(fp, where, sizeof(where));
  snprintf(err, len, "the server at %s cannot be reached: %s", where, why);
  pthread_mutex_lock(&fp->mu);
  fp->stats.unavailable++;
  pthread_mutex_unlock(&fp->mu);
  return CQ_EUNAVAILABLE;
}

void fl_url_text(const struct fl_pool *fp, char *buf, size_t len) {
  if (fp->url.unix_socket)
    snprintf(buf, len, "unix://%.107s", fp->url.path);
  else
    snprintf(buf, len, "%.100s:%d", fp->url.host, fp->url.port);
}

int fl_call(struct fl_pool *fp, enum fl_script script, struct fl_args *a,
            redisReply **out, char *err, size_t len) {
  if (fl_link_lock(fp, a->until) != 0) {
    snprintf(err, len, "the connection stayed busy with another call");
    return FL_ELATE;
  }
  int rc = fl_call_locked(fp, script, a, out, err, len);
  if (rc != 0)
    pthread_mutex_unlock(&fp->link.mu);
  return rc;
}

void fl_call_done(struct fl_pool *fp, redisReply *reply) {
  if (reply != NULL)
    freeReplyObject(reply);
  pthread_mutex_unlock(&fp->link.mu);
}

int fl_reply_status(const redisReply *r) {
  return r->element[0]->type == REDIS_REPLY_INTEGER
             ? (int)r->element[0]->integer
             : CQ_ESYS;
}

bool fl_reply_owed(const redisReply *r) {
  return r->element[1]->type == REDIS_REPLY_INTEGER &&
         r->element[1]->integer != 0;
}

size_t fl_reply_nvalues(const redisReply *r) {
  return r->element[2]->type == REDIS_REPLY_INTEGER
             ? (size_t)r->element[2]->integer
             : 0;
}

const char *fl_reply_value(const redisReply *r, size_t i) {
  if (3 + i >= r->elements || i >= fl_reply_nvalues(r))
    return "";
  const redisReply *e = r->element[3 + i];
  return e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS ? e->str
                                                                        : "";
}

int64_t fl_reply_int(const redisReply *r, size_t i) {
  if (3 + i >= r->elements || i >= fl_reply_nvalues(r))
    return 0;
  const redisReply *e = r->element[3 + i];
  if (e->type == REDIS_REPLY_INTEGER)
    return e->integer;
  if (e->type == REDIS_REPLY_STRING)
    return strtoll(e->str, NULL, 10);
  return 0;
}
