/*
 * test-shared.c: shared zones, attached by name by unrelated processes.
 *
 * The processes here are exec'd copies of this program (never forks that
 * inherit a zone), started with $TALLY_TEST_WORKER naming what they do;
 * they attach the zone through $TALLY_ZONE, as a pre-fork server's
 * workers would, without a line of code.  It proves that:
 *   - processes starting together get one zone, one file, and one series
 *     per name, and their adds sum exactly;
 *   - workers killed with SIGKILL at random moments (most of them inside
 *     a registration or a removal) and restarted leave the zone
 *     consistent: exact totals of the workers that finished, a total
 *     that never goes backwards, no duplicate series, and registrations
 *     and removals afterwards that give every record back;
 *   - the zone outlives its users, dead, and the next process carries on
 *     with its values; the retention removes it only when nobody uses it;
 *   - clean-up never removes the file of a zone a process is attaching;
 *   - the chunks of workers killed while they hold them come back: a
 *     thousand kills leave no more memory than ten, and every series a
 *     killed worker wrote keeps its value; those of a worker of another
 *     PID namespace, whose pid means something else here, stay its own
 *     while it runs;
 *   - a file of another layout, or no shared zone at all, is refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sched.h>
#include <sys/mount.h>

#include "harness.h"
#include "layout.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

#define CHURN_SERIES 16

/* ---- the workers (exec'd copies of this program) -------------------- */

static long env_long(const char *name, long def)
{
	const char *s = getenv(name);

	return s ? strtol(s, NULL, 10) : def;
}

static void register_counter(const char *name, const struct tally_label *l,
			     unsigned nl, tally_counter *c)
{
	struct tally_metric_desc d = desc(TALLY_COUNTER, name);

	d.help = "Test adds.";
	d.labels = l;
	d.nlabels = nl;
	if (tally_counter_register(NULL, &d, c) != 0) {
		fprintf(stderr, "worker: %s\n", tally_errmsg());
		_exit(3);
	}
}

/* A counter of zone @z (NULL: the default) named @name, as the workers
 * register theirs; 0 or what the registration returned. */
static int register_in(struct tally_zone *z, const char *name,
		       const struct tally_label *l, unsigned nl,
		       tally_counter *c)
{
	struct tally_metric_desc d = desc(TALLY_COUNTER, name);

	d.help = "Test adds.";
	d.labels = l;
	d.nlabels = nl;
	return tally_counter_register(z, &d, c);
}

/* count: add 1 to hits_total $TALLY_TEST_ADDS times, then exit. */
static void worker_count(void)
{
	tally_counter c;
	long n = env_long("TALLY_TEST_ADDS", 1000);

	register_counter("hits_total", NULL, 0, &c);
	for (long i = 0; i < n; i++)
		tally_counter_inc(&c);
	exit(0);
}

/* churn: register and remove series of CHURN_SERIES names, forever,
 * until killed. */
static void worker_churn(void)
{
	unsigned seed = (unsigned)getpid();
	tally_counter c[4];
	char v[4][8];

	for (;;) {
		for (int k = 0; k < 4; k++) {
			struct tally_label l = { "i", v[k] };

			snprintf(v[k], sizeof(v[k]), "%u",
				 rand_r(&seed) % CHURN_SERIES);
			register_counter("churn_total", &l, 1, &c[k]);
			tally_counter_inc(&c[k]);
		}
		for (int k = 0; k < 4; k++)
			tally_metric_remove(&c[k].metric);
	}
}

/* attach: attach, add 1, then check (twice, a millisecond apart) that
 * the zone's name still leads to the file this process maps; exit 0, or
 * 1 when clean-up removed it under this process's feet. */
static void worker_attach(void)
{
	struct tally_zone *z = tally_zone_default();
	struct stat named, mine;
	tally_counter c;

	if (!z) {
		fprintf(stderr, "worker: %s\n", tally_errmsg());
		_exit(3);
	}
	register_counter("attach_total", NULL, 0, &c);
	tally_counter_inc(&c);
	for (int i = 0; i < 2; i++) {
		if (stat(tally_zone_path(z), &named) < 0 ||
		    fstat(z->fd, &mine) < 0 || named.st_ino != mine.st_ino ||
		    named.st_dev != mine.st_dev)
			_exit(1);
		usleep(1000);
	}
	exit(0);
}

/* hold: register what a pre-fork worker does (shared series of every
 * kind, and one of its own, hold_done_total{w="$TALLY_TEST_ADDS"}, to
 * which it adds w + 1), say so with a byte on stdout, and wait to be
 * killed. */
static void worker_hold_in(struct tally_zone *z)
{
	long w = env_long("TALLY_TEST_ADDS", 0);
	struct tally_metric_desc d = desc(TALLY_GAUGE, "hold_busy");
	struct tally_label l = { "w", getenv("TALLY_TEST_ADDS") };
	tally_counter c, mine;
	tally_gauge g;
	tally_histogram h;

	d.help = "Busy.";
	if (register_in(z, "hold_hits_total", NULL, 0, &c) != 0 ||
	    tally_gauge_register(z, &d, &g) != 0)
		_exit(3);
	tally_counter_inc(&c);
	tally_gauge_add(&g, 1);
	d = desc(TALLY_HISTOGRAM, "hold_latency_ns");
	d.help = "Latency.";
	if (tally_histogram_register(z, &d, &h) != 0)
		_exit(3);
	tally_histogram_observe(&h, (uint64_t)w);
	if (register_in(z, "hold_done_total", &l, 1, &mine) != 0)
		_exit(3);
	tally_counter_add(&mine, w + 1);
	if (write(1, "r", 1) != 1)
		_exit(4);
	for (;;)
		pause();
}

static void worker_hold(void)
{
	worker_hold_in(NULL);
}

/* The long label value of worker_long's series: 2000 bytes. */
static const char *long_value(void)
{
	static char v[2001];

	for (int i = 0; i < 2000; i++)
		v[i] = (char)('a' + i % 26);
	return v;
}

/* long: add 1 to a series of 2 KB of labels $TALLY_TEST_ADDS times;
 * exit 4 when the zone refuses it with E2BIG. */
static void worker_long(void)
{
	struct tally_label l[] = { { "route", long_value() },
				   { "method", "GET" } };
	struct tally_metric_desc d = desc(TALLY_COUNTER, "long_total");
	tally_counter c;
	long n = env_long("TALLY_TEST_ADDS", 1000);

	d.labels = l;
	d.nlabels = 2;
	if (tally_counter_register(NULL, &d, &c) != 0) {
		fprintf(stderr, "worker: %s\n", tally_errmsg());
		_exit(errno == E2BIG ? 4 : 3);
	}
	for (long i = 0; i < n; i++)
		tally_counter_inc(&c);
	exit(0);
}

