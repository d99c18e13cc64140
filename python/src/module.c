/*
 * module.c: the tally_metrics._native module: its types, read(), TallyError and
 * the constants the Python layer shares with the C one.
 */
#include "native.h"

/* ignore(amount): nothing.  The inc() of a histogram bucket's or a
 * summary count's value under the prometheus_client switch, which the
 * observation counted already: a C call, the cheapest one Python makes. */
static PyObject *tpy_ignore(PyObject *unused, PyObject *amount)
{
	(void)unused;
	(void)amount;
	Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
	{ "ignore", tpy_ignore, METH_O,
	  "ignore(amount): does nothing (an inc() that is counted elsewhere)" },
	{ "promclient_methods",
	  (PyCFunction)(void (*)(void))tpy_promclient_methods, METH_FASTCALL,
	  "promclient_methods(MetricWrapperBase, Counter, Gauge, Histogram, "
	  "Summary, labels, inc, observe) -> (labels, inc, observe): "
	  "prometheus_client's methods in C, falling back on the ones given "
	  "(promclient.c)" },
	{ "read", (PyCFunction)(void (*)(void))tpy_read,
	  METH_VARARGS | METH_KEYWORDS,
	  "read(dir=None, zone=None) -> (series, skipped, segments)" },
	{ "expose", (PyCFunction)(void (*)(void))tpy_expose,
	  METH_VARARGS | METH_KEYWORDS,
	  "expose(dir=None, zone=None, openmetrics=False) -> (text, "
	  "skipped, segments): tally-exporter's exposition of the zone" },
	{ "claim", (PyCFunction)(void (*)(void))tpy_claim,
	  METH_VARARGS | METH_KEYWORDS,
	  "claim(zone, name, definition, parts=()) -> bool: define @name "
	  "in "
	  "@zone; a changed definition supersedes the families @parts "
	  "(True)" },
	{ "enum_set", tpy_enum_set, METH_VARARGS,
	  "enum_set(states, index): change an Enum's state (-1: start)." },
	{ "unit_value", tpy_unit_value, METH_VARARGS,
	  "unit_value(v, unit, point=False): @v in the base unit, or None" },
	{ "unit_name", tpy_unit_name, METH_VARARGS,
	  "unit_name(name, unit) -> (name, unit) as readers show them" },
	{ "bucket_upper", tpy_bucket_upper, METH_VARARGS,
	  "bucket_upper(i, sub_bits): the upper edge of a tally bucket" },
	{ NULL, NULL, 0, NULL },
};

static int add_type(PyObject *m, PyTypeObject *t, const char *name)
{
	if (PyType_Ready(t) < 0)
		return -1;
	Py_INCREF(t);
	if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
		Py_DECREF(t);
		return -1;
	}
	return 0;
}

static int module_exec(PyObject *m)
{
	if (add_type(m, &TpyZone_Type, "Zone") < 0 ||
	    add_type(m, &TpyFamily_Type, "Family") < 0 ||
	    add_type(m, &TpyCounter_Type, "CounterBase") < 0 ||
	    add_type(m, &TpyGauge_Type, "GaugeBase") < 0 ||
	    add_type(m, &TpyHistogram_Type, "HistogramBase") < 0)
		return -1;
	if (!TpyError) {
		TpyError = PyErr_NewExceptionWithDoc("tally_metrics.TallyError",
			"A libtally call failed: errno and tally's message.",
			PyExc_OSError, NULL);
		if (!TpyError)
			return -1;
	}
	Py_INCREF(TpyError);
	if (PyModule_AddObject(m, "TallyError", TpyError) < 0) {
		Py_DECREF(TpyError);
		return -1;
	}
	if (PyModule_AddIntConstant(m, "KIND_COUNTER", TPY_COUNTER) < 0 ||
	    PyModule_AddIntConstant(m, "KIND_GAUGE", TPY_GAUGE) < 0 ||
	    PyModule_AddIntConstant(m, "KIND_HISTOGRAM", TPY_HISTOGRAM) < 0 ||
	    PyModule_AddIntConstant(m, "TALLY_COUNTER", TALLY_COUNTER) < 0 ||
	    PyModule_AddIntConstant(m, "TALLY_HISTOGRAM", TALLY_HISTOGRAM) < 0 ||
	    PyModule_AddIntConstant(m, "TALLY_SUMMARY", TALLY_SUMMARY) < 0 ||
	    PyModule_AddIntConstant(m, "TALLY_FGAUGE", TALLY_FGAUGE) < 0 ||
	    PyModule_AddIntConstant(m, "TALLY_PGAUGE", TALLY_PGAUGE) < 0 ||
	    PyModule_AddIntConstant(m, "TALLY_INFO", TALLY_INFO) < 0 ||
	    PyModule_AddIntConstant(m, "TALLY_ENUM", TALLY_ENUM) < 0 ||
	    PyModule_AddIntConstant(m, "LABELS_MAX", TALLY_LABELS_MAX) < 0 ||
	    PyModule_AddIntConstant(m, "LABEL_PAIRS_MAX",
				    TALLY_LABEL_PAIRS_MAX) < 0 ||
	    PyModule_AddIntConstant(m, "NAME_MAX", TALLY_NAME_MAX) < 0)
		return -1;
	return 0;
}

static PyModuleDef_Slot module_slots[] = {
	{ Py_mod_exec, (void *)module_exec },
#ifdef Py_mod_multiple_interpreters
	{ Py_mod_multiple_interpreters,
	  Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED },
#endif
#ifdef Py_mod_gil
	/* Updates are libtally's adds and atomics; the children dict is a
	 * dict (locked by itself on free-threaded builds). */
	{ Py_mod_gil, Py_MOD_GIL_NOT_USED },
#endif
	{ 0, NULL },
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "tally_metrics._native",
	.m_doc = "libtally for Python: the C half of the tally package.",
	.m_size = 0,
	.m_methods = module_methods,
	.m_slots = module_slots,
};

PyMODINIT_FUNC PyInit__native(void)
{
	return PyModuleDef_Init(&module_def);
}
