/*
 * Platform layer: the monotonic clock, mutexes and condition variables that
 * time out on the monotonic clock. POSIX threads; the monotonic clock is
 * used everywhere so that wall-clock jumps never shorten or stretch a wait.
 */
#include "util/platform.h"

#include <time.h>

int64_t cq_now(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
    return 0;
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cq__mutex_init(cq__mutex *m) {
  return pthread_mutex_init(m, NULL) == 0 ? 0 : CQ_ESYS;
}

void cq__mutex_destroy(cq__mutex *m) { (void)pthread_mutex_destroy(m); }

int cq__cond_init(pthread_cond_t *c) {
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0)
    return CQ_ESYS;
  int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (rc == 0)
    rc = pthread_cond_init(c, &attr);
  (void)pthread_condattr_destroy(&attr);
  return rc == 0 ? 0 : CQ_ESYS;
}

void cq__cond_wait(pthread_cond_t *c, cq__mutex *m, int64_t deadline_ms) {
  if (deadline_ms == CQ_NEVER) {
    (void)pthread_cond_wait(c, m);
    return;
  }
  /* cq_now() truncates to whole milliseconds, so waking at the deadline's
   * first nanosecond is never early by cq_now()'s reading. */
  struct timespec ts;
  ts.tv_sec = (time_t)(deadline_ms / 1000);
  ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
  (void)pthread_cond_timedwait(c, m, &ts);
}
