/*
 * test-metrics.c: registering, removing and updating named series
 * (tally/metrics.h), checked from the writer's side.
 *
 * It proves that:
 *   - metric names, label names, label values, units and help texts are
 *     checked as documented: every valid form is accepted, every invalid
 *     one gives -EINVAL, and a string longer than its limit gives -E2BIG
 *     and is never cut (the longest accepted strings are stored in full);
 *   - a failed registration leaves no metric record, series or block behind;
 *   - a series is unique by name and labels whatever the label order:
 *     registering it again gives the same series (get-or-create, one
 *     more reference); a name keeps its kind, help, unit, mode and layout
 *     (-EINVAL otherwise);
 *   - removal, re-registration and double removal behave, each
 *     registration holds the series until its own removal, and a stale
 *     copy of a handle cannot remove the series that reused its record;
 *   - counters, in-flight gauges, set gauges and histograms hold exactly
 *     what was written, in every mode, across threads;
 *   - tally_histogram_bucket() and tally_histogram_bucket_bounds() agree for
 *     every layout: buckets tile 0 .. 2^max_bits - 1, each value lies
 *     inside the bounds of its bucket (larger ones, up to UINT64_MAX, all
 *     go to the last bucket), and a bucket is at most 2^-sub_bits of its
 *     lower bound wide;
 *   - a zone with small max_series or capacity fails with -ENOSPC, and
 *     recovers when series are removed;
 *   - 200,000 register + remove pairs leave the zone with no live series
 *     and no lost block.
 * Values are read back with tally_metric_fetch() and with the segment
 * reader on the zone's own file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "core/core.h"
#include "snap.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers ---- */

static struct tally_zone *zone(size_t capacity, size_t max_series)
{
	struct tally_zone_opts o = { capacity, max_series, 0 };
	struct tally_zone *z = tally_zone_create("metrics", &o);

	if (!z)
		harness_fail(__FILE__, __LINE__, "tally_zone_create: %s",
			     tally_errmsg());
	return z;
}

/* Registers a counter named @name with one label, or returns the error. */
static int reg1(struct tally_zone *z, const char *name, const char *lname,
		const char *lvalue, tally_metric *m)
{
	struct tally_label l = { lname, lvalue };
	struct tally_metric_desc d = desc(TALLY_COUNTER, name);
	tally_metric tmp;

	d.labels = &l;
	d.nlabels = lname ? 1 : 0;
	return register_any(z, &d, m ? m : &tmp);
}

static struct tally__hdr *hdr(struct tally_zone *z)
{
	return z->hdr;
}

/* Every live series of @z, read back through its file. */
static struct snap read_zone(struct tally_zone *z)
{
	return read_path(tally_zone_path(z), TALLY_READ_PERCPU);
}

static int64_t fetch(const tally_metric *m)
{
	int64_t v = INT64_MIN;

	CHECK_EQ(tally_metric_fetch(m, &v), 0);
	return v;
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	CHECK(s != NULL);
	memset(s, c, n);
	s[n] = 0;
	return s;
}

/* ---- names and labels ---- */

TEST(metric_name_rules)
{
	static const char *good[] = {
		"a", "A", "_", ":", "_x", ":a", "a:b", "a_b", "a9",
		"http_requests_total", "ns:sub:name_1", "ZZ_9:_",
	};
	static const char *bad[] = {
		"", "9a", "0", "a-b", "a b", "a.b", "a/b", "é", "a\xc3\xa9",
		"a$", " a", "a\n", "-",
	};
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d;
	tally_metric m;
	struct snap sn;

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		if (reg1(z, good[i], NULL, NULL, &m) != 0)
			harness_fail(__FILE__, __LINE__, "\"%s\" refused: %s",
				     good[i], tally_errmsg());
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc = reg1(z, bad[i], NULL, NULL, &m);

		if (rc != -EINVAL)
			harness_fail(__FILE__, __LINE__, "\"%s\": %d, not "
				     "-EINVAL", bad[i], rc);
		CHECK(tally_errmsg()[0] != 0);
		CHECK_EQ(errno, EINVAL);
	}
	d = desc(TALLY_COUNTER, NULL);
	CHECK_EQ(register_any(z, &d, &m), -EINVAL);

	sn = read_zone(z);
	CHECK_EQ(sn.n, (int)ARRAY_SIZE(good));
	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		CHECK(snap_find(&sn, good[i], "") != NULL);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), ARRAY_SIZE(good));
	snap_free(&sn);
}

TEST(label_name_rules)
{
	static const char *good[] = {
		"a", "A", "_", "_a", "a_", "a9", "a_b_c", "_9", "Z",
	};
	static const char *bad[] = {
		"", "9a", "a-b", "a:b", ":a", "a b", "a.b", "__", "__a", "__9",
		"é", "a\xff",
	};
	struct tally_zone *z = zone(0, 0);
	tally_metric m;
	char want[64];
	struct snap sn;

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		if (reg1(z, "label_rules", good[i], "v", &m) != 0)
			harness_fail(__FILE__, __LINE__, "label \"%s\" refused:"
				     " %s", good[i], tally_errmsg());
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc = reg1(z, "label_rules", bad[i], "v", &m);

		if (rc != -EINVAL)
			harness_fail(__FILE__, __LINE__, "label \"%s\": %d, "
				     "not -EINVAL", bad[i], rc);
	}
	/* No labels at all is a series of its own. */
	CHECK_EQ(reg1(z, "label_rules", NULL, NULL, &m), 0);
	/* A NULL name or value, and a NULL array with labels. */
	{
		struct tally_label l[] = { { NULL, "v" } };
		struct tally_label l2[] = { { "k", NULL } };
		struct tally_metric_desc d = desc(TALLY_COUNTER, "label_rules2");

		d.labels = l;
		d.nlabels = 1;
		CHECK_EQ(register_any(z, &d, &m), -EINVAL);
		d.labels = l2;
		CHECK_EQ(register_any(z, &d, &m), -EINVAL);
		d.labels = NULL;
		CHECK_EQ(register_any(z, &d, &m), -EINVAL);
	}
	/* The same name twice, in any order and position. */
	{
		struct tally_label l[] = { { "a", "1" }, { "b", "2" },
					   { "a", "3" } };
		struct tally_metric_desc d = desc(TALLY_COUNTER, "dup_labels");

		d.labels = l;
		d.nlabels = 3;
		CHECK_EQ(register_any(z, &d, &m), -EINVAL);
		d.nlabels = 2;
		CHECK_EQ(register_any(z, &d, &m), 0);
	}

	sn = read_zone(z);
	/* The good labels, the unlabelled series and dup_labels{a,b}. */
	CHECK_EQ(sn.n, (int)ARRAY_SIZE(good) + 2);
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		snprintf(want, sizeof(want), "%s=v", good[i]);
		CHECK(snap_find(&sn, "label_rules", want) != NULL);
	}
	CHECK(snap_find(&sn, "label_rules", "") != NULL);
	CHECK(snap_find(&sn, "dup_labels", "a=1,b=2") != NULL);
	CHECK(snap_find(&sn, "label_rules2", "") == NULL);
	snap_free(&sn);
}

TEST(label_value_utf8)
{
	static const char *good[] = {
		"", "plain", "with space", "é", "\xe6\x97\xa5\xe6\x9c\xac",
		"\xf0\x9f\x98\x80", "\xef\xbf\xbd", "\xf4\x8f\xbf\xbf", "\x7f",
		"\xc2\x80", "\xe0\xa0\x80", "\xf0\x90\x80\x80", "a=b,c\"d\\",
	};
	static const char *bad[] = {
		"\xff", "\xfe", "\x80", "\xbf", "a\xc3", "\xc3\x28",
		"\xc0\x80",             /* overlong NUL */
		"\xc1\xbf",             /* overlong */
		"\xe0\x80\xaf",         /* overlong / */
		"\xf0\x80\x80\xaf",     /* overlong / */
		"\xed\xa0\x80",         /* surrogate U+D800 */
		"\xed\xbf\xbf",         /* surrogate U+DFFF */
		"\xf4\x90\x80\x80",     /* U+110000 */
		"\xf8\x88\x80\x80\x80", /* 5-byte form */
		"\xe6\x97",             /* cut */
		"ok\xe6\x97\xa5\xe6",   /* cut at the end */
	};
	struct tally_zone *z = zone(0, 0);
	tally_metric m;
	char want[64];
	struct snap sn;

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		if (reg1(z, "utf8", "v", good[i], &m) != 0)
			harness_fail(__FILE__, __LINE__, "value #%zu refused:"
				     " %s", i, tally_errmsg());
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc = reg1(z, "utf8", "v", bad[i], &m);

		if (rc != -EINVAL)
			harness_fail(__FILE__, __LINE__, "bad value #%zu: %d,"
				     " not -EINVAL", i, rc);
	}
	/* Help texts follow the same rule. */
	{
		struct tally_metric_desc d = desc(TALLY_COUNTER, "utf8_help");

		d.help = "caf\xc3\xa9 \xf0\x9f\x98\x80";
		CHECK_EQ(register_any(z, &d, &m), 0);
		d.name = "utf8_help_bad";
		d.help = "caf\xc3";
		CHECK_EQ(register_any(z, &d, &m), -EINVAL);
		d.help = "\xed\xa0\x80";
		CHECK_EQ(register_any(z, &d, &m), -EINVAL);
	}
	sn = read_zone(z);
	CHECK_EQ(sn.n, (int)ARRAY_SIZE(good) + 1);
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		snprintf(want, sizeof(want), "v=%s", good[i]);
		if (!snap_find(&sn, "utf8", want))
			harness_fail(__FILE__, __LINE__, "value #%zu not read "
				     "back", i);
	}
	{
		const struct seen *e = snap_find(&sn, "utf8_help", "");

		CHECK(e != NULL);
		CHECK(!strcmp(e->help, "caf\xc3\xa9 \xf0\x9f\x98\x80"));
	}
	snap_free(&sn);
}

TEST(length_limits)
{
	struct tally_zone *z = zone(0, 0);
	char *name127 = repeat('n', TALLY_NAME_MAX);
	char *name128 = repeat('n', TALLY_NAME_MAX + 1);
	char *help839 = repeat('h', TALLY_HELP_MAX);
	char *help840 = repeat('h', TALLY_HELP_MAX + 1);
	char *unit31 = repeat('u', TALLY_UNIT_MAX);
	char *unit32 = repeat('u', TALLY_UNIT_MAX + 1);
	char *val97 = repeat('v', 97);
	struct tally_metric_desc d;
	tally_metric m;
	struct snap sn;
	const struct seen *e;
	uint32_t mrecs, used;

	/* Exactly at each limit: accepted, and stored in full. */
	d = desc(TALLY_GAUGE, name127);
	d.help = help839;
	d.unit = unit31;
	CHECK_EQ(register_any(z, &d, &m), 0);
	/* "a\0" + 97 bytes + "\0" = 100 bytes of labels. */
	CHECK_EQ(reg1(z, "long_label", "a", val97, &m), 0);
	{
		/* 25 labels of 4 bytes: the most labels, the most bytes. */
		struct tally_label l[25];
		char names[25][3];

		for (int i = 0; i < 25; i++) {
			names[i][0] = (char)('a' + i);
			names[i][1] = 0;
			l[i].name = names[i];
			l[i].value = "x";
		}
		d = desc(TALLY_COUNTER, "many_labels");
		d.labels = l;
		d.nlabels = 25;
		CHECK_EQ(register_any(z, &d, &m), 0);
	}
	mrecs = atomic_load(&hdr(z)->metric_count);
	used = atomic_load(&hdr(z)->series_hwm);

	/* One byte over: -E2BIG, never a cut string. */
	d = desc(TALLY_GAUGE, name128);
	CHECK_EQ(register_any(z, &d, &m), -E2BIG);
	CHECK_EQ(errno, E2BIG);
	d = desc(TALLY_GAUGE, "help_too_long");
	d.help = help840;
	CHECK_EQ(register_any(z, &d, &m), -E2BIG);
	d = desc(TALLY_GAUGE, "unit_too_long");
	d.unit = unit32;
	CHECK_EQ(register_any(z, &d, &m), -E2BIG);
	{
		/* Past the label limits (long_labels has more). */
		char *val4096 = repeat('v', TALLY_LABELS_MAX);

		CHECK_EQ(reg1(z, "long_label", "a", val4096, &m), -E2BIG);
		CHECK(strstr(tally_errmsg(), "long_label") != NULL);
		free(val4096);
	}
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), mrecs);
	CHECK_EQ(atomic_load(&hdr(z)->series_hwm), used);

	sn = read_zone(z);
	CHECK_EQ(sn.n, 3);
	e = snap_find(&sn, name127, "");
	CHECK(e != NULL);
	CHECK_EQ(strlen(e->help), TALLY_HELP_MAX);
	CHECK(!strcmp(e->help, help839));
	CHECK(!strcmp(e->unit, unit31));
	{
		char want[128];

		snprintf(want, sizeof(want), "a=%s", val97);
		CHECK(snap_find(&sn, "long_label", want) != NULL);
		want[0] = 0;
		for (int i = 0; i < 25; i++)
			snprintf(want + strlen(want), sizeof(want) - strlen(want),
				 "%s%c=x", i ? "," : "", 'a' + i);
		CHECK(snap_find(&sn, "many_labels", want) != NULL);
	}
	snap_free(&sn);
}

