/*
 * programs/common/snapshot.h: every series of the segments of one or more
 * directories, copied into memory at one moment, with the process and
 * zone each came from.
 *
 * tallystat and tally-exporter walk segments the same way: open each
 * *.tally file with the reader API (tally/reader.h), skip those it
 * refuses with their reason, keep the series a filter selects, and sort
 * them by process and then by name and labels (or, for the exporter,
 * leave them in the order they were read).  A snapshot is plain memory:
 * it can be compared with the next one (rates), summed across processes
 * (aggregate.h) and printed by any back end.
 *
 * Memory: the strings and arrays of the series a snapshot collects live
 * in one arena (arena.h) that tp_snapshot_free() releases at once, and a
 * series repeats its neighbour's name, help, unit and label names by
 * pointing at them: no malloc per series.  Such series have arena = 1.
 * Series made with tp_series_copy() own their memory (arena = 0) and may
 * sit in the same snapshot; tp_series_free() frees only those.
 */
#ifndef TALLY_PROGRAMS_SNAPSHOT_H
#define TALLY_PROGRAMS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "tally/metrics.h"
#include "tally/reader.h"

#include "arena.h"
#include "kind.h"

/* Flags of struct tp_series. */
#define TP_SERIES_RESET 0x1u /* a counter went down: it was zeroed, or
				(summed) a process restarted */
#define TP_SERIES_NEW   0x2u /* not in the previous snapshot */

/* One series, with copies of everything it points to. */
struct tp_series {
	/* Where it comes from.  Summed series (aggregate.h) have pid 0,
	 * nprocs > 1 possible, and proc "*" when the processes differ. */
	int pid;
	uint64_t start_ticks;
	uint64_t created_ns;    /* CLOCK_REALTIME when its zone was made;
				   summed: the earliest */
	unsigned nprocs;        /* processes summed in it (1 otherwise) */
	int *pids;              /* summed: the nprocs pids, else NULL */
	char proc[16];
	char zone[64];
	/* What it is. */
	char *key;              /* name{label="value",...}, labels sorted by
				   name, values escaped as Prometheus does */
	char *name, *help, *unit;
	unsigned kind, mode;
	unsigned nlabels;
	char **label_names, **label_values;
	/* Its values (counters and gauges: value; histograms: value is the
	 * count, plus sum and buckets). */
	int64_t value, sum;
	double fvalue;          /* TALLY_FGAUGE: the value (value holds it
				   rounded toward zero); a fractional
				   counter's as a double */
	int fractional;         /* a counter with fractions (format 2.6,
				   tally_series_view.fractional): its exact
				   value is value + frac / 10^9 */
	unsigned frac;          /* a classic histogram's: of its sum */
	/* A classic histogram (format 2.6, tally_series_view.classic):
	 * its nbounds finite bucket bounds; nbuckets is nbounds + 1, sum
	 * + frac / 10^9 the exact sum, fsum that as a double. */
	int classic;
	int summary;            /* a summary (format 2.7): a classic
				   histogram of no bounds, count and sum */
	int info, stateset;     /* an info or enum metric's series (format
				   2.8, tally_series_view.info, stateset):
				   a TALLY_FGAUGE of value 1, or 0 or 1 */
	unsigned nbounds;
	double *bounds;
	double fsum;
	unsigned sub_bits, max_bits, nbuckets;
	int64_t *buckets;
	unsigned npercpu;       /* 0 unless read with TALLY_READ_PERCPU */
	int64_t *percpu;
	unsigned flags;         /* TP_SERIES_* */
	unsigned dead;          /* TP_LIVE or TP_DEAD: the process(es) it
				   belongs to are gone; summed: all of
				   them */
	unsigned arena;         /* 1: its strings and arrays belong to its
				   snapshot's arena (shared with other
				   series): never free them one by one */
};

