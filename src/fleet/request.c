/*
 * Requests on a fleet pool, and the names they use.
 *
 * A request is built as in-process: each item is checked when added (the
 * resource exists and is of the right kind, the amount is positive, the
 * request does not name it twice) and the items are kept in resource
 * order, device pools first. Checking a name asks the server (one round
 * trip per item, when the request is built, never when it is used): it
 * says what the name means ("gpu" is this host's "gpu@<host>"), the
 * resource's kind and its uid, which identifies this very resource, so
 * that one removed and added again under the same name is a different one
 * (requests built with the old one fail with CQ_ENOENT, as in-process).
 *
 * Resolved names are interned in the pool, never freed before it: a
 * request holds small indices, and a grant finds device ids there.
 */
#include "fleet.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct fl_name *fl_names_at(struct fl_pool *fp, uint32_t index) {
  return fp->names[index];
}

static void name_free(struct fl_name *nm) {
  for (uint32_t d = 0; d < nm->ndev; d++)
    free(nm->ids[d]);
  free(nm->ids);
  free(nm);
}

void fl_names_free(struct fl_pool *fp) {
  for (uint32_t i = 0; i < fp->n_names; i++)
    name_free(fp->names[i]);
  free(fp->names);
  fp->names = NULL;
  fp->n_names = fp->cap_names = 0;
}

bool fl_name_is(const struct fl_pool *fp, const char *name, const char *canon) {
  if (strcmp(name, canon) == 0)
    return true;
  size_t n = strlen(name), h = strlen(fp->host);
  return strchr(name, '@') == NULL && strncmp(canon, name, n) == 0 &&
         canon[n] == '@' && strlen(canon + n + 1) == h &&
         memcmp(canon + n + 1, fp->host, h) == 0;
}

/* Intern a resolved name (mu held). Each name is allocated on its own, so
 * that pointers to it stay valid while the table grows. */
static int intern(struct fl_pool *fp, const redisReply *r, uint32_t *index) {
  const char *canon = fl_reply_value(r, 0);
  uint32_t uid = (uint32_t)fl_reply_int(r, 2);
  for (uint32_t i = 0; i < fp->n_names; i++)
    if (fp->names[i]->uid == uid && strcmp(fp->names[i]->name, canon) == 0) {
      *index = i;
      return 0;
    }
  if (fp->n_names == fp->cap_names) {
    uint32_t cap = fp->cap_names ? fp->cap_names * 2 : 16;
    struct fl_name **grown = realloc(fp->names, cap * sizeof(*grown));
    if (grown == NULL)
      return CQ_ENOMEM;
    fp->names = grown;
    fp->cap_names = cap;
  }
  struct fl_name *nm = calloc(1, sizeof(*nm));
  if (nm == NULL)
    return CQ_ENOMEM;
  snprintf(nm->name, sizeof(nm->name), "%s", canon);
  nm->uid = uid;
  nm->epoch = fp->epoch_gen;
  nm->kind = (uint8_t)fl_reply_int(r, 1);
  uint32_t ndev =
      nm->kind == CQ_KIND_DEVICES ? (uint32_t)fl_reply_int(r, 3) : 0;
  if (ndev > 0 && (nm->ids = calloc(ndev, sizeof(*nm->ids))) == NULL) {
    free(nm);
    return CQ_ENOMEM;
  }
  for (uint32_t d = 0; d < ndev; d++, nm->ndev++)
    if ((nm->ids[d] = strdup(fl_reply_value(r, 4 + d))) == NULL) {
      name_free(nm);
      return CQ_ENOMEM;
    }
  fp->names[fp->n_names] = nm;
  *index = fp->n_names++;
  return 0;
}

int fl_names_resolve(struct fl_pool *fp, const char *name, uint32_t *index,
                     char *msg) {
  struct fl_args a;
  fl_args_init(&a);
  fl_arg(&a, name);
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  redisReply *r;
  char err[FL_MSG_MAX];
  int rc = fl_run(fp, FL_S_RESOLVE, &a, false, &r, &ctx, err, sizeof(err));
  if (rc != 0) {
    fl_msgf(msg, "fleet: %s", err);
    fl_ctx_finish(fp, &ctx);
    return rc == FL_ESESSION ? CQ_ESYS : rc;
  }
  rc = fl_reply_status(r);
  if (rc == 0 && fl_reply_int(r, 1) == 0) {
    fl_msgf(msg, "request asks unknown resource \"%.*s\"", CQ_NAME_MAX, name);
    rc = CQ_ENOENT;
  } else if (rc == 0) {
    pthread_mutex_lock(&fp->mu);
    rc = intern(fp, r, index);
    pthread_mutex_unlock(&fp->mu);
  } else {
    rc = CQ_ESYS;
  }
  fl_call_done(fp, r);
  fl_ctx_finish(fp, &ctx);
  return rc;
}

