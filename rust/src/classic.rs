//! Classic histograms (the application's own bucket bounds, as
//! prometheus_client's) and summaries (a count and a sum), and their
//! label families: the Rust side of tally_chistogram_* and tally_summary_*
//! (include/tally/metrics.h, include/tally/family.h).  Their handle is a
//! tally_chistogram, which holds the bounds besides the metric, so they
//! have their own registration and handle types here.

use std::marker::PhantomData;
use std::os::raw::c_uint;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::family::{family_get_with, register_family_with, FamilyInner};
use crate::metric::{CDesc, Desc};
use crate::sys;
use crate::zone::Zone;

/// One registration of a classic histogram's or summary's series: removed
/// (one reference given back) when the last handle made from it goes.
struct ClassicReg {
    h: sys::tally_chistogram,
    registered: bool,
    _zone: Zone,
}

// SAFETY: the C calls on the handle are MT-safe; the registration is
// removed once, in Drop, when no handle uses it.
unsafe impl Send for ClassicReg {}
unsafe impl Sync for ClassicReg {}

impl Drop for ClassicReg {
    fn drop(&mut self) {
        if self.registered {
            // SAFETY: the last handle of this registration is gone; the
            // metric is the handle's first member, as tally_metric_remove()
            // takes it for every kind.
            unsafe { sys::tally_metric_remove(&mut self.h.metric) };
        }
    }
}

/// What keeps a handle's series and zone alive (held for its Drop).
#[derive(Clone)]
#[allow(dead_code)]
enum Keep {
    Series(Arc<ClassicReg>),
    Family(Arc<FamilyInner>),
}

/// Registers `d` as `kind` through `f` (the C registration, given a live
/// zone, description and handle): the registration, a discarding one when
/// it failed, and the error.
fn register_classic(
    zone: &Zone,
    d: &Desc,
    kind: c_uint,
    f: impl Fn(*mut sys::tally_zone, *const sys::tally_metric_desc, *mut sys::tally_chistogram) -> i32,
) -> (Arc<ClassicReg>, Option<Error>) {
    let mut h = sys::tally_chistogram {
        metric: sys::tally_metric::zeroed(),
        bounds: std::ptr::null(),
        nbounds: 0,
    };
    let (rc, err) = match CDesc::new(d, kind) {
        Ok(cd) => {
            let rc = f(zone.as_ptr(), &cd.raw, &mut h);
            (rc, if rc < 0 { Some(Error::last(-rc)) } else { None })
        }
        Err(e) => {
            // A NUL in a string: let the library make its discarding
            // handle and count the failure, as for any bad name.
            let bad = sys::tally_metric_desc {
                kind,
                name: c"".as_ptr(),
                help: std::ptr::null(),
                unit: std::ptr::null(),
                labels: std::ptr::null(),
                nlabels: 0,
                mode: 0,
                hist_sub_bits: 0,
                hist_max_bits: 0,
            };
            f(zone.as_ptr(), &bad, &mut h);
            (-e.errno(), Some(e))
        }
    };
    let reg = ClassicReg {
        h,
        registered: rc == 0,
        _zone: zone.clone(),
    };
    (Arc::new(reg), err)
}

/// The count and sum of a handle, and its buckets into `buckets` when it
/// is not empty (it holds nbounds + 1 then); None when discarding.
///
/// # Safety
///
/// `h` points at a filled handle that lives until this returns.
unsafe fn fetch(h: *const sys::tally_chistogram, buckets: &mut [i64]) -> Option<(i64, f64)> {
    let (mut count, mut sum) = (0i64, 0f64);
    let b = if buckets.is_empty() {
        std::ptr::null_mut()
    } else {
        buckets.as_mut_ptr()
    };
    // SAFETY: as the caller promises; `buckets` is empty or holds the
    // handle's nbounds + 1 counts.
    let rc = unsafe { sys::tally_chistogram_fetch(h, &mut count, &mut sum, b) };
    (rc == 0).then_some((count, sum))
}

