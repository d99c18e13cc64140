/*
 * bench-alloc.c: the tc experiment (Linux, 2019).
 *
 * tc filter insertion spent 51-74% of its CPU in pcpu_alloc(), behind the
 * per-CPU allocator's one global mutex.  Here T threads (1 and 2, pinned
 * one per CPU) each allocate and free M blocks, in batches of B rules,
 * with the two rule profiles of the tc mail:
 *
 *   1 action    a rule has one block of 2 slots {bytes, packets} (gact);
 *   2 actions   a rule has two such blocks (tunnel_key + mirred).
 *
 * Contenders, measured in the same run:
 *
 *   mutex pcpu_alloc  the baseline below, which does what Linux's
 *                     pcpu_alloc() does: one global mutex around a free
 *                     list, and on every allocation a memset of the area
 *                     in every possible CPU's unit;
 *   tally percpu      tally_block_alloc(TALLY_PERCPU) / tally_block_free;
 *   tally shared      the same with TALLY_SHARED (tc's no_percpu flag);
 *   tally percpu, processes
 *                     the control: tally percpu in T processes, each
 *                     with a zone of its own, so that they share nothing
 *                     but the machine.  Its T-to-1 ratio is what this
 *                     machine gives two independent loops; tally
 *                     percpu's threads share a zone and should get the
 *                     same (a smaller ratio would be something the
 *                     threads share in the allocator).
 *
 * Then a tight alloc-then-free loop ("pair") on 1 and T threads, and the
 * real memory per counter: resident bytes of the zone's file per slot
 * after every CPU wrote every slot once.  Everything runs again with
 * TALLY_NSLABS=256 (the baseline with 256 units), to show that allocation
 * does not cost more when the machine has 256 possible CPUs.  The two
 * slab counts run the same way, each in a child process of its own
 * started the same way, so that neither gets a warmer or colder process
 * than the other (a parent that had run other rows first made the real
 * slab count look faster than it is).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/*
 * The memory a counter may cost: 8 bytes for each CPU that wrote it, 8
 * for the page of baselines every per-CPU chunk reserves when it is
 * handed out (tally(3), SPACE), and 2 for the chunk table and slack.
 */
#define MEM_LIMIT(cpus) (8.0 * ((cpus) + 1) + 2)
#include "tally/tally.h"

/* The baseline per-CPU allocator --------------------------------------- */

/*
 * One unit of `unit` bytes per possible CPU; an area is the same offset in
 * every unit (as in Linux, where CPU c's copy is base + unit_offset[c] +
 * off).  Like pcpu_alloc() it takes one global mutex to find an area and
 * zeroes every CPU's copy after dropping it (Linux's memset loop runs
 * after mutex_unlock(&pcpu_alloc_mutex)); free takes the same lock (Linux
 * takes pcpu_lock).  Its critical section (a stack pop) is much shorter
 * than Linux's bitmap search, so this baseline is faster than the real
 * one: ratios against it understate tally's advantage.
 */
#define AREA 16u /* one rule's {bytes, packets}: 2 x 8 bytes */

struct mpa {
	pthread_mutex_t lock;
	unsigned nslabs;
	size_t unit;           /* bytes per CPU */
	char *base;
	uint32_t *free_off;    /* a stack of free area offsets */
	size_t nfree, bump, cap;
};

static void mpa_init(struct mpa *m, unsigned nslabs, size_t cap)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	m->nslabs = nslabs;
	m->cap = cap;
	m->unit = (cap * AREA + 4095) & ~(size_t)4095;
	m->base = mmap(NULL, m->unit * nslabs, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	m->free_off = malloc(cap * sizeof(uint32_t));
	if (m->base == MAP_FAILED || !m->free_off)
		bench_die("cannot map the baseline's %u units: %s", nslabs,
			  strerror(errno));
}

static void mpa_destroy(struct mpa *m)
{
	munmap(m->base, m->unit * m->nslabs);
	free(m->free_off);
	pthread_mutex_destroy(&m->lock);
}

__attribute__((noinline)) static long mpa_alloc(struct mpa *m)
{
	size_t off;

	pthread_mutex_lock(&m->lock);
	if (m->nfree)
		off = m->free_off[--m->nfree];
	else if (m->bump < m->cap)
		off = (m->bump++) * AREA;
	else {
		pthread_mutex_unlock(&m->lock);
		return -1;
	}
	pthread_mutex_unlock(&m->lock);
	for (unsigned c = 0; c < m->nslabs; c++)
		memset(m->base + (size_t)c * m->unit + off, 0, AREA);
	return (long)off;
}

__attribute__((noinline)) static void mpa_free(struct mpa *m, long off)
{
	pthread_mutex_lock(&m->lock);
	m->free_off[m->nfree++] = (uint32_t)off;
	pthread_mutex_unlock(&m->lock);
}

