/*
 * The helpers every cmocka suite shares (cqt.h): request building, pool
 * figures, waits with a hang guard, the callback recorder, the threaded
 * acquirer and the one-pool fixture.
 */
#include "cqt.h"

void cqt_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

cq_resource_stats cqt_budget(cq_pool *p, const char *name) {
  cq_resource_stats st;
  memset(&st, 0, sizeof(st));
  assert_cq_ok(cq_resource_stats_get(p, name, &st));
  return st;
}

uint64_t cqt_waiting(cq_pool *p) {
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(p, &st));
  return st.waiting;
}

void cqt_wait_for_waiters(cq_pool *p, uint64_t n) {
  int64_t give_up = cq_now() + CQT_PATIENCE_MS;
  while (cqt_waiting(p) != n) {
    if (cq_now() > give_up)
      fail_msg("expected %llu waiters, have %llu", (unsigned long long)n,
               (unsigned long long)cqt_waiting(p));
    cqt_sleep_ms(1);
  }
}

void cqt_req(cq_req *req, cq_pool *p, const char *spec) {
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

void cqt_rec_init(cqt_rec *r) {
  memset(r, 0, sizeof(*r));
  pthread_mutex_init(&r->lock, NULL);
}

void cqt_slot_init(cqt_slot *s, cqt_rec *r, const char *name) {
  memset(s, 0, sizeof(*s));
  cq_grant_init(&s->grant);
  s->grant.data = s;
  s->name = name;
  s->rec = r;
  s->status = 1; /* not called yet */
}

void cqt_record_cb(cq_grant *g, int status) {
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

const char *cqt_rec_str(cqt_rec *r) {
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

static void *cqt_acquirer_main(void *arg) {
  cqt_acquirer *a = (cqt_acquirer *)arg;
  a->rc = cq_grant_acquire(a->pool, &a->grant, a->req, a->deadline);
  a->returned_at = cq_now();
  atomic_store_explicit(&a->done, 1, memory_order_release);
  return NULL;
}

void cqt_acquire_start(cqt_acquirer *a, cq_pool *p, const cq_req *r,
                       int64_t deadline) {
  a->pool = p;
  a->req = r;
  a->deadline = deadline;
  a->rc = 1;
  atomic_init(&a->done, 0);
  cq_grant_init(&a->grant);
  assert_int_equal(pthread_create(&a->thread, NULL, cqt_acquirer_main, a), 0);
}

bool cqt_acquire_returned(cqt_acquirer *a) {
  return atomic_load_explicit(&a->done, memory_order_acquire) != 0;
}

int cqt_acquire_join(cqt_acquirer *a) {
  assert_int_equal(pthread_join(a->thread, NULL), 0);
  return a->rc;
}

int cqt_fixture_setup(cq_pool **pool, cqt_rec *rec, unsigned flags) {
  cqt_rec_init(rec);
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = flags;
  return cq_pool_create(pool, &cfg);
}

int cqt_fixture_teardown(cq_pool *pool) {
  cq_pool_stats st;
  assert_cq_ok(cq_pool_stats_get(pool, &st));
  assert_int_equal(st.waiting, 0);
  assert_cq_ok(cq_pool_destroy(pool)); /* refused if anything were held */
  return 0;
}
