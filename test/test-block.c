/*
 * test-block.c: tally_block_add() loses no count.
 *
 * In every mode (percpu, shared, pernode, adaptive) it proves that:
 *   - N threads x R adds give exactly N x R, for N = 1, 2, 16 and 64 on
 *     this machine's CPUs, while every thread keeps moving itself from CPU
 *     to CPU and a signal handler adds to the same slots in the middle of
 *     the threads' adds (the expected totals count every handler run);
 *   - signed adds to the slots of one block stay apart and exact, and an
 *     in-flight gauge (+1, then -1) ends at exactly 0;
 *   - processes forked after the allocation add to the same counters
 *     exactly;
 *   - tally_block_zero() racing with adds (and with another zero) loses
 *     and doubles nothing: adds == final value + everything removed;
 *   - an adaptive slot promotes itself under contention, never without
 *     it, and loses no count while it does.
 * CTest runs this program a second time with TALLY_NO_RSEQ=1: the atomic
 * fallback must give the same exact totals.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <unistd.h>

#include "harness.h"
#include "tally/tally.h"
#include "util.h"

/* The slots of the test blocks and what each thread adds to them. */
enum { S_COUNT, S_NEG, S_GAUGE, S_BIG, NSLOTS };
#define BIG ((int64_t)1 << 33)
#define MIGRATE_EVERY 1000
#define MAX_THREADS 64
#define MAX_SLABS 4096

/* ---- the signal handler ---- */

static tally_block *_Atomic sig_block;
static _Atomic long sig_runs, sig_runs_mid_adds;
static __thread volatile sig_atomic_t my_sig_runs, in_adds;

#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer delays signals to its interceptors: never mid-add. */
#define SIGNALS_MID_ADDS 0
#else
#define SIGNALS_MID_ADDS 1
#endif

/* Adds to the slots the interrupted thread may be adding to right now. */
static void on_sigusr1(int sig)
{
	tally_block *b = atomic_load(&sig_block);
	int saved = errno;

	(void)sig;
	if (b) {
		tally_block_add(b, S_COUNT, 1);
		tally_block_add(b, S_GAUGE, 1);
		tally_block_add(b, S_NEG, -3);
		tally_block_add(b, S_GAUGE, -1);
		atomic_fetch_add(&sig_runs, 1);
		if (in_adds)
			atomic_fetch_add(&sig_runs_mid_adds, 1);
	}
	my_sig_runs = my_sig_runs + 1;
	errno = saved;
}

static void install_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigusr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
}

/* ---- N threads x R adds, migrating and signalled ---- */

struct run {
	tally_block *b;
	long iters;
	int nthreads;
	int signals;             /* run a signaller thread */
	int slot_only;           /* -1: every slot; else add 1 to this slot */
	_Atomic int finished;
	pthread_barrier_t start; /* the workers and run_workers(): they all
				  * start adding at once */
	pthread_barrier_t done;  /* the workers and the signaller */
	pthread_t tid[MAX_THREADS];
};

struct worker {
	struct run *r;
	int index;
};

/* Worker i moves to CPU (i + step) mod n, or to all CPUs, every
 * MIGRATE_EVERY adds: threads keep changing CPU in the middle of adds. */
static void migrate(int index, long step)
{
	int n = harness_ncpus();
	long k = (index + step) % (n + 1);

	harness_pin(k == n ? -1 : (int)k);
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	tally_block *b = r->b;

	pthread_barrier_wait(&r->start);
	in_adds = 1;
	for (long i = 0; i < r->iters; i++) {
		if (i % MIGRATE_EVERY == 0)
			migrate(w->index, i / MIGRATE_EVERY);
		if (r->slot_only >= 0) {
			tally_block_add(b, (unsigned)r->slot_only, 1);
			continue;
		}
		tally_block_add(b, S_COUNT, 1);
		tally_block_add(b, S_GAUGE, 1);
		tally_block_add(b, S_NEG, -3);
		tally_block_add(b, S_BIG, BIG);
		tally_block_add(b, S_GAUGE, -1);
	}
	in_adds = 0;
	harness_pin(-1);
	/* Every worker is interrupted at least once.  (A sleep, not a busy
	 * wait: ThreadSanitizer delivers signals in intercepted calls.) */
	while (r->signals && my_sig_runs == 0)
		usleep(100);
	atomic_fetch_add(&r->finished, 1);
	pthread_barrier_wait(&r->done);
	return NULL;
}

static void *signaller(void *arg)
{
	struct run *r = arg;
	unsigned i = 0;

	while (atomic_load(&r->finished) < r->nthreads) {
		pthread_kill(r->tid[i++ % (unsigned)r->nthreads], SIGUSR1);
		usleep(50);
	}
	pthread_barrier_wait(&r->done);
	return NULL;
}

/* Runs n workers of iters adds each on b; returns the handler's runs. */
static long run_workers(tally_block *b, int n, long iters, int signals,
			int slot_only)
{
	struct run r = { .b = b, .iters = iters, .nthreads = n,
			 .signals = signals, .slot_only = slot_only };
	struct worker w[MAX_THREADS];
	pthread_t sig;

	CHECK(n <= MAX_THREADS);
	CHECK_EQ(pthread_barrier_init(&r.start, NULL, (unsigned)n + 1), 0);
	CHECK_EQ(pthread_barrier_init(&r.done, NULL, (unsigned)n + 1), 0);
	atomic_store(&sig_runs, 0);
	atomic_store(&sig_block, signals ? b : NULL);
	for (int i = 0; i < n; i++) {
		w[i].r = &r;
		w[i].index = i;
		CHECK_EQ(pthread_create(&r.tid[i], NULL, worker, &w[i]), 0);
	}
	pthread_barrier_wait(&r.start);
	if (signals) {
		CHECK_EQ(pthread_create(&sig, NULL, signaller, &r), 0);
	} else {
		while (atomic_load(&r.finished) < n)
			usleep(1000);
		pthread_barrier_wait(&r.done);
	}
	for (int i = 0; i < n; i++)
		CHECK_EQ(pthread_join(r.tid[i], NULL), 0);
	if (signals)
		CHECK_EQ(pthread_join(sig, NULL), 0);
	atomic_store(&sig_block, NULL);
	pthread_barrier_destroy(&r.start);
	pthread_barrier_destroy(&r.done);
	if (signals)
		CHECK(atomic_load(&sig_runs) >= n);
	return atomic_load(&sig_runs);
}

