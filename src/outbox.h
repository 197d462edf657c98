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

struct cq__grant;

struct cq__outbox {
  cq_pool *pool;
  struct cq__grant *ready_head; /* callbacks to run, in order */
  struct cq__grant **ready_tail;
  struct cq__grant *wake; /* blocked threads to wake */
};

static inline void cq__outbox_init(struct cq__outbox *o, cq_pool *p) {
  o->pool = p;
  o->ready_head = NULL;
  o->ready_tail = &o->ready_head;
  o->wake = NULL;
}

/* Whether anything waits to be delivered. */
static inline bool cq__outbox_pending(const struct cq__outbox *o) {
  return o->ready_head != NULL || o->wake != NULL;
}

/* The outcome of g's attempt is decided (g->status, its state): wake its
 * blocked thread, or queue its callback. Lock held. */
void cq__outbox_post(struct cq__outbox *o, struct cq__grant *g);
/* Queue g's callback with g->status. */
void cq__outbox_call(struct cq__outbox *o, struct cq__grant *g);

/*
 * Wake the blocked threads whose outcome was decided. Done after the pool
 * lock is dropped, so that a woken thread does not at once queue for it
 * behind the thread that woke it. Safe: a woken thread returns (and frees
 * its semaphore) only after it is posted, which this does.
 */
void cq__outbox_wake(struct cq__outbox *o);

/* Wake the blocked threads, deliver the pool's pending events, then run the
 * callbacks. No lock held. */
void cq__outbox_flush(struct cq__outbox *o);

#endif /* CRONOQ_OUTBOX_H */
