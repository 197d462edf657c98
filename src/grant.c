/*
 * Grants through the API: the acquire styles (try, blocking, callback),
 * cancel, release, partial release, and what a held grant holds.
 *
 * Each call checks its arguments, takes the pool lock, asks the policy one
 * thing (policy.h), drops the lock and delivers what was decided (outbox.h).
 * Requests of budgets only are first tried without the lock, and their
 * grants released without it (the policy's lock-free clause).
 *
 * A call that needs a grant held or waiting in a pool, given a grant bound
 * to another pool of either kind or to none, is answered here the same way
 * for every kind of pool (check_bound()); a backend sees only its own
 * grants.
 *
 * Whoever makes a waiting grant leave that state tells its owner: a blocked
 * thread is unparked (util/parker.h; no broadcast, so a thread wakes only
 * for its own outcome, or when nudged to try again in its barging window),
 * a callback is queued and run after the lock is dropped.
 */
#include "pool.h"

#include "place.h"
#include "validate.h"

#include <string.h>

size_t cq_grant_size(void) { return sizeof(cq_grant); }

void cq_grant_init(cq_grant *grant) {
  if (grant != NULL)
    memset(grant->cq_private, 0, sizeof(grant->cq_private));
}

int cq_grant_is_held(const cq_grant *grant) {
  CQ__TO_BACKEND(cq__grant_pool(grant), grant_is_held, grant);
  return grant != NULL && cq__gstate(cq__grant_ofc(grant)) == CQ__G_HELD;
}

const char *cq_grant_error(const cq_grant *grant) {
  return grant != NULL ? cq__grant_ofc(grant)->msg : "";
}

/* Whether `grant` still waits or holds in the pool it is bound to, of
 * either kind: an acquire must then refuse it before writing anything.
 * A backend's pool is asked, even for an acquire on that same pool, whose
 * background work may be writing the grant. An in-process pool's grant
 * answers from its own state, without reaching the pool (which an idle
 * grant may have outlived). */
static bool busy(const cq_grant *grant) {
  const struct cq__grant *g = cq__grant_ofc(grant);
  uint8_t s = cq__gstate(g);
  if (s == CQ__G_REMOTE)
    return !g->pool->backend->grant_is_idle(grant);
  return s != CQ__G_IDLE;
}

/*
 * The state of `grant` where it is bound: an in-process grant's own; a
 * backend's grant's as its backend tells it (held when grant_is_held says
 * so, else idle when grant_is_idle does, else waiting); a grant bound to no
 * pool is idle.
 */
static uint8_t bound_state(const cq_grant *grant) {
  const struct cq__grant *g = cq__grant_ofc(grant);
  uint8_t s = cq__gstate(g);
  if (s != CQ__G_REMOTE)
    return s;
  const cq_backend_ops *b = g->pool->backend;
  return b->grant_is_held(grant)   ? CQ__G_HELD
         : b->grant_is_idle(grant) ? CQ__G_IDLE
                                   : CQ__G_WAITING;
}

/*
 * Whether a call on `pool` that needs `grant` in state `want` (held, or
 * waiting) may go on: 0 when the grant is bound to `pool` (a backend then
 * checks the state itself). Otherwise the answer every pool gives, of
 * either kind, without asking any but the grant's own backend: CQ_ESTATE
 * when the grant is not in `want` where it is bound, CQ_EPOOL when it is,
 * but in another pool. The state comes first: it is atomic, and an owner
 * starting a lock-free attempt writes g->pool without the lock, so a
 * racing cancel reads the pool only once the state shows it was set.
 */
static int check_bound(const cq_pool *pool, const cq_grant *grant,
                       uint8_t want) {
  const struct cq__grant *g = cq__grant_ofc(grant);
  if (cq__gstate(g) == CQ__G_REMOTE && g->pool == pool)
    return 0;
  if (bound_state(grant) != want)
    return CQ_ESTATE;
  return g->pool == pool ? 0 : CQ_EPOOL;
}

/* At the top of a call on a held or waiting grant: on a pool served by a
 * backend the call passes to it only with a grant bound to that pool
 * (cronoq_backend.h); any other grant is answered here, as every pool
 * answers it. */
