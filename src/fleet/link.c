/*
 * The command connection: connecting, loading the scripts, and running one
 * script with retries.
 *
 * A call that cannot tell whether the server ran it (the connection broke,
 * the reply did not come in time) is sent again, flagged as a retry, after
 * reconnecting with a jittered exponential backoff. Every script is
 * idempotent for a retry: an acquire carries the caller's id and finds the
 * lease or waiter its first attempt made; a release or abort of something
 * already gone reports it unknown, which the caller reads as done. So a
 * retry yields exactly one outcome. After the pool's timeout the call
 * fails closed with CQ_ESYS: nothing is assumed granted.
 *
 * Scripts are run with EVALSHA and, when the server does not know them
 * (after a restart or SCRIPT FLUSH), with EVAL, which loads them again.
 */
#include "fleet.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void fl_args_init(struct fl_args *a) { a->n = 0; }

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
  redisReply *r = redisCommandArgv(c, argc, argv, NULL);
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

redisContext *fl_connect(const struct fl_pool *fp, char *err, size_t len) {
  struct timeval tv = tv_of(fp->timeout_ms);
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

static void texts_build(void) {
  for (int s = 0; s < FL_S_COUNT; s++) {
    size_t n = fl_lua_prelude_len + fl_lua_body_len[s];
    char *t = malloc(n + 1);
    if (t == NULL)
      continue;
    memcpy(t, fl_lua_prelude, fl_lua_prelude_len);
    memcpy(t + fl_lua_prelude_len, fl_lua_body[s], fl_lua_body_len[s] + 1);
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
    redisReply *r = redisCommandArgv(l->c, 3, argv, lens);
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

/* A random fraction in [0.5, 1.5), for jitter. */
static double jitter(void) {
  static _Thread_local unsigned seed;
  if (seed == 0)
    seed = (unsigned)cq_now() ^ (unsigned)(uintptr_t)&seed;
  return 0.5 + (double)rand_r(&seed) / ((double)RAND_MAX + 1.0);
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Make sure the link is connected (link.mu held). */
static bool ensure_connected(struct fl_pool *fp, char *err, size_t len) {
  struct fl_link *l = &fp->link;
  if (l->c != NULL)
    return true;
  if (l->backoff > 0) {
    int64_t base = (int64_t)10 << (l->backoff < 7 ? l->backoff : 7);
    sleep_ms((int64_t)((double)base * jitter()));
  }
  l->backoff++;
  l->c = fl_connect(fp, err, len);
  if (l->c == NULL)
    return false;
  if (!l->loaded && !load_scripts(fp, err, len)) {
    redisFree(l->c);
    l->c = NULL;
    return false;
  }
  return true;
}

static void drop_connection(struct fl_link *l) {
  if (l->c != NULL)
    redisFree(l->c);
  l->c = NULL;
}

int fl_call_locked(struct fl_pool *fp, enum fl_script script, struct fl_args *a,
                   redisReply **out, char *err, size_t len) {
  struct fl_link *l = &fp->link;
  const char *argv[FL_ARGS_MAX + 8];
  size_t lens[FL_ARGS_MAX + 8];
  int n = 0;
  argv[n] = "EVALSHA", lens[n++] = 7;
  argv[n] = NULL, lens[n++] = 40; /* the SHA, set below */
  argv[n] = "1", lens[n++] = 1;
  argv[n] = fp->prefix, lens[n++] = strlen(fp->prefix);
  argv[n] = fp->sid, lens[n++] = strlen(fp->sid);
  argv[n] = fp->steps, lens[n++] = strlen(fp->steps);
  int retry_at = n;
  argv[n] = "0", lens[n++] = 1;
  argv[n] = fp->host, lens[n++] = strlen(fp->host);
  for (int i = 0; i < a->n; i++) {
    argv[n] = a->v[i];
    lens[n++] = a->len[i];
  }

  int64_t give_up = cq_now() + fp->timeout_ms;
  char why[FL_MSG_MAX] = "";
  for (int attempt = 0;; attempt++) {
    if (attempt > 0 && cq_now() >= give_up)
      break;
    if (!ensure_connected(fp, why, sizeof(why)))
      continue;
    argv[retry_at] = attempt > 0 ? "1" : "0";
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
      r = redisCommandArgv(l->c, n, argv, lens);
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
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      snprintf(err, len, "the server refused a script: %s", r->str);
      freeReplyObject(r);
      return CQ_ESYS;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) {
      snprintf(err, len, "the server sent an unexpected reply");
      freeReplyObject(r);
      return CQ_ESYS;
    }
    l->backoff = 0;
    *out = r;
    return 0;
  }
  snprintf(err, len, "the server cannot be reached within %lld ms: %s",
           (long long)fp->timeout_ms, why);
  return CQ_ESYS;
}

int fl_call(struct fl_pool *fp, enum fl_script script, struct fl_args *a,
            redisReply **out, char *err, size_t len) {
  pthread_mutex_lock(&fp->link.mu);
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
