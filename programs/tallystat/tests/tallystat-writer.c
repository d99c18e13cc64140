/*
 * tallystat-writer.c: a process with known series, for tallystat's tests.
 *
 *   tallystat-writer --zone NAME [--comm NAME] [--rate R] [--seconds S]
 *                    [--reset-at S] [--exit-after S] [--fork-child]
 *                    [--many N]
 *
 * It creates the zone NAME in $TALLY_DIR, registers the series below with
 * known values, prints "ready <pid> <path>" and then adds at known rates
 * until --seconds (default 30) or --exit-after have passed, or SIGTERM.
 *
 *   tw_requests_total{queue="0"}  counter  1000, constant
 *   tw_requests_total{queue="1"}  counter  2000, + R per second
 *   tw_bytes_total                counter  123456789012 (unit bytes)
 *   tw_big_total                  counter  9007199254740993 (2^53 + 1)
 *   tw_in_flight                  gauge    7
 *   tw_temperature                set gauge -42
 *   tw_load                       floating-point gauge 0.625
 *   tw_latency_ns                 histogram 100000 x 1000 at start, then
 *                                 R/2 per second: 98% 5000, 2% 200000
 *   tw_long_total{...}            counter  5, with a 2062-byte label set
 *                                 (a long one: segment format 2.5)
 *   tw_many_total{series="<i>"}   counter  i + 1, for i < N (--many N,
 *                                 default 0), in a zone made for them
 *
 * --fork-child: once the series are registered, the creator forks and
 * exits at once (_exit, as a master that died); its child waits until
 * the creator is gone, prints "ready <creator pid> <path> <child pid>"
 * and does the rest in the inherited zone.
 *
 * --reset-at S zeroes tw_requests_total{queue="1"} (tally_block_zero)
 * once, S seconds after start.  Adds are spread over the run in 5 ms
 * steps against the clock, so that the rate over any interval is R
 * within one step.  Only the public API is used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "tally/tally.h"

static void die(const char *what)
{
	fprintf(stderr, "tallystat-writer: %s: %s\n", what, tally_errmsg());
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct tally_metric_desc desc(const char *name, const char *unit,
				     const struct tally_label *l, unsigned nl)
{
	struct tally_metric_desc d = { 0 };

	d.name = name;
	d.help = "A series of tallystat's test writer.";
	d.unit = unit;
	d.labels = l;
	d.nlabels = nl;
	return d;
}

/* Registers with @fn, the register function of the handle's kind. */
#define REG(fn, z, name, unit, l, nl, handle)                             \
	do {                                                               \
		struct tally_metric_desc d_ = desc(name, unit, l, nl);     \
		if (fn(z, &d_, handle) < 0)                                \
			die(name);                                         \
	} while (0)

/* What the command line asks for. */
struct args {
	const char *zone, *comm;
	double rate, seconds, reset_at, exit_after;
	int fork_child;
	unsigned long many;
};

/* The series of the writer. */
struct series {
	tally_counter q0, q1, bytes, big, lng;
	tally_gauge inflight;
	tally_setgauge temp;
	tally_fgauge load;
	tally_histogram lat;
};

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "zone", required_argument, NULL, 'z' },
		{ "comm", required_argument, NULL, 'c' },
		{ "rate", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "reset-at", required_argument, NULL, 'R' },
		{ "exit-after", required_argument, NULL, 'x' },
		{ "fork-child", no_argument, NULL, 'f' },
		{ "many", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	*a = (struct args){ .zone = "tw", .seconds = 30, .reset_at = -1,
			    .exit_after = -1 };
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'z': a->zone = optarg; break;
		case 'c': a->comm = optarg; break;
		case 'r': a->rate = atof(optarg); break;
		case 's': a->seconds = atof(optarg); break;
		case 'R': a->reset_at = atof(optarg); break;
		case 'x': a->exit_after = atof(optarg); break;
		case 'f': a->fork_child = 1; break;
		case 'm': a->many = strtoul(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: tallystat-writer --zone NAME "
				"[--comm NAME] [--rate R] [--seconds S] "
				"[--reset-at S] [--exit-after S] "
				"[--fork-child] [--many N]\n");
			return -1;
		}
	}
	return 0;
}

/* The zone, room made for --many. */
static struct tally_zone *create_zone(const struct args *a)
{
	struct tally_zone_opts o = { 0 };
	struct tally_zone *z;

	/* The segment records the process name at creation. */
	if (a->comm)
		prctl(PR_SET_NAME, a->comm, 0, 0, 0);
	if (a->many) {
		o.max_series = a->many + 64;
		o.capacity = 2 * a->many + 4 * TALLY_CHUNK_SLOTS;
	}
	z = tally_zone_create(a->zone, a->many ? &o : NULL);
	if (!z)
		die("tally_zone_create");
	return z;
}

