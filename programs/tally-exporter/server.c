/*
 * server.c: the HTTP server of tally-exporter (server.h).
 *
 * libmicrohttpd runs a small pool of threads with epoll; the access
 * handler does the scrape itself, under one mutex, so two scrapes never
 * read the segments at the same time (a scrape costs milliseconds; a
 * queue of them is what Prometheus's own timeout is for).  With
 * --aggregate the same mutex guards what retain.h keeps between scrapes:
 * the previous raw snapshot and the counts of exited processes.
 *
 * libmicrohttpd's timeout is an idle timeout: a client that sends a byte
 * every second is never idle.  So the server keeps its own list of
 * connections with the time each must have sent its request by, and a
 * watchdog thread shuts down (shutdown(2), not close) the sockets that
 * are late; libmicrohttpd then sees the connection fail and closes it
 * itself.  When the table is full (--web.max-connections), the oldest
 * connection that has not sent a whole request is shut down the same
 * way, so that slow clients holding every place cannot keep a complete
 * request out (tally_exporter_connections_evicted_total).
 * A connection leaves the list in the CLOSED notification,
 * which libmicrohttpd sends before it closes the socket, so the watchdog
 * never touches a descriptor that was reused.
 *
 * Passwords are checked off the network threads: a login that is not
 * among the recent successes (wc_cached()) suspends its connection and
 * joins a short queue that one thread works through with bcrypt
 * (wc_verify()), then resumes it.  So a wrong password holds no network
 * thread, a scrape with remembered credentials never waits for a bcrypt,
 * and the queue's bounds (AUTH_QUEUE in all, AUTH_QUEUE_PER_ADDR per
 * client address) answer a flood of failed logins with 429 instead of
 * letting it grow; a full queue makes room for a login from an address
 * with fewer logins in it than another, so a flood from a few addresses
 * cannot refuse every other client.  Addresses are cheap, though (a
 * flood from a hundred loopback addresses, or an IPv6 /48), so a login of
 * a configured user whose password failed nowhere in the last
 * AUTH_FAIL_MEMORY_S seconds is *clean*: it is checked before the others
 * and never dropped to make room for an unclean one.  A flood of wrong
 * passwords, which makes only the users it names unclean, then delays
 * the first login of another user by one bcrypt at most.  At stop the queue is emptied and its connections
 * resumed (libmicrohttpd must not stop with suspended connections), and
 * the thread finishes at most the one bcrypt it is in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "authq.h"
#include "srv.h"

/* At most this many logins wait for bcrypt or are being checked, and
 * at most AUTH_QUEUE_PER_ADDR of them from one client address (an IPv6
 * client: one /64).  With the largest cost (WC_MAX_COST, ~0.2 s) a full
 * queue is worked through in under 2 s. */
#define AUTH_QUEUE 8
#define AUTH_QUEUE_PER_ADDR 2
/* A configured user whose password failed within this many seconds is
 * not clean (see the top). */
#define AUTH_FAIL_MEMORY_S 60

/* --- Negotiation ----------------------------------------------------- */

/* The q of one element "type/sub;a=b;q=0.5" (1 when absent), and whether
 * its version parameter, if any, equals @version. */
static double elem_q(const char *e, size_t n, const char *version,
		     int *version_ok)
{
	double q = 1.0;
	const char *p = memchr(e, ';', n), *end = e + n;

	*version_ok = 1;
	while (p && p < end) {
		const char *k = p + 1, *semi;
		size_t kl;

		while (k < end && *k == ' ')
			k++;
		semi = memchr(k, ';', (size_t)(end - k));
		kl = (size_t)((semi ? semi : end) - k);
		if (kl > 2 && strncasecmp(k, "q=", 2) == 0)
			q = strtod(k + 2, NULL);
		else if (kl > 8 && strncasecmp(k, "version=", 8) == 0)
			*version_ok = version && kl - 8 == strlen(version) &&
				      strncmp(k + 8, version, kl - 8) == 0;
		p = semi;
	}
	return q;
}

