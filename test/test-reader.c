/*
 * test-reader.c: the segment reader (tally/reader.h) against writers in
 * other processes.
 *
 * It proves that:
 *   - a reader gets exactly what a writer process wrote, through
 *     tally_dir_foreach(), tally_seg_foreach_pid() and tally_seg_open(),
 *     while the writer runs and after it exited: counters in every mode,
 *     gauges, set gauges, histogram buckets, sums and counts, per-CPU
 *     values (each pinned writer thread's adds in its CPU's entry), labels,
 *     help and units, and the header's information;
 *   - histogram quantiles are within 2^-sub_bits of the exact quantiles
 *     of the observed values (sorted here), in the middle buckets and in
 *     the last one;
 *   - while a writer churns series (each series' labels say which value
 *     it must have, and blocks and records are reused all the time), a
 *     reader in a loop never fails, never sees a torn name or label, a
 *     value that is not its series', or a series removed before the pass;
 *   - a record reused while the reader copies it (simulated exactly by
 *     splitting the reader's pread(2) of the series table) is skipped,
 *     not reported as corruption;
 *   - a counter read while it is being added to is never torn;
 *   - a writer killed by SIGKILL in the middle of its updates leaves a
 *     readable segment (alive == 0), which tally_dir_cleanup() removes,
 *     leaving live writers', persistent, foreign and invalid files alone;
 *   - reading never allocates memory in the segment (st_blocks is the
 *     same before and after full passes over a 256-slab segment);
 *   - symbolic links, other users' files (unless allowed), and the
 *     entries of a directory that are not segments are refused with a
 *     message that names the file;
 *   - a header claiming 2^24 series used costs a pass what was written
 *     (the holes of the series table are not read: bytes read counted).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "core/core.h"
#include "reader/segment.h"
#include "snap.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_THREADS 16

/* ---- pread(2), interposed ---------------------------------------------
 *
 * libtally is linked statically into this program, so this definition is
 * the pread() its reader calls.  By default it is the system call; a test
 * can arm it to split one read in two and run code in between, which is
 * what a writer on another CPU does to a reader whose copy is interrupted
 * (pread gives no atomicity beyond single bytes).
 */
static struct {
	int armed;
	uint64_t split_at;
	void (*action)(void *);
	void *arg;
	int fired;
} hook;

static ssize_t sys_pread(int fd, void *buf, size_t n, off_t off)
{
	return syscall(SYS_pread64, fd, buf, n, off);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	if (hook.armed && (uint64_t)off < hook.split_at &&
	    hook.split_at < (uint64_t)off + n) {
		size_t first = (size_t)(hook.split_at - (uint64_t)off);
		ssize_t a, b;

		hook.armed = 0;
		a = sys_pread(fd, buf, first, off);
		if (a != (ssize_t)first)
			return a;
		hook.action(hook.arg);
		hook.fired = 1;
		b = sys_pread(fd, (char *)buf + first, n - first,
			      off + (off_t)first);
		return b < 0 ? b : a + b;
	}
	return sys_pread(fd, buf, n, off);
}

/* ---- helpers ---------------------------------------------------------- */

/* What a writer child and the test share. */
struct ctl {
	_Atomic int stage;       /* how far the writer got */
	_Atomic int go;          /* how far the test lets it go */
	_Atomic int stop;
	_Atomic long progress;
	_Atomic long removed_below;
	_Atomic long registered;
	int rseq;                /* the writer's threads used rseq */
	int nthreads;
	int cpu[MAX_THREADS];    /* the CPU writer thread i ran on */
	unsigned nslabs;
	char dir[PATH_MAX];      /* the writer's $TALLY_DIR */
	char path[PATH_MAX];     /* its segment */
};

static struct ctl *ctl_new(const char *sub)
{
	struct ctl *c = shared_mem(sizeof(*c));

	snprintf(c->dir, sizeof(c->dir), "%s/%s", harness_dir(), sub);
	if (mkdir(c->dir, 0700) < 0 && errno != EEXIST)
		harness_fail(__FILE__, __LINE__, "mkdir %s: %m", c->dir);
	return c;
}

/* In a writer child, before its first tally call. */
static void writer_env(struct ctl *c, const char *nslabs)
{
	if (tally__env.nslabs != 0)
		harness_fail(__FILE__, __LINE__, "libtally already set up");
	setenv("TALLY_DIR", c->dir, 1);
	if (nslabs)
		setenv("TALLY_NSLABS", nslabs, 1);
}

static pid_t spawn(void (*fn)(struct ctl *), struct ctl *c)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		fn(c);
		fflush(stdout);
		_exit(0);
	}
	return pid;
}

/* Waits until the writer reached @stage; fails if it died first.  The
 * writer is never reaped here (WNOWAIT): reap_ok() does that, even when
 * the writer reached the stage and exited in between our two looks. */