static int64_t fetch(tally_block *b, unsigned slot)
{
	int64_t v = 0x5a5a5a5a;

	CHECK_EQ(tally_block_fetch(b, slot, &v), 0);
	return v;
}

/* The slots after `adds` worker iterations and `runs` handler runs. */
static void check_totals(tally_block *b, long adds, long runs)
{
	CHECK_EQ(fetch(b, S_COUNT), adds + runs);
	CHECK_EQ(fetch(b, S_NEG), -3 * (adds + runs));
	CHECK_EQ(fetch(b, S_GAUGE), 0);
	CHECK_EQ(fetch(b, S_BIG), (int64_t)adds * BIG);
}

static unsigned nslabs(void)
{
	struct tally_zone_usage u;

	CHECK_EQ(tally_zone_usage(tally_zone_default(), &u), 0);
	return u.nslabs;
}

static unsigned nnodes(void)
{
	struct tally_zone_usage u;

	CHECK_EQ(tally_zone_usage(tally_zone_default(), &u), 0);
	return u.nnodes;
}

/*
 * The raw copies of S_COUNT hold the value where the mode says they do.
 * For percpu blocks, once two threads (or, with rseq, one migrating
 * thread) added, two copies must hold counts.
 */
static void check_copies(tally_block *b, unsigned mode, int nthreads,
			 int rseq)
{
	static int64_t out[MAX_SLABS];
	int64_t value = fetch(b, S_COUNT), sum = 0;
	unsigned n = nslabs();
	int rc = tally_block_fetch_percpu(b, S_COUNT, out, MAX_SLABS);

	CHECK_EQ(rc, n);
	for (unsigned c = 0; c < n; c++)
		sum += out[c];
	switch (mode) {
	case TALLY_PERCPU:
		if (rseq) {
			CHECK_EQ(sum, value);
			if (harness_ncpus() >= 2 && n >= 2) {
				CHECK(out[harness_cpu(0)] != 0);
				CHECK(out[harness_cpu(1)] != 0);
			}
		} else {
			/* Fallback copies have one owner each; the adds of
			 * the threads that found none went to the baseline
			 * (positive adds: the copies hold at most the value). */
			int owners = 0;

			for (unsigned c = 0; c < n; c++) {
				CHECK(out[c] >= 0);
				owners += out[c] != 0;
			}
			CHECK(sum <= value);
			CHECK(owners >= 1);
			CHECK(owners <= nthreads);
		}
		break;
	case TALLY_SHARED:
		CHECK_EQ(out[0], value);
		CHECK_EQ(sum, value);
		break;
	case TALLY_PERNODE:
		CHECK_EQ(sum, value);
		for (unsigned c = nnodes(); c < n; c++)
			CHECK_EQ(out[c], 0);
		if (nnodes() >= 2 && harness_ncpus() >= 2) {
			CHECK(out[0] != 0);
			CHECK(out[1] != 0);
		}
		break;
	case TALLY_ADAPTIVE:
		/* Adds made before promotion are in no copy: sum <= value
		 * cannot be said of signed adds, so only the total counts. */
		break;
	}
}

/*
 * The worker iterations of each thread in a round of exact_totals() with
 * @n threads.  One thread, and two (adding in parallel on two CPUs), make
 * ROUND_ITERS each: the signaller has a CPU to itself often enough there
 * to interrupt them in the middle of their adds many times.  The
 * oversubscribed rounds (16 and 64 threads, more than a small machine has
 * CPUs) share SHARED_ITERS among their threads: what such a round needs
 * is many threads adding at the same time (they start together), each
 * migrated MIN_MIGRATIONS times at least and preempted in the middle of
 * its adds, and its share of that total gives every thread that; more
 * adds a thread would repeat the same interleavings.
 */
#define ROUND_ITERS    200000
#define SHARED_ITERS   1600000
#define MIN_MIGRATIONS 8

static long round_iters(int n)
{
	long iters = n <= 2 ? harness_scale(ROUND_ITERS) :
		     harness_scale(SHARED_ITERS) / n;

	if (iters < MIN_MIGRATIONS * MIGRATE_EVERY)
		iters = MIN_MIGRATIONS * MIGRATE_EVERY;
	return iters;
}

static void exact_totals(unsigned mode)
{
	static const int nthreads[] = { 1, 2, 16, 64 };

	install_handler();
	atomic_store(&sig_runs_mid_adds, 0);
	for (unsigned i = 0; i < sizeof(nthreads) / sizeof(nthreads[0]); i++) {
		int n = nthreads[i];
		tally_block *b = tally_block_alloc(NULL, NSLOTS, mode);
		long iters = round_iters(n), runs;

		CHECK(b != NULL);
		CHECK_EQ(tally_block_mode(b), mode);
		runs = run_workers(b, n, iters, 1, -1);
		check_totals(b, (long)n * iters, runs);
		check_copies(b, mode, n, tally_rseq_active());
		CHECK_EQ(tally_block_free(NULL, b), 0);
	}
	/* The handler did interrupt threads in the middle of their adds. */
	if (SIGNALS_MID_ADDS)
		CHECK(atomic_load(&sig_runs_mid_adds) > 0);
}

