/*
 * Stats and metrics: per-resource, per-device and per-class snapshots, the
 * waiting-time histogram on a virtual clock, the Prometheus text exposition
 * checked against the format's rules, and the event hook.
 */
#include "support/cqt.h"

#include "cq_internal.h"

#include <ctype.h>
#include <stdlib.h>

static int64_t now_ms;
static int64_t virtual_clock(void *arg) {
  (void)arg;
  return now_ms;
}

static cq_pool *virtual_pool(cq_event_fn on_event, void *arg) {
  cq_pool *p;
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_MANUAL_TIMERS;
  cfg.clock = virtual_clock;
  cfg.on_event = on_event;
  cfg.event_arg = arg;
  now_ms = 1000;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  return p;
}

static void noop_cb(cq_grant *g, int status) {
  (void)g;
  (void)status;
}

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                 */
/* ------------------------------------------------------------------------ */

static void
test_snapshot_counts_grants_timeouts_cancellations_and_waits(void **state) {
  (void)state;
  cq_pool *p = virtual_pool(NULL, NULL);
  assert_cq_ok(cq_budget_add(p, "b", 1));
  cq_req r;
  cqt_req(&r, p, "b:1");
  cq_grant holder, w[4];
  cq_grant_init(&holder);
  assert_cq_ok(cq_grant_try(p, &holder, &r)); /* waited 0 ms */
  for (int i = 0; i < 4; i++) {
    cq_grant_init(&w[i]);
    int64_t deadline = i == 3 ? now_ms + 5 : CQ_NEVER;
    assert_cq_ok(cq_grant_submit(p, &w[i], &r, deadline, noop_cb));
  }
  now_ms += 5;
  assert_cq_ok(cq_pool_expire(p, NULL)); /* w[3] times out */
  assert_cq_ok(cq_grant_cancel(p, &w[2]));
  now_ms += 5;
  assert_cq_ok(cq_grant_release(p, &holder)); /* w[0] waited 10 ms */
  now_ms += 90;
  assert_cq_ok(cq_grant_release(p, &w[0])); /* w[1] waited 100 ms */
  assert_cq_ok(cq_grant_release(p, &w[1]));

  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(p, "b", &st));
  assert_string_equal(st.name, "b");
  assert_int_equal(st.kind, CQ_KIND_BUDGET);
  assert_int_equal(st.capacity, 1);
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.peak, 1);
  assert_int_equal(st.grants, 3);
  assert_int_equal(st.timeouts, 1);
  assert_int_equal(st.cancellations, 1);
  assert_int_equal(st.wait.count, 3); /* 0, 10 and 100 ms */
  assert_int_equal(st.wait.max_ms, 100);
  assert_int_equal(st.wait.sum_ms, 110);
  assert_true(st.wait.p50_ms >= 9 && st.wait.p50_ms <= 11);
  assert_true(st.wait.p99_ms >= 88 && st.wait.p99_ms <= 100);
  assert_cq_err(cq_resource_stats_get(p, "nope", &st), CQ_ENOENT);
  assert_cq_ok(cq_pool_destroy(p));
}

static void test_histogram_quantiles_are_within_an_eighth(void **state) {
  (void)state;
  struct cq__hist h;
  memset(&h, 0, sizeof(h));
  for (int64_t v = 1; v <= 10000; v++)
    cq__hist_add(&h, v);
  int64_t p50 = cq__hist_quantile(&h, 0, 0.5);
  int64_t p99 = cq__hist_quantile(&h, 0, 0.99);
  assert_true(p50 >= 5000 - 5000 / 8 && p50 <= 5000 + 5000 / 8);
  assert_true(p99 >= 9900 - 9900 / 8 && p99 <= 10000);
  assert_int_equal(cq__hist_quantile(&h, 0, 1.0), 10000);
  assert_int_equal(cq__hist_quantile(&h, 30000, 0.5), 0); /* mostly zeros */
  struct cq__hist small;
  memset(&small, 0, sizeof(small));
  for (int64_t v = 0; v < 8; v++)
    cq__hist_add(&small, v);
  assert_int_equal(cq__hist_quantile(&small, 0, 0.5), 3); /* exact below 8 */
}

