/*
 * programs/common/clock.h: the programs' clock for durations and
 * deadlines: CLOCK_MONOTONIC in nanoseconds (tally-exporter's scrape
 * times and its watchdog of slow connections).
 */
#ifndef TALLY_PROGRAMS_CLOCK_H
#define TALLY_PROGRAMS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t tp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* TALLY_PROGRAMS_CLOCK_H */
