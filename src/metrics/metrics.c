/*
 * metrics.c: registering and removing named series.
 *
 * Families and series are records in the segment (layout.h).  Writers
 * change them under the zone's metrics lock, a robust process-shared
 * mutex, so that processes sharing a zone across fork() see one set of
 * names and duplicates are found.  Readers take no lock: a record is
 * published like a seqlock (seq odd, fields, seq even with release), and
 * a reader accepts a record only if two copies taken before and after
 * reading its values are equal with an even seq.
 *
 * Registration is get-or-create: a series registered again with the same
 * definition is the same series, and its record counts the registrations
 * (refs, which readers ignore); each removal takes one away, and the last
 * one retires the record.
 *
 * Order of a removal: the record is retired (seq odd, state free, seq
 * even) before its block is freed, so that a reader never reports the
 * values of a reused block under the old name.
 *
 * A definition that changes is never refused (a new version of a program
 * meets the old one's in a shared zone): another help text or unit is
 * written over the family's, another kind, mode or layout makes a new
 * generation of the family (layout.h), which the family index points at;
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

#include "metrics/metrics.h"
#include "tally/metrics.h"

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

static struct tally__family *families(struct tally_zone *z)
{
	return (struct tally__family *)((char *)z->hdr + z->hdr->fam_off);
}

static struct tally__series *series(struct tally_zone *z)
{
	return (struct tally__series *)((char *)z->hdr + z->hdr->desc_off);
}

/* The writers' index: series buckets, family buckets, series chains. */
static uint32_t *series_buckets(struct tally_zone *z)
{
	return (uint32_t *)((char *)z->hdr + z->hdr->hash_off);
}

static uint32_t *family_buckets(struct tally_zone *z)
{
	return series_buckets(z) + z->hdr->hash_buckets;
}

static uint32_t *chains(struct tally_zone *z)
{
	return family_buckets(z) + z->hdr->fam_hash_buckets;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

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

struct plan {
	unsigned kind, vtype, mode, sub_bits, max_bits, nslots;
	const char *help, *unit;
	size_t labels_len;
	unsigned nexts;          /* extension records of a long set */
	uint64_t hash;           /* of the family and labels (series_hash) */
	char labels[TALLY__LABELS_PACKED_MAX];
};

static int make_plan(const struct tally_metric_desc *d, struct plan *p)
{
	int rc;

	/* Not the label buffer: it is written as far as it is used. */
	memset(p, 0, offsetof(struct plan, labels));
	if (d->kind < TALLY_COUNTER || d->kind > TALLY_FGAUGE)
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
	/* A TALLY_FGAUGE is stored as a set gauge whose family says its slot
	 * holds a double: a reader older than format 2.3 shows the bits as
	 * an integer instead of refusing the segment. */
	p->kind = d->kind == TALLY_FGAUGE ? TALLY_GAUGE_SET : d->kind;
	p->vtype = d->kind == TALLY_FGAUGE ? TALLY__VT_FLOAT64 : TALLY__VT_INT64;
	p->mode = p->kind == TALLY_GAUGE_SET ? TALLY_SHARED : d->mode;
	p->nslots = d->kind == TALLY_GAUGE ? 2 : 1; /* increments, decrements */
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
	if ((rc = pack_labels(d, p->labels, &p->labels_len)) < 0)
		return rc;
	if (p->labels_len > TALLY__LABELS_INLINE ||
	    d->nlabels > TALLY__LABELS_INLINE_PAIRS)
		p->nexts = (unsigned)((p->labels_len + TALLY__EXT_DATA - 1) /
				      TALLY__EXT_DATA);
	return 0;
}

/* --- Publishing records -------------------------------------------- */

/* Make seq odd before any field changes: a full-barrier increment (a
 * fence would do, but TSan does not model fences). */
static void seq_begin(_Atomic uint32_t *seq)
{
	atomic_fetch_add_explicit(seq, 1, memory_order_seq_cst);
}

static void seq_end(_Atomic uint32_t *seq)
{
	atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1,
			      memory_order_release);
}

static const char *kind_name(unsigned kind, unsigned vtype)
{
	static const char *const names[] = { "?", "counter", "gauge",
					     "set gauge", "histogram" };

	if (vtype == TALLY__VT_FLOAT64)
		return "float gauge";
	return kind < 5 ? names[kind] : "?";
}

/* What makes @f and @p different generations, in words; "" when they
 * are the same generation. */
