/*
 * The event hook. Events are recorded under the pool lock into a ring, in
 * the order they happen, and delivered after the lock is dropped by the
 * thread that just used the pool. One thread delivers at a time (the others
 * leave their events to it), so the hook sees them in order. If the hook
 * falls behind by more than the ring holds, the oldest are dropped and
 * counted.
 */
#include "cq_internal.h"

void cq__event(cq_pool *p, cq_event_type type, const struct cq__grant *g,
               const struct cq__res *r, int64_t wait_ms) {
  if (p->on_event == NULL)
    return;
  if (p->ev_count == p->ev_cap) {
    p->ev_head = (p->ev_head + 1) % p->ev_cap;
    p->ev_count--;
    p->events_dropped++;
  }
  cq_event *ev = &p->events[(p->ev_head + p->ev_count) % p->ev_cap];
  p->ev_count++;
  ev->type = type;
  ev->attempt = g != NULL ? g->seq : 0;
  ev->data = g != NULL ? cq__grant_pub((struct cq__grant *)g)->data : NULL;
  ev->resource = r != NULL ? r->name : NULL;
  ev->time_ms = cq__pool_now(p);
  ev->wait_ms = wait_ms;
}

void cq__events_deliver(cq_pool *p) {
  if (p == NULL || p->on_event == NULL)
    return;
  cq__mutex_lock(&p->lock);
  if (p->ev_delivering) {
    cq__mutex_unlock(&p->lock);
    return;
  }
  p->ev_delivering = true;
  while (p->ev_count > 0) {
    cq_event ev = p->events[p->ev_head];
    p->ev_head = (p->ev_head + 1) % p->ev_cap;
    p->ev_count--;
    cq__mutex_unlock(&p->lock);
    p->on_event(&ev, p->event_arg);
    cq__mutex_lock(&p->lock);
  }
  p->ev_delivering = false;
  cq__mutex_unlock(&p->lock);
}
