//! Reading segments, as another process does (include/tally/reader.h):
//! open a zone's file read-only, check it, and list its series with
//! their values.  The reader never writes to the file and never blocks a
//! writer.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::path::Path;

use crate::error::{Error, Result, EINVAL};
use crate::sys;

/// The kind of a series, as a reader sees it.
///
/// ```
/// let zone = tally::Zone::create("kind_doc", &tally::ZoneOptions::new()).unwrap();
/// let _g = zone.try_fgauge(&tally::Desc::new("ratio")).unwrap();
/// let seg = tally::reader::Segment::open(zone.path().unwrap()).unwrap();
/// assert_eq!(seg.series().unwrap()[0].kind, tally::reader::Kind::FGauge);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// TALLY_COUNTER.
    Counter,
    /// TALLY_GAUGE (changed by adds).
    Gauge,
    /// TALLY_GAUGE_SET.
    SetGauge,
    /// TALLY_HISTOGRAM.
    Histogram,
    /// TALLY_FGAUGE.
    FGauge,
    /// A kind this crate does not know.
    Other(u32),
}

/// One series of a segment, copied out of the reader's view.
///
/// ```
/// let zone = tally::Zone::create("series_doc", &tally::ZoneOptions::new()).unwrap();
/// let h = zone.try_histogram(&tally::Desc::new("sizes").help("Sizes.")).unwrap();
/// h.observe(3);
/// let seg = tally::reader::Segment::open(zone.path().unwrap()).unwrap();
/// let s = &seg.series().unwrap()[0];
/// assert_eq!((s.name.as_str(), s.help.as_str(), s.value, s.sum), ("sizes", "Sizes.", 1, 3));
/// assert_eq!(s.buckets.iter().sum::<i64>(), 1);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The metric name.
    pub name: String,
    /// Its help ("" when none).
    pub help: String,
    /// Its unit ("" when none).
    pub unit: String,
    /// Its kind.
    pub kind: Kind,
    /// Its labels, sorted by name.
    pub labels: Vec<(String, String)>,
    /// A counter's or gauge's value, a histogram's count, an fgauge's
    /// value rounded toward zero.
    pub value: i64,
    /// An fgauge's value (0 for other kinds).
    pub fvalue: f64,
    /// A histogram's sum (of a classic histogram or summary, its whole
    /// part: see `fsum`).
    pub sum: i64,
    /// A classic histogram's or summary's sum, with its fraction (0 for
    /// other kinds).
    pub fsum: f64,
    /// A histogram's buckets, not cumulative: for a classic histogram
    /// (one with the application's own bounds) one per bound and a last
    /// one for +Inf; else see tally_histogram_bucket_bounds().
    pub buckets: Vec<i64>,
    /// A classic histogram's finite bucket upper bounds, increasing
    /// (empty for other kinds and for log-linear histograms).
    pub bounds: Vec<f64>,
    /// A summary (format 2.7): a classic histogram without bounds, whose
    /// count and sum are what it says (its one bucket is its count).
    pub summary: bool,
    /// An info metric's series (format 2.8, Kind::FGauge of value 1):
    /// its labels are the pairs, shown as `<name>_info{pairs} 1`.
    pub info: bool,
    /// An enum metric's series (format 2.8, an OpenMetrics stateset,
    /// Kind::FGauge): one per state, whose label named as the metric
    /// holds the state, 1 for the current state and 0 for the others.
    pub stateset: bool,
}

impl Series {
    /// The value of label `name`, if the series has it.
    ///
    /// ```
    /// # let s = tally::reader::Series { name: "x".into(), help: String::new(), unit: String::new(),
    /// #   kind: tally::reader::Kind::Counter, labels: vec![("a".into(), "1".into())],
    /// #   value: 0, fvalue: 0.0, sum: 0, fsum: 0.0, buckets: vec![], bounds: vec![], summary: false,
    /// #   info: false, stateset: false };
    /// assert_eq!(s.label("a"), Some("1"));
    /// ```
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An open segment (struct tally_seg).  Used by one thread at a time:
/// `Send`, not `Sync`.
///
/// ```
/// let zone = tally::Zone::create("reader_doc", &tally::ZoneOptions::new())?;
/// let c = zone.try_counter(&tally::Desc::new("seen_total"))?;
/// c.increment(5);
/// let seg = tally::reader::Segment::open(zone.path().unwrap())?;
/// let s = seg.series()?;
/// assert_eq!(s.iter().find(|s| s.name == "seen_total").unwrap().value, 5);
/// # Ok::<(), tally::Error>(())
/// ```
pub struct Segment {
    s: *mut sys::tally_seg,
}

// SAFETY: a segment may move between threads; it is not shared.
unsafe impl Send for Segment {}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: opened by tally_seg_open, closed once.
        unsafe { sys::tally_seg_close(self.s) }
    }
}

fn string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the reader gives NUL-terminated strings valid during
        // the callback.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

