/*
 * programs/tallystat/emit_text.c: the text back end: sysstat's banner,
 * then per report a header with the time first and aligned columns, one
 * table for counters and gauges and one for histograms.
 *
 * Cells are formatted first and printed once their column's width is
 * known, so columns stay aligned whatever the values; the Series column
 * is cut with an ellipsis at --width (JSON has every label in full).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "strbuf.h"
#include "table.h"
#include "tallystat.h"


size_t ts_display_width(const char *s)
{
	size_t w = 0;

	/* UTF-8: every byte but a continuation byte starts a character;
	 * wide characters are rare enough in label values to count as 1. */
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

char *ts_truncate(const char *s, size_t width)
{
	struct tp_buf b = { 0 };
	size_t w = 0;

	if (ts_display_width(s) <= width || width == 0)
		return tp_xstrdup(s);
	for (; *s; s++) {
		if (((unsigned char)*s & 0xc0) != 0x80 && ++w > width - 1)
			break;
		tp_buf_putc(&b, *s);
	}
	tp_buf_puts(&b, "\xe2\x80\xa6"); /* U+2026 HORIZONTAL ELLIPSIS */
	return tp_buf_take(&b);
}

void ts_format_time(char *out, size_t n, const struct timespec *t,
		    int with_date)
{
	const char *iso = getenv("S_TIME_FORMAT");
	struct tm tm;
	time_t sec = t->tv_sec;

	localtime_r(&sec, &tm);
	if (!with_date)
		strftime(out, n, "%H:%M:%S", &tm);
	else if (iso && strcmp(iso, "ISO") == 0)
		strftime(out, n, "%Y-%m-%d %H:%M:%S", &tm);
	else
		strftime(out, n, "%m/%d/%Y %H:%M:%S", &tm);
}

/* --- Values ---------------------------------------------------------- */

static char *fmt_int(int64_t v, enum tp_unit u, const struct ts_options *o)
{
	char b[64];

	if (o->human)
		return tp_xstrdup(tp_fmt_human(b, sizeof(b), (double)v, u, 0));
	return tp_xstrdup(tp_fmt_i64(b, v));
}

/* A floating-point gauge: as it is, in the fewest digits. */
static char *fmt_f64(double v, enum tp_unit u, const struct ts_options *o)
{
	char b[64];

	if (o->human && isfinite(v))
		return tp_xstrdup(tp_fmt_human(b, sizeof(b), v, u, 0));
	return tp_xstrdup(tp_fmt_f64(b, v));
}

static char *fmt_real(double v, enum tp_unit u, const struct ts_options *o,
		      int decimals)
{
	char b[64];

	if (isnan(v))
		return tp_xstrdup("-");
	if (o->human)
		return tp_xstrdup(tp_fmt_human(b, sizeof(b), v, u, 0));
	if (decimals < 0)       /* quantiles: whole unless a bucket middle */
		decimals = v == floor(v) ? 0 : 1;
	snprintf(b, sizeof(b), "%.*f", decimals, v);
	return tp_xstrdup(b);
}

/* A histogram's mean or quantile: a classic histogram's (format 2.6),
 * whose bounds are the application's (fractions of a second, say), in
 * the digits its value needs. */
static char *fmt_hist(const struct ts_row *x, double v, enum tp_unit u,
		      const struct ts_options *o, int decimals)
{
	if (!x->have_q || isnan(v)) /* none, or a summary's quantile */
		return tp_xstrdup("-");
	if (x->s->classic)
		return fmt_f64(v, u, o);
	return fmt_real(v, u, o, decimals);
}

/* --- The back end ---------------------------------------------------- */

static void text_begin(const struct ts_host *h, const struct ts_options *o,
		       const struct timespec *now)
{
	char date[64];
	const char *iso = getenv("S_TIME_FORMAT");
	struct tm tm;
	time_t sec = now->tv_sec;

	localtime_r(&sec, &tm);
	strftime(date, sizeof(date), iso && strcmp(iso, "ISO") == 0 ?
		 "%Y-%m-%d" : "%m/%d/%Y", &tm);
	/* sysstat's banner, tab for tab. */
	printf("%s %s (%s) \t%s \t_%s_\t(%ld CPU)\n", h->sysname, h->release,
	       h->nodename, date, h->machine, h->ncpus);
	(void)o;
	fflush(stdout);
}

