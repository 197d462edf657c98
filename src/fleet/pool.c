/*
 * The fleet pool's handle: opening and destroying it, and the operations on
 * the pool and its resources (declarations, capacities, removal, stats and
 * the host-scheduler queries). Each is one script; see src/fleet/lua/.
 */
#include "fleet.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Opening                                                                   */
/* ------------------------------------------------------------------------ */

static int host_check(const char *host) {
  size_t len = strlen(host);
  if (len == 0 || len > 48)
    return CQ_EINVAL;
  for (const char *c = host; *c != '\0'; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
          (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.'))
      return CQ_EINVAL;
  return 0;
}

/* This host's name: the option, $CRONOQ_HOST, or the host name up to its
 * first dot. */
static int find_host(struct fl_pool *fp) {
  const char *h = fp->opts.host;
  if (h == NULL)
    h = getenv("CRONOQ_HOST");
  char buf[256];
  if (h == NULL || h[0] == '\0') {
    if (gethostname(buf, sizeof(buf)) != 0)
      snprintf(buf, sizeof(buf), "localhost");
    buf[sizeof(buf) - 1] = '\0';
    buf[strcspn(buf, ".")] = '\0';
    h = buf;
  }
  if (host_check(h) != 0) {
    fl_error("host name \"%.48s\": 1 to 48 letters, digits and \"-_.\"", h);
    return CQ_EINVAL;
  }
  snprintf(fp->host, sizeof(fp->host), "%.48s", h); /* checked above */
  return 0;
}

void fl_pool_free(struct fl_pool *fp) {
  if (fp == NULL)
    return;
  fl_bg_stop(fp);
  if (fp->link.c != NULL)
    redisFree(fp->link.c);
  fl_names_free(fp);
  fl_decls_free(fp);
  free(fp->deferred);
  free(fp->table);
  free(fp->events);
  pthread_mutex_destroy(&fp->mu);
  pthread_mutex_destroy(&fp->link.mu);
  fp->magic = 0;
  free(fp);
}

/* End the pool's session on the server, so that what it holds comes back
 * at once rather than at its TTL. A server that does not answer, or no
 * longer knows the session, is no reason to open another: one call, no
 * recovery. */
static void end_session(struct fl_pool *fp) {
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, fp->sid);
  fl_arg(&a, fp->secret);
  redisReply *r;
  char err[FL_MSG_MAX];
  if (fl_call(fp, FL_S_END, &a, &r, err, sizeof(err)) == 0)
    fl_call_done(fp, r);
}

/* Blocking acquires on a fleet pool always claim at once (no barging
 * window), so CQ_POOL_STRICT_ORDER is accepted and changes nothing. */
#define KNOWN_FLAGS                                                            \
  (CQ_POOL_STAGED_CLAIMS | CQ_POOL_MANUAL_TIMERS | CQ_POOL_STRICT_ORDER)

/* The options, checked and with their defaults. */
static int take_opts(struct fl_pool *fp, const cq_fleet_opts *o) {
  static const cq_fleet_opts defaults = CQ_FLEET_OPTS_INIT;
  if (o == NULL)
    o = &defaults;
  for (size_t i = 0; i < sizeof(o->reserved_) / sizeof(o->reserved_[0]); i++)
    if (o->reserved_[i] != 0) {
      fl_error("cq_fleet_opts: a reserved field is set");
      return CQ_EINVAL;
    }
  if (o->flags & CQ_POOL_BACKFILL) {
    fl_error("fleet pools do not offer backfill (CQ_POOL_BACKFILL) yet");
    return CQ_EINVAL;
  }
  if ((o->flags & ~(unsigned)KNOWN_FLAGS) != 0 ||
      (o->fleet_flags & ~(unsigned)(CQ_FLEET_AUDIT | CQ_FLEET_ASYNC_RELEASE |
                                    CQ_FLEET_NEW_NAMESPACE)) != 0) {
    fl_error("cq_fleet_opts: unknown flags");
    return CQ_EINVAL;
  }
  if (o->clock != NULL && !(o->flags & CQ_POOL_MANUAL_TIMERS)) {
    fl_error("cq_fleet_opts: a clock needs CQ_POOL_MANUAL_TIMERS");
    return CQ_EINVAL;
  }
  if (o->ttl_ms < 0 || o->heartbeat_ms < 0 || o->timeout_ms < 0 ||
      o->max_ttl_ms < 0) {
    fl_error("cq_fleet_opts: negative times");
    return CQ_EINVAL;
  }
  fp->opts = *o;
  fp->ttl_ms = o->ttl_ms > 0 ? o->ttl_ms : 10000;
  fp->heartbeat_ms = o->heartbeat_ms > 0 ? o->heartbeat_ms : 3000;
  if (o->heartbeat_ms == 0 && fp->heartbeat_ms > fp->ttl_ms / 3)
    fp->heartbeat_ms = fp->ttl_ms / 3;
  if (fp->ttl_ms < 100 || fp->heartbeat_ms < 10 ||
      fp->heartbeat_ms * 3 > fp->ttl_ms) {
    fl_error("cq_fleet_opts: the TTL (%lld ms) must be at least 100 ms and "
             "three heartbeat intervals (%lld ms)",
             (long long)fp->ttl_ms, (long long)fp->heartbeat_ms);
    return CQ_EINVAL;
  }
  fp->max_ttl_ms = o->max_ttl_ms > 0 ? o->max_ttl_ms : 10000;
  if (fp->ttl_ms > fp->max_ttl_ms) {
    fl_error("cq_fleet_opts: the TTL (%lld ms) is longer than the namespace's "
             "longest (max_ttl_ms, %lld ms%s): set max_ttl_ms, the same in "
             "every process of the namespace",
             (long long)fp->ttl_ms, (long long)fp->max_ttl_ms,
             o->max_ttl_ms > 0 ? "" : " by default");
    return CQ_EINVAL;
  }
  /* The local deadline comes this much before the server's: it covers
   * clocks that run at slightly different rates, and the time it takes to
   * notice. */
  fp->margin_ms = fp->ttl_ms / 5;
  fp->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 5000;
  snprintf(fp->steps, sizeof(fp->steps), "%u",
           o->script_steps > 0 ? o->script_steps : 4096u);
  return 0;
}

struct fl_pool *fl_pool_new(const char *url, const cq_fleet_opts *opts,
                            int *rc) {
  struct fl_pool *fp = calloc(1, sizeof(*fp));
  if (fp == NULL) {
    *rc = CQ_ENOMEM;
    return NULL;
  }
  fp->magic = FL_POOL_MAGIC;
  fp->wake_fd[0] = fp->wake_fd[1] = -1;
  pthread_mutex_init(&fp->mu, NULL);
  pthread_mutex_init(&fp->link.mu, NULL);
  fp->held.next = fp->held.prev = &fp->held;
  fp->deadline_ms = CQ_NEVER;
  fp->next_hb_ms = CQ_NEVER;
  char err[FL_ERR_MAX];
  *rc = fl_url_parse(url, &fp->url, err, sizeof(err));
  if (*rc != 0)
    fl_error("%s", err);
  else if ((*rc = take_opts(fp, opts)) == 0)
    *rc = find_host(fp);
  if (*rc == 0)
    return fp;
  fl_pool_free(fp);
  return NULL;
}

int cq_fleet_open(cq_pool **out, const char *url, const char *ns,
                  const cq_fleet_opts *opts) {
  fl_error("%s", "");
  if (out == NULL || url == NULL || ns == NULL) {
    fl_error("cq_fleet_open: NULL argument");
    return CQ_EINVAL;
  }
  if (fl_namespace_check(ns) != 0) {
    fl_error("namespace \"%.64s\": 1 to 64 letters, digits and \"_-.\"", ns);
    return CQ_EINVAL;
  }
  int rc;
  struct fl_pool *fp = fl_pool_new(url, opts, &rc);
  if (fp == NULL)
    return rc;
  char err[FL_ERR_MAX];
  snprintf(fp->ns, sizeof(fp->ns), "%s", ns);
  snprintf(fp->prefix, sizeof(fp->prefix), "cq:{%s}:", ns);
  if (fp->opts.on_event != NULL) {
    fp->ev_cap = fp->opts.event_buffer ? fp->opts.event_buffer : 4096;
    fp->events = calloc(fp->ev_cap, sizeof(*fp->events));
    if (fp->events == NULL) {
      rc = CQ_ENOMEM;
      goto fail;
    }
  }
  bool unchecked;
  pthread_mutex_lock(&fp->link.mu);
  rc = fl_server_check(fp, &unchecked, err, sizeof(err));
  pthread_mutex_unlock(&fp->link.mu);
  if (rc == 0 && unchecked) {
    pthread_mutex_lock(&fp->mu);
    fp->stats.settings_unchecked = 1;
    fl_event(fp, CQ_EVENT_WARNING, NULL, "maxmemory-policy", 0);
    pthread_mutex_unlock(&fp->mu);
  }
  if (rc != 0 || (rc = fl_session_open(fp, err, sizeof(err))) != 0) {
    char shown[512];
    fl_url_redact(url, shown, sizeof(shown));
    fl_error("fleet pool %s on %s: %s", ns, shown, err);
    goto fail;
  }
  if ((rc = fl_bg_start(fp)) != 0) {
    fl_error("cannot start the fleet pool's thread");
    goto fail_session;
  }
  if ((rc = cq_backend_pool_create(&fp->pool, &fl_ops, fp, fp->opts.data)) != 0)
    goto fail_session;
  *out = fp->pool;
  return 0;

fail_session:
  end_session(fp);
fail:
  fl_pool_free(fp);
  return rc;
}

int cq_fleet_stats_get(cq_pool *pool, cq_fleet_stats *out) {
  if (pool == NULL || out == NULL || !cq_fleet_is_fleet(pool))
    return CQ_EINVAL;
  struct fl_pool *fp = fl_pool_of(pool);
  pthread_mutex_lock(&fp->mu);
  *out = fp->stats;
  out->max_fence = fp->max_fence;
  pthread_mutex_unlock(&fp->mu);
  return 0;
}

int cq_fleet_is_fleet(const cq_pool *pool) {
  const struct fl_pool *fp = pool != NULL ? cq_backend_impl(pool) : NULL;
  return fp != NULL && fp->magic == FL_POOL_MAGIC;
}

const char *cq_fleet_host(const cq_pool *pool) {
  return cq_fleet_is_fleet(pool)
             ? ((struct fl_pool *)cq_backend_impl(pool))->host
             : NULL;
}

/* ------------------------------------------------------------------------ */
/* Running a script for an operation                                         */
/* ------------------------------------------------------------------------ */

/*
 * Run a pool operation's script: the reply's status is returned (a
 * cronoq.h code, or FL_R_*), its values are left in *out for the caller,
 * who must fl_call_done() it when the return is >= 0 and *out is set; the
 * outcomes it carries are finished (callbacks, events) by fl_op_end().
 */
static int op_run(struct fl_pool *fp, enum fl_script s, struct fl_args *a,
                  redisReply **out, struct fl_ctx *ctx) {
  char err[FL_ERR_MAX];
  *out = NULL;
  int rc = fl_run(fp, s, a, false, out, ctx, err, sizeof(err));
  if (rc != 0) {
    fl_error("%s", err);
    return rc == FL_ESESSION ? CQ_ESYS : rc;
  }
  return fl_reply_status(*out);
}

static int op_end(struct fl_pool *fp, redisReply *r, struct fl_ctx *ctx,
                  int rc) {
  if (r != NULL)
    fl_call_done(fp, r);
  fl_ctx_finish(fp, ctx);
  return rc;
}

/* Reads a successful reply's values into the caller's output. */
typedef void (*reply_fn)(const redisReply *r, void *out);

/* Run a pool operation's script: on success `read` (may be NULL) takes its
 * values; on failure its first value, a message, is cq_fleet_error(). */
static int op_read(struct fl_pool *fp, enum fl_script s, struct fl_args *a,
                   reply_fn read, void *out) {
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  fl_error("%s", "");
  redisReply *r;
  int rc = op_run(fp, s, a, &r, &ctx);
  if (rc == 0 && read != NULL)
    read(r, out);
  else if (rc < 0 && r != NULL && fl_reply_nvalues(r) > 0)
    fl_error("%s", fl_reply_value(r, 0));
  return op_end(fp, r, &ctx, rc > 0 ? CQ_ESYS : rc);
}

static int op_simple(struct fl_pool *fp, enum fl_script s, struct fl_args *a) {
  return op_read(fp, s, a, NULL, NULL);
}

/* ------------------------------------------------------------------------ */
/* Pool operations                                                           */
/* ------------------------------------------------------------------------ */

int fl_op_close(cq_pool *pool) {
  struct fl_pool *fp = fl_pool_of(pool);
  atomic_store(&fp->closed, true);
  struct fl_args a;
  fl_args_init(&a);
  int rc = op_simple(fp, FL_S_CLOSE, &a);
  /* The server could not be told: the waiters here fail all the same. */
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  pthread_mutex_lock(&fp->mu);
  for (size_t i = 0; i < fp->table_cap; i++)
    while (fp->table[i] != NULL)
      fl_grant_decide(fp, fp->table[i], CQ_ECLOSED, NULL, "", &ctx);
  pthread_mutex_unlock(&fp->mu);
  fl_ctx_finish(fp, &ctx);
  return rc == CQ_ESYS ? 0 : rc;
}

int fl_op_destroy(cq_pool *pool) {
  struct fl_pool *fp = fl_pool_of(pool);
  pthread_mutex_lock(&fp->mu);
  bool busy = fp->n_waiting != 0 || fp->held.next != &fp->held;
  pthread_mutex_unlock(&fp->mu);
  if (busy)
    return CQ_EINUSE;
  fl_bg_stop(fp);
  end_session(fp);
  fl_pool_free(fp);
  return 0;
}

int fl_op_expire(cq_pool *pool, int64_t *next_deadline_ms) {
  struct fl_pool *fp = fl_pool_of(pool);
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  int rc = fl_expire_due(fp, fl_now(fp), false, &ctx);
  fl_ctx_finish(fp, &ctx);
  if (next_deadline_ms != NULL) {
    pthread_mutex_lock(&fp->mu);
    *next_deadline_ms = fl_table_first_deadline(fp);
    pthread_mutex_unlock(&fp->mu);
  }
  return rc == CQ_ESYS ? 0 : rc;
}

static void read_pool_stats(const redisReply *r, void *out) {
  cq_pool_stats *o = out;
  memset(o, 0, sizeof(*o));
  o->waiting = (uint64_t)fl_reply_int(r, 0);
  o->waited_grants = (uint64_t)fl_reply_int(r, 1);
}

int fl_op_stats_get(cq_pool *pool, cq_pool_stats *out) {
  struct fl_pool *fp = fl_pool_of(pool);
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, "p");
  int rc = op_read(fp, FL_S_STATS, &a, read_pool_stats, out);
  if (rc == 0) {
    pthread_mutex_lock(&fp->mu);
    out->wakeups = fp->wakeups;
    out->events_dropped = fp->events_dropped;
    pthread_mutex_unlock(&fp->mu);
  }
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Declarations, capacities, removal                                         */
/* ------------------------------------------------------------------------ */

void fl_decl_args(const struct fl_pool *fp, const struct fl_decl *d,
                  struct fl_args *a, char *full, size_t len) {
  fl_args_init(a);
  fl_arg_i(a, d->kind);
  if (d->kind == CQ_KIND_DEVICES) {
    snprintf(full, len, "%s@%s", d->name, fp->host);
    fl_arg(a, full);
  } else {
    fl_arg(a, d->name);
  }
  fl_arg_i(a, d->capacity);
  fl_arg_i(a, d->flags);
  fl_arg(a, fp->ns);
  if (d->kind == CQ_KIND_DEVICES) {
    fl_arg(a, d->name);
    fl_arg(a, fp->host);
    fl_arg(a, d->ids != NULL ? d->ids : "");
  }
}

/* The declaration of `name` this process keeps, or NULL (mu held). A
 * device pool's is kept under its base name ("gpu" for "gpu@<host>"). */
static struct fl_decl *decl_find(struct fl_pool *fp, const char *name) {
  for (size_t i = 0; i < fp->n_decls; i++) {
    struct fl_decl *d = &fp->decls[i];
    char full[2 * CQ_NAME_MAX + 4];
    snprintf(full, sizeof(full), "%s@%s", d->name, fp->host);
    if (strcmp(name, d->name) == 0 ||
        (d->kind == CQ_KIND_DEVICES && strcmp(name, full) == 0))
      return d;
  }
  return NULL;
}

void fl_decl_keep(struct fl_pool *fp, const struct fl_decl *d) {
  pthread_mutex_lock(&fp->mu);
  struct fl_decl *have = decl_find(fp, d->name);
  if (have == NULL && fp->n_decls == fp->cap_decls) {
    size_t cap = fp->cap_decls ? fp->cap_decls * 2 : 8;
    struct fl_decl *grown = realloc(fp->decls, cap * sizeof(*grown));
    if (grown != NULL) {
      fp->decls = grown;
      fp->cap_decls = cap;
    }
  }
  if (have != NULL && d->kind != CQ_KIND_DEVICES)
    have->capacity = d->capacity; /* the namespace's, as last seen */
  /* Out of memory: not re-declared after a loss of state, as if another
   * process had declared it. */
  if (have == NULL && fp->n_decls < fp->cap_decls) {
    have = &fp->decls[fp->n_decls];
    *have = *d;
    have->ids = NULL;
    if (d->ids == NULL || (have->ids = strdup(d->ids)) != NULL)
      fp->n_decls++;
  }
  pthread_mutex_unlock(&fp->mu);
}

void fl_decls_free(struct fl_pool *fp) {
  for (size_t i = 0; i < fp->n_decls; i++)
    free(fp->decls[i].ids);
  free(fp->decls);
  fp->decls = NULL;
  fp->n_decls = fp->cap_decls = 0;
}

/* Declare, and keep the declaration to send again after a loss of state. */
/* The capacity a declaration's reply says the namespace has (its second
 * value, where there is one). */
static void read_capacity(const redisReply *r, void *out) {
  if (fl_reply_nvalues(r) > 1)
    *(int64_t *)out = fl_reply_int(r, 1);
}

/* Declare `d`; a budget or class the namespace has keeps its live
 * capacity, which is then what this process declared (sent again after a
 * loss of state). */
static int declare(struct fl_pool *fp, const struct fl_decl *d) {
  struct fl_args a;
  char full[CQ_NAME_MAX + 2];
  fl_decl_args(fp, d, &a, full, sizeof(full));
  struct fl_decl kept = *d;
  int rc = op_read(fp, FL_S_DECLARE, &a,
                   d->kind == CQ_KIND_DEVICES ? NULL : read_capacity,
                   &kept.capacity);
  if (rc == 0)
    fl_decl_keep(fp, &kept);
  return rc;
}

int fl_op_budget_add(cq_pool *pool, const char *name, int64_t capacity,
                     int kind, unsigned flags) {
  struct fl_pool *fp = fl_pool_of(pool);
  fl_error("%s", "");
  if (fl_name_check(name, false) != 0 ||
      (flags & ~(unsigned)CQ_BUDGET_LONE) != 0 ||
      (kind == CQ_KIND_CLASS && flags != 0) ||
      (kind != CQ_KIND_BUDGET && kind != CQ_KIND_CLASS))
    return CQ_EINVAL;
  if (capacity < 0 || capacity > CQ_BUDGET_MAX)
    return CQ_ERANGE;
  struct fl_decl d = {.kind = kind, .capacity = capacity, .flags = flags};
  snprintf(d.name, sizeof(d.name), "%s", name);
  return declare(fp, &d);
}

/* The checks cq_devices_add() makes of an id. */
static int id_check(const char *id) {
  size_t len = strlen(id);
  if (len == 0 || len > CQ_DEVICE_ID_MAX)
    return CQ_EINVAL;
  for (const char *c = id; *c; c++)
    if (*c == ',' || *c == ' ' || *c == '=' || (unsigned char)*c < 0x21 ||
        (unsigned char)*c >= 0x7f)
      return CQ_EINVAL;
  return 0;
}

int fl_op_devices_add(cq_pool *pool, const char *name, size_t count,
                      const char *const *ids) {
  struct fl_pool *fp = fl_pool_of(pool);
  fl_error("%s", "");
  if (fl_name_check(name, false) != 0) {
    if (name != NULL && strchr(name, '@') != NULL)
      fl_error("device pool \"%.63s\": a process registers its own host's "
               "devices, as \"%s\" without a host",
               name, "name");
    return CQ_EINVAL;
  }
  if (count > CQ_DEVICES_MAX)
    return CQ_ERANGE;
  char full[CQ_NAME_MAX + 2];
  if ((size_t)snprintf(full, sizeof(full), "%s@%s", name, fp->host) >
      CQ_NAME_MAX) {
    fl_error("device pool \"%s@%s\" is longer than %d bytes", name, fp->host,
             CQ_NAME_MAX);
    return CQ_EINVAL;
  }
  size_t total = 1;
  for (size_t i = 0; i < count; i++) {
    char num[24];
    const char *id = ids != NULL ? ids[i] : num;
    if (ids == NULL)
      snprintf(num, sizeof(num), "%zu", i);
    if (id == NULL || id_check(id) != 0)
      return CQ_EINVAL;
    for (size_t j = 0; ids != NULL && j < i; j++)
      if (strcmp(ids[j], id) == 0)
        return CQ_EINVAL;
    total += strlen(id) + 1;
  }
  char *list = malloc(total);
  if (list == NULL)
    return CQ_ENOMEM;
  size_t at = 0;
  for (size_t i = 0; i < count; i++) {
    if (ids != NULL)
      at +=
          (size_t)snprintf(list + at, total - at, "%s%s", i ? " " : "", ids[i]);
    else
      at += (size_t)snprintf(list + at, total - at, "%s%zu", i ? " " : "", i);
  }
  list[at] = '\0';
  struct fl_decl d = {
      .kind = CQ_KIND_DEVICES, .capacity = (int64_t)count, .ids = list};
  snprintf(d.name, sizeof(d.name), "%s", name);
  int rc = declare(fp, &d);
  free(list);
  return rc;
}

int fl_op_set_capacity(cq_pool *pool, const char *name, int64_t capacity,
                       int kind) {
  struct fl_pool *fp = fl_pool_of(pool);
  if (capacity < 0 || capacity > CQ_BUDGET_MAX)
    return CQ_ERANGE;
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, name);
  fl_arg_i(&a, kind);
  fl_arg_i(&a, capacity);
  int rc = op_simple(fp, FL_S_SETCAP, &a);
  if (rc == 0 && kind != CQ_KIND_DEVICES) {
    /* Re-declared after a loss of state with the capacity it has now. */
    pthread_mutex_lock(&fp->mu);
    struct fl_decl *d = decl_find(fp, name);
    if (d != NULL)
      d->capacity = capacity;
    pthread_mutex_unlock(&fp->mu);
  }
  return rc;
}

