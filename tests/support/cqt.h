/*
 * The test-support library (cronoq_test_support), part one: what every
 * cmocka suite uses. Assertions that print error names, a recorder for
 * callback outcomes, a blocking acquire on a thread of its own, and small
 * waiting helpers for tests that use threads (generous limits, never tight
 * timing). The functions live in cqt.c; the assertions stay macros, so that
 * a failure names the expression and the line of the test.
 *
 * Every helper calls cmocka's fail_msg() on a broken check, so it may only
 * run on the thread that runs the test (the storms' worker threads use
 * STORM_CHECK from storm.h instead).
 */
#ifndef CRONOQ_TEST_SUPPORT_CQT_H
#define CRONOQ_TEST_SUPPORT_CQT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cronoq/cronoq.h"

#define assert_cq_ok(expr)                                                     \
  do {                                                                         \
    int cq_rc_ = (expr);                                                       \
    if (cq_rc_ != 0)                                                           \
      fail_msg("%s returned %s (%d)", #expr, cq_err_name(cq_rc_), cq_rc_);     \
  } while (0)

#define assert_cq_err(expr, code)                                              \
  do {                                                                         \
    int cq_rc_ = (expr);                                                       \
    if (cq_rc_ != (code))                                                      \
      fail_msg("%s returned %s (%d), expected %s", #expr, cq_err_name(cq_rc_), \
               cq_rc_, cq_err_name(code));                                     \
  } while (0)

/* Generous limit for anything a test waits on. */
#define CQT_PATIENCE_MS 60000

void cqt_sleep_ms(int ms);

/* A budget's figures. */
cq_resource_stats cqt_budget(cq_pool *p, const char *name);

/* How many requests wait in the pool. */
uint64_t cqt_waiting(cq_pool *p);

/* Wait (generously) until `n` requests wait in the pool. */
void cqt_wait_for_waiters(cq_pool *p, uint64_t n);

/* Build a request from "name:amount name:amount ..." ("" is empty). */
void cqt_req(cq_req *req, cq_pool *p, const char *spec);

/*
 * Records callback outcomes in order. Each grant's `data` points at a
 * cqt_slot that names it; the callback stores the status and appends the
 * name to the recorder's log.
 */
#define CQT_LOG_MAX 256

typedef struct cqt_rec {
  pthread_mutex_t lock;
  char log[CQT_LOG_MAX][16];
  int n;
} cqt_rec;

typedef struct cqt_slot {
  cq_grant grant;
  const char *name;
  cqt_rec *rec;
  int calls;
  int status;
} cqt_slot;

void cqt_rec_init(cqt_rec *r);
void cqt_slot_init(cqt_slot *s, cqt_rec *r, const char *name);

/* The callback for grants whose data is a cqt_slot; any thread. */
void cqt_record_cb(cq_grant *g, int status);

/* The log as one space-separated string, e.g. "A B C!" (! = not granted).
 * The string lives until the next call. */
const char *cqt_rec_str(cqt_rec *r);

#define assert_log(rec, expected)                                              \
  assert_string_equal(cqt_rec_str(rec), expected)

/* A blocking acquire run on a thread of its own. */
typedef struct cqt_acquirer {
  cq_pool *pool;
  const cq_req *req;
  int64_t deadline;
  cq_grant grant;
  int rc;
  int64_t returned_at;
  atomic_int done; /* set once rc and returned_at are */
  pthread_t thread;
} cqt_acquirer;

void cqt_acquire_start(cqt_acquirer *a, cq_pool *p, const cq_req *r,
                       int64_t deadline);

/* Wait for the thread; returns what its acquire returned. */
int cqt_acquire_join(cqt_acquirer *a);
/* Whether its acquire has returned (the thread may still be ending). */
bool cqt_acquire_returned(cqt_acquirer *a);

/* The fixture below, as functions: a fresh pool with `flags` and an empty
 * recorder; and the check that nothing waits, then the destroy, which is
 * refused if anything is still held. */
int cqt_fixture_setup(cq_pool **pool, cqt_rec *rec, unsigned flags);
int cqt_fixture_teardown(cq_pool *pool);

/*
 * The fixture of suites that use one fresh default pool per test (define
 * CQT_POOL_FIXTURE before including): a pool and a recorder of the suite's
 * own, and a teardown that checks nothing waits and everything was given
 * back.
 */
#ifdef CQT_POOL_FIXTURE
static cq_pool *pool;
static cqt_rec rec;

static int setup_with_flags(unsigned flags) {
  return cqt_fixture_setup(&pool, &rec, flags);
}

static int setup(void **state) {
  (void)state;
  return setup_with_flags(0);
}

static int teardown(void **state) {
  (void)state;
  return cqt_fixture_teardown(pool);
}
#endif

#endif /* CRONOQ_TEST_SUPPORT_CQT_H */
