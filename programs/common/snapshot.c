/*
 * programs/common/snapshot.c: reading every segment of some directories
 * into a struct tp_snapshot (snapshot.h), with the reader API only.
 */
#define _GNU_SOURCE
#include "snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "strbuf.h"

const char *const tp_skip_names[TP_NSKIP] = {
	"corrupt", "foreign", "version", "vanished", "symlink", "unreadable",
};

unsigned tp_skip_reason(int err)
{
	switch (err < 0 ? -err : err) {
	case EINVAL: return 0;
	case EPERM: return 1;
	case EPROTONOSUPPORT: return 2;
	case ENOENT: return 3;
	case ELOOP: return 4;
	default: return 5;
	}
}

struct collect {
	struct tp_snapshot *snap;
	const struct tp_collect_opts *o;
	size_t cap_series, cap_segs, cap_skipped;
	const struct tally_seg_info *info; /* the segment being walked */
	size_t first;                      /* its first series */
	size_t given;                      /* its series given to the sink */
	int err;                           /* what ended the read: -ENOMEM,
					      or a sink's error */
	struct tp_series tmpl;             /* what its series share */
	struct tp_buf key;                 /* scratch for keys */
};

static int64_t *dup_i64(const int64_t *v, unsigned n)
{
	int64_t *p;

	if (!n || !v)
		return NULL;
	p = tp_xmalloc(n * sizeof(*p));
	memcpy(p, v, n * sizeof(*p));
	return p;
}

static int64_t *arena_i64(struct tp_arena *a, const int64_t *v, unsigned n)
{
	if (!n || !v)
		return NULL;
	return tp_arena_memdup(a, v, n * sizeof(*v));
}

/* @s in the arena, or @same when it holds the same string already (the
 * neighbouring series of a family share their name, help and unit). */
static char *share(struct tp_arena *a, const char *s, char *same)
{
	if (!s)
		s = "";
	if (same && strcmp(same, s) == 0)
		return same;
	return tp_arena_strdup(a, s);
}

/* Label names: the neighbour's array when its names are the same. */
static char **share_names(struct tp_arena *a, unsigned n,
			  const char *const *names, const struct tp_series *like)
{
	char **out;
	unsigned i;

	if (like && like->nlabels == n) {
		for (i = 0; i < n; i++)
			if (strcmp(like->label_names[i], names[i]) != 0)
				break;
		if (i == n)
			return like->label_names;
	}
	if (!(out = tp_arena_alloc(a, n * sizeof(char *))))
		return NULL; /* soft mode */
	for (i = 0; i < n; i++)
		if (!(out[i] = share(a, names[i], like && i < like->nlabels ?
					  like->label_names[i] : NULL)))
			return NULL;
	return out;
}

void tp_series_of_segment(struct tp_series *s,
			  const struct tally_seg_info *info)
{
	memset(s, 0, sizeof(*s));
	s->pid = info->pid;
	s->start_ticks = info->start_ticks;
	s->created_ns = info->created_ns;
	s->nprocs = 1;
	snprintf(s->proc, sizeof(s->proc), "%.15s", info->proc_name);
	snprintf(s->zone, sizeof(s->zone), "%.63s", info->zone_name);
}

void tp_series_set_values(struct tp_series *s,
			  const struct tally_series_view *v)
{
	s->value = v->value;
	s->fvalue = v->fvalue;
	s->fractional = v->fractional;
	s->frac = v->frac;
	s->info = v->info;
	s->stateset = v->stateset;
	if (v->kind != TALLY_HISTOGRAM)
		return;
	s->sum = v->sum;
	s->sub_bits = v->sub_bits;
	s->max_bits = v->max_bits;
	s->nbuckets = v->nbuckets;
	s->classic = v->classic;
	s->summary = v->summary;
	s->nbounds = v->nbounds;
	s->fsum = v->fsum;
}

/* A series given to the sink: the reader's strings and arrays, with the
 * fields series_cb() gives a kept one.  Returns what the sink returns,
 * or -ENOMEM (soft mode) when its key did not fit. */
