/*
 * test-family.c: get-or-create registration and families of series
 * (tally/family.h), checked from the writer's side and through the
 * segment reader.
 *
 * It proves that:
 *   - registering a series that exists with the same definition gives
 *     the same series (the same block), whose values add up, and another
 *     definition (kind, help, unit, mode, histogram layout) is refused
 *     with -EINVAL and a handle that discards;
 *   - a zone with no room left still hands out the series it holds;
 *   - each registration holds the series: with two registrations, the
 *     first removal leaves it to readers and the second retires it; and
 *     readers see it throughout while other registrations come and go;
 *   - a family's children are series with the family's labels and the
 *     values given, in the order of the label names; asking again gives
 *     the same handle, without a new reference;
 *   - threads asking for the same and different children at once (the
 *     table grows meanwhile) each get one series per set of values, with
 *     exact totals, and readers see no duplicate;
 *   - a known child is found while the family's lock and the zone's
 *     metrics lock are held (its lookup takes no lock);
 *   - a forked child finds its parent's children (the same handles), and
 *     can make new ones even if a thread of the parent held the family's
 *     lock at fork();
 *   - removing a family removes each child once (a series also
 *     registered by hand stays);
 *   - bad input (wrong number of values, NULL, invalid UTF-8, too long,
 *     bad label names, a removed family) gives a clear error and a
 *     handle that discards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "snap.h"
#include "tally/family.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

static struct tally_zone *zone(const char *name)
{
	struct tally_zone_opts o = { 64 * TALLY_CHUNK_SLOTS, 1 << 14, 0 };
	struct tally_zone *z = tally_zone_create(name, &o);

	if (!z)
		harness_fail(__FILE__, __LINE__, "tally_zone_create: %s",
			     tally_errmsg());
	return z;
}

/* Every live series of @z (one snap at a time: each call frees the
 * previous one). */
static struct snap *read_zone(struct tally_zone *z)
{
	static struct snap sn;

	snap_free(&sn);
	sn = read_path(tally_zone_path(z), 0);
	return &sn;
}

/* How many series of @name with @labels the reader saw, and the value of
 * the last one. */
static int count(const struct snap *sn, const char *name, const char *labels,
		 int64_t *value)
{
	int n = 0;

	for (int i = 0; i < sn->n; i++)
		if (!strcmp(sn->s[i].name, name) &&
		    !strcmp(sn->s[i].labels, labels)) {
			n++;
			if (value)
				*value = sn->s[i].value;
		}
	return n;
}

static int64_t fetch(const tally_metric *m)
{
	int64_t v = INT64_MIN;

	CHECK_EQ(tally_metric_fetch(m, &v), 0);
	return v;
}

/* ---- get-or-create ---- */

TEST(register_twice_is_the_same_series)
{
	struct tally_zone *z = zone("goc");
	struct tally_label l = { "worker", "7" };
	struct tally_metric_desc d = desc(TALLY_COUNTER, "jobs_total");
	tally_counter a, b;
	tally_histogram h1, h2;
	int64_t v = 0;

	d.help = "Jobs done.";
	d.labels = &l;
	d.nlabels = 1;
	CHECK_EQ(tally_counter_register(z, &d, &a), 0);
	/* A respawned worker, or a library initialised twice. */
	CHECK_EQ(tally_counter_register(z, &d, &b), 0);
	CHECK(a.metric.block == b.metric.block);
	CHECK_EQ(a.metric.series, b.metric.series);
	tally_counter_add(&a, 3);
	tally_counter_add(&b, 4);
	CHECK_EQ(fetch(&a.metric), 7);
	CHECK_EQ(count(read_zone(z), "jobs_total", "worker=7", &v), 1);
	CHECK_EQ(v, 7);

	/* A histogram's layout comes along. */
	d = desc(TALLY_HISTOGRAM, "latency_ns");
	d.hist_sub_bits = 2;
	d.hist_max_bits = 20;
	CHECK_EQ(tally_histogram_register(z, &d, &h1), 0);
	CHECK_EQ(tally_histogram_register(z, &d, &h2), 0);
	CHECK(h1.metric.block == h2.metric.block);
	CHECK_EQ(h2.metric.sub_bits, 2);
	CHECK_EQ(h2.metric.max_bits, 20);
	tally_histogram_observe(&h1, 100);
	tally_histogram_observe(&h2, 1000);
	CHECK_EQ(fetch(&h1.metric), 2);
}

