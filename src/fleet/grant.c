/*
 * Grants on a fleet pool: the acquire styles, abort, release and partial
 * release, and what a held grant reports.
 *
 * A grant moves IDLE -> WAITING -> HELD -> IDLE as in-process. An attempt
 * is numbered (`op`) and named "<session>.<op>" on the server, where it is
 * a lease once granted and a waiter before. While it waits it is in the
 * pool's table, entered while the connection is still held after the
 * acquire's reply, so that no later reply can carry its outcome before it
 * is there. Whoever applies its outcome (a reply on any thread, the
 * background thread's fetch) takes it out of the table and notifies its
 * owner: a blocked caller is woken, a callback is run after every lock is
 * dropped.
 *
 * Deadlines are this process's. A blocked caller whose deadline passes, or
 * the background thread for a callback waiter (cq_pool_expire() with
 * manual timers), sends an abort; if the grant won the race, the abort
 * says so and the grant is returned, as in-process.
 */
#include "fleet.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool fl_entry_parse(const char *entry, struct fl_entry *out) {
  if (entry == NULL || (entry[0] != 'g' && entry[0] != 'x') || entry[1] != ' ')
    return false;
  out->kind = entry[0];
  out->id = entry + 2;
  out->id_len = strcspn(out->id, " ");
  if (out->id_len == 0 || out->id[out->id_len] != ' ')
    return false;
  out->rest = out->id + out->id_len + 1;
  return true;
}

/* The devices ",d,d" of item i after its ':' at *pp: appended to g->devs,
 * each of the item's pool and once. 0, or -1. */
static int fill_devices(struct fl_pool *fp, struct fl_grant *g, unsigned i,
                        const char **pp) {
  const struct fl_name *nm = fl_names_at(fp, g->it[i].name);
  const char *p = *pp;
  for (;;) {
    char *end;
    unsigned long d = strtoul(p, &end, 10);
    if (end == p || *p == '-' || g->ndevs >= FL_GRANT_DEVS || nm == NULL ||
        d >= nm->ndev)
      return -1;
    for (unsigned k = g->it[i].dev_first; k < g->ndevs; k++)
      if (g->devs[k] == d)
        return -1;
    g->devs[g->ndevs++] = (uint16_t)d;
    g->it[i].ndev++;
    p = end;
    if (*p != ',')
      break;
    p++;
  }
  *pp = p;
  return 0;
}

/* Whether an item's holdings are those of its mode: units hold no device,
 * a fraction one, n whole devices n thousandths. */
static bool item_consistent(const struct fl_gitem *it) {
  if (it->mode == 'f')
    return it->held > 0 ? it->ndev == 1 : it->ndev <= 1;
  if (it->mode == 'w')
    return it->held == (int64_t)it->ndev * CQ_DEVICE_MILLI;
  return it->ndev == 0;
}

int fl_grant_fill(struct fl_pool *fp, struct fl_grant *g, const char *payload) {
  char *end;
  /* Tokens stay below 2^53, exact in the server's Lua. */
  g->fence = strtoull(payload, &end, 10);
  if (end == payload || *payload == '-' || g->fence >= (UINT64_C(1) << 53))
    return -1;
  const char *p = end;
  g->ndevs = 0;
  for (unsigned i = 0; i < g->n_items; i++) {
    while (*p == ' ')
      p++;
    struct fl_gitem *it = &g->it[i];
    it->held = strtoll(p, &end, 10);
    if (end == p || it->held < 0)
      return -1;
    p = end;
    it->dev_first = g->ndevs;
    it->ndev = 0;
    if (*p == ':') {
      p++;
      if (fill_devices(fp, g, i, &p) != 0)
        return -1;
    }
    if (!item_consistent(it))
      return -1;
  }
  while (*p == ' ')
    p++;
  if (*p != '\0')
    return -1;
  if (g->fence > fp->max_fence)
    fp->max_fence = g->fence;
  return 0;
}

static void ctx_push(struct fl_ctx *c, struct fl_grant *g) {
  g->ready_next = NULL;
  *c->ready_tail = g;
  c->ready_tail = &g->ready_next;
}

/* Start an attempt on `grant`: bind it, number it, copy the request's
 * items. */
