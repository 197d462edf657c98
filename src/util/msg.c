/* Message formatting (msg.h). */
#include "util/msg.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

void cq__msgf(char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  (void)vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

const char *cq__fmt_milli(char *buf, size_t len, int64_t milli) {
  int64_t whole = milli / 1000, frac = milli % 1000;
  if (frac == 0) {
    snprintf(buf, len, "%" PRId64, whole);
    return buf;
  }
  int digits = 3;
  while (frac % 10 == 0) {
    frac /= 10;
    digits--;
  }
  snprintf(buf, len, "%" PRId64 ".%0*" PRId64, whole, digits, frac);
  return buf;
}