/* A definition that changes is a new generation (kind, mode, layout) or
 * a new help text or unit, never a refusal: the handle works, and the
 * older handles go on counting their own series. */
TEST(another_definition_is_a_new_generation)
{
	struct tally_zone *z = zone("conflict");
	struct tally_metric_desc d = desc(TALLY_COUNTER, "reqs_total");
	tally_counter c, other;
	tally_gauge g;
	tally_histogram h, h2;

	d.help = "Requests.";
	d.unit = "requests";
	CHECK_EQ(tally_counter_register(z, &d, &c), 0);
	d.help = "Other help.";
	CHECK_EQ(tally_counter_register(z, &d, &other), 0);
	CHECK(other.metric.block == c.metric.block);
	d.help = "Requests.";
	d.unit = "bytes";
	CHECK_EQ(tally_counter_register(z, &d, &other), 0);
	CHECK(other.metric.block == c.metric.block);
	d.unit = "requests";
	d.mode = TALLY_SHARED;
	CHECK_EQ(tally_counter_register(z, &d, &other), 0);
	CHECK(other.metric.block != c.metric.block);
	d.mode = 0;
	d.kind = 0;
	CHECK_EQ(tally_gauge_register(z, &d, &g), 0);
	tally_counter_inc(&c);
	tally_counter_inc(&other);
	tally_gauge_add(&g, 3);
	CHECK_EQ(fetch(&c.metric), 1);
	CHECK_EQ(fetch(&other.metric), 1);
	CHECK_EQ(fetch(&g.metric), 3);
	d = desc(TALLY_HISTOGRAM, "lat");
	CHECK_EQ(tally_histogram_register(z, &d, &h), 0);
	d.hist_sub_bits = 2;
	CHECK_EQ(tally_histogram_register(z, &d, &h2), 0);
	CHECK_EQ(h2.metric.sub_bits, 2);
	CHECK(h2.metric.block != h.metric.block);
}

TEST(each_registration_holds_the_series)
{
	struct tally_zone *z = zone("refs");
	struct tally_metric_desc d = desc(TALLY_GAUGE, "inflight");
	tally_gauge a, b, copy;
	int64_t v = 0;

	CHECK_EQ(tally_gauge_register(z, &d, &a), 0);
	CHECK_EQ(tally_gauge_register(z, &d, &b), 0);
	tally_gauge_add(&a, 5);
	copy = a;
	CHECK_EQ(tally_metric_remove(&a.metric), 0);
	/* Still there for readers and for the other registration. */
	CHECK_EQ(count(read_zone(z), "inflight", "", &v), 1);
	CHECK_EQ(v, 5);
	tally_gauge_dec(&b);
	CHECK_EQ(fetch(&b.metric), 4);
	CHECK_EQ(z->hdr->series_live, 1);
	/* The last one retires it. */
	CHECK_EQ(tally_metric_remove(&b.metric), 0);
	CHECK_EQ(count(read_zone(z), "inflight", "", NULL), 0);
	CHECK_EQ(z->hdr->series_live, 0);
	CHECK_EQ(tally_metric_remove(&b.metric), -EINVAL);
	CHECK_EQ(tally_metric_remove(&copy.metric), -EINVAL);
	/* Registered again: a new series, which the stale copy cannot
	 * remove. */
	CHECK_EQ(tally_gauge_register(z, &d, &a), 0);
	CHECK_EQ(tally_metric_remove(&copy.metric), -EINVAL);
	CHECK_EQ(fetch(&a.metric), 0);
	CHECK_EQ(count(read_zone(z), "inflight", "", NULL), 1);
}

