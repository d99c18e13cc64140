/*
 * bench.c: timing, statistics, pinning, rows, JSON, targets, progress and
 * re-executed children for tally-bench.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tally/tally.h"

extern char **environ;

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void bench_stats(const double *v, unsigned n, struct bench_stats *st)
{
	double s[BENCH_MAX_REPEAT], sum = 0, sq = 0;

	memset(st, 0, sizeof(*st));
	if (n == 0 || n > BENCH_MAX_REPEAT) {
		st->min = st->max = st->median = st->mean = st->sd = NAN;
		return;
	}
	memcpy(s, v, n * sizeof(double));
	qsort(s, n, sizeof(double), cmp_double);
	for (unsigned i = 0; i < n; i++)
		sum += s[i];
	st->n = n;
	st->min = s[0];
	st->max = s[n - 1];
	st->median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	st->mean = sum / n;
	for (unsigned i = 0; i < n; i++)
		sq += (s[i] - st->mean) * (s[i] - st->mean);
	st->sd = n > 1 ? sqrt(sq / (n - 1)) : 0;
}

void bench_row_finish(struct bench_row *r)
{
	bench_stats(r->ns, r->n, &r->ns_st);
	bench_stats(r->rate, r->n, &r->rate_st);
	bench_stats(r->overlap, r->n, &r->overlap_st);
	if (r->checked && !r->lossy && r->observed != r->expected)
		r->failed = 1;
}

void bench_row_check(struct bench_row *r, int64_t expected, int64_t observed)
{
	r->checked = 1;
	r->expected = expected;
	if (r->n == 0 || llabs(expected - observed) >
				 llabs(expected - r->observed))
		r->observed = observed;
}

/* CPUs ------------------------------------------------------------------ */

static int cpu_ids[BENCH_MAX_THREADS];
static unsigned ncpu_ids;
static char cpu_list_str[256];

static void load_cpus(void)
{
	cpu_set_t set;
	size_t len = 0;

	if (ncpu_ids)
		return;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) < 0) {
		cpu_ids[0] = 0;
		ncpu_ids = 1;
		snprintf(cpu_list_str, sizeof(cpu_list_str), "?");
		return;
	}
	for (int c = 0; c < CPU_SETSIZE && ncpu_ids < BENCH_MAX_THREADS; c++) {
		if (!CPU_ISSET(c, &set))
			continue;
		cpu_ids[ncpu_ids++] = c;
	}
	/* "0-3,8" */
	for (unsigned i = 0; i < ncpu_ids; i++) {
		unsigned j = i;

		while (j + 1 < ncpu_ids && cpu_ids[j + 1] == cpu_ids[j] + 1)
			j++;
		if (len < sizeof(cpu_list_str) - 24) {
			if (j > i)
				len += (size_t)snprintf(cpu_list_str + len,
							sizeof(cpu_list_str) - len,
							"%s%d-%d", len ? "," : "",
							cpu_ids[i], cpu_ids[j]);
			else
				len += (size_t)snprintf(cpu_list_str + len,
							sizeof(cpu_list_str) - len,
							"%s%d", len ? "," : "",
							cpu_ids[i]);
		}
		i = j;
	}
}

unsigned bench_cpus(int *cpus, unsigned max)
{
	load_cpus();
	for (unsigned i = 0; i < ncpu_ids && i < max; i++)
		cpus[i] = cpu_ids[i];
	return ncpu_ids < max ? ncpu_ids : max;
}

const char *bench_cpu_list(void)
{
	load_cpus();
	return cpu_list_str;
}

int bench_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* Rows and targets ------------------------------------------------------ */

struct bench_row *bench_row_add(struct bench_doc *d, const char *config,
				const char *profile, unsigned threads,
				int pinned, unsigned slabs)
{
	struct bench_row *r;

	if (d->nrows >= BENCH_MAX_ROWS)
		bench_die("too many rows");
	r = &d->rows[d->nrows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->config, sizeof(r->config), "%s", config);
	snprintf(r->profile, sizeof(r->profile), "%s", profile ? profile : "");
	r->threads = threads;
	r->pinned = pinned;
	r->slabs = slabs;
	for (int i = 0; i < 4; i++)
		r->ratio[i] = NAN;
	r->bytes = NAN;
	r->cpus_wrote = NAN;
	return r;
}

