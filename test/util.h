/*
 * util.h: helpers for tests that need to look at libtally's process-wide
 * state (src/internal.h).
 */
#ifndef TALLY_TEST_UTIL_H
#define TALLY_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "tally/metrics.h"
#include "tally/reader.h"

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

/*
 * Registers @d through the function of its kind into @m, the .metric of
 * that kind's handle (an unknown kind goes to tally_counter_register,
 * which refuses it).
 */
static inline int register_any(struct tally_zone *z,
			       const struct tally_metric_desc *d,
			       tally_metric *m)
{
	switch (d ? d->kind : 0) {
	case TALLY_GAUGE:
		return tally_gauge_register(z, d, (tally_gauge *)m);
	case TALLY_GAUGE_SET:
		return tally_setgauge_register(z, d, (tally_setgauge *)m);
	case TALLY_HISTOGRAM:
		return tally_histogram_register(z, d, (tally_histogram *)m);
	case TALLY_FGAUGE:
		return tally_fgauge_register(z, d, (tally_fgauge *)m);
	default:
		return tally_counter_register(z, d, (tally_counter *)m);
	}
}

/* The handle of each kind that @m is the .metric of, for tests that go
 * through every kind with one tally_metric. */
static inline const tally_counter *counter_of(const tally_metric *m)
{
	return (const tally_counter *)m;
}

static inline const tally_gauge *gauge_of(const tally_metric *m)
{
	return (const tally_gauge *)m;
}

static inline const tally_setgauge *setgauge_of(const tally_metric *m)
{
	return (const tally_setgauge *)m;
}

static inline const tally_histogram *histogram_of(const tally_metric *m)
{
	return (const tally_histogram *)m;
}

static inline const tally_fgauge *fgauge_of(const tally_metric *m)
{
	return (const tally_fgauge *)m;
}

/* Registers @d with labels @l in @z, or fails the test. */
static inline void reg(struct tally_zone *z, struct tally_metric_desc d,
		       const struct tally_label *l, unsigned nl,
		       tally_metric *m)
{
	d.labels = l;
	d.nlabels = nl;
	if (register_any(z, &d, m) != 0)
		harness_fail(__FILE__, __LINE__, "register %s: %s", d.name,
			     tally_errmsg());
}

/* A directory of the test's own under $TALLY_DIR, so that clean-up and
 * file counts see only its files. */
static inline void own_subdir(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s.%d", harness_dir(), name, (int)getpid());
	CHECK_EQ(mkdir(out, 0700), 0);
}

/* What tally_seg_info() says of the segment at @path, or fail. */
static inline struct tally_seg_info info_of(const char *path)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	struct tally_seg_info info;

	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK_EQ(tally_seg_info(s, &info), 0);
	tally_seg_close(s);
	return info;
}

#endif
