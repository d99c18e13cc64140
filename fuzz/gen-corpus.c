/*
 * gen-corpus.c: seeds for fuzz-reader, from real segments.
 *
 * Usage: gen-corpus OUTDIR
 *
 * Each scenario runs in a child process with its own $TALLY_DIR,
 * $TALLY_NSLABS (1 to 6), $TALLY_NODES and $TALLY_NO_RSEQ, registers
 * series of every kind and mode through the public API, writes values
 * (from several threads, with zeroing, removals, an adaptive counter that
 * gets promoted), and leaves a persistent segment.  A real segment is mostly holes (a 1 MiB
 * metric table for 1024 families, one chunk per mode and size class), so
 * the seed is the same segment made compact: the tables cut to the
 * records in use, the writers' index dropped, and the blocks of the live
 * series packed into as few chunks as they fit in (every page of each
 * block copied, baselines and fallback copies included).  The reader
 * accepts it as it accepts the original (regions in order, page aligned,
 * records as written), and the seeds are 36 to 80 KB, mostly zero
 * pages that the fuzz target turns back into holes.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../test/kinds.h" /* every kind through one tally_metric */
#include "core/core.h"
#include "tally/reader.h"
#include "tally/tally.h"

#define PAGE 4096u

static void die(const char *what)
{
	fprintf(stderr, "gen-corpus: %s: %s (%s)\n", what, strerror(errno),
		tally_errmsg());
	exit(1);
}

static struct tally_zone *zone(const char *name, size_t chunks, size_t series)
{
	struct tally_zone_opts o = { chunks * TALLY_CHUNK_SLOTS, series,
				     TALLY_ZONE_PERSIST };
	struct tally_zone *z = tally_zone_create(name, &o);

	if (!z)
		die("tally_zone_create");
	return z;
}

static tally_metric reg(struct tally_zone *z, unsigned kind, const char *name,
			unsigned mode, const char *help, const char *unit,
			const struct tally_label *l, unsigned nl, unsigned sub,
			unsigned max)
{
	struct tally_metric_desc d;
	tally_metric m;

	memset(&d, 0, sizeof(d));
	d.kind = kind;
	d.name = name;
	d.mode = mode;
	d.help = help;
	d.unit = unit;
	d.labels = l;
	d.nlabels = nl;
	d.hist_sub_bits = sub;
	d.hist_max_bits = max;
	if (register_any(z, &d, &m) != 0)
		die(name);
	return m;
}

/* ---- scenarios (each in its own process) ---- */

static void sc_counters(void)
{
	struct tally_zone *z = zone("counters", 4, 16);
	struct tally_label l[2] = { { "method", "GET" }, { "code", "200" } };
	tally_metric a, b, g, gone;

	a = reg(z, TALLY_COUNTER, "http_requests_total", 0, "Requests.", NULL,
		l, 2, 0, 0);
	l[0].value = "POST";
	b = reg(z, TALLY_COUNTER, "http_requests_total", 0, "Requests.", NULL,
		l, 2, 0, 0);
	gone = reg(z, TALLY_COUNTER, "gone_total", 0, NULL, NULL, NULL, 0, 0, 0);
	g = reg(z, TALLY_GAUGE, "in_flight", 0, "In flight.", NULL, NULL, 0, 0, 0);
	tally_counter_add(counter_of(&a), 12345);
	tally_counter_add(counter_of(&b), 7);
	tally_counter_add(counter_of(&gone), 1);
	tally_gauge_add(gauge_of(&g), -3);
	tally_metric_remove(&gone);
}

static void sc_histograms(void)
{
	struct tally_zone *z = zone("histograms", 4, 16);
	tally_metric h, s, d;

	h = reg(z, TALLY_HISTOGRAM, "latency_ns", 0, "Latency.", "ns", NULL, 0,
		3, 16);
	s = reg(z, TALLY_HISTOGRAM, "tiny", 0, NULL, NULL, NULL, 0, 1, 4);
	d = reg(z, TALLY_HISTOGRAM, "sizes", 0, NULL, "bytes", NULL, 0, 2, 10);
	for (uint64_t v = 0; v < 70000; v += 7)
		tally_histogram_observe(histogram_of(&h), v);
	tally_histogram_observe(histogram_of(&h), UINT64_MAX);
	for (uint64_t v = 0; v < 40; v++)
		tally_histogram_observe(histogram_of(&s), v);
	for (uint64_t v = 1; v < 5000; v *= 3)
		tally_histogram_observe(histogram_of(&d), v);
}

