/*
 * bench-loop.c: `tally-bench _loop OP N`, a hidden mode for
 * bench/callgrind.sh: run one operation N times inside a function named
 * bench_loop_OP, so that `valgrind --tool=callgrind
 * --toggle-collect=bench_loop_OP` counts the instructions of the loop
 * alone.  bench_loop_empty is the same loop with nothing in it, to be
 * subtracted.  Under valgrind glibc cannot register rseq, so "add" is the
 * fallback of a per-CPU add: the inline, unlocked add to the fallback copy
 * the thread owns.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tally/tally.h"

/* Not static: callgrind finds them by name. */
void bench_loop_empty(uint64_t n);
void bench_loop_tls(uint64_t n);
void bench_loop_atomic(uint64_t n);
void bench_loop_add(tally_block *b, uint64_t n);
void bench_loop_shared(tally_block *b, uint64_t n);
void bench_loop_adaptive(tally_block *b, uint64_t n);
void bench_loop_pernode(tally_block *b, uint64_t n);
void bench_loop_pair(struct tally_zone *z, uint64_t n);

static _Thread_local uint64_t tls_count;
static uint64_t shared_atomic;

/* The empty asm keeps an iteration from being deleted or merged. */
__attribute__((noinline)) void bench_loop_empty(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		__asm__ __volatile__("" ::: "memory");
}

__attribute__((noinline)) void bench_loop_tls(uint64_t n)
{
	volatile uint64_t *p = &tls_count; /* as bench_add_tls (loops.c) */

	__asm__ __volatile__("" : "+r"(p));
	for (uint64_t i = 0; i < n; i++)
		*p += 1;
}

__attribute__((noinline)) void bench_loop_atomic(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		__atomic_fetch_add(&shared_atomic, 1, __ATOMIC_RELAXED);
}

__attribute__((noinline)) void bench_loop_add(tally_block *b, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		tally_block_add(b, 0, 1);
}

__attribute__((noinline)) void bench_loop_shared(tally_block *b, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		tally_block_add(b, 0, 1);
}

/* An adaptive slot one thread adds to: never promoted. */
__attribute__((noinline)) void bench_loop_adaptive(tally_block *b, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		tally_block_add(b, 0, 1);
}

__attribute__((noinline)) void bench_loop_pernode(tally_block *b, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		tally_block_add(b, 0, 1);
}

__attribute__((noinline)) void bench_loop_pair(struct tally_zone *z,
					       uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		tally_block *b = tally_block_alloc(z, 2, TALLY_PERCPU);

		if (!b || tally_block_free(z, b) < 0) {
			fprintf(stderr, "tally-bench _loop pair: %s\n",
				tally_errmsg());
			exit(1);
		}
	}
}

int bench_loop(int argc, char **argv)
{
	struct tally_zone *z;
	tally_block *b;
	const char *op;
	uint64_t n;
	char *end;
	int64_t v = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: tally-bench _loop "
			"empty|tls|atomic|add|shared|adaptive|pernode|pair N\n");
		return 2;
	}
	op = argv[0];
	n = strtoull(argv[1], &end, 10);
	if (*end || n == 0) {
		fprintf(stderr, "tally-bench _loop: bad count '%s'\n", argv[1]);
		return 2;
	}
	z = tally_zone_create("tally-bench-loop",
			      &(struct tally_zone_opts){ .capacity = 8 * TALLY_CHUNK_SLOTS,
							 .flags = TALLY_ZONE_ANON });
	if (!z) {
		fprintf(stderr, "tally-bench _loop: %s\n", tally_errmsg());
		return 1;
	}
	if (strcmp(op, "empty") == 0) {
		bench_loop_empty(n);
	} else if (strcmp(op, "tls") == 0) {
		bench_loop_tls(n);
	} else if (strcmp(op, "atomic") == 0) {
		bench_loop_atomic(n);
	} else if (strcmp(op, "add") == 0 || strcmp(op, "shared") == 0 ||
		   strcmp(op, "adaptive") == 0 || strcmp(op, "pernode") == 0) {
		unsigned mode = op[0] == 's' ? TALLY_SHARED :
				op[0] == 'a' && op[1] == 'd' && op[2] == 'a' ?
				TALLY_ADAPTIVE : op[0] == 'p' ? TALLY_PERNODE :
				TALLY_PERCPU;

		b = tally_block_alloc(z, 1, mode);
		if (!b) {
			fprintf(stderr, "tally-bench _loop: %s\n", tally_errmsg());
			return 1;
		}
		uintptr_t tcb = bench_tcb_word();

		tally_block_add(b, 0, 0); /* first touch outside the loop */
		if (mode == TALLY_SHARED)
			bench_loop_shared(b, n);
		else if (mode == TALLY_ADAPTIVE)
			bench_loop_adaptive(b, n);
		else if (mode == TALLY_PERNODE)
			bench_loop_pernode(b, n);
		else
			bench_loop_add(b, n);
		if (bench_tcb_word() != tcb) {
			bench_tcb_restore(tcb);
			fprintf(stderr, "tally-bench _loop: LIBRARY BUG: the add "
				"wrote %%fs:8 (glibc's DTV pointer)\n");
		}
		if (tally_block_fetch(b, 0, &v) < 0 || v != (int64_t)n) {
			fprintf(stderr, "tally-bench _loop: total %lld, not %llu\n",
				(long long)v, (unsigned long long)n);
			return 1;
		}
		printf("rseq=%d\n", tally_rseq_active());
	} else if (strcmp(op, "pair") == 0) {
		/* Warm the thread cache so that the loop measures the steady
		 * state, not the first chunk's set-up. */
		bench_loop_pair(z, 1);
		bench_loop_pair(z, n);
	} else {
		fprintf(stderr, "tally-bench _loop: unknown op '%s'\n", op);
		return 2;
	}
	tally_zone_destroy(z);
	return 0;
}
