/*
 * zone.c: creating, publishing, sharing and removing zones.
 *
 * A zone's file is created under a temporary name, sized (sparse),
 * mapped, given its header, and only then renamed to its final name, so
 * that a reader never sees a half-written header.
 *
 * Names: <zone>.<pid>.<id>.tally, where <id> is 64 random bits.  The pid
 * is there for humans only: processes in other PID namespaces sharing the
 * directory have the same pids (each container's service is pid 1).  The
 * temporary file is created with O_EXCL and published without replacing
 * anything (RENAME_NOREPLACE, or link()), so a name that exists, for any
 * reason, makes the creator draw another id: it never takes the place of
 * someone else's file.
 *
 * Who removes the file: every process using the zone (its creator and the
 * children that inherited it) holds a read lock on byte 0 through an open
 * file description of its own (an OFD lock on a descriptor reopened from
 * /proc/self/fd, closed on exec); the creator's description also holds a
 * read lock on byte 2, the creator lock, which readers take as "alive".
 * Both are taken before the file gets its final name, so no reader ever
 * sees a published file nobody holds.  A process that exits normally
 * drops its locks and removes the file if no other description holds
 * one.  A child that execs or dies drops its lock with its descriptor, so
 * neither fork+exec nor _exit() leaves a stale user behind.  After a
 * crash of the last user the file stays for post-mortem reading, until
 * the retention ($TALLY_RETAIN, directory.c) runs out.
 *
 * Shared zones (TALLY_ZONE_SHARED) are named <zone>.tally and attached by
 * any process that asks for them by name: it opens the file, checks its
 * layout is the one it would make, and takes the same locks as a child
 * would, the creator lock included (every user of a shared zone keeps it
 * alive for readers).  The attach lock (internal.h) keeps clean-up from
 * removing the file between the moment an attaching process finds it and
 * the moment it holds its use lock.  The last user leaves the file in
 * place, dead, for the retention: workers that come back carry on with
 * its values.
 *
 * The directory is checked on a descriptor (check_dir), and the files of
 * a creation or an attach are opened, renamed and removed relative to
 * that descriptor (dir_fd), so that a directory swapped for another (or
 * for a symbolic link) by whoever owns a directory above it does not
 * take the writer elsewhere after the check.
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

#include "core/core.h"
#include "tally/reader.h"

#define MAX_ZONES 64
/* Attempts at attaching or creating a shared zone while others create or
 * remove it at the same moment. */
#define SHARED_TRIES 16

/* Lock order: create_lock, then reg_lock. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_zone *_Atomic reg[MAX_ZONES];
static uint64_t next_id = 1;
static struct tally_zone *default_zone;

/*
 * The segment directory as checked by check_dir(), for the creation or
 * attach under way: only used under create_lock, -1 otherwise.
 */
static int dir_fd = -1;

/* The last component of @path: the name of a file in dir_fd. */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/*
 * The default directory belongs to another user: it was created before
 * this user's first run, by mistake or to take it (the JVM's hsperfdata
 * had the same problem).  Name the owner and the ways out.
 */
static int dir_taken(const char *dir, const struct stat *st)
{
	char buf[1024], who[80] = "";
	struct passwd pw, *r = NULL;

	if (getpwuid_r(st->st_uid, &pw, buf, sizeof(buf), &r) == 0 && r)
		snprintf(who, sizeof(who), " (user %.60s)", r->pw_name);
	if (!tally__env.dir_is_default)
		return tally__fail(EPERM, "%s is owned by uid %u%s, not by "
				   "this user (uid %u): set TALLY_DIR to a "
				   "directory of your own", dir,
				   (unsigned)st->st_uid, who,
				   (unsigned)geteuid());
	return tally__fail(EPERM, "%s, tally's default directory for this "
			   "user, is owned by uid %u%s, not by this user (uid "
			   "%u): another user created it first and took it.  "
			   "Remove it (as its owner or root: rm -r %s), or set "
			   "TALLY_DIR to a directory of your own (mode 0700)%s",
			   dir, (unsigned)st->st_uid, who, (unsigned)geteuid(),
			   dir, tally__env.gid >= 0 ? "" :
			   "; with $XDG_RUNTIME_DIR set to a directory of "
			   "this user (a login session, systemd --user), the "
			   "default is $XDG_RUNTIME_DIR/tally, which nobody "
			   "else can take");
}

/*
 * With TALLY_GROUP, a default directory made 0700 by an earlier run
 * without it is opened to the group (0750, its group TALLY_GROUP): files
 * shared with a group it cannot enter would be of no use.  On the
 * descriptor, so the directory changed is the one checked.  A directory
 * named by TALLY_DIR is the user's to set up and is left as it is.
 */
