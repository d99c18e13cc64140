/*
 * pgauge.c: the series of per-process gauges (format 2.6,
 * TALLY__TYPE_PGAUGE), combined as their metric's combine mode says:
 * the one place that decides which processes' values a reader shows.
 *
 * Each series of such a metric is one process's value, labelled
 * pid="<pid>:<token>" by its writer.  The process runs while a process
 * holds the write lock of its token's byte in the file
 * (src/core/ptoken.c), which F_OFD_GETLK tells any reader, in any PID
 * namespace, with no pid involved: the pid is only shown.  A read lock
 * there says nothing, since any reader may take one.  Under the "live" modes the values of
 * processes that are gone are left out.  ALL and LIVEALL pass each value
 * on at once, with pid="<pid>"; the other modes gather the values of a
 * label set (the labels without pid) during the walk and pass one value
 * each at its end: sum, max, min, or the value set last.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/segment.h"
#include "tally/metrics.h"

void tally__groups_free(struct tally__pg *pg)
{
	if (!pg)
		return;
	for (size_t i = 0; i < pg->n; i++)
		free(pg->g[i].labels);
	free(pg->g);
	free(pg->slots);
	free(pg);
}

void tally__pg_free(struct tally_seg *s)
{
	tally__groups_free(s->pg);
	s->pg = NULL;
}

/* "<pid>:<token>": 0 with both, -1 when the value is not that. */
static int parse_pid(const char *v, long *pid, uint32_t *token)
{
	char *end;
	unsigned long t;

	errno = 0;
	*pid = strtol(v, &end, 10);
	if (end == v || *end != ':' || *pid < 0 || errno)
		return -1;
	v = end + 1;
	t = strtoul(v, &end, 10);
	if (end == v || *end || t == 0 || t > UINT32_MAX || errno)
		return -1;
	*token = (uint32_t)t;
	return 0;
}

