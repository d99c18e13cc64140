//! Classic histograms (the application's own bucket bounds, as
//! prometheus_client's) and summaries (a count and a sum), and their
//! label families: the Rust side of tally_chistogram_* and tally_summary_*
//! (include/tally/metrics.h, include/tally/family.h).  Their handle is a
//! tally_chistogram, which holds the bounds besides the metric: the
//! handle types' metric pointer is the first member of one.

use std::marker::PhantomData;
use std::os::raw::c_uint;
use std::sync::Arc;

use crate::error::Result;
use crate::metric::{fetch_metric, register_with, Desc, Keep, Registration};
use crate::sys;
use crate::zone::Zone;

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

macro_rules! classic_methods {
    () => {
        /// The C handle: the metric is the first member of a classic
        /// histogram's or summary's tally_chistogram.
        #[inline(always)]
        fn chistogram(&self) -> *const sys::tally_chistogram {
            self.metric.cast()
        }

        /// Counts `v` (in the first bucket whose bound is at least `v`,
        /// for a classic histogram) and adds it to the sum, exactly to
        /// 10^-9; a NaN is not counted.
        #[inline]
        pub fn observe(&self, v: f64) {
            // SAFETY: the handle is alive (a discarding one too), kept or
            // borrowed by self.
            unsafe { sys::tally_chistogram_observe(self.chistogram(), v) }
        }

        /// The number of observations in this process (0 when
        /// discarding).
        pub fn count(&self) -> i64 {
            // SAFETY: the handle is alive.
            unsafe { fetch(self.chistogram(), &mut []) }.map_or(0, |(c, _)| c)
        }

        /// The sum of the observations in this process (0.0 when
        /// discarding).
        pub fn sum(&self) -> f64 {
            // SAFETY: the handle is alive.
            unsafe { fetch(self.chistogram(), &mut []) }.map_or(0.0, |(_, s)| s)
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
            let h = unsafe { &*self.chistogram() };
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
            match unsafe { fetch(self.chistogram(), &mut b) } {
                Some(_) => b,
                None => Vec::new(),
            }
        }
    };
}

handle_types!(
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
handle_types!(
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
    classic_methods!();
    bounds_methods!();
}
impl ClassicHistogramRef<'_> {
    classic_methods!();
    bounds_methods!();
}
impl Summary {
    classic_methods!();
}
impl SummaryRef<'_> {
    classic_methods!();
}

/// The C registration of a classic histogram of these bounds.
fn chistogram_register(
    bounds: &[f64],
) -> impl Fn(*mut sys::tally_zone, *const sys::tally_metric_desc, *mut sys::tally_chistogram) -> i32 + '_
{
    move |z, d, h| {
        // SAFETY: register_with() passes a live zone, description and
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
    // SAFETY: register_with() passes a live zone, description and
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
        let (reg, err) = register_with(self, d, sys::TALLY_CHISTOGRAM, chistogram_register(bounds));
        match err {
            None => Ok(ClassicHistogram::from_registration(reg)),
            Some(e) => Err(e),
        }
    }

    /// The classic histogram `d` of these bounds, or a handle that
    /// discards its updates when it cannot be registered.
    pub fn classic_histogram(&self, d: &Desc, bounds: &[f64]) -> ClassicHistogram {
        let f = chistogram_register(bounds);
        ClassicHistogram::from_registration(register_with(self, d, sys::TALLY_CHISTOGRAM, f).0)
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
        let (reg, err) = register_with(self, d, sys::TALLY_SUMMARY, summary_register);
        match err {
            None => Ok(Summary::from_registration(reg)),
            Some(e) => Err(e),
        }
    }

    /// The summary `d`, or a handle that discards its updates when it
    /// cannot be registered.
    pub fn summary(&self, d: &Desc) -> Summary {
        Summary::from_registration(register_with(self, d, sys::TALLY_SUMMARY, summary_register).0)
    }
}
