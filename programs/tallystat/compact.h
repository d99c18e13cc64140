/*
 * programs/tallystat/compact.h: what a compact read (compact.c) holds,
 * which the iterator over a report's rows (iter.c) reads back: per series
 * its values, a hash of its key and its record id, segment by segment in
 * the order of the report.
 */
#ifndef TALLYSTAT_COMPACT_H
#define TALLYSTAT_COMPACT_H

#include "tallystat.h"

/* One series of the read. */
struct centry {
	int64_t value;
	double fvalue;
	uint64_t hash;          /* of its key and kind */
	struct tp_series *full; /* histograms, per-process gauges: a copy */
	uint32_t seg, id;       /* its segment (snap->segs), its record */
	unsigned frac;
	unsigned char kind, dead, fractional;
	unsigned char info, stateset; /* format 2.8 (tally_series_view) */
};

/* An entry's change since the previous read (rates.c), as delta.c
 * makes it: the increase (gauges: the value), TP_SERIES_* and TS_*
 * flags, and for an entry kept whole the delta as a copy. */
struct cdelta {
	int64_t value;
	struct tp_series *full;
	unsigned flags;
};

/* A series of the segment being read, for the sort. */
struct ts_skey {
	const char *key;
	size_t at;              /* in e[] */
	unsigned kind;
};

struct ts_compact {
	struct centry *e;
	size_t n, cap;
	size_t *seg_first;      /* entries of segment g: seg_first[g] ..
				   seg_first[g + 1] */
	uint32_t nsegs;
	uint32_t *order;        /* segments in report order */
	/* The segment being read: its keys, for the sort. */
	size_t first;
	struct tp_arena keys;
	struct ts_skey *sk;
	size_t nsk, capsk;
	const struct tp_snapshot *snap;
	const struct tally_open_opts *open_opts;
	struct cdelta *d;       /* ts_compact_delta(): per entry, or NULL */
	/* Segment g held open since it was read (held[g]), so that its rows
	 * keep their texts when its file goes before they are printed
	 * (iter.c); NULL when it could not be held: its entries are then
	 * kept whole.  The sums of an Average: report (caverage.c) take
	 * over the segments they need; their order is NULL, the entries in
	 * their own order. */
	struct tally_seg **held;
	/* The segment being read: its header, and whether it is held yet. */
	const struct tally_seg_info *walking;
	struct tally_seg *hold;
	int tried;
};

/* Close a segment that a compact read held (NULL is allowed). */
void ts_seg_release(struct tally_seg *seg);

/* The hash of a series' key and kind that tells whether a record still
 * holds the series read; the key of @v into @b. */
uint64_t ts_key_hash(const char *key, unsigned kind);
void ts_make_key(struct tp_buf *b, const struct tally_series_view *v);

/* rates.c: the hash of entry @e's identity (its process, key hash and
 * kind); are @x of @a and @y of @b the same series (the same process,
 * key hash, kind and bucket count)? */
uint64_t ts_entry_hash(const struct ts_compact *c, const struct centry *e);
int ts_same_entry(const struct ts_compact *a, const struct centry *x,
		  const struct ts_compact *b, const struct centry *y);

#endif /* TALLYSTAT_COMPACT_H */
