/*
 * Internal header of the fleet pool (libcronoq_fleet): a pool whose state
 * lives in a Redis server, shared by every process that opens the same
 * namespace. Every file of src/fleet/ includes this and nothing else of
 * the library's; it knows the core only through its public headers and
 * the backend interface (cronoq_backend.h).
 *
 * Who does what:
 * - The server decides. Each operation is one Lua script (src/fleet/lua/,
 *   embedded at build time), which checks everything, applies the policy
 *   and replies with its outcome and with the outcomes it decided for this
 *   process's other waiters. Outcomes for other processes go to their
 *   inboxes, with a wake-up on their channel.
 * - This process keeps what its callers hold and wait for: a table of
 *   waiting grants by attempt number, a list of held grants, the names it
 *   resolved, and its session (an id, a TTL kept alive by heartbeats, and
 *   the local deadline after which it must treat its leases as lost).
 * - One background thread per pool heartbeats, listens on the session's
 *   channel, fetches the inbox, expires callback deadlines, notices a
 *   session lost, and runs callbacks and the event hook for what it
 *   decided.
 *
 * Locking: `link.mu` serialises the command connection, and is held from
 * sending a script to having applied its reply (so that outcomes are
 * applied in the server's order, whichever thread fetched them); `mu`
 * guards the local state and is taken inside `link.mu`, never around it.
 * Callbacks and the event hook run with neither held.
 */
#ifndef CRONOQ_FLEET_H
#define CRONOQ_FLEET_H

#include "cronoq/cronoq.h"
#include "cronoq/cronoq_backend.h"
#include "cronoq/cronoq_fleet.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FL_CONTAINER_OF(ptr, type, field)                                      \
  ((type *)(void *)((char *)(ptr)-offsetof(type, field)))

#define FL_MSG_MAX 160
/* A call's message, which a pool's open and cq_fleet_error() carry whole
 * (a grant's own is FL_MSG_MAX). */
#define FL_ERR_MAX 320

/* The version of the namespace's layout on the server (the Lua's SCHEMA
 * is written from it), raised whenever a key or a record changes
 * shape. A pool does not open a namespace of another version. */
#define FL_SCHEMA "2"

/* ------------------------------------------------------------------------ */
/* URLs (url.c)                                                              */
/* ------------------------------------------------------------------------ */

struct fl_url {
  bool unix_socket;
  char host[256]; /* redis:// */
  int port;
  char path[108]; /* unix:// (sun_path's size) */
  int db;
  char user[64];
  char password[128];
};

/* Parse `redis://[user[:password]@]host[:port][/db]` or
 * `unix://[user[:password]@]/path[?db=N]` from `given`. 0, or CQ_EINVAL with
 * `err`. */
int fl_url_parse(const char *given, struct fl_url *out, char *err, size_t len);

/* `url` for a message: its password, if it has one, replaced by "***". */
void fl_url_redact(const char *url, char *buf, size_t len);

/* Check a namespace name: 1 to 64 bytes of letters, digits and "_-.". */
int fl_namespace_check(const char *ns);

/* Check a resource name as the core does: 1 to CQ_NAME_MAX bytes of
 * letters, digits and "_-./"; with `at_ok`, one '@' may join a device
 * pool's name and its host. */
int fl_name_check(const char *name, bool at_ok);

/* ------------------------------------------------------------------------ */
/* Scripts (generated fleet_scripts.c) and the command connection (link.c)  */
/* ------------------------------------------------------------------------ */

enum fl_script {
  FL_S_ABORT,
  FL_S_ACQUIRE,
  FL_S_CLOSE,
  FL_S_DECLARE,
  FL_S_END,
  FL_S_FSCK,
  FL_S_HEARTBEAT,
  FL_S_ONLINE,
  FL_S_OPEN,
  FL_S_PART,
  FL_S_QUERY,
  FL_S_RELEASE,
  FL_S_REMOVE,
  FL_S_RESOLVE,
  FL_S_SETCAP,
  FL_S_STATS,
  FL_S_COUNT
};

/* The embedded Lua (generated fleet_scripts.c). */
extern const char fl_lua_prelude[];
extern const size_t fl_lua_prelude_len;
extern const char *const fl_lua_body[FL_S_COUNT];
extern const size_t fl_lua_body_len[FL_S_COUNT];
extern const char *const fl_lua_name[FL_S_COUNT];
extern const char fl_lua_version[]; /* 16 hex digits of their SHA1 */

