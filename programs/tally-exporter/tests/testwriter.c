/*
 * testwriter.c: the writers of tally-exporter's tests, on the public
 * metrics API only.
 *
 *   testwriter fixture SECONDS   every kind of series, with values and
 *                                labels chosen to catch formatting bugs
 *   testwriter run SECONDS FINAL a counter counted up to FINAL while the
 *                                test watches, and a histogram
 *   testwriter many N SECONDS    N counters of one family (measurements)
 *   testwriter spread N SECONDS  N series of ten metrics, registered
 *                                label set by label set, so that a
 *                                metric's records are every tenth
 *                                (measurements): series i is
 *                                spread_<m>_total{id="<i/10>"} = i for
 *                                m = i % 10 below 9, the histogram
 *                                spread_9{id="<i/10>"} with one
 *                                observation of i for m = 9 (76 buckets)
 *   testwriter worker N SECONDS  a pre-fork worker: worker_requests_total
 *                                += N, N observations of 5000 and one of
 *                                N in worker_latency_ns, worker_up = 1
 *                                (a gauge); then its segment goes when it
 *                                exits (TALLY_KEEP unset)
 *   testwriter forked N SECONDS  worker's series, then a fork: the creator
 *                                exits at once (_exit, as a master that
 *                                died), its child adds N more requests to
 *                                the inherited zone once the creator is
 *                                gone, prints "ready <creator> <child>"
 *                                and holds the zone
 *   testwriter pooled SECONDS    a worker of the shared zone $TALLY_ZONE:
 *                                pool_busy += 1 (one gauge for the zone),
 *                                and float gauges named as tally 0.3's
 *                                Python package named per-process ones
 *                                (label pid="<pid>:<start>"), which are
 *                                only names in a zone of 2.6 or later:
 *                                pool_conns:gauge_livesum = 10,
 *                                pool_seen:gauge_all = 5
 *   testwriter clash SECONDS     series whose label names clash in the
 *                                exposition, as an older library or a
 *                                crafted file holds them (the segment is
 *                                patched through its file: a histogram's
 *                                "le", a label name twice), others that
 *                                clash with the exporter's pid label, and
 *                                one with 3000 bytes of labels
 *   testwriter cleanup           tally_dir_cleanup() of $TALLY_DIR: removes
 *                                the segments of processes that are gone
 *   testwriter hash PASSWORD [COST]  a bcrypt hash of PASSWORD, cost 8 by
 *                                default (for web configs)
 *
 * Each prints "ready" (fixture) or "done" (run, once FINAL is reached) on
 * stdout, then holds its segment for SECONDS or until SIGTERM, and exits.
 */
#define _GNU_SOURCE
#include <crypt.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tally/reader.h"
#include "tally/tally.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* @rc: what registering @d returned. */
static void must(int rc, const struct tally_metric_desc *d)
{
	if (rc < 0) {
		fprintf(stderr, "testwriter: register %s: %s\n", d->name,
			tally_errmsg());
		exit(1);
	}
}

static void hold(double seconds)
{
	struct timespec ts = { 0, 50000000 };

	for (double t = 0; t < seconds && !stop; t += 0.05)
		nanosleep(&ts, NULL);
}

/* The fixture's counters: past 2^53, escapes in labels and help, two
 * series of one name, no _total suffix, a unit. */
static void fixture_counters(void)
{
	static const struct tally_label esc[] = {
		{ "path", "a\"b\\c\nd" },
		{ "utf8", "caf\xc3\xa9 \xe2\x82\xac" },
	};
	static const struct tally_label q0[] = { { "queue", "0" } };
	static const struct tally_label q1[] = { { "queue", "1" } };
	tally_counter big, esc_c, qc0, qc1, noto, secs;
	struct tally_metric_desc d;

	memset(&d, 0, sizeof(d));
	d.kind = TALLY_COUNTER;
	d.name = "fixture_big_total";
	d.help = "A counter past 2^53: 9007199254740993 exactly.";
	must(tally_counter_register(NULL, &d, &big), &d);
	tally_counter_add(&big, 9007199254740993ll);

	d.name = "fixture_escapes_total";
	d.help = "Help with a backslash \\, a \"quote\" and a\nnewline.";
	d.labels = esc;
	d.nlabels = 2;
	must(tally_counter_register(NULL, &d, &esc_c), &d);
	tally_counter_add(&esc_c, 7);

	d.name = "fixture_requests_total";
	d.help = "Requests per queue.";
	d.labels = q0;
	d.nlabels = 1;
	must(tally_counter_register(NULL, &d, &qc0), &d);
	tally_counter_add(&qc0, 100);
	d.labels = q1;
	must(tally_counter_register(NULL, &d, &qc1), &d);
	tally_counter_add(&qc1, 200);

	d.labels = NULL;
	d.nlabels = 0;
	d.name = "fixture_no_suffix";
	d.help = "A counter whose name does not end in _total.";
	must(tally_counter_register(NULL, &d, &noto), &d);
	tally_counter_add(&noto, 3);

	d.name = "fixture_busy_seconds_total";
	d.help = "A counter with a unit.";
	d.unit = "seconds";
	must(tally_counter_register(NULL, &d, &secs), &d);
	tally_counter_add(&secs, 12);
}

