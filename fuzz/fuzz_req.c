/*
 * Fuzz harness: request specs, cq_req_parse(), through its explicit-length
 * twin cq__req_parse_n() so that any bytes reach the lexer, NUL included.
 *
 * Each input is parsed into two requests of one pool: an empty one, and one
 * that already names a budget and has a hold limit (the parser adds to what
 * a request has). What every input must keep:
 * - the call returns 0 or a documented code, and a failure explains itself
 *   in cq_req_error(), "request spec: ...";
 * - a failure leaves the request as it was, member by member, but for that
 *   message;
 * - a success leaves a well-formed request (items in resource order, each
 *   resource once, at most one class, amounts in range, the lock-free flag
 *   right) holding exactly the spec's items, read back by a second, much
 *   simpler reading of the spec;
 * - on the idle pool, a try of the parsed request is granted exactly when
 *   every item can ever fit, and CQ_ENEVER otherwise, headroom agrees, and
 *   releasing gives every unit back.
 *
 * The pool has device pools (one of 0 devices), budgets (one with the
 * lone-request allowance), classes, and more resources than a request may
 * name, so that CQ_ETOOMANY is reachable.
 */
#include "cq_internal.h"
#include "fuzz_util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Budgets r0..r15 on top of the named ones: 16 would fit a request. */
#define EXTRA_BUDGETS 16

