/*
 * metrics.c: registering, redefining, removing and fetching named
 * series: the public calls, put together from the table's steps
 * (labels.c, define.c, index.c, records.c), and the out-of-line forms of
 * the update calls.
 *
 * Registration is get-or-create: a series registered again with the same
 * definition is the same series, and its record counts the registrations
 * (refs, which readers ignore); each removal takes one away, and the last
 * one retires the record.
 *
 * Order of a removal: the record is retired (seq odd, state free, seq
 * even) before its block is freed, so that a reader never reports the
 * values of a reused block under the old name.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics/table.h"
#include "tally/metrics.h"

/* A definition (tally__metric_define, redefine) makes its record or a
 * new generation, and its text is the newest. */
static const struct tally__rec_opts defining = { .create = true,
						 .retext = true };

_Static_assert(TALLY_COUNTER == TALLY__KIND_COUNTER &&
	       TALLY_HISTOGRAM == TALLY__KIND_HISTOGRAM,
	       "kinds agree with the format");
_Static_assert(TALLY_NAME_MAX + 1 == TALLY__NAME_MAX &&
	       TALLY_LABELS_MAX == TALLY__LABEL_BYTES_MAX &&
	       TALLY_LABEL_PAIRS_MAX == TALLY__LABEL_PAIRS_MAX &&
	       TALLY_HELP_MAX + 1 == TALLY__HELP_MAX &&
	       TALLY_UNIT_MAX + 1 == TALLY__UNIT_MAX,
	       "limits agree with the format");

_Static_assert(sizeof(tally_counter) == sizeof(tally_metric) &&
	       sizeof(tally_gauge) == sizeof(tally_metric) &&
	       sizeof(tally_setgauge) == sizeof(tally_metric) &&
	       sizeof(tally_histogram) == sizeof(tally_metric) &&
	       sizeof(tally_fgauge) == sizeof(tally_metric),
	       "a kind's handle is a tally_metric and nothing more");

void (tally_counter_add)(const tally_counter *c, int64_t v)
{
	tally__counter_add(c, v);
}

void (tally_gauge_add)(const tally_gauge *g, int64_t v)
{
	tally__gauge_add(g, v);
}

void (tally_setgauge_set)(const tally_setgauge *g, int64_t v)
{
	tally__setgauge_set(g, v);
}

void (tally_setgauge_add)(const tally_setgauge *g, int64_t v)
{
	tally__setgauge_add(g, v);
}

void (tally_histogram_observe)(const tally_histogram *h, uint64_t v)
{
	tally__histogram_observe(h, v);
}

void (tally_fgauge_set)(const tally_fgauge *g, double v)
{
	tally__fgauge_set(g, v);
}

void (tally_fgauge_add)(const tally_fgauge *g, double v)
{
	tally__fgauge_add(g, v);
}

/*
 * A registration failed: @m becomes a handle whose updates go nowhere
 * (discard.c), so that the service runs on without the series, and the
 * zone (when there is one) counts the failure for its readers.  errno and
 * the message stay those of the failure.
 */
void tally__metric_discard(unsigned kind, tally_metric *m)
{
	memset(m, 0, sizeof(*m));
	m->block = tally__discard_block();
	m->kind = (uint8_t)kind;
	m->sub_bits = 1; /* a histogram's observations: slots 1 .. 4 */
	m->max_bits = 2;
}

int tally__metric_failed(struct tally_zone *z, unsigned kind,
			 tally_metric *m, int rc)
{
	tally__metric_discard(kind, m);
	if (!z)
		z = tally__zone_default_if_any();
	if (z)
		atomic_fetch_add_explicit(&z->hdr->register_failed, 1,
					  memory_order_relaxed);
	errno = -rc;
	return rc;
}

/* What a handle of series @idx holds. */
static void fill_handle(tally_metric *m, struct tally_zone *z, uint32_t idx,
			const struct tally__plan *p)
{
	struct tally__series *s = &series(z)[idx];

	m->block = (tally_block *)((char *)z->hdr + s->slot_off +
				   (p->mode & 3u));
	m->zone = z;
	m->series = idx;
	m->seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
	m->kind = (uint8_t)(p->type == TALLY__TYPE_PGAUGE ? TALLY_PGAUGE :
			    p->type == TALLY__TYPE_FCOUNTER ? TALLY_FCOUNTER :
			    p->type == TALLY__TYPE_CHISTO ? TALLY_CHISTOGRAM :
			    p->vtype == TALLY__VT_FLOAT64 ? TALLY_FGAUGE :
			    p->kind);
	m->sub_bits = (uint8_t)(p->type == TALLY__TYPE_PGAUGE ? p->combine :
				p->sub_bits);
	m->max_bits = (uint8_t)p->max_bits;
}

/*
 * Under the metrics lock: when the series of @p exists, take one more
 * reference to it, fill @m and return 1; else 0 and the index bucket the
 * new series goes to.  The metric record's definition is checked first, so
 * that a conflicting one is refused either way; a new record is made only
 * when @create (else 0: no such series).
 */