/* Names the exposition formats reserve: refused, with the metric and
 * the label in the message. */
TEST(reserved_label_names)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_label le = { "le", "1" }, dunder = { "__name__", "x" };
	struct tally_metric_desc d = desc(TALLY_HISTOGRAM, "latency_ns");
	const char *const le_name[] = { "le" };
	tally_histogram_family hf;
	tally_metric m;

	d.labels = &le;
	d.nlabels = 1;
	CHECK_EQ(register_any(z, &d, &m), -EINVAL);
	CHECK(strstr(tally_errmsg(), "latency_ns") != NULL);
	CHECK(strstr(tally_errmsg(), "\"le\"") != NULL);
	d.labels = NULL;
	d.nlabels = 0;
	CHECK_EQ(tally_histogram_family_register(z, &d, le_name, 1, &hf),
		 -EINVAL);
	CHECK(strstr(tally_errmsg(), "latency_ns") != NULL);
	CHECK(strstr(tally_errmsg(), "\"le\"") != NULL);
	/* "le" means nothing to a counter or a gauge. */
	CHECK_EQ(reg1(z, "le_counter", "le", "1", &m), 0);
	d = desc(TALLY_GAUGE, "le_gauge");
	d.labels = &le;
	d.nlabels = 1;
	CHECK_EQ(register_any(z, &d, &m), 0);
	/* "__" names, on every kind. */
	d = desc(TALLY_COUNTER, "dunder_total");
	d.labels = &dunder;
	d.nlabels = 1;
	CHECK_EQ(register_any(z, &d, &m), -EINVAL);
	CHECK(strstr(tally_errmsg(), "dunder_total") != NULL);
	CHECK(strstr(tally_errmsg(), "__name__") != NULL);
	CHECK(strstr(tally_errmsg(), "reserved") != NULL);
	{
		struct snap sn = read_zone(z);

		CHECK_EQ(sn.n, 2);
		CHECK(snap_find(&sn, "latency_ns", "le=1") == NULL);
		snap_free(&sn);
	}
}

/* A label set of @n pairs, names "l<i>", whose values fill @bytes of
 * names and values; the strings in @buf. */
static void make_labels(struct tally_label *l, unsigned n, size_t bytes,
			char (*buf)[2][TALLY_LABELS_MAX + 1], char fill)
{
	size_t left = bytes - 4 * (size_t)n; /* the names: 4 bytes each */

	for (unsigned i = 0; i < n; i++) {
		size_t vn;

		snprintf(buf[i][0], sizeof(buf[i][0]), "l%03u", i);
		vn = left / (n - i);
		memset(buf[i][1], fill, vn);
		buf[i][1][vn] = 0;
		left -= vn;
		l[i].name = buf[i][0];
		l[i].value = buf[i][1];
	}
}

/* What read_zone's labels of @l (sorted by name already) look like. */
static char *joined(const struct tally_label *l, unsigned n)
{
	char *s = calloc(1, TALLY_LABELS_MAX + 2 * TALLY_LABEL_PAIRS_MAX);
	size_t at = 0;

	for (unsigned i = 0; i < n; i++)
		at += (size_t)sprintf(s + at, "%s%s=%s", i ? "," : "",
				      l[i].name, l[i].value);
	return s;
}

/* Many short pairs (empty values, 3 packed bytes each) that fit in a
 * record's 100 bytes but are more than the 25 pairs a reader takes from
 * a record: stored as a long set, and read back with the rest of the
 * file (an inline record of 30 pairs made the whole file unreadable). */
TEST(many_short_label_pairs)
{
	struct tally_zone *z = zone(0, 4096);
	static char names[30][2];
	struct tally_label l[30];
	struct tally_metric_desc d = desc(TALLY_COUNTER, "short_pairs");
	tally_metric m, other;
	struct snap sn;
	char *want;

	for (int i = 0; i < 30; i++) {
		/* One letter, sorted: "A" .. "D", then "a" .. "z". */
		names[i][0] = (char)(i < 4 ? 'A' + i : 'a' + i - 4);
		l[i].name = names[i];
		l[i].value = "";
	}
	d.labels = l;
	d.nlabels = 30;
	CHECK_EQ(register_any(z, &d, &m), 0);
	tally_counter_add((tally_counter *)&m, 4);
	d = desc(TALLY_COUNTER, "plain");
	CHECK_EQ(register_any(z, &d, &other), 0);
	tally_counter_add((tally_counter *)&other, 9);
	sn = read_zone(z);
	CHECK_EQ(sn.n, 2);
	want = joined(l, 30);
	CHECK(snap_find(&sn, "short_pairs", want) != NULL);
	CHECK_EQ(snap_find(&sn, "short_pairs", want)->value, 4);
	CHECK(snap_find(&sn, "plain", "") != NULL);
	CHECK_EQ(snap_find(&sn, "plain", "")->value, 9);
	free(want);
	snap_free(&sn);
	tally_zone_destroy(z);
}

/* Label sets past the 100 bytes of a record: up to TALLY_LABELS_MAX
 * bytes and TALLY_LABEL_PAIRS_MAX pairs, stored and read back exactly,
 * found again when registered again, and their records reused. */
TEST(long_labels)
{
	struct tally_zone *z = zone(0, 4096);
	static char buf[TALLY_LABEL_PAIRS_MAX + 1][2][TALLY_LABELS_MAX + 1];
	struct tally_label l[TALLY_LABEL_PAIRS_MAX + 1];
	struct tally_label route[] = {
		{ "code", "200" }, { "instance_type", "primary" },
		{ "method", "GET" },
		{ "route", "/api/v1/organizations/{org_id}/projects/"
			   "{project_id}/members" },
	};
	struct tally_metric_desc d = desc(TALLY_COUNTER, "http_requests");
	tally_metric m, m2, big, many;
	struct snap sn;
	char *want;
	uint32_t hwm;

	/* The example: 130 bytes. */
	d.labels = route;
	d.nlabels = 4;
	CHECK_EQ(register_any(z, &d, &m), 0);
	tally_counter_add((tally_counter *)&m, 7);
	CHECK_EQ(register_any(z, &d, &m2), 0);
	CHECK_EQ(m2.series, m.series);
	tally_counter_add((tally_counter *)&m2, 5);

	/* TALLY_LABELS_MAX bytes of names and values, in 4 pairs. */
	make_labels(l, 4, TALLY_LABELS_MAX, buf, 'x');
	d = desc(TALLY_GAUGE, "big_labels");
	d.labels = l;
	d.nlabels = 4;
	CHECK_EQ(register_any(z, &d, &big), 0);
	tally_gauge_add((tally_gauge *)&big, -3);
	/* One byte more: refused, never cut. */
	make_labels(l, 4, TALLY_LABELS_MAX + 1, buf, 'x');
	CHECK_EQ(register_any(z, &d, &m2), -E2BIG);
	CHECK(strstr(tally_errmsg(), "big_labels") != NULL);
	/* TALLY_LABEL_PAIRS_MAX pairs; one more is refused. */
	make_labels(l, TALLY_LABEL_PAIRS_MAX + 1, 2000, buf, 'p');
	d = desc(TALLY_COUNTER, "many_pairs");
	d.labels = l;
	d.nlabels = TALLY_LABEL_PAIRS_MAX + 1;
	CHECK_EQ(register_any(z, &d, &m2), -E2BIG);
	make_labels(l, TALLY_LABEL_PAIRS_MAX, 2000, buf, 'p');
	d.nlabels = TALLY_LABEL_PAIRS_MAX;
	CHECK_EQ(register_any(z, &d, &many), 0);
	tally_counter_add((tally_counter *)&many, 11);

	sn = read_zone(z);
	CHECK_EQ(sn.n, 3);
	want = joined(route, 4);
	CHECK(snap_find(&sn, "http_requests", want) != NULL);
	CHECK_EQ(snap_find(&sn, "http_requests", want)->value, 12);
	free(want);
	want = joined(l, TALLY_LABEL_PAIRS_MAX);
	CHECK(snap_find(&sn, "many_pairs", want) != NULL);
	CHECK_EQ(snap_find(&sn, "many_pairs", want)->value, 11);
	free(want);
	make_labels(l, 4, TALLY_LABELS_MAX, buf, 'x');
	want = joined(l, 4);
	CHECK(snap_find(&sn, "big_labels", want) != NULL);
	CHECK_EQ(snap_find(&sn, "big_labels", want)->value, -3);
	free(want);
	snap_free(&sn);

	/* Registered again: the same series; removed and registered again
	 * many times: the records come back, the table does not grow. */
	d = desc(TALLY_GAUGE, "big_labels");
	d.labels = l;
	d.nlabels = 4;
	CHECK_EQ(register_any(z, &d, &m2), 0);
	CHECK_EQ(m2.series, big.series);
	CHECK_EQ(tally_metric_remove(&m2), 0);
	hwm = atomic_load(&hdr(z)->series_hwm);
	for (int i = 0; i < 200; i++) {
		CHECK_EQ(tally_metric_remove(&big), 0);
		make_labels(l, 4, TALLY_LABELS_MAX - (size_t)i, buf,
			    (char)('a' + i % 26));
		CHECK_EQ(register_any(z, &d, &big), 0);
	}
	CHECK_EQ(atomic_load(&hdr(z)->series_hwm), hwm);
	CHECK_EQ(tally_metric_remove(&big), 0);
	m2 = m; /* a copy gives back the second registration */
	CHECK_EQ(tally_metric_remove(&m), 0);
	CHECK_EQ(tally_metric_remove(&m2), 0);
	CHECK_EQ(tally_metric_remove(&many), 0);
	sn = read_zone(z);
	CHECK_EQ(sn.n, 0);
	snap_free(&sn);
}

/* A long label set takes 1 + ceil(bytes / 108) records of the zone's
 * max_series: a zone with fewer free records refuses it, and keeps no
 * record of the attempt. */
