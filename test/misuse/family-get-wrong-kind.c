/* Must not compile: a gauge family's child asked for as a counter. */
#include <tally/tally.h>

void misuse(tally_gauge_family *f, const char *const *v)
{
	const tally_counter *c;

	tally_counter_family_get(f, v, 1, &c);
}
