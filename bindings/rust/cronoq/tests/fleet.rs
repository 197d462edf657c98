//! Fleet pools from Rust: `Pool::connect`, two pools of one namespace
//! sharing its budgets, another host's device pool in a request, fencing
//! tokens, the quarantine of a namespace the server creates and the
//! namespace's longest TTL, the errors of a bad URL, an unreachable server
//! and a request that never fits, a dropped asynchronous acquire, the
//! pool's fleet stats, and the operator's calls (`fleet_load`,
//! `fleet_library`, `fleet_acl`).
//!
//! Each test starts a redis-server of its own (a temporary directory, a
//! Unix socket, no TCP port, nothing on disk) and stops it by its PID when
//! the test ends. Where redis-server or the fleet library is missing the
//! tests say so and pass, unless CRONOQ_REQUIRE_RUST=1 (CI), where that
//! fails them. Their namespaces are new on that server, so they open them
//! with `new_namespace(true)`, except those that test the quarantine.
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

/// A pool of namespace `ns`, new on the test's own server: no quarantine.
fn connect(s: &Server, ns: &str, host: &str) -> Pool {
    Pool::connect(&s.url, ns, FleetOptions::new().host(host).new_namespace(true)).expect("connect")
}

#[test]
fn async_releases_come_before_the_pools_next_call() {
    let s = server_or_skip!();
    let opts =
        FleetOptions::new().host("hostA").audit(true).async_release(true).new_namespace(true);
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
    // Another capacity is accepted, and the namespace keeps its live one.
    a.add_budget("licence", 3).unwrap();
    b.add_spec("licence=3").unwrap();
    assert_eq!(b.resource_stats("licence").unwrap().capacity, 2);
    // Another kind conflicts, named with what the namespace has.
    let e = b.add_spec("licence:class=3").unwrap_err();
    assert_eq!(e.error, Error::Exists);
    assert!(e.message.contains("is a budget"), "{}", e.message);
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
    // Large (the namespace's counter starts from the server's clock in
    // microseconds), and exact in a double: below 2^53.
    assert!(tokens.iter().all(|&t| t > 1 << 40 && t < 1 << 53), "{:?}", tokens);
    assert_eq!(a.fleet_stats().unwrap().max_fence, tokens[4]);
    assert_eq!(b.fleet_stats().unwrap().max_fence, tokens[5]);
}

#[test]
fn an_owned_fleet_grant_moves_to_another_thread_with_its_token_and_releases_there() {
    let s = server_or_skip!();
    let a = std::sync::Arc::new(connect(&s, "owned", "hostA"));
    let b = connect(&s, "owned", "hostB");
    a.add_spec("licence=1").unwrap();
    b.add_spec("licence=1").unwrap();
    let grant = a.try_acquire_owned(&a.request_spec("licence=1").unwrap()).unwrap();
    let token = grant.fencing_token().expect("a fleet grant has a token");
    let rb = b.request_spec("licence=1").unwrap();
    assert_eq!(b.try_acquire(&rb).unwrap_err(), Error::Busy);
    let worker = thread::spawn(move || {
        assert_eq!(grant.fencing_token(), Some(token));
        grant.release()
    });
    assert_eq!(worker.join().unwrap(), Ok(()));
    // Released on the server: the other process's pool is granted, later.
    let g = b.try_acquire(&rb).unwrap();
    assert!(g.fencing_token().unwrap() > token);
}

/// Without `new_namespace`, a namespace the server has to create grants
/// nothing for its longest TTL, since the server cannot tell it from one
/// whose state it lost: a try is `Busy` (also in a pool that says
/// `new_namespace` once the namespace exists), the stats show the
/// quarantine left, and blocking acquires wait and are granted in arrival
/// order as it ends.
#[test]
fn a_namespace_the_server_creates_is_quarantined_for_its_longest_ttl() {
    let s = server_or_skip!();
    let opts = |host: &str| FleetOptions::new().host(host).ttl_ms(1000).max_ttl_ms(3000);
    let a = Pool::connect(&s.url, "quarantine", opts("hostA")).expect("connect");
    let b = Pool::connect(&s.url, "quarantine", opts("hostB")).expect("connect");
    let late =
        Pool::connect(&s.url, "quarantine", opts("hostC").new_namespace(true)).expect("connect");
    for p in [&a, &b, &late] {
        p.add_budget("licence", 1).unwrap(); // declarations are not held back
    }
    let ra = a.request_spec("licence=1").unwrap();
    let rb = b.request_spec("licence=1").unwrap();
    let rl = late.request_spec("licence=1").unwrap();
    assert_eq!(a.try_acquire(&ra).unwrap_err(), Error::Busy);
    assert_eq!(late.try_acquire(&rl).unwrap_err(), Error::Busy);
    for p in [&a, &late] {
        let left = p.fleet_stats().unwrap().quarantine_ms;
        assert!(left > 0 && left <= 3000, "{}", left);
    }
    thread::scope(|sc| {
        let first = sc.spawn(|| a.acquire(&ra, Deadline::after(HANG_GUARD)));
        wait_until("the first waiter to park", || a.stats().waiting == 1 || first.is_finished());
        let second = sc.spawn(|| b.acquire(&rb, Deadline::after(HANG_GUARD)));
        // The first to arrive is granted as the quarantine ends; the second
        // cannot be while it holds the licence.
        wait_until("a grant", || first.is_finished() || second.is_finished());
        assert!(first.is_finished() && !second.is_finished());
        let held = first.join().unwrap().expect("the first arrival is granted");
        assert_eq!(in_use(&b, "licence"), 1);
        let token = held.fencing_token().unwrap();
        drop(held);
        let g = second.join().unwrap().expect("then the second");
        assert!(g.fencing_token().unwrap() > token);
    });
    drop(late.try_acquire(&rl).unwrap());
}

