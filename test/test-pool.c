/*
 * test-pool.c: the zone's chunk pool when processes die and fork.
 *
 * Proves that the chunks a process still owned when it died (killed, or
 * ended with _exit(), so that nothing released them) are taken back when
 * the zone runs out, that fork() in one thread while another creates
 * a zone never leaves the child stuck on a lock, and that a zone is not
 * unmapped while a thread that exits gives its chunks back to it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "core/core.h"
#include "metrics/table.h"
#include "tally/reader.h"
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
			 * current one and up to 16 full ones), free every
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

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	/* gcc 12's ASan and TSan runtimes do not hold their allocator's
	 * locks across fork(): a child whose parent had a thread inside
	 * malloc at that moment hangs in its first malloc, whatever the
	 * program does (seen in gdb: SizeClassAllocator64::
	 * GetFromAllocator).  glibc's malloc is fork-safe, so the normal
	 * build keeps this test. */
	harness_skip("the sanitizer's allocator is not fork-safe in "
		     "multi-threaded processes");
#endif
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
			struct tally_zone *z = b ? tally_zone_create("child", NULL) : NULL;

			if (!z)
				fprintf(stderr, "  child: %s\n", tally_errmsg());
			_exit(z ? 0 : 1);
		}
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			harness_fail(__FILE__, __LINE__, "child %d: status 0x%x",
				     i, status);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
}

/* A thread that takes a chunk of a zone and exits when told to, while
 * another destroys the zone. */
struct exiting {
	struct tally_zone *z;
	_Atomic int tid;       /* the exiting thread's, once it has a chunk */
	_Atomic int go;        /* set: the thread returns */
	_Atomic int destroyed; /* set: tally_zone_destroy() returned */
};

static void *take_a_chunk_and_exit(void *arg)
{
	struct exiting *x = arg;

	if (!tally_block_alloc(x->z, 1, TALLY_PERCPU))
		return NULL;
	atomic_store(&x->tid, (int)syscall(SYS_gettid));
	/* Spins rather than sleeps: waits() must see only the wait of the
	 * exit, not this one. */
	while (!atomic_load(&x->go))
		sched_yield();
	return NULL; /* the thread's exit gives the chunk back (alloc.c) */
}

static void *destroy_zone(void *arg)
{
	struct exiting *x = arg;

	if (tally_zone_destroy(x->z) == 0)
		atomic_store(&x->destroyed, 1);
	return NULL;
}

/* Whether thread @tid is in a system call that waits: a futex (a lock),
 * or the naps of the lock's polling under TSan (lock.c). */
static int waits(int tid)
{
	char path[64];
	long nr = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	if (!(f = fopen(path, "re")))
		return 0;
	if (fscanf(f, "%ld", &nr) != 1) /* "running" */
		nr = -1;
	fclose(f);
	return nr == SYS_futex || nr == SYS_nanosleep ||
	       nr == SYS_clock_nanosleep;
}

/*
 * The last handle of a zone may go in any thread, while another thread
 * exits and gives its chunks of that zone back.  This thread holds the
 * zone's pool lock, so that the exiting thread stops inside the giving
 * back, once it has seen that the zone exists; a third thread then
 * destroys the zone.  The destruction must wait until the exiting
 * thread is done with the zone: finished while that thread is still
 * inside, it unmapped what the thread goes on to write (a SIGSEGV).
 */
TEST(destroy_waits_for_an_exiting_thread_giving_chunks_back)
{
	struct tally_zone_opts o = { .flags = TALLY_ZONE_ANON };
	struct exiting x = { .z = tally_zone_create("exiting", &o) };
	pthread_t t, d;
	int seen = 0;

	CHECK(x.z != NULL);
	CHECK_EQ(pthread_create(&t, NULL, take_a_chunk_and_exit, &x), 0);
	while (!atomic_load(&x.tid))
		usleep(1000);
	CHECK_EQ(tally__pool_lock(x.z), 0);
	atomic_store(&x.go, 1);
	/* Until the exiting thread has waited for the pool lock for 20 ms
	 * (a wait elsewhere, in malloc, is shorter), 3 s at most: a slower
	 * thread makes the test weaker, never fail. */
	for (int i = 0; i < 3000 && seen < 20; i++) {
		seen = waits(atomic_load(&x.tid)) ? seen + 1 : 0;
		usleep(1000);
	}
	CHECK_EQ(pthread_create(&d, NULL, destroy_zone, &x), 0);
	/* The pool lock is given up after TALLY__WAIT_BOUND_S s: the
	 * destruction has 1 s to show that it does not wait. */
	for (int i = 0; i < 1000 && !atomic_load(&x.destroyed); i++)
		usleep(1000);
	if (atomic_load(&x.destroyed))
		harness_fail(__FILE__, __LINE__, "the zone was destroyed while "
			     "an exiting thread (%s) was giving its chunks "
			     "back to it", seen ? "seen waiting" : "not seen");
	tally__pool_unlock(x.z);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(pthread_join(d, NULL), 0);
	CHECK_EQ(atomic_load(&x.destroyed), 1);
}

