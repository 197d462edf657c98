/*
 * The operator's side of a fleet: loading the library of functions that
 * every pool runs. Application users should not be able to change the code
 * that every namespace on a server runs (FUNCTION LOAD REPLACE of a copy
 * that skips a check would over-admit every namespace), so the library is
 * loaded once per server by an operator, as a Redis user of its own, and
 * the applications' users get only what calling it needs (docs/FLEET.md,
 * "The ACL"). A pool checks the code the server holds against its own
 * before it runs any of it.
 */
#include "fleet.h"

#include <stdio.h>
#include <string.h>

static char library[64];
static pthread_once_t library_once = PTHREAD_ONCE_INIT;

static void library_init(void) {
  snprintf(library, sizeof(library), "cronoq_%s", fl_lua_version);
}

const char *cq_fleet_library(void) {
  pthread_once(&library_once, library_init);
  return library;
}

/* Load (or check) the library on connection `l`: 0, or a code with the
 * message in `err`. */
static int load_on(struct fl_pool *fp, bool replace, char *err, size_t len) {
  char why[FL_MSG_MAX] = "";
  enum fl_lib st = fl_library_load(&fp->link, replace, why, sizeof(why));
  char where[FL_MSG_MAX];
  fl_url_text(fp, where, sizeof(where));
  if (fp->link.c->err != 0) {
    snprintf(err, len, "the server at %.120s stopped answering: %.100s", where,
             fp->link.c->errstr);
    return CQ_EUNAVAILABLE;
  }
  switch (st) {
  case FL_LIB_MINE:
    snprintf(err, len, "%s is loaded on %.120s, and its code is this library's",
             cq_fleet_library(), where);
    return 0;
  case FL_LIB_OTHER:
    snprintf(err, len,
             "%s on %.120s is not this library's code: load it again over the "
             "other one with CQ_FLEET_LOAD_REPLACE (cronoq load --replace)",
             cq_fleet_library(), where);
    return CQ_EEXIST;
  case FL_LIB_NONE:
    snprintf(err, len,
             "the server at %.120s did not load %s (%.100s): the loading user "
             "needs +function|load and +function|list, on Redis 7 or later",
             where, cq_fleet_library(), why[0] != '\0' ? why : "no reason");
    return CQ_EACCES;
  case FL_LIB_UNKNOWN:
  default:
    snprintf(err, len,
             "the server at %.120s did not say what it holds as %s: the "
             "loading user needs +function|list",
             where, cq_fleet_library());
    return CQ_EACCES;
  }
}

int cq_fleet_load(const char *url, const cq_fleet_opts *opts, unsigned flags) {
  fl_error("%s", "");
  if (url == NULL || (flags & ~(unsigned)CQ_FLEET_LOAD_REPLACE) != 0) {
    fl_error("cq_fleet_load: %s", url == NULL ? "NULL URL" : "unknown flags");
    return CQ_EINVAL;
  }
  int rc;
  struct fl_pool *fp = fl_pool_new(url, opts, &rc);
  if (fp == NULL)
    return rc;
  char err[640];
  pthread_mutex_lock(&fp->link.mu);
  fp->link.c = fl_connect(fp, fp->timeout_ms, &rc, err, sizeof(err));
  bool unchecked = false;
  if (fp->link.c != NULL) {
    rc = fl_settings_check(fp->link.c, &unchecked, err, sizeof(err));
    if (rc == 0)
      rc = load_on(fp, (flags & CQ_FLEET_LOAD_REPLACE) != 0, err, sizeof(err));
  }
  pthread_mutex_unlock(&fp->link.mu);
  if (rc == 0 && unchecked)
    fl_error("%s; the server's maxmemory-policy could not be read (this "
             "user may run neither CONFIG GET nor INFO): check that it is "
             "noeviction",
             err);
  else
    fl_error("%s", err);
  fl_pool_free(fp);
  return rc;
}

/* What an application's user needs, beyond its namespace's keys and
 * channels: the commands a pool sends itself (FCALL, FUNCTION LIST to
 * check the library's code, SUBSCRIBE for wake-ups, PING, INFO to read the
 * eviction policy), then those the library's code calls (src/fleet/lua/:
 * a test holds this list to the sources). Nothing that changes the
 * server's functions or configuration, nothing of another namespace. */
static const char acl_commands[] =
    "-@all +fcall +function|list +subscribe +ping +info +time +publish +del "
    "+exists +hdel +hget +hgetall +hincrby +hkeys +hmget +hset +lrange "
    "+ltrim +rpush +sadd +scan +smembers +srem +zadd +zcard +zrange "
    "+zrangebyscore +zrem +zscore";

int cq_fleet_acl(const char *ns, char *buf, size_t len) {
  if (ns == NULL || buf == NULL || fl_namespace_check(ns) != 0)
    return CQ_EINVAL;
  int n =
      snprintf(buf, len, "resetkeys ~cq:{%s}:* resetchannels &cq:{%s}:ch:* %s",
               ns, ns, acl_commands);
  return n < 0 || (size_t)n >= len ? CQ_ERANGE : 0;
}
