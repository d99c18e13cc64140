/*
 * body.h: the body of a scrape, written as the client reads it.
 *
 * A body writes the index of its scrape (index.h: where each series is,
 * to read it again) with expose.h's stream, a chunk of
 * EX_BODY_CHUNK bytes at a time, compressed on the way by zlib's deflate
 * when the client accepts gzip.  So the memory of a response is its
 * index and two chunks, never the whole text of the scrape nor a
 * compressed copy of it, and the bytes are those of the exposition of
 * the same series (gzip decompressed: the same text).  The server hands
 * ex_body_read() to libmicrohttpd, which calls it when the client's
 * socket can take more: a slow client slows its own body only.
 *
 * A body is read by one thread at a time (libmicrohttpd reads a
 * connection's response from that connection's thread); different bodies
 * are independent.
 */
#ifndef TALLY_EXPORTER_BODY_H
#define TALLY_EXPORTER_BODY_H

#include <stddef.h>
#include <sys/types.h>

#include "expose.h"
#include "index.h"

/* The text written between two reads, at most (a series' samples are
 * never split, so a chunk may pass it by one series). */
#define EX_BODY_CHUNK (64u << 10)

struct ex_body;

/* Called once: when the last byte of the text has been produced, with
 * the numbers of what was written, or when the body is freed before
 * (the client went away), with NULL.  From then on the body no longer
 * uses its index and group. */
typedef void (*ex_body_done_fn)(const struct ex_result *res, void *arg);

/*
 * ex_body_new: the body of @ix grouped as @g (NULL: the body groups it
 * itself), in format @f; gzip-compressed when @gz and zlib could start.
 * @ix and @g must stay until @done is called, @c until the body is
 * freed.  Never NULL (out of memory is fatal, strbuf.h).
 */
struct ex_body *ex_body_new(const struct ex_index *ix,
			    const struct ex_group *g,
			    const struct ex_config *c, enum ex_format f,
			    const struct ex_self *self, uint64_t t0_ns, int gz,
			    ex_body_done_fn done, void *arg);

/* ex_body_gzip: 1 when the body is gzip-compressed. */
int ex_body_gzip(const struct ex_body *b);

/*
 * ex_body_read: the next bytes of the body, at most @max (> 0), into
 * @buf.  Return: their number, 0 at the end of the body, or -1 when zlib
 * failed (the body cannot go on: the client sees it cut short).
 */
ssize_t ex_body_read(struct ex_body *b, char *buf, size_t max);

/* ex_body_free: release @b and what it still holds (NULL: nothing). */
void ex_body_free(struct ex_body *b);

#endif /* TALLY_EXPORTER_BODY_H */
