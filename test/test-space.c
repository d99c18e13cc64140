/*
 * test-space.c: pages are reserved for real before they are written
 * (src/core/space.c), so that a zone fits what it really uses and a full file
 * system never kills a writer.
 *
 * Proves that:
 *   - with 256 slabs and 2 CPUs writing, 500,000 counters fit in a 64 MiB
 *     tmpfs, at about 8 bytes per CPU that wrote plus 8 (the page each
 *     chunk reserves), where promising one page per possible CPU fitted
 *     some 15,000;
 *   - when another process fills the file system to the last byte while
 *     threads on every CPU keep adding to 100,000 counters, and some of
 *     those CPUs (or fallback copies) write a chunk for the first time
 *     after that, no writer dies, every total is exact (the adds that
 *     found no room were spilled to the baselines), the refusals are
 *     counted in the segment, and new allocations fail with ENOSPC.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

/*
 * Mounts a tmpfs of @size at a mount point of the test named @name;
 * skips when not allowed.  The harness unmounts and removes it when the
 * test ends, also when the test fails before its own umount().
 * TALLY_TEST_FAIL_ON_TMPFS=fail or =kill makes the test fail (or die of
 * SIGKILL) right after the mount: test/check-space-cleanup.sh uses it to
 * show that a failed test leaves nothing mounted.
 */
static void mount_tmpfs(char *dir, size_t n, const char *name,
			const char *size)
{
	const char *force = getenv("TALLY_TEST_FAIL_ON_TMPFS");

	harness_mount_point(dir, n, name);
	mount_tmpfs_on(dir, size);
	if (force && !strcmp(force, "fail"))
		harness_fail(__FILE__, __LINE__, "failing on %s, as "
			     "TALLY_TEST_FAIL_ON_TMPFS says", dir);
	if (force && !strcmp(force, "kill"))
		raise(SIGKILL);
}

struct job {
	char dir[PATH_MAX];
	long n;
	char msg[256];
};

static struct job *new_job(void)
{
	return shared_mem(sizeof(struct job));
}

/* Runs @fn in a fresh process, unmounts @j->dir, fails on a signal. */
static void run_on_tmpfs(void (*fn)(void *), struct job *j)
{
	int status = harness_child(fn, j);

	CHECK_EQ(umount(j->dir), 0);
	CHECK_EQ(rmdir(j->dir), 0);
	if (WIFSIGNALED(status))
		harness_fail(__FILE__, __LINE__, "the writer was killed by "
			     "signal %d (%s): %s", WTERMSIG(status),
			     strsignal(WTERMSIG(status)), j->msg);
	CHECK_CHILD_OK(status);
}

struct adder {
	tally_block **b;
	long n;
	int cpu;
	int rounds;
	_Atomic int *go;
	_Atomic int *started; /* counts the adders waiting for *go */
};

static void *adder(void *arg)
{
	struct adder *a = arg;

	harness_pin(a->cpu);
	/* An add of 0 takes this thread's copy now (without rseq, its
	 * fallback copy: all the adders own one at the same time). */
	tally_block_add(a->b[0], 0, 0);
	if (a->started)
		atomic_fetch_add(a->started, 1);
	while (a->go && !atomic_load(a->go))
		usleep(100);
	for (int r = 0; r < a->rounds; r++)
		for (long i = 0; i < a->n; i++)
			tally_block_add(a->b[i], 0, 1);
	return NULL;
}

/* ---- capacity ---- */

static void capacity_child(void *arg)
{
	struct job *j = arg;
	struct tally_zone_opts o = { .capacity = (size_t)j->n };
	struct tally_zone_usage u;
	struct tally_zone *z;
	struct adder a[2];
	pthread_t t[2];
	tally_block **b;
	uint64_t r0, per;

	fresh_setenv("TALLY_DIR", j->dir);
	fresh_setenv("TALLY_NSLABS", "256");
	z = tally_zone_create("capacity", &o);
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK_EQ(tally_zone_usage(z, &u), 0);
	r0 = u.resident_bytes;
	b = calloc((size_t)j->n, sizeof(*b));
	CHECK(b != NULL);
	for (long i = 0; i < j->n; i++) {
		b[i] = tally_block_alloc(z, 1, TALLY_PERCPU);
		if (!b[i])
			harness_fail(__FILE__, __LINE__, "counter %ld of %ld: "
				     "%s", i, j->n, tally_errmsg());
	}
	for (int k = 0; k < 2; k++) {
		a[k] = (struct adder){ b, j->n, k, 1, NULL, NULL };
		CHECK_EQ(pthread_create(&t[k], NULL, adder, &a[k]), 0);
	}
	for (int k = 0; k < 2; k++)
		CHECK_EQ(pthread_join(t[k], NULL), 0);
	for (long i = 0; i < j->n; i++) {
		int64_t v;

		CHECK_EQ(tally_block_fetch(b[i], 0, &v), 0);
		CHECK_EQ(v, 2);
	}
	CHECK_EQ(tally_zone_usage(z, &u), 0);
	per = (u.resident_bytes - r0) / (uint64_t)j->n;
	snprintf(j->msg, sizeof(j->msg), "%ld counters, %llu bytes each",
		 j->n, (unsigned long long)per);
	/* 8 bytes for each of the 2 CPUs and for page 0, over 504 of every
	 * 512 slots, plus the chunk table: 24.4 bytes, and never 2 KB. */
	if (per > 26)
		harness_fail(__FILE__, __LINE__, "%s: more than 26", j->msg);
	free(b);
}

