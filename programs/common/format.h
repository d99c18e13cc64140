/*
 * programs/common/format.h: how the programs write a series' name and
 * values: the Prometheus form of a series (name{label="value",...}),
 * exact 64-bit integers, and human units (k/M/G, time units).
 */
#ifndef TALLY_PROGRAMS_FORMAT_H
#define TALLY_PROGRAMS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* Room for any int64 in decimal, with its sign and NUL. */
#define TP_I64_LEN 21

/*
 * tp_series_key: "name" or "name{a=\"1\",b=\"x\"}" in the order given
 * (the reader gives labels sorted by name), values escaped as in the
 * Prometheus text format.  Returns a malloc'ed string.
 */
char *tp_series_key(const char *name, unsigned nlabels,
		    const char *const *names, const char *const *values);
struct tp_buf;
/* The same, appended to @b (no allocation once @b is large enough). */
void tp_series_key_buf(struct tp_buf *b, const char *name, unsigned nlabels,
		       const char *const *names, const char *const *values);

/* tp_fmt_i64: @v in decimal, exactly (no detour through double). */
char *tp_fmt_i64(char out[TP_I64_LEN], int64_t v);

/* Room for any double as tp_fmt_f64 writes it. */
#define TP_F64_LEN 32

/* tp_fmt_f64: @v in the fewest digits that read back as @v ("0.1", not
 * "0.10000000000000001"), and NaN, +Inf, -Inf as Prometheus writes
 * them. */
char *tp_fmt_f64(char out[TP_F64_LEN], double v);

/* What a series counts, from its unit or its name's suffix. */
enum tp_unit {
	TP_UNIT_NONE,
	TP_UNIT_SECONDS,      /* unit "seconds", name *_seconds[_total] */
	TP_UNIT_MILLISECONDS, /* unit "milliseconds", name *_ms[_total] */
	TP_UNIT_MICROSECONDS, /* unit "microseconds", name *_us[_total] */
	TP_UNIT_NANOSECONDS,  /* unit "nanoseconds", name *_ns[_total] */
	TP_UNIT_BYTES,        /* unit "bytes", name *_bytes[_total] */
	TP_UNIT_KILOBYTES,    /* unit "kilobytes" (x 1000 bytes) */
	TP_UNIT_KIBIBYTES,    /* unit "kibibytes" (x 1024 bytes) */
	TP_UNIT_MEGABYTES,    /* unit "megabytes" (x 10^6 bytes) */
	TP_UNIT_MEBIBYTES,    /* unit "mebibytes" (x 2^20 bytes) */
};

enum tp_unit tp_unit_of(const char *name, const char *unit);

/* 1 when @s ends with @suffix. */
int tp_ends_with(const char *s, const char *suffix);

/*
 * tp_fmt_human: @v (in @unit) in at most 4 significant figures and a
 * suffix: "1.23k", "45.6M" (powers of 1000), "1.50MiB" ... for bytes
 * (powers of 1024), "850ns", "12.3us", "4.56ms", "1.20s", "3.0min",
 * "2.0h" for times.  @rate adds "/s".  Returns @out.
 */
char *tp_fmt_human(char *out, size_t n, double v, enum tp_unit unit,
		   int rate);

#endif /* TALLY_PROGRAMS_FORMAT_H */
