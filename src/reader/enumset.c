/*
 * enumset.c: the series of enum metrics (format 2.8, TALLY__TYPE_ENUM),
 * shown as which state is current: the one place that decides it.
 *
 * An enum has one series per state, whose labels hold one named as the
 * metric (the state).  Its value is a stamp: a writer makes a state
 * current by writing a number larger than every stamp of the states of
 * its label set (tally_enum_set), so stamps only grow and no two states
 * hold the same one but 0.  A reader takes no lock and reads the states
 * one after another, while writers change them; still the largest
 * stamp it finds is one state's, and one that was current while it
 * read.  So the series of an enum are gathered during a pass, grouped
 * by metric record and labels without the state, and passed on at its
 * end in the order they were found: 1 for the state of the largest
 * stamp above 0 (the first of them, should a writer have set two to
 * the same value with tally_fgauge_set), 0 for the others.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reader/segment.h"
#include "tally/metrics.h"

/* One state's series, as found. */
struct member {
	uint32_t id;              /* series record index */
	uint32_t group;           /* index in the groups */
	char *labels;             /* packed, all of them */
	size_t len;
};

struct tally__es {
	struct tally__pg *groups;
	struct member *m;
	size_t n, cap;
};

void tally__es_free(struct tally_seg *s)
{
	struct tally__es *es = s->es;

	if (!es)
		return;
	for (size_t i = 0; i < es->n; i++)
		free(es->m[i].labels);
	free(es->m);
	tally__groups_free(es->groups);
	free(es);
	s->es = NULL;
}

static struct member *member_new(struct tally__es *es)
{
	if (es->n == es->cap) {
		size_t cap = es->cap ? 2 * es->cap : 16;
		struct member *m = realloc(es->m, cap * sizeof(*m));

		if (!m)
			return NULL;
		es->m = m;
		es->cap = cap;
	}
	return &es->m[es->n];
}

int tally__es_take(struct tally_seg *s, const struct tally_series_view *v,
		   const struct tally__metric_rec *f)
{
	char text[TALLY__LABELS_PACKED_MAX];
	struct tally__es *es;
	struct tally__group *g;
	struct member *m;
	size_t n;
	unsigned at;
	double stamp = v->fvalue;

	if (!s->es && !(s->es = calloc(1, sizeof(*s->es))))
		return tally__seg_no_memory(s);
	es = s->es;
	if (!es->groups && !(es->groups = calloc(1, sizeof(*es->groups))))
		return tally__seg_no_memory(s);
	for (at = 0; at < v->nlabels; at++)
		if (!strcmp(v->label_names[at], f->name))
			break;
	n = tally__labels_pack(v, at, text);
	if (!(g = tally__group_get(es->groups, (uint32_t)(f - s->mrecs), text,
				   n, UINT32_MAX)) ||
	    !(m = member_new(es)))
		return tally__seg_no_memory(s);
	n = tally__labels_pack(v, v->nlabels, text);
	if (!(m->labels = malloc(n ? n : 1)))
		return tally__seg_no_memory(s);
	memcpy(m->labels, text, n);
	m->len = n;
	m->id = v->id;
	m->group = (uint32_t)(g - es->groups->g);
	es->n++;
	/* The first of the largest stamps above 0 (NaN is never above). */
	if (stamp > 0 && stamp > g->value) {
		g->value = stamp;
		g->id = v->id;
	}
	return 0;
}

int tally__es_flush(struct tally_seg *s, tally_series_fn fn, void *arg,
		    int *count)
{
	struct tally__es *es = s->es;
	int rc = 0;

	if (!es)
		return 0;
	for (size_t i = 0; i < es->n && !rc; i++) {
		const struct member *m = &es->m[i];
		const struct tally__group *g = &es->groups->g[m->group];
		struct tally_series_view v;

		tally__group_view(s, g->metric, m->id, m->labels, m->len, &v);
		v.fvalue = g->id == m->id ? 1.0 : 0.0;
		v.value = g->id == m->id;
		v.stateset = 1;
		rc = fn(&v, arg);
		if (!rc)
			(*count)++;
	}
	tally__es_free(s);
	return rc;
}