static void wait_stage(struct ctl *c, pid_t pid, int stage)
{
	double t0 = harness_now();
	siginfo_t si;

	while (atomic_load(&c->stage) < stage) {
		si.si_pid = 0;
		if (waitid(P_PID, (id_t)pid, &si,
			   WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == pid) {
			if (atomic_load(&c->stage) >= stage)
				return;
			harness_fail(__FILE__, __LINE__, "writer %d ended "
				     "(code %d, status %d) before stage %d",
				     (int)pid, si.si_code, si.si_status,
				     stage);
		}
		if (harness_now() - t0 > 60)
			harness_fail(__FILE__, __LINE__, "writer stuck before "
				     "stage %d", stage);
		usleep(1000);
	}
}

static void wait_go(struct ctl *c, int go)
{
	while (atomic_load(&c->go) < go)
		usleep(1000);
}

static void reap_ok(pid_t pid)
{
	int status;

	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_CHILD_OK(status);
}

static struct tally_zone *make_zone(const char *name, size_t chunks,
				    size_t max_series, unsigned flags)
{
	struct tally_zone_opts o = { chunks * TALLY_CHUNK_SLOTS, max_series,
				     flags };
	struct tally_zone *z = tally_zone_create(name, &o);

	if (!z)
		harness_fail(__FILE__, __LINE__, "tally_zone_create: %s",
			     tally_errmsg());
	return z;
}

/* A writer's zone (make_zone()), whose path it tells the test in
 * c->path. */
static struct tally_zone *writer_zone(struct ctl *c, const char *name,
				      size_t chunks, size_t max_series,
				      unsigned flags)
{
	struct tally_zone *z = make_zone(name, chunks, max_series, flags);

	snprintf(c->path, sizeof(c->path), "%s", tally_zone_path(z));
	return z;
}

static int has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

/* ---- one series as a reader saw it (snap.h) ---------------------------- */

/* The series @name with @labels, or fail the test. */
static const struct seen *find(const struct snap *sn, const char *name,
			       const char *labels)
{
	const struct seen *e = snap_find(sn, name, labels);

	if (!e)
		harness_fail(__FILE__, __LINE__, "no series %s{%s}", name,
			     labels);
	return e;
}

/* ---- exact values ----------------------------------------------------- */

#define V_ITERS 50000
#define V_HIST_VALUES 257

static uint64_t hist_value(int thread, long i)
{
	return (uint64_t)((i * 7919 + thread * 104729) % 100003);
}

struct vthread {
	struct ctl *c;
	int i;
	tally_metric *m; /* counter, histogram, shared, pernode, adaptive */
	pthread_barrier_t *bar;
};

static void *values_thread(void *arg)
{
	struct vthread *t = arg;

	harness_pin(t->i);
	pthread_barrier_wait(t->bar);
	t->c->cpu[t->i] = sched_getcpu();
	for (long k = 0; k < V_ITERS; k++) {
		tally_counter_add(counter_of(&t->m[0]), t->i + 1);
		tally_counter_inc(counter_of(&t->m[2]));
		tally_counter_inc(counter_of(&t->m[3]));
		tally_counter_inc(counter_of(&t->m[4]));
	}
	for (long k = 0; k < V_HIST_VALUES; k++)
		tally_histogram_observe(histogram_of(&t->m[1]), hist_value(t->i, k));
	if (t->i == 0)
		t->c->rseq = tally_rseq_active();
	return NULL;
}

static void writer_values(struct ctl *c)
{
	struct tally_zone *z;
	struct tally_label lreq[] = { { "method", "GET" }, { "code", "200" } };
	struct tally_label lmany[25];
	char lnames[25][2];
	tally_metric m[5], g, gs, gone, many, zeroed;
	int64_t removed = 0;
	struct tally_metric_desc d;
	struct vthread t[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	pthread_barrier_t bar;

	writer_env(c, NULL);
	z = writer_zone(c, "values", 16, 256, TALLY_ZONE_PERSIST);
	c->nslabs = tally__env.nslabs;

	d = desc(TALLY_COUNTER, "http_requests_total");
	d.help = "Requests served, by method and code.";
	reg(z, d, lreq, 2, &m[0]);
	d = desc(TALLY_HISTOGRAM, "request_seconds");
	d.unit = "seconds";
	d.help = "Latency \xe2\x80\x94 in \xc2\xb5s.";
	reg(z, d, NULL, 0, &m[1]);
	d = desc(TALLY_COUNTER, "shared_total");
	d.mode = TALLY_SHARED;
	reg(z, d, NULL, 0, &m[2]);
	d = desc(TALLY_COUNTER, "pernode_total");
	d.mode = TALLY_PERNODE;
	reg(z, d, NULL, 0, &m[3]);
	d = desc(TALLY_COUNTER, "adaptive_total");
	d.mode = TALLY_ADAPTIVE;
	reg(z, d, NULL, 0, &m[4]);
	d = desc(TALLY_GAUGE, "in_flight");
	reg(z, d, NULL, 0, &g);
	d = desc(TALLY_GAUGE_SET, "temperature");
	d.unit = "celsius";
	reg(z, d, NULL, 0, &gs);
	d = desc(TALLY_COUNTER, "gone_total");
	reg(z, d, NULL, 0, &gone);
	for (int i = 0; i < 25; i++) {
		/* 25 pairs in 87 bytes: the most labels a series can have. */
		lnames[i][0] = (char)('a' + i);
		lnames[i][1] = 0;
		lmany[i].name = lnames[i];
		lmany[i].value = i % 2 ? "x" : "";
	}
	d = desc(TALLY_COUNTER, "many_labels_total");
	reg(z, d, lmany, 25, &many);
	d = desc(TALLY_COUNTER, "zeroed_total");
	reg(z, d, NULL, 0, &zeroed);
	tally_counter_add(counter_of(&zeroed), 100);
	CHECK_EQ(tally_block_zero(zeroed.block, 0, &removed), 0);
	CHECK_EQ(removed, 100);
	tally_counter_add(counter_of(&zeroed), 7);

	tally_counter_add(counter_of(&gone), 5);
	CHECK_EQ(tally_metric_remove(&gone), 0);
	for (int i = 0; i < 20; i++)
		tally_gauge_inc(gauge_of(&g));
	for (int i = 0; i < 3; i++)
		tally_gauge_dec(gauge_of(&g));
	tally_setgauge_set(setgauge_of(&gs), -40);
	tally_counter_add(counter_of(&many), 25);

	c->nthreads = harness_ncpus() < MAX_THREADS ? harness_ncpus() :
						      MAX_THREADS;
	pthread_barrier_init(&bar, NULL, (unsigned)c->nthreads);
	for (int i = 0; i < c->nthreads; i++) {
		t[i] = (struct vthread){ c, i, m, &bar };
		CHECK_EQ(pthread_create(&th[i], NULL, values_thread, &t[i]), 0);
	}
	for (int i = 0; i < c->nthreads; i++)
		pthread_join(th[i], NULL);
	atomic_store(&c->stage, 1);
	wait_go(c, 1);
	exit(0); /* at exit: a persistent zone's file stays */
}

static void check_values(struct ctl *c, const struct snap *sn, int percpu)
{
	const struct seen *e;
	int n = c->nthreads;
	int64_t want = 0, hb[512] = { 0 }, hsum = 0, hcount = 0;

	CHECK_EQ(sn->n, 9);
	/* Counter, per-CPU: each thread's adds on its own CPU. */
	e = find(sn, "http_requests_total", "code=200,method=GET");
	for (int i = 0; i < n; i++)
		want += (int64_t)(i + 1) * V_ITERS;
	CHECK_EQ(e->value, want);
	CHECK_EQ(e->kind, TALLY_COUNTER);
	CHECK_EQ(e->mode, TALLY_PERCPU);
	CHECK(!strcmp(e->help, "Requests served, by method and code."));
	CHECK(!strcmp(e->unit, ""));
	CHECK_EQ(e->nlabels, 2);
	if (percpu) {
		CHECK_EQ(e->npercpu, c->nslabs);
		/* Without rseq, a thread that found every fallback copy owned
		 * by a living thread (the main thread holds one) adds to the
		 * baseline: counted, attributed to no copy. */
		if (c->rseq)
			CHECK_EQ(e->percpu_sum, want);
		else
			CHECK(e->percpu_sum <= want);
		for (int i = 0; i < n && c->rseq; i++)
			CHECK_EQ(e->percpu[c->cpu[i]], (int64_t)(i + 1) * V_ITERS);
	} else {
		CHECK(e->percpu == NULL);
		CHECK_EQ(e->npercpu, 0);
	}

	/* Histogram: buckets, sum and count, per-CPU counts. */
	e = find(sn, "request_seconds", "");
	for (int i = 0; i < n; i++)
		for (long k = 0; k < V_HIST_VALUES; k++) {
			uint64_t v = hist_value(i, k);

			hb[tally_histogram_bucket(v, 3, 40)]++;
			hsum += (int64_t)v;
			hcount++;
		}
	CHECK_EQ(e->kind, TALLY_HISTOGRAM);
	CHECK_EQ(e->value, hcount);
	CHECK_EQ(e->sum, hsum);
	CHECK_EQ(e->sub_bits, 3);
	CHECK_EQ(e->max_bits, 40);
	CHECK_EQ(e->nbuckets, 304);
	CHECK(!strcmp(e->unit, "seconds"));
	CHECK(!strcmp(e->help, "Latency \xe2\x80\x94 in \xc2\xb5s."));
	for (unsigned b = 0; b < e->nbuckets; b++)
		CHECK_EQ(e->buckets[b], hb[b]);
	if (percpu) {
		if (c->rseq)
			CHECK_EQ(e->percpu_sum, hcount);
		else
			CHECK(e->percpu_sum <= hcount);
		if (c->rseq)
			for (int i = 0; i < n; i++)
				CHECK_EQ(e->percpu[c->cpu[i]], V_HIST_VALUES);
	}
	CHECK_EQ(e->qrc, 0);

	/* The other modes. */
	e = find(sn, "shared_total", "");
	CHECK_EQ(e->value, (int64_t)n * V_ITERS);
	CHECK_EQ(e->mode, TALLY_SHARED);
	if (percpu) {
		CHECK_EQ(e->percpu[0], (int64_t)n * V_ITERS);
		CHECK_EQ(e->percpu_sum, (int64_t)n * V_ITERS);
	}
	e = find(sn, "pernode_total", "");
	CHECK_EQ(e->value, (int64_t)n * V_ITERS);
	CHECK_EQ(e->mode, TALLY_PERNODE);
	if (percpu)
		CHECK_EQ(e->percpu_sum, (int64_t)n * V_ITERS);
	e = find(sn, "adaptive_total", "");
	CHECK_EQ(e->value, (int64_t)n * V_ITERS);
	CHECK_EQ(e->mode, TALLY_ADAPTIVE);
	if (percpu)
		CHECK(e->percpu_sum >= 0 && e->percpu_sum <= e->value);

	e = find(sn, "in_flight", "");
	CHECK_EQ(e->value, 17);
	CHECK_EQ(e->kind, TALLY_GAUGE);
	e = find(sn, "temperature", "");
	CHECK_EQ(e->value, -40);
	CHECK_EQ(e->kind, TALLY_GAUGE_SET);
	CHECK_EQ(e->mode, TALLY_SHARED);
	CHECK(!strcmp(e->unit, "celsius"));
	{
		char want_l[512] = "";

		for (int i = 0; i < 25; i++)
			snprintf(want_l + strlen(want_l),
				 sizeof(want_l) - strlen(want_l), "%s%c=%s",
				 i ? "," : "", 'a' + i, i % 2 ? "x" : "");
		e = find(sn, "many_labels_total", want_l);
		CHECK_EQ(e->value, 25);
		CHECK_EQ(e->nlabels, 25);
	}
	for (int i = 0; i < sn->n; i++)
		CHECK(strcmp(sn->s[i].name, "gone_total"));
	/* Zeroing is a baseline: the value drops, the raw copies do not. */
	e = find(sn, "zeroed_total", "");
	CHECK_EQ(e->value, 7);
	if (percpu)
		CHECK_EQ(e->percpu_sum, 107);
}

struct dir_acc {
	int calls, errors;
	pid_t pid;
	struct ctl *c;
	struct snap sn;
	char last_error[512];
};

static int dir_cb(const char *path, struct tally_seg *s, const char *error,
		  void *arg)
{
	struct dir_acc *a = arg;

	a->calls++;
	CHECK(path != NULL);
	if (!s) {
		a->errors++;
		snprintf(a->last_error, sizeof(a->last_error), "%s", error);
		return 0;
	}
	CHECK(error == NULL);
	CHECK(!strcmp(path, a->c->path));
	a->sn = read_seg(s, TALLY_READ_PERCPU);
	return 0;
}

static int stop_cb(const struct tally_series_view *v, void *arg)
{
	(void)v;
	++*(int *)arg;
	return 7;
}

TEST(values_from_another_process)
{
	struct ctl *c = ctl_new("values");
	pid_t pid = spawn(writer_values, c);
	struct dir_acc a;
	struct tally_seg *s;
	struct tally_seg_info info;
	struct snap sn;
	int calls = 0;

	wait_stage(c, pid, 1);

	/* While the writer lives: by pid. */
	memset(&a, 0, sizeof(a));
	a.c = c;
	CHECK_EQ(tally_seg_foreach_pid(c->dir, pid, NULL, dir_cb, &a), 1);
	CHECK_EQ(a.calls, 1);
	check_values(c, &a.sn, 1);
	snap_free(&a.sn);
	CHECK_EQ(tally_seg_foreach_pid(c->dir, 1, NULL, dir_cb, &a), 0);
	CHECK_EQ(tally_seg_foreach_pid(c->dir, 0, NULL, dir_cb, &a), -EINVAL);
	s = tally_seg_open(c->path, NULL);
	CHECK(s != NULL);
	CHECK_EQ(tally_seg_info(s, &info), 0);
	CHECK_EQ(info.alive, 1);
	tally_seg_close(s);

	/* After it exited: every way in, with and without per-CPU values. */
	atomic_store(&c->go, 1);
	reap_ok(pid);
	memset(&a, 0, sizeof(a));
	a.c = c;
	CHECK_EQ(tally_dir_foreach(c->dir, NULL, dir_cb, &a), 1);
	CHECK_EQ(a.calls, 1);
	CHECK_EQ(a.errors, 0);
	check_values(c, &a.sn, 1);
	snap_free(&a.sn);

	s = tally_seg_open(c->path, NULL);
	CHECK(s != NULL);
	sn = read_seg(s, 0);
	check_values(c, &sn, 0);
	snap_free(&sn);
	/* A second pass on the same handle gives the same. */
	sn = read_seg(s, TALLY_READ_PERCPU);
	check_values(c, &sn, 1);
	snap_free(&sn);

	CHECK_EQ(tally_seg_info(s, &info), 0);
	CHECK(!strcmp(info.path, c->path));
	CHECK_EQ(info.pid, pid);
	CHECK_EQ(info.alive, 0);
	CHECK(!strcmp(info.zone_name, "values"));
	CHECK(!strncmp(info.proc_name, "test-reader", 11));
	CHECK_EQ(info.major, 2);
	CHECK_EQ(info.minor, TALLY__FMT_MINOR);
	CHECK_EQ(info.shared, 0);
	CHECK_EQ(info.nslabs, c->nslabs);
	CHECK(info.nnodes >= 1 && info.nnodes <= info.nslabs);
	CHECK(info.start_ticks > 0);
	CHECK(info.created_ns > 1600000000ull * 1000000000ull);
	{
		struct stat st;

		CHECK_EQ(stat(c->path, &st), 0);
		CHECK_EQ(info.file_bytes, (uint64_t)st.st_size);
		CHECK_EQ(info.resident_bytes, (uint64_t)st.st_blocks * 512);
		CHECK(info.resident_bytes < info.file_bytes);
	}
	/* 10 series registered in 10 records, then one removed. */
	CHECK_EQ(info.series_used, 10);
	CHECK_EQ(info.families, 10);
	CHECK_EQ(info.generation, 11);

	/* A callback's non-zero return stops the walk and is returned. */
	CHECK_EQ(tally_seg_foreach(s, 0, stop_cb, &calls), 7);
	CHECK_EQ(calls, 1);
	CHECK_EQ(tally_seg_foreach(s, 0x2, stop_cb, &calls), -EINVAL);
	CHECK_EQ(tally_seg_foreach(s, 0, NULL, NULL), -EINVAL);
	CHECK_EQ(tally_seg_foreach(NULL, 0, stop_cb, &calls), -EINVAL);
	CHECK_EQ(tally_seg_info(NULL, &info), -EINVAL);
	CHECK_EQ(tally_seg_info(s, NULL), -EINVAL);
	tally_seg_close(s);
	tally_seg_close(NULL);
	CHECK(tally_seg_open(NULL, NULL) == NULL);
	CHECK_EQ(errno, EINVAL);
}

/* ---- quantiles -------------------------------------------------------- */

#define Q_N 100000

static uint64_t q_state;

static uint64_t q_rand(void)
{
	return xorshift64(&q_state);
}

/* Over [1, 10^decades): a random decade, a random value in it. */
static uint64_t q_value(int decades)
{
	uint64_t p = 1;
	int k = (int)(q_rand() % (uint64_t)decades);

	while (k--)
		p *= 10;
	return p + q_rand() % (9 * p);
}

static double dabs(double x)
{
	return x < 0 ? -x : x;
}

static const struct {
	const char *name;
	unsigned sub, max;
	int decades;
	uint64_t seed;
} qfam[] = {
	{ "q_default", 0, 0, 9, 1 },
	{ "q_sub1", 1, 40, 9, 2 },
	{ "q_sub5", 5, 19, 5, 3 },
	{ "q_sub2", 2, 50, 12, 4 },
};

static void writer_quantiles(struct ctl *c)
{
	struct tally_zone *z;

	writer_env(c, NULL);
	z = writer_zone(c, "quantiles", 8, 16, TALLY_ZONE_PERSIST);
	for (size_t f = 0; f < ARRAY_SIZE(qfam); f++) {
		struct tally_metric_desc d = desc(TALLY_HISTOGRAM, qfam[f].name);
		tally_metric m;

		d.hist_sub_bits = qfam[f].sub;
		d.hist_max_bits = qfam[f].max;
		reg(z, d, NULL, 0, &m);
		q_state = qfam[f].seed * 0x9e3779b97f4a7c15ull;
		for (int i = 0; i < Q_N; i++)
			tally_histogram_observe(histogram_of(&m), q_value(qfam[f].decades));
	}
	{
		struct tally_metric_desc d = desc(TALLY_HISTOGRAM, "q_empty");
		tally_metric m;

		reg(z, d, NULL, 0, &m);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int empty_cb(const struct tally_series_view *v, void *arg)
{
	double out = -1;

	(void)arg;
	if (strcmp(v->name, "q_empty"))
		return 0;
	CHECK_EQ(v->value, 0);
	CHECK_EQ(tally_histogram_quantile(v, 0.5, &out), -ENODATA);
	CHECK_EQ(errno, ENODATA);
	CHECK_EQ(tally_histogram_quantile(v, -0.1, &out), -EINVAL);
	CHECK_EQ(tally_histogram_quantile(v, 1.01, &out), -EINVAL);
	CHECK_EQ(tally_histogram_quantile(v, __builtin_nan(""), &out), -EINVAL);
	CHECK_EQ(tally_histogram_quantile(v, 0.5, NULL), -EINVAL);
	CHECK_EQ(tally_histogram_quantile(NULL, 0.5, &out), -EINVAL);
	return 0;
}

TEST(histogram_quantiles)
{
	struct ctl *c = ctl_new("quantiles");
	uint64_t *vals = malloc(Q_N * sizeof(uint64_t));
	struct snap sn;

	CHECK_CHILD_OK(harness_child((void (*)(void *))writer_quantiles, c));
	sn = read_path(c->path, 0);
	CHECK_EQ(sn.n, (int)ARRAY_SIZE(qfam) + 1);
	for (size_t f = 0; f < ARRAY_SIZE(qfam); f++) {
		const struct seen *e = find(&sn, qfam[f].name, "");
		unsigned sub = qfam[f].sub ? qfam[f].sub : 3;
		double tol = 1.0 / (double)(1u << sub);

		q_state = qfam[f].seed * 0x9e3779b97f4a7c15ull;
		for (int i = 0; i < Q_N; i++)
			vals[i] = q_value(qfam[f].decades);
		qsort(vals, Q_N, sizeof(vals[0]), cmp_u64);
		CHECK_EQ(e->value, Q_N);
		CHECK_EQ(e->qrc, 0);
		for (int i = 0; i < 5; i++) {
			double x = snap_qs[i] * Q_N;
			uint64_t rank = (uint64_t)x + ((double)(uint64_t)x < x);
			double exact = (double)vals[rank - 1];
			double err = dabs(e->q[i] - exact);

			if (err > exact * tol)
				harness_fail(__FILE__, __LINE__, "%s: q%g = %.1f, "
					     "exact %.0f: error %.2f%% > %.2f%%",
					     qfam[f].name, snap_qs[i], e->q[i], exact,
					     100 * err / exact, 100 * tol);
			/* q = 1 is the top of the bucket of the maximum. */
			if (snap_qs[i] == 1.0)
				CHECK(e->q[i] >= exact);
		}
	}
	{
		struct tally_seg *s = tally_seg_open(c->path, NULL);

		CHECK(s != NULL);
		CHECK_EQ(tally_seg_foreach(s, 0, empty_cb, NULL), 5);
		tally_seg_close(s);
	}
	snap_free(&sn);
	free(vals);
}

/*
 * Values from 2^max_bits - 64 to 2^max_bits - 1 are in range (the doc:
 * "values from 0 to 2^max_bits - 1") and fall in the last bucket; their
 * quantiles must be as accurate as any other.
 */
static void writer_last_bucket(struct ctl *c)
{
	struct tally_zone *z;
	struct tally_metric_desc d = desc(TALLY_HISTOGRAM, "top");
	tally_metric m;

	writer_env(c, NULL);
	z = writer_zone(c, "last", 4, 16, TALLY_ZONE_PERSIST);
	d.hist_sub_bits = 3;
	d.hist_max_bits = 10;
	reg(z, d, NULL, 0, &m);
	for (uint64_t v = 960; v < 1024; v++)
		tally_histogram_observe(histogram_of(&m), v);
}

TEST(histogram_quantile_last_bucket)
{
	struct ctl *c = ctl_new("last");
	struct snap sn;
	const struct seen *e;

	CHECK_CHILD_OK(harness_child((void (*)(void *))writer_last_bucket, c));
	sn = read_path(c->path, 0);
	e = find(&sn, "top", "");
	CHECK_EQ(e->value, 64);
	CHECK_EQ(e->nbuckets, 64);
	CHECK_EQ(e->buckets[63], 64);
	CHECK_EQ(e->qrc, 0);
	/* Exact: q0.5 = 991, q0.9 = 1017, q1 = 1023. */
	if (dabs(e->q[0] - 991) > 991 / 8.0 || dabs(e->q[1] - 1017) > 1017 / 8.0
	    || e->q[4] < 1023 || e->q[4] - 1023 > 1023 / 8.0)
		harness_fail(__FILE__, __LINE__, "last bucket [960, 1023]: "
			     "q0.5 = %.1f (exact 991), q0.9 = %.1f (exact "
			     "1017), q1 = %.1f (exact 1023): more than 12.5%% "
			     "off", e->q[0], e->q[1], e->q[4]);
	snap_free(&sn);
}

/* ---- churn ------------------------------------------------------------ */

#define CHURN_WINDOW 48

/* What series @id must hold; its labels carry it too. */
static int64_t churn_value(long id)
{
	return (int64_t)((uint64_t)id * 2654435761u % 1000003u) + 1;
}

struct churn_series {
	long id;
	tally_metric m;
};

static void writer_churn(struct ctl *c)
{
	static const char *names[] = { "conn_bytes", "conn_state",
				       "conn_latency" };
	static const unsigned kinds[] = { TALLY_COUNTER, TALLY_GAUGE_SET,
					  TALLY_HISTOGRAM };
	struct churn_series win[CHURN_WINDOW];
	struct tally_zone *z;
	char pad[64], idv[32], vv[32];
	long id;

	writer_env(c, NULL);
	/* Few chunks and records: blocks and records are reused at once. */
	z = writer_zone(c, "churn", 8, 4 * CHURN_WINDOW, 0);
	atomic_store(&c->stage, 1);
	for (id = 0; !atomic_load(&c->stop); id++) {
		struct churn_series *s = &win[id % CHURN_WINDOW];
		unsigned k = (unsigned)(id % 3);
		struct tally_label l[3] = { { "v", vv }, { "id", idv },
					    { "pad", pad } };
		struct tally_metric_desc d = desc(kinds[k], names[k]);
		int64_t v = churn_value(id);

		if (id >= CHURN_WINDOW) {
			CHECK_EQ(tally_metric_remove(&s->m), 0);
			atomic_store_explicit(&c->removed_below, s->id + 1,
					      memory_order_release);
		}
		snprintf(idv, sizeof(idv), "%ld", id);
		snprintf(vv, sizeof(vv), "%lld", (long long)v);
		memset(pad, 'p', (size_t)(id % 41));
		pad[id % 41] = 0;
		if (k == 2) {
			d.hist_sub_bits = 2;
			d.hist_max_bits = 12;
		}
		reg(z, d, l, 3, &s->m);
		s->id = id;
		/* One update each, so a reader sees 0 or v, nothing else. */
		if (k == 0)
			tally_counter_add(counter_of(&s->m), v);
		else if (k == 1)
			tally_setgauge_set(setgauge_of(&s->m), v);
		else
			tally_histogram_observe(histogram_of(&s->m), (uint64_t)v % 4096);
		atomic_store_explicit(&c->registered, id + 1,
				      memory_order_release);
	}
	atomic_store(&c->stage, 2);
	wait_go(c, 1);
}

struct churn_pass {
	long removed_below;
	long seen, valued;
};

static int churn_cb(const struct tally_series_view *v, void *arg)
{
	struct churn_pass *p = arg;
	long id;
	int64_t want;
	unsigned k;
	char *end;

	if (!strcmp(v->name, "conn_bytes"))
		k = 0;
	else if (!strcmp(v->name, "conn_state"))
		k = 1;
	else if (!strcmp(v->name, "conn_latency"))
		k = 2;
	else
		harness_fail(__FILE__, __LINE__, "torn name \"%.40s\"", v->name);
	if (v->nlabels != 3 || strcmp(v->label_names[0], "id") ||
	    strcmp(v->label_names[1], "pad") || strcmp(v->label_names[2], "v"))
		harness_fail(__FILE__, __LINE__, "torn labels on %s", v->name);
	id = strtol(v->label_values[0], &end, 10);
	CHECK(*end == 0 && id >= 0);
	want = churn_value(id);
	CHECK_EQ(strtoll(v->label_values[2], &end, 10), want);
	CHECK(*end == 0);
	CHECK_EQ(strlen(v->label_values[1]), (size_t)(id % 41));
	CHECK_EQ(id % 3, (long)k);
	if (id < p->removed_below)
		harness_fail(__FILE__, __LINE__, "series %ld reported, but it "
			     "was removed before the pass (all below %ld "
			     "were)", id, p->removed_below);
	switch (k) {
	case 0:
	case 1:
		if (v->value != 0 && v->value != want)
			harness_fail(__FILE__, __LINE__, "%s{id=%ld}: %lld, "
				     "expected 0 or %lld", v->name, id,
				     (long long)v->value, (long long)want);
		p->valued += v->value == want;
		break;
	case 2: {
		uint64_t x = (uint64_t)want % 4096;
		unsigned b = tally_histogram_bucket(x, 2, 12);

		CHECK(v->value == 0 || v->value == 1);
		CHECK(v->sum == 0 || v->sum == (int64_t)x);
		for (unsigned i = 0; i < v->nbuckets; i++)
			if (v->buckets[i] != (i == b ? v->value : 0) &&
			    !(i == b && v->buckets[i] <= 1))
				harness_fail(__FILE__, __LINE__, "%s{id=%ld}: "
					     "bucket %u = %lld, its value %llu "
					     "goes in bucket %u", v->name, id,
					     i, (long long)v->buckets[i],
					     (unsigned long long)x, b);
		p->valued += v->value == 1 && v->sum == (int64_t)x;
		break;
	}
	}
	{
		int64_t s = 0;

		for (unsigned c = 0; c < v->npercpu; c++)
			s += v->percpu[c];
		if (k == 0)
			CHECK_EQ(s, v->value);
	}
	p->seen++;
	return 0;
}

TEST(churn_while_reading)
{
	struct ctl *c = ctl_new("churn");
	pid_t pid = spawn(writer_churn, c);
	struct tally_seg *s;
	double t0, secs = 3.0;
	long passes = 0, seen = 0, valued = 0;
	uint64_t gen = 0;

	wait_stage(c, pid, 1);
	s = tally_seg_open(c->path, NULL);
	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	t0 = harness_now();
	while (harness_now() - t0 < secs) {
		struct churn_pass p = { 0, 0, 0 };
		struct tally_seg_info info;
		long reg_after;
		int rc;

		p.removed_below = atomic_load_explicit(&c->removed_below,
						       memory_order_acquire);
		rc = tally_seg_foreach(s, TALLY_READ_PERCPU, churn_cb, &p);
		if (rc < 0)
			harness_fail(__FILE__, __LINE__, "pass %ld failed on a "
				     "valid segment: %s", passes,
				     tally_errmsg());
		reg_after = atomic_load(&c->registered);
		CHECK(rc <= CHURN_WINDOW + 1);
		CHECK(reg_after >= 0);
		CHECK_EQ(tally_seg_info(s, &info), 0);
		CHECK(info.generation >= gen);
		gen = info.generation;
		CHECK(info.series_used <= 4 * CHURN_WINDOW);
		seen += p.seen;
		valued += p.valued;
		passes++;
		/* Now and then a fresh handle, too. */
		if (passes % 64 == 0) {
			tally_seg_close(s);
			s = tally_seg_open(c->path, NULL);
			CHECK(s != NULL);
		}
	}
	atomic_store(&c->stop, 1);
	wait_stage(c, pid, 2);
	atomic_store(&c->go, 1);
	reap_ok(pid);
	tally_seg_close(s);
	printf("  %ld passes, %ld series seen (%ld with their value), "
	       "%ld registered\n", passes, seen, valued,
	       (long)atomic_load(&c->registered));
	CHECK(passes >= 20);
	CHECK(atomic_load(&c->registered) > 10 * CHURN_WINDOW);
	CHECK(valued >= 100);
}

/* ---- a record reused in the middle of the reader's copy --------------- */

struct reuse {
	struct tally_zone *z;
	tally_metric *m;
	uint32_t old_series;
};

/* What a writer on another CPU does while the reader's copy of the series
 * table is half done: remove the series, register another in its record
 * with longer labels. */
static void reuse_action(void *arg)
{
	struct reuse *r = arg;
	struct tally_label l = { "k", "a-much-longer-value" };
	struct tally_metric_desc d = desc(TALLY_COUNTER, "conn");

	CHECK_EQ(tally_metric_remove(r->m), 0);
	reg(r->z, d, &l, 1, r->m);
	CHECK_EQ(r->m->series, r->old_series);
	tally_counter_add(counter_of(r->m), 2);
}

TEST(record_reused_during_copy)
{
	struct tally_zone *z = make_zone("reuse", 4, 64, 0);
	struct tally_label l = { "k", "v" }, lb = { "k", "other" };
	struct tally_metric_desc d = desc(TALLY_COUNTER, "conn");
	tally_metric a, b;
	struct reuse r;
	struct tally_seg *s;
	struct snap sn;
	int rc;

	reg(z, d, &l, 1, &a);
	reg(z, d, &lb, 1, &b);
	tally_counter_add(counter_of(&a), 1);
	tally_counter_add(counter_of(&b), 10);
	s = tally_seg_open(tally_zone_path(z), NULL);
	CHECK(s != NULL);
	sn = read_seg(s, 0);
	CHECK_EQ(sn.n, 2);
	snap_free(&sn);

	/* The reader has copied the record's seq, state, lengths, family
	 * and slot (its first 28 bytes) when the writer reuses it. */
	r = (struct reuse){ z, &a, a.series };
	hook.split_at = z->hdr->series_off +
			(uint64_t)a.series * sizeof(struct tally__series) +
			offsetof(struct tally__series, labels);
	hook.action = reuse_action;
	hook.arg = &r;
	hook.fired = 0;
	hook.armed = 1;
	memset(&sn, 0, sizeof(sn));
	rc = tally_seg_foreach(s, 0, snap_cb, &sn);
	CHECK_EQ(hook.fired, 1);
	if (rc < 0)
		harness_fail(__FILE__, __LINE__, "a record reused during the "
			     "copy made the pass fail (%d): %s", rc,
			     tally_errmsg());
	/* The changed record is skipped in this pass: only b. */
	CHECK_EQ(rc, 1);
	CHECK_EQ(find(&sn, "conn", "k=other")->value, 10);
	snap_free(&sn);
	/* The next pass sees the new series. */
	sn = read_seg(s, 0);
	CHECK_EQ(sn.n, 2);
	CHECK_EQ(find(&sn, "conn", "k=a-much-longer-value")->value, 2);
	snap_free(&sn);
	tally_seg_close(s);
}

/* ---- a counter read while it grows ------------------------------------ */

/* Changes every byte of the 64-bit word on every add.  The value wraps,
 * but STEP is odd, so the number of steps is value * STEP^-1 mod 2^64:
 * a torn word gives a number of steps far out of range. */
#define STEP UINT64_C(0x0101010101010101)

static uint64_t step_inverse(void)
{
	uint64_t x = STEP; /* Newton: each round doubles the correct bits */

	for (int i = 0; i < 6; i++)
		x *= 2 - STEP * x;
	return x;
}

static void writer_grow(struct ctl *c)
{
	struct tally_zone *z;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "grow");
	tally_metric m;

	writer_env(c, NULL);
	z = writer_zone(c, "grow", 2, 16, 0);
	reg(z, d, NULL, 0, &m);
	atomic_store(&c->stage, 1);
	for (long i = 0; !atomic_load(&c->stop); i++) {
		tally_counter_add(counter_of(&m), (int64_t)STEP);
		atomic_store_explicit(&c->progress, i + 1,
				      memory_order_release);
		if (i % 65536 == 0)
			harness_pin((int)(i / 65536) % harness_ncpus());
	}
	atomic_store(&c->stage, 2);
	wait_go(c, 1);
}

struct grow_pass {
	int64_t value;
	int n;
};

static int grow_cb(const struct tally_series_view *v, void *arg)
{
	struct grow_pass *p = arg;

	p->value = v->value;
	p->n++;
	return 0;
}

TEST(counter_never_torn)
{
	struct ctl *c = ctl_new("grow");
	pid_t pid = spawn(writer_grow, c);
	struct tally_seg *s;
	double t0;
	long passes = 0;
	uint64_t inv = step_inverse();

	CHECK(STEP * inv == 1);
	wait_stage(c, pid, 1);
	s = tally_seg_open(c->path, NULL);
	CHECK(s != NULL);
	t0 = harness_now();
	while (harness_now() - t0 < 1.5) {
		struct grow_pass p = { 0, 0 };
		uint64_t before = (uint64_t)atomic_load(&c->progress), after, k;

		CHECK_EQ(tally_seg_foreach(s, TALLY_READ_PERCPU, grow_cb, &p), 1);
		after = (uint64_t)atomic_load(&c->progress);
		k = (uint64_t)p.value * inv;
		if (k < before || k > after + 1)
			harness_fail(__FILE__, __LINE__, "read %#llx = %llu "
				     "steps, expected %llu to %llu",
				     (unsigned long long)p.value,
				     (unsigned long long)k,
				     (unsigned long long)before,
				     (unsigned long long)after + 1);
		passes++;
	}
	atomic_store(&c->stop, 1);
	wait_stage(c, pid, 2);
	atomic_store(&c->go, 1);
	reap_ok(pid);
	tally_seg_close(s);
	CHECK(passes > 100);
}

/* ---- an in-flight gauge read while it moves ------------------------------ */

/*
 * A submitter on CPU 0 raises the gauge, a completer on CPU 1 lowers it,
 * as fast as they can: the gauge counts requests in flight, at most 5
 * queued.  The submitter raises the gauge before it publishes a request
 * and the completer lowers it after it takes one, so the gauge's true
 * value stays within 0 .. 5 + 2 at every moment.
 */
#define FLIGHT_MAX 5
#define FLIGHT_TRUE_MAX (FLIGHT_MAX + 2)

struct flight {
	struct ctl *c;
	tally_gauge g;
	_Atomic long queued;
	long moves;
};

static void *flight_submitter(void *arg)
{
	struct flight *f = arg;
	long n = 0;

	harness_pin(0);
	while (!atomic_load_explicit(&f->c->stop, memory_order_relaxed)) {
		if (atomic_load_explicit(&f->queued, memory_order_relaxed) <
		    FLIGHT_MAX) {
			tally_gauge_inc(&f->g);
			atomic_fetch_add_explicit(&f->queued, 1,
						  memory_order_release);
			n++;
		}
	}
	f->moves = n;
	return NULL;
}

static void *flight_completer(void *arg)
{
	struct flight *f = arg;

	harness_pin(1 % harness_ncpus());
	while (!atomic_load_explicit(&f->c->stop, memory_order_relaxed)) {
		if (atomic_load_explicit(&f->queued, memory_order_acquire) > 0) {
			atomic_fetch_sub_explicit(&f->queued, 1,
						  memory_order_relaxed);
			tally_gauge_dec(&f->g);
		}
	}
	return NULL;
}

static void writer_flight(struct ctl *c)
{
	static struct flight f;
	struct tally_metric_desc d = desc(0, "requests_in_flight");
	struct tally_zone *z;
	pthread_t t[2];

	writer_env(c, NULL);
	z = writer_zone(c, "flight", 2, 16, 0);
	f.c = c;
	CHECK_EQ(tally_gauge_register(z, &d, &f.g), 0);
	CHECK_EQ(pthread_create(&t[0], NULL, flight_submitter, &f), 0);
	CHECK_EQ(pthread_create(&t[1], NULL, flight_completer, &f), 0);
	atomic_store(&c->stage, 1);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	atomic_store(&c->progress, f.moves);
	atomic_store(&c->stage, 2);
}

static int flight_cb(const struct tally_series_view *v, void *arg)
{
	*(int64_t *)arg = v->value;
	return 0;
}

/*
 * A gauge never reads below what it truly was during the read (its
 * decrements are read before its increments, tally(3) GAUGES): read
 * from another process while it moves, it never reads below 0.  How far
 * above the truth the reads go is printed (a measurement, not asserted).
 */
TEST_TIMEOUT(gauge_reads_never_below_truth, 300)
{
	struct ctl *c = ctl_new("flight");
	pid_t pid = spawn(writer_flight, c);
	long reads = harness_scale(250000), within = 0, over = 0;
	int64_t lowest = INT64_MAX, highest = INT64_MIN;
	struct tally_seg *s;
	double t0;

	wait_stage(c, pid, 1);
	s = tally_seg_open(c->path, NULL);
	CHECK(s != NULL);
	t0 = harness_now();
	for (long i = 0; i < reads; i++) {
		int64_t v = INT64_MIN;

		CHECK_EQ(tally_seg_foreach(s, 0, flight_cb, &v), 1);
		if (v < lowest)
			lowest = v;
		if (v > highest)
			highest = v;
		if (v <= FLIGHT_TRUE_MAX + 100)
			within++;
		else
			over++;
		if (v < 0)
			harness_fail(__FILE__, __LINE__, "read %lld of a gauge "
				     "that never went below 0 (read %ld)",
				     (long long)v, i);
	}
	t0 = harness_now() - t0;
	atomic_store(&c->stop, 1);
	wait_stage(c, pid, 2);
	reap_ok(pid);
	tally_seg_close(s);
	printf("  %ld reads in %.1f s while the gauge moved %.1fM times a "
	       "second: lowest %lld, highest %lld, %.3f%% within 100 of the "
	       "truth (0..%d)\n", reads, t0,
	       (double)atomic_load(&c->progress) * 2 / t0 / 1e6,
	       (long long)lowest, (long long)highest,
	       100.0 * (double)within / (double)reads, FLIGHT_TRUE_MAX);
	CHECK(lowest >= 0);
}

/* ---- killed writers and clean-up --------------------------------------- */

static void writer_victim(struct ctl *c)
{
	struct tally_zone *z;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "work_total");
	struct tally_metric_desc dh = desc(TALLY_HISTOGRAM, "work_seconds");
	tally_metric m, h, tmp;

	writer_env(c, NULL);
	z = writer_zone(c, "victim", 8, 64, 0);
	reg(z, d, NULL, 0, &m);
	reg(z, dh, NULL, 0, &h);
	for (long i = 0;; i++) {
		tally_counter_inc(counter_of(&m));
		tally_histogram_observe(histogram_of(&h), (uint64_t)i % 1000);
		atomic_store_explicit(&c->progress, i + 1,
				      memory_order_release);
		if (i % 256 == 0) {
			/* Registrations too, to be killed in one. */
			struct tally_label l = { "i", "x" };
			struct tally_metric_desc dt = desc(TALLY_GAUGE, "tmp");

			reg(z, dt, &l, 1, &tmp);
			tally_gauge_inc(gauge_of(&tmp));
			CHECK_EQ(tally_metric_remove(&tmp), 0);
		}
		if (i == 1000)
			atomic_store(&c->stage, 1);
	}
}

static void writer_idle(struct ctl *c)
{
	struct tally_zone *z;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "idle_total");
	tally_metric m;

	writer_env(c, NULL);
	z = writer_zone(c, "idle", 2, 16, 0);
	reg(z, d, NULL, 0, &m);
	tally_counter_add(counter_of(&m), 3);
	atomic_store(&c->stage, 1);
	wait_go(c, 1);
}

static void writer_persistent(struct ctl *c)
{
	struct tally_zone *z;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "kept_total");
	tally_metric m;

	writer_env(c, NULL);
	z = writer_zone(c, "kept", 2, 16, TALLY_ZONE_PERSIST);
	reg(z, d, NULL, 0, &m);
	tally_counter_add(counter_of(&m), 4);
	exit(0);
}

