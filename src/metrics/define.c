/*
 * define.c: the metric records, one per metric name and generation:
 * finding, making and re-texting them, and saying what changed.
 *
 * A definition that changes is never refused (a new version of a program
 * meets the old one's in a shared zone): another help text or unit is
 * written over the record's, another kind, mode or layout makes a new
 * generation of the metric (layout.h), which the metric index points at;
 * label families keep making their children in the generation they were
 * defined in (family.c pins it), so that an old version runs on.
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

/* --- Publishing records -------------------------------------------- */

static const char *kind_name(unsigned kind, unsigned vtype)
{
	static const char *const names[] = { "?", "counter", "gauge",
					     "set gauge", "histogram" };

	if (vtype == TALLY__VT_FLOAT64)
		return "float gauge";
	return kind < 5 ? names[kind] : "?";
}

static const char *type_name(unsigned type, unsigned kind, unsigned vtype)
{
	if (type == TALLY__TYPE_PGAUGE)
		return "per-process gauge";
	if (type == TALLY__TYPE_FCOUNTER)
		return "fractional counter";
	if (type == TALLY__TYPE_CHISTO)
		return "classic histogram";
	if (type == TALLY__TYPE_INFO)
		return "info";
	if (type == TALLY__TYPE_ENUM)
		return "enum";
	return kind_name(kind, vtype);
}

/* What makes @f and @p different generations, in words; "" when they
 * are the same generation. */
void tally__describe_change(const struct tally__metric_rec *f,
			    const struct tally__plan *p, char *out, size_t len)
{
	static const char *const modes[] = { "percpu", "shared", "pernode",
					     "adaptive" };

	if (f->type != p->type)
		snprintf(out, len, "type %s, was %s",
			 type_name(p->type, p->kind, p->vtype),
			 type_name(f->type, f->kind, f->vtype));
	else if (f->type == TALLY__TYPE_PGAUGE &&
		 tally__metric_tail(f)->combine != p->combine)
		snprintf(out, len, "combine mode %u, was %u", p->combine,
			 tally__metric_tail(f)->combine);
	else if (f->type == TALLY__TYPE_CHISTO &&
		 !(tally__metric_tail(f)->flags & TALLY__TAIL_SUMMARY) !=
		 !p->summary)
		snprintf(out, len, "type %s, was %s",
			 p->summary ? "summary" : "classic histogram",
			 p->summary ? "classic histogram" : "summary");
	else if (f->type == TALLY__TYPE_CHISTO &&
		 (tally__metric_tail(f)->nbounds != p->nbounds ||
		  memcmp(tally__metric_bounds(f)->bound, p->bounds,
			 p->nbounds * sizeof(double))))
		snprintf(out, len, "%u bucket bounds, were %u other ones",
			 p->nbounds, tally__metric_tail(f)->nbounds);
	else if (f->kind != p->kind || f->vtype != p->vtype)
		snprintf(out, len, "type %s, was %s",
			 kind_name(p->kind, p->vtype),
			 kind_name(f->kind, f->vtype));
	else if (f->mode != p->mode)
		snprintf(out, len, "mode %s, was %s", modes[p->mode & 3],
			 modes[f->mode & 3]);
	else if (f->sub_bits != p->sub_bits || f->max_bits != p->max_bits)
		snprintf(out, len, "histogram bits sub=%u max=%u, were "
			 "sub=%u max=%u", p->sub_bits, p->max_bits,
			 f->sub_bits, f->max_bits);
	else
		out[0] = 0;
}

/* Under the metrics lock: rewrite metric record @f's help and unit (another
 * registration gave others: the newest one wins), under its seq, and
 * tell readers to read the metric records again. */
static void metric_retext(struct tally_zone *z, struct tally__metric_rec *f,
			  const struct tally__plan *p)
{
	if (!strcmp(f->help, p->help) && !strcmp(f->unit, p->unit))
		return;
	seq_begin(&f->seq);
	f->unit_len = (uint16_t)strlen(p->unit);
	f->help_len = (uint16_t)strlen(p->help);
	memset(f->unit, 0, sizeof(f->unit));
	/* A typed record's tail (layout.h) stays as it is. */
	memset(f->help, 0, tally__help_room(f));
	memcpy(f->unit, p->unit, f->unit_len);
	memcpy(f->help, p->help, f->help_len);
	seq_end(&f->seq);
	atomic_fetch_add_explicit(&z->hdr->metric_changes, 1,
				  memory_order_release);
}

/* Under the metrics lock: set @flags in metric record @f
 * (TALLY__METRIC_*: it is superseded by another generation of its name,
 * which readers show in its place), or clear them (@set 0: it is the
 * current one again). */
void tally__metric_rec_flag(struct tally_zone *z, struct tally__metric_rec *f,
			unsigned flags, int set)
{
	unsigned now = set ? f->flags | flags : f->flags & ~flags;

	if (now == f->flags)
		return;
	seq_begin(&f->seq);
	f->flags = (uint8_t)now;
	seq_end(&f->seq);
	atomic_fetch_add_explicit(&z->hdr->metric_changes, 1,
				  memory_order_release);
}

