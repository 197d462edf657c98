/*
 * Helpers shared by the fleet tests: one Redis server per test process,
 * a fresh namespace per test, and pools opened on it.
 */
#ifndef CRONOQ_TEST_FLEET_TEST_H
#define CRONOQ_TEST_FLEET_TEST_H

#include "cronoq/cronoq.h"
#include "cronoq/cronoq_fleet.h"
#include "redis_harness.h"
#include "support/cqt.h"

#include <stdbool.h>
#include <stdio.h>

static struct cqr_server fleet_server;
static int fleet_ns_counter;
static char fleet_ns[64];

/* Start the server (once per process). */
static inline void fleet_server_up(void) {
  if (fleet_server.pid == 0)
    cqr_start(&fleet_server, NULL);
}

/* A namespace no earlier test of this process used. */
static inline const char *fleet_new_ns(void) {
  snprintf(fleet_ns, sizeof(fleet_ns), "t%d", ++fleet_ns_counter);
  return fleet_ns;
}

/* Open a pool on namespace `ns` as host `host`, with `opts` (may be NULL:
 * defaults, host set). */
static inline cq_pool *fleet_open_as(const char *ns, const char *host,
                                     const cq_fleet_opts *opts) {
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  if (opts != NULL)
    o = *opts;
  if (o.host == NULL)
    o.host = host;
  cq_pool *p = NULL;
  int rc = cq_fleet_open(&p, fleet_server.url, ns, &o);
  if (rc != 0)
    fail_msg("cq_fleet_open(%s): %s: %s", ns, cq_err_name(rc),
             cq_fleet_error());
  return p;
}

#endif
