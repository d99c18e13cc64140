/*
 * unit.c: the unit vocabulary of tally/metrics.h (TALLY_UNIT_*) as
 * readers show it: which base unit, the exact decimal conversion of an
 * integer, and the name a series is shown under (tally/reader.h).
 *
 * Conversion is integer arithmetic to a decimal string, never a double:
 * a bucket edge of 999,999,999 ns is "0.999999999", not a neighbour of
 * it, so that edges and sums read the same in every tool.
 */
#include <errno.h>
#include <string.h>

#include "tally/metrics.h"
#include "tally/reader.h"

struct unit_def {
	const char *unit;
	struct tally_unit_scale scale;
	const char *suffixes[4]; /* the unit's own name endings */
};

static const struct unit_def units[] = {
	{ TALLY_UNIT_NANOSECONDS, { "seconds", 1, 9 },
	  { "_nanoseconds", "_nsec", "_ns", NULL } },
	{ TALLY_UNIT_MICROSECONDS, { "seconds", 1, 6 },
	  { "_microseconds", "_usec", "_us", NULL } },
	{ TALLY_UNIT_MILLISECONDS, { "seconds", 1, 3 },
	  { "_milliseconds", "_msec", "_ms", NULL } },
	{ TALLY_UNIT_KILOBYTES, { "bytes", 1000, 0 },
	  { "_kilobytes", "_kb", NULL, NULL } },
	{ TALLY_UNIT_KIBIBYTES, { "bytes", 1024, 0 },
	  { "_kibibytes", "_kib", NULL, NULL } },
	{ TALLY_UNIT_MEGABYTES, { "bytes", 1000000, 0 },
	  { "_megabytes", "_mb", NULL, NULL } },
	{ TALLY_UNIT_MEBIBYTES, { "bytes", 1048576, 0 },
	  { "_mebibytes", "_mib", NULL, NULL } },
};

static const struct unit_def *find(const char *unit)
{
	if (!unit || !unit[0])
		return NULL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(units[i].unit, unit) == 0)
			return &units[i];
	return NULL;
}

int tally_unit_scale(const char *unit, struct tally_unit_scale *s)
{
	const struct unit_def *u = find(unit);

	if (!u)
		return 0;
	if (s)
		*s = u->scale;
	return 1;
}

int tally_unit_format(uint64_t v, int negative,
		      const struct tally_unit_scale *s, int point, char *buf,
		      size_t len)
{
	/* v * mul fits in 128 bits; its decimal digits are written from
	 * the right, with the point div10 digits from the end. */
	unsigned __int128 x = (unsigned __int128)v * (s ? s->mul : 1);
	unsigned div10 = s ? s->div10 : 0;
	char t[64];
	size_t n = 0, pos = sizeof(t);
	int any_frac = 0;

	/* A scale of the caller's own: more fraction digits than t holds
	 * (with the 39 of the integer part) is no scale of a unit. */
	if (div10 > 19)
		return -EINVAL;
	for (unsigned d = 0; d < div10; d++) {
		unsigned digit = (unsigned)(x % 10);

		x /= 10;
		/* Trailing zeros of the fraction are dropped. */
		if (digit || any_frac) {
			t[--pos] = (char)('0' + digit);
			any_frac = 1;
		}
	}
	if (any_frac)
		t[--pos] = '.';
	else if (point) {
		t[--pos] = '0';
		t[--pos] = '.';
	}
	do {
		t[--pos] = (char)('0' + (unsigned)(x % 10));
		x /= 10;
	} while (x);
	if (negative && (v != 0))
		t[--pos] = '-';
	n = sizeof(t) - pos;
	if (n + 1 > len)
		return -ENOSPC;
	memcpy(buf, t + pos, n);
	buf[n] = '\0';
	return (int)n;
}

static int ends_with(const char *s, size_t n, const char *sfx)
{
	size_t m = strlen(sfx);

	return n >= m && memcmp(s + n - m, sfx, m) == 0;
}

int tally_unit_name(const char *name, const char *unit, char *buf,
		    size_t len)
{
	const struct unit_def *u = find(unit);
	size_t n = strlen(name), total = 0, need;
	char base_sfx[16];

	if (!u) {
		if (n + 1 > len)
			return -ENOSPC;
		memcpy(buf, name, n + 1);
		return (int)n;
	}
	if (ends_with(name, n, "_total")) {
		n -= 6;
		total = 6;
	}
	for (unsigned i = 0; i < 4 && u->suffixes[i]; i++) {
		if (ends_with(name, n, u->suffixes[i])) {
			n -= strlen(u->suffixes[i]);
			break;
		}
	}
	base_sfx[0] = '_';
	strcpy(base_sfx + 1, u->scale.base);
	if (ends_with(name, n, base_sfx))
		base_sfx[0] = '\0';
	need = n + strlen(base_sfx) + total;
	if (need + 1 > len)
		return -ENOSPC;
	memcpy(buf, name, n);
	strcpy(buf + n, base_sfx);
	if (total)
		strcpy(buf + n + strlen(base_sfx), "_total");
	return (int)need;
}
