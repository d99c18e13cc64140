/*
 * aggset.c: a scrape of --aggregate summed as it is read, and its
 * processes' series kept as entries (aggset.h).
 *
 * The reader gives each series once (tp_collect_opts.series_sink); it is
 * summed at once and noted as an entry.  The pool words of an entry, in
 * this order, only as needed: fvalue (its bits) and frac when the entry
 * has EX_ENTRY_EXTRA (always for a histogram), kind and mode when
 * EX_ENTRY_WIDE, then a histogram's sum, fsum (bits) and its buckets (as
 * many as its sum's).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggset.h"
#include "strbuf.h"

static uint64_t dbits(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u;
}

static double bitsd(uint64_t u)
{
	double d;

	memcpy(&d, &u, sizeof(d));
	return d;
}

static void pool_put(struct ex_aggset *a, uint64_t w)
{
	if (a->npool == a->cap_pool) {
		a->cap_pool = a->cap_pool ? a->cap_pool + a->cap_pool / 2 : 256;
		a->pool = tp_xrealloc(a->pool, a->cap_pool * sizeof(*a->pool));
	}
	a->pool[a->npool++] = w;
}

/* Note series @s, summed in agg.series[@key], as an entry. */
static void push(struct ex_aggset *a, const struct tp_series *s, size_t key)
{
	struct ex_entry *e;
	int wide = s->kind > 255 || s->mode > 255;
	int hist = s->kind == TALLY_HISTOGRAM;

	if (key > UINT32_MAX)
		TP_DIE("aggregate: more than %u series", UINT32_MAX);
	if (a->nents == a->cap_ents) {
		a->cap_ents = a->cap_ents ? a->cap_ents + a->cap_ents / 2 : 1024;
		a->ents = tp_xrealloc(a->ents, a->cap_ents * sizeof(*a->ents));
	}
	e = &a->ents[a->nents++];
	memset(e, 0, sizeof(*e));
	e->key = (uint32_t)key;
	e->kind = wide ? 0 : (uint8_t)s->kind;
	e->mode = wide ? 0 : (uint8_t)s->mode;
	e->dead = (uint8_t)s->dead;
	e->value = s->value;
	e->bits = (s->fractional ? EX_ENTRY_FRACTIONAL : 0) |
		  (wide ? EX_ENTRY_WIDE : 0);
	if (hist || wide || s->frac || dbits(s->fvalue)) {
		e->bits |= EX_ENTRY_EXTRA;
		pool_put(a, dbits(s->fvalue));
		pool_put(a, s->frac);
	}
	if (wide) {
		pool_put(a, s->kind);
		pool_put(a, s->mode);
	}
	if (!hist)
		return;
	pool_put(a, (uint64_t)s->sum);
	pool_put(a, dbits(s->fsum));
	/* The sum has as many buckets: same identity, same layout. */
	for (unsigned b = 0; b < s->nbuckets; b++)
		pool_put(a, s->buckets ? (uint64_t)s->buckets[b] : 0);
}

/* The series entry @x stands for: its strings and layout @t's (its sum),
 * its process @info's; *@w advanced past its pool words. */
static void entry_series(const struct tp_series *t,
			 const struct tally_seg_info *info,
			 const struct ex_entry *x, const uint64_t **w,
			 struct tp_series *s)
{
	const uint64_t *p = *w;

	memset(s, 0, sizeof(*s));
	s->pid = info->pid;
	s->start_ticks = info->start_ticks;
	s->created_ns = info->created_ns;
	s->nprocs = 1;
	s->arena = 1;
	snprintf(s->proc, sizeof(s->proc), "%.15s", info->proc_name);
	snprintf(s->zone, sizeof(s->zone), "%.63s", info->zone_name);
	s->key = t->key;
	s->name = t->name;
	s->help = t->help;
	s->unit = t->unit;
	s->nlabels = t->nlabels;
	s->label_names = t->label_names;
	s->label_values = t->label_values;
	s->kind = x->kind;
	s->mode = x->mode;
	s->dead = x->dead;
	s->value = x->value;
	s->fractional = !!(x->bits & EX_ENTRY_FRACTIONAL);
	if (x->bits & EX_ENTRY_EXTRA) {
		s->fvalue = bitsd(p[0]);
		s->frac = (unsigned)p[1];
		p += 2;
	}
	if (x->bits & EX_ENTRY_WIDE) {
		s->kind = (unsigned)p[0];
		s->mode = (unsigned)p[1];
		p += 2;
	}
	if (s->kind == TALLY_HISTOGRAM) {
		s->sum = (int64_t)p[0];
		s->fsum = bitsd(p[1]);
		s->buckets = (int64_t *)(p + 2);
		s->sub_bits = t->sub_bits;
		s->max_bits = t->max_bits;
		s->nbuckets = t->nbuckets;
		s->classic = t->classic;
		s->nbounds = t->nbounds;
		s->bounds = t->bounds;
		p += 2 + t->nbuckets;
	}
	*w = p;
}

