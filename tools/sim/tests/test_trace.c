/*
 * The simulator on the production trace (the Alibaba openb pod list,
 * openb_pod_list_default.csv). The trace is data, not part of the
 * repository: these tests read the file $CRONOQ_TRACE names, and without
 * it the suite reports a skip (exit 77). Every figure asserted here was
 * computed from the file independently (python3).
 */
#include "sim_test.h"

#include <stdlib.h>

/* Read the trace into w, checking it reads clean. */
static void read_production(struct workload *w) {
  const char *path = getenv("CRONOQ_TRACE");
  FILE *errors = tmpfile();
  assert_non_null(errors);
  int rc = wl_read_trace(w, path, errors);
  const char *text = captured(errors);
  if (rc != 0)
    fail_msg("reading %s: %s", path, text);
  assert_string_equal(text, "");
}

static double total_gpu_seconds(const struct workload *w) {
  double sum = 0;
  for (size_t i = 0; i < w->n; i++)
    sum += wl_gpu_demand(&w->jobs[i]) * (double)w->jobs[i].duration_ms / 1000.0;
  return sum;
}

static void test_production_trace_reads_7255_jobs_and_skips_897_that_never_ran(
    void **state) {
  (void)state;
  struct workload w = {0};
  read_production(&w);
  assert_int_equal(w.n, 8152 - 897);
  assert_int_equal(w.never_ran, 897);
  assert_int_equal(w.malformed, 0);

  size_t per_class[SIM_CLASSES] = {0};
  double gpu_seconds = 0;
  for (size_t i = 0; i < w.n; i++) {
    if (i > 0)
      assert_true(w.jobs[i - 1].arrival_ms <= w.jobs[i].arrival_ms);
    per_class[w.jobs[i].cls]++;
    gpu_seconds +=
        wl_gpu_demand(&w.jobs[i]) * (double)w.jobs[i].duration_ms / 1000.0;
  }
  /* Figures computed from the file independently (python3). */
  assert_int_equal(per_class[SIM_CPU_ONLY], 1052);
  assert_int_equal(per_class[SIM_FRACTIONAL], 2573);
  assert_int_equal(per_class[SIM_WHOLE], 3556);
  assert_int_equal(per_class[SIM_MULTI], 74);
  assert_within_rel(gpu_seconds, 185294426.97, 1e-9, "GPU-seconds");
  /* openb-pod-0000: one whole GPU from time 0, running 12,537,496 s. */
  assert_job(&w.jobs[0], 0, INT64_C(12537496000), 12000, 16384, SIM_GPU_WHOLE,
             1, SIM_WHOLE);
  assert_int_equal(w.jobs[w.n - 1].arrival_ms, INT64_C(12901761000));
  wl_free(&w);
}

/* The window is the deletions': 9,964,972 s to 12,902,960 s (day 115.3 to
 * 149.3). 33 pods that ran were created before it; they hold 68% of the
 * trace's GPU-seconds, and 26 of them ran longer than a day. */
static void
test_production_trace_has_33_censored_pods_holding_68_percent(void **state) {
  (void)state;
  struct workload w = {0};
  read_production(&w);
  assert_int_equal(w.window_start_ms, INT64_C(9964972000));
  double all = total_gpu_seconds(&w);

  size_t capped = 99;
  assert_int_equal(
      wl_censor(&w, WL_CENSORED_KEEP, w.window_start_ms, 0, &capped), 33);
  assert_int_equal(capped, 0);
  assert_int_equal(w.n, 7255);
  assert_within_rel(total_gpu_seconds(&w), all, 1e-12, "GPU-seconds kept");

  assert_int_equal(wl_censor(&w, WL_CENSORED_CAP, w.window_start_ms,
                             INT64_C(86400000), &capped),
                   33);
  assert_int_equal(capped, 26);
  assert_int_equal(w.n, 7255);
  assert_within_rel(total_gpu_seconds(&w), 61248766.56, 1e-9,
                    "GPU-seconds, capped at a day");
  wl_free(&w);

  read_production(&w);
  assert_int_equal(wl_censor(&w, WL_CENSORED_DROP, w.window_start_ms, 0, NULL),
                   33);
  assert_int_equal(w.n, 7222);
  assert_within_rel(total_gpu_seconds(&w), 58895994.50, 1e-9,
                    "GPU-seconds without them");
  assert_true(1 - total_gpu_seconds(&w) / all > 0.68);
  /* openb-pod-0033, the first created in the window: 491 s after its start,
   * one GPU for 182 s. */
  assert_job(&w.jobs[0], 491000, 182000, 3152, 5600, SIM_GPU_WHOLE, 1,
             SIM_WHOLE);
  assert_int_equal(w.jobs[w.n - 1].arrival_ms, INT64_C(2936789000));
  wl_free(&w);
}

int main(void) {
  const char *path = getenv("CRONOQ_TRACE");
  if (path == NULL || *path == '\0') {
    printf("no production trace: set CRONOQ_TRACE to the path of "
           "openb_pod_list_default.csv to run these tests (skipped)\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_production_trace_reads_7255_jobs_and_skips_897_that_never_ran),
      cmocka_unit_test(
          test_production_trace_has_33_censored_pods_holding_68_percent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
