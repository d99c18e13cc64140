/*
 * core/core.h: what the writer's core shares (not installed): a zone as
 * this process sees it, the zone registry, the chunk pool, page
 * reservation, the fallback copies, locating a handle.  It may use the
 * layers below it (format, process) and the reader's public API
 * (tally/reader.h), never the metrics layer above.
 */
#ifndef TALLY_CORE_H
#define TALLY_CORE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "format/format.h"
#include "process/process.h"
#include "tally/block.h"
#include "tally/zone.h"

/* A zone as this process sees it.  Read-only after creation but for the
 * fallback fields (atomics). */
struct tally_zone {
	uint64_t id;             /* unique in this process, never reused */
	struct tally__hdr *hdr;  /* the mapping starts with the header */
	size_t map_size;
	int fd;
	int lockfd;              /* holds this process's use lock, or -1 */
	/* Format 2.6 (docs/FORMAT.md): the writers' lock file, open
	 * read-write through a description that holds no lock, and its
	 * path; -1 and "" in an anonymous zone or a shared zone of an older
	 * minor, whose locks are all on the zone file (z->fd). */
	int lkfd;
	char lkpath[PATH_MAX];
	/* A description of the zone file holding this process's presence
	 * lock (a write lock readers judge liveness by), or -1. */
	int livefd;
	int keep_file;           /* could not take the lock: never unlink */
	struct tally__chunk *meta;
	char *chunks;            /* chunk 0 */
	size_t chunk_bytes;
	size_t chunks_size;      /* nchunks * chunk_bytes */
	uint64_t div_magic;      /* floor(2^64 / chunk_bytes) */
	uint32_t nchunks;
	uint64_t nospace_until;  /* CLOCK_MONOTONIC ns: until then, copies are
				    not reserved again after a refusal
				    (space.c) */
	unsigned flags;          /* TALLY_ZONE_* */
	int is_default;
	/* Fallback copies (add.c): a description of this process's own
	 * that holds the write locks of the copies it owns (-1 until the
	 * first claim), and which copies it holds (bit f) or found held by
	 * another process (refused).  Changed with atomics. */
	_Atomic int fbfd;
	_Atomic uint64_t fb_held[TALLY__MAX_SLABS / 64];
	_Atomic uint64_t fb_refused[TALLY__MAX_SLABS / 64];
	/* 1 once this process took back the chunks of dead owners
	 * (pool.c): each process does it once, at its first chunk; 0 again
	 * in a forked child (zone.c). */
	_Atomic int swept;
	/* This process's token in the zone (ptoken.c): its pid << 32 | the
	 * token, 0 until taken; a forked child, whose pid differs, takes
	 * its own. */
	_Atomic uint64_t ptoken;
	/* The description of the zone file that holds that token's lock
	 * (ptoken.c), plus one: 0 when there is none. */
	_Atomic int ptfd1;
	char path[PATH_MAX];     /* "" for an anonymous zone */
};

/* The descriptor and path that writers take the locks of @z on: its lock
 * file, or the zone file itself where it has none. */
static inline int tally__zone_lock_fd(const struct tally_zone *z)
{
	return z->lkfd >= 0 ? z->lkfd : z->fd;
}

static inline const char *tally__zone_lock_path(const struct tally_zone *z)
{
	return z->lkfd >= 0 ? z->lkpath : z->path;
}

/* The core's steps (zone.c), registered by zone creation and the
 * discard block; idempotent. */
void tally__zone_hooks(void);

/* The steps of the core (zone.c, alloc.c, add.c) and of the label
 * families (family.c). */
void tally__zone_postfork_child(void);
void tally__zone_exit_begin(void);
void tally__zone_exit_end(void);
void tally__tcache_postfork_child(void);
void tally__tcache_exit(void);
/* The owner token of the calling thread in @z, 0 when it has none
 * (alloc.c). */
uint32_t tally__tcache_token(struct tally_zone *z);
void tally__fallback_postfork_child(void);

/* This process's own description of zone @z's file (add.c), opened at
 * its first use: it holds the locks of the fallback copies and owner
 * tokens the process holds; a forked child opens its own.  -1 when it
 * cannot be opened. */
int tally__own_fd(struct tally_zone *z);
/* Lock (1) or unlock (0) the byte of @token.  0, or (locking) -errno
 * when the process has no description of its own (EMFILE ...) or the
 * lock cannot be taken (ENOLCK): then the token must own no chunk, or
 * a sweeper of another PID namespace would take its chunks back while
 * it uses them (pool.c). */
