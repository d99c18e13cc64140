/*
 * bench-wakeup.c: stats under a lock vs tally next to an epoll wake-up
 * path (tally-bench wakeup), after the CentOS 7 PREEMPT_RT epoll report:
 * three writer threads eventfd_write() while one reader epoll_wait()s on
 * the three eventfds; on the RT kernel every contended spinlock became a
 * sleeping lock, the four threads fell from 100% to 54% of a CPU each, and
 * rescheduling interrupts (RES in /proc/interrupts) grew by ~10^5 a second.
 *
 * Here the same four threads also keep statistics, as a service does:
 * each writer counts its event (events += 1, bytes += 64) before it
 * writes its eventfd, and the reader, at each wake-up, counts the wake-up
 * and reads the events counted so far.  The statistics are
 *
 *   mutex stats   one struct behind a pthread mutex (what a lock-based
 *                 metrics library does): a contended lock sleeps in the
 *                 kernel (futex), which is what a lock on an RT kernel
 *                 does to every contended spinlock.
 *   tally percpu  a TALLY_PERCPU block of 3 slots: the writers' adds
 *                 never lock, sleep or enter the kernel.
 *
 * Measured per run: events per second (eventfd writes of all writers per
 * wall-clock second), the writers' CPU time per event, the voluntary and
 * involuntary context switches of the four threads (getrusage
 * RUSAGE_THREAD, summed), the machine's RES interrupts during the run
 * (the RES line of /proc/interrupts summed over CPUs, before and after;
 * machine-wide, so other processes' wake-ups count too), and the CPU the
 * four threads used.  Every event written must be read by the reader and
 * counted by the statistics (checked).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench.h"
#include "tally/tally.h"

#define NWRITERS 3

enum kind { K_MUTEX, K_TALLY };

static const struct bench_conf confs[] = {
	{ "mutex stats", K_MUTEX },
	{ "tally percpu", K_TALLY },
};
#define NCONFS BENCH_NELEMS(confs)

/* The lock-based statistics. */
static struct {
	pthread_mutex_t lock;
	uint64_t events, bytes, wakeups, seen;
} ms = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0 };

struct thr {
	pthread_t th;
	pthread_barrier_t *bar;
	enum kind kind;
	tally_block *b;
	int efd;               /* writer: its eventfd; reader: the epoll fd */
	uint64_t n;            /* writer: events; reader: events expected */
	uint64_t got;          /* reader: the sum of the values read */
	uint64_t c0, c1, t0, t1;
	struct rusage ru0, ru1;
	int clobbered, lost;
};

/* Waits for the other threads, then reads the clocks and context switches
 * of @t's start; returns the thread pointer's word, for thr_end(). */
static uintptr_t thr_start(struct thr *t)
{
	uintptr_t tcb = bench_tcb_word();

	pthread_barrier_wait(t->bar);
	getrusage(RUSAGE_THREAD, &t->ru0);
	t->t0 = bench_now_ns();
	t->c0 = bench_thread_cpu_ns();
	return tcb;
}

/* Reads the clocks and context switches of @t's end, and whether its
 * thread pointer's word is still @tcb (restored and recorded if not). */
static void thr_end(struct thr *t, uintptr_t tcb)
{
	t->c1 = bench_thread_cpu_ns();
	t->t1 = bench_now_ns();
	getrusage(RUSAGE_THREAD, &t->ru1);
	if (bench_tcb_word() != tcb) {
		bench_tcb_restore(tcb);
		t->clobbered = 1;
	}
}

static void *writer_main(void *arg)
{
	struct thr *w = arg;
	uintptr_t tcb = thr_start(w);

	for (uint64_t i = 0; i < w->n; i++) {
		if (w->kind == K_MUTEX) {
			pthread_mutex_lock(&ms.lock);
			ms.events++;
			ms.bytes += 64;
			pthread_mutex_unlock(&ms.lock);
		} else {
			tally_block_add(w->b, 0, 1);
			tally_block_add(w->b, 1, 64);
		}
		while (eventfd_write(w->efd, 1) < 0 && errno == EINTR)
			;
	}
	thr_end(w, tcb);
	return NULL;
}

static void *reader_main(void *arg)
{
	struct thr *r = arg;
	struct epoll_event ev[NWRITERS];
	uintptr_t tcb = thr_start(r);
	unsigned idle = 0;

	while (r->got < r->n) {
		int k = epoll_wait(r->efd, ev, NWRITERS, 1000);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			/* A second without an event while some are still
			 * missing: after 5 of them, they are lost. */
			if (++idle >= 5) {
				r->lost = 1;
				break;
			}
			continue;
		}
		idle = 0;
		for (int i = 0; i < k; i++) {
			eventfd_t v;

			if (eventfd_read(ev[i].data.fd, &v) == 0)
				r->got += v;
		}
		if (r->kind == K_MUTEX) {
			pthread_mutex_lock(&ms.lock);
			ms.wakeups++;
			ms.seen = ms.events;
			pthread_mutex_unlock(&ms.lock);
		} else {
			int64_t seen;

			tally_block_add(r->b, 2, 1);
			tally_block_fetch(r->b, 0, &seen);
		}
	}
	thr_end(r, tcb);
	return NULL;
}

