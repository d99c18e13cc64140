/*
 * test-progcommon.c: programs/common on its own: number and size
 * formatting, series keys and label escapes, selectors, the vocabulary
 * of kinds, the small parsers, skip reasons, and the table of segment
 * fields (segfield.h) that tallystat, tally-dump and tally-exporter
 * print from.
 *
 *   test-progcommon [TEST...]     every test, or those named
 *   (test/harness.h: each in a child process, with a time limit)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "format.h"
#include "kind.h"
#include "match.h"
#include "parse.h"
#include "segfield.h"
#include "snapshot.h"
#include "strbuf.h"
#include "harness.h"

TEST(format)
{
	char b[64];
	const char *ln[2] = { "a", "b" }, *lv[2] = { "x\"y", "1\\2\n" };
	char *k;

	CHECK_STR(tp_fmt_i64(b, 0), "0");
	CHECK_STR(tp_fmt_i64(b, -42), "-42");
	CHECK_STR(tp_fmt_i64(b, 9007199254740993ll), "9007199254740993");
	CHECK_STR(tp_fmt_i64(b, INT64_MIN), "-9223372036854775808");
	CHECK_STR(tp_fmt_i64(b, INT64_MAX), "9223372036854775807");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 999, TP_UNIT_NONE, 0), "999");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 1234, TP_UNIT_NONE, 0), "1.23k");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 45.6e6, TP_UNIT_NONE, 0),
		  "45.6M");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 3e9, TP_UNIT_NONE, 1), "3.00G/s");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 1536, TP_UNIT_BYTES, 0),
		  "1.50KiB");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 12345, TP_UNIT_NANOSECONDS, 0),
		  "12.3us");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 0.0042, TP_UNIT_SECONDS, 0),
		  "4.20ms");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 90, TP_UNIT_SECONDS, 0), "90.0s");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 600, TP_UNIT_SECONDS, 0),
		  "10.0min");
	CHECK_STR(tp_fmt_human(b, sizeof(b), NAN, TP_UNIT_SECONDS, 0), "-");
	CHECK(tp_unit_of("x_seconds_total", NULL) == TP_UNIT_SECONDS);
	CHECK(tp_unit_of("x", "nanoseconds") == TP_UNIT_NANOSECONDS);
	CHECK(tp_unit_of("x_ns", NULL) == TP_UNIT_NANOSECONDS);
	CHECK(tp_unit_of("x_total", NULL) == TP_UNIT_NONE);
	/* Integers of the unit vocabulary (TALLY_UNIT_*) in base units. */
	CHECK(tp_unit_of("rss", "kibibytes") == TP_UNIT_KIBIBYTES);
	CHECK_STR(tp_fmt_human(b, sizeof(b), 1536, TP_UNIT_KIBIBYTES, 0),
		  "1.50MiB");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 3, TP_UNIT_KILOBYTES, 0),
		  "2.93KiB");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 1500000000,
			       tp_unit_of("request_duration_ns", "nanoseconds"),
			       0), "1.50s");
	CHECK_STR(tp_fmt_human(b, sizeof(b), 1500, TP_UNIT_MILLISECONDS, 0),
		  "1.50s");
	k = tp_series_key("m", 2, ln, lv);
	CHECK_STR(k, "m{a=\"x\\\"y\",b=\"1\\\\2\\n\"}");
	free(k);
}

static int sel_match(const char *sel, const char *name, unsigned n,
		     const char *const *ln, const char *const *lv)
{
	struct tp_selector s;
	char err[256];
	int r;

	if (tp_selector_parse(sel, &s, err, sizeof(err)) < 0) {
		fprintf(stderr, "selector %s: %s\n", sel, err);
		return -1;
	}
	r = tp_selector_match(&s, name, n, ln, lv);
	tp_selector_free(&s);
	return r;
}

