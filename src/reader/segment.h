/*
 * reader/segment.h: what the reader's files share (not installed): the open
 * segment, and the checked ways to read it.  The reader uses the format and
 * process layers only, never the writer's core or metrics.  segment.c opens
 * and validates a segment, walk.c walks its series, histogram.c does the
 * histogram math, directory.c walks directories.
 */
#ifndef TALLY_SEGMENT_H
#define TALLY_SEGMENT_H

#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>

#include "format/format.h"
#include "process/process.h"
#include "tally/reader.h"

#define BATCH 512u
#define CACHE 8u
#define NO_PAGE 0xffffffffu

/* The resident pages of one chunk, as read in this batch. */
struct chunk_cache {
	uint64_t chunk;          /* UINT64_MAX: empty */
	uint32_t *pagemap;       /* chunk_pages entries: index in pages */
	uint32_t *present;       /* the page numbers that exist, ascending */
	uint32_t npresent;
	char *pages;             /* npresent pages */
	uint32_t cap;            /* pages allocated */
};

/* What a batch computed for one record. */
struct result {
	int ok;                  /* values computed */
	int bad;                 /* failed its checks: corrupt, or torn */
	int long_labels;         /* labels at labels_at in the long text */
	size_t labels_at;
	int64_t value, sum;
	int64_t count;           /* a classic histogram's (value and sum
				    hold its sum's two slots) */
	size_t percpu_at, buckets_at; /* offsets into the arenas */
};

#define MAX_LABELS TALLY__LABELS_INLINE_PAIRS /* pairs of an inline set */

struct tally_seg {
	int fd;
	uint64_t bytes_read;     /* pread by this reader: what a pass costs
				    (a statistic, for tests) */
	char path[PATH_MAX];
	struct tally__hdr hdr;
	uint64_t chunk_bytes;
	uint32_t chunk_pages;

	struct tally__metric_rec *mrecs;
	uint32_t nmrecs;          /* metric records read and validated */
	uint64_t mrecs_gen;
	uint32_t metric_changes;    /* the header's metric_changes when the
				    metric records were read (walk.c) */
	uint32_t live_metric_changes;   /* as tally__seg_read_live() found: */
	uint64_t live_redefinitions; /* 0 before format 2.5 */

	struct tally__series *rec1, *rec2;
	struct result *res;
	int64_t *percpu_arena, *bucket_arena;
	size_t percpu_cap, bucket_cap, percpu_used, bucket_used;
	/* cache[c % CACHE]: chunk c as first read; cache[CACHE + c % CACHE]:
	 * the same chunk read again later, for gauge increments (walk.c). */
	struct chunk_cache cache[2 * CACHE];
	uint64_t last_chunk_base;   /* offset of the chunk of the last slot */
	uint64_t last_chunk;
	/* The labels of each record of a batch, as parsed. */
	const char *(*lnames)[MAX_LABELS], *(*lvalues)[MAX_LABELS];
	/* The labels of the batch's long records (format 2.5), read from
	 * their extensions, and the pairs of the one being checked or
	 * passed on. */
	char *ltext;
	size_t ltext_cap, ltext_used;
	const char *long_names[TALLY__LABEL_PAIRS_MAX];
	const char *long_values[TALLY__LABEL_PAIRS_MAX];
	/* Corrupt records skipped (walk.c): metric records among those
	 * read (they stay skipped while mrecs holds them), and series
	 * records of the last pass; the message of the first of each. */
	uint32_t bad_metrics, bad_series;
	char bad_metric_msg[256], bad_series_msg[256];
	/* The per-process series gathered during a pass (pgauge.c). */
	struct tally__pg *pg;
	/* The enums' series gathered during a pass (enumset.c). */
	struct tally__es *es;
};

/* The series of one metric record and label set but one label, as a
 * pass gathers them (pgauge.c): a per-process gauge's processes, an
 * enum's states (enumset.c). */
struct tally__group {
	uint32_t metric;          /* metric record index */
	uint32_t id;              /* its first series' record index (an
				     enum: the current state's) */
	char *labels;             /* packed, without the one label */
	size_t len;
	double value;             /* an enum: the largest stamp */
	int64_t when;             /* the last set of the value kept */
	unsigned nprocs;
};

struct tally__pg {
	struct tally__group *g;
	size_t n, cap;
	uint32_t *slots;          /* hash: group index + 1, 0 empty */
	size_t nslots;
};

/* The group of @metric and packed labels @p (@n bytes) in @pg, made
 * (with @id) when missing; NULL when out of memory. */
struct tally__group *tally__group_get(struct tally__pg *pg, uint32_t metric,
				      const char *p, size_t n, uint32_t id);
void tally__groups_free(struct tally__pg *pg);
/* Packs the labels of @v into @text (TALLY__LABELS_PACKED_MAX bytes)
 * but the one at @skip (v->nlabels: none); the bytes packed. */
size_t tally__labels_pack(const struct tally_series_view *v, unsigned skip,
			  char *text);
