/*
 * Internal umbrella header: every source file of the core includes this and
 * nothing else of the library's.
 *
 * Objects and who owns them:
 * - struct cq_pool (pool.c): the lock, the resource table, the wait queue's
 *   bookkeeping, the deadline tree and the optional timer thread.
 * - struct cq__res (resource.c): one named resource. Allocated on its own so
 *   that pointers to it stay valid while the table grows.
 * - struct cq__req (request.c): lives inside the caller's cq_req storage.
 * - struct cq__grant (grant.c, queue.c): lives inside the caller's cq_grant
 *   storage; it is the waiter while waiting and the holder once granted.
 *
 * Locking: one mutex per pool guards everything reachable from the pool,
 * including the grants that wait on it or hold units of it. Callbacks and
 * the event hook run with no lock held.
 */
#ifndef CRONOQ_CQ_INTERNAL_H
#define CRONOQ_CQ_INTERNAL_H

#include "cronoq/cronoq.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define CQ__CONTAINER_OF(ptr, type, field)                                     \
  ((type *)(void *)((char *)(ptr)-offsetof(type, field)))

/* Abort on a broken internal invariant; never used for bad input. */
#define CQ__ASSERT(cond)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      cq__panic(__FILE__, __LINE__, #cond);                                    \
  } while (0)

void cq__panic(const char *file, int line, const char *what);

/* ------------------------------------------------------------------------ */
/* Intrusive red-black tree (rbtree.c)                                       */
/* ------------------------------------------------------------------------ */

typedef struct cq__rbnode {
  uintptr_t parent_color; /* parent pointer, low bit set when red */
  struct cq__rbnode *child[2];
} cq__rbnode;

typedef struct cq__rbtree {
  cq__rbnode *root;
  cq__rbnode *first; /* leftmost node, NULL when empty */
  cq__rbnode *last;  /* rightmost node, NULL when empty */
  size_t count;
} cq__rbtree;

/* Orders two nodes: < 0, 0 or > 0. Keys in one tree must be unique. */
typedef int (*cq__rbcmp)(const cq__rbnode *a, const cq__rbnode *b);
/* Orders a node against a search key. */
typedef int (*cq__rbkeycmp)(const cq__rbnode *node, const void *key);

void cq__rb_insert(cq__rbtree *t, cq__rbnode *n, cq__rbcmp cmp);
void cq__rb_remove(cq__rbtree *t, cq__rbnode *n);
cq__rbnode *cq__rb_next(const cq__rbnode *n);
cq__rbnode *cq__rb_prev(const cq__rbnode *n);
/* The first node that is not ordered before `key`, or NULL. */
cq__rbnode *cq__rb_lower_bound(const cq__rbtree *t, const void *key,
                               cq__rbkeycmp cmp);
/* Checks every red-black property; returns the black height or -1. */
int cq__rb_check(const cq__rbtree *t, cq__rbcmp cmp);

static inline cq__rbnode *cq__rb_first(const cq__rbtree *t) { return t->first; }
static inline cq__rbnode *cq__rb_last(const cq__rbtree *t) { return t->last; }

/* ------------------------------------------------------------------------ */
/* Platform (platform.c)                                                     */
/* ------------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------------ */
/* Resources (resource.c)                                                    */
/* ------------------------------------------------------------------------ */

enum cq__res_kind {
  CQ__RES_BUDGET = CQ_KIND_BUDGET,
  CQ__RES_DEVICES = CQ_KIND_DEVICES,
  CQ__RES_CLASS = CQ_KIND_CLASS /* a budget of workers, one per grant */
};

/*
 * A budget's usage word, updated with single atomic operations so that
 * uncontended acquires and releases need no lock:
 *   bits  0..39  units in use
 *   bits 40..60  grants made without the lock, not yet moved into
 *                grants_total (moved under the lock before the field fills)
 *   bit  61      lone: a lone request holds the budget; nothing else may be
 *                granted on it, whatever the units and the capacity
 *   bit  62      removed: the resource is gone, every acquire must fail
 *   bit  63      contended: some waiter claims this budget; acquires must
 *                take the lock (to respect what is withheld) and releases
 *                must sweep
 *
 * The count field never borrows from or carries into the state bits: every
 * subtraction from it is conditional, in the same compare-and-swap, on the
 * field holding at least what is taken (see cq__res_harvest() and the undo
 * of cq__lockfree_take()), and an addition happens only while the field is
 * below the fast limit, so it never exceeds that limit. The harvest
 * threshold is a build option (CRONOQ_HARVEST_SHIFT) so that tests can make
 * every run cross it many times.
 */