static tally_metric mode_metrics[4];

static void *mode_thread(void *arg)
{
	long i = (long)arg;

	for (int k = 0; k < 20000; k++)
		for (int m = 0; m < 4; m++)
			tally_counter_add(counter_of(&mode_metrics[m]), i + 1);
	return NULL;
}

static void sc_modes(void)
{
	static const char *names[] = { "m_percpu", "m_shared", "m_pernode",
				       "m_adaptive" };
	struct tally_zone *z = zone("modes", 8, 16);
	pthread_t t[4];
	tally_metric gs, fg;

	for (unsigned m = 0; m < 4; m++)
		mode_metrics[m] = reg(z, TALLY_COUNTER, names[m], m, NULL, NULL,
				      NULL, 0, 0, 0);
	gs = reg(z, TALLY_GAUGE_SET, "temperature", 0, "Set.", "celsius", NULL,
		 0, 0, 0);
	tally_setgauge_set(setgauge_of(&gs), -40);
	fg = reg(z, TALLY_FGAUGE, "load_ratio", 0, "A double.", NULL, NULL,
		 0, 0, 0);
	tally_fgauge_set((const tally_fgauge *)&fg, 0.75);
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, mode_thread, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
}

static void sc_zeroed(void)
{
	struct tally_zone *z = zone("zeroed", 4, 16);
	tally_metric c, h;
	int64_t removed;

	c = reg(z, TALLY_COUNTER, "zeroed_total", 0, NULL, NULL, NULL, 0, 0, 0);
	h = reg(z, TALLY_HISTOGRAM, "zeroed_hist", 0, NULL, NULL, NULL, 0, 2, 6);
	tally_counter_add(counter_of(&c), 1000);
	tally_histogram_observe(histogram_of(&h), 5);
	tally_block_zero(c.block, 0, &removed);
	tally_block_zero(h.block, 0, &removed);
	tally_block_zero(h.block, 1 + tally_histogram_bucket(5, 2, 6), &removed);
	tally_counter_add(counter_of(&c), 5);
	tally_histogram_observe(histogram_of(&h), 9);
}

static void sc_labels(void)
{
	struct tally_zone *z = zone("labels", 4, 16);
	struct tally_label l[25];
	char names[25][2];
	char help[TALLY_HELP_MAX + 1];
	tally_metric m;

	for (int i = 0; i < 25; i++) {
		names[i][0] = (char)('a' + i);
		names[i][1] = 0;
		l[i].name = names[i];
		l[i].value = i % 2 ? "\xc3\xa9" : "";
	}
	memset(help, 'h', TALLY_HELP_MAX);
	help[TALLY_HELP_MAX] = 0;
	m = reg(z, TALLY_COUNTER, "many_labels_total", 0, help,
		"0123456789012345678901234567890", l, 25, 0, 0);
	tally_counter_add(counter_of(&m), 25);
	l[0].name = "emoji";
	l[0].value = "\xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac";
	m = reg(z, TALLY_GAUGE, "ns:sub:gauge_", TALLY_PERNODE, NULL, NULL, l, 1,
		0, 0);
	tally_gauge_add(gauge_of(&m), 3);
}

/* Label sets past a record's 100 bytes (format 2.5): their extension
 * records, freed ones among them, the most bytes and the most pairs. */
