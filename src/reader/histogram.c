/*
 * histogram.c: the math of tally's histogram buckets, for readers: a
 * log-linear bucket's bounds, and quantiles from bucket counts, of
 * log-linear and of classic histograms.
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

/* A classic histogram's quantile as Prometheus's histogram_quantile()
 * computes it: the value of rank @rank interpolated linearly within its
 * bucket (the first one from 0 when its bound is positive); in the +Inf
 * bucket, the highest finite bound. */
static int classic_quantile(const struct tally_series_view *v, double q,
			    double rank, double *out)
{
	double seen = 0, prev;

	for (unsigned b = 0; b < v->nbuckets; b++) {
		double n = v->buckets[b] > 0 ? (double)v->buckets[b] : 0;
		double lo, hi;

		prev = seen;
		seen += n;
		if (n == 0 || seen < rank)
			continue;
		if (b >= v->nbounds) {
			*out = v->nbounds ? v->bounds[v->nbounds - 1] : 0;
			return 0;
		}
		hi = v->bounds[b];
		lo = b ? v->bounds[b - 1] : hi > 0 ? 0 : hi;
		*out = q >= 1.0 ? hi : lo + (hi - lo) * (rank - prev) / n;
		return 0;
	}
	return tally__fail(ENODATA, "no observations");
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
	if (v->classic)
		return classic_quantile(v, q, rank, out);
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
