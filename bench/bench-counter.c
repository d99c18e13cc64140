/*
 * bench-counter.c: the counter(9) experiment (FreeBSD, 2013).
 *
 * One worker per CPU adds 1 to one shared counter N times; the workers
 * are pinned (one per CPU) and, as a second configuration, left to the
 * scheduler; and a single worker gives the uncontended cost.  The
 * contenders, all measured in the same run:
 *
 *   thread-local add   each worker adds to its own variable: the floor.
 *   shared atomic      one relaxed __atomic_fetch_add on one global.
 *   racy +=            a volatile, non-atomic += on one global: as fast
 *                      as a plain add but loses counts (reported).
 *   sched_getcpu atomics
 *                      an array of atomics, one per CPU on its own cache
 *                      line, indexed by sched_getcpu(): what a per-CPU
 *                      counter costs without rseq (a migration between
 *                      the call and the add only costs a shared line).
 *   tally percpu       tally_block_add on a TALLY_PERCPU block (rseq).
 *   tally percpu fallback
 *                      the same, in a child run with TALLY_NO_RSEQ=1, so
 *                      that every add takes the fallback: an unlocked add
 *                      to the fallback copy the worker's thread owns.
 *   tally shared, adaptive, pernode: the other modes; adaptive before
 *                      and after promotion (one thread never contends:
 *                      its adaptive row is the cost before promotion).
 *   tally shared, pernode (2 nodes)
 *                      in a child run with TALLY_NODES=2 (CPU c on node
 *                      c % 2), so that pinned workers on CPUs 0 and 1 are
 *                      on different nodes: pernode's copies then never
 *                      share a line between them, shared's one copy does.
 *   java LongAdder     where a JVM is on the PATH (and not with --quick or
 *                      --no-child): one thread increments a fresh
 *                      java.util.concurrent.atomic.LongAdder N times, in a
 *                      JVM started once for all its runs (after a warm-up
 *                      for the JIT); its cost before it has cells (one
 *                      compare-and-swap on its base) is what an adaptive
 *                      slot before promotion competes with.
 *
 * Every tally row (and the thread-local and atomic baselines) checks that
 * the total is exactly workers x N.  --sweep adds more thread counts,
 * pinned round-robin (above the CPU count, several workers per CPU), for
 * the throughput-against-threads chart of --plot.
 *
 * ns/op is each worker's CPU time (CLOCK_THREAD_CPUTIME_ID) per add: the
 * loops never sleep, so CPU time is their cost, and unlike wall-clock
 * time it does not grow when another process takes the CPU on a shared
 * machine.  Mops/s is the wall-clock total, shown as is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "tally/tally.h"

enum { CHILD_FALLBACK = 1, CHILD_NODES = 2 };

enum kind { K_TLS, K_ATOMIC, K_RACY, K_CPUARRAY, K_TALLY, K_COUNTER };

struct conf {
	const char *name;
	enum kind kind;
	unsigned mode;
	int child;             /* measured in a child: CHILD_FALLBACK
				  (TALLY_NO_RSEQ=1) or CHILD_NODES
				  (TALLY_NODES=2); 0: in the parent */
	int promote;           /* adaptive: promoted before the run */
};

static const struct conf confs[] = {
	{ "thread-local add", K_TLS, 0, 0, 0 },
	{ "shared atomic", K_ATOMIC, 0, 0, 0 },
	{ "racy +=", K_RACY, 0, 0, 0 },
	{ "sched_getcpu atomics", K_CPUARRAY, 0, 0, 0 },
	{ "tally percpu", K_TALLY, TALLY_PERCPU, 0, 0 },
	{ "tally percpu fallback", K_TALLY, TALLY_PERCPU, CHILD_FALLBACK, 0 },
	{ "tally counter inc", K_COUNTER, TALLY_PERCPU, 0, 0 },
	{ "tally shared", K_TALLY, TALLY_SHARED, 0, 0 },
	{ "tally adaptive", K_TALLY, TALLY_ADAPTIVE, 0, 0 },
	{ "tally adaptive promoted", K_TALLY, TALLY_ADAPTIVE, 0, 1 },
	{ "tally pernode", K_TALLY, TALLY_PERNODE, 0, 0 },
	{ "tally shared (2 nodes)", K_TALLY, TALLY_SHARED, CHILD_NODES, 0 },
	{ "tally pernode (2 nodes)", K_TALLY, TALLY_PERNODE, CHILD_NODES, 0 },
};
#define NCONFS (sizeof(confs) / sizeof(confs[0]))

