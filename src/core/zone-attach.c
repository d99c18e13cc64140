/*
 * zone-attach.c: attaching a shared zone, or creating it when there is
 * none.
 *
 * Shared zones (TALLY_ZONE_SHARED) are named <zone>.tally and attached by
 * any process that asks for them by name: it opens the file, checks its
 * layout is the one it would make, and takes the same locks as a child
 * would, the creator lock included (every user of a shared zone keeps it
 * alive for readers).  The attach lock (process/lock.c) keeps clean-up from
 * removing the file between the moment an attaching process finds it and
 * the moment it holds its use lock.  The last user leaves the file in
 * place, dead, for the retention: workers that come back carry on with
 * its values.
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
	    h->series_cap > (1u << 24))
		return tally__fail(EEXIST, "%s: a damaged header (capacity)",
				   path);
	tally__geometry(h->nchunks, h->series_cap, h->nslabs, g);
	if (h->header_size != sizeof(*h) || h->file_size != g->file_size ||
	    size != g->file_size || h->chunks_off != g->chunks_off ||
	    h->meta_off != g->meta_off || h->series_off != g->series_off ||
	    h->metric_off != g->metric_off || h->hash_off != g->hash_off ||
	    h->node_off != g->node_off || h->chunk_pages != g->chunk_pages ||
	    h->hash_buckets != g->hash_buckets ||
	    h->metric_hash_buckets != g->metric_hash_buckets ||
	    h->meta_rec_size != sizeof(struct tally__chunk) ||
	    h->series_rec_size != sizeof(struct tally__series) ||
	    h->metric_rec_size != sizeof(struct tally__metric_rec))
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
 * file (reader/directory.c): give it back, the zone is about to live again.
 * Sets *@st.  -1 with errno ENOENT when there is no such file.
 */
static int open_shared(const char *path, struct stat *st)
{
	/* O_NONBLOCK: a FIFO of that name must not hold the open up; its
	 * type is refused below. */
	int fd = openat(tally__zone_dirfd, tally__zone_base_name(path),
			O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK),
	    rw = -1;

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
 * The writers' lock file of shared zone file @fd (of inode @st), in a
 * zone of format 2.6: its attach lock is there.  Sets *@lkfd (-1 for an
 * older zone, whose locks are in the zone file).  0, or -1 with errno and
 * a message.
 */
static int open_lock_file(int fd, const struct stat *st, const char *path,
			  int *lkfd)
{
	struct tally__hdr h;
	char name[64];

	*lkfd = -1;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h.magic, TALLY__MAGIC, 8) ||
	    h.minor < TALLY__FMT_MINOR_LOCK_FILE)
		return 0; /* judged under the lock */
	*lkfd = tally__lockfile_open(tally__zone_dirfd, (uint64_t)st->st_ino,
				     1);
	if (*lkfd >= 0)
		return 0;
	tally__lockfile_name(name, sizeof(name), (uint64_t)st->st_ino);
	return tally__fail(errno, "shared zone %s: cannot open its writers' "
			   "lock file %s: %s", path, name,
			   errno == EPERM ? "not a file of this user that only "
			   "it may open" : strerror(errno));
}

/* Does the name @name in the zone directory still lead to the file open
 * as @fd? */
static int still_named(const char *name, int fd)
{
	struct stat a, b;

	return fstatat(tally__zone_dirfd, name, &a, AT_SYMLINK_NOFOLLOW) == 0 &&
	       fstat(fd, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
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
	int fd = open_shared(path, &st), lkfd = -1, lockbase;
	char lkname[64];

	if (fd < 0)
		return NULL;
	if (open_lock_file(fd, &st, path, &lkfd) < 0)
		goto fail;
	lockbase = lkfd >= 0 ? lkfd : fd;
	if (tally__lock_byte_bounded(lockbase, F_WRLCK,
				     TALLY__ATTACH_LOCK_BYTE) < 0) {
		if (errno == ETIMEDOUT)
			tally__fail(ETIMEDOUT, "cannot attach shared zone %s: "
				    "another process of this user has held its "
				    "attach lock for more than %d s",
				    path, TALLY__WAIT_BOUND_S);
		else
			tally__fail(errno, "cannot lock shared zone %s: %s",
				    path, strerror(errno));
		goto fail;
	}
	tally__lockfile_name(lkname, sizeof(lkname), (uint64_t)st.st_ino);
	if (!still_named(tally__zone_base_name(path), fd) ||
	    (lkfd >= 0 && !still_named(lkname, lkfd))) {
		errno = ENOENT; /* removed meanwhile: as if never there */
		goto fail;
	}
	if (fstat(fd, &now) < 0 ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
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
	z->livefd = -1;
	z->lkfd = lkfd;
	snprintf(z->path, sizeof(z->path), "%s", path);
	tally__zone_set_lkpath(z, path, (uint64_t)st.st_ino);
	if (tally__zone_map(z, fd, &g, h.nchunks, TALLY_ZONE_SHARED |
		     ((h.flags & TALLY__HDR_PERSIST) ? TALLY_ZONE_PERSIST : 0)) < 0) {
		free(z);
		goto fail;
	}
	if (tally__zone_take_locks(z, 1, path) < 0) {
		tally__fail(errno, "cannot lock shared zone %s: %s", path,
			    strerror(errno));
		munmap(z->hdr, z->map_size);
		free(z);
		goto fail;
	}
	tally__zone_take_presence(z, path);
	/* Marked dead by a clean-up between open_shared and the lock? */
	if (fstat(fd, &now) == 0 && !(now.st_mode & S_IWUSR))
		fchmod(fd, (now.st_mode & 07777) | S_IWUSR);
	tally__lock_byte(lockbase, F_UNLCK, TALLY__ATTACH_LOCK_BYTE, 0);
	return z;

fail:
	{
		int err = errno;

		if (lkfd >= 0)
			close(lkfd);
		close(fd);
		errno = err;
	}
	return NULL;
}

/* A shared zone: attach it, or create it when there is none. */
struct tally_zone *tally__zone_shared_locked(const char *name,
					     const struct tally_zone_opts *o,
					     const struct tally__geometry *g,
					     uint64_t nchunks)
{
	char path[PATH_MAX];
	struct tally_zone *z;

	tally__zone_shared_path(path, sizeof(path), name);
	for (int i = 0; i < SHARED_TRIES; i++) {
		z = attach_shared(path);
		if (z) {
			if (tally__zone_register(z) == 0)
				return z;
			close(z->lockfd);
			tally__zone_close_locks(z);
			munmap(z->hdr, z->map_size);
			close(z->fd);
			free(z);
			return NULL;
		}
		if (errno != ENOENT)
			return NULL;
		z = tally__zone_create_new(name, o, g, nchunks);
		if (z || errno != EEXIST)
			return z;
	}
	tally__fail(EAGAIN, "shared zone %s: created and removed by others "
		    "%d times while this process tried to attach it", path,
		    SHARED_TRIES);
	return NULL;
}
