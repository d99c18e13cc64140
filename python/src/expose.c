/*
 * expose.c: tally_metrics._native.expose(), a zone's exposition written
 * by tally-exporter's own writer (programs/expose, sums.h): the same
 * bytes as a scrape of tally-exporter --aggregate --self-metrics=no over
 * the same segments, so that the Python package and the exporter cannot
 * disagree on names, escapes, suffixes, le bounds or units.
 *
 * The segments are read and written without the GIL: only the result
 * becomes Python objects.
 */
#include "native.h"

#include <errno.h>
#include <string.h>

#include "expose.h"
#include "sums.h"

static PyObject *skipped_list(const struct tp_snapshot *snap)
{
	PyObject *l = PyList_New((Py_ssize_t)snap->nskipped);

	for (size_t i = 0; l && i < snap->nskipped; i++) {
		PyObject *t = tpy_skipped(snap->skipped[i].path,
					  snap->skipped[i].reason);

		if (!t) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, (Py_ssize_t)i, t);
	}
	return l;
}

/*
 * expose(dir=None, zone=None, openmetrics=False) -> (text, skipped,
 * segments): the exposition (bytes; text format 0.0.4, or OpenMetrics
 * 1.0.0 with its "# EOF") of the segments of @dir ($TALLY_DIR by default)
 * whose zone is @zone (every zone when None), each series summed over
 * the processes; skipped lists (path, why) for the files refused,
 * segments counts those read.  A directory that cannot be read raises
 * TallyError; running out of memory raises MemoryError (the writer
 * returns it, never ends the process).
 */
PyObject *tpy_expose(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "dir", "zone", "openmetrics", NULL };
	const char *dir = NULL, *zone = NULL;
	int om = 0, rc;
	struct tp_collect_opts co = { 0 };
	struct tp_snapshot got = { 0 };
	struct tp_buf out = { 0 };
	char errbuf[512] = "";
	PyObject *text, *skipped, *res = NULL;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|zzp:expose", kwlist,
					 &dir, &zone, &om))
		return NULL;
	if (dir) {
		co.dirs = &dir;
		co.ndirs = 1;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = ex_write_sums(&out, &co, zone, om ? EX_OPENMETRICS : EX_TEXT, &got,
			   errbuf, sizeof(errbuf));
	Py_END_ALLOW_THREADS
	if (rc == -ENOMEM) {
		/* The writer ran out of memory and gave up the scrape; the
		 * process goes on (sums.h). */
		PyErr_SetString(PyExc_MemoryError,
				"tally: out of memory writing the exposition");
		goto out;
	}
	if (rc < 0) {
		/* As read() raises it: TallyError(errno, message). */
		PyObject *e = Py_BuildValue("(iN)", -rc, PyUnicode_FromFormat(
			"cannot read the tally directory: %s",
			errbuf[0] ? errbuf : strerror(-rc)));

		if (e) {
			PyErr_SetObject(TpyError, e);
			Py_DECREF(e);
		}
		goto out;
	}
	text = PyBytes_FromStringAndSize(out.p ? out.p : "",
					 (Py_ssize_t)out.len);
	skipped = text ? skipped_list(&got) : NULL;
	if (text && skipped)
		res = Py_BuildValue("(NNn)", text, skipped,
				    (Py_ssize_t)got.nsegs);
	else
		Py_XDECREF(text);
out:
	tp_buf_free(&out);
	tp_snapshot_free(&got);
	return res;
}
