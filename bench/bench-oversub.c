/*
 * bench-oversub.c: per-CPU vs per-thread counters when threads outnumber
 * CPUs (tally-bench oversub).
 *
 * 1, 2, 4, ... T threads (default 64), left to the scheduler on the CPUs
 * of the process, add 1 to one counter, N/threads times each (the same
 * total at every thread count).  The contenders, measured in the same
 * run, interleaved run by run:
 *
 *   tally percpu   tally_block_add on a TALLY_PERCPU block: one copy per
 *                  CPU, whatever the number of threads.
 *   per-thread     each thread adds to its own thread-local variable and
 *                  folds it into a global total when it ends (what a
 *                  per-thread counter library does): as cheap as an add
 *                  gets, but one copy per thread.
 *   shared atomic  one relaxed atomic add on one global.
 *
 * Every configuration checks its total (threads x adds) exactly.  Then,
 * for each thread count, the memory a counter costs: tally's is measured
 * (K counters in a fresh zone, each written once by every thread, the
 * growth of the zone's resident memory divided by K); the per-thread
 * counter's is 8 bytes per thread and the atomic's 8 bytes, computed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tally/tally.h"

enum kind { K_TALLY, K_THREAD, K_ATOMIC };

static const struct bench_conf confs[] = {
	{ "tally percpu", K_TALLY },
	{ "per-thread", K_THREAD },
	{ "shared atomic", K_ATOMIC },
};
#define NCONFS BENCH_NELEMS(confs)

static struct {
	_Alignas(64) uint64_t atomic;
	_Alignas(64) uint64_t folded;
} g;

/* What the workers of one run share. */
struct run {
	enum kind kind;
	tally_block *b;
	uint64_t n;
};

static uint64_t worker(void *ctx, unsigned i)
{
	const struct run *run = ctx;

	(void)i;
	switch (run->kind) {
	case K_TALLY:
		bench_add_block(run->b, run->n);
		break;
	case K_THREAD:
		bench_add_tls(run->n, &g.folded);
		break;
	case K_ATOMIC:
		bench_add_atomic(run->n, &g.atomic);
		break;
	}
	return run->n;
}

/* The memory test: every thread writes each counter once, and says on
 * which CPUs it started and ended. */
struct many {
	tally_block **b;
	size_t n;
	int cpu0[BENCH_MAX_THREADS], cpu1[BENCH_MAX_THREADS];
};

static uint64_t write_each_once(void *ctx, unsigned i)
{
	struct many *m = ctx;

	m->cpu0[i] = sched_getcpu();
	for (size_t k = 0; k < m->n; k++)
		tally_block_add(m->b[k], 0, 1);
	m->cpu1[i] = sched_getcpu();
	return m->n;
}

static struct tally_zone *zone;

static void run_once(const struct bench_conf *cf, unsigned threads, uint64_t n,
		     struct bench_row *r)
{
	struct run run = { cf->kind, NULL, n };
	struct bench_team t;
	int64_t observed = 0;

	g.atomic = 0;
	g.folded = 0;
	if (cf->kind == K_TALLY &&
	    !(run.b = tally_block_alloc(zone, 1, TALLY_PERCPU)))
		bench_die("tally_block_alloc: %s", tally_errmsg());
	bench_team_run(&t, threads, NULL, 0, worker, &run);
	switch (cf->kind) {
	case K_TALLY:
		if (tally_block_fetch(run.b, 0, &observed) < 0)
			bench_die("tally_block_fetch: %s", tally_errmsg());
		if (tally_block_free(zone, run.b) < 0)
			bench_die("tally_block_free: %s", tally_errmsg());
		break;
	case K_THREAD:
		observed = (int64_t)g.folded;
		break;
	case K_ATOMIC:
		observed = (int64_t)g.atomic;
		break;
	}
	bench_team_record(&t, r);
	bench_row_check(r, (int64_t)threads * (int64_t)n, observed);
	r->n++;
}

/*
 * Memory of a tally percpu counter written by @threads threads: K
 * one-slot counters in a fresh zone, each written once by every thread
 * (all at once, unpinned), resident growth / K.  The totals are checked.
 */
