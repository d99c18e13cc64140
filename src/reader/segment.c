/*
 * segment.c: opening a segment from another process and checking it.
 *
 * Everything is read with pread(2) into the reader's own memory; nothing
 * is mapped.  That costs a copy, and buys three things: a hole is read as
 * zeros without allocating a page (a fault on a shared-memory hole would
 * allocate one), a file truncated under the reader gives a short read
 * instead of SIGBUS, and a value the reader checked cannot change under it
 * afterwards.  Every number taken from the file is checked before it is
 * used as an offset, a length or an index.  The owner is checked too:
 * another user's file only with allow_uid or allow_group.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader/segment.h"

int tally__seg_no_memory(const struct tally_seg *s)
{
	return tally__fail(ENOMEM, "%s: out of memory", s->path);
}

int tally__seg_corrupt(struct tally_seg *s, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tally__fail(EINVAL, "%s: %s", s->path, msg);
}

int tally__seg_read_at(struct tally_seg *s, void *buf, size_t n, uint64_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = pread(s->fd, (char *)buf + done, n - done,
				  (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return tally__fail(errno, "%s: read error: %s", s->path,
					   strerror(errno));
		s->bytes_read += (uint64_t)(r > 0 ? r : 0);
		if (r == 0)
			return tally__seg_corrupt(s, "the file ends at %llu, before the "
				       "%zu bytes at offset %llu (truncated?)",
				       (unsigned long long)(off + done), n,
				       (unsigned long long)off);
		done += (size_t)r;
	}
	return 0;
}

static int check_regions(struct tally_seg *s, uint64_t st_size);

/* The header's own fields: what the file is and how it is laid out. */
static int validate_header(struct tally_seg *s, uint64_t st_size)
{
	struct tally__hdr *h = &s->hdr;

	if (memcmp(h->magic, TALLY__MAGIC, 8))
		return tally__seg_corrupt(s, "not a tally segment (bad magic)");
	if (h->major != TALLY__FMT_MAJOR)
		return tally__fail(EPROTONOSUPPORT, "%s: format version "
				   "%u.%u; this reader knows version %u.x",
				   s->path, h->major, h->minor,
				   TALLY__FMT_MAJOR);
	if (h->byte_order != TALLY__BYTE_ORDER)
		return tally__seg_corrupt(s, "written with another byte order");
	if (h->header_size < sizeof(*h) || h->header_size > TALLY__PAGE)
		return tally__seg_corrupt(s, "header size %u is not %zu", h->header_size,
			       sizeof(*h));
	if (h->page_size != TALLY__PAGE || h->stride != TALLY__PAGE)
		return tally__seg_corrupt(s, "page size %u / stride %u, expected %u",
			       h->page_size, h->stride, TALLY__PAGE);
	if (h->nslabs < 1 || h->nslabs > TALLY__MAX_SLABS)
		return tally__seg_corrupt(s, "slab count %u out of range 1..%u",
			       h->nslabs, TALLY__MAX_SLABS);
	if (h->nnodes < 1 || h->nnodes > h->nslabs)
		return tally__seg_corrupt(s, "node count %u out of range 1..%u",
			       h->nnodes, h->nslabs);
	if (h->naux != TALLY__NAUX ||
	    h->chunk_pages != tally__chunk_pages(h->nslabs) ||
	    h->chunk_slots != TALLY_CHUNK_SLOTS)
		return tally__seg_corrupt(s, "chunk geometry %u/%u/%u does not match "
			       "%u slabs", h->naux, h->chunk_pages,
			       h->chunk_slots, h->nslabs);
	if (h->meta_rec_size != sizeof(struct tally__chunk) ||
	    h->metric_rec_size != sizeof(struct tally__metric_rec) ||
	    h->series_rec_size != sizeof(struct tally__series))
		return tally__seg_corrupt(s, "record sizes %u/%u/%u, expected %zu/%zu/%zu",
			       h->meta_rec_size, h->metric_rec_size,
			       h->series_rec_size, sizeof(struct tally__chunk),
			       sizeof(struct tally__metric_rec),
			       sizeof(struct tally__series));
	if (h->file_size != st_size)
		return tally__seg_corrupt(s, "the file is %llu bytes, its header says "
			       "%llu (truncated or damaged)",
			       (unsigned long long)st_size,
			       (unsigned long long)h->file_size);
	if (h->nchunks < 1 || h->nchunks > (1ull << 23) ||
	    h->metric_cap < 1 || h->metric_cap > 65536 || h->series_cap > (1u << 24) ||
	    h->hash_buckets == 0 || (h->hash_buckets & (h->hash_buckets - 1)))
		return tally__seg_corrupt(s, "capacities out of range (chunks "
					  "%llu, metric records %u, series %u)",
					  (unsigned long long)h->nchunks,
					  h->metric_cap, h->series_cap);
	return check_regions(s, st_size);
}

