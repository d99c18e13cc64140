/*
 * server.c: the start and stop of tally-exporter's HTTP server
 * (server.h): its threads, libmicrohttpd's options, and the order in
 * which they end.
 *
 * libmicrohttpd runs a small pool of threads with epoll; the access
 * handler (route.c) does the scrape itself, under one mutex, so two
 * scrapes never read the segments at the same time (a scrape costs
 * milliseconds; a queue of them is what Prometheus's own timeout is
 * for).  With --aggregate the same mutex guards what retain.h keeps
 * between scrapes: the previous raw snapshot and the counts of exited
 * processes.  Beside the pool run the watchdog (watchdog.c) and, with
 * users in the web config, the login thread (auth.c).  At stop the login
 * queue is emptied first, since libmicrohttpd must not stop with
 * suspended connections; the watchdog ends last, once no connection is
 * left to watch.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "srv.h"

struct server *server_start(const struct server_opts *o, char *err,
			    size_t errlen)
{
	struct server *s = calloc(1, sizeof(*s));
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			 MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
	int tls = o->web && o->web->cert_pem;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->o = *o;
	pthread_mutex_init(&s->scrape_lock, NULL);
	pthread_mutex_init(&s->conn_lock, NULL);
	pthread_cond_init(&s->stop_cond, NULL);
	pthread_mutex_init(&s->auth_lock, NULL);
	pthread_cond_init(&s->auth_cond, NULL);
	s->head.next = s->head.prev = &s->head;
	if (tls) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			snprintf(err, errlen, "this libmicrohttpd was built "
				 "without TLS");
			free(s);
			return NULL;
		}
		flags |= MHD_USE_TLS;
	}
	if (srv_watchdog_start(s, err, errlen) < 0) {
		free(s);
		return NULL;
	}
	if (srv_auth_start(s, err, errlen) < 0) {
		server_stop(s);
		return NULL;
	}
	{
		struct MHD_OptionItem opts[16];
		unsigned n = 0;

#define OPT(o_, v_, p_) \
	(opts[n++] = (struct MHD_OptionItem){ (o_), (intptr_t)(v_), (p_) })
		OPT(MHD_OPTION_LISTEN_SOCKET, o->listen_fd, NULL);
		OPT(MHD_OPTION_THREAD_POOL_SIZE, o->threads ? o->threads : 2u,
		    NULL);
		OPT(MHD_OPTION_CONNECTION_LIMIT, o->max_conns, NULL);
		OPT(MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->max_conns_per_ip,
		    NULL);
		OPT(MHD_OPTION_CONNECTION_TIMEOUT, o->request_timeout, NULL);
		OPT(MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->max_request_bytes,
		    NULL);
		if (tls) {
			OPT(MHD_OPTION_HTTPS_MEM_CERT, 0, o->web->cert_pem);
			OPT(MHD_OPTION_HTTPS_MEM_KEY, 0, o->web->key_pem);
		}
		OPT(MHD_OPTION_END, 0, NULL);
#undef OPT
		s->d = MHD_start_daemon(
			flags, 0, NULL, NULL, srv_handle, s,
			MHD_OPTION_EXTERNAL_LOGGER, srv_mhd_logger, s,
			MHD_OPTION_ARRAY, opts,
			MHD_OPTION_NOTIFY_CONNECTION, srv_notify_conn, s,
			MHD_OPTION_NOTIFY_COMPLETED, srv_completed, s,
			MHD_OPTION_UNESCAPE_CALLBACK, srv_unescape, s,
			MHD_OPTION_URI_LOG_CALLBACK, srv_uri_logged, s,
			MHD_OPTION_END);
	}
	if (!s->d) {
		snprintf(err, errlen, "cannot start the HTTP server%s",
			 tls ? " (is the TLS certificate or key invalid?)" : "");
		server_stop(s);
		return NULL;
	}
	return s;
}

void server_stop(struct server *s)
{
	if (!s)
		return;
	srv_auth_stop(s);
	if (s->d)
		MHD_stop_daemon(s->d);
	srv_watchdog_stop(s);
	ex_retain_free(&s->retain);
	free(s->user_fail_ns);
	tp_strmap_free(&s->skip_seen);
	tp_arena_free(&s->skip_mem);
	pthread_mutex_destroy(&s->scrape_lock);
	pthread_mutex_destroy(&s->conn_lock);
	pthread_cond_destroy(&s->stop_cond);
	pthread_mutex_destroy(&s->auth_lock);
	pthread_cond_destroy(&s->auth_cond);
	free(s);
}

