//! Errors: the negative errno of a tally call and the sentence that
//! `tally_errmsg()` gave for it.

use std::ffi::CStr;
use std::fmt;

/// A failed tally call: its errno and the library's one-sentence message.
///
/// ```
/// let err = tally::Zone::create("bad name!", &tally::ZoneOptions::new().anonymous()).unwrap_err();
/// assert_eq!(err.errno(), libc_einval());
/// # fn libc_einval() -> i32 { 22 }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    errno: i32,
    message: String,
}

/// `Result<T, tally::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) const EINVAL: i32 = 22;

impl Error {
    /// An error with this errno and message.
    pub(crate) fn new(errno: i32, message: impl Into<String>) -> Error {
        Error {
            errno,
            message: message.into(),
        }
    }

    /// The error of the last failed tally call of this thread: `errno`
    /// (positive) and `tally_errmsg()`.
    pub(crate) fn last(errno: i32) -> Error {
        // SAFETY: tally_errmsg() returns a thread-local NUL-terminated
        // string, valid until the next failing call of this thread.
        let msg = unsafe { CStr::from_ptr(crate::sys::tally_errmsg()) };
        let mut message = msg.to_string_lossy().into_owned();
        if message.is_empty() {
            message = std::io::Error::from_raw_os_error(errno).to_string();
        }
        Error { errno, message }
    }

    /// The error of a constructor that returned NULL and set `errno`.
    pub(crate) fn from_os() -> Error {
        Error::last(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(EINVAL),
        )
    }

    /// The errno (positive): `EINVAL` (22) for a bad name, label or
    /// argument, `E2BIG` (7) for a string over its limit, `ENOSPC` (28)
    /// for a full zone or file system, and the others of tally(3).
    ///
    /// ```
    /// let zone = tally::Zone::create("err_errno", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// let e = zone.try_counter(&tally::Desc::new("bad-name")).unwrap_err();
    /// assert_eq!(e.errno(), 22);
    /// ```
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// The sentence saying what was wrong.
    ///
    /// ```
    /// let zone = tally::Zone::create("err_msg", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// let e = zone.try_counter(&tally::Desc::new("bad-name")).unwrap_err();
    /// assert!(!e.message().is_empty());
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (errno {})", self.message, self.errno)
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        std::io::Error::new(std::io::Error::from_raw_os_error(e.errno).kind(), e.message)
    }
}