#define TO_BACKEND_BOUND(pool, grant, want, op, ...)                           \
  do {                                                                         \
    if ((pool) != NULL && cq__pool_remote(pool)) {                             \
      int rc_ = check_bound((pool), (grant), (want));                          \
      return rc_ != 0 ? rc_ : (pool)->backend->op(__VA_ARGS__);                \
    }                                                                          \
  } while (0)

/* Bind `grant` to a pool served by a backend, as cronoq_backend.h says:
 * the header names the pool, the message is empty. 0, or why not. */
static int bind_remote(cq_pool *pool, cq_grant *grant, const cq_req *req) {
  if (grant == NULL || req == NULL)
    return CQ_EINVAL;
  /* In the order of the checks of every acquire (check_attempt()). */
  cq_pool *req_pool = cq__req_pool(req);
  if (req_pool == NULL)
    return CQ_EINVAL; /* not an initialised request */
  if (req_pool != pool)
    return CQ_EPOOL;
  if (busy(grant))
    return CQ_ESTATE;
  struct cq__grant *g = cq__grant_of(grant);
  /* Bound again to the same pool, the header is left as it is: a cancel
   * may be reading it (check_bound()). */
  if (g->pool != pool)
    g->pool = pool;
  g->msg[0] = '\0';
  if (cq__gstate(g) != CQ__G_REMOTE)
    cq__gstate_set(g, CQ__G_REMOTE);
  return 0;
}

/* Argument checks shared by the acquire calls. */
static int check_attempt(cq_pool *pool, cq_grant *grant, const cq_req *req,
                         struct cq__grant **g, const struct cq__req **r) {
  if (pool == NULL || grant == NULL || req == NULL)
    return CQ_EINVAL;
  *r = cq__req_ofc(req);
  if ((*r)->magic != CQ__REQ_MAGIC)
    return CQ_EINVAL;
  if ((*r)->pool != pool)
    return CQ_EPOOL;
  *g = cq__grant_of(grant);
  if (busy(grant))
    return CQ_ESTATE;
  return 0;
}

/*
 * Start an attempt. First without the lock, for requests of budgets only;
 * then under the lock, checking the pool and the request as they are now.
 * Returns 1 when granted without the lock (nothing else to do), 0 when the
 * lock is held and the grant is bound to a fresh, undecided attempt, or an
 * error with the lock released and `o` flushed. What the policy decided
 * along the way goes into `o`.
 */
static int attempt_begin(cq_pool *pool, cq_grant *grant, const cq_req *req,
                         struct cq__grant **out, struct cq__outbox *o) {
  struct cq__grant *g;
  const struct cq__req *r;
  int rc = check_attempt(pool, grant, req, &g, &r);
  if (rc != 0)
    return rc;
  *out = g;
  int taken = 0;
  uint32_t uncounted = 0;
  /* With an event hook every acquire takes the lock, where events are
   * ordered; with backfill too, where the shadow time sees every grant;
   * and once a sleeper's barging window has passed, where it ends. */
  if ((r->flags & CQ__REQ_LOCKFREE) && cq__pool_lockfree(pool) &&
      cq__pool_fast_open(pool)) {
    taken = cq__policy_fast_acquire(g, r, &uncounted);
    if (taken == 1) {
      g->pool = pool;
      g->req = NULL;
      g->status = 0;
      g->msg[0] = '\0';
      cq__gstate_set(g, CQ__G_HELD);
      return 1;
    }
  }
  cq__mutex_lock(&pool->lock);
  if (taken < 0 || uncounted != 0)
    cq__policy_fast_failed(pool, r, uncounted, taken < 0, o);
  g->msg[0] = '\0'; /* this attempt's detail, not an earlier one's */
  if (atomic_load_explicit(&pool->closed, memory_order_relaxed))
    rc = CQ_ECLOSED;
  else
    rc = cq__validate(r, g->msg);
  /* A grant with a hold limit needs the timer that marks it overdue. */
  if (rc == 0 && r->limit_ms > 0 && !(pool->flags & CQ_POOL_MANUAL_TIMERS))
    rc = cq__timer_ensure(&pool->timer);
  if (rc != 0) {
    CQ__POLICY_CHECK(pool);
    cq__mutex_unlock(&pool->lock);
    cq__outbox_flush(o);
    return rc;
  }
  cq__policy_bind(pool, g, r);
  cq__gstate_set(g, CQ__G_IDLE); /* no longer a backend's, if it was */
  return 0;
}

