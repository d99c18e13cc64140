/*
 * plot.c: the --plot DIR output of tally-bench: each scenario's JSON
 * document and the charts its bench_doc declares (struct bench_plot),
 * drawn by gnuplot from a .dat and a .gp file left next to the PNG so
 * that a user can edit and draw them again.
 *
 * The charts are generic over rows: a scenario that fills bench_rows and
 * declares a bench_plot gets a chart, nothing here knows a scenario.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

void bench_plot_add(struct bench_doc *d, const struct bench_plot *p)
{
	if (d->nplots >= BENCH_MAX_PLOTS)
		bench_die("too many charts");
	d->plots[d->nplots++] = *p;
}

int bench_have_gnuplot(void)
{
	return bench_on_path("gnuplot");
}

/* mkdir -p */
static void make_dir(const char *dir)
{
	char buf[4096];

	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		bench_die("--plot: directory name too long");
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0777) < 0 && errno != EEXIST)
			bench_die("--plot: cannot create %s: %s", buf,
				  strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, 0777) < 0 && errno != EEXIST)
		bench_die("--plot: cannot create %s: %s", buf, strerror(errno));
}

FILE *bench_out_open(const struct bench_opts *o, const char *name)
{
	char path[4096];
	FILE *f;

	if (!o->plot_dir || o->child)
		return NULL;
	make_dir(o->plot_dir);
	snprintf(path, sizeof(path), "%s/%s", o->plot_dir, name);
	f = fopen(path, "w");
	if (!f)
		bench_die("--plot: cannot write %s: %s", path, strerror(errno));
	return f;
}

/* The x (or split) value of a row. */
static double field_of(const struct bench_row *r, enum bench_field f)
{
	switch (f) {
	case BENCH_F_THREADS:
		return r->threads;
	case BENCH_F_SLABS:
		return r->slabs;
	case BENCH_F_PINNED:
		return r->pinned;
	case BENCH_F_RATIO0:
		return r->ratio[0];
	default:
		return NAN;
	}
}

/* The median, min and max of a row's y; 0 when it has none. */
static int y_of(const struct bench_row *r, enum bench_field f, double *med,
		double *lo, double *hi)
{
	const struct bench_stats *st;

	switch (f) {
	case BENCH_F_RATE:
		st = &r->rate_st;
		break;
	case BENCH_F_NS:
		st = &r->ns_st;
		break;
	case BENCH_F_BYTES:
		*med = *lo = *hi = r->bytes;
		return isfinite(r->bytes);
	default:
		return 0;
	}
	if (r->n == 0)
		return 0;
	*med = st->median;
	*lo = st->min;
	*hi = st->max;
	return isfinite(*med);
}

static const char *split_text(enum bench_field f, double v, char *buf,
			      size_t n)
{
	switch (f) {
	case BENCH_F_THREADS:
		snprintf(buf, n, ", %.0f thread%s", v, v == 1 ? "" : "s");
		break;
	case BENCH_F_SLABS:
		snprintf(buf, n, ", %.0f slabs", v);
		break;
	case BENCH_F_PINNED:
		snprintf(buf, n, v ? ", pinned" : ", unpinned");
		break;
	default:
		buf[0] = 0;
	}
	return buf;
}

struct line {
	char title[96];
	const char *config;
	double split;
	int ours;
	int bars;              /* some point has more than one run */
	unsigned npts;
	double x[BENCH_MAX_ROWS], y[BENCH_MAX_ROWS], lo[BENCH_MAX_ROWS],
	       hi[BENCH_MAX_ROWS];
	unsigned n[BENCH_MAX_ROWS];
};

