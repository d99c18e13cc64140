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

/* Retire the series of last's segment @ls that are no longer in cur's
 * segment @cs. */
static void retire_removed(struct ex_retain *r, const struct ex_aggset *cur,
			   size_t cs, size_t ls)
{
	const struct ex_aggset *last = r->last;
	struct tp_strmap keys = { 0 };
	size_t pw = last->pfirst[ls];

	for (size_t e = cur->first[cs]; e < cur->first[cs + 1]; e++)
		tp_strmap_put(&keys, cur->agg.series[cur->ents[e].key].key, e);
	for (size_t e = last->first[ls]; e < last->first[ls + 1]; e++) {
		struct tp_series s;

		ex_aggset_series(last, ls, e, &pw, &s);
		if (tp_strmap_get(&keys, s.key) == (size_t)-1)
			retire(r, &s);
	}
	tp_strmap_free(&keys);
}

/* Retire every series of last's segment @ls: its process is gone. */
static void retire_segment(struct ex_retain *r, size_t ls)
{
	const struct ex_aggset *last = r->last;
	size_t pw = last->pfirst[ls];

	r->segments_retired++;
	for (size_t e = last->first[ls]; e < last->first[ls + 1]; e++) {
		struct tp_series s;

		ex_aggset_series(last, ls, e, &pw, &s);
		retire(r, &s);
	}
}

void ex_retain_update(struct ex_retain *r, struct ex_aggset *cur,
		      int complete)
{
	struct tp_strmap segat = { 0 }, skipat = { 0 };
	const struct tp_snapshot *c = &cur->agg;
	size_t ncur_segs = c->nsegs;

	if (!r->last)
		goto keep;
	for (size_t i = 0; i < c->nsegs; i++)
		tp_strmap_put(&segat, c->segs[i].path, i);
	for (size_t i = 0; i < c->nskipped; i++)
		tp_strmap_put(&skipat, c->skipped[i].path, i);
	for (size_t i = 0; i < r->last->agg.nsegs; i++) {
		const struct tp_segment *g = &r->last->agg.segs[i];
		size_t at = tp_strmap_get(&segat, g->path), k;

		if (at != (size_t)-1 && at < ncur_segs &&
		    same_segment(&c->segs[at].info, &g->info)) {
			/* Still there: series removed since? */
			if (c->segs[at].info.generation != g->info.generation)
				retire_removed(r, cur, at, i);
			continue;
		}
		k = tp_strmap_get(&skipat, g->path);
		if (at == (size_t)-1 && ((k != (size_t)-1 &&
					  c->skipped[k].err != ENOENT) ||
					 !complete)) {
			/* There, but not readable this time: its last
			 * values stand for it. */
			ex_aggset_carry(cur, r->last, i);
			continue;
		}
		/* Gone (or replaced by another process's file). */
		retire_segment(r, i);
	}
	tp_strmap_free(&segat);
	tp_strmap_free(&skipat);
	ex_aggset_put(r->last);
keep:
	r->last = cur;
	cur->refs++;
}

void ex_retain_free(struct ex_retain *r)
{
	ex_aggset_put(r->last);
	for (size_t i = 0; i < r->ngone; i++)
		tp_series_free(&r->gone[i]);
	free(r->gone);
	free(r->slot);
	memset(r, 0, sizeof(*r));
}