static void describe_change(const struct tally__family *f,
			    const struct plan *p, char *out, size_t len)
{
	static const char *const modes[] = { "percpu", "shared", "pernode",
					     "adaptive" };

	if (f->kind != p->kind || f->vtype != p->vtype)
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

/* Under the metrics lock: rewrite family @f's help and unit (another
 * registration gave others: the newest one wins), under its seq, and
 * tell readers to read the families again. */
static void family_retext(struct tally_zone *z, struct tally__family *f,
			  const struct plan *p)
{
	if (!strcmp(f->help, p->help) && !strcmp(f->unit, p->unit))
		return;
	seq_begin(&f->seq);
	f->unit_len = (uint16_t)strlen(p->unit);
	f->help_len = (uint16_t)strlen(p->help);
	memset(f->unit, 0, sizeof(f->unit));
	memset(f->help, 0, sizeof(f->help));
	memcpy(f->unit, p->unit, f->unit_len);
	memcpy(f->help, p->help, f->help_len);
	seq_end(&f->seq);
	atomic_fetch_add_explicit(&z->hdr->fam_changes, 1,
				  memory_order_release);
}

/* Under the metrics lock: set @flags in family @f (TALLY__FAM_*: it is
 * superseded by another generation of its name, which readers show in
 * its place), or clear them (@set 0: it is the current one again). */
static void family_flag(struct tally_zone *z, struct tally__family *f,
			unsigned flags, int set)
{
	unsigned now = set ? f->flags | flags : f->flags & ~flags;

	if (now == f->flags)
		return;
	seq_begin(&f->seq);
	f->flags = (uint8_t)now;
	seq_end(&f->seq);
	atomic_fetch_add_explicit(&z->hdr->fam_changes, 1,
				  memory_order_release);
}

/* The zone's file, for messages. */
static const char *zone_file(const struct tally_zone *z)
{
	const char *path = tally_zone_path(z);

	return path[0] ? path : "(an anonymous zone)";
}

static uint32_t name_bucket(struct tally_zone *z, const char *name)
{
	return (uint32_t)fnv1a(0xcbf29ce484222325ull, name, strlen(name)) &
	       (z->hdr->fam_hash_buckets - 1);
}

/* Under the metrics lock: the index bucket of @name's newest family
 * record, or of the empty place where it goes (*@found 0). */
static uint32_t family_find(struct tally_zone *z, const char *name,
			    uint32_t *found)
{
	uint32_t *fb = family_buckets(z), mask = z->hdr->fam_hash_buckets - 1;
	uint32_t i = name_bucket(z, name);

	*found = 0;
	for (; fb[i]; i = (i + 1) & mask) {
		if (!strcmp(families(z)[fb[i] - 1].name, name)) {
			*found = fb[i];
			break;
		}
	}
	return i;
}

/*
 * Under the metrics lock: the family record of @name for @p.
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
static int family_get(struct tally_zone *z, const char *name,
		      const struct plan *p, uint32_t *out, int create,
		      uint32_t pin, int retext)
{
	struct tally__hdr *h = z->hdr;
	uint32_t *fb = family_buckets(z);
	struct tally__family *f, *old = NULL;
	uint32_t i, idx, found, last = 0;
	char change[96] = "";

	if (pin && pin <= atomic_load_explicit(&h->fam_count,
					       memory_order_relaxed)) {
		f = &families(z)[pin - 1];
		describe_change(f, p, change, sizeof(change));
		if (!strcmp(f->name, name) && !change[0]) {
			*out = pin - 1;
			return 0;
		}
	}
	i = family_find(z, name, &found);
	if (found) {
		old = &families(z)[found - 1];
		describe_change(old, p, change, sizeof(change));
		if (!change[0] && !(old->flags & TALLY__FAM_SUPERSEDED)) {
			if (retext)
				family_retext(z, old, p);
			*out = found - 1;
			return 0;
		}
		if (!change[0])
			snprintf(change, sizeof(change), "its definition was "
				 "superseded");
	}
	if (!create)
		return -ENOENT;
	idx = atomic_load_explicit(&h->fam_count, memory_order_relaxed);
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
			struct tally__family *g = &families(z)[k];
			char diff[96];

			if (strcmp(g->name, name))
				continue;
			last = k + 1;
			describe_change(g, p, diff, sizeof(diff));
			if (k != found - 1 && !diff[0] &&
			    !(g->flags & TALLY__FAM_RETIRED))
				back = k + 1;
		}
		if (back) {
			f = &families(z)[back - 1];
			family_flag(z, old, TALLY__FAM_SUPERSEDED, 1);
			family_flag(z, f, TALLY__FAM_SUPERSEDED, 0);
			if (retext)
				family_retext(z, f, p);
			atomic_fetch_add_explicit(&h->redefinitions, 1,
						  memory_order_relaxed);
			fb[i] = back;
			*out = back - 1;
			return 0;
		}
	}
	if (idx >= h->fam_cap) {
		atomic_fetch_add_explicit(&h->alloc_refused, 1,
					  memory_order_relaxed);
		if (old)
			return tally__fail(ENOSPC, "metric %s changed (%s) but "
					   "zone file %s holds %u metric "
					   "families already: no room for "
					   "its new definition", name, change,
					   zone_file(z),
					   h->fam_cap);
		return tally__fail(ENOSPC, "zone \"%s\" holds %u metric names "
				   "already", h->zone_name, h->fam_cap);
	}
	/* The record and its index entry, reserved before they are written. */
	f = &families(z)[idx];
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
		uint16_t g = families(z)[last - 1].generation;

		f->generation = (uint16_t)(g < UINT16_MAX ? g + 1u : g);
	}
	f->name_len = (uint16_t)strlen(name);
	f->unit_len = (uint16_t)strlen(p->unit);
	f->help_len = (uint16_t)strlen(p->help);
	memcpy(f->name, name, f->name_len + 1u);
	memcpy(f->unit, p->unit, f->unit_len + 1u);
	memcpy(f->help, p->help, f->help_len + 1u);
	f->state = 1;
	seq_end(&f->seq);
	/* The older generation is marked before the index points past it:
	 * a reader that sees the new record sees the old one superseded
	 * at its next read of the families. */
	if (old) {
		family_flag(z, old, TALLY__FAM_SUPERSEDED, 1);
		atomic_fetch_add_explicit(&h->redefinitions, 1,
					  memory_order_relaxed);
	}
	atomic_store_explicit(&h->fam_count, idx + 1, memory_order_release);
	fb[i] = idx + 1;
	*out = idx;
	return 0;
}

