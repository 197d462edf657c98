//! Grants: the guard that holds units and gives them back on `Drop`, its
//! owned form (`OwnedGrant`, a `Grant` and the `Arc` of its pool), and the
//! storage behind them.
//!
//! A `cq_grant` must not move while its attempt waits or holds units, so it
//! lives in a heap cell that the guard points to; moving the guard moves the
//! pointer only. Cells are 2 KiB; allocating one per attempt would cost more
//! than the attempt, so each thread keeps a few idle cells for reuse (a
//! released `cq_grant` may start a new attempt as it is). A cell goes back
//! to the spare list of whichever thread finishes with it, and only when
//! idle: never while it waits or holds.
//!
//! The cell also carries what an asynchronous attempt shares with the
//! library's callback (see `acquire.rs`): the outcome, the waker, and whether
//! the future was dropped before the outcome arrived.
use crate::request::ReqStorage;
use crate::text::{name_ptr, optional_name, Name};
use crate::{Error, Pool};
use cronoq_sys as sys;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::fmt;
use std::os::raw::c_int;
use std::ptr::NonNull;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Waker;

/// What an asynchronous attempt and its callback share, under the cell's
/// mutex.
pub(crate) struct Wait {
    /// The outcome, once the callback has run.
    pub(crate) status: Option<c_int>,
    pub(crate) waker: Option<Waker>,
    /// The future is gone: the callback releases a grant that won and frees
    /// the cell.
    pub(crate) abandoned: bool,
    /// A dropping future waits on `done` for the callback. (Signalling the
    /// condition variable costs a system call, so only then.)
    pub(crate) watched: bool,
    pub(crate) pool: *mut sys::cq_pool,
    /// Keeps the request's storage alive while the attempt waits, even if
    /// the future is forgotten (`mem::forget`) and the request dropped.
    pub(crate) req: Option<Arc<ReqStorage>>,
}

pub(crate) struct GrantCell {
    raw: UnsafeCell<sys::cq_grant>,
    pub(crate) wait: Mutex<Wait>,
    pub(crate) done: Condvar,
}

/// An owning pointer to a cell, freed only through `put` (or by whoever it
/// was handed to): it has no `Drop`, so an abandoned cell stays alive for
/// its callback.
pub(crate) struct CellPtr(NonNull<GrantCell>);

/// Idle cells kept per thread; enough for a thread that holds a few grants
/// at once.
const SPARE_MAX: usize = 16;

struct Spare(Vec<CellPtr>);

impl Drop for Spare {
    fn drop(&mut self) {
        for c in self.0.drain(..) {
            c.free();
        }
    }
}

thread_local! {
    static SPARE: RefCell<Spare> = const { RefCell::new(Spare(Vec::new())) };
    /// How deep this thread is in the library's grant callbacks.
    static IN_CALLBACK: Cell<u32> = const { Cell::new(0) };
}

impl CellPtr {
    /// An idle cell: a spare one of this thread, or a new one.
    #[inline]
    pub(crate) fn take() -> CellPtr {
        let spare =
            SPARE.try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.0.pop())).ok().flatten();
        match spare {
            Some(c) => c,
            None => CellPtr::new(),
        }
    }

    #[cold]
    fn new() -> CellPtr {
        let cell = Box::new(GrantCell {
            // A zeroed cq_grant is an idle one (the header allows zeroing in
            // place of cq_grant_init()).
            raw: UnsafeCell::new(unsafe { std::mem::zeroed() }),
            wait: Mutex::new(Wait {
                status: None,
                waker: None,
                abandoned: false,
                watched: false,
                pool: std::ptr::null_mut(),
                req: None,
            }),
            done: Condvar::new(),
        });
        CellPtr(NonNull::from(Box::leak(cell)))
    }

    /// Give an idle cell back for reuse. Only idle cells come back here;
    /// were a held one ever reused by mistake, the library would refuse the
    /// attempt (`CQ_ESTATE`: a grant must be idle to start one).
    #[inline]
    pub(crate) fn put(self) {
        debug_assert_eq!(unsafe { sys::cq_grant_is_held(self.raw()) }, 0);
        let mut slot = Some(self);
        let _ = SPARE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.0.len() < SPARE_MAX {
                    s.0.extend(slot.take());
                }
            }
        });
        // The list is full, or gone because the thread is exiting.
        if let Some(c) = slot {
            c.free();
        }
    }

    fn free(self) {
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }

    #[inline]
    pub(crate) fn raw(&self) -> *mut sys::cq_grant {
        unsafe { self.0.as_ref() }.raw.get()
    }

    #[inline]
    pub(crate) fn cell(&self) -> &GrantCell {
        unsafe { self.0.as_ref() }
    }

    pub(crate) fn as_data(&self) -> *mut std::os::raw::c_void {
        self.0.as_ptr() as *mut _
    }

    /// The cell whose address a grant callback got back as `data`.
    pub(crate) unsafe fn from_data(p: *mut std::os::raw::c_void) -> CellPtr {
        CellPtr(NonNull::new_unchecked(p as *mut GrantCell))
    }
}