TEST(long_labels_fill_the_table)
{
	struct tally_zone *z = zone(0, 8);
	static char buf[4][2][TALLY_LABELS_MAX + 1];
	struct tally_label l[4];
	struct tally_metric_desc d = desc(TALLY_COUNTER, "fill");
	tally_metric m, small[8];

	make_labels(l, 2, 1000, buf, 'f');
	d.labels = l;
	d.nlabels = 2;
	CHECK_EQ(register_any(z, &d, &m), -ENOSPC);
	for (int i = 0; i < 8; i++) {
		char v[8];

		snprintf(v, sizeof(v), "%d", i);
		CHECK_EQ(reg1(z, "small", "i", v, &small[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		CHECK_EQ(tally_metric_remove(&small[i]), 0);
	make_labels(l, 2, 700, buf, 'f'); /* 1 + 7 records */
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(reg1(z, "small", "i", "x", &small[0]), -ENOSPC);
	CHECK_EQ(tally_metric_remove(&m), 0);
	CHECK_EQ(reg1(z, "small", "i", "x", &small[0]), 0);
}

TEST(bad_arguments)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_COUNTER, "x");
	tally_metric m;
	static const struct {
		unsigned sub, max;
		int ok;
	} bits[] = {
		{ 0, 0, 1 },  /* defaults: 3, 40 */
		{ 1, 2, 1 },  { 1, 63, 1 }, { 7, 8, 1 },  { 6, 12, 1 },
		{ 5, 18, 1 }, { 8, 20, 0 }, { 3, 3, 0 },  { 3, 2, 0 },
		{ 3, 64, 0 }, { 7, 10, 0 }, /* 512 buckets: one too many */
		{ 6, 13, 0 }, /* 512 */     { 0, 2, 1 },  /* sub 3 > max 2 */
	};

	CHECK_EQ(register_any(z, NULL, &m), -EINVAL);
	CHECK_EQ(register_any(z, &d, NULL), -EINVAL);
	/* A description of another kind than the function's. */
	CHECK_EQ(tally_gauge_register(z, &d, (tally_gauge *)&m), -EINVAL);
	CHECK(strstr(tally_errmsg(), "kind is 1") != NULL);
	d.kind = TALLY_GAUGE;
	CHECK_EQ(tally_histogram_register(z, &d, (tally_histogram *)&m),
		 -EINVAL);
	d.kind = TALLY_FGAUGE + 1;
	CHECK_EQ(register_any(z, &d, &m), -EINVAL);
	d.kind = TALLY_COUNTER;
	d.mode = 4;
	CHECK_EQ(register_any(z, &d, &m), -EINVAL);
	d.mode = TALLY_PERCPU;
	d.unit = "a-b";
	CHECK_EQ(register_any(z, &d, &m), -EINVAL);
	d.unit = "seconds_2";
	d.hist_sub_bits = 3;
	CHECK_EQ(register_any(z, &d, &m), -EINVAL);
	d.hist_sub_bits = 0;
	d.hist_max_bits = 20;
	CHECK_EQ(register_any(z, &d, &m), -EINVAL);
	d.hist_max_bits = 0;
	CHECK_EQ(register_any(z, &d, &m), 0);

	for (size_t i = 0; i < ARRAY_SIZE(bits); i++) {
		char name[32];
		int rc;

		snprintf(name, sizeof(name), "hist_%zu", i);
		d = desc(TALLY_HISTOGRAM, name);
		d.hist_sub_bits = bits[i].sub;
		d.hist_max_bits = bits[i].max;
		rc = register_any(z, &d, &m);
		/* { 0, 2 } takes sub = 3 > max = 2: refused. */
		if (bits[i].sub == 0 && bits[i].max == 2) {
			CHECK_EQ(rc, -EINVAL);
			continue;
		}
		if (rc != (bits[i].ok ? 0 : -EINVAL))
			harness_fail(__FILE__, __LINE__, "sub %u max %u: %d",
				     bits[i].sub, bits[i].max, rc);
		if (rc == 0) {
			unsigned sub = bits[i].sub ? bits[i].sub : 3;
			unsigned max = bits[i].max ? bits[i].max : 40;

			CHECK_EQ(m.sub_bits, sub);
			CHECK_EQ(m.max_bits, max);
			CHECK_EQ(m.kind, TALLY_HISTOGRAM);
		}
	}
	CHECK_EQ(tally_metric_remove(NULL), -EINVAL);
	memset(&m, 0, sizeof(m));
	CHECK_EQ(tally_metric_remove(&m), -EINVAL);
	CHECK_EQ(tally_metric_fetch(NULL, NULL), -EINVAL);
	CHECK_EQ(tally_metric_fetch(&m, NULL), -EINVAL);
}

/* Failures, and registrations that find their series, must leave no
 * block behind. */
TEST(failed_register_leaks_nothing)
{
	/* One chunk: 512 one-slot blocks in all. */
	struct tally_zone *z = zone(TALLY_CHUNK_SLOTS, 64);
	struct tally_metric_desc d = desc(TALLY_COUNTER, "once");
	tally_metric m, ms[8];

	CHECK_EQ(register_any(z, &d, &m), 0);
	for (int i = 0; i < 5000; i++) {
		tally_metric again;

		CHECK_EQ(register_any(z, &d, &again), 0);
		CHECK(again.block == m.block);
		/* Another help text: the same series, its help replaced. */
		d.help = "another help";
		CHECK_EQ(register_any(z, &d, &again), 0);
		CHECK(again.block == m.block);
		d.help = NULL;
	}
	for (int i = 0; i < 8; i++) {
		char v[8];

		snprintf(v, sizeof(v), "%d", i);
		CHECK_EQ(reg1(z, "once", "i", v, &ms[i]), 0);
	}
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 1);
	CHECK_EQ(atomic_load(&hdr(z)->series_hwm), 9);
	CHECK_EQ(hdr(z)->series_live, 9);
}

TEST(duplicate_series)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_label ab[] = { { "a", "1" }, { "b", "2" }, { "c", "3" } };
	struct tally_label ba[] = { { "c", "3" }, { "a", "1" }, { "b", "2" } };
	struct tally_label other[] = { { "a", "1" }, { "b", "2" }, { "c", "4" } };
	struct tally_metric_desc d = desc(TALLY_COUNTER, "dup");
	tally_metric m1, m2;
	struct snap sn;

	d.labels = ab;
	d.nlabels = 3;
	CHECK_EQ(register_any(z, &d, &m1), 0);
	/* Get-or-create: the same series, whatever the label order. */
	CHECK_EQ(register_any(z, &d, &m2), 0);
	CHECK(m2.block == m1.block);
	CHECK_EQ(m2.series, m1.series);
	d.labels = ba;
	CHECK_EQ(register_any(z, &d, &m2), 0);
	CHECK(m2.block == m1.block);
	d.labels = other;
	CHECK_EQ(register_any(z, &d, &m2), 0);
	/* Fewer labels, or none, is another series. */
	d.labels = ab;
	d.nlabels = 2;
	CHECK_EQ(register_any(z, &d, &m2), 0);
	d.nlabels = 0;
	CHECK_EQ(register_any(z, &d, &m2), 0);
	CHECK_EQ(register_any(z, &d, &m1), 0);
	CHECK(m2.block == m1.block);
	/* The same labels under another name. */
	d = desc(TALLY_COUNTER, "dup2");
	d.labels = ba;
	d.nlabels = 3;
	CHECK_EQ(register_any(z, &d, &m2), 0);

	sn = read_zone(z);
	CHECK_EQ(sn.n, 5);
	/* Stored sorted by label name, whatever the order given. */
	CHECK(snap_find(&sn, "dup", "a=1,b=2,c=3") != NULL);
	CHECK(snap_find(&sn, "dup", "a=1,b=2,c=4") != NULL);
	CHECK(snap_find(&sn, "dup", "a=1,b=2") != NULL);
	CHECK(snap_find(&sn, "dup", "") != NULL);
	CHECK(snap_find(&sn, "dup2", "a=1,b=2,c=3") != NULL);
	snap_free(&sn);
}

/*
 * A definition that changes is never refused: help and unit are
 * replaced (the newest registration's), and another kind, mode or
 * histogram layout is a new generation of the metric, the only one
 * readers show; handles of the older one go on counting.
 */
TEST(definition_conflicts)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_COUNTER, "fam");
	tally_metric m, first;
	struct tally_label l = { "k", "1" };
	const struct tally__metric_rec *mrecs;
	struct snap sn;

	d.help = "Help.";
	d.unit = "bytes";
	CHECK_EQ(register_any(z, &d, &first), 0);
	d.labels = &l;
	d.nlabels = 1;
	/* Another kind: one generation each. */
	d.kind = TALLY_GAUGE;
	CHECK_EQ(register_any(z, &d, &m), 0);
	d.kind = TALLY_GAUGE_SET;
	CHECK_EQ(register_any(z, &d, &m), 0);
	d.kind = TALLY_HISTOGRAM;
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 4);
	CHECK_EQ(atomic_load(&hdr(z)->redefinitions), 3);
	/* Back to the first definition: its record is current again, with
	 * its series (no new record), and the first handle's adds are
	 * shown again. */
	d.kind = TALLY_COUNTER;
	d.labels = NULL;
	d.nlabels = 0;
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK(m.block == first.block);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 4);
	CHECK_EQ(atomic_load(&hdr(z)->redefinitions), 4);
	d.labels = &l;
	d.nlabels = 1;
	/* Another help or unit: the same generation, retexted. */
	CHECK_EQ(register_any(z, &d, &m), 0);
	d.help = "Other help.";
	CHECK_EQ(register_any(z, &d, &m), 0);
	d.help = NULL;
	CHECK_EQ(register_any(z, &d, &m), 0);
	d.help = "Help.";
	d.unit = "seconds";
	CHECK_EQ(register_any(z, &d, &m), 0);
	d.unit = NULL;
	CHECK_EQ(register_any(z, &d, &m), 0);
	d.unit = "bytes";
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 4);
	/* Another mode: a new generation, after the last one made. */
	d.mode = TALLY_SHARED;
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(tally_block_mode(m.block), TALLY_SHARED);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 5);
	mrecs = (const struct tally__metric_rec *)((char *)hdr(z) +
					      hdr(z)->metric_off);
	CHECK_EQ(mrecs[4].generation, 4);
	CHECK_EQ(mrecs[4].prev, 4);
	CHECK_EQ(mrecs[4].flags, 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(mrecs[i].flags, TALLY__METRIC_SUPERSEDED);
	/* The first handle still counts, into its own generation; readers
	 * show the newest one only. */
	tally_counter_add(counter_of(&first), 5);
	CHECK_EQ(fetch(&first), 5);
	tally_counter_add(counter_of(&m), 2);
	sn = read_zone(z);
	CHECK_EQ(sn.n, 1);
	CHECK(!strcmp(sn.s[0].name, "fam"));
	CHECK(!strcmp(sn.s[0].labels, "k=1"));
	CHECK(!strcmp(sn.s[0].help, "Help."));
	CHECK(!strcmp(sn.s[0].unit, "bytes"));
	CHECK_EQ(sn.s[0].mode, TALLY_SHARED);
	CHECK_EQ(sn.s[0].value, 2);
	snap_free(&sn);

	/* Histogram layouts. */
	d = desc(TALLY_HISTOGRAM, "lat");
	CHECK_EQ(register_any(z, &d, &m), 0);
	d.labels = &l;
	d.nlabels = 1;
	d.hist_sub_bits = 3;
	d.hist_max_bits = 40; /* the defaults, spelt out: the same record */
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 6);
	l.value = "2";
	d.hist_sub_bits = 2;
	CHECK_EQ(register_any(z, &d, &m), 0);
	d.hist_sub_bits = 3;
	d.hist_max_bits = 41;
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 8);

	/* A set gauge is always shared: any mode asked gives one record. */
	d = desc(TALLY_GAUGE_SET, "temp");
	d.mode = TALLY_PERCPU;
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(tally_block_mode(m.block), TALLY_SHARED);
	l.value = "3";
	d.labels = &l;
	d.nlabels = 1;
	d.mode = TALLY_ADAPTIVE;
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(tally_block_mode(m.block), TALLY_SHARED);

	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 9);
	CHECK_EQ(atomic_load(&hdr(z)->redefinitions), 7);
}