static int share_dir(int fd, const char *dir, struct stat *st)
{
	int rfd, err = 0;

	if (tally__env.gid < 0 || !tally__env.dir_is_default ||
	    (st->st_gid == (gid_t)tally__env.gid &&
	     (st->st_mode & 0750) == 0750))
		return 0;
	/* fchown and fchmod want more than the O_PATH descriptor. */
	rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0 || fchown(rfd, (uid_t)-1, (gid_t)tally__env.gid) < 0 ||
	    fchmod(rfd, (st->st_mode & 07777 & ~(mode_t)022) | 0750) < 0 ||
	    fstat(rfd, st) < 0)
		err = tally__fail(errno, "cannot give %s to group %ld: %s",
				  dir, tally__env.gid, strerror(errno));
	if (rfd >= 0)
		close(rfd);
	return err;
}

/*
 * Check (and for the default, create) the segment directory, and keep
 * its descriptor (O_PATH: enough for openat, renameat2, linkat and
 * unlinkat) in dir_fd for the creation (close_dir() closes it).
 */
static int check_dir(void)
{
	const char *dir = tally__env.dir;
	struct stat st;
	int fd, err;

	/* O_PATH: a directory of another user that we may not read is
	 * still checked, and named as taken, not just "permission denied". */
	fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && tally__env.dir_is_default) {
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return tally__fail(errno, "cannot create %s: %s", dir,
					   strerror(errno));
		fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		struct stat ls;

		err = errno;
		if (err == ENOENT)
			return tally__fail(ENOENT, "TALLY_DIR %s does not "
					   "exist: create it with mode 0700, "
					   "or unset TALLY_DIR", dir);
		if (err == ELOOP || (err == ENOTDIR && lstat(dir, &ls) == 0 &&
				     S_ISLNK(ls.st_mode)))
			return tally__fail(ENOTDIR, "%s is a symbolic link; "
					   "tally wants a real directory", dir);
		if (err == ENOTDIR)
			return tally__fail(ENOTDIR, "%s is not a directory", dir);
		return tally__fail(err, "cannot open %s: %s", dir,
				   strerror(err));
	}
	if (fstat(fd, &st) < 0) {
		err = tally__fail(errno, "cannot stat %s: %s", dir,
				  strerror(errno));
		close(fd);
		return err;
	}
	err = 0;
	if (st.st_uid != geteuid())
		err = dir_taken(dir, &st);
	else if (st.st_mode & 002)
		err = tally__fail(EPERM, "%s is writable by others (mode %o), "
				   "as a shared directory like /dev/shm is: "
				   "tally keeps its files in a private "
				   "subdirectory (mkdir -m 0700 %s/tally-%u, "
				   "then TALLY_DIR=%s/tally-%u), or unset "
				   "TALLY_DIR for the default", dir,
				   (unsigned)(st.st_mode & 07777), dir,
				   (unsigned)geteuid(), dir, (unsigned)geteuid());
	else if (st.st_mode & 020)
		err = tally__fail(EPERM, "%s is writable by its group (mode "
				   "%o): another member could plant or remove "
				   "segment files; use a directory only its "
				   "owner can write to (0700, or 0750 with "
				   "TALLY_GROUP)", dir,
				   (unsigned)(st.st_mode & 07777));
	if (err == 0)
		err = share_dir(fd, dir, &st);
	if (err < 0) {
		close(fd);
		return err;
	}
	dir_fd = fd;
	return 0;
}

static void close_dir(void)
{
	if (dir_fd >= 0)
		close(dir_fd);
	dir_fd = -1;
}

static void proc_name(char out[16])
{
	char buf[32] = "";
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		n = 0;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	memset(out, 0, 16);
	snprintf(out, 16, "%.15s", buf[0] ? buf : "process");
}

/*
 * Take this process's use lock on a zone file (see the top comment) and,
 * for its @creator, the creator lock; the file is known as @path.
 * Returns 0, or -1 with errno (then z->lockfd is -1).
 */
