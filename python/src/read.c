/*
 * read.c: tally_metrics._native.read(), the series of every readable segment of
 * a directory (one zone's, or all), through libtally's reader API.
 *
 * The reader never trusts a file: a segment it cannot open (corrupt,
 * another user's, a symbolic link, vanished) is skipped and reported,
 * and the walk goes on.  Running out of memory is no fault of a file:
 * read() raises MemoryError then, never answers without a segment.
 * Sums across segments and the Prometheus view are made in Python
 * (tally/_read.py).
 */
#include "native.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct walk {
	PyObject *series;  /* list of tuples (see tpy_read) */
	PyObject *skipped; /* list of (path, why) */
	const char *zone;  /* only segments of this zone, or NULL */
	int segments;
	int failed;        /* a Python error is set */
	/* The record index of each series of the segment being walked, in
	 * the order they were appended (from series[first] on), and whether
	 * one came out of order: see in_record_order(). */
	uint32_t *ids;
	size_t nids, cap;
	Py_ssize_t first;
	int unordered;
};

/*
 * A file name need not be UTF-8, and a Python str must be valid: the
 * path is decoded as os.fsdecode() does (its undecodable bytes kept as
 * surrogates, so that os.fsencode() gives the name back), the reason,
 * which may quote the path, with undecodable bytes written as \xNN.
 */
PyObject *tpy_skipped(const char *path, const char *why)
{
	PyObject *p = PyUnicode_DecodeFSDefault(path), *r, *t;

	if (!p)
		return NULL;
	r = PyUnicode_DecodeUTF8(why, (Py_ssize_t)strlen(why),
				 "backslashreplace");
	if (!r) {
		Py_DECREF(p);
		return NULL;
	}
	t = PyTuple_Pack(2, p, r);
	Py_DECREF(p);
	Py_DECREF(r);
	return t;
}

static PyObject *str_or_empty(const char *s)
{
	return PyUnicode_FromString(s ? s : "");
}

/* A series' labels: a tuple of (name, value) pairs. */
static PyObject *labels_of(const struct tally_series_view *v)
{
	PyObject *labels = PyTuple_New(v->nlabels);

	for (unsigned i = 0; labels && i < v->nlabels; i++) {
		PyObject *pair = Py_BuildValue("(ss)", v->label_names[i],
					       v->label_values[i]);

		if (!pair)
			Py_CLEAR(labels);
		else
			PyTuple_SET_ITEM(labels, i, pair);
	}
	return labels;
}

/* A histogram's (sum, sub_bits, max_bits, buckets, bounds), else None. */
static PyObject *hist_of(const struct tally_series_view *v)
{
	PyObject *b;

	if (v->kind != TALLY_HISTOGRAM)
		Py_RETURN_NONE;
	b = PyTuple_New(v->nbuckets);
	for (unsigned i = 0; b && i < v->nbuckets; i++) {
		PyObject *x = PyLong_FromLongLong(v->buckets[i]);

		if (!x)
			Py_CLEAR(b);
		else
			PyTuple_SET_ITEM(b, i, x);
	}
	if (!b)
		return NULL;
	/* A classic histogram (format 2.6): its exact sum as a float, and
	 * its bounds; tally's own, None. */
	if (v->classic) {
		PyObject *bd = PyTuple_New(v->nbounds);

		for (unsigned i = 0; bd && i < v->nbounds; i++) {
			PyObject *x = PyFloat_FromDouble(v->bounds[i]);

			if (!x)
				Py_CLEAR(bd);
			else
				PyTuple_SET_ITEM(bd, i, x);
		}
		if (!bd) {
			Py_DECREF(b);
			return NULL;
		}
		return Py_BuildValue("(dIINN)", v->fsum, 0u, 0u, b, bd);
	}
	return Py_BuildValue("(LIINO)", (long long)v->sum, v->sub_bits,
			     v->max_bits, b, Py_None);
}

