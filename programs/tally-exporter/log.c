/*
 * log.c: tally-exporter's log lines, on stderr.  Each line is written
 * with one write(2), so the lines of two threads never interleave; the
 * lines of libmicrohttpd, which can be one per refused or dropped
 * connection, are rate-limited so that a client reconnecting in a loop
 * cannot fill the log.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "srv.h"

/* One line, written with one write(2) so that the lines of two threads
 * never interleave. */
void srv_log(const char *fmt, ...)
{
	char line[700];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "tally-exporter: ");
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = (int)strlen(line);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* Nowhere left to say it. */
	}
}

/*
 * libmicrohttpd logs a line for every connection it refuses or that a
 * client drops: a client that reconnects in a loop would fill the log.
 * At most LOG_BURST of its lines a minute are written, and then how many
 * were left out.
 */
#define LOG_BURST 20
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t log_window_ns;
static unsigned log_count, log_dropped;

void srv_mhd_logger(void *cls, const char *fmt, va_list ap)
{
	uint64_t now = tp_now_ns();
	unsigned dropped = 0;
	char msg[512];
	size_t n;
	int show;

	(void)cls;
	pthread_mutex_lock(&log_lock);
	if (now - log_window_ns > 60ull * 1000000000u) {
		dropped = log_dropped;
		log_window_ns = now;
		log_count = log_dropped = 0;
	}
	show = log_count < LOG_BURST;
	if (show)
		log_count++;
	else
		log_dropped++;
	pthread_mutex_unlock(&log_lock);
	if (dropped)
		srv_log("libmicrohttpd: %u more messages in the last minute "
			"were not logged", dropped);
	if (!show)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	srv_log("libmicrohttpd: %s", msg);
}
