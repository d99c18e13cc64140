/*
 * histogram.c: the math of tally's log-linear histogram buckets, for
 * readers: a bucket's bounds, and quantiles from bucket counts.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "tally/metrics.h"

#include "reader/segment.h"

void tally_histogram_bucket_bounds(unsigned b, unsigned sub_bits,
				   uint64_t *lo, uint64_t *hi)
{
	unsigned sub = 1u << sub_bits;
	unsigned e;
	uint64_t l, width;

	if (b < sub) {
		*lo = *hi = b;
		return;
	}
	e = b / sub + sub_bits - 1u; /* the highest set bit of its values */
	width = 1ull << (e - sub_bits);
	l = ((uint64_t)sub + (b % sub)) << (e - sub_bits);
	*lo = l;
	*hi = l + width - 1u;
}

int tally_histogram_quantile(const struct tally_series_view *v, double q,
			double *out)
{
	uint64_t lo, hi;
	double count = 0, rank, seen = 0;

	tally__ok();
	if (!v || !out || v->kind != TALLY_HISTOGRAM || !v->buckets ||
	    !(q >= 0.0 && q <= 1.0))
		return tally__fail(EINVAL, "tally_histogram_quantile: not a "
				   "histogram, or q outside [0, 1]");
	/* In doubles: counts read from a file may add up past 2^63.  A
	 * negative bucket (torn by a racing zero) counts as empty. */
	for (unsigned b = 0; b < v->nbuckets; b++)
		if (v->buckets[b] > 0)
			count += (double)v->buckets[b];
	if (count <= 0)
		return tally__fail(ENODATA, "no observations");
	rank = q * count; /* seen only takes whole values: no ceil needed */
	if (rank < 1)
		rank = 1;
	for (unsigned b = 0; b < v->nbuckets; b++) {
		if (v->buckets[b] <= 0)
			continue;
		seen += (double)v->buckets[b];
		if (seen >= rank) {
			tally_histogram_bucket_bounds(b, v->sub_bits, &lo, &hi);
			*out = q >= 1.0 ? (double)hi :
					  ((double)lo + (double)hi) / 2.0;
			return 0;
		}
	}
	return tally__fail(ENODATA, "no observations");
}
