/*
 * test-select.c: passes over chosen records (tally_seg_foreach_ids and
 * tally_seg_visit, src/reader/select.c).
 *
 * A child process writes a persistent segment of 1,500 labelled
 * counters (more than two batches of records), a gauge, a histogram and
 * a removed counter, with values that say which series they belong to.
 * The tests prove that:
 *   - the ids of a pass, given back in any order (reversed, sorted by
 *     name, with repeats), give exactly the series and values of
 *     tally_seg_foreach, in the order asked for;
 *   - a record id of a removed series gives nothing (tally_seg_visit
 *     returns 0), a live one exactly its series (1);
 *   - a callback that stops the pass stops it, with its value;
 *   - an id at or beyond the series table's high-water mark, NULL
 *     arguments and unknown flags are refused with EINVAL and a message
 *     naming the file, before the callback is called and before any
 *     record is read; a header claiming more records than the table
 *     holds is held to the table: nothing past it is read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "core/core.h"
#include "reader/segment.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

#define NCOUNTERS 1500u
#define MAX_SERIES 2048u

struct fixture {
	char path[PATH_MAX];
	uint32_t gauge, hist, removed;     /* record ids */
	uint32_t counter[NCOUNTERS];       /* counter i holds 1000 + i */
};

static struct fixture *fx;

static void write_fixture(void *arg)
{
	struct fixture *f = arg;
	struct tally_zone_opts o = { 16 * TALLY_CHUNK_SLOTS, MAX_SERIES,
				     TALLY_ZONE_PERSIST };
	struct tally_metric_desc d;
	struct tally_zone *z;
	tally_metric m, r;

	setenv("TALLY_NSLABS", "2", 1);
	z = tally_zone_create("select", &o);
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	snprintf(f->path, sizeof(f->path), "%s", tally_zone_path(z));
	for (unsigned i = 0; i < NCOUNTERS; i++) {
		char v[16];
		struct tally_label l = { "i", v };

		snprintf(v, sizeof(v), "%u", i);
		reg(z, desc(TALLY_COUNTER, "c_total"), &l, 1, &m);
		tally_counter_add(counter_of(&m), 1000 + i);
		f->counter[i] = m.series;
		if (i == 700) {
			reg(z, desc(TALLY_COUNTER, "removed_total"), NULL, 0,
			    &r);
			tally_counter_add(counter_of(&r), 5);
			f->removed = r.series;
		}
	}
	reg(z, desc(TALLY_GAUGE, "g"), NULL, 0, &m);
	tally_gauge_add(gauge_of(&m), -7);
	f->gauge = m.series;
	d = desc(TALLY_HISTOGRAM, "h");
	d.hist_sub_bits = 2;
	d.hist_max_bits = 8;
	reg(z, d, NULL, 0, &m);
	for (uint64_t v = 0; v < 30; v++)
		tally_histogram_observe(histogram_of(&m), v);
	f->hist = m.series;
	/* Last, so that no later registration reuses its record. */
	CHECK_EQ(tally_metric_remove(&r), 0);
}

