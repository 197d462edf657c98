/* The outbox (outbox.h): wake-ups and callbacks delivered after the lock. */
#include "outbox.h"

#include "event.h"
#include "grant.h"

static _Thread_local struct {
  bool active;
  struct cq__grant *head;
  struct cq__grant **tail;
} tl_dispatch;

void cq__outbox_call(struct cq__outbox *o, struct cq__grant *g) {
  g->ready_next = NULL;
  *o->ready_tail = g;
  o->ready_tail = &g->ready_next;
}

void cq__outbox_post(struct cq__outbox *o, struct cq__grant *g) {
  if (g->style == CQ__STYLE_BLOCKING) {
    g->ready_next = o->wake; /* woken by cq__outbox_wake() after unlock */
    o->wake = g;
  } else {
    cq__outbox_call(o, g);
  }
}

void cq__outbox_wake(struct cq__outbox *o) {
  while (o->wake != NULL) {
    struct cq__grant *g = o->wake;
    o->wake = g->ready_next;
    cq__parker *park = g->park;
    /* From here on g may be gone: its thread can return. */
    atomic_store_explicit(&g->posted, 1, memory_order_release);
    cq__parker_unpark(park);
  }
  if (o->nudge != NULL) {
    cq__parker_unpark(o->nudge);
    o->nudge = NULL;
  }
}

void cq__outbox_flush(struct cq__outbox *o) {
  cq__outbox_wake(o);
  if (o->pool != NULL) /* NULL: a call refused for its arguments */
    cq__events_deliver(o->pool);
  if (o->ready_head == NULL)
    return;
  if (tl_dispatch.tail == NULL)
    tl_dispatch.tail = &tl_dispatch.head;
  *tl_dispatch.tail = o->ready_head;
  tl_dispatch.tail = o->ready_tail;
  if (tl_dispatch.active)
    return;
  tl_dispatch.active = true;
  while (tl_dispatch.head != NULL) {
    struct cq__grant *g = tl_dispatch.head;
    tl_dispatch.head = g->ready_next;
    if (tl_dispatch.head == NULL)
      tl_dispatch.tail = &tl_dispatch.head;
    g->ready_next = NULL;
    /* After the callback starts, g belongs to the caller again. */
    g->cb(cq__grant_pub(g), g->status);
  }
  tl_dispatch.active = false;
}
