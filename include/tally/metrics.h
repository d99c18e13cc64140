/*
 * tally/metrics.h: named counters, gauges and histograms.
 *
 * A series is a metric name, help text, optional unit and label pairs
 * (Prometheus naming), described in the zone's segment next to the block
 * that holds its values, so that a reader in another process needs
 * nothing but the file.  Registering and removing a series takes the
 * zone's metrics lock (a few hundred nanoseconds); updating one is the
 * core's inline add, with no lookup, hash or lock.
 *
 * Kinds:
 *   TALLY_COUNTER    a monotonic count: add only non-negative amounts.
 *   TALLY_GAUGE      a signed value changed by adds (+1 on submit, -1 on
 *                    completion: an in-flight gauge), per-CPU by default.
 *   TALLY_GAUGE_SET  a value that is set (tally_gauge_set), one shared
 *                    slot.  Adds work too.
 *   TALLY_HISTOGRAM  per-CPU log-linear buckets (HDR style) and a sum.
 *                    A value falls in a bucket chosen by its highest set
 *                    bit and the next sub_bits bits, so a bucket is at
 *                    most 2^-sub_bits of its lower bound wide: 12.5% with
 *                    the default sub_bits = 3.  Values from 0 to
 *                    2^max_bits - 1 (default 2^40); larger ones count in
 *                    the last bucket.  Readers compute quantiles.
 */
#ifndef TALLY_METRICS_H
#define TALLY_METRICS_H

#include <stdint.h>

#include "tally/block.h"
#include "tally/zone.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_COUNTER   1u
#define TALLY_GAUGE     2u
#define TALLY_GAUGE_SET 3u
#define TALLY_HISTOGRAM 4u

/* Limits (bytes, without the terminating NUL). */
#define TALLY_NAME_MAX   127u /* metric name */
#define TALLY_UNIT_MAX   31u
#define TALLY_HELP_MAX   839u
#define TALLY_LABELS_MAX 100u /* all pairs, as "name\0value\0" */

#define TALLY_HIST_SUB_BITS_DEFAULT 3u
#define TALLY_HIST_MAX_BITS_DEFAULT 40u

struct tally_label {
	const char *name;  /* [a-zA-Z_][a-zA-Z0-9_]*, not starting "__" */
	const char *value; /* any UTF-8 */
};

/* What to register.  Zero-filled fields take their defaults. */
struct tally_metric_desc {
	unsigned kind;          /* TALLY_COUNTER ... TALLY_HISTOGRAM */
	const char *name;       /* [a-zA-Z_:][a-zA-Z0-9_:]* */
	const char *help;       /* UTF-8, may be NULL */
	const char *unit;       /* [a-zA-Z0-9_]*, may be NULL */
	const struct tally_label *labels;
	unsigned nlabels;
	unsigned mode;          /* block mode (tally/block.h); TALLY_PERCPU
				   by default; GAUGE_SET is always shared */
	unsigned hist_sub_bits; /* 1..7, default 3 */
	unsigned hist_max_bits; /* sub_bits + 1 .. 63, default 40; the
				   histogram must fit in 503 buckets */
};

/*
 * A registered series.  It may be copied (into each worker's structures,
 * say); every copy is valid until tally_metric_remove() is called on any
 * of them, and no copy may be updated after that.
 */
typedef struct tally_metric {
	tally_block *block;
	struct tally_zone *zone;
	uint32_t series;        /* record index in the segment */
	uint32_t seq;           /* the record's seq when registered */
	uint8_t kind;
	uint8_t sub_bits;
	uint8_t max_bits;
} tally_metric;

