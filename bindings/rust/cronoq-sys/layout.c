/*
 * Prints the C compiler's layout of every struct that src/lib.rs declares,
 * as a Rust table; build.rs runs it and tests/layout.rs compares the table
 * with the Rust declarations. Keep the entries in step with the test's.
 */
#include <cronoq/cronoq.h>
#include <cronoq/cronoq_fleet.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(T)                                                                \
  printf("    (\"sizeof %s\", %zu),\n    (\"alignof %s\", %zu),\n", #T,        \
         sizeof(T), #T, (size_t) _Alignof(T))
#define FIELD(T, f) printf("    (\"%s.%s\", %zu),\n", #T, #f, offsetof(T, f))

int main(void) {
  printf("pub const C_LAYOUT: &[(&str, usize)] = &[\n");
  SIZE(cq_allocator);
  FIELD(cq_allocator, realloc);
  FIELD(cq_allocator, free);
  FIELD(cq_allocator, arg);
  SIZE(cq_event);
  FIELD(cq_event, attempt);
  FIELD(cq_event, data);
  FIELD(cq_event, resource);
  FIELD(cq_event, time_ms);
  FIELD(cq_event, wait_ms);
  FIELD(cq_event, reserved_);
  SIZE(cq_pool_config);
  FIELD(cq_pool_config, alloc);
  FIELD(cq_pool_config, clock);
  FIELD(cq_pool_config, clock_arg);
  FIELD(cq_pool_config, data);
  FIELD(cq_pool_config, on_event);
  FIELD(cq_pool_config, event_arg);
  FIELD(cq_pool_config, event_buffer);
  FIELD(cq_pool_config, barge_ms);
  FIELD(cq_pool_config, reserved_);
  SIZE(cq_pool_stats);
  FIELD(cq_pool_stats, late_heads);
  FIELD(cq_pool_stats, converted);
  FIELD(cq_pool_stats, reserved_);
  SIZE(cq_wait_stats);
  FIELD(cq_wait_stats, sum_ms);
  SIZE(cq_resource_stats);
  FIELD(cq_resource_stats, kind);
  FIELD(cq_resource_stats, flags);
  FIELD(cq_resource_stats, capacity);
  FIELD(cq_resource_stats, in_use);
  FIELD(cq_resource_stats, withheld);
  FIELD(cq_resource_stats, peak);
  FIELD(cq_resource_stats, waiting);
  FIELD(cq_resource_stats, grants);
  FIELD(cq_resource_stats, timeouts);
  FIELD(cq_resource_stats, cancellations);
  FIELD(cq_resource_stats, wait);
  FIELD(cq_resource_stats, devices);
  FIELD(cq_resource_stats, online);
  FIELD(cq_resource_stats, reserved_);
  SIZE(cq_device_stats);
  FIELD(cq_device_stats, index);
  FIELD(cq_device_stats, online);
  FIELD(cq_device_stats, whole);
  FIELD(cq_device_stats, reserved);
  FIELD(cq_device_stats, used_milli);
  FIELD(cq_device_stats, peak_milli);
  FIELD(cq_device_stats, grants);
  FIELD(cq_device_stats, reserved_);
  SIZE(cq_detect_opts);
  FIELD(cq_detect_opts, timeout_ms);
  FIELD(cq_detect_opts, alloc);
  FIELD(cq_detect_opts, reserved_);
  SIZE(cq_gpu_list);
  FIELD(cq_gpu_list, ids);
  FIELD(cq_gpu_list, source);
  FIELD(cq_gpu_list, error);
  FIELD(cq_gpu_list, alloc_);
  FIELD(cq_gpu_list, cap_);
  SIZE(cq_req);
  FIELD(cq_req, cq_private);
  SIZE(cq_grant);
  FIELD(cq_grant, cq_private);
  SIZE(cq_task);
  FIELD(cq_task, req);
  SIZE(cq_room);
  FIELD(cq_room, count);
  FIELD(cq_room, items);
  /* The items are an anonymous struct in C, cq_room_item in Rust. */
  printf("    (\"sizeof cq_room_item\", %zu),\n",
         sizeof(((cq_room *)0)->items[0]));
  FIELD(cq_room, items[0].units);
  FIELD(cq_room, items[0].largest_milli);
  FIELD(cq_room, items[0].whole);
  SIZE(cq_fleet_opts);
  FIELD(cq_fleet_opts, clock);
  FIELD(cq_fleet_opts, event_buffer);
  FIELD(cq_fleet_opts, fleet_flags);
  FIELD(cq_fleet_opts, host);
  FIELD(cq_fleet_opts, ttl_ms);
  FIELD(cq_fleet_opts, timeout_ms);
  FIELD(cq_fleet_opts, script_steps);
  FIELD(cq_fleet_opts, username);
  FIELD(cq_fleet_opts, password);
  FIELD(cq_fleet_opts, max_ttl_ms);
  FIELD(cq_fleet_opts, reserved_);
  SIZE(cq_fleet_stats);
  FIELD(cq_fleet_stats, max_fence);
  FIELD(cq_fleet_stats, quarantine_ms);
  FIELD(cq_fleet_stats, lost_deadline_ms);
  FIELD(cq_fleet_stats, settings_unchecked);
  FIELD(cq_fleet_stats, reserved_);
  printf("];\n");
  return 0;
}
