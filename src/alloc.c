/*
 * alloc.c: allocating and freeing blocks.
 *
 * Each thread keeps, per zone it uses, an owner token and for every mode
 * and size class the chunk it currently allocates from plus up to KEEP
 * full chunks it still owns.  Allocation takes the first set bit of the
 * current chunk's "local" bitmap, which only the owner writes: no lock, no
 * atomic read-modify-write, no system call, and nothing that depends on
 * the number of CPUs.  A free by the owner (into any chunk it owns) sets a
 * bit in its "dirty" bitmap, a free by anybody else an atomic or in the
 * "remote" bitmap.  When the current chunk runs out, the owner collects
 * both (zeroing the blocks), then tries the chunks it kept, and only then
 * goes to the pool, parking the full chunk among the kept ones (the
 * oldest kept chunk goes back to the pool, where others' frees refill
 * it).  A thread that allocates and frees in batches of up to KEEP chunks
 * so never touches the pool nor an atomic.
 *
 * A block is free when its bit is set in any of the three bitmaps, so a
 * second free of the same block, or a handle that was never handed out,
 * is found and refused (a free racing with another free of the same block
 * in another thread may go unreported, but never hands a block out twice:
 * the bitmaps only record "free", whatever the number of frees).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define RELAXED memory_order_relaxed
#define TC_WAYS 4
#define KEEP 8

/* The chunks a thread owns for one mode and size class (index + 1). */
struct tc_class {
	uint32_t cur;
	uint32_t nkept;
	uint32_t kept[KEEP];     /* oldest first */
};

struct tc_ent {
	uint64_t zid;            /* 0: unused */
	struct tally_zone *z;
	uint32_t token;
	struct tc_class cls[TALLY__NMODES][TALLY__NCLASS];
};

struct tcache {
	struct tc_ent e[TC_WAYS];
	unsigned victim;
};

static __thread struct tcache *tls_tc __attribute__((tls_model("initial-exec")));
static pthread_key_t tc_key;
static pthread_once_t tc_key_once = PTHREAD_ONCE_INIT;

/* Give every chunk of the entry back to its zone's pool. */
static void tc_release(struct tc_ent *e)
{
	for (unsigned m = 0; m < TALLY__NMODES; m++) {
		for (unsigned c = 0; c < TALLY__NCLASS; c++) {
			struct tc_class *k = &e->cls[m][c];

			if (k->cur)
				tally__chunk_release(e->z, k->cur - 1);
			for (unsigned i = 0; i < k->nkept; i++)
				tally__chunk_release(e->z, k->kept[i] - 1);
		}
	}
	memset(e, 0, sizeof(*e));
}

static void tc_thread_exit(void *arg)
{
	struct tcache *tc = arg;

	for (unsigned i = 0; i < TC_WAYS; i++) {
		struct tc_ent *e = &tc->e[i];

		if (e->zid && tally__zone_alive(e->zid, e->z))
			tc_release(e);
	}
	tls_tc = NULL;
	free(tc);
}

/*
 * At exit(): give back the exiting thread's chunks, so that the free
 * blocks of a worker process that exits are not lost to the zone's other
 * users.  (The chunks of threads that are still running stay theirs.)
 */
void tally__tcache_exit(void)
{
	struct tcache *tc = tls_tc;

	if (!tc)
		return;
	for (unsigned i = 0; i < TC_WAYS; i++)
		if (tc->e[i].zid && tally__zone_alive_locked(tc->e[i].zid,
							     tc->e[i].z))
			tc_release(&tc->e[i]);
}

static void tc_key_init(void)
{
	pthread_key_create(&tc_key, tc_thread_exit);
}

/*
 * In the child after fork(): the chunks this thread owned belong to the
 * parent's thread, which goes on using them.  Forget them (and the token)
 * without releasing anything; the child takes chunks of its own.
 */
void tally__tcache_postfork_child(void)
{
	if (tls_tc)
		memset(tls_tc->e, 0, sizeof(tls_tc->e));
}

static struct tc_ent *tc_find(struct tally_zone *z)
{
	struct tcache *tc = tls_tc;

	if (!tc)
		return NULL;
	for (unsigned i = 0; i < TC_WAYS; i++)
		if (tc->e[i].zid == z->id && tc->e[i].z == z)
			return &tc->e[i];
	return NULL;
}

static uint32_t new_token(struct tally_zone *z)
{
	uint32_t token;

	do
		token = atomic_fetch_add(&z->hdr->next_token, 1) + 1;
	while (token == 0);
	return token;
}

