//! The asynchronous acquire: a `Future` over `cq_grant_submit()`, for any
//! executor (it needs no runtime, only the waker it is polled with).
//!
//! The first poll submits the attempt; the library's callback records the
//! outcome in the grant's cell and wakes the task. The callback may run on
//! any library thread, or inside the submit call itself.
//!
//! Dropping the future before it has returned its outcome cancels the
//! attempt, and must handle the race with the callback:
//! - the cancel wins: the callback runs with `CQ_ECANCELED` on this thread
//!   before `cq_grant_cancel()` returns, and nothing is held;
//! - the grant won (`cq_grant_cancel()` says `CQ_ESTATE`): the outcome is
//!   decided, and its callback is running or about to, on the thread that
//!   decided it. The drop waits for the callback on the cell's condition
//!   variable, then releases a grant that won. When the drop returns,
//!   nothing is held.
//! - Except inside a grant callback of this thread (a waker that drops
//!   futures): the library then queues further callbacks on this very
//!   thread, behind the current one, so waiting would never end. The drop
//!   marks the cell abandoned instead, and the callback, when it runs,
//!   releases a grant that won and frees the cell.
//!
//! The cell's mutex orders the two sides: whoever comes second acts.
use crate::grant::{in_callback, lock, CallbackScope, CellPtr};
use crate::{Deadline, Error, Grant, OwnedGrant, Pool, Request};
use cronoq_sys as sys;
use std::fmt;
use std::future::Future;
use std::os::raw::c_int;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stage {
    /// Not submitted yet (not polled).
    Idle,
    /// Submitted; the callback has not been seen to run.
    Waiting,
    /// The outcome was returned.
    Done,
}

/// The future of [`Pool::acquire_async`]: resolves to the grant, or to the
/// attempt's error (`TimedOut`, `Closed`, `Never`, ...).
///
/// Nothing happens until it is first polled. Dropping it cancels a waiting
/// attempt, and releases a grant that won the race with the cancel.
#[must_use = "a future does nothing unless polled; dropping it cancels the attempt"]
pub struct Acquire<'a> {
    pool: &'a Pool,
    req: &'a Request<'a>,
    deadline: Deadline,
    cell: Option<CellPtr>,
    stage: Stage,
}

// The cell is owned by the future until the outcome; the callback reaches
// it only through the cell's mutex.
unsafe impl Send for Acquire<'_> {}
unsafe impl Sync for Acquire<'_> {}

