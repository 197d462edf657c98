/*
 * What host schedulers need: worker caps (classes) and headroom, startup
 * validation of a task set, the lone-request allowance, the room query, and
 * live capacity changes. Every parallelism test asserts that the expected
 * parallelism is reached, not only that it is never exceeded.
 */
#define CQT_POOL_FIXTURE
#include "support/cqt.h"

#include <stdatomic.h>
#include <stdbool.h>

static int64_t headroom(const cq_req *r) {
  int64_t n = -1;
  assert_cq_ok(cq_req_headroom(pool, r, &n));
  return n;
}

/* Take copies of `r` with try until one is refused; returns how many. */
static int fill(cq_grant *g, int max, const cq_req *r) {
  int n = 0;
  while (n < max) {
    cq_grant_init(&g[n]);
    int rc = cq_grant_try(pool, &g[n], r);
    if (rc == CQ_EBUSY)
      break;
    assert_cq_ok(rc);
    n++;
  }
  return n;
}

static void release_all(cq_grant *g, int n) {
  for (int i = 0; i < n; i++)
    assert_cq_ok(cq_grant_release(pool, &g[i]));
}

/* A request of class `cls` plus the items of `spec` ("" for none). */
static void class_req(cq_req *r, const char *cls, const char *spec) {
  cqt_req(r, pool, spec);
  assert_cq_ok(cq_req_set_class(r, cls));
}

/* ------------------------------------------------------------------------ */
/* 1. Classes and headroom                                                   */
/* ------------------------------------------------------------------------ */

static void
test_without_resources_only_max_workers_caps_concurrency(void **state) {
  (void)state;
  assert_cq_ok(cq_class_add(pool, "predict", 3));
  cq_req r;
  class_req(&r, "predict", "");
  assert_int_equal(headroom(&r), 3);
  cq_grant g[8];
  assert_int_equal(fill(g, 8, &r), 3); /* reaches 3, and no more */
  assert_int_equal(headroom(&r), 0);
  assert_int_equal(cqt_budget(pool, "predict").in_use, 3);
  release_all(g, 3);
  assert_int_equal(headroom(&r), 3);
}

static void test_budget_smaller_than_max_workers_caps_the_task(void **state) {
  (void)state;
  assert_cq_ok(cq_class_add(pool, "train", 5));
  assert_cq_ok(cq_budget_add(pool, "warehouse-db", 2));
  cq_req r;
  class_req(&r, "train", "warehouse-db:1");
  assert_int_equal(headroom(&r), 2);
  cq_grant g[8];
  assert_int_equal(fill(g, 8, &r), 2);
  assert_int_equal(headroom(&r), 0);
  assert_int_equal(cqt_budget(pool, "train").in_use, 2);
  release_all(g, 2);
}

static void
test_two_tasks_sharing_a_budget_of_four_never_exceed_four(void **state) {
  (void)state;
  assert_cq_ok(cq_class_add(pool, "a", 3));
  assert_cq_ok(cq_class_add(pool, "b", 3));
  assert_cq_ok(cq_budget_add(pool, "shared", 4));
  cq_req ra, rb;
  class_req(&ra, "a", "shared:1");
  class_req(&rb, "b", "shared:1");
  cq_grant ga[4], gb[4];
  assert_int_equal(fill(ga, 4, &ra), 3); /* a reaches its max_workers */
  assert_int_equal(headroom(&rb), 1);
  assert_int_equal(fill(gb, 4, &rb), 1); /* b gets what is left: 4 in all */
  assert_int_equal(cqt_budget(pool, "shared").in_use, 4);
  assert_int_equal(headroom(&ra), 0);
  assert_int_equal(headroom(&rb), 0);
  assert_cq_ok(cq_grant_release(pool, &ga[0]));
  assert_int_equal(headroom(&rb), 1);
  cq_grant more;
  cq_grant_init(&more);
  assert_cq_ok(cq_grant_try(pool, &more, &rb));
  assert_int_equal(cqt_budget(pool, "shared").in_use, 4);
  release_all(ga + 1, 2);
  release_all(gb, 1);
  assert_cq_ok(cq_grant_release(pool, &more));
}

struct worker_arg {
  cq_req *req;
  atomic_int *running;
  atomic_int *peak;
  atomic_int *all_running;
  int rounds;
};

static void *task_worker(void *p) {
  struct worker_arg *a = p;
  cq_grant g;
  cq_grant_init(&g);
  for (int i = 0; i < a->rounds; i++) {
    if (cq_grant_acquire(pool, &g, a->req, CQ_NEVER) != 0)
      return (void *)1;
    int now = atomic_fetch_add(a->running, 1) + 1;
    int all = atomic_fetch_add(a->all_running, 1) + 1;
    int peak = atomic_load(a->peak);
    while (now > peak && !atomic_compare_exchange_weak(a->peak, &peak, now)) {
    }
    (void)all;
    cqt_sleep_ms(1);
    atomic_fetch_sub(a->all_running, 1);
    atomic_fetch_sub(a->running, 1);
    if (cq_grant_release(pool, &g) != 0)
      return (void *)1;
  }
  return NULL;
}

