/*
 * test-reader-corrupt.c: the segment reader refuses damaged files.
 *
 * A valid segment is written by a child process (4 slabs, 2 nodes, every
 * kind of series); each test copies it (with its holes) and damages the
 * copy: every header field set to a wrong value, every region moved out
 * of place, the file cut at every region boundary and at odd offsets,
 * series and metric records broken field by field, random bytes flipped.
 * Every case must give NULL or a negative errno, with a tally_errmsg()
 * that names the file, and must not crash (the ASan build checks that no
 * read goes astray); the undamaged file must still open and read right.
 * Files that are not segments at all (empty, text, a directory, a FIFO,
 * a character device) are refused too, and promptly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "core/core.h"
#include "snap.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define NSLABS 4
#define NNODES 2

/* What the writer of the fixture tells the tests. */
struct fixture {
	char path[PATH_MAX];
	uint32_t counter, gauge, set, hist, removed; /* record indices */
	int nlive;
};

static struct fixture *fx;
static char work[PATH_MAX + 32];

static void write_fixture(void *arg)
{
	struct fixture *f = arg;
	struct tally_zone_opts o = { 4 * TALLY_CHUNK_SLOTS, 32,
				     TALLY_ZONE_PERSIST };
	struct tally_label l[2] = { { "b", "x" }, { "a", "1" } };
	struct tally_metric_desc d;
	struct tally_zone *z;
	tally_metric c, g, s, h, r;

	setenv("TALLY_NSLABS", "4", 1);
	setenv("TALLY_NODES", "2", 1);
	z = tally_zone_create("fixture", &o);
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	snprintf(f->path, sizeof(f->path), "%s", tally_zone_path(z));
	d = desc(TALLY_COUNTER, "c_total");
	d.help = "A counter.";
	d.unit = "bytes";
	reg(z, d, l, 2, &c);
	reg(z, desc(TALLY_GAUGE, "g"), NULL, 0, &g);
	reg(z, desc(TALLY_COUNTER, "removed_total"), NULL, 0, &r);
	reg(z, desc(TALLY_GAUGE_SET, "gs"), NULL, 0, &s);
	d = desc(TALLY_HISTOGRAM, "h");
	d.hist_sub_bits = 2;
	d.hist_max_bits = 8;
	reg(z, d, NULL, 0, &h);
	tally_counter_add(counter_of(&c), 42);
	tally_gauge_add(gauge_of(&g), -5);
	tally_setgauge_set(setgauge_of(&s), 7);
	tally_counter_add(counter_of(&r), 1);
	for (uint64_t v = 0; v < 300; v += 3)
		tally_histogram_observe(histogram_of(&h), v);
	f->counter = c.series;
	f->gauge = g.series;
	f->set = s.series;
	f->hist = h.series;
	f->removed = r.series;
	CHECK_EQ(tally_metric_remove(&r), 0);
	f->nlive = 4;
}

static int has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

/* Writes the fixture (once per test: each test is its own process). */
static void setup(void)
{
	fx = shared_mem(sizeof(*fx));
	CHECK_CHILD_OK(harness_child(write_fixture, fx));
	snprintf(work, sizeof(work), "%s/work.1.tally", harness_dir());
}

static struct tally__hdr pristine_hdr(void)
{
	struct tally__hdr h;
	int fd = open(fx->path, O_RDONLY);

	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	return h;
}

static void patch(const char *path, uint64_t off, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY);

	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, p, n, (off_t)off), (ssize_t)n);
	close(fd);
}

static int count_cb(const struct tally_series_view *v, void *arg)
{
	(void)v;
	++*(int *)arg;
	return 0;
}

/* Everything a view holds is touched, so that ASan sees any bad read. */
static int touch_cb(const struct tally_series_view *v, void *arg)
{
	size_t n = strlen(v->name) + strlen(v->help) + strlen(v->unit);
	double q;

	for (unsigned i = 0; i < v->nlabels; i++)
		n += strlen(v->label_names[i]) + strlen(v->label_values[i]);
	for (unsigned i = 0; i < v->npercpu; i++)
		n += (size_t)v->percpu[i];
	for (unsigned i = 0; i < v->nbuckets; i++)
		n += (size_t)v->buckets[i];
	if (v->kind == TALLY_HISTOGRAM) {
		tally_histogram_quantile(v, 0.5, &q);
		tally_histogram_quantile(v, 1.0, &q);
	}
	*(size_t *)arg += n;
	return 0;
}

/* The series a valid file must give. */
struct expect {
	int n;
	int64_t c, g, s, hcount, hsum;
};

static int expect_cb(const struct tally_series_view *v, void *arg)
{
	struct expect *e = arg;

	e->n++;
	if (!strcmp(v->name, "c_total")) {
		e->c = v->value;
		CHECK_EQ(v->nlabels, 2);
		CHECK(!strcmp(v->label_names[0], "a"));
		CHECK(!strcmp(v->label_values[1], "x"));
		CHECK(!strcmp(v->help, "A counter."));
		CHECK(!strcmp(v->unit, "bytes"));
	} else if (!strcmp(v->name, "g")) {
		e->g = v->value;
	} else if (!strcmp(v->name, "gs")) {
		e->s = v->value;
	} else if (!strcmp(v->name, "h")) {
		e->hcount = v->value;
		e->hsum = v->sum;
		CHECK_EQ(v->nbuckets, 28);
	} else {
		harness_fail(__FILE__, __LINE__, "unexpected series %s",
			     v->name);
	}
	return 0;
}

static void expect_valid(const char *path)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	struct expect e;

	if (!s)
		harness_fail(__FILE__, __LINE__, "valid file refused: %s",
			     tally_errmsg());
	memset(&e, 0, sizeof(e));
	CHECK_EQ(tally_seg_foreach(s, TALLY_READ_PERCPU, expect_cb, &e), 4);
	CHECK_EQ(e.n, 4);
	CHECK_EQ(e.c, 42);
	CHECK_EQ(e.g, -5);
	CHECK_EQ(e.s, 7);
	CHECK_EQ(e.hcount, 100);
	CHECK_EQ(e.hsum, 14850);
	tally_seg_close(s);
}

/*
 * @path must be refused by tally_seg_open() (when @at_open) or else by
 * tally_seg_foreach(), with @err (0: any) and a message naming the file.
 */
static void expect_bad(const char *what, const char *path, int err,
		       int at_open)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	int rc, e;
	size_t sink = 0;

	if (s && at_open)
		harness_fail(__FILE__, __LINE__, "%s: opened", what);
	if (s) {
		rc = tally_seg_foreach(s, TALLY_READ_PERCPU, touch_cb, &sink);
		e = errno;
		if (rc >= 0) {
			tally_seg_close(s);
			harness_fail(__FILE__, __LINE__, "%s: read %d series "
				     "without an error", what, rc);
		}
		CHECK_EQ(rc, -e);
		/* It stays refused on the next pass. */
		CHECK(tally_seg_foreach(s, 0, touch_cb, &sink) < 0);
		tally_seg_close(s);
	} else {
		e = errno;
	}
	if (err && e != err)
		harness_fail(__FILE__, __LINE__, "%s: errno %d (%s), expected "
			     "%d", what, e, tally_errmsg(), err);
	if (e == 0)
		harness_fail(__FILE__, __LINE__, "%s: errno 0", what);
	if (!has(tally_errmsg(), path))
		harness_fail(__FILE__, __LINE__, "%s: message \"%s\" does not "
			     "name the file", what, tally_errmsg());
	if (getenv("TALLY_TEST_VERBOSE"))
		printf("  %-40s %s\n", what, tally_errmsg());
}

