/*
 * queue-service.c: a small multi-threaded service instrumented with tally.
 *
 * It has the shape of a storage engine or a proxy: the per-queue design of
 * Alibaba's ESSD talk (per-queue in-flight accounting) with the epoll +
 * eventfd wake-ups of a PREEMPT_RT report.  An acceptor thread opens
 * and closes simulated connections and turns their requests into entries
 * of per-worker queues, waking the worker through the queue's eventfd.
 * Each worker sleeps in epoll_wait() on its eventfd, pops requests, serves
 * them with a little CPU work of random size and completes them.
 *
 * Metrics, in the process's default zone (read them with tallystat, or
 * examples/tally-dump, while the service runs):
 *   requests_total{queue="N"}             counter, requests completed
 *   bytes_total{queue="N"}                counter, bytes of those requests
 *   requests_in_flight                    gauge, +1 queued, -1 completed
 *   request_duration_ns                   histogram, queue to completion, in
 *                                         integer nanoseconds (unit
 *                                         TALLY_UNIT_NANOSECONDS: exported as
 *                                         request_duration_seconds)
 *   connections_open                      set gauge
 *   connection_requests_total{conn="ID"}  counter, one series per open
 *                                         connection, removed at close
 *
 * The update calls never lock or enter the kernel, and each adds to the
 * local CPU's copy, so the in-flight gauge, raised by the acceptor and
 * lowered by the workers, bounces no cache line between them (the atomic
 * in-flight count that cost Alibaba 8.94% of a CPU).  At the end the
 * service prints its own totals, counted in plain variables, so that they
 * can be compared with what a reader saw (tools/demo.sh does).
 *
 * Concurrency rules:
 *   - Each queue is single-producer (the acceptor) single-consumer (its
 *     worker): a ring indexed by two atomics on separate cache lines.
 *   - A connection belongs to the acceptor.  Its `pending` count is raised
 *     by the acceptor before a request is queued and dropped (release) by
 *     the worker after its last use of the connection; the acceptor closes
 *     a connection (removing its series and freeing it) only once it is
 *     marked closing and `pending` reads 0 (acquire), so no worker ever
 *     updates a removed series.
 *   - SIGINT and SIGTERM are blocked in every thread and taken by the main
 *     thread with sigtimedwait(), so no code runs in a signal handler.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "tally/tally.h"

#define PROG "queue-service"

#define QUEUE_CAP       4096u    /* requests per queue; a power of two */
#define CONNS_TARGET    300u     /* connections open at a time */
#define CONN_LIFE_MIN   100      /* ms */
#define CONN_LIFE_MAX   900      /* ms */
#define TICK_NS         1000000  /* the acceptor's period */
#define MAX_THREADS     64
#define DEFAULT_RATE    100000

/* Die on an internal error, naming the line (as the tools do: file:line
 * on internal errors). */
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

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* xorshift64*: each thread has its own state. */
static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static uint64_t rnd_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + rnd(s) % (hi - lo + 1);
}

/* --- Connections and requests ---------------------------------------- */

struct conn {
	uint64_t id;
	unsigned queue;             /* the worker that serves it */
	int has_metric;             /* 0 if its series could not be made */
	tally_counter requests;     /* connection_requests_total{conn=id} */
	_Atomic uint32_t pending;   /* requests queued or being served */
	/* Acceptor only: */
	uint64_t issued;
	int64_t close_at;
};

struct request {
	struct conn *conn;
	uint64_t bytes;
	uint32_t work;              /* iterations of the CPU work */
	int64_t queued_ns;
};

/*
 * A single-producer single-consumer ring.  Layout, one cache line each:
 * the producer's index, the consumer's index, the read-only fields; then
 * the slots.  tail - head is the number of requests queued.
 */
struct queue {
	_Alignas(64) _Atomic uint32_t tail;  /* written by the acceptor */
	_Alignas(64) _Atomic uint32_t head;  /* written by the worker */
	_Alignas(64) _Atomic int closed;     /* no more requests will come */
	int efd;                             /* eventfd: "look at the ring" */
	_Alignas(64) struct request ring[QUEUE_CAP];
};

/* Producer: room for one more request?  (Only the producer adds.) */
static int queue_room(struct queue *q)
{
	uint32_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);

	return t - atomic_load_explicit(&q->head, memory_order_acquire) <
	       QUEUE_CAP;
}

static void queue_push(struct queue *q, const struct request *r)
{
	uint32_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);

	q->ring[t & (QUEUE_CAP - 1)] = *r;
	atomic_store_explicit(&q->tail, t + 1, memory_order_release);
}

