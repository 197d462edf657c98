/*
 * Helpers of the fleet tests that run several processes: fork a child
 * with a pipe back, read its lines with a bound, reap it with a bound.
 * Children report through the pipe and leave with _exit(), never through
 * cmocka, so that only the parent asserts.
 */
#ifndef CRONOQ_TEST_FLEET_PROCS_H
#define CRONOQ_TEST_FLEET_PROCS_H

#include "cronoq/cronoq.h"
#include "support/cqt.h"

#include <poll.h>
#include <signal.h>
#include <stdarg.h>
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

/* Read a line from a child within `ms`; "" on timeout or EOF. */
static inline void read_line(int fd, char *buf, size_t len, int ms) {
  size_t n = 0;
  int64_t give_up = cq_now() + ms;
  buf[0] = '\0';
  while (n + 1 < len) {
    int64_t left = give_up - cq_now();
    struct pollfd p = {fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, (int)left) <= 0)
      break;
    char c;
    if (read(fd, &c, 1) != 1 || c == '\n')
      break;
    buf[n++] = c;
  }
  buf[n] = '\0';
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

static inline void say(int fd, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0 && write(fd, buf, (size_t)n) != n)
    _exit(3);
}

#endif
