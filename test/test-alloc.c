/*
 * test-alloc.c: allocating and freeing blocks.
 *
 * It proves that:
 *   - a block handed out again, after any CPU, the fallback, a zero or a
 *     promotion wrote to it, reads as zero in every slot and every copy,
 *     whether it was freed by its owner, by another thread, or after its
 *     owner thread exited;
 *   - tally_block_free() refuses, with -EINVAL and without changing
 *     anything, a double free, a block of another zone, a handle that was
 *     never handed out, garbage and NULL; bad sizes and modes fail with
 *     EINVAL;
 *   - every size from 1 to TALLY_BLOCK_MAX_SLOTS slots, in every mode, gets a block of its
 *     own that keeps its values;
 *   - a million blocks allocated and cross-freed by two threads give
 *     their memory back once freed and their threads gone;
 *   - a full zone fails with ENOSPC and a message;
 *   - processes forked from the allocating one get blocks of their own,
 *     and frees work (and double frees are seen) across processes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "tally/tally.h"
#include "util.h"

#define MAX_SLABS 4096
#define PAGE 4096u

static int64_t fetch(const tally_block *b, unsigned slot)
{
	int64_t v = 0x5a5a5a5a;

	CHECK_EQ(tally_block_fetch(b, slot, &v), 0);
	return v;
}

static struct tally_zone_usage usage(struct tally_zone *z)
{
	struct tally_zone_usage u;

	CHECK_EQ(tally_zone_usage(z ? z : tally_zone_default(), &u), 0);
	return u;
}

static size_t chunk_bytes(struct tally_zone *z)
{
	return (3 + 2 * (size_t)usage(z).nslabs) * PAGE;
}

static struct tally_zone *new_zone(const char *name, size_t capacity)
{
	struct tally_zone_opts o = { .capacity = capacity };
	struct tally_zone *z = tally_zone_create(name, &o);

	if (!z)
		harness_fail(__FILE__, __LINE__, "tally_zone_create(%s): %s",
			     name, tally_errmsg());
	return z;
}

/* Every slot and every copy of the first n slots of b is 0. */
static void check_zeroed(const tally_block *b, unsigned n)
{
	static int64_t out[MAX_SLABS];

	for (unsigned s = 0; s < n; s++) {
		int rc = tally_block_fetch_percpu(b, s, out, MAX_SLABS);

		CHECK(rc > 0);
		CHECK_EQ(fetch(b, s), 0);
		for (int c = 0; c < rc; c++)
			CHECK_EQ(out[c], 0);
		CHECK_EQ(tally_block_promoted(b, s), 0);
	}
}

/* ---- writing every copy a block has ---- */

struct hammer {
	tally_block *b;
	unsigned slot;
	long iters;
};

static void *hammer_thread(void *arg)
{
	struct hammer *h = arg;

	for (long i = 0; i < h->iters; i++)
		tally_block_add(h->b, h->slot, 1);
	return NULL;
}

/*
 * Adaptive slot 0 of b gets contended until promoted.  Contention needs
 * two threads running at once, which a loaded machine may not give for a
 * long time: after a few rounds the slot is promoted as the first failed
 * compare-and-swap would (tally_block_promote), writing the same word.
 */
static void promote(tally_block *b)
{
	for (int round = 0; tally_block_promoted(b, 0) != 1; round++) {
		struct hammer h = { b, 0, 20000 };
		pthread_t t[8];

		if (round == 10) {
			CHECK_EQ(tally_block_promote(b, 0), 0);
			continue;
		}
		for (int i = 0; i < 8; i++)
			CHECK_EQ(pthread_create(&t[i], NULL, hammer_thread,
						&h), 0);
		for (int i = 0; i < 8; i++)
			CHECK_EQ(pthread_join(t[i], NULL), 0);
	}
}

/*
 * Writes every page of b's slots that exists for its mode: each CPU's
 * copy (pinning), a fallback copy (from a second thread with rseq off it
 * is the same as the first; both are written either way), the baseline
 * (a zero), and for adaptive blocks the shared copy and the contention
 * state (a promotion).
 */