static int has_zone_column(const struct ts_report *r)
{
	const struct tp_series *s;
	struct ts_iter it;
	int found = 0;

	ts_iter_begin(&it, r, TS_ITER_IDENT);
	while (!found && (s = ts_iter_next(&it)))
		found = strcmp(s->zone, s->proc) != 0;
	ts_iter_end(&it);
	return found;
}

/* Is a row of the report one of processes that are gone?  Then every
 * table gets a State column. */
static int has_state_column(const struct ts_report *r)
{
	const struct tp_series *s;
	struct ts_iter it;
	int found = 0;

	ts_iter_begin(&it, r, TS_ITER_IDENT);
	while (!found && (s = ts_iter_next(&it)))
		found = s->dead != 0;
	ts_iter_end(&it);
	return found;
}

/* Does the report hold two incarnations of one pid and zone (a
 * container's pid 1 restarted, a pid reused)?  Then every table gets a
 * Started column, the time each segment was made, to tell them apart.
 * The rows come sorted by pid, start time and zone, so each run of rows
 * of one pid is checked on its own, against the few distinct incarnations
 * (zone, start time, creation time) met in the run: linear in the rows,
 * whatever their number. */
struct incarnation {
	char zone[64];          /* a copy: the series may be the iterator's */
	uint64_t start_ticks, created_ns;
};

static int same_incarnation(const struct incarnation *a,
			    const struct tp_series *s)
{
	return a->start_ticks == s->start_ticks &&
	       a->created_ns == s->created_ns && strcmp(a->zone, s->zone) == 0;
}

static int has_started_column(const struct ts_report *r)
{
	struct incarnation *seen = NULL;
	size_t nseen = 0, cap = 0;
	int found = 0, prev_pid = 0, first = 1;
	const struct tp_series *s;
	struct ts_iter it;

	ts_iter_begin(&it, r, TS_ITER_IDENT);
	while (!found && (s = ts_iter_next(&it))) {
		size_t k;

		if (!first && prev_pid != s->pid)
			nseen = 0;      /* a new run of one pid */
		first = 0;
		prev_pid = s->pid;
		if (!s->pid || (nseen && same_incarnation(&seen[nseen - 1], s)))
			continue;
		for (k = 0; k < nseen && !found; k++) {
			if (same_incarnation(&seen[k], s))
				break;
			found = strcmp(seen[k].zone, s->zone) == 0;
		}
		if (found || k < nseen)
			continue;
		if (nseen == cap) {
			cap = cap ? 2 * cap : 8;
			seen = tp_xrealloc(seen, cap * sizeof(*seen));
		}
		snprintf(seen[nseen].zone, sizeof(seen[nseen].zone), "%s",
			 s->zone);
		seen[nseen].start_ticks = s->start_ticks;
		seen[nseen++].created_ns = s->created_ns;
	}
	ts_iter_end(&it);
	free(seen);
	return found;
}

/* The columns every table starts with; returns the next column. */
static unsigned lead_cols(struct ts_table *t, const char *timecol, int zone,
			  int state, int started)
{
	ts_table_col(t, timecol, 0);
	ts_table_col(t, "PID", 1);
	ts_table_col(t, "Command", 0);
	if (zone)
		ts_table_col(t, "Zone", 0);
	if (state)
		ts_table_col(t, "State", 0);
	if (started)
		ts_table_col(t, "Started", 0);
	ts_table_col(t, "Series", 0);
	return t->ncols;
}

static void cpu_cols(struct ts_table *t, const struct ts_report *r,
		     char names[][16])
{
	for (unsigned i = 0; i < r->ncpus && t->ncols < TS_MAXCOLS; i++) {
		snprintf(names[i], 16, "CPU%u", r->cpu_ids[i]);
		ts_table_col(t, names[i], 1);
	}
}

