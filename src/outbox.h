/*
 * The outbox (outbox.c): outcomes decided under the pool lock and delivered
 * once it is dropped. Blocked threads are woken, events delivered, then
 * callbacks run, in the order their outcomes were decided.
 *
 * Callbacks may call back into the library, also to release and so grant
 * further callbacks. To keep the stack flat, a thread already running
 * callbacks appends new ones to its own list instead of recursing; the
 * outermost delivery runs them in order.
 */
#ifndef CRONOQ_OUTBOX_H
#define CRONOQ_OUTBOX_H

#include "util/base.h"
#include "util/parker.h"

struct cq__grant;

struct cq__outbox {
  cq_pool *pool;
  struct cq__grant *ready_head; /* callbacks to run, in order */
  struct cq__grant **ready_tail;
  struct cq__grant *wake; /* blocked threads to wake */
  cq__parker *nudge;      /* a sleeping thread to wake, to try again */
};

static inline void cq__outbox_init(struct cq__outbox *o, cq_pool *p) {
  o->pool = p;
  o->ready_head = NULL;
  o->ready_tail = &o->ready_head;
  o->wake = NULL;
  o->nudge = NULL;
}

/* Whether anything waits to be delivered. */
static inline bool cq__outbox_pending(const struct cq__outbox *o) {
  return o->ready_head != NULL || o->wake != NULL || o->nudge != NULL;
}

/* The outcome of g's attempt is decided (g->status, its state): wake its
 * blocked thread, or queue its callback. Lock held. */
void cq__outbox_post(struct cq__outbox *o, struct cq__grant *g);
/* Queue g's callback with g->status. */
void cq__outbox_call(struct cq__outbox *o, struct cq__grant *g);

/*
 * Wake the blocked threads whose outcome was decided, and the one nudged.
 * Done after the pool lock is dropped, so that a woken thread does not at
 * once queue for it behind the thread that woke it. Safe: a woken thread
 * returns only once its grant is marked posted, which this does last of
 * all it does with the grant; parkers are never freed.
 */
void cq__outbox_wake(struct cq__outbox *o);

/* Wake the blocked threads, deliver the pool's pending events, then run the
 * callbacks. No lock held. */
void cq__outbox_flush(struct cq__outbox *o);

#endif /* CRONOQ_OUTBOX_H */
