/*
 * reader.c: validating and walking segments from another process.
 *
 * Everything is read with pread(2) into the reader's own memory; nothing
 * is mapped.  That costs a copy, and buys three things: a hole is read as
 * zeros without allocating a page (a fault on a shared-memory hole would
 * allocate one), a file truncated under the reader gives a short read
 * instead of SIGBUS, and a value the reader checked cannot change under it
 * afterwards.  Every number taken from the file is checked before it is
 * used as an offset, a length or an index.
 *
 * A pass over the series goes in batches of BATCH records:
 *   1. copy the records (pread);
 *   2. read the chunks holding their values (lseek SEEK_DATA/SEEK_HOLE to
 *      find the pages that exist, pread of those pages only);
 *   3. copy the records again, and report a series only if both copies
 *      are equal with an even seq and the "live" state.
 * A series removed before step 2 finished changed its record (seq), so
 * the values of a reused block are never reported under the old name.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tally/metrics.h"
#include "tally/reader.h"

#define BATCH 512u
#define CACHE 8u
#define NO_PAGE 0xffffffffu
#define WORDS_PER_PAGE (TALLY__PAGE / 8u)

/* The resident pages of one chunk, as read in this batch. */
struct chunk_cache {
	uint64_t chunk;          /* UINT64_MAX: empty */
	uint32_t *pagemap;       /* chunk_pages entries: index in pages */
	uint32_t *present;       /* the page numbers that exist, ascending */
	uint32_t npresent;
	char *pages;             /* npresent pages */
	uint32_t cap;            /* pages allocated */
};

/* What a batch computed for one record. */
struct result {
	int ok;                  /* values computed */
	int bad;                 /* failed its checks: corrupt, or torn */
	int64_t value, sum;
	size_t percpu_at, buckets_at; /* offsets into the arenas */
};

#define MAX_LABELS (TALLY__LABELS_MAX / 4) /* "a\0\0b\0\0..." */

struct tally_seg {
	int fd;
	char path[PATH_MAX];
	struct tally__hdr hdr;
	uint64_t chunk_bytes;
	uint32_t chunk_pages;

	struct tally__family *fams;
	uint32_t nfams;          /* families read and validated */
	uint64_t fams_gen;

	struct tally__series *rec1, *rec2;
	struct result *res;
	int64_t *percpu_arena, *bucket_arena;
	size_t percpu_cap, bucket_cap, percpu_used, bucket_used;
	struct chunk_cache cache[CACHE];
	uint64_t last_chunk_base;   /* offset of the chunk of the last slot */
	uint64_t last_chunk;
	/* The labels of each record of a batch, as parsed. */
	const char *(*lnames)[MAX_LABELS], *(*lvalues)[MAX_LABELS];
};

static int corrupt(struct tally_seg *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Every message of the reader names the file. */
static int no_memory(const struct tally_seg *s)
{
	return tally__fail(ENOMEM, "%s: out of memory", s->path);
}

static int corrupt(struct tally_seg *s, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tally__fail(EINVAL, "%s: %s", s->path, msg);
}

/* Read exactly @n bytes at @off, or fail as a truncated file. */
static int read_at(struct tally_seg *s, void *buf, size_t n, uint64_t off)
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
		if (r == 0)
			return corrupt(s, "the file ends at %llu, before the "
				       "%zu bytes at offset %llu (truncated?)",
				       (unsigned long long)(off + done), n,
				       (unsigned long long)off);
		done += (size_t)r;
	}
	return 0;
}

static int region_ok(uint64_t off, uint64_t size, uint64_t file)
{
	return off % TALLY__PAGE == 0 && size % TALLY__PAGE == 0 &&
	       off <= file && size <= file - off;
}

