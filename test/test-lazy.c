/*
 * test-lazy.c: a zone's memory exists only where somebody wrote.
 *
 * With TALLY_NSLABS=256, every slot has 256 per-CPU copies and 256
 * fallback copies of address space.  A million one-slot per-CPU counters
 * written from one CPU (then from two) must cost 8 bytes each for each
 * CPU that wrote, plus 8 bytes for the page every chunk reserves when it
 * is handed out (baselines, spills and the reservation line) and their
 * chunks' allocation records, not 512 x 8: allocating creates that one
 * page a chunk, writing creates the writer's pages only, fetching (sums
 * and raw copies) creates nothing at all, and freeing gives the pages
 * back.  The same holds with TALLY_NO_RSEQ=1, where each writer thread
 * owns one fallback copy.  And in every mode, a chunk's worth of counters
 * written and zeroed by one thread costs exactly the pages its mode
 * reserves: reading a hole of the zone's shared-memory file through the
 * mapping would allocate a page, so the update path must not read pages
 * it does not write.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tally/tally.h"
#include "util.h"

#define NSLABS 256
#define PAGE 4096ull

struct writer {
	tally_block **b;
	long n;
	int cpu;
};

/* Each writer, on its own CPU (and its own thread, so that without rseq
 * it has its own fallback copy), adds i + 1 to counter i. */
static void *writer(void *arg)
{
	struct writer *w = arg;

	harness_pin(w->cpu);
	for (long i = 0; i < w->n; i++)
		tally_block_add(w->b[i], 0, i + 1);
	return NULL;
}

static uint64_t resident(struct tally_zone *z)
{
	struct tally_zone_usage u;

	CHECK_EQ(tally_zone_usage(z, &u), 0);
	return u.resident_bytes;
}

static void fail_bytes(int line, const char *what, uint64_t got,
		       uint64_t bound)
{
	harness_fail(__FILE__, line, "%s: %llu bytes, bound %llu", what,
		     (unsigned long long)got, (unsigned long long)bound);
}

