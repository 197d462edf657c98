/*
 * Fuzz harness: resource specs, cq_pool_add_spec(), through its
 * explicit-length twin cq__pool_add_spec_n() so that any bytes reach the
 * lexer, NUL included.
 *
 * What every input must keep:
 * - the call returns 0, CQ_EPARSE, CQ_EEXIST or CQ_ERANGE (nothing else can
 *   happen on a well-behaved pool), and a failure explains itself in err,
 *   "resource spec: ...";
 * - a failure leaves the pool as it was, compared resource by resource;
 * - a success adds exactly the spec's items, each of the kind, flags and
 *   capacity it declares. The spec is read back by a second, much simpler
 *   reading, which is enough since the parser has just accepted it; and
 *   adding the same spec again fails with CQ_EEXIST, changing nothing;
 * - failing any one allocation of a successful add gives CQ_ENOMEM and
 *   takes back what the call had already added (the undo path, which
 *   nothing but an allocation failure or a racing thread reaches);
 * - the pool is destroyed with every block freed.
 *
 * The pool starts with a budget and a class, so that names already taken
 * are exercised, and a removed budget whose name may be declared again.
 * gpu=auto runs GPU detection: CRONOQ_NUM_GPUS=2 makes it fast and the same
 * on every machine (nvidia-smi is never spawned).
 */
#include "cq_internal.h"
#include "fuzz_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPUs that gpu=auto finds, through CRONOQ_NUM_GPUS. */
#define AUTO_GPUS 2

/* Device pools larger than this are not written out as metrics: 65536
 * devices would cost tens of milliseconds per input for no new code. */
#define METRICS_DEVICES_MAX 4096

static cq_pool *new_pool(struct fuzz_alloc *fa) {
  cq_allocator a = fuzz_allocator(fa);
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &a;
  cq_pool *pool = NULL;
  FUZZ_CHECK_RC(cq_pool_create(&pool, &cfg), 0);
  FUZZ_CHECK_RC(cq_budget_add(pool, "db", 10), 0);
  FUZZ_CHECK_RC(cq_class_add(pool, "jobs", 4), 0);
  FUZZ_CHECK_RC(cq_budget_add(pool, "old", 1), 0);
  FUZZ_CHECK_RC(cq_resource_remove(pool, "old"), 0);
  return pool;
}

static void free_pool(cq_pool *pool, const struct fuzz_alloc *fa) {
  FUZZ_CHECK_RC(cq_pool_destroy(pool), 0);
  FUZZ_CHECK(fa->live == 0);
}

/* Every resource of a pool, in resource order. */
struct snap {
  size_t n;
  cq_resource_stats *res;
};

static struct snap take_snap(cq_pool *pool) {
  struct snap s = {0, NULL};
  FUZZ_CHECK_RC(cq_pool_snapshot(pool, NULL, 0, &s.n), 0);
  s.res = calloc(s.n ? s.n : 1, sizeof(*s.res));
  FUZZ_CHECK(s.res != NULL);
  size_t again = 0;
  FUZZ_CHECK_RC(cq_pool_snapshot(pool, s.res, s.n, &again), 0);
  FUZZ_CHECK(again == s.n);
  return s;
}

static bool same_resource(const cq_resource_stats *a,
                          const cq_resource_stats *b) {
  return strcmp(a->name, b->name) == 0 && a->kind == b->kind &&
         a->flags == b->flags && a->capacity == b->capacity &&
         a->in_use == b->in_use && a->devices == b->devices &&
         a->online == b->online;
}

