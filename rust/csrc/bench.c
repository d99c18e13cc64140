/*
 * rust/csrc/bench.c: tally's C inline add in a loop, so that the crate's
 * benchmark measures the Rust add against the C one in the same run.
 * Built without TALLY__IN_LIBRARY, as an application would be.
 */
#include <stdint.h>

#include "tally/tally.h"

/* @n adds of 1 to @c with tally_counter_inc(), the header's inline add. */
void tally_rs_bench_c_inc(const tally_counter *c, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		tally_counter_inc(c);
}

/* @n calls of the exported function tally_block_add() (not the inline
 * add): what a binding that cannot inline pays. */
void tally_rs_bench_c_call(const tally_counter *c, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		(tally_block_add)(c->metric.block, 0, 1);
}

/* @n lookups of the child ("/api/items", "200") of @f, each added to:
 * tally's family lookup from C, next to the crate's. */
void tally_rs_bench_c_family(const tally_counter_family *f, uint64_t n)
{
	const char *values[2] = { "/api/items", "200" };
	const tally_counter *c;

	for (uint64_t i = 0; i < n; i++) {
		__asm__ __volatile__("" : : "r"(values) : "memory");
		if (tally_counter_family_get(f, values, 2, &c) == 0)
			tally_counter_inc(c);
	}
}
