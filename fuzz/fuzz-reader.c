/*
 * fuzz-reader.c: libFuzzer target for the segment reader
 * (src/reader/segment.c, src/reader/walk.c, src/reader/histogram.c).
 *
 * The input is a segment file.  It is written into a memfd the way a
 * segment lies in /dev/shm: pages that are all zeros are left as holes,
 * so the reader's lseek(SEEK_DATA/SEEK_HOLE) walk sees real holes, and
 * when the header's file_size is larger than the input (up to 64 MiB) the
 * file is extended to it with a hole, so that an input can be a short
 * prefix of a segment whose tail is empty.  Then the target opens it with
 * tally__seg_open_fd(), reads tally_seg_info(), walks the series twice
 * (with and without per-CPU values), visits chosen records
 * (tally_seg_foreach_ids: the last ones backwards, the first, every
 * third from the second on with a repeat, and ids beyond the table,
 * which must be refused), and computes quantiles of every histogram.
 *
 * Besides the sanitizers, the callback checks what reader.h promises of a
 * view: known kind and mode, strings that follow the naming rules and are
 * UTF-8, a bucket count that matches the layout, counts that add up.  A
 * broken promise aborts, as a crash would.
 *
 * Build and run: tools/fuzz.sh SECONDS.  Seeds: fuzz/gen-corpus.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "reader/segment.h"
#include "tally/metrics.h"
#include "tally/reader.h"

#define PAGE 4096u
#define MAX_FILE (64u << 20)

static void broken(const char *what)
{
	fprintf(stderr, "fuzz-reader: broken promise: %s\n", what);
	abort();
}

struct walk {
	unsigned flags;
	unsigned nslabs;
	size_t sink;
};

static void check_str(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n > max || !tally__valid_utf8(s, n))
		broken("a string longer than its limit, or not UTF-8");
}

/* A classic histogram (format 2.6): its own bounds, finite and
 * increasing, one bucket more than bounds, the count their sum.  A
 * summary (2.7) is one of no bounds. */
static int check_classic(const struct tally_series_view *v, struct walk *w)
{
	uint64_t sum = 0;
	double q;

	if (v->sub_bits || v->max_bits ||
	    v->nbounds > TALLY_CHISTOGRAM_BOUNDS_MAX ||
	    v->nbuckets != v->nbounds + 1 || !v->buckets ||
	    (v->nbounds && !v->bounds))
		broken("classic histogram layout");
	if (v->summary && v->nbounds)
		broken("a summary with bucket bounds");
	for (unsigned b = 0; b < v->nbounds; b++)
		if (!isfinite(v->bounds[b]) ||
		    (b && !(v->bounds[b] > v->bounds[b - 1])))
			broken("classic histogram bounds");
	for (unsigned b = 0; b < v->nbuckets; b++)
		sum += (uint64_t)v->buckets[b];
	if (sum != (uint64_t)v->value)
		broken("count is not the sum of the buckets");
	w->sink += (size_t)v->sum;
	for (int i = 0; i <= 4; i++) {
		int rc = tally_histogram_quantile(v, i / 4.0, &q);

		if (rc != 0 && rc != -ENODATA)
			broken("quantile error");
		if (rc == 0 && isnan(q))
			broken("a NaN quantile");
	}
	return 0;
}


/* A per-process gauge's view that combines several processes' values
 * (every mode but all and liveall), or an enum's state, told over its
 * label set's states: it has no per-CPU values of its own
 * (tally/reader.h). */
