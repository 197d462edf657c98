/*
 * Model-based random testing, part of the reliability suite: random operation
 * sequences run through the library and through the reference model of
 * tests/model/, compared after every operation (tests/model/ops.c says what is
 * compared and which invariants are checked).
 *
 * The random test runs CRONOQ_MODEL_OPS operations in all (default
 * 1,000,000) as programs of 500 operations, one seed each. On a failure it
 * prints the seed, shrinks the program automatically (chunks, single
 * operations, then arguments) and prints the shortest program that still
 * fails the same way (model/ops.h, enum mo_fail), step by step and as bytes
 * for a regression test, then fails.
 */
#include "support/cqt.h"

#include <inttypes.h>
#include <stdbool.h>

#include "model/ops.h"
#include "support/prog.h"

#define OPS_PER_SEED 500

static uint64_t total_ops(void) {
  const char *env = getenv("CRONOQ_MODEL_OPS");
  if (env != NULL && *env != '\0') {
    long long v = strtoll(env, NULL, 10);
    if (v > 0)
      return (uint64_t)v;
  }
  return 1000000;
}

/* Print a failing program shrunk to its shortest form. */
static size_t report_shrunk(uint8_t flags, mo_op *ops, size_t n) {
  size_t m = mo_shrink(&flags, ops, n);
  mo_result res;
  mo_run(flags, ops, m, NULL, &res);
  fprintf(stderr,
          "shrunk to %zu operations (flags %u); it fails the same way (%s): "
          "%s\n",
          m, (unsigned)flags, mo_fail_name(res.kind), res.why);
  mo_run(flags, ops, m, stderr, &res);
  fprintf(stderr, "as bytes: {%u", (unsigned)flags);
  for (size_t k = 0; k < m; k++)
    for (int j = 0; j < MO_OP_BYTES; j++)
      fprintf(stderr, ",%u", (unsigned)ops[k].b[j]);
  fprintf(stderr, "}\n");
  return m;
}

/* Run one program; on a failure report, shrink and fail the test. */
static void run_or_shrink(const char *name, uint8_t flags, mo_op *ops,
                          size_t n) {
  mo_result res;
  if (mo_run(flags, ops, n, NULL, &res) == 0)
    return;
  fprintf(stderr, "%s: operation %ld of %zu failed: %s\n", name, res.failed_at,
          n, res.why);
  report_shrunk(flags, ops, n);
  fail_msg("%s: the library and the model disagree (see above)", name);
}

/* CRONOQ_MODEL_SEED: the first seed (default 1), to explore further. */
static uint64_t first_seed(void) {
  const char *env = getenv("CRONOQ_MODEL_SEED");
  return env != NULL && *env != '\0' ? strtoull(env, NULL, 10) : 1;
}

static void test_random_programs_agree_with_the_model(void **state) {
  (void)state;
  uint64_t want = total_ops(), done = 0;
  static mo_op ops[OPS_PER_SEED];
  uint64_t seed, first = first_seed();
  memset(&mo_total, 0, sizeof(mo_total));
  for (seed = first; done < want; seed++) {
    size_t n =
        want - done < OPS_PER_SEED ? (size_t)(want - done) : OPS_PER_SEED;
    uint8_t flags;
    mo_generate(seed, &flags, ops, n);
    mo_result res;
    if (mo_run(flags, ops, n, NULL, &res) != 0) {
      fprintf(stderr, "seed %" PRIu64 " (flags %u): operation %ld failed: %s\n",
              seed, (unsigned)flags, res.failed_at, res.why);
      report_shrunk(flags, ops, n);
      fail_msg("seed %" PRIu64 ": the library and the model disagree", seed);
    }
    done += res.ops_run;
  }
  printf("model: %" PRIu64 " operations checked over %" PRIu64 " seeds\n", done,
         seed - first);
  /* What they exercised (a run with nothing backfilled or no device
   * granted would be a generator gone blind). */
  const mo_totals *t = &mo_total;
  printf("model: granted at once %" PRIu64 ", parked %" PRIu64
         ", granted after waiting %" PRIu64 ", backfilled %" PRIu64
         ", busy %" PRIu64 ", never %" PRIu64 ", timed out %" PRIu64
         ", cancelled %" PRIu64 ", failed by a shrink %" PRIu64
         ", device items %" PRIu64 " (whole %" PRIu64 "), class items %" PRIu64
         ", lone grants %" PRIu64 ", late heads %" PRIu64
         " (after a device grant %" PRIu64 ")"
         ", capacity changes %" PRIu64 ", devices offline %" PRIu64
         ", partial releases %" PRIu64 " (leaving nothing %" PRIu64
         "), destroys refused %" PRIu64 ", lone requests at capacity 0 %" PRIu64
         "\n",
         t->granted_at_once, t->parked, t->granted_after_wait, t->backfilled,
         t->busy, t->never, t->timed_out, t->cancelled, t->failed_never,
         t->device_items, t->whole_device_items, t->class_items, t->lone_grants,
         t->late_heads, t->device_late_heads, t->capacity_changes, t->offline,
         t->partial_releases, t->emptied, t->destroys_refused, t->lone_at_zero);
  if (done >= 100000) {
    assert_true(t->backfilled > 0 && t->granted_after_wait > 0);
    assert_true(t->whole_device_items > 0 && t->failed_never > 0);
    assert_true(t->timed_out > 0 && t->cancelled > 0 && t->lone_grants > 0);
    assert_true(t->partial_releases > 0 && t->emptied > 0);
    assert_true(t->destroys_refused > 0 && t->lone_at_zero > 0);
  }
}

