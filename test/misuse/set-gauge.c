/* Must not compile: setting an add-gauge (it added). */
#include <tally/tally.h>

void misuse(tally_gauge *g)
{
	tally_setgauge_set(g, 5);
}
