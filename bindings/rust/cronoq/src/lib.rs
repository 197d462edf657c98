//! Safe Rust types over libcronoq: multi-resource admission control.
//!
//! ```ignore
//! use cronoq::{Deadline, Pool};
//! use std::time::Duration;
//!
//! let pool = Pool::new()?;
//! pool.add_spec("warehouse-db=10,memory_mib=24576")?;
//! let req = pool.request_spec("warehouse-db=1,memory_mib=2048")?;   // built once
//! let grant = pool.acquire(&req, Deadline::after(Duration::from_secs(5)))?;
//! run_task();   // the units go back when `grant` is dropped, panics included
//! ```
//!
//! The C header `include/cronoq/cronoq.h` is the reference for what each
//! call does; this crate follows its ownership and threading rules and
//! makes the compiler enforce them where it can:
//!
//! - [`Pool`] is `Send + Sync`; every method may be called from any thread.
//!   [`Request`]s and [`Grant`]s borrow their pool, so it outlives them.
//! - A pool in an `Arc` also gives [`OwnedGrant`]s
//!   ([`Pool::acquire_owned`], [`Pool::try_acquire_owned`],
//!   [`Pool::acquire_owned_async`]): grants that hold a reference to the
//!   pool instead of a borrow, `Send + Sync + 'static`, for
//!   `thread::spawn`, `tokio::spawn` and `spawn_blocking`, which a
//!   borrowing `Grant` cannot enter. Like tokio's `OwnedSemaphorePermit`.
//!   They are `Grant`s inside: same accessors, same release on drop.
//!
//!   ```ignore
//!   let pool = Arc::new(Pool::new()?);
//!   pool.add_spec("db=2")?;
//!   let req = pool.request_spec("db=1")?;
//!   let grant = pool.acquire_owned_async(&req, Deadline::NEVER).await?;
//!   tokio::task::spawn_blocking(move || { work(); drop(grant) });
//!   ```
//! - A [`Request`] is built once and reused by any number of threads. Its
//!   `cq_req` lives on the heap; attempts borrow the request, so it can be
//!   neither changed nor dropped while one waits.
//! - A [`Grant`] is a guard: it holds every unit of the request and gives
//!   them all back, exactly once, when dropped — also while a panic
//!   unwinds. Its `cq_grant` lives on the heap, so the guard may move and
//!   cross threads while the C grant stays put.
//! - [`Pool::acquire_async`] returns a `Future` ([`Acquire`]) over the
//!   callback API. It needs no particular runtime. Dropping it cancels the
//!   attempt; when the grant won the race with the cancel, the drop
//!   releases it, so nothing leaks on either side of the race.
//! - Errors are the [`Error`] enum, one variant per `CQ_E...` code.
//!
//! # Where it differs from the C API
//!
//! - No `cq_grant_init()` and no release call to forget: grant storage comes
//!   from a small per-thread list of idle 2 KiB cells (allocated once, so
//!   the hot path does not allocate), and the guard's `Drop` releases.
//!   [`Grant::release`] releases early and reports the library's answer;
//!   releasing twice cannot be written.
//! - Requests are changed through `&mut Request`. An asynchronous attempt
//!   that is still waiting (possible only if its future was forgotten with
//!   `mem::forget`) keeps the request's storage alive, and changes are
//!   refused with [`Error::InUse`] until it ends.
//! - A blocking [`Pool::acquire`] cannot be cancelled from another thread
//!   (the C API's `cq_grant_cancel()` on a blocked grant): use a deadline,
//!   [`Pool::close`], or the asynchronous acquire, whose drop cancels.
//! - Blocking inside a grant callback is undefined in C. In Rust, code runs
//!   inside one only through a waker woken by the library; there
//!   [`Pool::acquire`] returns [`Error::State`] instead of hanging, and a
//!   dropped [`Acquire`] leaves the release of a grant that won to the
//!   queued callback instead of waiting for it. A waker that panics there
//!   aborts the process: a panic must not unwind into C.
//! - Dropping a [`Pool`] destroys it; if a grant or attempt was forgotten
//!   (`mem::forget`) and still holds or waits, the pool is closed and
//!   leaked rather than freed under it.
//! - Names longer than 63 bytes or with a NUL byte are [`Error::Invalid`],
//!   as the library answers for a bad name.
//! - Not wrapped (use `cronoq-sys` with [`Pool::as_ptr`]): the event hook,
//!   allocator hooks, custom clocks and manual timers (`cq_pool_expire`),
//!   the room query, whole-pool and per-device snapshots, GPU detection
//!   other than `gpu=auto` in [`Pool::add_spec`], and the libuv adapter.
//!
//! # What is still yours to do
//!
//! - Build requests once, at startup, and validate the task set there
//!   ([`Pool::validate`]): an acquire reports [`Error::Never`] without the
//!   message that says which resource is too small.
//! - Keep a grant only as long as the work it covers: a guard kept alive by
//!   a long-lived struct, an `Rc` cycle or `mem::forget` holds its units.
//! - Keep hold limits ([`Request::set_hold_limit`]): the library never takes
//!   units back.
//! - Wakers must not block on a lock that a thread dropping an
//!   [`Acquire`] holds: that drop waits for the library's callback, which
//!   may be queued behind such a waker.
//! - Poll the futures: an [`Acquire`] that is never polled never submits.
//!
//! # Fleet pools
//!
//! [`Pool::connect`] opens a pool kept in a Redis server and shared by
//! every process that opens the same namespace (libcronoq_fleet, see
//! `include/cronoq/cronoq_fleet.h`). It is the same [`Pool`] type:
//! requests, grants, the future and the errors work unchanged, device
//! pools are this host's (`gpu`) unless named with their host
//! (`gpu@hostB`), and [`Grant::fencing_token`] gives each grant's fencing
//! token (`None` for in-process pools, which issue none), a large number
//! (the server's clock in microseconds when the namespace was created,
//! below 2^53). A namespace the server creates is quarantined for its
//! longest TTL ([`FleetOptions::max_ttl_ms`]) unless the opener says it
//! is new ([`FleetOptions::new_namespace`]). [`Pool::fleet_stats`] says
//! what the pool met; [`fleet_load`], [`fleet_library`] and [`fleet_acl`]
//! are the operator's calls (load the server's functions, their name,
//! the ACL an application's user needs). cronoq-sys links
//! the fleet library where its build finds it (see its build script);
//! without it `Pool::connect` fails with `Error::NotFound` and a message
//! saying so. `bindings/rust/examples-tokio` is a tokio service whose
//! tasks share one fleet pool.
//!
//! # Linking
//!
//! cronoq-sys's build script links libcronoq from `$CRONOQ_LIB_DIR`, else
//! the installed library (`pkg-config cronoq`; for a prefix of your own,
//! `PKG_CONFIG_PATH=PREFIX/lib/pkgconfig`), else the repository's
//! `build/`; statically (`libcronoq.a`, with `libcronoq_fleet.a` and
//! hiredis where the fleet library is there too), so that programs run
//! without the library on the loader's path. `CRONOQ_LINK=shared` links
//! the shared libraries; the program then needs them at run time, and
//! the build warns, naming `LD_LIBRARY_PATH`, when their directory is not
//! one the loader searches. [`sys::LINKED`] says what was linked and from
//! where.
mod acquire;
mod error;
mod fleet;
mod grant;
mod pool;
mod request;
mod text;

