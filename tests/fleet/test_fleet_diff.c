/*
 * The differential test: random operation sequences through an in-process
 * pool and a fleet pool (tests/fleet/diff.c), which must agree after every
 * operation: the same grants in the same order, the same failures, the
 * same state. CRONOQ_FLEET_DIFF_OPS operations in all (default 100,000),
 * as programs of 500, one seed each; on a failure the program is shrunk
 * and printed, step by step and as bytes. The hand-worked scenarios of the
 * model test (tests/test_model.c) run through both pools too.
 */
#include "fleet_test.h"

#include <inttypes.h>

#include "diff.h"
#include "fleet.h"
#include "support/prog.h"

#define OPS_PER_SEED 500

static void flush(void *arg) {
  char ok[16];
  cqr_str((struct cqr_server *)arg, ok, sizeof(ok), "FLUSHDB", NULL);
}

static int setup(void **state) {
  (void)state;
  fleet_server_up();
  df_server.url = fleet_server.url;
  df_server.flush = flush;
  df_server.flush_arg = &fleet_server;
  return 0;
}

static uint64_t env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? strtoull(v, NULL, 10) : dflt;
}

static void report_shrunk(uint8_t flags, df_op *ops, size_t n) {
  size_t m = df_shrink(&flags, ops, n);
  df_result res;
  df_run(flags, ops, m, NULL, &res);
  fprintf(stderr,
          "shrunk to %zu operations (flags %u), failing the same way "
          "(%s): %s\n",
          m, (unsigned)flags, df_fail_name(res.kind), res.why);
  df_run(flags, ops, m, stderr, &res);
  fprintf(stderr, "as bytes: {%u", (unsigned)flags);
  for (size_t k = 0; k < m; k++)
    for (int j = 0; j < DF_OP_BYTES; j++)
      fprintf(stderr, ",%u", (unsigned)ops[k].b[j]);
  fprintf(stderr, "}\n");
}

static void test_random_programs_agree_on_both_kinds_of_pool(void **state) {
  (void)state;
  uint64_t want = env_u64("CRONOQ_FLEET_DIFF_OPS", 100000), done = 0;
  uint64_t first = env_u64("CRONOQ_FLEET_DIFF_SEED", 1), seed;
  static df_op ops[OPS_PER_SEED];
  memset(&df_total, 0, sizeof(df_total));
  uint64_t settles = atomic_load(&cq__fleet_settles);
  int64_t t0 = cq_now();
  for (seed = first; done < want; seed++) {
    size_t n =
        want - done < OPS_PER_SEED ? (size_t)(want - done) : OPS_PER_SEED;
    uint8_t flags;
    df_generate(seed, &flags, ops, n);
    df_result res;
    if (df_run(flags, ops, n, NULL, &res) != 0) {
      fprintf(stderr, "seed %" PRIu64 " (flags %u): operation %ld: %s\n", seed,
              (unsigned)flags, res.failed_at, res.why);
      report_shrunk(flags, ops, n);
      fail_msg("seed %" PRIu64 ": the two pools disagree (see above)", seed);
    }
    done += res.ops_run;
  }
  const df_totals *t = &df_total;
  printf("fleet differential: %" PRIu64 " operations over %" PRIu64
         " seeds in %.1f s, 0 divergences\n",
         done, seed - first, (double)(cq_now() - t0) / 1000.0);
  printf("fleet differential: granted at once %" PRIu64 ", parked %" PRIu64
         ", granted after waiting %" PRIu64 ", busy %" PRIu64 ", never %" PRIu64
         ", timed out %" PRIu64 ", cancelled %" PRIu64
         ", failed by a change %" PRIu64 ", device items %" PRIu64
         " (whole %" PRIu64 "), class items %" PRIu64 ", lone grants %" PRIu64
         ", partial releases %" PRIu64
         ", parked behind a device waiter %" PRIu64
         ", owed work settled %" PRIu64 "\n",
         t->granted_at_once, t->parked, t->granted_after_wait, t->busy,
         t->never, t->timed_out, t->cancelled, t->failed_never, t->device_items,
         t->whole_items, t->class_items, t->lone_grants, t->parts,
         t->device_queued, atomic_load(&cq__fleet_settles) - settles);
  if (done >= 20000) {
    /* A generator gone blind would pass without testing anything. */
    assert_true(t->granted_after_wait > 0 && t->whole_items > 0);
    assert_true(t->timed_out > 0 && t->cancelled > 0 && t->failed_never > 0);
    assert_true(t->lone_grants > 0 && t->parts > 0 && t->device_queued > 0);
    assert_true(atomic_load(&cq__fleet_settles) > settles);
  }
}

/* ------------------------------------------------------------------------ */
/* Hand-worked scenarios, on both pools                                      */
/* ------------------------------------------------------------------------ */

