//! Fleet pools: `Pool::connect` over `cq_fleet_open()`, and the fencing
//! token of a grant. Without libcronoq_fleet linked (cfg `cronoq_fleet`,
//! set by the build scripts) the same API exists and reports that.
use crate::text::c_string;
use crate::{Error, Pool, SpecError};
use cronoq_sys as sys;
use std::ffi::CString;
use std::os::raw::c_uint;

/// Options of [`Pool::connect`]; the default is the library's for each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetOptions {
    host: Option<String>,
    ttl_ms: i64,
    heartbeat_ms: i64,
    timeout_ms: i64,
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

fn flag(flags: c_uint, bit: c_uint, on: bool) -> c_uint {
    if on {
        flags | bit
    } else {
        flags & !bit
    }
}

/// `url` with its password, if it has one, as `***`: for messages.
fn shown_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i], &url[i + 3..]),
        None => return url.to_string(),
    };
    let path = rest.find('/').unwrap_or(rest.len());
    let at = match rest[..path].rfind('@') {
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
    /// hidden): `Error::Invalid` for a bad URL, namespace or option, the
    /// library's code for a server that cannot be reached (`Error::Sys`
    /// with this version of libcronoq), and `Error::NotFound` when this
    /// build has no fleet library linked.
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
        let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        let mut opts: sys::cq_fleet_opts = unsafe { std::mem::zeroed() };
        opts.flags = options.flags;
        opts.fleet_flags = options.fleet_flags;
        opts.host = ptr(&host);
        opts.ttl_ms = options.ttl_ms;
        opts.heartbeat_ms = options.heartbeat_ms;
        opts.timeout_ms = options.timeout_ms;
        opts.username = ptr(&username);
        opts.password = ptr(&password);
        open(url, namespace, &c_url, &c_ns, &opts)
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
    Err(failed(
        url,
        ns,
        Error::NotFound,
        "fleet pools are not built in: cronoq-sys found no libcronoq_fleet.a when it was \
         built (build libcronoq with hiredis, CMake option CRONOQ_WITH_FLEET, or set \
         CRONOQ_FLEET_LIB_DIR)",
    ))
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
    }
}
