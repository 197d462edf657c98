/*
 * The libuv adapter's speed: grants per second delivered through
 * a loop, with every release coming from another thread, against a raw
 * uv_async_send ping-pong between the same two threads in the same run.
 *
 * Both are round trips with one wake-up each way. Ours, on a budget of 1:
 * the thread releases while the loop's request is pending (waking the loop
 * through the adapter's async handle); the loop's callback releases to the
 * thread, already blocked in cq_grant_acquire again, and acquires anew once
 * the thread holds the unit, so that every grant the loop gets comes from
 * the thread. Raw: the thread sends on an async handle and the loop's async
 * callback posts a semaphore the thread waits on. Goal: at least half the
 * raw rate.
 */
#include "harness.h"

#include <cronoq/cronoq_uv.h>

#include <stdio.h>
#include <string.h>

static void must(int rc, const char *what) {
  if (rc != 0)
    cqb_fail("%s: %s", what, cq_err_name(rc));
}

struct uvpp {
  long rounds;
  uv_loop_t loop;
  cq_pool *pool;
  cq_uv *uv;
  cq_req req;
  cq_uv_req ureq[2]; /* the loop alternates between two requests */
  cq_uv_req *held;   /* the one holding the unit, while the idle retries */
  uv_idle_t idle;
  long loop_grants;
  long thread_grants;
  int failed;
  /* raw */
  uv_async_t async;
  uv_sem_t sem;
  long raw_rounds;
};

static uint64_t waiting(struct uvpp *p) {
  cq_pool_stats st;
  must(cq_pool_stats_get(p->pool, &st), "stats");
  return st.waiting;
}

static void granted(cq_uv_req *r, int status);
static void idle_cb(uv_idle_t *h);

/*
 * The loop holds the unit through req `held`. Once the thread waits for the
 * unit again, queue the loop's other req behind it, then release: the
 * release goes to the thread (the older waiter), and the thread's next
 * release to the loop's req. Until the thread waits, retry from an idle
 * handle.
 */
static void pass_back(struct uvpp *p, cq_uv_req *held) {
  if (waiting(p) == 0) {
    p->held = held;
    uv_idle_start(&p->idle, idle_cb);
    return;
  }
  uv_idle_stop(&p->idle);
  cq_uv_req *next = held == &p->ureq[0] ? &p->ureq[1] : &p->ureq[0];
  must(cq_uv_acquire(p->uv, next, &p->req, CQ_NEVER, granted), "re-acquire");
  must(cq_uv_release(held), "loop release");
}

static void idle_cb(uv_idle_t *h) {
  struct uvpp *p = h->data;
  pass_back(p, p->held);
}

static void granted(cq_uv_req *r, int status) {
  struct uvpp *p = r->data;
  if (status != 0) {
    p->failed = 1;
    return;
  }
  p->loop_grants++;
  if (p->loop_grants < p->rounds) {
    pass_back(p, r);
  } else {
    must(cq_uv_release(r), "loop release");
    uv_close((uv_handle_t *)&p->idle, NULL);
    must(cq_uv_close(p->uv, NULL), "close");
  }
}

static void cronoq_thread(void *arg) {
  struct uvpp *p = arg;
  cqb_pin_to(1);
  cq_grant g;
  cq_grant_init(&g);
  for (long i = 1; i < p->rounds; i++) {
    if (cq_grant_acquire(p->pool, &g, &p->req, CQ_NEVER) != 0) {
      p->failed = 1;
      return;
    }
    p->thread_grants++;
    cq_pool_stats st;
    do { /* the loop's request waits: the release goes to it */
      must(cq_pool_stats_get(p->pool, &st), "stats");
    } while (st.waiting == 0);
    if (cq_grant_release(p->pool, &g) != 0) {
      p->failed = 1;
      return;
    }
  }
}