int fl_op_resource_remove(cq_pool *pool, const char *name) {
  struct fl_pool *fp = fl_pool_of(pool);
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, name);
  int rc = op_simple(fp, FL_S_REMOVE, &a);
  if (rc == 0) {
    pthread_mutex_lock(&fp->mu);
    struct fl_decl *d = decl_find(fp, name);
    if (d != NULL) {
      free(d->ids);
      *d = fp->decls[--fp->n_decls];
    }
    pthread_mutex_unlock(&fp->mu);
  }
  return rc;
}

int fl_op_device_set_online(cq_pool *pool, const char *name, uint32_t index,
                            int online) {
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, name);
  fl_arg_i(&a, index);
  fl_arg(&a, online ? "1" : "0");
  return op_simple(fl_pool_of(pool), FL_S_ONLINE, &a);
}

/* ------------------------------------------------------------------------ */
/* Stats                                                                     */
/* ------------------------------------------------------------------------ */

/* The values of a resource in stats.lua's replies: 18 figures, then the
 * wait histogram's bounds (cq_wait_stats.below) when they are asked for,
 * with the number of them as the argument after the mode. */
#define RES_FIGURES 18
#define RES_FIELDS (RES_FIGURES + CQ_WAIT_BUCKETS)
#define DEV_FIELDS 8