static int attempt_begin(struct fl_pool *fp, cq_pool *pool, cq_grant *grant,
                         const cq_req *req, struct fl_grant **out) {
  const struct fl_req *r = fl_req_ofc(req);
  if (r->magic != FL_REQ_MAGIC)
    return CQ_EINVAL;
  if (cq_backend_req_pool(req) != pool)
    return CQ_EPOOL;
  struct fl_grant *g = fl_grant_of(grant);
  if (fl_gstate(g) != FL_G_IDLE)
    return CQ_ESTATE;
  if (atomic_load(&fp->closed))
    return CQ_ECLOSED;
  pthread_mutex_lock(&fp->mu);
  g->op = ++fp->next_op;
  g->attempt = ++fp->next_attempt;
  snprintf(g->id, sizeof(g->id), "%s.%" PRIu64, fp->sid, g->op);
  g->gen = fp->gen;
  pthread_mutex_unlock(&fp->mu);
  g->n_items = (uint8_t)r->n;
  for (uint16_t i = 0; i < r->n; i++) {
    g->it[i].name = r->it[i].name;
    g->it[i].mode = r->it[i].mode;
    g->it[i].held = 0;
    g->it[i].dev_first = 0;
    g->it[i].ndev = 0;
  }
  g->ndevs = 0;
  g->status = 0;
  fl_gmsg(g)[0] = '\0';
  g->lost = false;
  g->parts = 0;
  g->fence = 0;
  g->seq = 0;
  g->t_start = fl_now(fp);
  g->deadline = CQ_NEVER;
  g->cb = NULL;
  g->wait = NULL;
  g->in_table = g->in_held = false;
  *out = g;
  return 0;
}

/* A new number and id for an attempt sent again on a new session. */
static void attempt_renumber(struct fl_pool *fp, struct fl_grant *g) {
  pthread_mutex_lock(&fp->mu);
  g->op = ++fp->next_op;
  snprintf(g->id, sizeof(g->id), "%s.%" PRIu64, fp->sid, g->op);
  g->gen = fp->gen;
  pthread_mutex_unlock(&fp->mu);
}

/* How long a call may try to reach the server: a try, a callback's
 * submission and a release a heartbeat interval (they must not block for
 * long: a try fails fast with CQ_EUNAVAILABLE, a release is deferred); a
 * blocking acquire until its deadline, but a heartbeat interval at least,
 * so that a deadline close at hand does not cut short the round trip of a
 * server that answers (or the pool's timeout, without a deadline). */
static int64_t call_limit(const struct fl_pool *fp, char mode,
                          int64_t deadline_ms) {
  int64_t floor = cq_now() + fp->heartbeat_ms;
  if (mode == 't')
    return floor;
  if (deadline_ms == CQ_NEVER || (fp->opts.flags & CQ_POOL_MANUAL_TIMERS))
    return CQ_NEVER;
  return deadline_ms > floor ? deadline_ms : floor;
}

int fl_grant_read(struct fl_pool *fp, struct fl_grant *g, const char *entry) {
  struct fl_entry e;
  if (!fl_entry_parse(entry, &e) || e.kind != 'g' ||
      e.id_len != strlen(g->id) || memcmp(e.id, g->id, e.id_len) != 0 ||
      fl_grant_fill(fp, g, e.rest) != 0)
    return -1;
  return 0;
}

/* Granted at once, from the acquire's reply (mu held). A reply that is
 * not this grant's outcome is refused: the lease the server may have made
 * is found by the next heartbeat, which ends it. */
static int grant_now(struct fl_pool *fp, struct fl_grant *g,
                     const char *entry) {
  if (fl_grant_read(fp, g, entry) != 0) {
    fl_msgf(fl_gmsg(g),
            "fleet: the server's reply to an acquire is malformed: \"%.60s\"",
            entry);
    fp->doubt = true;
    return CQ_ESYS;
  }
  fl_gstate_set(g, FL_G_HELD);
  fl_held_push(fp, g);
  fl_event(fp, CQ_EVENT_GRANTED, g, NULL, 0);
  return 0;
}

/*
 * Send the acquire script for g: mode 't' (a try) or 'w' (wait when it
 * does not fit). Returns 0 (granted: g is held), FL_R_WAITING (g is in the
 * table, and its outcome will come), or a negative code with fl_gmsg(g) set.
 * The caller has set g's style, callback, wait and deadline.
 */