static int take_locks(struct tally_zone *z, int creator, const char *path)
{
	int fd, err;

	z->lockfd = -1;
	fd = tally__reopen_fd(z->fd, path, O_RDONLY);
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

static void detach(struct tally_zone *z)
{
	if (z->lockfd >= 0) {
		close(z->lockfd);
		z->lockfd = -1;
	} else if (z->path[0]) {
		z->keep_file = 1;
	}
	/* A shared zone stays for the retention (see the top).  The
	 * directory is no longer open here (a process keeps no descriptor
	 * of it): the name is removed only while it names this zone's file,
	 * a name with 64 random bits nobody else picks. */
	if (z->path[0] && !z->keep_file &&
	    !(z->flags & (TALLY_ZONE_PERSIST | TALLY_ZONE_SHARED)) &&
	    !tally__env.keep && !tally__use_locked(z->fd)) {
		struct stat a, b;

		if (lstat(z->path, &a) == 0 && fstat(z->fd, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			unlink(z->path);
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
			detach(reg[i]);
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
		int inherited = z->lockfd;

		tally__fallback_zone_postfork(z);
		/* The child takes back dead owners' chunks at its first
		 * chunk, as any process does (pool.c). */
		atomic_store(&z->swept, 0);
		if (z->path[0] &&
		    take_locks(z, !!(z->flags & TALLY_ZONE_SHARED), z->path) < 0)
			z->keep_file = 1; /* cannot tell who uses it: keep it */
		if (inherited >= 0)
			close(inherited);
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

/*
 * The creation lock: a write lock on byte 1 of a temporary zone file,
 * held through the creating descriptor from the moment the file exists
 * until it is published.  A temporary file nobody holds it on is the
 * leftover of a creator that died (tally_dir_cleanup removes it).
 */
static int creation_lock(int fd, short type)
{
	return tally__lock_byte(fd, type, TALLY__CREATION_LOCK_BYTE, 0);
}

/*
 * Publish a fully written temporary file under its final name, never
 * replacing a file that has that name: -EEXIST then.  Where renameat2
 * cannot refuse to replace (an old kernel, a file system without
 * RENAME_NOREPLACE), link() refuses just the same.
 */
static int publish(const char *tmp, const char *path)
{
	const char *t = base_name(tmp), *p = base_name(path);

	if (renameat2(dir_fd, t, dir_fd, p, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(dir_fd, t, dir_fd, p, 0) < 0)
		return -errno;
	unlinkat(dir_fd, t, 0);
	return 0;
}

/*
 * The id that makes a zone's file name unique: 64 random bits.  Without
 * getrandom() (an old kernel, a seccomp filter), the clocks and this
 * process's addresses will do: uniqueness comes from O_EXCL and
 * RENAME_NOREPLACE, the id only makes retries rare.
 */
static uint64_t zone_id(void)
{
	static _Atomic uint64_t seq;
	struct timespec a, b;
	uint64_t id, x;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) == (ssize_t)sizeof(id))
		return id;
	clock_gettime(CLOCK_REALTIME, &a);
	clock_gettime(CLOCK_MONOTONIC, &b);
	x = (uint64_t)a.tv_sec * 1000000000u + (uint64_t)a.tv_nsec;
	x ^= ((uint64_t)b.tv_nsec << 32) ^ (uint64_t)getpid() ^
	     (uint64_t)(uintptr_t)&a ^
	     atomic_fetch_add(&seq, 1) * 0x9e3779b97f4a7c15ull;
	/* splitmix64's finaliser */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The final name of zone @name, with a new id. */
static void zone_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%.3900s/%s.%d.%016llx.tally", tally__env.dir, name,
		 (int)getpid(), (unsigned long long)zone_id());
}

/* The name of shared zone @name: the same for every process. */
static void shared_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%.3900s/%s.tally", tally__env.dir, name);
}

/* Tries before giving up on finding a free name: with random ids, a
 * second try already means something else is wrong. */
#define NAME_TRIES 8

/* Step 1 of creation: check the name and options, fill in defaults. */
static int zone_options(const char *name, const struct tally_zone_opts *opts,
			struct tally_zone_opts *o)
{
	*o = opts ? *opts : (struct tally_zone_opts){ 0, 0, 0 };
	if (tally__env.error[0])
		return tally__fail(EINVAL, "%s", tally__env.error);
	if (!tally__valid_zone_name(name))
		return tally__fail(EINVAL, "zone name \"%.80s\": expected 1 to "
				   "63 characters of [A-Za-z0-9_.-], not "
				   "starting with a dot", name ? name : "(null)");
	if (o->flags & ~(TALLY_ZONE_ANON | TALLY_ZONE_PERSIST |
			 TALLY_ZONE_SHARED))
		return tally__fail(EINVAL, "unknown zone flags 0x%x", o->flags);
	if ((o->flags & TALLY_ZONE_ANON) && (o->flags & TALLY_ZONE_SHARED))
		return tally__fail(EINVAL, "zone \"%s\": an anonymous zone has "
				   "no name to be shared by", name);
	if (o->capacity == 0)
		o->capacity = tally__env.default_capacity;
	if (o->capacity > ((size_t)1 << 32))
		return tally__fail(EINVAL, "zone capacity %zu: at most "
				   "4294967296 slots", o->capacity);
	if (o->max_series == 0)
		o->max_series = tally__env.default_series;
	if (o->max_series > (1u << 24))
		return tally__fail(EINVAL, "zone max_series %zu: at most "
				   "16777216", o->max_series);
	return 0;
}

/*
 * Step 2: the file, under a temporary name of its own (picked here, with
 * its final name in @path; with its creation lock, and
 * given to $TALLY_GROUP), or a memfd; sized (sparse), with the pages that
 * creation writes reserved for real (the header and the CPU-to-node
 * table) and the family index that every registration reads, so that a
 * full file system gives ENOSPC here instead of SIGBUS at the first store.
 * Returns the descriptor, or -1 (the temporary file is gone).
 */
static int create_file(const char *name, const struct tally_zone_opts *o,
		       const struct tally__geometry *g, char *path, char *tmp)
{
	char what[96];
	int fd = -1;

	if (o->flags & TALLY_ZONE_ANON) {
		snprintf(what, sizeof(what), "tally-%s", name);
		fd = memfd_create(what, MFD_CLOEXEC);
	} else {
		/* A name that exists belongs to someone: draw another. */
		for (int i = 0; i < NAME_TRIES; i++) {
			zone_path(path, PATH_MAX, name);
			snprintf(tmp, PATH_MAX + 16, "%s.tmp", path);
			if (o->flags & TALLY_ZONE_SHARED)
				shared_path(path, PATH_MAX, name);
			fd = openat(dir_fd, base_name(tmp), O_RDWR | O_CREAT |
				    O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd >= 0 || errno != EEXIST)
				break;
		}
	}
	if (fd < 0) {
		tally__fail(errno, "cannot create the zone file %s: %s",
			    tmp[0] ? tmp : "(memfd)", strerror(errno));
		return -1;
	}
	if (tmp[0])
		creation_lock(fd, F_WRLCK);
	snprintf(what, sizeof(what), "zone \"%s\"", name);
	if (tmp[0] && tally__env.gid >= 0 &&
	    (fchown(fd, (uid_t)-1, (gid_t)tally__env.gid) < 0 ||
	     fchmod(fd, 0640) < 0))
		tally__fail(errno, "cannot share %s with group %ld: %s", tmp,
			    tally__env.gid, strerror(errno));
	else if (ftruncate(fd, (off_t)g->file_size) < 0)
		tally__fail(errno, "cannot size the zone file to %llu bytes: "
			    "%s", (unsigned long long)g->file_size,
			    strerror(errno));
	else if (tally__reserve_fd(fd, 0, g->node_off + g->node_size, what,
				   tally__env.dir) == 0 &&
		 tally__reserve_fd(fd, tally__fam_index_off(g),
				   (uint64_t)g->fam_hash_buckets * 4, what,
				   tally__env.dir) == 0)
		return fd;
	{
		int err = errno;

		close(fd);
		if (tmp[0])
			unlinkat(dir_fd, base_name(tmp), 0);
		errno = err;
	}
	return -1;
}

/* Step 3: map the file and fill in what this process knows of the zone. */
static int map_zone(struct tally_zone *z, int fd, const struct tally__geometry *g,
		    uint64_t nchunks, unsigned flags)
{
	void *map = mmap(NULL, g->file_size, PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, 0);

	if (map == MAP_FAILED)
		return tally__fail(errno, "cannot map %llu bytes: %s",
				   (unsigned long long)g->file_size,
				   strerror(errno));
	z->fd = fd;
	z->hdr = map;
	z->map_size = g->file_size;
	z->nchunks = (uint32_t)nchunks;
	z->chunk_bytes = g->chunk_bytes;
	z->chunks_size = g->chunks_size;
	z->div_magic = (uint64_t)(((unsigned __int128)1 << 64) / g->chunk_bytes);
	z->flags = flags;
	z->meta = (struct tally__chunk *)((char *)map + g->meta_off);
	z->chunks = (char *)map + g->chunks_off;
	return 0;
}

/* Step 4: the header (its first 512 bytes never change afterwards). */
static int write_header(struct tally__hdr *h, const struct tally__geometry *g,
			const char *name, const struct tally_zone_opts *o,
			uint64_t nchunks)
{
	struct tally__self me;
	struct timespec ts;
	int rc;

	memcpy(h->magic, TALLY__MAGIC, 8);
	h->major = TALLY__FMT_MAJOR;
	h->minor = TALLY__FMT_MINOR;
	h->header_size = sizeof(*h);
	h->byte_order = TALLY__BYTE_ORDER;
	h->page_size = TALLY__PAGE;
	h->stride = TALLY__STRIDE;
	h->nslabs = tally__env.nslabs;
	h->nnodes = tally__env.nnodes;
	h->naux = TALLY__NAUX;
	h->chunk_pages = (uint32_t)g->chunk_pages;
	h->chunk_slots = TALLY_CHUNK_SLOTS;
	h->flags = ((o->flags & TALLY_ZONE_ANON) ? TALLY__HDR_ANON : 0) |
		   ((o->flags & TALLY_ZONE_PERSIST) ? TALLY__HDR_PERSIST : 0) |
		   ((o->flags & TALLY_ZONE_SHARED) ? TALLY__HDR_SHARED : 0);
	h->nchunks = nchunks;
	h->node_off = g->node_off;
	h->node_size = g->node_size;
	h->meta_off = g->meta_off;
	h->meta_size = g->meta_size;
	h->meta_rec_size = sizeof(struct tally__chunk);
	h->fam_off = g->fam_off;
	h->fam_size = g->fam_size;
	h->fam_rec_size = sizeof(struct tally__family);
	h->fam_cap = TALLY__FAM_CAP;
	h->desc_off = g->desc_off;
	h->desc_size = g->desc_size;
	h->desc_rec_size = sizeof(struct tally__series);
	h->desc_cap = (uint32_t)o->max_series;
	h->hash_off = g->hash_off;
	h->hash_size = g->hash_size;
	h->hash_buckets = g->hash_buckets;
	h->fam_hash_buckets = g->fam_hash_buckets;
	h->chunks_off = g->chunks_off;
	h->chunks_size = g->chunks_size;
	h->file_size = g->file_size;
	tally__self_get(&me);
	h->creator_pid = (int32_t)me.pid;
	h->creator_start = me.start;
	clock_gettime(CLOCK_REALTIME, &ts);
	h->created_ns = (uint64_t)ts.tv_sec * 1000000000u +
			(uint64_t)ts.tv_nsec;
	proc_name(h->proc_name);
	snprintf(h->zone_name, sizeof(h->zone_name), "%s", name);
	memcpy((char *)h + g->node_off, tally__env.cpu_node,
	       h->nslabs * sizeof(uint16_t));
	rc = tally__robust_init(&h->pool_lock);
	if (!rc)
		rc = tally__robust_init(&h->metrics_lock);
	if (rc)
		return tally__fail(rc, "cannot set up the zone's locks: %s",
				   strerror(rc));
	return 0;
}

/*
 * Step 5: take this process's locks (the creator lock makes the zone
 * alive for readers), then give the file its final name; a name taken
 * meanwhile (by anyone: another PID namespace has our pid too) makes
 * us draw another.  On failure the temporary file stays for the caller
 * to remove.
 */
static int publish_zone(struct tally_zone *z, const char *name,
			const char *tmp)
{
	int shared = !!(z->flags & TALLY_ZONE_SHARED), rc = -EEXIST;

	if (take_locks(z, 1, tmp) < 0)
		return tally__fail(errno, "cannot lock the zone file %s: %s; "
				   "readers tell a live writer by its lock, so "
				   "TALLY_DIR must be on a file system with "
				   "open file description locks (tmpfs, ext4, "
				   "xfs)", tmp, strerror(errno));
	/* A shared zone has one name: taken, it is somebody's to attach. */
	for (int i = 0; i < (shared ? 1 : NAME_TRIES) && rc == -EEXIST; i++) {
		if (i)
			zone_path(z->path, sizeof(z->path), name);
		rc = publish(tmp, z->path);
	}
	if (rc < 0) {
		close(z->lockfd);
		z->lockfd = -1;
		return tally__fail(-rc, "cannot publish zone \"%s\" as %s: %s",
				   name, z->path, strerror(-rc));
	}
	creation_lock(z->fd, F_UNLCK);
	return 0;
}

/* Step 6: enter the zone in this process's registry, or fail with
 * EMFILE. */
static int register_zone(struct tally_zone *z)
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

/* Before any file exists: the size fits, the directory is sound, and
 * this process has room for another zone. */
static int can_create(const char *name, const struct tally_zone_opts *o,
		      const struct tally__geometry *g)
{
	struct tally__self me;
	char path[PATH_MAX];
	int slot, dup = 0;

	if (g->file_size > (1ull << 46))
		return tally__fail(EINVAL, "zone capacity %zu with %u slabs "
				   "needs more than 64 TiB of address space",
				   o->capacity, tally__env.nslabs);
	if (!(o->flags & TALLY_ZONE_ANON) && check_dir() < 0)
		return -errno;
	/* File names no longer tell two zones of one name apart: the
	 * registry does.  Zones inherited from a parent do not count (the
	 * child is another process, as its pid said in the old names). */
	tally__self_get(&me);
	shared_path(path, sizeof(path), name);
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < MAX_ZONES; i++) {
		const struct tally_zone *z = reg[i];

		if (!z || !z->path[0] || (o->flags & TALLY_ZONE_ANON))
			continue;
		if (o->flags & TALLY_ZONE_SHARED)
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

/*
 * Steps 2 to 6: a new zone file, or NULL with errno.  A shared zone whose
 * name another process published first gives EEXIST: attach that one.
 */
static struct tally_zone *create_new(const char *name,
				     const struct tally_zone_opts *o,
				     const struct tally__geometry *g,
				     uint64_t nchunks)
{
	struct tally_zone *z;
	char tmp[PATH_MAX + 16] = "";
	void *map;
	int fd, err;

	z = calloc(1, sizeof(*z));
	if (!z) {
		tally__fail(ENOMEM, "out of memory");
		return NULL;
	}
	z->fbfd = -1;
	z->lockfd = -1;
	fd = create_file(name, o, g, z->path, tmp);
	if (fd < 0)
		goto fail;
	if (map_zone(z, fd, g, nchunks, o->flags) < 0)
		goto fail_fd;
	map = z->hdr;
	if (write_header(z->hdr, g, name, o, nchunks) < 0)
		goto fail_map;
	if (tmp[0]) {
		if (publish_zone(z, name, tmp) < 0)
			goto fail_map;
		tmp[0] = 0; /* published: nothing temporary to remove */
	}
	if (register_zone(z) < 0) {
		/* Others may have attached a shared zone already. */
		if (z->path[0] && !(o->flags & TALLY_ZONE_SHARED))
			unlinkat(dir_fd, base_name(z->path), 0);
		goto fail_map;
	}
	return z;

fail_map:
	err = errno;
	if (z->lockfd >= 0)
		close(z->lockfd);
	munmap(map, g->file_size);
	errno = err;
fail_fd:
	err = errno;
	close(fd);
	if (tmp[0])
		unlinkat(dir_fd, base_name(tmp), 0);
	errno = err;
fail:
	free(z);
	return NULL;
}

/*
 * Does the header @h, of a file of @size bytes, describe a shared zone
 * laid out as this process would lay it out?  Fills @g.  0, or -EEXIST
 * with a message naming what differs.
 */
static int shared_compatible(const struct tally__hdr *h, uint64_t size,
			     const char *path, struct tally__geometry *g)
{
	if (memcmp(h->magic, TALLY__MAGIC, 8) || h->major != TALLY__FMT_MAJOR ||
	    h->byte_order != TALLY__BYTE_ORDER)
		return tally__fail(EEXIST, "%s exists and is not a tally "
				   "segment of format %u.x: remove it or "
				   "choose another zone name", path,
				   TALLY__FMT_MAJOR);
	if (h->minor > TALLY__FMT_MINOR)
		return tally__fail(EEXIST, "shared zone %s was made by a newer "
				   "libtally (format %u.%u, this one writes "
				   "%u.%u), whose writers may follow rules "
				   "this one does not know: attach it with "
				   "that version", path, h->major, h->minor,
				   TALLY__FMT_MAJOR, TALLY__FMT_MINOR);
	if (!(h->flags & TALLY__HDR_SHARED) || (h->flags & TALLY__HDR_ANON))
		return tally__fail(EEXIST, "%s exists and is not a shared zone",
				   path);
	if (h->nslabs != tally__env.nslabs)
		return tally__fail(EEXIST, "shared zone %s was made for %u CPUs "
				   "and this process counts %u (TALLY_NSLABS): "
				   "every process of a shared zone must see "
				   "the same CPU count", path, h->nslabs,
				   tally__env.nslabs);
	/* A pernode add goes to the page of this process's node (its
	 * TALLY_NODES or NUMA map): a node the zone has no page for would
	 * add to pages never reserved, which readers do not sum. */
	if (h->nnodes != tally__env.nnodes)
		return tally__fail(EEXIST, "shared zone %s was made for %u "
				   "NUMA nodes and this process counts %u "
				   "(TALLY_NODES): every process of a shared "
				   "zone must see the same node count", path,
				   h->nnodes, tally__env.nnodes);
	if (h->nchunks < 1 || h->nchunks > (1ull << 23) ||
	    h->desc_cap > (1u << 24))
		return tally__fail(EEXIST, "%s: a damaged header (capacity)",
				   path);
	tally__geometry(h->nchunks, h->desc_cap, h->nslabs, g);
	if (h->header_size != sizeof(*h) || h->file_size != g->file_size ||
	    size != g->file_size || h->chunks_off != g->chunks_off ||
	    h->meta_off != g->meta_off || h->desc_off != g->desc_off ||
	    h->fam_off != g->fam_off || h->hash_off != g->hash_off ||
	    h->node_off != g->node_off || h->chunk_pages != g->chunk_pages ||
	    h->hash_buckets != g->hash_buckets ||
	    h->fam_hash_buckets != g->fam_hash_buckets ||
	    h->meta_rec_size != sizeof(struct tally__chunk) ||
	    h->desc_rec_size != sizeof(struct tally__series) ||
	    h->fam_rec_size != sizeof(struct tally__family))
		return tally__fail(EEXIST, "shared zone %s has a layout this "
				   "version of libtally does not make (format "
				   "%u.%u): let its processes finish, or "
				   "choose another zone name", path, h->major,
				   h->minor);
	return 0;
}

/*
 * Open shared zone file @path for writing, through a description of our
 * own.  Clean-up takes the owner's write permission away from a dead
 * file (directory.c): give it back, the zone is about to live again.
 * Sets *@st.  -1 with errno ENOENT when there is no such file.
 */
static int open_shared(const char *path, struct stat *st)
{
	int fd = openat(dir_fd, base_name(path), O_RDONLY | O_NOFOLLOW |
			O_CLOEXEC), rw = -1;

	if (fd < 0) {
		if (errno != ENOENT)
			tally__fail(errno, "cannot open shared zone %s: %s",
				    path, strerror(errno));
		return -1;
	}
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) ||
	    st->st_uid != geteuid()) {
		close(fd);
		tally__fail(EPERM, "%s is not a regular file of this user: "
			    "a shared zone is only attached by its owner",
			    path);
		return -1;
	}
	/* A clean-up may stamp it again in between: then once more. */
	for (int i = 0; i < 3; i++) {
		if (!(st->st_mode & S_IWUSR))
			fchmod(fd, (st->st_mode & 07777) | S_IWUSR);
		rw = tally__reopen_fd(fd, path, O_RDWR);
		if (rw >= 0 || errno != EACCES || fstat(fd, st) < 0)
			break;
	}
	if (rw < 0)
		tally__fail(errno, "cannot open shared zone %s for writing: %s",
			    path, strerror(errno));
	close(fd);
	return rw;
}

/*
 * Attach the shared zone whose file is @path, under its attach lock,
 * once sure that the name still leads to the file (clean-up may have
 * removed it meanwhile).  NULL with errno ENOENT when there is no such
 * file: create it.
 */
static struct tally_zone *attach_shared(const char *path)
{
	struct tally__geometry g;
	struct tally__hdr h;
	struct stat st, now;
	struct tally_zone *z;
	int fd = open_shared(path, &st);

	if (fd < 0)
		return NULL;
	if (tally__lock_byte(fd, F_WRLCK, TALLY__ATTACH_LOCK_BYTE, 1) < 0) {
		tally__fail(errno, "cannot lock shared zone %s: %s", path,
			    strerror(errno));
		goto fail;
	}
	if (fstatat(dir_fd, base_name(path), &now, AT_SYMLINK_NOFOLLOW) < 0 ||
	    now.st_dev != st.st_dev ||
	    now.st_ino != st.st_ino) {
		errno = ENOENT; /* removed meanwhile: as if never there */
		goto fail;
	}
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		tally__fail(EEXIST, "%s: cannot read its header (a creator "
			    "that died?)", path);
		goto fail;
	}
	if (shared_compatible(&h, (uint64_t)now.st_size, path, &g) < 0)
		goto fail;
	z = calloc(1, sizeof(*z));
	if (!z) {
		tally__fail(ENOMEM, "out of memory");
		goto fail;
	}
	z->fbfd = -1;
	snprintf(z->path, sizeof(z->path), "%s", path);
	if (map_zone(z, fd, &g, h.nchunks, TALLY_ZONE_SHARED |
		     ((h.flags & TALLY__HDR_PERSIST) ? TALLY_ZONE_PERSIST : 0)) < 0) {
		free(z);
		goto fail;
	}
	if (take_locks(z, 1, path) < 0) {
		tally__fail(errno, "cannot lock shared zone %s: %s", path,
			    strerror(errno));
		munmap(z->hdr, z->map_size);
		free(z);
		goto fail;
	}
	/* Marked dead by a clean-up between open_shared and the lock? */
	if (fstat(fd, &now) == 0 && !(now.st_mode & S_IWUSR))
		fchmod(fd, (now.st_mode & 07777) | S_IWUSR);
	tally__lock_byte(fd, F_UNLCK, TALLY__ATTACH_LOCK_BYTE, 0);
	return z;

fail:
	{
		int err = errno;

		close(fd);
		errno = err;
	}
	return NULL;
}

