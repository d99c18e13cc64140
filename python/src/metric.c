/*
 * metric.c: the base types of tally.Counter, tally.Gauge and
 * tally.Histogram: their update methods, which do the adds in C (exact
 * with or without a GIL), and the lookup of a child by its label values.
 *
 * A metric object is either a parent (it has label names: .children maps
 * label values to children and updates are refused) or bound to its
 * series (.bound: a metric without labels, or a child).  labels() finds
 * a known child with one dict lookup here; anything else (keywords,
 * values that are not str, a new child) goes to the Python method
 * _labels_slow(), which checks the values as prometheus_client does,
 * binds the child with _bind() and caches it.
 *
 * How values are held (python/README.md): each metric is one series of
 * a kind of the format (family.c): a counter's whole units and
 * billionths, a gauge's double, a classic histogram's buckets and exact
 * sum, each updated by libtally.
 */
#include "native.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --- Values ------------------------------------------------------------ */

/* An amount: its value and its integer part (truncated). */
struct amount {
	int64_t whole;
	double d;
	int negative;
};

static int to_amount(PyObject *o, struct amount *a)
{
	memset(a, 0, sizeof(*a));
	if (PyLong_Check(o)) {
		int overflow;
		long long v = PyLong_AsLongLongAndOverflow(o, &overflow);

		if (overflow) {
			PyErr_SetString(PyExc_OverflowError, "the amount does "
					"not fit in a 64-bit integer");
			return -1;
		}
		if (v == -1 && PyErr_Occurred())
			return -1;
		a->whole = v;
		a->d = (double)v;
		a->negative = v < 0;
		return 0;
	}
	a->d = PyFloat_AsDouble(o);
	if (a->d == -1.0 && PyErr_Occurred())
		return -1;
	if (!isfinite(a->d)) {
		PyErr_Format(PyExc_ValueError, "%R cannot be counted: tally "
			     "holds finite amounts only", o);
		return -1;
	}
	/* 2^63: the first double beyond int64. */
	if (fabs(a->d) >= 9223372036854775808.0) {
		PyErr_SetString(PyExc_OverflowError, "the amount does not fit "
				"in a 64-bit integer part");
		return -1;
	}
	a->whole = (int64_t)trunc(a->d);
	a->negative = a->d < 0;
	return 0;
}

static inline double bits_to_double(int64_t b)
{
	double d;

	memcpy(&d, &b, sizeof(d));
	return d;
}

/* --- Arguments ----------------------------------------------------------- */

/* One optional argument @name (positional or keyword), and an ignored
 * "exemplar" keyword, as prometheus_client's inc() and observe() take. */
static int one_arg(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
		   const char *name, PyObject **out)
{
	*out = nargs > 0 ? args[0] : NULL;
	if (nargs > 1) {
		PyErr_Format(PyExc_TypeError, "takes at most 1 positional "
			     "argument (%zd given)", nargs);
		return -1;
	}
	if (kwnames) {
		Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);

		for (Py_ssize_t i = 0; i < nk; i++) {
			PyObject *k = PyTuple_GET_ITEM(kwnames, i);

			if (PyUnicode_CompareWithASCIIString(k, name) == 0 &&
			    !*out) {
				*out = args[nargs + i];
			} else if (PyUnicode_CompareWithASCIIString(k,
						"exemplar") != 0) {
				PyErr_Format(PyExc_TypeError, "unexpected "
					     "keyword argument %R", k);
				return -1;
			}
		}
	}
	return 0;
}

static PyObject *not_observable(TpyMetric *self)
{
	if (!self->fam)
		PyErr_SetString(PyExc_ValueError, "metric is not set up (was "
				"its __init__ called?)");
	else
		PyErr_Format(PyExc_ValueError, "%s metric is missing label "
			     "values", self->type_name);
	return NULL;
}

/* --- Counter ------------------------------------------------------------- */

