/*
 * pool.c: the zone's pool of chunks, shared by every thread and process
 * that uses the zone.
 *
 * Threads allocate from chunks they own without any lock (alloc.c); the
 * pool lock, a robust process-shared mutex in the header, is taken only
 * to change a chunk's owner or list membership: once per chunk's worth of
 * allocations, never on the update path.
 *
 * A chunk is in one of these states:
 *   free      on the empty list (or never handed out): no pages, no owner;
 *   owned     a thread allocates from it;
 *   unowned   released by its owner with blocks still allocated; on its
 *             size class's partial list while it has free blocks;
 *   warm      unowned with every block free, kept on the partial list.
 * When an unowned chunk's last block is freed, it stays on its partial
 * list as a "warm" chunk if the zone has fewer than WARM_MAX of them (so
 * that a thread allocating and freeing in batches does not punch and
 * fault the same pages over and over); otherwise its pages are punched
 * out of the file (the memory goes back to the system) and it becomes
 * free.  A free chunk handed out gets its fixed pages reserved first
 * (space.c); without room, a warm chunk is punched, then the chunks of
 * dead owners are taken back, before ENOSPC.
 *
 * Dead owners: a process killed (SIGKILL, or a signal it does not handle)
 * leaves the chunks of its threads owned, with their free and cached
 * blocks, and nobody else allocates from an owned chunk.  So each process
 * using a zone, at its first chunk (a recycled worker of a pre-fork
 * server, attached or forked, at its first registration), takes back the
 * chunks of every owner whose process is gone: each is released as its
 * owner would have released it, so its free blocks are reused and a chunk
 * with no live block is kept warm or punched.  The blocks the dead process
 * still held (the series it registered, which live on) are not touched:
 * only their chunk changes hands.  An owner is gone when its pid is free
 * or names a process started at another time (process.c), and nobody
 * holds the lock of its token (TALLY__OWNER_LOCK_BYTE + token, taken by
 * alloc.c with each token): a process of another PID namespace attached
 * to the same zone has a pid that means nothing here, but its locks are
 * seen from every namespace.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>

#include "core/core.h"

#define RELAXED __ATOMIC_RELAXED
#define WARM_MAX 4

int tally__pool_lock(struct tally_zone *z)
{
	int rc = tally__robust_lock(&z->hdr->pool_lock, "pool",
				    z->path[0] ? z->path : z->hdr->zone_name);

	if (rc < 0)
		return rc;
	if (rc) {
		tally__pool_repair(z);
		pthread_mutex_consistent(&z->hdr->pool_lock);
	}
	return 0;
}

void tally__pool_unlock(struct tally_zone *z)
{
	pthread_mutex_unlock(&z->hdr->pool_lock);
}

static struct tally__chunk *meta(struct tally_zone *z, uint32_t i)
{
	return &z->meta[i];
}

static uint64_t chunk_file_off(struct tally_zone *z, uint32_t i)
{
	return z->hdr->chunks_off + (uint64_t)i * z->chunk_bytes;
}

static void list_push(struct tally_zone *z, uint32_t *head, uint32_t i)
{
	struct tally__chunk *c = meta(z, i);

	c->prev = 0;
	c->next = *head;
	if (*head)
		meta(z, *head - 1)->prev = i + 1;
	*head = i + 1;
}

static void list_remove(struct tally_zone *z, uint32_t *head, uint32_t i)
{
	struct tally__chunk *c = meta(z, i);

	if (c->prev)
		meta(z, c->prev - 1)->next = c->next;
	else
		*head = c->next;
	if (c->next)
		meta(z, c->next - 1)->prev = c->prev;
	c->next = c->prev = 0;
}

static unsigned count_free(struct tally__chunk *c)
{
	unsigned n = 0;

	for (int w = 0; w < 8; w++)
		n += (unsigned)__builtin_popcountll(
			atomic_load_explicit(&c->local[w], memory_order_relaxed) |
			atomic_load_explicit(&c->dirty[w], memory_order_relaxed) |
			atomic_load(&c->remote[w]));
	return n;
}

static void clear_bitmaps(struct tally__chunk *c)
{
	for (int w = 0; w < 8; w++) {
		atomic_store_explicit(&c->local[w], 0, memory_order_relaxed);
		atomic_store_explicit(&c->dirty[w], 0, memory_order_relaxed);
		atomic_store(&c->remote[w], 0);
	}
}

/* Under the pool lock: punch a chunk out and put it on the empty list.
 * Returns 0 (and changes nothing) when the file system cannot punch. */
