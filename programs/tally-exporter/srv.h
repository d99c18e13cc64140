/*
 * srv.h: what the files of tally-exporter's HTTP server share (server.h
 * is its face to main.c): the server's state, a request's state, and the
 * calls one file of the server makes into another.  Nothing outside the
 * server includes it.
 */
#ifndef TALLY_EXPORTER_SRV_H
#define TALLY_EXPORTER_SRV_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zlib.h>

#include "arena.h"
#include "retain.h"
#include "selfmetrics.h"
#include "server.h"
#include "strbuf.h"
#include "strmap.h"

struct srv_index;

/* What a request's login came to. */
enum auth_state {
	AUTH_UNSEEN, AUTH_PENDING, AUTH_OK, AUTH_BAD, AUTH_STOP,
	AUTH_NUL,               /* not to be answered but with 400 */
	AUTH_BUSY,              /* dropped from the queue: 429 */
};

/* One request (libmicrohttpd's per-request pointer), and its place in
 * the login queue while it waits there. */
struct request {
	int started;               /* the handler has seen it */
	const char *raw_uri;       /* the path as sent, and its length up */
	size_t raw_len;            /* to the first NUL (srv_uri_logged()) */
	enum auth_state auth;
	char *user, *pass;
	unsigned char addr[17];    /* family, then the address bytes */
	int clean;                 /* a configured user without recent
				      failures (auth.c) when queued */
	int uidx;                  /* that user's index */
	uint64_t queued_ns;        /* CLOCK_MONOTONIC when queued */
	struct MHD_Connection *c;
	struct request *next;
};

struct conn {
	int fd;
	uint64_t deadline_ns;      /* 0: no deadline (handling a request) */
	struct conn *prev, *next;
};

struct server {
	struct server_opts o;
	struct MHD_Daemon *d;
	/* The scrape (scrape.c), and the totals since start that
	 * selfmetrics.c keeps for the exporter's own metrics. */
	pthread_mutex_t scrape_lock;
	uint64_t scrapes;
	uint64_t skipped_total[TP_NSKIP];
	uint64_t label_clashes_total[2]; /* renamed, dropped */
	char last_dir_error[512];
	struct ex_retain retain;   /* --aggregate: exited processes' counts */
	struct srv_index *recent;  /* the last index, while a body uses it
				      (scrape.c) */
	uint64_t next_expire_ns;   /* when to apply TALLY_RETAIN again */
	uint64_t retain_told;      /* bit i: said why dirs[i] is not
				      cleaned */
	struct tp_strmap skip_seen;/* the files skipped by the last scrape */
	struct tp_arena skip_mem;  /* their paths */
	/* The watchdog. */
	pthread_mutex_t conn_lock;
	pthread_cond_t stop_cond;
	int stopping;
	struct conn head;          /* a ring, the newest first */
	unsigned nconns;           /* in the ring */
	uint64_t conns_evicted;    /* closed to make room (srv_notify_conn) */
	pthread_t watchdog;
	int watchdog_started;
	/* The login queue and its thread. */
	pthread_mutex_t auth_lock;
	pthread_cond_t auth_cond;
	struct request *auth_head, *auth_tail, *auth_running;
	unsigned auth_queued;      /* waiting, plus the one being checked */
	uint64_t *user_fail_ns;    /* per configured user: CLOCK_MONOTONIC
				      of its last failed check, 0: none */
	int auth_stopping;
	pthread_t auth_thread;
	int auth_started;
};

/* log.c: one line to stderr, "tally-exporter: " first; libmicrohttpd's
 * own lines, rate-limited. */
void srv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void srv_mhd_logger(void *cls, const char *fmt, va_list ap);

/* respond.c: a short answer of @status with a copy of @body; 401 asking
 * for Basic credentials; @status (429, 503) with Retry-After; the index
 * page. */
enum MHD_Result srv_reply(struct MHD_Connection *c, unsigned status,
			  const char *ctype, const char *body);
enum MHD_Result srv_unauthorized(struct MHD_Connection *c);
enum MHD_Result srv_busy(struct MHD_Connection *c, unsigned status,
			 const char *body);
extern const char srv_index_html[];

/* compress.c: gzip as the body is written.  srv_gzip_start: 0, or -1
 * when zlib cannot start (then the body goes uncompressed).
 * srv_gzip_step: deflate what @z has in next_in/avail_in into @out (@cap
 * bytes), ending the gzip stream when @last (no more input will come);
 * returns the bytes written to @out, or -1 when zlib failed; sets *@done
 * once the stream has ended.  srv_gzip_end: free @z's state. */
int srv_gzip_start(z_stream *z);
ssize_t srv_gzip_step(z_stream *z, unsigned char *out, size_t cap, int last,
		      int *done);
void srv_gzip_end(z_stream *z);

/* scrape.c: answer a scrape of /metrics on @c. */
enum MHD_Result srv_scrape(struct server *s, struct MHD_Connection *c);

/* route.c: libmicrohttpd's callbacks for a request: the handler, the end
 * of a request, the path's unescaping and its first sight. */
enum MHD_Result srv_handle(void *cls, struct MHD_Connection *c,
			   const char *url, const char *method,
			   const char *version, const char *upload,
			   size_t *upload_size, void **req);
void srv_completed(void *cls, struct MHD_Connection *c, void **req,
		   enum MHD_RequestTerminationCode code);
size_t srv_unescape(void *cls, struct MHD_Connection *c, char *str);
void *srv_uri_logged(void *cls, const char *uri, struct MHD_Connection *c);

/* auth.c: start the login thread when the web config has users (0, or
 * -EAGAIN with a reason in @err); empty the queue, answering its logins
 * 503, and end the thread.  srv_login(): see there.  srv_too_many: the
 * body of a 429. */
int srv_auth_start(struct server *s, char *err, size_t errlen);
void srv_auth_stop(struct server *s);
enum auth_state srv_login(struct server *s, struct MHD_Connection *c,
			  struct request *r, enum MHD_Result *resp);
extern const char srv_too_many[];

/* watchdog.c: libmicrohttpd's notification of a connection's start and
 * end; no deadline while a request is answered, a new one after; the
 * watchdog thread's start (0 or -EAGAIN with a reason in @err) and
 * stop. */
void srv_notify_conn(void *cls, struct MHD_Connection *c, void **sock_ctx,
		     enum MHD_ConnectionNotificationCode code);
void srv_conn_answering(struct server *s, struct MHD_Connection *c);
void srv_conn_rearm(struct server *s, struct MHD_Connection *c);
int srv_watchdog_start(struct server *s, char *err, size_t errlen);
void srv_watchdog_stop(struct server *s);

/* The server's totals in the exporter's own metrics (selffill.c). */
/*
 * self_fill: count scrape @snap (read from @t0_ns to @t1_ns) among the
 * server's totals and fill the rest of @self from them.  Called under
 * the server's scrape lock.
 */
void self_fill(struct ex_self *self, struct server *s,
	       const struct tp_snapshot *snap, uint64_t t0_ns,
	       uint64_t t1_ns);

/* self_count_result: add what ex_write() reported (@res) to the server's
 * totals, for the scrapes after this one.  Under the scrape lock. */
void self_count_result(struct server *s, const struct ex_result *res);

#endif /* TALLY_EXPORTER_SRV_H */