#ifndef CQ_HARVEST_SHIFT
#define CQ_HARVEST_SHIFT 19
#endif
#define CQ__W_USED_MASK ((UINT64_C(1) << 40) - 1)
#define CQ__W_COUNT_SHIFT 40
#define CQ__W_COUNT_BITS 21
#define CQ__W_COUNT_ONE (UINT64_C(1) << CQ__W_COUNT_SHIFT)
#define CQ__W_COUNT_MASK                                                       \
  (((UINT64_C(1) << CQ__W_COUNT_BITS) - 1) << CQ__W_COUNT_SHIFT)
#define CQ__W_COUNT_HARVEST (UINT64_C(1) << CQ_HARVEST_SHIFT) /* moved at a time */
#define CQ__W_COUNT_FAST_LIMIT (CQ__W_COUNT_HARVEST * 2) /* lock-free below */
#define CQ__W_LONE (UINT64_C(1) << 61)
#define CQ__W_REMOVED (UINT64_C(1) << 62)
#define CQ__W_CONTENDED (UINT64_C(1) << 63)

_Static_assert(CQ_BUDGET_MAX == (int64_t)CQ__W_USED_MASK,
               "a budget's capacity fits the usage word's units field");
_Static_assert(CQ__W_COUNT_FAST_LIMIT <=
                   (CQ__W_COUNT_MASK >> CQ__W_COUNT_SHIFT),
               "the count field holds every value up to the fast limit");
_Static_assert(CQ_HARVEST_SHIFT >= 1 && CQ_HARVEST_SHIFT <= 19,
               "the harvest threshold fits the count field");

static inline int64_t cq__w_used(uint64_t w) {
  return (int64_t)(w & CQ__W_USED_MASK);
}
static inline uint64_t cq__w_count(uint64_t w) {
  return (w & CQ__W_COUNT_MASK) >> CQ__W_COUNT_SHIFT;
}

/*
 * A histogram of waiting times in milliseconds: exact below 8, then eight
 * buckets per power of two, so any value is known within 1/8.
 */
#define CQ__HIST_BUCKETS (8 + 8 * 42)
struct cq__hist {
  uint64_t count;
  int64_t max;
  int64_t sum;
  uint64_t buckets[CQ__HIST_BUCKETS];
};

void cq__hist_add(struct cq__hist *h, int64_t value);
/* The q-quantile (0 < q <= 1) of the histogram plus `zeros` more zeros. */
int64_t cq__hist_quantile(const struct cq__hist *h, uint64_t zeros, double q);

/*
 * Resource order: device pools, then the others, each group in the order
 * added (uids grow with every addition). Staged claims and the order in which
 * a waiter's lacks are checked both follow it. A resource's rank never
 * changes.
 */
static inline uint64_t cq__rank(uint8_t kind, uint32_t uid) {
  return ((uint64_t)(kind != CQ__RES_DEVICES) << 32) | uid;
}

/*
 * One device of a device pool. Online devices sit in the pool's `by_free`
 * tree, ordered by (free thousandths, index): best fit is a lower-bound
 * search, the most free device is found from the end.
 */
struct cq__dev {
  cq__rbnode node;
  int64_t used; /* thousandths held, 0..CQ_DEVICE_MILLI */
  int64_t peak;
  uint64_t grants;
  uint64_t mark;   /* == the pool's stamp: reserved in this query */
  int64_t bf_free; /* backfill: thousandths free at the shadow time */
  uint32_t index;
  int32_t whole_next; /* next device of the same whole-device grant, or -1 */
  bool online;
  bool whole; /* held whole by one grant */
  char id[CQ_DEVICE_ID_MAX + 1];
};