static int find_and_ref(struct tally_zone *z, const char *name,
			struct tally__plan *p, tally_metric *m,
			uint32_t *mrec, uint32_t *bucket, int create,
			uint32_t pin)
{
	/* A label family's own generation keeps its text as it was. */
	const struct tally__rec_opts o = { .pin = pin, .create = create,
					   .retext = !pin };
	struct tally__series *s;
	uint32_t idx = 0;
	int rc;

	if ((rc = tally__metric_rec_get(z, name, p, &o, mrec)) < 0)
		return rc == -ENOENT ? 0 : rc;
	if (!tally__series_find(z, *mrec, p, bucket, &idx))
		return 0;
	s = &series(z)[idx];
	if (s->refs == UINT32_MAX)
		return tally__fail(EOVERFLOW, "series %s is registered %u "
				   "times already, the most it can be", name,
				   UINT32_MAX);
	/* Outside the seq: readers ignore refs (FORMAT.md). */
	s->refs++;
	fill_handle(m, z, idx, p);
	return 1;
}

/*
 * Get or create, under one lock: the block is allocated first (the pool
 * lock is never taken under the metrics lock) and goes back when the
 * series turns out to exist.  When the allocation fails, the series may
 * still exist (a full zone still hands out the series it holds): it is
 * looked up without making anything, and the allocation's error stands
 * only if it is not there.
 */
int tally__metric_register(struct tally_zone *z,
			   const struct tally_metric_desc *d, unsigned kind,
			   tally_metric *m)
{
	return tally__metric_register_in(z, d, kind, m, 0);
}

/* What a typed registration adds to its description: a per-process
 * gauge's combine mode, a classic histogram's bounds. */
struct typed_extra {
	unsigned combine;
	const double *bounds;
	unsigned nbounds;
	unsigned summary;
};

static int register_combine(struct tally_zone *z,
			    const struct tally_metric_desc *d, unsigned kind,
			    tally_metric *m, uint32_t pin,
			    const struct typed_extra *x);

/* Info and enum metrics in any zone of format 2.6 or later: readers of
 * 2.6 and 2.7 skip their series as a type they do not know, so nothing
 * of them is shown wrong there, and a 2.8 reader shows them.  A zone
 * older than 2.6 was made by tally 0.3, whose readers would take their
 * records for float gauges'; it cannot hold them. */
static int info_enum_room(struct tally_zone *z, const struct tally__plan *p,
			  const char *name)
{
	if ((p->type != TALLY__TYPE_INFO && p->type != TALLY__TYPE_ENUM) ||
	    z->hdr->minor >= TALLY__FMT_MINOR_TYPES)
		return 0;
	return tally__fail(EPROTONOSUPPORT, "%.60s: zone file %s was made by "
			   "tally 0.3 (format 2.%u), which cannot hold an %s "
			   "metric; stop the zone's processes and remove the "
			   "file, or run them all with tally 0.4", name,
			   zone_file(z), (unsigned)z->hdr->minor,
			   p->type == TALLY__TYPE_INFO ? "info" : "enum");
}

int tally__metric_register_in(struct tally_zone *z,
			      const struct tally_metric_desc *d, unsigned kind,
			      tally_metric *m, uint32_t pin)
{
	return register_combine(z, d, kind, m, pin, NULL);
}

static int register_combine(struct tally_zone *z,
			    const struct tally_metric_desc *d, unsigned kind,
			    tally_metric *m, uint32_t pin,
			    const struct typed_extra *x)
{
	struct tally_metric_desc typed;
	struct tally__plan p;
	tally_block *b;
	uint32_t mrec = 0, idx = 0, bucket = 0;
	uint32_t ext[TALLY__LABELS_PACKED_MAX / TALLY__EXT_DATA + 1];
	int rc, alloc_rc = 0;

	tally__ok();
	if (!m)
		return tally__fail(EINVAL, "register: NULL handle");
	if (!d)
		return tally__metric_failed(z, kind, m, tally__fail(EINVAL,
					    "register: NULL description"));
	if (d->kind && d->kind != kind)
		return tally__metric_failed(z, kind, m, tally__fail(EINVAL,
				"%s: the description's kind is %u, this "
				"function registers kind %u",
				d->name ? d->name : "?", d->kind, kind));
	typed = *d;
	typed.kind = kind;
	d = &typed;
	if ((rc = tally__plan_make(d, &p)) < 0)
		return tally__metric_failed(z, kind, m, rc);
	if (x) {
		p.combine = x->combine;
		p.summary = x->summary;
		p.nbounds = x->nbounds;
		if (x->nbounds)
			memcpy(p.bounds, x->bounds,
			       x->nbounds * sizeof(double));
		if (p.type == TALLY__TYPE_CHISTO)
			p.nslots = 3 + x->nbounds;
	}
	if (!z && !(z = tally_zone_default()))
		return tally__metric_failed(NULL, kind, m, -errno);
	if ((rc = info_enum_room(z, &p, d->name)) < 0)
		return tally__metric_failed(z, kind, m, rc);
	if (!(b = tally_block_alloc(z, p.nslots, p.mode)))
		alloc_rc = -errno;

	if ((rc = tally__metrics_lock(z)) < 0) {
		if (b) {
			char failed = tally__err_set;

			tally_block_free(z, b);
			tally__err_set = failed; /* the lock's message */
		}
		return tally__metric_failed(z, kind, m, rc);
	}
	if ((b && (rc = tally__index_grow(z)) < 0) ||
	    (rc = find_and_ref(z, d->name, &p, m, &mrec, &bucket, b != NULL,
			       pin)) != 0 ||
	    (rc = b ? tally__series_take(z, &p, ext, &idx) : alloc_rc) < 0) {
		tally__metrics_unlock(z);
		if (b) {
			char failed = tally__err_set;

			tally_block_free(z, b);
			tally__err_set = failed; /* the failure's message */
		}
		if (rc != 1)
			return tally__metric_failed(z, kind, m, rc);
		tally__ok(); /* found, whatever the allocation said */
		return 0;
	}
	tally__series_publish(z, idx, mrec, &p, d->nlabels, b, bucket, ext);
	fill_handle(m, z, idx, &p);
	tally__metrics_unlock(z);
	return 0;
}