static void test_pool_snapshot_lists_every_resource_in_order(void **state) {
  (void)state;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_budget_add(p, "cpu", 8));
  assert_cq_ok(cq_class_add(p, "predict", 2));
  assert_cq_ok(cq_devices_add(p, "gpu", 2, NULL));
  assert_cq_ok(cq_budget_add_ex(p, "memory_mib", 100, CQ_BUDGET_LONE));
  cq_req r;
  assert_cq_ok(cq_req_init(&r, p));
  assert_cq_ok(cq_req_add_fraction(&r, "gpu", 250));
  assert_cq_ok(cq_req_add(&r, "cpu", 2));
  assert_cq_ok(cq_req_set_class(&r, "predict"));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &r));
  cq_resource_stats all[8];
  size_t n = 0;
  assert_cq_ok(cq_pool_snapshot(p, all, 8, &n));
  assert_int_equal(n, 4);
  assert_string_equal(all[0].name, "gpu"); /* device pools first */
  assert_int_equal(all[0].kind, CQ_KIND_DEVICES);
  assert_int_equal(all[0].capacity, 2000);
  assert_int_equal(all[0].in_use, 250);
  assert_int_equal(all[0].devices, 2);
  assert_int_equal(all[0].online, 2);
  assert_string_equal(all[1].name, "cpu");
  assert_int_equal(all[1].in_use, 2);
  assert_string_equal(all[2].name, "predict");
  assert_int_equal(all[2].kind, CQ_KIND_CLASS);
  assert_int_equal(all[2].capacity, 2);
  assert_int_equal(all[2].in_use, 1); /* one worker */
  assert_string_equal(all[3].name, "memory_mib");
  assert_int_equal(all[3].flags, CQ_BUDGET_LONE);
  size_t m = 0;
  assert_cq_ok(cq_pool_snapshot(p, all, 2, &m)); /* too small: says so */
  assert_int_equal(m, 4);
  assert_cq_ok(cq_grant_release(p, &g));
  assert_cq_ok(cq_pool_destroy(p));
}

/* ------------------------------------------------------------------------ */
/* Prometheus text exposition                                                */
/* ------------------------------------------------------------------------ */

struct text {
  char *buf;
  size_t len, cap;
};

static int append(const char *s, size_t len, void *arg) {
  struct text *t = arg;
  if (t->len + len + 1 > t->cap) {
    t->cap = (t->len + len + 1) * 2;
    t->buf = realloc(t->buf, t->cap);
    assert_non_null(t->buf);
  }
  memcpy(t->buf + t->len, s, len);
  t->len += len;
  t->buf[t->len] = '\0';
  return 0;
}

static bool metric_name_ok(const char *s, size_t n) {
  if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
      return false;
  return true;
}

#define MAX_FAMILIES 64
#define MAX_SERIES 1024

/* Checks one exposition against the text format's rules; fails the test on
 * the first broken rule. Returns the number of samples. */