/* The pool holds what `before` recorded, and nothing else. */
static void check_unchanged(cq_pool *pool, const struct snap *before) {
  struct snap now = take_snap(pool);
  FUZZ_CHECK(now.n == before->n);
  for (size_t i = 0; i < now.n; i++)
    FUZZ_CHECK(same_resource(&now.res[i], &before->res[i]));
  free(now.res);
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* [*at, *end) without the blanks around it. */
static void trim(const char *s, size_t *at, size_t *end) {
  while (*at < *end && is_blank(s[*at]))
    (*at)++;
  while (*end > *at && is_blank(s[*end - 1]))
    (*end)--;
}

static bool token_is(const char *s, size_t at, size_t end, const char *word) {
  return end - at == strlen(word) && memcmp(s + at, word, end - at) == 0;
}

/* One item of an accepted spec, as the README describes it. */
struct expect {
  char name[CQ_NAME_MAX + 1];
  int kind;
  unsigned flags;
  int64_t capacity;
  uint32_t devices;
};

/*
 * Read item [at, end) of a spec the parser accepted: "name(:option)*=value"
 * with blanks anywhere between the parts. Acceptance has proved it well
 * formed, so this splits instead of parsing, and stays independent of the
 * lexer it checks.
 */
static struct expect read_item(const char *s, size_t at, size_t end) {
  struct expect e;
  memset(&e, 0, sizeof(e));
  size_t eq = at;
  while (s[eq] != '=')
    eq++;
  size_t part = at, part_end = at;
  bool devices = false, klass = false, lone = false, first = true;
  while (part < eq) {
    part_end = part;
    while (part_end < eq && s[part_end] != ':')
      part_end++;
    size_t a = part, b = part_end;
    trim(s, &a, &b);
    if (first) {
      FUZZ_CHECK(b - a >= 1 && b - a <= CQ_NAME_MAX);
      memcpy(e.name, s + a, b - a);
      first = false;
    } else {
      devices = devices || token_is(s, a, b, "devices");
      klass = klass || token_is(s, a, b, "class");
      lone = lone || token_is(s, a, b, "lone");
    }
    part = part_end + 1;
  }
  size_t a = eq + 1, b = end;
  trim(s, &a, &b);
  devices = devices || strcmp(e.name, "gpu") == 0;
  e.kind = devices ? CQ_KIND_DEVICES : klass ? CQ_KIND_CLASS : CQ_KIND_BUDGET;
  e.flags = lone ? CQ_BUDGET_LONE : 0u;
  int64_t v = 0;
  if (token_is(s, a, b, "auto")) {
    FUZZ_CHECK(devices);
    v = AUTO_GPUS;
  } else {
    FUZZ_CHECK(b > a);
    for (size_t i = a; i < b; i++) {
      FUZZ_CHECK(s[i] >= '0' && s[i] <= '9');
      FUZZ_CHECK(v <= CQ_BUDGET_MAX);
      v = v * 10 + (s[i] - '0');
    }
  }
  FUZZ_CHECK(v <= (devices ? CQ_DEVICES_MAX : CQ_BUDGET_MAX));
  e.capacity = devices ? v * CQ_DEVICE_MILLI : v;
  e.devices = devices ? (uint32_t)v : 0;
  return e;
}

/* A device pool's devices are named "0".."n-1" (detection included, through
 * CRONOQ_NUM_GPUS); look at the ends. */
static void check_device_ids(cq_pool *pool, const struct expect *e) {
  cq_device_stats d;
  if (e->devices == 0) {
    FUZZ_CHECK_RC(cq_device_stats_get(pool, e->name, 0, &d), CQ_ENOENT);
    return;
  }
  char want[16];
  uint32_t ends[2] = {0, e->devices - 1};
  for (int i = 0; i < 2; i++) {
    FUZZ_CHECK_RC(cq_device_stats_get(pool, e->name, ends[i], &d), 0);
    snprintf(want, sizeof(want), "%u", (unsigned)ends[i]);
    FUZZ_CHECK(strcmp(d.id, want) == 0);
    FUZZ_CHECK(d.index == ends[i] && d.online && d.used_milli == 0);
  }
  FUZZ_CHECK_RC(cq_device_stats_get(pool, e->name, e->devices, &d), CQ_ENOENT);
}

static int count_bytes(const char *text, size_t len, void *arg) {
  (void)text;
  *(size_t *)arg += len;
  return 0;
}

/* After a success: the old resources, plus exactly the spec's items. */
static void check_added(cq_pool *pool, const struct snap *before, const char *s,
                        size_t len) {
  struct snap now = take_snap(pool);
  for (size_t i = 0; i < before->n; i++) {
    cq_resource_stats st;
    FUZZ_CHECK_RC(cq_resource_stats_get(pool, before->res[i].name, &st), 0);
    FUZZ_CHECK(same_resource(&st, &before->res[i]));
  }
  size_t items = 0, at = 0;
  uint64_t devices = 0;
  while (at <= len) {
    size_t end = at;
    while (end < len && s[end] != ',')
      end++;
    struct expect e = read_item(s, at, end);
    cq_resource_stats st;
    FUZZ_CHECK_RC(cq_resource_stats_get(pool, e.name, &st), 0);
    FUZZ_CHECK(st.kind == e.kind && st.flags == e.flags);
    FUZZ_CHECK(st.capacity == e.capacity && st.in_use == 0);
    FUZZ_CHECK(st.devices == e.devices && st.online == e.devices);
    if (e.kind == CQ_KIND_DEVICES)
      check_device_ids(pool, &e);
    devices += e.devices;
    items++;
    at = end + 1;
  }
  FUZZ_CHECK(now.n == before->n + items);
  if (devices <= METRICS_DEVICES_MAX) {
    size_t written = 0;
    FUZZ_CHECK_RC(cq_pool_write_metrics(pool, count_bytes, &written), 0);
    FUZZ_CHECK(written > 0);
  }
  free(now.res);
}

static bool failed_as_documented(int rc, const char *err, size_t err_len) {
  return (rc == CQ_EPARSE || rc == CQ_EEXIST || rc == CQ_ERANGE) &&
         fuzz_msg_ok(err, err_len) && strncmp(err, "resource spec: ", 15) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool env_set;
  if (!env_set) {
    FUZZ_CHECK(setenv("CRONOQ_NUM_GPUS", "2", 1) == 0);
    env_set = true;
  }
  const char *spec = (const char *)data;
  char err[160];
  struct fuzz_alloc fa = {0, -1, 0};
  cq_pool *pool = new_pool(&fa);
  struct snap before = take_snap(pool);

  fa.calls = 0;
  int rc = cq__pool_add_spec_n(pool, spec, size, NULL, err, sizeof(err));
  long calls = fa.calls;
  if (rc == 0) {
    FUZZ_CHECK(err[0] == '\0');
    check_added(pool, &before, spec, size);
    struct snap added = take_snap(pool);
    rc = cq__pool_add_spec_n(pool, spec, size, NULL, err, sizeof(err));
    FUZZ_CHECK_RC(rc, CQ_EEXIST);
    FUZZ_CHECK(failed_as_documented(rc, err, sizeof(err)));
    check_unchanged(pool, &added);
    free(added.res);
    rc = 0;
  } else {
    FUZZ_CHECK(failed_as_documented(rc, err, sizeof(err)));
    check_unchanged(pool, &before);
  }
  free_pool(pool, &fa);

  /* Out of memory at each allocation a success made (or a spread of them),
   * on a fresh pool each time. */
  for (long k = 0; rc == 0 && k < fuzz_fail_points(calls); k++) {
    struct fuzz_alloc oom = {0, -1, 0};
    pool = new_pool(&oom);
    oom.calls = 0;
    oom.fail_at = fuzz_fail_point(calls, k);
    int oom_rc = cq__pool_add_spec_n(pool, spec, size, NULL, err, sizeof(err));
    oom.fail_at = -1;
    FUZZ_CHECK_RC(oom_rc, CQ_ENOMEM);
    FUZZ_CHECK(fuzz_msg_ok(err, sizeof(err)));
    check_unchanged(pool, &before);
    free_pool(pool, &oom);
  }
  free(before.res);
  return 0;
}