/* Check @d and make its metric record in @z, as registering a series of
 * it would (family.c: a label family is checked before any of its
 * series); its
 * record index + 1 in *@rec, for tally__metric_register_in(). */
int tally__metric_define(struct tally_zone *z,
			 const struct tally_metric_desc *d, unsigned combine,
			 const double *bounds, unsigned nbounds, uint32_t *rec)
{
	struct tally__plan p;
	uint32_t mrec;
	int rc;

	if ((rc = tally__plan_make(d, &p)) < 0)
		return rc;
	p.combine = combine;
	if (p.type == TALLY__TYPE_CHISTO) {
		p.combine = 0;
		p.summary = combine;
		p.nbounds = nbounds;
		if (nbounds)
			memcpy(p.bounds, bounds, nbounds * sizeof(double));
		p.nslots = 3 + nbounds;
	}
	if ((rc = info_enum_room(z, &p, d->name)) < 0)
		return rc;
	if (p.type && z->hdr->minor < TALLY__FMT_MINOR_TYPES)
		return tally__fail(EPROTONOSUPPORT, "%.60s: zone file %s was "
				   "made by a libtally older than format 2.6, "
				   "whose readers would not show a per-process "
				   "gauge", d->name, zone_file(z));
	if (p.nexts && z->hdr->minor < TALLY__FMT_MINOR_LONG_LABELS)
		return tally__fail(E2BIG, "the labels of %.60s take %zu bytes, "
				   "more than a zone made by a libtally older "
				   "than format 2.5 holds: %u bytes and %u "
				   "pairs", d->name, p.labels_len,
				   TALLY__LABELS_INLINE,
				   TALLY__LABELS_INLINE_PAIRS);
	if ((rc = tally__metrics_lock(z)) < 0)
		return rc;
	rc = tally__metric_rec_get(z, d->name, &p, &defining, &mrec);
	tally__metrics_unlock(z);
	if (rc == 0 && rec)
		*rec = mrec + 1;
	return rc;
}

static int redefine(struct tally_zone *z, const struct tally_metric_desc *d,
		    unsigned combine, const double *bounds, unsigned nbounds,
		    const char *const *names, unsigned n);

/* A summary is a classic histogram of no bounds, flagged (layout.h). */
#define SUMMARY_FLAG 0x100u

int tally_metric_redefine(struct tally_zone *z,
			  const struct tally_metric_desc *d,
			  const char *const *names, unsigned n)
{
	tally__ok();
	if (d && d->kind == TALLY_CHISTOGRAM)
		return tally__fail(EINVAL, "tally_metric_redefine: a classic "
				   "histogram is redefined with "
				   "tally_chistogram_redefine");
	if (d && d->kind == TALLY_PGAUGE)
		return tally__fail(EINVAL, "tally_metric_redefine: a "
				   "per-process gauge is redefined with "
				   "tally_pgauge_redefine");
	return redefine(z, d, 0, NULL, 0, names, n);
}

/* The redefinition of a typed metric (@what, for the message), which
 * only a zone of 2.6 or later holds. */
static int redefine_typed(struct tally_zone *z,
			  const struct tally_metric_desc *typed,
			  const char *what, unsigned combine,
			  const double *bounds, unsigned nbounds,
			  const char *const *names, unsigned n)
{
	if (!z && !(z = tally_zone_default()))
		return -errno;
	if (z->hdr->minor < TALLY__FMT_MINOR_TYPES)
		return tally__fail(EPROTONOSUPPORT, "%.60s: zone file %s was "
				   "made by a libtally older than format 2.6, "
				   "whose readers would not show a %s",
				   typed->name ? typed->name : "?",
				   zone_file(z), what);
	return redefine(z, typed, combine, bounds, nbounds, names, n);
}

