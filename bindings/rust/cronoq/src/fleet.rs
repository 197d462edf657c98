//! Fleet pools: `Pool::connect` over `cq_fleet_open()`, the fencing token
//! of a grant, the pool's `cq_fleet_stats`, and the operator's calls
//! (`fleet_load`, `fleet_library`, `fleet_acl`). Without libcronoq_fleet
//! linked (cfg `cronoq_fleet`, set by the build scripts) the same API
//! exists and reports that.
use crate::text::c_string;
use crate::{Error, Pool, SpecError};
use cronoq_sys as sys;
use std::ffi::CString;
use std::os::raw::c_uint;

/// Options of [`Pool::connect`]; the default is the library's for each.
/// They print (`Debug`) with the password hidden.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct FleetOptions {
    host: Option<String>,
    ttl_ms: i64,
    heartbeat_ms: i64,
    timeout_ms: i64,
    max_ttl_ms: i64,
    username: Option<String>,
    password: Option<String>,
    flags: c_uint,
    fleet_flags: c_uint,
}

impl FleetOptions {
    pub fn new() -> FleetOptions {
        FleetOptions::default()
    }

    /// This host's name in device pool names (`gpu@<host>`); by default
    /// `$CRONOQ_HOST`, else the host name up to its first dot.
    pub fn host(mut self, host: &str) -> FleetOptions {
        self.host = Some(host.to_string());
        self
    }

    /// The session's TTL (0: 10 000 ms): a process stopped or cut off for
    /// longer loses what it held.
    pub fn ttl_ms(mut self, ms: i64) -> FleetOptions {
        self.ttl_ms = ms;
        self
    }

    /// Time between heartbeats (0: 3000 ms, at most a third of the TTL).
    pub fn heartbeat_ms(mut self, ms: i64) -> FleetOptions {
        self.heartbeat_ms = ms;
        self
    }

    /// Time for one call to reach the server, retries included (0: 5000
    /// ms); past it the call fails.
    pub fn timeout_ms(mut self, ms: i64) -> FleetOptions {
        self.timeout_ms = ms;
        self
    }

    /// The namespace's longest TTL (0: 10 000 ms): part of the namespace,
    /// the same in every process that opens it (an open that gives another
    /// is refused with `Error::Invalid`, naming both), and at least
    /// [`ttl_ms`](FleetOptions::ttl_ms). A namespace the server has to
    /// create, the first time or again after it lost its state, grants
    /// nothing for this long (see [`new_namespace`](FleetOptions::new_namespace)).
    pub fn max_ttl_ms(mut self, ms: i64) -> FleetOptions {
        self.max_ttl_ms = ms;
        self
    }

    /// The namespace is new: no process ever held in it on this server
    /// (`CQ_FLEET_NEW_NAMESPACE`). A namespace the server has to create is
    /// otherwise quarantined for its longest TTL, since the server cannot
    /// tell it from one whose state it lost while a stopped holder still
    /// believes it holds: meanwhile a try answers `Error::Busy` and
    /// acquires wait, granted in arrival order as it ends. With this flag
    /// a namespace this open creates grants at once. For tests and for a
    /// namespace named afresh for each deployment; never in a program that
    /// may be restarted against a server that lost its state. Ignored
    /// where the namespace exists.
    pub fn new_namespace(mut self, on: bool) -> FleetOptions {
        self.fleet_flags = flag(self.fleet_flags, sys::CQ_FLEET_NEW_NAMESPACE, on);
        self
    }

    /// AUTH, when the URL gives none.
    pub fn auth(mut self, username: Option<&str>, password: &str) -> FleetOptions {
        self.username = username.map(str::to_string);
        self.password = Some(password.to_string());
        self
    }

    /// The namespace's claims option (`CQ_POOL_STAGED_CLAIMS`): it must
    /// match what the namespace was created with.
    pub fn staged_claims(mut self, on: bool) -> FleetOptions {
        self.flags = if on { sys::CQ_POOL_STAGED_CLAIMS } else { 0 };
        self
    }

    /// An audit log in the namespace (`CQ_FLEET_AUDIT`), for tests and
    /// operators; set when the namespace is created.
    pub fn audit(mut self, on: bool) -> FleetOptions {
        self.fleet_flags = flag(self.fleet_flags, sys::CQ_FLEET_AUDIT, on);
        self
    }

