/*
 * test-py03.c: zones written by tally 0.3's Python package (format 2.5,
 * series whose names carry its encoding: <n>:bucket, <n>_total:frac_u,
 * <n>:gauge_livesum) are refused by the reader with one line that says
 * what to do, instead of shown as garbage; a zone of 2.6 with the same
 * names (the summaries the Python package writes), and a zone of 2.5 of
 * a C program whose names hold colons, are read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "layout.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

static int count_fn(const struct tally_series_view *v, void *arg)
{
	(void)v;
	(*(int *)arg)++;
	return 0;
}

/* The header's minor, as a libtally of that version would have made it. */
static void set_minor(struct tally_zone *z, uint16_t minor)
{
	int fd = open(tally_zone_path(z), O_RDWR | O_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, &minor, 2, 10), 2);
	close(fd);
}

/* Series of the names the 0.3 package wrote, and a plain counter. */
static void write_like_py03(struct tally_zone *z, const char *name)
{
	struct tally_label le = { "le", "0.5" };
	struct tally_metric_desc d = desc(TALLY_COUNTER, "orders_total");
	tally_counter c;
	tally_fgauge g;

	CHECK_EQ(tally_counter_register(z, &d, &c), 0);
	tally_counter_add(&c, 3);
	d.name = name;
	if (strstr(name, ":gauge")) {
		d.kind = TALLY_FGAUGE;
		CHECK_EQ(tally_fgauge_register(z, &d, &g), 0);
		tally_fgauge_set(&g, 1.5);
	} else {
		d.labels = &le;
		d.nlabels = 1;
		CHECK_EQ(tally_counter_register(z, &d, &c), 0);
		tally_counter_add(&c, 2);
	}
}

static int walk(struct tally_zone *z, int *n)
{
	struct tally_seg *seg = tally_seg_open(tally_zone_path(z), NULL);
	int rc;

	*n = 0;
	CHECK(seg != NULL);
	rc = tally_seg_foreach(seg, 0, count_fn, n);
	tally_seg_close(seg);
	return rc;
}

TEST(a_zone_of_the_03_python_package_is_refused_with_what_to_do)
{
	static const char *const names[] = {
		"order_value_dollars:bucket", "requests_total:frac_u",
		"inprogress:gauge_livesum", "order_value_dollars_sum:frac_u",
	};

	for (unsigned i = 0; i < sizeof(names) / sizeof(*names); i++) {
		struct tally_zone *z = zone_in("py03");
		int n;

		write_like_py03(z, names[i]);
		set_minor(z, 5);
		CHECK_EQ(walk(z, &n), -EPROTONOSUPPORT);
		CHECK(strstr(tally_errmsg(), "written by tally 0.3's Python "
			     "package") != NULL);
		CHECK(strstr(tally_errmsg(), "restart the service with tally "
			     "0.4") != NULL);
		CHECK(strstr(tally_errmsg(), names[i]) != NULL);
		CHECK(strchr(tally_errmsg(), '\n') == NULL);
		CHECK_EQ(n, 0); /* nothing of it was shown */
		/* The same names in a zone of this format: read. */
		set_minor(z, TALLY__FMT_MINOR);
		CHECK_EQ(walk(z, &n), 2);
		CHECK_EQ(tally_zone_destroy(z), 0);
	}
}

TEST(a_c_program_of_25_with_colons_in_its_names_is_read)
{
	struct tally_zone *z = zone_in("colons");
	struct tally_metric_desc d = desc(TALLY_COUNTER,
					  "job:requests:rate5m");
	tally_counter c;
	int n;

	CHECK_EQ(tally_counter_register(z, &d, &c), 0);
	d.name = "cache:bucket_hits"; /* ":bucket" not at the end */
	CHECK_EQ(tally_counter_register(z, &d, &c), 0);
	set_minor(z, 5);
	CHECK_EQ(walk(z, &n), 2);
	CHECK_EQ(tally_zone_destroy(z), 0);
}
