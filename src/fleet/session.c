/*
 * The session and what decides grants outside the caller's own calls.
 *
 * One session per pool handle: an id, a TTL on the server, and the local
 * deadline `deadline_ms` = the send time of the last heartbeat the server
 * answered + TTL - margin, on the monotonic clock. The server expires the
 * session only at its own time of that heartbeat + TTL, which is later, so
 * this process always knows first that its leases are gone: when the
 * local deadline passes, each held grant is marked lost and reported once
 * (CQ_FLEET_EVENT_LOST), every waiter fails, and a new session is opened.
 *
 * Outcomes reach this process three ways, and each is applied once: in the
 * reply of the script that decided them (when this process ran it), as a
 * message on the session's channel that carries them (when another
 * process's script did), and in the session's inbox, which every heartbeat
 * fetches, so that a message lost costs latency, never a grant. A waiting
 * grant is in the table until its outcome is applied; a second copy finds
 * it gone and is ignored.
 *
 * The background thread heartbeats, listens on the channel, expires the
 * deadlines of callback waiters, notices a lost session, and runs the
 * callbacks and events of what it applied.
 */
#include "fleet.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static _Thread_local char tl_error[512];

const char *cq_fleet_error(void) { return tl_error; }

void fl_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tl_error, sizeof(tl_error), fmt, ap);
  va_end(ap);
}

void fl_msgf(char *buf, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, FL_MSG_MAX, fmt, ap);
  va_end(ap);
}

void fl_msg_local(const struct fl_pool *fp, char *msg) {
  size_t h = strlen(fp->host);
  char *w = msg;
  for (const char *c = msg; *c != '\0';) {
    if (*c == '@' && strncmp(c + 1, fp->host, h) == 0 &&
        !fl_name_char(c[1 + h])) {
      c += 1 + h;
      continue;
    }
    *w++ = *c++;
  }
  *w = '\0';
}

int64_t fl_now(const struct fl_pool *fp) {
  return fp->opts.clock != NULL ? fp->opts.clock(fp->opts.clock_arg) : cq_now();
}

/* ------------------------------------------------------------------------ */
/* The waiting table and the held list (mu held)                             */
/* ------------------------------------------------------------------------ */

static size_t slot_of(const struct fl_pool *fp, uint64_t op) {
  return (size_t)(op * 0x9e3779b97f4a7c15ull >> 20) & (fp->table_cap - 1);
}

int fl_table_put(struct fl_pool *fp, struct fl_grant *g) {
  if (fp->n_waiting + 1 > fp->table_cap / 2) {
    size_t cap = fp->table_cap ? fp->table_cap * 2 : 64;
    struct fl_grant **t = calloc(cap, sizeof(*t));
    if (t == NULL)
      return CQ_ENOMEM;
    struct fl_grant **old = fp->table;
    size_t old_cap = fp->table_cap;
    fp->table = t;
    fp->table_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
      for (struct fl_grant *x = old[i], *next; x != NULL; x = next) {
        next = x->hnext;
        size_t s = slot_of(fp, x->op);
        x->hnext = t[s];
        t[s] = x;
      }
    free(old);
  }
  size_t s = slot_of(fp, g->op);
  g->hnext = fp->table[s];
  fp->table[s] = g;
  g->in_table = true;
  fp->n_waiting++;
  return 0;
}

struct fl_grant *fl_table_get(struct fl_pool *fp, uint64_t op) {
  if (fp->table_cap == 0)
    return NULL;
  for (struct fl_grant *x = fp->table[slot_of(fp, op)]; x != NULL; x = x->hnext)
    if (x->op == op)
      return x;
  return NULL;
}

void fl_table_del(struct fl_pool *fp, struct fl_grant *g) {
  if (!g->in_table)
    return;
  struct fl_grant **link = &fp->table[slot_of(fp, g->op)];
  while (*link != g)
    link = &(*link)->hnext;
  *link = g->hnext;
  g->hnext = NULL;
  g->in_table = false;
  fp->n_waiting--;
}

int64_t fl_table_first_deadline(struct fl_pool *fp) {
  int64_t first = CQ_NEVER;
  for (size_t i = 0; i < fp->table_cap; i++)
    for (struct fl_grant *x = fp->table[i]; x != NULL; x = x->hnext)
      if (x->deadline < first)
        first = x->deadline;
  return first;
}

void fl_held_push(struct fl_pool *fp, struct fl_grant *g) {
  g->next = fp->held.next;
  g->prev = &fp->held;
  fp->held.next->prev = g;
  fp->held.next = g;
  g->in_held = true;
}

void fl_held_unlink(struct fl_pool *fp, struct fl_grant *g) {
  (void)fp;
  if (!g->in_held)
    return;
  g->prev->next = g->next;
  g->next->prev = g->prev;
  g->prev = g->next = NULL;
  g->in_held = false;
}

/* ------------------------------------------------------------------------ */
/* Events and dispatch                                                       */
/* ------------------------------------------------------------------------ */

void fl_event(struct fl_pool *fp, cq_event_type type, const struct fl_grant *g,
              const char *resource, int64_t wait_ms) {
  if (fp->opts.on_event == NULL)
    return;
  if (fp->ev_count == fp->ev_cap) {
    fp->ev_head = (fp->ev_head + 1) % fp->ev_cap;
    fp->ev_count--;
    fp->events_dropped++;
  }
  struct fl_event *e = &fp->events[(fp->ev_head + fp->ev_count) % fp->ev_cap];
  fp->ev_count++;
  memset(e, 0, sizeof(*e));
  e->ev.type = type;
  e->ev.attempt = g != NULL ? g->attempt : 0;
  e->ev.data = g != NULL ? fl_grant_pub((struct fl_grant *)g)->data : NULL;
  if (resource != NULL)
    snprintf(e->resource, sizeof(e->resource), "%s", resource);
  e->ev.time_ms = fl_now(fp);
  e->ev.wait_ms = wait_ms;
}