/* End an operation begun under the lock: drop the lock, deliver. */
static int finish(cq_pool *pool, struct cq__outbox *o, int rc) {
  CQ__POLICY_CHECK(pool);
  cq__mutex_unlock(&pool->lock);
  cq__outbox_flush(o);
  return rc;
}

int cq_grant_try(cq_pool *pool, cq_grant *grant, const cq_req *req) {
  if (pool != NULL && cq__pool_remote(pool)) {
    int rc = bind_remote(pool, grant, req);
    return rc != 0 ? rc : pool->backend->grant_try(pool, grant, req);
  }
  struct cq__grant *g;
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  int rc = attempt_begin(pool, grant, req, &g, &o);
  if (rc != 0)
    return rc == 1 ? 0 : rc;
  return finish(pool, &o, cq__policy_arrive(pool, g, &o) ? 0 : CQ_EBUSY);
}

/* Tests (cq__grant_hold_woken): a blocked thread just woken waits here,
 * before it takes the pool's lock, while the flag is set, as a thread the
 * scheduler is slow to run would (bounded). */
extern _Atomic int cq__grant_hold_woken;
static void hold_woken(cq__parker *park) {
  for (int i = 0; i < 30000 && atomic_load_explicit(&cq__grant_hold_woken,
                                                    memory_order_relaxed) != 0;
       i++)
    (void)cq__parker_park(park, cq_now() + 1);
}

int cq_grant_acquire(cq_pool *pool, cq_grant *grant, const cq_req *req,
                     int64_t deadline_ms) {
  if (pool != NULL && cq__pool_remote(pool)) {
    int rc = bind_remote(pool, grant, req);
    return rc != 0
               ? rc
               : pool->backend->grant_acquire(pool, grant, req, deadline_ms);
  }
  struct cq__grant *g;
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  int rc = attempt_begin(pool, grant, req, &g, &o);
  if (rc != 0)
    return rc == 1 ? 0 : rc;
  if (cq__policy_arrive(pool, g, &o))
    return finish(pool, &o, 0);
  if (deadline_ms != CQ_NEVER && cq__pool_now(pool) >= deadline_ms)
    return finish(pool, &o, CQ_ETIMEDOUT);

  cq__parker *park = cq__parker_self();
  if (park == NULL)
    return finish(pool, &o, CQ_ENOMEM);
  bool self_timed = !(pool->flags & CQ_POOL_MANUAL_TIMERS);
  g->style = CQ__STYLE_BLOCKING;
  g->park = park;
  atomic_store_explicit(&g->posted, 0, memory_order_relaxed);
  int64_t window_end = CQ_NEVER;
  if (pool->q.barge_ms > 0) {
    cq__policy_sleep(pool, g, deadline_ms, &o);
    if (!cq__policy_asleep(g, &window_end))
      window_end = CQ_NEVER;
  } else {
    cq__policy_enqueue(pool, g, deadline_ms, &o);
  }
  CQ__POLICY_CHECK(pool);
  cq__mutex_unlock(&pool->lock);
  cq__outbox_flush(&o); /* this very thread, if it fit after all */
  cq__outbox_init(&o, pool);

  /* One post per attempt, by whoever decides its outcome. Until then the
   * thread wakes when nudged to try again, and by itself at its deadline
   * and at the end of its barging window. */
  while (!atomic_load_explicit(&g->posted, memory_order_acquire)) {
    int64_t until = CQ_NEVER;
    if (self_timed)
      until = deadline_ms < window_end ? deadline_ms : window_end;
    (void)cq__parker_park(park, until);
    hold_woken(park);
    if (atomic_load_explicit(&g->posted, memory_order_acquire))
      break;
    cq__mutex_lock(&pool->lock);
    if (cq__gstate(g) == CQ__G_WAITING) {
      if (self_timed && deadline_ms != CQ_NEVER && cq_now() >= deadline_ms)
        cq__policy_leave(pool, g, CQ_ETIMEDOUT, &o);
      else
        cq__policy_woken(pool, g, &o);
      if (cq__gstate(g) != CQ__G_WAITING || !cq__policy_asleep(g, &window_end))
        window_end = CQ_NEVER;
    }
    CQ__POLICY_CHECK(pool);
    cq__mutex_unlock(&pool->lock);
    /* This thread, if decided, and whoever its turn granted: their
     * callbacks run now, not once this thread's own wait is over. */
    cq__outbox_flush(&o);
    cq__outbox_init(&o, pool);
  }
  rc = cq__gstate(g) == CQ__G_HELD ? 0 : g->status;
  cq__outbox_flush(&o);
  return rc;
}

