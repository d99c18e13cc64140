/*
 * expose.c: writing a scrape in Prometheus's formats (expose.h).
 *
 * The one pass that matters for a large scrape: group the series by name
 * (a hash map of names, then a counting sort that keeps the order read
 * inside each metric; nothing is moved), then write each series with
 * appends, not printf, as the body is sent (ex_stream_fill()), reading
 * again the series of an index (index.h) a run at a time: a histogram's
 * label block is built once and reused for each of its bucket lines.  Duplicate label
 * sets are looked for (with a hash set) only where they can occur: when
 * two segments would write the same pid, process and zone labels, or when
 * a summed family mixes histogram layouts.
 *
 * Two segments with the same pid, process and zone are incarnations of
 * one process as Prometheus sees it: every restart of a container's
 * pid 1, or a pid reused.  One of them speaks for that label set, whole:
 * the live one, else the one created last (incarnation_cmp()).  The
 * others are left out, every series and tally_segment_* sample of them
 * (their series count as series_conflicts; a dead one still counts in
 * tally_exporter_dead_segments), so that no series of an earlier
 * incarnation stays under the labels of the current one.  Labels that
 * told incarnations apart would make a new series at every restart,
 * which the pid label already does where pids change; where they do
 * not, one series whose counter resets at a restart is what Prometheus
 * expects of a restarted process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tally/block.h"
#include "tally/metrics.h"
#include "tally/reader.h"

#include "expose.h"
#include "format.h"
#include "index.h"
#include "segfield.h"
#include "selfmetrics.h"
#include "strmap.h"

static const struct ex_le_rule *le_rule_for(const struct ex_config *c,
					    const char *name)
{
	for (unsigned i = 0; i < c->nrules; i++)
		if (fnmatch(c->rules[i].pattern, name, 0) == 0)
			return &c->rules[i];
	return NULL;
}

/* --- Writing --------------------------------------------------------- */

/* HELP text: \ and newline escaped in both formats, " too in OpenMetrics. */
static void put_help(struct tp_buf *b, const char *s, enum ex_format f)
{
	const char *run = s;

	for (; *s; s++) {
		const char *esc = NULL;

		if (*s == '\\')
			esc = "\\\\";
		else if (*s == '\n')
			esc = "\\n";
		else if (*s == '"' && f == EX_OPENMETRICS)
			esc = "\\\"";
		if (!esc)
			continue;
		tp_buf_putn(b, run, (size_t)(s - run));
		tp_buf_puts(b, esc);
		run = s + 1;
	}
	tp_buf_putn(b, run, (size_t)(s - run));
}

struct fam {
	const char *name;
	size_t first, n;      /* in the order array */
	size_t count;
};

static int cmp_fam(const void *a, const void *b)
{
	return strcmp(((const struct fam *)a)->name,
		      ((const struct fam *)b)->name);
}

/* The names a family writes, so that no two families share one. */
struct names {
	struct tp_strmap map;
	char **owned;
	size_t n, cap;
	int err;              /* -ENOMEM: a name was not kept (soft mode) */
};

static int names_claim(struct names *nm, const char *base,
		       const char *const *suffixes)
{
	char tmp[256];

	for (const char *const *s = suffixes; *s; s++) {
		snprintf(tmp, sizeof(tmp), "%s%s", base, *s);
		if (tp_strmap_get(&nm->map, tmp) != (size_t)-1)
			return -1;
	}
	for (const char *const *s = suffixes; *s && !nm->err; s++) {
		snprintf(tmp, sizeof(tmp), "%s%s", base, *s);
		if (nm->n == nm->cap) {
			size_t cap = nm->cap ? 2 * nm->cap : 64;

			if (tp_xresize(&nm->owned, cap * sizeof(char *))) {
				nm->err = -ENOMEM;
				break;
			}
			nm->cap = cap;
		}
		if (!(nm->owned[nm->n] = tp_xstrdup(tmp))) {
			nm->err = -ENOMEM;
			break;
		}
		nm->n++;
		if (tp_strmap_put(&nm->map, nm->owned[nm->n - 1], 1) < 0)
			nm->err = -ENOMEM;
	}
	return 0;
}

static void names_free(struct names *nm)
{
	tp_strmap_free(&nm->map);
	for (size_t i = 0; i < nm->n; i++)
		free(nm->owned[i]);
	free(nm->owned);
}

static const char *const sfx_counter[] = { "", "_total", "_created", NULL };
static const char *const sfx_gauge[] = { "", NULL };
static const char *const sfx_info[] = { "", "_info", NULL };
static const char *const sfx_hist[] = { "", "_bucket", "_count", "_sum",
					"_created", NULL };

static int has_label(const struct tp_series *s, const char *name)
{
	for (unsigned i = 0; i < s->nlabels; i++)
		if (strcmp(s->label_names[i], name) == 0)
			return 1;
	return 0;
}

/* One of our labels, renamed tally_<name> if the series has its own. */
static void put_our_label(struct tp_buf *b, const struct tp_series *s,
			  const char *name, const char *value, int *first)
{
	if (!*first)
		tp_buf_putc(b, ',');
	*first = 0;
	if (has_label(s, name))
		tp_buf_puts(b, "tally_");
	tp_buf_label(b, name, value);
}

/* The name series label @name is written under: a histogram's "le"
 * (the buckets' label, which libtally refuses but an older one or a
 * crafted file may hold) becomes exported_le, as Prometheus renames a
 * target's label that clashes with its own (honor_labels: false). */
static const char *out_name(const char *name, int hist)
{
	return hist && strcmp(name, "le") == 0 ? "exported_le" : name;
}

static int our_name_is(const char *name, const char *ours)
{
	return ours && ours[0] &&
	       (strcmp(name, ours) == 0 ||
		(strncmp(name, "tally_", 6) == 0 && strcmp(name + 6, ours) == 0));
}

/*
 * Can the labels of @s be written, each name once, with ours and (for a
 * histogram) le?  0: yes as they are; 1: yes, with a label renamed
 * (exported_le, or one of ours as tally_<name>); -1: no (a name twice in
 * the series, or a renamed one that meets another), and the series is
 * left out.  The reader gives the labels sorted by name and the library
 * refuses a name twice, so the check is one pass in the common case.
 */