/* A zone with no room for another block still hands out the series it
 * holds. */
TEST(full_zone_finds_existing_series)
{
	struct tally_zone_opts o = { TALLY_CHUNK_SLOTS, 4096, 0 };
	struct tally_zone *z = tally_zone_create("full", &o);
	struct tally_label l = { "i", NULL };
	struct tally_metric_desc d = desc(TALLY_COUNTER, "fill_total");
	tally_counter first, c;
	char v[16];
	int n = 0, rc;

	CHECK(z != NULL);
	d.labels = &l;
	d.nlabels = 1;
	do {
		snprintf(v, sizeof(v), "%d", n);
		l.value = v;
		rc = tally_counter_register(z, &d, n ? &c : &first);
		n++;
	} while (rc == 0 && n < 10000);
	CHECK_EQ(rc, -ENOSPC);
	CHECK(n > 100);
	l.value = "0";
	CHECK_EQ(tally_counter_register(z, &d, &c), 0);
	CHECK(c.metric.block == first.metric.block);
	/* And a new one is still refused, without a family made for it. */
	d.name = "other_total";
	CHECK_EQ(tally_counter_register(z, &d, &c), -ENOSPC);
	CHECK_EQ(atomic_load(&z->hdr->metric_count), 1);
}

/* ---- families ---- */

static const char *const method_code[] = { "method", "code" };

static struct tally_metric_desc requests_desc(void)
{
	static const struct tally_label own = { "service", "api" };
	struct tally_metric_desc d = desc(0, "http_requests_total");

	d.help = "HTTP requests.";
	d.labels = &own;
	d.nlabels = 1;
	return d;
}

TEST(family_children_are_series)
{
	struct tally_zone *z = zone("fam");
	struct tally_metric_desc d = requests_desc();
	tally_counter_family f;
	const tally_counter *get200, *post500, *again;
	const char *v1[] = { "GET", "200" }, *v2[] = { "POST", "500" };
	char a[] = "GET", b[] = "200";
	const char *v3[] = { a, b };
	struct snap *sn;
	int64_t v = 0;

	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2, &f), 0);
	CHECK_EQ(tally_counter_family_get(&f, v1, 2, &get200), 0);
	CHECK_EQ(tally_counter_family_get(&f, v2, 2, &post500), 0);
	CHECK(get200 != post500);
	CHECK(get200->metric.block != post500->metric.block);
	/* Other strings, the same values: the same handle. */
	CHECK_EQ(tally_counter_family_get(&f, v3, 2, &again), 0);
	CHECK(again == get200);
	tally_counter_add(get200, 2);
	tally_counter_inc(again);
	tally_counter_inc(post500);
	sn = read_zone(z);
	CHECK_EQ(sn->n, 2);
	CHECK_EQ(count(sn, "http_requests_total",
		       "code=200,method=GET,service=api", &v), 1);
	CHECK_EQ(v, 3);
	CHECK_EQ(count(sn, "http_requests_total",
		       "code=500,method=POST,service=api", &v), 1);
	CHECK_EQ(v, 1);
	/* Asking again takes no reference: one removal retires them. */
	CHECK_EQ(tally_family_remove(&f.family), 0);
	CHECK_EQ(read_zone(z)->n, 0);
	CHECK_EQ(z->hdr->series_live, 0);
	CHECK_EQ(tally_family_remove(&f.family), -EINVAL);
}

