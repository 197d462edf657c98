/*
 * libcronoq's fleet pool: the same pool, shared by every process that opens
 * the same namespace on a Redis server.
 *
 * A pool kept inside one process over-subscribes a resource as soon as two
 * processes use it: two workers on one 8-GPU host each see 8 GPUs, two job
 * runners on two hosts each see the whole licence count. A fleet pool keeps
 * the pool's state in Redis instead. It is opened with cq_fleet_open() and
 * then used through <cronoq/cronoq.h> like any pool: budgets, classes, lone
 * budgets, device pools, requests and specs, try / blocking / callback
 * acquires, cancel, release and partial release, stats, metrics, the event
 * hook and the libuv adapter. The policy is docs/POLICY.md's, exactly: every
 * operation is one Lua script that decides on the namespace's whole state,
 * with the in-process pool's fixed-point amounts, and a differential test
 * holds the two implementations to the same outcomes.
 *
 * The model in one paragraph. A *namespace* is one pool; every process
 * that opens it has a *session*, kept alive by heartbeats from a thread of
 * the library, with a TTL. Grants are *leases* of the session and waiters
 * belong to it too: when a process dies its units come back within TTL plus
 * one heartbeat interval (any live process's heartbeat reclaims them).
 * Device pools are *per host*: a process registers its host's devices
 * (cq_devices_add(), or `gpu=auto` in a spec) as "<name>@<host>", and a
 * request names them next to the namespace's budgets, all granted in one
 * decision. A name without a host, "gpu", means this host's "gpu@<host>"
 * wherever a resource is named: in specs, requests, stats and grants.
 *
 * What differs from an in-process pool, call by call (everything not
 * listed behaves as <cronoq/cronoq.h> says):
 * - cq_pool_create() flags: CQ_POOL_STAGED_CLAIMS is the namespace's and
 *   must match what it was created with; CQ_POOL_MANUAL_TIMERS and a clock
 *   are this process's own (its deadlines). CQ_POOL_BACKFILL is not offered
 *   on fleet pools in this version: cq_fleet_open() returns CQ_EINVAL.
 *   Fleet pools have no barging window: a blocking acquire claims its place
 *   at once, as on an in-process pool with CQ_POOL_STRICT_ORDER, which is
 *   accepted and changes nothing.
 * - Declarations (cq_budget_add(), cq_budget_add_ex(), cq_class_add(),
 *   cq_devices_add()) of a resource the namespace has return 0 and change
 *   nothing when what it is matches (its kind, a budget's lone-request
 *   allowance, a device pool's devices), whatever capacity they give: the
 *   namespace keeps its live capacity, changed only by
 *   cq_budget_set_capacity() and cq_class_set_max(). A conflicting one
 *   returns CQ_EEXIST and cq_fleet_error() names both. cq_devices_add()
 *   registers this host's pool: a name with a '@' is refused with
 *   CQ_EINVAL. cq_pool_add_spec() declares each item the same way, so every
 *   process may run the same spec (`gpu=auto,licence=2`): items of
 *   resources the namespace has are accepted, a conflicting one fails with
 *   CQ_EEXIST and its `err` names both, as cq_fleet_error() does, and the
 *   items declared before it stay (another process may use them already).
 * - cq_budget_set_capacity(), cq_class_set_max(), cq_device_set_online()
 *   and cq_resource_remove() change the namespace, for every process.
 * - cq_req_set_hold_limit() is accepted and kept with the lease, but a
 *   fleet pool neither enforces the limit nor raises CQ_EVENT_OVERDUE.
 * - Deadlines are kept by the process that waits, on its own clock: when
 *   one passes the process takes its waiter out. A grant that won the race
 *   is returned, as in-process.
 * - cq_pool_close() closes this process's handle: its waiters fail with
 *   CQ_ECLOSED and its later acquires too; other processes go on.
 *   cq_pool_destroy() (refused with CQ_EINUSE while this process holds or
 *   waits) ends the session.
 * - A lease lost is reported once through the event hook as
 *   CQ_EVENT_LOST (`data` is the grant's), by the process's own deadline:
 *   the send time of its last successful heartbeat plus the TTL, less a
 *   fifth of it, on the monotonic clock, which always comes before the
 *   server's. Leases are lost when the session expired (this process was
 *   stopped, or cut off from the server, longer than its TTL), when the
 *   server lost the namespace's state, and when a failover to a replica
 *   lost them (a heartbeat finds a lease missing). The grant is then no
 *   longer held (cq_grant_is_held() is 0, cq_grant_release() returns
 *   CQ_ESTATE), and the attempts still waiting fail with CQ_EUNAVAILABLE.
 *   A new session is opened for what comes next. A process that is
 *   stopped cannot be told while it is stopped: cq_grant_is_held() turns 0
 *   at the deadline, and the event comes as it resumes. Once past the
 *   deadline a grant stays lost, even if a heartbeat's reply arrives
 *   after it; an acquire whose session is lost before its reply is
 *   applied fails with CQ_EUNAVAILABLE and holds nothing. A grant lost
 *   stays the pool's until it is told (CQ_EVENT_LOST) or released
 *   (CQ_ESTATE): do either before cq_grant_init() makes it new again.
 * - When the server cannot be reached in time, calls fail closed with
 *   CQ_EUNAVAILABLE and cq_fleet_error() (or cq_grant_error()) says why:
 *   nothing is granted. A blocking acquire gives up at its deadline
 *   (CQ_ETIMEDOUT), a try after the heartbeat interval at most (and at
 *   once while the library waits to reconnect), other calls after the
 *   pool's timeout. An attempt whose reply never came may have been
 *   applied by the server: the next heartbeat finds its lease or waiter
 *   and ends it. A release that cannot reach the server returns 0: the
 *   grant holds nothing here, and the units come back on the server with
 *   the next heartbeat that gets through (or at the session's end), once.
 *   A partial release that cannot reach the server fails with
 *   CQ_EUNAVAILABLE, and called again it is applied once.
 * - A server out of memory (maxmemory with noeviction) refuses what would
 *   write: acquires and declarations fail with CQ_ENOMEM, the message
 *   saying it is the server's memory; releases, heartbeats and cancels
 *   still run (their scripts are allowed to), so that holders keep their
 *   leases and units come back.
 * - A namespace the server has to create, the first time or again after it
 *   lost the state (a restart without persistence, a flush), is
 *   quarantined for its longest TTL (cq_fleet_opts.max_ttl_ms), whoever
 *   creates it: no holder of a lost state can be told while it is stopped,
 *   and each believes it holds until its own deadline, at most that long
 *   after the loss. Meanwhile a try fails with CQ_EBUSY (its message says
 *   how long is left) and acquires wait, in arrival order, for its end.
 *   Every process sends its declarations again, after which requests
 *   built before work as they did. CQ_FLEET_NEW_NAMESPACE skips the
 *   quarantine for a namespace that never had a holder.
 * - Fencing tokens are strictly increasing across losses of state too: a
 *   namespace's counter starts from the server's clock in microseconds
 *   when it is created, above every token of a state that was lost (which
 *   made fewer grants than microseconds). This assumes that the server's
 *   clock does not go back by more than a quarantine between two
 *   creations.
 * - Every call of a session carries a secret that only its process knows:
 *   another client of the namespace cannot release, cancel, extend or end
 *   its leases with the library's calls (CQ_EACCES). A namespace is still
 *   one trust domain: its clients can write its keys.
 * - A server that refuses this process's user (a wrong or missing
 *   password, an ACL that lacks a command the library needs) answers
 *   CQ_EACCES, never CQ_EUNAVAILABLE; so does a server whose library of
 *   functions is not this library's code (see cq_fleet_load()).
 * - The event hook sees this process's attempts: granted, parked,
 *   released, timed out, cancelled, closed, never satisfiable and lost.
 *   CQ_EVENT_RESERVED and CQ_EVENT_OVERDUE are not raised.
 * - cq_pool_stats_get(): `waiting` and `waited_grants` are the namespace's,
 *   `wakeups` and `events_dropped` this process's; `overdue`, `backfilled`
 *   and `late_heads` are 0. cq_resource_stats and cq_device_stats are the
 *   namespace's. cq_pool_room() counts the namespace's budgets and this
 *   host's device pools.
 * - Allocator hooks do not apply: the library and its Redis client use
 *   malloc().
 *
 * Thread-safety is as in <cronoq/cronoq.h>. Every call that reaches the
 * server may block for up to the pool's timeout; callbacks run on the
 * calling thread when the outcome is known at once, else on the pool's
 * background thread, with no library lock held.
 *
 * Copyright (c) 2026 the libcronoq authors. MIT licence, see LICENSE.
 */