/* Configurations -------------------------------------------------------- */

enum kind { K_MUTEX, K_TALLY, K_PROCS };

struct conf {
	const char *name;
	enum kind kind;
	unsigned mode;
};

static const struct conf confs[] = {
	{ "mutex pcpu_alloc", K_MUTEX, 0 },
	{ "tally percpu", K_TALLY, TALLY_PERCPU },
	{ "tally shared", K_TALLY, TALLY_SHARED },
	{ "tally percpu, processes", K_PROCS, TALLY_PERCPU },
};
#define NCONFS (sizeof(confs) / sizeof(confs[0]))

struct worker {
	pthread_t th;
	pthread_barrier_t *bar;
	const struct conf *cf;
	struct tally_zone *z;
	struct mpa *mpa;
	unsigned actions;      /* blocks per rule; 0: the pair loop */
	uint64_t blocks, batch, done;
	void **buf;
	uint64_t t0, t1;
	int cpu;
	char err[160];
};

static int run_tally(struct worker *w)
{
	unsigned a = w->actions;

	if (a == 0) {
		for (uint64_t i = 0; i < w->blocks; i++) {
			tally_block *b = tally_block_alloc(w->z, 2, w->cf->mode);

			if (!b || tally_block_free(w->z, b) < 0)
				return -1;
		}
		w->done = w->blocks;
		return 0;
	}
	for (uint64_t r = 0, rules = w->blocks / a; r < rules;) {
		uint64_t nb = rules - r < w->batch ? rules - r : w->batch;

		for (uint64_t i = 0; i < nb * a; i++)
			if (!(w->buf[i] = tally_block_alloc(w->z, 2, w->cf->mode)))
				return -1;
		for (uint64_t i = 0; i < nb * a; i++)
			if (tally_block_free(w->z, w->buf[i]) < 0)
				return -1;
		r += nb;
		w->done += nb * a;
	}
	return 0;
}

