//! Zones: the shared-memory regions that hold the series and their
//! per-CPU copies (include/tally/zone.h).

use std::ffi::{CStr, CString};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::{Error, Result, EINVAL};
use crate::sys;

/// How to create a zone (struct tally_zone_opts).  The default is a file
/// in `$TALLY_DIR` that readers see, removed when the process exits.
///
/// ```
/// let opts = tally::ZoneOptions::new().capacity(4096).max_series(1000);
/// let zone = tally::Zone::create("opts_doc", &opts.anonymous()).unwrap();
/// # let _ = zone;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ZoneOptions {
    capacity: usize,
    max_series: usize,
    flags: u32,
}

impl ZoneOptions {
    /// The defaults: capacity `$TALLY_ZONE_SLOTS` or 4,194,304 slots, up
    /// to 1,048,576 series, a file that readers see.
    ///
    /// ```
    /// let _ = tally::ZoneOptions::new();
    /// ```
    pub fn new() -> ZoneOptions {
        ZoneOptions::default()
    }

    /// No file: a zone that no reader sees (for tests and private
    /// counters).
    ///
    /// ```
    /// let zone = tally::Zone::create("anon_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// assert_eq!(zone.path(), None);
    /// ```
    pub fn anonymous(mut self) -> ZoneOptions {
        self.flags |= sys::TALLY_ZONE_ANON;
        self
    }

    /// The number of 64-bit slots the zone can hand out (rounded up to
    /// whole chunks of 504); 0 for the default.
    ///
    /// ```
    /// let _ = tally::ZoneOptions::new().capacity(504);
    /// ```
    pub fn capacity(mut self, slots: usize) -> ZoneOptions {
        self.capacity = slots;
        self
    }

    /// The number of named series the zone can hold; 0 for the default.
    ///
    /// ```
    /// let _ = tally::ZoneOptions::new().max_series(100);
    /// ```
    pub fn max_series(mut self, n: usize) -> ZoneOptions {
        self.max_series = n;
        self
    }

    /// Keep the file when the last user exits (TALLY_ZONE_PERSIST).
    ///
    /// ```
    /// let _ = tally::ZoneOptions::new().persist();
    /// ```
    pub fn persist(mut self) -> ZoneOptions {
        self.flags |= sys::TALLY_ZONE_PERSIST;
        self
    }

    /// One zone of this name for every process of the user
    /// (TALLY_ZONE_SHARED): attach it, or create it.
    ///
    /// ```
    /// let _ = tally::ZoneOptions::new().shared();
    /// ```
    pub fn shared(mut self) -> ZoneOptions {
        self.flags |= sys::TALLY_ZONE_SHARED;
        self
    }
}

pub(crate) struct ZoneInner {
    ptr: NonNull<sys::tally_zone>,
    owned: bool,
}

// SAFETY: every tally_zone function is MT-safe; the zone is destroyed
// only when the last Arc goes, when no handle of it is left.
unsafe impl Send for ZoneInner {}
unsafe impl Sync for ZoneInner {}

impl Drop for ZoneInner {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: the last reference: no handle of the zone is left
            // (each holds a Zone), so no thread uses it any more.
            unsafe { sys::tally_zone_destroy(self.ptr.as_ptr()) };
        }
    }
}

/// A zone.  Cloning it is cheap (a reference count); the zone is
/// destroyed, and its file removed unless it persists, when the last
/// clone and the last handle registered in it are gone: handles hold
/// their zone, so they can never outlive it.
///
/// `Zone` is `Send` and `Sync`: the C zone API is MT-safe.
///
/// ```
/// let zone = tally::Zone::create("zone_doc", &tally::ZoneOptions::new().anonymous())?;
/// let requests = zone.try_counter(&tally::Desc::new("requests_total").help("Requests."))?;
/// requests.increment(1);
/// assert_eq!(requests.value(), 1);
/// # Ok::<(), tally::Error>(())
/// ```
#[derive(Clone)]
pub struct Zone {
    pub(crate) inner: Arc<ZoneInner>,
}

impl std::fmt::Debug for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zone").field("path", &self.path()).finish()
    }
}

pub(crate) fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(
            EINVAL,
            format!("the {what} '{}' holds a NUL character", s.escape_debug()),
        )
    })
}

