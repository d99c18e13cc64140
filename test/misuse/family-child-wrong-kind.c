/* Must not compile: a counter family's child taken as a histogram. */
#include <tally/tally.h>

void misuse(tally_counter_family *f, const char *const *v)
{
	const tally_histogram *h;

	tally_counter_family_get(f, v, 1, &h);
}
