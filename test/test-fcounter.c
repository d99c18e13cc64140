/*
 * test-fcounter.c: counters of fractional amounts (TALLY_FCOUNTER,
 * format 2.6): exact to 10^-9 under concurrent adds, shown by the reader
 * as one exact decimal, skipped by readers older than 2.6.
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
#include "tally/family.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

/* How many series named paid_total a pass showed, and the last one: its
 * numbers only (the view's strings and arrays end with the pass). */
struct seen {
	int n;
	struct tally_series_view v;
};

static int seen_fn(const struct tally_series_view *v, void *arg)
{
	struct seen *s = arg;

	if (strcmp(v->name, "paid_total"))
		return 0;
	s->n++;
	s->v = *v;
	return 0;
}

static struct seen read_zone(struct tally_zone *z)
{
	struct seen s;

	zone_pass(z, seen_fn, &s, sizeof(s));
	return s;
}

TEST(a_tenth_ten_times_is_one)
{
	struct tally_zone *z = zone_in("tenth");
	struct tally_metric_desc d = desc(TALLY_FCOUNTER, "paid_total");
	tally_fcounter c;
	struct seen s;
	double v;
	int64_t i;

	CHECK_EQ(tally_fcounter_register(z, &d, &c), 0);
	for (int k = 0; k < 10; k++)
		tally_fcounter_add(&c, 0.1);
	s = read_zone(z);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.v.kind, TALLY_COUNTER);
	CHECK_EQ(s.v.fractional, 1);
	CHECK_EQ(s.v.value, 1);
	CHECK_EQ(s.v.frac, 0u);
	CHECK_EQ(tally_fcounter_fetch(&c, &v), 0);
	CHECK(v == 1.0);
	CHECK_EQ(tally_metric_fetch(&c.metric, &i), 0);
	CHECK_EQ(i, 1);
	/* 2.75 more, a billionth, and what a counter refuses. */
	tally_fcounter_add(&c, 2.75);
	tally_fcounter_add(&c, 1e-9);
	tally_fcounter_add(&c, -1);
	tally_fcounter_add(&c, NAN);
	tally_fcounter_add(&c, INFINITY);
	tally_fcounter_add(&c, 0);
	s = read_zone(z);
	CHECK_EQ(s.v.value, 3);
	CHECK_EQ(s.v.frac, 750000001u);
	CHECK(s.v.fvalue == 3.750000001);
	tally_zone_destroy(z);
}

/* Adds 0.25 to the counter @arg 200000 times. */
static void *add_quarters(void *arg)
{
	for (long i = 0; i < 200000; i++)
		tally_fcounter_add(arg, 0.25);
	return NULL;
}

/* Four threads add 0.25 200000 times each: exactly 200000, with every
 * fraction carried (no float sum, whose error would show). */
TEST(concurrent_fractions_add_up_exactly)
{
	struct tally_zone *z = zone_in("quarters");
	struct tally_metric_desc d = desc(TALLY_FCOUNTER, "paid_total");
	tally_fcounter c;
	struct seen s;

	CHECK_EQ(tally_fcounter_register(z, &d, &c), 0);
	run_threads(4, add_quarters, &c);
	s = read_zone(z);
	CHECK_EQ(s.v.value, 200000);
	CHECK_EQ(s.v.frac, 0u);
	tally_zone_destroy(z);
}

TEST(a_family_of_fractional_counters)
{
	struct tally_zone *z = zone_in("family");
	struct tally_metric_desc d = desc(TALLY_FCOUNTER, "paid_total");
	const char *names[] = { "currency" }, *eur[] = { "eur" };
	tally_fcounter_family f;
	const tally_fcounter *c;
	struct seen s;

	CHECK_EQ(tally_fcounter_family_register(z, &d, names, 1, &f), 0);
	CHECK_EQ(tally_fcounter_family_get(&f, eur, 1, &c), 0);
	tally_fcounter_add(c, 19.99);
	tally_fcounter_add(c, 0.01);
	s = read_zone(z);
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.v.value, 20);
	CHECK_EQ(s.v.frac, 0u);
	CHECK_EQ(tally_family_remove(&f.family), 0);
	tally_zone_destroy(z);
}

/*
 * What a reader of 2.5 finds: a counter's metric record, which passes its
 * checks, and a series record of state 4, which it skips; a counter of
 * the same name registered as a plain counter is another generation.
 */
TEST(older_readers_skip_it_and_a_plain_counter_is_another_definition)
{
	struct tally_zone *z = zone_in("old");
	struct tally_metric_desc d = desc(TALLY_FCOUNTER, "paid_total");
	tally_fcounter c;
	tally_counter plain;
	struct tally__hdr h;
	struct tally__metric_rec f;
	struct tally__series r;

	CHECK_EQ(tally_fcounter_register(z, &d, &c), 0);
	tally_fcounter_add(&c, 1.5);
	read_first_records(tally_zone_path(z), &h, &f, &r);
	check_typed_counter_rec(&f, TALLY__TYPE_FCOUNTER);
	CHECK_EQ(r.state, TALLY__SERIES_TYPED);
	CHECK_EQ(r.nslots, 2u);
	d.kind = TALLY_COUNTER;
	CHECK_EQ(tally_counter_register(z, &d, &plain), 0);
	tally_counter_add(&plain, 7);
	{
		struct seen s = read_zone(z);

		CHECK_EQ(s.n, 1);
		CHECK_EQ(s.v.fractional, 0);
		CHECK_EQ(s.v.value, 7);
	}
	tally_zone_destroy(z);
}
