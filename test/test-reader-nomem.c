/*
 * test-reader-nomem.c: the segment reader out of memory.
 *
 * It proves that a pass over a segment that cannot allocate what it
 * needs fails with -ENOMEM and "out of memory" in tally_errmsg(), or
 * succeeds with the exact values: never another error, which a caller
 * such as tally-exporter or the Python package takes for a damaged file
 * and skips, losing that segment's counts without a word.  The
 * realloc() calls of the pass fail one at a time; the reader's page
 * buffer is among them, and the page walk after it ends on a hole that
 * sets errno to ENXIO.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "harness.h"
#include "snap.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

/* ---- realloc(), interposed --------------------------------------------
 *
 * This program's definition is the realloc() the statically linked
 * libtally calls.  Once armed with n, the n-th call returns NULL with
 * errno ENOMEM; the others go to the next definition (the C library's,
 * or a sanitizer's).
 */
static void *(*next_realloc)(void *, size_t);
static long armed, counted;
static int fired;

void *realloc(void *p, size_t n)
{
	if (armed && ++counted == armed) {
		armed = 0;
		fired = 1;
		errno = ENOMEM;
		return NULL;
	}
	/* Found at the first call, which may come before constructors run
	 * (a sanitizer's start). */
	if (!next_realloc)
		next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT,
								"realloc");
	return next_realloc(p, n);
}

static void arm(long n)
{
	counted = 0;
	fired = 0;
	armed = n;
}

/* ---- The segment ------------------------------------------------------ */

static char seg_path[PATH_MAX];

static void write_segment(void *arg)
{
	struct tally_zone_opts o = { 4 * TALLY_CHUNK_SLOTS, 32,
				     TALLY_ZONE_PERSIST };
	struct tally_label l[1] = { { "code", "200" } };
	struct tally_zone *z;
	tally_metric c, g;

	/* Four slabs whatever the host: the chunk's pages end in holes up
	 * to the end of the file, where lseek(SEEK_DATA) fails with
	 * ENXIO. */
	setenv("TALLY_NSLABS", "4", 1);
	if (!(z = tally_zone_create("nomem", &o)))
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	snprintf(arg, PATH_MAX, "%s", tally_zone_path(z));
	reg(z, desc(TALLY_COUNTER, "req_total"), l, 1, &c);
	reg(z, desc(TALLY_GAUGE, "inflight"), NULL, 0, &g);
	tally_counter_add(counter_of(&c), 12);
	tally_gauge_add(gauge_of(&g), -3);
}

struct totals {
	int n;
	int64_t req, inflight;
};

static int sum_cb(const struct tally_series_view *v, void *arg)
{
	struct totals *t = arg;

	t->n++;
	if (!strcmp(v->name, "req_total"))
		t->req = v->value;
	else if (!strcmp(v->name, "inflight"))
		t->inflight = v->value;
	return 0;
}

/* ---- Tests ------------------------------------------------------------ */

/*
 * Every realloc() of opening and reading the segment fails in turn: the
 * open gives NULL with ENOMEM, the pass -ENOMEM, or the values are exact.
 */
TEST(each_failed_realloc_is_out_of_memory)
{
	char *path = shared_mem(PATH_MAX);
	long n, failed = 0;

	CHECK_CHILD_OK(harness_child(write_segment, path));
	snprintf(seg_path, sizeof(seg_path), "%s", path);
	for (n = 1;; n++) {
		struct totals t = { 0, 0, 0 };
		struct tally_seg *s;
		int rc = 0;

		arm(n);
		s = tally_seg_open(seg_path, NULL);
		if (s) {
			rc = tally_seg_foreach(s, TALLY_READ_PERCPU, sum_cb, &t);
			tally_seg_close(s);
		}
		armed = 0;
		if (!fired)
			break;
		failed++;
		if (!s) {
			CHECK_EQ(errno, ENOMEM);
		} else if (rc < 0) {
			if (rc != -ENOMEM)
				harness_fail(__FILE__, __LINE__,
					     "realloc #%ld failed: %d (%s)",
					     n, rc, tally_errmsg());
			CHECK(strstr(tally_errmsg(), "out of memory"));
			continue;
		}
		if (s) {
			CHECK_EQ(rc, 2);
			CHECK_EQ(t.req, 12);
			CHECK_EQ(t.inflight, -3);
		}
	}
	/* The pass allocates its page buffer at least. */
	CHECK(failed >= 1);
}

/* Out of memory while the segment is open: the next pass reads right. */
TEST(a_pass_after_out_of_memory_is_exact)
{
	char *path = shared_mem(PATH_MAX);
	struct totals t = { 0, 0, 0 };
	struct tally_seg *s;
	int rc;

	CHECK_CHILD_OK(harness_child(write_segment, path));
	s = tally_seg_open(path, NULL);
	CHECK(s != NULL);
	arm(1);
	rc = tally_seg_foreach(s, TALLY_READ_PERCPU, sum_cb, &t);
	armed = 0;
	CHECK(fired);
	CHECK_EQ(rc, -ENOMEM);
	memset(&t, 0, sizeof(t));
	CHECK_EQ(tally_seg_foreach(s, TALLY_READ_PERCPU, sum_cb, &t), 2);
	CHECK_EQ(t.n, 2);
	CHECK_EQ(t.req, 12);
	CHECK_EQ(t.inflight, -3);
	tally_seg_close(s);
}
