/*
 * tally/reader.h: reading segments from another process.
 *
 * A reader opens a segment file read-only, checks everything in it before
 * use, and walks its series with their values.  It never writes to the
 * file, never blocks a writer, and never creates memory in it: the file
 * is read with pread(2), pages that do not exist are found with
 * lseek(SEEK_DATA) and read as zeros, so a reader cannot allocate a hole
 * and cannot be killed by SIGBUS if the file is truncated under it.
 *
 * A file that is not a tally segment, is truncated, foreign (another
 * user's, unless allowed), of an unknown major version, or corrupt is
 * refused with a message that names the file and what is wrong
 * (tally_errmsg(); every message of the reader starts with the file's
 * path).  docs/FORMAT.md describes the format.
 */
#ifndef TALLY_READER_H
#define TALLY_READER_H

#include <stddef.h>
#include <stdint.h>

#include "tally/zone.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tally_seg;

/* Options of tally_seg_open(); NULL means the defaults. */
struct tally_open_opts {
	long allow_uid;  /* also accept files of this uid (-1: none) */
	int allow_group; /* 1: also accept another user's files shared with
			    a group of this process (TALLY_GROUP): the file
			    belongs to one of this process's groups, is
			    readable by it and writable by nobody but its
			    owner, and lies in a directory of the same
			    owner that nobody else can write to */
};

/* What the header of a segment says, from tally_seg_info(). */
struct tally_seg_info {
	const char *path;
	int pid;                 /* the creator, in its own PID namespace */
	uint64_t start_ticks;    /* its start time, clock ticks since boot */
	uint64_t created_ns;     /* CLOCK_REALTIME at creation */
	char proc_name[16];      /* NUL-terminated */
	char zone_name[64];      /* NUL-terminated */
	unsigned major, minor;   /* format version */
	unsigned nslabs, nnodes;
	int alive;               /* 1: the creator still runs (it holds
				    the file's creator lock) */
	int in_use;              /* 1: a process (the creator, or a child
				    that inherited the zone) still uses it
				    (holds a use lock); neither alive nor
				    in use: dead, for good */
	uint64_t file_bytes;     /* the file's (virtual) size */
	uint64_t resident_bytes; /* the memory it really holds */
	uint32_t series_used;    /* series records in use or reusable */
	uint32_t families;       /* metric records (the name is the API's) */
	uint64_t generation;     /* changes with every register/remove */
	uint64_t capacity_chunks; /* chunks of chunk_slots slots the zone
				     can hold */
	uint64_t chunks_inuse;   /* chunks holding blocks */
	uint32_t chunk_slots;    /* slots per chunk */
	uint64_t alloc_refused;  /* allocations and registrations the zone
				    refused for want of room (ENOSPC) */
	uint64_t copies_refused; /* per-CPU copies that found no room when a
				    CPU first wrote to their chunk (their
				    adds were spilled, not lost) */
	uint64_t register_failed; /* registrations that failed: their
				     handles discard updates */
	int shared;              /* 1: a shared zone (TALLY_ZONE_SHARED),
				    which any process may attach: pid and
				    proc_name are its creator's, alive and
				    in_use say whether any process uses it */
	uint64_t redefinitions;  /* metric definitions that changed while
				    the zone held them: each made a new
				    generation of a metric, or superseded
				    one (tally_metric_redefine); 0 in
				    files older than format 2.5 */
};

/*
 * One series as a reader sees it, passed to a tally_series_fn.  Every
 * pointer in it is valid only until the function returns: copy what you
 * keep.  Strings are NUL-terminated and were checked: names follow the
 * Prometheus rules and label values and help are valid UTF-8.
 */