static int reap(struct tally_zone *z, uint32_t i)
{
	struct tally__chunk *c = meta(z, i);

	/* Every block is free: give the pages back.  Holes read as zeros,
	 * so the chunk comes back clean.  A file system that cannot punch
	 * holes keeps the chunk as it is, its blocks still to be zeroed. */
	if (fallocate(z->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)chunk_file_off(z, i), (off_t)z->chunk_bytes) < 0)
		return 0;
	if (c->listed)
		list_remove(z, &z->hdr->partial_head[c->mode][c->cls], i);
	if (c->warm) {
		c->warm = 0;
		atomic_fetch_sub(&z->hdr->chunks_warm, 1);
	} else {
		atomic_fetch_sub(&z->hdr->chunks_inuse, 1);
	}
	clear_bitmaps(c);
	__atomic_store_n(&c->listed, 0, RELAXED);
	__atomic_store_n(&c->mode, TALLY__CHUNK_FREE, RELAXED);
	list_push(z, &z->hdr->empty_head, i);
	return 1;
}

/* Under the pool lock: file an unowned chunk where it belongs. */
static void settle(struct tally_zone *z, uint32_t i)
{
	struct tally__chunk *c = meta(z, i);
	uint32_t *head;
	unsigned nfree;

	if (atomic_load(&c->owner) != 0 || c->mode == TALLY__CHUNK_FREE ||
	    c->warm)
		return;
	head = &z->hdr->partial_head[c->mode][c->cls];
	nfree = count_free(c);
	if (nfree == c->nblocks &&
	    atomic_load(&z->hdr->chunks_warm) >= WARM_MAX && reap(z, i))
		return;
	if (nfree == c->nblocks) {
		c->warm = 1;
		atomic_fetch_add(&z->hdr->chunks_warm, 1);
		atomic_fetch_sub(&z->hdr->chunks_inuse, 1);
	}
	if (nfree > 0 && !c->listed) {
		list_push(z, head, i);
		__atomic_store_n(&c->listed, 1, RELAXED);
	}
}

/* Under the pool lock, with no chunk left: punch a warm chunk for reuse. */
static int reap_a_warm_chunk(struct tally_zone *z)
{
	for (unsigned m = 0; m < TALLY__NMODES; m++)
		for (unsigned k = 0; k < TALLY__NCLASS; k++)
			for (uint32_t j = z->hdr->partial_head[m][k]; j;
			     j = meta(z, j - 1)->next)
				if (meta(z, j - 1)->warm && reap(z, j - 1))
					return 1;
	return 0;
}

/*
 * Reserve the pages of chunk @i that its blocks in @mode write without
 * asking (core/space.c): page 0 (baselines, spills and the reservation
 * line) for per-CPU and adaptive chunks, page 1 (the shared words) for
 * adaptive ones, the atomic copies of shared and per-node chunks.  The
 * per-CPU copies are reserved by the adds themselves.
 */
static int reserve_fixed_pages(struct tally_zone *z, uint32_t i,
			       unsigned mode)
{
	uint64_t off = chunk_file_off(z, i);
	char what[96];

	snprintf(what, sizeof(what), "a new chunk of zone \"%s\"",
		 z->hdr->zone_name);
	switch (mode) {
	case TALLY_PERCPU:
		return tally__reserve(z, off, TALLY__PAGE, what);
	case TALLY_ADAPTIVE:
		return tally__reserve(z, off, 2 * TALLY__PAGE, what);
	case TALLY_SHARED:
		return tally__reserve(z, off + tally__page_off(TALLY__PG_COPY0),
				      TALLY__PAGE, what);
	default:
		return tally__reserve(z, off + tally__page_off(TALLY__PG_COPY0),
				      (uint64_t)z->hdr->nnodes * TALLY__PAGE,
				      what);
	}
}

/* Under the pool lock: a chunk that has never been handed out; its entry
 * in the chunk table is reserved first (a new page of it, sometimes). */
