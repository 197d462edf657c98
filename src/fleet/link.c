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
 * The operations are a library of Redis functions (Redis 7), loaded once
 * per server and run with FCALL, so that the policy's code is set up once
 * rather than on every call. A server without functions, or a user that
 * may not load them, runs the same operations as scripts: EVALSHA, and
 * EVAL when the server does not know them (after a restart or SCRIPT
 * FLUSH), which loads them again. A server that lost the library is given
 * it again.
 */
#include "fleet.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Write one whole command. A server that closed the connection must not
 * kill the process with SIGPIPE, so commands go out with send() and
 * MSG_NOSIGNAL: hiredis, which would write(), only ever reads here. A
 * failure is left in c->err and c->errstr, as hiredis leaves its own. */
static bool send_command(redisContext *c, int argc, const char **argv,
                         const size_t *lens) {
  char *cmd;
  int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
  if (n < 0) {
    c->err = REDIS_ERR_OOM;
    snprintf(c->errstr, sizeof(c->errstr), "out of memory");
    return false;
  }
  size_t off = 0;
  while (off < (size_t)n) {
    ssize_t w = send(c->fd, cmd + off, (size_t)n - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      c->err = REDIS_ERR_IO;
      snprintf(c->errstr, sizeof(c->errstr), "%s",
               w < 0 ? strerror(errno) : "nothing written");
      break;
    }
    off += (size_t)w;
  }
  redisFreeCommand(cmd);
  return off == (size_t)n;
}

/* The next reply, or NULL (the error in c->errstr). */
static redisReply *read_reply(redisContext *c) {
  void *r = NULL;
  if (redisGetReply(c, &r) != REDIS_OK)
    return NULL;
  return r;
}

