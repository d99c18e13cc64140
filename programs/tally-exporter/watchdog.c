/*
 * watchdog.c: the time a connection has to send its request, and room in
 * a full connection table.
 *
 * libmicrohttpd's timeout is an idle timeout: a client that sends a byte
 * every second is never idle.  So the server keeps its own list of
 * connections with the time each must have sent its request by, and a
 * watchdog thread shuts down (shutdown(2), not close) the sockets that
 * are late; libmicrohttpd then sees the connection fail and closes it
 * itself.  When the table is full (--web.max-connections), the oldest
 * connection that has not sent a whole request is shut down the same
 * way, so that slow clients holding every place cannot keep a complete
 * request out (tally_exporter_connections_evicted_total).  A connection
 * leaves the list in the CLOSED notification, which libmicrohttpd sends
 * before it closes the socket, so the watchdog never touches a
 * descriptor that was reused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "srv.h"

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* The request line and headers of @c are in: no deadline while the
 * server answers. */
void srv_conn_answering(struct server *s, struct MHD_Connection *c)
{
	struct conn *k = conn_of(c);

	if (k) {
		pthread_mutex_lock(&s->conn_lock);
		k->deadline_ns = 0;
		pthread_mutex_unlock(&s->conn_lock);
	}
}

/* A request of @c was answered: the next one gets its own time. */
void srv_conn_rearm(struct server *s, struct MHD_Connection *c)
{
	struct conn *k = conn_of(c);

	if (k) {
		pthread_mutex_lock(&s->conn_lock);
		k->deadline_ns = tp_now_ns() +
				 (uint64_t)s->o.request_timeout * 1000000000u;
		pthread_mutex_unlock(&s->conn_lock);
	}
}

void srv_notify_conn(void *cls, struct MHD_Connection *c, void **sock_ctx,
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

int srv_watchdog_start(struct server *s, char *err, size_t errlen)
{
	if (pthread_create(&s->watchdog, NULL, watchdog, s) != 0) {
		snprintf(err, errlen, "cannot start a thread");
		return -EAGAIN;
	}
	s->watchdog_started = 1;
	return 0;
}

void srv_watchdog_stop(struct server *s)
{
	if (!s->watchdog_started)
		return;
	pthread_mutex_lock(&s->conn_lock);
	s->stopping = 1;
	pthread_cond_signal(&s->stop_cond);
	pthread_mutex_unlock(&s->conn_lock);
	pthread_join(s->watchdog, NULL);
}