static int send_acquire(struct fl_pool *fp, struct fl_grant *g,
                        const struct fl_req *r, char mode, int64_t until,
                        struct fl_ctx *ctx) {
  for (int tries = 0;; tries++) {
    /* Names resolved before the namespace was created again have the old
     * state's uids: resolved again, from what the processes re-declared. */
    (void)fl_names_refresh(fp, r);
    struct fl_args a;
    fl_args_init(&a);
    a.until = until;
    fl_arg(&a, g->id);
    fl_arg_c(&a, mode);
    fl_arg_i(&a, r->limit_ms);
    fl_args_items(fp, &a, r);
    redisReply *rep;
    char err[FL_MSG_MAX];
    int rc = fl_run(fp, FL_S_ACQUIRE, &a, true, &rep, ctx, err, sizeof(err));
    if (rc == FL_ESESSION && tries < 2) {
      attempt_renumber(fp, g);
      continue;
    }
    if (rc != 0) {
      fl_msgf(fl_gmsg(g), "fleet: %s", err);
      if (rc == CQ_EUNAVAILABLE) {
        /* It may have been applied: the next heartbeat looks. */
        pthread_mutex_lock(&fp->mu);
        fp->doubt = true;
        pthread_mutex_unlock(&fp->mu);
      }
      return rc == FL_ESESSION ? CQ_EUNAVAILABLE : rc;
    }
    fl_late_reply(fp, FL_LATE_ACQUIRE);
    int st = fl_reply_status(rep);
    pthread_mutex_lock(&fp->mu);
    /* The session may have been lost while the call was in flight (the
     * background thread keeps the local deadline with mu alone), or have
     * passed its deadline since: then the lease or waiter the server made
     * belongs to a dead session, which takes it with it when it is ended,
     * and nothing may be held or wait here on its behalf. */
    fl_session_check(fp, ctx);
    bool gone = g->gen != fp->gen || fp->sid[0] == '\0';
    if (gone && (st == FL_R_OK || st == FL_R_WAITING)) {
      fp->stats.unavailable++;
      /* Sent again on a newer session, its copy there is a stray that the
       * next heartbeat ends. */
      fp->doubt = true;
      fl_msgf(fl_gmsg(g),
              "fleet: the session was lost while the acquire was in flight: "
              "nothing is held, and what the server made for it goes with "
              "the session");
      st = CQ_EUNAVAILABLE;
    } else if (st == FL_R_QUARANTINE) {
      /* A try: what a blocking acquire would do is wait. */
      int64_t left = fl_reply_int(rep, 0);
      fl_quarantine_seen(fp, fp->link.sent_ms, left);
      fl_msgf(fl_gmsg(g),
              "fleet: namespace \"%.32s\" is quarantined %lld ms more: it "
              "is new, or the server lost its state",
              fp->ns, (long long)left);
      st = CQ_EBUSY;
    } else if (st == FL_R_OK) {
      st = grant_now(fp, g, fl_reply_value(rep, 0));
    } else if (st == FL_R_WAITING) {
      g->seq = (uint64_t)fl_reply_int(rep, 0);
      fl_quarantine_seen(fp, fp->link.sent_ms, fl_reply_int(rep, 1));
      fl_gstate_set(g, FL_G_WAITING);
      if (fl_table_put(fp, g) != 0) {
        /* Cannot track it: take it out again (below). */
        fl_gstate_set(g, FL_G_IDLE);
        st = CQ_ENOMEM;
      } else {
        fl_event(fp, CQ_EVENT_PARKED, g, NULL, 0);
      }
    } else if (st < 0) {
      fl_msgf(fl_gmsg(g), "%s", fl_reply_value(rep, 0));
      fl_msg_local(fp, fl_gmsg(g));
    } else {
      st = CQ_ESYS;
    }
    pthread_mutex_unlock(&fp->mu);
    fl_call_done(fp, rep);
    if (st == CQ_ENOMEM) {
      struct fl_args b;
      fl_args_init(&b);
      fl_arg_i(&b, CQ_ECANCELED);
      fl_arg(&b, g->id);
      if (fl_run(fp, FL_S_ABORT, &b, false, &rep, ctx, err, sizeof(err)) == 0)
        fl_call_done(fp, rep);
    }
    return st;
  }
}

/*
 * End waiting attempt g with `status` (cancelled, timed out, closed): the
 * abort script. Returns 0 when this call ended it, CQ_ESTATE when it was
 * decided otherwise (the grant won, or it had left another way), or
 * CQ_ESYS. When the server knows it no more (the reply of an abort that
 * worked was lost, and its retry finds nothing; or another process's
 * script decided it), its outcome is in the session's inbox: it is fetched
 * at once, so that the attempt ends within this call either way.
 */
static int take_out(struct fl_pool *fp, struct fl_grant *g, int status,
                    struct fl_ctx *ctx, char *err, size_t len) {
  char id[sizeof(g->id)];
  memcpy(id, g->id, sizeof(id));
  uint64_t op = g->op;
  struct fl_args a;
  fl_args_init(&a);
  a.until = call_limit(fp, 't', CQ_NEVER);
  fl_arg_i(&a, status);
  fl_arg(&a, id);
  redisReply *r;
  int rc = fl_run(fp, FL_S_ABORT, &a, false, &r, ctx, err, len);
  if (rc == CQ_EUNAVAILABLE) {
    /* The server cannot be told now: the attempt ends here all the same,
     * and the next heartbeat that gets through ends the waiter there (or
     * gives back the lease it became meanwhile). */
    pthread_mutex_lock(&fp->mu);
    rc = CQ_ESTATE;
    if (g->op == op && fl_gstate(g) == FL_G_WAITING) {
      fl_grant_decide(fp, g, status, NULL, "", ctx);
      fp->doubt = true;
      rc = 0;
    }
    pthread_mutex_unlock(&fp->mu);
    return rc;
  }
  if (rc != 0)
    return rc == FL_ESESSION ? CQ_ESTATE : rc;
  const char *res = fl_reply_value(r, 0);
  rc = res[0] == 'a' ? 0 : CQ_ESTATE;
  if (res[0] == 'g') {
    pthread_mutex_lock(&fp->mu);
    fl_apply_outcome(fp, res, ctx);
    pthread_mutex_unlock(&fp->mu);
  } else if (res[0] == 'u') {
    char ignored[FL_MSG_MAX];
    (void)fl_settle(fp, ctx, ignored, sizeof(ignored));
    /* Ended by our own first attempt exactly when it ended with our
     * status (the grant may be another attempt's by now: compare the
     * number). */
    pthread_mutex_lock(&fp->mu);
    if (g->op == op && fl_gstate(g) == FL_G_IDLE && g->status == status)
      rc = 0;
    pthread_mutex_unlock(&fp->mu);
  }
  fl_call_done(fp, r);
  return rc;
}

