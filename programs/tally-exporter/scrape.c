/*
 * scrape.c: one scrape of /metrics.  Under the server's scrape lock (two
 * scrapes never index the segments at the same time) it applies
 * $TALLY_RETAIN to the directories at most once a minute, indexes the
 * segments (index.h), logs what it could not read once per change, keeps
 * --aggregate's counts of exited processes (retain.h) and has the
 * exporter's own numbers filled (selfmetrics.h); then it answers with a body written as the
 * client reads it (body.h), in gzip when the client allows it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "body.h"
#include "selfmetrics.h"
#include "srv.h"

static void dir_error(struct server *s, const char *msg)
{
	/* Once per change, not once per scrape. */
	if (strcmp(msg, s->last_dir_error) == 0)
		return;
	snprintf(s->last_dir_error, sizeof(s->last_dir_error), "%s", msg);
	if (msg[0])
		srv_log("cannot read %s", msg);
}

/*
 * The exporter applies $TALLY_RETAIN to its directories as writers do,
 * but at most once a minute: a walk opens every segment, which a scrape
 * every few seconds need not pay each time.
 */
#define EXPIRE_PERIOD_NS (60ull * 1000000000u)

static void expired(const char *path, const char *why, void *arg)
{
	(void)arg;
	srv_log("removed %s: %s", path, why);
}

/*
 * Only a directory's owner may remove its files: a sidecar reading
 * another user's directory (--allow-group, --allow-uid) cannot apply
 * the retention there, and says so once per directory, naming who does.
 */
static void expire(struct server *s, uint64_t now)
{
	if (now < s->next_expire_ns)
		return;
	s->next_expire_ns = now + EXPIRE_PERIOD_NS;
	for (unsigned i = 0; i < (s->o.ndirs ? s->o.ndirs : 1); i++) {
		const char *dir = s->o.ndirs ? s->o.dirs[i] : NULL;
		int rc = tally_dir_expire(dir, TALLY_RETAIN_ENV, expired,
					  NULL);

		if (rc != -EPERM || i >= 64 || (s->retain_told >> i & 1))
			continue;
		s->retain_told |= 1ull << i;
		srv_log("not removing the dead segments of %s (TALLY_RETAIN): "
		      "only the directory's owner may; its writers do when "
		      "they create a zone (and keep one dead incarnation of a "
		      "pid that restarts), or run tallystat --clean as its "
		      "owner", dir ? dir : "the default directory");
	}
}

/*
 * A file skipped by this scrape but not by the one before is logged with
 * the reader's reason, once: a writer started without TALLY_GROUP, whose
 * files this user may not read, is told, not only counted.
 */
static void log_skips(struct server *s, const struct tp_snapshot *snap)
{
	struct tp_strmap now = { 0 };
	struct tp_arena mem = { 0 };

	for (size_t i = 0; i < snap->nskipped; i++) {
		const struct tp_skipped *k = &snap->skipped[i];

		if (k->err != ENOENT &&
		    tp_strmap_get(&s->skip_seen, k->path) == (size_t)-1)
			srv_log("skipping %s: %s", k->path, k->reason);
		tp_strmap_put(&now, tp_arena_strdup(&mem, k->path), 1);
	}
	tp_strmap_free(&s->skip_seen);
	tp_arena_free(&s->skip_mem);
	s->skip_seen = now;
	s->skip_mem = mem;
}

/*
 * An index and its grouping, shared by the bodies of the scrapes that
 * use it (refs, under the scrape lock); freed by the last of them.
 */
struct srv_index {
	struct ex_index ix;
	struct ex_group *g;
	unsigned refs;
	uint64_t made_ns;          /* CLOCK_MONOTONIC when it was complete */
	struct server *s;
};

/*
 * A scrape that begins less than this after another scrape's index was
 * made, while a body still uses it, uses it too: simultaneous scrapes
 * (two Prometheus servers of a pair) then cost one index, and see the
 * same series; each series is still read when its own body writes it.
 */
#define SHARE_NS 1000000000ull

/* The end of a body's text (or of its body): its label clashes join the
 * totals that the next scrapes report, and it lets go of its index. */
static void body_done(const struct ex_result *res, void *arg)
{
	struct srv_index *si = arg;
	struct server *s = si->s;
	int last;

	pthread_mutex_lock(&s->scrape_lock);
	if (res)
		self_count_result(s, res);
	last = --si->refs == 0;
	if (last && s->recent == si)
		s->recent = NULL;
	pthread_mutex_unlock(&s->scrape_lock);
	if (!last)
		return;
	ex_group_free(si->g);
	ex_index_free(&si->ix);
	free(si);
}