struct victim_acc {
	int64_t work, count;
	int n;
};

static int victim_cb(const struct tally_series_view *v, void *arg)
{
	struct victim_acc *a = arg;

	a->n++;
	if (!strcmp(v->name, "work_total"))
		a->work = v->value;
	else if (!strcmp(v->name, "work_seconds"))
		a->count = v->value;
	else
		CHECK(!strcmp(v->name, "tmp"));
	return 0;
}

TEST(killed_writer_and_cleanup)
{
	struct ctl *cv = ctl_new("cleanup");
	struct ctl *ci = ctl_new("cleanup");
	struct ctl *cp = ctl_new("cleanup");
	pid_t victim, idle, kept;
	struct tally_seg *s;
	struct tally_seg_info info;
	struct victim_acc a = { 0, 0, 0 };
	char junk[PATH_MAX + 32], foreign[PATH_MAX + 32];
	long done;
	int status, fd, have_foreign;

	idle = spawn(writer_idle, ci);
	kept = spawn(writer_persistent, cp);
	victim = spawn(writer_victim, cv);
	wait_stage(ci, idle, 1);
	reap_ok(kept);
	wait_stage(cv, victim, 1);
	while (atomic_load(&cv->progress) < 20000)
		usleep(1000);
	CHECK_EQ(kill(victim, SIGKILL), 0);
	CHECK_EQ(waitpid(victim, &status, 0), victim);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	done = atomic_load(&cv->progress);

	/* The dead writer's segment is readable, and says it is dead. */
	s = tally_seg_open(cv->path, NULL);
	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK_EQ(tally_seg_info(s, &info), 0);
	CHECK_EQ(info.alive, 0);
	CHECK_EQ(info.pid, victim);
	CHECK(tally_seg_foreach(s, TALLY_READ_PERCPU, victim_cb, &a) >= 2);
	/* The add of the step it was killed in may be there or not. */
	CHECK(a.work == done || a.work == done + 1);
	CHECK(a.count == done || a.count == done + 1);
	tally_seg_close(s);

	/* Files the clean-up must leave alone. */
	snprintf(junk, sizeof(junk), "%s/junk.%d.tally", cv->dir, victim);
	fd = open(junk, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "not a segment\n", 14), 14);
	close(fd);
	snprintf(foreign, sizeof(foreign), "%s/foreign.%d.tally", cv->dir,
		 victim);
	copy_sparse(cv->path, foreign);
	have_foreign = chown(foreign, 65534, 65534) == 0;
	if (!have_foreign)
		unlink(foreign);

	CHECK_EQ(tally_dir_cleanup(cv->dir), 1);
	CHECK(access(cv->path, F_OK) < 0 && errno == ENOENT);
	CHECK_EQ(access(ci->path, F_OK), 0);
	CHECK_EQ(access(cp->path, F_OK), 0);
	CHECK_EQ(access(junk, F_OK), 0);
	if (have_foreign)
		CHECK_EQ(access(foreign, F_OK), 0);
	else
		printf("  (chown failed: the foreign file case was not run)\n");
	CHECK_EQ(tally_dir_cleanup(cv->dir), 0);

	/* Once the idle writer is killed too, it goes as well. */
	CHECK_EQ(kill(idle, SIGKILL), 0);
	CHECK_EQ(waitpid(idle, &status, 0), idle);
	CHECK_EQ(tally_dir_cleanup(cv->dir), 1);
	CHECK(access(ci->path, F_OK) < 0);
	CHECK_EQ(access(cp->path, F_OK), 0);

	{
		char missing[PATH_MAX + 16];

		snprintf(missing, sizeof(missing), "%s/none", cv->dir);
		CHECK_EQ(tally_dir_cleanup(missing), -ENOENT);
		CHECK(has(tally_errmsg(), missing));
	}
}