/* A shared zone: attach it, or create it when there is none. */
static struct tally_zone *shared_locked(const char *name,
					const struct tally_zone_opts *o,
					const struct tally__geometry *g,
					uint64_t nchunks)
{
	char path[PATH_MAX];
	struct tally_zone *z;

	shared_path(path, sizeof(path), name);
	for (int i = 0; i < SHARED_TRIES; i++) {
		z = attach_shared(path);
		if (z) {
			if (register_zone(z) == 0)
				return z;
			close(z->lockfd);
			munmap(z->hdr, z->map_size);
			close(z->fd);
			free(z);
			return NULL;
		}
		if (errno != ENOENT)
			return NULL;
		z = create_new(name, o, g, nchunks);
		if (z || errno != EEXIST)
			return z;
	}
	tally__fail(EAGAIN, "shared zone %s: created and removed by others "
		    "%d times while this process tried to attach it", path,
		    SHARED_TRIES);
	return NULL;
}

/*
 * A writer creating its first zone file applies the retention to its
 * directory (with the reader's clean-up, tally_dir_expire): a directory written by services that crash now and then
 * does not fill the memory with their segments, with no clean-up job to
 * set up.  Once per process (a walk opens every segment), and it never
 * holds up the creation: errors are ignored.
 */
static void expire_once(void)
{
	static atomic_int done;
	int err = errno;

	if (tally__env.retain_s < 0 || atomic_exchange(&done, 1))
		return;
	tally_dir_expire(tally__env.dir, tally__env.retain_s, NULL, NULL);
	errno = err;
}

