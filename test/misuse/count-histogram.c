/* Must not compile: counting into a histogram's sum. */
#include <tally/tally.h>

void misuse(tally_histogram *h)
{
	tally_counter_inc(h);
}