#ifndef CRONOQ_CRONOQ_FLEET_H
#define CRONOQ_CRONOQ_FLEET_H

#include <cronoq/cronoq.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fleet options (cq_fleet_opts.fleet_flags). */
enum cq_fleet_flags {
  /*
   * Keep an audit log in the namespace (the list "cq:{<namespace>}:audit"):
   * every grant with its fencing token and holdings, every release, every
   * session ended. For tests and operators; it grows without bound. Set
   * when the namespace is created; later opens do not change it.
   */
  CQ_FLEET_AUDIT = 1u << 0,
  /*
   * Releases that do not wait for the server's reply, while this process
   * has no waiter on the pool: cq_grant_release() returns once the release
   * is written to the connection, and the pool's next call reads its reply
   * (a lost reply sends the release again, applied once). This saves a
   * round trip per grant. The server runs the release before any later
   * call of this pool, but a call made meanwhile on another connection (a
   * process told of the release at once) may still find the units held:
   * without the flag, a release has been applied when it returns.
   */
  CQ_FLEET_ASYNC_RELEASE = 1u << 1,
  /*
   * The namespace is new: no process has ever held in it on this server,
   * so that, if this call creates it, it grants at once instead of after
   * its quarantine (see cq_fleet_opts.max_ttl_ms). For tests and for a
   * namespace named afresh for each deployment; never in a program that
   * may be restarted against a server that lost its state, where an
   * earlier run's holders may still hold. Ignored when the namespace
   * exists, and by a process that knew an earlier state of it.
   */
  CQ_FLEET_NEW_NAMESPACE = 1u << 2
};