struct tally_series_view {
	uint32_t id;             /* record index: stable while it lives */
	unsigned kind;           /* TALLY_COUNTER ... TALLY_FGAUGE
				    (tally/metrics.h) */
	unsigned mode;           /* TALLY_PERCPU ... (tally/block.h) */
	const char *name, *help, *unit;
	unsigned nlabels;
	const char *const *label_names;
	const char *const *label_values;
	int64_t value;           /* counters, gauges; histograms: count;
				    TALLY_FGAUGE: fvalue rounded toward
				    zero (NaN: 0) */
	/* With TALLY_READ_PERCPU: the per-CPU values, nslabs entries: the
	 * rseq adds made on CPU c plus the fallback copy c (fallback copies
	 * belong to threads, not CPUs; the fallback adds of a thread that
	 * owned none are in no entry); zeroing is not subtracted.  For
	 * histograms, the count per CPU.  NULL and 0 for the view of a
	 * per-process gauge that combines processes (below) and for an
	 * enum's state (stateset): their values are no CPU's. */
	const int64_t *percpu;
	unsigned npercpu;
	/* Histograms. */
	int64_t sum;
	unsigned sub_bits, max_bits, nbuckets;
	const int64_t *buckets;
	/* TALLY_FGAUGE: the value; a fractional counter's (below): its
	 * exact value as a double; 0 for other series. */
	double fvalue;
	/* A per-process gauge (TALLY_PGAUGE, format 2.6), shown as a
	 * TALLY_FGAUGE: per_process is 1, combine its TALLY_COMBINE_* and
	 * nprocs the processes whose values fvalue combines (1 under
	 * TALLY_COMBINE_ALL and _LIVEALL, whose views carry pid="<pid>").
	 * The views of the modes that combine come after the other series
	 * of the pass, one per label set, without a pid label; id is the
	 * record of one of their series. */
	int per_process;
	unsigned combine, nprocs;
	/* A fractional counter (TALLY_FCOUNTER, format 2.6), shown as a
	 * TALLY_COUNTER: fractional is 1, value its whole part and frac the
	 * billionths beyond it (0 .. 999999999): the exact value is
	 * value + frac / 10^9; fvalue holds it as a double. */
	int fractional;
	unsigned frac;
	/* A classic histogram (TALLY_CHISTOGRAM, format 2.6), shown as a
	 * TALLY_HISTOGRAM: classic is 1, sub_bits and max_bits 0, bounds
	 * its nbounds finite bucket upper bounds (strictly increasing),
	 * buckets the count of each of its nbuckets = nbounds + 1 buckets,
	 * not cumulative (bucket i: the values above bounds[i - 1] and at
	 * or below bounds[i]; the last one, +Inf: those above every
	 * bound), value their total (the count).  The exact sum is
	 * sum + frac / 10^9 (sum the floor), fsum that as a double. */
	int classic;
	unsigned nbounds;
	const double *bounds;
	double fsum;
	/* A summary (TALLY_SUMMARY, format 2.7): a classic histogram (classic
	 * 1) of no bounds, its one bucket the count, that is shown as a
	 * Prometheus summary: its count (value) and exact sum only. */
	int summary;
	/* An info metric (TALLY_INFO, format 2.8), shown as a TALLY_FGAUGE
	 * of value 1: info is 1, its labels are the pairs, and it is shown
	 * as <name>_info{labels} 1 (a series whose pairs were replaced is
	 * not passed on).  An enum metric's (TALLY_ENUM, 2.8), shown as a
	 * TALLY_FGAUGE: stateset is 1, one series per state, one of its
	 * labels named as the metric (the state), value 1 for the current
	 * state (of the largest stamp of its label set), 0 for the others,
	 * passed on at the end of the pass (tally_seg_foreach()). */
	int info;
	int stateset;
};

/* Flags of tally_seg_foreach(). */
#define TALLY_READ_PERCPU 0x1u

/* Return non-zero to stop the walk (tally_seg_foreach returns it). */
typedef int (*tally_series_fn)(const struct tally_series_view *v,
			       void *arg);

/*
 * tally_seg_open: open and validate the segment at @path.
 *
 * The file must be a regular file (symbolic links are not followed),
 * owned by the caller (or opts->allow_uid), and pass every check of
 * docs/FORMAT.md.
 * Return: the segment, or NULL with errno set and tally_errmsg() naming
 * the file and the problem: ENOENT, ELOOP (a symbolic link), EACCES,
 * EPERM (another user's file), EINVAL (not a segment or corrupt),
 * EPROTONOSUPPORT (a major version this reader does not know), ENOMEM.
 * This API is MT-safe.
 */
TALLY_API struct tally_seg *tally_seg_open(const char *path,
				 const struct tally_open_opts *opts);

/* tally_seg_close: release @s (NULL is allowed).  MT-safe. */
TALLY_API void tally_seg_close(struct tally_seg *s);

/*
 * tally_seg_info: fill @info from the header (re-read: counts and
 * liveness are current).  Return: 0 or -EINVAL / -errno.
 * A segment is used by one thread at a time.
 */