TEST(percpu_exact_totals) { exact_totals(TALLY_PERCPU); }
TEST(shared_exact_totals) { exact_totals(TALLY_SHARED); }
TEST(pernode_exact_totals) { exact_totals(TALLY_PERNODE); }
TEST(adaptive_exact_totals) { exact_totals(TALLY_ADAPTIVE); }

static void two_nodes_child(void *arg)
{
	(void)arg;
	fresh_setenv("TALLY_NODES", "2");
	CHECK_EQ(nnodes(), 2);
	exact_totals(TALLY_PERNODE);
	exact_totals(TALLY_ADAPTIVE);
}

/* With TALLY_NODES=2, CPU c is on node c % 2: pernode blocks then have
 * two copies, both written by migrating threads. */
TEST(pernode_two_nodes_exact_totals)
{
	CHECK_CHILD_OK(harness_child(two_nodes_child, NULL));
}

/* ---- rseq or fallback, as the environment says ---- */

static int rseq_expected(void)
{
	const char *s = getenv("TALLY_NO_RSEQ");
	const char *t = getenv("GLIBC_TUNABLES");

	if (s && *s && strcmp(s, "0") != 0)
		return 0;
	if (t && strstr(t, "glibc.pthread.rseq=0"))
		return 0;
	/* This host (Linux 6.x, glibc 2.36) has rseq, registered by glibc:
	 * if that ever changes, the test must say so, not pass quietly. */
	CHECK(__rseq_size >= 20);
	return 1;
}

static void *rseq_thread(void *arg)
{
	int *out = arg;

	for (int i = 0; i < harness_ncpus(); i++) {
		harness_pin(i);
		out[i] = tally_rseq_active();
	}
	return NULL;
}

TEST(rseq_active_matches_environment)
{
	int expected = rseq_expected(), seen[CPU_SETSIZE];
	pthread_t t;

	CHECK(tally_zone_default() != NULL);
	CHECK_EQ(tally_rseq_active(), expected);
	CHECK_EQ(pthread_create(&t, NULL, rseq_thread, seen), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	for (int i = 0; i < harness_ncpus(); i++)
		CHECK_EQ(seen[i], expected);
}

/* The answer does not depend on whether libtally was used before. */
TEST(rseq_active_before_first_use)
{
	int expected = rseq_expected();

	CHECK(!tally_initialised());
	CHECK_EQ(tally_rseq_active(), expected);
}

/*
 * With rseq, an add lands in the copy of the CPU it ran on; without it,
 * in the one fallback copy of the calling thread.  Either way exactly.
 */
TEST(percpu_adds_land_on_the_local_copy)
{
	static int64_t out[MAX_SLABS];
	tally_block *b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
	int rseq = tally_rseq_active();
	unsigned n = nslabs();
	int64_t total = 0, nonzero = 0;

	CHECK(b != NULL);
	for (int i = 0; i < harness_ncpus(); i++) {
		harness_pin(i);
		for (int k = 0; k < 1000; k++)
			tally_block_add(b, 0, i + 1);
		total += 1000 * (i + 1);
	}
	CHECK_EQ(tally_block_fetch_percpu(b, 0, out, MAX_SLABS), n);
	for (unsigned c = 0; c < n; c++)
		nonzero += out[c] != 0;
	if (rseq) {
		for (int i = 0; i < harness_ncpus(); i++)
			if ((unsigned)harness_cpu(i) < n)
				CHECK_EQ(out[harness_cpu(i)], 1000 * (i + 1));
		CHECK_EQ(nonzero, harness_ncpus());
	} else {
		CHECK_EQ(nonzero, 1);
	}
	CHECK_EQ(fetch(b, 0), total);
}

/* The raw copies are refused a NULL or short buffer. */
TEST(fetch_arguments_are_checked)
{
	static int64_t out[MAX_SLABS];
	tally_block *b = tally_block_alloc(NULL, 2, TALLY_PERCPU);
	unsigned n = nslabs();

	CHECK(b != NULL);
	CHECK_EQ(tally_block_fetch(b, 0, NULL), -EINVAL);
	CHECK_EQ(tally_block_fetch(b, 2, out), -EINVAL);
	CHECK_EQ(tally_block_fetch_percpu(b, 0, NULL, MAX_SLABS), -EINVAL);
	CHECK_EQ(tally_block_fetch_percpu(b, 0, out, n - 1), -ERANGE);
	CHECK_EQ(tally_block_fetch_percpu(b, 2, out, n), -EINVAL);
	CHECK_EQ(tally_block_fetch_percpu(b, 1, out, n), n);
	CHECK_EQ(tally_block_zero(b, 2, NULL), -EINVAL);
	CHECK_EQ(tally_block_promoted(b, 2), -EINVAL);
}

/* ---- processes ---- */

/*
 * Children forked after the allocation add to the parent's counters
 * (through the inherited zone) while the parent adds too.
 */
TEST(processes_share_counters)
{
	enum { NCHILD = 3, THREADS = 4 };
	long iters = harness_scale(40000);

	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_ADAPTIVE; mode++) {
		tally_block *b = tally_block_alloc(NULL, NSLOTS, mode);
		pid_t pid[NCHILD];
		int go[2];
		char c = 0;

		CHECK(b != NULL);
		CHECK_EQ(pipe(go), 0);
		for (int i = 0; i < NCHILD; i++) {
			pid[i] = fork();
			CHECK(pid[i] >= 0);
			if (pid[i] == 0) {
				close(go[1]);
				CHECK_EQ(read(go[0], &c, 1), 1);
				run_workers(b, THREADS, iters, 0, -1);
				_exit(0);
			}
		}
		close(go[0]);
		CHECK_EQ(write(go[1], "gggg", NCHILD), NCHILD);
		close(go[1]);
		run_workers(b, THREADS, iters, 0, -1);
		for (int i = 0; i < NCHILD; i++) {
			int status;

			CHECK_EQ(waitpid(pid[i], &status, 0), pid[i]);
			CHECK_CHILD_OK(status);
		}
		check_totals(b, (long)(NCHILD + 1) * THREADS * iters, 0);
		CHECK_EQ(tally_block_free(NULL, b), 0);
	}
}