/* A resource's figures, without the bounds. */
static void res_from(const redisReply *r, size_t at, cq_resource_stats *o) {
  memset(o, 0, sizeof(*o));
  snprintf(o->name, sizeof(o->name), "%s", fl_reply_value(r, at));
  o->kind = (int)fl_reply_int(r, at + 1);
  o->flags = (unsigned)fl_reply_int(r, at + 2);
  o->capacity = fl_reply_int(r, at + 3);
  o->in_use = fl_reply_int(r, at + 4);
  o->withheld = fl_reply_int(r, at + 5);
  o->peak = fl_reply_int(r, at + 6);
  o->waiting = (uint64_t)fl_reply_int(r, at + 7);
  o->grants = (uint64_t)fl_reply_int(r, at + 8);
  o->timeouts = (uint64_t)fl_reply_int(r, at + 9);
  o->cancellations = (uint64_t)fl_reply_int(r, at + 10);
  o->wait.count = (uint64_t)fl_reply_int(r, at + 11);
  o->wait.p50_ms = fl_reply_int(r, at + 12);
  o->wait.p99_ms = fl_reply_int(r, at + 13);
  o->wait.max_ms = fl_reply_int(r, at + 14);
  o->wait.sum_ms = fl_reply_int(r, at + 15);
  o->devices = (uint32_t)fl_reply_int(r, at + 16);
  o->online = (uint32_t)fl_reply_int(r, at + 17);
}