TALLY_API int tally_seg_info(struct tally_seg *s, struct tally_seg_info *info);

/*
 * tally_seg_foreach: call @fn for every live series with its values.
 *
 * A per-process gauge's series are shown combined, as its combine mode
 * says (tally/metrics.h, TALLY_COMBINE_*): under the "live" modes, the
 * values of processes that are gone are left out, judged by a lock the
 * process holds on the file (the same from any PID namespace).  An enum's
 * states are passed on after the other series, 1 for the state of the
 * largest stamp of each label set and 0 for the others, in the order of
 * their records.
 *
 * Only the current definition of a name is shown: the series of a
 * metric record superseded by another generation (another kind, mode or
 * histogram layout registered later, tally/metrics.h) are skipped,
 * though the processes that hold them may still write them.
 * Help and unit are those the metric record holds now.
 *
 * Records are read, then values, then records again; a series that was
 * added, removed or changed in between is skipped for this pass, so a
 * removed series is never reported with the values of its reused block.
 * Values are sums of per-CPU copies read at slightly different times,
 * not a snapshot.
 * Return: the number of series passed to @fn, the non-zero value @fn
 * returned to stop, or a negative errno when the file turns out corrupt
 * or unreadable (tally_errmsg() says what).
 * A segment is used by one thread at a time.
 */
TALLY_API int tally_seg_foreach(struct tally_seg *s, unsigned flags, tally_series_fn fn,
		      void *arg);

/*
 * tally_seg_foreach_ids: tally_seg_foreach() over the records @ids[0 ..
 * @nids) only, in that order: call @fn for each of them that holds a live
 * series, with the same view, the same checks and the same rules
 * (a record being written, removed or reused during the pass, or of a
 * superseded metric, is skipped; per-process gauges that combine and
 * the states of enums come after the others, combined, and an enum's
 * current state chosen, over the records given).  An id is a
 * tally_series_view.id of an earlier pass: a caller that keeps only ids
 * (to sort a segment's series, say) comes back for the series without
 * keeping a copy of them.  Ids may repeat and come in any order; ids
 * that lie close together (7, 8, 9, or every tenth record) are read in
 * one batch, as a full pass reads them: the chunk pages they share are
 * read once, values computed for the ids given only.
 * A record may hold another series by now (its series was removed and
 * the record reused): check what the view says, its name and labels.
 * Return: the number of series passed to @fn, the non-zero value @fn
 * returned to stop, or a negative errno: -EINVAL for a NULL @s or @fn,
 * NULL @ids with @nids not 0, unknown @flags, or an id beyond the series
 * table's high-water mark (tally_seg_info().series_used; nothing is read
 * then), or as tally_seg_foreach() when the file turns out corrupt or
 * unreadable (tally_errmsg() says what).
 * A segment is used by one thread at a time.
 */
TALLY_API int tally_seg_foreach_ids(struct tally_seg *s, unsigned flags,
				    const uint32_t *ids, size_t nids,
				    tally_series_fn fn, void *arg);

/*
 * tally_seg_visit: tally_seg_foreach_ids() of the one record @id.
 * Return: 1 when its series was passed to @fn, 0 when the record holds no
 * live series now, what @fn returned when not 0, or a negative errno as
 * tally_seg_foreach_ids() (-EINVAL for an id beyond the table).
 * A segment is used by one thread at a time.
 */
TALLY_API int tally_seg_visit(struct tally_seg *s, unsigned flags, uint32_t id,
			      tally_series_fn fn, void *arg);

/*
 * tally_seg_skipped: the corrupt records that the last tally_seg_foreach()
 * of @s skipped (written so by any participant of a shared zone, or left
 * so by a crash): a metric record, which hides its own series, or a
 * series record, which hides only itself; the rest of the file was read.
 * When @msg is not NULL, *@msg names the file and the first of them ("" when
 * none), until the next pass over @s.
 * Return: their number, or -EINVAL (NULL @s).
 * A segment is used by one thread at a time.
 */
TALLY_API int tally_seg_skipped(const struct tally_seg *s, const char **msg);

