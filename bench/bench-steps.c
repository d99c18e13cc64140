/*
 * bench-steps.c: `tally-bench _steps [N]`, a hidden mode that explains
 * what a shared, per-node or adaptive add costs next to a plain atomic
 * add on this CPU, one instruction of the path at a time.  Each row is a
 * loop of N iterations of a few instructions in asm (so that the
 * compiler adds nothing), timed in rounds interleaved with the lone
 * `lock addq` loop; a row's figure is the median of its rounds' ratios to
 * that loop in the same round, so that a busy machine moves both.
 * docs/RESULTS.md reads these rows: on Intel cores a load whose address
 * has the low 12 bits of the locked add just before it (the same word,
 * or a word 4096 bytes away) waits for that add, which on AMD Zen it
 * does not.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tally/tally.h"

#define ROUNDS 9

/* Four pages: the word the loops add to is at the start of page 1. */
static int64_t pages[4 * 512] __attribute__((aligned(4096)));
static int64_t *const word = pages + 512;

typedef void (*step_fn)(const void *arg, uint64_t n);

static void lock_add(const void *arg, uint64_t n)
{
	(void)arg;
	for (uint64_t i = 0; i < n; i++)
		__asm__ __volatile__("lock addq $2, %0" : "+m"(*word) : : "cc");
}

static void lock_xadd(const void *arg, uint64_t n)
{
	(void)arg;
	for (uint64_t i = 0; i < n; i++) {
		int64_t r = 2;

		__asm__ __volatile__("lock xaddq %0, %1"
				     : "+r"(r), "+m"(*word) : : "cc");
	}
}

/* A load of @arg (another address), then the locked add. */
static void load_then_xadd(const void *arg, uint64_t n)
{
	const int64_t *at = arg;

	for (uint64_t i = 0; i < n; i++) {
		int64_t r = 2, o;

		__asm__ __volatile__("movq %2, %1\n\tlock xaddq %0, %3"
				     : "+r"(r), "=&r"(o)
				     : "m"(*at), "m"(*word) : "cc");
	}
}

/* The cold adaptive path without a hint, the baseline of the one with
 * it: load the word, test it, add, compare. */
static void load_xadd_cmp(const void *arg, uint64_t n)
{
	(void)arg;
	for (uint64_t i = 0; i < n; i++) {
		int64_t r = 2, o;

		__asm__ __volatile__("movq %1, %0\n\t"
				     "testq $1, %0\n\t"
				     "jnz 1f\n\t"
				     "lock xaddq %2, %1\n\t"
				     "cmpq %2, %0\n\t"
				     "1:"
				     : "=&r"(o), "+m"(*word), "+r"(r) : : "cc");
	}
}

/* The add, then a load of the word it added to. */
static void xadd_then_load(const void *arg, uint64_t n)
{
	(void)arg;
	for (uint64_t i = 0; i < n; i++) {
		int64_t r = 2, o;

		__asm__ __volatile__("lock xaddq %0, %2\n\tmovq %2, %1"
				     : "+r"(r), "=&r"(o), "+m"(*word) : : "cc");
	}
}

/* The cold adaptive path with a hint, as include/tally/arch/x86_64.h
 * takes it: compare the hint (@arg, another page offset) with the
 * word's address, add, short tests of what it found. */
static void hint_xadd_test(const void *arg, uint64_t n)
{
	const volatile uintptr_t *hint = arg;

	for (uint64_t i = 0; i < n; i++) {
		int64_t r = 2;

		if (*hint != (uintptr_t)word)
			abort();
		__asm__ __volatile__("lock xaddq %0, %1"
				     : "+r"(r), "+m"(*word) : : "cc");
		if (__builtin_expect(r & 1, 0))
			abort();
	}
}

static void tally_adds(const void *arg, uint64_t n)
{
	bench_add_block((struct tally_block *)(uintptr_t)arg, n);
}

