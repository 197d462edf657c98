//! Fleet pools from Rust: `Pool::connect`, two pools of one namespace
//! sharing its budgets, another host's device pool in a request, fencing
//! tokens, the errors of a bad URL, an unreachable server and a request
//! that never fits, and a dropped asynchronous acquire.
//!
//! Each test starts a redis-server of its own (a temporary directory, a
//! Unix socket, no TCP port, nothing on disk) and stops it by its PID when
//! the test ends. Where redis-server or the fleet library is missing the
//! tests say so and pass, unless CRONOQ_REQUIRE_RUST=1 (CI), where that
//! fails them.
mod common;

use common::*;
use cronoq::{Deadline, Error, FleetOptions, Pool};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill(); // by its PID
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn skip(why: &str) -> Option<Server> {
    assert!(std::env::var_os("CRONOQ_REQUIRE_RUST").is_none(), "{} (CRONOQ_REQUIRE_RUST=1)", why);
    eprintln!("SKIP: {}", why);
    None
}

fn ping(sock: &PathBuf) -> bool {
    let mut s = match UnixStream::connect(sock) {
        Ok(s) => s,
        Err(_) => return false,
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 5];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG"
}

/// A redis-server of this test's own, or `None` (with a message) where it
/// cannot be run.
fn server() -> Option<Server> {
    if !cronoq::sys::FLEET_LINKED {
        return skip("cronoq-sys was built without libcronoq_fleet: no fleet pools");
    }
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "cronoq-rs-redis-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let sock = dir.join("redis.sock");
    let child = Command::new("redis-server")
        .args(["--port", "0", "--unixsocket"])
        .arg(&sock)
        .args(["--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"])
        .args(["--loglevel", "warning", "--dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return skip(&format!(
                "redis-server cannot be started ({}): apt-get install redis-server",
                e
            ));
        }
    };
    let mut s = Server { child, dir, url: format!("unix://{}", sock.display()) };
    let start = Instant::now();
    while !ping(&sock) {
        assert!(s.child.try_wait().unwrap().is_none(), "redis-server exited at start");
        assert!(start.elapsed() < HANG_GUARD, "hang guard: redis-server never answered PING");
        thread::sleep(Duration::from_millis(10));
    }
    Some(s)
}

/// The test's server, or the end of the test where there is none.
macro_rules! server_or_skip {
    () => {
        match server() {
            Some(s) => s,
            None => return,
        }
    };
}

fn connect(s: &Server, ns: &str, host: &str) -> Pool {
    Pool::connect(&s.url, ns, FleetOptions::new().host(host)).expect("connect")
}

#[test]
fn async_releases_come_before_the_pools_next_call() {
    let s = server_or_skip!();
    let opts = FleetOptions::new().host("hostA").audit(true).async_release(true);
    let a = Pool::connect(&s.url, "async-release", opts).expect("connect");
    a.add_spec("licence=1").unwrap();
    let r = a.request_spec("licence=1").unwrap();
    for _ in 0..50 {
        drop(a.try_acquire(&r).unwrap());
        // Not waited for, but on the server before this pool's next call.
        assert_eq!(in_use(&a, "licence"), 0);
    }
}

#[test]
fn two_pools_of_a_namespace_share_its_budgets() {
    let s = server_or_skip!();
    let a = connect(&s, "shared", "hostA");
    let b = connect(&s, "shared", "hostB");
    assert!(a.is_fleet() && !Pool::new().unwrap().is_fleet());
    assert_eq!(a.host().as_deref(), Some("hostA"));
    // Both declare the same licence; the second declaration matches.
    a.add_spec("licence=2").unwrap();
    b.add_spec("licence=2").unwrap();
    let (ra, rb) = (a.request_spec("licence=1").unwrap(), b.request_spec("licence=1").unwrap());
    let first = a.try_acquire(&ra).unwrap();
    let second = b.try_acquire(&rb).unwrap();
    assert_eq!(b.try_acquire(&rb).unwrap_err(), Error::Busy);
    assert_eq!(in_use(&a, "licence"), 2);
    // A blocked waiter on b is granted by a release on a.
    thread::scope(|sc| {
        let waiter = sc.spawn(|| b.acquire(&rb, Deadline::after(HANG_GUARD)).map(drop));
        wait_until("b's waiter to park", || a.stats().waiting == 1 || waiter.is_finished());
        drop(first);
        waiter.join().unwrap().unwrap();
    });
    drop(second);
    assert_eq!((in_use(&a, "licence"), in_use(&b, "licence")), (0, 0));
    assert_eq!(a.add_budget("licence", 3).unwrap_err(), Error::Exists);
    let e = b.add_spec("licence=3").unwrap_err();
    assert_eq!(e.error, Error::Exists);
    assert!(e.message.contains("capacity 2"), "{}", e.message);
}

#[test]
fn a_request_names_another_hosts_device_pool() {
    let s = server_or_skip!();
    let a = connect(&s, "gpus", "hostA");
    let b = connect(&s, "gpus", "hostB");
    a.add_spec("gpu=1,licence=2").unwrap();
    b.add_spec("gpu=1,licence=2").unwrap();
    let req = a.request_spec("gpu@hostB=0.5,licence=1").unwrap();
    let g = a.acquire(&req, Deadline::after(HANG_GUARD)).unwrap();
    assert_eq!((g.held("gpu@hostB"), g.held("gpu")), (500, 0));
    assert_eq!((in_use(&b, "gpu"), in_use(&a, "gpu")), (500, 0));
    drop(g);
    let e = a.request_spec("gpu@hostC=0.5").unwrap_err();
    assert_eq!(e.error, Error::NotFound);
    assert!(e.message.contains("gpu@hostC"), "{}", e.message);
}

