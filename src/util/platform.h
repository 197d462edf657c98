/*
 * The platform layer (platform.c): mutexes and condition variables that
 * time out on the monotonic clock (a thread's parker is parker.h). POSIX
 * threads; the monotonic clock is used everywhere, so that wall-clock jumps
 * never shorten or stretch a wait.
 */
#ifndef CRONOQ_UTIL_PLATFORM_H
#define CRONOQ_UTIL_PLATFORM_H

#include "util/base.h"

#include <pthread.h>

typedef pthread_mutex_t cq__mutex;

int cq__mutex_init(cq__mutex *m);
void cq__mutex_destroy(cq__mutex *m);
static inline void cq__mutex_lock(cq__mutex *m) { (void)pthread_mutex_lock(m); }
static inline void cq__mutex_unlock(cq__mutex *m) {
  (void)pthread_mutex_unlock(m);
}

/* A condition variable that measures timeouts on the monotonic clock. */
int cq__cond_init(pthread_cond_t *c);
/* Waits until signalled or until `deadline_ms` (cq_now() clock) passes;
 * CQ_NEVER waits without limit. Spurious returns are possible. */
void cq__cond_wait(pthread_cond_t *c, cq__mutex *m, int64_t deadline_ms);

#endif /* CRONOQ_UTIL_PLATFORM_H */