void fl_events_deliver(struct fl_pool *fp) {
  if (fp->opts.on_event == NULL)
    return;
  pthread_mutex_lock(&fp->mu);
  if (fp->ev_delivering) {
    pthread_mutex_unlock(&fp->mu);
    return;
  }
  fp->ev_delivering = true;
  while (fp->ev_count > 0) {
    struct fl_event e = fp->events[fp->ev_head];
    fp->ev_head = (fp->ev_head + 1) % fp->ev_cap;
    fp->ev_count--;
    pthread_mutex_unlock(&fp->mu);
    if (e.resource[0] != '\0')
      e.ev.resource = e.resource;
    fp->opts.on_event(&e.ev, fp->opts.event_arg);
    pthread_mutex_lock(&fp->mu);
  }
  fp->ev_delivering = false;
  pthread_mutex_unlock(&fp->mu);
}

void fl_ctx_init(struct fl_ctx *c) {
  c->ready_head = NULL;
  c->ready_tail = &c->ready_head;
  c->wake = NULL;
}

/* Callbacks that callbacks trigger run after them, on the outermost
 * dispatch loop of the thread, so that the stack stays flat. */
static _Thread_local struct {
  bool active;
  struct fl_grant *head, **tail;
} tl_dispatch;

void fl_ctx_finish(struct fl_pool *fp, struct fl_ctx *c) {
  while (c->wake != NULL) {
    struct fl_grant *g = c->wake;
    c->wake = g->ready_next;
    struct fl_wait *w = g->wait;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
  }
  fl_events_deliver(fp);
  if (c->ready_head == NULL)
    return;
  if (tl_dispatch.tail == NULL)
    tl_dispatch.tail = &tl_dispatch.head;
  *tl_dispatch.tail = c->ready_head;
  tl_dispatch.tail = c->ready_tail;
  fl_ctx_init(c);
  if (tl_dispatch.active)
    return;
  tl_dispatch.active = true;
  while (tl_dispatch.head != NULL) {
    struct fl_grant *g = tl_dispatch.head;
    tl_dispatch.head = g->ready_next;
    if (tl_dispatch.head == NULL)
      tl_dispatch.tail = &tl_dispatch.head;
    g->ready_next = NULL;
    /* Once the callback starts, the grant is the caller's again. Its
     * status was fixed when it was queued: a loss since, which the
     * background thread writes into g->status, comes as an event. */
    g->cb(fl_grant_pub(g), g->told);
  }
  tl_dispatch.active = false;
}

static void notify(struct fl_pool *fp, struct fl_grant *g, struct fl_ctx *ctx) {
  if (g->style == FL_STYLE_BLOCKING) {
    fp->wakeups++;
    g->ready_next = ctx->wake;
    ctx->wake = g;
  } else {
    g->told = g->status;
    g->ready_next = NULL;
    *ctx->ready_tail = g;
    ctx->ready_tail = &g->ready_next;
  }
}

static cq_event_type event_of(int status) {
  switch (status) {
  case 0:
    return CQ_EVENT_GRANTED;
  case CQ_ETIMEDOUT:
    return CQ_EVENT_TIMED_OUT;
  case CQ_ECANCELED:
    return CQ_EVENT_CANCELLED;
  case CQ_ECLOSED:
    return CQ_EVENT_CLOSED;
  default:
    return CQ_EVENT_NEVER;
  }
}

void fl_grant_decide(struct fl_pool *fp, struct fl_grant *g, int status,
                     const char *payload, const char *msg, struct fl_ctx *ctx) {
  fl_table_del(fp, g);
  if (status == 0 && fl_grant_fill(fp, g, payload) != 0) {
    /* A reply this library cannot read: the lease stays on the server
     * until the session ends; the caller is told. */
    status = CQ_ESYS;
    msg = "fleet: a grant the library could not read";
  }
  g->status = status;
  if (status == 0) {
    fl_gstate_set(g, FL_G_HELD);
    fl_held_push(fp, g);
    fl_gmsg(g)[0] = '\0';
  } else {
    fl_gstate_set(g, FL_G_IDLE);
    snprintf(fl_gmsg(g), FL_MSG_MAX, "%s", msg != NULL ? msg : "");
    fl_msg_local(fp, fl_gmsg(g));
  }
  fl_event(fp, status == CQ_ESYS ? CQ_EVENT_CLOSED : event_of(status), g, NULL,
           status == 0 ? fl_now(fp) - g->t_start : 0);
  notify(fp, g, ctx);
}

/* The attempt number of an id "<session>.<op>". */
static bool op_of(const char *id, size_t len, uint64_t *op) {
  const char *dot = NULL;
  for (size_t i = 0; i < len; i++)
    if (id[i] == '.')
      dot = id + i;
  if (dot == NULL)
    return false;
  char *end;
  *op = strtoull(dot + 1, &end, 10);
  return end == id + len;
}

void fl_apply_outcome(struct fl_pool *fp, const char *entry,
                      struct fl_ctx *ctx) {
  struct fl_entry e;
  uint64_t op;
  if (!fl_entry_parse(entry, &e) || !op_of(e.id, e.id_len, &op))
    return;
  struct fl_grant *g = fl_table_get(fp, op);
  /* The id names the session too: a new attempt reusing nothing. */
  if (g == NULL || strlen(g->id) != e.id_len ||
      memcmp(g->id, e.id, e.id_len) != 0)
    return;
  if (e.kind == 'g') {
    fl_grant_decide(fp, g, 0, e.rest, NULL, ctx);
    return;
  }
  /* A status the server would send: one of cronoq.h's codes. */
  char *end;
  long status = strtol(e.rest, &end, 10);
  if (end == e.rest || status >= 0 || status < CQ_ERRNO_MIN_) {
    fl_grant_decide(fp, g, CQ_ESYS, NULL,
                    "fleet: an outcome the library could not read", ctx);
    return;
  }
  if (*end == ' ')
    end++;
  fl_grant_decide(fp, g, (int)status, NULL, end, ctx);
}

void fl_apply_outcomes(struct fl_pool *fp, const redisReply *r, size_t from,
                       struct fl_ctx *ctx) {
  if (from >= r->elements)
    return;
  pthread_mutex_lock(&fp->mu);
  for (size_t i = from; i < r->elements; i++)
    if (r->element[i]->type == REDIS_REPLY_STRING)
      fl_apply_outcome(fp, r->element[i]->str, ctx);
  pthread_mutex_unlock(&fp->mu);
}

