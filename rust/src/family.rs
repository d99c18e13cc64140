//! Families: series whose label values are known only at run time
//! (include/tally/family.h).  A child is registered the first time its
//! values are asked for and found without a lock afterwards.

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_uint};
use std::sync::Arc;

use crate::classic::*;
use crate::error::{Error, Result, EINVAL};
use crate::metric::*;
use crate::sys;
use crate::zone::Zone;

pub(crate) struct FamilyInner {
    f: sys::tally_family,
    nlabels: usize,
    _zone: Zone,
}

// SAFETY: family registration, lookup and removal are MT-safe; removal
// happens once, in Drop, when no child handle is left.
unsafe impl Send for FamilyInner {}
unsafe impl Sync for FamilyInner {}

impl Drop for FamilyInner {
    fn drop(&mut self) {
        // SAFETY: no handle of the family is left (each holds the Arc or
        // borrows the family).  A family whose registration failed is
        // accepted too.
        unsafe { sys::tally_family_remove(&mut self.f) };
    }
}

type FamilyRegisterFn = unsafe extern "C" fn(
    *mut sys::tally_zone,
    *const sys::tally_metric_desc,
    *const *const c_char,
    c_uint,
    *mut sys::tally_family,
) -> i32;

fn register_family(
    zone: &Zone,
    d: &Desc,
    names: &[&str],
    kind: c_uint,
    f: FamilyRegisterFn,
) -> (Arc<FamilyInner>, Option<Error>) {
    // SAFETY: register_family_with() passes a live zone, a description
    // (or NULL), names and a family, as `f` takes them.
    register_family_with(zone, d, names, kind, |z, cd, p, n, fam| unsafe {
        f(z, cd, p, n, fam)
    })
}

/// register_family() through `f`, which calls the C family registration
/// of `kind` with a live zone, a description (NULL to make a discarding
/// family), the label names and the family to fill.
pub(crate) fn register_family_with(
    zone: &Zone,
    d: &Desc,
    names: &[&str],
    kind: c_uint,
    mut f: impl FnMut(
        *mut sys::tally_zone,
        *const sys::tally_metric_desc,
        *const *const c_char,
        c_uint,
        *mut sys::tally_family,
    ) -> i32,
) -> (Arc<FamilyInner>, Option<Error>) {
    let mut fam = sys::tally_family {
        table: std::ptr::null_mut(),
    };
    let cnames: std::result::Result<Vec<CString>, Error> = names
        .iter()
        .map(|n| crate::zone::cstring("label name", n))
        .collect();
    let err = match (CDesc::new(d, kind), cnames) {
        (Ok(cd), Ok(cn)) => {
            let ptrs: Vec<*const c_char> = cn.iter().map(|c| c.as_ptr()).collect();
            let rc = f(
                zone.as_ptr(),
                &cd.raw,
                ptrs.as_ptr(),
                ptrs.len() as c_uint,
                &mut fam,
            );
            if rc < 0 {
                Some(Error::last(-rc))
            } else {
                None
            }
        }
        (Err(e), _) | (_, Err(e)) => {
            // Let the library make its discarding family: a NULL
            // description is refused with one.
            f(
                zone.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
                &mut fam,
            );
            Some(e)
        }
    };
    (
        Arc::new(FamilyInner {
            f: fam,
            nlabels: names.len(),
            _zone: zone.clone(),
        }),
        err,
    )
}

/// Label values as C strings for one lookup: on the stack when they are
/// short and few (a lookup then allocates nothing and clears nothing), on
/// the heap else.
struct CValues {
    buf: [MaybeUninit<u8>; 512],
    ptrs: [*const c_char; 16],
    heap: Vec<u8>,
    vptrs: Vec<*const c_char>,
}

impl CValues {
    fn new() -> CValues {
        CValues {
            buf: [MaybeUninit::uninit(); 512],
            ptrs: [std::ptr::null(); 16],
            heap: Vec::new(),
            vptrs: Vec::new(),
        }
    }