/* ------------------------------------------------------------------------ */
/* Hand-written programs, one per rule or invariant                          */
/* ------------------------------------------------------------------------ */

/*
 * Literal operations (see MO_LITERAL in model/ops.h). A request: `mask`
 * selects resources by index (bit i), a, b, c are the amounts of its first,
 * second and third item (budgets: units; device pools: 0x80 | n whole
 * devices, or hundredths of one; a class item's amount is ignored), `limit`
 * the hold limit in ms (0: none), `dl` the deadline in ms from now.
 */
#define OP(...)                                                                \
  (mo_op) {                                                                    \
    { __VA_ARGS__ }                                                            \
  }
#define L(code) (MO_LITERAL | (code))
#define ADD_BUDGET(cap) OP(L(MO_ADD_BUDGET), cap, 0, 0, 0, 0, 0, 0)
#define ADD_LONE(cap) OP(L(MO_ADD_BUDGET), cap, 1, 0, 0, 0, 0, 0)
#define ADD_CLASS(max) OP(L(MO_ADD_CLASS), max, 0, 0, 0, 0, 0, 0)
#define ADD_DEVICES(n) OP(L(MO_ADD_DEVICES), n, 0, 0, 0, 0, 0, 0)
#define SUBMIT(s, mask, a, b, c, limit, dl)                                    \
  OP(L(MO_SUBMIT), s, mask, a, b, c, limit, dl)
#define TRY(s, mask, a, b, c, limit) OP(L(MO_TRY), s, mask, a, b, c, limit, 0)
#define RELEASE(s) OP(L(MO_RELEASE), s, 0, 0, 0, 0, 0, 0)
#define CANCEL(s) OP(L(MO_CANCEL), s, 0, 0, 0, 0, 0, 0)
#define ADVANCE(ms) OP(L(MO_ADVANCE), ms, 0, 0, 0, 0, 0, 0)
#define SET_CAP(res, cap) OP(L(MO_SET_CAP), res, cap, 0, 0, 0, 0, 0)
#define ONLINE(res, dev, on) OP(L(MO_ONLINE), res, dev, on, 0, 0, 0, 0)
#define REMOVE(res) OP(L(MO_REMOVE), res, 0, 0, 0, 0, 0, 0)
#define WHOLE(n) (0x80 | (n))
#define NEVER 255

/*
 * Run a hand-written program: the library and the model must agree at
 * every step, and the step-by-step trace must show each of `want` (a
 * fragment of one line, "\n" marking its end), in order: the outcomes the
 * program was written for.
 */
static void run_program(const char *name, uint8_t flags, mo_op *ops, size_t n,
                        const char *const *want) {
  run_or_shrink(name, flags, ops, n);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  mo_result res;
  mo_run(flags, ops, n, f, &res);
  fclose(f);
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
    mo_op prog_[] = {__VA_ARGS__};                                             \
    run_program(__func__, flags, prog_, sizeof(prog_) / sizeof(prog_[0]),      \
                want);                                                         \
  } while (0)

#define STAGED 1
#define BACKFILL 2
#define HOOK 4

/* b0 = 8: s0 holds 5; s1 asks 6 and waits, withholding the 3 free; s2's 3
 * and a try of 1 do not pass it; each release grants the oldest. */
static void test_budget_fifo_with_reservation(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:6 } deadline=never -> OK\n",
      "submit s2 { b0:3 } deadline=never -> OK\n",
      "try s3 { b0:1 } -> EBUSY\n",
      "release s0 -> OK; cb s1 OK\n",
      "release s1 -> OK; cb s2 OK\n",
      NULL};
  RUN(0, want, ADD_BUDGET(8), SUBMIT(0, 1, 5, 0, 0, 0, NEVER),
      SUBMIT(1, 1, 6, 0, 0, 0, NEVER), SUBMIT(2, 1, 3, 0, 0, 0, NEVER),
      TRY(3, 1, 1, 0, 0, 0), RELEASE(0), RELEASE(1), RELEASE(2));
}

/* The specification's worked example in small: s1 {b0:1, b1:1} waits for b0 and
 * does not claim b1, so a try of all of b1 passes it; once b0 is back it
 * lacks b1 and claims it, ahead of the younger s3. */
static void test_requests_for_other_resources_keep_flowing(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:1 b1:1 } deadline=never"
      " -> OK\n",
      "try s2 { b1:4 } -> OK\n",
      "submit s3 { b1:1 } deadline=never -> OK\n",
      "release s0 -> OK\n",
      "release s2 -> OK; cb s1 OK; cb s3 OK\n",
      NULL};
  RUN(0, want, ADD_BUDGET(2), ADD_BUDGET(4), SUBMIT(0, 1, 2, 0, 0, 0, NEVER),
      SUBMIT(1, 3, 1, 1, 0, 0, NEVER), TRY(2, 2, 4, 0, 0, 0),
      SUBMIT(3, 2, 1, 0, 0, 0, NEVER), RELEASE(0), RELEASE(2), RELEASE(1),
      RELEASE(3));
}

/* With staged claims a job waiting for its device withholds no b1 from the
 * b1-only job behind it (it claims b1 only once its device is covered); by
 * default it claims both, and the b1-only job waits behind it. */
