/*
 * test-unit.c: the unit vocabulary as readers show it (tally/reader.h:
 * tally_unit_scale, tally_unit_format, tally_unit_name).
 *
 * It proves that:
 *   - integer nanoseconds, microseconds and milliseconds are shown in
 *     seconds as exact decimals, at the edges where a detour through a
 *     double would show another number (1 ns, 999,999,999 ns, 2^40 ns,
 *     INT64_MAX ns), negative values included;
 *   - multiples of bytes are multiplied exactly, beyond 2^64;
 *   - names take the base unit's suffix in place of the unit's own,
 *     before a counter's "_total", and other units leave names and
 *     values alone.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "tally/metrics.h"
#include "tally/reader.h"

static const char *fmt(uint64_t v, int neg, const char *unit, int point)
{
	static char buf[64];
	struct tally_unit_scale s;

	CHECK(tally_unit_scale(unit, &s) == 1);
	CHECK(tally_unit_format(v, neg, &s, point, buf, sizeof(buf)) ==
	      (int)strlen(buf));
	return buf;
}

TEST(unit_seconds_are_exact_decimals)
{
	CHECK(strcmp(fmt(1, 0, TALLY_UNIT_NANOSECONDS, 0), "0.000000001") == 0);
	CHECK(strcmp(fmt(999999999, 0, TALLY_UNIT_NANOSECONDS, 0),
		     "0.999999999") == 0);
	CHECK(strcmp(fmt(1ull << 40, 0, TALLY_UNIT_NANOSECONDS, 0),
		     "1099.511627776") == 0);
	CHECK(strcmp(fmt(INT64_MAX, 0, TALLY_UNIT_NANOSECONDS, 0),
		     "9223372036.854775807") == 0);
	CHECK(strcmp(fmt(1000000000, 0, TALLY_UNIT_NANOSECONDS, 0), "1") == 0);
	CHECK(strcmp(fmt(1000000000, 0, TALLY_UNIT_NANOSECONDS, 1), "1.0") ==
	      0);
	CHECK(strcmp(fmt(0, 0, TALLY_UNIT_NANOSECONDS, 0), "0") == 0);
	CHECK(strcmp(fmt(0, 1, TALLY_UNIT_NANOSECONDS, 0), "0") == 0);
	CHECK(strcmp(fmt(1500, 1, TALLY_UNIT_MICROSECONDS, 0), "-0.0015") == 0);
	CHECK(strcmp(fmt(250, 0, TALLY_UNIT_MILLISECONDS, 0), "0.25") == 0);
}

TEST(unit_bytes_multiply_exactly)
{
	CHECK(strcmp(fmt(3, 0, TALLY_UNIT_KIBIBYTES, 0), "3072") == 0);
	CHECK(strcmp(fmt(3, 0, TALLY_UNIT_KILOBYTES, 1), "3000.0") == 0);
	/* Beyond 2^64: (2^63 - 1) * 2^20. */
	CHECK(strcmp(fmt(INT64_MAX, 0, TALLY_UNIT_MEBIBYTES, 0),
		     "9671406556917033396600832") == 0);
	CHECK(strcmp(fmt(2, 0, TALLY_UNIT_MEGABYTES, 0), "2000000") == 0);
}

TEST(unit_short_buffer_and_other_units)
{
	struct tally_unit_scale s;
	char buf[4];

	CHECK(tally_unit_scale(TALLY_UNIT_NANOSECONDS, &s) == 1);
	CHECK(strcmp(s.base, "seconds") == 0 && s.mul == 1 && s.div10 == 9);
	CHECK(tally_unit_format(1, 0, &s, 0, buf, sizeof(buf)) == -ENOSPC);
	CHECK(tally_unit_scale("ns", &s) == 0);
	CHECK(tally_unit_scale("seconds", &s) == 0);
	CHECK(tally_unit_scale("", &s) == 0);
	CHECK(tally_unit_scale(NULL, &s) == 0);
}

static const char *name(const char *n, const char *unit)
{
	static char buf[128];

	CHECK(tally_unit_name(n, unit, buf, sizeof(buf)) == (int)strlen(buf));
	return buf;
}

TEST(unit_names_take_the_base_unit)
{
	CHECK(strcmp(name("request_duration_ns", "nanoseconds"),
		     "request_duration_seconds") == 0);
	CHECK(strcmp(name("request_duration", "nanoseconds"),
		     "request_duration_seconds") == 0);
	CHECK(strcmp(name("busy_nanoseconds_total", "nanoseconds"),
		     "busy_seconds_total") == 0);
	CHECK(strcmp(name("busy_total", "microseconds"),
		     "busy_seconds_total") == 0);
	CHECK(strcmp(name("wait_ms", "milliseconds"), "wait_seconds") == 0);
	CHECK(strcmp(name("wait_seconds", "milliseconds"), "wait_seconds") ==
	      0);
	CHECK(strcmp(name("rss_kib", "kibibytes"), "rss_bytes") == 0);
	CHECK(strcmp(name("x_ns", "ns"), "x_ns") == 0);
	CHECK(strcmp(name("x_total", NULL), "x_total") == 0);
	{
		char small[8];

		CHECK(tally_unit_name("request_ns", "nanoseconds", small,
				      sizeof(small)) == -ENOSPC);
	}
}