    /// The values, or EINVAL for a NUL inside one.
    fn fill(&mut self, values: &[&str]) -> Result<(*const *const c_char, c_uint)> {
        for v in values {
            if v.as_bytes().contains(&0) {
                return Err(Error::new(
                    EINVAL,
                    format!(
                        "the label value '{}' holds a NUL character",
                        v.escape_debug()
                    ),
                ));
            }
        }
        let total: usize = values.iter().map(|v| v.len() + 1).sum();
        if total <= self.buf.len() && values.len() <= self.ptrs.len() {
            let base = self.buf.as_mut_ptr() as *mut u8;
            let mut at = 0usize;
            for (i, v) in values.iter().enumerate() {
                // SAFETY: at + v.len() + 1 <= total <= buf.len().
                unsafe {
                    std::ptr::copy_nonoverlapping(v.as_ptr(), base.add(at), v.len());
                    *base.add(at + v.len()) = 0;
                    self.ptrs[i] = base.add(at) as *const c_char;
                }
                at += v.len() + 1;
            }
            return Ok((self.ptrs.as_ptr(), values.len() as c_uint));
        }
        self.heap.reserve_exact(total);
        let mut offs = Vec::with_capacity(values.len());
        for v in values {
            offs.push(self.heap.len());
            self.heap.extend_from_slice(v.as_bytes());
            self.heap.push(0);
        }
        self.vptrs = offs
            .iter()
            .map(|o| self.heap[*o..].as_ptr() as *const c_char)
            .collect();
        Ok((self.vptrs.as_ptr(), values.len() as c_uint))
    }
}

/// The child of `values`, through `f`, which calls the C family lookup
/// with a live family, the values and the out pointer of the child's
/// handle; a wrong count of values gives the library's discarding handle.
fn family_get_with<T>(
    inner: &FamilyInner,
    values: &[&str],
    f: impl Fn(*const sys::tally_family, *const *const c_char, c_uint, *mut *const T) -> i32,
) -> (*const T, Option<Error>) {
    let mut cv = CValues::new();
    let mut h: *const T = std::ptr::null();
    match cv.fill(values) {
        Ok((p, n)) => {
            let rc = f(&inner.f, p, n, &mut h);
            (h, if rc < 0 { Some(Error::last(-rc)) } else { None })
        }
        Err(e) => {
            let bad = [std::ptr::null::<c_char>(); 1];
            f(&inner.f, bad.as_ptr(), 0, &mut h);
            (h, Some(e))
        }
    }
}

/// A family's type and its lookups; `$get` is the C lookup, `$what` the
/// kind in the plural, `$or` the family's constructor (and `$args` the
/// arguments it takes after the description, for the examples).
macro_rules! family_handle {
    ($fam:ident, $owned:ident, $borrowed:ident, $get:path, $or:ident, $args:literal,
     $what:literal, $example:literal) => {
        #[doc = concat!("A family of ", $what, ": one series per set of values of its label names.")]
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
                f.debug_struct(stringify!($fam)).field("labels", &self.inner.nlabels).finish()
            }
        }

        impl $fam {
            fn lookup(&self, values: &[&str]) -> (*const sys::tally_metric, Option<Error>) {
                family_get_with(&self.inner, values, |f, p, n, h: *mut *const sys::tally_metric| {
                    // SAFETY: family_get_with() passes a live family,
                    // values and out pointer; every kind's handle begins
                    // with its metric.
                    unsafe { $get(f, p, n, h.cast()) }
                })
            }

            #[doc = concat!("The child of these label values (in the order of the family's names): found without a lock once this process has asked for it, registered first otherwise.  Errors: `EINVAL` for a wrong number of values, a NUL or a value that is not UTF-8, `E2BIG` for values over the limit, and those of a registration; never a panic.")]
            ///
            /// The child borrows the family.  See also [`Self::with_labels`].
            ///
            /// ```
            /// let zone = tally::Zone::create("fget_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
            #[doc = concat!("let f = zone.", stringify!($or), "(&tally::Desc::new(\"f\"), ", $args, "&[\"k\"]);")]
            /// assert!(f.get(&["v"]).is_ok());
            /// assert!(f.get(&["v", "w"]).is_err());
            /// ```
            pub fn get(&self, values: &[&str]) -> Result<$borrowed<'_>> {
                let (h, err) = self.lookup(values);
                match err {
                    None => Ok($borrowed::from_metric(h)),
                    Some(e) => Err(e),
                }
            }

            /// The child of these label values, or a handle that discards
            /// its updates when it cannot be had (as in C).
            ///
            /// ```
            /// let zone = tally::Zone::create("fwith_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
            #[doc = concat!("let f = zone.", stringify!($or), "(&tally::Desc::new(\"f\"), ", $args, "&[\"k\"]);")]
            /// assert!(!f.with_labels(&["v"]).is_discarding());
            /// assert!(f.with_labels(&[]).is_discarding());
            /// ```
            pub fn with_labels(&self, values: &[&str]) -> $borrowed<'_> {
                $borrowed::from_metric(self.lookup(values).0)
            }

            #[doc(hidden)]
            pub fn raw_family(&self) -> *const sys::tally_family {
                &self.inner.f
            }

            /// The child as an owned handle, which keeps the family alive.
            ///
            /// ```
            /// let zone = tally::Zone::create("fown_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
            #[doc = concat!("let f = zone.", stringify!($or), "(&tally::Desc::new(\"f\"), ", $args, "&[\"k\"]);")]
            /// let child = f.get_owned(&["v"]).unwrap();
            /// drop(f);
            /// assert!(!child.is_discarding());
            /// ```
            pub fn get_owned(&self, values: &[&str]) -> Result<$owned> {
                let (h, err) = self.lookup(values);
                match err {
                    None => Ok($owned::from_parts(h, Keep::Family(self.inner.clone()))),
                    Some(e) => Err(e),
                }
            }
        }
    };
}