/* ------------------------------------------------------------------------ */
/* Sessions                                                                  */
/* ------------------------------------------------------------------------ */

/* Random bits for a session's id and secret: the kernel's, or (should
 * getrandom() fail) a mix of the time, the process and a counter, which
 * keeps ids apart but makes a secret guessable, as a namespace's other
 * clients could write its keys anyway (one trust domain). */
static uint64_t random64(void) {
  static _Atomic uint64_t n;
  uint64_t x = 0;
  if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x))
    x = ((uint64_t)cq_now() ^ atomic_fetch_add(&n, 1) << 40 ^
         (uint64_t)getpid() << 20) *
        0x9e3779b97f4a7c15ull;
  return x;
}

/* A new session id, and its secret (32 hex digits). */
static void new_sid(char *sid, size_t len, char *secret, size_t secret_len) {
  snprintf(sid, len, "%012" PRIx64,
           (uint64_t)(random64() & UINT64_C(0xffffffffffff)));
  uint64_t hi = random64(), lo = random64();
  snprintf(secret, secret_len, "%016" PRIx64 "%016" PRIx64, hi, lo);
}

/* A fencing counter behind one this process saw: writes were lost (a
 * failover to a replica that missed them). mu held. */
static void fence_check(struct fl_pool *fp, uint64_t server_fence) {
  if (server_fence < fp->max_fence)
    fp->stats.rollbacks++;
}

/* Send the declarations this process made again, after the server lost
 * the namespace's state (link.mu held). Failures are left: a conflicting
 * one (another process re-declared first, with another value) is that
 * process's, and a request on a resource missing fails as it would. */
static void redeclare_locked(struct fl_pool *fp) {
  for (size_t i = 0; i < fp->n_decls; i++) {
    struct fl_args a;
    char full[CQ_NAME_MAX + 2];
    fl_decl_args(fp, &fp->decls[i], &a, full, sizeof(full));
    redisReply *r;
    char err[FL_MSG_MAX];
    if (fl_call_locked(fp, FL_S_DECLARE, &a, &r, err, sizeof(err)) == 0)
      freeReplyObject(r);
  }
}

/* Open a session on the server (link.mu held). */
static int open_locked(struct fl_pool *fp, int64_t until, char *err,
                       size_t len) {
  char sid[sizeof(fp->sid)], secret[sizeof(fp->secret)];
  new_sid(sid, sizeof(sid), secret, sizeof(secret));
  pthread_mutex_lock(&fp->mu);
  memcpy(fp->sid, sid, sizeof(sid));
  memcpy(fp->secret, secret, sizeof(secret));
  pthread_mutex_unlock(&fp->mu);
  struct fl_args a;
  fl_args_init(&a);
  a.until = until;
  fl_arg(&a, FL_SCHEMA);
  fl_arg(&a, (fp->opts.flags & CQ_POOL_STAGED_CLAIMS) ? "1" : "0");
  fl_arg(&a, fp->host);
  fl_arg_i(&a, (int64_t)getpid());
  fl_arg_i(&a, fp->ttl_ms);
  fl_arg(&a, (fp->opts.fleet_flags & CQ_FLEET_AUDIT) ? "1" : "0");
  fl_arg(&a, fp->ns);
  fl_arg(&a, fp->epoch);
  fl_arg_i(&a, (int64_t)fp->max_fence);
  fl_arg_i(&a, fp->max_ttl_ms);
  fl_arg(&a, (fp->opts.fleet_flags & CQ_FLEET_NEW_NAMESPACE) ? "1" : "0");
  redisReply *r;
  int rc = fl_call_locked(fp, FL_S_OPEN, &a, &r, err, len);
  if (rc == 0 && fl_reply_status(r) == FL_R_OWED) {
    /* Not yet done: another process's script left work, which this one
     * cannot settle without a session. Try again shortly. */
    freeReplyObject(r);
    rc = FL_R_OWED;
  } else if (rc == 0 && fl_reply_status(r) != FL_R_OK) {
    int st = fl_reply_status(r);
    snprintf(err, len, "%s", fl_reply_value(r, 0));
    freeReplyObject(r);
    rc = st < 0 ? st : CQ_ESYS;
  }
  if (rc != 0) {
    pthread_mutex_lock(&fp->mu);
    fp->sid[0] = '\0';
    pthread_mutex_unlock(&fp->mu);
    return rc;
  }
  int64_t sent = fp->link.sent_ms;
  const char *epoch = fl_reply_value(r, 1);
  pthread_mutex_lock(&fp->mu);
  bool recreated = fp->epoch[0] != '\0' && strcmp(epoch, fp->epoch) != 0;
  snprintf(fp->epoch, sizeof(fp->epoch), "%s", epoch);
  if (recreated) {
    fp->stats.state_losses++;
    fp->epoch_gen++;
  }
  fence_check(fp, (uint64_t)fl_reply_int(r, 2));
  fp->stats.sessions++;
  fp->gen++;
  fp->inbox_seen = 0;
  fp->deadline_ms = sent + fp->ttl_ms - fp->margin_ms;
  fp->next_hb_ms = sent + fp->heartbeat_ms;
  fl_quarantine_seen(fp, sent, fl_reply_int(r, 3));
  fp->fetch_due = true;
  pthread_mutex_unlock(&fp->mu);
  freeReplyObject(r);
  if (recreated)
    redeclare_locked(fp);
  fl_bg_kick(fp);
  return 0;
}

/* Open a session, settling owed work first (link.mu held). */
static int open_settled(struct fl_pool *fp, int64_t until, char *err,
                        size_t len) {
  int rc;
  for (int i = 0;
       (rc = open_locked(fp, until, err, len)) == FL_R_OWED && i < 100; i++) {
  }
  return rc == FL_R_OWED ? CQ_EUNAVAILABLE : rc;
}

int fl_session_open(struct fl_pool *fp, char *err, size_t len) {
  pthread_mutex_lock(&fp->link.mu);
  int rc = open_settled(fp, CQ_NEVER, err, len);
  pthread_mutex_unlock(&fp->link.mu);
  return rc;
}