static inline int64_t cq__dev_free(const struct cq__dev *d) {
  return CQ_DEVICE_MILLI - d->used;
}

/*
 * A resource. It is allocated on its own and, once added, stays allocated
 * until the pool is destroyed, even after it is removed: requests and grants
 * point at it directly, and lock-free acquires read it without the lock.
 */
struct cq__res {
  char name[CQ_NAME_MAX + 1];
  uint32_t uid;  /* unique for the pool's lifetime */
  uint16_t slot; /* index in the pool's table */
  uint8_t kind;  /* enum cq__res_kind */
  uint8_t flags; /* enum cq_budget_flags; fixed when added */

  _Atomic uint64_t word;    /* budgets: see CQ__W_* */
  _Atomic int64_t capacity; /* changed only under the lock */
  _Atomic int64_t peak;     /* highest use seen */
  uint64_t grants_total;    /* grants counted under the lock */
  uint64_t n_waiting;       /* waiters whose request names this resource */
  uint64_t n_holders;       /* held grants naming it that are counted in the
                               pool's n_held (see there) */
  uint64_t timeouts;        /* waiters naming it that timed out */
  uint64_t cancels;         /* waiters naming it that were cancelled */
  struct cq__hist wait;     /* waiting times of the grants that waited */

  /* Claims: item nodes of waiters that claimed this resource, by arrival.
   * The first is the claimant; what is free is withheld for it. Non-empty
   * exactly when the word's contended bit is set. */
  cq__rbtree claims;
  /* Waiters whose blocker is this resource, by arrival (queue.c). */
  cq__rbtree blocked;

  struct cq__res *grave_next; /* removed resources, kept until destroy */

  /* Sweep bookkeeping (queue.c). */
  struct cq__res *dirty_next;
  bool dirty;
  uint64_t walk_seq; /* waiters blocked here with seq > walk_seq remain */

  /* Device pools (device.c); the word's used field is the sum of the
   * devices' thousandths, kept for snapshots and the destroy check. */
  struct cq__dev *devs;
  uint32_t n_devs;
  uint32_t n_online;
  cq__rbtree by_free;
  uint64_t stamp; /* last reservation stamp handed out */

  /* Backfill (backfill.c): this resource is one the head waiter names when
   * bf_mark equals the pool's bf.stamp; bf_free is then what a budget will
   * have free at the shadow time (devices keep theirs per device). */
  uint64_t bf_mark;
  int64_t bf_free;
};

static inline int64_t cq__res_used(const struct cq__res *r) {
  return cq__w_used(atomic_load_explicit(&r->word, memory_order_acquire));
}

static inline int64_t cq__res_capacity(const struct cq__res *r) {
  return atomic_load_explicit(&r->capacity, memory_order_relaxed);
}

/* Whether `amount` of budget-like resource r is a lone request: larger
 * than the capacity, on a budget with the lone-request allowance. */
static inline bool cq__is_lone(const struct cq__res *r, int64_t amount,
                               int64_t capacity) {
  return (r->flags & CQ_BUDGET_LONE) && amount > capacity;
}

/* What `amount` of budget-like resource r takes: a lone request takes the
 * whole capacity, and needs at least one unit, so that on a lone budget of
 * capacity 0 it waits instead of holding nothing; else the amount. */
static inline int64_t cq__need_at(const struct cq__res *r, int64_t amount,
                                  int64_t capacity) {
  if (!cq__is_lone(r, amount, capacity))
    return amount;
  return capacity > 0 ? capacity : 1;
}

/* Raise the peak to at least `used`. */
static inline void cq__peak_raise(struct cq__res *r, int64_t used) {
  int64_t peak = atomic_load_explicit(&r->peak, memory_order_relaxed);
  while (used > peak && !atomic_compare_exchange_weak_explicit(
                            &r->peak, &peak, used, memory_order_relaxed,
                            memory_order_relaxed)) {
  }
}

/* Snapshots (stats.c, device.c). Lock held. */
void cq__res_snapshot(struct cq__res *r, cq_resource_stats *out);
void cq__dev_snapshot(struct cq__res *r, uint32_t index, cq_device_stats *out);