static int bump(struct tally_zone *z, uint32_t *idx)
{
	struct tally__hdr *h = z->hdr;
	uint64_t n = atomic_load(&h->chunks_bumped);
	int rc;

	if (n >= z->nchunks) {
		atomic_fetch_add_explicit(&h->alloc_refused, 1,
					  memory_order_relaxed);
		return tally__fail(ENOSPC, "zone \"%s\" is full (%u chunks of "
				   "%u slots); %s", h->zone_name, z->nchunks,
				   TALLY_CHUNK_SLOTS, z->is_default ?
				   "raise TALLY_ZONE_SLOTS, the capacity of "
				   "the default zone" : "create it with a "
				   "larger capacity");
	}
	rc = tally__reserve_at(z, meta(z, (uint32_t)n),
			       sizeof(struct tally__chunk), "the chunk table");
	if (rc < 0)
		return rc;
	*idx = (uint32_t)atomic_fetch_add(&h->chunks_bumped, 1);
	return 0;
}

/* Under the pool lock: a free chunk (from the empty list or never used)
 * with its fixed pages reserved for @mode. */
static int take_free_chunk(struct tally_zone *z, unsigned mode, uint32_t *idx)
{
	struct tally__hdr *h = z->hdr;
	uint32_t i = 0;
	int rc;

	if (h->empty_head) {
		i = h->empty_head - 1;
		list_remove(z, &h->empty_head, i);
	} else if ((rc = bump(z, &i)) < 0) {
		return rc;
	}
	rc = reserve_fixed_pages(z, i, mode);
	if (rc < 0) {
		list_push(z, &h->empty_head, i);
		return rc;
	}
	*idx = i;
	return 0;
}

static void set_owner(struct tally__chunk *c, uint32_t token)
{
	struct tally__self me;

	tally__self_get(&me);
	/* Read without the pool lock by owner_dead(): atomic stores. */
	__atomic_store_n(&c->owner_pid, (int32_t)me.pid, RELAXED);
	__atomic_store_n(&c->owner_start, me.start, RELAXED);
	atomic_store(&c->owner, token);
}

/*
 * Lock or unlock the byte of @token.  A token whose lock cannot be taken
 * must own no chunk: its owner would be judged by its pid alone, which
 * means nothing to a sweeper of another PID namespace, and that sweeper
 * would take back chunks in use (a block given to two series).  So a
 * failure to lock is returned, and alloc.c fails the allocation.
 */
int tally__token_lock(struct tally_zone *z, uint32_t token, int lock)
{
	int fd = lock ? tally__own_fd(z) :
			atomic_load_explicit(&z->fbfd, memory_order_acquire);

	if (!token || (fd < 0 && !lock))
		return 0;
	if (fd < 0)
		return -(errno ? errno : EBADF);
	if (tally__lock_byte(fd, lock ? F_WRLCK : F_UNLCK,
			     TALLY__OWNER_LOCK_BYTE + token, 0) < 0 && lock)
		return -errno;
	return 0;
}

/*
 * Is the process that owns @c (with token @owner) gone?
 *
 * In a zone with a writers' lock file (2.6), only the lock of its token
 * tells: nobody but the writers' user can open that file, so no reader
 * can hold it, and a new process that got the owner's pid (every
 * incarnation of a container's service is pid 1) does not hold it.  This
 * process's own tokens are locked through its own description, which
 * the test through the lock file's common description sees.
 *
 * In an older zone, the token's lock lies in the zone file, which
 * readers may lock too: there the pid must also be free, or belong to a
 * process started at another time.  @alive_pid: the pid's verdict, when
 * known (-1: ask).
 */
static int owner_dead(struct tally_zone *z, struct tally__chunk *c,
		      uint32_t owner, int alive_pid)
{
	int32_t pid = __atomic_load_n(&c->owner_pid, RELAXED);
	uint64_t start = __atomic_load_n(&c->owner_start, RELAXED);
	struct tally__self me;

	/* The calling thread's own chunk (a free of its own block, the
	 * common case) is alive without asking the kernel. */
	if (owner == tally__tcache_token(z))
		return 0;
	if (z->lkfd >= 0)
		return !tally__token_locked(z->lkfd, owner);
	tally__self_get(&me);
	if (pid <= 0 || (pid == me.pid && start == me.start))
		return 0;
	if (alive_pid < 0)
		alive_pid = tally__proc_alive(pid, start);
	return !alive_pid && !tally__token_locked(z->fd, owner);
}