TEST(family_of_each_kind)
{
	struct tally_zone *z = zone("kinds");
	struct tally_metric_desc d = desc(0, "queue_depth");
	const char *const names[] = { "queue" };
	const char *q[] = { "in" };
	tally_gauge_family gf;
	tally_setgauge_family sf;
	tally_histogram_family hf;
	const tally_gauge *g;
	const tally_setgauge *s;
	const tally_histogram *h;

	CHECK_EQ(tally_gauge_family_register(z, &d, names, 1, &gf), 0);
	CHECK_EQ(tally_gauge_family_get(&gf, q, 1, &g), 0);
	tally_gauge_inc(g);
	tally_gauge_inc(g);
	tally_gauge_dec(g);
	CHECK_EQ(fetch(&g->metric), 1);
	d.name = "queue_limit";
	CHECK_EQ(tally_setgauge_family_register(z, &d, names, 1, &sf), 0);
	CHECK_EQ(tally_setgauge_family_get(&sf, q, 1, &s), 0);
	tally_setgauge_set(s, 42);
	CHECK_EQ(fetch(&s->metric), 42);
	d.name = "queue_wait_ns";
	d.hist_sub_bits = 2;
	CHECK_EQ(tally_histogram_family_register(z, &d, names, 1, &hf), 0);
	CHECK_EQ(tally_histogram_family_get(&hf, q, 1, &h), 0);
	CHECK_EQ(h->metric.sub_bits, 2);
	tally_histogram_observe(h, 5);
	CHECK_EQ(fetch(&h->metric), 1);
	/* A family of a name another kind holds: a new generation of the
	 * name; the older family's children go on in theirs. */
	CHECK_EQ(tally_family_remove(&hf.family), 0);
	d.name = "queue_depth";
	d.hist_sub_bits = 0;
	CHECK_EQ(tally_histogram_family_register(z, &d, names, 1, &hf), 0);
	CHECK_EQ(tally_histogram_family_get(&hf, q, 1, &h), 0);
	tally_histogram_observe(h, 5);
	CHECK_EQ(fetch(&h->metric), 1);
	CHECK_EQ(tally_gauge_family_get(&gf, q, 1, &g), 0);
	CHECK_EQ(fetch(&g->metric), 1);
	CHECK_EQ(tally_family_remove(&gf.family), 0);
	CHECK_EQ(tally_family_remove(&sf.family), 0);
	CHECK_EQ(tally_family_remove(&hf.family), 0);
}

TEST(family_and_registration_share_series)
{
	struct tally_zone *z = zone("share");
	struct tally_metric_desc d = requests_desc();
	struct tally_label l[] = { { "code", "200" }, { "method", "GET" },
				   { "service", "api" } };
	const char *v[] = { "GET", "200" };
	tally_counter_family f1, f2;
	tally_counter byhand;
	const tally_counter *c1, *c2;
	int64_t val = 0;

	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2, &f1), 0);
	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2, &f2), 0);
	CHECK_EQ(tally_counter_family_get(&f1, v, 2, &c1), 0);
	CHECK_EQ(tally_counter_family_get(&f2, v, 2, &c2), 0);
	CHECK(c1->metric.block == c2->metric.block);
	d.labels = l;
	d.nlabels = 3;
	CHECK_EQ(tally_counter_register(z, &d, &byhand), 0);
	CHECK(byhand.metric.block == c1->metric.block);
	tally_counter_inc(c1);
	tally_counter_inc(c2);
	tally_counter_inc(&byhand);
	CHECK_EQ(tally_family_remove(&f1.family), 0);
	CHECK_EQ(count(read_zone(z), "http_requests_total",
		       "code=200,method=GET,service=api", &val), 1);
	CHECK_EQ(val, 3);
	CHECK_EQ(tally_family_remove(&f2.family), 0);
	CHECK_EQ(count(read_zone(z), "http_requests_total",
		       "code=200,method=GET,service=api", NULL), 1);
	CHECK_EQ(tally_metric_remove(&byhand.metric), 0);
	CHECK_EQ(read_zone(z)->n, 0);
}

/* Threads asking for children at once: NT threads, each going ROUNDS
 * times over KEYS sets of values (all shared, in another order per
 * thread), plus KEYS sets of its own. */
#define NT   4
#define KEYS 60

struct asker {
	tally_counter_family *f;
	pthread_barrier_t *bar;
	int id;
	long rounds;
};

static void key_of(int k, char method[16], char code[16])
{
	snprintf(method, 16, "M%d", k % 7);
	snprintf(code, 16, "%d", 100 + k);
}

