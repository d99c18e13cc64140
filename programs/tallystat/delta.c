/*
 * programs/tallystat/delta.c: what changed between two reads, as a
 * snapshot of deltas, series by series of each process.
 *
 * Deltas are taken per process before any sum across processes (-a), so
 * that a worker that exits takes its series away without making the sum
 * look like a reset, and a worker that appears adds only what it counted
 * since it began.  A series that was not in the previous read was
 * registered since, and series start at zero: its whole value is its
 * delta.  A counter (or a histogram bucket) that went down was zeroed or
 * its process restarted: the delta is then the value counted since, a
 * lower bound, and the series is flagged TP_SERIES_RESET so that it is
 * shown as a reset and not as a negative rate.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "tallystat.h"

/*
 * The series of the previous read by their identity in one process: pid,
 * start time, zone, key, kind and bucket count.  An open-addressing table
 * of their indices + 1, hashed on those fields, at most half full: no
 * key is copied.  Of two series of the same identity (a segment read
 * twice), the later one is found.
 */
struct ident_index {
	size_t *slot;
	size_t mask;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t ident_hash(const struct tp_series *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = fnv(h, &s->pid, sizeof(s->pid));
	h = fnv(h, &s->start_ticks, sizeof(s->start_ticks));
	h = fnv(h, s->zone, strlen(s->zone) + 1);
	h = fnv(h, s->key, strlen(s->key) + 1);
	h = fnv(h, &s->kind, sizeof(s->kind));
	return fnv(h, &s->nbuckets, sizeof(s->nbuckets));
}

static int same_ident(const struct tp_series *a, const struct tp_series *b)
{
	return a->pid == b->pid && a->start_ticks == b->start_ticks &&
	       a->kind == b->kind && a->nbuckets == b->nbuckets &&
	       strcmp(a->zone, b->zone) == 0 && strcmp(a->key, b->key) == 0;
}

static void index_build(struct ident_index *x, const struct tp_snapshot *prev)
{
	size_t cap = 64;

	while (cap < 2 * prev->nseries)
		cap *= 2;
	x->slot = tp_xcalloc(cap, sizeof(*x->slot));
	x->mask = cap - 1;
	for (size_t i = 0; i < prev->nseries; i++) {
		const struct tp_series *s = &prev->series[i];
		size_t k = (size_t)ident_hash(s) & x->mask;

		while (x->slot[k] &&
		       !same_ident(&prev->series[x->slot[k] - 1], s))
			k = (k + 1) & x->mask;
		x->slot[k] = i + 1;
	}
}

/* The series of @prev with the identity of @c, or NULL. */
static const struct tp_series *index_find(const struct ident_index *x,
					  const struct tp_snapshot *prev,
					  const struct tp_series *c)
{
	for (size_t k = (size_t)ident_hash(c) & x->mask; x->slot[k];
	     k = (k + 1) & x->mask)
		if (same_ident(&prev->series[x->slot[k] - 1], c))
			return &prev->series[x->slot[k] - 1];
	return NULL;
}

static int64_t sub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* Was the zone of @s there at the previous read? */
static int zone_known(const struct tp_snapshot *prev, const struct tp_series *s)
{
	for (size_t i = 0; i < prev->nsegs; i++) {
		const struct tally_seg_info *in = &prev->segs[i].info;

		if (in->pid == s->pid && in->start_ticks == s->start_ticks &&
		    strcmp(in->zone_name, s->zone) == 0)
			return 1;
	}
	return 0;
}

static uint64_t ns_of(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

/* @c in the delta: its strings are @c's (the current snapshot's, which
 * outlives the delta), its values its own, in @a, since they become
 * differences. */
static void shallow_copy(struct tp_arena *a, struct tp_series *o,
			 const struct tp_series *c)
{
	*o = *c;
	o->arena = 1;
	if (c->buckets && c->nbuckets)
		o->buckets = tp_arena_memdup(a, c->buckets, c->nbuckets *
					     sizeof(*c->buckets));
	if (c->percpu && c->npercpu)
		o->percpu = tp_arena_memdup(a, c->percpu, c->npercpu *
					    sizeof(*c->percpu));
}

int ts_baseline_known(const struct tp_snapshot *prev,
		      const struct tp_series *c)
{
	return zone_known(prev, c) || c->created_ns >= ns_of(&prev->real);
}

void ts_delta_one(struct tp_series *o, const struct tp_series *c,
		  const struct tp_series *p, int known)
{
	o->flags = 0;
	if (!p) {
		/* Registered since the previous read: it started at zero,
		 * unless its zone is older than that read and we simply
		 * never saw it. */
		o->flags |= TP_SERIES_NEW | TS_CHANGED;
		if (known)
			return;
		/* Its baseline is unknown: this interval shows no rate for
		 * it, and its value becomes the baseline. */
		o->flags |= TS_UNKNOWN;
		if (c->kind == TALLY_COUNTER || c->kind == TALLY_HISTOGRAM) {
			o->value = o->sum = 0;
			o->fsum = 0;
			if (o->buckets)
				memset(o->buckets, 0, o->nbuckets *
				       sizeof(*o->buckets));
			if (o->percpu)
				memset(o->percpu, 0, o->npercpu *
				       sizeof(*o->percpu));
		}
		return;
	}
	if (tp_kind_is_gauge(c->kind)) {
		/* Gauges keep their current values. */
		if (c->value != p->value || c->fvalue != p->fvalue)
			o->flags |= TS_CHANGED;
		return;
	}
	if (c->kind == TALLY_HISTOGRAM) {
		int reset = c->value < p->value || c->nbuckets != p->nbuckets;

		for (unsigned b = 0; !reset && b < c->nbuckets; b++)
			reset = c->buckets[b] < p->buckets[b];
		if (reset) {
			o->flags |= TP_SERIES_RESET;
		} else {
			o->value = sub(c->value, p->value);
			o->sum = sub(c->sum, p->sum);
			o->fsum = c->fsum - p->fsum;
			for (unsigned b = 0; b < c->nbuckets; b++)
				o->buckets[b] = sub(c->buckets[b],
						    p->buckets[b]);
		}
	} else if (c->value >= p->value) {
		o->value = sub(c->value, p->value);
	} else {
		o->flags |= TP_SERIES_RESET;
	}
	/* Per-CPU copies are raw adds: zeroing does not touch them, so
	 * their differences stay meaningful across a reset. */
	for (unsigned cpu = 0; cpu < o->npercpu; cpu++)
		o->percpu[cpu] = cpu < p->npercpu ?
				 sub(c->percpu[cpu], p->percpu[cpu]) :
				 c->percpu[cpu];
	if (o->value != 0 || (o->flags & TP_SERIES_RESET))
		o->flags |= TS_CHANGED;
}

void ts_delta(const struct tp_snapshot *prev, const struct tp_snapshot *cur,
	      struct tp_snapshot *d)
{
	struct ident_index x;

	index_build(&x, prev);
	memset(d, 0, sizeof(*d));
	d->arena = tp_xcalloc(1, sizeof(*d->arena));
	d->mono = cur->mono;
	d->real = cur->real;
	d->series = tp_xcalloc(cur->nseries, sizeof(*d->series));
	for (size_t i = 0; i < cur->nseries; i++) {
		const struct tp_series *c = &cur->series[i];
		const struct tp_series *p = index_find(&x, prev, c);
		struct tp_series *o = &d->series[d->nseries++];

		shallow_copy(d->arena, o, c);
		ts_delta_one(o, c, p, !p && ts_baseline_known(prev, c));
	}
	free(x.slot);
}
