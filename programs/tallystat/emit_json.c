/*
 * programs/tallystat/emit_json.c: the JSON back end, in sysstat's
 * envelope (docs/tallystat-json.md has the schema):
 *
 *   {"sysstat": {"hosts": [{"nodename": ..., "sysname": ..., "release":
 *    ..., "machine": ..., "number-of-cpus": N, "date": "YYYY-MM-DD",
 *    "statistics": [ report, report, ... ]}]}}
 *
 * Reports are written as they are made, so that a reader of a pipe sees
 * each one at once, and a report's rows one by one, so that its text is
 * never whole in memory; the envelope is closed at the end (and on
 * SIGINT, after the average).  Integers are written exactly; every label is
 * written in full.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "strbuf.h"
#include "tallystat.h"

static int nreports;

void ts_json_timestamp(struct tp_buf *b, const struct timespec *t)
{
	char s[64], z[16];
	struct tm tm;
	time_t sec = t->tv_sec;

	localtime_r(&sec, &tm);
	strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
	strftime(z, sizeof(z), "%z", &tm);
	/* RFC 3339: the offset with a colon. */
	tp_buf_printf(b, "\"%s.%03ld%.3s:%.2s\"", s, t->tv_nsec / 1000000, z,
		      z + 3);
}

static void num(struct tp_buf *b, const char *key, double v)
{
	if (isnan(v) || isinf(v))
		tp_buf_printf(b, ", \"%s\": null", key);
	else
		tp_buf_printf(b, ", \"%s\": %.3f", key, v);
}

/* A floating-point gauge's value, exactly (JSON has no NaN or Inf:
 * null). */
static void f64(struct tp_buf *b, const char *key, double v)
{
	char t[TP_F64_LEN];

	if (!isfinite(v))
		tp_buf_printf(b, ", \"%s\": null", key);
	else
		tp_buf_printf(b, ", \"%s\": %s", key, tp_fmt_f64(t, v));
}

static void i64(struct tp_buf *b, const char *key, int64_t v)
{
	char t[TP_I64_LEN];

	tp_buf_printf(b, ", \"%s\": %s", key, tp_fmt_i64(t, v));
}