/*
 * @path holds one corrupt record: tally_seg_foreach() reads the @left
 * other series, and tally_seg_skipped() counts the record and names the
 * file and the record, on this pass and the next.
 */
static void expect_skipped(const char *what, const char *path, int left)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	const char *msg = NULL;
	size_t sink = 0;
	int rc;

	if (!s)
		harness_fail(__FILE__, __LINE__, "%s: refused at open: %s",
			     what, tally_errmsg());
	for (int pass = 0; pass < 2; pass++) {
		rc = tally_seg_foreach(s, TALLY_READ_PERCPU, touch_cb, &sink);
		if (rc != left)
			harness_fail(__FILE__, __LINE__, "%s: pass %d read %d "
				     "series, not the %d others (%s)", what,
				     pass, rc, left, tally_errmsg());
		if (tally_seg_skipped(s, &msg) < 1)
			harness_fail(__FILE__, __LINE__, "%s: nothing counted "
				     "as skipped", what);
		if (!has(msg, path) ||
		    (!has(msg, "series ") && !has(msg, "family ")))
			harness_fail(__FILE__, __LINE__, "%s: message \"%s\" "
				     "does not name the file and the record",
				     what, msg);
	}
	if (getenv("TALLY_TEST_VERBOSE"))
		printf("  %-40s %s\n", what, msg);
	tally_seg_close(s);
}

/* ---- header fields ---------------------------------------------------- */

#define F(field) offsetof(struct tally__hdr, field), \
		 sizeof(((struct tally__hdr *)0)->field)

enum { SET, ADD };

static const struct hcase {
	const char *what;
	size_t off, size;
	int how;
	int64_t v;
	int err;
} hcases[] = {
	{ "magic byte 0", 0, 1, SET, 'X', EINVAL },
	{ "magic byte 7", 7, 1, SET, 'g', EINVAL },
	{ "major 1", F(major), SET, 1, EPROTONOSUPPORT },
	{ "major 3", F(major), SET, 3, EPROTONOSUPPORT },
	{ "major 0", F(major), SET, 0, EPROTONOSUPPORT },
	{ "major 65535", F(major), SET, 65535, EPROTONOSUPPORT },
	{ "byte order", F(byte_order), SET, 0x0807060504030201, EINVAL },
	{ "byte order 0", F(byte_order), SET, 0, EINVAL },
	{ "header size 0", F(header_size), SET, 0, EINVAL },
	{ "header size small", F(header_size), ADD, -8, EINVAL },
	{ "header size 4097", F(header_size), SET, 4097, EINVAL },
	{ "header size max", F(header_size), SET, 0xffffffff, EINVAL },
	{ "page size 8192", F(page_size), SET, 8192, EINVAL },
	{ "page size 0", F(page_size), SET, 0, EINVAL },
	{ "stride 8192", F(stride), SET, 8192, EINVAL },
	{ "stride 0", F(stride), SET, 0, EINVAL },
	{ "slabs 0", F(nslabs), SET, 0, EINVAL },
	{ "slabs 5000", F(nslabs), SET, 5000, EINVAL },
	{ "slabs 4097", F(nslabs), SET, 4097, EINVAL },
	{ "slabs +1", F(nslabs), ADD, 1, EINVAL },
	{ "slabs -1", F(nslabs), ADD, -1, EINVAL },
	{ "slabs max", F(nslabs), SET, 0xffffffff, EINVAL },
	{ "nodes 0", F(nnodes), SET, 0, EINVAL },
	{ "nodes > slabs", F(nnodes), SET, NSLABS + 1, EINVAL },
	{ "aux pages - 1", F(naux), ADD, -1, EINVAL },
	{ "aux pages + 1", F(naux), ADD, 1, EINVAL },
	{ "chunk pages +1", F(chunk_pages), ADD, 1, EINVAL },
	{ "chunk pages -1", F(chunk_pages), ADD, -1, EINVAL },
	{ "chunk slots 256", F(chunk_slots), SET, 256, EINVAL },
	{ "chunk slots 1024", F(chunk_slots), SET, 1024, EINVAL },
	{ "chunks 0", F(nchunks), SET, 0, EINVAL },
	{ "chunks +1", F(nchunks), ADD, 1, EINVAL },
	{ "chunks -1", F(nchunks), ADD, -1, EINVAL },
	{ "chunks 2^23+1", F(nchunks), SET, (1 << 23) + 1, EINVAL },
	{ "chunks max", F(nchunks), SET, -1, EINVAL },
	{ "file size +4096", F(file_size), ADD, 4096, EINVAL },
	{ "file size -4096", F(file_size), ADD, -4096, EINVAL },
	{ "file size 0", F(file_size), SET, 0, EINVAL },
	{ "chunk record size", F(meta_rec_size), ADD, 1, EINVAL },
	{ "series record size", F(series_rec_size), ADD, -1, EINVAL },
	{ "family record size", F(metric_rec_size), ADD, 1024, EINVAL },
	{ "series capacity 2^24+1", F(series_cap), SET, (1 << 24) + 1, EINVAL },
	{ "series capacity > region", F(series_cap), ADD, 33, EINVAL },
	{ "family capacity 0", F(metric_cap), SET, 0, EINVAL },
	{ "family capacity 65537", F(metric_cap), SET, 65537, EINVAL },
	{ "family capacity > region", F(metric_cap), ADD, 1, EINVAL },
	{ "hash buckets 0", F(hash_buckets), SET, 0, EINVAL },
	{ "hash buckets 3", F(hash_buckets), SET, 3, EINVAL },
	{ "hash buckets 96", F(hash_buckets), SET, 96, EINVAL },
};

/* Each region: moved, misaligned, overlapping, outside, too small. */
static const struct rcase {
	const char *name;
	size_t off_at, size_at;
	int zero_size_ok;
} regions[] = {
	{ "node map", offsetof(struct tally__hdr, node_off),
	  offsetof(struct tally__hdr, node_size), 0 },
	{ "chunk table", offsetof(struct tally__hdr, meta_off),
	  offsetof(struct tally__hdr, meta_size), 0 },
	{ "family table", offsetof(struct tally__hdr, metric_off),
	  offsetof(struct tally__hdr, metric_size), 0 },
	{ "series table", offsetof(struct tally__hdr, series_off),
	  offsetof(struct tally__hdr, series_size), 0 },
	{ "index", offsetof(struct tally__hdr, hash_off),
	  offsetof(struct tally__hdr, hash_size), 1 },
	{ "chunks", offsetof(struct tally__hdr, chunks_off),
	  offsetof(struct tally__hdr, chunks_size), 0 },
};