struct bench_row *bench_row_find(struct bench_doc *d, const char *config,
				 const char *profile, unsigned threads,
				 int pinned, unsigned slabs)
{
	for (unsigned i = 0; i < d->nrows; i++) {
		struct bench_row *r = &d->rows[i];

		if (strcmp(r->config, config) == 0 &&
		    strcmp(r->profile, profile ? profile : "") == 0 &&
		    r->threads == threads && r->pinned == pinned &&
		    r->slabs == slabs && r->n > 0)
			return r;
	}
	return NULL;
}

void bench_target(struct bench_doc *d, const char *what, const char *cmp,
		  double limit, double value, const char *unit)
{
	struct bench_target *t;

	if (d->ntargets >= BENCH_MAX_TARGETS)
		return;
	t = &d->targets[d->ntargets++];
	memset(t, 0, sizeof(*t));
	snprintf(t->what, sizeof(t->what), "%s", what);
	snprintf(t->cmp, sizeof(t->cmp), "%s", cmp);
	snprintf(t->unit, sizeof(t->unit), "%s", unit);
	t->limit = limit;
	t->value = value;
	t->known = isfinite(value);
	t->met = t->known && (cmp[0] == '<' ? value <= limit : value >= limit);
	if (!t->known)
		snprintf(t->note, sizeof(t->note), "not measured in this run");
}

void bench_target_note(struct bench_doc *d, const char *fmt, ...)
{
	struct bench_target *t;
	va_list ap;

	if (d->ntargets == 0)
		return;
	t = &d->targets[d->ntargets - 1];
	va_start(ap, fmt);
	vsnprintf(t->note, sizeof(t->note), fmt, ap);
	va_end(ap);
}

void bench_target_cpu(struct bench_doc *d, const char *why)
{
	if (d->ntargets)
		d->targets[d->ntargets - 1].cpu_dep = why;
}

static void fmt_value(char *buf, size_t n, double v, const char *unit)
{
	if (!isfinite(v))
		snprintf(buf, n, "n/a");
	else if (strcmp(unit, "x") == 0)
		snprintf(buf, n, "%.2fx", v);
	else
		snprintf(buf, n, "%.2f %s", v, unit);
}

void bench_print_targets(const struct bench_doc *d, FILE *f)
{
	unsigned met = 0, cpu = 0;

	fprintf(f, "\ntargets (medians of this run; [cpu]: depends on the "
		"microarchitecture, judged on the machine it ran on):\n");
	for (unsigned i = 0; i < d->ntargets; i++) {
		const struct bench_target *t = &d->targets[i];
		char lim[32], val[32];

		fmt_value(lim, sizeof(lim), t->limit, t->unit);
		fmt_value(val, sizeof(val), t->value, t->unit);
		fprintf(f, "  %-58s %s %-9s %11s  %s%s%s%s%s\n", t->what, t->cmp,
			lim, val, !t->known ? "UNKNOWN" : t->met ? "MET" : "MISSED",
			!t->known && t->note[0] ? ": " : "",
			!t->known ? t->note : "", t->cpu_dep ? " [cpu] " : "",
			t->cpu_dep ? t->cpu_dep : "");
		met += (unsigned)t->met;
		cpu += t->cpu_dep != NULL;
	}
	fprintf(f, "  %u of %u targets met", met, d->ntargets);
	if (cpu)
		fprintf(f, " (%u of them depend on the microarchitecture)", cpu);
	fputc('\n', f);
}

int bench_failed(const struct bench_doc *d)
{
	for (unsigned i = 0; i < d->nrows; i++)
		if (d->rows[i].failed)
			return 1;
	return 0;
}