/* Move lock-free grant counts into grants_total. Lock held. */
void cq__res_harvest(struct cq__res *r);

/* Look a resource up by name; NULL if none. Lock held. */
struct cq__res *cq__res_find(cq_pool *p, const char *name);
/* Check a resource name: 0 or CQ_EINVAL. */
int cq__name_check(const char *name);
/* Add a resource to the table; fills *out. Lock held. */
int cq__res_add(cq_pool *p, const char *name, enum cq__res_kind kind,
                struct cq__res **out);
/* Free a resource's memory (NULL accepted). Only when the pool goes. */
void cq__res_free(cq_pool *p, struct cq__res *r);

/* ------------------------------------------------------------------------ */
/* Requests (request.c)                                                      */
/* ------------------------------------------------------------------------ */

#define CQ__REQ_MAGIC 0x63717271u /* "cqrq" */
#define CQ__MSG_MAX 160

/* What an item asks of its resource. */
enum cq__mode {
  CQ__MODE_UNITS = 0,    /* budget units */
  CQ__MODE_FRACTION = 1, /* thousandths of one device */
  CQ__MODE_WHOLE = 2     /* whole devices */
};

struct cq__ritem {
  struct cq__res *res;
  int64_t amount;
  uint8_t mode; /* enum cq__mode */
};

/* The longest hold limit: about 285 years, far from overflowing a clock. */
#define CQ__LIMIT_MAX (INT64_C(1) << 53)

/* Request flags. */
#define CQ__REQ_LOCKFREE 0x1u /* only budgets: may be granted without lock */

struct cq__req {
  uint32_t magic;
  uint16_t n_items;
  uint16_t flags; /* CQ__REQ_* */
  cq_pool *pool;
  int64_t limit_ms;                         /* hold limit; 0: none */
  struct cq__ritem items[CQ_REQ_MAX_ITEMS]; /* sorted by resource rank */
  char msg[CQ__MSG_MAX];
};

/* An item as a request spec writes it: "db:12", "gpu:0.5" (fractions),
 * "gpu:2" (whole devices). */
void cq__item_text(char *buf, size_t len, const struct cq__ritem *it);

static inline struct cq__req *cq__req_of(cq_req *r) {
  return (struct cq__req *)(void *)r->cq_private;
}
static inline const struct cq__req *cq__req_ofc(const cq_req *r) {
  return (const struct cq__req *)(const void *)r->cq_private;
}

/* ------------------------------------------------------------------------ */
/* Grants (grant.c) and the waiting policy (queue.c)                         */
/* ------------------------------------------------------------------------ */

enum cq__gstate {
  CQ__G_IDLE = 0, /* never used, released, or finished without a grant */
  CQ__G_WAITING = 1,
  CQ__G_HELD = 2
};

enum cq__gstyle { CQ__STYLE_BLOCKING = 1, CQ__STYLE_CALLBACK = 2 };

/* Per-item flags. */
#define CQ__IT_CLAIMED 0x1u
#define CQ__IT_LONE 0x2u /* holding: a lone grant, which owns the word's lone
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

/*
 * A blocked thread waits on a semaphore of its own, not on the pool's lock:
 * whoever decides its outcome posts it after dropping the pool lock, and
 * the woken thread returns without waiting for any lock (a semaphore wakes
 * in one futex call, and none when the thread had not yet gone to sleep).
 * `signalling` is set from just before the post to just after it, and the
 * thread waits for it to clear before freeing the semaphore.
 */
struct cq__waitsync {
  sem_t sem;
  _Atomic bool signalling;
};

/* Wait for a post until `deadline_ms` (cq_now() clock; CQ_NEVER: no limit):
 * 0 when posted, else CQ_ETIMEDOUT (or spuriously, on a signal, CQ_ESYS). */
int cq__sem_wait(sem_t *s, int64_t deadline_ms);

