/*
 * sums.c: a scrape of --aggregate without a server (sums.h): the
 * segments summed as they are read (aggset.h), nothing retained from a
 * scrape before (the segments of exited processes stay in their
 * directory and are read again), written whole by expose.h's writer.
 */
#define _GNU_SOURCE
#include <string.h>

#include "aggset.h"
#include "sums.h"

/* The collection's filter and sinks share one argument. */
struct sums {
	struct ex_aggset *a;
	const char *zone;
};

static int keep_zone(const struct tally_seg_info *info, void *arg)
{
	const struct sums *w = arg;

	return strcmp(info->zone_name, w->zone) == 0;
}

static void give(const struct tp_series *s, void *arg)
{
	ex_aggset_give(s, ((struct sums *)arg)->a);
}

static void seg_end(const struct tp_segment *g, void *arg)
{
	ex_aggset_seg_end(g, ((struct sums *)arg)->a);
}

int ex_write_sums(struct tp_buf *out, const struct tp_collect_opts *opts,
		  const char *zone, enum ex_format f,
		  struct tp_snapshot *skipped, char *errbuf, size_t errlen)
{
	struct ex_config c = { .aggregate = 1 };
	struct tp_collect_opts co = { 0 };
	struct tp_snapshot raw = { 0 };
	struct sums w = { tp_xcalloc(1, sizeof(*w.a)), zone };
	struct ex_aggset *a = w.a;
	int rc;

	co.dirs = opts->dirs;
	co.ndirs = opts->ndirs;
	co.open_opts = opts->open_opts;
	co.seg_filter = zone ? keep_zone : NULL;
	co.series_sink = give;
	co.sink_seg_end = seg_end;
	co.arg = &w;
	co.order = TP_ORDER_READ; /* the writer groups the metrics itself */
	/* ex_aggset_collect()'s steps, with a filter of segments. */
	ex_aggset_begin(a);
	rc = tp_snapshot_collect(&raw, &co, errbuf, errlen);
	ex_aggset_end_read(a, &raw);
	tp_snapshot_free(&raw);
	ex_aggset_finish(a, NULL, 0);
	ex_write(out, &a->agg, &c, f, NULL, 0, NULL);
	if (skipped) {
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
	return rc;
}