static int one_series(const struct tally_series_view *v, void *arg)
{
	struct walk *w = arg;
	PyObject *labels, *hist, *t;

	labels = labels_of(v);
	if (!labels)
		goto fail;
	hist = hist_of(v);
	if (!hist) {
		Py_DECREF(labels);
		goto fail;
	}
	/* A floating-point gauge's value is a float, any other an int (a
	 * summary's count, kind TALLY_SUMMARY (format 2.7); a
	 * fractional counter's when it has no fraction, else a float); a
	 * per-process gauge's, combined by the reader (format 2.6), says
	 * TALLY_PGAUGE; an info's or an enum's (format 2.8) TALLY_INFO
	 * or TALLY_ENUM. */
	t = v->kind == TALLY_FGAUGE || (v->fractional && v->frac) ?
		Py_BuildValue("(NINNNdN)", str_or_empty(v->name),
			      v->per_process ? TALLY_PGAUGE :
			      v->info ? TALLY_INFO :
			      v->stateset ? TALLY_ENUM : v->kind,
			      str_or_empty(v->help), str_or_empty(v->unit),
			      labels, v->fvalue, hist) :
		Py_BuildValue("(NINNNLN)", str_or_empty(v->name),
			      v->summary ? TALLY_SUMMARY : v->kind,
			      str_or_empty(v->help), str_or_empty(v->unit),
			      labels, (long long)v->value, hist);
	if (w->nids == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		uint32_t *ids = realloc(w->ids, cap * sizeof(*ids));

		if (!ids) {
			Py_XDECREF(t);
			PyErr_NoMemory();
			goto fail;
		}
		w->ids = ids;
		w->cap = cap;
	}
	if (w->nids && v->id < w->ids[w->nids - 1])
		w->unordered = 1;
	w->ids[w->nids++] = v->id;
	if (!t || PyList_Append(w->series, t) < 0) {
		Py_XDECREF(t);
		goto fail;
	}
	Py_DECREF(t);
	return 0;
fail:
	w->failed = 1;
	return 1;
}

struct at {
	uint32_t id;
	size_t i;
};

static int by_id(const void *a, const void *b)
{
	const struct at *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/*
 * The reader passes the combined values of per-process gauges (format
 * 2.6) after the segment's other series; put them where their first
 * series lies in the file, so that metrics keep the order in which they
 * were registered (what _read.py shows).  0, or -1 with an exception.
 */
static int in_record_order(struct walk *w)
{
	struct at *a;
	PyObject **items;
	size_t n = w->nids;

	if (!w->unordered || n < 2)
		return 0;
	a = malloc(n * sizeof(*a));
	items = malloc(n * sizeof(*items));
	if (!a || !items) {
		free(a);
		free(items);
		PyErr_NoMemory();
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		a[i].id = w->ids[i];
		a[i].i = i;
		items[i] = PyList_GET_ITEM(w->series, w->first + (Py_ssize_t)i);
	}
	qsort(a, n, sizeof(*a), by_id);
	/* The list holds the references; they move within it. */
	for (size_t i = 0; i < n; i++)
		PyList_SET_ITEM(w->series, w->first + (Py_ssize_t)i,
				items[a[i].i]);
	free(a);
	free(items);
	return 0;
}

static int one_segment(const char *path, struct tally_seg *s,
		       const char *error, void *arg)
{
	struct walk *w = arg;
	struct tally_seg_info info;
	PyObject *t;
	int rc;

	if (!s) {
		/* errno is tally_seg_open()'s reason while we run. */
		if (errno == ENOMEM)
			goto no_memory;
		t = tpy_skipped(path, error ? error : "unreadable");
		goto skip;
	}
	rc = tally_seg_info(s, &info);
	if (rc < 0) {
		t = tpy_skipped(path, tally_errmsg());
		goto skip;
	}
	if (w->zone && strcmp(info.zone_name, w->zone) != 0)
		return 0;
	w->first = PyList_GET_SIZE(w->series);
	w->nids = 0;
	w->unordered = 0;
	rc = tally_seg_foreach(s, 0, one_series, w);
	if (!w->failed && rc >= 0 && in_record_order(w) < 0)
		w->failed = 1;
	if (w->failed)
		return 1;
	if (rc == -ENOMEM)
		goto no_memory;
	if (rc < 0) {
		t = tpy_skipped(path, tally_errmsg());
		goto skip;
	}
	w->segments++;
	return 0;
no_memory:
	/* A segment read short for want of memory is not a broken one:
	 * the read fails, rather than answer without its series. */
	PyErr_NoMemory();
	w->failed = 1;
	return 1;
skip:
	if (!t || PyList_Append(w->skipped, t) < 0) {
		Py_XDECREF(t);
		w->failed = 1;
		return 1;
	}
	Py_DECREF(t);
	return 0;
}

/*
 * read(dir=None, zone=None) -> (series, skipped, segments): every series
 * of the segments of @dir ($TALLY_DIR by default) whose zone is @zone
 * (every zone when None), as tuples
 *   (name, kind, help, unit, ((label, value), ...), value, hist)
 * where hist is None, (sum, sub_bits, max_bits, buckets, None) for
 * tally's own histograms or (sum, 0, 0, buckets, bounds) for classic ones
 * and summaries; skipped lists (path, why) for the files refused.  Out
 * of memory: MemoryError.
 * The GIL is held: the walk builds Python objects as it goes.
 */
PyObject *tpy_read(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "dir", "zone", NULL };
	const char *dir = NULL, *zone = NULL;
	struct walk w = { 0 };
	int rc;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|zz:read", kwlist, &dir,
					 &zone))
		return NULL;
	w.zone = zone;
	w.series = PyList_New(0);
	w.skipped = PyList_New(0);
	if (!w.series || !w.skipped)
		goto fail;
	rc = tally_dir_foreach(dir, NULL, one_segment, &w);
	free(w.ids);
	if (w.failed)
		goto fail;
	if (rc < 0) {
		tpy_raise(rc, "cannot read the tally directory");
		goto fail;
	}
	return Py_BuildValue("(NNi)", w.series, w.skipped, w.segments);
