/*
 * A growable string for the runner's text: environment entries, commands
 * made from templates, the jobs' grouped output, messages, the progress
 * line. A failed allocation is remembered instead of reported at every
 * call, so a caller builds a whole string and checks once, at sb_take().
 * And shell quoting, for the arguments a template puts into a command.
 */
#include "runner.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Make room for `more` bytes and the terminating NUL. */
static bool sb_reserve(struct strbuf *sb, size_t more) {
  if (sb->failed)
    return false;
  if (sb->len + more + 1 <= sb->cap)
    return true;
  size_t cap = sb->cap > 0 ? sb->cap : 64;
  while (cap < sb->len + more + 1)
    cap *= 2;
  char *s = realloc(sb->s, cap);
  if (s == NULL) {
    sb->failed = true;
    return false;
  }
  sb->s = s;
  sb->cap = cap;
  return true;
}

void sb_putn(struct strbuf *sb, const char *s, size_t n) {
  if (!sb_reserve(sb, n))
    return;
  memcpy(sb->s + sb->len, s, n);
  sb->len += n;
  sb->s[sb->len] = '\0';
}

void sb_puts(struct strbuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

void sb_printf(struct strbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    sb->failed = true;
    return;
  }
  if (!sb_reserve(sb, (size_t)n))
    return;
  va_start(ap, fmt);
  (void)vsnprintf(sb->s + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

void sb_put_milli(struct strbuf *sb, int64_t milli) {
  char frac[8];
  snprintf(frac, sizeof(frac), "%03d", (int)(milli % CQ_DEVICE_MILLI));
  size_t n = strlen(frac);
  while (n > 0 && frac[n - 1] == '0')
    frac[--n] = '\0';
  sb_printf(sb, "%lld", (long long)(milli / CQ_DEVICE_MILLI));
  if (n > 0)
    sb_printf(sb, ".%s", frac);
}

char *sb_take(struct strbuf *sb) {
  char *s = sb->failed ? NULL : sb->s;
  if (sb->failed)
    free(sb->s);
  else if (s == NULL)
    s = calloc(1, 1); /* nothing was written: the empty string */
  sb->s = NULL;
  sb->len = sb->cap = 0;
  sb->failed = false;
  return s;
}

void sb_put_shell_word(struct strbuf *sb, const char *s) {
  static const char safe[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
      "0123456789_./:=@%+,-";
  if (*s != '\0' && s[strspn(s, safe)] == '\0') {
    sb_puts(sb, s);
    return;
  }
  /* Single quotes keep every byte but the quote itself, which closes
   * them, is written escaped, and opens them again. */
  sb_puts(sb, "'");
  for (const char *q; (q = strchr(s, '\'')) != NULL; s = q + 1) {
    sb_putn(sb, s, (size_t)(q - s));
    sb_puts(sb, "'\\''");
  }
  sb_puts(sb, s);
  sb_puts(sb, "'");
}

void sb_consume(struct strbuf *sb, size_t n) {
  if (n >= sb->len) {
    sb->len = 0;
  } else {
    memmove(sb->s, sb->s + n, sb->len - n);
    sb->len -= n;
  }
  if (sb->s != NULL)
    sb->s[sb->len] = '\0';
}

void sb_free(struct strbuf *sb) {
  free(sb->s);
  sb->s = NULL;
  sb->len = sb->cap = 0;
  sb->failed = false;
}
