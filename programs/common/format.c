/*
 * programs/common/format.c: series keys, exact integers and human units
 * (format.h).
 */
#define _GNU_SOURCE
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

void tp_series_key_buf(struct tp_buf *b, const char *name, unsigned nlabels,
		       const char *const *names, const char *const *values)
{
	tp_buf_puts(b, name);
	if (nlabels) {
		tp_buf_putc(b, '{');
		for (unsigned i = 0; i < nlabels; i++) {
			if (i)
				tp_buf_putc(b, ',');
			tp_buf_label(b, names[i], values[i]);
		}
		tp_buf_putc(b, '}');
	}
}

char *tp_series_key(const char *name, unsigned nlabels,
		    const char *const *names, const char *const *values)
{
	struct tp_buf b = { 0 };

	tp_series_key_buf(&b, name, nlabels, names, values);
	return tp_buf_take(&b);
}

char *tp_fmt_i64(char out[TP_I64_LEN], int64_t v)
{
	/* Work on the magnitude as unsigned, so INT64_MIN has one too. */
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	char tmp[TP_I64_LEN];
	size_t n = 0, i = 0;

	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		out[i++] = '-';
	while (n)
		out[i++] = tmp[--n];
	out[i] = '\0';
	return out;
}

char *tp_fmt_f64(char out[TP_F64_LEN], double v)
{
	if (isnan(v))
		return strcpy(out, "NaN");
	if (isinf(v))
		return strcpy(out, v > 0 ? "+Inf" : "-Inf");
	/* The shortest form that reads back as the same double. */
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(out, TP_F64_LEN, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			break;
	}
	return out;
}

int tp_ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* @name ends with @suffix, or with @suffix followed by "_total". */
static int has_suffix(const char *name, const char *suffix)
{
	char t[40];

	snprintf(t, sizeof(t), "%s_total", suffix);
	return tp_ends_with(name, suffix) || tp_ends_with(name, t);
}

enum tp_unit tp_unit_of(const char *name, const char *unit)
{
	static const struct {
		const char *unit, *suffix;
		enum tp_unit u;
	} map[] = {
		{ "seconds", "_seconds", TP_UNIT_SECONDS },
		{ "milliseconds", "_ms", TP_UNIT_MILLISECONDS },
		{ "microseconds", "_us", TP_UNIT_MICROSECONDS },
		{ "nanoseconds", "_ns", TP_UNIT_NANOSECONDS },
		{ "bytes", "_bytes", TP_UNIT_BYTES },
		/* Multiples of bytes (TALLY_UNIT_*): by their unit only. */
		{ "kilobytes", NULL, TP_UNIT_KILOBYTES },
		{ "kibibytes", NULL, TP_UNIT_KIBIBYTES },
		{ "megabytes", NULL, TP_UNIT_MEGABYTES },
		{ "mebibytes", NULL, TP_UNIT_MEBIBYTES },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (unit && strcmp(unit, map[i].unit) == 0)
			return map[i].u;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (name && map[i].suffix && has_suffix(name, map[i].suffix))
			return map[i].u;
	return TP_UNIT_NONE;
}

/* @v with 3 or 4 significant figures: 1.23, 12.3, 123, 1234. */
static void sig(char *out, size_t n, double v, const char *suffix,
		const char *rate)
{
	double a = fabs(v);
	int dec = a == 0 ? 0 : a < 10 ? 2 : a < 100 ? 1 : 0;

	snprintf(out, n, "%.*f%s%s", dec, v, suffix, rate);
}

char *tp_fmt_human(char *out, size_t n, double v, enum tp_unit unit,
		   int rate)
{
	static const char *const si[] = { "", "k", "M", "G", "T", "P", "E" };
	static const char *const iec[] = { "B", "KiB", "MiB", "GiB", "TiB",
					   "PiB", "EiB" };
	const char *r = rate ? "/s" : "";
	double a;
	unsigned i = 0;

	if (!isfinite(v)) {
		snprintf(out, n, "%s", isnan(v) ? "-" : v > 0 ? "inf" : "-inf");
		return out;
	}
	/* Multiples of bytes are shown in bytes (KiB, MiB...). */
	switch (unit) {
	case TP_UNIT_KILOBYTES: v *= 1e3; unit = TP_UNIT_BYTES; break;
	case TP_UNIT_KIBIBYTES: v *= 1024; unit = TP_UNIT_BYTES; break;
	case TP_UNIT_MEGABYTES: v *= 1e6; unit = TP_UNIT_BYTES; break;
	case TP_UNIT_MEBIBYTES: v *= 1048576; unit = TP_UNIT_BYTES; break;
	default: break;
	}
	switch (unit) {
	case TP_UNIT_SECONDS:
	case TP_UNIT_MILLISECONDS:
	case TP_UNIT_MICROSECONDS:
	case TP_UNIT_NANOSECONDS: {
		/* Everything in seconds first, then the unit that reads
		 * best; a rate of seconds per second stays a number of
		 * seconds per second. */
		double s = v / (unit == TP_UNIT_SECONDS ? 1 :
				unit == TP_UNIT_MILLISECONDS ? 1e3 :
				unit == TP_UNIT_MICROSECONDS ? 1e6 : 1e9);

		a = fabs(s);
		if (a == 0)
			sig(out, n, 0, "s", r);
		else if (a < 1e-6)
			sig(out, n, s * 1e9, "ns", r);
		else if (a < 1e-3)
			sig(out, n, s * 1e6, "us", r);
		else if (a < 1)
			sig(out, n, s * 1e3, "ms", r);
		else if (a < 120 || rate)
			sig(out, n, s, "s", r);
		else if (a < 7200)
			sig(out, n, s / 60, "min", r);
		else
			sig(out, n, s / 3600, "h", r);
		return out;
	}
	case TP_UNIT_BYTES:
		for (a = fabs(v); a >= 1024 && i < 6; i++)
			a /= 1024;
		if (i == 0)
			snprintf(out, n, "%.0f%s%s", v, iec[0], r);
		else
			sig(out, n, v / pow(1024, i), iec[i], r);
		return out;
	default:
		for (a = fabs(v); a >= 1000 && i < 6; i++)
			a /= 1000;
		if (i == 0 && v == floor(v))
			snprintf(out, n, "%.0f%s", v, r);
		else
			sig(out, n, v / pow(1000, i), si[i], r);
		return out;
	}
}