/* ---- reading allocates nothing ---------------------------------------- */

#define MEM_COUNTERS 6000
#define MEM_HISTS 40

static void writer_memory(struct ctl *c)
{
	struct tally_zone *z;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "mem_total");
	struct tally_metric_desc dh = desc(TALLY_HISTOGRAM, "mem_seconds");
	char v[32];
	struct tally_label l = { "i", v };
	tally_metric m;

	writer_env(c, "256");
	harness_pin(0);
	z = writer_zone(c, "memory", 48, MEM_COUNTERS + MEM_HISTS,
			TALLY_ZONE_PERSIST);
	c->nslabs = tally__env.nslabs;
	c->cpu[0] = sched_getcpu();
	for (int i = 0; i < MEM_COUNTERS; i++) {
		snprintf(v, sizeof(v), "%d", i);
		reg(z, d, &l, 1, &m);
		tally_counter_add(counter_of(&m), i);
	}
	dh.hist_max_bits = 20;
	for (int i = 0; i < MEM_HISTS; i++) {
		snprintf(v, sizeof(v), "%d", i);
		reg(z, dh, &l, 1, &m);
		for (int k = 0; k <= i; k++)
			tally_histogram_observe(histogram_of(&m), (uint64_t)k * 1000);
	}
	c->rseq = tally_rseq_active();
}

