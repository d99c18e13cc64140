/*
 * promclient.c: prometheus_client's labels(), Counter.inc() and
 * Histogram.observe() in C, for the switch (TALLY_PROMETHEUS_CLIENT),
 * whose module tally_metrics._promclient checks the release and installs
 * them on prometheus_client's classes.
 *
 * Each is a method descriptor that does what prometheus_client's own
 * method does, with the same reads of the metric's attributes and the
 * same calls into its values, in the same order, for the common case: a
 * metric of prometheus_client's own class (a subclass may override what
 * these read, so it gets prometheus_client's method), label values given
 * all by position or all by keyword, no exemplar.  Everything else, and
 * every check that fails, goes to prometheus_client's own method before
 * anything is changed, so that its exceptions and messages are the
 * errors the application sees.
 *
 * labels() converts each value with str(), as prometheus_client does,
 * and returns the child stored under them in the parent's _metrics dict,
 * read at every call: there is no cache to go stale when remove() or
 * clear() takes a child out.  The lookup is one dict read without the
 * parent's lock, which is atomic (the keys are tuples of exact str,
 * whose comparison runs no Python code; a value whose str() is a
 * subclass of str goes to prometheus_client's labels()); a child that
 * is not there is made by prometheus_client's labels(), under its lock,
 * with the values already converted (str() of a str is the same str).
 */
#include "native.h"

#include <stdint.h>

/* What promclient_methods() was given: prometheus_client's own methods,
 * which do everything the fast paths leave, and its classes.  Set once,
 * under setup_lock, before the descriptors that read them exist. */
static struct {
	PyObject *labels, *inc, *observe;
	PyTypeObject *kinds[4];  /* Counter, Gauge, Histogram, Summary */
	PyTypeObject *counter, *histogram;
	PyObject *descrs;        /* (labels, inc, observe) */
	PyObject *s_labelnames, *s_labelvalues, *s_metrics, *s_value, *s_sum,
		*s_upper_bounds, *s_buckets, *s_inc, *zero, *one;
} pc;
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

/* Label values past this many go to prometheus_client's labels(). */
#define PC_LABELS_MAX 32

/* @orig(self, *args, **kw): prometheus_client's own method. */
static PyObject *call_orig(PyObject *orig, PyObject *self,
			   PyObject *const *args, Py_ssize_t nargs,
			   PyObject *kwnames)
{
	Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
	Py_ssize_t n = 1 + nargs + nkw;
	PyObject *small[8], **all = small, *r;

	if (n > (Py_ssize_t)(sizeof(small) / sizeof(small[0]))) {
		all = PyMem_New(PyObject *, n);
		if (!all)
			return PyErr_NoMemory();
	}
	all[0] = self;
	for (Py_ssize_t i = 0; i < nargs + nkw; i++)
		all[1 + i] = args[i];
	r = PyObject_Vectorcall(orig, all, 1 + nargs, kwnames);
	if (all != small)
		PyMem_Free(all);
	return r;
}

/* Whether @self may be updated (prometheus_client's _is_observable(): no
 * label names, or a child's label values): 1, 0, or -1 with an error. */
static int observable(PyObject *self)
{
	PyObject *names = PyObject_GetAttr(self, pc.s_labelnames), *values;
	int t;

	if (!names)
		return -1;
	t = PyObject_IsTrue(names);
	Py_DECREF(names);
	if (t <= 0)
		return t < 0 ? -1 : 1;
	values = PyObject_GetAttr(self, pc.s_labelvalues);
	if (!values)
		return -1;
	t = PyObject_IsTrue(values);
	Py_DECREF(values);
	return t;
}

/* @obj.inc(@amount), as prometheus_client calls a value: 0 or -1. */
static int call_inc(PyObject *obj, PyObject *amount)
{
	PyObject *args[2] = { obj, amount };
	PyObject *r = PyObject_VectorcallMethod(
		pc.s_inc, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);

	Py_XDECREF(r);
	return r ? 0 : -1;
}

/* @self.<@attr>.inc(@amount) (self._value, self._sum): 0 or -1. */
static int inc_attr(PyObject *self, PyObject *attr, PyObject *amount)
{
	PyObject *value = PyObject_GetAttr(self, attr);
	int rc;

	if (!value)
		return -1;
	rc = call_inc(value, amount);
	Py_DECREF(value);
	return rc;
}

/* --- labels() ------------------------------------------------------------ */

static int is_kind(PyTypeObject *t)
{
	for (int i = 0; i < 4; i++)
		if (t == pc.kinds[i])
			return 1;
	return 0;
}

