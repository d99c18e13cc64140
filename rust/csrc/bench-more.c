/*
 * rust/csrc/bench-more.c: the other C loops of the crate's benchmark:
 * calls of the exported tally_block_add(), and family lookups from C.
 */
#include <stdint.h>

#include "tally/tally.h"

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