/*
 * The regions, in file order, each on whole pages inside the file, none
 * overlapping the one before, each large enough for what the header says
 * it holds.  tally's writers place them where tally__geometry() says
 * (src/layout.h); a reader accepts any placement that keeps these rules,
 * so that another writer (or a compacted copy) can be read too.
 */
static int check_regions(struct tally_seg *s, uint64_t st_size)
{
	struct tally__hdr *h = &s->hdr;
	uint64_t end = TALLY__PAGE;

	s->chunk_pages = h->chunk_pages;
	s->chunk_bytes = (uint64_t)h->chunk_pages * TALLY__PAGE;
	struct {
		const char *name;
		uint64_t off, size, need;
	} r[] = {
		{ "node map", h->node_off, h->node_size,
		  (uint64_t)h->nslabs * 2 },
		{ "chunk table", h->meta_off, h->meta_size,
		  h->nchunks * sizeof(struct tally__chunk) },
		{ "metric record table", h->metric_off, h->metric_size,
		  (uint64_t)h->metric_cap * sizeof(struct tally__metric_rec) },
		{ "series table", h->series_off, h->series_size,
		  (uint64_t)h->series_cap * sizeof(struct tally__series) },
		{ "index", h->hash_off, h->hash_size, 0 },
		{ "chunks", h->chunks_off, h->chunks_size,
		  h->nchunks * s->chunk_bytes },
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		if (r[i].off % TALLY__PAGE || r[i].size % TALLY__PAGE ||
		    r[i].off > st_size || r[i].size > st_size - r[i].off ||
		    r[i].off < end || r[i].size < r[i].need)
			return tally__seg_corrupt(
				s, "%s region (offset %llu, %llu bytes) is out "
				"of place", r[i].name,
				(unsigned long long)r[i].off,
				(unsigned long long)r[i].size);
		end = r[i].off + r[i].size;
	}
	if (h->chunks_size != h->nchunks * s->chunk_bytes)
		return tally__seg_corrupt(s, "chunk region size does not match "
					  "its chunks");
	h->proc_name[sizeof(h->proc_name) - 1] = 0;
	h->zone_name[sizeof(h->zone_name) - 1] = 0;
	return 0;
}