/*
 * The fallback's copies are owned by one thread at a time, in every
 * process (src/core/add.c), and their owners add without a lock: with
 * TALLY_NO_RSEQ=1 (the -fallback run of this test) more threads than
 * copies, in a parent, its children and a grandchild (each claims copies
 * of its own), add to one counter while a thread of each process sends
 * signals whose handlers add too.  Any copy written by two threads
 * without a lock loses counts, and the total is exact only if none was.
 */
static tally_block *fb_block;
static _Atomic long *fb_sig_adds; /* in shared memory: every process's */

static void fb_sig_add(int sig)
{
	(void)sig;
	tally_block_add(fb_block, 0, 1);
	atomic_fetch_add(fb_sig_adds, 1);
}

struct sig_worker {
	tally_block *b;
	long iters;
	pthread_t th;
	_Atomic int done;
};

static void *sig_worker_main(void *arg)
{
	struct sig_worker *w = arg;

	for (long i = 0; i < w->iters; i++)
		tally_block_add(w->b, 0, 1);
	atomic_store(&w->done, 1);
	return NULL;
}

static void adders_with_signals(tally_block *b, int threads, long iters)
{
	struct sig_worker w[8];
	int all;

	for (int i = 0; i < threads; i++) {
		w[i] = (struct sig_worker){ .b = b, .iters = iters };
		CHECK_EQ(pthread_create(&w[i].th, NULL, sig_worker_main, &w[i]),
			 0);
	}
	do {
		all = 1;
		for (int i = 0; i < threads; i++)
			if (!atomic_load(&w[i].done)) {
				pthread_kill(w[i].th, SIGUSR1);
				all = 0;
			}
		sched_yield();
	} while (!all);
	for (int i = 0; i < threads; i++)
		pthread_join(w[i].th, NULL);
}