static void test_staged_claims_claim_one_resource_at_a_time(void **state) {
  (void)state;
  static const char *const staged[] = {
      "submit s2 { b1:3 } deadline=never -> OK; cb s2 OK\n",
      "release s0 -> OK\n", "release s2 -> OK\n",
      "release s5 -> OK; cb s1 OK\n", NULL};
  static const char *const at_once[] = {
      "submit s2 { b1:3 } deadline=never -> OK\n", "release s0 -> OK\n",
      "release s5 -> OK; cb s1 OK\n", "release s1 -> OK; cb s2 OK\n", NULL};
  RUN(STAGED, staged, ADD_DEVICES(1), ADD_BUDGET(4),
      SUBMIT(5, 2, 1, 0, 0, 0, NEVER), SUBMIT(0, 1, WHOLE(1), 0, 0, 0, NEVER),
      SUBMIT(1, 3, WHOLE(1), 4, 0, 0, NEVER), SUBMIT(2, 2, 3, 0, 0, 0, NEVER),
      RELEASE(0), RELEASE(2), RELEASE(5), RELEASE(1));
  RUN(0, at_once, ADD_DEVICES(1), ADD_BUDGET(4),
      SUBMIT(5, 2, 1, 0, 0, 0, NEVER), SUBMIT(0, 1, WHOLE(1), 0, 0, 0, NEVER),
      SUBMIT(1, 3, WHOLE(1), 4, 0, 0, NEVER), SUBMIT(2, 2, 3, 0, 0, 0, NEVER),
      RELEASE(0), RELEASE(5), RELEASE(1), RELEASE(2));
}

/* The specification's table for devices: three full devices; T1 (s5) asks 0.7
 * and reserves device 0, T2 (s6) asks 0.5; 0.5 frees on device 1 (the
 * reservation moves there: nothing granted); 0.6 frees on device 2 (it
 * moves again; T2 gets device 1); 0.1 more frees on device 2: T1 gets it.
 * Fractions pack best fit while the devices fill. */
static void test_device_fractions_reservation_and_placement(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s5 { d0:700m } deadline=never -> OK\n",
      "submit s6 { d0:500m } deadline=never -> OK\n",
      "release s1 -> OK\n",
      "release s4 -> OK; cb s6 OK\n",
      "release s7 -> OK; cb s5 OK\n",
      NULL};
  RUN(0, want, ADD_DEVICES(3), SUBMIT(0, 1, 100, 0, 0, 0, NEVER),
      SUBMIT(1, 1, 50, 0, 0, 0, NEVER), SUBMIT(2, 1, 50, 0, 0, 0, NEVER),
      SUBMIT(3, 1, 30, 0, 0, 0, NEVER), SUBMIT(4, 1, 60, 0, 0, 0, NEVER),
      SUBMIT(7, 1, 10, 0, 0, 0, NEVER), SUBMIT(5, 1, 70, 0, 0, 0, NEVER),
      SUBMIT(6, 1, 50, 0, 0, 0, NEVER), RELEASE(1), RELEASE(4), RELEASE(7),
      RELEASE(0), RELEASE(2), RELEASE(3), RELEASE(5), RELEASE(6));
}

/* Whole devices are the lowest entirely free ones; an offline device keeps
 * its holder but takes no new work; a request for more devices than are
 * online is never satisfiable, and a waiter that becomes so fails. */
static void test_whole_devices_and_offline_devices(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s2 { d0:3dev } deadline=never -> ENEVER\n",
      "submit s3 { d0:2dev } deadline=never -> OK\n",
      "release s0 -> OK\n",
      "release s1 -> OK; cb s3 OK\n",
      "submit s4 { d0:500m } deadline=never -> OK\n",
      "device d0/1 offline -> OK; cb s4 ENEVER\n",
      NULL};
  RUN(0, want, ADD_DEVICES(3), SUBMIT(0, 1, WHOLE(1), 0, 0, 0, NEVER),
      SUBMIT(1, 1, WHOLE(2), 0, 0, 0, NEVER), ONLINE(0, 2, 0),
      SUBMIT(2, 1, WHOLE(3), 0, 0, 0, NEVER),
      SUBMIT(3, 1, WHOLE(2), 0, 0, 0, NEVER), RELEASE(0), RELEASE(1),
      ONLINE(0, 0, 0), SUBMIT(4, 1, 50, 0, 0, 0, NEVER), ONLINE(0, 1, 0),
      RELEASE(3), ONLINE(0, 0, 1), ONLINE(0, 1, 1), ONLINE(0, 2, 1));
}

/* A class caps the grants of its requests; growing its max grants the
 * waiter at once, a max of 0 fails the waiters. */
static void test_classes_cap_workers(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s2 { class=c0 b1:1 } deadline=never -> OK\n",
      "set class c0 to 3 -> OK; cb s2 OK\n",
      "submit s3 { class=c0 } deadline=never -> OK\n",
      "set class c0 to 0 -> OK; cb s3 ENEVER\n", NULL};
  RUN(0, want, ADD_CLASS(2), ADD_BUDGET(8), SUBMIT(0, 3, 0, 1, 0, 0, NEVER),
      SUBMIT(1, 3, 0, 1, 0, 0, NEVER), SUBMIT(2, 3, 0, 1, 0, 0, NEVER),
      SET_CAP(0, 3), SUBMIT(3, 1, 0, 0, 0, 0, NEVER), SET_CAP(0, 0), RELEASE(0),
      RELEASE(1), RELEASE(2));
}

/* Shrinking takes nothing from holders; a waiter that can now never fit
 * fails with CQ_ENEVER; growing back grants nothing that was not asked. */