static void header_case(const char *what, size_t off, size_t size, int how,
			int64_t v, int err)
{
	struct tally__hdr h = pristine_hdr();
	unsigned char *p = (unsigned char *)&h + off;
	uint64_t cur = 0, nv;

	memcpy(&cur, p, size); /* little-endian host */
	nv = how == ADD ? cur + (uint64_t)v : (uint64_t)v;
	copy_sparse(fx->path, work);
	patch(work, off, &nv, size);
	expect_bad(what, work, err, 1);
}

TEST(header_fields)
{
	setup();
	expect_valid(fx->path);
	for (size_t i = 0; i < ARRAY_SIZE(hcases); i++)
		header_case(hcases[i].what, hcases[i].off, hcases[i].size,
			    hcases[i].how, hcases[i].v, hcases[i].err);
	/* A newer minor version adds fields only: still read. */
	{
		uint16_t minor = 9;

		copy_sparse(fx->path, work);
		patch(work, offsetof(struct tally__hdr, minor), &minor, 2);
		expect_valid(work);
	}
	expect_valid(fx->path);
}

TEST(header_regions)
{
	struct tally__hdr h;

	setup();
	h = pristine_hdr();
	for (size_t i = 0; i < ARRAY_SIZE(regions); i++) {
		const struct rcase *r = &regions[i];
		uint64_t off, size;
		char what[96];

		memcpy(&off, (char *)&h + r->off_at, 8);
		memcpy(&size, (char *)&h + r->size_at, 8);
#define RC(desc, at, how, v)                                                  \
	do {                                                                 \
		snprintf(what, sizeof(what), "%s: %s", r->name, desc);       \
		header_case(what, at, 8, how, (int64_t)(v), EINVAL);         \
	} while (0)
		RC("offset misaligned", r->off_at, ADD, 8);
		RC("offset one page early", r->off_at, ADD, -4096);
		RC("offset 0", r->off_at, SET, 0);
		RC("offset at the end", r->off_at, SET, h.file_size);
		RC("offset past the end", r->off_at, SET, h.file_size + 4096);
		RC("offset huge", r->off_at, SET, UINT64_MAX & ~4095ull);
		RC("size misaligned", r->size_at, ADD, 8);
		RC("size huge", r->size_at, SET, UINT64_MAX & ~4095ull);
		RC("size past the end", r->size_at, SET, h.file_size);
		if (!r->zero_size_ok) {
			RC("size 0", r->size_at, SET, 0);
			RC("size one page short", r->size_at, ADD, -4096);
		}
		/* Grown into the next region (the last: out of the file). */
		RC("size one page more", r->size_at, ADD, 4096);
		(void)off;
		(void)size;
#undef RC
	}
	/* Two regions swapped. */
	{
		struct tally__hdr b = h;

		b.series_off = h.metric_off;
		b.series_size = h.metric_size;
		b.metric_off = h.series_off;
		b.metric_size = h.series_size;
		copy_sparse(fx->path, work);
		patch(work, 0, &b, sizeof(b));
		expect_bad("tables swapped", work, EINVAL, 1);
	}
	expect_valid(fx->path);
}

/* ---- truncated files -------------------------------------------------- */

TEST(truncated_files)
{
	struct tally__hdr h;
	uint64_t cuts[64];
	size_t n = 0;
	uint64_t chunk_bytes;

	setup();
	h = pristine_hdr();
	chunk_bytes = (uint64_t)h.chunk_pages * 4096;
	cuts[n++] = 0;
	cuts[n++] = 1;
	cuts[n++] = 100;
	cuts[n++] = 511;
	cuts[n++] = 4095;
	cuts[n++] = 4096;
	cuts[n++] = 4097;
	cuts[n++] = h.node_off;
	cuts[n++] = h.meta_off;
	cuts[n++] = h.metric_off;
	cuts[n++] = h.metric_off + 1000;
	cuts[n++] = h.series_off;
	cuts[n++] = h.series_off + 64;
	cuts[n++] = h.hash_off;
	cuts[n++] = h.chunks_off;
	for (uint64_t k = 1; k < h.nchunks; k++)
		cuts[n++] = h.chunks_off + k * chunk_bytes;
	cuts[n++] = h.file_size - 4096;
	cuts[n++] = h.file_size - 1;
	cuts[n++] = h.file_size + 1;
	cuts[n++] = h.file_size + 4096;
	for (size_t i = 0; i < n; i++) {
		char what[64];

		copy_sparse(fx->path, work);
		CHECK_EQ(truncate(work, (off_t)cuts[i]), 0);
		snprintf(what, sizeof(what), "cut at %llu",
			 (unsigned long long)cuts[i]);
		expect_bad(what, work, EINVAL, 1);
	}
	expect_valid(fx->path);
}

/* Cut while open: the series table, then the chunks, are gone. */
TEST(truncated_while_open)
{
	struct tally__hdr h;
	struct tally_seg *s;
	size_t sink = 0;
	int rc;

	setup();
	h = pristine_hdr();
	copy_sparse(fx->path, work);
	s = tally_seg_open(work, NULL);
	CHECK(s != NULL);
	CHECK_EQ(truncate(work, (off_t)(h.series_off + 64)), 0);
	rc = tally_seg_foreach(s, TALLY_READ_PERCPU, touch_cb, &sink);
	CHECK(rc < 0);
	CHECK(has(tally_errmsg(), work));
	tally_seg_close(s);
}

/*
 * The same, with only the chunks cut: the values are gone, and the
 * reader must not report the series as if they were zero (a counter of
 * 42 read as 0 would be a reset to whoever exports it).
 */
TEST(truncated_chunks_while_open)
{
	struct tally__hdr h;
	struct tally_seg *s;
	struct expect e;
	int rc;

	setup();
	h = pristine_hdr();
	copy_sparse(fx->path, work);
	s = tally_seg_open(work, NULL);
	CHECK(s != NULL);
	CHECK_EQ(truncate(work, (off_t)h.chunks_off), 0);
	memset(&e, 0, sizeof(e));
	rc = tally_seg_foreach(s, TALLY_READ_PERCPU, expect_cb, &e);
	tally_seg_close(s);
	if (rc >= 0)
		harness_fail(__FILE__, __LINE__, "a file cut before its chunks "
			     "was read: %d series, c_total = %lld (was 42), "
			     "h count = %lld (was 100)", rc, (long long)e.c,
			     (long long)e.hcount);
	CHECK(has(tally_errmsg(), work));
}

/* ---- series records --------------------------------------------------- */

static struct tally__series rec_read(const char *path, uint32_t idx)
{
	struct tally__hdr h = pristine_hdr();
	struct tally__series r;
	int fd = open(path, O_RDONLY);

	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &r, sizeof(r), (off_t)(h.series_off + idx * sizeof(r))),
		 (ssize_t)sizeof(r));
	close(fd);
	return r;
}

static void rec_write(const char *path, uint32_t idx,
		      const struct tally__series *r)
{
	struct tally__hdr h = pristine_hdr();

	patch(path, h.series_off + idx * sizeof(*r), r, sizeof(*r));
}

/* Applies @fn to a fresh copy's record @idx, then expects a refusal. */
static void series_case(const char *what, uint32_t idx,
			void (*fn)(struct tally__series *, const struct tally__hdr *))
{
	struct tally__hdr h = pristine_hdr();
	struct tally__series r;

	copy_sparse(fx->path, work);
	r = rec_read(work, idx);
	fn(&r, &h);
	rec_write(work, idx, &r);
	expect_skipped(what, work, 3);
}

