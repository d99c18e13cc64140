/*
 * route.c: a request's way through tally-exporter's server.  GET or HEAD
 * of /metrics scrapes (scrape.c), / is a small HTML page, every other
 * path is 404 and every other method 405; with users in the web config,
 * the login (auth.c) comes first.  No request path ever reaches the file
 * system.  A request's state (struct request) starts when libmicrohttpd
 * has its path and ends when the request is completed; a path holding a
 * NUL byte, sent as such or as %00, never matches a page.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "srv.h"

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

/*
 * libmicrohttpd decodes %HH in the path before the handler sees it, and
 * a decoded %00 ends the C string: "/metrics%00.txt" would be served as
 * "/metrics".  A path holding %00 is left as it was sent, and so matches
 * no page (404).
 */
size_t srv_unescape(void *cls, struct MHD_Connection *c, char *str)
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
void *srv_uri_logged(void *cls, const char *uri, struct MHD_Connection *c)
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
 * seen by srv_uri_logged() ended before the HTTP version, which still lies
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

enum MHD_Result srv_handle(void *cls, struct MHD_Connection *c,
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
		return MHD_NO;  /* out of memory in srv_uri_logged() */
	if (!r->started) {
		srv_conn_answering(s, c);
		r->started = 1;
		if (raw_nul(s, r, url, version))
			r->auth = AUTH_NUL;
		return MHD_YES;
	}
	if (r->auth == AUTH_NUL)
		return srv_reply(c, MHD_HTTP_BAD_REQUEST,
				 "text/plain; charset=utf-8",
				 "Bad request: the path holds a NUL byte\n");
	if (*upload_size) {
		/* A body is read and dropped; libmicrohttpd's memory limit
		 * bounds what one read can hold. */
		*upload_size = 0;
		return MHD_YES;
	}
	if (!is_metrics && !is_index)
		return srv_reply(c, MHD_HTTP_NOT_FOUND,
				 "text/plain; charset=utf-8",
				 "Not found: try /metrics\n");
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return srv_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				 "text/plain; charset=utf-8",
				 "Method not allowed: GET or HEAD\n");
	if (s->o.web && s->o.web->nusers) {
		enum MHD_Result resp;

		switch (srv_login(s, c, r, &resp)) {
		case AUTH_OK:
			break;
		case AUTH_PENDING:
			return resp;
		case AUTH_STOP:
			return srv_busy(c, MHD_HTTP_SERVICE_UNAVAILABLE,
					"Stopping\n");
		case AUTH_BUSY:
			return srv_busy(c, MHD_HTTP_TOO_MANY_REQUESTS,
					srv_too_many);
		default:
			return srv_unauthorized(c);
		}
	}
	if (is_index)
		return srv_reply(c, MHD_HTTP_OK, "text/html; charset=utf-8",
				 srv_index_html);
	return srv_scrape(s, c);
}

void srv_completed(void *cls, struct MHD_Connection *c, void **req,
		   enum MHD_RequestTerminationCode code)
{
	struct server *s = cls;

	(void)code;
	request_free(*req);
	*req = NULL;
	srv_conn_rearm(s, c);
}
