//! The Rust declarations match the C header: struct sizes, alignments and
//! field offsets as the C compiler lays them out (table built by build.rs
//! from layout.c), and the storage sizes the linked library reports.
use cronoq_sys::*;
use std::collections::BTreeMap;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr::addr_of;

include!(concat!(env!("OUT_DIR"), "/layout.rs"));

macro_rules! size {
    ($v:ident, $t:ident) => {
        $v.push((concat!("sizeof ", stringify!($t)).to_string(), size_of::<$t>()));
        $v.push((concat!("alignof ", stringify!($t)).to_string(), align_of::<$t>()));
    };
}

macro_rules! field {
    ($v:ident, $t:ident, $($f:tt)+) => {{
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        // Only the address is taken: nothing uninitialised is read.
        let at = unsafe { addr_of!((*base).$($f)+) } as *const u8 as usize;
        let name = format!("{}.{}", stringify!($t), stringify!($($f)+).replace(' ', ""));
        $v.push((name, at - base as usize));
    }};
}

fn rust_layout() -> Vec<(String, usize)> {
    let mut v = Vec::new();
    size!(v, cq_allocator);
    field!(v, cq_allocator, realloc);
    field!(v, cq_allocator, free);
    field!(v, cq_allocator, arg);
    size!(v, cq_event);
    field!(v, cq_event, attempt);
    field!(v, cq_event, data);
    field!(v, cq_event, resource);
    field!(v, cq_event, time_ms);
    field!(v, cq_event, wait_ms);
    field!(v, cq_event, reserved_);
    size!(v, cq_pool_config);
    field!(v, cq_pool_config, alloc);
    field!(v, cq_pool_config, clock);
    field!(v, cq_pool_config, clock_arg);
    field!(v, cq_pool_config, data);
    field!(v, cq_pool_config, on_event);
    field!(v, cq_pool_config, event_arg);
    field!(v, cq_pool_config, event_buffer);
    field!(v, cq_pool_config, barge_ms);
    field!(v, cq_pool_config, reserved_);
    size!(v, cq_pool_stats);
    field!(v, cq_pool_stats, late_heads);
    field!(v, cq_pool_stats, converted);
    field!(v, cq_pool_stats, reserved_);
    size!(v, cq_wait_stats);
    field!(v, cq_wait_stats, sum_ms);
    size!(v, cq_resource_stats);
    field!(v, cq_resource_stats, kind);
    field!(v, cq_resource_stats, flags);
    field!(v, cq_resource_stats, capacity);
    field!(v, cq_resource_stats, in_use);
    field!(v, cq_resource_stats, withheld);
    field!(v, cq_resource_stats, peak);
    field!(v, cq_resource_stats, waiting);
    field!(v, cq_resource_stats, grants);
    field!(v, cq_resource_stats, timeouts);
    field!(v, cq_resource_stats, cancellations);
    field!(v, cq_resource_stats, wait);
    field!(v, cq_resource_stats, devices);
    field!(v, cq_resource_stats, online);
    field!(v, cq_resource_stats, reserved_);
    size!(v, cq_device_stats);
    field!(v, cq_device_stats, index);
    field!(v, cq_device_stats, online);
    field!(v, cq_device_stats, whole);
    field!(v, cq_device_stats, reserved);
    field!(v, cq_device_stats, used_milli);
    field!(v, cq_device_stats, peak_milli);
    field!(v, cq_device_stats, grants);
    field!(v, cq_device_stats, reserved_);
    size!(v, cq_detect_opts);
    field!(v, cq_detect_opts, timeout_ms);
    field!(v, cq_detect_opts, alloc);
    field!(v, cq_detect_opts, reserved_);
    size!(v, cq_gpu_list);
    field!(v, cq_gpu_list, ids);
    field!(v, cq_gpu_list, source);
    field!(v, cq_gpu_list, error);
    field!(v, cq_gpu_list, alloc_);
    field!(v, cq_gpu_list, cap_);
    size!(v, cq_req);
    field!(v, cq_req, cq_private);
    size!(v, cq_grant);
    field!(v, cq_grant, cq_private);
    size!(v, cq_task);
    field!(v, cq_task, req);
    size!(v, cq_room);
    field!(v, cq_room, count);
    field!(v, cq_room, items);
    v.push(("sizeof cq_room_item".to_string(), size_of::<cq_room_item>()));
    field!(v, cq_room, items[0].units);
    field!(v, cq_room, items[0].largest_milli);
    field!(v, cq_room, items[0].whole);
    size!(v, cq_fleet_opts);
    field!(v, cq_fleet_opts, clock);
    field!(v, cq_fleet_opts, event_buffer);
    field!(v, cq_fleet_opts, fleet_flags);
    field!(v, cq_fleet_opts, host);
    field!(v, cq_fleet_opts, ttl_ms);
    field!(v, cq_fleet_opts, timeout_ms);
    field!(v, cq_fleet_opts, script_steps);
    field!(v, cq_fleet_opts, username);
    field!(v, cq_fleet_opts, password);
    field!(v, cq_fleet_opts, max_ttl_ms);
    field!(v, cq_fleet_opts, reserved_);
    size!(v, cq_fleet_stats);
    field!(v, cq_fleet_stats, max_fence);
    field!(v, cq_fleet_stats, quarantine_ms);
    field!(v, cq_fleet_stats, lost_deadline_ms);
    field!(v, cq_fleet_stats, settings_unchecked);
    field!(v, cq_fleet_stats, reserved_);
    v
}