void ex_aggset_series(const struct ex_aggset *a, size_t seg, size_t e,
		      size_t *pw, struct tp_series *s)
{
	const struct ex_entry *x = &a->ents[e];
	const uint64_t *w = a->pool + *pw;

	entry_series(&a->agg.series[x->key], &a->agg.segs[seg].info, x, &w,
		     s);
	*pw = (size_t)(w - a->pool);
}

/* The entries since the last segment closed are the next segment's. */
static void close_segment(struct ex_aggset *a)
{
	if (a->nclosed + 2 > a->cap_first) {
		a->cap_first = a->cap_first ? 2 * a->cap_first : 16;
		a->first = tp_xrealloc(a->first, a->cap_first *
				       sizeof(*a->first));
		a->pfirst = tp_xrealloc(a->pfirst, a->cap_first *
					sizeof(*a->pfirst));
	}
	if (!a->nclosed) {
		a->first[0] = 0;
		a->pfirst[0] = 0;
	}
	a->nclosed++;
	a->first[a->nclosed] = a->nents;
	a->pfirst[a->nclosed] = a->npool;
}

/* Where the entries of the segment being read begin. */
static size_t seg_start(const struct ex_aggset *a)
{
	return a->nclosed ? a->first[a->nclosed] : 0;
}

static size_t seg_pool_start(const struct ex_aggset *a)
{
	return a->nclosed ? a->pfirst[a->nclosed] : 0;
}

void ex_aggset_begin(struct ex_aggset *a)
{
	tp_agg_begin(&a->sum, &a->agg);
}

void ex_aggset_give(const struct tp_series *s, void *arg)
{
	struct ex_aggset *a = arg;

	push(a, s, tp_agg_add(&a->sum, s, 0));
}

void ex_aggset_seg_end(const struct tp_segment *g, void *arg)
{
	struct ex_aggset *a = arg;

	if (g) {
		close_segment(a);
		return;
	}
	/* Corrupt half-way: its series are left out, and the sums they
	 * went into are made again without them. */
	if (a->nents > seg_start(a))
		a->redo = 1;
	a->nents = seg_start(a);
	a->npool = seg_pool_start(a);
}

/* The sums made again from the entries kept, of segments @segs (whose
 * series they are). */
static void resum(struct ex_aggset *a, const struct tp_segment *segs)
{
	struct tp_snapshot old = a->agg;

	tp_agg_end(&a->sum);
	tp_agg_begin(&a->sum, &a->agg);
	for (size_t k = 0; k < a->nclosed; k++) {
		const uint64_t *w = a->pool + a->pfirst[k];

		for (size_t e = a->first[k]; e < a->first[k + 1]; e++) {
			struct ex_entry *x = &a->ents[e];
			struct tp_series s;

			entry_series(&old.series[x->key], &segs[k].info, x, &w,
				     &s);
			x->key = (uint32_t)tp_agg_add(&a->sum, &s, 0);
		}
	}
	tp_snapshot_free(&old);
	a->redo = 0;
}

void ex_aggset_end_read(struct ex_aggset *a, struct tp_snapshot *raw)
{
	if (a->redo)
		resum(a, raw->segs);
	a->agg.segs = raw->segs;
	a->agg.nsegs = raw->nsegs;
	a->agg.skipped = raw->skipped;
	a->agg.nskipped = raw->nskipped;
	a->agg.mono = raw->mono;
	a->agg.real = raw->real;
	a->agg.unsorted = 1;
	raw->segs = NULL;
	raw->nsegs = 0;
	raw->skipped = NULL;
	raw->nskipped = 0;
	if (a->nclosed != a->agg.nsegs)
		TP_DIE("aggregate: %zu segments, %zu closed", a->agg.nsegs,
		       a->nclosed);
}