/* Options of cq_fleet_open(). Zero means default for every field. */
typedef struct cq_fleet_opts {
  unsigned flags;    /* enum cq_pool_flags: CQ_POOL_STAGED_CLAIMS (must match
                        the namespace), CQ_POOL_MANUAL_TIMERS,
                        CQ_POOL_STRICT_ORDER (no effect) */
  cq_clock_fn clock; /* with CQ_POOL_MANUAL_TIMERS: the clock of deadlines */
  void *clock_arg;
  void *data;           /* see cq_pool_data() */
  cq_event_fn on_event; /* this process's events */
  void *event_arg;
  uint32_t event_buffer; /* events held for the hook; 0: 4096 */
  unsigned fleet_flags;  /* enum cq_fleet_flags */
  const char *host;      /* this host's name in device pool names; NULL:
                            $CRONOQ_HOST, else gethostname() up to the
                            first '.'. Letters, digits, "-_." */
  int64_t ttl_ms;        /* session TTL; 0: 10000 */
  int64_t heartbeat_ms;  /* 0: 3000, and at most a third of the TTL */
  int64_t timeout_ms;    /* for one call to reach the server, retries
                            included; 0: 5000 */
  uint32_t script_steps; /* work (Redis calls) one script does before it
                            leaves the rest to the next; 0: 4096 */
  const char *username;  /* AUTH, when the URL gives none; NULL: none */
  const char *password;
  /* The longest TTL any process of the namespace uses: part of the
   * namespace, the same in every process (an open that gives another is
   * refused), and at least ttl_ms. A namespace the server has to create
   * (the first time, or again after losing its state) grants nothing for
   * this long, so that every holder of a lost state has passed its
   * deadline first. 0: 10000. */
  int64_t max_ttl_ms;
  uint64_t reserved_[7]; /* must be zero */
} cq_fleet_opts;