static struct tc_ent *tc_get(struct tally_zone *z)
{
	struct tc_ent *e = tc_find(z);
	struct tcache *tc = tls_tc;

	if (e)
		return e;
	if (!tc) {
		tc = calloc(1, sizeof(*tc));
		if (!tc)
			return NULL;
		pthread_once(&tc_key_once, tc_key_init);
		pthread_setspecific(tc_key, tc);
		tls_tc = tc;
	}
	for (unsigned i = 0; i < TC_WAYS && !e; i++)
		if (!tc->e[i].zid)
			e = &tc->e[i];
	if (!e) {
		e = &tc->e[tc->victim++ % TC_WAYS];
		if (tally__zone_alive(e->zid, e->z))
			tc_release(e);
		memset(e, 0, sizeof(*e));
	}
	e->zid = z->id;
	e->z = z;
	e->token = new_token(z);
	return e;
}

static tally_block *make_handle(struct tally_zone *z, uint32_t chunk,
				unsigned slot, unsigned mode)
{
	char *p = tally__chunk_base(z, chunk) +
		  tally__page_off(TALLY__PG_COPY0) + (size_t)slot * 8;

	return (tally_block *)((uintptr_t)p | mode);
}

/* Take a block from the entry's current chunk; NULL when it is empty. */
static tally_block *take(struct tally_zone *z, uint32_t chunk, unsigned mode,
			 unsigned nslots)
{
	struct tally__chunk *c = &z->meta[chunk];
	unsigned words = (c->nblocks + 63u) / 64u;

	for (unsigned w = 0; w < words; w++) {
		uint64_t bits = atomic_load_explicit(&c->local[w], RELAXED);

		if (bits) {
			unsigned b = (unsigned)__builtin_ctzll(bits);

			atomic_store_explicit(&c->local[w], bits & (bits - 1),
					      RELAXED);
			if (c->bsize > TALLY__EXACT_MAX)
				__atomic_store_n(&c->slack[w * 64 + b],
						 (uint8_t)(c->bsize - nslots),
						 __ATOMIC_RELAXED);
			return make_handle(z, chunk, (w * 64 + b) * c->bsize,
					   mode);
		}
	}
	return NULL;
}

/* Has anybody freed blocks of chunk @i since it was last collected? */
static int has_frees(struct tally_zone *z, uint32_t i)
{
	struct tally__chunk *c = &z->meta[i];

	for (unsigned w = 0; w < 8; w++)
		if (atomic_load_explicit(&c->dirty[w], RELAXED) |
		    atomic_load_explicit(&c->remote[w], RELAXED))
			return 1;
	return 0;
}

/*
 * The current chunk of @k is empty.  Make a chunk with free blocks
 * current: the same one after collecting its frees, or a kept one; else
 * park it among the kept chunks (returning the oldest one to the pool)
 * and return 0, so that the caller takes a chunk from the pool.
 */
static int switch_chunk(struct tally_zone *z, struct tc_class *k)
{
	uint32_t cur = k->cur;

	if (has_frees(z, cur - 1) && tally__chunk_collect(z, cur - 1) > 0)
		return 1;
	for (unsigned i = k->nkept; i-- > 0;) {
		if (has_frees(z, k->kept[i] - 1) &&
		    tally__chunk_collect(z, k->kept[i] - 1) > 0) {
			k->cur = k->kept[i];
			k->kept[i] = cur;
			return 1;
		}
	}
	if (k->nkept == KEEP) {
		tally__chunk_release(z, k->kept[0] - 1);
		memmove(k->kept, k->kept + 1, (KEEP - 1) * sizeof(k->kept[0]));
		k->nkept--;
	}
	k->kept[k->nkept++] = cur;
	k->cur = 0;
	return 0;
}

tally_block *tally_block_alloc(struct tally_zone *z, unsigned nslots,
			       unsigned mode)
{
	struct tc_ent *e;
	unsigned cls;
	int retried = 0;

	if (nslots == 0 || nslots > TALLY_BLOCK_MAX_SLOTS) {
		tally__fail(EINVAL, "block of %u slots: expected 1 to %u",
			    nslots, TALLY_BLOCK_MAX_SLOTS);
		return NULL;
	}
	if (mode > TALLY_ADAPTIVE) {
		tally__fail(EINVAL, "unknown block mode %u", mode);
		return NULL;
	}
	if (!z && !(z = tally_zone_default()))
		return NULL;
	e = tc_get(z);
	if (!e) {
		tally__fail(ENOMEM, "out of memory for the thread cache");
		return NULL;
	}
	cls = tally__class_of(nslots);
	for (;;) {
		struct tc_class *k = &e->cls[mode][cls];
		tally_block *b;
		uint32_t idx;
		int rc;

		if (k->cur) {
			b = take(z, k->cur - 1, mode, nslots);
			if (b)
				return b;
			if (switch_chunk(z, k))
				continue;
		}
		rc = tally__chunk_acquire(z, mode, cls, e->token, &idx);
		if (rc == -ENOSPC && !retried) {
			/* This thread's other chunks may be all free: give
			 * them back (to be reused or punched), try again. */
			retried = 1;
			tc_release(e);
			e->zid = z->id;
			e->z = z;
			e->token = new_token(z);
			continue;
		}
		if (rc < 0)
			return NULL;
		k->cur = idx + 1;
	}
}

