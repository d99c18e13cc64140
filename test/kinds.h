/*
 * kinds.h: one tally_metric for series of every kind, for tests (and the
 * fuzzer's corpus generator) that go through all the kinds with the same
 * code: register_any() and the handle of each kind that a tally_metric
 * is the .metric of.  Public headers only, no test harness.
 */
#ifndef TALLY_TEST_KINDS_H
#define TALLY_TEST_KINDS_H

#include "tally/metrics.h"

/*
 * Registers @d through the function of its kind into @m, the .metric of
 * that kind's handle (an unknown kind goes to tally_counter_register,
 * which refuses it).
 */
static inline int register_any(struct tally_zone *z,
			       const struct tally_metric_desc *d,
			       tally_metric *m)
{
	switch (d ? d->kind : 0) {
	case TALLY_GAUGE:
		return tally_gauge_register(z, d, (tally_gauge *)m);
	case TALLY_GAUGE_SET:
		return tally_setgauge_register(z, d, (tally_setgauge *)m);
	case TALLY_HISTOGRAM:
		return tally_histogram_register(z, d, (tally_histogram *)m);
	case TALLY_FGAUGE:
		return tally_fgauge_register(z, d, (tally_fgauge *)m);
	default:
		return tally_counter_register(z, d, (tally_counter *)m);
	}
}

/* The handle of each kind that @m is the .metric of. */
static inline const tally_counter *counter_of(const tally_metric *m)
{
	return (const tally_counter *)m;
}

static inline const tally_gauge *gauge_of(const tally_metric *m)
{
	return (const tally_gauge *)m;
}

static inline const tally_setgauge *setgauge_of(const tally_metric *m)
{
	return (const tally_setgauge *)m;
}

static inline const tally_histogram *histogram_of(const tally_metric *m)
{
	return (const tally_histogram *)m;
}

static inline const tally_fgauge *fgauge_of(const tally_metric *m)
{
	return (const tally_fgauge *)m;
}

#endif
