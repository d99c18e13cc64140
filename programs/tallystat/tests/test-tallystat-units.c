/*
 * test-tallystat-units.c: tallystat's parsers and formatters, and the
 * arithmetic of its reports (deltas, resets, sums across processes,
 * quantiles over bucket deltas), on snapshots built in memory.
 *
 *   test-tallystat-units [TEST...]     every test, or those named
 *   (test/harness.h: each in a child process, with a time limit)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "format.h"
#include "match.h"
#include "snapshot.h"
#include "strbuf.h"
#include "tallystat.h"
#include "harness.h"

TEST(cpulist)
{
	unsigned char c[TS_MAX_CPUS];
	char err[256];

	CHECK(ts_parse_cpulist("0,2-3", c, err, sizeof(err)) == 0);
	CHECK(c[0] && !c[1] && c[2] && c[3] && !c[4]);
	CHECK(ts_parse_cpulist("7", c, err, sizeof(err)) == 0 && c[7] &&
	      !c[0]);
	CHECK(ts_parse_cpulist("", c, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_cpulist("3-1", c, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_cpulist("1,", c, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_cpulist("a", c, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_cpulist("1-", c, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_cpulist("99999", c, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "99999") != NULL);
}

TEST(interval_count_pids)
{
	char err[256];
	double d;
	unsigned long n;
	int *pids = NULL;
	unsigned np = 0;

	CHECK(ts_parse_interval("1", &d, err, sizeof(err)) == 0 && d == 1);
	CHECK(ts_parse_interval("0.5", &d, err, sizeof(err)) == 0 && d == 0.5);
	CHECK(ts_parse_interval("0", &d, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_interval("-1", &d, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_interval("1x", &d, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_interval("nan", &d, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_count("3", &n, err, sizeof(err)) == 0 && n == 3);
	CHECK(ts_parse_count("0", &n, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_count("2.5", &n, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_pids("12,34", &pids, &np, err, sizeof(err)) == 0);
	CHECK(np == 2 && pids[0] == 12 && pids[1] == 34);
	CHECK(ts_parse_pids("12,", &pids, &np, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_pids("0", &pids, &np, err, sizeof(err)) == -EINVAL);
	CHECK(ts_parse_pids("ALL", &pids, &np, err, sizeof(err)) == 0 &&
	      np == 0);
	free(pids);
}

TEST(display)
{
	char *k;

	k = ts_truncate("abcdefghij", 5);
	CHECK_STR(k, "abcd\xe2\x80\xa6");
	CHECK(ts_display_width(k) == 5);
	free(k);
	k = ts_truncate("abc", 5);
	CHECK_STR(k, "abc");
	free(k);
	CHECK(ts_display_width("q=\"\xc3\xa9t\xc3\xa9\"") == 7);
}

/* A series of process @pid in memory. */
static void mk(struct tp_series *s, int pid, const char *key,
	       unsigned kind, int64_t value)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->start_ticks = 100 + (uint64_t)pid;
	s->nprocs = 1;
	snprintf(s->proc, sizeof(s->proc), "w");
	snprintf(s->zone, sizeof(s->zone), "w");
	s->key = tp_xstrdup(key);
	s->name = tp_xstrdup(key);
	s->help = tp_xstrdup("");
	s->unit = tp_xstrdup("");
	s->kind = kind;
	s->value = value;
}

static void mk_hist(struct tp_series *s, int pid, const uint64_t *obs,
		    const unsigned *times, unsigned n)
{
	mk(s, pid, "h", TALLY_HISTOGRAM, 0);
	s->sub_bits = 3;
	s->max_bits = 40;
	s->nbuckets = tally_histogram_bucket(~0ull, 3, 40) + 1;
	s->buckets = tp_xcalloc(s->nbuckets, sizeof(int64_t));
	for (unsigned i = 0; i < n; i++) {
		s->buckets[tally_histogram_bucket(obs[i], 3, 40)] += times[i];
		s->value += times[i];
		s->sum += (int64_t)(obs[i] * times[i]);
	}
}

static void snap_of(struct tp_snapshot *snap, struct tp_series *s, size_t n,
		    long sec)
{
	memset(snap, 0, sizeof(*snap));
	snap->series = tp_xcalloc(n, sizeof(*s));
	memcpy(snap->series, s, n * sizeof(*s));
	snap->nseries = n;
	snap->real.tv_sec = sec;
	snap->mono.tv_sec = sec;
	/* Both processes' zones exist in every snapshot. */
	snap->segs = tp_xcalloc(2, sizeof(*snap->segs));
	for (int i = 0; i < 2; i++) {
		snap->segs[i].path = tp_xstrdup("x");
		snap->segs[i].info.pid = i + 1;
		snap->segs[i].info.start_ticks = 101 + (uint64_t)i;
		snprintf(snap->segs[i].info.zone_name,
			 sizeof(snap->segs[i].info.zone_name), "w");
	}
	snap->nsegs = 2;
}

