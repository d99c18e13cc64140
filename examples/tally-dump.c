/*
 * tally-dump.c: list tally segments and their series, with the reader API
 * (tally/reader.h) and the programs' shared helpers (programs/common: a
 * growing string, kind names, the description of a segment's fields).
 *
 *   tally-dump [--dir DIR] [--pid PID] [--percpu] [--json]
 *
 * It is an example of that API, not the viewer (tallystat): one pass, no
 * rates, no filters.  For every segment it prints the header (creator pid
 * and name, zone, whether the creator still runs, memory really used) and
 * its series sorted by name and labels: a counter's or gauge's value, and
 * a histogram's count, sum and quantiles.  A segment that cannot be opened
 * is reported on stderr with the reason and skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tally/metrics.h"
#include "tally/reader.h"

#include "format.h"
#include "kind.h"
#include "parse.h"
#include "segfield.h"
#include "strbuf.h"

#define PROG "tally-dump"

/* --- Series -------------------------------------------------------------- */

struct options {
	const char *dir;   /* NULL: the library's default */
	int pid;           /* 0: every segment */
	int percpu, json;
};

/* One series, formatted, with the key it is sorted by. */
struct entry {
	char *key;
	char *text;
};

struct walk {
	const struct options *o;
	struct entry *e;
	size_t n, cap;
	int nsegs, nskipped;
};

/*
 * The quantiles shown of a histogram, with their names in the text and in
 * JSON.  The last is the upper bound of the highest bucket used, not the
 * largest observation (a histogram keeps no observation): "max<=" in the
 * text, "max" in JSON (docs/tallystat-json.md says the same of
 * tallystat's).
 */
static const struct {
	double q;
	const char *text, *json;
} quantiles[] = {
	{ 0.5, "p50", "p50" },
	{ 0.9, "p90", "p90" },
	{ 0.99, "p99", "p99" },
	{ 0.999, "p99.9", "p999" },
	{ 1.0, "max<=", "max" },
};
#define NQ (sizeof(quantiles) / sizeof(quantiles[0]))

/* A fractional counter's value (format 2.6), @whole + @frac / 10^9, as
 * an exact decimal without trailing zeros, in @buf. */
static const char *frac_str(int64_t whole, unsigned frac, char buf[40])
{
	int n = snprintf(buf, 40, "%" PRId64 ".%09u", whole, frac);

	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	return buf;
}

/* A classic histogram's sum (format 2.6): exact when not negative. */
static const char *classic_sum(const struct tally_series_view *v,
			       char buf[40])
{
	if (v->sum < 0) {
		snprintf(buf, 40, "%.17g", v->fsum);
		return buf;
	}
	if (!v->frac) {
		snprintf(buf, 40, "%" PRId64, v->sum);
		return buf;
	}
	return frac_str(v->sum, v->frac, buf);
}