/* Threads of two tasks against a shared budget: together they never hold
 * more than it, and between them they do fill it. */
static void
test_threads_of_two_tasks_fill_but_never_exceed_the_budget(void **state) {
  (void)state;
  assert_cq_ok(cq_class_add(pool, "a", 3));
  assert_cq_ok(cq_class_add(pool, "b", 3));
  assert_cq_ok(cq_budget_add(pool, "shared", 4));
  cq_req ra, rb;
  class_req(&ra, "a", "shared:1");
  class_req(&rb, "b", "shared:1");
  atomic_int run_a = 0, run_b = 0, peak_a = 0, peak_b = 0, all = 0;
  pthread_t th[8];
  struct worker_arg args[8];
  for (int i = 0; i < 8; i++) {
    args[i] = (struct worker_arg){i < 4 ? &ra : &rb, i < 4 ? &run_a : &run_b,
                                  i < 4 ? &peak_a : &peak_b, &all, 100};
    assert_int_equal(pthread_create(&th[i], NULL, task_worker, &args[i]), 0);
  }
  for (int i = 0; i < 8; i++) {
    void *ret;
    assert_int_equal(pthread_join(th[i], &ret), 0);
    assert_null(ret);
  }
  cq_resource_stats shared = cqt_budget(pool, "shared");
  assert_int_equal(shared.peak, 4); /* reached, never exceeded */
  assert_int_equal(cqt_budget(pool, "a").peak, 3);
  assert_int_equal(cqt_budget(pool, "b").peak, 3);
  assert_true(atomic_load(&peak_a) <= 3 && atomic_load(&peak_b) <= 3);
  assert_int_equal(shared.in_use, 0);
}

static void
test_two_tasks_on_disjoint_budgets_both_reach_max_workers(void **state) {
  (void)state;
  assert_cq_ok(cq_class_add(pool, "a", 3));
  assert_cq_ok(cq_class_add(pool, "b", 2));
  assert_cq_ok(cq_budget_add(pool, "x", 10));
  assert_cq_ok(cq_budget_add(pool, "y", 10));
  cq_req ra, rb;
  class_req(&ra, "a", "x:2");
  class_req(&rb, "b", "y:3");
  cq_grant ga[8], gb[8];
  assert_int_equal(fill(ga, 8, &ra), 3);
  assert_int_equal(fill(gb, 8, &rb), 2);
  assert_int_equal(cqt_budget(pool, "x").in_use, 6);
  assert_int_equal(cqt_budget(pool, "y").in_use, 6);
  release_all(ga, 3);
  release_all(gb, 2);
}

struct problems {
  int n;
  char msg[8][256];
  size_t task[8];
};

static void collect(size_t task, int err, const char *message, void *arg) {
  struct problems *p = arg;
  (void)err;
  if (p->n < 8) {
    p->task[p->n] = task;
    snprintf(p->msg[p->n], sizeof(p->msg[0]), "%s", message);
    p->n++;
  }
}

static void test_requirements_above_the_budget_fail_validation(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 1, NULL));
  assert_cq_ok(cq_budget_add(pool, "memory_mib", 24576));
  assert_cq_ok(cq_class_add(pool, "etl", 0));
  cq_req predict, load, fits, etl;
  assert_cq_ok(cq_req_init(&predict, pool));
  assert_cq_ok(cq_req_add_devices(&predict, "gpu", 8));
  cqt_req(&load, pool, "memory_mib:30000");
  cqt_req(&fits, pool, "memory_mib:1024");
  class_req(&etl, "etl", "");
  cq_task tasks[] = {
      {"predict", &predict}, {"fits", &fits}, {"load", &load}, {"etl", &etl}};
  struct problems p;
  memset(&p, 0, sizeof(p));
  assert_cq_err(cq_tasks_validate(pool, tasks, 4, collect, &p), CQ_ENEVER);
  assert_int_equal(p.n, 3); /* every problem, not only the first */
  assert_int_equal(p.task[0], 0);
  assert_string_equal(
      p.msg[0], "task \"predict\" requires gpu:8 but the pool only has 1");
  assert_int_equal(p.task[1], 2);
  assert_string_equal(
      p.msg[1], "task \"load\" requires memory_mib:30000 but the pool only "
                "has 24576");
  assert_int_equal(p.task[2], 3);
  assert_string_equal(p.msg[2],
                      "task \"etl\" is of class etl, whose max_workers is 0");
  assert_cq_ok(cq_tasks_validate(pool, &tasks[1], 1, collect, &p));
  assert_int_equal(p.n, 3);
  /* And acquiring such a request fails at once instead of waiting. */
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_err(cq_grant_acquire(pool, &g, &predict, CQ_NEVER), CQ_ENEVER);
}