static int check_exposition(const char *text) {
  char families[MAX_FAMILIES][96], types[MAX_FAMILIES][16];
  bool helped[MAX_FAMILIES];
  int n_fam = 0, current = -1, samples = 0;
  static char series[MAX_SERIES][256];
  int n_series = 0;
  const char *line = text;
  assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
  while (*line) {
    const char *end = strchr(line, '\n');
    assert_non_null(end);
    size_t len = (size_t)(end - line);
    char buf[512];
    assert_true(len < sizeof(buf));
    memcpy(buf, line, len);
    buf[len] = '\0';
    assert_true(len == 0 || !isspace((unsigned char)buf[len - 1]));
    if (strncmp(buf, "# HELP ", 7) == 0 || strncmp(buf, "# TYPE ", 7) == 0) {
      bool help = buf[2] == 'H';
      char *name = buf + 7, *sp = strchr(name, ' ');
      assert_non_null(sp);
      *sp = '\0';
      assert_true(metric_name_ok(name, strlen(name)));
      assert_true(strncmp(name, "cronoq_", 7) == 0);
      int f = -1;
      for (int i = 0; i < n_fam; i++)
        if (strcmp(families[i], name) == 0)
          f = i;
      if (f < 0) {
        assert_true(n_fam < MAX_FAMILIES);
        f = n_fam++;
        snprintf(families[f], sizeof(families[f]), "%s", name);
        types[f][0] = '\0';
        helped[f] = false;
      }
      if (help) {
        assert_false(helped[f]); /* HELP at most once */
        helped[f] = true;
      } else {
        assert_string_equal(types[f], ""); /* TYPE at most once */
        const char *t = sp + 1;
        assert_true(strcmp(t, "counter") == 0 || strcmp(t, "gauge") == 0 ||
                    strcmp(t, "histogram") == 0);
        snprintf(types[f], sizeof(types[f]), "%s", t);
        if (strcmp(t, "counter") == 0)
          assert_non_null(strstr(name, "_total"));
      }
      current = f;
    } else {
      assert_true(buf[0] != '#');
      /* name{labels} value */
      size_t nl = strcspn(buf, "{ ");
      assert_true(metric_name_ok(buf, nl));
      char name[96];
      memcpy(name, buf, nl);
      name[nl] = '\0';
      assert_true(current >= 0);
      const char *fam = families[current];
      size_t fl = strlen(fam);
      /* A sample belongs to the family declared just before it. */
      assert_true(strcmp(name, fam) == 0 ||
                  (strcmp(types[current], "histogram") == 0 &&
                   strncmp(name, fam, fl) == 0 &&
                   (strcmp(name + fl, "_bucket") == 0 ||
                    strcmp(name + fl, "_sum") == 0 ||
                    strcmp(name + fl, "_count") == 0)));
      assert_string_not_equal(types[current], ""); /* TYPE came first */
      char *p = buf + nl;
      if (*p == '{') {
        p++;
        while (*p != '}') {
          size_t ln = strcspn(p, "=");
          assert_true(ln > 0 && (isalpha((unsigned char)p[0]) || p[0] == '_'));
          for (size_t i = 0; i < ln; i++)
            assert_true(isalnum((unsigned char)p[i]) || p[i] == '_');
          p += ln;
          assert_int_equal(*p++, '=');
          assert_int_equal(*p++, '"');
          while (*p != '"') {
            assert_true(*p != '\0' && *p != '\n');
            if (*p == '\\') {
              p++;
              assert_true(*p == '\\' || *p == '"' || *p == 'n');
            }
            p++;
          }
          p++;
          if (*p == ',')
            p++;
          else
            assert_int_equal(*p, '}');
        }
        p++;
      }
      assert_int_equal(*p++, ' ');
      char *num_end;
      double v = strtod(p, &num_end);
      assert_true(num_end != p && *num_end == '\0');
      (void)v;
      /* No series twice. */
      size_t key = (size_t)(p - buf) - 1;
      assert_true(key < sizeof(series[0]));
      for (int i = 0; i < n_series; i++)
        assert_false(strlen(series[i]) == key &&
                     strncmp(series[i], buf, key) == 0);
      assert_true(n_series < MAX_SERIES);
      memcpy(series[n_series], buf, key);
      series[n_series][key] = '\0';
      n_series++;
      samples++;
    }
    line = end + 1;
  }
  for (int i = 0; i < n_fam; i++) {
    assert_true(helped[i]);
    assert_string_not_equal(types[i], "");
  }
  return samples;
}