#define OP(...)                                                                \
  (df_op) {                                                                    \
    { __VA_ARGS__ }                                                            \
  }
#define L(code) (DF_LITERAL | (code))
#define ADD_BUDGET(cap) OP(L(DF_ADD_BUDGET), cap, 0, 0, 0, 0, 0, 0)
#define ADD_LONE(cap) OP(L(DF_ADD_BUDGET), cap, 1, 0, 0, 0, 0, 0)
#define ADD_CLASS(max) OP(L(DF_ADD_CLASS), max, 0, 0, 0, 0, 0, 0)
#define ADD_DEVICES(n) OP(L(DF_ADD_DEVICES), n, 0, 0, 0, 0, 0, 0)
#define SUBMIT(s, mask, a, b, c, dl) OP(L(DF_SUBMIT), s, mask, a, b, c, 0, dl)
#define TRY(s, mask, a, b, c) OP(L(DF_TRY), s, mask, a, b, c, 0, 0)
#define RELEASE(s) OP(L(DF_RELEASE), s, 0, 0, 0, 0, 0, 0)
#define CANCEL(s) OP(L(DF_CANCEL), s, 0, 0, 0, 0, 0, 0)
#define ADVANCE(ms) OP(L(DF_ADVANCE), ms, 0, 0, 0, 0, 0, 0)
#define SET_CAP(res, cap) OP(L(DF_SET_CAP), res, cap, 0, 0, 0, 0, 0)
#define ONLINE(res, dev, on) OP(L(DF_ONLINE), res, dev, on, 0, 0, 0, 0)
#define REMOVE(res) OP(L(DF_REMOVE), res, 0, 0, 0, 0, 0, 0)
#define WHOLE(n) (0x80 | (n))
#define NEVER 255

/* Run a hand-written program on both pools: they must agree at every step,
 * and the trace must show each fragment of `want`, in order. */
static void run_program(const char *name, uint8_t flags, df_op *ops, size_t n,
                        const char *const *want) {
  df_result res;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  int rc = df_run(flags, ops, n, f, &res);
  fclose(f);
  if (rc != 0) {
    fprintf(stderr, "%s", text);
    free(text);
    fail_msg("%s: operation %ld: %s", name, res.failed_at, res.why);
  }
  const char *lacks = cqt_trace_lacks(text, want);
  if (lacks != NULL) {
    fprintf(stderr, "%s", text);
    free(text);
    fail_msg("%s: the trace lacks \"%s\" (after what came before)", name,
             lacks);
  }
  free(text);
}

#define RUN(flags, want, ...)                                                  \
  do {                                                                         \
    df_op prog_[] = {__VA_ARGS__};                                             \
    run_program(__func__, flags, prog_, sizeof(prog_) / sizeof(prog_[0]),      \
                want);                                                         \
  } while (0)

static void test_budget_fifo_with_reservation_on_both(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:6 } deadline=never -> OK\n",
      "submit s2 { b0:3 } deadline=never -> OK\n",
      "try s3 { b0:1 } -> EBUSY\n",
      "release s0 -> OK; cb s1 OK\n",
      "release s1 -> OK; cb s2 OK\n",
      NULL};
  RUN(0, want, ADD_BUDGET(8), SUBMIT(0, 1, 5, 0, 0, NEVER),
      SUBMIT(1, 1, 6, 0, 0, NEVER), SUBMIT(2, 1, 3, 0, 0, NEVER),
      TRY(3, 1, 1, 0, 0), RELEASE(0), RELEASE(1), RELEASE(2));
}

static void
test_requests_for_other_resources_keep_flowing_on_both(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:1 b1:1 } deadline=never -> OK\n",
      "try s2 { b1:4 } -> OK\n",
      "submit s3 { b1:1 } deadline=never -> OK\n",
      "release s0 -> OK\n",
      "release s2 -> OK; cb s1 OK; cb s3 OK\n",
      NULL};
  RUN(0, want, ADD_BUDGET(2), ADD_BUDGET(4), SUBMIT(0, 1, 2, 0, 0, NEVER),
      SUBMIT(1, 3, 1, 1, 0, NEVER), TRY(2, 2, 4, 0, 0),
      SUBMIT(3, 2, 1, 0, 0, NEVER), RELEASE(0), RELEASE(2), RELEASE(1),
      RELEASE(3));
}

