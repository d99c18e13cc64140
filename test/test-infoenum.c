/*
 * test-infoenum.c: info and enum metrics (TALLY_INFO, TALLY_ENUM, format
 * 2.8).  An info metric's series of value 1 are passed on with the
 * view's info set, those whose pairs were replaced are not; an enum's
 * states are passed on with stateset set, 1 for the state of the largest
 * stamp and 0 for the others; the bytes a reader of 2.7 checks are a
 * float gauge's, whose series it skips; an enum needs its state label; a
 * zone of 2.7 takes both (its readers skip them), and one older than
 * 2.6, made by tally 0.3, refuses both with a line that says what to do.
 * Threads and processes that change an enum's state at once, while a
 * reader reads in a loop, never let it find no state or two.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "layout.h"
#include "tally/family.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

/* What a pass showed of the metric named @name: the views' flags and
 * values, and the label values of each series, in the pass's order. */
struct seen {
	const char *name;
	int n, info, stateset, fgauge;
	double fvalue[8];
	char labels[8][64];
};

static int seen_fn(const struct tally_series_view *v, void *arg)
{
	struct seen *s = arg;
	size_t at = 0;

	if (strcmp(v->name, s->name) || s->n >= 8)
		return 0;
	s->info += v->info;
	s->stateset += v->stateset;
	s->fgauge += v->kind == TALLY_FGAUGE;
	s->fvalue[s->n] = v->fvalue;
	for (unsigned i = 0; i < v->nlabels; i++)
		at += (size_t)snprintf(s->labels[s->n] + at,
				       sizeof(s->labels[0]) - at, "%s=%s;",
				       v->label_names[i], v->label_values[i]);
	s->n++;
	return 0;
}

static struct seen read_zone(struct tally_zone *z, const char *name)
{
	struct seen s;

	memset(&s, 0, sizeof(s));
	s.name = name;
	foreach_path(tally_zone_path(z), seen_fn, &s);
	return s;
}

/* The one series named @name a pass shows: a float gauge, an info's
 * (@info) or not, of labels @labels and value @value. */
static void check_one(struct tally_zone *z, const char *name, int info,
		      const char *labels, double value)
{
	struct seen s = read_zone(z, name);

	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.info, info);
	CHECK_EQ(s.stateset, 0);
	CHECK_EQ(s.fgauge, 1);
	CHECK_STR(s.labels[0], labels);
	CHECK(s.fvalue[0] == value);
}

static void set_minor(struct tally_zone *z, uint16_t minor)
{
	int fd = open(tally_zone_path(z), O_RDWR | O_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, &minor, 2, 10), 2);
	close(fd);
}

/* An info metric shows its current pairs only: set to 1 when
 * registered, the replaced ones set to 0 are not passed on. */