/* The hash of a series: its family and packed labels. */
static uint64_t series_hash64(uint32_t fam, const char *labels, size_t len)
{
	uint64_t h = fnv1a(0xcbf29ce484222325ull, &fam, sizeof(fam));

	return fnv1a(h, labels, len);
}

static uint32_t series_bucket(struct tally_zone *z, uint64_t h)
{
	return (uint32_t)h &
	       (__atomic_load_n(&z->hdr->hash_cur, __ATOMIC_RELAXED) - 1);
}

static struct tally__series_ext *ext_at(struct tally_zone *z, uint32_t i)
{
	return (struct tally__series_ext *)&series(z)[i];
}

/* A long record's reference; copied, as the field is not 8-byte
 * aligned in the record. */
static struct tally__long_labels long_of(const struct tally__series *s)
{
	struct tally__long_labels l;

	memcpy(&l, s->labels, sizeof(l));
	return l;
}

/* The hash of live record @s: a long one keeps it in its record. */
static uint64_t record_hash(const struct tally__series *s)
{
	if (s->state == TALLY__SERIES_LONG)
		return long_of(s).hash;
	return series_hash64(s->family, s->labels, s->labels_len);
}

/* Insert series record @i (live) into the index. */
static void index_insert(struct tally_zone *z, uint32_t i)
{
	uint32_t k = series_bucket(z, record_hash(&series(z)[i]));

	chains(z)[i] = series_buckets(z)[k];
	series_buckets(z)[k] = i + 1;
}

/*
 * Under the metrics lock: keep the series index at most half full.  It
 * starts small and doubles, rehashing the live series, so that its memory
 * follows the number of live series rather than the zone's capacity (a
 * bucket array sized for the capacity would get a page written at random
 * for every new label set).
 */
static int index_grow(struct tally_zone *z)
{
	struct tally__hdr *h = z->hdr;
	uint32_t hwm, *b = series_buckets(z);
	/* Read by the space check under the pool lock: atomic. */
	uint32_t cur = __atomic_load_n(&h->hash_cur, __ATOMIC_RELAXED);

	if (cur == 0) {
		/* Even a lookup reads the buckets: reserve them first. */
		cur = h->hash_buckets < 1024 ? h->hash_buckets : 1024;
		if (tally__reserve_at(z, b, (size_t)cur * sizeof(*b),
				      "the series index") < 0)
			return -errno;
		__atomic_store_n(&h->hash_cur, cur, __ATOMIC_RELAXED);
	}
	if (h->series_live + 1 <= cur / 2 || cur >= h->hash_buckets ||
	    tally__reserve_at(z, b, (size_t)cur * 2 * sizeof(*b),
			      "the series index") < 0)
		return 0; /* (without room, chains just get longer) */
	cur *= 2;
	__atomic_store_n(&h->hash_cur, cur, __ATOMIC_RELAXED);
	memset(b, 0, cur * sizeof(*b));
	hwm = atomic_load_explicit(&h->series_hwm, memory_order_relaxed);
	for (uint32_t i = 0; i < hwm; i++)
		if (series(z)[i].state == TALLY__SERIES_LIVE ||
		    series(z)[i].state == TALLY__SERIES_LONG)
			index_insert(z, i);
	return 0;
}

/*
 * The seq of a record that may lie on a page nobody reserved (the one
 * past the last record in use): read from the file, where a hole reads as
 * zero, never through the mapping, where reading a hole allocates it.  A
 * record on a page that was never reserved was never written.
 */
static uint32_t peek_seq(struct tally_zone *z, const _Atomic uint32_t *seq)
{
	uint32_t v = 0;

	if (pread(z->fd, &v, sizeof(v),
		  (off_t)((const char *)seq - (const char *)z->hdr)) !=
	    (ssize_t)sizeof(v))
		return 0;
	return v;
}