static PyObject *counter_inc(TpyMetric *self, PyObject *const *args,
			     Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *o;
	struct amount a;

	if (!self->bound)
		return not_observable(self);
	if (nargs == 0 && !kwnames) {
		tally_counter_inc((const tally_counter *)self->h_main);
		Py_RETURN_NONE;
	}
	if (one_arg(args, nargs, kwnames, "amount", &o) < 0)
		return NULL;
	if (!o) {
		tally_counter_inc((const tally_counter *)self->h_main);
		Py_RETURN_NONE;
	}
	if (to_amount(o, &a) < 0)
		return NULL;
	if (a.negative) {
		PyErr_SetString(PyExc_ValueError, "Counters can only be "
				"incremented by non-negative amounts.");
		return NULL;
	}
	/* A fractional counter (format 2.6): whole units and billionths
	 * of the amount, each added exactly; an int's whole units alone. */
	if (a.d != (double)a.whole || !PyLong_Check(o))
		tally_fcounter_add((const tally_fcounter *)self->h_main, a.d);
	else if (a.whole)
		tally_counter_add((const tally_counter *)self->h_main, a.whole);
	Py_RETURN_NONE;
}

/* The counter's value, every process's increments included. */
static PyObject *counter_get(TpyMetric *self, PyObject *unused)
{
	double v = 0;

	(void)unused;
	if (!self->bound)
		return not_observable(self);
	tally_fcounter_fetch((const tally_fcounter *)self->h_main, &v);
	return PyFloat_FromDouble(v);
}

/* --- Gauge --------------------------------------------------------------- */

static void gauge_touched(TpyMetric *self)
{
	/* A per-process gauge of a "mostrecent" mode keeps the time of its
	 * last set in its own series. */
	if (self->h_main->kind == TALLY_PGAUGE &&
	    self->h_main->sub_bits >= TALLY_COMBINE_MOSTRECENT)
		tally__pgauge_stamp((const tally_pgauge *)self->h_main);
}

static void gauge_add(TpyMetric *self, double v)
{
	tally_fgauge_add((const tally_fgauge *)self->h_main, v);
	gauge_touched(self);
}

static PyObject *gauge_change(TpyMetric *self, PyObject *const *args,
			      Py_ssize_t nargs, PyObject *kwnames, double sign)
{
	PyObject *o;
	double v = 1.0;

	if (!self->bound)
		return not_observable(self);
	if (nargs || kwnames) {
		if (one_arg(args, nargs, kwnames, "amount", &o) < 0)
			return NULL;
		if (o) {
			v = PyFloat_AsDouble(o);
			if (v == -1.0 && PyErr_Occurred())
				return NULL;
		}
	}
	gauge_add(self, sign * v);
	Py_RETURN_NONE;
}

static PyObject *gauge_inc(TpyMetric *self, PyObject *const *args,
			   Py_ssize_t nargs, PyObject *kwnames)
{
	return gauge_change(self, args, nargs, kwnames, 1.0);
}

static PyObject *gauge_dec(TpyMetric *self, PyObject *const *args,
			   Py_ssize_t nargs, PyObject *kwnames)
{
	return gauge_change(self, args, nargs, kwnames, -1.0);
}

static PyObject *gauge_set(TpyMetric *self, PyObject *value)
{
	double v;

	if (!self->bound)
		return not_observable(self);
	v = PyFloat_AsDouble(value);
	if (v == -1.0 && PyErr_Occurred())
		return NULL;
	tally_fgauge_set((const tally_fgauge *)self->h_main, v);
	gauge_touched(self);
	Py_RETURN_NONE;
}

/* This process's value of the gauge (its own series). */
static PyObject *gauge_get(TpyMetric *self, PyObject *unused)
{
	(void)unused;
	if (!self->bound)
		return not_observable(self);
	return PyFloat_FromDouble(bits_to_double(__atomic_load_n(
		tally__fgauge_word((const tally_fgauge *)self->h_main),
		__ATOMIC_RELAXED)));
}

/*
 * enum_set(states, index): make states[index] the current state of an
 * enum (tally_enum_set), or with index -1 start it in its first state
 * unless one is current (tally_enum_start); @states is the tuple of
 * the bound GaugeBase objects of one label set's states.  The zone's
 * lock is taken without the GIL, which another process may hold it
 * against.
 */