int tally_chistogram_redefine(struct tally_zone *z,
			      const struct tally_metric_desc *d,
			      const double *bounds, unsigned nbounds,
			      const char *const *names, unsigned n)
{
	struct tally_metric_desc typed;
	int rc;

	tally__ok();
	if (!d)
		return tally__fail(EINVAL, "tally_chistogram_redefine: NULL "
				   "argument");
	typed = *d;
	typed.kind = TALLY_CHISTOGRAM;
	if ((rc = tally__chistogram_check(&typed, bounds, &nbounds)) < 0)
		return rc;
	return redefine_typed(z, &typed, "classic histogram", 0, bounds,
			      nbounds, names, n);
}

int tally_summary_redefine(struct tally_zone *z,
			   const struct tally_metric_desc *d,
			   const char *const *names, unsigned n)
{
	struct tally_metric_desc typed;
	unsigned none = 0;
	int rc;

	tally__ok();
	if (!d)
		return tally__fail(EINVAL, "tally_summary_redefine: NULL "
				   "argument");
	typed = *d;
	typed.kind = TALLY_CHISTOGRAM;
	if ((rc = tally__chistogram_check(&typed, NULL, &none)) < 0)
		return rc;
	return redefine_typed(z, &typed, "summary", SUMMARY_FLAG, NULL, 0,
			      names, n);
}

int tally_pgauge_redefine(struct tally_zone *z,
			  const struct tally_metric_desc *d, unsigned combine,
			  const char *const *names, unsigned n)
{
	struct tally_metric_desc typed;

	tally__ok();
	if (!d)
		return tally__fail(EINVAL, "tally_pgauge_redefine: NULL "
				   "argument");
	if (combine > TALLY_COMBINE_LIVEMOSTRECENT)
		return tally__fail(EINVAL, "%.60s: unknown combine mode %u",
				   d->name ? d->name : "?", combine);
	typed = *d;
	typed.kind = TALLY_PGAUGE;
	return redefine_typed(z, &typed, "per-process gauge", combine, NULL,
			      0, names, n);
}

static int redefine(struct tally_zone *z, const struct tally_metric_desc *d,
		    unsigned combine, const double *bounds, unsigned nbounds,
		    const char *const *names, unsigned n)
{
	struct tally_metric_desc typed;
	struct tally_label state;
	struct tally__plan p;
	uint32_t mrec, found;
	uint64_t before;
	int rc, changed = 0;

	if (!d || (n && !names))
		return tally__fail(EINVAL, "tally_metric_redefine: NULL "
				   "argument");
	typed = *d;
	if (!typed.kind)
		typed.kind = TALLY_COUNTER;
	if (typed.kind == TALLY_ENUM && !typed.nlabels) {
		/* The definition is the record's, whatever the states: the
		 * plan checks an enum's series, which have a state label. */
		state = (struct tally_label){ typed.name, "" };
		typed.labels = &state;
		typed.nlabels = 1;
	}
	if ((rc = tally__plan_make(&typed, &p)) < 0)
		return rc;
	p.combine = combine & ~SUMMARY_FLAG;
	p.summary = !!(combine & SUMMARY_FLAG);
	if (p.type == TALLY__TYPE_CHISTO) {
		p.nbounds = nbounds;
		if (nbounds)
			memcpy(p.bounds, bounds, nbounds * sizeof(double));
		p.nslots = 3 + nbounds;
	}
	for (unsigned i = 0; i < n; i++)
		if (!names[i])
			return tally__fail(EINVAL, "tally_metric_redefine: name "
					   "%u is NULL", i);
	if (!z && !(z = tally_zone_default()))
		return -errno;
	if ((rc = info_enum_room(z, &p, d->name)) < 0)
		return rc;
	if ((rc = tally__metrics_lock(z)) < 0)
		return rc;
	tally__metric_rec_find(z, d->name, &found);
	if (found) {
		const struct tally__metric_rec *f = &metric_recs(z)[found - 1];
		char change[96];

		tally__describe_change(f, &p, change, sizeof(change));
		changed = change[0] || strcmp(f->help, p.help) ||
			  strcmp(f->unit, p.unit) ||
			  (f->flags & TALLY__METRIC_SUPERSEDED);
	}
	before = atomic_load_explicit(&z->hdr->redefinitions,
				      memory_order_relaxed);
	rc = tally__metric_rec_get(z, d->name, &p, &defining, &mrec);
	if (rc == 0 && changed) {
		for (unsigned i = 0; i < n; i++) {
			tally__metric_rec_find(z, names[i], &found);
			if (found)
				tally__metric_rec_flag(z, &metric_recs(z)[found - 1],
					    TALLY__METRIC_SUPERSEDED |
					    TALLY__METRIC_RETIRED, 1);
		}
		/* Counted once, also when @d itself made a generation. */
		if (atomic_load_explicit(&z->hdr->redefinitions,
					 memory_order_relaxed) == before)
			atomic_fetch_add_explicit(&z->hdr->redefinitions, 1,
						  memory_order_relaxed);
		rc = 1;
	}
	tally__metrics_unlock(z);
	return rc;
}

