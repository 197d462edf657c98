/*
 * A timer thread (timer.c): sleeps until a deadline on the monotonic clock,
 * then calls its function, with a mutex of the owner's held. The function
 * does what is due and returns the next deadline. The thread starts on the
 * first need, and stops when the owner goes.
 */
#ifndef CRONOQ_UTIL_TIMER_H
#define CRONOQ_UTIL_TIMER_H

#include "util/platform.h"

/* Called with the owner's mutex held (it may drop and take it again);
 * returns the next deadline, CQ_NEVER for none. */
typedef int64_t (*cq__timer_fn)(void *arg);

struct cq__timer {
  cq__mutex *mutex; /* the owner's */
  cq__timer_fn fn;
  void *arg;
  pthread_t thread;
  pthread_cond_t cond;
  bool running;
  bool stop;
  int64_t wake_ms; /* the deadline the thread sleeps towards */
};

/* 0 or CQ_ESYS. */
int cq__timer_init(struct cq__timer *t, cq__mutex *mutex, cq__timer_fn fn,
                   void *arg);
/* Start the thread if it does not run: 0 or CQ_ESYS. Mutex held. */
int cq__timer_ensure(struct cq__timer *t);
/* Wake the thread if `deadline_ms` is earlier than its target. Mutex
 * held. */
void cq__timer_kick(struct cq__timer *t, int64_t deadline_ms);
/* Whether the calling thread is the timer's own. */
bool cq__timer_is_self(const struct cq__timer *t);
/* Stop and join the thread, then free what it owns. Mutex not held. */
void cq__timer_destroy(struct cq__timer *t);

#endif /* CRONOQ_UTIL_TIMER_H */