/* The shared globals, each alone on its cache line (so that only the
 * line they share between CPUs bounces, not a neighbour's). */
static struct {
	_Alignas(64) uint64_t atomic;
	_Alignas(64) volatile uint64_t racy;
	_Alignas(64) uint64_t tls_total;
} g;

/* The sched_getcpu() baseline: one atomic per CPU id, each on its own
 * cache line.  CPU ids above the array (never seen on the machines this
 * runs on) share its last entry, still exactly. */
#define CPUARRAY 1024
static struct {
	_Alignas(64) uint64_t v;
} cpuarray[CPUARRAY];

__attribute__((noinline)) static void loop_racy(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		g.racy += 1;
}

__attribute__((noinline)) static void loop_cpuarray(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		int c = sched_getcpu();
		unsigned k = c < 0 ? 0 : c >= CPUARRAY ? CPUARRAY - 1 : (unsigned)c;

		__atomic_fetch_add(&cpuarray[k].v, 1, __ATOMIC_RELAXED);
	}
}

/* The same through a named counter's handle, which the loop reads from
 * memory: it must cost what the raw add costs. */
__attribute__((noinline)) static void loop_counter(const tally_counter *c,
						   uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		tally_counter_inc(c);
}

/* What the workers of one run share, and whether each one's adds used
 * rseq. */
struct run {
	const struct conf *cf;
	tally_block *b;
	tally_counter c;
	uint64_t n;
	int rseq[BENCH_MAX_THREADS];
};

static uint64_t worker(void *ctx, unsigned i)
{
	struct run *run = ctx;

	switch (run->cf->kind) {
	case K_TLS:
		bench_add_tls(run->n, &g.tls_total);
		break;
	case K_ATOMIC:
		bench_add_atomic(run->n, &g.atomic);
		break;
	case K_RACY:
		loop_racy(run->n);
		break;
	case K_CPUARRAY:
		loop_cpuarray(run->n);
		break;
	case K_TALLY:
		bench_add_block(run->b, run->n);
		break;
	case K_COUNTER:
		loop_counter(&run->c, run->n);
		break;
	}
	run->rseq[i] = tally_rseq_active();
	return run->n;
}

static struct tally_zone *zone;

/* One run: fills r->ns[r->n], r->rate[r->n] and the check. */
static void run_once(const struct conf *cf, unsigned threads, int pinned,
		     uint64_t n, struct bench_row *r)
{
	int cpus[BENCH_MAX_THREADS];
	unsigned ncpu = bench_cpus(cpus, BENCH_MAX_THREADS);
	struct run run = { .cf = cf, .n = n };
	struct bench_team t;
	int64_t observed = 0;
	int rseq_all = 1, rseq_any = 0;

	g.atomic = 0;
	g.racy = 0;
	g.tls_total = 0;
	memset(cpuarray, 0, sizeof(cpuarray));
	if (cf->kind == K_TALLY) {
		/* A fresh block per run, so that an adaptive block starts
		 * unpromoted every time. */
		run.b = tally_block_alloc(zone, 1, cf->mode);
		if (!run.b)
			bench_die("tally_block_alloc: %s", tally_errmsg());
		if (cf->promote && tally_block_promote(run.b, 0) < 0)
			bench_die("tally_block_promote: %s", tally_errmsg());
	}
	if (cf->kind == K_COUNTER &&
	    tally_counter_register(zone, &(struct tally_metric_desc){
			.name = "bench_counter_inc_total",
			.help = "tally-bench counter: tally_counter_inc()" },
		    &run.c) < 0)
		bench_die("tally_counter_register: %s", tally_errmsg());
	bench_team_run(&t, threads, pinned ? cpus : NULL, ncpu, worker, &run);
	for (unsigned i = 0; i < threads; i++) {
		rseq_all &= run.rseq[i];
		rseq_any |= run.rseq[i];
	}

	switch (cf->kind) {
	case K_TLS:
		observed = (int64_t)g.tls_total;
		break;
	case K_ATOMIC:
		observed = (int64_t)g.atomic;
		break;
	case K_RACY:
		observed = (int64_t)g.racy;
		r->lossy = 1;
		break;
	case K_CPUARRAY:
		for (unsigned c = 0; c < CPUARRAY; c++)
			observed += (int64_t)cpuarray[c].v;
		break;
	case K_TALLY:
		if (tally_block_fetch(run.b, 0, &observed) < 0)
			bench_die("tally_block_fetch: %s", tally_errmsg());
		if (cf->mode == TALLY_ADAPTIVE &&
		    tally_block_promoted(run.b, 0) == 1)
			snprintf(r->note, sizeof(r->note), "promoted");
		if (cf->mode == TALLY_PERCPU && cf->child != CHILD_FALLBACK &&
		    !rseq_all)
			snprintf(r->note, sizeof(r->note), "rseq %s!",
				 rseq_any ? "partly inactive" : "inactive");
		if (cf->child == CHILD_FALLBACK && rseq_any)
			snprintf(r->note, sizeof(r->note), "rseq active!");
		if (tally_block_free(zone, run.b) < 0)
			bench_die("tally_block_free: %s", tally_errmsg());
		break;
	case K_COUNTER:
		if (tally_metric_fetch(&run.c.metric, &observed) < 0 ||
		    tally_metric_remove(&run.c.metric) < 0)
			bench_die("tally_metric_fetch/remove: %s", tally_errmsg());
		break;
	}
	bench_team_record(&t, r);
	bench_row_check(r, (int64_t)threads * (int64_t)n, observed);
	r->n++;
}