#define CQ_FLEET_OPTS_INIT CQ_ZERO_INIT_

/*
 * Open namespace `ns` (1 to 64 bytes of letters, digits and "_-.") on the
 * Redis server at `url` as a pool: `redis://[user[:password]@]host[:port][/db]`
 * (port 6379 by default) or `unix://[user[:password]@]/path/to/redis.sock
 * [?db=N]`; a URL's user without a password logs in with an empty one,
 * never as the default user. The namespace is created on first use,
 * quarantined (see above) unless CQ_FLEET_NEW_NAMESPACE says it is new. The
 * call connects, loads the library (or the scripts), opens this process's
 * session and starts the pool's background thread. The server needs
 * `maxmemory-policy noeviction` (docs/OPERATIONS.md says why, and which ACL a
 * client needs). On success *out is a pool for every call of <cronoq/cronoq.h>;
 * destroy it with cq_pool_destroy(). `opts` may be NULL. Thread-safe. Returns
 * 0, CQ_EINVAL (a bad URL, namespace, host or option, including
 * CQ_POOL_BACKFILL; or a namespace of another schema or claims option:
 * cq_fleet_error() says which, and nothing changes on the server),
 * CQ_EUNAVAILABLE (the server cannot be reached within the timeout:
 * cq_fleet_error() names the URL and says why), CQ_EACCES (the server
 * refused the user or its password, the ACL lacks a command the library
 * needs, no library this user may run is loaded, or the server's library
 * is not this library's code: the message says which, and what an
 * operator runs), CQ_ESYS (a thread could not be started) or CQ_ENOMEM
 * (here, or the server's: the message says).
 * It also refuses a server whose maxmemory-policy is not noeviction
 * (CQ_EINVAL); where the user may not read it, it opens with
 * cq_fleet_stats.settings_unchecked set and a CQ_EVENT_WARNING event.
 */
CQ_EXPORT int cq_fleet_open(cq_pool **out, const char *url, const char *ns,
                            const cq_fleet_opts *opts);

/* ------------------------------------------------------------------------ */
/* The operator's step: the library of functions                            */
/* ------------------------------------------------------------------------ */

/* Options of cq_fleet_load(). */
enum cq_fleet_load_flags {
  /* Load over a library of the same name whose code is not this
   * library's (FUNCTION LOAD REPLACE). */
  CQ_FLEET_LOAD_REPLACE = 1u << 0
};

/*
 * The name of this library's code on a server: "cronoq_<version>", the
 * version being the start of the SHA1 of its Lua sources, so that pools of
 * two versions can share a server. Thread-safe.
 */
CQ_EXPORT const char *cq_fleet_library(void);

/*
 * The operator's step, once per server (and again after the server lost
 * its functions: a restart without persistence, FUNCTION FLUSH): connect to
 * `url` as an operator's user and load this library's functions, which
 * every fleet pool then runs with FCALL. Application users need no right
 * to change the server's functions (docs/OPERATIONS.md's ACL gives them none):
 * loading code that every namespace runs is the operator's. A pool checks,
 * before it runs anything, that the server's library of this name is this
 * library's code, byte for byte, and refuses it otherwise.
 *
 * It also checks the server's maxmemory-policy, which must be noeviction.
 * `opts` may be NULL: its username, password and timeout_ms are used.
 * cq_fleet_error() says what happened (also on success). The `cronoq load`
 * command calls this. Thread-safe; blocks for up to the timeout.
 * Returns 0 (loaded, or already there with this library's code), CQ_EEXIST
 * (a library of this name with other code is there: load again with
 * CQ_FLEET_LOAD_REPLACE), CQ_EACCES (the server refused the user, or its
 * FUNCTION LOAD), CQ_EINVAL (a bad URL or flag, or a maxmemory-policy that
 * evicts), CQ_EUNAVAILABLE (not reached) or CQ_ENOMEM.
 */
