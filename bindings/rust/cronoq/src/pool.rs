//! The pool: resources, the acquire styles, and what host schedulers ask
//! of it (headroom, validation, stats, metrics).
use crate::grant::{in_callback, CellPtr};
use crate::text::{borrowed, c_string, from_array, Name};
use crate::{Acquire, AcquireOwned, Deadline, Error, Grant, OwnedGrant, Request, SpecError};
use cronoq_sys as sys;
use std::ffi::CString;
use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::NonNull;
use std::sync::Arc;

/// Options of a new pool; the default is the library's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolOptions {
    flags: std::os::raw::c_uint,
    barge_ms: i64,
}

impl PoolOptions {
    pub fn new() -> PoolOptions {
        PoolOptions::default()
    }

    fn flag(mut self, flag: std::os::raw::c_uint, on: bool) -> PoolOptions {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
        self
    }

    /// Staged claims (`CQ_POOL_STAGED_CLAIMS`): a waiter claims what it
    /// lacks one resource at a time, in resource order.
    pub fn staged_claims(self, on: bool) -> PoolOptions {
        self.flag(sys::CQ_POOL_STAGED_CLAIMS, on)
    }

    /// Backfill (`CQ_POOL_BACKFILL`): requests with a hold limit may use
    /// capacity withheld for the oldest waiter when that does not delay it.
    pub fn backfill(self, on: bool) -> PoolOptions {
        self.flag(sys::CQ_POOL_BACKFILL, on)
    }

    /// Strict order (`CQ_POOL_STRICT_ORDER`): no barging window, so a
    /// blocking acquire claims its place at once.
    pub fn strict_order(self, on: bool) -> PoolOptions {
        self.flag(sys::CQ_POOL_STRICT_ORDER, on)
    }

    /// The barging window of blocking acquires, in milliseconds
    /// (`cq_pool_config.barge_ms`; 0: the default, 10 ms): for that long a
    /// blocking acquire may be overtaken, then it claims its place.
    pub fn barge_ms(mut self, ms: i64) -> PoolOptions {
        self.barge_ms = ms;
        self
    }
}

/// An allocator of named resources: budgets, classes and device pools.
///
/// `Send + Sync`: share it between threads by reference (scoped threads) or
/// in an `Arc`. Every method may be called from any thread. Requests and
/// grants borrow the pool, so it outlives them; in an `Arc`, the `_owned`
/// acquires give an [`OwnedGrant`], which holds a reference to the pool
/// instead, for threads and tasks that need `'static`.
pub struct Pool {
    raw: NonNull<sys::cq_pool>,
    fleet: bool,
}

// The header: "Thread-safe: any thread may acquire, release or cancel";
// every call used through `&Pool` is documented thread-safe. Destroying
// takes `self` by value, after every borrow has ended.
unsafe impl Send for Pool {}
unsafe impl Sync for Pool {}

/// A snapshot of the pool as a whole (`cq_pool_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Attempts waiting now.
    pub waiting: u64,
    /// Grants to attempts that had to wait, ever.
    pub waited_grants: u64,
    /// Blocked threads woken: one per outcome, or to try again.
    pub wakeups: u64,
    /// Grants that outlived their hold limit, ever.
    pub overdue: u64,
    /// Grants made by backfill, ever.
    pub backfilled: u64,
    /// Oldest waiters granted after their shadow time, ever.
    pub late_heads: u64,
    /// Blocking acquires that outwaited the barging window and claimed.
    pub converted: u64,
}

/// What a resource is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResourceKind {
    Budget,
    Devices,
    Class,
}

/// A snapshot of one resource (`cq_resource_stats`). Device pools count in
/// thousandths of a device, classes in workers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceStats {
    pub name: String,
    pub kind: ResourceKind,
    pub capacity: i64,
    pub in_use: i64,
    /// Free, but set aside for the oldest waiter that claimed it.
    pub withheld: i64,
    pub peak: i64,
    pub waiting: u64,
    pub grants: u64,
    pub timeouts: u64,
    pub cancellations: u64,
    /// Waiting times of the grants (0 ms when granted at once).
    pub wait_p50_ms: i64,
    pub wait_p99_ms: i64,
    pub wait_max_ms: i64,
    pub wait_sum_ms: i64,
    /// Device pools: devices, and of which online.
    pub devices: u32,
    pub online: u32,
}

