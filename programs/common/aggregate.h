/*
 * programs/common/aggregate.h: one series out of the same series of
 * several processes (pre-fork workers, several instances of a program):
 * tallystat -a, tally-exporter --aggregate.
 *
 * Series are the same when their name, labels, kind and histogram layout
 * are; the process and zone are forgotten.  Values, sums, buckets and
 * per-CPU values add up; a gauge's sum is the total of the processes' (in
 * flight across all workers); flags are or'ed.  A summed series is dead
 * (tp_series.dead) only when all of its processes are; gauges of processes
 * that are gone (TP_DEAD) are summed apart from the live ones, never with
 * them.
 *
 * Cost: one hash table lookup per series (no string is built to find a
 * series' peers), the results' strings in the output's arena.
 */
#ifndef TALLY_PROGRAMS_AGGREGATE_H
#define TALLY_PROGRAMS_AGGREGATE_H

#include <stdint.h>

#include "snapshot.h"

/*
 * tp_snapshot_aggregate: fill @out (not yet initialised) with the sums of
 * the series of @in.  Each result has pid 0, nprocs and pids[] of the
 * processes summed, proc and zone those of the processes or "*" when they
 * differ, and created_ns the earliest.  @out also gets copies of @in's
 * segments and skipped files, and its times.  Sorted by key, unless
 * @in->unsorted (then in the order each series was first met).  @out
 * owns its memory: @in may be freed first.
 */
void tp_snapshot_aggregate(const struct tp_snapshot *in,
			   struct tp_snapshot *out);

/*
 * tp_snapshot_aggregate_with: the same, with @nextra more series summed
 * in as if they were in @in, but without process: tally-exporter's
 * values of the processes that exited.  An extra series adds to the
 * series of @in it is the same as, or comes out alone (nprocs 0).
 */
void tp_snapshot_aggregate_with(const struct tp_snapshot *in,
				const struct tp_series *extra, size_t nextra,
				struct tp_snapshot *out);

/*
 * Summing series one at a time, as they are read (tally-exporter
 * --aggregate never holds every process's series at once).
 * tp_agg_begin() makes @out (not yet initialised) an empty snapshot with
 * its arena; tp_agg_add() sums @s into it as tp_snapshot_aggregate_with()
 * does a series of @in (@extra 0) or an extra one (@extra 1), in the
 * order met, and returns the index of its sum in out->series (it may
 * move: hold indexes, not pointers); tp_agg_end() frees the lookup
 * table, not @out.  @out has no segments, skipped files nor times: the
 * caller sets them.  In soft mode (strbuf.h), tp_agg_begin() returns
 * -ENOMEM and tp_agg_add() TP_AGG_FAILED when memory runs out: the sums
 * are then only to be freed (tp_agg_end(), tp_snapshot_free(@out)).
 */
struct tp_agg {
	struct tp_snapshot *out;
	size_t *slot;         /* index + 1 into out->series; 0: empty */
	size_t mask;
	size_t cap;           /* room in out->series and pcap */
	unsigned *pcap;       /* room in out->series[i].pids */
	size_t last_new;      /* index + 1 of the last series made */
};
#define TP_AGG_FAILED ((size_t)-1)
int tp_agg_begin(struct tp_agg *g, struct tp_snapshot *out);
size_t tp_agg_add(struct tp_agg *g, const struct tp_series *s, int extra);
void tp_agg_end(struct tp_agg *g);

/* The identity tp_snapshot_aggregate() sums by; malloc'ed. */
char *tp_series_agg_key(const struct tp_series *s);
/* The same identity, as a hash, and as a test of two series. */
uint64_t tp_series_agg_hash(const struct tp_series *s);
int tp_series_agg_same(const struct tp_series *a, const struct tp_series *b);

#endif /* TALLY_PROGRAMS_AGGREGATE_H */