void fl_grant_lost(struct fl_pool *fp, struct fl_grant *g, const char *why) {
  fl_held_unlink(fp, g);
  g->lost = true;
  fl_gstate_set(g, FL_G_IDLE);
  g->status = CQ_EUNAVAILABLE;
  fl_msgf(fl_gmsg(g), "fleet: lease lost: %s", why);
  fp->stats.leases_lost++;
  fl_event(fp, CQ_EVENT_LOST, g, NULL, 0);
}

void fl_session_lost(struct fl_pool *fp, const char *why, struct fl_ctx *ctx) {
  while (fp->held.next != &fp->held)
    fl_grant_lost(fp, fp->held.next, why);
  for (size_t i = 0; i < fp->table_cap; i++)
    while (fp->table[i] != NULL) {
      char msg[FL_MSG_MAX];
      fl_msgf(msg, "fleet: session lost while waiting: %s", why);
      fl_grant_decide(fp, fp->table[i], CQ_EUNAVAILABLE, NULL, msg, ctx);
    }
  if (fp->deadline_ms != CQ_NEVER)
    fp->stats.lost_deadline_ms = fp->deadline_ms;
  fp->deadline_ms = CQ_NEVER;
  /* The old session is ended on the server once it can be reached (its
   * units come back at once if it is still there); its deferred releases
   * go with it. */
  if (fp->sid[0] != '\0' && fp->ended_sid[0] == '\0') {
    memcpy(fp->ended_sid, fp->sid, sizeof(fp->sid));
    memcpy(fp->ended_secret, fp->secret, sizeof(fp->secret));
  }
  fp->sid[0] = '\0';
  fp->n_deferred = 0;
  fp->next_open_ms = cq_now();
}

void fl_quarantine_seen(struct fl_pool *fp, int64_t sent, int64_t left) {
  fp->stats.quarantine_ms = left > 0 ? left : 0;
  if (left <= 0)
    return;
  /* The waiters that arrived meanwhile are granted by the first call after
   * its end: this process's heartbeat, then, if none came sooner. */
  int64_t end = sent + left + 1;
  if (end < fp->next_hb_ms)
    fp->next_hb_ms = end;
}

bool fl_session_dead(const struct fl_pool *fp) {
  int64_t d = atomic_load(&fp->deadline_ms);
  return d == CQ_NEVER || cq_now() >= d;
}

void fl_session_check(struct fl_pool *fp, struct fl_ctx *ctx) {
  if (fp->sid[0] != '\0' && cq_now() >= fp->deadline_ms)
    fl_session_lost(fp, "no heartbeat was answered within the TTL", ctx);
}

void fl_late_reply(struct fl_pool *fp, uint32_t which) {
  if (!(atomic_load_explicit(&fp->late, memory_order_relaxed) & which) ||
      !(atomic_fetch_and(&fp->late, ~which) & which))
    return;
  pthread_mutex_lock(&fp->mu);
  uint32_t beats = fp->beats;
  if (which == FL_LATE_RELEASE)
    fp->fetch_due = true; /* a heartbeat at once, rather than at its time */
  pthread_mutex_unlock(&fp->mu);
  if (which == FL_LATE_RELEASE)
    fl_bg_kick(fp);
  /* Polled: the other thread keeps the deadline with mu alone. */
  for (int i = 0; i < 30000; i++) {
    bool past;
    if (which == FL_LATE_RELEASE) {
      pthread_mutex_lock(&fp->mu);
      past = fp->beats != beats;
      pthread_mutex_unlock(&fp->mu);
    } else {
      past = which == FL_LATE_HEARTBEAT
                 ? fl_session_dead(fp)
                 : atomic_load(&fp->deadline_ms) == CQ_NEVER;
    }
    if (past)
      return;
    (void)poll(NULL, 0, 1);
  }
}

bool fl_defer_release(struct fl_pool *fp, const struct fl_grant *g) {
  return fl_defer_release_id(fp, g->id, g->gen);
}

bool fl_defer_release_id(struct fl_pool *fp, const char *id, uint32_t gen) {
  if (gen != fp->gen)
    return true; /* its session is gone, and its lease with it */
  if (fp->n_deferred == fp->cap_deferred) {
    size_t cap = fp->cap_deferred ? fp->cap_deferred * 2 : 16;
    char(*grown)[40] = realloc(fp->deferred, cap * sizeof(*grown));
    if (grown == NULL)
      return false;
    fp->deferred = grown;
    fp->cap_deferred = cap;
  }
  snprintf(fp->deferred[fp->n_deferred++], sizeof(fp->deferred[0]), "%s", id);
  fp->deferred_gen = gen;
  return true;
}

/* End a session lost here, if the server still has it (link.mu held). */
static void end_old_locked(struct fl_pool *fp, int64_t until,
                           struct fl_ctx *ctx) {
  pthread_mutex_lock(&fp->mu);
  char old[sizeof(fp->ended_sid)], secret[sizeof(fp->ended_secret)];
  memcpy(old, fp->ended_sid, sizeof(old));
  memcpy(secret, fp->ended_secret, sizeof(secret));
  pthread_mutex_unlock(&fp->mu);
  if (old[0] == '\0')
    return;
  struct fl_args a;
  fl_args_init(&a);
  a.until = until;
  fl_arg(&a, old);
  fl_arg(&a, secret);
  redisReply *r;
  char err[FL_MSG_MAX];
  if (fl_call_locked(fp, FL_S_END, &a, &r, err, sizeof(err)) == 0) {
    fl_apply_outcomes(fp, r, 3 + fl_reply_nvalues(r), ctx);
    freeReplyObject(r);
    pthread_mutex_lock(&fp->mu);
    if (strcmp(fp->ended_sid, old) == 0)
      fp->ended_sid[0] = '\0';
    pthread_mutex_unlock(&fp->mu);
  }
}

/* A session, opening one when the last was lost (link.mu held): 0, or the
 * reason in err. Not before the backoff allows, unless `now_ok`. */
static int session_ensure_locked(struct fl_pool *fp, int64_t until,
                                 struct fl_ctx *ctx, char *err, size_t len) {
  pthread_mutex_lock(&fp->mu);
  bool have = fp->sid[0] != '\0';
  pthread_mutex_unlock(&fp->mu);
  if (have)
    return 0;
  int rc = open_settled(fp, until, err, len);
  if (rc != 0)
    return rc;
  end_old_locked(fp, until, ctx);
  return 0;
}

