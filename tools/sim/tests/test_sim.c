/*
 * The simulator and its reference schedulers (tools/sim/sim.c,
 * policies.c), what blocks the head waiter, and the event logs
 * (explain.c).
 *
 * The hand-worked example: a pool of 2 GPUs, 4 vCPUs and 1 GiB, and six
 * jobs, each with 1 vCPU and 100 MiB:
 *
 *   job  arrives  runs  asks
 *   J0      0 s   10 s  2 GPUs
 *   J1      1 s   10 s  1 GPU
 *   J2      2 s    5 s  no GPU
 *   J3      3 s   10 s  2 GPUs
 *   J4      4 s    2 s  0.5 of a GPU
 *   J5      5 s    1 s  1 GPU
 *
 * Worked by hand (jobs ending at an instant free their units before jobs
 * arriving at it ask):
 *
 * strict FIFO: J0 runs 0-10; J1 waits at the head, and J2 behind it even
 *   though the CPU is free. At 10 J1 (1 GPU) and J2 start; J3 (2 GPUs)
 *   heads the queue with one GPU free and blocks J4 and J5. At 20 J1 ends
 *   and J3 runs 20-30; then J4 and J5 start at 30. Makespan 32.
 * greedy: J2 starts at once (2-7). At 10 J1 takes one GPU, J3 does not
 *   fit, J4 takes half of the other GPU (10-12) and J5 does not fit beside
 *   it; at 12 J5 runs 12-13. J3 gets both GPUs only at 20. Makespan 30.
 * libcronoq: J2 starts at once (J1 lacks only a GPU, so it claims nothing
 *   else). At 10 J1 gets a GPU and J3, the oldest waiter left, reserves the
 *   other: J4 and J5 may not take it. J3 runs 20-30, then J4 and J5 run.
 * libcronoq with backfill, every job declaring its run time as its hold
 *   limit: as libcronoq until 10. Then J1 starts, and J3, the head now, has
 *   its shadow time at 20 (when J1 ends). J4 ends at 12, before 20: it is
 *   backfilled at 10 onto the GPU reserved for J3; J5 at 12, on the same
 *   GPU, ending at 13. J3 still starts at 20. Makespan 30, as greedy, with
 *   no job passed over for longer than libcronoq's.
 * static split, K = 2: each worker has 1 GPU, 2 vCPUs and 512 MiB. Jobs
 *   go round robin: J0, J2, J4 to worker 0 and J1, J3, J5 to worker 1. J0
 *   and J3 ask 2 GPUs and are rejected; J1 runs 1-11, J2 2-7, J4 4-6, and
 *   J5 waits for worker 1's GPU: 11-12.
 */
#include "policies.h"
#include "sim_test.h"

#include <stdlib.h>
#include <string.h>

static const struct pool_shape TINY = {"tiny", 2, 4000, 1024};

static void add_job(struct workload *w, int64_t at_s, int64_t run_s, int gpu,
                    int64_t amount) {
  struct sim_job j;
  memset(&j, 0, sizeof(j));
  j.arrival_ms = at_s * 1000;
  j.duration_ms = run_s * 1000;
  j.cpu_milli = 1000;
  j.memory_mib = 100;
  j.gpu = (uint8_t)gpu;
  j.gpu_amount = amount;
  wl_classify(&j);
  assert_int_equal(wl_push(w, &j), 0);
}

static void hand_example(struct workload *w) {
  memset(w, 0, sizeof(*w));
  add_job(w, 0, 10, SIM_GPU_WHOLE, 2);
  add_job(w, 1, 10, SIM_GPU_WHOLE, 1);
  add_job(w, 2, 5, SIM_GPU_NONE, 0);
  add_job(w, 3, 10, SIM_GPU_WHOLE, 2);
  add_job(w, 4, 2, SIM_GPU_FRACTION, 500);
  add_job(w, 5, 1, SIM_GPU_WHOLE, 1);
}

/* Run `w` on the tiny pool; each job's start time goes to `starts`. */
static struct sim_result run_tiny(const struct workload *w, int policy,
                                  unsigned static_workers, int64_t *starts) {
  struct sim_opts o;
  memset(&o, 0, sizeof(o));
  o.policy = policy;
  o.static_workers = static_workers;
  o.start_ms = starts;
  struct sim_result r;
  assert_int_equal(sim_run(w, &TINY, &o, &r), 0);
  return r;
}