static void test_shrinking_fails_waiters_that_can_never_fit(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:5 } deadline=never -> OK\n",
      "set budget b0 to 4 -> OK; cb s1 ENEVER\n",
      "submit s2 { b0:2 } deadline=never -> OK\n",
      "release s0 -> OK; cb s2 OK\n", NULL};
  RUN(0, want, ADD_BUDGET(6), SUBMIT(0, 1, 3, 0, 0, 0, NEVER),
      SUBMIT(1, 1, 5, 0, 0, 0, NEVER), SET_CAP(0, 4), SET_CAP(0, 2),
      SUBMIT(2, 1, 2, 0, 0, 0, NEVER), RELEASE(0), SET_CAP(0, 8), RELEASE(2));
}

/* A lone request larger than its budget waits its turn, runs alone holding
 * all of it, and everything else waits behind it. */
static void test_lone_request_runs_alone(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:5 } deadline=never -> OK\n",
      "submit s2 { b0:1 } deadline=never -> OK\n",
      "release s0 -> OK; cb s1 OK\n", "release s1 -> OK; cb s2 OK\n", NULL};
  RUN(0, want, ADD_LONE(3), SUBMIT(0, 1, 1, 0, 0, 0, NEVER),
      SUBMIT(1, 1, 5, 0, 0, 0, NEVER), SUBMIT(2, 1, 1, 0, 0, 0, NEVER),
      RELEASE(0), RELEASE(1), RELEASE(2));
}

/* Deadlines on the virtual clock, a deadline already past, cancel, double
 * cancel and release, and removal refused while held. */
static void test_deadlines_cancel_and_removal(void **state) {
  (void)state;
  static const char *const want[] = {
      "remove b0 -> EINUSE\n",
      "submit s3 { b0:1 } deadline=+0 -> OK; cb s3 ETIMEDOUT\n",
      "advance +7 (to 1007) -> OK; cb s1 ETIMEDOUT\n",
      "cancel s2 -> OK; cb s2 ECANCELED\n",
      "cancel s2 -> ESTATE\n",
      "release s0 -> ESTATE\n",
      "remove b0 -> OK\n",
      NULL};
  RUN(0, want, ADD_BUDGET(1), SUBMIT(0, 1, 1, 0, 0, 0, NEVER), REMOVE(0),
      SUBMIT(1, 1, 1, 0, 0, 0, 5), SUBMIT(2, 1, 1, 0, 0, 0, 20),
      SUBMIT(3, 1, 1, 0, 0, 0, 0), ADVANCE(7), CANCEL(2), CANCEL(2), RELEASE(0),
      RELEASE(0), REMOVE(0));
}

/* Two waiters whose deadlines passed expire in one call: the departure of
 * the first (a claimant) does not grant the second, whose deadline passed
 * too. The specification leaves this open; the library expires both first. */
static void test_waiters_expiring_together_all_time_out(void **state) {
  (void)state;
  static const char *const want[] = {
      "advance +9 (to 1009) -> OK; cb s1 ETIMEDOUT; cb s2 ETIMEDOUT\n", NULL};
  RUN(0, want, ADD_BUDGET(8), SUBMIT(0, 1, 3, 0, 0, 0, NEVER),
      SUBMIT(1, 1, 6, 0, 0, 0, 7), SUBMIT(2, 1, 1, 0, 0, 0, 7), ADVANCE(9),
      RELEASE(0));
}

/* The specification's backfill example: b0 = 10; s0 holds 6 until 1100; the
 * head s1 asks 8 (S = 1100). At 1010 s2 (3 for 50 ms, ends 1060) is backfilled;
 * s3 (3 for 200 ms) waits: at S the head would find 7; s4 (no limit) waits.
 * At 1100 s0 ends and the head is granted, on time; then s3 and s4 in
 * order. */
static void test_backfill_worked_example(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:8 } deadline=never -> OK\n",
      "submit s2 { b0:3 limit=50 } deadline=never -> OK; cb s2 OK\n",
      "submit s3 { b0:3 limit=200 } deadline=never -> OK\n",
      "submit s4 { b0:1 } deadline=never -> OK\n",
      "release s0 at its limit end 1100 -> OK -> OK; cb s1 OK\n",
      "release s1 -> OK; cb s3 OK; cb s4 OK\n",
      NULL};
  RUN(BACKFILL, want, ADD_BUDGET(10), SUBMIT(0, 1, 6, 0, 0, 100, NEVER),
      SUBMIT(1, 1, 8, 0, 0, 0, NEVER), ADVANCE(10),
      SUBMIT(2, 1, 3, 0, 0, 50, NEVER), SUBMIT(3, 1, 3, 0, 0, 200, NEVER),
      SUBMIT(4, 1, 1, 0, 0, 0, NEVER), ADVANCE(90), RELEASE(1), RELEASE(3),
      RELEASE(4));
}

/* Backfill on devices: s0 holds devices 0 and 1 until 1050; the head s1
 * asks two whole devices and reserves the two with the most free capacity
 * (2, then 0). s2 (half a device for 30 ms) is backfilled on device 2: it
 * ends before S. s3 (half for 100 ms) is backfilled too: at S the head
 * still finds devices 0 and 1 entirely free. s4 (half, no limit) waits. */
