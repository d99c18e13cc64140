/*
 * metrics/enum.c: changing the state of an enum metric (TALLY_ENUM,
 * format 2.8), whose states are one float series each.
 *
 * Two writes to two series are not one atomic change, and a reader
 * reads series one after another, so 1 for the current state and 0 for
 * the others could show no state or two while a change runs, or for
 * good after two changes overlapped.  A state's value is a stamp
 * instead: a change writes to the new state one more than the largest
 * stamp of the states, and readers show the state of the largest stamp
 * as current (reader/enumset.c).  Stamps only grow, so whatever a
 * reader finds while changes run, its largest stamp is a state that
 * was current meanwhile; one write makes a change, so there is no
 * instant with none.  Changes run under the zone's metrics lock, a
 * robust process-shared mutex that every writer of the zone takes, so
 * that two changes (threads of one process, or processes sharing the
 * zone) never write the same stamp.  Stamps stay exact integers in a
 * double up to 2^53 changes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>

#include "metrics/table.h"
#include "tally/metrics.h"

/* A failed registration's handle: it writes nowhere, and what it reads
 * is the word every such handle of the process writes. */
static int discarded(const tally_fgauge *g)
{
	return g->metric.block == tally__discard_block();
}

/* The zone of @states (NULL when they write nowhere), or -EINVAL; @fn
 * names the call in the message. */
static int zone_of(const char *fn, const tally_fgauge *const *states,
		   size_t n, struct tally_zone **z)
{
	*z = NULL;
	if (!states || !n)
		return tally__fail(EINVAL, "%s: no states", fn);
	for (size_t i = 0; i < n; i++) {
		if (!states[i])
			return tally__fail(EINVAL, "%s: state %zu is NULL",
					   fn, i);
		if (discarded(states[i]))
			continue;
		if (states[i]->metric.kind != TALLY_FGAUGE)
			return tally__fail(EINVAL, "%s: state %zu is not a "
					   "float gauge", fn, i);
		if (*z && states[i]->metric.zone != *z)
			return tally__fail(EINVAL, "%s: the states are of two "
					   "zones", fn);
		*z = states[i]->metric.zone;
	}
	return 0;
}

/* Make @current the state of the largest stamp (n: the first state,
 * stamp 1, unless a state has a stamp already).  Discarded handles hold
 * no stamp: their word is any failed float gauge's last value. */
static void change(const tally_fgauge *const *states, size_t n,
		   size_t current)
{
	double top = 0, v;

	for (size_t i = 0; i < n; i++) {
		if (discarded(states[i]))
			continue;
		v = tally__f64_of(__atomic_load_n(tally__fgauge_word(states[i]),
						  __ATOMIC_RELAXED));
		if (v > top)
			top = v;
	}
	if (current == n) {
		if (top > 0)
			return;
		current = 0;
	}
	v = top + 1;
	tally_fgauge_set(states[current], v);
}

static int locked_change(const char *fn, const tally_fgauge *const *states,
			 size_t n, size_t current)
{
	struct tally_zone *z;
	int rc;

	tally__ok();
	if ((rc = zone_of(fn, states, n, &z)) < 0)
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
	return locked_change("tally_enum_set", states, n, current);
}

int tally_enum_start(const tally_fgauge *const *states, size_t n)
{
	return locked_change("tally_enum_start", states, n, n);
}