/// The longest TTL is set when the namespace is created: an open with
/// another, or with the default where another was set, is refused naming
/// both; so is a TTL longer than the longest.
#[test]
fn the_longest_ttl_is_the_namespaces_and_the_same_in_every_process() {
    let s = server_or_skip!();
    let opts = |host: &str| FleetOptions::new().host(host).new_namespace(true).ttl_ms(1000);
    let a = Pool::connect(&s.url, "maxttl", opts("hostA").max_ttl_ms(2000)).expect("connect");
    a.add_budget("licence", 1).unwrap();
    for (o, values) in
        [(opts("hostB").max_ttl_ms(3000), ["2000", "3000"]), (opts("hostB"), ["2000", "10000"])]
    {
        let e = Pool::connect(&s.url, "maxttl", o).unwrap_err();
        assert_eq!(e.error, Error::Invalid, "{}", e.message);
        assert!(e.message.contains("max_ttl_ms") && e.message.contains("maxttl"), "{}", e.message);
        assert!(values.iter().all(|v| e.message.contains(v)), "{}", e.message);
    }
    // A shorter TTL is fine.
    let b = Pool::connect(&s.url, "maxttl", opts("hostB").ttl_ms(500).max_ttl_ms(2000)).unwrap();
    b.add_budget("licence", 1).unwrap();
    let g = b.try_acquire(&b.request_spec("licence=1").unwrap()).unwrap();
    assert_eq!(in_use(&a, "licence"), 1);
    drop(g);
    for (o, values) in [
        (opts("hostC").ttl_ms(5000).max_ttl_ms(2000), ["5000", "2000"]),
        (opts("hostC").ttl_ms(20000), ["20000", "10000"]),
    ] {
        let e = Pool::connect(&s.url, "maxttl-x", o).unwrap_err();
        assert_eq!(e.error, Error::Invalid, "{}", e.message);
        assert!(e.message.contains("max_ttl_ms"), "{}", e.message);
        assert!(values.iter().all(|v| e.message.contains(v)), "{}", e.message);
    }
    let e = Pool::connect(&s.url, "maxttl", opts("hostD").max_ttl_ms(-1)).unwrap_err();
    assert_eq!(e.error, Error::Invalid, "{}", e.message);
}

#[test]
fn fleet_stats_say_what_the_pool_met() {
    let s = server_or_skip!();
    let pool = connect(&s, "stats", "hostA");
    let st = pool.fleet_stats().expect("a fleet pool has fleet stats");
    assert_eq!((st.sessions, st.leases_lost, st.state_losses, st.unavailable), (1, 0, 0, 0));
    // A new namespace has no quarantine, and the test's server lets the
    // default user read its settings.
    assert_eq!(st.quarantine_ms, 0);
    assert!(!st.settings_unchecked);
    pool.add_budget("licence", 1).unwrap();
    let g = pool.try_acquire(&pool.request_spec("licence=1").unwrap()).unwrap();
    assert_eq!(Some(pool.fleet_stats().unwrap().max_fence), g.fencing_token());
    drop(g);
    assert_eq!(Pool::new().unwrap().fleet_stats(), None);
}

fn set_user(s: &Server, user: &str, password: &str, rules: &str) {
    let pw = format!(">{}", password);
    let mut args = vec!["ACL", "SETUSER", user, "reset", "on", &pw];
    args.extend(rules.split_whitespace());
    assert_eq!(command(s, &args), "+OK");
}

