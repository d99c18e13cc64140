/*
 * snap.c: a segment's series as the reader reports them, copied for the
 * tests to compare (snap.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "snap.h"

const double snap_qs[5] = { 0.5, 0.9, 0.99, 0.999, 1.0 };

static int64_t *copy_values(const int64_t *v, unsigned n)
{
	int64_t *p = malloc(n * sizeof(*p));

	CHECK(p != NULL);
	memcpy(p, v, n * sizeof(*p));
	return p;
}

int snap_cb(const struct tally_series_view *v, void *arg)
{
	struct snap *sn = arg;
	struct seen *e;
	size_t at = 0;

	if (sn->n == sn->cap) {
		sn->cap = sn->cap ? 2 * sn->cap : 16;
		sn->s = realloc(sn->s, (size_t)sn->cap * sizeof(*sn->s));
		CHECK(sn->s != NULL);
	}
	e = &sn->s[sn->n++];
	memset(e, 0, sizeof(*e));
	e->id = v->id;
	e->kind = v->kind;
	e->mode = v->mode;
	e->nlabels = v->nlabels;
	CHECK(v->name && v->help && v->unit);
	snprintf(e->name, sizeof(e->name), "%s", v->name);
	snprintf(e->help, sizeof(e->help), "%s", v->help);
	snprintf(e->unit, sizeof(e->unit), "%s", v->unit);
	for (unsigned i = 0; i < v->nlabels; i++)
		at += (size_t)snprintf(e->labels + at, sizeof(e->labels) - at,
				       "%s%s=%s", i ? "," : "",
				       v->label_names[i], v->label_values[i]);
	CHECK(at < sizeof(e->labels));
	e->value = v->value;
	e->fvalue = v->fvalue;
	e->sum = v->sum;
	e->npercpu = v->npercpu;
	if (v->npercpu) {
		uint64_t sum = 0; /* wraps like the reader's sums */

		e->percpu = copy_values(v->percpu, v->npercpu);
		for (unsigned c = 0; c < v->npercpu; c++)
			sum += (uint64_t)v->percpu[c];
		e->percpu_sum = (int64_t)sum;
	}
	e->nbuckets = v->nbuckets;
	e->sub_bits = v->sub_bits;
	e->max_bits = v->max_bits;
	if (v->kind == TALLY_HISTOGRAM) {
		CHECK(v->nbuckets > 0 && v->buckets);
		CHECK(v->nbuckets <= TALLY_BLOCK_MAX_SLOTS);
		e->buckets = copy_values(v->buckets, v->nbuckets);
		for (int i = 0; i < 5; i++) {
			e->qrc = tally_histogram_quantile(v, snap_qs[i], &e->q[i]);
			if (e->qrc)
				break;
		}
	} else {
		CHECK(v->nbuckets == 0 && v->buckets == NULL);
		CHECK_EQ(tally_histogram_quantile(v, 0.5, &e->q[0]), -EINVAL);
	}
	return 0;
}

void snap_free(struct snap *sn)
{
	for (int i = 0; i < sn->n; i++) {
		free(sn->s[i].percpu);
		free(sn->s[i].buckets);
	}
	free(sn->s);
	memset(sn, 0, sizeof(*sn));
}

struct snap read_seg(struct tally_seg *s, unsigned flags)
{
	struct snap sn = { 0, 0, NULL };
	int rc = tally_seg_foreach(s, flags, snap_cb, &sn);

	if (rc < 0)
		harness_fail(__FILE__, __LINE__, "tally_seg_foreach: %s",
			     tally_errmsg());
	CHECK_EQ(rc, sn.n);
	return sn;
}

struct snap read_path(const char *path, unsigned flags)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	struct snap sn;

	if (!s)
		harness_fail(__FILE__, __LINE__, "tally_seg_open: %s",
			     tally_errmsg());
	sn = read_seg(s, flags);
	tally_seg_close(s);
	return sn;
}

const struct seen *snap_find(const struct snap *sn, const char *name,
			     const char *labels)
{
	for (int i = 0; i < sn->n; i++)
		if (!strcmp(sn->s[i].name, name) &&
		    !strcmp(sn->s[i].labels, labels))
			return &sn->s[i];
	return NULL;
}