static void set_labels(struct tally__series *r, const char *bytes, size_t n,
		       unsigned nlabels)
{
	memset(r->labels, 0, sizeof(r->labels));
	memcpy(r->labels, bytes, n);
	r->labels_len = (uint16_t)n;
	r->nlabels = (uint8_t)nlabels;
}

static uint64_t chunk_bytes(const struct tally__hdr *h)
{
	return (uint64_t)h->chunk_pages * 4096;
}

/* The record's chunk, from its slot offset. */
static uint64_t chunk_base(const struct tally__series *r,
			   const struct tally__hdr *h)
{
	uint64_t rel = r->slot_off - h->chunks_off;

	return h->chunks_off + rel / chunk_bytes(h) * chunk_bytes(h);
}

#define SC(name, body)                                                        \
	static void sc_##name(struct tally__series *r,                       \
			      const struct tally__hdr *h)                    \
	{                                                                    \
		(void)h;                                                     \
		body;                                                        \
	}
SC(fam_next, r->metric = atomic_load(&h->metric_count))
SC(fam_cap, r->metric = h->metric_cap)
SC(fam_cap_m1, r->metric = h->metric_cap - 1)
SC(fam_max, r->metric = 0xffffffffu)
SC(fam_hist, r->metric = 4)
SC(nslots_0, r->nslots = 0)
SC(nslots_2, r->nslots = 2)
SC(nslots_max, r->nslots = 0xffffffffu)
SC(slot_0, r->slot_off = 0)
SC(slot_before, r->slot_off = h->chunks_off - 8)
SC(slot_end, r->slot_off = h->chunks_off + h->chunks_size)
SC(slot_past_file, r->slot_off = h->file_size + 4096 * 3)
SC(slot_max, r->slot_off = UINT64_MAX)
SC(slot_max_aligned, r->slot_off = UINT64_MAX - 7)
SC(slot_misaligned, r->slot_off += 4)
SC(slot_odd, r->slot_off += 1)
/* Pages of a chunk: the baseline, aux pages, CPU 0's copy (where a slot
 * offset must point), the other copies, the fallback copies. */
#define COPY0 ((uint64_t)TALLY__PG_COPY0 * 4096)
SC(slot_baseline, r->slot_off = chunk_base(r, h) + r->slot_off % 4096)
SC(slot_aux, r->slot_off -= 4096)
SC(slot_cpu1, r->slot_off += 4096)
SC(slot_fallback_page, r->slot_off += (uint64_t)(1 + h->nslabs) * 4096)
SC(slot_last, r->slot_off = chunk_base(r, h) + COPY0 + 511 * 8)
SC(slot_past_last, r->slot_off = chunk_base(r, h) + COPY0 + 4096)
SC(labels_len_101, r->labels_len = 101)
SC(labels_len_max, r->labels_len = 0xffff)
SC(labels_len_short, r->labels_len -= 1)
SC(labels_len_long, r->labels_len += 1)
SC(labels_unterminated, memset(r->labels, 'a', 100); r->labels_len = 100)
SC(label_name_digit, r->labels[0] = '9')
SC(label_name_reserved, set_labels(r, "__a\0v\0", 6, 1))
SC(label_name_dash, set_labels(r, "a-b\0v\0", 6, 1))
SC(label_name_colon, set_labels(r, "a:b\0v\0", 6, 1))
SC(label_name_empty, set_labels(r, "\0v\0", 3, 1))
SC(label_value_utf8, set_labels(r, "a\0\xff\0", 4, 1))
SC(label_value_surrogate, set_labels(r, "a\0\xed\xa0\x80\0", 6, 1))
SC(label_value_cut, set_labels(r, "a\0\xe6\x97\0", 5, 1))
SC(label_pair_cut, set_labels(r, "a\0v\0b", 5, 2))
SC(nlabels_more, r->nlabels += 1)
SC(nlabels_less, r->nlabels -= 1)
SC(nlabels_0, r->nlabels = 0)
SC(nlabels_255, r->nlabels = 255)
SC(labels_none_but_counted, set_labels(r, "", 0, 2))
SC(labels_33, {
	char b[99];

	for (int i = 0; i < 33; i++) {
		b[3 * i] = (char)('a' + i % 26);
		b[3 * i + 1] = 0;
		b[3 * i + 2] = 0;
	}
	set_labels(r, b, sizeof(b), 33);
})
SC(labels_26, {
	char b[78];

	for (int i = 0; i < 26; i++) {
		b[3 * i] = (char)('a' + i);
		b[3 * i + 1] = 0;
		b[3 * i + 2] = 0;
	}
	set_labels(r, b, sizeof(b), 26);
})

TEST(series_records)
{
	static const struct {
		const char *what;
		void (*fn)(struct tally__series *, const struct tally__hdr *);
		int hist; /* applied to the histogram's record */
	} cases[] = {
		{ "family not yet published", sc_fam_next, 0 },
		{ "family = capacity", sc_fam_cap, 0 },
		{ "family = capacity - 1", sc_fam_cap_m1, 0 },
		{ "family 2^32-1", sc_fam_max, 0 },
		{ "family of another kind", sc_fam_hist, 0 },
		{ "slots 0", sc_nslots_0, 0 },
		{ "slots 2", sc_nslots_2, 0 },
		{ "slots max", sc_nslots_max, 0 },
		{ "histogram slots 2", sc_nslots_2, 1 },
		{ "slot offset 0", sc_slot_0, 0 },
		{ "slot offset before the chunks", sc_slot_before, 0 },
		{ "slot offset at the end", sc_slot_end, 0 },
		{ "slot offset past the file", sc_slot_past_file, 0 },
		{ "slot offset max", sc_slot_max, 0 },
		{ "slot offset max aligned", sc_slot_max_aligned, 0 },
		{ "slot offset misaligned", sc_slot_misaligned, 0 },
		{ "slot offset odd", sc_slot_odd, 0 },
		{ "slot in the baseline page", sc_slot_baseline, 0 },
		{ "slot in the page before CPU 0's", sc_slot_aux, 0 },
		{ "slot in CPU 1's page", sc_slot_cpu1, 0 },
		{ "slot in a fallback page", sc_slot_fallback_page, 0 },
		{ "histogram at the last slot", sc_slot_last, 1 },
		{ "slot past CPU 0's page", sc_slot_past_last, 0 },
		{ "labels of 101 bytes", sc_labels_len_101, 0 },
		{ "labels of 65535 bytes", sc_labels_len_max, 0 },
		{ "labels one byte short", sc_labels_len_short, 0 },
		{ "labels one byte long", sc_labels_len_long, 0 },
		{ "labels not terminated", sc_labels_unterminated, 0 },
		{ "label name 9b", sc_label_name_digit, 0 },
		{ "label name __a", sc_label_name_reserved, 0 },
		{ "label name a-b", sc_label_name_dash, 0 },
		{ "label name a:b", sc_label_name_colon, 0 },
		{ "label name empty", sc_label_name_empty, 0 },
		{ "label value \\xff", sc_label_value_utf8, 0 },
		{ "label value surrogate", sc_label_value_surrogate, 0 },
		{ "label value cut UTF-8", sc_label_value_cut, 0 },
		{ "label pair cut", sc_label_pair_cut, 0 },
		{ "one label more than stored", sc_nlabels_more, 0 },
		{ "one label less than stored", sc_nlabels_less, 0 },
		{ "no labels counted", sc_nlabels_0, 0 },
		{ "255 labels counted", sc_nlabels_255, 0 },
		{ "labels counted, none stored", sc_labels_none_but_counted, 0 },
		{ "33 labels", sc_labels_33, 0 },
		{ "26 labels", sc_labels_26, 0 },
		{ "gauge: family of another kind", sc_fam_hist, 2 },
		{ "removed record brought back with slots 2", sc_nslots_2, 3 },
	};

	setup();
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint32_t idx = cases[i].hist == 1 ? fx->hist :
			       cases[i].hist == 2 ? fx->gauge : fx->counter;

		if (cases[i].hist == 3) {
			/* A free record made live again, but broken. */
			struct tally__series r;

			copy_sparse(fx->path, work);
			r = rec_read(work, fx->removed);
			CHECK_EQ(r.state, 0);
			CHECK_EQ(r.seq % 2, 0);
			r.state = 1;
			r.nslots = 2;
			rec_write(work, fx->removed, &r);
			expect_skipped(cases[i].what, work, 4);
			continue;
		}
		series_case(cases[i].what, idx, cases[i].fn);
	}
	expect_valid(fx->path);
}

