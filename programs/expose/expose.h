/*
 * expose.h: a scrape's series (index.h: places to read again, or a
 * snapshot) in Prometheus's text format 0.0.4 or in OpenMetrics 1.0.0.
 *
 * Both formats want every series of a name together, under one TYPE line;
 * expose groups the series by name (metrics in name order) and writes
 * each metric once, reading the series of an index again as it writes
 * them.  Values are the segments' integers, printed
 * exactly.  Counters are exposed as <base>_total in both formats (base:
 * the name without a trailing _total), so that a series keeps its name
 * whichever format Prometheus negotiates.  A family whose names would
 * clash with one already written (a counter "x" and a gauge "x_total"), a
 * series whose kind differs from its family's, and a second series with
 * the same labels are left out and counted as conflicts.  Series of one
 * name whose help text or label names differ from the first series of
 * their family (two services that define one name differently) are
 * written under the first one's HELP, and counted in
 * tally_exporter_series_redefined: never silently.  A gauge of
 * processes that are gone (tp_series_gone_gauge(): its segment is used by
 * nobody, or a per-process gauge of a "live" mode whose process is gone)
 * is left out: it is no current value.
 *
 * No sample has a label name twice, whatever a segment holds: a label
 * that has the name of one of the exporter's (pid, process, zone) makes
 * the exporter's tally_<name>; a histogram's own "le" (refused by
 * libtally, but an older one or a crafted file may hold it) is written
 * exported_le, as Prometheus renames a target's clashing label; a series
 * that would still have a name twice is left out.  Both are counted in
 * tally_exporter_label_clashes_total.
 *
 * Histograms: tally's bucket b holds the integers lo(b) .. hi(b), lower
 * bound included (tally_histogram_bucket_bounds()).  Prometheus's
 * le="x" counts observations <= x, so for integer observations the
 * cumulative count of buckets 0..b is exactly the count of observations
 * <= hi(b): expose writes le="hi(b)" for the selected buckets, +Inf as
 * the count, and never a bound for the last bucket (it also holds every
 * value >= 2^max_bits).
 */
#ifndef TALLY_EXPORTER_EXPOSE_H
#define TALLY_EXPORTER_EXPOSE_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "lerule.h"
#include "snapshot.h"
#include "strbuf.h"

enum ex_format { EX_TEXT, EX_OPENMETRICS };

#define EX_CT_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define EX_CT_OPENMETRICS \
	"application/openmetrics-text; version=1.0.0; charset=utf-8"

/* What expose writes besides the series. */
struct ex_config {
	const char *pid_label;     /* "" or NULL: no pid label */
	const char *process_label; /* "" or NULL: no process label */
	const char *zone_label;    /* added when a process has several zones
				      (else its series could collide) */
	int aggregate;             /* the snapshot is summed across
				      processes: no pid/process labels */
	const struct ex_le_rule *rules;
	unsigned nrules;
	int self_metrics;          /* write tally_exporter_* and
				      tally_segment_* */
};

/* The exporter's own numbers, written after the series: selfmetrics.h
 * defines and fills them. */
struct ex_self;

/* Numbers of the last ex_write(). */
struct ex_result {
	uint64_t series;           /* series written (histograms count 1) */
	uint64_t conflicts;
	uint64_t redefined;        /* series written under the HELP of a
				      definition of their name whose help
				      or label names differ from theirs */
	uint64_t samples;          /* sample lines */
	uint64_t labels_renamed;   /* series written with a label renamed */
	uint64_t labels_dropped;   /* series left out: a label name twice */
};

/*
 * A scrape written as it is sent.  ex_group_make() groups the items of
 * @ix (index.h: places to read again, or a snapshot's series) by metric,
 * metrics in name order, 4 bytes per item; a group is read only, so the
 * streams of several scrapes of one index may share it (ex_group_free()
 * frees it, NULL: nothing).  ex_stream_open() starts writing @ix with
 * group @g (NULL: the stream makes its own); @ix and @g must outlive the
 * stream.  ex_stream_fill() appends to @out until out->len reaches
 * @want or the body ends, stopping between series (or after a run of at
 * most 128 series read again together), and returns 1 while there is
 * more to write, 0 once the body is whole (the exporter's own metrics and
 * OpenMetrics' "# EOF" included); ex_stream_close() gives the numbers of
 * what was written and frees the stream (NULL: nothing).  The bytes are
 * the same whatever the sizes asked for.  @t0_ns is the CLOCK_MONOTONIC
 * time the scrape began: tally_exporter_scrape_duration_seconds is
 * measured when it is written, the last metric, so it counts the time
 * the client took to read the body up to there.  Not MT-safe: one thread
 * at a time per stream; streams of one index and group may run in
 * different threads.
 */
struct ex_index;
struct ex_group;
struct ex_stream;
struct ex_group *ex_group_make(const struct ex_index *ix,
			       const struct ex_config *c);
void ex_group_free(struct ex_group *g);
struct ex_stream *ex_stream_open(const struct ex_index *ix,
				 const struct ex_group *g,
				 const struct ex_config *c, enum ex_format f,
				 const struct ex_self *self, uint64_t t0_ns);
int ex_stream_fill(struct ex_stream *st, struct tp_buf *out, size_t want);
void ex_stream_close(struct ex_stream *st, struct ex_result *res);

/*
 * ex_write: append @snap to @out in format @f, whole (a stream filled to
 * its end).  @t0_ns is the CLOCK_MONOTONIC time the scrape began (its
 * duration is reported).  Not MT-safe: one call at a time per @out.
 */
void ex_write(struct tp_buf *out, const struct tp_snapshot *snap,
	      const struct ex_config *c, enum ex_format f,
	      const struct ex_self *self, uint64_t t0_ns,
	      struct ex_result *res);

#endif /* TALLY_EXPORTER_EXPOSE_H */
