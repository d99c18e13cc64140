/*
 * family.c: tally_metrics._native.Family, the series one Python metric keeps in
 * a zone, registered once per metric object.
 *
 * Every Python metric is one metric record of the format, whose kind says
 * what its series are (docs/FORMAT.md): a tally label family when the
 * metric has labels (its children are then found by their values without
 * a lock: tally_*_family_get) or one series registered directly:
 *
 *   counter           FCOUNTER   whole units and billionths (format 2.6)
 *   gauge             FGAUGE     a double shared by every process
 *   per-process gauge PGAUGE     this process's double (combine >= 0);
 *                                libtally adds the label pid and keeps
 *                                the time of its last set, and readers
 *                                combine the processes (format 2.6)
 *   histogram         CHISTOGRAM a classic histogram, its bounds in its
 *                                record (format 2.6)
 *   summary           SUMMARY    count and sum (format 2.7, summary=True)
 *   info, enum        INFO, ENUM float gauges (format 2.8, typed=
 *                                TALLY_INFO or TALLY_ENUM): an Info's
 *                                pairs, an Enum's states
 *
 * The name of the series is given (_encoding.py owns the names).
 */
#include "native.h"

#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *dup_utf8(PyObject *o, const char *what)
{
	const char *s;
	char *d;

	if (!PyUnicode_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be a str", what);
		return NULL;
	}
	s = PyUnicode_AsUTF8(o);
	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		PyErr_NoMemory();
	return d;
}

/* Raise what a failed registration of metric @name in zone @z (NULL:
 * the default zone) says, naming the metric and the zone's file before
 * libtally's message (which says what is wrong). */
static void raise_for(int rc, const char *verb, const char *name,
		      struct tally_zone *z)
{
	char msg[512], what[1024];
	int e = rc < 0 ? -rc : rc;
	PyObject *args;

	snprintf(msg, sizeof(msg), "%s", tally_errmsg());
	if (!msg[0])
		snprintf(msg, sizeof(msg), "%s", strerror(e));
	if (!z)
		z = tally_zone_default();
	snprintf(what, sizeof(what), "cannot %s metric %s in zone file %s: %s",
		 verb, name, z ? tally_zone_path(z) : "(no zone)", msg);
	if (e == EINVAL || e == E2BIG) {
		PyErr_SetString(PyExc_ValueError, what);
		return;
	}
	args = Py_BuildValue("(is)", e, what);
	if (args) {
		PyErr_SetObject(TpyError, args);
		Py_DECREF(args);
	}
}

/* Register @p: its label family (with @names, @n of them), or, when @n
 * is 0, its one series.  Returns 0 or -errno (the part then discards). */
static int part_register(TpyFamily *f, struct tpy_part *p,
			 const char *const *names, unsigned n)
{
	struct tally_metric_desc d = { .kind = p->kind, .name = p->name,
		.help = f->help, .unit = f->unit };
	int rc = -EINVAL;

	p->family = n > 0;
	p->zone = f->zone;
	p->help = f->help;
	p->unit = f->unit;
	if (p->family) {
		switch (p->kind) {
		case TALLY_FGAUGE:
		case TALLY_INFO: /* by d.kind (format 2.8) */
		case TALLY_ENUM:
			rc = tally_fgauge_family_register(f->zone, &d, names, n,
							  &p->fam.f);
			break;
		case TALLY_FCOUNTER:
			rc = tally_fcounter_family_register(f->zone, &d, names,
							    n, &p->fam.fc);
			break;
		case TALLY_PGAUGE:
			rc = tally_pgauge_family_register(f->zone, &d, names, n,
							  p->combine,
							  &p->fam.p);
			break;
		case TALLY_CHISTOGRAM:
			rc = tally_chistogram_family_register(f->zone, &d,
					f->bounds, f->nbounds, names, n,
					&p->fam.ch);
			break;
		case TALLY_SUMMARY:
			rc = tally_summary_family_register(f->zone, &d, names,
							   n, &p->fam.sm);
			break;
		}
	} else {
		switch (p->kind) {
		case TALLY_FGAUGE:
			rc = tally_fgauge_register(f->zone, &d, &p->one.f);
			break;
		case TALLY_INFO:
			/* Pairs of none: the one series, set to 1 by its
			 * registration and by the Info. */
			rc = tally_info_register(f->zone, &d, &p->one.f);
			break;
		case TALLY_FCOUNTER:
			rc = tally_fcounter_register(f->zone, &d, &p->one.fc);
			break;
		case TALLY_PGAUGE:
			rc = tally_pgauge_register(f->zone, &d, p->combine,
						   &p->one.p);
			p->pid = (int)getpid();
			break;
		case TALLY_CHISTOGRAM:
			rc = tally_chistogram_register(f->zone, &d, f->bounds,
						       f->nbounds, &p->one.ch);
			break;
		case TALLY_SUMMARY:
			rc = tally_summary_register(f->zone, &d, &p->one.ch);
			break;
		}
	}
	return rc;
}

