/*
 * loops.c: the timed loops that several scenarios measure, out of line
 * (noinline) so that each scenario times the same code.
 */
#include "bench.h"
#include "tally/tally.h"

/*
 * The thread-local baseline: each worker adds to its own _Thread_local
 * variable through a volatile pointer.  The volatile forces one load, add
 * and store per iteration, so the compiler can neither keep the count in
 * a register, fold the loop into one "x += n", nor delete it.  The
 * pointer is laundered through an empty asm so that the add is addressed
 * like tally's (a plain register), not %fs-relative: on AMD Zen 4 a
 * load-add-store chain addressed via %fs is not memory-renamed and costs
 * several times one through a pointer (docs/RESULTS.md), which would
 * make the "floor" slower than tally's own add.
 * The thread's count is folded into *@total when it is done.
 */
static _Thread_local uint64_t tls_count;

__attribute__((noinline)) void bench_add_tls(uint64_t n, uint64_t *total)
{
	volatile uint64_t *p = &tls_count;

	__asm__ __volatile__("" : "+r"(p));
	*p = 0;
	for (uint64_t i = 0; i < n; i++)
		*p += 1;
	__atomic_fetch_add(total, *p, __ATOMIC_RELAXED);
}

__attribute__((noinline)) void bench_add_atomic(uint64_t n, uint64_t *word)
{
	for (uint64_t i = 0; i < n; i++)
		__atomic_fetch_add(word, 1, __ATOMIC_RELAXED);
}

/* tally_block_add() is asm volatile that writes the copies: it cannot be
 * hoisted or merged. */
__attribute__((noinline)) void bench_add_block(struct tally_block *b,
					       uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		tally_block_add(b, 0, 1);
}