static void measure_memory(struct bench_doc *d, unsigned threads, uint64_t K,
			   unsigned slabs)
{
	struct bench_row *r = bench_row_add(d, "tally percpu", "memory",
					    threads, 0, slabs);
	struct tally_zone_usage u0, u1;
	struct tally_zone *z;
	tally_block **b = calloc(K, sizeof(*b));
	unsigned char seen[BENCH_MAX_THREADS] = { 0 };
	static struct many many;
	struct bench_team t;
	int64_t sum = 0;
	unsigned ncpus = 0;

	if (!b)
		bench_die("out of memory");
	z = bench_anon_zone("tally-bench-oversub-mem",
			    (size_t)K + 8 * TALLY_CHUNK_SLOTS);
	if (tally_zone_usage(z, &u0) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());
	for (uint64_t i = 0; i < K; i++)
		if (!(b[i] = tally_block_alloc(z, 1, TALLY_PERCPU)))
			bench_die("tally_block_alloc: %s", tally_errmsg());
	many.b = b;
	many.n = (size_t)K;
	bench_team_run(&t, threads, NULL, 0, write_each_once, &many);
	if (tally_zone_usage(z, &u1) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());
	for (unsigned i = 0; i < threads; i++) {
		int cs[2] = { many.cpu0[i], many.cpu1[i] };

		for (int k = 0; k < 2; k++)
			if (cs[k] >= 0 && cs[k] < BENCH_MAX_THREADS &&
			    !seen[cs[k]]++)
				ncpus++;
	}
	if (t.clobbered) {
		r->failed = 1;
		snprintf(r->note, sizeof(r->note),
			 "LIBRARY BUG: add wrote %%fs:8 (glibc DTV)");
	}
	for (uint64_t i = 0; i < K; i++) {
		int64_t v;

		if (tally_block_fetch(b[i], 0, &v) < 0)
			bench_die("tally_block_fetch: %s", tally_errmsg());
		sum += v;
		tally_block_free(z, b[i]);
	}
	tally_zone_destroy(z);
	free(b);
	r->bytes = (double)(u1.resident_bytes - u0.resident_bytes) / (double)K;
	r->cpus_wrote = ncpus;
	r->checked = 1;
	r->expected = (int64_t)K * threads;
	r->observed = sum;
	if (!r->note[0])
		snprintf(r->note, sizeof(r->note),
			 "measured; CPUs seen by the writers: %u", ncpus);
	bench_row_finish(r);

	/* The others, computed. */
	r = bench_row_add(d, "per-thread", "memory", threads, 0, 0);
	r->bytes = 8.0 * threads;
	r->cpus_wrote = ncpus;
	snprintf(r->note, sizeof(r->note), "computed: 8 B per thread");
	r = bench_row_add(d, "shared atomic", "memory", threads, 0, 0);
	r->bytes = 8.0;
	r->cpus_wrote = ncpus;
	snprintf(r->note, sizeof(r->note), "computed: one 8 B word");
}

