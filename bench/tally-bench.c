/*
 * tally-bench.c: the driver of tally-bench, which reproduces the seed
 * experiments (FreeBSD counter(9), Linux tc / pcpu_alloc) with their
 * baselines measured in the same run.  See tally-bench(1).
 *
 * Exit status: 0 when every correctness check passed (whether or not the
 * performance targets were met), 1 when a check failed or the benchmark
 * could not run, 2 for a usage error.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

static const char usage_text[] =
"usage: tally-bench counter [--adds N] [--threads T] [--sweep LIST] [options]\n"
"       tally-bench alloc [--blocks M] [--batch B] [--threads T]\n"
"                         [--mem-counters K] [--slabs S] [options]\n"
"       tally-bench metrics [--series N] [options]\n"
"       tally-bench exporter [--series N] [--exporter PATH] [options]\n"
"       tally-bench oversub [--adds N] [--threads T] [options]\n"
"       tally-bench pernode|falseshare|inflight|wakeup [--adds N] [options]\n"
"       tally-bench all [--sweep LIST] [--plot DIR] [options]\n"
"\n"
"Reproduce the experiments behind libtally, each next to its baselines\n"
"measured in the same run:\n"
"  counter  FreeBSD counter(9): one worker per CPU adds to one shared\n"
"           counter: tally (percpu, percpu fallback, shared, adaptive,\n"
"           pernode) vs a thread-local add, one shared atomic, a racy +=\n"
"           and sched_getcpu()-indexed atomics; ministat-style differences\n"
"           at 95% confidence against each baseline.\n"
"  alloc    Linux tc: threads allocate and free per-CPU counters for rules\n"
"           of 1 and 2 actions: tally vs a pcpu_alloc-like allocator with\n"
"           one global mutex; alloc+free pair loop; memory per counter;\n"
"           again with 256 forced slabs.\n"
"  metrics  named series: register+remove rate, histogram observe and a\n"
"           family's child lookup vs a counter add, a reader pass over\n"
"           N series, and a writer's\n"
"           throughput while a reader process scans in a loop.\n"
"  exporter tally-exporter: 8 writer processes, N series in all, scraped\n"
"           over HTTP (gzip off and on): scrape time, bytes per series,\n"
"           the exporter's peak RSS; the writers' adds scraped every\n"
"           100 ms vs unscraped; an --aggregate scrape before and after\n"
"           K workers exited (their segments gone; counts kept exactly).\n"
"  oversub  1..T threads (default 64) on this machine's CPUs add to one\n"
"           counter: tally percpu vs per-thread counters vs one shared\n"
"           atomic: throughput, and memory per counter as threads grow.\n"
"  pernode  OVS flow stats: update and read cost of tally percpu, pernode\n"
"           and shared with 1, 2 and 4 forced NUMA nodes (re-executed\n"
"           children, TALLY_NODES), and memory per flow of many flows\n"
"           each updated by one CPU.\n"
"  falseshare  per-thread counters packed in one cache line vs padded vs\n"
"           tally percpu; the slowdown factor of packing.\n"
"  inflight an in-flight gauge (+1 on submit, -1 on complete) around a\n"
"           request of fixed work: none vs one shared atomic vs tally\n"
"           percpu; requests/s and the share of CPU spent on accounting.\n"
"  wakeup   3 writer threads update stats (under a mutex, or tally) and\n"
"           signal an eventfd that 1 reader waits for in epoll: events/s,\n"
"           context switches, rescheduling interrupts (RES), PREEMPT_RT.\n"
"  all      every scenario above, one after the other (each in a process\n"
"           of its own: one that fails does not stop the others).\n"
"\n"
"options:\n"
"  --adds N          counter: adds per worker (default 10^7; --quick 10^6);\n"
"                    oversub, pernode, falseshare, inflight, wakeup: the\n"
"                    operations per run (see tally-bench(1) for defaults)\n"
"  --threads T       counter: workers (default: one per CPU);\n"
"                    alloc: the larger thread count (default 2);\n"
"                    oversub: the largest thread count (default 64)\n"
"  --sweep LIST      counter: more worker counts, pinned round-robin\n"
"                    (e.g. 1,2,4,8: above the CPUs, oversubscribed)\n"
"  --blocks M        alloc: blocks allocated and freed per thread\n"
"                    (default 10^6; --quick 10^5)\n"
"  --batch B         alloc: rules allocated before they are freed (1000)\n"
"  --mem-counters K  alloc: counters of the memory test (65536; --quick 16384)\n"
"  --slabs S         alloc: forced slab count of the child run (256; 0: skip)\n"
"  --series N        metrics: series of the reader tests (default 10^6;\n"
"                    --quick 10^5); exporter: series in all (default\n"
"                    10^5; --quick 10^4)\n"
"  --exporter PATH   exporter: the tally-exporter binary (default: found\n"
"                    next to tally-bench in the build tree)\n"
"  --repeat R        runs per configuration, 1 to 100 (default 5; --quick 3)\n"
"  --quick           a few-second version (fewer adds, blocks and runs)\n"
"  --json            print the results as one JSON document (all: an\n"
"                    array); a figure not measured is null, and its\n"
"                    target's \"note\" says why\n"
"  --plot DIR        write DIR/<scenario>.json and PNG charts (with the\n"
"                    .dat and .gp files gnuplot draws them from); needs\n"
"                    gnuplot (apt-get install gnuplot-nox)\n"
"  --no-child        skip the re-executed runs (fallback, forced slabs,\n"
"                    forced nodes)\n"
"  --quiet           no progress on stderr (shown only on a terminal:\n"
"                    scenario, run i/n, ETA)\n"
"  -h, --help        print this help\n"
"\n"
"Numbers may be written 10000000, 1e7, 10^7 or 10M (k, M, G: 10^3, 10^6,\n"
"10^9).  `make bench` runs `all --sweep 1,2,4,8 --plot build/bench-results`.\n"
"The program exits 0 whether or not the targets were met, 1 when\n"
"an exact total was wrong or the benchmark could not run, 2 on bad usage.\n";

static void usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "tally-bench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'tally-bench --help'.\n");
	exit(2);
}

/* A whole number in [lo, hi]: 123, 1e7, 10^7, 10M. */
static uint64_t parse_count(const char *opt, const char *s, uint64_t lo,
			    uint64_t hi)
{
	const char *p = s;
	double v;
	char *end;
	char msg[200];

	if (!s || !*s)
		goto bad;
	for (; *p; p++)
		if (!(isdigit((unsigned char)*p) || strchr("eE^.kMG", *p)))
			goto bad;
	if (!isdigit((unsigned char)s[0]))
		goto bad;
	errno = 0;
	if ((p = strchr(s, '^'))) {
		char *e2;
		double base = strtod(s, &end), ex;

		if (end != p)
			goto bad;
		ex = strtod(p + 1, &e2);
		if (*e2 || e2 == p + 1 || ex > 30)
			goto bad;
		v = pow(base, ex);
	} else {
		v = strtod(s, &end);
		if (end == s)
			goto bad;
		if (*end == 'k' && !end[1])
			v *= 1e3;
		else if (*end == 'M' && !end[1])
			v *= 1e6;
		else if (*end == 'G' && !end[1])
			v *= 1e9;
		else if (*end)
			goto bad;
	}
	if (errno || !(v >= (double)lo && v <= (double)hi) || v != floor(v))
		goto bad;
	return (uint64_t)v;
bad:
	snprintf(msg, sizeof(msg), "%s: '%%s' is not a whole number from %llu "
		 "to %llu", opt, (unsigned long long)lo, (unsigned long long)hi);
	usage_error(msg, s ? s : "");
	return 0;
}