/* Under the pool lock: the chunk has no owner any more; the owner's
 * frees (dirty) become frees like anybody else's (remote). */
static void disown(struct tally__chunk *c)
{
	atomic_store(&c->owner, 0);
	for (int w = 0; w < 8; w++) {
		uint64_t d = atomic_load_explicit(&c->dirty[w],
						  memory_order_relaxed);

		if (d) {
			atomic_fetch_or(&c->remote[w], d);
			atomic_store_explicit(&c->dirty[w], 0,
					      memory_order_relaxed);
		}
	}
}

/*
 * Under the pool lock, when the zone has no chunk left: take back every
 * chunk whose owner's process is gone, wherever its blocks are (a worker
 * recycled with _exit() or killed leaves its chunks owned).  Returns how
 * many were taken back.
 */
static unsigned take_back_dead(struct tally_zone *z)
{
	uint64_t n = atomic_load(&z->hdr->chunks_bumped);
	unsigned found = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct tally__chunk *c = meta(z, i);
		uint32_t owner = atomic_load(&c->owner);

		if (owner && owner_dead(z, c, owner, -1)) {
			disown(c);
			settle(z, i);
			found++;
		}
	}
	return found;
}

/* What one sweep found of the owners it asked about: a process's chunks
 * are many (a chunk per mode and size class it used, and those it kept),
 * its liveness is asked once. */
struct verdicts {
	int32_t pid[32];
	uint64_t start[32];
	uint8_t dead[32];
	unsigned n;
};

static int verdict_dead(struct verdicts *v, int32_t pid, uint64_t start)
{
	unsigned i;
	int dead;

	for (i = 0; i < v->n && i < 32; i++)
		if (v->pid[i] == pid && v->start[i] == start)
			return v->dead[i];
	dead = !tally__proc_alive(pid, start);
	i = v->n++ % 32;
	v->pid[i] = pid;
	v->start[i] = start;
	v->dead[i] = (uint8_t)dead;
	return dead;
}

/*
 * Take back the chunks of every owner whose process is gone (see the top
 * of this file).  The chunk table is read without the pool lock, the
 * liveness of owners asked outside it; a chunk is taken back under the
 * lock only if its owner is still the one found dead (a token is never
 * given twice in a zone's life, until it wraps).  Returns how many.
 */
static unsigned sweep_dead(struct tally_zone *z)
{
	uint64_t n = atomic_load(&z->hdr->chunks_bumped);
	struct verdicts v;
	unsigned found = 0;

	v.n = 0;
	if (n > z->nchunks)
		n = z->nchunks;
	for (uint32_t i = 0; i < n; i++) {
		struct tally__chunk *c = meta(z, i);
		uint32_t owner = atomic_load(&c->owner);
		int32_t pid;
		uint64_t start;

		if (!owner)
			continue;
		pid = __atomic_load_n(&c->owner_pid, RELAXED);
		start = __atomic_load_n(&c->owner_start, RELAXED);
		if (z->lkfd >= 0 ? !owner_dead(z, c, owner, 0) :
		    (pid <= 0 || !verdict_dead(&v, pid, start) ||
		     !owner_dead(z, c, owner, 0)))
			continue;
		if (tally__pool_lock(z) < 0)
			break;
		if (atomic_load(&c->owner) == owner &&
		    __atomic_load_n(&c->owner_pid, RELAXED) == pid &&
		    __atomic_load_n(&c->owner_start, RELAXED) == start) {
			disown(c);
			settle(z, i);
			found++;
		}
		tally__pool_unlock(z);
	}
	return found;
}

/*
 * Under the pool lock, after a process died holding it: rebuild the lists
 * and counts from the chunk table.  A chunk the dead process was taking
 * from the empty list or handing out is either still marked free (its
 * mode is set last) or complete.
 */
