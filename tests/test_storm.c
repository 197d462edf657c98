/*
 * Concurrency stress on the core API, the concurrency storms of the reliability
 * suite. Each storm runs many threads against one pool and checks, while it
 * runs and at the end, what must hold whatever the interleaving:
 *
 * - the mixed storm: random multi-resource requests (budgets, classes,
 *   fractions and whole devices) through every acquire style (try, blocking
 *   with short deadlines, callbacks with short or no deadlines), cancels
 *   from other threads; the holders' own tallies never exceed a capacity,
 *   a checker thread reads the pool's figures all along, and at rest
 *   nothing is held, withheld or waiting and every count balances. It runs
 *   on a default pool, with staged claims, with backfill and hold limits,
 *   with an event hook (whose events must account for every outcome), and
 *   with capacities shrinking and growing and devices going offline;
 * - the timeout storm: threads loop over acquires of a millisecond or less
 *   on a budget with nothing free while long waiters queue among them; when
 *   units come back (capacity grows, or the holder releases) every long
 *   waiter is granted: no wake-up is lost;
 * - the cancel storm: acquires ended by a grant (then released on another
 *   thread) or by a cancel or abort from other threads: every callback runs
 *   exactly once, every winning cancel is one cancelled attempt, nothing
 *   leaks;
 * - the handoff storm: a capacity-1 resource (budget, class, whole device,
 *   budget with a hold limit) passed between threads as a mutex; an atomic
 *   owner flag and a plain counter catch any overlap, the counter also
 *   under ThreadSanitizer (a handoff must order the holders);
 * - a cancel racing the start of an attempt: the reproducer of a race the
 *   storms found, and fixed (see the test);
 * - the harvest storm: lock-free attempts that take a budget and give it
 *   back, while the count of lock-free grants is harvested under the lock:
 *   the count never touches the budget's state, and every grant is counted
 *   once.
 *
 * The sizes are at CRONOQ_STRESS_SCALE=1 on a native build; see
 * support/storm.h for how they shrink on slow builds. Nothing asserts a
 * duration.
 */
#include "support/storm.h"

#include "cq_internal.h" /* CQ__W_COUNT_HARVEST */

static cq_pool *pool;

static int setup_config(const cq_pool_config *cfg) {
  storm_failures_reset();
  return cq_pool_create(&pool, cfg);
}

static int setup_flags(unsigned flags) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = flags;
  return setup_config(&cfg);
}

static int setup(void **state) {
  (void)state;
  return setup_flags(0);
}

static int setup_staged(void **state) {
  (void)state;
  return setup_flags(CQ_POOL_STAGED_CLAIMS);
}

static int setup_backfill(void **state) {
  (void)state;
  return setup_flags(CQ_POOL_BACKFILL);
}

/* No barging window: every blocking acquire claims at once, as callbacks
 * do (on the default pool blocking acquires first sleep unclaimed). */
static int setup_strict(void **state) {
  (void)state;
  return setup_flags(CQ_POOL_STRICT_ORDER);
}

static int teardown(void **state) {
  (void)state;
  storm_assert_no_failures();
  assert_int_equal(cqt_waiting(pool), 0);
  assert_cq_ok(cq_pool_destroy(pool)); /* refused if anything were held */
  pool = NULL;
  return 0;
}

/* A thread that may be cancelled waits for its callback on this. */
struct outcome {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int status; /* 1: not decided yet */
};

static void outcome_init(struct outcome *o) {
  pthread_mutex_init(&o->lock, NULL);
  storm_cond_init(&o->cond);
  o->status = 1;
}

static void outcome_destroy(struct outcome *o) {
  pthread_mutex_destroy(&o->lock);
  pthread_cond_destroy(&o->cond);
}

static void outcome_set(struct outcome *o, int status) {
  pthread_mutex_lock(&o->lock);
  o->status = status;
  pthread_cond_signal(&o->cond);
  pthread_mutex_unlock(&o->lock);
}

/*
 * Wait for the outcome and make ready for the next attempt. Returns 1 if
 * none came in CQT_PATIENCE_MS, a broken check: the attempt is still in
 * flight, so the caller stops using its grant and ends.
 */
static int outcome_wait(struct outcome *o, const char *what) {
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  pthread_mutex_lock(&o->lock);
  while (o->status == 1 && cq_now() <= give_up)
    storm_cond_wait_until(&o->cond, &o->lock, give_up);
  int status = o->status;
  o->status = 1;
  pthread_mutex_unlock(&o->lock);
  if (status == 1) {
    STORM_CHECK(false, "%s: no callback after %d s", what,
                CQT_PATIENCE_MS / 1000);
    st_dump_pool(pool);
  }
  return status;
}

/* Events the pool holds for the hook of the event-hook storm. */
#define STORM_EVENT_BUFFER (1u << 16)

/*
 * An event hook that checks the hook's own promises: one call at a time,
 * in the order the events happened (their times never go back), and counts
 * them by type.
 */
static struct {
  atomic_int inside;
  int64_t last_ms; /* only the hook touches it: one call at a time */
  atomic_llong count[CQ_EVENT_OVERDUE + 1];
} hook;

static void storm_hook(const cq_event *ev, void *arg) {
  (void)arg;
  int inside = atomic_fetch_add(&hook.inside, 1);
  STORM_CHECK(inside == 0, "event hook entered by %d threads at once",
              inside + 1);
  STORM_CHECK(ev->time_ms >= hook.last_ms,
              "event %d at %lld ms delivered after one at %lld ms",
              (int)ev->type, (long long)ev->time_ms, (long long)hook.last_ms);
  hook.last_ms = ev->time_ms;
  bool known = ev->type >= CQ_EVENT_GRANTED && ev->type <= CQ_EVENT_OVERDUE;
  STORM_CHECK(known, "unknown event type %d", (int)ev->type);
  if (known)
    atomic_fetch_add(&hook.count[ev->type], 1);
  atomic_fetch_sub(&hook.inside, 1);
}

static int setup_events(void **state) {
  (void)state;
  memset(&hook, 0, sizeof(hook));
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.on_event = storm_hook;
  cfg.event_buffer = STORM_EVENT_BUFFER;
  return setup_config(&cfg);
}

static long long hook_count(cq_event_type type) {
  return atomic_load(&hook.count[type]);
}

/*
 * At rest, once every event was delivered (a pool call delivers what is
 * left), the events tell the same story as the holders: one GRANTED per
 * grant and one RELEASED each, one CANCELLED per cancelled attempt, and
 * one PARKED per attempt that waited, however it ended.
 */