static void *asker_main(void *arg)
{
	struct asker *a = arg;
	char m[16], c[16], own[16];

	pthread_barrier_wait(a->bar);
	for (long r = 0; r < a->rounds; r++) {
		for (int i = 0; i < KEYS; i++) {
			int k = (i * 7 + a->id * 13) % KEYS;
			const char *v[2] = { m, c };
			const tally_counter *h;

			key_of(k, m, c);
			if (tally_counter_family_get(a->f, v, 2, &h) != 0)
				harness_fail(__FILE__, __LINE__, "get: %s",
					     tally_errmsg());
			tally_counter_inc(h);
			snprintf(own, sizeof(own), "t%d", a->id);
			v[0] = own;
			if (tally_counter_family_get(a->f, v, 2, &h) != 0)
				harness_fail(__FILE__, __LINE__, "get: %s",
					     tally_errmsg());
			tally_counter_add(h, 2);
		}
	}
	return NULL;
}

TEST(family_threads_make_one_series_per_child)
{
	struct tally_zone *z = zone("threads");
	struct tally_metric_desc d = requests_desc();
	long rounds = harness_scale(400);
	tally_counter_family f;
	pthread_barrier_t bar;
	pthread_t t[NT];
	struct asker a[NT];
	struct snap *sn;

	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2, &f), 0);
	pthread_barrier_init(&bar, NULL, NT);
	for (int i = 0; i < NT; i++) {
		a[i] = (struct asker){ &f, &bar, i, rounds };
		CHECK_EQ(pthread_create(&t[i], NULL, asker_main, &a[i]), 0);
	}
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&bar);

	sn = read_zone(z);
	CHECK_EQ(sn->n, KEYS + NT * KEYS);
	for (int k = 0; k < KEYS; k++) {
		char m[16], c[16], l[80];
		int64_t v = 0;

		key_of(k, m, c);
		snprintf(l, sizeof(l), "code=%s,method=%s,service=api", c, m);
		CHECK_EQ(count(sn, "http_requests_total", l, &v), 1);
		CHECK_EQ(v, NT * rounds);
		for (int i = 0; i < NT; i++) {
			snprintf(l, sizeof(l), "code=%s,method=t%d,service=api",
				 c, i);
			CHECK_EQ(count(sn, "http_requests_total", l, &v), 1);
			CHECK_EQ(v, 2 * rounds);
		}
	}
	CHECK_EQ(z->hdr->series_live, (uint32_t)(KEYS + NT * KEYS));
	CHECK_EQ(tally_family_remove(&f.family), 0);
	CHECK_EQ(z->hdr->series_live, 0);
}

/* A thread of the parent inside the family's lock at fork(): it waits
 * for the zone's metrics lock, which the test holds. */
struct blocked {
	tally_counter_family *f;
	_Atomic int started;
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;
	const char *v[] = { "PUT", "201" };
	const tally_counter *c;

	atomic_store(&b->started, 1);
	CHECK_EQ(tally_counter_family_get(b->f, v, 2, &c), 0);
	tally_counter_inc(c);
	return NULL;
}

