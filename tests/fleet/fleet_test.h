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
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static struct cqr_server fleet_server;
static int fleet_ns_counter;
static char fleet_ns[64];

/* Start the server (once per process). */
static inline void fleet_server_up(void) {
  if (fleet_server.pid == 0)
    cqr_start(&fleet_server, NULL);
}

/* The namespaces' longest TTL (cq_fleet_opts.max_ttl_ms) in these tests:
 * that of a quiet pool, the longest they use. */
#define FLEET_TEST_MAX_TTL_MS 60000

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
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  if (opts != NULL)
    o = *opts;
  if (o.host == NULL)
    o.host = host;
  /* One longest TTL for the pools that share a namespace in these tests,
   * whatever their own (see fleet_open_quiet()). */
  if (o.max_ttl_ms == 0)
    o.max_ttl_ms = FLEET_TEST_MAX_TTL_MS;
  cq_pool *p = NULL;
  int rc = cq_fleet_open(&p, fleet_server.url, ns, &o);
  if (rc != 0)
    fail_msg("cq_fleet_open(%s): %s: %s", ns, cq_err_name(rc),
             cq_fleet_error());
  return p;
}

uint64_t cq__fleet_beats(cq_pool *pool); /* test hook: heartbeats done */

/* A pool on `ns` as `host` with `fleet_flags` whose background thread
 * stays quiet for the test's next seconds: its heartbeats are rare, and
 * the first is over when this returns. */
static inline cq_pool *fleet_open_quiet(const char *ns, const char *host,
                                        unsigned fleet_flags) {
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = fleet_flags | CQ_FLEET_NEW_NAMESPACE;
  o.ttl_ms = 60000;
  o.max_ttl_ms = FLEET_TEST_MAX_TTL_MS;
  o.heartbeat_ms = 20000;
  cq_pool *p = fleet_open_as(ns, host, &o);
  for (int i = 0; i < 2000 && cq__fleet_beats(p) == 0; i++)
    cqt_sleep_ms(5);
  assert_true(cq__fleet_beats(p) > 0);
  return p;
}

/* A cq_write_fn that appends to `arg`, a NUL-terminated text of
 * FLEET_TEXT_MAX bytes (the metrics of a test's pool); it stops the writer
 * when the text is full. */
#define FLEET_TEXT_MAX 65536
static inline int fleet_collect(const char *text, size_t len, void *arg) {
  char *buf = arg;
  size_t at = strlen(buf);
  if (at + len >= FLEET_TEXT_MAX)
    return 1;
  memcpy(buf + at, text, len);
  buf[at + len] = '\0';
  return 0;
}

#endif
