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
#include "strmap.h"
#include "tallystat.h"

/* The identity of a series of one process. */
static char *ident(const struct tp_series *s)
{
	struct tp_buf b = { 0 };

	tp_buf_printf(&b, "%d\x1f%llu\x1f%s\x1f%s\x1f%u\x1f%u", s->pid,
		      (unsigned long long)s->start_ticks, s->zone, s->key,
		      s->kind, s->nbuckets);
	return tp_buf_take(&b);
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

void ts_delta(const struct tp_snapshot *prev, const struct tp_snapshot *cur,
	      struct tp_snapshot *d)
{
	struct tp_strmap map = { 0 };
	char **keys = tp_xcalloc(prev->nseries, sizeof(char *));

	for (size_t i = 0; i < prev->nseries; i++) {
		keys[i] = ident(&prev->series[i]);
		tp_strmap_put(&map, keys[i], i);
	}
	memset(d, 0, sizeof(*d));
	d->arena = tp_xcalloc(1, sizeof(*d->arena));
	d->mono = cur->mono;
	d->real = cur->real;
	d->series = tp_xcalloc(cur->nseries, sizeof(*d->series));
	for (size_t i = 0; i < cur->nseries; i++) {
		const struct tp_series *c = &cur->series[i], *p = NULL;
		struct tp_series *o = &d->series[d->nseries++];
		char *k = ident(c);
		size_t at = tp_strmap_get(&map, k);

		free(k);
		shallow_copy(d->arena, o, c);
		o->flags = 0;
		if (at != (size_t)-1)
			p = &prev->series[at];
		if (!p) {
			/* Registered since the previous read: it started
			 * at zero, unless its zone is older than that read
			 * and we simply never saw it. */
			o->flags |= TP_SERIES_NEW | TS_CHANGED;
			if (zone_known(prev, c) ||
			    c->created_ns >= ns_of(&prev->real))
				continue;
			/* Its baseline is unknown: this interval shows no
			 * rate for it, and its value becomes the baseline. */
			o->flags |= TS_UNKNOWN;
			if (c->kind == TALLY_COUNTER ||
			    c->kind == TALLY_HISTOGRAM) {
				o->value = o->sum = 0;
				o->fsum = 0;
				if (o->buckets)
					memset(o->buckets, 0, o->nbuckets *
					       sizeof(*o->buckets));
				if (o->percpu)
					memset(o->percpu, 0, o->npercpu *
					       sizeof(*o->percpu));
			}
			continue;
		}
		if (tp_kind_is_gauge(c->kind)) {
			/* Gauges keep their current values. */
			if (c->value != p->value || c->fvalue != p->fvalue)
				o->flags |= TS_CHANGED;
			continue;
		}
		if (c->kind == TALLY_HISTOGRAM) {
			int reset = c->value < p->value ||
				    c->nbuckets != p->nbuckets;

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
		/* Per-CPU copies are raw adds: zeroing does not touch them,
		 * so their differences stay meaningful across a reset. */
		for (unsigned cpu = 0; cpu < o->npercpu; cpu++)
			o->percpu[cpu] = cpu < p->npercpu ?
					 sub(c->percpu[cpu], p->percpu[cpu]) :
					 c->percpu[cpu];
		if (o->value != 0 || (o->flags & TP_SERIES_RESET))
			o->flags |= TS_CHANGED;
	}
	tp_strmap_free(&map);
	for (size_t i = 0; i < prev->nseries; i++)
		free(keys[i]);
	free(keys);
}