static void test_backfill_on_devices(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { d0:2dev } deadline=never -> OK\n",
      "submit s2 { d0:500m limit=30 } deadline=never -> OK; cb s2 OK\n",
      "submit s3 { d0:500m limit=100 } deadline=never -> OK; cb s3 OK\n",
      "submit s4 { d0:500m } deadline=never -> OK\n",
      "release s0 at its limit end 1050 -> OK -> OK; cb s1 OK; cb s4 OK\n",
      "backfilled 2, late heads 0 ",
      NULL};
  RUN(BACKFILL, want, ADD_DEVICES(3), SUBMIT(0, 1, WHOLE(2), 0, 0, 50, NEVER),
      SUBMIT(1, 1, WHOLE(2), 0, 0, 0, NEVER), SUBMIT(2, 1, 50, 0, 0, 30, NEVER),
      SUBMIT(3, 1, 50, 0, 0, 100, NEVER), SUBMIT(4, 1, 50, 0, 0, 0, NEVER),
      ADVANCE(60), RELEASE(1), RELEASE(3), RELEASE(4));
}

/* A capacity that shrinks under a waiting head makes it late for its
 * sticky S (S never moves later): one of the specification's exceptions to the
 * promise. The model excuses it, and counts the late head as the library
 * does (cq_pool_stats.late_heads). */
static void test_backfill_head_late_after_a_shrink_is_counted(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s1 { b0:5 limit=1 } deadline=never -> OK\n",
      "submit s2 { b0:2 limit=10 } deadline=never -> OK\n",
      "set budget b0 to 5 -> OK\n",
      "release s3 -> OK; cb s1 OK\n",
      "release s1 -> OK; cb s2 OK\n",
      "backfilled 0, late heads 1 (late after a device grant 0)\n",
      NULL};
  /* s3 holds b0:1 for ever, s0 holds 5 until 1010; the head s1 asks 5: S =
   * 1010. s2 (2 for 10 ms) ends by S but finds 1 free: it waits, and the
   * sweeps compute S. The budget shrinks to 5: at 1010 the head finds 4,
   * and is granted only when s3 lets go, at 1012. */
  RUN(BACKFILL, want, ADD_BUDGET(7), SUBMIT(3, 1, 1, 0, 0, 0, NEVER),
      SUBMIT(0, 1, 5, 0, 0, 10, NEVER), SUBMIT(1, 1, 5, 0, 0, 1, NEVER),
      SUBMIT(2, 1, 2, 0, 0, 10, NEVER), SET_CAP(0, 5), ADVANCE(12), RELEASE(3),
      RELEASE(1), RELEASE(2));
}

/*
 * docs/POLICY.md, "Backfill": "Units coming back anywhere let the waiters
 * behind H try again, whatever blocked them." s4 {b0:1, b1:1, limit 5} waits
 * behind the head s2 {b0:3} (S = 1010, when s0's b0:1 ends), blocked on b0 (s2
 * withholds it) and lacking b1 (s1 holds it). Nobody is blocked on b1, yet
 * when s1 gives it back s4 fits, the head's withholding disregarded, and
 * ends at 1005 <= S: it is backfilled at the release. (The library once
 * looked again only at resources some waiter was blocked on, and s4 waited
 * until after the head.) At 1010 s0 ends and the head is granted on time.
 */
static void
test_release_of_a_resource_nobody_waits_on_lets_backfill_run(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s4 { b0:1 b1:1 limit=5 } deadline=never -> OK\n",
      "release s1 -> OK; cb s4 OK\n",
      "release s4 at its limit end 1005 -> OK; release s0 at its limit end "
      "1010 -> OK -> OK; cb s2 OK\n",
      "backfilled 1, late heads 0 ", NULL};
  for (uint8_t hook = 0; hook <= HOOK; hook += HOOK)
    RUN(BACKFILL | hook, want, ADD_BUDGET(3), ADD_BUDGET(1),
        SUBMIT(0, 1, 1, 0, 0, 10, NEVER), /* s0 b0:1 until 1010 */
        SUBMIT(1, 2, 1, 0, 0, 0, NEVER),  /* s1 b1:1 for ever */
        SUBMIT(2, 1, 3, 0, 0, 0, NEVER),  /* s2 b0:3: the head, S = 1010 */
        SUBMIT(3, 1, 1, 0, 0, 0, NEVER),  /* s3 b0:1 waits */
        CANCEL(3),                        /* a sweep: S is computed */
        SUBMIT(4, 3, 1, 1, 0, 5, NEVER),  /* s4 {b0:1, b1:1} for 5 ms */
        RELEASE(1), ADVANCE(10), RELEASE(2));
}

/*
 * A request of budgets only and no limit is the kind the library may grant
 * and release without the pool lock; in a backfill pool it must not, since
 * the shadow time has to see its release (docs/POLICY.md, "Hold limits"). b0 =
 * 10: s0 holds 2 for ever (such a request), s1 holds 4 until 1100; the head s2
 * asks 8: S = 1100, when it would find 8. s3 (2 for 200 ms, past S) waits:
 * at S the head would find only 6. When s0 gives its 2 back (a holder
 * counted in S, so S is computed again), the head would find 8 at S with
 * s3 running: s3 is backfilled at the release. (The library once released
 * such a grant without the lock, its projection of S never got the units
 * back, and s3 waited.) At 1100 s1 ends and the head is granted on time.
 * Without an event hook, which would take the lock anyway.
 */
