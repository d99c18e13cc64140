/*
 * bench-exporter.c: `tally-bench exporter`, what a Prometheus scrape of
 * tally-exporter costs, and what it costs the writers.
 *
 *   scrape          8 writer processes hold N series in all (default
 *                   100,000); the exporter binary (started here, on
 *                   127.0.0.1, stopped by PID) is scraped over HTTP with
 *                   gzip off and on, interleaved: wall time from connect
 *                   to the last byte (what Prometheus waits), bytes per
 *                   series, and the exporter's peak RSS (VmHWM);
 *   writers         the 8 writers add in a loop for a window, unscraped
 *                   and scraped every 100 ms, windows alternated: adds
 *                   per CPU-second of the writers (the interference of
 *                   the reader), and adds per wall second (which also
 *                   counts the CPU the exporter takes on this machine);
 *   exited          an --aggregate exporter over the same writers plus
 *                   one live worker (N/8 series) runs while K workers of
 *                   the same series start, are scraped and exit with
 *                   their segments removed; a second one starts
 *                   afterwards.
 *                   Their scrapes, interleaved, must take the same time,
 *                   and the first one's summed counter must be exact (it
 *                   keeps the exited workers' counts).
 *
 * Every check of an exact value makes the run fail (exit 1): the series
 * count of each scrape, the retained total.  Times are medians of
 * --repeat runs, baselines measured in the same run.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tally/reader.h"
#include "tally/tally.h"

/* Set by tally-bench.c from --exporter; NULL: next to tally-bench. */
const char *bench_exporter_path;

#define NWRITERS 8
#define MAX_KIDS 64

/* Everything this run starts, stopped by PID at exit, whatever happens. */
static pid_t kids[MAX_KIDS + NWRITERS + 4];
static unsigned nkids;
static pid_t parent_pid;
static char tmpdir[64];

static void forget_kid(pid_t p)
{
	for (unsigned i = 0; i < nkids; i++)
		if (kids[i] == p)
			kids[i] = 0;
}

static void stop_kid(pid_t p)
{
	int st;

	if (p <= 0)
		return;
	kill(p, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(p, &st, WNOHANG) == p) {
			forget_kid(p);
			return;
		}
		usleep(10000);
	}
	kill(p, SIGKILL);
	waitpid(p, &st, 0);
	forget_kid(p);
}

static void cleanup(void)
{
	char cmd[128];

	if (getpid() != parent_pid)
		return;
	for (unsigned i = 0; i < nkids; i++)
		stop_kid(kids[i]);
	nkids = 0;
	if (tmpdir[0]) {
		/* Only our own mkdtemp directory. */
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "tally-bench: could not remove %s\n",
				tmpdir);
		tmpdir[0] = '\0';
	}
}

/* Interrupted: stop the children and remove the directory (through the
 * atexit handler) rather than leave a /dev/shm directory behind. */
static void on_signal(int sig)
{
	(void)sig;
	exit(130);
}

static void add_kid(pid_t p)
{
	for (unsigned i = 0; i < nkids; i++)
		if (kids[i] == 0) {
			kids[i] = p;
			return;
		}
	if (nkids == sizeof(kids) / sizeof(kids[0]))
		bench_die("too many children");
	kids[nkids++] = p;
}

/* --- Writers ------------------------------------------------------------ */

struct writer {
	pid_t pid;
	int cmd, res;          /* pipes: commands to it, results from it */
};

struct wresult {
	uint64_t adds, cpu_ns;
};

static void xwrite(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(3);
		c += w;
		n -= (size_t)w;
	}
}