TEST_TIMEOUT(family_lookup_after_fork, 60)
{
	struct tally_zone *z = zone("fork");
	struct tally_metric_desc d = requests_desc();
	const char *v[] = { "GET", "200" }, *nv[] = { "DELETE", "404" };
	tally_counter_family f;
	const tally_counter *c;
	struct blocked b = { &f, 0 };
	pthread_t t;
	int status;
	pid_t pid;
	int64_t val = 0;

	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2, &f), 0);
	CHECK_EQ(tally_counter_family_get(&f, v, 2, &c), 0);
	tally_counter_inc(c);

	pthread_mutex_lock(&z->hdr->metrics_lock);
	CHECK_EQ(pthread_create(&t, NULL, blocked_main, &b), 0);
	while (!atomic_load(&b.started))
		usleep(1000);
	usleep(100000); /* now inside the family's lock, waiting */
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		const tally_counter *cc, *nc;

		/* The parent's child: found, the same handle. */
		if (tally_counter_family_get(&f, v, 2, &cc) != 0 || cc != c)
			_exit(2);
		tally_counter_add(cc, 10);
		/* A new one: takes the family's lock, which the blocked
		 * thread held in the parent. */
		if (tally_counter_family_get(&f, nv, 2, &nc) != 0)
			_exit(3);
		tally_counter_add(nc, 5);
		_exit(0);
	}
	pthread_mutex_unlock(&z->hdr->metrics_lock);
	pthread_join(t, NULL);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_CHILD_OK(status);
	CHECK_EQ(fetch(&c->metric), 11);
	CHECK_EQ(count(read_zone(z), "http_requests_total",
		       "code=404,method=DELETE,service=api", &val), 1);
	CHECK_EQ(val, 5);
	CHECK_EQ(count(read_zone(z), "http_requests_total",
		       "code=201,method=PUT,service=api", &val), 1);
	CHECK_EQ(val, 1);
	/* The parent finds the child's series too (get-or-create). */
	CHECK_EQ(tally_counter_family_get(&f, nv, 2, &c), 0);
	CHECK_EQ(fetch(&c->metric), 5);
}

/* The lookup of a known child takes no lock: it returns while the zone's
 * metrics lock is held and a thread waits for it inside the family's
 * lock (making another child). */
TEST_TIMEOUT(family_lookup_never_locks, 30)
{
	struct tally_zone *z = zone("nolock");
	struct tally_metric_desc d = requests_desc();
	const char *v[] = { "GET", "200" };
	tally_counter_family f;
	const tally_counter *c, *again;
	struct blocked b = { &f, 0 };
	pthread_t t;

	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2, &f), 0);
	CHECK_EQ(tally_counter_family_get(&f, v, 2, &c), 0);
	pthread_mutex_lock(&z->hdr->metrics_lock);
	CHECK_EQ(pthread_create(&t, NULL, blocked_main, &b), 0);
	while (!atomic_load(&b.started))
		usleep(1000);
	usleep(50000);
	for (int i = 0; i < 1000; i++) {
		CHECK_EQ(tally_counter_family_get(&f, v, 2, &again), 0);
		CHECK(again == c);
		tally_counter_inc(again);
	}
	pthread_mutex_unlock(&z->hdr->metrics_lock);
	pthread_join(t, NULL);
	CHECK_EQ(fetch(&c->metric), 1000);
}

/* A registration's reference count changes without the record's seq:
 * a reader scanning meanwhile must still see the series every time. */
struct toggler {
	struct tally_zone *z;
	_Atomic int stop;
};

static void *toggler_main(void *arg)
{
	struct toggler *t = arg;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "held_total");
	tally_counter c;

	while (!atomic_load(&t->stop)) {
		CHECK_EQ(tally_counter_register(t->z, &d, &c), 0);
		CHECK_EQ(tally_metric_remove(&c.metric), 0);
	}
	return NULL;
}

TEST(readers_ignore_reference_counts)
{
	struct tally_zone *z = zone("toggle");
	struct tally_metric_desc d = desc(TALLY_COUNTER, "held_total");
	struct toggler tg = { z, 0 };
	tally_counter held;
	pthread_t t;
	long passes = harness_scale(3000);

	CHECK_EQ(tally_counter_register(z, &d, &held), 0);
	tally_counter_add(&held, 9);
	CHECK_EQ(pthread_create(&t, NULL, toggler_main, &tg), 0);
	for (long i = 0; i < passes; i++) {
		int64_t v = 0;

		if (count(read_zone(z), "held_total", "", &v) != 1 || v != 9)
			harness_fail(__FILE__, __LINE__, "pass %ld: the series "
				     "was not seen", i);
	}
	atomic_store(&tg.stop, 1);
	pthread_join(t, NULL);
	CHECK_EQ(tally_metric_remove(&held.metric), 0);
}