/*
 * Histogram helpers.  tally_histogram_bucket_bounds: the smallest and largest
 * value of bucket @b.  tally_histogram_quantile: the @q quantile (0 <= q <= 1)
 * of a histogram view: the middle of the bucket holding the value of rank
 * ceil(q * count), within 2^-sub_bits (12.5% by default) of the exact
 * quantile of the observed values; for q = 1, the largest value of the
 * highest bucket used.  Values of 2^max_bits and more were counted in the
 * last bucket, whose bounds stop below 2^max_bits: their quantiles come
 * out as that bucket's.  Of a classic histogram (classic 1), as
 * Prometheus's histogram_quantile(): interpolated linearly within the
 * bucket of that rank, the highest finite bound when it is the +Inf
 * bucket.  Returns 0, or -EINVAL (not a histogram, q out of
 * range) or -ENODATA (no observations).
 */
TALLY_API void tally_histogram_bucket_bounds(unsigned b, unsigned sub_bits,
				   uint64_t *lo, uint64_t *hi);
TALLY_API int tally_histogram_quantile(const struct tally_series_view *v, double q,
			double *out);

/*
 * tally_dir_foreach: open each *.tally file of @dir (NULL: the default
 * places, see tally_default_dir) and call @fn with it, or with NULL and
 * the reason when it could not be opened (the reader skips it and goes
 * on).  The segment is closed when @fn returns.  When @s is NULL, errno
 * holds the reason's errno (as tally_seg_open() sets it) while @fn runs.
 * A file is met once per walk, whatever its names: a hard link to a
 * segment met already (the same device and inode) is skipped.
 *
 * The directory is checked once, on its descriptor, and every file is
 * opened relative to that descriptor: a directory renamed or swapped for
 * a symbolic link during the walk does not take the walk elsewhere.  It
 * must be a real directory (not a symbolic link), owned by the caller
 * (or by opts->allow_uid, or, with opts->allow_group, belong to a group
 * of the caller), and writable by nobody but its owner: the rule writers
 * apply to their own directory.
 * Return: the number of segments opened, or -errno when @dir cannot be
 * read: ENOENT, ENOTDIR (not a directory, or a symbolic link), EPERM
 * (another user's directory, or one that others can write to), EACCES.
 * @fn returning non-zero stops the walk.
 * This API is MT-safe.
 */
typedef int (*tally_seg_fn)(const char *path, struct tally_seg *s,
			    const char *error, void *arg);
TALLY_API int tally_dir_foreach(const char *dir, const struct tally_open_opts *opts,
		      tally_seg_fn fn, void *arg);

/*
 * tally_seg_foreach_pid: open the segments of process @pid in @dir; calls
 * @fn as tally_dir_foreach does, for the files whose name carries @pid
 * (<zone>.<pid>.<id>.tally, or <zone>.<pid>.tally as older versions
 * named them).  The pid is the creator's in its own PID namespace:
 * processes of several namespaces sharing @dir may all match.
 */
TALLY_API int tally_seg_foreach_pid(const char *dir, int pid,
			  const struct tally_open_opts *opts, tally_seg_fn fn,
			  void *arg);

/*
 * tally_dir_cleanup: remove the segments of @dir that are dead (nobody
 * holds their locks: their creator is gone, and no child that inherited
 * the zone still uses it) and not persistent, and the temporary files
 * (*.tally.tmp) of zone creations whose creator died (nobody holds their
 * creation lock, and they are more than 10 seconds old).  Segments of
 * live processes, other users' files and anything that is not a valid
 * segment are left alone.  The directory must be the caller's (as for
 * tally_dir_foreach without options), and everything is done relative
 * to the descriptor it was checked on: a file is opened, stamped and
 * unlinked in that directory, never through a path resolved again.
 * Return: the number of files removed, or -errno as tally_dir_foreach.
 * This API is MT-safe.
 *
 * tally_dir_cleanup_report: the same, calling @fn (when not NULL) with
 * the path of each file removed and why, in a sentence.
 */
typedef void (*tally_clean_fn)(const char *path, const char *why, void *arg);
TALLY_API int tally_dir_cleanup(const char *dir);
TALLY_API int tally_dir_cleanup_report(const char *dir, tally_clean_fn fn, void *arg);