static void
test_lock_free_kind_release_in_backfill_pool_lets_backfill_run(void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s0 { b0:2 } deadline=never -> OK; cb s0 OK\n",
      "submit s3 { b0:2 limit=200 } deadline=never -> OK\n",
      "release s0 -> OK; cb s3 OK\n",
      "release s1 at its limit end 1100 -> OK -> OK; cb s2 OK\n",
      "backfilled 1, late heads 0 ",
      NULL};
  RUN(BACKFILL, want, ADD_BUDGET(10), SUBMIT(0, 1, 2, 0, 0, 0, NEVER),
      SUBMIT(1, 1, 4, 0, 0, 100, NEVER), SUBMIT(2, 1, 8, 0, 0, 0, NEVER),
      SUBMIT(3, 1, 2, 0, 0, 200, NEVER), ADVANCE(10), RELEASE(0), ADVANCE(90),
      RELEASE(2), RELEASE(3));
}

/*
 * docs/POLICY.md, "Backfill": a request younger than H with a limit, that fits
 * in what is free now once H's withholding is disregarded, "is granted before
 * S" if it ends by S. b0 = 3, b1 = 1: s0 holds b0:2 until 1010 and s3 b1:1
 * until 1002; the head s1 asks all of b0 (S = 1010); s2 {b0:1, b1:1}, no
 * limit, lacks both and claims both; s4 {b0:1, b1:1, 5 ms} is blocked on
 * b0 (the head withholds it). At 1002 b1 comes back, withheld for s2, its
 * claimant: s4 still lacks it. When s2 is cancelled nothing withholds b1
 * any more and s4 fits, ending at 1007 <= S: it is backfilled then. Nobody
 * is blocked on b1 (s2 and s4 are blocked on b0), and the library misses
 * it: it looks again after a claimant leaves only where waiters are
 * blocked (src/queue.c, drop_claims()), so s4 waits until after the head.
 */
static void test_claimant_leaving_a_resource_nobody_waits_on_lets_backfill_run(
    void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s4 { b0:1 b1:1 limit=5 } deadline=never -> OK\n",
      "advance +2 (to 1002); release s3 at its limit end 1002 -> OK -> OK\n",
      "cancel s2 -> OK; cb s2 ECANCELED; cb s4 OK\n",
      "release s0 at its limit end 1010 -> OK -> OK; cb s1 OK\n",
      "backfilled 1, late heads 0 ",
      NULL};
  RUN(BACKFILL, want, ADD_BUDGET(3), ADD_BUDGET(1),
      SUBMIT(0, 1, 2, 0, 0, 10, NEVER), /* s0 b0:2 until 1010 */
      SUBMIT(3, 2, 1, 0, 0, 2, NEVER),  /* s3 b1:1 until 1002 */
      SUBMIT(1, 1, 3, 0, 0, 0, NEVER),  /* s1 b0:3: the head, S = 1010 */
      SUBMIT(2, 3, 1, 1, 0, 0, NEVER),  /* s2 {b0:1, b1:1} claims both */
      SUBMIT(4, 3, 1, 1, 0, 5, NEVER),  /* s4 {b0:1, b1:1} for 5 ms */
      ADVANCE(2), CANCEL(2), ADVANCE(8), RELEASE(1));
}

/*
 * How the interpreter moves time in a backfill pool (ops.c, op_advance()):
 * event by event, each deadline expired at its time and each limited grant
 * released at its limit end; at one moment the release comes first, then
 * the expiry. b0 = 4, b1 = 1: s0 holds b0:2 until 1010, s1 b1:1 until
 * 1005; the head s2 asks all of b0 (S = 1010); s3 {b0:1, b1:1, 3 ms} waits
 * for b1. With s2's deadline at 1005, s1's release at 1005 comes while s2
 * still waits (with manual timers a deadline passes only in
 * cq_pool_expire()): s3 ends by S and passes it; then s2 times out. With
 * s2's deadline at 1003, s2 times out at 1003, before the release, and s3
 * is granted in order at 1005.
 */
static void
test_advance_keeps_limits_and_deadlines_in_time_order(void **state) {
  (void)state;
  static const char *const tie[] = {
      "advance +5 (to 1005); release s1 at its limit end 1005 -> OK -> OK;"
      " cb s3 OK; cb s2 ETIMEDOUT\n",
      "backfilled 1, late heads 0 ", NULL};
  static const char *const before[] = {
      "advance +5 (to 1005); expire at 1003 -> OK; release s1 at its limit "
      "end 1005 -> OK -> OK; cb s2 ETIMEDOUT; cb s3 OK\n",
      "backfilled 0, late heads 0 ", NULL};
  RUN(BACKFILL, tie, ADD_BUDGET(4), ADD_BUDGET(1),
      SUBMIT(0, 1, 2, 0, 0, 10, NEVER), SUBMIT(1, 2, 1, 0, 0, 5, NEVER),
      SUBMIT(2, 1, 4, 0, 0, 0, 5), SUBMIT(3, 3, 1, 1, 0, 3, NEVER), ADVANCE(5),
      ADVANCE(10));
  RUN(BACKFILL, before, ADD_BUDGET(4), ADD_BUDGET(1),
      SUBMIT(0, 1, 2, 0, 0, 10, NEVER), SUBMIT(1, 2, 1, 0, 0, 5, NEVER),
      SUBMIT(2, 1, 4, 0, 0, 0, 3), SUBMIT(3, 3, 1, 1, 0, 3, NEVER), ADVANCE(5),
      ADVANCE(10));
}