/* Every failure: an error that says what, and a handle that discards. */
static void expect_bad(const tally_counter_family *f, const char *const *v,
		       unsigned n, int err, const char *what)
{
	const tally_counter *c = NULL;

	CHECK_EQ(tally_counter_family_get(f, v, n, &c), -err);
	CHECK_EQ(errno, err);
	if (!strstr(tally_errmsg(), what))
		harness_fail(__FILE__, __LINE__, "message \"%s\" does not "
			     "say \"%s\"", tally_errmsg(), what);
	CHECK(c != NULL);
	tally_counter_inc(c);
	CHECK_EQ(tally_metric_remove((tally_metric *)&c->metric), -EINVAL);
}

TEST(family_bad_input)
{
	struct tally_zone *z = zone("bad");
	struct tally_metric_desc d = requests_desc();
	tally_counter_family f, removed;
	char big[TALLY_LABELS_MAX + 200];
	const char *v[] = { "GET", "200" };
	const char *nullv[] = { "GET", NULL };
	const char *utf[] = { "GET", "\xc3\x28" };
	const char *longv[] = { "GET", big };
	const char *const dup[] = { "method", "service" };
	const char *const badname[] = { "__method" };
	const char *const nullname[] = { NULL };
	uint64_t failed0;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2, &f), 0);
	failed0 = atomic_load(&z->hdr->register_failed);
	expect_bad(&f, v, 1, EINVAL, "1 label values given for its 2");
	expect_bad(&f, v, 3, EINVAL, "3 label values given");
	expect_bad(&f, NULL, 2, EINVAL, "NULL label values");
	expect_bad(&f, nullv, 2, EINVAL, "label value 1 is NULL");
	expect_bad(&f, utf, 2, EINVAL, "not valid UTF-8");
	expect_bad(&f, longv, 2, E2BIG, "longer than");
	expect_bad(NULL, v, 2, EINVAL, "NULL label family");
	CHECK_EQ(tally_counter_family_get(&f, v, 2, NULL), -EINVAL);
	/* Counted for readers, like failed registrations. */
	CHECK_EQ(atomic_load(&z->hdr->register_failed) - failed0, 6);
	/* Nothing was made of it. */
	CHECK_EQ(read_zone(z)->n, 0);
	/* A removed family. */
	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2,
					       &removed), 0);
	CHECK_EQ(tally_family_remove(&removed.family), 0);
	expect_bad(&removed, v, 2, EINVAL, "removed");

	/* Families that cannot be. */
	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 0, &removed),
		 -EINVAL);
	expect_bad(&removed, v, 2, EINVAL, "registration failed");
	CHECK_EQ(tally_counter_family_register(z, &d, NULL, 2, &removed),
		 -EINVAL);
	CHECK_EQ(tally_counter_family_register(z, &d, nullname, 1, &removed),
		 -EINVAL);
	CHECK_EQ(tally_counter_family_register(z, &d, dup, 2, &removed),
		 -EINVAL);
	CHECK(strstr(tally_errmsg(), "given twice") != NULL);
	CHECK_EQ(tally_counter_family_register(z, &d, badname, 1, &removed),
		 -EINVAL);
	CHECK_EQ(tally_counter_family_register(z, NULL, method_code, 2,
					       &removed), -EINVAL);
	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2, NULL),
		 -EINVAL);
	d.kind = TALLY_GAUGE;
	CHECK_EQ(tally_counter_family_register(z, &d, method_code, 2,
					       &removed), -EINVAL);
	CHECK_EQ(tally_family_remove(&removed.family), -EINVAL);
	CHECK_EQ(tally_family_remove(NULL), -EINVAL);

	/* The good family still works. */
	{
		const tally_counter *c;

		CHECK_EQ(tally_counter_family_get(&f, v, 2, &c), 0);
		tally_counter_inc(c);
		CHECK_EQ(fetch(&c->metric), 1);
	}
	CHECK_EQ(tally_family_remove(&f.family), 0);
}
