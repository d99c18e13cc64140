/*
 * internal.h: what libtally's source files share.  Not installed.
 */
#ifndef TALLY_INTERNAL_H
#define TALLY_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"
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
	char path[PATH_MAX];     /* "" for an anonymous zone */
};

/* Process-wide settings, from the environment (config.c). */
struct tally__env {
	unsigned nslabs;
	unsigned nnodes;
	uint16_t cpu_node[TALLY__MAX_SLABS];
	size_t default_capacity; /* slots ($TALLY_ZONE_SLOTS) */
	size_t default_series;   /* named series ($TALLY_ZONE_SERIES) */
	int keep;                /* $TALLY_KEEP=1 */
	long long retain_s;      /* $TALLY_RETAIN in seconds, -1: forever */
	long gid;                /* $TALLY_GROUP, or -1 */
	char zone[64];           /* $TALLY_ZONE: the default zone is this
				    shared zone; "" for a zone of its own */
	char dir[PATH_MAX];      /* $TALLY_DIR or the default */
	char dir_alt[PATH_MAX];  /* the other default place that readers
				    also read ("" when none): /dev/shm/tally-
				    <uid> when dir is $XDG_RUNTIME_DIR/tally */
	int dir_is_default;
	char error[256];         /* a bad variable, reported on zone creation */
};
extern struct tally__env tally__env;

/* $TALLY_RETAIN: its default and its largest value, in seconds. */
#define TALLY__RETAIN_DEFAULT 3600
#define TALLY__RETAIN_MAX     (3650ll * 86400)
#define TALLY__RETAIN_BAD     (-2)
long long tally__parse_retain(const char *s, char *err, size_t n);
/* Apply $TALLY_RETAIN to this process's directory, the first time a zone
 * file is created in it (directory.c); never fails. */
void tally__dir_expire_once(void);

void tally__init(void);

/* This process (process.c), renewed in every child. */
struct tally__self {
	int pid;
	uint64_t start;          /* clock ticks since boot, 0 if unknown */
};
void tally__self_get(struct tally__self *out);
/* 1 when process @pid, started at @start, still runs; 0 when it is gone
 * (its pid is free or belongs to a process started at another time). */
int tally__proc_alive(int pid, uint64_t start);
/*
 * The locks on a zone file (docs/FORMAT.md, "Where segments live"): the
 * use lock, a read lock every process using the zone holds on byte 0;
 * the creation lock, a write lock on byte 1 of a temporary file; the
 * creator lock, a read lock only the creating process holds on byte 2
 * while it runs.  All are open-file-description locks, so they belong to
 * a file, not to a pid: a writer in another PID namespace is judged the
 * same way.
 */
#define TALLY__USE_LOCK_BYTE      0
#define TALLY__CREATION_LOCK_BYTE 1
#define TALLY__CREATOR_LOCK_BYTE  2
/* The attach lock of a shared zone's file: a write lock on byte 3 held by
 * a process while it checks that the name still leads to the file and
 * takes its use lock, and a read lock held by clean-up while it checks
 * that nobody uses the file and removes it: neither sees the other half
 * done (zone.c, directory.c). */
#define TALLY__ATTACH_LOCK_BYTE   3
/* Zone names: 1 to 63 of [A-Za-z0-9_.-], not starting with a dot. */
int tally__valid_zone_name(const char *name);
/* The lock protocol (lock.c).  tally__lock_byte: a lock of @type
 * (F_RDLCK, F_WRLCK, F_UNLCK) on byte @byte of the file open as @fd,
 * through @fd's description; with @wait, waiting for a conflicting lock
 * to go.  0, or -1 with errno.  tally__byte_locked: does a process hold a
 * lock on that byte through another description than @fd's?  1 when it
 * cannot tell; _use_locked, _creator_locked and _token_locked ask it of
 * the use lock, the creator lock and the lock of an owner token. */
int tally__lock_byte(int fd, short type, uint64_t byte, int wait);
int tally__byte_locked(int fd, uint64_t byte);
int tally__use_locked(int fd);
int tally__creator_locked(int fd);

/*
 * The fork and exit hooks (hooks.c): each layer registers its steps at
 * its first use, before it first takes a lock a step renews; the hooks run
 * them in the order of these slots, whoever registered first.  In a child,
 * this process's identity is renewed before them all.
 */
typedef void (*tally__hook_fn)(void);
enum tally__child_step {
	TALLY__CHILD_INIT,       /* config.c: tally__init */
	TALLY__CHILD_ZONE,       /* zone.c: the registry, use locks */
	TALLY__CHILD_TCACHE,     /* alloc.c: thread caches */
	TALLY__CHILD_FALLBACK,   /* add.c: fallback copies */
	TALLY__CHILD_FAMILY,     /* family.c: the families' locks */
	TALLY__CHILD_STEPS
};
enum tally__exit_step {
	TALLY__EXIT_ZONE_BEGIN,  /* zone.c: lock the registry */
	TALLY__EXIT_TCACHE,      /* alloc.c: the exiting thread's chunks */
	TALLY__EXIT_ZONE_END,    /* zone.c: detach every zone */
	TALLY__EXIT_STEPS
};
void tally__hook_child(enum tally__child_step step, tally__hook_fn fn);
void tally__hook_exit(enum tally__exit_step step, tally__hook_fn fn);
/* The core's steps (zone.c), registered by zone creation and the
 * discard block; idempotent. */
