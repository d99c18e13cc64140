/*
 * programs/common/kind.h: the programs' one vocabulary of a series' kind
 * and mode (tally/metrics.h): which kinds are gauges, which Prometheus
 * type each is written as, which kinds may be summed together, and the
 * names the outputs print.
 *
 * libtally has five kinds for three Prometheus types: TALLY_GAUGE (added
 * to), TALLY_GAUGE_SET (set) and TALLY_FGAUGE (a double, set) are all
 * gauges.  Every program asks here rather than listing the gauge kinds
 * again, so that a sixth kind is added in one place.
 */
#ifndef TALLY_PROGRAMS_KIND_H
#define TALLY_PROGRAMS_KIND_H

#include "tally/metrics.h"

/* 1 for the three gauge kinds: they show a current value, not a rate. */
static inline int tp_kind_is_gauge(unsigned kind)
{
	return kind == TALLY_GAUGE || kind == TALLY_GAUGE_SET ||
	       kind == TALLY_FGAUGE;
}

/* The Prometheus type of @kind: TALLY_COUNTER, TALLY_GAUGE (every gauge
 * kind) or TALLY_HISTOGRAM; series of one family must agree on it. */
static inline unsigned tp_kind_type(unsigned kind)
{
	return tp_kind_is_gauge(kind) ? TALLY_GAUGE : kind;
}

/*
 * The kind series are summed as (aggregate.h): the two integer gauges
 * add up as one (TALLY_GAUGE), but a TALLY_FGAUGE stays apart: its value
 * is a double (tp_series.fvalue), which an integer sum would truncate.
 */
static inline unsigned tp_kind_sum_class(unsigned kind)
{
	return kind == TALLY_GAUGE_SET ? TALLY_GAUGE : kind;
}

/* "counter", "gauge" (every gauge kind), "histogram" or "unknown": the
 * name of tp_kind_type(), as tallystat, tally-dump and the exporter's
 * TYPE lines print it. */
const char *tp_kind_name(unsigned kind);

/* What the outputs print as a series' type: "summary" (format 2.7),
 * "info" and "stateset" (2.8, an enum's series) for the series of
 * those types (tally_series_view), else tp_kind_name(@kind). */
const char *tp_type_name(unsigned kind, int summary, int info,
			 int stateset);

/* "percpu", "shared", "pernode", "adaptive" or "unknown". */
const char *tp_mode_name(unsigned mode);

#endif /* TALLY_PROGRAMS_KIND_H */
