/*
 * bench-pernode.c: per-CPU vs per-NUMA-node vs shared counters (tally-bench
 * pernode), after Open vSwitch's per-NUMA-node flow stats (2014): the
 * kernel datapath kept each flow's stats per node instead of per CPU, to
 * stay clear of the per-CPU allocator and of locking, allocating a node's
 * copy on the first write from that node, and later went back to per-CPU
 * stats allocated lazily.
 *
 * libtally reads its NUMA map once per process, so each forced node count
 * (1, 2, 4: TALLY_NODES, CPU c on node c % N) runs in a re-executed child
 * (4 nodes also need TALLY_NSLABS of at least 4).  Each child measures,
 * for TALLY_PERCPU, TALLY_PERNODE and TALLY_SHARED blocks:
 *
 *   update   one worker per CPU, pinned, adds 1 to one counter N times:
 *            CPU time per add.
 *   read     one thread fetches that counter (written by every CPU) N/100
 *            times: time per fetch (a fetch sums the copies).
 *   flows    the OVS case: F flows of {packets, bytes}, each updated by
 *            one CPU only (flow i by CPU i mod CPUs, as RSS spreads flows),
 *            4 packets per flow: CPU time per flow update and the resident
 *            memory per flow (the zone's growth / F).
 *
 * Every total is checked exactly.  Two computed rows give the memory of
 * the kernel's alternatives per flow: alloc_percpu of {packets, bytes}
 * for every possible CPU, and OVS 2014's per-node struct flow_stats
 * (40 bytes per node that wrote, plus an 8-byte pointer per node).
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

static const struct conf {
	const char *name;
	unsigned mode;
} confs[] = {
	{ "tally percpu", TALLY_PERCPU },
	{ "tally pernode", TALLY_PERNODE },
	{ "tally shared", TALLY_SHARED },
};
#define NCONFS (sizeof(confs) / sizeof(confs[0]))

#define PACKETS_PER_FLOW 4

static struct tally_zone *zone;

static inline int64_t flow_len(size_t i)
{
	return 64 + (int64_t)(i % 1437);
}

/* What the workers of one run share: one block (update), or flows. */
struct run {
	tally_block *b;
	tally_block **flows;   /* NULL for update */
	size_t nflows;
	unsigned nworkers;
	uint64_t n;
};

static uint64_t worker(void *ctx, unsigned idx)
{
	const struct run *run = ctx;
	uint64_t ops = 0;

	if (!run->flows) {
		bench_add_block(run->b, run->n);
		return run->n;
	}
	for (unsigned p = 0; p < PACKETS_PER_FLOW; p++)
		for (size_t i = idx; i < run->nflows; i += run->nworkers) {
			tally_block_add(run->flows[i], 0, 1);
			tally_block_add(run->flows[i], 1, flow_len(i));
			ops++;
		}
	return ops;
}

/* Run one worker per CPU on @b (update) or on @flows; fill run r->n. */
static void run_workers(struct bench_row *r, tally_block *b,
			tally_block **flows, size_t nflows, uint64_t n)
{
	int cpus[BENCH_MAX_THREADS];
	unsigned T = bench_cpus(cpus, BENCH_MAX_THREADS);
	struct run run = { b, flows, nflows, T, n };
	struct bench_team t;

	bench_team_run(&t, T, cpus, T, worker, &run);
	bench_team_record(&t, r);
}

/* update and read rows of one mode, one run each. */
static void run_update_read(const struct conf *cf, uint64_t n,
			    struct bench_row *up, struct bench_row *rd)
{
	int cpus[BENCH_MAX_THREADS];
	unsigned T = bench_cpus(cpus, BENCH_MAX_THREADS);
	tally_block *b = tally_block_alloc(zone, 1, cf->mode);
	uint64_t m = n / 100 ? n / 100 : 1, c0, c1, t0, t1;
	int64_t v = 0, sink = 0;

	if (!b)
		bench_die("tally_block_alloc: %s", tally_errmsg());
	run_workers(up, b, NULL, 0, n);
	if (tally_block_fetch(b, 0, &v) < 0)
		bench_die("tally_block_fetch: %s", tally_errmsg());
	bench_row_check(up, (int64_t)T * (int64_t)n, v);
	up->n++;