void tally__zone_hooks(void);

/* The steps of the core (zone.c, alloc.c, add.c) and of family.c. */
void tally__zone_postfork_child(void);
void tally__zone_exit_begin(void);
void tally__zone_exit_end(void);
void tally__tcache_postfork_child(void);
void tally__tcache_exit(void);
void tally__fallback_postfork_child(void);

/*
 * Each thread's rseq stand-in and fallback state (config.c, add.c): where
 * tally__cfg.rseq_off leads when the process does not use rseq.  The
 * first 16 bytes play the rseq area: a CPU id above any limit, and a
 * rseq_cs field that absorbs the sequence's store; the fallback words
 * follow at the TALLY__FB_*_OFF offsets (tally/arch/add.h).
 */
struct tally__thread {
	uint32_t cpu_id_start, cpu_id;
	uint64_t rseq_cs;
	uint64_t fb_token;       /* this thread's claim of fb_index; 0: none */
	uint32_t fb_delta;       /* bytes from CPU 0's copy to the fallback
				    copy owned, 0 when none */
	uint32_t fb_bit;         /* its reservation bit */
	uint32_t fb_index;       /* fallback copy + 1; 0: not claimed yet */
	uint32_t fb_later;       /* fallback adds to make before the next
				    try at a claim, after one failed */
	uint32_t fb_wait;        /* what fb_later started from last time:
				    0 before the first failed try */
	uint32_t fb_probe;       /* the next copy whose owner a retry asks
				    the kernel about */
	int32_t fb_tid, fb_pid;  /* gettid() and getpid(), 0 until asked */
} __attribute__((aligned(32)));
extern __thread struct tally__thread tally__thread
	__attribute__((tls_model("initial-exec")));
_Static_assert(__builtin_offsetof(struct tally__thread, fb_token) ==
		       TALLY__FB_TOKEN_OFF &&
	       __builtin_offsetof(struct tally__thread, fb_delta) ==
		       TALLY__FB_DELTA_OFF &&
	       __builtin_offsetof(struct tally__thread, fb_bit) ==
		       TALLY__FB_BIT_OFF, "the inline fallback's offsets");
_Static_assert(TALLY__OWNER_OFF == TALLY__RESV_OFF,
	       "a fallback copy's owner line ends its page");

/* Byte TALLY__FB_LOCK_BYTE + f of a zone file: the write lock of the
 * process that owns fallback copy f (docs/FORMAT.md).  The process lets
 * go of its copies of a zone in tally_zone_destroy() (fallback_detach),
 * and a forked child forgets its parent's (fallback_zone_postfork). */
#define TALLY__FB_LOCK_BYTE (1ull << 20)
/* A description of its own (opened with @flags) on the zone file open as
 * @old, known as @path ("" for an anonymous zone): lock.c. */
int tally__reopen_fd(int old, const char *path, int flags);
/* This process's own description of zone @z's file (add.c), opened at
 * its first use: it holds the locks of the fallback copies and owner
 * tokens the process holds; a forked child opens its own.  -1 when it
 * cannot be opened. */
int tally__own_fd(struct tally_zone *z);
/* Byte TALLY__OWNER_LOCK_BYTE + t of a zone file: a write lock held,
 * through its own description, by the process whose thread has owner
 * token t in that zone (alloc.c, docs/FORMAT.md).  A chunk whose owner's
 * byte is locked is never taken back, whatever its pid says: its process
 * may run in another PID namespace. */
#define TALLY__OWNER_LOCK_BYTE (1ull << 32)
/* Lock (1) or unlock (0) the byte of @token.  0, or (locking) -errno
 * when the process has no description of its own (EMFILE ...) or the
 * lock cannot be taken (ENOLCK): then the token must own no chunk, or
 * a sweeper of another PID namespace would take its chunks back while
 * it uses them (pool.c). */
int tally__token_lock(struct tally_zone *z, uint32_t token, int lock);
int tally__token_locked(int fd, uint32_t token);
void tally__fallback_detach(struct tally_zone *z);
void tally__fallback_zone_postfork(struct tally_zone *z);

/* Registering series (metrics.c), for the families of family.c. */
struct tally_metric_desc;
struct tally_metric;
int tally__metric_register(struct tally_zone *z,
			   const struct tally_metric_desc *d, unsigned kind,
			   struct tally_metric *m);
/* _register_in: @pin (record index + 1, 0: none) is the family record
 * of the family the series belongs to, as _define made it: its children
 * stay in its generation (metrics.c). */
