/*
 * programs/tallystat/tallystat.h: what the parts of tallystat share: the
 * options, a report's rows, and the back ends that print them.
 *
 * tallystat reads every segment into a snapshot (programs/common), takes
 * the difference of two per process (delta.c), sums across processes with
 * -a (common/aggregate.c), chooses a snapshot's series for a report
 * (report.c), adds the intervals up for the Average: rows (average.c),
 * and hands the report to one back end: aligned text (emit_text.c,
 * table.c) or sysstat's JSON envelope (emit_json.c), which make each row
 * from its series as they print it (ts_report_row).  Without -a or -P
 * no snapshot of the series is read: compact.c keeps per series its
 * values and record id, rates.c takes the deltas of two such reads,
 * caverage.c sums them for the Average: rows, and the back ends walk
 * either kind of report through struct ts_iter.  args.c reads the
 * command line, segments.c does --list and --clean, main.c runs the
 * loop.
 */
#ifndef TALLYSTAT_H
#define TALLYSTAT_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "match.h"
#include "snapshot.h"
#include "strbuf.h"

#define PROG "tallystat"
#ifndef TALLYSTAT_VERSION
#define TALLYSTAT_VERSION "0"
#endif

/* CPUs that -P can name: more than any slab count the library makes. */
#define TS_MAX_CPUS 4096

/* A flag of struct tp_series kept in delta snapshots: the value differs
 * from the previous read (for -z on gauges). */
#define TS_CHANGED  0x100u
/* The series is new but its zone is older than the previous read (it was
 * not seen before: unreadable, or filtered): no rate can be given. */
#define TS_UNKNOWN  0x200u

struct ts_options {
	const char **dirs;          /* --dir, repeatable; none: default */
	unsigned ndirs;
	struct tally_open_opts open_opts; /* --allow-uid, --allow-group */
	double interval;            /* seconds; 0: one since-start report */
	unsigned long count;        /* reports, 0: forever */
	int *pids;                  /* -p */
	unsigned npids;
	regex_t comm_re;            /* -C */
	int have_comm;
	const char *zone_glob;      /* -Z, --zone */
	struct tp_selector *sels;   /* positional selectors, or'ed */
	unsigned nsels;
	int aggregate;              /* -a */
	int percpu;                 /* -P given */
	int allcpus;                /* -P ALL */
	unsigned char *cpus;        /* -P list: cpus[c] != 0 (TS_MAX_CPUS) */
	int json;                   /* -o JSON */
	int human;                  /* --human */
	int timestamp;              /* -t */
	int omit_first;             /* -y */
	int omit_idle;              /* -z */
	int list, clean;            /* --list, --clean */
	int color;                  /* decided from the tty and env */
	unsigned series_width;      /* the Series column's maximum */
};

enum ts_report_kind { TS_SINCE_START, TS_INTERVAL, TS_AVERAGE };

/* A gauge's value as a double (a TALLY_FGAUGE's own). */
static inline double ts_gauge_value(const struct tp_series *s)
{
	return s->kind == TALLY_FGAUGE ? s->fvalue : (double)s->value;
}

/*
 * The quantiles of a histogram's row, in order: the value, the text
 * column's heading and the JSON key (docs/tallystat-json.md, whose
 * schema the tests check the output against).  The last, 1.0, is the
 * upper bound of the highest bucket used ("Max<=").
 */
#define TS_NQ 4
struct ts_quantile {
	double q;
	const char *column, *key;
};
extern const struct ts_quantile ts_quantiles[TS_NQ];

/* One line of a report, made when it is printed (ts_report_row). */
struct ts_row {
	const struct tp_series *s;  /* identity and labels; in interval
				       reports its values are deltas */
	int64_t value;              /* counter: total or increase; gauge:
				       current; histogram: count */
	int64_t total;              /* counter/histogram: current total */
	double rate;                /* per second; NAN: none */
	double mean_gauge;          /* TS_AVERAGE gauges: the mean */
	int reset;                  /* went down: shown as a reset */
	/* Histograms. */
	int64_t sum;
	double fsum;             /* a classic histogram's sum */
	int have_q;
	double mean, q[TS_NQ];      /* of ts_quantiles */
	/* Per CPU (with -P): rates for counters and histogram counts,
	 * values for gauges; NAN where the series has no such CPU. */
	unsigned ncpu;
	double *cpu;
};

/* A process that appeared or exited during the run. */
struct ts_event {
	int started;                /* 1: appeared, 0: exited */
	int pid;
	char proc[16];
	char zone[64];
	const char *path;
};