/* Run the example under `policy`; check each job's start (seconds, -1 for
 * rejected). */
static struct sim_result run_example(int policy, const int64_t *want_s) {
  struct workload w;
  hand_example(&w);
  int64_t starts[6];
  struct sim_result r = run_tiny(&w, policy, 2, starts);
  for (size_t i = 0; i < w.n; i++) {
    int64_t want = want_s[i] < 0 ? -1 : want_s[i] * 1000;
    if (starts[i] != want)
      fail_msg("%s: J%zu started at %lld ms, expected %lld ms",
               sim_policy_name(policy), i, (long long)starts[i],
               (long long)want);
  }
  wl_free(&w);
  return r;
}

static void test_strict_fifo_head_blocks_everything_behind_it(void **state) {
  (void)state;
  static const int64_t want[] = {0, 10, 10, 20, 30, 30};
  struct sim_result r = run_example(SIM_FIFO, want);
  assert_true(r.makespan_s == 32);
  assert_int_equal(r.rejected, 0);
  assert_int_equal(r.passed_over, 0); /* nobody ever overtakes */
  /* GPU-seconds 2*10 + 1*10 + 2*10 + 0.5*2 + 1*1 = 52 of 2 * 32. */
  assert_true(r.util_gpu > 52.0 / 64 - 1e-9 && r.util_gpu < 52.0 / 64 + 1e-9);
  /* The CPU-only job waited 8 s for the head to move. */
  assert_true(r.wait[SIM_CPU_ONLY].max_s == 8);
}

static void test_greedy_starts_whatever_fits(void **state) {
  (void)state;
  static const int64_t want[] = {0, 10, 2, 20, 10, 12};
  struct sim_result r = run_example(SIM_GREEDY, want);
  assert_true(r.makespan_s == 30);
  /* J2 passed J1 at 2 s; J4 passed J3 at 10 s, J5 passed J3 at 12 s. J1
   * started 8 s after it was first passed over, J3 10 s after. */
  assert_int_equal(r.passed_over, 2);
  assert_true(r.longest_passed_over_s == 10);
  assert_true(r.wait[SIM_MULTI].max_s == 17); /* J3: 3 s to 20 s */
}

static void test_libcronoq_reserves_for_the_oldest_waiter(void **state) {
  (void)state;
  static const int64_t want[] = {0, 10, 2, 20, 30, 30};
  struct sim_result r = run_example(SIM_CRONOQ, want);
  assert_true(r.makespan_s == 32);
  assert_int_equal(r.passed_over, 1); /* only J1, by J2 that needs no GPU */
  assert_true(r.wait[SIM_CPU_ONLY].max_s == 0);
  r = run_example(SIM_CRONOQ_STAGED, want);
  assert_true(r.makespan_s == 32);
}

static void test_backfill_fills_the_gap_before_the_head_starts(void **state) {
  (void)state;
  struct workload w;
  hand_example(&w);
  wl_hold_limits(&w, 1, 1, 0, 1); /* limits = run times */
  int64_t starts[6];
  struct sim_result r = run_tiny(&w, SIM_CRONOQ_BACKFILL, 2, starts);
  static const int64_t want[] = {0, 10, 2, 20, 10, 12};
  for (size_t i = 0; i < w.n; i++)
    if (starts[i] != want[i] * 1000)
      fail_msg("backfill: J%zu started at %lld ms, expected %lld s", i,
               (long long)starts[i], (long long)want[i]);
  assert_true(r.makespan_s == 30);
  assert_int_equal(r.backfilled, 2);
  assert_int_equal(r.late_heads, 0);
  assert_int_equal(r.overdue, 0);
  wl_free(&w);
}

static void test_static_split_rejects_jobs_larger_than_a_share(void **state) {
  (void)state;
  static const int64_t want[] = {-1, 1, 2, -1, 4, 11};
  struct sim_result r = run_example(SIM_STATIC, want);
  assert_int_equal(r.rejected, 2);
  assert_int_equal(r.jobs, 4);
  assert_true(r.makespan_s == 12);
  /* Its bound is over the jobs it ran: J1 could end no sooner than 11 s. */
  assert_true(r.lower_bound_s == 11);
}

