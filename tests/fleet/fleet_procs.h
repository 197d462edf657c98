/*
 * Helpers of the fleet tests that run several processes: fork a child
 * with a pipe back (its lines: lines.h), reap it with a bound.
 * Children report through the pipe and leave with _exit(), never through
 * cmocka, so that only the parent asserts.
 */
#ifndef CRONOQ_TEST_FLEET_PROCS_H
#define CRONOQ_TEST_FLEET_PROCS_H

#include "cronoq/cronoq.h"
#include "fleet_test.h"
#include "lines.h"
#include "support/cqt.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static inline int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : dflt;
}

/* Fork a child running fn(arg, fd) with a pipe to the parent. */
static inline pid_t spawn(int (*fn)(void *arg, int fd), void *arg, int *rfd) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    int rc = fn(arg, fds[1]);
    _exit(rc);
  }
  close(fds[1]);
  *rfd = fds[0];
  return pid;
}

/* Wait for a child to exit, within `ms`; its exit status, or -1 (then it
 * is killed). */
static inline int reap(pid_t pid, int ms) {
  int64_t give_up = cq_now() + ms;
  int status;
  while (cq_now() < give_up) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    cqt_sleep_ms(5);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

/* A child's pool on namespace `ns`: its own connection, session and
 * thread; the child leaves (exit 2) if it cannot open one. */
static inline cq_pool *child_open(const char *ns, const cq_fleet_opts *o) {
  cq_pool *p = NULL;
  if (cq_fleet_open(&p, fleet_server.url, ns, o) != 0) {
    fprintf(stderr, "child: cq_fleet_open: %s\n", cq_fleet_error());
    _exit(2);
  }
  return p;
}

/* A child's options: host "h", a short TTL and heartbeat, an event hook
 * (may be NULL). */
static inline cq_fleet_opts short_ttl_opts(int64_t ttl_ms, int64_t heartbeat_ms,
                                           cq_event_fn on_event) {
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.host = "h";
  o.ttl_ms = ttl_ms;
  o.max_ttl_ms = ttl_ms;
  o.heartbeat_ms = heartbeat_ms;
  o.on_event = on_event;
  return o;
}

#endif
