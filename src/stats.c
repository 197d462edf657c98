/*
 * Snapshots: of the pool, of each resource, of each device, and of all of
 * them at one moment for the Prometheus exposition (which text/metrics.c
 * formats).
 *
 * Each figure is taken in one place: pool_snapshot(), res_snapshot(),
 * dev_snapshot(). Every snapshot is taken under the pool lock, with each
 * usage word read once, so that the figures of one resource (and of a whole
 * pool snapshot) agree with each other. Formatting and writing happen after
 * the lock is dropped.
 */
#include "pool.h"

#include "place.h"
#include "text/metrics.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                 */
/* ------------------------------------------------------------------------ */

/* Fill *out for r. Lock held. */
static void res_snapshot(struct cq__res *r, cq_resource_stats *out) {
  memset(out, 0, sizeof(*out));
  memcpy(out->name, r->name, sizeof(out->name));
  out->kind = r->kind;
  out->flags = r->flags;
  uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);
  out->in_use = cq__w_used(w);
  out->grants = r->grants_total + cq__w_count(w);
  int64_t peak = atomic_load_explicit(&r->peak, memory_order_relaxed);
  /* A lock-free grant raises the peak just after taking its units. */
  out->peak = peak > out->in_use ? peak : out->in_use;
  out->withheld = cq__policy_withheld(r, w);
  if (r->kind == CQ__RES_DEVICES) {
    out->capacity = (int64_t)r->n_online * CQ_DEVICE_MILLI;
    out->devices = r->n_devs;
    out->online = r->n_online;
  } else {
    out->capacity = cq__res_capacity(r);
  }
  out->waiting = r->n_waiting;
  out->timeouts = r->timeouts;
  out->cancellations = r->cancels;
  /* Grants that did not wait waited 0 ms. */
  uint64_t zeros =
      out->grants > r->wait.count ? out->grants - r->wait.count : 0;
  out->wait.count = r->wait.count + zeros;
  out->wait.p50_ms = cq__hist_quantile(&r->wait, zeros, 0.50);
  out->wait.p99_ms = cq__hist_quantile(&r->wait, zeros, 0.99);
  out->wait.max_ms = r->wait.max;
  out->wait.sum_ms = r->wait.sum;
  for (int b = 0; b < CQ_WAIT_BUCKETS; b++)
    out->wait.below[b] = cq__hist_below(&r->wait, zeros, (int64_t)1 << b);
}

int cq_resource_stats_get(cq_pool *pool, const char *name,
                          cq_resource_stats *out) {
  if (pool == NULL || name == NULL || out == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, resource_stats_get, pool, name, out);
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = cq__res_find(&pool->tab, name);
  if (r != NULL)
    res_snapshot(r, out);
  cq__mutex_unlock(&pool->lock);
  return r != NULL ? 0 : CQ_ENOENT;
}

int cq_pool_snapshot(cq_pool *pool, cq_resource_stats *out, size_t cap,
                     size_t *count) {
  if (pool == NULL || count == NULL || (out == NULL && cap > 0))
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, pool_snapshot, pool, out, cap, count);
  cq__mutex_lock(&pool->lock);
  size_t n = cq__res_ordered(&pool->tab, NULL, 0);
  struct cq__res *stack[64];
  struct cq__res **list = stack;
  if (n > 64)
    list = cq__alloc(&pool->alloc, n * sizeof(*list));
  if (list == NULL) {
    cq__mutex_unlock(&pool->lock);
    return CQ_ENOMEM;
  }
  cq__res_ordered(&pool->tab, list, n);
  for (size_t i = 0; i < n && i < cap; i++)
    res_snapshot(list[i], &out[i]);
  cq__mutex_unlock(&pool->lock);
  if (list != stack)
    cq__free(&pool->alloc, list);
  *count = n;
  return 0;
}

/* Fill *out for device `index` of device pool r. Lock held. */
static void dev_snapshot(struct cq__res *r, uint32_t index,
                         cq_device_stats *out) {
  const struct cq__dev *d = &r->devs[index];
  uint64_t stamp = cq__policy_reservation(r);
  memset(out, 0, sizeof(*out));
  memcpy(out->id, d->id, sizeof(out->id));
  out->index = d->index;
  out->online = d->online;
  out->whole = d->whole;
  out->reserved = stamp != 0 && d->mark == stamp;
  out->used_milli = d->used;
  out->peak_milli = d->peak;
  out->grants = d->grants;
}

int cq_device_stats_get(cq_pool *pool, const char *name, uint32_t index,
                        cq_device_stats *out) {
  if (pool == NULL || name == NULL || out == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, device_stats_get, pool, name, index, out);
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = cq__res_find(&pool->tab, name);
  if (r != NULL && r->kind != CQ__RES_DEVICES)
    r = NULL;
  if (r != NULL && index < r->n_devs)
    dev_snapshot(r, index, out);
  cq__mutex_unlock(&pool->lock);
  return r != NULL && index < r->n_devs ? 0 : CQ_ENOENT;
}

/* ------------------------------------------------------------------------ */
/* The pool, and all of it at once                                          */
/* ------------------------------------------------------------------------ */

/* Fill *out for pool p. Lock held. */
static void pool_snapshot(const cq_pool *p, cq_pool_stats *out) {
  memset(out, 0, sizeof(*out));
  out->waiting = p->q.n_waiters + p->q.n_sleepers;
  out->waited_grants = p->q.waited_grants;
  out->wakeups = p->q.wakeups;
  out->events_dropped = p->ev.dropped;
  out->overdue = p->bf.overdue;
  out->backfilled = p->bf.backfilled;
  out->late_heads = p->bf.late_heads;
  out->converted = p->q.converted;
}

