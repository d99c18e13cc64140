/*
 * programs/tallystat/iter.c: the rows of a report in order, one series at
 * a time (struct ts_iter), from its selected series or from a compact
 * read (compact.h), whose texts are read again from the records, in
 * batches of TS_BATCH rows of a segment a pass.
 *
 * Each segment is read through an open of its own, closed when the rows
 * move to the next one, so that the reader's buffers for one segment at
 * a time are in memory; through the read's own hold of it (compact.c)
 * only when its file is gone, or is another file now.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "compact.h"

void ts_iter_begin(struct ts_iter *it, const struct ts_report *r,
		   unsigned flags)
{
	memset(it, 0, sizeof(*it));
	it->r = r;
	it->flags = flags;
}

/* The identity of entry @e: its segment's. */
static void ident_of(struct ts_iter *it, const struct centry *e)
{
	const struct tally_seg_info *in = &it->r->cp->snap->segs[e->seg].info;
	struct tp_series *s = &it->s;

	tp_series_of_segment(s, in);
	s->kind = e->kind;
	s->dead = e->dead;
	s->value = e->value;
	s->fvalue = e->fvalue;
	if (it->r->cp->d) {
		/* An interval's row: the delta, a gauge's value. */
		s->value = it->r->cp->d[e - it->r->cp->e].value;
		s->flags = it->r->cp->d[e - it->r->cp->e].flags;
	}
	s->fractional = e->fractional;
	s->info = e->info;
	s->stateset = e->stateset;
	s->frac = e->frac;
	s->arena = 1;
}

static void put_str(struct tp_buf *b, const char *s)
{
	tp_buf_puts(b, s ? s : "");
	tp_buf_putc(b, '\0');
}

/* A series of the batch read again: its texts are kept when its record
 * still holds the series of its entry (it may have been removed, or
 * reused, since the read). */
static int batch_cb(const struct tally_series_view *v, void *arg)
{
	struct ts_iter *it = arg;
	const struct centry *e;
	size_t j = it->cbj;

	while (j < it->nreq && it->ids[j] != v->id)
		j++;
	if (j == it->nreq)
		return 0;
	it->cbj = j + 1;
	e = &it->r->cp->e[it->req[j]];
	ts_make_key(&it->scratch, v);
	if (v->kind != e->kind ||
	    ts_key_hash(tp_buf_str(&it->scratch), v->kind) != e->hash)
		return 0;
	it->tat[j] = it->text.len;
	it->bnl[j] = v->nlabels;
	it->bmode[j] = v->mode;
	put_str(&it->text, tp_buf_str(&it->scratch));
	put_str(&it->text, v->name);
	put_str(&it->text, v->help);
	put_str(&it->text, v->unit);
	for (unsigned i = 0; i < v->nlabels; i++) {
		put_str(&it->text, v->label_names[i]);
		put_str(&it->text, v->label_values[i]);
	}
	return 0;
}

/* Is entry @e left out by -z: of value 0 since start, or unchanged
 * over an interval? */
static int idle(const struct ts_compact *c, const struct centry *e)
{
	if (c->d)
		return !(c->d[e - c->e].flags & TS_CHANGED);
	return e->value == 0;
}

/* Does the iterator show entry @e?  (-z, and the kinds asked for.) */
static int shown(const struct ts_iter *it, const struct centry *e)
{
	if (it->r->omit_zero && idle(it->r->cp, e))
		return 0;
	if ((it->flags & TS_ITER_HIST) && e->kind != TALLY_HISTOGRAM)
		return 0;
	return !((it->flags & TS_ITER_SCALAR) && e->kind == TALLY_HISTOGRAM);
}

/* Segment @g of the read, to be read from: opened again while its file
 * is the one read (it->own), else the read's hold of it. */
static void use_seg(struct ts_iter *it, uint32_t g)
{
	const struct ts_compact *c = it->r->cp;
	const struct tally_seg_info *w = &c->snap->segs[g].info;
	struct tally_seg_info in;

	if (it->own)
		tally_seg_close(it->seg);
	it->segno = g;
	it->seg = tally_seg_open(c->snap->segs[g].path, c->open_opts);
	it->own = it->seg && tally_seg_info(it->seg, &in) == 0 &&
		  in.pid == w->pid && in.start_ticks == w->start_ticks &&
		  in.created_ns == w->created_ns;
	if (!it->own) {
		tally_seg_close(it->seg);
		it->seg = c->held[g];
	}
}

/* Read the texts of the entries shown from @x on, up to @end (its
 * segment's) and TS_BATCH of them, in one pass over their records. */