struct group {
	unsigned threads;
	int pinned;
};

/*
 * Measure every configuration of every group, interleaved run by run (one
 * run of each configuration, then the next round), so that a slow phase
 * of a noisy machine hits the baselines and tally alike.
 */
static void measure(struct bench_doc *d, const struct bench_opts *o,
		    const struct group *gr, unsigned ngr, int child)
{
	unsigned total = 0, step = 0;

	for (unsigned gi = 0; gi < ngr; gi++)
		for (unsigned c = 0; c < NCONFS; c++)
			total += (confs[c].child == child) * o->repeat;
	for (unsigned gi = 0; gi < ngr; gi++) {
		struct bench_row *r[NCONFS];

		for (unsigned c = 0; c < NCONFS; c++)
			r[c] = confs[c].child != child ? NULL :
			       bench_row_add(d, confs[c].name, "", gr[gi].threads,
					     gr[gi].pinned, 0);
		for (unsigned k = 0; k < o->repeat; k++) {
			for (unsigned c = 0; c < NCONFS; c++) {
				if (!r[c])
					continue;
				bench_progress_step(++step, total, k + 1,
						    o->repeat, "%s, %u thread%s %s",
						    confs[c].name, gr[gi].threads,
						    gr[gi].threads > 1 ? "s" : "",
						    gr[gi].pinned ? "pinned" :
								    "unpinned");
				run_once(&confs[c], gr[gi].threads,
					 gr[gi].pinned, o->adds, r[c]);
			}
		}
		for (unsigned c = 0; c < NCONFS; c++)
			if (r[c])
				bench_row_finish(r[c]);
	}
	bench_progress_done();
}

static void print_rows(const struct bench_doc *d, const struct group *gr,
		       unsigned ngr)
{
	printf("%-23s %3s %-3s %9s %9s %9s %9s %7s %8s %5s  %s\n", "config",
	       "thr", "pin", "ns/op min", "median", "max", "Mops/s", "x TLS",
	       "x atomic", "overl", "check");
	for (unsigned gi = 0; gi < ngr; gi++) {
		for (unsigned i = 0; i < d->nrows; i++) {
			const struct bench_row *r = &d->rows[i];
			char chk[48];

			if (r->threads != gr[gi].threads ||
			    r->pinned != gr[gi].pinned)
				continue;
			if (!r->checked)
				snprintf(chk, sizeof(chk), "-");
			else if (r->observed == r->expected)
				snprintf(chk, sizeof(chk), r->failed ? "FAIL" : "ok");
			else
				snprintf(chk, sizeof(chk), "%s %lld (%.1f%%)",
					 r->lossy ? "lost" : "LOST",
					 (long long)(r->expected - r->observed),
					 100.0 * (double)(r->expected - r->observed) /
						 (double)r->expected);
			printf("%-23s %3u %-3s %9.3f %9.3f %9.3f %9.1f %7.2f "
			       "%8.2f %4.0f%%  %s%s%s\n", r->config, r->threads,
			       r->pinned ? "yes" : "no", r->ns_st.min,
			       r->ns_st.median, r->ns_st.max,
			       r->rate_st.median, r->ratio[0], r->ratio[1],
			       100 * r->overlap_st.median, chk,
			       r->note[0] ? "  " : "", r->note);
		}
		if (gi + 1 < ngr)
			printf("\n");
	}
}