/*
 * A label family keeps making its children in the generation it was defined
 * in (a process of the old version, during a rolling deploy), while a
 * direct registration follows the newest; a reader sees the help text
 * that was registered last, without reopening the file.
 */
TEST(family_children_stay_in_their_generation)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_COUNTER, "req_total");
	const char *names[] = { "code" }, *ok[] = { "200" },
		   *err[] = { "500" };
	tally_counter_family old;
	const tally_counter *c;
	struct tally_label l = { "code", "200" };
	tally_metric m;
	struct tally_seg *s;
	struct snap sn = { 0, 0, NULL };

	d.help = "Old help.";
	CHECK_EQ(tally_counter_family_register(z, &d, names, 1, &old), 0);
	CHECK_EQ(tally_counter_family_get(&old, ok, 1, &c), 0);
	tally_counter_add(c, 3);
	s = tally_seg_open(tally_zone_path(z), NULL);
	CHECK(s != NULL);
	CHECK_EQ(tally_seg_foreach(s, 0, snap_cb, &sn), 1);
	CHECK(!strcmp(sn.s[0].help, "Old help."));
	sn.n = 0;

	/* The new version: another mode, another help. */
	d.help = "New help.";
	d.mode = TALLY_SHARED;
	d.labels = &l;
	d.nlabels = 1;
	CHECK_EQ(register_any(z, &d, &m), 0);
	tally_counter_add(counter_of(&m), 10);
	/* The old label family's new child: its own generation, not shown. */
	CHECK_EQ(tally_counter_family_get(&old, err, 1, &c), 0);
	tally_counter_add(c, 1);
	CHECK_EQ(fetch(&c->metric), 1);
	CHECK_EQ(tally_seg_foreach(s, 0, snap_cb, &sn), 1);
	CHECK(!strcmp(sn.s[0].labels, "code=200"));
	CHECK_EQ(sn.s[0].value, 10);
	CHECK_EQ(sn.s[0].mode, TALLY_SHARED);
	CHECK(!strcmp(sn.s[0].help, "New help."));
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 2);
	/* Help only: the same generation, the text replaced, seen by the
	 * open reader. */
	d.help = "Newer help.";
	CHECK_EQ(register_any(z, &d, &m), 0);
	sn.n = 0;
	CHECK_EQ(tally_seg_foreach(s, 0, snap_cb, &sn), 1);
	CHECK(!strcmp(sn.s[0].help, "Newer help."));
	CHECK_EQ(sn.s[0].value, 10);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 2);
	{
		struct tally_seg_info in;

		CHECK_EQ(tally_seg_info(s, &in), 0);
		CHECK_EQ(in.redefinitions, 1);
	}
	tally_seg_close(s);
	snap_free(&sn);
	CHECK_EQ(tally_family_remove(&old.family), 0);
}

/* Two versions that take turns registering (a rolling deploy of a
 * program that registers as it goes) make no new record after the
 * first change: each turn makes the other generation current again. */
TEST(alternating_definitions_reuse_their_generations)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_COUNTER, "flip");
	tally_metric c, g;

	for (int i = 0; i < 10000; i++) {
		d.kind = TALLY_COUNTER;
		CHECK_EQ(register_any(z, &d, &c), 0);
		tally_counter_inc(counter_of(&c));
		d.kind = TALLY_GAUGE;
		CHECK_EQ(register_any(z, &d, &g), 0);
	}
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 2);
	CHECK_EQ(fetch(&c), 10000);
	CHECK_EQ(atomic_load(&hdr(z)->redefinitions), 19999);
}

/* tally_metric_redefine: a changed definition supersedes the metrics
 * named, at once; the same one again changes nothing. */
TEST(redefine_supersedes_named_metrics)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc def = desc(TALLY_COUNTER, "jobs");
	struct tally_metric_desc d = desc(TALLY_COUNTER, "jobs_total");
	const char *parts[] = { "jobs_total", "jobs:gauge" };
	struct tally_label l = { "queue", "1" };
	tally_metric m, again;
	struct snap sn;

	def.help = "v1";
	CHECK_EQ(tally_metric_redefine(z, &def, parts, 2), 0);
	CHECK_EQ(register_any(z, &d, &m), 0);
	tally_counter_add(counter_of(&m), 4);
	CHECK_EQ(tally_metric_redefine(z, &def, parts, 2), 0);
	sn = read_zone(z);
	CHECK_EQ(sn.n, 1);
	snap_free(&sn);
	def.help = "v2";
	CHECK_EQ(tally_metric_redefine(z, &def, parts, 2), 1);
	CHECK_EQ(atomic_load(&hdr(z)->redefinitions), 1);
	sn = read_zone(z);
	CHECK_EQ(sn.n, 0);
	snap_free(&sn);
	/* The new definition's jobs_total (other label names): a new
	 * generation, from zero. */
	d.labels = &l;
	d.nlabels = 1;
	CHECK_EQ(register_any(z, &d, &again), 0);
	CHECK(again.block != m.block);
	CHECK_EQ(fetch(&again), 0);
	sn = read_zone(z);
	CHECK_EQ(sn.n, 1);
	CHECK_EQ(sn.s[0].value, 0);
	snap_free(&sn);
	CHECK_EQ(tally_metric_redefine(z, &def, parts, 2), 0);
	CHECK_EQ(tally_metric_redefine(z, &def, NULL, 1), -EINVAL);
}

/* The one series of @z (its labels and value), read back. */
static void one_shown(struct tally_zone *z, const char *labels,
		      int64_t value)
{
	struct snap sn = read_zone(z);

	CHECK_EQ(sn.n, 1);
	CHECK(!strcmp(sn.s[0].labels, labels));
	CHECK_EQ(sn.s[0].value, value);
	snap_free(&sn);
}

/* One turn of a binding's definition @help of jobs, whose jobs_total
 * has label names @names (@n of them): its child of values x, y (the
 * first @n) holds @before, counts one more, and is all readers show. */
static void take_turn(struct tally_zone *z, const char *help,
		      const char *const *names, unsigned n,
		      tally_counter_family *f, int64_t before,
		      const char *shown)
{
	struct tally_metric_desc def = desc(TALLY_COUNTER, "jobs");
	struct tally_metric_desc d = desc(TALLY_COUNTER, "jobs_total");
	const char *parts[] = { "jobs_total" }, *xy[] = { "x", "y" };
	const tally_counter *c;

	def.help = help;
	CHECK_EQ(tally_metric_redefine(z, &def, parts, 1), 1);
	CHECK_EQ(tally_counter_family_register(z, &d, names, n, f), 0);
	CHECK_EQ(tally_counter_family_get(f, xy, n, &c), 0);
	CHECK_EQ(fetch(&c->metric), before);
	tally_counter_add(c, 1);
	one_shown(z, shown, before + 1);
}

/*
 * A generation that tally_metric_redefine() retired comes back for the
 * label names of its series only: those tell a binding's definitions
 * apart where the record cannot (the Python package's counter with other
 * label names).  Two definitions that take turns resume their own
 * counts, with no new record after the first turn, and readers show one
 * definition's series at a time.
 */
TEST(retired_generation_comes_back_for_its_label_names)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc def = desc(TALLY_COUNTER, "jobs");
	struct tally_metric_desc d = desc(TALLY_COUNTER, "jobs_total");
	const char *parts[] = { "jobs_total" }, *one[] = { "a" },
		   *two[] = { "a", "b" }, *x[] = { "x" }, *xy[] = { "x", "y" };
	tally_counter_family f1[4], f2[4];
	const tally_counter *c;

	def.help = "v1";
	CHECK_EQ(tally_metric_redefine(z, &def, parts, 1), 0);
	CHECK_EQ(tally_counter_family_register(z, &d, one, 1, &f1[0]), 0);
	CHECK_EQ(tally_counter_family_get(&f1[0], x, 1, &c), 0);
	tally_counter_add(c, 4);

	/* Other label names: not the retired generation, a new one. */
	def.help = "v2";
	CHECK_EQ(tally_metric_redefine(z, &def, parts, 1), 1);
	CHECK_EQ(tally_counter_family_register(z, &d, two, 2, &f2[0]), 0);
	CHECK_EQ(tally_counter_family_get(&f2[0], xy, 2, &c), 0);
	CHECK_EQ(fetch(&c->metric), 0);
	tally_counter_add(c, 5);
	one_shown(z, "a=x,b=y", 5);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 3);

	/* Each definition again, in turns: its own series and counts. */
	for (int turn = 1; turn <= 3; turn++) {
		take_turn(z, "v1", one, 1, &f1[turn], 3 + turn, "a=x");
		take_turn(z, "v2", two, 2, &f2[turn], 4 + turn, "a=x,b=y");
	}
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 3);
	/* Removing a label family removes its children's series: last. */
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(tally_family_remove(&f1[i].family), 0);
		CHECK_EQ(tally_family_remove(&f2[i].family), 0);
	}
}

/*
 * A retired generation comes back after its name had another kind (a
 * counter that was a gauge for one version), and a retired one without
 * series never does: nothing tells which definition it was.
 */
TEST(retired_generation_comes_back_after_another_kind)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc def = desc(TALLY_COUNTER, "jobs");
	struct tally_metric_desc d = desc(TALLY_COUNTER, "jobs_total");
	struct tally_metric_desc idle = desc(TALLY_COUNTER, "idle_total");
	const char *parts[] = { "jobs_total", "idle_total" }, *one[] = { "a" };
	tally_counter_family f;
	tally_metric m, other, again;

	def.help = "v1";
	CHECK_EQ(tally_metric_redefine(z, &def, parts, 2), 0);
	CHECK_EQ(register_any(z, &d, &m), 0);
	tally_counter_add(counter_of(&m), 4);
	CHECK_EQ(tally_counter_family_register(z, &idle, one, 1, &f), 0);
	CHECK_EQ(tally_family_remove(&f.family), 0);
	def.help = "v2";
	CHECK_EQ(tally_metric_redefine(z, &def, parts, 2), 1);
	/* Another definition of jobs_total (a gauge): a new generation. */
	d.kind = TALLY_GAUGE;
	CHECK_EQ(register_any(z, &d, &other), 0);
	tally_gauge_add(gauge_of(&other), 9);
	one_shown(z, "", 9);
	/* The first definition again: the retired generation, its count. */
	d.kind = TALLY_COUNTER;
	CHECK_EQ(register_any(z, &d, &again), 0);
	CHECK(again.block == m.block);
	CHECK_EQ(fetch(&again), 4);
	tally_counter_add(counter_of(&again), 1);
	one_shown(z, "", 5);
	/* And the gauge's generation is one a rollback takes back. */
	d.kind = TALLY_GAUGE;
	CHECK_EQ(register_any(z, &d, &other), 0);
	CHECK_EQ(fetch(&other), 9);
	one_shown(z, "", 9);
	/* Without series: a new generation each time. */
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 4);
	CHECK_EQ(tally_counter_family_register(z, &idle, one, 1, &f), 0);
	CHECK_EQ(tally_family_remove(&f.family), 0);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), 5);
}

