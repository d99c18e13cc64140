/*
 * programs/tallystat/main.c: tallystat, an iostat-style viewer of the
 * counters, gauges and histograms that processes keep with tally.
 *
 *   tallystat [options] [selector...] [interval [count]]
 *
 * The loop, as sysstat's: a banner; without an interval one report of the
 * values since each process started; with one, that report (unless -y),
 * then one every interval, count reports in all or until SIGINT, then the
 * Average: rows.  Intervals are timed on CLOCK_MONOTONIC against absolute
 * deadlines, so they do not drift, and each rate is divided by the time
 * really elapsed between two reads.  Everything is read with the reader
 * API through programs/common; see tallystat(1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "aggregate.h"
#include "snapshot.h"
#include "strbuf.h"
#include "strmap.h"
#include "tallystat.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

void ts_host_get(struct ts_host *h)
{
	struct utsname u;

	memset(h, 0, sizeof(*h));
	if (uname(&u) == 0) {
		snprintf(h->sysname, sizeof(h->sysname), "%s", u.sysname);
		snprintf(h->release, sizeof(h->release), "%s", u.release);
		snprintf(h->machine, sizeof(h->machine), "%s", u.machine);
		snprintf(h->nodename, sizeof(h->nodename), "%s", u.nodename);
	}
	h->ncpus = sysconf(_SC_NPROCESSORS_CONF);
	if (h->ncpus < 1)
		h->ncpus = 1;
}

/* Files already reported as skipped: each is named once per run. */
static struct tp_strmap reported;

/* Read every segment; a directory that cannot be read ends the run.
 * With @cp, into a compact read (compact.c) that *@cp is set to, and
 * @snap holds no series; @may_decline: return -2 when it cannot be
 * ordered (else its rows are kept, in the order it has). */