static int in_my_groups(gid_t gid)
{
	gid_t groups[256];
	int n;

	if (gid == getegid())
		return 1;
	n = getgroups(256, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

/*
 * Another user's file, shared with a group of this process (TALLY_GROUP
 * on the writer's side): readable by the group, writable by nobody but its
 * owner, in a directory of the same owner that nobody else can write to,
 * so that no other member of the group could have put it there.  @dir is
 * the directory the file was opened in, by its descriptor: the one that
 * holds the file, not whatever its path names now.
 */
static int group_shared(const struct stat *dir, const struct stat *st)
{
	if (!in_my_groups(st->st_gid) || !(st->st_mode & S_IRGRP) ||
	    (st->st_mode & 022))
		return 0;
	return dir && S_ISDIR(dir->st_mode) && dir->st_uid == st->st_uid &&
	       !(dir->st_mode & 022);
}

int tally__dir_allowed(const struct stat *st, const char *dir,
		       const struct tally_open_opts *opts)
{
	long allow = opts ? opts->allow_uid : -1;
	int group = opts && opts->allow_group;

	if (st->st_uid != geteuid() &&
	    (allow < 0 || st->st_uid != (uid_t)allow) &&
	    !(group && in_my_groups(st->st_gid)))
		return tally__fail(EPERM, "%s: the directory is owned by uid "
				   "%u, not by this user (uid %u)%s; tally "
				   "reads only directories of their writers",
				   dir, (unsigned)st->st_uid,
				   (unsigned)geteuid(),
				   group ? ", and its group is not one of "
				   "this process's" : " (see allow_uid, "
				   "--allow-uid, --allow-group)");
	if (st->st_mode & 022)
		return tally__fail(EPERM, "%s: the directory is writable by "
				   "%s (mode %o): anybody there could plant "
				   "or swap segment files; tally reads only "
				   "directories that nobody but their owner "
				   "can write to", dir,
				   st->st_mode & 002 ? "others" : "its group",
				   (unsigned)(st->st_mode & 07777));
	return 0;
}

static struct tally_seg *open_fd(int fd, const char *path,
				 const struct stat *dir,
				 const struct tally_open_opts *opts)
{
	struct tally_seg *s;
	struct stat st;
	long allow = opts ? opts->allow_uid : -1;

	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		tally__fail(ENOMEM, "%s: out of memory", path);
		return NULL;
	}
	s->fd = fd;
	snprintf(s->path, sizeof(s->path), "%s", path);
	for (unsigned i = 0; i < 2 * CACHE; i++)
		s->cache[i].chunk = UINT64_MAX;
	s->last_chunk_base = UINT64_MAX / 2;
	if (fstat(fd, &st) < 0) {
		tally__fail(errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		tally__fail(EINVAL, "%s: not a regular file", path);
		goto fail;
	}
	if (st.st_uid != geteuid() && (allow < 0 || st.st_uid != (uid_t)allow) &&
	    !(opts && opts->allow_group && group_shared(dir, &st))) {
		tally__fail(EPERM, "%s: owned by uid %u, not by this user "
			    "(uid %u)%s", path, (unsigned)st.st_uid,
			    (unsigned)geteuid(),
			    opts && opts->allow_group ?
				    ", and not shared safely with a group of "
				    "this process (see TALLY_GROUP)" : "");
		goto fail;
	}
	if ((uint64_t)st.st_size < TALLY__PAGE) {
		tally__fail(EINVAL, "%s: %lld bytes, too short for a segment",
			    path, (long long)st.st_size);
		goto fail;
	}
	if (tally__seg_read_at(s, &s->hdr, sizeof(s->hdr), 0) < 0 ||
	    validate_header(s, (uint64_t)st.st_size) < 0)
		goto fail;
	s->rec1 = malloc(BATCH * sizeof(*s->rec1));
	s->rec2 = malloc(BATCH * sizeof(*s->rec2));
	s->res = malloc(BATCH * sizeof(*s->res));
	s->lnames = malloc(BATCH * sizeof(*s->lnames));
	s->lvalues = malloc(BATCH * sizeof(*s->lvalues));
	if (!s->rec1 || !s->rec2 || !s->res || !s->lnames || !s->lvalues) {
		tally__seg_no_memory(s);
		goto fail;
	}
	return s;
fail:
	tally_seg_close(s);
	return NULL;
}

struct tally_seg *tally__seg_open_fd(int fd, const char *name,
				     const struct tally_open_opts *opts)
{
	return open_fd(fd, name, NULL, opts);
}

struct tally_seg *tally__seg_openat(int dfd, const struct stat *dir,
				    const char *name, const char *path,
				    const struct tally_open_opts *opts)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
				   O_CLOEXEC);

	if (fd < 0) {
		int err = errno;
		struct stat st;

		/* Another user's file this one may not read: most often a
		 * writer that was to share it and was started without
		 * TALLY_GROUP (0600). */
		if (err == EACCES && fstatat(dfd, name, &st,
					     AT_SYMLINK_NOFOLLOW) == 0 &&
		    st.st_uid != geteuid()) {
			tally__fail(err, "%s: permission denied: uid %u's, "
				    "mode %04o, group %u; a writer shares its "
				    "segments with a group (0640) only when "
				    "started with TALLY_GROUP", path,
				    (unsigned)st.st_uid,
				    (unsigned)(st.st_mode & 07777),
				    (unsigned)st.st_gid);
			return NULL;
		}
		tally__fail(err, err == ELOOP ? "%s: a symbolic link; tally "
			    "does not follow them" : "%s: %s", path,
			    strerror(err));
		return NULL;
	}
	return open_fd(fd, path, dir, opts);
}