/*
 * The session is gone (the server said so, or the local deadline passed):
 * report the losses, then end the old session on the server in case it
 * is still there (its units come back at once) and open a new one.
 * link.mu held.
 */
static void recover_locked(struct fl_pool *fp, const char *why,
                           struct fl_ctx *ctx) {
  pthread_mutex_lock(&fp->mu);
  if (fp->sid[0] != '\0')
    fl_session_lost(fp, why, ctx);
  pthread_mutex_unlock(&fp->mu);
  char err[FL_MSG_MAX];
  /* On failure the background thread tries again. */
  (void)session_ensure_locked(fp, cq_now() + fp->heartbeat_ms, ctx, err,
                              sizeof(err));
}

/* Whether `id` is among n reply values from `at`. */
static bool listed_in(const redisReply *r, size_t at, size_t n,
                      const char *id) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(fl_reply_value(r, at + i), id) == 0)
      return true;
  return false;
}

/* What a heartbeat found that this process does not know, to end. */
struct strays {
  char (*ids)[40];
  size_t n_leases, n_waiters, cap;
};

static void stray_add(struct strays *s, const char *id) {
  if (s->n_leases + s->n_waiters == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    char(*grown)[40] = realloc(s->ids, cap * sizeof(*grown));
    if (grown == NULL)
      return; /* the next full check finds it again */
    s->ids = grown;
    s->cap = cap;
  }
  snprintf(s->ids[s->n_leases + s->n_waiters], 40, "%s", id);
}

/*
 * Compare what the server has for the session (leases at `la`, waiters at
 * `wa`) with what this process knows, after the inbox was applied. A
 * lease or waiter here that the server lacks was lost by a failover to a
 * replica that missed writes: the lease is lost, the waiter fails. One
 * there that this process does not know is a call whose reply it never
 * got: it goes in `s`, to be ended. mu held.
 */
static void reconcile(struct fl_pool *fp, const redisReply *r, size_t la,
                      size_t nl, size_t wa, size_t nw, struct strays *s,
                      struct fl_ctx *ctx) {
  size_t here_l = 0;
  for (struct fl_grant *g = fp->held.next; g != &fp->held; g = g->next)
    here_l++;
  bool full =
      fp->doubt || here_l != nl || fp->n_waiting != nw || fp->n_deferred > 0;
  if (!full)
    return;
  bool rolled = false;
  for (struct fl_grant *g = fp->held.next, *next; g != &fp->held; g = next) {
    next = g->next;
    if (!listed_in(r, la, nl, g->id)) {
      fl_grant_lost(fp, g, "the server no longer has it (a failover lost it)");
      rolled = true;
    }
  }
  for (size_t i = 0; i < fp->table_cap; i++)
    for (struct fl_grant *g = fp->table[i], *next; g != NULL; g = next) {
      next = g->hnext;
      if (!listed_in(r, wa, nw, g->id)) {
        fl_grant_decide(fp, g, CQ_EUNAVAILABLE, NULL,
                        "fleet: the server no longer has this waiter (a "
                        "failover lost it)",
                        ctx);
        rolled = true;
      }
    }
  if (rolled)
    fp->stats.rollbacks++;
  for (size_t i = 0; i < nl; i++) {
    const char *id = fl_reply_value(r, la + i);
    bool known = false;
    for (struct fl_grant *g = fp->held.next; g != &fp->held && !known;
         g = g->next)
      known = strcmp(g->id, id) == 0;
    for (size_t k = 0; k < fp->n_deferred && !known; k++)
      known = strcmp(fp->deferred[k], id) == 0;
    if (!known) {
      stray_add(s, id);
      s->n_leases++;
    }
  }
  for (size_t i = 0; i < nw; i++) {
    const char *id = fl_reply_value(r, wa + i);
    const char *dot = strrchr(id, '.');
    struct fl_grant *g =
        dot != NULL ? fl_table_get(fp, strtoull(dot + 1, NULL, 10)) : NULL;
    if (g == NULL || strcmp(g->id, id) != 0) {
      stray_add(s, id);
      s->n_waiters++;
    }
  }
  fp->doubt = false;
}

/* End the leases and waiters a heartbeat found that this process does not
 * know, and send the releases that could not reach the server before
 * (link.mu held). */
static void strays_end(struct fl_pool *fp, struct strays *s,
                       struct fl_ctx *ctx) {
  char err[FL_MSG_MAX];
  for (size_t i = 0; i < s->n_leases + s->n_waiters; i++) {
    struct fl_args a;
    fl_args_init(&a);
    a.until = cq_now() + fp->heartbeat_ms;
    bool lease = i < s->n_leases;
    if (!lease)
      fl_arg_i(&a, CQ_ECANCELED);
    fl_arg(&a, s->ids[i]);
    redisReply *r;
    if (fl_call_locked(fp, lease ? FL_S_RELEASE : FL_S_ABORT, &a, &r, err,
                       sizeof(err)) != 0) {
      pthread_mutex_lock(&fp->mu);
      fp->doubt = true; /* found again by the next heartbeat */
      pthread_mutex_unlock(&fp->mu);
      break;
    }
    fl_apply_outcomes(fp, r, 3 + fl_reply_nvalues(r), ctx);
    freeReplyObject(r);
    pthread_mutex_lock(&fp->mu);
    fp->stats.reconciled++;
    pthread_mutex_unlock(&fp->mu);
  }
  free(s->ids);
}