/* longchurn: register and remove series of long labels, forever (until
 * SIGKILLed, perhaps under the metrics lock). */
static void worker_longchurn(void)
{
	unsigned seed = (unsigned)getpid();
	char v[600];

	for (;;) {
		struct tally_label l = { "i", v };
		size_t n = 100 + rand_r(&seed) % 400;
		tally_counter c;

		memset(v, 'a' + (int)(rand_r(&seed) % 26), n);
		v[n] = 0;
		register_counter("churn_long_total", &l, 1, &c);
		tally_counter_inc(&c);
		tally_metric_remove(&c.metric);
	}
}

/*
 * deploy: version $TALLY_TEST_VERSION (1 or 2) of a program, whose
 * version 2 changes three definitions and keeps one:
 *   requests_total  a counter, the same in both;
 *   hits_total      a counter whose help text changes;
 *   latency         a histogram in 1, a set gauge in 2 (its type);
 *   routes_total    a family of counters (label route), per-CPU in 1,
 *                   shared in 2 (its mode).
 * Each adds $TALLY_TEST_ADDS to each.  With $TALLY_TEST_GO set, it then
 * creates $TALLY_TEST_GO.ready, waits for $TALLY_TEST_GO to exist (a
 * newer version started meanwhile: a rolling deploy), and adds as much
 * again, to requests_total and to a new child route="late".  Exits 0,
 * or 3 when a registration fails.
 */
static void deploy_check(int rc)
{
	if (rc != 0) {
		fprintf(stderr, "worker: %s\n", tally_errmsg());
		_exit(3);
	}
}

static void worker_deploy(void)
{
	int v2 = env_long("TALLY_TEST_VERSION", 1) == 2;
	long n = env_long("TALLY_TEST_ADDS", 1000);
	const char *go = getenv("TALLY_TEST_GO");
	const char *route[] = { "route" }, *a[] = { "a" }, *late[] = { "late" };
	struct tally_metric_desc d;
	tally_counter req, hits;
	tally_histogram h;
	tally_setgauge g;
	tally_counter_family routes;
	const tally_counter *c;

	d = desc(TALLY_COUNTER, "requests_total");
	d.help = "Requests.";
	deploy_check(tally_counter_register(NULL, &d, &req));
	d = desc(TALLY_COUNTER, "hits_total");
	d.help = v2 ? "Hits, counted by version 2." : "Hits.";
	deploy_check(tally_counter_register(NULL, &d, &hits));
	d = desc(v2 ? TALLY_GAUGE_SET : TALLY_HISTOGRAM, "latency");
	d.help = "Latency.";
	deploy_check(v2 ? tally_setgauge_register(NULL, &d, &g) :
			  tally_histogram_register(NULL, &d, &h));
	d = desc(TALLY_COUNTER, "routes_total");
	d.help = "Requests by route.";
	d.mode = v2 ? TALLY_SHARED : TALLY_PERCPU;
	deploy_check(tally_counter_family_register(NULL, &d, route, 1,
						   &routes));
	deploy_check(tally_counter_family_get(&routes, a, 1, &c));
	for (long i = 0; i < n; i++) {
		tally_counter_inc(&req);
		tally_counter_inc(&hits);
		tally_counter_inc(c);
		if (v2)
			tally_setgauge_set(&g, 7);
		else
			tally_histogram_observe(&h, 100);
	}
	if (go) {
		char ready[PATH_MAX];
		int fd;

		snprintf(ready, sizeof(ready), "%s.ready", go);
		fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			_exit(4);
		close(fd);
		while (access(go, F_OK) != 0)
			usleep(1000);
		/* A child made after the newer version redefined the
		 * family: still this version's generation. */
		deploy_check(tally_counter_family_get(&routes, late, 1, &c));
		for (long i = 0; i < n; i++) {
			tally_counter_inc(&req);
			tally_counter_inc(c);
		}
	}
	exit(0);
}

__attribute__((constructor)) static void worker_main(void)
{
	const char *w = getenv("TALLY_TEST_WORKER");

	if (!w)
		return;
	if (!strcmp(w, "count"))
		worker_count();
	if (!strcmp(w, "churn"))
		worker_churn();
	if (!strcmp(w, "attach"))
		worker_attach();
	if (!strcmp(w, "hold"))
		worker_hold();
	if (!strcmp(w, "long"))
		worker_long();
	if (!strcmp(w, "longchurn"))
		worker_longchurn();
	if (!strcmp(w, "deploy"))
		worker_deploy();
	_exit(2);
}

/* ---- helpers of the tests ------------------------------------------ */

/* Start worker @what in a new program attaching zone @zone of @dir. */
static pid_t spawn(const char *what, const char *dir, const char *zone,
		   long adds)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		char n[32];

		snprintf(n, sizeof(n), "%ld", adds);
		setenv("TALLY_TEST_WORKER", what, 1);
		setenv("TALLY_DIR", dir, 1);
		setenv("TALLY_ZONE", zone, 1);
		setenv("TALLY_TEST_ADDS", n, 1);
		execl("/proc/self/exe", "test-shared-worker", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void wait_ok(pid_t pid)
{
	int st;

	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK_CHILD_OK(st);
}

/* What a pass over a segment finds of the series named @name. */
struct scan {
	int long_ok;            /* long_total's labels were read in full */
	const char *name;
	int found;              /* series of that name */
	int64_t value;          /* their sum */
	char seen[64][32];      /* their label values, for duplicates */
	int dup;
};

static int scan_fn(const struct tally_series_view *v, void *arg)
{
	struct scan *s = arg;
	const char *lv = v->nlabels ? v->label_values[0] : "";

	if (strcmp(v->name, s->name))
		return 0;
	if (!strcmp(v->name, "long_total"))
		s->long_ok = v->nlabels == 2 &&
			     !strcmp(v->label_names[1], "route") &&
			     !strcmp(v->label_values[1], long_value()) &&
			     !strcmp(v->label_values[0], "GET");
	for (int i = 0; i < s->found && i < 64; i++)
		s->dup |= strcmp(s->seen[i], lv) == 0;
	if (s->found < 64)
		snprintf(s->seen[s->found], sizeof(s->seen[0]), "%s", lv);
	s->found++;
	s->value += v->value;
	return 0;
}

static struct scan scan_file(const char *path, const char *name)
{
	struct scan s;
	struct tally_seg *seg = tally_seg_open(path, NULL);

	memset(&s, 0, sizeof(s));
	s.name = name;
	if (!seg)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK(tally_seg_foreach(seg, 0, scan_fn, &s) >= 0);
	tally_seg_close(seg);
	return s;
}

/* The number of *.tally files in @dir, and of *.tmp. */
static int count_files(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t k = strlen(suffix);
	int n = 0;

	CHECK(d != NULL);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);

		n += l > k && strcmp(e->d_name + l - k, suffix) == 0;
	}
	closedir(d);
	return n;
}