/*
 * A process that dies holding the pool lock in the middle of a list
 * update: the next locker rebuilds the lists from the chunk table.
 */
TEST(pool_lock_owner_died_mid_update)
{
	struct tally_zone_opts o = { .capacity = 64 * TALLY_CHUNK_SLOTS };
	struct tally_zone *z = tally_zone_create("pooldied", &o);
	tally_block *kept, *b[2000];
	int status;
	int64_t v;
	pid_t pid;

	CHECK(z != NULL);
	kept = tally_block_alloc(z, 1, TALLY_PERCPU);
	CHECK(kept != NULL);
	tally_block_add(kept, 0, 42);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		tally__pool_lock(z);
		/* Half-done updates: lists pointing anywhere. */
		z->hdr->empty_head = 7777;
		z->hdr->partial_head[TALLY_SHARED][3] = 1;
		atomic_store(&z->hdr->chunks_inuse, 999);
		_exit(0); /* dies holding the lock */
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	/* Many blocks of other sizes and modes need the pool. */
	for (int i = 0; i < 2000; i++) {
		b[i] = tally_block_alloc(z, 1 + (unsigned)(i % 5), (unsigned)(i % 4));
		CHECK(b[i] != NULL);
		CHECK_EQ(tally_block_fetch(b[i], 0, &v), 0);
		CHECK_EQ(v, 0);
		tally_block_add(b[i], 0, i);
	}
	for (int i = 0; i < 2000; i++) {
		CHECK_EQ(tally_block_fetch(b[i], 0, &v), 0);
		CHECK_EQ(v, i);
		CHECK_EQ(tally_block_free(z, b[i]), 0);
	}
	CHECK_EQ(tally_block_fetch(kept, 0, &v), 0);
	CHECK_EQ(v, 42);
}

static int count_view(const struct tally_series_view *v, void *arg)
{
	int64_t *sum = arg;

	sum[0]++;
	sum[1] += v->value;
	return 0;
}

/*
 * A process that dies holding the metrics lock while writing a record:
 * the record is retired, and the index, free list and counts are rebuilt.
 */
TEST(metrics_lock_owner_died_mid_register)
{
	struct tally_zone *z = tally_zone_create("metricsdied", NULL);
	struct tally_metric_desc d = { .kind = TALLY_COUNTER, .name = "a_total" };
	tally_counter a, a2, b;
	struct tally_seg *s;
	int64_t seen[2] = { 0, 0 };
	int status;
	pid_t pid;

	CHECK(z != NULL);
	CHECK_EQ(tally_counter_register(z, &d, &a), 0);
	tally_counter_add(&a, 5);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct tally__hdr *h = z->hdr;
		struct tally__series *rec = (struct tally__series *)
			((char *)h + h->series_off) + atomic_load(&h->series_hwm);

		pthread_mutex_lock(&h->metrics_lock);
		atomic_fetch_add(&rec->seq, 1); /* odd: being written */
		rec->state = 1;
		/* ... and an index bucket pointing at nothing sane. */
		((uint32_t *)((char *)h + h->hash_off))[0] = 123456;
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	d.name = "b_total";
	CHECK_EQ(tally_counter_register(z, &d, &b), 0);
	tally_counter_add(&b, 7);
	/* The index was rebuilt: a_total is found, not made twice. */
	d.name = "a_total";
	CHECK_EQ(tally_counter_register(z, &d, &a2), 0);
	CHECK(a2.metric.block == a.metric.block);
	s = tally_seg_open(tally_zone_path(z), NULL);
	CHECK(s != NULL);
	CHECK_EQ(tally_seg_foreach(s, 0, count_view, seen), 2);
	CHECK_EQ(seen[0], 2);
	CHECK_EQ(seen[1], 12);
	tally_seg_close(s);
	CHECK_EQ(tally_metric_remove(&a.metric), 0);
	CHECK_EQ(tally_metric_remove(&a2.metric), 0);
	CHECK_EQ(tally_metric_remove(&b.metric), 0);
}