/* Send the deferred releases (link.mu held). */
static void deferred_send(struct fl_pool *fp, struct fl_ctx *ctx) {
  char err[FL_MSG_MAX];
  for (;;) {
    pthread_mutex_lock(&fp->mu);
    if (fp->n_deferred == 0 || fp->deferred_gen != fp->gen) {
      fp->n_deferred = 0;
      pthread_mutex_unlock(&fp->mu);
      return;
    }
    struct fl_args a;
    fl_args_init(&a);
    a.until = cq_now() + fp->heartbeat_ms;
    char id[40];
    memcpy(id, fp->deferred[fp->n_deferred - 1], sizeof(id));
    pthread_mutex_unlock(&fp->mu);
    fl_arg(&a, id);
    redisReply *r;
    if (fl_call_locked(fp, FL_S_RELEASE, &a, &r, err, sizeof(err)) != 0)
      return;
    fl_apply_outcomes(fp, r, 3 + fl_reply_nvalues(r), ctx);
    freeReplyObject(r);
    pthread_mutex_lock(&fp->mu);
    if (fp->n_deferred > 0 &&
        strcmp(fp->deferred[fp->n_deferred - 1], id) == 0) {
      fp->n_deferred--;
      fp->stats.deferred++;
    }
    pthread_mutex_unlock(&fp->mu);
  }
}

/* The values of a heartbeat's reply (see src/fleet/lua/heartbeat.lua). */
enum { HB_MORE, HB_HEAD, HB_FENCE, HB_EPOCH, HB_QUARANTINE, HB_NLEASES };

/* One heartbeat: extend the session, fetch the inbox, reclaim what dead
 * sessions hold (when `reap`), and (when `check`: not while a caller has
 * a reply of its own still to apply) compare what the server has for the
 * session with what this process knows. link.mu held. */
static int heartbeat_locked(struct fl_pool *fp, bool reap, bool check,
                            struct fl_ctx *ctx, char *err, size_t len) {
  int rc =
      session_ensure_locked(fp, cq_now() + fp->heartbeat_ms, ctx, err, len);
  if (rc != 0)
    return rc;
  if (check)
    deferred_send(fp, ctx);
  for (int tries = 0; tries < 1000; tries++) {
    struct fl_args a;
    fl_args_init(&a);
    pthread_mutex_lock(&fp->mu);
    /* Not past the local deadline: a stalled server cannot hold up the
     * lost-lease events. */
    a.until = fp->deadline_ms;
    fl_arg_i(&a, (int64_t)fp->inbox_seen);
    fl_arg(&a, "1");
    fl_arg(&a, reap ? "1" : "0");
    fl_arg_i(&a, (int64_t)fp->max_fence);
    pthread_mutex_unlock(&fp->mu);
    redisReply *r;
    rc = fl_call_locked(fp, FL_S_HEARTBEAT, &a, &r, err, len);
    if (rc != 0)
      return rc;
    fl_late_reply(fp, FL_LATE_HEARTBEAT);
    int st = fl_reply_status(r);
    if (st == FL_R_OWED) {
      freeReplyObject(r);
      continue;
    }
    if (st == FL_R_NOSESSION || st == FL_R_NONS) {
      freeReplyObject(r);
      recover_locked(fp,
                     st == FL_R_NONS ? "the server lost the namespace's state"
                                     : "the server expired the session",
                     ctx);
      return 0;
    }
    if (st != FL_R_OK) {
      snprintf(err, len, "the server refused a heartbeat");
      freeReplyObject(r);
      return CQ_ESYS;
    }
    int64_t sent = fp->link.sent_ms;
    bool more = fl_reply_int(r, HB_MORE) != 0;
    uint64_t head = (uint64_t)fl_reply_int(r, HB_HEAD);
    size_t n = fl_reply_nvalues(r);
    size_t nl = (size_t)fl_reply_int(r, HB_NLEASES);
    size_t la = HB_NLEASES + 1;
    size_t nw = la + nl < n ? (size_t)fl_reply_int(r, la + nl) : 0;
    size_t wa = la + nl + 1;
    size_t ia = wa + nw;
    struct strays s = {0};
    pthread_mutex_lock(&fp->mu);
    /* Applied after the local deadline (the reply came late, or this
     * thread was descheduled): the leases were lost at the deadline, told
     * or not yet, and the reply must not revive the session. (Only lost:
     * no other session can open while this call holds the connection.) */
    fl_session_check(fp, ctx);
    if (fp->sid[0] == '\0') {
      pthread_mutex_unlock(&fp->mu);
      freeReplyObject(r);
      recover_locked(fp, "the local deadline passed", ctx);
      return 0;
    }
    for (size_t i = ia; i < n; i++) {
      uint64_t seq = head + i - ia;
      if (seq > fp->inbox_seen) {
        fl_apply_outcome(fp, fl_reply_value(r, i), ctx);
        fp->inbox_seen = seq;
      }
    }
    fence_check(fp, (uint64_t)fl_reply_int(r, HB_FENCE));
    if (check && ia <= n)
      reconcile(fp, r, la, nl, wa, nw, &s, ctx);
    fp->deadline_ms = sent + fp->ttl_ms - fp->margin_ms;
    /* Dead sessions left to reclaim: the next heartbeat at once. */
    fp->next_hb_ms = more ? sent : sent + fp->heartbeat_ms;
    fl_quarantine_seen(fp, sent, fl_reply_int(r, HB_QUARANTINE));
    fp->fetch_due = false;
    bool recheck = ++fp->beats % FL_LIBRARY_CHECK_BEATS == 0;
    bool owed = fl_reply_owed(r);
    pthread_mutex_unlock(&fp->mu);
    freeReplyObject(r);
    if (recheck)
      fl_library_recheck(fp);
    if (s.n_leases + s.n_waiters > 0 || s.ids != NULL)
      strays_end(fp, &s, ctx);
    if (!owed)
      return 0;
  }
  snprintf(err, len, "the namespace's owed work does not end");
  return CQ_ESYS;
}

/* Tests: how many times a script left owed work that a later one did. */
_Atomic uint64_t cq__fleet_settles;

int fl_settle(struct fl_pool *fp, struct fl_ctx *ctx, char *err, size_t len) {
  atomic_fetch_add(&cq__fleet_settles, 1);
  return heartbeat_locked(fp, false, false, ctx, err, len);
}

/* Scripts that act for the session: without one they cannot run. */
static bool needs_session(enum fl_script s) {
  return s == FL_S_ACQUIRE || s == FL_S_RELEASE || s == FL_S_PART ||
         s == FL_S_ABORT || s == FL_S_HEARTBEAT || s == FL_S_CLOSE;
}

