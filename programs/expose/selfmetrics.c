/*
 * selfmetrics.c: tally-exporter's own metrics (selfmetrics.h): their
 * definitions and each one's samples when it is written (the server
 * fills in their values: tally-exporter's selffill.c).  Counters are named here without _total,
 * which the writer adds; a sample's value is written as the text made
 * here.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "selfmetrics.h"
#include "strbuf.h"

_Static_assert(SELF_MAX_SAMPLES >= 2, "tally_exporter_label_clashes has "
	       "two samples");

static unsigned put_u64(struct self_sample *out, const char *labels,
			uint64_t v)
{
	snprintf(out->labels, sizeof(out->labels), "%s", labels);
	snprintf(out->value, sizeof(out->value), "%llu",
		 (unsigned long long)v);
	return 1;
}

static unsigned put_seconds(struct self_sample *out, double s)
{
	out->labels[0] = '\0';
	snprintf(out->value, sizeof(out->value), "%.6f", s);
	return 1;
}

/* The labels are the two versions, escaped; both are short strings of
 * this program and its library, well within a sample's labels. */
static unsigned s_build_info(const struct self_in *in,
			     struct self_sample *out)
{
	struct tp_buf b = { 0 };

	tp_buf_label(&b, "version", in->self->version ?
		     in->self->version : "");
	tp_buf_putc(&b, ',');
	tp_buf_label(&b, "libmicrohttpd", in->self->mhd_version ?
		     in->self->mhd_version : "");
	snprintf(out->labels, sizeof(out->labels), "%s", tp_buf_str(&b));
	snprintf(out->value, sizeof(out->value), "1");
	tp_buf_free(&b);
	return 1;
}

static unsigned s_segments_read(const struct self_in *in,
				struct self_sample *out)
{
	uint64_t n = 0;

	for (size_t i = 0; i < in->snap->nsegs; i++)
		n += !in->snap->segs[i].stale;
	return put_u64(out, "", n);
}

static unsigned s_records_skipped(const struct self_in *in,
				  struct self_sample *out)
{
	uint64_t n = 0;

	for (size_t i = 0; i < in->snap->nsegs; i++)
		if (!in->snap->segs[i].stale)
			n += in->snap->segs[i].records_skipped;
	return put_u64(out, "", n);
}

static unsigned by_reason(const uint64_t *n, struct self_sample *out)
{
	char l[64];

	for (unsigned r = 0; r < TP_NSKIP; r++) {
		snprintf(l, sizeof(l), "reason=\"%s\"", tp_skip_names[r]);
		put_u64(&out[r], l, n[r]);
	}
	return TP_NSKIP;
}

static unsigned s_skipped_now(const struct self_in *in,
			      struct self_sample *out)
{
	uint64_t n[TP_NSKIP] = { 0 };

	for (size_t i = 0; i < in->snap->nskipped; i++)
		n[tp_skip_reason(in->snap->skipped[i].err)]++;
	return by_reason(n, out);
}

static unsigned s_skipped_total(const struct self_in *in,
				struct self_sample *out)
{
	return by_reason(in->self->skipped_total, out);
}

static unsigned s_clashes(const struct self_in *in, struct self_sample *out)
{
	put_u64(&out[0], "action=\"renamed\"",
		in->self->label_clashes_total[0] + in->res->labels_renamed);
	put_u64(&out[1], "action=\"dropped\"",
		in->self->label_clashes_total[1] + in->res->labels_dropped);
	return 2;
}

static unsigned s_collect_seconds(const struct self_in *in,
				  struct self_sample *out)
{
	return put_seconds(out, in->self->collect_seconds);
}

/* Measured when written, the last metric, so that it covers the
 * formatting too (not gzip). */
static unsigned s_scrape_seconds(const struct self_in *in,
				 struct self_sample *out)
{
	return put_seconds(out, (double)(tp_now_ns() - in->t0_ns) / 1e9);
}

#define SAMPLES(fn)  fn, 0, 0
#define FROM_SELF(m) NULL, 0, offsetof(struct ex_self, m)
#define FROM_RES(m)  NULL, 1, offsetof(struct ex_result, m)