/* Sums the series named arg->name (id counts them). */
static int sum_named(const struct tally_series_view *v, void *arg)
{
	struct tally_series_view *want = arg;

	if (!strcmp(v->name, want->name)) {
		want->value += v->value;
		want->id++;
	}
	return 0;
}

/*
 * A long series record whose chain leads to an extension of an earlier
 * life of the record (its owner_seq is not the record's seq: what a
 * writer killed while it reused the record can leave) is not whole: the
 * next writer to take the lock after the dead holder retires the record,
 * so the same labels registered again make a series readers show, with
 * the new value only.  A repair that did not compare the owner's seq kept
 * the record in the index, and the updates of the next registration went
 * to a series no reader shows.
 */
TEST(metrics_lock_owner_died_ext_of_earlier_life)
{
	struct tally_zone *z = tally_zone_create("metricsext", NULL);
	struct tally_label route[] = {
		{ "code", "200" }, { "method", "GET" },
		{ "route", "/api/v1/organizations/{org_id}/projects/"
			   "{project_id}/members/{member_id}/roles/"
			   "{role_id}/permissions" },
	};
	struct tally_metric_desc d = { .kind = TALLY_COUNTER,
				       .name = "req_total", .labels = route,
				       .nlabels = 3 };
	struct tally_metric_desc db = { .kind = TALLY_COUNTER,
					.name = "b_total" };
	struct tally_series_view v = { .name = "req_total" };
	struct tally__series *rec;
	struct tally__series_ext *e;
	tally_counter a, a2, b;
	struct tally_seg *s;
	int status;
	pid_t pid;

	CHECK(z != NULL);
	CHECK_EQ(tally_counter_register(z, &d, &a), 0);
	tally_counter_add(&a, 5);
	rec = &series(z)[a.metric.series];
	CHECK_EQ(rec->state, TALLY__SERIES_LONG);
	CHECK(long_of(rec).first != 0);
	e = ext_at(z, long_of(rec).first - 1);
	CHECK_EQ(e->state, TALLY__SERIES_EXT);
	CHECK_EQ(e->owner_seq, atomic_load(&rec->seq));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		pthread_mutex_lock(&z->hdr->metrics_lock);
		e->owner_seq -= 2; /* the record's life before this one */
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	/* The next locker repairs. */
	CHECK_EQ(tally_counter_register(z, &db, &b), 0);
	tally_counter_add(&b, 1);
	CHECK_EQ(tally_counter_register(z, &d, &a2), 0);
	tally_counter_add(&a2, 3);
	s = tally_seg_open(tally_zone_path(z), NULL);
	CHECK(s != NULL);
	CHECK(tally_seg_foreach(s, 0, sum_named, &v) >= 0);
	tally_seg_close(s);
	CHECK_EQ(v.id, 1);
	CHECK_EQ(v.value, 3);
	CHECK_EQ(tally_metric_remove(&a2.metric), 0);
	CHECK_EQ(tally_metric_remove(&b.metric), 0);
	tally_zone_destroy(z);
}

/* Metric record @i of @z's file, through the mapping. */
static struct tally__metric_rec *mrec(struct tally_zone *z, uint32_t i)
{
	return (struct tally__metric_rec *)((char *)z->hdr +
					    z->hdr->metric_off) + i;
}

static int find_view(const struct tally_series_view *v, void *arg)
{
	struct tally_series_view *want = arg;

	if (!strcmp(v->name, want->name)) {
		want->value = v->value;
		want->help = strdup(v->help);
		want->id++;
	}
	return 0;
}

/* The one series named @name in @z's file: its value and help (freed by
 * the caller); id counts the series found. */
static struct tally_series_view seen_one(struct tally_zone *z,
					 const char *name)
{
	struct tally_series_view v = { .name = name };
	struct tally_seg *s = tally_seg_open(tally_zone_path(z), NULL);

	CHECK(s != NULL);
	CHECK(tally_seg_foreach(s, 0, find_view, &v) >= 0);
	tally_seg_close(s);
	return v;
}