/* The text of a script: the prelude, then the operation's body. Built
 * once; NULL when out of memory. */
const char *fl_script_text(enum fl_script s, size_t *len);

/* The same operations as one library of Redis functions (Redis 7), named
 * "cronoq_<version>", whose functions are "cronoq_<version>_<operation>":
 * the prelude is run once, when the server loads the library, instead of
 * on every call. Built once; NULL when out of memory. */
const char *fl_library_text(size_t *len);

/* Reply statuses of the scripts, besides cronoq.h's negative codes. The
 * Lua's are written from these (src/fleet/lua_consts.c). */
enum {
  FL_R_OK = 0,
  FL_R_WAITING = 1,
  FL_R_OWED = 2,
  FL_R_NOSESSION = 3, /* the session expired, or the server never had it */
  FL_R_NONS = 4,      /* the namespace is gone (the server lost its state),
                         or has another schema version */
  FL_R_UNKNOWN = 5,
  FL_R_QUARANTINE = 8 /* the namespace grants nothing yet (value: ms left) */
};

/* fl_run(): the session was lost (expired on the server, or its local
 * deadline passed) and the call, bound to it, was not made (not a
 * cronoq.h code: callers turn it into one). */
#define FL_ESESSION 100

/* The arguments of one script call: the common ones (session, work share,
 * retry flag, host) are added by fl_call(). */
#define FL_ARGS_MAX (8 + 4 * CQ_REQ_MAX_ITEMS + 64)
struct fl_args {
  int n;
  int64_t until; /* the call gives up at this time (cq_now()) at the latest,
                    or after the pool's timeout; CQ_NEVER: the timeout */
  const char *v[FL_ARGS_MAX];
  size_t len[FL_ARGS_MAX];
  char nums[FL_ARGS_MAX][24]; /* storage for numbers */
};

void fl_args_init(struct fl_args *a);
void fl_arg(struct fl_args *a, const char *s);
void fl_arg_n(struct fl_args *a, const char *s, size_t len);
void fl_arg_i(struct fl_args *a, int64_t v);
void fl_arg_c(struct fl_args *a, char c);

struct fl_pool;

/* The command connection. */
struct fl_link {
  pthread_mutex_t mu;
  redisContext *c;
  char sha[FL_S_COUNT][41]; /* of the scripts, once loaded */
  bool loaded;              /* the library or the scripts are on the server */
  bool functions;           /* calls go to the library (FCALL), not EVALSHA */
  bool down;                /* the last call could not reach the server */
  int64_t sent_ms;          /* when the last script was sent (cq_now()) */
  int64_t next_connect;     /* no connection attempt before (the backoff) */
  int64_t timeout_ms;       /* the connection's read and write timeout */
  uint32_t backoff;         /* failed connections in a row */
  uint32_t drop_replies;    /* tests: replies to drop, as if they were lost */
  /* A release sent by fl_release_send() whose reply is still to be read:
   * the next call reads it after sending its own command. */
  bool pending;
  char pending_id[40];
  uint32_t pending_gen;
  /* A call met something that trying again cannot mend (code of the
   * library's name that is not its own): the call fails with CQ_EACCES
   * and this message. */
  bool refused;
  char refusal[FL_ERR_MAX];
};

/* What a server holds under the library's name (fl_library_load()). */
enum fl_lib {
  FL_LIB_MINE,   /* this library's code */
  FL_LIB_NONE,   /* nothing, and this user could not load it */
  FL_LIB_OTHER,  /* code that is not this library's */
  FL_LIB_UNKNOWN /* this user may not look, or no answer */
};

/* Load the library of functions where the server has none (or, with
 * `replace`, code of its name that is not its own), and say what the
 * server holds now (link.mu held, connected); with FL_LIB_NONE, `why`
 * (may be NULL) has the server's answer to the load. */
enum fl_lib fl_library_load(struct fl_link *l, bool replace, char *why,
                            size_t why_len);
/* Every this many heartbeats, the background thread compares the server's
 * library with this library's code again (fl_library_recheck()). */
#define FL_LIBRARY_CHECK_BEATS 16
/* The library, checked when the connection was made, may have been
 * replaced since (an ACL that lets some user FUNCTION LOAD REPLACE): when
 * it is no longer this library's code, the connection is dropped, and the
 * next one fails closed with CQ_EACCES, as at open (link.mu held). */