static int give(struct collect *c, const struct tally_series_view *v)
{
	struct tp_series s = c->tmpl;

	tp_buf_reset(&c->key);
	tp_series_key_buf(&c->key, v->name, v->nlabels, v->label_names,
			  v->label_values);
	if (c->key.err)
		return c->key.err;
	s.key = (char *)tp_buf_str(&c->key);
	s.name = (char *)v->name;
	s.help = (char *)v->help;
	s.unit = (char *)v->unit;
	s.kind = v->kind;
	s.mode = v->mode;
	s.nlabels = v->nlabels;
	if (v->nlabels) {
		/* Else NULL, as in a kept series (a copy keeps the pointers
		 * of an empty list). */
		s.label_names = (char **)v->label_names;
		s.label_values = (char **)v->label_values;
	}
	s.dead = c->tmpl.dead;
	tp_series_set_values(&s, v);
	if (v->kind == TALLY_HISTOGRAM) {
		s.buckets = (int64_t *)v->buckets;
		s.bounds = v->nbounds ? (double *)v->bounds : NULL;
	}
	if (v->percpu && v->npercpu) {
		s.npercpu = v->npercpu;
		s.percpu = (int64_t *)v->percpu;
	}
	c->given++;
	return c->o->series_sink(&s, v, c->o->sink_arg);
}

static int series_cb(const struct tally_series_view *v, void *arg)
{
	struct collect *c = arg;
	struct tp_snapshot *snap = c->snap;
	struct tp_arena *a = snap->arena;
	const struct tp_series *like;
	struct tp_series *s;

	if (c->o->series_filter && !c->o->series_filter(v, c->info, c->o->arg))
		return 0;
	if (c->o->series_sink) {
		/* Non-zero ends tally_seg_foreach(), which returns it. */
		c->err = give(c, v);
		return c->err;
	}
	if (snap->nseries == c->cap_series) {
		c->cap_series = c->cap_series ? 2 * c->cap_series : 256;
		snap->series = tp_xrealloc(snap->series,
					   c->cap_series * sizeof(*s));
	}
	like = snap->nseries > c->first ? &snap->series[snap->nseries - 1] :
					  NULL;
	s = &snap->series[snap->nseries++];
	*s = c->tmpl;
	tp_buf_reset(&c->key);
	tp_series_key_buf(&c->key, v->name, v->nlabels, v->label_names,
			  v->label_values);
	s->key = tp_arena_memdup(a, tp_buf_str(&c->key), c->key.len + 1);
	s->name = share(a, v->name, like ? like->name : NULL);
	s->help = share(a, v->help, like ? like->help : NULL);
	s->unit = share(a, v->unit, like ? like->unit : NULL);
	s->kind = v->kind;
	s->mode = v->mode;
	s->nlabels = v->nlabels;
	if (v->nlabels) {
		s->label_names = share_names(a, v->nlabels, v->label_names,
					     like);
		s->label_values = tp_arena_alloc(a, v->nlabels *
						 sizeof(char *));
		for (unsigned i = 0; i < v->nlabels; i++)
			s->label_values[i] = tp_arena_strdup(a,
							v->label_values[i]);
	}
	s->dead = c->tmpl.dead;
	tp_series_set_values(s, v);
	if (v->kind == TALLY_HISTOGRAM) {
		s->buckets = arena_i64(a, v->buckets, v->nbuckets);
		s->bounds = v->nbounds ? tp_arena_memdup(a, v->bounds,
				v->nbounds * sizeof(double)) : NULL;
	}
	if (v->percpu && v->npercpu) {
		s->npercpu = v->npercpu;
		s->percpu = arena_i64(a, v->percpu, v->npercpu);
	}
	return 0;
}