struct mem_acc {
	struct ctl *c;
	long n;
};

static int mem_cb(const struct tally_series_view *v, void *arg)
{
	struct mem_acc *a = arg;
	long i = atol(v->label_values[0]);
	int nonzero = 0;

	if (v->percpu)
		CHECK_EQ(v->npercpu, 256);
	if (!strcmp(v->name, "mem_total"))
		CHECK_EQ(v->value, i);
	else
		CHECK_EQ(v->value, i + 1);
	for (unsigned c = 0; c < v->npercpu; c++)
		nonzero += v->percpu[c] != 0;
	CHECK(nonzero <= 1);
	if (v->percpu && a->c->rseq && v->value)
		CHECK_EQ(v->percpu[a->c->cpu[0]], v->value);
	a->n++;
	return 0;
}

static blkcnt_t blocks(const char *path)
{
	struct stat st;

	CHECK_EQ(stat(path, &st), 0);
	return st.st_blocks;
}

TEST(reader_allocates_nothing)
{
	struct ctl *c = ctl_new("memory");
	struct tally_seg *s;
	struct tally_seg_info info;
	blkcnt_t b0;
	struct stat st;

	CHECK_CHILD_OK(harness_child((void (*)(void *))writer_memory, c));
	CHECK_EQ(c->nslabs, 256);
	CHECK_EQ(stat(c->path, &st), 0);
	b0 = st.st_blocks;
	printf("  segment: %lld bytes, %lld resident\n", (long long)st.st_size,
	       (long long)b0 * 512);
	/* Lazy: one CPU wrote, so far less than one page per slab. */
	CHECK((uint64_t)b0 * 512 < (uint64_t)st.st_size / 16);

	s = tally_seg_open(c->path, NULL);
	CHECK(s != NULL);
	CHECK_EQ(blocks(c->path), b0);
	for (int pass = 0; pass < 4; pass++) {
		struct mem_acc a = { c, 0 };

		CHECK_EQ(tally_seg_foreach(s, pass % 2 ? 0 : TALLY_READ_PERCPU,
					   mem_cb, &a),
			 MEM_COUNTERS + MEM_HISTS);
		CHECK_EQ(a.n, MEM_COUNTERS + MEM_HISTS);
		CHECK_EQ(tally_seg_info(s, &info), 0);
		CHECK_EQ(info.resident_bytes, (uint64_t)b0 * 512);
		if (blocks(c->path) != b0)
			harness_fail(__FILE__, __LINE__, "pass %d: st_blocks "
				     "%lld, %lld before reading", pass,
				     (long long)blocks(c->path),
				     (long long)b0);
	}
	tally_seg_close(s);
	{
		struct dir_acc a;

		memset(&a, 0, sizeof(a));
		a.c = c;
		CHECK_EQ(tally_dir_foreach(c->dir, NULL, dir_cb, &a), 1);
		snap_free(&a.sn);
		CHECK_EQ(blocks(c->path), b0);
	}

	/* The measure is sensitive: touching a hole through a mapping, as a
	 * reader must not, does allocate. */
	{
		int fd = open(c->path, O_RDONLY);
		off_t hole;
		volatile const char *p;

		CHECK(fd >= 0);
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		CHECK(p != MAP_FAILED);
		hole = lseek(fd, st.st_size / 2, SEEK_HOLE);
		CHECK(hole >= 0 && hole < st.st_size);
		(void)p[hole];
		printf("  a read through a mapping: st_blocks %lld -> %lld\n",
		       (long long)b0, (long long)blocks(c->path));
		munmap((void *)p, (size_t)st.st_size);
		close(fd);
	}
}

