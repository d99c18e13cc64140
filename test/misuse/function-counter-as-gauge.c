/* Must not compile: the exported function (not the macro) with another
 * kind's handle. */
#include <tally/tally.h>

void misuse(tally_counter *c)
{
	(tally_gauge_add)(c, 1);
}
