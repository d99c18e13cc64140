/*
 * native.h: what the files of tally_metrics._native share.
 *
 * The extension is a thin layer over libtally's public headers: zones
 * (zone.c), the series registered for one Python metric (family.c), the metric objects whose update methods do the adds
 * (metric.c), the reader (read.c), the exposition, written by
 * tally-exporter's writer (expose.c), and prometheus_client's hot
 * methods for its switch (promclient.c).  Every update is one of libtally's
 * adds or sets, so that a total is exact whether or not a GIL serialises
 * the callers.
 */
#ifndef TALLY_PY_NATIVE_H
#define TALLY_PY_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>

#include <tally/family.h>
#include <tally/metrics.h>
#include <tally/reader.h>
#include <tally/zone.h>

/* Python metric kinds. */
enum { TPY_COUNTER = 1, TPY_GAUGE = 2, TPY_HISTOGRAM = 3 };

/* --- zone.c ---------------------------------------------------------- */

typedef struct {
	PyObject_HEAD
	struct tally_zone *zone; /* never destroyed: zones live as long as
				    the process */
	PyObject *name;          /* the name asked for, or None */
} TpyZone;

extern PyTypeObject TpyZone_Type;

/* Raise an OSError (tally.TallyError) for -errno @rc with tally_errmsg(). */
PyObject *tpy_raise(int rc, const char *what);
extern PyObject *TpyError;

/* --- family.c -------------------------------------------------------- */

/*
 * The series of a Python metric, one metric record of the format: a
 * tally label family when the metric has labels (the children are found
 * by their values without a lock), or one series registered directly
 * when it has none.
 */
struct tpy_part {
	unsigned kind;  /* TALLY_FCOUNTER ... (family.c) */
	int family;     /* 1: .fam is a label family; 0: .one is the series */
	union {
		tally_fgauge_family f;
		tally_pgauge_family p;
		tally_fcounter_family fc;
		tally_chistogram_family ch;
		tally_summary_family sm;
		tally_family any;
	} fam;
	union {
		tally_fgauge f;
		tally_pgauge p;
		tally_fcounter fc;
		tally_chistogram ch;
		tally_metric any;
	} one;
	unsigned combine;  /* TALLY_PGAUGE: TALLY_COMBINE_* */
	int pid;           /* TALLY_PGAUGE without labels: the process that
			      registered .one (a forked child registers its
			      own), and what it registers it with */
	struct tally_zone *zone;
	const char *help, *unit;
	char *name;
};

typedef struct {
	PyObject_HEAD
	int kind;                /* TPY_COUNTER ... */
	unsigned nlabels;        /* label names of the series, pid included */
	char **label_names;
	char *help, *unit;
	struct tally_zone *zone; /* NULL: the default zone */
	PyObject *zone_obj;
	struct tpy_part main;    /* its series */
	unsigned nbounds;        /* histograms: upper bounds, +Inf last;
				    summaries: +Inf alone */
	double *bounds;
} TpyFamily;

extern PyTypeObject TpyFamily_Type;

/* The handle of @p's series for label values @values (nlabels of them;
 * ignored when @p is not a family); registers it on first use.  Returns
 * 0 or a negative errno, with *@h a handle that discards on error. */
int tpy_part_get(struct tpy_part *p, const char *const *values, unsigned n,
		 const tally_metric **h);
/* tally_metrics._native.claim(zone, name, definition) (family.c). */
PyObject *tpy_claim(PyObject *unused, PyObject *args, PyObject *kw);

/* --- metric.c -------------------------------------------------------- */

typedef struct {
	PyObject_HEAD
	PyObject *dict;         /* the subclass's attributes */
	PyObject *weakrefs;
	TpyFamily *fam;         /* NULL until _init_family() */
	PyObject *children;     /* dict: label values -> child (parents) */
	unsigned nuser;         /* label values the user gives */
	int bound;              /* 1: updates go to .h_* */
	const tally_metric *h_main;  /* the series: a fractional counter,
					a float or per-process gauge, an
					info, an enum, a classic histogram
					or a summary */
	const char *type_name;  /* "counter", "gauge", "histogram" */
} TpyMetric;

extern PyTypeObject TpyCounter_Type, TpyGauge_Type, TpyHistogram_Type;

/* The most states an Enum has (tally_metrics._native.enum_set). */
#define TPY_ENUM_STATES_MAX 1024
/* tally_metrics._native.enum_set(states, index). */
PyObject *tpy_enum_set(PyObject *unused, PyObject *args);

/* --- read.c ---------------------------------------------------------- */

PyObject *tpy_read(PyObject *self, PyObject *args, PyObject *kw);
PyObject *tpy_zone_info(PyObject *self, PyObject *arg);
/* Base units (tally/reader.h, tally_unit_*) and tally's bucket edges. */
PyObject *tpy_unit_value(PyObject *self, PyObject *args);
PyObject *tpy_unit_name(PyObject *self, PyObject *args);
PyObject *tpy_bucket_upper(PyObject *self, PyObject *args);
/* (path, why) of a file the reader skipped, whatever bytes they hold. */
PyObject *tpy_skipped(const char *path, const char *why);

/* --- expose.c -------------------------------------------------------- */

PyObject *tpy_expose(PyObject *self, PyObject *args, PyObject *kw);

/* --- promclient.c ---------------------------------------------------- */

/* tally_metrics._native.promclient_methods(): prometheus_client's hot
 * methods for the switch. */
PyObject *tpy_promclient_methods(PyObject *unused, PyObject *const *args,
				 Py_ssize_t nargs);

#endif /* TALLY_PY_NATIVE_H */
