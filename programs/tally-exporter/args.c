/*
 * args.c: tally-exporter's options (args.h): the usage text, the long
 * options (node_exporter's --web.* spellings), and the checks of their
 * values, each failing with a line that names the option.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <microhttpd.h>

#include "args.h"
#include "parse.h"
#include "strbuf.h"

static const char usage_text[] =
"usage: " PROG " [--listen ADDR] [--dir DIR]... [--aggregate] [options]\n"
"\n"
"Serve the counters, gauges and histograms of the tally segments of a\n"
"directory (default $TALLY_DIR, or $XDG_RUNTIME_DIR/tally and\n"
"/dev/shm/tally-<uid>) on GET /metrics,\n"
"in Prometheus text format 0.0.4 or OpenMetrics 1.0.0 (by the Accept\n"
"header), gzip-compressed when the client accepts it.\n"
"\n"
"  -l, --listen ADDR        address to listen on: HOST:PORT, [IPV6]:PORT or\n"
"                           :PORT for every address (default 127.0.0.1:9477;\n"
"                           --web.listen-address is the same)\n"
"  -d, --dir DIR            a directory of segments; repeat for several\n"
"  -a, --aggregate          sum the same series across processes (pre-fork\n"
"                           workers) instead of labelling them by process;\n"
"                           counters and histograms keep the counts of the\n"
"                           processes that exited (never go backwards);\n"
"                           gauges are summed over live processes only\n"
"      --label.pid NAME     the pid label's name (default pid; '' for none)\n"
"      --label.process NAME the process name label (default process; '':\n"
"                           none)\n"
"      --label.zone NAME    added when a process has several zones (default\n"
"                           zone)\n"
"      --no-process-labels  neither pid nor process labels (use only when\n"
"                           one process writes each series, or --aggregate)\n"
"      --histogram.buckets PATTERN=SPEC\n"
"                           which bucket edges of the histograms whose name\n"
"                           matches the glob PATTERN become le bounds: octave\n"
"                           (one per power of two, 2^k-1: the default), sub:N\n"
"                           (2^N per power of two), all, or a list such as\n"
"                           100,1000,10000 (each moved up to the upper edge\n"
"                           of its tally bucket); first match wins; repeatable\n"
"      --allow-uid UID      also read segments owned by UID\n"
"      --allow-group        also read other users' segments shared with a\n"
"                           group of this process (writers started with\n"
"                           TALLY_GROUP: files 0640, directory not writable\n"
"                           by the group); run as a dedicated user in that\n"
"                           group, neither root nor the service's uid\n"
"      --web.config.file FILE\n"
"                           TLS and basic auth (exporter-toolkit format:\n"
"                           tls_server_config.cert_file/key_file,\n"
"                           basic_auth_users with bcrypt hashes of cost 4\n"
"                           to 12); it must set TLS, users or both\n"
"      --web.max-connections N         (default 256)\n"
"      --web.max-connections-per-ip N  (default an eighth of the above, 32;\n"
"                                      at most half of it)\n"
"      --web.max-request-bytes N       request line + headers (default 16384)\n"
"      --web.request-timeout SECONDS   to send a request, and idle time\n"
"                                      (default 10)\n"
"      --self-metrics=no    leave out tally_exporter_* and tally_segment_*\n"
"  -h, --help               this text\n"
"  -V, --version            the version\n"
"\n"
"Exit status: 0 after SIGTERM or SIGINT, 1 when it cannot start (address\n"
"in use, unreadable directory, bad web config), 2 for bad options; a\n"
"directory that does not exist yet is waited for.\n"
"See tally-exporter(1).\n";

/* A bad option: what is wrong, and where the rest is. */
#define bad(...) tp_bad_usage(PROG, "Try '" PROG " --help'.", __VA_ARGS__)

/* @s, a whole number from @lo to @hi, into *@out; else -1, said. */
static int number(const char *opt, const char *s, unsigned long lo,
		  unsigned long hi, unsigned *out)
{
	const char *p = s;
	unsigned long v;

	if (tp_parse_ulong(&p, lo, hi, &v) < 0 || *p)
		return bad("%s: expected a whole number from %lu to %lu, got "
			   "'%s'", opt, lo, hi, s);
	*out = (unsigned)v;
	return 0;
}

/* --label.*: a Prometheus label name, not one of the reserved ones. */
static int label_name(const char *s)
{
	if (tp_label_name_len(s) != strlen(s))
		return bad("--label.*: '%s' is not a label name", s);
	if (strncmp(s, "__", 2) == 0)
		return bad("--label.*: names starting with __ are reserved");
	return 0;
}

enum {
	O_LABEL_PID = 256, O_LABEL_PROC, O_LABEL_ZONE, O_NO_PROC, O_BUCKETS,
	O_WEBCONFIG, O_MAXCONN, O_MAXCONN_IP, O_MAXREQ, O_TIMEOUT, O_ALLOW_UID,
	O_SELF, O_ALLOW_GROUP,
};