/*
 * The directory part of @path is opened first and the file in it by
 * name, so that the directory whose owner and mode decide a group-shared
 * file (group_shared) is the one that holds the file.
 */
struct tally_seg *tally_seg_open(const char *path,
				 const struct tally_open_opts *opts)
{
	char dir[PATH_MAX];
	const char *base;
	struct tally_seg *s;
	struct stat ds;
	int dfd;

	tally__ok();
	if (!path) {
		tally__fail(EINVAL, "tally_seg_open: NULL path");
		return NULL;
	}
	base = strrchr(path, '/');
	if (!base) {
		snprintf(dir, sizeof(dir), ".");
		base = path;
	} else {
		snprintf(dir, sizeof(dir), "%.*s",
			 base == path ? 1 : (int)(base - path), path);
		base++;
	}
	if (!*base)
		base = ".";
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		tally__fail(errno, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(dfd, &ds) < 0) {
		tally__fail(errno, "%s: %s", path, strerror(errno));
		close(dfd);
		return NULL;
	}
	s = tally__seg_openat(dfd, &ds, base, path, opts);
	close(dfd);
	return s;
}

void tally_seg_close(struct tally_seg *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	for (unsigned i = 0; i < 2 * CACHE; i++) {
		free(s->cache[i].pagemap);
		free(s->cache[i].present);
		free(s->cache[i].pages);
	}
	tally__pg_free(s);
	tally__es_free(s);
	free(s->mrecs);
	free(s->rec1);
	free(s->rec2);
	free(s->res);
	free(s->percpu_arena);
	free(s->bucket_arena);
	free(s->lnames);
	free(s->lvalues);
	free(s->ltext);
	free(s);
}

int tally__seg_read_live(struct tally_seg *s, uint64_t *gen, uint32_t *hwm,
		     uint32_t *nmrec)
{
	struct tally__hdr live;
	size_t off = offsetof(struct tally__hdr, series_gen);

	if (tally__seg_read_at(s, (char *)&live + off, 64, off) < 0)
		return -errno;
	*gen = *(uint64_t *)((char *)&live + off);
	*hwm = *(uint32_t *)((char *)&live + offsetof(struct tally__hdr,
						       series_hwm));
	*nmrec = *(uint32_t *)((char *)&live + offsetof(struct tally__hdr,
						        metric_count));
	_Static_assert(offsetof(struct tally__hdr, redefinitions) + 8 <=
			       offsetof(struct tally__hdr, series_gen) + 64,
		       "the descriptor table's live fields are read at once");
	s->live_metric_changes = *(uint32_t *)((char *)&live +
		offsetof(struct tally__hdr, metric_changes));
	s->live_redefinitions = *(uint64_t *)((char *)&live +
		offsetof(struct tally__hdr, redefinitions));
	if (*hwm > s->hdr.series_cap)
		*hwm = s->hdr.series_cap;
	if (*nmrec > s->hdr.metric_cap)
		*nmrec = s->hdr.metric_cap;
	return 0;
}