/// A task of a pipeline, for [`Pool::validate`]: its name and the request
/// one of its workers makes.
#[derive(Clone, Copy, Debug)]
pub struct Task<'a> {
    pub name: &'a str,
    pub request: &'a Request<'a>,
}

/// A task that can never run, from [`Pool::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Index of the task in the slice given.
    pub task: usize,
    pub error: Error,
    /// `task "predict" requires gpu:8 but the pool only has 1`.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

/// The storage sizes this crate declares must be the library's.
pub(crate) fn check_abi() {
    let (req, grant) = unsafe { (sys::cq_req_size(), sys::cq_grant_size()) };
    assert!(
        req == std::mem::size_of::<sys::cq_req>() && grant == std::mem::size_of::<sys::cq_grant>(),
        "libcronoq was built with cq_req of {} and cq_grant of {} bytes; this crate declares {} and {}",
        req,
        grant,
        std::mem::size_of::<sys::cq_req>(),
        std::mem::size_of::<sys::cq_grant>()
    );
}

impl Pool {
    /// A pool with the default options and no resources.
    ///
    /// # Panics
    /// When the linked library's `cq_req` or `cq_grant` has another size
    /// than this crate declares (a library of another ABI version): using
    /// it would write past the storage.
    pub fn new() -> Result<Pool, Error> {
        Pool::with_options(PoolOptions::new())
    }

    /// A pool with `options`.
    pub fn with_options(options: PoolOptions) -> Result<Pool, Error> {
        check_abi();
        let mut cfg: sys::cq_pool_config = unsafe { std::mem::zeroed() };
        cfg.flags = options.flags;
        cfg.barge_ms = options.barge_ms;
        let mut raw = std::ptr::null_mut();
        crate::error::check(unsafe { sys::cq_pool_create(&mut raw, &cfg) })?;
        Ok(Pool { raw: NonNull::new(raw).ok_or(Error::NoMemory)?, fleet: false })
    }

    /// A pool of the fleet library, made by `Pool::connect`.
    #[cfg(cronoq_fleet)]
    pub(crate) fn from_fleet(raw: NonNull<sys::cq_pool>) -> Pool {
        Pool { raw, fleet: true }
    }

    /// Whether this is a fleet pool (made by [`Pool::connect`]).
    pub fn is_fleet(&self) -> bool {
        self.fleet
    }

    /// The C pool, for calls of `cronoq-sys` that this crate does not wrap.
    /// It stays owned by this `Pool`: never destroy it through the pointer.
    #[inline]
    pub fn as_ptr(&self) -> *mut sys::cq_pool {
        self.raw.as_ptr()
    }

    fn named(
        &self,
        name: &str,
        f: impl FnOnce(*mut sys::cq_pool, *const c_char) -> c_int,
    ) -> Result<(), Error> {
        let name = Name::new(name)?;
        crate::error::check(f(self.as_ptr(), name.ptr()))
    }

    /// Add a budget of `capacity` units (0 to 2^40 - 1). Names are 1 to 63
    /// bytes of letters, digits and `_-./`, unique in the pool.
    pub fn add_budget(&self, name: &str, capacity: i64) -> Result<(), Error> {
        self.named(name, |p, n| unsafe { sys::cq_budget_add(p, n, capacity) })
    }

    /// Add a budget with the lone-request allowance: a request for more
    /// than the capacity is granted when nothing else holds the budget.
    pub fn add_lone_budget(&self, name: &str, capacity: i64) -> Result<(), Error> {
        self.named(name, |p, n| unsafe {
            sys::cq_budget_add_ex(p, n, capacity, sys::CQ_BUDGET_LONE)
        })
    }

    /// Change a budget's capacity while in use (see docs/GUIDE.md, "Live
    /// capacity changes").
    pub fn set_capacity(&self, name: &str, capacity: i64) -> Result<(), Error> {
        self.named(name, |p, n| unsafe { sys::cq_budget_set_capacity(p, n, capacity) })
    }