static int queue_pop(struct queue *q, struct request *r)
{
	uint32_t h = atomic_load_explicit(&q->head, memory_order_relaxed);

	if (h == atomic_load_explicit(&q->tail, memory_order_acquire))
		return 0;
	*r = q->ring[h & (QUEUE_CAP - 1)];
	atomic_store_explicit(&q->head, h + 1, memory_order_release);
	return 1;
}

static void queue_wake(struct queue *q)
{
	if (eventfd_write(q->efd, 1) < 0)
		DIE("eventfd_write: %s", strerror(errno));
}

/* --- Metrics ----------------------------------------------------------- */

static tally_gauge m_in_flight;
static tally_histogram m_duration;
static tally_setgauge m_conns_open;

/* @rc: what registering @d returned. */
static void must_register(int rc, const struct tally_metric_desc *d)
{
	if (rc < 0) {
		fprintf(stderr, PROG ": cannot register %s: %s\n", d->name,
			tally_errmsg());
		exit(1);
	}
}

/* --- Workers ----------------------------------------------------------- */

struct worker {
	struct queue q;             /* first: it wants 64-byte alignment */
	unsigned index;
	int epfd;
	pthread_t thread;
	char label[16];             /* the queue="N" value */
	tally_counter requests;     /* requests_total{queue=N} */
	tally_counter bytes;        /* bytes_total{queue=N} */
	uint64_t rng;
	uint64_t sink;              /* keeps the CPU work from being removed */
	/* Plain totals, read by main after the join. */
	uint64_t completed, bytes_done;
};

static void serve(struct worker *w, const struct request *r)
{
	struct conn *c = r->conn;
	uint64_t x = r->bytes | 1;
	int64_t done;

	/* The "work": a dependent chain, about a nanosecond an iteration. */
	for (uint32_t i = 0; i < r->work; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	w->sink += x;
	done = now_ns();

	tally_counter_inc(&w->requests);
	tally_counter_add(&w->bytes, (int64_t)r->bytes);
	if (c->has_metric)
		tally_counter_inc(&c->requests);
	tally_histogram_observe(&m_duration, (uint64_t)(done - r->queued_ns));
	tally_gauge_dec(&m_in_flight);
	w->completed++;
	w->bytes_done += r->bytes;
	/* The last use of *c: after this the acceptor may free it. */
	atomic_fetch_sub_explicit(&c->pending, 1, memory_order_release);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct request r;
	struct epoll_event ev;
	eventfd_t n;

	for (;;) {
		int rc = epoll_wait(w->epfd, &ev, 1, -1);

		if (rc < 0) {
			if (errno == EINTR)
				continue;
			DIE("epoll_wait: %s", strerror(errno));
		}
		/* Reset the eventfd before draining, so that a push after
		 * the drain wakes us again. */
		if (eventfd_read(w->q.efd, &n) < 0 && errno != EAGAIN)
			DIE("eventfd_read: %s", strerror(errno));
		while (queue_pop(&w->q, &r))
			serve(w, &r);
		if (atomic_load_explicit(&w->q.closed, memory_order_acquire)) {
			/* Everything pushed before closed was set. */
			while (queue_pop(&w->q, &r))
				serve(w, &r);
			return NULL;
		}
	}
}

static void worker_init(struct worker *w, unsigned index, uint64_t seed)
{
	struct tally_label l = { "queue", w->label };
	struct tally_metric_desc d = { 0 };
	struct epoll_event ev = { .events = EPOLLIN };

	w->index = index;
	w->rng = seed * 0x9e3779b97f4a7c15ull + index + 1;
	snprintf(w->label, sizeof(w->label), "%u", index);
	w->q.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->q.efd < 0)
		DIE("eventfd: %s", strerror(errno));
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		DIE("epoll_create1: %s", strerror(errno));
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->q.efd, &ev) < 0)
		DIE("epoll_ctl: %s", strerror(errno));

	d.labels = &l;
	d.nlabels = 1;
	d.name = "requests_total";
	d.help = "Requests completed, per queue.";
	must_register(tally_counter_register(NULL, &d, &w->requests), &d);
	d.name = "bytes_total";
	d.help = "Bytes of the requests completed, per queue.";
	d.unit = "bytes";
	must_register(tally_counter_register(NULL, &d, &w->bytes), &d);
}

/* --- The acceptor -------------------------------------------------------- */

