//! Requests: a set of (resource, amount) pairs, built once and reused for
//! every attempt, by any number of threads at once.
//!
//! The `cq_req` lives on the heap, shared through an `Arc`: moving the
//! `Request` moves a pointer, never the storage. Attempts borrow the
//! request, so while one waits the borrow checker refuses to change or drop
//! it. An asynchronous attempt also holds a reference to the storage until
//! its outcome is known, so that even a future that is forgotten
//! (`mem::forget`, which ends the borrow) leaves the request's storage alive
//! for the waiter that still reads it; changes are refused with
//! `Error::InUse` until then.
use crate::text::{borrowed, c_string, Name};
use crate::{Error, Pool};
use cronoq_sys as sys;
use std::cell::UnsafeCell;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct ReqStorage(UnsafeCell<sys::cq_req>);

// Many threads may acquire with one built request (the header's rule);
// changes take `&mut Request` and a storage nobody else holds.
unsafe impl Send for ReqStorage {}
unsafe impl Sync for ReqStorage {}

/// A request on one pool: up to 16 resources and an amount of each,
/// granted all at once or not at all. Build it once, at startup, and
/// reuse it for every attempt.
///
/// Each change checks the resource and the amount; on failure the request
/// is unchanged and [`error`](Request::error) says why, as
/// `cq_req_error()` does.
pub struct Request<'p> {
    pool: &'p Pool,
    storage: Arc<ReqStorage>,
}

impl<'p> Request<'p> {
    /// An empty request on `pool` (always granted at once; holds nothing).
    pub fn new(pool: &'p Pool) -> Request<'p> {
        let storage = Arc::new(ReqStorage(UnsafeCell::new(unsafe { std::mem::zeroed() })));
        let rc = unsafe { sys::cq_req_init(storage.0.get(), pool.as_ptr()) };
        assert_eq!(rc, 0, "cq_req_init on a live pool");
        Request { pool, storage }
    }

    pub(crate) fn storage(&self) -> &Arc<ReqStorage> {
        &self.storage
    }

    /// The C request, for calls of `cronoq-sys` that this crate does not
    /// wrap. It must not be changed through this pointer.
    #[inline]
    pub fn as_ptr(&self) -> *const sys::cq_req {
        self.storage.0.get()
    }

    /// The pool the request was built on.
    pub fn pool(&self) -> &'p Pool {
        self.pool
    }

    fn change(
        &mut self,
        f: impl FnOnce(*mut sys::cq_req) -> std::os::raw::c_int,
    ) -> Result<&mut Self, Error> {
        // Shared only by an asynchronous attempt that still waits.
        let raw = match Arc::get_mut(&mut self.storage) {
            Some(s) => s.0.get(),
            None => return Err(Error::InUse),
        };
        crate::error::check(f(raw))?;
        Ok(self)
    }

    /// Add `amount` units of budget `resource`.
    pub fn add(&mut self, resource: &str, amount: i64) -> Result<&mut Self, Error> {
        let name = Name::new(resource)?;
        self.change(|r| unsafe { sys::cq_req_add(r, name.ptr(), amount) })
    }

    /// Add a fraction of one device of pool `resource`: `milli`
    /// thousandths, 1..=1000, placed best fit on one device.
    pub fn add_fraction(&mut self, resource: &str, milli: i64) -> Result<&mut Self, Error> {
        let name = Name::new(resource)?;
        self.change(|r| unsafe { sys::cq_req_add_fraction(r, name.ptr(), milli) })
    }

    /// Add `count` whole devices of pool `resource`, all or nothing.
    pub fn add_devices(&mut self, resource: &str, count: i64) -> Result<&mut Self, Error> {
        let name = Name::new(resource)?;
        self.change(|r| unsafe { sys::cq_req_add_devices(r, name.ptr(), count) })
    }

    /// Add an amount given as text: units of a budget ("10"), a fraction of
    /// a device ("0.5") or whole devices ("2").
    pub fn add_str(&mut self, resource: &str, amount: &str) -> Result<&mut Self, Error> {
        let name = Name::new(resource)?;
        let amount = c_string(amount)?;
        self.change(|r| unsafe { sys::cq_req_add_str(r, name.ptr(), amount.as_ptr()) })
    }

    /// Give the request a class: each grant counts as one of its workers.
    pub fn set_class(&mut self, class: &str) -> Result<&mut Self, Error> {
        let name = Name::new(class)?;
        self.change(|r| unsafe { sys::cq_req_set_class(r, name.ptr()) })
    }

    /// Declare a hold limit (rounded up to a millisecond): every grant is
    /// released within it. `None` removes it. See docs/POLICY.md, "Backfill".
    pub fn set_hold_limit(&mut self, limit: Option<Duration>) -> Result<&mut Self, Error> {
        let ms = match limit {
            None => 0,
            Some(d) => crate::ceil_ms(d).max(1),
        };
        self.change(|r| unsafe { sys::cq_req_set_hold_limit(r, ms) })
    }

    /// Add the items of a request spec: `gpu=0.5,warehouse-db=1,class=predict`.
    /// All or nothing; on failure [`error`](Request::error) points at the
    /// offending character.
    pub fn parse(&mut self, spec: &str) -> Result<&mut Self, Error> {
        let spec = c_string(spec)?;
        self.change(|r| unsafe { sys::cq_req_parse(r, spec.as_ptr()) })
    }

    /// How many resources the request names.
    pub fn len(&self) -> usize {
        unsafe { sys::cq_req_count(self.as_ptr()) }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Why the last change failed, such as `no resource "warehouse"`; ""
    /// when none did.
    pub fn error(&self) -> &str {
        unsafe { borrowed(sys::cq_req_error(self.as_ptr())) }
    }
}

impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request").field("resources", &self.len()).finish()
    }
}
