/*
 * bench.h: what the experiments of tally-bench share: timing, repeats and
 * statistics, CPU pinning, rows (printed as fixed-width text, as JSON, or
 * passed from a re-executed child), targets and the driver's options.
 *
 * Every experiment measures its baselines in the same run as tally and
 * reports ratios of medians, so that a result survives a noisy machine.
 */
#ifndef TALLY_BENCH_H
#define TALLY_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct tally_zone;

#define BENCH_MAX_REPEAT  100
#define BENCH_MAX_THREADS 256
#define BENCH_MAX_ROWS    96
#define BENCH_MAX_TARGETS 16
#define BENCH_MAX_PLOTS   8
#define BENCH_MAX_SWEEP   16

/* Options of every subcommand; each one uses the fields it needs. */
struct bench_opts {
	uint64_t adds;         /* counter: adds per worker */
	uint64_t blocks;       /* alloc: blocks allocated and freed per thread */
	uint64_t batch;        /* alloc: rules allocated before they are freed */
	uint64_t mem_counters; /* alloc: counters (slots) of the memory test */
	unsigned repeat;       /* runs per configuration */
	unsigned threads;      /* counter: workers, 0 = one per CPU;
				  alloc: the largest thread count (1..T) */
	unsigned slabs;        /* alloc: forced slab count (0 = skip) */
	uint64_t series;       /* metrics, exporter: series (0: default) */
	unsigned sweep[BENCH_MAX_SWEEP]; /* counter: more thread counts,
				  measured pinned (--sweep 1,2,4,8) */
	unsigned nsweep;
	int json, quick, quiet, no_child;
	const char *child;     /* hidden: "fallback", "nodes" or "slabs" */
	const char *plot_dir;  /* --plot DIR: charts and JSON go there */
};

/*
 * A contender of an experiment whose contenders differ in the loop their
 * workers run: its name in the rows, and which loop (an enum of the
 * experiment's own).
 */
struct bench_conf {
	const char *name;
	int kind;
};

#define BENCH_NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Min, max, median, mean and standard deviation of a sample. */
struct bench_stats {
	double min, max, median, mean, sd;
	unsigned n;
};

/*
 * One configuration: a fixed-width row of the text report and an object
 * of the JSON one.  ns[] is the time of one operation per thread (mean of
 * the threads) and rate[] the total throughput in millions of operations
 * (or rules) per second, one entry per run.
 */
struct bench_row {
	char config[40];
	char profile[16];      /* alloc: "1 action", "2 actions", "pair",
				  "memory"; counter: "" */
	unsigned threads;
	int pinned;
	unsigned slabs;        /* per-CPU copies (0: not applicable) */
	unsigned n;
	double ns[BENCH_MAX_REPEAT];
	double rate[BENCH_MAX_REPEAT];
	struct bench_stats ns_st, rate_st;
	double ratio[4];       /* experiment-defined ratios; NAN if none */
	double overlap[BENCH_MAX_REPEAT]; /* counter: sum of the workers' CPU
				  time / (workers x wall time), per run */
	struct bench_stats overlap_st;
	int checked;           /* 1: observed was compared with expected */
	int lossy;             /* a baseline allowed to lose counts */
	int64_t expected, observed;
	double bytes;          /* memory: bytes per counter; NAN if none */
	double cpus_wrote;     /* memory: CPUs that wrote each counter */
	int failed;            /* a lossless configuration lost counts */
	char note[64];
};

struct bench_target {
	char what[72];
	char cmp[3];           /* "<=" or ">=" */
	double limit, value;
	char unit[8];          /* "x", "ns", "B" */
	int known;             /* 0: not measured in this run */
	int met;
	char note[96];         /* why it was not measured, or "" */
	const char *cpu_dep;   /* what of the CPU it measures (a target that
				  depends on the microarchitecture), or NULL:
				  it holds on every host */
};

/*
 * A chart of --plot DIR (plot.c): one line per configuration (rows with
 * the same config, and the same value of the split field if any), y
 * against x, with error bars from the min to the max of the runs where
 * a row has more than one.  Configurations whose name starts with
 * `ours` (default "tally") are drawn solid, the others (the baselines)
 * dashed with open points.  DIR/<file>.png, .dat and .gp are written;
 * `cd DIR && gnuplot <file>.gp` draws the PNG again.
 */