void fl_library_recheck(struct fl_pool *fp);
/* The message for a library of the right name and the wrong code. */
void fl_library_foreign(const struct fl_pool *fp, char *err, size_t len);

/* Send a release of lease `id` (of session generation `gen`) without
 * waiting for its reply, which the next call on the link reads (link.mu
 * held). False when it was not sent: the caller runs it as a call. */
bool fl_release_send(struct fl_pool *fp, const char *id, uint32_t gen);

/* Connect, and check the server's settings that a pool depends on
 * (link.mu held): `maxmemory-policy` must be noeviction. Returns 0 (with
 * *unchecked when this user may read it neither with CONFIG GET nor with
 * INFO), CQ_EINVAL (another policy: `err` says which and what to do),
 * CQ_EUNAVAILABLE or CQ_EACCES (not reached, or refused, as a call). */
int fl_server_check(struct fl_pool *fp, bool *unchecked, char *err, size_t len);
/* The same check on connection `c` (CQ_EUNAVAILABLE: it broke). */
int fl_settings_check(redisContext *c, bool *unchecked, char *err, size_t len);

/* Where the pool's server is, for messages: "unix:///path", "host:port". */
void fl_url_text(const struct fl_pool *fp, char *buf, size_t len);

/* One command on a blocking context, with SIGPIPE kept from the process
 * (a connection the server closed is an error, not a signal). */
redisReply *fl_command(redisContext *c, int argc, const char **argv,
                       const size_t *lens);

/* Connect (or reconnect) a context to the pool's server: AUTH (or a PING
 * where no user or password is given, to learn that one is wanted),
 * SELECT, waiting at most `wait_ms` for each step. NULL on failure, with
 * the reason in `err` and *code CQ_EUNAVAILABLE (not reached) or CQ_EACCES
 * (the server refused this user). */
redisContext *fl_connect(const struct fl_pool *fp, int64_t wait_ms, int *code,
                         char *err, size_t len);

/* How long to wait before connection attempt `n` (0, 1, ...) of a run of
 * failures: exponential from 10 ms up to `cap_ms`, times a random factor
 * in [0.5, 1.5) drawn from `r` (a uniform fraction in [0, 1)), so that
 * processes cut off together do not come back in step. */
int64_t fl_backoff_ms(uint32_t n, int64_t cap_ms, double r);

/* A uniform fraction in [0, 1), per thread. */
double fl_random(void);

/* Lock link.mu by `until` (cq_now(); CQ_NEVER: wait as long as it takes).
 * 0, or FL_ELATE when it stayed busy. */
#define FL_ELATE 101
int fl_link_lock(struct fl_pool *fp, int64_t until);

/*
 * Run `script` with `a` on the command connection: EVALSHA, falling back
 * to EVAL on NOSCRIPT; on a broken connection, a timeout or a server that
 * cannot run it now (loading, busy, a replica), reconnect with a jittered
 * backoff and send it again, flagged as a retry (the scripts are
 * idempotent for a retry), until the pool's timeout or a->until. On 0
 * *out is the reply and link.mu is held: the caller applies it, then
 * calls fl_call_done(). Otherwise nothing is held and a message is in
 * `err`. Returns 0, CQ_EUNAVAILABLE (not reached in time: the call may or
 * may not have been applied), CQ_ENOMEM (the server is out of memory and
 * refused the script whole), FL_ELATE (link.mu stayed busy: nothing was
 * sent) or CQ_ESYS (the server refused the script: a bug).
 */
int fl_call(struct fl_pool *fp, enum fl_script script, struct fl_args *a,
            redisReply **out, char *err, size_t len);
/* The same with link.mu already held; it stays held whatever happens. */
int fl_call_locked(struct fl_pool *fp, enum fl_script script, struct fl_args *a,
                   redisReply **out, char *err, size_t len);
void fl_call_done(struct fl_pool *fp, redisReply *reply);

/* Parts of a script's reply: {status, owed, n, n values, outcomes...}. */
int fl_reply_status(const redisReply *r);
bool fl_reply_owed(const redisReply *r);
size_t fl_reply_nvalues(const redisReply *r);
const char *fl_reply_value(const redisReply *r, size_t i); /* "" if absent */
int64_t fl_reply_int(const redisReply *r, size_t i);