macro_rules! classic_types {
    ($owned:ident, $borrowed:ident, $what:literal, $doc:literal, $example:literal) => {
        #[doc = $doc]
        ///
        /// Cloning is a reference count; the series' registration is given
        /// back when the last clone is dropped.  It holds its zone, so it
        /// cannot outlive it.  `Send` and `Sync`: an observation is three
        /// lock-free per-CPU adds, exact from any thread.
        ///
        /// ```
        #[doc = $example]
        /// ```
        #[derive(Clone)]
        pub struct $owned {
            h: *const sys::tally_chistogram,
            // Held for its Drop: it keeps the series and zone alive.
            #[allow(dead_code)]
            keep: Keep,
        }

        #[doc = concat!("A ", $what, " borrowed from a label family (or from an owned handle): the same updates, valid while the family lives.")]
        #[derive(Clone, Copy)]
        pub struct $borrowed<'f> {
            h: *const sys::tally_chistogram,
            _life: PhantomData<&'f ()>,
        }

        // SAFETY: observations are MT-safe and the handle keeps (or, for
        // the borrowed one, borrows) its series and zone.
        unsafe impl Send for $owned {}
        unsafe impl Sync for $owned {}
        unsafe impl Send for $borrowed<'_> {}
        unsafe impl Sync for $borrowed<'_> {}

        impl std::fmt::Debug for $owned {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($owned)).field("discarding", &self.is_discarding()).finish()
            }
        }

        impl std::fmt::Debug for $borrowed<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($borrowed)).field("discarding", &self.is_discarding()).finish()
            }
        }

        impl $owned {
            fn from_registration(reg: Arc<ClassicReg>) -> $owned {
                $owned { h: &reg.h, keep: Keep::Series(reg) }
            }

            #[doc = concat!("A borrowed copy of this ", $what, ", for code that should not hold a reference count.")]
            pub fn borrow(&self) -> $borrowed<'_> {
                $borrowed { h: self.h, _life: PhantomData }
            }
        }

        impl $owned {
            classic_methods!($what);
        }
        impl $borrowed<'_> {
            classic_methods!($what);
        }
    };
}

macro_rules! classic_methods {
    ($what:literal) => {
        /// Counts `v` (in the first bucket whose bound is at least `v`,
        /// for a classic histogram) and adds it to the sum, exactly to
        /// 10^-9; a NaN is not counted.
        #[inline]
        pub fn observe(&self, v: f64) {
            // SAFETY: the handle is alive (a discarding one too), kept or
            // borrowed by self.
            unsafe { sys::tally_chistogram_observe(self.h, v) }
        }

        /// The number of observations in this process (0 when
        /// discarding).
        pub fn count(&self) -> i64 {
            // SAFETY: the handle is alive.
            unsafe { fetch(self.h, &mut []) }.map_or(0, |(c, _)| c)
        }

        /// The sum of the observations in this process (0.0 when
        /// discarding).
        pub fn sum(&self) -> f64 {
            // SAFETY: the handle is alive.
            unsafe { fetch(self.h, &mut []) }.map_or(0.0, |(_, s)| s)
        }

        #[doc = concat!("Whether this ", $what, " discards its updates (its registration failed).")]
        pub fn is_discarding(&self) -> bool {
            // SAFETY: the handle is alive.
            unsafe { fetch(self.h, &mut []) }.is_none()
        }
    };
}

macro_rules! bounds_methods {
    () => {
        /// The finite bucket upper bounds (the +Inf bucket is past them);
        /// empty when discarding.
        pub fn bounds(&self) -> &[f64] {
            // SAFETY: the bounds live in the zone's metric record, which
            // never changes and lives as long as the handle.
            let h = unsafe { &*self.h };
            if h.bounds.is_null() || h.nbounds == 0 {
                return &[];
            }
            // SAFETY: as above; nbounds doubles at bounds.
            unsafe { std::slice::from_raw_parts(h.bounds, h.nbounds as usize) }
        }

        /// The count of each bucket in this process, not cumulative: one
        /// per bound (the values above the bound before it and at or
        /// below it) and a last one for the values above every bound.
        /// Empty when discarding.
        pub fn buckets(&self) -> Vec<i64> {
            let mut b = vec![0i64; self.bounds().len() + 1];
            // SAFETY: the handle is alive; b holds nbounds + 1 counts.
            match unsafe { fetch(self.h, &mut b) } {
                Some(_) => b,
                None => Vec::new(),
            }
        }
    };
}

