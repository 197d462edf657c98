/*
 * The simulator and its reference schedulers (tools/sim/sim.c,
 * policies.c).
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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