TEST(remove_and_reregister)
{
	struct tally_zone *z = zone(0, 0);
	tally_metric m1, copy, m2, m3;
	struct snap sn;
	uint64_t gen0 = atomic_load(&hdr(z)->series_gen);

	CHECK_EQ(reg1(z, "conn", "id", "1", &m1), 0);
	tally_counter_add(counter_of(&m1), 7);
	copy = m1;
	CHECK_EQ(tally_metric_remove(&m1), 0);
	CHECK(m1.block == NULL);
	/* Double removal, through the same handle or a copy. */
	CHECK_EQ(tally_metric_remove(&m1), -EINVAL);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(tally_metric_remove(&copy), -EINVAL);
	sn = read_zone(z);
	CHECK_EQ(sn.n, 0);
	snap_free(&sn);

	/* The same series again: a fresh value, in the record just freed. */
	CHECK_EQ(reg1(z, "conn", "id", "1", &m2), 0);
	CHECK_EQ(m2.series, copy.series);
	CHECK_EQ(fetch(&m2), 0);
	tally_counter_add(counter_of(&m2), 5);
	/* A stale copy of the old handle must not remove the new series. */
	CHECK_EQ(tally_metric_remove(&copy), -EINVAL);
	CHECK_EQ(fetch(&m2), 5);
	/* A new registration of it is the same series, and holds it: the
	 * first removal leaves it, and the stale copy is still refused. */
	CHECK_EQ(reg1(z, "conn", "id", "1", &m3), 0);
	CHECK(m3.block == m2.block);
	CHECK_EQ(tally_metric_remove(&m3), 0);
	CHECK_EQ(tally_metric_remove(&copy), -EINVAL);
	sn = read_zone(z);
	CHECK_EQ(sn.n, 1);
	CHECK(snap_find(&sn, "conn", "id=1") != NULL);
	CHECK_EQ(snap_find(&sn, "conn", "id=1")->value, 5);
	snap_free(&sn);

	/* Another series in the reused record, then the first one back. */
	CHECK_EQ(tally_metric_remove(&m2), 0);
	CHECK_EQ(reg1(z, "conn", "id", "2", &m3), 0);
	CHECK_EQ(m3.series, copy.series);
	CHECK_EQ(reg1(z, "conn", "id", "1", &m2), 0);
	CHECK_EQ(fetch(&m2), 0);
	CHECK_EQ(fetch(&m3), 0);
	sn = read_zone(z);
	CHECK_EQ(sn.n, 2);
	CHECK_EQ(snap_find(&sn, "conn", "id=1")->value, 0);
	CHECK_EQ(snap_find(&sn, "conn", "id=2")->value, 0);
	snap_free(&sn);
	/* Register, remove, register, remove, register, register. */
	CHECK_EQ(atomic_load(&hdr(z)->series_gen) - gen0, 6);
	CHECK_EQ(hdr(z)->series_live, 2);
}

/* ---- values ---- */

#define MAX_T 64

struct adder {
	tally_metric *m;
	long iters;
	int64_t amount;
	int cpu;
	int op; /* 0 add, 1 inc, 2 dec, 3 inc then dec, 4 observe */
	pthread_barrier_t *bar;
};

static void *adder_main(void *arg)
{
	struct adder *a = arg;

	if (a->cpu >= 0)
		harness_pin(a->cpu);
	pthread_barrier_wait(a->bar);
	for (long i = 0; i < a->iters; i++) {
		switch (a->op) {
		case 0:
			tally_counter_add(counter_of(a->m), a->amount);
			break;
		case 1:
			tally_gauge_inc(gauge_of(a->m));
			break;
		case 2:
			tally_gauge_dec(gauge_of(a->m));
			break;
		case 3:
			tally_gauge_inc(gauge_of(a->m));
			if (i % 64 == 0)
				sched_yield();
			tally_gauge_dec(gauge_of(a->m));
			break;
		case 4:
			tally_histogram_observe(histogram_of(a->m), (uint64_t)(i % 1000));
			break;
		}
		/* Move between CPUs now and then. */
		if (a->cpu < 0 && i % 4096 == 0)
			harness_pin((int)(i / 4096) % harness_ncpus());
	}
	return NULL;
}

static void run_adders(struct adder *a, int n)
{
	pthread_t t[MAX_T];
	pthread_barrier_t bar;

	CHECK(n <= MAX_T);
	pthread_barrier_init(&bar, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		a[i].bar = &bar;
		CHECK_EQ(pthread_create(&t[i], NULL, adder_main, &a[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&bar);
}

TEST(counters_exact_every_mode)
{
	struct tally_zone *z = zone(0, 0);
	static const unsigned modes[] = { TALLY_PERCPU, TALLY_SHARED,
					  TALLY_PERNODE, TALLY_ADAPTIVE };
	static const char *names[] = { "c_percpu", "c_shared", "c_pernode",
				       "c_adaptive" };
	int nt = (int)harness_scale(8);
	long iters = harness_scale(200000);
	tally_metric m[4];
	struct adder a[MAX_T];
	struct snap sn;

	for (int k = 0; k < 4; k++) {
		struct tally_metric_desc d = desc(TALLY_COUNTER, names[k]);
		int64_t expect = 0;

		d.mode = modes[k];
		CHECK_EQ(register_any(z, &d, &m[k]), 0);
		CHECK_EQ(tally_block_mode(m[k].block), (int)modes[k]);
		for (int i = 0; i < nt; i++) {
			a[i] = (struct adder){ &m[k], iters, 1 + 1000 * i, -1,
					       0, NULL };
			expect += (1 + 1000 * i) * iters;
		}
		run_adders(a, nt);
		CHECK_EQ(fetch(&m[k]), expect);
		/* Big and negative amounts (a counter's adds are not checked). */
		tally_counter_add(counter_of(&m[k]), INT64_C(1) << 40);
		tally_counter_add(counter_of(&m[k]), -(INT64_C(1) << 40));
		CHECK_EQ(fetch(&m[k]), expect);
	}
	sn = read_zone(z);
	CHECK_EQ(sn.n, 4);
	for (int k = 0; k < 4; k++) {
		const struct seen *e = snap_find(&sn, names[k], "");
		int64_t expect = 0;

		for (int i = 0; i < nt; i++)
			expect += (1 + 1000 * i) * iters;
		CHECK(e != NULL);
		CHECK_EQ(e->value, expect);
		CHECK_EQ(e->mode, modes[k]);
		CHECK_EQ(e->kind, TALLY_COUNTER);
		/* Adaptive adds made before promotion belong to no CPU, nor
		 * do the fallback adds of threads that own no fallback copy
		 * (more threads than copies). */
		if (modes[k] != TALLY_ADAPTIVE &&
		    (modes[k] != TALLY_PERCPU || tally_rseq_active()))
			CHECK_EQ(e->percpu_sum, expect);
		else
			CHECK(e->percpu_sum <= expect && e->percpu_sum >= 0);
	}
	snap_free(&sn);
}

TEST(gauge_in_flight_ends_at_zero)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_GAUGE, "in_flight");
	long iters = harness_scale(300000);
	int ncpu = harness_ncpus();
	tally_metric m, m2;
	struct adder a[MAX_T];
	struct snap sn;
	int n = 0;

	CHECK_EQ(register_any(z, &d, &m), 0);
	/* Each thread submits and completes, moving between CPUs. */
	for (int i = 0; i < 6; i++)
		a[n++] = (struct adder){ &m, iters, 0, -1, 3, NULL };
	/* Submissions on one CPU, completions on another: the copies go
	 * far from zero in both directions, their sum ends at 0. */
	for (int i = 0; i < 3; i++) {
		a[n++] = (struct adder){ &m, iters, 0, 0, 1, NULL };
		a[n++] = (struct adder){ &m, iters, 0, ncpu > 1 ? 1 : 0, 2,
					 NULL };
	}
	run_adders(a, n);
	CHECK_EQ(fetch(&m), 0);

	/* A gauge left at -5 by one thread and +2 by another. */
	d.name = "in_flight2";
	CHECK_EQ(register_any(z, &d, &m2), 0);
	a[0] = (struct adder){ &m2, 5, 0, 0, 2, NULL };
	a[1] = (struct adder){ &m2, 2, 0, ncpu > 1 ? 1 : 0, 1, NULL };
	run_adders(a, 2);
	CHECK_EQ(fetch(&m2), -3);

	sn = read_zone(z);
	CHECK_EQ(snap_find(&sn, "in_flight", "")->value, 0);
	if (tally_rseq_active()) /* else: see counters_exact_every_mode */
		CHECK_EQ(snap_find(&sn, "in_flight", "")->percpu_sum, 0);
	CHECK_EQ(snap_find(&sn, "in_flight2", "")->value, -3);
	CHECK_EQ(snap_find(&sn, "in_flight2", "")->kind, TALLY_GAUGE);
	snap_free(&sn);
}

TEST(gauge_set_values)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_GAUGE_SET, "temperature");
	static const int64_t vals[] = { 42, -7, 0, INT64_MAX, INT64_MIN, 1 };
	tally_metric m;
	struct snap sn;

	d.unit = "celsius";
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(fetch(&m), 0);
	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		tally_setgauge_set(setgauge_of(&m), vals[i]);
		CHECK_EQ(fetch(&m), vals[i]);
		sn = read_zone(z);
		CHECK_EQ(sn.n, 1);
		CHECK_EQ(sn.s[0].value, vals[i]);
		CHECK_EQ(sn.s[0].mode, TALLY_SHARED);
		CHECK_EQ(sn.s[0].kind, TALLY_GAUGE_SET);
		CHECK(!strcmp(sn.s[0].unit, "celsius"));
		snap_free(&sn);
	}
	/* Adds work on a set gauge too, and a set overrides them. */
	tally_setgauge_set(setgauge_of(&m), 10);
	tally_setgauge_add(setgauge_of(&m), 5);
	tally_setgauge_add(setgauge_of(&m), -2);
	CHECK_EQ(fetch(&m), 13);
	tally_setgauge_set(setgauge_of(&m), 3);
	CHECK_EQ(fetch(&m), 3);
	/* The real (out-of-line) symbols do the same. */
	(tally_setgauge_set)(setgauge_of(&m), 99);
	(tally_setgauge_add)(setgauge_of(&m), 1);
	CHECK_EQ(fetch(&m), 100);
}

TEST(fgauge_values)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_FGAUGE, "load_ratio");
	static const double vals[] = { 0.1, -2.5, 0.0, 1e300, -1e-300,
				       12345678901234567890.0, -0.0 };
	static const int64_t as_int[] = { 0, -2, 0, INT64_MAX, 0, INT64_MAX,
					  0 };
	tally_metric m, same;
	struct snap sn;
	double v;

	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(tally_fgauge_fetch(fgauge_of(&m), &v), 0);
	CHECK(v == 0.0);
	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		tally_fgauge_set(fgauge_of(&m), vals[i]);
		CHECK_EQ(tally_fgauge_fetch(fgauge_of(&m), &v), 0);
		CHECK(memcmp(&v, &vals[i], sizeof(v)) == 0); /* exactly */
		CHECK_EQ(fetch(&m), as_int[i]);
		sn = read_zone(z);
		CHECK_EQ(sn.n, 1);
		CHECK_EQ(sn.s[0].kind, TALLY_FGAUGE);
		CHECK_EQ(sn.s[0].mode, TALLY_SHARED);
		CHECK(memcmp(&sn.s[0].fvalue, &vals[i], sizeof(v)) == 0);
		CHECK_EQ(sn.s[0].value, as_int[i]);
		snap_free(&sn);
	}
	/* NaN and the infinities are held too; NaN reads as 0 in int64. */
	tally_fgauge_set(fgauge_of(&m), NAN);
	CHECK_EQ(fetch(&m), 0);
	sn = read_zone(z);
	CHECK(isnan(sn.s[0].fvalue));
	snap_free(&sn);
	tally_fgauge_set(fgauge_of(&m), -INFINITY);
	CHECK_EQ(fetch(&m), INT64_MIN);
	/* Adds; the out-of-line symbols do the same. */
	tally_fgauge_set(fgauge_of(&m), 0.5);
	tally_fgauge_add(fgauge_of(&m), 0.25);
	(tally_fgauge_add)(fgauge_of(&m), -1.0);
	CHECK_EQ(tally_fgauge_fetch(fgauge_of(&m), &v), 0);
	CHECK(v == -0.25);
	(tally_fgauge_set)(fgauge_of(&m), 7.75);
	CHECK_EQ(tally_fgauge_fetch(fgauge_of(&m), &v), 0);
	CHECK(v == 7.75);
	/* The same name again is the same series; as an integer set gauge
	 * it is another definition, a new generation either way round. */
	CHECK_EQ(register_any(z, &d, &same), 0);
	CHECK_EQ(tally_fgauge_fetch(fgauge_of(&same), &v), 0);
	CHECK(v == 7.75);
	d.kind = TALLY_GAUGE_SET;
	CHECK_EQ(register_any(z, &d, &same), 0);
	CHECK(same.block != m.block);
	d = desc(TALLY_GAUGE_SET, "int_first");
	CHECK_EQ(register_any(z, &d, &same), 0);
	d.kind = TALLY_FGAUGE;
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK(same.block != m.block);
	/* tally_fgauge_fetch refuses another kind's handle. */
	CHECK_EQ(tally_fgauge_fetch((const tally_fgauge *)&same, &v), -EINVAL);
}