/* A resource's figures with the bounds, which come after them. */
static void res_below_from(const redisReply *r, size_t at,
                           cq_resource_stats *o) {
  res_from(r, at, o);
  for (int b = 0; b < CQ_WAIT_BUCKETS; b++)
    o->wait.below[b] = (uint64_t)fl_reply_int(r, at + RES_FIGURES + (size_t)b);
}

static void dev_from(const redisReply *r, size_t at, cq_device_stats *o) {
  memset(o, 0, sizeof(*o));
  snprintf(o->id, sizeof(o->id), "%s", fl_reply_value(r, at));
  o->index = (uint32_t)fl_reply_int(r, at + 1);
  o->online = (int)fl_reply_int(r, at + 2);
  o->whole = (int)fl_reply_int(r, at + 3);
  o->reserved = (int)fl_reply_int(r, at + 4);
  o->used_milli = fl_reply_int(r, at + 5);
  o->peak_milli = fl_reply_int(r, at + 6);
  o->grants = (uint64_t)fl_reply_int(r, at + 7);
}

static void read_res(const redisReply *r, void *out) {
  res_below_from(r, 0, out);
}
static void read_dev(const redisReply *r, void *out) { dev_from(r, 0, out); }

int fl_op_resource_stats_get(cq_pool *pool, const char *name,
                             cq_resource_stats *out) {
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, "r");
  fl_arg_i(&a, CQ_WAIT_BUCKETS);
  fl_arg(&a, name);
  return op_read(fl_pool_of(pool), FL_S_STATS, &a, read_res, out);
}