struct acceptor {
	pthread_t thread;
	struct worker **workers;
	unsigned nworkers;
	double rate;
	uint64_t rng;
	/* Connections: open ones take requests; closing ones wait for
	 * their pending requests before they are removed. */
	struct conn *open[CONNS_TARGET];
	unsigned nopen;
	struct conn **closing;
	unsigned nclosing, closing_cap;
	uint64_t next_id;
	/* Plain totals, read by main after the join. */
	uint64_t opened, closed, issued, issued_bytes, queue_full;
	uint64_t series_failed, series_checked, series_wrong;
};

static _Atomic int stop;

static void conn_open(struct acceptor *a, int64_t t)
{
	struct conn *c = calloc(1, sizeof(*c));
	char id[24];
	struct tally_label l = { "conn", id };
	struct tally_metric_desc d = {
		.name = "connection_requests_total",
		.help = "Requests of one connection, while it is open.",
		.labels = &l,
		.nlabels = 1,
	};

	if (!c)
		DIE("out of memory");
	c->id = ++a->next_id;
	c->queue = (unsigned)(c->id % a->nworkers);
	c->close_at = t + (int64_t)rnd_range(&a->rng, CONN_LIFE_MIN,
					     CONN_LIFE_MAX) * 1000000;
	snprintf(id, sizeof(id), "%" PRIu64, c->id);
	/* A real service keeps serving when a per-connection series cannot
	 * be made (a full zone, say): it loses that series, not requests. */
	if (tally_counter_register(NULL, &d, &c->requests) == 0) {
		c->has_metric = 1;
	} else if (a->series_failed++ == 0) {
		fprintf(stderr, PROG ": connection %" PRIu64 " has no series: "
			"%s (further failures are only counted)\n", c->id,
			tally_errmsg());
	}
	a->open[a->nopen++] = c;
	a->opened++;
}

/* Stop giving requests to open[i]; it closes once its requests are done. */
static void conn_start_close(struct acceptor *a, unsigned i)
{
	if (a->nclosing == a->closing_cap) {
		a->closing_cap = a->closing_cap ? 2 * a->closing_cap : 64;
		a->closing = realloc(a->closing,
				     a->closing_cap * sizeof(*a->closing));
		if (!a->closing)
			DIE("out of memory");
	}
	a->closing[a->nclosing++] = a->open[i];
	a->open[i] = a->open[--a->nopen];
}

/* Close the closing connections that have no request left. */
static void conn_reap(struct acceptor *a)
{
	for (unsigned i = 0; i < a->nclosing;) {
		struct conn *c = a->closing[i];
		int64_t v;

		if (atomic_load_explicit(&c->pending, memory_order_acquire)) {
			i++;
			continue;
		}
		if (c->has_metric) {
			/* Every add happened before the workers' release of
			 * pending, so the series must hold exactly what this
			 * connection issued: check it, then remove it. */
			if (tally_metric_fetch(&c->requests.metric, &v) < 0)
				DIE("tally_metric_fetch: %s", tally_errmsg());
			a->series_checked++;
			if ((uint64_t)v != c->issued && a->series_wrong++ == 0)
				fprintf(stderr, PROG ": connection %" PRIu64
					": series says %" PRId64 ", issued %"
					PRIu64 "\n", c->id, v, c->issued);
			if (tally_metric_remove(&c->requests.metric) < 0)
				DIE("tally_metric_remove: %s", tally_errmsg());
		}
		free(c);
		a->closed++;
		a->closing[i] = a->closing[--a->nclosing];
	}
}

static void conns_update(struct acceptor *a, int64_t t)
{
	for (unsigned i = 0; i < a->nopen;) {
		if (t >= a->open[i]->close_at)
			conn_start_close(a, i);
		else
			i++;
	}
	while (a->nopen < CONNS_TARGET)
		conn_open(a, t);
	conn_reap(a);
	tally_setgauge_set(&m_conns_open, (int64_t)(a->nopen + a->nclosing));
}