static double rep_adapter(void *arg) {
  struct uvpp *p = arg;
  p->loop_grants = p->thread_grants = 0;
  p->failed = 0;
  must(uv_loop_init(&p->loop) == 0 ? 0 : CQ_ESYS, "loop");
  /* Strict order: the thread's blocking acquire claims at once, so that
   * the loop's release goes to it and not to the loop's younger request
   * (in a barging window the thread would not claim, the loop would take
   * every grant, and the thread would wait for ever). */
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_STRICT_ORDER;
  must(cq_pool_create(&p->pool, &cfg), "pool");
  must(cq_budget_add(p->pool, "b", 1), "budget");
  must(cq_req_init(&p->req, p->pool), "req");
  must(cq_req_add(&p->req, "b", 1), "req add");
  must(cq_uv_init(&p->uv, &p->loop, p->pool, NULL), "adapter");
  uv_idle_init(&p->loop, &p->idle);
  p->idle.data = p;
  for (int i = 0; i < 2; i++) {
    cq_uv_req_init(&p->ureq[i]);
    p->ureq[i].data = p;
  }
  /* The thread takes the unit first; then the loop's request waits. */
  cq_grant first;
  cq_grant_init(&first);
  must(cq_grant_try(p->pool, &first, &p->req), "first");
  must(cq_uv_acquire(p->uv, &p->ureq[0], &p->req, CQ_NEVER, granted),
       "acquire");
  must(cq_grant_release(p->pool, &first), "first release"); /* to the loop */
  int64_t t0 = cqb_now_ns();
  uv_thread_t t;
  uv_thread_create(&t, cronoq_thread, p);
  uv_run(&p->loop, UV_RUN_DEFAULT);
  uv_thread_join(&t);
  int64_t t1 = cqb_now_ns();
  int closed = uv_loop_close(&p->loop);
  must(cq_pool_destroy(p->pool), "destroy");
  if (p->failed || closed != 0 || p->loop_grants != p->rounds ||
      p->thread_grants != p->rounds - 1)
    return -1;
  return (double)p->loop_grants / ((double)(t1 - t0) / 1e9);
}

static void raw_async_cb(uv_async_t *a) {
  struct uvpp *p = a->data;
  p->raw_rounds++;
  uv_sem_post(&p->sem);
  if (p->raw_rounds == p->rounds)
    uv_close((uv_handle_t *)a, NULL);
}

static void raw_thread(void *arg) {
  struct uvpp *p = arg;
  cqb_pin_to(1);
  for (long i = 0; i < p->rounds; i++) {
    uv_async_send(&p->async);
    uv_sem_wait(&p->sem);
  }
}

static double rep_raw(void *arg) {
  struct uvpp *p = arg;
  p->raw_rounds = 0;
  if (uv_loop_init(&p->loop) != 0 || uv_sem_init(&p->sem, 0) != 0 ||
      uv_async_init(&p->loop, &p->async, raw_async_cb) != 0)
    return -1;
  p->async.data = p;
  int64_t t0 = cqb_now_ns();
  uv_thread_t t;
  uv_thread_create(&t, raw_thread, p);
  uv_run(&p->loop, UV_RUN_DEFAULT);
  uv_thread_join(&t);
  int64_t t1 = cqb_now_ns();
  uv_sem_destroy(&p->sem);
  if (uv_loop_close(&p->loop) != 0 || p->raw_rounds != p->rounds)
    return -1;
  return (double)p->raw_rounds / ((double)(t1 - t0) / 1e9);
}

void cqb_micro_uv(void) {
  struct uvpp p;
  memset(&p, 0, sizeof(p));
  p.rounds = cqb_opts.size == CQB_QUICK  ? 5000
             : cqb_opts.size == CQB_FULL ? 200000
                                         : 30000;
  /* In turns, so that both see the same machine. */
  double raw[64], ours[64];
  cqb_pin_to(0); /* the loop's thread; the other one is pinned to CPU 1 */
  for (int rep = 0; rep < cqb_opts.reps; rep++) {
    raw[rep] = rep_raw(&p);
    ours[rep] = rep_adapter(&p);
    if (raw[rep] < 0 || ours[rep] < 0)
      cqb_fail("libuv adapter: the benchmark's own check failed");
  }
  cqb_unpin();
  struct cqb_stat r = cqb_summarise(raw, cqb_opts.reps);
  struct cqb_stat o = cqb_summarise(ours, cqb_opts.reps);
  cqb_figure_min("libuv", "grants/s through the loop, releases elsewhere",
                 "grants/s", o, "raw uv_async_send ping-pong", &r, 0.5);
  cqb_progress_tick("libuv adapter");
}

int cqb_micro_uv_plan(void) { return 1; }