int fl_op_grant_try(cq_pool *pool, cq_grant *grant, const cq_req *req) {
  struct fl_pool *fp = fl_pool_of(pool);
  struct fl_grant *g;
  int rc = attempt_begin(fp, pool, grant, req, &g);
  if (rc != 0)
    return rc;
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  rc = send_acquire(fp, g, fl_req_ofc(req), 't', call_limit(fp, 't', CQ_NEVER),
                    &ctx);
  fl_ctx_finish(fp, &ctx);
  return rc;
}

static void to_timespec(int64_t ms, struct timespec *ts) {
  ts->tv_sec = (time_t)(ms / 1000);
  ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}

int fl_op_grant_acquire(cq_pool *pool, cq_grant *grant, const cq_req *req,
                        int64_t deadline_ms) {
  struct fl_pool *fp = fl_pool_of(pool);
  struct fl_grant *g;
  int rc = attempt_begin(fp, pool, grant, req, &g);
  if (rc != 0)
    return rc;
  struct fl_wait w;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (pthread_mutex_init(&w.mu, NULL) != 0 ||
      pthread_cond_init(&w.cond, &ca) != 0) {
    pthread_condattr_destroy(&ca);
    return CQ_ESYS;
  }
  pthread_condattr_destroy(&ca);
  w.done = false;
  g->style = FL_STYLE_BLOCKING;
  g->wait = &w;
  g->deadline = deadline_ms;
  bool past = deadline_ms != CQ_NEVER && fl_now(fp) >= deadline_ms;
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  rc = send_acquire(fp, g, fl_req_ofc(req), past ? 't' : 'w',
                    call_limit(fp, past ? 't' : 'w', deadline_ms), &ctx);
  if (rc == CQ_EBUSY && past)
    rc = CQ_ETIMEDOUT;
  /* The server not reached by the deadline: timed out, as in-process. */
  if (rc == CQ_EUNAVAILABLE && deadline_ms != CQ_NEVER &&
      !(fp->opts.flags & CQ_POOL_MANUAL_TIMERS) && cq_now() >= deadline_ms)
    rc = CQ_ETIMEDOUT;
  if (rc == FL_R_WAITING) {
    char err[FL_MSG_MAX];
    if (atomic_load(&fp->closed)) /* a close raced with us */
      (void)take_out(fp, g, CQ_ECLOSED, &ctx, err, sizeof(err));
    fl_ctx_finish(fp, &ctx);
    bool self_timed =
        !(fp->opts.flags & CQ_POOL_MANUAL_TIMERS) && deadline_ms != CQ_NEVER;
    pthread_mutex_lock(&w.mu);
    while (!w.done) {
      if (!self_timed) {
        pthread_cond_wait(&w.cond, &w.mu);
        continue;
      }
      struct timespec ts;
      to_timespec(deadline_ms, &ts);
      if (pthread_cond_timedwait(&w.cond, &w.mu, &ts) != ETIMEDOUT || w.done ||
          cq_now() < deadline_ms)
        continue;
      self_timed = false; /* one abort; then the outcome comes */
      pthread_mutex_unlock(&w.mu);
      (void)take_out(fp, g, CQ_ETIMEDOUT, &ctx, err, sizeof(err));
      fl_ctx_finish(fp, &ctx);
      pthread_mutex_lock(&w.mu);
    }
    pthread_mutex_unlock(&w.mu);
    rc = fl_gstate(g) == FL_G_HELD ? 0 : g->status;
  }
  fl_ctx_finish(fp, &ctx);
  g->wait = NULL;
  pthread_cond_destroy(&w.cond);
  pthread_mutex_destroy(&w.mu);
  return rc;
}