pub(crate) fn lock(m: &Mutex<Wait>) -> MutexGuard<'_, Wait> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Marks this thread as inside a grant callback for the scope's life.
pub(crate) struct CallbackScope;

impl CallbackScope {
    pub(crate) fn enter() -> CallbackScope {
        let _ = IN_CALLBACK.try_with(|d| d.set(d.get() + 1));
        CallbackScope
    }
}

impl Drop for CallbackScope {
    fn drop(&mut self) {
        let _ = IN_CALLBACK.try_with(|d| d.set(d.get() - 1));
    }
}

/// Whether this thread runs inside one of the library's grant callbacks.
/// Then the library queues further callbacks behind the current one, on
/// this thread, so nothing here may wait for them.
pub(crate) fn in_callback() -> bool {
    IN_CALLBACK.try_with(|d| d.get() > 0).unwrap_or(false)
}

/// Units held from a pool: every resource of the request, granted at once.
///
/// Dropping the guard releases them all, exactly once, whatever the path
/// (a return, `?`, a panic unwinding through the holder). [`release`]
/// does the same and reports the library's answer. The guard may move and
/// be sent to another thread (a worker releasing what a dispatcher
/// acquired); the C grant it owns stays where it is. It borrows its pool,
/// so it cannot go where `'static` is asked (`thread::spawn`, a spawned
/// task): an [`OwnedGrant`] can.
///
/// [`release`]: Grant::release
pub struct Grant<'p> {
    pool: &'p Pool,
    cell: Option<CellPtr>,
}

// The library's grant calls are thread-safe, and a guard has one owner:
// releasing from another thread is allowed ("any thread may release").
unsafe impl Send for Grant<'_> {}
unsafe impl Sync for Grant<'_> {}

impl<'p> Grant<'p> {
    #[inline]
    pub(crate) fn new(pool: &'p Pool, cell: CellPtr) -> Grant<'p> {
        Grant { pool, cell: Some(cell) }
    }

    /// The cell, out of a guard that then releases nothing.
    #[inline]
    fn into_cell(mut self) -> CellPtr {
        self.cell.take().expect("grant cell")
    }

    #[inline]
    fn cell(&self) -> &CellPtr {
        // Only `release`, `into_cell` and `drop` take the cell; each ends
        // the guard.
        self.cell.as_ref().expect("grant cell")
    }

    /// The pool the units came from.
    pub fn pool(&self) -> &'p Pool {
        self.pool
    }

    /// The C grant, for calls of `cronoq-sys` that this crate does not
    /// wrap. It stays owned by the guard: do not release it through it.
    pub fn as_ptr(&self) -> *const sys::cq_grant {
        self.cell().raw()
    }

    /// Release now and report the outcome: `Ok` when the units went back.
    pub fn release(mut self) -> Result<(), Error> {
        let cell = self.cell.take().expect("grant cell");
        let rc = unsafe { sys::cq_grant_release(self.pool.as_ptr(), cell.raw()) };
        cell.put();
        crate::error::check(rc)
    }

    /// Give back `amount` units of budget `resource` early; the guard keeps
    /// the rest (`cq_grant_release_part`). Returns `Error::NotFound` when
    /// the grant holds no such resource, `Error::Range` for an amount not in
    /// 1..=held.
    pub fn release_part(&mut self, resource: &str, amount: i64) -> Result<(), Error> {
        let name = Name::new(resource)?;
        crate::error::check(unsafe {
            sys::cq_grant_release_part(self.pool.as_ptr(), self.cell().raw(), name.ptr(), amount)
        })
    }

    /// Give back part of a device grant early: `milli` thousandths on
    /// device `index` of a fraction grant, or a whole device
    /// (`milli` = 1000) of a whole-device grant (`cq_grant_release_device`).
    pub fn release_device(&mut self, resource: &str, index: u32, milli: i64) -> Result<(), Error> {
        let name = Name::new(resource)?;
        crate::error::check(unsafe {
            sys::cq_grant_release_device(
                self.pool.as_ptr(),
                self.cell().raw(),
                name.ptr(),
                index,
                milli,
            )
        })
    }

    /// Units of `resource` held now (thousandths of a device for a device
    /// pool, 1 for a class); 0 when none.
    pub fn held(&self, resource: &str) -> i64 {
        match Name::new(resource) {
            Ok(name) => unsafe { sys::cq_grant_held(self.cell().raw(), name.ptr()) },
            Err(_) => 0,
        }
    }

    /// The indices of the devices held on pool `resource` (`None`: the
    /// first device pool of the request), lowest first.
    pub fn devices(&self, resource: Option<&str>) -> Vec<u32> {
        let name = match optional_name(resource) {
            Ok(n) => n,
            Err(_) => return Vec::new(),
        };
        let raw = self.cell().raw();
        let n = unsafe { sys::cq_grant_devices(raw, name_ptr(&name), std::ptr::null_mut(), 0) };
        let mut v = vec![0u32; n];
        let got = unsafe { sys::cq_grant_devices(raw, name_ptr(&name), v.as_mut_ptr(), n) };
        v.truncate(got.min(n));
        v
    }

