/*
 * Test helpers shared by the cmocka suites: assertions that print error
 * names, a recorder for callback outcomes, and small waiting helpers for
 * tests that use threads (generous limits, never tight timing).
 */
#ifndef CRONOQ_TEST_H
#define CRONOQ_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
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

static inline void cqt_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A budget's figures. */
static inline cq_resource_stats cqt_budget(cq_pool *p, const char *name) {
  cq_resource_stats st;
  memset(&st, 0, sizeof(st));
  assert_cq_ok(cq_resource_stats_get(p, name, &st));
  return st;
}

static inline uint64_t cqt_waiting(cq_pool *p) {
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(p, &st));
  return st.waiting;
}

/* Wait (generously) until `n` requests wait in the pool. */
static inline void cqt_wait_for_waiters(cq_pool *p, uint64_t n) {
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (cqt_waiting(p) != n) {
    if (cq_now() > give_up)
      fail_msg("expected %llu waiters, have %llu", (unsigned long long)n,
               (unsigned long long)cqt_waiting(p));
    cqt_sleep_ms(1);
  }
}

/* Build a request from "name:amount name:amount ..." ("" is empty). */
static inline void cqt_req(cq_req *req, cq_pool *p, const char *spec) {
  char buf[512];
  assert_cq_ok(cq_req_init(req, p));
  snprintf(buf, sizeof(buf), "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok != NULL;
       tok = strtok_r(NULL, " ", &save)) {
    char *colon = strrchr(tok, ':');
    if (colon == NULL)
      fail_msg("bad test request item '%s'", tok);
    *colon = '\0';
    long long amount = strtoll(colon + 1, NULL, 10);
    int rc = cq_req_add(req, tok, (int64_t)amount);
    if (rc != 0)
      fail_msg("cq_req_add(%s, %lld): %s: %s", tok, amount, cq_err_name(rc),
               cq_req_error(req));
  }
}

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

static inline void cqt_rec_init(cqt_rec *r) {
  memset(r, 0, sizeof(*r));
  pthread_mutex_init(&r->lock, NULL);
}

static inline void cqt_slot_init(cqt_slot *s, cqt_rec *r, const char *name) {
  memset(s, 0, sizeof(*s));
  cq_grant_init(&s->grant);
  s->grant.data = s;
  s->name = name;
  s->rec = r;
  s->status = 1; /* not called yet */
}

static inline void cqt_record_cb(cq_grant *g, int status) {
  cqt_slot *s = (cqt_slot *)g->data;
  pthread_mutex_lock(&s->rec->lock);
  s->calls++;
  s->status = status;
  if (s->rec->n < CQT_LOG_MAX) {
    snprintf(s->rec->log[s->rec->n], sizeof(s->rec->log[0]), "%s%s", s->name,
             status == 0 ? "" : "!");
    s->rec->n++;
  }
  pthread_mutex_unlock(&s->rec->lock);
}

/* The log as one space-separated string, e.g. "A B C!" (! = not granted). */
static inline const char *cqt_rec_str(cqt_rec *r) {
  static char buf[CQT_LOG_MAX * 17];
  pthread_mutex_lock(&r->lock);
  buf[0] = '\0';
  for (int i = 0; i < r->n; i++) {
    if (i > 0)
      strcat(buf, " ");
    strcat(buf, r->log[i]);
  }
  pthread_mutex_unlock(&r->lock);
  return buf;
}

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
  pthread_t thread;
} cqt_acquirer;

static void *cqt_acquirer_main(void *arg) {
  cqt_acquirer *a = (cqt_acquirer *)arg;
  a->rc = cq_grant_acquire(a->pool, &a->grant, a->req, a->deadline);
  a->returned_at = cq_now();
  return NULL;
}

static inline void cqt_acquire_start(cqt_acquirer *a, cq_pool *p,
                                     const cq_req *r, int64_t deadline) {
  a->pool = p;
  a->req = r;
  a->deadline = deadline;
  a->rc = 1;
  cq_grant_init(&a->grant);
  assert_int_equal(pthread_create(&a->thread, NULL, cqt_acquirer_main, a), 0);
}

/* Wait for the thread; returns what its acquire returned. */
static inline int cqt_acquire_join(cqt_acquirer *a) {
  assert_int_equal(pthread_join(a->thread, NULL), 0);
  return a->rc;
}

/*
 * The fixture of suites that use one fresh default pool per test (define
 * CQT_POOL_FIXTURE before including): a pool and a recorder, and a teardown
 * that checks nothing waits and everything was given back.
 */
#ifdef CQT_POOL_FIXTURE
static cq_pool *pool;
static cqt_rec rec;

static int setup_with_flags(unsigned flags) {
  cqt_rec_init(&rec);
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = flags;
  return cq_pool_create(&pool, &cfg);
}

static int setup(void **state) {
  (void)state;
  return setup_with_flags(0);
}

static int teardown(void **state) {
  (void)state;
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(pool, &st));
  assert_int_equal(st.waiting, 0);
  assert_cq_ok(cq_pool_destroy(pool)); /* refused if anything were held */
  return 0;
}
#endif

#endif /* CRONOQ_TEST_H */