/* The sum of the RES line of /proc/interrupts over CPUs, or -1. */
static long long res_interrupts(void)
{
	FILE *f = fopen("/proc/interrupts", "r");
	char line[8192];
	long long sum = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;

		while (*p == ' ')
			p++;
		if (strncmp(p, "RES:", 4) != 0)
			continue;
		p += 4;
		sum = 0;
		for (;;) {
			long long v = strtoll(p, &end, 10);

			if (end == p)
				break;
			sum += v;
			p = end;
		}
		break;
	}
	fclose(f);
	return sum;
}

/* 1 when the running kernel is PREEMPT_RT, 0 when not. */
static int kernel_rt(char *version, size_t n)
{
	struct utsname u;
	FILE *f;
	int rt = 0;

	version[0] = 0;
	if (uname(&u) == 0) {
		snprintf(version, n, "%s %s", u.release, u.version);
		rt = strstr(u.version, "PREEMPT_RT") != NULL ||
		     strstr(u.version, "PREEMPT RT") != NULL;
	}
	if ((f = fopen("/sys/kernel/realtime", "r"))) {
		int v = 0;

		if (fscanf(f, "%d", &v) == 1 && v == 1)
			rt = 1;
		fclose(f);
	}
	return rt;
}

static struct tally_zone *zone;

/* Per run, what the row's fields cannot hold. */
struct extra {
	double vcsw[BENCH_MAX_REPEAT], ivcsw[BENCH_MAX_REPEAT];
	double res[BENCH_MAX_REPEAT], res_s[BENCH_MAX_REPEAT];
	double cpu[BENCH_MAX_REPEAT];
	int res_known;
};

static void run_once(const struct bench_conf *cf, uint64_t n,
		     struct bench_row *r, struct extra *x)
{
	struct thr t[NWRITERS + 1];
	pthread_barrier_t bar;
	tally_block *b = NULL;
	int ep, efd[NWRITERS];
	uint64_t t0 = UINT64_MAX, t1 = 0, total = NWRITERS * n;
	double wcpu = 0, cpu = 0, vcsw = 0, ivcsw = 0;
	long long res0, res1;
	int64_t counted = 0;
	unsigned k = r->n;