static uint64_t hash_of(uint32_t metric, const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ metric;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static int grow(struct tally__pg *pg)
{
	size_t ns = pg->nslots ? pg->nslots * 2 : 64;
	uint32_t *slots = calloc(ns, sizeof(*slots));

	if (!slots)
		return -1;
	for (size_t i = 0; i < pg->n; i++) {
		const struct tally__group *g = &pg->g[i];
		size_t at = hash_of(g->metric, g->labels, g->len) & (ns - 1);

		while (slots[at])
			at = (at + 1) & (ns - 1);
		slots[at] = (uint32_t)i + 1;
	}
	free(pg->slots);
	pg->slots = slots;
	pg->nslots = ns;
	return 0;
}

struct tally__group *tally__group_get(struct tally__pg *pg, uint32_t metric,
			       const char *p, size_t n, uint32_t id)
{
	size_t at;
	struct tally__group *g;

	if (2 * (pg->n + 1) > pg->nslots && grow(pg) < 0)
		return NULL;
	at = hash_of(metric, p, n) & (pg->nslots - 1);
	for (; pg->slots[at]; at = (at + 1) & (pg->nslots - 1)) {
		g = &pg->g[pg->slots[at] - 1];
		if (g->metric == metric && g->len == n && !memcmp(g->labels, p, n))
			return g;
	}
	if (pg->n == pg->cap) {
		size_t cap = pg->cap ? 2 * pg->cap : 16;
		struct tally__group *ng = realloc(pg->g, cap * sizeof(*ng));

		if (!ng)
			return NULL;
		pg->g = ng;
		pg->cap = cap;
	}
	g = &pg->g[pg->n];
	memset(g, 0, sizeof(*g));
	if (!(g->labels = malloc(n ? n : 1)))
		return NULL;
	memcpy(g->labels, p, n);
	g->len = n;
	g->metric = metric;
	g->id = id;
	pg->slots[at] = (uint32_t)++pg->n;
	return g;
}

static void combine(struct tally__group *g, unsigned mode, double v, int64_t when)
{
	if (!g->nprocs++) {
		g->value = v;
		g->when = when;
		return;
	}
	switch (mode & ~1u) {
	case TALLY__COMBINE_SUM:
		g->value += v;
		break;
	case TALLY__COMBINE_MAX:
		if (v > g->value || g->value != g->value)
			g->value = v;
		break;
	case TALLY__COMBINE_MIN:
		if (v < g->value || g->value != g->value)
			g->value = v;
		break;
	default: /* MOSTRECENT */
		if (when > g->when) {
			g->value = v;
			g->when = when;
		}
	}
}

int tally__pg_take(struct tally_seg *s, struct tally_series_view *v,
		   const struct tally__metric_rec *f, double value,
		   int64_t when, tally_series_fn fn, void *arg, int *passed)
{
	unsigned mode = tally__metric_tail(f)->combine, at = v->nlabels;
	char text[TALLY__LABELS_PACKED_MAX], pidbuf[24];
	const char *names[TALLY__LABEL_PAIRS_MAX + 1];
	const char *values[TALLY__LABEL_PAIRS_MAX + 1];
	uint32_t token = 0;
	long pid = 0;
	size_t n = 0;
	struct tally__group *g;

	*passed = 0;
	for (unsigned i = 0; i < v->nlabels; i++)
		if (!strcmp(v->label_names[i], "pid"))
			at = i;
	if (at == v->nlabels || parse_pid(v->label_values[at], &pid, &token))
		return tally__seg_corrupt(s, "series %u: a per-process gauge "
					  "without a pid=\"<pid>:<token>\" "
					  "label", v->id);
	if (tally__combine_live(mode) &&
	    !tally__write_held(s->fd, TALLY__OWNER_LOCK_BYTE + token, 1))
		return 0; /* its process is gone */
	v->kind = TALLY_FGAUGE;
	v->fvalue = value;
	v->value = tally__f64_to_i64(value);
	v->per_process = 1;
	v->combine = mode;
	v->nprocs = 1;
	if (mode <= TALLY__COMBINE_LIVEALL) {
		unsigned k = 0;

		snprintf(pidbuf, sizeof(pidbuf), "%ld", pid);
		for (unsigned i = 0; i < v->nlabels; i++) {
			names[k] = v->label_names[i];
			values[k++] = i == at ? pidbuf : v->label_values[i];
		}
		v->label_names = names;
		v->label_values = values;
		*passed = 1;
		return fn(v, arg);
	}
	if (!s->pg && !(s->pg = calloc(1, sizeof(*s->pg))))
		return tally__seg_no_memory(s);
	n = tally__labels_pack(v, at, text);
	if (!(g = tally__group_get(s->pg, (uint32_t)(f - s->mrecs), text, n, v->id)))
		return tally__seg_no_memory(s);
	combine(g, mode, value, when);
	return 0;
}

size_t tally__labels_pack(const struct tally_series_view *v, unsigned skip,
			  char *text)
{
	size_t n = 0;

	for (unsigned i = 0; i < v->nlabels; i++) {
		size_t a = strlen(v->label_names[i]) + 1;
		size_t b = strlen(v->label_values[i]) + 1;

		if (i == skip)
			continue;
		memcpy(text + n, v->label_names[i], a);
		memcpy(text + n + a, v->label_values[i], b);
		n += a + b;
	}
	return n;
}

void tally__group_view(struct tally_seg *s, uint32_t metric, uint32_t id,
		       const char *labels, size_t len,
		       struct tally_series_view *v)
{
	const struct tally__metric_rec *f = &s->mrecs[metric];
	int nl = tally__labels_parse(labels, len, s->long_names,
				     s->long_values, TALLY__LABEL_PAIRS_MAX);

	memset(v, 0, sizeof(*v));
	v->id = id;
	v->kind = TALLY_FGAUGE;
	v->mode = f->mode;
	v->name = f->name;
	v->help = f->help;
	v->unit = f->unit;
	v->nlabels = nl < 0 ? 0 : (unsigned)nl;
	v->label_names = s->long_names;
	v->label_values = s->long_values;
}

int tally__pg_flush(struct tally_seg *s, tally_series_fn fn, void *arg,
		    int *count)
{
	struct tally__pg *pg = s->pg;
	int rc = 0;

	if (!pg)
		return 0;
	for (size_t i = 0; i < pg->n && !rc; i++) {
		const struct tally__group *g = &pg->g[i];
		const struct tally__metric_rec *f = &s->mrecs[g->metric];
		struct tally_series_view v;

		tally__group_view(s, g->metric, g->id, g->labels, g->len, &v);
		v.fvalue = g->value;
		v.value = tally__f64_to_i64(g->value);
		v.per_process = 1;
		v.combine = tally__metric_tail(f)->combine;
		v.nprocs = g->nprocs;
		rc = fn(&v, arg);
		if (!rc)
			(*count)++;
	}
	tally__pg_free(s);
	return rc;
}
