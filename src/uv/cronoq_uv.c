/*
 * The libuv adapter: a core callback acquire whose outcome is carried to
 * the loop's thread.
 *
 * Every request the adapter submitted and whose outcome it has not
 * delivered yet is "pending": it is on the adapter's pending list (loop
 * thread only) and, with a deadline, in its deadline heap. The core calls
 * `on_outcome` exactly once per request, on whichever thread decided it. On
 * the loop's thread the outcome is delivered at once; on another thread it
 * is pushed onto a mutex-guarded queue and the loop is woken with
 * uv_async_send(), whose wake-ups coalesce: the async callback drains the
 * whole queue.
 *
 * Deadlines are the adapter's own, in a heap (uvheap.h): the core waits
 * without limit, and one uv timer, set to the earliest pending deadline,
 * ends late requests with cq_grant_abort(CQ_ETIMEDOUT). libuv's clock is
 * cached per loop iteration, so the timer can fire a little early by
 * cq_now(); then it is set again.
 *
 * Only the public headers are used here (the build keeps src/ off this
 * library's include path): the adapter is a client of the core like any
 * other.
 *
 * Closing aborts every request still waiting (CQ_ECLOSED); requests already
 * granted but not yet delivered (their outcome is on its way from another
 * thread) are waited for, released, and reported closed too. Only then, and
 * once no other thread is still inside uv_async_send() (`senders`), are the
 * handles closed, so no thread can touch them afterwards. The queue's lock
 * is held only to link an outcome in, never across the send, so the loop
 * rarely waits for it.
 */
#include <cronoq/cronoq.h>
#include <cronoq/cronoq_uv.h>

#include "uvheap.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The struct that holds member `field` at `ptr`. */
#define CONTAINER_OF(ptr, type, field)                                         \
  ((type *)(void *)((char *)(ptr)-offsetof(type, field)))

enum { REQ_IDLE = 0, REQ_PENDING = 1 };

struct uvreq {
  /* Kept apart: a grant may outlive its adapter. Atomic, since a cancel
   * from another thread may read it while the loop binds the req to a new
   * attempt; never cleared once an attempt with it was accepted. First: the
   * fields after it are the loop thread's alone (see cq_uv_acquire()). */
  _Atomic(cq_pool *) pool;
  cq_uv *uv;
  cq_uv_cb cb;
  int64_t deadline; /* CQ_NEVER: none */
  uint64_t seq;     /* orders equal deadlines */
  int status;       /* the core's outcome, once known */
  uint8_t state;
  bool timed;                /* in the deadline heap */
  bool abort_tried;          /* closing: abort already attempted */
  struct uvreq *prev, *next; /* pending list */
  struct uvreq *qnext;       /* outcome queue from other threads */
  cq__uvheap_node dnode;     /* deadline heap */
};

_Static_assert(sizeof(struct uvreq) <= sizeof(((cq_uv_req *)0)->cq_private),
               "cq_uv_req storage too small");
_Static_assert(_Alignof(struct uvreq) <= _Alignof(uint64_t),
               "cq_uv_req storage misaligned");

struct cq_uv {
  uv_loop_t *loop;
  cq_pool *pool;
  cq_allocator alloc;
  void *data;
  uv_thread_t loop_thread;
  uv_async_t async;
  uv_timer_t timer;
  uv_idle_t close_retry; /* closing, while a sender is still sending */
  _Atomic int senders;   /* threads between queueing and sending */
  uv_mutex_t qlock;
  struct uvreq *qhead, **qtail; /* outcomes from other threads */
  struct uvreq *pending;        /* submitted, outcome not delivered */
  cq__uvheap deadlines;
  uint64_t next_seq;
  bool closing;         /* no new acquires; pending ones are being failed */
  bool handles_closing; /* uv_close() called on both handles */
  int open_handles;
  cq_uv_close_cb close_cb;
};

static struct uvreq *req_of(cq_uv_req *r) {
  return (struct uvreq *)(void *)r->cq_private;
}

static cq_uv_req *pub_of(struct uvreq *u) {
  return CONTAINER_OF(u, cq_uv_req, cq_private);
}

static bool on_loop_thread(const cq_uv *uv) {
  uv_thread_t self = uv_thread_self();
  return uv_thread_equal(&self, &uv->loop_thread) != 0;
}

