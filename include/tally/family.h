/*
 * tally/family.h: series whose label values are known only at run time.
 *
 * A label family (tally_family, "family" for short in this header) is a
 * metric description (tally/metrics.h) and the names of some of its
 * labels; each set of values of those labels (a status code,
 * a route) is one series of the family, its child.  The child is
 * registered the first time its values are asked for, and found without
 * a lock every time after that:
 *
 *	static const char *const names[] = { "method", "code" };
 *	tally_counter_family requests;
 *	const tally_counter *c;
 *
 *	tally_counter_family_register(NULL, &desc, names, 2, &requests);
 *	...
 *	tally_counter_family_get(&requests, (const char *[]){ "GET", "200" },
 *				 2, &c);
 *	tally_counter_inc(c);
 *
 * The family's description may hold labels of its own (desc.labels),
 * the same for every child.  Children are series like any other:
 * registering one is get-or-create (tally_counter_register), so that two
 * families of one name in a process, or a family and a series
 * registered by hand, share their series and each holds a reference.
 *
 * A family lives in this process only: the segment holds its series and
 * their metric's record as for any series (docs/FORMAT.md), nothing of
 * the family itself.  (Prometheus calls the name with all its series a
 * "metric family"; tally calls that a metric.)
 *
 * One family type per kind, so that a child of one kind cannot be used
 * as another's.  Each holds a tally_family, for tally_family_remove().
 */
#ifndef TALLY_FAMILY_H
#define TALLY_FAMILY_H

#include "tally/metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tally__ftable; /* this process's table of children (family.c) */

typedef struct tally_family {
	struct tally__ftable *table;
} tally_family;

typedef struct tally_counter_family {
	tally_family family;
} tally_counter_family;
typedef struct tally_gauge_family {
	tally_family family;
} tally_gauge_family;
typedef struct tally_setgauge_family {
	tally_family family;
} tally_setgauge_family;
typedef struct tally_histogram_family {
	tally_family family;
} tally_histogram_family;
typedef struct tally_fgauge_family {
	tally_family family;
} tally_fgauge_family;
typedef struct tally_pgauge_family {
	tally_family family;
} tally_pgauge_family;
typedef struct tally_fcounter_family {
	tally_family family;
} tally_fcounter_family;
typedef struct tally_chistogram_family {
	tally_family family;
} tally_chistogram_family;
typedef struct tally_summary_family {
	tally_family family;
} tally_summary_family;

/*
 * tally_counter_family_register, tally_gauge_family_register,
 * tally_setgauge_family_register, tally_histogram_family_register,
 * tally_fgauge_family_register: make a
 * family of the series described by @d in @z (NULL: the default zone),
 * whose children add the labels @label_names[0 .. @n - 1] to @d's own.
 * @d is copied; its metric record is made (or found) in the zone at
 * once.  A definition that differs from the zone's is taken as
 * tally_counter_register() takes it: a new help text or unit, or a new
 * generation of the name; the family makes all its children in the
 * generation it was registered in, also once a newer one exists (a
 * process of the old version, during a rolling deploy, runs on).
 * Return: 0, or a negative errno (tally_errmsg() says more):
 *   -EINVAL   NULL @d or family, @n of 0 or NULL names, a label name that
 *             breaks the rules of tally_label, given twice (here or in
 *             @d->labels), and every -EINVAL of tally_counter_register()
 *             about @d;
 *   -E2BIG    more labels than TALLY_LABELS_MAX can hold, or a string of
 *             @d longer than its limit;
 *   -ENOMEM   no memory for the table;
 *   and the errors of tally_zone_default().
 * Whatever the error, the family (when not NULL) is one whose
 * tally_*_family_get() gives handles that discard their updates, and
 * tally_family_remove() accepts it.
 * MT-safe; not async-signal-safe.
 */
TALLY_API int tally_counter_family_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const char *const *label_names, unsigned n,
			tally_counter_family *f);
TALLY_API int tally_gauge_family_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const char *const *label_names, unsigned n,
			tally_gauge_family *f);
TALLY_API int tally_setgauge_family_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const char *const *label_names, unsigned n,
			tally_setgauge_family *f);
TALLY_API int tally_histogram_family_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const char *const *label_names, unsigned n,
			tally_histogram_family *f);
TALLY_API int tally_fgauge_family_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const char *const *label_names, unsigned n,
			tally_fgauge_family *f);
/*
 * tally_fgauge_family_register also makes the family of an info metric
 * (tally_info_register(), tally/metrics.h) whose children add the pairs'
 * names @label_names, with @d->kind TALLY_INFO, or of an enum metric
 * (tally_enum_register()) with @d->kind TALLY_ENUM, one of whose label
 * names, here or in @d, is the metric's name (the state): with their
 * errors (-EPROTONOSUPPORT in a zone older than format 2.6, made by
 * tally 0.3).  Their children are float gauges
 * (tally_fgauge_family_get()): the caller sets an info child to 1 or 0
 * (the get does not set it to 1), and changes an enum's state with
 * tally_enum_set() over the children of every state of one label set.
 *
 * tally_pgauge_family_register: a family of per-process gauges
 * (tally_pgauge_register(), tally/metrics.h), combined as @combine says;
 * as the others, and -EINVAL for a label named "pid" (fixed or variable)
 * or an unknown @combine.  In a child made by fork(), such a family
 * forgets the children its parent had: each process's are its own.
 */
