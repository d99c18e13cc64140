/*
 * rust/csrc/bench.c: tally's C inline add in a loop, so that the crate's
 * benchmark measures the Rust add against the C one in the same run.
 * Built without TALLY__IN_LIBRARY, as an application would be.  The loop
 * is alone in its file: with a second user of tally_counter_inc() in the
 * same file, GCC may keep the header's static inline tally__counter_add()
 * out of line, and the loop would time a call.
 */
#include <stdint.h>

#include "tally/tally.h"

/* @n adds of 1 to @c with tally_counter_inc(), the header's inline add. */
void tally_rs_bench_c_inc(const tally_counter *c, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		tally_counter_inc(c);
}

