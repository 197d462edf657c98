/*
 * The storms of test_storm.c through the libuv adapter: several loops,
 * each on a thread of its own with its own adapter, share one pool with
 * plain threads.
 *
 * - The mixed storm: every loop keeps a few acquires in flight, random
 *   multi-resource requests with short, past or no deadlines (the
 *   adapter's timer ends them); grants are released on the loop or handed
 *   to plain releaser threads; plain cancellers cancel pending acquires;
 *   plain threads make blocking acquires alongside. Holders' tallies and a
 *   checker thread watch every capacity; each callback runs once, on its
 *   own loop; at rest nothing is held or waiting and every loop closes.
 * - The cancel storm: the same machinery with mostly no deadlines and more
 *   cancellers, so that attempts end by a grant or a cancel.
 * - The timeout storm: the loops keep acquiring with deadlines of a
 *   millisecond or less on a budget with nothing free; a long waiter per
 *   loop queues among them; when units come back every long waiter is
 *   granted, on its loop;
 * - a cancel racing a new acquire of the same req: the reproducer of a
 *   race the storms found in the adapter, and fixed (see the test).
 *
 * A loop never restarts an acquire from within a callback: it queues the
 * slot and an idle handle restarts it on the next turn of the loop, so
 * that the loop keeps turning (timers, wake-ups) however fast outcomes
 * come. Sizes are at CRONOQ_STRESS_SCALE=1; see support/storm.h.
 */
#include "support/storm.h"

#include "cronoq/cronoq_uv.h"

static cq_pool *pool;

static int setup(void **state) {
  (void)state;
  storm_failures_reset();
  return cq_pool_create(&pool, NULL);
}