TEST(selectors)
{
	const char *ln[2] = { "conn", "queue" }, *lv[2] = { "17", "3" };
	struct tp_selector s;
	char err[256];

	CHECK(sel_match("requests_total", "requests_total", 2, ln, lv) == 1);
	CHECK(sel_match("requests_total", "requests", 2, ln, lv) == 0);
	CHECK(sel_match("req*", "requests_total", 2, ln, lv) == 1);
	CHECK(sel_match("requests_total{queue=\"3\"}", "requests_total", 2,
			ln, lv) == 1);
	CHECK(sel_match("requests_total{queue=\"4\"}", "requests_total", 2,
			ln, lv) == 0);
	CHECK(sel_match("{queue!=\"4\", conn=~\"1.*\"}", "x", 2, ln, lv) == 1);
	CHECK(sel_match("{conn=~\"7\"}", "x", 2, ln, lv) == 0); /* anchored */
	CHECK(sel_match("{conn!~\"1[0-9]\"}", "x", 2, ln, lv) == 0);
	CHECK(sel_match("{missing=\"\"}", "x", 2, ln, lv) == 1);
	CHECK(sel_match("{missing!=\"\"}", "x", 2, ln, lv) == 0);
	CHECK(sel_match("{__name__=~\"x|y\"}", "y", 2, ln, lv) == 1);
	CHECK(sel_match("{queue='3',}", "y", 2, ln, lv) == 1);
	CHECK(tp_selector_parse("", &s, err, sizeof(err)) == -EINVAL);
	CHECK(tp_selector_parse("a{", &s, err, sizeof(err)) == -EINVAL);
	CHECK(tp_selector_parse("a{q=3}", &s, err, sizeof(err)) == -EINVAL);
	CHECK(tp_selector_parse("a{q=\"3}", &s, err, sizeof(err)) == -EINVAL);
	CHECK(tp_selector_parse("a{q~\"3\"}", &s, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(tp_selector_parse("a{q=~\"(\"}", &s, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(tp_selector_parse("a b", &s, err, sizeof(err)) == -EINVAL);
	CHECK(tp_selector_parse("a{}x", &s, err, sizeof(err)) == -EINVAL);
}


TEST(escapes)
{
	struct tp_buf b = { 0 };

	tp_buf_json_str(&b, "a\"b\\c\nd\te\x01\x7f");
	CHECK_STR(tp_buf_str(&b), "\"a\\\"b\\\\c\\nd\\te\\u0001\\u007f\"");
	tp_buf_reset(&b);
	tp_buf_label_value(&b, "x\"y\\z\nw");
	CHECK_STR(tp_buf_str(&b), "x\\\"y\\\\z\\nw");
	tp_buf_reset(&b);
	tp_buf_label(&b, "q", "a\"b");
	CHECK_STR(tp_buf_str(&b), "q=\"a\\\"b\"");
	tp_buf_free(&b);
	CHECK(tp_ends_with("a_total", "_total"));
	CHECK(!tp_ends_with("_total", "a_total"));
	CHECK(tp_ends_with("x", ""));
}

TEST(kinds)
{
	CHECK(tp_kind_is_gauge(TALLY_GAUGE) && tp_kind_is_gauge(TALLY_GAUGE_SET) &&
	      tp_kind_is_gauge(TALLY_FGAUGE));
	CHECK(!tp_kind_is_gauge(TALLY_COUNTER) &&
	      !tp_kind_is_gauge(TALLY_HISTOGRAM));
	CHECK_EQ(tp_kind_type(TALLY_FGAUGE), TALLY_GAUGE);
	CHECK_EQ(tp_kind_type(TALLY_GAUGE_SET), TALLY_GAUGE);
	CHECK_EQ(tp_kind_type(TALLY_HISTOGRAM), TALLY_HISTOGRAM);
	/* Summed: the integer gauges as one, a double gauge apart. */
	CHECK_EQ(tp_kind_sum_class(TALLY_GAUGE_SET), TALLY_GAUGE);
	CHECK_EQ(tp_kind_sum_class(TALLY_FGAUGE), TALLY_FGAUGE);
	CHECK_STR(tp_kind_name(TALLY_COUNTER), "counter");
	CHECK_STR(tp_kind_name(TALLY_FGAUGE), "gauge");
	CHECK_STR(tp_kind_name(TALLY_HISTOGRAM), "histogram");
	CHECK_STR(tp_kind_name(99), "unknown");
	CHECK_STR(tp_mode_name(TALLY_PERCPU), "percpu");
	CHECK_STR(tp_mode_name(TALLY_ADAPTIVE), "adaptive");
	CHECK_STR(tp_mode_name(99), "unknown");
	CHECK_STR(tp_type_name(TALLY_FGAUGE, 0, 1, 0), "info");
	CHECK_STR(tp_type_name(TALLY_FGAUGE, 0, 0, 1), "stateset");
	CHECK_STR(tp_type_name(TALLY_HISTOGRAM, 1, 0, 0), "summary");
	CHECK_STR(tp_type_name(TALLY_FGAUGE, 0, 0, 0), "gauge");
}

/* Summed over segments (--aggregate), an info metric's pairs or an
 * enum's state true in two segments is 1, a float gauge's values add. */
TEST(aggregate_info_and_enum)
{
	struct tp_series in[6];
	struct tp_snapshot out;
	struct tp_agg g;
	const char *key[3] = { "build{version=\"1\"}", "state{state=\"up\"}",
			       "temp" };

	memset(in, 0, sizeof(in));
	for (int i = 0; i < 6; i++) {
		in[i].kind = TALLY_FGAUGE;
		in[i].key = (char *)key[i % 3];
		in[i].name = in[i].key;
		in[i].pid = 10 + i / 3;
		in[i].fvalue = 1.0;
		in[i].value = 1;
		in[i].info = i % 3 == 0;
		in[i].stateset = i % 3 == 1;
	}
	tp_agg_begin(&g, &out);
	for (int i = 0; i < 6; i++)
		tp_agg_add(&g, &in[i], 0);
	tp_agg_end(&g);
	CHECK_EQ(out.nseries, 3);
	CHECK(out.series[0].fvalue == 1.0 && out.series[0].value == 1);
	CHECK(out.series[0].info == 1);
	CHECK(out.series[1].fvalue == 1.0 && out.series[1].stateset == 1);
	CHECK(out.series[2].fvalue == 2.0);
	tp_snapshot_free(&out);
}

TEST(parsers)
{
	const char *p;
	unsigned long v = 7;
	char err[32];

	p = "42,";
	CHECK(tp_parse_ulong(&p, 1, 100, &v) == 0 && v == 42 && *p == ',');
	p = "101";
	CHECK(tp_parse_ulong(&p, 1, 100, &v) < 0 && *p == '1');
	p = "0";
	CHECK(tp_parse_ulong(&p, 1, 100, &v) < 0);
	p = "-1";
	CHECK(tp_parse_ulong(&p, 0, 100, &v) < 0);
	p = " 1";
	CHECK(tp_parse_ulong(&p, 0, 100, &v) < 0);
	p = "99999999999999999999999";
	CHECK(tp_parse_ulong(&p, 0, 0xffffffffu, &v) < 0);
	CHECK_EQ(tp_label_name_len("queue"), 5);
	CHECK_EQ(tp_label_name_len("_a1=x"), 3);
	CHECK_EQ(tp_label_name_len("1a"), 0);
	CHECK_EQ(tp_label_name_len(""), 0);
	CHECK_EQ(tp_label_name_len("caf\xc3\xa9"), 3);
	CHECK(tp_fail(err, sizeof(err), "bad %d", 7) == -EINVAL);
	CHECK_STR(err, "bad 7");
	CHECK(tp_fail(NULL, 0, "nowhere") == -EINVAL);
}

TEST(skip_reasons)
{
	CHECK_STR(tp_skip_names[tp_skip_reason(EINVAL)], "corrupt");
	CHECK_STR(tp_skip_names[tp_skip_reason(-EPERM)], "foreign");
	CHECK_STR(tp_skip_names[tp_skip_reason(EPROTONOSUPPORT)], "version");
	CHECK_STR(tp_skip_names[tp_skip_reason(ENOENT)], "vanished");
	CHECK_STR(tp_skip_names[tp_skip_reason(ELOOP)], "symlink");
	CHECK_STR(tp_skip_names[tp_skip_reason(EACCES)], "unreadable");
	CHECK_STR(tp_skip_names[tp_skip_reason(0)], "unreadable");
}

/* A segment with a different value in every field. */
static void sample_info(struct tally_seg_info *in)
{
	*in = (struct tally_seg_info){
		.path = "/d/svc.12.ab.tally", .pid = 12, .proc_name = "svc",
		.zone_name = "z\"1", .major = 2, .minor = 5, .nslabs = 4,
		.nnodes = 1, .alive = 0, .in_use = 1, .file_bytes = 1ull << 32,
		.resident_bytes = 1536, .generation = 9, .capacity_chunks = 8,
		.chunks_inuse = 2, .chunk_slots = 64, .alloc_refused = 3,
		.copies_refused = 5, .register_failed = 6, .redefinitions = 7,
	};
}

TEST(segfield_table)
{
	for (size_t i = 0; i < tp_seg_nfields; i++) {
		const struct tp_seg_field *f = &tp_seg_fields[i];

		CHECK(f->key && f->key[0] && f->help && f->help[0]);
		CHECK(tp_seg_field_find(f->key) == f);
		/* Prometheus takes numbers only; a counter has no unit
		 * here (its _total is its suffix). */
		if (f->metric)
			CHECK(f->type != TP_SF_STR);
		if (f->counter)
			CHECK(f->metric && !f->unit);
		/* A member, or a getter, not both. */
		CHECK(!f->get || f->off == 0);
		for (size_t j = i + 1; j < tp_seg_nfields; j++) {
			CHECK(strcmp(f->key, tp_seg_fields[j].key) != 0);
			if (f->metric && tp_seg_fields[j].metric)
				CHECK(strcmp(f->metric,
					     tp_seg_fields[j].metric) != 0);
			if (f->column && tp_seg_fields[j].column)
				CHECK(strcmp(f->column,
					     tp_seg_fields[j].column) != 0);
		}
	}
	CHECK(tp_seg_field_find("nope") == NULL);
}

TEST(segfield_values)
{
	static const char *const keys[] = {
		"path", "pid", "process", "zone", "state", "alive", "in_use",
		"series", "format", "slabs", "nodes", "file_bytes",
		"resident_bytes", "generation", "capacity_used_ratio",
		"capacity_slots", "alloc_refused", "copies_refused",
		"register_failed", "redefinitions", NULL,
	};
	struct tally_seg_info in;
	struct tp_seg_row r = { &in, 13 };
	struct tp_buf b = { 0 };
	char *t;

	sample_info(&in);
	tp_seg_json(&b, keys, &r, 1);
	CHECK_STR(tp_buf_str(&b),
		  "\"path\": \"/d/svc.12.ab.tally\", \"pid\": 12, "
		  "\"process\": \"svc\", \"zone\": \"z\\\"1\", "
		  "\"state\": \"dead, in use\", \"alive\": false, "
		  "\"in_use\": true, \"series\": 13, \"format\": \"2.5\", "
		  "\"slabs\": 4, \"nodes\": 1, \"file_bytes\": 4294967296, "
		  "\"resident_bytes\": 1536, \"generation\": 9, "
		  "\"capacity_used_ratio\": 0.25, \"capacity_slots\": 512, "
		  "\"alloc_refused\": 3, \"copies_refused\": 5, "
		  "\"register_failed\": 6, \"redefinitions\": 7");
	/* Not first: a comma before. */
	tp_buf_reset(&b);
	tp_seg_json(&b, keys + 1, &r, 0);
	CHECK(strncmp(tp_buf_str(&b), ", \"pid\": 12", 11) == 0);
	tp_buf_free(&b);
	/* Table cells: sizes in human units, like every tool's. */
	t = tp_seg_text(tp_seg_field_find("resident_bytes"), &r);
	CHECK_STR(t, "1.50KiB");
	free(t);
	t = tp_seg_text(tp_seg_field_find("pid"), &r);
	CHECK_STR(t, "12");
	free(t);
	in.alive = 1;
	t = tp_seg_text(tp_seg_field_find("state"), &r);
	CHECK_STR(t, "alive");
	free(t);
	in.alive = in.in_use = 0;
	t = tp_seg_text(tp_seg_field_find("state"), &r);
	CHECK_STR(t, "dead");
	free(t);
	/* No chunks at all: a ratio of 0, not a division by zero. */
	in.capacity_chunks = 0;
	{
		struct tp_seg_value v;

		tp_seg_field_value(tp_seg_field_find("capacity_used_ratio"), &r,
				   &v);
		CHECK(v.type == TP_SF_RATIO && v.d == 0.0);
	}
}