/* The series of the table above, with their values at start. */
static void register_series(struct tally_zone *z, struct series *s)
{
	struct tally_label l0 = { "queue", "0" }, l1 = { "queue", "1" };
	static char gamma[2001];
	struct tally_label ll[3] = {
		{ "alpha", "aaaaaaaaaaaaaaaaaaaa" },
		{ "beta", "bbbbbbbbbbbbbbbbbbbb" },
		{ "gamma", gamma },
	};

	REG(tally_counter_register, z, "tw_requests_total", NULL, &l0, 1,
	    &s->q0);
	REG(tally_counter_register, z, "tw_requests_total", NULL, &l1, 1,
	    &s->q1);
	REG(tally_counter_register, z, "tw_bytes_total", "bytes", NULL, 0,
	    &s->bytes);
	REG(tally_counter_register, z, "tw_big_total", NULL, NULL, 0, &s->big);
	REG(tally_gauge_register, z, "tw_in_flight", NULL, NULL, 0,
	    &s->inflight);
	REG(tally_setgauge_register, z, "tw_temperature", NULL, NULL, 0,
	    &s->temp);
	REG(tally_fgauge_register, z, "tw_load", NULL, NULL, 0, &s->load);
	REG(tally_histogram_register, z, "tw_latency_ns", "nanoseconds", NULL,
	    0, &s->lat);
	memset(gamma, 'c', 2000);
	REG(tally_counter_register, z, "tw_long_total", NULL, ll, 3, &s->lng);

	tally_counter_add(&s->q0, 1000);
	tally_counter_add(&s->q1, 2000);
	tally_counter_add(&s->bytes, 123456789012ll);
	tally_counter_add(&s->big, 9007199254740993ll);
	tally_gauge_add(&s->inflight, 7);
	tally_setgauge_set(&s->temp, -42);
	tally_fgauge_set(&s->load, 0.625);
	for (int i = 0; i < 100000; i++)
		tally_histogram_observe(&s->lat, 1000);
	tally_counter_add(&s->lng, 5);
}

/* --many N: N counters tw_many_total{series="<i>"} holding i + 1, for the
 * readers' benchmark (bench/readers-memory.sh). */
static void register_many(struct tally_zone *z, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		char v[24];
		struct tally_label l = { "series", v };
		tally_counter c;

		snprintf(v, sizeof(v), "%lu", i);
		REG(tally_counter_register, z, "tw_many_total", NULL, &l, 1,
		    &c);
		tally_counter_add(&c, (long long)i + 1);
	}
}

/* Waits at most 10 s for @creator to be gone (this child reparented);
 * whether it is. */
static int creator_gone(pid_t creator)
{
	struct timespec wait = { 0, 10000000 };

	for (int i = 0; i < 1000 && getppid() == creator; i++)
		nanosleep(&wait, NULL);
	return getppid() != creator;
}

/* "ready ..." once the series are there; with --fork-child, from a
 * child once its creator is gone.  Returns 0, or 1 for the creator's
 * failure to fork or the child's wait that timed out. */
static int announce(const struct args *a, struct tally_zone *z)
{
	pid_t creator = getpid(), child;

	fflush(stdout);
	if (a->fork_child) {
		child = fork();
		if (child > 0)
			_exit(0);
		if (child < 0 || !creator_gone(creator))
			return 1;
		printf("ready %d %s %d\n", (int)creator, tally_zone_path(z),
		       (int)getpid());
	} else {
		printf("ready %d %s\n", (int)creator, tally_zone_path(z));
	}
	fflush(stdout);
	return 0;
}

/* The adds at known rates, in 5 ms steps against the clock, until
 * --seconds or --exit-after. */
static void run(struct args *a, struct series *s)
{
	double t0 = now_s(), added = 0, observed = 0;

	for (;;) {
		double t = now_s() - t0;
		struct timespec step = { 0, 5000000 };

		if (t >= a->seconds || (a->exit_after >= 0 &&
					t >= a->exit_after))
			break;
		if (a->reset_at >= 0 && t >= a->reset_at) {
			if (tally_block_zero(s->q1.metric.block, 0, NULL) < 0)
				die("tally_block_zero");
			a->reset_at = -1;
		}
		while (added < a->rate * t) {
			tally_counter_inc(&s->q1);
			added++;
		}
		while (observed < a->rate / 2 * t) {
			/* Every 50th is slow: 2%. */
			tally_histogram_observe(&s->lat, (long long)observed %
						50 == 49 ? 200000 : 5000);
			observed++;
		}
		while (nanosleep(&step, &step) < 0 && errno == EINTR)
			;
	}
}

int main(int argc, char **argv)
{
	struct args a;
	struct series s;
	struct tally_zone *z;

	if (parse_args(argc, argv, &a) < 0)
		return 2;
	z = create_zone(&a);
	register_series(z, &s);
	register_many(z, a.many);
	if (announce(&a, z))
		return 1;
	run(&a, &s);
	/* The segment goes with the zone unless TALLY_KEEP=1. */
	tally_zone_destroy(z);
	return 0;
}