/* Records a writer was in the middle of, or freed: skipped, no error. */
TEST(series_records_skipped)
{
	struct tally__series r;
	struct tally_seg *s;
	int n = 0;

	setup();
	/* A record being written (odd seq), forever: its writer died. */
	copy_sparse(fx->path, work);
	r = rec_read(work, fx->counter);
	r.seq |= 1;
	r.metric = 0xdeadbeef; /* what is in it does not matter */
	rec_write(work, fx->counter, &r);
	s = tally_seg_open(work, NULL);
	CHECK(s != NULL);
	CHECK_EQ(tally_seg_foreach(s, 0, count_cb, &n), 3);
	tally_seg_close(s);
	/* A free record. */
	copy_sparse(fx->path, work);
	r = rec_read(work, fx->hist);
	r.state = 0;
	r.nslots = 12345;
	rec_write(work, fx->hist, &r);
	s = tally_seg_open(work, NULL);
	CHECK(s != NULL);
	n = 0;
	CHECK_EQ(tally_seg_foreach(s, 0, count_cb, &n), 3);
	tally_seg_close(s);
	/* A high-water mark past the table is clamped to it. */
	copy_sparse(fx->path, work);
	{
		uint32_t hwm = 0xffffffffu;

		patch(work, offsetof(struct tally__hdr, series_hwm), &hwm, 4);
	}
	expect_valid(work);
}

/* ---- long label sets (format 2.5) -------------------------------------- */

/* A segment with one series of long labels (4 extension records) next
 * to a short one. */
struct long_fixture {
	char path[PATH_MAX];
	uint32_t main, short_rec;
	char value[400];
};

static struct long_fixture *lfx;
static uint64_t rnd(void);

static void write_long_fixture(void *arg)
{
	struct long_fixture *f = arg;
	/* The fixture's geometry, so that rec_read() finds the records. */
	struct tally_zone_opts o = { 4 * TALLY_CHUNK_SLOTS, 32,
				     TALLY_ZONE_PERSIST };
	struct tally_label l[2] = { { "route", f->value }, { "a", "1" } };
	struct tally_zone *z;
	tally_metric m, sm;

	setenv("TALLY_NSLABS", "4", 1);
	setenv("TALLY_NODES", "2", 1);
	z = tally_zone_create("longfix", &o);
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	snprintf(f->path, sizeof(f->path), "%s", tally_zone_path(z));
	reg(z, desc(TALLY_COUNTER, "long_total"), l, 2, &m);
	reg(z, desc(TALLY_COUNTER, "short_total"), l + 1, 1, &sm);
	tally_counter_add(counter_of(&m), 9);
	f->main = m.series;
	f->short_rec = sm.series;
}

static int long_cb(const struct tally_series_view *v, void *arg)
{
	int *n = arg;

	if (!strcmp(v->name, "long_total")) {
		CHECK_EQ(v->nlabels, 2);
		CHECK(!strcmp(v->label_names[1], "route"));
		CHECK(!strcmp(v->label_values[1], lfx->value));
		CHECK_EQ(v->value, 9);
	}
	++*n;
	return 0;
}

static struct tally__series_ext ext_read(const char *path, uint32_t idx)
{
	struct tally__series r = rec_read(path, idx);
	struct tally__series_ext e;

	memcpy(&e, &r, sizeof(e));
	return e;
}

static void ext_write(const char *path, uint32_t idx,
		      const struct tally__series_ext *e)
{
	struct tally__series r;

	memcpy(&r, e, sizeof(r));
	rec_write(path, idx, &r);
}

/* The index of extension @k of the long record, in @path. */
static uint32_t ext_index(const char *path, unsigned k)
{
	struct tally__series r = rec_read(path, lfx->main);
	struct tally__long_labels l;
	uint32_t link;

	memcpy(&l, r.labels, sizeof(l));
	link = l.first;
	while (k--)
		link = ext_read(path, link - 1).next;
	return link - 1;
}

enum { LR_LEN_SHORT, LR_LEN_HUGE, LR_FIRST_0, LR_FIRST_CAP, LR_FIRST_MAX,
       LR_FIRST_SELF, LR_NLABELS, LR_X_STATE, LR_X_OWNER, LR_X_SEQ,
       LR_X_LEN0, LR_X_LEN_BIG, LR_X_LEN_PAST, LR_X_LOOP, LR_X_END_EARLY,
       LR_X_GOES_ON, LR_X_BAD_NAME, LR_X_BAD_UTF8, LR_X_NO_NUL, LR_N };

static void long_case(int c)
{
	struct tally__hdr h = pristine_hdr();
	struct tally__series r;
	struct tally__series_ext e;
	struct tally__long_labels l;
	uint32_t x0, x3;

	copy_sparse(lfx->path, work);
	r = rec_read(work, lfx->main);
	memcpy(&l, r.labels, sizeof(l));
	x0 = ext_index(work, 0);
	x3 = ext_index(work, 3);
	(void)h;
	switch (c) {
	case LR_LEN_SHORT: r.labels_len = 100; break;
	case LR_LEN_HUGE: r.labels_len = 0xffff; break;
	case LR_FIRST_0: l.first = 0; break;
	case LR_FIRST_CAP: l.first = 33; break; /* the table holds 32 */
	case LR_FIRST_MAX: l.first = 0xffffffffu; break;
	case LR_FIRST_SELF: l.first = lfx->main + 1; break;
	case LR_NLABELS: r.nlabels = 3; break;
	default: break;
	}
	memcpy(r.labels, &l, sizeof(l));
	rec_write(work, lfx->main, &r);
	e = ext_read(work, c == LR_X_GOES_ON || c == LR_X_LEN_PAST ? x3 : x0);
	switch (c) {
	case LR_X_STATE: e.state = TALLY__SERIES_LIVE; break;
	case LR_X_OWNER: e.owner = lfx->short_rec; break;
	case LR_X_SEQ: e.owner_seq += 2; break;
	case LR_X_LEN0: e.len = 0; break;
	case LR_X_LEN_BIG: e.len = TALLY__EXT_DATA + 1; break;
	case LR_X_LEN_PAST: e.len = TALLY__EXT_DATA; break;
	case LR_X_LOOP: e.next = x0 + 1; break;
	case LR_X_END_EARLY: e.next = 0; break;
	case LR_X_GOES_ON: e.next = x0 + 1; break;
	case LR_X_BAD_NAME: e.data[0] = '9'; break; /* "a" -> "9" */
	case LR_X_BAD_UTF8: e.data[10] = (char)0xff; break;
	case LR_X_NO_NUL: memset(e.data, 'a', TALLY__EXT_DATA); break;
	default: break;
	}
	ext_write(work, c == LR_X_GOES_ON || c == LR_X_LEN_PAST ? x3 : x0, &e);
}

