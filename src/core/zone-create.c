/*
 * zone-create.c: creating and publishing a zone's file, and the
 * once-per-process retention of the directory it is created in.
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
#include "reader/segment.h"
#include "tally/reader.h"

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
	const char *t = tally__zone_base_name(tmp);
	const char *p = tally__zone_base_name(path);

	if (renameat2(tally__zone_dirfd, t, tally__zone_dirfd, p,
		      RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(tally__zone_dirfd, t, tally__zone_dirfd, p, 0) < 0)
		return -errno;
	unlinkat(tally__zone_dirfd, t, 0);
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
void tally__zone_shared_path(char *out, size_t n, const char *name)
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

/* Remove the lock file of a zone file that was never published. */
static void drop_lock_file(struct tally_zone *z)
{
	if (z->lkfd >= 0)
		unlinkat(tally__zone_dirfd,
			 tally__zone_base_name(z->lkpath), 0);
	tally__zone_close_locks(z);
}

/*
 * The locks a creator takes on its new temporary file @fd (known as
 * @tmp, to be published as @path) while only its user may open it, so
 * that no reader can have taken a lock first (it is given to
 * $TALLY_GROUP only afterwards): the creation lock, and its presence
 * lock, a write lock on the creator byte that readers judge it alive by;
 * then the writers' lock file of the file's inode, made anew (format
 * 2.6).  Fills @st.  0, or -1 with errno and a message.
 */
static int take_own_locks(struct tally_zone *z, int fd, const char *tmp,
			  struct stat *st)
{
	if (creation_lock(fd, F_WRLCK) < 0 || fstat(fd, st) < 0)
		return tally__fail(errno, "cannot lock the zone file %s: %s",
				   tmp, strerror(errno));
	z->livefd = tally__reopen_fd(fd, tmp, O_RDWR);
	if (z->livefd < 0 ||
	    tally__lock_byte(z->livefd, F_WRLCK, TALLY__CREATOR_LOCK_BYTE,
			     0) < 0)
		return tally__fail(errno, "cannot lock the zone file %s: %s; "
				   "readers tell a live writer by its lock, so "
				   "TALLY_DIR must be on a file system with "
				   "open file description locks (tmpfs, ext4, "
				   "xfs)", tmp, strerror(errno));
	tally__zone_set_lkpath(z, tmp, (uint64_t)st->st_ino);
	z->lkfd = tally__lockfile_open(tally__zone_dirfd,
				       (uint64_t)st->st_ino, 2);
	if (z->lkfd < 0)
		return tally__fail(errno, "cannot create the writers' lock "
				   "file %s: %s", z->lkpath, strerror(errno));
	return 0;
}

/*
 * Step 2: the file, under a temporary name of its own (picked here, with
 * its final name in @path; with its creation lock, and
 * given to $TALLY_GROUP), or a memfd; sized (sparse), with the pages that
 * creation writes reserved for real (the header and the CPU-to-node
 * table) and the metric index that every registration reads, so that a
 * full file system gives ENOSPC here instead of SIGBUS at the first store.
 * Returns the descriptor, or -1 (the temporary file is gone).
 */
