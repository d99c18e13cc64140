/*
 * retain.c: what --aggregate keeps of exited processes (retain.h).
 */
#define _GNU_SOURCE
#include "retain.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "strbuf.h"
#include "strmap.h"

static int retained_kind(unsigned kind)
{
	return kind == TALLY_COUNTER || kind == TALLY_HISTOGRAM;
}

static void gone_rehash(struct ex_retain *r, size_t nslots)
{
	free(r->slot);
	r->slot = tp_xcalloc(nslots, sizeof(*r->slot));
	r->nslots = nslots;
	for (size_t g = 0; g < r->ngone; g++) {
		size_t i = (size_t)tp_series_agg_hash(&r->gone[g]) &
			   (nslots - 1);

		while (r->slot[i])
			i = (i + 1) & (nslots - 1);
		r->slot[i] = g + 1;
	}
}

static inline int64_t add64(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* Add the last values of @s (a series of a vanished segment, or removed
 * from a live one) to the retired totals. */
static void retire(struct ex_retain *r, const struct tp_series *s)
{
	struct tp_series *d;
	size_t i;

	if (!retained_kind(s->kind))
		return;
	r->series_retired++;
	if ((r->ngone + 1) * 2 > r->nslots)
		gone_rehash(r, r->nslots ? 2 * r->nslots : 64);
	for (i = (size_t)tp_series_agg_hash(s) & (r->nslots - 1); r->slot[i];
	     i = (i + 1) & (r->nslots - 1)) {
		d = &r->gone[r->slot[i] - 1];
		if (!tp_series_agg_same(d, s))
			continue;
		d->value = add64(d->value, s->value);
		d->sum = add64(d->sum, s->sum);
		for (unsigned b = 0; b < s->nbuckets; b++)
			d->buckets[b] = add64(d->buckets[b], s->buckets[b]);
		return;
	}
	if (r->ngone == r->capgone) {
		r->capgone = r->capgone ? 2 * r->capgone : 64;
		r->gone = tp_xrealloc(r->gone, r->capgone * sizeof(*r->gone));
	}
	d = &r->gone[r->ngone];
	tp_series_copy(d, s);
	/* Per process and per CPU nothing is kept: only the sums. */
	free(d->pids);
	free(d->percpu);
	d->pids = NULL;
	d->percpu = NULL;
	d->npercpu = 0;
	d->nprocs = 0;
	d->pid = 0;
	d->start_ticks = 0;
	d->flags = 0;
	r->slot[i] = ++r->ngone;
}

static int same_segment(const struct tally_seg_info *a,
			const struct tally_seg_info *b)
{
	return a->pid == b->pid && a->start_ticks == b->start_ticks &&
	       a->created_ns == b->created_ns &&
	       strcmp(a->zone_name, b->zone_name) == 0;
}

/* first[i]: the index of segment i's first series (the series of a
 * TP_ORDER_READ snapshot come segment by segment, in segs order). */
static size_t *series_ranges(const struct tp_snapshot *s)
{
	size_t *first = tp_xmalloc((s->nsegs + 1) * sizeof(*first)), at = 0;

	for (size_t i = 0; i < s->nsegs; i++) {
		first[i] = at;
		at += s->segs[i].nseries;
	}
	first[s->nsegs] = at;
	if (at != s->nseries)
		TP_DIE("snapshot: %zu series, segments say %zu", s->nseries,
		       at);
	return first;
}

/* Retire the series of @ls (its series: last.series[lo, hi)) that are no
 * longer in cur.series[clo, chi). */
static void retire_removed(struct ex_retain *r, const struct tp_snapshot *cur,
			   size_t clo, size_t chi, size_t lo, size_t hi)
{
	struct tp_strmap keys = { 0 };

	for (size_t i = clo; i < chi; i++)
		tp_strmap_put(&keys, cur->series[i].key, i);
	for (size_t i = lo; i < hi; i++)
		if (tp_strmap_get(&keys, r->last.series[i].key) == (size_t)-1)
			retire(r, &r->last.series[i]);
	tp_strmap_free(&keys);
}

/* Append last's segment @g (series [lo, hi)) to @cur as a stale one. */
static void carry(struct tp_snapshot *cur, const struct tp_segment *g,
		  const struct tp_series *ls, size_t n)
{
	struct tp_segment *d;

	cur->series = tp_xrealloc(cur->series, (cur->nseries + n + 1) *
				  sizeof(*cur->series));
	for (size_t i = 0; i < n; i++)
		tp_series_copy_to(cur->arena, &cur->series[cur->nseries + i],
				  &ls[i], i ? &cur->series[cur->nseries + i - 1]
					    : NULL);
	cur->nseries += n;
	cur->segs = tp_xrealloc(cur->segs, (cur->nsegs + 1) *
				sizeof(*cur->segs));
	d = &cur->segs[cur->nsegs++];
	*d = *g;
	d->path = tp_xstrdup(g->path);
	d->info.path = d->path;
	d->stale = 1;
}

void ex_retain_update(struct ex_retain *r, struct tp_snapshot *cur,
		      int complete)
{
	struct tp_strmap segat = { 0 }, skipat = { 0 };
	size_t *lfirst, *cfirst, ncur_segs = cur->nsegs;

	if (!cur->arena)
		cur->arena = tp_xcalloc(1, sizeof(*cur->arena));
	if (!r->have_last)
		goto keep;
	lfirst = series_ranges(&r->last);
	cfirst = series_ranges(cur);
	for (size_t i = 0; i < cur->nsegs; i++)
		tp_strmap_put(&segat, cur->segs[i].path, i);
	for (size_t i = 0; i < cur->nskipped; i++)
		tp_strmap_put(&skipat, cur->skipped[i].path, i);
	for (size_t i = 0; i < r->last.nsegs; i++) {
		const struct tp_segment *g = &r->last.segs[i];
		size_t at = tp_strmap_get(&segat, g->path), k;

		if (at != (size_t)-1 && at < ncur_segs &&
		    same_segment(&cur->segs[at].info, &g->info)) {
			/* Still there: series removed since? */
			if (cur->segs[at].info.generation != g->info.generation)
				retire_removed(r, cur, cfirst[at],
					       cfirst[at + 1], lfirst[i],
					       lfirst[i + 1]);
			continue;
		}
		k = tp_strmap_get(&skipat, g->path);
		if (at == (size_t)-1 && ((k != (size_t)-1 &&
					  cur->skipped[k].err != ENOENT) ||
					 !complete)) {
			/* There, but not readable this time: its last
			 * values stand for it. */
			carry(cur, g, &r->last.series[lfirst[i]],
			      lfirst[i + 1] - lfirst[i]);
			continue;
		}
		/* Gone (or replaced by another process's file). */
		r->segments_retired++;
		for (size_t s = lfirst[i]; s < lfirst[i + 1]; s++)
			retire(r, &r->last.series[s]);
	}
	tp_strmap_free(&segat);
	tp_strmap_free(&skipat);
	free(lfirst);
	free(cfirst);
	tp_snapshot_free(&r->last);
keep:
	r->last = *cur;
	r->have_last = 1;
}

void ex_retain_free(struct ex_retain *r)
{
	if (r->have_last)
		tp_snapshot_free(&r->last);
	for (size_t i = 0; i < r->ngone; i++)
		tp_series_free(&r->gone[i]);
	free(r->gone);
	free(r->slot);
	memset(r, 0, sizeof(*r));
}