TEST(fallback_owners_never_share_a_copy)
{
	enum { NCHILD = 3, THREADS = 5 };
	long iters = harness_scale(200000);
	struct sigaction sa;
	pid_t pid[NCHILD];
	int64_t v;

	fb_sig_adds = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(fb_sig_adds != MAP_FAILED);
	fb_block = tally_block_alloc(NULL, 1, TALLY_PERCPU);
	CHECK(fb_block != NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fb_sig_add;
	sa.sa_flags = SA_RESTART;
	CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	tally_block_add(fb_block, 0, 1); /* the main thread owns a copy */
	for (int i = 0; i < NCHILD; i++) {
		pid[i] = fork();
		CHECK(pid[i] >= 0);
		if (pid[i] == 0) {
			pid_t g = -1;
			int status;

			tally_block_add(fb_block, 0, 1);
			if (i == 0) { /* a grandchild */
				g = fork();
				if (g == 0) {
					adders_with_signals(fb_block, THREADS,
							    iters);
					_exit(0);
				}
			}
			adders_with_signals(fb_block, THREADS, iters);
			if (g > 0 && (waitpid(g, &status, 0) != g ||
				      !WIFEXITED(status) ||
				      WEXITSTATUS(status) != 0))
				_exit(1);
			_exit(0);
		}
	}
	adders_with_signals(fb_block, THREADS, iters);
	for (int i = 0; i < NCHILD; i++) {
		int status;

		CHECK_EQ(waitpid(pid[i], &status, 0), pid[i]);
		CHECK_CHILD_OK(status);
	}
	CHECK_EQ(tally_block_fetch(fb_block, 0, &v), 0);
	CHECK_EQ(v, (int64_t)(NCHILD + 2) * THREADS * iters + 1 + NCHILD +
		     atomic_load(fb_sig_adds));
	signal(SIGUSR1, SIG_DFL);
	CHECK_EQ(tally_block_free(NULL, fb_block), 0);
	munmap((void *)fb_sig_adds, 4096);
}

/*
 * Writers of format 2.3 and earlier add atomically to any fallback copy:
 * in a zone whose header says minor 3, nobody owns one, and the fallback
 * adds go to the baselines (counted, in no copy).  A zone of this
 * version's minor gets them in the thread's own copy.
 */
static int64_t fallback_copies_after_adds(const char *zone, uint16_t minor,
					  long adds)
{
	static int64_t out[MAX_SLABS];
	struct tally_zone *z = tally_zone_create(zone, NULL);
	tally_block *b;
	int64_t v, sum = 0;
	int fd, n;

	CHECK(z != NULL);
	if (minor) {
		fd = open(tally_zone_path(z), O_RDWR);
		CHECK(fd >= 0);
		CHECK_EQ(pwrite(fd, &minor, 2, 10), 2);
		close(fd);
	}
	b = tally_block_alloc(z, 1, TALLY_PERCPU);
	CHECK(b != NULL);
	for (long i = 0; i < adds; i++)
		tally_block_add(b, 0, 1);
	CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
	CHECK_EQ(v, adds);
	n = tally_block_fetch_percpu(b, 0, out, MAX_SLABS);
	CHECK(n > 0);
	for (int c = 0; c < n; c++)
		sum += out[c];
	CHECK_EQ(tally_zone_destroy(z), 0);
	return sum;
}

TEST(fallback_owns_no_copy_in_older_zones)
{
	long adds = harness_scale(100000);

	if (tally_rseq_active())
		harness_skip("rseq is active: run with TALLY_NO_RSEQ=1");
	CHECK_EQ(fallback_copies_after_adds("oldminor", 3, adds), 0);
	CHECK_EQ(fallback_copies_after_adds("thisminor", 0, adds), adds);
}

/* Without rseq, a thread that starts after others ended takes over a
 * copy of theirs: more threads, one after the other, than there are
 * copies, each find one of its own (its adds are in a copy, not in the
 * baseline). */
static int64_t copies_sum(tally_block *b, unsigned slot);

static void *add_thousand(void *arg)
{
	for (int i = 0; i < 1000; i++)
		tally_block_add(arg, 0, 1);
	return NULL;
}

TEST(fallback_copy_of_a_dead_thread_is_taken_over)
{
	unsigned threads = 3 * nslabs() + 2;

	if (tally_rseq_active())
		harness_skip("rseq is active: run with TALLY_NO_RSEQ=1");
	for (unsigned k = 0; k < threads; k++) {
		tally_block *b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
		pthread_t t;

		CHECK(b != NULL);
		CHECK_EQ(pthread_create(&t, NULL, add_thousand, b), 0);
		CHECK_EQ(pthread_join(t, NULL), 0);
		CHECK_EQ(fetch(b, 0), 1000);
		CHECK_EQ(copies_sum(b, 0), 1000);
		CHECK_EQ(tally_block_free(NULL, b), 0);
	}
}

/*
 * The thread that called fork() goes on adding in the parent and in the
 * child at the same time, with one fallback copy (TALLY_NSLABS=1): the
 * parent's thread owns that copy, and the child's (the same thread's
 * copy in the child) must not find its token there, or both would add
 * to it without a lock and lose counts.  The child renews its token
 * after fork; it then adds to the baseline (the copy is the parent's).
 * fallback_owners_never_share_a_copy cannot see this: every concurrent
 * add there comes from a thread created after the fork.
 */
static void forking_thread_adds_on_both_sides(void *arg)
{
	long iters = harness_scale(5000000);
	tally_block *b;
	int go[2], status;
	pid_t pid;
	int64_t v;
	char c;

	(void)arg;
	setenv("TALLY_NO_RSEQ", "1", 1);
	setenv("TALLY_NSLABS", "1", 1);
	CHECK(!tally_rseq_active());
	b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
	CHECK(b != NULL);
	CHECK_EQ(nslabs(), 1);
	tally_block_add(b, 0, 1); /* this thread owns the only copy */
	CHECK_EQ(copies_sum(b, 0), 1);
	CHECK_EQ(pipe(go), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		if (read(go[0], &c, 1) != 0)
			_exit(1);
		for (long i = 0; i < iters; i++)
			tally_block_add(b, 0, 1);
		_exit(0);
	}
	close(go[0]);
	close(go[1]); /* both start now */
	for (long i = 0; i < iters; i++)
		tally_block_add(b, 0, 1);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_CHILD_OK(status);
	CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
	CHECK_EQ(v, 2 * iters + 1);
	/* The parent's adds are in its copy, the child's in the baseline. */
	CHECK_EQ(copies_sum(b, 0), iters + 1);
}

TEST(fallback_forking_thread_adds_in_parent_and_child)
{
	CHECK_CHILD_OK(harness_child(forking_thread_adds_on_both_sides, NULL));
}

/* ---- zeroing ---- */

struct zeroer {
	tally_block *b;
	_Atomic int *stop;
	int64_t removed[NSLOTS];
	long calls, nonzero;
};

static void *zeroer(void *arg)
{
	struct zeroer *z = arg;

	while (!atomic_load(z->stop)) {
		for (unsigned s = 0; s < NSLOTS; s++) {
			int64_t r = 0x5a5a;

			CHECK_EQ(tally_block_zero(z->b, s, &r), 0);
			z->removed[s] += r;
			z->nonzero += r != 0;
		}
		z->calls++;
	}
	return NULL;
}

/*
 * Threads add (and a handler adds) while two threads zero every slot in
 * a loop: for each slot, what was added == the final value + the sum of
 * what the zeroes removed.
 */
static void zero_races_adds(unsigned mode)
{
	enum { THREADS = 8 };
	long iters = harness_scale(40000);
	tally_block *b = tally_block_alloc(NULL, NSLOTS, mode);
	struct zeroer z[2];
	_Atomic int stop = 0;
	pthread_t t[2];
	long runs, adds;
	int64_t removed[NSLOTS] = { 0 };

	if (iters < 5 * MIGRATE_EVERY)
		iters = 5 * MIGRATE_EVERY;
	CHECK(b != NULL);
	install_handler();
	for (int i = 0; i < 2; i++) {
		memset(&z[i], 0, sizeof(z[i]));
		z[i].b = b;
		z[i].stop = &stop;
		CHECK_EQ(pthread_create(&t[i], NULL, zeroer, &z[i]), 0);
	}
	runs = run_workers(b, THREADS, iters, 1, -1);
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pthread_join(t[i], NULL), 0);
		CHECK(z[i].calls > 0);
		for (unsigned s = 0; s < NSLOTS; s++)
			removed[s] += z[i].removed[s];
	}
	/* The zeroes really raced with the adds. */
	CHECK(z[0].nonzero + z[1].nonzero > 0);
	adds = (long)THREADS * iters;
	CHECK_EQ(fetch(b, S_COUNT) + removed[S_COUNT], adds + runs);
	CHECK_EQ(fetch(b, S_NEG) + removed[S_NEG], -3 * (adds + runs));
	CHECK_EQ(fetch(b, S_GAUGE) + removed[S_GAUGE], 0);
	CHECK_EQ(fetch(b, S_BIG) + removed[S_BIG], (int64_t)adds * BIG);

	/* A last zero removes exactly the value and leaves 0. */
	for (unsigned s = 0; s < NSLOTS; s++) {
		int64_t v = fetch(b, s), r = 0x5a5a;

		CHECK_EQ(tally_block_zero(b, s, &r), 0);
		CHECK_EQ(r, v);
		CHECK_EQ(fetch(b, s), 0);
	}
	CHECK_EQ(tally_block_free(NULL, b), 0);
}

