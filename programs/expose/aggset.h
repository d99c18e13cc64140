/*
 * aggset.h: a scrape of --aggregate, summed as it is read, and what the
 * next scrape needs of it, in a compact form.
 *
 * --aggregate writes one series per identity (name, labels, kind and
 * histogram layout: aggregate.h), the sum over the processes, and keeps
 * the values of each process's series until the next scrape (retain.h:
 * a process that exits must not make its counters go backwards).  An
 * aggset holds both without a copy of each process's series: agg.series
 * are the sums, one per identity, summed as the segments are read
 * (tp_agg_add() on each series the reader gives, never kept whole);
 * each series read is an entry of 16 bytes, the index of its sum (whose
 * strings it shares: same identity, same key and labels), its kind,
 * mode and liveness, and its value, with a few words more in a pool for
 * what an integer counter or gauge does not have (a double, billionths,
 * a histogram's sum and buckets).  A process's series can be made again
 * from its entry (ex_aggset_series()), as tp_snapshot_collect() gave it,
 * to be retired or carried by the next scrape; its HELP is then its sum's
 * (the first definition read), per-CPU values are not kept.
 *
 * agg.segs are the segments read (nseries: every series of each, as a
 * snapshot counts them), then those carried from the scrape before
 * (stale); agg.skipped the files that could not be read.  The entries
 * of segment k are ents[first[k] .. first[k + 1]), their pool words from
 * pfirst[k].  A segment found corrupt half-way is left out with its
 * series, as a snapshot leaves it out: the sums are then made again from
 * the entries kept.
 *
 * An aggset is shared by the body that writes it and by the retain that
 * keeps it for the next scrape: refs counts them, changed only under the
 * exporter's scrape lock; once made it is only read.
 */
#ifndef TALLY_EXPORTER_AGGSET_H
#define TALLY_EXPORTER_AGGSET_H

#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"
#include "snapshot.h"

struct ex_entry {
	uint32_t key;       /* index of its sum in agg.series */
	uint8_t kind, mode; /* EX_ENTRY_WIDE: in the pool */
	uint8_t dead;       /* TP_LIVE or TP_DEAD */
	uint8_t bits;       /* EX_ENTRY_* */
	int64_t value;
};

#define EX_ENTRY_FRACTIONAL 0x1u /* tp_series.fractional */
#define EX_ENTRY_EXTRA      0x2u /* pool: fvalue, frac (and below) */
#define EX_ENTRY_WIDE       0x4u /* pool: kind, mode (over 255) */

struct ex_aggset {
	struct tp_snapshot agg;     /* the sums, segments, skipped files */
	struct ex_entry *ents;
	size_t nents, cap_ents;
	uint64_t *pool;
	size_t npool, cap_pool;
	size_t *first, *pfirst;     /* per segment, + 1 past the last */
	size_t nclosed, cap_first;  /* segments whose entries are there */
	unsigned refs;
	/* While it is made. */
	struct tp_agg sum;
	int redo;                   /* a segment was left out half-way */
};

/*
 * ex_aggset_collect: fill @a (zeroed by the caller) with the segments
 * @opts names (its filters and sinks must be NULL).  Return and @errbuf:
 * as tp_snapshot_collect().  The sums stay open for ex_aggset_carry()
 * and ex_aggset_finish().
 */
int ex_aggset_collect(struct ex_aggset *a, const struct tp_collect_opts *opts,
		      char *errbuf, size_t errlen);

/*
 * The steps of ex_aggset_collect(), for a reader of another kind (and
 * the tests): ex_aggset_begin() opens the sums of @a (zeroed);
 * ex_aggset_give() and ex_aggset_seg_end() are the collection's
 * series_sink and sink_seg_end (sink_arg: @a; @v may be NULL: only @s is
 * read); ex_aggset_end_read() makes the sums
 * again if a segment was left out half-way (the entries kept are of
 * @raw's segments) and takes @raw's segments, skipped files and times.
 * Each returns 0, or in soft mode (strbuf.h) -ENOMEM: @a is then only to
 * be freed (ex_aggset_put()), as after ex_aggset_finish()'s.
 */
int ex_aggset_begin(struct ex_aggset *a);
int ex_aggset_give(const struct tp_series *s,
		   const struct tally_series_view *v, void *arg);
int ex_aggset_seg_end(const struct tp_segment *g, void *arg);
int ex_aggset_end_read(struct ex_aggset *a, struct tp_snapshot *raw);

/* ex_aggset_of_snapshot: the same made of @raw (TP_ORDER_READ: series
 * segment by segment), which is copied, not taken. */
void ex_aggset_of_snapshot(struct ex_aggset *a, const struct tp_snapshot *raw);

/* ex_aggset_series: entry @e of segment @seg of @a as the series it was
 * read as, in @s, whose strings and arrays are @a's; @pw: the pool word
 * where the entry's begin (pfirst[seg] for the segment's first),
 * advanced past them. */
void ex_aggset_series(const struct ex_aggset *a, size_t seg, size_t e,
		      size_t *pw, struct tp_series *s);

/* ex_aggset_carry: segment @seg of @last, and its series, added to @cur
 * (still open) as a stale segment: not read this time. */
void ex_aggset_carry(struct ex_aggset *cur, const struct ex_aggset *last,
		     size_t seg);

/* ex_aggset_finish: @nextra series without process added to the sums
 * (tp_snapshot_aggregate_with()'s extra), and the sums closed. */
int ex_aggset_finish(struct ex_aggset *a, const struct tp_series *extra,
		     size_t nextra);

/* ex_aggset_put: one reference of @a let go, and @a freed with the last
 * (NULL: nothing). */
void ex_aggset_put(struct ex_aggset *a);

#endif /* TALLY_EXPORTER_AGGSET_H */