/* The family table after a writer died holding the lock. */
static uint32_t repair_families(struct tally_zone *z)
{
	struct tally__hdr *h = z->hdr;
	uint32_t nfam = atomic_load(&h->fam_count);
	uint32_t *fb = family_buckets(z), fmask = h->fam_hash_buckets - 1;

	if (nfam > h->fam_cap)
		nfam = h->fam_cap;
	atomic_store(&h->fam_count, nfam);
	if (nfam < h->fam_cap && (peek_seq(z, &families(z)[nfam].seq) & 1)) {
		families(z)[nfam].state = 0;
		seq_end(&families(z)[nfam].seq);
	}
	memset(fb, 0, h->fam_hash_buckets * sizeof(*fb));
	/* One entry a name: its generation that is not superseded, else
	 * the last one made. */
	for (uint32_t i = 0; i < nfam; i++) {
		const char *name = families(z)[i].name;
		size_t len = strnlen(name, TALLY__NAME_MAX);
		uint32_t k = (uint32_t)fnv1a(0xcbf29ce484222325ull, name,
					     len) & fmask;

		while (fb[k] && strncmp(families(z)[fb[k] - 1].name, name,
					TALLY__NAME_MAX))
			k = (k + 1) & fmask;
		if (!fb[k] || (families(z)[fb[k] - 1].flags &
			       TALLY__FAM_SUPERSEDED) ||
		    !(families(z)[i].flags & TALLY__FAM_SUPERSEDED))
			fb[k] = i + 1;
	}
	return nfam;
}

/* Is the chain of extensions of long record @i whole: each an
 * extension of this life of @i, their bytes its labels_len? */
static int chain_whole(struct tally_zone *z, uint32_t i, uint32_t hwm)
{
	const struct tally__series *s = &series(z)[i];
	uint32_t link = long_of(s).first, seq = atomic_load(&s->seq);
	size_t len = 0;

	for (unsigned k = 0; link; k++) {
		const struct tally__series_ext *e;

		if (link > hwm || k * TALLY__EXT_DATA > TALLY__LABELS_PACKED_MAX)
			return 0;
		e = ext_at(z, link - 1);
		if (e->state != TALLY__SERIES_EXT || e->owner != i ||
		    e->owner_seq != seq || e->len > TALLY__EXT_DATA)
			return 0;
		len += e->len;
		link = e->next;
	}
	return len == s->labels_len;
}

/*
 * The series table and index after a writer died holding the lock.
 * First the records: one caught mid-write is retired, a long one whose
 * extensions are not whole too.  Then the extensions: those of a live
 * long record stay, the others (of a record retired, or never
 * published) are freed with the free records.
 */
static void repair_series(struct tally_zone *z, uint32_t nfam)
{
	struct tally__hdr *h = z->hdr;
	uint32_t hwm = atomic_load(&h->series_hwm);

	if (hwm > h->desc_cap)
		hwm = h->desc_cap;
	if (hwm < h->desc_cap && (peek_seq(z, &series(z)[hwm].seq) & 1))
		hwm++; /* died before publishing the new high-water mark */
	atomic_store(&h->series_hwm, hwm);
	memset(series_buckets(z), 0,
	       __atomic_load_n(&h->hash_cur, __ATOMIC_RELAXED) * sizeof(uint32_t));
	h->series_free = 0;
	h->series_live = 0;
	for (uint32_t i = 0; i < hwm; i++) {
		struct tally__series *s = &series(z)[i];

		if (atomic_load(&s->seq) & 1) {
			s->state = TALLY__SERIES_FREE;
			seq_end(&s->seq);
		}
		if ((s->state == TALLY__SERIES_LIVE ||
		     s->state == TALLY__SERIES_LONG) && s->family >= nfam)
			s->state = TALLY__SERIES_FREE;
	}
	for (uint32_t i = 0; i < hwm; i++) {
		struct tally__series *s = &series(z)[i];

		if (s->state == TALLY__SERIES_LONG && !chain_whole(z, i, hwm)) {
			seq_begin(&s->seq);
			s->state = TALLY__SERIES_FREE;
			seq_end(&s->seq);
		}
	}
	for (uint32_t i = hwm; i-- > 0;) {
		struct tally__series *s = &series(z)[i];
		struct tally__series_ext *e = ext_at(z, i);

		if (s->state == TALLY__SERIES_LIVE ||
		    s->state == TALLY__SERIES_LONG) {
			index_insert(z, i);
			h->series_live++;
			continue;
		}
		if (e->state == TALLY__SERIES_EXT && e->owner < hwm &&
		    series(z)[e->owner].state == TALLY__SERIES_LONG &&
		    atomic_load(&series(z)[e->owner].seq) == e->owner_seq)
			continue;
		s->state = TALLY__SERIES_FREE;
		chains(z)[i] = h->series_free;
		h->series_free = i + 1;
	}
}

/*
 * Under the metrics lock, after a process died holding it: a record it
 * was writing has an odd seq.  Retire such records (their block, if any,
 * is lost to the zone), then rebuild the family index, the series index,
 * the free list and the live count from the records.  The series part
 * only once an index exists (no series record is written before).
 */
