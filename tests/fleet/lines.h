/*
 * Lines over pipes between a fleet test (or the fleet bench) and its child
 * processes: write one, or read one with a bound. No cmocka here: children
 * and the bench use it too, and leave with _exit() when a pipe fails.
 */
#ifndef CRONOQ_TEST_FLEET_LINES_H
#define CRONOQ_TEST_FLEET_LINES_H

#include "cronoq/cronoq.h"

#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* Write a formatted line to fd; _exit(3) if the pipe is gone. */
static inline void say(int fd, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0 && write(fd, buf, (size_t)n) != n)
    _exit(3);
}

/* Read a line from fd within `ms`; "" on timeout or EOF. */
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

#endif