PyObject *tpy_enum_set(PyObject *unused, PyObject *args)
{
	const tally_fgauge *st[TPY_ENUM_STATES_MAX];
	PyObject *tuple;
	Py_ssize_t n, index;
	int rc;

	(void)unused;
	if (!PyArg_ParseTuple(args, "O!n", &PyTuple_Type, &tuple, &index))
		return NULL;
	n = PyTuple_GET_SIZE(tuple);
	if (n < 1 || n > TPY_ENUM_STATES_MAX || index < -1 || index >= n) {
		PyErr_SetString(PyExc_ValueError, "enum_set: bad states or "
				"index");
		return NULL;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = PyTuple_GET_ITEM(tuple, i);

		if (!PyObject_TypeCheck(o, &TpyGauge_Type) ||
		    !((TpyMetric *)o)->bound) {
			PyErr_SetString(PyExc_TypeError, "enum_set: a state "
					"is not a bound gauge");
			return NULL;
		}
		st[i] = (const tally_fgauge *)((TpyMetric *)o)->h_main;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = index < 0 ? tally_enum_start(st, (size_t)n) :
		tally_enum_set(st, (size_t)n, (size_t)index);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		tpy_raise(rc, "cannot change the enum's state");
		return NULL;
	}
	Py_RETURN_NONE;
}

/* --- Histogram ----------------------------------------------------------- */

static PyObject *histogram_observe(TpyMetric *self, PyObject *const *args,
				   Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *o;
	struct amount a;

	if (!self->bound)
		return not_observable(self);
	if (one_arg(args, nargs, kwnames, "amount", &o) < 0)
		return NULL;
	if (!o) {
		PyErr_SetString(PyExc_TypeError, "observe() missing 1 "
				"required argument: 'amount'");
		return NULL;
	}
	if (to_amount(o, &a) < 0)
		return NULL;
	/* A classic histogram of the format, or a summary (whose handle is
	 * one): libtally finds the bucket and adds to the sum exactly. */
	tally_chistogram_observe((const tally_chistogram *)self->h_main, a.d);
	Py_RETURN_NONE;
}

/* The sum of the observations (every process's). */
static PyObject *histogram_get_sum(TpyMetric *self, PyObject *unused)
{
	int64_t count;
	double sum = 0;

	(void)unused;
	if (!self->bound)
		return not_observable(self);
	tally_chistogram_fetch((const tally_chistogram *)self->h_main, &count,
			       &sum, NULL);
	return PyFloat_FromDouble(sum);
}

/* The count of bucket @i (not cumulative; every process's). */
static PyObject *histogram_get_bucket(TpyMetric *self, PyObject *arg)
{
	Py_ssize_t i = PyNumber_AsSsize_t(arg, PyExc_IndexError);
	const tally_chistogram *h;
	int64_t b[TALLY_CHISTOGRAM_BOUNDS_MAX + 1], count, v = 0;
	double sum;

	if (i == -1 && PyErr_Occurred())
		return NULL;
	if (!self->bound)
		return not_observable(self);
	if (i < 0 || (size_t)i >= self->fam->nbounds) {
		PyErr_SetString(PyExc_IndexError, "no such bucket");
		return NULL;
	}
	h = (const tally_chistogram *)self->h_main;
	/* A discarding handle (a failed registration) has no buckets: 0. */
	if ((size_t)i <= h->nbounds &&
	    tally_chistogram_fetch(h, &count, &sum, b) == 0)
		v = b[i];
	return PyFloat_FromDouble((double)v);
}

/* --- Binding and children --------------------------------------------- */

/* _init_parent(family, nuser): a metric with label names, whose children
 * take @nuser values (the family may add a pid of its own). */
static PyObject *metric_init_parent(TpyMetric *self, PyObject *args)
{
	TpyFamily *fam;
	unsigned nuser;

	if (!PyArg_ParseTuple(args, "O!I", &TpyFamily_Type, &fam, &nuser))
		return NULL;
	Py_INCREF(fam);
	Py_XSETREF(self->fam, fam);
	if (!self->children) {
		self->children = PyDict_New();
		if (!self->children)
			return NULL;
	}
	self->nuser = nuser;
	self->bound = 0;
	Py_RETURN_NONE;
}

/* _bind(family, values): make this object the series of @family with
 * label values @values (a tuple of str, one per label of the family);
 * again after fork(), to move to the child's own series. */