static void check_events(long granted, long cancelled, long timed_out) {
  cq_pool_stats ps;
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  for (;;) {
    assert_cq_ok(cq_pool_expire(pool, NULL)); /* delivers what is left */
    assert_cq_ok(cq_pool_stats_get(pool, &ps));
    long long parked = hook_count(CQ_EVENT_PARKED);
    long long ended = (long long)ps.waited_grants +
                      hook_count(CQ_EVENT_TIMED_OUT) +
                      hook_count(CQ_EVENT_CANCELLED);
    if ((hook_count(CQ_EVENT_RELEASED) == granted && parked == ended) ||
        ps.events_dropped != 0 || cq_now() > give_up)
      break;
    cqt_sleep_ms(1);
  }
  print_message("events: %lld granted, %lld released, %lld parked, %lld "
                "timed out, %lld cancelled, %lld reserved, %llu dropped\n",
                hook_count(CQ_EVENT_GRANTED), hook_count(CQ_EVENT_RELEASED),
                hook_count(CQ_EVENT_PARKED), hook_count(CQ_EVENT_TIMED_OUT),
                hook_count(CQ_EVENT_CANCELLED), hook_count(CQ_EVENT_RESERVED),
                (unsigned long long)ps.events_dropped);
  /* The hook never falls that far behind: it only counts, and one thread
   * or another delivers all along. A drop leaves nothing to check. */
  if (ps.events_dropped != 0)
    fail_msg("the event hook fell %u events behind and %llu were dropped: "
             "the counts cannot balance (raise cfg.event_buffer in "
             "setup_events() if the hook can legitimately lag that far)",
             (unsigned)STORM_EVENT_BUFFER,
             (unsigned long long)ps.events_dropped);
  assert_int_equal(hook_count(CQ_EVENT_GRANTED), granted);
  assert_int_equal(hook_count(CQ_EVENT_RELEASED), granted);
  assert_int_equal(hook_count(CQ_EVENT_CANCELLED), cancelled);
  assert_true(hook_count(CQ_EVENT_TIMED_OUT) <= timed_out);
  assert_int_equal(hook_count(CQ_EVENT_PARKED),
                   (long long)ps.waited_grants +
                       hook_count(CQ_EVENT_TIMED_OUT) +
                       hook_count(CQ_EVENT_CANCELLED));
  assert_int_equal(hook_count(CQ_EVENT_CLOSED), 0);
  assert_int_equal(hook_count(CQ_EVENT_NEVER), 0);
}

/* ------------------------------------------------------------------------ */
/* 1. The mixed storm                                                        */
/* ------------------------------------------------------------------------ */

#define MIX_WORKERS 12
#define MIX_CANCELLERS 2

struct mix_worker {
  struct st_model *m;
  int id;
  long ops;
  int64_t stop_at;
  uint64_t rng;
  cq_grant grant;
  /* The attempt in flight (callbacks): request, what to do when granted. */
  int k;
  bool release_in_cb;
  uint64_t cb_rng; /* only the callback uses it */
  struct st_held cb_held;
  atomic_int cb_calls; /* callbacks of the attempt in flight */
  struct outcome out;
  /* Outcomes of every attempt. */
  long issued, granted, busy, timed_out, cancelled, never;
  long submitted;
  atomic_long cb_fired;
};

struct mix_canceller {
  struct mix_worker *workers;
  atomic_int *stop;
  uint64_t rng;
  long calls, wins;
};

static void mix_hold_and_release(struct mix_worker *w, cq_grant *g, int k,
                                 uint64_t *rng) {
  struct st_held h;
  st_hold(w->m, g, k, &h, rng);
  storm_dawdle(rng);
  st_unhold(w->m, &h);
  int rc = cq_grant_release(pool, g);
  STORM_CHECK(rc == 0, "release of request %d: %s", k, cq_err_name(rc));
}

static void mix_cb(cq_grant *g, int status) {
  struct mix_worker *w = g->data;
  atomic_fetch_add(&w->cb_fired, 1);
  int calls = atomic_fetch_add(&w->cb_calls, 1);
  STORM_CHECK(calls == 0, "worker %d: callback ran %d times", w->id, calls + 1);
  if (status == 0 && w->release_in_cb) {
    mix_hold_and_release(w, g, w->k, &w->cb_rng);
    status = 2; /* granted and released here */
  } else if (status == 0) {
    st_hold(w->m, g, w->k, &w->cb_held, &w->cb_rng);
  }
  outcome_set(&w->out, status);
}

/* Count an attempt that ended without its units. */
static void mix_failed(struct mix_worker *w, int k, int rc, const char *how) {
  if (rc == CQ_ETIMEDOUT)
    w->timed_out++;
  else if (rc == CQ_ECANCELED)
    w->cancelled++;
  else if (rc == CQ_ENEVER && w->m->churn)
    w->never++; /* a capacity shrank below it */
  else if (rc == CQ_ENOENT)
    STORM_CHECK(false,
                "worker %d: %s of request %d: a resource reported as "
                "removed, which no storm does",
                w->id, how, k);
  else
    STORM_CHECK(false, "worker %d: %s of request %d: %s", w->id, how, k,
                cq_err_name(rc));
  st_count_failure(w->m, k, rc);
}

static void *mix_worker_main(void *arg) {
  struct mix_worker *w = arg;
  for (long i = 0; i < w->ops && cq_now() < w->stop_at; i++) {
    int k = (int)(storm_rand(&w->rng) % ST_NREQS);
    unsigned style = (unsigned)(storm_rand(&w->rng) % 10);
    w->issued++;
    if (style < 3) {
      int rc = cq_grant_try(pool, &w->grant, &w->m->reqs[k].req);
      if (rc == 0) {
        w->granted++;
        mix_hold_and_release(w, &w->grant, k, &w->rng);
      } else if (rc == CQ_EBUSY) {
        w->busy++;
      } else {
        mix_failed(w, k, rc, "try");
      }
    } else if (style < 6) {
      /* From already past (one attempt) to a few milliseconds. */
      int64_t deadline = cq_now() - 1 + (int64_t)(storm_rand(&w->rng) % 5);
      int rc = cq_grant_acquire(pool, &w->grant, &w->m->reqs[k].req, deadline);
      if (rc == 0) {
        w->granted++;
        mix_hold_and_release(w, &w->grant, k, &w->rng);
      } else {
        mix_failed(w, k, rc, "acquire");
      }
    } else {
      unsigned d = (unsigned)(storm_rand(&w->rng) % 4);
      int64_t deadline =
          d == 0 ? CQ_NEVER : cq_now() + (int64_t)(storm_rand(&w->rng) % 4);
      w->k = k;
      w->release_in_cb = storm_rand(&w->rng) % 2 == 0;
      atomic_store(&w->cb_calls, 0);
      int rc = cq_grant_submit(pool, &w->grant, &w->m->reqs[k].req, deadline,
                               mix_cb);
      if (rc != 0) {
        mix_failed(w, k, rc, "submit"); /* the callback will not run */
        continue;
      }
      w->submitted++;
      int status = outcome_wait(&w->out, "mixed storm");
      if (status == 1)
        break; /* recorded: the attempt never ended */
      if (status == 2) {
        w->granted++;
      } else if (status == 0) {
        w->granted++;
        storm_dawdle(&w->rng);
        st_unhold(w->m, &w->cb_held);
        int rrc = cq_grant_release(pool, &w->grant);
        STORM_CHECK(rrc == 0, "release after callback: %s", cq_err_name(rrc));
      } else {
        mix_failed(w, k, status, "callback");
      }
    }
  }
  return NULL;
}

/* Cancels whatever attempt some worker has in flight, if any. */
static void *mix_canceller_main(void *arg) {
  struct mix_canceller *c = arg;
  while (!atomic_load(c->stop)) {
    struct mix_worker *w = &c->workers[storm_rand(&c->rng) % MIX_WORKERS];
    int rc = cq_grant_cancel(pool, &w->grant);
    c->calls++;
    if (rc == 0)
      c->wins++;
    else
      STORM_CHECK(rc == CQ_ESTATE, "cancel: %s", cq_err_name(rc));
    if (storm_rand(&c->rng) % 4 == 0)
      sched_yield();
  }
  return NULL;
}

/*
 * Changes capacities while the storm runs, never above the model's: budgets
 * and classes shrink (to 0 now and then) and grow back, devices go offline
 * and come back. Waiters that can then never fit fail with CQ_ENEVER.
 */
