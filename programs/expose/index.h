/*
 * index.h: the series of a scrape as places to read them again.
 *
 * A snapshot (snapshot.h) copies every series, a few hundred bytes
 * each.  The exporter needs less to write a scrape: which metric each
 * series belongs to, to group them by name, and where to read it again
 * when its turn comes.  ex_index_collect() reads the segments as
 * tp_snapshot_collect() does (the same segments, skips and reasons) but
 * keeps, for each series, its place: the metric record of its segment
 * and its record id, 8 bytes.  A metric record (a metric in one segment)
 * keeps one whole copy, of its first series: the HELP, unit, kind and
 * label names the metric is written with.  expose.c reads each series
 * again by id (tally_seg_foreach_ids()) as it writes it: values are then
 * those of that moment, and a series removed in between is left out.
 *
 * Per-process gauges and the states of enums are kept whole in the
 * snapshot: their views combine the series of several records (the
 * current state is the one of the largest stamp among its label set's),
 * which a read by id of some of them does not give back.
 * A gauge of a segment that nobody uses any more is left out at once:
 * it is no current value (snapshot.h, "Whose a series is").
 *
 * An index whose places are NULL is a plain snapshot: every series is in
 * snap.series (--aggregate, whose sums are an aggset's, aggset.h, and
 * ex_write()).
 */
#ifndef TALLY_EXPORTER_INDEX_H
#define TALLY_EXPORTER_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "snapshot.h"
#include "strmap.h"

/* Place.rec for a series kept whole: place.id is its index in
 * snap.series. */
#define EX_PLACE_KEPT UINT32_MAX
/* Place.rec for a series whose segment turned out corrupt as it was
 * read: left out, as the snapshot leaves out that segment's series. */
#define EX_PLACE_GONE (UINT32_MAX - 1)

struct ex_place {
	uint32_t rec;       /* index in recs, or EX_PLACE_* */
	uint32_t id;        /* its record id in the segment */
};

/* A metric of one segment: the first series of it read there, copied
 * whole, and the segment's index in snap.segs. */
struct ex_rec {
	struct tp_series first;
	uint32_t seg;
};

struct ex_index {
	struct tp_snapshot snap;
	struct ex_place *places;    /* in the order read; NULL: none */
	size_t nplaces, cap_places;
	struct ex_rec *recs;
	size_t nrecs, cap_recs;
	struct tp_arena mem;        /* what recs point to */
	const struct tally_open_opts *open_opts; /* to open them again */
	/* While collecting: the segments in the order read (paths) and the
	 * metric records of the one being read. */
	char **paths;
	uint32_t *counts;           /* the series read from each */
	size_t npaths;
	struct tp_strmap cur;
	int borrowed;               /* snap is another's: not freed */
};

/*
 * ex_index_collect: fill @ix (zeroed by the caller) from the segments
 * @opts names (its filters must be NULL; order TP_ORDER_READ).  Return
 * and @errbuf: as tp_snapshot_collect().
 */
int ex_index_collect(struct ex_index *ix, const struct tp_collect_opts *opts,
		     char *errbuf, size_t errlen);

/* ex_index_of_snapshot: @ix made of @snap, which it takes (zeroed). */
void ex_index_of_snapshot(struct ex_index *ix, struct tp_snapshot *snap);
/* ex_index_of_borrowed: @ix made of @snap, which must outlive it. */
void ex_index_of_borrowed(struct ex_index *ix, const struct tp_snapshot *snap);

/*
 * ex_index_series: @v, read from segment @seg of @ix, as a series in @s
 * whose strings and arrays are @v's (valid while @v is).
 */
void ex_index_series(const struct ex_index *ix, uint32_t seg,
		     const struct tally_series_view *v, struct tp_series *s);

/* ex_index_free: release what @ix holds and zero it. */
void ex_index_free(struct ex_index *ix);

#endif /* TALLY_EXPORTER_INDEX_H */