/* A long record, or its extensions, damaged field by field: refused with
 * a message naming the file, never read astray.  Extensions left over by
 * a writer, or one of another series, are skipped when scanning. */
TEST(long_label_records)
{
	static const char *const what[LR_N] = {
		"long labels of 100 bytes", "long labels of 65535 bytes",
		"no first extension", "first extension past the table",
		"first extension 2^32-1", "first extension is the record",
		"one label more than stored", "extension of another state",
		"extension of another owner", "extension of another life",
		"extension of 0 bytes", "extension of 109 bytes",
		"extension past the labels", "extensions in a loop",
		"extensions end early", "extensions go on",
		"label name 9 in an extension", "label value \\xff in an extension",
		"label text not terminated",
	};
	struct tally_seg *s;
	int n = 0;

	setup();
	lfx = shared_mem(sizeof(*lfx));
	for (size_t i = 0; i < sizeof(lfx->value) - 1; i++)
		lfx->value[i] = (char)('a' + i % 26);
	CHECK_CHILD_OK(harness_child(write_long_fixture, lfx));
	CHECK_EQ(pristine_hdr().series_off, 0 + ({
		struct tally__hdr lh;
		int fd = open(lfx->path, O_RDONLY);

		CHECK(fd >= 0);
		CHECK_EQ(pread(fd, &lh, sizeof(lh), 0), (ssize_t)sizeof(lh));
		close(fd);
		lh.series_off;
	}));
	CHECK_EQ(rec_read(lfx->path, lfx->main).state, TALLY__SERIES_LONG);
	s = tally_seg_open(lfx->path, NULL);
	CHECK(s != NULL);
	CHECK_EQ(tally_seg_foreach(s, TALLY_READ_PERCPU, long_cb, &n), 2);
	CHECK_EQ(n, 2);
	tally_seg_close(s);
	for (int c = 0; c < LR_N; c++) {
		long_case(c);
		expect_skipped(what[c], work, 1);
	}
	/* The long record retired (state free): its extensions are not
	 * series, the other series is read. */
	copy_sparse(lfx->path, work);
	{
		struct tally__series r = rec_read(work, lfx->main);

		r.state = TALLY__SERIES_FREE;
		rec_write(work, lfx->main, &r);
	}
	s = tally_seg_open(work, NULL);
	CHECK(s != NULL);
	n = 0;
	CHECK_EQ(tally_seg_foreach(s, 0, long_cb, &n), 1);
	tally_seg_close(s);
	/* Random bytes of the long record and its extensions. */
	for (long i = 0; i < harness_scale(600); i++) {
		struct tally__hdr h = pristine_hdr();
		size_t sink = 0;

		copy_sparse(lfx->path, work);
		for (int k = 0; k < 1 + (int)(rnd() % 4); k++) {
			uint32_t rec = rnd() % 2 ? lfx->main :
					 ext_index(lfx->path, (unsigned)(rnd() % 4));
			unsigned char b = (unsigned char)rnd();

			patch(work, h.series_off + rec * 128ull + rnd() % 128, &b, 1);
		}
		s = tally_seg_open(work, NULL);
		CHECK(s != NULL);
		if (tally_seg_foreach(s, TALLY_READ_PERCPU, touch_cb, &sink) < 0)
			CHECK(has(tally_errmsg(), work));
		tally_seg_close(s);
	}
}

/* ---- metric records --------------------------------------------------- */

static struct tally__metric_rec fam_read(const char *path, uint32_t idx)
{
	struct tally__hdr h = pristine_hdr();
	struct tally__metric_rec f;
	int fd = open(path, O_RDONLY);

	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &f, sizeof(f), (off_t)(h.metric_off + idx * sizeof(f))),
		 (ssize_t)sizeof(f));
	close(fd);
	return f;
}

static void fam_case(const char *what, uint32_t idx,
		     void (*fn)(struct tally__metric_rec *), int left)
{
	struct tally__hdr h = pristine_hdr();
	struct tally__metric_rec f;

	copy_sparse(fx->path, work);
	f = fam_read(work, idx);
	fn(&f);
	patch(work, h.metric_off + idx * sizeof(f), &f, sizeof(f));
	expect_skipped(what, work, left);
}

#define FC(name, body)                                                        \
	static void fc_##name(struct tally__metric_rec *f)                       \
	{                                                                    \
		body;                                                        \
	}
FC(kind0, f->kind = 0)
FC(kind5, f->kind = 5)
FC(kind255, f->kind = 255)
FC(state0, f->state = 0)
FC(state2, f->state = 2)
FC(mode4, f->mode = 4)
FC(mode255, f->mode = 255)
FC(name_len_more, f->name_len += 1)
FC(name_len_less, f->name_len -= 1)
FC(name_len_max, f->name_len = 0xffff)
FC(name_empty, f->name[0] = 0; f->name_len = 0)
FC(name_digit, f->name[0] = '9')
FC(name_dash, f->name[1] = '-')
FC(name_utf8, f->name[0] = (char)0xc3)
FC(name_unterminated, memset(f->name, 'a', sizeof(f->name));
   f->name_len = sizeof(f->name))
FC(unit_bad, f->unit[0] = '-'; f->unit[1] = 0; f->unit_len = 1)
FC(unit_space, f->unit[0] = ' '; f->unit[1] = 0; f->unit_len = 1)
FC(unit_len_more, f->unit_len += 1)
FC(unit_unterminated, memset(f->unit, 'u', sizeof(f->unit));
   f->unit_len = sizeof(f->unit))
FC(help_unterminated, memset(f->help, 'h', sizeof(f->help));
   f->help_len = sizeof(f->help))
FC(help_utf8, f->help[0] = (char)0xff)
FC(help_overlong, memcpy(f->help, "\xc0\xaf", 2))
FC(help_len_more, f->help_len += 1)
FC(help_len_max, f->help_len = 0xffff)
FC(sub0, f->sub_bits = 0)
FC(sub8, f->sub_bits = 8)
FC(max_eq_sub, f->max_bits = f->sub_bits)
FC(max_below_sub, f->max_bits = 1)
FC(max64, f->max_bits = 64)
FC(max255, f->max_bits = 255)
FC(too_many_buckets, f->sub_bits = 7; f->max_bits = 12)
FC(other_layout, f->max_bits = 9) /* valid, but not the series' slots */
FC(bits_on_counter, f->sub_bits = 3; f->max_bits = 40)
FC(max_on_counter, f->max_bits = 1)
FC(vtype2, f->vtype = 2)
FC(float_counter, f->vtype = TALLY__VT_FLOAT64) /* a counter's family */
FC(float_histogram, f->vtype = TALLY__VT_FLOAT64)