struct churner {
  struct st_model *m;
  atomic_int *stop;
  uint64_t rng;
  long changes;
};

static void *churner_main(void *arg) {
  struct churner *c = arg;
  while (!atomic_load(c->stop)) {
    int r = 1 + (int)(storm_rand(&c->rng) % (ST_NRES - 1));
    int rc;
    if (storm_rand(&c->rng) % 3 == 0) {
      uint32_t d = (uint32_t)(storm_rand(&c->rng) % ST_DEVICES);
      rc = cq_device_set_online(pool, "gpu", d, (int)(storm_rand(&c->rng) % 2));
    } else {
      int64_t cap = (int64_t)(storm_rand(&c->rng) % (uint64_t)(st_caps[r] + 1));
      if (storm_rand(&c->rng) % 2 == 0)
        cap = st_caps[r]; /* back to full half of the time */
      rc = r >= ST_ETL ? cq_class_set_max(pool, st_names[r], cap)
                       : cq_budget_set_capacity(pool, st_names[r], cap);
    }
    STORM_CHECK(rc == 0, "capacity change: %s", cq_err_name(rc));
    c->changes++;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  /* Everything back as it was. */
  for (int r = 1; r < ST_NRES; r++) {
    int rc = r >= ST_ETL
                 ? cq_class_set_max(pool, st_names[r], st_caps[r])
                 : cq_budget_set_capacity(pool, st_names[r], st_caps[r]);
    STORM_CHECK(rc == 0, "capacity restore: %s", cq_err_name(rc));
  }
  for (uint32_t d = 0; d < ST_DEVICES; d++)
    STORM_CHECK(cq_device_set_online(pool, "gpu", d, 1) == 0, "online");
  return NULL;
}

static void run_mixed_storm(int64_t hold_limit_ms, bool events, bool churn) {
  static struct st_model m;
  static struct mix_worker w[MIX_WORKERS];
  struct mix_canceller c[MIX_CANCELLERS];
  struct storm_thread wt[MIX_WORKERS], ct[MIX_CANCELLERS], cht;
  atomic_int stop_cancel;
  atomic_init(&stop_cancel, 0);
  st_model_init(&m, pool, 0x5eed0001u + (uint64_t)hold_limit_ms, hold_limit_ms);
  m.churn = churn;
  /* At least enough attempts that the backfill variant surely backfills:
   * at valgrind's scale (333 attempts a worker) it made only 13 to 35
   * backfilled grants. */
  long ops = storm_n(4000, 600);
  int64_t stop_at = cq_now() + storm_seconds() * 1000;
  st_checker_start(&m);
  for (int i = 0; i < MIX_WORKERS; i++) {
    memset(&w[i], 0, sizeof(w[i]));
    w[i].m = &m;
    w[i].id = i;
    w[i].ops = ops;
    w[i].stop_at = stop_at;
    w[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    w[i].cb_rng = w[i].rng ^ 0xabcdefu;
    cq_grant_init(&w[i].grant);
    w[i].grant.data = &w[i];
    outcome_init(&w[i].out);
  }
  for (int i = 0; i < MIX_CANCELLERS; i++) {
    memset(&c[i], 0, sizeof(c[i]));
    c[i].workers = w;
    c[i].stop = &stop_cancel;
    c[i].rng = 0x2545f4914f6cdd1dull * (uint64_t)(i + 1);
  }
  for (int i = 0; i < MIX_WORKERS; i++)
    storm_thread_start(&wt[i], mix_worker_main, &w[i]);
  for (int i = 0; i < MIX_CANCELLERS; i++)
    storm_thread_start(&ct[i], mix_canceller_main, &c[i]);
  struct churner ch = {&m, &stop_cancel, 0x0badc0deu, 0};
  if (churn)
    storm_thread_start(&cht, churner_main, &ch);
  storm_join_all(wt, MIX_WORKERS, pool, "mixed storm workers");
  atomic_store(&stop_cancel, 1);
  storm_join_all(ct, MIX_CANCELLERS, pool, "mixed storm cancellers");
  if (churn)
    storm_join_all(&cht, 1, pool, "mixed storm churner");
  st_checker_stop(&m);
  storm_assert_no_failures(); /* before the counts, which it may explain */

  long issued = 0, granted = 0, busy = 0, timed = 0, cancelled = 0, never = 0;
  long wins = 0, cancel_calls = 0;
  for (int i = 0; i < MIX_WORKERS; i++) {
    assert_int_equal(w[i].issued, w[i].granted + w[i].busy + w[i].timed_out +
                                      w[i].cancelled + w[i].never);
    assert_int_equal(atomic_load(&w[i].cb_fired), w[i].submitted);
    issued += w[i].issued;
    granted += w[i].granted;
    busy += w[i].busy;
    timed += w[i].timed_out;
    cancelled += w[i].cancelled;
    never += w[i].never;
    outcome_destroy(&w[i].out);
  }
  for (int i = 0; i < MIX_CANCELLERS; i++) {
    wins += c[i].wins;
    cancel_calls += c[i].calls;
  }
  print_message("mixed storm (%s, scale %.3g): %d threads, %ld attempts: "
                "%ld granted, %ld busy, %ld timed out, %ld cancelled (%ld "
                "cancels tried), %ld never (%ld capacity changes); %lld "
                "checks\n",
                storm_build(), storm_scale(), MIX_WORKERS, issued, granted,
                busy, timed, cancelled, cancel_calls, never, ch.changes,
                (long long)atomic_load(&m.checks));
  /* A cancel that returned 0 ended exactly one waiting attempt. */
  assert_int_equal(wins, cancelled);
  assert_true(granted > 0);
  assert_true(atomic_load(&m.checks) > 0);
  st_check_quiescent(&m);
  if (hold_limit_ms > 0) {
    /* Backfill is what this variant exercises: it must have happened. */
    cq_pool_stats ps;
    assert_cq_ok(cq_pool_stats_get(pool, &ps));
    print_message("backfilled grants: %llu\n",
                  (unsigned long long)ps.backfilled);
    assert_true(ps.backfilled > 0);
  }
  if (events)
    check_events(granted, cancelled, timed);
}

static void test_mixed_storm_never_over_admits_and_ends_free(void **state) {
  (void)state;
  run_mixed_storm(0, false, false);
}

static void test_mixed_storm_with_staged_claims_never_over_admits_and_ends_free(
    void **state) {
  (void)state;
  run_mixed_storm(0, false, false);
}

/* Half the requests declare a hold limit: they take the locked paths, and
 * backfill past the head. Holders may outlive the limit (they are only
 * counted overdue). */
static void
test_mixed_storm_with_backfill_never_over_admits_and_ends_free(void **state) {
  (void)state;
  run_mixed_storm(5, false, false);
}

/* With an event hook every attempt and release takes the pool's lock, and
 * the events, delivered by whichever thread used the pool, account for
 * every outcome. */
static void
test_mixed_storm_with_an_event_hook_reports_every_outcome_once(void **state) {
  (void)state;
  run_mixed_storm(0, true, false);
}

/* Capacities shrink and grow and devices go offline and back while the
 * storm runs: waiters that can never fit fail, the rest are granted, and
 * once everything is back, all is free. */
static void
test_mixed_storm_with_capacity_changes_never_over_admits_and_ends_free(
    void **state) {
  (void)state;
  run_mixed_storm(0, false, true);
}

/* ------------------------------------------------------------------------ */
/* 2. The timeout storm                                                      */
/* ------------------------------------------------------------------------ */

#define TS_THREADS 8
#define TS_LONG 4 /* long waiters per round: 2 blocking, 2 callbacks */

struct ts_storm {
  cq_req req; /* t:1 */
  atomic_int stop;
  atomic_llong timeouts, grants;
};

struct ts_thread {
  struct ts_storm *s;
  uint64_t rng;
  cq_grant grant;
  struct outcome out;
};

static void ts_cb(cq_grant *g, int status) {
  struct ts_thread *t = g->data;
  if (status == 0) {
    int rc = cq_grant_release(pool, g);
    STORM_CHECK(rc == 0, "timeout storm release: %s", cq_err_name(rc));
  }
  outcome_set(&t->out, status);
}

/* Acquires with deadlines of at most a millisecond, never longer. */
static void *ts_main(void *arg) {
  struct ts_thread *t = arg;
  struct ts_storm *s = t->s;
  while (!atomic_load(&s->stop)) {
    unsigned how = (unsigned)(storm_rand(&t->rng) % 4);
    int64_t deadline = cq_now() + (how % 2); /* now: one attempt */
    int rc;
    if (how < 3) {
      rc = cq_grant_acquire(pool, &t->grant, &s->req, deadline);
      if (rc == 0) {
        rc = cq_grant_release(pool, &t->grant);
        STORM_CHECK(rc == 0, "timeout storm release: %s", cq_err_name(rc));
        rc = 0;
      }
    } else {
      rc = cq_grant_submit(pool, &t->grant, &s->req, deadline, ts_cb);
      STORM_CHECK(rc == 0, "timeout storm submit: %s", cq_err_name(rc));
      if (rc == 0)
        rc = outcome_wait(&t->out, "timeout storm");
      if (rc == 1)
        break; /* recorded: the attempt never ended */
    }
    if (rc == 0) {
      atomic_fetch_add(&s->grants, 1);
      /* Units are back: leave them to the long waiters for a moment
       * rather than spin on them. */
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    } else if (rc == CQ_ETIMEDOUT)
      atomic_fetch_add(&s->timeouts, 1);
    else
      STORM_CHECK(false, "timeout storm attempt: %s", cq_err_name(rc));
  }
  return NULL;
}

/* A long waiter: {t:1, mark:1}, where nobody else asks for `mark`, so the
 * pool's count of waiters on `mark` tells that it waits. */
struct ts_long {
  cq_req *req;
  cq_grant grant;
  bool blocking;
  atomic_int status; /* 1: not decided */
  pthread_t thread;
};

static void ts_long_cb(cq_grant *g, int status) {
  struct ts_long *l = g->data;
  if (status == 0) {
    int rc = cq_grant_release(pool, g);
    STORM_CHECK(rc == 0, "long waiter release: %s", cq_err_name(rc));
  }
  atomic_store(&l->status, status);
}

/* Long waiters wait without a deadline: the round waits for them with a
 * limit, which catches a lost wake-up, and a deadline could only end one
 * early on a slow build. */
static void *ts_long_main(void *arg) {
  struct ts_long *l = arg;
  int rc = cq_grant_acquire(pool, &l->grant, l->req, CQ_NEVER);
  if (rc == 0) {
    int rrc = cq_grant_release(pool, &l->grant);
    STORM_CHECK(rrc == 0, "long waiter release: %s", cq_err_name(rrc));
  }
  atomic_store(&l->status, rc);
  return NULL;
}

static uint64_t waiting_on(const char *name) {
  return cqt_budget(pool, name).waiting;
}

/*
 * The storm runs throughout. Each round: the storm times out against a
 * budget with nothing free for a while; long waiters queue among the
 * storm's waiters and the storm keeps timing out around them; then units
 * come back (`grow`: the capacity grows by TS_LONG; else the holder gives
 * back its TS_LONG units), and every long waiter must be granted.
 */
static void run_timeout_storm(bool grow) {
  static struct ts_storm s;
  static struct ts_thread th[TS_THREADS];
  struct ts_long lw[TS_LONG];
  struct storm_thread tid[TS_THREADS];
  memset(&s, 0, sizeof(s));
  int64_t base = grow ? 1 : TS_LONG;
  assert_cq_ok(cq_budget_add(pool, "t", base));
  assert_cq_ok(cq_budget_add(pool, "mark", 100));
  cq_req holder_req, long_req;
  char spec[32];
  snprintf(spec, sizeof(spec), "t:%lld", (long long)base);
  cqt_req(&holder_req, pool, spec);
  cqt_req(&long_req, pool, "t:1 mark:1");
  cqt_req(&s.req, pool, "t:1");
  cq_grant holder;
  cq_grant_init(&holder);
  assert_cq_ok(cq_grant_try(pool, &holder, &holder_req));
  long holder_grants = 1;

  for (int i = 0; i < TS_THREADS; i++) {
    th[i].s = &s;
    th[i].rng = 0x51ed2701u * (uint64_t)(i + 1);
    cq_grant_init(&th[i].grant);
    th[i].grant.data = &th[i];
    outcome_init(&th[i].out);
    storm_thread_start(&tid[i], ts_main, &th[i]);
  }
  int rounds = (int)storm_n(12, 2);
  long per_round = storm_n(1500, 40);
  int64_t stop_at = cq_now() + storm_seconds() * 1000;
  int round = 0;
  for (; round < rounds && (round == 0 || cq_now() < stop_at); round++) {
    /* Let the storm time out for a while. */
    int64_t give_up = cq_now() + CQT_PATIENCE_MS;
    storm_await_growth(&s.timeouts, per_round / 2, give_up);
    /* The long waiters join the queue among the storm's waiters. */
    for (int i = 0; i < TS_LONG; i++) {
      struct ts_long *l = &lw[i];
      l->req = &long_req;
      l->blocking = i % 2 == 0;
      atomic_store(&l->status, 1);
      cq_grant_init(&l->grant);
      l->grant.data = l;
      if (l->blocking)
        assert_int_equal(pthread_create(&l->thread, NULL, ts_long_main, l), 0);
      else
        assert_cq_ok(
            cq_grant_submit(pool, &l->grant, &long_req, CQ_NEVER, ts_long_cb));
    }
    give_up = cq_now() + CQT_PATIENCE_MS;
    while (waiting_on("mark") < TS_LONG && cq_now() < give_up)
      cqt_sleep_ms(1);
    if (waiting_on("mark") != TS_LONG) {
      st_dump_pool(pool);
      fail_msg("round %d: %llu long waiters wait, expected %d", round,
               (unsigned long long)waiting_on("mark"), TS_LONG);
    }
    /* More timeouts around them, then units come back. */
    storm_await_growth(&s.timeouts, per_round / 2, give_up);
    if (grow)
      assert_cq_ok(cq_budget_set_capacity(pool, "t", base + TS_LONG));
    else
      assert_cq_ok(cq_grant_release(pool, &holder));
    give_up = cq_now() + CQT_PATIENCE_MS;
    for (int i = 0; i < TS_LONG; i++) {
      struct ts_long *l = &lw[i];
      while (atomic_load(&l->status) == 1 && cq_now() < give_up)
        cqt_sleep_ms(1);
      /* A blocking one has stored its status last: the join is prompt. */
      if (l->blocking && atomic_load(&l->status) != 1)
        assert_int_equal(pthread_join(l->thread, NULL), 0);
      if (atomic_load(&l->status) != 0) {
        st_dump_pool(pool);
        fail_msg("round %d: long waiter %d (%s) ended with %s", round, i,
                 l->blocking ? "blocking" : "callback",
                 atomic_load(&l->status) == 1
                     ? "nothing: a lost wake-up"
                     : cq_err_name(atomic_load(&l->status)));
      }
    }
    /* Nothing free again for the next round. */
    if (grow) {
      assert_cq_ok(cq_budget_set_capacity(pool, "t", base));
    } else {
      assert_cq_ok(cq_grant_acquire(pool, &holder, &holder_req,
                                    cq_now() + CQT_PATIENCE_MS));
      holder_grants++;
    }
  }
  atomic_store(&s.stop, 1);
  storm_join_all(tid, TS_THREADS, pool, "timeout storm");
  storm_assert_no_failures();
  assert_cq_ok(cq_grant_release(pool, &holder));
  for (int i = 0; i < TS_THREADS; i++)
    outcome_destroy(&th[i].out);

  cq_resource_stats st = cqt_budget(pool, "t");
  long long timeouts = atomic_load(&s.timeouts);
  long long grants = atomic_load(&s.grants);
  print_message("timeout storm (%s, %s): %d threads, %d rounds, %lld "
                "timeouts (%llu of waiters), %lld storm grants\n",
                grow ? "capacity grows" : "holder releases", storm_build(),
                TS_THREADS, round, timeouts, (unsigned long long)st.timeouts,
                grants);
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.waiting, 0);
  assert_int_equal(st.withheld, 0);
  assert_true(timeouts > 0);
  /* The pool counts only attempts that waited. */
  assert_true(st.timeouts <= (uint64_t)timeouts);
  assert_int_equal(st.grants,
                   (uint64_t)(grants + holder_grants + (long)round * TS_LONG));
  assert_int_equal(cqt_budget(pool, "mark").grants, (uint64_t)round * TS_LONG);
}

static void
test_timeout_storm_loses_no_wakeup_when_capacity_grows(void **state) {
  (void)state;
  run_timeout_storm(true);
}

static void
test_timeout_storm_loses_no_wakeup_when_the_holder_releases(void **state) {
  (void)state;
  run_timeout_storm(false);
}

/* ------------------------------------------------------------------------ */
/* 3. The cancel storm against releases                                      */
/* ------------------------------------------------------------------------ */

#define CS_ACQUIRERS 6
#define CS_RELEASERS 2
#define CS_CANCELLERS 2
#define CS_CAP 2

enum { CS_BUSY = 0, CS_HELD = 1, CS_RELEASING = 2, CS_DONE = 3 };

struct cs_slot {
  int id;
  cq_grant grant;
  int amount;
  atomic_int state;
  atomic_int cb_calls; /* for the attempt in flight */
  int status;          /* the outcome, once CS_HELD or CS_DONE */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Counts. */
  long issued, granted, cancelled, closed, timed_out, submitted;
  atomic_long cb_fired;
};

struct cs_storm {
  struct cs_slot slots[CS_ACQUIRERS];
  cq_req reqs[CS_CAP];  /* c:1, c:2 */
  atomic_llong tally;   /* units of c the holders hold */
  atomic_int acquirers; /* still running */
  long ops;
  int64_t stop_at;
};

static struct cs_storm cs;

static void cs_set(struct cs_slot *s, int state) {
  pthread_mutex_lock(&s->lock);
  atomic_store(&s->state, state);
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock);
}