int tally_counter_register(struct tally_zone *z,
			   const struct tally_metric_desc *d, tally_counter *c)
{
	return tally__metric_register(z, d, TALLY_COUNTER, c ? &c->metric : NULL);
}

int tally_gauge_register(struct tally_zone *z,
			 const struct tally_metric_desc *d, tally_gauge *g)
{
	return tally__metric_register(z, d, TALLY_GAUGE, g ? &g->metric : NULL);
}

int tally_setgauge_register(struct tally_zone *z,
			    const struct tally_metric_desc *d,
			    tally_setgauge *g)
{
	return tally__metric_register(z, d, TALLY_GAUGE_SET, g ? &g->metric : NULL);
}

int tally_histogram_register(struct tally_zone *z,
			     const struct tally_metric_desc *d,
			     tally_histogram *h)
{
	return tally__metric_register(z, d, TALLY_HISTOGRAM, h ? &h->metric : NULL);
}

int tally_fgauge_register(struct tally_zone *z,
			  const struct tally_metric_desc *d, tally_fgauge *g)
{
	return tally__metric_register(z, d, TALLY_FGAUGE, g ? &g->metric : NULL);
}

int tally_fcounter_register(struct tally_zone *z,
			    const struct tally_metric_desc *d,
			    tally_fcounter *c)
{
	int rc;

	tally__ok();
	if (!c)
		return tally__fail(EINVAL, "register: NULL handle");
	if (!z && !(z = tally_zone_default()))
		return tally__metric_failed(NULL, TALLY_FCOUNTER, &c->metric,
					    -errno);
	if (z->hdr->minor < TALLY__FMT_MINOR_TYPES)
		return tally__metric_failed(z, TALLY_FCOUNTER, &c->metric,
				tally__fail(EPROTONOSUPPORT, "%.60s: zone "
				"file %s was made by a libtally older than "
				"format 2.6, whose readers would not show a "
				"fractional counter", d && d->name ? d->name :
				"?", zone_file(z)));
	rc = tally__metric_register(z, d, TALLY_FCOUNTER, &c->metric);
	return rc;
}

void (tally_fcounter_add)(const tally_fcounter *c, double v)
{
	tally__fcounter_add(c, v);
}

int tally_fcounter_fetch(const tally_fcounter *c, double *value)
{
	int64_t whole, frac;
	int rc;

	tally__ok();
	if (!c || !c->metric.block || !value ||
	    c->metric.kind != TALLY_FCOUNTER)
		return tally__fail(EINVAL, "tally_fcounter_fetch: NULL "
				   "argument or not a TALLY_FCOUNTER");
	if (tally__series_gone(&c->metric))
		return tally__fail(EINVAL, "tally_fcounter_fetch: the series "
				   "was removed (through a copy of this "
				   "handle)");
	if ((rc = tally_block_fetch(c->metric.block, 1, &frac)) < 0 ||
	    (rc = tally_block_fetch(c->metric.block, 0, &whole)) < 0)
		return rc;
	*value = (double)whole +
		 (double)((uint64_t)frac / TALLY__FRAC_SCALE) +
		 (double)((uint64_t)frac % TALLY__FRAC_SCALE) / 1e9;
	return 0;
}

int tally__chistogram_check(const struct tally_metric_desc *d,
			    const double *bounds, unsigned *nbounds)
{
	const char *name = d && d->name ? d->name : "?";
	unsigned n = *nbounds;
	int rc;

	/* prometheus_client's buckets end with +Inf, which every classic
	 * histogram of the format has. */
	if (n && bounds && bounds[n - 1] == __builtin_inf())
		*nbounds = --n;
	if (n && !bounds)
		rc = tally__fail(EINVAL, "%.60s: NULL bucket bounds", name);
	else if (n > TALLY_CHISTOGRAM_BOUNDS_MAX)
		rc = tally__fail(E2BIG, "%.60s: %u bucket bounds, more than "
				 "the %u a classic histogram takes", name,
				 n, TALLY_CHISTOGRAM_BOUNDS_MAX);
	else
		rc = 0;
	for (unsigned i = 0; rc == 0 && i < n; i++)
		if (!__builtin_isfinite(bounds[i]) ||
		    (i && !(bounds[i] > bounds[i - 1])))
			rc = tally__fail(EINVAL, "%.60s: bucket bound %u (%g) "
					 "is not finite and above the one "
					 "before", name, i, bounds[i]);
	return rc;
}

