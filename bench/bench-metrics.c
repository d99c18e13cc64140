/*
 * bench-metrics.c: `tally-bench metrics`, the cost of named series.
 *
 *   register+remove  one series with a per-connection label registered
 *                    and removed again (tc inserts per-CPU counters at
 *                    ~200k rules/s: the rate to reach);
 *   observe          a histogram observation next to a counter add;
 *   family get       the lookup of a family's child that exists (two
 *                    variable labels, method and code, over 8 children),
 *                    alone and followed by an add, next to a counter add
 *                    (target: <= 50 ns for the lookup);
 *   reader pass      tally_seg_foreach over N series (default 10^6), from
 *                    another process, as the exporter would;
 *   writer + reader  one writer adding to all N series, pinned to one
 *                    CPU, alone and while a reader process pinned to the
 *                    other CPU scans the segment in a loop; and, as the
 *                    control, while a process that touches no tally
 *                    memory spins on the other CPU (what any busy
 *                    neighbour costs, on a machine whose CPUs share a
 *                    core or caches).
 *
 * Times are per-thread CPU time (the machine is shared), medians of
 * --repeat runs, with the baselines of each row measured in the same run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "tally/tally.h"
#include "tally/reader.h"

struct mrow {
	const char *what, *unit;
	double v[BENCH_MAX_REPEAT];
	unsigned n;
	struct bench_stats st;
};

static void mrow_finish(struct mrow *r)
{
	bench_stats(r->v, r->n, &r->st);
}

/* A description of series @id of @name, with one label (in @v). */
static struct tally_metric_desc describe(const char *name, uint64_t id,
					 struct tally_label *l, char v[24])
{
	struct tally_metric_desc d = { 0 };

	snprintf(v, 24, "%" PRIu64, id);
	l->name = "conn";
	l->value = v;
	d.name = name;
	d.help = "Requests of one connection.";
	d.labels = l;
	d.nlabels = 1;
	return d;
}

static int reg_counter(struct tally_zone *z, const char *name, uint64_t id,
		       tally_counter *c)
{
	struct tally_label l;
	char v[24];
	struct tally_metric_desc d = describe(name, id, &l, v);

	return tally_counter_register(z, &d, c);
}

static int reg_histogram(struct tally_zone *z, const char *name,
			 uint64_t id, tally_histogram *h)
{
	struct tally_label l;
	char v[24];
	struct tally_metric_desc d = describe(name, id, &l, v);

	return tally_histogram_register(z, &d, h);
}

/* ns per register+remove pair, @n pairs. */
static double run_register(struct tally_zone *z, uint64_t n)
{
	uint64_t t0 = bench_thread_cpu_ns();
	tally_counter c;

	for (uint64_t i = 0; i < n; i++) {
		if (reg_counter(z, "bench_conn_requests_total", i, &c) ||
		    tally_metric_remove(&c.metric))
			bench_die("register/remove: %s", tally_errmsg());
	}
	return (double)(bench_thread_cpu_ns() - t0) / (double)n;
}

/* ns per add to one counter, @n adds. */
static double run_adds(const tally_counter *c, uint64_t n)
{
	uint64_t t0 = bench_thread_cpu_ns();

	for (uint64_t i = 0; i < n; i++)
		tally_counter_add(c, 1);
	return (double)(bench_thread_cpu_ns() - t0) / (double)n;
}

/* The children the family rows look up, in turn. */
static const char *const family_keys[8][2] = {
	{ "GET", "200" }, { "GET", "404" }, { "POST", "200" },
	{ "GET", "500" }, { "PUT", "201" }, { "GET", "304" },
	{ "POST", "400" }, { "DELETE", "204" },
};

/* ns per lookup of an existing child of @f, @n lookups, each followed by
 * an add when @add. */
static double run_family(const tally_counter_family *f, uint64_t n, int add)
{
	uint64_t t0 = bench_thread_cpu_ns();
	uintptr_t sink = 0;

	for (uint64_t i = 0; i < n; i++) {
		const tally_counter *c;

		tally_counter_family_get(f, family_keys[i & 7], 2, &c);
		if (add)
			tally_counter_add(c, 1);
		sink ^= (uintptr_t)c;
	}
	t0 = bench_thread_cpu_ns() - t0;
	if (sink == 1)
		printf("\n"); /* keeps the lookups */
	return (double)t0 / (double)n;
}