static int label_clash(const struct tp_series *s, const struct ex_config *c,
		       int with_zone, int hist)
{
	const char *ours[3] = { NULL, NULL, NULL };
	int renamed = 0;

	if (!c->aggregate) {
		ours[0] = c->pid_label;
		ours[1] = c->process_label;
		ours[2] = with_zone ? c->zone_label : NULL;
	}
	for (unsigned i = 0; i < s->nlabels; i++) {
		const char *n = out_name(s->label_names[i], hist);

		if (n != s->label_names[i])
			renamed = 1;
		/* Sorted and distinct: each name after the one before. */
		if (i && strcmp(s->label_names[i - 1], s->label_names[i]) >= 0)
			goto slow;
		for (unsigned k = 0; k < 3; k++)
			if (our_name_is(n, ours[k]))
				renamed = 1;
	}
	if (!renamed)
		return 0;
slow:
	/* Every name as written, against every other. */
	renamed = 0;
	for (unsigned i = 0; i < s->nlabels + 3; i++) {
		const char *a;
		char abuf[256];

		if (i < s->nlabels) {
			a = out_name(s->label_names[i], hist);
			renamed |= a != s->label_names[i];
		} else {
			const char *o = ours[i - s->nlabels];

			if (!o || !o[0])
				continue;
			renamed |= has_label(s, o);
			snprintf(abuf, sizeof(abuf), "%s%s",
				 has_label(s, o) ? "tally_" : "", o);
			a = abuf;
		}
		if (hist && strcmp(a, "le") == 0)
			return -1;
		for (unsigned j = i + 1; j < s->nlabels + 3; j++) {
			const char *b;
			char bbuf[256];

			if (j < s->nlabels) {
				b = out_name(s->label_names[j], hist);
			} else {
				const char *o = ours[j - s->nlabels];

				if (!o || !o[0])
					continue;
				snprintf(bbuf, sizeof(bbuf), "%s%s",
					 has_label(s, o) ? "tally_" : "", o);
				b = bbuf;
			}
			if (strcmp(a, b) == 0)
				return -1;
		}
	}
	return renamed;
}

/* The labels of @s, without braces and without a trailing comma;
 * @pid is s->pid in decimal; @hist: a histogram's (see out_name). */
static void put_labels(struct tp_buf *b, const struct tp_series *s,
		       const struct ex_config *c, int with_zone,
		       const char *pid, int hist)
{
	int first = 1;

	for (unsigned i = 0; i < s->nlabels; i++) {
		if (!first)
			tp_buf_putc(b, ',');
		first = 0;
		tp_buf_label(b, out_name(s->label_names[i], hist),
			     s->label_values[i]);
	}
	if (c->aggregate)
		return;
	if (c->pid_label && c->pid_label[0])
		put_our_label(b, s, c->pid_label, pid, &first);
	if (c->process_label && c->process_label[0])
		put_our_label(b, s, c->process_label, s->proc, &first);
	if (with_zone && c->zone_label && c->zone_label[0])
		put_our_label(b, s, c->zone_label, s->zone, &first);
}

/* name{labels} value\n, or name value\n without labels. */
static void put_sample(struct tp_buf *b, const char *name, const char *sfx,
		       const char *labels, size_t llen, const char *extra,
		       const char *value)
{
	tp_buf_puts(b, name);
	tp_buf_puts(b, sfx);
	if (llen || extra) {
		tp_buf_putc(b, '{');
		tp_buf_putn(b, labels, llen);
		if (extra) {
			if (llen)
				tp_buf_putc(b, ',');
			tp_buf_puts(b, extra);
		}
		tp_buf_putc(b, '}');
	}
	tp_buf_putc(b, ' ');
	tp_buf_puts(b, value);
	tp_buf_putc(b, '\n');
}

static void put_header(struct tp_buf *b, const char *name, const char *type,
		       const char *help, const char *unit, enum ex_format f)
{
	if (help && help[0]) {
		tp_buf_puts(b, "# HELP ");
		tp_buf_puts(b, name);
		tp_buf_putc(b, ' ');
		put_help(b, help, f);
		tp_buf_putc(b, '\n');
	}
	tp_buf_puts(b, "# TYPE ");
	tp_buf_puts(b, name);
	tp_buf_putc(b, ' ');
	tp_buf_puts(b, type);
	tp_buf_putc(b, '\n');
	if (f == EX_OPENMETRICS && unit && unit[0]) {
		char sfx[64];

		snprintf(sfx, sizeof(sfx), "_%s", unit);
		if (tp_ends_with(name, sfx)) {
			tp_buf_puts(b, "# UNIT ");
			tp_buf_puts(b, name);
			tp_buf_putc(b, ' ');
			tp_buf_puts(b, unit);
			tp_buf_putc(b, '\n');
		}
	}
}

/*
 * What ex_write() works out once per scrape, not once per series: which
 * processes have several zones (their series get a zone label), and
 * whether two segments could write the same label set (then every
 * series is checked against the ones written before it).
 */
struct plan {
	int *multi_pids;      /* sorted */
	size_t nmulti;
	int dedupe_all;       /* two segments look the same in the output */
	struct tp_strmap seen;/* dedupe: label sets written, per family */
	struct tp_arena seen_mem;
	struct tp_buf scratch;
	int err;              /* -ENOMEM: soft mode (strbuf.h) */
};

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

static int cmp_seg(const void *a, const void *b)
{
	const struct tp_segment *x = *(const struct tp_segment *const *)a;
	const struct tp_segment *y = *(const struct tp_segment *const *)b;

	if (x->info.pid != y->info.pid)
		return x->info.pid < y->info.pid ? -1 : 1;
	return strcmp(x->info.zone_name, y->info.zone_name);
}

static int is_multi(const struct plan *p, int pid)
{
	return p->nmulti && bsearch(&pid, p->multi_pids, p->nmulti,
				    sizeof(int), cmp_int) != NULL;
}

