/*
 * metrics/enum.c: changing the state of an enum metric (TALLY_ENUM,
 * format 2.8), whose states are one float series each, 1 for the
 * current state and 0 for the others.
 *
 * Two writes to two series are not one atomic change, so two changes
 * that overlap (threads of one process, or processes sharing a zone)
 * could leave no state at 1, or two for good.  Every change therefore
 * runs under the zone's metrics lock, a robust process-shared mutex
 * that every writer of the zone takes, and sets the new state to 1
 * before it sets the others to 0: a reader, who takes no lock, finds
 * one state at 1, or two for the instant between those writes, never
 * none once a state was set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>

#include "metrics/table.h"
#include "tally/metrics.h"

/* The zone of @states (NULL when they write nowhere), or -EINVAL. */
static int zone_of(const tally_fgauge *const *states, size_t n,
		   struct tally_zone **z)
{
	*z = NULL;
	if (!states || !n)
		return tally__fail(EINVAL, "tally_enum_set: no states");
	for (size_t i = 0; i < n; i++) {
		if (!states[i] || states[i]->metric.kind != TALLY_FGAUGE)
			return tally__fail(EINVAL, "tally_enum_set: state %zu "
					   "is not an enum's series", i);
		if (states[i]->metric.block == tally__discard_block())
			continue;
		if (*z && states[i]->metric.zone != *z)
			return tally__fail(EINVAL, "tally_enum_set: the states "
					   "are of two zones");
		*z = states[i]->metric.zone;
	}
	return 0;
}

static double value_of(const tally_fgauge *g)
{
	int64_t bits = __atomic_load_n(tally__fgauge_word(g),
				       __ATOMIC_RELAXED);
	double v;

	__builtin_memcpy(&v, &bits, sizeof(v));
	return v;
}

/* Set @current (n: the first state, unless one is 1 already), then
 * clear the others.  The new state's store is a release, so that no
 * reader sees an older state cleared before the new one is set. */
static void change(const tally_fgauge *const *states, size_t n,
		   size_t current)
{
	if (current == n) {
		for (size_t i = 0; i < n; i++)
			if (value_of(states[i]) == 1.0)
				return;
		current = 0;
	}
	__atomic_store_n(tally__fgauge_word(states[current]),
			 (int64_t)0x3ff0000000000000ll, __ATOMIC_SEQ_CST);
	for (size_t i = 0; i < n; i++)
		if (i != current)
			tally_fgauge_set(states[i], 0.0);
}

static int locked_change(const tally_fgauge *const *states, size_t n,
			 size_t current)
{
	struct tally_zone *z;
	int rc;

	tally__ok();
	if ((rc = zone_of(states, n, &z)) < 0)
		return rc;
	/* Without the lock (it timed out), the change is still made, as
	 * a lone writer's would be, and the failure reported. */
	rc = z ? tally__metrics_lock(z) : 0;
	change(states, n, current);
	if (z && rc == 0)
		tally__metrics_unlock(z);
	return rc;
}

int tally_enum_set(const tally_fgauge *const *states, size_t n,
		   size_t current)
{
	if (current >= n)
		return tally__fail(EINVAL, "tally_enum_set: state %zu of %zu",
				   current, n);
	return locked_change(states, n, current);
}

int tally_enum_start(const tally_fgauge *const *states, size_t n)
{
	return locked_change(states, n, n);
}
