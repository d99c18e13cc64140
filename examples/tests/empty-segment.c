/*
 * empty-segment.c: creates a zone with no series and exits; with
 * TALLY_KEEP=1 its segment stays, for tally-dump's test
 * (check-tally-dump.sh).  Prints the segment's path.
 */
#include <stdio.h>

#include "tally/tally.h"

int main(void)
{
	struct tally_zone *z = tally_zone_create("empty", NULL);

	if (!z) {
		fprintf(stderr, "empty-segment: %s\n", tally_errmsg());
		return 1;
	}
	printf("%s\n", tally_zone_path(z));
	return tally_zone_destroy(z) < 0;
}
