/*
 * test-pgauge.c: per-process gauges (TALLY_PGAUGE, format 2.6).
 *
 * The processes here are exec'd copies of this program that attach one
 * shared zone through $TALLY_ZONE, as a pre-fork server's workers would.
 * It proves that:
 *   - an in-flight gauge under TALLY_COMBINE_LIVESUM counts the live
 *     processes only: workers killed with a request open, and restarted,
 *     leave nothing behind (4 workers restarted 4 times read 4, not 16);
 *   - every combine mode gives what prometheus_client's multiprocess
 *     mode of that name gives: each process with its pid (all, liveall),
 *     the sum, max, min, or the value set last, with or without the
 *     processes that are gone;
 *   - a process of another PID namespace (pid 1 there, a pid that names
 *     another process here) reads as alive while it runs and as gone once
 *     killed: liveness is its lock, not its pid;
 *   - a reader older than 2.6 is shown nothing of them: the metric record
 *     passes its checks and the series records have a state it skips;
 *   - registrations that break the rules are refused with a message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "layout.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

/* ---- the workers (exec'd copies of this program) -------------------- */

/* Register gauge "g" with $TALLY_TEST_COMBINE, label route="a", set it to
 * $TALLY_TEST_VALUE, say so on stdout, and wait to be killed (or exit
 * when $TALLY_TEST_EXIT is set). */
static void worker(void)
{
	struct tally_label l = { "route", "a" };
	struct tally_metric_desc d = desc(TALLY_PGAUGE, "g");
	tally_pgauge g;
	const char *v = getenv("TALLY_TEST_VALUE");

	d.help = "Per process.";
	d.labels = &l;
	d.nlabels = 1;
	if (tally_pgauge_register(NULL, &d,
				  (unsigned)atoi(getenv("TALLY_TEST_COMBINE")),
				  &g) != 0) {
		fprintf(stderr, "worker: %s\n", tally_errmsg());
		_exit(3);
	}
	tally_pgauge_set(&g, atof(v ? v : "1"));
	if (write(1, "r", 1) != 1)
		_exit(4);
	if (getenv("TALLY_TEST_EXIT"))
		exit(0);
	for (;;)
		pause();
}

__attribute__((constructor)) static void worker_main(void)
{
	if (getenv("TALLY_TEST_PG_WORKER")) {
		worker();
		_exit(2);
	}
}

/* ---- helpers -------------------------------------------------------- */

struct worker {
	pid_t pid;            /* the worker, as this namespace sees it */
	pid_t outer;          /* newns: its parent, our child; else 0 */
};

/* Start a worker setting @value under @combine, in zone "pg" of @dir, and
 * wait until it has set it.  @newns: as pid 1 of a PID namespace of its
 * own (with its own /proc); then the pid returned is its parent's, which
 * waits for it.  Returns 0, or -1 when the namespace cannot be made. */