static void plan_make(struct plan *p, const struct tp_snapshot *snap,
		      const struct ex_config *c)
{
	const struct tp_segment **v;
	int with_pid = c->pid_label && c->pid_label[0];
	int with_proc = c->process_label && c->process_label[0];

	memset(p, 0, sizeof(*p));
	if (c->aggregate || snap->nsegs < 2)
		return;
	v = tp_xmalloc(snap->nsegs * sizeof(*v));
	p->multi_pids = tp_xmalloc(snap->nsegs * sizeof(int));
	if (!v || !p->multi_pids) {
		p->err = -ENOMEM; /* soft mode */
		free(v);
		return;
	}
	for (size_t i = 0; i < snap->nsegs; i++)
		v[i] = &snap->segs[i];
	qsort(v, snap->nsegs, sizeof(*v), cmp_seg);
	for (size_t i = 0; i + 1 < snap->nsegs; i++) {
		const struct tally_seg_info *a = &v[i]->info, *b = &v[i + 1]->info;

		if (a->pid != b->pid)
			continue;
		if (strcmp(a->zone_name, b->zone_name) != 0) {
			if (!p->nmulti || p->multi_pids[p->nmulti - 1] != a->pid)
				p->multi_pids[p->nmulti++] = a->pid;
		} else {
			/* The same pid and zone twice: a stale segment of
			 * an earlier process with the same pid, or two
			 * processes of PID namespaces sharing the
			 * directory (each container's pid 1). */
			p->dedupe_all = 1;
		}
	}
	/* Without pid labels, processes are told apart by name (and zone)
	 * at best. */
	if (!with_pid) {
		struct tp_strmap m = { 0 };
		struct tp_buf *k = tp_xcalloc(snap->nsegs, sizeof(*k));

		if (!k) {
			p->err = -ENOMEM;
			free(v);
			return;
		}
		for (size_t i = 0; i < snap->nsegs && !p->dedupe_all &&
				   !p->err; i++) {
			const struct tally_seg_info *in = &v[i]->info;

			tp_buf_printf(&k[i], "%s\x1f%s", with_proc ?
				      in->proc_name : "", is_multi(p, in->pid) ?
				      in->zone_name : "");
			if (tp_strmap_get(&m, tp_buf_str(&k[i])) != (size_t)-1)
				p->dedupe_all = 1;
			if (k[i].err || tp_strmap_put(&m, tp_buf_str(&k[i]),
						       i) < 0)
				p->err = -ENOMEM;
		}
		tp_strmap_free(&m);
		for (size_t i = 0; i < snap->nsegs; i++)
			tp_buf_free(&k[i]);
		free(k);
	}
	free(v);
}

/* Which of two incarnations speaks for their labels: the live one,
 * else the one created last; negative when @a does. */
static int incarnation_cmp(int a_dead, uint64_t a_created, int b_dead,
			   uint64_t b_created)
{
	if (a_dead != b_dead)
		return a_dead ? 1 : -1;
	if (a_created != b_created)
		return a_created > b_created ? -1 : 1;
	return 0;
}

/* 1 when @labels (with the series' key) was written before in this
 * family; records it otherwise (in soft mode, p->err when it cannot). */
static int plan_seen(struct plan *p, const struct tp_series *s,
		     const char *labels, size_t llen)
{
	char *k;

	tp_buf_reset(&p->scratch);
	tp_buf_puts(&p->scratch, s->name);
	tp_buf_putc(&p->scratch, '{');
	tp_buf_putn(&p->scratch, labels, llen);
	if (p->scratch.err) {
		p->err = p->scratch.err;
		return 0;
	}
	if (tp_strmap_get(&p->seen, tp_buf_str(&p->scratch)) != (size_t)-1)
		return 1;
	k = tp_arena_memdup(&p->seen_mem, tp_buf_str(&p->scratch),
			    p->scratch.len + 1);
	if (!k || tp_strmap_put(&p->seen, k, 1) < 0)
		p->err = -ENOMEM;
	return 0;
}

static void plan_free(struct plan *p)
{
	free(p->multi_pids);
	tp_strmap_free(&p->seen);
	tp_arena_free(&p->seen_mem);
	tp_buf_free(&p->scratch);
}

/* @v of a scaled unit in its base unit, exactly (@out: TP_F64_LEN). */
static char *fmt_scaled(char *out, int64_t v,
			const struct tally_unit_scale *sc)
{
	uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	char t[64];

	if (tally_unit_format(mag, v < 0, sc, 0, t, sizeof(t)) < 0 ||
	    strlen(t) >= TP_F64_LEN)
		return tp_fmt_i64(out, v); /* cannot happen: 2^64 ns fits */
	memcpy(out, t, strlen(t) + 1);
	return out;
}

/* A fractional counter's value, @whole + @frac / 10^9, as an exact
 * decimal without trailing zeros, in @buf (TP_F64_LEN bytes). */
static const char *fmt_frac(char *buf, int64_t whole, unsigned frac)
{
	int n = snprintf(buf, TP_F64_LEN, "%lld.%09u", (long long)whole,
			 frac);

	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	return buf;
}

static double pow10u(unsigned n)
{
	double d = 1;

	while (n--)
		d *= 10;
	return d;
}

/*
 * The samples of classic histogram @s (format 2.6): its buckets made
 * cumulative, each with its bound as le (times @mul when the exporter
 * @scaled its unit), then +Inf, _count and _sum.  The sum is the exact
 * decimal when it needs no scaling and is not negative.  A summary
 * (format 2.7, no bounds) has only _count and _sum.
 */
static void put_classic(struct tp_buf *b, const char *base,
			const struct tp_buf *lb, const struct tp_series *s,
			int f, double mul, int scaled)
{
	char val[TP_F64_LEN], e[TP_F64_LEN], le[TP_F64_LEN + 8];
	uint64_t cum = 0;

	for (unsigned bk = 0; bk < s->nbuckets; bk++) {
		cum += (uint64_t)s->buckets[bk];
		if (bk >= s->nbounds)
			break;
		tp_fmt_f64(e, s->bounds[bk] * mul);
		/* OpenMetrics spells a bound as a float ("1.0"). */
		snprintf(le, sizeof(le), "le=\"%s%s\"", e,
			 f == EX_OPENMETRICS && !strpbrk(e, ".eEnI") ? ".0" :
			 "");
		put_sample(b, base, "_bucket", tp_buf_str(lb), lb->len, le,
			   tp_fmt_i64(val, (int64_t)cum));
	}
	tp_fmt_i64(val, (int64_t)cum);
	if (!s->summary)
		put_sample(b, base, "_bucket", tp_buf_str(lb), lb->len,
			   "le=\"+Inf\"", val);
	put_sample(b, base, "_count", tp_buf_str(lb), lb->len, NULL, val);
	put_sample(b, base, "_sum", tp_buf_str(lb), lb->len, NULL,
		   scaled || s->sum < 0 ? tp_fmt_f64(val, s->fsum * mul) :
		   s->frac ? fmt_frac(val, s->sum, s->frac) :
		   tp_fmt_i64(val, s->sum));
}

/* Do @s and @s0, of one family, define the name alike: the same help
 * text and the same label names (the exporter's own aside)? */
static int same_definition(const struct tp_series *s,
			   const struct tp_series *s0)
{
	if (s == s0)
		return 1;
	if (strcmp(s->help ? s->help : "", s0->help ? s0->help : "") ||
	    s->nlabels != s0->nlabels)
		return 0;
	for (unsigned i = 0; i < s->nlabels; i++)
		if (s->label_names[i] != s0->label_names[i] &&
		    strcmp(s->label_names[i], s0->label_names[i]))
			return 0;
	return 1;
}