enum bench_field {
	BENCH_F_NONE,
	BENCH_F_THREADS,       /* row.threads */
	BENCH_F_SLABS,         /* row.slabs */
	BENCH_F_PINNED,        /* row.pinned (split only) */
	BENCH_F_RATE,          /* rate[]: median, min, max */
	BENCH_F_NS,            /* ns[]: median, min, max */
	BENCH_F_BYTES,         /* bytes (one value) */
	BENCH_F_RATIO0,        /* ratio[0], where a scenario keeps an x of
				  its own (pernode: the forced node count) */
};

struct bench_plot {
	const char *file;      /* file name without extension */
	const char *title;
	const char *xlabel, *ylabel;
	enum bench_field x, y;
	enum bench_field split; /* BENCH_F_NONE: one line per config */
	const char *profile;   /* only rows of this profile; NULL: any */
	int pinned;            /* only pinned (1) / unpinned (0); -1: any */
	unsigned threads;      /* only rows with this many threads; 0: any */
	int logx, logy;        /* log scale (base 2 on x, 10 on y) */
	const char *ours;      /* NULL: "tally" */
};

/* The results of one subcommand. */
struct bench_doc {
	const char *bench;     /* "counter" or "alloc" */
	const char *rate_name; /* JSON name of rate[]: "mops", "mrules" */
	const char *ratio_names[4]; /* JSON names of ratio[]; NULL: unused */
	struct bench_row rows[BENCH_MAX_ROWS];
	unsigned nrows;
	struct bench_target targets[BENCH_MAX_TARGETS];
	unsigned ntargets;
	char params[1024];     /* "key":value pairs, JSON, without braces */
	char summary[1024];    /* the SUMMARY line, without "SUMMARY " */
	char headline[8192];   /* ministat-style text, may be empty */
	struct bench_plot plots[BENCH_MAX_PLOTS]; /* charts of --plot */
	unsigned nplots;
};

/* Time: wall (CLOCK_MONOTONIC) and this thread's CPU time, which does not
 * advance while another process has the CPU. */
uint64_t bench_now_ns(void);
uint64_t bench_thread_cpu_ns(void);

/* Statistics of v[0..n-1] (n >= 1). */
void bench_stats(const double *v, unsigned n, struct bench_stats *st);
void bench_row_finish(struct bench_row *r);
/*
 * The exact-total check of run r->n (call it before r->n++): the row
 * keeps the worst run's observed total, the farthest from expected, so
 * that a single loss shows.
 */
void bench_row_check(struct bench_row *r, int64_t expected, int64_t observed);

/*
 * A timed team of worker threads, as every multi-threaded experiment
 * runs one: thread i is pinned to cpus[i % ncpu] (cpus NULL: not
 * pinned), waits at a barrier for the others, then runs body(ctx, i)
 * between its timestamps (wall and thread CPU time); body returns the
 * operations it did.  A body that changes %fs:8 is caught and the word
 * repaired (bench_tcb_word()).
 */
typedef uint64_t (*bench_body_fn)(void *ctx, unsigned i);

struct bench_team {
	unsigned n;
	uint64_t t0, t1;                     /* earliest start, latest end */
	uint64_t cpu_ns[BENCH_MAX_THREADS];  /* each thread's CPU time */
	uint64_t ops[BENCH_MAX_THREADS];     /* and its operations */
	int pin_failed, clobbered;
};

void bench_team_run(struct bench_team *t, unsigned n, const int *cpus,
		    unsigned ncpu, bench_body_fn body, void *ctx);
/* Run r->n of @r: ns (CPU time per operation, the threads' mean), rate
 * (Mops/s of wall time), overlap, and the notes of a failed pin or a
 * clobbered %fs:8 (which fails the row).  The caller checks the total
 * and counts the run (r->n++). */
void bench_team_record(const struct bench_team *t, struct bench_row *r);

/* CPUs this process may run on (its affinity mask), and pinning. */
unsigned bench_cpus(int *cpus, unsigned max);
int bench_pin(int cpu);
const char *bench_cpu_list(void);

