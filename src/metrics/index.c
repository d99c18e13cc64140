/*
 * index.c: the writers' hash index of metrics and series (a reader
 * never uses it), growing it, and the metrics lock, which repairs the
 * table and its index after a writer died holding it.
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
int tally__index_grow(struct tally_zone *z)
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
		if (tally__series_live(series(z)[i].state))
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

/* Is any metric record of @name among the first @n retired? */
static int name_retired(struct tally_zone *z, const char *name, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if ((metric_recs(z)[i].flags & TALLY__METRIC_RETIRED) &&
		    !strncmp(metric_recs(z)[i].name, name, TALLY__NAME_MAX))
			return 1;
	return 0;
}

/*
 * One current record a name, after a writer died changing a name's
 * definition (define.c): keep the one the index points at (the last one
 * made that is not superseded) and supersede the others; when every
 * generation is superseded but none was retired (a rollback cut between
 * its two flags), the one the index points at becomes current again.
 */
static void one_current(struct tally_zone *z, uint32_t nmrec)
{
	uint32_t *fb = metric_buckets(z), fmask = z->hdr->metric_hash_buckets - 1;

	for (uint32_t i = 0; i < nmrec; i++) {
		struct tally__metric_rec *f = &metric_recs(z)[i];
		uint32_t k = (uint32_t)fnv1a(0xcbf29ce484222325ull, f->name,
					     strnlen(f->name, TALLY__NAME_MAX)) &
			     fmask;

		while (fb[k] && strncmp(metric_recs(z)[fb[k] - 1].name,
					f->name, TALLY__NAME_MAX))
			k = (k + 1) & fmask;
		if (fb[k] != i + 1) {
			if (!(f->flags & TALLY__METRIC_SUPERSEDED))
				tally__metric_rec_flag(z, f,
						TALLY__METRIC_SUPERSEDED, 1);
		} else if ((f->flags & TALLY__METRIC_SUPERSEDED) &&
			   !name_retired(z, f->name, nmrec)) {
			tally__metric_rec_flag(z, f, TALLY__METRIC_SUPERSEDED, 0);
		}
	}
}

/*
 * The metric table after a writer died holding the lock.  The record past
 * the count was being made: one caught mid-write is retired, one written
 * whole (its writer died before the count was raised) is published, as
 * its writer would have.  A record whose help and unit were being
 * rewritten keeps their whole part (tally__text_settle).
 */
static uint32_t repair_metrics(struct tally_zone *z)
{
	struct tally__hdr *h = z->hdr;
	uint32_t nmrec = atomic_load(&h->metric_count);
	uint32_t *fb = metric_buckets(z), fmask = h->metric_hash_buckets - 1;

	if (nmrec > h->metric_cap)
		nmrec = h->metric_cap;
	if (nmrec < h->metric_cap) {
		struct tally__metric_rec *f = &metric_recs(z)[nmrec];
		uint32_t seq = peek_seq(z, &f->seq);

		if (seq & 1) {
			f->state = 0;
			seq_end(&f->seq);
		} else if (seq && f->state == 1) {
			nmrec++;
		}
	}
	atomic_store(&h->metric_count, nmrec);
	for (uint32_t i = 0; i < nmrec; i++) {
		struct tally__metric_rec *f = &metric_recs(z)[i];

		if (!(atomic_load(&f->seq) & 1))
			continue;
		f->unit_len = tally__text_settle(f->unit, sizeof(f->unit), 1);
		f->help_len = tally__text_settle(f->help, tally__help_room(f), 0);
		seq_end(&f->seq);
		atomic_fetch_add(&h->metric_changes, 1);
	}
	memset(fb, 0, h->metric_hash_buckets * sizeof(*fb));
	/* One entry a name: its generation that is not superseded, else
	 * the last one made. */
	for (uint32_t i = 0; i < nmrec; i++) {
		const char *name = metric_recs(z)[i].name;
		size_t len = strnlen(name, TALLY__NAME_MAX);
		uint32_t k = (uint32_t)fnv1a(0xcbf29ce484222325ull, name,
					     len) & fmask;

		while (fb[k] && strncmp(metric_recs(z)[fb[k] - 1].name, name,
					TALLY__NAME_MAX))
			k = (k + 1) & fmask;
		if (!fb[k] || (metric_recs(z)[fb[k] - 1].flags &
			       TALLY__METRIC_SUPERSEDED) ||
		    !(metric_recs(z)[i].flags & TALLY__METRIC_SUPERSEDED))
			fb[k] = i + 1;
	}
	one_current(z, nmrec);
	return nmrec;
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
static void repair_series(struct tally_zone *z, uint32_t nmrec)
{
	struct tally__hdr *h = z->hdr;
	uint32_t hwm = atomic_load(&h->series_hwm);

	if (hwm > h->series_cap)
		hwm = h->series_cap;
	if (hwm < h->series_cap && (peek_seq(z, &series(z)[hwm].seq) & 1))
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
		if (tally__series_live(s->state) && s->metric >= nmrec)
			s->state = TALLY__SERIES_FREE;
	}
	for (uint32_t i = 0; i < hwm; i++) {
		struct tally__series *s = &series(z)[i];

		if (tally__series_long(s->state) && !chain_whole(z, i, hwm)) {
			seq_begin(&s->seq);
			s->state = TALLY__SERIES_FREE;
			seq_end(&s->seq);
		}
	}
	for (uint32_t i = hwm; i-- > 0;) {
		struct tally__series *s = &series(z)[i];
		struct tally__series_ext *e = ext_at(z, i);

		if (tally__series_live(s->state)) {
			index_insert(z, i);
			h->series_live++;
			continue;
		}
		if (e->state == TALLY__SERIES_EXT && e->owner < hwm &&
		    tally__series_long(series(z)[e->owner].state) &&
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
 * is lost to the zone), then rebuild the metric index, the series index,
 * the free list and the live count from the records.  The series part
 * only once an index exists (no series record is written before).
 */
int tally__metrics_lock(struct tally_zone *z)
{
	int rc = tally__robust_lock(&z->hdr->metrics_lock, "metrics",
				    z->path[0] ? z->path : z->hdr->zone_name);

	if (rc < 0)
		return rc;
	if (rc) {
		uint32_t nmrec = repair_metrics(z);

		if (__atomic_load_n(&z->hdr->hash_cur, __ATOMIC_RELAXED))
			repair_series(z, nmrec);
		atomic_fetch_add(&z->hdr->series_gen, 1);
		pthread_mutex_consistent(&z->hdr->metrics_lock);
	}
	return 0;
}

/* The one release of the metrics lock, beside the one take: whoever
 * took it through tally__metrics_lock() gives it back here. */
void tally__metrics_unlock(struct tally_zone *z)
{
	pthread_mutex_unlock(&z->hdr->metrics_lock);
}