struct step {
	const char *what;
	step_fn fn;
	const void *arg;
	double ratio[ROUNDS], ns[ROUNDS];
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static double time_ns(const struct step *s, uint64_t n)
{
	uint64_t t0;

	s->fn(s->arg, n / 10); /* warm */
	t0 = bench_thread_cpu_ns();
	s->fn(s->arg, n);
	return (double)(bench_thread_cpu_ns() - t0) / (double)n;
}

int bench_steps(int argc, char **argv)
{
	static uintptr_t hint[2] __attribute__((aligned(16)));
	struct tally_zone *z;
	tally_block *sh, *pn, *ad;
	uint64_t n = 2000000;
	struct step base = { "lock addq (the atomic add)", lock_add, NULL,
			     { 0 }, { 0 } };

	if (argc > 1 || (argc == 1 && (n = strtoull(argv[0], NULL, 10)) == 0)) {
		fprintf(stderr, "usage: tally-bench _steps [N]\n");
		return 2;
	}
	z = tally_zone_create("tally-bench-steps",
			      &(struct tally_zone_opts){
				      .capacity = 8 * TALLY_CHUNK_SLOTS,
				      .flags = TALLY_ZONE_ANON });
	sh = z ? tally_block_alloc(z, 1, TALLY_SHARED) : NULL;
	pn = z ? tally_block_alloc(z, 1, TALLY_PERNODE) : NULL;
	ad = z ? tally_block_alloc(z, 1, TALLY_ADAPTIVE) : NULL;
	if (!sh || !pn || !ad) {
		fprintf(stderr, "tally-bench _steps: %s\n", tally_errmsg());
		return 1;
	}
	bench_pin(0);
	/* The hint's page offset differs from the word's (bit 3). */
	hint[1] = (uintptr_t)word;
	struct step steps[] = {
		{ "lock xaddq", lock_xadd, NULL, { 0 }, { 0 } },
		{ "load of another line; lock xaddq", load_then_xadd,
		  pages + 8, { 0 }, { 0 } },
		{ "load 4096 bytes before; lock xaddq (4K alias)",
		  load_then_xadd, pages, { 0 }, { 0 } },
		{ "load 4096 + 8 bytes before; lock xaddq", load_then_xadd,
		  pages + 1, { 0 }, { 0 } },
		{ "load of the word; lock xaddq", load_then_xadd, word,
		  { 0 }, { 0 } },
		{ "load, test, lock xaddq, cmp (old cold adaptive)",
		  load_xadd_cmp, NULL, { 0 }, { 0 } },
		{ "lock xaddq; load of the word", xadd_then_load, NULL,
		  { 0 }, { 0 } },
		{ "hint load, cmp; lock xaddq; test (new cold adaptive)",
		  hint_xadd_test, &hint[1], { 0 }, { 0 } },
		{ "tally shared add", tally_adds, sh, { 0 }, { 0 } },
		{ "tally pernode add", tally_adds, pn, { 0 }, { 0 } },
		{ "tally adaptive add, cold", tally_adds, ad, { 0 }, { 0 } },
	};
	unsigned nsteps = sizeof(steps) / sizeof(steps[0]);

	for (unsigned r = 0; r < ROUNDS; r++) {
		for (unsigned i = 0; i < nsteps; i++) {
			double b = time_ns(&base, n);

			steps[i].ns[r] = time_ns(&steps[i], n);
			steps[i].ratio[r] = steps[i].ns[r] / b;
			base.ns[r] = b;
		}
	}
	printf("tally-bench _steps: %llu iterations a loop, %d rounds, CPU "
	       "time; x atomic: median of the rounds' ratios to the lock addq "
	       "loop timed just before\n", (unsigned long long)n, ROUNDS);
	printf("%-56s %9s %9s\n", "loop", "ns/iter", "x atomic");
	printf("%-56s %9.2f %9.2f\n", base.what, median(base.ns, ROUNDS), 1.0);
	for (unsigned i = 0; i < nsteps; i++)
		printf("%-56s %9.2f %9.2f\n", steps[i].what,
		       median(steps[i].ns, ROUNDS),
		       median(steps[i].ratio, ROUNDS));
	bench_print_host(stdout);
	if (tally_block_promoted(ad, 0) != 0)
		printf("note: the adaptive slot was promoted (it should not "
		       "be, with one thread)\n");
	tally_zone_destroy(z);
	return 0;
}
