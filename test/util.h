/*
 * util.h: helpers for tests that need to look at libtally's process-wide
 * state (src/internal.h).
 */
#ifndef TALLY_TEST_UTIL_H
#define TALLY_TEST_UTIL_H

#include <stdlib.h>

#include "harness.h"
#include "internal.h"

/* Whether libtally has read its environment in this process yet. */
static inline int tally_initialised(void)
{
	return tally__env.nslabs != 0;
}

/*
 * Sets (or, with a NULL value, unsets) an environment variable that
 * libtally reads on first use.  Fails the test when libtally was already
 * initialised in this process, since the value would then be ignored.
 */
static inline void fresh_setenv(const char *name, const char *value)
{
	if (tally_initialised())
		harness_fail(__FILE__, __LINE__, "libtally is already "
			     "initialised: %s must be set in a fresh process",
			     name);
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

#endif