struct cq__grant {
  cq__rbnode bnode;        /* waiting: in the blocker's blocked tree */
  struct cq__grant *qprev; /* waiting: the pool's queue, by arrival */
  struct cq__grant *qnext;
  uint64_t seq;              /* arrival order; smaller is older */
  const struct cq__req *req; /* while waiting */
  /* enum cq__gstate. Changed under the pool lock, except by the owner on the
   * lock-free paths; atomic so that a racing cancel reads it safely. */
  _Atomic uint8_t state;
  uint8_t style;    /* enum cq__gstyle */
  uint8_t lockfree; /* may be released without the lock */
  uint8_t n_items;
  uint8_t blocker; /* item the waiter lacks first */
  struct cq__gitem it[CQ_REQ_MAX_ITEMS];
  cq_pool *pool;
  int32_t status; /* outcome of the last finished attempt */
  cq_grant_cb cb;
  struct cq__grant *ready_next; /* callback dispatch list, or wake list */
  struct cq__waitsync *sync;    /* blocking waiter's condition variable */
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
  char msg[CQ__MSG_MAX];
};

_Static_assert(sizeof(struct cq__grant) <= sizeof(((cq_grant *)0)->cq_private),
               "struct cq__grant fits the public storage");
_Static_assert(sizeof(struct cq__req) <= sizeof(((cq_req *)0)->cq_private),
               "struct cq__req fits the public storage");
_Static_assert(_Alignof(struct cq__grant) <= _Alignof(cq_grant) &&
                   _Alignof(struct cq__req) <= _Alignof(cq_req),
               "the public storage is aligned for the private structs");
