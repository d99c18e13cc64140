/*
 * test-pool.c: the zone's chunk pool when processes die and fork.
 *
 * Proves that the chunks a process still owned when it died (killed, or
 * ended with _exit(), so that nothing released them) are taken back when
 * the zone runs out, and that fork() in one thread while another creates
 * a zone never leaves the child stuck on a lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tally/tally.h"

/* A zone of 8 chunks: a child takes them all and dies owning them. */
TEST(chunks_of_dead_owners_are_taken_back)
{
	struct tally_zone_opts o = { .capacity = 8 * TALLY_CHUNK_SLOTS };

	for (int how = 0; how < 2; how++) {
		struct tally_zone *z = tally_zone_create(how ? "killed" : "exited",
							 &o);
		int status, n = 0;
		pid_t pid;

		CHECK(z != NULL);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			/* Fill all 8 chunks (the thread keeps them all: its
			 * current one and up to 8 full ones), free every
			 * block as their owner, and die owning the chunks. */
			static tally_block *b[8 * TALLY_CHUNK_SLOTS];

			for (n = 0; n < 8 * (int)TALLY_CHUNK_SLOTS; n++)
				if (!(b[n] = tally_block_alloc(z, 1, TALLY_PERCPU)))
					_exit(2);
			for (n = 0; n < 8 * (int)TALLY_CHUNK_SLOTS; n++)
				if (tally_block_free(z, b[n]))
					_exit(3);
			if (how == 0)
				_exit(0);
			kill(getpid(), SIGKILL);
		}
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		CHECK(how == 0 ? WIFEXITED(status) && WEXITSTATUS(status) == 0 :
				 WIFSIGNALED(status));
		/* The zone is full of a dead process's chunks: allocation
		 * takes them back instead of failing. */
		for (int i = 0; i < 4 * (int)TALLY_CHUNK_SLOTS; i++) {
			tally_block *b = tally_block_alloc(z, 1, TALLY_PERCPU);
			int64_t v = -1;

			CHECK(b != NULL);
			tally_block_add(b, 0, 1);
			CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
			CHECK_EQ(v, 1);
			CHECK_EQ(tally_block_free(z, b), 0);
		}
		CHECK_EQ(tally_zone_destroy(z), 0);
	}
}

static atomic_int stop;

static void *creator(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		struct tally_zone *z = tally_zone_create("churn", NULL);

		if (z)
			tally_zone_destroy(z);
	}
	return NULL;
}

TEST_TIMEOUT(fork_while_creating_zones_never_deadlocks, 60)
{
	pthread_t t;

	/* The default zone is created in the children, racing with the
	 * creator thread of the parent at the moment of fork(). */
	CHECK_EQ(pthread_create(&t, NULL, creator, NULL), 0);
	for (int i = 0; i < harness_scale(200); i++) {
		int status;
		pid_t pid = fork();

		CHECK(pid >= 0);
		if (pid == 0) {
			alarm(10);
			tally_block *b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
			struct tally_zone *z = tally_zone_create("child", NULL);

			_exit(b && z ? 0 : 1);
		}
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
}