impl Zone {
    /// Creates the zone `name` (1 to 63 characters of `[A-Za-z0-9_.-]`,
    /// not starting with a dot): the file
    /// `$TALLY_DIR/<name>.<pid>.<id>.tally`, or `$TALLY_DIR/<name>.tally`
    /// for a shared zone (which this attaches when it exists).
    ///
    /// Errors: `EINVAL` (bad name, capacity or flags), `EEXIST` (a zone
    /// of that name exists in this process), `ENOSPC` and the others of
    /// `tally_zone_create()`.
    ///
    /// ```
    /// let zone = tally::Zone::create("create_doc", &tally::ZoneOptions::new().anonymous())?;
    /// assert!(tally::Zone::create("no/slash", &tally::ZoneOptions::new().anonymous()).is_err());
    /// # drop(zone); Ok::<(), tally::Error>(())
    /// ```
    pub fn create(name: &str, opts: &ZoneOptions) -> Result<Zone> {
        let cname = cstring("zone name", name)?;
        let o = sys::tally_zone_opts {
            capacity: opts.capacity,
            max_series: opts.max_series,
            flags: opts.flags,
        };
        // SAFETY: valid NUL-terminated name and options.
        let z = unsafe { sys::tally_zone_create(cname.as_ptr(), &o) };
        match NonNull::new(z) {
            Some(ptr) => Ok(Zone {
                inner: Arc::new(ZoneInner { ptr, owned: true }),
            }),
            None => Err(Error::from_os()),
        }
    }

    /// Attaches (or creates) the shared zone `name`, which every process
    /// of the user asking for it by name adds into.
    ///
    /// ```no_run
    /// let zone = tally::Zone::shared("web")?;
    /// # Ok::<(), tally::Error>(())
    /// ```
    pub fn shared(name: &str) -> Result<Zone> {
        Zone::create(name, &ZoneOptions::new().shared())
    }

    /// The process's default zone (named after the process, or the
    /// shared zone `$TALLY_ZONE`), created on first use; it lives as long
    /// as the process.
    ///
    /// ```no_run
    /// let zone = tally::Zone::default_zone()?;
    /// # Ok::<(), tally::Error>(())
    /// ```
    pub fn default_zone() -> Result<Zone> {
        // SAFETY: no arguments; MT-safe.
        let z = unsafe { sys::tally_zone_default() };
        match NonNull::new(z) {
            Some(ptr) => Ok(Zone {
                inner: Arc::new(ZoneInner { ptr, owned: false }),
            }),
            None => Err(Error::from_os()),
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::tally_zone {
        self.inner.ptr.as_ptr()
    }

    /// The zone's file, or `None` for an anonymous zone.
    ///
    /// ```
    /// let zone = tally::Zone::create("path_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// assert!(zone.path().is_none());
    /// ```
    pub fn path(&self) -> Option<std::path::PathBuf> {
        // SAFETY: the string lives as long as the zone, which self holds.
        let p = unsafe { CStr::from_ptr(sys::tally_zone_path(self.as_ptr())) };
        let b = p.to_bytes();
        if b.is_empty() {
            None
        } else {
            use std::os::unix::ffi::OsStrExt;
            Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b)))
        }
    }

    /// What the zone really uses (`tally_zone_usage()`).
    ///
    /// ```
    /// let zone = tally::Zone::create("usage_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// assert!(zone.usage().unwrap().nslabs >= 1);
    /// ```
    pub fn usage(&self) -> Result<ZoneUsage> {
        let mut u = sys::tally_zone_usage::default();
        // SAFETY: live zone, valid out pointer.
        let rc = unsafe { sys::tally_zone_usage(self.as_ptr(), &mut u) };
        if rc < 0 {
            return Err(Error::last(-rc));
        }
        Ok(ZoneUsage {
            resident_bytes: u.resident_bytes,
            mapped_bytes: u.mapped_bytes,
            chunks_used: u.chunks_used,
            chunks_total: u.chunks_total,
            nslabs: u.nslabs,
            nnodes: u.nnodes,
        })
    }
}

/// What a zone uses, from [`Zone::usage`].
///
/// ```
/// let zone = tally::Zone::create("zusage_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
/// let c = zone.counter(&tally::Desc::new("c_total"));
/// c.increment(1);
/// let u = zone.usage().unwrap();
/// assert!(u.chunks_used >= 1 && u.chunks_used <= u.chunks_total);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneUsage {
    /// Bytes of memory the file really holds.
    pub resident_bytes: u64,
    /// The size of the mapping (virtual).
    pub mapped_bytes: u64,
    /// Chunks handed out to blocks.
    pub chunks_used: u64,
    /// The zone's capacity in chunks.
    pub chunks_total: u64,
    /// Per-CPU copies of each slot.
    pub nslabs: u32,
    /// NUMA nodes seen (or forced).
    pub nnodes: u32,
}

/// Whether this thread's adds use restartable sequences (`false` with
/// `TALLY_NO_RSEQ=1`, without glibc's rseq, under valgrind, or on a CPU
/// beyond the slab count): the fallback is slower, still lossless.
///
/// ```
/// let _uses_rseq: bool = tally::rseq_active();
/// ```
pub fn rseq_active() -> bool {
    // SAFETY: no arguments; MT-safe.
    unsafe { sys::tally_rseq_active() == 1 }
}