static int collect(const struct ts_options *o, struct tp_snapshot *snap,
		   struct ts_report *r, struct ts_compact **cp,
		   int may_decline)
{
	struct tp_collect_opts co;
	char err[512];
	size_t w = 0;

	ts_collect_opts(o, &co);
	if (cp)
		*cp = ts_compact_new(&co);
	if (tp_snapshot_collect(snap, &co, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return -1;
	}
	/* Checked before anything is said of the read, which a snapshot
	 * then reads again. */
	if (cp && ts_compact_finish(*cp, snap) < 0 && may_decline)
		return -2;
	/* Move the files skipped for the first time to the front: those
	 * are the report's. */
	for (size_t i = 0; i < snap->nskipped; i++) {
		struct tp_skipped t = snap->skipped[i];
		char *key = t.path;

		if (tp_strmap_get(&reported, key) != (size_t)-1)
			continue;
		key = tp_xstrdup(t.path);
		tp_strmap_put(&reported, key, 1);
		fprintf(stderr, PROG ": skipping %s: %s\n", t.path, t.reason);
		snap->skipped[i] = snap->skipped[w];
		snap->skipped[w++] = t;
	}
	/* Records skipped in a segment read: said once per file too. */
	for (size_t i = 0; i < snap->nsegs; i++) {
		const struct tp_segment *g = &snap->segs[i];
		char key[PATH_MAX + 16];

		if (!g->records_skipped || g->stale)
			continue;
		snprintf(key, sizeof(key), "%s#records", g->path);
		if (tp_strmap_get(&reported, key) != (size_t)-1)
			continue;
		tp_strmap_put(&reported, tp_xstrdup(key), 1);
		fprintf(stderr, PROG ": %s: skipped %u corrupt record%s, "
			"the rest is shown: %s\n", g->path, g->records_skipped,
			g->records_skipped == 1 ? "" : "s", g->records_msg);
	}
	if (r) {
		r->skipped = snap->skipped;
		r->nskipped = w;
	}
	return 0;
}

static double seconds_between(const struct timespec *a,
			      const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	       (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* Sleep until @deadline (CLOCK_MONOTONIC); 0, or -1 on SIGINT. */
static int sleep_until(const struct timespec *deadline)
{
	while (!interrupted) {
		int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME,
					 deadline, NULL);

		if (rc == 0)
			return 0;
		if (rc != EINTR)
			TP_DIE("clock_nanosleep: %s", strerror(rc));
	}
	return -1;
}

static void add_seconds(struct timespec *t, double s)
{
	long long ns = (long long)llround(s * 1e9) + t->tv_nsec;

	t->tv_sec += (time_t)(ns / 1000000000);
	t->tv_nsec = (long)(ns % 1000000000);
}

/* The report of @snap (or of its sums with -a). */
static void since_start(const struct ts_emitter *em,
			const struct ts_options *o, struct tp_snapshot *snap,
			const struct ts_report *skips)
{
	struct tp_snapshot agg;
	struct ts_report r;

	if (o->aggregate)
		tp_snapshot_aggregate(snap, &agg);
	ts_report_since_start(&r, o->aggregate ? &agg : snap, o);
	r.skipped = skips->skipped;
	r.nskipped = skips->nskipped;
	em->report(&r, o);
	ts_report_free(&r);
	if (o->aggregate)
		tp_snapshot_free(&agg);
}

/* Does the selection given leave nothing?  Say why, once (series may
 * still appear later in an interval run). */
static void warn_empty(const struct ts_options *o, size_t nseries)
{
	if (!nseries && (o->nsels || o->npids || o->have_comm ||
			 o->zone_glob))
		fprintf(stderr, PROG ": no series matches the selectors, -p, "
			"-C or --zone given%s\n", o->interval ? " (yet)" : "");
}

/*
 * One report since start, of a compact read (compact.c): what a report
 * of a million series costs is then its values and record ids, not its
 * texts.  Returns 0, 1 when a directory cannot be read, or -1 when the
 * read cannot be ordered so (the caller reads a snapshot instead).
 */
static int run_compact(const struct ts_options *o, const struct ts_emitter *em,
		       const struct ts_host *h)
{
	struct tp_snapshot snap;
	struct ts_report skips = { 0 }, r;
	struct ts_compact *cp = NULL;

	int rc = collect(o, &snap, &skips, &cp, 1);

	if (rc < 0) {
		ts_compact_free(cp);
		tp_snapshot_free(&snap);
		return rc == -2 ? -1 : 1;
	}
	warn_empty(o, ts_compact_nseries(cp));
	em->begin(h, o, &snap.real);
	ts_report_compact(&r, cp, o);
	r.skipped = skips.skipped;
	r.nskipped = skips.nskipped;
	em->report(&r, o);
	ts_report_free(&r);
	ts_compact_free(cp);
	tp_snapshot_free(&snap);
	em->end(o);
	return 0;
}

/* The report of an interval of compact reads: @cur's deltas against
 * @prev's (whose entries are then freed: only the values are needed
 * from one read to the next), the processes that came and went, the
 * files skipped; then its deltas join the sums. */
static void compact_interval(const struct ts_options *o,
			     const struct ts_emitter *em,
			     struct ts_compact **prev,
			     const struct tp_snapshot *psnap,
			     struct ts_compact *cur,
			     const struct tp_snapshot *csnap,
			     struct ts_report *skips,
			     const struct ts_report *fresh, double dt,
			     struct ts_caverage *av)
{
	struct ts_report r;

	ts_compact_delta(cur, *prev);
	ts_compact_free(*prev);
	*prev = NULL;
	ts_report_compact_interval(&r, cur, dt, o);
	ts_report_events(&r, psnap, csnap);
	if (skips->nskipped) {
		/* Skipped before the first report (-y). */
		r.skipped = skips->skipped;
		r.nskipped = skips->nskipped;
		skips->nskipped = 0;
	} else {
		r.skipped = fresh->skipped;
		r.nskipped = fresh->nskipped;
	}
	em->report(&r, o);
	ts_report_free(&r);
	ts_caverage_add(av, cur, dt);
}

/* Next deadline: @interval on, or from now when the run fell behind (a
 * stopped terminal, a slow read) rather than rush to catch up. */
static void next_deadline(struct timespec *deadline, double interval)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (seconds_between(deadline, &now) > interval)
		*deadline = now;
}

/*
 * A run of intervals of compact reads: what it keeps from one read to
 * the next is each series' values and key hash, and the sums of the
 * Average: rows the same way (caverage.c).  Returns as run_compact().
 * Two snapshots alternate, each holding the segments of one read.
 */
static int run_compact_intervals(const struct ts_options *o,
				 const struct ts_emitter *em,
				 const struct ts_host *h)
{
	struct tp_snapshot snaps[2];
	struct ts_report skips = { 0 }, r;
	struct ts_compact *prev = NULL, *cur = NULL;
	struct ts_caverage *av;
	struct timespec deadline;
	unsigned long done = 0;
	int p = 0, status = 0, rc = collect(o, &snaps[0], &skips, &prev, 1);

	if (rc < 0) {
		ts_compact_free(prev);
		tp_snapshot_free(&snaps[0]);
		return rc == -2 ? -1 : 1;
	}
	warn_empty(o, ts_compact_nseries(prev));
	em->begin(h, o, &snaps[0].real);
	if (!o->omit_first) {
		ts_report_compact(&r, prev, o);
		r.skipped = skips.skipped;
		r.nskipped = skips.nskipped;
		em->report(&r, o);
		ts_report_free(&r);
		done++;
		skips.nskipped = 0;
	}
	av = ts_caverage_new();
	deadline = snaps[0].mono;
	while (!o->count || done < o->count) {
		struct ts_report fresh = { 0 };
		double dt;

		add_seconds(&deadline, o->interval);
		sleep_until(&deadline);
		/* A later read that cannot be ordered still has every
		 * series: only the first read chooses the path. */
		if (collect(o, &snaps[!p], &fresh, &cur, 0) < 0) {
			status = 1;
			ts_compact_free(cur);
			break;
		}
		dt = seconds_between(&snaps[p].mono, &snaps[!p].mono);
		/* A SIGINT right after a read: nothing to report. */
		if (interrupted && dt < 0.05) {
			ts_compact_free(cur);
			tp_snapshot_free(&snaps[!p]);
			break;
		}
		compact_interval(o, em, &prev, &snaps[p], cur, &snaps[!p],
				 &skips, &fresh, dt, av);
		tp_snapshot_free(&snaps[p]);
		prev = cur;
		p = !p;
		done++;
		if (interrupted)
			break;
		next_deadline(&deadline, o->interval);
	}
	if (ts_caverage_intervals(av)) {
		ts_report_caverage(&r, av, o);
		em->report(&r, o);
		ts_report_free(&r);
	}
	ts_caverage_free(av);
	ts_compact_free(prev);
	tp_snapshot_free(&snaps[p]);
	em->end(o);
	return status;
}

static int run(const struct ts_options *o, const struct ts_emitter *em,
	       const struct ts_host *h)
{
	struct tp_snapshot prev, cur, delta, agg;
	struct ts_report skips = { 0 }, r;
	struct ts_average *av;
	struct timespec deadline;
	unsigned long done = 0;
	int status = 0;

	/* A directory that cannot be read fails before any output. */
	if (collect(o, &prev, &skips, NULL, 0) < 0)
		return 1;
	/* A selection that keeps nothing gives bare headers. */
	warn_empty(o, prev.nseries);
	em->begin(h, o, &prev.real);
	if (!o->interval || !o->omit_first) {
		since_start(em, o, &prev, &skips);
		done++;
		skips.nskipped = 0;
	}
	if (!o->interval || (o->count && done >= o->count)) {
		tp_snapshot_free(&prev);
		em->end(o);
		return 0;
	}

	av = ts_average_new();
	deadline = prev.mono;
	for (;;) {
		struct ts_report fresh = { 0 };
		double dt;

		add_seconds(&deadline, o->interval);
		sleep_until(&deadline);
		if (collect(o, &cur, &fresh, NULL, 0) < 0) {
			status = 1;
			break;
		}
		dt = seconds_between(&prev.mono, &cur.mono);
		/* A SIGINT right after a read: nothing to report. */
		if (interrupted && dt < 0.05) {
			tp_snapshot_free(&cur);
			break;
		}
		ts_delta(&prev, &cur, &delta);
		if (o->aggregate)
			tp_snapshot_aggregate(&delta, &agg);
		ts_report_interval(&r, o->aggregate ? &agg : &delta, dt, o);
		ts_report_events(&r, &prev, &cur);
		if (skips.nskipped) {
			/* Skipped before the first report (-y). */
			r.skipped = skips.skipped;
			r.nskipped = skips.nskipped;
			skips.nskipped = 0;
		} else {
			r.skipped = fresh.skipped;
			r.nskipped = fresh.nskipped;
		}
		em->report(&r, o);
		/* The rows and the previous read (whose paths the events
		 * name) are done with: freed before the sums of the Average:
		 * rows grow, so that the two never meet in memory. */
		ts_report_free(&r);
		tp_snapshot_free(&prev);
		ts_average_add(av, o->aggregate ? &agg : &delta, dt);
		if (o->aggregate)
			tp_snapshot_free(&agg);
		tp_snapshot_free(&delta);
		prev = cur;
		done++;
		if (interrupted || (o->count && done >= o->count))
			break;
		/* Fell behind (a stopped terminal, a slow read): start
		 * again from now rather than rush to catch up. */
		{
			struct timespec now;

			clock_gettime(CLOCK_MONOTONIC, &now);
			if (seconds_between(&deadline, &now) > o->interval)
				deadline = now;
		}
	}
	if (ts_average_intervals(av)) {
		ts_report_average(&r, av, o);
		em->report(&r, o);
		ts_report_free(&r);
	}
	ts_average_free(av);
	tp_snapshot_free(&prev);
	em->end(o);
	return status;
}

int main(int argc, char **argv)
{
	struct ts_options o;
	struct ts_host h;
	const struct ts_emitter *em;
	struct sigaction sa;
	int rc;

	rc = ts_parse_options(argc, argv, &o);
	if (rc != 0) {
		ts_options_free(&o);
		return rc > 0 ? 0 : 2;
	}
	ts_host_get(&h);
	if (o.list) {
		rc = ts_list(&o, &h);
		ts_options_free(&o);
		return rc;
	}
	if (o.clean) {
		rc = ts_clean(&o);
		ts_options_free(&o);
		return rc;
	}

	/* SIGINT ends the run with the Average: rows, as in sysstat; no
	 * SA_RESTART, so that it also cuts the sleep short. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	if (o.interval)
		sigaction(SIGINT, &sa, NULL);

	em = o.json ? &ts_emit_json : &ts_emit_text;
	/* Each process's own series, since start and over intervals: the
	 * compact reads; sums across processes (-a) and per-CPU columns
	 * (-P) read snapshots. */
	rc = -1;
	if (!o.interval && !o.aggregate && !o.percpu)
		rc = run_compact(&o, em, &h);
	else if (!o.aggregate && !o.percpu)
		rc = run_compact_intervals(&o, em, &h);
	if (rc < 0)
		rc = run(&o, em, &h);

	for (size_t i = 0; i < reported.cap; i++)
		free((char *)reported.keys[i]);
	tp_strmap_free(&reported);
	ts_options_free(&o);
	return rc;
}