void tally__pool_repair(struct tally_zone *z)
{
	struct tally__hdr *h = z->hdr;
	uint64_t n = atomic_load(&h->chunks_bumped), inuse = 0, warm = 0;

	if (n > z->nchunks)
		n = z->nchunks;
	atomic_store(&h->chunks_bumped, n);
	h->empty_head = 0;
	memset(h->partial_head, 0, sizeof(h->partial_head));
	for (uint32_t i = (uint32_t)n; i-- > 0;) {
		struct tally__chunk *c = meta(z, i);

		c->next = c->prev = 0;
		__atomic_store_n(&c->listed, 0, RELAXED);
		if (c->mode == TALLY__CHUNK_FREE || c->mode >= TALLY__NMODES ||
		    c->cls >= TALLY__NCLASS || c->bsize == 0) {
			/* Never handed out completely: free, and punched
			 * again so that it surely comes back zeroed. */
			fallocate(z->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  (off_t)chunk_file_off(z, i),
				  (off_t)z->chunk_bytes);
			clear_bitmaps(c);
			__atomic_store_n(&c->mode, TALLY__CHUNK_FREE, RELAXED);
			c->warm = 0;
			atomic_store(&c->owner, 0);
			list_push(z, &h->empty_head, i);
			continue;
		}
		if (c->warm)
			warm++;
		else
			inuse++;
		if (atomic_load(&c->owner) == 0 && count_free(c) > 0) {
			list_push(z, &h->partial_head[c->mode][c->cls], i);
			__atomic_store_n(&c->listed, 1, RELAXED);
		}
	}
	atomic_store(&h->chunks_inuse, inuse);
	atomic_store(&h->chunks_warm, warm);
}

/* Under the pool lock: chunk @i, free, becomes a chunk of blocks of
 * size class @cls in @mode, owned by @token, every block free. */
static void init_chunk(struct tally_zone *z, uint32_t i, unsigned mode,
		       unsigned cls, uint32_t token)
{
	struct tally__chunk *c = meta(z, i);
	unsigned bsize = tally__class_size[cls];
	unsigned nblocks = TALLY_CHUNK_SLOTS / bsize;

	c->bsize = (uint16_t)bsize;
	c->bdiv = ((1u << 20) + bsize - 1) / bsize;
	c->nblocks = (uint16_t)nblocks;
	c->cls = (uint8_t)cls;
	__atomic_store_n(&c->listed, 0, RELAXED);
	for (unsigned w = 0; w < 8; w++) {
		uint64_t bits = 0;

		if (w * 64 < nblocks)
			bits = nblocks - w * 64 >= 64 ?
				       ~0ull : (1ull << (nblocks - w * 64)) - 1;
		atomic_store_explicit(&c->local[w], bits, memory_order_relaxed);
		atomic_store_explicit(&c->dirty[w], 0, memory_order_relaxed);
		atomic_store(&c->remote[w], 0);
	}
	/* The mode last: until then a crash leaves the chunk free. */
	__atomic_store_n(&c->mode, (uint8_t)mode, RELAXED);
	set_owner(c, token);
	atomic_fetch_add(&z->hdr->chunks_inuse, 1);
}

/* Under the pool lock: take a partial (or warm) chunk of the class off
 * its list and make it @token's; 0 when there is none. */
static int take_partial(struct tally_zone *z, unsigned mode, unsigned cls,
			uint32_t token, uint32_t *idx)
{
	struct tally__hdr *h = z->hdr;
	struct tally__chunk *c;
	uint32_t i;

	if (!h->partial_head[mode][cls])
		return 0;
	i = h->partial_head[mode][cls] - 1;
	list_remove(z, &h->partial_head[mode][cls], i);
	c = meta(z, i);
	__atomic_store_n(&c->listed, 0, RELAXED);
	if (c->warm) {
		c->warm = 0;
		atomic_fetch_sub(&h->chunks_warm, 1);
		atomic_fetch_add(&h->chunks_inuse, 1);
	}
	set_owner(c, token);
	*idx = i;
	return 1;
}

int tally__chunk_acquire(struct tally_zone *z, unsigned mode, unsigned cls,
			 uint32_t token, uint32_t *idx)
{
	uint32_t i = 0;
	int rc;

	/* Once per process: the chunks of dead owners come back first, and
	 * may be the partial chunk this allocation takes. */
	if (!atomic_load_explicit(&z->swept, memory_order_relaxed) &&
	    !atomic_exchange(&z->swept, 1))
		sweep_dead(z);
	if ((rc = tally__pool_lock(z)) < 0)
		return rc;
	for (;;) {
		if (take_partial(z, mode, cls, token, &i)) {
			tally__pool_unlock(z);
			/* Its frees are zeroed outside the lock. */
			tally__chunk_collect(z, i);
			*idx = i;
			return 0;
		}
		rc = take_free_chunk(z, mode, &i);
		if (rc == 0) {
			init_chunk(z, i, mode, cls, token);
			*idx = i;
			break;
		}
		/* Out of room or of chunks: first punch a warm chunk of
		 * another class (memory the zone holds already), then take
		 * back the chunks of dead owners (which may bring back a
		 * partial chunk of this class). */
		if (rc != -ENOSPC || (!reap_a_warm_chunk(z) &&
				      !take_back_dead(z)))
			break;
	}
	tally__pool_unlock(z);
	return rc;
}