/* Fills the lead columns of @row; returns the next column. */
static unsigned lead_cells(struct ts_table *t, struct ts_cell *row,
			   const char *when, const struct ts_row *x, int zone,
			   int state, int started, const struct ts_options *o)
{
	unsigned c = 0;
	char b[32];

	ts_table_set(t, row, c++, tp_xstrdup(when), NULL);
	if (x->s->pid)
		snprintf(b, sizeof(b), "%d", x->s->pid);
	else            /* summed across processes */
		snprintf(b, sizeof(b), "-");
	ts_table_set(t, row, c++, tp_xstrdup(b), NULL);
	ts_table_set(t, row, c++, tp_xstrdup(x->s->proc), NULL);
	if (zone)
		ts_table_set(t, row, c++, tp_xstrdup(x->s->zone), NULL);
	if (state)
		ts_table_set(t, row, c++, tp_xstrdup(x->s->dead ? "dead" :
						     "live"),
			     x->s->dead ? TS_SGR_YELLOW : NULL);
	if (started) {
		struct timespec ts = {
			(time_t)(x->s->created_ns / 1000000000u),
			(long)(x->s->created_ns % 1000000000u) };
		char hms[20], at[48];

		ts_format_time(hms, sizeof(hms), &ts, 0);
		snprintf(at, sizeof(at), "%s.%03ld", hms, ts.tv_nsec / 1000000);
		ts_table_set(t, row, c++, tp_xstrdup(at), NULL);
	}
	ts_table_set(t, row, c++, ts_truncate(x->s->key, o->series_width), NULL);
	return c;
}

static void cpu_cells(struct ts_table *t, struct ts_cell *row, unsigned c,
		      const struct ts_row *x, enum tp_unit u,
		      const struct ts_options *o, int gauge_avg)
{
	for (unsigned i = 0; i < x->ncpu && c < t->ncols; i++, c++) {
		int gauge = tp_kind_is_gauge(x->s->kind);

		if (gauge && !gauge_avg && !isnan(x->cpu[i]))
			ts_table_set(t, row, c, fmt_int((int64_t)x->cpu[i], u, o),
			    NULL);
		else
			ts_table_set(t, row, c, fmt_real(x->cpu[i], u, o,
						gauge ? 1 : 2), NULL);
	}
}

/* What every row of a report shares. */
struct lead {
	const char *when;
	int zone, state, started, avg;
	const struct ts_options *o;
};

/* A histogram's row of @t. */
static void hist_row(struct ts_table *t, const struct lead *l,
		     const struct ts_row *x)
{
	enum tp_unit u = tp_unit_of(x->s->name, x->s->unit);
	const struct ts_options *o = l->o;
	struct ts_cell *row = ts_table_row(t);
	unsigned c = lead_cells(t, row, l->when, x, l->zone, l->state,
				l->started, o);

	/* The count is a number of observations, not of the histogram's
	 * unit. */
	ts_table_set(t, row, c++, fmt_int(x->value, TP_UNIT_NONE, o), NULL);
	if (x->reset && isnan(x->rate))
		ts_table_set(t, row, c++, tp_xstrdup("reset"), TS_SGR_RED);
	else
		ts_table_set(t, row, c++, fmt_real(x->rate, TP_UNIT_NONE, o, 2),
			     NULL);
	ts_table_set(t, row, c++, fmt_hist(x, x->mean, u, o, 1), NULL);
	for (int q = 0; q < TS_NQ; q++)
		ts_table_set(t, row, c++, fmt_hist(x, x->q[q], u, o, -1), NULL);
	cpu_cells(t, row, c, x, TP_UNIT_NONE, o, 0);
}

/* A counter's or gauge's row of @t. */
static void scalar_row(struct ts_table *t, const struct lead *l,
		       const struct ts_row *x)
{
	enum tp_unit u = tp_unit_of(x->s->name, x->s->unit);
	const struct ts_options *o = l->o;
	int gauge = tp_kind_is_gauge(x->s->kind);
	struct ts_cell *row = ts_table_row(t);
	unsigned c = lead_cells(t, row, l->when, x, l->zone, l->state,
				l->started, o);

	ts_table_set(t, row, c++, tp_xstrdup(tp_type_name(x->s->kind,
			x->s->summary, x->s->info, x->s->stateset)), NULL);
	if (gauge && l->avg)
		ts_table_set(t, row, c++, fmt_real(x->mean_gauge, u, o, 2),
			     NULL);
	else if (x->s->kind == TALLY_FGAUGE || x->s->fractional)
		ts_table_set(t, row, c++, fmt_f64(x->s->fvalue, u, o), NULL);
	else
		ts_table_set(t, row, c++, fmt_int(x->value, u, o), NULL);
	if (x->reset && isnan(x->rate))
		ts_table_set(t, row, c++, tp_xstrdup("reset"), TS_SGR_RED);
	else
		ts_table_set(t, row, c++, fmt_real(x->rate, u, o, 2), NULL);
	cpu_cells(t, row, c, x, u, o, l->avg);
}

