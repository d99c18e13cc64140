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
#include <stddef.h>
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

/*
 * The options, one handler each.  A handler gets the option's value (NULL
 * when it takes none) and returns 0, 1 when the run ends well at once
 * (--help, --version), or what bad() returns.  The getopt_long() tables
 * are made from this one.
 */
typedef int (*opt_fn)(struct ts_options *o, const char *arg);

static int opt_pids(struct ts_options *o, const char *arg)
{
	char err[256];

	if (ts_parse_pids(arg, &o->pids, &o->npids, err, sizeof(err)) < 0)
		return bad("%s", err);
	return 0;
}

static int opt_comm(struct ts_options *o, const char *arg)
{
	char err[256];
	int rc;

	if (o->have_comm)
		regfree(&o->comm_re);
	rc = regcomp(&o->comm_re, arg, REG_EXTENDED | REG_NOSUB);
	if (rc) {
		regerror(rc, &o->comm_re, err, sizeof(err));
		o->have_comm = 0;
		return bad("-C: bad regular expression '%s': %s", arg, err);
	}
	o->have_comm = 1;
	return 0;
}

static int opt_zone(struct ts_options *o, const char *arg)
{
	if (!arg[0])
		return bad("--zone: empty zone name");
	o->zone_glob = arg;
	return 0;
}

static int opt_cpus(struct ts_options *o, const char *arg)
{
	char err[256];

	o->percpu = 1;
	if (strcasecmp(arg, "ALL") == 0) {
		o->allcpus = 1;
		return 0;
	}
	o->allcpus = 0;
	if (!o->cpus)
		o->cpus = tp_xcalloc(TS_MAX_CPUS, 1);
	if (ts_parse_cpulist(arg, o->cpus, err, sizeof(err)) < 0)
		return bad("%s", err);
	return 0;
}

static int opt_output(struct ts_options *o, const char *arg)
{
	if (strcasecmp(arg, "JSON") != 0)
		return bad("-o: the only output format is JSON, got '%s'",
			   arg);
	o->json = 1;
	return 0;
}

static int opt_width(struct ts_options *o, const char *arg)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (end == arg || *end || v < 16 || v > 4096)
		return bad("--width: expected 16 to 4096, got '%s'", arg);
	o->series_width = (unsigned)v;
	return 0;
}

static int opt_dir(struct ts_options *o, const char *arg)
{
	if (!arg[0])
		return bad("--dir: empty directory name");
	o->dirs = tp_xrealloc(o->dirs, (o->ndirs + 1) * sizeof(*o->dirs));
	o->dirs[o->ndirs++] = arg;
	return 0;
}

static int opt_allow_uid(struct ts_options *o, const char *arg)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (!isdigit((unsigned char)arg[0]) || *end || errno ||
	    v > 0x7fffffffUL)
		return bad("--allow-uid: expected a uid, got '%s'", arg);
	o->open_opts.allow_uid = (long)v;
	return 0;
}

static int opt_version(struct ts_options *o, const char *arg)
{
	(void)o;
	(void)arg;
	printf(PROG " " TALLYSTAT_VERSION "\n");
	return 1;
}

static int opt_help(struct ts_options *o, const char *arg)
{
	(void)o;
	(void)arg;
	ts_usage(stdout);
	return 1;
}

/* The options that only set a flag: the flag's offset in ts_options. */
#define FLAG(field) offsetof(struct ts_options, field)

struct opt {
	const char *name;       /* long name, or NULL */
	int letter;             /* short letter, or 0 */
	int has_arg;            /* no_argument or required_argument */
	opt_fn fn;              /* or NULL: sets the int at flag to 1 */
	size_t flag;
};