	if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		bench_die("epoll_create1: %s", strerror(errno));
	for (unsigned i = 0; i < NWRITERS; i++) {
		struct epoll_event ev = { .events = EPOLLIN };

		if ((efd[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
			bench_die("eventfd: %s", strerror(errno));
		ev.data.fd = efd[i];
		if (epoll_ctl(ep, EPOLL_CTL_ADD, efd[i], &ev) < 0)
			bench_die("epoll_ctl: %s", strerror(errno));
	}
	ms.events = ms.bytes = ms.wakeups = ms.seen = 0;
	if (cf->kind == K_TALLY &&
	    !(b = tally_block_alloc(zone, 3, TALLY_PERCPU)))
		bench_die("tally_block_alloc: %s", tally_errmsg());
	pthread_barrier_init(&bar, NULL, NWRITERS + 2);
	for (unsigned i = 0; i <= NWRITERS; i++) {
		int reader = i == NWRITERS;

		t[i] = (struct thr){ .bar = &bar, .kind = cf->kind, .b = b,
				     .efd = reader ? ep : efd[i],
				     .n = reader ? total : n };
		if (pthread_create(&t[i].th, NULL,
				   reader ? reader_main : writer_main, &t[i]))
			bench_die("pthread_create: %s", strerror(errno));
	}
	res0 = res_interrupts();
	pthread_barrier_wait(&bar);
	for (unsigned i = 0; i <= NWRITERS; i++)
		pthread_join(t[i].th, NULL);
	res1 = res_interrupts();
	pthread_barrier_destroy(&bar);

	for (unsigned i = 0; i <= NWRITERS; i++) {
		double c = (double)(t[i].c1 - t[i].c0);

		t0 = t[i].t0 < t0 ? t[i].t0 : t0;
		t1 = t[i].t1 > t1 ? t[i].t1 : t1;
		cpu += c;
		if (i < NWRITERS)
			wcpu += c / (double)n;
		vcsw += (double)(t[i].ru1.ru_nvcsw - t[i].ru0.ru_nvcsw);
		ivcsw += (double)(t[i].ru1.ru_nivcsw - t[i].ru0.ru_nivcsw);
		if (t[i].clobbered) {
			snprintf(r->note, sizeof(r->note),
				 "LIBRARY BUG: add wrote %%fs:8 (glibc DTV)");
			r->failed = 1;
		}
	}
	if (t1 <= t0)
		t1 = t0 + 1;
	if (cf->kind == K_MUTEX) {
		counted = (int64_t)ms.events;
	} else {
		if (tally_block_fetch(b, 0, &counted) < 0)
			bench_die("tally_block_fetch: %s", tally_errmsg());
		if (tally_block_free(zone, b) < 0)
			bench_die("tally_block_free: %s", tally_errmsg());
	}
	/* Both the statistics and the reader must have every event. */
	if (t[NWRITERS].got != total) {
		counted = (int64_t)t[NWRITERS].got;
		snprintf(r->note, sizeof(r->note), "the reader got %llu of %llu "
			 "events", (unsigned long long)t[NWRITERS].got,
			 (unsigned long long)total);
	}
	for (unsigned i = 0; i < NWRITERS; i++)
		close(efd[i]);
	close(ep);

	r->ns[k] = wcpu / NWRITERS;
	r->rate[k] = (double)total / (double)(t1 - t0) * 1e3;
	r->overlap[k] = cpu / ((NWRITERS + 1) * (double)(t1 - t0));
	x->cpu[k] = 100 * cpu / (double)(t1 - t0);
	x->vcsw[k] = vcsw * 1000 / (double)total;
	x->ivcsw[k] = ivcsw * 1000 / (double)total;
	if (res0 >= 0 && res1 >= res0) {
		x->res[k] = (double)(res1 - res0) * 1000 / (double)total;
		x->res_s[k] = (double)(res1 - res0) * 1e9 / (double)(t1 - t0);
	} else {
		x->res[k] = x->res_s[k] = NAN;
	}
	bench_row_check(r, (int64_t)total, counted);
	r->n++;
}

static double median(const double *v, unsigned n)
{
	struct bench_stats st;

	for (unsigned i = 0; i < n; i++)
		if (isnan(v[i]))
			return NAN;
	bench_stats(v, n, &st);
	return st.median;
}

int bench_wakeup(const struct bench_opts *o)
{
	static struct bench_doc d;
	static struct extra ex[NCONFS];
	struct bench_row *r[NCONFS];
	uint64_t n = o->adds ? o->adds : (o->quick ? 20000 : 200000);
	char kver[256], esc[512];
	int rt = kernel_rt(kver, sizeof(kver));
	int res_ok = res_interrupts() >= 0;
	double cpu[NCONFS];
	char cpu_json[NCONFS][32];
	unsigned step = 0;

	memset(ex, 0, sizeof(ex));
	bench_doc_start(&d, o, "wakeup", "mops", (const char *const[4]){
				"vcsw_per_kevent", "ivcsw_per_kevent",
				"res_per_kevent", "res_per_s" });
	zone = bench_anon_zone("tally-bench-wakeup", 4 * TALLY_CHUNK_SLOTS);
	for (unsigned c = 0; c < NCONFS; c++)
		r[c] = bench_row_add(&d, confs[c].name, "", NWRITERS + 1, 0, 0);
	for (unsigned k = 0; k < o->repeat; k++)
		for (unsigned c = 0; c < NCONFS; c++) {
			bench_progress_step(++step,
					    (unsigned)NCONFS * o->repeat, k + 1,
					    o->repeat, "%s", confs[c].name);
			run_once(&confs[c], n, r[c], &ex[c]);
		}
	bench_progress_done();
	for (unsigned c = 0; c < NCONFS; c++) {
		bench_row_finish(r[c]);
		r[c]->ratio[0] = median(ex[c].vcsw, r[c]->n);
		r[c]->ratio[1] = median(ex[c].ivcsw, r[c]->n);
		r[c]->ratio[2] = median(ex[c].res, r[c]->n);
		r[c]->ratio[3] = median(ex[c].res_s, r[c]->n);
		cpu[c] = median(ex[c].cpu, r[c]->n);
		if (!res_ok && !r[c]->note[0])
			snprintf(r[c]->note, sizeof(r[c]->note),
				 "RES n/a: /proc/interrupts unreadable");
	}

	/* The kernel's version string, escaped for JSON. */
	{
		size_t j = 0;

		for (const char *p = kver; *p && j + 7 < sizeof(esc); p++) {
			if (*p == '"' || *p == '\\')
				esc[j++] = '\\';
			esc[j++] = (unsigned char)*p < 0x20 ? ' ' : *p;
		}
		esc[j] = 0;
	}
	snprintf(d.params, sizeof(d.params),
		 "\"events_per_writer\":%llu,\"writers\":%u,\"readers\":1,"
		 "\"repeat\":%u,\"cpus\":\"%s\",\"kernel\":\"%s\","
		 "\"preempt_rt\":%s,\"res_readable\":%s,\"cpu_percent\":"
		 "{\"mutex stats\":%s,\"tally percpu\":%s},"
		 "\"build_type\":\"%s\",\"quick\":%s,\"note\":\"%s\"",
		 (unsigned long long)n, NWRITERS, o->repeat, bench_cpu_list(),
		 esc, rt ? "true" : "false", res_ok ? "true" : "false",
		 bench_json_fmt(cpu_json[0], round(cpu[0])),
		 bench_json_fmt(cpu_json[1], round(cpu[1])),
		 TALLY_BENCH_BUILD_TYPE,
		 o->quick ? "true" : "false",
		 !res_ok ? "RES is null: /proc/interrupts is unreadable" :
		 rt ? "PREEMPT_RT kernel: a contended lock sleeps" :
		 "not a PREEMPT_RT kernel: the seed's storm of rescheduling "
		 "interrupts cannot show; RES is machine-wide");
	snprintf(d.summary, sizeof(d.summary),
		 "wakeup writers=%u events=%llu preempt_rt=%s "
		 "mutex_mevents=%.3f tally_mevents=%.3f tally_x_mutex=%.2fx "
		 "mutex_vcsw_per_kevent=%.1f tally_vcsw_per_kevent=%.1f "
		 "mutex_res_per_s=%.0f tally_res_per_s=%.0f checks=%s",
		 NWRITERS, (unsigned long long)n, rt ? "yes" : "no",
		 r[0]->rate_st.median, r[1]->rate_st.median,
		 r[1]->rate_st.median / r[0]->rate_st.median, r[0]->ratio[0],
		 r[1]->ratio[0], r[0]->ratio[3], r[1]->ratio[3],
		 bench_failed(&d) ? "FAILED" : "ok");
	if (o->json) {
		bench_print_json(&d, o, stdout);
	} else {
		printf("tally-bench wakeup: %u writers x %llu events + 1 "
		       "epoll reader, unpinned on CPUs %s; %u run%s per row\n"
		       "kernel %s: %s\n", NWRITERS, (unsigned long long)n,
		       bench_cpu_list(), o->repeat, o->repeat > 1 ? "s" : "",
		       kver, rt ? "PREEMPT_RT" : "not PREEMPT_RT");
		printf("Mev/s: eventfd writes per wall-clock second (median); "
		       "ns/ev: a writer's CPU time per event (stats + write);\n"
		       "vcsw, ivcsw: voluntary and involuntary context switches "
		       "of the 4 threads per 1000 events; RES: rescheduling\n"
		       "interrupts of the whole machine during the run, per "
		       "1000 events and per second; CPU%%: the 4 threads' CPU "
		       "time / wall\n\n");
		printf("%-13s %8s %8s %6s %8s %8s %8s %10s %6s  %s\n", "config",
		       "Mev/s", "ns/ev", "x mtx", "vcsw/k", "ivcsw/k", "RES/k",
		       "RES/s", "CPU%", "check");
		for (unsigned c = 0; c < NCONFS; c++) {
			char rk[16], rs[16];

			if (isnan(r[c]->ratio[2])) {
				snprintf(rk, sizeof(rk), "n/a");
				snprintf(rs, sizeof(rs), "n/a");
			} else {
				snprintf(rk, sizeof(rk), "%.2f", r[c]->ratio[2]);
				snprintf(rs, sizeof(rs), "%.0f", r[c]->ratio[3]);
			}
			printf("%-13s %8.3f %8.1f %6.2f %8.2f %8.2f %8s %10s "
			       "%5.0f%%  %s%s%s\n", r[c]->config,
			       r[c]->rate_st.median, r[c]->ns_st.median,
			       r[c]->rate_st.median / r[0]->rate_st.median,
			       r[c]->ratio[0], r[c]->ratio[1], rk, rs, cpu[c],
			       r[c]->observed == r[c]->expected && !r[c]->failed ?
			       "ok" : "LOST", r[c]->note[0] ? "  " : "",
			       r[c]->note);
		}
		printf("\nnote: %s\n", !res_ok ?
		       "RES n/a: /proc/interrupts is unreadable here" : rt ?
		       "a PREEMPT_RT kernel: contended locks sleep, as in the "
		       "seed" :
		       "not a PREEMPT_RT kernel, so the seed's storm of "
		       "rescheduling interrupts (~10^5/s) cannot\nshow here; "
		       "RES counts the whole machine (other processes too); "
		       "4 threads share these CPUs");
		bench_print_summary(&d);
	}
	tally_zone_destroy(zone);
	/*
	 * No chart: the rows are two configurations at one thread count,
	 * which the table shows better than two points would.  --plot still
	 * keeps DIR/wakeup.json with the others.
	 */
	return bench_finish(&d, o, "a correctness check failed"
			    " (see the check and note columns)", 0);
}
