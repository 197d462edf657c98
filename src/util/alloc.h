/*
 * Allocation through a cq_allocator (alloc.c): the caller's hooks or
 * malloc's. Every allocation of the library goes through these, so that
 * tests can inject failures anywhere.
 */
#ifndef CRONOQ_UTIL_ALLOC_H
#define CRONOQ_UTIL_ALLOC_H

#include "util/base.h"

/* malloc, realloc and free as a cq_allocator: the default everywhere. */
cq_allocator cq__sys_allocator(void);

/* Whether hooks given by a caller are usable: all three functions set.
 * 0 or CQ_EINVAL. NULL (none given) is usable. */
int cq__allocator_check(const cq_allocator *a);

static inline void *cq__alloc(const cq_allocator *a, size_t size) {
  return a->alloc(size, a->arg);
}
static inline void *cq__realloc(const cq_allocator *a, void *ptr, size_t size) {
  return a->realloc(ptr, size, a->arg);
}
/* NULL accepted. */
static inline void cq__free(const cq_allocator *a, void *ptr) {
  if (ptr != NULL)
    a->free(ptr, a->arg);
}

#endif /* CRONOQ_UTIL_ALLOC_H */
