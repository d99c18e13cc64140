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

#include "bench.h"

static const char usage_text[] =
"usage: tally-bench counter [--adds N] [--threads T] [options]\n"
"       tally-bench alloc [--blocks M] [--batch B] [--threads T]\n"
"                         [--mem-counters K] [--slabs S] [options]\n"
"       tally-bench metrics [--series N] [options]\n"
"       tally-bench exporter [--series N] [--exporter PATH] [options]\n"
"       tally-bench oversub [--adds N] [--threads T] [options]\n"
"       tally-bench pernode [--adds N] [options]\n"
"       tally-bench falseshare [--adds N] [options]\n"
"       tally-bench inflight [--adds N] [options]\n"
"       tally-bench wakeup [--adds N] [options]\n"
"       tally-bench all [options]\n"
"\n"
"Reproduce the experiments behind libtally, each next to its baselines\n"
"measured in the same run:\n"
"  counter  FreeBSD counter(9): one worker per CPU adds to one shared\n"
"           counter: tally (percpu, percpu fallback, shared, adaptive,\n"
"           pernode) vs a thread-local add, one shared atomic and a racy +=.\n"
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
"  all      counter and alloc, one after the other.\n"
"\n"
"options:\n"
"  --adds N          counter: adds per worker (default 10^7; --quick 10^6);\n"
"                    oversub, pernode, falseshare, inflight, wakeup: the\n"
"                    operations per run (see tally-bench(1) for defaults)\n"
"  --threads T       counter: workers (default: one per CPU);\n"
"                    alloc: the larger thread count (default 2);\n"
"                    oversub: the largest thread count (default 64)\n"
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
"  --json            print the results as one JSON document\n"
"  --no-child        skip the re-executed runs (fallback, forced slabs,\n"
"                    forced nodes)\n"
"  --quiet           no progress on stderr\n"
"  -h, --help        print this help\n"
"\n"
"Numbers may be written 10000000, 1e7, 10^7 or 10M (k, M, G: 10^3, 10^6,\n"
"10^9).  The program exits 0 whether or not the targets were met, 1 when\n"
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
};

/* bench-exporter.c */
extern const char *bench_exporter_path;
int bench_exporter(const struct bench_opts *o);

/* The scenarios of bench-<name>.c, which pick their own defaults for
 * --adds (left 0 when not given). */
static const struct {
	const char *name;
	int (*run)(const struct bench_opts *o);
	const char *child;     /* the --child kind it accepts, or NULL */
} scenarios[] = {
	{ "oversub", bench_oversub, NULL },
	{ "pernode", bench_pernode, "nodes" },
	{ "falseshare", bench_falseshare, NULL },
	{ "inflight", bench_inflight, NULL },
	{ "wakeup", bench_wakeup, NULL },
};

