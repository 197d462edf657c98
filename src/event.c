/* The event hook's ring (event.h says how events travel). */
#include "pool.h"

#include <string.h>

int cq__events_init(struct cq__events *e, const cq_allocator *a,
                    cq_event_fn hook, void *arg, uint32_t cap) {
  e->hook = hook;
  e->arg = arg;
  e->ring = NULL;
  e->cap = e->head = e->count = 0;
  e->delivering = false;
  e->dropped = 0;
  if (hook == NULL)
    return 0;
  e->cap = cap ? cap : 4096;
  e->ring = cq__alloc(a, e->cap * sizeof(*e->ring));
  return e->ring != NULL ? 0 : CQ_ENOMEM;
}

void cq__events_free(struct cq__events *e, const cq_allocator *a) {
  cq__free(a, e->ring);
  e->ring = NULL;
}

void cq__event(cq_pool *p, cq_event_type type, const struct cq__grant *g,
               const struct cq__res *r, int64_t wait_ms) {
  struct cq__events *e = &p->ev;
  if (e->hook == NULL)
    return;
  if (e->count == e->cap) {
    e->head = (e->head + 1) % e->cap;
    e->count--;
    e->dropped++;
  }
  cq_event *ev = &e->ring[(e->head + e->count) % e->cap];
  e->count++;
  memset(ev, 0, sizeof(*ev));
  ev->type = type;
  ev->attempt = g != NULL ? g->seq : 0;
  ev->data = g != NULL ? cq__grant_pub((struct cq__grant *)g)->data : NULL;
  ev->resource = r != NULL ? r->name : NULL;
  ev->time_ms = cq__pool_now(p);
  ev->wait_ms = wait_ms;
}

void cq__events_deliver(cq_pool *p) {
  struct cq__events *e = &p->ev;
  if (e->hook == NULL)
    return;
  cq__mutex_lock(&p->lock);
  if (e->delivering) {
    cq__mutex_unlock(&p->lock);
    return;
  }
  e->delivering = true;
  while (e->count > 0) {
    cq_event ev = e->ring[e->head];
    e->head = (e->head + 1) % e->cap;
    e->count--;
    cq__mutex_unlock(&p->lock);
    e->hook(&ev, e->arg);
    cq__mutex_lock(&p->lock);
  }
  e->delivering = false;
  cq__mutex_unlock(&p->lock);
}