/* ns per observation of one histogram, @n observations. */
static double run_observes(const tally_histogram *h, uint64_t n)
{
	uint64_t t0 = bench_thread_cpu_ns();

	for (uint64_t i = 0; i < n; i++)
		tally_histogram_observe(h, (i * 2654435761u) & 0xfffff);
	return (double)(bench_thread_cpu_ns() - t0) / (double)n;
}

static int count_series(const struct tally_series_view *v, void *arg)
{
	(void)v;
	++*(uint64_t *)arg;
	return 0;
}

/* ms (wall) of one full reader pass over the zone's segment. */
static double run_pass(const char *path, uint64_t want)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	uint64_t seen = 0, t0;
	int rc;

	if (!s)
		bench_die("%s", tally_errmsg());
	t0 = bench_now_ns();
	rc = tally_seg_foreach(s, 0, count_series, &seen);
	t0 = bench_now_ns() - t0;
	tally_seg_close(s);
	if (rc < 0)
		bench_die("%s", tally_errmsg());
	if (seen != want)
		bench_die("reader pass saw %" PRIu64 " series, not %" PRIu64,
			  seen, want);
	return (double)t0 / 1e6;
}

/* A reader process: pinned to @cpu, scans @path until killed. */
static pid_t start_reader(const char *path, int cpu)
{
	pid_t pid = fork();

	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		struct tally_seg *s;
		uint64_t seen;

		bench_pin(cpu);
		s = tally_seg_open(path, NULL);
		if (!s)
			_exit(1);
		for (;;) {
			seen = 0;
			if (tally_seg_foreach(s, 0, count_series, &seen) < 0)
				_exit(1);
		}
	}
	return pid;
}

/* A busy neighbour: pinned to @cpu, an integer loop on its own stack
 * until killed. */
static pid_t start_spinner(int cpu)
{
	pid_t pid = fork();

	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		volatile uint64_t x = 1;

		bench_pin(cpu);
		for (;;)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	}
	return pid;
}

/* ns (CPU) per add of a writer that walks all @n series @rounds times. */
static double run_writer(const tally_counter *m, uint64_t n, unsigned rounds)
{
	uint64_t t0 = bench_thread_cpu_ns();

	for (unsigned r = 0; r < rounds; r++)
		for (uint64_t i = 0; i < n; i++)
			tally_counter_add(&m[i], 1);
	return (double)(bench_thread_cpu_ns() - t0) / ((double)n * rounds);
}

static void print_row(const struct mrow *r, const char *ratio)
{
	printf("%-34s %4u %10.2f %10.2f %10.2f  %-6s %s\n", r->what, r->n,
	       r->st.min, r->st.median, r->st.max, r->unit, ratio);
}

static void json_row(FILE *f, const struct mrow *r, int last)
{
	bench_json_sample(f, r->what, r->unit, r->v, r->n, &r->st, last);
}

/* The JSON document: rows measured, and every target, null (with a note
 * saying why) when it was not measured. */
static void json_doc(FILE *f, const struct mrow *rows, unsigned nrows,
		     const struct bench_doc *d, uint64_t nseries)
{
	unsigned last = 0;

	for (unsigned i = 0; i < nrows; i++)
		if (rows[i].n)
			last = i;
	fprintf(f, "{\n  \"bench\": \"metrics\",\n  \"series\": %" PRIu64
		",\n  \"rows\": [\n", nseries);
	for (unsigned i = 0; i < nrows; i++)
		if (rows[i].n)
			json_row(f, &rows[i], i == last);
	bench_json_targets_end(f, d);
}