/* The *.tmp files of @dir whose creation lock (byte 1) nobody holds. */
static int orphans(const char *dir)
{
	char p[PATH_MAX + 300];
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	CHECK(d != NULL);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
				    .l_start = 1, .l_len = 1 };
		int fd;

		if (l < 4 || strcmp(e->d_name + l - 4, ".tmp"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		CHECK(fd >= 0);
		CHECK_EQ(fcntl(fd, F_OFD_GETLK, &fl), 0);
		n += fl.l_type == F_UNLCK;
		close(fd);
	}
	closedir(d);
	return n;
}

/* ---- the tests ------------------------------------------------------- */

/*
 * Four counting workers start together and are restarted for three
 * generations, while two churning workers are SIGKILLed every few
 * milliseconds and restarted.
 */
TEST_TIMEOUT(unrelated_processes_share_one_zone_exactly, 300)
{
	enum { SLOTS = 4, GENS = 3, CHURNERS = 2 };
	long adds = harness_scale(200000);
	pid_t count[SLOTS], churn[CHURNERS];
	int gen[SLOTS], live = SLOTS, kills = 0;
	unsigned seed = 1;
	char dir[PATH_MAX], path[PATH_MAX + 16];
	int64_t last = 0;

	own_subdir(dir, sizeof(dir), "together");
	snprintf(path, sizeof(path), "%s/one.tally", dir);
	for (int i = 0; i < CHURNERS; i++)
		churn[i] = spawn("churn", dir, "one", 0);
	for (int i = 0; i < SLOTS; i++) {
		count[i] = spawn("count", dir, "one", adds);
		gen[i] = 1;
	}
	while (live > 0 || kills < 100) {
		usleep(500 + rand_r(&seed) % 4500);
		int k = (int)(rand_r(&seed) % CHURNERS);

		kill(churn[k], SIGKILL);
		CHECK_EQ(waitpid(churn[k], NULL, 0), churn[k]);
		kills++;
		churn[k] = spawn("churn", dir, "one", 0);
		for (int i = 0; i < SLOTS; i++) {
			int st;

			if (!count[i] || waitpid(count[i], &st, WNOHANG) != count[i])
				continue;
			CHECK_CHILD_OK(st);
			count[i] = 0;
			if (gen[i] < GENS) {
				count[i] = spawn("count", dir, "one", adds);
				gen[i]++;
			} else {
				live--;
			}
		}
		/* Never backwards, whoever exits or dies. */
		if (access(path, F_OK) == 0) {
			struct scan s = scan_file(path, "hits_total");

			CHECK(s.value >= last);
			last = s.value;
		}
	}
	for (int i = 0; i < CHURNERS; i++) {
		kill(churn[i], SIGKILL);
		CHECK_EQ(waitpid(churn[i], NULL, 0), churn[i]);
	}
	printf("  %d churning workers killed, %ld adds in %d processes\n",
	       kills, adds * SLOTS * GENS, SLOTS * GENS);

	/* One file, one series per name, the exact total.  A worker killed
	 * while it created the zone leaves its temporary file, which nobody
	 * holds: clean-up removes such orphans (after 10 s). */
	CHECK_EQ(count_files(dir, ".tally"), 1);
	CHECK_EQ(count_files(dir, ".tmp"), orphans(dir));
	struct scan hits = scan_file(path, "hits_total");
	struct scan churned = scan_file(path, "churn_total");

	CHECK_EQ(hits.found, 1);
	CHECK_EQ(hits.value, adds * SLOTS * GENS);
	CHECK(!churned.dup);
	CHECK(churned.found <= CHURN_SERIES);
	CHECK(info_of(path).shared);
	CHECK(kills >= 100);

	/* This process attaches too: every churned series is found again
	 * (get-or-create) and counts, and fresh series come and go without
	 * leaving a record behind. */
	fresh_setenv("TALLY_DIR", dir);
	fresh_setenv("TALLY_ZONE", "one");
	for (int i = 0; i < CHURN_SERIES; i++) {
		struct tally_metric_desc d = desc(TALLY_COUNTER, "churn_total");
		char v[8];
		struct tally_label l = { "i", v };
		tally_counter c;
		int64_t before, after;

		snprintf(v, sizeof(v), "%d", i);
		d.help = "Test adds.";
		d.labels = &l;
		d.nlabels = 1;
		CHECK_EQ(tally_counter_register(NULL, &d, &c), 0);
		CHECK_EQ(tally_metric_fetch(&c.metric, &before), 0);
		tally_counter_add(&c, 1000);
		CHECK_EQ(tally_metric_fetch(&c.metric, &after), 0);
		CHECK_EQ(after - before, 1000);
	}
	CHECK(!scan_file(path, "churn_total").dup);
	CHECK_EQ(scan_file(path, "churn_total").found, CHURN_SERIES);
	uint32_t used[2];

	for (int round = 0; round < 2; round++) {
		tally_counter c[100];

		for (int i = 0; i < 100; i++) {
			char v[8];
			struct tally_label l = { "i", v };

			snprintf(v, sizeof(v), "%d", i);
			reg(NULL, desc(TALLY_COUNTER, "fresh_total"), &l, 1,
			    &c[i].metric);
		}
		for (int i = 0; i < 100; i++)
			CHECK_EQ(tally_metric_remove(&c[i].metric), 0);
		used[round] = info_of(path).series_used;
	}
	CHECK_EQ(used[1], used[0]);
	CHECK_EQ(scan_file(path, "fresh_total").found, 0);
}