TEST(percpu_zero_races_adds) { zero_races_adds(TALLY_PERCPU); }
TEST(shared_zero_races_adds) { zero_races_adds(TALLY_SHARED); }
TEST(pernode_zero_races_adds) { zero_races_adds(TALLY_PERNODE); }
TEST(adaptive_zero_races_adds) { zero_races_adds(TALLY_ADAPTIVE); }

/* ---- adaptive promotion ---- */

static int64_t copies_sum(tally_block *b, unsigned slot)
{
	static int64_t out[MAX_SLABS];
	int64_t sum = 0;
	int n = tally_block_fetch_percpu(b, slot, out, MAX_SLABS);

	CHECK(n > 0);
	for (int c = 0; c < n; c++)
		sum += out[c];
	return sum;
}

/* @adds positive adds to a promoted slot went to its per-CPU copies: all
 * of them with rseq; without it, those of the threads that own a
 * fallback copy (the others' are in the baseline): some, at most all. */
static void check_copies_took(tally_block *b, unsigned slot, int64_t before,
			      int64_t adds)
{
	int64_t got = copies_sum(b, slot) - before;

	if (tally_rseq_active())
		CHECK_EQ(got, adds);
	else
		CHECK(got > 0 && got <= adds);
}

/*
 * 16 threads hammering one adaptive slot get it promoted within 20 s;
 * the other slot of the block, used by one thread only, stays shared.
 * After promotion, every add goes to the per-CPU copies.
 */
TEST(adaptive_promotes_under_contention)
{
	enum { THREADS = 16 };
	long iters = harness_scale(20000), total = 0;
	tally_block *b = tally_block_alloc(NULL, 2, TALLY_ADAPTIVE);
	double deadline = harness_now() + 120; /* a bound, not a speed */
	int64_t before;

	CHECK(b != NULL);
	CHECK_EQ(tally_block_promoted(b, 0), 0);
	CHECK_EQ(tally_block_promoted(b, 1), 0);
	for (int k = 0; k < 1000; k++)
		tally_block_add(b, 1, 1);
	while (tally_block_promoted(b, 0) != 1) {
		CHECK_EQ(tally_block_promoted(b, 0), 0);
		if (harness_now() > deadline)
			harness_fail(__FILE__, __LINE__, "adaptive slot not "
				     "promoted after %ld adds by %d threads "
				     "in 120 s", total, THREADS);
		run_workers(b, THREADS, iters, 0, 0);
		total += (long)THREADS * iters;
		CHECK_EQ(fetch(b, 0), total);
	}
	before = copies_sum(b, 0);
	run_workers(b, THREADS, iters, 0, 0);
	total += (long)THREADS * iters;
	CHECK_EQ(fetch(b, 0), total);
	check_copies_took(b, 0, before, (long)THREADS * iters);
	CHECK_EQ(tally_block_promoted(b, 0), 1);
	CHECK_EQ(tally_block_promoted(b, 1), 0);
	CHECK_EQ(fetch(b, 1), 1000);
	CHECK_EQ(copies_sum(b, 1), 0);
	CHECK_EQ(tally_block_promoted(b, 2), -EINVAL);
}

/* Promotes slot 0 of @arg's block after a short while. */
static void *promote_later(void *arg)
{
	usleep(2000);
	CHECK_EQ(tally_block_promote(arg, 0), 0);
	return NULL;
}

/* A slot promoted by hand keeps its value, and adds after it go to the
 * per-CPU copies; promoting while threads add loses nothing. */