/* Threads adding to one floating-point gauge lose nothing: every add is
 * a whole compare-and-swap. */
struct fadd_arg {
	const tally_fgauge *g;
	int n;
};

static void *fadd_thread(void *p)
{
	struct fadd_arg *a = p;

	for (int i = 0; i < a->n; i++)
		tally_fgauge_add(a->g, 1.0);
	return NULL;
}

TEST(fgauge_concurrent_adds_are_exact)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_FGAUGE, "fadds");
	struct fadd_arg a;
	pthread_t t[4];
	tally_metric m;
	double v;

	CHECK_EQ(register_any(z, &d, &m), 0);
	a.g = fgauge_of(&m);
	a.n = (int)harness_scale(200000);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, fadd_thread, &a), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(tally_fgauge_fetch(a.g, &v), 0);
	CHECK(v == 4.0 * a.n);
}

TEST(histogram_values)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_HISTOGRAM, "latency");
	tally_metric m, small;
	struct snap sn;
	const struct seen *e;
	int64_t want[TALLY_BLOCK_MAX_SLOTS] = { 0 };
	int64_t sum = 0, count = 0;
	static const uint64_t vals[] = {
		0, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 1023, 1024, 1025,
		123456789, (1ull << 39) + 5, (1ull << 40) - 1, 1ull << 40,
		(1ull << 50) + 3,
	};
	int nt = (int)harness_scale(4);
	long iters = harness_scale(100000);
	struct adder a[MAX_T];

	d.unit = "ns";
	CHECK_EQ(register_any(z, &d, &m), 0);
	CHECK_EQ(m.sub_bits, 3);
	CHECK_EQ(m.max_bits, 40);
	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		unsigned b = tally_histogram_bucket(vals[i], 3, 40);

		for (unsigned k = 0; k <= i % 3; k++) {
			tally_histogram_observe(histogram_of(&m), vals[i]);
			want[b]++;
			sum += (int64_t)vals[i];
			count++;
		}
	}
	(tally_histogram_observe)(histogram_of(&m), 5);
	want[5]++;
	sum += 5;
	count++;
	CHECK_EQ(fetch(&m), count);

	/* Threads observing i % 1000 on a histogram with small buckets. */
	d = desc(TALLY_HISTOGRAM, "small");
	d.hist_sub_bits = 1;
	d.hist_max_bits = 6;
	CHECK_EQ(register_any(z, &d, &small), 0);
	for (int i = 0; i < nt; i++)
		a[i] = (struct adder){ &small, iters, 0, -1, 4, NULL };
	run_adders(a, nt);
	CHECK_EQ(fetch(&small), (int64_t)nt * iters);

	sn = read_zone(z);
	e = snap_find(&sn, "latency", "");
	CHECK(e != NULL);
	CHECK_EQ(e->kind, TALLY_HISTOGRAM);
	CHECK_EQ(e->nbuckets, (40 - 3 + 1) << 3);
	CHECK_EQ(e->sub_bits, 3);
	CHECK_EQ(e->max_bits, 40);
	CHECK_EQ(e->value, count);
	CHECK_EQ(e->sum, sum);
	CHECK_EQ(e->percpu_sum, count);
	for (unsigned b = 0; b < e->nbuckets; b++)
		if (e->buckets[b] != want[b])
			harness_fail(__FILE__, __LINE__, "bucket %u: %lld, "
				     "expected %lld", b,
				     (long long)e->buckets[b],
				     (long long)want[b]);

	e = snap_find(&sn, "small", "");
	CHECK(e != NULL);
	CHECK_EQ(e->nbuckets, (6 - 1 + 1) << 1);
	{
		int64_t w[12] = { 0 }, s = 0;

		for (long i = 0; i < iters; i++) {
			w[tally_histogram_bucket((uint64_t)(i % 1000), 1, 6)] += nt;
			s += (i % 1000) * nt;
		}
		for (unsigned b = 0; b < 12; b++)
			CHECK_EQ(e->buckets[b], w[b]);
		CHECK_EQ(e->sum, s);
		CHECK_EQ(e->value, (int64_t)nt * iters);
	}
	snap_free(&sn);
}

/* ---- bucket function ---- */

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	return xorshift64(&rnd_state);
}

static void check_value(uint64_t v, unsigned sub, unsigned max)
{
	unsigned b = tally_histogram_bucket(v, sub, max);
	unsigned nb = (max - sub + 1) << sub;
	uint64_t lo, hi;

	if (b >= nb)
		harness_fail(__FILE__, __LINE__, "sub %u max %u: %llu in "
			     "bucket %u of %u", sub, max,
			     (unsigned long long)v, b, nb);
	/* Values of 2^max_bits and more count in the last bucket, whose
	 * bounds stop below 2^max_bits (reader.h). */
	if (max < 64 && v >> max) {
		if (b != nb - 1)
			harness_fail(__FILE__, __LINE__, "sub %u max %u: %llu "
				     "in bucket %u, not the last", sub, max,
				     (unsigned long long)v, b);
		return;
	}
	tally_histogram_bucket_bounds(b, sub, &lo, &hi);
	if (v < lo || v > hi)
		harness_fail(__FILE__, __LINE__, "sub %u max %u: %llu in "
			     "bucket %u, bounds %llu..%llu", sub, max,
			     (unsigned long long)v, b, (unsigned long long)lo,
			     (unsigned long long)hi);
}

TEST(histogram_bucket_bounds)
{
	for (unsigned sub = 1; sub <= 7; sub++) {
		for (unsigned max = sub + 1; max <= 63; max++) {
			unsigned nb = (max - sub + 1) << sub;
			uint64_t lo, hi, prev_hi = 0;

			if (nb > TALLY_BLOCK_MAX_SLOTS - 1)
				break;
			/* The buckets tile 0 .. 2^max_bits - 1 in order, and
			 * each bound maps back to its bucket. */
			for (unsigned b = 0; b < nb; b++) {
				tally_histogram_bucket_bounds(b, sub, &lo, &hi);
				if (b == 0)
					CHECK_EQ(lo, 0);
				else if (lo != prev_hi + 1)
					harness_fail(__FILE__, __LINE__,
						     "sub %u max %u: bucket %u "
						     "starts at %llu, previous "
						     "ends at %llu", sub, max, b,
						     (unsigned long long)lo,
						     (unsigned long long)prev_hi);
				CHECK(lo <= hi);
				CHECK_EQ(tally_histogram_bucket(lo, sub, max), b);
				CHECK_EQ(tally_histogram_bucket(hi, sub, max), b);
				if (b < (1u << sub)) {
					CHECK_EQ(lo, b);
					CHECK_EQ(hi, b);
				} else {
					/* At most 2^-sub of its lower bound. */
					CHECK((hi - lo + 1) <= (lo >> sub));
				}
				prev_hi = hi;
			}
			CHECK(prev_hi == (1ull << max) - 1);
			/* The last in-range value and everything above it. */
			CHECK_EQ(tally_histogram_bucket((1ull << max) - 1, sub, max),
				 nb - 1);
			CHECK_EQ(tally_histogram_bucket(1ull << max, sub, max),
				 nb - 1);
			CHECK_EQ(tally_histogram_bucket(UINT64_MAX, sub, max),
				 nb - 1);
			/* Many values: small ones, powers of two +-1, random. */
			for (uint64_t v = 0; v < 600; v++)
				check_value(v, sub, max);
			for (unsigned k = 0; k < 64; k++) {
				uint64_t p = 1ull << k;

				check_value(p - 1, sub, max);
				check_value(p, sub, max);
				check_value(p + 1, sub, max);
				check_value(p + (p >> 1), sub, max);
			}
			check_value(UINT64_MAX, sub, max);
			check_value(UINT64_MAX - 1, sub, max);
			for (int i = 0; i < 3000; i++) {
				uint64_t v = rnd() >> (rnd() % 64);

				check_value(v, sub, max);
			}
		}
	}
	/* The documented default: 12.5% buckets, 304 of them. */
	CHECK_EQ(tally_histogram_bucket(UINT64_MAX, 3, 40), 303);
	CHECK_EQ(tally_histogram_bucket(7, 3, 40), 7);
	CHECK_EQ(tally_histogram_bucket(8, 3, 40), 8);
	CHECK_EQ(tally_histogram_bucket(16, 3, 40), 16);
	CHECK_EQ(tally_histogram_bucket(17, 3, 40), 16);
	CHECK_EQ(tally_histogram_bucket(18, 3, 40), 17);
	{
		uint64_t lo, hi;

		tally_histogram_bucket_bounds(16, 3, &lo, &hi);
		CHECK_EQ(lo, 16);
		CHECK_EQ(hi, 17);
		tally_histogram_bucket_bounds(303, 3, &lo, &hi);
		CHECK_EQ(lo, 15ull << 36);
		CHECK_EQ(hi, (1ull << 40) - 1);
	}
}

/* ---- capacity ---- */

TEST(enospc_series)
{
	struct tally_zone *z = zone(0, 8);
	tally_metric m[9];
	char v[16];

	for (int i = 0; i < 8; i++) {
		snprintf(v, sizeof(v), "%d", i);
		CHECK_EQ(reg1(z, "full", "i", v, &m[i]), 0);
	}
	CHECK_EQ(reg1(z, "full", "i", "8", &m[8]), -ENOSPC);
	CHECK_EQ(errno, ENOSPC);
	CHECK(strstr(tally_errmsg(), "metrics") != NULL);
	CHECK_EQ(reg1(z, "other", NULL, NULL, &m[8]), -ENOSPC);
	/* A removal makes room again, for any series. */
	CHECK_EQ(tally_metric_remove(&m[3]), 0);
	CHECK_EQ(reg1(z, "other", NULL, NULL, &m[3]), 0);
	CHECK_EQ(reg1(z, "full", "i", "8", &m[8]), -ENOSPC);
	CHECK_EQ(hdr(z)->series_live, 8);
	CHECK_EQ(atomic_load(&hdr(z)->series_hwm), 8);
}

