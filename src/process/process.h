/*
 * process/process.h: what the process layer, the bottom of libtally,
 * offers every other file (not installed): settings from the
 * environment, errors, size classes, this process's identity and others'
 * liveness, the one-byte lock protocol of a zone file, and the fork and
 * exit hooks.  It includes no other internal header but layout.h.
 */
#ifndef TALLY_PROCESS_H
#define TALLY_PROCESS_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "tally/block.h"

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
 * done (core/zone-attach.c, reader/directory.c). */
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
/* Does a process hold a *write* lock on a byte of [@start, @start + @len)
 * (@len 0: to the end of any file) through another description than
 * @fd's?  Readers open files read-only and can only take read locks, so a
 * reader cannot make this true (docs/FORMAT.md, "Readers have no power
 * over writers").  1 when it cannot tell. */
int tally__write_held(int fd, uint64_t start, uint64_t len);
/* Does a process hold any lock on any byte of the file, through another
 * description than @fd's?  1 when it cannot tell. */
int tally__any_lock_held(int fd);
/* The wait for a lock that another process holds (the attach lock, the
 * header's mutexes) has this bound, in seconds; past it the call fails
 * with ETIMEDOUT (docs/FORMAT.md). */
#define TALLY__WAIT_BOUND_S 5
/* tally__lock_byte with a bounded wait: 0, or -1 with errno (ETIMEDOUT
 * once TALLY__WAIT_BOUND_S passed). */
int tally__lock_byte_bounded(int fd, short type, uint64_t byte);
/*
 * The writers' lock file of a zone file (format 2.6): ".tally-lock.<ino>"
 * in its directory, where <ino> is the zone file's inode number; mode
 * 0600, never given to a group, so that only the writers' own user opens
 * it.  Every lock that a writer decides anything from is taken there
 * (docs/FORMAT.md, "Readers have no power over writers").
 * tally__lockfile_name: its name, for the zone file of inode @ino.
 * tally__lockfile_open: open (or create, with @create; with O_EXCL, after
 * removing a stale one, when @create is 2) it in the directory open as
 * @dfd, read-write, checked to be a regular file of this user that no
 * one else may open.  The descriptor, or -1 with errno.
 */
#define TALLY__LOCKFILE_PREFIX ".tally-lock."
void tally__lockfile_name(char *out, size_t n, uint64_t ino);
int tally__lockfile_open(int dfd, uint64_t ino, int create);
/* The presence locks of a zone file of format 2.6: the creator's write
 * lock on byte TALLY__CREATOR_LOCK_BYTE, and the write lock each other
 * user takes on a byte of [TALLY__PRESENCE_BYTE, + TALLY__PRESENCE_SPAN)
 * when nobody holds a read lock there (readers judge liveness by them;
 * writers never do). */
#define TALLY__PRESENCE_BYTE (1ull << 40)
#define TALLY__PRESENCE_SPAN (1ull << 32)
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
	TALLY__CHILD_FAMILY,     /* family.c: the label families' locks */
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
	/* The adaptive words this thread's last adds found unpromoted
	 * and uncontended (tally__adaptive_hint_add, tally/arch/x86_64.h),
	 * at TALLY__AHINT_OFF wherever rseq_off leads. */
	uintptr_t ahint[2] __attribute__((aligned(16)));
} __attribute__((aligned(32)));
extern __thread struct tally__thread tally__thread
	__attribute__((tls_model("initial-exec")));
_Static_assert(__builtin_offsetof(struct tally__thread, fb_token) ==
		       TALLY__FB_TOKEN_OFF &&
	       __builtin_offsetof(struct tally__thread, fb_delta) ==
		       TALLY__FB_DELTA_OFF &&
	       __builtin_offsetof(struct tally__thread, fb_bit) ==
		       TALLY__FB_BIT_OFF &&
	       __builtin_offsetof(struct tally__thread, ahint) ==
		       TALLY__AHINT_OFF, "the inline fallback's offsets");
_Static_assert(TALLY__OWNER_OFF == TALLY__RESV_OFF,
	       "a fallback copy's owner line ends its page");

/* Byte TALLY__FB_LOCK_BYTE + f of a zone's writers' lock file (of the
 * zone file before format 2.6): the write lock of the process that owns
 * fallback copy f (docs/FORMAT.md).  The process lets
 * go of its copies of a zone in tally_zone_destroy() (fallback_detach),
 * and a forked child forgets its parent's (fallback_zone_postfork). */
#define TALLY__FB_LOCK_BYTE (1ull << 20)
/* A description of its own (opened with @flags) on the zone file open as
 * @old, known as @path ("" for an anonymous zone): lock.c. */
int tally__reopen_fd(int old, const char *path, int flags);
/* Byte TALLY__OWNER_LOCK_BYTE + t of a zone's writers' lock file (of the
 * zone file before format 2.6): a write lock held,
 * through its own description, by the process whose thread has owner
 * token t in that zone (alloc.c, docs/FORMAT.md).  A chunk whose owner's
 * byte is locked is never taken back, whatever its pid says: its process
 * may run in another PID namespace. */
#define TALLY__OWNER_LOCK_BYTE (1ull << 32)
int tally__token_locked(int fd, uint32_t token);

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

/* The header's process-shared robust mutexes (lock.c): _lock returns 1
 * when the last owner died holding it (repair, then make it consistent),
 * 0 when taken, or -errno with a message naming the lock (@which) and
 * @zone (-ETIMEDOUT once TALLY__WAIT_BOUND_S passed). */
int tally__robust_init(pthread_mutex_t *m);
int tally__robust_lock(pthread_mutex_t *m, const char *which,
		       const char *zone);

/* Process start time in clock ticks since boot, 0 if unknown. */
uint64_t tally__proc_start(int pid);
/* This process's name (/proc/self/comm), "process" when unknown. */
void tally__proc_name(char out[16]);

#endif /* TALLY_PROCESS_H */