/* A grant to be released by a releaser thread. */
static void cs_granted(struct cs_slot *s) {
  long long now = atomic_fetch_add(&cs.tally, s->amount) + s->amount;
  STORM_CHECK(now <= CS_CAP, "cancel storm: %lld units held of %d", now,
              CS_CAP);
  cs_set(s, CS_HELD);
}

static void cs_cb(cq_grant *g, int status) {
  struct cs_slot *s = g->data;
  atomic_fetch_add(&s->cb_fired, 1);
  int calls = atomic_fetch_add(&s->cb_calls, 1);
  STORM_CHECK(calls == 0, "slot %d: callback ran %d times", s->id, calls + 1);
  s->status = status;
  if (status == 0)
    cs_granted(s);
  else
    cs_set(s, CS_DONE);
}

static void *cs_acquirer_main(void *arg) {
  struct cs_slot *s = arg;
  uint64_t rng = 0x7f4a7c159e3779b9ull * (uint64_t)(s->id + 1);
  for (long i = 0; i < cs.ops && cq_now() < cs.stop_at; i++) {
    int k = (int)(storm_rand(&rng) % CS_CAP);
    s->amount = k + 1;
    /* Mostly no deadline: grant or cancel decides; now and then a short one. */
    int64_t deadline = storm_rand(&rng) % 5 == 0
                           ? cq_now() + (int64_t)(storm_rand(&rng) % 3)
                           : CQ_NEVER;
    s->issued++;
    atomic_store(&s->state, CS_BUSY);
    if (storm_rand(&rng) % 2 == 0) {
      atomic_store(&s->cb_calls, 0);
      int rc = cq_grant_submit(pool, &s->grant, &cs.reqs[k], deadline, cs_cb);
      STORM_CHECK(rc == 0, "cancel storm submit: %s", cq_err_name(rc));
      if (rc != 0) {
        s->issued--;
        continue;
      }
      s->submitted++;
    } else {
      int rc = cq_grant_acquire(pool, &s->grant, &cs.reqs[k], deadline);
      s->status = rc;
      if (rc == 0)
        cs_granted(s);
      else
        cs_set(s, CS_DONE);
    }
    /* Wait for the outcome, and for a releaser to release a grant. */
    int64_t give_up = cq_now() + CQT_PATIENCE_MS;
    pthread_mutex_lock(&s->lock);
    while (atomic_load(&s->state) != CS_DONE && cq_now() <= give_up)
      storm_cond_wait_until(&s->cond, &s->lock, give_up);
    int state = atomic_load(&s->state);
    pthread_mutex_unlock(&s->lock);
    if (state != CS_DONE) {
      STORM_CHECK(false, "cancel storm slot %d: attempt %s after %d s", s->id,
                  state == CS_BUSY ? "not ended" : "granted, not released",
                  CQT_PATIENCE_MS / 1000);
      st_dump_pool(pool);
      break; /* the attempt is still in flight: leave its grant alone */
    }
    switch (s->status) {
    case 0:
      s->granted++;
      break;
    case CQ_ECANCELED:
      s->cancelled++;
      break;
    case CQ_ECLOSED:
      s->closed++;
      break;
    case CQ_ETIMEDOUT:
      s->timed_out++;
      break;
    default:
      STORM_CHECK(false, "cancel storm outcome: %s", cq_err_name(s->status));
    }
  }
  atomic_fetch_sub(&cs.acquirers, 1);
  return NULL;
}