CQ_EXPORT int cq_fleet_load(const char *url, const cq_fleet_opts *opts,
                            unsigned flags);

/*
 * The ACL rules a Redis user of namespace `ns` needs, and nothing more,
 * written into `buf`: its keys and channels, FCALL of the library, reads
 * and writes of its own keys, its wake-ups, and no command that changes the
 * server's functions or configuration. For `ACL SETUSER <user> on
 * ><password> <rules>`; a database other than 0 needs +select too.
 * `cronoq acl` prints it. Thread-safe.
 * Returns 0, CQ_EINVAL (NULL, or a bad namespace) or CQ_ERANGE (`len` is
 * too small; 512 bytes are enough).
 */
CQ_EXPORT int cq_fleet_acl(const char *ns, char *buf, size_t len);

/* Whether `pool` is a fleet pool (1) or not (0). Thread-safe. */
CQ_EXPORT int cq_fleet_is_fleet(const cq_pool *pool);

/* This host's name as the fleet pool writes it into device pool names
 * ("gpu@<host>"); NULL for a pool that is not a fleet pool. */
CQ_EXPORT const char *cq_fleet_host(const cq_pool *pool);

/*
 * The fencing token of a held grant of a fleet pool: a number that grows
 * with every grant in the namespace, across losses of the server's state
 * too (see above), so that a downstream system can refuse a holder older
 * than the last one it saw. Tokens stay below 2^53. Returns 0, CQ_ESTATE (not
 * held) or CQ_EINVAL (NULL, or not a fleet pool's grant).
 */
CQ_EXPORT int cq_fleet_grant_fence(const cq_grant *grant, uint64_t *fence);

/* What this process's pool met, for monitoring the failures above. */
typedef struct cq_fleet_stats {
  uint64_t sessions;     /* sessions opened: 1, and one more per loss */
  uint64_t leases_lost;  /* CQ_EVENT_LOST raised */
  uint64_t state_losses; /* times the namespace was found recreated: the
                            server had lost its state */
  uint64_t rollbacks;    /* failovers detected: a heartbeat found one of
                            this process's leases missing, or the
                            namespace's fencing counter behind one this
                            process saw */
  uint64_t reconnects;   /* connections made again after one broke */
  uint64_t unavailable;  /* calls that failed with CQ_EUNAVAILABLE */
  uint64_t deferred;     /* releases that could not reach the server and
                            were applied later by a heartbeat */
  uint64_t reconciled;   /* leases and waiters the server had for this
                            process that it did not know (calls whose reply
                            was lost), ended by a heartbeat */
  uint64_t max_fence;    /* the highest fencing token this process saw */
  int64_t quarantine_ms; /* the namespace's quarantine left, as last seen */
  /* The local deadline (cq_now()) that the last session lost here had
   * when it was lost; 0 before any. */
  int64_t lost_deadline_ms;
  /* 1 when the server's maxmemory-policy could not be checked at open (the
   * ACL lets this user read it neither with CONFIG GET nor with INFO): an
   * operator checks it (cronoq load does); CQ_EVENT_WARNING said so. */
  uint64_t settings_unchecked;
  uint64_t reserved_[4];
} cq_fleet_stats;

#define CQ_FLEET_STATS_INIT CQ_ZERO_INIT_

/*
 * This process's figures for `pool` (no round trip). The counters are in
 * cq_pool_write_metrics()'s text too, as cronoq_fleet_<name>_total
 * (cronoq_fleet_leases_lost_total, ...). Returns 0 or CQ_EINVAL (NULL, or
 * not a fleet pool). Thread-safe.
 */
CQ_EXPORT int cq_fleet_stats_get(cq_pool *pool, cq_fleet_stats *out);

/*
 * The detail of the calling thread's last failed call on a fleet pool,
 * such as `"licence" has capacity 3 in namespace "prod", not 5`; "" if
 * none. Valid until the thread's next call. Thread-safe (per thread).
 */
CQ_EXPORT const char *cq_fleet_error(void);

#ifdef __cplusplus
}
#endif

#endif /* CRONOQ_CRONOQ_FLEET_H */