/*
 * What one metric is written with, worked out once by metric_begin() and
 * used for each of its series.  The selection of a histogram's buckets
 * has one byte per bucket: a series has at most TALLY_BLOCK_MAX_SLOTS
 * slots, of which a histogram's buckets are all but one.
 */
struct metric_plan {
	const struct tp_series *s0;   /* its first series: the HELP */
	unsigned kind;
	char base[TALLY_NAME_MAX + 16];
	const char *sample_sfx;       /* "_total" for a counter */
	const struct ex_le_rule *rule;
	struct tally_unit_scale sc;
	int scaled;                   /* values shown in the base unit */
	int dedupe;                   /* look for label sets written twice */
	unsigned char sel[TALLY_BLOCK_MAX_SLOTS];
	unsigned sel_sub, sel_max, sel_n; /* the layout sel is for */
	int cur_pid, zone_multi;
	char pid[16];                 /* cur_pid in decimal */
};

/*
 * A scrape being written (expose.h): the metrics in name order with the
 * place of each of their series in the snapshot, and where the writing
 * stands, so that ex_stream_fill() can stop after any series.
 */
/* The items of an index (index.h: places, or the snapshot's series)
 * grouped by metric, metrics in name order. */
struct ex_group {
	struct fam *fams;
	size_t nfams;
	uint32_t *order;              /* items, those of a metric together */
	uint64_t conflicts;           /* items of segments left out */
};

/* Series read again at once, at most: one tally_seg_foreach_ids(). */
#define RUN 128u
/* Segments kept open while a scrape is written. */
#define NOPEN 8u

struct ex_stream {
	const struct ex_index *ix;
	const struct tp_snapshot *snap;  /* &ix->snap */
	const struct ex_config *c;
	enum ex_format f;
	struct ex_self self;
	uint64_t t0_ns;
	struct ex_result res;
	const struct ex_group *g;     /* the items by metric */
	struct ex_group *own;         /* g, when this stream made it */
	struct names nm;
	struct tp_buf lb;             /* the labels of the series at hand */
	struct plan pl;
	unsigned char *shadowed, *skip;
	size_t fi, si;                /* the next metric, its next series */
	int in_fam;                   /* metric_begin() done for metric fi */
	int done;
	struct metric_plan fp;
	/* Reading places again: the segments open (seg: their index in
	 * snap.segs), the ids of a run, and the run's place in them. */
	struct {
		struct tally_seg *g;
		uint32_t seg;
		uint64_t used;
	} open[NOPEN];
	uint64_t uses;
	uint32_t ids[RUN];
	size_t run_n, run_at;
	uint32_t run_seg;
	const char *run_name;
	struct tp_buf *run_out;
};

/* Item @i's series when it is in memory; NULL for a place to read. */
static const struct tp_series *item_series(const struct ex_stream *st,
					   size_t i)
{
	const struct ex_place *p;

	if (!st->ix->places)
		return &st->snap->series[i];
	p = &st->ix->places[i];
	return p->rec == EX_PLACE_KEPT ? &st->snap->series[p->id] : NULL;
}

/* What item @i is grouped and planned by: its series, or for a place
 * its metric record's first series; NULL when it is left out. */
static const struct tp_series *item_like(const struct ex_stream *st,
					 size_t i)
{
	const struct ex_place *p;

	if (!st->ix->places || st->ix->places[i].rec == EX_PLACE_KEPT)
		return item_series(st, i);
	p = &st->ix->places[i];
	return p->rec == EX_PLACE_GONE ? NULL : &st->ix->recs[p->rec].first;
}

/* Is item @i of a segment whose labels another incarnation speaks for? */
static int item_shadowed(const struct ex_stream *st, size_t i)
{
	const struct ex_place *p;

	if (!st->ix->places || st->ix->places[i].rec == EX_PLACE_KEPT)
		return st->skip && st->skip[st->ix->places ?
					    st->ix->places[i].id : i];
	p = &st->ix->places[i];
	return !st->c->aggregate && st->shadowed[st->ix->recs[p->rec].seg];
}

/* The names metric @fm writes, claimed, and its header written; 0 when
 * they clash with names written before (every series a conflict). */
static int metric_begin(struct ex_stream *st, struct tp_buf *b,
		     const struct fam *fm)
{
	struct metric_plan *fp = &st->fp;
	const struct tp_series *s0 = item_like(st, st->g->order[fm->first]);
	const char *const *sfx = sfx_gauge;
	const char *unit;

	fp->s0 = s0;
	fp->kind = tp_kind_type(s0->kind);
	fp->sample_sfx = "";
	fp->rule = NULL;
	fp->sel_sub = fp->sel_max = fp->sel_n = 0;
	fp->cur_pid = 0;
	fp->zone_multi = 0;
	snprintf(fp->pid, sizeof(fp->pid), "0");
	fp->dedupe = st->pl.dedupe_all;
	/* Integers in nanoseconds (say) are shown in seconds: the name,
	 * the unit, values, le edges and sums (tally/metrics.h). */
	fp->scaled = tally_unit_scale(s0->unit, &fp->sc);
	unit = fp->scaled ? fp->sc.base : s0->unit;
	if (!fp->scaled || tally_unit_name(s0->name, s0->unit, fp->base,
					   sizeof(fp->base)) < 0)
		snprintf(fp->base, sizeof(fp->base), "%s", s0->name);
	if (fp->kind == TALLY_COUNTER) {
		if (tp_ends_with(fp->base, "_total"))
			fp->base[strlen(fp->base) - 6] = '\0';
		sfx = sfx_counter;
		fp->sample_sfx = "_total";
	} else if (fp->kind == TALLY_HISTOGRAM) {
		sfx = sfx_hist;
		fp->rule = le_rule_for(st->c, s0->name);
	} else if (s0->info) {
		sfx = sfx_info; /* format 2.8 */
		fp->sample_sfx = "_info";
	}
	if (names_claim(&st->nm, fp->base, sfx) < 0) {
		st->res.conflicts += fm->n;
		return 0;
	}
	if ((fp->kind == TALLY_COUNTER || s0->info) && st->f == EX_TEXT) {
		/* In 0.0.4 the TYPE line names the sample: base_total, an
		 * info's base_info (a gauge there, as prometheus_client
		 * writes it). */
		char tname[sizeof(fp->base) + 8];

		snprintf(tname, sizeof(tname), "%s%s", fp->base,
			 fp->sample_sfx);
		put_header(b, tname, tp_kind_name(fp->kind), s0->help, unit,
			   st->f);
	} else {
		put_header(b, fp->base, s0->summary ? "summary" :
			   s0->info ? "info" : s0->stateset &&
			   st->f == EX_OPENMETRICS ? "stateset" :
			   tp_kind_name(fp->kind), s0->help, unit, st->f);
	}
	/* Summed series are one per key, unless two layouts of a histogram
	 * were summed apart (or kinds differ): then check every key. */
	for (size_t i = 1; st->c->aggregate && !fp->dedupe && i < fm->n; i++) {
		const struct tp_series *s = item_like(st, st->g->order[fm->first + i]);

		fp->dedupe = s->sub_bits != s0->sub_bits ||
			     s->nbuckets != s0->nbuckets || s->kind != s0->kind;
	}
	if (fp->dedupe) {
		tp_strmap_free(&st->pl.seen);
		tp_arena_free(&st->pl.seen_mem);
	}
	return 1;
}

