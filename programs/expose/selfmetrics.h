/*
 * selfmetrics.h: tally-exporter's own metrics (tally_exporter_*), in one
 * place: each one's name, type, help and unit (self_metrics[]), and their
 * values.  The server fills struct ex_self from what it keeps between
 * scrapes (self_count_dead(); self_fill() and self_count_result() of
 * tally-exporter's srv.h);
 * expose.c's write_self() asks each metric for its samples at the moment
 * it writes it (self_samples()) and prints them, knowing nothing of what
 * they mean.  The tally_segment_* metrics are segfield.h's table.
 */
#ifndef TALLY_EXPORTER_SELFMETRICS_H
#define TALLY_EXPORTER_SELFMETRICS_H

#include <stddef.h>
#include <stdint.h>

#include "expose.h"
#include "snapshot.h"

/* The exporter's own numbers that are not the scrape's series: what the
 * server knows, filled by self_fill() before ex_write(). */
struct ex_self {
	double collect_seconds;    /* reading the segments */
	uint64_t scrapes;          /* served so far, this one included */
	uint64_t skipped_total[TP_NSKIP]; /* since start, by
					     tp_skip_reason() */
	uint64_t retired_series;   /* --aggregate: series kept for exited
				      processes */
	uint64_t retired_segments; /* --aggregate: segments that vanished,
				      since start */
	uint64_t dead_segments;    /* read in this scrape, whose processes
				      are all gone */
	uint64_t dead_bytes;       /* the memory those hold */
	uint64_t label_clashes_total[2]; /* series renamed, dropped, in
					    the scrapes before this one */
	uint64_t conns_evicted;    /* incomplete connections closed to make
				      room in a full table, since start */
	const char *version, *mhd_version;
};

/* One sample of a metric: its labels as written between the braces (""
 * for none) and its value. */
#define SELF_MAX_SAMPLES TP_NSKIP
struct self_sample {
	char labels[192];
	char value[48];
};

/* What a metric's samples are worked out from when it is written. */
struct self_in {
	const struct tp_snapshot *snap;  /* as written: aggregated with
					    --aggregate */
	const struct ex_self *self;
	const struct ex_result *res;     /* the series of this scrape */
	uint64_t t0_ns;                  /* CLOCK_MONOTONIC at its start */
};

struct self_metric {
	const char *name;       /* the metric: counters without _total */
	int counter;
	const char *help, *unit;
	/* Its samples, into @out (at most SELF_MAX_SAMPLES); or NULL: one
	 * unlabelled integer, the uint64_t at @off in struct ex_self
	 * (@in_res 0) or ex_result (1). */
	unsigned (*samples)(const struct self_in *in,
			    struct self_sample *out);
	int in_res;
	size_t off;
};

/* The tally_exporter_* metrics, in the order written. */
extern const struct self_metric self_metrics[];
extern const size_t self_nmetrics;
#define NSELF self_nmetrics

/* self_samples: the samples of @m now, into @out; returns how many. */
unsigned self_samples(const struct self_metric *m, const struct self_in *in,
		      struct self_sample out[SELF_MAX_SAMPLES]);

/* self_count_dead: count into @self the dead segments of @raw, the
 * snapshot as read (before --aggregate sums it). */
void self_count_dead(struct ex_self *self, const struct tp_snapshot *raw);

#endif /* TALLY_EXPORTER_SELFMETRICS_H */
