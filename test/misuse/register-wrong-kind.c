/* Must not compile: registering a counter into a histogram's handle. */
#include <tally/tally.h>

int misuse(const struct tally_metric_desc *d, tally_histogram *h)
{
	return tally_counter_register(NULL, d, h);
}
