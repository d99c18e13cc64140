/*
 * labels.c: checking the definition of a series (name, kind, mode,
 * buckets, help, unit, labels) and packing its labels, sorted, into the
 * plan of the records a registration writes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/table.h"
#include "tally/metrics.h"

/* --- Validation ------------------------------------------------------ */

static int check_text(const char *what, const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n > max)
		return tally__fail(E2BIG, "%s is %zu bytes long, more than "
				   "the %zu allowed", what, n, max);
	if (!tally__valid_utf8(s, n))
		return tally__fail(EINVAL, "%s is not valid UTF-8", what);
	return 0;
}

static int cmp_label(const void *a, const void *b)
{
	const struct tally_label *x = *(const struct tally_label *const *)a;
	const struct tally_label *y = *(const struct tally_label *const *)b;

	return strcmp(x->name, y->name);
}

/* A label name the exposition formats reserve for a metric of @kind:
 * "le" names a histogram's buckets (and "quantile" would name a
 * summary's quantiles, a kind tally does not have).  Names starting with
 * "__" are refused by tally__valid_label_name(). */
static int reserved_label(unsigned kind, const char *name)
{
	return kind == TALLY_HISTOGRAM && strcmp(name, "le") == 0;
}

/* Check the labels and write them sorted as "name\0value\0" pairs. */
static int pack_labels(const struct tally_metric_desc *d,
		       char out[TALLY__LABELS_PACKED_MAX], size_t *len)
{
	const struct tally_label *sorted[TALLY__LABEL_PAIRS_MAX];
	size_t n = 0;

	if (d->nlabels && !d->labels)
		return tally__fail(EINVAL, "%u labels but a NULL label array",
				   d->nlabels);
	if (d->nlabels > TALLY__LABEL_PAIRS_MAX)
		return tally__fail(E2BIG, "%.60s: %u labels, more than the %u "
				   "a series may have", d->name, d->nlabels,
				   TALLY__LABEL_PAIRS_MAX);
	for (unsigned i = 0; i < d->nlabels; i++) {
		const struct tally_label *l = &d->labels[i];
		int rc;

		if (!l->name || !l->value)
			return tally__fail(EINVAL, "label %u has a NULL name or "
					   "value", i);
		if (!tally__valid_label_name(l->name))
			return tally__fail(EINVAL, "%.60s: label name \"%.60s\""
					   "%s", d->name, l->name,
					   l->name[0] == '_' && l->name[1] == '_' ?
					   " is reserved: names starting with "
					   "__ are Prometheus's own" :
					   ": expected [a-zA-Z_][a-zA-Z0-9_]* "
					   "not starting with __");
		if (reserved_label(d->kind, l->name))
			return tally__fail(EINVAL, "%.60s: label name \"%s\" is "
					   "reserved on a histogram (it names "
					   "the buckets in the exposition)",
					   d->name, l->name);
		rc = check_text("a label value", l->value,
				TALLY__LABEL_BYTES_MAX);
		if (rc < 0)
			return rc;
		sorted[i] = l;
	}
	qsort(sorted, d->nlabels, sizeof(sorted[0]), cmp_label);
	for (unsigned i = 0; i < d->nlabels; i++) {
		size_t kn = strlen(sorted[i]->name) + 1;
		size_t vn = strlen(sorted[i]->value) + 1;

		if (i && !strcmp(sorted[i]->name, sorted[i - 1]->name))
			return tally__fail(EINVAL, "%.60s: label \"%.60s\" is "
					   "given twice", d->name,
					   sorted[i]->name);
		/* Names and values without their NULs, against the limit. */
		if (n + kn + vn - 2 * (i + 1) > TALLY__LABEL_BYTES_MAX)
			return tally__fail(E2BIG, "the labels of %.60s take "
					   "more than %u bytes (names and "
					   "values)", d->name,
					   TALLY__LABEL_BYTES_MAX);
		memcpy(out + n, sorted[i]->name, kn);
		memcpy(out + n + kn, sorted[i]->value, vn);
		n += kn + vn;
	}
	/* A short set is copied whole into its record: no stale bytes. */
	if (n < TALLY__LABELS_INLINE)
		memset(out + n, 0, TALLY__LABELS_INLINE - n);
	*len = n;
	return 0;
}

