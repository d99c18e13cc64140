/*
 * test-chistogram.c: classic histograms with the application's own bucket
 * bounds (TALLY_CHISTOGRAM, format 2.6): exact bucket counts and sum under
 * concurrent observations, shown by the reader as a TALLY_HISTOGRAM with
 * its bounds, checked bounds, another definition for other bounds, and
 * the bytes a reader older than 2.6 checks.  Summaries (TALLY_SUMMARY,
 * format 2.7), classic histograms of no bounds flagged as summaries: an
 * exact count and sum, shown with the view's summary set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "layout.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

/* The histogram every test defines. */
#define NAME "order_value_dollars"

/* How many series named NAME a pass showed, and the last one: its view
 * (numbers only: the strings and arrays end with the pass), a copy of
 * its bounds and buckets, and its median and highest quantile. */
struct seen {
	int n;
	struct tally_series_view v;
	double bounds[TALLY_CHISTOGRAM_BOUNDS_MAX];
	int64_t buckets[TALLY_CHISTOGRAM_BOUNDS_MAX + 1];
	double p50, p100;
};

static int seen_fn(const struct tally_series_view *v, void *arg)
{
	struct seen *s = arg;

	if (strcmp(v->name, NAME))
		return 0;
	s->n++;
	s->v = *v;
	if (v->nbounds <= TALLY_CHISTOGRAM_BOUNDS_MAX)
		memcpy(s->bounds, v->bounds, v->nbounds * sizeof(double));
	if (v->nbuckets <= TALLY_CHISTOGRAM_BOUNDS_MAX + 1)
		memcpy(s->buckets, v->buckets, v->nbuckets * sizeof(int64_t));
	s->p50 = s->p100 = NAN;
	if (v->value > 0) {
		CHECK_EQ(tally_histogram_quantile(v, 0.5, &s->p50), 0);
		CHECK_EQ(tally_histogram_quantile(v, 1.0, &s->p100), 0);
	}
	return 0;
}

static struct seen read_zone(struct tally_zone *z)
{
	struct seen s;

	zone_pass(z, seen_fn, &s, sizeof(s));
	return s;
}

/* prometheus_client's buckets of an order value, +Inf included. */
static const double bounds[] = { 1, 2.5, 10, 25, 100, INFINITY };

TEST(buckets_sum_and_count_are_exact)
{
	struct tally_zone *z = zone_in("exact");
	struct tally_metric_desc d = desc(TALLY_CHISTOGRAM, NAME);
	tally_chistogram h;
	int64_t count, b[6];
	double sum;
	struct seen s;

	CHECK_EQ(tally_chistogram_register(z, &d, bounds, 6, &h), 0);
	CHECK_EQ(h.nbounds, 5u); /* +Inf is every histogram's */
	tally_chistogram_observe(&h, 0.1);   /* le 1 */
	tally_chistogram_observe(&h, 1);     /* le 1: bounds are inclusive */
	tally_chistogram_observe(&h, 2.5);   /* le 2.5 */
	tally_chistogram_observe(&h, 19.99); /* le 25 */
	tally_chistogram_observe(&h, 1000);  /* +Inf */
	tally_chistogram_observe(&h, NAN);   /* ignored */
	s = read_zone(z);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.v.kind, TALLY_HISTOGRAM);
	CHECK_EQ(s.v.classic, 1);
	CHECK_EQ(s.v.sub_bits, 0u);
	CHECK_EQ(s.v.nbounds, 5u);
	CHECK_EQ(s.v.nbuckets, 6u);
	CHECK(s.bounds[0] == 1 && s.bounds[1] == 2.5 && s.bounds[4] == 100);
	CHECK_EQ(s.buckets[0], 2);
	CHECK_EQ(s.buckets[1], 1);
	CHECK_EQ(s.buckets[2], 0);
	CHECK_EQ(s.buckets[3], 1);
	CHECK_EQ(s.buckets[4], 0);
	CHECK_EQ(s.buckets[5], 1);
	CHECK_EQ(s.v.value, 5);
	/* 0.1 + 1 + 2.5 + 19.99 + 1000 = 1023.59, to the billionth. */
	CHECK_EQ(s.v.sum, 1023);
	CHECK_EQ(s.v.frac, 590000000u);
	CHECK(s.v.fsum == 1023.59);
	/* Rank 2.5 of 5: half way through the one value of (1, 2.5], as
	 * Prometheus's histogram_quantile() says. */
	CHECK(fabs(s.p50 - 1.75) < 1e-12);
	CHECK(s.p100 == 100); /* the +Inf bucket: the highest bound */
	CHECK_EQ(tally_chistogram_fetch(&h, &count, &sum, b), 0);
	CHECK_EQ(count, 5);
	CHECK(sum == 1023.59);
	CHECK_EQ(b[0], 2);
	CHECK_EQ(b[5], 1);
	CHECK_EQ(tally_metric_fetch(&h.metric, &count), 0);
	CHECK_EQ(count, 5);
	/* A negative value: its floor and the billionths above it. */
	tally_chistogram_observe(&h, -0.25);
	s = read_zone(z);
	CHECK_EQ(s.buckets[0], 3);
	CHECK_EQ(s.v.sum, 1023);
	CHECK_EQ(s.v.frac, 340000000u);
	tally_zone_destroy(z);
}