    /// Releases that do not wait for the server's reply while this process
    /// has no waiter (`CQ_FLEET_ASYNC_RELEASE`): a round trip less per
    /// grant, but a process told of the release at once may still find the
    /// units held.
    pub fn async_release(mut self, on: bool) -> FleetOptions {
        self.fleet_flags = flag(self.fleet_flags, sys::CQ_FLEET_ASYNC_RELEASE, on);
        self
    }
}

impl std::fmt::Debug for FleetOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetOptions")
            .field("host", &self.host)
            .field("ttl_ms", &self.ttl_ms)
            .field("heartbeat_ms", &self.heartbeat_ms)
            .field("timeout_ms", &self.timeout_ms)
            .field("max_ttl_ms", &self.max_ttl_ms)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("flags", &self.flags)
            .field("fleet_flags", &self.fleet_flags)
            .finish()
    }
}

fn flag(flags: c_uint, bit: c_uint, on: bool) -> c_uint {
    if on {
        flags | bit
    } else {
        flags & !bit
    }
}

/// `url` with its password, if it has one, as `***`: for messages. The
/// userinfo ends where libcronoq_fleet's URL parser ends it (url.c): a
/// password may hold '@' and '/', so at the last '@' of a redis:// URL,
/// and of a unix:// URL that does not start with its path at the last '@'
/// followed by '/' (else its last '@').
fn shown_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i], &url[i + 3..]),
        None => return url.to_string(),
    };
    let end = if scheme != "unix" {
        rest.rfind('@')
    } else if rest.starts_with('/') {
        None
    } else {
        rest.rfind("@/").or_else(|| rest.rfind('@'))
    };
    let at = match end {
        Some(at) if at > 0 => at,
        _ => return url.to_string(),
    };
    // "user:password@" or "password@" (a lone word is the password)
    let user = match rest[..at].find(':') {
        Some(colon) => format!("{}:***", &rest[..colon]),
        None => "***".to_string(),
    };
    format!("{}://{}@{}", scheme, user, &rest[at + 1..])
}

fn failed(url: &str, ns: &str, error: Error, detail: &str) -> SpecError {
    let shown = shown_url(url);
    let detail = if detail.is_empty() { error.to_string() } else { detail.replace(url, &shown) };
    SpecError { error, message: format!("Pool::connect({:?}, {:?}): {}", shown, ns, detail) }
}

impl Pool {
    /// Open a fleet pool (`cq_fleet_open`): a pool whose state lives in a
    /// Redis server (`redis://[user[:password]@]host[:port][/db]` or
    /// `unix:///path/redis.sock[?db=N]`), shared by every process that
    /// opens the same `namespace`, under the same rules as an in-process
    /// pool. Every process declares what it uses (`add_spec("licence=2,
    /// gpu=auto")`): a declaration that matches the namespace's is
    /// accepted, a conflicting one is `Error::Exists`. Device pools are
    /// this host's (`gpu`); another host's is named in full
    /// (`gpu@hostB`). Every call on the pool may wait for the server, up
    /// to the options' timeout.
    ///
    /// Errors carry the library's message, naming the URL (its password
    /// hidden; no message shows the password of the options):
    /// `Error::Invalid` for a bad URL, namespace or option (a longest TTL
    /// other than the namespace's, or a TTL longer than it, naming both
    /// values; a server whose `maxmemory-policy` evicts),
    /// `Error::Unavailable` for a server that cannot be reached,
    /// `Error::AccessDenied` for one that refuses the user, its password
    /// or a permission, or runs functions that are not this library's (see
    /// [`fleet_load`]), and `Error::NotFound` when this build has no fleet
    /// library linked.
    pub fn connect(url: &str, namespace: &str, options: FleetOptions) -> Result<Pool, SpecError> {
        let invalid = |what: &str| failed(url, namespace, Error::Invalid, what);
        let c_url = c_string(url).map_err(|_| invalid("the URL holds a NUL byte"))?;
        let c_ns = c_string(namespace).map_err(|_| invalid("the namespace holds a NUL byte"))?;
        let text = |s: &Option<String>| -> Result<Option<CString>, SpecError> {
            s.as_deref()
                .map(c_string)
                .transpose()
                .map_err(|_| invalid("an option holds a NUL byte"))
        };
        let host = text(&options.host)?;
        let username = text(&options.username)?;
        let password = text(&options.password)?;
        let mut opts: sys::cq_fleet_opts = unsafe { std::mem::zeroed() };
        opts.flags = options.flags;
        opts.fleet_flags = options.fleet_flags;
        opts.host = ptr(&host);
        opts.ttl_ms = options.ttl_ms;
        opts.heartbeat_ms = options.heartbeat_ms;
        opts.timeout_ms = options.timeout_ms;
        opts.max_ttl_ms = options.max_ttl_ms;
        opts.username = ptr(&username);
        opts.password = ptr(&password);
        open(url, namespace, &c_url, &c_ns, &opts)
    }