/* Releases the grants the acquirers were given, on threads of their own. */
static void *cs_releaser_main(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg;
  while (atomic_load(&cs.acquirers) > 0) {
    struct cs_slot *s = &cs.slots[storm_rand(&rng) % CS_ACQUIRERS];
    int expect = CS_HELD;
    if (!atomic_compare_exchange_strong(&s->state, &expect, CS_RELEASING)) {
      sched_yield();
      continue;
    }
    STORM_CHECK(cq_grant_is_held(&s->grant), "slot %d: granted, not held",
                s->id);
    atomic_fetch_sub(&cs.tally, s->amount);
    int rc = cq_grant_release(pool, &s->grant);
    STORM_CHECK(rc == 0, "cancel storm release: %s", cq_err_name(rc));
    /* A second release is refused and changes nothing. */
    if (storm_rand(&rng) % 8 == 0) {
      rc = cq_grant_release(pool, &s->grant);
      STORM_CHECK(rc == CQ_ESTATE, "second release: %s", cq_err_name(rc));
    }
    cs_set(s, CS_DONE);
  }
  return NULL;
}

struct cs_canceller {
  uint64_t rng;
  atomic_int *stop;
  long cancel_wins, abort_wins, calls;
};

/* Cancels (or, one time in four, aborts as closed) random slots' attempts. */
static void *cs_canceller_main(void *arg) {
  struct cs_canceller *c = arg;
  while (!atomic_load(c->stop)) {
    struct cs_slot *s = &cs.slots[storm_rand(&c->rng) % CS_ACQUIRERS];
    bool abort = storm_rand(&c->rng) % 4 == 0;
    int rc = abort ? cq_grant_abort(pool, &s->grant, CQ_ECLOSED)
                   : cq_grant_cancel(pool, &s->grant);
    c->calls++;
    if (rc == 0) {
      if (abort)
        c->abort_wins++;
      else
        c->cancel_wins++;
    } else {
      STORM_CHECK(rc == CQ_ESTATE, "cancel storm cancel: %s", cq_err_name(rc));
      sched_yield();
    }
  }
  return NULL;
}