static const struct tp_series *find(const struct tp_snapshot *s, int pid,
				    const char *key)
{
	for (size_t i = 0; i < s->nseries; i++)
		if (s->series[i].pid == pid && !strcmp(s->series[i].key, key))
			return &s->series[i];
	return NULL;
}

TEST(delta_reset_new)
{
	struct tp_series a[3], b[4];
	struct tp_snapshot p, c, d, agg;
	const struct tp_series *x;

	mk(&a[0], 1, "c", TALLY_COUNTER, 100);
	mk(&a[1], 1, "g", TALLY_GAUGE, 5);
	mk(&a[2], 2, "c", TALLY_COUNTER, 50);
	mk(&b[0], 1, "c", TALLY_COUNTER, 30);   /* went down: a reset */
	mk(&b[1], 1, "g", TALLY_GAUGE, 5);      /* unchanged gauge */
	mk(&b[2], 2, "c", TALLY_COUNTER, 80);   /* +30 */
	mk(&b[3], 2, "n", TALLY_COUNTER, 9);    /* registered since */
	snap_of(&p, a, 3, 10);
	snap_of(&c, b, 4, 11);
	ts_delta(&p, &c, &d);
	CHECK(d.nseries == 4);
	x = find(&d, 1, "c");
	CHECK(x && (x->flags & TP_SERIES_RESET) && x->value == 30);
	x = find(&d, 1, "g");
	CHECK(x && x->value == 5 && !(x->flags & TS_CHANGED));
	x = find(&d, 2, "c");
	CHECK(x && x->value == 30 && !(x->flags & TP_SERIES_RESET) &&
	      (x->flags & TS_CHANGED));
	x = find(&d, 2, "n");
	CHECK(x && x->value == 9 && (x->flags & TP_SERIES_NEW) &&
	      !(x->flags & TS_UNKNOWN));

	/* Summed across processes: deltas add, a reset stays a reset. */
	tp_snapshot_aggregate(&d, &agg);
	x = find(&agg, 0, "c");
	CHECK(x && x->value == 60 && x->nprocs == 2 &&
	      (x->flags & TP_SERIES_RESET));
	tp_snapshot_free(&agg);
	tp_snapshot_free(&d);
	tp_snapshot_free(&p);
	tp_snapshot_free(&c);
}

TEST(quantiles_of_deltas)
{
	static const uint64_t o1[] = { 1000 }, o2[] = { 1000, 5000, 200000 };
	static const unsigned t1[] = { 100000 }, t2[] = { 100000, 980, 20 };
	struct tp_series a, b;
	struct tp_snapshot p, c, d;
	struct ts_row row;
	uint64_t lo, hi;

	mk_hist(&a, 1, o1, t1, 1);
	mk_hist(&b, 1, o2, t2, 3);
	snap_of(&p, &a, 1, 10);
	snap_of(&c, &b, 1, 11);
	ts_delta(&p, &c, &d);
	CHECK(d.nseries == 1 && d.series[0].value == 1000);
	memset(&row, 0, sizeof(row));
	ts_row_histogram(&row, &d.series[0]);
	CHECK(row.have_q);
	tally_histogram_bucket_bounds(tally_histogram_bucket(5000, 3, 40), 3,
				      &lo, &hi);
	CHECK(row.q[0] >= (double)lo && row.q[0] <= (double)hi);
	tally_histogram_bucket_bounds(tally_histogram_bucket(200000, 3, 40), 3,
				      &lo, &hi);
	CHECK(row.q[1] >= (double)lo && row.q[1] <= (double)hi);
	CHECK(row.q[3] >= (double)lo && row.q[3] <= (double)hi);
	CHECK(fabs(row.mean - (980 * 5000.0 + 20 * 200000.0) / 1000) < 1e-6);
	/* Since start, the same histogram's median is 1000's bucket. */
	ts_row_histogram(&row, &c.series[0]);
	tally_histogram_bucket_bounds(tally_histogram_bucket(1000, 3, 40), 3,
				      &lo, &hi);
	CHECK(row.q[0] >= (double)lo && row.q[0] <= (double)hi);
	tp_snapshot_free(&d);
	tp_snapshot_free(&p);
	tp_snapshot_free(&c);
}

/*
 * A histogram whose count rises while one bucket falls was zeroed (or its
 * process restarted) between the reads: the count alone does not show it.
 * The delta is a reset, never a negative bucket delta (which would give
 * negative quantile weights and a nonsense p50).
 */
