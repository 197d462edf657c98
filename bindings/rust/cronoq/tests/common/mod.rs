//! Helpers of the integration tests: a tiny executor with a hang guard,
//! wakers that count or run code, and pool snapshots.
#![allow(dead_code)]
use cronoq::Pool;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// Every wait of a test ends by this long: a hang guard, not a timing
/// check.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Run `fut` to completion on this thread, parking between polls.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = Box::pin(fut);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let start = Instant::now();
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        let left = HANG_GUARD
            .checked_sub(start.elapsed())
            .expect("hang guard: the future never completed");
        thread::park_timeout(left);
    }
}

/// A waker that counts how often it was woken.
pub struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Counter {
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

pub fn counting_waker() -> (Waker, Arc<Counter>) {
    let c = Arc::new(Counter(AtomicUsize::new(0)));
    (Waker::from(c.clone()), c)
}

/// A waker that runs `f` (once) when woken: how a test puts code inside the
/// library's grant callback.
pub struct OnWake(Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl Wake for OnWake {
    fn wake(self: Arc<Self>) {
        let f = self.0.lock().unwrap().take();
        if let Some(f) = f {
            f();
        }
    }
}

pub fn waker_running(f: impl FnOnce() + Send + 'static) -> Waker {
    Waker::from(Arc::new(OnWake(Mutex::new(Some(Box::new(f))))))
}

/// Poll once with `waker`.
pub fn poll_with<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    let mut cx = Context::from_waker(waker);
    std::pin::Pin::new(fut).poll(&mut cx)
}

pub fn in_use(pool: &Pool, name: &str) -> i64 {
    pool.resource_stats(name).expect("resource").in_use
}

/// Wait (bounded) until `cond` holds.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG_GUARD, "hang guard: {}", what);
        thread::sleep(Duration::from_millis(1));
    }
}

/// A pool from a resource spec.
pub fn pool(spec: &str) -> Pool {
    let p = Pool::new().expect("pool");
    p.add_spec(spec).expect("spec");
    p
}

/// Aborts the test process with a message if the guard lives longer than
/// `HANG_GUARD`: a bound on waits that happen inside the library or the
/// binding (a drop waiting for a callback), which a test cannot time out.
pub struct Watchdog(Option<std::sync::mpsc::Sender<()>>);

pub fn watchdog(what: &'static str) -> Watchdog {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(HANG_GUARD) {
            eprintln!("hang guard: {} did not finish in {:?}", what, HANG_GUARD);
            std::process::abort();
        }
    });
    Watchdog(Some(tx))
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A pool with one unit of `db`, held, and an attempt for it polled once
/// and waiting: where most tests of the asynchronous acquire start.
pub struct Waiter<'a> {
    pub pool: &'a Pool,
    pub req: &'a cronoq::Request<'a>,
    pub held: cronoq::Grant<'a>,
    pub fut: cronoq::Acquire<'a>,
    pub waker: Waker,
    pub woken: Arc<Counter>,
}

pub fn with_waiter(test: impl FnOnce(Waiter<'_>)) {
    let pool = pool("db=1");
    let req = pool.request_spec("db=1").unwrap();
    let held = pool.try_acquire(&req).unwrap();
    let (waker, woken) = counting_waker();
    let mut fut = pool.acquire_async(&req, cronoq::Deadline::NEVER);
    assert!(poll_with(&mut fut, &waker).is_pending());
    assert_eq!(pool.stats().waiting, 1);
    test(Waiter { pool: &pool, req: &req, held, fut, waker, woken });
}
