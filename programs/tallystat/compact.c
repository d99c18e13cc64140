/*
 * programs/tallystat/compact.c: the report since start of one read,
 * keeping per series only what its row needs besides its texts, and the
 * rows of any report one at a time (struct ts_iter).
 *
 * A snapshot copies every series with its name, labels and help; a report
 * of a million series does not need them all at once.  Here the read
 * keeps, per series, its record id in its segment, a hash of its key and
 * its values (struct centry), sorts each segment's series by key as it
 * goes (the keys of one segment only are held, and only while it is
 * read), and the back ends get each row's texts by reading the record
 * again from its segment (tally_seg_visit) when they print it.  The
 * values are those of the first read: a text report makes its rows twice
 * (the widths, then the lines), and both must show the same numbers.
 * Histograms and per-process gauges (whose views combine several
 * records, and may vanish with a process) are kept whole, as a copy.
 *
 * The rows come out in the order of tp_series_cmp(): segments by pid,
 * start time and zone, the series of each by key (strverscmp) and kind.
 * Two segments of one pid, start time and zone (the same files through
 * two directories) would interleave their series: ts_compact_finish()
 * says so and the caller reads a whole snapshot instead.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "strbuf.h"
#include "tallystat.h"

/* One series of the read. */
struct centry {
	int64_t value;
	double fvalue;
	uint64_t hash;          /* of its key and kind */
	struct tp_series *full; /* histograms, per-process gauges: a copy */
	uint32_t seg, id;       /* its segment (snap->segs), its record */
	unsigned frac;
	unsigned char kind, dead, fractional;
};

/* A series of the segment being read, for the sort. */
struct skey {
	const char *key;
	size_t at;              /* in e[] */
	unsigned kind;
};

struct ts_compact {
	struct centry *e;
	size_t n, cap;
	size_t *seg_first;      /* entries of segment g: seg_first[g] ..
				   seg_first[g + 1] */
	uint32_t nsegs;
	uint32_t *order;        /* segments in report order */
	/* The segment being read: its keys, for the sort. */
	size_t first;
	struct tp_arena keys;
	struct skey *sk;
	size_t nsk, capsk;
	struct tp_buf key;
	const struct tp_snapshot *snap;
	const struct tally_open_opts *open_opts;
};

static uint64_t key_hash(const char *key, unsigned kind)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	return (h ^ kind) * 0x100000001b3ull;
}

static void make_key(struct tp_buf *b, const struct tally_series_view *v)
{
	tp_buf_reset(b);
	tp_series_key_buf(b, v->name, v->nlabels, v->label_names,
			  v->label_values);
}

/* A whole copy of the series of @v, as a snapshot keeps it. */
static struct tp_series *full_copy(const struct tally_series_view *v,
				   const struct tp_series *ident,
				   const char *key)
{
	struct tp_series tmp = *ident, *s = tp_xmalloc(sizeof(*s));

	tmp.key = (char *)key;
	tmp.name = (char *)v->name;
	tmp.help = (char *)(v->help ? v->help : "");
	tmp.unit = (char *)(v->unit ? v->unit : "");
	tmp.kind = v->kind;
	tmp.mode = v->mode;
	tmp.nlabels = v->nlabels;
	/* tp_series_copy() copies the arrays of labels only when there
	 * are labels. */
	tmp.label_names = v->nlabels ? (char **)v->label_names : NULL;
	tmp.label_values = v->nlabels ? (char **)v->label_values : NULL;
	tmp.value = v->value;
	tmp.fvalue = v->fvalue;
	tmp.fractional = v->fractional;
	tmp.frac = v->frac;
	if (v->kind == TALLY_HISTOGRAM) {
		tmp.sum = v->sum;
		tmp.sub_bits = v->sub_bits;
		tmp.max_bits = v->max_bits;
		tmp.nbuckets = v->buckets ? v->nbuckets : 0;
		tmp.buckets = (int64_t *)v->buckets;
		tmp.classic = v->classic;
		tmp.nbounds = v->bounds ? v->nbounds : 0;
		tmp.bounds = (double *)v->bounds;
		tmp.fsum = v->fsum;
	}
	tp_series_copy(s, &tmp);
	return s;
}

static void visit(const struct tally_series_view *v,
		  const struct tp_series *ident, void *arg)
{
	struct ts_compact *c = arg;
	struct centry *e;
	struct skey *k;

	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 1024;
		c->e = tp_xrealloc(c->e, c->cap * sizeof(*c->e));
	}
	e = &c->e[c->n];
	memset(e, 0, sizeof(*e));
	make_key(&c->key, v);
	e->value = v->value;
	e->fvalue = v->fvalue;
	e->hash = key_hash(tp_buf_str(&c->key), v->kind);
	e->seg = c->nsegs;
	e->id = v->id;
	e->frac = v->frac;
	e->kind = (unsigned char)v->kind;
	e->dead = (unsigned char)ident->dead;
	e->fractional = (unsigned char)!!v->fractional;
	if (v->kind == TALLY_HISTOGRAM || v->per_process)
		e->full = full_copy(v, ident, tp_buf_str(&c->key));
	if (c->nsk == c->capsk) {
		c->capsk = c->capsk ? 2 * c->capsk : 1024;
		c->sk = tp_xrealloc(c->sk, c->capsk * sizeof(*c->sk));
	}
	k = &c->sk[c->nsk++];
	k->key = tp_arena_memdup(&c->keys, tp_buf_str(&c->key),
				 c->key.len + 1);
	k->at = c->n++;
	k->kind = v->kind;
}

static int skey_cmp(const void *a, const void *b)
{
	const struct skey *x = a, *y = b;
	int r = strverscmp(x->key, y->key);

	if (r)
		return r;
	return (int)x->kind - (int)y->kind;
}