static int teardown(void **state) {
  (void)state;
  storm_assert_no_failures();
  assert_int_equal(cqt_waiting(pool), 0);
  assert_cq_ok(cq_pool_destroy(pool)); /* refused if anything were held */
  pool = NULL;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Loops and slots                                                           */
/* ------------------------------------------------------------------------ */

#define SIDES 3
#define SLOTS 6 /* acquires in flight per loop */

enum { SL_IDLE = 0, SL_PENDING = 1, SL_HELD = 2, SL_RELEASING = 3 };

struct side;

/* One acquire in flight at a time, restarted on its loop until done. */
struct slot {
  struct side *side;
  int id;
  cq_uv_req req;
  atomic_int state;
  /* Set once the req was first acquired: before, it is not bound to the
   * pool, and a cancel of it is refused (CQ_EINVAL). */
  atomic_bool bound;
  bool finished;
  struct slot *next; /* ready lists */
  uint64_t rng, cb_rng;
  int k;
  struct st_held held;
  /* Outcomes. */
  long issued, granted, timed_out, cancelled;
  atomic_long fired;
};

struct side {
  int id;
  uv_loop_t loop;
  cq_uv *uv;
  uv_thread_t thread; /* as created, for the join */
  uv_thread_t self;   /* as the loop's thread sees itself */
  uv_idle_t idle;     /* restarts the ready slots */
  uv_async_t kick;    /* slots released on other threads are ready */
  uv_timer_t poll;    /* notices the end, and the timeout storm's rounds */
  struct slot *ready; /* loop thread only */
  pthread_mutex_t xlock;
  struct slot *xready; /* from other threads, under xlock */
  struct slot slots[SLOTS + 1];
  int nslots;
  void (*arm)(struct slot *s); /* start the next attempt, or finish */
  void (*tick)(struct side *s);
  atomic_int stop;
  int seen_round;
  int loop_close_rc;
  bool wrong_thread;
};

static struct side sides[SIDES];
static atomic_int slots_finished;

static void side_idle_cb(uv_idle_t *h) {
  struct side *sd = h->data;
  struct slot *list = sd->ready;
  sd->ready = NULL;
  if (list == NULL)
    (void)uv_idle_stop(&sd->idle);
  /* In order, oldest first. */
  struct slot *rev = NULL;
  while (list != NULL) {
    struct slot *s = list;
    list = s->next;
    s->next = rev;
    rev = s;
  }
  while (rev != NULL) {
    struct slot *s = rev;
    rev = s->next;
    sd->arm(s);
  }
}

/* On the loop thread: restart `s` on the next turn of the loop. */
static void slot_ready(struct slot *s) {
  struct side *sd = s->side;
  atomic_store(&s->state, SL_IDLE);
  s->next = sd->ready;
  sd->ready = s;
  (void)uv_idle_start(&sd->idle, side_idle_cb);
}

/* On any other thread: the same, through the loop's async handle. */
static void slot_ready_from_afar(struct slot *s) {
  struct side *sd = s->side;
  atomic_store(&s->state, SL_IDLE);
  pthread_mutex_lock(&sd->xlock);
  s->next = sd->xready;
  sd->xready = s;
  pthread_mutex_unlock(&sd->xlock);
  (void)uv_async_send(&sd->kick);
}

static void side_kick_cb(uv_async_t *h) {
  struct side *sd = h->data;
  pthread_mutex_lock(&sd->xlock);
  struct slot *list = sd->xready;
  sd->xready = NULL;
  pthread_mutex_unlock(&sd->xlock);
  while (list != NULL) {
    struct slot *s = list;
    list = s->next;
    s->next = sd->ready;
    sd->ready = s;
  }
  (void)uv_idle_start(&sd->idle, side_idle_cb);
}

static void slot_finish(struct slot *s) {
  if (!s->finished) {
    s->finished = true;
    atomic_fetch_add(&slots_finished, 1);
  }
}

static void side_poll_cb(uv_timer_t *h) {
  struct side *sd = h->data;
  if (sd->tick != NULL)
    sd->tick(sd);
  if (!atomic_load(&sd->stop))
    return;
  /* Everything is finished and the other threads are gone: close. */
  int rc = cq_uv_close(sd->uv, NULL);
  STORM_CHECK(rc == 0, "loop %d: close: %s", sd->id, cq_err_name(rc));
  uv_close((uv_handle_t *)&sd->idle, NULL);
  uv_close((uv_handle_t *)&sd->kick, NULL);
  uv_close((uv_handle_t *)&sd->poll, NULL);
}

static void side_main(void *arg) {
  struct side *sd = arg;
  sd->self = uv_thread_self();
  sd->loop_close_rc = -1;
  if (uv_loop_init(&sd->loop) != 0) {
    STORM_CHECK(false, "loop %d: uv_loop_init", sd->id);
    return;
  }
  int rc = cq_uv_init(&sd->uv, &sd->loop, pool, NULL);
  STORM_CHECK(rc == 0, "loop %d: cq_uv_init: %s", sd->id, cq_err_name(rc));
  if (rc != 0 || uv_idle_init(&sd->loop, &sd->idle) != 0 ||
      uv_async_init(&sd->loop, &sd->kick, side_kick_cb) != 0 ||
      uv_timer_init(&sd->loop, &sd->poll) != 0) {
    STORM_CHECK(false, "loop %d: handles", sd->id);
    return;
  }
  sd->idle.data = sd->kick.data = sd->poll.data = sd;
  (void)uv_timer_start(&sd->poll, side_poll_cb, 1, 1);
  for (int i = 0; i < sd->nslots; i++)
    sd->arm(&sd->slots[i]);
  (void)uv_run(&sd->loop, UV_RUN_DEFAULT);
  sd->loop_close_rc = uv_loop_close(&sd->loop);
}

static void slot_check_thread(struct slot *s) {
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &s->side->self))
    s->side->wrong_thread = true;
}

/* Set up the sides (not started): `nslots` slots each, driven by `arm`. */
static void sides_init(int nslots, void (*arm)(struct slot *),
                       void (*tick)(struct side *), uint64_t seed) {
  atomic_store(&slots_finished, 0);
  for (int i = 0; i < SIDES; i++) {
    struct side *sd = &sides[i];
    memset(sd, 0, sizeof(*sd));
    sd->id = i;
    sd->nslots = nslots;
    sd->arm = arm;
    sd->tick = tick;
    pthread_mutex_init(&sd->xlock, NULL);
    for (int j = 0; j < SLOTS + 1; j++) {
      struct slot *s = &sd->slots[j];
      s->side = sd;
      s->id = i * 100 + j;
      s->rng = seed * (uint64_t)(s->id + 1) + 0x9e3779b97f4a7c15ull;
      s->cb_rng = s->rng ^ 0x5bd1e995u;
      cq_uv_req_init(&s->req);
      s->req.data = s;
    }
  }
}