static void sc_long_labels(void)
{
	struct tally_zone *z = zone("long-labels", 4, 128);
	static char big[TALLY_LABELS_MAX + 1], names[TALLY_LABEL_PAIRS_MAX][8];
	struct tally_label l[TALLY_LABEL_PAIRS_MAX];
	struct tally_label route[] = {
		{ "method", "GET" },
		{ "route", "/api/v1/organizations/{org_id}/projects/"
			   "{project_id}/members" },
		{ "code", "200" }, { "instance_type", "primary" },
	};
	tally_metric a, b, c, gone;

	a = reg(z, TALLY_COUNTER, "http_requests_total", 0, "Requests.", NULL,
		route, 4, 0, 0);
	tally_counter_add(counter_of(&a), 130);
	memset(big, 'x', 500);
	big[500] = 0;
	l[0] = (struct tally_label){ "v", big };
	gone = reg(z, TALLY_COUNTER, "gone_total", 0, NULL, NULL, l, 1, 0, 0);
	memset(big, 'y', TALLY_LABELS_MAX - 1);
	big[TALLY_LABELS_MAX - 1] = 0;
	b = reg(z, TALLY_HISTOGRAM, "big_ns", 0, NULL, NULL, l, 1, 2, 8);
	tally_histogram_observe(histogram_of(&b), 100);
	tally_metric_remove(&gone);
	for (unsigned i = 0; i < TALLY_LABEL_PAIRS_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "l%u", i);
		l[i] = (struct tally_label){ names[i], i % 3 ? "\xc3\xa9" : "" };
	}
	c = reg(z, TALLY_GAUGE, "many", 0, NULL, NULL, l,
		TALLY_LABEL_PAIRS_MAX, 0, 0);
	tally_gauge_add(gauge_of(&c), -128);
}

static void sc_churn(void)
{
	struct tally_zone *z = zone("churn", 4, 32);
	tally_metric win[8];
	char v[16];
	struct tally_label l = { "conn", v };

	for (int i = 0; i < 300; i++) {
		if (i >= 8)
			tally_metric_remove(&win[i % 8]);
		snprintf(v, sizeof(v), "%d", i);
		win[i % 8] = reg(z, i % 3 ? TALLY_COUNTER : TALLY_HISTOGRAM,
				 i % 3 ? "conn_bytes" : "conn_lat", 0, NULL,
				 NULL, &l, 1, i % 3 ? 0 : 2, i % 3 ? 0 : 5);
		if (i % 3)
			tally_counter_add(counter_of(&win[i % 8]), i);
		else
			tally_histogram_observe(histogram_of(&win[i % 8]), (uint64_t)i);
	}
}

/* Six threads without rseq: six fallback copies, so that a chunk has
 * more pages than the reader's first guess. */
static tally_metric wide_c, wide_h;

static void *wide_thread(void *arg)
{
	long i = (long)arg;

	for (int k = 0; k < 1000; k++) {
		tally_counter_add(counter_of(&wide_c), i + 1);
		tally_histogram_observe(histogram_of(&wide_h), (uint64_t)(k * (i + 1)));
	}
	return NULL;
}

static void sc_wide(void)
{
	struct tally_zone *z = zone("wide", 4, 16);
	pthread_t t[6];

	wide_c = reg(z, TALLY_COUNTER, "wide_total", 0, NULL, NULL, NULL, 0, 0,
		     0);
	wide_h = reg(z, TALLY_HISTOGRAM, "wide_hist", 0, NULL, NULL, NULL, 0, 2,
		     14);
	for (long i = 0; i < 6; i++)
		pthread_create(&t[i], NULL, wide_thread, (void *)i);
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
}

/* The types of a metric (format 2.6): a fractional counter, a classic
 * histogram with its bounds, a per-process gauge with its combine mode;
 * a summary (2.7); an info metric with replaced pairs and an enum (2.8). */
