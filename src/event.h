/*
 * The event hook (event.c). Events are recorded under the pool lock into a
 * ring, in the order they happen, and delivered after the lock is dropped
 * by the thread that just used the pool. One thread delivers at a time (the
 * others leave their events to it), so the hook sees them in order. If the
 * hook falls behind by more than the ring holds, the oldest are dropped and
 * counted.
 */
#ifndef CRONOQ_EVENT_H
#define CRONOQ_EVENT_H

#include "util/alloc.h"

struct cq__grant;
struct cq__res;

/* The pool's part. */
struct cq__events {
  cq_event_fn hook; /* NULL: no events */
  void *arg;
  cq_event *ring;
  uint32_t cap, head, count;
  bool delivering;
  uint64_t dropped; /* events the hook fell behind for */
};

/* Set up the ring for `hook` (NULL: no events, nothing allocated).
 * 0 or CQ_ENOMEM. */
int cq__events_init(struct cq__events *e, const cq_allocator *a,
                    cq_event_fn hook, void *arg, uint32_t cap);
void cq__events_free(struct cq__events *e, const cq_allocator *a);

/* Record an event. Lock held. */
void cq__event(cq_pool *p, cq_event_type type, const struct cq__grant *g,
               const struct cq__res *r, int64_t wait_ms);
/* Deliver the pending events. No lock held. */
void cq__events_deliver(cq_pool *p);

#endif /* CRONOQ_EVENT_H */