TEST(adaptive_promote_keeps_the_value)
{
	long iters = harness_scale(200000);
	tally_block *b = tally_block_alloc(NULL, 2, TALLY_ADAPTIVE);
	tally_block *p = tally_block_alloc(NULL, 1, TALLY_PERCPU);
	pthread_t t;

	CHECK(b != NULL && p != NULL);
	for (int k = 0; k < 1000; k++)
		tally_block_add(b, 0, 1);
	CHECK_EQ(tally_block_promote(b, 0), 0);
	CHECK_EQ(tally_block_promoted(b, 0), 1);
	CHECK_EQ(tally_block_promoted(b, 1), 0);
	CHECK_EQ(fetch(b, 0), 1000);
	CHECK_EQ(copies_sum(b, 0), 0);
	run_workers(b, 4, iters, 0, 0);
	CHECK_EQ(fetch(b, 0), 1000 + 4 * iters);
	CHECK_EQ(fetch(b, 1), 0);
	check_copies_took(b, 0, 0, 4 * iters);
	CHECK_EQ(tally_block_promote(b, 0), 0); /* again: nothing changes */
	CHECK_EQ(fetch(b, 0), 1000 + 4 * iters);
	CHECK_EQ(tally_block_promote(b, 2), -EINVAL);
	CHECK_EQ(tally_block_promote(p, 0), -EINVAL);
	CHECK_EQ(tally_block_promote(NULL, 0), -EINVAL);
	CHECK_EQ(tally_block_free(NULL, b), 0);

	b = tally_block_alloc(NULL, 1, TALLY_ADAPTIVE);
	CHECK(b != NULL);
	CHECK_EQ(pthread_create(&t, NULL, promote_later, b), 0);
	run_workers(b, 4, iters, 0, 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(tally_block_promoted(b, 0), 1);
	CHECK_EQ(fetch(b, 0), 4 * iters);
	CHECK_EQ(tally_block_free(NULL, b), 0);
	CHECK_EQ(tally_block_free(NULL, p), 0);
}

/* One thread, migrating between CPUs, never contends with itself. */
TEST(adaptive_single_thread_never_promotes)
{
	long iters = harness_scale(1000000);
	tally_block *b = tally_block_alloc(NULL, 1, TALLY_ADAPTIVE);

	CHECK(b != NULL);
	run_workers(b, 1, iters, 0, 0);
	CHECK_EQ(fetch(b, 0), iters);
	CHECK_EQ(tally_block_promoted(b, 0), 0);
	CHECK_EQ(copies_sum(b, 0), 0);
}

/*
 * A thread whose last adds found an adaptive word unpromoted adds to it
 * without reading it first (tally/arch/x86_64.h: its hint).  Once the
 * slot is promoted, at most one more of its adds lands in the word: the
 * add sees the promoted bit in what it found and drops the hint, and the
 * adds after it go to the per-CPU copies.  Exact throughout.
 */
TEST(adaptive_add_after_promotion_leaves_the_word)
{
	tally_block *b = tally_block_alloc(NULL, 1, TALLY_ADAPTIVE);
	int64_t word_before, word_after;

	CHECK(b != NULL);
	for (int k = 0; k < 1000; k++)
		tally_block_add(b, 0, 1);
	CHECK_EQ(tally_block_promoted(b, 0), 0);
	CHECK_EQ(tally_block_promote(b, 0), 0);
	word_before = fetch(b, 0) - copies_sum(b, 0);
	CHECK_EQ(word_before, 1000);
	for (int k = 0; k < 1000; k++)
		tally_block_add(b, 0, 1);
	word_after = fetch(b, 0) - copies_sum(b, 0);
	CHECK(word_after - word_before <= 1);
	CHECK_EQ(fetch(b, 0), 2000);
	CHECK_EQ(tally_block_free(NULL, b), 0);
}

/*
 * Adds racing with the promotion of their slot: threads started together
 * add 1 (the inline add) and, every 64th add, MIX_BIG (above what the
 * inline add takes: the slow path's compare-and-swap) to one slot, and -1
 * to another.  Fresh blocks until one was promoted in the middle of the
 * adds (values both in the shared word and in the copies) or 20 s pass;
 * every block's totals are exact.  An inline add that lost a count when
 * it found the word changed, or that stopped setting the promoted bit
 * then, fails here.
 */
#define MIX_BIG ((int64_t)1 << 31)
struct mix {
	tally_block *b;
	long iters;
	pthread_barrier_t *start;
	int index;
};

static void *mix_worker(void *arg)
{
	struct mix *m = arg;

	harness_pin(m->index % harness_ncpus());
	pthread_barrier_wait(m->start);
	for (long i = 0; i < m->iters; i++) {
		tally_block_add(m->b, 0, i % 64 == 0 ? MIX_BIG : 1);
		tally_block_add(m->b, 1, -1);
	}
	return NULL;
}

TEST(adaptive_promotion_during_adds_loses_nothing)
{
	enum { THREADS = 8 };
	long iters = harness_scale(20000), nbig = (iters + 63) / 64;
	double deadline = harness_now() + 120; /* a bound, not a speed */
	int blocks = 0;

	for (;;) {
		tally_block *b = tally_block_alloc(NULL, 2, TALLY_ADAPTIVE);
		pthread_barrier_t start;
		pthread_t t[THREADS];
		struct mix m[THREADS];
		int64_t value, copies;

		CHECK(b != NULL);
		CHECK_EQ(pthread_barrier_init(&start, NULL, THREADS), 0);
		for (int i = 0; i < THREADS; i++) {
			m[i] = (struct mix){ b, iters, &start, i };
			CHECK_EQ(pthread_create(&t[i], NULL, mix_worker, &m[i]), 0);
		}
		for (int i = 0; i < THREADS; i++)
			CHECK_EQ(pthread_join(t[i], NULL), 0);
		pthread_barrier_destroy(&start);
		blocks++;
		value = fetch(b, 0);
		CHECK_EQ(value, THREADS * ((iters - nbig) + nbig * MIX_BIG));
		CHECK_EQ(fetch(b, 1), -THREADS * iters);
		copies = copies_sum(b, 0);
		if (tally_block_promoted(b, 0) == 1 && copies != 0 &&
		    copies != value) {
			CHECK_EQ(tally_block_free(NULL, b), 0);
			break;
		}
		CHECK_EQ(tally_block_free(NULL, b), 0);
		if (harness_now() > deadline)
			harness_fail(__FILE__, __LINE__, "no adaptive slot was "
				     "promoted in the middle of the adds of %d "
				     "threads in 120 s (%d blocks)", THREADS,
				     blocks);
	}
}

/*
 * The inline add keeps an adaptive slot's shared word in the band
 * -2^61 .. 2^61 - 1 (src/layout.h): the add that finds the word past it
 * promotes the slot, and the value stays exact on both sides.
 */
TEST(adaptive_promotes_past_the_band)
{
	tally_block *b = tally_block_alloc(NULL, 2, TALLY_ADAPTIVE);
	const int64_t edge = (int64_t)1 << 61;
	int64_t v;

	CHECK(b != NULL);
	tally_block_add(b, 0, edge - 2);
	tally_block_add(b, 1, -edge + 1);
	CHECK_EQ(tally_block_promoted(b, 0), 0);
	CHECK_EQ(tally_block_promoted(b, 1), 0);
	for (int i = 0; i < 4; i++) {
		tally_block_add(b, 0, 1);
		tally_block_add(b, 1, -1);
	}
	CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
	CHECK_EQ(v, edge + 2);
	CHECK_EQ(tally_block_fetch(b, 1, &v), 0);
	CHECK_EQ(v, -edge - 3);
	CHECK_EQ(tally_block_promoted(b, 0), 1);
	CHECK_EQ(tally_block_promoted(b, 1), 1);
	/* The largest value the inline add takes, near the edge: exact. */
	tally_block_free(NULL, b);
	b = tally_block_alloc(NULL, 1, TALLY_ADAPTIVE);
	CHECK(b != NULL);
	tally_block_add(b, 0, edge - MIX_BIG);
	for (int i = 0; i < 3; i++)
		tally_block_add(b, 0, MIX_BIG - 1);
	CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
	CHECK_EQ(v, edge - MIX_BIG + 3 * (MIX_BIG - 1));
	CHECK_EQ(tally_block_promoted(b, 0), 1);
	CHECK_EQ(tally_block_free(NULL, b), 0);
}

/*
 * With TALLY_NODES=2, a thread pinned to a CPU adds to the copy of that
 * CPU's node (c % 2), whichever path the add takes.
 */
static void pernode_local_child(void *arg)
{
	static int64_t out[MAX_SLABS];
	tally_block *b;

	(void)arg;
	fresh_setenv("TALLY_NODES", "2");
	b = tally_block_alloc(NULL, 1, TALLY_PERNODE);
	CHECK(b != NULL);
	CHECK_EQ(nnodes(), 2);
	for (int i = 0; i < harness_ncpus() && i < 4; i++) {
		int cpu = harness_cpu(i), before, after;

		harness_pin(i);
		CHECK_EQ(tally_block_fetch_percpu(b, 0, out, MAX_SLABS),
			 (int)nslabs());
		before = (int)out[cpu % 2];
		for (int k = 0; k < 1000; k++)
			tally_block_add(b, 0, 1);
		CHECK_EQ(tally_block_fetch_percpu(b, 0, out, MAX_SLABS),
			 (int)nslabs());
		after = (int)out[cpu % 2];
		/* A preemption may move the thread for a few adds only. */
		CHECK(after - before >= 900);
	}
	harness_pin(-1);
	CHECK_EQ(fetch(b, 0), 1000 * (harness_ncpus() < 4 ? harness_ncpus() : 4));
	CHECK_EQ(tally_block_free(NULL, b), 0);
}

TEST(pernode_adds_land_on_the_local_node)
{
	if (harness_ncpus() < 2)
		harness_skip("one CPU");
	CHECK_CHILD_OK(harness_child(pernode_local_child, NULL));
}

/* Modes that never promote say so. */
TEST(promoted_is_zero_for_other_modes)
{
	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_PERNODE; mode++) {
		tally_block *b = tally_block_alloc(NULL, 3, mode);

		CHECK(b != NULL);
		run_workers(b, 16, harness_scale(10000), 0, 0);
		CHECK_EQ(tally_block_promoted(b, 0), 0);
		CHECK_EQ(fetch(b, 0), 16 * harness_scale(10000));
	}
}