/* Earlier deadline first; among equal ones, the earlier acquire. */
static int deadline_less(const cq__uvheap_node *a, const cq__uvheap_node *b) {
  const struct uvreq *x = CONTAINER_OF(a, struct uvreq, dnode);
  const struct uvreq *y = CONTAINER_OF(b, struct uvreq, dnode);
  if (x->deadline != y->deadline)
    return x->deadline < y->deadline;
  return x->seq < y->seq;
}

static void pending_unlink(cq_uv *uv, struct uvreq *u) {
  if (u->prev != NULL)
    u->prev->next = u->next;
  else
    uv->pending = u->next;
  if (u->next != NULL)
    u->next->prev = u->prev;
  u->prev = u->next = NULL;
  if (u->timed) {
    cq__uvheap_remove(&uv->deadlines, &u->dnode);
    u->timed = false;
  }
}

static void timer_cb(uv_timer_t *t);
static void maybe_finish_close(cq_uv *uv);

/* Set the timer to the earliest pending deadline, or stop it. */
static void arm_timer(cq_uv *uv) {
  cq__uvheap_node *n = cq__uvheap_min(&uv->deadlines);
  if (n == NULL || uv->closing) {
    (void)uv_timer_stop(&uv->timer);
    return;
  }
  int64_t due = CONTAINER_OF(n, struct uvreq, dnode)->deadline;
  int64_t wait = due - cq_now();
  (void)uv_timer_start(&uv->timer, timer_cb, wait > 0 ? (uint64_t)wait : 0, 0);
}

/* Hand a request its outcome, on the loop's thread. */
static void deliver(cq_uv *uv, struct uvreq *u) {
  bool was_first = u->timed && cq__uvheap_min(&uv->deadlines) == &u->dnode;
  pending_unlink(uv, u);
  int status = u->status;
  if (uv->closing && status == 0) {
    /* Granted on another thread just as the adapter closed. */
    (void)cq_grant_release(uv->pool, &pub_of(u)->grant);
    status = CQ_ECLOSED;
  }
  u->state = REQ_IDLE;
  if (was_first)
    arm_timer(uv);
  u->cb(pub_of(u), status); /* may acquire again, release, close */
  maybe_finish_close(uv);
}

/* The core's callback: any thread, no lock held. */
static void on_outcome(cq_grant *grant, int status) {
  cq_uv_req *r = CONTAINER_OF(grant, cq_uv_req, grant);
  struct uvreq *u = req_of(r);
  cq_uv *uv = u->uv;
  u->status = status;
  if (on_loop_thread(uv)) {
    deliver(uv, u);
    return;
  }
  /* Counted as a sender from before the outcome is visible until after the
   * send: closing waits for the count to drop to 0. */
  atomic_fetch_add_explicit(&uv->senders, 1, memory_order_acq_rel);
  uv_mutex_lock(&uv->qlock);
  u->qnext = NULL;
  *uv->qtail = u;
  uv->qtail = &u->qnext;
  uv_mutex_unlock(&uv->qlock);
  (void)uv_async_send(&uv->async);
  atomic_fetch_sub_explicit(&uv->senders, 1, memory_order_acq_rel);
}

static void async_cb(uv_async_t *a) {
  cq_uv *uv = a->data;
  uv_mutex_lock(&uv->qlock);
  struct uvreq *list = uv->qhead;
  uv->qhead = NULL;
  uv->qtail = &uv->qhead;
  uv_mutex_unlock(&uv->qlock);
  while (list != NULL) {
    struct uvreq *u = list;
    list = u->qnext;
    deliver(uv, u);
  }
}

static void timer_cb(uv_timer_t *t) {
  cq_uv *uv = t->data;
  int64_t now = cq_now();
  cq__uvheap_node *n;
  while ((n = cq__uvheap_min(&uv->deadlines)) != NULL) {
    struct uvreq *u = CONTAINER_OF(n, struct uvreq, dnode);
    if (u->deadline > now)
      break; /* libuv's cached clock woke us early: wait for the rest */
    cq__uvheap_remove(&uv->deadlines, &u->dnode);
    u->timed = false;
    /* Delivered from within this call unless the outcome is already on
     * its way from another thread. */
    (void)cq_grant_abort(uv->pool, &pub_of(u)->grant, CQ_ETIMEDOUT);
  }
  arm_timer(uv);
}