static int create_file(struct tally_zone *z, const char *name,
		       const struct tally_zone_opts *o,
		       const struct tally__geometry *g, char *path, char *tmp)
{
	char what[96];
	struct stat st;
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
				tally__zone_shared_path(path, PATH_MAX, name);
			fd = openat(tally__zone_dirfd, tally__zone_base_name(tmp), O_RDWR | O_CREAT |
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
	snprintf(what, sizeof(what), "zone \"%s\"", name);
	if (tmp[0] && take_own_locks(z, fd, tmp, &st) < 0)
		; /* the message is set */
	else if (tmp[0] && tally__env.gid >= 0 &&
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
		 tally__reserve_fd(fd, tally__metric_index_off(g),
				   (uint64_t)g->metric_hash_buckets * 4, what,
				   tally__env.dir) == 0)
		return fd;
	{
		int err = errno;

		close(fd);
		if (tmp[0])
			unlinkat(tally__zone_dirfd, tally__zone_base_name(tmp), 0);
		drop_lock_file(z);
		errno = err;
	}
	return -1;
}

/* Step 3: map the file and fill in what this process knows of the zone. */
int tally__zone_map(struct tally_zone *z, int fd,
		    const struct tally__geometry *g, uint64_t nchunks,
		    unsigned flags)
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
	h->metric_off = g->metric_off;
	h->metric_size = g->metric_size;
	h->metric_rec_size = sizeof(struct tally__metric_rec);
	h->metric_cap = TALLY__METRIC_CAP;
	h->series_off = g->series_off;
	h->series_size = g->series_size;
	h->series_rec_size = sizeof(struct tally__series);
	h->series_cap = (uint32_t)o->max_series;
	h->hash_off = g->hash_off;
	h->hash_size = g->hash_size;
	h->hash_buckets = g->hash_buckets;
	h->metric_hash_buckets = g->metric_hash_buckets;
	h->chunks_off = g->chunks_off;
	h->chunks_size = g->chunks_size;
	h->file_size = g->file_size;
	tally__self_get(&me);
	h->creator_pid = (int32_t)me.pid;
	h->creator_start = me.start;
	clock_gettime(CLOCK_REALTIME, &ts);
	h->created_ns = (uint64_t)ts.tv_sec * 1000000000u +
			(uint64_t)ts.tv_nsec;
	tally__proc_name(h->proc_name);
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

	if (tally__zone_take_locks(z, 1, tmp) < 0)
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

/* Before any file exists: the size fits, the directory is sound, and
 * this process has room for another zone. */
static int can_create(const char *name, const struct tally_zone_opts *o,
		      const struct tally__geometry *g)
{
	if (g->file_size > (1ull << 46))
		return tally__fail(EINVAL, "zone capacity %zu with %u slabs "
				   "needs more than 64 TiB of address space",
				   o->capacity, tally__env.nslabs);
	if (!(o->flags & TALLY_ZONE_ANON) && tally__zone_dir_check() < 0)
		return -errno;
	return tally__zone_room(name, o->flags);
}

/*
 * Steps 2 to 6: a new zone file, or NULL with errno.  A shared zone whose
 * name another process published first gives EEXIST: attach that one.
 */
struct tally_zone *tally__zone_create_new(const char *name,
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
	z->lkfd = -1;
	z->livefd = -1;
	fd = create_file(z, name, o, g, z->path, tmp);
	if (fd < 0)
		goto fail;
	if (tally__zone_map(z, fd, g, nchunks, o->flags) < 0)
		goto fail_fd;
	map = z->hdr;
	if (write_header(z->hdr, g, name, o, nchunks) < 0)
		goto fail_map;
	if (tmp[0]) {
		if (publish_zone(z, name, tmp) < 0)
			goto fail_map;
		tmp[0] = 0; /* published: nothing temporary to remove */
	}
	if (tally__zone_register(z) < 0) {
		/* Others may have attached a shared zone already. */
		if (z->path[0] && !(o->flags & TALLY_ZONE_SHARED)) {
			unlinkat(tally__zone_dirfd, tally__zone_base_name(z->path), 0);
			drop_lock_file(z);
		}
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
	if (tmp[0]) {
		unlinkat(tally__zone_dirfd, tally__zone_base_name(tmp), 0);
		drop_lock_file(z);
	}
	tally__zone_close_locks(z);
	errno = err;
fail:
	free(z);
	return NULL;
}

/*
 * A writer creating its first zone file applies the retention to its
 * directory, with the reader's clean-up (tally_dir_expire): a directory
 * written by services that crash now and then does not fill the memory
 * with their segments, with no clean-up job to set up.  Once per process
 * (a walk opens every segment), and it never holds up the creation:
 * errors are ignored.
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
struct tally_zone *tally__zone_create_locked(const char *name,
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

		tally__zone_dir_close();
		errno = err;
		return NULL;
	}
	if (o.flags & TALLY_ZONE_SHARED)
		z = tally__zone_shared_locked(name, &o, &g, nchunks);
	else
		z = tally__zone_create_new(name, &o, &g, nchunks);
	/* The earlier incarnations of this pid and zone but the last go
	 * (reader/directory.c), unless dead segments are kept for good;
	 * like the retention, this never holds up the creation. */
	if (z && z->path[0] && !(o.flags & TALLY_ZONE_SHARED) &&
	    tally__env.retain_s >= 0) {
		int err = errno;

		tally__dir_supersede(tally__zone_dirfd, tally__env.dir,
				     (int)getpid(), name);
		errno = err;
	}
	tally__zone_dir_close();
	if (z && z->path[0])
		expire_once();
	return z;
}
