/*
 * util.h: helpers for tests that need to look at libtally's process-wide
 * state (src/core/core.h), and fixtures the tests share: registration of
 * any kind (kinds.h), a test's own directory, a segment's information,
 * a copy of a segment file with its holes.
 */
#ifndef TALLY_TEST_UTIL_H
#define TALLY_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "core/core.h"
#include "kinds.h"
#include "layout.h"
#include "tally/metrics.h"
#include "tally/reader.h"

/* Removes the writers' lock files (format 2.6) left in @dir by writers
 * that were killed, whose zone files a test removed itself. */
static inline void remove_lock_files(const char *dir)
{
	char cmd[PATH_MAX + 64];

	snprintf(cmd, sizeof(cmd), "rm -f '%s'/.tally-lock.*", dir);
	if (system(cmd) != 0)
		harness_fail(__FILE__, __LINE__, "%s failed", cmd);
}

/* Whether libtally has read its environment in this process yet. */
static inline int tally_initialised(void)
{
	return tally__env.nslabs != 0;
}

/*
 * Sets (or, with a NULL value, unsets) an environment variable that
 * libtally reads on first use.  Fails the test when libtally was already
 * initialised in this process, since the value would then be ignored.
 */
static inline void fresh_setenv(const char *name, const char *value)
{
	if (tally_initialised())
		harness_fail(__FILE__, __LINE__, "libtally is already "
			     "initialised: %s must be set in a fresh process",
			     name);
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

/* A zero-filled metric description of @kind named @name. */
static inline struct tally_metric_desc desc(unsigned kind, const char *name)
{
	struct tally_metric_desc d;

	memset(&d, 0, sizeof(d));
	d.kind = kind;
	d.name = name;
	return d;
}

/* Registers @d with labels @l in @z, or fails the test. */
static inline void reg(struct tally_zone *z, struct tally_metric_desc d,
		       const struct tally_label *l, unsigned nl,
		       tally_metric *m)
{
	d.labels = l;
	d.nlabels = nl;
	if (register_any(z, &d, m) != 0)
		harness_fail(__FILE__, __LINE__, "register %s: %s", d.name,
			     tally_errmsg());
}

/* A directory of the test's own under $TALLY_DIR, so that clean-up and
 * file counts see only its files. */
static inline void own_subdir(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s.%d", harness_dir(), name, (int)getpid());
	CHECK_EQ(mkdir(out, 0700), 0);
}

/* Zone @name, created in a directory of the test's own (own_subdir()),
 * which becomes $TALLY_DIR; fails the test when it cannot. */
static inline struct tally_zone *zone_in(const char *name)
{
	char dir[PATH_MAX];
	struct tally_zone *z;

	own_subdir(dir, sizeof(dir), name);
	setenv("TALLY_DIR", dir, 1);
	z = tally_zone_create(name, NULL);
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	return z;
}

/* What tally_seg_info() says of the segment at @path, or fail. */
static inline struct tally_seg_info info_of(const char *path)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	struct tally_seg_info info;

	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK_EQ(tally_seg_info(s, &info), 0);
	tally_seg_close(s);
	return info;
}

/*
 * Passes every series of the segment at @path to @fn with @arg in one
 * pass, or fails the test when the segment cannot be opened or the pass
 * fails.  Returns what tally_seg_foreach() returned: the series passed.
 */
static inline int foreach_path(const char *path, tally_series_fn fn,
			       void *arg)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	int rc;

	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	rc = tally_seg_foreach(s, 0, fn, arg);
	tally_seg_close(s);
	CHECK(rc >= 0);
	return rc;
}

/* @size bytes of zeroes shared with the processes the test forks (a
 * child's results, a parent's orders), or fail. */
static inline void *shared_mem(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED);
	return p;
}

/* Mounts a tmpfs of @size ("1M") on the directory @dir, which it makes
 * when missing; skips the test when mounting is not allowed here. */
static inline void mount_tmpfs_on(const char *dir, const char *size)
{
	char opts[64];

	CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
	snprintf(opts, sizeof(opts), "size=%s,mode=0700", size);
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
		if (errno == EPERM)
			harness_skip("cannot mount a tmpfs: %s",
				     strerror(errno));
		harness_fail(__FILE__, __LINE__, "mount: %s", strerror(errno));
	}
}

/* The next number of the xorshift64 generator whose state is @s (not 0):
 * the same sequence on every host, for tests that draw many values. */
static inline uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Zeroes the @size bytes at @arg, then passes every series of @z's
 * segment to @fn with @arg (foreach_path()). */
static inline void zone_pass(struct tally_zone *z, tally_series_fn fn,
			     void *arg, size_t size)
{
	memset(arg, 0, size);
	foreach_path(tally_zone_path(z), fn, arg);
}

/* The metric record @f of a type of format 2.6 (@type) is one a reader
 * older than 2.6 accepts: a counter of 64-bit integers, no buckets. */
static inline void check_typed_counter_rec(const struct tally__metric_rec *f,
					   unsigned type)
{
	CHECK_EQ(f->kind, TALLY__KIND_COUNTER);
	CHECK_EQ(f->vtype, TALLY__VT_INT64);
	CHECK_EQ(f->type, type);
	CHECK_EQ(f->sub_bits, 0);
}

/* Runs @fn(@arg) on @n threads at once (at most 16) and waits for them
 * all, or fails the test when one cannot start. */
static inline void run_threads(int n, void *(*fn)(void *), void *arg)
{
	pthread_t t[16];

	CHECK(n > 0 && n <= 16);
	for (int i = 0; i < n; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, fn, arg), 0);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/*
 * Reads what a reader that knows only the layout finds first in the
 * segment file at @path: its header @h, its first metric record @f and
 * its first series record @r; fails the test on a short read.
 */
static inline void read_first_records(const char *path, struct tally__hdr *h,
				      struct tally__metric_rec *f,
				      struct tally__series *r)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, h, sizeof(*h), 0), (ssize_t)sizeof(*h));
	CHECK_EQ(pread(fd, f, sizeof(*f), (off_t)h->metric_off),
		 (ssize_t)sizeof(*f));
	CHECK_EQ(pread(fd, r, sizeof(*r), (off_t)h->series_off),
		 (ssize_t)sizeof(*r));
	close(fd);
}

/*
 * Copies the file @src to @dst with its holes (only the data runs are
 * written), replacing @dst.  It reads with the system call itself, not
 * pread(), which a test may interpose to split the reader's reads.
 */
static inline void copy_sparse(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY), out;
	struct stat st;
	off_t pos = 0;
	char *buf = malloc(1 << 16);

	CHECK(in >= 0 && buf);
	CHECK_EQ(fstat(in, &st), 0);
	unlink(dst);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(out >= 0);
	CHECK_EQ(ftruncate(out, st.st_size), 0);
	while (pos < st.st_size) {
		off_t d = lseek(in, pos, SEEK_DATA), h;

		if (d < 0)
			break;
		h = lseek(in, d, SEEK_HOLE);
		CHECK(h > d);
		for (off_t o = d; o < h;) {
			size_t n = (size_t)(h - o) < (1u << 16) ?
					   (size_t)(h - o) : (1u << 16);
			ssize_t r = syscall(SYS_pread64, in, buf, n, o);

			CHECK(r > 0);
			CHECK_EQ(pwrite(out, buf, (size_t)r, o), r);
			o += r;
		}
		pos = h;
	}
	close(in);
	close(out);
	free(buf);
}

#endif