int fl_op_grant_submit(cq_pool *pool, cq_grant *grant, const cq_req *req,
                       int64_t deadline_ms, cq_grant_cb cb) {
  if (cb == NULL)
    return CQ_EINVAL;
  struct fl_pool *fp = fl_pool_of(pool);
  struct fl_grant *g;
  int rc = attempt_begin(fp, pool, grant, req, &g);
  if (rc != 0)
    return rc;
  g->style = FL_STYLE_CALLBACK;
  g->cb = cb;
  g->deadline = deadline_ms;
  bool past = deadline_ms != CQ_NEVER && fl_now(fp) >= deadline_ms;
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  rc = send_acquire(fp, g, fl_req_ofc(req), past ? 't' : 'w',
                    call_limit(fp, 't', CQ_NEVER), &ctx);
  if (rc == 0) {
    fl_late_reply(fp, FL_LATE_GRANTED);
    /* Held, the grant is the background thread's too, which may have
     * found the lease lost since (and written its status): the callback
     * is told what holds now. */
    pthread_mutex_lock(&fp->mu);
    g->told = fl_gstate(g) == FL_G_HELD ? 0 : g->status;
    pthread_mutex_unlock(&fp->mu);
    ctx_push(&ctx, g);
  } else if (rc == CQ_EBUSY && past) {
    g->status = g->told = CQ_ETIMEDOUT; /* idle: nobody else sees it */
    ctx_push(&ctx, g);
    rc = 0;
  } else if (rc == FL_R_WAITING) {
    rc = 0;
    char err[FL_MSG_MAX];
    if (atomic_load(&fp->closed))
      (void)take_out(fp, g, CQ_ECLOSED, &ctx, err, sizeof(err));
    else if (deadline_ms != CQ_NEVER)
      fl_bg_kick(fp); /* the background thread keeps the deadline */
  }
  fl_ctx_finish(fp, &ctx);
  return rc;
}

int fl_op_grant_abort(cq_pool *pool, cq_grant *grant, int status) {
  if (status != CQ_ECANCELED && status != CQ_ETIMEDOUT && status != CQ_ECLOSED)
    return CQ_EINVAL;
  struct fl_pool *fp = fl_pool_of(pool);
  struct fl_grant *g = fl_grant_of(grant);
  if (fl_gstate(g) != FL_G_WAITING)
    return CQ_ESTATE;
  if (cq_backend_grant_pool(grant) != pool)
    return CQ_EPOOL;
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  char err[FL_MSG_MAX];
  int rc = take_out(fp, g, status, &ctx, err, sizeof(err));
  if (rc == CQ_ESYS)
    fl_error("%s", err);
  fl_ctx_finish(fp, &ctx);
  return rc;
}

/* Check that `grant` is held and bound to `pool`. */
static int held_check(cq_pool *pool, cq_grant *grant, struct fl_grant **out) {
  struct fl_grant *g = fl_grant_of(grant);
  if (fl_gstate(g) != FL_G_HELD)
    return CQ_ESTATE;
  if (cq_backend_grant_pool(grant) != pool)
    return CQ_EPOOL;
  *out = g;
  return 0;
}

/* The grant g, released, holds nothing here (mu held): 0, or CQ_ESTATE
 * when its lease was lost meanwhile, and reported as such. */
static int released(struct fl_pool *fp, struct fl_grant *g) {
  if (g->lost)
    return CQ_ESTATE;
  fl_held_unlink(fp, g);
  fl_gstate_set(g, FL_G_IDLE);
  fl_event(fp, CQ_EVENT_RELEASED, g, NULL, 0);
  return 0;
}

/* A release that waits for no reply (CQ_FLEET_ASYNC_RELEASE): when this
 * process has no waiter, the reply can carry no outcome for it, so the
 * release is only sent, and the next call on the connection reads its
 * reply (see fl_release_send()). The server runs it before any later call
 * on the same connection; other connections are not ordered with it. The
 * grant leaves the pool's list before the connection is let go, as a
 * call's does: a heartbeat in between would find the server without the
 * lease and this process with it, and take it for one a failover lost.
 * Returns released()'s answer, or 1 when it was not sent (the caller runs
 * the release as a call). */
static int release_sent(struct fl_pool *fp, struct fl_grant *g) {
  if (!(fp->opts.fleet_flags & CQ_FLEET_ASYNC_RELEASE) ||
      fl_link_lock(fp, call_limit(fp, 't', CQ_NEVER)) != 0)
    return 1;
  pthread_mutex_lock(&fp->mu);
  bool quiet =
      fp->n_waiting == 0 && !g->lost && g->gen == fp->gen && fp->sid[0] != '\0';
  pthread_mutex_unlock(&fp->mu);
  int rc = 1;
  if (quiet && fl_release_send(fp, g->id, g->gen)) {
    pthread_mutex_lock(&fp->mu);
    rc = released(fp, g);
    pthread_mutex_unlock(&fp->mu);
  }
  pthread_mutex_unlock(&fp->link.mu);
  if (rc != 1)
    fl_late_reply(fp, FL_LATE_RELEASE);
  return rc;
}