/* tally_fcounter_family_register: a family of fractional counters
 * (tally_fcounter_register(), tally/metrics.h); as the others. */
TALLY_API int tally_fcounter_family_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const char *const *label_names, unsigned n,
			tally_fcounter_family *f);
/* tally_chistogram_family_register: a family of classic histograms
 * (tally_chistogram_register(), tally/metrics.h) whose children all have
 * the bounds @bounds[0 .. @nbounds - 1]; as the others, with the
 * errors of tally_chistogram_register() for the bounds. */
TALLY_API int tally_chistogram_family_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const double *bounds, unsigned nbounds,
			const char *const *label_names, unsigned n,
			tally_chistogram_family *f);
/* tally_summary_family_register: a family of summaries
 * (tally_summary_register(), tally/metrics.h); as the others. */
TALLY_API int tally_summary_family_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const char *const *label_names, unsigned n,
			tally_summary_family *f);
TALLY_API int tally_pgauge_family_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const char *const *label_names, unsigned n,
			unsigned combine, tally_pgauge_family *f);

/*
 * tally_counter_family_get, tally_gauge_family_get,
 * tally_setgauge_family_get, tally_histogram_family_get,
 * tally_fgauge_family_get, tally_pgauge_family_get,
 * tally_fcounter_family_get, tally_chistogram_family_get,
 * tally_summary_family_get: the child of
 * @f whose label values are @values[0 .. @n - 1] (in the order of the
 * family's label names), registered first if this process has not
 * asked for it yet; *@c points at its handle, which stays valid until
 * tally_family_remove().  A child this process knows is found without a
 * lock, allocation or system call (tens of nanoseconds: a hash of the
 * values and a comparison); a new one takes the family's lock and
 * registers the series (tally_counter_register()).
 * Return: 0, or a negative errno (tally_errmsg() says more):
 *   -EINVAL   NULL @values or @c, a NULL value, @n other than the
 *             family's number of label names, a value that is not
 *             UTF-8, or a family whose registration failed;
 *   -E2BIG    values too long for TALLY_LABELS_MAX;
 *   -ENOMEM   no memory for the child;
 *   and the errors of tally_counter_register().
 * Whatever the error, *@c (when @c is not NULL) points at a handle whose
 * updates go nowhere, so that a service runs on; a registration that
 * failed is counted in the zone (tally_seg_info(): register_failed) and
 * tried again at the next call with those values.
 * MT-safe, and safe after fork(): a child process finds the children its
 * parent had (the same series, since the zone is shared).  Not
 * async-signal-safe (a new child takes a lock).
 */
TALLY_API int tally_counter_family_get(const tally_counter_family *f,
			const char *const *values, unsigned n,
			const tally_counter **c);
TALLY_API int tally_gauge_family_get(const tally_gauge_family *f,
			const char *const *values, unsigned n,
			const tally_gauge **g);
TALLY_API int tally_setgauge_family_get(const tally_setgauge_family *f,
			const char *const *values, unsigned n,
			const tally_setgauge **g);
TALLY_API int tally_histogram_family_get(const tally_histogram_family *f,
			const char *const *values, unsigned n,
			const tally_histogram **h);
TALLY_API int tally_fgauge_family_get(const tally_fgauge_family *f,
			const char *const *values, unsigned n,
			const tally_fgauge **g);
TALLY_API int tally_pgauge_family_get(const tally_pgauge_family *f,
			const char *const *values, unsigned n,
			const tally_pgauge **g);
TALLY_API int tally_fcounter_family_get(const tally_fcounter_family *f,
			const char *const *values, unsigned n,
			const tally_fcounter **c);
TALLY_API int tally_chistogram_family_get(const tally_chistogram_family *f,
			const char *const *values, unsigned n,
			const tally_chistogram **h);
TALLY_API int tally_summary_family_get(const tally_summary_family *f,
			const char *const *values, unsigned n,
			const tally_summary **s);

/*
 * tally_family_remove: remove the family (pass &family.family): each of
 * its children is removed as by tally_metric_remove(), which retires the
 * series unless another registration still holds it, and the table is
 * freed.  No thread may call tally_*_family_get() on the family, or use
 * a handle it gave, once this is called.  Removing a family in a forked
 * child removes the series its parent uses too: remove a family in one
 * process only.
 * Return: 0, or -EINVAL (NULL, a family already removed, or one whose
 * registration failed).
 * MT-safe with respect to other families; not async-signal-safe.
 */
TALLY_API int tally_family_remove(tally_family *f);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_FAMILY_H */
