/*
 * lerule.h: --histogram.buckets, which bucket edges of a histogram become
 * le bounds: the rules, their parser, and the selection of edges.
 *
 * tally's bucket b holds the integers lo(b) .. hi(b) (lower bound
 * included); Prometheus's le="x" counts observations <= x.  An edge
 * hi(b) is a bound exactly, so a rule only chooses which edges are
 * written; a value of a list is moved up to its bucket's upper edge.
 */
#ifndef TALLY_EXPORTER_LERULE_H
#define TALLY_EXPORTER_LERULE_H

#include <stddef.h>
#include <stdint.h>

/* Which bucket edges of a histogram become le bounds. */
enum ex_le_kind {
	EX_LE_OCTAVE,  /* one per power of two: le = 2^k - 1 (the default) */
	EX_LE_SUB,     /* 2^n per power of two (n <= sub_bits) */
	EX_LE_ALL,     /* every bucket */
	EX_LE_LIST,    /* given values, each moved up to its bucket's edge */
};

struct ex_le_rule {
	char *pattern;         /* fnmatch(3) glob on the metric name */
	enum ex_le_kind kind;
	unsigned sub;          /* EX_LE_SUB */
	uint64_t *vals;        /* EX_LE_LIST */
	unsigned nvals;
};

/*
 * ex_le_rule_parse: "PATTERN=SPEC", SPEC one of octave, all, sub:N or a
 * comma-separated list of non-negative integers.  Return 0, or -EINVAL
 * with a one-line reason in @err.
 */
int ex_le_rule_parse(const char *arg, struct ex_le_rule *r, char *err,
		     size_t errlen);
void ex_le_rule_free(struct ex_le_rule *r);

/*
 * ex_le_select: set sel[b] = 1 for each bucket b (< nbuckets - 1) whose
 * upper edge is exported, 0 for the others.
 */
void ex_le_select(const struct ex_le_rule *r, unsigned sub_bits,
		  unsigned max_bits, unsigned nbuckets, unsigned char *sel);

#endif /* TALLY_EXPORTER_LERULE_H */