static cq_pool *new_pool(struct fuzz_alloc *fa) {
  cq_allocator a = fuzz_allocator(fa);
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &a;
  cq_pool *pool = NULL;
  FUZZ_CHECK_RC(cq_pool_create(&pool, &cfg), 0);
  FUZZ_CHECK_RC(cq_budget_add(pool, "db", 10), 0);
  FUZZ_CHECK_RC(cq_budget_add(pool, "cpu", 8), 0);
  FUZZ_CHECK_RC(cq_budget_add_ex(pool, "memory_mib", 24576, CQ_BUDGET_LONE), 0);
  FUZZ_CHECK_RC(cq_devices_add(pool, "gpu", 4, NULL), 0);
  FUZZ_CHECK_RC(cq_devices_add(pool, "tpu", 2, NULL), 0);
  FUZZ_CHECK_RC(cq_devices_add(pool, "npu", 0, NULL), 0);
  FUZZ_CHECK_RC(cq_class_add(pool, "predict", 2), 0);
  FUZZ_CHECK_RC(cq_class_add(pool, "extract", 3), 0);
  for (int i = 0; i < EXTRA_BUDGETS; i++) {
    char name[8];
    snprintf(name, sizeof(name), "r%d", i);
    FUZZ_CHECK_RC(cq_budget_add(pool, name, 1), 0);
  }
  return pool;
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

static void trim(const char *s, size_t *at, size_t *end) {
  while (*at < *end && is_blank(s[*at]))
    (*at)++;
  while (*end > *at && is_blank(s[*end - 1]))
    (*end)--;
}

static bool names(const struct cq__ritem *it, const char *s, size_t at,
                  size_t end) {
  return strlen(it->res->name) == end - at &&
         memcmp(it->res->name, s + at, end - at) == 0;
}

/* A decimal amount in thousandths, or -1: what a device amount should be,
 * written without looking at the library's parser. At most three decimals
 * that count; more are allowed only as zeros. */
static int64_t milli_of(const char *s, size_t at, size_t end) {
  int64_t whole = 0, frac = 0;
  size_t i = at;
  for (; i < end && s[i] >= '0' && s[i] <= '9'; i++) {
    whole = whole * 10 + (s[i] - '0');
    if (whole > CQ_DEVICES_MAX)
      return -1;
  }
  bool digits = i > at;
  int decimals = 0;
  if (i < end && s[i] == '.') {
    for (i++; i < end && s[i] >= '0' && s[i] <= '9'; i++, decimals++) {
      if (decimals < 3)
        frac = frac * 10 + (s[i] - '0');
      else if (s[i] != '0')
        return -1;
    }
    if (decimals == 0)
      return -1;
  }
  if (i != end || !(digits || decimals > 0))
    return -1;
  for (int d = decimals; d < 3; d++)
    frac *= 10;
  return whole * CQ_DEVICE_MILLI + frac;
}

/* Item [at, end) of an accepted spec, "name=value" or "class=name", is in
 * the request: the one item naming that resource, with that amount. */
static void check_item(const struct cq__req *r, const char *s, size_t at,
                       size_t end) {
  size_t eq = at;
  while (s[eq] != '=')
    eq++;
  size_t na = at, ne = eq, va = eq + 1, ve = end;
  trim(s, &na, &ne);
  trim(s, &va, &ve);
  bool is_class = ne - na == 5 && memcmp(s + na, "class", 5) == 0;
  size_t found = 0;
  const struct cq__ritem *it = NULL;
  for (unsigned i = 0; i < r->n_items; i++) {
    if (is_class ? names(&r->items[i], s, va, ve)
                 : names(&r->items[i], s, na, ne)) {
      it = &r->items[i];
      found++;
    }
  }
  FUZZ_CHECK(found == 1);
  if (is_class) {
    FUZZ_CHECK(it->res->kind == CQ__RES_CLASS);
    FUZZ_CHECK(it->mode == CQ__MODE_UNITS && it->amount == 1);
    return;
  }
  if (it->res->kind == CQ__RES_DEVICES) {
    int64_t milli = milli_of(s, va, ve);
    FUZZ_CHECK(milli > 0);
    if (milli < CQ_DEVICE_MILLI) {
      FUZZ_CHECK(it->mode == CQ__MODE_FRACTION && it->amount == milli);
    } else {
      FUZZ_CHECK(milli % CQ_DEVICE_MILLI == 0);
      FUZZ_CHECK(it->mode == CQ__MODE_WHOLE &&
                 it->amount == milli / CQ_DEVICE_MILLI);
    }
    return;
  }
  FUZZ_CHECK(it->res->kind == CQ__RES_BUDGET);
  int64_t units = 0;
  for (size_t i = va; i < ve; i++) {
    FUZZ_CHECK(s[i] >= '0' && s[i] <= '9');
    FUZZ_CHECK(units <= CQ_BUDGET_MAX);
    units = units * 10 + (s[i] - '0');
  }
  FUZZ_CHECK(ve > va && it->mode == CQ__MODE_UNITS && it->amount == units);
}

/* What a request built by the library's calls always looks like. */
static void check_wellformed(const struct cq__req *r, cq_pool *pool,
                             int64_t limit_ms) {
  FUZZ_CHECK(r->magic == CQ__REQ_MAGIC && r->pool == pool);
  FUZZ_CHECK(r->limit_ms == limit_ms);
  FUZZ_CHECK(r->n_items <= CQ_REQ_MAX_ITEMS);
  bool budgets_only = true;
  unsigned classes = 0;
  for (unsigned i = 0; i < r->n_items; i++) {
    const struct cq__ritem *it = &r->items[i];
    FUZZ_CHECK(it->res != NULL);
    if (i > 0)
      FUZZ_CHECK(cq__rank(r->items[i - 1].res->kind, r->items[i - 1].res->uid) <
                 cq__rank(it->res->kind, it->res->uid));
    switch (it->res->kind) {
    case CQ__RES_DEVICES:
      budgets_only = false;
      FUZZ_CHECK(it->mode == CQ__MODE_FRACTION || it->mode == CQ__MODE_WHOLE);
      FUZZ_CHECK(it->amount >= 1);
      FUZZ_CHECK(it->mode == CQ__MODE_WHOLE ? it->amount <= CQ_DEVICES_MAX
                                            : it->amount < CQ_DEVICE_MILLI);
      break;
    case CQ__RES_CLASS:
      classes++;
      FUZZ_CHECK(it->mode == CQ__MODE_UNITS && it->amount == 1);
      break;
    default:
      FUZZ_CHECK(it->res->kind == CQ__RES_BUDGET);
      FUZZ_CHECK(it->mode == CQ__MODE_UNITS);
      FUZZ_CHECK(it->amount >= 1 && it->amount <= CQ_BUDGET_MAX);
    }
  }
  FUZZ_CHECK(classes <= 1);
  /* An empty request takes the lock: only the held count shows it. */
  bool lockfree = r->n_items > 0 && budgets_only && r->limit_ms == 0;
  FUZZ_CHECK(((r->flags & CQ__REQ_LOCKFREE) != 0) == lockfree);
}

/* Whether the item can ever fit the pool as it was made. */
static bool can_fit(const struct cq__ritem *it) {
  const struct cq__res *res = it->res;
  if (res->kind == CQ__RES_DEVICES)
    return it->mode == CQ__MODE_WHOLE ? it->amount <= (int64_t)res->n_online
                                      : res->n_online > 0;
  return it->amount <= cq__res_capacity(res) || (res->flags & CQ_BUDGET_LONE);
}

/* On the idle pool a request is granted at once or can never be. */
static void check_acquire(cq_pool *pool, cq_req *req) {
  const struct cq__req *r = cq__req_ofc(req);
  bool fits = true;
  for (unsigned i = 0; i < r->n_items; i++)
    fits = fits && can_fit(&r->items[i]);
  int64_t copies = -1;
  int rc = cq_req_headroom(pool, req, &copies);
  FUZZ_CHECK_RC(rc, fits ? 0 : CQ_ENEVER);
  FUZZ_CHECK(fits ? copies >= 1 : copies == 0);
  cq_grant grant;
  cq_grant_init(&grant);
  rc = cq_grant_try(pool, &grant, req);
  FUZZ_CHECK_RC(rc, fits ? 0 : CQ_ENEVER);
  if (rc != 0) {
    FUZZ_CHECK(fuzz_msg_ok(cq_grant_error(&grant), CQ__MSG_MAX));
    return;
  }
  FUZZ_CHECK_RC(cq_grant_release(pool, &grant), 0);
  for (unsigned i = 0; i < r->n_items; i++) {
    cq_resource_stats st;
    FUZZ_CHECK_RC(cq_resource_stats_get(pool, r->items[i].res->name, &st), 0);
    FUZZ_CHECK(st.in_use == 0);
  }
}

/* Items and requests compare member by member: their padding is not part
 * of what a call promises to keep. */
static bool same_item(const struct cq__ritem *a, const struct cq__ritem *b) {
  return a->res == b->res && a->amount == b->amount && a->mode == b->mode;
}

static bool same_req(const struct cq__req *a, const struct cq__req *b) {
  if (a->magic != b->magic || a->n_items != b->n_items ||
      a->flags != b->flags || a->pool != b->pool || a->limit_ms != b->limit_ms)
    return false;
  for (unsigned i = 0; i < a->n_items; i++)
    if (!same_item(&a->items[i], &b->items[i]))
      return false;
  return true;
}

static void parse_into(cq_pool *pool, cq_req *req, const char *s, size_t len) {
  cq_req before = *req;
  const struct cq__req *r = cq__req_ofc(req);
  int rc = cq__req_parse_n(req, s, len);
  FUZZ_CHECK(req->data == before.data);
  if (rc != 0) {
    FUZZ_CHECK(rc == CQ_EPARSE || rc == CQ_EINVAL || rc == CQ_ENOENT ||
               rc == CQ_ERANGE || rc == CQ_EEXIST || rc == CQ_ETOOMANY);
    FUZZ_CHECK(fuzz_msg_ok(cq_req_error(req), CQ__MSG_MAX));
    FUZZ_CHECK(strncmp(cq_req_error(req), "request spec: ", 14) == 0);
    FUZZ_CHECK(same_req(r, cq__req_ofc(&before)));
    return;
  }
  const struct cq__req *old = cq__req_ofc(&before);
  FUZZ_CHECK(cq_req_error(req)[0] == '\0');
  check_wellformed(r, pool, old->limit_ms);
  /* What the request had is still there, untouched. */
  for (unsigned i = 0; i < old->n_items; i++) {
    bool kept = false;
    for (unsigned j = 0; j < r->n_items; j++)
      kept = kept || same_item(&r->items[j], &old->items[i]);
    FUZZ_CHECK(kept);
  }
  /* Blanks only is an empty spec; otherwise items are between commas. */
  size_t items = 0, at = 0;
  while (at < len && is_blank(s[at]))
    at++;
  while (at < len) {
    size_t end = at;
    while (end < len && s[end] != ',')
      end++;
    check_item(r, s, at, end);
    items++;
    at = end + 1;
  }
  FUZZ_CHECK(r->n_items == old->n_items + items);
  check_acquire(pool, req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data;
  struct fuzz_alloc fa = {0, -1, 0};
  cq_pool *pool = new_pool(&fa);
  static int marker;

  cq_req empty;
  FUZZ_CHECK_RC(cq_req_init(&empty, pool), 0);
  empty.data = &marker;
  parse_into(pool, &empty, s, size);

  cq_req started;
  FUZZ_CHECK_RC(cq_req_init(&started, pool), 0);
  started.data = &marker;
  FUZZ_CHECK_RC(cq_req_add(&started, "db", 1), 0);
  FUZZ_CHECK_RC(cq_req_set_hold_limit(&started, 1000), 0);
  parse_into(pool, &started, s, size);

  FUZZ_CHECK_RC(cq_pool_destroy(pool), 0);
  FUZZ_CHECK(fa.live == 0);
  return 0;
}