void tally__chunk_release(struct tally_zone *z, uint32_t i)
{
	struct tally__chunk *c = meta(z, i);

	/* Not taken in time: the chunk stays the token's, whose lock goes
	 * with the thread; a sweep takes it back then. */
	if (tally__pool_lock(z) < 0)
		return;
	disown(c);
	settle(z, i);
	tally__pool_unlock(z);
}

/* Is every block of the chunk free?  First a look at word @w alone. */
static int all_free(struct tally__chunk *c, unsigned w)
{
	unsigned nblocks = __atomic_load_n(&c->nblocks, RELAXED);
	uint64_t full = (w + 1) * 64 <= nblocks ?
				~0ull : (1ull << (nblocks - w * 64)) - 1;

	return (atomic_load_explicit(&c->local[w], memory_order_relaxed) |
		atomic_load_explicit(&c->dirty[w], memory_order_relaxed) |
		atomic_load(&c->remote[w])) == full &&
	       count_free(c) == nblocks;
}

void tally__chunk_remote_freed(struct tally_zone *z, uint32_t i, unsigned w)
{
	struct tally__chunk *c = meta(z, i);

	/* Nothing to do for a listed chunk that still has live blocks. */
	if (__atomic_load_n(&c->listed, RELAXED) && !all_free(c, w))
		return;
	/* Not taken in time: the free stays in the remote bitmap, for the
	 * next settling of the chunk. */
	if (tally__pool_lock(z) < 0)
		return;
	settle(z, i);
	tally__pool_unlock(z);
}

/*
 * A free made the last block of an owned chunk free.  If its owner's
 * process is gone (it exited without releasing the chunks of its other
 * threads, called _exit(), or was killed), nobody will ever collect the
 * chunk: take it back from the dead owner, as if it had released it.
 */
void tally__chunk_owner_check(struct tally_zone *z, uint32_t i, unsigned w)
{
	struct tally__chunk *c = meta(z, i);
	uint32_t owner = atomic_load(&c->owner);

	if (!owner || !all_free(c, w) || !owner_dead(z, c, owner, -1) ||
	    tally__pool_lock(z) < 0)
		return;
	if (atomic_load(&c->owner) == owner) {
		disown(c);
		settle(z, i);
	}
	tally__pool_unlock(z);
}


/*
 * Zero the freed blocks @bits (of @bsize slots) in page @pg of a chunk,
 * one run of consecutive blocks at a time (a batch of frees is mostly
 * runs).  A plain memset: the blocks are free, so nobody else reads or
 * writes them (a free by another thread happened before, through its
 * atomic or of the remote bitmap that this collection read), and it
 * stores their bytes only, never the live blocks around them that other
 * CPUs add to meanwhile.
 */
static void zero_page(char *chunk, unsigned pg, const uint64_t *bits,
		      unsigned bsize)
{
	int64_t *page = (int64_t *)(chunk + tally__page_off(pg));

	for (unsigned w = 0; w < 8; w++) {
		uint64_t m = bits[w];

		while (m) {
			unsigned first = (unsigned)__builtin_ctzll(m);
			uint64_t after = ~m >> first; /* 0 bits: the run */
			unsigned n = after ? (unsigned)__builtin_ctzll(after) :
					     64 - first;
			int64_t *s = page + (size_t)(w * 64 + first) * bsize;

			memset(s, 0, (size_t)n * bsize * sizeof(*s));
			m = first + n >= 64 ? 0 : m & (~0ull << (first + n));
		}
	}
}

struct zero_arg {
	char *base;
	uint64_t file_base;
	const uint64_t *bits;
	unsigned bsize;
};