    /// What this process's fleet pool met (`cq_fleet_stats_get`), without
    /// a round trip; `None` for an in-process pool.
    pub fn fleet_stats(&self) -> Option<FleetStats> {
        if !self.is_fleet() {
            return None;
        }
        stats_of(self)
    }

    /// A fleet pool's host name, as its device pool names carry it
    /// (`gpu@<host>`); `None` for an in-process pool.
    pub fn host(&self) -> Option<String> {
        if !self.is_fleet() {
            return None;
        }
        host_of(self)
    }
}

fn ptr(s: &Option<CString>) -> *const std::os::raw::c_char {
    s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())
}

/// What a fleet pool met, for monitoring its failures (`cq_fleet_stats`).
/// The counters are also in [`Pool::metrics`](crate::Pool::metrics), as
/// `cronoq_fleet_<name>_total`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetStats {
    /// Sessions opened: 1, and one more per loss.
    pub sessions: u64,
    /// Leases this process lost (their grants hold nothing any more).
    pub leases_lost: u64,
    /// Times the namespace was found recreated: the server had lost its
    /// state.
    pub state_losses: u64,
    /// Failovers detected: a lease missing, or the namespace's fencing
    /// counter behind one this process saw.
    pub rollbacks: u64,
    /// Connections made again after one broke.
    pub reconnects: u64,
    /// Calls that failed with `Error::Unavailable`.
    pub unavailable: u64,
    /// Releases that could not reach the server, applied later by a
    /// heartbeat.
    pub deferred: u64,
    /// Leases and waiters of calls whose reply was lost, ended by a
    /// heartbeat.
    pub reconciled: u64,
    /// The highest fencing token this process saw.
    pub max_fence: u64,
    /// The namespace's quarantine left, in ms, as last seen.
    pub quarantine_ms: i64,
    /// The local deadline (`now_ms()`) of the last session lost here; 0
    /// before any.
    pub lost_deadline_ms: i64,
    /// The server's `maxmemory-policy` could not be read at open (the
    /// user's ACL allows neither `CONFIG GET` nor `INFO`): an operator
    /// checks it (`cronoq load` does). A `CQ_EVENT_WARNING` said so.
    pub settings_unchecked: bool,
}

/// The name of this library's functions on a Redis server,
/// `cronoq_<version>` (`cq_fleet_library`): what an operator finds in
/// `FUNCTION LIST`. `None` where this build has no fleet library linked.
pub fn fleet_library() -> Option<&'static str> {
    library_name()
}

/// The operator's step (`cq_fleet_load`, as `cronoq load URL`): connect to
/// the Redis server at `url` as an operator's user and load this library's
/// functions, which every fleet pool then runs. Once per server, and again
/// after it lost its functions (a restart without persistence, `FUNCTION
/// FLUSH`); application users need no right to load code. `replace` loads
/// over a library of the same name whose code is not this library's. It
/// also checks the server's `maxmemory-policy`. Of `options`, only the
/// user, password and timeout are used. Blocks up to the timeout.
///
/// Returns the library's message, saying what it did. Errors carry the
/// message, naming the URL (its password hidden): `Error::Exists` (a
/// library of this name with other code is there: load again with
/// `replace`), `Error::AccessDenied` (the server refused the user, or its
/// `FUNCTION LOAD`), `Error::Invalid` (a bad URL, or a `maxmemory-policy`
/// that evicts), `Error::Unavailable` (not reached), `Error::NotFound` (no
/// fleet library linked).
pub fn fleet_load(url: &str, options: &FleetOptions, replace: bool) -> Result<String, SpecError> {
    let what = |e: Error, detail: &str| op_failed("fleet_load", url, e, detail);
    let c_url = c_string(url).map_err(|_| what(Error::Invalid, "the URL holds a NUL byte"))?;
    let text = |s: &Option<String>| -> Result<Option<CString>, SpecError> {
        s.as_deref()
            .map(c_string)
            .transpose()
            .map_err(|_| what(Error::Invalid, "an option holds a NUL byte"))
    };
    let username = text(&options.username)?;
    let password = text(&options.password)?;
    let mut opts: sys::cq_fleet_opts = unsafe { std::mem::zeroed() };
    opts.timeout_ms = options.timeout_ms;
    opts.username = ptr(&username);
    opts.password = ptr(&password);
    let flags = if replace { sys::CQ_FLEET_LOAD_REPLACE } else { 0 };
    let (rc, detail) = load(&c_url, &opts, flags);
    let detail = detail.replace(url, &shown_url(url));
    if rc != 0 {
        return Err(what(Error::from_code(rc), &detail));
    }
    Ok(detail)
}