int tally_chistogram_register(struct tally_zone *z,
			      const struct tally_metric_desc *d,
			      const double *bounds, unsigned nbounds,
			      tally_chistogram *h)
{
	int rc;

	tally__ok();
	if (!h)
		return tally__fail(EINVAL, "register: NULL handle");
	rc = tally__chistogram_check(d, bounds, &nbounds);
	if (rc < 0) {
		h->bounds = NULL;
		h->nbounds = 0;
		return tally__metric_failed(z, TALLY_CHISTOGRAM, &h->metric,
					    rc);
	}
	return tally__chistogram_register_in(z, d, bounds, nbounds, h, 0, 0);
}

int tally__chistogram_register_in(struct tally_zone *z,
				  const struct tally_metric_desc *d,
				  const double *bounds, unsigned nbounds,
				  tally_chistogram *h, uint32_t pin,
				  unsigned summary)
{
	struct typed_extra x = { .bounds = bounds, .nbounds = nbounds,
				 .summary = summary };
	const char *name = d && d->name ? d->name : "?";
	int rc;

	h->bounds = NULL;
	h->nbounds = 0;
	if (!z && !(z = tally_zone_default()))
		return tally__metric_failed(NULL, TALLY_CHISTOGRAM,
					    &h->metric, -errno);
	if (z->hdr->minor < TALLY__FMT_MINOR_TYPES)
		return tally__metric_failed(z, TALLY_CHISTOGRAM, &h->metric,
				tally__fail(EPROTONOSUPPORT, "%.60s: zone "
				"file %s was made by a libtally older than "
				"format 2.6, whose readers would not show a "
				"classic histogram", name, zone_file(z)));
	rc = register_combine(z, d, TALLY_CHISTOGRAM, &h->metric, pin, &x);
	if (rc == 0) {
		/* The record the series was made in holds the bounds for as
		 * long as the zone is mapped. */
		const struct tally__metric_rec *f =
			&metric_recs(z)[series(z)[h->metric.series].metric];

		h->bounds = tally__metric_bounds(f)->bound;
		h->nbounds = tally__metric_tail(f)->nbounds;
	}
	return rc;
}

void (tally_chistogram_observe)(const tally_chistogram *h, double v)
{
	tally__chistogram_observe(h, v);
}

int tally_summary_register(struct tally_zone *z,
			   const struct tally_metric_desc *d, tally_summary *s)
{
	struct tally_metric_desc typed;
	unsigned none = 0;
	int rc;

	tally__ok();
	if (!s)
		return tally__fail(EINVAL, "register: NULL handle");
	/* A summary has no bounds: its one bucket is the count. */
	s->bounds = NULL;
	s->nbounds = 0;
	if (!d || (d->kind && d->kind != TALLY_SUMMARY))
		return tally__metric_failed(z, TALLY_CHISTOGRAM, &s->metric,
				tally__fail(EINVAL, "%s: not a summary's "
					    "description", d && d->name ?
					    d->name : "?"));
	typed = *d;
	typed.kind = TALLY_CHISTOGRAM;
	if ((rc = tally__chistogram_check(&typed, NULL, &none)) < 0)
		return tally__metric_failed(z, TALLY_CHISTOGRAM, &s->metric,
					    rc);
	return tally__chistogram_register_in(z, &typed, NULL, 0, s, 0, 1);
}

int tally_info_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_fgauge *g)
{
	int rc = register_combine(z, d, TALLY_INFO, g ? &g->metric : NULL, 0,
				  NULL);

	if (rc == 0)
		tally_fgauge_set(g, 1.0);
	return rc;
}

int tally_enum_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_fgauge *g)
{
	return register_combine(z, d, TALLY_ENUM, g ? &g->metric : NULL, 0,
				NULL);
}

void (tally_summary_observe)(const tally_summary *s, double v)
{
	tally__summary_observe(s, v);
}

int tally_summary_fetch(const tally_summary *s, int64_t *count, double *sum)
{
	return tally_chistogram_fetch(s, count, sum, NULL);
}

int tally_chistogram_fetch(const tally_chistogram *h, int64_t *count,
			   double *sum, int64_t *buckets)
{
	int64_t whole, nanos, b;
	uint64_t n = 0;
	int rc;

	tally__ok();
	if (!h || !h->metric.block || !count || !sum ||
	    h->metric.kind != TALLY_CHISTOGRAM)
		return tally__fail(EINVAL, "tally_chistogram_fetch: NULL "
				   "argument or not a TALLY_CHISTOGRAM");
	if (tally__series_gone(&h->metric))
		return tally__fail(EINVAL, "tally_chistogram_fetch: the series "
				   "was removed (through a copy of this "
				   "handle)");
	for (unsigned i = 0; i <= h->nbounds; i++) {
		if ((rc = tally_block_fetch(h->metric.block, 2 + i, &b)) < 0)
			return rc;
		if (buckets)
			buckets[i] = b;
		n += (uint64_t)b;
	}
	if ((rc = tally_block_fetch(h->metric.block, 1, &nanos)) < 0 ||
	    (rc = tally_block_fetch(h->metric.block, 0, &whole)) < 0)
		return rc;
	*count = (int64_t)n;
	*sum = (double)whole +
	       (double)((uint64_t)nanos / TALLY__FRAC_SCALE) +
	       (double)((uint64_t)nanos % TALLY__FRAC_SCALE) / 1e9;
	return 0;
}