struct snapshot {
  cq_resource_stats *out;
  size_t cap, *count;
};

static void read_snapshot(const redisReply *r, void *out) {
  struct snapshot *s = out;
  size_t n = fl_reply_nvalues(r) / RES_FIELDS;
  for (size_t i = 0; i < n && i < s->cap; i++)
    res_below_from(r, i * RES_FIELDS, &s->out[i]);
  *s->count = n;
}

int fl_op_pool_snapshot(cq_pool *pool, cq_resource_stats *out, size_t cap,
                        size_t *count) {
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, "a");
  fl_arg(&a, "0");
  fl_arg_i(&a, CQ_WAIT_BUCKETS);
  *count = 0; /* until the reply says (the core checked it) */
  struct snapshot s = {out, cap, count};
  return op_read(fl_pool_of(pool), FL_S_STATS, &a, read_snapshot, &s);
}

int fl_op_device_stats_get(cq_pool *pool, const char *name, uint32_t index,
                           cq_device_stats *out) {
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, "d");
  fl_arg(&a, name);
  fl_arg_i(&a, index);
  return op_read(fl_pool_of(pool), FL_S_STATS, &a, read_dev, out);
}

int cq__fleet_dump(cq_pool *pool, cq_resource_stats *res, size_t res_cap,
                   size_t *n_res, cq_device_stats *devs, size_t dev_cap,
                   size_t *n_devs, cq_pool_stats *ps);