static int series_cb(const struct tally_series_view *v, void *arg)
{
	struct walk *w = arg;
	struct tp_buf key = { 0 }, t = { 0 };
	char num[40], f64[TP_F64_LEN];
	double q[NQ];
	int have_q = v->kind == TALLY_HISTOGRAM && !v->summary &&
		     v->value > 0;
	const char *kind = tp_type_name(v->kind, v->summary, v->info,
					v->stateset);

	/* The key: name{labels}, as Prometheus writes a series. */
	tp_series_key_buf(&key, v->name, v->nlabels, v->label_names,
			  v->label_values);
	if (have_q) {
		for (size_t i = 0; i < NQ; i++) {
			int rc = tally_histogram_quantile(v, quantiles[i].q,
							  &q[i]);

			if (rc < 0) {
				fprintf(stderr, PROG ": %s: quantile %g: %s\n",
					tp_buf_str(&key), quantiles[i].q,
					strerror(-rc));
				have_q = 0;
				break;
			}
		}
	}

	if (w->o->json) {
		tp_buf_puts(&t, "{\"name\": ");
		tp_buf_json_str(&t, v->name);
		tp_buf_printf(&t, ", \"kind\": \"%s\"%s, \"mode\": \"%s\", "
			      "\"unit\": ", kind,
			      v->kind == TALLY_GAUGE_SET ||
			      v->kind == TALLY_FGAUGE ? ", \"set\": true" : "",
			      tp_mode_name(v->mode));
		tp_buf_json_str(&t, v->unit ? v->unit : "");
		tp_buf_puts(&t, ", \"help\": ");
		tp_buf_json_str(&t, v->help ? v->help : "");
		tp_buf_puts(&t, ", \"labels\": {");
		for (unsigned i = 0; i < v->nlabels; i++) {
			tp_buf_puts(&t, i ? ", " : "");
			tp_buf_json_str(&t, v->label_names[i]);
			tp_buf_puts(&t, ": ");
			tp_buf_json_str(&t, v->label_values[i]);
		}
		tp_buf_putc(&t, '}');
		if (v->summary) {
			/* A summary (format 2.7): its count and exact sum. */
			tp_buf_printf(&t, ", \"count\": %" PRId64 ", \"sum\": %s",
				      v->value, classic_sum(v, num));
		} else if (v->kind == TALLY_HISTOGRAM && v->classic) {
			/* A classic histogram (format 2.6): its bounds, the
			 * count of each bucket, the exact sum. */
			tp_buf_printf(&t, ", \"count\": %" PRId64 ", \"sum\": %s"
				      ", \"bounds\": [", v->value,
				      classic_sum(v, num));
			for (unsigned i = 0; i < v->nbounds; i++)
				tp_buf_printf(&t, "%s%s", i ? ", " : "",
					      tp_fmt_f64(f64, v->bounds[i]));
			tp_buf_puts(&t, "], \"buckets\": [");
			for (unsigned i = 0; i < v->nbuckets; i++)
				tp_buf_printf(&t, "%s%" PRId64, i ? ", " : "",
					      v->buckets[i]);
			tp_buf_putc(&t, ']');
			for (size_t i = 0; i < NQ; i++) {
				if (have_q)
					tp_buf_printf(&t, ", \"%s\": %s",
						      quantiles[i].json,
						      tp_fmt_f64(f64, q[i]));
				else
					tp_buf_printf(&t, ", \"%s\": null",
						      quantiles[i].json);
			}
		} else if (v->kind == TALLY_HISTOGRAM) {
			tp_buf_printf(&t, ", \"count\": %" PRId64 ", \"sum\": %"
				      PRId64, v->value, v->sum);
			for (size_t i = 0; i < NQ; i++) {
				if (have_q)
					tp_buf_printf(&t, ", \"%s\": %.1f",
						      quantiles[i].json, q[i]);
				else
					tp_buf_printf(&t, ", \"%s\": null",
						      quantiles[i].json);
			}
		} else if (v->kind == TALLY_FGAUGE) {
			/* JSON has no NaN or infinity. */
			if (isfinite(v->fvalue))
				tp_buf_printf(&t, ", \"value\": %.17g",
					      v->fvalue);
			else
				tp_buf_puts(&t, ", \"value\": null");
		} else if (v->fractional && v->frac) {
			/* A fractional counter (format 2.6): exact. */
			tp_buf_printf(&t, ", \"value\": %s",
				      frac_str(v->value, v->frac, num));
		} else {
			tp_buf_printf(&t, ", \"value\": %" PRId64, v->value);
		}
		if (w->o->percpu && v->percpu) {
			tp_buf_puts(&t, ", \"percpu\": [");
			for (unsigned c = 0; c < v->npercpu; c++)
				tp_buf_printf(&t, "%s%" PRId64, c ? ", " : "",
					      v->percpu[c]);
			tp_buf_putc(&t, ']');
		}
		tp_buf_putc(&t, '}');
	} else {
		tp_buf_printf(&t, "  %-9s %-40s", kind, tp_buf_str(&key));
		if (v->summary) {
			tp_buf_printf(&t, " count=%" PRId64 " sum=%s",
				      v->value, classic_sum(v, num));
			if (v->unit && v->unit[0])
				tp_buf_printf(&t, " (%s)", v->unit);
		} else if (v->kind == TALLY_HISTOGRAM && v->classic) {
			tp_buf_printf(&t, " count=%" PRId64 " sum=%s",
				      v->value, classic_sum(v, num));
			for (unsigned i = 0; i < v->nbuckets; i++) {
				char bound[32];

				snprintf(bound, sizeof(bound), "%g",
					 i < v->nbounds ? v->bounds[i] : INFINITY);
				tp_buf_printf(&t, "%s%s:%" PRId64,
					      i ? " " : " buckets=", bound,
					      v->buckets[i]);
			}
			for (size_t i = 0; have_q && i < NQ; i++)
				tp_buf_printf(&t, " %s=%g", quantiles[i].text,
					      q[i]);
			if (v->unit && v->unit[0])
				tp_buf_printf(&t, " (%s)", v->unit);
		} else if (v->kind == TALLY_HISTOGRAM) {
			tp_buf_printf(&t, " count=%" PRId64 " sum=%" PRId64,
				      v->value, v->sum);
			for (size_t i = 0; have_q && i < NQ; i++)
				tp_buf_printf(&t, " %s=%.0f", quantiles[i].text,
					      q[i]);
			if (v->unit && v->unit[0])
				tp_buf_printf(&t, " (%s)", v->unit);
		} else if (v->kind == TALLY_FGAUGE) {
			tp_buf_printf(&t, " %.17g", v->fvalue);
		} else if (v->fractional && v->frac) {
			tp_buf_printf(&t, " %s", frac_str(v->value, v->frac,
							  num));
		} else {
			tp_buf_printf(&t, " %" PRId64, v->value);
		}
		if (w->o->percpu && v->percpu) {
			tp_buf_puts(&t, "  percpu=[");
			for (unsigned c = 0; c < v->npercpu; c++)
				tp_buf_printf(&t, "%s%" PRId64, c ? " " : "",
					      v->percpu[c]);
			tp_buf_putc(&t, ']');
		}
	}

	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 256;
		w->e = tp_xrealloc(w->e, w->cap * sizeof(*w->e));
	}
	w->e[w->n].key = tp_buf_take(&key);
	w->e[w->n].text = tp_buf_take(&t);
	w->n++;
	return 0;
}