static void sc_types(void)
{
	static const double bounds[] = { 0.005, 0.5, 1, 2.5, 1e9 };
	struct tally_zone *z = zone("types", 6, 24);
	struct tally_label l = { "route", "/a" };
	struct tally_metric_desc d;
	tally_fcounter fc;
	tally_chistogram h;
	tally_summary s;
	tally_pgauge g;
	static const char *const state[] = { "state" }, *up[] = { "up" },
		*down[] = { "down" };
	tally_fgauge_family ef;
	const tally_fgauge *eg;
	tally_fgauge i0, i1;

	memset(&d, 0, sizeof(d));
	d.kind = TALLY_FCOUNTER;
	d.name = "paid_dollars_total";
	d.help = "Paid.";
	d.labels = &l;
	d.nlabels = 1;
	if (tally_fcounter_register(z, &d, &fc) != 0)
		die("tally_fcounter_register");
	for (int i = 0; i < 3; i++)
		tally_fcounter_add(&fc, 0.1);
	d.kind = TALLY_CHISTOGRAM;
	d.name = "order_value_dollars";
	if (tally_chistogram_register(z, &d, bounds, 5, &h) != 0)
		die("tally_chistogram_register");
	tally_chistogram_observe(&h, 0.25);
	tally_chistogram_observe(&h, 3);
	tally_chistogram_observe(&h, -1.5);
	d.kind = TALLY_SUMMARY;
	d.name = "request_size_bytes";
	if (tally_summary_register(z, &d, &s) != 0)
		die("tally_summary_register");
	tally_summary_observe(&s, 512);
	tally_summary_observe(&s, 0.5);
	d.kind = TALLY_PGAUGE;
	d.name = "inprogress";
	if (tally_pgauge_register(z, &d, TALLY_COMBINE_LIVESUM, &g) != 0)
		die("tally_pgauge_register");
	tally_pgauge_set(&g, 2);
	d.kind = TALLY_INFO;
	d.name = "build";
	l = (struct tally_label){ "version", "1.1" };
	if (tally_info_register(z, &d, &i0) != 0)
		die("tally_info_register");
	l.value = "1.2";
	if (tally_info_register(z, &d, &i1) != 0)
		die("tally_info_register");
	tally_fgauge_set(&i0, 0);
	d.kind = TALLY_ENUM;
	d.name = "state";
	d.nlabels = 0;
	if (tally_fgauge_family_register(z, &d, state, 1, &ef) != 0 ||
	    tally_fgauge_family_get(&ef, up, 1, &eg) != 0)
		die("an enum's family");
	if (tally_fgauge_family_get(&ef, down, 1, &eg) != 0)
		die("tally_fgauge_family_get");
	tally_fgauge_set(eg, 1);
}

static const struct scenario {
	const char *name;
	void (*fn)(void);
	const char *nslabs, *nodes, *no_rseq;
} scenarios[] = {
	{ "counters", sc_counters, "1", NULL, NULL },
	{ "histograms", sc_histograms, "2", NULL, NULL },
	{ "modes", sc_modes, "2", "2", NULL },
	{ "modes-fallback", sc_modes, "2", "2", "1" },
	{ "zeroed", sc_zeroed, "1", NULL, NULL },
	{ "labels", sc_labels, "3", "3", NULL },
	{ "long-labels", sc_long_labels, "2", NULL, NULL },
	{ "churn", sc_churn, "1", NULL, NULL },
	{ "wide", sc_wide, "6", "3", "1" },
	{ "types", sc_types, "2", NULL, NULL },
};

/* ---- making a segment compact ---- */

static uint64_t round_page(uint64_t n)
{
	return (n + PAGE - 1) / PAGE * PAGE;
}

static void read_at(int fd, void *buf, size_t n, uint64_t off)
{
	if (pread(fd, buf, n, (off_t)off) != (ssize_t)n)
		die("pread");
}