static void test_cancel_storm_against_releases_leaks_nothing(void **state) {
  (void)state;
  memset(&cs, 0, sizeof(cs));
  assert_cq_ok(cq_budget_add(pool, "c", CS_CAP));
  cqt_req(&cs.reqs[0], pool, "c:1");
  cqt_req(&cs.reqs[1], pool, "c:2");
  cs.ops = storm_n(6000, 150);
  cs.stop_at = cq_now() + storm_seconds() * 1000;
  atomic_store(&cs.acquirers, CS_ACQUIRERS);
  atomic_int stop_cancel;
  atomic_init(&stop_cancel, 0);
  struct cs_canceller c[CS_CANCELLERS];
  struct storm_thread at[CS_ACQUIRERS], rt[CS_RELEASERS], ct[CS_CANCELLERS];
  for (int i = 0; i < CS_ACQUIRERS; i++) {
    struct cs_slot *s = &cs.slots[i];
    s->id = i;
    cq_grant_init(&s->grant);
    s->grant.data = s;
    atomic_store(&s->state, CS_DONE);
    pthread_mutex_init(&s->lock, NULL);
    storm_cond_init(&s->cond);
  }
  for (int i = 0; i < CS_CANCELLERS; i++) {
    memset(&c[i], 0, sizeof(c[i]));
    c[i].rng = 0x1234567u * (uint64_t)(i + 3);
    c[i].stop = &stop_cancel;
    storm_thread_start(&ct[i], cs_canceller_main, &c[i]);
  }
  for (int i = 0; i < CS_RELEASERS; i++)
    storm_thread_start(&rt[i], cs_releaser_main,
                       (void *)(uintptr_t)(0x777u + (unsigned)i));
  for (int i = 0; i < CS_ACQUIRERS; i++)
    storm_thread_start(&at[i], cs_acquirer_main, &cs.slots[i]);
  storm_join_all(at, CS_ACQUIRERS, pool, "cancel storm acquirers");
  storm_join_all(rt, CS_RELEASERS, pool, "cancel storm releasers");
  atomic_store(&stop_cancel, 1);
  storm_join_all(ct, CS_CANCELLERS, pool, "cancel storm cancellers");
  storm_assert_no_failures(); /* before the counts, which it may explain */

  long issued = 0, granted = 0, cancelled = 0, closed = 0, timed = 0;
  long submitted = 0, fired = 0, cancel_wins = 0, abort_wins = 0, calls = 0;
  for (int i = 0; i < CS_ACQUIRERS; i++) {
    struct cs_slot *s = &cs.slots[i];
    /* Every attempt ended one way, and every callback ran once. */
    assert_int_equal(s->issued,
                     s->granted + s->cancelled + s->closed + s->timed_out);
    assert_int_equal(atomic_load(&s->cb_fired), s->submitted);
    issued += s->issued;
    granted += s->granted;
    cancelled += s->cancelled;
    closed += s->closed;
    timed += s->timed_out;
    submitted += s->submitted;
    fired += atomic_load(&s->cb_fired);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
  }
  for (int i = 0; i < CS_CANCELLERS; i++) {
    cancel_wins += c[i].cancel_wins;
    abort_wins += c[i].abort_wins;
    calls += c[i].calls;
  }
  print_message("cancel storm (%s): %d acquirers, %d releasers, %d "
                "cancellers; %ld attempts (%ld callbacks): %ld granted, %ld "
                "cancelled, %ld aborted, %ld timed out; %ld cancels tried\n",
                storm_build(), CS_ACQUIRERS, CS_RELEASERS, CS_CANCELLERS,
                issued, submitted, granted, cancelled, closed, timed, calls);
  /* A cancel or abort that returned 0 ended exactly one attempt. */
  assert_int_equal(cancel_wins, cancelled);
  assert_int_equal(abort_wins, closed);
  assert_int_equal(fired, submitted);
  assert_int_equal(atomic_load(&cs.tally), 0);
  cq_resource_stats st = cqt_budget(pool, "c");
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.withheld, 0);
  assert_int_equal(st.waiting, 0);
  assert_true(st.peak <= CS_CAP);
  assert_int_equal(st.grants, (uint64_t)granted);
  assert_int_equal(st.cancellations, (uint64_t)cancelled);
  assert_true(st.timeouts <= (uint64_t)timed);
  assert_true(granted > 0);
  assert_true(cancelled > 0);
}

/* ------------------------------------------------------------------------ */
/* 4. The handoff storm                                                      */
/* ------------------------------------------------------------------------ */

#define HO_THREADS 8

struct ho_storm {
  const cq_req *reqs[2]; /* each attempt picks one */
  const char *resource;
  atomic_int owner; /* 0: free, else the holder's id + 1 */
  long plain;       /* changed only by the holder: a race if two hold */
  long ops;
  int64_t stop_at;
};

struct ho_thread {
  struct ho_storm *h;
  int id;
  uint64_t rng;
  cq_grant grant;
  struct outcome out;
  long grants, busy;
};

/* The holder's exclusive section. */
static void ho_section(struct ho_thread *t) {
  int prev = atomic_exchange(&t->h->owner, t->id + 1);
  STORM_CHECK(prev == 0, "%s granted to %d while %d held it", t->h->resource,
              t->id, prev - 1);
  t->h->plain++;
  if (storm_rand(&t->rng) % 64 == 0)
    sched_yield();
  t->h->plain++;
  prev = atomic_exchange(&t->h->owner, 0);
  STORM_CHECK(prev == t->id + 1, "%s: %d found owner %d on leaving",
              t->h->resource, t->id, prev - 1);
}

static void ho_cb(cq_grant *g, int status) {
  struct ho_thread *t = g->data;
  if (status == 0) {
    ho_section(t);
    int rc = cq_grant_release(pool, g);
    STORM_CHECK(rc == 0, "handoff release: %s", cq_err_name(rc));
  }
  outcome_set(&t->out, status);
}

