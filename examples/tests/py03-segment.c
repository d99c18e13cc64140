/*
 * py03-segment.c: writes a segment as tally 0.3's Python package left
 * them (format 2.5, a histogram's buckets as counters named
 * order_value_dollars:bucket with a label le, not cumulative) next to a
 * plain counter, and exits; with TALLY_KEEP=1 its segment stays, for the
 * readers' test (check-py03.sh).  Prints the segment's path.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "tally/tally.h"

int main(void)
{
	struct tally_zone *z = tally_zone_create("py03", NULL);
	struct tally_label le = { "le", "10.0" };
	struct tally_metric_desc d = { .name = "orders_total",
				       .help = "Orders." };
	tally_counter c, b;
	uint16_t minor = 5;
	int fd;

	if (!z || tally_counter_register(z, &d, &c) < 0) {
		fprintf(stderr, "py03-segment: %s\n", tally_errmsg());
		return 1;
	}
	tally_counter_add(&c, 3);
	d.name = "order_value_dollars:bucket";
	d.labels = &le;
	d.nlabels = 1;
	if (tally_counter_register(z, &d, &b) < 0)
		return 1;
	tally_counter_add(&b, 2);
	/* The header of a libtally of format 2.5, as 0.3 made it. */
	fd = open(tally_zone_path(z), O_RDWR | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, &minor, 2, 10) != 2)
		return 1;
	close(fd);
	printf("%s\n", tally_zone_path(z));
	return tally_zone_destroy(z) < 0;
}
