/*
 * The waiting policy's interface: FIFO with reservation (queue.c, with its
 * clock, the shadow time of backfill.c, and the lock-free clause of
 * budget.c). The rule itself is stated at the top of queue.c.
 *
 * The API (grant.c, pool.c, resource.c, device.c, host.c, stats.c) asks the
 * policy through these entry points and nothing else. Each is one event
 * (an attempt arrives, a waiter leaves, units come back, a capacity
 * changes, time passes, the pool closes) and finishes its own work: the
 * grants it makes and the outcomes it decides go to the caller's outbox,
 * which the caller flushes once the lock is dropped. The one exception is
 * cq__policy_enqueue(): what a new waiter's claims leave to walk is walked
 * by the next event's sweep (it can grant nobody older than that waiter).
 *
 * All with the pool lock held, except the lock-free clause.
 */
#ifndef CRONOQ_POLICY_H
#define CRONOQ_POLICY_H

#include "grant.h"
#include "outbox.h"

/* The pool's part. */
struct cq__queue {
  uint64_t next_seq;
  struct cq__grant *head; /* every waiter, oldest first */
  struct cq__grant *tail;
  uint64_t n_waiters;
  uint64_t n_held; /* grants held that were made or adopted under the lock;
                      lock-free ones hold units, which the destroy check
                      sees */
  struct cq__grant *holders; /* those n_held grants, linked through qnext */
  uint64_t waited_grants;    /* grants to requests that had waited */
  uint64_t wakeups;          /* blocked threads signalled */
  struct cq__res *dirty;     /* resources freed since the last sweep */
  cq__rbtree deadlines;      /* waiters with a finite deadline, sleepers too */

  /* Bounded barging (queue.c): blocking acquires asleep in their window,
   * by arrival, linked through qprev/qnext. They claim nothing. */
  int64_t barge_ms; /* the window; 0: none, every waiter claims at once */
  struct cq__grant *sleepers;
  struct cq__grant *sleepers_tail;
  uint64_t n_sleepers;
  struct cq__grant *nudged; /* the one sleeper woken to try again */
  bool nudge;               /* units came back that a sleeper may fit in */
  uint64_t converted;       /* sleepers that outslept the window */
  struct cq__grant *self;   /* the waiter whose own thread is in the policy */
};

/* The pool's part for backfill (backfill.c): hold limits and the head's
 * shadow time. */
struct cq__bf {
  cq__rbtree limits;   /* holders with a limit not yet passed, by its end */
  uint64_t next_gseq;  /* grant order */
  uint64_t overdue;    /* grants that outlived their limit */
  uint64_t backfilled; /* grants made by backfill */
  uint64_t late_heads; /* heads granted after their shadow time */
  uint64_t head_seq;   /* the head waiter `shadow` is for; 0: none yet */
  int64_t
      shadow; /* its sticky shadow time (S in backfill.c); CQ_NEVER: unknown */
  bool dirty; /* shadow and the projection need computing */
  uint64_t epoch;    /* next_gseq when they were computed */
  uint64_t stamp;    /* marks the head's resources (cq__res.bf_mark) */
  bool kick;         /* waiters may have become backfillable */
  size_t candidates; /* waiters with a hold limit */
};

/* ------------------------------------------------------------------------ */
/* Attempts                                                                  */
/* ------------------------------------------------------------------------ */

/* Set up the policy's parts of a new pool, with a barging window of
 * `barge_ms` for blocking acquires (0: none). */
void cq__policy_init(cq_pool *p, int64_t barge_ms);
/* Bind a fresh attempt of `req` to g and give it the next arrival. */
void cq__policy_bind(cq_pool *p, struct cq__grant *g,
                     const struct cq__req *req);
/* A new arrival: granted now, normally or by backfill (true), or left
 * ungranted (false). A try's whole answer, and a blocking or callback
 * acquire's first look. Sleepers whose window has passed claim their
 * place first, and may be granted then: their outcomes are in `o`. */
bool cq__policy_arrive(cq_pool *p, struct cq__grant *g, struct cq__outbox *o);
/* The arrival did not fit: it waits with `deadline_ms` (CQ_NEVER: none),
 * claiming what it lacks. It may be granted at once, when a lock-free
 * release raced its arrival; then its outcome is in `o`. */
void cq__policy_enqueue(cq_pool *p, struct cq__grant *g, int64_t deadline_ms,
                        struct cq__outbox *o);
/* The arrival, a blocking acquire, did not fit on a pool with a barging
 * window: it sleeps without claiming anything, so that running threads may
 * take what comes free, and one release at a time wakes one sleeper that
 * fits to try again. Its window ends at arrival + T: from then on it waits
 * as cq__policy_enqueue() has it, in its place by arrival, made so by the
 * first entry point that can grant anything (its own thread's, an
 * arrival's, a release's, the expiry's), and lock-free acquires stop at
 * its end (cq_pool.fast_until). It may be granted at once, when a release
 * raced its arrival; then its outcome is in `o`. */
void cq__policy_sleep(cq_pool *p, struct cq__grant *g, int64_t deadline_ms,
                      struct cq__outbox *o);
/* The thread of waiting g woke (nudged, or at the end of its window):
 * asleep, g tries again as a new arrival would, or once its window has
 * passed, claims its place (with every other sleeper past its own). */
