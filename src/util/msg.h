/*
 * Messages for callers (msg.c): formatted into a buffer of a given length,
 * truncated rather than overrun. Requests and grants carry one of
 * CQ__MSG_MAX bytes for the detail of their last failure.
 */
#ifndef CRONOQ_UTIL_MSG_H
#define CRONOQ_UTIL_MSG_H

#include "util/base.h"

#define CQ__MSG_MAX 160

#if defined(__GNUC__)
#define CQ__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CQ__PRINTF(fmt, args)
#endif

/* Format into `buf` of `len` bytes (len > 0), always terminated. */
void cq__msgf(char *buf, size_t len, const char *fmt, ...) CQ__PRINTF(3, 4);

/* Thousandths as a decimal, exactly and without trailing zeros: "0.25",
 * "2", "1.024". Returns buf. */
const char *cq__fmt_milli(char *buf, size_t len, int64_t milli);

#endif /* CRONOQ_UTIL_MSG_H */
