/*
 * An in-process suite on fleet pools. The fleet build of a suite
 * (test_policy.c, test_devices.c, ...) is compiled with this header forced
 * in first (-include): every cq_pool_create() of the suite, and the pool
 * of the support library's fixture (cqt_fixture_setup(), support/cqt.h),
 * is then a fleet pool instead, on a namespace of its own on the test
 * process's redis-server, and the suite's hand-worked scenarios run
 * unchanged against it. Every test of those suites runs on both kinds of
 * pool; one that is about the in-process pool alone (its allocator, its
 * lock-free path) belongs in a suite that is not built here.
 */
#ifndef CRONOQ_TEST_FLEET_FIXTURE_H
#define CRONOQ_TEST_FLEET_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "cronoq/cronoq.h"
#include "cronoq/cronoq_fleet.h"
#include "redis_harness.h"

static struct cqr_server fleet_fixture_server;
static int fleet_fixture_ns;

/* cq_pool_create(), on a fleet pool: a namespace of its own per pool. */
static inline int fleet_fixture_create(cq_pool **out,
                                       const cq_pool_config *cfg) {
  if (fleet_fixture_server.pid == 0)
    cqr_start(&fleet_fixture_server, NULL);
  char ns[32];
  snprintf(ns, sizeof(ns), "s%d", ++fleet_fixture_ns);
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  if (cfg != NULL) {
    o.flags = cfg->flags;
    o.clock = cfg->clock;
    o.clock_arg = cfg->clock_arg;
    o.data = cfg->data;
    o.on_event = cfg->on_event;
    o.event_arg = cfg->event_arg;
    o.event_buffer = cfg->event_buffer;
  }
  o.host = "this-host";
  int rc = cq_fleet_open(out, fleet_fixture_server.url, ns, &o);
  if (rc != 0)
    fprintf(stderr, "cq_fleet_open(%s): %s: %s\n", ns, cq_err_name(rc),
            cq_fleet_error());
  return rc;
}
#define cq_pool_create(out, cfg) fleet_fixture_create(out, cfg)

/* The fixture's setup (support/cqt.c makes an in-process pool): the same,
 * on a fleet pool. The macro renames support/cqt.h's declaration too, to a
 * declaration of this function. */
struct cqt_rec;
void cqt_rec_init(struct cqt_rec *r);
static inline int fleet_fixture_setup(cq_pool **out, struct cqt_rec *rec,
                                      unsigned flags) {
  cqt_rec_init(rec);
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = flags;
  return fleet_fixture_create(out, &cfg);
}
#define cqt_fixture_setup(out, rec, flags) fleet_fixture_setup(out, rec, flags)

#endif