int ex_aggset_collect(struct ex_aggset *a, const struct tp_collect_opts *opts,
		      char *errbuf, size_t errlen)
{
	struct tp_collect_opts o = *opts;
	struct tp_snapshot raw = { 0 };
	int rc;

	ex_aggset_begin(a);
	o.series_sink = ex_aggset_give;
	o.sink_seg_end = ex_aggset_seg_end;
	o.arg = a;
	o.order = TP_ORDER_READ;
	rc = tp_snapshot_collect(&raw, &o, errbuf, errlen);
	ex_aggset_end_read(a, &raw);
	tp_snapshot_free(&raw);
	return rc;
}

/* A deep copy of @s's segments and skipped files, into @d. */
static void copy_segments(struct tp_snapshot *d, const struct tp_snapshot *s)
{
	d->segs = tp_xcalloc(s->nsegs + 1, sizeof(*d->segs));
	for (size_t i = 0; i < s->nsegs; i++) {
		d->segs[i] = s->segs[i];
		d->segs[i].path = tp_xstrdup(s->segs[i].path);
		d->segs[i].info.path = d->segs[i].path;
	}
	d->nsegs = s->nsegs;
	d->skipped = tp_xcalloc(s->nskipped + 1, sizeof(*d->skipped));
	for (size_t i = 0; i < s->nskipped; i++) {
		d->skipped[i] = s->skipped[i];
		d->skipped[i].path = tp_xstrdup(s->skipped[i].path);
		d->skipped[i].reason = tp_xstrdup(s->skipped[i].reason);
	}
	d->nskipped = s->nskipped;
}

void ex_aggset_of_snapshot(struct ex_aggset *a, const struct tp_snapshot *raw)
{
	struct tp_snapshot copy = { 0 };
	size_t at = 0;

	ex_aggset_begin(a);
	for (size_t k = 0; k < raw->nsegs; k++) {
		for (unsigned i = 0; i < raw->segs[k].nseries; i++)
			ex_aggset_give(&raw->series[at + i], a);
		at += raw->segs[k].nseries;
		ex_aggset_seg_end(&raw->segs[k], a);
	}
	copy_segments(&copy, raw);
	copy.mono = raw->mono;
	copy.real = raw->real;
	ex_aggset_end_read(a, &copy);
	tp_snapshot_free(&copy);
}

void ex_aggset_carry(struct ex_aggset *cur, const struct ex_aggset *last,
		     size_t seg)
{
	size_t pw = last->pfirst[seg];
	struct tp_segment *d;

	for (size_t e = last->first[seg]; e < last->first[seg + 1]; e++) {
		struct tp_series s;

		ex_aggset_series(last, seg, e, &pw, &s);
		ex_aggset_give(&s, cur);
	}
	cur->agg.segs = tp_xrealloc(cur->agg.segs, (cur->agg.nsegs + 1) *
				    sizeof(*cur->agg.segs));
	d = &cur->agg.segs[cur->agg.nsegs++];
	*d = last->agg.segs[seg];
	d->path = tp_xstrdup(d->path);
	d->info.path = d->path;
	d->stale = 1;
	close_segment(cur);
}

void ex_aggset_finish(struct ex_aggset *a, const struct tp_series *extra,
		      size_t nextra)
{
	for (size_t i = 0; i < nextra; i++)
		tp_agg_add(&a->sum, &extra[i], 1);
	tp_agg_end(&a->sum);
	/* Room left by the growth given back: kept until the next scrape. */
	a->agg.series = tp_xrealloc(a->agg.series, (a->agg.nseries + 1) *
				    sizeof(*a->agg.series));
	a->ents = tp_xrealloc(a->ents, (a->nents + 1) * sizeof(*a->ents));
	a->cap_ents = a->nents + 1;
	a->pool = tp_xrealloc(a->pool, (a->npool + 1) * sizeof(*a->pool));
	a->cap_pool = a->npool + 1;
}

void ex_aggset_put(struct ex_aggset *a)
{
	if (!a || --a->refs)
		return;
	tp_agg_end(&a->sum);
	tp_snapshot_free(&a->agg);
	free(a->ents);
	free(a->pool);
	free(a->first);
	free(a->pfirst);
	free(a);
}
