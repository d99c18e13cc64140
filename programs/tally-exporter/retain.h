/*
 * retain.h: --aggregate never goes backwards.
 *
 * Pre-fork workers come and go.  When one exits and its segment is
 * removed (TALLY_KEEP unset, or tally_dir_cleanup()), the sum of a counter
 * across workers would drop by that worker's count, and Prometheus would
 * take the drop for a reset: rate() would count the whole remaining total
 * again.  So in aggregate mode the exporter keeps, per series identity
 * (name, labels, kind, histogram layout; aggregate.h), the last values of
 * the counters and histograms (buckets, sum and count) of every segment
 * that vanished, and adds them to the live sum of the same series.  A
 * series whose processes all exited is still exported with its retired
 * total.
 *
 * - A segment is identified by its path, pid, start time and creation
 *   time: a file replaced by a new process is the old one vanishing.
 * - A segment that is still there but was skipped in this scrape (corrupt
 *   for a moment, unreadable) is neither retired nor dropped: its series
 *   of the last read are carried into this scrape (tp_segment.stale).
 *   So is every missing segment when a directory could not be listed.
 * - A series that a live process removed (tally_metric_remove) is
 *   retired the same way: its segment's generation changed and its key is
 *   no longer there.
 * - Gauges are not retained: a gauge's aggregate is the sum over the live
 *   segments only (what is in flight now).
 *
 * Cost: the previous scrape's aggset (aggset.h: its sums and an entry
 * per process's series) is kept between scrapes (a reference, not a
 * copy); the comparison is per segment, and per series only for the
 * segments whose generation changed or that vanished.  Memory for the
 * retired values grows with distinct series, never with the number of
 * processes that exited.  The exporter knows only the processes it saw:
 * after a restart of the exporter, Prometheus sees one reset.
 */
#ifndef TALLY_EXPORTER_RETAIN_H
#define TALLY_EXPORTER_RETAIN_H

#include <stddef.h>
#include <stdint.h>

#include "aggset.h"

struct ex_retain {
	struct ex_aggset *last;     /* the previous scrape (a reference) */
	struct tp_series *gone;     /* retired totals (own their memory) */
	size_t ngone, capgone;
	size_t *slot;               /* index + 1 into gone; 0: empty */
	size_t nslots;              /* 0 or a power of two */
	uint64_t segments_retired;  /* since start */
	uint64_t series_retired;    /* retire events, since start */
};

/*
 * ex_retain_update: compare @cur (just collected, its sums still open)
 * with the previous scrape, retire what vanished, carry what was skipped
 * (into @cur: ex_aggset_carry()), then keep a reference to @cur as the
 * previous scrape (the previous one's let go: under the lock that
 * guards the references).  @complete is 0 when a directory could not be read at all in
 * this scrape: then nothing is retired (a segment missing from @cur is
 * carried), so that a directory that comes back is not counted twice.
 * The series to add to the aggregate are then r->gone[0 .. r->ngone).
 * Not MT-safe: one scrape at a time.
 */
void ex_retain_update(struct ex_retain *r, struct ex_aggset *cur,
		      int complete);
void ex_retain_free(struct ex_retain *r);

#endif /* TALLY_EXPORTER_RETAIN_H */
