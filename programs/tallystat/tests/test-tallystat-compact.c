/*
 * test-tallystat-compact.c: the report since start of a compact read
 * (compact.c) is, byte for byte, the report of a snapshot of the same
 * segments, for every option that takes the compact path.
 *
 * The segments are made here: one of this process (counters whose label
 * values sort as versions, every kind, a 2000-byte label set, escapes,
 * per-process gauges), one of a child that stays alive, and one of a
 * child that exited (dead).  Each report is made in a child process of
 * its own (the JSON back end counts its reports in a static), with the
 * clock of the read fixed, so that both reports give the same rates.
 *
 *   test-tallystat-compact [TEST...]   (test/harness.h)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tally/tally.h"

#include "snapshot.h"
#include "strbuf.h"
#include "compact.h"
#include "harness.h"

static char dir[64];

#define REG(fn, z, d, h) CHECK(fn((z), (d), (h)) == 0)

/* The series of one zone; @many counters tc_many_total{series="<i>"}. */
static void fill(struct tally_zone *z, unsigned many)
{
	static char big[2001];
	struct tally_label esc = { "path", "C:\\dir \"q\" \xc3\xa9t\xc3\xa9" };
	struct tally_label ll[2] = { { "alpha", "a" }, { "gamma", big } };
	struct tally_metric_desc d = { 0 };
	static const double bounds[] = { 0.005, 0.1, 2.5 };
	tally_counter c;
	tally_gauge g;
	tally_setgauge sg;
	tally_fgauge fg;
	tally_fcounter fc;
	tally_histogram h;
	tally_chistogram ch;
	tally_summary sm;
	tally_pgauge pg;

	for (unsigned i = 0; i < many; i++) {
		char v[16];
		struct tally_label l = { "series", v };

		/* Registered out of order: the report sorts them as
		 * versions (9 before 10). */
		snprintf(v, sizeof(v), "%u", (i * 7) % many);
		d = (struct tally_metric_desc){ .name = "tc_many_total",
						.labels = &l, .nlabels = 1 };
		REG(tally_counter_register, z, &d, &c);
		tally_counter_add(&c, (i * 7) % many);
	}
	d = (struct tally_metric_desc){ .name = "tc_bytes_total",
					.unit = "bytes", .help = "Bytes." };
	REG(tally_counter_register, z, &d, &c);
	tally_counter_add(&c, 123456789012ll);
	d = (struct tally_metric_desc){ .name = "tc_escaped_total",
					.labels = &esc, .nlabels = 1 };
	REG(tally_counter_register, z, &d, &c);
	tally_counter_add(&c, 3);
	memset(big, 'c', 2000);
	d = (struct tally_metric_desc){ .name = "tc_long_total", .labels = ll,
					.nlabels = 2 };
	REG(tally_counter_register, z, &d, &c);
	tally_counter_add(&c, 5);
	d = (struct tally_metric_desc){ .name = "tc_in_flight" };
	REG(tally_gauge_register, z, &d, &g);
	tally_gauge_add(&g, -7);
	d = (struct tally_metric_desc){ .name = "tc_temperature" };
	REG(tally_setgauge_register, z, &d, &sg);
	tally_setgauge_set(&sg, 0);
	d = (struct tally_metric_desc){ .name = "tc_load" };
	REG(tally_fgauge_register, z, &d, &fg);
	tally_fgauge_set(&fg, 0.625);
	d = (struct tally_metric_desc){ .name = "tc_seconds_total" };
	REG(tally_fcounter_register, z, &d, &fc);
	for (int i = 0; i < 3; i++)
		tally_fcounter_add(&fc, 0.1);
	d = (struct tally_metric_desc){ .name = "tc_latency_ns",
					.unit = "nanoseconds" };
	REG(tally_histogram_register, z, &d, &h);
	for (int i = 0; i < 1000; i++)
		tally_histogram_observe(&h, 1000 + 37 * i);
	d = (struct tally_metric_desc){ .name = "tc_empty_ns" };
	REG(tally_histogram_register, z, &d, &h);
	d = (struct tally_metric_desc){ .name = "tc_wait_seconds" };
	CHECK(tally_chistogram_register(z, &d, bounds, 3, &ch) == 0);
	tally_chistogram_observe(&ch, 0.05);
	tally_chistogram_observe(&ch, 3.0);
	d = (struct tally_metric_desc){ .name = "tc_order_dollars" };
	CHECK(tally_summary_register(z, &d, &sm) == 0);
	tally_summary_observe(&sm, 0.25);
	tally_summary_observe(&sm, 7.5);
	d = (struct tally_metric_desc){ .name = "tc_workers" };
	CHECK(tally_pgauge_register(z, &d, TALLY_COMBINE_LIVESUM, &pg) == 0);
	tally_pgauge_set(&pg, 4);
	d = (struct tally_metric_desc){ .name = "tc_rss_bytes" };
	CHECK(tally_pgauge_register(z, &d, TALLY_COMBINE_ALL, &pg) == 0);
	tally_pgauge_set(&pg, 1.5);
}

