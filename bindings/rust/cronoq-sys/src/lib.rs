//! Raw declarations of libcronoq's C API, written by hand from
//! `include/cronoq/cronoq.h`, which stays the reference: every function's
//! ownership, thread-safety, blocking and error rules are stated there and
//! hold here unchanged. Use the `cronoq` crate for safe types.
//!
//! The declarations follow the header in its order. The layout of every
//! struct is checked against the C compiler's in `tests/layout.rs` (the build
//! script compiles `layout.c` against the header), and the sizes of the
//! caller-owned `cq_req` and `cq_grant` by constant assertions below and, at
//! run time, against `cq_req_size()` / `cq_grant_size()`.
//!
//! The build script links the library named by `CRONOQ_LIB_DIR` (the CMake
//! build sets it for its test), else the installed one found by
//! `pkg-config`, else the repository's `build/` directory.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
use std::mem::{align_of, size_of};

pub use std::os::raw::{c_char, c_int, c_uint, c_void};

// -------------------------------------------------------------------------
// Version

pub const CQ_VERSION_MAJOR: c_int = 0;
pub const CQ_VERSION_MINOR: c_int = 1;
pub const CQ_VERSION_PATCH: c_int = 0;
pub const CQ_VERSION_NUMBER: c_int =
    CQ_VERSION_MAJOR * 1_000_000 + CQ_VERSION_MINOR * 1000 + CQ_VERSION_PATCH;

// -------------------------------------------------------------------------
// Errors (CQ_ERRNO_MAP)

pub const CQ_EINVAL: c_int = -1;
pub const CQ_ENOMEM: c_int = -2;
pub const CQ_EBUSY: c_int = -3;
pub const CQ_ETIMEDOUT: c_int = -4;
pub const CQ_ECANCELED: c_int = -5;
pub const CQ_ECLOSED: c_int = -6;
pub const CQ_ENEVER: c_int = -7;
pub const CQ_ENOENT: c_int = -8;
pub const CQ_EEXIST: c_int = -9;
pub const CQ_EINUSE: c_int = -10;
pub const CQ_ESTATE: c_int = -11;
pub const CQ_EPOOL: c_int = -12;
pub const CQ_ERANGE: c_int = -13;
pub const CQ_ETOOMANY: c_int = -14;
pub const CQ_ESYS: c_int = -15;
pub const CQ_EPARSE: c_int = -16;
pub const CQ_EUNAVAILABLE: c_int = -17;
pub const CQ_EACCES: c_int = -18;
/// The lowest code the header defines.
pub const CQ_ERRNO_MIN: c_int = -18;

// -------------------------------------------------------------------------
// Time

pub const CQ_NEVER: i64 = i64::MAX;

// -------------------------------------------------------------------------
// Pool