/* The index of label value @i among the keyword arguments @kwnames (the
 * label names @names, in their order), each used once: 0, or -1 when
 * the keywords are not exactly the label names (then prometheus_client
 * raises). */
static int keyword_order(PyObject *names, PyObject *kwnames,
			 Py_ssize_t *order)
{
	Py_ssize_t n = PyTuple_GET_SIZE(names);
	uint64_t used = 0;

	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *name = PyTuple_GET_ITEM(names, i);
		Py_ssize_t j;

		if (!PyUnicode_CheckExact(name))
			return -1;
		for (j = 0; j < n; j++) {
			PyObject *kw = PyTuple_GET_ITEM(kwnames, j);

			if (!(used >> j & 1) &&
			    (kw == name ||
			     (PyUnicode_CheckExact(kw) &&
			      PyUnicode_Compare(kw, name) == 0)))
				break;
		}
		if (j == n)
			return -1;
		used |= (uint64_t)1 << j;
		order[i] = j;
	}
	return 0;
}

/* The checks of prometheus_client's labels() that precede any change:
 * the number of label values @self takes (a parent of one of the four
 * kinds, called all by position or all by keyword, with as many values
 * as it has label names), with @order the position of each among the
 * arguments; 0 when the call is one for prometheus_client's labels()
 * (an error among them). */
static Py_ssize_t labels_checks(PyObject *self, Py_ssize_t nargs,
				PyObject *kwnames, Py_ssize_t *order)
{
	Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, n;
	PyObject *names, *values;
	int parent;

	if (!is_kind(Py_TYPE(self)) || (nargs && nkw))
		return 0;
	names = PyObject_GetAttr(self, pc.s_labelnames);
	if (!names) {
		PyErr_Clear();
		return 0;
	}
	values = PyObject_GetAttr(self, pc.s_labelvalues);
	if (!values) {
		PyErr_Clear();
		Py_DECREF(names);
		return 0;
	}
	parent = PyTuple_CheckExact(names) && PyTuple_CheckExact(values) &&
		 PyTuple_GET_SIZE(names) > 0 && PyTuple_GET_SIZE(values) == 0;
	n = parent ? PyTuple_GET_SIZE(names) : 0;
	if (n > PC_LABELS_MAX || (nkw ? nkw : nargs) != n ||
	    (nkw && keyword_order(names, kwnames, order) < 0))
		n = 0;
	else if (!nkw)
		for (Py_ssize_t i = 0; i < n; i++)
			order[i] = i;
	Py_DECREF(names);
	Py_DECREF(values);
	return n;
}

static PyObject *fast_labels(PyObject *self, PyObject *const *args,
			     Py_ssize_t nargs, PyObject *kwnames)
{
	Py_ssize_t order[PC_LABELS_MAX], n;
	PyObject *key, *metrics, *child;

	n = labels_checks(self, nargs, kwnames, order);
	if (!n)
		return call_orig(pc.labels, self, args, nargs, kwnames);
	key = PyTuple_New(n);
	if (!key)
		return NULL;
	for (Py_ssize_t i = 0; i < n; i++) {
		/* str(value), in the order of the label names. */
		PyObject *s = PyObject_Str(args[order[i]]);

		if (!s) {
			Py_DECREF(key);
			return NULL;
		}
		PyTuple_SET_ITEM(key, i, s);
		/* A subclass of str (a __str__ may return one) compares
		 * with Python code of its own: prometheus_client's
		 * labels() looks it up under its lock. */
		if (!PyUnicode_CheckExact(s)) {
			Py_DECREF(key);
			return call_orig(pc.labels, self, args, nargs, kwnames);
		}
	}
	metrics = PyObject_GetAttr(self, pc.s_metrics);
	child = NULL;
	if (metrics && PyDict_CheckExact(metrics)) {
#if PY_VERSION_HEX >= 0x030D0000
		/* A strong reference from the dict itself: without a GIL,
		 * remove() may drop the dict's own at any time. */
		if (PyDict_GetItemRef(metrics, key, &child) < 0)
			child = NULL;
#else
		child = PyDict_GetItemWithError(metrics, key);
		Py_XINCREF(child);
#endif
	}
	Py_XDECREF(metrics);
	if (!child) {
		/* A new child (or no _metrics dict to read, whose error is
		 * prometheus_client's to raise): its labels() makes it. */
		PyErr_Clear();
		child = call_orig(pc.labels, self, &PyTuple_GET_ITEM(key, 0),
				  n, NULL);
	}
	Py_DECREF(key);
	return child;
}