enum {
	O_ADDS = 256, O_THREADS, O_BLOCKS, O_BATCH, O_MEM, O_SLABS, O_REPEAT,
	O_QUICK, O_JSON, O_NOCHILD, O_QUIET, O_CHILD, O_SERIES, O_EXPORTER,
	O_SWEEP, O_PLOT,
};

/* bench-exporter.c */
extern const char *bench_exporter_path;
int bench_exporter(const struct bench_opts *o);

/*
 * The options a scenario takes beyond the common ones (--repeat, --quick,
 * --json, --plot, --no-child, --quiet), one bit each, in the order of
 * opt_names[].
 */
enum {
	T_ADDS = 1 << 0, T_THREADS = 1 << 1, T_SWEEP = 1 << 2,
	T_BLOCKS = 1 << 3, T_BATCH = 1 << 4, T_MEM = 1 << 5, T_SLABS = 1 << 6,
	T_SERIES = 1 << 7, T_EXPORTER = 1 << 8,
};
static const char *const opt_names[] = {
	"--adds", "--threads", "--sweep", "--blocks", "--batch",
	"--mem-counters", "--slabs", "--series", "--exporter",
};
#define NOPTS (sizeof(opt_names) / sizeof(opt_names[0]))

/*
 * The defaults that differ between scenarios.  A scenario run straight
 * from the table picks its own defaults for what is left 0 (adds,
 * threads, series).
 */
