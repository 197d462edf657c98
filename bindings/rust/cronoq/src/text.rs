//! Strings for the C API. Resource names (at most 63 bytes) are copied into
//! a buffer on the stack, so that naming a resource on the grant paths
//! (partial release, held units) never allocates; longer text (specs,
//! device ids) becomes a `CString`.
use crate::Error;
use cronoq_sys as sys;
use std::ffi::{CStr, CString};
use std::os::raw::c_char;

pub(crate) struct Name {
    buf: [u8; sys::CQ_NAME_MAX + 1],
}

impl Name {
    /// A name the library could accept: too long, or holding a NUL byte, is
    /// `Error::Invalid`, as the library itself would answer.
    #[inline]
    pub(crate) fn new(s: &str) -> Result<Name, Error> {
        let bytes = s.as_bytes();
        if bytes.len() > sys::CQ_NAME_MAX || bytes.contains(&0) {
            return Err(Error::Invalid);
        }
        let mut buf = [0u8; sys::CQ_NAME_MAX + 1];
        buf[..bytes.len()].copy_from_slice(bytes);
        Ok(Name { buf })
    }

    #[inline]
    pub(crate) fn ptr(&self) -> *const c_char {
        self.buf.as_ptr() as *const c_char
    }
}

/// An optional name: `None` is NULL ("the first device pool").
pub(crate) fn optional_name(s: Option<&str>) -> Result<Option<Name>, Error> {
    s.map(Name::new).transpose()
}

pub(crate) fn name_ptr(n: &Option<Name>) -> *const c_char {
    n.as_ref().map_or(std::ptr::null(), Name::ptr)
}

pub(crate) fn c_string(s: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::Invalid)
}

/// A string the library owns, valid while its object is.
pub(crate) unsafe fn borrowed<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        return "";
    }
    CStr::from_ptr(p).to_str().unwrap_or("")
}

/// A fixed-size C array holding a NUL-terminated string.
pub(crate) fn from_array(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