/* The rows of one table (histograms, or the others), each printed as it
 * is made when @print. */
static void table_rows(struct ts_table *t, const struct lead *l,
		       const struct ts_report *r, int hist, int print)
{
	struct ts_iter it;

	ts_iter_begin(&it, r, hist ? TS_ITER_HIST : TS_ITER_SCALAR);
	while (ts_iter_next(&it)) {
		struct ts_row x;

		ts_iter_row(&it, &x);
		if (hist)
			hist_row(t, l, &x);
		else
			scalar_row(t, l, &x);
		ts_row_free(&x);
		if (print)
			ts_table_print_row(t, t->cells, l->o->color);
	}
	ts_iter_end(&it);
}

/*
 * The tables keep one row at a time (table.h, stream): the rows are made
 * once for the widths of the columns, then again, the same way, to be
 * printed one by one, so that a report of a million series never holds
 * its text.
 */
static void text_report(const struct ts_report *r, const struct ts_options *o)
{
	/* Static: a table is 25 kB of column arrays. */
	static struct ts_table sc, hi;
	static char cpunames[2][TS_MAXCOLS][16];
	char when[64];
	struct lead l = { when, has_zone_column(r), has_state_column(r),
			  has_started_column(r), r->kind == TS_AVERAGE, o };
	size_t nhist;

	memset(&sc, 0, sizeof(sc));
	memset(&hi, 0, sizeof(hi));
	sc.stream = hi.stream = 1;
	if (l.avg)
		snprintf(when, sizeof(when), "Average:");
	else
		ts_format_time(when, sizeof(when), &r->when, 0);

	lead_cols(&sc, when, l.zone, l.state, l.started);
	ts_table_col(&sc, "Type", 0);
	ts_table_col(&sc, "Value", 1);
	ts_table_col(&sc, "/s", 1);
	cpu_cols(&sc, r, cpunames[0]);
	lead_cols(&hi, when, l.zone, l.state, l.started);
	ts_table_col(&hi, "Count", 1);
	ts_table_col(&hi, "/s", 1);
	ts_table_col(&hi, "Mean", 1);
	for (int q = 0; q < TS_NQ; q++)
		ts_table_col(&hi, ts_quantiles[q].column, 1);
	cpu_cols(&hi, r, cpunames[1]);

	table_rows(&sc, &l, r, 0, 0);
	table_rows(&hi, &l, r, 1, 0);
	nhist = hi.nrows;

	fputc('\n', stdout);
	if (o->timestamp && !l.avg) {
		char full[64];

		ts_format_time(full, sizeof(full), &r->when, 1);
		printf("%s\n", full);
	}
	ts_table_print_head(&sc, o->color);
	table_rows(&sc, &l, r, 0, 1);
	if (nhist) {
		fputc('\n', stdout);
		ts_table_print_head(&hi, o->color);
		table_rows(&hi, &l, r, 1, 1);
	}
	for (size_t i = 0; i < r->nevents; i++) {
		const struct ts_event *e = &r->events[i];

		printf("%s%s  %d  %s  %s (zone %s)%s\n",
		       o->color ? TS_SGR_YELLOW : "", when, e->pid, e->proc,
		       e->started ? "started" : "exited", e->zone,
		       o->color ? TS_SGR_OFF : "");
	}
	ts_table_free(&sc);
	ts_table_free(&hi);
	fflush(stdout);
}

static void text_end(const struct ts_options *o)
{
	(void)o;
	fflush(stdout);
}

const struct ts_emitter ts_emit_text = { text_begin, text_report, text_end };
