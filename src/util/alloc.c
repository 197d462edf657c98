/* The default allocator and the check of a caller's hooks (alloc.h). */
#include "util/alloc.h"

static void *sys_alloc(size_t size, void *arg) {
  (void)arg;
  return malloc(size);
}

static void *sys_realloc(void *ptr, size_t size, void *arg) {
  (void)arg;
  return realloc(ptr, size);
}

static void sys_free(void *ptr, void *arg) {
  (void)arg;
  free(ptr);
}

cq_allocator cq__sys_allocator(void) {
  cq_allocator a = {sys_alloc, sys_realloc, sys_free, NULL};
  return a;
}

int cq__allocator_check(const cq_allocator *a) {
  if (a == NULL)
    return 0;
  return a->alloc != NULL && a->realloc != NULL && a->free != NULL ? 0
                                                                   : CQ_EINVAL;
}