int fl_run(struct fl_pool *fp, enum fl_script script, struct fl_args *a,
           bool session_bound, redisReply **out, struct fl_ctx *ctx, char *err,
           size_t len) {
  if (fl_link_lock(fp, a->until) != 0) {
    char where[FL_MSG_MAX];
    fl_url_text(fp, where, sizeof(where));
    snprintf(err, len,
             "the server at %s cannot be reached in time (the connection "
             "stayed busy with another call)",
             where);
    pthread_mutex_lock(&fp->mu);
    fp->stats.unavailable++;
    pthread_mutex_unlock(&fp->mu);
    return CQ_EUNAVAILABLE;
  }
  int rc;
  if (needs_session(script)) {
    pthread_mutex_lock(&fp->mu);
    fl_session_check(fp, ctx);
    bool have = fp->sid[0] != '\0';
    pthread_mutex_unlock(&fp->mu);
    if (!have) {
      rc = session_ensure_locked(fp, a->until, ctx, err, len);
      if (rc == 0 && session_bound) {
        snprintf(err, len, "the session was lost");
        rc = FL_ESESSION;
      }
      if (rc != 0) {
        pthread_mutex_unlock(&fp->link.mu);
        return rc;
      }
    }
  }
  for (int tries = 0;; tries++) {
    redisReply *r;
    rc = fl_call_locked(fp, script, a, &r, err, len);
    if (rc != 0)
      break;
    int st = fl_reply_status(r);
    if (st == FL_R_OWED && tries < 1000) {
      freeReplyObject(r);
      if ((rc = fl_settle(fp, ctx, err, len)) != 0)
        break;
      continue;
    }
    if ((st == FL_R_NOSESSION || st == FL_R_NONS) && tries < 3) {
      freeReplyObject(r);
      recover_locked(fp,
                     st == FL_R_NONS ? "the server lost the namespace's state"
                                     : "the server expired the session",
                     ctx);
      pthread_mutex_lock(&fp->mu);
      bool have = fp->sid[0] != '\0';
      pthread_mutex_unlock(&fp->mu);
      if (session_bound || !have) {
        snprintf(err, len, "the session was lost: %s",
                 st == FL_R_NONS ? "the server lost the namespace's state"
                                 : "the server expired it");
        rc = have ? FL_ESESSION : CQ_EUNAVAILABLE;
        break;
      }
      continue;
    }
    if (st == FL_R_NONS || st == FL_R_OWED || st == FL_R_NOSESSION) {
      snprintf(err, len, "the server keeps refusing this call");
      freeReplyObject(r);
      rc = CQ_EUNAVAILABLE;
      break;
    }
    fl_apply_outcomes(fp, r, 3 + fl_reply_nvalues(r), ctx);
    if (fl_reply_owed(r)) {
      /* This call left work: do it before returning, so that its
       * outcomes come with it, as in-process. */
      char ignored[FL_MSG_MAX];
      (void)fl_settle(fp, ctx, ignored, sizeof(ignored));
    }
    *out = r;
    return 0;
  }
  pthread_mutex_unlock(&fp->link.mu);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* The background thread                                                     */
/* ------------------------------------------------------------------------ */

void fl_bg_kick(struct fl_pool *fp) {
  if (fp->wake_fd[1] >= 0) {
    char c = 1;
    ssize_t n = write(fp->wake_fd[1], &c, 1);
    (void)n;
  }
}

/* Subscribe to the session's channel on a fresh connection, waiting a
 * heartbeat interval at most, and never past the local deadline. */
static void subscribe(struct fl_pool *fp) {
  if (fp->sub != NULL) {
    redisFree(fp->sub);
    fp->sub = NULL;
  }
  char ch[sizeof(fp->sub_channel)];
  pthread_mutex_lock(&fp->mu);
  snprintf(ch, sizeof(ch), "%sch:%s", fp->prefix, fp->sid);
  bool have = fp->sid[0] != '\0';
  int64_t wait = fp->deadline_ms - cq_now();
  pthread_mutex_unlock(&fp->mu);
  if (!have || wait <= 0)
    return;
  char err[FL_MSG_MAX];
  int code;
  redisContext *c =
      fl_connect(fp, wait < fp->heartbeat_ms ? wait : fp->heartbeat_ms, &code,
                 err, sizeof(err));
  if (c == NULL)
    return;
  const char *argv[2] = {"SUBSCRIBE", ch};
  redisReply *r = fl_command(c, 2, argv, NULL);
  if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
    if (r != NULL)
      freeReplyObject(r);
    redisFree(c);
    return;
  }
  freeReplyObject(r);
  fp->sub = c;
  memcpy(fp->sub_channel, ch, sizeof(ch));
  /* Messages sent while not subscribed are lost: fetch at once. */
  pthread_mutex_lock(&fp->mu);
  fp->fetch_due = true;
  pthread_mutex_unlock(&fp->mu);
}

/*
 * Apply the outcomes the subscription brought: each message is one or more
 * outcome entries, separated by newlines. They are applied under link.mu,
 * like a reply's, so that an acquire whose reply has not been read yet has
 * entered its waiter in the table first. Returns false when the
 * subscription broke (then the inbox is fetched, for what it missed).
 */
static bool read_messages(struct fl_pool *fp, struct fl_ctx *ctx) {
  if (redisBufferRead(fp->sub) != REDIS_OK) {
    redisFree(fp->sub);
    fp->sub = NULL;
    return false;
  }
  void *reply;
  while (redisGetReplyFromReader(fp->sub, &reply) == REDIS_OK &&
         reply != NULL) {
    redisReply *m = reply;
    if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
        m->element[2]->type == REDIS_REPLY_STRING &&
        strcmp(m->element[0]->str, "message") == 0) {
      /* Not past the local deadline; the inbox has what is left here. */
      if (fl_link_lock(fp, atomic_load(&fp->deadline_ms)) != 0) {
        pthread_mutex_lock(&fp->mu);
        fp->fetch_due = true;
        pthread_mutex_unlock(&fp->mu);
        freeReplyObject(reply);
        continue;
      }
      pthread_mutex_lock(&fp->mu);
      for (char *line = m->element[2]->str, *end; line != NULL;
           line = end != NULL ? end + 1 : NULL) {
        end = strchr(line, '\n');
        if (end != NULL)
          *end = '\0';
        fl_apply_outcome(fp, line, ctx);
      }
      pthread_mutex_unlock(&fp->mu);
      pthread_mutex_unlock(&fp->link.mu);
    }
    freeReplyObject(reply);
  }
  return true;
}