#[test]
fn fencing_tokens_grow_with_every_grant_of_the_namespace() {
    let s = server_or_skip!();
    let a = connect(&s, "fence", "hostA");
    let b = connect(&s, "fence", "hostB");
    a.add_budget("licence", 1).unwrap();
    b.add_budget("licence", 1).unwrap();
    let (ra, rb) = (a.request_spec("licence=1").unwrap(), b.request_spec("licence=1").unwrap());
    let mut tokens = Vec::new();
    for i in 0..6 {
        let g = if i % 2 == 0 { a.try_acquire(&ra) } else { b.try_acquire(&rb) }.unwrap();
        let t = g.fencing_token().expect("a fleet grant has a token");
        assert_eq!(g.fencing_token(), Some(t)); // the grant's, not a counter
        tokens.push(t);
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{:?}", tokens);
}

#[test]
fn a_request_that_never_fits_is_refused() {
    let s = server_or_skip!();
    let pool = connect(&s, "never", "hostA");
    pool.add_budget("licence", 2).unwrap();
    let req = pool.request_spec("licence=3").unwrap();
    assert_eq!(pool.acquire(&req, Deadline::after(HANG_GUARD)).unwrap_err(), Error::Never);
    assert_eq!(pool.request_spec("nosuch=1").unwrap_err().error, Error::NotFound);
}

#[test]
fn a_bad_url_or_namespace_is_invalid_and_named() {
    if !cronoq::sys::FLEET_LINKED {
        let e = Pool::connect("unix:///x.sock", "ns", FleetOptions::new()).unwrap_err();
        assert_eq!(e.error, Error::NotFound);
        assert!(e.message.contains("libcronoq_fleet"), "{}", e.message);
        return;
    }
    for url in ["http://example/", "redis://host:99999/0", "unix://relative.sock"] {
        let e = Pool::connect(url, "ns", FleetOptions::new()).unwrap_err();
        assert_eq!(e.error, Error::Invalid, "{}", e.message);
        assert!(e.message.contains(&format!("{:?}", url)), "{}", e.message);
    }
    let e = Pool::connect("unix:///x.sock", "no spaces", FleetOptions::new()).unwrap_err();
    assert_eq!(e.error, Error::Invalid);
    assert!(e.message.contains("namespace"), "{}", e.message);
    let e = Pool::connect("unix:///x\0.sock", "ns", FleetOptions::new()).unwrap_err();
    assert_eq!(e.error, Error::Invalid);
}

#[test]
fn an_unreachable_server_is_reported_with_its_url() {
    if !cronoq::sys::FLEET_LINKED {
        return;
    }
    let dir = std::env::temp_dir().join(format!("cronoq-rs-nobody-{}", std::process::id()));
    let url = format!("unix://cronoq:secret@{}/nobody.sock", dir.display());
    let e = Pool::connect(&url, "ns", FleetOptions::new().timeout_ms(1000)).unwrap_err();
    // CQ_EUNAVAILABLE: the server cannot be reached, so nothing was opened.
    assert_eq!(e.error, Error::Unavailable, "{:?}", e);
    let shown = format!("unix://cronoq:***@{}/nobody.sock", dir.display());
    assert!(e.message.contains(&format!("{:?}", shown)), "{}", e.message);
    assert!(!e.message.contains("secret"), "{}", e.message);
}

#[test]
fn dropping_an_async_acquire_on_a_fleet_pool_leaks_nothing() {
    let s = server_or_skip!();
    let a = connect(&s, "async", "hostA");
    let b = connect(&s, "async", "hostB");
    a.add_budget("licence", 1).unwrap();
    b.add_budget("licence", 1).unwrap();
    let (ra, rb) = (a.request_spec("licence=1").unwrap(), b.request_spec("licence=1").unwrap());
    let _guard = watchdog("the fleet async test");
    let holder = a.try_acquire(&ra).unwrap();
    let (waker, _) = counting_waker();
    let mut fut = b.acquire_async(&rb, Deadline::after(HANG_GUARD));
    assert!(poll_with(&mut fut, &waker).is_pending());
    wait_until("the async waiter to park", || b.stats().waiting == 1);
    drop(fut);
    drop(holder);
    // The dropped waiter took nothing.
    drop(b.try_acquire(&rb).unwrap());
    // Release and drop at once, many times: whoever wins, it comes back.
    for _ in 0..20 {
        let holder = a.try_acquire(&ra).unwrap();
        let mut fut = b.acquire_async(&rb, Deadline::after(HANG_GUARD));
        let first = poll_with(&mut fut, &waker);
        drop(holder);
        if let Poll::Ready(g) = first {
            drop(g.unwrap());
        }
        drop(fut);
    }
    wait_until("the licence to come back", || in_use(&a, "licence") == 0);
    assert_eq!(a.stats().waiting, 0);
    // And an awaited acquire completes on the pool's thread.
    let holder = a.try_acquire(&ra).unwrap();
    thread::scope(|sc| {
        sc.spawn(|| {
            wait_until("the waiter to park", || a.stats().waiting == 1);
            drop(holder);
        });
        let g = block_on(b.acquire_async(&rb, Deadline::after(HANG_GUARD))).unwrap();
        assert!(g.fencing_token().is_some());
    });
}
