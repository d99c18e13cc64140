/*
 * programs/tallystat/caverage.c: the Average: rows of a run of compact
 * reads, as average.c makes them of snapshots.
 *
 * The sums are a compact read of their own (struct ts_compact): an entry
 * a series seen in any interval, in the order first seen, its delta
 * (struct cdelta) the sum of its deltas (gauges: the last value), and
 * beside it the sum of a gauge's values and the number of them.  The
 * texts are read again from the records when the rows print, as for any
 * compact report; the segments of the sums are held open for the run
 * (taken over from the read that first had a series of theirs), so that
 * the rows of a process whose file went away are still there.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "compact.h"

struct gsum {
	double sum;             /* gauges: of the values read */
	unsigned long n;        /* values read */
};

struct ts_caverage {
	struct ts_compact c;
	struct tp_snapshot segs; /* c.snap: the segments, no series */
	struct gsum *g;
	double seconds;
	unsigned long intervals;
};

struct ts_caverage *ts_caverage_new(void)
{
	struct ts_caverage *av = tp_xcalloc(1, sizeof(*av));

	av->c.snap = &av->segs;
	return av;
}

/* The segment of the sums that is segment @g of @cur, added if new; it
 * takes over @cur's hold of it when it holds none. */
static uint32_t seg_index(struct ts_caverage *av, struct ts_compact *cur,
			  uint32_t g)
{
	const struct tp_segment *s = &cur->snap->segs[g];
	struct tp_segment *t;

	for (uint32_t i = 0; i < av->segs.nsegs; i++) {
		const struct tp_segment *x = &av->segs.segs[i];

		if (x->info.pid == s->info.pid &&
		    x->info.start_ticks == s->info.start_ticks &&
		    strcmp(x->path, s->path) == 0 &&
		    strcmp(x->info.zone_name, s->info.zone_name) == 0) {
			if (!av->c.held[i]) {
				av->c.held[i] = cur->held[g];
				cur->held[g] = NULL;
			}
			return i;
		}
	}
	av->segs.segs = tp_xrealloc(av->segs.segs, (av->segs.nsegs + 1) *
				    sizeof(*av->segs.segs));
	av->c.held = tp_xrealloc(av->c.held, (av->segs.nsegs + 1) *
				 sizeof(*av->c.held));
	t = &av->segs.segs[av->segs.nsegs];
	memset(t, 0, sizeof(*t));
	t->path = tp_xstrdup(s->path);
	t->info = s->info;
	t->info.path = t->path;
	av->c.held[av->segs.nsegs] = cur->held[g];
	cur->held[g] = NULL;
	av->c.open_opts = cur->open_opts;
	return av->segs.nsegs++;
}

/* A new series of the sums: entry @x of @cur, and its delta. */
static void add_new(struct ts_caverage *av, const struct ts_compact *cur,
		    size_t x, uint32_t seg)
{
	struct ts_compact *c = &av->c;
	const struct cdelta *d = &cur->d[x];
	struct centry *e;

	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 1024;
		c->e = tp_xrealloc(c->e, c->cap * sizeof(*c->e));
		c->d = tp_xrealloc(c->d, c->cap * sizeof(*c->d));
		av->g = tp_xrealloc(av->g, c->cap * sizeof(*av->g));
	}
	e = &c->e[c->n];
	*e = cur->e[x];
	e->seg = seg;
	e->full = NULL;
	c->d[c->n] = *d;
	/* Over the whole run every series has a rate. */
	c->d[c->n].flags &= ~TS_UNKNOWN;
	if (d->full) {
		c->d[c->n].full = tp_xmalloc(sizeof(struct tp_series));
		tp_series_copy(c->d[c->n].full, d->full);
		c->d[c->n].full->flags &= ~TS_UNKNOWN;
		/* The entry is kept whole: its row is the sum's. */
		e->full = c->d[c->n].full;
	}
	av->g[c->n].sum = tp_kind_is_gauge(e->kind) ?
			  (e->kind == TALLY_FGAUGE ? e->fvalue :
			   (double)d->value) : 0;
	av->g[c->n].n = 1;
	c->n++;
}