/* The zone stays after its last user, dead; the next one carries on. */
TEST(shared_zone_outlives_its_users)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	struct tally_seg_info info;
	pid_t holder;

	own_subdir(dir, sizeof(dir), "outlives");
	snprintf(path, sizeof(path), "%s/app.tally", dir);
	wait_ok(spawn("count", dir, "app", 5));
	info = info_of(path);
	CHECK(info.shared);
	CHECK(!info.alive);
	CHECK(!info.in_use);
	CHECK_EQ(scan_file(path, "hits_total").value, 5);
	wait_ok(spawn("count", dir, "app", 7));
	CHECK_EQ(scan_file(path, "hits_total").value, 12);

	/* The retention never removes it while a process uses it ... */
	holder = spawn("churn", dir, "app", 0);
	for (int i = 0; i < 200 && !info_of(path).alive; i++)
		usleep(10000);
	CHECK(info_of(path).alive);
	CHECK_EQ(tally_dir_expire(dir, 0, NULL, NULL), 0);
	CHECK_EQ(access(path, F_OK), 0);
	kill(holder, SIGKILL);
	CHECK_EQ(waitpid(holder, NULL, 0), holder);
	CHECK(!info_of(path).alive);
	CHECK_EQ(scan_file(path, "hits_total").value, 12);

	/* ... nor before its time, and a process that comes back within it
	 * makes it live again (clean-up's mark is taken away). */
	CHECK_EQ(tally_dir_expire(dir, 3600, NULL, NULL), 0);
	CHECK_EQ(access(path, F_OK), 0);
	wait_ok(spawn("count", dir, "app", 1));
	CHECK_EQ(scan_file(path, "hits_total").value, 13);
	{
		struct stat st;

		CHECK_EQ(stat(path, &st), 0);
		CHECK(st.st_mode & S_IWUSR);
	}

	/* Once nobody uses it, the retention removes it; the next process
	 * starts a new zone. */
	CHECK_EQ(tally_dir_expire(dir, 0, NULL, NULL), 1);
	CHECK(access(path, F_OK) < 0);
	wait_ok(spawn("count", dir, "app", 3));
	CHECK_EQ(scan_file(path, "hits_total").value, 3);
}

/*
 * Clean-up with no retention, in a loop, against processes that attach,
 * add and exit: it removes the zone between users, never under one
 * (each worker checks that the name still leads to its file).
 */
TEST_TIMEOUT(cleanup_never_removes_a_zone_being_attached, 300)
{
	long n = harness_scale(1000);
	char dir[PATH_MAX];
	pid_t w[4] = { 0 };
	long started = 0, removed = 0;

	own_subdir(dir, sizeof(dir), "attach");
	while (started < n || w[0] || w[1] || w[2] || w[3]) {
		for (int i = 0; i < 4; i++) {
			int st;

			if (w[i] && waitpid(w[i], &st, WNOHANG) == w[i]) {
				CHECK_CHILD_OK(st);
				w[i] = 0;
			}
			if (!w[i] && started < n) {
				w[i] = spawn("attach", dir, "busy", 0);
				started++;
			}
		}
		int r = tally_dir_expire(dir, 0, NULL, NULL);

		CHECK(r >= 0);
		removed += r;
	}
	printf("  %ld processes attached, the zone removed %ld times "
	       "between them\n", n, removed);
	CHECK(removed > 0);
}

/*
 * Starts @n holders, ten at a time, and kills each ten with SIGKILL once
 * all of them say (a byte on their stdout) that they hold their chunks.
 * Holder i is a child that runs @hold(@arg), which does not return, with
 * TALLY_TEST_ADDS=i.
 */
static void kill_in_tens(long n, void (*hold)(void *), void *arg)
{
	for (long done = 0; done < n;) {
		pid_t w[10];
		long k = n - done < 10 ? n - done : 10;

		for (long i = 0; i < k; i++) {
			int fds[2];
			char b;

			CHECK_EQ(pipe(fds), 0);
			w[i] = fork();
			CHECK(w[i] >= 0);
			if (w[i] == 0) {
				char v[32];

				dup2(fds[1], 1);
				close(fds[0]);
				snprintf(v, sizeof(v), "%ld", done + i);
				setenv("TALLY_TEST_ADDS", v, 1);
				hold(arg);
			}
			close(fds[1]);
			CHECK_EQ(read(fds[0], &b, 1), 1);
			close(fds[0]);
		}
		for (long i = 0; i < k; i++) {
			int st;

			kill(w[i], SIGKILL);
			CHECK_EQ(waitpid(w[i], &st, 0), w[i]);
			CHECK(WIFSIGNALED(st));
		}
		done += k;
	}
}

/* A holder of kill_in_tens(): worker "hold" of zone "kills" of the
 * directory @dir, executed afresh. */
static void exec_holder(void *dir)
{
	setenv("TALLY_TEST_WORKER", "hold", 1);
	setenv("TALLY_DIR", dir, 1);
	setenv("TALLY_ZONE", "kills", 1);
	execl("/proc/self/exe", "test-shared-worker", (char *)NULL);
	_exit(127);
}

/* A holder of kill_in_tens(): worker "hold" of the zone @z, forked. */
static void forked_holder(void *z)
{
	worker_hold_in(z);
}

/*
 * @n workers attach zone "kills" of @dir, register and hold their chunks,
 * and are killed with SIGKILL, ten at a time; then one more worker comes
 * and goes, as a recycled worker would.  Returns the bytes the zone's file
 * then holds, after checking that every series kept its value.
 */
static uint64_t kill_holders(const char *dir, long n)
{
	char path[PATH_MAX + 16];
	struct tally_seg_info info;

	snprintf(path, sizeof(path), "%s/kills.tally", dir);
	kill_in_tens(n, exec_holder, (void *)dir);
	wait_ok(spawn("count", dir, "kills", 1));
	info = info_of(path);
	CHECK_EQ(scan_file(path, "hold_hits_total").value, n);
	CHECK_EQ(scan_file(path, "hold_busy").value, n);
	{
		struct scan s = scan_file(path, "hold_done_total");

		CHECK_EQ(s.found, n);
		CHECK_EQ(s.value, n * (n + 1) / 2);
		CHECK(!s.dup);
	}
	return info.resident_bytes;
}

/*
 * Workers killed while they hold chunks: their chunks come back to the
 * zone (the blocks of the series they wrote stay, with their values), so
 * a thousand kills leave less than 1 MiB more memory than ten.
 */
TEST_TIMEOUT(chunks_of_killed_attachers_come_back, 600)
{
	long n = harness_scale(1000);
	char dir10[PATH_MAX], dirn[PATH_MAX];
	uint64_t r10, rn;

	own_subdir(dir10, sizeof(dir10), "kills10");
	own_subdir(dirn, sizeof(dirn), "killsn");
	r10 = kill_holders(dir10, 10);
	rn = kill_holders(dirn, n);
	printf("  resident after 10 kills: %llu bytes; after %ld: %llu "
	       "(%+lld)\n", (unsigned long long)r10, n,
	       (unsigned long long)rn, (long long)(rn - r10));
	CHECK(rn < r10 + (1u << 20));
}

/*
 * The same with workers forked from a master that attached the zone (a
 * pre-fork server that loads its application first): each child, at its
 * first chunk, takes back the chunks of the children killed before it.
 * Runs in a child of the test (a fresh process: libtally is set up from
 * the environment given here); writes the resident bytes after 10 kills
 * and after *n to res[0] and res[1].
 */
struct forked_kills {
	char dir[PATH_MAX];
	long n;
	uint64_t res[2];
};

