/*
 * zone.c: this process's registry of zones and its use of their files:
 * the public calls that create, find and destroy a zone, the lookup of a
 * handle's zone (tally__zone_of, on the update path), the use locks a
 * process holds and the removal of a file at exit, and the core's fork
 * and exit steps.  Creating a zone's file is zone-create.c's, attaching a
 * shared one zone-attach.c's, and checking the directory zone-dir.c's.
 *
 * Who removes the file: every process using the zone (its creator and the
 * children that inherited it) holds a read lock on byte 0 through an open
 * file description of its own (an OFD lock on a descriptor reopened from
 * /proc/self/fd, closed on exec); the creator's description also holds a
 * read lock on byte 2, the creator lock.  From format 2.6 on both lie in
 * the zone's writers' lock file, which no reader can open (lkfd), and
 * readers tell "alive" by presence locks: write locks on the zone file
 * (livefd), the creator's on byte 2.  All are taken before the file gets
 * its final name, so no reader ever sees a published file nobody holds.  A process that exits normally
 * drops its locks and removes the file if no other description holds
 * one.  A child that execs or dies drops its lock with its descriptor, so
 * neither fork+exec nor _exit() leaves a stale user behind.  After a
 * crash of the last user the file stays for post-mortem reading, until
 * the retention ($TALLY_RETAIN, reader/directory.c) runs out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/zone.h"

/* Lock order: create_lock, then reg_lock, then a zone's pool lock (an
 * exiting thread gives its cached chunks back under reg_lock, so that
 * the zone is not destroyed meanwhile: core/alloc.c). */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_zone *_Atomic reg[MAX_ZONES];
static uint64_t next_id = 1;
static struct tally_zone *default_zone;

/*
 * Take this process's use lock on a zone file (see the top comment) and,
 * for its @creator, the creator lock; the file is known as @path.  In a
 * zone with a lock file (2.6) they are taken there, where no reader can
 * take or hold them.  Returns 0, or -1 with errno (then z->lockfd is -1).
 */
int tally__zone_take_locks(struct tally_zone *z, int creator, const char *path)
{
	int fd, err;

	z->lockfd = -1;
	fd = tally__reopen_fd(tally__zone_lock_fd(z),
			      z->lkfd >= 0 ? z->lkpath : path, O_RDONLY);
	if (fd < 0)
		return -1;
	if (tally__lock_byte(fd, F_RDLCK, TALLY__USE_LOCK_BYTE, 0) < 0 ||
	    (creator &&
	     tally__lock_byte(fd, F_RDLCK, TALLY__CREATOR_LOCK_BYTE, 0) < 0)) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	z->lockfd = fd;
	return 0;
}

/*
 * A zone of format 2.6 that this process did not create (a shared zone
 * it attached, or one it inherited across fork): a write lock on a byte
 * of the zone file's presence range, which tells readers that a process
 * uses it.  A reader holding read locks there may refuse it: then this
 * process is not seen by readers, and nothing else changes, for no
 * writer decides anything from these locks.
 */
void tally__zone_take_presence(struct tally_zone *z, const char *path)
{
	uint64_t r = 0;
	int fd;

	z->livefd = -1;
	if (z->lkfd < 0)
		return;
	fd = tally__reopen_fd(z->fd, path, O_RDWR);
	if (fd < 0)
		return;
	for (int i = 0; i < 4; i++) {
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = z->id * 0x9e3779b97f4a7c15ull + (uint64_t)getpid() + (uint64_t)i;
		if (tally__lock_byte(fd, F_WRLCK, TALLY__PRESENCE_BYTE +
				     r % TALLY__PRESENCE_SPAN, 0) == 0) {
			z->livefd = fd;
			return;
		}
	}
	close(fd);
}

void tally__zone_set_lkpath(struct tally_zone *z, const char *path,
			    uint64_t ino)
{
	const char *slash = strrchr(path, '/');
	int dlen = slash ? (int)(slash - path) + 1 : 0;
	char name[64];

	tally__lockfile_name(name, sizeof(name), ino);
	snprintf(z->lkpath, sizeof(z->lkpath), "%.*s%s", dlen, path, name);
}

/* Close the lock file and the presence description of @z, if any. */
void tally__zone_close_locks(struct tally_zone *z)
{
	tally__process_token_close(z);
	if (z->livefd >= 0)
		close(z->livefd);
	if (z->lkfd >= 0)
		close(z->lkfd);
	z->livefd = z->lkfd = -1;
}