static const struct opt opts[] = {
	{ NULL, 'p', required_argument, opt_pids, 0 },
	{ NULL, 'C', required_argument, opt_comm, 0 },
	{ "zone", 'Z', required_argument, opt_zone, 0 },
	{ NULL, 'a', no_argument, NULL, FLAG(aggregate) },
	{ NULL, 'P', required_argument, opt_cpus, 0 },
	{ NULL, 'o', required_argument, opt_output, 0 },
	{ "width", 'w', required_argument, opt_width, 0 },
	{ NULL, 't', no_argument, NULL, FLAG(timestamp) },
	{ NULL, 'y', no_argument, NULL, FLAG(omit_first) },
	{ NULL, 'z', no_argument, NULL, FLAG(omit_idle) },
	{ "version", 'V', no_argument, opt_version, 0 },
	{ "dir", 0, required_argument, opt_dir, 0 },
	{ "human", 0, no_argument, NULL, FLAG(human) },
	{ "list", 0, no_argument, NULL, FLAG(list) },
	{ "clean", 0, no_argument, NULL, FLAG(clean) },
	{ "allow-uid", 0, required_argument, opt_allow_uid, 0 },
	{ "allow-group", 0, no_argument, NULL,
	  FLAG(open_opts.allow_group) },
	{ "help", 0, no_argument, opt_help, 0 },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* The value getopt_long() returns for opts[i]: its letter, or 256 + i
 * for an option that has only a long name. */
static int opt_value(size_t i)
{
	return opts[i].letter ? opts[i].letter : 256 + (int)i;
}

/* getopt_long()'s short string (":" first: a missing value is told
 * apart) and long options, from opts. */
static void getopt_tables(char *shorts, struct option *longs)
{
	size_t ns = 0, nl = 0;

	shorts[ns++] = ':';
	for (size_t i = 0; i < NOPTS; i++) {
		if (opts[i].letter) {
			shorts[ns++] = (char)opts[i].letter;
			if (opts[i].has_arg == required_argument)
				shorts[ns++] = ':';
		}
		if (opts[i].name)
			longs[nl++] = (struct option){ opts[i].name,
				opts[i].has_arg, NULL, opt_value(i) };
	}
	shorts[ns] = '\0';
	longs[nl] = (struct option){ NULL, 0, NULL, 0 };
}

/* Run the handler of the option getopt_long() returned as @opt. */
static int apply_option(struct ts_options *o, int opt, char **argv)
{
	for (size_t i = 0; i < NOPTS; i++) {
		if (opt_value(i) != opt)
			continue;
		if (opts[i].fn)
			return opts[i].fn(o, optarg);
		*(int *)((char *)o + opts[i].flag) = 1;
		return 0;
	}
	/* optopt is the letter of a short option, or the value of a long
	 * one (256 and up), which is named as it was written. */
	if (opt == ':') {
		if (optopt > 0 && optopt < 256)
			return bad("option -%c needs a value", optopt);
		return bad("option '%s' needs a value", argv[optind - 1]);
	}
	if (optopt > 0 && optopt < 256)
		return bad("unknown option -%c", optopt);
	return bad("unknown option '%s'", argv[optind - 1]);
}

/*
 * The operands, in the synopsis's order: selectors, then interval and
 * count.  A word after the interval is a mistyped count (tallystat 1
 * abc), not a selector that would leave tallystat running forever on
 * nothing.  Returns the number of numbers (interval, count) in *@nnum.
 */
static int parse_operands(struct ts_options *o, int argc, char **argv,
			  int *nnum)
{
	char err[256];

	*nnum = 0;
	for (int i = optind; i < argc; i++) {
		const char *a = argv[i];

		if (*nnum && !is_number(a))
			return bad("'%s' after the interval: expected a count "
				   "(selectors go before the interval)", a);
		if (is_number(a)) {
			if (*nnum == 0) {
				if (ts_parse_interval(a, &o->interval, err,
						      sizeof(err)) < 0)
					return bad("%s", err);
			} else if (*nnum == 1) {
				if (ts_parse_count(a, &o->count, err,
						   sizeof(err)) < 0)
					return bad("%s", err);
			} else {
				return bad("unexpected argument '%s' after "
					   "interval and count", a);
			}
			(*nnum)++;
			continue;
		}
		o->sels = tp_xrealloc(o->sels, (o->nsels + 1) *
				      sizeof(*o->sels));
		if (tp_selector_parse(a, &o->sels[o->nsels], err,
				      sizeof(err)) < 0)
			return bad("selector '%s': %s", a, err);
		o->nsels++;
	}
	return 0;
}

/* What the options say together, once all are read. */
static int check_together(const struct ts_options *o, int nnum)
{
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
	return 0;
}

int ts_parse_options(int argc, char **argv, struct ts_options *o)
{
	char shorts[3 * NOPTS + 2];
	struct option longs[NOPTS + 1];
	int opt, nnum = 0, rc;

	memset(o, 0, sizeof(*o));
	o->series_width = 48;
	o->open_opts.allow_uid = -1;
	opterr = 0;
	getopt_tables(shorts, longs);
	/* GNU getopt moves operands to the end, so options may follow
	 * them; operands that are numbers are the interval and count, the
	 * others selectors (a metric name never starts with a digit). */
	while ((opt = getopt_long(argc, argv, shorts, longs, NULL)) != -1)
		if ((rc = apply_option(o, opt, argv)) != 0)
			return rc;
	if ((rc = parse_operands(o, argc, argv, &nnum)) != 0 ||
	    (rc = check_together(o, nnum)) != 0)
		return rc;
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
