//! What the binding adds to an uncontended try + release of a one-budget
//! request, against the same calls made directly through `cronoq-sys` (the
//! C figure), measured in the same run.
//!
//!     cargo run --release --example bench [-- --quick]
//!
//! Each round times `iters` pairs of each kind, in alternating order; the
//! figures are medians over the rounds. Every try must succeed and the
//! budget must be free at the end, or the bench fails.
use cronoq::sys;
use cronoq::{Deadline, Pool};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

unsafe extern "C" fn granted(grant: *mut sys::cq_grant, status: std::os::raw::c_int) {
    assert_eq!(status, 0);
    *((*grant).data as *mut bool) = true;
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, iters) = if quick { (5, 200_000) } else { (21, 2_000_000) };

    let pool = Pool::new().expect("pool");
    pool.add_budget("db", 1).expect("budget");
    let req = pool.request_spec("db=1").expect("request");
    let waker = Waker::from(Arc::new(Noop));

    // The C figure: caller-owned grant storage, as a C program keeps it.
    let mut raw: Box<sys::cq_grant> = Box::new(unsafe { std::mem::zeroed() });
    let c_pair = |n: u32| {
        let t = Instant::now();
        for _ in 0..n {
            let rc = unsafe { sys::cq_grant_try(pool.as_ptr(), &mut *raw, req.as_ptr()) };
            assert_eq!(rc, 0);
            let rc = unsafe { sys::cq_grant_release(pool.as_ptr(), &mut *raw) };
            assert_eq!(rc, 0);
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let rust_pair = |n: u32| {
        let t = Instant::now();
        for _ in 0..n {
            drop(pool.try_acquire(&req).expect("try"));
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let async_pair = |n: u32| {
        let mut cx = Context::from_waker(&waker);
        let t = Instant::now();
        for _ in 0..n {
            let mut fut = pool.acquire_async(&req, Deadline::NEVER);
            match Pin::new(&mut fut).poll(&mut cx) {
                Poll::Ready(Ok(g)) => drop(g),
                _ => panic!("uncontended async acquire not ready at once"),
            }
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    // The C figure for the callback path: submit, a callback that notes the
    // grant, release.
    let mut cb_raw: Box<sys::cq_grant> = Box::new(unsafe { std::mem::zeroed() });
    let mut seen = false;
    let c_submit = |n: u32| {
        let t = Instant::now();
        for _ in 0..n {
            cb_raw.data = &mut seen as *mut bool as *mut _;
            let rc = unsafe {
                sys::cq_grant_submit(
                    pool.as_ptr(),
                    &mut *cb_raw,
                    req.as_ptr(),
                    sys::CQ_NEVER,
                    Some(granted),
                )
            };
            assert!(rc == 0 && seen);
            seen = false;
            let rc = unsafe { sys::cq_grant_release(pool.as_ptr(), &mut *cb_raw) };
            assert_eq!(rc, 0);
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let mut c = c_pair;
    let mut cs_submit = c_submit;
    let rust = rust_pair;
    let asy = async_pair;

    // Warm up: caches, the grant cell list, the CPU's clock.
    c(iters / 4);
    rust(iters / 4);
    asy(iters / 16);
    cs_submit(iters / 16);
    let (mut cs, mut rs, mut asy_s, mut sub_s) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            cs.push(c(iters));
            rs.push(rust(iters));
        } else {
            rs.push(rust(iters));
            cs.push(c(iters));
        }
        sub_s.push(cs_submit(iters / 8));
        asy_s.push(asy(iters / 8));
    }
    assert_eq!(pool.resource_stats("db").unwrap().in_use, 0);
    let (cm, rm) = (median(&mut cs), median(&mut rs));
    let (sm, am) = (median(&mut sub_s), median(&mut asy_s));
    println!("uncontended try + release, one budget, median of {} rounds of {}:", rounds, iters);
    println!("  C API through cronoq-sys      {:7.1} ns", cm);
    println!(
        "  cronoq: try_acquire + drop    {:7.1} ns   (+{:.1} ns, {:.2}x; goal <= +50 ns)",
        rm,
        rm - cm,
        rm / cm
    );
    println!("the callback path, granted at once, for reference:");
    println!("  C API: submit + release       {:7.1} ns", sm);
    println!("  cronoq: acquire_async, 1 poll {:7.1} ns   (+{:.1} ns)", am, am - sm);
}