/*
 * One of the specification's exceptions to the promise: on a device pool, an
 * ordinary grant of a device no waiter reserves delays the head past its
 * sticky S although every holder keeps its limit. d0 has three devices: s0
 * holds 0.8 of device 0 until 1010, s1 0.3 of device 1 and s2 0.8 of
 * device 2 for ever. The head s3 asks a whole device: S = 1010, when device
 * 0 comes free; but it reserves device 1, the one with the most free
 * capacity now. s4 (b1 for 100 ms) waits behind s6 and S is computed. s5
 * asks 0.2 of d0 without a limit: devices 0 and 2 are not reserved, best
 * fit puts it on device 0, where it stays: at 1010 device 0 is not free,
 * and the head is granted only when s5 lets go, at 1015. The library
 * counts it in cq_pool_stats.late_heads, and the model counts it apart.
 */
static void
test_device_grant_outside_the_reservation_delays_head_past_shadow_time(
    void **state) {
  (void)state;
  static const char *const want[] = {
      "submit s3 { d0:1dev } deadline=never -> OK\n",
      "submit s4 { b1:1 limit=100 } deadline=never -> OK\n",
      "submit s5 { d0:200m } deadline=never -> OK; cb s5 OK\n",
      "release s0 at its limit end 1010 -> OK -> OK\n",
      "release s5 -> OK; cb s3 OK\n",
      "backfilled 0, late heads 1 (late after a device grant 1)\n",
      NULL};
  RUN(BACKFILL, want, ADD_DEVICES(3), ADD_BUDGET(1),
      SUBMIT(0, 1, 80, 0, 0, 10, NEVER), SUBMIT(1, 1, 30, 0, 0, 0, NEVER),
      SUBMIT(2, 1, 80, 0, 0, 0, NEVER), SUBMIT(6, 2, 1, 0, 0, 0, NEVER),
      SUBMIT(3, 1, WHOLE(1), 0, 0, 0, NEVER), SUBMIT(4, 2, 1, 0, 0, 100, NEVER),
      SUBMIT(5, 1, 20, 0, 0, 0, NEVER), ADVANCE(15), RELEASE(5), CANCEL(4),
      RELEASE(6), RELEASE(1), RELEASE(2), RELEASE(3));
}

/*
 * Where a second waiter reserves, the same grant goes elsewhere and the
 * head is on time: as above, but s4 asks 0.9 of d0. It reserves the next
 * most free device, device 0 (0.2 free, as device 2, but the lower index),
 * so s5 goes to device 2, and at 1010 the head gets device 0.
 */
static void test_every_device_waiter_reserves_so_the_head_is_on_time(void **s) {
  (void)s;
  static const char *const want[] = {
      "submit s3 { d0:1dev } deadline=never -> OK\n",
      "submit s4 { d0:900m limit=100 } deadline=never -> OK\n",
      "submit s5 { d0:200m } deadline=never -> OK; cb s5 OK\n",
      "release s0 at its limit end 1010 -> OK -> OK; cb s3 OK\n",
      "backfilled 0, late heads 0 (late after a device grant 0)\n",
      NULL};
  RUN(BACKFILL, want, ADD_DEVICES(3), SUBMIT(0, 1, 80, 0, 0, 10, NEVER),
      SUBMIT(1, 1, 30, 0, 0, 0, NEVER), SUBMIT(2, 1, 80, 0, 0, 0, NEVER),
      SUBMIT(3, 1, WHOLE(1), 0, 0, 0, NEVER),
      SUBMIT(4, 1, 90, 0, 0, 100, NEVER), SUBMIT(5, 1, 20, 0, 0, 0, NEVER),
      ADVANCE(15), RELEASE(5), CANCEL(4), RELEASE(1), RELEASE(2), RELEASE(3));
}

/* The shrinker works: with a sabotaged comparison (a budget at 3 units in
 * use counts as a mismatch), a random program of 500 operations fails, and
 * shrinking leaves a program of two operations (add the budget, take 3 or
 * more) that still fails, the same way. */
static void test_shrinker_finds_the_shortest_program(void **state) {
  (void)state;
  static mo_op ops[OPS_PER_SEED];
  mo_sabotage_in_use = 3;
  uint8_t flags = 0;
  size_t n = 0;
  mo_result res;
  for (uint64_t seed = 1; seed < 100; seed++) {
    mo_generate(seed, &flags, ops, OPS_PER_SEED);
    if (mo_run(flags, ops, OPS_PER_SEED, NULL, &res) != 0) {
      n = OPS_PER_SEED;
      break;
    }
  }
  assert_true(n > 0);
  assert_int_equal(res.kind, MO_FAIL_SABOTAGE_IN_USE);
  assert_true(res.failed_at > 2); /* there is something to shrink */
  size_t m = mo_shrink(&flags, ops, n);
  int rc = mo_run(flags, ops, m, NULL, &res);
  mo_sabotage_in_use = 0;
  assert_int_equal(rc, 1);
  assert_int_equal(res.kind, MO_FAIL_SABOTAGE_IN_USE);
  assert_true(m <= 2);
  assert_int_equal(flags, 0);
  /* Without the sabotage the same program passes. */
  assert_int_equal(mo_run(flags, ops, m, NULL, &res), 0);
}

/*
 * The shrinker keeps the failure it was given, and does not drift to
 * another. Two sabotaged comparisons: a budget with a waiter fails one way,
 * a budget at 3 units in use another. b0 = 8: s0 holds 1, s1 asks 8 and
 * waits: the first way. Dropping s0's operation, or halving s1's 8 to 4,
 * gives a program that fails the second way (s1 granted, 3 units or more
 * in use), the shorter one when dropping; a shrinker that took any failure
 * would end there. Nothing shorter or simpler fails the first way.
 */