/*
 * tally_metric_register: create the series described by @d in @z (NULL:
 * the default zone) and fill @m.
 *
 * Series of one name share one family: kind, help, unit, mode and
 * histogram layout must be the same for all of them.  Labels are stored
 * sorted by name, so their order does not matter.
 * Return: 0, or a negative errno (tally_errmsg() says more):
 *   -EINVAL   NULL @d or @m, unknown kind or mode, a name, label name,
 *             label value (not UTF-8), unit or help that breaks the rules
 *             above, a label name given twice, bad histogram bits, or a
 *             name already registered with another kind, help, unit,
 *             mode or layout;
 *   -E2BIG    a string longer than its TALLY_*_MAX limit (never cut);
 *   -EEXIST   a series with this name and these labels already exists;
 *   -ENOSPC   the zone has no room for another series, family or block;
 *   and the errors of tally_zone_default() and tally_block_alloc().
 * Whatever the error, @m (when not NULL) is then a handle that every
 * update call accepts and whose updates go nowhere, so that a service
 * runs on without the series; tally_metric_remove() and
 * tally_metric_fetch() refuse it with -EINVAL, and the zone counts the
 * failure for its readers (tally_seg_info(): register_failed).
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_metric_register(struct tally_zone *z,
			  const struct tally_metric_desc *d, tally_metric *m);

/*
 * tally_metric_remove: remove the series: readers stop seeing it at once,
 * and its block is freed for reuse.  No thread may update it afterwards.
 * Return: 0, or -EINVAL (NULL, or a series already removed).
 * This API is MT-safe.  Not async-signal-safe.
 */
TALLY_API int tally_metric_remove(tally_metric *m);

/*
 * tally_metric_fetch: the series' value in this process (a counter's or
 * gauge's value, a histogram's count).  Return: 0 or -EINVAL.  MT-safe.
 */
TALLY_API int tally_metric_fetch(const tally_metric *m, int64_t *value);

/* Which bucket a histogram puts @v in. */
static inline unsigned tally_histogram_bucket(uint64_t v, unsigned sub_bits,
					      unsigned max_bits)
{
	unsigned e;

	if (v < (1ull << sub_bits))
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	if (e >= max_bits)
		return ((max_bits - sub_bits + 1u) << sub_bits) - 1u;
	return ((e - sub_bits + 1u) << sub_bits) +
	       (unsigned)((v >> (e - sub_bits)) & ((1ull << sub_bits) - 1u));
}

/* The update calls.  Each is MT-safe and async-signal-safe, and never
 * locks, allocates or sleeps (see tally_block_add() for the one system
 * call, at a CPU's first add to a chunk). */
TALLY_API void (tally_counter_add)(const tally_metric *m, int64_t v);
TALLY_API void (tally_gauge_add)(const tally_metric *m, int64_t v);
TALLY_API void (tally_gauge_set)(const tally_metric *m, int64_t v);
TALLY_API void (tally_histogram_observe)(const tally_metric *m, uint64_t v);

static inline void tally__metric_add(const tally_metric *m, int64_t v)
{
	tally__block_add(m->block, 0, v);
}

/* A TALLY_GAUGE_SET's one copy is the block's shared slot. */
static inline void tally__gauge_set(const tally_metric *m, int64_t v)
{
	__atomic_store_n((int64_t *)((uintptr_t)m->block & ~(uintptr_t)3), v,
			 __ATOMIC_RELAXED);
}

/* Slot 0 holds the sum, slot 1 + b bucket b. */
static inline void tally__histogram_observe(const tally_metric *m,
					    uint64_t v)
{
	unsigned b = tally_histogram_bucket(v, m->sub_bits, m->max_bits);

	tally__block_add(m->block, 1u + b, 1);
	tally__block_add(m->block, 0, (int64_t)v);
}

#define tally_counter_add(m, v)       tally__metric_add((m), (v))
#define tally_counter_inc(m)          tally__metric_add((m), 1)
#define tally_gauge_add(m, v)         tally__metric_add((m), (v))
#define tally_gauge_inc(m)            tally__metric_add((m), 1)
#define tally_gauge_dec(m)            tally__metric_add((m), -1)
#define tally_gauge_set(m, v)         tally__gauge_set((m), (v))
#define tally_histogram_observe(m, v) tally__histogram_observe((m), (v))

#ifdef __cplusplus
}
#endif

#endif /* TALLY_METRICS_H */