const struct self_metric self_metrics[] = {
	{ "tally_exporter_build_info", 0,
	  "tally-exporter's version and libmicrohttpd's.", NULL,
	  SAMPLES(s_build_info) },
	{ "tally_exporter_segments_read", 0,
	  "Segments read in this scrape.", NULL,
	  SAMPLES(s_segments_read) },
	{ "tally_exporter_scrape_segments_skipped", 0,
	  "Segments skipped in this scrape, by reason.", NULL,
	  SAMPLES(s_skipped_now) },
	{ "tally_exporter_segments_skipped", 1,
	  "Segments skipped since the exporter started, by reason.", NULL,
	  SAMPLES(s_skipped_total) },
	{ "tally_exporter_scrape_records_skipped", 0,
	  "Corrupt records skipped in the segments read in this scrape, "
	  "each hiding only its own series.", NULL,
	  SAMPLES(s_records_skipped) },
	{ "tally_exporter_connections_evicted", 1,
	  "Connections that had not sent a whole request, closed (the "
	  "oldest first) because the connection table was full, since the "
	  "exporter started.", NULL, FROM_SELF(conns_evicted) },
	{ "tally_exporter_dead_segments", 0,
	  "Segments whose processes are all gone, kept for post-mortem "
	  "reading until TALLY_RETAIN has passed.", NULL,
	  FROM_SELF(dead_segments) },
	{ "tally_exporter_dead_segment_bytes", 0,
	  "Memory the dead segments hold.", "bytes",
	  FROM_SELF(dead_bytes) },
	{ "tally_exporter_series", 0,
	  "Series exported in this scrape.", NULL, FROM_RES(series) },
	{ "tally_exporter_series_conflicts", 0,
	  "Series left out in this scrape: a kind or bucket layout that "
	  "differs from its family's, names that clash, or a label set "
	  "written already.", NULL, FROM_RES(conflicts) },
	{ "tally_exporter_series_redefined", 0,
	  "Series written in this scrape under the HELP of another "
	  "definition of their name: segments (services) that give one "
	  "name another help text or other label names; the family shows "
	  "the first one's.", NULL, FROM_RES(redefined) },
	{ "tally_exporter_label_clashes", 1,
	  "Series whose label names clashed with the exposition's (le on a "
	  "histogram) or the exporter's own (pid, process, zone), or "
	  "repeated a name, since the exporter started: renamed "
	  "(exported_le, tally_<name>) or dropped, once per scrape.", NULL,
	  SAMPLES(s_clashes) },
	{ "tally_exporter_retired_series", 0,
	  "--aggregate: series whose counts are kept for processes that "
	  "exited.", NULL, FROM_SELF(retired_series) },
	{ "tally_exporter_retired_segments", 1,
	  "--aggregate: segments that vanished since the exporter started, "
	  "whose last counts are kept.", NULL, FROM_SELF(retired_segments) },
	{ "tally_exporter_scrapes", 1,
	  "Scrapes served since the exporter started.", NULL,
	  FROM_SELF(scrapes) },
	{ "tally_exporter_collect_duration_seconds", 0,
	  "Time spent reading the segments in this scrape.", "seconds",
	  SAMPLES(s_collect_seconds) },
	{ "tally_exporter_scrape_duration_seconds", 0,
	  "Time spent reading the segments and formatting this response.",
	  "seconds", SAMPLES(s_scrape_seconds) },
};

const size_t self_nmetrics = sizeof(self_metrics) / sizeof(self_metrics[0]);

unsigned self_samples(const struct self_metric *m, const struct self_in *in,
		      struct self_sample out[SELF_MAX_SAMPLES])
{
	const char *p = m->in_res ? (const char *)in->res :
				    (const char *)in->self;
	uint64_t v;

	if (m->samples)
		return m->samples(in, out);
	memcpy(&v, p + m->off, sizeof(v));
	return put_u64(out, "", v);
}

/* What the dead segments of a raw snapshot hold. */
void self_count_dead(struct ex_self *self, const struct tp_snapshot *raw)
{
	for (size_t i = 0; i < raw->nsegs; i++) {
		const struct tp_segment *g = &raw->segs[i];

		if (g->stale || g->info.alive || g->info.in_use)
			continue;
		self->dead_segments++;
		self->dead_bytes += g->info.resident_bytes;
	}
}