/* --- Counter.inc() and Histogram.observe() ------------------------------- */

/* The call is one the fast path takes: @self of class @t, @min to 2
 * arguments by position, the second (an exemplar) None. */
static int plain_call(PyObject *self, PyTypeObject *t, Py_ssize_t min,
		      PyObject *const *args, Py_ssize_t nargs,
		      PyObject *kwnames)
{
	return Py_TYPE(self) == t && !kwnames && nargs >= min && nargs <= 2 &&
	       (nargs < 2 || args[1] == Py_None);
}

static PyObject *fast_inc(PyObject *self, PyObject *const *args,
			  Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *amount;
	int ok, negative;

	if (!plain_call(self, pc.counter, 0, args, nargs, kwnames))
		return call_orig(pc.inc, self, args, nargs, kwnames);
	amount = nargs ? args[0] : pc.one;
	ok = observable(self);
	if (ok <= 0) {
		PyErr_Clear();
		return call_orig(pc.inc, self, args, nargs, kwnames);
	}
	negative = PyObject_RichCompareBool(amount, pc.zero, Py_LT);
	if (negative < 0)
		return NULL;
	if (negative)
		return call_orig(pc.inc, self, args, nargs, kwnames);
	if (inc_attr(self, pc.s_value, amount) < 0)
		return NULL;
	Py_RETURN_NONE;
}

/* @amount <= @bound: 1, 0, or -1 with an error.  @d is @amount as a
 * double when @exact (a float, or an int a double holds exactly). */
static int at_most(PyObject *amount, double d, int exact, PyObject *bound)
{
	if (exact && PyFloat_CheckExact(bound))
		return d <= PyFloat_AS_DOUBLE(bound);
	return PyObject_RichCompareBool(amount, bound, Py_LE);
}

/* The index of the first of @self's _upper_bounds at least @amount, or
 * -1 when none is (a NaN); -2 with an error. */
static Py_ssize_t bucket_of(PyObject *self, PyObject *amount)
{
	PyObject *bounds = PyObject_GetAttr(self, pc.s_upper_bounds), *it, *b;
	Py_ssize_t i = 0, found = -1;
	int exact = 0, le;
	double d = 0;

	if (!bounds)
		return -2;
	if (PyFloat_CheckExact(amount)) {
		d = PyFloat_AS_DOUBLE(amount);
		exact = 1;
	} else if (PyLong_CheckExact(amount)) {
		int overflow;
		long long v = PyLong_AsLongLongAndOverflow(amount, &overflow);

		exact = !overflow && v >= -(1LL << 53) && v <= (1LL << 53);
		d = (double)v;
	}
	/* for i, bound in enumerate(self._upper_bounds), as there. */
	it = PyObject_GetIter(bounds);
	Py_DECREF(bounds);
	if (!it)
		return -2;
	while ((b = PyIter_Next(it))) {
		le = at_most(amount, d, exact, b);
		Py_DECREF(b);
		if (le) {
			found = le < 0 ? -2 : i;
			break;
		}
		i++;
	}
	Py_DECREF(it);
	return PyErr_Occurred() ? -2 : found;
}

static PyObject *fast_observe(PyObject *self, PyObject *const *args,
			      Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *amount, *buckets, *bucket;
	Py_ssize_t i;
	int ok;

	if (!plain_call(self, pc.histogram, 1, args, nargs, kwnames))
		return call_orig(pc.observe, self, args, nargs, kwnames);
	amount = args[0];
	ok = observable(self);
	if (ok <= 0) {
		PyErr_Clear();
		return call_orig(pc.observe, self, args, nargs, kwnames);
	}
	if (inc_attr(self, pc.s_sum, amount) < 0)
		return NULL;
	i = bucket_of(self, amount);
	if (i < -1)
		return NULL;
	if (i >= 0) {
		buckets = PyObject_GetAttr(self, pc.s_buckets);
		if (!buckets)
			return NULL;
		bucket = PySequence_GetItem(buckets, i);
		Py_DECREF(buckets);
		if (!bucket)
			return NULL;
		ok = call_inc(bucket, pc.one);
		Py_DECREF(bucket);
		if (ok < 0)
			return NULL;
	}
	Py_RETURN_NONE;
}

/* --- promclient_methods() -------------------------------------------- */

#define FAST(name, fn, doc) \
	{ name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS, \
	  doc " (prometheus_client's, in C: tally's switch)." }

