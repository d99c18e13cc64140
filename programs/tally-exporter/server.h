/*
 * server.h: the HTTP side of tally-exporter, on libmicrohttpd.
 *
 * GET or HEAD of /metrics scrapes (one scrape at a time: the segments are
 * read once per request, never cached); / is a small HTML page; every
 * other path is 404 and every other method 405.  No request path ever
 * reaches the file system.  Limits: connections in all and per client
 * address, bytes of a request (line, headers and body), and the time a
 * client may take to send its request (a client that sends one byte a
 * second is cut off when its time is up).  With users in the web config,
 * passwords are checked by a thread of their own behind a bounded queue
 * (auth.c), so failed logins never hold the threads that serve.
 */
#ifndef TALLY_EXPORTER_SERVER_H
#define TALLY_EXPORTER_SERVER_H

#include "expose.h"
#include "tally/reader.h"
#include "webconfig.h"

struct server_opts {
	int listen_fd;                 /* bound and listening */
	const char *const *dirs;
	unsigned ndirs;
	const struct tally_open_opts *open_opts;
	struct ex_config expose;
	struct webconfig *web;         /* NULL: no TLS, no auth */
	unsigned max_conns, max_conns_per_ip;
	unsigned max_request_bytes;
	unsigned request_timeout;      /* seconds */
	unsigned threads;
};

struct server;

/* Start serving; NULL with a one-line reason in @err. */
struct server *server_start(const struct server_opts *o, char *err,
			    size_t errlen);
/* Stop: close the listening socket, finish or drop connections. */
void server_stop(struct server *s);

/* Exposed for tests: which format an Accept header asks for, and whether
 * an Accept-Encoding header allows gzip. */
enum ex_format server_negotiate(const char *accept);
int server_gzip_ok(const char *accept_encoding);

#endif /* TALLY_EXPORTER_SERVER_H */
