/*
 * lerule.c: parsing --histogram.buckets rules and choosing the le edges
 * of a histogram (lerule.h).
 */
#define _GNU_SOURCE
#include "lerule.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/metrics.h"
#include "tally/reader.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int ex_le_rule_parse(const char *arg, struct ex_le_rule *r, char *err,
		     size_t errlen)
{
	const char *eq = strchr(arg, '=');
	const char *spec;

	memset(r, 0, sizeof(*r));
	if (!eq || eq == arg) {
		snprintf(err, errlen, "expected PATTERN=SPEC, e.g. "
			 "'*_seconds=octave' or 'rpc_*=100,1000,10000'");
		return -EINVAL;
	}
	spec = eq + 1;
	if (strcmp(spec, "octave") == 0) {
		r->kind = EX_LE_OCTAVE;
	} else if (strcmp(spec, "all") == 0) {
		r->kind = EX_LE_ALL;
	} else if (strncmp(spec, "sub:", 4) == 0) {
		char *end;
		unsigned long n;

		errno = 0;
		n = strtoul(spec + 4, &end, 10);
		if (errno || end == spec + 4 || *end || n > 7) {
			snprintf(err, errlen, "sub:N: N must be 0 to 7, got "
				 "'%s'", spec + 4);
			return -EINVAL;
		}
		r->kind = EX_LE_SUB;
		r->sub = (unsigned)n;
	} else {
		const char *p = spec;

		r->kind = EX_LE_LIST;
		if (!*p) {
			snprintf(err, errlen, "empty SPEC (octave, all, sub:N "
				 "or a list of integers)");
			return -EINVAL;
		}
		for (;;) {
			char *end;
			unsigned long long v;

			if (*p < '0' || *p > '9') {
				snprintf(err, errlen, "'%s' is not octave, all, "
					 "sub:N or a comma-separated list of "
					 "non-negative integers", spec);
				ex_le_rule_free(r);
				return -EINVAL;
			}
			errno = 0;
			v = strtoull(p, &end, 10);
			if (errno || (*end && *end != ',')) {
				snprintf(err, errlen, "'%s' is not a list of "
					 "non-negative integers", spec);
				ex_le_rule_free(r);
				return -EINVAL;
			}
			r->vals = realloc(r->vals, (r->nvals + 1) *
					  sizeof(*r->vals));
			if (!r->vals) {
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			r->vals[r->nvals++] = v;
			if (!*end)
				break;
			p = end + 1;
		}
		qsort(r->vals, r->nvals, sizeof(*r->vals), cmp_u64);
	}
	r->pattern = strndup(arg, (size_t)(eq - arg));
	if (!r->pattern) {
		ex_le_rule_free(r);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

void ex_le_rule_free(struct ex_le_rule *r)
{
	free(r->pattern);
	free(r->vals);
	memset(r, 0, sizeof(*r));
}

void ex_le_select(const struct ex_le_rule *r, unsigned sub_bits,
		  unsigned max_bits, unsigned nbuckets, unsigned char *sel)
{
	enum ex_le_kind kind = r ? r->kind : EX_LE_OCTAVE;
	unsigned n = kind == EX_LE_SUB ? r->sub : 0;

	memset(sel, 0, nbuckets);
	if (kind == EX_LE_LIST) {
		for (unsigned i = 0; i < r->nvals; i++) {
			unsigned b = tally_histogram_bucket(r->vals[i], sub_bits,
							    max_bits);

			if (b + 1 < nbuckets)
				sel[b] = 1;
		}
		return;
	}
	/* The last bucket also counts every value >= 2^max_bits: only +Inf
	 * bounds it. */
	for (unsigned b = 0; b + 1 < nbuckets; b++) {
		uint64_t lo, hi, next;
		unsigned msb, low;

		if (kind == EX_LE_ALL) {
			sel[b] = 1;
			continue;
		}
		tally_histogram_bucket_bounds(b, sub_bits, &lo, &hi);
		/* An edge is kept when the next bucket's lower bound has at
		 * most n bits after its leading one: powers of two for n = 0,
		 * every edge for n = sub_bits. */
		next = hi + 1;
		msb = 63u - (unsigned)__builtin_clzll(next);
		low = (unsigned)__builtin_ctzll(next);
		sel[b] = low + n >= msb;
	}
}