TEST(delta_histogram_bucket_falls)
{
	static const uint64_t o1[] = { 1000 }, o2[] = { 5000 };
	static const unsigned t1[] = { 100 }, t2[] = { 150 };
	struct tp_series a, b;
	struct tp_snapshot p, c, d;
	const struct tp_series *x;

	mk_hist(&a, 1, o1, t1, 1);
	mk_hist(&b, 1, o2, t2, 1);
	CHECK(a.value == 100 && b.value == 150);
	CHECK(b.buckets[tally_histogram_bucket(1000, 3, 40)] == 0);
	snap_of(&p, &a, 1, 10);
	snap_of(&c, &b, 1, 11);
	ts_delta(&p, &c, &d);
	x = find(&d, 1, "h");
	CHECK(x && (x->flags & TP_SERIES_RESET));
	/* The values counted since the reset: the current ones. */
	CHECK(x && x->value == 150);
	for (unsigned i = 0; x && i < x->nbuckets; i++)
		CHECK(x->buckets[i] >= 0);
	tp_snapshot_free(&d);
	tp_snapshot_free(&p);
	tp_snapshot_free(&c);
}

/* The text report of @n series (rows in the order given) on stdout,
 * captured: does its header have a Started column? */
static int started_column(struct tp_series *s, size_t n)
{
	struct ts_options o;
	struct ts_report r;
	char *line = NULL;
	size_t cap = 0;
	FILE *f = tmpfile();
	int saved = dup(1), found = 0;

	CHECK(f && saved >= 0);
	memset(&o, 0, sizeof(o));
	o.series_width = 48;
	memset(&r, 0, sizeof(r));
	r.kind = TS_SINCE_START;
	r.sel = tp_xcalloc(n, sizeof(*r.sel));
	r.nrows = n;
	for (size_t i = 0; i < n; i++)
		r.sel[i] = &s[i];
	fflush(stdout);
	CHECK(dup2(fileno(f), 1) == 1);
	ts_emit_text.report(&r, &o);
	fflush(stdout);
	CHECK(dup2(saved, 1) == 1);
	close(saved);
	rewind(f);
	/* The first line is blank, the second the header. */
	while (getline(&line, &cap, f) > 0 && !found)
		found = strstr(line, "Started") != NULL;
	free(line);
	fclose(f);
	free(r.sel);
	return found;
}

static void fake(struct tp_series *s, int pid, const char *zone,
		 uint64_t start, uint64_t created, const char *key)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->start_ticks = start;
	s->created_ns = created;
	snprintf(s->proc, sizeof(s->proc), "p%d", pid);
	snprintf(s->zone, sizeof(s->zone), "%s", zone);
	s->key = s->name = (char *)key;
	s->kind = TALLY_COUNTER;
}

/* Two incarnations of one pid and zone (another start time, or another
 * creation time) get a Started column; other zones of one process, other
 * pids, and sums across processes (pid 0) do not; a run of one pid
 * checked against incarnations met several rows before still finds
 * them. */
TEST(started_column_for_incarnations)
{
	struct tp_series s[6];

	fake(&s[0], 10, "z", 100, 1, "a");
	fake(&s[1], 10, "z", 100, 1, "b");
	fake(&s[2], 10, "y", 100, 1, "a");
	fake(&s[3], 11, "z", 200, 2, "a");
	CHECK(!started_column(s, 4));
	fake(&s[4], 11, "z", 201, 3, "a");
	CHECK(started_column(s, 5));
	fake(&s[4], 11, "z", 200, 3, "a");  /* same start, made again */
	CHECK(started_column(s, 5));
	fake(&s[4], 11, "w", 201, 3, "a");  /* another zone */
	CHECK(!started_column(s, 5));
	/* Zone z of pid 10 again, after zone y, another start: found. */
	fake(&s[3], 10, "z", 101, 1, "c");
	CHECK(started_column(s, 4));
	/* The same pid in two runs (not sorted, as rows never are): only
	 * rows next to each other are one process's. */
	fake(&s[0], 0, "z", 100, 1, "a");
	fake(&s[1], 0, "z", 101, 1, "a");
	CHECK(!started_column(s, 2));
	fake(&s[0], 10, "z", 100, 1, "a");
	fake(&s[1], 12, "z", 100, 1, "a");
	fake(&s[2], 10, "z", 101, 1, "a");
	CHECK(!started_column(s, 3));
}

/* Many rows of one process: the check must be linear in the rows, or a
 * report of a process with a million series never ends; 200,000 rows
 * here (a quarter under the sanitizers' TALLY_TEST_SCALE=4), with the
 * second incarnation last. */
TEST(started_column_many_rows)
{
	size_t n = harness_scale(200000);
	struct tp_series *s = tp_xcalloc(n, sizeof(*s));

	for (size_t i = 0; i < n; i++)
		fake(&s[i], 7, "z", 1, 1, "k");
	CHECK(!started_column(s, n));
	fake(&s[n - 1], 7, "z", 2, 1, "k");
	CHECK(started_column(s, n));
	free(s);
}
