/*
 * sums.c: a scrape of --aggregate without a server (sums.h): the
 * segments summed as they are read (aggset.h), nothing retained from a
 * scrape before (the segments of exited processes stay in their
 * directory and are read again), written whole by expose.h's writer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "aggset.h"
#include "sums.h"

/* The segment filter: @arg is the zone wanted. */
static int keep_zone(const struct tally_seg_info *info, void *arg)
{
	return strcmp(info->zone_name, (const char *)arg) == 0;
}

/* The read and the writing, in soft mode: 0 or -ENOMEM (@rc: the
 * collection's error, returned when nothing else failed). */
static int write_sums(struct ex_aggset *a, struct tp_buf *out,
		      const struct tp_collect_opts *co, enum ex_format f,
		      char *errbuf, size_t errlen, int *rc)
{
	struct ex_config c = { .aggregate = 1 };
	struct tp_snapshot raw = { 0 };
	int err;

	if ((err = ex_aggset_begin(a)) < 0)
		return err;
	/* ex_aggset_collect()'s steps, with a filter of segments. */
	*rc = tp_snapshot_collect(&raw, co, errbuf, errlen);
	err = *rc == -ENOMEM ? *rc : ex_aggset_end_read(a, &raw);
	tp_snapshot_free(&raw);
	if (!err)
		err = ex_aggset_finish(a, NULL, 0);
	if (!err)
		err = ex_write(out, &a->agg, &c, f, NULL, 0, NULL);
	return err;
}

int ex_write_sums(struct tp_buf *out, const struct tp_collect_opts *opts,
		  const char *zone, enum ex_format f,
		  struct tp_snapshot *skipped, char *errbuf, size_t errlen)
{
	struct tp_collect_opts co = { 0 };
	struct ex_aggset *a;
	int rc = 0, err;

	tp_soft_begin();
	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!(a = tp_xcalloc(1, sizeof(*a)))) {
		err = -ENOMEM;
		goto out;
	}
	co.dirs = opts->dirs;
	co.ndirs = opts->ndirs;
	co.open_opts = opts->open_opts;
	co.seg_filter = zone ? keep_zone : NULL;
	co.arg = (void *)zone;
	co.series_sink = ex_aggset_give;
	co.sink_seg_end = ex_aggset_seg_end;
	co.sink_arg = a;
	co.order = TP_ORDER_READ; /* the writer groups the metrics itself */
	err = write_sums(a, out, &co, f, errbuf, errlen, &rc);
	if (!err && skipped) {
		/* The lists are handed over, not copied. */
		skipped->skipped = a->agg.skipped;
		skipped->nskipped = a->agg.nskipped;
		skipped->segs = a->agg.segs;
		skipped->nsegs = a->agg.nsegs;
		a->agg.skipped = NULL;
		a->agg.nskipped = 0;
		a->agg.segs = NULL;
		a->agg.nsegs = 0;
	}
	a->refs = 1;
	ex_aggset_put(a);
out:
	tp_soft_end();
	if (err && errbuf && errlen)
		snprintf(errbuf, errlen, "%s", err == -ENOMEM ?
			 "out of memory" : strerror(-err));
	return err ? err : rc;
}
