/*
 * Fuzz harness: the `nvidia-smi -L` parser of GPU detection,
 * cq__parse_nvidia_smi(). gpu_check.c runs it and holds the checks every
 * detection parser shares; here are the ones of this format, on output the
 * parser accepted:
 * - each device comes from a line of its own, in the order of the lines:
 *   every id is found in a later line than the one before it;
 * - a GPU line gives one device, unless MIG lines follow it (CUDA then sees
 *   the MIG devices, not the GPU), and each MIG line gives one: the count
 *   is read back from the lines alone, without looking at ids;
 * - writing the ids as CUDA_VISIBLE_DEVICES (which is what a grant hands a
 *   child) and parsing that back gives the same list, so that a child
 *   process running cronoq itself sees the devices it was given.
 */
#include "gpu_check.h"

#include <string.h>

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* One line of the output: [at, at + len), and where the next starts. */
struct line {
  const char *at;
  size_t len;
  const char *next;
};

static struct line line_at(const char *p) {
  struct line l = {p, strcspn(p, "\n"), NULL};
  l.next = p + l.len + (p[l.len] == '\n');
  return l;
}

static bool line_blank(const struct line *l) {
  for (size_t i = 0; i < l->len; i++)
    if (!is_blank(l->at[i]))
      return false;
  return true;
}

static bool line_has(const struct line *l, const char *id) {
  size_t n = strlen(id);
  for (size_t i = 0; i + n <= l->len; i++)
    if (memcmp(l->at + i, id, n) == 0)
      return true;
  return false;
}

/* Devices by the shape of the lines: an indented "MIG " line is a MIG
 * device, replacing the GPU above it; any other line a GPU. */
static size_t devices_by_lines(const char *text) {
  size_t n = 0;
  bool gpu_counted = false; /* the last GPU line's device is in n */
  for (const char *p = text; *p != '\0';) {
    struct line l = line_at(p);
    p = l.next;
    if (line_blank(&l))
      continue;
    size_t lead = 0;
    while (is_blank(l.at[lead]))
      lead++;
    if (lead > 0 && l.len - lead > 4 && memcmp(l.at + lead, "MIG ", 4) == 0) {
      n = n + 1 - gpu_counted;
      gpu_counted = false;
    } else {
      n++;
      gpu_counted = true;
    }
  }
  return n;
}

static void check_lines(const char *text, const cq_gpu_list *list) {
  FUZZ_CHECK(list->count == devices_by_lines(text));
  const char *p = text;
  for (size_t i = 0; i < list->count; i++) {
    struct line l;
    do {
      FUZZ_CHECK(*p != '\0');
      l = line_at(p);
      p = l.next;
    } while (!line_has(&l, list->ids[i]));
  }
  char *visible = gpu_join(list);
  cq_gpu_list round;
  memset(&round, 0, sizeof(round));
  round.alloc_ = list->alloc_;
  FUZZ_CHECK_RC(cq__parse_cuda_visible(visible, &round), 0);
  FUZZ_CHECK(round.count == list->count);
  for (size_t i = 0; i < list->count; i++)
    FUZZ_CHECK(strcmp(round.ids[i], list->ids[i]) == 0);
  cq_gpu_list_free(&round);
  free(visible);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gpu_fuzz_one(data, size, cq__parse_nvidia_smi, "nvidia-smi -L", check_lines);
  return 0;
}
