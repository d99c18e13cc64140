/*
 * programs/tallystat/segments.c: --list (the segments themselves: who
 * made them, whether it still runs, how many series, how much memory,
 * and how much the dead ones hold) and --clean (remove the segments of
 * processes that are gone, once $TALLY_RETAIN has passed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "segfield.h"
#include "strbuf.h"
#include "table.h"
#include "tallystat.h"

/* -p, -C and --zone, as the reports apply them (and, in
 * ts_collect_opts(), the selectors). */
int ts_seg_selected(const struct tally_seg_info *in,
		    const struct ts_options *o)
{
	if (o->npids) {
		unsigned i;

		for (i = 0; i < o->npids && o->pids[i] != in->pid; i++)
			;
		if (i == o->npids)
			return 0;
	}
	if (o->have_comm &&
	    regexec(&o->comm_re, in->proc_name, 0, NULL, 0) != 0)
		return 0;
	if (o->zone_glob && fnmatch(o->zone_glob, in->zone_name, 0) != 0)
		return 0;
	return 1;
}

static int seg_filter(const struct tally_seg_info *in, void *arg)
{
	return ts_seg_selected(in, arg);
}

/* The positional selectors, or'ed: any of them. */
static int series_filter(const struct tally_series_view *v,
			 const struct tally_seg_info *in, void *arg)
{
	const struct ts_options *o = arg;

	(void)in;
	if (!o->nsels)
		return 1;
	for (unsigned i = 0; i < o->nsels; i++)
		if (tp_selector_match(&o->sels[i], v->name, v->nlabels,
				      v->label_names, v->label_values))
			return 1;
	return 0;
}

void ts_collect_opts(const struct ts_options *o, struct tp_collect_opts *co)
{
	memset(co, 0, sizeof(*co));
	co->dirs = o->dirs;
	co->ndirs = o->ndirs;
	co->open_opts = &o->open_opts;
	co->read_flags = o->percpu ? TALLY_READ_PERCPU : 0;
	co->seg_filter = seg_filter;
	co->series_filter = series_filter;
	co->arg = (void *)o;
}

struct seg_entry {
	char *path;
	struct tally_seg_info info;
	int nseries;            /* live series, or -errno */
	char *error;            /* unreadable: the reason */
};

struct seg_list {
	const struct ts_options *o;
	struct seg_entry *e;
	size_t n;
};

static int count_cb(const struct tally_series_view *v, void *arg)
{
	(void)v;
	(void)arg;
	return 0;
}

static int list_cb(const char *path, struct tally_seg *s, const char *error,
		   void *arg)
{
	struct seg_list *l = arg;
	struct seg_entry e = { 0 };
	int rc;

	if (s && (rc = tally_seg_info(s, &e.info)) < 0) {
		error = tally_errmsg()[0] ? tally_errmsg() : strerror(-rc);
		s = NULL;
	}
	if (s) {
		if (!ts_seg_selected(&e.info, l->o))
			return 0;
		/* The walk's count is the number of live series. */
		e.nseries = tally_seg_foreach(s, 0, count_cb, NULL);
		if (e.nseries < 0)
			error = tally_errmsg()[0] ? tally_errmsg() :
						     strerror(-e.nseries);
	}
	if (!s || e.nseries < 0) {
		const char *why = error && error[0] ? error : "cannot be read";
		size_t plen = strlen(path);

		if (strncmp(why, path, plen) == 0)
			for (why += plen; *why == ':' || *why == ' '; why++)
				;
		e.error = tp_xstrdup(why);
	}
	e.path = tp_xstrdup(path);
	e.info.path = e.path;
	l->e = tp_xrealloc(l->e, (l->n + 1) * sizeof(*l->e));
	l->e[l->n++] = e;
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	return strverscmp(((const struct seg_entry *)a)->path,
			  ((const struct seg_entry *)b)->path);
}

/* Dead: nobody holds its locks any more; the memory stays until a
 * clean-up removes the file. */