static void test_headroom_grows_as_an_upstream_task_drains(void **state) {
  (void)state;
  assert_cq_ok(cq_class_add(pool, "upstream", 4));
  assert_cq_ok(cq_class_add(pool, "downstream", 3));
  assert_cq_ok(cq_budget_add(pool, "cpu", 4));
  cq_req up, down;
  class_req(&up, "upstream", "cpu:1");
  class_req(&down, "downstream", "cpu:1");
  cq_grant gu[4];
  assert_int_equal(fill(gu, 4, &up), 4);
  assert_int_equal(headroom(&down), 0);
  assert_cq_ok(cq_grant_release(pool, &gu[0]));
  assert_int_equal(headroom(&down), 1);
  assert_cq_ok(cq_grant_release(pool, &gu[1]));
  assert_int_equal(headroom(&down), 2);
  release_all(gu + 2, 2);
  assert_int_equal(headroom(&down), 3); /* now its own max_workers caps it */
  cq_grant gd[4];
  assert_int_equal(fill(gd, 4, &down), 3);
  release_all(gd, 3);
}

static void test_headroom_counts_what_waiters_have_claimed(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 10));
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  cq_req six, two, big, half;
  cqt_req(&six, pool, "b:6");
  cqt_req(&two, pool, "b:2");
  cqt_req(&big, pool, "b:8");
  assert_cq_ok(cq_req_init(&half, pool));
  assert_cq_ok(cq_req_add_fraction(&half, "gpu", 500));
  assert_int_equal(headroom(&two), 5);
  assert_int_equal(headroom(&half), 4);
  cq_grant h;
  cq_grant_init(&h);
  assert_cq_ok(cq_grant_try(pool, &h, &six)); /* 4 free */
  cqt_slot w;
  cqt_slot_init(&w, &rec, "W");
  assert_cq_ok(cq_grant_submit(pool, &w.grant, &big, CQ_NEVER, cqt_record_cb));
  assert_int_equal(headroom(&two), 0); /* the 4 free are withheld for W */
  assert_cq_ok(cq_grant_cancel(pool, &w.grant));
  assert_int_equal(headroom(&two), 2);
  assert_cq_ok(cq_grant_release(pool, &h));
  cq_req empty;
  assert_cq_ok(cq_req_init(&empty, pool));
  assert_int_equal(headroom(&empty), INT64_MAX);
}

/* ------------------------------------------------------------------------ */
/* 2. Lone-request allowance                                                 */
/* ------------------------------------------------------------------------ */

static void
test_lone_request_is_admitted_alone_and_holds_everything(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add_ex(pool, "memory_mib", 24576, CQ_BUDGET_LONE));
  assert_cq_ok(cq_budget_add(pool, "strict", 10));
  cq_req big, over;
  cqt_req(&big, pool, "memory_mib:65536");
  cqt_req(&over, pool, "strict:11");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &big));
  assert_int_equal(cq_grant_held(&g, "memory_mib"), 24576);
  assert_int_equal(cqt_budget(pool, "memory_mib").in_use, 24576);
  assert_cq_ok(cq_grant_release(pool, &g));
  assert_int_equal(cqt_budget(pool, "memory_mib").in_use, 0);
  /* Without the option the same request is refused at submission. */
  assert_cq_err(cq_grant_try(pool, &g, &over), CQ_ENEVER);
}

static void
test_lone_request_waits_for_others_and_is_not_starved(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add_ex(pool, "memory_mib", 100, CQ_BUDGET_LONE));
  cq_req small, big;
  cqt_req(&small, pool, "memory_mib:10");
  cqt_req(&big, pool, "memory_mib:150");
  cq_grant held;
  cq_grant_init(&held);
  assert_cq_ok(cq_grant_try(pool, &held, &small));
  cqt_slot lone, later;
  cqt_slot_init(&lone, &rec, "LONE");
  assert_cq_ok(
      cq_grant_submit(pool, &lone.grant, &big, CQ_NEVER, cqt_record_cb));
  assert_log(&rec, "");
  /* Small requests that keep coming do not overtake it. */
  cq_grant t;
  cq_grant_init(&t);
  assert_cq_err(cq_grant_try(pool, &t, &small), CQ_EBUSY);
  cqt_slot_init(&later, &rec, "LATER");
  assert_cq_ok(
      cq_grant_submit(pool, &later.grant, &small, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_grant_release(pool, &held));
  assert_log(&rec, "LONE");
  assert_int_equal(cq_grant_held(&lone.grant, "memory_mib"), 100);
  /* While it holds the budget, everything else waits. */
  assert_cq_err(cq_grant_try(pool, &t, &small), CQ_EBUSY);
  assert_cq_ok(cq_grant_release(pool, &lone.grant));
  assert_log(&rec, "LONE LATER");
  assert_cq_ok(cq_grant_release(pool, &later.grant));
}