/* ------------------------------------------------------------------------ */
/* Names (request.c): resources this process has resolved                   */
/* ------------------------------------------------------------------------ */

struct fl_name {
  char name[CQ_NAME_MAX + 1]; /* canonical: "gpu@hostA" for devices */
  uint32_t uid;
  uint32_t epoch; /* fl_pool.epoch_gen when it was resolved */
  uint8_t kind;   /* enum cq_resource_kind */
  uint32_t ndev;
  char **ids; /* device ids, ndev of them */
};

/* ------------------------------------------------------------------------ */
/* Requests and grants (grant.c)                                             */
/* ------------------------------------------------------------------------ */

#define FL_REQ_MAGIC 0x66717271u /* "fqrq" */
#define FL_GRANT_DEVS 480        /* devices one grant can hold */

struct fl_ritem {
  uint32_t name; /* index into the pool's names */
  uint8_t mode;  /* 'u' units, 'f' fraction, 'w' whole devices */
  uint8_t kind;
  int64_t amount;
};

struct fl_req {
  uint32_t magic;
  uint16_t n;
  int64_t limit_ms;
  struct fl_ritem it[CQ_REQ_MAX_ITEMS]; /* in resource order */
};

enum fl_gstate { FL_G_IDLE = 0, FL_G_WAITING = 1, FL_G_HELD = 2 };
enum fl_gstyle { FL_STYLE_BLOCKING = 1, FL_STYLE_CALLBACK = 2 };

/* A blocked caller waits on this, on its own stack. */
struct fl_wait {
  pthread_mutex_t mu;
  pthread_cond_t cond;
  bool done;
};

struct fl_gitem {
  uint32_t name;
  uint8_t mode;
  int64_t held;
  uint16_t dev_first; /* into devs[] */
  uint16_t ndev;
};

struct fl_grant {
  _Atomic uint8_t state; /* enum fl_gstate */
  uint8_t style;
  uint8_t n_items;
  bool lost;        /* its lease was lost (held no more) */
  bool in_table;    /* waiting: in the pool's table */
  bool in_held;     /* held: in the pool's list */
  int status;       /* of the finished attempt */
  int told;         /* callback: the status it is given, fixed (under mu)
                       when the grant is queued for it */
  uint64_t op;      /* attempt number, unique in the pool */
  uint64_t seq;     /* waiting: the server's arrival order */
  uint64_t fence;   /* held: the fencing token */
  uint64_t attempt; /* for events */
  uint32_t parts;   /* partial releases sent */
  uint32_t gen;     /* the session generation it belongs to */
  int64_t deadline; /* waiting: CQ_NEVER or absolute on the pool's clock */
  int64_t t_start;
  cq_grant_cb cb;
  struct fl_wait *wait;         /* blocking: the caller's */
  struct fl_grant *hnext;       /* waiting: table chain */
  struct fl_grant *prev, *next; /* held: the pool's list */
  struct fl_grant *ready_next;  /* decided: to notify */
  char id[40];                  /* "<session>.<op>" */
  struct fl_gitem it[CQ_REQ_MAX_ITEMS];
  uint16_t devs[FL_GRANT_DEVS];
  uint16_t ndevs;
};

static inline struct fl_req *fl_req_of(cq_req *r) {
  return (struct fl_req *)cq_backend_req_area(r);
}
static inline const struct fl_req *fl_req_ofc(const cq_req *r) {
  return (const struct fl_req *)cq_backend_req_area_c(r);
}
static inline struct fl_grant *fl_grant_of(cq_grant *g) {
  return (struct fl_grant *)cq_backend_grant_area(g);
}
static inline const struct fl_grant *fl_grant_ofc(const cq_grant *g) {
  return (const struct fl_grant *)cq_backend_grant_area_c(g);
}
static inline cq_grant *fl_grant_pub(struct fl_grant *g) {
  return (cq_grant *)(void *)((char *)g - CQ_BACKEND_HEADER_BYTES -
                              offsetof(cq_grant, cq_private));
}
static inline cq_req *fl_req_pub(struct fl_req *r) {
  return (cq_req *)(void *)((char *)r - CQ_BACKEND_HEADER_BYTES -
                            offsetof(cq_req, cq_private));
}
/* The messages live in the core's header; cq_req_error() and
 * cq_grant_error() read them there. */