static void dirty(tally_block *b, unsigned n, unsigned mode)
{
	if (mode == TALLY_ADAPTIVE)
		promote(b);
	for (int i = 0; i < harness_ncpus(); i++) {
		harness_pin(i);
		for (unsigned s = 0; s < n; s++)
			tally_block_add(b, s, (int64_t)s * 7 - 3 + i);
	}
	harness_pin(-1);
	for (unsigned s = 0; s < n; s += 2)
		CHECK_EQ(tally_block_zero(b, s, NULL), 0);
	for (unsigned s = 0; s < n; s++)
		tally_block_add(b, s, 11);
}

/* Allocates (n, mode) blocks from z until b comes back; frees the rest. */
static tally_block *alloc_until(struct tally_zone *z, unsigned n,
				unsigned mode, const tally_block *b)
{
	enum { MAX = 4 * 512 + 8 };
	static tally_block *held[MAX];
	tally_block *got = NULL;
	int k;

	for (k = 0; k < MAX; k++) {
		held[k] = tally_block_alloc(z, n, mode);
		CHECK(held[k] != NULL);
		if (held[k] == b) {
			got = held[k];
			break;
		}
	}
	if (!got)
		harness_fail(__FILE__, __LINE__, "block %p not handed out "
			     "again in %d allocations", (const void *)b, MAX);
	for (int i = 0; i < k; i++)
		CHECK_EQ(tally_block_free(z, held[i]), 0);
	return got;
}

/* Freed by its owner: the same thread gets it back zeroed. */
TEST(reuse_gives_zeroed_blocks)
{
	static const unsigned sizes[] = { 1, 4, 20, TALLY_BLOCK_MAX_SLOTS };

	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_ADAPTIVE; mode++) {
		for (unsigned i = 0; i < 4; i++) {
			unsigned n = sizes[i];
			tally_block *b = tally_block_alloc(NULL, n, mode);

			CHECK(b != NULL);
			dirty(b, n, mode);
			CHECK(fetch(b, 1 % n) != 0);
			CHECK_EQ(tally_block_free(NULL, b), 0);
			b = alloc_until(NULL, n, mode, b);
			check_zeroed(b, n);
			CHECK_EQ(tally_block_free(NULL, b), 0);
		}
	}
}

struct xfree {
	struct tally_zone *z;
	tally_block *b;
	int rc;
};

static void *free_thread(void *arg)
{
	struct xfree *x = arg;

	x->rc = tally_block_free(x->z, x->b);
	return NULL;
}

static int free_in_thread(struct tally_zone *z, tally_block *b)
{
	struct xfree x = { z, b, 1 };
	pthread_t t;

	CHECK_EQ(pthread_create(&t, NULL, free_thread, &x), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	return x.rc;
}

/* Freed by another thread: the owner gets it back zeroed. */
TEST(reuse_after_remote_free_gives_zeroed_blocks)
{
	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_ADAPTIVE; mode++) {
		tally_block *b = tally_block_alloc(NULL, 3, mode);

		CHECK(b != NULL);
		dirty(b, 3, mode);
		CHECK_EQ(free_in_thread(NULL, b), 0);
		CHECK_EQ(free_in_thread(NULL, b), -EINVAL);
		b = alloc_until(NULL, 3, mode, b);
		check_zeroed(b, 3);
		CHECK_EQ(tally_block_free(NULL, b), 0);
	}
}

struct owner {
	struct tally_zone *z;
	unsigned mode;
	tally_block *b[2];
};

static void *owner_thread(void *arg)
{
	struct owner *o = arg;

	for (int i = 0; i < 2; i++) {
		o->b[i] = tally_block_alloc(o->z, 2, o->mode);
		CHECK(o->b[i] != NULL);
		dirty(o->b[i], 2, o->mode);
	}
	return NULL;
}

/*
 * The owner thread exits with blocks allocated; one is freed later by
 * another thread; a third thread taking over the chunk gets the freed
 * block back zeroed, while the live one keeps its values.
 */