TEST(enospc_blocks)
{
	/* One chunk: one histogram of 305 slots takes it all. */
	struct tally_zone *z = zone(TALLY_CHUNK_SLOTS, 64);
	struct tally_metric_desc d = desc(TALLY_HISTOGRAM, "h");
	struct tally_label l = { "k", "2" };
	tally_metric h, h2, c;

	CHECK_EQ(register_any(z, &d, &h), 0);
	CHECK_EQ(reg1(z, "c", NULL, NULL, &c), -ENOSPC);
	CHECK_EQ(errno, ENOSPC);
	d.labels = &l;
	d.nlabels = 1;
	CHECK_EQ(register_any(z, &d, &h2), -ENOSPC);
	/* Nothing of the failed series is left. */
	CHECK_EQ(hdr(z)->series_live, 1);
	/* Removing the histogram makes room for another one, which starts
	 * from zero. */
	tally_histogram_observe(histogram_of(&h), 5);
	CHECK_EQ(tally_metric_remove(&h), 0);
	CHECK_EQ(register_any(z, &d, &h2), 0);
	CHECK_EQ(fetch(&h2), 0);
	tally_histogram_observe(histogram_of(&h2), 9);
	CHECK_EQ(fetch(&h2), 1);
}

/*
 * The same, but the series registered after the removal needs a block of
 * another size: the zone holds no series at all, so there is room
 * ("-ENOSPC: the zone has no room for another series, metric record or block").
 */
TEST(enospc_recovers_for_another_size)
{
	struct tally_zone *z = zone(TALLY_CHUNK_SLOTS, 64);
	struct tally_metric_desc d = desc(TALLY_HISTOGRAM, "h");
	tally_metric h, c;
	int rc;

	CHECK_EQ(register_any(z, &d, &h), 0);
	CHECK_EQ(tally_metric_remove(&h), 0);
	CHECK_EQ(hdr(z)->series_live, 0);
	rc = reg1(z, "c", NULL, NULL, &c);
	if (rc != 0)
		harness_fail(__FILE__, __LINE__, "a counter in an empty zone: "
			     "%d (%s); chunks in use: %llu of %u", rc,
			     tally_errmsg(),
			     (unsigned long long)atomic_load(
				     &hdr(z)->chunks_inuse),
			     (unsigned)z->nchunks);
	tally_counter_add(counter_of(&c), 3);
	CHECK_EQ(fetch(&c), 3);
}

TEST(enospc_metric_records)
{
	/* A series of every metric: room for all of them. */
	struct tally_zone *z = zone(16 * TALLY_CHUNK_SLOTS,
				    TALLY__METRIC_CAP + 1024);
	tally_metric m, last;
	char name[32];

	for (unsigned i = 0; i < TALLY__METRIC_CAP; i++) {
		snprintf(name, sizeof(name), "family_%u", i);
		if (reg1(z, name, NULL, NULL, &last) != 0)
			harness_fail(__FILE__, __LINE__, "%s: %s", name,
				     tally_errmsg());
	}
	CHECK_EQ(reg1(z, "one_too_many", NULL, NULL, &m), -ENOSPC);
	/* Metric records are never removed: still full after a removal. */
	CHECK_EQ(tally_metric_remove(&last), 0);
	CHECK_EQ(reg1(z, "one_too_many", NULL, NULL, &m), -ENOSPC);
	/* Existing names still take new series. */
	CHECK_EQ(reg1(z, "family_7", "k", "v", &m), 0);
	CHECK_EQ(atomic_load(&hdr(z)->metric_count), TALLY__METRIC_CAP);
}

/* ---- many registrations ---- */

TEST(register_remove_200k)
{
	struct tally_zone *z = zone(32 * TALLY_CHUNK_SLOTS, 1024);
	long n = harness_scale(200000);
	tally_metric win[16];
	char v[32];
	double t0 = harness_now();
	struct snap sn;

	/* A window of 16 live series, as connections come and go. */
	for (long i = 0; i < n; i++) {
		tally_metric *m = &win[i % 16];
		struct tally_label l[2] = { { "conn", v }, { "kind", "tcp" } };
		struct tally_metric_desc d = desc(i % 5 == 0 ? TALLY_HISTOGRAM :
							       TALLY_COUNTER,
						  i % 5 == 0 ? "conn_latency" :
							       "conn_bytes");

		if (i >= 16)
			CHECK_EQ(tally_metric_remove(m), 0);
		snprintf(v, sizeof(v), "%ld", i);
		d.labels = l;
		d.nlabels = 2;
		if (register_any(z, &d, m) != 0)
			harness_fail(__FILE__, __LINE__, "registration %ld: %s",
				     i, tally_errmsg());
		if (d.kind == TALLY_COUNTER)
			tally_counter_add(counter_of(m), i);
		else
			tally_histogram_observe(histogram_of(m), (uint64_t)i);
	}
	sn = read_zone(z);
	CHECK_EQ(sn.n, 16);
	for (int i = 0; i < sn.n; i++) {
		long id = atol(strchr(sn.s[i].labels, '=') + 1);

		CHECK(id >= n - 16 && id < n);
		CHECK_EQ(sn.s[i].value, id % 5 == 0 ? 1 : id);
	}
	snap_free(&sn);
	for (int i = 0; i < 16; i++)
		CHECK_EQ(tally_metric_remove(&win[i]), 0);
	CHECK_EQ(hdr(z)->series_live, 0);
	/* Records were reused, not leaked. */
	CHECK(atomic_load(&hdr(z)->series_hwm) <= 32);
	CHECK_EQ(atomic_load(&hdr(z)->series_gen), (uint64_t)(2 * n));
	sn = read_zone(z);
	CHECK_EQ(sn.n, 0);
	snap_free(&sn);
	printf("  %ld register+remove pairs in %.2f s\n", n,
	       harness_now() - t0);
}

/* The writers' index grows with the live series: duplicates are still
 * found across every growth, and removed series can come back. */
TEST(index_growth_keeps_duplicates)
{
	struct tally_zone *z = zone(64 * TALLY_CHUNK_SLOTS, 1 << 16);
	long n = harness_scale(20000);
	tally_metric *m = calloc((size_t)n, sizeof(*m));
	char v[32];

	CHECK(m != NULL);
	for (long i = 0; i < n; i++) {
		snprintf(v, sizeof(v), "%ld", i);
		if (reg1(z, i % 2 ? "odd" : "even", "i", v, &m[i]) != 0)
			harness_fail(__FILE__, __LINE__, "%ld: %s", i,
				     tally_errmsg());
		tally_counter_add(counter_of(&m[i]), i);
	}
	for (long i = 0; i < n; i++) {
		tally_metric tmp;

		snprintf(v, sizeof(v), "%ld", i);
		if (reg1(z, i % 2 ? "odd" : "even", "i", v, &tmp) != 0 ||
		    tmp.block != m[i].block)
			harness_fail(__FILE__, __LINE__, "duplicate %ld not "
				     "found", i);
		CHECK_EQ(tally_metric_remove(&tmp), 0); /* one reference */
	}
	for (long i = 0; i < n; i += 3)
		CHECK_EQ(tally_metric_remove(&m[i]), 0);
	for (long i = 0; i < n; i++) {
		tally_metric tmp;
		int rc;

		snprintf(v, sizeof(v), "%ld", i);
		rc = reg1(z, i % 2 ? "odd" : "even", "i", v, &tmp);
		if (rc != 0)
			harness_fail(__FILE__, __LINE__, "series %ld: %d", i, rc);
		/* A removed series comes back fresh, the others as they
		 * were. */
		CHECK_EQ(fetch(&tmp), i % 3 == 0 ? 0 : i);
	}
	CHECK_EQ(hdr(z)->series_live, (uint32_t)n);
	{
		struct snap sn = read_zone(z);

		CHECK_EQ(sn.n, (int)n);
		snap_free(&sn);
	}
	free(m);
}

/* Threads racing to register the same series: each gets it, all get one
 * series, and it stays until the last of them removes it. */
struct racer {
	struct tally_zone *z;
	pthread_barrier_t *bar;
	int rounds, id, nt;
	_Atomic int *wins;
	tally_metric *got; /* [round * nt + id] */
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	char v[16];

	for (int k = 0; k < r->rounds; k++) {
		tally_metric m;
		int rc;

		snprintf(v, sizeof(v), "%d", k);
		pthread_barrier_wait(r->bar);
		rc = reg1(r->z, "race", "round", v, &m);
		if (rc != 0)
			harness_fail(__FILE__, __LINE__, "round %d: %d (%s)", k,
				     rc, tally_errmsg());
		atomic_fetch_add(&r->wins[k], 1);
		r->got[k * r->nt + r->id] = m;
		tally_counter_inc(counter_of(&m));
	}
	return NULL;
}

TEST(concurrent_register_same_series)
{
	struct tally_zone *z = zone(0, 0);
	int nt = 4, rounds = (int)harness_scale(2000);
	pthread_t t[4];
	pthread_barrier_t bar;
	struct racer r[4];
	_Atomic int *wins = calloc((size_t)rounds, sizeof(*wins));
	tally_metric *got = calloc((size_t)(rounds * nt), sizeof(*got));
	struct snap sn;

	pthread_barrier_init(&bar, NULL, (unsigned)nt);
	for (int i = 0; i < nt; i++) {
		r[i] = (struct racer){ z, &bar, rounds, i, nt, wins, got };
		CHECK_EQ(pthread_create(&t[i], NULL, racer_main, &r[i]), 0);
	}
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	for (int k = 0; k < rounds; k++) {
		CHECK_EQ(atomic_load(&wins[k]), nt);
		for (int i = 1; i < nt; i++)
			CHECK(got[k * nt + i].block == got[k * nt].block);
		CHECK_EQ(fetch(&got[k * nt]), nt);
	}
	sn = read_zone(z);
	CHECK_EQ(sn.n, rounds);
	snap_free(&sn);
	/* Every registration but the last removed: all still there. */
	for (int k = 0; k < rounds; k++)
		for (int i = 1; i < nt; i++)
			CHECK_EQ(tally_metric_remove(&got[k * nt + i]), 0);
	CHECK_EQ(hdr(z)->series_live, (uint32_t)rounds);
	for (int k = 0; k < rounds; k++)
		CHECK_EQ(tally_metric_remove(&got[k * nt]), 0);
	CHECK_EQ(hdr(z)->series_live, 0);
	free(wins);
	free(got);
}

/* Processes forked after the zone was created share its names: the
 * metrics lock is process-shared, duplicates are found across them. */
TEST(register_across_fork)
{
	struct tally_zone *z = zone(16 * TALLY_CHUNK_SLOTS, 4096);
	int nproc = 3, per = (int)harness_scale(600);
	tally_metric m;
	pid_t pids[3];
	struct snap sn;
	int dup_wins = 0;

	CHECK_EQ(reg1(z, "shared_name", "who", "parent", &m), 0);
	tally_counter_add(counter_of(&m), 1);
	fflush(stdout);
	for (int p = 0; p < nproc; p++) {
		pids[p] = fork();
		CHECK(pids[p] >= 0);
		if (pids[p] == 0) {
			char v[32];
			tally_metric mm;

			for (int i = 0; i < per; i++) {
				/* One of its own, and one all fight for. */
				snprintf(v, sizeof(v), "p%d_%d", p, i);
				if (reg1(z, "shared_name", "who", v, &mm) != 0)
					_exit(10);
				tally_counter_add(counter_of(&mm), i);
				if (i % 2)
					CHECK_EQ(tally_metric_remove(&mm), 0);
				snprintf(v, sizeof(v), "common_%d", i);
				if (reg1(z, "shared_name", "who", v, &mm) != 0)
					_exit(11);
				tally_counter_add(counter_of(&mm), 1000 + p);
			}
			_exit(0);
		}
	}
	for (int p = 0; p < nproc; p++) {
		int status;

		CHECK_EQ(waitpid(pids[p], &status, 0), pids[p]);
		CHECK_CHILD_OK(status);
	}
	sn = read_zone(z);
	/* parent + nproc * (per / 2 own kept) + per common. */
	CHECK_EQ(sn.n, 1 + nproc * ((per + 1) / 2) + per);
	for (int i = 0; i < sn.n; i++) {
		const struct seen *e = &sn.s[i];

		if (!strncmp(e->labels, "who=common_", 11)) {
			/* One series, which every process got. */
			CHECK_EQ(e->value, 1000 * nproc + nproc * (nproc - 1) / 2);
			dup_wins++;
		} else if (!strcmp(e->labels, "who=parent")) {
			CHECK_EQ(e->value, 1);
		} else {
			int p, i2;

			CHECK_EQ(sscanf(e->labels, "who=p%d_%d", &p, &i2), 2);
			CHECK_EQ(i2 % 2, 0);
			CHECK_EQ(e->value, i2);
		}
	}
	CHECK_EQ(dup_wins, per);
	CHECK_EQ(hdr(z)->series_live, (uint32_t)sn.n);
	snap_free(&sn);
}