/* File @path named in snap->skipped; 0, or -ENOMEM (soft mode). */
static int add_skipped(struct collect *c, const char *path,
		       const char *why, int err)
{
	struct tp_skipped *sk;
	struct tp_snapshot *snap = c->snap;
	size_t plen = strlen(path);

	if (!why || !why[0])
		why = "cannot be read";
	/* The reader's messages start with the path: keep only the reason. */
	if (strncmp(why, path, plen) == 0) {
		why += plen;
		while (*why == ':' || *why == ' ')
			why++;
		if (!*why)
			why = "cannot be read";
	}
	if (snap->nskipped == c->cap_skipped) {
		size_t cap = c->cap_skipped ? 2 * c->cap_skipped : 8;

		if (tp_xresize(&snap->skipped, cap * sizeof(*snap->skipped)))
			return -ENOMEM;
		c->cap_skipped = cap;
	}
	sk = &snap->skipped[snap->nskipped];
	sk->path = tp_xstrdup(path);
	sk->reason = tp_xstrdup(why);
	sk->err = err < 0 ? -err : err;
	if (!sk->path || !sk->reason) {
		free(sk->path);
		free(sk->reason);
		return -ENOMEM;
	}
	snap->nskipped++;
	return 0;
}

/* Segment @path, whose series were read, added to snap->segs; NULL when
 * memory runs out (soft mode). */
static struct tp_segment *add_segment(struct collect *c, const char *path,
				      const struct tally_seg_info *info)
{
	struct tp_snapshot *snap = c->snap;
	struct tp_segment *g;

	if (snap->nsegs == c->cap_segs) {
		size_t cap = c->cap_segs ? 2 * c->cap_segs : 16;

		if (tp_xresize(&snap->segs, cap * sizeof(*snap->segs)))
			return NULL;
		c->cap_segs = cap;
	}
	g = &snap->segs[snap->nsegs];
	memset(g, 0, sizeof(*g));
	if (!(g->path = tp_xstrdup(path)))
		return NULL;
	snap->nsegs++;
	g->info = *info;
	g->info.path = g->path;
	return g;
}

/* The read ends on error @err (seg_cb()'s return: the walk stops). */
static int stop(struct collect *c, int err)
{
	c->err = err;
	return 1;
}

/* Does the reader's error @err end the read?  In soft mode (strbuf.h),
 * a segment the reader could not open or walk for want of memory is not
 * left out as if it were broken: the read fails as a whole, rather than
 * answer without its series (its counters would seem to vanish). */
static int ends_read(int err)
{
	return tp_soft() && (err == ENOMEM || err == -ENOMEM);
}

static int seg_cb(const char *path, struct tally_seg *seg, const char *error,
		  void *arg)
{
	struct collect *c = arg;
	struct tp_snapshot *snap = c->snap;
	struct tally_seg_info info;
	struct tp_segment *g;
	int rc;

	if (!seg) {
		/* tally_dir_foreach() calls us right after tally_seg_open()
		 * failed: errno is still its reason. */
		if (ends_read(errno))
			return stop(c, -ENOMEM);
		rc = add_skipped(c, path, error, errno);
		return rc < 0 ? stop(c, rc) : 0;
	}
	if ((rc = tally_seg_info(seg, &info)) < 0) {
		if (ends_read(rc))
			return stop(c, -ENOMEM);
		rc = add_skipped(c, path, tally_errmsg()[0] ? tally_errmsg() :
						    strerror(-rc), rc);
		return rc < 0 ? stop(c, rc) : 0;
	}
	if (c->o->seg_filter && !c->o->seg_filter(&info, c->o->arg))
		return 0;
	c->info = &info;
	c->first = snap->nseries;
	c->given = 0;
	tp_series_of_segment(&c->tmpl, &info);
	c->tmpl.arena = 1;
	c->tmpl.dead = !info.alive && !info.in_use ? TP_DEAD : TP_LIVE;
	/* Room for the records the header announces: one realloc per
	 * segment at most, not a doubling series of them. */
	if (!c->o->series_sink &&
	    snap->nseries + info.series_used > c->cap_series &&
	    info.series_used < (1u << 24)) {
		c->cap_series = snap->nseries + info.series_used + 16;
		snap->series = tp_xrealloc(snap->series, c->cap_series *
					   sizeof(*snap->series));
	}
	if (c->o->series_sink && c->o->sink_seg_begin)
		c->o->sink_seg_begin(&info, c->o->sink_arg);
	rc = tally_seg_foreach(seg, c->o->read_flags, series_cb, c);
	if (!c->err && ends_read(rc))
		c->err = -ENOMEM;
	if (c->err) {
		/* A sink failed: what the segment gave is forgotten. */
		if (c->o->sink_seg_end)
			c->o->sink_seg_end(NULL, c->o->sink_arg);
		return 1;
	}
	if (rc < 0) {
		/* Corrupt half-way: drop what it gave (its arena memory stays
		 * until the snapshot is freed), name it, go on. */
		snap->nseries = c->first;
		rc = add_skipped(c, path, tally_errmsg()[0] ? tally_errmsg() :
						    strerror(-rc), rc);
		if (c->o->sink_seg_end)
			c->o->sink_seg_end(NULL, c->o->sink_arg);
		return rc < 0 ? stop(c, rc) : 0;
	}
	if (!(g = add_segment(c, path, &info))) {
		if (c->o->sink_seg_end)
			c->o->sink_seg_end(NULL, c->o->sink_arg);
		return stop(c, -ENOMEM);
	}
	g->nseries = (unsigned)(c->o->series_sink ? c->given :
				snap->nseries - c->first);
	{
		const char *msg = "";
		int n = tally_seg_skipped(seg, &msg);
		size_t plen = strlen(path);

		/* The reader's messages start with the path. */
		if (strncmp(msg, path, plen) == 0)
			for (msg += plen; *msg == ':' || *msg == ' '; msg++)
				;
		g->records_skipped = n > 0 ? (unsigned)n : 0;
		snprintf(g->records_msg, sizeof(g->records_msg), "%s",
			 n > 0 ? msg : "");
	}
	if (c->o->sink_seg_end && (rc = c->o->sink_seg_end(g, c->o->sink_arg)))
		return stop(c, rc);
	return 0;
}