/* The fixture's gauges: below zero, INT64_MAX, floating point at 0.1 and
 * -Inf, no help. */
static void fixture_gauges(void)
{
	tally_gauge neg, empty;
	tally_setgauge set;
	tally_fgauge ratio, cold;
	struct tally_metric_desc d;

	memset(&d, 0, sizeof(d));
	d.kind = TALLY_GAUGE;
	d.name = "fixture_in_flight";
	d.help = "A gauge below zero.";
	must(tally_gauge_register(NULL, &d, &neg), &d);
	tally_gauge_add(&neg, -42);

	d.kind = TALLY_GAUGE_SET;
	d.name = "fixture_temperature";
	d.help = "A set gauge at INT64_MAX.";
	must(tally_setgauge_register(NULL, &d, &set), &d);
	tally_setgauge_set(&set, INT64_MAX);

	d.kind = TALLY_FGAUGE;
	d.name = "fixture_ratio";
	d.help = "A floating-point gauge at 0.1.";
	must(tally_fgauge_register(NULL, &d, &ratio), &d);
	tally_fgauge_set(&ratio, 0.1);
	d.name = "fixture_coldest";
	d.help = "A floating-point gauge at -Inf.";
	must(tally_fgauge_register(NULL, &d, &cold), &d);
	tally_fgauge_set(&cold, -1.0 / 0.0);

	d.kind = TALLY_GAUGE;
	d.name = "fixture_empty_help";
	d.help = NULL;
	must(tally_gauge_register(NULL, &d, &empty), &d);
}

/* The fixture's histogram, with observations at bucket edges and one of
 * 2^41. */
static void fixture_histogram(void)
{
	tally_histogram hist;
	struct tally_metric_desc d;

	memset(&d, 0, sizeof(d));
	d.kind = TALLY_HISTOGRAM;
	d.name = "fixture_latency_ns";
	d.help = "Observations 0, 1, 7, 8, 9, 1000 (x10), 5000 (x1000) and "
		 "2^41.";
	d.unit = "ns";
	must(tally_histogram_register(NULL, &d, &hist), &d);
	tally_histogram_observe(&hist, 0);
	tally_histogram_observe(&hist, 1);
	tally_histogram_observe(&hist, 7);
	tally_histogram_observe(&hist, 8);
	tally_histogram_observe(&hist, 9);
	for (int i = 0; i < 10; i++)
		tally_histogram_observe(&hist, 1000);
	for (int i = 0; i < 1000; i++)
		tally_histogram_observe(&hist, 5000);
	tally_histogram_observe(&hist, 1ull << 41);
}

/* A definition that changed (an older version of the program, still
 * running, made it a counter): only the gauge is exported. */
static void fixture_redefined(void)
{
	tally_counter redef_old;
	tally_setgauge redef;
	struct tally_metric_desc d;

	memset(&d, 0, sizeof(d));
	d.kind = TALLY_COUNTER;
	d.name = "fixture_redefined";
	d.help = "Version 1: a counter.";
	must(tally_counter_register(NULL, &d, &redef_old), &d);
	d.kind = TALLY_GAUGE_SET;
	d.help = "Version 2: a set gauge.";
	must(tally_setgauge_register(NULL, &d, &redef), &d);
	tally_counter_add(&redef_old, 5);
	tally_setgauge_set(&redef, 9);
}

static int fixture(double seconds)
{
	fixture_counters();
	fixture_gauges();
	fixture_histogram();
	fixture_redefined();
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	hold(seconds);
	return 0;
}