static int xread(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* fork(), with stdio flushed first so that the child prints nothing of
 * the parent's twice; exits on failure. */
static pid_t fork_or_die(void)
{
	pid_t p;

	fflush(NULL);
	p = fork();
	if (p < 0)
		bench_die("fork: %s", strerror(errno));
	return p;
}

/* The target of at most 100 ms for a scrape of 10^5 series, which a run
 * with fewer (--series) does not measure. */
static void scrape_target(struct bench_doc *d, const char *what, double ms,
			  uint64_t nseries)
{
	int full = nseries >= 100000;

	bench_target(d, what, "<=", 100, full ? ms : NAN, "ms");
	if (!full)
		bench_target_note(d, "the target is for 10^5 series; "
				  "this run had %" PRIu64 " (--series)",
				  nseries);
}

static uint64_t proc_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The body of a writer: @n series named @name{id="i"} in a zone of its
 * own, each added @add once; "ready"; then commands: 'A' + duration (ms):
 * add in a loop that long and answer adds and CPU time; 'Q': exit (its
 * segment goes with it: TALLY_KEEP is unset).
 */
static void writer_main(const char *zone, const char *name, uint64_t n,
			int64_t add, int cmd, int res)
{
	struct tally_zone_opts zo = { 0 };
	struct tally_zone *z;
	struct tally_metric_desc d = { 0 };
	struct tally_label l = { "id", NULL };
	tally_counter *m = calloc(n, sizeof(*m));
	char v[24], c;

	zo.capacity = n + n / 4 + 4096;
	zo.max_series = n + 64;
	z = tally_zone_create(zone, &zo);
	if (!z || !m)
		_exit(2);
	d.kind = TALLY_COUNTER;
	d.name = name;
	d.help = "Requests, per connection.";
	d.labels = &l;
	d.nlabels = 1;
	for (uint64_t i = 0; i < n; i++) {
		snprintf(v, sizeof(v), "%" PRIu64, i);
		l.value = v;
		if (tally_counter_register(z, &d, &m[i]) < 0)
			_exit(2);
		tally_counter_add(&m[i], add);
	}
	xwrite(res, "r", 1);
	while (xread(cmd, &c, 1) == 0) {
		uint32_t ms;
		struct wresult r = { 0, 0 };
		uint64_t end, cpu0, i = 0;

		if (c != 'A')
			break;
		if (xread(cmd, &ms, sizeof(ms)) < 0)
			break;
		cpu0 = proc_cpu_ns();
		end = bench_now_ns() + (uint64_t)ms * 1000000u;
		do {
			for (unsigned k = 0; k < 4096; k++) {
				tally_counter_add(&m[i], 1);
				if (++i == n)
					i = 0;
			}
			r.adds += 4096;
		} while (bench_now_ns() < end);
		r.cpu_ns = proc_cpu_ns() - cpu0;
		xwrite(res, &r, sizeof(r));
	}
	tally_zone_destroy(z);
	exit(0);
}

static void writer_start(struct writer *w, const char *zone, const char *name,
			 uint64_t n, int64_t add)
{
	int cp[2], rp[2];
	char c;
	pid_t p;

	if (pipe(cp) < 0 || pipe(rp) < 0)
		bench_die("pipe: %s", strerror(errno));
	p = fork_or_die();
	if (p == 0) {
		/* Never outlive tally-bench, however it ends. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent_pid)
			_exit(1);
		close(cp[1]);
		close(rp[0]);
		writer_main(zone, name, n, add, cp[0], rp[1]);
	}
	add_kid(p);
	close(cp[0]);
	close(rp[1]);
	w->pid = p;
	w->cmd = cp[1];
	w->res = rp[0];
	if (xread(w->res, &c, 1) < 0 || c != 'r')
		bench_die("writer %d could not register its series", (int)p);
}

/* Ask the writer to exit; wait until it did (its segment is gone). */
static void writer_quit(struct writer *w)
{
	int st;

	xwrite(w->cmd, "Q", 1);
	close(w->cmd);
	close(w->res);
	if (waitpid(w->pid, &st, 0) != w->pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		bench_die("writer %d failed", (int)w->pid);
	forget_kid(w->pid);
}

/* --- The exporter and an HTTP client ------------------------------------ */

static const char *find_exporter(char *buf, size_t n)
{
	char self[PATH_MAX];
	ssize_t len;
	char *slash;

	if (bench_exporter_path)
		return bench_exporter_path;
	/* The build tree: build/bench/tally-bench and
	 * build/programs/tally-exporter/tally-exporter; installed: the same
	 * directory. */
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return NULL;
	self[len] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	if ((size_t)snprintf(buf, n, "%s/../programs/tally-exporter/"
			     "tally-exporter", self) < n &&
	    access(buf, X_OK) == 0)
		return buf;
	if ((size_t)snprintf(buf, n, "%s/tally-exporter", self) < n &&
	    access(buf, X_OK) == 0)
		return buf;
	return NULL;
}

/* Start the exporter on 127.0.0.1:0 over @dir; returns its port. */
static int exporter_start(const char *path, const char *dir, int aggregate,
			  pid_t *pid)
{
	int ep[2], port = 0;
	char line[512];
	size_t used = 0;
	uint64_t deadline = bench_now_ns() + 10000000000ull;
	pid_t p;

	if (pipe(ep) < 0)
		bench_die("pipe: %s", strerror(errno));
	p = fork_or_die();
	if (p == 0) {
		char *argv[] = { (char *)path, "--listen", "127.0.0.1:0",
				 "--dir", (char *)dir, aggregate ?
				 "--aggregate" : NULL, NULL };

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent_pid)
			_exit(1);
		dup2(ep[1], 2);
		close(ep[0]);
		close(ep[1]);
		execv(path, argv);
		fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	add_kid(p);
	close(ep[1]);
	fcntl(ep[0], F_SETFL, O_NONBLOCK);
	while (!port && bench_now_ns() < deadline) {
		ssize_t r = read(ep[0], line + used, sizeof(line) - 1 - used);
		char *at;

		if (r > 0) {
			used += (size_t)r;
			line[used] = '\0';
			at = strstr(line, "127.0.0.1:");
			if (at && strstr(at, "/metrics"))
				port = atoi(at + 10);
			if (used == sizeof(line) - 1)
				break;
		} else if (r == 0) {
			break;
		} else {
			usleep(10000);
		}
	}
	close(ep[0]);
	if (!port)
		bench_die("%s did not start: %s", path, used ? line : "(no output)");
	*pid = p;
	return port;
}

static uint64_t vm_hwm_kb(pid_t p)
{
	char path[64], line[256];
	uint64_t kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)p);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %" SCNu64, &kb) == 1)
			break;
	fclose(f);
	return kb;
}

struct resp {
	char *p;
	size_t len, cap;
	size_t body;           /* offset of the body */
	int gzip;              /* Content-Encoding: gzip */
};

/* GET /metrics; returns the wall seconds from connect to the last byte. */
static double http_get(int port, int gz, struct resp *r)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char req[160];
	uint64_t t0 = bench_now_ns();
	struct timeval tv = { 10, 0 };
	int fd, n, one = 1;
	char *end;

	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		bench_die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		bench_die("connect 127.0.0.1:%d: %s", port, strerror(errno));
	/* HTTP/1.0: the streamed body then ends with the connection, with
	 * no chunk framing among the bytes counted. */
	n = snprintf(req, sizeof(req), "GET /metrics HTTP/1.0\r\nHost: "
		     "127.0.0.1\r\n%sConnection: close\r\n\r\n",
		     gz ? "Accept-Encoding: gzip\r\n" : "");
	if (write(fd, req, (size_t)n) != n)
		bench_die("write: %s", strerror(errno));
	r->len = 0;
	for (;;) {
		ssize_t got;

		if (r->cap - r->len < 65536) {
			r->cap = r->cap * 2 + (1u << 20);
			r->p = realloc(r->p, r->cap);
			if (!r->p)
				bench_die("out of memory");
		}
		got = read(fd, r->p + r->len, r->cap - r->len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			bench_die("read: %s", strerror(errno));
		if (got == 0)
			break;
		r->len += (size_t)got;
	}
	t0 = bench_now_ns() - t0;
	close(fd);
	r->p[r->len] = '\0';
	end = strstr(r->p, "\r\n\r\n");
	if (strncmp(r->p, "HTTP/1.1 200", 12) != 0 || !end)
		bench_die("bad answer from the exporter: %.80s", r->p);
	r->body = (size_t)(end + 4 - r->p);
	*end = '\0';
	r->gzip = strcasestr(r->p, "\r\nContent-Encoding: gzip") != NULL;
	*end = '\r';
	return (double)t0 / 1e9;
}

/* The value of the sample line starting with @prefix (then a space). */
static int sample(const struct resp *r, const char *prefix, int64_t *v)
{
	const char *b = r->p + r->body, *at = b;
	size_t n = strlen(prefix);

	while ((at = strstr(at, prefix))) {
		if ((at == b || at[-1] == '\n') && at[n] == ' ') {
			*v = strtoll(at + n + 1, NULL, 10);
			return 0;
		}
		at += n;
	}
	return -1;
}

static void check_series(const struct resp *r, uint64_t want)
{
	int64_t got;

	if (sample(r, "tally_exporter_series", &got) < 0)
		bench_die("no tally_exporter_series in the scrape");
	if ((uint64_t)got != want)
		bench_die("scrape has %" PRId64 " series, not %" PRIu64, got,
			  want);
}

/* --- Report ------------------------------------------------------------- */

struct xrow {
	const char *what, *unit;
	double v[BENCH_MAX_REPEAT];
	unsigned n;
	struct bench_stats st;
	char ratio[48];
};

static void xrow_add(struct xrow *r, double v)
{
	if (r->n < BENCH_MAX_REPEAT)
		r->v[r->n++] = v;
}

static void print_row(const struct xrow *r)
{
	printf("%-40s %4u %10.2f %10.2f %10.2f  %-7s %s\n", r->what, r->n,
	       r->st.min, r->st.median, r->st.max, r->unit, r->ratio);
}

static void json_row(FILE *f, const struct xrow *r, int last)
{
	bench_json_sample(f, r->what, r->unit, r->v, r->n, &r->st, last);
}

/* One window of adds by every writer, scraped every 100 ms or not;
 * returns adds per CPU-second and (in *wall) per wall second. */
static double window(struct writer *w, unsigned nw, uint32_t ms, int port,
		     uint64_t nseries, struct resp *resp, double *wall)
{
	uint64_t adds = 0, cpu = 0, t0 = bench_now_ns();

	for (unsigned i = 0; i < nw; i++) {
		xwrite(w[i].cmd, "A", 1);
		xwrite(w[i].cmd, &ms, sizeof(ms));
	}
	if (port) {
		/* Prometheus's rhythm, ten times faster than its default. */
		uint64_t next = t0 + 50000000u, end = t0 + (uint64_t)ms * 1000000u;

		while (next + 30000000u < end) {
			uint64_t now = bench_now_ns();

			if (now < next) {
				struct timespec ts = { 0, (long)(next - now) };

				nanosleep(&ts, NULL);
			}
			http_get(port, 0, resp);
			check_series(resp, nseries);
			next += 100000000u;
		}
	}
	for (unsigned i = 0; i < nw; i++) {
		struct wresult r;

		if (xread(w[i].res, &r, sizeof(r)) < 0)
			bench_die("writer %d died", (int)w[i].pid);
		adds += r.adds;
		cpu += r.cpu_ns;
	}
	*wall = (double)adds / ((double)(bench_now_ns() - t0) / 1e9) / 1e6;
	return (double)adds / ((double)cpu / 1e9) / 1e6;
}

int bench_exporter(const struct bench_opts *o)
{
	uint64_t total = o->series, per = (total + NWRITERS - 1) / NWRITERS;
	/* K: a multiple of 8 (workers start and exit 8 at a time). */
	unsigned repeat = o->repeat, kexit = o->quick ? 16 : 64;
	uint32_t ms = o->quick ? 300 : 1000;
	struct writer w[NWRITERS], live, batch[8];
	struct resp resp = { 0 };
	struct bench_doc *d = calloc(1, sizeof(*d));
	struct xrow rows[] = {
		{ .what = "scrape, gzip off", .unit = "ms" },
		{ .what = "scrape, gzip on", .unit = "ms" },
		{ .what = "bytes/series, gzip off", .unit = "B" },
		{ .what = "bytes/series, gzip on", .unit = "B" },
		{ .what = "exporter peak RSS", .unit = "MB" },
		{ .what = "writers, unscraped (per CPU-s)", .unit = "Madd/s" },
		{ .what = "writers, scraped /100ms (per CPU-s)",
		  .unit = "Madd/s" },
		{ .what = "writers, unscraped (wall)", .unit = "Madd/s" },
		{ .what = "writers, scraped /100ms (wall)", .unit = "Madd/s" },
		{ .what = "aggregate scrape, fresh exporter", .unit = "ms" },
		{ .what = "aggregate scrape, saw 8 exit", .unit = "ms" },
		{ .what = "aggregate scrape, saw K exit", .unit = "ms" },
		{ .what = "aggregate exporter (saw K) peak RSS",
		  .unit = "MB" },
	};
	enum { R_OFF, R_GZ, R_BOFF, R_BGZ, R_RSS, R_WCPU0, R_WCPU1, R_WALL0,
	       R_WALL1, R_EX0, R_EX8, R_EXK, R_ARSS, R_N };
	char exbuf[PATH_MAX], name[64];
	const char *exe;
	pid_t ep, ap, bp = 0, cp;
	int port, aport, bport = 0, cport;
	uint64_t nseries = per * NWRITERS, wantx = 0;
	int64_t got;

	if (!d)
		bench_die("out of memory");
	parent_pid = getpid();
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, SIG_IGN);
	bench_progress_init(o, "exporter");
	exe = find_exporter(exbuf, sizeof(exbuf));
	if (!exe)
		bench_die("tally-exporter not found next to tally-bench; give "
			  "--exporter PATH");
	if (exe == exbuf) {
		char real[PATH_MAX];

		if (realpath(exbuf, real))
			snprintf(exbuf, sizeof(exbuf), "%s", real);
	}
	snprintf(tmpdir, sizeof(tmpdir), "/dev/shm/tally-bench-exp.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		tmpdir[0] = '\0';
		bench_die("mkdtemp: %s", strerror(errno));
	}
	/* Before any libtally call: the writers (forked) read it once. */
	setenv("TALLY_DIR", tmpdir, 1);
	unsetenv("TALLY_KEEP");
	unsetenv("TALLY_GROUP");

	for (unsigned i = 0; i < NWRITERS; i++) {
		bench_progress("writer %u/%u: registering %" PRIu64 " series",
			       i + 1, NWRITERS, per);
		snprintf(name, sizeof(name), "bench-exp-w%u", i);
		writer_start(&w[i], name, "bench_exp_requests_total", per, 1);
	}
	port = exporter_start(exe, tmpdir, 0, &ep);

	/* Scrapes, gzip off and on interleaved, after one warm-up each. */
	http_get(port, 0, &resp);
	http_get(port, 1, &resp);
	for (unsigned r = 0; r < repeat; r++) {
		for (int gz = 0; gz < 2; gz++) {
			int g = r % 2 ? !gz : gz;
			double t;

			bench_progress("scrape %u/%u (gzip %s)", r + 1, repeat,
				       g ? "on" : "off");
			t = http_get(port, g, &resp);
			if (g != resp.gzip)
				bench_die("asked gzip %s, got %s", g ? "on" : "off",
					  resp.gzip ? "gzip" : "plain");
			if (!g)
				check_series(&resp, nseries);
			xrow_add(&rows[g ? R_GZ : R_OFF], t * 1e3);
			xrow_add(&rows[g ? R_BGZ : R_BOFF],
				 (double)(resp.len - resp.body) /
				 (double)nseries);
		}
	}
	xrow_add(&rows[R_RSS], (double)vm_hwm_kb(ep) / 1024.0);

	/* The writers, alone and scraped, windows alternated. */
	for (unsigned r = 0; r < repeat; r++) {
		for (int k = 0; k < 2; k++) {
			int scraped = r % 2 ? !k : k;
			double wall, cpu;

			bench_progress("writers %u/%u, %s", r + 1, repeat,
				       scraped ? "scraped" : "unscraped");
			cpu = window(w, NWRITERS, ms, scraped ? port : 0,
				     nseries, &resp, &wall);
			xrow_add(&rows[scraped ? R_WCPU1 : R_WCPU0], cpu);
			xrow_add(&rows[scraped ? R_WALL1 : R_WALL0], wall);
		}
	}
	stop_kid(ep);

	/*
	 * Exited workers.  Exporter A (--aggregate) runs while K workers of
	 * the same series start, are scraped and exit (their segments
	 * removed); exporter B starts before the last 8 of them, exporter C
	 * after all of them, over the same directory.  A and B keep the same
	 * retired series; A has seen K processes exit, B 8, C none.  Their
	 * scrapes, interleaved, differ only by that history.
	 */
	writer_start(&live, "bench-exp-live", "bench_exp_worker_requests_total",
		     per, 1);
	wantx = 1;
	aport = exporter_start(exe, tmpdir, 1, &ap);
	http_get(aport, 0, &resp);
	for (unsigned k = 0; k < kexit; k += 8) {
		bench_progress("workers %u..%u: start, scrape, exit", k + 1,
			       k + 8);
		if (k + 8 >= kexit) {
			bport = exporter_start(exe, tmpdir, 1, &bp);
			http_get(bport, 0, &resp);
		}
		for (unsigned i = 0; i < 8; i++) {
			snprintf(name, sizeof(name), "bench-exp-x%u", k + i);
			/* Worker j adds j + 2 to each of its series. */
			writer_start(&batch[i], name,
				     "bench_exp_worker_requests_total", per,
				     (int64_t)(k + i + 2));
			wantx += k + i + 2;
		}
		http_get(aport, 0, &resp);
		if (k + 8 >= kexit)
			http_get(bport, 0, &resp);
		for (unsigned i = 0; i < 8; i++)
			writer_quit(&batch[i]);
		/* Their files go at exit (TALLY_KEEP is unset); what a dead
		 * worker leaves, a reader's clean-up removes. */
		if (tally_dir_cleanup(tmpdir) < 0)
			bench_die("tally_dir_cleanup: %s", tally_errmsg());
	}
	cport = exporter_start(exe, tmpdir, 1, &cp);
	http_get(cport, 0, &resp);
	for (unsigned r = 0; r < repeat; r++) {
		static const int rot[3][3] = { { 0, 1, 2 }, { 1, 2, 0 },
					       { 2, 0, 1 } };

		bench_progress("aggregate scrapes %u/%u", r + 1, repeat);
		for (int k = 0; k < 3; k++) {
			int e = rot[r % 3][k];
			int pt = e == 0 ? cport : e == 1 ? bport : aport;

			xrow_add(&rows[R_EX0 + e], http_get(pt, 0, &resp) * 1e3);
		}
	}
	http_get(aport, 0, &resp);
	if (sample(&resp, "bench_exp_worker_requests_total{id=\"0\"}", &got) < 0 ||
	    (uint64_t)got != wantx)
		bench_die("--aggregate after %u exited workers: id 0 is %" PRId64
			  ", want %" PRIu64 " (their counts must be kept)",
			  kexit, got, wantx);
	if (sample(&resp, "tally_exporter_retired_segments_total", &got) < 0 ||
	    got != (int64_t)kexit)
		bench_die("retired segments %" PRId64 ", want %u", got, kexit);
	check_series(&resp, 2 * per);
	xrow_add(&rows[R_ARSS], (double)vm_hwm_kb(ap) / 1024.0);
	stop_kid(cp);
	stop_kid(bp);
	stop_kid(ap);
	writer_quit(&live);
	for (unsigned i = 0; i < NWRITERS; i++)
		writer_quit(&w[i]);
	bench_progress_done();

	for (unsigned i = 0; i < R_N; i++)
		bench_stats(rows[i].v, rows[i].n, &rows[i].st);
	{
		double wr = rows[R_WCPU1].st.median / rows[R_WCPU0].st.median;
		double ww = rows[R_WALL1].st.median / rows[R_WALL0].st.median;
		double ex = rows[R_EXK].st.median / rows[R_EX8].st.median;
		double kept = rows[R_EX8].st.median / rows[R_EX0].st.median;

		snprintf(rows[R_GZ].ratio, sizeof(rows[R_GZ].ratio),
			 "%.2fx gzip off", rows[R_GZ].st.median /
			 rows[R_OFF].st.median);
		snprintf(rows[R_WCPU1].ratio, sizeof(rows[R_WCPU1].ratio),
			 "%.3fx unscraped", wr);
		snprintf(rows[R_WALL1].ratio, sizeof(rows[R_WALL1].ratio),
			 "%.3fx unscraped", ww);
		snprintf(rows[R_EX8].ratio, sizeof(rows[R_EX8].ratio),
			 "%.2fx fresh", kept);
		snprintf(rows[R_EXK].ratio, sizeof(rows[R_EXK].ratio),
			 "%.2fx saw 8 (K=%u)", ex, kexit);
		scrape_target(d, "scrape, gzip off (100,000 series, 8 processes)",
			      rows[R_OFF].st.median, nseries);
		scrape_target(d, "scrape, gzip on (100,000 series, 8 processes)",
			      rows[R_GZ].st.median, nseries);
		bench_target(d, "writer adds per CPU-s, scraped / unscraped",
			     ">=", 0.95, wr, "x");
		bench_target(d, "scrape after K exited processes / after 8", "<=",
			     1.10, ex, "x");
		snprintf(d->summary, sizeof(d->summary),
			 "exporter series=%" PRIu64 " procs=%u scrape_ms=%.1f "
			 "scrape_gzip_ms=%.1f bytes_per_series=%.1f "
			 "gzip_bytes_per_series=%.2f rss_mb=%.1f "
			 "writers_scraped=%.3fx writers_scraped_wall=%.3fx "
			 "exited_%u=%.2fx", nseries, NWRITERS,
			 rows[R_OFF].st.median, rows[R_GZ].st.median,
			 rows[R_BOFF].st.median, rows[R_BGZ].st.median,
			 rows[R_RSS].st.median, wr, ww, kexit, ex);
	}
	for (int out = 0; out < 2; out++) {
		/* stdout with --json, DIR/exporter.json with --plot DIR */
		FILE *f = out == 0 ? (o->json ? stdout : NULL) :
				     bench_out_open(o, "exporter.json");

		if (!f)
			continue;
		fprintf(f, "{\n  \"bench\": \"exporter\",\n  \"series\": %"
			PRIu64 ",\n  \"processes\": %u,\n  \"exited\": %u,\n"
			"  \"window_ms\": %u,\n  \"rows\": [\n", nseries,
			NWRITERS, kexit, ms);
		for (unsigned i = 0; i < R_N; i++)
			json_row(f, &rows[i], i + 1 == R_N);
		bench_json_targets_end(f, d);
		if (out == 1)
			fclose(f);
	}
	if (o->json) {
		/* printed above */
	} else {
		printf("tally-bench exporter: %" PRIu64 " series from %u "
		       "processes, %u runs each; %s\n", nseries, NWRITERS,
		       repeat, exe);
		printf("(scrapes: wall time from connect to last byte; writers: "
		       "%u ms windows)\n", ms);
		printf("%-40s %4s %10s %10s %10s  %-7s %s\n", "what", "runs",
		       "min", "median", "max", "unit", "ratio");
		for (unsigned i = 0; i < R_N; i++)
			print_row(&rows[i]);
		bench_print_targets(d, stdout);
		bench_print_summary(d);
	}
	free(resp.p);
	free(d);
	cleanup();
	return 0;
}