/*
 * A process killed while it rewrites a metric record's help text (a
 * deploy that edited it) leaves the record's seq odd and the text half
 * written.  Readers still show that metric and every metric after it,
 * with the part of the text that is whole, and the next writer to take
 * the lock makes the record stable again.  Before, readers stopped at
 * the record: every later metric vanished from the file for good when
 * no writer came (a crashed service's segment).
 */
TEST(metrics_lock_owner_died_mid_retext)
{
	struct tally_zone *z = tally_zone_create("metricsretext", NULL);
	struct tally_metric_desc d = { .kind = TALLY_COUNTER, .name = "a_total",
				       .help = "the old help" };
	tally_counter a, b, c;
	struct tally_series_view v;
	int status;
	pid_t pid;

	CHECK(z != NULL);
	CHECK_EQ(tally_counter_register(z, &d, &a), 0);
	d.name = "b_total";
	CHECK_EQ(tally_counter_register(z, &d, &b), 0);
	tally_counter_add(&a, 5);
	tally_counter_add(&b, 7);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct tally__metric_rec *f = mrec(z, 0);

		pthread_mutex_lock(&z->hdr->metrics_lock);
		atomic_fetch_add(&f->seq, 1); /* odd: being rewritten */
		/* Killed in the middle of the copy of "caf\xc3\xa9 help":
		 * the length is the new one, the text cut inside the é. */
		f->help_len = 10;
		memset(f->help, 0, sizeof(f->help));
		memcpy(f->help, "caf\xc3", 4);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	v = seen_one(z, "b_total");
	CHECK_EQ(v.id, 1);
	CHECK_EQ(v.value, 7);
	free((void *)v.help);
	v = seen_one(z, "a_total");
	CHECK_EQ(v.id, 1);
	CHECK_EQ(v.value, 5);
	CHECK_STR(v.help, "caf"); /* the whole characters written */
	free((void *)v.help);
	/* The next writer repairs the record: even seq, lengths that hold. */
	d.name = "c_total";
	CHECK_EQ(tally_counter_register(z, &d, &c), 0);
	CHECK_EQ(atomic_load(&mrec(z, 0)->seq) & 1, 0);
	CHECK_EQ(mrec(z, 0)->help_len, 3);
	v = seen_one(z, "a_total");
	CHECK_EQ(v.id, 1);
	CHECK_STR(v.help, "caf");
	free((void *)v.help);
	/* ... and the help registered next replaces it. */
	d.name = "a_total";
	d.help = "the new help";
	CHECK_EQ(tally_counter_register(z, &d, &a), 0);
	v = seen_one(z, "a_total");
	CHECK_STR(v.help, "the new help");
	free((void *)v.help);
}

/*
 * A process killed as it redefines a name, after it marked the old
 * generation superseded and before it published the new one: the name
 * must not vanish.  The next writer to take the lock finishes the new
 * record, which was whole, and the old generation stays superseded.
 */
TEST(metrics_lock_owner_died_mid_redefine)
{
	struct tally_zone *z = tally_zone_create("metricsredef", NULL);
	struct tally_metric_desc d = { .kind = TALLY_COUNTER, .name = "r",
				       .help = "v1" };
	tally_counter a, other;
	tally_gauge g;
	struct tally_series_view v;
	uint32_t n;
	int status;
	pid_t pid;

	CHECK(z != NULL);
	CHECK_EQ(tally_counter_register(z, &d, &a), 0);
	tally_counter_add(&a, 3);
	n = atomic_load(&z->hdr->metric_count);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct tally__metric_rec *f = mrec(z, n);

		pthread_mutex_lock(&z->hdr->metrics_lock);
		/* The new generation written whole, as define.c writes it,
		 * the old one superseded, the count not yet published. */
		CHECK(tally__reserve_at(z, f, sizeof(*f), "test") == 0);
		atomic_fetch_add(&f->seq, 1);
		memcpy(f, mrec(z, 0), sizeof(*f));
		f->seq = 1;
		f->kind = TALLY__KIND_GAUGE;
		f->prev = 1;
		f->generation = 1;
		f->flags = 0;
		atomic_store(&f->seq, 2);
		mrec(z, 0)->flags |= TALLY__METRIC_SUPERSEDED;
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	d.name = "other";
	CHECK_EQ(tally_counter_register(z, &d, &other), 0);
	CHECK_EQ(atomic_load(&z->hdr->metric_count), n + 2);
	CHECK_EQ(mrec(z, n)->kind, TALLY__KIND_GAUGE);
	CHECK_EQ(mrec(z, n)->flags, 0);
	/* The gauge is the name's definition now: registering it finds
	 * that record, it makes no third one. */
	d.name = "r";
	d.kind = TALLY_GAUGE;
	CHECK_EQ(tally_gauge_register(z, &d, &g), 0);
	CHECK_EQ(atomic_load(&z->hdr->metric_count), n + 2);
	tally_gauge_add(&g, 9);
	v = seen_one(z, "r");
	CHECK_EQ(v.id, 1);
	CHECK_EQ(v.value, 9);
	free((void *)v.help);
}