static void test_prometheus_exposition_follows_the_format(void **state) {
  (void)state;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  const char *ids[] = {"GPU-1", "GPU-\"2\""};
  assert_cq_ok(cq_devices_add(p, "gpu", 1, ids));
  assert_cq_ok(cq_budget_add(p, "warehouse-db", 10));
  assert_cq_ok(cq_class_add(p, "predict", 2));
  cq_req r;
  assert_cq_ok(cq_req_init(&r, p));
  assert_cq_ok(cq_req_add_fraction(&r, "gpu", 500));
  assert_cq_ok(cq_req_add(&r, "warehouse-db", 3));
  assert_cq_ok(cq_req_set_class(&r, "predict"));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &r));

  struct text t = {NULL, 0, 0};
  assert_cq_ok(cq_pool_write_metrics(p, append, &t));
  int samples = check_exposition(t.buf);
  assert_true(samples > 20);
  assert_non_null(
      strstr(t.buf, "cronoq_in_use{resource=\"warehouse-db\"} 3\n"));
  assert_non_null(strstr(t.buf, "cronoq_in_use{resource=\"gpu\"} 0.5\n"));
  assert_non_null(
      strstr(t.buf, "cronoq_capacity{resource=\"warehouse-db\"} 10\n"));
  assert_non_null(strstr(
      t.buf, "cronoq_device_in_use{resource=\"gpu\",device=\"GPU-1\"} 0.5\n"));
  assert_non_null(strstr(t.buf, "cronoq_class_in_use{class=\"predict\"} 1\n"));
  assert_non_null(
      strstr(t.buf, "cronoq_grants_total{resource=\"warehouse-db\"} 1\n"));
  /* Waiting times are a histogram: a grant that did not wait is under the
   * first bound (1 ms), and under every later one. */
  assert_non_null(strstr(t.buf, "# TYPE cronoq_wait_seconds histogram\n"));
  assert_non_null(strstr(t.buf,
                         "cronoq_wait_seconds_bucket{resource=\"warehouse-"
                         "db\",le=\"0.001\"} 1\n"));
  assert_non_null(strstr(t.buf,
                         "cronoq_wait_seconds_bucket{resource=\"warehouse-"
                         "db\",le=\"+Inf\"} 1\n"));
  assert_non_null(strstr(
      t.buf, "cronoq_wait_seconds_count{resource=\"warehouse-db\"} 1\n"));
  assert_non_null(
      strstr(t.buf, "cronoq_class_wait_seconds_count{class=\"predict\"} 1\n"));
  /* Every figure of the pool, and the build. */
#define POOL_FIGURE_(field, type, help)                                        \
  {                                                                            \
    char want[96];                                                             \
    snprintf(want, sizeof(want), "\ncronoq_pool_%s%s 0\n", #field,             \
             strcmp(type, "counter") == 0 ? "_total" : "");                    \
    assert_non_null(strstr(t.buf, want));                                      \
  }
  CQ_POOL_STATS_MAP(POOL_FIGURE_)
#undef POOL_FIGURE_
  char build[96];
  snprintf(build, sizeof(build),
           "cronoq_build_info{version=\"%s\",abi=\"0.%d\"} 1\n",
           cq_version_string(), CQ_VERSION_MINOR);
  assert_non_null(strstr(t.buf, build));
  /* Classes have help texts of their own. */
  assert_non_null(strstr(
      t.buf, "# HELP cronoq_class_capacity Max workers of the class.\n"));
  free(t.buf);
  assert_cq_ok(cq_grant_release(p, &g));
  assert_cq_ok(cq_pool_destroy(p));
}

static int stop_writing(const char *s, size_t len, void *arg) {
  (void)s;
  (void)len;
  int *calls = arg;
  return ++*calls == 3 ? 42 : 0;
}

static void test_metrics_writer_can_stop_the_exposition(void **state) {
  (void)state;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_budget_add(p, "b", 1));
  int calls = 0;
  assert_int_equal(cq_pool_write_metrics(p, stop_writing, &calls), 42);
  assert_int_equal(calls, 3);
  struct text t = {NULL, 0, 0};
  cq_pool *empty;
  assert_cq_ok(cq_pool_create(&empty, NULL));
  assert_cq_ok(cq_pool_write_metrics(empty, append, &t));
  check_exposition(t.buf);
  free(t.buf);
  assert_cq_ok(cq_pool_destroy(empty));
  assert_cq_ok(cq_pool_destroy(p));
  assert_cq_err(cq_pool_write_metrics(NULL, append, &t), CQ_EINVAL);
}

