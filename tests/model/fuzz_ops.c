/*
 * Fuzz harness: the operation-sequence interpreter of the model-based test
 * (tests/model/ops.h). Every byte string is a program: byte 0 picks the
 * pool's options, then each 8 bytes are one operation (add or remove a
 * budget, class or device pool; try, submit with a deadline, or a one-shot
 * blocking acquire, with budgets, fractions, whole devices, a class and a
 * hold limit; cancel; release; advance the virtual clock; change a
 * capacity; take a device offline or online). The program runs through the
 * library and the reference model (tests/model/model.h), which are
 * compared after every operation, with the invariants checked on what the
 * library reports. A disagreement or a broken invariant aborts, with the
 * operation and the reason on stderr.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char why[640];
  if (model_run_bytes(data, size, why, sizeof(why)) != 0) {
    fprintf(stderr, "model and library disagree: %s\n", why);
    abort();
  }
  return 0;
}