static ssize_t body_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	ssize_t n = ex_body_read(cls, buf, max);

	(void)pos;
	/* An error ends the connection: the client sees the body cut
	 * short (chunked encoding without its last chunk). */
	return n > 0 ? n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM :
		       MHD_CONTENT_READER_END_WITH_ERROR;
}

static void body_free(void *cls)
{
	ex_body_free(cls);
}

/*
 * A new index of the segments (the scrape lock held).  The series are
 * read again, without the lock, as the body is written (index.h);
 * --aggregate sums them across processes, so its index is a snapshot of
 * the sums, never shared (the retain is kept scrape by scrape).
 */
static struct srv_index *collect(struct server *s, uint64_t t0)
{
	struct srv_index *si = tp_xcalloc(1, sizeof(*si));
	struct tp_collect_opts co = { 0 };
	struct tp_snapshot raw, agg;
	char errbuf[512];
	int complete;

	co.dirs = s->o.dirs;
	co.ndirs = s->o.ndirs;
	co.open_opts = s->o.open_opts;
	co.order = TP_ORDER_READ; /* expose groups families itself */
	si->s = s;
	expire(s, t0);
	if (s->o.expose.aggregate) {
		memset(&raw, 0, sizeof(raw));
		complete = tp_snapshot_collect(&raw, &co, errbuf,
					       sizeof(errbuf)) == 0;
		log_skips(s, &raw);
		/* The raw snapshot becomes the retain's "last": not freed
		 * here. */
		ex_retain_update(&s->retain, &raw, complete);
		tp_snapshot_aggregate_with(&raw, s->retain.gone,
					   s->retain.ngone, &agg);
		ex_index_of_snapshot(&si->ix, &agg);
	} else {
		ex_index_collect(&si->ix, &co, errbuf, sizeof(errbuf));
		log_skips(s, &si->ix.snap);
		s->recent = si;
	}
	dir_error(s, errbuf);
	si->g = ex_group_make(&si->ix, &s->o.expose);
	si->made_ns = tp_now_ns();
	return si;
}

/*
 * The index of this scrape, and @self filled, under the scrape lock (two
 * scrapes never index the segments at the same time, and --aggregate's
 * retain is kept between them).
 */
static struct srv_index *take_index(struct server *s, struct ex_self *self,
				    uint64_t *t0)
{
	struct srv_index *si;

	pthread_mutex_lock(&s->scrape_lock);
	*t0 = tp_now_ns();
	si = s->recent;
	if (si && !s->o.expose.aggregate && *t0 - si->made_ns < SHARE_NS)
		si->refs++;
	else
		(si = collect(s, *t0))->refs = 1;
	self_count_dead(self, &si->ix.snap);
	self_fill(self, s, &si->ix.snap, *t0, tp_now_ns());
	pthread_mutex_unlock(&s->scrape_lock);
	return si;
}

/*
 * The body is written as libmicrohttpd sends it (body.h), after the
 * scrape lock is released: a client that reads slowly holds its own
 * body, not the other scrapes.  Its length is not known beforehand:
 * HTTP/1.1 sends it chunked, HTTP/1.0 ends it by closing the connection.
 */
enum MHD_Result srv_scrape(struct server *s, struct MHD_Connection *c)
{
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							 "Accept");
	const char *ae = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     "Accept-Encoding");
	enum ex_format f = server_negotiate(accept);
	struct ex_self self = { 0 };
	struct srv_index *si;
	struct ex_body *body;
	struct MHD_Response *r;
	enum MHD_Result ret;
	uint64_t t0;

	si = take_index(s, &self, &t0);
	body = ex_body_new(&si->ix, si->g, &s->o.expose, f, &self, t0,
			   server_gzip_ok(ae), body_done, si);
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, EX_BODY_CHUNK,
					      body_read, body, body_free);
	if (!r) {
		ex_body_free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", f == EX_OPENMETRICS ?
				EX_CT_OPENMETRICS : EX_CT_TEXT);
	if (ex_body_gzip(body))
		MHD_add_response_header(r, "Content-Encoding", "gzip");
	MHD_add_response_header(r, "Vary", "Accept, Accept-Encoding");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}