static void metrics_lock(struct tally_zone *z)
{
	if (tally__robust_lock(&z->hdr->metrics_lock)) {
		uint32_t nfam = repair_families(z);

		if (__atomic_load_n(&z->hdr->hash_cur, __ATOMIC_RELAXED))
			repair_series(z, nfam);
		atomic_fetch_add(&z->hdr->desc_gen, 1);
		pthread_mutex_consistent(&z->hdr->metrics_lock);
	}
}

/* Under the metrics lock: are the labels of record @s (of the same
 * family and length) those of long plan @p? */
static int same_long(struct tally_zone *z, const struct tally__series *s,
		     const struct plan *p)
{
	uint32_t link = long_of(s).first;
	size_t at = 0;

	if (s->state != TALLY__SERIES_LONG || long_of(s).hash != p->hash)
		return 0;
	for (; link; link = ext_at(z, link - 1)->next) {
		const struct tally__series_ext *e = ext_at(z, link - 1);

		if (e->len > p->labels_len - at ||
		    memcmp(e->data, p->labels + at, e->len))
			return 0;
		at += e->len;
	}
	return at == p->labels_len;
}

/* Under the metrics lock: 1 and the series' record in *@found when the
 * series is in the index, else 0; either way the index bucket it is (or
 * goes) in.  No index yet (hash_cur 0): no series, and no bucket. */
static int find_series(struct tally_zone *z, uint32_t fam,
		       struct plan *p, uint32_t *bucket, uint32_t *found)
{
	uint32_t link;

	*bucket = 0;
	p->hash = series_hash64(fam, p->labels, p->labels_len);
	if (!__atomic_load_n(&z->hdr->hash_cur, __ATOMIC_RELAXED))
		return 0;
	*bucket = series_bucket(z, p->hash);
	for (link = series_buckets(z)[*bucket]; link;
	     link = chains(z)[link - 1]) {
		struct tally__series *s = &series(z)[link - 1];

		if (s->family != fam || s->labels_len != p->labels_len)
			continue;
		if (p->nexts ? same_long(z, s, p) :
			       !memcmp(s->labels, p->labels, p->labels_len)) {
			*found = link - 1;
			return 1;
		}
	}
	return 0;
}

/* Under the metrics lock: a free record (from the free list, or a new
 * one whose page is reserved first); -ENOSPC when the table is full. */
static int take_record(struct tally_zone *z, uint32_t *out)
{
	struct tally__hdr *h = z->hdr;
	uint32_t idx;
	int rc;

	if (h->series_free) {
		*out = h->series_free - 1;
		h->series_free = chains(z)[*out];
		return 0;
	}
	idx = atomic_load_explicit(&h->series_hwm, memory_order_relaxed);
	if (idx >= h->desc_cap) {
		atomic_fetch_add_explicit(&h->alloc_refused, 1,
					  memory_order_relaxed);
		return tally__fail(ENOSPC, "zone \"%s\" holds %u series "
				   "already; %s", h->zone_name, h->desc_cap,
				   z->is_default ? "raise TALLY_ZONE_SERIES, "
				   "the series limit of the default zone" :
				   "create it with a larger max_series");
	}
	/* A new page of records, and of their index chains: reserved
	 * before they are written. */
	if ((uint64_t)idx * sizeof(struct tally__series) % TALLY__PAGE == 0 &&
	    ((rc = tally__reserve_at(z, &series(z)[idx], TALLY__PAGE,
				     "series records")) < 0 ||
	     (rc = tally__reserve_at(z, &chains(z)[idx], sizeof(uint32_t),
				     "the series index")) < 0))
		return rc;
	/* A record never used, or given back (all series removed, below):
	 * its seq starts above any seq a stale handle of an earlier record at
	 * this index can hold, which changed at most once per change of the
	 * table. */
	atomic_store_explicit(&series(z)[idx].seq,
			      (uint32_t)atomic_load(&h->desc_gen) * 2u,
			      memory_order_relaxed);
	*out = idx;
	return 0;
}

/* Under the metrics lock: records @rec[0 .. @n - 1], taken but not
 * used, go back to the free list. */
static void give_back(struct tally_zone *z, const uint32_t *rec, unsigned n)
{
	while (n-- > 0) {
		ext_at(z, rec[n])->state = TALLY__SERIES_FREE;
		chains(z)[rec[n]] = z->hdr->series_free;
		z->hdr->series_free = rec[n] + 1;
	}
}

/*
 * Under the metrics lock: the extension records of long plan @p, taken
 * (and counted in the high-water mark, as they are written before their
 * owner) into @ext.  On failure the records taken go back.
 */