/* ------------------------------------------------------------------------ */
/* Event hook                                                                */
/* ------------------------------------------------------------------------ */

struct event_log {
  cq_pool *pool;
  char text[1024];
  int lock_held; /* set if the hook ever ran with the pool lock held */
};

static const char *type_name(cq_event_type t) {
  switch (t) {
  case CQ_EVENT_GRANTED:
    return "granted";
  case CQ_EVENT_PARKED:
    return "parked";
  case CQ_EVENT_RESERVED:
    return "reserved";
  case CQ_EVENT_RELEASED:
    return "released";
  case CQ_EVENT_TIMED_OUT:
    return "timed_out";
  case CQ_EVENT_CANCELLED:
    return "cancelled";
  case CQ_EVENT_CLOSED:
    return "closed";
  case CQ_EVENT_NEVER:
    return "never";
  case CQ_EVENT_OVERDUE:
    return "overdue";
  case CQ_EVENT_LOST:
    return "lost";
  case CQ_EVENT_WARNING:
    return "warning";
  }
  return "?";
}

static void on_event(const cq_event *ev, void *arg) {
  struct event_log *log = arg;
  /* The pool lock must be free: the test is single-threaded, so a busy
   * lock would be held by this very thread. */
  if (pthread_mutex_trylock(&log->pool->lock) == 0)
    pthread_mutex_unlock(&log->pool->lock);
  else
    log->lock_held = 1;
  char one[96];
  const char *who = ev->data != NULL ? (const char *)ev->data : "-";
  if (ev->type == CQ_EVENT_RESERVED)
    snprintf(one, sizeof(one), "%s:%s:%s ", type_name(ev->type), who,
             ev->resource);
  else if (ev->type == CQ_EVENT_GRANTED)
    snprintf(one, sizeof(one), "%s:%s:%lld ", type_name(ev->type), who,
             (long long)ev->wait_ms);
  else
    snprintf(one, sizeof(one), "%s:%s ", type_name(ev->type), who);
  strncat(log->text, one, sizeof(log->text) - strlen(log->text) - 1);
}

static void
test_event_hook_sees_every_step_in_order_without_the_lock(void **state) {
  (void)state;
  struct event_log log;
  memset(&log, 0, sizeof(log));
  cq_pool *p = virtual_pool(on_event, &log);
  log.pool = p;
  assert_cq_ok(cq_budget_add(p, "b", 1));
  cq_req r;
  cqt_req(&r, p, "b:1");
  cq_grant a, b, c;
  cq_grant_init(&a);
  cq_grant_init(&b);
  cq_grant_init(&c);
  a.data = (void *)"A";
  b.data = (void *)"B";
  c.data = (void *)"C";
  assert_cq_ok(cq_grant_try(p, &a, &r));
  assert_cq_ok(cq_grant_submit(p, &b, &r, CQ_NEVER, noop_cb));
  assert_cq_ok(cq_grant_submit(p, &c, &r, now_ms + 5, noop_cb));
  now_ms += 5;
  assert_cq_ok(cq_pool_expire(p, NULL));
  now_ms += 3;
  assert_cq_ok(cq_grant_release(p, &a));
  assert_cq_ok(cq_grant_submit(p, &c, &r, CQ_NEVER, noop_cb));
  assert_cq_ok(cq_grant_cancel(p, &c));
  assert_cq_ok(cq_grant_release(p, &b));
  assert_string_equal(log.text, "granted:A:0 parked:B reserved:B:b parked:C "
                                "timed_out:C released:A granted:B:8 parked:C "
                                "reserved:C:b cancelled:C released:B ");
  assert_false(log.lock_held);
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(p, &st));
  assert_int_equal(st.events_dropped, 0);
  assert_cq_ok(cq_pool_destroy(p));
}

struct busy_hook {
  cq_pool *pool;
  cq_req *req;
  int calls;
  int burst_done;
  char last[64];
};