static void compact(const char *src, const char *dst)
{
	struct tally__hdr h, nh;
	struct tally__series *rec;
	struct tally__metric_rec *fam;
	uint32_t nser, nfam, nchunks = 1, used = 0;
	uint64_t chunk_bytes, off;
	char *out;
	size_t size;
	int fd = open(src, O_RDONLY), ofd;

	if (fd < 0)
		die(src);
	read_at(fd, &h, sizeof(h), 0);
	nser = atomic_load(&h.series_hwm);
	nfam = atomic_load(&h.metric_count);
	chunk_bytes = (uint64_t)h.chunk_pages * PAGE;
	rec = calloc(nser + 1, sizeof(*rec));
	fam = calloc(nfam + 1, sizeof(*fam));
	read_at(fd, rec, nser * sizeof(*rec), h.series_off);
	read_at(fd, fam, nfam * sizeof(*fam), h.metric_off);
	/* Chunks needed: live blocks packed in order. */
	for (uint32_t i = 0; i < nser; i++) {
		if (!tally__series_live(rec[i].state))
			continue;
		if (used + rec[i].nslots > TALLY_CHUNK_SLOTS) {
			nchunks++;
			used = 0;
		}
		used += rec[i].nslots;
	}

	nh = h;
	nh.nchunks = nchunks;
	nh.node_off = PAGE;
	nh.node_size = round_page(h.nslabs * 2u);
	nh.meta_off = nh.node_off + nh.node_size;
	nh.meta_size = round_page(nchunks * sizeof(struct tally__chunk));
	nh.metric_cap = nfam ? nfam : 1;
	nh.metric_off = nh.meta_off + nh.meta_size;
	nh.metric_size = round_page(nh.metric_cap * sizeof(struct tally__metric_rec));
	nh.series_cap = nser ? nser : 1;
	nh.series_off = nh.metric_off + nh.metric_size;
	nh.series_size = round_page(nh.series_cap * sizeof(struct tally__series));
	nh.hash_off = nh.series_off + nh.series_size;
	nh.hash_size = 0;
	nh.chunks_off = nh.hash_off;
	nh.chunks_size = nchunks * chunk_bytes;
	nh.file_size = nh.chunks_off + nh.chunks_size;
	size = nh.file_size;
	out = calloc(1, size);
	if (!out)
		die("calloc");
	/* The header page as written, then the new geometry over it. */
	read_at(fd, out, PAGE, 0);
	memcpy(out, &nh, offsetof(struct tally__hdr, series_gen));
	read_at(fd, out + nh.node_off, h.nslabs * 2u, h.node_off);
	memcpy(out + nh.metric_off, fam, nfam * sizeof(*fam));

	/* Each live block moves to its packed place, page by page. */
	used = 0;
	off = 0;
	for (uint32_t i = 0, chunk = 0; i < nser; i++) {
		struct tally__series *r = &rec[i];
		uint64_t rel, in, base;
		unsigned slot;

		if (r->state == TALLY__SERIES_EXT)
			continue; /* label text, kept as it is */
		if (!tally__series_live(r->state)) {
			/* Free records keep a plausible offset. */
			r->slot_off = nh.chunks_off + TALLY__PG_COPY0 * PAGE;
			continue;
		}
		if (used + r->nslots > TALLY_CHUNK_SLOTS) {
			chunk++;
			used = 0;
		}
		rel = r->slot_off - h.chunks_off;
		base = rel / chunk_bytes * chunk_bytes;
		in = rel - base;
		slot = (unsigned)((in - TALLY__PG_COPY0 * PAGE) / 8);
		for (uint32_t p = 0; p < h.chunk_pages; p++) {
			uint64_t from = h.chunks_off + base + p * PAGE + slot * 8u;
			uint64_t to = nh.chunks_off + chunk * chunk_bytes +
				      p * PAGE + used * 8u;

			read_at(fd, out + to, r->nslots * 8u, from);
		}
		r->slot_off = nh.chunks_off + chunk * chunk_bytes +
			      TALLY__PG_COPY0 * PAGE +
			      used * 8u;
		used += r->nslots;
		off++;
	}
	memcpy(out + nh.series_off, rec, nser * sizeof(*rec));
	close(fd);

	ofd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (ofd < 0 || write(ofd, out, size) != (ssize_t)size)
		die(dst);
	close(ofd);
	printf("  %-28s %6zu bytes, %u series records, %u families, %u "
	       "chunks, %llu blocks moved\n", strrchr(dst, '/') + 1, size, nser,
	       nfam, nchunks, (unsigned long long)off);
	free(out);
	free(rec);
	free(fam);
}

/* The reader must take the seed as it took the original: a digest of
 * what it reports. */
static int digest_cb(const struct tally_series_view *v, void *arg)
{
	uint64_t *d = arg;

	*d = *d * 31 + (uint64_t)v->value;
	*d = *d * 31 + (uint64_t)v->sum;
	for (unsigned c = 0; c < v->npercpu; c++)
		*d = *d * 31 + (uint64_t)v->percpu[c];
	for (unsigned b = 0; b < v->nbuckets; b++)
		*d = *d * 31 + (uint64_t)v->buckets[b];
	for (const char *p = v->name; *p; p++)
		*d = *d * 31 + (unsigned char)*p;
	return 0;
}

