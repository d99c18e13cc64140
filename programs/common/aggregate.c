/*
 * programs/common/aggregate.c: summing the same series across processes
 * (aggregate.h).
 */
#define _GNU_SOURCE
#include "aggregate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

/* Gauges of processes that are gone are summed apart from the live ones'
 * (the sum of the live ones is what is in flight now; snapshot.h, "Whose
 * a series is"): whether a gauge is a TP_DEAD one is part of its
 * identity. */
static unsigned gone(const struct tp_series *s)
{
	return (unsigned)tp_series_gone_gauge(s);
}

/* A classic histogram's bounds, hashed: 0 for every other series. */
static uint64_t bounds_hash(const struct tp_series *s)
{
	uint64_t h = 0;
	const unsigned char *p = (const unsigned char *)s->bounds;

	if (!s->classic)
		return 0;
	h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < s->nbounds * sizeof(double); i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

char *tp_series_agg_key(const struct tp_series *s)
{
	struct tp_buf b = { 0 };

	/* Kind and layout are part of the identity: buckets of two layouts
	 * (or two sets of bounds) cannot be added. */
	tp_buf_printf(&b, "%s\x1f%u\x1f%u\x1f%u\x1f%llx%s", s->key,
		      tp_kind_sum_class(s->kind), s->sub_bits, s->nbuckets,
		      (unsigned long long)bounds_hash(s),
		      gone(s) ? "\x1f" "dead" : "");
	return tp_buf_take(&b);
}

uint64_t tp_series_agg_hash(const struct tp_series *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *p = s->key; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 0x100000001b3ull;
	}
	h ^= (uint64_t)tp_kind_sum_class(s->kind) << 40 ^ (uint64_t)s->sub_bits << 32 ^
	     s->nbuckets ^ (uint64_t)gone(s) << 48 ^ bounds_hash(s);
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

int tp_series_agg_same(const struct tp_series *a, const struct tp_series *b)
{
	return tp_kind_sum_class(a->kind) == tp_kind_sum_class(b->kind) &&
	       a->sub_bits == b->sub_bits && a->nbuckets == b->nbuckets &&
	       a->classic == b->classic && a->summary == b->summary &&
	       a->info == b->info && a->stateset == b->stateset &&
	       (!a->classic || !a->nbounds || /* a summary: no bounds */
		!memcmp(a->bounds, b->bounds, a->nbounds * sizeof(double))) &&
	       gone(a) == gone(b) && strcmp(a->key, b->key) == 0;
}

static inline int64_t add64(int64_t a, int64_t b)
{
	/* Wrap-around adds: a sum that overflows is as wrong as the
	 * counters themselves would be, and must not be undefined. */
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* dst[0..nsrc) += src; dst grows (in the arena) when src is longer. */
static void add_i64(struct tp_arena *a, int64_t **dst, unsigned *ndst,
		    const int64_t *src, unsigned nsrc)
{
	if (nsrc > *ndst) {
		int64_t *p = tp_arena_alloc(a, nsrc * sizeof(*p));

		if (*ndst)
			memcpy(p, *dst, *ndst * sizeof(*p));
		memset(p + *ndst, 0, (nsrc - *ndst) * sizeof(*p));
		*dst = p;
		*ndst = nsrc;
	}
	for (unsigned i = 0; i < nsrc; i++)
		(*dst)[i] = add64((*dst)[i], src[i]);
}

static int has_pid(const struct tp_series *s, int pid)
{
	for (unsigned i = 0; i < s->nprocs; i++)
		if (s->pids[i] == pid)
			return 1;
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	return tp_series_cmp(a, b);
}

/* Room for one more result: series, pids capacities and a table at
 * most half full (a summed series' identity, hence its hash, never
 * changes once it is made). */
static void grow(struct tp_agg *g)
{
	struct tp_snapshot *out = g->out;
	size_t cap;

	if (out->nseries == g->cap) {
		g->cap = g->cap ? g->cap + g->cap / 2 : 64;
		out->series = tp_xrealloc(out->series,
					  g->cap * sizeof(*out->series));
		g->pcap = tp_xrealloc(g->pcap, g->cap * sizeof(*g->pcap));
	}
	if (2 * (out->nseries + 1) <= (g->slot ? g->mask + 1 : 0))
		return;
	cap = g->slot ? 2 * (g->mask + 1) : 64;
	free(g->slot);
	g->slot = tp_xcalloc(cap, sizeof(*g->slot));
	g->mask = cap - 1;
	for (size_t k = 0; k < out->nseries; k++) {
		size_t i = (size_t)tp_series_agg_hash(&out->series[k]) &
			   g->mask;

		while (g->slot[i])
			i = (i + 1) & g->mask;
		g->slot[i] = k + 1;
	}
}

void tp_agg_begin(struct tp_agg *g, struct tp_snapshot *out)
{
	memset(g, 0, sizeof(*g));
	memset(out, 0, sizeof(*out));
	out->arena = tp_xcalloc(1, sizeof(*out->arena));
	g->out = out;
}

void tp_agg_end(struct tp_agg *g)
{
	free(g->slot);
	free(g->pcap);
	memset(g, 0, sizeof(*g));
}

size_t tp_agg_add(struct tp_agg *g, const struct tp_series *s, int extra)
{
	struct tp_snapshot *out;
	struct tp_arena *a;
	struct tp_series *d;
	size_t i, at;

	grow(g);
	out = g->out;
	a = out->arena;
	for (i = (size_t)tp_series_agg_hash(s) & g->mask; g->slot[i];
	     i = (i + 1) & g->mask)
		if (tp_series_agg_same(&out->series[g->slot[i] - 1], s))
			break;
	if (!g->slot[i]) {
		at = out->nseries++;
		g->slot[i] = at + 1;
		d = &out->series[at];
		tp_series_copy_to(a, d, s, g->last_new ?
				  &out->series[g->last_new - 1] : NULL);
		g->last_new = at + 1;
		d->pid = 0;
		d->start_ticks = 0;
		d->kind = tp_kind_sum_class(d->kind);
		if (extra) {
			d->dead = TP_DEAD; /* its process exited */
			d->nprocs = 0;
			d->pids = NULL;
			g->pcap[at] = 0;
		} else {
			g->pcap[at] = 4;
			d->pids = tp_arena_alloc(a, 4 * sizeof(int));
			d->pids[0] = s->pid;
			d->nprocs = 1;
		}
		return at;
	}
	at = g->slot[i] - 1;
	d = &out->series[at];
	d->value = add64(d->value, s->value);
	d->fvalue += s->fvalue;
	if (d->info || d->stateset) {
		/* A state or a set of pairs is true (1) in the sum when it
		 * is in one of the segments: not a count of them. */
		d->fvalue = d->fvalue > 1.0 ? 1.0 : d->fvalue;
		d->value = d->value > 1 ? 1 : d->value;
	}
	/* Billionths carried into the whole units: exact. */
	d->fractional |= s->fractional;
	d->frac += s->frac;
	d->fsum += s->fsum;
	if (d->frac >= 1000000000u) {
		/* A classic histogram's billionths are its sum's. */
		d->frac -= 1000000000u;
		if (d->classic)
			d->sum = add64(d->sum, 1);
		else
			d->value = add64(d->value, 1);
	}
	d->sum = add64(d->sum, s->sum);
	add_i64(a, &d->buckets, &d->nbuckets, s->buckets, s->nbuckets);
	add_i64(a, &d->percpu, &d->npercpu, s->percpu, s->npercpu);
	d->flags |= s->flags;
	if (extra)
		return at;
	/* Live while one of its processes is. */
	if (s->dead < d->dead)
		d->dead = s->dead;
	if (s->created_ns < d->created_ns || d->nprocs == 0)
		d->created_ns = s->created_ns;
	if (d->nprocs == 0) {
		/* Only exited processes so far: this one's names. */
		memcpy(d->proc, s->proc, sizeof(d->proc));
		memcpy(d->zone, s->zone, sizeof(d->zone));
	} else {
		if (strcmp(d->proc, s->proc) != 0)
			snprintf(d->proc, sizeof(d->proc), "*");
		if (strcmp(d->zone, s->zone) != 0)
			snprintf(d->zone, sizeof(d->zone), "*");
	}
	if (!has_pid(d, s->pid)) {
		if (d->nprocs == g->pcap[at]) {
			unsigned cap = g->pcap[at] ? 2 * g->pcap[at] : 4;
			int *p = tp_arena_alloc(a, cap * sizeof(int));

			if (d->nprocs)
				memcpy(p, d->pids, d->nprocs * sizeof(int));
			d->pids = p;
			g->pcap[at] = cap;
		}
		d->pids[d->nprocs++] = s->pid;
	}
	return at;
}

void tp_snapshot_aggregate_with(const struct tp_snapshot *in,
				const struct tp_series *extra, size_t nextra,
				struct tp_snapshot *out)
{
	struct tp_agg g;

	tp_agg_begin(&g, out);
	for (size_t i = 0; i < in->nseries; i++)
		tp_agg_add(&g, &in->series[i], 0);
	for (size_t i = 0; i < nextra; i++)
		tp_agg_add(&g, &extra[i], 1);
	tp_agg_end(&g);
	out->mono = in->mono;
	out->real = in->real;
	out->unsorted = in->unsorted;
	if (!out->series)
		out->series = tp_xmalloc(sizeof(*out->series));
	if (out->nseries > 1 && !out->unsorted)
		qsort(out->series, out->nseries, sizeof(*out->series), cmp_key);

	if (in->nsegs) {
		out->segs = tp_xcalloc(in->nsegs, sizeof(*out->segs));
		for (size_t i = 0; i < in->nsegs; i++) {
			out->segs[i] = in->segs[i];
			out->segs[i].path = tp_xstrdup(in->segs[i].path);
			out->segs[i].info.path = out->segs[i].path;
		}
		out->nsegs = in->nsegs;
	}
	if (in->nskipped) {
		out->skipped = tp_xcalloc(in->nskipped, sizeof(*out->skipped));
		for (size_t i = 0; i < in->nskipped; i++) {
			out->skipped[i] = in->skipped[i];
			out->skipped[i].path = tp_xstrdup(in->skipped[i].path);
			out->skipped[i].reason =
				tp_xstrdup(in->skipped[i].reason);
		}
		out->nskipped = in->nskipped;
	}
}

void tp_snapshot_aggregate(const struct tp_snapshot *in,
			   struct tp_snapshot *out)
{
	tp_snapshot_aggregate_with(in, NULL, 0, out);
}