/*
 * Tests: every resource, after each device pool its devices, and the
 * pool's figures, in one snapshot (one script), so that a differential
 * test can compare the whole namespace after every operation at the cost
 * of one round trip. Waiting-time quantiles and bounds are left at 0.
 */
struct dump {
  cq_resource_stats *res;
  size_t res_cap, *n_res;
  cq_device_stats *devs;
  size_t dev_cap, *n_devs;
  cq_pool_stats *ps;
};

static void read_dump(const redisReply *r, void *out) {
  struct dump *d = out;
  size_t at = 0, nv = fl_reply_nvalues(r) - 2, nr = 0, nd = 0;
  memset(d->ps, 0, sizeof(*d->ps));
  d->ps->waiting = (uint64_t)fl_reply_int(r, nv);
  d->ps->waited_grants = (uint64_t)fl_reply_int(r, nv + 1);
  while (at + RES_FIGURES <= nv) {
    cq_resource_stats st;
    res_from(r, at, &st);
    at += RES_FIGURES;
    if (nr < d->res_cap)
      d->res[nr] = st;
    nr++;
    for (uint32_t k = 0; st.kind == CQ_KIND_DEVICES && k < st.devices;
         k++, at += DEV_FIELDS)
      if (nd < d->dev_cap)
        dev_from(r, at, &d->devs[nd++]);
  }
  *d->n_res = nr;
  *d->n_devs = nd;
}

int cq__fleet_dump(cq_pool *pool, cq_resource_stats *res, size_t res_cap,
                   size_t *n_res, cq_device_stats *devs, size_t dev_cap,
                   size_t *n_devs, cq_pool_stats *ps) {
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, "a");
  fl_arg(&a, "2");
  fl_arg(&a, "0"); /* no bounds */
  *n_res = 0;
  *n_devs = 0;
  struct dump d = {res, res_cap, n_res, devs, dev_cap, n_devs, ps};
  return op_read(fl_pool_of(pool), FL_S_STATS, &a, read_dump, &d);
}

int cq__fleet_fsck(cq_pool *pool, char *problems, size_t len);

/* Tests: the namespace's own invariants (src/fleet/lua/fsck.lua), capacity
 * excess left out (a shrink may leave it). "" when all hold. */
struct text {
  char *buf;
  size_t len;
};

static void read_problems(const redisReply *r, void *out) {
  struct text *t = out;
  for (size_t i = 0, at = 0; i < fl_reply_nvalues(r) && at < t->len; i++)
    at += (size_t)snprintf(t->buf + at, t->len - at, "%s%s", i ? "; " : "",
                           fl_reply_value(r, i));
}

static int fsck(cq_pool *pool, const char *mode, char *problems, size_t len) {
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, mode);
  problems[0] = '\0';
  struct text t = {problems, len};
  return op_read(fl_pool_of(pool), FL_S_FSCK, &a, read_problems, &t);
}

int cq__fleet_fsck(cq_pool *pool, char *problems, size_t len) {
  return fsck(pool, "nocap", problems, len);
}

int cq__fleet_fsck_capacity(cq_pool *pool, char *problems, size_t len);

/* Tests: the same, and in use within capacity on every budget, for a
 * caller that knows no shrink is still above what is in use. */
int cq__fleet_fsck_capacity(cq_pool *pool, char *problems, size_t len) {
  return fsck(pool, "cap", problems, len);
}

uint64_t cq__fleet_beats(cq_pool *pool);

/* Tests: the heartbeats answered so far (the first comes right after the
 * session opens), to wait for the background thread to be idle. */
uint64_t cq__fleet_beats(cq_pool *pool) {
  struct fl_pool *fp = fl_pool_of(pool);
  pthread_mutex_lock(&fp->mu);
  uint64_t n = fp->beats;
  pthread_mutex_unlock(&fp->mu);
  return n;
}

void cq__fleet_drop_replies(cq_pool *pool, unsigned n);

/* Tests: the next n replies of the command connection are lost, as a
 * timeout or a broken connection would lose them: the library reconnects
 * and sends the call again, as a retry. */
void cq__fleet_drop_replies(cq_pool *pool, unsigned n) {
  struct fl_pool *fp = fl_pool_of(pool);
  pthread_mutex_lock(&fp->link.mu);
  fp->link.drop_replies = n;
  pthread_mutex_unlock(&fp->link.mu);
}

void cq__fleet_late_reply(cq_pool *pool, uint32_t which);

/* Tests: the next reply of a heartbeat (FL_LATE_HEARTBEAT) or an acquire
 * (FL_LATE_ACQUIRE) is applied late, or a callback granted at once is
 * told late (FL_LATE_GRANTED): see fl_late_reply(). */
void cq__fleet_late_reply(cq_pool *pool, uint32_t which) {
  atomic_fetch_or(&fl_pool_of(pool)->late, which);
}

int cq__fleet_read_entry(cq_pool *pool, const cq_req *req, const char *id,
                         const char *entry);

/* Tests: read `entry` as the reply of an acquire of `req` by an attempt
 * named `id` granted at once, as the library reads it: 0, or -1 when it
 * is refused. */