/* ---- what is refused --------------------------------------------------- */

static void writer_small(struct ctl *c)
{
	struct tally_zone *z;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "small_total");
	tally_metric m;

	writer_env(c, NULL);
	z = writer_zone(c, "small", 2, 16, TALLY_ZONE_PERSIST);
	reg(z, d, NULL, 0, &m);
	tally_counter_add(counter_of(&m), 42);
}

static int count_cb(const struct tally_series_view *v, void *arg)
{
	CHECK_EQ(v->value, 42);
	++*(int *)arg;
	return 0;
}

static void expect_refused(const char *path, const struct tally_open_opts *o,
			   int err)
{
	struct tally_seg *s = tally_seg_open(path, o);

	if (s)
		harness_fail(__FILE__, __LINE__, "%s: opened", path);
	if (errno != err)
		harness_fail(__FILE__, __LINE__, "%s: errno %d (%s), not %d",
			     path, errno, tally_errmsg(), err);
	if (!has(tally_errmsg(), path))
		harness_fail(__FILE__, __LINE__, "message \"%s\" does not "
			     "name %s", tally_errmsg(), path);
}

TEST(symlink_refused)
{
	struct ctl *c = ctl_new("symlink");
	char link[PATH_MAX + 32], missing[PATH_MAX + 32];
	struct tally_seg *s;
	int n = 0;

	CHECK_CHILD_OK(harness_child((void (*)(void *))writer_small, c));
	snprintf(link, sizeof(link), "%s/link.1.tally", c->dir);
	CHECK_EQ(symlink(c->path, link), 0);
	expect_refused(link, NULL, ELOOP);
	snprintf(missing, sizeof(missing), "%s/missing.2.tally", c->dir);
	expect_refused(missing, NULL, ENOENT);
	/* The target itself is fine. */
	s = tally_seg_open(c->path, NULL);
	CHECK(s != NULL);
	CHECK_EQ(tally_seg_foreach(s, 0, count_cb, &n), 1);
	tally_seg_close(s);
	/* A directory walk skips the link with the same message. */
	{
		struct dir_acc a;

		memset(&a, 0, sizeof(a));
		a.c = c;
		CHECK_EQ(tally_dir_foreach(c->dir, NULL, dir_cb, &a), 1);
		CHECK_EQ(a.calls, 2);
		CHECK_EQ(a.errors, 1);
		CHECK(has(a.last_error, link));
		snap_free(&a.sn);
	}
	/* A directory given as a symbolic link is refused too. */
	{
		char dlink[PATH_MAX + 32];
		struct dir_acc a;

		memset(&a, 0, sizeof(a));
		snprintf(dlink, sizeof(dlink), "%s-link", c->dir);
		CHECK_EQ(symlink(c->dir, dlink), 0);
		CHECK_EQ(tally_dir_foreach(dlink, NULL, dir_cb, &a), -ENOTDIR);
		CHECK(has(tally_errmsg(), dlink));
		CHECK_EQ(tally_dir_foreach(c->path, NULL, dir_cb, &a), -ENOTDIR);
		CHECK_EQ(a.calls, 0);
	}
}

