/*
 * The Prometheus text exposition (metrics.h). Every family comes from a
 * table: the pool's figures from CQ_POOL_STATS_MAP in the public header,
 * the per-resource and per-device ones from the tables below, each naming
 * the field it reads, so that a figure added to a struct is one row here.
 *
 * Names: cronoq_<figure> per resource (label `resource`), cronoq_class_
 * <figure> per class (label `class`; classes have their own help texts),
 * cronoq_device_<figure> per device (labels `resource` and `device`),
 * cronoq_pool_<figure> for the pool, cronoq_build_info, and last a backend
 * pool's figures of its own, cronoq_<backend>_<figure> (cronoq_backend.h:
 * cq_backend_metric). Counters end in _total. Waiting times are a histogram in
 * seconds whose buckets are powers of four of a millisecond, from 1 ms to 2^26
 * ms (18.6 hours); its counts are exact (cq_wait_stats.below), so scrapes of
 * several processes can be added up.
 */
#include "text/metrics.h"

#include "util/msg.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct out {
  cq_write_fn write;
  void *arg;
  int rc;
  char line[512];
};

static void emit(struct out *o, const char *fmt, ...) CQ__PRINTF(2, 3);

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
      buf[k++] = (char)(*in == '\n' ? 'n' : *in);
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

/* The head of a family of one sample without labels: cronoq_<base>, with
 * _total for a counter; its name is left in `name`. */
static void lone_family(struct out *o, char *name, size_t len, const char *base,
                        const char *type, const char *help) {
  snprintf(name, len, "cronoq_%s%s", base,
           strcmp(type, "counter") == 0 ? "_total" : "");
  family(o, name, type, help);
}

/* ------------------------------------------------------------------------ */
/* The pool                                                                  */
/* ------------------------------------------------------------------------ */