unsafe extern "C" fn collect(v: *const sys::tally_series_view, arg: *mut c_void) -> c_int {
    unsafe {
        let out = &mut *(arg as *mut Vec<Series>);
        let v = &*v;
        let mut labels = Vec::with_capacity(v.nlabels as usize);
        for i in 0..v.nlabels as usize {
            labels.push((
                string(*v.label_names.add(i)),
                string(*v.label_values.add(i)),
            ));
        }
        let buckets = if v.kind == sys::TALLY_HISTOGRAM && !v.buckets.is_null() {
            std::slice::from_raw_parts(v.buckets, v.nbuckets as usize).to_vec()
        } else {
            Vec::new()
        };
        let bounds = if v.kind == sys::TALLY_HISTOGRAM && v.classic != 0 && !v.bounds.is_null() {
            std::slice::from_raw_parts(v.bounds, v.nbounds as usize).to_vec()
        } else {
            Vec::new()
        };
        out.push(Series {
            name: string(v.name),
            help: string(v.help),
            unit: string(v.unit),
            kind: match v.kind {
                sys::TALLY_COUNTER => Kind::Counter,
                sys::TALLY_GAUGE => Kind::Gauge,
                sys::TALLY_GAUGE_SET => Kind::SetGauge,
                sys::TALLY_HISTOGRAM => Kind::Histogram,
                sys::TALLY_FGAUGE => Kind::FGauge,
                k => Kind::Other(k),
            },
            labels,
            value: v.value,
            fvalue: v.fvalue,
            sum: v.sum,
            fsum: if v.classic != 0 { v.fsum } else { 0.0 },
            buckets,
            bounds,
            summary: v.summary != 0,
            info: v.info != 0,
            stateset: v.stateset != 0,
        });
        0
    }
}

impl Segment {
    /// Opens and validates the segment at `path` (a regular file of this
    /// user; symbolic links are not followed).
    ///
    /// Errors: `ENOENT`, `ELOOP`, `EACCES`, `EPERM`, `EINVAL` (not a
    /// segment, or corrupt), `EPROTONOSUPPORT`, `ENOMEM`; the message
    /// names the file.
    ///
    /// ```
    /// assert!(tally::reader::Segment::open("/nonexistent.tally").is_err());
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Segment> {
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(path.as_ref().as_os_str().as_bytes())
            .map_err(|_| Error::new(EINVAL, "a path holds a NUL character"))?;
        // SAFETY: a valid path; NULL options are the defaults.
        let s = unsafe { sys::tally_seg_open(c.as_ptr(), std::ptr::null()) };
        if s.is_null() {
            Err(Error::from_os())
        } else {
            Ok(Segment { s })
        }
    }

    /// Every live series with its values (sums of per-CPU copies read
    /// at slightly different times, not a snapshot).
    ///
    /// ```
    /// let zone = tally::Zone::create("seg_series_doc", &tally::ZoneOptions::new()).unwrap();
    /// let _c = zone.try_counter(&tally::Desc::new("a_total").label("k", "v")).unwrap();
    /// let seg = tally::reader::Segment::open(zone.path().unwrap()).unwrap();
    /// let all = seg.series().unwrap();
    /// assert_eq!(all[0].label("k"), Some("v"));
    /// ```
    pub fn series(&self) -> Result<Vec<Series>> {
        let mut out: Vec<Series> = Vec::new();
        // SAFETY: a live segment; `collect` only pushes to `out`.
        let rc = unsafe {
            sys::tally_seg_foreach(
                self.s,
                0,
                collect,
                &mut out as *mut Vec<Series> as *mut c_void,
            )
        };
        if rc < 0 {
            return Err(Error::last(-rc));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod after_rollback {
    use super::*;
    use crate::{Desc, Zone, ZoneOptions};

    unsafe extern "C" {
        fn tally_metric_redefine(
            z: *mut sys::tally_zone,
            d: *const sys::tally_metric_desc,
            names: *const *const c_char,
            n: std::os::raw::c_uint,
        ) -> c_int;
    }

    /// A binding's definition @help of "jobs", whose series are those of
    /// "jobs_total" (the Python package's counter).
    fn redefine(zone: &Zone, help: &str) {
        let name = CString::new("jobs").unwrap();
        let help = CString::new(help).unwrap();
        let part = CString::new("jobs_total").unwrap();
        let parts = [part.as_ptr()];
        // SAFETY: a C struct of integers and pointers, all zero.
        let mut d: sys::tally_metric_desc = unsafe { std::mem::zeroed() };
        d.kind = sys::TALLY_COUNTER;
        d.name = name.as_ptr();
        d.help = help.as_ptr();
        // SAFETY: a live zone, a description and names that outlive the
        // call.
        let rc = unsafe { tally_metric_redefine(zone.as_ptr(), &d, parts.as_ptr(), 1) };
        assert!(rc >= 0, "tally_metric_redefine: {rc}");
    }

    /// One series as the test compares it: name, labels, value.
    type Shown = (String, Vec<(String, String)>, i64);

    /// Every series of the zone.
    fn shown(zone: &Zone) -> Vec<Shown> {
        let seg = Segment::open(zone.path().unwrap()).unwrap();
        let mut all: Vec<_> = seg
            .series()
            .unwrap()
            .into_iter()
            .map(|s| (s.name, s.labels, s.value))
            .collect();
        all.sort();
        all
    }

    fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    // The reader shows one definition of a binding's metric after each
    // change: the other label names while they are current, and the
    // first ones again, with their count resumed, after a change back.
    #[test]
    fn one_definition_shown() {
        let zone = Zone::create("rollback_reader_test", &ZoneOptions::new()).unwrap();
        let jobs = Desc::new("jobs_total");
        redefine(&zone, "v1");
        let v1 = zone.try_counter_family(&jobs, &["a"]).unwrap();
        v1.get(&["x"]).unwrap().increment(3);
        redefine(&zone, "v2");
        let v2 = zone.try_counter_family(&jobs, &["a", "b"]).unwrap();
        v2.get(&["x", "y"]).unwrap().increment(5);
        let t = "jobs_total".to_string();
        assert_eq!(shown(&zone), vec![(t.clone(), l(&[("a", "x"), ("b", "y")]), 5)]);
        redefine(&zone, "v1");
        let again = zone.try_counter_family(&jobs, &["a"]).unwrap();
        again.get(&["x"]).unwrap().increment(4);
        assert_eq!(shown(&zone), vec![(t, l(&[("a", "x")]), 7)]);
    }
}