/// Opaque: only ever behind a pointer.
#[repr(C)]
pub struct cq_pool {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_allocator {
    pub alloc: Option<unsafe extern "C" fn(size: usize, arg: *mut c_void) -> *mut c_void>,
    pub realloc: Option<
        unsafe extern "C" fn(ptr: *mut c_void, size: usize, arg: *mut c_void) -> *mut c_void,
    >,
    pub free: Option<unsafe extern "C" fn(ptr: *mut c_void, arg: *mut c_void)>,
    pub arg: *mut c_void,
}

pub type cq_clock_fn = Option<unsafe extern "C" fn(arg: *mut c_void) -> i64>;

pub const CQ_POOL_STAGED_CLAIMS: c_uint = 1 << 0;
pub const CQ_POOL_MANUAL_TIMERS: c_uint = 1 << 1;
pub const CQ_POOL_BACKFILL: c_uint = 1 << 2;
pub const CQ_POOL_STRICT_ORDER: c_uint = 1 << 3;
pub const CQ_BARGE_DEFAULT_MS: i64 = 10;
pub const CQ_BARGE_MAX_MS: i64 = 3_600_000;

pub type cq_event_type = c_int;
pub const CQ_EVENT_GRANTED: cq_event_type = 1;
pub const CQ_EVENT_PARKED: cq_event_type = 2;
pub const CQ_EVENT_RESERVED: cq_event_type = 3;
pub const CQ_EVENT_RELEASED: cq_event_type = 4;
pub const CQ_EVENT_TIMED_OUT: cq_event_type = 5;
pub const CQ_EVENT_CANCELLED: cq_event_type = 6;
pub const CQ_EVENT_CLOSED: cq_event_type = 7;
pub const CQ_EVENT_NEVER: cq_event_type = 8;
pub const CQ_EVENT_OVERDUE: cq_event_type = 9;
pub const CQ_EVENT_LOST: cq_event_type = 10;
/// Something an operator should fix, named in `resource` (fleet pools: a
/// server setting this user may not read, "maxmemory-policy").
pub const CQ_EVENT_WARNING: cq_event_type = 11;
/// The highest event type the header defines (`CQ_EVENT_MAX_`).
pub const CQ_EVENT_MAX: cq_event_type = 11;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_event {
    pub type_: cq_event_type,
    pub attempt: u64,
    pub data: *mut c_void,
    pub resource: *const c_char,
    pub time_ms: i64,
    pub wait_ms: i64,
    pub reserved_: [u64; 4],
}

pub type cq_event_fn = Option<unsafe extern "C" fn(ev: *const cq_event, arg: *mut c_void)>;

/// Zero means default for every field (`CQ_POOL_CONFIG_INIT`): use
/// `std::mem::zeroed()`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_pool_config {
    pub flags: c_uint,
    pub alloc: *const cq_allocator,
    pub clock: cq_clock_fn,
    pub clock_arg: *mut c_void,
    pub data: *mut c_void,
    pub on_event: cq_event_fn,
    pub event_arg: *mut c_void,
    pub event_buffer: u32,
    pub barge_ms: i64,
    pub reserved_: [u64; 7],
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct cq_pool_stats {
    pub waiting: u64,
    pub waited_grants: u64,
    pub wakeups: u64,
    pub events_dropped: u64,
    pub overdue: u64,
    pub backfilled: u64,
    pub late_heads: u64,
    pub converted: u64,
    pub reserved_: [u64; 7],
}

// -------------------------------------------------------------------------
// Budgets, classes, resources

pub const CQ_NAME_MAX: usize = 63;
pub const CQ_BUDGET_MAX: i64 = 1_099_511_627_775;
pub const CQ_BUDGET_LONE: c_uint = 1 << 0;

pub const CQ_WAIT_BUCKETS: usize = 28;

pub const CQ_KIND_BUDGET: c_int = 1;
pub const CQ_KIND_DEVICES: c_int = 2;
pub const CQ_KIND_CLASS: c_int = 3;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct cq_wait_stats {
    pub count: u64,
    pub p50_ms: i64,
    pub p99_ms: i64,
    pub max_ms: i64,
    pub sum_ms: i64,
    pub below: [u64; CQ_WAIT_BUCKETS],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_resource_stats {
    pub name: [c_char; CQ_NAME_MAX + 1],
    pub kind: c_int,
    pub flags: c_uint,
    pub capacity: i64,
    pub in_use: i64,
    pub withheld: i64,
    pub peak: i64,
    pub waiting: u64,
    pub grants: u64,
    pub timeouts: u64,
    pub cancellations: u64,
    pub wait: cq_wait_stats,
    pub devices: u32,
    pub online: u32,
    pub reserved_: [u64; 8],
}

// -------------------------------------------------------------------------
// Device pools and GPU detection

pub const CQ_DEVICE_MILLI: i64 = 1000;
pub const CQ_DEVICES_MAX: usize = 65536;
pub const CQ_DEVICE_ID_MAX: usize = 95;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_device_stats {
    pub id: [c_char; CQ_DEVICE_ID_MAX + 1],
    pub index: u32,
    pub online: c_int,
    pub whole: c_int,
    pub reserved: c_int,
    pub used_milli: i64,
    pub peak_milli: i64,
    pub grants: u64,
    pub reserved_: [u64; 4],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_detect_opts {
    pub nvidia_smi: *const c_char,
    pub timeout_ms: i64,
    pub alloc: *const cq_allocator,
    pub reserved_: [u64; 4],
}

#[repr(C)]
pub struct cq_gpu_list {
    pub count: usize,
    pub ids: *mut *mut c_char,
    pub source: *const c_char,
    pub error: [c_char; 160],
    pub alloc_: cq_allocator,
    pub cap_: usize,
}

// -------------------------------------------------------------------------
// Requests and grants: caller-owned storage

pub const CQ_REQ_MAX_ITEMS: usize = 16;

/// 1 KiB, 8-byte aligned. Must not move or change while an attempt made
/// with it waits.
#[repr(C)]
pub struct cq_req {
    pub data: *mut c_void,
    pub cq_private: [u64; 127],
}

/// 2 KiB, 8-byte aligned. Must not move while its attempt waits or holds
/// units.
#[repr(C)]
pub struct cq_grant {
    pub data: *mut c_void,
    pub cq_private: [u64; 255],
}

/// The sizes the header promises for this ABI (SOVERSION 0.1).
pub const CQ_REQ_SIZE: usize = 1024;
pub const CQ_GRANT_SIZE: usize = 2048;
pub const CQ_STORAGE_ALIGN: usize = 8;
const _: () = assert!(size_of::<cq_req>() == CQ_REQ_SIZE);
const _: () = assert!(size_of::<cq_grant>() == CQ_GRANT_SIZE);
const _: () = assert!(align_of::<cq_req>() == CQ_STORAGE_ALIGN);
const _: () = assert!(align_of::<cq_grant>() == CQ_STORAGE_ALIGN);

pub type cq_grant_cb = Option<unsafe extern "C" fn(grant: *mut cq_grant, status: c_int)>;

// -------------------------------------------------------------------------
// For host schedulers

#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_task {
    pub name: *const c_char,
    pub req: *const cq_req,
}

pub type cq_problem_fn =
    Option<unsafe extern "C" fn(task: usize, err: c_int, message: *const c_char, arg: *mut c_void)>;

pub const CQ_ROOM_NONE: c_int = 0;
pub const CQ_ROOM_LIMITED: c_int = 1;
pub const CQ_ROOM_EVERYTHING: c_int = 2;
pub const CQ_ROOM_UNLIMITED: c_int = 3;
pub const CQ_ROOM_MAX: usize = 32;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_room_item {
    pub name: [c_char; CQ_NAME_MAX + 1],
    pub units: i64,
    pub largest_milli: i64,
    pub whole: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_room {
    pub kind: c_int,
    pub count: usize,
    pub items: [cq_room_item; CQ_ROOM_MAX],
}

pub type cq_write_fn =
    Option<unsafe extern "C" fn(text: *const c_char, len: usize, arg: *mut c_void) -> c_int>;

extern "C" {
    pub fn cq_version_string() -> *const c_char;
    pub fn cq_version_number() -> c_int;
    pub fn cq_strerror(err: c_int) -> *const c_char;
    pub fn cq_err_name(err: c_int) -> *const c_char;
    pub fn cq_event_type_name(type_: c_int) -> *const c_char;
    pub fn cq_now() -> i64;

    pub fn cq_pool_create(out: *mut *mut cq_pool, cfg: *const cq_pool_config) -> c_int;
    pub fn cq_pool_close(pool: *mut cq_pool) -> c_int;
    pub fn cq_pool_destroy(pool: *mut cq_pool) -> c_int;
    pub fn cq_pool_data(pool: *const cq_pool) -> *mut c_void;
    pub fn cq_pool_expire(pool: *mut cq_pool, next_deadline_ms: *mut i64) -> c_int;
    pub fn cq_pool_stats_get(pool: *mut cq_pool, out: *mut cq_pool_stats) -> c_int;

    pub fn cq_budget_add(pool: *mut cq_pool, name: *const c_char, capacity: i64) -> c_int;
    pub fn cq_budget_add_ex(
        pool: *mut cq_pool,
        name: *const c_char,
        capacity: i64,
        flags: c_uint,
    ) -> c_int;
    pub fn cq_budget_set_capacity(pool: *mut cq_pool, name: *const c_char, capacity: i64) -> c_int;
    pub fn cq_class_add(pool: *mut cq_pool, name: *const c_char, max_workers: i64) -> c_int;
    pub fn cq_class_set_max(pool: *mut cq_pool, name: *const c_char, max_workers: i64) -> c_int;
    pub fn cq_resource_remove(pool: *mut cq_pool, name: *const c_char) -> c_int;
    pub fn cq_resource_stats_get(
        pool: *mut cq_pool,
        name: *const c_char,
        out: *mut cq_resource_stats,
    ) -> c_int;
    pub fn cq_pool_snapshot(
        pool: *mut cq_pool,
        out: *mut cq_resource_stats,
        cap: usize,
        count: *mut usize,
    ) -> c_int;

    pub fn cq_devices_add(
        pool: *mut cq_pool,
        name: *const c_char,
        count: usize,
        ids: *const *const c_char,
    ) -> c_int;
    pub fn cq_device_amount_parse(text: *const c_char, milli: *mut i64) -> c_int;
    pub fn cq_device_stats_get(
        pool: *mut cq_pool,
        name: *const c_char,
        index: u32,
        out: *mut cq_device_stats,
    ) -> c_int;
    pub fn cq_device_set_online(
        pool: *mut cq_pool,
        name: *const c_char,
        index: u32,
        online: c_int,
    ) -> c_int;

    pub fn cq_gpu_detect(out: *mut cq_gpu_list, opts: *const cq_detect_opts) -> c_int;
    pub fn cq_gpu_list_free(list: *mut cq_gpu_list);

    pub fn cq_req_init(req: *mut cq_req, pool: *mut cq_pool) -> c_int;
    pub fn cq_req_add(req: *mut cq_req, resource: *const c_char, amount: i64) -> c_int;
    pub fn cq_req_add_fraction(req: *mut cq_req, resource: *const c_char, milli: i64) -> c_int;
    pub fn cq_req_add_devices(req: *mut cq_req, resource: *const c_char, count: i64) -> c_int;
    pub fn cq_req_add_str(
        req: *mut cq_req,
        resource: *const c_char,
        amount: *const c_char,
    ) -> c_int;
    pub fn cq_req_set_class(req: *mut cq_req, name: *const c_char) -> c_int;
    pub fn cq_req_set_hold_limit(req: *mut cq_req, limit_ms: i64) -> c_int;
    pub fn cq_req_parse(req: *mut cq_req, spec: *const c_char) -> c_int;
    pub fn cq_req_count(req: *const cq_req) -> usize;
    pub fn cq_req_error(req: *const cq_req) -> *const c_char;

    pub fn cq_req_size() -> usize;
    pub fn cq_grant_size() -> usize;

    pub fn cq_grant_init(grant: *mut cq_grant);
    pub fn cq_grant_try(pool: *mut cq_pool, grant: *mut cq_grant, req: *const cq_req) -> c_int;
    pub fn cq_grant_acquire(
        pool: *mut cq_pool,
        grant: *mut cq_grant,
        req: *const cq_req,
        deadline_ms: i64,
    ) -> c_int;
    pub fn cq_grant_submit(
        pool: *mut cq_pool,
        grant: *mut cq_grant,
        req: *const cq_req,
        deadline_ms: i64,
        cb: cq_grant_cb,
    ) -> c_int;
    pub fn cq_grant_cancel(pool: *mut cq_pool, grant: *mut cq_grant) -> c_int;
    pub fn cq_grant_abort(pool: *mut cq_pool, grant: *mut cq_grant, status: c_int) -> c_int;
    pub fn cq_grant_release(pool: *mut cq_pool, grant: *mut cq_grant) -> c_int;
    pub fn cq_grant_release_part(
        pool: *mut cq_pool,
        grant: *mut cq_grant,
        resource: *const c_char,
        amount: i64,
    ) -> c_int;
    pub fn cq_grant_release_device(
        pool: *mut cq_pool,
        grant: *mut cq_grant,
        resource: *const c_char,
        index: u32,
        milli: i64,
    ) -> c_int;
    pub fn cq_grant_devices(
        grant: *const cq_grant,
        resource: *const c_char,
        indices: *mut u32,
        cap: usize,
    ) -> usize;
    pub fn cq_grant_cuda_visible(
        grant: *const cq_grant,
        resource: *const c_char,
        buf: *mut c_char,
        len: usize,
    ) -> c_int;
    pub fn cq_grant_held(grant: *const cq_grant, resource: *const c_char) -> i64;
    pub fn cq_grant_is_held(grant: *const cq_grant) -> c_int;
    pub fn cq_grant_error(grant: *const cq_grant) -> *const c_char;

    pub fn cq_req_headroom(pool: *mut cq_pool, req: *const cq_req, copies: *mut i64) -> c_int;
    pub fn cq_tasks_validate(
        pool: *mut cq_pool,
        tasks: *const cq_task,
        n: usize,
        fn_: cq_problem_fn,
        arg: *mut c_void,
    ) -> c_int;
    pub fn cq_pool_room(pool: *mut cq_pool, job_class: *const c_char, out: *mut cq_room) -> c_int;
    pub fn cq_pool_add_spec(
        pool: *mut cq_pool,
        spec: *const c_char,
        detect: *const cq_detect_opts,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    pub fn cq_pool_write_metrics(pool: *mut cq_pool, write: cq_write_fn, arg: *mut c_void)
        -> c_int;
}

// ---------------------------------------------------------------------------
// The fleet pool (include/cronoq/cronoq_fleet.h), in libcronoq_fleet. The
// struct is always declared; the functions only where build.rs found the
// library and linked it (cfg `cronoq_fleet`, also passed to dependents as
// `DEP_CRONOQ_FLEET=1`).
// ---------------------------------------------------------------------------

/// `CQ_FLEET_AUDIT` (`cq_fleet_opts.fleet_flags`).
pub const CQ_FLEET_AUDIT: c_uint = 1 << 0;
/// `CQ_FLEET_ASYNC_RELEASE` (`cq_fleet_opts.fleet_flags`).
pub const CQ_FLEET_ASYNC_RELEASE: c_uint = 1 << 1;
/// `CQ_FLEET_NEW_NAMESPACE` (`cq_fleet_opts.fleet_flags`): a namespace this
/// open creates is not quarantined.
pub const CQ_FLEET_NEW_NAMESPACE: c_uint = 1 << 2;
/// `CQ_FLEET_LOAD_REPLACE` (the flags of `cq_fleet_load()`).
pub const CQ_FLEET_LOAD_REPLACE: c_uint = 1 << 0;
/// Whether this build links libcronoq_fleet.
pub const FLEET_LINKED: bool = cfg!(cronoq_fleet);
/// What the build script linked, and from where: `static libcronoq.a from
/// /usr/local/lib (pkg-config cronoq); libcronoq_fleet.a from
/// /usr/local/lib`, or `...; no fleet library`.
pub const LINKED: &str = env!("CRONOQ_SYS_LINKED");

/// Options of `cq_fleet_open()`; zero means default for every field: use
/// `std::mem::zeroed()`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cq_fleet_opts {
    pub flags: c_uint,
    pub clock: cq_clock_fn,
    pub clock_arg: *mut c_void,
    pub data: *mut c_void,
    pub on_event: cq_event_fn,
    pub event_arg: *mut c_void,
    pub event_buffer: u32,
    pub fleet_flags: c_uint,
    pub host: *const c_char,
    pub ttl_ms: i64,
    pub heartbeat_ms: i64,
    pub timeout_ms: i64,
    pub script_steps: u32,
    pub username: *const c_char,
    pub password: *const c_char,
    pub max_ttl_ms: i64,
    pub reserved_: [u64; 7],
}

/// What a fleet pool met (`cq_fleet_stats_get()`); `Default` is
/// `CQ_FLEET_STATS_INIT`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct cq_fleet_stats {
    pub sessions: u64,
    pub leases_lost: u64,
    pub state_losses: u64,
    pub rollbacks: u64,
    pub reconnects: u64,
    pub unavailable: u64,
    pub deferred: u64,
    pub reconciled: u64,
    pub max_fence: u64,
    pub quarantine_ms: i64,
    pub lost_deadline_ms: i64,
    pub settings_unchecked: u64,
    pub reserved_: [u64; 4],
}

#[cfg(cronoq_fleet)]
extern "C" {
    pub fn cq_fleet_open(
        out: *mut *mut cq_pool,
        url: *const c_char,
        ns: *const c_char,
        opts: *const cq_fleet_opts,
    ) -> c_int;
    pub fn cq_fleet_library() -> *const c_char;
    pub fn cq_fleet_load(url: *const c_char, opts: *const cq_fleet_opts, flags: c_uint) -> c_int;
    pub fn cq_fleet_acl(ns: *const c_char, buf: *mut c_char, len: usize) -> c_int;
    pub fn cq_fleet_is_fleet(pool: *const cq_pool) -> c_int;
    pub fn cq_fleet_host(pool: *const cq_pool) -> *const c_char;
    pub fn cq_fleet_grant_fence(grant: *const cq_grant, fence: *mut u64) -> c_int;
    pub fn cq_fleet_stats_get(pool: *mut cq_pool, out: *mut cq_fleet_stats) -> c_int;
    pub fn cq_fleet_error() -> *const c_char;
}