/* JSON ------------------------------------------------------------------ */

void bench_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void bench_json_sample(FILE *f, const char *what, const char *unit,
		       const double *v, unsigned n,
		       const struct bench_stats *st, int last)
{
	fputs("    {\"what\": ", f);
	bench_json_str(f, what);
	fputs(", \"unit\": ", f);
	bench_json_str(f, unit);
	fprintf(f, ", \"runs\": %u, \"min\": ", n);
	bench_json_num(f, st->min);
	fputs(", \"median\": ", f);
	bench_json_num(f, st->median);
	fputs(", \"max\": ", f);
	bench_json_num(f, st->max);
	fputs(", \"values\": [", f);
	for (unsigned i = 0; i < n; i++) {
		fputs(i ? ", " : "", f);
		bench_json_num(f, v[i]);
	}
	fprintf(f, "]}%s\n", last ? "" : ",");
}

int bench_finish(const struct bench_doc *d, const struct bench_opts *o,
		 const char *why, int child_failed)
{
	int failed = bench_failed(d) || child_failed;

	if (failed)
		fprintf(stderr, "tally-bench %s: %s\n", d->bench, why);
	if (bench_save(d, o) < 0)
		return 1;
	return failed;
}

void bench_json_targets_end(FILE *f, const struct bench_doc *d)
{
	fputs("  ],\n  \"targets\": [\n", f);
	for (unsigned i = 0; i < d->ntargets; i++) {
		const struct bench_target *t = &d->targets[i];

		fputs("    {\"what\": ", f);
		bench_json_str(f, t->what);
		fputs(", \"limit\": ", f);
		bench_json_num(f, t->limit);
		fputs(", \"value\": ", f);
		bench_json_num(f, t->value);
		fprintf(f, ", \"met\": %s, \"note\": ",
			t->met ? "true" : "false");
		bench_json_str(f, t->note);
		fprintf(f, "}%s\n", i + 1 < d->ntargets ? "," : "");
	}
	fputs("  ],\n  ", f);
	bench_json_host(f);
	fputs(",\n  \"summary\": ", f);
	bench_json_str(f, d->summary);
	fputs("\n}\n", f);
}

const char *bench_json_fmt(char *buf, double v)
{
	if (isfinite(v))
		snprintf(buf, 32, "%.9g", v);
	else
		snprintf(buf, 32, "null");
	return buf;
}

void bench_json_num(FILE *f, double v)
{
	char buf[32];

	fputs(bench_json_fmt(buf, v), f);
}

static void json_stats(FILE *f, const char *key, const struct bench_stats *st,
		       const double *samples, unsigned n)
{
	fprintf(f, "\"%s\":{\"min\":", key);
	bench_json_num(f, st->min);
	fputs(",\"median\":", f);
	bench_json_num(f, st->median);
	fputs(",\"max\":", f);
	bench_json_num(f, st->max);
	fputs(",\"mean\":", f);
	bench_json_num(f, st->mean);
	fputs(",\"stddev\":", f);
	bench_json_num(f, st->sd);
	fputs(",\"samples\":[", f);
	for (unsigned i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		bench_json_num(f, samples[i]);
	}
	fputs("]}", f);
}

static void check_text(const struct bench_row *r, char *buf, size_t n)
{
	if (!r->checked)
		snprintf(buf, n, r->failed ? "FAIL" : "-");
	else if (r->observed == r->expected)
		snprintf(buf, n, r->failed ? "FAIL" : "ok");
	else if (r->lossy)
		snprintf(buf, n, "lost %lld",
			 (long long)(r->expected - r->observed));
	else
		snprintf(buf, n, "LOST %lld",
			 (long long)(r->expected - r->observed));
}