/* Take out the callback waiters whose deadline has passed (not with
 * manual timers: cq_pool_expire() does it then). */
static void expire_callbacks(struct fl_pool *fp, struct fl_ctx *ctx);

static void *bg_main(void *arg) {
  struct fl_pool *fp = arg;
  char err[FL_MSG_MAX];
  int64_t sub_retry = 0;
  for (;;) {
    pthread_mutex_lock(&fp->mu);
    if (fp->bg_stop) {
      pthread_mutex_unlock(&fp->mu);
      break;
    }
    int64_t now = cq_now();
    bool have = fp->sid[0] != '\0';
    int64_t wake = have ? fp->next_hb_ms : fp->next_open_ms;
    if (fp->deadline_ms < wake)
      wake = fp->deadline_ms;
    if (!(fp->opts.flags & CQ_POOL_MANUAL_TIMERS)) {
      int64_t d = fl_table_first_deadline(fp);
      if (d < wake)
        wake = d;
    }
    bool due = fp->fetch_due;
    char want[sizeof(fp->sub_channel)];
    snprintf(want, sizeof(want), "%sch:%s", fp->prefix, fp->sid);
    pthread_mutex_unlock(&fp->mu);

    if (have && (fp->sub == NULL || strcmp(want, fp->sub_channel) != 0) &&
        now >= sub_retry) {
      subscribe(fp);
      if (fp->sub != NULL)
        continue; /* the loop looks again, for what it missed meanwhile */
      /* A server that takes the connection but does not answer keeps
       * each try a while: the rest of the turn still runs, so that the
       * local deadline is kept whatever the subscription does. */
      now = cq_now();
      sub_retry = now + fp->heartbeat_ms / 4 + 1;
    }
    int timeout = due                 ? 0
                  : wake <= now       ? 0
                  : wake - now > 1000 ? 1000
                                      : (int)(wake - now);
    struct pollfd pfd[2] = {{fp->wake_fd[0], POLLIN, 0},
                            {fp->sub != NULL ? fp->sub->fd : -1, POLLIN, 0}};
    int n = poll(pfd, 2, timeout);
    if (n > 0 && (pfd[0].revents & POLLIN)) {
      char buf[64];
      while (read(fp->wake_fd[0], buf, sizeof(buf)) > 0) {
      }
    }
    struct fl_ctx ctx;
    fl_ctx_init(&ctx);
    if (n > 0 && fp->sub != NULL && (pfd[1].revents & (POLLIN | POLLHUP)) &&
        !read_messages(fp, &ctx)) {
      pthread_mutex_lock(&fp->mu);
      fp->fetch_due = true;
      pthread_mutex_unlock(&fp->mu);
    }
    now = cq_now();
    /* The local deadline is kept with mu alone, so that a call stalled on
     * the connection cannot delay the lost-lease events past it. */
    pthread_mutex_lock(&fp->mu);
    fl_session_check(fp, &ctx);
    have = fp->sid[0] != '\0';
    bool reopen = !have && now >= fp->next_open_ms;
    bool beat = have && now >= fp->next_hb_ms;
    due = have && fp->fetch_due;
    int64_t until = have ? fp->deadline_ms : now + fp->heartbeat_ms;
    pthread_mutex_unlock(&fp->mu);
    fl_ctx_finish(fp, &ctx);
    if ((reopen || beat || due) && fl_link_lock(fp, until) == 0) {
      int rc = heartbeat_locked(fp, beat, true, &ctx, err, sizeof(err));
      pthread_mutex_unlock(&fp->link.mu);
      if (rc != 0) {
        /* Tried again on the schedule, a quarter interval on: not at once
         * for a fetch still due (a server that refuses every call, or that
         * the backoff keeps us from until after the deadline, would spin
         * the thread), as every heartbeat fetches the inbox anyway. */
        pthread_mutex_lock(&fp->mu);
        fp->fetch_due = false;
        if (fp->sid[0] != '\0')
          fp->next_hb_ms = now + fp->heartbeat_ms / 4 + 1;
        else
          fp->next_open_ms = now + fp->heartbeat_ms / 4 + 1;
        pthread_mutex_unlock(&fp->mu);
      }
    }
    if (!(fp->opts.flags & CQ_POOL_MANUAL_TIMERS))
      expire_callbacks(fp, &ctx);
    fl_ctx_finish(fp, &ctx);
  }
  return NULL;
}

static void expire_callbacks(struct fl_pool *fp, struct fl_ctx *ctx) {
  (void)fl_expire_due(fp, cq_now(), true, ctx);
}

int fl_bg_start(struct fl_pool *fp) {
  if (pipe(fp->wake_fd) != 0)
    return CQ_ESYS;
  for (int i = 0; i < 2; i++) {
    int fl = fcntl(fp->wake_fd[i], F_GETFL);
    (void)fcntl(fp->wake_fd[i], F_SETFL, fl | O_NONBLOCK);
    (void)fcntl(fp->wake_fd[i], F_SETFD, FD_CLOEXEC);
  }
  if (pthread_create(&fp->bg, NULL, bg_main, fp) != 0) {
    close(fp->wake_fd[0]);
    close(fp->wake_fd[1]);
    fp->wake_fd[0] = fp->wake_fd[1] = -1;
    return CQ_ESYS;
  }
  fp->bg_running = true;
  return 0;
}

void fl_bg_stop(struct fl_pool *fp) {
  if (!fp->bg_running)
    return;
  pthread_mutex_lock(&fp->mu);
  fp->bg_stop = true;
  pthread_mutex_unlock(&fp->mu);
  fl_bg_kick(fp);
  pthread_join(fp->bg, NULL);
  fp->bg_running = false;
  if (fp->sub != NULL)
    redisFree(fp->sub);
  fp->sub = NULL;
  close(fp->wake_fd[0]);
  close(fp->wake_fd[1]);
  fp->wake_fd[0] = fp->wake_fd[1] = -1;
}
