/*
 * bench-falseshare.c: false sharing of per-thread counters (tally-bench
 * falseshare), after the Alibaba ESSD talk (perf c2c showed the hottest
 * cache line written by CPUs of different sockets; the fix was per-queue
 * counters, each aligned on its own cache line).
 *
 * One worker per CPU, pinned, each adds 1 to its own counter N times;
 * then a single worker for reference.  The contenders, measured in the
 * same run, interleaved run by run:
 *
 *   packed        each worker's counter is its own 8-byte word, but the
 *                 words sit next to each other in one 64-byte cache line:
 *                 no count is shared, the line is.
 *   padded        the same counters, each alone on 128 bytes (two lines,
 *                 so that the adjacent-line prefetcher does not pair them).
 *   tally percpu  one TALLY_PERCPU block: each CPU's copy is on a page of
 *                 its own.
 *
 * The per-thread counters are a volatile load, add and store (each word
 * has one writer, so they need no atomic); every total is checked.  The
 * slowdown factor of packing is packed ns/op / padded ns/op.
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

enum kind { K_PACKED, K_PADDED, K_TALLY };

static const struct bench_conf confs[] = {
	{ "packed", K_PACKED },
	{ "padded", K_PADDED },
	{ "tally percpu", K_TALLY },
};
#define NCONFS BENCH_NELEMS(confs)

/* Eight counters in one line, and eight counters 128 bytes apart. */
static struct {
	_Alignas(64) uint64_t packed[8];
	_Alignas(128) struct { uint64_t v; char pad[120]; } padded[BENCH_MAX_THREADS];
} g;

__attribute__((noinline)) static void loop_word(volatile uint64_t *p,
						uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		*p += 1;
}

/* What the workers of one run share. */
struct run {
	enum kind kind;
	tally_block *b;
	uint64_t n;
};

static uint64_t worker(void *ctx, unsigned i)
{
	const struct run *run = ctx;

	switch (run->kind) {
	case K_PACKED:
		loop_word(&g.packed[i % 8], run->n);
		break;
	case K_PADDED:
		loop_word(&g.padded[i].v, run->n);
		break;
	case K_TALLY:
		bench_add_block(run->b, run->n);
		break;
	}
	return run->n;
}

static struct tally_zone *zone;

/* The physical package of @cpu, or -1 when sysfs does not say. */
static int package_of(int cpu)
{
	char path[96];
	FILE *f;
	int id = -1;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/"
		 "physical_package_id", cpu);
	if ((f = fopen(path, "r"))) {
		if (fscanf(f, "%d", &id) != 1)
			id = -1;
		fclose(f);
	}
	return id;
}

static void run_once(const struct bench_conf *cf, unsigned threads, uint64_t n,
		     struct bench_row *r)
{
	int cpus[BENCH_MAX_THREADS];
	unsigned ncpu = bench_cpus(cpus, BENCH_MAX_THREADS);
	struct run run = { cf->kind, NULL, n };
	struct bench_team t;
	int64_t observed = 0;

	memset(&g, 0, sizeof(g));
	if (cf->kind == K_TALLY &&
	    !(run.b = tally_block_alloc(zone, 1, TALLY_PERCPU)))
		bench_die("tally_block_alloc: %s", tally_errmsg());
	bench_team_run(&t, threads, cpus, ncpu, worker, &run);
	switch (cf->kind) {
	case K_PACKED:
		for (unsigned i = 0; i < 8; i++)
			observed += (int64_t)g.packed[i];
		break;
	case K_PADDED:
		for (unsigned i = 0; i < threads; i++)
			observed += (int64_t)g.padded[i].v;
		break;
	case K_TALLY:
		if (tally_block_fetch(run.b, 0, &observed) < 0)
			bench_die("tally_block_fetch: %s", tally_errmsg());
		if (tally_block_free(zone, run.b) < 0)
			bench_die("tally_block_free: %s", tally_errmsg());
		break;
	}
	bench_team_record(&t, r);
	bench_row_check(r, (int64_t)threads * (int64_t)n, observed);
	r->n++;
}