_Atomic int cq__grant_hold_woken;

int cq_grant_submit(cq_pool *pool, cq_grant *grant, const cq_req *req,
                    int64_t deadline_ms, cq_grant_cb cb) {
  if (cb == NULL)
    return CQ_EINVAL;
  if (pool != NULL && cq__pool_remote(pool)) {
    int rc = bind_remote(pool, grant, req);
    return rc != 0
               ? rc
               : pool->backend->grant_submit(pool, grant, req, deadline_ms, cb);
  }
  struct cq__grant *g;
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  int rc = attempt_begin(pool, grant, req, &g, &o);
  if (rc < 0)
    return rc; /* refused: the callback will not run */
  g->cb = cb;
  g->style = CQ__STYLE_CALLBACK;
  if (rc == 1) { /* granted without the lock */
    cq__outbox_call(&o, g);
    cq__outbox_flush(&o);
    return 0;
  }
  if (cq__policy_arrive(pool, g, &o)) {
    g->status = 0;
    cq__outbox_call(&o, g);
  } else if (deadline_ms != CQ_NEVER && cq__pool_now(pool) >= deadline_ms) {
    g->status = CQ_ETIMEDOUT;
    cq__outbox_call(&o, g);
  } else if (deadline_ms == CQ_NEVER || (pool->flags & CQ_POOL_MANUAL_TIMERS) ||
             (rc = cq__timer_ensure(&pool->timer)) == 0) {
    cq__policy_enqueue(pool, g, deadline_ms, &o);
    if (deadline_ms != CQ_NEVER)
      cq__timer_kick(&pool->timer, deadline_ms);
  }
  return finish(pool, &o, rc);
}

/*
 * Lock in-process `pool` and check that `g` is bound to it and in `state`
 * (check_bound()). On success the lock stays held.
 */
static int lock_grant(cq_pool *pool, cq_grant *grant, uint8_t state,
                      struct cq__grant **out) {
  if (pool == NULL || grant == NULL)
    return CQ_EINVAL;
  struct cq__grant *g = cq__grant_of(grant);
  /* A backend's grant is never an in-process pool's: its backend is asked
   * its state, for the answer an in-process pool gives, without this
   * pool's lock. */
  if (cq__gstate(g) == CQ__G_REMOTE) {
    int rc = check_bound(pool, grant, state);
    return rc != 0 ? rc : CQ_EPOOL;
  }
  cq__mutex_lock(&pool->lock);
  int rc = check_bound(pool, grant, state);
  if (rc != 0) {
    cq__mutex_unlock(&pool->lock);
    return rc;
  }
  *out = g;
  return 0;
}

int cq_grant_abort(cq_pool *pool, cq_grant *grant, int status) {
  if (status != CQ_ECANCELED && status != CQ_ETIMEDOUT && status != CQ_ECLOSED)
    return CQ_EINVAL;
  if (grant != NULL)
    TO_BACKEND_BOUND(pool, grant, CQ__G_WAITING, grant_abort, pool, grant,
                     status);
  struct cq__grant *g;
  int rc = lock_grant(pool, grant, CQ__G_WAITING, &g);
  if (rc != 0)
    return rc;
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  cq__policy_leave(pool, g, status, &o);
  return finish(pool, &o, 0);
}

int cq_grant_cancel(cq_pool *pool, cq_grant *grant) {
  return cq_grant_abort(pool, grant, CQ_ECANCELED);
}