static void *ho_main(void *arg) {
  struct ho_thread *t = arg;
  struct ho_storm *h = t->h;
  for (long i = 0; i < h->ops; i++) {
    if (i % 256 == 0 && cq_now() >= h->stop_at)
      break;
    unsigned how = (unsigned)(storm_rand(&t->rng) % 16);
    int rc;
    if (how < 12) {
      rc = cq_grant_acquire(pool, &t->grant, h->reqs[how % 2], CQ_NEVER);
    } else if (how < 14) {
      rc = cq_grant_try(pool, &t->grant, h->reqs[how % 2]);
      if (rc == CQ_EBUSY) {
        t->busy++;
        continue;
      }
    } else {
      rc = cq_grant_submit(pool, &t->grant, h->reqs[how % 2], CQ_NEVER, ho_cb);
      STORM_CHECK(rc == 0, "handoff submit: %s", cq_err_name(rc));
      if (rc == 0) {
        rc = outcome_wait(&t->out, "handoff storm");
        if (rc == 1)
          break; /* recorded: the attempt never ended */
        STORM_CHECK(rc == 0, "handoff callback: %s", cq_err_name(rc));
        if (rc == 0)
          t->grants++;
      }
      continue;
    }
    STORM_CHECK(rc == 0, "handoff acquire: %s", cq_err_name(rc));
    if (rc != 0)
      continue;
    t->grants++;
    ho_section(t);
    rc = cq_grant_release(pool, &t->grant);
    STORM_CHECK(rc == 0, "handoff release: %s", cq_err_name(rc));
  }
  return NULL;
}

/* Pass a resource whose capacity admits one of `a` and `b` at a time
 * round the threads, as a mutex. */
static void run_handoff_storm(const char *resource, const cq_req *a,
                              const cq_req *b, const char *what) {
  static struct ho_storm h;
  static struct ho_thread th[HO_THREADS];
  struct storm_thread tid[HO_THREADS];
  h.resource = resource;
  h.reqs[0] = a;
  h.reqs[1] = b;
  atomic_store(&h.owner, 0);
  h.plain = 0;
  h.ops = storm_n(60000, 500);
  h.stop_at = cq_now() + storm_seconds() * 1000;
  for (int i = 0; i < HO_THREADS; i++) {
    memset(&th[i], 0, sizeof(th[i]));
    th[i].h = &h;
    th[i].id = i;
    th[i].rng = 0xc0ffee11u * (uint64_t)(i + 1);
    cq_grant_init(&th[i].grant);
    th[i].grant.data = &th[i];
    outcome_init(&th[i].out);
  }
  for (int i = 0; i < HO_THREADS; i++)
    storm_thread_start(&tid[i], ho_main, &th[i]);
  storm_join_all(tid, HO_THREADS, pool, what);
  storm_assert_no_failures();
  long grants = 0, busy = 0;
  for (int i = 0; i < HO_THREADS; i++) {
    grants += th[i].grants;
    busy += th[i].busy;
    outcome_destroy(&th[i].out);
  }
  print_message("handoff storm (%s, %s): %d threads, %ld grants, %ld busy "
                "tries\n",
                what, storm_build(), HO_THREADS, grants, busy);
  storm_assert_no_failures();
  assert_int_equal(h.plain, 2 * grants);
  cq_resource_stats st;
  assert_cq_ok(cq_resource_stats_get(pool, resource, &st));
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.waiting, 0);
  assert_true(st.peak <= st.capacity);
  assert_int_equal(st.grants, (uint64_t)grants);
}

static void test_handoff_storm_on_a_budget_of_one_never_overlaps(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "m", 1));
  cq_req r;
  cqt_req(&r, pool, "m:1");
  run_handoff_storm("m", &r, &r, "budget of 1, lock-free");
}

/* A class of one worker, named with budgets that have plenty. */
static void test_handoff_storm_on_a_class_of_one_never_overlaps(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "cpu", 64));
  assert_cq_ok(cq_class_add(pool, "solo", 1));
  cq_req a, b;
  cqt_req(&a, pool, "cpu:1");
  assert_cq_ok(cq_req_set_class(&a, "solo"));
  cqt_req(&b, pool, "cpu:3");
  assert_cq_ok(cq_req_set_class(&b, "solo"));
  run_handoff_storm("solo", &a, &b, "class of 1");
}

/* One device, taken whole or as 0.6: no two of these fit together. */
static void test_handoff_storm_on_one_device_never_overlaps(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 1, NULL));
  cq_req whole, part;
  assert_cq_ok(cq_req_init(&whole, pool));
  assert_cq_ok(cq_req_add_devices(&whole, "gpu", 1));
  assert_cq_ok(cq_req_init(&part, pool));
  assert_cq_ok(cq_req_add_fraction(&part, "gpu", 600));
  run_handoff_storm("gpu", &whole, &part, "one device");
  cq_device_stats ds;
  assert_cq_ok(cq_device_stats_get(pool, "gpu", 0, &ds));
  assert_int_equal(ds.used_milli, 0);
  assert_true(ds.peak_milli <= CQ_DEVICE_MILLI);
}

/* With a hold limit every attempt takes the pool's lock and its grant is
 * kept in the pool's limits. */
static void
test_handoff_storm_on_a_budget_of_one_with_hold_limits_never_overlaps(
    void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "m", 1));
  cq_req limited, plain;
  cqt_req(&limited, pool, "m:1");
  assert_cq_ok(cq_req_set_hold_limit(&limited, 60000));
  cqt_req(&plain, pool, "m:1");
  run_handoff_storm("m", &limited, &plain, "budget of 1, hold limits");
}

/* ------------------------------------------------------------------------ */
/* 5. A cancel racing the start of an attempt                                */
/* ------------------------------------------------------------------------ */

struct race {
  cq_req req;
  cq_grant grant;
  long rounds;
  atomic_int started, done;
  atomic_long cancels; /* made once the owner had started */
};

static void *race_owner(void *arg) {
  struct race *r = arg;
  /* Start the attempts once cancels are coming, so that they race even in
   * the shortest run. */
  atomic_store(&r->started, 1);
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (atomic_load(&r->cancels) == 0 && cq_now() <= give_up)
    sched_yield();
  STORM_CHECK(atomic_load(&r->cancels) > 0, "no cancel came in %d s",
              CQT_PATIENCE_MS / 1000);
  for (long i = 0; i < r->rounds; i++) {
    int rc = cq_grant_try(pool, &r->grant, &r->req); /* lock-free path */
    STORM_CHECK(rc == 0, "uncontended try: %s", cq_err_name(rc));
    if (rc == 0) {
      rc = cq_grant_release(pool, &r->grant);
      STORM_CHECK(rc == 0, "release: %s", cq_err_name(rc));
    }
  }
  atomic_store(&r->done, 1);
  return NULL;
}

/*
 * A host that cancels from a thread of its own cannot know whether the
 * attempt it cancels has started: the header promises that a racing cancel
 * is safe (it ends the attempt if it waits, else returns CQ_ESTATE). Here
 * the attempts never wait, so every cancel must find nothing to cancel.
 *
 * The storms found a data race here, since fixed: cancel and abort read the
 * grant's pool under the pool lock (src/grant.c, lock_grant()) while the owner,
 * starting a lock-free attempt, wrote it without the lock. They now check the
 * grant's atomic state first. Under ThreadSanitizer this test guards the fix.
 */