impl<'a> Acquire<'a> {
    pub(crate) fn new(pool: &'a Pool, req: &'a Request<'a>, deadline: Deadline) -> Acquire<'a> {
        Acquire { pool, req, deadline, cell: None, stage: Stage::Idle }
    }

    fn submit(&mut self, cx: &Context<'_>) -> Result<(), Error> {
        let cell = CellPtr::take();
        {
            let mut w = lock(&cell.cell().wait);
            w.status = None;
            w.waker = Some(cx.waker().clone());
            w.abandoned = false;
            w.watched = false;
            w.pool = self.pool.as_ptr();
            w.req = Some(self.req.storage().clone());
        }
        let raw = cell.raw();
        unsafe { (*raw).data = cell.as_data() };
        // No lock of ours is held: the callback may run inside this call.
        let rc = unsafe {
            sys::cq_grant_submit(
                self.pool.as_ptr(),
                raw,
                self.req.as_ptr(),
                self.deadline.as_ms(),
                Some(on_outcome),
            )
        };
        if rc < 0 {
            // Refused: the callback will never run.
            {
                let mut w = lock(&cell.cell().wait);
                w.waker = None;
                w.req = None;
            }
            cell.put();
            return Err(Error::from_code(rc));
        }
        self.cell = Some(cell);
        self.stage = Stage::Waiting;
        Ok(())
    }
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<Grant<'a>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this.stage {
            Stage::Done => panic!("cronoq::Acquire polled after it completed"),
            Stage::Idle => {
                if let Err(e) = this.submit(cx) {
                    this.stage = Stage::Done;
                    return Poll::Ready(Err(e));
                }
            }
            Stage::Waiting => {}
        }
        let status = {
            let cell = this.cell.as_ref().expect("waiting cell");
            let mut w = lock(&cell.cell().wait);
            match w.status {
                Some(s) => s,
                None => {
                    let same = w.waker.as_ref().map_or(false, |k| k.will_wake(cx.waker()));
                    if !same {
                        w.waker = Some(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
            }
        };
        this.stage = Stage::Done;
        let cell = this.cell.take().expect("waiting cell");
        if status == 0 {
            Poll::Ready(Ok(Grant::new(this.pool, cell)))
        } else {
            cell.put();
            Poll::Ready(Err(Error::from_code(status)))
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let cell = match self.cell.take() {
            Some(c) => c,
            None => return,
        };
        debug_assert_eq!(self.stage, Stage::Waiting);
        // 0: cancelled; CQ_ESTATE: the outcome was decided first. Either
        // way the callback runs (or ran) exactly once; look at what it left.
        let _ = unsafe { sys::cq_grant_cancel(self.pool.as_ptr(), cell.raw()) };
        let mut w = lock(&cell.cell().wait);
        if w.status.is_none() {
            if in_callback() {
                // Its callback is queued behind the one this thread runs.
                w.abandoned = true;
                return;
            }
            w.watched = true;
            while w.status.is_none() {
                w = cell.cell().done.wait(w).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
        let won = w.status == Some(0);
        drop(w);
        if won {
            let rc = unsafe { sys::cq_grant_release(self.pool.as_ptr(), cell.raw()) };
            debug_assert_eq!(rc, 0);
        }
        cell.put();
    }
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("deadline", &self.deadline)
            .field("stage", &self.stage)
            .finish()
    }
}

/// The future of [`Pool::acquire_owned_async`]: an [`Acquire`] that
/// resolves to an [`OwnedGrant`]. It borrows the `Arc` and the request
/// until it resolves, and behaves as `Acquire` in every other way:
/// nothing happens until it is first polled, and dropping it cancels.
#[must_use = "a future does nothing unless polled; dropping it cancels the attempt"]
pub struct AcquireOwned<'a> {
    inner: Acquire<'a>,
    pool: &'a Arc<Pool>,
}

impl<'a> AcquireOwned<'a> {
    pub(crate) fn new(
        pool: &'a Arc<Pool>,
        req: &'a Request<'a>,
        deadline: Deadline,
    ) -> AcquireOwned<'a> {
        AcquireOwned { inner: Acquire::new(pool, req, deadline), pool }
    }
}

impl Future for AcquireOwned<'_> {
    type Output = Result<OwnedGrant, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll(cx) {
            Poll::Ready(Ok(grant)) => Poll::Ready(Ok(OwnedGrant::new(this.pool.clone(), grant))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl fmt::Debug for AcquireOwned<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AcquireOwned").field(&self.inner).finish()
    }
}

/// The callback of every asynchronous attempt. A panic must not unwind
/// into C: a waker that panics here aborts the process.
unsafe extern "C" fn on_outcome(grant: *mut sys::cq_grant, status: c_int) {
    let _scope = CallbackScope::enter();
    let cell = CellPtr::from_data((*grant).data);
    if panic::catch_unwind(AssertUnwindSafe(|| outcome(cell, status))).is_err() {
        eprintln!("cronoq: a waker panicked inside a grant callback; aborting");
        std::process::abort();
    }
}

fn outcome(cell: CellPtr, status: c_int) {
    let mut w = lock(&cell.cell().wait);
    w.status = Some(status);
    let req = w.req.take();
    if w.abandoned {
        // The future is gone and left the cell to us.
        let pool = w.pool;
        drop(w);
        drop(req);
        if status == 0 {
            unsafe { sys::cq_grant_release(pool, cell.raw()) };
        }
        cell.put();
        return;
    }
    let waker = w.waker.take();
    if w.watched {
        cell.cell().done.notify_one();
    }
    drop(w);
    // From here on the future may have freed or reused the cell: touch
    // only what was taken out of it.
    drop(req);
    if let Some(waker) = waker {
        waker.wake();
    }
}