static const struct option longopts[] = {
	{ "listen", required_argument, NULL, 'l' },
	{ "web.listen-address", required_argument, NULL, 'l' },
	{ "dir", required_argument, NULL, 'd' },
	{ "aggregate", no_argument, NULL, 'a' },
	{ "label.pid", required_argument, NULL, O_LABEL_PID },
	{ "label.process", required_argument, NULL, O_LABEL_PROC },
	{ "label.zone", required_argument, NULL, O_LABEL_ZONE },
	{ "no-process-labels", no_argument, NULL, O_NO_PROC },
	{ "histogram.buckets", required_argument, NULL, O_BUCKETS },
	{ "allow-uid", required_argument, NULL, O_ALLOW_UID },
	{ "allow-group", no_argument, NULL, O_ALLOW_GROUP },
	{ "web.config.file", required_argument, NULL, O_WEBCONFIG },
	{ "web.max-connections", required_argument, NULL, O_MAXCONN },
	{ "web.max-connections-per-ip", required_argument, NULL,
	  O_MAXCONN_IP },
	{ "web.max-request-bytes", required_argument, NULL, O_MAXREQ },
	{ "web.request-timeout", required_argument, NULL, O_TIMEOUT },
	{ "self-metrics", required_argument, NULL, O_SELF },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static void defaults(struct ex_args *a)
{
	struct server_opts *so = &a->so;

	memset(a, 0, sizeof(*a));
	a->listen_addr = "127.0.0.1:9477";
	a->oo.allow_uid = -1;
	so->expose.pid_label = "pid";
	so->expose.process_label = "process";
	so->expose.zone_label = "zone";
	so->expose.self_metrics = 1;
	so->max_conns = 256;
	so->max_conns_per_ip = 0;   /* an eighth of max_conns (finish()) */
	so->max_request_bytes = 16384;
	so->request_timeout = 10;
	so->threads = 2;
}

/* One option; 0, 1 (help or version printed) or -1 (bad). */
static int option(struct ex_args *a, int opt, const char *arg)
{
	struct server_opts *so = &a->so;
	char err[600];
	unsigned uid;

	switch (opt) {
	case 'l':
		a->listen_addr = arg;
		return 0;
	case 'd':
		if (!arg[0])
			return bad("--dir: empty directory name");
		a->dirs = tp_xrealloc(a->dirs, (a->ndirs + 1) *
				      sizeof(*a->dirs));
		a->dirs[a->ndirs++] = arg;
		return 0;
	case 'a':
		so->expose.aggregate = 1;
		return 0;
	case O_LABEL_PID:
		so->expose.pid_label = arg;
		return label_name(arg);
	case O_LABEL_PROC:
		so->expose.process_label = arg;
		return label_name(arg);
	case O_LABEL_ZONE:
		so->expose.zone_label = arg;
		return label_name(arg);
	case O_NO_PROC:
		so->expose.pid_label = "";
		so->expose.process_label = "";
		return 0;
	case O_BUCKETS:
		a->rules = tp_xrealloc(a->rules, (a->nrules + 1) *
				       sizeof(*a->rules));
		if (ex_le_rule_parse(arg, &a->rules[a->nrules], err,
				     sizeof(err)) < 0)
			return bad("--histogram.buckets: %s", err);
		a->nrules++;
		return 0;
	case O_ALLOW_UID:
		if (number("--allow-uid", arg, 0, 0x7fffffff, &uid) < 0)
			return -1;
		a->oo.allow_uid = (long)uid;
		return 0;
	case O_ALLOW_GROUP:
		a->oo.allow_group = 1;
		return 0;
	case O_WEBCONFIG:
		a->webfile = arg;
		return 0;
	case O_MAXCONN:
		return number("--web.max-connections", arg, 1, 65536,
			      &so->max_conns);
	case O_MAXCONN_IP:
		return number("--web.max-connections-per-ip", arg, 1, 65536,
			      &so->max_conns_per_ip);
	case O_MAXREQ:
		return number("--web.max-request-bytes", arg, 2048, 1u << 20,
			      &so->max_request_bytes);
	case O_TIMEOUT:
		return number("--web.request-timeout", arg, 1, 3600,
			      &so->request_timeout);
	case O_SELF:
		if (strcmp(arg, "no") == 0)
			so->expose.self_metrics = 0;
		else if (strcmp(arg, "yes") == 0)
			so->expose.self_metrics = 1;
		else
			return bad("--self-metrics: yes or no, got '%s'", arg);
		return 0;
	case 'h':
		fputs(usage_text, stdout);
		return 1;
	case 'V':
		printf(PROG " %s (libmicrohttpd %s)\n", TALLY_VERSION,
		       MHD_get_version());
		return 1;
	default:
		/* getopt_long() has said what is wrong. */
		fputs("Try '" PROG " --help'.\n", stderr);
		return -1;
	}
}

/* What follows from the options together. */
static int finish(struct ex_args *a)
{
	struct server_opts *so = &a->so;

	/* One client address may hold at most half of the connections, so
	 * that a client that opens connections in a loop (or slowly sends
	 * requests on each) leaves room for a scraper at another address. */
	if (!so->max_conns_per_ip)
		so->max_conns_per_ip = so->max_conns / 8 ? so->max_conns / 8 : 1;
	if (so->max_conns_per_ip > (so->max_conns / 2 ? so->max_conns / 2 : 1))
		return bad("--web.max-connections-per-ip %u: at most half of "
			   "--web.max-connections (%u), so that other "
			   "addresses keep room", so->max_conns_per_ip,
			   so->max_conns);
	if (so->expose.aggregate)
		so->expose.pid_label = so->expose.process_label = "";
	so->dirs = a->dirs;
	so->ndirs = a->ndirs;
	so->open_opts = &a->oo;
	so->expose.rules = a->rules;
	so->expose.nrules = a->nrules;
	return 0;
}

int ex_args_parse(int argc, char **argv, struct ex_args *a)
{
	int opt, rc;

	defaults(a);
	while ((opt = getopt_long(argc, argv, "l:d:ahV", longopts, NULL)) !=
	       -1)
		if ((rc = option(a, opt, optarg)) != 0)
			return rc;
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	return finish(a);
}

void ex_args_free(struct ex_args *a)
{
	for (unsigned i = 0; i < a->nrules; i++)
		ex_le_rule_free(&a->rules[i]);
	free(a->rules);
	free(a->dirs);
	memset(a, 0, sizeof(*a));
}