static void sides_start(void) {
  for (int i = 0; i < SIDES; i++)
    assert_int_equal(uv_thread_create(&sides[i].thread, side_main, &sides[i]),
                     0);
}

/* Stop the loops (every slot finished, other threads gone) and check each
 * closed cleanly, its callbacks all on its own thread. */
static void sides_stop(void) {
  for (int i = 0; i < SIDES; i++)
    atomic_store(&sides[i].stop, 1);
  for (int i = 0; i < SIDES; i++) {
    assert_int_equal(uv_thread_join(&sides[i].thread), 0);
    assert_int_equal(sides[i].loop_close_rc, 0);
    assert_false(sides[i].wrong_thread);
    pthread_mutex_destroy(&sides[i].xlock);
  }
}

/* ------------------------------------------------------------------------ */
/* The mixed storm and the cancel storm                                      */
/* ------------------------------------------------------------------------ */

struct mix_params {
  const char *name;
  int never_pct; /* attempts with no deadline, in percent */
  int cancellers;
  int hand_off_in; /* one grant in `hand_off_in` goes to a releaser */
  long ops;        /* per slot */
  bool cancels;    /* attempts must have ended by a cancel */
};

static struct {
  struct st_model m;
  struct mix_params p;
  int64_t stop_at;
  atomic_int others_stop;
} mx;

static void mix_cb(cq_uv_req *r, int status);

static void mix_arm(struct slot *s) {
  if (s->issued >= mx.p.ops || cq_now() >= mx.stop_at) {
    slot_finish(s);
    return;
  }
  s->k = (int)(storm_rand(&s->rng) % ST_NREQS);
  unsigned d = (unsigned)(storm_rand(&s->rng) % 100);
  int64_t deadline = d < (unsigned)mx.p.never_pct
                         ? CQ_NEVER
                         : cq_now() - 1 + (int64_t)(storm_rand(&s->rng) % 5);
  s->issued++;
  atomic_store(&s->state, SL_PENDING);
  int rc = cq_uv_acquire(s->side->uv, &s->req, &mx.m.reqs[s->k].req, deadline,
                         mix_cb);
  if (rc != 0) {
    STORM_CHECK(false, "loop acquire: %s", cq_err_name(rc));
    s->issued--;
    slot_finish(s);
    return;
  }
  atomic_store(&s->bound, true);
}

static void mix_cb(cq_uv_req *r, int status) {
  struct slot *s = r->data;
  atomic_fetch_add(&s->fired, 1);
  slot_check_thread(s);
  if (status != 0) {
    if (status == CQ_ETIMEDOUT)
      s->timed_out++;
    else if (status == CQ_ECANCELED)
      s->cancelled++;
    else
      STORM_CHECK(false, "loop callback: %s", cq_err_name(status));
    st_count_failure(&mx.m, s->k, status);
    slot_ready(s);
    return;
  }
  s->granted++;
  st_hold(&mx.m, &r->grant, s->k, &s->held, &s->cb_rng);
  if (storm_rand(&s->cb_rng) % (uint64_t)mx.p.hand_off_in == 0) {
    atomic_store(&s->state, SL_HELD); /* a releaser thread takes it */
    return;
  }
  st_unhold(&mx.m, &s->held);
  int rc = cq_uv_release(r);
  STORM_CHECK(rc == 0, "loop release: %s", cq_err_name(rc));
  slot_ready(s);
}

static struct slot *random_slot(uint64_t *rng) {
  struct side *sd = &sides[storm_rand(rng) % SIDES];
  return &sd->slots[storm_rand(rng) % (uint64_t)sd->nslots];
}