static void setup(void)
{
	fx = mmap(NULL, sizeof(*fx), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(fx != MAP_FAILED);
	CHECK_CHILD_OK(harness_child(write_fixture, fx));
}

/* What a pass saw, in its order. */
struct seen {
	size_t n;
	uint32_t id[2 * MAX_SERIES];
	int64_t value[2 * MAX_SERIES];
	char name[2 * MAX_SERIES][24];   /* name{i} */
	int stop_at;                     /* stop with 77 at this call, or 0 */
};

static int record(const struct tally_series_view *v, void *arg)
{
	struct seen *s = arg;

	CHECK(s->n < 2 * MAX_SERIES);
	s->id[s->n] = v->id;
	s->value[s->n] = v->value;
	snprintf(s->name[s->n], sizeof(s->name[0]), "%s{%s}", v->name,
		 v->nlabels ? v->label_values[0] : "");
	s->n++;
	return s->stop_at && (int)s->n == s->stop_at ? 77 : 0;
}

static struct tally_seg *open_fixture(void)
{
	struct tally_seg *s = tally_seg_open(fx->path, NULL);

	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	return s;
}

/* The whole segment, as tally_seg_foreach gives it. */
static struct seen *full_pass(struct tally_seg *s)
{
	struct seen *all = calloc(1, sizeof(*all));

	CHECK(all);
	CHECK_EQ(tally_seg_foreach(s, 0, record, all), NCOUNTERS + 2);
	CHECK_EQ(all->n, NCOUNTERS + 2);
	return all;
}

/* The entry of @all with record id @id. */
static size_t find(const struct seen *all, uint32_t id)
{
	for (size_t i = 0; i < all->n; i++)
		if (all->id[i] == id)
			return i;
	harness_fail(__FILE__, __LINE__, "record %u not in the pass", id);
	return 0;
}

TEST(ids_in_any_order_give_the_same_series)
{
	struct tally_seg *s;
	struct seen *all, *got = calloc(1, sizeof(*got));
	uint32_t *ids = calloc(NCOUNTERS + 4, sizeof(uint32_t));
	size_t n = 0;

	setup();
	s = open_fixture();
	all = full_pass(s);
	/* Reversed, with the first one twice (a repeat), then the
	 * removed record, which gives nothing. */
	for (size_t i = all->n; i-- > 0;)
		ids[n++] = all->id[i];
	ids[n++] = all->id[all->n - 1];
	ids[n++] = fx->removed;
	CHECK_EQ(tally_seg_foreach_ids(s, 0, ids, n, record, got),
		 NCOUNTERS + 3);
	CHECK_EQ(got->n, NCOUNTERS + 3);
	for (size_t i = 0; i < all->n; i++) {
		size_t j = all->n - 1 - i;

		CHECK_EQ(got->id[i], all->id[j]);
		CHECK_EQ(got->value[i], all->value[j]);
		CHECK_STR(got->name[i], all->name[j]);
	}
	CHECK_EQ(got->id[all->n], all->id[all->n - 1]);
	/* Exact values, by the ids the writer gave. */
	for (unsigned i = 0; i < NCOUNTERS; i++)
		CHECK_EQ(all->value[find(all, fx->counter[i])], 1000 + i);
	CHECK_EQ(all->value[find(all, fx->gauge)], -7);
	CHECK_EQ(all->value[find(all, fx->hist)], 30);
	tally_seg_close(s);
	free(all);
	free(got);
	free(ids);
}

static struct seen *sort_base;

static int by_name(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return strverscmp(sort_base->name[x], sort_base->name[y]);
}

/* What a sorting reader does: keep (id) only, sort, visit in order. */
TEST(sorted_index_of_ids_gives_sorted_series)
{
	struct tally_seg *s;
	struct seen *all, *got = calloc(1, sizeof(*got));
	size_t *order;
	uint32_t *ids;

	setup();
	s = open_fixture();
	all = full_pass(s);
	order = calloc(all->n, sizeof(*order));
	ids = calloc(all->n, sizeof(*ids));
	for (size_t i = 0; i < all->n; i++)
		order[i] = i;
	sort_base = all;
	qsort(order, all->n, sizeof(*order), by_name);
	for (size_t i = 0; i < all->n; i++)
		ids[i] = all->id[order[i]];
	CHECK_EQ(tally_seg_foreach_ids(s, TALLY_READ_PERCPU, ids, all->n,
				       record, got), (long long)all->n);
	for (size_t i = 0; i < all->n; i++) {
		CHECK_STR(got->name[i], all->name[order[i]]);
		CHECK_EQ(got->value[i], all->value[order[i]]);
		if (i)
			CHECK(strverscmp(got->name[i - 1], got->name[i]) < 0);
	}
	CHECK_STR(got->name[0], "c_total{0}");
	CHECK_STR(got->name[1], "c_total{1}");
	CHECK_STR(got->name[NCOUNTERS - 1], "c_total{1499}");
	CHECK_STR(got->name[NCOUNTERS], "g{}");
	tally_seg_close(s);
	free(all);
	free(got);
	free(order);
	free(ids);
}

TEST(visit_one_record)
{
	struct tally_seg *s;
	struct seen *got = calloc(1, sizeof(*got));

	setup();
	s = open_fixture();
	CHECK_EQ(tally_seg_visit(s, 0, fx->counter[1234], record, got), 1);
	CHECK_EQ(got->n, 1);
	CHECK_EQ(got->value[0], 1000 + 1234);
	CHECK_STR(got->name[0], "c_total{1234}");
	CHECK_EQ(tally_seg_visit(s, 0, fx->removed, record, got), 0);
	CHECK_EQ(got->n, 1);
	CHECK_EQ(tally_seg_visit(s, TALLY_READ_PERCPU, fx->hist, record, got),
		 1);
	CHECK_EQ(got->value[1], 30);
	/* Stopped by the callback: its value comes back. */
	got->stop_at = 3;
	CHECK_EQ(tally_seg_visit(s, 0, fx->gauge, record, got), 77);
	got->n = 0;
	CHECK_EQ(tally_seg_foreach_ids(s, 0, fx->counter, NCOUNTERS, record,
				       got), 77);
	CHECK_EQ(got->n, 3);
	tally_seg_close(s);
	free(got);
}

/* A refused call reads no series record: only the header's live fields
 * (64 bytes), as every pass does first (a pass before it read the metric
 * records already). */
static void expect_refused(struct tally_seg *s, const uint32_t *ids,
			   size_t n, unsigned flags, struct seen *got)
{
	uint64_t before;

	CHECK_EQ(tally_seg_visit(s, 0, fx->counter[0], record, got), 1);
	before = s->bytes_read;
	got->n = 0;
	CHECK_EQ(tally_seg_foreach_ids(s, flags, ids, n, record, got),
		 -EINVAL);
	CHECK(strstr(tally_errmsg(), fx->path) ||
	      strstr(tally_errmsg(), "unknown flags"));
	CHECK_EQ(got->n, 0);
	if (s->bytes_read - before > 64)
		harness_fail(__FILE__, __LINE__, "%llu bytes read",
			     (unsigned long long)(s->bytes_read - before));
}

TEST(ids_beyond_the_table_are_refused)
{
	struct tally_seg *s;
	struct tally_seg_info in;
	struct seen *got = calloc(1, sizeof(*got));
	uint32_t ids[3];

	setup();
	s = open_fixture();
	CHECK_EQ(tally_seg_info(s, &in), 0);
	/* One good id, then one at the high-water mark: the whole call is
	 * refused before the first is read. */
	ids[0] = fx->counter[0];
	ids[1] = in.series_used;
	expect_refused(s, ids, 2, 0, got);
	ids[1] = UINT32_MAX;
	expect_refused(s, ids, 2, 0, got);
	CHECK_EQ(tally_seg_visit(s, 0, in.series_used, record, got), -EINVAL);
	CHECK_EQ(tally_seg_foreach_ids(s, 0, NULL, 1, record, got), -EINVAL);
	CHECK_EQ(tally_seg_foreach_ids(s, 0, ids, 1, NULL, got), -EINVAL);
	CHECK_EQ(tally_seg_foreach_ids(NULL, 0, ids, 1, record, got), -EINVAL);
	expect_refused(s, ids, 1, 0x80, got);
	CHECK_EQ(got->n, 0);
	/* No ids: nothing to do, and no error. */
	CHECK_EQ(tally_seg_foreach_ids(s, 0, NULL, 0, record, got), 0);
	/* The last record below the mark is fine. */
	CHECK(tally_seg_visit(s, 0, in.series_used - 1, record, got) >= 0);
	tally_seg_close(s);
	free(got);
}

/* A header whose high-water mark claims more records than the table
 * has: held to the table, and an id beyond it refused. */
TEST(corrupt_high_water_mark_is_held_to_the_table)
{
	uint32_t bad = UINT32_MAX, cap, id;
	struct tally__hdr h;
	struct tally_seg *s;
	struct seen *got = calloc(1, sizeof(*got));
	int fd;

	setup();
	fd = open(fx->path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	cap = h.series_cap;
	CHECK_EQ(pwrite(fd, &bad, sizeof(bad),
			offsetof(struct tally__hdr, series_hwm)),
		 (ssize_t)sizeof(bad));
	close(fd);
	s = open_fixture();
	id = cap;
	expect_refused(s, &id, 1, 0, got);
	id = cap + 1000;
	expect_refused(s, &id, 1, 0, got);
	/* The table's last record: never written, read as zeros, not
	 * live. */
	CHECK_EQ(tally_seg_visit(s, 0, cap - 1, record, got), 0);
	CHECK_EQ(tally_seg_visit(s, 0, fx->counter[9], record, got), 1);
	CHECK_EQ(got->value[0], 1009);
	tally_seg_close(s);
	free(got);
}
