/*
 * zone.c: tally_metrics._native.Zone, the zone a Python metric's series live in,
 * and the exception every failing libtally call raises.
 *
 * Zone() is the process's default zone (named after the process, or the
 * shared zone $TALLY_ZONE names where libtally supports it);
 * Zone("name", shared=True) attaches the shared zone of that name, which
 * unrelated processes attach too (TALLY_ZONE_SHARED).  Zones are never
 * destroyed: series registered in them are used until the process exits.
 */
#include "native.h"

#include <errno.h>
#include <string.h>

PyObject *TpyError;

PyObject *tpy_raise(int rc, const char *what)
{
	int e = rc < 0 ? -rc : rc;
	const char *msg = tally_errmsg();
	PyObject *exc_type = TpyError;
	PyObject *args;

	if (e == EINVAL || e == E2BIG)
		exc_type = PyExc_ValueError;
	if (!msg || !*msg)
		msg = strerror(e);
	if (exc_type == PyExc_ValueError) {
		PyErr_Format(PyExc_ValueError, "%s: %s", what, msg);
		return NULL;
	}
	args = Py_BuildValue("(iN)", e, PyUnicode_FromFormat("%s: %s", what,
							   msg));
	if (args) {
		PyErr_SetObject(exc_type, args);
		Py_DECREF(args);
	}
	return NULL;
}

static int zone_init(TpyZone *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "shared", NULL };
	PyObject *name = Py_None;
	int shared = 0;
	struct tally_zone *z;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|Op:Zone", kwlist, &name,
					 &shared))
		return -1;
	if (self->zone) {
		PyErr_SetString(PyExc_RuntimeError, "Zone is already set up");
		return -1;
	}
	if (name == Py_None) {
		if (shared) {
			PyErr_SetString(PyExc_ValueError,
					"a shared zone needs a name");
			return -1;
		}
		Py_BEGIN_ALLOW_THREADS
		z = tally_zone_default();
		Py_END_ALLOW_THREADS
		if (!z) {
			tpy_raise(errno, "cannot create the default zone");
			return -1;
		}
	} else {
		struct tally_zone_opts o = { 0 };
		const char *n;

		if (!PyUnicode_Check(name)) {
			PyErr_SetString(PyExc_TypeError,
					"the zone's name must be a str");
			return -1;
		}
		n = PyUnicode_AsUTF8(name);
		if (!n)
			return -1;
		if (shared)
			o.flags |= TALLY_ZONE_SHARED;
		Py_BEGIN_ALLOW_THREADS
		z = tally_zone_create(n, &o);
		Py_END_ALLOW_THREADS
		if (!z) {
			tpy_raise(errno, "cannot create the zone");
			return -1;
		}
	}
	self->zone = z;
	Py_INCREF(name);
	self->name = name;
	return 0;
}

static void zone_dealloc(TpyZone *self)
{
	Py_XDECREF(self->name);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *zone_path(TpyZone *self, void *closure)
{
	(void)closure;
	if (!self->zone)
		Py_RETURN_NONE;
	return PyUnicode_DecodeFSDefault(tally_zone_path(self->zone));
}

/* The zone's name as readers see it (the header's zone_name): the
 * default zone's is the process name, or $TALLY_ZONE. */
static PyObject *zone_zone_name(TpyZone *self, void *closure)
{
	struct tally_seg_info info;
	struct tally_seg *s;
	const char *path;
	PyObject *r;
	int rc;

	(void)closure;
	if (!self->zone)
		Py_RETURN_NONE;
	path = tally_zone_path(self->zone);
	if (!*path)
		Py_RETURN_NONE;
	s = tally_seg_open(path, NULL);
	if (!s)
		return tpy_raise(errno, "cannot read the zone's own segment");
	rc = tally_seg_info(s, &info);
	if (rc < 0) {
		tally_seg_close(s);
		return tpy_raise(rc, "cannot read the zone's own segment");
	}
	r = PyUnicode_FromString(info.zone_name);
	tally_seg_close(s);
	return r;
}

static PyObject *zone_repr(TpyZone *self)
{
	return PyUnicode_FromFormat("<tally Zone %s>", self->zone ?
				    tally_zone_path(self->zone) : "(unset)");
}

static PyGetSetDef zone_getset[] = {
	{ "path", (getter)zone_path, NULL, "The zone's segment file.", NULL },
	{ "zone_name", (getter)zone_zone_name, NULL,
	  "The zone's name, as readers see it in the segment.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject TpyZone_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tally_metrics._native.Zone",
	.tp_basicsize = sizeof(TpyZone),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Zone(name=None, shared=False): the default zone, or a "
		  "zone of that name (shared=True: the shared zone every "
		  "process attaches by name).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)zone_init,
	.tp_dealloc = (destructor)zone_dealloc,
	.tp_repr = (reprfunc)zone_repr,
	.tp_getset = zone_getset,
};
