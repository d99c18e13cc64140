/*
 * auth.c: the login queue of tally-exporter's server, and the Basic
 * credentials it checks.  The order of the queue is authq.c's; the cache
 * of recent successes and the bcrypt check are authcache.c's.
 *
 * Passwords are checked off the network threads: a login that is not
 * among the recent successes (auth_cached()) suspends its connection and
 * joins a short queue that one thread works through with bcrypt
 * (auth_verify()), then resumes it.  So a wrong password holds no network
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
 * the first login of another user by one bcrypt at most.  At stop the
 * queue is emptied and its connections resumed (libmicrohttpd must not
 * stop with suspended connections), and the thread finishes at most the
 * one bcrypt it is in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "authq.h"
#include "auth.h"
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
		ok = auth_verify(s->o.web, r->user, r->pass);
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

const char srv_too_many[] = "Too many password checks waiting: try again\n";

/*
 * The login of request @r: AUTH_OK, AUTH_BAD, or AUTH_PENDING when its
 * connection was suspended to wait for the login thread; *@resp is then
 * a response already queued (429 or 503) when nothing else is to be
 * done.  Once resumed, AUTH_STOP or AUTH_BUSY when it left the queue
 * unchecked (503, 429).
 */
enum auth_state srv_login(struct server *s, struct MHD_Connection *c,
			  struct request *r, enum MHD_Result *resp)
{
	int rc;

	*resp = MHD_YES;
	if (r->auth != AUTH_UNSEEN)
		return r->auth;
	if (basic_credentials(c, &r->user, &r->pass) < 0)
		return r->auth = AUTH_BAD;
	if (auth_cached(s->o.web, r->user, r->pass))
		return r->auth = AUTH_OK;
	rc = auth_enqueue(s, c, r);
	if (rc == -EBUSY)
		*resp = srv_busy(c, MHD_HTTP_TOO_MANY_REQUESTS, srv_too_many);
	else if (rc < 0)
		*resp = srv_busy(c, MHD_HTTP_SERVICE_UNAVAILABLE, "Stopping\n");
	if (rc < 0)
		r->auth = AUTH_STOP;
	return AUTH_PENDING;
}

int srv_auth_start(struct server *s, char *err, size_t errlen)
{
	const struct webconfig *web = s->o.web;

	if (!web || !web->nusers)
		return 0;
	s->user_fail_ns = calloc(web->nusers, sizeof(uint64_t));
	if (!s->user_fail_ns ||
	    pthread_create(&s->auth_thread, NULL, auth_worker, s)) {
		snprintf(err, errlen, "cannot start a thread");
		return -EAGAIN;
	}
	s->auth_started = 1;
	return 0;
}

void srv_auth_stop(struct server *s)
{
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
}