/// A family's type, lookups and registration.
macro_rules! family_type {
    ($fam:ident, $owned:ident, $borrowed:ident, $kind:expr, $reg:path, $get:path,
     $try:ident, $or:ident, $what:literal, $example:literal) => {
        family_handle!($fam, $owned, $borrowed, $get, $or, "", $what, $example);

        impl Zone {
            #[doc = concat!("Makes a family of ", $what, " described by `d`, whose children add the labels `names`.  A definition that differs from the zone's is taken (a new help text, or a new generation of the name), and the family makes its children in the generation it was made in.  Errors: `EINVAL` (a bad or repeated label name, no names), `E2BIG`, `ENOMEM`; never a panic.")]
            ///
            /// ```
            /// let zone = tally::Zone::create("fam_try_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
            #[doc = concat!("assert!(zone.", stringify!($try), "(&tally::Desc::new(\"f\"), &[\"bad-name\"]).is_err());")]
            /// ```
            pub fn $try(&self, d: &Desc, names: &[&str]) -> Result<$fam> {
                let (inner, err) = register_family(self, d, names, $kind, $reg);
                match err {
                    None => Ok($fam { inner }),
                    Some(e) => Err(e),
                }
            }

            #[doc = concat!("A family of ", $what, ", or, when it cannot be made, one whose children discard their updates.")]
            ///
            /// ```
            /// let zone = tally::Zone::create("for_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
            #[doc = concat!("let f = zone.", stringify!($or), "(&tally::Desc::new(\"f\"), &[\"bad-name\"]);")]
            /// assert!(f.get(&["v"]).is_err());
            /// ```
            pub fn $or(&self, d: &Desc, names: &[&str]) -> $fam {
                $fam { inner: register_family(self, d, names, $kind, $reg).0 }
            }
        }
    };
}