	t0 = bench_now_ns();
	c0 = bench_thread_cpu_ns();
	for (uint64_t i = 0; i < m; i++) {
		tally_block_fetch(b, 0, &v);
		sink += v;
	}
	c1 = bench_thread_cpu_ns();
	t1 = bench_now_ns();
	rd->ns[rd->n] = (double)(c1 - c0) / (double)m;
	rd->rate[rd->n] = (double)m / (double)(t1 > t0 ? t1 - t0 : 1) * 1e3;
	bench_row_check(rd, (int64_t)m * (int64_t)T * (int64_t)n, sink);
	rd->n++;
	if (tally_block_free(zone, b) < 0)
		bench_die("tally_block_free: %s", tally_errmsg());
}

/* The OVS case, one run: F fresh flows in a fresh zone. */
static void run_flows(const struct conf *cf, size_t F, struct bench_row *r)
{
	tally_block **fl = calloc(F, sizeof(*fl));
	struct tally_zone_usage u0, u1;
	struct tally_zone *z;
	int64_t pk = 0, by = 0, epk = 0, eby = 0;

	if (!fl)
		bench_die("out of memory");
	z = bench_anon_zone("tally-bench-pernode-flows",
			    2 * F + 8 * TALLY_CHUNK_SLOTS);
	/* Before allocation: shared and per-node chunks get their pages
	 * when they are handed out, per-CPU ones as CPUs write. */
	if (tally_zone_usage(z, &u0) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());
	for (size_t i = 0; i < F; i++)
		if (!(fl[i] = tally_block_alloc(z, 2, cf->mode)))
			bench_die("tally_block_alloc: %s", tally_errmsg());
	run_workers(r, NULL, fl, F, 0);
	if (tally_zone_usage(z, &u1) < 0)
		bench_die("tally_zone_usage: %s", tally_errmsg());
	for (size_t i = 0; i < F; i++) {
		int64_t a, b;

		if (tally_block_fetch(fl[i], 0, &a) < 0 ||
		    tally_block_fetch(fl[i], 1, &b) < 0)
			bench_die("tally_block_fetch: %s", tally_errmsg());
		pk += a;
		by += b;
		epk += PACKETS_PER_FLOW;
		eby += PACKETS_PER_FLOW * flow_len(i);
		tally_block_free(z, fl[i]);
	}
	tally_zone_destroy(z);
	free(fl);
	/* One number: packets and bytes are both right, or the packets or
	 * bytes that are wrong. */
	bench_row_check(r, epk, pk == epk && by == eby ? pk :
				pk != epk ? pk : epk - (eby - by));
	{
		double bytes = (double)(u1.resident_bytes - u0.resident_bytes) /
			       (double)F;

		/* The median of the runs, kept in the row's samples. */
		r->overlap[r->n] = bytes;
	}
	r->n++;
}

/* Measure every mode in this process, interleaved run by run. */
static void measure(struct bench_doc *d, const struct bench_opts *o,
		    uint64_t n, size_t F, unsigned slabs)
{
	int cpus[BENCH_MAX_THREADS];
	unsigned T = bench_cpus(cpus, BENCH_MAX_THREADS), step = 0;
	struct bench_row *up[NCONFS], *rd[NCONFS], *fl[NCONFS];

	for (unsigned c = 0; c < NCONFS; c++)
		up[c] = bench_row_add(d, confs[c].name, "update", T, 1, slabs);
	for (unsigned c = 0; c < NCONFS; c++)
		rd[c] = bench_row_add(d, confs[c].name, "read", 1, 0, slabs);
	for (unsigned c = 0; c < NCONFS; c++)
		fl[c] = bench_row_add(d, confs[c].name, "flows", T, 1, slabs);
	for (unsigned k = 0; k < o->repeat; k++)
		for (unsigned c = 0; c < NCONFS; c++) {
			bench_progress_step(++step,
					    (unsigned)NCONFS * o->repeat, k + 1,
					    o->repeat, "%s", confs[c].name);
			run_update_read(&confs[c], n, up[c], rd[c]);
			run_flows(&confs[c], F, fl[c]);
		}
	bench_progress_done();
	for (unsigned c = 0; c < NCONFS; c++) {
		struct bench_stats st;

		bench_row_finish(up[c]);
		bench_row_finish(rd[c]);
		bench_stats(fl[c]->overlap, fl[c]->n, &st);
		memset(fl[c]->overlap, 0, sizeof(fl[c]->overlap));
		bench_row_finish(fl[c]);
		fl[c]->bytes = st.median;
		fl[c]->cpus_wrote = 1;
	}
}

static const char *row_nodes_note(unsigned nodes, unsigned ncpu)
{
	return nodes > ncpu ? "fewer CPUs than nodes: some nodes idle" : "";
}

