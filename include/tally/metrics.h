/*
 * tally/metrics.h: named counters, gauges and histograms.
 *
 * A series is a metric name, help text, optional unit and label pairs
 * (Prometheus naming), described in the zone's segment next to the block
 * that holds its values, so that a reader in another process needs
 * nothing but the file.  Registering and removing a series takes the
 * zone's metrics lock (a few hundred nanoseconds); updating one is the
 * core's inline add, with no lookup, hash or lock.  Registration is
 * get-or-create, with a reference count; series whose label values are
 * known only at run time are children of a label family (tally/family.h).
 *
 * Kinds, each with its own handle type, so that a call meant for
 * another kind does not compile:
 *   TALLY_COUNTER    tally_counter: a monotonic count, add only
 *                    non-negative amounts.
 *   TALLY_GAUGE      tally_gauge: a signed value changed by adds (+1 on
 *                    submit, -1 on completion: an in-flight gauge),
 *                    per-CPU by default.  Increments and decrements go
 *                    to two slots, which readers read decrements first:
 *                    a reading is never below what the gauge truly was
 *                    at some moment of the read (tally(3),
 *                    GUARANTEES).
 *   TALLY_GAUGE_SET  tally_setgauge: a value that is set
 *                    (tally_setgauge_set), one shared slot.  Adds work
 *                    too.
 *   TALLY_FGAUGE     tally_fgauge: a floating-point value (an IEEE 754
 *                    double) that is set or added to, one shared slot:
 *                    a ratio, a temperature, a time in seconds.
 *   TALLY_HISTOGRAM  tally_histogram: per-CPU log-linear buckets (HDR
 *                    style) and a sum.
 *                    A value falls in a bucket chosen by its highest set
 *                    bit and the next sub_bits bits, so a bucket is at
 *                    most 2^-sub_bits of its lower bound wide: 12.5% with
 *                    the default sub_bits = 3.  Values from 0 to
 *                    2^max_bits - 1 (default 2^40); larger ones count in
 *                    the last bucket.  Readers compute quantiles.
 *   TALLY_FCOUNTER   tally_fcounter: a counter of fractional amounts
 *                    (tally_fcounter_add(c, 0.25)), per-CPU, exact to
 *                    10^-9: whole units and billionths in two slots,
 *                    which readers show as one exact decimal.
 *   TALLY_CHISTOGRAM tally_chistogram: a classic histogram with the
 *                    application's own bucket bounds
 *                    (tally_chistogram_register, prometheus_client's
 *                    buckets): per-CPU counts of the values at or below
 *                    each bound, and their sum, exact to 10^-9.
 *                    Readers show it as a TALLY_HISTOGRAM whose view
 *                    carries the bounds.
 *   TALLY_SUMMARY    tally_summary: the count and the sum of observations
 *                    (prometheus_client's Summary, without quantiles),
 *                    per-CPU, the sum exact to 10^-9 as a classic
 *                    histogram's: a classic histogram of no bounds in the
 *                    segment, flagged as a summary (format 2.7), which
 *                    readers show with TALLY_HISTOGRAM's kind and the
 *                    view's summary set.
 *   TALLY_PGAUGE     tally_pgauge: a per-process floating-point gauge
 *                    (tally_pgauge_register): each process that uses the
 *                    zone has a value of its own, and readers combine
 *                    the values of one label set as its combine mode
 *                    says (TALLY_COMBINE_*, prometheus_client's
 *                    multiprocess modes), leaving out, under the "live"
 *                    modes, the values of processes that are gone: the
 *                    in-flight gauge of a shared zone counts the live
 *                    processes only.
 *   TALLY_INFO       an info metric (prometheus_client's Info): pairs of
 *                    text (the labels of a series) that describe the
 *                    program, one shared float slot a series (format
 *                    2.8): 1 while they are the metric's pairs, 0 once
 *                    the program replaced them.  Readers show the
 *                    series of value 1 as <name>_info{pairs} 1, with
 *                    TALLY_FGAUGE's kind and the view's info set.
 *   TALLY_ENUM       an enum metric (prometheus_client's Enum, an
 *                    OpenMetrics stateset): one series per state, whose
 *                    labels hold one named as the metric (the state),
 *                    one shared float slot each (format 2.8), the
 *                    state's stamp (tally_enum_set).  Readers show the
 *                    state of the largest stamp as 1 and the others as
 *                    0, with TALLY_FGAUGE's kind and the view's
 *                    stateset set.
 */