static PyObject *metric_bind(TpyMetric *self, PyObject *args)
{
	TpyFamily *fam;
	PyObject *values;
	Py_ssize_t n;
	const char **v;
	const tally_metric *main = NULL;
	int rc = 0;

	if (!PyArg_ParseTuple(args, "O!O!", &TpyFamily_Type, &fam,
			      &PyTuple_Type, &values))
		return NULL;
	if (!fam->kind) {
		PyErr_SetString(PyExc_ValueError, "the family is not set up");
		return NULL;
	}
	n = PyTuple_GET_SIZE(values);
	if ((unsigned)n != fam->nlabels) {
		PyErr_Format(PyExc_ValueError, "%u label values expected, %zd "
			     "given", fam->nlabels, n);
		return NULL;
	}
	v = calloc((size_t)n + 1, sizeof(char *));
	if (!v)
		return PyErr_NoMemory();
	/* The values are the tuple's strings, which it holds while the
	 * series is found (libtally copies what it keeps). */
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = PyTuple_GET_ITEM(values, i);

		if (!PyUnicode_Check(o)) {
			PyErr_SetString(PyExc_TypeError,
					"label values must be str");
			goto fail;
		}
		if (!(v[i] = PyUnicode_AsUTF8(o)))
			goto fail;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = tpy_part_get(&fam->main, v, (unsigned)n, &main);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		tpy_raise(rc, "cannot register the series");
		goto fail;
	}
	free(v);
	Py_INCREF(fam);
	Py_XSETREF(self->fam, fam);
	self->h_main = main;
	__atomic_store_n(&self->bound, 1, __ATOMIC_RELEASE);
	Py_RETURN_NONE;
fail:
	free(v);
	return NULL;
}

/* labels(*values, **kw): the cached child, or _labels_slow(). */
static PyObject *metric_labels(TpyMetric *self, PyObject *const *args,
			       Py_ssize_t nargs, PyObject *kwnames)
{
	static PyObject *slow_name;
	PyObject *key, *child;
	PyObject *margs[16];

	if (self->children && !kwnames && nargs == (Py_ssize_t)self->nuser &&
	    nargs > 0) {
		Py_ssize_t i;

		for (i = 0; i < nargs; i++)
			if (!PyUnicode_CheckExact(args[i]))
				break;
		if (i == nargs) {
			if (nargs == 1) {
				key = args[0];
				Py_INCREF(key);
			} else {
				key = PyTuple_New(nargs);
				if (!key)
					return NULL;
				for (i = 0; i < nargs; i++) {
					Py_INCREF(args[i]);
					PyTuple_SET_ITEM(key, i, args[i]);
				}
			}
#if PY_VERSION_HEX >= 0x030D0000
			if (PyDict_GetItemRef(self->children, key, &child) < 0) {
				Py_DECREF(key);
				return NULL;
			}
			Py_DECREF(key);
			if (child)
				return child;
#else
			child = PyDict_GetItemWithError(self->children, key);
			Py_DECREF(key);
			if (child) {
				Py_INCREF(child);
				return child;
			}
			if (PyErr_Occurred())
				return NULL;
#endif
		}
	}
	if (!slow_name) {
		slow_name = PyUnicode_InternFromString("_labels_slow");
		if (!slow_name)
			return NULL;
	}
	{
		Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames)
						    : 0);

		if (total + 1 > (Py_ssize_t)(sizeof(margs) / sizeof(*margs)))
			goto generic;
		margs[0] = (PyObject *)self;
		for (Py_ssize_t i = 0; i < total; i++)
			margs[i + 1] = args[i];
		return PyObject_VectorcallMethod(slow_name, margs,
						 (size_t)(nargs + 1), kwnames);
	}
generic: {
		/* Many values: build the call the slow way. */
		PyObject *meth = PyObject_GetAttr((PyObject *)self, slow_name);
		PyObject *r;

		if (!meth)
			return NULL;
		r = PyObject_Vectorcall(meth, args, (size_t)nargs, kwnames);
		Py_DECREF(meth);
		return r;
	}
}

static PyObject *metric_children(TpyMetric *self, void *closure)
{
	(void)closure;
	if (!self->children)
		Py_RETURN_NONE;
	Py_INCREF(self->children);
	return self->children;
}

static PyObject *metric_bound(TpyMetric *self, void *closure)
{
	(void)closure;
	return PyBool_FromLong(self->bound);
}

static int metric_traverse(TpyMetric *self, visitproc visit, void *arg)
{
	Py_VISIT(self->children);
	Py_VISIT(self->fam);
	return 0;
}