static inline char *fl_gmsg(struct fl_grant *g) {
  return cq_backend_grant_msg(fl_grant_pub(g));
}
static inline char *fl_rmsg(struct fl_req *r) {
  return cq_backend_req_msg(fl_req_pub(r));
}
_Static_assert(sizeof(struct fl_req) <= CQ_BACKEND_REQ_BYTES,
               "a fleet request fits in a cq_req");
_Static_assert(sizeof(struct fl_grant) <= CQ_BACKEND_GRANT_BYTES,
               "a fleet grant fits in a cq_grant");
_Static_assert(FL_MSG_MAX == CQ_BACKEND_MSG_MAX, "one message size");

static inline uint8_t fl_gstate(const struct fl_grant *g) {
  return atomic_load_explicit(&g->state, memory_order_acquire);
}
static inline void fl_gstate_set(struct fl_grant *g, uint8_t s) {
  atomic_store_explicit(&g->state, s, memory_order_release);
}

/* ------------------------------------------------------------------------ */
/* The pool (pool.c, session.c)                                              */
/* ------------------------------------------------------------------------ */

/* Work collected under `mu` and finished after dropping it. */
struct fl_ctx {
  struct fl_grant *ready_head, **ready_tail; /* callbacks, in order */
  struct fl_grant *wake;                     /* blocked callers */
};

void fl_ctx_init(struct fl_ctx *c);

/* An event waiting for the hook. */
struct fl_event {
  cq_event ev;
  char resource[CQ_NAME_MAX + 1];
};

/* A declaration this process made, sent again when the namespace's state
 * was lost (the pool works again from what its processes re-declare). */
struct fl_decl {
  int kind;
  char name[CQ_NAME_MAX + 1]; /* budgets, classes; device pools: the base */
  int64_t capacity;           /* device pools: the count */
  unsigned flags;
  char *ids; /* device pools: the ids, separated by spaces */
};

#define FL_POOL_MAGIC 0x666c6565u /* "flee" */

/* Members in order of alignment (the padding check of clang-tidy), each
 * group commented where it starts. */
struct fl_pool {
  uint32_t magic; /* first: tells a fleet pool from another backend's */
  uint32_t gen;   /* the session's generation: grows with every new one */
  cq_pool *pool;  /* the core's handle */
  cq_fleet_opts opts;
  int64_t ttl_ms, heartbeat_ms, timeout_ms, margin_ms, max_ttl_ms;

  struct fl_link link;
  pthread_mutex_t mu;

  /* The session (sid, fetch_due and closed below). */
  _Atomic int64_t deadline_ms; /* local: its leases are lost after this;
                                  CQ_NEVER while there is no session */
  int64_t next_hb_ms;
  int64_t next_open_ms; /* no session: the next attempt to open one */
  uint64_t inbox_seen;  /* the last inbox entry applied */
  uint64_t next_op;
  uint64_t next_attempt;
  uint64_t max_fence; /* the highest fencing token seen */
  uint32_t beats;     /* heartbeats answered, for the periodic full check */
  uint32_t epoch_gen; /* grows when the namespace is found recreated */
  cq_fleet_stats stats;

  /* Declarations, sent again after a loss of state. */
  struct fl_decl *decls;
  size_t n_decls, cap_decls;

  /* Releases that could not reach the server, sent by the background
   * thread (ids of leases of session generation deferred_gen). */
  char (*deferred)[40];
  size_t n_deferred, cap_deferred;
  uint32_t deferred_gen;

  /* Waiting grants by attempt number; held grants. */
  struct fl_grant **table;
  size_t table_cap, n_waiting;
  struct fl_grant held; /* list head */

  /* Resolved names. */
  struct fl_name **names;

  /* Events for the hook. */
  struct fl_event *events;
  uint64_t events_dropped, wakeups;

  /* The background thread and its subscription. */
  pthread_t bg;
  redisContext *sub;