int tally__locate(struct tally_zone *z, const tally_block *b,
		  struct tally__loc *loc)
{
	uintptr_t h = (uintptr_t)b;
	const char *a = (const char *)(h & ~(uintptr_t)3);
	struct tally__chunk *c;
	uint64_t rel, in, chunk;
	unsigned slot, mode = (unsigned)(h & 3), cmode, bsize, nblocks, bi;

	if (!b)
		return tally__fail(EINVAL, "NULL block");
	if (!z)
		z = tally__zone_of(a);
	if (!z || a < z->chunks ||
	    a >= z->chunks + (size_t)z->nchunks * z->chunk_bytes)
		return tally__fail(EINVAL, "%p is not a block of %s", (void *)b,
				   z ? "this zone" : "any zone");
	rel = (size_t)(a - z->chunks);
	chunk = tally__chunk_of(z, rel, &in);
	if (tally__slot_at(in) < 0)
		return tally__fail(EINVAL, "%p is not a block handle",
				   (void *)b);
	slot = (unsigned)tally__slot_at(in);
	/* A chunk never handed out has no record to read (its page of the
	 * chunk table may be a hole). */
	if (chunk >= atomic_load(&z->hdr->chunks_bumped))
		return tally__fail(EINVAL, "%p is not an allocated block",
				   (void *)b);
	c = &z->meta[chunk];
	cmode = __atomic_load_n(&c->mode, __ATOMIC_ACQUIRE);
	bsize = __atomic_load_n(&c->bsize, __ATOMIC_RELAXED);
	nblocks = __atomic_load_n(&c->nblocks, __ATOMIC_RELAXED);
	bi = (slot * __atomic_load_n(&c->bdiv, __ATOMIC_RELAXED)) >> 20;
	if (cmode == TALLY__CHUNK_FREE || cmode != mode || bsize == 0 ||
	    bi * bsize != slot || bi >= nblocks)
		return tally__fail(EINVAL, "%p is not an allocated block",
				   (void *)b);
	loc->z = z;
	loc->chunk = (uint32_t)chunk;
	loc->slot0 = slot;
	loc->block = bi;
	loc->nslots = bsize;
	if (bsize > TALLY__EXACT_MAX)
		loc->nslots -= __atomic_load_n(&c->slack[bi], __ATOMIC_RELAXED);
	loc->mode = mode;
	loc->ch = c;
	return 0;
}

int tally_block_free(struct tally_zone *z, tally_block *b)
{
	struct tally__loc loc;
	struct tally__chunk *c;
	struct tc_ent *e;
	unsigned bi, w;
	uint64_t bit, old;
	int rc;

	if (!z && !(z = tally_zone_default()))
		return -errno;
	rc = tally__locate(z, b, &loc);
	if (rc < 0)
		return rc;
	c = loc.ch;
	bi = loc.block;
	w = bi / 64;
	bit = 1ull << (bi % 64);
	if ((atomic_load_explicit(&c->local[w], RELAXED) |
	     atomic_load_explicit(&c->dirty[w], RELAXED) |
	     atomic_load_explicit(&c->remote[w], RELAXED)) & bit)
		return tally__fail(EINVAL, "%p is already free (double free)",
				   (void *)b);
	e = tc_find(z);
	if (e && atomic_load_explicit(&c->owner, RELAXED) == e->token) {
		atomic_store_explicit(
			&c->dirty[w],
			atomic_load_explicit(&c->dirty[w], RELAXED) | bit,
			RELAXED);
		return 0;
	}
	old = atomic_fetch_or(&c->remote[w], bit);
	if (old & bit)
		return tally__fail(EINVAL, "%p is already free (double free)",
				   (void *)b);
	if (atomic_load(&c->owner) == 0)
		tally__chunk_remote_freed(z, loc.chunk, w);
	else
		tally__chunk_owner_check(z, loc.chunk, w);
	return 0;
}