int cq_grant_release(cq_pool *pool, cq_grant *grant) {
  if (pool == NULL || grant == NULL)
    return CQ_EINVAL;
  TO_BACKEND_BOUND(pool, grant, CQ__G_HELD, grant_release, pool, grant);
  struct cq__grant *g = cq__grant_of(grant);
  struct cq__outbox o;
  if (g->lockfree && g->pool == pool && cq__gstate(g) == CQ__G_HELD) {
    /* The holder owns its grant: give the units back without the lock, and
     * take the lock only if a waiter claims one of the budgets. */
    cq__gstate_set(g, CQ__G_IDLE);
    if (!cq__policy_fast_release(g))
      return 0;
    cq__outbox_init(&o, pool);
    cq__mutex_lock(&pool->lock);
    cq__policy_fast_released(pool, g, &o);
    return finish(pool, &o, 0);
  }
  int rc = lock_grant(pool, grant, CQ__G_HELD, &g);
  if (rc != 0)
    return rc;
  cq__outbox_init(&o, pool);
  cq__policy_release(pool, g, &o);
  return finish(pool, &o, 0);
}

/* The item of held grant g on resource `name`, or -1. Lock held. */
static int held_item(cq_pool *p, const struct cq__grant *g, const char *name) {
  struct cq__res *r = cq__res_find(&p->tab, name);
  if (r == NULL)
    return -1;
  for (unsigned i = 0; i < g->n_items; i++)
    if (g->it[i].res == r)
      return (int)i;
  return -1;
}

int cq_grant_release_part(cq_pool *pool, cq_grant *grant, const char *resource,
                          int64_t amount) {
  if (resource == NULL || grant == NULL)
    return CQ_EINVAL;
  TO_BACKEND_BOUND(pool, grant, CQ__G_HELD, grant_release_part, pool, grant,
                   resource, amount);
  struct cq__grant *g;
  int rc = lock_grant(pool, grant, CQ__G_HELD, &g);
  if (rc != 0)
    return rc;
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  int i = held_item(pool, g, resource);
  if (i < 0)
    rc = CQ_ENOENT;
  else if (g->it[i].res->kind == CQ__RES_DEVICES)
    rc = CQ_EINVAL; /* devices: cq_grant_release_device() */
  else if (amount <= 0 || amount > g->it[i].u.hold.held)
    rc = CQ_ERANGE;
  else
    cq__policy_give_back(pool, g, (unsigned)i, amount, &o);
  return finish(pool, &o, rc);
}

int64_t cq_grant_held(const cq_grant *grant, const char *resource) {
  if (grant == NULL || resource == NULL)
    return 0;
  CQ__TO_BACKEND(cq__grant_pool(grant), grant_held, grant, resource);
  const struct cq__grant *g = cq__grant_ofc(grant);
  if (cq__gstate(g) != CQ__G_HELD || g->n_items == 0)
    return 0;
  cq_pool *p = g->pool;
  cq__mutex_lock(&p->lock);
  int i = held_item(p, g, resource);
  int64_t held = i < 0 ? 0 : g->it[i].u.hold.held;
  cq__mutex_unlock(&p->lock);
  return held;
}

/* The item of held grant g on device pool `name` (NULL: the first device
 * pool it names), or -1. Lock held. */
static int device_item(cq_pool *p, const struct cq__grant *g,
                       const char *name) {
  if (name != NULL) {
    int i = held_item(p, g, name);
    return i >= 0 && g->it[i].res->kind == CQ__RES_DEVICES ? i : -1;
  }
  for (unsigned i = 0; i < g->n_items; i++)
    if (g->it[i].res->kind == CQ__RES_DEVICES)
      return (int)i;
  return -1;
}

/* Call `fn` for each device item i of held grant g holds, in index order. */
static size_t each_device(const struct cq__grant *g, unsigned i,
                          void (*fn)(const struct cq__dev *d, void *arg),
                          void *arg) {
  const struct cq__gitem *it = &g->it[i];
  const struct cq__res *r = it->res;
  size_t n = 0;
  if (it->mode == CQ__MODE_FRACTION) {
    if (it->u.hold.held > 0) {
      fn(&r->devs[it->u.hold.dev], arg);
      n++;
    }
    return n;
  }
  for (int32_t d = it->u.hold.dev; d >= 0; d = r->devs[d].whole_next) {
    fn(&r->devs[d], arg);
    n++;
  }
  return n;
}

struct index_out {
  uint32_t *indices;
  size_t cap, n;
};