    /// Add a class: a cap of `max_workers` grants held at once by requests
    /// of the class.
    pub fn add_class(&self, name: &str, max_workers: i64) -> Result<(), Error> {
        self.named(name, |p, n| unsafe { sys::cq_class_add(p, n, max_workers) })
    }

    /// Change a class's cap.
    pub fn set_class_max(&self, name: &str, max_workers: i64) -> Result<(), Error> {
        self.named(name, |p, n| unsafe { sys::cq_class_set_max(p, n, max_workers) })
    }

    /// Add a device pool of `count` devices named "0".."count-1".
    pub fn add_devices(&self, name: &str, count: usize) -> Result<(), Error> {
        self.named(name, |p, n| unsafe { sys::cq_devices_add(p, n, count, std::ptr::null()) })
    }

    /// Add a device pool whose devices have these ids (physical indices or
    /// UUIDs, as `CUDA_VISIBLE_DEVICES` names them).
    pub fn add_devices_with_ids(&self, name: &str, ids: &[&str]) -> Result<(), Error> {
        let owned = ids.iter().map(|s| c_string(s)).collect::<Result<Vec<CString>, Error>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|s| s.as_ptr()).collect();
        self.named(name, |p, n| unsafe { sys::cq_devices_add(p, n, ptrs.len(), ptrs.as_ptr()) })
    }

    /// Take device `index` of pool `name` offline (it takes no new work) or
    /// back online.
    pub fn set_device_online(&self, name: &str, index: u32, online: bool) -> Result<(), Error> {
        self.named(name, |p, n| unsafe { sys::cq_device_set_online(p, n, index, online as c_int) })
    }

    /// Remove a budget, class or device pool; refused with `Error::InUse`
    /// while it is held or named by a waiting request.
    pub fn remove_resource(&self, name: &str) -> Result<(), Error> {
        self.named(name, |p, n| unsafe { sys::cq_resource_remove(p, n) })
    }

    /// Declare resources from one string:
    /// `gpu=auto,warehouse-db=10,memory_mib:lone=24576,predict:class=2`.
    /// All or nothing; the error's message says what and where.
    pub fn add_spec(&self, spec: &str) -> Result<(), SpecError> {
        let spec = c_string(spec).map_err(|e| SpecError {
            error: e,
            message: "resource spec: a NUL byte in the text".to_string(),
        })?;
        let mut err = [0 as c_char; 256];
        let rc = unsafe {
            sys::cq_pool_add_spec(
                self.as_ptr(),
                spec.as_ptr(),
                std::ptr::null(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        crate::error::check(rc).map_err(|error| SpecError { error, message: from_array(&err) })
    }

    /// An empty request on this pool; see [`Request`].
    pub fn request(&self) -> Request<'_> {
        Request::new(self)
    }

    /// A request from a spec: `gpu=0.5,warehouse-db=1,class=predict`.
    pub fn request_spec(&self, spec: &str) -> Result<Request<'_>, SpecError> {
        let mut req = Request::new(self);
        match req.parse(spec) {
            Ok(_) => Ok(req),
            Err(error) => Err(SpecError { error, message: req.error().to_string() }),
        }
    }

    #[inline]
    fn finish(&self, cell: CellPtr, rc: c_int) -> Result<Grant<'_>, Error> {
        if rc == 0 {
            Ok(Grant::new(self, cell))
        } else {
            cell.put();
            Err(Error::from_code(rc))
        }
    }

    /// Acquire `req` without waiting: the grant, or `Error::Busy` when the
    /// units are taken or withheld for an older waiter (a try never
    /// overtakes a waiter). Also `Never`, `NotFound`, `Closed`, `WrongPool`.
    #[inline]
    pub fn try_acquire(&self, req: &Request<'_>) -> Result<Grant<'_>, Error> {
        let cell = CellPtr::take();
        let rc = unsafe { sys::cq_grant_try(self.as_ptr(), cell.raw(), req.as_ptr()) };
        self.finish(cell, rc)
    }

    /// Acquire `req`, waiting until it is granted, `deadline` passes
    /// (`Error::TimedOut`) or the pool closes (`Error::Closed`). Blocks the
    /// thread; for a cancellable wait use [`acquire_async`].
    ///
    /// Called from inside a grant callback (a waker that the library wakes,
    /// or a `Drop` run by it), where the C API forbids blocking, it returns
    /// `Error::State` without trying.
    ///
    /// [`acquire_async`]: Pool::acquire_async
    pub fn acquire(&self, req: &Request<'_>, deadline: Deadline) -> Result<Grant<'_>, Error> {
        if in_callback() {
            return Err(Error::State);
        }
        let cell = CellPtr::take();
        let rc = unsafe {
            sys::cq_grant_acquire(self.as_ptr(), cell.raw(), req.as_ptr(), deadline.as_ms())
        };
        self.finish(cell, rc)
    }

    /// Acquire `req` as a future, for any executor. It resolves to the
    /// grant or the attempt's error; dropping it first cancels the attempt
    /// (and releases a grant that won the race). See [`Acquire`].
    pub fn acquire_async<'a>(&'a self, req: &'a Request<'a>, deadline: Deadline) -> Acquire<'a> {
        Acquire::new(self, req, deadline)
    }

    /// [`try_acquire`](Pool::try_acquire) for a pool in an `Arc`: the
    /// grant owns a reference to the pool instead of borrowing it, so it
    /// may move into a spawned thread or task. See [`OwnedGrant`].
    pub fn try_acquire_owned(self: &Arc<Self>, req: &Request<'_>) -> Result<OwnedGrant, Error> {
        let grant = self.try_acquire(req)?;
        Ok(OwnedGrant::new(self.clone(), grant))
    }

    /// [`acquire`](Pool::acquire) for a pool in an `Arc`, to an
    /// [`OwnedGrant`].
    pub fn acquire_owned(
        self: &Arc<Self>,
        req: &Request<'_>,
        deadline: Deadline,
    ) -> Result<OwnedGrant, Error> {
        let grant = self.acquire(req, deadline)?;
        Ok(OwnedGrant::new(self.clone(), grant))
    }

    /// [`acquire_async`](Pool::acquire_async) for a pool in an `Arc`: the
    /// future resolves to an [`OwnedGrant`]. See [`AcquireOwned`].
    pub fn acquire_owned_async<'a>(
        self: &'a Arc<Self>,
        req: &'a Request<'a>,
        deadline: Deadline,
    ) -> AcquireOwned<'a> {
        AcquireOwned::new(self, req, deadline)
    }

    /// Close the pool: every waiting attempt fails with `Error::Closed`, as
    /// does every later acquire. Holders keep their grants. Idempotent.
    pub fn close(&self) {
        unsafe { sys::cq_pool_close(self.as_ptr()) };
    }

    /// A snapshot of the pool as a whole.
    pub fn stats(&self) -> PoolStats {
        let mut s = sys::cq_pool_stats::default();
        unsafe { sys::cq_pool_stats_get(self.as_ptr(), &mut s) };
        PoolStats {
            waiting: s.waiting,
            waited_grants: s.waited_grants,
            wakeups: s.wakeups,
            overdue: s.overdue,
            backfilled: s.backfilled,
            late_heads: s.late_heads,
            converted: s.converted,
        }
    }

    /// A snapshot of resource `name`.
    pub fn resource_stats(&self, name: &str) -> Result<ResourceStats, Error> {
        let name = Name::new(name)?;
        let mut s: sys::cq_resource_stats = unsafe { std::mem::zeroed() };
        crate::error::check(unsafe {
            sys::cq_resource_stats_get(self.as_ptr(), name.ptr(), &mut s)
        })?;
        Ok(ResourceStats {
            name: from_array(&s.name),
            kind: match s.kind {
                sys::CQ_KIND_DEVICES => ResourceKind::Devices,
                sys::CQ_KIND_CLASS => ResourceKind::Class,
                _ => ResourceKind::Budget,
            },
            capacity: s.capacity,
            in_use: s.in_use,
            withheld: s.withheld,
            peak: s.peak,
            waiting: s.waiting,
            grants: s.grants,
            timeouts: s.timeouts,
            cancellations: s.cancellations,
            wait_p50_ms: s.wait.p50_ms,
            wait_p99_ms: s.wait.p99_ms,
            wait_max_ms: s.wait.max_ms,
            wait_sum_ms: s.wait.sum_ms,
            devices: s.devices,
            online: s.online,
        })
    }

    /// How many more copies of `req` could be granted right now, counting
    /// class caps and what waiters withhold (`i64::MAX` for an empty
    /// request). `Error::Never` when it can never fit.
    pub fn headroom(&self, req: &Request<'_>) -> Result<i64, Error> {
        let mut copies = 0i64;
        crate::error::check(unsafe {
            sys::cq_req_headroom(self.as_ptr(), req.as_ptr(), &mut copies)
        })?;
        Ok(copies)
    }

    /// Startup validation of a set of tasks: every task whose request can
    /// never fit, each with a message naming the task and the resource. It
    /// does not stop at the first problem.
    pub fn validate(&self, tasks: &[Task<'_>]) -> Result<(), Vec<Problem>> {
        let mut names = Vec::with_capacity(tasks.len());
        for (i, t) in tasks.iter().enumerate() {
            match c_string(t.name) {
                Ok(n) => names.push(n),
                Err(error) => {
                    return Err(vec![Problem {
                        task: i,
                        error,
                        message: format!("task {:?}: a NUL byte in the name", t.name),
                    }])
                }
            }
        }
        let raw: Vec<sys::cq_task> = tasks
            .iter()
            .zip(&names)
            .map(|(t, n)| sys::cq_task { name: n.as_ptr(), req: t.request.as_ptr() })
            .collect();
        let mut problems: Vec<Problem> = Vec::new();
        unsafe extern "C" fn collect(
            task: usize,
            err: c_int,
            msg: *const c_char,
            arg: *mut c_void,
        ) {
            let problems = &mut *(arg as *mut Vec<Problem>);
            problems.push(Problem {
                task,
                error: Error::from_code(err),
                message: borrowed(msg).to_string(),
            });
        }
        let rc = unsafe {
            sys::cq_tasks_validate(
                self.as_ptr(),
                raw.as_ptr(),
                raw.len(),
                Some(collect),
                &mut problems as *mut Vec<Problem> as *mut c_void,
            )
        };
        if rc == 0 {
            Ok(())
        } else if problems.is_empty() {
            Err(vec![Problem {
                task: 0,
                error: Error::from_code(rc),
                message: Error::from_code(rc).to_string(),
            }])
        } else {
            Err(problems)
        }
    }

    /// The whole pool in the Prometheus text format, for a metrics
    /// endpoint.
    pub fn metrics(&self) -> Result<String, Error> {
        unsafe extern "C" fn append(text: *const c_char, len: usize, arg: *mut c_void) -> c_int {
            let out = &mut *(arg as *mut Vec<u8>);
            out.extend_from_slice(std::slice::from_raw_parts(text as *const u8, len));
            0
        }
        let mut out: Vec<u8> = Vec::new();
        crate::error::check(unsafe {
            sys::cq_pool_write_metrics(
                self.as_ptr(),
                Some(append),
                &mut out as *mut Vec<u8> as *mut c_void,
            )
        })?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

impl Drop for Pool {
    /// Destroys the pool. Every borrow has ended, so nothing is held or
    /// waits, unless a grant or an attempt was forgotten (`mem::forget`):
    /// then the pool is closed and leaked, never freed while the library
    /// may still reach it. Likewise when the last reference goes inside a
    /// grant callback (a waker that drops the pool), where the C API
    /// forbids destroying it.
    fn drop(&mut self) {
        let raw = self.as_ptr();
        if in_callback() {
            unsafe { sys::cq_pool_close(raw) };
            return;
        }
        let mut rc = unsafe { sys::cq_pool_destroy(raw) };
        if rc == sys::CQ_EINUSE {
            // Closing fails forgotten waiters; a forgotten grant stays held.
            unsafe { sys::cq_pool_close(raw) };
            rc = unsafe { sys::cq_pool_destroy(raw) };
        }
        debug_assert!(rc == 0 || rc == sys::CQ_EINUSE, "cq_pool_destroy: {}", rc);
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool").field("pool", &self.raw).finish()
    }
}