static int cmp_x(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* A string for a gnuplot double-quoted literal. */
static void gp_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* Colours that stay apart on white and in grey: tally's lines first
 * (strong), then the baselines'. */
static const char *const ours_colour[] = {
	"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9",
};
static const char *const base_colour[] = {
	"#000000", "#7f7f7f", "#8c510a", "#b2182b", "#4d4d4d", "#762a83",
};

static int draw(const struct bench_doc *d, const struct bench_opts *o,
		const struct bench_plot *p)
{
	static struct line lines[BENCH_MAX_ROWS];
	const char *ours = p->ours ? p->ours : "tally";
	unsigned nl = 0, nours = 0, nbase = 0, maxn = 0;
	double xs[BENCH_MAX_ROWS];
	unsigned nxs = 0;
	char path[4096], buf[64];
	FILE *dat, *gp;
	pid_t pid;
	int status;

	for (unsigned i = 0; i < d->nrows; i++) {
		const struct bench_row *r = &d->rows[i];
		double x = field_of(r, p->x), sp = field_of(r, p->split);
		double med, lo, hi;
		struct line *l = NULL;

		if (p->profile && strcmp(r->profile, p->profile) != 0)
			continue;
		if (p->pinned >= 0 && r->pinned != p->pinned)
			continue;
		if (p->threads && r->threads != p->threads)
			continue;
		if (!isfinite(x) || !y_of(r, p->y, &med, &lo, &hi))
			continue;
		if (p->logx && x <= 0)
			continue;
		for (unsigned k = 0; k < nl; k++)
			if (strcmp(lines[k].config, r->config) == 0 &&
			    (p->split == BENCH_F_NONE || lines[k].split == sp))
				l = &lines[k];
		if (!l) {
			l = &lines[nl++];
			memset(l, 0, sizeof(*l));
			l->config = r->config;
			l->split = sp;
			l->ours = strncmp(r->config, ours, strlen(ours)) == 0;
			snprintf(l->title, sizeof(l->title), "%s%s%s", r->config,
				 split_text(p->split, sp, buf, sizeof(buf)),
				 l->ours ? "" : " (baseline)");
		}
		l->x[l->npts] = x;
		l->y[l->npts] = med;
		l->lo[l->npts] = lo;
		l->hi[l->npts] = hi;
		l->n[l->npts] = r->n;
		l->bars |= r->n > 1;
		if (r->n > maxn)
			maxn = r->n;
		l->npts++;
		{
			unsigned k;

			for (k = 0; k < nxs && xs[k] != x; k++)
				;
			if (k == nxs)
				xs[nxs++] = x;
		}
	}
	if (nl == 0) {
		fprintf(stderr, "tally-bench: %s: no rows to draw, skipped\n",
			p->file);
		return 0;
	}
	qsort(xs, nxs, sizeof(xs[0]), cmp_x);

	snprintf(path, sizeof(path), "%s/%s.dat", o->plot_dir, p->file);
	if (!(dat = fopen(path, "w")))
		bench_die("--plot: cannot write %s: %s", path, strerror(errno));
	fprintf(dat, "# %s: %s\n# columns: x median min max runs; one block "
		"per line of the chart\n", d->bench, p->title);
	for (unsigned k = 0; k < nl; k++) {
		struct line *l = &lines[k];

		/* Points in x order, so that the line does not go back. */
		for (unsigned a = 1; a < l->npts; a++)
			for (unsigned b = a; b > 0 && l->x[b - 1] > l->x[b]; b--) {
				double t;
				unsigned tn;

#define SWAP(v) (t = v[b], v[b] = v[b - 1], v[b - 1] = t)
				SWAP(l->x);
				SWAP(l->y);
				SWAP(l->lo);
				SWAP(l->hi);
#undef SWAP
				tn = l->n[b];
				l->n[b] = l->n[b - 1];
				l->n[b - 1] = tn;
			}
		fprintf(dat, "%s# %s\n", k ? "\n\n" : "", l->title);
		for (unsigned i = 0; i < l->npts; i++)
			fprintf(dat, "%.9g %.9g %.9g %.9g %u\n", l->x[i], l->y[i],
				l->lo[i], l->hi[i], l->n[i]);
	}
	fclose(dat);

	snprintf(path, sizeof(path), "%s/%s.gp", o->plot_dir, p->file);
	if (!(gp = fopen(path, "w")))
		bench_die("--plot: cannot write %s: %s", path, strerror(errno));
	fprintf(gp, "# tally-bench %s: draw with `gnuplot %s.gp` in this "
		"directory.\n", d->bench, p->file);
	fprintf(gp, "set terminal pngcairo size 1100,700 noenhanced "
		"font \"sans,12\"\nset output \"%s.png\"\n", p->file);
	fputs("set title ", gp);
	{
		char sub[256];

		if (maxn > 1)
			snprintf(sub, sizeof(sub), "%s\\nmedian of %u runs, "
				 "error bars: min to max; CPUs %s", p->title,
				 maxn, bench_cpu_list());
		else
			snprintf(sub, sizeof(sub), "%s\\nCPUs %s", p->title,
				 bench_cpu_list());
		/* Written raw: \n is gnuplot's line break in a title. */
		fprintf(gp, "\"%s\"\n", sub);
	}
	fputs("set xlabel ", gp);
	gp_str(gp, p->xlabel ? p->xlabel : "");
	fputs("\nset ylabel ", gp);
	gp_str(gp, p->ylabel ? p->ylabel : "");
	/* Room above and below, so that no line lies on an axis. */
	fputs("\nset grid\nset key outside right top box opaque spacing 1.2\n"
	      "set border 3\nset tics nomirror\nset bars 2\n"
	      "set offsets 0, 0, graph 0.05, graph 0.05\n", gp);
	if (p->logx)
		fputs("set logscale x 2\n", gp);
	if (p->logy)
		fputs("set logscale y 10\n", gp);
	else
		fputs("set yrange [0:*]\n", gp);
	if (nxs <= 16) {
		/* Ticks at the measured x values, with some room around. */
		fputs("set xtics (", gp);
		for (unsigned i = 0; i < nxs; i++)
			fprintf(gp, "%s\"%g\" %g", i ? ", " : "", xs[i], xs[i]);
		fputs(")\n", gp);
		if (nxs > 1 && p->logx)
			fprintf(gp, "set xrange [%g:%g]\n", xs[0] / 1.25,
				xs[nxs - 1] * 1.25);
		else if (nxs > 1) {
			double pad = (xs[nxs - 1] - xs[0]) * 0.05;

			fprintf(gp, "set xrange [%g:%g]\n", xs[0] - pad,
				xs[nxs - 1] + pad);
		} else
			fprintf(gp, "set xrange [%g:%g]\n",
				p->logx ? xs[0] / 2 : xs[0] - 1,
				p->logx ? xs[0] * 2 : xs[0] + 1);
	}
	fputs("set key title \"solid: tally   dashed: baselines\"\n", gp);
	fputs("plot \\\n", gp);
	/* tally's lines first in the key, then the baselines. */
	for (unsigned pass = 0, done = 0; pass < 2; pass++)
	for (unsigned k = 0; k < nl; k++) {
		struct line *l = &lines[k];

		if (l->ours != !pass)
			continue;
		done++;
		unsigned c = l->ours ? nours++ : nbase++;
		const char *colour = l->ours ?
			ours_colour[c % (sizeof(ours_colour) / sizeof(ours_colour[0]))] :
			base_colour[c % (sizeof(base_colour) / sizeof(base_colour[0]))];
		/* Filled shapes for tally, open ones for the baselines. */
		static const int filled[] = { 7, 5, 9, 11, 13, 15 };
		static const int open[] = { 6, 4, 8, 10, 12, 14 };
		int pt = l->ours ? filled[c % 6] : open[c % 6];

		fprintf(gp, "  \"%s.dat\" index %u using 1:2%s with %s "
			"lc rgb \"%s\" lw %s dt %s pt %d ps 1.4 title ",
			p->file, k, l->bars ? ":3:4" : "",
			l->bars ? "yerrorlines" : "linespoints", colour,
			l->ours ? "2.5" : "1.5", l->ours ? "1" : "(16,8)", pt);
		gp_str(gp, l->title);
		fputs(done < nl ? ", \\\n" : "\n", gp);
	}
	fclose(gp);

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		char file[512];

		if (chdir(o->plot_dir) < 0)
			_exit(127);
		snprintf(file, sizeof(file), "%s.gp", p->file);
		/* gnuplot's own messages go to stderr; stdout is the report. */
		dup2(2, 1);
		execlp("gnuplot", "gnuplot", file, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "tally-bench: gnuplot failed on %s/%s.gp\n",
			o->plot_dir, p->file);
		return -1;
	}
	if (!o->quiet)
		fprintf(stderr, "tally-bench: wrote %s/%s.png\n", o->plot_dir,
			p->file);
	return 0;
}

int bench_save(const struct bench_doc *d, const struct bench_opts *o)
{
	char name[64];
	FILE *f;
	int rc = 0;

	fflush(stdout); /* the report first, then where its files went */
	snprintf(name, sizeof(name), "%s.json", d->bench);
	f = bench_out_open(o, name);
	if (!f)
		return 0;
	bench_print_json(d, o, f);
	if (fclose(f) != 0)
		bench_die("--plot: cannot write %s/%s: %s", o->plot_dir, name,
			  strerror(errno));
	if (!o->quiet)
		fprintf(stderr, "tally-bench: wrote %s/%s\n", o->plot_dir, name);
	for (unsigned i = 0; i < d->nplots; i++)
		rc |= draw(d, o, &d->plots[i]);
	return rc;
}