/* A child that makes zone @name and exits (@stay 0: its segment stays,
 * dead) or lives as long as this process (@stay 1). */
static pid_t child_zone(const char *name, unsigned many, int stay)
{
	int p[2];
	char c;
	pid_t pid;

	CHECK(pipe(p) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct tally_zone *z;

		prctl(PR_SET_NAME, name, 0, 0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		z = tally_zone_create(name, NULL);
		if (!z)
			_exit(1);
		fill(z, many);
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		if (!stay)
			_exit(0);
		for (;;)
			pause();
	}
	CHECK(read(p[0], &c, 1) == 1);
	close(p[0]);
	close(p[1]);
	if (!stay) {
		int st;

		CHECK(waitpid(pid, &st, 0) == pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	return pid;
}

static void setup(void)
{
	struct tally_zone *z;

	snprintf(dir, sizeof(dir), "/tmp/tc-compact.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	CHECK(chmod(dir, 0700) == 0);
	setenv("TALLY_DIR", dir, 1);
	setenv("TALLY_KEEP", "1", 1);
	child_zone("tc-dead", 5, 0);
	child_zone("tc-live", 12, 1);
	prctl(PR_SET_NAME, "tc-self", 0, 0, 0);
	z = tally_zone_create("tc-self", NULL);
	CHECK(z != NULL);
	fill(z, 25);
}

static void cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static const struct ts_host host = { "host", "Linux", "6.0", "x86_64", 2 };

/* The options of tallystat @args, split at blanks in @copy, into @o;
 * exits 2 when they are wrong. */
static void parse_args(char *copy, struct ts_options *o)
{
	char *argv[32], *save = NULL;
	int argc = 0;

	argv[argc++] = (char *)"tallystat";
	for (char *t = strtok_r(copy, " ", &save); t && argc < 31;
	     t = strtok_r(NULL, " ", &save))
		argv[argc++] = t;
	argv[argc] = NULL;
	if (ts_parse_options(argc, argv, o) != 0)
		_exit(2);
}

/* The report of tallystat @args (split at blanks) into @out, from a
 * compact read or a snapshot; exits 0, or 3 when the compact read
 * cannot be ordered. */
static void report_to(const char *args, int compact, const char *out)
{
	char *copy = strdup(args);
	struct ts_options o;
	struct tp_collect_opts co;
	struct tp_snapshot snap;
	struct ts_compact *cp = NULL;
	struct ts_report r;
	const struct ts_emitter *em;
	char err[256];

	parse_args(copy, &o);
	ts_collect_opts(&o, &co);
	if (compact)
		cp = ts_compact_new(&co);
	if (tp_snapshot_collect(&snap, &co, err, sizeof(err)) < 0)
		_exit(2);
	/* The same moment for both reads: the same rates. */
	snap.real.tv_sec = 1900000000;
	snap.real.tv_nsec = 123456789;
	if (compact && ts_compact_finish(cp, &snap) < 0)
		_exit(3);
	if (!freopen(out, "w", stdout))
		_exit(2);
	em = o.json ? &ts_emit_json : &ts_emit_text;
	em->begin(&host, &o, &snap.real);
	if (compact)
		ts_report_compact(&r, cp, &o);
	else
		ts_report_since_start(&r, &snap, &o);
	r.skipped = snap.skipped;
	r.nskipped = snap.nskipped;
	em->report(&r, &o);
	em->end(&o);
	ts_report_free(&r);
	ts_compact_free(cp);
	tp_snapshot_free(&snap);
	ts_options_free(&o);
	free(copy);
	fflush(stdout);
	/* exit(), not _exit(): a sanitizer build checks for leaks. */
	exit(0);
}

/* The text of file @path (malloc'ed), which is then removed. */
static char *slurp(const char *path)
{
	long n;
	char *text;
	FILE *f = fopen(path, "r");

	CHECK(f != NULL);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	CHECK(text && fread(text, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	unlink(path);
	return text;
}

/* The text of a report (malloc'ed), or NULL when its child failed;
 * *@status: the child's exit status. */
static char *report(const char *args, int compact, int *status)
{
	char path[128];
	pid_t pid;
	int st;

	snprintf(path, sizeof(path), "%s/report.%d.txt", dir, compact);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		report_to(args, compact, path);
	CHECK(waitpid(pid, &st, 0) == pid);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	if (*status)
		return NULL;
	return slurp(path);
}

/* The first line where @a and @b differ, for the failure message. */
static void show_diff(const char *args, const char *a, const char *b)
{
	int line = 1;

	while (*a && *a == *b) {
		line += *a == '\n';
		a++;
		b++;
	}
	fprintf(stderr, "'%s': line %d differs:\n snapshot: %.200s\n "
		"compact:  %.200s\n", args, line, a, b);
}

TEST(same_bytes)
{
	static const char *const sets[] = {
		"", "-o JSON", "-z", "-z -o JSON", "--human",
		"--human -o JSON", "-t", "--width 16", "--width 200",
		"-Z tc-live", "-C tc-d.*", "tc_many_total",
		"tc_latency_ns tc_workers", "nothing_matches",
		"nothing_matches -o JSON",
	};
	int failed = 0;

	setup();
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++) {
		int s1, s2;
		char *a = report(sets[i], 0, &s1);
		char *b = report(sets[i], 1, &s2);

		CHECK_EQ(s1, 0);
		CHECK_EQ(s2, 0);
		if (strcmp(a, b) != 0) {
			show_diff(sets[i], a, b);
			failed = 1;
		}
		free(a);
		free(b);
	}
	cleanup();
	CHECK(!failed);
}

/* What the reports hold, besides being equal: the dead process, the
 * version order, the long label set cut. */
TEST(content)
{
	int st;
	char *t, *p9, *p10;

	setup();
	t = report("", 1, &st);
	CHECK(t != NULL);
	cleanup();
	CHECK(strstr(t, "tc-dead") && strstr(t, "dead"));
	CHECK(strstr(t, "tc-live") && strstr(t, "tc-self"));
	p9 = strstr(t, "tc_many_total{series=\"9\"}");
	p10 = strstr(t, "tc_many_total{series=\"10\"}");
	CHECK(p9 && p10 && p9 < p10);
	CHECK(strstr(t, "tc_long_total{alpha=\"a\",gamma=\"ccc") &&
	      strstr(t, "\xe2\x80\xa6"));
	CHECK(strstr(t, "tc_wait_seconds") && strstr(t, "tc_workers"));
	free(t);
}

/* The same segments through two directory names: their series would
 * interleave, so the compact read declines (tallystat then reads a
 * snapshot). */
TEST(same_segment_twice)
{
	char args[256];
	int st;

	setup();
	snprintf(args, sizeof(args), "--dir %s --dir %s/.", dir, dir);
	CHECK(report(args, 1, &st) == NULL);
	cleanup();
	CHECK_EQ(st, 3);
}

/* A read of the test's directory: a snapshot, and with @cp a compact read
 * (whose own snapshot, holding no series, is @csnap). */
static void read_dir(struct tp_snapshot *snap, struct ts_compact **cp,
		     struct tp_snapshot *csnap)
{
	char *argv[] = { (char *)"tallystat", NULL };
	/* A compact read points at its options until it is freed. */
	static struct ts_options o;
	static int parsed;
	struct tp_collect_opts co;
	char err[256];

	if (!parsed)
		CHECK(ts_parse_options(1, argv, &o) == 0);
	parsed = 1;
	ts_collect_opts(&o, &co);
	CHECK(tp_snapshot_collect(snap, &co, err, sizeof(err)) == 0);
	ts_collect_opts(&o, &co);
	*cp = ts_compact_new(&co);
	CHECK(tp_snapshot_collect(csnap, &co, err, sizeof(err)) == 0);
	CHECK(ts_compact_finish(*cp, csnap) == 0);
}

#define TS_DFLAGS (TP_SERIES_RESET | TP_SERIES_NEW | TS_CHANGED | TS_UNKNOWN)

/* The series of delta snapshot @d that entry @e of @c is; NULL if none. */
static const struct tp_series *delta_of(const struct tp_snapshot *d,
					const struct ts_compact *c,
					const struct centry *e)
{
	const struct tally_seg_info *in = &c->snap->segs[e->seg].info;
	const struct tp_series *found = NULL;

	for (size_t i = 0; i < d->nseries; i++) {
		const struct tp_series *s = &d->series[i];

		if (s->pid != in->pid || s->start_ticks != in->start_ticks ||
		    s->kind != e->kind || strcmp(s->zone, in->zone_name) ||
		    ts_key_hash(s->key, s->kind) != e->hash)
			continue;
		CHECK(found == NULL);
		found = s;
	}
	return found;
}

/* Entry @i of @cur against the snapshot's delta; returns its series. */
static const struct tp_series *check_entry(const struct ts_compact *cur,
					   size_t i,
					   const struct tp_snapshot *d)
{
	const struct centry *e = &cur->e[i];
	const struct cdelta *x = &cur->d[i];
	const struct tp_series *s = delta_of(d, cur, e);

	CHECK(s != NULL);
	CHECK_EQ(x->value, s->value);
	CHECK_EQ(x->flags & TS_DFLAGS, s->flags & TS_DFLAGS);
	CHECK_EQ(!!e->full, !!x->full);
	if (x->full) {
		CHECK_EQ(x->full->sum, s->sum);
		CHECK_EQ(x->full->nbuckets, s->nbuckets);
		for (unsigned b = 0; b < s->nbuckets; b++)
			CHECK_EQ(x->full->buckets[b], s->buckets[b]);
	}
	return s;
}

/* Zone tc-moving, whose series the tests change between reads. */
struct moving {
	struct tally_zone *z;
	tally_counter up, down, late;
	tally_gauge g;
	tally_histogram h;
};

static void moving_start(struct moving *m)
{
	struct tally_metric_desc d = { .name = "tc_moving_total" };

	m->z = tally_zone_create("tc-moving", NULL);
	CHECK(m->z != NULL);
	REG(tally_counter_register, m->z, &d, &m->up);
	tally_counter_add(&m->up, 10);
	d.name = "tc_falling_total";
	REG(tally_counter_register, m->z, &d, &m->down);
	tally_counter_add(&m->down, 50);
	d.name = "tc_level";
	REG(tally_gauge_register, m->z, &d, &m->g);
	tally_gauge_add(&m->g, 4);
	d.name = "tc_moving_ns";
	REG(tally_histogram_register, m->z, &d, &m->h);
	tally_histogram_observe(&m->h, 1000);
}

/* An increase of 7, a counter that goes down (a reset), a gauge up by
 * 3, two observations, a series registered (tc_moving_total{k="new"}),
 * 2. */
static void moving_step(struct moving *m)
{
	struct tally_label l = { "k", "new" };
	struct tally_metric_desc d = { .name = "tc_moving_total",
				       .labels = &l, .nlabels = 1 };

	tally_counter_add(&m->up, 7);
	tally_counter_add(&m->down, -45);
	tally_gauge_add(&m->g, 3);
	tally_histogram_observe(&m->h, 2000);
	tally_histogram_observe(&m->h, 3000);
	REG(tally_counter_register, m->z, &d, &m->late);
	tally_counter_add(&m->late, 2);
}

/* The deltas between two compact reads (rates.c) are those of two
 * snapshots (delta.c), series by series: increases, gauges changed or
 * not, a counter that went down (a reset), a series new since the first
 * read, histograms. */
TEST(compact_deltas)
{
	struct tp_snapshot s1, s2, c1, c2, delta;
	struct ts_compact *p1, *p2;
	struct moving m;
	unsigned seen = 0;

	setup();
	moving_start(&m);
	read_dir(&s1, &p1, &c1);
	moving_step(&m);
	read_dir(&s2, &p2, &c2);

	ts_delta(&s1, &s2, &delta);
	ts_compact_delta(p2, p1);
	CHECK_EQ(p2->n, delta.nseries);
	for (size_t i = 0; i < p2->n; i++) {
		const struct tp_series *s = check_entry(p2, i, &delta);

		if (strcmp(s->zone, "tc-moving") != 0)
			continue;
		seen++;
		if (!strcmp(s->key, "tc_moving_total"))
			CHECK(s->value == 7 && s->flags == TS_CHANGED);
		else if (!strcmp(s->key, "tc_falling_total"))
			CHECK(s->flags & TP_SERIES_RESET);
		else if (!strcmp(s->key, "tc_level"))
			CHECK(s->value == 7 && (s->flags & TS_CHANGED));
		else if (!strcmp(s->key, "tc_moving_ns"))
			CHECK(s->value == 2 && s->nbuckets > 0);
		else
			CHECK(s->value == 2 && (s->flags & TP_SERIES_NEW) &&
			      !(s->flags & TS_UNKNOWN));
	}
	CHECK_EQ(seen, 5);
	tp_snapshot_free(&delta);
	ts_compact_free(p1);
	ts_compact_free(p2);
	tp_snapshot_free(&c1);
	tp_snapshot_free(&c2);
	tp_snapshot_free(&s1);
	tp_snapshot_free(&s2);
	cleanup();
}

/* Two reads of the directory, each both ways, the writer's changes
 * between them made by the caller. */
struct pair_read {
	struct tp_snapshot s, c;
	struct ts_compact *p;
};

static void pair_read(struct pair_read *x, long sec)
{
	read_dir(&x->s, &x->p, &x->c);
	/* The same moment for both: the same rates and times. */
	x->s.real.tv_sec = x->c.real.tv_sec = sec;
	x->s.real.tv_nsec = x->c.real.tv_nsec = 250000000;
}

static void pair_free(struct pair_read *x)
{
	ts_compact_free(x->p);
	tp_snapshot_free(&x->c);
	tp_snapshot_free(&x->s);
}

/* A run of @n reads with options @args into @out: the report since start
 * of the first, one of each interval (2 s each) and the Average: rows,
 * of snapshots or of compact reads; in a child (exits 0). */
static void run_to(const char *args, int compact, struct pair_read *rd,
		   int n, const char *out)
{
	char *copy = strdup(args);
	struct ts_options o;
	struct tp_snapshot delta;
	struct ts_report r;
	const struct ts_emitter *em;
	struct ts_average *av = ts_average_new();
	struct ts_caverage *cav = ts_caverage_new();

	parse_args(copy, &o);
	if (!freopen(out, "w", stdout))
		_exit(2);
	em = o.json ? &ts_emit_json : &ts_emit_text;
	em->begin(&host, &o, &rd[0].s.real);
	if (compact)
		ts_report_compact(&r, rd[0].p, &o);
	else
		ts_report_since_start(&r, &rd[0].s, &o);
	em->report(&r, &o);
	ts_report_free(&r);
	for (int i = 1; i < n; i++) {
		if (compact) {
			ts_compact_delta(rd[i].p, rd[i - 1].p);
			ts_report_compact_interval(&r, rd[i].p, 2.0, &o);
			ts_report_events(&r, &rd[i - 1].c, &rd[i].c);
		} else {
			ts_delta(&rd[i - 1].s, &rd[i].s, &delta);
			ts_report_interval(&r, &delta, 2.0, &o);
			ts_report_events(&r, &rd[i - 1].s, &rd[i].s);
		}
		em->report(&r, &o);
		ts_report_free(&r);
		if (compact) {
			ts_caverage_add(cav, rd[i].p, 2.0);
		} else {
			ts_average_add(av, &delta, 2.0);
			tp_snapshot_free(&delta);
		}
	}
	if (compact)
		ts_report_caverage(&r, cav, &o);
	else
		ts_report_average(&r, av, &o);
	r.when = rd[n - 1].s.real;
	em->report(&r, &o);
	em->end(&o);
	ts_report_free(&r);
	ts_average_free(av);
	ts_caverage_free(cav);
	ts_options_free(&o);
	free(copy);
	fflush(stdout);
	exit(0);
}


/* Do the runs over reads @rd agree for every option set? */
static int runs_agree(struct pair_read *rd, int n)
{
	static const char *const sets[] = {
		"", "-o JSON", "-z", "-z -o JSON", "--human",
		"--human -o JSON", "-t", "--width 16",
	};
	int failed = 0;

	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++) {
		char path[2][128], *t[2];

		for (int compact = 0; compact < 2; compact++) {
			pid_t pid;
			int st;

			snprintf(path[compact], sizeof(path[compact]),
				 "%s/interval.%d.txt", dir, compact);
			fflush(stdout);
			pid = fork();
			CHECK(pid >= 0);
			if (pid == 0)
				run_to(sets[i], compact, rd, n,
				       path[compact]);
			CHECK(waitpid(pid, &st, 0) == pid);
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
			t[compact] = slurp(path[compact]);
		}
		if (strcmp(t[0], t[1]) != 0) {
			show_diff(sets[i], t[0], t[1]);
			failed = 1;
		}
		/* Not vacuous: the series that move, the process gone, the
		 * Average: rows are there. */
		CHECK(strstr(t[1], "tc_moving_total") && strstr(t[1], "tc-brief"));
		CHECK(strstr(t[1], "Average:") || strstr(t[1], "\"average\""));
		free(t[0]);
		free(t[1]);
	}
	return !failed;
}

/* A child with zone tc-brief whose file goes when it exits: it exits
 * when @fd (the write end of its pipe) closes.  It removes the file
 * itself: the library read TALLY_KEEP=1 (set by setup()) when this
 * process first used it, before the fork, and the child keeps its files
 * whatever its own environment says. */
static pid_t child_brief(int *fd)
{
	int p[2], q[2];
	char c;
	pid_t pid;

	CHECK(pipe(p) == 0 && pipe(q) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct tally_zone *z;

		close(q[1]);
		prctl(PR_SET_NAME, "tc-brief", 0, 0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		z = tally_zone_create("tc-brief", NULL);
		if (!z)
			_exit(1);
		fill(z, 3);
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		while (read(q[0], &c, 1) > 0)
			;
		if (unlink(tally_zone_path(z)) != 0)
			_exit(1);
		exit(0);
	}
	close(q[0]);
	CHECK(read(p[0], &c, 1) == 1);
	close(p[0]);
	close(p[1]);
	*fd = q[1];
	return pid;
}

static int no_seg(const char *path, struct tally_seg *seg,
		  const char *error, void *arg)
{
	(void)path, (void)seg, (void)error, (void)arg;
	return 0;
}

/* Read @x at @sec, under a limit of @nofile descriptors (0: as it is). */
static void limited_read(struct pair_read *x, long sec, rlim_t nofile)
{
	struct rlimit rl;

	if (nofile) {
		CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
		rl.rlim_cur = nofile;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	}
	pair_read(x, sec);
}

/* How many segments of read @x are held open. */
static uint32_t nheld(const struct pair_read *x)
{
	uint32_t n = 0;

	for (uint32_t g = 0; x->p->held && g < x->p->nsegs; g++)
		n += x->p->held[g] != NULL;
	return n;
}

/* The reads of interval_same_bytes, read @i under a limit of @nofile[i]
 * descriptors (0: as it is): a limit leaves a read fewer segments to
 * hold open than it reads (compact.c leaves 64 to the rest), whose
 * entries are kept whole, and the reports must be the same. */
static void interval_run(const rlim_t *nofile)
{
	struct pair_read rd[4];
	struct moving m;
	int fd, st;
	pid_t brief;

	setup();
	brief = child_brief(&fd);
	moving_start(&m);
	limited_read(&rd[0], 1900000000, nofile[0]);
	moving_step(&m);
	limited_read(&rd[1], 1900000002, nofile[1]);

	tally_counter_add(&m.up, 1000000);
	tally_counter_add(&m.late, 1);
	tally_gauge_add(&m.g, -1);
	tally_histogram_observe(&m.h, 5000000);
	limited_read(&rd[2], 1900000004, nofile[2]);

	/* tc-brief exits and its file goes, after the third read and
	 * before any report of it is printed: its rows stay in that
	 * interval's report and in the Average:, as read. */
	close(fd);
	CHECK(waitpid(brief, &st, 0) == brief);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(tally_seg_foreach_pid(dir, brief, NULL, no_seg, NULL), 0);
	tally_counter_add(&m.up, 5);
	limited_read(&rd[3], 1900000006, nofile[3]);
	CHECK(runs_agree(rd, 4));
	/* What was held, as the limits say. */
	CHECK_EQ(nheld(&rd[0]), rd[0].p->nsegs);
	if (nofile[1])
		CHECK(nheld(&rd[1]) > 0 && nheld(&rd[1]) < rd[1].p->nsegs);
	else
		CHECK_EQ(nheld(&rd[1]), rd[1].p->nsegs);
	CHECK_EQ(nheld(&rd[2]), rd[2].p->nsegs);
	CHECK_EQ(nheld(&rd[3]), rd[3].p->nsegs);
	for (int i = 0; i < 4; i++)
		pair_free(&rd[i]);
	cleanup();
}

/* A run of compact reads gives, byte for byte, the reports of a run of
 * snapshots, in text and JSON: the report since start, each interval's
 * and the Average: rows, over four reads with changes between them
 * (increases, a reset, a gauge, a histogram, a new series, idle series
 * for -z, a process that exits and takes its file away). */
TEST(interval_same_bytes)
{
	static const rlim_t as_is[4];

	interval_run(as_is);
}

/* The same with few descriptors to spare for the second read: the five
 * segments of the first read held, two of the second's (the others kept
 * whole), all of the third's and fourth's.  So an entry is kept whole in
 * one read and not in the one before or after it, and in the sums of the
 * Average: rows. */
TEST(interval_same_bytes_few_fds)
{
	static const rlim_t few[4] = { 64 + 7, 64 + 7, 64 + 40, 64 + 40 };
	struct rlimit was;

	CHECK(getrlimit(RLIMIT_NOFILE, &was) == 0);
	interval_run(few);
	CHECK(setrlimit(RLIMIT_NOFILE, &was) == 0);
}