static void test_shrinker_keeps_the_way_the_program_failed(void **state) {
  (void)state;
  mo_op ops[] = {ADD_BUDGET(8), SUBMIT(0, 1, 1, 0, 0, 0, NEVER),
                 SUBMIT(1, 1, 8, 0, 0, 0, NEVER)};
  mo_op shortcut[] = {ADD_BUDGET(8), SUBMIT(1, 1, 8, 0, 0, 0, NEVER)};
  mo_sabotage_in_use = 3;
  mo_sabotage_waiting = 1;
  mo_result res, other;
  int rc = mo_run(0, ops, 3, NULL, &res);
  int rc_short = mo_run(0, shortcut, 2, NULL, &other);
  uint8_t flags = 0;
  size_t m = mo_shrink(&flags, ops, 3);
  mo_result after;
  int rc_after = mo_run(flags, ops, m, NULL, &after);
  mo_sabotage_in_use = 0;
  mo_sabotage_waiting = 0;
  assert_int_equal(rc, 1);
  assert_int_equal(res.kind, MO_FAIL_SABOTAGE_WAITING);
  /* The drift is there to take. */
  assert_int_equal(rc_short, 1);
  assert_int_equal(other.kind, MO_FAIL_SABOTAGE_IN_USE);
  assert_false(mo_same_failure(&res, &other));
  /* ... and the shrinker did not take it. */
  assert_int_equal(rc_after, 1);
  assert_int_equal(after.kind, MO_FAIL_SABOTAGE_WAITING);
  assert_true(mo_same_failure(&res, &after));
  assert_int_equal(m, 3);
  assert_int_equal(ops[2].b[3], 8);
}

/* Return-code mismatches are the same failure only for the same call with
 * the same two codes. */
static void test_failures_of_other_calls_or_codes_differ(void **state) {
  (void)state;
  mo_result a = {0}, b = {0};
  a.kind = b.kind = MO_FAIL_RC;
  a.call = "release";
  b.call = "release";
  a.lib_rc = b.lib_rc = CQ_ESTATE;
  a.model_rc = b.model_rc = 0;
  assert_true(mo_same_failure(&a, &b));
  b.call = "cancel";
  assert_false(mo_same_failure(&a, &b));
  b.call = "release";
  b.lib_rc = CQ_EBUSY;
  assert_false(mo_same_failure(&a, &b));
  b.lib_rc = CQ_ESTATE;
  b.kind = MO_FAIL_CALLBACKS;
  assert_false(mo_same_failure(&a, &b));
  assert_string_equal(mo_fail_name(MO_FAIL_CALLBACKS), "callbacks");
  for (int k = 0; k < MO_FAIL_NKINDS; k++)
    assert_string_not_equal(mo_fail_name(k), "unknown");
}

/* Raw bytes, as the fuzzer feeds them, decode to valid programs. */
static void test_any_bytes_are_a_program(void **state) {
  (void)state;
  uint8_t data[1 + 64 * MO_OP_BYTES];
  uint64_t x = 42;
  for (int round = 0; round < 200; round++) {
    for (size_t i = 0; i < sizeof(data); i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      data[i] = (uint8_t)(x >> 56);
    }
    char why[256];
    size_t len = (size_t)(round % 40) * 13;
    if (model_run_bytes(data, len, why, sizeof(why)) != 0)
      fail_msg("bytes round %d: %s", round, why);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_budget_fifo_with_reservation),
      cmocka_unit_test(test_requests_for_other_resources_keep_flowing),
      cmocka_unit_test(test_staged_claims_claim_one_resource_at_a_time),
      cmocka_unit_test(test_device_fractions_reservation_and_placement),
      cmocka_unit_test(test_whole_devices_and_offline_devices),
      cmocka_unit_test(test_classes_cap_workers),
      cmocka_unit_test(test_shrinking_fails_waiters_that_can_never_fit),
      cmocka_unit_test(test_lone_request_runs_alone),
      cmocka_unit_test(test_deadlines_cancel_and_removal),
      cmocka_unit_test(test_waiters_expiring_together_all_time_out),
      cmocka_unit_test(test_backfill_worked_example),
      cmocka_unit_test(test_backfill_on_devices),
      cmocka_unit_test(test_backfill_head_late_after_a_shrink_is_counted),
      cmocka_unit_test(
          test_release_of_a_resource_nobody_waits_on_lets_backfill_run),
      cmocka_unit_test(
          test_lock_free_kind_release_in_backfill_pool_lets_backfill_run),
      cmocka_unit_test(
          test_claimant_leaving_a_resource_nobody_waits_on_lets_backfill_run),
      cmocka_unit_test(test_advance_keeps_limits_and_deadlines_in_time_order),
      cmocka_unit_test(
          test_device_grant_outside_the_reservation_delays_head_past_shadow_time),
      cmocka_unit_test(
          test_every_device_waiter_reserves_so_the_head_is_on_time),
      cmocka_unit_test(test_shrinker_finds_the_shortest_program),
      cmocka_unit_test(test_shrinker_keeps_the_way_the_program_failed),
      cmocka_unit_test(test_failures_of_other_calls_or_codes_differ),
      cmocka_unit_test(test_any_bytes_are_a_program),
      cmocka_unit_test(test_random_programs_agree_with_the_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