/*
 * tally_dir_expire: tally_dir_cleanup_report() with a retention: a dead
 * segment is removed @retain_s seconds after a clean-up first found it
 * dead, so that its last values can still be read after a crash.  That
 * first clean-up stamps the file: it sets its mtime to that moment and
 * takes away its owner's write permission (the mark of the stamp).
 * @retain_s is 0 (remove dead segments at once, as tally_dir_cleanup
 * does), TALLY_RETAIN_FOREVER (only stamp them), or TALLY_RETAIN_ENV
 * ($TALLY_RETAIN, by default one hour).  Writers apply $TALLY_RETAIN
 * themselves when they create their first zone file, and when they
 * create a zone file they remove the dead segments of their own pid and
 * zone name but the newest (the earlier incarnations of a container's
 * pid 1), unless the retention is forever.
 * Return: the number of files removed, or -errno: EINVAL for a bad
 * @retain_s or $TALLY_RETAIN (tally_errmsg() says which), or as
 * tally_dir_cleanup.
 * This API is MT-safe.
 */
#define TALLY_RETAIN_FOREVER (-1LL)
#define TALLY_RETAIN_ENV     (-2LL)
TALLY_API int tally_dir_expire(const char *dir, long long retain_s,
			       tally_clean_fn fn, void *arg);

/*
 * tally_default_dir: the @i-th default place of segments, into @buf of
 * @n bytes.  i = 0: where this process's zones go: $TALLY_DIR when set;
 * otherwise $XDG_RUNTIME_DIR/tally when $XDG_RUNTIME_DIR is a directory
 * of this user that nobody else can enter (mode 0700, as systemd makes
 * /run/user/<uid>), since nobody else can create a name there; otherwise
 * /dev/shm/tally-<uid>.  i = 1: the other place a writer of the same
 * user may have used: /dev/shm/tally-<uid> when i = 0 is
 * $XDG_RUNTIME_DIR/tally (a writer without $XDG_RUNTIME_DIR, such as a
 * system service, writes there); /run/user/<uid>/tally when
 * $XDG_RUNTIME_DIR is unset and /run/user/<uid> is this user's 0700
 * directory (where the writers of the user's sessions write).  Readers
 * given no directory read both (tally_dir_foreach with a NULL @dir).
 * Return: 0; -ENOENT when there is no @i-th place; -ERANGE when @n is too
 * small; -EINVAL for a NULL @buf.
 * This API is MT-safe.
 */
TALLY_API int tally_default_dir(unsigned i, char *buf, size_t n);

/*
 * How a reader shows the integer values of a unit (tally/metrics.h,
 * TALLY_UNIT_*): in @base ("seconds", "bytes"), each value multiplied by
 * @mul and divided by 10^@div10.
 */
struct tally_unit_scale {
	const char *base;  /* the Prometheus base unit */
	uint64_t mul;      /* 1, or the bytes of one unit */
	unsigned div10;    /* 0, 3, 6 or 9 */
};

/*
 * tally_unit_scale: how values of @unit are shown in a base unit.
 * Return: 1 with *@s filled for a unit of the TALLY_UNIT_* vocabulary,
 * 0 for any other unit (NULL or "" included: shown as they are).
 * This API is MT-safe and async-signal-safe.
 */
TALLY_API int tally_unit_scale(const char *unit, struct tally_unit_scale *s);

/*
 * tally_unit_format: @v (an integer in the series' unit) in the base
 * unit, as an exact decimal number written to @buf ("0.000000001" for
 * 1 ns, "1099.511627776" for 2^40 ns; no exponent, no trailing zeros
 * after the point; "1" or, with @point, "1.0" for a whole number).
 * @negative: @v is the magnitude of a negative value.  Return: the
 * length written (without the NUL), -ENOSPC when @len is too short
 * (64 bytes are always enough), or -EINVAL when @s->div10 is more than
 * 19 (no unit's scale).
 * This API is MT-safe and async-signal-safe.
 */
TALLY_API int tally_unit_format(uint64_t v, int negative,
				const struct tally_unit_scale *s, int point,
				char *buf, size_t len);

/*
 * tally_unit_name: the name a series of @name and @unit is shown under:
 * for a unit of the vocabulary, @name with a trailing "_total" kept
 * last, the unit's own suffix ("_ns", "_nanoseconds", "_us", "_ms",
 * "_kib", ...) taken off and "_<base>" added unless already there
 * ("request_duration_ns" -> "request_duration_seconds",
 * "busy_ns_total" -> "busy_seconds_total"); any other name as it is.
 * Return: the length written, or -ENOSPC when @len is too short.
 * This API is MT-safe and async-signal-safe.
 */
TALLY_API int tally_unit_name(const char *name, const char *unit, char *buf,
			      size_t len);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_READER_H */