TEST(reuse_after_owner_exit_gives_zeroed_blocks)
{
	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_ADAPTIVE; mode++) {
		struct owner o = { NULL, mode, { NULL, NULL } };
		pthread_t t;
		int64_t keep0, keep1;

		o.z = new_zone("owner", 0);
		CHECK_EQ(pthread_create(&t, NULL, owner_thread, &o), 0);
		CHECK_EQ(pthread_join(t, NULL), 0);
		keep0 = fetch(o.b[1], 0);
		keep1 = fetch(o.b[1], 1);
		CHECK_EQ(free_in_thread(o.z, o.b[0]), 0);
		CHECK(alloc_until(o.z, 2, mode, o.b[0]) == o.b[0]);
		check_zeroed(o.b[0], 2);
		CHECK_EQ(fetch(o.b[1], 0), keep0);
		CHECK_EQ(fetch(o.b[1], 1), keep1);
		CHECK_EQ(tally_block_free(o.z, o.b[0]), 0);
		CHECK_EQ(tally_block_free(o.z, o.b[1]), 0);
		CHECK_EQ(tally_zone_destroy(o.z), 0);
	}
}

/* ---- refused frees ---- */

/* A double free is refused and does not let the block out twice. */
TEST(double_free_is_einval)
{
	enum { N = 3 * 512 };
	static tally_block *held[N];
	tally_block *b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
	tally_block *c = tally_block_alloc(NULL, 1, TALLY_SHARED);
	int seen = 0;

	CHECK(b != NULL && c != NULL);
	CHECK_EQ(tally_block_free(NULL, b), 0);
	CHECK_EQ(tally_block_free(NULL, b), -EINVAL);
	CHECK(tally_errmsg()[0] != 0);
	CHECK_EQ(free_in_thread(NULL, b), -EINVAL);
	CHECK_EQ(free_in_thread(NULL, c), 0);
	CHECK_EQ(free_in_thread(NULL, c), -EINVAL);
	CHECK_EQ(tally_block_free(NULL, c), -EINVAL);
	for (int i = 0; i < N; i++) {
		held[i] = tally_block_alloc(NULL, 1, TALLY_PERCPU);
		CHECK(held[i] != NULL);
		seen += held[i] == b;
	}
	CHECK_EQ(seen, 1);
	for (int i = 0; i < N; i++)
		CHECK_EQ(tally_block_free(NULL, held[i]), 0);
}

