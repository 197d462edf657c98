/*
 * Shared by the fuzz harnesses (fuzz_*.c) and the replay driver
 * (replay_main.c).
 *
 * A harness is one LLVMFuzzerTestOneInput(). Under libFuzzer it runs
 * millions of times in one process, so it must leave nothing behind: every
 * pool and list it makes is destroyed before it returns, and its counting
 * allocator proves that even where no sanitizer watches (the gcc replay
 * build). A broken property aborts: libFuzzer then saves the input, and the
 * replay test fails with the message.
 */
#ifndef CRONOQ_FUZZ_UTIL_H
#define CRONOQ_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cronoq/cronoq.h"

/* The entry point libFuzzer calls, and the replay driver too. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property every input must keep. Not assert(): it must hold in release
 * builds, which is what the fuzz build is. */
#define FUZZ_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: property broken: %s\n", __FILE__, __LINE__,      \
              #cond);                                                          \
      abort();                                                                 \
    }                                                                          \
  } while (0)

/* As FUZZ_CHECK, for an int code the library returned. */
#define FUZZ_CHECK_RC(expr, want)                                              \
  do {                                                                         \
    int fuzz_rc_ = (expr);                                                     \
    if (fuzz_rc_ != (want)) {                                                  \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__,        \
              __LINE__, #expr, cq_err_name(fuzz_rc_), cq_err_name(want));      \
      abort();                                                                 \
    }                                                                          \
  } while (0)

/*
 * An allocator that counts and can be told to fail: the library promises
 * that a failed call changes nothing, out of memory included, and the only
 * way to reach those paths is to fail an allocation on purpose. Call k
 * (0-based, counting alloc and realloc) fails when fail_at == k; `live`
 * counts blocks not yet freed, which must be 0 once everything is freed.
 */
struct fuzz_alloc {
  long calls;
  long fail_at; /* -1: never */
  long live;
};

static inline void *fuzz_alloc_alloc(size_t size, void *arg) {
  struct fuzz_alloc *fa = arg;
  if (fa->calls++ == fa->fail_at)
    return NULL;
  void *p = malloc(size);
  if (p != NULL)
    fa->live++;
  return p;
}

static inline void *fuzz_alloc_realloc(void *ptr, size_t size, void *arg) {
  struct fuzz_alloc *fa = arg;
  if (fa->calls++ == fa->fail_at)
    return NULL;
  void *p = realloc(ptr, size);
  if (p != NULL && ptr == NULL)
    fa->live++;
  return p;
}

static inline void fuzz_alloc_free(void *ptr, void *arg) {
  struct fuzz_alloc *fa = arg;
  if (ptr != NULL)
    fa->live--;
  free(ptr);
}

static inline cq_allocator fuzz_allocator(struct fuzz_alloc *fa) {
  cq_allocator a = {fuzz_alloc_alloc, fuzz_alloc_realloc, fuzz_alloc_free, fa};
  return a;
}

/*
 * Which allocations to fail, out of `n` that a call made: all of them when
 * there are few, else an even spread that keeps the first and the last, so
 * that an input with thousands of items still runs in milliseconds.
 * Returns the k-th point, for k < fuzz_fail_points(n).
 */
#define FUZZ_FAIL_POINTS_MAX 16

static inline long fuzz_fail_points(long n) {
  return n < FUZZ_FAIL_POINTS_MAX ? n : FUZZ_FAIL_POINTS_MAX;
}

static inline long fuzz_fail_point(long n, long k) {
  if (n <= FUZZ_FAIL_POINTS_MAX)
    return k;
  return k * (n - 1) / (FUZZ_FAIL_POINTS_MAX - 1);
}

/* Whether a message buffer holds a NUL-terminated, non-empty string. */
static inline int fuzz_msg_ok(const char *msg, size_t cap) {
  size_t i = 0;
  while (i < cap && msg[i] != '\0')
    i++;
  return i > 0 && i < cap;
}

#endif /* CRONOQ_FUZZ_UTIL_H */