static void drop_full(struct centry *e)
{
	if (e->full) {
		tp_series_free(e->full);
		free(e->full);
		e->full = NULL;
	}
}

/* The segment read is done: sort its series by key, or forget them. */
static void seg_end(int kept, void *arg)
{
	struct ts_compact *c = arg;
	size_t n = c->n - c->first;

	if (!kept) {
		for (size_t i = c->first; i < c->n; i++)
			drop_full(&c->e[i]);
		c->n = c->first;
	} else if (n > 1) {
		struct centry *tmp = tp_xmalloc(n * sizeof(*tmp));

		qsort(c->sk, c->nsk, sizeof(*c->sk), skey_cmp);
		for (size_t i = 0; i < n; i++)
			tmp[i] = c->e[c->sk[i].at];
		memcpy(&c->e[c->first], tmp, n * sizeof(*tmp));
		free(tmp);
	}
	if (kept) {
		c->seg_first = tp_xrealloc(c->seg_first, (c->nsegs + 2) *
					   sizeof(*c->seg_first));
		c->seg_first[c->nsegs++] = c->first;
		c->seg_first[c->nsegs] = c->n;
	}
	c->first = c->n;
	c->nsk = 0;
	tp_arena_free(&c->keys);
}

struct ts_compact *ts_compact_new(struct tp_collect_opts *co)
{
	struct ts_compact *c = tp_xcalloc(1, sizeof(*c));

	co->series_visit = visit;
	co->seg_end = seg_end;
	co->visit_arg = c;
	c->open_opts = co->open_opts;
	return c;
}

/* The pointer to sort segments with (qsort has no argument). */
static const struct tp_snapshot *sorting;

static int seg_cmp(const void *a, const void *b)
{
	const struct tally_seg_info *x = &sorting->segs[*(const uint32_t *)a].info;
	const struct tally_seg_info *y = &sorting->segs[*(const uint32_t *)b].info;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->start_ticks != y->start_ticks)
		return x->start_ticks < y->start_ticks ? -1 : 1;
	return strcmp(x->zone_name, y->zone_name);
}

int ts_compact_finish(struct ts_compact *c, const struct tp_snapshot *snap)
{
	c->snap = snap;
	tp_buf_free(&c->key);
	free(c->sk);
	c->sk = NULL;
	c->order = tp_xcalloc(c->nsegs + 1, sizeof(*c->order));
	for (uint32_t g = 0; g < c->nsegs; g++)
		c->order[g] = g;
	sorting = snap;
	qsort(c->order, c->nsegs, sizeof(*c->order), seg_cmp);
	for (uint32_t g = 1; g < c->nsegs; g++)
		if (seg_cmp(&c->order[g - 1], &c->order[g]) == 0)
			return -1;
	return 0;
}

size_t ts_compact_nseries(const struct ts_compact *c)
{
	return c->n;
}

void ts_compact_free(struct ts_compact *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		drop_full(&c->e[i]);
	free(c->e);
	free(c->seg_first);
	free(c->order);
	free(c->sk);
	tp_buf_free(&c->key);
	tp_arena_free(&c->keys);
	free(c);
}

void ts_report_compact(struct ts_report *r, const struct ts_compact *c,
		       const struct ts_options *o)
{
	memset(r, 0, sizeof(*r));
	r->kind = TS_SINCE_START;
	r->when = c->snap->real;
	r->cp = c;
	r->omit_zero = o->omit_idle;
	for (size_t i = 0; i < c->n; i++)
		if (!o->omit_idle || c->e[i].value != 0)
			r->nrows++;
}

/* --- Rows one at a time ---------------------------------------------- */

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

	memset(s, 0, sizeof(*s));
	s->pid = in->pid;
	s->start_ticks = in->start_ticks;
	s->created_ns = in->created_ns;
	s->nprocs = 1;
	snprintf(s->proc, sizeof(s->proc), "%.15s", in->proc_name);
	snprintf(s->zone, sizeof(s->zone), "%.63s", in->zone_name);
	s->kind = e->kind;
	s->dead = e->dead;
	s->value = e->value;
	s->fvalue = e->fvalue;
	s->fractional = e->fractional;
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
	make_key(&it->scratch, v);
	if (v->kind != e->kind ||
	    key_hash(tp_buf_str(&it->scratch), v->kind) != e->hash)
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

/* Does the iterator show entry @e?  (-z, and the kinds asked for.) */
static int shown(const struct ts_iter *it, const struct centry *e)
{
	if (it->r->omit_zero && e->value == 0)
		return 0;
	if ((it->flags & TS_ITER_HIST) && e->kind != TALLY_HISTOGRAM)
		return 0;
	return !((it->flags & TS_ITER_SCALAR) && e->kind == TALLY_HISTOGRAM);
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
	if (!it->seg || it->segno != g) {
		tally_seg_close(it->seg);
		it->segno = g;
		it->seg = tally_seg_open(c->snap->segs[g].path, c->open_opts);
	}
	it->nreq = it->bcur = it->cbj = 0;
	for (size_t y = x; y < end && it->nreq < TS_BATCH; y++) {
		const struct centry *e = &c->e[y];

		if (e->full || !shown(it, e))
			continue;
		it->req[it->nreq] = y;
		it->ids[it->nreq] = e->id;
		it->tat[it->nreq++] = SIZE_MAX;
	}
	tp_buf_reset(&it->text);
	/* A segment gone, or corrupt now: its rows are left out. */
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
	const struct centry *e = &it->r->cp->e[x];

	if (e->full)
		return e->full;
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
	if (it->r->cp)
		ts_report_row_of(it->r, it->cur, row);
	else
		ts_report_row(it->r, it->i - 1, row);
}

void ts_iter_end(struct ts_iter *it)
{
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