TEST(foreign_zone_handle_is_einval)
{
	struct tally_zone *z = new_zone("foreign", 0);
	tally_block *b = tally_block_alloc(z, 2, TALLY_PERCPU);
	tally_block *d = tally_block_alloc(NULL, 2, TALLY_PERCPU);

	CHECK(b != NULL && d != NULL);
	tally_block_add(b, 1, 5);
	CHECK_EQ(tally_block_free(NULL, b), -EINVAL);
	CHECK(tally_errmsg()[0] != 0);
	CHECK_EQ(tally_block_free(tally_zone_default(), b), -EINVAL);
	CHECK_EQ(tally_block_free(z, d), -EINVAL);
	/* Nothing changed: both are still allocated and hold their values. */
	CHECK_EQ(fetch(b, 1), 5);
	CHECK_EQ(tally_block_free(z, b), 0);
	CHECK_EQ(tally_block_free(NULL, d), 0);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

static void check_refused(struct tally_zone *z, const void *p)
{
	tally_block *b = (tally_block *)p;
	int64_t v;

	CHECK_EQ(tally_block_free(z, b), -EINVAL);
	CHECK_EQ(tally_block_free(NULL, b), -EINVAL);
	CHECK_EQ(tally_block_fetch(b, 0, &v), -EINVAL);
	CHECK_EQ(tally_block_zero(b, 0, &v), -EINVAL);
	CHECK_EQ(tally_block_mode(b), -EINVAL);
	CHECK_EQ(tally_block_promoted(b, 0), -EINVAL);
}

TEST(never_allocated_handles_are_einval)
{
	struct tally_zone *z = new_zone("never", 4 * 512);
	size_t cb = chunk_bytes(z);
	tally_block *b = tally_block_alloc(z, 1, TALLY_PERCPU);
	tally_block *q = tally_block_alloc(z, 4, TALLY_SHARED);
	char *h = (char *)b, *hq = (char *)((uintptr_t)q & ~(uintptr_t)3);
	int64_t local;

	CHECK(b != NULL && q != NULL);
	/* b is the first slot of chunk 0's first copy page. */
	CHECK_EQ((uintptr_t)b % PAGE, 0);
	tally_block_add(b, 0, 1);

	/* Slots of b's chunk that were never handed out. */
	CHECK_EQ(tally_block_free(z, (tally_block *)(h + 8)), -EINVAL);
	CHECK_EQ(tally_block_free(z, (tally_block *)(h + 4088)), -EINVAL);
	/* The same for the shared chunk, and the middle of q. */
	CHECK_EQ(tally_block_free(z, (tally_block *)((uintptr_t)(hq + 32) | 1)),
		 -EINVAL);
	check_refused(z, (void *)((uintptr_t)(hq + 8) | 1));
	/* Chunks 2 and 3 were never handed out at all. */
	check_refused(z, h + 2 * cb);
	check_refused(z, h + 3 * cb + 64);
	/* The other pages of b's chunk, and b with the wrong tag or
	 * misaligned. */
	check_refused(z, h - PAGE);
	check_refused(z, h - 3 * PAGE);
	check_refused(z, h + PAGE);
	check_refused(z, h + 2);
	check_refused(z, h + 4);
	check_refused(z, (void *)((uintptr_t)h | 3));
	/* Garbage. */
	check_refused(z, h + 4 * cb);
	check_refused(z, h - 64 * PAGE);
	check_refused(z, &local);
	check_refused(z, (void *)0x1000);
	check_refused(z, (void *)-8);
	check_refused(z, (void *)(uintptr_t)check_refused);
	CHECK_EQ(tally_block_free(z, NULL), -EINVAL);
	CHECK_EQ(tally_block_free(NULL, NULL), -EINVAL);
	CHECK_EQ(tally_block_fetch(NULL, 0, &local), -EINVAL);
	/* None of it touched b or q. */
	CHECK_EQ(fetch(b, 0), 1);
	CHECK_EQ(tally_block_free(z, b), 0);
	CHECK_EQ(tally_block_free(z, q), 0);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

TEST(bad_alloc_arguments_are_einval)
{
	static const unsigned bad_n[] = { 0, 513, 4096, UINT_MAX };
	static const unsigned bad_mode[] = { 4, 99, UINT_MAX };
	struct tally_zone *z = new_zone("badargs", 0);

	for (unsigned i = 0; i < 4; i++) {
		errno = 0;
		CHECK(tally_block_alloc(NULL, bad_n[i], TALLY_PERCPU) == NULL);
		CHECK_EQ(errno, EINVAL);
		CHECK(tally_errmsg()[0] != 0);
		errno = 0;
		CHECK(tally_block_alloc(z, bad_n[i], TALLY_SHARED) == NULL);
		CHECK_EQ(errno, EINVAL);
	}
	for (unsigned i = 0; i < 3; i++) {
		errno = 0;
		CHECK(tally_block_alloc(NULL, 1, bad_mode[i]) == NULL);
		CHECK_EQ(errno, EINVAL);
		errno = 0;
		CHECK(tally_block_alloc(z, 512, bad_mode[i]) == NULL);
		CHECK_EQ(errno, EINVAL);
	}
	CHECK_EQ(usage(z).chunks_used, 0);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/* ---- every size ---- */

static int64_t pattern(unsigned mode, unsigned n, unsigned s)
{
	return ((int64_t)mode << 40) + ((int64_t)n << 20) + s - 77;
}

/*
 * Every size 1..TALLY_BLOCK_MAX_SLOTS in every mode, all alive at once: each slot keeps
 * the value written to it (no two blocks share a slot), slots past the
 * block's class are refused, and every block frees once.
 */
TEST(all_sizes_round_trip)
{
	static tally_block *b[4][TALLY_BLOCK_MAX_SLOTS + 1];

	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_ADAPTIVE; mode++) {
		for (unsigned n = 1; n <= TALLY_BLOCK_MAX_SLOTS; n++) {
			b[mode][n] = tally_block_alloc(NULL, n, mode);
			CHECK(b[mode][n] != NULL);
			CHECK_EQ(tally_block_mode(b[mode][n]), mode);
			harness_pin((int)(n % 2));
			for (unsigned s = 0; s < n; s++)
				tally_block_add(b[mode][n], s,
						pattern(mode, n, s));
		}
	}
	harness_pin(-1);
	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_ADAPTIVE; mode++) {
		for (unsigned n = 1; n <= TALLY_BLOCK_MAX_SLOTS; n++) {
			unsigned cls = tally__class_size[tally__class_of(n)];
			int64_t v;

			for (unsigned s = 0; s < n; s++)
				CHECK_EQ(fetch(b[mode][n], s),
					 pattern(mode, n, s));
			CHECK_EQ(tally_block_fetch(b[mode][n], cls, &v),
				 -EINVAL);
			CHECK_EQ(tally_block_zero(b[mode][n], cls, &v),
				 -EINVAL);
		}
	}
	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_ADAPTIVE; mode++)
		for (unsigned n = 1; n <= TALLY_BLOCK_MAX_SLOTS; n++) {
			CHECK_EQ(tally_block_free(NULL, b[mode][n]), 0);
			CHECK_EQ(tally_block_free(NULL, b[mode][n]), -EINVAL);
		}
}