void ts_json_host(struct tp_buf *b, const struct ts_host *h,
		  const struct timespec *now)
{
	char date[16];
	struct tm tm;
	time_t sec = now->tv_sec;

	localtime_r(&sec, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d", &tm);
	tp_buf_puts(b, "{\"sysstat\": {\"hosts\": [{\"nodename\": ");
	tp_buf_json_str(b, h->nodename);
	tp_buf_puts(b, ", \"sysname\": ");
	tp_buf_json_str(b, h->sysname);
	tp_buf_puts(b, ", \"release\": ");
	tp_buf_json_str(b, h->release);
	tp_buf_puts(b, ", \"machine\": ");
	tp_buf_json_str(b, h->machine);
	tp_buf_printf(b, ", \"number-of-cpus\": %ld, \"date\": \"%s\", "
		      "\"statistics\": [", h->ncpus, date);
}

static void json_begin(const struct ts_host *h, const struct ts_options *o,
		       const struct timespec *now)
{
	struct tp_buf b = { 0 };

	(void)o;
	ts_json_host(&b, h, now);
	fputs(tp_buf_str(&b), stdout);
	tp_buf_free(&b);
	fflush(stdout);
	nreports = 0;
}

static void row(struct tp_buf *b, const struct ts_row *x,
		const struct ts_report *r)
{
	const struct tp_series *s = x->s;
	int gauge = tp_kind_is_gauge(s->kind);

	if (s->pid) {
		tp_buf_printf(b, "{\"pid\": %d", s->pid);
	} else {
		tp_buf_puts(b, "{\"pid\": null, \"pids\": [");
		for (unsigned i = 0; i < s->nprocs; i++)
			tp_buf_printf(b, "%s%d", i ? ", " : "", s->pids[i]);
		tp_buf_putc(b, ']');
	}
	tp_buf_puts(b, ", \"process\": ");
	tp_buf_json_str(b, s->proc);
	tp_buf_puts(b, ", \"zone\": ");
	tp_buf_json_str(b, s->zone);
	tp_buf_puts(b, ", \"series\": ");
	tp_buf_json_str(b, s->key);
	tp_buf_puts(b, ", \"name\": ");
	tp_buf_json_str(b, s->name);
	tp_buf_puts(b, ", \"labels\": {");
	for (unsigned i = 0; i < s->nlabels; i++) {
		if (i)
			tp_buf_puts(b, ", ");
		tp_buf_json_str(b, s->label_names[i]);
		tp_buf_puts(b, ": ");
		tp_buf_json_str(b, s->label_values[i]);
	}
	tp_buf_printf(b, "}, \"kind\": \"%s\", \"unit\": ",
		      tp_type_name(s->kind, s->summary, s->info,
				   s->stateset));
	tp_buf_json_str(b, s->unit ? s->unit : "");
	/* Its processes are gone: a gauge is the value they left. */
	tp_buf_printf(b, ", \"dead\": %s", s->dead ? "true" : "false");
	if (gauge && r->kind == TS_AVERAGE)
		num(b, "value", x->mean_gauge);
	else if (s->kind == TALLY_FGAUGE || s->fractional)
		f64(b, "value", s->fvalue);
	else
		i64(b, s->kind == TALLY_HISTOGRAM ? "count" : "value",
		    x->value);
	if (!gauge) {
		num(b, "rate", x->rate);
		tp_buf_printf(b, ", \"reset\": %s", x->reset ? "true" :
							       "false");
	}
	if (s->kind == TALLY_HISTOGRAM) {
		if (s->classic)
			f64(b, "sum", x->fsum);
		else
			i64(b, "sum", x->sum);
		num(b, "mean", x->have_q ? x->mean : NAN);
		for (int q = 0; q < TS_NQ; q++)
			num(b, ts_quantiles[q].key, x->have_q ? x->q[q] : NAN);
	}
	if (r->ncpus) {
		tp_buf_puts(b, ", \"percpu\": [");
		for (unsigned i = 0; i < x->ncpu; i++) {
			tp_buf_printf(b, "%s{\"cpu\": %u", i ? ", " : "",
				      r->cpu_ids[i]);
			num(b, gauge ? "value" : "rate", x->cpu[i]);
			tp_buf_putc(b, '}');
		}
		tp_buf_putc(b, ']');
	}
	tp_buf_putc(b, '}');
}

static void json_report(const struct ts_report *r, const struct ts_options *o)
{
	static const char *const kinds[] = { "since-start", "interval",
					     "average" };
	struct tp_buf b = { 0 };
	struct ts_iter it;

	(void)o;
	tp_buf_puts(&b, nreports++ ? ",\n  " : "\n  ");
	tp_buf_puts(&b, "{\"timestamp\": ");
	ts_json_timestamp(&b, &r->when);
	tp_buf_printf(&b, ", \"report\": \"%s\"", kinds[r->kind]);
	if (r->kind == TS_SINCE_START)
		tp_buf_puts(&b, ", \"interval\": null");
	else
		tp_buf_printf(&b, ", \"interval\": %.3f", r->seconds);
	tp_buf_puts(&b, ", \"series\": [");
	/* Written row by row: the report is never whole in memory. */
	ts_iter_begin(&it, r, 0);
	for (size_t i = 0; ts_iter_next(&it); i++) {
		struct ts_row x;

		ts_iter_row(&it, &x);
		tp_buf_puts(&b, i ? ",\n    " : "\n    ");
		row(&b, &x, r);
		ts_row_free(&x);
		fputs(tp_buf_str(&b), stdout);
		tp_buf_reset(&b);
	}
	ts_iter_end(&it);
	tp_buf_puts(&b, "], \"events\": [");
	for (size_t i = 0; i < r->nevents; i++) {
		const struct ts_event *e = &r->events[i];

		tp_buf_printf(&b, "%s{\"event\": \"%s\", \"pid\": %d, "
			      "\"process\": ", i ? ", " : "",
			      e->started ? "started" : "exited", e->pid);
		tp_buf_json_str(&b, e->proc);
		tp_buf_puts(&b, ", \"zone\": ");
		tp_buf_json_str(&b, e->zone);
		tp_buf_puts(&b, ", \"path\": ");
		tp_buf_json_str(&b, e->path);
		tp_buf_putc(&b, '}');
	}
	tp_buf_puts(&b, "], \"skipped\": [");
	for (size_t i = 0; i < r->nskipped; i++) {
		tp_buf_puts(&b, i ? ", {\"path\": " : "{\"path\": ");
		tp_buf_json_str(&b, r->skipped[i].path);
		tp_buf_puts(&b, ", \"reason\": ");
		tp_buf_json_str(&b, r->skipped[i].reason);
		tp_buf_putc(&b, '}');
	}
	tp_buf_puts(&b, "]}");
	fputs(tp_buf_str(&b), stdout);
	tp_buf_free(&b);
	fflush(stdout);
}

static void json_end(const struct ts_options *o)
{
	(void)o;
	fputs(nreports ? "\n]}]}}\n" : "]}]}}\n", stdout);
	fflush(stdout);
}

const struct ts_emitter ts_emit_json = { json_begin, json_report, json_end };