/// `fleet_acl` gives the rules an application's user needs. Such a user
/// cannot load the library (its pool says what the operator runs);
/// after `fleet_load` its pool opens its namespace and grants. Without
/// `+info` it cannot read `maxmemory-policy`: the pool opens all the same,
/// with `settings_unchecked` set.
#[test]
fn an_application_user_with_the_acl_of_fleet_acl_opens_its_namespace() {
    let s = server_or_skip!();
    let rules = cronoq::fleet_acl("app-ns").unwrap();
    assert!(rules.contains("~cq:{app-ns}:*") && rules.contains("+fcall"), "{}", rules);
    assert!(!rules.contains("+function|load"), "{}", rules);
    assert!(rules.split_whitespace().any(|r| r == "+info"), "{}", rules);
    set_user(&s, "app", "apppw", &rules);
    set_user(&s, "blind", "blindpw", &rules.replace("+info", ""));
    let sock = &s.url["unix://".len()..];
    let url = |user: &str| format!("unix://{}:{}pw@{}", user, user, sock);
    let opts = FleetOptions::new().new_namespace(true);
    let e = Pool::connect(&url("app"), "app-ns", opts.clone()).unwrap_err();
    assert_eq!(e.error, Error::AccessDenied, "{}", e.message);
    assert!(!e.message.contains("apppw"), "{}", e.message);
    let loaded = cronoq::fleet_load(&s.url, &FleetOptions::new(), false).unwrap();
    assert!(!loaded.is_empty());
    for (user, unchecked) in [("app", false), ("blind", true)] {
        let pool = Pool::connect(&url(user), "app-ns", opts.clone().host(user)).expect(user);
        assert_eq!(pool.fleet_stats().unwrap().settings_unchecked, unchecked, "{}", user);
        pool.add_budget("licence", 1).unwrap();
        let g = pool.acquire(&pool.request_spec("licence=1").unwrap(), Deadline::after(HANG_GUARD));
        assert!(g.unwrap().fencing_token().unwrap() > 1 << 40);
        // Another namespace's keys are not the user's.
        let e = Pool::connect(&url(user), "app-other", opts.clone()).unwrap_err();
        assert_eq!(e.error, Error::AccessDenied, "{}", e.message);
    }
    assert_eq!(cronoq::fleet_acl("no spaces").unwrap_err().error, Error::Invalid);
    assert_eq!(cronoq::fleet_acl("no\0nul").unwrap_err().error, Error::Invalid);
}

/// The operator's step: `fleet_load` loads the library (and again, finding
/// it there); other code under the library's name is refused, by pools
/// and by `fleet_load`, until it is loaded with `replace`.
#[test]
fn fleet_load_refuses_other_code_of_the_librarys_name_until_replace() {
    let s = server_or_skip!();
    let name = cronoq::fleet_library().expect("the fleet library is linked");
    assert!(name.starts_with("cronoq_") && name.len() > "cronoq_".len(), "{}", name);
    let op = FleetOptions::new();
    cronoq::fleet_load(&s.url, &op, false).unwrap();
    cronoq::fleet_load(&s.url, &op, false).unwrap(); // already there: fine
    let other = format!(
        "#!lua name={}\nredis.register_function('cq_other', function() return 1 end)",
        name
    );
    assert!(command(&s, &["FUNCTION", "LOAD", "REPLACE", &other]).starts_with('$'));
    let e = cronoq::fleet_load(&s.url, &op, false).unwrap_err();
    assert_eq!(e.error, Error::Exists, "{}", e.message);
    assert!(e.message.contains(&format!("{:?}", s.url)), "{}", e.message);
    let e = Pool::connect(&s.url, "other", FleetOptions::new().new_namespace(true)).unwrap_err();
    assert_eq!(e.error, Error::AccessDenied, "{}", e.message);
    cronoq::fleet_load(&s.url, &op, true).unwrap();
    let pool = connect(&s, "other", "hostA");
    pool.add_budget("licence", 1).unwrap();
    drop(pool.try_acquire(&pool.request_spec("licence=1").unwrap()).unwrap());
}