static int metric_clear(TpyMetric *self)
{
	Py_CLEAR(self->children);
	self->bound = 0;
	return 0;
}

static void metric_dealloc(TpyMetric *self)
{
	PyObject_GC_UnTrack(self);
	metric_clear(self);
	Py_CLEAR(self->fam);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *metric_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	TpyMetric *self = (TpyMetric *)type->tp_alloc(type, 0);

	(void)args;
	(void)kw;
	if (!self)
		return NULL;
	if (PyType_IsSubtype(type, &TpyCounter_Type))
		self->type_name = "counter";
	else if (PyType_IsSubtype(type, &TpyGauge_Type))
		self->type_name = "gauge";
	else
		self->type_name = "histogram";
	return (PyObject *)self;
}

#define COMMON_METHODS                                                       \
	{ "labels", (PyCFunction)(void (*)(void))metric_labels,              \
	  METH_FASTCALL | METH_KEYWORDS,                                     \
	  "labels(*values, **labelkwargs): the child with these label "     \
	  "values." },                                                       \
	{ "_bind", (PyCFunction)metric_bind, METH_VARARGS, NULL },          \
	{ "_init_parent", (PyCFunction)metric_init_parent, METH_VARARGS,     \
	  NULL }

static PyMethodDef counter_methods[] = {
	{ "inc", (PyCFunction)(void (*)(void))counter_inc,
	  METH_FASTCALL | METH_KEYWORDS,
	  "inc(amount=1, exemplar=None): add a non-negative amount." },
	{ "_get", (PyCFunction)counter_get, METH_NOARGS,
	  "The series' value, every process's increments included." },
	COMMON_METHODS,
	{ NULL, NULL, 0, NULL },
};

static PyMethodDef gauge_methods[] = {
	{ "inc", (PyCFunction)(void (*)(void))gauge_inc,
	  METH_FASTCALL | METH_KEYWORDS, "inc(amount=1): add to the gauge." },
	{ "dec", (PyCFunction)(void (*)(void))gauge_dec,
	  METH_FASTCALL | METH_KEYWORDS,
	  "dec(amount=1): subtract from the gauge." },
	{ "set", (PyCFunction)gauge_set, METH_O, "set(value): set the gauge." },
	{ "_get", (PyCFunction)gauge_get, METH_NOARGS,
	  "This process's series' value." },
	COMMON_METHODS,
	{ NULL, NULL, 0, NULL },
};

static PyMethodDef histogram_methods[] = {
	{ "observe", (PyCFunction)(void (*)(void))histogram_observe,
	  METH_FASTCALL | METH_KEYWORDS,
	  "observe(amount, exemplar=None): count a value." },
	{ "_get_sum", (PyCFunction)histogram_get_sum, METH_NOARGS,
	  "The sum of every process's observations." },
	{ "_get_bucket", (PyCFunction)histogram_get_bucket, METH_O,
	  "_get_bucket(i): the count of bucket i (not cumulative)." },
	COMMON_METHODS,
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef metric_getset[] = {
	{ "_children", (getter)metric_children, NULL, NULL, NULL },
	{ "_bound", (getter)metric_bound, NULL, NULL, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

#define METRIC_TYPE(var, pyname, methods)                                    \
	PyTypeObject var = {                                                 \
		PyVarObject_HEAD_INIT(NULL, 0)                               \
		.tp_name = pyname,                                           \
		.tp_basicsize = sizeof(TpyMetric),                           \
		.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE |       \
			    Py_TPFLAGS_HAVE_GC,                              \
		.tp_doc = "The C part of a metric (internal).",              \
		.tp_new = metric_new,                                        \
		.tp_dealloc = (destructor)metric_dealloc,                    \
		.tp_traverse = (traverseproc)metric_traverse,                \
		.tp_clear = (inquiry)metric_clear,                           \
		.tp_methods = methods,                                       \
		.tp_getset = metric_getset,                                  \
	}

METRIC_TYPE(TpyCounter_Type, "tally_metrics._native.CounterBase", counter_methods);
METRIC_TYPE(TpyGauge_Type, "tally_metrics._native.GaugeBase", gauge_methods);
METRIC_TYPE(TpyHistogram_Type, "tally_metrics._native.HistogramBase",
	    histogram_methods);