static void *mix_releaser_main(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg;
  long released = 0;
  while (!atomic_load(&mx.others_stop)) {
    struct slot *s = random_slot(&rng);
    int expect = SL_HELD;
    if (!atomic_compare_exchange_strong(&s->state, &expect, SL_RELEASING)) {
      sched_yield();
      continue;
    }
    st_unhold(&mx.m, &s->held);
    int rc = cq_uv_release(&s->req);
    STORM_CHECK(rc == 0, "plain release: %s", cq_err_name(rc));
    released++;
    slot_ready_from_afar(s);
  }
  return (void *)(intptr_t)released;
}

struct canceller {
  uint64_t rng;
  long wins, calls;
};

/* Cancels pending acquires from other threads, without any lock of the
 * test's: by the time the cancel runs the loop may have seen the outcome
 * and acquired again with the same req, which the adapter must allow. */
static void *mix_canceller_main(void *arg) {
  struct canceller *c = arg;
  while (!atomic_load(&mx.others_stop)) {
    struct slot *s = random_slot(&c->rng);
    if (atomic_load(&s->state) != SL_PENDING || !atomic_load(&s->bound)) {
      sched_yield();
      continue;
    }
    int rc = cq_uv_cancel(&s->req);
    c->calls++;
    if (rc == 0)
      c->wins++;
    else
      STORM_CHECK(rc == CQ_ESTATE, "plain cancel: %s", cq_err_name(rc));
  }
  return NULL;
}

/* Blocking acquires with short deadlines from plain threads, alongside. */
struct blocker {
  uint64_t rng;
  long issued, granted, timed_out;
};

static void *mix_blocker_main(void *arg) {
  struct blocker *b = arg;
  cq_grant g;
  cq_grant_init(&g);
  while (!atomic_load(&mx.others_stop)) {
    int k = (int)(storm_rand(&b->rng) % ST_NREQS);
    int64_t deadline = cq_now() - 1 + (int64_t)(storm_rand(&b->rng) % 5);
    b->issued++;
    int rc = cq_grant_acquire(pool, &g, &mx.m.reqs[k].req, deadline);
    if (rc == 0) {
      b->granted++;
      struct st_held h;
      st_hold(&mx.m, &g, k, &h, &b->rng);
      storm_dawdle(&b->rng);
      st_unhold(&mx.m, &h);
      rc = cq_grant_release(pool, &g);
      STORM_CHECK(rc == 0, "blocker release: %s", cq_err_name(rc));
    } else if (rc == CQ_ETIMEDOUT) {
      b->timed_out++;
      st_count_failure(&mx.m, k, rc);
    } else {
      STORM_CHECK(false, "blocker acquire: %s", cq_err_name(rc));
    }
  }
  return NULL;
}

#define MX_RELEASERS 2
#define MX_BLOCKERS 2
#define MX_CANCELLERS_MAX 4