/* On its first call, makes events faster than it consumes them: three
 * try + release cycles, six events, into a buffer of two. */
static void busy_on_event(const cq_event *ev, void *arg) {
  struct busy_hook *h = arg;
  h->calls++;
  snprintf(h->last, sizeof(h->last), "%s", type_name(ev->type));
  if (h->burst_done++ > 0)
    return;
  for (int i = 0; i < 3; i++) {
    cq_grant g;
    cq_grant_init(&g);
    assert_cq_ok(cq_grant_try(h->pool, &g, h->req));
    assert_cq_ok(cq_grant_release(h->pool, &g));
  }
}

static void test_events_beyond_the_buffer_are_dropped_and_counted(void **s) {
  (void)s;
  struct busy_hook h;
  memset(&h, 0, sizeof(h));
  cq_pool *p;
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.on_event = busy_on_event;
  cfg.event_arg = &h;
  cfg.event_buffer = 2;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  assert_cq_ok(cq_budget_add(p, "b", 2));
  cq_req r;
  cqt_req(&r, p, "b:1");
  h.pool = p;
  h.req = &r;
  cq_grant a;
  cq_grant_init(&a);
  assert_cq_ok(cq_grant_try(p, &a, &r)); /* its event starts the burst */
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(p, &st));
  assert_int_equal(st.events_dropped, 4); /* six made, two kept */
  assert_int_equal(h.calls, 3);           /* the first, then the two kept */
  assert_string_equal(h.last, "released");
  assert_cq_ok(cq_grant_release(p, &a));
  assert_cq_ok(cq_pool_destroy(p));
}

/* The exposition's waiting-time histogram counts exactly: the buckets are
 * powers of two of a millisecond, where the library's histogram has
 * boundaries, and a wait is counted under a bound it is below. */
static void test_wait_buckets_count_exactly_below_each_power_of_two(void **s) {
  (void)s;
  struct cq__hist h;
  memset(&h, 0, sizeof(h));
  static const int64_t waits[] = {0,  1,  2,    3,    7,    8,    15,
                                  16, 17, 1023, 1024, 5000, 70000};
  for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
    cq__hist_add(&h, waits[i]);
  for (int b = 0; b < CQ_WAIT_BUCKETS; b++) {
    int64_t bound = (int64_t)1 << b;
    uint64_t want = 3; /* three more granted at once, at 0 ms */
    for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
      want += waits[i] < bound;
    assert_int_equal(cq__hist_below(&h, 3, bound), want);
  }
}

static void test_event_types_have_names(void **s) {
  (void)s;
  assert_string_equal(cq_event_type_name(CQ_EVENT_GRANTED), "granted");
  assert_string_equal(cq_event_type_name(CQ_EVENT_TIMED_OUT), "timed_out");
  assert_string_equal(cq_event_type_name(CQ_EVENT_OVERDUE), "overdue");
  assert_string_equal(cq_event_type_name(0), "unknown");
  assert_string_equal(cq_event_type_name(CQ_EVENT_MAX_ + 1), "unknown");
  for (int t = 1; t <= CQ_EVENT_MAX_; t++) {
    assert_string_not_equal(cq_event_type_name(t), "unknown");
    for (int u = 1; u < t; u++)
      assert_string_not_equal(cq_event_type_name(t), cq_event_type_name(u));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_snapshot_counts_grants_timeouts_cancellations_and_waits),
      cmocka_unit_test(test_histogram_quantiles_are_within_an_eighth),
      cmocka_unit_test(test_wait_buckets_count_exactly_below_each_power_of_two),
      cmocka_unit_test(test_event_types_have_names),
      cmocka_unit_test(test_pool_snapshot_lists_every_resource_in_order),
      cmocka_unit_test(test_prometheus_exposition_follows_the_format),
      cmocka_unit_test(test_metrics_writer_can_stop_the_exposition),
      cmocka_unit_test(
          test_event_hook_sees_every_step_in_order_without_the_lock),
      cmocka_unit_test(test_events_beyond_the_buffer_are_dropped_and_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