void bench_print_json(const struct bench_doc *d, const struct bench_opts *o,
		      FILE *f)
{
	(void)o;
	fprintf(f, "{\"bench\":\"%s\",", d->bench);
	bench_json_host(f);
	fprintf(f, ",\"params\":{%s},\"rows\":[\n", d->params);
	for (unsigned i = 0; i < d->nrows; i++) {
		const struct bench_row *r = &d->rows[i];
		char chk[48];

		check_text(r, chk, sizeof(chk));
		fputs(" {\"config\":", f);
		bench_json_str(f, r->config);
		fputs(",\"profile\":", f);
		bench_json_str(f, r->profile);
		fprintf(f, ",\"threads\":%u,\"pinned\":%s,\"slabs\":%u,"
			"\"runs\":%u,", r->threads, r->pinned ? "true" : "false",
			r->slabs, r->n);
		if (r->n) {
			json_stats(f, "ns_per_op", &r->ns_st, r->ns, r->n);
			fputc(',', f);
			json_stats(f, d->rate_name, &r->rate_st, r->rate, r->n);
			fputs(",\"ns_per_op_median\":", f);
			bench_json_num(f, r->ns_st.median);
			fprintf(f, ",\"%s_median\":", d->rate_name);
			bench_json_num(f, r->rate_st.median);
			fputc(',', f);
			if (r->overlap_st.median > 0) {
				fputs("\"cpu_overlap_median\":", f);
				bench_json_num(f, r->overlap_st.median);
				fputc(',', f);
			}
		}
		for (int k = 0; k < 4; k++) {
			if (!d->ratio_names[k])
				continue;
			fprintf(f, "\"%s\":", d->ratio_names[k]);
			bench_json_num(f, r->ratio[k]);
			fputc(',', f);
		}
		if (isfinite(r->bytes)) {
			fputs("\"bytes_per_counter\":", f);
			bench_json_num(f, r->bytes);
			fputs(",\"cpus_wrote\":", f);
			bench_json_num(f, r->cpus_wrote);
			fputc(',', f);
		}
		if (r->checked)
			fprintf(f, "\"expected\":%lld,\"observed\":%lld,"
				"\"lost\":%lld,", (long long)r->expected,
				(long long)r->observed,
				(long long)(r->expected - r->observed));
		fputs("\"check\":", f);
		bench_json_str(f, chk);
		fputs(",\"note\":", f);
		bench_json_str(f, r->note);
		fprintf(f, "}%s\n", i + 1 < d->nrows ? "," : "");
	}
	fputs("],\"targets\":[\n", f);
	for (unsigned i = 0; i < d->ntargets; i++) {
		const struct bench_target *t = &d->targets[i];

		fputs(" {\"target\":", f);
		bench_json_str(f, t->what);
		fputs(",\"cmp\":", f);
		bench_json_str(f, t->cmp);
		fputs(",\"limit\":", f);
		bench_json_num(f, t->limit);
		fputs(",\"measured\":", f);
		bench_json_num(f, t->value);
		fputs(",\"unit\":", f);
		bench_json_str(f, t->unit);
		fputs(",\"note\":", f);
		bench_json_str(f, t->note);
		fputs(",\"cpu_dependent\":", f);
		if (t->cpu_dep)
			bench_json_str(f, t->cpu_dep);
		else
			fputs("null", f);
		fprintf(f, ",\"status\":\"%s\"}%s\n",
			!t->known ? "UNKNOWN" : t->met ? "MET" : "MISSED",
			i + 1 < d->ntargets ? "," : "");
	}
	fputs("],\"summary\":", f);
	bench_json_str(f, d->summary);
	fprintf(f, ",\"ok\":%s}\n", bench_failed(d) ? "false" : "true");
}

/* ministat -------------------------------------------------------------- */

/* Two-sided 95% quantiles of Student's t, by degrees of freedom. */
static double t95(unsigned df)
{
	static const double t[] = {
		0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
		2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110,
		2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
		2.052, 2.048, 2.045, 2.042,
	};

	if (df < sizeof(t) / sizeof(t[0]))
		return t[df];
	if (df <= 40)
		return 2.021;
	if (df <= 60)
		return 2.000;
	if (df <= 120)
		return 1.980;
	return 1.960;
}