int tally_pgauge_register(struct tally_zone *z,
			  const struct tally_metric_desc *d, unsigned combine,
			  tally_pgauge *g)
{
	tally__ok();
	if (!g)
		return tally__fail(EINVAL, "register: NULL handle");
	return tally__pgauge_register_in(z, d, combine, &g->metric, 0);
}

/* Its labels, and pid="<pid>:<token>" (layout.h, TALLY__TYPE_PGAUGE). */
int tally__pgauge_register_in(struct tally_zone *z,
			      const struct tally_metric_desc *d,
			      unsigned combine, tally_metric *m, uint32_t pin)
{
	struct tally_label labels[TALLY_LABEL_PAIRS_MAX + 1];
	struct tally_metric_desc mine;
	char pid[32];
	uint32_t token;
	int rc;

	if (!d || (d->nlabels && !d->labels) ||
	    d->nlabels > TALLY_LABEL_PAIRS_MAX)
		return tally__metric_register(z, d, TALLY_PGAUGE, m);
	if (combine > TALLY_COMBINE_LIVEMOSTRECENT)
		return tally__metric_failed(z, TALLY_PGAUGE, m,
				tally__fail(EINVAL, "%.60s: unknown combine "
					    "mode %u", d->name ? d->name : "?",
					    combine));
	for (unsigned i = 0; i < d->nlabels; i++)
		if (d->labels[i].name && !strcmp(d->labels[i].name, "pid"))
			return tally__metric_failed(z, TALLY_PGAUGE,
				m, tally__fail(EINVAL, "%.60s: label "
				"name \"pid\" is reserved on a per-process "
				"gauge (it says which process a value is "
				"of)", d->name ? d->name : "?"));
	if (!z && !(z = tally_zone_default()))
		return tally__metric_failed(NULL, TALLY_PGAUGE, m,
					    -errno);
	if (z->hdr->minor < TALLY__FMT_MINOR_TYPES)
		return tally__metric_failed(z, TALLY_PGAUGE, m,
				tally__fail(EPROTONOSUPPORT, "%.60s: zone "
				"file %s was made by a libtally older than "
				"format 2.6, whose readers would not show a "
				"per-process gauge", d->name ? d->name : "?",
				zone_file(z)));
	if ((rc = tally__process_token(z, &token)) < 0)
		return tally__metric_failed(z, TALLY_PGAUGE, m, rc);
	mine = *d;
	if (d->nlabels)
		memcpy(labels, d->labels, d->nlabels * sizeof(*labels));
	snprintf(pid, sizeof(pid), "%d:%u", (int)getpid(), token);
	labels[d->nlabels].name = "pid";
	labels[d->nlabels].value = pid;
	mine.labels = labels;
	mine.nlabels = d->nlabels + 1;
	struct typed_extra x = { .combine = combine };

	return register_combine(z, &mine, TALLY_PGAUGE, m, pin, &x);
}

void tally__pgauge_stamp(const tally_pgauge *g)
{
	struct timespec ts;
	int64_t *w = (int64_t *)((uintptr_t)g->metric.block & ~(uintptr_t)3);

	clock_gettime(CLOCK_REALTIME, &ts);
	__atomic_store_n(w + 1, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
			 __ATOMIC_RELAXED);
}

void (tally_pgauge_set)(const tally_pgauge *g, double v)
{
	tally__pgauge_set(g, v);
}

void (tally_pgauge_add)(const tally_pgauge *g, double v)
{
	tally__pgauge_add(g, v);
}

int tally_pgauge_fetch(const tally_pgauge *g, double *value)
{
	tally_fgauge f;

	if (g && g->metric.kind == TALLY_PGAUGE) {
		f.metric = g->metric;
		f.metric.kind = TALLY_FGAUGE;
		return tally_fgauge_fetch(&f, value);
	}
	tally__ok();
	return tally__fail(EINVAL, "tally_pgauge_fetch: not a TALLY_PGAUGE");
}

