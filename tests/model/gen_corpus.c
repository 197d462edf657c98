/*
 * Writes the seed corpus of the fuzz_ops harness (fuzz/corpus/ops/): short
 * random programs from mo_generate(), every pool option among them, and
 * shrunk programs that once separated the model from the library, while
 * the model was written or from library bugs since fixed (all agree now;
 * docs/RELIABILITY.md lists the bugs). Every file is checked to run clean
 * before it is written.
 *
 *   cc -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -Itests \
 *      tests/model/gen_corpus.c tests/model/ops.c tests/model/model.c \
 *      build/libcronoq.a -lpthread -o /tmp/gen_corpus
 *   /tmp/gen_corpus fuzz/corpus/ops
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops.h"

static const uint8_t found[][128] = {
    /* A backfill pass after the head is granted: a holder whose limit ends
     * now counts as holding for ever in the new head's shadow time. */
    {2,  0,  0,  0,  0, 0, 0,  0,  0,  2,  76, 0,  0,   0, 0,  0,  0,
     9,  0,  23, 0,  0, 0, 0,  0,  5,  4,  51, 25, 220, 0, 70, 0,  5,
     1,  25, 52, 0,  0, 1, 1,  5,  26, 51, 51, 0,  0,   0, 1,  5,  0,
     34, 0,  0,  0,  1, 1, 10, 33, 0,  0,  0,  0,  0,   0, 5,  53, 17,
     63, 0,  0,  66, 0, 8, 11, 0,  0,  0,  0,  0,  0},
    /* An ordinary grant on a claimed device pool delays the head past S. */
    {2,   0, 1,   0,  0,  0,  0, 0,   0,   2, 223, 0,  0,   0, 0, 0,
     0,   5, 122, 17, 29, 0,  0, 0,   0,   5, 0,   34, 49,  0, 0, 0,
     0,   5, 116, 51, 22, 27, 0, 239, 129, 4, 100, 34, 0,   0, 0, 0,
     0,   5, 65,  34, 71, 0,  0, 141, 0,   5, 227, 34, 35,  0, 0, 0,
     0,   7, 122, 0,  0,  0,  0, 0,   0,   5, 94,  34, 239, 0, 0, 0,
     243, 8, 153, 0,  0,  0,  0, 0,   0,   4, 21,  17, 19,  0, 0, 209,
     0,   7, 203, 0,  0,  0,  0, 0,   0,   5, 107, 34, 0,   0, 0, 0,
     0,   8, 118, 0,  0,  0,  0, 0,   0},
    /* A release of a resource nobody waits on lets a waiter behind the
     * head be backfilled (the library once did not look). */
    {2,   128, 3, 0,   0, 0, 0,   0, 0,   128, 1, 0,   0, 0, 0,   0, 0, 133, 0,
     1,   0,   0, 0,   1, 0, 133, 1, 2,   0,   0, 0,   0, 0, 133, 2, 1, 3,   0,
     0,   0,   1, 133, 3, 1, 0,   0, 0,   0,   1, 134, 3, 0, 0,   0, 0, 0,   0,
     133, 4,   3, 0,   0, 0, 1,   1, 135, 1,   0, 0,   0, 0, 0,   0},
    /* A release of a grant of budgets only, without a limit, reaches the
     * head's shadow time (the library once released it without the lock). */
    {2,   128, 10, 0, 0, 0, 0, 0,   0,   133, 0, 1, 0, 0, 0, 0, 0,
     133, 1,   1,  4, 0, 0, 1, 0,   133, 2,   1, 8, 0, 0, 0, 1, 133,
     3,   1,   2,  0, 0, 3, 1, 135, 0,   0,   0, 0, 0, 0, 0},
    /* A release at a limit end comes before the deadlines due at that
     * moment: the head whose deadline it is may still be passed. */
    {2,   0,  67, 0, 0,   0, 0,   0,   0,   2,  1, 0, 0, 0,  0,  0,   0,
     0,   0,  0,  0, 0,   0, 0,   0,   2,   1,  0, 0, 0, 0,  0,  0,   2,
     111, 0,  0,  0, 0,   0, 0,   0,   234, 0,  0, 0, 0, 0,  0,  5,   0,
     145, 50, 0,  0, 183, 0, 5,   2,   181, 33, 0, 0, 0, 59, 8,  43,  0,
     0,   0,  0,  0, 0,   5, 241, 170, 0,   0,  0, 1, 0, 5,  77, 179, 226,
     0,   0,  1,  1, 8,   0, 0,   0,   0,   0,  0, 0},
};
static const size_t found_len[] = {81, 121, 73, 49, 97};

static int write_file(const char *dir, const char *name, const uint8_t *data,
                      size_t len) {
  char why[640];
  if (model_run_bytes(data, len, why, sizeof(why)) != 0) {
    fprintf(stderr, "%s: fails: %s\n", name, why);
    return -1;
  }
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, len, f) != len) {
    perror(path);
    return -1;
  }
  return fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_corpus DIR\n");
    return 2;
  }
  static mo_op ops[64];
  uint8_t buf[1 + sizeof(ops)];
  int rc = 0;
  for (unsigned k = 0; k < 32; k++) {
    size_t n = 8 + (k * 7) % 57;
    uint8_t flags;
    mo_generate(1000 + k, &flags, ops, n);
    flags = (uint8_t)(k % 8); /* every pool option */
    buf[0] = flags;
    memcpy(buf + 1, ops, n * sizeof(ops[0]));
    char name[64];
    snprintf(name, sizeof(name), "random-%02u", k);
    rc |= write_file(argv[1], name, buf, 1 + n * sizeof(ops[0]));
  }
  for (size_t k = 0; k < sizeof(found_len) / sizeof(found_len[0]); k++) {
    char name[64];
    snprintf(name, sizeof(name), "found-%02zu", k);
    rc |= write_file(argv[1], name, found[k], found_len[k]);
  }
  return rc != 0;
}