static int start(struct worker *w, const char *dir, unsigned combine,
		 double value, int exits, int newns)
{
	int p[2], q[2], st;
	char c, b[32];
	pid_t pid, inner = 0;

	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(pipe(q), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		close(q[0]);
		dup2(p[1], 1);
		if (newns) {
			if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0)
				_exit(77);
			inner = fork();
			if (inner < 0)
				_exit(77);
			if (inner > 0) {
				close(1);
				close(p[1]);
				if (write(q[1], &inner, sizeof(inner)) !=
				    sizeof(inner))
					_exit(2);
				waitpid(inner, &st, 0);
				_exit(0);
			}
			close(q[1]);
			if (mount("none", "/", NULL, MS_REC | MS_PRIVATE,
				  NULL) < 0 ||
			    mount("proc", "/proc", "proc", 0, NULL) < 0)
				_exit(78);
		}
		snprintf(b, sizeof(b), "%u", combine);
		setenv("TALLY_TEST_COMBINE", b, 1);
		snprintf(b, sizeof(b), "%g", value);
		setenv("TALLY_TEST_VALUE", b, 1);
		setenv("TALLY_TEST_PG_WORKER", "1", 1);
		if (exits)
			setenv("TALLY_TEST_EXIT", "1", 1);
		setenv("TALLY_DIR", dir, 1);
		setenv("TALLY_ZONE", "pg", 1);
		execl("/proc/self/exe", "test-pgauge-worker", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	close(q[1]);
	w->pid = pid;
	w->outer = 0;
	if (newns && read(q[0], &inner, sizeof(inner)) == sizeof(inner)) {
		w->pid = inner;
		w->outer = pid;
	}
	close(q[0]);
	if (read(p[0], &c, 1) != 1) {
		close(p[0]);
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		if (newns && WIFEXITED(st) && WEXITSTATUS(st) >= 77)
			return -1;
		harness_fail(__FILE__, __LINE__, "worker exited with %d",
			     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	close(p[0]);
	if (exits) {
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK_CHILD_OK(st);
	}
	return 0;
}

static void stop(struct worker *w)
{
	int st;

	kill(w->pid, SIGKILL);
	if (w->outer)
		CHECK_EQ(waitpid(w->outer, &st, 0), w->outer);
	else
		CHECK_EQ(waitpid(w->pid, &st, 0), w->pid);
}

/* What a reader shows of gauge "g". */
struct seen {
	int n;
	double value[16];
	char pid[16][32];     /* the pid label, "" without one */
	unsigned nprocs[16];
	int bad;              /* a view that is not a per-process float */
};

static int seen_fn(const struct tally_series_view *v, void *arg)
{
	struct seen *s = arg;
	int i = s->n;

	if (strcmp(v->name, "g"))
		return 0;
	if (i == 16)
		return -1;
	s->n++;
	s->value[i] = v->fvalue;
	s->nprocs[i] = v->nprocs;
	s->pid[i][0] = 0;
	if (v->kind != TALLY_FGAUGE || !v->per_process)
		s->bad = 1;
	for (unsigned k = 0; k < v->nlabels; k++) {
		if (!strcmp(v->label_names[k], "pid"))
			snprintf(s->pid[i], sizeof(s->pid[i]), "%s",
				 v->label_values[k]);
		else if (strcmp(v->label_names[k], "route") ||
			 strcmp(v->label_values[k], "a"))
			s->bad = 1;
	}
	return 0;
}

static struct seen read_zone(const char *dir)
{
	char path[PATH_MAX + 16];
	struct tally_seg *seg;
	struct seen s;

	memset(&s, 0, sizeof(s));
	snprintf(path, sizeof(path), "%s/pg.tally", dir);
	seg = tally_seg_open(path, NULL);
	if (!seg)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK(tally_seg_foreach(seg, 0, seen_fn, &s) >= 0);
	tally_seg_close(seg);
	CHECK(!s.bad);
	return s;
}

/* The one value a combining mode shows. */
static double one_value(const char *dir)
{
	struct seen s = read_zone(dir);

	CHECK_EQ(s.n, 1);
	CHECK_STR(s.pid[0], "");
	return s.value[0];
}

/* ---- tests ---------------------------------------------------------- */

/*
 * The in-flight gauge of a service whose four workers are killed with a
 * request open and restarted, four times: each generation reads 4, never
 * 8, 12, 16 as a shared gauge would.
 */
TEST(livesum_counts_live_processes_only)
{
	char dir[PATH_MAX];
	struct worker w[4];

	own_subdir(dir, sizeof(dir), "livesum");
	for (int round = 0; round < 4; round++) {
		struct seen s;

		for (int i = 0; i < 4; i++)
			start(&w[i], dir, TALLY_COMBINE_LIVESUM, 1, 0, 0);
		s = read_zone(dir);
		CHECK_EQ(s.n, 1);
		CHECK(s.value[0] == 4.0);
		CHECK_EQ(s.nprocs[0], 4u);
		stop(&w[0]);
		CHECK(one_value(dir) == 3.0);
		for (int i = 1; i < 4; i++)
			stop(&w[i]);
		/* Nobody left: no value at all (prometheus_client shows
		 * none either). */
		CHECK_EQ(read_zone(dir).n, 0);
	}
}

/*
 * A reader has no power over a process's liveness: read locks on every
 * token byte of the zone file (what a member of the readers' group can
 * take) neither keep a killed worker's value alive nor keep a new worker
 * from registering and setting its gauge.  The new worker goes on
 * without its lock and is left out of "live" modes: that is all a
 * reader can do, and only to what readers see.
 */
TEST(a_readers_locks_neither_fake_nor_block_liveness)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	struct flock fl;
	struct worker a, b;
	int fd;

	own_subdir(dir, sizeof(dir), "rdlock");
	snprintf(path, sizeof(path), "%s/pg.tally", dir);
	start(&a, dir, TALLY_COMBINE_LIVESUM, 2, 0, 0);
	CHECK(one_value(dir) == 2.0);
	stop(&a);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_RDLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t)TALLY__OWNER_LOCK_BYTE;
	fl.l_len = 0; /* to the end of every file */
	CHECK_EQ(fcntl(fd, F_OFD_SETLK, &fl), 0);
	/* Its byte is read-locked by the reader: still gone. */
	CHECK_EQ(read_zone(dir).n, 0);
	/* A new worker registers and sets its value all the same (start()
	 * fails the test otherwise); it could take no lock, so readers
	 * leave it out. */
	start(&b, dir, TALLY_COMBINE_LIVESUM, 3, 0, 0);
	CHECK_EQ(read_zone(dir).n, 0);
	stop(&b);
	close(fd);
}

TEST(sum_keeps_the_processes_that_are_gone)
{
	char dir[PATH_MAX];
	struct worker a, b;

	own_subdir(dir, sizeof(dir), "sum");
	start(&a, dir, TALLY_COMBINE_SUM, 2.5, 0, 0);
	start(&b, dir, TALLY_COMBINE_SUM, 4, 1, 0);
	CHECK(one_value(dir) == 6.5);
	stop(&a);
	CHECK(one_value(dir) == 6.5);
}

TEST(max_min_and_mostrecent)
{
	char dir[PATH_MAX];
	struct worker a, b, c;
	static const struct {
		unsigned mode;
		double live, all;   /* with the gone process, without */
	} modes[] = {
		{ TALLY_COMBINE_MAX, 5, 9 },
		{ TALLY_COMBINE_LIVEMAX, 5, 5 },
		{ TALLY_COMBINE_MIN, -1, -1 },
		{ TALLY_COMBINE_LIVEMIN, -1, -1 },
		{ TALLY_COMBINE_MOSTRECENT, 5, 9 },
		{ TALLY_COMBINE_LIVEMOSTRECENT, 5, 5 },
	};

	for (unsigned i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char name[32];

		snprintf(name, sizeof(name), "mode%u", modes[i].mode);
		own_subdir(dir, sizeof(dir), name);
		/* Set in this order: -1, 5, and last 9, by a process that
		 * is then killed. */
		start(&a, dir, modes[i].mode, -1, 0, 0);
		usleep(2000);
		start(&c, dir, modes[i].mode, 5, 0, 0);
		usleep(2000);
		start(&b, dir, modes[i].mode, 9, 0, 0);
		stop(&b);
		if (modes[i].mode & 1)
			CHECK(one_value(dir) == modes[i].live);
		else
			CHECK(one_value(dir) == modes[i].all);
		stop(&a);
		stop(&c);
	}
}

TEST(all_and_liveall_show_each_process_with_its_pid)
{
	char dir[PATH_MAX], pa[32], pb[32];
	struct worker a, b;
	struct seen s;

	for (unsigned mode = TALLY_COMBINE_ALL; mode <= TALLY_COMBINE_LIVEALL;
	     mode++) {
		own_subdir(dir, sizeof(dir), mode ? "liveall" : "all");
		start(&a, dir, mode, 1, 0, 0);
		start(&b, dir, mode, 2, 0, 0);
		snprintf(pa, sizeof(pa), "%d", (int)a.pid);
		snprintf(pb, sizeof(pb), "%d", (int)b.pid);
		s = read_zone(dir);
		CHECK_EQ(s.n, 2);
		for (int i = 0; i < 2; i++) {
			CHECK_EQ(s.nprocs[i], 1u);
			CHECK_STR(s.pid[i], s.value[i] == 1.0 ? pa : pb);
		}
		stop(&b);
		s = read_zone(dir);
		CHECK_EQ(s.n, mode == TALLY_COMBINE_ALL ? 2 : 1);
		stop(&a);
	}
}

/*
 * The writer is pid 1 of a PID namespace of its own; here pid 1 is
 * another process (init), started at another time, so no pid or start
 * time could tell.  Its lock does: alive while it runs, gone once killed.
 * Needs root (skipped otherwise).
 */
TEST(liveness_reads_the_same_from_another_pid_namespace)
{
	char dir[PATH_MAX];
	struct worker in_ns, here;

	own_subdir(dir, sizeof(dir), "pidns");
	start(&here, dir, TALLY_COMBINE_LIVESUM, 1, 0, 0);
	if (start(&in_ns, dir, TALLY_COMBINE_LIVESUM, 10, 0, 1) < 0) {
		stop(&here);
		harness_skip("cannot make a PID namespace (not root?)");
	}
	CHECK(in_ns.outer != 0);
	CHECK(one_value(dir) == 11.0);
	stop(&in_ns);
	CHECK(one_value(dir) == 1.0);
	stop(&here);
}

/*
 * What a reader of format 2.5 finds: a metric record it accepts (a float
 * gauge of mode shared, its help text NUL-terminated where help_len
 * says) and series records of state 4, which it skips as it skips every
 * state but 1 and 2.
 */
TEST(older_readers_skip_the_typed_series)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	struct worker w;
	struct tally__hdr h;
	struct tally__metric_rec f;
	struct tally__series r;
	int fd, typed = 0;

	own_subdir(dir, sizeof(dir), "old");
	start(&w, dir, TALLY_COMBINE_LIVESUM, 1, 0, 0);
	snprintf(path, sizeof(path), "%s/pg.tally", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	CHECK_EQ(h.minor, TALLY__FMT_MINOR);
	CHECK_EQ(pread(fd, &f, sizeof(f), (off_t)h.metric_off),
		 (ssize_t)sizeof(f));
	CHECK_STR(f.name, "g");
	CHECK_EQ(f.kind, TALLY__KIND_GAUGE_SET);
	CHECK_EQ(f.vtype, TALLY__VT_FLOAT64);
	CHECK_EQ(f.mode, TALLY_SHARED);
	CHECK_EQ(f.sub_bits, 0);
	CHECK_EQ(f.max_bits, 0);
	CHECK_EQ(f.type, TALLY__TYPE_PGAUGE);
	CHECK_EQ(f.help[f.help_len], 0);
	CHECK_EQ(strlen(f.help), f.help_len);
	CHECK_EQ(tally__metric_tail(&f)->combine, TALLY_COMBINE_LIVESUM);
	for (uint32_t i = 0; i < h.series_cap; i++) {
		CHECK_EQ(pread(fd, &r, sizeof(r),
			       (off_t)(h.series_off + i * sizeof(r))),
			 (ssize_t)sizeof(r));
		if (r.state == TALLY__SERIES_FREE)
			break;
		CHECK_EQ(r.state, TALLY__SERIES_TYPED);
		typed++;
	}
	CHECK_EQ(typed, 1);
	close(fd);
	stop(&w);
}

/* A zone "pg" of mode shared in a directory of the test's own, @dir
 * (own_subdir() @name), which becomes $TALLY_DIR. */
static struct tally_zone *shared_pg_zone(char *dir, size_t n,
					 const char *name)
{
	struct tally_zone *z;

	own_subdir(dir, n, name);
	setenv("TALLY_DIR", dir, 1);
	z = tally_zone_create("pg", &(struct tally_zone_opts){
					     0, 0, TALLY_ZONE_SHARED });
	CHECK(z != NULL);
	return z;
}

/* In a forked child: tells the parent through the pipe @p that its
 * value is written (ready_child() returns), then lives until killed. */
static _Noreturn void hold(int p[2])
{
	if (write(p[1], "r", 1) != 1)
		_exit(4);
	pause();
	_exit(0);
}

/* In the parent: waits until the child @pid says through @p that its
 * value is written (hold()). */
static void ready_child(pid_t pid, int p[2])
{
	char c;

	CHECK(pid >= 0);
	close(p[1]);
	CHECK_EQ(read(p[0], &c, 1), 1);
	close(p[0]);
}

TEST(a_child_after_fork_has_a_value_of_its_own)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	struct tally_metric_desc d = desc(TALLY_PGAUGE, "g");
	struct tally_label l = { "route", "a" };
	struct tally_zone *z = shared_pg_zone(dir, sizeof(dir), "fork");
	tally_pgauge g, mine;
	int p[2], st;
	pid_t pid;

	d.labels = &l;
	d.nlabels = 1;
	CHECK_EQ(tally_pgauge_register(z, &d, TALLY_COMBINE_LIVESUM, &g), 0);
	tally_pgauge_inc(&g);
	CHECK_EQ(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		double v;

		close(p[0]);
		CHECK_EQ(tally_pgauge_register(z, &d, TALLY_COMBINE_LIVESUM,
					       &mine), 0);
		CHECK(mine.metric.series != g.metric.series);
		tally_pgauge_add(&mine, 2);
		CHECK_EQ(tally_pgauge_fetch(&mine, &v), 0);
		CHECK(v == 2.0);
		hold(p);
	}
	ready_child(pid, p);
	snprintf(path, sizeof(path), "%s/pg.tally", dir);
	CHECK(one_value(dir) == 3.0);
	kill(pid, SIGKILL);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(one_value(dir) == 1.0);
	tally_zone_destroy(z);
}