/*
 * Whose a series is, and whether they still run.
 *
 * A series belongs to the processes that use its segment: the creator and
 * the children that inherited the zone, or every process that attached a
 * shared zone.  It is dead once none of them uses the file any more
 * (neither alive nor in_use: killed, or exited with TALLY_KEEP=1), and
 * stays readable for TALLY_RETAIN.
 *
 * A per-process gauge (format 2.6) is not one process's series here: the
 * reader API combines its processes' values as its record's mode says,
 * leaving out under the "live" modes those of processes that are gone
 * (src/reader/pgauge.c), and hands over the result as one series of its
 * segment.  A name says nothing of what a series is.
 *
 * A dead gauge is never a current value: tally-exporter leaves TP_DEAD
 * gauges out, tallystat marks every dead row.  Counters and histograms of
 * dead processes are what they counted, and stay.
 */
#define TP_LIVE 0u
#define TP_DEAD 1u

/* Is @s a gauge that must not be shown as a current value (a TP_DEAD
 * gauge)? */
static inline int tp_series_gone_gauge(const struct tp_series *s)
{
	return s->dead == TP_DEAD && tp_kind_is_gauge(s->kind);
}

/* One segment that was read. */
struct tp_segment {
	char *path;
	struct tally_seg_info info; /* info.path points to path */
	unsigned nseries;           /* series kept from it */
	unsigned stale;             /* 1: not read this time (skipped): its
				       series are those of an earlier read,
				       carried over (tally-exporter
				       --aggregate, retain.h) */
	unsigned records_skipped;   /* corrupt records the read skipped,
				       each hiding only its own series
				       (tally_seg_skipped) */
	char records_msg[200];      /* the first of them, without the path */
};

/* One file that could not be read, and why. */
struct tp_skipped {
	char *path;
	char *reason;               /* one sentence, without the path */
	int err;                    /* the reader's errno: EINVAL (corrupt),
				       EPERM (foreign), EPROTONOSUPPORT,
				       ENOENT (vanished), ELOOP, EACCES...;
				       0 when unknown */
};

/* Why a file was skipped, in one word, from tp_skipped.err: "corrupt"
 * (EINVAL), "foreign" (EPERM), "version" (EPROTONOSUPPORT), "vanished"
 * (ENOENT), "symlink" (ELOOP), "unreadable" (anything else):
 * tally-exporter's reason label. */
#define TP_NSKIP 6
extern const char *const tp_skip_names[TP_NSKIP];
/* The index in tp_skip_names of errno @err (either sign). */
unsigned tp_skip_reason(int err);

struct tp_snapshot {
	struct timespec mono;       /* CLOCK_MONOTONIC when reading began */
	struct timespec real;       /* CLOCK_REALTIME, same moment */
	struct tp_segment *segs;
	size_t nsegs;
	struct tp_series *series;
	size_t nseries;
	struct tp_skipped *skipped;
	size_t nskipped;
	struct tp_arena *arena;     /* NULL, or what the series with arena = 1
				       point into */
	int unsorted;               /* 1: series in the order they were read
				       (TP_ORDER_READ); 0: sorted by
				       tp_series_cmp() */
};

/* Orders of tp_collect_opts.order. */
#define TP_ORDER_SORTED 0 /* pid, zone, key (strverscmp): for people */
#define TP_ORDER_READ   1 /* the segments in directory order, the series of
			     each in its record order: no sort, for the
			     exporter (Prometheus does not care) */