#define APPEND(...)                                                           \
	do {                                                                  \
		size_t len_ = strlen(out);                                    \
		if (len_ < outsz)                                             \
			snprintf(out + len_, outsz - len_, __VA_ARGS__);      \
	} while (0)

void bench_ministat(char *out, size_t outsz, const char *title,
		    const struct bench_row *x, const struct bench_row *const *others,
		    unsigned nothers)
{
	static const char sym[] = "x+*%#@";
	const struct bench_stats *a = &x->ns_st;

	APPEND("%s\n", title);
	APPEND("    N           Min           Max        Median           Avg        Stddev\n");
	APPEND("%c %3u %13.4f %13.4f %13.4f %13.4f %13.6f  %s\n", sym[0], a->n,
	       a->min, a->max, a->median, a->mean, a->sd, x->config);
	for (unsigned i = 0; i < nothers && i + 1 < sizeof(sym) - 1; i++) {
		const struct bench_stats *b = &others[i]->ns_st;
		unsigned df = a->n + b->n - 2;
		double s, e, diff;

		APPEND("%c %3u %13.4f %13.4f %13.4f %13.4f %13.6f  %s\n",
		       sym[i + 1], b->n, b->min, b->max, b->median, b->mean,
		       b->sd, others[i]->config);
		if (a->n < 2 || b->n < 2) {
			APPEND("(too few runs for a confidence interval)\n");
			continue;
		}
		s = sqrt(((a->n - 1) * a->sd * a->sd +
			  (b->n - 1) * b->sd * b->sd) / df);
		e = t95(df) * s * sqrt(1.0 / a->n + 1.0 / b->n);
		diff = b->mean - a->mean;
		if (fabs(diff) <= e) {
			APPEND("No difference proven at 95.0%% confidence\n");
			continue;
		}
		APPEND("Difference at 95.0%% confidence\n");
		APPEND("        %.4f +/- %.4f\n", diff, e);
		APPEND("        %.2f%% +/- %.2f%%\n", 100 * diff / a->mean,
		       100 * e / a->mean);
		APPEND("        (Student's t, pooled s = %.6f)\n", s);
	}
}

int bench_on_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];
	size_t len = strlen(prog);

	if (!path || !*path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		if (n && n + len + 2 <= sizeof(buf)) {
			memcpy(buf, path, n);
			buf[n] = '/';
			memcpy(buf + n + 1, prog, len + 1);
			if (access(buf, X_OK) == 0)
				return 1;
		}
		path += n + (path[n] == ':');
	}
	return 0;
}

/* Progress -------------------------------------------------------------- */

/*
 * Only on a terminal: a file or a pipe (a CI log, `make bench | tee`)
 * gets the results and nothing else, and stderr stays for errors.
 */
static int prog_on;
static char prog_tag[32];
static int prog_open;
static uint64_t prog_t0;

void bench_progress_init(const struct bench_opts *o, const char *tag)
{
	prog_on = !o->quiet && isatty(2);
	snprintf(prog_tag, sizeof(prog_tag), "%s", tag);
	prog_t0 = bench_now_ns();
}

void bench_doc_start(struct bench_doc *d, const struct bench_opts *o,
		     const char *bench, const char *rate_name,
		     const char *const ratios[4])
{
	char tag[32];

	memset(d, 0, sizeof(*d));
	d->bench = bench;
	d->rate_name = rate_name;
	for (int k = 0; k < 4 && ratios[k]; k++)
		d->ratio_names[k] = ratios[k];
	snprintf(tag, sizeof(tag), "%s%s", bench, o->child ? " (child)" : "");
	bench_progress_init(o, tag);
}

struct tally_zone *bench_anon_zone(const char *name, size_t capacity)
{
	struct tally_zone *z = tally_zone_create(name,
		&(struct tally_zone_opts){ .capacity = capacity,
					   .flags = TALLY_ZONE_ANON });

	if (!z)
		bench_die("tally_zone_create: %s", tally_errmsg());
	return z;
}

