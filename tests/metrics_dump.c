/*
 * Writes the Prometheus exposition of a pool in use to stdout, for
 * check_metrics.py to read with a real parser: budgets, a class, a device
 * pool, grants that waited and did not, a waiter, a timeout.
 */
#include <cronoq/cronoq.h>

#include <stdio.h>
#include <stdlib.h>

static void ok(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "%s: %s\n", what, cq_err_name(rc));
    exit(1);
  }
}

static int64_t now_ms;
static int64_t clock_fn(void *arg) {
  (void)arg;
  return now_ms;
}

static int out(const char *text, size_t len, void *arg) {
  (void)arg;
  return fwrite(text, 1, len, stdout) == len ? 0 : 1;
}

static void cb(cq_grant *g, int status) {
  (void)g;
  (void)status;
}

int main(void) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_MANUAL_TIMERS;
  cfg.clock = clock_fn;
  cq_pool *p;
  ok(cq_pool_create(&p, &cfg), "create");
  const char *ids[] = {"GPU-a", "GPU-\"b\""};
  ok(cq_devices_add(p, "gpu", 2, ids), "devices");
  ok(cq_pool_add_spec(p, "db=2,mem:lone=64,jobs:class=2", NULL, NULL, 0),
     "spec");
  cq_req a, b;
  ok(cq_req_init(&a, p), "req");
  ok(cq_req_parse(&a, "gpu=0.5,db=2,class=jobs"), "parse");
  ok(cq_req_init(&b, p), "req");
  ok(cq_req_parse(&b, "db=1,mem=8"), "parse");
  cq_grant g1, g2, g3;
  cq_grant_init(&g1);
  cq_grant_init(&g2);
  cq_grant_init(&g3);
  ok(cq_grant_try(p, &g1, &a), "try");
  ok(cq_grant_submit(p, &g2, &b, CQ_NEVER, cb), "submit"); /* waits */
  ok(cq_grant_submit(p, &g3, &b, 100, cb), "submit");      /* times out */
  now_ms = 150;
  ok(cq_pool_expire(p, NULL), "expire");
  now_ms = 3000;
  ok(cq_grant_release(p, &g1), "release"); /* g2 waited 3 s */
  ok(cq_pool_write_metrics(p, out, NULL), "metrics");
  ok(cq_grant_release(p, &g2), "release");
  ok(cq_pool_destroy(p), "destroy");
  return 0;
}
