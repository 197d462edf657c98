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
#include "cq_internal.h"

#include <inttypes.h>
#include <string.h>

int cq_req_init(cq_req *req, cq_pool *pool) {
  if (req == NULL || pool == NULL)
    return CQ_EINVAL;
  struct cq__req *r = cq__req_of(req);
  memset(r, 0, sizeof(*r));
  r->magic = CQ__REQ_MAGIC;
  r->pool = pool;
  r->flags = CQ__REQ_LOCKFREE;
  return 0;
}

static bool req_ok(const cq_req *req) {
  return req != NULL && cq__req_ofc(req)->magic == CQ__REQ_MAGIC;
}

size_t cq_req_count(const cq_req *req) {
  return req_ok(req) ? cq__req_ofc(req)->n_items : 0;
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

/* Whether every item is a budget, so attempts may skip the lock. */
static bool all_budgets(const struct cq__req *r) {
  for (uint32_t i = 0; i < r->n_items; i++)
    if (r->items[i].res->kind != CQ__RES_BUDGET)
      return false;
  return true;
}

int cq_req_add(cq_req *req, const char *resource, int64_t amount) {
  if (!req_ok(req) || resource == NULL)
    return CQ_EINVAL;
  struct cq__req *r = cq__req_of(req);
  cq_pool *p = r->pool;
  int rc = 0;

  cq__mutex_lock(&p->lock);
  struct cq__res *res = cq__res_find(p, resource);
  if (res == NULL) {
    cq__msgf(r->msg, "request asks unknown resource \"%.*s\"", CQ_NAME_MAX,
             resource);
    rc = CQ_ENOENT;
    goto out;
  }
  for (uint32_t i = 0; i < r->n_items; i++) {
    if (r->items[i].res == res) {
      cq__msgf(r->msg, "request already names %s", res->name);
      rc = CQ_EEXIST;
      goto out;
    }
  }
  if (amount <= 0) {
    cq__msgf(r->msg, "request asks %s:%" PRId64 " but amounts must be positive",
             res->name, amount);
    rc = CQ_ERANGE;
    goto out;
  }
  if (r->n_items == CQ_REQ_MAX_ITEMS) {
    cq__msgf(r->msg, "request names more than %d resources", CQ_REQ_MAX_ITEMS);
    rc = CQ_ETOOMANY;
    goto out;
  }
  struct cq__ritem it = {res, amount};
  rc = cq__req_validate_item(p, &it, r->msg);
  if (rc == 0) {
    insert_item(r, &it);
    r->flags = all_budgets(r) ? CQ__REQ_LOCKFREE : 0;
    r->msg[0] = '\0';
  }
out:
  cq__mutex_unlock(&p->lock);
  return rc;
}

int cq__req_validate_item(cq_pool *p, const struct cq__ritem *it, char *msg) {
  (void)p;
  const struct cq__res *res = it->res;
  if (atomic_load_explicit(&res->word, memory_order_relaxed) & CQ__W_REMOVED) {
    cq__msgf(msg, "request names %s, which was removed", res->name);
    return CQ_ENOENT;
  }
  int64_t cap = cq__res_capacity(res);
  if (it->amount > cap) {
    cq__msgf(msg, "request asks %s:%" PRId64 " but its capacity is %" PRId64,
             res->name, it->amount, cap);
    return CQ_ENEVER;
  }
  return 0;
}

int cq__req_validate(cq_pool *p, const struct cq__req *req, char *msg) {
  for (uint32_t i = 0; i < req->n_items; i++) {
    int rc = cq__req_validate_item(p, &req->items[i], msg);
    if (rc != 0)
      return rc;
  }
  return 0;
}