static int64_t add64(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* Entry @x of @cur, and its delta, added to series @a of the sums. */
static void add_to(struct ts_caverage *av, size_t a,
		   const struct ts_compact *cur, size_t x)
{
	struct centry *e = &av->c.e[a];
	struct cdelta *s = &av->c.d[a];
	const struct cdelta *d = &cur->d[x];
	const struct tp_series *df = d->full;

	s->flags |= d->flags & ~TS_UNKNOWN;
	e->dead = cur->e[x].dead;
	av->g[a].n++;
	if (s->full) {
		s->full->flags = s->flags;
		s->full->dead = e->dead;
	}
	if (tp_kind_is_gauge(e->kind)) {
		av->g[a].sum += e->kind == TALLY_FGAUGE ? cur->e[x].fvalue :
				(double)d->value;
		s->value = e->value = d->value;
		e->fvalue = cur->e[x].fvalue;
		if (s->full) {
			s->full->value = d->value;
			s->full->fvalue = cur->e[x].fvalue;
		}
		return;
	}
	s->value = add64(s->value, d->value);
	if (!s->full)
		return;
	s->full->value = s->value;
	/* Kept whole in the sums but not in @cur (its segment held now):
	 * not a histogram, nothing more to add. */
	if (!df)
		return;
	s->full->sum = add64(s->full->sum, df->sum);
	s->full->fsum += df->fsum;
	if (df->nbuckets == s->full->nbuckets)
		for (unsigned b = 0; b < df->nbuckets; b++)
			s->full->buckets[b] = add64(s->full->buckets[b],
						    df->buckets[b]);
}

/* Add the deltas of compact read @cur (ts_compact_delta()), in the order
 * of its report, over @seconds. */
void ts_caverage_add(struct ts_caverage *av, struct ts_compact *cur,
		     double seconds)
{
	size_t cap = 64, mask;
	uint32_t *slot;
	uint32_t *segmap = tp_xcalloc(cur->nsegs + 1, sizeof(*segmap));

	av->seconds += seconds;
	av->intervals++;
	for (uint32_t g = 0; g < cur->nsegs; g++)
		segmap[g] = UINT32_MAX;
	while (cap < 2 * (av->c.n + cur->n))
		cap *= 2;
	mask = cap - 1;
	slot = tp_xcalloc(cap, sizeof(*slot));
	for (size_t i = 0; i < av->c.n; i++) {
		size_t k = (size_t)ts_entry_hash(&av->c, &av->c.e[i]) & mask;

		while (slot[k])
			k = (k + 1) & mask;
		slot[k] = (uint32_t)i + 1;
	}
	for (uint32_t o = 0; o < cur->nsegs; o++) {
		uint32_t g = cur->order[o];

		for (size_t x = cur->seg_first[g]; x < cur->seg_first[g + 1];
		     x++) {
			const struct centry *e = &cur->e[x];
			size_t k = (size_t)ts_entry_hash(cur, e) & mask;

			for (; slot[k]; k = (k + 1) & mask)
				if (ts_same_entry(&av->c, &av->c.e[slot[k] - 1],
						  cur, e))
					break;
			if (slot[k]) {
				add_to(av, slot[k] - 1, cur, x);
				continue;
			}
			if (segmap[g] == UINT32_MAX)
				segmap[g] = seg_index(av, cur, g);
			add_new(av, cur, x, segmap[g]);
			slot[k] = (uint32_t)av->c.n;
		}
	}
	free(slot);
	free(segmap);
}

unsigned long ts_caverage_intervals(const struct ts_caverage *av)
{
	return av->intervals;
}

void ts_report_caverage(struct ts_report *r, const struct ts_caverage *av,
			const struct ts_options *o)
{
	memset(r, 0, sizeof(*r));
	r->kind = TS_AVERAGE;
	r->seconds = av->seconds;
	r->cp = &av->c;
	r->omit_zero = o->omit_idle;
	clock_gettime(CLOCK_REALTIME, &r->when);
	for (size_t i = 0; i < av->c.n; i++)
		if (!o->omit_idle || (av->c.d[i].flags & TS_CHANGED))
			r->nrows++;
}

void ts_caverage_row(const struct ts_report *r, size_t x, struct ts_row *row)
{
	const struct ts_caverage *av = (const struct ts_caverage *)r->cp;

	/* Over the run a reset still has a rate: what was counted (a lower
	 * bound), flagged as reset. */
	if (row->reset && r->seconds > 0)
		row->rate = (double)row->value / r->seconds;
	if (tp_kind_is_gauge(row->s->kind))
		row->mean_gauge = av->g[x].sum / (double)av->g[x].n;
}

void ts_caverage_free(struct ts_caverage *av)
{
	if (!av)
		return;
	for (size_t i = 0; i < av->c.n; i++)
		av->c.e[i].full = NULL; /* the sums' copies, freed as d's */
	for (uint32_t i = 0; i < av->segs.nsegs; i++) {
		ts_seg_release(av->c.held[i]);
		free(av->segs.segs[i].path);
	}
	free(av->segs.segs);
	free(av->c.held);
	free(av->g);
	free(av->c.e);
	for (size_t i = 0; i < av->c.n; i++)
		if (av->c.d[i].full) {
			tp_series_free(av->c.d[i].full);
			free(av->c.d[i].full);
		}
	free(av->c.d);
	free(av);
}