TEST_TIMEOUT(half_a_million_counters_fit_in_64_mib_with_256_slabs, 300)
{
	struct job *j = new_job();

	if (harness_ncpus() < 2)
		harness_skip("needs 2 CPUs");
	j->n = 500000;
	mount_tmpfs(j->dir, sizeof(j->dir), "cap64", "64m");
	run_on_tmpfs(capacity_child, j);
	printf("  %s\n", j->msg);
}

/* ---- theft ---- */

/* Writes zeros to a file in @dir until the file system is full, then
 * keeps taking whatever frees up until told to stop. */
static void fill_until(const char *dir, _Atomic int *stop)
{
	char path[PATH_MAX], page[4096] = { 0 };
	int fd;

	snprintf(path, sizeof(path), "%s/thief", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0)
		_exit(2);
	while (!atomic_load(stop)) {
		if (write(fd, page, sizeof(page)) < 0) {
			if (errno != ENOSPC)
				_exit(3);
			usleep(200);
		}
	}
	_exit(0);
}

static void theft_child(void *arg)
{
	struct job *j = arg;
	struct tally_zone_opts o = { .capacity = (size_t)j->n * 2 };
	_Atomic int *flags = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int ncpu = harness_ncpus() < 4 ? harness_ncpus() : 4, rounds = 3;
	struct adder a[4];
	pthread_t t[4];
	struct tally_seg_info info;
	struct tally_seg *s;
	struct tally_zone *z;
	struct statvfs sv;
	tally_block **b, *x;
	pid_t thief;
	long extra = 0;
	int status;

	CHECK(flags != MAP_FAILED);
	fresh_setenv("TALLY_DIR", j->dir);
	z = tally_zone_create("theft", &o);
	CHECK(z != NULL);
	b = calloc((size_t)j->n, sizeof(*b));
	CHECK(b != NULL);
	for (long i = 0; i < j->n; i++) {
		b[i] = tally_block_alloc(z, 1, TALLY_PERCPU);
		CHECK(b[i] != NULL);
	}
	/* CPU 0 writes every counter first: only its copies exist. */
	a[0] = (struct adder){ b, j->n, 0, 1, NULL, NULL };
	CHECK_EQ(pthread_create(&t[0], NULL, adder, &a[0]), 0);
	CHECK_EQ(pthread_join(t[0], NULL), 0);

	/* Another process takes every free byte, and keeps taking. */
	thief = fork();
	CHECK(thief >= 0);
	if (thief == 0)
		fill_until(j->dir, &flags[0]);
	do {
		usleep(1000);
		CHECK(statvfs(j->dir, &sv) == 0);
	} while (sv.f_bavail > 0);

	/* Now threads on every CPU (each with a fallback copy of its own
	 * without rseq) add to every counter: most of their copies were
	 * never written, and there is no room for them. */
	for (int k = 0; k < ncpu; k++) {
		a[k] = (struct adder){ b, j->n, k, rounds, &flags[1],
				       &flags[2] };
		CHECK_EQ(pthread_create(&t[k], NULL, adder, &a[k]), 0);
	}
	while (atomic_load(&flags[2]) < ncpu)
		usleep(100);
	atomic_store(&flags[1], 1);
	for (int k = 0; k < ncpu; k++)
		CHECK_EQ(pthread_join(t[k], NULL), 0);
	/* An add that finds no room leaves errno alone (async-signal-safe):
	 * past the zone's 10 ms of not asking, this first add of the thread's
	 * CPU to a chunk whose copies were refused tries to reserve again,
	 * and fails. */
	x = tally_block_alloc(z, 1, TALLY_PERCPU);
	if (x) {
		usleep(20000);
		errno = EDOM;
		tally_block_add(x, 0, 0);
		CHECK_EQ(errno, EDOM);
		CHECK_EQ(tally_block_free(z, x), 0);
	}

	/* New allocations: the rest of the current chunk, then ENOSPC. */
	while ((x = tally_block_alloc(z, 1, TALLY_PERCPU)) != NULL)
		CHECK(++extra <= (long)TALLY_CHUNK_SLOTS);
	CHECK_EQ(errno, ENOSPC);
	atomic_store(&flags[0], 1);
	CHECK_EQ(waitpid(thief, &status, 0), thief);
	CHECK_CHILD_OK(status);

	for (long i = 0; i < j->n; i++) {
		int64_t v;

		CHECK_EQ(tally_block_fetch(b[i], 0, &v), 0);
		if (v != 1 + (int64_t)ncpu * rounds)
			harness_fail(__FILE__, __LINE__, "counter %ld: %lld, "
				     "expected %d", i, (long long)v,
				     1 + ncpu * rounds);
	}
	/* Readers see the refusals. */
	s = tally_seg_open(tally_zone_path(z), NULL);
	CHECK(s != NULL);
	CHECK_EQ(tally_seg_info(s, &info), 0);
	snprintf(j->msg, sizeof(j->msg), "%llu copies refused, %llu "
		 "allocations refused", (unsigned long long)info.copies_refused,
		 (unsigned long long)info.alloc_refused);
	CHECK(info.copies_refused > 0);
	CHECK(info.alloc_refused > 0);
	tally_seg_close(s);
	free(b);
}

TEST_TIMEOUT(a_full_file_system_never_kills_a_writer, 300)
{
	struct job *j = new_job();

	j->n = 100000;
	mount_tmpfs(j->dir, sizeof(j->dir), "theft", "8m");
	run_on_tmpfs(theft_child, j);
	printf("  %s\n", j->msg);
}