static int take_exts(struct tally_zone *z, const struct plan *p,
		     uint32_t *ext)
{
	struct tally__hdr *h = z->hdr;
	int rc = 0;
	unsigned k;

	if (p->nexts && h->minor < TALLY__FMT_MINOR_LONG_LABELS)
		return tally__fail(E2BIG, "the labels of this series of zone "
				   "\"%s\" take %zu bytes, more than a zone "
				   "made by a libtally older than format 2.5 "
				   "(this one is %u.%u) holds: %u bytes and %u "
				   "pairs", h->zone_name, p->labels_len,
				   h->major, h->minor, TALLY__LABELS_INLINE,
				   TALLY__LABELS_INLINE_PAIRS);
	for (k = 0; k < p->nexts && rc == 0; k++) {
		if ((rc = take_record(z, &ext[k])) < 0)
			break;
		if (ext[k] == atomic_load_explicit(&h->series_hwm,
						   memory_order_relaxed))
			atomic_store_explicit(&h->series_hwm, ext[k] + 1,
					      memory_order_release);
	}
	if (rc < 0)
		give_back(z, ext, k);
	return rc;
}

/* Under the metrics lock: the records of plan @p, its extensions (if
 * any) first, into @ext, then its own, into *@idx; none on failure. */
static int take_records(struct tally_zone *z, const struct plan *p,
			uint32_t *ext, uint32_t *idx)
{
	int rc;

	if (p->nexts && (rc = take_exts(z, p, ext)) < 0)
		return rc;
	if ((rc = take_record(z, idx)) < 0)
		give_back(z, ext, p->nexts);
	return rc;
}

/* Under the metrics lock: write the extensions of record @idx, before
 * the record; they hold the seq it will have once published. */
static void write_exts(struct tally_zone *z, uint32_t idx,
		       const struct plan *p, const uint32_t *ext)
{
	uint32_t seq = atomic_load_explicit(&series(z)[idx].seq,
					    memory_order_relaxed) + 2;
	size_t at = 0;

	for (unsigned k = 0; k < p->nexts; k++) {
		struct tally__series_ext *e = ext_at(z, ext[k]);
		size_t n = p->labels_len - at < TALLY__EXT_DATA ?
				   p->labels_len - at : TALLY__EXT_DATA;

		e->state = TALLY__SERIES_EXT;
		e->pad = 0;
		e->len = (uint16_t)n;
		e->owner = idx;
		e->owner_seq = seq;
		e->next = k + 1 < p->nexts ? ext[k + 1] + 1 : 0;
		memcpy(e->data, p->labels + at, n);
		memset(e->data + n, 0, TALLY__EXT_DATA - n);
		at += n;
	}
}

/* Under the metrics lock, once the long record whose reference was @l is
 * retired: free its extensions. */
static void free_exts(struct tally_zone *z, const struct tally__long_labels *l)
{
	struct tally__hdr *h = z->hdr;
	uint32_t link = l->first;

	while (link) {
		struct tally__series_ext *e = ext_at(z, link - 1);
		uint32_t next = e->next;

		e->state = TALLY__SERIES_FREE;
		chains(z)[link - 1] = h->series_free;
		h->series_free = link;
		link = next;
	}
}

/* Under the metrics lock: write record @idx (published with its seq) and
 * enter it into the index; a long one's extensions @ext first. */
static void publish_series(struct tally_zone *z, uint32_t idx, uint32_t fam,
			   const struct plan *p, unsigned nlabels,
			   tally_block *b, uint32_t bucket, const uint32_t *ext)
{
	struct tally__hdr *h = z->hdr;
	struct tally__series *s = &series(z)[idx];

	if (p->nexts)
		write_exts(z, idx, p, ext);
	seq_begin(&s->seq);
	s->nlabels = (uint8_t)nlabels;
	s->labels_len = (uint16_t)p->labels_len;
	s->family = fam;
	s->nslots = p->nslots;
	s->slot_off = (uint64_t)(((uintptr_t)b & ~(uintptr_t)3) -
				 (uintptr_t)h);
	if (p->nexts) {
		struct tally__long_labels l = { ext[0] + 1, 0, p->hash };

		memset(s->labels, 0, sizeof(s->labels));
		memcpy(s->labels, &l, sizeof(l));
	} else {
		memcpy(s->labels, p->labels, sizeof(s->labels));
	}
	s->refs = 1;
	s->state = p->nexts ? TALLY__SERIES_LONG : TALLY__SERIES_LIVE;
	seq_end(&s->seq);
	if (idx == atomic_load_explicit(&h->series_hwm, memory_order_relaxed))
		atomic_store_explicit(&h->series_hwm, idx + 1,
				      memory_order_release);
	chains(z)[idx] = series_buckets(z)[bucket];
	series_buckets(z)[bucket] = idx + 1;
	h->series_live++;
	atomic_fetch_add_explicit(&h->desc_gen, 1, memory_order_release);
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
			const struct plan *p)
{
	struct tally__series *s = &series(z)[idx];

	m->block = (tally_block *)((char *)z->hdr + s->slot_off +
				   (p->mode & 3u));
	m->zone = z;
	m->series = idx;
	m->seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
	m->kind = (uint8_t)(p->vtype == TALLY__VT_FLOAT64 ? TALLY_FGAUGE :
			    p->kind);
	m->sub_bits = (uint8_t)p->sub_bits;
	m->max_bits = (uint8_t)p->max_bits;
}