/* Under the metrics lock: the index bucket of @name's newest metric record
 * record, or of the empty place where it goes (*@found 0). */
uint32_t tally__metric_rec_find(struct tally_zone *z, const char *name,
			    uint32_t *found)
{
	uint32_t *fb = metric_buckets(z), mask = z->hdr->metric_hash_buckets - 1;
	uint32_t i = name_bucket(z, name);

	*found = 0;
	for (; fb[i]; i = (i + 1) & mask) {
		if (!strcmp(metric_recs(z)[fb[i] - 1].name, name)) {
			*found = fb[i];
			break;
		}
	}
	return i;
}

/* What the steps of tally__metric_rec_get() share: the name and its plan,
 * the index bucket of the name, its current record (index + 1, or 0),
 * what tells that record from @p, and the last generation of the name. */
struct rec_look {
	const char *name;
	const struct tally__plan *p;
	uint32_t bucket, found, last;
	char change[96];
};

/* Pinned lookup: does record @pin (index + 1), the one a label family of
 * this process was defined in, hold @l's name in @l's generation? */
static int pinned_serves(struct tally_zone *z, struct rec_look *l,
			 uint32_t pin)
{
	const struct tally__metric_rec *f;

	if (pin > atomic_load_explicit(&z->hdr->metric_count,
				       memory_order_relaxed))
		return 0;
	f = &metric_recs(z)[pin - 1];
	tally__describe_change(f, l->p, l->change, sizeof(l->change));
	return !strcmp(f->name, l->name) && !l->change[0];
}

/* Current-generation lookup: does the name's newest record serve @l (of
 * its generation, not superseded)?  Its help and unit become @l's when
 * @retext.  Otherwise l->change says why not. */
static int current_serves(struct tally_zone *z, struct rec_look *l,
			  int retext)
{
	struct tally__metric_rec *f = &metric_recs(z)[l->found - 1];

	tally__describe_change(f, l->p, l->change, sizeof(l->change));
	if (!l->change[0] && !(f->flags & TALLY__METRIC_SUPERSEDED)) {
		if (retext)
			metric_retext(z, f, l->p);
		return 1;
	}
	if (!l->change[0])
		snprintf(l->change, sizeof(l->change), "its definition was "
			 "superseded");
	return 0;
}

/* What a typed record's type needs besides, past its help text
 * (layout.h: the tail, and a classic histogram's bounds). */
static void write_tail(struct tally__metric_rec *f,
		       const struct tally__plan *p)
{
	struct tally__metric_tail *t = tally__metric_tail(f);

	memset(t, 0, sizeof(*t));
	t->combine = (uint8_t)p->combine;
	if (p->type == TALLY__TYPE_CHISTO) {
		struct tally__metric_bounds *bd = tally__metric_bounds(f);

		memset(bd, 0, sizeof(*bd));
		memcpy(bd->bound, p->bounds, p->nbounds * sizeof(double));
		t->combine = 0;
		t->nbounds = (uint8_t)p->nbounds;
		t->flags = p->summary ? TALLY__TAIL_SUMMARY : 0;
	}
}

/* May generation @k (index) of the name, of @l's very definition, become
 * current again?  One only superseded may, but not the current one (the
 * index points at it: superseded, it was cut between two flags, which
 * the next lock repairs).  One that a binding retired
 * (tally_metric_redefine) was of a definition its record does not hold
 * whole: the label names of its series say which, and it comes back for
 * those only, the current one included.  But an enum's definition is its
 * states, which its series hold as label values, not names: a retired
 * enum never comes back. */
static int may_come_back(struct tally_zone *z, const struct rec_look *l,
			 uint32_t k)
{
	const struct tally__metric_rec *g = &metric_recs(z)[k];

	if (!(g->flags & TALLY__METRIC_RETIRED))
		return k != l->found - 1;
	if (g->type == TALLY__TYPE_ENUM)
		return 0;
	return tally__series_names_match(z, k, l->p);
}

/*
 * Rollback scan, for a changed definition: an older generation of this
 * very definition (a rollback, or an old version registering again)
 * becomes the current one again, with its series, rather than a new
 * record each time two versions take turns.  Sets l->last, the last
 * generation made, which a new one follows.  1 with *@out when one came
 * back, else 0.
 */