static void run_uv_mixed(const struct mix_params *p) {
  memset(&mx, 0, sizeof(mx));
  mx.p = *p;
  st_model_init(&mx.m, pool, 0xfeed0000u + (uint64_t)p->never_pct, 0);
  mx.stop_at = cq_now() + storm_seconds() * 1000;
  sides_init(SLOTS, mix_arm, NULL, 0x1234u + (uint64_t)p->cancellers);
  st_checker_start(&mx.m);
  pthread_t rel[MX_RELEASERS], blk[MX_BLOCKERS], can[MX_CANCELLERS_MAX];
  struct blocker b[MX_BLOCKERS];
  struct canceller c[MX_CANCELLERS_MAX];
  for (int i = 0; i < MX_RELEASERS; i++)
    assert_int_equal(pthread_create(&rel[i], NULL, mix_releaser_main,
                                    (void *)(uintptr_t)(0xabcu + (unsigned)i)),
                     0);
  for (int i = 0; i < MX_BLOCKERS; i++) {
    memset(&b[i], 0, sizeof(b[i]));
    b[i].rng = 0x3141592653589793ull * (uint64_t)(i + 1);
    assert_int_equal(pthread_create(&blk[i], NULL, mix_blocker_main, &b[i]), 0);
  }
  for (int i = 0; i < p->cancellers; i++) {
    memset(&c[i], 0, sizeof(c[i]));
    c[i].rng = 0x2718281828459045ull * (uint64_t)(i + 1);
    assert_int_equal(pthread_create(&can[i], NULL, mix_canceller_main, &c[i]),
                     0);
  }
  sides_start();
  storm_wait_for(&slots_finished, SIDES * SLOTS, pool, p->name);
  atomic_store(&mx.others_stop, 1);
  long released = 0;
  for (int i = 0; i < MX_RELEASERS; i++) {
    void *ret;
    assert_int_equal(pthread_join(rel[i], &ret), 0);
    released += (long)(intptr_t)ret;
  }
  for (int i = 0; i < MX_BLOCKERS; i++)
    assert_int_equal(pthread_join(blk[i], NULL), 0);
  for (int i = 0; i < p->cancellers; i++)
    assert_int_equal(pthread_join(can[i], NULL), 0);
  sides_stop();
  st_checker_stop(&mx.m);

  long issued = 0, granted = 0, timed = 0, cancelled = 0, fired = 0;
  long wins = 0, calls = 0, b_issued = 0, b_granted = 0;
  for (int i = 0; i < SIDES; i++) {
    for (int j = 0; j < SLOTS; j++) {
      struct slot *s = &sides[i].slots[j];
      /* Every acquire called back exactly once, with one outcome. */
      assert_int_equal(atomic_load(&s->fired), s->issued);
      assert_int_equal(s->issued, s->granted + s->timed_out + s->cancelled);
      assert_int_equal(atomic_load(&s->state), SL_IDLE);
      issued += s->issued;
      granted += s->granted;
      timed += s->timed_out;
      cancelled += s->cancelled;
      fired += atomic_load(&s->fired);
    }
  }
  for (int i = 0; i < p->cancellers; i++) {
    wins += c[i].wins;
    calls += c[i].calls;
  }
  for (int i = 0; i < MX_BLOCKERS; i++) {
    assert_int_equal(b[i].issued, b[i].granted + b[i].timed_out);
    b_issued += b[i].issued;
    b_granted += b[i].granted;
  }
  assert_int_equal(fired, issued);
  print_message("uv %s (%s, scale %.3g): %d loops x %d acquires in flight, "
                "%ld acquires: %ld granted (%ld released by plain threads), "
                "%ld timed out, %ld cancelled (%ld cancels tried); plain "
                "blockers %ld attempts, %ld granted; %lld checks\n",
                p->name, storm_build(), storm_scale(), SIDES, SLOTS, issued,
                granted, released, timed, cancelled, calls, b_issued, b_granted,
                (long long)atomic_load(&mx.m.checks));
  /* A cancel that returned 0 ended exactly one pending acquire. */
  assert_int_equal(wins, cancelled);
  assert_true(granted > 0);
  assert_true(atomic_load(&mx.m.checks) > 0);
  if (p->cancels)
    assert_true(cancelled > 0);
  st_check_quiescent(&mx.m);
}

static void test_uv_mixed_storm_never_over_admits_and_ends_free(void **state) {
  (void)state;
  struct mix_params p = {"mixed storm", 25, 1, 3, storm_n(5000, 60), false};
  run_uv_mixed(&p);
}

static void test_uv_cancel_storm_against_releases_leaks_nothing(void **state) {
  (void)state;
  struct mix_params p = {"cancel storm", 90, 3, 2, storm_n(5000, 60), true};
  run_uv_mixed(&p);
}

/* ------------------------------------------------------------------------ */
/* The timeout storm                                                         */
/* ------------------------------------------------------------------------ */

#define TS_SLOTS                                                               \
  4 /* storm acquires per loop; slot TS_SLOTS is the long one                  \
     */

static struct {
  cq_req req;      /* t:1 */
  cq_req long_req; /* t:1 mark:1 */
  atomic_int stop;
  atomic_int round; /* long waiters wanted for this round */
  atomic_llong timeouts, grants;
  atomic_int long_status[SIDES]; /* 1: not decided */
  atomic_int long_granted;       /* over all rounds */
} ts;

static void ts_cb(cq_uv_req *r, int status);