int cq__fleet_read_entry(cq_pool *pool, const cq_req *req, const char *id,
                         const char *entry) {
  struct fl_pool *fp = fl_pool_of(pool);
  const struct fl_req *r = fl_req_ofc(req);
  static struct fl_grant g; /* large: not on the stack */
  static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&g_mu);
  memset(&g, 0, sizeof(g));
  g.n_items = (uint8_t)r->n;
  for (uint16_t i = 0; i < r->n; i++) {
    g.it[i].name = r->it[i].name;
    g.it[i].mode = r->it[i].mode;
  }
  snprintf(g.id, sizeof(g.id), "%s", id);
  pthread_mutex_lock(&fp->mu);
  uint64_t seen = fp->max_fence;
  int rc = fl_grant_read(fp, &g, entry);
  fp->max_fence = seen;
  pthread_mutex_unlock(&fp->mu);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

uint32_t cq__fleet_late_pending(cq_pool *pool);

/* Tests: the FL_LATE_* hooks set and not reached yet. */
uint32_t cq__fleet_late_pending(cq_pool *pool) {
  return atomic_load(&fl_pool_of(pool)->late);
}

/* ------------------------------------------------------------------------ */
/* For host schedulers                                                       */
/* ------------------------------------------------------------------------ */

static void read_copies(const redisReply *r, void *out) {
  int64_t n = fl_reply_int(r, 0);
  *(int64_t *)out = n < 0 ? INT64_MAX : n;
}

int fl_op_req_headroom(cq_pool *pool, const cq_req *req, int64_t *copies) {
  struct fl_pool *fp = fl_pool_of(pool);
  const struct fl_req *r = fl_req_ofc(req);
  if (r->magic != FL_REQ_MAGIC)
    return CQ_EINVAL;
  if (cq_backend_req_pool(req) != pool)
    return CQ_EPOOL;
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, "h");
  fl_args_items(fp, &a, r);
  *copies = 0;
  return op_read(fp, FL_S_QUERY, &a, read_copies, copies);
}

/* The message of one problem, in the in-process pool's words. */
static void problem_text(const struct fl_pool *fp, char *msg, const char *task,
                         const struct fl_name *full, const struct fl_ritem *it,
                         int code, int64_t bound) {
  /* This host's device pools as the caller writes them. */
  struct fl_name shown = *full;
  fl_msg_local(fp, shown.name);
  const struct fl_name *nm = &shown;
  char what[CQ_NAME_MAX + 80];
  if (it->mode == 'f') {
    int64_t frac = it->amount % CQ_DEVICE_MILLI;
    int digits = 3;
    while (frac != 0 && frac % 10 == 0) {
      frac /= 10;
      digits--;
    }
    snprintf(what, sizeof(what), "%s:%" PRId64 ".%0*" PRId64, nm->name,
             it->amount / CQ_DEVICE_MILLI, digits, frac);
  } else {
    snprintf(what, sizeof(what), "%s:%" PRId64, nm->name, it->amount);
  }
  if (code == CQ_ENOENT)
    fl_msgf(msg, "task \"%.40s\" requires %s, which was removed", task,
            nm->name);
  else if (nm->kind == CQ_KIND_CLASS)
    fl_msgf(msg, "task \"%.40s\" is of class %s, whose max_workers is %" PRId64,
            task, nm->name, bound);
  else
    fl_msgf(msg, "task \"%.40s\" requires %s but the pool only has %" PRId64,
            task, what, bound);
}

int fl_op_tasks_validate(cq_pool *pool, const cq_task *tasks, size_t n,
                         cq_problem_fn fn, void *arg) {
  struct fl_pool *fp = fl_pool_of(pool);
  int result = 0;
  for (size_t t = 0; t < n; t++) {
    const char *name = tasks[t].name != NULL ? tasks[t].name : "?";
    char msg[FL_MSG_MAX];
    int first = 0;
    const cq_req *req = tasks[t].req;
    if (req == NULL || fl_req_ofc(req)->magic != FL_REQ_MAGIC) {
      fl_msgf(msg, "task \"%.40s\" has no valid request", name);
      first = CQ_EINVAL;
    } else if (cq_backend_req_pool(req) != pool) {
      fl_msgf(msg, "task \"%.40s\": its request belongs to another pool", name);
      first = CQ_EPOOL;
    }
    if (first != 0) {
      if (result == 0)
        result = first;
      if (fn != NULL)
        fn(t, first, msg, arg);
      continue;
    }
    const struct fl_req *r = fl_req_ofc(req);
    struct fl_args a;
    fl_args_init(&a);
    fl_arg(&a, "v");
    fl_arg(&a, "1");
    fl_args_items(fp, &a, r);
    struct fl_ctx ctx;
    fl_ctx_init(&ctx);
    redisReply *rep;
    int rc = op_run(fp, FL_S_QUERY, &a, &rep, &ctx);
    if (rc != 0) {
      op_end(fp, rep, &ctx, 0);
      return rc > 0 ? CQ_ESYS : rc;
    }
    char msgs[CQ_REQ_MAX_ITEMS][FL_MSG_MAX];
    int codes[CQ_REQ_MAX_ITEMS], k = 0;
    for (uint16_t i = 0; i < r->n; i++) {
      int code = (int)fl_reply_int(rep, 2 * (size_t)i);
      if (code == 0)
        continue;
      pthread_mutex_lock(&fp->mu);
      problem_text(fp, msgs[k], name, fl_names_at(fp, r->it[i].name), &r->it[i],
                   code, fl_reply_int(rep, 2 * (size_t)i + 1));
      pthread_mutex_unlock(&fp->mu);
      codes[k++] = code;
    }
    op_end(fp, rep, &ctx, 0);
    if (k > 0 && result == 0)
      result = codes[0];
    for (int i = 0; i < k && fn != NULL; i++)
      fn(t, codes[0], msgs[i], arg);
  }
  return result;
}

