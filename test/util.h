/*
 * util.h: helpers for tests that need to look at libtally's process-wide
 * state (src/internal.h).
 */
#ifndef TALLY_TEST_UTIL_H
#define TALLY_TEST_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "tally/metrics.h"

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

/* A zero-filled metric description of @kind named @name. */
static inline struct tally_metric_desc desc(unsigned kind, const char *name)
{
	struct tally_metric_desc d;

	memset(&d, 0, sizeof(d));
	d.kind = kind;
	d.name = name;
	return d;
}

/* Registers @d with labels @l in @z, or fails the test. */
static inline void reg(struct tally_zone *z, struct tally_metric_desc d,
		       const struct tally_label *l, unsigned nl,
		       tally_metric *m)
{
	d.labels = l;
	d.nlabels = nl;
	if (tally_metric_register(z, &d, m) != 0)
		harness_fail(__FILE__, __LINE__, "register %s: %s", d.name,
			     tally_errmsg());
}

#endif