/* The view of series @id of metric record @metric whose packed labels
 * are @labels (@len bytes), a float gauge's, values left 0: for a
 * series gathered during a pass and passed on at its end. */
void tally__group_view(struct tally_seg *s, uint32_t metric, uint32_t id,
		       const char *labels, size_t len,
		       struct tally_series_view *v);

/* Per-process gauges (pgauge.c): pass series @v of typed metric @f on to
 * @fn (*@passed 1), or gather it for tally__pg_flush(), or leave it out
 * (its process is gone, under a "live" mode).  Returns what @fn
 * returned, 0, or -errno. */
int tally__pg_take(struct tally_seg *s, struct tally_series_view *v,
		   const struct tally__metric_rec *f, double value,
		   int64_t when, tally_series_fn fn, void *arg, int *passed);
/* At the end of a pass: pass on what was gathered (counting each in
 * *@count) and forget it.  Returns what @fn returned to stop, or 0. */
int tally__pg_flush(struct tally_seg *s, tally_series_fn fn, void *arg,
		    int *count);
void tally__pg_free(struct tally_seg *s);

/* Enum metrics (enumset.c): gather series @v of enum metric @f, whose
 * value is its state's stamp; at the end of a pass, pass on every state
 * gathered, 1 for the current one of each label set and 0 for the
 * others (counting each in *@count), and forget them.  0, what @fn
 * returned to stop, or -errno. */
int tally__es_take(struct tally_seg *s, const struct tally_series_view *v,
		   const struct tally__metric_rec *f);
int tally__es_flush(struct tally_seg *s, tally_series_fn fn, void *arg,
		    int *count);
void tally__es_free(struct tally_seg *s);

/*
 * A pass over the series, in steps (walk.c), shared by tally_seg_foreach
 * and the passes over chosen records (select.c).  tally__walk_begin
 * checks @flags and the file, reads the metric records that changed and
 * gives the series table's high-water mark in *@hwm; tally__walk_run
 * reads records [@first, @first + @n) (n at most BATCH, below *@hwm) and
 * passes their live series to @fn, returning how many it passed, or
 * -errno, with what @fn returned to stop in *@stop; given @ids (@nids
 * of them, each within the batch, repeats allowed), it reads those
 * records only and passes their series in that order; tally__walk_end
 * passes on the per-process gauges gathered (unless @stop) and returns
 * what the pass returns.
 */
int tally__walk_begin(struct tally_seg *s, unsigned flags, uint32_t *hwm);
int tally__walk_run(struct tally_seg *s, uint32_t first, uint32_t n,
		    const uint32_t *ids, size_t nids, unsigned flags,
		    tally_series_fn fn, void *arg, char *badmsg, size_t badlen,
		    int *stop);
int tally__walk_end(struct tally_seg *s, int stop, int count,
		    tally_series_fn fn, void *arg);

/* Open segment @name of the directory open as @dfd (whose fstat is
 * @dir), never following a symbolic link; @path names it in messages. */
struct tally_seg *tally__seg_openat(int dfd, const struct stat *dir,
				    const char *name, const char *path,
				    const struct tally_open_opts *opts);
/* May a reader with @opts walk directory @dir (fstat @st)?  0, or -EPERM
 * with a message: owned by the caller (or opts->allow_uid, or by a group
 * of the caller with opts->allow_group), and writable by its owner only. */
int tally__dir_allowed(const struct stat *st, const char *dir,
		       const struct tally_open_opts *opts);

/* Every message of the reader names the file (segment.c). */
int tally__seg_no_memory(const struct tally_seg *s);
int tally__seg_corrupt(struct tally_seg *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Read exactly @n bytes at @off, or fail as a truncated file. */
int tally__seg_read_at(struct tally_seg *s, void *buf, size_t n,
		       uint64_t off);
/* The live header fields, re-read. */
int tally__seg_read_live(struct tally_seg *s, uint64_t *gen, uint32_t *hwm,
			 uint32_t *nmrec);
/* Is the segment's creator still running (it holds the creator lock)? */
int tally__seg_alive(const struct tally_seg *s);
/* Does anybody use the segment: its creator, or a child that inherited
 * the zone?  A segment nobody uses is dead, and stays so. */
int tally__seg_used(const struct tally_seg *s);

/*
 * tally__dir_supersede: in the directory open as @dfd (@dir names it in
 * messages), remove the dead, non-persistent, unshared segments of pid
 * @pid and zone @zone but the one created last: the earlier incarnations
 * of a pid that restarts as the same pid (a container's pid 1).
 * directory.c says why.  Return: the number removed, or -errno.
 */
int tally__dir_supersede(int dfd, const char *dir, int pid, const char *zone);

/* The reader on an open descriptor (for the fuzzer). */
struct tally_open_opts;
struct tally_seg *tally__seg_open_fd(int fd, const char *name,
				     const struct tally_open_opts *opts);

#endif /* TALLY_SEGMENT_H */