int bench_oversub(const struct bench_opts *o)
{
	static struct bench_doc d;
	int cpus[BENCH_MAX_THREADS];
	unsigned ncpu = bench_cpus(cpus, BENCH_MAX_THREADS);
	unsigned Tmax = o->threads ? o->threads : (o->quick ? 8 : 64);
	uint64_t total = o->adds ? o->adds : (o->quick ? 200000 : 50000000);
	uint64_t K = o->quick ? 2048 : 8192;
	unsigned tcount[16], nt = 0, step = 0, nsteps;
	struct tally_zone_usage u;

	bench_doc_start(&d, o, "oversub", "mops",
			(const char *const[4]){ "x_atomic", "vs_1_thread" });
	for (unsigned t = 1; t < Tmax && nt < 15; t *= 2)
		tcount[nt++] = t;
	tcount[nt++] = Tmax;

	zone = bench_anon_zone("tally-bench-oversub", 4 * TALLY_CHUNK_SLOTS);
	if (tally_zone_usage(zone, &u) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());

	/* The timed runs, then one memory measurement per thread count. */
	nsteps = nt * (unsigned)NCONFS * o->repeat + nt;
	for (unsigned ti = 0; ti < nt; ti++) {
		unsigned T = tcount[ti];
		uint64_t n = total / T ? total / T : 1;
		struct bench_row *r[NCONFS];

		for (unsigned c = 0; c < NCONFS; c++)
			r[c] = bench_row_add(&d, confs[c].name, "", T, 0, 0);
		for (unsigned k = 0; k < o->repeat; k++)
			for (unsigned c = 0; c < NCONFS; c++) {
				bench_progress_step(++step, nsteps, k + 1,
						    o->repeat, "%s, %u thread%s",
						    confs[c].name, T,
						    T > 1 ? "s" : "");
				run_once(&confs[c], T, n, r[c]);
			}
		for (unsigned c = 0; c < NCONFS; c++)
			bench_row_finish(r[c]);
	}
	for (unsigned ti = 0; ti < nt; ti++) {
		bench_progress_step(++step, nsteps, 1, 1, "memory, %u "
				    "thread%s", tcount[ti],
				    tcount[ti] > 1 ? "s" : "");
		measure_memory(&d, tcount[ti], K, u.nslabs);
	}
	bench_progress_done();

	for (unsigned i = 0; i < d.nrows; i++) {
		struct bench_row *r = &d.rows[i], *at, *one;

		if (r->n == 0)
			continue;
		at = bench_row_find(&d, "shared atomic", "", r->threads, 0, 0);
		one = bench_row_find(&d, r->config, "", 1, 0, 0);
		if (at)
			r->ratio[0] = r->rate_st.median / at->rate_st.median;
		if (one)
			r->ratio[1] = r->rate_st.median / one->rate_st.median;
	}

	{
		struct bench_row *pc = bench_row_find(&d, "tally percpu", "", Tmax, 0, 0);
		struct bench_row *pt = bench_row_find(&d, "per-thread", "", Tmax, 0, 0);
		struct bench_row *at = bench_row_find(&d, "shared atomic", "", Tmax, 0, 0);
		struct bench_row *mem = NULL;

		for (unsigned i = 0; i < d.nrows; i++)
			if (strcmp(d.rows[i].profile, "memory") == 0 &&
			    strcmp(d.rows[i].config, "tally percpu") == 0 &&
			    d.rows[i].threads == Tmax)
				mem = &d.rows[i];
		snprintf(d.params, sizeof(d.params),
			 "\"adds\":%llu,\"repeat\":%u,\"max_threads\":%u,"
			 "\"cpus\":\"%s\",\"ncpus\":%u,\"slabs\":%u,"
			 "\"memory_counters\":%llu,\"build_type\":\"%s\","
			 "\"quick\":%s,\"note\":\"%s\"",
			 (unsigned long long)total, o->repeat, Tmax,
			 bench_cpu_list(), ncpu, u.nslabs,
			 (unsigned long long)K, TALLY_BENCH_BUILD_TYPE,
			 o->quick ? "true" : "false",
			 ncpu < Tmax ? "more threads than CPUs: threads take "
			 "turns, so the atomic is contended by at most the "
			 "machine's CPUs" : "");
		snprintf(d.summary, sizeof(d.summary),
			 "oversub threads=%u cpus=%u percpu_mops=%.1f "
			 "per_thread_mops=%.1f atomic_mops=%.1f "
			 "percpu_x_atomic=%.2fx percpu_bytes=%.1f "
			 "per_thread_bytes=%.0f checks=%s", Tmax, ncpu,
			 pc ? pc->rate_st.median : NAN,
			 pt ? pt->rate_st.median : NAN,
			 at ? at->rate_st.median : NAN,
			 pc ? pc->ratio[0] : NAN, mem ? mem->bytes : NAN,
			 8.0 * Tmax, bench_failed(&d) ? "FAILED" : "ok");
	}

	bench_plot_add(&d, &(struct bench_plot){
		.file = "oversub-throughput",
		.title = "oversub: adds per second to one counter as threads "
			 "outnumber CPUs (higher is better)",
		.xlabel = "threads, unpinned (log)",
		.ylabel = "million adds per second, all threads (log)",
		.x = BENCH_F_THREADS, .y = BENCH_F_RATE, .profile = "",
		.pinned = -1, .logx = 1, .logy = 1 });
	bench_plot_add(&d, &(struct bench_plot){
		.file = "oversub-memory",
		.title = "oversub: memory per counter written by every thread "
			 "(lower is better)",
		.xlabel = "threads, unpinned (log)",
		.ylabel = "bytes per counter (log; tally measured, the "
			  "others computed)",
		.x = BENCH_F_THREADS, .y = BENCH_F_BYTES, .profile = "memory",
		.pinned = -1, .logx = 1, .logy = 1 });

	if (o->json) {
		bench_print_json(&d, o, stdout);
	} else {
		printf("tally-bench oversub: 1..%u threads (unpinned) on CPUs "
		       "%s, %llu adds per run in all, %u run%s per row; %u "
		       "slabs\n", Tmax, bench_cpu_list(),
		       (unsigned long long)total, o->repeat,
		       o->repeat > 1 ? "s" : "", u.nslabs);
		printf("ns/op: CPU time per add per thread (median); Mops/s: "
		       "total adds per wall-clock second (median, min-max);\n"
		       "x atomic: Mops/s / the shared atomic's at the same "
		       "thread count; vs 1t: / the same config's at 1 thread\n\n");
		printf("%-14s %4s %9s %9s %9s %9s %8s %7s  %s\n", "config",
		       "thr", "ns/op", "Mops/s", "min", "max", "x atomic",
		       "vs 1t", "check");
		for (unsigned i = 0; i < d.nrows; i++) {
			const struct bench_row *r = &d.rows[i];

			if (r->n == 0)
				continue;
			if (i > 0 && d.rows[i - 1].threads != r->threads)
				printf("\n");
			printf("%-14s %4u %9.3f %9.1f %9.1f %9.1f %8.2f %7.2f  "
			       "%s%s%s\n", r->config, r->threads,
			       r->ns_st.median, r->rate_st.median,
			       r->rate_st.min, r->rate_st.max, r->ratio[0],
			       r->ratio[1],
			       r->observed == r->expected ? (r->failed ? "FAIL" : "ok") :
			       "LOST", r->note[0] ? "  " : "", r->note);
		}
		printf("\nmemory per counter (bytes): tally measured (%llu "
		       "counters, each written once by every thread), the "
		       "others computed\n", (unsigned long long)K);
		printf("%4s %12s %12s %12s %6s  %s\n", "thr", "tally percpu",
		       "per-thread", "atomic", "CPUs", "check");
		for (unsigned ti = 0; ti < nt; ti++) {
			const struct bench_row *m = NULL;

			for (unsigned i = 0; i < d.nrows; i++)
				if (strcmp(d.rows[i].profile, "memory") == 0 &&
				    strcmp(d.rows[i].config, "tally percpu") == 0 &&
				    d.rows[i].threads == tcount[ti])
					m = &d.rows[i];
			if (!m)
				continue;
			printf("%4u %12.1f %12.0f %12.0f %6.0f  %s\n",
			       tcount[ti], m->bytes, 8.0 * tcount[ti], 8.0,
			       m->cpus_wrote,
			       m->observed == m->expected && !m->failed ? "ok" : "FAIL");
		}
		if (ncpu < Tmax)
			printf("\nnote: this machine has %u CPU%s: above %u "
			       "threads the threads take turns on the CPUs, so "
			       "the shared atomic\nis never fought over by more "
			       "than %u CPUs here (on a large server its curve "
			       "falls further), and\ntally's memory stays bounded "
			       "by the %u CPUs while the per-thread counter's "
			       "grows with the threads.\n", ncpu,
			       ncpu > 1 ? "s" : "", ncpu, ncpu, ncpu);
		bench_print_summary(&d);
	}
	tally_zone_destroy(zone);
	return bench_finish(&d, o, "a correctness check failed"
			    " (see the check and note columns)", 0);
}
