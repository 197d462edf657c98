/*
 * Requests: a set of (resource, amount) items built once and reused.
 *
 * Building a request resolves each name to its resource, checks the amount
 * against the resource as it is now, and keeps the items sorted in resource
 * order, so the acquire path needs no name lookup, no sort and no
 * allocation. Every failure leaves the request as it was and explains itself
 * in the request's message buffer; a request is owned by one builder, so the
 * buffer is not shared between threads the way a pool would be.
 */
#include "pool.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

size_t cq_req_size(void) { return sizeof(cq_req); }

int cq_req_init(cq_req *req, cq_pool *pool) {
  if (req == NULL || pool == NULL)
    return CQ_EINVAL;
  struct cq__req *r = cq__req_of(req);
  memset(r, 0, sizeof(*r));
  r->magic = CQ__REQ_MAGIC;
  r->pool = pool; /* no flags: an empty request takes the lock */
  CQ__TO_BACKEND(pool, req_init, req, pool);
  return 0;
}

static bool req_ok(const cq_req *req) {
  return req != NULL && cq__req_ofc(req)->magic == CQ__REQ_MAGIC;
}

size_t cq_req_count(const cq_req *req) {
  if (!req_ok(req))
    return 0;
  CQ__TO_BACKEND(cq__req_pool(req), req_count, req);
  return cq__req_ofc(req)->n_items;
}

const char *cq_req_error(const cq_req *req) {
  return req_ok(req) ? cq__req_ofc(req)->msg : "";
}

static uint64_t item_rank(const struct cq__ritem *it) {
  return cq__rank(it->res->kind, it->res->uid);
}

/* Insert `it` keeping the items in resource order. */
static void insert_item(struct cq__req *r, const struct cq__ritem *it) {
  uint64_t rank = item_rank(it);
  uint32_t i = r->n_items;
  while (i > 0 && item_rank(&r->items[i - 1]) > rank) {
    r->items[i] = r->items[i - 1];
    i--;
  }
  r->items[i] = *it;
  r->n_items++;
}

/* Whether every item is a budget or a class, so attempts may skip the
 * lock. */
static bool all_budgets(const struct cq__req *r) {
  for (uint32_t i = 0; i < r->n_items; i++)
    if (r->items[i].res->kind == CQ__RES_DEVICES)
      return false;
  return true;
}

/* A request may skip the lock when it names budgets only and has no hold
 * limit (limited grants are kept in order of their ends, under the lock).
 * An empty request takes the lock too: it holds no units, so only the
 * pool's count of held grants shows it to cq_pool_destroy(). */
static uint16_t lockfree_flag(const struct cq__req *r) {
  return r->n_items > 0 && all_budgets(r) && r->limit_ms == 0 ? CQ__REQ_LOCKFREE
                                                              : 0;
}

void cq__item_text(char *buf, size_t len, const struct cq__ritem *it) {
  char amount[32];
  if (it->mode == CQ__MODE_FRACTION)
    cq__fmt_milli(amount, sizeof(amount), it->amount);
  else
    snprintf(amount, sizeof(amount), "%" PRId64, it->amount);
  snprintf(buf, len, "%s:%s", it->res->name, amount);
}

/* Why `mode` is not an amount the resource can be asked for, or NULL. */
static const char *mode_mismatch(uint8_t mode, uint8_t kind, bool as_class) {
  if (kind == CQ__RES_DEVICES)
    return mode == CQ__MODE_UNITS
               ? "%s is a device pool: ask a fraction or whole devices"
               : NULL;
  if (mode != CQ__MODE_UNITS)
    return "%s is not a device pool: ask units";
  if (kind == CQ__RES_CLASS && !as_class)
    return "%s is a class: give it to the request as its class";
  if (kind != CQ__RES_CLASS && as_class)
    return "%s is not a class";
  return NULL;
}