int fl_names_refresh(struct fl_pool *fp, const struct fl_req *r) {
  int changed = 0;
  for (uint16_t i = 0; i < r->n; i++) {
    pthread_mutex_lock(&fp->mu);
    struct fl_name *nm = fp->names[r->it[i].name];
    bool stale = nm->epoch != fp->epoch_gen;
    uint32_t gen = fp->epoch_gen;
    pthread_mutex_unlock(&fp->mu);
    if (!stale)
      continue;
    struct fl_args a;
    fl_args_init(&a);
    a.until = cq_now() + fp->heartbeat_ms;
    fl_arg(&a, nm->name); /* stable: names live as long as the pool */
    struct fl_ctx ctx;
    fl_ctx_init(&ctx);
    redisReply *rep;
    char err[FL_MSG_MAX];
    if (fl_run(fp, FL_S_RESOLVE, &a, false, &rep, &ctx, err, sizeof(err)) !=
        0) {
      fl_ctx_finish(fp, &ctx);
      return changed; /* the acquire meets the same and says so */
    }
    pthread_mutex_lock(&fp->mu);
    /* Not declared again yet: left stale, looked up again next time. */
    if (fl_reply_status(rep) == 0 &&
        (int)fl_reply_int(rep, 1) == (int)nm->kind) {
      nm->uid = (uint32_t)fl_reply_int(rep, 2);
      nm->epoch = gen;
      changed++;
    }
    pthread_mutex_unlock(&fp->mu);
    fl_call_done(fp, rep);
    fl_ctx_finish(fp, &ctx);
  }
  return changed;
}

void fl_args_items(struct fl_pool *fp, struct fl_args *a,
                   const struct fl_req *r) {
  fl_arg_i(a, r->n);
  pthread_mutex_lock(&fp->mu);
  for (uint16_t i = 0; i < r->n; i++) {
    const struct fl_name *nm = fp->names[r->it[i].name];
    fl_arg_c(a, (char)r->it[i].mode);
    fl_arg(a, nm->name); /* stable: names live as long as the pool */
    fl_arg_i(a, nm->uid);
    fl_arg_i(a, r->it[i].amount);
  }
  pthread_mutex_unlock(&fp->mu);
}

/* ------------------------------------------------------------------------ */
/* The request operations                                                    */
/* ------------------------------------------------------------------------ */

static bool req_ok(const cq_req *req) {
  return req != NULL && fl_req_ofc(req)->magic == FL_REQ_MAGIC;
}

int fl_op_req_init(cq_req *req, cq_pool *pool) {
  (void)pool;
  struct fl_req *r = fl_req_of(req);
  memset(r, 0, sizeof(*r));
  r->magic = FL_REQ_MAGIC;
  return 0;
}

size_t fl_op_req_count(const cq_req *req) {
  return req_ok(req) ? fl_req_ofc(req)->n : 0;
}

int fl_op_req_set_hold_limit(cq_req *req, int64_t limit_ms) {
  if (!req_ok(req))
    return CQ_EINVAL;
  struct fl_req *r = fl_req_of(req);
  if (limit_ms < 0 || limit_ms > (INT64_C(1) << 53)) {
    fl_msgf(fl_rmsg(r),
            "hold limit %" PRId64 " ms: it must be 0 (none) or from 1 to "
            "%" PRId64 " ms",
            limit_ms, INT64_C(1) << 53);
    return CQ_ERANGE;
  }
  r->limit_ms = limit_ms;
  fl_rmsg(r)[0] = '\0';
  return 0;
}

static uint64_t rank_of(const struct fl_name *nm) {
  return ((uint64_t)(nm->kind != CQ_KIND_DEVICES) << 32) | nm->uid;
}

/* Why `mode` is not an amount the resource can be asked for, or NULL (the
 * in-process pool's words). */
static const char *mismatch(int mode, int kind) {
  if (kind == CQ_KIND_DEVICES)
    return mode == CQ_BACKEND_UNITS || mode == CQ_BACKEND_CLASS
               ? "%s is a device pool: ask a fraction or whole devices"
               : NULL;
  if (mode == CQ_BACKEND_FRACTION || mode == CQ_BACKEND_WHOLE)
    return "%s is not a device pool: ask units";
  if (kind == CQ_KIND_CLASS && mode != CQ_BACKEND_CLASS)
    return "%s is a class: give it to the request as its class";
  if (kind != CQ_KIND_CLASS && mode == CQ_BACKEND_CLASS)
    return "%s is not a class";
  return NULL;
}