/*
 * tally_block_fetch() says -EINVAL for "a slot out of range": slot n of
 * a block of n slots is out of range even when the block's size class
 * is larger than n.
 */
TEST(slot_past_requested_size_is_einval)
{
	for (unsigned n = 1; n <= TALLY_BLOCK_MAX_SLOTS; n++) {
		tally_block *b = tally_block_alloc(NULL, n, TALLY_PERCPU);
		int64_t v;

		CHECK(b != NULL);
		if (tally_block_fetch(b, n, &v) != -EINVAL)
			harness_fail(__FILE__, __LINE__, "a block of %u slots"
				     " accepts slot %u", n, n);
		CHECK_EQ(tally_block_free(NULL, b), 0);
	}
}

/* ---- a million blocks, and memory back ---- */

#define MILLION 1000000

struct million {
	struct tally_zone *z;
	tally_block **mine, **theirs;
	long n;
	pthread_barrier_t *bar;
};

static void *million_thread(void *arg)
{
	struct million *m = arg;

	for (long i = 0; i < m->n; i++) {
		m->mine[i] = tally_block_alloc(m->z, 1, TALLY_PERCPU);
		CHECK(m->mine[i] != NULL);
		tally_block_add(m->mine[i], 0, i);
	}
	pthread_barrier_wait(m->bar); /* all allocated */
	pthread_barrier_wait(m->bar); /* measured */
	/* Free half of ours and half of theirs, interleaved. */
	for (long i = 0; i < m->n; i += 2) {
		CHECK_EQ(tally_block_free(m->z, m->mine[i]), 0);
		CHECK_EQ(fetch(m->theirs[i + 1], 0), i + 1);
		CHECK_EQ(tally_block_free(m->z, m->theirs[i + 1]), 0);
	}
	return NULL;
}