static const struct option longopts[] = {
	{ "adds", required_argument, NULL, O_ADDS },
	{ "series", required_argument, NULL, O_SERIES },
	{ "exporter", required_argument, NULL, O_EXPORTER },
	{ "threads", required_argument, NULL, O_THREADS },
	{ "blocks", required_argument, NULL, O_BLOCKS },
	{ "batch", required_argument, NULL, O_BATCH },
	{ "mem-counters", required_argument, NULL, O_MEM },
	{ "slabs", required_argument, NULL, O_SLABS },
	{ "repeat", required_argument, NULL, O_REPEAT },
	{ "quick", no_argument, NULL, O_QUICK },
	{ "json", no_argument, NULL, O_JSON },
	{ "no-child", no_argument, NULL, O_NOCHILD },
	{ "quiet", no_argument, NULL, O_QUIET },
	{ "child", required_argument, NULL, O_CHILD },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

int main(int argc, char **argv)
{
	struct bench_opts o = { 0 };
	const char *sub;
	int is_counter, is_alloc, is_metrics, is_exporter, rc = 0, c;
	int scen = -1;
	int set_series = 0;
	int set_adds = 0, set_blocks = 0, set_repeat = 0, set_mem = 0;
	int set_threads = 0, set_slabs = 0, set_batch = 0;

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
	is_counter = strcmp(sub, "counter") == 0;
	is_alloc = strcmp(sub, "alloc") == 0;
	is_metrics = strcmp(sub, "metrics") == 0;
	is_exporter = strcmp(sub, "exporter") == 0;
	for (unsigned i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (strcmp(sub, scenarios[i].name) == 0)
			scen = (int)i;
	if (!is_counter && !is_alloc && !is_metrics && !is_exporter &&
	    scen < 0 && strcmp(sub, "all") != 0)
		usage_error("unknown subcommand '%s' (expected counter, alloc, "
			    "metrics, exporter, oversub, pernode, falseshare, "
			    "inflight, wakeup or all)", sub);

	opterr = 0;
	optind = 2;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case O_ADDS:
			o.adds = parse_count("--adds", optarg, 1, 10000000000ull);
			set_adds = 1;
			break;
		case O_THREADS:
			o.threads = (unsigned)parse_count("--threads", optarg, 1,
							  BENCH_MAX_THREADS);
			set_threads = 1;
			break;
		case O_BLOCKS:
			o.blocks = parse_count("--blocks", optarg, 100,
					       1000000000ull);
			set_blocks = 1;
			break;
		case O_BATCH:
			o.batch = parse_count("--batch", optarg, 1, 1000000);
			set_batch = 1;
			break;
		case O_MEM:
			o.mem_counters = parse_count("--mem-counters", optarg, 2,
						     1u << 24);
			o.mem_counters += o.mem_counters & 1;
			set_mem = 1;
			break;
		case O_SLABS:
			o.slabs = (unsigned)parse_count("--slabs", optarg, 0, 4096);
			set_slabs = 1;
			break;
		case O_REPEAT:
			o.repeat = (unsigned)parse_count("--repeat", optarg, 1,
							 BENCH_MAX_REPEAT);
			set_repeat = 1;
			break;
		case O_SERIES:
			o.series = parse_count("--series", optarg, 1, 16000000);
			set_series = 1;
			break;
		case O_EXPORTER:
			if (!is_exporter)
				usage_error("%s: --exporter is an option of "
					    "exporter", sub);
			bench_exporter_path = optarg;
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
	if (is_counter && (set_blocks || set_batch || set_mem || set_slabs))
		usage_error("%s: --blocks, --batch, --mem-counters and --slabs "
			    "are options of alloc", sub);
	if (is_alloc && set_adds)
		usage_error("%s: --adds is an option of counter", sub);
	if (!is_metrics && !is_exporter && set_series)
		usage_error("%s: --series is an option of metrics and exporter",
			    sub);
	if ((is_metrics || is_exporter) && (set_adds || set_blocks ||
					   set_batch || set_mem || set_slabs ||
					   set_threads))
		usage_error(is_exporter ? "%s: takes --series, --exporter, "
			    "--repeat, --quick, --json and --quiet" :
			    "%s: takes --series, --repeat, --quick, --json and "
			    "--quiet", sub);
	if (scen >= 0) {
		if (set_blocks || set_batch || set_mem || set_slabs ||
		    set_series)
			usage_error("%s: takes --adds, --repeat, --quick, "
				    "--json, --quiet and --no-child (and "
				    "oversub --threads)", sub);
		if (set_threads && strcmp(sub, "oversub") != 0)
			usage_error("%s: give --threads to counter, alloc or "
				    "oversub", sub);
		if (o.child && (!scenarios[scen].child ||
				strcmp(o.child, scenarios[scen].child) != 0))
			usage_error("bad --child '%s'", o.child);
		if (!set_repeat)
			o.repeat = o.quick ? 3 : 5;
		if (!set_threads)
			o.threads = 0;
		return scenarios[scen].run(&o);
	}
	if (!is_counter && !is_alloc && set_threads)
		usage_error("%s: give --threads to counter or alloc", sub);
	if (o.child && strcmp(o.child, is_counter ? "fallback" : "slabs") != 0)
		usage_error("bad --child '%s'", o.child);

	if (!set_repeat)
		o.repeat = o.quick ? 3 : 5;
	if (!set_adds)
		o.adds = o.quick ? 1000000 : 10000000;
	if (!set_blocks)
		o.blocks = o.quick ? 100000 : 1000000;
	if (!set_batch)
		o.batch = 1000;
	if (!set_mem)
		o.mem_counters = o.quick ? 16384 : 65536;
	if (!set_slabs)
		o.slabs = 256;

	if (is_exporter) {
		if (!set_series)
			o.series = o.quick ? 10000 : 100000;
		if (o.series < 8)
			usage_error("%s: --series must be 8 or more", sub);
		return bench_exporter(&o);
	}
	if (!set_series)
		o.series = o.quick ? 100000 : 1000000;
	if (is_metrics)
		return bench_metrics(&o);
	if (is_counter)
		return bench_counter(&o);
	if (is_alloc) {
		if (!set_threads)
			o.threads = 2;
		return bench_alloc(&o);
	}
	/* all */
	if (o.json)
		fputs("[\n", stdout);
	rc |= bench_counter(&o);
	if (o.json)
		fputs(",\n", stdout);
	else
		fputs("\n", stdout);
	fflush(stdout);
	o.threads = 2;
	rc |= bench_alloc(&o);
	if (o.json)
		fputs("]\n", stdout);
	return rc;
}