int fl_op_grant_release(cq_pool *pool, cq_grant *grant) {
  struct fl_pool *fp = fl_pool_of(pool);
  struct fl_grant *g;
  int rc = held_check(pool, grant, &g);
  if (rc != 0)
    return rc;
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  if (fl_session_dead(fp)) {
    /* Past the local deadline: the lease is lost, whatever the server
     * says; a release now could only race with its reassignment. */
    pthread_mutex_lock(&fp->mu);
    fl_session_check(fp, &ctx);
    pthread_mutex_unlock(&fp->mu);
    fl_ctx_finish(fp, &ctx);
    return CQ_ESTATE;
  }
  if ((rc = release_sent(fp, g)) != 1) {
    fl_ctx_finish(fp, &ctx);
    return rc;
  }
  struct fl_args a;
  fl_args_init(&a);
  a.until = call_limit(fp, 't', CQ_NEVER);
  fl_arg(&a, g->id);
  redisReply *r;
  char err[FL_MSG_MAX];
  rc = fl_run(fp, FL_S_RELEASE, &a, true, &r, &ctx, err, sizeof(err));
  if (rc == CQ_EUNAVAILABLE) {
    /* Not reached: the grant holds nothing here, and the background
     * thread sends the release (an id: applied once) when it can. */
    pthread_mutex_lock(&fp->mu);
    if (g->lost)
      rc = CQ_ESTATE;
    else if (fl_defer_release(fp, g))
      rc = released(fp, g);
    else
      fl_msgf(fl_gmsg(g), "fleet: %s", err);
    pthread_mutex_unlock(&fp->mu);
  } else if (rc == 0) {
    /* Released, or unknown: the retry of a release whose reply was lost.
     * A lease lost meanwhile was reported as such, not released. */
    pthread_mutex_lock(&fp->mu);
    rc = released(fp, g);
    pthread_mutex_unlock(&fp->mu);
    fl_call_done(fp, r);
  } else if (rc == FL_ESESSION) {
    rc = CQ_ESTATE; /* the lease was lost, and reported */
  } else {
    fl_msgf(fl_gmsg(g), "fleet: %s", err);
  }
  fl_ctx_finish(fp, &ctx);
  return rc;
}

/* The item of g on resource `name` (NULL: the first device pool when
 * `devices`), or -1. mu held. */
static int item_of(struct fl_pool *fp, const struct fl_grant *g,
                   const char *name, bool devices) {
  for (unsigned i = 0; i < g->n_items; i++) {
    const struct fl_name *nm = fl_names_at(fp, g->it[i].name);
    if (devices && nm->kind != CQ_KIND_DEVICES)
      continue;
    if (name == NULL || fl_name_is(fp, name, nm->name))
      return (int)i;
  }
  return -1;
}

/* The held grant's item on `resource` (a device pool's with `devices`),
 * for a partial release: its index in *i and its name in *nm. */
static int part_item(cq_pool *pool, cq_grant *grant, const char *resource,
                     bool devices, struct fl_grant **g, int *i,
                     const struct fl_name **nm) {
  int rc = held_check(pool, grant, g);
  if (rc != 0)
    return rc;
  struct fl_pool *fp = fl_pool_of(pool);
  pthread_mutex_lock(&fp->mu);
  *i = item_of(fp, *g, resource, devices);
  *nm = *i >= 0 ? fl_names_at(fp, (*g)->it[*i].name) : NULL;
  pthread_mutex_unlock(&fp->mu);
  return *i < 0 ? CQ_ENOENT : 0;
}

/* Send a partial release of `kind` ('u' units, 'd' devices) of g's item
 * on nm: the amount, or the device and its thousandths. Numbered, so that
 * a retry is applied once. */
static int send_part(struct fl_pool *fp, struct fl_grant *g, char kind,
                     const struct fl_name *nm, int64_t x, int64_t y) {
  struct fl_args a;
  fl_args_init(&a);
  a.until = call_limit(fp, 't', CQ_NEVER);
  fl_arg(&a, g->id);
  fl_arg_i(&a, ++g->parts);
  fl_arg_c(&a, kind);
  fl_arg(&a, nm->name);
  fl_arg_i(&a, x);
  if (kind == 'd')
    fl_arg_i(&a, y);
  struct fl_ctx ctx;
  fl_ctx_init(&ctx);
  redisReply *r;
  char err[FL_MSG_MAX];
  int rc = fl_run(fp, FL_S_PART, &a, true, &r, &ctx, err, sizeof(err));
  if (rc == 0) {
    rc = fl_reply_status(r);
    fl_call_done(fp, r);
    if (rc == FL_R_UNKNOWN) {
      /* The server has no such lease (its session was ended, say while
       * this process was stopped): it is lost, and told so once, so that
       * a caller told CQ_ESTATE holds an idle grant, free to reuse. */
      pthread_mutex_lock(&fp->mu);
      if (fl_gstate(g) == FL_G_HELD)
        fl_grant_lost(fp, g, "the server has no such lease");
      pthread_mutex_unlock(&fp->mu);
      rc = CQ_ESTATE;
    } else if (rc > 0) {
      rc = CQ_ESYS;
    }
  } else if (rc == FL_ESESSION) {
    rc = CQ_ESTATE;
  } else {
    /* Called again, it goes with the same number: applied once. */
    g->parts--;
    fl_msgf(fl_gmsg(g), "fleet: %s", err);
  }
  fl_ctx_finish(fp, &ctx);
  return rc;
}

