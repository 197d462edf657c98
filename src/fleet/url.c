/*
 * Names the fleet pool accepts: server URLs, namespaces, resource names and
 * host names. Each check is strict and explains itself: a URL that parses
 * into something other than what the user meant would connect to the
 * wrong server.
 *
 *   redis://[user[:password]@]host[:port][/db]
 *   unix://[user[:password]@]/path/to/redis.sock[?db=N]
 *
 * Host names may be bracketed IPv6 addresses ("redis://[::1]:6380").
 */
#include "fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

int fl_name_check(const char *name, bool at_ok) {
  if (name == NULL)
    return CQ_EINVAL;
  size_t len = 0;
  int ats = 0;
  for (const char *c = name; *c != '\0'; c++, len++) {
    bool ok = fl_name_char(*c);
    if (*c == '@' && at_ok && c != name && c[1] != '\0' && ats++ == 0)
      ok = true;
    if (!ok || len >= CQ_NAME_MAX)
      return CQ_EINVAL;
  }
  return len == 0 ? CQ_EINVAL : 0;
}

int fl_namespace_check(const char *ns) {
  if (ns == NULL)
    return CQ_EINVAL;
  size_t len = strlen(ns);
  if (len == 0 || len > 64)
    return CQ_EINVAL;
  for (size_t i = 0; i < len; i++)
    if (!is_alnum(ns[i]) && ns[i] != '_' && ns[i] != '-' && ns[i] != '.')
      return CQ_EINVAL;
  return 0;
}

/* A decimal number in [lo, hi] of exactly `n` bytes. */
static bool parse_num(const char *s, size_t n, long lo, long hi, int *out) {
  if (n == 0 || n > 9)
    return false;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    v = v * 10 + (s[i] - '0');
  }
  if (v < lo || v > hi)
    return false;
  *out = (int)v;
  return true;
}

static bool copy_part(char *dst, size_t cap, const char *s, size_t n) {
  if (n >= cap)
    return false;
  memcpy(dst, s, n);
  dst[n] = '\0';
  return true;
}

/* "user:password@" or "password@" (a lone word is the password, as
 * redis-cli has it) before `end`. */
static bool parse_userinfo(const char *s, size_t n, struct fl_url *out) {
  const char *colon = memchr(s, ':', n);
  if (colon == NULL)
    return copy_part(out->password, sizeof(out->password), s, n);
  return copy_part(out->user, sizeof(out->user), s, (size_t)(colon - s)) &&
         copy_part(out->password, sizeof(out->password), colon + 1,
                   n - (size_t)(colon - s) - 1);
}

/*
 * Where the userinfo of `rest` (the URL after its scheme) ends: its '@',
 * or NULL. A password may hold '@' and '/' (base64 passwords do), so the
 * end is found from what may follow it. A redis:// URL holds no '@' after
 * its host (a database is a number): its last '@'. A unix:// URL's path
 * is absolute, and may hold '@' too: none when the URL starts with its
 * path, else the last '@' followed by '/', or the last '@' of a URL that
 * has no path to find (refused by the parse). Where a path holds "@/",
 * more is taken for the password than it has, never less: a message hides
 * part of the path rather than show part of a password.
 */
static const char *userinfo_end(const char *rest, bool unix_socket) {
  if (unix_socket && rest[0] == '/')
    return NULL;
  const char *at = NULL, *before_path = NULL;
  for (const char *c = rest; *c != '\0'; c++)
    if (*c == '@') {
      at = c;
      if (c[1] == '/')
        before_path = c;
    }
  return unix_socket && before_path != NULL ? before_path : at;
}

void fl_url_redact(const char *url, char *buf, size_t len) {
  if (len == 0)
    return;
  const char *scheme = url != NULL ? strstr(url, "://") : NULL;
  const char *rest = scheme != NULL ? scheme + 3 : url;
  const char *at =
      rest != NULL ? userinfo_end(rest, strncmp(url, "unix://", 7) == 0) : NULL;
  if (at == NULL) {
    snprintf(buf, len, "%s", url != NULL ? url : "");
    return;
  }
  /* "user:password@" keeps the user; a lone word is the password. */
  const char *colon = memchr(rest, ':', (size_t)(at - rest));
  const char *keep_end = colon != NULL ? colon + 1 : rest;
  snprintf(buf, len, "%.*s***%s", (int)(keep_end - url), url, at);
}