TEST(million_blocks_two_threads_memory_returns)
{
	long n = MILLION / 2;
	struct tally_zone *z = new_zone("million", 2 * MILLION);
	tally_block **a = calloc((size_t)n, sizeof(*a));
	tally_block **b = calloc((size_t)n, sizeof(*b));
	struct million m[2] = { { z, a, b, n, NULL }, { z, b, a, n, NULL } };
	pthread_barrier_t bar;
	struct tally_zone_usage u0, u1, u2;
	pthread_t t[2];
	uint64_t meta;

	CHECK(a && b);
	u0 = usage(z);
	CHECK_EQ(u0.chunks_used, 0);
	CHECK_EQ(pthread_barrier_init(&bar, NULL, 3), 0);
	for (int i = 0; i < 2; i++) {
		m[i].bar = &bar;
		CHECK_EQ(pthread_create(&t[i], NULL, million_thread, &m[i]),
			 0);
	}
	pthread_barrier_wait(&bar); /* all allocated and written */
	u1 = usage(z);
	CHECK(u1.chunks_used >= (uint64_t)MILLION / 512);
	CHECK(u1.resident_bytes >= u0.resident_bytes + 8ull * MILLION);
	pthread_barrier_wait(&bar);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	/* Every block is free and both owners are gone. */
	u2 = usage(z);
	CHECK_EQ(u2.chunks_used, 0);
	/* What stays: the allocation records of the chunks used, never
	 * given back, and the pages of the few free chunks the zone keeps
	 * warm (WARM_MAX, 4, in pool.c; two CPUs' copies each at most). */
	meta = (u1.chunks_used + 64) * sizeof(struct tally__chunk);
	if (u2.resident_bytes > u0.resident_bytes + meta + 16 * PAGE)
		harness_fail(__FILE__, __LINE__, "resident %llu bytes after "
			     "freeing everything, %llu at the start, %llu at"
			     " the peak", (unsigned long long)u2.resident_bytes,
			     (unsigned long long)u0.resident_bytes,
			     (unsigned long long)u1.resident_bytes);
	/* And the zone is usable again. */
	for (long i = 0; i < n; i++) {
		a[i] = tally_block_alloc(z, 1, TALLY_SHARED);
		CHECK(a[i] != NULL);
	}
	for (long i = 0; i < n; i++)
		CHECK_EQ(tally_block_free(z, a[i]), 0);
	free(a);
	free(b);
}

/* ---- a full zone ---- */

/* A zone of two chunks holds exactly two chunks' worth of blocks. */
TEST(full_zone_is_enospc)
{
	static const unsigned sizes[] = { 1, 3, 17, 100, TALLY_BLOCK_MAX_SLOTS };

	for (unsigned i = 0; i < 5; i++) {
		unsigned n = sizes[i];
		struct tally_zone *z = new_zone("tiny", 2 * TALLY_CHUNK_SLOTS);
		unsigned per_chunk = TALLY_CHUNK_SLOTS / tally__class_size[tally__class_of(n)];
		tally_block *b, *first = NULL;
		unsigned count = 0;

		while ((b = tally_block_alloc(z, n, TALLY_PERCPU)) != NULL) {
			if (!first)
				first = b;
			CHECK(++count <= 2 * per_chunk);
		}
		CHECK_EQ(errno, ENOSPC);
		CHECK(strlen(tally_errmsg()) > 0);
		CHECK_EQ(count, 2 * per_chunk);
		/* Another mode needs a chunk of its own: none left. */
		CHECK(tally_block_alloc(z, n, TALLY_SHARED) == NULL);
		CHECK_EQ(errno, ENOSPC);
		/* A freed block can be had again. */
		CHECK_EQ(tally_block_free(z, first), 0);
		CHECK(tally_block_alloc(z, n, TALLY_PERCPU) == first);
		CHECK(tally_block_alloc(z, n, TALLY_PERCPU) == NULL);
		CHECK_EQ(errno, ENOSPC);
		CHECK_EQ(tally_zone_destroy(z), 0);
	}
}

/* ---- processes ---- */

#define NPROC_BLOCKS 3000

struct range {
	uintptr_t lo, hi;
	int who;
};

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static unsigned proc_size(int i)
{
	static const unsigned sizes[] = { 1, 2, 8, 64, 5 };

	return sizes[i % 5];
}

static unsigned proc_mode(int i)
{
	return (unsigned)(i / 5) % 4;
}

static void alloc_marked(tally_block **out, int n, int64_t mark)
{
	for (int i = 0; i < n; i++) {
		out[i] = tally_block_alloc(NULL, proc_size(i), proc_mode(i));
		CHECK(out[i] != NULL);
		for (unsigned s = 0; s < proc_size(i); s++)
			tally_block_add(out[i], s, mark + i);
	}
}