int tally_metric_remove(tally_metric *m)
{
	struct tally_zone *z;
	struct tally__hdr *h;
	struct tally__series *s;
	uint32_t *link, bucket;

	tally__ok();
	if (!m || !m->zone || !m->block)
		return tally__fail(EINVAL, "tally_metric_remove: no series");
	z = m->zone;
	h = z->hdr;
	if (m->series >= h->series_cap)
		return tally__fail(EINVAL, "not a series of this zone");
	s = &series(z)[m->series];
	if (tally__metrics_lock(z) < 0)
		return -errno;
	/* A copy of a series removed before the records were given back
	 * points past the records in use: refused without a look (its page
	 * may be a hole). */
	if (m->series >= atomic_load_explicit(&h->series_hwm,
					      memory_order_relaxed) ||
	    !tally__series_live(s->state) ||
	    atomic_load_explicit(&s->seq, memory_order_relaxed) != m->seq) {
		tally__metrics_unlock(z);
		return tally__fail(EINVAL, "series already removed");
	}
	/* Another registration still holds it: one reference fewer. */
	if (s->refs > 1) {
		s->refs--;
		tally__metrics_unlock(z);
		m->block = NULL;
		return 0;
	}
	bucket = series_bucket(z, record_hash(s));
	for (link = &series_buckets(z)[bucket]; *link;
	     link = &chains(z)[*link - 1]) {
		if (*link == m->series + 1) {
			*link = chains(z)[m->series];
			break;
		}
	}
	{
		/* A long record's extensions are freed once it is retired:
		 * a reader that copied it sees the seq change. */
		struct tally__long_labels l = long_of(s);
		int is_long = tally__series_long(s->state);

		seq_begin(&s->seq);
		s->state = TALLY__SERIES_FREE;
		seq_end(&s->seq);
		if (is_long)
			tally__series_free_exts(z, &l);
	}
	chains(z)[m->series] = h->series_free;
	h->series_free = m->series + 1;
	h->series_live--;
	atomic_fetch_add_explicit(&h->series_gen, 1, memory_order_release);
	if (h->series_live == 0)
		tally__series_give_back(z);
	tally__metrics_unlock(z);

	tally_block_free(z, m->block);
	m->block = NULL;
	return 0;
}

int tally_metric_fetch(const tally_metric *m, int64_t *value)
{
	int64_t v, sum = 0;
	unsigned n;
	int rc;

	tally__ok();
	if (!m || !m->block || !value)
		return tally__fail(EINVAL, "tally_metric_fetch: NULL argument");
	if (tally__series_gone(m))
		return tally__fail(EINVAL, "tally_metric_fetch: the series was "
				   "removed (through a copy of this handle)");
	if (m->kind == TALLY_GAUGE) {
		/* Decrements before increments (see tally__gauge_add). */
		if ((rc = tally_block_fetch(m->block, 1, &sum)) < 0 ||
		    (rc = tally_block_fetch(m->block, 0, &v)) < 0)
			return rc;
		*value = (int64_t)((uint64_t)v + (uint64_t)sum);
		return 0;
	}
	if (m->kind == TALLY_FGAUGE || m->kind == TALLY_PGAUGE) {
		double d;
		tally_fgauge f = { *m };

		f.metric.kind = TALLY_FGAUGE;
		if ((rc = tally_fgauge_fetch(&f, &d)) < 0)
			return rc;
		*value = tally__f64_to_i64(d);
		return 0;
	}
	if (m->kind == TALLY_CHISTOGRAM) {
		/* The count: the sum of the buckets (slots 2 on; the block
		 * of a discarded handle has three). */
		tally_chistogram h = { .metric = *m };
		double fsum;

		if (m->zone) {
			const struct tally__series *r =
				&series(m->zone)[m->series];

			h.nbounds = r->nslots > 3 ? r->nslots - 3 : 0;
		}
		return tally_chistogram_fetch(&h, value, &fsum, NULL);
	}
	if (m->kind == TALLY_FCOUNTER) {
		/* The whole units, the fractions' whole part in. */
		if ((rc = tally_block_fetch(m->block, 1, &sum)) < 0 ||
		    (rc = tally_block_fetch(m->block, 0, &v)) < 0)
			return rc;
		*value = (int64_t)((uint64_t)v +
				   (uint64_t)sum / TALLY__FRAC_SCALE);
		return 0;
	}
	if (m->kind != TALLY_HISTOGRAM)
		return tally_block_fetch(m->block, 0, value);
	n = (m->max_bits - m->sub_bits + 1u) << m->sub_bits;
	for (unsigned i = 0; i < n; i++) {
		rc = tally_block_fetch(m->block, 1 + i, &v);
		if (rc < 0)
			return rc;
		sum += v;
	}
	*value = sum;
	return 0;
}

int tally_fgauge_fetch(const tally_fgauge *g, double *value)
{
	int64_t bits;
	int rc;

	tally__ok();
	if (!g || !g->metric.block || !value)
		return tally__fail(EINVAL, "tally_fgauge_fetch: NULL argument");
	if (g->metric.kind != TALLY_FGAUGE)
		return tally__fail(EINVAL, "tally_fgauge_fetch: not a "
				   "TALLY_FGAUGE (kind %u)", g->metric.kind);
	if (tally__series_gone(&g->metric))
		return tally__fail(EINVAL, "tally_fgauge_fetch: the series was "
				   "removed (through a copy of this handle)");
	if ((rc = tally_block_fetch(g->metric.block, 0, &bits)) < 0)
		return rc;
	*value = tally__f64_of(bits);
	return 0;
}