family_type!(
    CounterFamily,
    Counter,
    CounterRef,
    sys::TALLY_COUNTER,
    sys::tally_counter_family_register,
    sys::tally_counter_family_get,
    try_counter_family,
    counter_family,
    "counters",
    "let zone = tally::Zone::create(\"cfam_doc\", &tally::ZoneOptions::new().anonymous())?;
let requests = zone.try_counter_family(
    &tally::Desc::new(\"http_requests_total\").help(\"Requests.\"), &[\"method\", \"code\"])?;
requests.get(&[\"GET\", \"200\"])?.increment(1);
requests.with_labels(&[\"GET\", \"200\"]).increment(1);
assert_eq!(requests.get(&[\"GET\", \"200\"])?.value(), 2);
assert!(requests.get(&[\"GET\"]).is_err()); // one value for two names
# Ok::<(), tally::Error>(())"
);
family_type!(
    GaugeFamily,
    Gauge,
    GaugeRef,
    sys::TALLY_GAUGE,
    sys::tally_gauge_family_register,
    sys::tally_gauge_family_get,
    try_gauge_family,
    gauge_family,
    "gauges",
    "let zone = tally::Zone::create(\"gfam_doc\", &tally::ZoneOptions::new().anonymous())?;
let f = zone.try_gauge_family(&tally::Desc::new(\"in_flight\"), &[\"queue\"])?;
f.get(&[\"a\"])?.increment();
# Ok::<(), tally::Error>(())"
);
family_type!(
    SetGaugeFamily,
    SetGauge,
    SetGaugeRef,
    sys::TALLY_GAUGE_SET,
    sys::tally_setgauge_family_register,
    sys::tally_setgauge_family_get,
    try_set_gauge_family,
    set_gauge_family,
    "set-gauges",
    "let zone = tally::Zone::create(\"sfam_doc\", &tally::ZoneOptions::new().anonymous())?;
let f = zone.try_set_gauge_family(&tally::Desc::new(\"queue_length\"), &[\"queue\"])?;
f.get(&[\"a\"])?.set(3);
# Ok::<(), tally::Error>(())"
);
family_type!(
    FGaugeFamily,
    FGauge,
    FGaugeRef,
    sys::TALLY_FGAUGE,
    sys::tally_fgauge_family_register,
    sys::tally_fgauge_family_get,
    try_fgauge_family,
    fgauge_family,
    "floating-point gauges",
    "let zone = tally::Zone::create(\"ffam_doc\", &tally::ZoneOptions::new().anonymous())?;
let f = zone.try_fgauge_family(&tally::Desc::new(\"ratio\"), &[\"pool\"])?;
f.get(&[\"a\"])?.set(0.5);
# Ok::<(), tally::Error>(())"
);
family_type!(HistogramFamily, Histogram, HistogramRef, sys::TALLY_HISTOGRAM,
    sys::tally_histogram_family_register, sys::tally_histogram_family_get,
    try_histogram_family, histogram_family, "histograms",
    "let zone = tally::Zone::create(\"hfam_doc\", &tally::ZoneOptions::new().anonymous())?;
let f = zone.try_histogram_family(&tally::Desc::new(\"latency\").unit(\"nanoseconds\"), &[\"route\"])?;
f.get(&[\"/\"])?.observe(1200);
# Ok::<(), tally::Error>(())");
family_type!(
    SummaryFamily,
    Summary,
    SummaryRef,
    sys::TALLY_SUMMARY,
    sys::tally_summary_family_register,
    sys::tally_summary_family_get,
    try_summary_family,
    summary_family,
    "summaries",
    "let zone = tally::Zone::create(\"sumfam_doc\", &tally::ZoneOptions::new().anonymous())?;
let f = zone.try_summary_family(&tally::Desc::new(\"request_size_bytes\"), &[\"route\"])?;
f.get(&[\"/\"])?.observe(100.0);
assert_eq!(f.get(&[\"/\"])?.count(), 1);
# Ok::<(), tally::Error>(())"
);
family_handle!(
    ClassicHistogramFamily,
    ClassicHistogram,
    ClassicHistogramRef,
    sys::tally_chistogram_family_get,
    classic_histogram_family,
    "&[1.0], ",
    "classic histograms",
    "let zone = tally::Zone::create(\"chfam_doc\", &tally::ZoneOptions::new().anonymous())?;
let f = zone.try_classic_histogram_family(
    &tally::Desc::new(\"latency_seconds\"), &[0.1, 1.0], &[\"route\"])?;
f.get(&[\"/\"])?.observe(0.1);
assert_eq!(f.get(&[\"/\"])?.buckets(), vec![1, 0, 0]);
# Ok::<(), tally::Error>(())"
);

impl Zone {
    /// Makes a family of classic histograms described by `d`, whose
    /// children all have the bounds `bounds` and add the labels `names`.
    /// Errors: those of [`Zone::try_classic_histogram`] for the bounds,
    /// and those of [`Zone::try_histogram_family`].
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

    /// A family of classic histograms, or, when it cannot be made, one
    /// whose children discard their updates.
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
}
