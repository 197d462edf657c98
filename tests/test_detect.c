/*
 * GPU detection (issue #3): each source, each failure, with the environment
 * set per test and fake nvidia-smi scripts written by the tests.
 */
#include "cq_test.h"

#include "cq_internal.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int setup(void **state) {
  (void)state;
  unsetenv("CRONOQ_NUM_GPUS");
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("CRONOQ_NVIDIA_SMI");
  snprintf(dir, sizeof(dir), "/tmp/cronoq-detect-XXXXXX");
  return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Write an executable script `name` in the test's directory; returns its
 * path (static buffer). */
static const char *script(const char *name, const char *body) {
  static char path[128];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\n%s\n", body);
  fclose(f);
  assert_int_equal(chmod(path, 0755), 0);
  return path;
}

static void assert_ids(const cq_gpu_list *l, const char *joined) {
  char buf[512] = "";
  for (size_t i = 0; i < l->count; i++) {
    if (i > 0)
      strcat(buf, ",");
    strcat(buf, l->ids[i]);
  }
  assert_string_equal(buf, joined);
}

static int detect_with(const char *nvidia_smi, int64_t timeout_ms,
                       cq_gpu_list *l) {
  cq_detect_opts o = CQ_DETECT_OPTS_INIT;
  o.nvidia_smi = nvidia_smi;
  o.timeout_ms = timeout_ms;
  return cq_gpu_detect(l, &o);
}

static void test_explicit_count_wins(void **s) {
  (void)s;
  setenv("CRONOQ_NUM_GPUS", "3", 1);
  setenv("CUDA_VISIBLE_DEVICES", "5", 1);
  cq_gpu_list l;
  assert_cq_ok(cq_gpu_detect(&l, NULL));
  assert_string_equal(l.source, "CRONOQ_NUM_GPUS");
  assert_ids(&l, "0,1,2");
  cq_gpu_list_free(&l);
  assert_int_equal(l.count, 0);
  setenv("CRONOQ_NUM_GPUS", " 0 ", 1);
  assert_cq_ok(cq_gpu_detect(&l, NULL));
  assert_int_equal(l.count, 0);
  cq_gpu_list_free(&l);
}

static void test_reserved_options_are_refused(void **s) {
  (void)s;
  setenv("CRONOQ_NUM_GPUS", "3", 1);
  cq_detect_opts o = CQ_DETECT_OPTS_INIT;
  o.reserved_[0] = 1;
  cq_gpu_list l;
  assert_cq_err(cq_gpu_detect(&l, &o), CQ_EINVAL);
  assert_int_equal(l.count, 0); /* and the list may still be freed */
  cq_gpu_list_free(&l);
}

static void test_unparsable_count_names_the_variable_and_text(void **s) {
  (void)s;
  const char *bad[] = {"three", "", "-1", "2x", "1 2", "99999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    setenv("CRONOQ_NUM_GPUS", bad[i], 1);
    cq_gpu_list l;
    assert_cq_err(cq_gpu_detect(&l, NULL), CQ_EPARSE);
    assert_non_null(strstr(l.error, "CRONOQ_NUM_GPUS"));
    assert_non_null(strstr(l.error, bad[i]));
    assert_int_equal(l.count, 0);
    cq_gpu_list_free(&l);
  }
}

static void test_cuda_visible_devices_entries_become_the_ids(void **s) {
  (void)s;
  setenv("CUDA_VISIBLE_DEVICES",
         " 0 ,\t2,GPU-8e0c2b6a-1d2f-3c4b-9a8e-0123456789ab ", 1);
  cq_gpu_list l;
  assert_cq_ok(detect_with("/nonexistent", 0, &l));
  assert_string_equal(l.source, "CUDA_VISIBLE_DEVICES");
  assert_ids(&l, "0,2,GPU-8e0c2b6a-1d2f-3c4b-9a8e-0123456789ab");
  cq_gpu_list_free(&l);
}

static void test_empty_cuda_visible_devices_means_no_gpus(void **s) {
  (void)s;
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  cq_gpu_list l;
  assert_cq_ok(
      detect_with(script("smi", "echo 'GPU 0: X (UUID: GPU-1)'"), 0, &l));
  assert_string_equal(l.source, "CUDA_VISIBLE_DEVICES");
  assert_int_equal(l.count, 0);
  cq_gpu_list_free(&l);
}