int tpy_part_get(struct tpy_part *p, const char *const *values, unsigned n,
		 const tally_metric **h)
{
	const tally_fgauge *fg;
	const tally_pgauge *pg;
	const tally_fcounter *fcn;
	const tally_chistogram *ch;
	int rc = -EINVAL;

	*h = NULL;
	if (!p->family) {
		/* A forked child's value is its own: registered again, in
		 * the child, the first time it asks. */
		if (p->kind == TALLY_PGAUGE && p->pid != (int)getpid()) {
			struct tally_metric_desc d = { .kind = TALLY_PGAUGE,
				.name = p->name, .help = p->help,
				.unit = p->unit };

			rc = tally_pgauge_register(p->zone, &d, p->combine,
						   &p->one.p);
			p->pid = (int)getpid();
			*h = &p->one.any;
			return rc;
		}
		*h = &p->one.any;
		return 0;
	}
	switch (p->kind) {
	case TALLY_FGAUGE:
	case TALLY_INFO:
	case TALLY_ENUM:
		rc = tally_fgauge_family_get(&p->fam.f, values, n, &fg);
		*h = &fg->metric;
		break;
	case TALLY_PGAUGE:
		rc = tally_pgauge_family_get(&p->fam.p, values, n, &pg);
		*h = &pg->metric;
		break;
	case TALLY_FCOUNTER:
		rc = tally_fcounter_family_get(&p->fam.fc, values, n, &fcn);
		*h = &fcn->metric;
		break;
	case TALLY_CHISTOGRAM:
		/* The metric is the histogram handle's first member. */
		rc = tally_chistogram_family_get(&p->fam.ch, values, n, &ch);
		*h = &ch->metric;
		break;
	case TALLY_SUMMARY:
		/* A summary's handle is a classic histogram's. */
		rc = tally_summary_family_get(&p->fam.sm, values, n, &ch);
		*h = &ch->metric;
		break;
	}
	return rc;
}

/* The bounds of a histogram, @buckets (a tuple of floats, sorted, +Inf
 * last), into @self: 0, or -1 with an exception. */
static int family_bounds(TpyFamily *self, PyObject *buckets)
{
	Py_ssize_t nb;

	if (!PyTuple_Check(buckets) || PyTuple_GET_SIZE(buckets) < 1) {
		PyErr_SetString(PyExc_ValueError, "a histogram needs buckets, "
				"as a tuple");
		return -1;
	}
	nb = PyTuple_GET_SIZE(buckets);
	self->bounds = calloc((size_t)nb, sizeof(double));
	if (!self->bounds) {
		PyErr_NoMemory();
		return -1;
	}
	self->nbounds = (unsigned)nb;
	for (Py_ssize_t i = 0; i < nb; i++) {
		self->bounds[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(buckets, i));
		if (self->bounds[i] == -1.0 && PyErr_Occurred())
			return -1;
		if (i > 0 && !(self->bounds[i] > self->bounds[i - 1])) {
			PyErr_SetString(PyExc_ValueError,
					"Buckets not in sorted order");
			return -1;
		}
	}
	if (!isinf(self->bounds[nb - 1])) {
		PyErr_SetString(PyExc_ValueError, "the last bucket must be +Inf");
		return -1;
	}
	return 0;
}

/* The kind of the series of a Python metric of kind @kind: 0, with a
 * ValueError, for a combination that is none of family.c's table. */