static uint64_t kill_forked(const char *dir, const char *zone, long n)
{
	struct tally_zone *z = tally_zone_create(zone, &(struct tally_zone_opts){
		0, 0, TALLY_ZONE_SHARED });
	char path[PATH_MAX + 80];
	tally_counter hits;

	CHECK(z != NULL);
	snprintf(path, sizeof(path), "%s/%s.tally", dir, zone);
	/* The master registers first (an application loaded before the
	 * fork): it has taken its chunks, and swept, before any child. */
	CHECK_EQ(register_in(z, "hold_hits_total", NULL, 0, &hits), 0);
	kill_in_tens(n, forked_holder, z);
	/* One more worker comes and goes. */
	{
		pid_t c = fork();

		CHECK(c >= 0);
		if (c == 0) {
			tally_counter x;
			struct tally_metric_desc d = desc(TALLY_COUNTER,
							  "hold_hits_total");

			d.help = "Test adds.";
			_exit(tally_counter_register(z, &d, &x) != 0);
		}
		wait_ok(c);
	}
	CHECK_EQ(scan_file(path, "hold_done_total").found, n);
	return info_of(path).resident_bytes;
}

static void forked_kills(void *arg)
{
	struct forked_kills *f = arg;

	fresh_setenv("TALLY_DIR", f->dir);
	f->res[0] = kill_forked(f->dir, "forks10", 10);
	f->res[1] = kill_forked(f->dir, "forksn", f->n);
	printf("  forked: resident after 10 kills: %llu bytes; after %ld: "
	       "%llu (%+lld)\n", (unsigned long long)f->res[0], f->n,
	       (unsigned long long)f->res[1],
	       (long long)(f->res[1] - f->res[0]));
	CHECK(f->res[1] < f->res[0] + (1u << 20));
	exit(0);
}

TEST_TIMEOUT(chunks_of_killed_forked_workers_come_back, 600)
{
	struct forked_kills f;

	memset(&f, 0, sizeof(f));
	f.n = harness_scale(1000);
	own_subdir(f.dir, sizeof(f.dir), "forks");
	CHECK_CHILD_OK(harness_child(forked_kills, &f));
}

/* The chunks of zone file @path owned by a thread of process @pid (as the
 * owner recorded its pid, in its own PID namespace). */
static int owned_by(const char *path, int pid)
{
	struct tally__hdr h;
	struct tally__chunk c;
	int fd = open(path, O_RDONLY | O_CLOEXEC), n = 0;
	uint64_t bumped;

	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	bumped = atomic_load(&h.chunks_bumped);
	for (uint64_t i = 0; i < bumped && i < h.nchunks; i++) {
		CHECK_EQ(pread(fd, &c, sizeof(c), (off_t)(h.meta_off +
							   i * sizeof(c))),
			 (ssize_t)sizeof(c));
		n += atomic_load(&c.owner) != 0 && c.owner_pid == pid;
	}
	close(fd);
	return n;
}

/*
 * Start worker "hold" as pid 1 of a PID namespace of its own, with a
 * /proc of its own, attached to zone @zone of @dir; waits until it holds
 * its chunks.  *@outer is the process to wait for, *@pid1 the worker
 * (as this namespace sees it).  0, or -1 when no namespace can be made.
 */
static int start_pid1(const char *dir, const char *zone, pid_t *outer,
		      pid_t *pid1)
{
	int ready[2], pidp[2], st;
	pid_t c1, c2 = 0;
	char b;

	CHECK_EQ(pipe(ready), 0);
	CHECK_EQ(pipe(pidp), 0);
	c1 = fork();
	CHECK(c1 >= 0);
	if (c1 == 0) {
		close(ready[0]);
		close(pidp[0]);
		if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0)
			_exit(77);
		c2 = fork();
		if (c2 == 0) {
			/* pid 1 of the namespace, with a /proc of its own. */
			if (mount("none", "/", NULL, MS_REC | MS_PRIVATE,
				  NULL) < 0 ||
			    mount("proc", "/proc", "proc", 0, NULL) < 0)
				_exit(78);
			dup2(ready[1], 1);
			setenv("TALLY_TEST_WORKER", "hold", 1);
			setenv("TALLY_DIR", dir, 1);
			setenv("TALLY_ZONE", zone, 1);
			setenv("TALLY_TEST_ADDS", "0", 1);
			execl("/proc/self/exe", "test-shared-worker",
			      (char *)NULL);
			_exit(127);
		}
		close(ready[1]);
		if (c2 < 0 || write(pidp[1], &c2, sizeof(c2)) != sizeof(c2))
			_exit(2);
		waitpid(c2, &st, 0);
		_exit(0);
	}
	close(ready[1]);
	close(pidp[1]);
	if (read(pidp[0], &c2, sizeof(c2)) != sizeof(c2) ||
	    read(ready[0], &b, 1) != 1) {
		CHECK_EQ(waitpid(c1, &st, 0), c1);
		close(ready[0]);
		close(pidp[0]);
		return -1;
	}
	close(ready[0]);
	close(pidp[0]);
	*outer = c1;
	*pid1 = c2;
	return 0;
}

/*
 * A worker in a PID namespace of its own (a container sharing /dev/shm)
 * holds chunks of the zone as pid 1, with its own /proc: here pid 1 is
 * another process, started at another time.  Processes of this namespace
 * that come and go never take its chunks while it runs (its owner locks
 * say so); once it is killed, the next one does.  Needs root (skipped
 * otherwise).
 */
TEST(chunks_of_another_pid_namespace_stay_its_own)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	pid_t c1, c2;
	int n0, st;

	own_subdir(dir, sizeof(dir), "pidns");
	snprintf(path, sizeof(path), "%s/ns.tally", dir);
	wait_ok(spawn("count", dir, "ns", 1));
	if (start_pid1(dir, "ns", &c1, &c2) < 0)
		harness_skip("cannot make a PID namespace (not root?)");
	n0 = owned_by(path, 1);
	CHECK(n0 > 0);
	for (int i = 0; i < 3; i++)
		wait_ok(spawn("count", dir, "ns", 1));
	CHECK_EQ(owned_by(path, 1), n0);

	kill(c2, SIGKILL);
	CHECK_EQ(waitpid(c1, &st, 0), c1);
	CHECK_CHILD_OK(st);
	wait_ok(spawn("count", dir, "ns", 1));
	CHECK_EQ(owned_by(path, 1), 0);
	CHECK_EQ(scan_file(path, "hold_hits_total").value, 1);
	CHECK_EQ(scan_file(path, "hits_total").value, 5);
}