static void handle_closed(uv_handle_t *h) {
  cq_uv *uv = h->data;
  if (--uv->open_handles > 0)
    return;
  if (uv->close_cb != NULL)
    uv->close_cb(uv);
  uv_mutex_destroy(&uv->qlock);
  uv->alloc.free(uv, uv->alloc.arg);
}

static void close_retry_cb(uv_idle_t *h) { maybe_finish_close(h->data); }

/* Once closing and nothing is pending, no outcome can arrive any more:
 * close the handles, as soon as the last sender has left uv_async_send(). */
static void maybe_finish_close(cq_uv *uv) {
  if (!uv->closing || uv->pending != NULL || uv->handles_closing)
    return;
  if (atomic_load_explicit(&uv->senders, memory_order_acquire) != 0) {
    (void)uv_idle_start(&uv->close_retry, close_retry_cb);
    return;
  }
  uv->handles_closing = true;
  uv_close((uv_handle_t *)&uv->timer, handle_closed);
  uv_close((uv_handle_t *)&uv->async, handle_closed);
  uv_close((uv_handle_t *)&uv->close_retry, handle_closed);
}

static void *sys_alloc(size_t size, void *arg) {
  (void)arg;
  return malloc(size);
}

static void *sys_realloc(void *ptr, size_t size, void *arg) {
  (void)arg;
  return realloc(ptr, size);
}

static void sys_free(void *ptr, void *arg) {
  (void)arg;
  free(ptr);
}

int cq_uv_init(cq_uv **out, uv_loop_t *loop, cq_pool *pool,
               const cq_allocator *alloc) {
  if (out == NULL || loop == NULL || pool == NULL)
    return CQ_EINVAL;
  cq_allocator a = {sys_alloc, sys_realloc, sys_free, NULL};
  if (alloc != NULL) {
    if (alloc->alloc == NULL || alloc->realloc == NULL || alloc->free == NULL)
      return CQ_EINVAL;
    a = *alloc;
  }
  cq_uv *uv = a.alloc(sizeof(*uv), a.arg);
  if (uv == NULL)
    return CQ_ENOMEM;
  memset(uv, 0, sizeof(*uv));
  uv->loop = loop;
  uv->pool = pool;
  uv->alloc = a;
  uv->loop_thread = uv_thread_self();
  uv->qtail = &uv->qhead;
  cq__uvheap_init(&uv->deadlines, deadline_less);
  if (uv_mutex_init(&uv->qlock) != 0) {
    a.free(uv, a.arg);
    return CQ_ESYS;
  }
  if (uv_async_init(loop, &uv->async, async_cb) != 0) {
    uv_mutex_destroy(&uv->qlock);
    a.free(uv, a.arg);
    return CQ_ESYS;
  }
  uv->async.data = uv;
  if (uv_timer_init(loop, &uv->timer) != 0) {
    /* The async handle must be closed through the loop, which frees the
     * adapter when it runs. */
    uv->closing = uv->handles_closing = true;
    uv->open_handles = 1;
    uv_close((uv_handle_t *)&uv->async, handle_closed);
    return CQ_ESYS;
  }
  uv->timer.data = uv;
  if (uv_idle_init(loop, &uv->close_retry) != 0) {
    uv->closing = uv->handles_closing = true;
    uv->open_handles = 2;
    uv_close((uv_handle_t *)&uv->async, handle_closed);
    uv_close((uv_handle_t *)&uv->timer, handle_closed);
    return CQ_ESYS;
  }
  uv->close_retry.data = uv;
  uv->open_handles = 3;
  *out = uv;
  return 0;
}

void cq_uv_req_init(cq_uv_req *req) {
  if (req == NULL)
    return;
  memset(req->cq_private, 0, sizeof(req->cq_private));
  cq_grant_init(&req->grant);
}

/* `pool` is written only when it changes: see there. */
static void req_bind_pool(struct uvreq *u, cq_pool *pool) {
  if (atomic_load_explicit(&u->pool, memory_order_relaxed) != pool)
    atomic_store_explicit(&u->pool, pool, memory_order_relaxed);
}