/*
 * Removing every series gives their memory back: the records, the index
 * and the blocks' pages, all but the few chunks the thread still owns and
 * the zone keeps warm, and the chunk table (0.5 byte a slot): within 1%
 * of what the series had taken.  A handle kept from before is still
 * refused afterwards, even for a series now registered at its index.
 */
TEST(removing_every_series_gives_memory_back)
{
	enum { N = 200000 };
	static tally_metric m[N];
	struct tally_zone *z = tally_zone_create("giveback", NULL);
	struct tally_metric_desc d = desc(TALLY_COUNTER, "conn_total");
	struct tally_zone_usage u;
	uint64_t empty, peak, after;
	tally_metric stale, far, fresh;

	CHECK(z != NULL);
	CHECK_EQ(tally_zone_usage(z, &u), 0);
	empty = u.resident_bytes;
	for (int i = 0; i < N; i++) {
		char v[16];
		struct tally_label l = { "id", v };

		snprintf(v, sizeof(v), "%d", i);
		reg(z, d, &l, 1, &m[i]);
		tally_counter_inc(counter_of(&m[i]));
	}
	CHECK_EQ(tally_zone_usage(z, &u), 0);
	peak = u.resident_bytes;
	stale = m[0];
	far = m[N - 1];
	for (int i = 0; i < N; i++)
		CHECK_EQ(tally_metric_remove(&m[i]), 0);
	CHECK_EQ(tally_zone_usage(z, &u), 0);
	after = u.resident_bytes;
	printf("  empty %llu, %d series %llu, all removed %llu bytes\n",
	       (unsigned long long)empty, N, (unsigned long long)peak,
	       (unsigned long long)after);
	if ((after - empty) * 100 > peak - empty)
		harness_fail(__FILE__, __LINE__, "%llu of %llu bytes stayed "
			     "(more than 1%%)",
			     (unsigned long long)(after - empty),
			     (unsigned long long)(peak - empty));
	/* A copy kept from before points at a record given back: refused
	 * without touching its page (a read would allocate it). */
	CHECK_EQ(tally_metric_remove(&far), -EINVAL);
	CHECK_EQ(tally_zone_usage(z, &u), 0);
	CHECK_EQ(u.resident_bytes, after);
	/* The zone works as before, and the old handle stays refused. */
	reg(z, d, NULL, 0, &fresh);
	CHECK_EQ(fresh.series, stale.series);
	CHECK_EQ(tally_metric_remove(&stale), -EINVAL);
	tally_counter_add(counter_of(&fresh), 5);
	{
		int64_t v;

		CHECK_EQ(tally_metric_fetch(&fresh, &v), 0);
		CHECK_EQ(v, 5);
	}
	CHECK_EQ(tally_metric_remove(&fresh), 0);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/*
 * A copy of a handle (kept in a worker's structures, say) whose series was
 * removed through another copy is refused by tally_metric_fetch() and
 * tally_fgauge_fetch(), as by tally_metric_remove(), also once the series
 * is registered again (perhaps in the same record): it never reads the
 * old value, nor the slots of whatever now holds its block.  A copy of a
 * series another registration still holds reads on.
 */
TEST(fetch_through_a_copy_of_a_removed_handle_is_refused)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_COUNTER, "req_total");
	struct tally_metric_desc fd = desc(TALLY_FGAUGE, "load");
	tally_metric m, copy, again, fg, fgcopy, m2, other;
	double dv;
	int64_t v;

	reg(z, d, NULL, 0, &m);
	tally_counter_add(counter_of(&m), 42);
	copy = m;
	CHECK_EQ(tally_metric_fetch(&copy, &v), 0);
	CHECK_EQ(v, 42);
	CHECK_EQ(tally_metric_remove(&m), 0);
	CHECK_EQ(tally_metric_fetch(&m, &v), -EINVAL);
	v = -1;
	CHECK_EQ(tally_metric_fetch(&copy, &v), -EINVAL);
	CHECK_EQ(v, -1);
	CHECK(strstr(tally_errmsg(), "removed") != NULL);
	/* Registered again: a new series, the old copy still refused. */
	reg(z, d, NULL, 0, &again);
	tally_counter_add(counter_of(&again), 3);
	CHECK_EQ(tally_metric_fetch(&copy, &v), -EINVAL);
	CHECK_EQ(tally_metric_remove(&copy), -EINVAL);
	CHECK_EQ(tally_metric_fetch(&again, &v), 0);
	CHECK_EQ(v, 3);

	reg(z, fd, NULL, 0, &fg);
	tally_fgauge_set(fgauge_of(&fg), 0.5);
	fgcopy = fg;
	CHECK_EQ(tally_fgauge_fetch(fgauge_of(&fgcopy), &dv), 0);
	CHECK(dv == 0.5);
	CHECK_EQ(tally_metric_remove(&fg), 0);
	CHECK_EQ(tally_fgauge_fetch(fgauge_of(&fgcopy), &dv), -EINVAL);
	CHECK_EQ(tally_metric_fetch(&fgcopy, &v), -EINVAL);

	/* Two registrations of one series: removing one keeps the series,
	 * and a copy of either reads on. */
	reg(z, d, NULL, 0, &m2);
	CHECK_EQ(m2.series, again.series);
	other = again;
	CHECK_EQ(tally_metric_remove(&again), 0);
	CHECK_EQ(tally_metric_fetch(&other, &v), 0);
	CHECK_EQ(v, 3);
	CHECK_EQ(tally_metric_remove(&m2), 0);
	CHECK_EQ(tally_metric_fetch(&other, &v), -EINVAL);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

#define CHECK_NO_ERRMSG()                                                    \
	do {                                                                 \
		if (tally_errmsg()[0])                                       \
			harness_fail(__FILE__, __LINE__, "tally_errmsg() is " \
				     "\"%s\" after a success", tally_errmsg()); \
	} while (0)

static int count_cb(const char *path, struct tally_seg *s, const char *why,
		    void *arg)
{
	(void)path;
	(void)s;
	(void)why;
	(*(int64_t *)arg)++;
	return 0;
}

/*
 * tally_errmsg() says what the last call of this thread that failed got
 * wrong, and a call that succeeds clears it: a message never outlives the
 * failure that wrote it into the next success.
 */
TEST(errmsg_cleared_by_a_success)
{
	struct tally_zone *z = zone(0, 0);
	struct tally_metric_desc d = desc(TALLY_COUNTER, "ok_total");
	struct tally_metric_desc bad = desc(TALLY_COUNTER, "bad name");
	tally_metric m, b;
	struct tally_zone_usage u;
	tally_block *blk;
	int64_t v;

	CHECK_EQ(register_any(z, &bad, &b), -EINVAL);
	CHECK(tally_errmsg()[0] != 0);
	reg(z, d, NULL, 0, &m);
	CHECK_NO_ERRMSG();

	CHECK_EQ(tally_metric_fetch(NULL, &v), -EINVAL);
	CHECK(tally_errmsg()[0] != 0);
	CHECK_EQ(tally_metric_fetch(&m, &v), 0);
	CHECK_NO_ERRMSG();

	CHECK_EQ(tally_zone_usage(NULL, &u), -EINVAL);
	CHECK(tally_errmsg()[0] != 0);
	CHECK_EQ(tally_zone_usage(z, &u), 0);
	CHECK_NO_ERRMSG();

	CHECK(tally_block_alloc(z, 0, TALLY_PERCPU) == NULL);
	CHECK(tally_errmsg()[0] != 0);
	blk = tally_block_alloc(z, 1, TALLY_PERCPU);
	CHECK(blk != NULL);
	CHECK_NO_ERRMSG();
	CHECK_EQ(tally_block_fetch(blk, 9999, &v), -EINVAL);
	CHECK_EQ(tally_block_fetch(blk, 0, &v), 0);
	CHECK_NO_ERRMSG();
	CHECK_EQ(tally_block_free(z, blk), 0);

	CHECK(tally_seg_open("/nonexistent/x.tally", NULL) == NULL);
	CHECK(tally_errmsg()[0] != 0);
	CHECK(tally_dir_foreach(harness_dir(), NULL, count_cb, &v) >= 0);
	CHECK_NO_ERRMSG();
	CHECK_EQ(tally_metric_remove(&m), 0);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/*
 * A registration that fails leaves a handle that takes every update and
 * discards it: the service never crashes on its statistics.  With no
 * directory at all, and with a bad name in a zone, where the failure is
 * counted for readers.
 */
static void update_all(const tally_metric *m)
{
	for (int i = 0; i < 1000; i++) {
		tally_counter_inc(counter_of(m));
		tally_counter_add(counter_of(m), 7);
		tally_gauge_inc(gauge_of(m));
		tally_gauge_dec(gauge_of(m));
		tally_setgauge_set(setgauge_of(m), i);
		tally_histogram_observe(histogram_of(m), (uint64_t)i << 30);
	}
}

static void no_dir_child(void *arg)
{
	struct tally_metric_desc d = desc(TALLY_HISTOGRAM, "lat_ns");
	tally_metric m;
	int64_t v;

	(void)arg;
	fresh_setenv("TALLY_DIR", "/nonexistent/tally");
	CHECK_EQ(register_any(NULL, &d, &m), -ENOENT);
	CHECK(strstr(tally_errmsg(), "/nonexistent/tally") != NULL);
	update_all(&m);
	CHECK_EQ(tally_metric_fetch(&m, &v), -EINVAL);
	CHECK_EQ(tally_metric_remove(&m), -EINVAL);
	d = desc(TALLY_COUNTER, "c_total");
	CHECK_EQ(register_any(NULL, &d, &m), -ENOENT);
	update_all(&m);
}

TEST(failed_registration_handle_discards_updates)
{
	struct tally_zone *z;
	struct tally_metric_desc bad = desc(TALLY_COUNTER, "bad name");
	struct tally_metric_desc hist = desc(TALLY_HISTOGRAM, "h_ns");
	struct tally_seg_info info;
	struct tally_seg *s;
	tally_metric m, good;
	int64_t v;

	CHECK_CHILD_OK(harness_child(no_dir_child, NULL));
	z = tally_zone_create("discard", NULL);
	CHECK(z != NULL);
	CHECK_EQ(register_any(z, &bad, &m), -EINVAL);
	update_all(&m);
	hist.hist_sub_bits = 9; /* refused: 1..7 */
	CHECK_EQ(register_any(z, &hist, &m), -EINVAL);
	update_all(&m);
	/* The zone's real series are untouched by the discarded updates. */
	reg(z, desc(TALLY_COUNTER, "good_total"), NULL, 0, &good);
	tally_counter_add(counter_of(&good), 3);
	CHECK_EQ(tally_metric_fetch(&good, &v), 0);
	CHECK_EQ(v, 3);
	s = tally_seg_open(tally_zone_path(z), NULL);
	CHECK(s != NULL);
	CHECK_EQ(tally_seg_info(s, &info), 0);
	CHECK_EQ(info.register_failed, 2);
	tally_seg_close(s);
	CHECK_EQ(tally_metric_remove(&good), 0);
	CHECK_EQ(tally_zone_destroy(z), 0);
}