  uint32_t n_names, cap_names;
  uint32_t ev_cap, ev_head, ev_count;
  _Atomic uint32_t late; /* tests: FL_LATE_* (cq__fleet_late_reply()) */
  int wake_fd[2];        /* the background thread's wake-up pipe */
  struct fl_url url;
  char ns[65];
  char prefix[80]; /* "cq:{<namespace>}:" */
  char host[CQ_NAME_MAX + 1];
  char steps[16]; /* the share of work of one script, as text */
  char sid[24];
  char secret[33];    /* the session's, which every call presents */
  char ended_sid[24]; /* a session lost here, to end on the server ("") */
  char ended_secret[33];
  char epoch[32]; /* the namespace's epoch when this process opened it */
  char sub_channel[128];
  bool fetch_due; /* a wake-up came: fetch the inbox */
  bool doubt;     /* a call failed that the server may have applied: the
                     next heartbeat compares leases and waiters in full */
  _Atomic bool closed;
  bool ev_delivering;
  bool bg_running, bg_stop;
};

static inline struct fl_pool *fl_pool_of(cq_pool *pool) {
  return (struct fl_pool *)cq_backend_impl(pool);
}

/* A pool's handle for `url` and `opts`, checked, not yet connected (pool.c):
 * NULL with *rc (CQ_EINVAL: cq_fleet_error() says why; CQ_ENOMEM). Freed
 * with fl_pool_free(), which stops its thread and closes its connection. */
struct fl_pool *fl_pool_new(const char *url, const cq_fleet_opts *opts,
                            int *rc);
void fl_pool_free(struct fl_pool *fp);

/* The pool's clock: the configured one with manual timers, else cq_now(). */
int64_t fl_now(const struct fl_pool *fp);

/* Record `msg` as the calling thread's cq_fleet_error(). */
void fl_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Write this host's device pools in `msg` as the caller does: "gpu" for
 * "gpu@<this host>" (the names of other hosts' pools stay whole). */
void fl_msg_local(const struct fl_pool *fp, char *msg);

/* Whether c may appear in a resource or host name. */
static inline bool fl_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == '/';
}