static uint64_t resident_of(const char *path)
{
	struct stat st;

	CHECK_EQ(stat(path, &st), 0);
	return (uint64_t)st.st_blocks * 512u;
}

/*
 * A container's service restarted again and again: every incarnation is
 * pid 1 of its PID namespace, and most end in SIGKILL.  Each new one
 * takes back the chunks of the killed one at its first chunk, although
 * their owner's pid is its own: a chunk's owner is judged by the lock of
 * its token, which a new pid 1 does not hold.  After 40 kills the zone
 * holds the chunks of one incarnation, and no more memory than after 3.
 * Needs root (skipped otherwise).
 */
TEST_TIMEOUT(a_killed_pid_1_leaves_no_chunks_behind, 240)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	uint64_t after3 = 0, last = 0;
	cpu_set_t all, one;
	pid_t outer, pid1;
	int n0 = 0, st;

	/* Every incarnation on one CPU: a first add on another CPU makes
	 * that CPU's pages of the slab, which is growth by CPUs that wrote,
	 * not by kills. */
	CHECK_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all)) {
			CPU_SET(c, &one);
			break;
		}
	CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
	own_subdir(dir, sizeof(dir), "pid1");
	snprintf(path, sizeof(path), "%s/app.tally", dir);
	wait_ok(spawn("count", dir, "app", 1));
	for (int k = 1; k <= 40; k++) {
		if (start_pid1(dir, "app", &outer, &pid1) < 0)
			harness_skip("cannot make a PID namespace (not "
				     "root?)");
		if (k == 1)
			n0 = owned_by(path, 1);
		CHECK(n0 > 0);
		/* The chunks of pid 1: this incarnation's only. */
		CHECK_EQ(owned_by(path, 1), n0);
		kill(pid1, SIGKILL);
		CHECK_EQ(waitpid(outer, &st, 0), outer);
		CHECK_CHILD_OK(st);
		last = resident_of(path);
		if (k == 3)
			after3 = last;
	}
	printf("    resident after 3 kills %llu bytes, after 40 %llu\n",
	       (unsigned long long)after3, (unsigned long long)last);
	CHECK(last <= after3);
	CHECK_EQ(owned_by(path, 1), n0);
	CHECK_EQ(scan_file(path, "hold_hits_total").value, 40);
	CHECK_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
}

/*
 * A thread's chunks are its own through the lock of its owner token, on
 * a description of the zone file this process opens at its first chunk.
 * When that description cannot be opened (no file descriptor left), the
 * token would own chunks with no lock, and a sweeper of another PID
 * namespace would take them back while they are used: the allocation
 * fails instead, owning no chunk, and works once a descriptor is free.
 */
static void no_fd_child(void *arg)
{
	const char *path = arg;
	struct rlimit rl = { 64, 64 };
	struct tally_zone *z;
	tally_block *b;
	int64_t v;
	int last = -1, prev = -1, fd;

	z = tally_zone_create("nofd", &(struct tally_zone_opts){
					      0, 0, TALLY_ZONE_SHARED });
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	while ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
		prev = last;
		last = fd;
	}
	CHECK_EQ(errno, EMFILE);
	CHECK(prev >= 0);
	for (unsigned mode = TALLY_PERCPU; mode <= TALLY_ADAPTIVE; mode++) {
		errno = 0;
		CHECK(tally_block_alloc(z, 1, mode) == NULL);
		CHECK_EQ(errno, EMFILE);
		CHECK(strstr(tally_errmsg(), "lock") != NULL);
	}
	/* One descriptor for the library, one for owned_by(). */
	close(last);
	close(prev);
	CHECK_EQ(owned_by(path, getpid()), 0);
	b = tally_block_alloc(z, 1, TALLY_PERCPU);
	CHECK(b != NULL);
	tally_block_add(b, 0, 7);
	CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
	CHECK_EQ(v, 7);
	CHECK(owned_by(path, getpid()) > 0);
	CHECK_EQ(tally_block_free(z, b), 0);
	exit(0);
}

TEST(an_owner_token_without_its_lock_owns_no_chunk)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];

	own_subdir(dir, sizeof(dir), "nofd");
	setenv("TALLY_DIR", dir, 1);
	snprintf(path, sizeof(path), "%s/nofd.tally", dir);
	CHECK_CHILD_OK(harness_child(no_fd_child, path));
	unsetenv("TALLY_DIR");
}

/* What cannot be attached is refused, with the reason. */
static void make_shared(void *arg)
{
	(void)arg;
	fresh_setenv("TALLY_NSLABS", "2");
	CHECK(tally_zone_create("mixed", &(struct tally_zone_opts){
					 0, 0, TALLY_ZONE_SHARED }) != NULL);
	exit(0);
}

static void attach_other_cpus(void *arg)
{
	(void)arg;
	fresh_setenv("TALLY_NSLABS", "3");
	CHECK(tally_zone_create("mixed", &(struct tally_zone_opts){
					 0, 0, TALLY_ZONE_SHARED }) == NULL);
	CHECK_EQ(errno, EEXIST);
	CHECK(strstr(tally_errmsg(), "CPU") != NULL);
	exit(0);
}

static void bad_zone_env(void *arg)
{
	(void)arg;
	fresh_setenv("TALLY_ZONE", "no/slash");
	CHECK(tally_zone_default() == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(strstr(tally_errmsg(), "TALLY_ZONE") != NULL);
	exit(0);
}

/*
 * A series of long labels in a shared zone: three processes register it
 * (one series), add exactly, while another registers and removes long
 * series and is SIGKILLed (perhaps holding the metrics lock: the next
 * process repairs the table, extensions included).  A zone made by an
 * older library (format 2.4) refuses long labels with E2BIG and keeps
 * the short ones.
 */
TEST_TIMEOUT(long_labels_in_a_shared_zone, 120)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	pid_t w[3], churn;
	struct scan sc;
	int st;

	own_subdir(dir, sizeof(dir), "long");
	snprintf(path, sizeof(path), "%s/app.tally", dir);
	wait_ok(spawn("count", dir, "app", 1));
	for (int round = 0; round < 5; round++) {
		churn = spawn("longchurn", dir, "app", 0);
		for (int i = 0; i < 3; i++)
			w[i] = spawn("long", dir, "app", 1000);
		usleep(20000 + 10000 * round);
		kill(churn, SIGKILL);
		CHECK_EQ(waitpid(churn, NULL, 0), churn);
		for (int i = 0; i < 3; i++)
			wait_ok(w[i]);
	}
	wait_ok(spawn("count", dir, "app", 1)); /* repairs, if need be */
	sc = scan_file(path, "long_total");
	CHECK_EQ(sc.found, 1);
	CHECK(sc.long_ok);
	CHECK_EQ(sc.value, 15000);
	CHECK_EQ(scan_file(path, "hits_total").value, 2);
	/* Each churner, killed between a registration and its removal, may
	 * leave its one series: at most one a round. */
	CHECK(scan_file(path, "churn_long_total").found <= 5);

	/* A 2.4 zone: no long labels, and it says why. */
	wait_ok(spawn("count", dir, "old", 1));
	snprintf(path, sizeof(path), "%s/old.tally", dir);
	{
		int fd = open(path, O_RDWR);
		uint16_t minor = 4;

		CHECK(fd >= 0);
		CHECK_EQ(pwrite(fd, &minor, 2, 10), 2);
		close(fd);
	}
	churn = spawn("long", dir, "old", 1);
	CHECK_EQ(waitpid(churn, &st, 0), churn);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 4);
	wait_ok(spawn("count", dir, "old", 1));
	CHECK_EQ(scan_file(path, "hits_total").value, 2);
	CHECK_EQ(scan_file(path, "long_total").found, 0);
}

