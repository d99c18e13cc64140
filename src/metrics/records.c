/*
 * records.c: the series records: finding one, telling the label names
 * of a metric record's series, taking free records (and the extension
 * records of a long label set), publishing one, telling a removed one,
 * and giving records back to the zone.
 *
 * Metric records and series are records in the segment (layout.h).  Writers
 * change them under the zone's metrics lock, a robust process-shared
 * mutex, so that processes sharing a zone across fork() see one set of
 * names and duplicates are found.  Readers take no lock: a record is
 * published like a seqlock (seq odd, fields, seq even with release), and
 * a reader accepts a record only if two copies taken before and after
 * reading its values are equal with an even seq.
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

#include "metrics/table.h"
#include "tally/metrics.h"

/* Under the metrics lock: are the labels of record @s (of the same
 * metric record and length) those of long plan @p? */
static int same_long(struct tally_zone *z, const struct tally__series *s,
		     const struct tally__plan *p)
{
	uint32_t link = long_of(s).first;
	size_t at = 0;

	if (!tally__series_long(s->state) || long_of(s).hash != p->hash)
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
int tally__series_find(struct tally_zone *z, uint32_t mrec,
		       struct tally__plan *p, uint32_t *bucket, uint32_t *found)
{
	uint32_t link;

	*bucket = 0;
	p->hash = series_hash64(mrec, p->labels, p->labels_len);
	if (!__atomic_load_n(&z->hdr->hash_cur, __ATOMIC_RELAXED))
		return 0;
	*bucket = series_bucket(z, p->hash);
	for (link = series_buckets(z)[*bucket]; link;
	     link = chains(z)[link - 1]) {
		struct tally__series *s = &series(z)[link - 1];

		if (s->metric != mrec || s->labels_len != p->labels_len)
			continue;
		if (p->nexts ? same_long(z, s, p) :
			       !memcmp(s->labels, p->labels, p->labels_len)) {
			*found = link - 1;
			return 1;
		}
	}
	return 0;
}

/* The label text of live record @s, copied into @buf (a long one's
 * from its extensions, within @room bytes); its length. */
static size_t labels_of(struct tally_zone *z, const struct tally__series *s,
			char *buf, size_t room)
{
	uint32_t link;
	size_t at = 0;

	if (!tally__series_long(s->state)) {
		at = s->labels_len < TALLY__LABELS_INLINE ? s->labels_len :
							    TALLY__LABELS_INLINE;
		memcpy(buf, s->labels, at);
		return at;
	}
	for (link = long_of(s).first; link; link = ext_at(z, link - 1)->next) {
		const struct tally__series_ext *e = ext_at(z, link - 1);

		if (e->len > room - at)
			break;
		memcpy(buf + at, e->data, e->len);
		at += e->len;
	}
	return at;
}

/* Do packed labels @a and @b ("name\0value\0" pairs, sorted by name)
 * have the same names, whatever their values? */
static int same_names(const char *a, size_t an, const char *b, size_t bn)
{
	size_t i = 0, j = 0;

	while (i < an && j < bn) {
		size_t ka = strnlen(a + i, an - i), kb = strnlen(b + j, bn - j);

		if (ka != kb || memcmp(a + i, b + j, ka))
			return 0;
		i += ka + 1;
		j += kb + 1;
		if (i < an)
			i += strnlen(a + i, an - i) + 1;
		if (j < bn)
			j += strnlen(b + j, bn - j) + 1;
	}
	return i >= an && j >= bn;
}

/*
 * Under the metrics lock: has metric record @mrec series, each with the
 * label names of @p?  A binding's metric of other label names is another
 * definition that the record itself cannot tell (define.c: what brings a
 * retired generation back), so its series tell it; a record without
 * series tells nothing, and is no match.
 */
int tally__series_names_match(struct tally_zone *z, uint32_t mrec,
			      const struct tally__plan *p)
{
	uint32_t hwm = atomic_load_explicit(&z->hdr->series_hwm,
					    memory_order_relaxed);
	char buf[TALLY__LABELS_PACKED_MAX];
	int seen = 0;

	for (uint32_t i = 0; i < hwm; i++) {
		const struct tally__series *s = &series(z)[i];
		size_t n;

		if (!tally__series_live(s->state) || s->metric != mrec)
			continue;
		n = labels_of(z, s, buf, sizeof(buf));
		if (!same_names(buf, n, p->labels, p->labels_len))
			return 0;
		seen = 1;
	}
	return seen;
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
	if (idx >= h->series_cap) {
		atomic_fetch_add_explicit(&h->alloc_refused, 1,
					  memory_order_relaxed);
		return tally__fail(ENOSPC, "zone \"%s\" holds %u series "
				   "already; %s", h->zone_name, h->series_cap,
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
			      (uint32_t)atomic_load(&h->series_gen) * 2u,
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
static int take_exts(struct tally_zone *z, const struct tally__plan *p,
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
int tally__series_take(struct tally_zone *z, const struct tally__plan *p,
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
		       const struct tally__plan *p, const uint32_t *ext)
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
void tally__series_free_exts(struct tally_zone *z,
			     const struct tally__long_labels *l)
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
void tally__series_publish(struct tally_zone *z, uint32_t idx, uint32_t mrec,
			   const struct tally__plan *p, unsigned nlabels,
			   tally_block *b, uint32_t bucket, const uint32_t *ext)
{
	struct tally__hdr *h = z->hdr;
	struct tally__series *s = &series(z)[idx];

	if (p->nexts)
		write_exts(z, idx, p, ext);
	seq_begin(&s->seq);
	s->nlabels = (uint8_t)nlabels;
	s->labels_len = (uint16_t)p->labels_len;
	s->metric = mrec;
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
	if (p->type)
		s->state = p->nexts ? TALLY__SERIES_TYPED_LONG :
				      TALLY__SERIES_TYPED;
	else
		s->state = p->nexts ? TALLY__SERIES_LONG : TALLY__SERIES_LIVE;
	seq_end(&s->seq);
	if (idx == atomic_load_explicit(&h->series_hwm, memory_order_relaxed))
		atomic_store_explicit(&h->series_hwm, idx + 1,
				      memory_order_release);
	chains(z)[idx] = series_buckets(z)[bucket];
	series_buckets(z)[bucket] = idx + 1;
	h->series_live++;
	atomic_fetch_add_explicit(&h->series_gen, 1, memory_order_release);
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
void tally__series_give_back(struct tally_zone *z)
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
	atomic_fetch_add_explicit(&h->series_gen, 1, memory_order_release);
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
int tally__series_gone(const tally_metric *m)
{
	const struct tally__hdr *h;

	if (!m->zone)
		return 0;
	h = m->zone->hdr;
	return m->series >= h->series_cap ||
	       m->series >= atomic_load_explicit(&h->series_hwm,
						 memory_order_acquire) ||
	       atomic_load_explicit(&series(m->zone)[m->series].seq,
				    memory_order_acquire) != m->seq;
}
