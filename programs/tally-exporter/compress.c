/*
 * compress.c: gzip of a scrape's body, for clients whose Accept-Encoding
 * allows it (server_gzip_ok()).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "srv.h"

/* gzip @in into a new malloc'ed buffer; NULL on failure. */
char *srv_gzip(const char *in, size_t n, size_t *outn)
{
	z_stream z;
	char *out;
	size_t cap;

	memset(&z, 0, sizeof(z));
	/* Level 1: a scrape is compressed once and read once; the fastest
	 * level keeps a 100,000-series scrape within its time, at about
	 * 10x compression of this repetitive text. */
	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	cap = deflateBound(&z, n);
	out = malloc(cap);
	if (!out) {
		deflateEnd(&z);
		return NULL;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&z);
		free(out);
		return NULL;
	}
	*outn = z.total_out;
	deflateEnd(&z);
	return out;
}
