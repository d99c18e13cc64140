/*
 * programs/tallystat/report.c: the rows of a report, from a snapshot
 * (since start) or a snapshot of deltas (an interval): rates, histogram
 * quantiles over the buckets given, per-CPU columns, and the processes
 * that appeared or exited.  A report keeps its series only; each row is
 * made when a back end prints it (ts_report_row), twice for text (the
 * widths, then the lines), so that no report holds a row a series.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "tallystat.h"

const struct ts_quantile ts_quantiles[TS_NQ] = {
	{ 0.5, "p50", "p50" },
	{ 0.99, "p99", "p99" },
	{ 0.999, "p99.9", "p999" },
	{ 1.0, "Max<=", "max" },
};

void ts_row_histogram(struct ts_row *row, const struct tp_series *s)
{
	struct tally_series_view v;

	memset(&v, 0, sizeof(v));
	v.kind = TALLY_HISTOGRAM;
	v.name = s->name;
	v.value = s->value;
	v.sum = s->sum;
	v.sub_bits = s->sub_bits;
	v.max_bits = s->max_bits;
	v.nbuckets = s->nbuckets;
	v.buckets = s->buckets;
	v.classic = s->classic;
	v.nbounds = s->nbounds;
	v.bounds = s->bounds;
	row->sum = s->sum;
	row->fsum = s->classic ? s->fsum : (double)s->sum;
	row->have_q = 0;
	if (s->value <= 0 || !s->buckets)
		return;
	if (s->summary) {
		/* A summary (format 2.7) has a mean, and no quantiles. */
		for (int i = 0; i < TS_NQ; i++)
			row->q[i] = NAN;
		row->mean = row->fsum / (double)s->value;
		row->have_q = 1;
		return;
	}
	for (int i = 0; i < TS_NQ; i++)
		if (tally_histogram_quantile(&v, ts_quantiles[i].q,
					     &row->q[i]) < 0)
			return;
	row->mean = row->fsum / (double)s->value;
	row->have_q = 1;
}

/* Which CPUs get a column: -P ALL every CPU the series have (@max: the
 * most per-CPU values of one), else the list's. */
static void choose_cpus(struct ts_report *r, unsigned max,
			const struct ts_options *o)
{
	r->ncpus = 0;
	r->cpu_ids = NULL;
	if (!o->percpu)
		return;
	r->cpu_ids = tp_xcalloc(o->allcpus ? max + 1 : TS_MAX_CPUS,
				sizeof(unsigned));
	for (unsigned c = 0; c < (o->allcpus ? max : TS_MAX_CPUS); c++)
		if (o->allcpus || o->cpus[c])
			r->cpu_ids[r->ncpus++] = c;
}

static unsigned max_percpu(const struct tp_snapshot *snap)
{
	unsigned max = 0;

	for (size_t i = 0; i < snap->nseries; i++)
		if (snap->series[i].npercpu > max)
			max = snap->series[i].npercpu;
	return max;
}

/* Per-CPU values of @s: divided by @seconds for counters and histograms
 * (rates), as they are for gauges; NAN where @s has no such CPU. */
static void fill_cpus(const struct ts_report *r, struct ts_row *row,
		      const struct tp_series *s, double seconds)
{
	row->ncpu = r->ncpus;
	if (!r->ncpus)
		return;
	row->cpu = tp_xcalloc(r->ncpus, sizeof(double));
	for (unsigned i = 0; i < r->ncpus; i++) {
		unsigned c = r->cpu_ids[i];

		if (c >= s->npercpu || (s->flags & TS_UNKNOWN))
			row->cpu[i] = NAN;
		else if (tp_kind_is_gauge(s->kind))
			row->cpu[i] = (double)s->percpu[c];
		else
			row->cpu[i] = seconds > 0 ?
				      (double)s->percpu[c] / seconds : NAN;
	}
}

static void select_series(struct ts_report *r, const struct tp_series *s,
			  size_t *cap)
{
	if (r->nrows == *cap) {
		*cap = *cap ? 2 * *cap : 64;
		r->sel = tp_xrealloc(r->sel, *cap * sizeof(*r->sel));
	}
	r->sel[r->nrows++] = s;
}

void ts_report_since_start(struct ts_report *r, const struct tp_snapshot *cur,
			   const struct ts_options *o)
{
	size_t cap = 0;

	memset(r, 0, sizeof(*r));
	r->kind = TS_SINCE_START;
	r->when = cur->real;
	choose_cpus(r, max_percpu(cur), o);
	for (size_t i = 0; i < cur->nseries; i++)
		if (!o->omit_idle || cur->series[i].value != 0)
			select_series(r, &cur->series[i], &cap);
}

