/*
 * main.c: tally-exporter's start-up checks and signals (its options:
 * args.c).
 *
 *   tally-exporter [--listen ADDR] [--dir DIR]... [--aggregate] [options]
 *
 * Every error a user can make is reported in one line naming what is
 * wrong (exit status 2 for a bad option, 1 for anything else), before
 * the server starts; logs go to stderr; SIGTERM and SIGINT stop the
 * server cleanly (exit status 0), within STOP_SECONDS whatever is in
 * flight.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "listen.h"
#include "server.h"

/* After SIGTERM, the process is gone within this many seconds, even when
 * a request is still in flight (a scrape of a huge segment, a bcrypt). */
#define STOP_SECONDS 3

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						      noreturn));
static void fatal(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int no_segment(const char *path, struct tally_seg *s,
		      const char *error, void *arg)
{
	(void)path;
	(void)s;
	(void)error;
	(void)arg;
	return 0;
}

/*
 * A directory (NULL: the default places) must be one the library will
 * walk: a directory (not a symbolic link), this user's or allowed by
 * @oo, writable by its owner only.  One that does not exist yet is
 * waited for: a sidecar may start before the writer that creates it
 * (a container's volume), and scrapes serve what is there meanwhile.
 */
static void check_dir(const char *dir, const struct tally_open_opts *oo)
{
	int rc = tally_dir_foreach(dir, oo, no_segment, NULL);

	if (rc == -ENOENT && dir) {
		fprintf(stderr, PROG ": %s does not exist yet: serving "
			"without it until a writer creates it\n", dir);
		return;
	}
	if (rc < 0)
		fatal("cannot read %s", tally_errmsg());
}

/*
 * The stop timer: a clean stop joins libmicrohttpd's threads, which
 * finish the request they are in.  Should that take longer than
 * STOP_SECONDS, the process exits without the rest of the clean-up
 * (nothing of it outlives the process).
 */
static void *stop_timer(void *arg)
{
	static const char msg[] = PROG ": requests still in flight after "
		"3 s: exiting without waiting for them\n";
	struct timespec ts = { STOP_SECONDS, 0 };

	(void)arg;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* Exiting anyway. */
	}
	_exit(0);
	return NULL;
}

/* The server logs what it removes the same way (scrape.c). */
static void expired(const char *path, const char *why, void *arg)
{
	(void)arg;
	fprintf(stderr, PROG ": removed %s: %s\n", path, why);
}

/* Everything that can be wrong is found before serving: the
 * directories, TALLY_RETAIN (the dead segments past it go now, then once
 * a minute on scrapes), the web config. */
static void check_setup(const struct ex_args *a, struct webconfig *wc)
{
	char err[600];

	if (a->ndirs == 0)
		check_dir(NULL, &a->oo);
	for (unsigned i = 0; i < a->ndirs; i++)
		check_dir(a->dirs[i], &a->oo);
	for (unsigned i = 0; i < (a->ndirs ? a->ndirs : 1); i++)
		if (tally_dir_expire(a->ndirs ? a->dirs[i] : NULL,
				     TALLY_RETAIN_ENV, expired, NULL) == -EINVAL)
			fatal("%s", tally_errmsg());
	if (!a->webfile)
		return;
	if (wc_load(a->webfile, wc, err, sizeof(err)) < 0)
		fatal("bad web config: %s", err);
	if (wc->world_readable)
		fprintf(stderr, PROG ": warning: %s holds password hashes and "
			"its mode lets every user read it (chmod o-r %s)\n",
			a->webfile, a->webfile);
	if (wc->key_world_readable)
		fprintf(stderr, PROG ": warning: the mode of the TLS key %s "
			"lets every user read it (chmod o-r %s)\n",
			wc->key_file, wc->key_file);
	if (wc->nusers && wc->cost_min != wc->cost_max)
		fprintf(stderr, PROG ": warning: %s: the users' bcrypt costs "
			"differ (%u to %u): the time of a failed login tells "
			"users of a lower cost from unknown ones; give every "
			"user the same cost\n", a->webfile, wc->cost_min,
			wc->cost_max);
}

/* After SIGTERM or SIGINT: stop serving, within STOP_SECONDS. */
static void stop(struct server *srv, int sig)
{
	pthread_t t;
	pthread_attr_t a;

	fprintf(stderr, PROG ": %s: stopping\n", strsignal(sig));
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, stop_timer, NULL) != 0)
		fprintf(stderr, PROG ": no stop timer: %s\n", strerror(errno));
	pthread_attr_destroy(&a);
	server_stop(srv);
}

int main(int argc, char **argv)
{
	struct ex_args a;
	struct server_opts *so = &a.so;
	struct webconfig wc;
	struct server *srv;
	char err[600], shown[128];
	sigset_t sigs;
	int rc, fd, sig;

	/* A scrape allocates and frees tens of megabytes for 100,000
	 * series.  Keep that memory in the process between scrapes (one
	 * malloc arena, no mmap per large block, no trimming) instead of
	 * taking fresh zeroed pages from the kernel every time: the page
	 * faults cost more than the reading. */
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);

	rc = ex_args_parse(argc, argv, &a);
	if (rc != 0) {
		ex_args_free(&a);
		return rc > 0 ? 0 : 2;
	}
	check_setup(&a, &wc);
	if (a.webfile)
		so->web = &wc;
	fd = listen_open(a.listen_addr, err, sizeof(err), shown, sizeof(shown));
	if (fd < 0)
		fatal("%s", err);

	/* Signals go to this thread only, through sigwait(). */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	so->listen_fd = fd;
	srv = server_start(so, err, sizeof(err));
	if (!srv)
		fatal("%s", err);
	fprintf(stderr, PROG ": listening on %s://%s/metrics%s%s%s\n",
		so->web && so->web->cert_pem ? "https" : "http", shown,
		so->web && so->web->nusers ? " (basic auth)" : "",
		so->expose.aggregate ? " (aggregate)" : "",
		a.oo.allow_group ? " (group-shared segments allowed)" : "");

	if (sigwait(&sigs, &sig) != 0)
		sig = SIGTERM;
	stop(srv, sig);
	if (so->web)
		wc_free(&wc);
	ex_args_free(&a);
	return 0;
}
