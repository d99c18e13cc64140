/*
 * sums.h: the exposition of a set of segments summed across processes,
 * in one call: what tally-exporter --aggregate --self-metrics=no writes
 * for a scrape of them, byte for byte, for a caller that is not a server
 * (the Python package's generate_latest() and TallyCollector).  Sharing
 * the writer (expose.h) is what keeps the names, escapes, suffixes, le
 * bounds and units of the two the same.
 */
#ifndef TALLY_EXPOSE_SUMS_H
#define TALLY_EXPOSE_SUMS_H

#include <stddef.h>

#include "expose.h"
#include "snapshot.h"
#include "strbuf.h"

/*
 * ex_write_sums: append to @out, in format @f, the series of the segments
 * of @opts's directories (its dirs, ndirs and open_opts; the rest is
 * ignored) whose zone is @zone (NULL: every segment), each summed over
 * the processes that wrote it, as tally-exporter --aggregate writes
 * them: metrics in name order, no pid, process or zone label, tally's
 * own histograms with their octave le bounds, without the exporter's own
 * metrics.  @skipped, when not NULL, is filled (zeroed by the caller,
 * tp_snapshot_free() after) with the files that could not be read
 * (skipped, nskipped) and the segments read (segs, nsegs).  Returns 0,
 * or as tp_snapshot_collect() a negative errno with @errbuf saying which
 * directory could not be read (the series of the others are written all
 * the same).  Out of memory is fatal (strbuf.h).  MT-safe for distinct
 * @out.
 */
int ex_write_sums(struct tp_buf *out, const struct tp_collect_opts *opts,
		  const char *zone, enum ex_format f,
		  struct tp_snapshot *skipped, char *errbuf, size_t errlen);

#endif /* TALLY_EXPOSE_SUMS_H */