static unsigned series_kind(int kind, int combine, int summary, int typed)
{
	if (combine >= 0 && (kind != TPY_GAUGE ||
			     combine > (int)TALLY_COMBINE_LIVEMOSTRECENT)) {
		PyErr_SetString(PyExc_ValueError, "a combine mode is for a "
				"gauge, 0 .. 9");
		return 0;
	}
	if (typed && (kind != TPY_GAUGE || combine >= 0 ||
		      (typed != TALLY_INFO && typed != TALLY_ENUM))) {
		PyErr_SetString(PyExc_ValueError, "typed is TALLY_INFO or "
				"TALLY_ENUM, of a gauge without a combine mode");
		return 0;
	}
	if (summary && kind != TPY_HISTOGRAM) {
		PyErr_SetString(PyExc_ValueError, "a summary is of kind "
				"KIND_HISTOGRAM");
		return 0;
	}
	switch (kind) {
	case TPY_COUNTER:
		return TALLY_FCOUNTER;
	case TPY_GAUGE:
		return combine >= 0 ? TALLY_PGAUGE :
		       typed ? (unsigned)typed : TALLY_FGAUGE;
	case TPY_HISTOGRAM:
		return summary ? TALLY_SUMMARY : TALLY_CHISTOGRAM;
	}
	PyErr_SetString(PyExc_ValueError, "unknown kind");
	return 0;
}

static int family_init(TpyFamily *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "zone", "kind", "name", "help", "unit",
		"labelnames", "buckets", "combine", "summary", "typed", NULL };
	PyObject *zone, *help, *unit, *labelnames, *buckets = Py_None;
	int kind, rc = 0, combine = -1, summary = 0, typed = 0;
	const char *name;
	const char **names = NULL;
	Py_ssize_t n;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OisUUO!|Oipi:Family",
					 kwlist, &zone, &kind, &name, &help,
					 &unit, &PyTuple_Type, &labelnames,
					 &buckets, &combine, &summary, &typed))
		return -1;
	if (self->kind) {
		PyErr_SetString(PyExc_RuntimeError, "Family is set up already");
		return -1;
	}
	if (!(self->main.kind = series_kind(kind, combine, summary, typed)))
		return -1;
	if (zone != Py_None && !PyObject_TypeCheck(zone, &TpyZone_Type)) {
		PyErr_SetString(PyExc_TypeError, "zone must be a Zone or None");
		return -1;
	}
	self->zone = zone == Py_None ? NULL : ((TpyZone *)zone)->zone;
	Py_INCREF(zone);
	Py_XSETREF(self->zone_obj, zone);
	self->main.combine = combine >= 0 ? (unsigned)combine : 0;
	if (!(self->help = dup_utf8(help, "help")) ||
	    !(self->unit = dup_utf8(unit, "unit")))
		goto fail;
	n = PyTuple_GET_SIZE(labelnames);
	/* Room for the two labels tally may add: a histogram's le, a
	 * per-process gauge's pid. */
	if (n > (Py_ssize_t)TALLY_LABEL_PAIRS_MAX - 2) {
		PyErr_Format(PyExc_ValueError, "too many labels: %zd, at most "
			     "%u", n, TALLY_LABEL_PAIRS_MAX - 2);
		goto fail;
	}
	self->label_names = calloc((size_t)n + 1, sizeof(char *));
	names = calloc((size_t)n + 1, sizeof(char *));
	if (!self->label_names || !names) {
		PyErr_NoMemory();
		goto fail;
	}
	self->nlabels = (unsigned)n;
	for (Py_ssize_t i = 0; i < n; i++) {
		self->label_names[i] = dup_utf8(PyTuple_GET_ITEM(labelnames, i),
						"a label name");
		if (!self->label_names[i])
			goto fail;
		names[i] = self->label_names[i];
	}
	if (kind == TPY_HISTOGRAM && family_bounds(self, buckets) < 0)
		goto fail;
	if (!(self->main.name = strdup(name))) {
		PyErr_NoMemory();
		goto fail;
	}
	self->kind = kind;
	Py_BEGIN_ALLOW_THREADS
	rc = part_register(self, &self->main, names, self->nlabels);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		/* A description libtally refuses, or no room (a changed
		 * definition is never refused: it is a new generation, or a
		 * new help text).  The message names the metric and the
		 * file; tally's says what is wrong. */
		raise_for(rc, "register", name, self->zone);
		goto fail;
	}
	free(names);
	return 0;
fail:
	self->kind = 0;
	free(names);
	return -1;
}

/* The registrations stay: a series lives as long as the process holds
 * it (other metric objects of the same name share it), and a handle a
 * child still holds must stay valid; only the description is freed. */
static void family_dealloc(TpyFamily *self)
{
	for (unsigned i = 0; self->label_names && self->label_names[i]; i++)
		free(self->label_names[i]);
	free(self->label_names);
	free(self->bounds);
	free(self->help);
	free(self->unit);
	free(self->main.name);
	Py_XDECREF(self->zone_obj);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject TpyFamily_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tally_metrics._native.Family",
	.tp_basicsize = sizeof(TpyFamily),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "The series of one Python metric in a zone (internal).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)family_init,
	.tp_dealloc = (destructor)family_dealloc,
};