struct ts_report {
	enum ts_report_kind kind;
	struct timespec when;       /* CLOCK_REALTIME */
	double seconds;             /* the interval; TS_AVERAGE: all of
				       them; TS_SINCE_START: 0 */
	/* The series of the rows, in order; a row itself is made from its
	 * series when a back end asks for it (ts_report_row), and never
	 * kept: a report of a million series holds a pointer a row. */
	const struct tp_series **sel;
	size_t nrows;
	const struct ts_average *av; /* TS_AVERAGE: the sums */
	struct ts_event *events;
	size_t nevents;
	const struct tp_skipped *skipped; /* files skipped for the first
					     time in this report */
	size_t nskipped;
	unsigned ncpus;             /* CPU columns (-P), see cpu_ids */
	unsigned *cpu_ids;
	/* Not NULL: the rows are those of a compact read (compact.c), not
	 * sel; omit_zero leaves out its series of value 0 (-z). */
	const struct ts_compact *cp;
	int omit_zero;
};

struct ts_host {
	char nodename[256], sysname[65], release[65], machine[65];
	long ncpus;
};

/* args.c: parsers of the command line, each returning 0 or -EINVAL with
 * a one-line reason in @err. */
int ts_parse_cpulist(const char *s, unsigned char *cpus, char *err,
		     size_t errlen);
int ts_parse_interval(const char *s, double *out, char *err, size_t errlen);
int ts_parse_count(const char *s, unsigned long *out, char *err,
		   size_t errlen);
int ts_parse_pids(const char *s, int **pids, unsigned *npids, char *err,
		  size_t errlen);
int ts_parse_options(int argc, char **argv, struct ts_options *o);
void ts_usage(FILE *f);
void ts_options_free(struct ts_options *o);

/* report.c */
struct tp_snapshot;
/* Rows of the values since each process started, from @cur. */
void ts_report_since_start(struct ts_report *r, const struct tp_snapshot *cur,
			   const struct ts_options *o);
/* The difference @cur - @prev as a snapshot of deltas (delta.c), whose
 * strings are @cur's: free it before @cur. */
void ts_delta(const struct tp_snapshot *prev, const struct tp_snapshot *cur,
	      struct tp_snapshot *delta);
/* The delta of one series into @o, a copy of @c whose buckets and
 * per-CPU values are its own: @p is the series of the previous read
 * (NULL: none); @known, for none, whether the series began since that
 * read (ts_baseline_known()) so that its whole value is its delta. */
void ts_delta_one(struct tp_series *o, const struct tp_series *c,
		  const struct tp_series *p, int known);
int ts_baseline_known(const struct tp_snapshot *prev,
		      const struct tp_series *c);
/* Rows of an interval of @seconds from a delta snapshot. */
void ts_report_interval(struct ts_report *r, const struct tp_snapshot *d,
			double seconds, const struct ts_options *o);
/* Events between two snapshots (appended to @r). */
void ts_report_events(struct ts_report *r, const struct tp_snapshot *prev,
		      const struct tp_snapshot *cur);
void ts_report_free(struct ts_report *r);
/* Building a report of other series (average.c): add @s to its rows
 * (*@max: the most per-CPU values of one), then choose the CPU columns. */
void ts_report_select(struct ts_report *r, const struct tp_series *s,
		      size_t *cap, unsigned *max);
void ts_report_choose_cpus(struct ts_report *r, unsigned max,
			   const struct ts_options *o);
/* Row @i of @r into @row; ts_row_free() releases its per-CPU values. */
void ts_report_row(const struct ts_report *r, size_t i, struct ts_row *row);
void ts_row_free(struct ts_row *row);
/* Row of series @s of @r into @row (a compact read's, compact.c). */
void ts_report_row_of(const struct ts_report *r, const struct tp_series *s,
		      struct ts_row *row);

/*
 * compact.c: a report since start without a snapshot.  ts_compact_new()
 * sets @co so that tp_snapshot_collect() hands it each series (the
 * snapshot then holds the segments and the files skipped, no series);
 * ts_compact_finish() orders the segments of @snap, which must outlive
 * the compact read, and returns -1 when two segments share a pid, start
 * time and zone (their series would interleave: read a snapshot
 * instead).  ts_report_compact() makes the report of it.
 */
struct ts_compact;
struct tp_collect_opts;
struct ts_compact *ts_compact_new(struct tp_collect_opts *co);
int ts_compact_finish(struct ts_compact *c, const struct tp_snapshot *snap);
size_t ts_compact_nseries(const struct ts_compact *c);
void ts_compact_free(struct ts_compact *c);
void ts_report_compact(struct ts_report *r, const struct ts_compact *c,
		       const struct ts_options *o);
/*
 * rates.c: the delta of each entry of @cur against the read @prev (whose
 * snapshot must still be there), into cur->d, with the formulas and
 * flags of ts_delta().  An entry is the same series in both reads when
 * its process (pid, start time, zone), the hash of its key and kind,
 * and its bucket count are the same.
 */
void ts_compact_delta(struct ts_compact *cur, const struct ts_compact *prev);
/* The report of an interval of @seconds ending with compact read @c,
 * whose deltas ts_compact_delta() has taken. */
void ts_report_compact_interval(struct ts_report *r,
				const struct ts_compact *c, double seconds,
				const struct ts_options *o);