static int run(double seconds, long long final)
{
	tally_counter req;
	tally_histogram lat;
	struct tally_metric_desc d;
	long long done = 0;
	struct timespec ts = { 0, 1000000 };

	memset(&d, 0, sizeof(d));
	d.kind = TALLY_COUNTER;
	d.name = "test_requests_total";
	d.help = "Requests counted by the test writer.";
	must(tally_counter_register(NULL, &d, &req), &d);
	d.kind = TALLY_HISTOGRAM;
	d.name = "test_latency_ns";
	d.help = "1000 observations of 5000 and 10 of 100000.";
	must(tally_histogram_register(NULL, &d, &lat), &d);
	printf("started %d\n", (int)getpid());
	fflush(stdout);
	/* About one second of counting, in steps, while a scraper watches. */
	for (int step = 0; step < 1000 && !stop; step++) {
		long long to = final * (step + 1) / 1000;

		tally_counter_add(&req, to - done);
		done = to;
		if (step < 1000)
			tally_histogram_observe(&lat, 5000);
		if (step % 100 == 0)
			tally_histogram_observe(&lat, 100000);
		nanosleep(&ts, NULL);
	}
	printf("done %lld\n", done);
	fflush(stdout);
	hold(seconds);
	return 0;
}

/* A counter of @d holding @v. */
static void count_one(const struct tally_metric_desc *d, long v)
{
	tally_counter m;

	must(tally_counter_register(NULL, d, &m), d);
	tally_counter_add(&m, v);
}

/* Say so, then keep the series for @seconds. */
static int ready_and_hold(double seconds)
{
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	hold(seconds);
	return 0;
}

/* N counters of one family with a label each (for measurements). */
static int many(long n, double seconds)
{
	struct tally_metric_desc d;
	struct tally_label l = { "id", NULL };
	char v[32];

	memset(&d, 0, sizeof(d));
	d.kind = TALLY_COUNTER;
	d.name = "many_requests_total";
	d.help = "One of many series.";
	d.labels = &l;
	d.nlabels = 1;
	for (long i = 0; i < n; i++) {
		snprintf(v, sizeof(v), "%ld", i);
		l.value = v;
		count_one(&d, i);
	}
	return ready_and_hold(seconds);
}

/* N series of ten metrics, the series of each scattered among the
 * others' in the series table (for measurements). */
static int spread(long n, double seconds)
{
	struct tally_metric_desc d;
	struct tally_label l = { "id", NULL };
	char v[32], name[32];

	memset(&d, 0, sizeof(d));
	d.name = name;
	d.help = "One of many series, among other metrics' series.";
	d.labels = &l;
	d.nlabels = 1;
	for (long i = 0; i < n; i++) {
		snprintf(v, sizeof(v), "%ld", i / 10);
		l.value = v;
		if (i % 10 == 9) {
			tally_histogram h;

			/* 77 slots: a zone of the default size holds
			 * 200,000 series. */
			d.kind = TALLY_HISTOGRAM;
			d.hist_sub_bits = 2;
			d.hist_max_bits = 20;
			snprintf(name, sizeof(name), "spread_9");
			must(tally_histogram_register(NULL, &d, &h), &d);
			tally_histogram_observe(&h, (uint64_t)i);
		} else {
			d.kind = TALLY_COUNTER;
			d.hist_sub_bits = d.hist_max_bits = 0;
			snprintf(name, sizeof(name), "spread_%ld_total", i % 10);
			count_one(&d, i);
		}
	}
	return ready_and_hold(seconds);
}

static int worker(long n, double seconds)
{
	tally_counter req;
	tally_histogram lat;
	tally_gauge up;
	struct tally_metric_desc d;

	memset(&d, 0, sizeof(d));
	d.kind = TALLY_COUNTER;
	d.name = "worker_requests_total";
	d.help = "Requests served by this worker.";
	must(tally_counter_register(NULL, &d, &req), &d);
	d.kind = TALLY_HISTOGRAM;
	d.name = "worker_latency_ns";
	d.help = "N observations of 5000 and one of N.";
	must(tally_histogram_register(NULL, &d, &lat), &d);
	d.kind = TALLY_GAUGE;
	d.name = "worker_up";
	d.help = "1 while the worker runs.";
	must(tally_gauge_register(NULL, &d, &up), &d);
	tally_counter_add(&req, n);
	for (long i = 0; i < n; i++)
		tally_histogram_observe(&lat, 5000);
	tally_histogram_observe(&lat, (uint64_t)n);
	tally_gauge_add(&up, 1);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	hold(seconds);
	return 0;
}