static void read_room(const redisReply *r, void *out) {
  cq_room *o = out;
  o->kind = (int)fl_reply_int(r, 0);
  size_t n = (fl_reply_nvalues(r) - 1) / 4;
  for (size_t i = 0; i < n && o->count < CQ_ROOM_MAX; i++) {
    size_t at = 1 + 4 * i;
    snprintf(o->items[o->count].name, sizeof(o->items[0].name), "%s",
             fl_reply_value(r, at));
    o->items[o->count].units = fl_reply_int(r, at + 1);
    o->items[o->count].largest_milli = fl_reply_int(r, at + 2);
    o->items[o->count].whole = (uint32_t)fl_reply_int(r, at + 3);
    o->count++;
  }
}

int fl_op_pool_room(cq_pool *pool, const char *job_class, cq_room *out) {
  memset(out, 0, sizeof(*out));
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, "r");
  fl_arg(&a, job_class != NULL ? job_class : "");
  struct fl_pool *fp = fl_pool_of(pool);
  int rc = op_read(fp, FL_S_QUERY, &a, read_room, out);
  /* The room is this host's: its device pools by their short names, as
   * the caller writes them in requests. */
  for (size_t i = 0; rc == 0 && i < out->count; i++)
    fl_msg_local(fp, out->items[i].name);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* The operations table                                                      */
/* ------------------------------------------------------------------------ */

/* The detail of a failed declaration, for cq_pool_add_spec()'s message. */
static const char *fl_op_last_error(const cq_pool *pool) {
  (void)pool;
  return cq_fleet_error();
}

/* The counters of cq_fleet_stats in cq_pool_write_metrics(), as
 * cronoq_fleet_<name>_total: what this process's pool met. */
static const struct {
  const char *name, *help;
  size_t offset;
} fl_counters[] = {
#define FL_COUNTER_(field, help)                                               \
  { "fleet_" #field, help, offsetof(cq_fleet_stats, field) }
    FL_COUNTER_(sessions, "Sessions this process opened: 1, and one more "
                          "per loss."),
    FL_COUNTER_(leases_lost, "Leases this process lost (CQ_EVENT_LOST)."),
    FL_COUNTER_(state_losses, "Times the namespace was found recreated: the "
                              "server had lost its state."),
    FL_COUNTER_(rollbacks, "Failovers detected: a lease missing, or the "
                           "fencing counter behind one seen."),
    FL_COUNTER_(reconnects, "Connections to the server made again after one "
                            "broke."),
    FL_COUNTER_(unavailable, "Calls that failed with CQ_EUNAVAILABLE."),
    FL_COUNTER_(deferred, "Releases that could not reach the server, applied "
                          "later by a heartbeat."),
    FL_COUNTER_(reconciled, "Leases and waiters of calls whose reply was "
                            "lost, ended by a heartbeat."),
#undef FL_COUNTER_
};

#define FL_N_COUNTERS (sizeof(fl_counters) / sizeof(fl_counters[0]))
_Static_assert(FL_N_COUNTERS <= CQ_BACKEND_METRICS_MAX,
               "the fleet's counters fit the metrics' room");

static int fl_op_metrics_get(cq_pool *pool, cq_backend_metric *out, size_t cap,
                             size_t *count) {
  cq_fleet_stats st;
  int rc = cq_fleet_stats_get(pool, &st);
  if (rc != 0)
    return rc;
  for (size_t i = 0; i < FL_N_COUNTERS && i < cap; i++) {
    uint64_t v;
    memcpy(&v, (const char *)&st + fl_counters[i].offset, sizeof(v));
    out[i] = (cq_backend_metric){fl_counters[i].name, fl_counters[i].help, 1,
                                 (double)v};
  }
  *count = FL_N_COUNTERS;
  return 0;
}

const cq_backend_ops fl_ops = {
    .size = sizeof(cq_backend_ops),
    .name = "fleet",
    .flags = CQ_BACKEND_SHARED, /* a namespace is declared by all its users */
    .close = fl_op_close,
    .destroy = fl_op_destroy,
    .expire = fl_op_expire,
    .stats_get = fl_op_stats_get,
    .budget_add = fl_op_budget_add,
    .set_capacity = fl_op_set_capacity,
    .resource_remove = fl_op_resource_remove,
    .resource_stats_get = fl_op_resource_stats_get,
    .pool_snapshot = fl_op_pool_snapshot,
    .devices_add = fl_op_devices_add,
    .device_stats_get = fl_op_device_stats_get,
    .device_set_online = fl_op_device_set_online,
    .req_init = fl_op_req_init,
    .req_add = fl_op_req_add,
    .req_set_hold_limit = fl_op_req_set_hold_limit,
    .req_count = fl_op_req_count,
    .grant_try = fl_op_grant_try,
    .grant_acquire = fl_op_grant_acquire,
    .grant_submit = fl_op_grant_submit,
    .grant_abort = fl_op_grant_abort,
    .grant_release = fl_op_grant_release,
    .grant_release_part = fl_op_grant_release_part,
    .grant_release_device = fl_op_grant_release_device,
    .grant_devices = fl_op_grant_devices,
    .grant_cuda_visible = fl_op_grant_cuda_visible,
    .grant_held = fl_op_grant_held,
    .grant_is_held = fl_op_grant_is_held,
    .grant_is_idle = fl_op_grant_is_idle,
    .req_headroom = fl_op_req_headroom,
    .tasks_validate = fl_op_tasks_validate,
    .pool_room = fl_op_pool_room,
    .last_error = fl_op_last_error,
    .metrics_get = fl_op_metrics_get,
};
