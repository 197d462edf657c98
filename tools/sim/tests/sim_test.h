/*
 * What the simulator's test suites share: cmocka, tolerance assertions,
 * a job's fields in one assertion, and reading back what a function wrote
 * to a stream. The suites need the simulator library only; none reaches
 * into the core's internals.
 */
#ifndef CRONOQ_SIM_TEST_H
#define CRONOQ_SIM_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim.h"

#include <math.h>
#include <stdio.h>

#define assert_within(actual, expected, tolerance, what)                       \
  do {                                                                         \
    double a_ = (actual), e_ = (expected), t_ = (tolerance);                   \
    if (!(fabs(a_ - e_) <= t_))                                                \
      fail_msg("%s: %g, expected %g within %g", what, a_, e_, t_);             \
  } while (0)

#define assert_within_rel(actual, expected, rel, what)                         \
  assert_within(actual, expected, fabs((double)(expected)) * (rel), what)

/* Every field of a job read from a trace (which declares no limit). */
static inline void assert_job(const struct sim_job *j, int64_t arrival_ms,
                              int64_t duration_ms, int64_t cpu_milli,
                              int64_t memory_mib, uint8_t gpu,
                              int64_t gpu_amount, uint8_t cls) {
  assert_int_equal(j->arrival_ms, arrival_ms);
  assert_int_equal(j->duration_ms, duration_ms);
  assert_int_equal(j->cpu_milli, cpu_milli);
  assert_int_equal(j->memory_mib, memory_mib);
  assert_int_equal(j->gpu, gpu);
  assert_int_equal(j->gpu_amount, gpu_amount);
  assert_int_equal(j->cls, cls);
  assert_int_equal(j->limit_ms, 0);
}

/* What was written to `f` (a tmpfile()); closes it. The text stays valid
 * until the next call. */
static inline const char *captured(FILE *f) {
  static char text[1 << 18];
  rewind(f);
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

#endif /* CRONOQ_SIM_TEST_H */