/* The one sample of counter or gauge @s (labels in @lb). */
static void put_value(struct tp_buf *b, const struct metric_plan *fp,
		      const struct tp_buf *lb, const struct tp_series *s)
{
	char val[TP_F64_LEN];
	const char *v;

	if (s->fractional && s->frac && !fp->scaled)
		v = fmt_frac(val, s->value, s->frac); /* exact (format 2.6) */
	else if (s->kind == TALLY_FGAUGE)
		v = tp_fmt_f64(val, fp->scaled ? (double)fp->sc.mul *
			       s->fvalue / pow10u(fp->sc.div10) : s->fvalue);
	else if (fp->scaled)
		v = fmt_scaled(val, s->value, &fp->sc);
	else
		v = tp_fmt_i64(val, s->value);
	put_sample(b, fp->base, fp->sample_sfx, tp_buf_str(lb), lb->len, NULL,
		   v);
}

/* The samples of tally histogram @s: the selected buckets made
 * cumulative, +Inf, _count and _sum; returns how many. */
static uint64_t put_log_hist(struct tp_buf *b, struct metric_plan *fp,
			     const struct tp_buf *lb,
			     const struct tp_series *s, enum ex_format f)
{
	char val[TP_F64_LEN], le[96];
	uint64_t samples = 3;
	int64_t cum = 0;

	if (s->sub_bits != fp->sel_sub || s->max_bits != fp->sel_max ||
	    s->nbuckets != fp->sel_n) {
		fp->sel_sub = s->sub_bits;
		fp->sel_max = s->max_bits;
		fp->sel_n = s->nbuckets;
		ex_le_select(fp->rule, fp->sel_sub, fp->sel_max, fp->sel_n,
			     fp->sel);
	}
	for (unsigned bk = 0; bk < s->nbuckets; bk++) {
		uint64_t lo, hi;

		cum = (int64_t)((uint64_t)cum + (uint64_t)s->buckets[bk]);
		if (!fp->sel[bk])
			continue;
		tally_histogram_bucket_bounds(bk, s->sub_bits, &lo, &hi);
		if (fp->scaled) {
			char e[64];

			tally_unit_format(hi, 0, &fp->sc, f == EX_OPENMETRICS,
					  e, sizeof(e));
			snprintf(le, sizeof(le), "le=\"%s\"", e);
		} else {
			snprintf(le, sizeof(le), "le=\"%llu%s\"",
				 (unsigned long long)hi,
				 f == EX_OPENMETRICS ? ".0" : "");
		}
		put_sample(b, fp->base, "_bucket", tp_buf_str(lb), lb->len, le,
			   tp_fmt_i64(val, cum));
		samples++;
	}
	/* +Inf and _count print one number: the buckets' total, which is
	 * how the reader computes the count. */
	tp_fmt_i64(val, cum);
	put_sample(b, fp->base, "_bucket", tp_buf_str(lb), lb->len,
		   "le=\"+Inf\"", val);
	put_sample(b, fp->base, "_count", tp_buf_str(lb), lb->len, NULL, val);
	put_sample(b, fp->base, "_sum", tp_buf_str(lb), lb->len, NULL,
		   fp->scaled ? fmt_scaled(val, s->sum, &fp->sc) :
		   tp_fmt_i64(val, s->sum));
	return samples;
}

/* Series @s of the metric metric_begin() planned, or why it is left out. */
static void write_series(struct ex_stream *st, struct tp_buf *b,
			 const struct tp_series *s)
{
	struct metric_plan *fp = &st->fp;
	struct ex_result *res = &st->res;
	int hist = fp->kind == TALLY_HISTOGRAM;

	if (tp_kind_type(s->kind) != fp->kind ||
	    s->summary != fp->s0->summary || s->info != fp->s0->info ||
	    s->stateset != fp->s0->stateset) {
		res->conflicts++;
		return;
	}
	/* Another definition of the name (help, label names): shown under
	 * the first one's HELP, and said so. */
	if (!same_definition(s, fp->s0))
		res->redefined++;
	if (s->pid != fp->cur_pid) {
		fp->cur_pid = s->pid;
		snprintf(fp->pid, sizeof(fp->pid), "%d", s->pid);
		fp->zone_multi = !st->c->aggregate && is_multi(&st->pl, s->pid);
	}
	switch (label_clash(s, st->c, fp->zone_multi, hist)) {
	case -1:
		res->labels_dropped++;
		return;
	case 1:
		res->labels_renamed++;
		break;
	default:
		break;
	}
	tp_buf_reset(&st->lb);
	put_labels(&st->lb, s, st->c, fp->zone_multi, fp->pid, hist);
	/* The same label set twice (see struct plan): write the first. */
	if (fp->dedupe && plan_seen(&st->pl, s, tp_buf_str(&st->lb),
				    st->lb.len)) {
		res->conflicts++;
		return;
	}
	if (!hist || (s->fractional && s->frac && !fp->scaled)) {
		put_value(b, fp, &st->lb, s);
		res->series++;
		res->samples++;
	} else if (s->classic) {
		put_classic(b, fp->base, &st->lb, s, st->f, fp->scaled ?
			    (double)fp->sc.mul / pow10u(fp->sc.div10) : 1.0,
			    fp->scaled);
		res->series++;
		res->samples += s->summary ? 2 : s->nbuckets + 2;
	} else if (s->nbuckets > sizeof(fp->sel) || s->nbuckets == 0) {
		res->conflicts++;
	} else {
		res->series++;
		res->samples += put_log_hist(b, fp, &st->lb, s, st->f);
	}
}

/* --- The exporter's own metrics -------------------------------------- */