/*
 * Pernode adds of a shared zone go to the page of the adding process's
 * node, from its own node map: a process that counts more nodes than the
 * zone was made for would add to pages never reserved, which readers do
 * not sum.  Its attach is refused; one with the zone's count adds
 * exactly.  TALLY_NSLABS=4 keeps 4 nodes from being cut to the CPUs.
 */
#define NODE_ADDS 5000

static void nodes_child(void *arg)
{
	const char *nodes = arg;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "node_hits_total");
	struct tally_zone *z;
	tally_counter c;

	fresh_setenv("TALLY_NSLABS", "4");
	fresh_setenv("TALLY_NODES", nodes);
	z = tally_zone_create("nodes", &(struct tally_zone_opts){
					       0, 0, TALLY_ZONE_SHARED });
	if (strcmp(nodes, "4") == 0) {
		CHECK(z == NULL);
		CHECK_EQ(errno, EEXIST);
		CHECK(strstr(tally_errmsg(), "made for 2 NUMA nodes") != NULL);
		CHECK(strstr(tally_errmsg(), "counts 4 (TALLY_NODES)") != NULL);
		exit(0);
	}
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	d.help = "Test adds.";
	d.mode = TALLY_PERNODE;
	CHECK_EQ(tally_counter_register(z, &d, &c), 0);
	for (int i = 0; i < harness_ncpus() && i < 4; i++) {
		harness_pin(i);
		for (int k = 0; k < NODE_ADDS; k++)
			tally_counter_inc(&c);
	}
	harness_pin(-1);
	exit(0);
}

TEST(a_shared_zone_of_another_node_count_is_refused)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	int per = NODE_ADDS * (harness_ncpus() < 4 ? harness_ncpus() : 4);

	own_subdir(dir, sizeof(dir), "nodes");
	setenv("TALLY_DIR", dir, 1);
	snprintf(path, sizeof(path), "%s/nodes.tally", dir);
	CHECK_CHILD_OK(harness_child(nodes_child, "2"));
	CHECK_CHILD_OK(harness_child(nodes_child, "4"));
	CHECK_CHILD_OK(harness_child(nodes_child, "2"));
	CHECK_EQ(scan_file(path, "node_hits_total").value, 2 * per);
	unsetenv("TALLY_DIR");
}

TEST(what_cannot_be_attached_is_refused)
{
	const struct tally_zone_opts shared = { 0, 0, TALLY_ZONE_SHARED };
	char dir[PATH_MAX], p[PATH_MAX + 32];
	struct tally_zone *z;
	int fd;

	own_subdir(dir, sizeof(dir), "refused");
	setenv("TALLY_DIR", dir, 1);
	CHECK_CHILD_OK(harness_child(make_shared, NULL));
	CHECK_CHILD_OK(harness_child(attach_other_cpus, NULL));
	CHECK_CHILD_OK(harness_child(bad_zone_env, NULL));

	/* Garbage, and a zone of one process, under a shared zone's name. */
	snprintf(p, sizeof(p), "%s/junk.tally", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "not a zone", 10), 10);
	close(fd);
	fresh_setenv("TALLY_DIR", dir);
	CHECK(tally_zone_create("junk", &shared) == NULL);
	CHECK_EQ(errno, EEXIST);
	z = tally_zone_create("plain", NULL);
	CHECK(z != NULL);
	snprintf(p, sizeof(p), "%s/plain.tally", dir);
	CHECK_EQ(link(tally_zone_path(z), p), 0);
	CHECK(tally_zone_create("plain", &shared) == NULL);
	CHECK_EQ(errno, EEXIST);
	CHECK(strstr(tally_errmsg(), "not a shared zone") != NULL);

	/* No name to share; and once per process. */
	CHECK(tally_zone_create("anon", &(struct tally_zone_opts){
					0, 0, TALLY_ZONE_SHARED | TALLY_ZONE_ANON }) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(tally_zone_create("twice", &shared) != NULL);
	CHECK(tally_zone_create("twice", &shared) == NULL);
	CHECK_EQ(errno, EEXIST);

	/* A shared zone of a newer format minor: its writers may follow
	 * rules this library does not know (2.4's owned fallback copies,
	 * say), so it is not attached for writing. */
	wait_ok(spawn("count", dir, "newer", 1));
	snprintf(p, sizeof(p), "%s/newer.tally", dir);
	fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	{
		uint16_t minor;

		CHECK_EQ(pread(fd, &minor, 2, 10), 2);
		minor++;
		CHECK_EQ(pwrite(fd, &minor, 2, 10), 2);
	}
	close(fd);
	CHECK(tally_zone_create("newer", &shared) == NULL);
	CHECK_EQ(errno, EEXIST);
	CHECK(strstr(tally_errmsg(), "newer libtally") != NULL);

	/* A file of another user is never attached (root only). */
	if (geteuid() == 0) {
		wait_ok(spawn("count", dir, "foreign", 1));
		snprintf(p, sizeof(p), "%s/foreign.tally", dir);
		CHECK_EQ(chown(p, 65534, 65534), 0);
		CHECK(tally_zone_create("foreign", &shared) == NULL);
		CHECK_EQ(errno, EPERM);
	}
}

/* ---- a deploy that changes definitions ------------------------------ */

