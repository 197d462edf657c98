/*
 * What every file of the library uses: the public header, the standard
 * headers, and the two macros that reach inside intrusive structures and
 * guard internal invariants.
 *
 * Assertions come in tiers (the habit of allocators such as mimalloc):
 * CQ__ASSERT guards an invariant whose check costs nothing and is always
 * on; the checks that cost a walk (the policy's invariant checker,
 * policy.h) are compiled in only when the build's debug level (CQ_DEBUG,
 * set by the CMake option CRONOQ_DEBUG) is at least 2. Neither is ever used
 * for bad input, which gets an error code.
 */
#ifndef CRONOQ_UTIL_BASE_H
#define CRONOQ_UTIL_BASE_H

#include "cronoq/cronoq.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef CQ_DEBUG
#define CQ_DEBUG 0
#endif

/* The layouts the public header states (the backend header at the start of
 * cq_req and cq_grant) are those of a 64-bit target; CMake says so too. */
_Static_assert(sizeof(void *) == 8, "libcronoq builds for 64-bit targets");

#define CQ__CONTAINER_OF(ptr, type, field)                                     \
  ((type *)(void *)((char *)(ptr)-offsetof(type, field)))

/* Abort on a broken internal invariant; never used for bad input. */
#define CQ__ASSERT(cond)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      cq__panic(__FILE__, __LINE__, #cond);                                    \
  } while (0)

/* Report a broken invariant on stderr and abort (error.c). */
void cq__panic(const char *file, int line, const char *what);

#endif /* CRONOQ_UTIL_BASE_H */