static void
test_jobs_that_never_fit_are_rejected_by_every_policy(void **state) {
  (void)state;
  for (int p = 0; p < SIM_POLICIES; p++) {
    struct workload w;
    memset(&w, 0, sizeof(w));
    add_job(&w, 0, 5, SIM_GPU_WHOLE, 1);
    add_job(&w, 1, 5, SIM_GPU_WHOLE, 3); /* the pool has 2 */
    add_job(&w, 2, 5, SIM_GPU_NONE, 0);
    w.jobs[2].cpu_milli = 5000; /* the pool has 4000 */
    add_job(&w, 3, 5, SIM_GPU_NONE, 0);
    int64_t starts[4];
    struct sim_result r = run_tiny(&w, p, 1, starts);
    assert_int_equal(r.rejected, 2);
    assert_int_equal(r.jobs, 2);
    assert_int_equal(starts[0], 0);
    assert_int_equal(starts[1], -1);
    assert_int_equal(starts[2], -1);
    assert_int_equal(starts[3], 3000); /* nothing waits for the rejected */
    wl_free(&w);
  }
}

static void synthetic(struct workload *w, size_t n, uint64_t seed,
                      const struct pool_shape *shape) {
  memset(w, 0, sizeof(*w));
  assert_int_equal(wl_synthetic(w, n, seed), 0);
  wl_poisson_arrivals(w, 0.8, shape->gpus, seed + 1);
}

static void test_simulation_is_deterministic_for_a_seed(void **state) {
  (void)state;
  const size_t n = 600;
  struct workload a, b, c;
  synthetic(&a, n, 7, &SIM_MACHINE);
  synthetic(&b, n, 7, &SIM_MACHINE);
  synthetic(&c, n, 8, &SIM_MACHINE);
  assert_int_equal(a.n, n);
  assert_memory_equal(a.jobs, b.jobs, n * sizeof(a.jobs[0]));
  assert_true(memcmp(a.jobs, c.jobs, n * sizeof(a.jobs[0])) != 0);
  int64_t *s1 = calloc(n, sizeof(int64_t)), *s2 = calloc(n, sizeof(int64_t));
  assert_non_null(s1);
  assert_non_null(s2);
  for (int p = 0; p < SIM_POLICIES; p++) {
    struct sim_opts o;
    memset(&o, 0, sizeof(o));
    o.policy = p;
    o.static_workers = 4;
    struct sim_result r1, r2;
    o.start_ms = s1;
    assert_int_equal(sim_run(&a, &SIM_MACHINE, &o, &r1), 0);
    o.start_ms = s2;
    assert_int_equal(sim_run(&b, &SIM_MACHINE, &o, &r2), 0);
    assert_memory_equal(s1, s2, n * sizeof(int64_t));
    assert_true(r1.makespan_s == r2.makespan_s);
    assert_int_equal(r1.passed_over, r2.passed_over);
    assert_int_equal(r1.decisions, r2.decisions);
  }
  free(s1);
  free(s2);
  wl_free(&a);
  wl_free(&b);
  wl_free(&c);
}

