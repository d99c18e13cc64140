/*
 * programs/tallystat/compact.c: the report since start of one read,
 * keeping per series only what its row needs besides its texts.
 *
 * A snapshot copies every series with its name, labels and help; a report
 * of a million series does not need them all at once.  Here the read
 * keeps, per series, its record id in its segment, a hash of its key and
 * its values (struct centry), sorts each segment's series by key as it
 * goes (the keys of one segment only are held, and only while it is
 * read), and the back ends get each row's texts by reading the record
 * again from its segment when they print it (iter.c).  The
 * values are those of the first read: a text report makes its rows twice
 * (the widths, then the lines), and both must show the same numbers.
 * Histograms and per-process gauges (whose views combine several
 * records, and may vanish with a process) are kept whole, as a copy.
 *
 * The texts must be those of the file that was read, even when its
 * process exits and the file goes before the report is printed: each
 * segment is opened a second time while the reader walks it, checked to
 * be the same file, and held open until the read is freed (an open file
 * outlives its name); iter.c reads the texts through that hold when the
 * file is gone by then.  A segment that cannot be held (gone already, or
 * no descriptor to spare) has its entries kept whole instead.
 *
 * The rows come out in the order of tp_series_cmp(): segments by pid,
 * start time and zone, the series of each by key (strverscmp) and kind.
 * Two segments of one pid, start time and zone (the same files through
 * two directories) would interleave their series: ts_compact_finish()
 * says so and the caller reads a whole snapshot instead.
 *
 * An interval run reads compact reads too: rates.c takes the deltas of
 * two of them into cdelta entries beside the entries, and caverage.c
 * keeps the Average: sums as a compact read of its own.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "format.h"
#include "strbuf.h"
#include "compact.h"

uint64_t ts_key_hash(const char *key, unsigned kind)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	return (h ^ kind) * 0x100000001b3ull;
}

void ts_make_key(struct tp_buf *b, const struct tally_series_view *v)
{
	tp_buf_reset(b);
	tp_series_key_buf(b, v->name, v->nlabels, v->label_names,
			  v->label_values);
}

/* A whole copy of the series of @v, as a snapshot keeps it (@ident: as
 * the read gave it), without its per-CPU values. */
static struct tp_series *full_copy(const struct tally_series_view *v,
				   const struct tp_series *ident)
{
	struct tp_series tmp = *ident, *s = tp_xmalloc(sizeof(*s));

	tmp.npercpu = 0;
	tmp.percpu = NULL;
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
	tp_series_set_values(&tmp, v);
	if (v->kind == TALLY_HISTOGRAM) {
		tmp.nbuckets = v->buckets ? v->nbuckets : 0;
		tmp.buckets = (int64_t *)v->buckets;
		tmp.nbounds = v->bounds ? v->nbounds : 0;
		tmp.bounds = (double *)v->bounds;
	}
	tp_series_copy(s, &tmp);
	return s;
}

/* Segments held open by the compact reads of this process.  Each costs a
 * descriptor, and TS_FD_SPARE are left to the rest: the reader opens one
 * per directory and one per segment it walks. */
static size_t nheld;
#define TS_FD_SPARE 64

static int may_hold(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 0;
	return rl.rlim_cur == RLIM_INFINITY ||
	       (rl.rlim_cur > TS_FD_SPARE &&
		nheld < rl.rlim_cur - TS_FD_SPARE);
}

/* The segment being walked, opened again to be held: the same file (its
 * creator, start and creation time), or NULL. */
static struct tally_seg *hold_open(const struct ts_compact *c)
{
	const struct tally_seg_info *w = c->walking;
	struct tally_seg_info in;
	struct tally_seg *seg;

	if (!w || !may_hold() || !(seg = tally_seg_open(w->path, c->open_opts)))
		return NULL;
	if (tally_seg_info(seg, &in) < 0 || in.pid != w->pid ||
	    in.start_ticks != w->start_ticks ||
	    in.created_ns != w->created_ns) {
		tally_seg_close(seg);
		return NULL;
	}
	nheld++;
	return seg;
}