/*
 * Zones are created under create_lock, one at a time in a process: two
 * threads creating the same name never race for its temporary file.
 */
static struct tally_zone *create_locked(const char *name,
					const struct tally_zone_opts *opts)
{
	struct tally_zone_opts o;
	struct tally__geometry g;
	struct tally_zone *z;
	uint64_t nchunks;

	tally__init();
	if (zone_options(name, opts, &o) < 0)
		return NULL;
	nchunks = (o.capacity + TALLY_CHUNK_SLOTS - 1) / TALLY_CHUNK_SLOTS;
	tally__geometry(nchunks, (uint32_t)o.max_series, tally__env.nslabs, &g);
	if (can_create(name, &o, &g) < 0) {
		int err = errno;

		close_dir();
		errno = err;
		return NULL;
	}
	if (o.flags & TALLY_ZONE_SHARED)
		z = shared_locked(name, &o, &g, nchunks);
	else
		z = create_new(name, &o, &g, nchunks);
	close_dir();
	if (z && z->path[0])
		expire_once();
	return z;
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
	z = create_locked(name, opts);
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
	detach(z);
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

		z = create_locked(tally__env.zone, &shared);
		if (z) {
			z->is_default = 1;
			__atomic_store_n(&default_zone, z, __ATOMIC_RELEASE);
		}
	} else if (!z) {
		proc_name(name);
		for (p = name; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') ||
			      (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '-' ||
			      *p == '_' || *p == '.'))
				*p = '_';
		if (name[0] == '.')
			name[0] = '_';
		z = create_locked(name, NULL);
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

/* Is @z (with @id) still a zone of this process?  Caller holds reg_lock. */
int tally__zone_alive_locked(uint64_t id, struct tally_zone *z)
{
	for (int i = 0; i < MAX_ZONES; i++)
		if (reg[i] == z && z->id == id)
			return 1;
	return 0;
}

int tally__zone_alive(uint64_t id, struct tally_zone *z)
{
	int alive;

	pthread_mutex_lock(&reg_lock);
	alive = tally__zone_alive_locked(id, z);
	pthread_mutex_unlock(&reg_lock);
	return alive;
}
