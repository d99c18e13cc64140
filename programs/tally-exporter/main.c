/*
 * main.c: tally-exporter's options, start-up checks and signals.
 *
 *   tally-exporter [--listen ADDR] [--dir DIR]... [--aggregate] [options]
 *
 * Every error a user can make is reported in one line naming what is
 * wrong (exit status 2 for a bad option, 1 for anything else), before
 * the server starts; logs go to stderr; SIGTERM and SIGINT stop the
 * server cleanly (exit status 0), within STOP_SECONDS whatever is in
 * flight.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <time.h>
#include <arpa/inet.h>
#include <microhttpd.h>

#include "listen.h"
#include "server.h"

#define PROG "tally-exporter"

/* After SIGTERM, the process is gone within this many seconds, even when
 * a request is still in flight (a scrape of a huge segment, a bcrypt). */
#define STOP_SECONDS 3

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
"in use, missing directory, bad web config), 2 for bad options.\n"
"See tally-exporter(1).\n";

static void bad_option(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
static void bad_option(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry '" PROG " --help'.\n", stderr);
	exit(2);
}

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						      noreturn));
static void fatal(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static unsigned long number(const char *opt, const char *s, unsigned long lo,
			    unsigned long hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
		bad_option("%s: expected a whole number from %lu to %lu, got "
			   "'%s'", opt, lo, hi, s);
	return v;
}

static int no_segment(const char *path, struct tally_seg *s,
		      const char *error, void *arg)
{
	(void)path;
	(void)s;
	(void)error;
	(void)arg;
	return 0;
}

/*
 * A directory (NULL: the default places) must be one the library will
 * walk: it exists, is a directory (not a symbolic link), and is this
 * user's or allowed by @oo, writable by its owner only.
 */
static void check_dir(const char *dir, const struct tally_open_opts *oo)
{
	int rc = tally_dir_foreach(dir, oo, no_segment, NULL);

	if (rc == -ENOENT && dir)
		fatal("cannot read %s: no such directory", dir);
	if (rc < 0)
		fatal("cannot read %s", tally_errmsg());
}

enum {
	O_LABEL_PID = 256, O_LABEL_PROC, O_LABEL_ZONE, O_NO_PROC, O_BUCKETS,
	O_WEBCONFIG, O_MAXCONN, O_MAXCONN_IP, O_MAXREQ, O_TIMEOUT, O_ALLOW_UID,
	O_SELF, O_ALLOW_GROUP,
};

/*
 * The stop timer: a clean stop joins libmicrohttpd's threads, which
 * finish the request they are in.  Should that take longer than
 * STOP_SECONDS, the process exits without the rest of the clean-up
 * (nothing of it outlives the process).
 */
static void *stop_timer(void *arg)
{
	static const char msg[] = PROG ": requests still in flight after "
		"3 s: exiting without waiting for them\n";
	struct timespec ts = { STOP_SECONDS, 0 };

	(void)arg;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* Exiting anyway. */
	}
	_exit(0);
	return NULL;
}

/* The server logs what it removes the same way (server.c). */
static void expired(const char *path, const char *why, void *arg)
{
	(void)arg;
	fprintf(stderr, PROG ": removed %s: %s\n", path, why);
}

