/* Must not compile: a gauge's add on a set gauge (its decrements would go
 * to a slot it does not have). */
#include <tally/tally.h>

void misuse(tally_setgauge *s)
{
	tally_gauge_dec(s);
}
