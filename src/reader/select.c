/*
 * select.c: passes over chosen records of a segment (tally/reader.h,
 * tally_seg_foreach_ids and tally_seg_visit).
 *
 * A reader that keeps nothing of a series but its record id (a tool that
 * sorts a segment's series by name through an index of ids, then prints
 * them in that order) comes back for the series by id.  The records are
 * read exactly as tally_seg_foreach reads them (walk.c: copy, values,
 * copy again, equal or skipped), in runs: ids that follow each other in
 * the caller's order (7, 8, 9) are read as one batch, so that a caller
 * asking for a whole table in order costs what one tally_seg_foreach
 * costs.  Every id is checked against the series table's high-water mark
 * before anything is read: an id beyond it is the caller's mistake, and
 * nothing past the table is ever read.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "reader/segment.h"

/* The length of the run of consecutive ids that starts at ids[0], at
 * most BATCH records. */
static uint32_t run_length(const uint32_t *ids, size_t nids)
{
	uint32_t n = 1;

	while (n < nids && n < BATCH && ids[n] == ids[0] + n)
		n++;
	return n;
}

int tally_seg_foreach_ids(struct tally_seg *s, unsigned flags,
			  const uint32_t *ids, size_t nids,
			  tally_series_fn fn, void *arg)
{
	uint32_t hwm, n;
	int count = 0, rc, stop = 0;
	char badmsg[256] = "";

	tally__ok();
	if (!s || !fn || (!ids && nids))
		return tally__fail(EINVAL, "tally_seg_foreach_ids: NULL "
				   "argument");
	if (nids > INT32_MAX)
		return tally__fail(EINVAL, "%s: %zu ids in one pass, more than "
				   "a pass can count", s->path, nids);
	if ((rc = tally__walk_begin(s, flags, &hwm)) < 0)
		return rc;
	for (size_t i = 0; i < nids; i++)
		if (ids[i] >= hwm)
			return tally__fail(EINVAL, "%s: series %u does not "
					   "exist (the table holds %u)",
					   s->path, ids[i], hwm);
	for (size_t i = 0; !stop && i < nids; i += n) {
		n = run_length(ids + i, nids - i);
		rc = tally__walk_run(s, ids[i], n, flags, fn, arg, badmsg,
				     sizeof(badmsg), &stop);
		if (rc < 0)
			return rc;
		count += rc;
	}
	return tally__walk_end(s, stop, count, fn, arg);
}

int tally_seg_visit(struct tally_seg *s, unsigned flags, uint32_t id,
		    tally_series_fn fn, void *arg)
{
	return tally_seg_foreach_ids(s, flags, &id, 1, fn, arg);
}
