/*
 * compress.c: gzip of a scrape's body, for clients whose Accept-Encoding
 * allows it (server_gzip_ok()), compressed as the body is written
 * (body.h): zlib's deflate takes the text a chunk at a time, so that no
 * compressed copy of the whole body is ever held.
 */
#define _GNU_SOURCE
#include <string.h>

#include "srv.h"

int srv_gzip_start(z_stream *z)
{
	memset(z, 0, sizeof(*z));
	/* Level 1: a scrape is compressed once and read once; the fastest
	 * level keeps a large scrape within its time, at about 10x
	 * compression of this repetitive text. */
	return deflateInit2(z, 1, Z_DEFLATED, 15 + 16, 8,
			    Z_DEFAULT_STRATEGY) == Z_OK ? 0 : -1;
}

ssize_t srv_gzip_step(z_stream *z, unsigned char *out, size_t cap, int last,
		      int *done)
{
	int rc;

	z->next_out = out;
	z->avail_out = (uInt)cap;
	rc = deflate(z, last ? Z_FINISH : Z_NO_FLUSH);
	if (rc == Z_STREAM_END)
		*done = 1;
	else if (rc != Z_OK && rc != Z_BUF_ERROR)
		return -1;
	return (ssize_t)(cap - z->avail_out);
}

void srv_gzip_end(z_stream *z)
{
	deflateEnd(z);
}