static void
test_staged_claims_claim_one_resource_at_a_time_on_both(void **state) {
  (void)state;
  static const char *const staged[] = {
      "submit s2 { b1:3 } deadline=never -> OK; cb s2 OK\n",
      "release s0 -> OK\n", "release s2 -> OK\n",
      "release s5 -> OK; cb s1 OK\n", NULL};
  static const char *const at_once[] = {
      "submit s2 { b1:3 } deadline=never -> OK\n", "release s0 -> OK\n",
      "release s5 -> OK; cb s1 OK\n", "release s1 -> OK; cb s2 OK\n", NULL};
  RUN(1, staged, ADD_DEVICES(1), ADD_BUDGET(4), SUBMIT(5, 2, 1, 0, 0, NEVER),
      SUBMIT(0, 1, WHOLE(1), 0, 0, NEVER), SUBMIT(1, 3, WHOLE(1), 4, 0, NEVER),
      SUBMIT(2, 2, 3, 0, 0, NEVER), RELEASE(0), RELEASE(2), RELEASE(5),
      RELEASE(1));
  RUN(0, at_once, ADD_DEVICES(1), ADD_BUDGET(4), SUBMIT(5, 2, 1, 0, 0, NEVER),
      SUBMIT(0, 1, WHOLE(1), 0, 0, NEVER), SUBMIT(1, 3, WHOLE(1), 4, 0, NEVER),
      SUBMIT(2, 2, 3, 0, 0, NEVER), RELEASE(0), RELEASE(5), RELEASE(1),
      RELEASE(2));
}

/* The specification's table for devices: T1 (s5, 0.7) and T2 (s6, 0.5) wait on
 * three full devices; the reservation moves as capacity frees, T2 is
 * granted device 1, then T1 device 2. */
static void test_device_reservation_worked_example_on_both(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s5 { d0:700m } deadline=never -> OK\n",
      "submit s6 { d0:500m } deadline=never -> OK\n",
      "release s1 -> OK\n",
      "release s4 -> OK; cb s6 OK\n",
      "release s7 -> OK; cb s5 OK\n",
      NULL};
  RUN(0, want, ADD_DEVICES(3), SUBMIT(0, 1, 100, 0, 0, NEVER),
      SUBMIT(1, 1, 50, 0, 0, NEVER), SUBMIT(2, 1, 50, 0, 0, NEVER),
      SUBMIT(3, 1, 30, 0, 0, NEVER), SUBMIT(4, 1, 60, 0, 0, NEVER),
      SUBMIT(7, 1, 10, 0, 0, NEVER), SUBMIT(5, 1, 70, 0, 0, NEVER),
      SUBMIT(6, 1, 50, 0, 0, NEVER), RELEASE(1), RELEASE(4), RELEASE(7),
      RELEASE(0), RELEASE(2), RELEASE(3), RELEASE(5), RELEASE(6));
}

static void test_whole_devices_and_offline_devices_on_both(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s2 { d0:3dev } deadline=never -> ENEVER\n",
      "submit s3 { d0:2dev } deadline=never -> OK\n",
      "release s0 -> OK\n",
      "release s1 -> OK; cb s3 OK\n",
      "submit s4 { d0:500m } deadline=never -> OK\n",
      "device d0/1 offline -> OK; cb s4 ENEVER\n",
      NULL};
  RUN(0, want, ADD_DEVICES(3), SUBMIT(0, 1, WHOLE(1), 0, 0, NEVER),
      SUBMIT(1, 1, WHOLE(2), 0, 0, NEVER), ONLINE(0, 2, 0),
      SUBMIT(2, 1, WHOLE(3), 0, 0, NEVER), SUBMIT(3, 1, WHOLE(2), 0, 0, NEVER),
      RELEASE(0), RELEASE(1), ONLINE(0, 0, 0), SUBMIT(4, 1, 50, 0, 0, NEVER),
      ONLINE(0, 1, 0), RELEASE(3), ONLINE(0, 0, 1), ONLINE(0, 1, 1),
      ONLINE(0, 2, 1));
}

static void test_classes_cap_workers_on_both(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s2 { class=c0 b1:1 } deadline=never -> OK\n",
      "set c0 to 3 -> OK; cb s2 OK\n",
      "submit s3 { class=c0 } deadline=never -> OK\n",
      "set c0 to 0 -> OK; cb s3 ENEVER\n", NULL};
  RUN(0, want, ADD_CLASS(2), ADD_BUDGET(8), SUBMIT(0, 3, 0, 1, 0, NEVER),
      SUBMIT(1, 3, 0, 1, 0, NEVER), SUBMIT(2, 3, 0, 1, 0, NEVER), SET_CAP(0, 3),
      SUBMIT(3, 1, 0, 0, 0, NEVER), SET_CAP(0, 0), RELEASE(0), RELEASE(1),
      RELEASE(2));
}