/* Observes 0.25 and 30.5 with the histogram @arg, 100000 times each. */
static void *observe_many(void *arg)
{
	for (long i = 0; i < 100000; i++) {
		tally_chistogram_observe(arg, 0.25);
		tally_chistogram_observe(arg, 30.5);
	}
	return NULL;
}

/* Four threads: every observation counted once, the sum exact. */
TEST(concurrent_observations_add_up_exactly)
{
	struct tally_zone *z = zone_in("threads");
	struct tally_metric_desc d = desc(TALLY_CHISTOGRAM, NAME);
	tally_chistogram h;
	struct seen s;

	CHECK_EQ(tally_chistogram_register(z, &d, bounds, 5, &h), 0);
	run_threads(4, observe_many, &h);
	s = read_zone(z);
	CHECK_EQ(s.v.value, 800000);
	CHECK_EQ(s.buckets[0], 400000);
	CHECK_EQ(s.buckets[4], 400000);
	CHECK_EQ(s.v.sum, 400000 * 30 + 100000 * 3);    /* 0.25 + 30.5, 4e5 times */
	CHECK_EQ(s.v.frac, 0u);
	tally_zone_destroy(z);
}

TEST(bounds_are_checked)
{
	struct tally_zone *z = zone_in("checked");
	struct tally_metric_desc d = desc(TALLY_CHISTOGRAM, NAME);
	double down[] = { 1, 0.5 }, nan[] = { NAN }, many[41];
	char help[TALLY_CHISTOGRAM_HELP_MAX + 2];
	tally_chistogram h;

	CHECK_EQ(tally_chistogram_register(z, &d, down, 2, &h), -EINVAL);
	tally_chistogram_observe(&h, 1); /* a discard handle takes it */
	CHECK_EQ(tally_chistogram_register(z, &d, nan, 1, &h), -EINVAL);
	CHECK_EQ(tally_chistogram_register(z, &d, NULL, 1, &h), -EINVAL);
	for (int i = 0; i < 41; i++)
		many[i] = i;
	CHECK_EQ(tally_chistogram_register(z, &d, many, 41, &h), -E2BIG);
	CHECK_EQ(tally_chistogram_register(z, &d, many, 40, &h), 0);
	CHECK_EQ(h.nbounds, 40u);
	memset(help, 'h', sizeof(help) - 1);
	help[sizeof(help) - 1] = 0;
	d.help = help;
	d.name = "long_help";
	CHECK_EQ(tally_chistogram_register(z, &d, many, 2, &h), -E2BIG);
	help[sizeof(help) - 2] = 0; /* TALLY_CHISTOGRAM_HELP_MAX bytes */
	CHECK_EQ(tally_chistogram_register(z, &d, many, 2, &h), 0);
	/* No bounds: the +Inf bucket alone. */
	d.name = "only_inf";
	d.help = NULL;
	CHECK_EQ(tally_chistogram_register(z, &d, NULL, 0, &h), 0);
	tally_chistogram_observe(&h, 3.5);
	{
		int64_t count, b[1];
		double sum;

		CHECK_EQ(tally_chistogram_fetch(&h, &count, &sum, b), 0);
		CHECK_EQ(count, 1);
		CHECK_EQ(b[0], 1);
		CHECK(sum == 3.5);
	}
	tally_zone_destroy(z);
}

/* Other bounds are another definition: the reader shows the newest,
 * and the older one's series stay where they were written. */