/*
 * The LongAdder loop, a single-file Java program (java File.java, JDK 11
 * and later).  Its CPU time per add comes from the thread's CPU clock, as
 * the workers' do.
 */
static const char longadder_src[] =
	"import java.lang.management.ManagementFactory;\n"
	"import java.lang.management.ThreadMXBean;\n"
	"import java.util.concurrent.atomic.LongAdder;\n"
	"public class TallyBenchLongAdder {\n"
	"  static long loop(LongAdder x, long n) {\n"
	"    for (long i = 0; i < n; i++) x.increment();\n"
	"    return x.sum();\n"
	"  }\n"
	"  public static void main(String[] a) {\n"
	"    long n = Long.parseLong(a[0]);\n"
	"    int runs = Integer.parseInt(a[1]);\n"
	"    ThreadMXBean mx = ManagementFactory.getThreadMXBean();\n"
	"    for (int w = 0; w < 3; w++) loop(new LongAdder(), n);\n"
	"    for (int r = 0; r < runs; r++) {\n"
	"      LongAdder x = new LongAdder();\n"
	"      long c0 = mx.getCurrentThreadCpuTime();\n"
	"      long sum = loop(x, n);\n"
	"      long c1 = mx.getCurrentThreadCpuTime();\n"
	"      System.out.println(\"RUN \" + (c1 - c0) + \" \" + sum);\n"
	"    }\n"
	"  }\n"
	"}\n";

/* The "java LongAdder" row (1 thread), or nothing when no JVM runs it. */
static void measure_longadder(struct bench_doc *d, const struct bench_opts *o)
{
	char dir[] = "/tmp/tally-bench-java.XXXXXX", src[64], cmd[256];
	char line[256];
	struct bench_row *r = NULL;
	FILE *f;

	if (!bench_on_path("java") || !mkdtemp(dir))
		return;
	snprintf(src, sizeof(src), "%s/TallyBenchLongAdder.java", dir);
	f = fopen(src, "w");
	if (f) {
		fputs(longadder_src, f);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "java -XX:+UseSerialGC %s %llu %u "
			 "2>/dev/null", src, (unsigned long long)o->adds,
			 o->repeat);
		bench_progress_step(1, 1, 1, 1, "java LongAdder, 1 thread");
		f = popen(cmd, "r");
	}
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long cpu, sum;

		if (sscanf(line, "RUN %llu %llu", &cpu, &sum) != 2 || !cpu)
			continue;
		if (!r)
			r = bench_row_add(d, "java LongAdder", "", 1, 1, 0);
		if (r->n >= BENCH_MAX_REPEAT)
			break;
		r->ns[r->n] = (double)cpu / (double)o->adds;
		r->rate[r->n] = 1e3 / r->ns[r->n];
		r->overlap[r->n] = 1;
		bench_row_check(r, (int64_t)o->adds, (int64_t)sum);
		r->n++;
	}
	if (f)
		pclose(f);
	bench_progress_done();
	if (r)
		bench_row_finish(r);
	unlink(src);
	rmdir(dir);
}

/* Move the rows a child added (from @before on) after the row named
 * @anchor of the same group. */
static void place_child_rows(struct bench_doc *d, unsigned before,
			     const char *anchor)
{
	static struct bench_row tmp[BENCH_MAX_ROWS];
	unsigned n = 0;

	for (unsigned i = 0; i < before; i++) {
		tmp[n++] = d->rows[i];
		if (strcmp(d->rows[i].config, anchor) == 0)
			for (unsigned j = before; j < d->nrows; j++)
				if (d->rows[j].threads == d->rows[i].threads &&
				    d->rows[j].pinned == d->rows[i].pinned)
					tmp[n++] = d->rows[j];
	}
	memcpy(d->rows, tmp, n * sizeof(tmp[0]));
	d->nrows = n;
}

