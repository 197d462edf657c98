/*
 * A histogram of waiting times in milliseconds (hist.c): exact below
 * CQ__HIST_SUB, then CQ__HIST_SUB buckets per power of two, so any value is
 * known within 1/CQ__HIST_SUB; values from 2^(CQ__HIST_TOP_EXP + 1) on share
 * the last bucket. A bucket starts at every power of two, so counts below a
 * power of two are exact.
 */
#ifndef CRONOQ_UTIL_HIST_H
#define CRONOQ_UTIL_HIST_H

#include "util/base.h"

#define CQ__HIST_SUB_BITS 3
#define CQ__HIST_SUB (1 << CQ__HIST_SUB_BITS)
#define CQ__HIST_TOP_EXP 44 /* 2^45 ms: more than a thousand years */
#define CQ__HIST_BUCKETS                                                       \
  (CQ__HIST_SUB + (CQ__HIST_TOP_EXP - CQ__HIST_SUB_BITS + 1) * CQ__HIST_SUB)

struct cq__hist {
  uint64_t count;
  int64_t max;
  int64_t sum;
  uint64_t buckets[CQ__HIST_BUCKETS];
};

/* Count one value (negative ones as 0). */
void cq__hist_add(struct cq__hist *h, int64_t value);
/* The q-quantile (0 < q <= 1) of the histogram plus `zeros` more zeros. */
int64_t cq__hist_quantile(const struct cq__hist *h, uint64_t zeros, double q);
/* How many values are below `bound`, plus `zeros`; exact when `bound` is a
 * power of two (or below CQ__HIST_SUB). */
uint64_t cq__hist_below(const struct cq__hist *h, uint64_t zeros,
                        int64_t bound);

#endif /* CRONOQ_UTIL_HIST_H */