enum ex_format server_negotiate(const char *accept)
{
	double om = 0, text = 0;
	const char *p = accept;

	if (!accept)
		return EX_TEXT;
	while (*p) {
		const char *comma = strchr(p, ','), *e = p;
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		size_t tl;
		int vok;
		double q;

		while (n && *e == ' ') {
			e++;
			n--;
		}
		tl = strcspn(e, ";,");
		if (tl > n)
			tl = n;
		while (tl && e[tl - 1] == ' ')
			tl--;
		if (tl == 28 && strncasecmp(e, "application/openmetrics-text",
					    28) == 0) {
			q = elem_q(e, n, "1.0.0", &vok);
			if (vok && q > om)
				om = q;
		} else if (tl == 10 && strncasecmp(e, "text/plain", 10) == 0) {
			q = elem_q(e, n, "0.0.4", &vok);
			if (vok && q > text)
				text = q;
		} else if ((tl == 3 && strncmp(e, "*/*", 3) == 0) ||
			   (tl == 6 && strncasecmp(e, "text/*", 6) == 0)) {
			q = elem_q(e, n, NULL, &vok);
			if (q > text)
				text = q;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	return om > 0 && om > text ? EX_OPENMETRICS : EX_TEXT;
}

int server_gzip_ok(const char *ae)
{
	const char *p = ae;

	if (!ae)
		return 0;
	while (*p) {
		const char *comma = strchr(p, ','), *e = p;
		size_t n = comma ? (size_t)(comma - p) : strlen(p), tl;
		int vok;

		while (n && *e == ' ') {
			e++;
			n--;
		}
		tl = strcspn(e, ";, ");
		if (tl > n)
			tl = n;
		if ((tl == 4 && strncasecmp(e, "gzip", 4) == 0) ||
		    (tl == 1 && e[0] == '*'))
			return elem_q(e, n, NULL, &vok) > 0;
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* --- Logins ---------------------------------------------------------- */

static void request_free(struct request *r)
{
	if (!r)
		return;
	if (r->pass) {
		/* The password leaves no copy behind in freed memory. */
		explicit_bzero(r->pass, strlen(r->pass));
		free(r->pass);
	}
	free(r->user);
	free(r);
}

/* The client address of @c as family + bytes (zeros when unknown).  An
 * IPv6 address is cut to its /64, which one host commonly holds whole;
 * an IPv4 address mapped into IPv6 is the IPv4 address. */
static void client_addr(struct MHD_Connection *c, unsigned char out[17])
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	memset(out, 0, 17);
	if (sa && sa->sa_family == AF_INET) {
		out[0] = 4;
		memcpy(out + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 =
			&((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			out[0] = 4;
			memcpy(out + 1, a6->s6_addr + 12, 4);
		} else {
			out[0] = 6;
			memcpy(out + 1, a6->s6_addr, 8);
		}
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The index of configured user @name, or -1. */
static int user_index(const struct server *s, const char *name)
{
	for (unsigned i = 0; s->o.web && i < s->o.web->nusers; i++)
		if (!strcmp(s->o.web->users[i].name, name))
			return (int)i;
	return -1;
}

/* Is queued login @q still clean: no failure of its user since it was
 * queued?  Called with auth_lock held. */
static int still_clean(const struct server *s, const struct request *q)
{
	return q->clean && s->user_fail_ns[q->uidx] < q->queued_ns;
}

/*
 * Is a login of @r's user clean (see the top)?  A configured user, no
 * failure in the last AUTH_FAIL_MEMORY_S seconds, and no clean login of
 * that user queued or being checked already: so clean logins are at most
 * one a user, and a user named by a flood is clean for one check a
 * while.  Sets r->uidx.  Called with auth_lock held.
 */
static int user_clean(struct server *s, struct request *r)
{
	int i = user_index(s, r->user);
	uint64_t at;

	r->uidx = i < 0 ? 0 : i;
	if (i < 0 || !s->user_fail_ns)
		return 0;
	at = s->user_fail_ns[i];
	if (at && r->queued_ns - at <= AUTH_FAIL_MEMORY_S * 1000000000ull)
		return 0;
	for (const struct request *q = s->auth_head; q; q = q->next)
		if (q->clean && q->uidx == i)
			return 0;
	if (s->auth_running && s->auth_running->clean &&
	    s->auth_running->uidx == i)
		return 0;
	return 1;
}

/* The queued logins, in order, and their addresses, for authq.h; at
 * most AUTH_QUEUE are queued (auth_enqueue()).  Called with auth_lock
 * held. */
_Static_assert(sizeof(((struct request *)0)->addr) == AUTHQ_ADDR,
	       "a request's address is what authq.h compares");

struct auth_view {
	unsigned n;
	struct request *r[AUTH_QUEUE];
	unsigned char addr[AUTH_QUEUE][AUTHQ_ADDR];
	unsigned char clean[AUTH_QUEUE];
};

static void auth_view(const struct server *s, struct auth_view *v)
{
	v->n = 0;
	for (struct request *q = s->auth_head; q && v->n < AUTH_QUEUE;
	     q = q->next) {
		v->r[v->n] = q;
		v->clean[v->n] = (unsigned char)still_clean(s, q);
		memcpy(v->addr[v->n++], q->addr, AUTHQ_ADDR);
	}
}

/* Unlinks login @k of @v from the queue. */
static void auth_unlink(struct server *s, const struct auth_view *v,
			unsigned k)
{
	struct request *r = v->r[k], *prev = k ? v->r[k - 1] : NULL;

	if (prev)
		prev->next = r->next;
	else
		s->auth_head = r->next;
	if (s->auth_tail == r)
		s->auth_tail = prev;
	r->next = NULL;
}

/* How many logins from the address of @r are queued or being checked;
 * called with auth_lock held. */
static unsigned auth_count(const struct server *s, const struct request *r)
{
	struct auth_view v;

	auth_view(s, &v);
	return authq_count((const unsigned char (*)[AUTHQ_ADDR])v.addr, v.n,
			   s->auth_running ? s->auth_running->addr : NULL,
			   r->addr);
}

/*
 * The login thread: one bcrypt at a time, in the order the logins came
 * but for the turns of addresses.
 * After MHD_resume_connection() the request may be answered and freed at
 * once by a network thread, so nothing here touches it afterwards.
 */
static void *auth_worker(void *arg)
{
	struct server *s = arg;
	unsigned char last[17] = { 0 };

	pthread_mutex_lock(&s->auth_lock);
	for (;;) {
		struct auth_view v;
		struct request *r;
		unsigned k;
		int ok;

		while (!s->auth_stopping && !s->auth_head)
			pthread_cond_wait(&s->auth_cond, &s->auth_lock);
		if (s->auth_stopping)
			break;
		/* Clean logins first, in the order they came; then
		 * addresses take turns (authq_next()): the first login from
		 * the address with the fewest logins waiting goes first, the
		 * last one checked after all others.  So a client that keeps
		 * its share of the queue full delays another by one bcrypt
		 * at most, and a few that fill the queue between them delay
		 * a first login by about one bcrypt each. */
		auth_view(s, &v);
		k = authq_next((const unsigned char (*)[AUTHQ_ADDR])v.addr,
			       v.clean, v.n, last);
		r = v.r[k];
		auth_unlink(s, &v, k);
		memcpy(last, r->addr, sizeof(last));
		s->auth_running = r;
		pthread_mutex_unlock(&s->auth_lock);
		ok = wc_verify(s->o.web, r->user, r->pass);
		pthread_mutex_lock(&s->auth_lock);
		if (!ok && s->user_fail_ns) {
			int u = user_index(s, r->user);

			if (u >= 0)
				s->user_fail_ns[u] = mono_ns();
		}
		r->auth = ok ? AUTH_OK : AUTH_BAD;
		s->auth_running = NULL;
		s->auth_queued--;
		MHD_resume_connection(r->c);
	}
	pthread_mutex_unlock(&s->auth_lock);
	return NULL;
}

/*
 * A full queue makes room for a login from an address with fewer logins
 * in it than another address has: the most recently queued login of the
 * address with the most logins in it (the last one queued among equals) is
 * unlinked and resumed to be answered 429.  So while fewer addresses
 * than AUTH_QUEUE flood, a client at another address gets a place in the
 * queue, and the addresses that fill it get fewer.  A @clean login makes
 * room by dropping any unclean one; clean ones are never dropped.
 * Returns whether a place was made; called with auth_lock held.
 */
static int auth_make_room(struct server *s, unsigned same, int clean)
{
	struct auth_view v;
	struct request *drop;
	int k;

	auth_view(s, &v);
	k = authq_drop((const unsigned char (*)[AUTHQ_ADDR])v.addr, v.clean,
		       v.n, s->auth_running ? s->auth_running->addr : NULL,
		       same, clean);
	if (k < 0)
		return 0;
	drop = v.r[k];
	auth_unlink(s, &v, (unsigned)k);
	drop->auth = AUTH_BUSY;
	s->auth_queued--;
	MHD_resume_connection(drop->c);
	return 1;
}

/*
 * Queue the login of @r and suspend its connection.  Returns 0, or
 * -EBUSY when the queue is full for this address, or in all and no
 * other address has more logins in it (auth_make_room()), -ESHUTDOWN
 * when the server is stopping.  The connection is suspended before the
 * login thread can see it, so that it is never resumed unsuspended.
 */
static int auth_enqueue(struct server *s, struct MHD_Connection *c,
			struct request *r)
{
	unsigned same;

	client_addr(c, r->addr);
	pthread_mutex_lock(&s->auth_lock);
	if (s->auth_stopping) {
		pthread_mutex_unlock(&s->auth_lock);
		return -ESHUTDOWN;
	}
	same = auth_count(s, r);
	r->queued_ns = mono_ns();
	r->clean = user_clean(s, r);
	if (same >= AUTH_QUEUE_PER_ADDR ||
	    (s->auth_queued >= AUTH_QUEUE &&
	     !auth_make_room(s, same, r->clean))) {
		pthread_mutex_unlock(&s->auth_lock);
		return -EBUSY;
	}
	r->c = c;
	r->auth = AUTH_PENDING;
	MHD_suspend_connection(c);
	if (s->auth_tail)
		s->auth_tail->next = r;
	else
		s->auth_head = r;
	s->auth_tail = r;
	s->auth_queued++;
	pthread_cond_signal(&s->auth_cond);
	pthread_mutex_unlock(&s->auth_lock);
	return 0;
}

/*
 * The user and password of an "Authorization: Basic" header, decoded
 * here rather than by libmicrohttpd, which returns C strings: a password
 * sent as "right<NUL>junk" would be checked as "right".  0 with two
 * malloc'ed strings, or -EINVAL when the header is absent, malformed, or
 * holds a NUL byte anywhere.
 */
static int basic_credentials(struct MHD_Connection *c, char **user,
			     char **pass)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn"
				  "opqrstuvwxyz0123456789+/";
	const char *v = NULL, *colon;
	size_t n = 0, i, o = 0;
	unsigned acc = 0, bits = 0;
	char *dec;

	*user = *pass = NULL;
	if (MHD_lookup_connection_value_n(c, MHD_HEADER_KIND, "Authorization",
					  13, &v, &n) != MHD_YES || !v ||
	    n < 6 || strncasecmp(v, "Basic ", 6) != 0)
		return -EINVAL;
	for (i = 6; i < n && v[i] == ' '; i++)
		;
	while (n > i && v[n - 1] == ' ')
		n--;
	dec = malloc(n - i + 1);
	if (!dec)
		return -EINVAL;
	for (; i < n && v[i] != '='; i++) {
		const char *p = v[i] ? strchr(b64, v[i]) : NULL;

		if (!p)
			goto bad;
		acc = (acc << 6) | (unsigned)(p - b64);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			dec[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	for (; i < n; i++)
		if (v[i] != '=')
			goto bad;
	dec[o] = '\0';
	colon = memchr(dec, ':', o);
	if (!colon || memchr(dec, '\0', o))
		goto bad;
	*user = strndup(dec, (size_t)(colon - dec));
	*pass = strdup(colon + 1);
	explicit_bzero(dec, o);
	free(dec);
	if (!*user || !*pass) {
		free(*user);
		free(*pass);
		*user = *pass = NULL;
		return -EINVAL;
	}
	return 0;
bad:
	explicit_bzero(dec, o);
	free(dec);
	return -EINVAL;
}

static const char too_many[] = "Too many password checks waiting: try again\n";

/*
 * The login of request @r: AUTH_OK, AUTH_BAD, or AUTH_PENDING when its
 * connection was suspended to wait for the login thread; *@resp is then
 * a response already queued (429 or 503) when nothing else is to be
 * done.  Once resumed, AUTH_STOP or AUTH_BUSY when it left the queue
 * unchecked (503, 429).
 */
static enum auth_state login(struct server *s, struct MHD_Connection *c,
			     struct request *r, enum MHD_Result *resp)
{
	int rc;

	*resp = MHD_YES;
	if (r->auth != AUTH_UNSEEN)
		return r->auth;
	if (basic_credentials(c, &r->user, &r->pass) < 0)
		return r->auth = AUTH_BAD;
	if (wc_cached(s->o.web, r->user, r->pass))
		return r->auth = AUTH_OK;
	rc = auth_enqueue(s, c, r);
	if (rc == -EBUSY)
		*resp = srv_busy(c, MHD_HTTP_TOO_MANY_REQUESTS, too_many);
	else if (rc < 0)
		*resp = srv_busy(c, MHD_HTTP_SERVICE_UNAVAILABLE, "Stopping\n");
	if (rc < 0)
		r->auth = AUTH_STOP;
	return AUTH_PENDING;
}

/*
 * libmicrohttpd decodes %HH in the path before the handler sees it, and
 * a decoded %00 ends the C string: "/metrics%00.txt" would be served as
 * "/metrics".  A path holding %00 is left as it was sent, and so matches
 * no page (404).
 */
static size_t unescape(void *cls, struct MHD_Connection *c, char *str)
{
	(void)cls;
	(void)c;
	for (const char *p = strchr(str, '%'); p; p = strchr(p + 1, '%'))
		if (p[1] == '0' && p[2] == '0')
			return strlen(str);
	return MHD_http_unescape(str);
}

/*
 * A NUL byte sent as such in the request line ends the path early too
 * ("GET /metrics<NUL>.txt HTTP/1.1").  libmicrohttpd calls this before it
 * touches the path, with the path NUL-terminated where the space before
 * the HTTP version was; the handler then checks that the version starts
 * right after the NUL found here, so a path holding a NUL byte is refused
 * (400).  The request's context starts here.
 */
static void *uri_logged(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct request *r = calloc(1, sizeof(*r));

	(void)cls;
	(void)c;
	if (r) {
		r->raw_uri = uri;
		r->raw_len = strlen(uri);
	}
	return r;
}

/*
 * Whether the request line of @r held a NUL byte in its path: the path
 * seen by uri_logged() ended before the HTTP version, which still lies
 * further in the same line, as libmicrohttpd 0.9 parses it.  (A
 * libmicrohttpd that kept the version elsewhere would have nothing
 * refused here, never a good request: exporter-http's NUL test says so.)
 */
static int raw_nul(const struct server *s, const struct request *r,
		   const char *url, const char *version)
{
	uintptr_t end = (uintptr_t)r->raw_uri + r->raw_len + 1;
	uintptr_t v = (uintptr_t)version;

	return r->raw_uri && (uintptr_t)url == (uintptr_t)r->raw_uri &&
	       v > end && v - end <= s->o.max_request_bytes;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_size, void **req)
{
	struct server *s = cls;
	int is_metrics = strcmp(url, "/metrics") == 0;
	int is_index = strcmp(url, "/") == 0;
	struct request *r = *req;

	(void)upload;
	if (!r)
		return MHD_NO;  /* out of memory in uri_logged() */
	if (!r->started) {
		struct conn *k = conn_of(c);

		/* The request line and headers are in: no deadline while we
		 * answer. */
		if (k) {
			pthread_mutex_lock(&s->conn_lock);
			k->deadline_ns = 0;
			pthread_mutex_unlock(&s->conn_lock);
		}
		r->started = 1;
		if (raw_nul(s, r, url, version))
			r->auth = AUTH_NUL;
		return MHD_YES;
	}
	if (r->auth == AUTH_NUL)
		return srv_reply(c, MHD_HTTP_BAD_REQUEST, "text/plain; charset=utf-8",
			     "Bad request: the path holds a NUL byte\n");
	if (*upload_size) {
		/* A body is read and dropped; libmicrohttpd's memory limit
		 * bounds what one read can hold. */
		*upload_size = 0;
		return MHD_YES;
	}
	if (!is_metrics && !is_index)
		return srv_reply(c, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8",
			     "Not found: try /metrics\n");
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return srv_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED,
			     "text/plain; charset=utf-8",
			     "Method not allowed: GET or HEAD\n");
	if (s->o.web && s->o.web->nusers) {
		enum MHD_Result resp;

		switch (login(s, c, r, &resp)) {
		case AUTH_OK:
			break;
		case AUTH_PENDING:
			return resp;
		case AUTH_STOP:
			return srv_busy(c, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "Stopping\n");
		case AUTH_BUSY:
			return srv_busy(c, MHD_HTTP_TOO_MANY_REQUESTS,
				    too_many);
		default:
			return srv_unauthorized(c);
		}
	}
	if (is_index)
		return srv_reply(c, MHD_HTTP_OK, "text/html; charset=utf-8",
			     srv_index_html);
	return srv_scrape(s, c);
}

/* --- Connections and the watchdog ------------------------------------ */

static void notify_conn(void *cls, struct MHD_Connection *c, void **sock_ctx,
			enum MHD_ConnectionNotificationCode code)
{
	struct server *s = cls;
	struct conn *k;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c,
				MHD_CONNECTION_INFO_CONNECTION_FD);

		k = calloc(1, sizeof(*k));
		if (!k || !ci) {
			free(k);
			*sock_ctx = NULL;
			return;
		}
		k->fd = ci->connect_fd;
		k->deadline_ns = tp_now_ns() +
				 (uint64_t)s->o.request_timeout * 1000000000u;
		pthread_mutex_lock(&s->conn_lock);
		k->next = s->head.next;
		k->prev = &s->head;
		s->head.next->prev = k;
		s->head.next = k;
		/* Full: libmicrohttpd would refuse the next connection.
		 * Make room now: the oldest that is still sending its
		 * request goes (never this new one, nor a request being
		 * answered). */
		if (++s->nconns >= s->o.max_conns)
			for (struct conn *o = s->head.prev; o != k; o = o->prev)
				if (o->deadline_ns) {
					shutdown(o->fd, SHUT_RDWR);
					o->deadline_ns = 0;
					s->conns_evicted++;
					break;
				}
		pthread_mutex_unlock(&s->conn_lock);
		*sock_ctx = k;
		return;
	}
	k = *sock_ctx;
	if (!k)
		return;
	pthread_mutex_lock(&s->conn_lock);
	k->prev->next = k->next;
	k->next->prev = k->prev;
	s->nconns--;
	pthread_mutex_unlock(&s->conn_lock);
	free(k);
	*sock_ctx = NULL;
}

static void completed(void *cls, struct MHD_Connection *c, void **req,
		      enum MHD_RequestTerminationCode code)
{
	struct server *s = cls;
	struct conn *k = conn_of(c);

	(void)code;
	request_free(*req);
	*req = NULL;
	/* The next request on this connection gets its own time. */
	if (k) {
		pthread_mutex_lock(&s->conn_lock);
		k->deadline_ns = tp_now_ns() +
				 (uint64_t)s->o.request_timeout * 1000000000u;
		pthread_mutex_unlock(&s->conn_lock);
	}
}

static void *watchdog(void *arg)
{
	struct server *s = arg;

	pthread_mutex_lock(&s->conn_lock);
	while (!s->stopping) {
		struct timespec ts;
		uint64_t now = tp_now_ns();

		for (struct conn *k = s->head.next; k != &s->head; k = k->next)
			if (k->deadline_ns && now > k->deadline_ns) {
				shutdown(k->fd, SHUT_RDWR);
				k->deadline_ns = 0;
			}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->stop_cond, &s->conn_lock, &ts);
	}
	pthread_mutex_unlock(&s->conn_lock);
	return NULL;
}

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
	if (pthread_create(&s->watchdog, NULL, watchdog, s) != 0) {
		snprintf(err, errlen, "cannot start a thread");
		free(s);
		return NULL;
	}
	s->watchdog_started = 1;
	if (o->web && o->web->nusers) {
		s->user_fail_ns = calloc(o->web->nusers, sizeof(uint64_t));
		if (!s->user_fail_ns ||
		    pthread_create(&s->auth_thread, NULL, auth_worker, s)) {
			snprintf(err, errlen, "cannot start a thread");
			server_stop(s);
			return NULL;
		}
		s->auth_started = 1;
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
			flags, 0, NULL, NULL, handle, s,
			MHD_OPTION_EXTERNAL_LOGGER, srv_mhd_logger, s,
			MHD_OPTION_ARRAY, opts,
			MHD_OPTION_NOTIFY_CONNECTION, notify_conn, s,
			MHD_OPTION_NOTIFY_COMPLETED, completed, s,
			MHD_OPTION_UNESCAPE_CALLBACK, unescape, s,
			MHD_OPTION_URI_LOG_CALLBACK, uri_logged, s,
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
	/* No login waits when libmicrohttpd stops: the queued ones are
	 * answered 503, the one being checked when its bcrypt ends (at most
	 * WC_MAX_COST), and no connection is suspended after this. */
	pthread_mutex_lock(&s->auth_lock);
	s->auth_stopping = 1;
	while (s->auth_head) {
		struct request *r = s->auth_head;

		s->auth_head = r->next;
		r->next = NULL;
		r->auth = AUTH_STOP;
		s->auth_queued--;
		MHD_resume_connection(r->c);
	}
	s->auth_tail = NULL;
	pthread_cond_broadcast(&s->auth_cond);
	pthread_mutex_unlock(&s->auth_lock);
	if (s->auth_started)
		pthread_join(s->auth_thread, NULL);
	if (s->d)
		MHD_stop_daemon(s->d);
	if (s->watchdog_started) {
		pthread_mutex_lock(&s->conn_lock);
		s->stopping = 1;
		pthread_cond_signal(&s->stop_cond);
		pthread_mutex_unlock(&s->conn_lock);
		pthread_join(s->watchdog, NULL);
	}
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
