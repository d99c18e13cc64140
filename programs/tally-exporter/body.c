/*
 * body.c: the body of a scrape, written as the client reads it (body.h).
 *
 * Text is produced a chunk at a time into @text; a plain body hands it
 * out as it is, a gzip body deflates it (compress.c) into @zout and
 * hands that out.
 * Once the stream has written its last series, what only the writing
 * needed is let go at once (the stream freed, the index handed back
 * through @done), before the last chunks are sent.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "srv.h"

#define ZOUT_CAP (64u << 10)

struct ex_body {
	struct ex_stream *st;     /* NULL once the text is whole */
	ex_body_done_fn done;
	void *arg;
	struct tp_buf text;       /* the chunk of text at hand */
	int gz, zdone;
	z_stream z;
	unsigned char *zout;
	const char *src;          /* what is being handed out: text or zout */
	size_t pos, avail;
};

struct ex_body *ex_body_new(const struct ex_index *ix,
			    const struct ex_group *g,
			    const struct ex_config *c, enum ex_format f,
			    const struct ex_self *self, uint64_t t0_ns, int gz,
			    ex_body_done_fn done, void *arg)
{
	struct ex_body *b = tp_xcalloc(1, sizeof(*b));

	b->st = ex_stream_open(ix, g, c, f, self, t0_ns);
	b->done = done;
	b->arg = arg;
	if (gz && srv_gzip_start(&b->z) == 0) {
		b->gz = 1;
		b->zout = tp_xmalloc(ZOUT_CAP);
	}
	return b;
}

int ex_body_gzip(const struct ex_body *b)
{
	return b->gz;
}

/* The next chunk of text into b->text; at its end, the numbers to the
 * caller and the writing's memory freed. */
static void next_text(struct ex_body *b)
{
	struct ex_result res;

	tp_buf_reset(&b->text);
	if (!b->st || ex_stream_fill(b->st, &b->text, EX_BODY_CHUNK))
		return;
	ex_stream_close(b->st, &res);
	b->st = NULL;
	if (b->done)
		b->done(&res, b->arg);
}

/* More bytes to hand out; 0 at the end of the body, -1 on a zlib
 * failure. */
static int refill(struct ex_body *b)
{
	ssize_t got;

	b->pos = b->avail = 0;
	if (!b->gz) {
		if (!b->st)
			return 0;
		next_text(b);
		b->src = tp_buf_str(&b->text);
		b->avail = b->text.len;
		return 1;
	}
	while (!b->zdone && !b->avail) {
		if (!b->z.avail_in) {
			next_text(b);
			b->z.next_in = (Bytef *)b->text.p;
			b->z.avail_in = (uInt)b->text.len;
		}
		/* Text ends when the stream does: then finish. */
		got = srv_gzip_step(&b->z, b->zout, ZOUT_CAP, !b->st,
				    &b->zdone);
		if (got < 0)
			return -1;
		b->src = (const char *)b->zout;
		b->avail = (size_t)got;
	}
	return b->avail ? 1 : 0;
}

ssize_t ex_body_read(struct ex_body *b, char *buf, size_t max)
{
	size_t n;

	while (b->pos == b->avail) {
		int rc = refill(b);

		if (rc <= 0)
			return rc;
	}
	n = b->avail - b->pos < max ? b->avail - b->pos : max;
	memcpy(buf, b->src + b->pos, n);
	b->pos += n;
	return (ssize_t)n;
}

void ex_body_free(struct ex_body *b)
{
	if (!b)
		return;
	if (b->st) {
		ex_stream_close(b->st, NULL);
		if (b->done)
			b->done(NULL, b->arg);
	}
	tp_buf_free(&b->text);
	if (b->gz)
		srv_gzip_end(&b->z);
	free(b->zout);
	free(b);
}
