/*
 * Pools served by a backend (cronoq_backend.h): the shell the core keeps for
 * them, and what the core tells a backend about requests and grants. The
 * public functions pass calls on such pools to their backend themselves,
 * each at its top (pool.h: CQ__TO_BACKEND).
 */
#include "pool.h"

#include <string.h>

/* Whether every operation of the table is set, up to the optional ones,
 * which start with last_error. */
static bool ops_complete(const cq_backend_ops *ops) {
  const char *at = (const char *)ops + offsetof(cq_backend_ops, close);
  const char *end = (const char *)ops + offsetof(cq_backend_ops, last_error);
  for (; at + sizeof(void (*)(void)) <= end; at += sizeof(void (*)(void))) {
    void (*fn)(void);
    memcpy(&fn, at, sizeof(fn));
    if (fn == NULL)
      return false;
  }
  return true;
}

int cq_backend_pool_create(cq_pool **out, const cq_backend_ops *ops, void *impl,
                           void *data) {
  if (out == NULL || ops == NULL || ops->size != sizeof(*ops) ||
      (ops->flags & ~(unsigned)CQ_BACKEND_SHARED) != 0 || !ops_complete(ops))
    return CQ_EINVAL;
  cq_allocator a = cq__sys_allocator();
  cq_pool *p = cq__alloc(&a, sizeof(*p));
  if (p == NULL)
    return CQ_ENOMEM;
  memset(p, 0, sizeof(*p));
  p->backend = ops;
  p->backend_impl = impl;
  p->data = data;
  p->alloc = a;
  *out = p;
  return 0;
}

void *cq_backend_impl(const cq_pool *pool) {
  return pool != NULL ? pool->backend_impl : NULL;
}

const cq_backend_ops *cq_backend_ops_of(const cq_pool *pool) {
  return pool != NULL ? pool->backend : NULL;
}

cq_pool *cq_backend_req_pool(const cq_req *req) {
  if (req == NULL || cq__req_ofc(req)->magic != CQ__REQ_MAGIC)
    return NULL;
  return cq__req_ofc(req)->pool;
}

cq_pool *cq_backend_grant_pool(const cq_grant *grant) {
  return grant != NULL ? cq__grant_ofc(grant)->pool : NULL;
}

void cq__backend_pool_free(cq_pool *pool) {
  cq_allocator a = pool->alloc;
  cq__free(&a, pool);
}