static void check_marked(tally_block **b, int n, int64_t mark)
{
	for (int i = 0; i < n; i++)
		for (unsigned s = 0; s < proc_size(i); s++)
			CHECK_EQ(fetch(b[i], s), mark + i);
}

/*
 * Blocks held by the parent before the fork, blocks the parent takes
 * after it and blocks the child takes at the same time: no two overlap,
 * and each keeps its own values.
 */
TEST(fork_child_allocations_disjoint)
{
	tally_block **blk = shared_mem(3 * NPROC_BLOCKS * sizeof(*blk));
	tally_block **before = blk, **parent = blk + NPROC_BLOCKS,
		    **child = blk + 2 * NPROC_BLOCKS;
	struct range *r = calloc(3 * NPROC_BLOCKS, sizeof(*r));
	pid_t pid;
	int status, nr = 0;

	CHECK(r != NULL);
	alloc_marked(before, NPROC_BLOCKS, 1000000);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		alloc_marked(child, NPROC_BLOCKS, 3000000);
		check_marked(before, NPROC_BLOCKS, 1000000);
		_exit(0);
	}
	alloc_marked(parent, NPROC_BLOCKS, 2000000);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_CHILD_OK(status);
	check_marked(before, NPROC_BLOCKS, 1000000);
	check_marked(parent, NPROC_BLOCKS, 2000000);
	check_marked(child, NPROC_BLOCKS, 3000000);
	for (int w = 0; w < 3; w++)
		for (int i = 0; i < NPROC_BLOCKS; i++) {
			uintptr_t lo = (uintptr_t)blk[w * NPROC_BLOCKS + i] &
				       ~(uintptr_t)3;

			r[nr].lo = lo;
			r[nr].hi = lo + 8 * proc_size(i);
			r[nr++].who = w;
		}
	qsort(r, (size_t)nr, sizeof(*r), range_cmp);
	for (int i = 1; i < nr; i++)
		if (r[i].lo < r[i - 1].hi)
			harness_fail(__FILE__, __LINE__, "blocks overlap: %#lx"
				     " (%d) and %#lx (%d)",
				     (unsigned long)r[i - 1].lo, r[i - 1].who,
				     (unsigned long)r[i].lo, r[i].who);
	free(r);
}

/*
 * A child allocates blocks of its own and frees half of the parent's; the
 * parent sees the child's frees as done (a second free is refused),
 * frees the child's blocks, and gets the blocks the child freed back,
 * zeroed.
 */
TEST(frees_across_processes)
{
	enum { N = 1000 };
	tally_block **blk = shared_mem(2 * N * sizeof(*blk));
	tally_block **mine = blk, **theirs = blk + N;
	int status, back = 0;
	pid_t pid;

	for (int i = 0; i < N; i++) {
		mine[i] = tally_block_alloc(NULL, 1, TALLY_PERCPU);
		CHECK(mine[i] != NULL);
		tally_block_add(mine[i], 0, 7);
	}
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* Allocate first: the blocks freed next would otherwise
		 * (rightly) be handed out again here. */
		for (int i = 0; i < N; i++) {
			theirs[i] = tally_block_alloc(NULL, 1, TALLY_PERCPU);
			CHECK(theirs[i] != NULL);
			tally_block_add(theirs[i], 0, 9);
		}
		for (int i = 0; i < N; i += 2)
			CHECK_EQ(tally_block_free(NULL, mine[i]), 0);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_CHILD_OK(status);
	for (int i = 0; i < N; i++) {
		CHECK_EQ(fetch(theirs[i], 0), 9);
		CHECK_EQ(tally_block_free(NULL, mine[i]), i % 2 ? 0 : -EINVAL);
		CHECK_EQ(tally_block_free(NULL, theirs[i]), 0);
		CHECK_EQ(tally_block_free(NULL, theirs[i]), -EINVAL);
	}
	/* The parent owns the chunk of the blocks the child freed: they
	 * come back to it, zeroed. */
	for (int k = 0; k < 4 * N && back < N / 2; k++) {
		tally_block *b = tally_block_alloc(NULL, 1, TALLY_PERCPU);

		CHECK(b != NULL);
		for (int i = 0; i < N; i += 2)
			if (b == mine[i]) {
				CHECK_EQ(fetch(b, 0), 0);
				back++;
			}
	}
	CHECK_EQ(back, N / 2);
}

