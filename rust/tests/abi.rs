//! The hand-written declarations of src/sys.rs against the C headers:
//! sizes, field offsets and constants as the C compiler computed them
//! (csrc/abi.c, built from include/tally/ by build.rs).

use std::mem::{offset_of, size_of};
use tally::sys::*;

#[test]
fn abi_matches_the_headers() {
    let ours: Vec<(&str, u64)> = vec![
        (
            "sizeof tally_zone_opts",
            size_of::<tally_zone_opts>() as u64,
        ),
        (
            "offsetof tally_zone_opts.flags",
            offset_of!(tally_zone_opts, flags) as u64,
        ),
        (
            "sizeof tally_zone_usage",
            size_of::<tally_zone_usage>() as u64,
        ),
        (
            "offsetof tally_zone_usage.nnodes",
            offset_of!(tally_zone_usage, nnodes) as u64,
        ),
        ("sizeof tally_label", size_of::<tally_label>() as u64),
        (
            "sizeof tally_metric_desc",
            size_of::<tally_metric_desc>() as u64,
        ),
        (
            "offsetof tally_metric_desc.labels",
            offset_of!(tally_metric_desc, labels) as u64,
        ),
        (
            "offsetof tally_metric_desc.nlabels",
            offset_of!(tally_metric_desc, nlabels) as u64,
        ),
        (
            "offsetof tally_metric_desc.hist_max_bits",
            offset_of!(tally_metric_desc, hist_max_bits) as u64,
        ),
        ("sizeof tally_metric", size_of::<tally_metric>() as u64),
        (
            "offsetof tally_metric.series",
            offset_of!(tally_metric, series) as u64,
        ),
        (
            "offsetof tally_metric.kind",
            offset_of!(tally_metric, kind) as u64,
        ),
        (
            "offsetof tally_metric.max_bits",
            offset_of!(tally_metric, max_bits) as u64,
        ),
        ("sizeof tally_counter", size_of::<tally_handle>() as u64),
        ("sizeof tally_histogram", size_of::<tally_handle>() as u64),
        (
            "sizeof tally_counter_family",
            size_of::<tally_family>() as u64,
        ),
        ("sizeof tally__cfg", size_of::<tally__cfg_t>() as u64),
        (
            "offsetof tally__cfg.rseq_limit",
            offset_of!(tally__cfg_t, rseq_limit) as u64,
        ),
        (
            "offsetof tally__cfg.promoted",
            offset_of!(tally__cfg_t, promoted) as u64,
        ),
        (
            "sizeof tally_open_opts",
            size_of::<tally_open_opts>() as u64,
        ),
        ("sizeof tally_seg_info", size_of::<tally_seg_info>() as u64),
        (
            "offsetof tally_seg_info.proc_name",
            offset_of!(tally_seg_info, proc_name) as u64,
        ),
        (
            "offsetof tally_seg_info.alive",
            offset_of!(tally_seg_info, alive) as u64,
        ),
        (
            "offsetof tally_seg_info.register_failed",
            offset_of!(tally_seg_info, register_failed) as u64,
        ),
        (
            "offsetof tally_seg_info.shared",
            offset_of!(tally_seg_info, shared) as u64,
        ),
        (
            "offsetof tally_seg_info.redefinitions",
            offset_of!(tally_seg_info, redefinitions) as u64,
        ),
        (
            "sizeof tally_series_view",
            size_of::<tally_series_view>() as u64,
        ),
        (
            "offsetof tally_series_view.name",
            offset_of!(tally_series_view, name) as u64,
        ),
        (
            "offsetof tally_series_view.label_values",
            offset_of!(tally_series_view, label_values) as u64,
        ),
        (
            "offsetof tally_series_view.value",
            offset_of!(tally_series_view, value) as u64,
        ),
        (
            "offsetof tally_series_view.npercpu",
            offset_of!(tally_series_view, npercpu) as u64,
        ),
        (
            "offsetof tally_series_view.sum",
            offset_of!(tally_series_view, sum) as u64,
        ),
        (
            "offsetof tally_series_view.buckets",
            offset_of!(tally_series_view, buckets) as u64,
        ),
        (
            "offsetof tally_series_view.fvalue",
            offset_of!(tally_series_view, fvalue) as u64,
        ),
        ("TALLY_COUNTER", TALLY_COUNTER as u64),
        ("TALLY_GAUGE", TALLY_GAUGE as u64),
        ("TALLY_GAUGE_SET", TALLY_GAUGE_SET as u64),
        ("TALLY_HISTOGRAM", TALLY_HISTOGRAM as u64),
        ("TALLY_FGAUGE", TALLY_FGAUGE as u64),
        ("TALLY_PERCPU", TALLY_PERCPU as u64),
        ("TALLY_SHARED", TALLY_SHARED as u64),
        ("TALLY_PERNODE", TALLY_PERNODE as u64),
        ("TALLY_ADAPTIVE", TALLY_ADAPTIVE as u64),
        ("TALLY_ZONE_ANON", TALLY_ZONE_ANON as u64),
        ("TALLY_ZONE_PERSIST", TALLY_ZONE_PERSIST as u64),
        ("TALLY_ZONE_SHARED", TALLY_ZONE_SHARED as u64),
        ("TALLY_NAME_MAX", TALLY_NAME_MAX as u64),
        ("TALLY_UNIT_MAX", TALLY_UNIT_MAX as u64),
        ("TALLY_HELP_MAX", TALLY_HELP_MAX as u64),
        ("TALLY_LABELS_MAX", TALLY_LABELS_MAX as u64),
        ("TALLY_LABEL_PAIRS_MAX", TALLY_LABEL_PAIRS_MAX as u64),
        ("TALLY_READ_PERCPU", TALLY_READ_PERCPU as u64),
        ("TALLY__STRIDE", TALLY__STRIDE as u64),
        ("TALLY__STRIDE_SHIFT", TALLY__STRIDE_SHIFT as u64),
        ("TALLY__RESV_BACK", TALLY__RESV_BACK as u64),
        ("TALLY__MODE_MASK", TALLY__MODE_MASK as u64),
        ("TALLY__RSEQ_CPU_ID_OFF", TALLY__RSEQ_CPU_ID_OFF as u64),
        ("TALLY__RSEQ_CS_OFF", TALLY__RSEQ_CS_OFF as u64),
        ("TALLY__RSEQ_SIG", TALLY__RSEQ_SIG as u64),
        ("TALLY__CFG_PAGE_OFF", TALLY__CFG_PAGE_OFF as u64),
        ("TALLY__AHINT_OFF", TALLY__AHINT_OFF as u64),
        (
            "offsetof tally__cfg.rseq_off",
            offset_of!(tally__cfg_t, rseq_off) as u64,
        ),
        (
            "offsetof tally__cfg.nnodes",
            offset_of!(tally__cfg_t, nnodes) as u64,
        ),
        (
            "offsetof tally__cfg.cpu_node",
            offset_of!(tally__cfg_t, cpu_node) as u64,
        ),
        (
            "offsetof tally__cfg.thread_off",
            offset_of!(tally__cfg_t, thread_off) as u64,
        ),
    ];
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