int cq_uv_acquire(cq_uv *uv, cq_uv_req *req, const cq_req *request,
                  int64_t deadline_ms, cq_uv_cb cb) {
  if (uv == NULL || req == NULL || request == NULL || cb == NULL)
    return CQ_EINVAL;
  if (uv->closing)
    return CQ_ECLOSED;
  struct uvreq *u = req_of(req);
  /* Pending on this adapter or on another one: the req is theirs until its
   * callback has run, and is not touched. */
  if (u->state == REQ_PENDING)
    return CQ_ESTATE;
  /* Kept to be put back should the core refuse the attempt: a refused call
   * changes nothing, not even a finished req's binding to its pool. */
  struct uvreq was;
  memcpy(&was, u, sizeof(was));
  req_bind_pool(u, uv->pool);
  u->uv = uv;
  u->cb = cb;
  u->deadline = deadline_ms;
  u->seq = uv->next_seq++;
  u->status = 0;
  u->state = REQ_PENDING;
  u->timed = false;
  u->abort_tried = false;
  u->prev = u->next = u->qnext = NULL;
  memset(&u->dnode, 0, sizeof(u->dnode));
  /* On the pending list first: the outcome may come before submit returns. */
  u->next = uv->pending;
  if (uv->pending != NULL)
    uv->pending->prev = u;
  uv->pending = u;

  /* The core times out only a deadline already past (one attempt); later
   * deadlines are the uv timer's. */
  bool past = deadline_ms != CQ_NEVER && deadline_ms <= cq_now();
  uint64_t seq = u->seq;
  int rc = cq_grant_submit(uv->pool, &req->grant, request,
                           past ? deadline_ms : CQ_NEVER, on_outcome);
  if (rc != 0) {
    /* The callback has not run, so the req is still first on the list. */
    pending_unlink(uv, u);
    uv->next_seq--;
    size_t from = offsetof(struct uvreq, uv);
    memcpy((char *)u + from, (const char *)&was + from, sizeof(was) - from);
    req_bind_pool(u, atomic_load_explicit(&was.pool, memory_order_relaxed));
    return rc;
  }
  /* Still this attempt, still pending? (Its callback may have run already,
   * and may even have started a new attempt with the same req.) */
  bool mine = u->seq == seq && u->state == REQ_PENDING;
  if (mine && deadline_ms != CQ_NEVER && !past) {
    cq__uvheap_insert(&uv->deadlines, &u->dnode);
    u->timed = true;
    if (cq__uvheap_min(&uv->deadlines) == &u->dnode)
      arm_timer(uv); /* the earliest now */
  }
  return 0;
}

/* Both go through the pool the req was acquired from, never through the
 * adapter: a holder may release after the adapter closed and was freed. */
static cq_pool *req_pool(cq_uv_req *req) {
  return req == NULL
             ? NULL
             : atomic_load_explicit(&req_of(req)->pool, memory_order_relaxed);
}

int cq_uv_cancel(cq_uv_req *req) {
  cq_pool *pool = req_pool(req);
  return pool == NULL ? CQ_EINVAL : cq_grant_cancel(pool, &req->grant);
}

int cq_uv_release(cq_uv_req *req) {
  cq_pool *pool = req_pool(req);
  return pool == NULL ? CQ_EINVAL : cq_grant_release(pool, &req->grant);
}

int cq_uv_close(cq_uv *uv, cq_uv_close_cb cb) {
  if (uv == NULL)
    return CQ_EINVAL;
  if (uv->closing)
    return CQ_ECLOSED;
  uv->closing = true;
  uv->close_cb = cb;
  (void)uv_timer_stop(&uv->timer);
  /* Abort each request still waiting; its callback runs from within the
   * abort. Callbacks may cancel or release others, so look again from the
   * start after each one. Requests whose outcome is already on its way
   * from another thread refuse the abort; the async callback delivers them
   * (closed) before the close completes. */
  for (;;) {
    struct uvreq *u = uv->pending;
    while (u != NULL && u->abort_tried)
      u = u->next;
    if (u == NULL)
      break;
    u->abort_tried = true;
    (void)cq_grant_abort(uv->pool, &pub_of(u)->grant, CQ_ECLOSED);
  }
  maybe_finish_close(uv);
  return 0;
}

cq_pool *cq_uv_pool(const cq_uv *uv) { return uv != NULL ? uv->pool : NULL; }

uv_loop_t *cq_uv_loop(const cq_uv *uv) { return uv != NULL ? uv->loop : NULL; }

void **cq_uv_data(cq_uv *uv) { return uv != NULL ? &uv->data : NULL; }