/* worker()'s series in a zone whose creator is gone while a child it
 * forked still updates it. */
static int forked(long n, double seconds)
{
	struct timespec ts = { 0, 10000000 };
	tally_counter req;
	tally_gauge up;
	struct tally_metric_desc d;
	pid_t creator = getpid(), child;

	memset(&d, 0, sizeof(d));
	d.kind = TALLY_COUNTER;
	d.name = "worker_requests_total";
	d.help = "Requests served by this worker.";
	must(tally_counter_register(NULL, &d, &req), &d);
	d.kind = TALLY_GAUGE;
	d.name = "worker_up";
	d.help = "1 while the worker runs.";
	must(tally_gauge_register(NULL, &d, &up), &d);
	tally_counter_add(&req, n);
	tally_gauge_add(&up, 1);
	fflush(stdout);
	child = fork();
	if (child < 0)
		return 1;
	if (child > 0)
		_exit(0);
	/* At most 10 s for the creator to be gone (reparented). */
	for (int i = 0; i < 1000 && getppid() == creator; i++)
		nanosleep(&ts, NULL);
	if (getppid() == creator)
		return 1;
	tally_counter_add(&req, n);
	printf("ready %d %d\n", (int)creator, (int)getpid());
	fflush(stdout);
	hold(seconds);
	return 0;
}

/* "<pid>:<start ticks>", the pid label value of tally 0.3's Python package. */
static void pid_label(char *out, size_t n)
{
	char buf[1024], *p;
	unsigned long long start = 0;
	FILE *f = fopen("/proc/self/stat", "re");
	size_t len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[len] = '\0';
	p = strrchr(buf, ')');
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu", &start);
	snprintf(out, n, "%d:%llu", (int)getpid(), start);
}

static int pooled(double seconds)
{
	char me[64];
	struct tally_label l = { "pid", me };
	struct tally_metric_desc d;
	tally_gauge busy;
	tally_fgauge conns, seen;

	pid_label(me, sizeof(me));
	memset(&d, 0, sizeof(d));
	d.kind = TALLY_GAUGE;
	d.name = "pool_busy";
	d.help = "Requests in flight in the pool.";
	must(tally_gauge_register(NULL, &d, &busy), &d);
	tally_gauge_add(&busy, 1);
	d.kind = TALLY_FGAUGE;
	d.name = "pool_conns:gauge_livesum";
	d.help = "Connections open.";
	d.labels = &l;
	d.nlabels = 1;
	must(tally_fgauge_register(NULL, &d, &conns), &d);
	tally_fgauge_set(&conns, 10);
	d.name = "pool_seen:gauge_all";
	d.help = "Last seen.";
	must(tally_fgauge_register(NULL, &d, &seen), &d);
	tally_fgauge_set(&seen, 5);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	hold(seconds);
	return 0;
}

/*
 * Replace the first @n bytes @from found in the data of the file at @path
 * by @to (pread over the runs SEEK_DATA finds: no hole is touched).
 * Returns 0, or -1 when @from is not there.
 */
static int patch_file(const char *path, const char *from, const char *to,
		      size_t n)
{
	static char buf[1 << 16];
	int fd = open(path, O_RDWR);
	off_t pos = 0, end;

	if (fd < 0)
		return -1;
	end = lseek(fd, 0, SEEK_END);
	while (pos < end) {
		off_t d = lseek(fd, pos, SEEK_DATA), h;

		if (d < 0)
			break;
		h = lseek(fd, d, SEEK_HOLE);
		for (off_t o = d; o < h; o += (off_t)(sizeof(buf) - n)) {
			ssize_t r = pread(fd, buf, sizeof(buf), o);
			char *at;

			if (r <= 0)
				break;
			at = memmem(buf, (size_t)r, from, n);
			if (at) {
				int rc = pwrite(fd, to, n, o + (at - buf)) ==
						 (ssize_t)n ? 0 : -1;

				close(fd);
				return rc;
			}
			if ((size_t)r < sizeof(buf))
				break;
		}
		pos = h;
	}
	close(fd);
	return -1;
}