TEST(other_users_file)
{
	struct ctl *c = ctl_new("foreign");
	char copy[PATH_MAX + 32];
	struct tally_open_opts allow = { .allow_uid = 65534 },
			       other = { .allow_uid = 12345 },
			       none = { .allow_uid = -1 };
	struct tally_seg *s;
	int n = 0;

	CHECK_CHILD_OK(harness_child((void (*)(void *))writer_small, c));
	snprintf(copy, sizeof(copy), "%s/other.1.tally", c->dir);
	copy_sparse(c->path, copy);
	/* Ours: opens. */
	s = tally_seg_open(copy, NULL);
	CHECK(s != NULL);
	tally_seg_close(s);
	if (chown(copy, 65534, 65534) < 0)
		harness_skip("chown to uid 65534 failed (%m): not root?");
	expect_refused(copy, NULL, EPERM);
	expect_refused(copy, &none, EPERM);
	expect_refused(copy, &other, EPERM);
	CHECK(has(tally_errmsg(), "65534"));
	s = tally_seg_open(copy, &allow);
	if (!s)
		harness_fail(__FILE__, __LINE__, "allow_uid: %s", tally_errmsg());
	CHECK_EQ(tally_seg_foreach(s, 0, count_cb, &n), 1);
	CHECK_EQ(n, 1);
	tally_seg_close(s);
	/* The walk: refused without the option, read with it. */
	{
		struct dir_acc a;

		memset(&a, 0, sizeof(a));
		a.c = c;
		unlink(c->path);
		CHECK_EQ(tally_dir_foreach(c->dir, NULL, dir_cb, &a), 0);
		CHECK_EQ(a.errors, 1);
		CHECK(has(a.last_error, copy));
		/* The same file is still ours to clean up: left alone. */
		CHECK_EQ(tally_dir_cleanup(c->dir), 0);
		CHECK_EQ(access(copy, F_OK), 0);
	}
}

/* A writer with TALLY_GROUP set, in a fresh process. */
struct group_writer {
	char dir[PATH_MAX];
	char gid[16];
	char path[PATH_MAX];
};

static void group_writer(void *arg)
{
	struct group_writer *g = arg;
	struct tally_zone_opts o = { .flags = TALLY_ZONE_PERSIST };
	struct tally_metric_desc d = desc(TALLY_COUNTER, "shared_total");
	struct tally_zone *z;
	tally_metric m;

	fresh_setenv("TALLY_DIR", g->dir);
	fresh_setenv("TALLY_GROUP", g->gid);
	z = tally_zone_create("grp", &o);
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	reg(z, d, NULL, 0, &m);
	tally_counter_add(counter_of(&m), 42); /* what count_cb expects */
	snprintf(g->path, sizeof(g->path), "%s", tally_zone_path(z));
}

/*
 * TALLY_GROUP: the writer makes its files 0640 and gives them to the
 * group; a reader of another uid in that group reads them with
 * allow_group, and only while neither the file nor its directory can be
 * written by anybody but their owner.
 */
TEST(group_shared_files)
{
	struct group_writer *g = shared_mem(sizeof(*g));
	struct tally_open_opts grp = { .allow_uid = -1, .allow_group = 1 };
	struct tally_seg *s;
	struct stat st;
	int n = 0;

	if (geteuid() != 0)
		harness_skip("needs root to play two users");
	snprintf(g->dir, sizeof(g->dir), "%s/grp.%d", harness_dir(),
		 (int)getpid());
	CHECK(mkdir(g->dir, 0750) == 0);
	snprintf(g->gid, sizeof(g->gid), "%u", (unsigned)getegid());
	CHECK_CHILD_OK(harness_child(group_writer, g));
	CHECK(stat(g->path, &st) == 0);
	CHECK_EQ(st.st_mode & 0777, 0640);
	CHECK_EQ(st.st_gid, getegid());
	/* Hand file and directory to another user, as a service's would be. */
	CHECK(chown(g->path, 65534, (gid_t)-1) == 0);
	CHECK(chown(g->dir, 65534, getegid()) == 0);
	expect_refused(g->path, NULL, EPERM);
	s = tally_seg_open(g->path, &grp);
	if (!s)
		harness_fail(__FILE__, __LINE__, "allow_group: %s",
			     tally_errmsg());
	CHECK_EQ(tally_seg_foreach(s, 0, count_cb, &n), 1);
	tally_seg_close(s);
	/* Writable by the group: anybody in it could have forged it. */
	CHECK(chmod(g->path, 0660) == 0);
	expect_refused(g->path, &grp, EPERM);
	CHECK(chmod(g->path, 0640) == 0);
	/* A directory the group can write to: refused as well. */
	CHECK(chmod(g->dir, 0770) == 0);
	expect_refused(g->path, &grp, EPERM);
	CHECK(chmod(g->dir, 0750) == 0);
	/* A directory of another owner than the file's: refused. */
	CHECK(chown(g->dir, 0, (gid_t)-1) == 0);
	expect_refused(g->path, &grp, EPERM);
	/* A group this process is not in: refused. */
	CHECK(chown(g->dir, 65534, (gid_t)-1) == 0);
	CHECK(chown(g->path, (uid_t)-1, 65534) == 0);
	expect_refused(g->path, &grp, EPERM);
	CHECK(unlink(g->path) == 0);
	remove_lock_files(g->dir);
	CHECK(rmdir(g->dir) == 0);
}

/* A group that does not exist is refused with a message naming it. */
static void bad_group_writer(void *arg)
{
	(void)arg;
	fresh_setenv("TALLY_DIR", harness_dir());
	fresh_setenv("TALLY_GROUP", "no-such-group-x");
	CHECK(tally_zone_create("grp", NULL) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(has(tally_errmsg(), "TALLY_GROUP=no-such-group-x"));
}

TEST(bad_tally_group_is_einval)
{
	CHECK_CHILD_OK(harness_child(bad_group_writer, NULL));
}

struct walk_acc {
	int ok, errors;
	char errors_text[4096];
};

static int walk_cb(const char *path, struct tally_seg *s, const char *error,
		   void *arg)
{
	struct walk_acc *a = arg;

	if (s) {
		CHECK(error == NULL);
		a->ok++;
	} else {
		CHECK(error != NULL);
		if (!has(error, path))
			harness_fail(__FILE__, __LINE__, "message \"%s\" does "
				     "not name %s", error, path);
		a->errors++;
		snprintf(a->errors_text + strlen(a->errors_text),
			 sizeof(a->errors_text) - strlen(a->errors_text),
			 "%s\n", error);
	}
	return 0;
}

static int stop_walk_cb(const char *path, struct tally_seg *s,
			const char *error, void *arg)
{
	(void)path;
	(void)s;
	(void)error;
	++*(int *)arg;
	return 9;
}

TEST(directory_walk)
{
	struct ctl *c = ctl_new("walk");
	char p[PATH_MAX + 64];
	struct walk_acc a;
	int fd, n = 0;

	CHECK_CHILD_OK(harness_child((void (*)(void *))writer_small, c));
	/* Copies under other pids, and things that are not segments. */
	snprintf(p, sizeof(p), "%s/a.77.tally", c->dir);
	copy_sparse(c->path, p);
	snprintf(p, sizeof(p), "%s/b.77.tally", c->dir);
	copy_sparse(c->path, p);
	snprintf(p, sizeof(p), "%s/c.177.tally", c->dir);
	copy_sparse(c->path, p);
	snprintf(p, sizeof(p), "%s/d.77.tally.tmp", c->dir);
	copy_sparse(c->path, p);
	snprintf(p, sizeof(p), "%s/notes.txt", c->dir);
	copy_sparse(c->path, p);
	snprintf(p, sizeof(p), "%s/.tally", c->dir);
	copy_sparse(c->path, p);
	snprintf(p, sizeof(p), "%s/garbage.77.tally", c->dir);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, 8192), 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/dir.77.tally", c->dir);
	CHECK_EQ(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/fifo.78.tally", c->dir);
	CHECK_EQ(mkfifo(p, 0600), 0);

	memset(&a, 0, sizeof(a));
	CHECK_EQ(tally_dir_foreach(c->dir, NULL, walk_cb, &a), 4);
	CHECK_EQ(a.ok, 4);
	CHECK_EQ(a.errors, 3);
	memset(&a, 0, sizeof(a));
	CHECK_EQ(tally_seg_foreach_pid(c->dir, 77, NULL, walk_cb, &a), 2);
	CHECK_EQ(a.ok, 2);
	CHECK_EQ(a.errors, 2); /* garbage and dir */
	memset(&a, 0, sizeof(a));
	CHECK_EQ(tally_seg_foreach_pid(c->dir, 7, NULL, walk_cb, &a), 0);
	CHECK_EQ(a.ok + a.errors, 0);
	CHECK_EQ(tally_dir_foreach(c->dir, NULL, stop_walk_cb, &n), 9);
	CHECK_EQ(n, 1);
	CHECK_EQ(tally_dir_foreach(c->dir, NULL, NULL, NULL), -EINVAL);
	snprintf(p, sizeof(p), "%s/nope", c->dir);
	CHECK_EQ(tally_dir_foreach(p, NULL, walk_cb, &a), -ENOENT);
	CHECK(has(tally_errmsg(), p));
	/* The writer is gone, but its segment (and the copies) are
	 * persistent: the clean-up keeps them, and everything else. */
	CHECK_EQ(tally_dir_cleanup(c->dir), 0);
	memset(&a, 0, sizeof(a));
	CHECK_EQ(tally_dir_foreach(c->dir, NULL, walk_cb, &a), 4);
}

/* ---- liveness of format 2.0 files is the pid and its start time ------- */

static void writer_exits(struct ctl *c)
{
	struct tally_zone *z;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "x_total");
	tally_metric m;

	writer_env(c, NULL);
	z = writer_zone(c, "gone", 2, 16, 0);
	reg(z, d, NULL, 0, &m);
	tally_counter_add(counter_of(&m), 1);
	_exit(0); /* no exit handlers: the file stays, its writer is gone */
}

