/*
 * test-rseq.c: the update path's use of the thread's rseq area.
 *
 * Proves that an add, with rseq or with the fallback, writes nothing of
 * the thread's control block but the rseq_cs field of the area it uses
 * (in particular not %fs:8, glibc's DTV pointer, with rseq off), and
 * that tally_rseq_active() tells the truth about which path the adds
 * take on this host.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tally/tally.h"

/* The first 64 bytes of the TCB: self pointer, DTV, ... */
static void tcb_words(uint64_t out[8])
{
#if defined(__x86_64__)
	for (int i = 0; i < 8; i++)
		out[i] = ((volatile uint64_t *)__builtin_thread_pointer())[i];
#else
	memset(out, 0, 8 * sizeof(uint64_t));
#endif
}

static void *adder(void *arg)
{
	tally_block *b = arg;
	uint64_t before[8], after[8];

	tcb_words(before);
	for (int i = 0; i < 100000; i++)
		tally_block_add(b, 0, 1);
	tcb_words(after);
	CHECK(memcmp(before, after, sizeof(before)) == 0);
	return NULL;
}

TEST(add_leaves_the_thread_control_block_alone)
{
	tally_block *b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
	pthread_t t[4];
	int64_t v;

	CHECK(b != NULL);
	adder(b);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, adder, b), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
	CHECK_EQ(v, 500000);
}

/*
 * The settings the inline add loads lie past every slot's offset in a
 * page, so that no load of the add has the page offset of the copy it
 * adds to (tally/arch/add.h: on Intel cores such a load waits for the
 * locked add before it, a third more time a shared or per-node add).
 */
TEST(update_settings_never_share_a_copys_page_offset)
{
	uintptr_t at = (uintptr_t)&tally__cfg;

	CHECK_EQ(at % TALLY__STRIDE, 0);
	CHECK((uintptr_t)&tally__cfg.rseq_off % TALLY__STRIDE >=
	      TALLY_CHUNK_SLOTS * 8u);
	CHECK((uintptr_t)&tally__cfg.promoted % TALLY__STRIDE >=
	      TALLY_CHUNK_SLOTS * 8u);
	CHECK((uintptr_t)(&tally__cfg.thread_off + 1) - at <= TALLY__STRIDE);
}

TEST(rseq_active_matches_the_environment)
{
	const char *no = getenv("TALLY_NO_RSEQ");
	int forced_off = no && *no && strcmp(no, "0") != 0;
	tally_block *b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
	int64_t percpu[4096];
	int n;

	CHECK(b != NULL); /* the library reads its environment here */
	if (forced_off)
		CHECK_EQ(tally_rseq_active(), 0);
#if defined(__x86_64__)
	else
		/* glibc >= 2.35 registers rseq on every thread of this host;
		 * running under valgrind would not, and is not done here. */
		CHECK_EQ(tally_rseq_active(), 1);
#endif
	/* Where the adds land says which path they took: rseq adds in the
	 * first nslabs copies, fallback adds in the others.  The per-CPU
	 * view adds both for a CPU, so look at the sum only. */
	tally_block_add(b, 0, 7);
	n = tally_block_fetch_percpu(b, 0, percpu, 4096);
	CHECK(n > 0);
	{
		int64_t sum = 0;

		for (int i = 0; i < n; i++)
			sum += percpu[i];
		CHECK_EQ(sum, 7);
	}
}