static void test_unparsable_cuda_visible_devices_is_an_error(void **s) {
  (void)s;
  const char *bad[] = {"0,,1", "zero", "0,0", "GPU-", "0;1", "1,"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    setenv("CUDA_VISIBLE_DEVICES", bad[i], 1);
    cq_gpu_list l;
    assert_cq_err(cq_gpu_detect(&l, NULL), CQ_EPARSE);
    assert_non_null(strstr(l.error, "CUDA_VISIBLE_DEVICES"));
    assert_non_null(strstr(l.error, bad[i]));
    assert_int_equal(l.count, 0);
    cq_gpu_list_free(&l);
  }
}

static const char *two_gpus = "echo 'GPU 0: NVIDIA H200 (UUID: "
                              "GPU-11111111-2222-3333-4444-555555555555)'\n"
                              "echo 'GPU 1: NVIDIA H200 (UUID: "
                              "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee)'";

static void test_nvidia_smi_gives_the_gpus_uuids(void **s) {
  (void)s;
  cq_gpu_list l;
  assert_cq_ok(detect_with(script("smi", two_gpus), 0, &l));
  assert_string_equal(l.source, "nvidia-smi");
  assert_ids(&l, "GPU-11111111-2222-3333-4444-555555555555,"
                 "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
  cq_gpu_list_free(&l);

  /* The command can also come from the environment. */
  setenv("CRONOQ_NVIDIA_SMI", script("smi2", "echo 'GPU 3: Tesla T4'"), 1);
  assert_cq_ok(cq_gpu_detect(&l, NULL));
  assert_ids(&l, "3"); /* no UUID: the index */
  cq_gpu_list_free(&l);
}

static void test_mig_devices_replace_their_gpu(void **s) {
  (void)s;
  const char *body = "echo 'GPU 0: NVIDIA A100 (UUID: "
                     "GPU-00000000-0000-0000-0000-000000000000)'\n"
                     "echo '  MIG 3g.20gb     Device  0: (UUID: MIG-aaaa-1)'\n"
                     "echo '  MIG 3g.20gb     Device  1: (UUID: MIG-aaaa-2)'\n"
                     "echo 'GPU 1: NVIDIA A100 (UUID: "
                     "GPU-11111111-1111-1111-1111-111111111111)'";
  cq_gpu_list l;
  assert_cq_ok(detect_with(script("smi", body), 0, &l));
  assert_ids(&l,
             "MIG-aaaa-1,MIG-aaaa-2,GPU-11111111-1111-1111-1111-111111111111");
  cq_gpu_list_free(&l);
}

static void test_missing_or_failing_nvidia_smi_means_no_gpus(void **s) {
  (void)s;
  cq_gpu_list l;
  assert_cq_ok(detect_with("/nonexistent/nvidia-smi", 0, &l));
  assert_int_equal(l.count, 0);
  assert_string_equal(l.source, "none");
  cq_gpu_list_free(&l);

  const char *failing = "echo 'NVIDIA-SMI has failed because it could not "
                        "communicate with the NVIDIA driver.'\nexit 9";
  assert_cq_ok(detect_with(script("smi", failing), 0, &l));
  assert_int_equal(l.count, 0);
  assert_string_equal(l.source, "none");
  cq_gpu_list_free(&l);
}

static void test_hung_nvidia_smi_times_out_as_no_gpus(void **s) {
  (void)s;
  cq_gpu_list l;
  int64_t t0 = cq_now();
  assert_cq_ok(
      detect_with(script("smi", "echo 'GPU 0: X'\nexec sleep 600"), 200, &l));
  assert_int_equal(l.count, 0);
  assert_true(cq_now() - t0 < CQT_PATIENCE_MS); /* killed, not waited out */
  cq_gpu_list_free(&l);
}

static void test_unparsable_nvidia_smi_output_names_command_and_text(void **s) {
  (void)s;
  cq_gpu_list l;
  assert_cq_err(detect_with(script("smi", "echo 'hello world'"), 0, &l),
                CQ_EPARSE);
  assert_non_null(strstr(l.error, "nvidia-smi -L"));
  assert_non_null(strstr(l.error, "hello world"));
  assert_int_equal(l.count, 0);
  cq_gpu_list_free(&l);
}

static void test_detected_ids_reach_cuda_visible_devices(void **s) {
  (void)s;
  setenv("CUDA_VISIBLE_DEVICES", "3, 1", 1);
  cq_gpu_list l;
  assert_cq_ok(cq_gpu_detect(&l, NULL));
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_devices_add(p, "gpu", l.count, (const char *const *)l.ids));
  cq_gpu_list_free(&l);
  cq_req r;
  assert_cq_ok(cq_req_init(&r, p));
  assert_cq_ok(cq_req_add_str(&r, "gpu", "2"));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(p, &g, &r));
  char buf[32];
  assert_cq_ok(cq_grant_cuda_visible(&g, NULL, buf, sizeof(buf)));
  assert_string_equal(buf, "3,1");
  assert_cq_ok(cq_grant_release(p, &g));
  assert_cq_ok(cq_pool_destroy(p));
}

