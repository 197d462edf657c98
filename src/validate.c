/*
 * Whether a request can ever fit (validate.h): checked by every acquire,
 * since capacities change, and by the policy for the waiters when one
 * shrinks. A budget's request fits some day when it is at most the
 * capacity, or the budget allows lone requests; a device pool's when it has
 * a device online for a fraction, or enough of them for whole devices.
 */
#include "validate.h"

#include "budget.h"

#include <inttypes.h>

int cq__validate_item(const struct cq__ritem *it, char *msg) {
  const struct cq__res *res = it->res;
  if (atomic_load_explicit(&res->word, memory_order_relaxed) & CQ__W_REMOVED) {
    cq__msgf(msg, CQ__MSG_MAX, "request names %s, which was removed",
             res->name);
    return CQ_ENOENT;
  }
  if (res->kind == CQ__RES_DEVICES) {
    if (it->mode == CQ__MODE_WHOLE && it->amount > (int64_t)res->n_online) {
      cq__msgf(msg, CQ__MSG_MAX,
               "request asks %" PRId64 " devices of %s but it has %u",
               it->amount, res->name, res->n_online);
      return CQ_ENEVER;
    }
    if (it->mode == CQ__MODE_FRACTION && res->n_online == 0) {
      char what[CQ_NAME_MAX + 40];
      cq__item_text(what, sizeof(what), it);
      cq__msgf(msg, CQ__MSG_MAX, "request asks %s but %s has no device", what,
               res->name);
      return CQ_ENEVER;
    }
    return 0;
  }
  int64_t cap = cq__res_capacity(res);
  if (it->amount > cap && !(res->flags & CQ_BUDGET_LONE)) {
    if (res->kind == CQ__RES_CLASS)
      cq__msgf(msg, CQ__MSG_MAX,
               "request is of class %s, whose max_workers is %" PRId64,
               res->name, cap);
    else
      cq__msgf(msg, CQ__MSG_MAX,
               "request asks %s:%" PRId64 " but its capacity is %" PRId64,
               res->name, it->amount, cap);
    return CQ_ENEVER;
  }
  return 0;
}

int cq__validate(const struct cq__req *req, char *msg) {
  for (uint32_t i = 0; i < req->n_items; i++) {
    int rc = cq__validate_item(&req->items[i], msg);
    if (rc != 0)
      return rc;
  }
  return 0;
}