#ifndef TALLY_METRICS_H
#define TALLY_METRICS_H

#include <stddef.h>
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
#define TALLY_FGAUGE    5u
#define TALLY_PGAUGE    6u
#define TALLY_FCOUNTER  7u
#define TALLY_CHISTOGRAM 8u
#define TALLY_SUMMARY   9u
#define TALLY_INFO      10u
#define TALLY_ENUM      11u

/* The most finite bucket bounds a TALLY_CHISTOGRAM takes (the +Inf
 * bucket comes on top), and the longest help text it may have. */
#define TALLY_CHISTOGRAM_BOUNDS_MAX 40u
#define TALLY_CHISTOGRAM_HELP_MAX   511u

/* How readers combine the values of a TALLY_PGAUGE's processes for one
 * label set: prometheus_client's multiprocess modes.  ALL and LIVEALL show
 * each process's value, with the label pid="<pid>"; the others one value.
 * The LIVE modes leave out processes that are gone (a process is gone
 * once it exited or was killed, judged by a lock it holds on the zone's
 * file, the same from any PID namespace); the others keep the last value
 * a gone process set, until the zone is removed. */
#define TALLY_COMBINE_ALL            0u
#define TALLY_COMBINE_LIVEALL        1u
#define TALLY_COMBINE_SUM            2u
#define TALLY_COMBINE_LIVESUM        3u
#define TALLY_COMBINE_MAX            4u
#define TALLY_COMBINE_LIVEMAX        5u
#define TALLY_COMBINE_MIN            6u
#define TALLY_COMBINE_LIVEMIN        7u
#define TALLY_COMBINE_MOSTRECENT     8u /* the value set last */
#define TALLY_COMBINE_LIVEMOSTRECENT 9u

/* Limits (bytes, without the terminating NUL). */
#define TALLY_NAME_MAX   127u /* metric name */
#define TALLY_UNIT_MAX   31u
#define TALLY_HELP_MAX   839u
/* A series' labels: at most TALLY_LABEL_PAIRS_MAX pairs, whose names
 * and values take at most TALLY_LABELS_MAX bytes together.  A set of
 * more than 100 bytes (counting a NUL after each name and value) takes
 * extension records: 1 + ceil(bytes / 108) records of the zone's
 * max_series instead of one. */
#define TALLY_LABELS_MAX 4096u
#define TALLY_LABEL_PAIRS_MAX 128u

#define TALLY_HIST_SUB_BITS_DEFAULT 3u
#define TALLY_HIST_MAX_BITS_DEFAULT 40u

struct tally_label {
	const char *name;  /* [a-zA-Z_][a-zA-Z0-9_]*, not starting "__";
			      not "le" on a histogram (the exposition's
			      bucket label) */
	const char *value; /* any UTF-8 */
};

/*
 * Units of integer values that readers show in a Prometheus base unit
 * (tally/reader.h, tally_unit_scale()): a series registered with one of
 * these units keeps integers (tally_histogram_observe() of nanoseconds,
 * say), and tally-exporter, tallystat --human and the Python exposition
 * show it in seconds or bytes: the name ends "_seconds" (or "_bytes"),
 * before a counter's "_total", and values, "le" edges and sums are
 * converted exactly, as decimal numbers.  A name may end with the unit's
 * own suffix ("request_duration_ns", "..._nanoseconds"): readers replace
 * it.  Any other unit is shown as it is.
 */
#define TALLY_UNIT_NANOSECONDS  "nanoseconds"  /* x 10^-9 s */
#define TALLY_UNIT_MICROSECONDS "microseconds" /* x 10^-6 s */
#define TALLY_UNIT_MILLISECONDS "milliseconds" /* x 10^-3 s */
#define TALLY_UNIT_KILOBYTES    "kilobytes"    /* x 1000 bytes */
#define TALLY_UNIT_KIBIBYTES    "kibibytes"    /* x 1024 bytes */
#define TALLY_UNIT_MEGABYTES    "megabytes"    /* x 10^6 bytes */
#define TALLY_UNIT_MEBIBYTES    "mebibytes"    /* x 2^20 bytes */