static int combined(const struct tally_series_view *v)
{
	return v->stateset || (v->per_process &&
			       v->combine != TALLY_COMBINE_ALL &&
			       v->combine != TALLY_COMBINE_LIVEALL);
}
static int on_series(const struct tally_series_view *v, void *arg)
{
	struct walk *w = arg;
	uint64_t sum = 0;
	double q;

	if (v->kind < TALLY_COUNTER || v->kind > TALLY_FGAUGE)
		broken("unknown kind");
	if (v->mode > TALLY_ADAPTIVE)
		broken("unknown mode");
	/* A floating-point gauge is one shared slot, and its int64 value
	 * is its double rounded toward zero (NaN: 0). */
	if (v->kind == TALLY_FGAUGE &&
	    (v->mode != TALLY_SHARED ||
	     v->value != tally__f64_to_i64(v->fvalue)))
		broken("a floating-point gauge's mode or value");
	/* A fractional counter's exact value is value + frac / 10^9, and
	 * fvalue that as a double; no other kind has one. */
	if (v->fractional &&
	    (v->kind != TALLY_COUNTER || v->frac > 999999999u ||
	     v->fvalue != (double)v->value + v->frac / 1e9))
		broken("a fractional counter's value");
	if (v->kind != TALLY_FGAUGE && !v->fractional && v->fvalue != 0)
		broken("fvalue on another kind");
	if (!tally__valid_metric_name(v->name) ||
	    strlen(v->name) > TALLY_NAME_MAX)
		broken("bad metric name");
	check_str(v->help, TALLY_HELP_MAX);
	check_str(v->unit, TALLY_UNIT_MAX);
	if (!tally__valid_unit(v->unit))
		broken("bad unit");
	if (v->nlabels > TALLY_LABEL_PAIRS_MAX)
		broken("too many labels");
	for (unsigned i = 0; i < v->nlabels; i++) {
		if (!tally__valid_label_name(v->label_names[i]))
			broken("bad label name");
		check_str(v->label_values[i], TALLY_LABELS_MAX);
	}
	if ((w->flags & TALLY_READ_PERCPU) && !combined(v)) {
		if (!v->percpu || v->npercpu != w->nslabs)
			broken("per-CPU values missing");
		for (unsigned c = 0; c < v->npercpu; c++)
			w->sink += (size_t)v->percpu[c];
	} else if (v->percpu || v->npercpu) {
		broken("per-CPU values not asked for");
	}
	/* An info metric's or an enum's series (2.8): a float gauge, an
	 * info's of value 1 only, an enum's with its state label. */
	if ((v->info || v->stateset) &&
	    (v->kind != TALLY_FGAUGE || (v->info && v->stateset) ||
	     (v->info && v->fvalue != 1.0)))
		broken("an info or enum series that is not a float gauge");
	if (v->kind != TALLY_HISTOGRAM) {
		if (v->buckets || v->nbuckets)
			broken("buckets on a non-histogram");
		if (tally_histogram_quantile(v, 0.5, &q) != -EINVAL)
			broken("a quantile of a non-histogram");
		return 0;
	}
	if (v->summary && (!v->classic || v->kind != TALLY_HISTOGRAM))
		broken("a summary that is not a classic histogram");
	if (v->classic)
		return check_classic(v, w);
	if (v->sub_bits < 1 || v->sub_bits > 7 || v->max_bits <= v->sub_bits ||
	    v->max_bits > 63 ||
	    v->nbuckets != (v->max_bits - v->sub_bits + 1) << v->sub_bits ||
	    v->nbuckets + 1 > TALLY_BLOCK_MAX_SLOTS || !v->buckets)
		broken("histogram layout");
	for (unsigned b = 0; b < v->nbuckets; b++) {
		uint64_t lo, hi;

		sum += (uint64_t)v->buckets[b];
		tally_histogram_bucket_bounds(b, v->sub_bits, &lo, &hi);
		if (lo > hi)
			broken("bucket bounds");
	}
	if (sum != (uint64_t)v->value)
		broken("count is not the sum of the buckets");
	w->sink += (size_t)v->sum;
	{
		static const double qs[] = { 0.0, 0.5, 0.9, 0.999, 1.0 };

		for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
			int rc = tally_histogram_quantile(v, qs[i], &q);

			if (rc != 0 && rc != -ENODATA)
				broken("quantile error");
			if (rc == 0 && !(q >= 0))
				broken("negative quantile");
		}
	}
	return 0;
}