/* A row since start: rates are averages over the zone's life. */
static void since_start_row(const struct ts_report *r,
			    const struct tp_series *s, struct ts_row *row)
{
	uint64_t now = (uint64_t)r->when.tv_sec * 1000000000u +
		       (uint64_t)r->when.tv_nsec;
	double age = now > s->created_ns ?
		     (double)(now - s->created_ns) / 1e9 : 0;

	row->s = s;
	row->value = row->total = s->value;
	row->rate = NAN;
	if (!tp_kind_is_gauge(s->kind) && age > 0)
		row->rate = (double)s->value / age;
	if (s->kind == TALLY_HISTOGRAM)
		ts_row_histogram(row, s);
	fill_cpus(r, row, s, age);
}

void ts_report_interval(struct ts_report *r, const struct tp_snapshot *d,
			double seconds, const struct ts_options *o)
{
	size_t cap = 0;

	memset(r, 0, sizeof(*r));
	r->kind = TS_INTERVAL;
	r->when = d->real;
	r->seconds = seconds;
	choose_cpus(r, max_percpu(d), o);
	for (size_t i = 0; i < d->nseries; i++)
		if (!o->omit_idle || (d->series[i].flags & TS_CHANGED))
			select_series(r, &d->series[i], &cap);
}

void ts_report_select(struct ts_report *r, const struct tp_series *s,
		      size_t *cap, unsigned *max)
{
	select_series(r, s, cap);
	if (s->npercpu > *max)
		*max = s->npercpu;
}

void ts_report_choose_cpus(struct ts_report *r, unsigned max,
			   const struct ts_options *o)
{
	choose_cpus(r, max, o);
}

/* A row of an interval, or of the whole run (TS_AVERAGE). */
static void interval_row(const struct ts_report *r, const struct tp_series *s,
			 struct ts_row *row)
{
	double seconds = r->seconds;

	row->s = s;
	row->value = s->value;
	row->reset = !!(s->flags & TP_SERIES_RESET);
	row->rate = NAN;
	/* A reset has no rate: the value counted since the reset is a lower
	 * bound of the increase. */
	if (!tp_kind_is_gauge(s->kind) && !(s->flags & TS_UNKNOWN) &&
	    !row->reset && seconds > 0)
		row->rate = (double)s->value / seconds;
	if (s->kind == TALLY_HISTOGRAM)
		ts_row_histogram(row, s);
	fill_cpus(r, row, s, seconds);
}

void ts_report_row(const struct ts_report *r, size_t i, struct ts_row *row)
{
	ts_report_row_of(r, r->sel[i], row);
}

void ts_report_row_of(const struct ts_report *r, const struct tp_series *s,
		      struct ts_row *row)
{
	memset(row, 0, sizeof(*row));
	if (r->kind == TS_SINCE_START) {
		since_start_row(r, s, row);
		return;
	}
	interval_row(r, s, row);
	/* A compact read's sums are not struct acc: the iterator adds
	 * theirs (ts_caverage_row). */
	if (r->kind == TS_AVERAGE && !r->cp)
		ts_average_row(r, s, row);
}

void ts_row_free(struct ts_row *row)
{
	free(row->cpu);
	row->cpu = NULL;
}

/* The same segment: its path is unique (pids are not: several PID
 * namespaces may share a directory, each with its pid 1). */
static int same_process(const struct tally_seg_info *a,
			const struct tally_seg_info *b)
{
	return a->pid == b->pid && a->start_ticks == b->start_ticks &&
	       strcmp(a->zone_name, b->zone_name) == 0 &&
	       (!a->path || !b->path || strcmp(a->path, b->path) == 0);
}

static void add_event(struct ts_report *r, int started,
		      const struct tp_segment *g)
{
	struct ts_event *e;

	r->events = tp_xrealloc(r->events, (r->nevents + 1) * sizeof(*e));
	e = &r->events[r->nevents++];
	e->started = started;
	e->pid = g->info.pid;
	snprintf(e->proc, sizeof(e->proc), "%.15s", g->info.proc_name);
	snprintf(e->zone, sizeof(e->zone), "%.63s", g->info.zone_name);
	e->path = g->path;
}

void ts_report_events(struct ts_report *r, const struct tp_snapshot *prev,
		      const struct tp_snapshot *cur)
{
	/* Segments are few: quadratic is fine. */
	for (size_t i = 0; i < cur->nsegs; i++) {
		const struct tp_segment *g = &cur->segs[i];
		const struct tp_segment *p = NULL;

		for (size_t j = 0; j < prev->nsegs && !p; j++)
			if (same_process(&prev->segs[j].info, &g->info))
				p = &prev->segs[j];
		if (!p && g->info.alive)
			add_event(r, 1, g);
		else if (p && p->info.alive && !g->info.alive)
			add_event(r, 0, g);
	}
	for (size_t j = 0; j < prev->nsegs; j++) {
		const struct tp_segment *p = &prev->segs[j];
		int found = 0;

		for (size_t i = 0; i < cur->nsegs && !found; i++)
			found = same_process(&p->info, &cur->segs[i].info);
		/* Its file went away: it exited (or was cleaned). */
		if (!found && p->info.alive)
			add_event(r, 0, p);
	}
}

void ts_report_free(struct ts_report *r)
{
	free(r->sel);
	free(r->events);
	free(r->cpu_ids);
	memset(r, 0, sizeof(*r));
}
