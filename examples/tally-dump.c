/*
 * tally-dump.c: list tally segments and their series, using nothing but
 * the reader API (tally/reader.h).
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

#define PROG "tally-dump"

#define DIE(...) die(__FILE__, __LINE__, __VA_ARGS__)

static void die(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
static void die(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* --- A growing string ---------------------------------------------------- */

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			DIE("vsnprintf failed");
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		b->cap = b->cap * 2 + (size_t)n + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			DIE("out of memory");
	}
}

/* A JSON string, quoted; @n bytes of @s at most. */
static void buf_json_str(struct buf *b, const char *s, size_t n)
{
	buf_printf(b, "\"");
	for (size_t i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			buf_printf(b, "\\%c", c);
		else if (c < 0x20)
			buf_printf(b, "\\u%04x", c);
		else
			buf_printf(b, "%c", c);
	}
	buf_printf(b, "\"");
}

/* A label value in Prometheus text style: \\, \" and \n escaped. */
static void buf_label_value(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			buf_printf(b, "\\%c", *s);
		else if (*s == '\n')
			buf_printf(b, "\\n");
		else
			buf_printf(b, "%c", *s);
	}
}

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

static const char *kind_name(unsigned kind)
{
	switch (kind) {
	case TALLY_COUNTER:   return "counter";
	case TALLY_GAUGE:     return "gauge";
	case TALLY_GAUGE_SET: return "gauge";
	case TALLY_FGAUGE:    return "gauge";
	case TALLY_HISTOGRAM: return "histogram";
	default:              return "unknown";
	}
}

static const char *mode_name(unsigned mode)
{
	switch (mode) {
	case TALLY_PERCPU:   return "percpu";
	case TALLY_SHARED:   return "shared";
	case TALLY_PERNODE:  return "pernode";
	case TALLY_ADAPTIVE: return "adaptive";
	default:             return "unknown";
	}
}

static const double quantiles[] = { 0.5, 0.9, 0.99, 0.999, 1.0 };
/* The last is the upper bound of the highest bucket used, not the largest
 * observation (a histogram keeps no observation): "max<=" in the text,
 * "max" in JSON (docs/tallystat-json.md says the same of tallystat's). */
static const char *const qnames[] = { "p50", "p90", "p99", "p99.9", "max<=" };
#define NQ (sizeof(quantiles) / sizeof(quantiles[0]))