/* Remove @path while it still names the file open as @fd. */
static void unlink_if_same(const char *path, int fd)
{
	struct stat a, b;

	if (lstat(path, &a) == 0 && fstat(fd, &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlink(path);
}

void tally__zone_detach(struct tally_zone *z)
{
	if (z->lockfd >= 0) {
		close(z->lockfd);
		z->lockfd = -1;
	} else if (z->path[0]) {
		z->keep_file = 1;
	}
	if (z->livefd >= 0) {
		close(z->livefd);
		z->livefd = -1;
	}
	/* A shared zone stays for the retention (see the top).  The
	 * directory is no longer open here (a process keeps no descriptor
	 * of it): the name is removed only while it names this zone's file,
	 * a name with 64 random bits nobody else picks; its lock file after
	 * it, while the zone file's inode (and so the lock file's name)
	 * cannot be another file's. */
	if (z->path[0] && !z->keep_file &&
	    !(z->flags & (TALLY_ZONE_PERSIST | TALLY_ZONE_SHARED)) &&
	    !tally__env.keep && !tally__use_locked(tally__zone_lock_fd(z))) {
		unlink_if_same(z->path, z->fd);
		if (z->lkfd >= 0)
			unlink_if_same(z->lkpath, z->lkfd);
	}
}

/* At exit (hooks.c): lock the registry, so that tally__tcache_exit()
 * can ask which zones still exist, then detach every zone. */
void tally__zone_exit_begin(void)
{
	pthread_mutex_lock(&reg_lock);
}

void tally__zone_exit_end(void)
{
	for (int i = 0; i < MAX_ZONES; i++)
		if (reg[i])
			tally__zone_detach(reg[i]);
	pthread_mutex_unlock(&reg_lock);
}

/*
 * In the child: a lock held by another thread of the parent stays held in
 * the child, where that thread does not exist: the child makes its locks
 * anew.  Each inherited zone gets a use lock of the child's own.
 */
void tally__zone_postfork_child(void)
{
	pthread_mutex_init(&reg_lock, NULL);
	pthread_mutex_init(&create_lock, NULL);
	for (int i = 0; i < MAX_ZONES; i++) {
		struct tally_zone *z = reg[i];

		if (!z)
			continue;
		/* The inherited descriptor shares the parent's lock: take a
		 * lock of our own first, then close our copy (in the other
		 * order, a parent exiting in between would see no user). */
		int inherited = z->lockfd, inherited_live = z->livefd;

		tally__fallback_zone_postfork(z);
		/* The child takes back dead owners' chunks at its first
		 * chunk, as any process does (pool.c). */
		atomic_store(&z->swept, 0);
		if (z->path[0] &&
		    tally__zone_take_locks(z, !!(z->flags & TALLY_ZONE_SHARED), z->path) < 0)
			z->keep_file = 1; /* cannot tell who uses it: keep it */
		if (z->path[0])
			tally__zone_take_presence(z, z->path);
		if (inherited >= 0)
			close(inherited);
		if (inherited_live >= 0)
			close(inherited_live);
	}
}

/*
 * The core's fork and exit steps (hooks.c), registered before the first
 * zone is made, and before the first add to the discard block: the
 * registry's locks, the thread caches and the fallback copies are used
 * only after one of them.
 */
void tally__zone_hooks(void)
{
	static _Atomic int done;

	if (atomic_load_explicit(&done, memory_order_acquire))
		return;
	tally__hook_child(TALLY__CHILD_ZONE, tally__zone_postfork_child);
	tally__hook_child(TALLY__CHILD_TCACHE, tally__tcache_postfork_child);
	tally__hook_child(TALLY__CHILD_FALLBACK,
			  tally__fallback_postfork_child);
	tally__hook_exit(TALLY__EXIT_ZONE_BEGIN, tally__zone_exit_begin);
	tally__hook_exit(TALLY__EXIT_TCACHE, tally__tcache_exit);
	tally__hook_exit(TALLY__EXIT_ZONE_END, tally__zone_exit_end);
	atomic_store_explicit(&done, 1, memory_order_release);
}

/* Step 6: enter the zone in this process's registry, or fail with
 * EMFILE. */
int tally__zone_register(struct tally_zone *z)
{
	int slot;

	pthread_mutex_lock(&reg_lock);
	for (slot = 0; slot < MAX_ZONES && reg[slot]; slot++)
		;
	if (slot == MAX_ZONES) {
		pthread_mutex_unlock(&reg_lock);
		return tally__fail(EMFILE, "this process has %d zones already",
				   MAX_ZONES);
	}
	z->id = next_id++;
	atomic_store_explicit(&reg[slot], z, memory_order_release);
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

/* Has this process room for another zone named @name (with @flags), and
 * no zone of that name already?  0, or -errno with a message. */
int tally__zone_room(const char *name, unsigned flags)
{
	struct tally__self me;
	char path[PATH_MAX];
	int slot, dup = 0;

	/* The registry, not the file name (random), tells two zones of
	 * one name in this process apart.  Zones inherited from a parent
	 * do not count: the child is another process. */
	tally__self_get(&me);
	tally__zone_shared_path(path, sizeof(path), name);
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < MAX_ZONES; i++) {
		const struct tally_zone *z = reg[i];

		if (!z || !z->path[0] || (flags & TALLY_ZONE_ANON))
			continue;
		if (flags & TALLY_ZONE_SHARED)
			dup |= strcmp(z->path, path) == 0;
		else if (!(z->flags & TALLY_ZONE_SHARED) &&
			 z->hdr->creator_pid == me.pid &&
			 z->hdr->creator_start == me.start &&
			 strcmp(z->hdr->zone_name, name) == 0)
			dup = 1;
	}
	for (slot = 0; slot < MAX_ZONES && reg[slot]; slot++)
		;
	pthread_mutex_unlock(&reg_lock);
	if (dup)
		return tally__fail(EEXIST, "zone \"%s\" already exists in this "
				   "process", name);
	if (slot == MAX_ZONES)
		return tally__fail(EMFILE, "this process has %d zones already",
				   MAX_ZONES);
	return 0;
}

struct tally_zone *tally_zone_create(const char *name,
				     const struct tally_zone_opts *opts)
{
	struct tally_zone *z;
	int err;

	tally__ok();
	tally__init();
	tally__zone_hooks();
	pthread_mutex_lock(&create_lock);
	z = tally__zone_create_locked(name, opts);
	err = errno;
	pthread_mutex_unlock(&create_lock);
	errno = err;
	if (z) /* past what the creation recovered from */
		tally__ok();
	return z;
}

int tally_zone_destroy(struct tally_zone *z)
{
	int found = 0;

	tally__ok();
	if (!z)
		return tally__fail(EINVAL, "tally_zone_destroy(NULL)");
	/* Before reg_lock is first taken, even when @z is no zone of
	 * this process: a child forked meanwhile must renew the lock. */
	tally__zone_hooks();
	pthread_mutex_lock(&reg_lock);
	if (z == default_zone) {
		pthread_mutex_unlock(&reg_lock);
		return tally__fail(EINVAL, "the default zone lives as long as "
				   "the process");
	}
	for (int i = 0; i < MAX_ZONES; i++) {
		if (reg[i] == z) {
			atomic_store(&reg[i], NULL);
			found = 1;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	if (!found)
		return tally__fail(EINVAL, "not a zone of this process");
	/* Not at exit, where other threads may still add: there the
	 * fallback locks go when the last thread does. */
	tally__fallback_detach(z);
	tally__zone_detach(z);
	tally__zone_close_locks(z);
	munmap(z->hdr, z->map_size);
	close(z->fd);
	free(z);
	return 0;
}

/* The default zone if it exists; never creates it. */
struct tally_zone *tally__zone_default_if_any(void)
{
	return __atomic_load_n(&default_zone, __ATOMIC_ACQUIRE);
}

struct tally_zone *tally_zone_default(void)
{
	struct tally_zone *z;
	char name[16], *p;

	tally__ok();
	z = __atomic_load_n(&default_zone, __ATOMIC_ACQUIRE);
	if (z)
		return z;
	tally__init(); /* $TALLY_ZONE */
	tally__zone_hooks();
	/* Two threads may race to create it: serialise on a separate lock,
	 * as tally_zone_create() itself takes reg_lock. */
	pthread_mutex_lock(&create_lock);
	z = default_zone;
	if (!z && tally__env.zone[0]) {
		const struct tally_zone_opts shared = { 0, 0, TALLY_ZONE_SHARED };

		z = tally__zone_create_locked(tally__env.zone, &shared);
		if (z) {
			z->is_default = 1;
			__atomic_store_n(&default_zone, z, __ATOMIC_RELEASE);
		}
	} else if (!z) {
		tally__proc_name(name);
		for (p = name; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') ||
			      (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '-' ||
			      *p == '_' || *p == '.'))
				*p = '_';
		if (name[0] == '.')
			name[0] = '_';
		z = tally__zone_create_locked(name, NULL);
		if (z) {
			z->is_default = 1;
			__atomic_store_n(&default_zone, z, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&create_lock);
	return z;
}

int tally_zone_usage(struct tally_zone *z, struct tally_zone_usage *u)
{
	struct stat st;

	tally__ok();
	if (!z || !u)
		return tally__fail(EINVAL, "tally_zone_usage: NULL argument");
	if (fstat(z->fd, &st) < 0)
		return tally__fail(errno, "fstat: %s", strerror(errno));
	u->resident_bytes = (uint64_t)st.st_blocks * 512u;
	u->mapped_bytes = z->map_size;
	u->chunks_used = atomic_load(&z->hdr->chunks_inuse);
	u->chunks_total = z->nchunks;
	u->nslabs = z->hdr->nslabs;
	u->nnodes = z->hdr->nnodes;
	return 0;
}

const char *tally_zone_path(const struct tally_zone *z)
{
	return z ? z->path : "";
}

struct tally_zone *tally__zone_of(const void *addr)
{
	const char *a = addr;

	for (int i = 0; i < MAX_ZONES; i++) {
		struct tally_zone *z =
			atomic_load_explicit(&reg[i], memory_order_acquire);

		if (z && a >= z->chunks &&
		    a < z->chunks + (size_t)z->nchunks * z->chunk_bytes)
			return z;
	}
	return NULL;
}

int tally__zone_alive_locked(uint64_t id, struct tally_zone *z)
{
	for (int i = 0; i < MAX_ZONES; i++)
		if (reg[i] == z && z->id == id)
			return 1;
	return 0;
}

void tally__zones_lock(void)
{
	pthread_mutex_lock(&reg_lock);
}

void tally__zones_unlock(void)
{
	pthread_mutex_unlock(&reg_lock);
}
