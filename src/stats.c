/*
 * Stats and metrics: per-resource snapshots, and
 * the Prometheus text exposition.
 *
 * Every snapshot is taken under the pool lock, with each usage word read
 * once, so that the figures of one resource (and of a whole pool snapshot)
 * agree with each other. Formatting and writing happen after the lock is
 * dropped.
 */
#include "pool.h"

#include "place.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
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
}

int cq_resource_stats_get(cq_pool *pool, const char *name,
                          cq_resource_stats *out) {
  if (pool == NULL || name == NULL || out == NULL)
    return CQ_EINVAL;
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
  const struct cq__ritem *ask = cq__policy_reservation(r);
  uint64_t stamp = ask != NULL ? cq__dev_reserve(r, ask) : 0;
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
/* Prometheus text exposition                                                */
/* ------------------------------------------------------------------------ */

/* What the exposition needs, copied under the lock. */
struct metrics {
  cq_resource_stats *res;
  size_t n_res;
  cq_device_stats *devs;
  size_t n_devs;
  const char **dev_pool; /* the pool name of each device */
  cq_pool_stats pool;
};

struct out {
  cq_write_fn write;
  void *arg;
  int rc;
  char line[512];
};

static void emit(struct out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void emit(struct out *o, const char *fmt, ...) {
  if (o->rc != 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(o->line, sizeof(o->line), fmt, ap);
  va_end(ap);
  if (len < 0)
    len = 0;
  if ((size_t)len >= sizeof(o->line))
    len = (int)sizeof(o->line) - 1;
  o->rc = o->write(o->line, (size_t)len, o->arg);
}

/* Label values are names and device ids, whose characters never need
 * escaping; escape anyway, as the format requires for \, " and newline. */
static const char *esc(const char *in, char *buf, size_t len) {
  size_t k = 0;
  for (; *in && k + 2 < len; in++) {
    if (*in == '\\' || *in == '"' || *in == '\n') {
      buf[k++] = '\\';
      buf[k++] = *in == '\n' ? 'n' : *in;
    } else {
      buf[k++] = *in;
    }
  }
  buf[k] = '\0';
  return buf;
}

static void family(struct out *o, const char *name, const char *type,
                   const char *help) {
  emit(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A resource figure: device pools are reported in devices, the rest in
 * units. */
static double in_units(const cq_resource_stats *r, int64_t v) {
  return r->kind == CQ_KIND_DEVICES ? (double)v / CQ_DEVICE_MILLI : (double)v;
}

typedef double (*res_field)(const cq_resource_stats *r);

static double f_capacity(const cq_resource_stats *r) {
  return in_units(r, r->capacity);
}
static double f_in_use(const cq_resource_stats *r) {
  return in_units(r, r->in_use);
}
static double f_withheld(const cq_resource_stats *r) {
  return in_units(r, r->withheld);
}
static double f_peak(const cq_resource_stats *r) {
  return in_units(r, r->peak);
}
static double f_waiting(const cq_resource_stats *r) {
  return (double)r->waiting;
}
static double f_grants(const cq_resource_stats *r) { return (double)r->grants; }
static double f_timeouts(const cq_resource_stats *r) {
  return (double)r->timeouts;
}
static double f_cancels(const cq_resource_stats *r) {
  return (double)r->cancellations;
}
static double f_wait_max(const cq_resource_stats *r) {
  return (double)r->wait.max_ms / 1000.0;
}

struct field {
  const char *suffix; /* after cronoq_ or cronoq_class_ */
  const char *type;
  const char *help;
  res_field get;
};

static const struct field fields[] = {
    {"capacity", "gauge",
     "Capacity: units of a budget, online devices of a device pool, max "
     "workers of a class.",
     f_capacity},
    {"in_use", "gauge", "Held by grants (device pools: in devices).", f_in_use},
    {"withheld", "gauge", "Free but set aside for the oldest claimant.",
     f_withheld},
    {"peak", "gauge", "Highest in_use seen.", f_peak},
    {"waiting", "gauge", "Waiting requests that name it.", f_waiting},
    {"grants_total", "counter", "Grants that included it.", f_grants},
    {"timeouts_total", "counter", "Waiters naming it that timed out.",
     f_timeouts},
    {"cancellations_total", "counter", "Waiters naming it that were cancelled.",
     f_cancels},
    {"wait_max_seconds", "gauge", "Longest wait of a grant.", f_wait_max},
};

static void write_resources(struct out *o, const struct metrics *m,
                            bool classes) {
  const char *prefix = classes ? "cronoq_class_" : "cronoq_";
  const char *label = classes ? "class" : "resource";
  char name[96], v[2 * CQ_NAME_MAX + 2];
  bool any = false;
  for (size_t i = 0; i < m->n_res; i++)
    any |= (m->res[i].kind == CQ_KIND_CLASS) == classes;
  if (!any)
    return;
  for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
    snprintf(name, sizeof(name), "%s%s", prefix, fields[f].suffix);
    family(o, name, fields[f].type, fields[f].help);
    for (size_t i = 0; i < m->n_res; i++) {
      const cq_resource_stats *r = &m->res[i];
      if ((r->kind == CQ_KIND_CLASS) != classes)
        continue;
      emit(o, "%s{%s=\"%s\"} %.17g\n", name, label, esc(r->name, v, sizeof(v)),
           fields[f].get(r));
    }
  }
  snprintf(name, sizeof(name), "%swait_seconds", prefix);
  family(o, name, "summary", "Time granted requests waited.");
  for (size_t i = 0; i < m->n_res; i++) {
    const cq_resource_stats *r = &m->res[i];
    if ((r->kind == CQ_KIND_CLASS) != classes)
      continue;
    esc(r->name, v, sizeof(v));
    emit(o, "%s{%s=\"%s\",quantile=\"0.5\"} %.17g\n", name, label, v,
         (double)r->wait.p50_ms / 1000.0);
    emit(o, "%s{%s=\"%s\",quantile=\"0.99\"} %.17g\n", name, label, v,
         (double)r->wait.p99_ms / 1000.0);
    emit(o, "%s_sum{%s=\"%s\"} %.17g\n", name, label, v,
         (double)r->wait.sum_ms / 1000.0);
    emit(o, "%s_count{%s=\"%s\"} %" PRIu64 "\n", name, label, v, r->wait.count);
  }
}

static void write_devices(struct out *o, const struct metrics *m) {
  if (m->n_devs == 0)
    return;
  char pool_v[2 * CQ_NAME_MAX + 2], dev_v[2 * CQ_DEVICE_ID_MAX + 2];
  static const struct {
    const char *name, *type, *help;
  } fams[] = {
      {"cronoq_device_in_use", "gauge", "Fraction of the device held."},
      {"cronoq_device_online", "gauge", "1 if the device takes new work."},
      {"cronoq_device_reserved", "gauge",
       "1 if the device is reserved for the pool's claimant."},
      {"cronoq_device_grants_total", "counter", "Grants placed on the device."},
  };
  for (size_t f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
    family(o, fams[f].name, fams[f].type, fams[f].help);
    for (size_t i = 0; i < m->n_devs; i++) {
      const cq_device_stats *d = &m->devs[i];
      double value = f == 0   ? (double)d->used_milli / CQ_DEVICE_MILLI
                     : f == 1 ? d->online
                     : f == 2 ? d->reserved
                              : (double)d->grants;
      emit(o, "%s{resource=\"%s\",device=\"%s\"} %.17g\n", fams[f].name,
           esc(m->dev_pool[i], pool_v, sizeof(pool_v)),
           esc(d->id, dev_v, sizeof(dev_v)), value);
    }
  }
}

int cq_pool_write_metrics(cq_pool *pool, cq_write_fn write, void *arg) {
  if (pool == NULL || write == NULL)
    return CQ_EINVAL;
  struct metrics m;
  memset(&m, 0, sizeof(m));
  int rc = 0;

  cq__mutex_lock(&pool->lock);
  size_t n = cq__res_ordered(&pool->tab, NULL, 0);
  struct cq__res **list = n ? cq__alloc(&pool->alloc, n * sizeof(*list)) : NULL;
  size_t n_devs = 0;
  if (list != NULL) {
    cq__res_ordered(&pool->tab, list, n);
    for (size_t i = 0; i < n; i++)
      if (list[i]->kind == CQ__RES_DEVICES)
        n_devs += list[i]->n_devs;
  }
  m.res = n ? cq__alloc(&pool->alloc, n * sizeof(*m.res)) : NULL;
  m.devs = n_devs ? cq__alloc(&pool->alloc, n_devs * sizeof(*m.devs)) : NULL;
  m.dev_pool =
      n_devs ? cq__alloc(&pool->alloc, n_devs * sizeof(*m.dev_pool)) : NULL;
  if (n > 0 && (list == NULL || m.res == NULL ||
                (n_devs > 0 && (m.devs == NULL || m.dev_pool == NULL)))) {
    rc = CQ_ENOMEM;
  } else {
    for (size_t i = 0; i < n; i++) {
      struct cq__res *r = list[i];
      res_snapshot(r, &m.res[m.n_res]);
      m.n_res++;
      for (uint32_t d = 0; r->kind == CQ__RES_DEVICES && d < r->n_devs; d++) {
        dev_snapshot(r, d, &m.devs[m.n_devs]);
        m.dev_pool[m.n_devs] = m.res[m.n_res - 1].name;
        m.n_devs++;
      }
    }
    m.pool.waiting = pool->q.n_waiters;
    m.pool.waited_grants = pool->q.waited_grants;
    m.pool.wakeups = pool->q.wakeups;
    m.pool.events_dropped = pool->ev.dropped;
  }
  cq__mutex_unlock(&pool->lock);

  if (rc == 0) {
    struct out o = {write, arg, 0, {0}};
    family(&o, "cronoq_pool_waiting", "gauge", "Requests waiting in the pool.");
    emit(&o, "cronoq_pool_waiting %" PRIu64 "\n", m.pool.waiting);
    family(&o, "cronoq_pool_waited_grants_total", "counter",
           "Grants to requests that had to wait.");
    emit(&o, "cronoq_pool_waited_grants_total %" PRIu64 "\n",
         m.pool.waited_grants);
    family(&o, "cronoq_pool_events_dropped_total", "counter",
           "Events the event hook fell too far behind for.");
    emit(&o, "cronoq_pool_events_dropped_total %" PRIu64 "\n",
         m.pool.events_dropped);
    write_resources(&o, &m, false);
    write_devices(&o, &m);
    write_resources(&o, &m, true);
    rc = o.rc;
  }
  cq__free(&pool->alloc, list);
  cq__free(&pool->alloc, m.res);
  cq__free(&pool->alloc, m.devs);
  cq__free(&pool->alloc, (void *)m.dev_pool);
  return rc;
}