int tp_series_cmp(const struct tp_series *a, const struct tp_series *b)
{
	int r;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->start_ticks != b->start_ticks)
		return a->start_ticks < b->start_ticks ? -1 : 1;
	if ((r = strcmp(a->zone, b->zone)) != 0)
		return r;
	if ((r = strverscmp(a->key, b->key)) != 0)
		return r;
	return (int)a->kind - (int)b->kind;
}

static int cmp_series(const void *a, const void *b)
{
	return tp_series_cmp(a, b);
}

/* A read that ran out of memory (soft mode): -ENOMEM, and @errbuf says so. */
static int oom(char *errbuf, size_t errlen)
{
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "out of memory");
	return -ENOMEM;
}

int tp_snapshot_collect(struct tp_snapshot *snap,
			const struct tp_collect_opts *opts, char *errbuf,
			size_t errlen)
{
	static const struct tp_collect_opts none;
	struct collect c = { .snap = snap, .o = opts ? opts : &none };
	int result = 0;
	unsigned n = c.o->ndirs;

	memset(snap, 0, sizeof(*snap));
	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!(snap->arena = tp_xcalloc(1, sizeof(*snap->arena))))
		return oom(errbuf, errlen); /* soft mode */
	snap->unsorted = c.o->order == TP_ORDER_READ;
	clock_gettime(CLOCK_MONOTONIC, &snap->mono);
	clock_gettime(CLOCK_REALTIME, &snap->real);
	/* An error that ended the read ends it for every directory. */
	for (unsigned i = 0; i < (n ? n : 1) && !c.err; i++) {
		const char *dir = n ? c.o->dirs[i] : NULL;
		int rc = tally_dir_foreach(dir, c.o->open_opts, seg_cb, &c);

		if (rc < 0 && !result) {
			result = rc;
			if (errbuf && errlen)
				snprintf(errbuf, errlen, "%s", tally_errmsg()[0]
					 ? tally_errmsg() : strerror(-rc));
		}
	}
	tp_buf_free(&c.key);
	if (c.err == -ENOMEM)
		return oom(errbuf, errlen);
	if (c.err)
		return c.err;
	if (snap->nseries > 1 && !snap->unsorted)
		qsort(snap->series, snap->nseries, sizeof(*snap->series),
		      cmp_series);
	return result;
}