/*
 * claim(zone, name, definition, parts=(), bounds=None, unit=None, kind=0,
 * combine=0): record @definition as the definition of the metric @name
 * in @zone: a metric record named @name with @definition as its help and
 * no series (readers show nothing of it); with @bounds, a classic
 * histogram's, and with @kind TALLY_FGAUGE or TALLY_PGAUGE (of @combine) a
 * gauge's, TALLY_INFO or TALLY_ENUM an Info's or an Enum's (format 2.8),
 * with @summary a summary's (tally_summary_redefine), whose
 * series are registered under @name itself, with
 * @definition its help and @unit its unit (tally_chistogram_redefine,
 * tally_pgauge_redefine, tally_metric_redefine).  When the zone holds another one (an earlier version of the
 * program, still running or not), the families @parts (every tally name
 * a metric of that name may use, whatever its type) are superseded at
 * once: readers show only the series the new definition makes, and the
 * processes of the old one go on writing theirs (tally_metric_redefine).
 * Returns True when the definition changed, else False.
 */
PyObject *tpy_claim(PyObject *unused, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "zone", "name", "definition", "parts",
		"bounds", "unit", "kind", "combine", "summary", NULL };
	struct tally_metric_desc d = { .kind = TALLY_COUNTER };
	unsigned kind = 0, combine = 0;
	int summary = 0;
	struct tally_zone *z;
	PyObject *zone, *parts = NULL, *bounds = NULL;
	double b[TALLY_CHISTOGRAM_BOUNDS_MAX + 1];
	Py_ssize_t nb = 0;
	const char **names;
	Py_ssize_t n;
	int rc;

	(void)unused;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "Oss|O!O!zIIp:claim", kwlist,
					 &zone, &d.name, &d.help,
					 &PyTuple_Type, &parts,
					 &PyTuple_Type, &bounds, &d.unit,
					 &kind, &combine, &summary))
		return NULL;
	if (kind && kind != TALLY_FGAUGE && kind != TALLY_PGAUGE &&
	    kind != TALLY_INFO && kind != TALLY_ENUM) {
		PyErr_Format(PyExc_ValueError, "%s: a definition of kind %u",
			     d.name, kind);
		return NULL;
	}
	if (kind)
		d.kind = kind;
	if (bounds) {
		nb = PyTuple_GET_SIZE(bounds);
		if (nb > (Py_ssize_t)TALLY_CHISTOGRAM_BOUNDS_MAX + 1) {
			PyErr_Format(PyExc_ValueError, "%s: %zd buckets, more "
				     "than the %u a histogram takes", d.name,
				     nb, TALLY_CHISTOGRAM_BOUNDS_MAX + 1);
			return NULL;
		}
		for (Py_ssize_t i = 0; i < nb; i++) {
			b[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(bounds, i));
			if (b[i] == -1.0 && PyErr_Occurred())
				return NULL;
		}
	}
	if (zone != Py_None && !PyObject_TypeCheck(zone, &TpyZone_Type)) {
		PyErr_SetString(PyExc_TypeError, "zone must be a Zone or None");
		return NULL;
	}
	z = zone == Py_None ? NULL : ((TpyZone *)zone)->zone;
	n = parts ? PyTuple_GET_SIZE(parts) : 0;
	names = calloc((size_t)n + 1, sizeof(*names));
	if (!names)
		return PyErr_NoMemory();
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = PyTuple_GET_ITEM(parts, i);

		if (!PyUnicode_Check(o) || !(names[i] = PyUnicode_AsUTF8(o))) {
			free(names);
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError,
						"parts must be strings");
			return NULL;
		}
	}
	Py_BEGIN_ALLOW_THREADS
	/* A classic histogram's record, under the name, is its
	 * definition. */
	if (summary)
		rc = tally_summary_redefine(z, &d, names, (unsigned)n);
	else if (bounds)
		rc = tally_chistogram_redefine(z, &d, b, (unsigned)nb, names,
					       (unsigned)n);
	else if (kind == TALLY_PGAUGE)
		rc = tally_pgauge_redefine(z, &d, combine, names, (unsigned)n);
	else
		rc = tally_metric_redefine(z, &d, names, (unsigned)n);
	Py_END_ALLOW_THREADS
	free(names);
	if (rc < 0) {
		raise_for(rc, "define", d.name, z);
		return NULL;
	}
	return PyBool_FromLong(rc == 1);
}
