/*
 * programs/tallystat/args.c: the command line: options as sysstat spells
 * them, and the parsers of their values (unit-tested one by one in
 * tests/test-tallystat-units.c).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "parse.h"
#include "strbuf.h"
#include "tallystat.h"

int ts_parse_cpulist(const char *s, unsigned char *cpus, char *err,
		     size_t errlen)
{
	const char *p = s;

	memset(cpus, 0, TS_MAX_CPUS);
	if (!*p)
		return tp_fail(err, errlen, "-P: empty CPU list");
	for (;;) {
		unsigned long a, b;

		if (tp_parse_ulong(&p, 0, TS_MAX_CPUS - 1, &a) < 0)
			return tp_fail(err, errlen, "-P: expected ALL or a CPU "
				    "list such as 0,2-3 (CPUs 0 to %u), got "
				    "'%s'", TS_MAX_CPUS - 1, s);
		b = a;
		if (*p == '-') {
			p++;
			if (tp_parse_ulong(&p, 0, TS_MAX_CPUS - 1, &b) < 0 || b < a)
				return tp_fail(err, errlen, "-P: bad CPU range in "
					    "'%s'", s);
		}
		for (unsigned long c = a; c <= b; c++)
			cpus[c] = 1;
		if (!*p)
			return 0;
		if (*p++ != ',' || !*p)
			return tp_fail(err, errlen, "-P: expected ALL or a CPU "
				    "list such as 0,2-3, got '%s'", s);
	}
}

int ts_parse_interval(const char *s, double *out, char *err, size_t errlen)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0.01 ||
	    v > 86400 || !(isdigit((unsigned char)s[0]) || s[0] == '.'))
		return tp_fail(err, errlen, "interval: expected seconds from "
			    "0.01 to 86400, got '%s'", s);
	*out = v;
	return 0;
}

int ts_parse_count(const char *s, unsigned long *out, char *err,
		   size_t errlen)
{
	const char *p = s;
	unsigned long v;

	if (tp_parse_ulong(&p, 1, 1000000000ul, &v) < 0 || *p)
		return tp_fail(err, errlen, "count: expected a whole number "
			    "from 1 to 1000000000, got '%s'", s);
	*out = v;
	return 0;
}

int ts_parse_pids(const char *s, int **pids, unsigned *npids, char *err,
		  size_t errlen)
{
	const char *p = s;

	if (strcasecmp(s, "ALL") == 0) {
		free(*pids);
		*pids = NULL;
		*npids = 0;
		return 0;
	}
	for (;;) {
		unsigned long v;

		if (tp_parse_ulong(&p, 1, 0x7fffffff, &v) < 0 || (*p && *p != ','))
			return tp_fail(err, errlen, "-p: expected ALL or process "
				    "ids (1,2,...), got '%s'", s);
		*pids = tp_xrealloc(*pids, (*npids + 1) * sizeof(int));
		(*pids)[(*npids)++] = (int)v;
		if (!*p)
			return 0;
		if (!*++p)
			return tp_fail(err, errlen, "-p: trailing ',' in '%s'", s);
	}
}

void ts_usage(FILE *f)
{
	fprintf(f,
"Usage: " PROG " [options] [selector...] [interval [count]]\n"
"\n"
"Show the counters, gauges and histograms that processes keep with tally.\n"
"Without an interval: one report of the values since each process started.\n"
"With one: that report, then every interval the per-second rates of\n"
"counters, the values of gauges, and count/s, mean, p50, p99, p99.9 and max\n"
"of histograms over the interval; count reports in all (default: until\n"
"SIGINT), then Average: rows.\n"
"\n"
"Selectors (or'ed; PromQL syntax): a metric name or glob, label matchers:\n"
"  'requests_total{queue=\"3\"}'  'request*'  '{queue!=\"0\",conn=~\"1.*\"}'\n"
"\n"
"Options:\n"
"  -p PID[,PID...]|ALL   only these processes\n"
"  -C REGEX              only processes whose name matches REGEX\n"
"  -Z, --zone GLOB       only zones whose name matches GLOB\n"
"  -a                    sum each series across processes (pre-fork workers)\n"
"  -P ALL|CPU-LIST       per-CPU columns, for every CPU or a list (0,2-3)\n"
"  -o JSON               sysstat's JSON envelope instead of text\n"
"  --human               k/M/G and time units (for *_seconds, *_ns ... series)\n"
"  -t                    print the date and time before each report\n"
"  -y                    skip the since-start report\n"
"  -z                    omit series that did not change (since start: zero)\n"
"  -w, --width N         widest Series column, 16 to 4096 (default 48)\n"
"  --dir DIR             read DIR (repeatable; default $TALLY_DIR, or\n"
"                        $XDG_RUNTIME_DIR/tally and /dev/shm/tally-<uid>)\n"
"  --allow-uid UID       also read segments (and a directory) owned by UID\n"
"  --allow-group         also read other users' segments shared with a\n"
"                        group of this process (writers started with\n"
"                        TALLY_GROUP: files 0640 in a directory 0750)\n"
"  --list                list the segments: pid, process, zone, liveness,\n"
"                        series, file size and real memory; and what the\n"
"                        dead ones hold\n"
"  --clean               remove the segments of processes that are gone,\n"
"                        once dead for TALLY_RETAIN (default 1h; 0: now)\n"
"  -V, --version         print the version\n"
"  --help                this text\n"
"\n"
"Colour on a terminal unless NO_COLOR is set; S_COLORS=never|always|auto.\n"
"Exit status: 0, 1 when a directory cannot be read, 2 for bad arguments.\n");
}

/* A bad command line: what is wrong, the synopsis and where the rest is,
 * in two lines (the whole usage only with --help), as sysstat's tools. */
