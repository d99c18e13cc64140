/*
 * programs/tallystat/rates.c: what changed between two compact reads
 * (compact.c), entry by entry, without a snapshot of either.
 *
 * Rates need of the previous read only each series' values and what
 * tells it is the same series: the entries of a compact read (values,
 * the hash of the key and kind, the segment).  An open-addressing table
 * of the previous read's entries, hashed on their process and key hash,
 * finds each current entry's predecessor; the delta itself is
 * ts_delta_one()'s, so that both paths give the same numbers and flags.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "compact.h"

static const struct tally_seg_info *seg_of(const struct ts_compact *c,
					   const struct centry *e)
{
	return &c->snap->segs[e->seg].info;
}

uint64_t ts_entry_hash(const struct ts_compact *c, const struct centry *e)
{
	const struct tally_seg_info *in = seg_of(c, e);
	uint64_t h = ts_key_hash(in->zone_name, (unsigned)in->pid);

	h ^= in->start_ticks * 0x9e3779b97f4a7c15ull;
	return (h ^ e->hash) * 0x100000001b3ull;
}

static unsigned nbuckets_of(const struct centry *e)
{
	return e->full ? e->full->nbuckets : 0;
}

int ts_same_entry(const struct ts_compact *a, const struct centry *x,
		  const struct ts_compact *b, const struct centry *y)
{
	const struct tally_seg_info *p = seg_of(a, x), *q = seg_of(b, y);

	return x->hash == y->hash && x->kind == y->kind &&
	       nbuckets_of(x) == nbuckets_of(y) && p->pid == q->pid &&
	       p->start_ticks == q->start_ticks &&
	       strcmp(p->zone_name, q->zone_name) == 0;
}

/* @e as a series of its values and identity only (no texts). */
static void as_series(const struct ts_compact *c, const struct centry *e,
		      struct tp_series *s)
{
	const struct tally_seg_info *in = seg_of(c, e);

	memset(s, 0, sizeof(*s));
	s->pid = in->pid;
	s->start_ticks = in->start_ticks;
	s->created_ns = in->created_ns;
	snprintf(s->zone, sizeof(s->zone), "%.63s", in->zone_name);
	s->kind = e->kind;
	s->value = e->value;
	s->fvalue = e->fvalue;
	s->arena = 1;
}

/* The delta of entry @i of @cur, whose predecessor is @p (or none). */
static void delta_entry(struct ts_compact *cur, size_t i,
			const struct ts_compact *prev, const struct centry *p)
{
	const struct centry *e = &cur->e[i];
	struct cdelta *d = &cur->d[i];
	struct tp_series cs, ps, o;
	const struct tp_series *c = e->full;
	int known = 0;

	if (!c) {
		as_series(cur, e, &cs);
		c = &cs;
	}
	if (!p) {
		as_series(cur, e, &cs);
		known = ts_baseline_known(prev->snap, &cs);
	}
	if (e->full) {
		const struct tp_series *pf = p ? p->full : NULL;

		/* Kept whole now but not then (its segment was held then):
		 * not a histogram, its values are all it needs. */
		if (p && !pf) {
			as_series(prev, p, &ps);
			pf = &ps;
		}
		d->full = tp_xmalloc(sizeof(*d->full));
		tp_series_copy(d->full, e->full);
		ts_delta_one(d->full, e->full, pf, known);
		d->value = d->full->value;
		d->flags = d->full->flags;
		return;
	}
	o = *c;
	if (p)
		as_series(prev, p, &ps);
	ts_delta_one(&o, c, p ? &ps : NULL, known);
	d->value = o.value;
	d->flags = o.flags;
}

void ts_compact_delta(struct ts_compact *cur, const struct ts_compact *prev)
{
	size_t cap = 64, mask;
	uint32_t *slot;

	while (cap < 2 * prev->n)
		cap *= 2;
	mask = cap - 1;
	slot = tp_xcalloc(cap, sizeof(*slot));
	/* Of two entries of one identity (a segment read twice), the later
	 * one is found, as ts_delta() finds it.  Slots hold an entry's
	 * index + 1: a read has fewer than 2^32 series (each costs a record
	 * of a segment, and a segment fewer). */
	for (size_t i = 0; i < prev->n; i++) {
		size_t k = (size_t)ts_entry_hash(prev, &prev->e[i]) & mask;

		while (slot[k] && !ts_same_entry(prev, &prev->e[slot[k] - 1],
					      prev, &prev->e[i]))
			k = (k + 1) & mask;
		slot[k] = (uint32_t)i + 1;
	}
	cur->d = tp_xcalloc(cur->n + 1, sizeof(*cur->d));
	for (size_t i = 0; i < cur->n; i++) {
		const struct centry *e = &cur->e[i], *p = NULL;

		for (size_t k = (size_t)ts_entry_hash(cur, e) & mask; slot[k];
		     k = (k + 1) & mask)
			if (ts_same_entry(prev, &prev->e[slot[k] - 1], cur, e)) {
				p = &prev->e[slot[k] - 1];
				break;
			}
		delta_entry(cur, i, prev, p);
	}
	free(slot);
}