int bench_falseshare(const struct bench_opts *o)
{
	static struct bench_doc d;
	int cpus[BENCH_MAX_THREADS];
	unsigned ncpu = bench_cpus(cpus, BENCH_MAX_THREADS);
	/* At most 8 packed counters fit one line. */
	unsigned T = ncpu > 8 ? 8 : ncpu;
	unsigned groups[2] = { T, 1 }, ngr = T > 1 ? 2 : 1, step = 0;
	uint64_t n = o->adds ? o->adds : (o->quick ? 1000000 : 50000000);
	const char *where = "one CPU: nothing is shared, packing costs nothing";

	bench_doc_start(&d, o, "falseshare", "mops",
			(const char *const[4]){ "x_padded", "x_percpu" });
	if (T > 1) {
		int p0 = package_of(cpus[0]), p1 = package_of(cpus[1]);

		where = p0 < 0 || p1 < 0 ? "the CPUs' packages are unknown "
			"(no sysfs topology)" : p0 == p1 ?
			"the CPUs here are in one package: the line moves "
			"between cores; the seed's moved between sockets" :
			"the CPUs here are in different packages, as in the "
			"seed";
	}
	zone = bench_anon_zone("tally-bench-falseshare", 4 * TALLY_CHUNK_SLOTS);

	for (unsigned gi = 0; gi < ngr; gi++) {
		struct bench_row *r[NCONFS];

		for (unsigned c = 0; c < NCONFS; c++)
			r[c] = bench_row_add(&d, confs[c].name, "", groups[gi],
					     1, 0);
		for (unsigned k = 0; k < o->repeat; k++)
			for (unsigned c = 0; c < NCONFS; c++) {
				bench_progress_step(++step,
						    ngr * (unsigned)NCONFS *
						    o->repeat, k + 1, o->repeat,
						    "%s, %u thread%s",
						    confs[c].name, groups[gi],
						    groups[gi] > 1 ? "s" : "");
				run_once(&confs[c], groups[gi], n, r[c]);
			}
		for (unsigned c = 0; c < NCONFS; c++)
			bench_row_finish(r[c]);
	}
	bench_progress_done();
	for (unsigned i = 0; i < d.nrows; i++) {
		struct bench_row *r = &d.rows[i];
		struct bench_row *pad = bench_row_find(&d, "padded", "", r->threads, 1, 0);
		struct bench_row *pc = bench_row_find(&d, "tally percpu", "", r->threads, 1, 0);

		if (pad)
			r->ratio[0] = r->ns_st.median / pad->ns_st.median;
		if (pc)
			r->ratio[1] = r->ns_st.median / pc->ns_st.median;
	}
	{
		struct bench_row *pk = bench_row_find(&d, "packed", "", T, 1, 0);
		struct bench_row *pad = bench_row_find(&d, "padded", "", T, 1, 0);
		struct bench_row *pc = bench_row_find(&d, "tally percpu", "", T, 1, 0);

		snprintf(d.params, sizeof(d.params),
			 "\"adds\":%llu,\"repeat\":%u,\"threads\":%u,"
			 "\"cpus\":\"%s\",\"build_type\":\"%s\",\"quick\":%s,"
			 "\"note\":\"%s\"",
			 (unsigned long long)n, o->repeat, T, bench_cpu_list(),
			 TALLY_BENCH_BUILD_TYPE, o->quick ? "true" : "false",
			 where);
		snprintf(d.summary, sizeof(d.summary),
			 "falseshare threads=%u adds=%llu packed_ns=%.3f "
			 "padded_ns=%.3f percpu_ns=%.3f packing_slowdown=%.2fx "
			 "packed_vs_percpu=%.2fx checks=%s", T,
			 (unsigned long long)n, pk ? pk->ns_st.median : NAN,
			 pad ? pad->ns_st.median : NAN,
			 pc ? pc->ns_st.median : NAN,
			 pk ? pk->ratio[0] : NAN, pk ? pk->ratio[1] : NAN,
			 bench_failed(&d) ? "FAILED" : "ok");
	}
	bench_plot_add(&d, &(struct bench_plot){
		.file = "falseshare-ns",
		.title = "falseshare: an add to a counter of one's own (lower "
			 "is better)",
		.xlabel = "workers, pinned one per CPU",
		.ylabel = "ns of CPU time per add, per worker",
		.x = BENCH_F_THREADS, .y = BENCH_F_NS, .profile = "",
		.pinned = -1 });

	if (o->json) {
		bench_print_json(&d, o, stdout);
	} else {
		printf("tally-bench falseshare: %u worker%s pinned on CPUs %s, "
		       "%llu adds each, %u run%s per row\n", T,
		       T > 1 ? "s" : "", bench_cpu_list(),
		       (unsigned long long)n, o->repeat,
		       o->repeat > 1 ? "s" : "");
		printf("ns/op: CPU time per add per thread (min, median, max); "
		       "Mops/s: total adds per wall-clock second (median);\n"
		       "x padded, x percpu: ns/op / the padded counters' and "
		       "tally's at the same thread count;\noverl: the workers' "
		       "CPU time / (workers x wall time): well below 100%% "
		       "they seldom ran at once and\nthe line was seldom "
		       "shared (a busy machine)\n\n");
		printf("%-13s %3s %9s %9s %9s %9s %8s %8s %5s  %s\n", "config",
		       "thr", "ns/op min", "median", "max", "Mops/s",
		       "x padded", "x percpu", "overl", "check");
		for (unsigned i = 0; i < d.nrows; i++) {
			const struct bench_row *r = &d.rows[i];

			if (i > 0 && d.rows[i - 1].threads != r->threads)
				printf("\n");
			printf("%-13s %3u %9.3f %9.3f %9.3f %9.1f %8.2f %8.2f "
			       "%4.0f%%  %s%s%s\n", r->config, r->threads,
			       r->ns_st.min, r->ns_st.median, r->ns_st.max,
			       r->rate_st.median, r->ratio[0], r->ratio[1],
			       100 * r->overlap_st.median,
			       r->observed == r->expected && !r->failed ? "ok" :
			       "LOST", r->note[0] ? "  " : "", r->note);
		}
		if (T > 1)
			printf("\nthe slowdown of packing %u counters in one "
			       "cache line: %.2fx (packed / padded ns/op)\n", T,
			       d.rows[0].ratio[0]);
		printf("note: %s\n", where);
		bench_print_summary(&d);
	}
	tally_zone_destroy(zone);
	return bench_finish(&d, o, "a correctness check failed"
			    " (see the check and note columns)", 0);
}