static void test_no_policy_beats_the_lower_bound(void **state) {
  (void)state;
  const struct pool_shape *shapes[] = {&SIM_MACHINE, &SIM_RACK, &TINY};
  for (uint64_t seed = 1; seed <= 3; seed++) {
    for (size_t s = 0; s < 3; s++) {
      struct workload w;
      synthetic(&w, 400, seed, shapes[s]);
      for (int p = 0; p < SIM_POLICIES; p++) {
        struct sim_opts o;
        memset(&o, 0, sizeof(o));
        o.policy = p;
        o.static_workers = 2;
        struct sim_result r;
        assert_int_equal(sim_run(&w, shapes[s], &o, &r), 0);
        assert_int_equal(r.jobs + r.rejected, w.n);
        if (r.makespan_s < r.lower_bound_s - 1e-6)
          fail_msg("%s on %s, seed %llu: makespan %.3f below the bound %.3f",
                   sim_policy_name(p), shapes[s]->name,
                   (unsigned long long)seed, r.makespan_s, r.lower_bound_s);
        assert_true(r.util_gpu <= 1.0 + 1e-9);
        assert_true(r.util_cpu <= 1.0 + 1e-9);
        assert_true(r.util_mem <= 1.0 + 1e-9);
      }
      wl_free(&w);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* What blocks the head                                                      */
/* ------------------------------------------------------------------------ */

/* One job of `cpu` thousandths of a vCPU on TINY (4 vCPUs, 2 GPUs). */
static void add_cpu_job(struct workload *w, int64_t at_s, int64_t run_s,
                        int gpu, int64_t amount, int64_t cpu) {
  add_job(w, at_s, run_s, gpu, amount);
  w->jobs[w->n - 1].cpu_milli = cpu;
}

/*
 * K0 (3 vCPUs, no GPU) runs 0-10. K1 (1 GPU, 2 vCPUs) arrives at 1 and
 * waits for CPU with both GPUs free: the head, but not blocked by a
 * device. K2 (2 GPUs, 1 vCPU) arrives at 2.
 * - libcronoq and FIFO: K1 claims the CPU, so K2 waits behind it. At 10
 *   K1 starts on one GPU; K2, the head now, needs both: blocked by a
 *   device until K1 ends at 15. Waited 1-15 (14 s), blocked 10-15 (5 s).
 * - greedy: K2 fits at 2 (both GPUs, the last vCPU) and runs 2-6; K1, the
 *   head, then lacks GPUs as well as CPU: blocked 2-6 (4 s) of its wait
 *   1-10 (9 s); it runs 10-15.
 */
static void test_a_device_blocks_the_head_only_while_its_gpus_cannot_be_placed(
    void **state) {
  (void)state;
  struct workload w;
  memset(&w, 0, sizeof(w));
  add_cpu_job(&w, 0, 10, SIM_GPU_NONE, 0, 3000);
  add_cpu_job(&w, 1, 5, SIM_GPU_WHOLE, 1, 2000);
  add_cpu_job(&w, 2, 4, SIM_GPU_WHOLE, 2, 1000);
  static const struct {
    int policy;
    double waiting_s, blocked_s;
    int64_t k2_start_s;
  } want[] = {
      {SIM_CRONOQ, 14, 5, 15}, {SIM_FIFO, 14, 5, 15}, {SIM_GREEDY, 9, 4, 2}};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    int64_t starts[3];
    struct sim_result r = run_tiny(&w, want[i].policy, 1, starts);
    if (r.head_waiting_s != want[i].waiting_s ||
        r.head_device_blocked_s != want[i].blocked_s ||
        starts[2] != want[i].k2_start_s * 1000)
      fail_msg("%s: waited %g s, blocked %g s, K2 at %lld ms; expected %g, "
               "%g, %lld s",
               sim_policy_name(want[i].policy), r.head_waiting_s,
               r.head_device_blocked_s, (long long)starts[2], want[i].waiting_s,
               want[i].blocked_s, (long long)want[i].k2_start_s);
  }
  wl_free(&w);
}

/*
 * F0 and F1 (0.6 GPU each) run 0-10, one on each device: 0.8 GPU is free
 * in all, but no device has 0.5 free, so F2 (0.5 GPU, arriving at 1) is
 * blocked by a device until 10. A fraction that a device can take is not
 * blocked: F3 (0.4 GPU, 4 vCPUs) arrives at 11 while F2 holds a vCPU.
 */
static void
test_a_fraction_is_blocked_when_no_one_device_has_room_for_it(void **state) {
  (void)state;
  struct workload w;
  memset(&w, 0, sizeof(w));
  add_job(&w, 0, 10, SIM_GPU_FRACTION, 600);
  add_job(&w, 0, 10, SIM_GPU_FRACTION, 600);
  add_job(&w, 1, 2, SIM_GPU_FRACTION, 500);
  add_cpu_job(&w, 11, 1, SIM_GPU_FRACTION, 400, 4000);
  int64_t starts[4];
  struct sim_result r = run_tiny(&w, SIM_CRONOQ, 1, starts);
  assert_int_equal(starts[2], 10000);
  assert_int_equal(starts[3], 12000);
  assert_true(r.head_waiting_s == 10);       /* F2 1-10, F3 11-12 */
  assert_true(r.head_device_blocked_s == 9); /* F2 only */
  wl_free(&w);
}

/* ------------------------------------------------------------------------ */
/* Event logs                                                                */
/* ------------------------------------------------------------------------ */

/* The example under `policy` with its events recorded. */
static void example_events(int policy, struct workload *w,
                           struct sim_events *e) {
  hand_example(w);
  struct sim_opts o;
  memset(&o, 0, sizeof(o));
  o.policy = policy;
  o.static_workers = 2;
  o.events = e;
  struct sim_result r;
  assert_int_equal(sim_run(w, &TINY, &o, &r), 0);
}

/* The log of `cls` in `policy`'s run of the example. */
static const char *example_log(int policy, int cls, int64_t window_ms,
                               size_t limit) {
  struct workload w;
  struct sim_events e = {NULL, 0};
  example_events(policy, &w, &e);
  FILE *out = tmpfile();
  assert_non_null(out);
  assert_int_equal(sim_explain(out, &w, &e, cls, window_ms, limit), 0);
  sim_events_free(&e);
  wl_free(&w);
  return captured(out);
}

static void test_run_records_every_event_in_time_order(void **state) {
  (void)state;
  struct workload w;
  struct sim_events e = {NULL, 0};
  example_events(SIM_STATIC, &w, &e);
  /* Six arrivals; J0 and J3 rejected, the other four start and end. */
  assert_int_equal(e.n, 6 + 2 + 4 * 2);
  size_t kinds[4] = {0};
  for (size_t k = 0; k < e.n; k++) {
    kinds[e.ev[k].kind]++;
    if (k > 0)
      assert_true(e.ev[k - 1].t_ms <= e.ev[k].t_ms);
  }
  assert_int_equal(kinds[SIM_EV_ARRIVE], 6);
  assert_int_equal(kinds[SIM_EV_REJECT], 2);
  assert_int_equal(kinds[SIM_EV_START], 4);
  assert_int_equal(kinds[SIM_EV_END], 4);
  /* J0 arrives at 0 and is rejected at once. */
  assert_true(e.ev[0].kind == SIM_EV_ARRIVE && e.ev[0].job == 0);
  assert_true(e.ev[1].kind == SIM_EV_REJECT && e.ev[1].job == 0);
  assert_int_equal(sim_longest_wait(&w, &e, SIM_WHOLE), 5);  /* J5, 6 s */
  assert_int_equal(sim_longest_wait(&w, &e, SIM_MULTI), -1); /* none ran */
  sim_events_free(&e);
  wl_free(&w);
}

/* libcronoq: J3 (2 GPUs) waits 3-20 s; as it arrives J0 and J2 hold units
 * and J1 waits ahead of it; at 10 J1 starts and J3 reserves the other
 * GPU; just before 20 only J1 holds units, and J4 and J5 wait behind. */
static void test_event_log_shows_holders_waiters_and_events_of_the_longest_wait(
    void **state) {
  (void)state;
  assert_string_equal(
      example_log(SIM_CRONOQ, SIM_MULTI, 0, 200),
      "event log: the longest multi-gpu wait\n"
      "  job 3 (multi-gpu; 2 GPUs, 1 vCPUs, 100 MiB) arrived at 3s, started "
      "at 20s: waited 17s, ran 10s\n"
      "  window: 3s to 20s, its whole wait\n"
      "  as the window opens, 2 jobs hold units:\n"
      "    job 0 (multi-gpu; 2 GPUs, 1 vCPUs, 100 MiB) since 0s, until 10s\n"
      "    job 2 (cpu-only; no GPU, 1 vCPUs, 100 MiB) since 2s, until 7s\n"
      "  and 1 older job waits ahead of it (0 younger behind):\n"
      "    job 1 (whole-gpu; 1 GPU, 1 vCPUs, 100 MiB) since 1s\n"
      "  8 events in the window:\n"
      "             3s      3s  arrive job 3 (multi-gpu; 2 GPUs, 1 vCPUs, "
      "100 MiB)  <- this job\n"
      "             4s      4s  arrive job 4 (fractional; 0.5 GPU, 1 vCPUs, "
      "100 MiB)\n"
      "             5s      5s  arrive job 5 (whole-gpu; 1 GPU, 1 vCPUs, "
      "100 MiB)\n"
      "             7s      7s  end    job 2 (cpu-only; no GPU, 1 vCPUs, 100 "
      "MiB)\n"
      "            10s     10s  end    job 0 (multi-gpu; 2 GPUs, 1 vCPUs, "
      "100 MiB)\n"
      "            10s     10s  start  job 1 (whole-gpu; 1 GPU, 1 vCPUs, 100 "
      "MiB)\n"
      "            20s     20s  end    job 1 (whole-gpu; 1 GPU, 1 vCPUs, 100 "
      "MiB)\n"
      "            20s     20s  start  job 3 (multi-gpu; 2 GPUs, 1 vCPUs, "
      "100 MiB)  <- this job\n"
      "  just before it started, 1 job holds units:\n"
      "    job 1 (whole-gpu; 1 GPU, 1 vCPUs, 100 MiB) since 10s, until 20s\n"
      "  and no older job waits ahead of it (2 younger behind)\n");
}

/* Greedy: J4 and J5, younger than J3, start at 10 and 12 while it waits. */
static void test_event_log_marks_younger_jobs_that_started_first(void **state) {
  (void)state;
  const char *log = example_log(SIM_GREEDY, SIM_MULTI, 0, 200);
  assert_non_null(strstr(log, "            10s     10s  start  job 4 "
                              "(fractional; 0.5 GPU, 1 vCPUs, 100 MiB)  <- "
                              "younger, started first\n"));
  assert_non_null(strstr(log, "            12s     12s  start  job 5 "
                              "(whole-gpu; 1 GPU, 1 vCPUs, 100 MiB)  <- "
                              "younger, started first\n"));
  assert_non_null(strstr(log, "  12 events in the window:\n"));
  /* J1 is older: it started first, but did not overtake. */
  assert_non_null(strstr(log, "            10s     10s  start  job 1 "
                              "(whole-gpu; 1 GPU, 1 vCPUs, 100 MiB)\n"));
}

/* A window of 5 s: 15-20 s. Only J1 holds units then; the two events at
 * 20 s are in it; the list is cut to its first and last rows. */
static void test_event_log_window_and_limit_cut_what_it_shows(void **state) {
  (void)state;
  const char *log = example_log(SIM_CRONOQ, SIM_MULTI, 5000, 200);
  assert_non_null(strstr(log, "  window: 15s to 20s, the end of its wait\n"
                              "  as the window opens, 1 job holds units:\n"
                              "    job 1 (whole-gpu; 1 GPU, 1 vCPUs, 100 "
                              "MiB) since 10s, until 20s\n"
                              "  and no older job waits ahead of it (2 "
                              "younger behind)\n"
                              "  2 events in the window:\n"));
  log = example_log(SIM_CRONOQ, SIM_MULTI, 0, 3);
  assert_non_null(strstr(log, "  8 events in the window:\n"
                              "             3s      3s  arrive job 3 "
                              "(multi-gpu; 2 GPUs, 1 vCPUs, 100 MiB)  <- this "
                              "job\n"
                              "             4s      4s  arrive job 4 "
                              "(fractional; 0.5 GPU, 1 vCPUs, 100 MiB)\n"
                              "    ... 5 left out ...\n"
                              "            20s     20s  start  job 3 "));
  /* Small jobs: J2 (CPU-only) and J4 (fractional, 26 s) ; J4 waited
   * longest. No such class ran: -1. */
  log = example_log(SIM_CRONOQ, SIM_SMALL, 0, 200);
  assert_non_null(strstr(log, "event log: the longest small wait\n"
                              "  job 4 (fractional; 0.5 GPU, 1 vCPUs, 100 "
                              "MiB) arrived at 4s, started at 30s: waited "
                              "26s, ran 2s\n"));
  struct workload w;
  struct sim_events e = {NULL, 0};
  example_events(SIM_STATIC, &w, &e);
  FILE *out = tmpfile();
  assert_non_null(out);
  assert_int_equal(sim_explain(out, &w, &e, SIM_MULTI, 0, 200), -1);
  assert_string_equal(captured(out), "");
  sim_events_free(&e);
  wl_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strict_fifo_head_blocks_everything_behind_it),
      cmocka_unit_test(test_greedy_starts_whatever_fits),
      cmocka_unit_test(test_libcronoq_reserves_for_the_oldest_waiter),
      cmocka_unit_test(test_backfill_fills_the_gap_before_the_head_starts),
      cmocka_unit_test(test_static_split_rejects_jobs_larger_than_a_share),
      cmocka_unit_test(test_jobs_that_never_fit_are_rejected_by_every_policy),
      cmocka_unit_test(test_simulation_is_deterministic_for_a_seed),
      cmocka_unit_test(test_no_policy_beats_the_lower_bound),
      cmocka_unit_test(
          test_a_device_blocks_the_head_only_while_its_gpus_cannot_be_placed),
      cmocka_unit_test(
          test_a_fraction_is_blocked_when_no_one_device_has_room_for_it),
      cmocka_unit_test(test_run_records_every_event_in_time_order),
      cmocka_unit_test(
          test_event_log_shows_holders_waiters_and_events_of_the_longest_wait),
      cmocka_unit_test(test_event_log_marks_younger_jobs_that_started_first),
      cmocka_unit_test(test_event_log_window_and_limit_cut_what_it_shows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