static void
test_shrinking_fails_waiters_that_can_never_fit_on_both(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:5 } deadline=never -> OK\n",
      "set b0 to 4 -> OK; cb s1 ENEVER\n",
      "submit s2 { b0:2 } deadline=never -> OK\n",
      "release s0 -> OK; cb s2 OK\n", NULL};
  RUN(0, want, ADD_BUDGET(6), SUBMIT(0, 1, 3, 0, 0, NEVER),
      SUBMIT(1, 1, 5, 0, 0, NEVER), SET_CAP(0, 4), SET_CAP(0, 2),
      SUBMIT(2, 1, 2, 0, 0, NEVER), RELEASE(0), SET_CAP(0, 8), RELEASE(2));
}

static void test_lone_request_runs_alone_on_both(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:5 } deadline=never -> OK\n",
      "submit s2 { b0:1 } deadline=never -> OK\n",
      "release s0 -> OK; cb s1 OK\n",
      "set b0 to 6 -> OK\n",
      "release s1 -> OK; cb s2 OK\n",
      NULL};
  RUN(0, want, ADD_LONE(3), SUBMIT(0, 1, 1, 0, 0, NEVER),
      SUBMIT(1, 1, 5, 0, 0, NEVER), SUBMIT(2, 1, 1, 0, 0, NEVER), RELEASE(0),
      SET_CAP(0, 6), RELEASE(1), RELEASE(2));
}

static void test_deadlines_cancel_and_removal_on_both(void **state) {
  (void)state;
  static const char *const want[] = {
      "remove b0 -> EINUSE\n",
      "submit s3 { b0:1 } deadline=+0 -> OK; cb s3 ETIMEDOUT\n",
      "advance +7 -> OK; cb s1 ETIMEDOUT\n",
      "cancel s2 -> OK; cb s2 ECANCELED\n",
      "cancel s2 -> ESTATE\n",
      "release s0 -> ESTATE\n",
      "remove b0 -> OK\n",
      NULL};
  RUN(0, want, ADD_BUDGET(1), SUBMIT(0, 1, 1, 0, 0, NEVER), REMOVE(0),
      SUBMIT(1, 1, 1, 0, 0, 5), SUBMIT(2, 1, 1, 0, 0, 20),
      SUBMIT(3, 1, 1, 0, 0, 0), ADVANCE(7), CANCEL(2), CANCEL(2), RELEASE(0),
      RELEASE(0), REMOVE(0));
}

static void test_waiters_expiring_together_all_time_out_on_both(void **state) {
  (void)state;
  static const char *const want[] = {
      "advance +9 -> OK; cb s1 ETIMEDOUT; cb s2 ETIMEDOUT\n", NULL};
  RUN(0, want, ADD_BUDGET(8), SUBMIT(0, 1, 3, 0, 0, NEVER),
      SUBMIT(1, 1, 6, 0, 0, 7), SUBMIT(2, 1, 1, 0, 0, 7), ADVANCE(9),
      RELEASE(0));
}

/* Scripts bounded to three calls each leave most of a sweep to the next:
 * the grants still come in order, in the operation that caused them. */
static void test_owed_work_is_done_by_the_next_script(void **state) {
  (void)state;
  static const char *const want[] = {
      "release s0 -> OK; cb s1 OK; cb s2 OK; cb s3 OK; cb s4 OK; cb s5 OK\n",
      NULL};
  uint64_t before = atomic_load(&cq__fleet_settles);
  RUN(2 << 1, want, ADD_BUDGET(5), SUBMIT(0, 1, 5, 0, 0, NEVER),
      SUBMIT(1, 1, 1, 0, 0, NEVER), SUBMIT(2, 1, 1, 0, 0, NEVER),
      SUBMIT(3, 1, 1, 0, 0, NEVER), SUBMIT(4, 1, 1, 0, 0, NEVER),
      SUBMIT(5, 1, 1, 0, 0, NEVER), RELEASE(0), RELEASE(1), RELEASE(2),
      RELEASE(3), RELEASE(4), RELEASE(5));
  assert_true(atomic_load(&cq__fleet_settles) > before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_budget_fifo_with_reservation_on_both),
      cmocka_unit_test(test_requests_for_other_resources_keep_flowing_on_both),
      cmocka_unit_test(test_staged_claims_claim_one_resource_at_a_time_on_both),
      cmocka_unit_test(test_device_reservation_worked_example_on_both),
      cmocka_unit_test(test_whole_devices_and_offline_devices_on_both),
      cmocka_unit_test(test_classes_cap_workers_on_both),
      cmocka_unit_test(test_shrinking_fails_waiters_that_can_never_fit_on_both),
      cmocka_unit_test(test_lone_request_runs_alone_on_both),
      cmocka_unit_test(test_deadlines_cancel_and_removal_on_both),
      cmocka_unit_test(test_waiters_expiring_together_all_time_out_on_both),
      cmocka_unit_test(test_owed_work_is_done_by_the_next_script),
      cmocka_unit_test(test_random_programs_agree_on_both_kinds_of_pool),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
