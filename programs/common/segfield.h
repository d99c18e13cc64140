/*
 * programs/common/segfield.h: one description of each field the programs
 * print about a segment (struct tally_seg_info, tally/reader.h).
 *
 * tallystat --list (a table and JSON), tally-dump -j and tally-exporter's
 * tally_segment_* metrics all show fields of a segment.  Each field is
 * described once here: its JSON key, its column heading, its Prometheus
 * name, type, unit and help, and where its value comes from; every output
 * walks this table (jemalloc's emitter: one description, several back
 * ends), so that a field added to the library is added to the outputs
 * here, with one name in all of them.
 *
 * Which outputs show which field: the exporter every field with a
 * Prometheus name, in table order; tallystat --list and tally-dump the
 * keys they list, in their own (documented) order.
 */
#ifndef TALLY_PROGRAMS_SEGFIELD_H
#define TALLY_PROGRAMS_SEGFIELD_H

#include <stddef.h>
#include <stdint.h>

#include "tally/reader.h"

struct tp_buf;

/* One segment as the programs show it: what the reader says of it, and
 * the number of series a walk of it found. */
struct tp_seg_row {
	const struct tally_seg_info *info;
	int64_t nseries;
};

/* What a field's value is. */
enum tp_sf_type {
	TP_SF_INT,      /* an integer */
	TP_SF_BOOL,     /* JSON true/false, Prometheus 1/0 */
	TP_SF_STR,      /* a string (never exported to Prometheus) */
	TP_SF_RATIO,    /* a fraction, printed %.6g */
};

struct tp_seg_value {
	enum tp_sf_type type;
	int64_t i;              /* TP_SF_INT, TP_SF_BOOL */
	double d;               /* TP_SF_RATIO */
	const char *s;          /* TP_SF_STR: into the info or buf */
	char buf[24];
};

struct tp_seg_field {
	const char *key;        /* JSON key, and the name to find it by */
	const char *column;     /* heading in tallystat --list; NULL: none */
	const char *metric;     /* Prometheus name (tally_segment_...,
				   without _total); NULL: not exported */
	int counter;            /* 1: a counter, 0: a gauge */
	const char *unit;       /* "bytes", "ratio" or NULL */
	const char *help;
	/* The value: a member of struct tally_seg_info at @off of @type,
	 * or, when @get is set, computed by it. */
	enum tp_sf_type type;
	size_t off;
	unsigned size;          /* of the member: 4 or 8 (TP_SF_INT) */
	void (*get)(const struct tp_seg_row *r, struct tp_seg_value *v);
};

extern const struct tp_seg_field tp_seg_fields[];
extern const size_t tp_seg_nfields;

/* The field of key @key; NULL when there is none. */
const struct tp_seg_field *tp_seg_field_find(const char *key);

/* The value of @f for @r. */
void tp_seg_field_value(const struct tp_seg_field *f,
			const struct tp_seg_row *r, struct tp_seg_value *v);

/*
 * tp_seg_json: the fields named by @keys (NULL-terminated; each must be
 * in the table, else TP_DIE) as JSON members ', "key": value' appended
 * to @b, in that order; @first set: no comma before the first.
 */
void tp_seg_json(struct tp_buf *b, const char *const *keys,
		 const struct tp_seg_row *r, int first);

/*
 * tp_seg_text: the value of @f as a table cell: integers in decimal,
 * bytes in human units (tp_fmt_human), strings as they are.  malloc'ed.
 */
char *tp_seg_text(const struct tp_seg_field *f, const struct tp_seg_row *r);

#endif /* TALLY_PROGRAMS_SEGFIELD_H */
