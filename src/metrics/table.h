/*
 * metrics/table.h: what the files of the series table share (not
 * installed): where the table's parts are in a zone, the seqlock of a
 * record, the hashes, and the steps of a registration that each file
 * owns (labels.c, define.c, index.c, records.c; metrics.c puts them
 * together).  The small helpers are static inline, so that each of those
 * files has them without a call.
 */
#ifndef TALLY_METRICS_TABLE_H
#define TALLY_METRICS_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "metrics/metrics.h"
#include "tally/metrics.h"

/* What a registration will write: the definition, checked, and its
 * labels, packed (labels.c). */
struct tally__plan {
	unsigned kind, vtype, mode, sub_bits, max_bits, nslots;
	unsigned type;           /* TALLY__TYPE_* (layout.h) */
	unsigned combine;        /* TALLY__TYPE_PGAUGE: TALLY__COMBINE_* */
	unsigned summary;        /* TALLY__TYPE_CHISTO: a summary (2.7) */
	unsigned nbounds;        /* TALLY__TYPE_CHISTO: its finite bounds, */
	const char *help, *unit;
	size_t labels_len;
	unsigned nexts;          /* extension records of a long set */
	uint64_t hash;           /* of the metric and labels (series_hash) */
	char labels[TALLY__LABELS_PACKED_MAX];
	/* ... the first nbounds of these (after the labels: like them,
	 * written only as far as they are used, and not zeroed by
	 * tally__plan_make). */
	double bounds[TALLY__BOUNDS_MAX];
};

static inline struct tally__metric_rec *metric_recs(struct tally_zone *z)
{
	return (struct tally__metric_rec *)((char *)z->hdr + z->hdr->metric_off);
}

static inline struct tally__series *series(struct tally_zone *z)
{
	return (struct tally__series *)((char *)z->hdr + z->hdr->series_off);
}

/* The writers' index: series buckets, metric buckets, series chains. */
static inline uint32_t *series_buckets(struct tally_zone *z)
{
	return (uint32_t *)((char *)z->hdr + z->hdr->hash_off);
}

static inline uint32_t *metric_buckets(struct tally_zone *z)
{
	return series_buckets(z) + z->hdr->hash_buckets;
}

static inline uint32_t *chains(struct tally_zone *z)
{
	return metric_buckets(z) + z->hdr->metric_hash_buckets;
}

static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Make seq odd before any field changes: a full-barrier increment (a
 * fence would do, but TSan does not model fences). */
static inline void seq_begin(_Atomic uint32_t *seq)
{
	atomic_fetch_add_explicit(seq, 1, memory_order_seq_cst);
}

static inline void seq_end(_Atomic uint32_t *seq)
{
	atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1,
			      memory_order_release);
}

/* The zone's file, for messages. */
static inline const char *zone_file(const struct tally_zone *z)
{
	const char *path = tally_zone_path(z);

	return path[0] ? path : "(an anonymous zone)";
}

static inline uint32_t name_bucket(struct tally_zone *z, const char *name)
{
	return (uint32_t)fnv1a(0xcbf29ce484222325ull, name, strlen(name)) &
	       (z->hdr->metric_hash_buckets - 1);
}

/* The hash of a series: its metric and packed labels. */
static inline uint64_t series_hash64(uint32_t mrec, const char *labels,
				      size_t len)
{
	uint64_t h = fnv1a(0xcbf29ce484222325ull, &mrec, sizeof(mrec));

	return fnv1a(h, labels, len);
}

static inline uint32_t series_bucket(struct tally_zone *z, uint64_t h)
{
	return (uint32_t)h &
	       (__atomic_load_n(&z->hdr->hash_cur, __ATOMIC_RELAXED) - 1);
}

static inline struct tally__series_ext *ext_at(struct tally_zone *z, uint32_t i)
{
	return (struct tally__series_ext *)&series(z)[i];
}

/* A long record's reference; copied, as the field is not 8-byte
 * aligned in the record. */
static inline struct tally__long_labels long_of(const struct tally__series *s)
{
	struct tally__long_labels l;

	memcpy(&l, s->labels, sizeof(l));
	return l;
}

/* The hash of live record @s: a long one keeps it in its record. */
static inline uint64_t record_hash(const struct tally__series *s)
{
	if (tally__series_long(s->state))
		return long_of(s).hash;
	return series_hash64(s->metric, s->labels, s->labels_len);
}

/* Checking a definition and packing its labels (labels.c). */
int tally__plan_make(const struct tally_metric_desc *d, struct tally__plan *p);

/* Metric records (define.c). */
void tally__describe_change(const struct tally__metric_rec *f,
			    const struct tally__plan *p, char *out, size_t len);
void tally__metric_rec_flag(struct tally_zone *z, struct tally__metric_rec *f,
			unsigned flags, int set);
uint32_t tally__metric_rec_find(struct tally_zone *z, const char *name,
			    uint32_t *found);
/* How tally__metric_rec_get() looks a name up.  @pin: the record index
 * + 1 a label family of this process was defined in (family.c), whose
 * series go on being made there, in their generation, whatever newer
 * ones exist; 0 for none.  @create: make a record (or a new generation)
 * when none serves.  @retext: the help and unit of the record found
 * become the plan's (the newest registration's text wins). */
struct tally__rec_opts {
	uint32_t pin;
	bool create, retext;
};
int tally__metric_rec_get(struct tally_zone *z, const char *name,
			  const struct tally__plan *p,
			  const struct tally__rec_opts *o, uint32_t *out);

/* The index, and the metrics lock that repairs it (index.c). */
int tally__index_grow(struct tally_zone *z);
/* 0, or -errno with a message (ETIMEDOUT: held too long by another
 * process, see tally__robust_lock). */
int tally__metrics_lock(struct tally_zone *z);
/* Release what tally__metrics_lock() took. */
void tally__metrics_unlock(struct tally_zone *z);

/* Series records (records.c). */
int tally__series_find(struct tally_zone *z, uint32_t mrec,
		       struct tally__plan *p, uint32_t *bucket, uint32_t *found);
int tally__series_names_match(struct tally_zone *z, uint32_t mrec,
			      const struct tally__plan *p);
int tally__series_take(struct tally_zone *z, const struct tally__plan *p,
		       uint32_t *ext, uint32_t *idx);
void tally__series_free_exts(struct tally_zone *z,
			     const struct tally__long_labels *l);
void tally__series_publish(struct tally_zone *z, uint32_t idx, uint32_t mrec,
			   const struct tally__plan *p, unsigned nlabels,
			   tally_block *b, uint32_t bucket, const uint32_t *ext);
void tally__series_give_back(struct tally_zone *z);
int tally__series_gone(const tally_metric *m);

#endif /* TALLY_METRICS_TABLE_H */
