/*
 * The Python binding's probe: what the C compiler knows and ctypes cannot
 * ask, and the C figure that bench.py sets the binding's against.
 *
 *   cronoq-py-probe layout         sizes and offsets of the structs that
 *                                  bindings/python/cronoq/_lib.py mirrors,
 *                                  one "name value" line each
 *   cronoq-py-probe bench OPS REPS ns per uncontended try + release of a
 *                                  one-budget request, the best of REPS runs
 *                                  of OPS operations
 *
 * It links the shared library, the one the binding loads, so that both
 * figures go through the same code.
 *
 * Copyright (c) 2026 the libcronoq authors. MIT licence, see LICENSE.
 */
#include <cronoq/cronoq.h>
#include <cronoq/cronoq_fleet.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIZE(type) printf("%s %zu\n", #type, sizeof(type))
#define OFFSET(type, field)                                                    \
  printf("%s.%s %zu\n", #type, #field, offsetof(type, field))

static void layout(void) {
  SIZE(cq_pool_config);
  OFFSET(cq_pool_config, flags);
  OFFSET(cq_pool_config, alloc);
  OFFSET(cq_pool_config, event_buffer);
  OFFSET(cq_pool_config, reserved_);
  SIZE(cq_pool_stats);
  OFFSET(cq_pool_stats, late_heads);
  SIZE(cq_wait_stats);
  SIZE(cq_resource_stats);
  OFFSET(cq_resource_stats, kind);
  OFFSET(cq_resource_stats, capacity);
  OFFSET(cq_resource_stats, cancellations);
  OFFSET(cq_resource_stats, wait);
  OFFSET(cq_resource_stats, devices);
  OFFSET(cq_resource_stats, online);
  OFFSET(cq_resource_stats, reserved_);
  SIZE(cq_device_stats);
  OFFSET(cq_device_stats, index);
  OFFSET(cq_device_stats, used_milli);
  OFFSET(cq_device_stats, grants);
  SIZE(cq_detect_opts);
  OFFSET(cq_detect_opts, timeout_ms);
  SIZE(cq_gpu_list);
  OFFSET(cq_gpu_list, source);
  OFFSET(cq_gpu_list, error);
  OFFSET(cq_gpu_list, alloc_);
  OFFSET(cq_gpu_list, cap_);
  SIZE(cq_task);
  SIZE(cq_allocator);
  SIZE(cq_fleet_opts);
  OFFSET(cq_fleet_opts, event_buffer);
  OFFSET(cq_fleet_opts, fleet_flags);
  OFFSET(cq_fleet_opts, host);
  OFFSET(cq_fleet_opts, ttl_ms);
  OFFSET(cq_fleet_opts, script_steps);
  OFFSET(cq_fleet_opts, username);
  OFFSET(cq_fleet_opts, max_ttl_ms);
  OFFSET(cq_fleet_opts, reserved_);
  SIZE(cq_fleet_stats);
  OFFSET(cq_fleet_stats, max_fence);
  OFFSET(cq_fleet_stats, quarantine_ms);
  OFFSET(cq_fleet_stats, lost_deadline_ms);
  OFFSET(cq_fleet_stats, settings_unchecked);
  OFFSET(cq_fleet_stats, reserved_);
  SIZE(cq_event);
  OFFSET(cq_event, attempt);
  OFFSET(cq_event, data);
  OFFSET(cq_event, resource);
  OFFSET(cq_event, wait_ms);
  OFFSET(cq_event, reserved_);
  SIZE(cq_req);
  SIZE(cq_grant);
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int bench(long ops, int reps) {
  cq_pool *pool;
  cq_req req;
  cq_grant grant;
  if (cq_pool_create(&pool, NULL) != 0 || cq_budget_add(pool, "b0", 1 << 20) ||
      cq_req_init(&req, pool) != 0 || cq_req_add(&req, "b0", 1) != 0) {
    fprintf(stderr, "probe: setup failed\n");
    return 1;
  }
  cq_grant_init(&grant);
  double best = -1;
  for (int r = 0; r < reps; r++) {
    double t0 = now_ns();
    for (long i = 0; i < ops; i++) {
      if (cq_grant_try(pool, &grant, &req) != 0 ||
          cq_grant_release(pool, &grant) != 0) {
        fprintf(stderr, "probe: try + release failed\n");
        return 1;
      }
    }
    double ns = (now_ns() - t0) / (double)ops;
    if (best < 0 || ns < best)
      best = ns;
  }
  cq_resource_stats st;
  if (cq_resource_stats_get(pool, "b0", &st) != 0 || st.in_use != 0 ||
      st.grants != (uint64_t)ops * (uint64_t)reps) {
    fprintf(stderr, "probe: units or grants do not add up\n");
    return 1;
  }
  printf("c_try_release_ns %.1f\n", best);
  return cq_pool_destroy(pool) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "layout") == 0) {
    layout();
    return 0;
  }
  if (argc == 4 && strcmp(argv[1], "bench") == 0) {
    long ops = atol(argv[2]);
    int reps = atoi(argv[3]);
    if (ops > 0 && reps > 0)
      return bench(ops, reps);
  }
  fprintf(stderr, "usage: cronoq-py-probe layout | bench OPS REPS\n");
  return 2;
}