/*
 * The rows of a report in order, one series at a time, whatever holds
 * them: ts_iter_next() gives the next series (NULL at the end), valid
 * until the next call; ts_iter_row() makes its row.  Flags: only the
 * histograms, or only the others; TS_ITER_IDENT: only the identity of
 * each series is needed (pid, proc, zone, start_ticks, created_ns, dead,
 * kind), not its texts, which a compact read would fetch.
 */
#define TS_ITER_HIST   0x1u
#define TS_ITER_SCALAR 0x2u
#define TS_ITER_IDENT  0x4u
struct ts_iter {
	const struct ts_report *r;
	unsigned flags;
	size_t i;                   /* sel: the next row */
	const struct tp_series *cur;
	/* A compact read's: where it is, and the current series. */
	uint32_t g;                 /* in its segment order */
	size_t at;                  /* its entry */
	struct tally_seg *seg;      /* segment segno's, open for the */
	uint32_t segno;             /* batch: its own (own 1) or the read's */
	int own;                    /* hold of it (compact.c) */
	struct tp_series s;
	/* The texts of a batch of entries (req[0 .. nreq)), read in one
	 * pass over their records (ids): entry req[j]'s from text.p +
	 * tat[j] (SIZE_MAX: not found), bnl[j] label pairs. */
	size_t *req, *tat;
	uint32_t *ids;
	unsigned *bnl, *bmode;
	size_t nreq, bcur, cbj;
	struct tp_buf text, scratch;
	char **lab;
	unsigned caplab;
};
#define TS_BATCH 512
void ts_iter_begin(struct ts_iter *it, const struct ts_report *r,
		   unsigned flags);
const struct tp_series *ts_iter_next(struct ts_iter *it);
void ts_iter_row(const struct ts_iter *it, struct ts_row *row);
void ts_iter_end(struct ts_iter *it);

/* average.c: the sums behind the Average: rows. */
struct ts_average;
struct ts_average *ts_average_new(void);
void ts_average_add(struct ts_average *a, const struct tp_snapshot *d,
		    double seconds);
unsigned long ts_average_intervals(const struct ts_average *a);
void ts_report_average(struct ts_report *r, const struct ts_average *a,
		       const struct ts_options *o);
/* What row @row of the Average: report (of series @s) takes from the
 * sums: gauges' means, a reset's rate over the run. */
void ts_average_row(const struct ts_report *r, const struct tp_series *s,
		    struct ts_row *row);
void ts_average_free(struct ts_average *a);

/* caverage.c: the same sums of a run of compact reads, whose deltas
 * ts_compact_delta() has taken; ts_caverage_add() takes over the
 * segments of @cur that the sums need (@cur's report is to be printed
 * before).  ts_caverage_row() completes row @row of the sums' entry @x
 * as ts_average_row() does. */
struct ts_caverage;
struct ts_caverage *ts_caverage_new(void);
void ts_caverage_add(struct ts_caverage *av, struct ts_compact *cur,
		     double seconds);
unsigned long ts_caverage_intervals(const struct ts_caverage *av);
void ts_report_caverage(struct ts_report *r, const struct ts_caverage *av,
			const struct ts_options *o);
void ts_caverage_row(const struct ts_report *r, size_t x, struct ts_row *row);
void ts_caverage_free(struct ts_caverage *av);

/* Fill a row of a histogram from counts (deltas or totals). */
void ts_row_histogram(struct ts_row *row, const struct tp_series *s);

/* emit_text.c, emit_json.c: the back ends. */
struct ts_emitter {
	void (*begin)(const struct ts_host *h, const struct ts_options *o,
		      const struct timespec *now);
	void (*report)(const struct ts_report *r, const struct ts_options *o);
	void (*end)(const struct ts_options *o);
};
extern const struct ts_emitter ts_emit_text, ts_emit_json;

/* Display helpers shared by the text back end and --list (emit_text.c). */
size_t ts_display_width(const char *s);
/* @s cut to @width columns, the last one an ellipsis when cut; malloc'ed. */
char *ts_truncate(const char *s, size_t width);
void ts_format_time(char *out, size_t n, const struct timespec *t,
		    int with_date);

/* emit_json.c: pieces of the envelope that --list shares. */
struct tp_buf;
void ts_json_timestamp(struct tp_buf *b, const struct timespec *t);
void ts_json_host(struct tp_buf *b, const struct ts_host *h,
		  const struct timespec *now);

/* segments.c: --list and --clean; -p, -C and --zone on a segment. */
int ts_seg_selected(const struct tally_seg_info *in,
		    const struct ts_options *o);
/* What the reports read, as @o says: directories, -P, -p, -C, --zone and
 * the selectors (@o must outlive @co). */
void ts_collect_opts(const struct ts_options *o, struct tp_collect_opts *co);
int ts_list(const struct ts_options *o, const struct ts_host *h);
int ts_clean(const struct ts_options *o);

/* host information for the banner. */
void ts_host_get(struct ts_host *h);

#endif /* TALLYSTAT_H */