TEST(other_bounds_are_another_definition)
{
	struct tally_zone *z = zone_in("redefine");
	struct tally_metric_desc d = desc(TALLY_CHISTOGRAM, NAME);
	double other[] = { 5, 50 };
	tally_chistogram a, b, again;
	struct seen s;

	CHECK_EQ(tally_chistogram_register(z, &d, bounds, 5, &a), 0);
	tally_chistogram_observe(&a, 3);
	CHECK_EQ(tally_chistogram_register(z, &d, other, 2, &b), 0);
	CHECK_EQ(b.nbounds, 2u);
	tally_chistogram_observe(&b, 7);
	tally_chistogram_observe(&b, 70);
	s = read_zone(z);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.v.nbounds, 2u);
	CHECK_EQ(s.v.value, 2);
	CHECK_EQ(s.buckets[1], 1);
	CHECK_EQ(s.buckets[2], 1);
	/* The first bounds again: the first generation, with its count. */
	CHECK_EQ(tally_chistogram_register(z, &d, bounds, 5, &again), 0);
	s = read_zone(z);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.v.nbounds, 5u);
	CHECK_EQ(s.v.value, 1);
	CHECK_EQ(s.buckets[2], 1);
	tally_zone_destroy(z);
}

/* What a reader of 2.5 finds: a counter's metric record, whose help text
 * ends at its NUL, and a series record of state 4, which it skips. */
TEST(older_readers_skip_it)
{
	struct tally_zone *z = zone_in("old");
	struct tally_metric_desc d = desc(TALLY_CHISTOGRAM, NAME);
	tally_chistogram h;
	struct tally__hdr hd;
	struct tally__metric_rec f;
	struct tally__series r;

	d.help = "What orders were worth.";
	CHECK_EQ(tally_chistogram_register(z, &d, bounds, 5, &h), 0);
	tally_chistogram_observe(&h, 1.5);
	read_first_records(tally_zone_path(z), &hd, &f, &r);
	check_typed_counter_rec(&f, TALLY__TYPE_CHISTO);
	CHECK_EQ(strlen(f.help), f.help_len);
	CHECK_EQ(tally__metric_tail(&f)->nbounds, 5);
	CHECK(tally__metric_bounds(&f)->bound[1] == 2.5);
	CHECK_EQ(r.state, TALLY__SERIES_TYPED);
	CHECK_EQ(r.nslots, 8u); /* the sum's two, 6 buckets */
	tally_zone_destroy(z);
}

/* A label family: each child has the label family's bounds and counts apart. */
TEST(a_family_of_classic_histograms)
{
	struct tally_zone *z = zone_in("family");
	struct tally_metric_desc d = desc(TALLY_CHISTOGRAM, NAME);
	const char *names[] = { "shop" }, *a[] = { "a" }, *b[] = { "b" };
	double down[] = { 2, 1 };
	tally_chistogram_family f, bad;
	const tally_chistogram *ha, *hb, *again;
	struct seen s;

	CHECK_EQ(tally_chistogram_family_register(z, &d, down, 2, names, 1,
						  &bad), -EINVAL);
	CHECK_EQ(tally_chistogram_family_register(z, &d, bounds, 6, names, 1,
						  &f), 0);
	CHECK_EQ(tally_chistogram_family_get(&f, a, 1, &ha), 0);
	CHECK_EQ(tally_chistogram_family_get(&f, b, 1, &hb), 0);
	CHECK_EQ(tally_chistogram_family_get(&f, a, 1, &again), 0);
	CHECK(again == ha);
	CHECK_EQ(ha->nbounds, 5u);
	tally_chistogram_observe(ha, 5);
	tally_chistogram_observe(hb, 500);
	tally_chistogram_observe(hb, 0.5);
	{
		int64_t count, bk[6];
		double sum;

		CHECK_EQ(tally_chistogram_fetch(hb, &count, &sum, bk), 0);
		CHECK_EQ(count, 2);
		CHECK(sum == 500.5);
		CHECK_EQ(bk[0], 1);
		CHECK_EQ(bk[5], 1);
		CHECK_EQ(tally_chistogram_fetch(ha, &count, &sum, bk), 0);
		CHECK_EQ(count, 1);
		CHECK_EQ(bk[2], 1);
	}
	s = read_zone(z);
	CHECK_EQ(s.n, 2);
	CHECK_EQ(s.v.nbounds, 5u);
	CHECK_EQ(tally_family_remove(&f.family), 0);
	s = read_zone(z);
	CHECK_EQ(s.n, 0);
	tally_zone_destroy(z);
}