static void put_index(const struct cq__dev *d, void *arg) {
  struct index_out *o = arg;
  if (o->n < o->cap)
    o->indices[o->n] = d->index;
  o->n++;
}

size_t cq_grant_devices(const cq_grant *grant, const char *resource,
                        uint32_t *indices, size_t cap) {
  if (grant == NULL || (indices == NULL && cap > 0))
    return 0;
  CQ__TO_BACKEND(cq__grant_pool(grant), grant_devices, grant, resource, indices,
                 cap);
  const struct cq__grant *g = cq__grant_ofc(grant);
  if (cq__gstate(g) != CQ__G_HELD || g->n_items == 0)
    return 0;
  cq_pool *p = g->pool;
  struct index_out o = {indices, cap, 0};
  cq__mutex_lock(&p->lock);
  int i = device_item(p, g, resource);
  if (i >= 0)
    each_device(g, (unsigned)i, put_index, &o);
  cq__mutex_unlock(&p->lock);
  return o.n;
}

struct id_out {
  char *buf;
  size_t len, used;
  bool overflow;
};

static void put_id(const struct cq__dev *d, void *arg) {
  struct id_out *o = arg;
  size_t need = strlen(d->id) + (o->used > 0 ? 1 : 0);
  if (o->overflow || o->used + need + 1 > o->len) {
    o->overflow = true;
    return;
  }
  if (o->used > 0)
    o->buf[o->used++] = ',';
  memcpy(o->buf + o->used, d->id, strlen(d->id) + 1);
  o->used += strlen(d->id);
}

int cq_grant_cuda_visible(const cq_grant *grant, const char *resource,
                          char *buf, size_t len) {
  if (grant == NULL || buf == NULL || len == 0)
    return CQ_EINVAL;
  CQ__TO_BACKEND(cq__grant_pool(grant), grant_cuda_visible, grant, resource,
                 buf, len);
  buf[0] = '\0';
  const struct cq__grant *g = cq__grant_ofc(grant);
  if (cq__gstate(g) != CQ__G_HELD || g->n_items == 0)
    return CQ_ENOENT;
  cq_pool *p = g->pool;
  struct id_out o = {buf, len, 0, false};
  cq__mutex_lock(&p->lock);
  int i = device_item(p, g, resource);
  size_t n = i >= 0 ? each_device(g, (unsigned)i, put_id, &o) : 0;
  cq__mutex_unlock(&p->lock);
  if (n == 0)
    return CQ_ENOENT;
  if (o.overflow) {
    buf[0] = '\0';
    return CQ_ERANGE;
  }
  return 0;
}

/* Whether device `index` is one of the whole devices item `it` holds. */
static bool holds_whole(const struct cq__gitem *it, uint32_t index) {
  for (int32_t k = it->u.hold.dev; k >= 0; k = it->res->devs[k].whole_next)
    if ((uint32_t)k == index)
      return true;
  return false;
}

int cq_grant_release_device(cq_pool *pool, cq_grant *grant,
                            const char *resource, uint32_t index,
                            int64_t milli) {
  if (resource == NULL || grant == NULL)
    return CQ_EINVAL;
  TO_BACKEND_BOUND(pool, grant, CQ__G_HELD, grant_release_device, pool, grant,
                   resource, index, milli);
  struct cq__grant *g;
  int rc = lock_grant(pool, grant, CQ__G_HELD, &g);
  if (rc != 0)
    return rc;
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  int i = device_item(pool, g, resource);
  struct cq__gitem *it = i >= 0 ? &g->it[i] : NULL;
  if (it == NULL || index >= it->res->n_devs)
    rc = CQ_ENOENT;
  else if (it->mode == CQ__MODE_FRACTION)
    rc = (uint32_t)it->u.hold.dev != index || it->u.hold.held == 0 ? CQ_ENOENT
         : milli <= 0 || milli > it->u.hold.held                   ? CQ_ERANGE
                                                                   : 0;
  else
    rc = !holds_whole(it, index)    ? CQ_ENOENT
         : milli != CQ_DEVICE_MILLI ? CQ_ERANGE
                                    : 0;
  if (rc == 0)
    cq__policy_give_back_device(pool, g, (unsigned)i, index, milli, &o);
  return finish(pool, &o, rc);
}