static int roll_back(struct tally_zone *z, struct rec_look *l, int retext,
		     uint32_t *out)
{
	struct tally__hdr *h = z->hdr;
	uint32_t n = atomic_load_explicit(&h->metric_count,
					  memory_order_relaxed);
	struct tally__metric_rec *f;
	uint32_t back = 0;

	for (uint32_t k = 0; k < n; k++) {
		struct tally__metric_rec *g = &metric_recs(z)[k];
		char diff[96];

		if (strcmp(g->name, l->name))
			continue;
		l->last = k + 1;
		tally__describe_change(g, l->p, diff, sizeof(diff));
		if (!diff[0] && may_come_back(z, l, k))
			back = k + 1;
	}
	if (!back)
		return 0;
	f = &metric_recs(z)[back - 1];
	if (back != l->found)
		tally__metric_rec_flag(z, &metric_recs(z)[l->found - 1],
				       TALLY__METRIC_SUPERSEDED, 1);
	tally__metric_rec_flag(z, f, TALLY__METRIC_SUPERSEDED |
			       TALLY__METRIC_RETIRED, 0);
	if (retext)
		metric_retext(z, f, l->p);
	atomic_fetch_add_explicit(&h->redefinitions, 1, memory_order_relaxed);
	metric_buckets(z)[l->bucket] = back;
	*out = back - 1;
	return 1;
}

/* Write the fields of new record @f for @l, under its seq. */
static void rec_write(struct tally_zone *z, struct tally__metric_rec *f,
		      const struct rec_look *l)
{
	const struct tally__plan *p = l->p;

	seq_begin(&f->seq);
	f->kind = (uint8_t)p->kind;
	f->vtype = (uint8_t)p->vtype;
	f->mode = (uint8_t)p->mode;
	f->sub_bits = (uint8_t)p->sub_bits;
	f->max_bits = (uint8_t)p->max_bits;
	f->flags = 0;
	f->prev = l->last;
	f->generation = 0;
	if (l->last) {
		uint16_t g = metric_recs(z)[l->last - 1].generation;

		f->generation = (uint16_t)(g < UINT16_MAX ? g + 1u : g);
	}
	f->name_len = (uint16_t)strlen(l->name);
	f->unit_len = (uint16_t)strlen(p->unit);
	f->help_len = (uint16_t)strlen(p->help);
	memcpy(f->name, l->name, f->name_len + 1u);
	memcpy(f->unit, p->unit, f->unit_len + 1u);
	memcpy(f->help, p->help, f->help_len + 1u);
	f->type = (uint8_t)p->type;
	if (p->type)
		write_tail(f, p);
	f->state = 1;
	seq_end(&f->seq);
}

/* Creation: a new record for @l (a new generation when l->found), and
 * its index entry, both reserved before they are written. */
static int rec_create(struct tally_zone *z, struct rec_look *l,
		      uint32_t *out)
{
	struct tally__hdr *h = z->hdr;
	uint32_t *fb = metric_buckets(z);
	uint32_t idx = atomic_load_explicit(&h->metric_count,
					    memory_order_relaxed);
	struct tally__metric_rec *f;
	int rc;

	if (idx >= h->metric_cap) {
		atomic_fetch_add_explicit(&h->alloc_refused, 1,
					  memory_order_relaxed);
		if (l->found)
			return tally__fail(ENOSPC, "metric %s changed (%s) but "
					   "zone file %s holds %u metric "
					   "records already: no room for "
					   "its new definition", l->name,
					   l->change, zone_file(z),
					   h->metric_cap);
		return tally__fail(ENOSPC, "zone \"%s\" holds %u metric names "
				   "already", h->zone_name, h->metric_cap);
	}
	f = &metric_recs(z)[idx];
	rc = tally__reserve_at(z, f, sizeof(*f), "a metric record");
	if (rc == 0)
		rc = tally__reserve_at(z, &fb[l->bucket], sizeof(fb[0]),
				       "the metric index");
	if (rc < 0)
		return rc;
	rec_write(z, f, l);
	/* The older generation is marked before the index points past it:
	 * a reader that sees the new record sees the old one superseded
	 * at its next read of the metric records. */
	if (l->found) {
		tally__metric_rec_flag(z, &metric_recs(z)[l->found - 1],
				       TALLY__METRIC_SUPERSEDED, 1);
		atomic_fetch_add_explicit(&h->redefinitions, 1,
					  memory_order_relaxed);
	}
	atomic_store_explicit(&h->metric_count, idx + 1, memory_order_release);
	fb[l->bucket] = idx + 1;
	*out = idx;
	return 0;
}

/*
 * Under the metrics lock: the metric record of @name for @p, in *@out.
 * The steps, in order: the record @o->pin names, when it is of @p's
 * generation; the name's current record, when it is; with @o->create,
 * an older generation of @p's definition brought back, or a new record
 * (a new generation of the name when it has one).  Without @o->create
 * and no record that serves: -ENOENT, without a message.
 */
int tally__metric_rec_get(struct tally_zone *z, const char *name,
			  const struct tally__plan *p,
			  const struct tally__rec_opts *o, uint32_t *out)
{
	struct rec_look l = { .name = name, .p = p };

	if (o->pin && pinned_serves(z, &l, o->pin)) {
		*out = o->pin - 1;
		return 0;
	}
	l.change[0] = 0;
	l.bucket = tally__metric_rec_find(z, name, &l.found);
	if (l.found && current_serves(z, &l, o->retext)) {
		*out = l.found - 1;
		return 0;
	}
	if (!o->create)
		return -ENOENT;
	if (l.found && roll_back(z, &l, o->retext, out))
		return 0;
	return rec_create(z, &l, out);
}