/* Queue one request of a random open connection; 0 if its queue is full. */
static int issue(struct acceptor *a, unsigned *woken)
{
	struct conn *c = a->open[rnd(&a->rng) % a->nopen];
	struct worker *w = a->workers[c->queue];
	struct request r;

	if (!queue_room(&w->q)) {
		a->queue_full++;
		return 0;
	}
	r.conn = c;
	/* Sizes (64 B to 32 KiB) and costs (64 to 8192 iterations, a few
	 * microseconds on average) spread log-uniformly, so that the latency
	 * histogram has something to show. */
	r.bytes = (uint64_t)64 << rnd_range(&a->rng, 0, 8);
	r.bytes += rnd(&a->rng) % r.bytes;
	r.work = (uint32_t)(64u << rnd_range(&a->rng, 0, 6));
	r.work += (uint32_t)(rnd(&a->rng) % r.work);
	r.queued_ns = now_ns();
	c->issued++;
	atomic_fetch_add_explicit(&c->pending, 1, memory_order_relaxed);
	tally_gauge_inc(&m_in_flight);
	queue_push(&w->q, &r);
	a->issued++;
	a->issued_bytes += r.bytes;
	woken[c->queue] = 1;
	return 1;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void *acceptor_main(void *arg)
{
	struct acceptor *a = arg;
	unsigned woken[MAX_THREADS];
	int64_t last = now_ns();
	/* Requests owed to the schedule; at most 20 ms of them, so that a
	 * stall (a full queue, a slow sanitizer build) is not followed by a
	 * burst. */
	double budget = 0, budget_max = a->rate / 50 + 1;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int64_t t = now_ns();

		conns_update(a, t);
		budget += a->rate * (double)(t - last) / 1e9;
		if (budget > budget_max)
			budget = budget_max;
		last = t;
		memset(woken, 0, sizeof(woken));
		for (; budget >= 1; budget--) {
			if (!issue(a, woken)) {
				budget = 0;
				break;
			}
		}
		for (unsigned i = 0; i < a->nworkers; i++)
			if (woken[i])
				queue_wake(&a->workers[i]->q);
		sleep_ns(TICK_NS);
	}

	/* Shut down: close every connection once its requests are served,
	 * then tell the workers that their queues are closed. */
	while (a->nopen)
		conn_start_close(a, 0);
	while (a->nclosing) {
		conn_reap(a);
		if (a->nclosing)
			sleep_ns(TICK_NS);
	}
	tally_setgauge_set(&m_conns_open, 0);
	for (unsigned i = 0; i < a->nworkers; i++) {
		atomic_store_explicit(&a->workers[i]->q.closed, 1,
				      memory_order_release);
		queue_wake(&a->workers[i]->q);
	}
	free(a->closing);
	return NULL;
}

