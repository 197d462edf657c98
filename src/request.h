/*
 * Requests (request.c): a set of (resource, amount) items built once and
 * reused, living inside the caller's cq_req storage.
 *
 * The first CQ_BACKEND_HEADER_BYTES of the storage are the same for every
 * kind of pool (the magic number, then the pool), so that a call that takes
 * only a request can tell which pool it belongs to (cronoq_backend.h).
 */
#ifndef CRONOQ_REQUEST_H
#define CRONOQ_REQUEST_H

#include "cronoq/cronoq_backend.h"
#include "util/msg.h"

#define CQ__REQ_MAGIC 0x63717271u /* "cqrq" */

/* What an item asks of its resource. */
enum cq__mode {
  CQ__MODE_UNITS = 0,    /* budget units */
  CQ__MODE_FRACTION = 1, /* thousandths of one device */
  CQ__MODE_WHOLE = 2     /* whole devices */
};
_Static_assert((int)CQ__MODE_UNITS == (int)CQ_BACKEND_UNITS &&
                   (int)CQ__MODE_FRACTION == (int)CQ_BACKEND_FRACTION &&
                   (int)CQ__MODE_WHOLE == (int)CQ_BACKEND_WHOLE,
               "a backend is told the mode as the core keeps it");

struct cq__res;

struct cq__ritem {
  struct cq__res *res;
  int64_t amount;
  uint8_t mode; /* enum cq__mode */
};

/* The longest hold limit: about 285 years, far from overflowing a clock. */
#define CQ__LIMIT_MAX (INT64_C(1) << 53)

/* Request flags. */
#define CQ__REQ_LOCKFREE 0x1u /* only budgets: may be granted without lock */

struct cq__req {
  /* The header, the same for every kind of pool (cronoq_backend.h). */
  uint32_t magic;
  uint16_t n_items;
  uint16_t flags; /* CQ__REQ_* */
  cq_pool *pool;
  char msg[CQ__MSG_MAX];

  int64_t limit_ms;                         /* hold limit; 0: none */
  struct cq__ritem items[CQ_REQ_MAX_ITEMS]; /* sorted by resource rank */
};

_Static_assert(offsetof(struct cq__req, pool) == 8 &&
                   offsetof(struct cq__req, msg) == 16 &&
                   CQ__MSG_MAX == CQ_BACKEND_MSG_MAX &&
                   offsetof(struct cq__req, limit_ms) ==
                       CQ_BACKEND_HEADER_BYTES,
               "a request's header is where every backend finds it");
_Static_assert(sizeof(struct cq__req) <= sizeof(((cq_req *)0)->cq_private),
               "struct cq__req fits the public storage");
_Static_assert(_Alignof(struct cq__req) <= _Alignof(cq_req),
               "the public storage is aligned for the private struct");
_Static_assert(sizeof(cq_req) == 1024,
               "the public storage keeps its size within a SOVERSION");

static inline struct cq__req *cq__req_of(cq_req *r) {
  return (struct cq__req *)(void *)r->cq_private;
}
static inline const struct cq__req *cq__req_ofc(const cq_req *r) {
  return (const struct cq__req *)(const void *)r->cq_private;
}

/* An item as a request spec writes it: "db:12", "gpu:0.5" (fractions),
 * "gpu:2" (whole devices). */
void cq__item_text(char *buf, size_t len, const struct cq__ritem *it);

#endif /* CRONOQ_REQUEST_H */