void ts_seg_release(struct tally_seg *seg)
{
	if (!seg)
		return;
	tally_seg_close(seg);
	nheld--;
}

static void seg_begin(const struct tally_seg_info *info, void *arg)
{
	struct ts_compact *c = arg;

	c->walking = info;
	c->hold = NULL;
	c->tried = 0;
}

static int visit(const struct tp_series *ident,
		 const struct tally_series_view *v, void *arg)
{
	struct ts_compact *c = arg;
	struct centry *e;
	struct ts_skey *k;

	/* Held from its first series on: a segment none of whose series is
	 * kept costs no second open. */
	if (!c->tried) {
		c->tried = 1;
		c->hold = hold_open(c);
	}
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 1024;
		c->e = tp_xrealloc(c->e, c->cap * sizeof(*c->e));
	}
	e = &c->e[c->n];
	memset(e, 0, sizeof(*e));
	e->value = v->value;
	e->fvalue = v->fvalue;
	e->hash = ts_key_hash(ident->key, v->kind);
	e->seg = c->nsegs;
	e->id = v->id;
	e->frac = v->frac;
	e->kind = (unsigned char)v->kind;
	e->dead = (unsigned char)ident->dead;
	e->fractional = (unsigned char)!!v->fractional;
	e->info = (unsigned char)!!v->info;
	e->stateset = (unsigned char)!!v->stateset;
	if (v->kind == TALLY_HISTOGRAM || v->per_process || !c->hold)
		e->full = full_copy(v, ident);
	if (c->nsk == c->capsk) {
		c->capsk = c->capsk ? 2 * c->capsk : 1024;
		c->sk = tp_xrealloc(c->sk, c->capsk * sizeof(*c->sk));
	}
	k = &c->sk[c->nsk++];
	k->key = tp_arena_strdup(&c->keys, ident->key);
	k->at = c->n++;
	k->kind = v->kind;
	return 0;
}

static int skey_cmp(const void *a, const void *b)
{
	const struct ts_skey *x = a, *y = b;
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

/* The segment read is done: sort its series by key, or forget them
 * (@g NULL: it turned out corrupt). */
static int seg_end(const struct tp_segment *g, void *arg)
{
	struct ts_compact *c = arg;
	size_t n = c->n - c->first;
	int kept = g != NULL;

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
		c->held = tp_xrealloc(c->held, (c->nsegs + 1) *
				      sizeof(*c->held));
		c->held[c->nsegs] = c->hold;
		c->seg_first[c->nsegs++] = c->first;
		c->seg_first[c->nsegs] = c->n;
	} else {
		ts_seg_release(c->hold);
	}
	c->hold = NULL;
	c->walking = NULL;
	c->tried = 0;
	c->first = c->n;
	c->nsk = 0;
	tp_arena_free(&c->keys);
	return 0;
}

struct ts_compact *ts_compact_new(struct tp_collect_opts *co)
{
	struct ts_compact *c = tp_xcalloc(1, sizeof(*c));

	co->series_sink = visit;
	co->sink_seg_begin = seg_begin;
	co->sink_seg_end = seg_end;
	co->sink_arg = c;
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
	for (size_t i = 0; i < c->n; i++) {
		drop_full(&c->e[i]);
		if (c->d && c->d[i].full) {
			tp_series_free(c->d[i].full);
			free(c->d[i].full);
		}
	}
	for (uint32_t g = 0; g < c->nsegs; g++)
		ts_seg_release(c->held[g]);
	free(c->held);
	free(c->d);
	free(c->e);
	free(c->seg_first);
	free(c->order);
	free(c->sk);
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

void ts_report_compact_interval(struct ts_report *r,
				const struct ts_compact *c, double seconds,
				const struct ts_options *o)
{
	memset(r, 0, sizeof(*r));
	r->kind = TS_INTERVAL;
	r->when = c->snap->real;
	r->seconds = seconds;
	r->cp = c;
	r->omit_zero = o->omit_idle;
	for (size_t i = 0; i < c->n; i++)
		if (!o->omit_idle || (c->d[i].flags & TS_CHANGED))
			r->nrows++;
}
