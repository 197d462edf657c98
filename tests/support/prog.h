/*
 * Programs of fixed-size operations, shared by the interpreter tests (the
 * model-based test, tests/model/, and the fleet pool's differential test,
 * tests/fleet/diff.c): their random bytes, shrinking a failing program,
 * and checking a program's trace. The support library's part three,
 * header-only: its functions are small and static inline.
 */
#ifndef CRONOQ_TEST_SUPPORT_PROG_H
#define CRONOQ_TEST_SUPPORT_PROG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The random bytes of generated programs. */
static inline uint64_t cqt_splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Whether the program (flags, ops, n) still fails the way the shrinker was
 * asked to keep: a change that makes it fail some other way has found
 * another bug, or another way of tripping over this one, and is not kept. */
typedef bool (*cqt_prog_fails)(uint8_t flags, const void *ops, size_t n,
                               void *arg);

/*
 * Shrink a failing program of `n` operations of `op_size` bytes (byte 0 of
 * each is its code, left as it is): remove chunks, halving their size down
 * to single operations; then simplify each other byte, to 0, else halved;
 * then clear the bits of `flag_bits` in *flags; again, until nothing more
 * can go. `scratch` has room for n operations. Returns the new length;
 * ops and *flags are updated.
 */
static inline size_t cqt_prog_shrink(uint8_t *flags, void *ops, size_t n,
                                     size_t op_size, uint8_t flag_bits,
                                     void *scratch, cqt_prog_fails fails,
                                     void *arg) {
  uint8_t *prog = (uint8_t *)ops, *trial = (uint8_t *)scratch;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t chunk = n > 1 ? n / 2 : 1;; chunk /= 2) {
      for (size_t i = 0; i + chunk <= n;) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++)
          if (k < i || k >= i + chunk)
            memcpy(trial + op_size * m++, prog + op_size * k, op_size);
        if (m > 0 && fails(*flags, trial, m, arg)) {
          memcpy(prog, trial, m * op_size);
          n = m;
          progress = true;
        } else {
          i += chunk;
        }
      }
      if (chunk <= 1)
        break;
    }
    for (size_t k = 0; k < n; k++)
      for (size_t j = 1; j < op_size; j++) {
        uint8_t *b = &prog[op_size * k + j];
        for (uint8_t old; (old = *b) != 0;) {
          *b = 0;
          if (fails(*flags, prog, n, arg)) {
            progress = true;
            break;
          }
          *b = (uint8_t)(old / 2);
          if (fails(*flags, prog, n, arg)) {
            progress = true;
            continue;
          }
          *b = old;
          break;
        }
      }
    for (unsigned bit = 1; bit <= 0x80; bit <<= 1)
      if ((flag_bits & *flags & bit) &&
          fails((uint8_t)(*flags & ~bit), prog, n, arg)) {
        *flags = (uint8_t)(*flags & ~bit);
        progress = true;
      }
  }
  return n;
}

/* The first fragment of `want` (NULL-terminated) the trace lacks, each
 * looked for after the one before; NULL when it has them all. */
static inline const char *cqt_trace_lacks(const char *text,
                                          const char *const *want) {
  const char *at = text;
  for (; *want != NULL; want++) {
    const char *hit = strstr(at, *want);
    if (hit == NULL)
      return *want;
    at = hit + strlen(*want);
  }
  return NULL;
}

#endif