/* Steps of tally__plan_make(), after it. */
static int plan_typed(const struct tally_metric_desc *d,
		      struct tally__plan *p);
static int plan_hist_bits(const struct tally_metric_desc *d,
			  struct tally__plan *p);
static int plan_info_enum(const struct tally_metric_desc *d,
			  struct tally__plan *p);

int tally__plan_make(const struct tally_metric_desc *d, struct tally__plan *p)
{
	int rc;

	/* Not the label buffer: it is written as far as it is used. */
	memset(p, 0, offsetof(struct tally__plan, labels));
	if (d->kind < TALLY_COUNTER || d->kind > TALLY_ENUM ||
	    d->kind == TALLY_SUMMARY) /* made a TALLY_CHISTOGRAM before */
		return tally__fail(EINVAL, "unknown metric kind %u", d->kind);
	if (!d->name)
		return tally__fail(EINVAL, "NULL metric name");
	if (strlen(d->name) > TALLY_NAME_MAX)
		return tally__fail(E2BIG, "metric name \"%.40s...\" is longer "
				   "than %u bytes", d->name, TALLY_NAME_MAX);
	if (!tally__valid_metric_name(d->name))
		return tally__fail(EINVAL, "metric name \"%.60s\": expected "
				   "[a-zA-Z_:][a-zA-Z0-9_:]*", d->name);
	p->help = d->help ? d->help : "";
	p->unit = d->unit ? d->unit : "";
	if ((rc = check_text("the help text", p->help, TALLY_HELP_MAX)) < 0)
		return rc;
	if (strlen(p->unit) > TALLY_UNIT_MAX)
		return tally__fail(E2BIG, "unit of %.60s is longer than %u "
				   "bytes", d->name, TALLY_UNIT_MAX);
	if (!tally__valid_unit(p->unit))
		return tally__fail(EINVAL, "unit \"%.40s\": expected "
				   "[a-zA-Z0-9_]*", p->unit);
	if (d->mode > TALLY_ADAPTIVE)
		return tally__fail(EINVAL, "unknown block mode %u", d->mode);
	/* A TALLY_FGAUGE is stored as a set gauge whose metric record says
	 * its slot holds a double: a reader older than format 2.3 shows the
	 * bits as an integer instead of refusing the segment. */
	p->kind = d->kind == TALLY_FGAUGE || d->kind == TALLY_PGAUGE ||
		  d->kind == TALLY_INFO || d->kind == TALLY_ENUM ?
		  TALLY_GAUGE_SET : d->kind == TALLY_FCOUNTER ||
		  d->kind == TALLY_CHISTOGRAM ? TALLY_COUNTER : d->kind;
	p->vtype = p->kind == TALLY_GAUGE_SET && d->kind != TALLY_GAUGE_SET ?
		   TALLY__VT_FLOAT64 : TALLY__VT_INT64;
	p->mode = p->kind == TALLY_GAUGE_SET ? TALLY_SHARED : d->mode;
	p->nslots = d->kind == TALLY_GAUGE ? 2 : 1; /* increments, decrements */
	if ((rc = plan_typed(d, p)) < 0 || (rc = plan_hist_bits(d, p)) < 0)
		return rc;
	if ((rc = pack_labels(d, p->labels, &p->labels_len)) < 0)
		return rc;
	if (p->labels_len > TALLY__LABELS_INLINE ||
	    d->nlabels > TALLY__LABELS_INLINE_PAIRS)
		p->nexts = (unsigned)((p->labels_len + TALLY__EXT_DATA - 1) /
				      TALLY__EXT_DATA);
	return 0;
}

/* The record type, slots and help room of the kinds that older readers
 * see as another kind (layout.h: typed records). */