#define bad(...)                                                             \
	tp_bad_usage(PROG, "Usage: " PROG " [options] [selector...] "        \
		     "[interval [count]]; see " PROG " --help", __VA_ARGS__)

static int is_number(const char *s)
{
	return isdigit((unsigned char)s[0]) || (s[0] == '.' &&
						isdigit((unsigned char)s[1]));
}

/* S_COLORS and NO_COLOR, as sysstat and no-color.org define them. */
static int want_color(void)
{
	const char *sc = getenv("S_COLORS"), *nc = getenv("NO_COLOR");

	if (sc && strcmp(sc, "never") == 0)
		return 0;
	if (sc && strcmp(sc, "always") == 0)
		return 1;
	if (nc && nc[0])
		return 0;
	return isatty(STDOUT_FILENO);
}

enum { OPT_DIR = 256, OPT_HUMAN, OPT_LIST, OPT_CLEAN, OPT_HELP,
       OPT_ALLOW_UID, OPT_ALLOW_GROUP };

int ts_parse_options(int argc, char **argv, struct ts_options *o)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, OPT_DIR },
		{ "zone", required_argument, NULL, 'Z' },
		{ "human", no_argument, NULL, OPT_HUMAN },
		{ "list", no_argument, NULL, OPT_LIST },
		{ "clean", no_argument, NULL, OPT_CLEAN },
		{ "allow-uid", required_argument, NULL, OPT_ALLOW_UID },
		{ "allow-group", no_argument, NULL, OPT_ALLOW_GROUP },
		{ "width", required_argument, NULL, 'w' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	char err[256];
	int opt, nnum = 0;

	memset(o, 0, sizeof(*o));
	o->series_width = 48;
	o->open_opts.allow_uid = -1;
	opterr = 0;
	/* GNU getopt moves operands to the end, so options may follow
	 * them; operands that are numbers are the interval and count, the
	 * others selectors (a metric name never starts with a digit). */
	while ((opt = getopt_long(argc, argv, ":p:C:Z:aP:o:w:tyzV", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (ts_parse_pids(optarg, &o->pids, &o->npids, err,
					  sizeof(err)) < 0)
				return bad("%s", err);
			break;
		case 'C': {
			int rc;

			if (o->have_comm)
				regfree(&o->comm_re);
			rc = regcomp(&o->comm_re, optarg,
				     REG_EXTENDED | REG_NOSUB);
			if (rc) {
				regerror(rc, &o->comm_re, err, sizeof(err));
				o->have_comm = 0;
				return bad("-C: bad regular expression '%s': "
					   "%s", optarg, err);
			}
			o->have_comm = 1;
			break;
		}
		case 'Z':
			if (!optarg[0])
				return bad("--zone: empty zone name");
			o->zone_glob = optarg;
			break;
		case 'a':
			o->aggregate = 1;
			break;
		case 'P':
			o->percpu = 1;
			if (strcasecmp(optarg, "ALL") == 0) {
				o->allcpus = 1;
				break;
			}
			o->allcpus = 0;
			if (!o->cpus)
				o->cpus = tp_xcalloc(TS_MAX_CPUS, 1);
			if (ts_parse_cpulist(optarg, o->cpus, err,
					     sizeof(err)) < 0)
				return bad("%s", err);
			break;
		case 'o':
			if (strcasecmp(optarg, "JSON") != 0)
				return bad("-o: the only output format is JSON,"
					   " got '%s'", optarg);
			o->json = 1;
			break;
		case 'w': {
			const char *p = optarg;
			char *end;
			long v = strtol(p, &end, 10);

			if (end == p || *end || v < 16 || v > 4096)
				return bad("--width: expected 16 to 4096, got "
					   "'%s'", optarg);
			o->series_width = (unsigned)v;
			break;
		}
		case 't':
			o->timestamp = 1;
			break;
		case 'y':
			o->omit_first = 1;
			break;
		case 'z':
			o->omit_idle = 1;
			break;
		case OPT_DIR:
			if (!optarg[0])
				return bad("--dir: empty directory name");
			o->dirs = tp_xrealloc(o->dirs, (o->ndirs + 1) *
					      sizeof(*o->dirs));
			o->dirs[o->ndirs++] = optarg;
			break;
		case OPT_ALLOW_UID: {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (!isdigit((unsigned char)optarg[0]) || *end ||
			    errno || v > 0x7fffffffUL)
				return bad("--allow-uid: expected a uid, got "
					   "'%s'", optarg);
			o->open_opts.allow_uid = (long)v;
			break;
		}
		case OPT_ALLOW_GROUP:
			o->open_opts.allow_group = 1;
			break;
		case OPT_HUMAN:
			o->human = 1;
			break;
		case OPT_LIST:
			o->list = 1;
			break;
		case OPT_CLEAN:
			o->clean = 1;
			break;
		case 'V':
			printf(PROG " " TALLYSTAT_VERSION "\n");
			return 1;
		case OPT_HELP:
			ts_usage(stdout);
			return 1;
		case ':':
			if (optopt)
				return bad("option -%c needs a value", optopt);
			return bad("option '%s' needs a value",
				   argv[optind - 1]);
		default:
			if (optopt)
				return bad("unknown option -%c", optopt);
			return bad("unknown option '%s'", argv[optind - 1]);
		}
	}
	for (int i = optind; i < argc; i++) {
		const char *a = argv[i];

		/* In the synopsis's order: selectors, then interval and
		 * count.  A word after the interval is a mistyped count
		 * (tallystat 1 abc), not a selector that would leave
		 * tallystat running forever on nothing. */
		if (nnum && !is_number(a))
			return bad("'%s' after the interval: expected a count "
				   "(selectors go before the interval)", a);
		if (is_number(a)) {
			if (nnum == 0) {
				if (ts_parse_interval(a, &o->interval, err,
						      sizeof(err)) < 0)
					return bad("%s", err);
			} else if (nnum == 1) {
				if (ts_parse_count(a, &o->count, err,
						   sizeof(err)) < 0)
					return bad("%s", err);
			} else {
				return bad("unexpected argument '%s' after "
					   "interval and count", a);
			}
			nnum++;
			continue;
		}
		o->sels = tp_xrealloc(o->sels, (o->nsels + 1) *
				      sizeof(*o->sels));
		if (tp_selector_parse(a, &o->sels[o->nsels], err,
				      sizeof(err)) < 0)
			return bad("selector '%s': %s", a, err);
		o->nsels++;
	}
	if (o->cpus && !o->allcpus) {
		long n = sysconf(_SC_NPROCESSORS_CONF);

		/* As mpstat: a CPU the machine does not have is a mistake,
		 * not an empty column. */
		for (long c = n > 0 ? n : 1; c < TS_MAX_CPUS; c++)
			if (o->cpus[c])
				return bad("-P: no CPU %ld on this machine "
					   "(CPUs 0 to %ld)", c,
					   (n > 0 ? n : 1) - 1);
	}
	if (o->list && o->clean)
		return bad("--list and --clean do not go together");
	if ((o->list || o->clean) && (nnum || o->nsels))
		return bad("--%s takes no selector, interval or count",
			   o->list ? "list" : "clean");
	if (o->clean && (o->npids || o->have_comm || o->zone_glob))
		return bad("--clean removes every segment of a process that is "
			   "gone: it takes no -p, -C or --zone");
	if (o->clean && o->json)
		return bad("--clean has no JSON output");
	o->color = !o->json && want_color();
	return 0;
}

void ts_options_free(struct ts_options *o)
{
	for (unsigned i = 0; i < o->nsels; i++)
		tp_selector_free(&o->sels[i]);
	free(o->sels);
	free(o->pids);
	free(o->cpus);
	free(o->dirs);
	if (o->have_comm)
		regfree(&o->comm_re);
	memset(o, 0, sizeof(*o));
}