/* What to register.  Zero-filled fields take their defaults. */
struct tally_metric_desc {
	unsigned kind;          /* TALLY_COUNTER ... TALLY_FGAUGE */
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
 * A registered series, whatever its kind: what tally_metric_remove() and
 * tally_metric_fetch() take.  Each kind's handle below holds one, as
 * .metric.  A handle may be copied (into each worker's structures, say);
 * every copy is valid until tally_metric_remove() is called on any of
 * them, and no copy may be updated after that.  Each registration is
 * removed once: removing two copies of one handle gives back two
 * references, perhaps another registration's.
 */
typedef struct tally_metric {
	tally_block *block;
	struct tally_zone *zone;
	uint32_t series;        /* record index in the segment */
	uint32_t seq;           /* the record's seq when registered */
	uint8_t kind;
	uint8_t sub_bits;        /* TALLY_PGAUGE: its TALLY_COMBINE_* */
	uint8_t max_bits;
} tally_metric;

/* One handle type per kind: the same bytes, distinct types. */
typedef struct tally_counter   { tally_metric metric; } tally_counter;
typedef struct tally_gauge     { tally_metric metric; } tally_gauge;
typedef struct tally_setgauge  { tally_metric metric; } tally_setgauge;
typedef struct tally_histogram { tally_metric metric; } tally_histogram;
typedef struct tally_fgauge    { tally_metric metric; } tally_fgauge;
typedef struct tally_pgauge    { tally_metric metric; } tally_pgauge;
typedef struct tally_fcounter  { tally_metric metric; } tally_fcounter;
/* A classic histogram's handle also points at its bounds, in the zone's
 * metric record (they never change there). */
typedef struct tally_chistogram {
	tally_metric metric;
	const double *bounds;
	unsigned nbounds;
} tally_chistogram;
/* A summary's handle is a classic histogram's of no bounds (metric.kind
 * TALLY_CHISTOGRAM, nbounds 0): tally_chistogram_observe() and
 * tally_chistogram_fetch() take it too. */
typedef tally_chistogram tally_summary;

/*
 * tally_counter_register, tally_gauge_register, tally_setgauge_register,
 * tally_histogram_register, tally_fgauge_register: get or create the
 * series described by @d in @z (NULL: the default zone) and fill the handle.  @d->kind may be left
 * 0; any other kind than the function's is refused.
 *
 * A series that exists (registered by this process or another sharing
 * the zone, and not removed) is the one the handle gets: its values go
 * on, and it holds one more reference, so that it stays until every
 * registration of it is removed.  A respawned worker, or a library
 * initialised twice, finds its series this way.
 *
 * Series of one name share one metric record: kind, help, unit, mode
 * and histogram layout.  Labels are stored sorted by name, so their order
 * does not matter.  A definition that changes (a new version of the
 * program attaching a shared zone that outlived the old one, or both
 * running at once in a rolling deploy) is never refused:
 *   - another help text or unit replaces the record's: readers show the
 *     one registered last (a label family's child keeps its label
 *     family's);
 *   - another kind, mode or histogram layout makes a new generation of
 *     the metric (or makes current again an older one of this very
 *     definition, with its series: a rollback): the series registered
 *     from now on are made in it, and readers show only the current
 *     generation of a name.  Handles of the others stay valid and their
 *     updates are kept (not shown while superseded), and
 *     a label family registered before (tally_*_family_register) goes on
 *     making its children in its own generation, so that processes of
 *     the old version run on unchanged.  The zone counts such changes
 *     (tally_seg_info(): redefinitions).
 * Return: 0, or a negative errno (tally_errmsg() says more):
 *   -EINVAL   NULL @d or handle, a kind other than the function's, an
 *             unknown mode, a name, label name, label value (not UTF-8),
 *             unit or help that breaks the rules above, a label name
 *             the exposition formats reserve (starting with "__", or
 *             "le" on a histogram; the message names the metric and the
 *             label), a label name given twice, or bad histogram bits;
 *   -E2BIG    a string longer than its TALLY_*_MAX limit (never cut);
 *             labels over TALLY_LABELS_MAX bytes or TALLY_LABEL_PAIRS_MAX
 *             pairs; labels over 100 bytes in a shared zone made by a
 *             libtally older than format 2.5, which cannot hold them;
 *   -ENOSPC   the zone has no room for another series, metric record or block
 *             (a series that exists is found even in a full zone), or
 *             for the new generation of a changed definition (the
 *             message names the metric, what changed and the file);
 *   -EOVERFLOW the series is registered 2^32 - 1 times already;
 *   and the errors of tally_zone_default() and tally_block_alloc().
 * Whatever the error, the handle (when not NULL) is then one that every
 * update call accepts and whose updates go nowhere, so that a service
 * runs on without the series; tally_metric_remove() and
 * tally_metric_fetch() refuse it with -EINVAL, and the zone counts the
 * failure for its readers (tally_seg_info(): register_failed).
 * These are MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_counter_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_counter *c);
TALLY_API int tally_gauge_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_gauge *g);
TALLY_API int tally_setgauge_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_setgauge *g);
TALLY_API int tally_histogram_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_histogram *h);
TALLY_API int tally_fgauge_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_fgauge *g);

/*
 * tally_fcounter_register: get or create the fractional counter described
 * by @d in @z (NULL: the default zone) and fill @c, as
 * tally_counter_register() (the same rules, errors and handle), with a
 * help text of at most TALLY_HELP_MAX - 8 bytes.  Its adds
 * (tally_fcounter_add) are exact to 10^-9: 0.1 added ten times is 1.
 * In a zone made by a libtally older than format 2.6, which would not
 * show it: -EPROTONOSUPPORT.
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_fcounter_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_fcounter *c);

/*
 * tally_info_register: get or create the series of the info metric
 * described by @d in @z (NULL: the default zone), whose labels are its
 * pairs (version="1.2"), fill @g as tally_fgauge_register() does (the same
 * rules, errors and handle; @d->kind may be 0 or TALLY_INFO), and set its
 * value to 1: readers show it as <name>_info{pairs} 1.  To replace the
 * pairs, register the new ones, then set the old series to 0
 * (tally_fgauge_set), which readers no longer show.  The help text takes
 * at most TALLY_HELP_MAX - 8 bytes.  In a zone older than format 2.6
 * (made by tally 0.3), which cannot hold it: -EPROTONOSUPPORT.
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_info_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_fgauge *g);

/*
 * tally_enum_register: get or create the series of one state of the enum
 * metric described by @d in @z (NULL: the default zone) and fill @g, as
 * tally_fgauge_register() does (@d->kind may be 0 or TALLY_ENUM).  One of
 * @d's labels must be named as the metric, its value the state (else
 * -EINVAL; a metric name with ':' cannot be an enum's).  A new series is
 * 0; the program registers every state, so that readers show each with
 * its value, as an OpenMetrics stateset, then starts the enum
 * (tally_enum_start) and changes its state with tally_enum_set.  The
 * other rules and errors are tally_info_register()'s.
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_enum_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_fgauge *g);

/*
 * tally_enum_set: make @states[@current] the current state of the enum
 * whose series of one label set (every state's, as tally_enum_register
 * or a TALLY_ENUM family gave them, of one zone) are @states[0 .. @n-1]:
 * one write gives it a stamp, one more than the largest of @states, and
 * the reader API shows the state of the largest stamp as 1, the others
 * as 0.  tally_enum_start: give @states[0] stamp 1 unless one of @states
 * has a stamp above 0 already (a process of the zone set a state), as
 * prometheus_client's Enum starts in its first state.  Both run under
 * the zone's metrics lock, so that changes of any threads and processes
 * never write one stamp twice: a reader always finds exactly one state
 * current once one was set.  A handle of a failed registration among
 * @states is passed over.  Setting the series with tally_fgauge_set()
 * instead has no such guarantee.  Return: 0; -EINVAL (no states, a handle that is not a
 * float gauge's, handles of two zones, @current not below @n: nothing
 * is set); another -errno when the zone's lock could not be taken (a
 * process held it too long): the states are set all the same.
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_enum_set(const tally_fgauge *const *states, size_t n,
			     size_t current);
TALLY_API int tally_enum_start(const tally_fgauge *const *states, size_t n);

/*
 * tally_fcounter_fetch: the counter's value in this process's zone, as
 * a double (tally_metric_fetch() gives its whole part).
 * Return: 0 or -EINVAL, as tally_metric_fetch().  MT-safe.
 */
TALLY_API int tally_fcounter_fetch(const tally_fcounter *c, double *value);

/*
 * tally_chistogram_register: get or create the classic histogram described
 * by @d in @z (NULL: the default zone) whose finite bucket upper bounds are
 * @bounds[0 .. @nbounds - 1] (strictly increasing, finite; at most
 * TALLY_CHISTOGRAM_BOUNDS_MAX; a +Inf bucket is always added, so a last
 * bound of +Inf is dropped), and fill @h, as tally_counter_register() (the
 * same rules, errors and handle), with a help text of at most
 * TALLY_CHISTOGRAM_HELP_MAX bytes.  A histogram of the same name with
 * other bounds is another definition (a new generation of the name, see
 * tally(3)).
 * Errors besides tally_counter_register()'s: -EINVAL for bounds that are
 * not finite and strictly increasing, -E2BIG for too many bounds or too
 * long a help text, -EPROTONOSUPPORT in a zone made by a libtally older
 * than format 2.6, whose readers would not show it.
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_chistogram_register(struct tally_zone *z,
			const struct tally_metric_desc *d,
			const double *bounds, unsigned nbounds,
			tally_chistogram *h);

/*
 * tally_chistogram_fetch: the histogram's count and sum in this process's
 * zone, and, when @buckets is not NULL, the count of each of its
 * nbounds + 1 buckets (not cumulative: bucket i counts the values above
 * bound i - 1 and at or below bound i; the last one those above every
 * bound) into @buckets[0 .. @h->nbounds].
 * Return: 0 or -EINVAL, as tally_metric_fetch().  MT-safe.
 */
TALLY_API int tally_chistogram_fetch(const tally_chistogram *h,
			int64_t *count, double *sum, int64_t *buckets);

/*
 * tally_summary_register: get or create the summary described by @d in @z
 * (NULL: the default zone) and fill @s, as tally_counter_register() (the
 * same rules, errors and handle), with a help text of at most
 * TALLY_CHISTOGRAM_HELP_MAX bytes; @d->kind may be 0 or TALLY_SUMMARY.
 * tally_summary_observe() counts a value and adds it to the sum, exactly
 * to 10^-9 (a NaN is not counted).  A classic histogram of the same name
 * is another definition (a new generation of the name).  Readers of
 * format 2.6 show it as a classic histogram of the one bucket +Inf.
 * In a zone made by a libtally older than format 2.6: -EPROTONOSUPPORT.
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_summary_register(struct tally_zone *z,
			const struct tally_metric_desc *d, tally_summary *s);

/*
 * tally_summary_fetch: the summary's count and sum in this process's zone.
 * Return: 0 or -EINVAL, as tally_metric_fetch().  MT-safe.
 */
TALLY_API int tally_summary_fetch(const tally_summary *s, int64_t *count,
				  double *sum);

/*
 * tally_pgauge_register: get or create this process's series of the
 * per-process gauge described by @d in @z (NULL: the default zone), whose
 * values readers combine as @combine says (TALLY_COMBINE_*), and fill
 * @g.  @d->kind may be 0 or TALLY_PGAUGE; @d->mode is ignored (the value
 * is one shared slot).  The series carries, besides @d's labels, the
 * label pid="<pid>:<token>" (the process's pid and its token in the
 * zone, docs/FORMAT.md), so a label named "pid" is refused; readers show
 * pid="<pid>" under TALLY_COMBINE_ALL and _LIVEALL, and no pid label
 * under the other modes.  The help text may take TALLY_HELP_MAX - 8
 * bytes.  A metric's combine mode is part of its definition: another
 * mode makes a new generation, as another kind does.
 * A handle belongs to the process that registered it: a child made by
 * fork() registers its own (the parent's handle updates the parent's
 * value).  The same handle rules as tally_counter_register() otherwise.
 * Return: 0, or a negative errno as tally_counter_register(), and
 * -EINVAL for an unknown @combine or a label named "pid"; -E2BIG for a
 * help text longer than TALLY_HELP_MAX - 8 bytes; -EMFILE, -ENFILE ...
 * when the process cannot open the description of the zone file that
 * holds the lock telling readers it runs.  A lock that readers' read
 * locks keep it from taking is no error: readers then take the process
 * for gone (docs/FORMAT.md).
 * In a zone made by a libtally older than format 2.6, which holds no
 * per-process gauges: -EPROTONOSUPPORT.
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_pgauge_register(struct tally_zone *z,
			const struct tally_metric_desc *d, unsigned combine,
			tally_pgauge *g);

/*
 * tally_metric_redefine: record @d (its kind, help, unit, mode and layout)
 * as the definition of @d->name in @z (NULL: the default zone), as a
 * metric record without series that readers do not show, for a binding
 * whose one metric is several tally metrics (the Python package's).  When the
 * zone holds another definition of that name (help or unit included),
 * the metrics @names[0 .. @n - 1] that exist are retired at the same
 * time, under the zone's lock: readers stop showing their series, and
 * their next registrations (other than the children of label families
 * registered before) make new generations, or bring a retired one back
 * when every series it holds has their label names (a change back to
 * an earlier definition resumes its counts; never a retired
 * TALLY_ENUM's, whose states are label values).  Processes that define the
 * name the new way, of other label names or another kind, thus never
 * mix their series with the old version's.  A binding may also record
 * there the very metric whose series it registers under @d->name (a
 * TALLY_FGAUGE, say; a TALLY_INFO or TALLY_ENUM too, which a zone older
 * than format 2.6 (made by tally 0.3) refuses with -EPROTONOSUPPORT),
 * leaving that name out of @names; a classic histogram and a per-process
 * gauge take tally_chistogram_redefine() and tally_pgauge_redefine().
 * Return: 1 when the definition changed (the zone counts it in
 * redefinitions), 0 when it was new or the same, or a negative errno as
 * tally_counter_register() (-EINVAL also for a NULL @names with @n > 0,
 * or a @d->kind of TALLY_CHISTOGRAM or TALLY_PGAUGE).
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_metric_redefine(struct tally_zone *z,
				    const struct tally_metric_desc *d,
				    const char *const *names, unsigned n);

/*
 * tally_chistogram_redefine: tally_metric_redefine() for a classic
 * histogram whose series the binding registers under @d->name itself
 * (tally_chistogram_register(), with these @bounds): its metric record is
 * the definition, so the histogram's own name must not be among @names.
 * The definition changed when the name's current record is not a
 * classic histogram of these bounds, help and unit (label names are no
 * part of it, as for every series of C code).  Returns as
 * tally_metric_redefine(), with the errors of
 * tally_chistogram_register() for the bounds.
 */
TALLY_API int tally_chistogram_redefine(struct tally_zone *z,
				    const struct tally_metric_desc *d,
				    const double *bounds, unsigned nbounds,
				    const char *const *names, unsigned n);

/*
 * tally_summary_redefine: tally_chistogram_redefine() for a summary
 * (tally_summary_register()) whose series the binding registers under
 * @d->name itself.  The definition changed when the name's current record
 * is not a summary of this help and unit.
 */
TALLY_API int tally_summary_redefine(struct tally_zone *z,
				     const struct tally_metric_desc *d,
				     const char *const *names, unsigned n);

/*
 * tally_pgauge_redefine: tally_metric_redefine() for a per-process gauge
 * whose series the binding registers under @d->name itself
 * (tally_pgauge_register(), with this @combine): its metric record is the
 * definition, so the gauge's own name must not be among @names.  The
 * definition changed when the name's current record is not a per-process
 * gauge of this combine mode, help and unit (label names are no part of
 * it, as for every series of C code).  Returns as tally_metric_redefine(),
 * and -EINVAL for an unknown @combine, -EPROTONOSUPPORT in a zone made by
 * a libtally older than format 2.6.
 */
TALLY_API int tally_pgauge_redefine(struct tally_zone *z,
				    const struct tally_metric_desc *d,
				    unsigned combine,
				    const char *const *names, unsigned n);

/*
 * tally_metric_remove: give back the registration of the series (pass
 * &handle.metric); the last registration's removal removes the series:
 * readers stop seeing it at once, and its block is freed for reuse.  No
 * thread may update it through this handle, or any copy of it,
 * afterwards.
 * Return: 0, or -EINVAL (NULL, or a series already removed).
 * This API is MT-safe.  Not async-signal-safe.
 */
TALLY_API int tally_metric_remove(tally_metric *m);

/*
 * tally_metric_fetch: the series' value in this process (a counter's or
 * gauge's value, a histogram's count).
 * Return: 0, or -EINVAL: NULL, the handle of a failed registration, or a
 * series removed through this handle or a copy of it (even if registered
 * again since: the copy never reads the old value).  MT-safe.
 */
TALLY_API int tally_metric_fetch(const tally_metric *m, int64_t *value);

/*
 * tally_fgauge_fetch: a TALLY_FGAUGE's value (tally_metric_fetch() gives
 * it rounded toward zero and held within the int64 range, NaN as 0).
 * Return: 0 or -EINVAL, as tally_metric_fetch().  MT-safe.
 */
TALLY_API int tally_fgauge_fetch(const tally_fgauge *g, double *value);

/*
 * tally_pgauge_fetch: this process's value of a TALLY_PGAUGE.
 * Return: 0 or -EINVAL, as tally_metric_fetch().  MT-safe.
 */
TALLY_API int tally_pgauge_fetch(const tally_pgauge *g, double *value);

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
 * call, at a CPU's first add to a chunk).  Each is an inline function of
 * its handle type; the same names are exported as functions too. */
TALLY_API void (tally_counter_add)(const tally_counter *c, int64_t v);
TALLY_API void (tally_gauge_add)(const tally_gauge *g, int64_t v);
TALLY_API void (tally_setgauge_set)(const tally_setgauge *g, int64_t v);
TALLY_API void (tally_setgauge_add)(const tally_setgauge *g, int64_t v);
TALLY_API void (tally_histogram_observe)(const tally_histogram *h,
					 uint64_t v);
TALLY_API void (tally_fgauge_set)(const tally_fgauge *g, double v);
TALLY_API void (tally_fgauge_add)(const tally_fgauge *g, double v);
TALLY_API void (tally_fcounter_add)(const tally_fcounter *c, double v);
TALLY_API void (tally_chistogram_observe)(const tally_chistogram *h,
					  double v);
TALLY_API void (tally_summary_observe)(const tally_summary *s, double v);
TALLY_API void (tally_pgauge_set)(const tally_pgauge *g, double v);
TALLY_API void (tally_pgauge_add)(const tally_pgauge *g, double v);

static inline void tally__counter_add(const tally_counter *c, int64_t v)
{
	tally__block_add(c->metric.block, 0, v);
}

/* Slot 0 holds the increments, slot 1 the decrements (a sum that only
 * falls), so that each slot is monotonic and a reader that reads slot 1
 * before slot 0 never reads below the truth.  The sign picks the slot
 * without a branch. */
static inline void tally__gauge_add(const tally_gauge *g, int64_t v)
{
	tally__block_add(g->metric.block, (unsigned)((uint64_t)v >> 63), v);
}

/* A TALLY_GAUGE_SET's one copy is the block's shared slot. */
static inline void tally__setgauge_set(const tally_setgauge *g, int64_t v)
{
	__atomic_store_n((int64_t *)((uintptr_t)g->metric.block &
				     ~(uintptr_t)3), v, __ATOMIC_RELAXED);
}

static inline void tally__setgauge_add(const tally_setgauge *g, int64_t v)
{
	tally__block_add(g->metric.block, 0, v);
}

/* Slot 0 holds the sum, slot 1 + b bucket b. */
static inline void tally__histogram_observe(const tally_histogram *h,
					    uint64_t v)
{
	unsigned b = tally_histogram_bucket(v, h->metric.sub_bits,
					    h->metric.max_bits);

	tally__block_add(h->metric.block, 1u + b, 1);
	tally__block_add(h->metric.block, 0, (int64_t)v);
}

/* A TALLY_FGAUGE's shared slot holds the bits of a double.  Setting it
 * is one store; adding is a compare-and-swap loop, since no CPU adds
 * floating-point numbers to memory atomically. */
static inline int64_t *tally__fgauge_word(const tally_fgauge *g)
{
	return (int64_t *)((uintptr_t)g->metric.block & ~(uintptr_t)3);
}

static inline void tally__fgauge_set(const tally_fgauge *g, double v)
{
	int64_t bits;

	__builtin_memcpy(&bits, &v, sizeof(bits));
	__atomic_store_n(tally__fgauge_word(g), bits, __ATOMIC_RELAXED);
}

static inline void tally__fgauge_add(const tally_fgauge *g, double v)
{
	int64_t *w = tally__fgauge_word(g);
	int64_t old = __atomic_load_n(w, __ATOMIC_RELAXED), bits;
	double d;

	do {
		__builtin_memcpy(&d, &old, sizeof(d));
		d += v;
		__builtin_memcpy(&bits, &d, sizeof(bits));
	} while (!__atomic_compare_exchange_n(w, &old, bits, 1,
					      __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
}

/* A TALLY_PGAUGE is a TALLY_FGAUGE's slot (slot 0) and the time of its
 * last set (slot 1), which only the "mostrecent" modes read: the time is
 * taken out of line (a clock read), and only for them. */
TALLY_API void tally__pgauge_stamp(const tally_pgauge *g);

static inline void tally__pgauge_set(const tally_pgauge *g, double v)
{
	tally__fgauge_set((const tally_fgauge *)g, v);
	if (g->metric.sub_bits >= TALLY_COMBINE_MOSTRECENT)
		tally__pgauge_stamp(g);
}

static inline void tally__pgauge_add(const tally_pgauge *g, double v)
{
	tally__fgauge_add((const tally_fgauge *)g, v);
	if (g->metric.sub_bits >= TALLY_COMBINE_MOSTRECENT)
		tally__pgauge_stamp(g);
}

/* A TALLY_FCOUNTER adds the whole part of @v to slot 0 and its
 * fraction, in billionths rounded to the nearest, to slot 1: two per-CPU
 * adds, each exact.  An amount that is not positive and finite, or not
 * below 2^63, is ignored (a counter only goes up). */
static inline void tally__fcounter_add(const tally_fcounter *c, double v)
{
	int64_t whole, nanos;

	if (!(v > 0.0) || !(v < 9223372036854775808.0))
		return;
	whole = (int64_t)v;
	nanos = (int64_t)((v - (double)whole) * 1e9 + 0.5);
	if (nanos >= 1000000000) {
		whole++;
		nanos -= 1000000000;
	}
	if (whole)
		tally__block_add(c->metric.block, 0, whole);
	if (nanos)
		tally__block_add(c->metric.block, 1, nanos);
}

/* A TALLY_CHISTOGRAM counts @v in the first bucket whose bound is at
 * least @v (the +Inf bucket past the last), and adds it to the sum: its
 * floor to slot 0, the rest, in billionths rounded to the nearest, to
 * slot 1; three per-CPU adds.  A NaN is ignored; beyond +-2^63 the sum
 * takes +-2^63 (prometheus_client would give an infinite sum). */
static inline void tally__chistogram_observe(const tally_chistogram *h,
					     double v)
{
	unsigned i = 0, n = h->nbounds;
	int64_t whole, nanos;

	if (v != v)
		return;
	while (i < n && v > h->bounds[i])
		i++;
	tally__block_add(h->metric.block, 2u + i, 1);
	if (v >= 9223372036854775807.0) {
		whole = INT64_MAX;
		nanos = 0;
	} else if (v <= -9223372036854775808.0) {
		whole = INT64_MIN;
		nanos = 0;
	} else {
		/* The floor, without libm: truncation, one less below 0. */
		whole = (int64_t)v;
		if ((double)whole > v)
			whole--;
		nanos = (int64_t)((v - (double)whole) * 1e9 + 0.5);
		if (nanos >= 1000000000) {
			whole++;
			nanos -= 1000000000;
		}
	}
	if (whole)
		tally__block_add(h->metric.block, 0, whole);
	if (nanos)
		tally__block_add(h->metric.block, 1, nanos);
}

/* A summary's block is a classic histogram's of no bounds: the count in
 * slot 2. */
static inline void tally__summary_observe(const tally_summary *s, double v)
{
	tally__chistogram_observe(s, v);
}

#define tally_counter_add(c, v)       tally__counter_add((c), (v))
#define tally_counter_inc(c)          tally__counter_add((c), 1)
#define tally_gauge_add(g, v)         tally__gauge_add((g), (v))
#define tally_gauge_inc(g)            tally__gauge_add((g), 1)
#define tally_gauge_dec(g)            tally__gauge_add((g), -1)
#define tally_setgauge_set(g, v)      tally__setgauge_set((g), (v))
#define tally_setgauge_add(g, v)      tally__setgauge_add((g), (v))
#define tally_histogram_observe(h, v) tally__histogram_observe((h), (v))
#define tally_fgauge_set(g, v)        tally__fgauge_set((g), (v))
#define tally_fgauge_add(g, v)        tally__fgauge_add((g), (v))
#define tally_fcounter_add(c, v)      tally__fcounter_add((c), (v))
#define tally_chistogram_observe(h, v) tally__chistogram_observe((h), (v))
#define tally_summary_observe(s, v)   tally__summary_observe((s), (v))
#define tally_pgauge_set(g, v)        tally__pgauge_set((g), (v))
#define tally_pgauge_add(g, v)        tally__pgauge_add((g), (v))
#define tally_pgauge_inc(g)           tally__pgauge_add((g), 1.0)
#define tally_pgauge_dec(g)           tally__pgauge_add((g), -1.0)

#ifdef __cplusplus
}
#endif

#endif /* TALLY_METRICS_H */