int cq_pool_stats_get(cq_pool *pool, cq_pool_stats *out) {
  if (pool == NULL || out == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, stats_get, pool, out);
  cq__mutex_lock(&pool->lock);
  pool_snapshot(pool, out);
  cq__mutex_unlock(&pool->lock);
  return 0;
}

static void metrics_free(cq_pool *p, struct cq__metrics *m) {
  cq__free(&p->alloc, m->res);
  cq__free(&p->alloc, m->devs);
  cq__free(&p->alloc, m->dev_res);
}

/* Room for n resources and n_devs devices. 0 or CQ_ENOMEM. */
static int metrics_alloc(cq_pool *p, struct cq__metrics *m, size_t n,
                         size_t n_devs) {
  m->res = n ? cq__alloc(&p->alloc, n * sizeof(*m->res)) : NULL;
  m->devs = n_devs ? cq__alloc(&p->alloc, n_devs * sizeof(*m->devs)) : NULL;
  m->dev_res =
      n_devs ? cq__alloc(&p->alloc, n_devs * sizeof(*m->dev_res)) : NULL;
  return (n > 0 && m->res == NULL) ||
                 (n_devs > 0 && (m->devs == NULL || m->dev_res == NULL))
             ? CQ_ENOMEM
             : 0;
}

/* The whole pool at one moment. Lock not held; 0 or CQ_ENOMEM. */
static int metrics_take(cq_pool *p, struct cq__metrics *m) {
  int rc = 0;
  cq__mutex_lock(&p->lock);
  size_t n = cq__res_ordered(&p->tab, NULL, 0), n_devs = 0;
  struct cq__res **list = n ? cq__alloc(&p->alloc, n * sizeof(*list)) : NULL;
  if (n > 0 && list == NULL)
    rc = CQ_ENOMEM;
  if (rc == 0) {
    cq__res_ordered(&p->tab, list, n);
    for (size_t i = 0; i < n; i++)
      if (list[i]->kind == CQ__RES_DEVICES)
        n_devs += list[i]->n_devs;
    rc = metrics_alloc(p, m, n, n_devs);
  }
  if (rc == 0) {
    pool_snapshot(p, &m->pool);
    for (size_t i = 0; i < n; i++) {
      struct cq__res *r = list[i];
      res_snapshot(r, &m->res[m->n_res++]);
      for (uint32_t d = 0; r->kind == CQ__RES_DEVICES && d < r->n_devs; d++) {
        dev_snapshot(r, d, &m->devs[m->n_devs]);
        m->dev_res[m->n_devs++] = i;
      }
    }
  }
  cq__mutex_unlock(&p->lock);
  cq__free(&p->alloc, list);
  return rc;
}

/* The same through a pool's backend: each call is one moment of its own. */
static int metrics_take_remote(cq_pool *p, struct cq__metrics *m) {
  const cq_backend_ops *be = p->backend;
  size_t n = 0, n_devs = 0;
  int rc = be->stats_get(p, &m->pool);
  if (rc == 0)
    rc = be->pool_snapshot(p, NULL, 0, &n);
  if (rc == 0)
    rc = metrics_alloc(p, m, n, 0);
  if (rc == 0)
    rc = be->pool_snapshot(p, m->res, n, &m->n_res);
  if (rc == 0 && m->n_res > n)
    m->n_res = n; /* one was added meanwhile: the next scrape shows it */
  for (size_t i = 0; rc == 0 && i < m->n_res; i++)
    if (m->res[i].kind == CQ_KIND_DEVICES)
      n_devs += m->res[i].devices;
  if (rc == 0 && n_devs > 0) {
    m->devs = cq__alloc(&p->alloc, n_devs * sizeof(*m->devs));
    m->dev_res = cq__alloc(&p->alloc, n_devs * sizeof(*m->dev_res));
    if (m->devs == NULL || m->dev_res == NULL)
      rc = CQ_ENOMEM;
  }
  for (size_t i = 0; rc == 0 && i < m->n_res; i++) {
    const cq_resource_stats *r = &m->res[i];
    for (uint32_t d = 0; r->kind == CQ_KIND_DEVICES && d < r->devices; d++) {
      if (be->device_stats_get(p, r->name, d, &m->devs[m->n_devs]) != 0)
        continue; /* removed meanwhile */
      m->dev_res[m->n_devs++] = i;
    }
  }
  if (rc == 0 && be->metrics_get != NULL) {
    rc = be->metrics_get(p, m->own, CQ_BACKEND_METRICS_MAX, &m->n_own);
    if (m->n_own > CQ_BACKEND_METRICS_MAX)
      m->n_own = CQ_BACKEND_METRICS_MAX;
  }
  return rc;
}

int cq_pool_write_metrics(cq_pool *pool, cq_write_fn write, void *arg) {
  if (pool == NULL || write == NULL)
    return CQ_EINVAL;
  struct cq__metrics m;
  memset(&m, 0, sizeof(m));
  int rc = cq__pool_remote(pool) ? metrics_take_remote(pool, &m)
                                 : metrics_take(pool, &m);
  if (rc == 0)
    rc = cq__metrics_write(&m, write, arg);
  metrics_free(pool, &m);
  return rc;
}
