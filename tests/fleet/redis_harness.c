/*
 * See redis_harness.h. The server is started with --save '' --appendonly
 * no (nothing on disk), --port 0 (no TCP listener) and a Unix socket in a
 * directory of its own under $TMPDIR.
 */
#include "redis_harness.h"

#include <errno.h>
#include <ftw.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SERVERS 8
static struct cqr_server *started[MAX_SERVERS];
static int n_started;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void stop_all(void) {
  for (int i = 0; i < n_started; i++)
    cqr_stop(started[i]);
}

int cqr_available(void) {
  const char *path = getenv("PATH");
  if (path == NULL)
    return 0;
  char buf[4096];
  snprintf(buf, sizeof(buf), "%s", path);
  for (char *dir = strtok(buf, ":"); dir != NULL; dir = strtok(NULL, ":")) {
    char exe[4200];
    snprintf(exe, sizeof(exe), "%s/redis-server", dir);
    if (access(exe, X_OK) == 0)
      return 1;
  }
  return 0;
}

static int pings(const char *sock) {
  struct timeval tv = {1, 0};
  redisContext *c = redisConnectUnixWithTimeout(sock, tv);
  if (c == NULL)
    return 0;
  int ok = 0;
  if (c->err == 0) {
    redisReply *r = redisCommand(c, "PING");
    ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL)
      freeReplyObject(r);
  }
  redisFree(c);
  return ok;
}

void cqr_start(struct cqr_server *s, const char *const *extra) {
  memset(s, 0, sizeof(*s));
  if (!cqr_available()) {
    const char *req = getenv("CRONOQ_REQUIRE_REDIS");
    bool required = req != NULL && req[0] != '\0' && req[0] != '0';
    printf("%s: redis-server is not installed (apt-get install "
           "redis-server); the fleet tests need it\n",
           required ? "FAIL" : "SKIP");
    fflush(stdout);
    exit(required ? 1 : CQR_SKIP);
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(s->dir, sizeof(s->dir), "%s/cronoq-redis-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(s->dir) == NULL) {
    fprintf(stderr, "cannot make a directory for redis-server: %s\n",
            strerror(errno));
    exit(1);
  }
  snprintf(s->sock, sizeof(s->sock), "%s/redis.sock", s->dir);
  snprintf(s->url, sizeof(s->url), "unix://%s", s->sock);
  cqr_launch(s, extra);
}

void cqr_launch(struct cqr_server *s, const char *const *extra) {
  const char *argv[64];
  int n = 0;
  argv[n++] = "redis-server";
  argv[n++] = "--unixsocket";
  argv[n++] = s->sock;
  argv[n++] = "--port";
  argv[n++] = "0";
  argv[n++] = "--save";
  argv[n++] = "";
  argv[n++] = "--appendonly";
  argv[n++] = "no";
  argv[n++] = "--dir";
  argv[n++] = s->dir;
  argv[n++] = "--maxmemory-policy";
  argv[n++] = "noeviction";
  argv[n++] = "--loglevel";
  argv[n++] = "warning";
  for (int i = 0; extra != NULL && extra[i] != NULL && n < 62; i++)
    argv[n++] = extra[i];
  argv[n] = NULL;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "fork: %s\n", strerror(errno));
    exit(1);
  }
  if (pid == 0) {
    /* The server goes with the test, whatever ends it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(1);
    char log[320];
    snprintf(log, sizeof(log), "%s/redis.log", s->dir);
    if (freopen(log, "w", stdout) == NULL || freopen(log, "a", stderr) == NULL)
      _exit(1);
    execvp("redis-server", (char *const *)argv);
    _exit(127);
  }
  s->pid = pid;
  bool known = false;
  for (int i = 0; i < n_started; i++)
    known = known || started[i] == s;
  if (!known && n_started < MAX_SERVERS) {
    if (n_started == 0)
      atexit(stop_all);
    started[n_started++] = s;
  }
  /* Bounded: 30 s, in 20 ms steps. */
  for (int i = 0; i < 1500; i++) {
    if (pings(s->sock))
      return;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      s->pid = 0;
      fprintf(stderr, "redis-server exited at start (see %s/redis.log)\n",
              s->dir);
      exit(1);
    }
    sleep_ms(20);
  }
  fprintf(stderr, "redis-server did not answer PING within 30 s\n");
  exit(1);
}