/*
 * A child process allocates blocks, writes them and exits normally; the
 * parent frees them all.  The chunks the child took must go back to the
 * zone, as those of an exited thread do: otherwise every worker process
 * that ever lived keeps chunks of the zone forever.
 */
static void child_allocates(void *arg)
{
	tally_block **blk = arg;
	struct tally_zone *z = tally_zone_default();

	for (int i = 0; i < 2048; i++) {
		blk[i] = tally_block_alloc(z, 1, TALLY_PERCPU);
		CHECK(blk[i] != NULL);
		tally_block_add(blk[i], 0, 1);
	}
	exit(0);
}

TEST(chunks_of_exited_process_are_released)
{
	tally_block **blk = shared_mem(2048 * sizeof(*blk));
	struct tally_zone_usage u0, u1;

	u0 = usage(NULL);
	CHECK_CHILD_OK(harness_child(child_allocates, blk));
	for (int i = 0; i < 2048; i++)
		CHECK_EQ(tally_block_free(NULL, blk[i]), 0);
	u1 = usage(NULL);
	CHECK_EQ(u1.chunks_used, u0.chunks_used);
	/* The allocation records' page, and the pages (two CPUs at most)
	 * of the few free chunks the zone keeps warm (WARM_MAX, 4). */
	CHECK(u1.resident_bytes <= u0.resident_bytes + 9 * PAGE);
}

/*
 * The same when the child's blocks were taken by a thread other than the
 * one that calls exit() (still running at exit, as a worker thread
 * blocked in a poll would be), or when the child is killed: the child's
 * threads are gone, so their chunks must go back once their blocks are
 * freed.
 */
struct child_thread {
	tally_block **blk;
	pthread_barrier_t *ready;
};

static void *allocating_thread(void *arg)
{
	struct child_thread *c = arg;

	for (int i = 0; i < 2048; i++) {
		c->blk[i] = tally_block_alloc(NULL, 1, TALLY_PERCPU);
		CHECK(c->blk[i] != NULL);
		tally_block_add(c->blk[i], 0, 1);
	}
	pthread_barrier_wait(c->ready);
	for (;;)
		pause();
	return NULL;
}

static void child_thread_allocates(void *arg)
{
	struct child_thread *c = arg;
	pthread_barrier_t ready;
	pthread_t t;

	CHECK_EQ(pthread_barrier_init(&ready, NULL, 2), 0);
	c->ready = &ready;
	CHECK_EQ(pthread_create(&t, NULL, allocating_thread, c), 0);
	pthread_barrier_wait(&ready);
	if (c->blk[2048])
		kill(getpid(), SIGKILL);
	exit(0);
}

static void dead_child_thread_chunks(int killed)
{
	tally_block **blk = shared_mem(2049 * sizeof(*blk));
	struct child_thread c = { blk, NULL };
	struct tally_zone_usage u0, u1;
	int status;

	blk[2048] = killed ? (tally_block *)1 : NULL;
	u0 = usage(NULL);
	status = harness_child(child_thread_allocates, &c);
	if (killed)
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	else
		CHECK_CHILD_OK(status);
	for (int i = 0; i < 2048; i++)
		CHECK_EQ(tally_block_free(NULL, blk[i]), 0);
	u1 = usage(NULL);
	CHECK_EQ(u1.chunks_used, u0.chunks_used);
	CHECK(u1.resident_bytes <= u0.resident_bytes + 9 * PAGE);
}

TEST(chunks_of_exited_process_threads_are_released)
{
	dead_child_thread_chunks(0);
}

TEST(chunks_of_killed_process_are_released)
{
	dead_child_thread_chunks(1);
}