/* labels, inc, observe: the order of promclient_methods()' descriptors. */
static PyMethodDef fast_defs[] = {
	FAST("labels", fast_labels, "labels($self, /, *labelvalues, "
	     "**labelkwargs)\n--\n\nThe child for the given label values"),
	FAST("inc", fast_inc, "inc($self, /, amount=1, exemplar=None)\n--\n\n"
	     "Increment counter by the given amount"),
	FAST("observe", fast_observe, "observe($self, /, amount, exemplar=None)"
	     "\n--\n\nObserve the given amount"),
};

static int intern_names(void)
{
	static const struct {
		PyObject **p;
		const char *s;
	} names[] = {
		{ &pc.s_labelnames, "_labelnames" },
		{ &pc.s_labelvalues, "_labelvalues" },
		{ &pc.s_metrics, "_metrics" },
		{ &pc.s_value, "_value" },
		{ &pc.s_sum, "_sum" },
		{ &pc.s_upper_bounds, "_upper_bounds" },
		{ &pc.s_buckets, "_buckets" },
		{ &pc.s_inc, "inc" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!*names[i].p &&
		    !(*names[i].p = PyUnicode_InternFromString(names[i].s)))
			return -1;
	if (!pc.zero && !(pc.zero = PyLong_FromLong(0)))
		return -1;
	if (!pc.one && !(pc.one = PyLong_FromLong(1)))
		return -1;
	return 0;
}

/* The descriptors, made from the arguments of promclient_methods(): 0, or
 * -1 with an error. */
static int make_descrs(PyObject *const *a)
{
	PyTypeObject *base = (PyTypeObject *)a[0];
	PyObject *d[3];

	d[0] = PyDescr_NewMethod(base, &fast_defs[0]);
	d[1] = PyDescr_NewMethod((PyTypeObject *)a[1], &fast_defs[1]);
	d[2] = PyDescr_NewMethod((PyTypeObject *)a[3], &fast_defs[2]);
	if (!d[0] || !d[1] || !d[2]) {
		Py_XDECREF(d[0]);
		Py_XDECREF(d[1]);
		Py_XDECREF(d[2]);
		return -1;
	}
	pc.descrs = PyTuple_Pack(3, d[0], d[1], d[2]);
	for (int i = 0; i < 3; i++)
		Py_DECREF(d[i]);
	if (!pc.descrs)
		return -1;
	/* Held for the life of the process, as the classes are. */
	for (int i = 1; i < 8; i++)
		Py_INCREF(a[i]);
	for (int i = 0; i < 4; i++)
		pc.kinds[i] = (PyTypeObject *)a[1 + i];
	pc.counter = pc.kinds[0];
	pc.histogram = pc.kinds[2];
	pc.labels = a[5];
	pc.inc = a[6];
	pc.observe = a[7];
	return 0;
}

PyObject *tpy_promclient_methods(PyObject *unused, PyObject *const *a,
				 Py_ssize_t n)
{
	PyObject *r = NULL;
	int same = 1;

	(void)unused;
	if (n != 8) {
		PyErr_SetString(PyExc_TypeError, "promclient_methods() takes 8 "
				"arguments");
		return NULL;
	}
	for (int i = 0; i < 5; i++)
		if (!PyType_Check(a[i])) {
			PyErr_SetString(PyExc_TypeError, "promclient_methods(): "
					"the first 5 arguments are classes");
			return NULL;
		}
	for (int i = 5; i < 8; i++)
		if (!PyCallable_Check(a[i])) {
			PyErr_SetString(PyExc_TypeError, "promclient_methods(): "
					"the last 3 arguments are methods");
			return NULL;
		}
	/* Waited for without the GIL, which the holder may need. */
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&setup_lock);
	Py_END_ALLOW_THREADS
	if (intern_names() < 0)
		goto out;
	if (!pc.descrs) {
		if (make_descrs(a) < 0)
			goto out;
	} else {
		for (int i = 0; i < 4; i++)
			same &= pc.kinds[i] == (PyTypeObject *)a[1 + i];
		same &= pc.labels == a[5] && pc.inc == a[6] &&
			pc.observe == a[7] &&
			PyDescr_TYPE(PyTuple_GET_ITEM(pc.descrs, 0)) ==
				(PyTypeObject *)a[0];
		if (!same) {
			PyErr_SetString(PyExc_ValueError, "promclient_methods(): "
					"made already for other classes");
			goto out;
		}
	}
	r = pc.descrs;
	Py_INCREF(r);
out:
	pthread_mutex_unlock(&setup_lock);
	return r;
}
