/* Message formatting (msg.h). */
#include "util/msg.h"

#include <stdarg.h>
#include <stdio.h>

void cq__msgf(char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  (void)vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}
