/* Must not compile: an update through the generic tally_metric. */
#include <tally/tally.h>

void misuse(tally_metric *m)
{
	tally_counter_inc(m);
}