static void write_pool(struct out *o, const cq_pool_stats *s) {
  char name[96];
#define POOL_FAMILY_(field, type, help)                                        \
  lone_family(o, name, sizeof(name), "pool_" #field, type, help);              \
  emit(o, "%s %" PRIu64 "\n", name, s->field);
  CQ_POOL_STATS_MAP(POOL_FAMILY_)
#undef POOL_FAMILY_
  family(o, "cronoq_build_info", "gauge",
         "The library's version and ABI (SOVERSION), as labels; always 1.");
  emit(o, "cronoq_build_info{version=\"%s\",abi=\"0.%d\"} 1\n",
       cq_version_string(), cq_version_number() / 1000 % 1000);
}

/* ------------------------------------------------------------------------ */
/* Resources and classes                                                     */
/* ------------------------------------------------------------------------ */

enum unit { AMOUNT, COUNT, SECONDS };

/* A figure of cq_resource_stats: where it is and how it reads. Amounts of
 * device pools are reported in devices, the rest in units. */
struct res_field {
  const char *suffix; /* after cronoq_ or cronoq_class_ */
  const char *type;
  const char *help;       /* for budgets and device pools */
  const char *class_help; /* for classes */
  size_t offset;
  bool is_signed;
  enum unit unit;
};

/* A row: int64_t fields are signed (SIGNED), uint64_t ones not. */
#define SIGNED true
#define UNSIGNED false
#define RF_(suffix, type, help, class_help, field, sign, unit)                 \
  {                                                                            \
    suffix, type, help, class_help, offsetof(cq_resource_stats, field), sign,  \
        unit                                                                   \
  }

static const struct res_field res_fields[] = {
    RF_("capacity", "gauge",
        "Capacity: units of a budget, online devices of a device pool.",
        "Max workers of the class.", capacity, SIGNED, AMOUNT),
    RF_("in_use", "gauge", "Held by grants (device pools: in devices).",
        "Workers of the class held.", in_use, SIGNED, AMOUNT),
    RF_("withheld", "gauge",
        "Free but set aside for waiters (device pools: on reserved devices).",
        "Free worker slots set aside for the oldest claimant.", withheld,
        SIGNED, AMOUNT),
    RF_("peak", "gauge", "Highest in_use seen.",
        "Most workers of the class held at once.", peak, SIGNED, AMOUNT),
    RF_("waiting", "gauge", "Waiting requests that name it.",
        "Waiting requests of the class.", waiting, UNSIGNED, COUNT),
    RF_("grants_total", "counter", "Grants that included it.",
        "Grants of the class.", grants, UNSIGNED, COUNT),
    RF_("timeouts_total", "counter", "Waiters naming it that timed out.",
        "Waiters of the class that timed out.", timeouts, UNSIGNED, COUNT),
    RF_("cancellations_total", "counter",
        "Waiters naming it that were cancelled.",
        "Waiters of the class that were cancelled.", cancellations, UNSIGNED,
        COUNT),
    RF_("wait_max_seconds", "gauge", "Longest wait of a grant.",
        "Longest wait of a grant of the class.", wait.max_ms, SIGNED, SECONDS),
};

static double res_value(const cq_resource_stats *r, const struct res_field *f) {
  const char *at = (const char *)r + f->offset;
  double v;
  if (f->is_signed) {
    int64_t x;
    memcpy(&x, at, sizeof(x));
    v = (double)x;
  } else {
    uint64_t x;
    memcpy(&x, at, sizeof(x));
    v = (double)x;
  }
  if (f->unit == SECONDS)
    return v / 1000.0;
  if (f->unit == AMOUNT && r->kind == CQ_KIND_DEVICES)
    return v / CQ_DEVICE_MILLI;
  return v;
}

/* The histogram's buckets: every second bound of cq_wait_stats.below. */
#define WAIT_BUCKET_STEP 2

static void write_waits(struct out *o, const struct cq__metrics *m,
                        const char *prefix, const char *label, bool classes) {
  char name[96], v[2 * CQ_NAME_MAX + 2];
  snprintf(name, sizeof(name), "%swait_seconds", prefix);
  family(o, name, "histogram",
         classes ? "Time granted requests of the class waited."
                 : "Time granted requests waited.");
  for (size_t i = 0; i < m->n_res; i++) {
    const cq_resource_stats *r = &m->res[i];
    if ((r->kind == CQ_KIND_CLASS) != classes)
      continue;
    esc(r->name, v, sizeof(v));
    for (int b = 0; b < CQ_WAIT_BUCKETS; b += WAIT_BUCKET_STEP) {
      char le[32];
      emit(o, "%s_bucket{%s=\"%s\",le=\"%s\"} %" PRIu64 "\n", name, label, v,
           cq__fmt_milli(le, sizeof(le), (int64_t)1 << b), r->wait.below[b]);
    }
    emit(o, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, label, v,
         r->wait.count);
    emit(o, "%s_sum{%s=\"%s\"} %.17g\n", name, label, v,
         (double)r->wait.sum_ms / 1000.0);
    emit(o, "%s_count{%s=\"%s\"} %" PRIu64 "\n", name, label, v, r->wait.count);
  }
}

static void write_resources(struct out *o, const struct cq__metrics *m,
                            bool classes) {
  const char *prefix = classes ? "cronoq_class_" : "cronoq_";
  const char *label = classes ? "class" : "resource";
  char name[96], v[2 * CQ_NAME_MAX + 2];
  bool any = false;
  for (size_t i = 0; i < m->n_res; i++)
    any |= (m->res[i].kind == CQ_KIND_CLASS) == classes;
  if (!any)
    return;
  for (size_t f = 0; f < sizeof(res_fields) / sizeof(res_fields[0]); f++) {
    const struct res_field *rf = &res_fields[f];
    snprintf(name, sizeof(name), "%s%s", prefix, rf->suffix);
    family(o, name, rf->type, classes ? rf->class_help : rf->help);
    for (size_t i = 0; i < m->n_res; i++) {
      const cq_resource_stats *r = &m->res[i];
      if ((r->kind == CQ_KIND_CLASS) != classes)
        continue;
      emit(o, "%s{%s=\"%s\"} %.17g\n", name, label, esc(r->name, v, sizeof(v)),
           res_value(r, rf));
    }
  }
  write_waits(o, m, prefix, label, classes);
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

struct dev_field {
  const char *name, *type, *help;
  double (*get)(const cq_device_stats *d);
};

static double d_in_use(const cq_device_stats *d) {
  return (double)d->used_milli / CQ_DEVICE_MILLI;
}
static double d_peak(const cq_device_stats *d) {
  return (double)d->peak_milli / CQ_DEVICE_MILLI;
}
static double d_online(const cq_device_stats *d) { return d->online; }
static double d_whole(const cq_device_stats *d) { return d->whole; }
static double d_reserved(const cq_device_stats *d) { return d->reserved; }
static double d_grants(const cq_device_stats *d) { return (double)d->grants; }

static const struct dev_field dev_fields[] = {
    {"cronoq_device_in_use", "gauge", "Fraction of the device held.", d_in_use},
    {"cronoq_device_peak", "gauge", "Highest fraction of the device held.",
     d_peak},
    {"cronoq_device_online", "gauge", "1 if the device takes new work.",
     d_online},
    {"cronoq_device_whole", "gauge", "1 if one grant holds the device whole.",
     d_whole},
    {"cronoq_device_reserved", "gauge",
     "1 if the device is reserved for a waiter.", d_reserved},
    {"cronoq_device_grants_total", "counter", "Grants placed on the device.",
     d_grants},
};

static void write_devices(struct out *o, const struct cq__metrics *m) {
  if (m->n_devs == 0)
    return;
  char pool_v[2 * CQ_NAME_MAX + 2], dev_v[2 * CQ_DEVICE_ID_MAX + 2];
  for (size_t f = 0; f < sizeof(dev_fields) / sizeof(dev_fields[0]); f++) {
    family(o, dev_fields[f].name, dev_fields[f].type, dev_fields[f].help);
    for (size_t i = 0; i < m->n_devs; i++) {
      const cq_device_stats *d = &m->devs[i];
      emit(o, "%s{resource=\"%s\",device=\"%s\"} %.17g\n", dev_fields[f].name,
           esc(m->res[m->dev_res[i]].name, pool_v, sizeof(pool_v)),
           esc(d->id, dev_v, sizeof(dev_v)), dev_fields[f].get(d));
    }
  }
}

/* ------------------------------------------------------------------------ */
/* A backend's own figures                                                   */
/* ------------------------------------------------------------------------ */

static void write_own(struct out *o, const struct cq__metrics *m) {
  char name[96];
  for (size_t i = 0; i < m->n_own; i++) {
    const cq_backend_metric *f = &m->own[i];
    lone_family(o, name, sizeof(name), f->name,
                f->counter ? "counter" : "gauge", f->help);
    emit(o, "%s %.17g\n", name, f->value);
  }
}

int cq__metrics_write(const struct cq__metrics *m, cq_write_fn write,
                      void *arg) {
  struct out o = {write, arg, 0, {0}};
  write_pool(&o, &m->pool);
  write_resources(&o, m, false);
  write_devices(&o, m);
  write_resources(&o, m, true);
  write_own(&o, m);
  return o.rc;
}