_Static_assert(sizeof(cq_grant) == 2048 && sizeof(cq_req) == 1024,
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

/* The grant an item belongs to. */
static inline struct cq__grant *cq__item_grant(const struct cq__gitem *it) {
  return CQ__CONTAINER_OF(it - it->index, struct cq__grant, it);
}

/* What a waiting grant's item asks of its resource. */
static inline const struct cq__ritem *cq__item_ask(const struct cq__gitem *it) {
  return &cq__item_grant(it)->req->items[it->index];
}

/* What item i of a waiting or arriving grant takes now: its amount (whole
 * devices for a whole-device item), or for a lone request on a budget at
 * most the capacity. */
static inline int64_t cq__item_need(const struct cq__grant *g, unsigned i) {
  const struct cq__res *r = g->it[i].res;
  int64_t amount = g->req->items[i].amount;
  if (r->kind == CQ__RES_DEVICES)
    return amount;
  return cq__need_at(r, amount, cq__res_capacity(r));
}

/* Work collected under the lock and finished after unlocking. */
struct cq__ctx {
  cq_pool *pool;
  struct cq__grant *ready_head; /* callbacks to run, in order */
  struct cq__grant **ready_tail;
  struct cq__grant *wake; /* blocked threads to wake */
};

static inline void cq__ctx_init(struct cq__ctx *c, cq_pool *p) {
  c->pool = p;
  c->ready_head = NULL;
  c->ready_tail = &c->ready_head;
  c->wake = NULL;
}

/*
 * Wake the blocked threads whose outcome was decided. Done after the pool
 * lock is dropped, so that a woken thread does not at once queue for it
 * behind the thread that woke it. Safe: a woken thread returns (and frees
 * its waitsync) only after seeing `done`, which this sets.
 */
void cq__ctx_wake(struct cq__ctx *c);

/* Wake the blocked threads, deliver the pool's pending events, then run
 * the callbacks collected in `c`. No lock held. */
void cq__ctx_finish(struct cq__ctx *c);

/* Events (event.c). Record one, lock held; deliver pending ones, no lock
 * held. */
void cq__event(cq_pool *p, cq_event_type type, const struct cq__grant *g,
               const struct cq__res *r, int64_t wait_ms);
void cq__events_deliver(cq_pool *p);

/* device.c: device pools, all with the pool lock held. `excl` is the item
 * of the pool's claimant when its reservation applies to the asker, else
 * NULL. */
bool cq__dev_fits(struct cq__res *r, uint8_t mode, int64_t amount,
                  const struct cq__gitem *excl);
/* Place a request that fits; returns the device (the first, for whole). */
int32_t cq__dev_take(struct cq__res *r, uint8_t mode, int64_t amount,
                     const struct cq__gitem *excl);
/* Give back `amount` thousandths of a fraction on `dev`, or a whole grant's
 * chain starting at `dev` (amount = its devices * CQ_DEVICE_MILLI). */
void cq__dev_put(struct cq__res *r, uint8_t mode, int32_t dev, int64_t amount);
/* Give back one whole device of the chain of item `it`. */
void cq__dev_put_one(struct cq__res *r, struct cq__gitem *it, uint32_t index);
/* How many copies of (mode, amount) fit now, one after another, for a new
 * request (reservations of the claimant apply). */
int64_t cq__dev_copies(struct cq__res *r, uint8_t mode, int64_t amount);
/* For a new job: free thousandths on unreserved devices, the largest
 * fraction that fits one, and the entirely free unreserved devices. */
void cq__dev_room(struct cq__res *r, int64_t *units, int64_t *largest,
                  uint32_t *whole);
/* Where a request that fits would be placed, without placing it: the
 * device (for whole devices the first, the others chained through
 * whole_next, which the caller resets), or -1. */
int32_t cq__dev_peek(struct cq__res *r, uint8_t mode, int64_t amount,
                     const struct cq__gitem *excl);
/* Whether some online device has free capacity. */
bool cq__dev_any_free(const struct cq__res *r);
/* Free thousandths on the devices reserved for claimant item c. */
int64_t cq__dev_withheld(struct cq__res *r, const struct cq__gitem *c);
/* Stamp the devices reserved for claimant item c; returns the stamp. */
uint64_t cq__dev_reserve(struct cq__res *r, const struct cq__gitem *c);

/* detect.c: the parsers, reachable by tests and fuzzers. They append to
 * `out` (whose allocator must be set) and fill out->error on CQ_EPARSE. */
int cq__parse_cuda_visible(const char *text, cq_gpu_list *out);
int cq__parse_nvidia_smi(const char *text, cq_gpu_list *out);

/* spec.c: the spec parsers with an explicit length, so that fuzzers can feed
 * any bytes, NUL included. */
int cq__pool_add_spec_n(cq_pool *pool, const char *spec, size_t len,
                        const cq_detect_opts *detect, char *err,
                        size_t err_len);
int cq__req_parse_n(cq_req *req, const char *spec, size_t len);

/* queue.c: the waiting policy. All with the pool lock held. */

/* Check one item against its resource as it is now: 0, or CQ_ENOENT /
 * CQ_ENEVER with `msg` filled. */
int cq__req_validate_item(cq_pool *p, const struct cq__ritem *it, char *msg);
/* Check `req` against the current resources: 0, or CQ_ENOENT / CQ_ENEVER
 * with `msg` filled. */
int cq__req_validate(cq_pool *p, const struct cq__req *req, char *msg);
/* Bind a fresh attempt of `req` to grant `g` and give it the next seq. */
void cq__attempt_start(cq_pool *p, struct cq__grant *g,
                       const struct cq__req *req);
/* Examine a new arrival: grant it (true) or leave it ungranted (false)
 * without changing anything. */
bool cq__arrival_try(cq_pool *p, struct cq__grant *g);
/* Grant a budget-only request without the lock: 1 granted; 0 not now (take
 * the lock and decide there); -1 not now, and a transient hold was given
 * back to a contended budget, so the caller must sweep under the lock. Bit i
 * of *uncounted is set when item i's count was harvested before it could be
 * taken back from the word: the caller takes it off grants_total under the
 * lock. */
int cq__lockfree_take(struct cq__grant *g, const struct cq__req *req,
                      uint32_t *uncounted);
/* Release a lock-free grant without the lock; true when a contended budget
 * got units back and the caller must sweep under the lock. */
bool cq__lockfree_give_all(struct cq__grant *g);
/* Queue a new arrival that did not fit: it claims what it lacks and
 * blocks on the first. */
void cq__enqueue(cq_pool *p, struct cq__grant *g, struct cq__ctx *ctx);
/* Take a waiter out of the queue with `status` (not 0) and notify it. */
void cq__waiter_leave(cq_pool *p, struct cq__grant *g, int status,
                      struct cq__ctx *ctx);
/* Return `amount` of item `i` held by `g` to the pool. Lock held. */
void cq__give_back(cq_pool *p, struct cq__grant *g, unsigned i, int64_t amount);
/* Return everything held grant g holds (a release). Lock held. */
void cq__give_back_all(cq_pool *p, struct cq__grant *g);
/* Count held grant g (delta +1) among the pool's held grants and its
 * resources' holders, or stop counting it (-1). Lock held. */
void cq__held_count(cq_pool *p, struct cq__grant *g, int delta);
/* Mark every contended resource of g dirty (after a lock-free release). */
void cq__mark_contended_dirty(cq_pool *p, struct cq__grant *g);
/* Fail every waiter that can no longer ever fit (a capacity shrank, a
 * device went offline, a resource was removed) with CQ_ENEVER. */
void cq__fail_unsatisfiable(cq_pool *p, struct cq__ctx *ctx);
/* Examine waiters that may now fit, oldest first, until none can. */
void cq__sweep(cq_pool *p, struct cq__ctx *ctx);
/* Mark a resource as freed: its blocked waiters are examined by the next
 * sweep. */
void cq__res_mark_dirty(cq_pool *p, struct cq__res *r, uint64_t from_seq);
/* Units of r came back, or were withheld by a waiter that left (seq): walk
 * its blocked waiters younger than after_seq again, and in a backfill pool
 * let the waiters behind the head try too, whatever blocks them. */
void cq__units_returned(cq_pool *p, struct cq__res *r, uint64_t after_seq);
/* The claimant item on r whose reservation applies to g: the claimant when
 * it is older than g and is not `ignore`; else NULL. */
const struct cq__gitem *cq__excl_for(const struct cq__res *r,
                                     const struct cq__grant *g,
                                     const struct cq__grant *ignore);
/* Units of budget-like r open to a new request: free minus withheld. */
int64_t cq__budget_open(const struct cq__res *r);
/* Units of budget r withheld for its claimant when its usage word reads
 * `word`. */
int64_t cq__budget_withheld(const struct cq__res *r, uint64_t word);

/* backfill.c: hold limits and backfill. All with the pool lock held. */

/* A grant was just made (units held): keep its limit in order, and account
 * for it in the head's projection. */
void cq__limit_granted(cq_pool *p, struct cq__grant *g, int64_t now);
/* A grant is being released in full: the reverse. */
void cq__limit_released(cq_pool *p, struct cq__grant *g);
/* Part of a grant went back, or a capacity or device changed: the shadow
 * time and projection must be computed again. */
void cq__bf_invalidate(cq_pool *p);
/* Mark every limited grant whose limit ended at or before `now` overdue. */
void cq__limits_expire(cq_pool *p, int64_t now);
/* The earliest limit end still pending, or CQ_NEVER. */
int64_t cq__limits_first(const cq_pool *p);
/* Whether `g` (not the head) may be backfilled now, going by what the
 * caller found: it is covered everywhere once the head's withholding is
 * ignored. */
bool cq__bf_allows(cq_pool *p, struct cq__grant *g, int64_t now);
/* The head waiter the backfill rules protect, when backfill is on and it
 * may be passed now; else NULL. */
const struct cq__grant *cq__bf_head(cq_pool *p, int64_t now);
/* A waiter is being granted: count it if it was the head and its shadow
 * time has passed. */
void cq__bf_head_granted(cq_pool *p, const struct cq__grant *g, int64_t now);

/* ------------------------------------------------------------------------ */
/* Pool (pool.c)                                                             */
/* ------------------------------------------------------------------------ */

struct cq_pool {
  cq__mutex lock;
  cq_allocator alloc;
  unsigned flags;
  cq_clock_fn clock;
  void *clock_arg;
  void *data;
  _Atomic bool closed;

  /* Removed resources: requests may still point at them. */
  struct cq__res *graveyard;

  /* Resource table: slots may be NULL after a removal. */
  struct cq__res **res;
  uint32_t n_slots;
  uint32_t cap_slots;
  uint32_t next_uid;

  uint64_t next_seq;
  struct cq__grant *queue_head; /* every waiter, oldest first */
  struct cq__grant *queue_tail;
  uint64_t n_waiters;
  uint64_t n_held;         /* grants held that were made or adopted under the
                              lock; lock-free ones hold units, which the
                              destroy check sees */
  uint64_t waited_grants;  /* grants to requests that had waited */
  uint64_t wakeups;        /* blocked threads signalled */
  uint64_t events_dropped; /* events the hook fell behind for */

  /* Event hook and its ring of undelivered events (event.c). */
  cq_event_fn on_event;
  void *event_arg;
  cq_event *events;
  uint32_t ev_cap, ev_head, ev_count;
  bool ev_delivering;

  struct cq__res *dirty_head; /* resources freed since the last sweep */

  cq__rbtree deadlines; /* waiters with a finite deadline */

  /* Hold limits and backfill (backfill.c). */
  cq__rbtree limits;   /* holders with a limit not yet passed, by its end */
  uint64_t next_gseq;  /* grant order */
  uint64_t overdue;    /* grants that outlived their limit */
  uint64_t backfilled; /* grants made by backfill */
  uint64_t late_heads; /* heads granted after their shadow time */
  struct {
    uint64_t head_seq; /* the head waiter S is for; 0: none yet */
    int64_t S;         /* its sticky shadow time; CQ_NEVER: unknown */
    bool dirty;        /* S and the projection need computing */
    uint64_t epoch;    /* next_gseq when they were computed */
    uint64_t stamp;    /* marks the head's resources (cq__res.bf_mark) */
    bool kick;         /* waiters may have become backfillable */
    size_t candidates; /* waiters with a hold limit */
  } bf;

  /* Timer thread, started on the first callback waiter with a deadline. */
  pthread_t timer;
  pthread_cond_t timer_cond;
  bool timer_running;
  bool timer_stop;
  int64_t timer_wake_ms; /* deadline the timer thread sleeps towards */
};

/* Whether acquires and releases may skip the lock: not where an event hook
 * records them in order, nor where the backfill shadow time must see them. */
static inline bool cq__pool_lockfree(const cq_pool *p) {
  return p->on_event == NULL && !(p->flags & CQ_POOL_BACKFILL);
}

static inline int64_t cq__pool_now(const cq_pool *p) {
  return p->clock ? p->clock(p->clock_arg) : cq_now();
}

static inline uint8_t cq__gstate(const struct cq__grant *g) {
  return atomic_load_explicit(&g->state, memory_order_relaxed);
}
static inline void cq__gstate_set(struct cq__grant *g, uint8_t s) {
  atomic_store_explicit(&g->state, s, memory_order_relaxed);
}

/* malloc, realloc and free as a cq_allocator: the default everywhere. */
static inline void *cq__sys_alloc(size_t size, void *arg) {
  (void)arg;
  return malloc(size);
}
static inline void *cq__sys_realloc(void *ptr, size_t size, void *arg) {
  (void)arg;
  return realloc(ptr, size);
}
static inline void cq__sys_free(void *ptr, void *arg) {
  (void)arg;
  free(ptr);
}
static inline cq_allocator cq__sys_allocator(void) {
  cq_allocator a = {cq__sys_alloc, cq__sys_realloc, cq__sys_free, NULL};
  return a;
}

void *cq__alloc(const cq_pool *p, size_t size);
void *cq__realloc(const cq_pool *p, void *ptr, size_t size);
void cq__free(const cq_pool *p, void *ptr);

/* Copy a formatted message into a fixed buffer (truncating). */
void cq__msgf(char *buf, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Make sure the timer thread runs (lock held): 0 or CQ_ESYS. */
int cq__timer_ensure(cq_pool *p);
/* Wake the timer thread if `deadline_ms` is earlier than its target. */
void cq__timer_kick(cq_pool *p, int64_t deadline_ms);
/* Expire every waiter whose deadline is at or before `now`. */
void cq__expire_due(cq_pool *p, int64_t now, struct cq__ctx *ctx);

#endif /* CRONOQ_CQ_INTERNAL_H */