/* By name, then labels; numbers in label values in numeric order. */
static int cmp_entry(const void *a, const void *b)
{
	return strverscmp(((const struct entry *)a)->key,
			  ((const struct entry *)b)->key);
}

/* --- Segments ------------------------------------------------------------ */

/* The reader's messages name the file already; name it when one does not. */
static void skip(struct walk *w, const char *path, const char *why)
{
	if (!why || !why[0])
		why = "cannot be read";
	if (strstr(why, path))
		fprintf(stderr, PROG ": skipping %s\n", why);
	else
		fprintf(stderr, PROG ": skipping %s: %s\n", path, why);
	w->nskipped++;
}

/* What -j shows of a segment before its series (segfield.h describes
 * each field). */
static const char *const seg_keys[] = {
	"path", "pid", "process", "zone", "alive", "format", "slabs", "nodes",
	"file_bytes", "resident_bytes", "generation", NULL,
};

static int seg_cb(const char *path, struct tally_seg *s, const char *error,
		  void *arg)
{
	struct walk *w = arg;
	struct tally_seg_info info;
	unsigned flags = w->o->percpu ? TALLY_READ_PERCPU : 0;
	char res[32], file[32];
	int rc;

	if (!s) {
		skip(w, path, error);
		return 0;
	}
	if ((rc = tally_seg_info(s, &info)) < 0) {
		skip(w, path, tally_errmsg()[0] ? tally_errmsg() :
			      strerror(-rc));
		return 0;
	}
	w->n = 0;
	rc = tally_seg_foreach(s, flags, series_cb, w);
	if (rc < 0) {
		skip(w, path, tally_errmsg()[0] ? tally_errmsg() :
			      strerror(-rc));
		for (size_t i = 0; i < w->n; i++) {
			free(w->e[i].key);
			free(w->e[i].text);
		}
		return 0;
	}
	/* A segment without series may have left w->e NULL: qsort() must
	 * not be given it, even for no elements. */
	if (w->n > 1)
		qsort(w->e, w->n, sizeof(*w->e), cmp_entry);

	if (w->o->json) {
		struct tp_buf b = { 0 };
		struct tp_seg_row r = { &info, (int64_t)w->n };

		info.path = path;
		tp_buf_puts(&b, w->nsegs ? ",\n    {" : "\n    {");
		tp_seg_json(&b, seg_keys, &r, 1);
		tp_buf_puts(&b, ", \"series\": [");
		fputs(tp_buf_str(&b), stdout);
		tp_buf_free(&b);
		for (size_t i = 0; i < w->n; i++)
			printf("%s\n      %s", i ? "," : "", w->e[i].text);
		printf("%s]}", w->n ? "\n    " : "");
	} else {
		tp_fmt_human(res, sizeof(res), (double)info.resident_bytes,
			     TP_UNIT_BYTES, 0);
		tp_fmt_human(file, sizeof(file), (double)info.file_bytes,
			     TP_UNIT_BYTES, 0);
		printf("%s\n  pid %d (%.16s), zone %.64s, %s, resident %s "
		       "(file %s), %zu series\n", path, info.pid,
		       info.proc_name, info.zone_name,
		       info.alive ? "alive" : "dead", res, file, w->n);
		for (size_t i = 0; i < w->n; i++)
			printf("%s\n", w->e[i].text);
	}
	for (size_t i = 0; i < w->n; i++) {
		free(w->e[i].key);
		free(w->e[i].text);
	}
	w->nsegs++;
	return 0;
}