static int clash(double seconds)
{
	struct tally_label hl = { "lx", "crafted" };
	struct tally_label dup[] = { { "a", "1" }, { "b", "dup" } };
	struct tally_label pid = { "pid", "mine" };
	struct tally_label both[] = { { "pid", "mine" },
				      { "tally_pid", "mine too" } };
	static char big[3001];
	struct tally_label lng[] = { { "route", big }, { "method", "GET" } };
	struct tally_metric_desc d;
	tally_counter ok, dc, pc, bc, lc;
	tally_histogram h;
	const char *path;

	for (int i = 0; i < 3000; i++)
		big[i] = (char)('a' + i % 26);
	memset(&d, 0, sizeof(d));
	d.kind = TALLY_COUNTER;
	d.name = "clash_ok_total";
	d.help = "A series without a clash.";
	must(tally_counter_register(NULL, &d, &ok), &d);
	d.name = "clash_dup_total";
	d.help = "Label a twice once patched: left out.";
	d.labels = dup;
	d.nlabels = 2;
	must(tally_counter_register(NULL, &d, &dc), &d);
	d.name = "clash_pid_total";
	d.help = "A pid label of its own: the exporter's is tally_pid.";
	d.labels = &pid;
	d.nlabels = 1;
	must(tally_counter_register(NULL, &d, &pc), &d);
	d.name = "clash_both_total";
	d.help = "pid and tally_pid of its own: left out.";
	d.labels = both;
	d.nlabels = 2;
	must(tally_counter_register(NULL, &d, &bc), &d);
	d.name = "clash_long_total";
	d.help = "3000 bytes of labels.";
	d.labels = lng;
	d.nlabels = 2;
	must(tally_counter_register(NULL, &d, &lc), &d);
	d.kind = TALLY_HISTOGRAM;
	d.name = "clash_hist_ns";
	d.help = "A histogram with a label le once patched: exported_le.";
	d.labels = &hl;
	d.nlabels = 1;
	must(tally_histogram_register(NULL, &d, &h), &d);
	tally_counter_add(&ok, 11);
	tally_counter_add(&dc, 12);
	tally_counter_add(&pc, 13);
	tally_counter_add(&bc, 14);
	tally_counter_add(&lc, 15);
	tally_histogram_observe(&h, 5000);
	path = tally_zone_path(tally_zone_default());
	if (patch_file(path, "lx\0crafted\0", "le\0crafted\0", 11) < 0 ||
	    patch_file(path, "a\0" "1\0b\0dup\0", "a\0" "1\0a\0dup\0", 10) < 0) {
		fprintf(stderr, "testwriter: cannot patch %s\n", path);
		return 1;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	hold(seconds);
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (argc == 3 && strcmp(argv[1], "fixture") == 0)
		return fixture(atof(argv[2]));
	if (argc == 4 && strcmp(argv[1], "run") == 0)
		return run(atof(argv[2]), atoll(argv[3]));
	if (argc == 4 && strcmp(argv[1], "many") == 0)
		return many(atol(argv[2]), atof(argv[3]));
	if (argc == 4 && strcmp(argv[1], "spread") == 0)
		return spread(atol(argv[2]), atof(argv[3]));
	if (argc == 4 && strcmp(argv[1], "worker") == 0)
		return worker(atol(argv[2]), atof(argv[3]));
	if (argc == 4 && strcmp(argv[1], "forked") == 0)
		return forked(atol(argv[2]), atof(argv[3]));
	if (argc == 3 && strcmp(argv[1], "pooled") == 0)
		return pooled(atof(argv[2]));
	if (argc == 3 && strcmp(argv[1], "clash") == 0)
		return clash(atof(argv[2]));
	if (argc == 2 && strcmp(argv[1], "cleanup") == 0) {
		int n = tally_dir_cleanup(NULL);

		if (n < 0) {
			fprintf(stderr, "testwriter: cleanup: %s\n",
				tally_errmsg());
			return 1;
		}
		printf("removed %d\n", n);
		return 0;
	}
	if ((argc == 3 || argc == 4) && strcmp(argv[1], "hash") == 0) {
		char salt[64];
		struct crypt_data cd;
		const char *h;

		memset(&cd, 0, sizeof(cd));
		if (!crypt_gensalt_rn("$2b$", argc == 4 ? strtoul(argv[3], NULL,
					10) : 8, NULL, 0, salt, sizeof(salt)))
			return 1;
		h = crypt_r(argv[2], salt, &cd);
		if (!h || h[0] == '*')
			return 1;
		printf("%s\n", h);
		return 0;
	}
	fprintf(stderr, "usage: testwriter fixture SECONDS | run SECONDS FINAL "
		"| many N SECONDS | spread N SECONDS | worker N SECONDS | forked N SECONDS "
		"| pooled SECONDS "
		"| clash SECONDS | cleanup | hash PASSWORD [COST]\n");
	return 2;
}