static int plan_typed(const struct tally_metric_desc *d,
		      struct tally__plan *p)
{
	if (d->kind == TALLY_FCOUNTER) {
		/* A counter for older readers (which skip its series),
		 * whole units and billionths for newer ones (layout.h). */
		p->type = TALLY__TYPE_FCOUNTER;
		p->nslots = 2;
		if (strlen(p->help) + 1 > TALLY__HELP_MAX - TALLY__TAIL_BYTES)
			return tally__fail(E2BIG, "the help text of %.60s is "
					   "longer than the %u bytes a "
					   "fractional counter's may take",
					   d->name, TALLY__HELP_MAX -
					   TALLY__TAIL_BYTES - 1);
	}
	if (d->kind == TALLY_CHISTOGRAM) {
		/* A counter for older readers (which skip its series); the
		 * sum's two slots and the buckets for newer ones (layout.h).
		 * The bounds, and so the buckets, are set by the caller
		 * (tally_chistogram_register). */
		p->type = TALLY__TYPE_CHISTO;
		p->nslots = 3;
		if (strlen(p->help) > TALLY_CHISTOGRAM_HELP_MAX)
			return tally__fail(E2BIG, "the help text of %.60s is "
					   "longer than the %u bytes a "
					   "classic histogram's may take",
					   d->name, TALLY_CHISTOGRAM_HELP_MAX);
	}
	if (d->kind == TALLY_PGAUGE) {
		/* A float gauge's record for older readers, typed for newer
		 * ones: the value, and the time of its last set
		 * (layout.h). */
		p->type = TALLY__TYPE_PGAUGE;
		p->nslots = 2;
		if (strlen(p->help) + 1 > TALLY__HELP_MAX - TALLY__TAIL_BYTES)
			return tally__fail(E2BIG, "the help text of %.60s is "
					   "longer than the %u bytes a "
					   "per-process gauge's may take",
					   d->name, TALLY__HELP_MAX -
					   TALLY__TAIL_BYTES - 1);
	}
	if (d->kind == TALLY_INFO || d->kind == TALLY_ENUM)
		return plan_info_enum(d, p);
	return 0;
}

/* An info or enum metric (format 2.8): a float gauge's record for older
 * readers, typed for newer ones (layout.h); an enum's series say their
 * state in a label named as the metric. */
static int plan_info_enum(const struct tally_metric_desc *d,
			  struct tally__plan *p)
{
	unsigned i = 0;

	p->type = d->kind == TALLY_INFO ? TALLY__TYPE_INFO : TALLY__TYPE_ENUM;
	if (strlen(p->help) + 1 > TALLY__HELP_MAX - TALLY__TAIL_BYTES)
		return tally__fail(E2BIG, "the help text of %.60s is longer "
				   "than the %u bytes an %s metric's may take",
				   d->name, TALLY__HELP_MAX -
				   TALLY__TAIL_BYTES - 1,
				   d->kind == TALLY_INFO ? "info" : "enum");
	while (d->kind == TALLY_ENUM && i < d->nlabels &&
	       !(d->labels && d->labels[i].name &&
		 strcmp(d->labels[i].name, d->name) == 0))
		i++;
	if (d->kind == TALLY_ENUM && i == d->nlabels)
		return tally__fail(EINVAL, "enum %.60s: no label named as the "
				   "metric (its state)", d->name);
	return 0;
}

/* The bucket layout of a TALLY_HISTOGRAM, refused on any other kind. */
static int plan_hist_bits(const struct tally_metric_desc *d,
			  struct tally__plan *p)
{
	if (d->kind == TALLY_HISTOGRAM) {
		unsigned sb = d->hist_sub_bits ? d->hist_sub_bits :
						 TALLY_HIST_SUB_BITS_DEFAULT;
		unsigned mb = d->hist_max_bits ? d->hist_max_bits :
						 TALLY_HIST_MAX_BITS_DEFAULT;
		unsigned nb;

		if (sb < 1 || sb > 7 || mb <= sb || mb > 63)
			return tally__fail(EINVAL, "histogram bits sub=%u max=%u:"
					   " expected 1 <= sub <= 7 and sub < "
					   "max <= 63", sb, mb);
		nb = (mb - sb + 1) << sb;
		if (nb > TALLY_BLOCK_MAX_SLOTS - 1)
			return tally__fail(EINVAL, "histogram bits sub=%u max=%u"
					   " make %u buckets, more than %u",
					   sb, mb, nb, TALLY_BLOCK_MAX_SLOTS - 1);
		p->sub_bits = sb;
		p->max_bits = mb;
		p->nslots = 1 + nb;
	} else if (d->hist_sub_bits || d->hist_max_bits) {
		return tally__fail(EINVAL, "histogram bits given for a metric "
				   "that is not a histogram");
	}
	return 0;
}