static int run_counter(const struct bench_opts *o)
{
	struct bench_opts c = *o;

	if (!c.adds)
		c.adds = c.quick ? 1000000 : 10000000;
	return bench_counter(&c);
}

static int run_alloc(const struct bench_opts *o)
{
	struct bench_opts c = *o;

	if (!c.threads)
		c.threads = 2;
	return bench_alloc(&c);
}

static int run_metrics(const struct bench_opts *o)
{
	struct bench_opts c = *o;

	if (!c.series)
		c.series = c.quick ? 100000 : 1000000;
	return bench_metrics(&c);
}

static int run_exporter(const struct bench_opts *o)
{
	struct bench_opts c = *o;

	if (!c.series)
		c.series = c.quick ? 10000 : 100000;
	if (c.series < 8)
		usage_error("exporter: --series must be %s or more", "8");
	return bench_exporter(&c);
}

/*
 * The scenarios.  `tally-bench NAME` runs one; `tally-bench all` (and
 * `make bench`) runs every one registered here, in this order: a new
 * scenario joins both by a line here (and its file in CMakeLists.txt,
 * its section in tally-bench(1) and its fields in check-json.py).  A
 * scenario that fills a bench_doc gets --json, --plot DIR (its JSON and
 * the charts it declares with bench_plot_add()) through
 * bench_print_json() and bench_save().
 */
static const struct scenario {
	const char *name;
	int (*run)(const struct bench_opts *o);
	unsigned takes;        /* T_* options beyond the common ones */
	const char *child;     /* the hidden --child kinds it accepts,
				  separated by commas */
} scenarios[] = {
	{ "counter", run_counter, T_ADDS | T_THREADS | T_SWEEP,
	  "fallback,nodes" },
	{ "alloc", run_alloc,
	  T_THREADS | T_BLOCKS | T_BATCH | T_MEM | T_SLABS, "slabs" },
	{ "metrics", run_metrics, T_SERIES, NULL },
	{ "exporter", run_exporter, T_SERIES | T_EXPORTER, NULL },
	{ "oversub", bench_oversub, T_ADDS | T_THREADS, NULL },
	{ "pernode", bench_pernode, T_ADDS, "nodes" },
	{ "falseshare", bench_falseshare, T_ADDS, NULL },
	{ "inflight", bench_inflight, T_ADDS, NULL },
	{ "wakeup", bench_wakeup, T_ADDS, NULL },
};
/* all: every option but --threads, each passed to the scenarios that
 * take it. */
#define ALL_TAKES (T_ADDS | T_SWEEP | T_BLOCKS | T_BATCH | T_MEM | T_SLABS | \
		   T_SERIES | T_EXPORTER)
#define NSCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

/* Is @kind one of the comma-separated kinds of @list? */
static int child_kind_ok(const char *list, const char *kind)
{
	size_t n = strlen(kind);

	for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, kind, n) == 0 && (p[n] == ',' || p[n] == 0))
			return 1;
	return 0;
}