static int count_named(const struct tally_series_view *v, void *arg)
{
	int *n = arg;

	if (!strcmp(v->name, "order_value_dollars:bucket"))
		(*n)++;
	return 0;
}

/*
 * A binding's definition (tally_chistogram_redefine): the histogram's own
 * record is it.  An older version's definition under the name (a
 * series-less counter) and its parts are superseded; the histogram
 * registered after it is in the generation it made, and the same
 * definition again changes nothing.
 */
TEST(the_histogram_record_is_the_binding_definition)
{
	struct tally_zone *z = zone_in("claim");
	struct tally_metric_desc old = desc(TALLY_COUNTER, NAME);
	struct tally_metric_desc part = desc(TALLY_COUNTER,
					     "order_value_dollars:bucket");
	struct tally_metric_desc d = desc(TALLY_CHISTOGRAM, NAME);
	const char *parts[] = { "order_value_dollars:bucket" };
	tally_counter c;
	tally_chistogram h;
	struct tally_seg *seg;
	struct seen s;
	int n = 0;

	old.help = "tally-python histogram labels= buckets=1,+Inf";
	d.help = "What orders were worth.";
	CHECK_EQ(tally_metric_redefine(z, &old, parts, 1), 0);
	CHECK_EQ(tally_counter_register(z, &part, &c), 0);
	tally_counter_add(&c, 3);
	CHECK_EQ(tally_chistogram_redefine(z, &d, bounds, 6, parts, 1), 1);
	CHECK_EQ(tally_chistogram_register(z, &d, bounds, 6, &h), 0);
	tally_chistogram_observe(&h, 2);
	CHECK_EQ(tally_chistogram_redefine(z, &d, bounds, 6, parts, 1), 0);
	d.kind = TALLY_CHISTOGRAM;
	CHECK_EQ(tally_metric_redefine(z, &d, parts, 1), -EINVAL);
	s = read_zone(z);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.v.value, 1);
	CHECK_EQ(s.buckets[1], 1);
	seg = tally_seg_open(tally_zone_path(z), NULL);
	CHECK(seg != NULL);
	CHECK(tally_seg_foreach(seg, 0, count_named, &n) >= 0);
	tally_seg_close(seg);
	CHECK_EQ(n, 0); /* the old version's part is not shown */
	{
		struct tally_seg_info info;

		seg = tally_seg_open(tally_zone_path(z), NULL);
		CHECK(seg != NULL);
		CHECK_EQ(tally_seg_info(seg, &info), 0);
		CHECK_EQ(info.redefinitions, 1u);
		tally_seg_close(seg);
	}
	tally_zone_destroy(z);
}

struct summary_worker {
	const tally_summary *s;
	int n;
};

static void *observe_tenths(void *arg)
{
	const struct summary_worker *w = arg;

	for (int i = 0; i < w->n; i++)
		tally_summary_observe(w->s, 0.1);
	return NULL;
}

/*
 * A summary: four threads observe 0.1 ten thousand times each, the main
 * thread 2.25 and a NaN (not counted).  The count is exactly 40001 and
 * the sum exactly 4002.25, in this process (tally_summary_fetch) and to
 * a reader, which shows a classic histogram of no bounds with summary
 * set, its one bucket the count.
 */
TEST(summary_count_and_sum_are_exact)
{
	struct tally_zone *z = zone_in("summary");
	struct tally_metric_desc d = desc(TALLY_SUMMARY,
					  "order_value_dollars");
	struct summary_worker w = { NULL, 10000 };
	pthread_t t[4];
	tally_summary s;
	int64_t count;
	double sum;
	struct seen seen;

	d.help = "What orders were worth.";
	CHECK_EQ(tally_summary_register(z, &d, &s), 0);
	w.s = &s;
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, observe_tenths, &w), 0);
	tally_summary_observe(&s, 2.25);
	tally_summary_observe(&s, NAN);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	CHECK_EQ(tally_summary_fetch(&s, &count, &sum), 0);
	CHECK_EQ(count, 40001);
	CHECK(sum == 4002.25);
	CHECK_EQ(tally_metric_fetch(&s.metric, &count), 0);
	CHECK_EQ(count, 40001);
	seen = read_zone(z);
	CHECK_EQ(seen.n, 1);
	CHECK_EQ(seen.v.kind, TALLY_HISTOGRAM);
	CHECK_EQ(seen.v.classic, 1);
	CHECK_EQ(seen.v.summary, 1);
	CHECK_EQ(seen.v.nbounds, 0u);
	CHECK_EQ(seen.v.nbuckets, 1u);
	CHECK_EQ(seen.buckets[0], 40001);
	CHECK_EQ(seen.v.value, 40001);
	CHECK_EQ(seen.v.sum, 4002);
	CHECK_EQ(seen.v.frac, 250000000u);
	CHECK(seen.v.fsum == 4002.25);
	tally_zone_destroy(z);
}