static void ts_arm(struct slot *s) {
  if (atomic_load(&ts.stop)) {
    slot_finish(s);
    return;
  }
  int64_t deadline = cq_now() + (int64_t)(storm_rand(&s->rng) % 2);
  s->issued++;
  atomic_store(&s->state, SL_PENDING);
  int rc = cq_uv_acquire(s->side->uv, &s->req, &ts.req, deadline, ts_cb);
  if (rc != 0) {
    STORM_CHECK(false, "loop acquire: %s", cq_err_name(rc));
    slot_finish(s);
  }
}

static void ts_cb(cq_uv_req *r, int status) {
  struct slot *s = r->data;
  atomic_fetch_add(&s->fired, 1);
  slot_check_thread(s);
  if (status == 0) {
    atomic_fetch_add(&ts.grants, 1);
    int rc = cq_uv_release(r);
    STORM_CHECK(rc == 0, "loop release: %s", cq_err_name(rc));
  } else if (status == CQ_ETIMEDOUT) {
    atomic_fetch_add(&ts.timeouts, 1);
  } else {
    STORM_CHECK(false, "timeout storm callback: %s", cq_err_name(status));
  }
  slot_ready(s);
}

static void ts_long_cb(cq_uv_req *r, int status) {
  struct slot *s = r->data;
  atomic_fetch_add(&s->fired, 1);
  slot_check_thread(s);
  if (status == 0) {
    atomic_fetch_add(&ts.long_granted, 1);
    int rc = cq_uv_release(r);
    STORM_CHECK(rc == 0, "long waiter release: %s", cq_err_name(rc));
  }
  atomic_store(&s->state, SL_IDLE);
  atomic_store(&ts.long_status[s->side->id], status);
}

/* Each loop starts its long waiter when a new round begins. It waits
 * without a deadline: the round waits for it with a limit, which catches a
 * lost wake-up, and a deadline could only end it early on a slow build. */
static void ts_tick(struct side *sd) {
  int round = atomic_load(&ts.round);
  if (round == sd->seen_round)
    return;
  sd->seen_round = round;
  struct slot *l = &sd->slots[TS_SLOTS];
  l->issued++;
  atomic_store(&l->state, SL_PENDING);
  int rc = cq_uv_acquire(sd->uv, &l->req, &ts.long_req, CQ_NEVER, ts_long_cb);
  STORM_CHECK(rc == 0, "long waiter acquire: %s", cq_err_name(rc));
}

