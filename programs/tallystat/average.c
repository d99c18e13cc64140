/*
 * programs/tallystat/average.c: the Average: rows, as sysstat prints them
 * at the end of a run and on SIGINT.
 *
 * Every interval's deltas are added up per series: counters and
 * histogram buckets give the rate and quantiles over the whole run (not
 * an average of averages), gauges the mean of the values read.  A series
 * that appeared late is averaged over the whole run, as sysstat does for
 * a device that appears.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "strbuf.h"
#include "strmap.h"
#include "tallystat.h"

struct acc {
	struct tp_series s;     /* summed deltas (counters, histograms);
				   first: a row's series is its acc */
	double gsum;            /* gauges: the sum of the values read */
	double *gcpu;           /* and of their per-CPU values */
	unsigned long nsamples;
	char *id;
};

struct ts_average {
	struct acc *a;
	size_t n, cap;
	/* The copies of the series and their ids: the average outlives
	 * the reads, and a series' neighbour shares its name, help, unit
	 * and label names. */
	struct tp_arena arena;
	struct tp_strmap map;
	double seconds;
	unsigned long intervals;
};

struct ts_average *ts_average_new(void)
{
	return tp_xcalloc(1, sizeof(struct ts_average));
}

static char *ident(const struct tp_series *s)
{
	struct tp_buf b = { 0 };

	if (s->pid == 0)        /* summed across processes (-a) */
		return tp_series_agg_key(s);
	tp_buf_printf(&b, "%d\x1f%llu\x1f%s\x1f%s\x1f%u\x1f%u", s->pid,
		      (unsigned long long)s->start_ticks, s->zone, s->key,
		      s->kind, s->nbuckets);
	return tp_buf_take(&b);
}

static void add_i64(int64_t *dst, const int64_t *src, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		dst[i] = (int64_t)((uint64_t)dst[i] + (uint64_t)src[i]);
}

void ts_average_add(struct ts_average *av, const struct tp_snapshot *d,
		    double seconds)
{
	av->seconds += seconds;
	av->intervals++;
	for (size_t i = 0; i < d->nseries; i++) {
		const struct tp_series *s = &d->series[i];
		int gauge = tp_kind_is_gauge(s->kind);
		char *id = ident(s);
		size_t at = tp_strmap_get(&av->map, id);
		struct acc *a;

		if (at == (size_t)-1) {
			if (av->n == av->cap) {
				/* The map points at the ids, not at the
				 * entries, so the array may move. */
				av->cap = av->cap ? 2 * av->cap : 64;
				av->a = tp_xrealloc(av->a, av->cap *
						    sizeof(*av->a));
			}
			a = &av->a[av->n];
			memset(a, 0, sizeof(*a));
			tp_series_copy_to(&av->arena, &a->s, s,
					  av->n ? &av->a[av->n - 1].s : NULL);
			/* Over the whole run every series has a rate. */
			a->s.flags &= ~TS_UNKNOWN;
			a->id = tp_arena_strdup(&av->arena, id);
			free(id);
			tp_strmap_put(&av->map, a->id, av->n++);
			if (gauge) {
				a->gsum = ts_gauge_value(s);
				a->gcpu = tp_xcalloc(s->npercpu + 1,
						     sizeof(double));
				for (unsigned c = 0; c < s->npercpu; c++)
					a->gcpu[c] = (double)s->percpu[c];
			}
			a->nsamples = 1;
			continue;
		}
		free(id);
		a = &av->a[at];
		a->s.flags |= s->flags & ~TS_UNKNOWN;
		a->s.dead = s->dead; /* as it was last seen */
		a->nsamples++;
		if (gauge) {
			a->gsum += ts_gauge_value(s);
			a->s.value = s->value;
			a->s.fvalue = s->fvalue;
			for (unsigned c = 0; c < s->npercpu &&
					     c < a->s.npercpu; c++)
				a->gcpu[c] += (double)s->percpu[c];
			continue;
		}
		a->s.value = (int64_t)((uint64_t)a->s.value +
				       (uint64_t)s->value);
		a->s.sum = (int64_t)((uint64_t)a->s.sum + (uint64_t)s->sum);
		a->s.fsum += s->fsum;
		if (s->nbuckets == a->s.nbuckets)
			add_i64(a->s.buckets, s->buckets, s->nbuckets);
		add_i64(a->s.percpu, s->percpu, s->npercpu < a->s.npercpu ?
				     s->npercpu : a->s.npercpu);
	}
}

unsigned long ts_average_intervals(const struct ts_average *av)
{
	return av->intervals;
}

void ts_report_average(struct ts_report *r, const struct ts_average *av,
		       const struct ts_options *o)
{
	size_t cap = 0;
	unsigned max = 0;

	memset(r, 0, sizeof(*r));
	r->kind = TS_AVERAGE;
	r->seconds = av->seconds;
	r->av = av;
	clock_gettime(CLOCK_REALTIME, &r->when);
	/* The CPU columns of -P ALL are those of every series summed,
	 * shown or not. */
	for (size_t i = 0; i < av->n; i++) {
		const struct tp_series *s = &av->a[i].s;

		if (s->npercpu > max)
			max = s->npercpu;
		if (!o->omit_idle || (s->flags & TS_CHANGED))
			ts_report_select(r, s, &cap, &max);
	}
	ts_report_choose_cpus(r, max, o);
}

void ts_average_row(const struct ts_report *r, const struct tp_series *s,
		    struct ts_row *row)
{
	/* The series of an Average: row is its sum's (struct acc). */
	const struct acc *a = (const struct acc *)s;

	/* Over the run a reset still has a rate: what was counted (a lower
	 * bound), flagged as reset. */
	if (row->reset && r->seconds > 0)
		row->rate = (double)row->value / r->seconds;
	if (!tp_kind_is_gauge(s->kind))
		return;
	row->mean_gauge = a->gsum / (double)a->nsamples;
	for (unsigned c = 0; c < row->ncpu; c++)
		if (!isnan(row->cpu[c]))
			row->cpu[c] = a->gcpu[r->cpu_ids[c]] /
				      (double)a->nsamples;
}

void ts_average_free(struct ts_average *av)
{
	if (!av)
		return;
	for (size_t i = 0; i < av->n; i++)
		free(av->a[i].gcpu);
	free(av->a);
	tp_arena_free(&av->arena);
	tp_strmap_free(&av->map);
	free(av);
}