fail:
	Py_XDECREF(w.series);
	Py_XDECREF(w.skipped);
	return NULL;
}

/*
 * unit_value(v, unit, point=False) -> str or None: the integer @v of a
 * series of @unit in the unit's base unit, as libtally's readers write it
 * (an exact decimal: tally_unit_format()); None when @unit is not one of
 * the vocabulary of tally/metrics.h (TALLY_UNIT_*).
 */
PyObject *tpy_unit_value(PyObject *self, PyObject *args)
{
	long long v;
	const char *unit;
	int point = 0;
	struct tally_unit_scale s;
	char buf[64];
	unsigned long long mag;

	(void)self;
	if (!PyArg_ParseTuple(args, "Lz|p:unit_value", &v, &unit, &point))
		return NULL;
	if (!tally_unit_scale(unit, &s))
		Py_RETURN_NONE;
	mag = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
	if (tally_unit_format(mag, v < 0, &s, point, buf, sizeof(buf)) < 0)
		return tpy_raise(-ENOSPC, "cannot format the value");
	return PyUnicode_FromString(buf);
}

/*
 * unit_name(name, unit) -> (name, unit): what readers show a series of
 * @name and @unit under (tally_unit_name(): "request_duration_ns" in
 * nanoseconds is "request_duration_seconds" in seconds); unchanged for
 * units outside the vocabulary.
 */
PyObject *tpy_unit_name(PyObject *self, PyObject *args)
{
	const char *name, *unit;
	struct tally_unit_scale s;
	char buf[TALLY_NAME_MAX + 32];

	(void)self;
	if (!PyArg_ParseTuple(args, "sz:unit_name", &name, &unit))
		return NULL;
	if (!tally_unit_scale(unit, &s) ||
	    tally_unit_name(name, unit, buf, sizeof(buf)) < 0)
		return Py_BuildValue("(ss)", name, unit ? unit : "");
	return Py_BuildValue("(ss)", buf, s.base);
}

/* bucket_upper(i, sub_bits) -> int: the largest value bucket @i of one
 * of tally's own histograms holds (tally_histogram_bucket_bounds()). */
PyObject *tpy_bucket_upper(PyObject *self, PyObject *args)
{
	unsigned i, sub_bits;
	uint64_t lo, hi;

	(void)self;
	if (!PyArg_ParseTuple(args, "II:bucket_upper", &i, &sub_bits))
		return NULL;
	tally_histogram_bucket_bounds(i, sub_bits, &lo, &hi);
	return PyLong_FromUnsignedLongLong(hi);
}