/* Whether an executable @prog is in a directory of $PATH (of
 * /usr/bin:/bin when $PATH is unset or empty). */
int bench_on_path(const char *prog);

/*
 * The word at %fs:8 (glibc's DTV pointer on x86-64).  A tally add must
 * never change it; tally-bench saves it around every loop of adds,
 * restores it and reports the row as failed when it changed, so that a
 * library that clobbers it is reported instead of crashing the next
 * pthread_create().  0 and no-ops elsewhere.
 */
static inline uintptr_t bench_tcb_word(void)
{
#if defined(__x86_64__) && defined(__linux__)
	uintptr_t v;

	__asm__ __volatile__("movq %%fs:8, %0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

static inline void bench_tcb_restore(uintptr_t v)
{
#if defined(__x86_64__) && defined(__linux__)
	__asm__ __volatile__("movq %0, %%fs:8" : : "r"(v) : "memory");
#else
	(void)v;
#endif
}

/* Rows and targets. */
struct bench_row *bench_row_add(struct bench_doc *d, const char *config,
				const char *profile, unsigned threads,
				int pinned, unsigned slabs);
struct bench_row *bench_row_find(struct bench_doc *d, const char *config,
				 const char *profile, unsigned threads,
				 int pinned, unsigned slabs);
void bench_target(struct bench_doc *d, const char *what, const char *cmp,
		  double limit, double value, const char *unit);
/* Why the last target added was not measured (its value is then null). */
void bench_target_note(struct bench_doc *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The last target added depends on the microarchitecture: @why (a
 * static string) says what of the CPU it measures. */
void bench_target_cpu(struct bench_doc *d, const char *why);
void bench_print_targets(const struct bench_doc *d, FILE *f);
void bench_print_json(const struct bench_doc *d, const struct bench_opts *o,
		      FILE *f);
int bench_failed(const struct bench_doc *d);

/*
 * JSON numbers: every double printed into JSON goes through these, which
 * print a finite value with %.9g and anything else (a figure not
 * measured: NaN, infinity) as null, so that every document parses.
 * bench_json_fmt() writes into buf (32 bytes) and returns it.
 */
void bench_json_num(FILE *f, double v);
const char *bench_json_fmt(char *buf, double v);
void bench_json_str(FILE *f, const char *s);
/* One measured figure as a JSON object of a "rows" array: what, unit, the
 * min, median and max of @st and the @n values; a comma unless @last. */
void bench_json_sample(FILE *f, const char *what, const char *unit,
		       const double *v, unsigned n,
		       const struct bench_stats *st, int last);

/* The end of a document whose rows came before ("rows": [ ... left
 * open): closes them, then "targets" (what, limit, value, met, note) and
 * "summary" from @d, and the document. */
void bench_json_targets_end(FILE *f, const struct bench_doc *d);

/*
 * The loops several scenarios time (loops.c): @n thread-local adds folded
 * into *@total at the end; @n atomic adds to *@word; @n adds of 1 to slot
 * 0 of @b.
 */
struct tally_block;
void bench_add_tls(uint64_t n, uint64_t *total);
void bench_add_atomic(uint64_t n, uint64_t *word);
void bench_add_block(struct tally_block *b, uint64_t n);

/*
 * Where the run ran (host.c): the CPU (vendor, family, model and its
 * name), the kernel, whether glibc registered rseq, the CPUs online and
 * the 1-minute load average.  bench_print_host() prints it as one line
 * of text ("ran on: ..."), bench_json_host() as the member "host":{...}
 * of a JSON object, and bench_print_summary() prints that line and then
 * the SUMMARY line of @d with cpu=, kernel=, glibc_rseq= and load= added.
 */
struct bench_host {
	char vendor[64], family[16], model[16], model_name[128];
	char kernel[160];
	int glibc_rseq;
	long cpus;
	double load1; /* -1: unknown */
};
void bench_host(struct bench_host *h);
void bench_print_host(FILE *f);
void bench_json_host(FILE *f);
void bench_print_summary(const struct bench_doc *d);

/* Declare a chart of --plot (copied into d->plots). */
void bench_plot_add(struct bench_doc *d, const struct bench_plot *p);

/*
 * With --plot DIR (and not in a child): DIR/<d->bench>.json and every
 * chart d declares; a no-op otherwise.  Returns 0, or -1 when gnuplot
 * failed (reported on stderr).
 */
int bench_save(const struct bench_doc *d, const struct bench_opts *o);
/* The end of a scenario: "tally-bench <bench>: @why" on stderr when a
 * check failed (in @d, or in a child: @child_failed), the document saved
 * (bench_save), and the exit status: 0, or 1 for a failed check or a
 * document that could not be saved. */
int bench_finish(const struct bench_doc *d, const struct bench_opts *o,
		 const char *why, int child_failed);

/* DIR/name opened for writing with --plot DIR (created if needed), NULL
 * without --plot or in a child; dies when it cannot be created. */
FILE *bench_out_open(const struct bench_opts *o, const char *name);
/* 1 when gnuplot is on $PATH. */
int bench_have_gnuplot(void);

/*
 * ministat-style comparison of samples a (x) with b (+ or *): N, min,
 * max, median, mean, stddev, and the difference of the means at 95%
 * confidence (Student's t), appended to out.
 */
void bench_ministat(char *out, size_t outsz, const char *title,
		    const struct bench_row *x, const struct bench_row *const *others,
		    unsigned nothers);

/*
 * Progress: one line on stderr, rewritten in place, only when stderr is a
 * terminal and not --quiet.  bench_progress_step() shows step `done` of
 * `total` (1-based), run `rep` of `nrep` and an ETA from the time the
 * steps so far took since bench_progress_init().
 */
void bench_progress_init(const struct bench_opts *o, const char *tag);

/*
 * Starts @d, the document of the experiment @bench: zeroed, @rate_name
 * the JSON name of its rates, @ratios the JSON names of its ratios (NULL
 * after the last one used), and the progress line, tagged "@bench
 * (child)" in a re-executed child (o->child).
 */
void bench_doc_start(struct bench_doc *d, const struct bench_opts *o,
		     const char *bench, const char *rate_name,
		     const char *const ratios[4]);

/*
 * A zone of @capacity slots named @name, anonymous (TALLY_ZONE_ANON: no
 * file, nothing left behind by a run), or exit with tally's message.
 */
struct tally_zone *bench_anon_zone(const char *name, size_t capacity);
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bench_progress_step(unsigned done, unsigned total, unsigned rep,
			 unsigned nrep, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void bench_progress_done(void);

/* Errors: print "tally-bench: file:line: message" and exit 1. */
void bench_die_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
#define bench_die(...) bench_die_at(__FILE__, __LINE__, __VA_ARGS__)

/*
 * Children: the same program run again with one more environment
 * variable (TALLY_NO_RSEQ=1, TALLY_NSLABS=256), because libtally reads its
 * environment once.  The child prints its rows with bench_emit_rows() and
 * the parent appends them to its own document.  Returns the child's exit
 * status (0 ok, 1 a failed check), or -1 when it could not run.
 */
int bench_run_child(const char *env, char *const argv[], struct bench_doc *d,
		    char *meta, size_t metasz);
void bench_emit_rows(const struct bench_doc *d, const char *meta, FILE *f);

/* Subcommands. */
int bench_counter(const struct bench_opts *o);
int bench_alloc(const struct bench_opts *o);
int bench_metrics(const struct bench_opts *o);
int bench_loop(int argc, char **argv);
int bench_steps(int argc, char **argv);
int bench_oversub(const struct bench_opts *o);
int bench_pernode(const struct bench_opts *o);
int bench_falseshare(const struct bench_opts *o);
int bench_inflight(const struct bench_opts *o);
int bench_wakeup(const struct bench_opts *o);

/* The arguments a child needs to repeat the parent's settings. */
void bench_child_args(const struct bench_opts *o, const char *sub,
		      const char *kind, char **argv, char buf[][32],
		      unsigned max);

/* How the library was built, from CMake. */
#ifndef TALLY_BENCH_BUILD_TYPE
#define TALLY_BENCH_BUILD_TYPE ""
#endif

#endif /* TALLY_BENCH_H */