/*
 * Killed in a rollback (an older definition made current again) between
 * its two flags: every generation of the name is superseded, none was
 * retired.  The next writer makes the one the index points at current,
 * so the name is shown again; a retired name stays hidden.
 */
TEST(metrics_lock_owner_died_mid_rollback)
{
	struct tally_zone *z = tally_zone_create("metricsroll", NULL);
	struct tally_metric_desc d = { .kind = TALLY_COUNTER, .name = "r" };
	tally_counter a, other;
	tally_gauge g;
	struct tally_series_view v;
	int status;
	pid_t pid;

	CHECK(z != NULL);
	CHECK_EQ(tally_counter_register(z, &d, &a), 0);
	d.kind = TALLY_GAUGE;
	CHECK_EQ(tally_gauge_register(z, &d, &g), 0); /* record 1, current */
	tally_gauge_add(&g, 4);
	CHECK(mrec(z, 0)->flags & TALLY__METRIC_SUPERSEDED);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		pthread_mutex_lock(&z->hdr->metrics_lock);
		mrec(z, 1)->flags |= TALLY__METRIC_SUPERSEDED;
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	v = seen_one(z, "r");
	CHECK_EQ(v.id, 0); /* hidden until a writer repairs the table */
	d.name = "other";
	d.kind = TALLY_COUNTER;
	CHECK_EQ(tally_counter_register(z, &d, &other), 0);
	CHECK_EQ(mrec(z, 1)->flags, 0);
	CHECK_EQ(mrec(z, 0)->flags, TALLY__METRIC_SUPERSEDED);
	v = seen_one(z, "r");
	CHECK_EQ(v.id, 1);
	CHECK_EQ(v.value, 4);
	free((void *)v.help);
	/* A retired name (tally_metric_redefine) is left as the binding
	 * left it: hidden. */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		pthread_mutex_lock(&z->hdr->metrics_lock);
		mrec(z, 1)->flags |= TALLY__METRIC_SUPERSEDED |
				     TALLY__METRIC_RETIRED;
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_EQ(tally_counter_register(z, &d, &other), 0);
	v = seen_one(z, "r");
	CHECK_EQ(v.id, 0);
}

/*
 * The same, in a zone whose name has generations: the rebuilt metric
 * index points at the current one (here an older record made current
 * again), not at the last one made.
 */
TEST(metrics_lock_owner_died_with_generations)
{
	struct tally_zone *z = tally_zone_create("metricsgen", NULL);
	struct tally_metric_desc d = { .kind = TALLY_COUNTER, .name = "g" };
	tally_counter a, a2;
	tally_gauge g;
	int status;
	pid_t pid;

	CHECK(z != NULL);
	CHECK_EQ(tally_counter_register(z, &d, &a), 0);
	d.kind = TALLY_GAUGE;
	CHECK_EQ(tally_gauge_register(z, &d, &g), 0);
	d.kind = TALLY_COUNTER;
	CHECK_EQ(tally_counter_register(z, &d, &a2), 0); /* record 0 again */
	CHECK(a2.metric.block == a.metric.block);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		pthread_mutex_lock(&z->hdr->metrics_lock);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_EQ(tally_counter_register(z, &d, &a2), 0);
	CHECK(a2.metric.block == a.metric.block);
	CHECK_EQ(atomic_load(&z->hdr->metric_count), 2);
	CHECK_EQ(atomic_load(&z->hdr->redefinitions), 2);
}