static void zero_run(uint64_t off, uint64_t len, void *arg)
{
	struct zero_arg *a = arg;
	uint64_t first = (off - a->file_base) / TALLY__PAGE;

	for (uint64_t pg = first; pg < first + len / TALLY__PAGE; pg++)
		zero_page(a->base, (unsigned)pg, a->bits, a->bsize);
}

/*
 * Zero the blocks @bits in every page of per-CPU or adaptive chunk @i that
 * exists, known without asking the file system: page 0 (and page 1 of an
 * adaptive chunk) was reserved when the chunk was handed out, and a copy
 * exists exactly when its bit of the reservation line is set (a copy is
 * reserved before its bit is set, and written only after; the line is
 * cleared only when the whole chunk is punched).  A bit set while this
 * runs stands for a page that was a hole a moment ago: the freed blocks
 * read zero there already.  So a collection makes no system call, and
 * threads collecting chunks of one zone do not queue on its file (as
 * lseek(SEEK_DATA) does, on the inode's lock and the shared file
 * position).
 */
static void zero_reserved(struct tally_zone *z, uint32_t i, unsigned mode,
			  const uint64_t *bits, unsigned bsize)
{
	char *base = tally__chunk_base(z, i);
	const _Atomic uint32_t *resv =
		(const _Atomic uint32_t *)(base + TALLY__RESV_OFF);
	unsigned nslabs = z->hdr->nslabs;

	zero_page(base, TALLY__PG_BASELINE, bits, bsize);
	if (mode == TALLY_ADAPTIVE)
		zero_page(base, TALLY__PG_ASHARED, bits, bsize);
	for (unsigned w = 0; w < 16; w++) {
		uint32_t set = atomic_load_explicit(&resv[w],
						    memory_order_acquire);

		while (set) {
			unsigned bit = w * 32 + (unsigned)__builtin_ctz(set);

			set &= set - 1;
			for (unsigned c = bit % 256u; c < nslabs; c += 256u)
				zero_page(base, bit < TALLY__RESV_FALLBACK ?
						tally__page_rseq(c) :
						tally__page_fallback(nslabs, c),
					  bits, bsize);
		}
	}
}

/*
 * Owner only: take the blocks freed since the last collection (by the
 * owner itself or by others), zero them in the pages that exist, and make
 * them allocatable.  One pass over the chunk's existing pages serves the
 * whole batch, so its cost is shared by up to 512 frees and does not grow
 * with the number of possible CPUs, only with those that wrote.  Shared
 * and per-node chunks, whose page 0 exists only once a block was zeroed,
 * ask the file system which pages exist.
 */
int tally__chunk_collect(struct tally_zone *z, uint32_t i)
{
	struct tally__chunk *c = meta(z, i);
	unsigned mode = __atomic_load_n(&c->mode, RELAXED);
	uint64_t bits[8];
	int any = 0;

	/* The remote bits stay set until the blocks are allocatable again,
	 * so that a second free racing with the collection is refused. */
	for (int w = 0; w < 8; w++) {
		bits[w] = atomic_load_explicit(&c->dirty[w],
					       memory_order_relaxed) |
			  atomic_load(&c->remote[w]);
		any |= bits[w] != 0;
	}
	if (!any)
		return 0;
	if (mode == TALLY_PERCPU || mode == TALLY_ADAPTIVE) {
		zero_reserved(z, i, mode, bits, c->bsize);
	} else {
		struct zero_arg a = {
			.base = tally__chunk_base(z, i),
			.file_base = chunk_file_off(z, i),
			.bits = bits,
			.bsize = c->bsize,
		};

		if (tally__resident_runs(z->fd, a.file_base, z->chunk_bytes,
					 zero_run, &a) < 0)
			return -1; /* could not zero them: they stay out of use */
	}
	for (int w = 0; w < 8; w++) {
		if (!bits[w])
			continue;
		atomic_store_explicit(
			&c->dirty[w],
			atomic_load_explicit(&c->dirty[w], memory_order_relaxed) &
				~bits[w],
			memory_order_relaxed);
		atomic_store_explicit(
			&c->local[w],
			atomic_load_explicit(&c->local[w], memory_order_relaxed) |
				bits[w],
			memory_order_release);
		atomic_fetch_and(&c->remote[w], ~bits[w]);
	}
	return 1;
}
