/* The waiting-time histogram (hist.h). */
#include "util/hist.h"

/* The bucket of value v. */
static int hist_index(int64_t v) {
  if (v < CQ__HIST_SUB)
    return v < 0 ? 0 : (int)v;
  int e = 63 - __builtin_clzll((unsigned long long)v); /* >= SUB_BITS */
  if (e > CQ__HIST_TOP_EXP)
    return CQ__HIST_BUCKETS - 1;
  int shift = e - CQ__HIST_SUB_BITS;
  return CQ__HIST_SUB + shift * CQ__HIST_SUB +
         (int)((v >> shift) & (CQ__HIST_SUB - 1));
}

/* The smallest value of bucket i. */
static int64_t hist_low(int i) {
  if (i < CQ__HIST_SUB)
    return i;
  int shift = (i - CQ__HIST_SUB) / CQ__HIST_SUB;
  int sub = (i - CQ__HIST_SUB) % CQ__HIST_SUB;
  return (int64_t)(CQ__HIST_SUB + sub) << shift;
}

/* The middle of bucket i: what the bucket reports. */
static int64_t hist_value(int i) {
  if (i < CQ__HIST_SUB)
    return i;
  int shift = (i - CQ__HIST_SUB) / CQ__HIST_SUB;
  return hist_low(i) + ((int64_t)1 << shift) / 2;
}

void cq__hist_add(struct cq__hist *h, int64_t value) {
  if (value < 0)
    value = 0;
  h->buckets[hist_index(value)]++;
  h->count++;
  h->sum += value;
  if (value > h->max)
    h->max = value;
}

int64_t cq__hist_quantile(const struct cq__hist *h, uint64_t zeros, double q) {
  uint64_t total = h->count + zeros;
  if (total == 0)
    return 0;
  uint64_t rank = (uint64_t)(q * (double)total);
  if ((double)rank < q * (double)total)
    rank++; /* ceil */
  if (rank == 0)
    rank = 1;
  if (rank == total)
    return h->count > 0 ? h->max : 0; /* the largest is known exactly */
  uint64_t seen = zeros;
  if (seen >= rank)
    return 0;
  for (int i = 0; i < CQ__HIST_BUCKETS; i++) {
    seen += h->buckets[i];
    if (seen >= rank) {
      int64_t v = hist_value(i);
      return v > h->max ? h->max : v;
    }
  }
  return h->max;
}

uint64_t cq__hist_below(const struct cq__hist *h, uint64_t zeros,
                        int64_t bound) {
  uint64_t n = bound > 0 ? zeros : 0;
  for (int i = 0; i < CQ__HIST_BUCKETS && hist_low(i) < bound; i++)
    n += h->buckets[i];
  return n;
}