static void run_uv_timeout_storm(bool grow) {
  memset(&ts, 0, sizeof(ts));
  int64_t base = grow ? 1 : SIDES;
  assert_cq_ok(cq_budget_add(pool, "t", base));
  assert_cq_ok(cq_budget_add(pool, "mark", 100));
  cqt_req(&ts.req, pool, "t:1");
  cqt_req(&ts.long_req, pool, "t:1 mark:1");
  cq_req holder_req;
  char spec[32];
  snprintf(spec, sizeof(spec), "t:%lld", (long long)base);
  cqt_req(&holder_req, pool, spec);
  cq_grant holder;
  cq_grant_init(&holder);
  assert_cq_ok(cq_grant_try(pool, &holder, &holder_req));
  long holder_grants = 1;

  sides_init(TS_SLOTS, ts_arm, ts_tick, 0x7777u);
  sides_start();
  int rounds = (int)storm_n(20, 3);
  long per_round = storm_n(2000, 40);
  int64_t stop_at = cq_now() + storm_seconds() * 1000;
  int round = 0;
  for (; round < rounds && (round == 0 || cq_now() < stop_at); round++) {
    int64_t give_up = cq_now() + CQT_PATIENCE_MS;
    storm_await_growth(&ts.timeouts, per_round / 2, give_up);
    for (int i = 0; i < SIDES; i++)
      atomic_store(&ts.long_status[i], 1);
    atomic_store(&ts.round, round + 1);
    while (cqt_budget(pool, "mark").waiting < SIDES && cq_now() < give_up)
      cqt_sleep_ms(1);
    if (cqt_budget(pool, "mark").waiting != SIDES) {
      st_dump_pool(pool);
      fail_msg("round %d: %llu long waiters wait, expected %d", round,
               (unsigned long long)cqt_budget(pool, "mark").waiting, SIDES);
    }
    storm_await_growth(&ts.timeouts, per_round / 2, give_up);
    if (grow)
      assert_cq_ok(cq_budget_set_capacity(pool, "t", base + SIDES));
    else
      assert_cq_ok(cq_grant_release(pool, &holder));
    give_up = cq_now() + CQT_PATIENCE_MS;
    for (int i = 0; i < SIDES; i++) {
      while (atomic_load(&ts.long_status[i]) == 1 && cq_now() < give_up)
        cqt_sleep_ms(1);
      int st = atomic_load(&ts.long_status[i]);
      if (st != 0) {
        st_dump_pool(pool);
        fail_msg("round %d: the long waiter of loop %d ended with %s", round, i,
                 st == 1 ? "nothing: a lost wake-up" : cq_err_name(st));
      }
    }
    if (grow) {
      assert_cq_ok(cq_budget_set_capacity(pool, "t", base));
    } else {
      assert_cq_ok(cq_grant_acquire(pool, &holder, &holder_req,
                                    cq_now() + CQT_PATIENCE_MS));
      holder_grants++;
    }
  }
  atomic_store(&ts.stop, 1);
  storm_wait_for(&slots_finished, SIDES * TS_SLOTS, pool, "uv timeout storm");
  sides_stop();
  assert_cq_ok(cq_grant_release(pool, &holder));

  long issued = 0, fired = 0;
  for (int i = 0; i < SIDES; i++)
    for (int j = 0; j <= TS_SLOTS; j++) {
      issued += sides[i].slots[j].issued;
      fired += atomic_load(&sides[i].slots[j].fired);
    }
  cq_resource_stats st = cqt_budget(pool, "t");
  long long timeouts = atomic_load(&ts.timeouts);
  long long grants = atomic_load(&ts.grants);
  print_message("uv timeout storm (%s, %s): %d loops x %d acquires in "
                "flight, %d rounds, %lld timeouts (%llu of waiters), %lld "
                "storm grants\n",
                grow ? "capacity grows" : "holder releases", storm_build(),
                SIDES, TS_SLOTS, round, timeouts,
                (unsigned long long)st.timeouts, grants);
  assert_int_equal(fired, issued);
  assert_int_equal(atomic_load(&ts.long_granted), round * SIDES);
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.waiting, 0);
  assert_int_equal(st.withheld, 0);
  assert_true(timeouts > 0);
  assert_true(st.timeouts <= (uint64_t)timeouts);
  assert_int_equal(st.grants,
                   (uint64_t)(grants + holder_grants + (long)round * SIDES));
}

static void
test_uv_timeout_storm_loses_no_wakeup_when_capacity_grows(void **state) {
  (void)state;
  run_uv_timeout_storm(true);
}

static void
test_uv_timeout_storm_loses_no_wakeup_when_the_holder_releases(void **state) {
  (void)state;
  run_uv_timeout_storm(false);
}

/* ------------------------------------------------------------------------ */
/* A cancel racing a new acquire of the same req                             */
/* ------------------------------------------------------------------------ */

static struct {
  uv_loop_t loop;
  cq_uv *uv;
  uv_idle_t idle;
  cq_req req;
  cq_uv_req ureq;
  long rounds, done_rounds;
  int64_t give_up;
  atomic_int started, done;
  atomic_long cancels;
} rr;

static void rr_cb(cq_uv_req *r, int status) {
  STORM_CHECK(status == 0, "uncontended acquire: %s", cq_err_name(status));
  if (status == 0) {
    int rc = cq_uv_release(r);
    STORM_CHECK(rc == 0, "release: %s", cq_err_name(rc));
  }
}

/* Acquires the same req over and over; each fits at once. After the
 * first, which binds the req, it waits for the canceller to be cancelling,
 * so that they race even in the shortest run. */