/// The ACL rules a Redis user of namespace `namespace` needs, and nothing
/// more (`cq_fleet_acl`, as `cronoq acl`), for
/// `ACL SETUSER <user> on ><password> <rules>`; a database other than 0
/// needs `+select` too.
/// `Error::Invalid` for a bad namespace, `Error::NotFound` where this
/// build has no fleet library linked.
pub fn fleet_acl(namespace: &str) -> Result<String, SpecError> {
    let failed = |e: Error, detail: &str| SpecError {
        error: e,
        message: format!("fleet_acl({:?}): {}", namespace, detail),
    };
    let c_ns = c_string(namespace)
        .map_err(|_| failed(Error::Invalid, "the namespace holds a NUL byte"))?;
    acl(&c_ns).map_err(|e| {
        let detail = if e == Error::NotFound { NOT_LINKED.to_string() } else { e.to_string() };
        failed(e, &detail)
    })
}

fn op_failed(call: &str, url: &str, error: Error, detail: &str) -> SpecError {
    let shown = shown_url(url);
    let detail = if detail.is_empty() { error.to_string() } else { detail.replace(url, &shown) };
    SpecError { error, message: format!("{}({:?}): {}", call, shown, detail) }
}

const NOT_LINKED: &str = "fleet pools are not built in: cronoq-sys found no libcronoq_fleet.a \
     when it was built (build libcronoq with hiredis, CMake option CRONOQ_WITH_FLEET, or set \
     CRONOQ_FLEET_LIB_DIR)";

#[cfg(cronoq_fleet)]
fn library_name() -> Option<&'static str> {
    let p = unsafe { sys::cq_fleet_library() };
    (!p.is_null()).then(|| unsafe { crate::text::borrowed(p) })
}

#[cfg(not(cronoq_fleet))]
fn library_name() -> Option<&'static str> {
    None
}

/// `cq_fleet_load`: its code and `cq_fleet_error()`'s message, which it
/// sets on success too.
#[cfg(cronoq_fleet)]
fn load(url: &CString, opts: &sys::cq_fleet_opts, flags: c_uint) -> (i32, String) {
    crate::pool::check_abi();
    let rc = unsafe { sys::cq_fleet_load(url.as_ptr(), opts, flags) };
    // Per thread, and this thread's last call was the load.
    (rc, unsafe { crate::text::borrowed(sys::cq_fleet_error()) }.to_string())
}

#[cfg(not(cronoq_fleet))]
fn load(_: &CString, _: &sys::cq_fleet_opts, _: c_uint) -> (i32, String) {
    (sys::CQ_ENOENT, NOT_LINKED.to_string())
}

#[cfg(cronoq_fleet)]
fn acl(ns: &CString) -> Result<String, Error> {
    let mut len = 512; // what the header says is enough
    loop {
        let mut buf = vec![0u8; len];
        let rc = unsafe { sys::cq_fleet_acl(ns.as_ptr(), buf.as_mut_ptr() as *mut _, len) };
        if rc == sys::CQ_ERANGE && len < 65536 {
            len *= 4;
            continue;
        }
        crate::error::check(rc)?;
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        buf.truncate(end);
        return Ok(String::from_utf8_lossy(&buf).into_owned());
    }
}

