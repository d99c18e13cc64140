/*
 * typed-segment.c: writes the typed series of format 2.6, a fractional
 * counter (3.75 + 10^-9) and two per-process gauges (livesum and sum, 2
 * each), and exits; with TALLY_KEEP=1 its segment stays, for tally-dump's
 * test (check-dump-types.sh).  Prints the segment's path.
 */
#include <stdio.h>

#include "tally/tally.h"

int main(void)
{
	struct tally_zone *z = tally_zone_create("typed", NULL);
	struct tally_metric_desc d = { .name = "paid_total" };
	tally_fcounter c;
	tally_pgauge live, all;

	if (!z || tally_fcounter_register(z, &d, &c) < 0) {
		fprintf(stderr, "typed-segment: %s\n", tally_errmsg());
		return 1;
	}
	tally_fcounter_add(&c, 3.75);
	tally_fcounter_add(&c, 1e-9);
	d.name = "inflight";
	if (tally_pgauge_register(z, &d, TALLY_COMBINE_LIVESUM, &live) < 0)
		return 1;
	d.name = "kept";
	if (tally_pgauge_register(z, &d, TALLY_COMBINE_SUM, &all) < 0)
		return 1;
	tally_pgauge_set(&live, 2);
	tally_pgauge_set(&all, 2);
	printf("%s\n", tally_zone_path(z));
	return tally_zone_destroy(z) < 0;
}