    /// The value of `CUDA_VISIBLE_DEVICES` for the devices held on pool
    /// `resource` (`None`: the first device pool): their ids, comma
    /// separated. `Error::NotFound` when no devices are held there.
    pub fn cuda_visible(&self, resource: Option<&str>) -> Result<String, Error> {
        let name = optional_name(resource)?;
        let raw = self.cell().raw();
        // Each id is at most 95 bytes; grow until the whole list fits.
        let mut len = 256usize;
        loop {
            let mut buf = vec![0u8; len];
            let rc = unsafe {
                sys::cq_grant_cuda_visible(raw, name_ptr(&name), buf.as_mut_ptr() as *mut _, len)
            };
            if rc == sys::CQ_ERANGE && len < (sys::CQ_DEVICES_MAX * (sys::CQ_DEVICE_ID_MAX + 1)) {
                len *= 4;
                continue;
            }
            crate::error::check(rc)?;
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            buf.truncate(end);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
    }

    /// The fencing token of the grant (`cq_fleet_grant_fence`): a number
    /// that grows with every grant of a fleet pool's namespace, for a
    /// downstream system to refuse a holder older than the last one it
    /// saw. `None` on an in-process pool, which issues none (and on a fleet
    /// grant whose lease was lost: it holds nothing any more).
    pub fn fencing_token(&self) -> Option<u64> {
        if !self.pool.is_fleet() {
            return None;
        }
        crate::fleet::grant_fence(self.as_ptr())
    }
}

impl Drop for Grant<'_> {
    fn drop(&mut self) {
        if let Some(cell) = self.cell.take() {
            let rc = unsafe { sys::cq_grant_release(self.pool.as_ptr(), cell.raw()) };
            debug_assert_eq!(rc, 0, "release of a held grant");
            cell.put();
        }
    }
}

impl fmt::Debug for Grant<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant").field("grant", &self.as_ptr()).finish()
    }
}

/// A [`Grant`] that owns a reference to its pool (an `Arc<Pool>`) instead
/// of borrowing it: `Send + Sync + 'static`, so it can be moved into a
/// spawned thread or an async task (`thread::spawn`, `tokio::spawn`),
/// which a `Grant<'p>` cannot. Made by [`Pool::acquire_owned`],
/// [`Pool::try_acquire_owned`] and [`Pool::acquire_owned_async`]; like
/// tokio's `OwnedSemaphorePermit`.
///
/// It is a `Grant` inside, so everything behaves alike: dropping it
/// releases every unit exactly once, also while a panic unwinds, and the
/// accessors are the same. The pool lives at least as long as the guard.
pub struct OwnedGrant {
    // The guard borrows the pool that `pool` keeps alive. Fields drop in
    // order, so the release runs before the reference count goes down;
    // the borrow never leaves this struct (`pool()` returns the `Arc`).
    grant: Grant<'static>,
    pool: Arc<Pool>,
}

impl OwnedGrant {
    /// `grant`, whose pool is `pool`, made owning.
    pub(crate) fn new(pool: Arc<Pool>, grant: Grant<'_>) -> OwnedGrant {
        debug_assert!(std::ptr::eq(grant.pool, &*pool), "a grant of another pool");
        let cell = grant.into_cell();
        // Valid while `pool` is: see the fields.
        let shared: &'static Pool = unsafe { &*Arc::as_ptr(&pool) };
        OwnedGrant { grant: Grant::new(shared, cell), pool }
    }

    /// The pool the units came from.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// See [`Grant::as_ptr`].
    pub fn as_ptr(&self) -> *const sys::cq_grant {
        self.grant.as_ptr()
    }

    /// Release now and report the outcome; see [`Grant::release`].
    pub fn release(self) -> Result<(), Error> {
        let OwnedGrant { grant, pool } = self;
        let rc = grant.release();
        drop(pool);
        rc
    }

    /// See [`Grant::release_part`].
    pub fn release_part(&mut self, resource: &str, amount: i64) -> Result<(), Error> {
        self.grant.release_part(resource, amount)
    }

    /// See [`Grant::release_device`].
    pub fn release_device(&mut self, resource: &str, index: u32, milli: i64) -> Result<(), Error> {
        self.grant.release_device(resource, index, milli)
    }

    /// See [`Grant::held`].
    pub fn held(&self, resource: &str) -> i64 {
        self.grant.held(resource)
    }

    /// See [`Grant::devices`].
    pub fn devices(&self, resource: Option<&str>) -> Vec<u32> {
        self.grant.devices(resource)
    }

    /// See [`Grant::cuda_visible`].
    pub fn cuda_visible(&self, resource: Option<&str>) -> Result<String, Error> {
        self.grant.cuda_visible(resource)
    }

    /// See [`Grant::fencing_token`].
    pub fn fencing_token(&self) -> Option<u64> {
        self.grant.fencing_token()
    }
}

impl fmt::Debug for OwnedGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedGrant").field("grant", &self.as_ptr()).finish()
    }
}