int bench_metrics(const struct bench_opts *o)
{
	uint64_t nseries = o->series, pairs = o->quick ? 50000 : 200000;
	uint64_t updates = o->quick ? 2000000 : 20000000;
	struct tally_zone_opts zo = { 0 };
	struct tally_zone *z;
	struct bench_doc *d = calloc(1, sizeof(*d));
	struct mrow rows[9] = {
		{ .what = "register+remove pair", .unit = "ns" },
		{ .what = "counter add", .unit = "ns" },
		{ .what = "histogram observe", .unit = "ns" },
		{ .what = "reader pass", .unit = "ms" },
		{ .what = "writer add, no reader", .unit = "ns" },
		{ .what = "writer add, reader scanning", .unit = "ns" },
		{ .what = "family get, 2 labels", .unit = "ns" },
		{ .what = "family get + counter add", .unit = "ns" },
		{ .what = "writer add, busy neighbour", .unit = "ns" },
	};
	static const char *const family_labels[] = { "method", "code" };
	tally_counter_family fam;
	tally_counter *m, c;
	tally_histogram h;
	int cpus[2], ncpu;
	unsigned rounds;
	char name[64];

	if (!d)
		bench_die("out of memory");
	bench_progress_init(o, "metrics");
	ncpu = (int)bench_cpus(cpus, 2);
	zo.capacity = nseries + nseries / 4 + 65536;
	zo.max_series = nseries + 1024;
	snprintf(name, sizeof(name), "bench-metrics-%d", (int)getpid());
	z = tally_zone_create(name, &zo);
	if (!z)
		bench_die("zone: %s", tally_errmsg());
	m = calloc(nseries, sizeof(*m));
	if (!m)
		bench_die("out of memory");
	bench_pin(cpus[0]);

	/* Single-thread costs, interleaved run by run. */
	if (reg_counter(z, "bench_counter_total", 0, &c) ||
	    reg_histogram(z, "bench_latency_ns", 0, &h))
		bench_die("register: %s", tally_errmsg());
	{
		struct tally_metric_desc fd = { 0 };
		const tally_counter *child;

		fd.name = "bench_http_requests_total";
		fd.help = "Requests by method and code.";
		if (tally_counter_family_register(z, &fd, family_labels, 2,
						  &fam))
			bench_die("family: %s", tally_errmsg());
		for (unsigned i = 0; i < 8; i++)
			if (tally_counter_family_get(&fam, family_keys[i], 2,
						     &child))
				bench_die("family child: %s", tally_errmsg());
	}
	for (unsigned r = 0; r < o->repeat; r++) {
		bench_progress("single-thread costs, run %u/%u", r + 1,
			       o->repeat);
		rows[0].v[rows[0].n++] = run_register(z, pairs);
		rows[1].v[rows[1].n++] = run_adds(&c, updates);
		rows[2].v[rows[2].n++] = run_observes(&h, updates);
		rows[6].v[rows[6].n++] = run_family(&fam, updates, 0);
		rows[7].v[rows[7].n++] = run_family(&fam, updates, 1);
	}

	/* N series, each written once, then read. */
	for (uint64_t i = 0; i < nseries; i++) {
		if (i % 100000 == 0)
			bench_progress("registering %" PRIu64 "/%" PRIu64
				       " series", i, nseries);
		if (reg_counter(z, "bench_conn_requests_total", i, &m[i]))
			bench_die("register %" PRIu64 ": %s", i, tally_errmsg());
		tally_counter_add(&m[i], 1);
	}
	for (unsigned r = 0; r < o->repeat; r++) {
		bench_progress("reader pass %u/%u", r + 1, o->repeat);
		rows[3].v[rows[3].n++] = run_pass(tally_zone_path(z),
						  nseries + 2 + 8);
	}

	/* The writer alone, then with a reader scanning on the other CPU. */
	rounds = nseries >= 1000000 ? 3 : (unsigned)(3000000 / nseries + 1);
	for (unsigned r = 0; r < o->repeat && ncpu >= 2; r++) {
		pid_t reader;
		int status;

		bench_progress("writer with and without a reader %u/%u", r + 1,
			       o->repeat);
		rows[4].v[rows[4].n++] = run_writer(m, nseries, rounds);
		reader = start_reader(tally_zone_path(z), cpus[1]);
		usleep(20000);
		rows[5].v[rows[5].n++] = run_writer(m, nseries, rounds);
		kill(reader, SIGKILL);
		waitpid(reader, &status, 0);
		reader = start_spinner(cpus[1]);
		usleep(20000);
		rows[8].v[rows[8].n++] = run_writer(m, nseries, rounds);
		kill(reader, SIGKILL);
		waitpid(reader, &status, 0);
	}
	bench_progress_done();

	for (unsigned i = 0; i < 9; i++)
		if (rows[i].n)
			mrow_finish(&rows[i]);

	{
		double pairs_s = 1e9 / rows[0].st.median;
		double obs = rows[2].st.median / rows[1].st.median;
		double w = rows[4].n ? rows[4].st.median / rows[5].st.median : NAN;
		double wn = rows[4].n ? rows[4].st.median / rows[8].st.median : NAN;
		double wr = rows[4].n ? rows[8].st.median / rows[5].st.median : NAN;

		bench_target(d, "register+remove pairs per second, 1 thread",
			     ">=", 200000, pairs_s, "/s");
		bench_target(d, "family get of an existing child", "<=", 50,
			     rows[6].st.median, "ns");
		bench_target(d, "reader pass over the series", "<=", 100,
			     nseries >= 1000000 ? rows[3].st.median : NAN, "ms");
		if (nseries < 1000000)
			bench_target_note(d, "the target is for 10^6 series; this "
					  "run had %" PRIu64 " (--series)", nseries);
		bench_target(d, "writer throughput with a reader / without",
			     ">=", 0.95, w, "x");
		if (!rows[4].n)
			bench_target_note(d, "needs two CPUs (the reader runs on "
					  "the other one)");
		else if (wn < 0.95)
			bench_target_note(d, "a busy neighbour that touches no "
					  "tally memory costs as much: %.3fx "
					  "(the CPUs share a core or caches)", wn);
		bench_target(d, "writer throughput with a reader / with a busy "
			     "neighbour", ">=", 0.95, wr, "x");
		if (!rows[4].n)
			bench_target_note(d, "needs two CPUs");
		snprintf(d->summary, sizeof(d->summary),
			 "metrics series=%" PRIu64 " register_remove_per_s=%.0f "
			 "counter_add_ns=%.2f observe_ns=%.2f observe_vs_add=%.2fx "
			 "family_get_ns=%.2f family_get_add_ns=%.2f "
			 "reader_pass_ms=%.1f writer_with_reader=%.3fx "
			 "writer_with_neighbour=%.3fx",
			 nseries, pairs_s, rows[1].st.median,
			 rows[2].st.median, obs, rows[6].st.median,
			 rows[7].st.median, rows[3].st.median, w, wn);

		if (o->json)
			json_doc(stdout, rows, 9, d, nseries);
		{
			FILE *f = bench_out_open(o, "metrics.json");

			if (f) {
				json_doc(f, rows, 9, d, nseries);
				fclose(f);
			}
		}
		if (o->json) {
			/* printed above */
		} else {
			printf("tally-bench metrics: %" PRIu64 " series, %u runs "
			       "each (per-thread CPU time; reader pass: wall)\n",
			       nseries, o->repeat);
			printf("%-34s %4s %10s %10s %10s  %-6s %s\n", "what", "runs",
			       "min", "median", "max", "unit", "ratio");
			print_row(&rows[0], "");
			print_row(&rows[1], "");
			{
				char ratio[32];

				snprintf(ratio, sizeof(ratio), "%.2fx counter add",
					 obs);
				print_row(&rows[2], ratio);
				snprintf(ratio, sizeof(ratio), "%.2fx counter add",
					 rows[6].st.median / rows[1].st.median);
				print_row(&rows[6], ratio);
				snprintf(ratio, sizeof(ratio), "%.2fx counter add",
					 rows[7].st.median / rows[1].st.median);
				print_row(&rows[7], ratio);
			}
			print_row(&rows[3], "");
			if (rows[4].n) {
				char ratio[32];

				print_row(&rows[4], "");
				snprintf(ratio, sizeof(ratio), "%.3fx alone", w);
				print_row(&rows[5], ratio);
				snprintf(ratio, sizeof(ratio), "%.3fx alone", wn);
				print_row(&rows[8], ratio);
			}
			bench_print_targets(d, stdout);
			bench_print_summary(d);
		}
	}
	for (uint64_t i = 0; i < nseries; i++)
		tally_metric_remove(&m[i].metric);
	tally_family_remove(&fam.family);
	free(m);
	tally_zone_destroy(z);
	free(d);
	return 0;
}
