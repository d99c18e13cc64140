/*
 * alloc.c: allocating and freeing blocks.
 *
 * Each thread keeps, per zone it uses, an owner token and for every mode
 * and size class the chunk it currently allocates from plus up to KEEP
 * full chunks it still owns.  Allocation takes the first set bit of the
 * current chunk's "local" bitmap, which only the owner writes, at a
 * cursor the thread keeps: no lock, no atomic read-modify-write, no
 * system call, and nothing that depends on the number of CPUs.  A free by
 * the owner (into any chunk it owns) sets a bit in its "dirty" bitmap,
 * checked against the record of the chunk it freed into last, which the
 * thread remembers; a free by anybody else is an atomic or in the
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

#include "core/core.h"

#define RELAXED memory_order_relaxed
#define TC_WAYS 4
/* Full chunks a thread keeps per mode and size class: a batch of up to
 * 16 x 252 two-slot blocks (4,000 tc rules of 2 actions) cycles through
 * the thread's own chunks without the pool, where two threads would
 * meet (docs/RESULTS.md, "Linux tc"). */
#define KEEP 16

/*
 * The chunk a thread allocates from for one mode and size class, its
 * current chunk.  Allocation takes blocks from one word of that chunk's
 * local bitmap, the cursor: lw points to it and lw0 to its first block's
 * first slot in page 2 (where handles point), so that the common
 * allocation reads these 32 bytes and that word, nothing else.  Blocks go
 * out in order, a word after the other; only the owner sets bits of the
 * local bitmap (when it collects frees), and then the cursor starts again
 * at word 0.
 */
struct tc_class {
	_Atomic uint64_t *lw;    /* the cursor; NULL: take() looks for one */
	char *lw0;               /* the first slot of its word's block 0 */
	uint32_t bbytes;         /* bytes of a block: bsize * 8 */
	uint32_t cur;            /* the current chunk's index + 1, 0: none */
	uint16_t word;           /* the cursor's word, or where to look next */
	uint16_t words;          /* words of local in use; 0 without a chunk */
	uint32_t nkept;          /* full chunks kept (tc_ent.kept) */
};

/* The full chunks a thread keeps for one mode and size class, oldest
 * first. */
struct tc_kept {
	uint32_t idx[KEEP];      /* index + 1 */
};

/*
 * The chunk this thread last freed a block of, one it owns, with what
 * the free checked of its record.  While a thread owns a chunk nobody
 * else changes its mode, block size or owner, so the next frees of its
 * blocks (a pair loop, a batch: most frees) need not find the chunk nor
 * read its record again.  Forgotten when the chunk is released.
 */
struct tc_freed {
	uintptr_t handle0;       /* the handle of slot 0: page 2 | mode */
	struct tally__chunk *meta; /* NULL: none */
	uint32_t bdiv;
	uint16_t bsize, nblocks;
};

struct tc_ent {
	uint64_t zid;            /* 0: unused */
	struct tally_zone *z;
	uint32_t token;
	struct tc_freed fr;
	struct tc_class cls[TALLY__NMODES][TALLY__NCLASS];
	struct tc_kept kept[TALLY__NMODES][TALLY__NCLASS];
};

/* A thread's cache, on cache lines of its own (tc_new()): the words its
 * allocations and frees write share no line with another thread's. */
struct tcache {
	_Alignas(64) struct tc_ent *last; /* the entry found last, looked at
					     first */
	unsigned victim;
	_Alignas(64) struct tc_ent e[TC_WAYS];
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
				tally__chunk_release(e->z,
						     e->kept[m][c].idx[i] - 1);
		}
	}
	/* The token owns nothing any more. */
	tally__token_lock(e->z, e->token, 0);
	memset(e, 0, sizeof(*e));
}

/*
 * The thread exits: its chunks go back to the zones that still exist.
 * Another thread may destroy one of them meanwhile (the last handle of
 * a zone may go in any thread): the registry stays held from the check
 * to the last write, so that the zone is not unmapped in between.
 */