pub use acquire::{Acquire, AcquireOwned};
pub use cronoq_sys as sys;
pub use error::{Error, SpecError};
pub use fleet::{fleet_acl, fleet_library, fleet_load, FleetOptions, FleetStats};
pub use grant::{Grant, OwnedGrant};
pub use pool::{Pool, PoolOptions, PoolStats, Problem, ResourceKind, ResourceStats, Task};
pub use request::Request;

use std::time::Duration;

/// When an attempt stops waiting: absolute milliseconds on the library's
/// monotonic clock ([`now_ms`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(i64);

impl Deadline {
    /// Wait without limit.
    pub const NEVER: Deadline = Deadline(sys::CQ_NEVER);

    /// `d` from now, rounded up to a millisecond.
    pub fn after(d: Duration) -> Deadline {
        Deadline(now_ms().saturating_add(ceil_ms(d)))
    }

    /// A deadline that has passed: one attempt, no waiting.
    pub fn now() -> Deadline {
        Deadline(now_ms())
    }

    /// An absolute time on the library's clock, in milliseconds.
    pub fn at_ms(ms: i64) -> Deadline {
        Deadline(ms)
    }

    pub fn as_ms(self) -> i64 {
        self.0
    }
}

/// Milliseconds on the library's monotonic clock (`cq_now()`).
pub fn now_ms() -> i64 {
    unsafe { sys::cq_now() }
}

/// The linked library's version, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    unsafe { std::ffi::CStr::from_ptr(sys::cq_version_string()) }.to_str().unwrap_or("?")
}

pub(crate) fn ceil_ms(d: Duration) -> i64 {
    let ms = d.as_nanos().saturating_add(999_999) / 1_000_000;
    i64::try_from(ms).unwrap_or(i64::MAX)
}