static const struct option longopts[] = {
	{ "adds", required_argument, NULL, O_ADDS },
	{ "series", required_argument, NULL, O_SERIES },
	{ "exporter", required_argument, NULL, O_EXPORTER },
	{ "threads", required_argument, NULL, O_THREADS },
	{ "sweep", required_argument, NULL, O_SWEEP },
	{ "blocks", required_argument, NULL, O_BLOCKS },
	{ "batch", required_argument, NULL, O_BATCH },
	{ "mem-counters", required_argument, NULL, O_MEM },
	{ "slabs", required_argument, NULL, O_SLABS },
	{ "repeat", required_argument, NULL, O_REPEAT },
	{ "quick", no_argument, NULL, O_QUICK },
	{ "json", no_argument, NULL, O_JSON },
	{ "plot", required_argument, NULL, O_PLOT },
	{ "no-child", no_argument, NULL, O_NOCHILD },
	{ "quiet", no_argument, NULL, O_QUIET },
	{ "child", required_argument, NULL, O_CHILD },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* --sweep 1,2,4,8 */
static void parse_sweep(const char *arg, struct bench_opts *o)
{
	char buf[256], *save, *tok;

	if (snprintf(buf, sizeof(buf), "%s", arg) >= (int)sizeof(buf))
		usage_error("--sweep: '%s' is too long", arg);
	o->nsweep = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nsweep >= BENCH_MAX_SWEEP)
			usage_error("--sweep: more than 16 counts in '%s'", arg);
		o->sweep[o->nsweep++] = (unsigned)parse_count(
			"--sweep", tok, 1, BENCH_MAX_THREADS);
	}
	if (!o->nsweep)
		usage_error("--sweep: '%s' has no thread count", arg);
}

/*
 * One scenario of `all` in a process of its own, so that one that dies
 * (bench_die() exits) does not stop the others.  With --json its output
 * is collected, and a scenario that printed nothing becomes an object
 * that says so, to keep the array valid.
 */
static int run_isolated(const struct scenario *sc, const struct bench_opts *o)
{
	int pfd[2] = { -1, -1 }, status;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	if (o->json && pipe(pfd) < 0)
		bench_die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		if (o->json) {
			dup2(pfd[1], 1);
			close(pfd[0]);
			close(pfd[1]);
		}
		exit(sc->run(o));
	}
	if (o->json) {
		close(pfd[1]);
		for (;;) {
			ssize_t got;

			if (len + 4096 > cap) {
				char *nb = realloc(buf, cap = cap * 2 + 65536);

				if (!nb)
					bench_die("out of memory");
				buf = nb;
			}
			got = read(pfd[0], buf + len, cap - len);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				break;
			len += (size_t)got;
		}
		close(pfd[0]);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (o->json) {
		while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
			len--;
		if (len && buf[0] == '{')
			fwrite(buf, 1, len, stdout);
		else
			printf("{\"bench\":\"%s\",\"ok\":false,\"note\":"
			       "\"the scenario printed no results (see its "
			       "error on stderr)\"}", sc->name);
		free(buf);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) <= 1)
		return WEXITSTATUS(status);
	fprintf(stderr, "tally-bench all: %s failed (%s %d)\n", sc->name,
		WIFEXITED(status) ? "exit status" : "signal",
		WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	return 1;
}

/* A usage error for an option @sub does not take, naming what it takes. */
static void not_taken(const char *sub, unsigned takes, unsigned given)
{
	char msg[512];
	size_t len;
	unsigned bad = 0;

	for (unsigned i = 0; i < NOPTS; i++)
		if ((given & ~takes) & (1u << i)) {
			bad = i;
			break;
		}
	len = (size_t)snprintf(msg, sizeof(msg), "%s: %s is not an option of "
			       "%s, which takes ", sub, opt_names[bad], sub);
	for (unsigned i = 0, n = 0; i < NOPTS; i++)
		if (takes & (1u << i))
			len += (size_t)snprintf(msg + len, sizeof(msg) - len,
						"%s%s", n++ ? ", " : "",
						opt_names[i]);
	snprintf(msg + len, sizeof(msg) - len, " and the common options");
	usage_error("%s", msg);
}

