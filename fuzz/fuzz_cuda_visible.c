/*
 * Fuzz harness: the CUDA_VISIBLE_DEVICES parser of GPU detection,
 * cq__parse_cuda_visible(). gpu_check.c runs it and holds the checks every
 * detection parser shares; here are the ones of this format:
 * - the value is its entries between commas, blanks around them dropped: a
 *   list has exactly as many ids, each the entry as written, and a value of
 *   blanks only means no GPUs;
 * - writing the list back as CUDA_VISIBLE_DEVICES and parsing that gives
 *   the same list, as a child process started with it would see.
 */
#include "gpu_check.h"

#include <string.h>

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

static void check_entries(const char *text, const cq_gpu_list *list) {
  const char *p = text;
  while (is_blank(*p))
    p++;
  if (*p == '\0') {
    FUZZ_CHECK(list->count == 0);
    return;
  }
  size_t n = 0;
  for (;;) {
    const char *end = p;
    while (*end != ',' && *end != '\0')
      end++;
    const char *a = p, *b = end;
    while (a < b && is_blank(*a))
      a++;
    while (b > a && is_blank(b[-1]))
      b--;
    FUZZ_CHECK(n < list->count);
    FUZZ_CHECK(strlen(list->ids[n]) == (size_t)(b - a) &&
               memcmp(list->ids[n], a, (size_t)(b - a)) == 0);
    n++;
    if (*end == '\0')
      break;
    p = end + 1;
  }
  FUZZ_CHECK(n == list->count);

  char *again = gpu_join(list);
  cq_gpu_list round;
  memset(&round, 0, sizeof(round));
  round.alloc_ = list->alloc_;
  FUZZ_CHECK_RC(cq__parse_cuda_visible(again, &round), 0);
  FUZZ_CHECK(round.count == list->count);
  for (size_t i = 0; i < list->count; i++)
    FUZZ_CHECK(strcmp(round.ids[i], list->ids[i]) == 0);
  cq_gpu_list_free(&round);
  free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gpu_fuzz_one(data, size, cq__parse_cuda_visible,
               "CUDA_VISIBLE_DEVICES: ", check_entries);
  return 0;
}