/* --- Options and main ---------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--dir DIR] [--pid PID] [--percpu] [--json]\n"
		"\n"
		"List the tally segments of a directory and their series.\n"
		"\n"
		"  -d, --dir DIR   the directory of segments (default: "
		"$TALLY_DIR, or\n"
		"                  $XDG_RUNTIME_DIR/tally and "
		"/dev/shm/tally-<uid>)\n"
		"  -p, --pid PID   only the segments of process PID\n"
		"  -c, --percpu    also the per-CPU values\n"
		"  -j, --json      one JSON document instead of text\n"
		"  -h, --help      this text\n"
		"\n"
		"Exit status: 0 when every segment was read; 1 when one could "
		"not be (it is\n"
		"reported on stderr, the others are listed), the directory "
		"cannot be read,\n"
		"or --pid found nothing; 2 for bad arguments.\n");
}

/* A bad command line: said, then exit status 2. */
#define bad_option(...)                                                      \
	do {                                                                 \
		tp_bad_usage(PROG, "Try '" PROG " --help'.", __VA_ARGS__);   \
		exit(2);                                                     \
	} while (0)

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "pid", required_argument, NULL, 'p' },
		{ "percpu", no_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = { 0 };
	struct walk w = { &o, NULL, 0, 0, 0, 0 };
	char dirname[4096];
	const char *shown;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "d:p:cjh", longopts, NULL)) !=
	       -1) {
		switch (opt) {
		case 'd':
			if (!optarg[0])
				bad_option("--dir: empty directory name");
			o.dir = optarg;
			break;
		case 'p': {
			char *end;
			long v;

			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 1 ||
			    v > 0x7fffffff)
				bad_option("--pid: expected a process id (a "
					   "positive integer), got '%s'",
					   optarg);
			o.pid = (int)v;
			break;
		}
		case 'c':
			o.percpu = 1;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fputs("Try '" PROG " --help'.\n", stderr);
			return 2;
		}
	}
	if (optind < argc)
		bad_option("unexpected argument '%s'", argv[optind]);

	/* Only for messages: the library reads the default places itself
	 * (this one, and /dev/shm/tally-<uid> besides a runtime directory). */
	shown = o.dir;
	if (!shown) {
		if (tally_default_dir(0, dirname, sizeof(dirname)) < 0)
			snprintf(dirname, sizeof(dirname), "(default)");
		shown = dirname;
	}

	if (o.json)
		printf("{\"segments\": [");
	if (o.pid)
		rc = tally_seg_foreach_pid(o.dir, o.pid, NULL, seg_cb, &w);
	else
		rc = tally_dir_foreach(o.dir, NULL, seg_cb, &w);
	if (o.json)
		printf("%s]}\n", w.nsegs ? "\n  " : "");
	free(w.e);
	fflush(stdout);

	if (rc < 0) {
		if (tally_errmsg()[0] && strstr(tally_errmsg(), shown))
			fprintf(stderr, PROG ": %s\n", tally_errmsg());
		else
			fprintf(stderr, PROG ": cannot read %s: %s\n", shown,
				strerror(-rc));
		return 1;
	}
	if (o.pid && w.nsegs == 0 && w.nskipped == 0) {
		fprintf(stderr, PROG ": no segment of pid %d in %s\n", o.pid,
			shown);
		return 1;
	}
	if (!o.pid && w.nsegs == 0 && w.nskipped == 0 && !o.json)
		printf("no segments in %s\n", shown);
	return w.nskipped ? 1 : 0;
}