classic_types!(
    ClassicHistogram,
    ClassicHistogramRef,
    "classic histogram",
    "A classic histogram (TALLY_CHISTOGRAM, format 2.6): the application's own finite bucket bounds and a +Inf bucket, a value equal to a bound counted in that bound's bucket, and a floating-point sum.",
    "let zone = tally::Zone::create(\"chist_doc\", &tally::ZoneOptions::new().anonymous())?;
let h = zone.try_classic_histogram(&tally::Desc::new(\"latency_seconds\"), &[0.1, 0.5, 1.0])?;
h.observe(0.5);
h.observe(2.0);
assert_eq!(h.buckets(), vec![0, 1, 0, 1]);
assert_eq!(h.sum(), 2.5);
# Ok::<(), tally::Error>(())"
);
classic_types!(
    Summary,
    SummaryRef,
    "summary",
    "A summary (TALLY_SUMMARY, format 2.7): the count and the floating-point sum of the observations, no quantiles.",
    "let zone = tally::Zone::create(\"summary_doc\", &tally::ZoneOptions::new().anonymous())?;
let s = zone.try_summary(&tally::Desc::new(\"request_size_bytes\"))?;
s.observe(512.0);
s.observe(1024.5);
assert_eq!((s.count(), s.sum()), (2, 1536.5));
# Ok::<(), tally::Error>(())"
);

impl ClassicHistogram {
    bounds_methods!();
}
impl ClassicHistogramRef<'_> {
    bounds_methods!();
}

/// The C registration of a classic histogram of these bounds.
fn chistogram_register(
    bounds: &[f64],
) -> impl Fn(*mut sys::tally_zone, *const sys::tally_metric_desc, *mut sys::tally_chistogram) -> i32 + '_
{
    move |z, d, h| {
        // SAFETY: register_classic() passes a live zone, description and
        // handle; `bounds` is alive and holds nbounds doubles
        // (the library refuses more than TALLY_CHISTOGRAM_BOUNDS_MAX).
        unsafe { sys::tally_chistogram_register(z, d, bounds.as_ptr(), bounds.len() as c_uint, h) }
    }
}

fn summary_register(
    z: *mut sys::tally_zone,
    d: *const sys::tally_metric_desc,
    h: *mut sys::tally_chistogram,
) -> i32 {
    // SAFETY: register_classic() passes a live zone, description and
    // handle.
    unsafe { sys::tally_summary_register(z, d, h) }
}

impl Zone {
    /// Gets or creates the classic histogram `d` whose finite bucket
    /// upper bounds are `bounds` (strictly increasing and finite, at most
    /// 40; a +Inf bucket is always added, so a last bound of +Inf is
    /// dropped), as [`Zone::try_histogram`] does for its kind; its help
    /// may be 511 bytes at most.  The same name with other bounds is
    /// another definition (a new generation of the name).
    ///
    /// Errors: `EINVAL` for bounds that are not finite and strictly
    /// increasing (a NaN among them), `E2BIG` for more than 40 bounds or
    /// too long a help, `EPROTONOSUPPORT` in a zone made by a libtally
    /// older than format 2.6, and those of [`Zone::try_histogram`].
    ///
    /// ```
    /// let zone = tally::Zone::create("trych_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// let d = tally::Desc::new("latency_seconds").help("Latency.");
    /// assert!(zone.try_classic_histogram(&d, &[0.1, 0.5, 1.0]).is_ok());
    /// assert_eq!(zone.try_classic_histogram(&d, &[1.0, 0.5]).unwrap_err().errno(), 22);
    /// ```
    pub fn try_classic_histogram(&self, d: &Desc, bounds: &[f64]) -> Result<ClassicHistogram> {
        let (reg, err) =
            register_classic(self, d, sys::TALLY_CHISTOGRAM, chistogram_register(bounds));
        match err {
            None => Ok(ClassicHistogram::from_registration(reg)),
            Some(e) => Err(e),
        }
    }

    /// The classic histogram `d` of these bounds, or a handle that
    /// discards its updates when it cannot be registered.
    pub fn classic_histogram(&self, d: &Desc, bounds: &[f64]) -> ClassicHistogram {
        let f = chistogram_register(bounds);
        ClassicHistogram::from_registration(register_classic(self, d, sys::TALLY_CHISTOGRAM, f).0)
    }

    /// Gets or creates the summary `d`, as [`Zone::try_histogram`] does
    /// for its kind; its help may be 511 bytes at most.  A classic
    /// histogram of the same name is another definition.
    ///
    /// Errors: those of [`Zone::try_histogram`], and `EPROTONOSUPPORT` in
    /// a zone made by a libtally older than format 2.6.
    ///
    /// ```
    /// let zone = tally::Zone::create("trysum_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// assert!(zone.try_summary(&tally::Desc::new("sizes")).is_ok());
    /// assert!(zone.try_summary(&tally::Desc::new("bad name")).is_err());
    /// ```
    pub fn try_summary(&self, d: &Desc) -> Result<Summary> {
        let (reg, err) = register_classic(self, d, sys::TALLY_SUMMARY, summary_register);
        match err {
            None => Ok(Summary::from_registration(reg)),
            Some(e) => Err(e),
        }
    }

    /// The summary `d`, or a handle that discards its updates when it
    /// cannot be registered.
    pub fn summary(&self, d: &Desc) -> Summary {
        Summary::from_registration(
            register_classic(self, d, sys::TALLY_SUMMARY, summary_register).0,
        )
    }
}

macro_rules! classic_family {
    ($fam:ident, $owned:ident, $borrowed:ident, $get:path, $what:literal, $example:literal) => {
        #[doc = concat!("A label family of ", $what, ": one series per set of values of its label names.")]
        ///
        /// Cloning is a reference count; the family and every child it
        /// made are removed when the last clone and the last owned child
        /// are gone.  `Send` and `Sync`.
        ///
        /// ```
        #[doc = $example]
        /// ```
        #[derive(Clone)]
        pub struct $fam {
            inner: Arc<FamilyInner>,
        }

        impl std::fmt::Debug for $fam {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($fam)).finish()
            }
        }

        impl $fam {
            fn lookup(&self, values: &[&str]) -> (*const sys::tally_chistogram, Option<Error>) {
                family_get_with(&self.inner, values, |f, p, n, h| {
                    // SAFETY: family_get_with() passes a live family,
                    // values and out pointer.
                    unsafe { $get(f, p, n, h) }
                })
            }

            /// The child of these label values (in the order of the
            /// family's names), registered first when this process has
            /// not asked for it yet.  Errors: `EINVAL` for a wrong number
            /// of values, a NUL or a value that is not UTF-8, `E2BIG`,
            /// and those of a registration; never a panic.
            pub fn get(&self, values: &[&str]) -> Result<$borrowed<'_>> {
                match self.lookup(values) {
                    (h, None) => Ok($borrowed { h, _life: PhantomData }),
                    (_, Some(e)) => Err(e),
                }
            }

            /// The child of these label values, or a handle that discards
            /// its updates when it cannot be had.
            pub fn with_labels(&self, values: &[&str]) -> $borrowed<'_> {
                $borrowed { h: self.lookup(values).0, _life: PhantomData }
            }

            /// The child as an owned handle, which keeps the family alive.
            pub fn get_owned(&self, values: &[&str]) -> Result<$owned> {
                match self.lookup(values) {
                    (h, None) => Ok($owned { h, keep: Keep::Family(self.inner.clone()) }),
                    (_, Some(e)) => Err(e),
                }
            }
        }
    };
}