static int run_mutex(struct worker *w)
{
	unsigned a = w->actions;
	long *buf = (long *)w->buf;

	if (a == 0) {
		for (uint64_t i = 0; i < w->blocks; i++) {
			long off = mpa_alloc(w->mpa);

			if (off < 0)
				return -1;
			mpa_free(w->mpa, off);
		}
		w->done = w->blocks;
		return 0;
	}
	for (uint64_t r = 0, rules = w->blocks / a; r < rules;) {
		uint64_t nb = rules - r < w->batch ? rules - r : w->batch;

		for (uint64_t i = 0; i < nb * a; i++)
			if ((buf[i] = mpa_alloc(w->mpa)) < 0)
				return -1;
		for (uint64_t i = 0; i < nb * a; i++)
			mpa_free(w->mpa, buf[i]);
		r += nb;
		w->done += nb * a;
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int rc;

	bench_pin(w->cpu);
	pthread_barrier_wait(w->bar);
	w->t0 = bench_now_ns();
	rc = w->cf->kind == K_TALLY ? run_tally(w) : run_mutex(w);
	w->t1 = bench_now_ns();
	if (rc < 0)
		snprintf(w->err, sizeof(w->err), "%s",
			 w->cf->kind == K_TALLY ? tally_errmsg() :
						  "baseline allocator full");
	return NULL;
}

static struct tally_zone *zone;
static size_t zone_slots; /* its capacity, for the zones of K_PROCS */

/* What each process of a K_PROCS run shares with the parent. */
struct proc_slot {
	_Atomic unsigned ready;  /* processes waiting for go (slot 0 only) */
	_Atomic unsigned go;     /* slot 0 only */
	uint64_t t0, t1, done;
	char err[160];
};

/* In a child of run_procs(): the loop of a worker, on a zone of its own
 * (the one it inherited stays untouched), between the same barriers. */
static void proc_main(struct worker *w, struct proc_slot *all,
		      struct proc_slot *me, unsigned nprocs)
{
	char name[64];
	int rc;

	snprintf(name, sizeof(name), "tally-bench-alloc-proc-%d", (int)getpid());
	w->z = tally_zone_create(name, &(struct tally_zone_opts){
					       .capacity = zone_slots });
	if (!w->z) {
		snprintf(me->err, sizeof(me->err), "%s", tally_errmsg());
		atomic_fetch_add(&all->ready, 1);
		_exit(1);
	}
	bench_pin(w->cpu);
	atomic_fetch_add(&all->ready, 1);
	while (atomic_load(&all->ready) < nprocs || !atomic_load(&all->go))
		sched_yield();
	me->t0 = bench_now_ns();
	rc = run_tally(w);
	me->t1 = bench_now_ns();
	me->done = w->done;
	if (rc < 0)
		snprintf(me->err, sizeof(me->err), "%s", tally_errmsg());
	tally_zone_destroy(w->z);
	_exit(rc < 0);
}

/*
 * A K_PROCS run: @threads processes, one per CPU, each the worker @w[i]
 * in a zone of its own; fills w[i].t0, t1 and done as threads would.
 */
static void run_procs(struct worker *w, unsigned threads)
{
	size_t len = sizeof(struct proc_slot) * threads;
	struct proc_slot *ps = mmap(NULL, len, PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid[BENCH_MAX_THREADS];

	if (ps == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	fflush(NULL);
	for (unsigned i = 0; i < threads; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			bench_die("fork: %s", strerror(errno));
		if (pid[i] == 0)
			proc_main(&w[i], ps, &ps[i], threads);
	}
	while (atomic_load(&ps->ready) < threads)
		sched_yield();
	atomic_store(&ps->go, 1);
	for (unsigned i = 0; i < threads; i++) {
		int status;

		if (waitpid(pid[i], &status, 0) != pid[i] || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			snprintf(w[i].err, sizeof(w[i].err), "process %u: %s", i,
				 ps[i].err[0] ? ps[i].err : "died");
		w[i].t0 = ps[i].t0;
		w[i].t1 = ps[i].t1;
		w[i].done = ps[i].done;
	}
	munmap(ps, len);
}

static void run_once(const struct conf *cf, struct mpa *mpa, unsigned actions,
		     unsigned threads, uint64_t blocks, uint64_t batch,
		     struct bench_row *r)
{
	struct worker w[BENCH_MAX_THREADS];
	int cpus[BENCH_MAX_THREADS];
	unsigned ncpu = bench_cpus(cpus, BENCH_MAX_THREADS);
	pthread_barrier_t bar;
	uint64_t t0 = UINT64_MAX, t1 = 0, rules = 0;
	double sum_ns = 0;

	pthread_barrier_init(&bar, NULL, threads);
	for (unsigned i = 0; i < threads; i++) {
		w[i] = (struct worker){ .bar = &bar, .cf = cf, .z = zone,
					.mpa = mpa, .actions = actions,
					.blocks = blocks, .batch = batch,
					.cpu = cpus[i % ncpu] };
		if (actions) {
			w[i].buf = calloc(batch * actions, sizeof(void *));
			if (!w[i].buf)
				bench_die("out of memory");
		}
		if (cf->kind != K_PROCS &&
		    pthread_create(&w[i].th, NULL, worker_main, &w[i]))
			bench_die("pthread_create: %s", strerror(errno));
	}
	if (cf->kind == K_PROCS)
		run_procs(w, threads);
	for (unsigned i = 0; i < threads; i++) {
		if (cf->kind != K_PROCS)
			pthread_join(w[i].th, NULL);
		if (w[i].err[0])
			bench_die("%s, %s: allocation failed: %s", cf->name,
				  r->profile, w[i].err);
		if (w[i].t0 < t0)
			t0 = w[i].t0;
		if (w[i].t1 > t1)
			t1 = w[i].t1;
		sum_ns += (double)(w[i].t1 - w[i].t0) / (double)w[i].done;
		rules += actions ? w[i].done / actions : w[i].done;
		free(w[i].buf);
	}
	pthread_barrier_destroy(&bar);
	r->ns[r->n] = sum_ns / threads;
	r->rate[r->n] = (double)rules / (double)(t1 - t0) * 1e3;
	r->n++;
}

/* Memory ---------------------------------------------------------------- */

struct writer {
	tally_block **b;
	size_t nb;
	int cpu, ok, clobbered;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	uintptr_t tcb = bench_tcb_word();

	w->ok = bench_pin(w->cpu) == 0 && sched_getcpu() == w->cpu;
	for (size_t i = 0; i < w->nb; i++) {
		tally_block_add(w->b[i], 0, 1);
		tally_block_add(w->b[i], 1, 1);
	}
	if (bench_tcb_word() != tcb) {
		bench_tcb_restore(tcb);
		w->clobbered = 1;
	}
	w->ok &= sched_getcpu() == w->cpu;
	return NULL;
}

/*
 * Allocate K counters (K/2 rules of 2 slots) in a fresh zone, write each
 * once from each of the first nwriters CPUs, and divide the growth of the zone's resident
 * memory by K.  Then check the totals, free everything, allocate again
 * and check that the reused blocks read zero.
 */
static void measure_memory(struct bench_doc *d, const struct conf *cf,
			   uint64_t K, unsigned slabs, unsigned nwriters)
{
	int cpus[BENCH_MAX_THREADS];
	unsigned ncpu = bench_cpus(cpus, BENCH_MAX_THREADS), wrote = 0;
	size_t nb = (size_t)(K / 2);
	struct tally_zone_usage u0, u1, u2;
	struct tally_zone *z;
	tally_block **b = calloc(nb, sizeof(*b));
	struct bench_row *r;

	if (nwriters < ncpu)
		ncpu = nwriters;
	r = bench_row_add(d, cf->name, "memory", ncpu, 1, slabs);
	int64_t sum = 0, reused = 0;
	int clobbered = 0;

	if (!b)
		bench_die("out of memory");
	z = tally_zone_create("tally-bench-mem", &(struct tally_zone_opts){
					  .capacity = (size_t)K + 8 * TALLY_CHUNK_SLOTS });
	if (!z)
		bench_die("tally_zone_create: %s", tally_errmsg());
	if (tally_zone_usage(z, &u0) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());
	for (size_t i = 0; i < nb; i++)
		if (!(b[i] = tally_block_alloc(z, 2, cf->mode)))
			bench_die("tally_block_alloc: %s", tally_errmsg());
	for (unsigned c = 0; c < ncpu; c++) {
		struct writer w = { b, nb, cpus[c], 0, 0 };
		pthread_t th;

		if (pthread_create(&th, NULL, writer_main, &w))
			bench_die("pthread_create: %s", strerror(errno));
		pthread_join(th, NULL);
		wrote += (unsigned)w.ok;
		clobbered |= w.clobbered;
	}
	if (tally_zone_usage(z, &u1) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());
	for (size_t i = 0; i < nb; i++)
		for (unsigned s = 0; s < 2; s++) {
			int64_t v;

			if (tally_block_fetch(b[i], s, &v) < 0)
				bench_die("tally_block_fetch: %s", tally_errmsg());
			sum += v;
		}
	for (size_t i = 0; i < nb; i++)
		if (tally_block_free(z, b[i]) < 0)
			bench_die("tally_block_free: %s", tally_errmsg());
	if (tally_zone_usage(z, &u2) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());
	for (size_t i = 0; i < nb; i++) {
		if (!(b[i] = tally_block_alloc(z, 2, cf->mode)))
			bench_die("tally_block_alloc: %s", tally_errmsg());
		for (unsigned s = 0; s < 2; s++) {
			int64_t v;

			if (tally_block_fetch(b[i], s, &v) < 0)
				bench_die("tally_block_fetch: %s", tally_errmsg());
			reused += v != 0;
		}
	}
	for (size_t i = 0; i < nb; i++)
		tally_block_free(z, b[i]);
	tally_zone_destroy(z);
	free(b);

	r->bytes = (double)(u1.resident_bytes - u0.resident_bytes) /
		   (double)(nb * 2);
	r->cpus_wrote = ncpu;
	r->checked = 1;
	r->expected = (int64_t)nb * 2 * ncpu;
	r->observed = sum;
	snprintf(r->note, sizeof(r->note), "%llu B left after free",
		 (unsigned long long)(u2.resident_bytes - u0.resident_bytes));
	if (wrote != ncpu)
		snprintf(r->note, sizeof(r->note),
			 "only %u of %u writers ran on their CPU", wrote, ncpu);
	if (clobbered) {
		snprintf(r->note, sizeof(r->note),
			 "LIBRARY BUG: add wrote %%fs:8 (glibc DTV)");
		r->failed = 1;
	}
	if (reused) {
		snprintf(r->note, sizeof(r->note),
			 "%lld reused slots not zero", (long long)reused);
		r->failed = 1;
	}
	bench_row_finish(r);
}

/* The experiment -------------------------------------------------------- */

static const char *const profiles[] = { "1 action", "2 actions", "pair" };

static uint64_t blocks_for(const struct conf *cf, unsigned nslabs,
			   uint64_t blocks)
{
	/* The baseline's allocation costs nslabs memsets: with hundreds of
	 * units, run a sixteenth of the blocks (ns per pair is per block). */
	if (cf->kind == K_MUTEX && nslabs > 16 && blocks >= 16000)
		return blocks / 16;
	return blocks;
}

/*
 * Measure every profile at 1..T threads for the configurations given,
 * interleaving them run by run (1 thread, T threads, each configuration;
 * then again) so that a slow phase of a noisy machine hits all of them
 * alike, and the ratios between them least.
 */
static void measure(struct bench_doc *d, const struct bench_opts *o,
		    const struct conf *const *cfs, const unsigned *slabs,
		    unsigned ncfs)
{
	struct mpa mpa[8];
	unsigned tcounts[2] = { 1, o->threads }, nt = o->threads > 1 ? 2 : 1;
	unsigned total = 3 * nt * o->repeat, step = 0;
	size_t cap = (size_t)o->threads * o->batch * 2 + 64;

	for (unsigned c = 0; c < ncfs; c++)
		if (cfs[c]->kind == K_MUTEX)
			mpa_init(&mpa[c], slabs[c], cap);
	for (unsigned p = 0; p < 3; p++) {
		unsigned actions = p == 2 ? 0 : p + 1;
		struct bench_row *r[2][8];

		for (unsigned ti = 0; ti < nt; ti++)
			for (unsigned c = 0; c < ncfs; c++) {
				r[ti][c] = bench_row_add(d, cfs[c]->name,
							 profiles[p],
							 tcounts[ti], 1,
							 slabs[c]);
				if (blocks_for(cfs[c], slabs[c], o->blocks) != o->blocks)
					snprintf(r[ti][c]->note,
						 sizeof(r[ti][c]->note),
						 "1/16 of the blocks");
			}
		for (unsigned k = 0; k < o->repeat; k++)
			for (unsigned ti = 0; ti < nt; ti++) {
				bench_progress_step(++step, total, k + 1,
						    o->repeat, "%s, %u thread%s",
						    profiles[p], tcounts[ti],
						    tcounts[ti] > 1 ? "s" : "");
				for (unsigned c = 0; c < ncfs; c++)
					run_once(cfs[c], &mpa[c], actions,
						 tcounts[ti],
						 blocks_for(cfs[c], slabs[c], o->blocks),
						 o->batch, r[ti][c]);
			}
		for (unsigned ti = 0; ti < nt; ti++)
			for (unsigned c = 0; c < ncfs; c++)
				bench_row_finish(r[ti][c]);
	}
	for (unsigned c = 0; c < ncfs; c++)
		if (cfs[c]->kind == K_MUTEX)
			mpa_destroy(&mpa[c]);
	bench_progress("memory of %llu counters", (unsigned long long)o->mem_counters);
	/* Written by 1, 2, 4... CPUs, and by every CPU. */
	for (unsigned w = 1, ncpu = bench_cpus((int[BENCH_MAX_THREADS]){ 0 },
					       BENCH_MAX_THREADS);
	     w <= ncpu; w = w * 2 > ncpu && w < ncpu ? ncpu : w * 2)
		for (unsigned c = 0; c < ncfs; c++)
			if (cfs[c]->kind == K_TALLY)
				measure_memory(d, cfs[c], o->mem_counters,
					       slabs[c], w);
	bench_progress_done();
}

/* The baseline's memory does not depend on the CPUs that wrote: one row
 * per writer count of measure_memory(), for the charts. */
static void baseline_memory(struct bench_doc *d, unsigned slabs)
{
	unsigned ncpu = bench_cpus((int[BENCH_MAX_THREADS]){ 0 },
				   BENCH_MAX_THREADS);

	for (unsigned w = 1; w <= ncpu;
	     w = w * 2 > ncpu && w < ncpu ? ncpu : w * 2) {
		struct bench_row *r = bench_row_add(d, "mutex pcpu_alloc",
						    "memory", w, 1, slabs);

		r->bytes = 8.0 * slabs;
		r->cpus_wrote = NAN;
		snprintf(r->note, sizeof(r->note), "nslabs x 8, computed");
	}
}

static void print_rows(const struct bench_doc *d)
{
	printf("%-17s %-9s %3s %5s %11s %9s %9s %9s %7s %6s %7s  %s\n",
	       "config", "profile", "thr", "slabs", "ns/pair min", "median",
	       "max", "Mrules/s", "x mutex", "vs 1t", "vs real", "note");
	for (unsigned p = 0; p < 3; p++) {
		for (unsigned i = 0; i < d->nrows; i++) {
			const struct bench_row *r = &d->rows[i];
			char x[3][16];

			if (strcmp(r->profile, profiles[p]) != 0)
				continue;
			for (int k = 0; k < 3; k++) {
				if (isnan(r->ratio[k]))
					snprintf(x[k], sizeof(x[k]), "-");
				else
					snprintf(x[k], sizeof(x[k]), "%.2f",
						 r->ratio[k]);
			}
			printf("%-17s %-9s %3u %5u %11.2f %9.2f %9.2f %9.3f %7s "
			       "%6s %7s%s%s\n", r->config, r->profile,
			       r->threads, r->slabs, r->ns_st.min,
			       r->ns_st.median, r->ns_st.max, r->rate_st.median,
			       x[0], x[1], x[2], r->note[0] ? "  " : "",
			       r->note);
		}
		printf("\n");
	}
	printf("%-17s %5s %9s %7s %13s %7s %6s  %s\n", "memory", "slabs",
	       "counters", "cpus", "bytes/counter", "limit", "check", "note");
	for (unsigned i = 0; i < d->nrows; i++) {
		const struct bench_row *r = &d->rows[i];
		char chk[32], cpus[16], lim[16], cnt[24];

		if (strcmp(r->profile, "memory") != 0)
			continue;
		if (!r->checked)
			snprintf(chk, sizeof(chk), "-");
		else if (r->observed == r->expected)
			snprintf(chk, sizeof(chk), r->failed ? "FAIL" : "ok");
		else
			snprintf(chk, sizeof(chk), "LOST %lld",
				 (long long)(r->expected - r->observed));
		if (isnan(r->cpus_wrote)) {
			snprintf(cpus, sizeof(cpus), "-");
			snprintf(lim, sizeof(lim), "-");
			snprintf(cnt, sizeof(cnt), "-");
		} else {
			snprintf(cpus, sizeof(cpus), "%.0f", r->cpus_wrote);
			snprintf(lim, sizeof(lim), "%.0f",
				 MEM_LIMIT(r->cpus_wrote));
			snprintf(cnt, sizeof(cnt), "%lld",
				 (long long)(r->expected / (int64_t)r->cpus_wrote));
		}
		printf("%-17s %5u %9s %7s %13.2f %7s %6s  %s\n", r->config,
		       r->slabs, cnt, cpus, r->bytes, lim, chk, r->note);
	}
}

int bench_alloc(const struct bench_opts *o)
{
	static struct bench_doc d;
	struct tally_zone_usage u;
	unsigned S, T = o->threads;
	char meta[256] = "", name[64];
	int child_rc = 0;
	size_t chunks;

	bench_doc_start(&d, o, "alloc", "mrules", (const char *const[4]){
				"x_mutex", "vs_1_thread", "vs_real_slabs" });

	/* Room for every thread's live batch, plus the chunks each thread
	 * holds in its cache, plus slack. */
	chunks = (size_t)T * o->batch * 2 / 256 + 8 * (size_t)T + 64;
	snprintf(name, sizeof(name), "tally-bench-alloc%s",
		 o->child ? "-child" : "");
	zone_slots = chunks * TALLY_CHUNK_SLOTS;
	zone = tally_zone_create(name, &(struct tally_zone_opts){
					       .capacity = zone_slots });
	if (!zone)
		bench_die("tally_zone_create: %s", tally_errmsg());
	if (tally_zone_usage(zone, &u) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());
	S = u.nslabs;

	if (o->child) {
		const struct conf *cfs[4] = { &confs[0], &confs[1], &confs[2],
					      &confs[3] };
		unsigned sl[4] = { S, S, S, S };

		if (S != o->slabs)
			bench_die("the child has %u slabs, not %u (TALLY_NSLABS "
				  "ignored?)", S, o->slabs);
		measure(&d, o, cfs, sl, 4);
		snprintf(meta, sizeof(meta), "nslabs=%u", S);
		bench_emit_rows(&d, meta, stdout);
		tally_zone_destroy(zone);
		return bench_failed(&d);
	}

	if (o->slabs && o->slabs != S && !o->no_child) {
		/* Both slab counts in children started alike: the real one,
		 * then the forced one. */
		unsigned counts[2] = { S, o->slabs };

		for (unsigned i = 0; i < 2; i++) {
			char *argv[32], buf[16][32], env[64];
			struct bench_opts co = *o;
			int rc;

			co.slabs = counts[i];
			bench_child_args(&co, "alloc", "slabs", argv, buf, 32);
			snprintf(env, sizeof(env), "TALLY_NSLABS=%u", counts[i]);
			rc = bench_run_child(env, argv, &d, meta, sizeof(meta));
			if (rc < 0)
				bench_die("the %s child failed", env);
			child_rc |= rc;
		}
	} else {
		const struct conf *cfs[5] = { &confs[0], &confs[1], &confs[2],
					      &confs[3], &confs[0] };
		unsigned sl[5] = { S, S, S, S, o->slabs };

		measure(&d, o, cfs, sl, o->slabs && o->slabs != S ? 5 : 4);
	}
	baseline_memory(&d, S);
	if (o->slabs && o->slabs != S)
		baseline_memory(&d, o->slabs);

	/* Ratios. */
	for (unsigned i = 0; i < d.nrows; i++) {
		struct bench_row *r = &d.rows[i], *b;

		if (r->n == 0)
			continue;
		b = bench_row_find(&d, "mutex pcpu_alloc", r->profile,
				   r->threads, 1, r->slabs);
		if (b)
			r->ratio[0] = r->rate_st.median / b->rate_st.median;
		if (r->threads > 1 &&
		    (b = bench_row_find(&d, r->config, r->profile, 1, 1, r->slabs)))
			r->ratio[1] = r->rate_st.median / b->rate_st.median;
		if (r->slabs != S &&
		    (b = bench_row_find(&d, r->config, r->profile, r->threads,
					1, S)))
			r->ratio[2] = r->ns_st.median / b->ns_st.median;
	}

	{
		struct bench_row *pair = bench_row_find(&d, "tally percpu", "pair", 1, 1, S);
		struct bench_row *a1T = bench_row_find(&d, "tally percpu", "1 action", T, 1, S);
		struct bench_row *a2T = bench_row_find(&d, "tally percpu", "2 actions", T, 1, S);
		struct bench_row *m1T = bench_row_find(&d, "mutex pcpu_alloc", "1 action", T, 1, S);
		struct bench_row *p2T = bench_row_find(&d, "tally percpu, processes", "2 actions", T, 1, S);
		struct bench_row *pair256 = bench_row_find(&d, "tally percpu", "pair", 1, 1, o->slabs);
		struct bench_row *a1_256 = bench_row_find(&d, "tally percpu", "1 action", 1, 1, o->slabs);
		struct bench_row *mem = NULL, *mem256 = NULL;
		char what[96];
		unsigned met = 0;

		for (unsigned i = 0; i < d.nrows; i++) {
			struct bench_row *r = &d.rows[i];

			/* The rows written by the most CPUs. */
			if (strcmp(r->profile, "memory") == 0 &&
			    strcmp(r->config, "tally percpu") == 0) {
				if (r->slabs == S) {
					if (!mem || r->threads > mem->threads)
						mem = r;
				} else if (!mem256 || r->threads > mem256->threads)
					mem256 = r;
			}
		}
		bench_target(&d, "alloc+free pair, tally percpu, 1 thread", "<=",
			     20, pair ? pair->ns_st.median : NAN, "ns");
		snprintf(what, sizeof(what),
			 "tally percpu 1 action: %u threads vs 1 thread", T);
		bench_target(&d, what, ">=", 1.6, a1T ? a1T->ratio[1] : NAN, "x");
		snprintf(what, sizeof(what),
			 "2 actions: %u threads vs %u processes (zone each)", T, T);
		bench_target(&d, what, ">=", 0.9,
			     a2T && p2T ? a2T->rate_st.median / p2T->rate_st.median : NAN,
			     "x");
		snprintf(what, sizeof(what),
			 "tally percpu vs mutex baseline, 1 action, %u threads", T);
		bench_target(&d, what, ">=", 5, a1T ? a1T->ratio[0] : NAN, "x");
		snprintf(what, sizeof(what),
			 "tally percpu vs mutex baseline, 2 actions, %u threads", T);
		bench_target(&d, what, ">=", 5, a2T ? a2T->ratio[0] : NAN, "x");
		snprintf(what, sizeof(what),
			 "slowdown with %u slabs vs %u, pair loop", o->slabs, S);
		bench_target(&d, what, "<=", 1.5, pair256 ? pair256->ratio[2] : NAN, "x");
		snprintf(what, sizeof(what),
			 "slowdown with %u slabs vs %u, 1 action, 1 thread",
			 o->slabs, S);
		bench_target(&d, what, "<=", 1.5, a1_256 ? a1_256->ratio[2] : NAN, "x");
		snprintf(what, sizeof(what), "memory per counter, %u slabs, %.0f "
			 "CPUs wrote (8 B x (CPUs + 1) + 2)", S,
			 mem ? mem->cpus_wrote : 0.0);
		bench_target(&d, what, "<=", mem ? MEM_LIMIT(mem->cpus_wrote) : NAN,
			     mem ? mem->bytes : NAN, "B");
		if (mem256) {
			snprintf(what, sizeof(what), "memory per counter, %u slabs, "
				 "%.0f CPUs wrote (8 B x (CPUs + 1) + 2)", mem256->slabs,
				 mem256->cpus_wrote);
			bench_target(&d, what, "<=", MEM_LIMIT(mem256->cpus_wrote),
				     mem256->bytes, "B");
		}
		for (unsigned i = 0; i < d.ntargets; i++)
			met += (unsigned)d.targets[i].met;

		if (a1T && m1T) {
			const struct bench_row *oth[1] = { m1T };
			char title[160];

			snprintf(title, sizeof(title),
				 "ns per alloc+free pair, 1 action, %u threads "
				 "(x = tally percpu, + = mutex pcpu_alloc):", T);
			bench_ministat(d.headline, sizeof(d.headline), title,
				       a1T, oth, 1);
		}
		snprintf(d.params, sizeof(d.params),
			 "\"blocks\":%llu,\"batch\":%llu,\"mem_counters\":%llu,"
			 "\"repeat\":%u,\"threads\":%u,\"cpus\":\"%s\","
			 "\"slabs\":%u,\"forced_slabs\":%u,\"build_type\":\"%s\","
			 "\"quick\":%s",
			 (unsigned long long)o->blocks,
			 (unsigned long long)o->batch,
			 (unsigned long long)o->mem_counters, o->repeat, T,
			 bench_cpu_list(), S, o->slabs, TALLY_BENCH_BUILD_TYPE,
			 o->quick ? "true" : "false");
		snprintf(d.summary, sizeof(d.summary),
			 "alloc threads=%u blocks=%llu runs=%u pair_ns=%.2f "
			 "percpu_1a_%ut_ns=%.2f scaling_%ut=%.2fx "
			 "vs_mutex_1a_%ut=%.2fx vs_mutex_2a_%ut=%.2fx "
			 "slabs%u_pair=%.2fx bytes_per_counter=%.2f "
			 "targets_met=%u/%u checks=%s",
			 T, (unsigned long long)o->blocks, o->repeat,
			 pair ? pair->ns_st.median : NAN, T,
			 a1T ? a1T->ns_st.median : NAN, T,
			 a1T ? a1T->ratio[1] : NAN, T,
			 a1T ? a1T->ratio[0] : NAN, T,
			 a2T ? a2T->ratio[0] : NAN, o->slabs,
			 pair256 ? pair256->ratio[2] : NAN,
			 mem ? mem->bytes : NAN, met, d.ntargets,
			 bench_failed(&d) || child_rc == 1 ? "FAILED" : "ok");
	}

	bench_plot_add(&d, &(struct bench_plot){
		.file = "alloc-rate-threads",
		.title = "alloc: rules of 1 action allocated and freed per "
			 "second (higher is better)",
		.xlabel = "threads, pinned one per CPU",
		.ylabel = "million rules per second, all threads (log)",
		.x = BENCH_F_THREADS, .y = BENCH_F_RATE,
		.split = BENCH_F_SLABS, .profile = "1 action", .pinned = -1,
		.logy = 1 });
	bench_plot_add(&d, &(struct bench_plot){
		.file = "alloc-rate-slabs",
		.title = "alloc: rules of 1 action per second against the "
			 "per-CPU copies (slabs) (higher is better)",
		.xlabel = "slabs: per-CPU copies, i.e. possible CPUs (log)",
		.ylabel = "million rules per second, all threads (log)",
		.x = BENCH_F_SLABS, .y = BENCH_F_RATE,
		.split = BENCH_F_THREADS, .profile = "1 action", .pinned = -1,
		.logx = 1, .logy = 1 });
	bench_plot_add(&d, &(struct bench_plot){
		.file = "alloc-memory-slabs",
		.title = "alloc: real memory per counter against the per-CPU "
			 "copies (lower is better)",
		.xlabel = "slabs: per-CPU copies, i.e. possible CPUs (log)",
		.ylabel = "bytes per counter, written by every CPU (log)",
		.x = BENCH_F_SLABS, .y = BENCH_F_BYTES,
		.profile = "memory", .pinned = -1,
		.threads = bench_cpus((int[BENCH_MAX_THREADS]){ 0 },
				      BENCH_MAX_THREADS),
		.logx = 1, .logy = 1 });
	bench_plot_add(&d, &(struct bench_plot){
		.file = "alloc-memory-threads",
		.title = "alloc: real memory per counter against the CPUs that "
			 "wrote it (lower is better)",
		.xlabel = "CPUs that wrote each counter (one pinned writer "
			  "each)",
		.ylabel = "bytes per counter (log)",
		.x = BENCH_F_THREADS, .y = BENCH_F_BYTES,
		.split = BENCH_F_SLABS, .profile = "memory", .pinned = -1,
		.logy = 1 });

	if (o->json) {
		bench_print_json(&d, o, stdout);
	} else {
		printf("tally-bench alloc: 1 and %u threads on CPUs %s, %llu "
		       "blocks per thread in batches of %llu rules, %u run%s "
		       "per row; %u slabs (and %u in a child)\n", T,
		       bench_cpu_list(), (unsigned long long)o->blocks,
		       (unsigned long long)o->batch, o->repeat,
		       o->repeat > 1 ? "s" : "", S, o->slabs);
		if (strcmp(TALLY_BENCH_BUILD_TYPE, "") == 0)
			printf("warning: CMAKE_BUILD_TYPE is empty: libtally "
			       "was built without optimisation (-O0)\n");
		printf("ns/pair: time per block alloc+free per thread (min, "
		       "median, max); Mrules/s: total rules (pair: pairs) per "
		       "second (median);\nx mutex: Mrules/s / baseline's; vs 1t: "
		       "Mrules/s / same config at 1 thread; vs real: ns/pair / "
		       "same config at %u slabs\n\n", S);
		print_rows(&d);
		if (d.headline[0])
			printf("\n%s", d.headline);
		bench_print_targets(&d, stdout);
		bench_print_summary(&d);
	}
	tally_zone_destroy(zone);
	return bench_finish(&d, o, "a correctness check failed"
			    " (see the check column)",
			    child_rc == 1);
}