/*
 * A summary and a classic histogram of no finite bounds (only +Inf) are
 * two definitions of a name, each shown as what it is; a binding's
 * summary record is its definition (tally_summary_redefine); a
 * description of another kind is refused with a failed handle.
 */
TEST(summary_and_histogram_are_two_definitions)
{
	struct tally_zone *z = zone_in("sumdef");
	struct tally_metric_desc d = desc(0, "order_value_dollars");
	const double inf[] = { INFINITY };
	const char *parts[] = { "order_value_dollars:summary_sum" };
	tally_chistogram h;
	tally_summary s;
	struct seen seen;
	int64_t count;
	double sum;

	CHECK_EQ(tally_summary_redefine(z, &d, parts, 1), 0);
	CHECK_EQ(tally_summary_register(z, &d, &s), 0);
	tally_summary_observe(&s, 3);
	CHECK_EQ(tally_summary_redefine(z, &d, parts, 1), 0);
	CHECK_EQ(tally_chistogram_register(z, &d, inf, 1, &h), 0);
	tally_chistogram_observe(&h, 5);
	seen = read_zone(z);
	CHECK_EQ(seen.n, 1);
	CHECK_EQ(seen.v.summary, 0);
	CHECK(seen.v.fsum == 5.0);
	/* Back to the summary: its series resume. */
	CHECK_EQ(tally_summary_redefine(z, &d, parts, 1), 1);
	CHECK_EQ(tally_summary_register(z, &d, &s), 0);
	tally_summary_observe(&s, 4);
	seen = read_zone(z);
	CHECK_EQ(seen.n, 1);
	CHECK_EQ(seen.v.summary, 1);
	CHECK_EQ(seen.v.value, 2);
	CHECK(seen.v.fsum == 7.0);
	d.kind = TALLY_COUNTER;
	memset(&s, 0xff, sizeof(s)); /* a handle never filled before */
	CHECK_EQ(tally_summary_register(z, &d, &s), -EINVAL);
	tally_summary_observe(&s, 1); /* goes nowhere */
	CHECK_EQ(tally_summary_fetch(&s, &count, &sum), -EINVAL);
	tally_zone_destroy(z);
}

static int count_summaries(const struct tally_series_view *v, void *arg)
{
	int64_t *n = arg;

	if (!strcmp(v->name, "size_bytes") && v->summary &&
	    v->nlabels == 1 && !strcmp(v->label_names[0], "route"))
		n[!strcmp(v->label_values[0], "/b")] += v->value * 1000 +
						       v->sum;
	return 0;
}

/* A family of summaries: each child a summary of its labels. */
TEST(a_family_of_summaries)
{
	struct tally_zone *z = zone_in("sumfam");
	struct tally_metric_desc d = desc(0, "size_bytes");
	const char *names[] = { "route" };
	const char *a[] = { "/a" }, *b[] = { "/b" };
	tally_summary_family f;
	const tally_summary *s;
	struct tally_seg *seg;
	int64_t n[2] = { 0, 0 };

	CHECK_EQ(tally_summary_family_register(z, &d, names, 1, &f), 0);
	CHECK_EQ(tally_summary_family_get(&f, a, 1, &s), 0);
	tally_summary_observe(s, 10);
	tally_summary_observe(s, 20);
	CHECK_EQ(tally_summary_family_get(&f, b, 1, &s), 0);
	tally_summary_observe(s, 7);
	seg = tally_seg_open(tally_zone_path(z), NULL);
	CHECK(seg != NULL);
	CHECK(tally_seg_foreach(seg, 0, count_summaries, n) >= 0);
	tally_seg_close(seg);
	CHECK_EQ(n[0], 2030); /* count 2, sum 30 */
	CHECK_EQ(n[1], 1007); /* count 1, sum 7 */
	d.kind = TALLY_COUNTER;
	CHECK_EQ(tally_summary_family_register(z, &d, names, 1, &f), -EINVAL);
	CHECK_EQ(tally_family_remove(&f.family), -EINVAL);
	tally_zone_destroy(z);
}