int main(int argc, char **argv)
{
	struct bench_opts o = { 0 };
	const struct scenario *sc = NULL;
	const char *sub;
	int is_all, rc = 0, c;
	unsigned given = 0;

	if (argc < 2) {
		fputs(usage_text, stderr);
		return 2;
	}
	sub = argv[1];
	if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 ||
	    strcmp(sub, "help") == 0) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (strcmp(sub, "_loop") == 0) /* hidden: for bench/callgrind.sh */
		return bench_loop(argc - 2, argv + 2);
	if (strcmp(sub, "_steps") == 0) /* hidden: docs/RESULTS.md */
		return bench_steps(argc - 2, argv + 2);
	for (unsigned i = 0; i < NSCENARIOS; i++)
		if (strcmp(sub, scenarios[i].name) == 0)
			sc = &scenarios[i];
	is_all = strcmp(sub, "all") == 0;
	if (!sc && !is_all) {
		char names[256];
		size_t len = 0;

		for (unsigned i = 0; i < NSCENARIOS; i++)
			len += (size_t)snprintf(names + len, sizeof(names) - len,
						"%s, ", scenarios[i].name);
		snprintf(names + len, sizeof(names) - len, "or all");
		fprintf(stderr, "tally-bench: unknown subcommand '%s' (expected "
			"%s)\nTry 'tally-bench --help'.\n", sub, names);
		return 2;
	}

	opterr = 0;
	optind = 2;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case O_ADDS:
			o.adds = parse_count("--adds", optarg, 1, 10000000000ull);
			given |= T_ADDS;
			break;
		case O_THREADS:
			o.threads = (unsigned)parse_count("--threads", optarg, 1,
							  BENCH_MAX_THREADS);
			given |= T_THREADS;
			break;
		case O_SWEEP:
			parse_sweep(optarg, &o);
			given |= T_SWEEP;
			break;
		case O_PLOT:
			if (!*optarg)
				usage_error("--plot needs a directory%s", "");
			o.plot_dir = optarg;
			break;
		case O_BLOCKS:
			o.blocks = parse_count("--blocks", optarg, 100,
					       1000000000ull);
			given |= T_BLOCKS;
			break;
		case O_BATCH:
			o.batch = parse_count("--batch", optarg, 1, 1000000);
			given |= T_BATCH;
			break;
		case O_MEM:
			o.mem_counters = parse_count("--mem-counters", optarg, 2,
						     1u << 24);
			o.mem_counters += o.mem_counters & 1;
			given |= T_MEM;
			break;
		case O_SLABS:
			o.slabs = (unsigned)parse_count("--slabs", optarg, 0, 4096);
			given |= T_SLABS;
			break;
		case O_REPEAT:
			o.repeat = (unsigned)parse_count("--repeat", optarg, 1,
							 BENCH_MAX_REPEAT);
			break;
		case O_SERIES:
			o.series = parse_count("--series", optarg, 1, 16000000);
			given |= T_SERIES;
			break;
		case O_EXPORTER:
			bench_exporter_path = optarg;
			given |= T_EXPORTER;
			break;
		case O_QUICK:
			o.quick = 1;
			break;
		case O_JSON:
			o.json = 1;
			break;
		case O_NOCHILD:
			o.no_child = 1;
			break;
		case O_QUIET:
			o.quiet = 1;
			break;
		case O_CHILD:
			o.child = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case ':':
			usage_error("option '%s' needs a value", argv[optind - 1]);
			break;
		default:
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (given & ~(sc ? sc->takes : ALL_TAKES))
		not_taken(sub, sc ? sc->takes : ALL_TAKES, given);
	if (o.child && (!sc || !sc->child || !child_kind_ok(sc->child, o.child)))
		usage_error("bad --child '%s'", o.child);
	if (o.plot_dir && !o.child && !bench_have_gnuplot()) {
		/* Before the runs, not after minutes of them. */
		fprintf(stderr, "tally-bench: --plot needs gnuplot, which is not "
			"installed (Debian, Ubuntu: apt-get install gnuplot-nox)\n");
		return 1;
	}

	/* The common defaults; the others are the scenarios' own. */
	if (!o.repeat)
		o.repeat = o.quick ? 3 : 5;
	if (!(given & T_BLOCKS))
		o.blocks = o.quick ? 100000 : 1000000;
	if (!(given & T_BATCH))
		o.batch = 1000;
	if (!(given & T_MEM))
		o.mem_counters = o.quick ? 16384 : 65536;
	if (!(given & T_SLABS))
		o.slabs = 256;

	if (sc)
		return sc->run(&o);

	/* all: every registered scenario. */
	if (o.json)
		fputs("[\n", stdout);
	for (unsigned i = 0; i < NSCENARIOS; i++) {
		if (i)
			fputs(o.json ? ",\n" : "\n", stdout);
		rc |= run_isolated(&scenarios[i], &o);
	}
	if (o.json)
		fputs("\n]\n", stdout);
	if (o.plot_dir && !o.quiet)
		fprintf(stderr, "tally-bench all: charts and JSON in %s/\n",
			o.plot_dir);
	return rc;
}