/* --- Options and main ---------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--threads N] [--seconds S] [--rate R]\n"
		"\n"
		"A simulated service instrumented with tally: an acceptor "
		"thread opens and\n"
		"closes connections and queues their requests to N worker "
		"threads.\n"
		"\n"
		"  -t, --threads N   worker threads, 1 to %d (default 2)\n"
		"  -s, --seconds S   run time in seconds, 0 = until SIGINT or "
		"SIGTERM\n"
		"                    (default 5)\n"
		"  -r, --rate R      requests per second, 1 to 10000000 "
		"(default %d)\n"
		"  -h, --help        this text\n"
		"\n"
		"Metrics go to the default zone, $TALLY_DIR/" PROG
		".<pid>.<id>.tally (TALLY_DIR\n"
		"defaults to /dev/shm/tally-<uid>); the file is removed at exit "
		"unless\n"
		"TALLY_KEEP=1.  Read it with tallystat (or tally-exporter).\n",
		MAX_THREADS, DEFAULT_RATE);
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

static double parse_num(const char *opt, const char *s, double lo, double hi,
			int integer)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi ||
	    (integer && v != (double)(long long)v))
		bad_option("%s: expected %s from %.0f to %.0f, got '%s'", opt,
			   integer ? "an integer" : "a number", lo, hi, s);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "seconds", required_argument, NULL, 's' },
		{ "rate", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned nthreads = 2;
	double seconds = 5, rate = DEFAULT_RATE;
	struct worker *workers[MAX_THREADS];
	struct acceptor *a;
	sigset_t sigs;
	int opt, sig, rc, status = 0;
	uint64_t completed = 0, bytes = 0;
	int64_t t0, t1;

	while ((opt = getopt_long(argc, argv, "t:s:r:h", opts, NULL)) != -1) {
		switch (opt) {
		case 't':
			nthreads = (unsigned)parse_num("--threads", optarg, 1,
						       MAX_THREADS, 1);
			break;
		case 's':
			seconds = parse_num("--seconds", optarg, 0, 86400, 0);
			break;
		case 'r':
			rate = parse_num("--rate", optarg, 1, 1e7, 1);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			/* getopt_long has said what was wrong. */
			fputs("Try '" PROG " --help'.\n", stderr);
			return 2;
		}
	}
	if (optind < argc)
		bad_option("unexpected argument '%s'", argv[optind]);

	/* Block the stop signals before any thread exists, so that every
	 * thread inherits the mask and only sigtimedwait() below takes
	 * them. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	if ((rc = pthread_sigmask(SIG_BLOCK, &sigs, NULL)) != 0)
		DIE("pthread_sigmask: %s", strerror(rc));

	{
		struct tally_metric_desc d = { 0 };

		d.name = "requests_in_flight";
		d.help = "Requests queued or being served.";
		must_register(tally_gauge_register(NULL, &d, &m_in_flight), &d);
		d.name = "request_duration_ns";
		d.help = "Time from queueing a request to its completion.";
		d.unit = TALLY_UNIT_NANOSECONDS;
		must_register(tally_histogram_register(NULL, &d, &m_duration),
			      &d);
		d.name = "connections_open";
		d.help = "Connections open (including those closing).";
		d.unit = NULL;
		must_register(tally_setgauge_register(NULL, &d, &m_conns_open),
			      &d);
	}
	for (unsigned i = 0; i < nthreads; i++) {
		size_t size = (sizeof(struct worker) + 63) & ~(size_t)63;

		workers[i] = aligned_alloc(64, size);
		if (!workers[i])
			DIE("out of memory");
		memset(workers[i], 0, size);
		worker_init(workers[i], i, (uint64_t)getpid());
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		DIE("out of memory");
	a->workers = workers;
	a->nworkers = nthreads;
	a->rate = rate;
	a->rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;

	printf(PROG ": pid %d, %u worker%s, %g requests/s, %s, segment %s\n",
	       (int)getpid(), nthreads, nthreads == 1 ? "" : "s", rate,
	       seconds > 0 ? "timed" :
	       "until SIGINT/SIGTERM", tally_zone_path(tally_zone_default()));
	fflush(stdout);

	t0 = now_ns();
	for (unsigned i = 0; i < nthreads; i++)
		if ((rc = pthread_create(&workers[i]->thread, NULL, worker_main,
					 workers[i])) != 0)
			DIE("pthread_create: %s", strerror(rc));
	if ((rc = pthread_create(&a->thread, NULL, acceptor_main, a)) != 0)
		DIE("pthread_create: %s", strerror(rc));

	/* Run until the time is up or a stop signal arrives. */
	for (;;) {
		if (seconds > 0) {
			int64_t left = t0 + (int64_t)(seconds * 1e9) - now_ns();
			struct timespec ts;

			if (left <= 0)
				break;
			ts.tv_sec = left / 1000000000;
			ts.tv_nsec = left % 1000000000;
			sig = sigtimedwait(&sigs, NULL, &ts);
		} else {
			sig = sigwaitinfo(&sigs, NULL);
		}
		if (sig > 0) {
			printf(PROG ": %s, stopping\n", sig == SIGINT ?
			       "SIGINT" : "SIGTERM");
			break;
		}
		if (errno != EAGAIN && errno != EINTR)
			DIE("sigtimedwait: %s", strerror(errno));
	}
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	pthread_join(a->thread, NULL);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(workers[i]->thread, NULL);
	t1 = now_ns();

	printf(PROG ": ran %.2f s; per queue:", (double)(t1 - t0) / 1e9);
	for (unsigned i = 0; i < nthreads; i++) {
		completed += workers[i]->completed;
		bytes += workers[i]->bytes_done;
		printf(" %u=%" PRIu64, i, workers[i]->completed);
	}
	printf("\n");
	printf(PROG ": totals requests=%" PRIu64 " bytes=%" PRIu64
	       " connections_opened=%" PRIu64 " connections_closed=%" PRIu64
	       "\n", completed, bytes, a->opened, a->closed);
	printf(PROG ": %.0f requests/s; a full queue delayed the schedule %"
	       PRIu64 " times\n", (double)completed * 1e9 / (double)(t1 - t0),
	       a->queue_full);
	printf(PROG ": per-connection series checked at close: %" PRIu64
	       ", exact: %s\n", a->series_checked,
	       a->series_wrong ? "NO" : "yes");
	if (completed != a->issued || bytes != a->issued_bytes) {
		fprintf(stderr, PROG ": issued %" PRIu64 " requests (%" PRIu64
			" bytes) but completed %" PRIu64 " (%" PRIu64 ")\n",
			a->issued, a->issued_bytes, completed, bytes);
		status = 1;
	}
	if (a->series_wrong || a->opened != a->closed)
		status = 1;
	if (a->series_failed)
		fprintf(stderr, PROG ": %" PRIu64 " connections had no series\n",
			a->series_failed);

	/* The series stay registered: a reader sees the final values until
	 * the process exits, and afterwards with TALLY_KEEP=1. */
	for (unsigned i = 0; i < nthreads; i++) {
		close(workers[i]->epfd);
		close(workers[i]->q.efd);
		free(workers[i]);
	}
	free(a);
	/* The library removes the default zone's file at exit. */
	return status;
}
