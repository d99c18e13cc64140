/*
 * rust/csrc/abi.c: the sizes, field offsets and constants of the C API as
 * this compiler sees them, for the crate's test that compares them with
 * its hand-written declarations (src/sys.rs).
 */
#include <stddef.h>
#include <stdint.h>

#include "tally/reader.h"
#include "tally/tally.h"

#define SZ(t) (uint64_t)sizeof(t)
#define OFF(t, f) (uint64_t)offsetof(t, f)

/* Pairs of (what, value); the test names each entry in the same order. */
const uint64_t tally_rs_abi[] = {
	SZ(struct tally_zone_opts),
	OFF(struct tally_zone_opts, flags),
	SZ(struct tally_zone_usage),
	OFF(struct tally_zone_usage, nnodes),
	SZ(struct tally_label),
	SZ(struct tally_metric_desc),
	OFF(struct tally_metric_desc, labels),
	OFF(struct tally_metric_desc, nlabels),
	OFF(struct tally_metric_desc, hist_max_bits),
	SZ(tally_metric),
	OFF(tally_metric, series),
	OFF(tally_metric, kind),
	OFF(tally_metric, max_bits),
	SZ(tally_counter),
	SZ(tally_histogram),
	SZ(tally_counter_family),
	SZ(struct tally__cfg),
	OFF(struct tally__cfg, rseq_limit),
	OFF(struct tally__cfg, promoted),
	SZ(struct tally_open_opts),
	SZ(struct tally_seg_info),
	OFF(struct tally_seg_info, proc_name),
	OFF(struct tally_seg_info, alive),
	OFF(struct tally_seg_info, register_failed),
	OFF(struct tally_seg_info, shared),
	OFF(struct tally_seg_info, redefinitions),
	SZ(struct tally_series_view),
	OFF(struct tally_series_view, name),
	OFF(struct tally_series_view, label_values),
	OFF(struct tally_series_view, value),
	OFF(struct tally_series_view, npercpu),
	OFF(struct tally_series_view, sum),
	OFF(struct tally_series_view, buckets),
	OFF(struct tally_series_view, fvalue),
	OFF(struct tally_series_view, summary),
	OFF(struct tally_series_view, info),
	OFF(struct tally_series_view, stateset),
	TALLY_COUNTER, TALLY_GAUGE, TALLY_GAUGE_SET, TALLY_HISTOGRAM,
	TALLY_FGAUGE,
	TALLY_PERCPU, TALLY_SHARED, TALLY_PERNODE, TALLY_ADAPTIVE,
	TALLY_ZONE_ANON, TALLY_ZONE_PERSIST, TALLY_ZONE_SHARED,
	TALLY_NAME_MAX, TALLY_UNIT_MAX, TALLY_HELP_MAX, TALLY_LABELS_MAX,
	TALLY_LABEL_PAIRS_MAX,
	TALLY_READ_PERCPU,
	TALLY__STRIDE, TALLY__STRIDE_SHIFT, TALLY__RESV_BACK,
	(uint64_t)TALLY__MODE_MASK,
	TALLY__RSEQ_CPU_ID_OFF, TALLY__RSEQ_CS_OFF, TALLY__RSEQ_SIG,
	TALLY__CFG_PAGE_OFF, TALLY__AHINT_OFF,
	OFF(struct tally__cfg, rseq_off), OFF(struct tally__cfg, nnodes),
	OFF(struct tally__cfg, cpu_node), OFF(struct tally__cfg, thread_off),
	SZ(tally_chistogram), OFF(tally_chistogram, bounds),
	OFF(tally_chistogram, nbounds), SZ(tally_summary),
	SZ(tally_chistogram_family), SZ(tally_summary_family),
	OFF(struct tally_series_view, classic),
	OFF(struct tally_series_view, bounds),
	OFF(struct tally_series_view, fsum),
	TALLY_CHISTOGRAM, TALLY_SUMMARY, TALLY_CHISTOGRAM_BOUNDS_MAX,
	TALLY_CHISTOGRAM_HELP_MAX,
};
const size_t tally_rs_abi_len = sizeof(tally_rs_abi) / sizeof(tally_rs_abi[0]);