static void refill(struct ts_iter *it, size_t x, size_t end)
{
	const struct ts_compact *c = it->r->cp;
	uint32_t g = c->e[x].seg;

	if (!it->req) {
		it->req = tp_xmalloc(TS_BATCH * sizeof(*it->req));
		it->tat = tp_xmalloc(TS_BATCH * sizeof(*it->tat));
		it->ids = tp_xmalloc(TS_BATCH * sizeof(*it->ids));
		it->bnl = tp_xmalloc(TS_BATCH * sizeof(*it->bnl));
		it->bmode = tp_xmalloc(TS_BATCH * sizeof(*it->bmode));
	}
	if (!it->seg || it->segno != g)
		use_seg(it, g);
	it->nreq = it->bcur = it->cbj = 0;
	for (size_t y = x; y < end && it->nreq < TS_BATCH; y++) {
		const struct centry *e = &c->e[y];

		/* Entries in their own order (sums) change segments. */
		if (e->seg != g)
			break;
		if (e->full || !shown(it, e))
			continue;
		it->req[it->nreq] = y;
		it->ids[it->nreq] = e->id;
		it->tat[it->nreq++] = SIZE_MAX;
	}
	tp_buf_reset(&it->text);
	/* A segment corrupt now has its rows left out. */
	if (it->seg)
		tally_seg_foreach_ids(it->seg, 0, it->ids, it->nreq, batch_cb,
				      it);
}

/* Entry @x's texts from the batch into it->s; 0, or -1 when its record
 * no longer holds its series (no row). */
static int serve(struct ts_iter *it, size_t x)
{
	struct tp_series *s = &it->s;
	const char *p;
	unsigned nl;

	while (it->bcur < it->nreq && it->req[it->bcur] < x)
		it->bcur++;
	if (it->bcur == it->nreq || it->req[it->bcur] != x ||
	    it->tat[it->bcur] == SIZE_MAX)
		return -1;
	nl = it->bnl[it->bcur];
	s->mode = it->bmode[it->bcur];
	p = it->text.p + it->tat[it->bcur];
	s->key = (char *)p;
	p += strlen(p) + 1;
	s->name = (char *)p;
	p += strlen(p) + 1;
	s->help = (char *)p;
	p += strlen(p) + 1;
	s->unit = (char *)p;
	p += strlen(p) + 1;
	if (nl > it->caplab) {
		it->caplab = nl;
		it->lab = tp_xrealloc(it->lab, 2 * nl * sizeof(char *));
	}
	for (unsigned i = 0; i < 2 * nl; i++) {
		it->lab[i % 2 ? nl + i / 2 : i / 2] = (char *)p;
		p += strlen(p) + 1;
	}
	s->nlabels = nl;
	s->label_names = nl ? it->lab : NULL;
	s->label_values = nl ? it->lab + nl : NULL;
	return 0;
}

/* Entry @x (of a segment whose entries end at @end) as a series, or NULL
 * when it has no row any more. */
static const struct tp_series *fetch(struct ts_iter *it, size_t x,
				     size_t end)
{
	const struct ts_compact *c = it->r->cp;
	const struct centry *e = &c->e[x];

	if (e->full)
		return c->d ? c->d[x].full : e->full;
	ident_of(it, e);
	if (it->flags & TS_ITER_IDENT)
		return &it->s;
	if (!it->nreq || x < it->req[0] || x > it->req[it->nreq - 1])
		refill(it, x, end);
	return serve(it, x) == 0 ? &it->s : NULL;
}

static const struct tp_series *next_compact(struct ts_iter *it)
{
	const struct ts_compact *c = it->r->cp;

	while (!c->order && it->at < c->n) {
		const struct tp_series *s;

		if (shown(it, &c->e[it->at++]) &&
		    (s = fetch(it, it->at - 1, c->n)))
			return s;
	}
	if (!c->order)
		return NULL;

	while (it->g < c->nsegs) {
		uint32_t g = c->order[it->g];
		size_t end = c->seg_first[g + 1];
		const struct tp_series *s;
		const struct centry *e;

		if (it->at < c->seg_first[g])
			it->at = c->seg_first[g];
		if (it->at >= end) {
			it->g++;
			it->at = 0;
			continue;
		}
		e = &c->e[it->at++];
		if (shown(it, e) && (s = fetch(it, it->at - 1, end)))
			return s;
	}
	return NULL;
}

const struct tp_series *ts_iter_next(struct ts_iter *it)
{
	const struct ts_report *r = it->r;

	if (r->cp)
		return it->cur = next_compact(it);
	while (it->i < r->nrows) {
		const struct tp_series *s = r->sel[it->i++];

		if ((it->flags & TS_ITER_HIST) && s->kind != TALLY_HISTOGRAM)
			continue;
		if ((it->flags & TS_ITER_SCALAR) && s->kind == TALLY_HISTOGRAM)
			continue;
		return it->cur = s;
	}
	return it->cur = NULL;
}

void ts_iter_row(const struct ts_iter *it, struct ts_row *row)
{
	if (it->r->cp) {
		ts_report_row_of(it->r, it->cur, row);
		if (it->r->kind == TS_AVERAGE)
			ts_caverage_row(it->r, it->at - 1, row);
	} else
		ts_report_row(it->r, it->i - 1, row);
}

void ts_iter_end(struct ts_iter *it)
{
	if (it->own)
		tally_seg_close(it->seg);
	tp_buf_free(&it->text);
	tp_buf_free(&it->scratch);
	free(it->lab);
	free(it->req);
	free(it->tat);
	free(it->ids);
	free(it->bnl);
	free(it->bmode);
	memset(it, 0, sizeof(*it));
}