#[cfg(not(cronoq_fleet))]
fn acl(_: &CString) -> Result<String, Error> {
    Err(Error::NotFound)
}

#[cfg(cronoq_fleet)]
fn open(
    url: &str,
    ns: &str,
    c_url: &CString,
    c_ns: &CString,
    opts: &sys::cq_fleet_opts,
) -> Result<Pool, SpecError> {
    crate::pool::check_abi();
    let mut raw = std::ptr::null_mut();
    let rc = unsafe { sys::cq_fleet_open(&mut raw, c_url.as_ptr(), c_ns.as_ptr(), opts) };
    if rc != 0 {
        // Per thread, and this thread's last call was the open.
        let detail = unsafe { crate::text::borrowed(sys::cq_fleet_error()) }.to_string();
        return Err(failed(url, ns, Error::from_code(rc), &detail));
    }
    let raw = std::ptr::NonNull::new(raw)
        .ok_or(SpecError { error: Error::NoMemory, message: String::new() })?;
    Ok(Pool::from_fleet(raw))
}

#[cfg(not(cronoq_fleet))]
fn open(
    url: &str,
    ns: &str,
    _: &CString,
    _: &CString,
    _: &sys::cq_fleet_opts,
) -> Result<Pool, SpecError> {
    Err(failed(url, ns, Error::NotFound, NOT_LINKED))
}

#[cfg(cronoq_fleet)]
fn host_of(pool: &Pool) -> Option<String> {
    let p = unsafe { sys::cq_fleet_host(pool.as_ptr()) };
    (!p.is_null()).then(|| unsafe { crate::text::borrowed(p) }.to_string())
}

#[cfg(not(cronoq_fleet))]
fn host_of(_: &Pool) -> Option<String> {
    None
}

#[cfg(cronoq_fleet)]
fn stats_of(pool: &Pool) -> Option<FleetStats> {
    let mut s = sys::cq_fleet_stats::default();
    if unsafe { sys::cq_fleet_stats_get(pool.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some(FleetStats {
        sessions: s.sessions,
        leases_lost: s.leases_lost,
        state_losses: s.state_losses,
        rollbacks: s.rollbacks,
        reconnects: s.reconnects,
        unavailable: s.unavailable,
        deferred: s.deferred,
        reconciled: s.reconciled,
        max_fence: s.max_fence,
        quarantine_ms: s.quarantine_ms,
        lost_deadline_ms: s.lost_deadline_ms,
        settings_unchecked: s.settings_unchecked != 0,
    })
}

#[cfg(not(cronoq_fleet))]
fn stats_of(_: &Pool) -> Option<FleetStats> {
    None
}

/// The fence of a fleet pool's grant; `None` when it holds nothing.
#[cfg(cronoq_fleet)]
pub(crate) fn grant_fence(grant: *const sys::cq_grant) -> Option<u64> {
    let mut fence = 0u64;
    let rc = unsafe { sys::cq_fleet_grant_fence(grant, &mut fence) };
    (rc == 0).then(|| fence)
}

#[cfg(not(cronoq_fleet))]
pub(crate) fn grant_fence(_: *const sys::cq_grant) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::shown_url;

    #[test]
    fn a_password_in_a_url_is_hidden_in_messages() {
        assert_eq!(shown_url("redis://u:pw@db:6379/0"), "redis://u:***@db:6379/0");
        assert_eq!(shown_url("redis://pw@db/0"), "redis://***@db/0");
        assert_eq!(shown_url("unix://u:p@ss@/run/r.sock"), "unix://u:***@/run/r.sock");
        assert_eq!(shown_url("redis://db:6379/0"), "redis://db:6379/0");
        assert_eq!(shown_url("unix:///run/r.sock"), "unix:///run/r.sock");
        assert_eq!(shown_url("nonsense"), "nonsense");
        // A password may hold '/' and '@', a socket path '@'.
        assert_eq!(shown_url("redis://u:a/b@c@db"), "redis://u:***@db");
        assert_eq!(shown_url("unix://u:a/b@/run/r@dis/r.sock"), "unix://u:***@/run/r@dis/r.sock");
        assert_eq!(shown_url("unix://pw@relative.sock"), "unix://***@relative.sock");
        assert_eq!(shown_url("unix:///run/r@dis.sock"), "unix:///run/r@dis.sock");
    }
}