static void progress_line(const char *fmt, va_list ap)
{
	fputs("\r\033[K", stderr);
	fprintf(stderr, "tally-bench %s: ", prog_tag);
	vfprintf(stderr, fmt, ap);
	prog_open = 1;
	fflush(stderr);
}

void bench_progress(const char *fmt, ...)
{
	va_list ap;

	if (!prog_on)
		return;
	va_start(ap, fmt);
	progress_line(fmt, ap);
	va_end(ap);
}

void bench_progress_step(unsigned done, unsigned total, unsigned rep,
			 unsigned nrep, const char *fmt, ...)
{
	char head[64], eta[48] = "";
	char line[256];
	va_list ap;

	if (!prog_on)
		return;
	if (done > 1 && total >= done) {
		/* The steps so far took this long each, on average. */
		double per = (double)(bench_now_ns() - prog_t0) / (done - 1);
		unsigned left = (unsigned)(per * (total - done + 1) / 1e9 + 0.5);

		snprintf(eta, sizeof(eta), ", ETA %u:%02u", left / 60,
			 left % 60);
	}
	snprintf(head, sizeof(head), "[%u/%u] run %u/%u, ", done, total, rep,
		 nrep);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	bench_progress("%s%s%s", head, line, eta);
}

void bench_progress_done(void)
{
	if (prog_open)
		fputs("\r\033[K", stderr);
	prog_open = 0;
	fflush(stderr);
}