static void
test_cancel_racing_a_lock_free_attempt_finds_nothing_to_cancel(void **state) {
  (void)state;
  static struct race r;
  memset(&r, 0, sizeof(r));
  assert_cq_ok(cq_budget_add(pool, "free", 1000));
  cqt_req(&r.req, pool, "free:1");
  cq_grant_init(&r.grant);
  r.rounds = storm_n(200000, 2000);
  struct storm_thread owner;
  storm_thread_start(&owner, race_owner, &r);
  while (!atomic_load(&r.done)) {
    bool racing = atomic_load(&r.started);
    assert_cq_err(cq_grant_cancel(pool, &r.grant), CQ_ESTATE);
    if (racing)
      atomic_fetch_add(&r.cancels, 1);
  }
  storm_join_all(&owner, 1, pool, "cancel race");
  long cancels = atomic_load(&r.cancels);
  print_message("cancel race (%s): %ld attempts, %ld cancels\n", storm_build(),
                r.rounds, cancels);
  storm_assert_no_failures();
  assert_true(cancels > 0);
  cq_resource_stats st = cqt_budget(pool, "free");
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.grants, (uint64_t)r.rounds);
}

/* ------------------------------------------------------------------------ */
/* 6. The lock-free grant counter across its harvest                         */
/* ------------------------------------------------------------------------ */

/*
 * A budget's usage word counts the grants made without the lock in a field
 * of its own, which the locked path empties into the budget's total once it
 * reaches the harvest threshold. A lock-free attempt that takes a budget,
 * then finds the next one full, takes back what it added, its count
 * included, possibly just after a harvest moved that count away. Once that
 * undo borrowed from the state bits above the field: the budget turned
 * "removed" for good and its grant count jumped by millions. Here the three
 * kinds of traffic meet on one budget: pollers whose tries always take `a`
 * and give it back (`full` is held), lock-free grants of `a`, and grants of
 * `a` that take the lock (a hold limit), each of which may harvest. The run
 * crosses the threshold several times (thousands of times in the build
 * with a shrunk threshold, CRONOQ_HARVEST_SHIFT).
 */
#define HV_POLLERS 4
#define HV_FAST 1
#define HV_LOCKED 1

struct hv {
  cq_req poll, fast, locked;
  atomic_llong grants; /* of `a`, counted by the threads that got them */
  atomic_llong polls;
  long long target;
  int64_t give_up;
};

struct hv_thread {
  struct hv *h;
  const cq_req *req;
  bool polls; /* expects CQ_EBUSY every time */
};

static void *hv_main(void *arg) {
  struct hv_thread *t = arg;
  struct hv *h = t->h;
  cq_grant g;
  cq_grant_init(&g);
  while (atomic_load(&h->grants) < h->target && cq_now() < h->give_up &&
         atomic_load(&storm_failures) == 0) {
    int rc = cq_grant_try(pool, &g, t->req);
    if (t->polls) {
      STORM_CHECK(rc == CQ_EBUSY, "a poll of a full budget: %s (%s)",
                  cq_err_name(rc), cq_grant_error(&g));
      atomic_fetch_add(&h->polls, 1);
      continue;
    }
    STORM_CHECK(rc == 0, "a grant of a free budget: %s (%s)", cq_err_name(rc),
                cq_grant_error(&g));
    if (rc != 0)
      break;
    atomic_fetch_add(&h->grants, 1);
    rc = cq_grant_release(pool, &g);
    STORM_CHECK(rc == 0, "release: %s", cq_err_name(rc));
  }
  return NULL;
}

static void test_lockfree_counts_survive_undos_across_harvests(void **state) {
  (void)state;
  static struct hv h;
  memset(&h, 0, sizeof(h));
  assert_cq_ok(cq_budget_add(pool, "a", 1000));
  assert_cq_ok(cq_budget_add(pool, "full", 1));
  cq_req full_req;
  cqt_req(&full_req, pool, "full:1");
  cq_grant holder;
  cq_grant_init(&holder);
  assert_cq_ok(cq_grant_try(pool, &holder, &full_req));
  cqt_req(&h.poll, pool, "a:1 full:1");
  cqt_req(&h.fast, pool, "a:1");
  cqt_req(&h.locked, pool, "a:1");
  assert_cq_ok(cq_req_set_hold_limit(&h.locked, 60000));
  /* Enough grants to cross the threshold a few times; a hang guard only. */
  h.target = (long long)(4 * CQ__W_COUNT_HARVEST) + storm_n(200000, 5000);
  h.give_up = cq_now() + 20 * storm_seconds() * 1000;
  enum { N = HV_POLLERS + HV_FAST + HV_LOCKED };
  struct hv_thread args[N];
  struct storm_thread threads[N];
  for (int i = 0; i < N; i++) {
    args[i].h = &h;
    args[i].polls = i < HV_POLLERS;
    args[i].req = i < HV_POLLERS             ? &h.poll
                  : i < HV_POLLERS + HV_FAST ? &h.fast
                                             : &h.locked;
    storm_thread_start(&threads[i], hv_main, &args[i]);
  }
  for (int i = 0; i < N; i++)
    assert_int_equal(pthread_join(threads[i].id, NULL), 0);
  long long grants = atomic_load(&h.grants);
  print_message("harvest storm (%s): %lld grants, %lld polls, harvest every "
                "%llu\n",
                storm_build(), grants, atomic_load(&h.polls),
                (unsigned long long)CQ__W_COUNT_HARVEST);
  storm_assert_no_failures();
  assert_true(grants >= (long long)CQ__W_COUNT_HARVEST); /* it crossed */
  assert_true(atomic_load(&h.polls) > 0);
  /* Every grant counted once, nothing held, and the budget still there. */
  cq_resource_stats st = cqt_budget(pool, "a");
  assert_int_equal(st.grants, (uint64_t)grants);
  assert_int_equal(st.in_use, 0);
  assert_int_equal(cqt_budget(pool, "full").grants, 1);
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &h.fast));
  assert_cq_ok(cq_grant_release(pool, &g));
  assert_cq_ok(cq_grant_release(pool, &holder));
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
#define TF(f, s) cmocka_unit_test_setup_teardown(f, s, teardown)
  const struct CMUnitTest tests[] = {
      T(test_mixed_storm_never_over_admits_and_ends_free),
      TF(test_mixed_storm_never_over_admits_and_ends_free, setup_strict),
      TF(test_mixed_storm_with_staged_claims_never_over_admits_and_ends_free,
         setup_staged),
      TF(test_mixed_storm_with_backfill_never_over_admits_and_ends_free,
         setup_backfill),
      TF(test_mixed_storm_with_an_event_hook_reports_every_outcome_once,
         setup_events),
      T(test_mixed_storm_with_capacity_changes_never_over_admits_and_ends_free),
      T(test_timeout_storm_loses_no_wakeup_when_capacity_grows),
      T(test_timeout_storm_loses_no_wakeup_when_the_holder_releases),
      TF(test_timeout_storm_loses_no_wakeup_when_the_holder_releases,
         setup_strict),
      T(test_cancel_storm_against_releases_leaks_nothing),
      T(test_handoff_storm_on_a_budget_of_one_never_overlaps),
      TF(test_handoff_storm_on_a_budget_of_one_never_overlaps, setup_strict),
      TF(test_handoff_storm_on_a_class_of_one_never_overlaps, setup_strict),
      T(test_handoff_storm_on_a_class_of_one_never_overlaps),
      T(test_handoff_storm_on_one_device_never_overlaps),
      T(test_handoff_storm_on_a_budget_of_one_with_hold_limits_never_overlaps),
      T(test_cancel_racing_a_lock_free_attempt_finds_nothing_to_cancel),
      T(test_lockfree_counts_survive_undos_across_harvests),
  };
#undef TF
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
