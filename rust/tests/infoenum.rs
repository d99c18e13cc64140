//! The reader shows an info metric and an enum (format 2.8) as the C
//! reader does: an info's current pairs only, flagged `info`; an enum's
//! states with their 0 or 1, flagged `stateset`.  The series are written
//! through libtally's C API (tally_info_register, tally_enum_register),
//! which the crate links.

mod common;
use common::*;

use std::ffi::{c_char, c_int, CString};

use tally::reader::{Kind, Segment};
use tally::sys;

unsafe extern "C" {
    fn tally_info_register(
        z: *mut sys::tally_zone,
        d: *const sys::tally_metric_desc,
        g: *mut sys::tally_metric,
    ) -> c_int;
    fn tally_enum_register(
        z: *mut sys::tally_zone,
        d: *const sys::tally_metric_desc,
        g: *mut sys::tally_metric,
    ) -> c_int;
    fn tally_fgauge_set(g: *const sys::tally_metric, v: f64);
}

const TALLY_INFO: u32 = 10;
const TALLY_ENUM: u32 = 11;

/// Registers the series of `kind` named `name` with the one label
/// `label`=`value` in `z`, and sets it to `v`.
fn series(z: *mut sys::tally_zone, kind: u32, name: &str, label: &str, value: &str, v: f64) {
    let (n, l, val) = (
        CString::new(name).unwrap(),
        CString::new(label).unwrap(),
        CString::new(value).unwrap(),
    );
    let lab = sys::tally_label {
        name: l.as_ptr(),
        value: val.as_ptr(),
    };
    let d = sys::tally_metric_desc {
        kind,
        name: n.as_ptr(),
        help: c"H.".as_ptr() as *const c_char,
        unit: std::ptr::null(),
        labels: &lab,
        nlabels: 1,
        mode: 0,
        hist_sub_bits: 0,
        hist_max_bits: 0,
    };
    let mut g = sys::tally_metric::zeroed();
    // SAFETY: the description and its strings outlive the calls; the
    // handle is a tally_fgauge's (one tally_metric).
    unsafe {
        let rc = if kind == TALLY_INFO {
            tally_info_register(z, &d, &mut g)
        } else {
            tally_enum_register(z, &d, &mut g)
        };
        assert_eq!(rc, 0, "{name}");
        tally_fgauge_set(&g, v);
    }
}

#[test]
fn info_and_enum_read_by_meaning() {
    // The library reads TALLY_DIR from the environment, once: the test
    // runs again in a child process given a directory of its own, rather
    // than change the environment of this one (rust/tests/exporter.rs).
    if !is_child() {
        let dir = TempDir::new("infoenum");
        let path = dir.path().to_str().expect("a UTF-8 temporary path");
        run_child("info_and_enum_read_by_meaning", &[("TALLY_DIR", path)]);
        return;
    }
    let name = CString::new("rs_infoenum").unwrap();
    // SAFETY: a zone made and destroyed here, used by this thread only.
    let z = unsafe { sys::tally_zone_create(name.as_ptr(), std::ptr::null()) };
    assert!(!z.is_null());
    series(z, TALLY_INFO, "build", "version", "1.1", 0.0);
    series(z, TALLY_INFO, "build", "version", "1.2", 1.0);
    series(z, TALLY_ENUM, "state", "state", "up", 0.0);
    series(z, TALLY_ENUM, "state", "state", "down", 1.0);
    // SAFETY: the zone's path, copied before the zone is destroyed.
    let path = unsafe { std::ffi::CStr::from_ptr(sys::tally_zone_path(z)) }
        .to_str()
        .unwrap()
        .to_owned();
    let got: Vec<_> = Segment::open(&path)
        .unwrap()
        .series()
        .unwrap()
        .into_iter()
        .map(|s| {
            assert_eq!(s.kind, Kind::FGauge);
            (s.name, s.labels, s.fvalue, s.info, s.stateset)
        })
        .collect();
    let l = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
    assert_eq!(
        got,
        vec![
            ("build".to_owned(), l("version", "1.2"), 1.0, true, false),
            ("state".to_owned(), l("state", "up"), 0.0, false, true),
            ("state".to_owned(), l("state", "down"), 1.0, false, true),
        ]
    );
    // SAFETY: made above, not used after.
    assert_eq!(unsafe { sys::tally_zone_destroy(z) }, 0);
}
