/*
 * Grants: one attempt at a request and, once granted, the units it holds.
 * struct cq__grant lives inside the caller's cq_grant storage; it is the
 * waiter while waiting (the policy's, queue.c) and the holder once granted.
 * grant.c holds the API; this header the structure every module reads.
 *
 * A grant moves IDLE -> WAITING -> HELD -> IDLE, or IDLE -> HELD -> IDLE when
 * the request fits at once, or WAITING -> IDLE when it times out, is
 * cancelled, the pool closes or a capacity shrinks below it. Every
 * transition happens under the pool lock, except on the lock-free paths,
 * where the owner changes its own grant. A grant bound to a pool served by
 * a backend is REMOTE from its binding until an in-process pool binds it
 * again: its state is the backend's (grant_is_idle, grant_is_held), and
 * `pool` is that backend's pool.
 */
#ifndef CRONOQ_GRANT_H
#define CRONOQ_GRANT_H

#include "budget.h"
#include "request.h"
#include "util/parker.h"
#include "util/platform.h"

enum cq__gstate {
  CQ__G_IDLE = 0, /* never used, released, or finished without a grant */
  CQ__G_WAITING = 1,
  CQ__G_HELD = 2,
  CQ__G_REMOTE = 3 /* bound to a backend's pool, which keeps its state */
};

enum cq__gstyle { CQ__STYLE_BLOCKING = 1, CQ__STYLE_CALLBACK = 2 };

/* Per-item flags. */
#define CQ__IT_CLAIMED 0x1u
#define CQ__IT_LONE                                                            \
  0x2u /* holding: a lone grant, which owns the word's lone                    \
          bit until it is released */

struct cq__gitem {
  union {
    cq__rbnode claim; /* waiting: node in the resource's claims tree */
    struct {
      int64_t held; /* holding: units held (thousandths for devices) */
      int32_t dev;  /* holding devices: the device, or the first of a
                       whole-device grant's chain */
    } hold;
  } u;
  struct cq__res *res; /* copied from the request */
  uint8_t flags;       /* CQ__IT_* */
  uint8_t index;       /* this item's index in the grant, to find the grant */
  uint8_t mode;        /* enum cq__mode, copied from the request */
};

struct cq__grant {
  /* The header, at the same place for every kind of pool: which pool the
   * grant was last bound to (cronoq_backend.h). */
  /* enum cq__gstate. Changed under the pool lock, except by the owner on the
   * lock-free paths; atomic so that a racing cancel reads it safely. */
  _Atomic uint8_t state;
  uint8_t style;    /* enum cq__gstyle */
  uint8_t lockfree; /* may be released without the lock */
  uint8_t n_items;
  uint8_t blocker; /* item the waiter lacks first */
  cq_pool *pool;
  char msg[CQ__MSG_MAX]; /* why the last attempt failed */

  cq__rbnode bnode; /* waiting: in the blocker's blocked tree */
  /* Waiting: what it asks of its blocker, and the least of that over its
   * bnode's subtree (queue.c): [0] units of a budget or a fraction's
   * thousandths, [1] whole devices; INT64_MAX where it asks none. */
  int64_t blocked_need[2];
  int64_t blocked_need_min[2];
  struct cq__grant *qprev; /* waiting: the pool's queue, by arrival; held
                              and counted: the policy's list of holders */
  struct cq__grant *qnext;
  uint64_t seq;              /* arrival order; smaller is older */
  const struct cq__req *req; /* while waiting; NULL once held */
  struct cq__gitem it[CQ_REQ_MAX_ITEMS];
  int32_t status; /* outcome of the last finished attempt */
  cq_grant_cb cb;
  struct cq__grant *ready_next; /* callback dispatch list, or wake list */
  /* A blocked thread parks on its thread's parker; whoever decides its
   * outcome sets `posted`, after the lock is dropped, and then unparks it.
   * The thread returns only once `posted` is set, so the poster never
   * touches the grant after that; the parker outlives every thread. */
  cq__parker *park;
  _Atomic uint8_t posted;
  uint8_t asleep;     /* in its barging window (queue.c) */
  uint8_t woken;      /* its thread was nudged and has not run since: the
                         wake-up of its outcome is that one (queue.c) */
  int64_t wake_until; /* asleep: when the window ends */
  int64_t deadline_ms;
  int64_t t_enqueue; /* when it started waiting, on the pool's clock */
  cq__rbnode dnode;  /* waiting with a finite deadline: pool deadline tree */
  /* Holding with a hold limit (backfill.c): the end of the limit, and the
   * node in the pool's `limits` tree until it is released or overdue. */
  cq__rbnode lnode;
  int64_t limit_ms; /* the request's limit when it was granted; 0: none */
  int64_t limit_end;
  uint64_t gseq;          /* grant order: when it was granted, among grants */
  uint8_t limited;        /* in `limits` */
  uint8_t overdue;        /* outlived its limit */
  uint8_t limited_waiter; /* waits with a hold limit: a backfill candidate */
};

_Static_assert(offsetof(struct cq__grant, pool) == 8 &&
                   offsetof(struct cq__grant, msg) == 16 &&
                   offsetof(struct cq__grant, bnode) == CQ_BACKEND_HEADER_BYTES,
               "a grant's header is where every backend finds it");
_Static_assert(sizeof(struct cq__grant) <= sizeof(((cq_grant *)0)->cq_private),
               "struct cq__grant fits the public storage");
_Static_assert(_Alignof(struct cq__grant) <= _Alignof(cq_grant),
               "the public storage is aligned for the private struct");
_Static_assert(sizeof(cq_grant) == 2048,
               "the public storage keeps its size within a SOVERSION");

static inline struct cq__grant *cq__grant_of(cq_grant *g) {
  return (struct cq__grant *)(void *)g->cq_private;
}
static inline const struct cq__grant *cq__grant_ofc(const cq_grant *g) {
  return (const struct cq__grant *)(const void *)g->cq_private;
}
static inline cq_grant *cq__grant_pub(struct cq__grant *g) {
  return CQ__CONTAINER_OF(g, cq_grant, cq_private);
}

static inline uint8_t cq__gstate(const struct cq__grant *g) {
  return atomic_load_explicit(&g->state, memory_order_relaxed);
}
static inline void cq__gstate_set(struct cq__grant *g, uint8_t s) {
  atomic_store_explicit(&g->state, s, memory_order_relaxed);
}

/* The grant an item belongs to. */
static inline struct cq__grant *cq__item_grant(const struct cq__gitem *it) {
  return CQ__CONTAINER_OF(it - it->index, struct cq__grant, it);
}

/* What a waiting grant's item asks of its resource. */
static inline const struct cq__ritem *cq__item_ask(const struct cq__gitem *it) {
  return &cq__item_grant(it)->req->items[it->index];
}

/* What item i of a waiting or arriving grant takes now: its amount (whole
 * devices for a whole-device item), or for a budget what cq__need_at()
 * says. */
static inline int64_t cq__item_need(const struct cq__grant *g, unsigned i) {
  const struct cq__res *r = g->it[i].res;
  int64_t amount = g->req->items[i].amount;
  if (r->kind == CQ__RES_DEVICES)
    return amount;
  return cq__need_at(r, amount, cq__res_capacity(r));
}

#endif /* CRONOQ_GRANT_H */
