//! The hand-written declarations of src/sys.rs against the C headers:
//! sizes, field offsets and constants as the C compiler computed them
//! (csrc/abi.c, built from include/tally/ by build.rs).

use std::mem::{offset_of, size_of};
use tally::sys::*;

/// ("sizeof T", its size), then ("offsetof T.field", its offset) for
/// each field named, under T's C name when it differs.
macro_rules! layout {
    (@ $t:ident, $c:expr; $($f:ident),*) => {
        [(concat!("sizeof ", $c), size_of::<$t>() as u64) $(, offsetof!($t as $c, $f))*]
    };
    ($t:ident $(: $($f:ident),+)?) => {
        layout!(@ $t, stringify!($t); $($($f),+)?)
    };
    ($t:ident as $c:literal $(: $($f:ident),+)?) => {
        layout!(@ $t, $c; $($($f),+)?)
    };
}

/// ("offsetof T.field", its offset), T under its C name.
macro_rules! offsetof {
    ($t:ident as $c:expr, $f:ident) => {
        (
            concat!("offsetof ", $c, ".", stringify!($f)),
            offset_of!($t, $f) as u64,
        )
    };
}

/// ("NAME", NAME) for each constant.
macro_rules! constants {
    ($($name:ident),+ $(,)?) => {
        [$((stringify!($name), $name as u64)),+]
    };
}

#[test]
fn abi_matches_the_headers() {
    // In the order of csrc/abi.c's table.
    let mut ours: Vec<(&str, u64)> = Vec::new();
    ours.extend(layout!(tally_zone_opts: flags));
    ours.extend(layout!(tally_zone_usage: nnodes));
    ours.extend(layout!(tally_label));
    ours.extend(layout!(tally_metric_desc: labels, nlabels, hist_max_bits));
    ours.extend(layout!(tally_metric: series, kind, max_bits));
    ours.extend(layout!(tally_handle as "tally_counter"));
    ours.extend(layout!(tally_handle as "tally_histogram"));
    ours.extend(layout!(tally_family as "tally_counter_family"));
    ours.extend(layout!(tally__cfg_t as "tally__cfg": rseq_limit, promoted));
    ours.extend(layout!(tally_open_opts));
    ours.extend(layout!(tally_seg_info: proc_name, alive, register_failed, shared, redefinitions));
    ours.extend(
        layout!(tally_series_view: name, label_values, value, npercpu, sum, buckets, fvalue, summary, info,
                stateset),
    );
    ours.extend(constants![
        TALLY_COUNTER,
        TALLY_GAUGE,
        TALLY_GAUGE_SET,
        TALLY_HISTOGRAM,
        TALLY_FGAUGE,
        TALLY_PERCPU,
        TALLY_SHARED,
        TALLY_PERNODE,
        TALLY_ADAPTIVE,
        TALLY_ZONE_ANON,
        TALLY_ZONE_PERSIST,
        TALLY_ZONE_SHARED,
        TALLY_NAME_MAX,
        TALLY_UNIT_MAX,
        TALLY_HELP_MAX,
        TALLY_LABELS_MAX,
        TALLY_LABEL_PAIRS_MAX,
        TALLY_READ_PERCPU,
        TALLY__STRIDE,
        TALLY__STRIDE_SHIFT,
        TALLY__RESV_BACK,
        TALLY__MODE_MASK,
        TALLY__RSEQ_CPU_ID_OFF,
        TALLY__RSEQ_CS_OFF,
        TALLY__RSEQ_SIG,
        TALLY__CFG_PAGE_OFF,
        TALLY__AHINT_OFF,
    ]);
    for f in [
        offsetof!(tally__cfg_t as "tally__cfg", rseq_off),
        offsetof!(tally__cfg_t as "tally__cfg", nnodes),
        offsetof!(tally__cfg_t as "tally__cfg", cpu_node),
        offsetof!(tally__cfg_t as "tally__cfg", thread_off),
    ] {
        ours.push(f);
    }
    ours.extend(layout!(tally_chistogram: bounds, nbounds));
    ours.extend(layout!(tally_summary));
    ours.extend(layout!(tally_family as "tally_chistogram_family"));
    ours.extend(layout!(tally_family as "tally_summary_family"));
    ours.push(offsetof!(tally_series_view as "tally_series_view", classic));
    ours.push(offsetof!(tally_series_view as "tally_series_view", bounds));
    ours.push(offsetof!(tally_series_view as "tally_series_view", fsum));
    ours.extend(constants![
        TALLY_CHISTOGRAM,
        TALLY_SUMMARY,
        TALLY_CHISTOGRAM_BOUNDS_MAX,
        TALLY_CHISTOGRAM_HELP_MAX,
    ]);
    // SAFETY: the C table has tally_rs_abi_len entries.
    let theirs = unsafe {
        std::slice::from_raw_parts(
            std::ptr::addr_of!(tally_rs_abi) as *const u64,
            tally_rs_abi_len,
        )
    };
    assert_eq!(
        ours.len(),
        theirs.len(),
        "csrc/abi.c and this test list different entries"
    );
    let wrong: Vec<String> = ours
        .iter()
        .zip(theirs)
        .filter(|((_, a), b)| a != *b)
        .map(|((n, a), b)| format!("{n}: Rust {a}, C {b}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "declarations differ from the headers: {wrong:?}"
    );
}