void cqr_kill(struct cqr_server *s, int sig) {
  if (s->pid <= 0)
    return;
  kill(s->pid, sig);
  if (sig == SIGSTOP || sig == SIGCONT)
    return;
  int status;
  /* Bounded: 10 s, then SIGKILL. */
  int i;
  for (i = 0; i < 1000 && waitpid(s->pid, &status, WNOHANG) == 0; i++)
    sleep_ms(10);
  if (i == 1000) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
  }
  s->pid = 0;
  unlink(s->sock);
}

void cqr_restart(struct cqr_server *s, const char *const *extra) {
  cqr_kill(s, SIGKILL);
  cqr_launch(s, extra);
}

static int remove_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

void cqr_stop(struct cqr_server *s) {
  cqr_kill(s, SIGTERM);
  if (s->dir[0] != '\0') {
    /* Everything it wrote (the AOF directory too), and links the tests
     * made; never outside the directory (FTW_PHYS: links are not
     * followed). */
    nftw(s->dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
    s->dir[0] = '\0';
  }
}

/* A connection of the tests' own to the server, or NULL. */
static redisContext *connect_to(const struct cqr_server *s) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectUnixWithTimeout(s->sock, tv);
  if (c != NULL && c->err != 0) {
    redisFree(c);
    c = NULL;
  }
  return c;
}

static redisReply *command(const struct cqr_server *s, va_list ap) {
  const char *argv[16];
  int n = 0;
  const char *a;
  while (n < 16 && (a = va_arg(ap, const char *)) != NULL)
    argv[n++] = a;
  redisContext *c = connect_to(s);
  if (c == NULL)
    return NULL;
  redisReply *r = redisCommandArgv(c, n, argv, NULL);
  redisFree(c);
  return r;
}

long long cqr_int(const struct cqr_server *s, ...) {
  va_list ap;
  va_start(ap, s);
  redisReply *r = command(s, ap);
  va_end(ap);
  long long v = -1;
  if (r != NULL && r->type == REDIS_REPLY_INTEGER)
    v = r->integer;
  else if (r != NULL && r->type == REDIS_REPLY_STRING)
    v = strtoll(r->str, NULL, 10);
  if (r != NULL)
    freeReplyObject(r);
  return v;
}

void cqr_str(const struct cqr_server *s, char *buf, size_t len, ...) {
  va_list ap;
  va_start(ap, len);
  redisReply *r = command(s, ap);
  va_end(ap);
  buf[0] = '\0';
  if (r != NULL &&
      (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
       r->type == REDIS_REPLY_ERROR))
    snprintf(buf, len, "%s", r->str);
  if (r != NULL)
    freeReplyObject(r);
}

int cqr_atomically(const struct cqr_server *s, const char *const *const *cmds) {
  redisContext *c = connect_to(s);
  if (c == NULL)
    return -1;
  int n = 0;
  redisAppendCommand(c, "MULTI");
  for (; cmds[n] != NULL; n++) {
    int argc = 0;
    while (argc < 16 && cmds[n][argc] != NULL)
      argc++;
    redisAppendCommandArgv(c, argc, (const char **)cmds[n], NULL);
  }
  redisAppendCommand(c, "EXEC");
  int ok = -1;
  void *reply;
  /* MULTI's reply, each command's QUEUED, then EXEC's array. */
  for (int i = 0; i < n + 2 && redisGetReply(c, &reply) == REDIS_OK; i++) {
    redisReply *r = reply;
    if (i == n + 1 && r->type == REDIS_REPLY_ARRAY) {
      ok = 0;
      for (size_t k = 0; k < r->elements; k++)
        ok += r->element[k]->type != REDIS_REPLY_ERROR;
    }
    freeReplyObject(r);
  }
  redisFree(c);
  return ok;
}