TEST(family_records)
{
	static const struct {
		const char *what;
		void (*fn)(struct tally__metric_rec *);
		int hist;
	} cases[] = {
		{ "kind 0", fc_kind0, 0 },
		{ "kind 5", fc_kind5, 0 },
		{ "kind 255", fc_kind255, 0 },
		{ "state 0", fc_state0, 0 },
		{ "state 2", fc_state2, 0 },
		{ "mode 4", fc_mode4, 0 },
		{ "mode 255", fc_mode255, 0 },
		{ "name length +1", fc_name_len_more, 0 },
		{ "name length -1", fc_name_len_less, 0 },
		{ "name length 65535", fc_name_len_max, 0 },
		{ "empty name", fc_name_empty, 0 },
		{ "name 9...", fc_name_digit, 0 },
		{ "name with -", fc_name_dash, 0 },
		{ "name not ASCII", fc_name_utf8, 0 },
		{ "name not terminated", fc_name_unterminated, 0 },
		{ "unit -", fc_unit_bad, 0 },
		{ "unit space", fc_unit_space, 0 },
		{ "unit length +1", fc_unit_len_more, 0 },
		{ "unit not terminated", fc_unit_unterminated, 0 },
		{ "help not terminated", fc_help_unterminated, 0 },
		{ "help \\xff", fc_help_utf8, 0 },
		{ "help overlong UTF-8", fc_help_overlong, 0 },
		{ "help length +1", fc_help_len_more, 0 },
		{ "help length 65535", fc_help_len_max, 0 },
		{ "histogram bits on a counter", fc_bits_on_counter, 0 },
		{ "max bits on a counter", fc_max_on_counter, 0 },
		{ "value type 2", fc_vtype2, 0 },
		{ "a floating-point counter", fc_float_counter, 0 },
		{ "a floating-point histogram", fc_float_histogram, 1 },
		{ "sub bits 0", fc_sub0, 1 },
		{ "sub bits 8", fc_sub8, 1 },
		{ "max bits = sub bits", fc_max_eq_sub, 1 },
		{ "max bits < sub bits", fc_max_below_sub, 1 },
		{ "max bits 64", fc_max64, 1 },
		{ "max bits 255", fc_max255, 1 },
		{ "769 slots", fc_too_many_buckets, 1 },
		{ "another layout than its series", fc_other_layout, 1 },
	};
	struct tally__hdr h;
	uint32_t cfam, hfam;

	setup();
	h = pristine_hdr();
	/* Families in registration order: c_total, g, removed_total, gs, h. */
	cfam = rec_read(fx->path, fx->counter).metric;
	hfam = rec_read(fx->path, fx->hist).metric;
	CHECK_EQ(cfam, 0);
	CHECK_EQ(hfam, 4);
	CHECK_EQ(atomic_load(&h.metric_count), 5);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		fam_case(cases[i].what, cases[i].hist ? hfam : cfam,
			 cases[i].fn, 3);
	/* The family of the removed series only: no series of it is live,
	 * but the table is corrupt all the same. */
	fam_case("kind 0 (family without live series)", 2, fc_kind0, 4);
	/* A family count past the families written. */
	{
		uint32_t n = 6;

		copy_sparse(fx->path, work);
		patch(work, offsetof(struct tally__hdr, metric_count), &n, 4);
		expect_skipped("family count + 1", work, 4);
	}
	expect_valid(fx->path);
}

/* A family being written (odd seq): its series wait, the rest is read. */
TEST(family_being_written)
{
	struct tally__hdr h;
	struct tally__metric_rec f;
	struct tally_seg *s;
	int n = 0;

	setup();
	h = pristine_hdr();
	copy_sparse(fx->path, work);
	f = fam_read(work, 4);
	f.seq |= 1;
	f.kind = 0;
	patch(work, h.metric_off + 4 * sizeof(f), &f, sizeof(f));
	s = tally_seg_open(work, NULL);
	CHECK(s != NULL);
	CHECK_EQ(tally_seg_foreach(s, 0, count_cb, &n), 3);
	tally_seg_close(s);
}

/* ---- random damage ---------------------------------------------------- */

static uint64_t rstate = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rstate ^= rstate << 13;
	rstate ^= rstate >> 7;
	rstate ^= rstate << 17;
	return rstate;
}

/* Random bytes of the header, the tables and the chunks' pages changed:
 * whatever the result, no crash, and a message naming the file. */
TEST(random_damage)
{
	struct tally__hdr h;
	long rounds = harness_scale(1500);
	int refused = 0;
	uint64_t spots[7];

	setup();
	h = pristine_hdr();
	spots[0] = 0;
	spots[1] = h.metric_off;
	spots[2] = h.metric_off + 4 * 1024;
	spots[3] = h.series_off;
	spots[4] = rec_read(fx->path, fx->counter).slot_off & ~4095ull;
	spots[5] = 512;
	/* The histogram's sum and buckets, in CPU 0's and CPU 1's copies. */
	spots[6] = rec_read(fx->path, fx->hist).slot_off;
	for (long i = 0; i < rounds; i++) {
		struct tally_seg *s;
		int flips = 1 + (int)(rnd() % 8);

		copy_sparse(fx->path, work);
		for (int k = 0; k < flips; k++) {
			uint64_t base = spots[rnd() % 7];
			uint64_t off = base + rnd() % (base == 0 ? 512 : 1024);

			if (base == spots[6])
				off = base + (rnd() % 2) * 4096 + rnd() % (29 * 8);
			unsigned char b = (unsigned char)rnd();

			patch(work, off, &b, 1);
		}
		s = tally_seg_open(work, NULL);
		if (s) {
			size_t sink = 0;
			int rc = tally_seg_foreach(s, TALLY_READ_PERCPU,
						   touch_cb, &sink);

			if (rc < 0) {
				CHECK(has(tally_errmsg(), work));
				refused++;
			}
			tally_seg_close(s);
		} else {
			CHECK(has(tally_errmsg(), work));
			refused++;
		}
	}
	printf("  %ld damaged copies, %d refused\n", rounds, refused);
	CHECK(refused > 0);
	expect_valid(fx->path);
}

/*
 * Bucket counts that are valid 64-bit numbers but whose sum is not: the
 * reader sums them, and so does tally_histogram_quantile().  The file is
 * valid, and sums wrap like int64 (docs/FORMAT.md), so the reader reads
 * every series, with each bucket and the count changed by exactly what
 * was written (modulo 2^64); any quantile the contract allows is fine
 * (within the histogram's range); undefined behaviour is not (the UBSan
 * build stops on a signed overflow).
 */