/*
 * A slot is a signed 64-bit value in every mode: values past 2^62 (where
 * an adaptive slot's shared word runs out of bits) read back exactly, and
 * sums wrap like int64.  Checked through fetch, zero and the reader-side
 * per-CPU values alike.
 */
static void full_range(unsigned mode)
{
	static const int64_t vals[] = {
		(int64_t)1 << 62, ((int64_t)1 << 62) - 1, -((int64_t)1 << 62),
		-((int64_t)1 << 62) - 1, INT64_MAX, INT64_MIN, INT64_MIN + 1,
	};
	tally_block *b = tally_block_alloc(NULL, 4, mode);
	int64_t v, removed;

	CHECK(b != NULL);
	for (unsigned i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		tally_block_add(b, 0, vals[i]);
		CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
		CHECK_EQ(v, vals[i]);
		CHECK_EQ(tally_block_zero(b, 0, &removed), 0);
		CHECK_EQ(removed, vals[i]);
		CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
		CHECK_EQ(v, 0);
	}
	/* Crossing 2^62 one add at a time, from both sides. */
	tally_block_add(b, 1, ((int64_t)1 << 62) - 2);
	for (int i = 0; i < 4; i++)
		tally_block_add(b, 1, 1);
	CHECK_EQ(tally_block_fetch(b, 1, &v), 0);
	CHECK_EQ(v, ((int64_t)1 << 62) + 2);
	tally_block_add(b, 2, -((int64_t)1 << 62) + 2);
	for (int i = 0; i < 4; i++)
		tally_block_add(b, 2, -1);
	CHECK_EQ(tally_block_fetch(b, 2, &v), 0);
	CHECK_EQ(v, -((int64_t)1 << 62) - 2);
	/* Wrapping like int64: INT64_MAX + 1 is INT64_MIN, and back. */
	tally_block_add(b, 3, INT64_MAX);
	tally_block_add(b, 3, 1);
	CHECK_EQ(tally_block_fetch(b, 3, &v), 0);
	CHECK_EQ(v, INT64_MIN);
	tally_block_add(b, 3, -1);
	CHECK_EQ(tally_block_fetch(b, 3, &v), 0);
	CHECK_EQ(v, INT64_MAX);
	CHECK_EQ(tally_block_free(NULL, b), 0);
}

TEST(percpu_holds_the_full_int64_range) { full_range(TALLY_PERCPU); }
TEST(shared_holds_the_full_int64_range) { full_range(TALLY_SHARED); }
TEST(pernode_holds_the_full_int64_range) { full_range(TALLY_PERNODE); }
TEST(adaptive_holds_the_full_int64_range) { full_range(TALLY_ADAPTIVE); }

/* The same after promotion: the shared word keeps what it had, the
 * per-CPU copies take the rest. */
TEST(promoted_adaptive_holds_the_full_int64_range)
{
	tally_block *b = tally_block_alloc(NULL, 1, TALLY_ADAPTIVE);
	int64_t v;

	CHECK(b != NULL);
	tally_block_add(b, 0, (int64_t)1 << 61);
	tally_block_add(b, 0, (int64_t)1 << 62); /* leaves 63 bits: promotes */
	CHECK_EQ(tally_block_promoted(b, 0), 1);
	CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
	CHECK_EQ(v, ((int64_t)1 << 61) + ((int64_t)1 << 62));
	tally_block_add(b, 0, (int64_t)1 << 61); /* INT64_MAX + 1 */
	CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
	CHECK_EQ(v, INT64_MIN);
	CHECK_EQ(tally_block_free(NULL, b), 0);
}
