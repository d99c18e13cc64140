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
#include "strmap.h"

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
	struct tp_strmap procs;            /* "<pid>:<start>": alive (1) */
	const struct tp_collect_opts *o;
	size_t cap_series, cap_segs, cap_skipped;
	const struct tally_seg_info *info; /* the segment being walked */
	size_t first;                      /* its first series */
	size_t given;                      /* its series given to the sink */
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
	out = tp_arena_alloc(a, n * sizeof(char *));
	for (i = 0; i < n; i++)
		out[i] = share(a, names[i], like && i < like->nlabels ?
				    like->label_names[i] : NULL);
	return out;
}

/* The start time of process @pid, in clock ticks since boot (field 22 of
 * /proc/<pid>/stat), or 0 when it does not run. */
static unsigned long long proc_start(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The name may hold spaces and parentheses: fields start after
	 * the last ')'. */
	if (!(p = strrchr(buf, ')')))
		return 0;
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p && sscanf(p + 1, "%llu", &start) != 1)
		start = 0;
	return start;
}

/* Does the process of a per-process label value "<pid>:<start>" run? */
static int proc_alive(struct collect *c, const char *v)
{
	size_t at = tp_strmap_get(&c->procs, v);
	unsigned long long want;
	long pid;
	char *end;
	int alive;

	if (at != (size_t)-1)
		return (int)at;
	pid = strtol(v, &end, 10);
	want = strtoull(end + 1, NULL, 10);
	alive = pid > 0 && proc_start(pid) == want;
	tp_strmap_put(&c->procs, tp_arena_strdup(c->snap->arena, v),
		      (size_t)alive);
	return alive;
}

/* "<digits>:<digits>" */
static int is_pid_start(const char *v)
{
	const char *p = v;

	while (*p >= '0' && *p <= '9')
		p++;
	if (p == v || *p != ':' || !p[1])
		return 0;
	for (p++; *p >= '0' && *p <= '9'; p++)
		;
	return *p == '\0';
}

/* A per-process gauge series: TP_LIVE, TP_DEAD or TP_DEAD_KEPT, as its
 * own process runs or not (snapshot.h, "Whose a series is"); any other
 * series: its segment's verdict, @seg. */