static void tc_thread_exit(void *arg)
{
	struct tcache *tc = arg;

	tally__zones_lock();
	for (unsigned i = 0; i < TC_WAYS; i++) {
		struct tc_ent *e = &tc->e[i];

		if (e->zid && tally__zone_alive_locked(e->zid, e->z))
			tc_release(e);
	}
	tally__zones_unlock();
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

static struct tc_ent *tc_search(struct tcache *tc, struct tally_zone *z)
{
	for (unsigned i = 0; i < TC_WAYS; i++)
		if (tc->e[i].zid == z->id && tc->e[i].z == z)
			return tc->last = &tc->e[i];
	return NULL;
}

/* This thread's entry for @z, or NULL. */
static inline struct tc_ent *tc_find(struct tally_zone *z)
{
	struct tcache *tc = tls_tc;

	if (!tc)
		return NULL;
	if (tc->last->zid == z->id && tc->last->z == z)
		return tc->last;
	return tc_search(tc, z);
}

uint32_t tally__tcache_token(struct tally_zone *z)
{
	struct tc_ent *e = tc_find(z);

	return e ? e->token : 0;
}

/*
 * A token no other thread of the zone has, in @e, and its lock, which
 * tells every process of the zone, in any PID namespace, that this one
 * runs (pool.c).  0, or -errno with a message when the lock cannot be
 * taken (EMFILE, ENOLCK ...): @e then stays without a zone, and the
 * allocation fails, for a token without its lock must own no chunk.
 */
static int new_token(struct tally_zone *z, struct tc_ent *e)
{
	uint32_t token;
	int rc;

	do
		token = atomic_fetch_add(&z->hdr->next_token, 1) + 1;
	while (token == 0);
	rc = tally__token_lock(z, token, 1);
	if (rc < 0)
		return tally__fail(-rc, "cannot take the lock that marks "
				   "this thread's chunks of the zone as its "
				   "own: %s", strerror(-rc));
	e->zid = z->id;
	e->z = z;
	e->token = token;
	return 0;
}

/* This thread's entry for @z, made when missing; NULL with a message. */
static struct tc_ent *tc_get(struct tally_zone *z)
{
	struct tc_ent *e = tc_find(z);
	struct tcache *tc = tls_tc;

	if (e)
		return e;
	if (!tc) {
		if (posix_memalign((void **)&tc, 64, sizeof(*tc))) {
			tally__fail(ENOMEM, "out of memory for the thread "
				    "cache");
			return NULL;
		}
		memset(tc, 0, sizeof(*tc));
		pthread_once(&tc_key_once, tc_key_init);
		pthread_setspecific(tc_key, tc);
		tls_tc = tc;
	}
	for (unsigned i = 0; i < TC_WAYS && !e; i++)
		if (!tc->e[i].zid)
			e = &tc->e[i];
	if (!e) {
		e = &tc->e[tc->victim++ % TC_WAYS];
		/* Held for the reason tc_thread_exit() says; an empty way
		 * (a thread's first zones) takes no lock. */
		if (e->zid) {
			tally__zones_lock();
			if (tally__zone_alive_locked(e->zid, e->z))
				tc_release(e);
			tally__zones_unlock();
		}
		memset(e, 0, sizeof(*e));
	}
	tc->last = e;
	if (new_token(z, e) < 0)
		return NULL;
	return e;
}

/* Make chunk @cur (index + 1; 0: none) the current chunk of @k. */
static void set_current(struct tally_zone *z, struct tc_class *k, uint32_t cur)
{
	struct tally__chunk *c = cur ? &z->meta[cur - 1] : NULL;

	k->cur = cur;
	k->bbytes = c ? c->bsize * 8u : 0;
	k->words = c ? (uint16_t)((c->nblocks + 63u) / 64u) : 0;
	k->word = 0;
	k->lw = NULL;
}

/* Hand out the first block of @bits, the cursor's word (not 0); an empty
 * word moves the cursor to the next one. */
static inline tally_block *hand_out(struct tc_class *k, uint64_t bits,
				    unsigned mode)
{
	_Atomic uint64_t *lw = k->lw;
	unsigned bbytes = k->bbytes;
	char *slot0 = k->lw0 + (size_t)__builtin_ctzll(bits) * bbytes;
	uint64_t rest = bits & (bits - 1);

	atomic_store_explicit(lw, rest, RELAXED);
	if (!rest) {
		k->word++;
		k->lw = k->word < k->words ? lw + 1 : NULL;
		k->lw0 += (size_t)64 * bbytes;
	}
	return (tally_block *)((uintptr_t)slot0 | mode);
}

/*
 * Take a block from the current chunk of @k, looking from word k->word
 * of its local bitmap on (and set the cursor there); NULL when it has
 * none.  A block of more than TALLY__EXACT_MAX slots (at most 25 in a
 * chunk) notes how many of its size class's slots it leaves unused, and
 * leaves no cursor behind: the common allocation has nothing to note.
 */
static tally_block *take(struct tally_zone *z, struct tc_class *k,
			 unsigned mode, unsigned nslots)
{
	struct tally__chunk *c = &z->meta[k->cur - 1];

	for (; k->word < k->words; k->word++) {
		uint64_t bits = atomic_load_explicit(&c->local[k->word],
						     RELAXED);
		unsigned b;
		tally_block *h;

		if (!bits)
			continue;
		b = k->word * 64u + (unsigned)__builtin_ctzll(bits);
		k->lw = &c->local[k->word];
		k->lw0 = tally__chunk_base(z, k->cur - 1) +
			 tally__page_off(TALLY__PG_COPY0) +
			 (size_t)k->word * 64 * k->bbytes;
		h = hand_out(k, bits, mode);
		if (k->bbytes > TALLY__EXACT_MAX * 8u) {
			__atomic_store_n(&c->slack[b],
					 (uint8_t)(k->bbytes / 8u - nslots),
					 __ATOMIC_RELAXED);
			k->lw = NULL;
		}
		return h;
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
static int switch_chunk(struct tally_zone *z, struct tc_ent *e,
			struct tc_class *k, struct tc_kept *kp)
{
	uint32_t cur = k->cur;

	if (has_frees(z, cur - 1) && tally__chunk_collect(z, cur - 1) > 0) {
		set_current(z, k, cur);
		return 1;
	}
	for (unsigned i = k->nkept; i-- > 0;) {
		if (has_frees(z, kp->idx[i] - 1) &&
		    tally__chunk_collect(z, kp->idx[i] - 1) > 0) {
			set_current(z, k, kp->idx[i]);
			kp->idx[i] = cur;
			return 1;
		}
	}
	if (k->nkept == KEEP) {
		if (e->fr.meta == &z->meta[kp->idx[0] - 1])
			memset(&e->fr, 0, sizeof(e->fr));
		tally__chunk_release(z, kp->idx[0] - 1);
		memmove(kp->idx, kp->idx + 1, (KEEP - 1) * sizeof(kp->idx[0]));
		k->nkept--;
	}
	kp->idx[k->nkept++] = cur;
	set_current(z, k, 0);
	return 0;
}

/* Everything but a block taken from the current chunk of the zone this
 * thread used last: checks, messages, chunk switches and the pool. */
static __attribute__((noinline)) tally_block *
alloc_slow(struct tally_zone *z, unsigned nslots, unsigned mode)
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
	if (!e)
		return NULL;
	cls = tally__class_of(nslots);
	for (;;) {
		struct tc_class *k = &e->cls[mode][cls];
		tally_block *b;
		uint32_t idx;
		int rc;

		if (k->cur) {
			b = take(z, k, mode, nslots);
			if (b)
				return b;
			if (switch_chunk(z, e, k, &e->kept[mode][cls]))
				continue;
		}
		rc = tally__chunk_acquire(z, mode, cls, e->token, &idx);
		if (rc == -ENOSPC && !retried) {
			/* This thread's other chunks may be all free: give
			 * them back (to be reused or punched), try again. */
			retried = 1;
			tc_release(e);
			if (new_token(z, e) < 0)
				return NULL;
			continue;
		}
		if (rc < 0)
			return NULL;
		set_current(z, k, idx + 1);
	}
}

/*
 * The common allocation: a block at the cursor of this thread's current
 * chunk for the mode and size class, in the zone it used last.  A load
 * and a store of a word only this thread writes: no lock, no atomic
 * read-modify-write, nothing shared with other threads.  Everything else (an empty word, another
 * zone, errors) is alloc_slow()'s.
 */
tally_block *tally_block_alloc(struct tally_zone *z, unsigned nslots,
			       unsigned mode)
{
	struct tcache *tc = tls_tc;

	tally__ok();
	if (__builtin_expect(z && tc && nslots - 1u < TALLY_BLOCK_MAX_SLOTS &&
				     mode <= TALLY_ADAPTIVE,
			     1)) {
		struct tc_ent *e = tc->last;

		if (e->zid == z->id && e->z == z) {
			struct tc_class *k =
				&e->cls[mode][tally__class_of(nslots)];
			uint64_t bits;

			if (k->lw && (bits = atomic_load_explicit(k->lw,
								  RELAXED)))
				return hand_out(k, bits, mode);
		}
	}
	return alloc_slow(z, nslots, mode);
}

/* What find_block() found wrong with a handle. */
enum { BLOCK_OK, BLOCK_FOREIGN, BLOCK_NOT_HANDLE, BLOCK_NOT_ALLOCATED };

/*
 * Where handle @h of zone @z lies: its chunk, first slot, block and mode
 * (loc->nslots is the size class's), after the checks that make the
 * chunk's record safe to read (the chunk was handed out once, so its
 * page of the chunk table exists).  Returns BLOCK_OK or what is wrong.
 */
static inline int find_block(struct tally_zone *z, uintptr_t h,
			     struct tally__loc *loc)
{
	uintptr_t a = h & ~(uintptr_t)3;
	uint64_t rel = (uint64_t)(a - (uintptr_t)z->chunks), in, chunk;
	unsigned mode = (unsigned)(h & 3), cmode, bsize, nblocks, bi, slot;
	struct tally__chunk *c;
	int s;

	if (rel >= z->chunks_size) /* below the chunks too: rel wrapped */
		return BLOCK_FOREIGN;
	chunk = tally__chunk_of(z, rel, &in);
	if ((s = tally__slot_at(in)) < 0)
		return BLOCK_NOT_HANDLE;
	slot = (unsigned)s;
	if (chunk >= atomic_load_explicit(&z->hdr->chunks_bumped,
					  memory_order_acquire))
		return BLOCK_NOT_ALLOCATED;
	c = &z->meta[chunk];
	cmode = __atomic_load_n(&c->mode, __ATOMIC_ACQUIRE);
	bsize = __atomic_load_n(&c->bsize, __ATOMIC_RELAXED);
	nblocks = __atomic_load_n(&c->nblocks, __ATOMIC_RELAXED);
	bi = (slot * __atomic_load_n(&c->bdiv, __ATOMIC_RELAXED)) >> 20;
	/* A free chunk's mode is TALLY__CHUNK_FREE, never a handle's. */
	if (cmode != mode || bsize == 0 || bi * bsize != slot ||
	    bi >= nblocks)
		return BLOCK_NOT_ALLOCATED;
	loc->z = z;
	loc->chunk = (uint32_t)chunk;
	loc->slot0 = slot;
	loc->block = bi;
	loc->nslots = bsize;
	loc->mode = mode;
	loc->ch = c;
	return BLOCK_OK;
}

static __attribute__((noinline, cold)) int bad_block(int why,
						     const tally_block *b)
{
	switch (why) {
	case BLOCK_FOREIGN:
		return tally__fail(EINVAL, "%p is not a block of this zone",
				   (const void *)b);
	case BLOCK_NOT_HANDLE:
		return tally__fail(EINVAL, "%p is not a block handle",
				   (const void *)b);
	default:
		return tally__fail(EINVAL, "%p is not an allocated block",
				   (const void *)b);
	}
}

int tally__locate(struct tally_zone *z, const tally_block *b,
		  struct tally__loc *loc)
{
	int why;

	if (!b)
		return tally__fail(EINVAL, "NULL block");
	if (!z && !(z = tally__zone_of((const void *)((uintptr_t)b &
						      ~(uintptr_t)3))))
		return tally__fail(EINVAL, "%p is not a block of any zone",
				   (const void *)b);
	why = find_block(z, (uintptr_t)b, loc);
	if (why != BLOCK_OK)
		return bad_block(why, b);
	if (loc->nslots > TALLY__EXACT_MAX)
		loc->nslots -= __atomic_load_n(&loc->ch->slack[loc->block],
					       __ATOMIC_RELAXED);
	return 0;
}

/*
 * A free by another thread than the chunk's owner: an atomic or in the
 * remote bitmap, and a look at whether the chunk needs the pool's care.
 */
static int free_remote(struct tally_zone *z, const struct tally__loc *loc,
		       tally_block *b)
{
	unsigned w = loc->block / 64;
	uint64_t bit = 1ull << (loc->block % 64);

	if (atomic_fetch_or(&loc->ch->remote[w], bit) & bit)
		return tally__fail(EINVAL, "%p is already free (double free)",
				   (void *)b);
	if (atomic_load(&loc->ch->owner) == 0)
		tally__chunk_remote_freed(z, loc->chunk, w);
	else
		tally__chunk_owner_check(z, loc->chunk, w);
	return 0;
}

/*
 * A free of a block of a chunk this thread owns: its bit in the dirty
 * bitmap, set with a plain load and store (only the owner writes it),
 * unless a bitmap says the block is free already.
 */
static inline int free_owned(struct tally__chunk *c, unsigned bi,
			     tally_block *b)
{
	unsigned w = bi / 64;
	uint64_t bit = 1ull << (bi % 64);

	uint64_t dirty = atomic_load_explicit(&c->dirty[w], RELAXED);

	if ((atomic_load_explicit(&c->local[w], RELAXED) | dirty |
	     atomic_load_explicit(&c->remote[w], RELAXED)) & bit)
		return tally__fail(EINVAL, "%p is already free (double free)",
				   (void *)b);
	atomic_store_explicit(&c->dirty[w], dirty | bit, RELAXED);
	return 0;
}

/* Every free but those tally_block_free() recognises at once: the handle
 * checked in full, then a free by the owner (which remembers the chunk
 * for the next frees) or by another thread. */
static __attribute__((noinline)) int free_slow(struct tally_zone *z,
					       tally_block *b)
{
	struct tally__loc loc;
	struct tally__chunk *c;
	struct tc_ent *e;
	unsigned w;
	uint64_t bit;
	int why;

	if (!z && !(z = tally_zone_default()))
		return -errno;
	if (!b)
		return tally__fail(EINVAL, "NULL block");
	why = find_block(z, (uintptr_t)b, &loc);
	if (why != BLOCK_OK)
		return bad_block(why, b);
	c = loc.ch;
	w = loc.block / 64;
	bit = 1ull << (loc.block % 64);
	if ((atomic_load_explicit(&c->local[w], RELAXED) |
	     atomic_load_explicit(&c->dirty[w], RELAXED) |
	     atomic_load_explicit(&c->remote[w], RELAXED)) & bit)
		return tally__fail(EINVAL, "%p is already free (double free)",
				   (void *)b);
	e = tc_find(z);
	if (!e || atomic_load_explicit(&c->owner, RELAXED) != e->token)
		return free_remote(z, &loc, b);
	e->fr = (struct tc_freed){
		.handle0 = (uintptr_t)(tally__chunk_base(z, loc.chunk) +
				       tally__page_off(TALLY__PG_COPY0)) |
			   loc.mode,
		.meta = loc.ch,
		.bdiv = __atomic_load_n(&loc.ch->bdiv, __ATOMIC_RELAXED),
		.bsize = (uint16_t)loc.nslots,
		.nblocks = __atomic_load_n(&loc.ch->nblocks, __ATOMIC_RELAXED),
	};
	return free_owned(loc.ch, loc.block, b);
}

/*
 * The common free: a block of the chunk this thread freed into last, in
 * the zone it used last, which it still owns.  The handle is checked as
 * find_block() would (a slot of page 2 that starts a block of the chunk,
 * in the chunk's mode), against the record remembered in the thread.
 */
int tally_block_free(struct tally_zone *z, tally_block *b)
{
	struct tc_ent *e;

	tally__ok();
	if (z && (e = tc_find(z))) {
		/* A handle of that chunk in its mode is handle0 + 8 * slot:
		 * any other address or mode leaves a remainder, or lies
		 * beyond the slots (below them, it wraps). */
		uint64_t off = (uintptr_t)b - e->fr.handle0;
		unsigned slot = (unsigned)(off / 8);
		unsigned bi = (slot * e->fr.bdiv) >> 20;

		if (off < TALLY__RESV_OFF && off % 8 == 0 && e->fr.meta &&
		    bi * e->fr.bsize == slot && bi < e->fr.nblocks)
			return free_owned(e->fr.meta, bi, b);
	}
	return free_slow(z, b);
}