/*
 * Under the metrics lock: when the series of @p exists, take one more
 * reference to it, fill @m and return 1; else 0 and the index bucket the
 * new series goes to.  The family's definition is checked first, so that
 * a conflicting one is refused either way; a new family is made only
 * when @create (else 0: no such series).
 */
static int find_and_ref(struct tally_zone *z, const char *name,
			struct plan *p, tally_metric *m,
			uint32_t *fam, uint32_t *bucket, int create,
			uint32_t pin)
{
	struct tally__series *s;
	uint32_t idx = 0;
	int rc;

	if ((rc = family_get(z, name, p, fam, create, pin, !pin)) < 0)
		return rc == -ENOENT ? 0 : rc;
	if (!find_series(z, *fam, p, bucket, &idx))
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

int tally__metric_register_in(struct tally_zone *z,
			      const struct tally_metric_desc *d, unsigned kind,
			      tally_metric *m, uint32_t pin)
{
	struct tally_metric_desc typed;
	struct plan p;
	tally_block *b;
	uint32_t fam = 0, idx = 0, bucket = 0;
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
	if ((rc = make_plan(d, &p)) < 0)
		return tally__metric_failed(z, kind, m, rc);
	if (!z && !(z = tally_zone_default()))
		return tally__metric_failed(NULL, kind, m, -errno);
	if (!(b = tally_block_alloc(z, p.nslots, p.mode)))
		alloc_rc = -errno;

	metrics_lock(z);
	if ((b && (rc = index_grow(z)) < 0) ||
	    (rc = find_and_ref(z, d->name, &p, m, &fam, &bucket, b != NULL,
			       pin)) != 0 ||
	    (rc = b ? take_records(z, &p, ext, &idx) : alloc_rc) < 0) {
		pthread_mutex_unlock(&z->hdr->metrics_lock);
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
	publish_series(z, idx, fam, &p, d->nlabels, b, bucket, ext);
	fill_handle(m, z, idx, &p);
	pthread_mutex_unlock(&z->hdr->metrics_lock);
	return 0;
}

/* Check @d and make its family in @z, as registering a series of it
 * would (family.c: a family is checked before any of its series); its
 * record index + 1 in *@rec, for tally__metric_register_in(). */
int tally__metric_define(struct tally_zone *z,
			 const struct tally_metric_desc *d, uint32_t *rec)
{
	struct plan p;
	uint32_t fam;
	int rc;

	if ((rc = make_plan(d, &p)) < 0)
		return rc;
	if (p.nexts && z->hdr->minor < TALLY__FMT_MINOR_LONG_LABELS)
		return tally__fail(E2BIG, "the labels of %.60s take %zu bytes, "
				   "more than a zone made by a libtally older "
				   "than format 2.5 holds: %u bytes and %u "
				   "pairs", d->name, p.labels_len,
				   TALLY__LABELS_INLINE,
				   TALLY__LABELS_INLINE_PAIRS);
	metrics_lock(z);
	rc = family_get(z, d->name, &p, &fam, 1, 0, 1);
	pthread_mutex_unlock(&z->hdr->metrics_lock);
	if (rc == 0 && rec)
		*rec = fam + 1;
	return rc;
}

int tally_metric_redefine(struct tally_zone *z,
			  const struct tally_metric_desc *d,
			  const char *const *names, unsigned n)
{
	struct tally_metric_desc typed;
	struct plan p;
	uint32_t fam, found;
	uint64_t before;
	int rc, changed = 0;

	tally__ok();
	if (!d || (n && !names))
		return tally__fail(EINVAL, "tally_metric_redefine: NULL "
				   "argument");
	typed = *d;
	if (!typed.kind)
		typed.kind = TALLY_COUNTER;
	if ((rc = make_plan(&typed, &p)) < 0)
		return rc;
	for (unsigned i = 0; i < n; i++)
		if (!names[i])
			return tally__fail(EINVAL, "tally_metric_redefine: name "
					   "%u is NULL", i);
	if (!z && !(z = tally_zone_default()))
		return -errno;
	metrics_lock(z);
	family_find(z, d->name, &found);
	if (found) {
		const struct tally__family *f = &families(z)[found - 1];
		char change[96];

		describe_change(f, &p, change, sizeof(change));
		changed = change[0] || strcmp(f->help, p.help) ||
			  strcmp(f->unit, p.unit) ||
			  (f->flags & TALLY__FAM_SUPERSEDED);
	}
	before = atomic_load_explicit(&z->hdr->redefinitions,
				      memory_order_relaxed);
	rc = family_get(z, d->name, &p, &fam, 1, 0, 1);
	if (rc == 0 && changed) {
		for (unsigned i = 0; i < n; i++) {
			family_find(z, names[i], &found);
			if (found)
				family_flag(z, &families(z)[found - 1],
					    TALLY__FAM_SUPERSEDED |
					    TALLY__FAM_RETIRED, 1);
		}
		/* Counted once, also when @d itself made a generation. */
		if (atomic_load_explicit(&z->hdr->redefinitions,
					 memory_order_relaxed) == before)
			atomic_fetch_add_explicit(&z->hdr->redefinitions, 1,
						  memory_order_relaxed);
		rc = 1;
	}
	pthread_mutex_unlock(&z->hdr->metrics_lock);
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

#define GIVE_BACK_MIN 1024u /* records: below this, keep them */

/*
 * Under the metrics lock, when the last series was removed: give the
 * series records, their index chains and the index buckets back to the
 * system (a zone that held a million series would otherwise keep their
 * 160 MB).  Readers scan up to series_hwm, lowered first; a record they
 * are copying reads as zeros (free) and is skipped.  Below GIVE_BACK_MIN
 * records the pages are kept, so that a zone whose only series comes and
 * goes does not punch and reserve a page every time.
 */
static void give_back_records(struct tally_zone *z)
{
	struct tally__hdr *h = z->hdr;
	uint32_t hwm = atomic_load_explicit(&h->series_hwm,
					    memory_order_relaxed);
	uint32_t cur = __atomic_load_n(&h->hash_cur, __ATOMIC_RELAXED);

	if (hwm < GIVE_BACK_MIN)
		return;
	atomic_store_explicit(&h->series_hwm, 0, memory_order_release);
	h->series_free = 0;
	__atomic_store_n(&h->hash_cur, 0, __ATOMIC_RELAXED);
	tally__release_at(z, series(z), (size_t)hwm * sizeof(struct tally__series));
	tally__release_at(z, chains(z), (size_t)hwm * sizeof(uint32_t));
	tally__release_at(z, series_buckets(z), (size_t)cur * sizeof(uint32_t));
	atomic_fetch_add_explicit(&h->desc_gen, 1, memory_order_release);
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
	if (m->series >= h->desc_cap)
		return tally__fail(EINVAL, "not a series of this zone");
	s = &series(z)[m->series];
	metrics_lock(z);
	/* A copy of a series removed before the records were given back
	 * points past the records in use: refused without a look (its page
	 * may be a hole). */
	if (m->series >= atomic_load_explicit(&h->series_hwm,
					      memory_order_relaxed) ||
	    (s->state != TALLY__SERIES_LIVE && s->state != TALLY__SERIES_LONG) ||
	    atomic_load_explicit(&s->seq, memory_order_relaxed) != m->seq) {
		pthread_mutex_unlock(&h->metrics_lock);
		return tally__fail(EINVAL, "series already removed");
	}
	/* Another registration still holds it: one reference fewer. */
	if (s->refs > 1) {
		s->refs--;
		pthread_mutex_unlock(&h->metrics_lock);
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
		int is_long = s->state == TALLY__SERIES_LONG;

		seq_begin(&s->seq);
		s->state = TALLY__SERIES_FREE;
		seq_end(&s->seq);
		if (is_long)
			free_exts(z, &l);
	}
	chains(z)[m->series] = h->series_free;
	h->series_free = m->series + 1;
	h->series_live--;
	atomic_fetch_add_explicit(&h->desc_gen, 1, memory_order_release);
	if (h->series_live == 0)
		give_back_records(z);
	pthread_mutex_unlock(&h->metrics_lock);

	tally_block_free(z, m->block);
	m->block = NULL;
	return 0;
}

/*
 * Is the series of handle @m gone (removed through another copy, perhaps
 * registered again since)?  A copy keeps its block pointer, whose slots
 * may hold another series by now: it is refused, as tally_metric_remove()
 * refuses it.  Without the metrics lock: a record's seq changes when the
 * record is retired and never comes back to an earlier value (a record
 * given back starts above every seq a stale handle holds), so one acquire
 * load answers; a fetch that races with the removal may see either.  A
 * record past the ones in use is refused without a look (its page may be
 * a hole).  A failed registration's handle has no zone: its block refuses.
 */
static int series_gone(const tally_metric *m)
{
	const struct tally__hdr *h;

	if (!m->zone)
		return 0;
	h = m->zone->hdr;
	return m->series >= h->desc_cap ||
	       m->series >= atomic_load_explicit(&h->series_hwm,
						 memory_order_acquire) ||
	       atomic_load_explicit(&series(m->zone)[m->series].seq,
				    memory_order_acquire) != m->seq;
}

int tally_metric_fetch(const tally_metric *m, int64_t *value)
{
	int64_t v, sum = 0;
	unsigned n;
	int rc;

	tally__ok();
	if (!m || !m->block || !value)
		return tally__fail(EINVAL, "tally_metric_fetch: NULL argument");
	if (series_gone(m))
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
	if (m->kind == TALLY_FGAUGE) {
		double d;

		if ((rc = tally_fgauge_fetch((const tally_fgauge *)m, &d)) < 0)
			return rc;
		*value = tally__f64_to_i64(d);
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
	if (series_gone(&g->metric))
		return tally__fail(EINVAL, "tally_fgauge_fetch: the series was "
				   "removed (through a copy of this handle)");
	if ((rc = tally_block_fetch(g->metric.block, 0, &bits)) < 0)
		return rc;
	*value = tally__f64_of(bits);
	return 0;
}