static void test_no_gpus_make_gpu_requests_never_satisfiable(void **s) {
  (void)s;
  setenv("CRONOQ_NUM_GPUS", "0", 1);
  cq_gpu_list l;
  assert_cq_ok(cq_gpu_detect(&l, NULL));
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, NULL));
  assert_cq_ok(cq_devices_add(p, "gpu", l.count, (const char *const *)l.ids));
  cq_gpu_list_free(&l);
  cq_req frac, whole;
  assert_cq_ok(cq_req_init(&frac, p));
  assert_cq_ok(cq_req_add_fraction(&frac, "gpu", 500));
  assert_cq_ok(cq_req_init(&whole, p));
  assert_cq_ok(cq_req_add_devices(&whole, "gpu", 1));
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_err(cq_grant_try(p, &g, &frac), CQ_ENEVER);
  assert_cq_err(cq_grant_acquire(p, &g, &whole, CQ_NEVER), CQ_ENEVER);
  assert_cq_ok(cq_pool_destroy(p));
}

static void test_parsers_accept_and_refuse_exactly(void **s) {
  (void)s;
  cq_gpu_list l;
  memset(&l, 0, sizeof(l));
  cq_detect_opts o = CQ_DETECT_OPTS_INIT;
  /* Borrow a detected (empty) list's allocator for direct parser calls. */
  setenv("CRONOQ_NUM_GPUS", "0", 1);
  assert_cq_ok(cq_gpu_detect(&l, &o));
  assert_cq_ok(cq__parse_nvidia_smi("\n\nGPU 0: A\r\n\nGPU 1: B (UUID: "
                                    "GPU-9)\n",
                                    &l));
  assert_ids(&l, "0,GPU-9");
  assert_cq_err(cq__parse_nvidia_smi("GPU x: A\n", &l), CQ_EPARSE);
  assert_cq_err(cq__parse_nvidia_smi("GPU 2 A\n", &l), CQ_EPARSE);
  assert_cq_err(cq__parse_nvidia_smi("  MIG 1g Device 0: no uuid\n", &l),
                CQ_EPARSE);
  cq_gpu_list_free(&l);
  assert_cq_ok(cq__parse_cuda_visible("MIG-GPU-1/2/0", &l));
  assert_ids(&l, "MIG-GPU-1/2/0");
  cq_gpu_list_free(&l);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_reserved_options_are_refused),
      T(test_explicit_count_wins),
      T(test_unparsable_count_names_the_variable_and_text),
      T(test_cuda_visible_devices_entries_become_the_ids),
      T(test_empty_cuda_visible_devices_means_no_gpus),
      T(test_unparsable_cuda_visible_devices_is_an_error),
      T(test_nvidia_smi_gives_the_gpus_uuids),
      T(test_mig_devices_replace_their_gpu),
      T(test_missing_or_failing_nvidia_smi_means_no_gpus),
      T(test_hung_nvidia_smi_times_out_as_no_gpus),
      T(test_unparsable_nvidia_smi_output_names_command_and_text),
      T(test_detected_ids_reach_cuda_visible_devices),
      T(test_no_gpus_make_gpu_requests_never_satisfiable),
      T(test_parsers_accept_and_refuse_exactly),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