static void put_seg_labels(struct tp_buf *b, const struct tp_segment *g)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", g->info.pid);
	tp_buf_label(b, "pid", pid);
	tp_buf_putc(b, ',');
	tp_buf_label(b, "process", g->info.proc_name);
	tp_buf_putc(b, ',');
	tp_buf_label(b, "zone", g->info.zone_name);
}

/* The header of a metric: a counter's TYPE line names its sample
 * (name_total) in text format 0.0.4, the family (name) in OpenMetrics. */
static void self_header(struct tp_buf *b, enum ex_format f, const char *name,
			int counter, const char *help, const char *unit)
{
	char tname[128];

	snprintf(tname, sizeof(tname), "%s%s", name,
		 counter && f == EX_TEXT ? "_total" : "");
	put_header(b, tname, tp_kind_name(counter ? TALLY_COUNTER :
					  TALLY_GAUGE), help, unit, f);
}

static int cmp_seg_labels(const void *a, const void *b)
{
	const struct tp_segment *x = *(const struct tp_segment *const *)a;
	const struct tp_segment *y = *(const struct tp_segment *const *)b;
	int c = cmp_seg(a, b);

	if (!c)
		c = strcmp(x->info.proc_name, y->info.proc_name);
	if (!c)
		c = incarnation_cmp(!x->info.alive && !x->info.in_use,
				    x->info.created_ns,
				    !y->info.alive && !y->info.in_use,
				    y->info.created_ns);
	return c ? c : (x > y) - (x < y);
}

/* shadowed[i]: 1 when segment i has the pid, process and zone labels of
 * an incarnation that speaks for them (see the top of this file); NULL
 * when out of memory (soft mode). */
static unsigned char *seg_shadowed(const struct tp_snapshot *snap)
{
	unsigned char *sh = tp_xcalloc(snap->nsegs + 1, 1);
	const struct tp_segment **v = tp_xmalloc((snap->nsegs + 1) *
						 sizeof(*v));
	const struct tp_segment *prev = NULL;

	if (!sh || !v) {
		/* Soft mode: the stream is not made. */
		free(sh);
		free(v);
		return NULL;
	}
	for (size_t i = 0; i < snap->nsegs; i++)
		v[i] = &snap->segs[i];
	qsort(v, snap->nsegs, sizeof(*v), cmp_seg_labels);
	for (size_t i = 0; i < snap->nsegs; i++) {
		if (v[i]->stale)
			continue;
		if (prev && prev->info.pid == v[i]->info.pid &&
		    strcmp(prev->info.zone_name, v[i]->info.zone_name) == 0 &&
		    strcmp(prev->info.proc_name, v[i]->info.proc_name) == 0)
			sh[v[i] - snap->segs] = 1;
		else
			prev = v[i];
	}
	free(v);
	return sh;
}

/* What tells a segment's series from another's, where the snapshot is
 * sorted: pid, start, creation time and zone. */
static const char *segment_key(struct tp_buf *k, int pid, uint64_t start,
			       uint64_t created, const char *zone)
{
	tp_buf_reset(k);
	tp_buf_printf(k, "%d/%llu/%llu/%s", pid, (unsigned long long)start,
		      (unsigned long long)created, zone);
	return tp_buf_str(k);
}

/*
 * skip[i]: 1 when series i belongs to a segment left out (@shadowed);
 * NULL when none is.  In the order read (the exporter's), the series of
 * each segment come together, segment after segment, so they are found
 * by place, even those of a byte-for-byte copy of a live segment; in a
 * sorted snapshot, by what their segment says of itself.
 */
static unsigned char *shadow_series(const struct tp_snapshot *snap,
				    const unsigned char *shadowed)
{
	struct tp_strmap keys = { 0 };
	struct tp_arena mem = { 0 };
	struct tp_buf k = { 0 };
	unsigned char *skip;
	size_t any = 0, total = 0;

	for (size_t i = 0; i < snap->nsegs; i++) {
		any += shadowed[i];
		total += snap->segs[i].nseries;
	}
	if (!any)
		return NULL;
	skip = tp_xcalloc(snap->nseries + 1, 1);
	if (snap->unsorted && total == snap->nseries) {
		for (size_t i = 0, at = 0; i < snap->nsegs; i++) {
			if (shadowed[i])
				memset(skip + at, 1, snap->segs[i].nseries);
			at += snap->segs[i].nseries;
		}
		return skip;
	}
	for (size_t i = 0; i < snap->nsegs; i++) {
		const struct tally_seg_info *in = &snap->segs[i].info;

		if (shadowed[i])
			tp_strmap_put(&keys, tp_arena_strdup(&mem, segment_key(
				&k, in->pid, in->start_ticks, in->created_ns,
				in->zone_name)), 1);
	}
	for (size_t i = 0; i < snap->nseries; i++) {
		const struct tp_series *s = &snap->series[i];

		skip[i] = tp_strmap_get(&keys, segment_key(&k, s->pid,
					s->start_ticks, s->created_ns,
					s->zone)) != (size_t)-1;
	}
	tp_strmap_free(&keys);
	tp_arena_free(&mem);
	tp_buf_free(&k);
	return skip;
}

/* One tally_segment_* metric of segfield.h's table: a sample per
 * segment read in this scrape, but one per label set (@shadowed). */
static void seg_metric(struct tp_buf *b, const struct tp_snapshot *snap,
		       enum ex_format f, const struct tp_seg_field *fd,
		       const unsigned char *shadowed)
{
	char name[96];
	const char *sfx = fd->counter ? "_total" : "";

	snprintf(name, sizeof(name), "tally_segment_%s", fd->metric);
	self_header(b, f, name, fd->counter, fd->help, fd->unit);
	for (size_t i = 0; i < snap->nsegs; i++) {
		const struct tp_segment *g = &snap->segs[i];
		struct tp_seg_row r = { &g->info, g->nseries };
		struct tp_seg_value v;
		char t[48];

		if (g->stale || shadowed[i]) /* not read this time
					      * (retain.h), or another
					      * incarnation's labels */
			continue;
		tp_seg_field_value(fd, &r, &v);
		if (v.type == TP_SF_RATIO)
			snprintf(t, sizeof(t), "%.6g", v.d);
		else
			tp_fmt_i64(t, v.i);
		tp_buf_puts(b, name);
		tp_buf_puts(b, sfx);
		tp_buf_putc(b, '{');
		put_seg_labels(b, g);
		tp_buf_puts(b, "} ");
		tp_buf_puts(b, t);
		tp_buf_putc(b, '\n');
	}
}