static unsigned series_dead(struct collect *c,
			    const struct tally_series_view *v, unsigned seg)
{
	const char *mode = strstr(v->name, ":gauge_");

	if (!mode || !tp_kind_is_gauge(v->kind))
		return seg;
	mode += 7;
	for (unsigned i = 0; i < v->nlabels; i++) {
		if (strcmp(v->label_names[i], "pid") != 0 ||
		    !is_pid_start(v->label_values[i]))
			continue;
		if (proc_alive(c, v->label_values[i]))
			return TP_LIVE;
		return strncmp(mode, "live", 4) == 0 ? TP_DEAD : TP_DEAD_KEPT;
	}
	return seg;
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
 * fields series_cb() gives a kept one. */
static void give(struct collect *c, const struct tally_series_view *v)
{
	struct tp_series s = c->tmpl;

	tp_buf_reset(&c->key);
	tp_series_key_buf(&c->key, v->name, v->nlabels, v->label_names,
			  v->label_values);
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
	s.dead = series_dead(c, v, c->tmpl.dead);
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
	c->o->series_sink(&s, c->o->arg);
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
		give(c, v);
		return 0;
	}
	if (c->o->series_visit) {
		struct tp_series ident = c->tmpl;

		ident.dead = series_dead(c, v, c->tmpl.dead);
		c->o->series_visit(v, &ident, c->o->visit_arg);
		return 0;
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
	s->dead = series_dead(c, v, c->tmpl.dead);
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

static void add_skipped(struct collect *c, const char *path,
			const char *why, int err)
{
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
		c->cap_skipped = c->cap_skipped ? 2 * c->cap_skipped : 8;
		snap->skipped = tp_xrealloc(snap->skipped, c->cap_skipped *
					    sizeof(*snap->skipped));
	}
	snap->skipped[snap->nskipped].path = tp_xstrdup(path);
	snap->skipped[snap->nskipped].reason = tp_xstrdup(why);
	snap->skipped[snap->nskipped].err = err < 0 ? -err : err;
	snap->nskipped++;
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
		add_skipped(c, path, error, errno);
		return 0;
	}
	if ((rc = tally_seg_info(seg, &info)) < 0) {
		add_skipped(c, path, tally_errmsg()[0] ? tally_errmsg() :
						    strerror(-rc), rc);
		return 0;
	}
	if (c->o->seg_filter && !c->o->seg_filter(&info, c->o->arg))
		return 0;
	c->info = &info;
	c->first = snap->nseries;
	c->given = 0;
	memset(&c->tmpl, 0, sizeof(c->tmpl));
	c->tmpl.pid = info.pid;
	c->tmpl.start_ticks = info.start_ticks;
	c->tmpl.created_ns = info.created_ns;
	c->tmpl.nprocs = 1;
	c->tmpl.arena = 1;
	snprintf(c->tmpl.proc, sizeof(c->tmpl.proc), "%.15s", info.proc_name);
	snprintf(c->tmpl.zone, sizeof(c->tmpl.zone), "%.63s", info.zone_name);
	c->tmpl.dead = !info.alive && !info.in_use ? TP_DEAD : TP_LIVE;
	/* Room for the records the header announces: one realloc per
	 * segment at most, not a doubling series of them. */
	if (!c->o->series_visit && !c->o->series_sink &&
	    snap->nseries + info.series_used > c->cap_series &&
	    info.series_used < (1u << 24)) {
		c->cap_series = snap->nseries + info.series_used + 16;
		snap->series = tp_xrealloc(snap->series, c->cap_series *
					   sizeof(*snap->series));
	}
	if (c->o->series_visit && c->o->visit_seg_begin)
		c->o->visit_seg_begin(&info, c->o->visit_arg);
	rc = tally_seg_foreach(seg, c->o->read_flags, series_cb, c);
	if (rc < 0) {
		/* Corrupt half-way: drop what it gave (its arena memory stays
		 * until the snapshot is freed), name it, go on. */
		snap->nseries = c->first;
		add_skipped(c, path, tally_errmsg()[0] ? tally_errmsg() :
						    strerror(-rc), rc);
		if (c->o->visit_seg_end)
			c->o->visit_seg_end(0, c->o->visit_arg);
		if (c->o->sink_seg_end)
			c->o->sink_seg_end(NULL, c->o->arg);
		return 0;
	}
	if (c->o->visit_seg_end)
		c->o->visit_seg_end(1, c->o->visit_arg);
	if (snap->nsegs == c->cap_segs) {
		c->cap_segs = c->cap_segs ? 2 * c->cap_segs : 16;
		snap->segs = tp_xrealloc(snap->segs,
					 c->cap_segs * sizeof(*snap->segs));
	}
	g = &snap->segs[snap->nsegs++];
	memset(g, 0, sizeof(*g));
	g->path = tp_xstrdup(path);
	g->info = info;
	g->info.path = g->path;
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
	if (c->o->sink_seg_end)
		c->o->sink_seg_end(g, c->o->arg);
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

int tp_snapshot_collect(struct tp_snapshot *snap,
			const struct tp_collect_opts *opts, char *errbuf,
			size_t errlen)
{
	static const struct tp_collect_opts none;
	struct collect c = { .snap = snap, .o = opts ? opts : &none };
	int result = 0;
	unsigned n = c.o->ndirs;

	memset(snap, 0, sizeof(*snap));
	snap->arena = tp_xcalloc(1, sizeof(*snap->arena));
	snap->unsorted = c.o->order == TP_ORDER_READ;
	if (errbuf && errlen)
		errbuf[0] = '\0';
	clock_gettime(CLOCK_MONOTONIC, &snap->mono);
	clock_gettime(CLOCK_REALTIME, &snap->real);
	for (unsigned i = 0; i < (n ? n : 1); i++) {
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
	tp_strmap_free(&c.procs);
	if (snap->nseries > 1 && !snap->unsorted)
		qsort(snap->series, snap->nseries, sizeof(*snap->series),
		      cmp_series);
	return result;
}

void tp_series_copy_to(struct tp_arena *a, struct tp_series *d,
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
	if (s->nlabels) {
		d->label_names = share_names(a, s->nlabels,
					     (const char *const *)s->label_names,
					     like);
		d->label_values = tp_arena_alloc(a, s->nlabels * sizeof(char *));
		for (unsigned i = 0; i < s->nlabels; i++)
			d->label_values[i] = tp_arena_strdup(a,
							s->label_values[i]);
	}
	d->buckets = arena_i64(a, s->buckets, s->nbuckets);
	d->bounds = s->nbounds ? tp_arena_memdup(a, s->bounds, s->nbounds *
						 sizeof(double)) : NULL;
	d->percpu = arena_i64(a, s->percpu, s->npercpu);
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