void fl_msgf(char *buf, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Events: record one (mu held); deliver what is pending (nothing held). */
void fl_event(struct fl_pool *fp, cq_event_type type, const struct fl_grant *g,
              const char *resource, int64_t wait_ms);
void fl_events_deliver(struct fl_pool *fp);

/* Wake blocked callers, deliver events, run callbacks (nothing held). */
void fl_ctx_finish(struct fl_pool *fp, struct fl_ctx *c);

/*
 * Apply the outcomes of a reply, from index `from` on: each is "g <id>
 * <fence> <held...>" (granted) or "x <id> <status> <message>" (left).
 * Outcomes for attempts no longer waiting here (decided already, or of an
 * earlier session) are ignored. link.mu held; takes mu.
 */
void fl_apply_outcomes(struct fl_pool *fp, const redisReply *r, size_t from,
                       struct fl_ctx *ctx);
/* An outcome entry, "g <id> <fence> <held...>" (granted) or "x <id>
 * <status> <message>" (left), taken apart: false when `entry` is not one.
 * Every text from the server is input, checked before it is read. */
struct fl_entry {
  char kind; /* 'g' or 'x' */
  const char *id;
  size_t id_len;
  const char *rest; /* after the id and its space */
};
bool fl_entry_parse(const char *entry, struct fl_entry *out);

/* Apply one outcome entry. mu held. */
void fl_apply_outcome(struct fl_pool *fp, const char *entry,
                      struct fl_ctx *ctx);

/*
 * Run `script` and handle what every operation may meet: work owed by an
 * earlier script (settled here, then the operation is sent again), a
 * session the server no longer knows (a new one is opened; the operation
 * fails with CQ_ESYS when `session_bound`, else it is sent again), and
 * the outcomes the reply carries (applied into `ctx`). On 0 *out is the
 * reply with link.mu held (fl_call_done() after reading it).
 */
int fl_run(struct fl_pool *fp, enum fl_script script, struct fl_args *a,
           bool session_bound, redisReply **out, struct fl_ctx *ctx, char *err,
           size_t len);

/* Tests: the owed work settled so far, by every pool of the process. */
extern _Atomic uint64_t cq__fleet_settles;

/* Tests and the bench: new connections run the operations as scripts, as
 * on a server without functions. */
extern _Atomic bool cq__fleet_no_functions;

/* Settle the namespace's owed work and fetch the inbox (link.mu held). */
int fl_settle(struct fl_pool *fp, struct fl_ctx *ctx, char *err, size_t len);

/* Expire the waiting grants whose deadline is at or before `now` (only
 * callback waiters with `callbacks_only`): one abort script, all leave
 * and then one sweep, as the in-process pool expires. */
int fl_expire_due(struct fl_pool *fp, int64_t now, bool callbacks_only,
                  struct fl_ctx *ctx);

/* Sessions (session.c). */
int fl_session_open(struct fl_pool *fp, char *err, size_t len);
/* The session is lost: every lease is lost (CQ_EVENT_LOST each), every
 * waiter fails with CQ_EUNAVAILABLE, and the session is to be ended on
 * the server and replaced. Needs mu only, so that a stalled connection
 * cannot delay it past the local deadline. mu held. */
void fl_session_lost(struct fl_pool *fp, const char *why, struct fl_ctx *ctx);
/* Declare the session lost if its local deadline has passed (mu held). */
void fl_session_check(struct fl_pool *fp, struct fl_ctx *ctx);
/* A reply said that the namespace's quarantine has `left` ms to go (0:
 * none), as of `sent` (cq_now()): kept for the stats, and the next
 * heartbeat comes when it ends, to lift it. mu held. */
void fl_quarantine_seen(struct fl_pool *fp, int64_t sent, int64_t left);
/* Whether the session's local deadline has passed or it is lost. */
bool fl_session_dead(const struct fl_pool *fp);
/* A release that could not reach the server: sent again later (mu held).
 * False when out of memory (the session's end returns it then). */
bool fl_defer_release(struct fl_pool *fp, const struct fl_grant *g);

/* The same for a lease known by its id and its session's generation. */
bool fl_defer_release_id(struct fl_pool *fp, const char *id, uint32_t gen);
int fl_bg_start(struct fl_pool *fp);
void fl_bg_stop(struct fl_pool *fp);
/* Wake the background thread (a new deadline, a close). */
void fl_bg_kick(struct fl_pool *fp);

/* Tests (cq__fleet_late_reply()): the next reply of a heartbeat is applied
 * only once the session's local deadline has passed, that of an acquire
 * only once another thread has found the session lost, as a reply that
 * came late or a thread descheduled before applying it would; and a
 * callback acquire granted at once goes on to its callback only once
 * another thread has found the session lost. */
#define FL_LATE_HEARTBEAT 1u
#define FL_LATE_ACQUIRE 2u
#define FL_LATE_GRANTED 4u
/* An async release (CQ_FLEET_ASYNC_RELEASE) sent: the releasing thread goes
 * on only once the background thread has made a heartbeat since, as a
 * thread descheduled right after sending would. */
#define FL_LATE_RELEASE 8u
/* Hold back the reply in hand if `which` is set (link.mu held, mu not;
 * neither for FL_LATE_GRANTED); bounded. */
void fl_late_reply(struct fl_pool *fp, uint32_t which);

/* The waiting table (mu held). */
int fl_table_put(struct fl_pool *fp, struct fl_grant *g);
struct fl_grant *fl_table_get(struct fl_pool *fp, uint64_t op);
void fl_table_del(struct fl_pool *fp, struct fl_grant *g);
/* The earliest deadline of a waiting grant, or CQ_NEVER. */
int64_t fl_table_first_deadline(struct fl_pool *fp);

void fl_held_push(struct fl_pool *fp, struct fl_grant *g);
void fl_held_unlink(struct fl_pool *fp, struct fl_grant *g);
/* A held grant's lease is lost: it holds nothing, and its holder is told
 * once (CQ_EVENT_LOST). mu held. */
void fl_grant_lost(struct fl_pool *fp, struct fl_grant *g, const char *why);

/* Declarations (pool.c): remember one that the server accepted; the
 * arguments of the declare script for one. */
void fl_decl_keep(struct fl_pool *fp, const struct fl_decl *d);
void fl_decl_args(const struct fl_pool *fp, const struct fl_decl *d,
                  struct fl_args *a, char *full, size_t len);
void fl_decls_free(struct fl_pool *fp);

/* Decide a waiting grant (mu held): granted from `entry` fields, or left
 * with `status` and `msg`. Queues its notification into ctx. */
void fl_grant_decide(struct fl_pool *fp, struct fl_grant *g, int status,
                     const char *payload, const char *msg, struct fl_ctx *ctx);

/* Read the outcome entry `entry` of an acquire granted at once into g: 0,
 * or -1 when it is not g's grant, well formed (mu held). */
int fl_grant_read(struct fl_pool *fp, struct fl_grant *g, const char *entry);

/* Fill a granted grant's holdings from "held[:d,d] ..." (mu held). */
int fl_grant_fill(struct fl_pool *fp, struct fl_grant *g, const char *payload);

/* Names (request.c). */
int fl_names_resolve(struct fl_pool *fp, const char *name, uint32_t *index,
                     char *msg);
/* Resolve again the names of `r` that were resolved before the namespace
 * was last recreated (their uids are the old state's). Returns how many
 * changed. */
int fl_names_refresh(struct fl_pool *fp, const struct fl_req *r);
const struct fl_name *fl_names_at(struct fl_pool *fp, uint32_t index);
void fl_names_free(struct fl_pool *fp);
/* Whether `name` as a caller writes it ("gpu", "gpu@hostA") is the
 * canonical `canon`. */
bool fl_name_is(const struct fl_pool *fp, const char *name, const char *canon);

/* Add the items of a request as script arguments (mu taken). */
void fl_args_items(struct fl_pool *fp, struct fl_args *a,
                   const struct fl_req *r);

/* Operations, for the backend table (pool.c, grant.c). */
extern const cq_backend_ops fl_ops;

int fl_op_close(cq_pool *pool);
int fl_op_destroy(cq_pool *pool);
int fl_op_expire(cq_pool *pool, int64_t *next_deadline_ms);
int fl_op_stats_get(cq_pool *pool, cq_pool_stats *out);
int fl_op_budget_add(cq_pool *pool, const char *name, int64_t capacity,
                     int kind, unsigned flags);
int fl_op_set_capacity(cq_pool *pool, const char *name, int64_t capacity,
                       int kind);
int fl_op_resource_remove(cq_pool *pool, const char *name);
int fl_op_resource_stats_get(cq_pool *pool, const char *name,
                             cq_resource_stats *out);
int fl_op_pool_snapshot(cq_pool *pool, cq_resource_stats *out, size_t cap,
                        size_t *count);
int fl_op_devices_add(cq_pool *pool, const char *name, size_t count,
                      const char *const *ids);
int fl_op_device_stats_get(cq_pool *pool, const char *name, uint32_t index,
                           cq_device_stats *out);
int fl_op_device_set_online(cq_pool *pool, const char *name, uint32_t index,
                            int online);
int fl_op_req_init(cq_req *req, cq_pool *pool);
int fl_op_req_add(cq_req *req, const char *resource, int64_t amount, int mode);
int fl_op_req_set_hold_limit(cq_req *req, int64_t limit_ms);
size_t fl_op_req_count(const cq_req *req);
int fl_op_grant_try(cq_pool *pool, cq_grant *grant, const cq_req *req);
int fl_op_grant_acquire(cq_pool *pool, cq_grant *grant, const cq_req *req,
                        int64_t deadline_ms);
int fl_op_grant_submit(cq_pool *pool, cq_grant *grant, const cq_req *req,
                       int64_t deadline_ms, cq_grant_cb cb);
int fl_op_grant_abort(cq_pool *pool, cq_grant *grant, int status);
int fl_op_grant_release(cq_pool *pool, cq_grant *grant);
int fl_op_grant_release_part(cq_pool *pool, cq_grant *grant,
                             const char *resource, int64_t amount);
int fl_op_grant_release_device(cq_pool *pool, cq_grant *grant,
                               const char *resource, uint32_t index,
                               int64_t milli);
size_t fl_op_grant_devices(const cq_grant *grant, const char *resource,
                           uint32_t *indices, size_t cap);
int fl_op_grant_cuda_visible(const cq_grant *grant, const char *resource,
                             char *buf, size_t len);
int64_t fl_op_grant_held(const cq_grant *grant, const char *resource);
int fl_op_grant_is_held(const cq_grant *grant);
int fl_op_grant_is_idle(const cq_grant *grant);
int fl_op_req_headroom(cq_pool *pool, const cq_req *req, int64_t *copies);
int fl_op_tasks_validate(cq_pool *pool, const cq_task *tasks, size_t n,
                         cq_problem_fn fn, void *arg);
int fl_op_pool_room(cq_pool *pool, const char *job_class, cq_room *out);

#endif /* CRONOQ_FLEET_H */