int tp_series_copy_to(struct tp_arena *a, struct tp_series *d,
		      const struct tp_series *s, const struct tp_series *like)
{
	*d = *s;
	d->arena = 1;
	d->key = tp_arena_strdup(a, s->key);
	d->name = share(a, s->name, like ? like->name : NULL);
	d->help = share(a, s->help, like ? like->help : NULL);
	d->unit = share(a, s->unit, like ? like->unit : NULL);
	d->pids = s->pids ? tp_arena_memdup(a, s->pids, s->nprocs *
					    sizeof(int)) : NULL;
	if (!d->key || !d->name || !d->help || !d->unit ||
	    (s->pids && !d->pids))
		return -ENOMEM; /* soft mode */
	if (s->nlabels) {
		d->label_names = share_names(a, s->nlabels,
					     (const char *const *)s->label_names,
					     like);
		d->label_values = tp_arena_alloc(a, s->nlabels * sizeof(char *));
		if (!d->label_names || !d->label_values)
			return -ENOMEM;
		for (unsigned i = 0; i < s->nlabels; i++)
			if (!(d->label_values[i] = tp_arena_strdup(a,
							s->label_values[i])))
				return -ENOMEM;
	}
	d->buckets = arena_i64(a, s->buckets, s->nbuckets);
	d->bounds = s->nbounds ? tp_arena_memdup(a, s->bounds, s->nbounds *
						 sizeof(double)) : NULL;
	d->percpu = arena_i64(a, s->percpu, s->npercpu);
	if ((s->buckets && s->nbuckets && !d->buckets) ||
	    (s->nbounds && !d->bounds) ||
	    (s->percpu && s->npercpu && !d->percpu))
		return -ENOMEM;
	return 0;
}

void tp_series_copy(struct tp_series *d, const struct tp_series *s)
{
	*d = *s;
	d->arena = 0;
	d->key = tp_xstrdup(s->key);
	d->name = tp_xstrdup(s->name);
	d->help = tp_xstrdup(s->help);
	d->unit = tp_xstrdup(s->unit);
	if (s->pids) {
		d->pids = tp_xmalloc(s->nprocs * sizeof(int));
		memcpy(d->pids, s->pids, s->nprocs * sizeof(int));
	}
	if (s->nlabels) {
		d->label_names = tp_xcalloc(s->nlabels, sizeof(char *));
		d->label_values = tp_xcalloc(s->nlabels, sizeof(char *));
		for (unsigned i = 0; i < s->nlabels; i++) {
			d->label_names[i] = tp_xstrdup(s->label_names[i]);
			d->label_values[i] = tp_xstrdup(s->label_values[i]);
		}
	}
	d->buckets = dup_i64(s->buckets, s->nbuckets);
	d->bounds = NULL;
	if (s->nbounds) {
		d->bounds = tp_xmalloc(s->nbounds * sizeof(double));
		memcpy(d->bounds, s->bounds, s->nbounds * sizeof(double));
	}
	d->percpu = dup_i64(s->percpu, s->npercpu);
}

void tp_series_free(struct tp_series *s)
{
	if (s->arena) {
		memset(s, 0, sizeof(*s));
		return;
	}
	free(s->key);
	free(s->name);
	free(s->help);
	free(s->unit);
	free(s->pids);
	for (unsigned i = 0; i < s->nlabels; i++) {
		free(s->label_names[i]);
		free(s->label_values[i]);
	}
	free(s->label_names);
	free(s->label_values);
	free(s->buckets);
	free(s->bounds);
	free(s->percpu);
	memset(s, 0, sizeof(*s));
}

void tp_snapshot_free(struct tp_snapshot *snap)
{
	for (size_t i = 0; i < snap->nseries; i++)
		if (!snap->series[i].arena)
			tp_series_free(&snap->series[i]);
	free(snap->series);
	for (size_t i = 0; i < snap->nsegs; i++)
		free(snap->segs[i].path);
	free(snap->segs);
	for (size_t i = 0; i < snap->nskipped; i++) {
		free(snap->skipped[i].path);
		free(snap->skipped[i].reason);
	}
	free(snap->skipped);
	if (snap->arena) {
		tp_arena_free(snap->arena);
		free(snap->arena);
	}
	memset(snap, 0, sizeof(*snap));
}