/* The pool's live counters, for tally_seg_info(); zeros if unreadable. */
static void read_pool_live(struct tally_seg *s, struct tally_seg_info *info)
{
	struct tally__hdr live;
	size_t off = offsetof(struct tally__hdr, next_token);

	if (tally__seg_read_at(s, (char *)&live + off, 64, off) < 0)
		return;
	info->chunks_inuse = atomic_load_explicit(&live.chunks_inuse,
						  memory_order_relaxed);
	info->alloc_refused = atomic_load_explicit(&live.alloc_refused,
						   memory_order_relaxed);
	info->copies_refused = atomic_load_explicit(&live.copies_refused,
						    memory_order_relaxed);
	info->register_failed = atomic_load_explicit(&live.register_failed,
						     memory_order_relaxed);
	if (info->chunks_inuse > info->capacity_chunks)
		info->chunks_inuse = info->capacity_chunks;
}

/*
 * A segment is alive while its creator runs.  Files of format 2.0 predate
 * the locks: for them only the pid and its start time can tell, as they
 * always did.  From 2.1 on the creator holds the creator lock, which
 * belongs to the file, so a writer in another PID namespace (whose pid
 * means another process here, or none) is judged right.  Up to 2.5 it is
 * a read lock, which any reader could hold too; from 2.6 on it is a
 * write lock, which a reader cannot take (it opens the file read-only),
 * and in a shared zone any write lock on the file (the presence of any
 * user) makes it alive (docs/FORMAT.md).
 */
int tally__seg_alive(const struct tally_seg *s)
{
	if (s->hdr.minor < TALLY__FMT_MINOR_CREATOR_LOCK)
		return tally__proc_alive(s->hdr.creator_pid,
					 s->hdr.creator_start);
	if (s->hdr.minor >= TALLY__FMT_MINOR_LOCK_FILE)
		return (s->hdr.flags & TALLY__HDR_SHARED) ?
			       tally__write_held(s->fd, 0, 0) :
			       tally__write_held(s->fd,
						 TALLY__CREATOR_LOCK_BYTE, 1);
	return tally__creator_locked(s->fd);
}

/* Does any process use the segment (its creator, a child of it, another
 * process attached to its shared zone)?  From 2.6 on, any write lock on
 * the file says so; the use locks lie in the writers' lock file, which
 * clean-up reads (directory.c). */
static int seg_in_use(const struct tally_seg *s)
{
	if (s->hdr.minor >= TALLY__FMT_MINOR_LOCK_FILE)
		return tally__write_held(s->fd, 0, 0);
	return tally__use_locked(s->fd);
}

int tally__seg_used(const struct tally_seg *s)
{
	return seg_in_use(s) || tally__seg_alive(s);
}

int tally_seg_info(struct tally_seg *s, struct tally_seg_info *info)
{
	struct stat st;
	uint32_t hwm, nmrec;
	uint64_t gen;

	tally__ok();
	if (!s || !info)
		return tally__fail(EINVAL, "tally_seg_info: NULL argument");
	if (tally__seg_read_live(s, &gen, &hwm, &nmrec) < 0)
		return -errno;
	if (fstat(s->fd, &st) < 0)
		return tally__fail(errno, "%s: %s", s->path, strerror(errno));
	memset(info, 0, sizeof(*info));
	info->path = s->path;
	info->pid = s->hdr.creator_pid;
	info->start_ticks = s->hdr.creator_start;
	info->created_ns = s->hdr.created_ns;
	memcpy(info->proc_name, s->hdr.proc_name, sizeof(info->proc_name));
	memcpy(info->zone_name, s->hdr.zone_name, sizeof(info->zone_name));
	info->major = s->hdr.major;
	info->minor = s->hdr.minor;
	info->nslabs = s->hdr.nslabs;
	info->nnodes = s->hdr.nnodes;
	info->alive = tally__seg_alive(s);
	info->in_use = seg_in_use(s);
	info->shared = !!(s->hdr.flags & TALLY__HDR_SHARED);
	info->file_bytes = (uint64_t)st.st_size;
	info->resident_bytes = (uint64_t)st.st_blocks * 512u;
	info->series_used = hwm;
	info->families = nmrec;
	info->generation = gen;
	info->redefinitions = s->live_redefinitions;
	info->capacity_chunks = s->hdr.nchunks;
	info->chunk_slots = s->hdr.chunk_slots;
	read_pool_live(s, info);
	return 0;
}