/* Start version @version of the deploy worker on zone "svc" of @dir. */
static pid_t spawn_deploy(const char *dir, int version, long adds,
			  const char *go)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		char n[32], v[8];

		snprintf(n, sizeof(n), "%ld", adds);
		snprintf(v, sizeof(v), "%d", version);
		setenv("TALLY_TEST_WORKER", "deploy", 1);
		setenv("TALLY_DIR", dir, 1);
		setenv("TALLY_ZONE", "svc", 1);
		setenv("TALLY_TEST_ADDS", n, 1);
		setenv("TALLY_TEST_VERSION", v, 1);
		if (go)
			setenv("TALLY_TEST_GO", go, 1);
		execl("/proc/self/exe", "test-shared-deploy", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* What a reader shows of each name of the deploy worker. */
struct shown {
	const char *name;
	int n;                  /* series */
	unsigned kind, mode;
	int64_t value;          /* their sum */
	char help[64];
	int64_t route_a, route_late;
};

static int shown_fn(const struct tally_series_view *v, void *arg)
{
	struct shown *s = arg;

	for (; s->name; s++) {
		if (strcmp(v->name, s->name))
			continue;
		if (s->n && (s->kind != v->kind || s->mode != v->mode))
			s->kind = 99; /* two definitions shown */
		else
			s->kind = v->kind;
		s->mode = v->mode;
		s->n++;
		s->value += v->value;
		snprintf(s->help, sizeof(s->help), "%s", v->help);
		if (v->nlabels == 1 && !strcmp(v->label_values[0], "a"))
			s->route_a += v->value;
		if (v->nlabels == 1 && !strcmp(v->label_values[0], "late"))
			s->route_late += v->value;
	}
	return 0;
}

enum { REQ, HITS, LAT, ROUTES };

static void show(const char *path, struct shown out[5])
{
	struct tally_seg *seg = tally_seg_open(path, NULL);

	memset(out, 0, 5 * sizeof(out[0]));
	out[REQ].name = "requests_total";
	out[HITS].name = "hits_total";
	out[LAT].name = "latency";
	out[ROUTES].name = "routes_total";
	if (!seg)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK(tally_seg_foreach(seg, 0, shown_fn, out) >= 0);
	tally_seg_close(seg);
}

/*
 * A restart within the retention whose new version changes a help text,
 * a type and a mode: it starts (today's registrations were refused with
 * EINVAL), the unchanged counter goes on exactly, and readers show each
 * name once, as the new version defines it.
 */
TEST(restart_with_changed_definitions)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	struct shown s[5];

	own_subdir(dir, sizeof(dir), "redefine");
	snprintf(path, sizeof(path), "%s/svc.tally", dir);
	wait_ok(spawn_deploy(dir, 1, 1000, NULL));
	show(path, s);
	CHECK_EQ(s[REQ].value, 1000);
	CHECK_EQ(s[LAT].kind, TALLY_HISTOGRAM);
	CHECK_EQ(info_of(path).redefinitions, 0);

	wait_ok(spawn_deploy(dir, 2, 500, NULL));
	show(path, s);
	CHECK_EQ(s[REQ].n, 1);
	CHECK_EQ(s[REQ].value, 1500);
	CHECK_EQ(s[HITS].n, 1);
	CHECK_EQ(s[HITS].value, 1500);  /* a help text is no new series */
	CHECK(!strcmp(s[HITS].help, "Hits, counted by version 2."));
	CHECK_EQ(s[LAT].n, 1);
	CHECK_EQ(s[LAT].kind, TALLY_GAUGE_SET);
	CHECK_EQ(s[LAT].value, 7);
	CHECK_EQ(s[ROUTES].n, 1);
	CHECK_EQ(s[ROUTES].mode, TALLY_SHARED);
	CHECK_EQ(s[ROUTES].value, 500);
	CHECK_EQ(info_of(path).redefinitions, 2);

	/* A rollback is one more change: version 1's generations are
	 * current again, with their series and counts (no new records). */
	wait_ok(spawn_deploy(dir, 1, 10, NULL));
	show(path, s);
	CHECK_EQ(s[REQ].value, 1510);
	CHECK_EQ(s[LAT].kind, TALLY_HISTOGRAM);
	CHECK_EQ(s[LAT].n, 1);
	CHECK_EQ(s[LAT].value, 1010);   /* observations of both runs of 1 */
	CHECK_EQ(s[ROUTES].mode, TALLY_PERCPU);
	CHECK_EQ(s[ROUTES].route_a, 1010);
	CHECK(!strcmp(s[HITS].help, "Hits."));
	CHECK_EQ(info_of(path).redefinitions, 4);
	CHECK_EQ(info_of(path).families, 6);

	/* The way to start from zero that tally(3) gives, TALLY_RETAIN=0
	 * tallystat --clean, once no process uses the zone. */
	CHECK_EQ(tally_dir_expire(dir, 0, NULL, NULL), 1);
	CHECK(access(path, F_OK) < 0);
	wait_ok(spawn_deploy(dir, 2, 1, NULL));
	show(path, s);
	CHECK_EQ(s[REQ].value, 1);
	CHECK_EQ(info_of(path).redefinitions, 0);
}

/*
 * A rolling deploy: version 2 starts and redefines while version 1 runs
 * and goes on counting, also into a child it makes afterwards.  Both
 * start, no count of the unchanged counter is lost, and readers show
 * version 2's definitions only, never two of one name.
 */
TEST(rolling_deploy_with_changed_definitions)
{
	char dir[PATH_MAX], path[PATH_MAX + 16], go[PATH_MAX + 16],
		ready[PATH_MAX + 32];
	struct shown s[5];
	pid_t old;
	int fd;

	own_subdir(dir, sizeof(dir), "rolling");
	snprintf(path, sizeof(path), "%s/svc.tally", dir);
	snprintf(go, sizeof(go), "%s/go", dir);
	snprintf(ready, sizeof(ready), "%s.ready", go);
	old = spawn_deploy(dir, 1, 1000, go);
	for (int i = 0; i < 3000 && access(ready, F_OK) != 0; i++)
		usleep(10000);
	CHECK_EQ(access(ready, F_OK), 0);
	wait_ok(spawn_deploy(dir, 2, 300, NULL));
	fd = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	wait_ok(old);

	show(path, s);
	CHECK_EQ(s[REQ].n, 1);
	CHECK_EQ(s[REQ].value, 2000 + 300);
	CHECK_EQ(s[HITS].value, 1000 + 300);
	CHECK(!strcmp(s[HITS].help, "Hits, counted by version 2."));
	CHECK_EQ(s[LAT].n, 1);
	CHECK_EQ(s[LAT].kind, TALLY_GAUGE_SET);
	/* Version 2's generation of routes_total: its child only, not the
	 * old version's (kept apart, not shown). */
	CHECK_EQ(s[ROUTES].n, 1);
	CHECK_EQ(s[ROUTES].mode, TALLY_SHARED);
	CHECK_EQ(s[ROUTES].route_a, 300);
	CHECK_EQ(s[ROUTES].route_late, 0);
	CHECK_EQ(info_of(path).redefinitions, 2);
}
