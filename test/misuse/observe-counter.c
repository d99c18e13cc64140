/* Must not compile: observing a counter (it wrote a neighbour series). */
#include <tally/tally.h>

void misuse(tally_counter *c)
{
	tally_histogram_observe(c, 5);
}