int tally__metric_register_in(struct tally_zone *z,
			      const struct tally_metric_desc *d, unsigned kind,
			      struct tally_metric *m, uint32_t pin);
int tally__metric_define(struct tally_zone *z,
			 const struct tally_metric_desc *d, uint32_t *rec);
/* A handle of @kind whose updates go nowhere; _failed also counts the
 * failure in the zone, sets errno and returns @rc. */
void tally__metric_discard(unsigned kind, struct tally_metric *m);
int tally__metric_failed(struct tally_zone *z, unsigned kind,
			 struct tally_metric *m, int rc);

/* Errors: set errno and this thread's message; return -errno or NULL. */
int tally__fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A public call that succeeds clears the message of an earlier failure
 * (config.c); every public function that can fail calls this on entry,
 * or on its way out of a success when it may recover from failures of
 * its own. */
extern __thread char tally__err_set __attribute__((tls_model("initial-exec")));
static inline void tally__ok(void)
{
	tally__err_set = 0;
}

/* Size classes. */
extern const uint16_t tally__class_size[TALLY__NCLASS];
extern uint8_t tally__class_tab[TALLY_BLOCK_MAX_SLOTS + 1];

static inline unsigned tally__class_of(unsigned nslots)
{
	return tally__class_tab[nslots];
}

/* The registry of this process's zones (zone.c). */
struct tally_zone *tally__zone_default_if_any(void);
/* Where the updates of a failed registration go (discard.c). */
tally_block *tally__discard_block(void);
struct tally_zone *tally__zone_of(const void *addr);
int tally__zone_alive(uint64_t id, struct tally_zone *z);

/* Chunk pool (pool.c); all but the last two take the pool lock. */
int tally__chunk_acquire(struct tally_zone *z, unsigned mode, unsigned cls,
			 uint32_t token, uint32_t *idx);
void tally__chunk_release(struct tally_zone *z, uint32_t idx);
void tally__chunk_remote_freed(struct tally_zone *z, uint32_t idx,
			       unsigned word);
int tally__chunk_collect(struct tally_zone *z, uint32_t idx);
void tally__chunk_owner_check(struct tally_zone *z, uint32_t idx,
			      unsigned word);
void tally__pool_lock(struct tally_zone *z);
/* The header's process-shared robust mutexes (lock.c): _lock returns 1
 * when the last owner died holding it (repair, then make it consistent). */
int tally__robust_init(pthread_mutex_t *m);
int tally__robust_lock(pthread_mutex_t *m);
void tally__pool_repair(struct tally_zone *z);
void tally__pool_unlock(struct tally_zone *z);

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

/* Page residency (resident.c): call fn for each run of pages of the range
 * [off, off + len) that exist in the file; returns 0 or -errno. */
typedef void (*tally__run_fn)(uint64_t off, uint64_t len, void *arg);
int tally__resident_runs(int fd, uint64_t off, uint64_t len,
			 tally__run_fn fn, void *arg);

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

/* Name and text rules shared by writers and readers (names.c). */
int tally__valid_utf8(const char *s, size_t n);
int tally__valid_metric_name(const char *s);
int tally__valid_label_name(const char *s);
int tally__valid_unit(const char *s);
int tally__labels_parse(const char *buf, size_t len, const char **names,
			const char **values, unsigned max);

/* The reader on an open descriptor (for the fuzzer). */
struct tally_open_opts;
struct tally_seg *tally__seg_open_fd(int fd, const char *name,
				     const struct tally_open_opts *opts);

/*
 * The one definition of a slot's value (docs/FORMAT.md, "Chunks and
 * values"), used by the writer's fetch and by the reader: fold word @w of
 * page @pg of a chunk into the sums of a slot of a block in @mode.  *sum
 * collects the copies the mode uses, *base the baseline; percpu[c], when
 * not NULL, CPU (or node) c's part.  Wrapping arithmetic: copies of a
 * signed gauge may wrap one by one while their sum does not.
 */
static inline void tally__fold(unsigned pg, uint64_t w, unsigned mode,
			       unsigned nslabs, unsigned nnodes,
			       uint64_t *sum, uint64_t *base, int64_t *percpu)
{
	unsigned c;

	if (pg == TALLY__PG_BASELINE) {
		*base = w;
		return;
	}
	if (pg == TALLY__PG_ASHARED) {
		/* (value << 1) | promoted */
		if (mode == TALLY_ADAPTIVE)
			*sum += (uint64_t)((int64_t)w >> 1);
		return;
	}
	c = pg - TALLY__PG_COPY0;
	if ((mode == TALLY_SHARED && c != 0) ||
	    (mode == TALLY_PERNODE && c >= nnodes))
		return;
	if (c >= nslabs) /* fallback copies follow the rseq copies */
		c -= nslabs;
	*sum += w;
	if (percpu)
		percpu[c] = (int64_t)((uint64_t)percpu[c] + w);
}

/* Process start time in clock ticks since boot, 0 if unknown. */
uint64_t tally__proc_start(int pid);

#endif /* TALLY_INTERNAL_H */