void cq__policy_woken(cq_pool *p, struct cq__grant *g, struct cq__outbox *o);
/* Whether waiting g is asleep in its window, and when the window ends. */
bool cq__policy_asleep(const struct cq__grant *g, int64_t *until);
/* A waiter leaves with `status` (CQ_ECANCELED, CQ_ETIMEDOUT, CQ_ECLOSED):
 * it is told, and whoever now fits is granted. */
void cq__policy_leave(cq_pool *p, struct cq__grant *g, int status,
                      struct cq__outbox *o);

/* ------------------------------------------------------------------------ */
/* Units coming back                                                         */
/* ------------------------------------------------------------------------ */

/* A held grant gives back everything (a release under the lock). */
void cq__policy_release(cq_pool *p, struct cq__grant *g, struct cq__outbox *o);
/* A held grant gives back `amount` units of budget item i early. */
void cq__policy_give_back(cq_pool *p, struct cq__grant *g, unsigned i,
                          int64_t amount, struct cq__outbox *o);
/* A held grant gives back `milli` thousandths of device `index` of device
 * item i early: part of its fraction, or one whole device. */
void cq__policy_give_back_device(cq_pool *p, struct cq__grant *g, unsigned i,
                                 uint32_t index, int64_t milli,
                                 struct cq__outbox *o);
/* A lock-free release found one of its budgets contended, or named by a
 * sleeper: the waiters blocked there are looked at again, and a sleeper
 * may be woken. */
void cq__policy_fast_released(cq_pool *p, struct cq__grant *g,
                              struct cq__outbox *o);
/* A lock-free attempt gave back what it had taken: the counts it left to
 * take off (bit i: item i, see cq__budget_fast_take()), and when
 * `contended`, units went back to a contended budget. */
void cq__policy_fast_failed(cq_pool *p, const struct cq__req *req,
                            uint32_t uncounted, bool contended,
                            struct cq__outbox *o);

/* ------------------------------------------------------------------------ */
/* Capacities, time, closing                                                 */
/* ------------------------------------------------------------------------ */

/* The capacity of r changed (a budget or class), or one of its devices
 * went online or offline; `tighter` when something shrank. Waiters that
 * can now never fit fail first, then whoever fits is granted. */
void cq__policy_capacity_changed(cq_pool *p, struct cq__res *r, bool tighter,
                                 struct cq__outbox *o);
/* Time is `now`: hold limits that ended go overdue, waiters whose deadline
 * passed leave, sleepers whose window passed claim their place, and
 * whoever then fits is granted. */
void cq__policy_expire(cq_pool *p, int64_t now, struct cq__outbox *o);
/* The earliest waiter deadline or hold-limit end still pending (on a pool
 * with manual timers also the end of a sleeper's window), or CQ_NEVER. */
int64_t cq__policy_next_deadline(const cq_pool *p);
/* The pool closes: every waiter leaves with CQ_ECLOSED. */
void cq__policy_close(cq_pool *p, struct cq__outbox *o);

/* ------------------------------------------------------------------------ */
/* Questions                                                                 */
/* ------------------------------------------------------------------------ */

/* Units of budget-like r open to a new request: free minus withheld. */
int64_t cq__policy_open(const struct cq__res *r);
/* What r withholds for its claimant: units of a budget or class (given its
 * usage word), free thousandths on the devices reserved of a device pool. */
int64_t cq__policy_withheld(struct cq__res *r, uint64_t word);
/* The devices of device pool r that a new request may not use, every
 * claimer's reservation: a stamp for cq__dev_copies(), cq__dev_room() and
 * snapshots (0 when none). */
uint64_t cq__policy_reservation(struct cq__res *r);

/* ------------------------------------------------------------------------ */
/* The lock-free clause (budget.c), without the lock                         */
/* ------------------------------------------------------------------------ */

/* Grant a budget-only request without the lock: 1 granted; 0 not now (take
 * the lock and decide there); -1 not now, and a transient hold went back to
 * a contended budget. Then cq__policy_fast_failed() must follow, with
 * `uncounted`, under the lock. */
static inline int cq__policy_fast_acquire(struct cq__grant *g,
                                          const struct cq__req *req,
                                          uint32_t *uncounted) {
  return cq__budget_fast_take(g, req, uncounted);
}
/* Release a lock-free grant without the lock; true when a contended budget,
 * or one a sleeper names, got units back: then cq__policy_fast_released()
 * must follow. */
static inline bool cq__policy_fast_release(struct cq__grant *g) {
  return cq__budget_fast_give(g);
}

/* ------------------------------------------------------------------------ */
/* The invariant checker                                                     */
/* ------------------------------------------------------------------------ */

/* Check every invariant of the policy's state at rest (see queue.c); abort
 * on the first that is broken. O(waiters + holders + devices), so the API
 * runs it after each locked operation only when CQ_DEBUG >= 2. `alone`: no
 * other thread uses the pool, so that lock-free acquires and releases
 * cannot change a budget while it looks (then it also checks that no
 * waiter is covered by a budget it is blocked on). */
void cq__policy_check(cq_pool *p, bool alone);

#if CQ_DEBUG >= 2
#define CQ__POLICY_CHECK(p) cq__policy_check(p, false)
#else
#define CQ__POLICY_CHECK(p) ((void)0)
#endif

#endif /* CRONOQ_POLICY_H */