#[test]
fn fleet_load_reports_a_bad_or_unreachable_server_with_its_url() {
    if !cronoq::sys::FLEET_LINKED {
        return;
    }
    let e = cronoq::fleet_load("http://example/", &FleetOptions::new(), false).unwrap_err();
    assert_eq!(e.error, Error::Invalid, "{}", e.message);
    assert!(e.message.contains("\"http://example/\""), "{}", e.message);
    let dir = std::env::temp_dir().join(format!("cronoq-rs-nobody-{}", std::process::id()));
    let url = format!("unix://op:SECRETPW@{}/nobody.sock", dir.display());
    let opts = FleetOptions::new().timeout_ms(1000);
    let e = cronoq::fleet_load(&url, &opts, false).unwrap_err();
    assert_eq!(e.error, Error::Unavailable, "{}", e.message);
    let shown = format!("unix://op:***@{}/nobody.sock", dir.display());
    assert!(e.message.contains(&format!("{:?}", shown)), "{}", e.message);
    assert!(!e.message.contains("SECRETPW"), "{}", e.message);
    let url = format!("unix://{}/nobody.sock", dir.display());
    let e = cronoq::fleet_load(&url, &opts.auth(Some("op"), "SECRETPW"), false).unwrap_err();
    assert_eq!(e.error, Error::Unavailable, "{}", e.message);
    assert!(!format!("{} {:?}", e, e).contains("SECRETPW"), "{}", e.message);
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
        // The operator's calls say so too.
        assert_eq!(cronoq::fleet_library(), None);
        let e = cronoq::fleet_load("unix:///x.sock", &FleetOptions::new(), false).unwrap_err();
        assert_eq!(e.error, Error::NotFound);
        assert!(e.message.contains("libcronoq_fleet"), "{}", e.message);
        assert_eq!(cronoq::fleet_acl("ns").unwrap_err().error, Error::NotFound);
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

/// Run one command on the server: its reply's first line.
fn command(s: &Server, args: &[&str]) -> String {
    let sock = &s.url["unix://".len()..];
    let mut c = UnixStream::connect(sock).expect("connect to redis-server");
    c.set_read_timeout(Some(HANG_GUARD)).unwrap();
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{}\r\n", a.len(), a));
    }
    c.write_all(req.as_bytes()).unwrap();
    let mut buf = [0u8; 256];
    let n = c.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or("").to_string()
}

/// Whatever makes `Pool::connect` fail, a password, in the URL or in the
/// options, is in none of what the error shows (its message, `Display`,
/// `Debug`): a password the server refuses, a socket that is not there, a
/// URL refused (one whose password holds '/' too), a NUL byte. The user
/// name and the path are still named, so that the message says which pool.
#[test]
fn a_password_appears_in_no_error_of_connect() {
    let s = server_or_skip!();
    let ok = command(&s, &["ACL", "SETUSER", "cronoq", "on", ">rightpw", "~*", "&*", "+@all"]);
    assert_eq!(ok, "+OK");
    let sock = &s.url["unix://".len()..];
    let nobody = format!("{}/nobody.sock", s.dir.display());
    let wrong = FleetOptions::new().timeout_ms(5000);
    let cases: Vec<(String, FleetOptions, Vec<String>)> = vec![
        (
            format!("unix://cronoq:WRONGPW@{}", sock),
            wrong.clone(),
            vec!["cronoq:***@".into(), sock.into()],
        ),
        (
            format!("unix://cronoq:WRONGPW@{}", nobody),
            wrong.clone(),
            vec!["cronoq:***@".into(), nobody.clone()],
        ),
        (
            "unix://cronoq:WRONGPW@relative.sock".into(),
            wrong.clone(),
            vec!["cronoq:***@relative.sock".into()],
        ),
        (
            "redis://cronoq:WRO/NGPW@127.0.0.1:1".into(),
            wrong.clone(),
            vec!["cronoq:***@127.0.0.1:1".into()],
        ),
        (
            format!("unix://cronoq:WRONG\0PW@{}", sock),
            wrong.clone(),
            vec!["cronoq:***@".into(), sock.into()],
        ),
        (s.url.clone(), wrong.clone().auth(Some("cronoq"), "WRONGPW"), vec![sock.into()]),
        (s.url.clone(), wrong.clone().auth(Some("cronoq"), "WRO\0NGPW"), vec!["option".into()]),
    ];
    for (url, options, names) in cases {
        let e = Pool::connect(&url, "pw", options).unwrap_err();
        let shown = format!("{}\n{}\n{:?}", e.message, e, e);
        assert!(!shown.contains("NGPW"), "{}", shown);
        for name in names {
            assert!(e.message.contains(&name), "{} lacks {}", e.message, name);
        }
    }
}

/// Options print without their password (a program may log them).
#[test]
fn fleet_options_print_without_their_password() {
    let o = FleetOptions::new().host("hostA").auth(Some("cronoq"), "WRONGPW");
    let shown = format!("{:?}", o);
    assert!(!shown.contains("WRONGPW"), "{}", shown);
    assert!(shown.contains("cronoq") && shown.contains("hostA"), "{}", shown);
    assert_eq!(o, FleetOptions::new().host("hostA").auth(Some("cronoq"), "WRONGPW"));
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
