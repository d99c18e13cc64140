/*
 * listen.c: parsing --listen and binding its socket (listen.h).
 *
 * The exporter binds the socket itself and hands it to libmicrohttpd, so
 * that "address already in use" and a bad address are one clear line,
 * and so that tests can ask for port 0 and read the port chosen.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen.h"

int listen_parse(const char *addr, char *host, size_t hostlen,
		 unsigned *port, char *err, size_t errlen)
{
	const char *colon, *p;
	char *end;
	unsigned long v;
	size_t hl;

	if (addr[0] == '[') {
		const char *close = strchr(addr, ']');

		if (!close || close[1] != ':') {
			snprintf(err, errlen, "bad --listen '%s': expected "
				 "[IPV6]:PORT", addr);
			return -EINVAL;
		}
		hl = (size_t)(close - addr - 1);
		p = addr + 1;
		colon = close + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon || memchr(addr, ':', (size_t)(colon - addr))) {
			snprintf(err, errlen, "bad --listen '%s': expected "
				 "HOST:PORT, [IPV6]:PORT or :PORT", addr);
			return -EINVAL;
		}
		hl = (size_t)(colon - addr);
		p = addr;
	}
	if (hl >= hostlen) {
		snprintf(err, errlen, "bad --listen '%s': host too long", addr);
		return -EINVAL;
	}
	memcpy(host, p, hl);
	host[hl] = '\0';
	errno = 0;
	v = strtoul(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || colon[1] == '-' ||
	    colon[1] == '+' || v > 65535) {
		snprintf(err, errlen, "bad --listen '%s': the port must be 0 "
			 "to 65535", addr);
		return -EINVAL;
	}
	*port = (unsigned)v;
	return 0;
}

int listen_open(const char *addr, char *err, size_t errlen, char *shown,
		size_t shownlen)
{
	struct addrinfo hints = { 0 }, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[256], portstr[8], h[INET6_ADDRSTRLEN];
	unsigned port;
	int fd, rc, one = 1, e;

	if ((rc = listen_parse(addr, host, sizeof(host), &port, err,
			       errlen)) < 0)
		return rc;
	snprintf(portstr, sizeof(portstr), "%u", port);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "bad --listen '%s': %s", addr,
			 gai_strerror(rc));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", addr,
			 strerror(e));
		freeaddrinfo(ai);
		return -e;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
	    listen(fd, 128) < 0) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", addr,
			 e == EADDRINUSE ? "address already in use" :
			 strerror(e));
		close(fd);
		freeaddrinfo(ai);
		return -e;
	}
	freeaddrinfo(ai);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &s6->sin6_addr, h, sizeof(h));
			snprintf(shown, shownlen, "[%s]:%u", h,
				 ntohs(s6->sin6_port));
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &s4->sin_addr, h, sizeof(h));
			snprintf(shown, shownlen, "%s:%u", h,
				 ntohs(s4->sin_port));
		}
	} else {
		snprintf(shown, shownlen, "%s", addr);
	}
	return fd;
}