int bench_counter(const struct bench_opts *o)
{
	static struct bench_doc d;
	int cpus[BENCH_MAX_THREADS];
	unsigned ncpu = bench_cpus(cpus, BENCH_MAX_THREADS);
	unsigned T = o->threads ? o->threads : ncpu;
	struct group gr[3 + BENCH_MAX_SWEEP];
	unsigned ngr = 0;
	struct tally_zone_usage u;
	char meta[256] = "", name[64];
	int child_rc = 0, rseq;

	/* Pinned groups by thread count (1, T and the sweep's), then T
	 * unpinned. */
	{
		unsigned cnt[2 + BENCH_MAX_SWEEP], nc = 0;

		cnt[nc++] = 1;
		cnt[nc++] = T;
		for (unsigned i = 0; i < o->nsweep; i++)
			cnt[nc++] = o->sweep[i];
		for (unsigned i = 0; i < nc; i++) {
			unsigned k;

			for (k = 0; k < ngr && gr[k].threads != cnt[i]; k++)
				;
			if (k < ngr)
				continue;
			for (k = ngr; k > 0 && gr[k - 1].threads > cnt[i]; k--)
				gr[k] = gr[k - 1];
			gr[k] = (struct group){ cnt[i], 1 };
			ngr++;
		}
		gr[ngr++] = (struct group){ T, 0 };
	}
	bench_doc_start(&d, o, "counter", "mops",
			(const char *const[4]){ "x_tls", "x_atomic" });

	snprintf(name, sizeof(name), "tally-bench-counter%s",
		 o->child ? "-child" : "");
	zone = bench_anon_zone(name, 4 * TALLY_CHUNK_SLOTS);
	if (tally_zone_usage(zone, &u) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());
	{
		/* rseq is per thread: ask a thread that did an add. */
		tally_block *b = tally_block_alloc(zone, 1, TALLY_PERCPU);

		if (!b)
			bench_die("tally_block_alloc: %s", tally_errmsg());
		uintptr_t tcb = bench_tcb_word();

		tally_block_add(b, 0, 1);
		if (bench_tcb_word() != tcb)
			bench_tcb_restore(tcb);
		rseq = tally_rseq_active();
		tally_block_free(zone, b);
	}

	if (o->child) {
		/* A child: the parent set TALLY_NO_RSEQ=1 (fallback) or
		 * TALLY_NODES=2 (nodes). */
		measure(&d, o, gr, ngr, strcmp(o->child, "nodes") == 0 ?
					CHILD_NODES : CHILD_FALLBACK);
		snprintf(meta, sizeof(meta), "rseq=%d", rseq);
		bench_emit_rows(&d, meta, stdout);
		tally_zone_destroy(zone);
		return bench_failed(&d);
	}

	measure(&d, o, gr, ngr, 0);
	if (!o->no_child) {
		char *argv[32], buf[16][32];
		unsigned before = d.nrows;
		int rc;

		bench_child_args(o, "counter", "fallback", argv, buf, 32);
		child_rc = bench_run_child("TALLY_NO_RSEQ=1", argv, &d, meta,
					   sizeof(meta));
		if (child_rc < 0)
			bench_die("the TALLY_NO_RSEQ=1 child failed");
		if (d.nrows == before)
			bench_die("the TALLY_NO_RSEQ=1 child printed no rows");
		place_child_rows(&d, before, "tally percpu");
		/* Two nodes need two slabs (TALLY_NODES is at most the slab
		 * count) and, to be apart, two CPUs. */
		if (u.nslabs >= 2 && ncpu >= 2) {
			before = d.nrows;
			bench_child_args(o, "counter", "nodes", argv, buf, 32);
			rc = bench_run_child("TALLY_NODES=2", argv, &d, NULL, 0);
			if (rc < 0)
				bench_die("the TALLY_NODES=2 child failed");
			if (rc == 1)
				child_rc = 1;
			place_child_rows(&d, before, "tally pernode");
		}
		if (!o->quick)
			measure_longadder(&d, o);
	}

	/* Ratios against the baselines of the same group. */
	for (unsigned i = 0; i < d.nrows; i++) {
		struct bench_row *r = &d.rows[i];
		struct bench_row *tls = bench_row_find(&d, "thread-local add", "",
						       r->threads, r->pinned, 0);
		struct bench_row *at = bench_row_find(&d, "shared atomic", "",
						      r->threads, r->pinned, 0);

		if (tls)
			r->ratio[0] = r->ns_st.median / tls->ns_st.median;
		if (at)
			r->ratio[1] = at->ns_st.median / r->ns_st.median;
	}

	{
		struct bench_row *pc1 = bench_row_find(&d, "tally percpu", "", 1, 1, 0);
		struct bench_row *pcT = bench_row_find(&d, "tally percpu", "", T, 1, 0);
		struct bench_row *pcTu = bench_row_find(&d, "tally percpu", "", T, 0, 0);
		struct bench_row *fb1 = bench_row_find(&d, "tally percpu fallback", "", 1, 1, 0);
		struct bench_row *fbT = bench_row_find(&d, "tally percpu fallback", "", T, 1, 0);
		struct bench_row *atT = bench_row_find(&d, "shared atomic", "", T, 1, 0);
		struct bench_row *raT = bench_row_find(&d, "racy +=", "", T, 1, 0);
		struct bench_row *ad1 = bench_row_find(&d, "tally adaptive promoted", "", 1, 1, 0);
		struct bench_row *ci1 = bench_row_find(&d, "tally counter inc", "", 1, 1, 0);
		struct bench_row *shT = bench_row_find(&d, "tally shared", "", T, 1, 0);
		struct bench_row *at1 = bench_row_find(&d, "shared atomic", "", 1, 1, 0);
		struct bench_row *cold1 = bench_row_find(&d, "tally adaptive", "", 1, 1, 0);
		struct bench_row *pn1 = bench_row_find(&d, "tally pernode", "", 1, 1, 0);
		struct bench_row *pnT = bench_row_find(&d, "tally pernode", "", T, 1, 0);
		struct bench_row *sh2n = bench_row_find(&d, "tally shared (2 nodes)", "", T, 1, 0);
		struct bench_row *pn2n = bench_row_find(&d, "tally pernode (2 nodes)", "", T, 1, 0);
		struct bench_row *la1 = bench_row_find(&d, "java LongAdder", "", 1, 1, 0);
		char what[96];

		bench_target(&d, "percpu add vs thread-local add, 1 thread", "<=",
			     2.6, pc1 ? pc1->ratio[0] : NAN, "x");
		bench_target_cpu(&d, "this CPU's rseq cost against a "
				 "load-add-store");
		snprintf(what, sizeof(what),
			 "percpu total throughput vs shared atomic, %u threads", T);
		bench_target(&d, what, ">=", 30, pcT ? pcT->ratio[1] : NAN, "x");
		bench_target_cpu(&d, "this CPU's rseq cost against a contended "
				 "locked add");
		bench_target(&d, "fallback add, 1 thread", "<=", 10,
			     fb1 ? fb1->ns_st.median : NAN, "ns");
		bench_target_cpu(&d, "an unlocked add's time on this CPU");
		bench_target(&d, "fallback add vs percpu add, 1 thread", "<=",
			     2, fb1 && pc1 ? fb1->ns_st.median /
					     pc1->ns_st.median : NAN, "x");
		bench_target_cpu(&d, "this CPU's rseq cost against an owned "
				 "copy's check");
		bench_target(&d, "tally_counter_inc vs percpu block add, 1 thread",
			     "<=", 1.1, ci1 && pc1 ? ci1->ns_st.median /
						   pc1->ns_st.median : NAN, "x");
		bench_target(&d, "promoted adaptive add vs percpu add, 1 thread",
			     "<=", 1.3, ad1 && pc1 ? ad1->ns_st.median /
						   pc1->ns_st.median : NAN, "x");
		snprintf(what, sizeof(what), "shared mode throughput vs shared "
			 "atomic, %u threads", T);
		bench_target(&d, what, ">=", 1, shT ? shT->ratio[1] : NAN, "x");
		/* One worker never contends: its adaptive slot stays on the
		 * shared word, and costs what an adaptive counter that stays
		 * cold costs every day. */
		bench_target(&d, "adaptive add before promotion vs shared atomic, "
			     "1 thread", "<=", 1.2, cold1 && at1 && !cold1->note[0] ?
			     cold1->ns_st.median / at1->ns_st.median : NAN, "x");
		if (cold1 && cold1->note[0])
			bench_target_note(&d, "the slot was promoted");
		bench_target(&d, "adaptive add before promotion vs Java LongAdder, "
			     "1 thread", "<=", 1, cold1 && la1 && !cold1->note[0] ?
			     cold1->ns_st.median / la1->ns_st.median : NAN, "x");
		if (!la1)
			bench_target_note(&d, "no java on the PATH (or --quick, "
					  "--no-child)");
		/* On one node, a per-node block is one shared word. */
		bench_target(&d, "pernode add vs shared atomic, 1 node, 1 thread",
			     "<=", 1.2, u.nnodes == 1 && pn1 && at1 ?
			     pn1->ns_st.median / at1->ns_st.median : NAN, "x");
		if (u.nnodes != 1)
			bench_target_note(&d, "this machine has %u nodes", u.nnodes);
		snprintf(what, sizeof(what), "pernode add vs shared atomic, 1 node, "
			 "%u threads", T);
		bench_target(&d, what, "<=", 1.2, u.nnodes == 1 && pnT && atT ?
			     pnT->ns_st.median / atT->ns_st.median : NAN, "x");
		if (u.nnodes != 1)
			bench_target_note(&d, "this machine has %u nodes", u.nnodes);
		snprintf(what, sizeof(what), "pernode throughput vs shared, 2 nodes, "
			 "%u threads", T);
		bench_target(&d, what, ">=", 1, sh2n && pn2n ?
			     sh2n->ns_st.median / pn2n->ns_st.median : NAN, "x");

		/* tally percpu against each baseline, as ministat(1) does in
		 * the counter(9) mail: the difference of the mean ns per add
		 * at 95% confidence, or "No difference proven". */
		for (int pin = 1; pin >= 0; pin--) {
			static const char *const base[] = {
				"thread-local add", "shared atomic", "racy +=",
				"sched_getcpu atomics",
			};
			const struct bench_row *oth[4];
			struct bench_row *x = pin ? pcT : pcTu;
			unsigned no = 0;
			char title[200];

			for (unsigned k = 0; k < 4; k++) {
				struct bench_row *b = bench_row_find(&d, base[k], "",
								     T, pin, 0);

				if (b)
					oth[no++] = b;
			}
			if (!x || !no)
				continue;
			snprintf(title, sizeof(title),
				 "%sns per add per thread, %u thread%s %s (x = "
				 "tally percpu, + thread-local add, * shared "
				 "atomic, %% racy +=, # sched_getcpu atomics):",
				 pin ? "" : "\n", T, T > 1 ? "s" : "",
				 pin ? "pinned" : "unpinned");
			bench_ministat(d.headline, sizeof(d.headline), title,
				       x, oth, no);
		}
		snprintf(d.params, sizeof(d.params),
			 "\"adds\":%llu,\"repeat\":%u,\"threads\":%u,"
			 "\"cpus\":\"%s\",\"rseq\":%s,\"slabs\":%u,"
			 "\"build_type\":\"%s\",\"quick\":%s",
			 (unsigned long long)o->adds, o->repeat, T,
			 bench_cpu_list(), rseq ? "true" : "false", u.nslabs,
			 TALLY_BENCH_BUILD_TYPE, o->quick ? "true" : "false");
		{
			struct bench_row *tls1 = bench_row_find(&d, "thread-local add", "", 1, 1, 0);
			unsigned met = 0;

			for (unsigned i = 0; i < d.ntargets; i++)
				met += (unsigned)d.targets[i].met;
			snprintf(d.summary, sizeof(d.summary),
				 "counter threads=%u adds=%llu runs=%u "
				 "tls_ns=%.3f percpu_ns=%.3f fallback_ns=%.3f "
				 "percpu_vs_tls_1t=%.2fx atomic_%ut_ns=%.3f "
				 "percpu_vs_atomic_%ut=%.1fx fallback_%ut_ns=%.3f "
				 "racy_lost=%.1f%% overlap_%ut=%.0f%% "
				 "adaptive_cold_ns=%.3f pernode_ns=%.3f "
				 "pernode_2nodes_%ut_ns=%.3f "
				 "targets_met=%u/%u checks=%s",
				 T, (unsigned long long)o->adds, o->repeat,
				 tls1 ? tls1->ns_st.median : NAN,
				 pc1 ? pc1->ns_st.median : NAN,
				 fb1 ? fb1->ns_st.median : NAN,
				 pc1 ? pc1->ratio[0] : NAN, T,
				 atT ? atT->ns_st.median : NAN, T,
				 pcT ? pcT->ratio[1] : NAN, T,
				 fbT ? fbT->ns_st.median : NAN,
				 raT ? 100.0 * (double)(raT->expected - raT->observed) /
					       (double)raT->expected : NAN,
				 T, atT ? 100 * atT->overlap_st.median : NAN,
				 cold1 ? cold1->ns_st.median : NAN,
				 pn1 ? pn1->ns_st.median : NAN, T,
				 pn2n ? pn2n->ns_st.median : NAN,
				 met, d.ntargets,
				 bench_failed(&d) || child_rc == 1 ? "FAILED" : "ok");
		}
	}

	bench_plot_add(&d, &(struct bench_plot){
		.file = "counter-throughput",
		.title = "counter: total adds per second, all workers on one "
			 "counter (higher is better)",
		.xlabel = "worker threads, pinned round-robin to the CPUs "
			  "(more than the CPUs: oversubscribed)",
		.ylabel = "total throughput, million adds per second (log)",
		.x = BENCH_F_THREADS, .y = BENCH_F_RATE, .pinned = 1,
		.logx = 1, .logy = 1 });
	bench_plot_add(&d, &(struct bench_plot){
		.file = "counter-ns",
		.title = "counter: CPU time of one add on one thread (lower is "
			 "better)",
		.xlabel = "worker threads, pinned round-robin to the CPUs",
		.ylabel = "ns per add per thread, CPU time (log)",
		.x = BENCH_F_THREADS, .y = BENCH_F_NS, .pinned = 1,
		.logx = 1, .logy = 1 });

	if (o->json) {
		bench_print_json(&d, o, stdout);
	} else {
		printf("tally-bench counter: %u worker%s on CPUs %s, %llu adds "
		       "per worker, %u run%s per row; rseq %s; %u slabs\n",
		       T, T > 1 ? "s" : "", bench_cpu_list(),
		       (unsigned long long)o->adds, o->repeat,
		       o->repeat > 1 ? "s" : "",
		       rseq ? "active" : "INACTIVE (every add takes the fallback)",
		       u.nslabs);
		if (strcmp(TALLY_BENCH_BUILD_TYPE, "") == 0)
			printf("warning: CMAKE_BUILD_TYPE is empty: libtally "
			       "was built without optimisation (-O0)\n");
		printf("ns/op: CPU time per add per thread (min, median, max of "
		       "the runs); Mops/s: total adds per wall-clock second "
		       "(median);\nx TLS: ns/op / thread-local ns/op; x atomic: "
		       "shared atomic ns/op / ns/op, i.e. the total throughput "
		       "ratio\n(same thread count and pinning); overl: the "
		       "workers' CPU time / (workers x wall time), median: "
		       "below ~90%%\nthe workers did not all run at once (a "
		       "busy machine) and contention is understated\n\n");
		print_rows(&d, gr, ngr);
		if (d.headline[0])
			printf("\n%s", d.headline);
		bench_print_targets(&d, stdout);
		{
			struct bench_row *at = bench_row_find(&d, "shared atomic", "", T, 1, 0);

			if (T > 1 && at && at->overlap_st.median < 0.9)
				printf("  note: the %u pinned workers ran at the "
				       "same time only %.0f%% of the time (a busy "
				       "machine):\n  the contended rows understate "
				       "contention; rerun on a quiet machine\n", T,
				       100 * at->overlap_st.median);
		}
		bench_print_summary(&d);
	}
	tally_zone_destroy(zone);
	return bench_finish(&d, o, "a correctness check failed"
			    " (see the check and note columns)",
			    child_rc == 1);
}