TEST(histogram_huge_counts)
{
	/* Buckets 1 and 2 of CPU 0's copy, bucket 3 of CPU 1's (slot 0 of
	 * a histogram is its sum, slot 1 + b its bucket b). */
	static const struct { unsigned cpu, bucket; } at[3] = {
		{ 0, 1 }, { 0, 2 }, { 1, 3 },
	};
	uint64_t delta[3], count;
	int64_t big = INT64_MAX - 1;
	struct tally__series r;
	struct snap before, after;
	const struct seen *hb, *ha;
	int fd;

	setup();
	copy_sparse(fx->path, work);
	r = rec_read(work, fx->hist);
	before = read_path(work, TALLY_READ_PERCPU);
	hb = snap_find(&before, "h", "");
	CHECK(hb != NULL);
	count = (uint64_t)hb->value;
	fd = open(work, O_RDONLY);
	CHECK(fd >= 0);
	for (int i = 0; i < 3; i++) {
		uint64_t off = r.slot_off + at[i].cpu * TALLY__STRIDE +
			       8 * (1 + at[i].bucket);
		int64_t old;

		CHECK_EQ(pread(fd, &old, 8, (off_t)off), 8);
		delta[i] = (uint64_t)big - (uint64_t)old;
		count += delta[i];
		patch(work, off, &big, 8);
	}
	close(fd);

	after = read_path(work, TALLY_READ_PERCPU);
	CHECK_EQ(after.n, fx->nlive);
	ha = snap_find(&after, "h", "");
	CHECK(ha != NULL);
	CHECK_EQ(ha->nbuckets, hb->nbuckets);
	for (unsigned b = 0; b < ha->nbuckets; b++) {
		uint64_t want = (uint64_t)hb->buckets[b];

		for (int i = 0; i < 3; i++)
			if (at[i].bucket == b)
				want += delta[i];
		CHECK_EQ(ha->buckets[b], (int64_t)want);
	}
	CHECK_EQ(ha->value, (int64_t)count);
	CHECK_EQ(ha->sum, hb->sum);
	/* The count (negative as an int64) is no quantile's to judge: any
	 * answer of the contract, and quantiles in the histogram's range. */
	CHECK(ha->qrc == 0 || ha->qrc == -ENODATA);
	for (int i = 0; ha->qrc == 0 && i < 5; i++)
		CHECK(ha->q[i] >= 0 && ha->q[i] < 256); /* max_bits 8 */
	printf("  count %" PRId64 ", quantiles %g %g %g %g %g\n", ha->value,
	       ha->q[0], ha->q[1], ha->q[2], ha->q[3], ha->q[4]);
	snap_free(&before);
	snap_free(&after);
}

/* The same in tally_histogram_quantile() alone, on a view made by hand. */
TEST(quantile_huge_counts)
{
	int64_t buckets[304] = { 0 };
	struct tally_series_view v;
	double q = -1;
	int rc;

	memset(&v, 0, sizeof(v));
	v.kind = TALLY_HISTOGRAM;
	v.sub_bits = 3;
	v.max_bits = 40;
	v.nbuckets = 304;
	v.buckets = buckets;
	buckets[10] = INT64_MAX;
	buckets[20] = INT64_MAX;
	rc = tally_histogram_quantile(&v, 0.5, &q);
	printf("  quantile: %d, %g\n", rc, q);
	/* Half of the observations are in bucket 10. */
	CHECK_EQ(rc, 0);
	CHECK(q >= 10 && q <= 10);
}

/*
 * Out of memory in the middle of a pass: reader.h says every message of
 * the reader starts with the file's path, so a walk over many files can
 * say which one it could not read.
 */
static long vm_size_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void foreach_without_memory(void *arg)
{
	struct tally_seg *s = arg;
	struct rlimit rl;
	size_t sink = 0;
	int rc;

	/* Room for small allocations, not for the 1 MiB metric table. */
	rl.rlim_cur = rl.rlim_max = (rlim_t)(vm_size_kb() + 256) * 1024;
	CHECK_EQ(setrlimit(RLIMIT_AS, &rl), 0);
	rc = tally_seg_foreach(s, 0, touch_cb, &sink);
	printf("  foreach: %d (%s)\n", rc, tally_errmsg());
	CHECK_EQ(rc, -ENOMEM);
	if (!has(tally_errmsg(), work))
		harness_fail(__FILE__, __LINE__, "message \"%s\" does not name "
			     "the file", tally_errmsg());
}

TEST(out_of_memory_names_the_file)
{
	uint32_t n = 1024;
	struct tally_seg *s;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	harness_skip("address-space limits do not mix with sanitizers");
#endif
	setup();
	copy_sparse(fx->path, work);
	/* 1024 families to load: a 1 MiB allocation. */
	patch(work, offsetof(struct tally__hdr, metric_count), &n, 4);
	s = tally_seg_open(work, NULL);
	CHECK(s != NULL);
	CHECK_CHILD_OK(harness_child(foreach_without_memory, s));
	tally_seg_close(s);
}

/* ---- not segments at all ---------------------------------------------- */

static void on_alarm(int sig)
{
	(void)sig;
	_exit(3);
}

TEST(not_segments)
{
	char p[PATH_MAX + 32];
	char text[8192];
	int fd;
	double t0;

	setup();
	snprintf(p, sizeof(p), "%s/empty.1.tally", harness_dir());
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	close(fd);
	expect_bad("empty file", p, EINVAL, 1);

	snprintf(p, sizeof(p), "%s/short.1.tally", harness_dir());
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "TALLYSEG", 8), 8);
	CHECK_EQ(ftruncate(fd, 4095), 0);
	close(fd);
	expect_bad("4095 bytes", p, EINVAL, 1);

	snprintf(p, sizeof(p), "%s/text.1.tally", harness_dir());
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (char)("lorem ipsum\n"[i % 12]);
	CHECK_EQ(write(fd, text, sizeof(text)), (ssize_t)sizeof(text));
	close(fd);
	expect_bad("text file", p, EINVAL, 1);

	snprintf(p, sizeof(p), "%s/zeros.1.tally", harness_dir());
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, 1 << 20), 0);
	close(fd);
	expect_bad("a megabyte of zeros", p, EINVAL, 1);

	/* Only the magic is right. */
	copy_sparse(fx->path, p);
	{
		struct tally__hdr h;

		memset(&h, 0, sizeof(h));
		memcpy(h.magic, "TALLYSEG", 8);
		patch(p, 0, &h, sizeof(h));
	}
	expect_bad("zeros after the magic", p, 0, 1);

	snprintf(p, sizeof(p), "%s/dir.1.tally", harness_dir());
	CHECK_EQ(mkdir(p, 0700), 0);
	expect_bad("a directory", p, EINVAL, 1);

	expect_bad("a character device", "/dev/null", EINVAL, 1);

	/* A FIFO nobody writes to: opening it must not block. */
	signal(SIGALRM, on_alarm);
	snprintf(p, sizeof(p), "%s/fifo.1.tally", harness_dir());
	CHECK_EQ(mkfifo(p, 0600), 0);
	t0 = harness_now();
	alarm(5);
	expect_bad("a FIFO", p, EINVAL, 1);
	alarm(0);
	CHECK(harness_now() - t0 < 1.0);

	/* Missing. */
	snprintf(p, sizeof(p), "%s/missing.1.tally", harness_dir());
	expect_bad("a missing file", p, ENOENT, 1);
}