static int validate_header(struct tally_seg *s, uint64_t st_size)
{
	struct tally__hdr *h = &s->hdr;
	uint64_t end;

	if (memcmp(h->magic, TALLY__MAGIC, 8))
		return corrupt(s, "not a tally segment (bad magic)");
	if (h->major != TALLY__FMT_MAJOR)
		return tally__fail(EPROTONOSUPPORT, "%s: format version "
				   "%u.%u; this reader knows version %u.x",
				   s->path, h->major, h->minor,
				   TALLY__FMT_MAJOR);
	if (h->byte_order != TALLY__BYTE_ORDER)
		return corrupt(s, "written with another byte order");
	if (h->header_size < sizeof(*h) || h->header_size > TALLY__PAGE)
		return corrupt(s, "header size %u is not %zu", h->header_size,
			       sizeof(*h));
	if (h->page_size != TALLY__PAGE || h->stride != TALLY__PAGE)
		return corrupt(s, "page size %u / stride %u, expected %u",
			       h->page_size, h->stride, TALLY__PAGE);
	if (h->nslabs < 1 || h->nslabs > TALLY__MAX_SLABS)
		return corrupt(s, "slab count %u out of range 1..%u",
			       h->nslabs, TALLY__MAX_SLABS);
	if (h->nnodes < 1 || h->nnodes > h->nslabs)
		return corrupt(s, "node count %u out of range 1..%u",
			       h->nnodes, h->nslabs);
	if (h->naux != TALLY__NAUX ||
	    h->chunk_pages != TALLY__NAUX + 2 * h->nslabs ||
	    h->chunk_slots != TALLY_CHUNK_SLOTS)
		return corrupt(s, "chunk geometry %u/%u/%u does not match "
			       "%u slabs", h->naux, h->chunk_pages,
			       h->chunk_slots, h->nslabs);
	if (h->meta_rec_size != sizeof(struct tally__chunk) ||
	    h->fam_rec_size != sizeof(struct tally__family) ||
	    h->desc_rec_size != sizeof(struct tally__series))
		return corrupt(s, "record sizes %u/%u/%u, expected %zu/%zu/%zu",
			       h->meta_rec_size, h->fam_rec_size,
			       h->desc_rec_size, sizeof(struct tally__chunk),
			       sizeof(struct tally__family),
			       sizeof(struct tally__series));
	if (h->file_size != st_size)
		return corrupt(s, "the file is %llu bytes, its header says "
			       "%llu (truncated or damaged)",
			       (unsigned long long)st_size,
			       (unsigned long long)h->file_size);
	if (h->nchunks < 1 || h->nchunks > (1ull << 23) ||
	    h->fam_cap < 1 || h->fam_cap > 65536 || h->desc_cap > (1u << 24) ||
	    h->hash_buckets == 0 || (h->hash_buckets & (h->hash_buckets - 1)))
		return corrupt(s, "capacities out of range (chunks %llu, "
			       "families %u, series %u)",
			       (unsigned long long)h->nchunks, h->fam_cap,
			       h->desc_cap);
	s->chunk_pages = h->chunk_pages;
	s->chunk_bytes = (uint64_t)h->chunk_pages * TALLY__PAGE;

	/* The regions, in file order, each inside the file, no overlaps. */
	struct {
		const char *name;
		uint64_t off, size, need;
	} r[] = {
		{ "node map", h->node_off, h->node_size,
		  (uint64_t)h->nslabs * 2 },
		{ "chunk table", h->meta_off, h->meta_size,
		  h->nchunks * sizeof(struct tally__chunk) },
		{ "family table", h->fam_off, h->fam_size,
		  (uint64_t)h->fam_cap * sizeof(struct tally__family) },
		{ "series table", h->desc_off, h->desc_size,
		  (uint64_t)h->desc_cap * sizeof(struct tally__series) },
		{ "index", h->hash_off, h->hash_size, 0 },
		{ "chunks", h->chunks_off, h->chunks_size,
		  h->nchunks * s->chunk_bytes },
	};
	end = TALLY__PAGE;
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		if (!region_ok(r[i].off, r[i].size, st_size) ||
		    r[i].off < end || r[i].size < r[i].need)
			return corrupt(s, "%s region (offset %llu, %llu bytes)"
				       " is out of place", r[i].name,
				       (unsigned long long)r[i].off,
				       (unsigned long long)r[i].size);
		end = r[i].off + r[i].size;
	}
	if (h->chunks_size != h->nchunks * s->chunk_bytes)
		return corrupt(s, "chunk region size does not match its chunks");
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
 * so that no other member of the group could have put it there.
 */
static int group_shared(const char *path, const struct stat *st)
{
	char dir[PATH_MAX];
	struct stat ds;
	char *slash;

	if (!in_my_groups(st->st_gid) || !(st->st_mode & S_IRGRP) ||
	    (st->st_mode & 022))
		return 0;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	return lstat(dir, &ds) == 0 && S_ISDIR(ds.st_mode) &&
	       ds.st_uid == st->st_uid && !(ds.st_mode & 022);
}

