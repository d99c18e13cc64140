/*
 * respond.c: the server's short answers that are not a scrape: errors
 * (400, 404, 405, 500), 401 asking for Basic credentials, 429 and 503
 * with Retry-After, and the index page.
 */
#define _GNU_SOURCE
#include <string.h>

#include "srv.h"

enum MHD_Result srv_reply(struct MHD_Connection *c, unsigned status,
			  const char *ctype, const char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", ctype);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

const char srv_index_html[] =
	"<!DOCTYPE html>\n<html><head><title>tally-exporter</title></head>\n"
	"<body><h1>tally-exporter</h1>\n"
	"<p>Counters, gauges and histograms of the tally segments of this "
	"host.</p>\n<p><a href=\"/metrics\">Metrics</a></p>\n</body></html>\n";


enum MHD_Result srv_unauthorized(struct MHD_Connection *c)
{
	static const char body[] = "Unauthorized\n";
	struct MHD_Response *r = MHD_create_response_from_buffer(
		sizeof(body) - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
	ret = MHD_queue_basic_auth_fail_response(c, "tally-exporter", r);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result srv_busy(struct MHD_Connection *c, unsigned status,
			 const char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
	MHD_add_response_header(r, "Retry-After", "1");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}