#[test]
fn struct_layouts_match_the_c_compiler() {
    if C_LAYOUT.is_empty() {
        eprintln!("skipped: the build found no cronoq.h to compile layout.c against");
        return;
    }
    let c: BTreeMap<&str, usize> = C_LAYOUT.iter().copied().collect();
    let rust = rust_layout();
    let mut wrong = Vec::new();
    for (name, value) in &rust {
        match c.get(name.as_str()) {
            Some(cv) if cv == value => {}
            Some(cv) => wrong.push(format!("{}: C {} but Rust {}", name, cv, value)),
            None => wrong.push(format!("{}: not in layout.c's table", name)),
        }
    }
    assert_eq!(rust.len(), c.len(), "layout.c and this test list different entries");
    assert!(wrong.is_empty(), "layout differs:\n{}", wrong.join("\n"));
}

#[test]
fn storage_sizes_match_the_linked_library() {
    // The library reports what it was built with; a mismatch would make the
    // binding's storage too small.
    assert_eq!(unsafe { cq_req_size() }, size_of::<cq_req>());
    assert_eq!(unsafe { cq_grant_size() }, size_of::<cq_grant>());
    assert_eq!(size_of::<cq_req>(), 1024);
    assert_eq!(size_of::<cq_grant>(), 2048);
    assert_eq!(align_of::<cq_req>(), 8);
    assert_eq!(align_of::<cq_grant>(), 8);
}

#[test]
fn linked_library_has_the_declared_version() {
    assert_eq!(unsafe { cq_version_number() }, CQ_VERSION_NUMBER);
}

#[test]
fn every_declared_error_code_has_a_name() {
    for code in CQ_ERRNO_MIN..0 {
        let name = unsafe { std::ffi::CStr::from_ptr(cq_err_name(code)) };
        assert_ne!(name.to_str().unwrap(), "UNKNOWN", "code {}", code);
    }
    let below = unsafe { std::ffi::CStr::from_ptr(cq_err_name(CQ_ERRNO_MIN - 1)) };
    assert_eq!(below.to_str().unwrap(), "UNKNOWN");
}

#[test]
fn every_declared_event_type_has_a_name() {
    let name = |t: cq_event_type| {
        unsafe { std::ffi::CStr::from_ptr(cq_event_type_name(t)) }.to_str().unwrap().to_string()
    };
    for t in CQ_EVENT_GRANTED..=CQ_EVENT_MAX {
        assert_ne!(name(t), "unknown", "event type {}", t);
    }
    assert_eq!(name(CQ_EVENT_LOST), "lost");
    assert_eq!(name(CQ_EVENT_WARNING), "warning");
    assert_eq!(name(CQ_EVENT_MAX + 1), "unknown");
}