classic_family!(
    ClassicHistogramFamily,
    ClassicHistogram,
    ClassicHistogramRef,
    sys::tally_chistogram_family_get,
    "classic histograms",
    "let zone = tally::Zone::create(\"chfam_doc\", &tally::ZoneOptions::new().anonymous())?;
let f = zone.try_classic_histogram_family(
    &tally::Desc::new(\"latency_seconds\"), &[0.1, 1.0], &[\"route\"])?;
f.get(&[\"/\"])?.observe(0.1);
assert_eq!(f.get(&[\"/\"])?.buckets(), vec![1, 0, 0]);
# Ok::<(), tally::Error>(())"
);
classic_family!(
    SummaryFamily,
    Summary,
    SummaryRef,
    sys::tally_summary_family_get,
    "summaries",
    "let zone = tally::Zone::create(\"sumfam_doc\", &tally::ZoneOptions::new().anonymous())?;
let f = zone.try_summary_family(&tally::Desc::new(\"request_size_bytes\"), &[\"route\"])?;
f.get(&[\"/\"])?.observe(100.0);
assert_eq!(f.get(&[\"/\"])?.count(), 1);
# Ok::<(), tally::Error>(())"
);

impl Zone {
    /// Makes a label family of classic histograms described by `d`,
    /// whose children all have the bounds `bounds` and add the labels
    /// `names`.  Errors: those of [`Zone::try_classic_histogram`] for the
    /// bounds, and those of [`Zone::try_histogram_family`].
    ///
    /// ```
    /// let zone = tally::Zone::create("chfam_try_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// let d = tally::Desc::new("f");
    /// assert!(zone.try_classic_histogram_family(&d, &[f64::NAN], &["k"]).is_err());
    /// ```
    pub fn try_classic_histogram_family(
        &self,
        d: &Desc,
        bounds: &[f64],
        names: &[&str],
    ) -> Result<ClassicHistogramFamily> {
        let (inner, err) = self.register_chistogram_family(d, bounds, names);
        match err {
            None => Ok(ClassicHistogramFamily { inner }),
            Some(e) => Err(e),
        }
    }

    /// A label family of classic histograms, or, when it cannot be made,
    /// one whose children discard their updates.
    pub fn classic_histogram_family(
        &self,
        d: &Desc,
        bounds: &[f64],
        names: &[&str],
    ) -> ClassicHistogramFamily {
        ClassicHistogramFamily {
            inner: self.register_chistogram_family(d, bounds, names).0,
        }
    }

    fn register_chistogram_family(
        &self,
        d: &Desc,
        bounds: &[f64],
        names: &[&str],
    ) -> (Arc<FamilyInner>, Option<Error>) {
        register_family_with(self, d, names, sys::TALLY_CHISTOGRAM, |z, cd, p, n, f| {
            let (b, nb) = (bounds.as_ptr(), bounds.len() as c_uint);
            // SAFETY: register_family_with() passes a live zone, a
            // description (or NULL), names and a family; `bounds` is alive.
            unsafe { sys::tally_chistogram_family_register(z, cd, b, nb, p, n, f) }
        })
    }

    /// Makes a label family of summaries described by `d`, whose
    /// children add the labels `names`.  Errors: those of
    /// [`Zone::try_histogram_family`].
    ///
    /// ```
    /// let zone = tally::Zone::create("sumfam_try_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// assert!(zone.try_summary_family(&tally::Desc::new("f"), &["bad-name"]).is_err());
    /// ```
    pub fn try_summary_family(&self, d: &Desc, names: &[&str]) -> Result<SummaryFamily> {
        let (inner, err) = self.register_summary_family(d, names);
        match err {
            None => Ok(SummaryFamily { inner }),
            Some(e) => Err(e),
        }
    }

    /// A label family of summaries, or, when it cannot be made, one whose
    /// children discard their updates.
    pub fn summary_family(&self, d: &Desc, names: &[&str]) -> SummaryFamily {
        SummaryFamily {
            inner: self.register_summary_family(d, names).0,
        }
    }

    fn register_summary_family(
        &self,
        d: &Desc,
        names: &[&str],
    ) -> (Arc<FamilyInner>, Option<Error>) {
        register_family_with(self, d, names, sys::TALLY_SUMMARY, |z, cd, p, n, f| {
            // SAFETY: register_family_with() passes a live zone, a
            // description (or NULL), names and a family.
            unsafe { sys::tally_summary_family_register(z, cd, p, n, f) }
        })
    }
}