static int add_item(cq_req *req, const char *resource, int64_t amount,
                    uint8_t mode, bool as_class) {
  if (!req_ok(req) || resource == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(cq__req_pool(req), req_add, req, resource, amount,
                 as_class ? CQ_BACKEND_CLASS : (int)mode);
  struct cq__req *r = cq__req_of(req);
  cq_pool *p = r->pool;
  int rc = 0;

  cq__mutex_lock(&p->lock);
  struct cq__res *res = cq__res_find(&p->tab, resource);
  if (res == NULL) {
    cq__msgf(r->msg, CQ__MSG_MAX, "request asks unknown resource \"%.*s\"",
             CQ_NAME_MAX, resource);
    rc = CQ_ENOENT;
    goto out;
  }
  const char *mismatch = mode_mismatch(mode, res->kind, as_class);
  if (mismatch != NULL) {
    cq__msgf(r->msg, CQ__MSG_MAX, mismatch, res->name);
    rc = CQ_EINVAL;
    goto out;
  }
  for (uint32_t i = 0; i < r->n_items; i++) {
    if (r->items[i].res == res) {
      cq__msgf(r->msg, CQ__MSG_MAX, "request already names %s", res->name);
      rc = CQ_EEXIST;
      goto out;
    }
    if (as_class && r->items[i].res->kind == CQ__RES_CLASS) {
      cq__msgf(r->msg, CQ__MSG_MAX, "request already has class %s",
               r->items[i].res->name);
      rc = CQ_EEXIST;
      goto out;
    }
  }
  struct cq__ritem it = {res, amount, mode};
  char what[CQ_NAME_MAX + 40];
  cq__item_text(what, sizeof(what), &it);
  if (amount <= 0 || (mode == CQ__MODE_FRACTION && amount > CQ_DEVICE_MILLI)) {
    cq__msgf(r->msg, CQ__MSG_MAX, "request asks %s but %s", what,
             mode == CQ__MODE_FRACTION
                 ? "a fraction must be above 0 and at most 1"
                 : "amounts must be positive");
    rc = CQ_ERANGE;
    goto out;
  }
  if (r->n_items == CQ_REQ_MAX_ITEMS) {
    cq__msgf(r->msg, CQ__MSG_MAX, "request names more than %d resources",
             CQ_REQ_MAX_ITEMS);
    rc = CQ_ETOOMANY;
    goto out;
  }
  /* Capacities can change: whether it fits is for each acquire to say. */
  insert_item(r, &it);
  r->flags = lockfree_flag(r);
  r->msg[0] = '\0';
out:
  cq__mutex_unlock(&p->lock);
  return rc;
}

int cq_req_set_hold_limit(cq_req *req, int64_t limit_ms) {
  if (!req_ok(req))
    return CQ_EINVAL;
  CQ__TO_BACKEND(cq__req_pool(req), req_set_hold_limit, req, limit_ms);
  struct cq__req *r = cq__req_of(req);
  if (limit_ms < 0 || limit_ms > CQ__LIMIT_MAX) {
    cq__msgf(r->msg, CQ__MSG_MAX,
             "hold limit %" PRId64 " ms: it must be 0 (none) or from 1 to "
             "%" PRId64 " ms",
             limit_ms, CQ__LIMIT_MAX);
    return CQ_ERANGE;
  }
  r->limit_ms = limit_ms;
  r->flags = lockfree_flag(r);
  r->msg[0] = '\0';
  return 0;
}

int cq_req_add(cq_req *req, const char *resource, int64_t amount) {
  return add_item(req, resource, amount, CQ__MODE_UNITS, false);
}

int cq_req_add_fraction(cq_req *req, const char *resource, int64_t milli) {
  return add_item(req, resource, milli, CQ__MODE_FRACTION, false);
}

int cq_req_add_devices(cq_req *req, const char *resource, int64_t count) {
  return add_item(req, resource, count, CQ__MODE_WHOLE, false);
}

int cq_req_set_class(cq_req *req, const char *name) {
  return add_item(req, name, 1, CQ__MODE_UNITS, true);
}

/* Parse a budget amount: decimal digits only, at most CQ_BUDGET_MAX. */
static int parse_units(const char *text, int64_t *out) {
  int64_t v = 0;
  const char *c = text;
  if (*c == '\0')
    return CQ_EPARSE;
  for (; *c >= '0' && *c <= '9'; c++) {
    v = v * 10 + (*c - '0');
    if (v > CQ_BUDGET_MAX)
      return CQ_ERANGE;
  }
  if (*c != '\0')
    return c == text && *c == '-' ? CQ_ERANGE : CQ_EPARSE;
  *out = v;
  return 0;
}

int cq_req_add_str(cq_req *req, const char *resource, const char *amount) {
  if (!req_ok(req) || resource == NULL || amount == NULL)
    return CQ_EINVAL;
  struct cq__req *r = cq__req_of(req);
  /* The kind of the resource says how to read the amount; asked through
   * the API, so that this serves every kind of pool. */
  cq_resource_stats st;
  bool known = cq_resource_stats_get(r->pool, resource, &st) == 0;
  bool devices = known && st.kind == CQ_KIND_DEVICES;
  if (!known) {
    /* How to read the amount depends on the resource: name it first. */
    cq__msgf(r->msg, CQ__MSG_MAX, "request asks unknown resource \"%.*s\"",
             CQ_NAME_MAX, resource);
    return CQ_ENOENT;
  }

  int64_t v = 0;
  int rc =
      devices ? cq_device_amount_parse(amount, &v) : parse_units(amount, &v);
  if (rc != 0) {
    cq__msgf(r->msg, CQ__MSG_MAX, "request asks %.*s:%.32s: %s", CQ_NAME_MAX,
             resource, amount,
             rc == CQ_EPARSE ? "not a number"
             : devices       ? "a device amount is above 0, in thousandths"
                             : "out of range");
    return rc;
  }
  if (!devices)
    return cq_req_add(req, resource, v);
  if (v <= CQ_DEVICE_MILLI && v % CQ_DEVICE_MILLI != 0)
    return cq_req_add_fraction(req, resource, v);
  if (v % CQ_DEVICE_MILLI != 0) {
    cq__msgf(r->msg, CQ__MSG_MAX,
             "request asks %.*s:%.32s, which is not a valid amount of a device "
             "pool: a fraction up to 1, or whole devices",
             CQ_NAME_MAX, resource, amount);
    return CQ_ERANGE;
  }
  return cq_req_add_devices(req, resource, v / CQ_DEVICE_MILLI);
}