static int is_dead(const struct seg_entry *e)
{
	return !e->error && !e->info.alive && !e->info.in_use;
}

/* The dead segments of @l (those still there, when @existing), and the
 * memory they hold. */
static size_t dead_of(const struct seg_list *l, int existing, uint64_t *bytes)
{
	size_t n = 0;

	*bytes = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (!is_dead(&l->e[i]) ||
		    (existing && access(l->e[i].path, F_OK) < 0))
			continue;
		n++;
		*bytes += l->e[i].info.resident_bytes;
	}
	return n;
}

static void print_dead(size_t n, uint64_t bytes, const char *how)
{
	char b[64];

	printf("%zu dead segment%s %s %s of memory (%" PRIu64 " bytes)\n", n,
	       n == 1 ? "" : "s", how, tp_fmt_human(b, sizeof(b),
	       (double)bytes, TP_UNIT_BYTES, 0), bytes);
}

static int collect(const struct ts_options *o, struct seg_list *l)
{
	unsigned n = o->ndirs;
	int result = 0;

	memset(l, 0, sizeof(*l));
	l->o = o;
	for (unsigned i = 0; i < (n ? n : 1); i++) {
		const char *dir = n ? o->dirs[i] : NULL;
		int rc = tally_dir_foreach(dir, &o->open_opts, list_cb, l);

		if (rc < 0) {
			fprintf(stderr, PROG ": %s\n", tally_errmsg()[0] ?
				tally_errmsg() : strerror(-rc));
			result = -1;
		}
	}
	if (l->n > 1)
		qsort(l->e, l->n, sizeof(*l->e), cmp_entry);
	return result;
}

static void list_free(struct seg_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->e[i].path);
		free(l->e[i].error);
	}
	free(l->e);
}

/*
 * What --list shows of a segment (segfield.h describes each field): the
 * table's columns, and the JSON members after "path", in these orders.
 * The JSON has the zone's refusal counters besides, as the exporter's
 * tally_segment_* metrics do.
 */
static const char *const list_columns[] = {
	"pid", "process", "zone", "state", "series", "file_bytes",
	"resident_bytes", "path", NULL,
};
static const char *const list_keys[] = {
	"pid", "process", "zone", "state", "alive", "in_use", "series",
	"file_bytes", "resident_bytes", "format", "slabs", "alloc_refused",
	"copies_refused", "register_failed", "redefinitions", NULL,
};

static struct tp_seg_row row_of(const struct seg_entry *e)
{
	struct tp_seg_row r = { &e->info, e->nseries };

	return r;
}

static void list_json(const struct seg_list *l, const struct ts_host *h)
{
	struct tp_buf b = { 0 };
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	ts_json_host(&b, h, &now);
	tp_buf_puts(&b, "\n  {\"timestamp\": ");
	ts_json_timestamp(&b, &now);
	tp_buf_puts(&b, ", \"report\": \"segments\", \"segments\": [");
	for (size_t i = 0; i < l->n; i++) {
		const struct seg_entry *e = &l->e[i];
		struct tp_seg_row r = row_of(e);

		tp_buf_puts(&b, i ? ",\n    {\"path\": " : "\n    {\"path\": ");
		tp_buf_json_str(&b, e->path);
		if (e->error) {
			tp_buf_puts(&b, ", \"state\": \"unreadable\", "
				    "\"reason\": ");
			tp_buf_json_str(&b, e->error);
		} else {
			tp_seg_json(&b, list_keys, &r, 0);
		}
		tp_buf_putc(&b, '}');
	}
	tp_buf_puts(&b, "]}\n]}]}}\n");
	fputs(tp_buf_str(&b), stdout);
	tp_buf_free(&b);
}