static int series_cb(const struct tally_series_view *v, void *arg)
{
	struct walk *w = arg;
	struct buf key = { 0 }, t = { 0 };
	double q[NQ];
	int have_q = v->kind == TALLY_HISTOGRAM && v->value > 0;

	/* The key: name{labels}, as Prometheus writes a series. */
	buf_printf(&key, "%s", v->name);
	if (v->nlabels) {
		buf_printf(&key, "{");
		for (unsigned i = 0; i < v->nlabels; i++) {
			buf_printf(&key, "%s%s=\"", i ? "," : "",
				   v->label_names[i]);
			buf_label_value(&key, v->label_values[i]);
			buf_printf(&key, "\"");
		}
		buf_printf(&key, "}");
	}
	if (have_q) {
		for (size_t i = 0; i < NQ; i++) {
			int rc = tally_histogram_quantile(v, quantiles[i], &q[i]);

			if (rc < 0) {
				fprintf(stderr, PROG ": %s: quantile %g: %s\n",
					key.p, quantiles[i], strerror(-rc));
				have_q = 0;
				break;
			}
		}
	}

	if (w->o->json) {
		buf_printf(&t, "{\"name\": ");
		buf_json_str(&t, v->name, (size_t)-1);
		buf_printf(&t, ", \"kind\": \"%s\"%s, \"mode\": \"%s\", "
			   "\"unit\": ", kind_name(v->kind),
			   v->kind == TALLY_GAUGE_SET ||
			   v->kind == TALLY_FGAUGE ? ", \"set\": true" : "",
			   mode_name(v->mode));
		buf_json_str(&t, v->unit ? v->unit : "", (size_t)-1);
		buf_printf(&t, ", \"help\": ");
		buf_json_str(&t, v->help ? v->help : "", (size_t)-1);
		buf_printf(&t, ", \"labels\": {");
		for (unsigned i = 0; i < v->nlabels; i++) {
			buf_printf(&t, "%s", i ? ", " : "");
			buf_json_str(&t, v->label_names[i], (size_t)-1);
			buf_printf(&t, ": ");
			buf_json_str(&t, v->label_values[i], (size_t)-1);
		}
		buf_printf(&t, "}");
		if (v->kind == TALLY_HISTOGRAM) {
			buf_printf(&t, ", \"count\": %" PRId64 ", \"sum\": %"
				   PRId64, v->value, v->sum);
			for (size_t i = 0; i < NQ; i++) {
				const char *n = i == 3 ? "p999" :
						i == 4 ? "max" : qnames[i];

				if (have_q)
					buf_printf(&t, ", \"%s\": %.1f", n,
						   q[i]);
				else
					buf_printf(&t, ", \"%s\": null", n);
			}
		} else if (v->kind == TALLY_FGAUGE) {
			/* JSON has no NaN or infinity. */
			if (isfinite(v->fvalue))
				buf_printf(&t, ", \"value\": %.17g", v->fvalue);
			else
				buf_printf(&t, ", \"value\": null");
		} else {
			buf_printf(&t, ", \"value\": %" PRId64, v->value);
		}
		if (w->o->percpu && v->percpu) {
			buf_printf(&t, ", \"percpu\": [");
			for (unsigned c = 0; c < v->npercpu; c++)
				buf_printf(&t, "%s%" PRId64, c ? ", " : "",
					   v->percpu[c]);
			buf_printf(&t, "]");
		}
		buf_printf(&t, "}");
	} else {
		buf_printf(&t, "  %-9s %-40s", kind_name(v->kind), key.p);
		if (v->kind == TALLY_HISTOGRAM) {
			buf_printf(&t, " count=%" PRId64 " sum=%" PRId64,
				   v->value, v->sum);
			for (size_t i = 0; have_q && i < NQ; i++)
				buf_printf(&t, " %s=%.0f", qnames[i], q[i]);
			if (v->unit && v->unit[0])
				buf_printf(&t, " (%s)", v->unit);
		} else if (v->kind == TALLY_FGAUGE) {
			buf_printf(&t, " %.17g", v->fvalue);
		} else {
			buf_printf(&t, " %" PRId64, v->value);
		}
		if (w->o->percpu && v->percpu) {
			buf_printf(&t, "  percpu=[");
			for (unsigned c = 0; c < v->npercpu; c++)
				buf_printf(&t, "%s%" PRId64, c ? " " : "",
					   v->percpu[c]);
			buf_printf(&t, "]");
		}
	}

	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 256;
		w->e = realloc(w->e, w->cap * sizeof(*w->e));
		if (!w->e)
			DIE("out of memory");
	}
	w->e[w->n].key = key.p;
	w->e[w->n].text = t.p;
	w->n++;
	return 0;
}

/* By name, then labels; numbers in label values in numeric order. */
static int cmp_entry(const void *a, const void *b)
{
	return strverscmp(((const struct entry *)a)->key,
			  ((const struct entry *)b)->key);
}

static void human(char *out, size_t n, uint64_t bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, n, "%" PRIu64 " B", bytes);
	else
		snprintf(out, n, "%.1f %s", v, units[u]);
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
		struct buf b = { 0 };

		buf_printf(&b, "%s\n    {\"path\": ", w->nsegs ? "," : "");
		buf_json_str(&b, path, (size_t)-1);
		buf_printf(&b, ", \"pid\": %d, \"process\": ", info.pid);
		buf_json_str(&b, info.proc_name, sizeof(info.proc_name));
		buf_printf(&b, ", \"zone\": ");
		buf_json_str(&b, info.zone_name, sizeof(info.zone_name));
		buf_printf(&b, ", \"alive\": %s, \"format\": \"%u.%u\", "
			   "\"slabs\": %u, \"nodes\": %u, \"file_bytes\": %"
			   PRIu64 ", \"resident_bytes\": %" PRIu64
			   ", \"generation\": %" PRIu64 ", \"series\": [",
			   info.alive ? "true" : "false", info.major,
			   info.minor, info.nslabs, info.nnodes,
			   info.file_bytes, info.resident_bytes,
			   info.generation);
		fputs(b.p, stdout);
		free(b.p);
		for (size_t i = 0; i < w->n; i++)
			printf("%s\n      %s", i ? "," : "", w->e[i].text);
		printf("%s]}", w->n ? "\n    " : "");
	} else {
		human(res, sizeof(res), info.resident_bytes);
		human(file, sizeof(file), info.file_bytes);
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

static void bad_option(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
static void bad_option(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry '" PROG " --help'.\n", stderr);
	exit(2);
}

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