/* A copy of the dead writer's segment claiming to be @pid, started at
 * @start, with @flags, in format 2.0 (before the creator lock) unless
 * @minor says otherwise. */
static void fake_creator_minor(const char *src, const char *dst, int pid,
			       uint64_t start, uint32_t flags, uint16_t minor)
{
	int fd;
	int32_t p = pid;

	copy_sparse(src, dst);
	fd = open(dst, O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, &p, 4, offsetof(struct tally__hdr, creator_pid)), 4);
	CHECK_EQ(pwrite(fd, &start, 8,
			offsetof(struct tally__hdr, creator_start)), 8);
	CHECK_EQ(pwrite(fd, &flags, 4, offsetof(struct tally__hdr, flags)), 4);
	CHECK_EQ(pwrite(fd, &minor, 2, offsetof(struct tally__hdr, minor)), 2);
	close(fd);
}

static void fake_creator(const char *src, const char *dst, int pid,
			 uint64_t start, uint32_t flags)
{
	fake_creator_minor(src, dst, pid, start, flags, 0);
}

static int alive_of(const char *path)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	struct tally_seg_info info;

	CHECK(s != NULL);
	CHECK_EQ(tally_seg_info(s, &info), 0);
	tally_seg_close(s);
	return info.alive;
}

TEST(cleanup_checks_start_time)
{
	struct ctl *c = ctl_new("reuse-pid");
	char mine[PATH_MAX + 32], recycled[PATH_MAX + 32], kept[PATH_MAX + 32];
	char locked[PATH_MAX + 32];
	uint64_t start = tally__proc_start(getpid());

	CHECK(start > 0);
	CHECK_CHILD_OK(harness_child((void (*)(void *))writer_exits, c));
	CHECK_EQ(alive_of(c->path), 0);
	/* This process, with its start time: alive. */
	snprintf(mine, sizeof(mine), "%s/mine.%d.tally", c->dir, getpid());
	fake_creator(c->path, mine, getpid(), start, 0);
	CHECK_EQ(alive_of(mine), 1);
	/* This pid, but another start time: a recycled pid, dead. */
	snprintf(recycled, sizeof(recycled), "%s/recycled.%d.tally", c->dir,
		 getpid());
	fake_creator(c->path, recycled, getpid(), start + 1, 0);
	CHECK_EQ(alive_of(recycled), 0);
	/* Dead but persistent. */
	snprintf(kept, sizeof(kept), "%s/kept.1.tally", c->dir);
	fake_creator(c->path, kept, getpid(), start + 1, TALLY__HDR_PERSIST);
	CHECK_EQ(alive_of(kept), 0);
	/* From format 2.1 on, the pid does not count: nobody holds the
	 * creator lock of a copy, it is dead even with this pid. */
	snprintf(locked, sizeof(locked), "%s/lockless.%d.tally", c->dir,
		 getpid());
	fake_creator_minor(c->path, locked, getpid(), start, 0, 1);
	CHECK_EQ(alive_of(locked), 0);

	CHECK_EQ(tally_dir_cleanup(c->dir), 3);
	CHECK(access(c->path, F_OK) < 0);
	CHECK(access(recycled, F_OK) < 0);
	CHECK(access(locked, F_OK) < 0);
	CHECK_EQ(access(mine, F_OK), 0);
	CHECK_EQ(access(kept, F_OK), 0);
}

/* A writer of three counters (42 each) in a zone of 2^24 series. */
static void writer_huge_table(struct ctl *c)
{
	struct tally_metric_desc d = desc(TALLY_COUNTER, "few_total");
	struct tally_zone *z;

	writer_env(c, NULL);
	z = writer_zone(c, "huge", 2, 1u << 24, TALLY_ZONE_PERSIST);
	for (int i = 0; i < 3; i++) {
		char v[8];
		struct tally_label l = { "i", v };
		tally_metric m;

		snprintf(v, sizeof(v), "%d", i);
		reg(z, d, &l, 1, &m);
		tally_counter_add(counter_of(&m), 42);
	}
}

/*
 * A header that claims every one of 2^24 series records is used (valid:
 * within the caps) costs a reader what was written, not 2 GB of holes
 * read as zeros: the pass skips the pages that hold no data.  A record
 * written at the very end of the table is still found.  What the pass
 * costs is counted (bytes read), not timed.
 */
TEST(series_table_holes_are_not_read)
{
	struct ctl *c = ctl_new("holes");
	const uint32_t cap = 1u << 24;
	struct tally__series rec;
	struct tally__hdr h;
	struct tally_seg *s;
	double t0;
	int fd, n = 0;

	CHECK_CHILD_OK(harness_child((void (*)(void *))writer_huge_table, c));
	fd = open(c->path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	CHECK_EQ(h.series_cap, cap);
	CHECK_EQ(pread(fd, &rec, sizeof(rec), (off_t)h.series_off),
		 (ssize_t)sizeof(rec));
	CHECK_EQ(pwrite(fd, &rec, sizeof(rec),
			(off_t)(h.series_off + (uint64_t)(cap - 1) * sizeof(rec))),
		 (ssize_t)sizeof(rec));
	CHECK_EQ(pwrite(fd, &cap, sizeof(cap),
			offsetof(struct tally__hdr, series_hwm)),
		 (ssize_t)sizeof(cap));
	close(fd);
	s = tally_seg_open(c->path, NULL);
	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	t0 = harness_now();
	CHECK_EQ(tally_seg_foreach(s, 0, count_cb, &n), 4);
	printf("    a pass over a table claiming %u series: %.1f ms, %llu "
	       "bytes read\n", cap, (harness_now() - t0) * 1e3,
	       (unsigned long long)s->bytes_read);
	CHECK_EQ(n, 4);
	/* Two copies of the pages that hold records, the header, the
	 * families and the values: far below a megabyte (2 GB before). */
	CHECK(s->bytes_read < (1u << 20));
	tally_seg_close(s);
	CHECK_EQ(unlink(c->path), 0);
}

/*
 * A record after a hole, with the high-water mark right behind it: the
 * reader reads up to the mark, never on.  Records the writer filled in
 * beyond it (not yet published, or a header that went back) lie in the
 * same page as the last published one; a pass that carried the length
 * of its run over the hole would report them too.
 */
TEST(series_after_a_hole_stop_at_the_high_water_mark)
{
	struct ctl *c = ctl_new("holehwm");
	const uint32_t cap = 1u << 24, hwm = (1u << 23) + 7;
	struct tally__series rec;
	struct tally__hdr h;
	struct tally_seg *s;
	int fd, n = 0;

	CHECK_CHILD_OK(harness_child((void (*)(void *))writer_huge_table, c));
	fd = open(c->path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	CHECK_EQ(h.series_cap, cap);
	CHECK_EQ(pread(fd, &rec, sizeof(rec), (off_t)h.series_off),
		 (ssize_t)sizeof(rec));
	/* The last published record (hwm - 1), then four beyond the mark. */
	for (uint32_t i = hwm - 1; i < hwm + 4; i++)
		CHECK_EQ(pwrite(fd, &rec, sizeof(rec),
				(off_t)(h.series_off + (uint64_t)i * sizeof(rec))),
			 (ssize_t)sizeof(rec));
	CHECK_EQ(pwrite(fd, &hwm, sizeof(hwm),
			offsetof(struct tally__hdr, series_hwm)),
		 (ssize_t)sizeof(hwm));
	close(fd);
	s = tally_seg_open(c->path, NULL);
	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	/* The writer's three, and the copy at hwm - 1. */
	CHECK_EQ(tally_seg_foreach(s, 0, count_cb, &n), 4);
	CHECK_EQ(n, 4);
	/* With the mark one lower, the copy is beyond it as well. */
	tally_seg_close(s);
	fd = open(c->path, O_RDWR);
	CHECK(fd >= 0);
	{
		uint32_t lower = hwm - 1;

		CHECK_EQ(pwrite(fd, &lower, sizeof(lower),
				offsetof(struct tally__hdr, series_hwm)),
			 (ssize_t)sizeof(lower));
	}
	close(fd);
	s = tally_seg_open(c->path, NULL);
	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	n = 0;
	CHECK_EQ(tally_seg_foreach(s, 0, count_cb, &n), 3);
	CHECK_EQ(n, 3);
	tally_seg_close(s);
	CHECK_EQ(unlink(c->path), 0);
}
