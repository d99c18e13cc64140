/*
 * define.c: the metric records, one per metric name and generation:
 * finding, making and re-texting them, and saying what changed.
 *
 * A definition that changes is never refused (a new version of a program
 * meets the old one's in a shared zone): another help text or unit is
 * written over the family's, another kind, mode or layout makes a new
 * generation of the family (layout.h), which the metric index points at;
 * families keep making their children in the generation they were
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

/*
 * Under the metrics lock: the metric record of @name for @p.
 *
 * @pin (record index + 1, or 0) is the record a family of this process
 * was defined in (family.c): its children go on being made there, in
 * their generation, whatever newer ones exist.  Otherwise the newest
 * record of @name serves when it is not superseded and @p is of its
 * generation (kind, value type, mode, histogram layout); its help and
 * unit become @p's when @retext.  A different definition makes a new
 * generation (layout.h), when @create; a record that does not exist
 * yet is made only when @create too (else -ENOENT, without a message).
 */
int tally__metric_rec_get(struct tally_zone *z, const char *name,
		      const struct tally__plan *p, uint32_t *out, int create,
		      uint32_t pin, int retext)
{
	struct tally__hdr *h = z->hdr;
	uint32_t *fb = metric_buckets(z);
	struct tally__metric_rec *f, *old = NULL;
	uint32_t i, idx, found, last = 0;
	char change[96] = "";

	if (pin && pin <= atomic_load_explicit(&h->metric_count,
					       memory_order_relaxed)) {
		f = &metric_recs(z)[pin - 1];
		tally__describe_change(f, p, change, sizeof(change));
		if (!strcmp(f->name, name) && !change[0]) {
			*out = pin - 1;
			return 0;
		}
	}
	i = tally__metric_rec_find(z, name, &found);
	if (found) {
		old = &metric_recs(z)[found - 1];
		tally__describe_change(old, p, change, sizeof(change));
		if (!change[0] && !(old->flags & TALLY__METRIC_SUPERSEDED)) {
			if (retext)
				metric_retext(z, old, p);
			*out = found - 1;
			return 0;
		}
		if (!change[0])
			snprintf(change, sizeof(change), "its definition was "
				 "superseded");
	}
	if (!create)
		return -ENOENT;
	idx = atomic_load_explicit(&h->metric_count, memory_order_relaxed);
	if (old) {
		/* The generations of the name: the last one made (the new
		 * one follows it), and an older one of this very definition
		 * (a rollback, or an old version registering again), which
		 * becomes the current one again, with its series, rather
		 * than a new record each time two versions take turns.  One
		 * that a binding retired (tally_metric_redefine) never comes
		 * back.  A scan of the records: only a changed definition
		 * gets here. */
		uint32_t back = 0;

		for (uint32_t k = 0; k < idx; k++) {
			struct tally__metric_rec *g = &metric_recs(z)[k];
			char diff[96];

			if (strcmp(g->name, name))
				continue;
			last = k + 1;
			tally__describe_change(g, p, diff, sizeof(diff));
			if (k != found - 1 && !diff[0] &&
			    !(g->flags & TALLY__METRIC_RETIRED))
				back = k + 1;
		}
		if (back) {
			f = &metric_recs(z)[back - 1];
			tally__metric_rec_flag(z, old, TALLY__METRIC_SUPERSEDED, 1);
			tally__metric_rec_flag(z, f, TALLY__METRIC_SUPERSEDED, 0);
			if (retext)
				metric_retext(z, f, p);
			atomic_fetch_add_explicit(&h->redefinitions, 1,
						  memory_order_relaxed);
			fb[i] = back;
			*out = back - 1;
			return 0;
		}
	}
	if (idx >= h->metric_cap) {
		atomic_fetch_add_explicit(&h->alloc_refused, 1,
					  memory_order_relaxed);
		if (old)
			return tally__fail(ENOSPC, "metric %s changed (%s) but "
					   "zone file %s holds %u metric "
					   "families already: no room for "
					   "its new definition", name, change,
					   zone_file(z),
					   h->metric_cap);
		return tally__fail(ENOSPC, "zone \"%s\" holds %u metric names "
				   "already", h->zone_name, h->metric_cap);
	}
	/* The record and its index entry, reserved before they are written. */
	f = &metric_recs(z)[idx];
	{
		int rc = tally__reserve_at(z, f, sizeof(*f), "a metric family");

		if (rc == 0)
			rc = tally__reserve_at(z, &fb[i], sizeof(fb[i]),
					       "the family index");
		if (rc < 0)
			return rc;
	}
	seq_begin(&f->seq);
	f->kind = (uint8_t)p->kind;
	f->vtype = (uint8_t)p->vtype;
	f->mode = (uint8_t)p->mode;
	f->sub_bits = (uint8_t)p->sub_bits;
	f->max_bits = (uint8_t)p->max_bits;
	f->flags = 0;
	f->prev = last;
	f->generation = 0;
	if (last) {
		uint16_t g = metric_recs(z)[last - 1].generation;

		f->generation = (uint16_t)(g < UINT16_MAX ? g + 1u : g);
	}
	f->name_len = (uint16_t)strlen(name);
	f->unit_len = (uint16_t)strlen(p->unit);
	f->help_len = (uint16_t)strlen(p->help);
	memcpy(f->name, name, f->name_len + 1u);
	memcpy(f->unit, p->unit, f->unit_len + 1u);
	memcpy(f->help, p->help, f->help_len + 1u);
	f->type = (uint8_t)p->type;
	if (p->type)
		write_tail(f, p);
	f->state = 1;
	seq_end(&f->seq);
	/* The older generation is marked before the index points past it:
	 * a reader that sees the new record sees the old one superseded
	 * at its next read of the metric records. */
	if (old) {
		tally__metric_rec_flag(z, old, TALLY__METRIC_SUPERSEDED, 1);
		atomic_fetch_add_explicit(&h->redefinitions, 1,
					  memory_order_relaxed);
	}
	atomic_store_explicit(&h->metric_count, idx + 1, memory_order_release);
	fb[i] = idx + 1;
	*out = idx;
	return 0;
}
