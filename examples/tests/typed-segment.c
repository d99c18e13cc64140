/*
 * typed-segment.c: writes the typed series of format 2.6, a fractional
 * counter (3.75 + 10^-9), two per-process gauges (livesum and sum, 2
 * each) and a classic histogram of prometheus_client's default buckets
 * (0.005 .. 10 seconds; 0.003, 0.02, 0.02, 0.7 and 12 observed), a
 * summary of format 2.7 (0.1 three times and 2.25: count 4, sum 2.55),
 * an info metric of format 2.8 (build: version 1.1, replaced by 1.2)
 * and an enum (state: up, then down), and exits; with TALLY_KEEP=1 its
 * segment stays, for tally-dump's test (check-dump-types.sh).  Prints
 * the segment's path.
 */
#include <math.h>
#include <stdio.h>

#include "tally/tally.h"

int main(void)
{
	struct tally_zone *z = tally_zone_create("typed", NULL);
	struct tally_metric_desc d = { .name = "paid_total",
					.help = "What was paid." };
	tally_fcounter c;
	tally_pgauge live, all;
	tally_chistogram h;
	tally_summary s;
	static const double bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.075,
					  0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
					  7.5, 10.0, INFINITY };

	if (!z || tally_fcounter_register(z, &d, &c) < 0) {
		fprintf(stderr, "typed-segment: %s\n", tally_errmsg());
		return 1;
	}
	tally_fcounter_add(&c, 3.75);
	tally_fcounter_add(&c, 1e-9);
	d.name = "inflight";
	d.help = "Requests in flight.";
	if (tally_pgauge_register(z, &d, TALLY_COMBINE_LIVESUM, &live) < 0)
		return 1;
	d.name = "kept";
	d.help = "Kept after exit.";
	if (tally_pgauge_register(z, &d, TALLY_COMBINE_SUM, &all) < 0)
		return 1;
	tally_pgauge_set(&live, 2);
	tally_pgauge_set(&all, 2);
	d.name = "request_seconds";
	d.help = "Time spent on a request.";
	if (tally_chistogram_register(z, &d, bounds, 15, &h) < 0)
		return 1;
	tally_chistogram_observe(&h, 0.003);
	tally_chistogram_observe(&h, 0.02);
	tally_chistogram_observe(&h, 0.02);
	tally_chistogram_observe(&h, 0.7);
	tally_chistogram_observe(&h, 12);
	d.name = "order_value_dollars";
	d.help = "What orders were worth.";
	if (tally_summary_register(z, &d, &s) < 0)
		return 1;
	tally_summary_observe(&s, 0.1);
	tally_summary_observe(&s, 0.1);
	tally_summary_observe(&s, 0.1);
	tally_summary_observe(&s, 2.25);
	/* Pairs 1.1 replaced by 1.2; the state up, then down. */
	tally_fgauge st[2];
	const tally_fgauge *states[2] = { &st[0], &st[1] };

	for (unsigned i = 0; i < 4; i++) {
		static const char *const v[] = { "1.1", "1.2", "up", "down" };
		struct tally_label l = { i < 2 ? "version" : "state", v[i] };
		tally_fgauge g;

		d.name = i < 2 ? "build" : "state";
		d.help = i < 2 ? "What was built." : "Where it stands.";
		d.labels = &l;
		d.nlabels = 1;
		if ((i < 2 ? tally_info_register :
		     tally_enum_register)(z, &d, &g) < 0)
			return 1;
		if (i < 2)
			tally_fgauge_set(&g, i % 2 ? 1.0 : 0.0);
		else
			st[i - 2] = g;
	}
	if (tally_enum_start(states, 2) < 0 ||
	    tally_enum_set(states, 2, 1) < 0)
		return 1;
	printf("%s\n", tally_zone_path(z));
	return tally_zone_destroy(z) < 0;
}
