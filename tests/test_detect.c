/*
 * GPU detection: each source, each failure, with the environment set per
 * test and fake nvidia-smi scripts written by the tests.
 *
 * Two calls of the C library are replaced here, for this suite only, and
 * pass straight through to the kernel unless a test arms them: pipe() and
 * pipe2(), so that another thread can start a process at the moment the
 * library has made the pipe to nvidia-smi, and kill(), so that a test can
 * play a child that SIGKILL does not end (as one stuck in a driver call).
 */
#define _GNU_SOURCE /* pipe2(), syscall() */
#include "support/cqt.h"

#include "cq_internal.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- Another thread starts a long-lived process during detection ---- */

static atomic_int pipe_armed;   /* the next pipe made starts the spawn */
static atomic_int spawn_wanted; /* set by the pipe, taken by the thread */
static atomic_int spawn_quit;   /* detection is over: spawn nothing */
static atomic_int spawn_done;   /* the thread has tried */
static atomic_int spawned_pid;  /* what it started, 0 if nothing */

int pipe2(int fds[2], int flags) {
  int rc = (int)syscall(SYS_pipe2, fds, flags);
  if (rc == 0 && atomic_exchange(&pipe_armed, 0)) {
    /* Detection holds the pipe now: have the other thread start its
     * process, and go on only once it has. */
    atomic_store(&spawn_wanted, 1);
    int64_t give_up = cq_now() + CQT_PATIENCE_MS;
    while (!atomic_load(&spawn_done) && cq_now() < give_up)
      cqt_sleep_ms(1);
  }
  return rc;
}

int pipe(int fds[2]) { return pipe2(fds, 0); }

/* The other thread: waits (boundedly) to be asked, then starts a process
 * that outlives detection by far, the way an application's own spawn
 * would, inheriting every descriptor not marked close-on-exec. */
static void *spawner_main(void *arg) {
  (void)arg;
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (!atomic_load(&spawn_wanted) && !atomic_load(&spawn_quit) &&
         cq_now() < give_up)
    cqt_sleep_ms(1);
  if (atomic_load(&spawn_wanted)) {
    char *argv[] = {(char *)"sleep", (char *)"120", NULL};
    pid_t pid = 0;
    if (posix_spawnp(&pid, "sleep", NULL, NULL, argv, environ) == 0)
      atomic_store(&spawned_pid, (int)pid);
  }
  atomic_store(&spawn_done, 1);
  return NULL;
}

/* Stop and reap a process a test started, by its pid. */
static void stop_child(pid_t pid) {
  if (pid <= 0)
    return;
  (void)syscall(SYS_kill, pid, SIGKILL);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
}

/* ---- A child that SIGKILL does not end ---- */

static atomic_int kill_swallowed; /* SIGKILLs are dropped, their pid kept */
static atomic_int kill_target;

int kill(pid_t pid, int sig) {
  if (sig == SIGKILL && atomic_load(&kill_swallowed)) {
    atomic_store(&kill_target, (int)pid);
    return 0;
  }
  return (int)syscall(SYS_kill, pid, sig);
}

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

static void
test_a_child_another_thread_starts_does_not_hold_up_detection(void **s) {
  (void)s;
  atomic_store(&spawn_wanted, 0);
  atomic_store(&spawn_quit, 0);
  atomic_store(&spawn_done, 0);
  atomic_store(&spawned_pid, 0);
  pthread_t spawner;
  assert_int_equal(pthread_create(&spawner, NULL, spawner_main, NULL), 0);
  atomic_store(&pipe_armed, 1);
  cq_gpu_list l;
  /* The default timeout: what the child would otherwise hold it up for. */
  int rc = detect_with(script("smi", two_gpus), 0, &l);
  atomic_store(&pipe_armed, 0);
  atomic_store(&spawn_quit, 1);
  assert_int_equal(pthread_join(spawner, NULL), 0);
  pid_t other = (pid_t)atomic_load(&spawned_pid);
  stop_child(other);
  assert_true(other > 0); /* started while detection held its pipe */
  assert_cq_ok(rc);
  assert_string_equal(l.source, "nvidia-smi");
  assert_ids(&l, "GPU-11111111-2222-3333-4444-555555555555,"
                 "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
  cq_gpu_list_free(&l);
}

struct detect_run {
  const char *cmd;
  int64_t timeout_ms;
  cq_gpu_list list;
  int rc;
  atomic_int done;
};

static void *detect_main(void *arg) {
  struct detect_run *d = arg;
  d->rc = detect_with(d->cmd, d->timeout_ms, &d->list);
  atomic_store(&d->done, 1);
  return NULL;
}

static void test_a_child_that_outlives_its_kill_is_left_behind(void **s) {
  (void)s;
  struct detect_run d = {.cmd = script("smi", "exec sleep 120"),
                         .timeout_ms = 200};
  atomic_store(&kill_target, 0);
  atomic_store(&kill_swallowed, 1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, detect_main, &d), 0);
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (!atomic_load(&d.done) && cq_now() < give_up)
    cqt_sleep_ms(10);
  atomic_store(&kill_swallowed, 0);
  int returned = atomic_load(&d.done);
  /* The child is still there (its kill was dropped): end it here, which
   * also ends a detection still waiting for it. */
  pid_t child = (pid_t)atomic_load(&kill_target);
  if (child > 0)
    (void)syscall(SYS_kill, child, SIGKILL);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_true(returned); /* detection did not wait for the child's end */
  assert_true(child > 0);
  /* Left behind unreaped: ours to reap now. */
  int status;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_cq_ok(d.rc);
  assert_int_equal(d.list.count, 0);
  assert_string_equal(d.list.source, "none");
  cq_gpu_list_free(&d.list);
}

static void test_a_killed_child_is_reaped(void **s) {
  (void)s;
  cq_gpu_list l;
  assert_cq_ok(detect_with(script("smi", "exec sleep 120"), 200, &l));
  assert_int_equal(l.count, 0);
  cq_gpu_list_free(&l);
  /* Detection left no child of ours behind, zombie or alive. */
  int status;
  assert_int_equal(waitpid(-1, &status, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
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
      T(test_a_child_another_thread_starts_does_not_hold_up_detection),
      T(test_a_child_that_outlives_its_kill_is_left_behind),
      T(test_a_killed_child_is_reaped),
      T(test_unparsable_nvidia_smi_output_names_command_and_text),
      T(test_detected_ids_reach_cuda_visible_devices),
      T(test_no_gpus_make_gpu_requests_never_satisfiable),
      T(test_parsers_accept_and_refuse_exactly),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