int tally__token_lock(struct tally_zone *z, uint32_t token, int lock);
void tally__fallback_detach(struct tally_zone *z);
/* This process's token in @z, taken with its lock at the first call of
 * the process (ptoken.c): 0, or -errno with a message. */
int tally__process_token(struct tally_zone *z, uint32_t *token);
/* Close the description that holds it, when the zone is let go. */
void tally__process_token_close(struct tally_zone *z);
void tally__fallback_zone_postfork(struct tally_zone *z);


/* The registry of this process's zones (zone.c). */
struct tally_zone *tally__zone_default_if_any(void);
/* Where the updates of a failed registration go (discard.c). */
tally_block *tally__discard_block(void);
struct tally_zone *tally__zone_of(const void *addr);
/*
 * Hold the registry: no zone is destroyed (and unmapped) until
 * tally__zones_unlock().  A thread that gives back chunks of a zone that
 * another thread may destroy holds it from the check that the zone still
 * exists (tally__zone_alive_locked) to its last write into the zone.
 * Taken before a zone's pool lock, never after it.
 */
void tally__zones_lock(void);
void tally__zones_unlock(void);

/* Chunk pool (pool.c); all but the last two take the pool lock. */
int tally__chunk_acquire(struct tally_zone *z, unsigned mode, unsigned cls,
			 uint32_t token, uint32_t *idx);
void tally__chunk_release(struct tally_zone *z, uint32_t idx);
void tally__chunk_remote_freed(struct tally_zone *z, uint32_t idx,
			       unsigned word);
int tally__chunk_collect(struct tally_zone *z, uint32_t idx);
void tally__chunk_owner_check(struct tally_zone *z, uint32_t idx,
			      unsigned word);
/* 0, or -errno with a message (ETIMEDOUT: held too long by another
 * process, see tally__robust_lock). */
int tally__pool_lock(struct tally_zone *z);
void tally__pool_repair(struct tally_zone *z);
void tally__pool_unlock(struct tally_zone *z);

/* Is @z, of id @id, still a zone of this process?  Under
 * tally__zones_lock(). */
int tally__zone_alive_locked(uint64_t id, struct tally_zone *z);

/*
 * Reserving pages before they are written (space.c).  Each returns 0, or
 * -ENOSPC (or another -errno) with a message naming @what and the zone.
 * tally__reserve: the pages of [off, off + len) of the zone's file;
 * tally__reserve_at: the same for an address in the zone's mapping;
 * tally__reserve_fd: on a bare descriptor, @where naming its file;
 * tally__reserve_copies: from the update path, the copies that bit @bit
 * of the reservation line of @p's chunk (in @z) stands for, then the bit.
 */
int tally__reserve(struct tally_zone *z, uint64_t off, uint64_t len,
		   const char *what);
int tally__reserve_at(struct tally_zone *z, const void *addr, size_t len,
		      const char *what);
int tally__reserve_fd(int fd, uint64_t off, uint64_t len, const char *what,
		      const char *where);
int tally__reserve_copies(struct tally_zone *z, const int64_t *p,
			  unsigned bit);
/* tally__release_at: give the whole pages of [addr, addr + len) back (a
 * hole punched in the file; they read as zeros afterwards). */
void tally__release_at(struct tally_zone *z, const void *addr, size_t len);

/* Locating a handle. */
struct tally__loc {
	struct tally_zone *z;
	uint32_t chunk;          /* chunk index */
	unsigned slot0;          /* first slot of the block in its chunk */
	unsigned nslots;         /* slots of the block */
	unsigned block;          /* block index in its chunk */
	unsigned mode;
	struct tally__chunk *ch;
};
int tally__locate(struct tally_zone *z, const tally_block *b,
		  struct tally__loc *loc);

static inline char *tally__chunk_base(const struct tally_zone *z, uint32_t i)
{
	return z->chunks + (size_t)i * z->chunk_bytes;
}

/*
 * @rel / chunk_bytes without a divide instruction: a multiply by
 * floor(2^64 / chunk_bytes) gives the quotient or one less, and one
 * compare fixes it.  Sets *@in to the remainder.
 */
static inline uint64_t tally__chunk_of(const struct tally_zone *z,
				       uint64_t rel, uint64_t *in)
{
	uint64_t q = (uint64_t)(((unsigned __int128)rel * z->div_magic) >> 64);
	uint64_t r = rel - q * z->chunk_bytes;

	if (r >= z->chunk_bytes) {
		q++;
		r -= z->chunk_bytes;
	}
	*in = r;
	return q;
}

#endif /* TALLY_CORE_H */
