/*
 * Parkers (parker.c): how a blocked thread sleeps until another thread
 * wakes it. Each thread has one, taken when it first parks and kept for
 * its life; when the thread ends it goes to a free list for the next
 * thread, and is never freed. So a waker may still touch a parker after the
 * thread it woke has moved on, or ended: the worst it causes is one early
 * return from a later park, which every caller tolerates (it parks in a
 * loop, checking its own condition). A parker holds at most one permit:
 * unparks before the park are not lost, and several count as one.
 *
 * On Linux a parker is one futex word; elsewhere a mutex and a condition
 * variable on the monotonic clock.
 */
#ifndef CRONOQ_UTIL_PARKER_H
#define CRONOQ_UTIL_PARKER_H

#include "util/base.h"

typedef struct cq__parker cq__parker;

/* The calling thread's parker; NULL only when none could be allocated. */
cq__parker *cq__parker_self(void);
/* Sleep until the permit is there (and take it), or until `deadline_ms`
 * (cq_now() clock; CQ_NEVER: no limit): 0, or CQ_ETIMEDOUT. May also return
 * 0 early, for a permit a waker of an earlier park left. */
int cq__parker_park(cq__parker *p, int64_t deadline_ms);
/* Leave the permit and wake the parker's thread if it sleeps. Callable from
 * any thread, with or without locks held. */
void cq__parker_unpark(cq__parker *p);

#endif /* CRONOQ_UTIL_PARKER_H */