TEST(registrations_that_break_the_rules_are_refused)
{
	char dir[PATH_MAX], help[TALLY_HELP_MAX + 1];
	struct tally_metric_desc d = desc(TALLY_PGAUGE, "r");
	struct tally_label l = { "pid", "7" };
	struct tally_zone *z;
	tally_pgauge g;
	tally_fgauge f;

	own_subdir(dir, sizeof(dir), "rules");
	setenv("TALLY_DIR", dir, 1);
	z = tally_zone_create("rules", NULL);
	CHECK(z != NULL);
	CHECK_EQ(tally_pgauge_register(z, &d, 10, &g), -EINVAL);
	CHECK(strstr(tally_errmsg(), "combine") != NULL);
	d.labels = &l;
	d.nlabels = 1;
	CHECK_EQ(tally_pgauge_register(z, &d, 0, &g), -EINVAL);
	CHECK(strstr(tally_errmsg(), "pid") != NULL);
	/* The failed handle discards its updates. */
	tally_pgauge_set(&g, 1);
	d.nlabels = 0;
	memset(help, 'h', sizeof(help) - 1);
	help[TALLY_HELP_MAX - 7] = 0;
	d.help = help;
	CHECK_EQ(tally_pgauge_register(z, &d, 0, &g), -E2BIG);
	help[TALLY_HELP_MAX - 8] = 0;
	CHECK_EQ(tally_pgauge_register(z, &d, 0, &g), 0);
	/* A float gauge of the same name, or another combine mode, is
	 * another definition: a new generation. */
	d.kind = TALLY_FGAUGE;
	CHECK_EQ(tally_fgauge_register(z, &d, &f), 0);
	d.kind = TALLY_PGAUGE;
	CHECK_EQ(tally_pgauge_register(z, &d, TALLY_COMBINE_MAX, &g), 0);
	{
		struct tally_seg_info info;
		struct tally_seg *s = tally_seg_open(tally_zone_path(z), NULL);

		CHECK(s != NULL);
		CHECK_EQ(tally_seg_info(s, &info), 0);
		CHECK_EQ(info.redefinitions, 2u);
		tally_seg_close(s);
	}
	tally_zone_destroy(z);
}