int fl_op_grant_release_part(cq_pool *pool, cq_grant *grant,
                             const char *resource, int64_t amount) {
  struct fl_grant *g;
  const struct fl_name *nm;
  int i;
  int rc = part_item(pool, grant, resource, false, &g, &i, &nm);
  if (rc != 0)
    return rc;
  if (nm->kind == CQ_KIND_DEVICES)
    return CQ_EINVAL; /* devices: cq_grant_release_device() */
  if (amount <= 0 || amount > g->it[i].held)
    return CQ_ERANGE;
  rc = send_part(fl_pool_of(pool), g, 'u', nm, amount, 0);
  if (rc == 0)
    g->it[i].held -= amount;
  return rc;
}

int fl_op_grant_release_device(cq_pool *pool, cq_grant *grant,
                               const char *resource, uint32_t index,
                               int64_t milli) {
  if (resource == NULL)
    return CQ_EINVAL;
  struct fl_grant *g;
  const struct fl_name *nm;
  int i;
  int rc = part_item(pool, grant, resource, true, &g, &i, &nm);
  if (rc != 0)
    return rc;
  if (index >= nm->ndev)
    return CQ_ENOENT;
  struct fl_gitem *it = &g->it[i];
  int at = -1;
  for (unsigned k = 0; k < it->ndev; k++)
    if (g->devs[it->dev_first + k] == index)
      at = (int)k;
  if (it->mode == 'f') {
    if (at < 0 || it->held == 0)
      return CQ_ENOENT;
    if (milli <= 0 || milli > it->held)
      return CQ_ERANGE;
  } else if (at < 0) {
    return CQ_ENOENT;
  } else if (milli != CQ_DEVICE_MILLI) {
    return CQ_ERANGE;
  }
  rc = send_part(fl_pool_of(pool), g, 'd', nm, index, milli);
  if (rc == 0) {
    it->held -= milli;
    if (it->mode == 'w') {
      memmove(&g->devs[it->dev_first + at], &g->devs[it->dev_first + at + 1],
              (it->ndev - (unsigned)at - 1) * sizeof(g->devs[0]));
      it->ndev--;
    }
  }
  return rc;
}

/* ------------------------------------------------------------------------ */
/* What a held grant reports (local: no round trip)                          */
/* ------------------------------------------------------------------------ */

static struct fl_pool *grant_pool(const cq_grant *grant) {
  cq_pool *p = cq_backend_grant_pool(grant);
  return p != NULL ? fl_pool_of(p) : NULL;
}

/* The devices item i of held grant g holds: their count, first in *first. */
static unsigned item_devices(const struct fl_grant *g, int i,
                             const uint16_t **first) {
  const struct fl_gitem *it = &g->it[i];
  *first = &g->devs[it->dev_first];
  if (it->mode == 'f')
    return it->held > 0 && it->ndev > 0 ? 1 : 0;
  return it->ndev;
}

size_t fl_op_grant_devices(const cq_grant *grant, const char *resource,
                           uint32_t *indices, size_t cap) {
  if (indices == NULL && cap > 0)
    return 0;
  const struct fl_grant *g = fl_grant_ofc(grant);
  struct fl_pool *fp = grant_pool(grant);
  if (fp == NULL || fl_gstate(g) != FL_G_HELD)
    return 0;
  pthread_mutex_lock(&fp->mu);
  int i = item_of(fp, g, resource, true);
  pthread_mutex_unlock(&fp->mu);
  if (i < 0)
    return 0;
  const uint16_t *d;
  unsigned n = item_devices(g, i, &d);
  for (unsigned k = 0; k < n && k < cap; k++)
    indices[k] = d[k];
  return n;
}

int fl_op_grant_cuda_visible(const cq_grant *grant, const char *resource,
                             char *buf, size_t len) {
  if (buf == NULL || len == 0)
    return CQ_EINVAL;
  buf[0] = '\0';
  const struct fl_grant *g = fl_grant_ofc(grant);
  struct fl_pool *fp = grant_pool(grant);
  if (fp == NULL || fl_gstate(g) != FL_G_HELD)
    return CQ_ENOENT;
  pthread_mutex_lock(&fp->mu);
  int i = item_of(fp, g, resource, true);
  int rc = CQ_ENOENT;
  if (i >= 0) {
    const struct fl_name *nm = fl_names_at(fp, g->it[i].name);
    const uint16_t *d;
    unsigned n = item_devices(g, i, &d);
    size_t used = 0;
    rc = n > 0 ? 0 : CQ_ENOENT;
    for (unsigned k = 0; k < n && rc == 0; k++) {
      const char *id = d[k] < nm->ndev ? nm->ids[d[k]] : "?";
      size_t need = strlen(id) + (used > 0);
      if (used + need + 1 > len) {
        rc = CQ_ERANGE;
        break;
      }
      used += (size_t)snprintf(buf + used, len - used, "%s%s",
                               used > 0 ? "," : "", id);
    }
  }
  pthread_mutex_unlock(&fp->mu);
  if (rc == CQ_ERANGE)
    buf[0] = '\0';
  return rc;
}