int ts_list(const struct ts_options *o, const struct ts_host *h)
{
	struct seg_list l;
	struct ts_table t;
	int rc = collect(o, &l);
	unsigned c_pid = 0, c_state = 0, c_path = 0, ncols = 0;

	if (o->json) {
		list_json(&l, h);
		list_free(&l);
		return rc < 0 ? 1 : 0;
	}
	memset(&t, 0, sizeof(t));
	for (const char *const *k = list_columns; *k; k++, ncols++) {
		const struct tp_seg_field *f = tp_seg_field_find(*k);

		ts_table_col(&t, f->column, f->type != TP_SF_STR);
		if (!strcmp(*k, "pid"))
			c_pid = ncols;
		else if (!strcmp(*k, "state"))
			c_state = ncols;
		else if (!strcmp(*k, "path"))
			c_path = ncols;
	}
	for (size_t i = 0; i < l.n; i++) {
		const struct seg_entry *e = &l.e[i];
		struct tp_seg_row r = row_of(e);
		struct ts_cell *row = ts_table_row(&t);

		if (e->error) {
			ts_table_set(&t, row, c_pid, tp_xstrdup("-"), NULL);
			ts_table_set(&t, row, c_state, tp_xstrdup("unreadable"),
				     TS_SGR_RED);
			ts_table_set(&t, row, c_path, tp_xstrdup(e->path), NULL);
			fprintf(stderr, PROG ": skipping %s: %s\n", e->path,
				e->error);
			continue;
		}
		for (unsigned c = 0; c < ncols; c++)
			ts_table_set(&t, row, c, tp_seg_text(
				tp_seg_field_find(list_columns[c]), &r),
				c == c_state && !e->info.alive ?
				TS_SGR_YELLOW : NULL);
	}
	ts_table_print(&t, o->color);
	ts_table_free(&t);
	{
		uint64_t bytes;
		size_t n = dead_of(&l, 0, &bytes);

		print_dead(n, bytes, n == 1 ? "holds" : "hold");
	}
	list_free(&l);
	fflush(stdout);
	return rc < 0 ? 1 : 0;
}

struct clean_acc {
	const struct seg_list *l;
};

/* One file removed: named, with what --list would have said of it. */
static void cleaned(const char *path, const char *why, void *arg)
{
	const struct clean_acc *a = arg;

	for (size_t i = 0; i < a->l->n; i++) {
		const struct seg_entry *e = &a->l->e[i];

		if (e->error || strcmp(e->path, path))
			continue;
		printf("removed %s (pid %d, %s, zone %s, %d series): %s\n",
		       path, e->info.pid, e->info.proc_name,
		       e->info.zone_name, e->nseries, why);
		return;
	}
	printf("removed %s: %s\n", path, why);
}

/*
 * tally_dir_expire() applies $TALLY_RETAIN as writers do, and names each
 * file it removes, and why; the dead segments it keeps are counted.
 */
int ts_clean(const struct ts_options *o)
{
	struct seg_list l;
	struct clean_acc a = { &l };
	unsigned n = o->ndirs;
	int removed = 0, rc, status = collect(o, &l) < 0 ? 1 : 0;
	uint64_t bytes;
	size_t kept;

	for (unsigned i = 0; i < (n ? n : 1); i++) {
		rc = tally_dir_expire(n ? o->dirs[i] : NULL, TALLY_RETAIN_ENV,
				      cleaned, &a);
		if (rc < 0) {
			fprintf(stderr, PROG ": --clean: %s\n",
				tally_errmsg()[0] ? tally_errmsg() :
						    strerror(-rc));
			status = 1;
			continue;
		}
		removed += rc;
	}
	printf("%d file%s removed\n", removed, removed == 1 ? "" : "s");
	kept = dead_of(&l, 1, &bytes);
	if (kept) {
		print_dead(kept, bytes, "kept, holding");
		printf("(for post-mortem reading: removed once found dead "
		       "longer ago than TALLY_RETAIN, by default 1h; "
		       "TALLY_RETAIN=0 removes them now)\n");
	}
	list_free(&l);
	return status;
}