/*
 * A type that a later minor adds is skipped by this reader, which shows
 * the rest of the file: here the per-process gauge's record is given
 * type 200, next to a counter.
 */
TEST(a_type_this_reader_does_not_know_is_skipped)
{
	char dir[PATH_MAX];
	struct tally_metric_desc d = desc(TALLY_PGAUGE, "g");
	struct tally_metric_desc cd = desc(TALLY_COUNTER, "c_total");
	struct tally_zone *z;
	struct tally__hdr h;
	tally_pgauge g;
	tally_counter c;
	uint8_t type = 200;
	int fd;

	own_subdir(dir, sizeof(dir), "newer");
	setenv("TALLY_DIR", dir, 1);
	z = tally_zone_create("newer", NULL);
	CHECK(z != NULL);
	CHECK_EQ(tally_pgauge_register(z, &d, TALLY_COMBINE_LIVESUM, &g), 0);
	CHECK_EQ(tally_counter_register(z, &cd, &c), 0);
	tally_counter_add(&c, 5);
	fd = open(tally_zone_path(z), O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	CHECK_EQ(pwrite(fd, &type, 1, (off_t)(h.metric_off +
			offsetof(struct tally__metric_rec, type))), 1);
	close(fd);
	{
		struct tally_seg *s = tally_seg_open(tally_zone_path(z), NULL);
		struct seen seen;

		memset(&seen, 0, sizeof(seen));
		CHECK(s != NULL);
		/* The counter only. */
		CHECK_EQ(tally_seg_foreach(s, 0, seen_fn, &seen), 1);
		CHECK_EQ(seen.n, 0);
		tally_seg_close(s);
	}
	tally_zone_destroy(z);
}

/*
 * A label family of per-process gauges: a child made by fork() looks up the
 * same label values and gets a value of its own, not its parent's, and
 * the reader sums the two under livesum until the child is killed.
 */
TEST(a_family_forgets_its_parents_children_after_fork)
{
	char dir[PATH_MAX];
	struct tally_metric_desc d = desc(TALLY_PGAUGE, "g");
	const char *names[] = { "route" }, *vals[] = { "a" };
	const char *bad[] = { "pid" };
	struct tally_zone *z = shared_pg_zone(dir, sizeof(dir), "family");
	tally_pgauge_family f, fb;
	const tally_pgauge *g, *again;
	int p[2], st;
	pid_t pid;

	CHECK_EQ(tally_pgauge_family_register(z, &d, bad, 1,
					      TALLY_COMBINE_LIVESUM, &fb),
		 -EINVAL);
	CHECK_EQ(tally_pgauge_family_register(z, &d, names, 1,
					      TALLY_COMBINE_LIVESUM, &f), 0);
	CHECK_EQ(tally_pgauge_family_get(&f, vals, 1, &g), 0);
	tally_pgauge_set(g, 1);
	CHECK_EQ(tally_pgauge_family_get(&f, vals, 1, &again), 0);
	CHECK(again == g);
	CHECK_EQ(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		CHECK_EQ(tally_pgauge_family_get(&f, vals, 1, &again), 0);
		CHECK(again->metric.series != g->metric.series);
		tally_pgauge_set(again, 5);
		hold(p);
	}
	ready_child(pid, p);
	CHECK(one_value(dir) == 6.0);
	kill(pid, SIGKILL);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(one_value(dir) == 1.0);
	CHECK_EQ(tally_family_remove(&f.family), 0);
	tally_zone_destroy(z);
}

/* Each series a reader shows, by name: its value, and whether it is a
 * per-process gauge's. */
struct shown {
	int n;
	char name[8][64];
	double value[8];
	int per_process[8];
};

static int shown_fn(const struct tally_series_view *v, void *arg)
{
	struct shown *s = arg;

	if (s->n == 8)
		return -1;
	snprintf(s->name[s->n], sizeof(s->name[0]), "%s", v->name);
	s->value[s->n] = v->fvalue;
	s->per_process[s->n] = v->per_process;
	s->n++;
	return 0;
}

static struct shown shown_in(struct tally_zone *z)
{
	struct tally_seg *seg = tally_seg_open(tally_zone_path(z), NULL);
	struct shown s;

	memset(&s, 0, sizeof(s));
	CHECK(seg != NULL);
	CHECK(tally_seg_foreach(seg, 0, shown_fn, &s) >= 0);
	tally_seg_close(seg);
	return s;
}

/*
 * A binding's definition (tally_pgauge_redefine): the per-process gauge's
 * own record is it, so the binding registers the gauge under the metric's
 * name.  An older version's definition under the name (a series-less
 * counter) and its part under an encoded name are superseded; the same
 * definition again changes nothing; another combine mode is another
 * definition, whose series alone are shown.
 */
TEST(the_gauge_record_is_the_binding_definition)
{
	struct tally_zone *z = zone_in("pgclaim");
	struct tally_metric_desc old = desc(TALLY_COUNTER, "inflight");
	struct tally_metric_desc part = desc(TALLY_PGAUGE,
					     "inflight:gauge_livesum");
	struct tally_metric_desc d = desc(TALLY_PGAUGE, "inflight");
	const char *parts[] = { "inflight:gauge_livesum" };
	tally_pgauge p, g;
	struct shown s;

	old.help = "tally-python gauge labels= mode=livesum";
	d.help = "Requests in flight.";
	CHECK_EQ(tally_metric_redefine(z, &old, parts, 1), 0);
	CHECK_EQ(tally_pgauge_register(z, &part, TALLY_COMBINE_LIVESUM, &p), 0);
	tally_pgauge_set(&p, 5);
	CHECK_EQ(tally_pgauge_redefine(z, &d, TALLY_COMBINE_LIVESUM, parts, 1),
		 1);
	CHECK_EQ(tally_pgauge_register(z, &d, TALLY_COMBINE_LIVESUM, &g), 0);
	tally_pgauge_set(&g, 2);
	CHECK_EQ(tally_pgauge_redefine(z, &d, TALLY_COMBINE_LIVESUM, parts, 1),
		 0);
	s = shown_in(z);
	CHECK_EQ(s.n, 1);
	CHECK_STR(s.name[0], "inflight");
	CHECK(s.value[0] == 2.0);
	CHECK_EQ(s.per_process[0], 1);
	/* Another mode: a new generation, empty until registered in. */
	CHECK_EQ(tally_pgauge_redefine(z, &d, TALLY_COMBINE_MAX, parts, 1), 1);
	CHECK_EQ(shown_in(z).n, 0);
	CHECK_EQ(tally_pgauge_register(z, &d, TALLY_COMBINE_MAX, &g), 0);
	tally_pgauge_set(&g, 7);
	s = shown_in(z);
	CHECK_EQ(s.n, 1);
	CHECK(s.value[0] == 7.0);
	/* Refused: an unknown mode, and the generic call for this type. */
	CHECK_EQ(tally_pgauge_redefine(z, &d, 10, parts, 1), -EINVAL);
	CHECK(strstr(tally_errmsg(), "combine") != NULL);
	CHECK_EQ(tally_metric_redefine(z, &d, parts, 1), -EINVAL);
	CHECK(strstr(tally_errmsg(), "tally_pgauge_redefine") != NULL);
	tally_zone_destroy(z);
}

/*
 * A shared float gauge's own record as the definition
 * (tally_metric_redefine of a TALLY_FGAUGE): the gauge registered under
 * the name is in it, and an older version's encoded part is not shown.
 */
TEST(a_float_gauge_record_is_the_binding_definition)
{
	struct tally_zone *z = zone_in("fgclaim");
	struct tally_metric_desc part = desc(TALLY_FGAUGE, "temp:gauge");
	struct tally_metric_desc d = desc(TALLY_FGAUGE, "temp");
	const char *parts[] = { "temp:gauge" };
	tally_fgauge p, g;
	struct shown s;

	CHECK_EQ(tally_fgauge_register(z, &part, &p), 0);
	tally_fgauge_set(&p, 3.5);
	d.help = "Temperature.";
	CHECK_EQ(tally_metric_redefine(z, &d, parts, 1), 0);
	d.help = "The temperature.";
	CHECK_EQ(tally_metric_redefine(z, &d, parts, 1), 1);
	CHECK_EQ(tally_fgauge_register(z, &d, &g), 0);
	tally_fgauge_set(&g, 21.5);
	s = shown_in(z);
	CHECK_EQ(s.n, 1);
	CHECK_STR(s.name[0], "temp");
	CHECK(s.value[0] == 21.5);
	CHECK_EQ(s.per_process[0], 0);
	tally_zone_destroy(z);
}
