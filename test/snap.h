/*
 * snap.h: what a reader reports of a segment, series by series, copied
 * (strings, per-CPU values, buckets and quantiles) so that a test can
 * compare it after the pass, with the segment closed or changed since.
 * Every series the reader passes is also checked for what any view must
 * hold (strings present, buckets for histograms only).
 */
#ifndef TALLY_TEST_SNAP_H
#define TALLY_TEST_SNAP_H

#include <stdint.h>

#include "tally/metrics.h"
#include "tally/reader.h"

/* One series as the reader reported it. */
struct seen {
	uint32_t id;
	unsigned kind, mode, nlabels;
	char name[TALLY_NAME_MAX + 1];
	char help[TALLY_HELP_MAX + 1];
	char unit[TALLY_UNIT_MAX + 1];
	/* "a=x,b=y": room for the longest label set there is. */
	char labels[TALLY_LABELS_MAX + 2 * TALLY_LABEL_PAIRS_MAX];
	int64_t value, sum;
	double fvalue;
	unsigned npercpu;     /* with TALLY_READ_PERCPU */
	int64_t *percpu;      /* npercpu entries, or NULL */
	int64_t percpu_sum;   /* their sum (modulo 2^64) */
	unsigned nbuckets, sub_bits, max_bits;
	int64_t *buckets;     /* histograms: nbuckets entries; else NULL */
	/* Histograms: the quantiles snap_qs[] until one failed, and the
	 * answer of the last one asked (0: all of them were given). */
	double q[5];
	int qrc;
};

/* Quantiles asked of every histogram: 0.5, 0.9, 0.99, 0.999, 1. */
extern const double snap_qs[5];

struct snap {
	int n, cap;
	struct seen *s;
};

/* A tally_series_fn that appends the view to the struct snap @arg
 * (zeroed to start with). */
int snap_cb(const struct tally_series_view *v, void *arg);

/* Frees what a snap holds and empties it. */
void snap_free(struct snap *sn);

/* Every series of @s (or the segment at @path) in one pass with @flags,
 * or fail the test. */
struct snap read_seg(struct tally_seg *s, unsigned flags);
struct snap read_path(const char *path, unsigned flags);

/* The series @name with @labels ("a=x,b=y"), or NULL. */
const struct seen *snap_find(const struct snap *sn, const char *name,
			     const char *labels);

#endif