int64_t fl_op_grant_held(const cq_grant *grant, const char *resource) {
  const struct fl_grant *g = fl_grant_ofc(grant);
  struct fl_pool *fp = grant_pool(grant);
  if (fp == NULL || resource == NULL || fl_gstate(g) != FL_G_HELD)
    return 0;
  pthread_mutex_lock(&fp->mu);
  int i = item_of(fp, g, resource, false);
  pthread_mutex_unlock(&fp->mu);
  return i < 0 ? 0 : g->it[i].held;
}

int fl_op_grant_is_held(const cq_grant *grant) {
  const struct fl_grant *g = fl_grant_ofc(grant);
  struct fl_pool *fp = grant_pool(grant);
  /* Held, and the lease cannot have expired on the server yet. */
  return fp != NULL && fl_gstate(g) == FL_G_HELD && cq_now() < fp->deadline_ms;
}

int fl_op_grant_is_idle(const cq_grant *grant) {
  return fl_gstate(fl_grant_ofc(grant)) == FL_G_IDLE;
}

int cq_fleet_grant_fence(const cq_grant *grant, uint64_t *fence) {
  if (grant == NULL || fence == NULL)
    return CQ_EINVAL;
  cq_pool *p = cq_backend_grant_pool(grant);
  if (p == NULL || !cq_fleet_is_fleet(p))
    return CQ_EINVAL;
  const struct fl_grant *g = fl_grant_ofc(grant);
  if (fl_gstate(g) != FL_G_HELD)
    return CQ_ESTATE;
  *fence = g->fence;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Deadlines                                                                 */
/* ------------------------------------------------------------------------ */

struct due {
  int64_t deadline;
  uint64_t seq;
  char id[40];
};

static int due_cmp(const void *a, const void *b) {
  const struct due *x = a, *y = b;
  if (x->deadline != y->deadline)
    return x->deadline < y->deadline ? -1 : 1;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

int fl_expire_due(struct fl_pool *fp, int64_t now, bool callbacks_only,
                  struct fl_ctx *ctx) {
  pthread_mutex_lock(&fp->mu);
  size_t n = 0, cap = 0;
  struct due *list = NULL;
  bool full = false; /* out of memory: the rest wait for the next pass */
  for (size_t i = 0; i < fp->table_cap && !full; i++)
    for (struct fl_grant *g = fp->table[i]; g != NULL && !full; g = g->hnext) {
      if (g->deadline > now ||
          (callbacks_only && g->style != FL_STYLE_CALLBACK))
        continue;
      if (n == cap) {
        size_t want = cap != 0 ? cap * 2 : 16;
        struct due *grown = realloc(list, want * sizeof(*list));
        if (grown == NULL) {
          full = true;
          continue;
        }
        list = grown;
        cap = want;
      }
      list[n].deadline = g->deadline;
      list[n].seq = g->seq;
      memcpy(list[n].id, g->id, sizeof(list[n].id));
      n++;
    }
  pthread_mutex_unlock(&fp->mu);
  if (n == 0) {
    free(list);
    return 0;
  }
  qsort(list, n, sizeof(*list), due_cmp);
  int rc = 0;
  /* Earliest deadline first, then oldest: all leave, then one sweep. */
  for (size_t at = 0; at < n && rc == 0; at += 100) {
    struct fl_args a;
    fl_args_init(&a);
    a.until = cq_now() + fp->heartbeat_ms;
    fl_arg_i(&a, CQ_ETIMEDOUT);
    for (size_t k = at; k < n && k < at + 100; k++)
      fl_arg(&a, list[k].id);
    redisReply *r;
    char err[FL_MSG_MAX];
    rc = fl_run(fp, FL_S_ABORT, &a, false, &r, ctx, err, sizeof(err));
    if (rc != 0)
      break;
    pthread_mutex_lock(&fp->mu);
    for (size_t k = 0; k < fl_reply_nvalues(r); k++)
      if (fl_reply_value(r, k)[0] == 'g')
        fl_apply_outcome(fp, fl_reply_value(r, k), ctx);
    pthread_mutex_unlock(&fp->mu);
    fl_call_done(fp, r);
  }
  free(list);
  return rc == FL_ESESSION ? CQ_ESYS : rc;
}