static uint64_t digest(const char *path, int *n)
{
	struct tally_seg *s = tally_seg_open(path, NULL);
	uint64_t d = 0;

	if (!s || (*n = tally_seg_foreach(s, TALLY_READ_PERCPU, digest_cb,
					  &d)) < 0) {
		fprintf(stderr, "gen-corpus: %s: %s\n", path, tally_errmsg());
		exit(1);
	}
	tally_seg_close(s);
	return d;
}

/* The segment the scenario's child @pid made for zone @zone: its name
 * is <zone>.<pid>.<id>.tally, with an id the writer drew. */
static void segment_of(const char *dir, const char *zone, pid_t pid,
		       char *out, size_t n)
{
	char pattern[PATH_MAX];
	glob_t g;

	snprintf(pattern, sizeof(pattern), "%s/%s.%d.*.tally", dir, zone,
		 (int)pid);
	if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc != 1) {
		fprintf(stderr, "gen-corpus: no single segment %s\n",
			pattern);
		exit(1);
	}
	snprintf(out, n, "%s", g.gl_pathv[0]);
	globfree(&g);
}

/*
 * The scenarios' directory under /dev/shm goes on every way out of this
 * process: at its end, at any exit() (die(), a scenario that failed) and
 * on SIGINT, SIGTERM or SIGHUP.  It holds what the scenarios left: their
 * segments (they end with _exit()) and the writers' lock files next to
 * them (docs/FORMAT.md), no subdirectory.  The removal makes only
 * async-signal-safe calls, for the signal handler; the scenarios'
 * children, which inherit the atexit handler, leave the directory alone.
 */
static char tmpdir[] = "/dev/shm/tally-gen-corpus.XXXXXX";
static pid_t tmpdir_owner;

static int remove_tmpdir(void)
{
	char buf[4096];
	ssize_t n;
	int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (dfd < 0)
		return errno == ENOENT ? 0 : -1;
	while ((n = getdents64(dfd, buf, sizeof(buf))) > 0)
		for (ssize_t at = 0; at < n;) {
			struct dirent64 *d = (struct dirent64 *)(buf + at);

			at += d->d_reclen;
			if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
				unlinkat(dfd, d->d_name, 0);
		}
	close(dfd);
	return rmdir(tmpdir);
}

static void remove_tmpdir_at_exit(void)
{
	if (tmpdir_owner == getpid())
		remove_tmpdir();
}

static void remove_tmpdir_on_signal(int sig)
{
	remove_tmpdir_at_exit();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void make_tmpdir(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { .sa_handler = remove_tmpdir_on_signal };

	if (atexit(remove_tmpdir_at_exit) != 0 || !mkdtemp(tmpdir))
		die("mkdtemp");
	tmpdir_owner = getpid();
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

int main(int argc, char **argv)
{
	const char *dir = tmpdir;

	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
		return 2;
	}
	if (mkdir(argv[1], 0755) < 0 && errno != EEXIST)
		die(argv[1]);
	make_tmpdir();
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		const struct scenario *sc = &scenarios[i];
		char src[PATH_MAX], dst[PATH_MAX];
		int status, n1, n2;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			setenv("TALLY_DIR", dir, 1);
			setenv("TALLY_NSLABS", sc->nslabs, 1);
			if (sc->nodes)
				setenv("TALLY_NODES", sc->nodes, 1);
			if (sc->no_rseq)
				setenv("TALLY_NO_RSEQ", sc->no_rseq, 1);
			sc->fn();
			_exit(0);
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			fprintf(stderr, "gen-corpus: scenario %s failed\n",
				sc->name);
			return 1;
		}
		{
			const char *zn = strcmp(sc->name, "modes-fallback") ?
						 sc->name : "modes";

			segment_of(dir, zn, pid, src, sizeof(src));
		}
		snprintf(dst, sizeof(dst), "%s/seed-%s", argv[1], sc->name);
		compact(src, dst);
		if (digest(src, &n1) != digest(dst, &n2) || n1 != n2) {
			fprintf(stderr, "gen-corpus: %s: %d series, %d in the "
				"compact copy, or other values\n", sc->name, n1,
				n2);
			return 1;
		}
		unlink(src);
	}
	if (remove_tmpdir() < 0)
		die(dir);
	return 0;
}
