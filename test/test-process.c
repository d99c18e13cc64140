/*
 * test-process.c: process identity and lifecycle (src/process/process.c).
 *
 * Proves that a forked child is its own process for the pool: the chunks
 * it takes carry its own pid and start time, so a parent that runs the
 * zone dry never takes back a chunk the live child allocates from (no
 * block is ever held by two live processes), while the chunks of a child
 * that was killed are still taken back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "core/core.h"
#include "tally/tally.h"

#define ZONE_CHUNKS 3
#define NSLOTS ((int)TALLY_CHUNK_SLOTS) /* one-slot blocks: a chunk's worth */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(9);
		p += w;
		n -= (size_t)w;
	}
}

static int read_all(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int contains(tally_block *const *set, int n, tally_block *b)
{
	for (int i = 0; i < n; i++)
		if (set[i] == b)
			return 1;
	return 0;
}

/*
 * The parent allocates (so that libtally knows its identity), forks a
 * child a few clock ticks later (so that their start times differ), the
 * child takes a chunk of its own, and the parent then allocates until the
 * zone is full, which makes the pool look for chunks of dead owners.  The
 * live child must keep its whole chunk: it allocates the rest of it
 * afterwards, and no block may be handed to both processes.
 */
TEST(a_live_childs_chunk_is_never_taken_back)
{
	struct tally_zone_opts o = { .capacity = ZONE_CHUNKS * NSLOTS };
	static tally_block *mine[ZONE_CHUNKS * NSLOTS], *theirs[NSLOTS];
	int to_child[2], from_child[2], status, nmine = 0, ntheirs = 0;
	struct tally_zone *z;
	tally_block *b;
	pid_t pid;
	char go = 'g';

	for (unsigned mode = 0; mode <= TALLY_ADAPTIVE; mode++) {
		char name[32];

		snprintf(name, sizeof(name), "forkid%u", mode);
		z = tally_zone_create(name, &o);
		CHECK(z != NULL);
		nmine = ntheirs = 0;
		mine[nmine++] = tally_block_alloc(z, 1, mode);
		CHECK(mine[0] != NULL);
		sleep_ms(40); /* start times count in 10 ms clock ticks */
		CHECK(pipe(to_child) == 0 && pipe(from_child) == 0);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			int n = 0;

			theirs[n++] = tally_block_alloc(z, 1, mode);
			write_all(from_child[1], &theirs[0], sizeof(theirs[0]));
			if (read_all(to_child[0], &go, 1) < 0)
				_exit(8);
			/* The rest of this process's chunk. */
			while (n < NSLOTS && (b = tally_block_alloc(z, 1, mode)))
				theirs[n++] = b;
			write_all(from_child[1], &n, sizeof(n));
			write_all(from_child[1], theirs, sizeof(theirs[0]) * (size_t)n);
			_exit(0);
		}
		CHECK_EQ(read_all(from_child[0], &theirs[0], sizeof(theirs[0])), 0);
		CHECK(theirs[0] != NULL);
		while (nmine < ZONE_CHUNKS * NSLOTS &&
		       (b = tally_block_alloc(z, 1, mode)))
			mine[nmine++] = b;
		CHECK_EQ(errno, ENOSPC);
		/* Two chunks were the parent's to take; the child's was not. */
		CHECK_EQ(nmine, 2 * NSLOTS);
		CHECK(write(to_child[1], &go, 1) == 1);
		CHECK_EQ(read_all(from_child[0], &ntheirs, sizeof(ntheirs)), 0);
		CHECK(ntheirs >= 1 && ntheirs <= NSLOTS);
		CHECK_EQ(read_all(from_child[0], theirs,
				  sizeof(theirs[0]) * (size_t)ntheirs), 0);
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		CHECK_CHILD_OK(status);
		CHECK_EQ(ntheirs, NSLOTS);
		for (int i = 0; i < ntheirs; i++)
			CHECK(!contains(mine, nmine, theirs[i]));
		close(to_child[0]);
		close(to_child[1]);
		close(from_child[0]);
		close(from_child[1]);
		CHECK_EQ(tally_zone_destroy(z), 0);
	}
}

/* The same fork, but the child is killed owning its chunk: the parent
 * running the zone dry takes that chunk back and gets all three. */
TEST(a_killed_childs_chunk_is_taken_back)
{
	struct tally_zone_opts o = { .capacity = ZONE_CHUNKS * NSLOTS };
	struct tally_zone *z = tally_zone_create("forkdead", &o);
	int from_child[2], status, n = 1;
	tally_block *first, *b;
	pid_t pid;

	CHECK(z != NULL);
	first = tally_block_alloc(z, 1, TALLY_PERCPU);
	CHECK(first != NULL);
	sleep_ms(40);
	CHECK(pipe(from_child) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		b = tally_block_alloc(z, 1, TALLY_PERCPU);
		write_all(from_child[1], &b, sizeof(b));
		for (;;)
			pause();
	}
	CHECK_EQ(read_all(from_child[0], &b, sizeof(b)), 0);
	CHECK(b != NULL);
	kill(pid, SIGKILL);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	while ((b = tally_block_alloc(z, 1, TALLY_PERCPU)))
		n++;
	CHECK_EQ(errno, ENOSPC);
	/* The child's one block stays allocated: it was never freed. */
	CHECK_EQ(n, ZONE_CHUNKS * NSLOTS - 1);
	close(from_child[0]);
	close(from_child[1]);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/* A grandchild forked from a child forked from the parent: each knows
 * its own pid and start time. */
TEST(identity_is_renewed_in_every_child)
{
	struct tally__self self;
	int status;
	pid_t pid;

	tally__self_get(&self);
	CHECK_EQ(self.pid, getpid());
	CHECK(self.start == tally__proc_start(getpid()));
	sleep_ms(40);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct tally__self c;
		pid_t g;

		tally__self_get(&c);
		if (c.pid != getpid() || c.start != tally__proc_start(getpid()) ||
		    c.start == self.start)
			_exit(1);
		sleep_ms(40);
		g = fork();
		if (g == 0) {
			struct tally__self gc;

			tally__self_get(&gc);
			_exit(gc.pid == getpid() &&
			      gc.start == tally__proc_start(getpid()) &&
			      gc.start != c.start ? 0 : 1);
		}
		if (g < 0 || waitpid(g, &status, 0) != g ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			_exit(2);
		_exit(tally__proc_alive(c.pid, c.start) == 1 ? 0 : 3);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_CHILD_OK(status);
	/* Gone, and a live pid with another start time is not the same. */
	CHECK_EQ(tally__proc_alive(pid, self.start + 1), 0);
	CHECK_EQ(tally__proc_alive(getpid(), self.start), 1);
	CHECK_EQ(tally__proc_alive(getpid(), self.start + 1), 0);
}