/* A sample: @name{@labels} @value (no braces without labels). */
static void put_line(struct tp_buf *b, const char *name, const char *labels,
		     const char *value)
{
	tp_buf_puts(b, name);
	if (labels) {
		tp_buf_putc(b, '{');
		tp_buf_puts(b, labels);
		tp_buf_putc(b, '}');
	}
	tp_buf_putc(b, ' ');
	tp_buf_puts(b, value);
	tp_buf_putc(b, '\n');
}

static void write_self(struct tp_buf *b, const struct tp_snapshot *snap,
		       enum ex_format f, const struct ex_self *self,
		       const struct ex_result *res, uint64_t t0_ns,
		       const unsigned char *shadowed)
{
	struct self_in in = { snap, self, res, t0_ns };
	struct self_sample v[SELF_MAX_SAMPLES];
	char sample[128];

	for (size_t i = 0; i < tp_seg_nfields; i++)
		if (tp_seg_fields[i].metric)
			seg_metric(b, snap, f, &tp_seg_fields[i], shadowed);
	for (size_t i = 0; i < NSELF; i++) {
		const struct self_metric *m = &self_metrics[i];
		unsigned n = self_samples(m, &in, v);

		self_header(b, f, m->name, m->counter, m->help, m->unit);
		snprintf(sample, sizeof(sample), "%s%s", m->name,
			 m->counter ? "_total" : "");
		for (unsigned j = 0; j < n; j++)
			put_line(b, sample, v[j].labels[0] ? v[j].labels :
				 NULL, v[j].value);
	}
}

/* Claim the names of the exporter's own metrics, so that no series of
 * the segments takes one: a counter's family and its _total sample
 * both. */
static void claim_self_names(struct names *nm)
{
	static const char *const plain[] = { "", NULL };
	static const char *const counter[] = { "", "_total", NULL };
	char name[96];

	for (size_t i = 0; i < tp_seg_nfields; i++) {
		const struct tp_seg_field *fd = &tp_seg_fields[i];

		if (!fd->metric)
			continue;
		snprintf(name, sizeof(name), "tally_segment_%s", fd->metric);
		names_claim(nm, name, fd->counter ? counter : plain);
	}
	for (size_t i = 0; i < NSELF; i++)
		names_claim(nm, self_metrics[i].name,
			    self_metrics[i].counter ? counter : plain);
}

/* A metric more in g->fams, of @name, as index @at before the sort;
 * (size_t)-1 when out of memory (soft mode). */
static size_t add_fam(struct ex_group *g, size_t *cap, const char *name)
{
	size_t at = g->nfams;

	if (at == *cap) {
		size_t n = *cap ? 2 * *cap : 64;

		if (tp_xresize(&g->fams, n * sizeof(*g->fams)))
			return (size_t)-1;
		*cap = n;
	}
	g->nfams++;
	g->fams[at].name = name;
	g->fams[at].n = 0;
	g->fams[at].first = at; /* its index, through the sort */
	return at;
}

/*
 * The metrics of @st's items in name order (g->fams), and g->order: the
 * items of each metric together, in the order read inside each (a hash
 * map of names, then a counting sort; the items themselves are not
 * moved).  NULL when out of memory (soft mode).
 */
static struct ex_group *group_by_name(const struct ex_stream *st)
{
	size_t n = st->ix->places ? st->ix->nplaces : st->snap->nseries;
	struct ex_group *g = tp_xcalloc(1, sizeof(*g));
	struct tp_strmap famidx = { 0 };
	size_t *pos = NULL, *rank = NULL, cap = 0, last_at = 0, at = 0;
	uint32_t *famof = tp_xmalloc((n + 1) * sizeof(*famof));
	const char *last_name = NULL;

	if (!g || !famof || !(g->order = tp_xmalloc((n + 1) *
						     sizeof(*g->order))))
		goto oom;
	for (size_t i = 0; i < n; i++) {
		const struct tp_series *s = item_like(st, i);

		famof[i] = UINT32_MAX;
		/* A gauge of processes that are gone is not a current
		 * value: left out (snapshot.h, "Whose a series is"). */
		if (!s || tp_series_gone_gauge(s))
			continue;
		/* Another incarnation speaks for its labels. */
		if (item_shadowed(st, i)) {
			g->conflicts++;
			continue;
		}
		/* Neighbours of one metric share their name's memory. */
		if (s->name != last_name) {
			last_at = tp_strmap_get(&famidx, s->name);
			if (last_at == (size_t)-1) {
				last_at = add_fam(g, &cap, s->name);
				if (last_at == (size_t)-1 ||
				    tp_strmap_put(&famidx, s->name, last_at))
					goto oom;
			}
			last_name = s->name;
		}
		g->fams[last_at].n++;
		famof[i] = (uint32_t)last_at;
	}
	if (g->nfams)
		qsort(g->fams, g->nfams, sizeof(*g->fams), cmp_fam);
	rank = tp_xmalloc((g->nfams + 1) * sizeof(*rank));
	pos = tp_xmalloc((g->nfams + 1) * sizeof(*pos));
	if (!rank || !pos)
		goto oom;
	for (size_t i = 0; i < g->nfams; i++) {
		rank[g->fams[i].first] = i;
		g->fams[i].first = at;
		pos[i] = at;
		at += g->fams[i].n;
	}
	for (size_t i = 0; i < n; i++)
		if (famof[i] != UINT32_MAX)
			g->order[pos[rank[famof[i]]]++] = (uint32_t)i;
	tp_strmap_free(&famidx);
	free(famof);
	free(rank);
	free(pos);
	return g;
oom:
	tp_strmap_free(&famidx);
	free(famof);
	free(rank);
	free(pos);
	ex_group_free(g);
	return NULL;
}

void ex_group_free(struct ex_group *g)
{
	if (!g)
		return;
	free(g->order);
	free(g->fams);
	free(g);
}

struct ex_stream *ex_stream_open(const struct ex_index *ix,
				 const struct ex_group *g,
				 const struct ex_config *c, enum ex_format f,
				 const struct ex_self *self, uint64_t t0_ns)
{
	struct ex_stream *st = tp_xcalloc(1, sizeof(*st));

	if (!st)
		return NULL; /* soft mode */
	st->ix = ix;
	st->snap = &ix->snap;
	st->c = c;
	st->f = f;
	if (self)
		st->self = *self;
	st->t0_ns = t0_ns;
	plan_make(&st->pl, st->snap, c);
	if (!(st->shadowed = seg_shadowed(st->snap)) || st->pl.err)
		goto oom;
	if (!c->aggregate)
		st->skip = shadow_series(st->snap, st->shadowed);
	if (c->self_metrics)
		claim_self_names(&st->nm);
	if (!g && !(g = st->own = group_by_name(st)))
		goto oom;
	st->g = g;
	st->res.conflicts = g->conflicts;
	/* Only the items' places are needed from here on. */
	free(st->skip);
	st->skip = NULL;
	return st;
oom:
	ex_stream_close(st, NULL);
	return NULL;
}