static void lazy(int writers)
{
	static int64_t out[NSLABS];
	long n = harness_scale(250000); /* about 500 chunks: the bounds
					   are per chunk */
	struct tally_zone_opts o = { 0 };
	struct tally_zone_usage u;
	struct tally_zone *z;
	struct writer w[2];
	pthread_t t[2];
	tally_block **b;
	uint64_t r0, r1, r2, r3, r4, r5, chunks, bound;

	if (n < 200000)
		n = 200000;
	if (writers > harness_ncpus())
		harness_skip("needs %d CPUs", writers);
	fresh_setenv("TALLY_NSLABS", "256");
	o.capacity = (size_t)n;
	z = tally_zone_create("lazy", &o);
	CHECK(z != NULL);
	CHECK_EQ(tally_zone_usage(z, &u), 0);
	CHECK_EQ(u.nslabs, NSLABS);
	b = calloc((size_t)n, sizeof(*b));
	CHECK(b != NULL);
	chunks = ((uint64_t)n + TALLY_CHUNK_SLOTS - 1) / TALLY_CHUNK_SLOTS;
	r0 = resident(z);

	/* Allocation writes allocation records (256 bytes a chunk) and
	 * reserves one page a chunk (page 0), no copy. */
	for (long i = 0; i < n; i++) {
		b[i] = tally_block_alloc(z, 1, TALLY_PERCPU);
		CHECK(b[i] != NULL);
	}
	r1 = resident(z);
	bound = r0 + chunks * (256 + PAGE) + 2 * PAGE;
	if (r1 > bound)
		fail_bytes(__LINE__, "after allocation", r1, bound);

	/* Writing creates one page a chunk for each writer.  The writers
	 * live at the same time: without rseq, a thread that starts after
	 * another ended takes over its fallback copy. */
	for (int i = 0; i < writers; i++) {
		w[i].b = b;
		w[i].n = n;
		w[i].cpu = i;
		CHECK_EQ(pthread_create(&t[i], NULL, writer, &w[i]), 0);
	}
	for (int i = 0; i < writers; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	r2 = resident(z);
	if (r2 - r1 < chunks * PAGE * (uint64_t)writers)
		fail_bytes(__LINE__, "written pages", r2 - r1,
			   chunks * PAGE * (uint64_t)writers);
	bound = chunks * (PAGE * (uint64_t)(writers + 1) + 256) + 16 * PAGE;
	if (r2 - r0 > bound)
		fail_bytes(__LINE__, "after writing", r2 - r0, bound);
	/* The address space is hundreds of times that. */
	CHECK_EQ(tally_zone_usage(z, &u), 0);
	CHECK(u.mapped_bytes >= 2ull * NSLABS * 8 * (uint64_t)n);
	CHECK(u.mapped_bytes / (r2 - r0) >= 100);

	/* Fetching, sums and raw copies, creates nothing. */
	for (long i = 0; i < n; i++) {
		int64_t v = -1;

		CHECK_EQ(tally_block_fetch(b[i], 0, &v), 0);
		CHECK_EQ(v, (int64_t)writers * (i + 1));
	}
	for (long i = 0; i < n; i += 997) {
		int nonzero = 0;

		CHECK_EQ(tally_block_fetch_percpu(b[i], 0, out, NSLABS),
			 NSLABS);
		for (int c = 0; c < NSLABS; c++) {
			CHECK(out[c] == 0 || out[c] == i + 1);
			nonzero += out[c] != 0;
		}
		CHECK_EQ(nonzero, writers);
	}
	r3 = resident(z);
	CHECK_EQ(r3, r2);

	/* Freeing everything gives the written pages back, but for those
	 * of the chunks the thread still owns (its current one and KEEP, 16,
	 * kept ones, in alloc.c) and of the few free chunks the zone keeps
	 * warm (WARM_MAX, 4, in pool.c)... */
	for (long i = 0; i < n; i++)
		CHECK_EQ(tally_block_free(z, b[i]), 0);
	r4 = resident(z);
	bound = r0 + chunks * 256 + 2 * PAGE +
		(1 + 16 + 4) * (uint64_t)(writers + 1) * PAGE;
	if (r4 > bound)
		fail_bytes(__LINE__, "after freeing", r4, bound);
	/* ...and blocks handed out again are zero, with no page but the one
	 * each chunk reserves. */
	for (long i = 0; i < n; i++) {
		int64_t v = -1;

		b[i] = tally_block_alloc(z, 1, TALLY_PERCPU);
		CHECK(b[i] != NULL);
		if (i % 16)
			continue;
		CHECK_EQ(tally_block_fetch(b[i], 0, &v), 0);
		CHECK_EQ(v, 0);
	}
	r5 = resident(z);
	if (r5 > r4 + chunks * PAGE)
		fail_bytes(__LINE__, "after allocating again", r5,
			   r4 + chunks * PAGE);
	free(b);
}

TEST_TIMEOUT(lazy_one_writer_cpu, 300)
{
	lazy(1);
}

TEST_TIMEOUT(lazy_two_writer_cpus, 300)
{
	lazy(2);
}

static const char *const mode_name[] = { "percpu", "shared", "pernode",
					 "adaptive" };

/*
 * One chunk of one-slot blocks, written by one thread on one CPU, then
 * zeroed, in a zone of their own: allocation reserves the pages the mode
 * writes without asking (page 0 for percpu, pages 0 and 1 for adaptive,
 * the atomic copies for shared and pernode), the adds create the
 * writer's copy (percpu) or nothing, fetching creates nothing, and
 * zeroing creates the baseline page where allocation did not reserve it
 * (shared, pernode).
 */
TEST(one_writer_one_page_every_mode)
{
	enum { N = TALLY_CHUNK_SLOTS };
	static tally_block *b[N];

	harness_pin(0);
	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_ADAPTIVE; mode++) {
		struct tally_zone_opts o = { .capacity = 4 * N };
		struct tally_zone_usage u;
		struct tally_zone *z;
		uint64_t r, r0, r1, r2, r3, reserved, written, zeroed;
		char name[32];

		snprintf(name, sizeof(name), "page-%s", mode_name[mode]);
		z = tally_zone_create(name, &o);
		CHECK(z != NULL);
		CHECK_EQ(tally_zone_usage(z, &u), 0);
		reserved = mode == TALLY_PERCPU ? 1 : mode == TALLY_SHARED ? 1 :
			   mode == TALLY_PERNODE ? u.nnodes : 2;
		written = mode == TALLY_PERCPU;
		zeroed = mode == TALLY_SHARED || mode == TALLY_PERNODE;
		r = resident(z);
		for (int i = 0; i < N; i++) {
			b[i] = tally_block_alloc(z, 1, mode);
			CHECK(b[i] != NULL);
		}
		/* (the chunk table's first page comes with the first chunk) */
		r0 = resident(z);
		if (r0 - r - PAGE != reserved * PAGE)
			harness_fail(__FILE__, __LINE__, "%s: allocation "
				     "reserved %llu bytes, not %llu pages",
				     mode_name[mode],
				     (unsigned long long)(r0 - r - PAGE),
				     (unsigned long long)reserved);
		for (int i = 0; i < N; i++)
			tally_block_add(b[i], 0, i);
		r1 = resident(z);
		for (int i = 0; i < N; i++) {
			int64_t v;

			CHECK_EQ(tally_block_fetch(b[i], 0, &v), 0);
			CHECK_EQ(v, i);
			CHECK_EQ(tally_block_promoted(b[i], 0), 0);
		}
		r2 = resident(z);
		for (int i = 0; i < N; i++)
			CHECK_EQ(tally_block_zero(b[i], 0, NULL), 0);
		r3 = resident(z);
		if (r1 - r0 != written * PAGE)
			harness_fail(__FILE__, __LINE__, "%s: %d adds from one "
				     "thread created %llu bytes, not %llu pages",
				     mode_name[mode], N,
				     (unsigned long long)(r1 - r0),
				     (unsigned long long)written);
		CHECK_EQ(r2, r1);
		CHECK_EQ(r3 - r2, zeroed * PAGE);
		CHECK_EQ(tally_zone_destroy(z), 0);
	}
}