redisReply *fl_command(redisContext *c, int argc, const char **argv,
                       const size_t *lens) {
  if (!send_command(c, argc, argv, lens))
    return NULL;
  return read_reply(c);
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

/* Send one command and check that it answered OK (AUTH, SELECT, PING):
 * 0, CQ_EUNAVAILABLE (no answer) or CQ_EACCES (an error: for these
 * commands, a refusal of this user), with the reason in `err`. */
static int simple(redisContext *c, int argc, const char **argv, char *err,
                  size_t len) {
  redisReply *r = fl_command(c, argc, argv, NULL);
  if (r == NULL) {
    snprintf(err, len, "%s: %s", argv[0], c->errstr);
    return CQ_EUNAVAILABLE;
  }
  int rc = 0;
  if (r->type == REDIS_REPLY_ERROR) {
    snprintf(err, len, "%s", r->str);
    rc = CQ_EACCES;
  }
  freeReplyObject(r);
  return rc;
}

/* Log in as the URL's (or the options') user: with a user and no
 * password, AUTH is still sent (with an empty one), so that a URL meant
 * for a user never ends up connected as the default one; with neither, a
 * PING finds out whether the server wants a password before anything
 * larger is sent (a server closes the connection of a client that sends
 * a long command unauthenticated). */
static int log_in(const struct fl_pool *fp, redisContext *c, char *err,
                  size_t len) {
  const char *user = fp->url.user[0] != '\0' ? fp->url.user : fp->opts.username;
  const char *pass =
      fp->url.password[0] != '\0' ? fp->url.password : fp->opts.password;
  bool named = user != NULL && user[0] != '\0';
  char why[FL_MSG_MAX];
  int rc;
  if (named || (pass != NULL && pass[0] != '\0')) {
    const char *argv[3] = {"AUTH", named ? user : pass,
                           pass != NULL ? pass : ""};
    rc = simple(c, named ? 3 : 2, argv, why, sizeof(why));
    if (rc == CQ_EACCES)
      snprintf(err, len,
               "the server refused user \"%.64s\"%s (%s): check the user "
               "and password in the URL (redis://user:password@host) or in "
               "cq_fleet_opts",
               named ? user : "default",
               pass != NULL && pass[0] != '\0' ? "" : ", given no password",
               why);
  } else {
    const char *argv[1] = {"PING"};
    rc = simple(c, 1, argv, why, sizeof(why));
    if (rc == CQ_EACCES)
      snprintf(err, len,
               "the server wants a user and password (%s): give them in "
               "the URL (redis://user:password@host) or in cq_fleet_opts",
               why);
  }
  if (rc == CQ_EUNAVAILABLE)
    snprintf(err, len, "%s", why);
  return rc;
}

redisContext *fl_connect(const struct fl_pool *fp, int64_t wait_ms, int *code,
                         char *err, size_t len) {
  *code = CQ_EUNAVAILABLE;
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
  int rc = log_in(fp, c, err, len);
  if (rc == 0 && fp->url.db != 0) {
    char db[16], why[FL_MSG_MAX];
    snprintf(db, sizeof(db), "%d", fp->url.db);
    const char *argv[2] = {"SELECT", db};
    rc = simple(c, 2, argv, why, sizeof(why));
    snprintf(err, len, "SELECT %s: %s", db, why);
  }
  if (rc != 0) {
    *code = rc;
    redisFree(c);
    return NULL;
  }
  return c;
}

static char *texts[FL_S_COUNT];
static size_t text_len[FL_S_COUNT];
static char *library;
static size_t library_len;
static char fnames[FL_S_COUNT][64];
static pthread_once_t texts_once = PTHREAD_ONCE_INIT;

/* Scripts that free memory or keep leases alive run on a server that is
 * out of memory (maxmemory with noeviction), so that holders keep their
 * leases and units come back; the others are refused whole there. */
static bool allow_oom(int s) {
  return s != FL_S_ACQUIRE && s != FL_S_DECLARE && s != FL_S_OPEN &&
         s != FL_S_SETCAP && s != FL_S_ONLINE && s != FL_S_REMOVE;
}

/* A growing text; `ok` turns false once an allocation failed. */
struct text {
  char *s;
  size_t n, cap;
  bool ok;
};

static void put(struct text *t, const char *s, size_t n) {
  if (!t->ok)
    return;
  if (t->n + n + 1 > t->cap) {
    size_t cap = (t->n + n + 1) * 2;
    char *grown = realloc(t->s, cap);
    if (grown == NULL) {
      t->ok = false;
      return;
    }
    t->s = grown;
    t->cap = cap;
  }
  memcpy(t->s + t->n, s, n);
  t->n += n;
  t->s[t->n] = '\0';
}

static void puts_(struct text *t, const char *s) { put(t, s, strlen(s)); }

/* Its text, or NULL (freed) when an allocation failed. */
static char *text_end(struct text *t, size_t *len) {
  if (!t->ok) {
    free(t->s);
    return NULL;
  }
  *len = t->n;
  return t->s;
}

/* Each script is the prelude (without its "#!lua" line), a call of its
 * begin(), then the operation's body; the library is the prelude once,
 * then each body as a function that calls begin() first. */
static void texts_build(void) {
  static const char plain[] = "#!lua\n", oom[] = "#!lua flags=allow-oom\n";
  static const char begin[] = "\nbegin(KEYS, ARGV)\n";
  size_t skip = strncmp(fl_lua_prelude, plain, sizeof(plain) - 1) == 0
                    ? sizeof(plain) - 1
                    : 0;
  const char *prelude = fl_lua_prelude + skip;
  size_t prelude_len = fl_lua_prelude_len - skip;
  struct text lib = {.ok = true};
  puts_(&lib, "#!lua name=cronoq_");
  puts_(&lib, fl_lua_version);
  puts_(&lib, "\n");
  put(&lib, prelude, prelude_len);
  for (int s = 0; s < FL_S_COUNT; s++) {
    snprintf(fnames[s], sizeof(fnames[s]), "cronoq_%s_%s", fl_lua_version,
             fl_lua_name[s]);
    struct text t = {.ok = true};
    puts_(&t, allow_oom(s) ? oom : plain);
    put(&t, prelude, prelude_len);
    put(&t, begin, sizeof(begin) - 1);
    put(&t, fl_lua_body[s], fl_lua_body_len[s]);
    texts[s] = text_end(&t, &text_len[s]);

    puts_(&lib, "\nredis.register_function{function_name = '");
    puts_(&lib, fnames[s]);
    puts_(&lib, "', flags = {");
    puts_(&lib, allow_oom(s) ? "'allow-oom'" : "");
    puts_(&lib, "}, callback = function(KEYS, ARGV)");
    put(&lib, begin, sizeof(begin) - 1);
    put(&lib, fl_lua_body[s], fl_lua_body_len[s]);
    puts_(&lib, "\nend}\n");
  }
  library = text_end(&lib, &library_len);
}

const char *fl_script_text(enum fl_script s, size_t *len) {
  pthread_once(&texts_once, texts_build);
  *len = text_len[s];
  return texts[s];
}

const char *fl_library_text(size_t *len) {
  pthread_once(&texts_once, texts_build);
  *len = library_len;
  return library;
}

/* The name of the library on the server, "cronoq_<version>". */
static void library_name(char *buf, size_t len) {
  snprintf(buf, len, "cronoq_%s", fl_lua_version);
}

/* The user a pool connects as, for messages. */
static const char *user_of(const struct fl_pool *fp) {
  if (fp->url.user[0] != '\0')
    return fp->url.user;
  if (fp->opts.username != NULL && fp->opts.username[0] != '\0')
    return fp->opts.username;
  return "default";
}

/* What the server holds under the library's name. Another client may have
 * loaded code of the same name (FUNCTION LOAD REPLACE): the name says
 * which version a library claims to be, its code what it does, so the
 * code is compared, byte for byte, with this library's own. */
static enum fl_lib library_state(struct fl_link *l) {
  size_t n;
  const char *text = fl_library_text(&n);
  if (text == NULL)
    return FL_LIB_UNKNOWN;
  char name[64];
  library_name(name, sizeof(name));
  const char *argv[5] = {"FUNCTION", "LIST", "LIBRARYNAME", name, "WITHCODE"};
  redisReply *r = fl_command(l->c, 5, argv, NULL);
  if (r == NULL)
    return FL_LIB_UNKNOWN;
  enum fl_lib st = r->type == REDIS_REPLY_ARRAY ? FL_LIB_NONE : FL_LIB_UNKNOWN;
  for (size_t i = 0; st == FL_LIB_NONE && i < r->elements; i++) {
    const redisReply *lib = r->element[i];
    if (lib->type != REDIS_REPLY_ARRAY)
      continue;
    bool named = false;
    const redisReply *code = NULL;
    for (size_t k = 0; k + 1 < lib->elements; k += 2) {
      const redisReply *key = lib->element[k], *v = lib->element[k + 1];
      if (key->type != REDIS_REPLY_STRING && key->type != REDIS_REPLY_STATUS)
        continue;
      if (strcmp(key->str, "library_name") == 0)
        named = v->type == REDIS_REPLY_STRING && strcmp(v->str, name) == 0;
      else if (strcmp(key->str, "library_code") == 0)
        code = v;
    }
    if (named)
      st = code != NULL && code->type == REDIS_REPLY_STRING && code->len == n &&
                   memcmp(code->str, text, n) == 0
               ? FL_LIB_MINE
               : FL_LIB_OTHER;
  }
  freeReplyObject(r);
  return st;
}

enum fl_lib fl_library_load(struct fl_link *l, bool replace, char *why,
                            size_t why_len) {
  enum fl_lib st = library_state(l);
  if (st != FL_LIB_NONE && !(st == FL_LIB_OTHER && replace))
    return st;
  size_t n;
  const char *text = fl_library_text(&n);
  if (text == NULL)
    return FL_LIB_UNKNOWN;
  const char *argv[4] = {"FUNCTION", "LOAD", "REPLACE", text};
  size_t lens[4] = {8, 4, 7, n};
  if (!replace) {
    argv[2] = text;
    lens[2] = n;
  }
  redisReply *r = fl_command(l->c, replace ? 4 : 3, argv, lens);
  if (r == NULL)
    return FL_LIB_UNKNOWN;
  if (r->type == REDIS_REPLY_STRING)
    st = FL_LIB_MINE;
  else if (r->type == REDIS_REPLY_ERROR && strstr(r->str, "already exists"))
    st = library_state(l); /* loaded meanwhile, by whom? */
  else
    st = FL_LIB_NONE; /* not allowed to load it (NOPERM), or no functions */
  if (st == FL_LIB_NONE && why != NULL && r->type == REDIS_REPLY_ERROR)
    snprintf(why, why_len, "%s", r->str);
  freeReplyObject(r);
  return st;
}

static void drop_connection(struct fl_link *l);

void fl_library_recheck(struct fl_pool *fp) {
  struct fl_link *l = &fp->link;
  if (l->c == NULL || !l->functions || l->pending)
    return;
  if (library_state(l) == FL_LIB_OTHER) {
    drop_connection(l);
    l->loaded = false;
  }
}

void fl_library_foreign(const struct fl_pool *fp, char *err, size_t len) {
  (void)fp;
  char name[64];
  library_name(name, sizeof(name));
  snprintf(err, len,
           "the server's %s is not this library's code: an operator must "
           "load it again (cronoq load --replace URL)",
           name);
}

/* Nothing this user may run: no library it may use, no scripts. */
static void library_missing(const struct fl_pool *fp, char *err, size_t len) {
  char name[64];
  library_name(name, sizeof(name));
  snprintf(err, len,
           "the server lacks %s, and user \"%.32s\" may neither load it "
           "nor run scripts: an operator must run cronoq load URL",
           name, user_of(fp));
}

/* The scripts' SHA1s: the same for every connection and pool, learnt
 * once per process from SCRIPT LOAD. A server that lost them (a restart,
 * SCRIPT FLUSH) answers NOSCRIPT, and EVAL loads them again. */
static char shas[FL_S_COUNT][41];
static bool shas_known;
static pthread_mutex_t shas_mu = PTHREAD_MUTEX_INITIALIZER;

_Atomic bool cq__fleet_no_functions;

/* Make the operations runnable on a new connection: the library of
 * functions (verified to be this library's code), else the scripts (a
 * server without functions, or a user that may not load or see the
 * library: scripts are known by their SHA1, so their code is always this
 * library's). False with the reason in `err` and `*code`: CQ_EACCES when
 * it can never work as the server and its ACL are (code that is not ours,
 * a user that may run nothing), else CQ_EUNAVAILABLE. */
static bool load_scripts(struct fl_pool *fp, int *code, char *err, size_t len) {
  struct fl_link *l = &fp->link;
  *code = CQ_EUNAVAILABLE;
  enum fl_lib st = atomic_load(&cq__fleet_no_functions)
                       ? FL_LIB_UNKNOWN
                       : fl_library_load(l, false, NULL, 0);
  if (l->c->err != 0) {
    snprintf(err, len, "FUNCTION LOAD: %s", l->c->errstr);
    return false;
  }
  if (st == FL_LIB_OTHER) {
    *code = CQ_EACCES;
    fl_library_foreign(fp, err, len);
    return false;
  }
  l->functions = st == FL_LIB_MINE;
  if (l->functions) {
    l->loaded = true;
    return true;
  }
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
    if (ok) {
      memcpy(shas[s], r->str, 41);
    } else if (r->type == REDIS_REPLY_ERROR) {
      *code = CQ_EACCES;
      library_missing(fp, err, len);
    } else {
      snprintf(err, len, "SCRIPT LOAD: unexpected reply");
    }
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

/* Make sure the link is connected, by `give_up` (link.mu held). Returns
 * 0; CQ_EUNAVAILABLE (not now, with the reason in `err`); FL_ELATE (the
 * next attempt the backoff allows comes after `give_up`); or CQ_EACCES
 * (the server refuses this user, or holds code that is not this
 * library's: trying again will not help). */
static int ensure_connected(struct fl_pool *fp, int64_t give_up, char *err,
                            size_t len) {
  struct fl_link *l = &fp->link;
  if (l->c != NULL)
    return 0;
  int64_t now = cq_now();
  if (l->next_connect > now) {
    if (l->next_connect >= give_up) {
      if (err[0] == '\0')
        snprintf(err, len, "not reached; next attempt in %lld ms",
                 (long long)(l->next_connect - now));
      return FL_ELATE;
    }
    sleep_ms(l->next_connect - now);
  }
  int64_t wait = give_up - cq_now();
  if (wait > fp->timeout_ms)
    wait = fp->timeout_ms;
  int code;
  l->c = fl_connect(fp, wait, &code, err, len);
  l->timeout_ms = -1; /* fl_connect's, which the first call replaces */
  if (l->c != NULL && !l->loaded && !load_scripts(fp, &code, err, len)) {
    redisFree(l->c);
    l->c = NULL;
  }
  if (l->c == NULL) {
    l->next_connect =
        cq_now() + fl_backoff_ms(l->backoff++, backoff_cap(fp), fl_random());
    return code;
  }
  if (l->down || l->backoff > 0) {
    pthread_mutex_lock(&fp->mu);
    fp->stats.reconnects++;
    pthread_mutex_unlock(&fp->mu);
  }
  return 0;
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

/* A command's words at most: the head (FCALL and the function, or EVALSHA
 * and the script), the key count, the key, the five common arguments, then
 * the call's own. */
#define FL_WORDS_MAX (9 + FL_ARGS_MAX)

/* The session a command is sent for, copied: the background thread may
 * mark the session lost meanwhile (under mu alone), and a call already
 * bound to it goes as it is. */
struct caller {
  char sid[sizeof(((struct fl_pool *)0)->sid)];
  char secret[sizeof(((struct fl_pool *)0)->secret)];
};

/* The command's words, from argv[2] on: the key, the common arguments
 * (the session, copied into `who`, the work share, the retry flag, the
 * host, the session's secret), then the call's own. Returns how many, and
 * where the retry flag is. */
static int words(struct fl_pool *fp, const struct fl_args *a, const char **argv,
                 size_t *lens, struct caller *who, int *retry_at) {
  int n = 2; /* argv[0] and argv[1] are set by send_script() */
  pthread_mutex_lock(&fp->mu);
  memcpy(who->sid, fp->sid, sizeof(who->sid));
  memcpy(who->secret, fp->secret, sizeof(who->secret));
  pthread_mutex_unlock(&fp->mu);
  argv[n] = "1", lens[n++] = 1;
  argv[n] = fp->prefix, lens[n++] = strlen(fp->prefix);
  argv[n] = who->sid, lens[n++] = strlen(who->sid);
  argv[n] = fp->steps, lens[n++] = strlen(fp->steps);
  *retry_at = n;
  argv[n] = "0", lens[n++] = 1;
  argv[n] = fp->host, lens[n++] = strlen(fp->host);
  argv[n] = who->secret, lens[n++] = strlen(who->secret);
  for (int i = 0; i < a->n; i++) {
    argv[n] = a->v[i];
    lens[n++] = a->len[i];
  }
  return n;
}

/* The reply to a release that fl_release_send() left pending, read after
 * the next command went out (NULL: lost with the connection). A release
 * that did not run, or may not have, goes to the deferred releases, which
 * the background thread sends again (a retry: applied once); outcomes or
 * owed work that it brought are fetched by the background thread from the
 * inbox, where they are too. */
static void pending_done(struct fl_pool *fp, redisReply *r) {
  struct fl_link *l = &fp->link;
  l->pending = false;
  int st = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 3
               ? fl_reply_status(r)
               : CQ_ESYS;
  bool ran = st == FL_R_OK || st == FL_R_UNKNOWN;
  bool clean =
      ran && !fl_reply_owed(r) && r->elements == 3 + fl_reply_nvalues(r);
  if (r != NULL)
    freeReplyObject(r);
  if (clean)
    return;
  pthread_mutex_lock(&fp->mu);
  if (!ran)
    (void)fl_defer_release_id(fp, l->pending_id, l->pending_gen);
  fp->fetch_due = true;
  pthread_mutex_unlock(&fp->mu);
  fl_bg_kick(fp);
}

static redisReply *send_script(struct fl_pool *fp, enum fl_script script, int n,
                               const char **argv, size_t *lens);

/* Whether a reply says that the server does not have the code to run: it
 * ran nothing. */
static bool not_loaded(const redisReply *r) {
  return r != NULL && r->type == REDIS_REPLY_ERROR &&
         (strncmp(r->str, "NOSCRIPT", 8) == 0 ||
          strncmp(r->str, "ERR Function not found", 22) == 0);
}

/* A release's command: its words and what they point into. */
struct release_cmd {
  struct fl_args a;
  char id[40];
  struct caller who;
  const char *argv[FL_WORDS_MAX];
  size_t lens[FL_WORDS_MAX];
  int n;
};

static void release_cmd(struct fl_pool *fp, struct release_cmd *rc,
                        const char *id) {
  fl_args_init(&rc->a);
  snprintf(rc->id, sizeof(rc->id), "%s", id);
  fl_arg(&rc->a, rc->id);
  int retry_at;
  rc->n = words(fp, &rc->a, rc->argv, rc->lens, &rc->who, &retry_at);
}

/* The pending release once more, as a call: its first copy found the
 * server without the library or the scripts (flushed, or restarted). */
static void release_again(struct fl_pool *fp) {
  struct release_cmd rc;
  release_cmd(fp, &rc, fp->link.pending_id);
  /* The send time stays the call's: a heartbeat's sets the deadline. */
  int64_t sent = fp->link.sent_ms;
  pending_done(fp, send_script(fp, FL_S_RELEASE, rc.n, rc.argv, rc.lens));
  fp->link.sent_ms = sent;
}

/* One command and its reply; a pending release's reply is read in
 * between, once the command went out, so that the two overlap. A release
 * that found its code missing is sent again before the command's reply is
 * given back: that command found it missing too, and is sent again after
 * it. */
static redisReply *exchange(struct fl_pool *fp, int n, const char **argv,
                            const size_t *lens) {
  struct fl_link *l = &fp->link;
  if (!l->pending)
    return fl_command(l->c, n, argv, lens);
  redisReply *r = NULL;
  bool again = false;
  if (send_command(l->c, n, argv, lens)) {
    redisReply *early = read_reply(l->c);
    again = early != NULL && not_loaded(early);
    if (again) {
      freeReplyObject(early);
      l->pending = false;
    } else {
      pending_done(fp, early);
    }
    if (early != NULL)
      r = read_reply(l->c);
  } else {
    pending_done(fp, NULL);
  }
  if (again && r != NULL)
    release_again(fp);
  else if (again)
    pending_done(fp, NULL);
  return r;
}

/* The command's first two words: the function (FCALL), the script whole
 * (EVAL, with `eval`) or the script's SHA (EVALSHA). */
static void script_head(const struct fl_link *l, enum fl_script script,
                        bool eval, const char **argv, size_t *lens) {
  if (l->functions && !eval) {
    argv[0] = "FCALL", lens[0] = 5;
    argv[1] = fnames[script], lens[1] = strlen(fnames[script]);
  } else if (eval) {
    argv[0] = "EVAL", lens[0] = 4;
    argv[1] = fl_script_text(script, &lens[1]);
  } else {
    argv[0] = "EVALSHA", lens[0] = 7;
    argv[1] = l->sha[script], lens[1] = 40;
  }
}

/* Run a script once: its function with FCALL, or the script with
 * EVALSHA. A server that lost them (a restart without its data, FUNCTION
 * FLUSH, SCRIPT FLUSH) says so before running anything: the library is
 * loaded again, or the script sent whole with EVAL, and the call sent once
 * more. argv[0] and argv[1] are set here. */
static redisReply *send_script(struct fl_pool *fp, enum fl_script script, int n,
                               const char **argv, size_t *lens) {
  struct fl_link *l = &fp->link;
  bool eval = false, reloaded = false;
  for (;;) {
    script_head(l, script, eval, argv, lens);
    l->sent_ms = cq_now();
    redisReply *r = exchange(fp, n, argv, lens);
    if (r == NULL || r->type != REDIS_REPLY_ERROR || eval)
      return r;
    if (l->functions && strncmp(r->str, "ERR Function not found", 22) == 0) {
      freeReplyObject(r);
      /* Loaded again; if the server will not, the script goes whole. Code
       * of the library's name that is not its own is never run. */
      enum fl_lib st =
          reloaded ? FL_LIB_NONE : fl_library_load(l, false, NULL, 0);
      if (st == FL_LIB_OTHER) {
        l->refused = true;
        fl_library_foreign(fp, l->refusal, sizeof(l->refusal));
        return NULL;
      }
      eval = st != FL_LIB_MINE;
      reloaded = true;
      if (l->c->err != 0)
        return NULL;
      continue;
    }
    if (l->functions && strncmp(r->str, "ERR unknown command", 19) == 0) {
      /* Another server now (a failover), one without functions. */
      freeReplyObject(r);
      l->functions = false;
      eval = true;
      continue;
    }
    if (!l->functions && strncmp(r->str, "NOSCRIPT", 8) == 0) {
      freeReplyObject(r);
      eval = true;
      continue;
    }
    return r;
  }
}

bool fl_release_send(struct fl_pool *fp, const char *id, uint32_t gen) {
  struct fl_link *l = &fp->link;
  if (l->c == NULL || l->pending || l->drop_replies > 0)
    return false;
  struct release_cmd rc;
  release_cmd(fp, &rc, id);
  script_head(l, FL_S_RELEASE, false, rc.argv, rc.lens);
  if (!send_command(l->c, rc.n, rc.argv, rc.lens)) {
    /* Perhaps written in part: the caller sends it again, in full, on a
     * new connection (a release is idempotent). */
    drop_connection(l);
    return false;
  }
  l->pending = true;
  snprintf(l->pending_id, sizeof(l->pending_id), "%s", id);
  l->pending_gen = gen;
  return true;
}

/* A script's error reply as a code and a message: the server's memory
 * (CQ_ENOMEM: refused whole, before it ran), a command the ACL refuses
 * this user (CQ_EACCES: the ACL lacks something the library needs, or,
 * for EVAL, the library is missing and this user may not run scripts),
 * else CQ_ESYS (a bug). */
static int script_error(const struct fl_pool *fp, const char *e, char *err,
                        size_t len) {
  if (strncmp(e, "OOM", 3) == 0) {
    snprintf(err, len,
             "the server is out of memory (maxmemory, noeviction) and "
             "refused the call: %s",
             e);
    return CQ_ENOMEM;
  }
  /* A command the ACL refuses: NOPERM from the server, or its words for a
   * command refused inside a script or a function. */
  if (strstr(e, "NOPERM") != NULL ||
      strstr(e, "can't run this command") != NULL) {
    if (!fp->link.functions)
      library_missing(fp, err, len);
    else
      snprintf(err, len,
               "the server refused user \"%.64s\" a command the library "
               "needs (%.60s): its ACL is in docs/FLEET.md, \"The ACL\"",
               user_of(fp), e);
    return CQ_EACCES;
  }
  snprintf(err, len, "the server refused a script: %s", e);
  return CQ_ESYS;
}

int fl_call_locked(struct fl_pool *fp, enum fl_script script, struct fl_args *a,
                   redisReply **out, char *err, size_t len) {
  struct fl_link *l = &fp->link;
  const char *argv[FL_WORDS_MAX];
  size_t lens[FL_WORDS_MAX];
  struct caller who;
  int retry_at;
  int n = words(fp, a, argv, lens, &who, &retry_at);

  int64_t give_up = cq_now() + fp->timeout_ms;
  if (a->until < give_up)
    give_up = a->until;
  /* One attempt waits this long for its reply: a stalled server is tried
   * again on a new connection, as a retry. */
  int64_t per_try = fp->heartbeat_ms > 50 ? fp->heartbeat_ms : 50;
  char why[FL_ERR_MAX] = "";
  bool sent = false;
  for (int attempt = 0;; attempt++) {
    int64_t now = cq_now();
    if (attempt > 0 && now >= give_up)
      break;
    int rc = ensure_connected(fp, give_up, why, sizeof(why));
    if (rc == CQ_EACCES) {
      snprintf(err, len, "%s", why);
      return CQ_EACCES;
    }
    if (rc == FL_ELATE)
      break;
    if (rc != 0)
      continue;
    int64_t wait = give_up - cq_now();
    if (wait > per_try)
      wait = per_try;
    if (wait < 1)
      wait = 1;
    if (wait != l->timeout_ms) {
      (void)redisSetTimeout(l->c, tv_of(wait));
      l->timeout_ms = wait;
    }
    argv[retry_at] = sent ? "1" : "0";
    redisReply *r = send_script(fp, script, n, argv, lens);
    sent = true;
    if (l->refused) {
      l->refused = false;
      snprintf(err, len, "%s", l->refusal);
      if (r != NULL)
        freeReplyObject(r);
      drop_connection(l);
      l->loaded = false;
      return CQ_EACCES;
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
      int rc = script_error(fp, r->str, err, len);
      freeReplyObject(r);
      return rc;
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

/* Server settings a pool depends on, read where the ACL lets this user:
 * CONFIG GET, else INFO (a user may have one and not the other). 1 with
 * the value, 0 when it cannot be read. */
static int read_setting(redisContext *c, const char *config,
                        const char *info_section, const char *info_field,
                        char *value, size_t len) {
  const char *argv[3] = {"CONFIG", "GET", config};
  redisReply *r = fl_command(c, 3, argv, NULL);
  int found = 0;
  if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
      r->element[1]->type == REDIS_REPLY_STRING) {
    snprintf(value, len, "%s", r->element[1]->str);
    found = 1;
  }
  if (r != NULL)
    freeReplyObject(r);
  if (found || c->err != 0)
    return found;
  const char *iargv[2] = {"INFO", info_section};
  r = fl_command(c, 2, iargv, NULL);
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    char key[64];
    snprintf(key, sizeof(key), "\n%s:", info_field);
    const char *at = strstr(r->str, key);
    if (at != NULL) {
      at += strlen(key);
      snprintf(value, len, "%.*s", (int)strcspn(at, "\r\n"), at);
      found = 1;
    }
  }
  if (r != NULL)
    freeReplyObject(r);
  return found;
}

int fl_server_check(struct fl_pool *fp, bool *unchecked, char *err,
                    size_t len) {
  *unchecked = false;
  char why[FL_ERR_MAX] = "";
  int rc = ensure_connected(fp, cq_now() + fp->timeout_ms, why, sizeof(why));
  if (rc != 0) {
    char where[FL_MSG_MAX];
    fl_url_text(fp, where, sizeof(where));
    if (rc == CQ_EACCES)
      snprintf(err, len, "%s", why);
    else
      snprintf(err, len, "the server at %s cannot be reached: %s", where, why);
    return rc == FL_ELATE ? CQ_EUNAVAILABLE : rc;
  }
  rc = fl_settings_check(fp->link.c, unchecked, err, len);
  if (rc == CQ_EUNAVAILABLE)
    drop_connection(&fp->link);
  return rc;
}

int fl_settings_check(redisContext *c, bool *unchecked, char *err, size_t len) {
  *unchecked = false;
  char policy[64];
  if (!read_setting(c, "maxmemory-policy", "memory", "maxmemory_policy", policy,
                    sizeof(policy))) {
    if (c->err != 0) {
      snprintf(err, len, "the server stopped answering: %s", c->errstr);
      return CQ_EUNAVAILABLE;
    }
    *unchecked = true;
    return 0;
  }
  if (strcmp(policy, "noeviction") != 0) {
    snprintf(err, len,
             "the server's maxmemory-policy is %.32s, which may evict the "
             "namespace's keys and lose leases: a fleet pool needs "
             "noeviction (CONFIG SET maxmemory-policy noeviction, and the "
             "same in its configuration file)",
             policy);
    return CQ_EINVAL;
  }
  return 0;
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