/* The input as a sparse file: only pages with a non-zero byte exist. */
static int make_file(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-segment", MFD_CLOEXEC);
	uint64_t file_size = size;

	if (fd < 0)
		return -1;
	if (size >= offsetof(struct tally__hdr, file_size) + 8) {
		uint64_t want;

		memcpy(&want, data + offsetof(struct tally__hdr, file_size), 8);
		if (want > size && want <= MAX_FILE)
			file_size = want;
	}
	if (ftruncate(fd, (off_t)file_size) < 0) {
		close(fd);
		return -1;
	}
	for (size_t off = 0; off < size; off += PAGE) {
		static const uint8_t zeros[PAGE];
		size_t n = size - off < PAGE ? size - off : PAGE;

		if (memcmp(data + off, zeros, n) &&
		    pwrite(fd, data + off, n, (off_t)off) != (ssize_t)n) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

/* Chosen records: in range, backwards, scattered and repeated, they get
 * the same checks as a full pass; one beyond the table makes the call
 * fail. */
static void by_ids(struct tally_seg *s, const struct tally_seg_info *info,
		   struct walk *w)
{
	uint32_t ids[8], used = info->series_used;
	size_t n = 0;
	int rc;

	for (uint32_t i = used; i > 0 && n < 6; i--)
		ids[n++] = i - 1;
	if (used)
		ids[n++] = 0;
	w->flags = TALLY_READ_PERCPU;
	rc = tally_seg_foreach_ids(s, w->flags, ids, n, on_series, w);
	if (rc > (int)n)
		broken("more series than ids");
	if (rc < 0 && !strstr(tally_errmsg(), "fuzz-input"))
		broken("an error message that does not name the file");
	/* Scattered: every third record from 1 on, one repeated, read in
	 * one batch with the gaps between them. */
	for (n = 0; n < 5 && 1 + 3 * n < used; n++)
		ids[n] = 1 + 3 * (uint32_t)n;
	if (n)
		ids[n++] = ids[0];
	w->flags = 0;
	rc = tally_seg_foreach_ids(s, w->flags, ids, n, on_series, w);
	if (rc > (int)n)
		broken("more series than ids");
	ids[n++] = used;
	if (tally_seg_foreach_ids(s, w->flags, ids, n, on_series, w) >= 0)
		broken("an id beyond the table accepted");
	ids[0] = UINT32_MAX;
	if (tally_seg_visit(s, 0, ids[0], on_series, w) >= 0)
		broken("an id beyond the table accepted");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_seg_info info;
	struct tally_seg *s;
	struct walk w;
	int fd, rc;

	fd = make_file(data, size);
	if (fd < 0)
		return 0;
	s = tally__seg_open_fd(fd, "fuzz-input", NULL); /* owns fd */
	if (!s) {
		if (!strstr(tally_errmsg(), "fuzz-input"))
			broken("an error message that does not name the file");
		return 0;
	}
	if (tally_seg_info(s, &info) != 0)
		broken("tally_seg_info failed on an open segment");
	if (info.nslabs < 1 || info.nslabs > TALLY__MAX_SLABS ||
	    info.nnodes < 1 || info.nnodes > info.nslabs ||
	    info.proc_name[sizeof(info.proc_name) - 1] ||
	    info.zone_name[sizeof(info.zone_name) - 1])
		broken("tally_seg_info fields");
	memset(&w, 0, sizeof(w));
	w.nslabs = info.nslabs;
	w.flags = TALLY_READ_PERCPU;
	rc = tally_seg_foreach(s, w.flags, on_series, &w);
	if (rc < 0 && !strstr(tally_errmsg(), "fuzz-input"))
		broken("an error message that does not name the file");
	w.flags = 0;
	rc = tally_seg_foreach(s, w.flags, on_series, &w);
	if (rc < 0 && !strstr(tally_errmsg(), "fuzz-input"))
		broken("an error message that does not name the file");
	by_ids(s, &info, &w);
	tally_seg_close(s);
	return 0;
}