static void rr_idle_cb(uv_idle_t *h) {
  (void)h;
  if (rr.done_rounds == 1 && atomic_load(&rr.cancels) == 0) {
    if (cq_now() <= rr.give_up)
      return; /* the loop turns again */
    STORM_CHECK(false, "no cancel came in %d s", CQT_PATIENCE_MS / 1000);
  }
  long batch = rr.done_rounds == 0 ? 1 : 64;
  for (long i = 0; i < batch && rr.done_rounds < rr.rounds;
       i++, rr.done_rounds++) {
    int rc = cq_uv_acquire(rr.uv, &rr.ureq, &rr.req, CQ_NEVER, rr_cb);
    STORM_CHECK(rc == 0, "acquire: %s", cq_err_name(rc));
    atomic_store(&rr.started, 1);
  }
  if (rr.done_rounds < rr.rounds)
    return;
  atomic_store(&rr.done, 1);
  (void)uv_idle_stop(&rr.idle);
  uv_close((uv_handle_t *)&rr.idle, NULL);
  int rc = cq_uv_close(rr.uv, NULL);
  STORM_CHECK(rc == 0, "close: %s", cq_err_name(rc));
}

static void *rr_canceller_main(void *arg) {
  (void)arg;
  while (!atomic_load(&rr.started) && cq_now() <= rr.give_up)
    sched_yield();
  STORM_CHECK(atomic_load(&rr.started), "no acquire started in %d s",
              CQT_PATIENCE_MS / 1000);
  while (atomic_load(&rr.started) && !atomic_load(&rr.done)) {
    int rc = cq_uv_cancel(&rr.ureq);
    STORM_CHECK(rc == CQ_ESTATE, "cancel: %s", cq_err_name(rc));
    atomic_fetch_add(&rr.cancels, 1);
  }
  return NULL;
}

/*
 * The header lets any thread cancel a pending acquire, and such a thread
 * cannot know whether the loop has meanwhile seen the outcome and acquired
 * again with the same req: the cancel then finds nothing pending (or ends
 * the new attempt). Here every acquire fits at once, so every cancel must
 * find nothing to cancel.
 *
 * The storms found a race here, since fixed: cq_uv_cancel()
 * read the req's pool while cq_uv_acquire() on the loop cleared the req
 * with memset() and bound it again, a data race that also returned
 * CQ_EINVAL when it read the cleared field. The adapter now keeps the pool
 * atomic and never clears it once an attempt with it was accepted. This test
 * guards the fix (the data race under ThreadSanitizer, CQ_EINVAL on any build),
 * and the storms above cancel without a lock of their own.
 */
static void
test_uv_cancel_racing_a_new_acquire_finds_nothing_to_cancel(void **state) {
  (void)state;
  memset(&rr, 0, sizeof(rr));
  assert_cq_ok(cq_budget_add(pool, "free", 1000));
  cqt_req(&rr.req, pool, "free:1");
  cq_uv_req_init(&rr.ureq);
  rr.rounds = storm_n(100000, 2000);
  rr.give_up = cq_now() + CQT_PATIENCE_MS;
  assert_int_equal(uv_loop_init(&rr.loop), 0);
  assert_cq_ok(cq_uv_init(&rr.uv, &rr.loop, pool, NULL));
  assert_int_equal(uv_idle_init(&rr.loop, &rr.idle), 0);
  assert_int_equal(uv_idle_start(&rr.idle, rr_idle_cb), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, rr_canceller_main, NULL), 0);
  assert_int_equal(uv_run(&rr.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(uv_loop_close(&rr.loop), 0);
  long cancels = atomic_load(&rr.cancels);
  print_message("uv cancel race (%s): %ld acquires, %ld cancels\n",
                storm_build(), rr.rounds, cancels);
  storm_assert_no_failures();
  assert_true(cancels > 0);
  cq_resource_stats st = cqt_budget(pool, "free");
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.grants, (uint64_t)rr.rounds);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_uv_mixed_storm_never_over_admits_and_ends_free),
      T(test_uv_cancel_storm_against_releases_leaks_nothing),
      T(test_uv_timeout_storm_loses_no_wakeup_when_capacity_grows),
      T(test_uv_timeout_storm_loses_no_wakeup_when_the_holder_releases),
      T(test_uv_cancel_racing_a_new_acquire_finds_nothing_to_cancel),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