void bench_die_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	bench_progress_done();
	fflush(stdout);
	fprintf(stderr, "tally-bench: %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Children -------------------------------------------------------------- */

/*
 * The row format between a child and its parent: one line per row,
 * fields separated by tabs (configuration names hold spaces), doubles
 * printed exactly with %a.
 */
void bench_emit_rows(const struct bench_doc *d, const char *meta, FILE *f)
{
	if (meta && *meta)
		fprintf(f, "META\t%s\n", meta);
	for (unsigned i = 0; i < d->nrows; i++) {
		const struct bench_row *r = &d->rows[i];

		fprintf(f, "ROW\t%s\t%s\t%u\t%d\t%u\t%u", r->config, r->profile,
			r->threads, r->pinned, r->slabs, r->n);
		for (unsigned k = 0; k < r->n; k++)
			fprintf(f, "\t%a\t%a\t%a", r->ns[k], r->rate[k],
				r->overlap[k]);
		fprintf(f, "\t%d\t%d\t%d\t%lld\t%lld\t%a\t%a\t%s\n", r->checked,
			r->lossy, r->failed, (long long)r->expected,
			(long long)r->observed, r->bytes, r->cpus_wrote,
			r->note[0] ? r->note : "-");
	}
	fflush(f);
}

/* Split a line at tabs, keeping empty fields. */
static unsigned split_tabs(char *s, char **field, unsigned max)
{
	unsigned n = 0;

	while (n < max) {
		field[n++] = s;
		s = strchr(s, '\t');
		if (!s)
			break;
		*s++ = 0;
	}
	return n;
}

static int parse_row(char *line, struct bench_doc *d)
{
	char *f[16 + 3 * BENCH_MAX_REPEAT];
	unsigned nf = split_tabs(line, f, sizeof(f) / sizeof(f[0]));
	unsigned n, k = 7;
	struct bench_row *r;

	if (nf < 7)
		return -1;
	n = (unsigned)strtoul(f[6], NULL, 10);
	if (n > BENCH_MAX_REPEAT || nf != 7 + 3 * n + 8)
		return -1;
	r = bench_row_add(d, f[1], f[2], (unsigned)strtoul(f[3], NULL, 10),
			  atoi(f[4]), (unsigned)strtoul(f[5], NULL, 10));
	r->n = n;
	for (unsigned i = 0; i < n; i++) {
		r->ns[i] = strtod(f[k++], NULL);
		r->rate[i] = strtod(f[k++], NULL);
		r->overlap[i] = strtod(f[k++], NULL);
	}
	r->checked = atoi(f[k++]);
	r->lossy = atoi(f[k++]);
	r->failed = atoi(f[k++]);
	r->expected = strtoll(f[k++], NULL, 10);
	r->observed = strtoll(f[k++], NULL, 10);
	r->bytes = strtod(f[k++], NULL);
	r->cpus_wrote = strtod(f[k++], NULL);
	if (strcmp(f[k], "-") != 0)
		snprintf(r->note, sizeof(r->note), "%s", f[k]);
	bench_row_finish(r);
	return 0;
}

int bench_run_child(const char *env, char *const argv[], struct bench_doc *d,
		    char *meta, size_t metasz)
{
	char **envp;
	size_t nenv = 0, len, cap = 1 << 16;
	int pfd[2], status, bad = 0;
	char *buf, *line, *save;
	ssize_t got;
	pid_t pid;

	for (char **e = environ; *e; e++)
		nenv++;
	envp = calloc(nenv + 2, sizeof(char *));
	buf = malloc(cap);
	if (!envp || !buf)
		bench_die("out of memory");
	nenv = 0;
	for (char **e = environ; *e; e++) {
		size_t kl = strcspn(env, "=");

		if (strncmp(*e, env, kl + 1) != 0) /* drop an old value */
			envp[nenv++] = *e;
	}
	envp[nenv++] = (char *)env;
	envp[nenv] = NULL;

	fflush(stdout);
	fflush(stderr);
	if (pipe(pfd) < 0) {
		free(envp);
		free(buf);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		free(envp);
		free(buf);
		return -1;
	}
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execve("/proc/self/exe", argv, envp);
		fprintf(stderr, "tally-bench: cannot run /proc/self/exe: %s\n",
			strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	free(envp);
	len = 0;
	for (;;) {
		if (len + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				bench_die("out of memory");
			buf = nb;
			cap *= 2;
		}
		got = read(pfd[0], buf + len, cap - len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	buf[len] = 0;
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "ROW\t", 4) == 0)
			bad |= parse_row(line, d) < 0;
		else if (strncmp(line, "META\t", 5) == 0 && meta)
			snprintf(meta, metasz, "%s", line + 5);
	}
	free(buf);
	if (bad)
		return -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
		return -1;
	return WEXITSTATUS(status);
}

void bench_child_args(const struct bench_opts *o, const char *sub,
		      const char *kind, char **argv, char buf[][32],
		      unsigned max)
{
	unsigned n = 0, b = 0;

#define ARG(s) do { if (n + 1 < max) argv[n++] = (char *)(s); } while (0)
#define NUM(fmt, v)                                                           \
	do {                                                                  \
		snprintf(buf[b], 32, fmt, v);                                 \
		ARG(buf[b]);                                                  \
		b++;                                                          \
	} while (0)
	ARG("tally-bench");
	ARG(sub);
	ARG("--child");
	ARG(kind);
	ARG("--repeat");
	NUM("%u", o->repeat);
	if (strcmp(sub, "counter") == 0) {
		ARG("--adds");
		NUM("%llu", (unsigned long long)o->adds);
		if (o->threads) {
			ARG("--threads");
			NUM("%u", o->threads);
		}
		if (o->nsweep) {
			/* Up to 16 counts of up to 3 digits. */
			static char list[BENCH_MAX_SWEEP * 5];
			size_t len = 0;

			list[0] = 0;
			for (unsigned i = 0; i < o->nsweep; i++)
				len += (size_t)snprintf(list + len,
							sizeof(list) - len,
							"%s%u", i ? "," : "",
							o->sweep[i]);
			ARG("--sweep");
			ARG(list);
		}
	} else if (strcmp(sub, "pernode") == 0) {
		ARG("--adds");
		NUM("%llu", (unsigned long long)o->adds);
	} else {
		ARG("--blocks");
		NUM("%llu", (unsigned long long)o->blocks);
		ARG("--batch");
		NUM("%llu", (unsigned long long)o->batch);
		ARG("--mem-counters");
		NUM("%llu", (unsigned long long)o->mem_counters);
		ARG("--threads");
		NUM("%u", o->threads);
		ARG("--slabs");
		NUM("%u", o->slabs);
	}
	if (o->quick)
		ARG("--quick");
	if (o->quiet)
		ARG("--quiet");
	argv[n] = NULL;
#undef ARG
#undef NUM
}

/* --- Teams of worker threads ----------------------------------------- */

struct team_member {
	pthread_t th;
	pthread_barrier_t *bar;
	struct bench_team *t;
	bench_body_fn body;
	void *ctx;
	unsigned i;
	int cpu;          /* -1: not pinned */
	uint64_t t0, t1;
	int pin_failed, clobbered;
};

static void *team_main(void *arg)
{
	struct team_member *m = arg;
	uintptr_t tcb = bench_tcb_word();
	uint64_t c0, c1;

	if (m->cpu >= 0 && bench_pin(m->cpu) != 0)
		m->pin_failed = 1;
	pthread_barrier_wait(m->bar);
	m->t0 = bench_now_ns();
	c0 = bench_thread_cpu_ns();
	m->t->ops[m->i] = m->body(m->ctx, m->i);
	c1 = bench_thread_cpu_ns();
	m->t1 = bench_now_ns();
	m->t->cpu_ns[m->i] = c1 - c0;
	if (bench_tcb_word() != tcb) {
		bench_tcb_restore(tcb);
		m->clobbered = 1;
	}
	return NULL;
}

void bench_team_run(struct bench_team *t, unsigned n, const int *cpus,
		    unsigned ncpu, bench_body_fn body, void *ctx)
{
	struct team_member m[BENCH_MAX_THREADS];
	pthread_barrier_t bar;

	if (n == 0 || n > BENCH_MAX_THREADS)
		bench_die("a team of %u threads (1 to %u)", n,
			  BENCH_MAX_THREADS);
	memset(t, 0, sizeof(*t));
	t->n = n;
	t->t0 = UINT64_MAX;
	pthread_barrier_init(&bar, NULL, n);
	for (unsigned i = 0; i < n; i++) {
		m[i] = (struct team_member){ .bar = &bar, .t = t, .body = body,
			.ctx = ctx, .i = i,
			.cpu = cpus && ncpu ? cpus[i % ncpu] : -1 };
		if (pthread_create(&m[i].th, NULL, team_main, &m[i]))
			bench_die("pthread_create: %s", strerror(errno));
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(m[i].th, NULL);
		t->t0 = m[i].t0 < t->t0 ? m[i].t0 : t->t0;
		t->t1 = m[i].t1 > t->t1 ? m[i].t1 : t->t1;
		t->pin_failed |= m[i].pin_failed;
		t->clobbered |= m[i].clobbered;
	}
	pthread_barrier_destroy(&bar);
	if (t->t1 <= t->t0)
		t->t1 = t->t0 + 1;
}

void bench_team_record(const struct bench_team *t, struct bench_row *r)
{
	double wall = (double)(t->t1 - t->t0), sum_ns = 0, sum_cpu = 0;
	uint64_t ops = 0;

	for (unsigned i = 0; i < t->n; i++) {
		if (t->ops[i])
			sum_ns += (double)t->cpu_ns[i] / (double)t->ops[i];
		sum_cpu += (double)t->cpu_ns[i];
		ops += t->ops[i];
	}
	r->ns[r->n] = sum_ns / t->n;
	r->rate[r->n] = (double)ops / wall * 1e3;
	r->overlap[r->n] = sum_cpu / ((double)t->n * wall);
	if (t->pin_failed)
		snprintf(r->note, sizeof(r->note), "pinning failed");
	if (t->clobbered) {
		snprintf(r->note, sizeof(r->note),
			 "LIBRARY BUG: add wrote %%fs:8 (glibc DTV)");
		r->failed = 1;
	}
}