TEST(info_shows_its_current_pairs)
{
	struct tally_zone *z = zone_in("info");
	struct tally_metric_desc d = desc(TALLY_INFO, "build");
	struct tally_label v1[] = { { "commit", "abc" }, { "version", "1.2" } };
	struct tally_label v2[] = { { "commit", "def" }, { "version", "1.3" } };
	tally_fgauge a, b;
	double x;

	d.help = "Build.";
	d.labels = v1;
	d.nlabels = 2;
	CHECK_EQ(tally_info_register(z, &d, &a), 0);
	CHECK_EQ(tally_fgauge_fetch(&a, &x), 0);
	CHECK(x == 1.0);
	check_one(z, "build", 1, "commit=abc;version=1.2;", 1.0);

	d.labels = v2;
	CHECK_EQ(tally_info_register(z, &d, &b), 0);
	tally_fgauge_set(&a, 0.0);
	check_one(z, "build", 1, "commit=def;version=1.3;", 1.0);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/* An enum's states, in the order they were registered, each 0 or 1. */
TEST(enum_shows_every_state)
{
	struct tally_zone *z = zone_in("enum");
	struct tally_metric_desc d = desc(TALLY_ENUM, "state");
	const char *names[] = { "shard", "state" };
	const char *up[] = { "a", "up" }, *down[] = { "a", "down" };
	const tally_fgauge *gu, *gd;
	tally_fgauge_family f;
	struct seen s;

	d.help = "State.";
	CHECK_EQ(tally_fgauge_family_register(z, &d, names, 2, &f), 0);
	CHECK_EQ(tally_fgauge_family_get(&f, up, 2, &gu), 0);
	CHECK_EQ(tally_fgauge_family_get(&f, down, 2, &gd), 0);
	tally_fgauge_set(gd, 1.0);
	s = read_zone(z, "state");
	CHECK_EQ(s.n, 2);
	CHECK_EQ(s.stateset, 2);
	CHECK_EQ(s.info, 0);
	CHECK_EQ(s.fgauge, 2);
	CHECK_STR(s.labels[0], "shard=a;state=up;");
	CHECK(s.fvalue[0] == 0.0);
	CHECK_STR(s.labels[1], "shard=a;state=down;");
	CHECK(s.fvalue[1] == 1.0);
	tally_family_remove(&f.family);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/* An info family's children are set by the caller; one left at 0 is not
 * shown, and an info and a float gauge of one name are two definitions
 * (readers show the current one). */
TEST(info_family_and_definitions)
{
	struct tally_zone *z = zone_in("infofam");
	struct tally_metric_desc d = desc(TALLY_INFO, "build");
	const char *names[] = { "version" };
	const char *v1[] = { "1" }, *v2[] = { "2" };
	const tally_fgauge *g1, *g2;
	tally_fgauge_family f;
	tally_fgauge plain;

	CHECK_EQ(tally_fgauge_family_register(z, &d, names, 1, &f), 0);
	CHECK_EQ(tally_fgauge_family_get(&f, v1, 1, &g1), 0);
	CHECK_EQ(tally_fgauge_family_get(&f, v2, 1, &g2), 0);
	tally_fgauge_set(g2, 1.0);
	check_one(z, "build", 1, "version=2;", 1.0);
	/* A float gauge of the name is a new generation: the info's
	 * series are no longer shown. */
	d.kind = TALLY_FGAUGE;
	CHECK_EQ(tally_fgauge_register(z, &d, &plain), 0);
	tally_fgauge_set(&plain, 5.0);
	check_one(z, "build", 0, "", 5.0);
	tally_family_remove(&f.family);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/* A binding's definition of an enum (tally_metric_redefine) is the
 * record its series are then registered in: one generation. */
TEST(redefine_is_the_enum_record)
{
	struct tally_zone *z = zone_in("redefine");
	struct tally_metric_desc d = desc(TALLY_ENUM, "state");
	const char *names[] = { "state" }, *up[] = { "up" };
	const tally_fgauge *g;
	tally_fgauge_family f;
	struct tally_seg_info info;

	d.help = "State.";
	CHECK_EQ(tally_metric_redefine(z, &d, NULL, 0), 0);
	CHECK_EQ(tally_metric_redefine(z, &d, NULL, 0), 0);
	CHECK_EQ(tally_fgauge_family_register(z, &d, names, 1, &f), 0);
	CHECK_EQ(tally_fgauge_family_get(&f, up, 1, &g), 0);
	info = info_of(tally_zone_path(z));
	CHECK_EQ(info.redefinitions, 0);
	d.kind = TALLY_INFO;
	CHECK_EQ(tally_metric_redefine(z, &d, NULL, 0), 1);
	tally_family_remove(&f.family);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/* What a reader of 2.7 checks: a float gauge's metric record (kind 3,
 * value type 1, shared), whose tail is zero, and a series of state 4,
 * of a type it does not know, which it skips. */
TEST(older_readers_skip_them)
{
	struct tally_zone *z = zone_in("old");
	struct tally_metric_desc d = desc(TALLY_INFO, "build");
	struct tally_label l = { "version", "1.2" };
	const struct tally__metric_tail *t;
	tally_fgauge g;
	struct tally__hdr hd;
	struct tally__metric_rec f;
	struct tally__series r;

	d.help = "Build.";
	d.labels = &l;
	d.nlabels = 1;
	CHECK_EQ(tally_info_register(z, &d, &g), 0);
	read_first_records(tally_zone_path(z), &hd, &f, &r);
	CHECK_EQ(hd.minor, 8);
	CHECK_EQ(f.kind, TALLY__KIND_GAUGE_SET);
	CHECK_EQ(f.vtype, TALLY__VT_FLOAT64);
	CHECK_EQ(f.mode, TALLY_SHARED);
	CHECK_EQ(f.type, TALLY__TYPE_INFO);
	CHECK(f.type > 3); /* TALLY__TYPE_MAX of 2.7 */
	CHECK_EQ(strlen(f.help), f.help_len);
	t = tally__metric_tail(&f);
	CHECK_EQ(t->combine + t->nbounds + t->flags, 0);
	CHECK_EQ(r.state, TALLY__SERIES_TYPED);
	CHECK_EQ(r.nslots, 1u);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/* An enum's series need the state label; both kinds need a zone of 2.6
 * or later (one of 2.5 was made by tally 0.3, whose readers would take
 * them for float gauges). */
TEST(refusals)
{
	struct tally_zone *z = zone_in("refused");
	struct tally_metric_desc d = desc(TALLY_ENUM, "state");
	struct tally_label l = { "shard", "a" };
	const char *names[] = { "shard" };
	tally_fgauge_family f;
	tally_fgauge g;

	d.labels = &l;
	d.nlabels = 1;
	CHECK_EQ(tally_enum_register(z, &d, &g), -EINVAL);
	CHECK(strstr(tally_errmsg(), "no label named as the metric"));
	d.labels = NULL;
	d.nlabels = 0;
	CHECK_EQ(tally_fgauge_family_register(z, &d, names, 1, &f), -EINVAL);
	set_minor(z, 7);
	l.name = "state";
	d.labels = &l;
	d.nlabels = 1;
	CHECK_EQ(tally_enum_register(z, &d, &g), 0);
	d = desc(TALLY_INFO, "version");
	CHECK_EQ(tally_info_register(z, &d, &g), 0);
	set_minor(z, 5);
	d = desc(TALLY_ENUM, "phase");
	d.labels = &l;
	l.name = "phase";
	d.nlabels = 1;
	CHECK_EQ(tally_enum_register(z, &d, &g), -EPROTONOSUPPORT);
	CHECK(strstr(tally_errmsg(), "made by tally 0.3 (format 2.5)"));
	CHECK(strstr(tally_errmsg(), "run them all with tally 0.4"));
	d = desc(TALLY_INFO, "build");
	CHECK_EQ(tally_info_register(z, &d, &g), -EPROTONOSUPPORT);
	CHECK_EQ(tally_fgauge_family_register(z, &d, names, 1, &f),
		 -EPROTONOSUPPORT);
	CHECK_EQ(tally_metric_redefine(z, &d, NULL, 0), -EPROTONOSUPPORT);
	set_minor(z, TALLY__FMT_MINOR);
	CHECK_EQ(tally_info_register(z, &d, &g), 0);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/* The enum of the concurrency tests: metric "mode", 4 states. */
#define NSTATES 4
#define READS 2000

struct race {
	struct tally_zone *z;
	const tally_fgauge *st[NSTATES];
	tally_fgauge_family f;
	int next;              /* threads: each takes a seed */
	int reads;             /* the writers write until READS passes */
	int changes;           /* made by the writers */
};

/* The states a pass shows at 1, and values other than 0 and 1. */
struct current {
	int ones, others, which;
};

static int current_fn(const struct tally_series_view *v, void *arg)
{
	struct current *c = arg;

	if (strcmp(v->name, "mode"))
		return 0;
	if (v->fvalue == 1.0) {
		c->ones++;
		c->which = v->label_values[0][0] - 'a';
	} else if (v->fvalue != 0.0) {
		c->others++;
	}
	return 0;
}

static struct current read_current(struct tally_seg *s)
{
	struct current c = { 0, 0, -1 };

	CHECK(tally_seg_foreach(s, 0, current_fn, &c) >= 0);
	return c;
}

static void race_setup(struct race *r, const char *zone)
{
	struct tally_metric_desc d = desc(TALLY_ENUM, "mode");
	const char *names[] = { "mode" };
	static const char *values[NSTATES] = { "a", "b", "c", "d" };

	memset(r, 0, sizeof(*r));
	r->z = zone_in(zone);
	CHECK_EQ(tally_fgauge_family_register(r->z, &d, names, 1, &r->f), 0);
	for (int i = 0; i < NSTATES; i++)
		CHECK_EQ(tally_fgauge_family_get(&r->f, &values[i], 1,
						 &r->st[i]), 0);
	CHECK_EQ(tally_enum_start(r->st, NSTATES), 0);
}

/* The stamps of the states, read one after another as a reader does
 * while writers change them, have one largest, above 0. */
static void race_stamps(struct race *r)
{
	for (int k = 0; k < 50; k++) {
		double v, top = 0;
		int at_top = 0;

		for (int i = 0; i < NSTATES; i++) {
			CHECK_EQ(tally_fgauge_fetch(r->st[i], &v), 0);
			if (v > top) {
				top = v;
				at_top = 1;
			} else if (v == top) {
				at_top++;
			}
		}
		CHECK(top > 0);
		CHECK_EQ(at_top, 1);
	}
}

/* One pass over the zone while writers change the state: it finds one
 * state current, never none or two. */
static void race_read(struct race *r, struct tally_seg *s)
{
	struct current c = read_current(s);

	CHECK_EQ(c.others, 0);
	CHECK_EQ(c.ones, 1);
	race_stamps(r);
	__atomic_fetch_add(&r->reads, 1, __ATOMIC_RELAXED);
}

/* Reads the zone in a loop: READS passes. */
static void *race_reader(void *arg)
{
	struct race *r = arg;
	struct tally_seg *s = tally_seg_open(tally_zone_path(r->z), NULL);

	CHECK(s != NULL);
	while (__atomic_load_n(&r->reads, __ATOMIC_RELAXED) < READS)
		race_read(r, s);
	tally_seg_close(s);
	return NULL;
}

/* Changes the state until the reader is done. */
static void race_writes(struct race *r, uint64_t seed)
{
	while (__atomic_load_n(&r->reads, __ATOMIC_RELAXED) < READS) {
		CHECK_EQ(tally_enum_set(r->st, NSTATES,
					xorshift64(&seed) % NSTATES), 0);
		__atomic_fetch_add(&r->changes, 1, __ATOMIC_RELAXED);
	}
}

static void *race_writer(void *arg)
{
	struct race *r = arg;

	race_writes(r, 0x9e3779b97f4a7c15ull +
		    (uint64_t)__atomic_fetch_add(&r->next, 1,
						 __ATOMIC_RELAXED));
	return NULL;
}

/* After the race, the state set last is the one current. */
static void race_finish(struct race *r)
{
	struct tally_seg *s = tally_seg_open(tally_zone_path(r->z), NULL);
	struct current c;

	CHECK(s != NULL);
	CHECK(r->reads >= READS);
	CHECK(r->changes > 0);
	CHECK_EQ(tally_enum_set(r->st, NSTATES, 2), 0);
	CHECK_EQ(tally_enum_start(r->st, NSTATES), 0);
	c = read_current(s);
	CHECK_EQ(c.ones, 1);
	CHECK_EQ(c.which, 2);
	tally_seg_close(s);
	tally_family_remove(&r->f.family);
	CHECK_EQ(tally_zone_destroy(r->z), 0);
}

/* Threads changing the state while a reader reads in a loop. */
TEST(enum_changes_from_threads)
{
	struct race r;
	pthread_t reader;

	race_setup(&r, "enumthreads");
	CHECK_EQ(pthread_create(&reader, NULL, race_reader, &r), 0);
	run_threads(3, race_writer, &r);
	pthread_join(reader, NULL);
	race_finish(&r);
}

/* Processes sharing the zone changing the state while a reader reads
 * in a loop. */
TEST(enum_changes_from_processes)
{
	struct race *r = shared_mem(sizeof(*r));
	pid_t pids[3];
	int st;
	struct tally_seg *s;

	race_setup(r, "enumprocs");
	s = tally_seg_open(tally_zone_path(r->z), NULL);
	CHECK(s != NULL);
	for (int i = 0; i < 3; i++) {
		CHECK((pids[i] = fork()) >= 0);
		if (pids[i] == 0) {
			race_writes(r, 0x2545f4914f6cdd1dull + (uint64_t)i);
			_exit(0);
		}
	}
	for (int done = 0; done < 3;) {
		if (__atomic_load_n(&r->reads, __ATOMIC_RELAXED) < READS)
			race_read(r, s);
		for (int i = 0; i < 3; i++) {
			if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) ==
			    pids[i]) {
				CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
				pids[i] = 0;
				done++;
			}
		}
	}
	tally_seg_close(s);
	race_finish(r);
	munmap(r, sizeof(*r));
}

/* The states are set only when the call is valid; a fresh enum starts
 * in its first state, a start does not move a state that is set, and a
 * reader shows the state of the largest stamp. */
TEST(enum_set_checks)
{
	struct race r;
	struct current c;
	struct tally_seg *s;
	struct tally_metric_desc d;
	tally_fgauge bad;
	const tally_fgauge *badp[1] = { &bad };

	race_setup(&r, "enumchecks");
	s = tally_seg_open(tally_zone_path(r.z), NULL);
	CHECK(s != NULL);
	c = read_current(s);
	CHECK(c.ones == 1 && c.which == 0);
	CHECK_EQ(tally_enum_set(r.st, NSTATES, NSTATES), -EINVAL);
	CHECK_EQ(tally_enum_set(NULL, 1, 0), -EINVAL);
	CHECK_EQ(tally_enum_set(r.st, 0, 0), -EINVAL);
	/* A failed registration's handle writes nowhere, without error. */
	d = desc(TALLY_ENUM, "other");
	CHECK_EQ(tally_enum_register(r.z, &d, &bad), -EINVAL);
	CHECK_EQ(tally_enum_set(badp, 1, 0), 0);
	CHECK_EQ(tally_enum_start(badp, 1), 0);
	CHECK_EQ(tally_enum_set(r.st, NSTATES, 3), 0);
	CHECK_EQ(tally_enum_start(r.st, NSTATES), 0);
	c = read_current(s);
	CHECK(c.ones == 1 && c.which == 3);
	/* A failed state among the states holds no stamp, whatever another
	 * failed float gauge of the process wrote (the word every failed
	 * handle shares): the changes go on, each above the last. */
	tally_fgauge_set(&bad, 1e300);
	{
		const tally_fgauge *with_bad[3] = { r.st[0], &bad, r.st[1] };
		double v0, v1;

		CHECK_EQ(tally_enum_set(with_bad, 3, 0), 0);
		CHECK_EQ(tally_enum_set(with_bad, 3, 2), 0);
		CHECK_EQ(tally_fgauge_fetch(r.st[0], &v0), 0);
		CHECK_EQ(tally_fgauge_fetch(r.st[1], &v1), 0);
		CHECK(v1 > v0 && v1 < 100);
		c = read_current(s);
		CHECK(c.ones == 1 && c.which == 1);
		CHECK_EQ(tally_enum_set(with_bad, 3, 3), -EINVAL);
	}
	CHECK_EQ(tally_enum_set(r.st, NSTATES, 3), 0);
	/* What a reader shows is the state of the largest stamp: the
	 * first of two equal ones; none while no state is above 0. */
	tally_fgauge_set(r.st[0], 5.0);
	tally_fgauge_set(r.st[1], 7.0);
	tally_fgauge_set(r.st[2], 7.0);
	tally_fgauge_set(r.st[3], 3.0);
	c = read_current(s);
	CHECK(c.ones == 1 && c.which == 1 && c.others == 0);
	for (int i = 0; i < NSTATES; i++)
		tally_fgauge_set(r.st[i], i == 2 ? -1.0 : 0.0);
	c = read_current(s);
	CHECK(c.ones == 0 && c.others == 0);
	CHECK_EQ(tally_enum_start(r.st, NSTATES), 0);
	c = read_current(s);
	CHECK(c.ones == 1 && c.which == 0);
	tally_seg_close(s);
	r.reads = READS;
	r.changes = 1;
	race_finish(&r);
}