/* An item as a request spec writes it: "db:12", "gpu@a:0.5", "gpu@a:2". */
static void item_text(char *buf, size_t len, const char *name, int mode,
                      int64_t amount) {
  if (mode != CQ_BACKEND_FRACTION || amount % CQ_DEVICE_MILLI == 0) {
    snprintf(buf, len, "%s:%" PRId64, name,
             mode == CQ_BACKEND_FRACTION ? amount / CQ_DEVICE_MILLI : amount);
    return;
  }
  int64_t frac = amount % CQ_DEVICE_MILLI;
  int digits = 3;
  while (frac % 10 == 0) {
    frac /= 10;
    digits--;
  }
  snprintf(buf, len, "%s:%" PRId64 ".%0*" PRId64, name,
           amount / CQ_DEVICE_MILLI, digits, frac);
}

static int req_add(cq_req *req, const char *resource, int64_t amount,
                   int mode) {
  struct fl_req *r = fl_req_of(req);
  cq_pool *pool = cq_backend_req_pool(req);
  struct fl_pool *fp = fl_pool_of(pool);
  uint32_t index;
  int rc = fl_names_resolve(fp, resource, &index, fl_rmsg(r));
  if (rc != 0)
    return rc;
  pthread_mutex_lock(&fp->mu);
  const struct fl_name *nm = fp->names[index];
  char name[CQ_NAME_MAX + 1];
  memcpy(name, nm->name, sizeof(name));
  uint8_t kind = nm->kind;
  uint64_t rank = rank_of(nm);
  const char *bad = mismatch(mode, kind);
  for (uint16_t i = 0; bad == NULL && i < r->n; i++) {
    const struct fl_name *other = fp->names[r->it[i].name];
    if (strcmp(other->name, name) == 0) {
      fl_msgf(fl_rmsg(r), "request already names %s", name);
      pthread_mutex_unlock(&fp->mu);
      return CQ_EEXIST;
    }
    if (mode == CQ_BACKEND_CLASS && other->kind == CQ_KIND_CLASS) {
      fl_msgf(fl_rmsg(r), "request already has class %s", other->name);
      pthread_mutex_unlock(&fp->mu);
      return CQ_EEXIST;
    }
  }
  if (bad != NULL) {
    fl_msgf(fl_rmsg(r), bad, name);
    pthread_mutex_unlock(&fp->mu);
    return CQ_EINVAL;
  }
  char what[CQ_NAME_MAX + 40];
  item_text(what, sizeof(what), name, mode, amount);
  if (amount <= 0 ||
      (mode == CQ_BACKEND_FRACTION && amount > CQ_DEVICE_MILLI)) {
    fl_msgf(fl_rmsg(r), "request asks %s but %s", what,
            mode == CQ_BACKEND_FRACTION
                ? "a fraction must be above 0 and at most 1"
                : "amounts must be positive");
    pthread_mutex_unlock(&fp->mu);
    return CQ_ERANGE;
  }
  if (mode == CQ_BACKEND_WHOLE && amount > FL_GRANT_DEVS) {
    fl_msgf(fl_rmsg(r),
            "request asks %s but a fleet grant holds at most %d "
            "devices",
            what, FL_GRANT_DEVS);
    pthread_mutex_unlock(&fp->mu);
    return CQ_ERANGE;
  }
  if (r->n == CQ_REQ_MAX_ITEMS) {
    fl_msgf(fl_rmsg(r), "request names more than %d resources",
            CQ_REQ_MAX_ITEMS);
    pthread_mutex_unlock(&fp->mu);
    return CQ_ETOOMANY;
  }
  /* Keep the items in resource order. */
  uint16_t i = r->n;
  while (i > 0 && rank_of(fp->names[r->it[i - 1].name]) > rank) {
    r->it[i] = r->it[i - 1];
    i--;
  }
  r->it[i].name = index;
  r->it[i].kind = kind;
  r->it[i].mode = mode == CQ_BACKEND_FRACTION ? 'f'
                  : mode == CQ_BACKEND_WHOLE  ? 'w'
                                              : 'u';
  r->it[i].amount = amount;
  r->n++;
  fl_rmsg(r)[0] = '\0';
  pthread_mutex_unlock(&fp->mu);
  return 0;
}

int fl_op_req_add(cq_req *req, const char *resource, int64_t amount, int mode) {
  if (!req_ok(req) || resource == NULL)
    return CQ_EINVAL;
  int rc = req_add(req, resource, amount, mode);
  if (rc != 0)
    fl_msg_local(fl_pool_of(cq_backend_req_pool(req)), cq_backend_req_msg(req));
  return rc;
}