/*
 * A lone budget of capacity 0 (declared so, or shrunk to 0 to drain a
 * machine) grants nothing: a lone request needs the whole capacity and at
 * least one unit, so every request waits until the capacity comes back,
 * and then they run one at a time. Once every lone request was granted at
 * once, each holding nothing.
 */
static void test_lone_requests_wait_while_the_capacity_is_zero(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add_ex(pool, "mem", 0, CQ_BUDGET_LONE));
  cq_req lone, small;
  cqt_req(&lone, pool, "mem:50");
  cqt_req(&small, pool, "mem:1");
  cq_grant t;
  cq_grant_init(&t);
  assert_cq_err(cq_grant_try(pool, &t, &lone), CQ_EBUSY);
  assert_cq_err(cq_grant_try(pool, &t, &small), CQ_EBUSY);
  int64_t copies = -1;
  assert_cq_ok(cq_req_headroom(pool, &lone, &copies));
  assert_int_equal(copies, 0);
  cqt_slot a, b, c;
  cqt_slot_init(&a, &rec, "A");
  cqt_slot_init(&b, &rec, "B");
  cqt_slot_init(&c, &rec, "C");
  assert_cq_ok(cq_grant_submit(pool, &a.grant, &lone, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_grant_submit(pool, &b.grant, &lone, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(
      cq_grant_submit(pool, &c.grant, &small, CQ_NEVER, cqt_record_cb));
  assert_log(&rec, ""); /* nobody holds nothing */
  /* The capacity comes back: one lone request at a time, then the rest. */
  assert_cq_ok(cq_budget_set_capacity(pool, "mem", 10));
  assert_log(&rec, "A");
  assert_int_equal(cq_grant_held(&a.grant, "mem"), 10);
  assert_cq_ok(cq_grant_release(pool, &a.grant));
  assert_log(&rec, "A B");
  assert_cq_ok(cq_grant_release(pool, &b.grant));
  assert_log(&rec, "A B C");
  /* Drained again while C holds: new lone requests wait, C keeps its unit. */
  assert_cq_ok(cq_budget_set_capacity(pool, "mem", 0));
  assert_cq_ok(cq_grant_submit(pool, &a.grant, &lone, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_grant_release(pool, &c.grant));
  assert_log(&rec, "A B C");
  assert_int_equal(cqt_waiting(pool), 1);
  assert_cq_ok(cq_budget_set_capacity(pool, "mem", 4));
  assert_log(&rec, "A B C A");
  assert_cq_ok(cq_grant_release(pool, &a.grant));
}

/*
 * A lone grant runs alone whatever the capacity does while it holds the
 * budget: a capacity that grows under it opens nothing, to the lock-free
 * path (a try of a budget-only request) as to waiters, until it is
 * released.
 */
static void
test_a_lone_grant_stays_alone_when_the_capacity_grows(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add_ex(pool, "mem", 2, CQ_BUDGET_LONE));
  cq_req lone, small;
  cqt_req(&lone, pool, "mem:5");
  cqt_req(&small, pool, "mem:1");
  cq_grant g, t;
  cq_grant_init(&g);
  cq_grant_init(&t);
  assert_cq_ok(cq_grant_try(pool, &g, &lone));
  assert_int_equal(cq_grant_held(&g, "mem"), 2);
  assert_cq_ok(cq_budget_set_capacity(pool, "mem", 100));
  assert_cq_err(cq_grant_try(pool, &t, &small), CQ_EBUSY);
  assert_cq_err(cq_grant_try(pool, &t, &lone), CQ_EBUSY);
  int64_t copies = -1;
  assert_cq_ok(cq_req_headroom(pool, &small, &copies));
  assert_int_equal(copies, 0);
  cqt_slot w;
  cqt_slot_init(&w, &rec, "W");
  assert_cq_ok(
      cq_grant_submit(pool, &w.grant, &small, CQ_NEVER, cqt_record_cb));
  /* Giving units back early does not end it: it still runs alone. */
  assert_cq_ok(cq_grant_release_part(pool, &g, "mem", 2));
  assert_int_equal(cq_grant_held(&g, "mem"), 0);
  assert_cq_err(cq_grant_try(pool, &t, &small), CQ_EBUSY);
  assert_log(&rec, "");
  assert_cq_ok(cq_grant_release(pool, &g));
  assert_log(&rec, "W");
  assert_cq_ok(cq_grant_try(pool, &t, &small)); /* open again, lock-free */
  assert_cq_ok(cq_grant_release(pool, &t));
  assert_cq_ok(cq_grant_release(pool, &w.grant));
  assert_int_equal(cqt_budget(pool, "mem").in_use, 0);
}

/* ------------------------------------------------------------------------ */
/* 3. Room query                                                             */
/* ------------------------------------------------------------------------ */

static int64_t room_of(const cq_room *r, const char *name) {
  for (size_t i = 0; i < r->count; i++)
    if (strcmp(r->items[i].name, name) == 0)
      return r->items[i].units;
  fail_msg("no room item %s", name);
  return -1;
}

/* Hold `jobs` jobs using `mib` and `cpus` in all (spread over the jobs). */
static void hold_jobs(cq_grant *g, int jobs, int64_t mib, int64_t cpus,
                      bool limits) {
  for (int i = 0; i < jobs; i++) {
    cq_req r;
    char spec[96] = "";
    if (limits)
      snprintf(spec, sizeof(spec), "memory_mib:%lld cpu:%lld",
               (long long)(mib / jobs), (long long)(cpus / jobs));
    class_req(&r, "jobs", spec);
    cq_grant_init(&g[i]);
    assert_cq_ok(cq_grant_try(pool, &g[i], &r));
  }
}

static void test_room_query_matches_the_table(void **state) {
  (void)state;
  assert_cq_ok(cq_class_add(pool, "jobs", 3));
  assert_cq_ok(cq_budget_add_ex(pool, "memory_mib", 24576, CQ_BUDGET_LONE));
  assert_cq_ok(cq_budget_add_ex(pool, "cpu", 8, CQ_BUDGET_LONE));
  cq_room room;
  cq_grant g[3];

  /* max 3 jobs, 24576 MiB, 8 CPUs; nothing in use: everything */
  assert_cq_ok(cq_pool_room(pool, "jobs", &room));
  assert_int_equal(room.kind, CQ_ROOM_EVERYTHING);

  /* 1 job, 8192 MiB, 4 CPUs: 16384 MiB, 4 CPUs */
  hold_jobs(g, 1, 8192, 4, true);
  assert_cq_ok(cq_pool_room(pool, "jobs", &room));
  assert_int_equal(room.kind, CQ_ROOM_LIMITED);
  assert_int_equal(room_of(&room, "memory_mib"), 16384);
  assert_int_equal(room_of(&room, "cpu"), 4);
  release_all(g, 1);

  /* 2 jobs, 16384 MiB, 8 CPUs: none (no CPU left) */
  hold_jobs(g, 2, 16384, 8, true);
  assert_cq_ok(cq_pool_room(pool, "jobs", &room));
  assert_int_equal(room.kind, CQ_ROOM_NONE);
  assert_int_equal(room_of(&room, "cpu"), 0);
  release_all(g, 2);

  /* 3 jobs, 1024 MiB, 1 CPU: none (at max jobs) */
  hold_jobs(g, 1, 1024, 1, true);
  hold_jobs(g + 1, 2, 0, 0, false);
  assert_cq_ok(cq_pool_room(pool, "jobs", &room));
  assert_int_equal(room.kind, CQ_ROOM_NONE);
  release_all(g, 3);
}

static void test_room_query_with_a_job_cap_only(void **state) {
  (void)state;
  cq_room room;
  cq_grant g[2];
  /* max 1 job, 1 job: none */
  assert_cq_ok(cq_class_add(pool, "jobs", 1));
  hold_jobs(g, 1, 0, 0, false);
  assert_cq_ok(cq_pool_room(pool, "jobs", &room));
  assert_int_equal(room.kind, CQ_ROOM_NONE);
  release_all(g, 1);
  /* max 2 jobs, no memory or CPU limits, 1 job: unlimited */
  assert_cq_ok(cq_class_set_max(pool, "jobs", 2));
  hold_jobs(g, 1, 0, 0, false);
  assert_cq_ok(cq_pool_room(pool, "jobs", &room));
  assert_int_equal(room.kind, CQ_ROOM_UNLIMITED);
  assert_int_equal(room.count, 0);
  release_all(g, 1);
  assert_cq_err(cq_pool_room(pool, "nope", &room), CQ_ENOENT);
}

static void test_room_counts_devices_and_reservations(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  assert_cq_ok(cq_budget_add(pool, "cpu", 8));
  cq_req q, big;
  assert_cq_ok(cq_req_init(&q, pool));
  assert_cq_ok(cq_req_add_fraction(&q, "gpu", 250));
  assert_cq_ok(cq_req_init(&big, pool));
  assert_cq_ok(cq_req_add_fraction(&big, "gpu", 900));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &q));
  cq_room room;
  assert_cq_ok(cq_pool_room(pool, NULL, &room));
  assert_int_equal(room.kind, CQ_ROOM_LIMITED);
  assert_string_equal(room.items[0].name, "gpu"); /* devices come first */
  assert_int_equal(room.items[0].units, 1750);
  assert_int_equal(room.items[0].largest_milli, 1000);
  assert_int_equal(room.items[0].whole, 1);
  /* A 0.9 waiter would reserve the device with the most free: device 1. */
  cq_grant g2;
  cq_grant_init(&g2);
  assert_cq_ok(cq_grant_try(pool, &g2, &big)); /* lands on device 1 */
  cqt_slot w;
  cqt_slot_init(&w, &rec, "W");
  assert_cq_ok(cq_grant_submit(pool, &w.grant, &big, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_pool_room(pool, NULL, &room));
  assert_int_equal(room.items[0].units, 100); /* device 0 reserved for W */
  assert_int_equal(room.items[0].largest_milli, 100);
  assert_int_equal(room.items[0].whole, 0);
  assert_cq_ok(cq_grant_cancel(pool, &w.grant));
  assert_cq_ok(cq_grant_release(pool, &g));
  assert_cq_ok(cq_grant_release(pool, &g2));
}

/* ------------------------------------------------------------------------ */
/* 4. Live capacity changes                                                  */
/* ------------------------------------------------------------------------ */

static void test_growing_a_budget_grants_waiters_that_now_fit(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 2));
  cq_req two;
  cqt_req(&two, pool, "b:2");
  cq_grant h;
  cq_grant_init(&h);
  assert_cq_ok(cq_grant_try(pool, &h, &two));
  cqt_slot a, b;
  cqt_slot_init(&a, &rec, "A");
  cqt_slot_init(&b, &rec, "B");
  assert_cq_ok(cq_grant_submit(pool, &a.grant, &two, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_grant_submit(pool, &b.grant, &two, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_budget_set_capacity(pool, "b", 4));
  assert_log(&rec, "A");
  assert_cq_ok(cq_budget_set_capacity(pool, "b", 6));
  assert_log(&rec, "A B");
  release_all(&h, 1);
  assert_cq_ok(cq_grant_release(pool, &a.grant));
  assert_cq_ok(cq_grant_release(pool, &b.grant));
}

static void
test_shrinking_takes_nothing_and_fails_what_can_never_fit(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "b", 10));
  cq_req six, three, nine;
  cqt_req(&six, pool, "b:6");
  cqt_req(&three, pool, "b:3");
  cqt_req(&nine, pool, "b:9");
  cq_grant h, t;
  cq_grant_init(&h);
  cq_grant_init(&t);
  assert_cq_ok(cq_grant_try(pool, &h, &six));
  cqt_slot nine_w, three_w;
  cqt_slot_init(&nine_w, &rec, "NINE");
  cqt_slot_init(&three_w, &rec, "THREE");
  assert_cq_ok(
      cq_grant_submit(pool, &nine_w.grant, &nine, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(
      cq_grant_submit(pool, &three_w.grant, &three, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_budget_set_capacity(pool, "b", 5));
  assert_log(&rec, "NINE!"); /* 9 can never fit in 5 */
  assert_int_equal(nine_w.status, CQ_ENEVER);
  assert_string_equal(cq_grant_error(&nine_w.grant),
                      "request asks b:9 but its capacity is 5");
  cq_resource_stats st = cqt_budget(pool, "b");
  assert_int_equal(st.capacity, 5);
  assert_int_equal(st.in_use, 6); /* nothing taken from the holder */
  assert_cq_err(cq_grant_try(pool, &t, &three), CQ_EBUSY);
  assert_cq_ok(cq_grant_release(pool, &h));
  assert_log(&rec, "NINE! THREE");
  assert_cq_ok(cq_grant_release(pool, &three_w.grant));
  /* Setting the current value changes nothing. */
  st = cqt_budget(pool, "b");
  assert_cq_ok(cq_budget_set_capacity(pool, "b", 5));
  cq_resource_stats same = cqt_budget(pool, "b");
  assert_memory_equal(&st, &same, sizeof(st));
  assert_cq_err(cq_budget_set_capacity(pool, "b", -1), CQ_ERANGE);
  assert_cq_err(cq_budget_set_capacity(pool, "nope", 1), CQ_ENOENT);
  assert_cq_err(cq_class_set_max(pool, "b", 1), CQ_ENOENT); /* not a class */
}

static void test_blocked_thread_learns_its_request_can_never_fit(void **s) {
  (void)s;
  assert_cq_ok(cq_budget_add(pool, "b", 4));
  cq_req four;
  cqt_req(&four, pool, "b:4");
  cq_grant h;
  cq_grant_init(&h);
  assert_cq_ok(cq_grant_try(pool, &h, &four));
  cqt_acquirer w;
  cqt_acquire_start(&w, pool, &four, CQ_NEVER);
  cqt_wait_for_waiters(pool, 1);
  assert_cq_ok(cq_budget_set_capacity(pool, "b", 3));
  assert_int_equal(cqt_acquire_join(&w), CQ_ENEVER);
  assert_string_equal(cq_grant_error(&w.grant),
                      "request asks b:4 but its capacity is 3");
  assert_cq_ok(cq_grant_release(pool, &h));
}

static void test_resources_are_added_and_removed_while_in_use(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "db", 2));
  cq_req r;
  cqt_req(&r, pool, "db:1");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &r));
  assert_cq_err(cq_resource_remove(pool, "db"), CQ_EINUSE); /* held */
  assert_cq_ok(cq_budget_add(pool, "license", 1));          /* while in use */
  assert_cq_ok(cq_grant_release(pool, &g));
  cq_req two;
  cqt_req(&two, pool, "db:2");
  cq_grant h;
  cq_grant_init(&h);
  assert_cq_ok(cq_grant_try(pool, &h, &r));
  cqt_slot w;
  cqt_slot_init(&w, &rec, "W");
  assert_cq_ok(cq_grant_submit(pool, &w.grant, &two, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_grant_release(pool, &h));
  assert_log(&rec, "W");
  assert_cq_ok(cq_grant_release(pool, &w.grant));
  assert_cq_ok(cq_grant_try(pool, &h, &r));
  assert_cq_ok(cq_grant_submit(pool, &w.grant, &two, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_grant_release(pool, &h));
  assert_cq_err(cq_resource_remove(pool, "db"), CQ_EINUSE); /* W holds */
  assert_cq_ok(cq_grant_release(pool, &w.grant));
  assert_cq_ok(cq_resource_remove(pool, "db"));
  assert_cq_err(cq_resource_remove(pool, "db"), CQ_ENOENT);
  assert_cq_err(cq_grant_try(pool, &g, &r), CQ_ENOENT); /* stale request */
  assert_string_equal(cq_grant_error(&g),
                      "request names db, which was removed");
  assert_cq_ok(cq_budget_add(pool, "db", 5)); /* the name is free again */
  assert_cq_err(cq_grant_try(pool, &g, &r), CQ_ENOENT);
  cq_req fresh;
  cqt_req(&fresh, pool, "db:5");
  assert_cq_ok(cq_grant_try(pool, &g, &fresh));
  assert_cq_ok(cq_grant_release(pool, &g));
}

static void test_removing_a_waited_on_resource_is_refused(void **state) {
  (void)state;
  assert_cq_ok(cq_budget_add(pool, "a", 1));
  assert_cq_ok(cq_budget_add(pool, "b", 1));
  cq_req ra, rab;
  cqt_req(&ra, pool, "a:1");
  cqt_req(&rab, pool, "a:1 b:1");
  cq_grant h;
  cq_grant_init(&h);
  assert_cq_ok(cq_grant_try(pool, &h, &ra));
  cqt_slot w;
  cqt_slot_init(&w, &rec, "W");
  assert_cq_ok(cq_grant_submit(pool, &w.grant, &rab, CQ_NEVER, cqt_record_cb));
  /* b is free and unclaimed, but W's request names it. */
  assert_cq_err(cq_resource_remove(pool, "b"), CQ_EINUSE);
  assert_cq_ok(cq_grant_cancel(pool, &w.grant));
  assert_cq_ok(cq_resource_remove(pool, "b"));
  assert_cq_ok(cq_grant_release(pool, &h));
}

static void
test_offline_device_keeps_its_holders_and_takes_no_new_work(void **state) {
  (void)state;
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  cq_req half, two;
  assert_cq_ok(cq_req_init(&half, pool));
  assert_cq_ok(cq_req_add_fraction(&half, "gpu", 500));
  assert_cq_ok(cq_req_init(&two, pool));
  assert_cq_ok(cq_req_add_devices(&two, "gpu", 2));
  cq_grant g, t;
  cq_grant_init(&g);
  cq_grant_init(&t);
  assert_cq_ok(cq_grant_try(pool, &g, &half)); /* device 0 */
  cqt_slot whole;
  cqt_slot_init(&whole, &rec, "TWO");
  assert_cq_ok(
      cq_grant_submit(pool, &whole.grant, &two, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_device_set_online(pool, "gpu", 0, 0));
  assert_log(&rec, "TWO!"); /* 2 devices can never be had with 1 online */
  assert_int_equal(whole.status, CQ_ENEVER);
  cq_device_stats d;
  assert_cq_ok(cq_device_stats_get(pool, "gpu", 0, &d));
  assert_false(d.online);
  assert_int_equal(d.used_milli, 500); /* the holder keeps it */
  /* New work goes to device 1 only. */
  assert_cq_ok(cq_grant_try(pool, &t, &half));
  uint32_t idx;
  assert_int_equal(cq_grant_devices(&t, "gpu", &idx, 1), 1);
  assert_int_equal(idx, 1);
  cq_grant t2;
  cq_grant_init(&t2);
  assert_cq_ok(cq_grant_try(pool, &t2, &half));
  assert_int_equal(cq_grant_devices(&t2, "gpu", &idx, 1), 1);
  assert_int_equal(idx, 1);
  cq_grant t3;
  cq_grant_init(&t3);
  assert_cq_err(cq_grant_try(pool, &t3, &half), CQ_EBUSY);
  assert_int_equal(cqt_budget(pool, "gpu").capacity, 1000);
  assert_cq_ok(cq_grant_release(pool, &g)); /* offline: still not used */
  assert_cq_err(cq_grant_try(pool, &t3, &half), CQ_EBUSY);
  cqt_slot back;
  cqt_slot_init(&back, &rec, "BACK");
  assert_cq_ok(
      cq_grant_submit(pool, &back.grant, &half, CQ_NEVER, cqt_record_cb));
  assert_cq_ok(cq_device_set_online(pool, "gpu", 0, 1));
  assert_log(&rec, "TWO! BACK");
  assert_cq_ok(cq_grant_release(pool, &t));
  assert_cq_ok(cq_grant_release(pool, &t2));
  assert_cq_ok(cq_grant_release(pool, &back.grant));
  assert_cq_err(cq_device_set_online(pool, "gpu", 9, 0), CQ_ENOENT);
}

struct churn {
  cq_req *reqs;
  int n_reqs;
  uint64_t rng;
  atomic_llong *shadow;
  atomic_int *over;
  atomic_int *stop;
};

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *churn_worker(void *p) {
  struct churn *c = p;
  cq_grant g;
  cq_grant_init(&g);
  for (int i = 0; i < 3000 && !atomic_load(c->stop); i++) {
    int k = (int)(next_rand(&c->rng) % (uint64_t)c->n_reqs);
    int64_t amount = k + 1;
    int rc = cq_grant_acquire(pool, &g, &c->reqs[k], cq_now() + 2);
    if (rc != 0)
      continue;
    /* Capacities move between 2 and 6; no grant may ever see more held. */
    if (atomic_fetch_add(c->shadow, amount) + amount > 6)
      atomic_store(c->over, 1);
    atomic_fetch_sub(c->shadow, amount);
    if (cq_grant_release(pool, &g) != 0)
      atomic_store(c->over, 1);
  }
  return NULL;
}

static void test_concurrent_capacity_changes_keep_every_invariant(void **s) {
  (void)s;
  assert_cq_ok(cq_budget_add(pool, "b", 4));
  cq_req reqs[3];
  cqt_req(&reqs[0], pool, "b:1");
  cqt_req(&reqs[1], pool, "b:2");
  cqt_req(&reqs[2], pool, "b:3");
  atomic_llong shadow = 0;
  atomic_int over = 0, stop = 0;
  pthread_t th[4];
  struct churn c[4];
  for (int i = 0; i < 4; i++) {
    c[i] = (struct churn){reqs,    3,     0x1234567ull * (uint64_t)(i + 1),
                          &shadow, &over, &stop};
    assert_int_equal(pthread_create(&th[i], NULL, churn_worker, &c[i]), 0);
  }
  uint64_t rng = 99;
  for (int i = 0; i < 2000; i++) {
    int64_t cap = 2 + (int64_t)(next_rand(&rng) % 5);
    assert_cq_ok(cq_budget_set_capacity(pool, "b", cap));
    cq_resource_stats st = cqt_budget(pool, "b");
    assert_true(st.in_use <= 6);
    assert_true(st.withheld >= 0 && st.in_use >= 0);
    if (st.in_use <= st.capacity)
      assert_true(st.in_use + st.withheld <= st.capacity);
  }
  assert_cq_ok(cq_budget_set_capacity(pool, "b", 6));
  atomic_store(&stop, 1);
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  assert_int_equal(atomic_load(&over), 0);
  cq_resource_stats st = cqt_budget(pool, "b");
  assert_int_equal(st.in_use, 0);
  assert_int_equal(st.waiting, 0);
  assert_int_equal(st.withheld, 0);
  assert_true(st.peak <= 6);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_without_resources_only_max_workers_caps_concurrency),
      T(test_budget_smaller_than_max_workers_caps_the_task),
      T(test_two_tasks_sharing_a_budget_of_four_never_exceed_four),
      T(test_threads_of_two_tasks_fill_but_never_exceed_the_budget),
      T(test_two_tasks_on_disjoint_budgets_both_reach_max_workers),
      T(test_requirements_above_the_budget_fail_validation),
      T(test_headroom_grows_as_an_upstream_task_drains),
      T(test_headroom_counts_what_waiters_have_claimed),
      T(test_lone_request_is_admitted_alone_and_holds_everything),
      T(test_lone_request_waits_for_others_and_is_not_starved),
      T(test_lone_requests_wait_while_the_capacity_is_zero),
      T(test_a_lone_grant_stays_alone_when_the_capacity_grows),
      T(test_room_query_matches_the_table),
      T(test_room_query_with_a_job_cap_only),
      T(test_room_counts_devices_and_reservations),
      T(test_growing_a_budget_grants_waiters_that_now_fit),
      T(test_shrinking_takes_nothing_and_fails_what_can_never_fit),
      T(test_blocked_thread_learns_its_request_can_never_fit),
      T(test_resources_are_added_and_removed_while_in_use),
      T(test_removing_a_waited_on_resource_is_refused),
      T(test_offline_device_keeps_its_holders_and_takes_no_new_work),
      T(test_concurrent_capacity_changes_keep_every_invariant),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