/* What to read.  Zero-filled: the default directory, every series. */
struct tp_collect_opts {
	const char *const *dirs;    /* NULL or ndirs 0: the library's default
				       ($TALLY_DIR or /dev/shm/tally-<uid>) */
	unsigned ndirs;
	unsigned read_flags;        /* TALLY_READ_PERCPU */
	/* Passed to the reader (allow_uid ...); NULL: its defaults. */
	const struct tally_open_opts *open_opts;
	/* Keep a segment (non-zero) or not; NULL keeps every one. */
	int (*seg_filter)(const struct tally_seg_info *info, void *arg);
	/* Keep a series (non-zero) or not; NULL keeps every one. */
	int (*series_filter)(const struct tally_series_view *v,
			     const struct tally_seg_info *info, void *arg);
	void *arg;
	unsigned order;             /* TP_ORDER_SORTED (0) or TP_ORDER_READ */
	/* Not NULL: each series the filters keep is given to series_sink
	 * instead of being copied (snap->series stays empty): @s is the
	 * series as a snapshot would hold it (identity, key, strings, values
	 * and arrays), its strings and arrays the reader's, valid for the
	 * call only; @v is the reader's view of it (its record id,
	 * per_process...).  After the series of a segment, sink_seg_end gets
	 * the segment as kept in the snapshot (its nseries counts the series
	 * given), or NULL when it turned out corrupt half-way and is named in
	 * snap->skipped: what it gave must be forgotten.  Both get sink_arg,
	 * and return 0, or a negative errno (-ENOMEM) that ends the read:
	 * the segment at hand is then forgotten (sink_seg_end gets NULL when
	 * series_sink failed) and tp_snapshot_collect() returns it.
	 * tallystat's compact reads and tally-exporter --aggregate (which
	 * sums the series as they are read) use it. */
	int (*series_sink)(const struct tp_series *s,
			   const struct tally_series_view *v, void *arg);
	/* With series_sink, NULL or called before a segment's series are
	 * given, with sink_arg and the segment's header: @info (and
	 * info->path) stay valid until its sink_seg_end, while the reader
	 * holds the file open. */
	void (*sink_seg_begin)(const struct tally_seg_info *info, void *arg);
	int (*sink_seg_end)(const struct tp_segment *g, void *arg);
	void *sink_arg;
};

/*
 * tp_snapshot_collect: fill @snap (zeroed by the caller or freed before)
 * with the series of every segment of the directories.
 *
 * A segment the reader refuses, or that turns out corrupt while it is
 * walked, is added to snap->skipped with the reader's reason and the
 * others are read; a corrupt record hides only itself (its segment's
 * records_skipped and records_msg say so).  Series are sorted by pid, then zone, then key (numbers
 * in numeric order), unless opts->order is TP_ORDER_READ.
 * Return: 0, or -errno when a directory cannot be read; then @errbuf says
 * which and why (the series of the other directories are still there).
 * In soft mode (strbuf.h), with a series_sink only: -ENOMEM when memory
 * ran out (or what a sink returned), the read stopped there, @errbuf
 * saying so; @snap is then only to be freed.
 */
int tp_snapshot_collect(struct tp_snapshot *snap,
			const struct tp_collect_opts *opts, char *errbuf,
			size_t errlen);

/* tp_snapshot_free: release what @snap holds and zero it. */
void tp_snapshot_free(struct tp_snapshot *snap);

/* tp_series_copy: a deep copy of @src into @dst, owning its memory
 * (malloc, dst->arena = 0), whatever @src's is. */
void tp_series_copy(struct tp_series *dst, const struct tp_series *src);
/* tp_series_copy_to: the same, into @a (dst->arena = 1); strings equal to
 * @like's (may be NULL), a series of the same arena, are shared.  Returns
 * 0, or in soft mode (strbuf.h) -ENOMEM with @dst half made (its memory
 * is @a's: nothing to free but @a). */
int tp_series_copy_to(struct tp_arena *a, struct tp_series *dst,
		      const struct tp_series *src,
		      const struct tp_series *like);
/* tp_series_of_segment: @s zeroed, but for what every series of segment
 * @info shares: pid, start_ticks, created_ns, proc, zone, and nprocs 1. */
void tp_series_of_segment(struct tp_series *s,
			  const struct tally_seg_info *info);
/* tp_series_set_values: the numbers of view @v into @s: value, fvalue,
 * fractional, frac and a histogram's sum, layout, classic, nbounds and
 * fsum; not its arrays (buckets, bounds), which the caller copies or
 * borrows. */
void tp_series_set_values(struct tp_series *s,
			  const struct tally_series_view *v);
/* tp_series_free: release what @s holds (nothing when s->arena), zero it. */
void tp_series_free(struct tp_series *s);

/* The order of tp_snapshot_collect(): pid, zone, key (strverscmp). */
int tp_series_cmp(const struct tp_series *a, const struct tp_series *b);

#endif /* TALLY_PROGRAMS_SNAPSHOT_H */