int bench_pernode(const struct bench_opts *o)
{
	static struct bench_doc d;
	int cpus[BENCH_MAX_THREADS];
	unsigned ncpu = bench_cpus(cpus, BENCH_MAX_THREADS);
	uint64_t n = o->adds ? o->adds : (o->quick ? 200000 : 10000000);
	size_t F = o->quick ? 5000 : 100000;
	static const unsigned nodes_list[] = { 1, 2, 4 };
	unsigned real_nodes = 0, real_slabs = 0;
	int child_rc = 0;
	char meta[256] = "";

	bench_doc_start(&d, o, "pernode", "mops",
			(const char *const[4]){ "nodes", "x_percpu" });

	if (o->child || o->no_child) {
		struct tally_zone_usage u;

		zone = bench_anon_zone("tally-bench-pernode",
				       4 * TALLY_CHUNK_SLOTS);
		if (tally_zone_usage(zone, &u) < 0)
			bench_die("tally_zone_usage: %s", tally_errmsg());
		measure(&d, o, n, F, u.nslabs);
		tally_zone_destroy(zone);
		real_nodes = u.nnodes;
		real_slabs = u.nslabs;
		if (o->child) {
			snprintf(meta, sizeof(meta), "nodes=%u slabs=%u",
				 u.nnodes, u.nslabs);
			bench_emit_rows(&d, meta, stdout);
			return bench_failed(&d);
		}
		for (unsigned i = 0; i < d.nrows; i++)
			d.rows[i].ratio[0] = u.nnodes;
	} else {
		/* This process's own NUMA map, before any forcing. */
		struct tally_zone_usage u;
		struct tally_zone *z = tally_zone_create(
			"tally-bench-pernode", &(struct tally_zone_opts){
				.capacity = TALLY_CHUNK_SLOTS,
				.flags = TALLY_ZONE_ANON });

		if (!z || tally_zone_usage(z, &u) < 0)
			bench_die("tally_zone_create: %s", tally_errmsg());
		real_nodes = u.nnodes;
		tally_zone_destroy(z);
		for (unsigned k = 0; k < 3; k++) {
			char *argv[16], buf[4][32], env[32], slabs[32];
			struct bench_opts co = *o;
			unsigned before = d.nrows, got_nodes = 0, got_slabs = 0;
			const char *old = getenv("TALLY_NSLABS");
			char saved[32] = "";

			if (old)
				snprintf(saved, sizeof(saved), "%s", old);
			/* TALLY_NODES may not exceed the slab count. */
			if (nodes_list[k] > ncpu) {
				snprintf(slabs, sizeof(slabs), "%u",
					 nodes_list[k]);
				setenv("TALLY_NSLABS", slabs, 1);
			}
			snprintf(env, sizeof(env), "TALLY_NODES=%u",
				 nodes_list[k]);
			bench_progress("child %u/3, %s", k + 1, env);
			co.adds = n;
			bench_child_args(&co, "pernode", "nodes", argv, buf, 16);
			meta[0] = 0;
			child_rc |= bench_run_child(env, argv, &d, meta,
						    sizeof(meta));
			if (old)
				setenv("TALLY_NSLABS", saved, 1);
			else
				unsetenv("TALLY_NSLABS");
			if (child_rc < 0)
				bench_die("the %s child failed", env);
			if (sscanf(meta, "nodes=%u slabs=%u", &got_nodes,
				   &got_slabs) != 2 || got_nodes != nodes_list[k])
				bench_die("the %s child reports '%s' (TALLY_NODES "
					  "ignored?)", env, meta);
			for (unsigned i = before; i < d.nrows; i++) {
				d.rows[i].ratio[0] = nodes_list[k];
				if (!d.rows[i].note[0])
					snprintf(d.rows[i].note,
						 sizeof(d.rows[i].note), "%s",
						 row_nodes_note(nodes_list[k],
								ncpu));
			}
			if (k == 0)
				real_slabs = got_slabs;
		}
	}

	/* x percpu: ns/op / the percpu row's of the same profile and nodes. */
	for (unsigned i = 0; i < d.nrows; i++) {
		struct bench_row *r = &d.rows[i];

		for (unsigned j = 0; j < d.nrows; j++) {
			struct bench_row *p = &d.rows[j];

			if (strcmp(p->config, "tally percpu") == 0 &&
			    strcmp(p->profile, r->profile) == 0 &&
			    p->ratio[0] == r->ratio[0] && p->ns_st.median > 0)
				r->ratio[1] = r->ns_st.median / p->ns_st.median;
		}
	}
	/* The kernel's alternatives, per flow of {packets, bytes}. */
	{
		unsigned S = real_slabs ? real_slabs : ncpu;
		struct bench_row *r;

		r = bench_row_add(&d, "alloc_percpu (computed)", "flows", ncpu,
				  0, S);
		r->bytes = 16.0 * S;
		r->cpus_wrote = 1;
		snprintf(r->note, sizeof(r->note),
			 "16 B x %u possible CPUs, eager", S);
		for (unsigned k = 0; k < 3; k++) {
			r = bench_row_add(&d, "OVS 2014 pernode (computed)",
					  "flows", ncpu, 0, 0);
			r->ratio[0] = nodes_list[k];
			r->bytes = 40.0 + 8.0 * nodes_list[k];
			r->cpus_wrote = 1;
			snprintf(r->note, sizeof(r->note), "40 B flow_stats + "
				 "8 B x %u node pointers", nodes_list[k]);
			if (o->no_child)
				break;
		}
	}

	{
		const struct bench_row *pc = NULL, *pn1 = NULL, *pn2 = NULL,
				       *sh = NULL, *fpc = NULL, *fpn = NULL,
				       *fsh = NULL;

		for (unsigned i = 0; i < d.nrows; i++) {
			const struct bench_row *r = &d.rows[i];
			int up = strcmp(r->profile, "update") == 0;
			int fl = strcmp(r->profile, "flows") == 0;
			int nd = (int)r->ratio[0];

			if (up && nd == 1 && !strcmp(r->config, "tally percpu"))
				pc = r;
			if (up && nd == 1 && !strcmp(r->config, "tally pernode"))
				pn1 = r;
			if (up && nd == 2 && !strcmp(r->config, "tally pernode"))
				pn2 = r;
			if (up && nd == 1 && !strcmp(r->config, "tally shared"))
				sh = r;
			if (fl && nd == 2 && !strcmp(r->config, "tally percpu"))
				fpc = r;
			if (fl && nd == 2 && !strcmp(r->config, "tally pernode"))
				fpn = r;
			if (fl && nd == 2 && !strcmp(r->config, "tally shared"))
				fsh = r;
		}
		snprintf(d.params, sizeof(d.params),
			 "\"adds\":%llu,\"flows\":%zu,\"packets_per_flow\":%u,"
			 "\"repeat\":%u,\"cpus\":\"%s\",\"ncpus\":%u,"
			 "\"slabs\":%u,\"forced_nodes\":%s,\"real_nodes\":%u,"
			 "\"build_type\":\"%s\",\"quick\":%s,\"note\":\"%s\"",
			 (unsigned long long)n, F, PACKETS_PER_FLOW, o->repeat,
			 bench_cpu_list(), ncpu, real_slabs,
			 o->no_child ? "[]" : "[1,2,4]", real_nodes,
			 TALLY_BENCH_BUILD_TYPE, o->quick ? "true" : "false",
			 "forced nodes map CPU c to node c mod N; memory is "
			 "not placed per node, so remote access costs cannot "
			 "show");
		snprintf(d.summary, sizeof(d.summary),
			 "pernode cpus=%u adds=%llu flows=%zu "
			 "update_ns_percpu=%.2f pernode_1n=%.2f pernode_2n=%.2f "
			 "shared=%.2f flow_bytes_percpu=%.1f "
			 "flow_bytes_pernode_2n=%.1f flow_bytes_shared=%.1f "
			 "checks=%s", ncpu, (unsigned long long)n,
			 F, pc ? pc->ns_st.median : NAN,
			 pn1 ? pn1->ns_st.median : NAN,
			 pn2 ? pn2->ns_st.median : NAN,
			 sh ? sh->ns_st.median : NAN, fpc ? fpc->bytes : NAN,
			 fpn ? fpn->bytes : NAN, fsh ? fsh->bytes : NAN,
			 bench_failed(&d) || child_rc == 1 ? "FAILED" : "ok");
	}

	/* nodes is ratio[0]: null in the alloc_percpu row, which is left out
	 * of the charts (it does not depend on the nodes). */
	bench_plot_add(&d, &(struct bench_plot){
		.file = "pernode-update",
		.title = "pernode: an add to one counter, one pinned worker per "
			 "CPU (lower is better)",
		.xlabel = "forced NUMA nodes (TALLY_NODES)",
		.ylabel = "ns of CPU time per add, per worker",
		.x = BENCH_F_RATIO0, .y = BENCH_F_NS, .profile = "update",
		.pinned = -1 });
	bench_plot_add(&d, &(struct bench_plot){
		.file = "pernode-read",
		.title = "pernode: a fetch of a counter every CPU wrote (lower "
			 "is better)",
		.xlabel = "forced NUMA nodes (TALLY_NODES)",
		.ylabel = "ns per fetch",
		.x = BENCH_F_RATIO0, .y = BENCH_F_NS, .profile = "read",
		.pinned = -1 });
	bench_plot_add(&d, &(struct bench_plot){
		.file = "pernode-flow-memory",
		.title = "pernode: memory per flow, each updated by one CPU "
			 "(lower is better)",
		.xlabel = "forced NUMA nodes (TALLY_NODES)",
		.ylabel = "resident bytes per flow of {packets, bytes} (log)",
		.x = BENCH_F_RATIO0, .y = BENCH_F_BYTES, .profile = "flows",
		.pinned = -1, .logy = 1 });

	if (o->json) {
		bench_print_json(&d, o, stdout);
	} else {
		printf("tally-bench pernode: %u worker%s pinned on CPUs %s, "
		       "%llu adds each; %zu flows x %u packets; %u run%s per "
		       "row; nodes forced to 1, 2, 4 in children\n", ncpu,
		       ncpu > 1 ? "s" : "", bench_cpu_list(),
		       (unsigned long long)n, F, PACKETS_PER_FLOW, o->repeat,
		       o->repeat > 1 ? "s" : "");
		if (o->no_child)
			printf("(--no-child: only this process's %u node%s)\n",
			       real_nodes, real_nodes > 1 ? "s" : "");
		printf("ns/op: CPU time per add (update), per fetch (read) or "
		       "per flow update of {packets, bytes} (flows), median;\n"
		       "x percpu: ns/op / tally percpu's at the same nodes; "
		       "B/flow: resident memory per flow (median of the runs)\n\n");
		printf("%-28s %-6s %5s %3s %5s %9s %9s %8s %8s  %s\n", "config",
		       "prof", "nodes", "thr", "slabs", "ns/op", "Mops/s",
		       "x percpu", "B/flow", "check");
		for (unsigned i = 0; i < d.nrows; i++) {
			const struct bench_row *r = &d.rows[i];
			char ns[16], mops[16], xp[16], by[16], nd[8];

			snprintf(nd, sizeof(nd), isnan(r->ratio[0]) ? "-" :
				 "%.0f", r->ratio[0]);
			snprintf(ns, sizeof(ns), r->n ? "%.2f" : "-",
				 r->ns_st.median);
			snprintf(mops, sizeof(mops), r->n ? "%.1f" : "-",
				 r->rate_st.median);
			snprintf(xp, sizeof(xp), isnan(r->ratio[1]) ? "-" :
				 "%.2f", r->ratio[1]);
			snprintf(by, sizeof(by), isnan(r->bytes) ? "-" : "%.1f",
				 r->bytes);
			if (i > 0 && (strcmp(d.rows[i - 1].profile, r->profile) ||
				      (r->n && (int)d.rows[i - 1].ratio[0] !=
						       (int)r->ratio[0]) ||
				      (!r->n && d.rows[i - 1].n)))
				printf("\n");
			printf("%-28s %-6s %5s %3u %5u %9s %9s %8s %8s  %s%s%s\n",
			       r->config, r->profile, nd, r->threads, r->slabs,
			       ns, mops, xp, by,
			       !r->checked ? "-" : r->observed == r->expected &&
			       !r->failed ? "ok" : "LOST", r->note[0] ? "  " : "",
			       r->note);
		}
		printf("\nnote: this machine has %u NUMA node%s and %u CPU%s; "
		       "forced nodes map CPU c to node c mod N,\nbut memory "
		       "is not placed on nodes, so a remote node's cost cannot "
		       "show, and with 4 nodes\nonly %u of them have a CPU "
		       "here.\n", real_nodes ? real_nodes : 1,
		       real_nodes > 1 ? "s" : "", ncpu, ncpu > 1 ? "s" : "",
		       ncpu < 4 ? ncpu : 4);
		bench_print_summary(&d);
	}
	return bench_finish(&d, o, "a correctness check failed"
			    " (see the check and note columns)",
			    child_rc == 1);
}