/* Fail with a message naming the URL (`url`, its password hidden), into
 * `err` (which may be NULL). */
#define URL_BAD(...)                                                           \
  do {                                                                         \
    if (err != NULL && len > 0)                                                \
      snprintf(err, len, __VA_ARGS__);                                         \
    return CQ_EINVAL;                                                          \
  } while (0)

/* What follows unix://[user[:password]@]: "/path[?db=N]". */
static int parse_socket(const char *rest, const char *url, struct fl_url *out,
                        char *err, size_t len) {
  if (*rest != '/')
    URL_BAD("URL \"%.64s\": a unix:// URL names an absolute path", url);
  const char *q = strchr(rest, '?');
  size_t n = q != NULL ? (size_t)(q - rest) : strlen(rest);
  if (n < 2 || !copy_part(out->path, sizeof(out->path), rest, n))
    URL_BAD("URL \"%.64s\": the socket path is empty or longer than %zu bytes",
            url, sizeof(out->path) - 1);
  if (q != NULL && (strncmp(q, "?db=", 4) != 0 ||
                    !parse_num(q + 4, strlen(q + 4), 0, 1000000, &out->db)))
    URL_BAD("URL \"%.64s\": expected ?db=N after the path", url);
  return 0;
}

/* What follows redis://[user[:password]@]: "host[:port][/db]", the host
 * a name, an IPv4 address or an IPv6 one in brackets. */
static int parse_host(const char *rest, const char *url, struct fl_url *out,
                      char *err, size_t len) {
  const char *host = rest, *host_end;
  const char *after;
  if (*rest == '[') {
    host = rest + 1;
    host_end = strchr(host, ']');
    if (host_end == NULL)
      URL_BAD("URL \"%.64s\": unclosed '[' in the host", url);
    after = host_end + 1;
  } else {
    host_end = rest + strcspn(rest, ":/");
    after = host_end;
  }
  if (host_end == host ||
      !copy_part(out->host, sizeof(out->host), host, (size_t)(host_end - host)))
    URL_BAD("URL \"%.64s\": the host is empty or too long", url);
  for (const char *c = out->host; *c != '\0'; c++)
    if (!is_alnum(*c) && *c != '.' && *c != '-' && *c != '_' && *c != ':')
      URL_BAD("URL \"%.64s\": unexpected character '%c' in the host", url, *c);
  if (*after == ':') {
    const char *p = after + 1;
    size_t n = strcspn(p, "/");
    if (!parse_num(p, n, 1, 65535, &out->port))
      URL_BAD("URL \"%.64s\": the port must be a number from 1 to 65535", url);
    after = p + n;
  }
  if (*after == '/') {
    const char *d = after + 1;
    if (*d != '\0' && !parse_num(d, strlen(d), 0, 1000000, &out->db))
      URL_BAD("URL \"%.64s\": the database must be a number after '/'", url);
  } else if (*after != '\0') {
    URL_BAD("URL \"%.64s\": unexpected text after the host", url);
  }
  return 0;
}

int fl_url_parse(const char *given, struct fl_url *out, char *err, size_t len) {
  memset(out, 0, sizeof(*out));
  /* Every message names the URL with its password hidden. */
  char url[512];
  fl_url_redact(given, url, sizeof(url));
  out->port = 6379;
  if (given == NULL)
    URL_BAD("no URL");
  const char *rest;
  if (strncmp(given, "redis://", 8) == 0) {
    rest = given + 8;
  } else if (strncmp(given, "unix://", 7) == 0) {
    out->unix_socket = true;
    rest = given + 7;
  } else {
    URL_BAD("URL \"%.64s\": expected redis://host[:port][/db] or "
            "unix:///path/to/redis.sock",
            url);
  }
  const char *at = userinfo_end(rest, out->unix_socket);
  if (out->unix_socket && at == NULL && rest[0] != '/')
    URL_BAD("URL \"%.64s\": a unix:// URL names an absolute path, as in "
            "unix:///run/redis.sock",
            url);
  if (at != NULL) {
    if (!parse_userinfo(rest, (size_t)(at - rest), out))
      URL_BAD("URL \"%.64s\": user name or password too long", url);
    rest = at + 1;
  }
  return out->unix_socket ? parse_socket(rest, url, out, err, len)
                          : parse_host(rest, url, out, err, len);
}

#undef URL_BAD
