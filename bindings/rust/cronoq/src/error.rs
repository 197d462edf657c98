//! The library's error codes as a Rust enum, and the error of the calls that
//! also explain themselves in words (resource and request specs).
use cronoq_sys as sys;
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

/// What went wrong: one variant per `CQ_E...` code of the C header, whose
/// description of each call says which codes it returns. A failed call
/// changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// `CQ_EINVAL`: an invalid argument (a bad name, a name longer than 63
    /// bytes or with a NUL byte).
    Invalid,
    /// `CQ_ENOMEM`: out of memory.
    NoMemory,
    /// `CQ_EBUSY`: a try found the units taken, or withheld for an older
    /// waiter; on a fleet pool also while its namespace is quarantined
    /// (just created by the server: see
    /// [`FleetOptions::new_namespace`](crate::FleetOptions::new_namespace)).
    Busy,
    /// `CQ_ETIMEDOUT`: the deadline passed before the request was granted.
    TimedOut,
    /// `CQ_ECANCELED`: the waiting attempt was cancelled.
    Cancelled,
    /// `CQ_ECLOSED`: the pool is closed.
    Closed,
    /// `CQ_ENEVER`: the request exceeds a capacity and can never be granted.
    /// [`Pool::validate`](crate::Pool::validate) says which and by how much.
    Never,
    /// `CQ_ENOENT`: no such resource (or one the grant does not hold).
    NotFound,
    /// `CQ_EEXIST`: the name is taken (pool) or already named (request).
    Exists,
    /// `CQ_EINUSE`: refused while units are held or attempts wait; for a
    /// [`Request`](crate::Request), while an attempt made with it waits.
    InUse,
    /// `CQ_ESTATE`: not in a state that allows this. Also returned by
    /// [`Pool::acquire`](crate::Pool::acquire) when called from inside a
    /// grant callback (a waker the library wakes), where blocking is
    /// forbidden.
    State,
    /// `CQ_EPOOL`: the request belongs to another pool.
    WrongPool,
    /// `CQ_ERANGE`: a value out of range (zero or negative amount,
    /// capacity too large, more than the grant holds).
    Range,
    /// `CQ_ETOOMANY`: more than 16 resources in one request, or a full pool.
    TooMany,
    /// `CQ_ESYS`: a system call failed (thread or semaphore creation).
    Sys,
    /// `CQ_EPARSE`: text could not be parsed.
    Parse,
    /// `CQ_EUNAVAILABLE`: a fleet pool's server cannot be reached, or the
    /// session was lost while the call was under way; nothing was granted.
    /// (A namespace quarantined after the server lost its state answers
    /// `Busy`.)
    Unavailable,
    /// `CQ_EACCES`: a fleet pool's server refused this user (a wrong or
    /// missing password) or a permission (an ACL that does not allow a
    /// command or a key); nothing was done.
    AccessDenied,
    /// A code this crate does not know (from a newer library).
    Unknown(i32),
}

impl Error {
    /// The error for a negative code of the C API.
    pub fn from_code(code: i32) -> Error {
        match code {
            sys::CQ_EINVAL => Error::Invalid,
            sys::CQ_ENOMEM => Error::NoMemory,
            sys::CQ_EBUSY => Error::Busy,
            sys::CQ_ETIMEDOUT => Error::TimedOut,
            sys::CQ_ECANCELED => Error::Cancelled,
            sys::CQ_ECLOSED => Error::Closed,
            sys::CQ_ENEVER => Error::Never,
            sys::CQ_ENOENT => Error::NotFound,
            sys::CQ_EEXIST => Error::Exists,
            sys::CQ_EINUSE => Error::InUse,
            sys::CQ_ESTATE => Error::State,
            sys::CQ_EPOOL => Error::WrongPool,
            sys::CQ_ERANGE => Error::Range,
            sys::CQ_ETOOMANY => Error::TooMany,
            sys::CQ_ESYS => Error::Sys,
            sys::CQ_EPARSE => Error::Parse,
            sys::CQ_EUNAVAILABLE => Error::Unavailable,
            sys::CQ_EACCES => Error::AccessDenied,
            other => Error::Unknown(other),
        }
    }

    /// The C code (`CQ_EBUSY` is -3).
    pub fn code(self) -> i32 {
        match self {
            Error::Invalid => sys::CQ_EINVAL,
            Error::NoMemory => sys::CQ_ENOMEM,
            Error::Busy => sys::CQ_EBUSY,
            Error::TimedOut => sys::CQ_ETIMEDOUT,
            Error::Cancelled => sys::CQ_ECANCELED,
            Error::Closed => sys::CQ_ECLOSED,
            Error::Never => sys::CQ_ENEVER,
            Error::NotFound => sys::CQ_ENOENT,
            Error::Exists => sys::CQ_EEXIST,
            Error::InUse => sys::CQ_EINUSE,
            Error::State => sys::CQ_ESTATE,
            Error::WrongPool => sys::CQ_EPOOL,
            Error::Range => sys::CQ_ERANGE,
            Error::TooMany => sys::CQ_ETOOMANY,
            Error::Sys => sys::CQ_ESYS,
            Error::Parse => sys::CQ_EPARSE,
            Error::Unavailable => sys::CQ_EUNAVAILABLE,
            Error::AccessDenied => sys::CQ_EACCES,
            Error::Unknown(code) => code,
        }
    }

    /// The code's name as the C library gives it, without `CQ_` ("EBUSY").
    pub fn name(self) -> &'static str {
        static_str(unsafe { sys::cq_err_name(self.code()) })
    }
}

/// 0 is success; anything else is the error of that code.
#[inline]
pub(crate) fn check(rc: c_int) -> Result<(), Error> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::from_code(rc))
    }
}

/// The library's strings for codes are static and ASCII.
fn static_str(p: *const std::os::raw::c_char) -> &'static str {
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("?")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Unknown(code) => write!(f, "unknown error code {}", code),
            e => f.write_str(static_str(unsafe { sys::cq_strerror(e.code()) })),
        }
    }
}

impl std::error::Error for Error {}

/// The error of a call that explains itself: the code, and the library's
/// message, such as `resource spec: expected '=' after "warehouse-db" at
/// column 13`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    pub error: Error,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.error)
        } else {
            write!(f, "{} ({})", self.message, self.error.name())
        }
    }
}

impl std::error::Error for SpecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<SpecError> for Error {
    fn from(e: SpecError) -> Error {
        e.error
    }
}