/* Segment @seg of the snapshot, open; NULL when it cannot be opened
 * again, or is another file by now (its series are then left out, as
 * series removed since they were indexed). */
static struct tally_seg *seg_open(struct ex_stream *st, uint32_t seg)
{
	const struct tally_seg_info *was = &st->snap->segs[seg].info;
	struct tally_seg_info now;
	unsigned lru = 0;

	for (unsigned i = 0; i < NOPEN; i++) {
		if (st->open[i].g && st->open[i].seg == seg) {
			st->open[i].used = ++st->uses;
			return st->open[i].g;
		}
		if (st->open[i].used < st->open[lru].used)
			lru = i;
	}
	tally_seg_close(st->open[lru].g);
	st->open[lru].g = tally_seg_open(st->snap->segs[seg].path,
					 st->ix->open_opts);
	st->open[lru].seg = seg;
	st->open[lru].used = ++st->uses;
	if (st->open[lru].g &&
	    (tally_seg_info(st->open[lru].g, &now) < 0 || now.pid != was->pid ||
	     now.start_ticks != was->start_ticks ||
	     now.created_ns != was->created_ns)) {
		tally_seg_close(st->open[lru].g);
		st->open[lru].g = NULL;
	}
	return st->open[lru].g;
}

/* A series of the run being read again: written when it is one of the
 * run's places and still of the metric (a record may have been reused
 * by another series since). */
static int run_series(const struct tally_series_view *v, void *arg)
{
	struct ex_stream *st = arg;
	struct tp_series s;

	if (v->per_process || v->stateset)
		return 0; /* kept whole (index.h) */
	while (st->run_at < st->run_n && st->ids[st->run_at] != v->id)
		st->run_at++; /* removed since */
	if (st->run_at == st->run_n || strcmp(v->name, st->run_name))
		return 0;
	st->run_at++;
	ex_index_series(st->ix, st->run_seg, v, &s);
	write_series(st, st->run_out, &s);
	return 0;
}

/* The places of metric @fm from its next one on that are in one
 * segment, at most RUN, read again and written; returns how many. */
static size_t write_run(struct ex_stream *st, struct tp_buf *out,
			const struct fam *fm)
{
	const struct ex_index *ix = st->ix;
	uint32_t seg = ix->recs[ix->places[st->g->order[fm->first +
						     st->si]].rec].seg;
	struct tally_seg *g;
	size_t n = 0;

	while (n < RUN && st->si + n < fm->n) {
		const struct ex_place *p =
			&ix->places[st->g->order[fm->first + st->si + n]];

		if (p->rec >= EX_PLACE_GONE || ix->recs[p->rec].seg != seg)
			break;
		st->ids[n++] = p->id;
	}
	g = seg_open(st, seg);
	st->run_n = n;
	st->run_at = 0;
	st->run_seg = seg;
	st->run_name = fm->name;
	st->run_out = out;
	/* A segment found corrupt now: what it gave is written, the rest
	 * left out, as a snapshot leaves out a segment that cannot be
	 * read. */
	if (g)
		tally_seg_foreach_ids(g, 0, st->ids, n, run_series, st);
	return n;
}

/* The error a stream met (soft mode), its own or @out's; 0 if none. */
static int stream_err(const struct ex_stream *st, const struct tp_buf *out)
{
	return out->err ? out->err : st->lb.err ? st->lb.err : st->pl.err ?
	       st->pl.err : st->nm.err;
}

int ex_stream_fill(struct ex_stream *st, struct tp_buf *out, size_t want)
{
	int err;

	while (out->len < want && st->fi < st->g->nfams) {
		const struct fam *fm = &st->g->fams[st->fi];

		if (!st->in_fam && !metric_begin(st, out, fm))
			st->si = fm->n; /* its names clash: left out */
		st->in_fam = 1;
		while (st->si < fm->n && out->len < want) {
			const struct tp_series *s =
				item_series(st, st->g->order[fm->first + st->si]);

			if (!s) {
				st->si += write_run(st, out, fm);
				continue;
			}
			write_series(st, out, s);
			st->si++;
		}
		if (st->si == fm->n) {
			st->fi++;
			st->si = 0;
			st->in_fam = 0;
		}
		if ((err = stream_err(st, out)))
			return err;
	}
	if (out->len >= want)
		return 1;
	if (!st->done) {
		if (st->c->self_metrics)
			write_self(out, st->snap, st->f, &st->self, &st->res,
				   st->t0_ns, st->shadowed);
		if (st->f == EX_OPENMETRICS)
			tp_buf_puts(out, "# EOF\n");
		st->done = 1;
	}
	return stream_err(st, out);
}

void ex_stream_close(struct ex_stream *st, struct ex_result *res)
{
	if (!st)
		return;
	if (res)
		*res = st->res;
	for (unsigned i = 0; i < NOPEN; i++)
		tally_seg_close(st->open[i].g);
	tp_buf_free(&st->lb);
	plan_free(&st->pl);
	free(st->skip);
	free(st->shadowed);
	names_free(&st->nm);
	ex_group_free(st->own);
	free(st);
}

struct ex_group *ex_group_make(const struct ex_index *ix,
			       const struct ex_config *c)
{
	struct ex_stream *st = ex_stream_open(ix, NULL, c, EX_TEXT, NULL, 0);
	struct ex_group *g;

	if (!st)
		return NULL; /* soft mode */
	g = st->own;
	st->own = NULL;
	ex_stream_close(st, NULL);
	return g;
}

int ex_write(struct tp_buf *out, const struct tp_snapshot *snap,
	     const struct ex_config *c, enum ex_format f,
	     const struct ex_self *self, uint64_t t0_ns,
	     struct ex_result *res)
{
	struct ex_index ix;
	struct ex_stream *st;
	int rc;

	/* An index without places over the caller's snapshot, which it
	 * only borrows: not freed here. */
	memset(&ix, 0, sizeof(ix));
	ix.snap = *snap;
	if (!(st = ex_stream_open(&ix, NULL, c, f, self, t0_ns)))
		return -ENOMEM; /* soft mode */
	while ((rc = ex_stream_fill(st, out, SIZE_MAX)) > 0)
		;
	ex_stream_close(st, res);
	return rc;
}