static struct tally_seg *open_fd(int fd, const char *path,
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
	for (unsigned i = 0; i < CACHE; i++)
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
	    !(opts && opts->allow_group && group_shared(path, &st))) {
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
	if (read_at(s, &s->hdr, sizeof(s->hdr), 0) < 0 ||
	    validate_header(s, (uint64_t)st.st_size) < 0)
		goto fail;
	s->rec1 = malloc(BATCH * sizeof(*s->rec1));
	s->rec2 = malloc(BATCH * sizeof(*s->rec2));
	s->res = malloc(BATCH * sizeof(*s->res));
	s->lnames = malloc(BATCH * sizeof(*s->lnames));
	s->lvalues = malloc(BATCH * sizeof(*s->lvalues));
	if (!s->rec1 || !s->rec2 || !s->res || !s->lnames || !s->lvalues) {
		no_memory(s);
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
	return open_fd(fd, name, opts);
}

struct tally_seg *tally_seg_open(const char *path,
				 const struct tally_open_opts *opts)
{
	int fd;

	if (!path) {
		tally__fail(EINVAL, "tally_seg_open: NULL path");
		return NULL;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		tally__fail(err, err == ELOOP ? "%s: a symbolic link; tally "
			    "does not follow them" : "%s: %s", path,
			    strerror(err));
		return NULL;
	}
	return open_fd(fd, path, opts);
}

void tally_seg_close(struct tally_seg *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	for (unsigned i = 0; i < CACHE; i++) {
		free(s->cache[i].pagemap);
		free(s->cache[i].present);
		free(s->cache[i].pages);
	}
	free(s->fams);
	free(s->rec1);
	free(s->rec2);
	free(s->res);
	free(s->percpu_arena);
	free(s->bucket_arena);
	free(s->lnames);
	free(s->lvalues);
	free(s);
}

/* The live header fields, re-read. */
static int read_live(struct tally_seg *s, uint64_t *gen, uint32_t *hwm,
		     uint32_t *nfam)
{
	struct tally__hdr live;
	size_t off = offsetof(struct tally__hdr, desc_gen);

	if (read_at(s, (char *)&live + off, 64, off) < 0)
		return -errno;
	*gen = *(uint64_t *)((char *)&live + off);
	*hwm = *(uint32_t *)((char *)&live + offsetof(struct tally__hdr,
						       series_hwm));
	*nfam = *(uint32_t *)((char *)&live + offsetof(struct tally__hdr,
						        fam_count));
	if (*hwm > s->hdr.desc_cap)
		*hwm = s->hdr.desc_cap;
	if (*nfam > s->hdr.fam_cap)
		*nfam = s->hdr.fam_cap;
	return 0;
}

/* The pool's live counters, for tally_seg_info(); zeros if unreadable. */
static void read_pool_live(struct tally_seg *s, struct tally_seg_info *info)
{
	struct tally__hdr live;
	size_t off = offsetof(struct tally__hdr, next_token);

	if (read_at(s, (char *)&live + off, 64, off) < 0)
		return;
	info->chunks_inuse = atomic_load_explicit(&live.chunks_inuse,
						  memory_order_relaxed);
	info->alloc_refused = atomic_load_explicit(&live.alloc_refused,
						   memory_order_relaxed);
	info->copies_refused = atomic_load_explicit(&live.copies_refused,
						    memory_order_relaxed);
	if (info->chunks_inuse > info->capacity_chunks)
		info->chunks_inuse = info->capacity_chunks;
}

static int alive(const struct tally__hdr *h)
{
	return tally__proc_alive(h->creator_pid, h->creator_start);
}

int tally_seg_info(struct tally_seg *s, struct tally_seg_info *info)
{
	struct stat st;
	uint32_t hwm, nfam;
	uint64_t gen;

	if (!s || !info)
		return tally__fail(EINVAL, "tally_seg_info: NULL argument");
	if (read_live(s, &gen, &hwm, &nfam) < 0)
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
	info->alive = alive(&s->hdr);
	info->in_use = tally__use_locked(s->fd);
	info->file_bytes = (uint64_t)st.st_size;
	info->resident_bytes = (uint64_t)st.st_blocks * 512u;
	info->series_used = hwm;
	info->families = nfam;
	info->generation = gen;
	info->capacity_chunks = s->hdr.nchunks;
	info->chunk_slots = s->hdr.chunk_slots;
	read_pool_live(s, info);
	return 0;
}

/* --- Families ---------------------------------------------------------- */

static int nul_within(const char *s, size_t cap, size_t len)
{
	return len < cap && s[len] == 0 && strlen(s) == len;
}

static unsigned family_slots(const struct tally__family *f)
{
	if (f->kind == TALLY__KIND_HISTOGRAM)
		return 1u + ((unsigned)(f->max_bits - f->sub_bits + 1) << f->sub_bits);
	return 1;
}

/* A family record that is stable (even seq) must be well formed. */
static int check_family(struct tally_seg *s, uint32_t i,
			const struct tally__family *f)
{
	if (f->state != 1 || f->kind < TALLY__KIND_COUNTER ||
	    f->kind > TALLY__KIND_HISTOGRAM || f->mode > TALLY_ADAPTIVE)
		return corrupt(s, "family %u: bad state, kind or mode", i);
	if (!nul_within(f->name, sizeof(f->name), f->name_len) ||
	    !tally__valid_metric_name(f->name))
		return corrupt(s, "family %u: bad metric name", i);
	if (!nul_within(f->unit, sizeof(f->unit), f->unit_len) ||
	    !tally__valid_unit(f->unit))
		return corrupt(s, "family %u: bad unit", i);
	if (!nul_within(f->help, sizeof(f->help), f->help_len) ||
	    !tally__valid_utf8(f->help, f->help_len))
		return corrupt(s, "family %u: bad help text", i);
	if (f->kind == TALLY__KIND_HISTOGRAM) {
		if (f->sub_bits < 1 || f->sub_bits > 7 ||
		    f->max_bits <= f->sub_bits || f->max_bits > 63 ||
		    family_slots(f) > TALLY_BLOCK_MAX_SLOTS)
			return corrupt(s, "family %u: bad histogram layout", i);
	} else if (f->sub_bits || f->max_bits) {
		return corrupt(s, "family %u: histogram bits on a %u", i,
			       f->kind);
	}
	return 0;
}

/* Read families [nfams, want) and keep those that are stable. */
static int load_families(struct tally_seg *s, uint32_t want)
{
	struct tally__family *f, again;
	uint32_t i;

	if (want <= s->nfams)
		return 0;
	f = realloc(s->fams, want * sizeof(*f));
	if (!f)
		return no_memory(s);
	s->fams = f;
	for (i = s->nfams; i < want; i++) {
		uint64_t off = s->hdr.fam_off + (uint64_t)i * sizeof(*f);

		if (read_at(s, &f[i], sizeof(*f), off) < 0 ||
		    read_at(s, &again, sizeof(again), off) < 0)
			return -errno;
		/* Being written: stop here, the next pass will see it. */
		if ((atomic_load_explicit(&f[i].seq, memory_order_relaxed) & 1) ||
		    memcmp(&f[i], &again, sizeof(again)))
			break;
		if (check_family(s, i, &f[i]) < 0)
			return -errno;
	}
	s->nfams = i;
	return 0;
}

/* --- Chunks ------------------------------------------------------------ */

struct run_arg {
	struct tally_seg *s;
	struct chunk_cache *c;
	uint64_t base;
	int err;
};

static void load_run(uint64_t off, uint64_t len, void *arg)
{
	struct run_arg *a = arg;
	struct chunk_cache *c = a->c;
	uint32_t first = (uint32_t)((off - a->base) / TALLY__PAGE);
	uint32_t n = (uint32_t)((len + TALLY__PAGE - 1) / TALLY__PAGE);

	if (a->err)
		return;
	if (first + n > a->s->chunk_pages || c->npresent + n > a->s->chunk_pages) {
		a->err = corrupt(a->s, "chunk pages out of range");
		return;
	}
	if (c->npresent + n > c->cap) {
		uint32_t cap = c->cap ? c->cap : 8;
		char *p;

		while (cap < c->npresent + n)
			cap *= 2;
		p = realloc(c->pages, (size_t)cap * TALLY__PAGE);
		if (!p) {
			a->err = no_memory(a->s);
			return;
		}
		c->pages = p;
		c->cap = cap;
	}
	/* A page that vanished since lseek reads as zeros: pread of a hole
	 * allocates nothing. */
	if (read_at(a->s, c->pages + (size_t)c->npresent * TALLY__PAGE,
		    (size_t)n * TALLY__PAGE, off) < 0) {
		a->err = -errno;
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		c->pagemap[first + i] = c->npresent;
		c->present[c->npresent++] = first + i;
	}
}

static struct chunk_cache *load_chunk(struct tally_seg *s, uint64_t chunk)
{
	struct chunk_cache *c = &s->cache[chunk % CACHE];
	struct run_arg a = { s, c, 0, 0 };
	int rc;

	if (c->chunk == chunk)
		return c;
	if (!c->pagemap) {
		c->pagemap = malloc(s->chunk_pages * sizeof(uint32_t));
		c->present = malloc(s->chunk_pages * sizeof(uint32_t));
		if (!c->pagemap || !c->present) {
			no_memory(s);
			return NULL;
		}
		memset(c->pagemap, 0xff, s->chunk_pages * sizeof(uint32_t));
		c->npresent = 0;
	}
	for (uint32_t i = 0; i < c->npresent; i++)
		c->pagemap[c->present[i]] = NO_PAGE;
	c->npresent = 0;
	c->chunk = UINT64_MAX;
	a.base = s->hdr.chunks_off + chunk * s->chunk_bytes;
	rc = tally__resident_runs(s->fd, a.base, s->chunk_bytes, load_run, &a);
	if (rc < 0 || a.err < 0) {
		if (rc < 0)
			tally__fail(-rc, "%s: cannot find the pages of chunk "
				    "%llu: %s", s->path,
				    (unsigned long long)chunk, strerror(-rc));
		return NULL;
	}
	c->chunk = chunk;
	return c;
}

static int64_t word(const struct chunk_cache *c, uint32_t pg, unsigned slot)
{
	uint32_t at = c->pagemap[pg];

	if (at == NO_PAGE)
		return 0;
	return ((const int64_t *)(c->pages + (size_t)at * TALLY__PAGE))[slot];
}

/* The value of slot @slot of a chunk for @mode (see tally__fold). */
static int64_t slot_value(struct tally_seg *s, const struct chunk_cache *c,
			  unsigned mode, unsigned slot, int64_t *percpu)
{
	uint64_t sum = 0, base = 0;

	for (uint32_t i = 0; i < c->npresent; i++) {
		uint32_t pg = c->present[i];

		tally__fold(pg, (uint64_t)word(c, pg, slot), mode,
			    s->hdr.nslabs, s->hdr.nnodes, &sum, &base, percpu);
	}
	return (int64_t)(sum - base);
}

static int64_t *arena_take(int64_t **arena, size_t *cap, size_t *used,
			   size_t n)
{
	if (*used + n > *cap) {
		size_t c = *cap ? *cap : 4096;
		int64_t *p;

		while (c < *used + n)
			c *= 2;
		p = realloc(*arena, c * sizeof(int64_t));
		if (!p)
			return NULL;
		*arena = p;
		*cap = c;
	}
	*used += n;
	return *arena + (*used - n);
}

/* --- Series ------------------------------------------------------------ */

/*
 * Check a stable series record; on success fill the chunk and slot, and
 * the batch's label pointers for record @i.
 */
static int check_series(struct tally_seg *s, uint32_t id, uint32_t i,
			const struct tally__series *r, uint64_t *chunk,
			unsigned *slot)
{
	const struct tally__hdr *h = &s->hdr;
	uint64_t rel, in;
	unsigned need = family_slots(&s->fams[r->family]);
	int n;

	if (r->nslots != need)
		return corrupt(s, "series %u: %u slots, its kind needs %u", id,
			       r->nslots, need);
	if (r->slot_off < h->chunks_off ||
	    r->slot_off - h->chunks_off >= h->chunks_size)
		return corrupt(s, "series %u: slot offset %llu outside the "
			       "chunks", id, (unsigned long long)r->slot_off);
	rel = r->slot_off - h->chunks_off;
	/* Series of one chunk tend to follow each other: skip the divide. */
	if (rel - s->last_chunk_base >= s->chunk_bytes) {
		s->last_chunk = rel / s->chunk_bytes;
		s->last_chunk_base = s->last_chunk * s->chunk_bytes;
	}
	in = rel - s->last_chunk_base;
	if (in < TALLY__PG_COPY0 * TALLY__PAGE ||
	    in >= (TALLY__PG_COPY0 + 1) * TALLY__PAGE || in % 8 ||
	    (in - TALLY__PG_COPY0 * TALLY__PAGE) / 8 + r->nslots >
		    TALLY_CHUNK_SLOTS)
		return corrupt(s, "series %u: slot offset %llu is not a "
			       "block", id, (unsigned long long)r->slot_off);
	if (r->labels_len > TALLY__LABELS_MAX)
		return corrupt(s, "series %u: labels of %u bytes", id,
			       r->labels_len);
	n = tally__labels_parse(r->labels, r->labels_len, s->lnames[i],
				s->lvalues[i], MAX_LABELS);
	if (n < 0 || (unsigned)n != r->nlabels)
		return corrupt(s, "series %u: labels are not well formed", id);
	*chunk = s->last_chunk;
	*slot = (unsigned)((in - TALLY__PG_COPY0 * TALLY__PAGE) / 8);
	return 0;
}

static int compute(struct tally_seg *s, uint32_t id, uint32_t i,
		   const struct tally__series *r, unsigned flags,
		   struct result *out)
{
	const struct tally__family *f;
	struct chunk_cache *c;
	uint64_t chunk = 0;
	unsigned slot = 0, nslabs = s->hdr.nslabs;
	int64_t *percpu = NULL;
	int rc;

	out->ok = 0;
	rc = check_series(s, id, i, r, &chunk, &slot);
	if (rc < 0)
		return rc;
	f = &s->fams[r->family];
	c = load_chunk(s, chunk);
	if (!c)
		return -errno;
	if (flags & TALLY_READ_PERCPU) {
		out->percpu_at = s->percpu_used;
		percpu = arena_take(&s->percpu_arena, &s->percpu_cap,
				    &s->percpu_used, nslabs);
		if (!percpu)
			return no_memory(s);
		memset(percpu, 0, nslabs * sizeof(int64_t));
	}
	if (f->kind != TALLY__KIND_HISTOGRAM) {
		out->value = slot_value(s, c, f->mode, slot, percpu);
	} else {
		unsigned nb = r->nslots - 1;
		int64_t *b;

		out->buckets_at = s->bucket_used;
		b = arena_take(&s->bucket_arena, &s->bucket_cap,
			       &s->bucket_used, nb);
		if (!b)
			return no_memory(s);
		out->sum = slot_value(s, c, f->mode, slot, NULL);
		{
			uint64_t count = 0; /* wraps, as the copies do */

			for (unsigned i = 0; i < nb; i++) {
				b[i] = slot_value(s, c, f->mode, slot + 1 + i,
						  percpu);
				count += (uint64_t)b[i];
			}
			out->value = (int64_t)count;
		}
	}
	out->ok = 1;
	return 0;
}

static int emit(struct tally_seg *s, uint32_t id, uint32_t i,
		const struct tally__series *r, const struct result *res,
		unsigned flags, tally_series_fn fn, void *arg)
{
	const struct tally__family *f = &s->fams[r->family];
	struct tally_series_view v;

	memset(&v, 0, sizeof(v));
	v.id = id;
	v.kind = f->kind;
	v.mode = f->mode;
	v.name = f->name;
	v.help = f->help;
	v.unit = f->unit;
	v.nlabels = r->nlabels;
	v.label_names = s->lnames[i];
	v.label_values = s->lvalues[i];
	v.value = res->value;
	if (flags & TALLY_READ_PERCPU) {
		v.percpu = s->percpu_arena + res->percpu_at;
		v.npercpu = s->hdr.nslabs;
	}
	if (f->kind == TALLY__KIND_HISTOGRAM) {
		v.sum = res->sum;
		v.sub_bits = f->sub_bits;
		v.max_bits = f->max_bits;
		v.nbuckets = r->nslots - 1;
		v.buckets = s->bucket_arena + res->buckets_at;
	}
	return fn(&v, arg);
}

/* The file must keep the size it had when it was checked. */
static int check_size(struct tally_seg *s)
{
	struct stat st;

	if (fstat(s->fd, &st) < 0)
		return tally__fail(errno, "%s: %s", s->path, strerror(errno));
	if ((uint64_t)st.st_size != s->hdr.file_size)
		return corrupt(s, "the file is now %lld bytes, not %llu: it "
			       "was truncated or replaced while open",
			       (long long)st.st_size,
			       (unsigned long long)s->hdr.file_size);
	return 0;
}

int tally_seg_foreach(struct tally_seg *s, unsigned flags, tally_series_fn fn,
		      void *arg)
{
	uint32_t hwm, nfam;
	uint64_t gen;
	int count = 0, rc;
	char badmsg[256] = "";

	if (!s || !fn)
		return tally__fail(EINVAL, "tally_seg_foreach: NULL argument");
	if (flags & ~TALLY_READ_PERCPU)
		return tally__fail(EINVAL, "unknown flags 0x%x", flags);
	if ((rc = check_size(s)) < 0 || (rc = read_live(s, &gen, &hwm, &nfam)) < 0)
		return rc;
	if ((rc = load_families(s, nfam)) < 0)
		return rc;

	for (uint32_t first = 0; first < hwm; first += BATCH) {
		uint32_t n = hwm - first < BATCH ? hwm - first : BATCH;
		uint64_t off = s->hdr.desc_off +
			       (uint64_t)first * sizeof(struct tally__series);
		size_t bytes = n * sizeof(struct tally__series);

		if ((rc = read_at(s, s->rec1, bytes, off)) < 0)
			return rc;
		for (unsigned i = 0; i < CACHE; i++)
			s->cache[i].chunk = UINT64_MAX;
		s->percpu_used = s->bucket_used = 0;
		for (uint32_t i = 0; i < n; i++) {
			const struct tally__series *r = &s->rec1[i];

			s->res[i].ok = 0;
			s->res[i].bad = 0;
			if ((atomic_load_explicit(&r->seq, memory_order_relaxed) & 1) ||
			    r->state != 1)
				continue;
			if (r->family >= s->hdr.fam_cap)
				return corrupt(s, "series %u: family %u does not "
					       "exist", first + i, r->family);
			/* A family newer than our copy: read it now. */
			if (r->family >= s->nfams &&
			    (rc = load_families(s, r->family + 1)) < 0)
				return rc;
			if (r->family >= s->nfams)
				continue; /* still being written */
			rc = compute(s, first + i, i, r, flags, &s->res[i]);
			if (rc == -EINVAL) {
				/* Corrupt, or copied while a writer changed
				 * it: the second copy tells which. */
				s->res[i].bad = 1;
				snprintf(badmsg, sizeof(badmsg), "%s",
					 tally_errmsg());
			} else if (rc < 0) {
				return rc;
			}
		}
		if ((rc = read_at(s, s->rec2, bytes, off)) < 0 ||
		    (rc = check_size(s)) < 0)
			return rc;
		for (uint32_t i = 0; i < n; i++) {
			int same = !memcmp(&s->rec1[i], &s->rec2[i],
					   sizeof(s->rec1[i]));

			if (s->res[i].bad && same)
				return tally__fail(EINVAL, "%s", badmsg);
			if (!s->res[i].ok || !same)
				continue;
			rc = emit(s, first + i, i, &s->rec1[i], &s->res[i],
				  flags, fn, arg);
			if (rc)
				return rc;
			count++;
		}
	}
	return count;
}

/* --- Histograms ------------------------------------------------------- */

void tally_histogram_bucket_bounds(unsigned b, unsigned sub_bits,
				   uint64_t *lo, uint64_t *hi)
{
	unsigned sub = 1u << sub_bits;
	unsigned e;
	uint64_t l, width;

	if (b < sub) {
		*lo = *hi = b;
		return;
	}
	e = b / sub + sub_bits - 1u; /* the highest set bit of its values */
	width = 1ull << (e - sub_bits);
	l = ((uint64_t)sub + (b % sub)) << (e - sub_bits);
	*lo = l;
	*hi = l + width - 1u;
}

int tally_histogram_quantile(const struct tally_series_view *v, double q,
			double *out)
{
	uint64_t lo, hi;
	double count = 0, rank, seen = 0;

	if (!v || !out || v->kind != TALLY_HISTOGRAM || !v->buckets ||
	    !(q >= 0.0 && q <= 1.0))
		return tally__fail(EINVAL, "tally_histogram_quantile: not a "
				   "histogram, or q outside [0, 1]");
	/* In doubles: counts read from a file may add up past 2^63.  A
	 * negative bucket (torn by a racing zero) counts as empty. */
	for (unsigned b = 0; b < v->nbuckets; b++)
		if (v->buckets[b] > 0)
			count += (double)v->buckets[b];
	if (count <= 0)
		return tally__fail(ENODATA, "no observations");
	rank = q * count; /* seen only takes whole values: no ceil needed */
	if (rank < 1)
		rank = 1;
	for (unsigned b = 0; b < v->nbuckets; b++) {
		if (v->buckets[b] <= 0)
			continue;
		seen += (double)v->buckets[b];
		if (seen >= rank) {
			tally_histogram_bucket_bounds(b, v->sub_bits, &lo, &hi);
			*out = q >= 1.0 ? (double)hi :
					  ((double)lo + (double)hi) / 2.0;
			return 0;
		}
	}
	return tally__fail(ENODATA, "no observations");
}

/* --- Directories ------------------------------------------------------ */

/* What clean-up removes, and whom it tells. */
struct cleanup {
	tally_clean_fn fn;
	void *arg;
};

#define TMP_ORPHAN_AGE 10 /* seconds: older unlocked temporaries are dead */

/*
 * A temporary file of a zone being created (*.tally.tmp): its creator
 * holds a write lock on byte 1 from the moment it exists until it is
 * published (zone.c).  Nobody holding it, and a few seconds old (so that
 * the instant between open and lock is no risk), it is an orphan.
 */
static int orphaned_tmp(const char *path)
{
	struct flock fl;
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK),
	    orphan = 0;

	if (fd < 0)
		return 0;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = 1;
	fl.l_len = 1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid() && time(NULL) - st.st_mtime > TMP_ORPHAN_AGE &&
	    fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK)
		orphan = 1;
	close(fd);
	return orphan;
}