int main(int argc, char **argv)
{
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
	const char *listen_addr = "127.0.0.1:9477", *webfile = NULL;
	const char **dirs = NULL;
	unsigned ndirs = 0;
	struct ex_le_rule *rules = NULL;
	unsigned nrules = 0;
	struct server_opts so = { 0 };
	struct tally_open_opts oo = { .allow_uid = -1 };
	struct webconfig wc;
	struct server *srv;
	char err[600], shown[128];
	sigset_t sigs;
	int opt, fd, sig;

	/* A scrape allocates and frees tens of megabytes for 100,000
	 * series.  Keep that memory in the process between scrapes (one
	 * malloc arena, no mmap per large block, no trimming) instead of
	 * taking fresh zeroed pages from the kernel every time: the page
	 * faults cost more than the reading. */
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);

	so.expose.pid_label = "pid";
	so.expose.process_label = "process";
	so.expose.zone_label = "zone";
	so.expose.self_metrics = 1;
	so.max_conns = 256;
	so.max_conns_per_ip = 0;   /* an eighth of max_conns, below */
	so.max_request_bytes = 16384;
	so.request_timeout = 10;
	so.threads = 2;

	while ((opt = getopt_long(argc, argv, "l:d:ahV", longopts, NULL)) !=
	       -1) {
		switch (opt) {
		case 'l':
			listen_addr = optarg;
			break;
		case 'd':
			if (!optarg[0])
				bad_option("--dir: empty directory name");
			dirs = realloc(dirs, (ndirs + 1) * sizeof(*dirs));
			if (!dirs)
				fatal("out of memory");
			dirs[ndirs++] = optarg;
			break;
		case 'a':
			so.expose.aggregate = 1;
			break;
		case O_LABEL_PID:
		case O_LABEL_PROC:
		case O_LABEL_ZONE:
			for (const char *p = optarg; *p; p++)
				if (!((*p >= 'a' && *p <= 'z') ||
				      (*p >= 'A' && *p <= 'Z') || *p == '_' ||
				      (p > optarg && *p >= '0' && *p <= '9')))
					bad_option("--label.*: '%s' is not a "
						   "label name", optarg);
			if (strncmp(optarg, "__", 2) == 0)
				bad_option("--label.*: names starting with __ "
					   "are reserved");
			if (opt == O_LABEL_PID)
				so.expose.pid_label = optarg;
			else if (opt == O_LABEL_PROC)
				so.expose.process_label = optarg;
			else
				so.expose.zone_label = optarg;
			break;
		case O_NO_PROC:
			so.expose.pid_label = "";
			so.expose.process_label = "";
			break;
		case O_BUCKETS:
			rules = realloc(rules, (nrules + 1) * sizeof(*rules));
			if (!rules)
				fatal("out of memory");
			if (ex_le_rule_parse(optarg, &rules[nrules], err,
					     sizeof(err)) < 0)
				bad_option("--histogram.buckets: %s", err);
			nrules++;
			break;
		case O_ALLOW_UID:
			oo.allow_uid = (long)number("--allow-uid", optarg, 0,
						    0x7fffffff);
			break;
		case O_ALLOW_GROUP:
			oo.allow_group = 1;
			break;
		case O_WEBCONFIG:
			webfile = optarg;
			break;
		case O_MAXCONN:
			so.max_conns = (unsigned)number("--web.max-connections",
							optarg, 1, 65536);
			break;
		case O_MAXCONN_IP:
			so.max_conns_per_ip = (unsigned)number(
				"--web.max-connections-per-ip", optarg, 1,
				65536);
			break;
		case O_MAXREQ:
			so.max_request_bytes = (unsigned)number(
				"--web.max-request-bytes", optarg, 2048,
				1u << 20);
			break;
		case O_TIMEOUT:
			so.request_timeout = (unsigned)number(
				"--web.request-timeout", optarg, 1, 3600);
			break;
		case O_SELF:
			if (strcmp(optarg, "no") == 0)
				so.expose.self_metrics = 0;
			else if (strcmp(optarg, "yes") == 0)
				so.expose.self_metrics = 1;
			else
				bad_option("--self-metrics: yes or no, got "
					   "'%s'", optarg);
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf(PROG " %s (libmicrohttpd %s)\n", TALLY_VERSION,
			       MHD_get_version());
			return 0;
		default:
			fputs("Try '" PROG " --help'.\n", stderr);
			return 2;
		}
	}
	if (optind < argc)
		bad_option("unexpected argument '%s'", argv[optind]);
	/* One client address may hold at most half of the connections, so
	 * that a client that opens connections in a loop (or slowly sends
	 * requests on each) leaves room for a scraper at another address. */
	if (!so.max_conns_per_ip)
		so.max_conns_per_ip = so.max_conns / 8 ? so.max_conns / 8 : 1;
	if (so.max_conns_per_ip > (so.max_conns / 2 ? so.max_conns / 2 : 1))
		bad_option("--web.max-connections-per-ip %u: at most half of "
			   "--web.max-connections (%u), so that other "
			   "addresses keep room", so.max_conns_per_ip,
			   so.max_conns);
	if (so.expose.aggregate)
		so.expose.pid_label = so.expose.process_label = "";

	/* Everything that can be wrong is found before serving. */
	if (ndirs == 0)
		check_dir(NULL, &oo);
	for (unsigned i = 0; i < ndirs; i++)
		check_dir(dirs[i], &oo);
	/* A bad TALLY_RETAIN is found now, and the dead segments past it
	 * go (then once a minute, on scrapes). */
	for (unsigned i = 0; i < (ndirs ? ndirs : 1); i++)
		if (tally_dir_expire(ndirs ? dirs[i] : NULL, TALLY_RETAIN_ENV,
				     expired, NULL) == -EINVAL)
			fatal("%s", tally_errmsg());
	if (webfile) {
		if (wc_load(webfile, &wc, err, sizeof(err)) < 0)
			fatal("bad web config: %s", err);
		so.web = &wc;
		if (wc.world_readable)
			fprintf(stderr, PROG ": warning: %s holds password "
				"hashes and its mode lets every user read it "
				"(chmod o-r %s)\n", webfile, webfile);
		if (wc.key_world_readable)
			fprintf(stderr, PROG ": warning: the mode of the TLS "
				"key %s lets every user read it (chmod o-r "
				"%s)\n", wc.key_file, wc.key_file);
		if (wc.nusers && wc.cost_min != wc.cost_max)
			fprintf(stderr, PROG ": warning: %s: the users' bcrypt "
				"costs differ (%u to %u): the time of a failed "
				"login tells users of a lower cost from unknown "
				"ones; give every user the same cost\n",
				webfile, wc.cost_min, wc.cost_max);
	}
	fd = listen_open(listen_addr, err, sizeof(err), shown, sizeof(shown));
	if (fd < 0)
		fatal("%s", err);

	/* Signals go to this thread only, through sigwait(). */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	so.listen_fd = fd;
	so.dirs = dirs;
	so.ndirs = ndirs;
	so.open_opts = &oo;
	so.expose.rules = rules;
	so.expose.nrules = nrules;
	srv = server_start(&so, err, sizeof(err));
	if (!srv)
		fatal("%s", err);
	fprintf(stderr, PROG ": listening on %s://%s/metrics%s%s%s\n",
		so.web && so.web->cert_pem ? "https" : "http", shown,
		so.web && so.web->nusers ? " (basic auth)" : "",
		so.expose.aggregate ? " (aggregate)" : "",
		oo.allow_group ? " (group-shared segments allowed)" : "");

	if (sigwait(&sigs, &sig) != 0)
		sig = SIGTERM;
	fprintf(stderr, PROG ": %s: stopping\n", strsignal(sig));
	{
		pthread_t t;
		pthread_attr_t a;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &a, stop_timer, NULL) != 0)
			fprintf(stderr, PROG ": no stop timer: %s\n",
				strerror(errno));
		pthread_attr_destroy(&a);
	}
	server_stop(srv);
	for (unsigned i = 0; i < nrules; i++)
		ex_le_rule_free(&rules[i]);
	free(rules);
	free(dirs);
	if (so.web)
		wc_free(&wc);
	return 0;
}