static int has_suffix(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n > k && strcmp(s + n - k, suffix) == 0;
}

static int dir_walk(const char *dir, int pid, const struct tally_open_opts *opts,
		    tally_seg_fn fn, void *arg, const struct cleanup *cleanup)
{
	char path[PATH_MAX], suffix[32];
	struct dirent *e;
	struct stat st;
	int count = 0, rc = 0;
	DIR *d;

	if (!dir) {
		tally__init();
		dir = tally__env.dir;
	}
	if (lstat(dir, &st) < 0)
		return tally__fail(errno, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return tally__fail(ENOTDIR, "%s: not a directory%s", dir,
				   S_ISLNK(st.st_mode) ?
					   " (a symbolic link)" : "");
	d = opendir(dir);
	if (!d)
		return tally__fail(errno, "%s: %s", dir, strerror(errno));
	snprintf(suffix, sizeof(suffix), ".%d.tally", pid);
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		const char *want = pid > 0 ? suffix : ".tally";
		size_t wn = strlen(want);
		struct tally_seg *s;

		if (cleanup && has_suffix(e->d_name, n, ".tally.tmp") &&
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) <
			    (int)sizeof(path) &&
		    orphaned_tmp(path) && unlink(path) == 0) {
			if (cleanup->fn)
				cleanup->fn(path, "a temporary file whose "
					    "creator died", cleanup->arg);
			count++;
			continue;
		}
		if (n <= wn || strcmp(e->d_name + n - wn, want))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
		    (int)sizeof(path))
			continue;
		s = tally_seg_open(path, opts);
		if (cleanup) {
			if (s && !(s->hdr.flags & TALLY__HDR_PERSIST) &&
			    !alive(&s->hdr) && !tally__use_locked(s->fd) &&
			    unlink(path) == 0) {
				if (cleanup->fn)
					cleanup->fn(path, "its processes are "
						    "gone", cleanup->arg);
				count++;
			}
			tally_seg_close(s);
			continue;
		}
		rc = fn(path, s, s ? NULL : tally_errmsg(), arg);
		if (s)
			count++;
		tally_seg_close(s);
		if (rc)
			break;
	}
	closedir(d);
	return rc ? rc : count;
}

int tally_dir_foreach(const char *dir, const struct tally_open_opts *opts,
		      tally_seg_fn fn, void *arg)
{
	if (!fn)
		return tally__fail(EINVAL, "tally_dir_foreach: NULL function");
	return dir_walk(dir, 0, opts, fn, arg, NULL);
}

int tally_seg_foreach_pid(const char *dir, int pid,
			  const struct tally_open_opts *opts, tally_seg_fn fn,
			  void *arg)
{
	if (!fn || pid <= 0)
		return tally__fail(EINVAL, "tally_seg_foreach_pid: bad "
				   "arguments");
	return dir_walk(dir, pid, opts, fn, arg, NULL);
}

int tally_dir_cleanup(const char *dir)
{
	return tally_dir_cleanup_report(dir, NULL, NULL);
}

int tally_dir_cleanup_report(const char *dir, tally_clean_fn fn, void *arg)
{
	struct cleanup c = { fn, arg };

	return dir_walk(dir, 0, NULL, NULL, NULL, &c);
}
