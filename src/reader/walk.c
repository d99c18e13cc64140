/*
 * walk.c: the series of a segment, with their values.
 *
 * A pass over the series goes in batches of BATCH records:
 *   1. copy the records (pread);
 *   2. read the chunks holding their values (lseek SEEK_DATA/SEEK_HOLE to
 *      find the pages that exist, pread of those pages only);
 *   3. copy the records again, and report a series only if both copies
 *      are equal with an even seq and the "live" state.
 * A series removed before step 2 finished changed its record (seq), so
 * the values of a reused block are never reported under the old name.
 * A batch of chosen records (select.c) reads the same way, but only the
 * records asked for (and the short gaps between them), computes values
 * for those only, and passes them on in the caller's order: the chunk
 * pages that scattered series share are read once per batch, not once
 * per series.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tally/metrics.h"

#include "reader/segment.h"

#define WORDS_PER_PAGE (TALLY__PAGE / 8u)
/* emit(): a per-process series that was not passed on (yet). */
#define PG_HELD INT32_MIN

/* --- Metric records ---------------------------------------------------- */

static int nul_within(const char *s, size_t cap, size_t len)
{
	return len < cap && s[len] == 0 && strlen(s) == len;
}

static unsigned mrec_slots(const struct tally__metric_rec *f)
{
	if (f->type == TALLY__TYPE_PGAUGE)
		return 2; /* the value, the time of its last set */
	if (f->type == TALLY__TYPE_FCOUNTER)
		return 2; /* whole units, billionths */
	if (f->type == TALLY__TYPE_CHISTO) /* the sum's two, the buckets */
		return 3u + tally__metric_tail(f)->nbounds;
	if (f->kind == TALLY__KIND_HISTOGRAM)
		return 1u + ((unsigned)(f->max_bits - f->sub_bits + 1) << f->sub_bits);
	if (f->kind == TALLY__KIND_GAUGE)
		return 2; /* increments, decrements */
	return 1;
}

/* A metric record that is stable (even seq) must be well formed. */
static int check_mrec(struct tally_seg *s, uint32_t i,
		      const struct tally__metric_rec *f)
{
	if (f->state != 1 || f->kind < TALLY__KIND_COUNTER ||
	    f->kind > TALLY__KIND_HISTOGRAM || f->mode > TALLY_ADAPTIVE)
		return tally__seg_corrupt(s, "metric record %u: bad state, kind or mode", i);
	if (f->vtype > TALLY__VT_FLOAT64 ||
	    (f->vtype == TALLY__VT_FLOAT64 &&
	     (f->kind != TALLY__KIND_GAUGE_SET || f->mode != TALLY_SHARED)))
		return tally__seg_corrupt(s, "metric record %u: value type %u on a "
					  "kind %u", i, f->vtype, f->kind);
	if (!nul_within(f->name, sizeof(f->name), f->name_len) ||
	    !tally__valid_metric_name(f->name))
		return tally__seg_corrupt(s, "metric record %u: bad metric name", i);
	if (!nul_within(f->unit, sizeof(f->unit), f->unit_len) ||
	    !tally__valid_unit(f->unit))
		return tally__seg_corrupt(s, "metric record %u: bad unit", i);
	/* A type newer than this reader: its series are skipped
	 * (compute_batch), the record is checked as its kind says. */
	if ((f->type == TALLY__TYPE_PGAUGE &&
	     (f->kind != TALLY__KIND_GAUGE_SET || f->vtype != TALLY__VT_FLOAT64 ||
	      tally__metric_tail(f)->combine > TALLY__COMBINE_MAX_MODE)) ||
	    ((f->type == TALLY__TYPE_FCOUNTER || f->type == TALLY__TYPE_CHISTO) &&
	     (f->kind != TALLY__KIND_COUNTER || f->vtype != TALLY__VT_INT64)) ||
	    ((f->type == TALLY__TYPE_INFO || f->type == TALLY__TYPE_ENUM) &&
	     (f->kind != TALLY__KIND_GAUGE_SET || f->vtype != TALLY__VT_FLOAT64)))
		return tally__seg_corrupt(s, "metric record %u: type %u on a kind %u",
					  i, f->type, f->kind);
	if (f->type == TALLY__TYPE_CHISTO) {
		const struct tally__metric_tail *t = tally__metric_tail(f);
		double b[TALLY__BOUNDS_MAX];

		memcpy(b, tally__metric_bounds(f)->bound, sizeof(b));
		if (t->nbounds > TALLY__BOUNDS_MAX)
			return tally__seg_corrupt(s, "metric record %u: %u bucket "
						  "bounds", i, t->nbounds);
		for (unsigned k = 0; k < t->nbounds; k++)
			if (!__builtin_isfinite(b[k]) ||
			    (k && !(b[k] > b[k - 1])))
				return tally__seg_corrupt(s, "metric record %u: bucket "
							  "bounds not finite "
							  "and increasing", i);
	}
	if (!nul_within(f->help, tally__help_room(f), f->help_len) ||
	    !tally__valid_utf8(f->help, f->help_len))
		return tally__seg_corrupt(s, "metric record %u: bad help text", i);
	if (f->kind == TALLY__KIND_HISTOGRAM) {
		if (f->sub_bits < 1 || f->sub_bits > 7 ||
		    f->max_bits <= f->sub_bits || f->max_bits > 63 ||
		    mrec_slots(f) > TALLY_BLOCK_MAX_SLOTS)
			return tally__seg_corrupt(s, "metric record %u: bad histogram layout", i);
	} else if (f->sub_bits || f->max_bits) {
		return tally__seg_corrupt(s, "metric record %u: histogram bits on a %u", i,
			       f->kind);
	}
	return 0;
}

/*
 * The suffixes that tally 0.3's Python package gave the series of its
 * metrics (the _encoding.py of that release; the package writes none
 * now): fractions in millionths, buckets that are not cumulative,
 * per-process gauges told by a pid label, which only that package
 * decoded.  Found in a zone older than
 * format 2.6 (0.3 made no other), they would be shown as garbage; such a
 * zone is refused instead.  A C program's own names with colons (a
 * recording rule's level:metric:operations) end otherwise.
 */
static const char *const py03_suffixes[] = {
	":frac_u", ":bucket", ":set_ns", ":gauge", ":summary_sum", ":info",
	":info_keys", ":enum", ":gauge_all", ":gauge_liveall", ":gauge_sum",
	":gauge_livesum", ":gauge_max", ":gauge_livemax", ":gauge_min",
	":gauge_livemin", ":gauge_mostrecent", ":gauge_livemostrecent",
};

static int py03_name(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(py03_suffixes) / sizeof(*py03_suffixes);
	     i++) {
		size_t n = strlen(py03_suffixes[i]);

		if (len > n && !memcmp(name + len - n, py03_suffixes[i], n))
			return 1;
	}
	return 0;
}

/* Read the metric records [nmrecs, want), all published (want is at most
 * the live metric_count), and check them. */
static int load_mrecs(struct tally_seg *s, uint32_t want)
{
	struct tally__metric_rec *f, again;
	uint32_t i;

	if (want <= s->nmrecs)
		return 0;
	if (s->nmrecs == 0)
		s->bad_metrics = 0;
	f = realloc(s->mrecs, want * sizeof(*f));
	if (!f)
		return tally__seg_no_memory(s);
	s->mrecs = f;
	for (i = s->nmrecs; i < want; i++) {
		uint64_t off = s->hdr.metric_off + (uint64_t)i * sizeof(*f);

		int settled = 0;

		for (int tries = 0;; tries++) {
			int rc = tally__seg_read_at(s, &f[i], sizeof(*f), off);

			if (rc == 0)
				rc = tally__seg_read_at(s, &again,
							sizeof(again), off);
			if (rc < 0)
				return rc;
			if (!(atomic_load_explicit(&f[i].seq,
						   memory_order_relaxed) & 1) &&
			    !memcmp(&f[i], &again, sizeof(again)))
				break;
			/* Being rewritten: a live writer is done in a few
			 * stores; a dead one never is, and must not hide
			 * this metric and every later one. */
			if (tries == 3) {
				/* Its other fields never change once it
				 * is published; a flag is one byte, old or
				 * new; of the texts, the whole part. */
				f[i].unit_len = tally__text_settle(
					f[i].unit, sizeof(f[i].unit), 1);
				f[i].help_len = tally__text_settle(
					f[i].help, tally__help_room(&f[i]), 0);
				settled = 1;
				break;
			}
			sched_yield();
		}
		if (check_mrec(s, i, &f[i]) < 0) {
			/* Corrupt (from any participant of a shared zone,
			 * or a crash), or unreadable while it is rewritten:
			 * it and its series are skipped (state 0 in this
			 * copy), the rest is read. */
			if (!settled && s->bad_metrics++ == 0)
				snprintf(s->bad_metric_msg,
					 sizeof(s->bad_metric_msg), "%s",
					 tally_errmsg());
			f[i].state = 0;
			tally__ok();
		} else if (s->hdr.minor < TALLY__FMT_MINOR_TYPES &&
			   py03_name(f[i].name, f[i].name_len)) {
			return tally__fail(EPROTONOSUPPORT, "%s: written by "
					   "tally 0.3's Python package (series "
					   "%.60s), whose encoded names only "
					   "it read; restart the service with "
					   "tally 0.4", s->path, f[i].name);
		}
	}
	s->nmrecs = i;
	return 0;
}

/* --- Chunks ------------------------------------------------------------ */

struct run_arg {
	struct tally_seg *s;
	struct chunk_cache *c;
	uint64_t base;
	int err;
};

static void load_run(uint64_t off, uint64_t len, void *arg)
{
	struct run_arg *a = arg;
	struct chunk_cache *c = a->c;
	uint32_t first = (uint32_t)((off - a->base) / TALLY__PAGE);
	uint32_t n = (uint32_t)((len + TALLY__PAGE - 1) / TALLY__PAGE);

	if (a->err)
		return;
	if (first + n > a->s->chunk_pages || c->npresent + n > a->s->chunk_pages) {
		a->err = tally__seg_corrupt(a->s, "chunk pages out of range");
		return;
	}
	if (c->npresent + n > c->cap) {
		uint32_t cap = c->cap ? c->cap : 8;
		char *p;

		while (cap < c->npresent + n)
			cap *= 2;
		p = realloc(c->pages, (size_t)cap * TALLY__PAGE);
		if (!p) {
			a->err = tally__seg_no_memory(a->s);
			return;
		}
		c->pages = p;
		c->cap = cap;
	}
	/* A page that vanished since lseek reads as zeros: pread of a hole
	 * allocates nothing. */
	a->err = tally__seg_read_at(a->s, c->pages +
				    (size_t)c->npresent * TALLY__PAGE,
				    (size_t)n * TALLY__PAGE, off);
	if (a->err < 0)
		return;
	for (uint32_t i = 0; i < n; i++) {
		c->pagemap[first + i] = c->npresent;
		c->present[c->npresent++] = first + i;
	}
}

/*
 * Read chunk @chunk into @c.  Returns 0 or the negative errno of the
 * step that failed, never errno: the page walk makes system calls after
 * a failed allocation, and out of memory must not read as another error.
 */
static int load_into(struct tally_seg *s, struct chunk_cache *c,
		     uint64_t chunk)
{
	struct run_arg a = { s, c, 0, 0 };
	int rc;

	if (c->chunk == chunk)
		return 0;
	if (!c->pagemap) {
		c->pagemap = malloc(s->chunk_pages * sizeof(uint32_t));
		c->present = malloc(s->chunk_pages * sizeof(uint32_t));
		if (!c->pagemap || !c->present)
			return tally__seg_no_memory(s);
		memset(c->pagemap, 0xff, s->chunk_pages * sizeof(uint32_t));
		c->npresent = 0;
	}
	for (uint32_t i = 0; i < c->npresent; i++)
		c->pagemap[c->present[i]] = NO_PAGE;
	c->npresent = 0;
	c->chunk = UINT64_MAX;
	a.base = s->hdr.chunks_off + chunk * s->chunk_bytes;
	rc = tally__resident_runs(s->fd, a.base, s->chunk_bytes, load_run, &a);
	if (a.err < 0)
		return a.err;
	if (rc < 0)
		return tally__fail(-rc, "%s: cannot find the pages of chunk "
				   "%llu: %s", s->path,
				   (unsigned long long)chunk, strerror(-rc));
	c->chunk = chunk;
	return 0;
}

/* Chunk @chunk as read in this batch, in *@out; 0 or -errno. */
static int load_chunk(struct tally_seg *s, uint64_t chunk,
		      const struct chunk_cache **out)
{
	struct chunk_cache *c = &s->cache[chunk % CACHE];

	*out = c;
	if (c->chunk == chunk)
		return 0;
	/* A copy read later than this one would not be later any more. */
	s->cache[CACHE + chunk % CACHE].chunk = UINT64_MAX;
	return load_into(s, c, chunk);
}

/* Chunk @chunk read again, after load_chunk() read it; 0 or -errno. */
static int load_chunk_later(struct tally_seg *s, uint64_t chunk,
			    const struct chunk_cache **out)
{
	*out = &s->cache[CACHE + chunk % CACHE];
	return load_into(s, &s->cache[CACHE + chunk % CACHE], chunk);
}

static int64_t word(const struct chunk_cache *c, uint32_t pg, unsigned slot)
{
	uint32_t at = c->pagemap[pg];

	if (at == NO_PAGE)
		return 0;
	return ((const int64_t *)(c->pages + (size_t)at * TALLY__PAGE))[slot];
}

/* The value of slot @slot of a chunk for @mode (see tally__fold). */
static int64_t slot_value(struct tally_seg *s, const struct chunk_cache *c,
			  unsigned mode, unsigned slot, int64_t *percpu)
{
	uint64_t sum = 0, base = 0;

	for (uint32_t i = 0; i < c->npresent; i++) {
		uint32_t pg = c->present[i];

		tally__fold(pg, (uint64_t)word(c, pg, slot), mode,
			    s->hdr.nslabs, s->hdr.nnodes, &sum, &base, percpu);
	}
	return (int64_t)(sum - base);
}

/*
 * A gauge's value: its decrements (slot + 1, a sum that only falls) as
 * read in @c, plus its increments (@slot, a sum that only grows) from a
 * copy of the chunk read after @c.  Each copy of the decrements was read
 * before the end of @c's read, at time t, and so is no lower than it was
 * at t; each copy of the increments was read after t, and so is no lower
 * than it was at t either: the value is never below the gauge's value at
 * t, and errs upward by the increments made during the reads only.
 */
static int gauge_value(struct tally_seg *s, const struct chunk_cache *c,
		       unsigned mode, uint64_t chunk, unsigned slot,
		       int64_t *percpu, int64_t *value)
{
	const struct chunk_cache *later;
	int64_t dec, inc;
	int64_t *dec_cpu = NULL;
	unsigned n = s->hdr.nslabs;
	int rc;

	if (percpu) {
		dec_cpu = percpu + n; /* room taken by the caller */
		memset(dec_cpu, 0, n * sizeof(int64_t));
	}
	dec = slot_value(s, c, mode, slot + 1, dec_cpu);
	rc = load_chunk_later(s, chunk, &later);
	if (rc < 0)
		return rc;
	inc = slot_value(s, later, mode, slot, percpu);
	*value = (int64_t)((uint64_t)inc + (uint64_t)dec);
	for (unsigned i = 0; percpu && i < n; i++)
		percpu[i] = (int64_t)((uint64_t)percpu[i] + (uint64_t)dec_cpu[i]);
	return 0;
}

static int64_t *arena_take(int64_t **arena, size_t *cap, size_t *used,
			   size_t n)
{
	if (*used + n > *cap) {
		size_t c = *cap ? *cap : 4096;
		int64_t *p;

		while (c < *used + n)
			c *= 2;
		p = realloc(*arena, c * sizeof(int64_t));
		if (!p)
			return NULL;
		*arena = p;
		*cap = c;
	}
	*used += n;
	return *arena + (*used - n);
}

/* --- Series ------------------------------------------------------------ */

/*
 * The labels of long record @r (format 2.5), series @id: its extensions
 * read one by one into the batch's long text, each checked to be a part
 * of this life of @r, then parsed into long_names and long_values.
 * Returns the number of pairs, or a negative errno with a message (-EINVAL when the record or a part is
 * not what it should be: the caller tells corrupt from torn by copying
 * @r again).  res->labels_at says where the text is.
 */
__attribute__((noinline, cold))
static int long_labels(struct tally_seg *s, uint32_t id,
		       const struct tally__series *r, struct result *res)
{
	struct tally__long_labels l;
	uint32_t link, seq;
	size_t at = 0, len = r->labels_len;
	char *text;
	int n;

	/* The field is not 8-byte aligned in the record: copied. */
	memcpy(&l, r->labels, sizeof(l));
	link = l.first;
	seq = atomic_load_explicit(&r->seq, memory_order_relaxed);
	if ((len <= TALLY__LABELS_INLINE &&
	     r->nlabels <= TALLY__LABELS_INLINE_PAIRS) ||
	    len > TALLY__LABELS_PACKED_MAX || len == 0 ||
	    r->nlabels > TALLY__LABEL_PAIRS_MAX) {
		return tally__seg_corrupt(s, "series %u: long labels of %zu "
					  "bytes", id, len);
	}
	if (s->ltext_used + len > s->ltext_cap) {
		size_t cap = s->ltext_cap ? s->ltext_cap : 16384;
		char *p;

		while (cap < s->ltext_used + len)
			cap *= 2;
		if (!(p = realloc(s->ltext, cap)))
			return tally__seg_no_memory(s);
		s->ltext = p;
		s->ltext_cap = cap;
	}
	text = s->ltext + s->ltext_used;
	while (at < len) {
		struct tally__series_ext e;
		int rc;

		if (link == 0 || link > s->hdr.series_cap)
			return tally__seg_corrupt(s, "series %u: label "
						  "extension %u outside the "
						  "table", id, link);
		rc = tally__seg_read_at(s, &e, sizeof(e), s->hdr.series_off +
					(uint64_t)(link - 1) * sizeof(e));
		if (rc < 0)
			return rc;
		if (e.state != TALLY__SERIES_EXT || e.owner != id ||
		    e.owner_seq != seq || e.len == 0 ||
		    e.len > TALLY__EXT_DATA || e.len > len - at)
			return tally__seg_corrupt(s, "series %u: label "
						  "extension %u is not one of "
						  "its parts", id, link);
		memcpy(text + at, e.data, e.len);
		at += e.len;
		link = e.next;
	}
	if (link)
		return tally__seg_corrupt(s, "series %u: label extensions go "
					  "on past its %zu bytes", id, len);
	res->long_labels = 1;
	res->labels_at = s->ltext_used;
	s->ltext_used += len;
	n = tally__labels_parse(text, len, s->long_names, s->long_values,
				TALLY__LABEL_PAIRS_MAX);
	return n < 0 ? tally__seg_corrupt(s, "series %u: labels are not well "
					  "formed", id) : n;
}

/*
 * Check a stable series record; on success fill the chunk and slot, and
 * the batch's label pointers for record @i.
 */
static int check_series(struct tally_seg *s, uint32_t id, uint32_t i,
			const struct tally__series *r, struct result *res,
			uint64_t *chunk, unsigned *slot)
{
	const struct tally__hdr *h = &s->hdr;
	uint64_t rel, in;
	unsigned need = mrec_slots(&s->mrecs[r->metric]);
	int n;

	if (r->nslots != need)
		return tally__seg_corrupt(s, "series %u: %u slots, its kind needs %u", id,
			       r->nslots, need);
	if (r->slot_off < h->chunks_off ||
	    r->slot_off - h->chunks_off >= h->chunks_size)
		return tally__seg_corrupt(s, "series %u: slot offset %llu outside the "
			       "chunks", id, (unsigned long long)r->slot_off);
	rel = r->slot_off - h->chunks_off;
	/* Series of one chunk tend to follow each other: skip the divide. */
	if (rel - s->last_chunk_base >= s->chunk_bytes) {
		s->last_chunk = rel / s->chunk_bytes;
		s->last_chunk_base = s->last_chunk * s->chunk_bytes;
	}
	in = rel - s->last_chunk_base;
	if (tally__slot_at(in) < 0 ||
	    (unsigned)tally__slot_at(in) + r->nslots > TALLY_CHUNK_SLOTS)
		return tally__seg_corrupt(s, "series %u: slot offset %llu is not a "
			       "block", id, (unsigned long long)r->slot_off);
	if (__builtin_expect(tally__series_long(r->state), 0)) {
		if ((n = long_labels(s, id, r, res)) < 0)
			return n;
	} else if (r->labels_len > TALLY__LABELS_INLINE) {
		return tally__seg_corrupt(s, "series %u: labels of %u bytes", id,
			       r->labels_len);
	} else {
		n = tally__labels_parse(r->labels, r->labels_len, s->lnames[i],
					s->lvalues[i], MAX_LABELS);
	}
	if (n < 0 || (unsigned)n != r->nlabels)
		return tally__seg_corrupt(s, "series %u: labels are not well formed", id);
	*chunk = s->last_chunk;
	*slot = (unsigned)tally__slot_at(in);
	return 0;
}

static int compute(struct tally_seg *s, uint32_t id, uint32_t i,
		   const struct tally__series *r, unsigned flags,
		   struct result *out)
{
	const struct tally__metric_rec *f;
	const struct chunk_cache *c;
	uint64_t chunk = 0;
	unsigned slot = 0, nslabs = s->hdr.nslabs;
	int64_t *percpu = NULL;
	int rc;

	out->ok = 0;
	rc = check_series(s, id, i, r, out, &chunk, &slot);
	if (rc < 0)
		return rc;
	f = &s->mrecs[r->metric];
	rc = load_chunk(s, chunk, &c);
	if (rc < 0)
		return rc;
	if (flags & TALLY_READ_PERCPU) {
		out->percpu_at = s->percpu_used;
		/* A gauge's decrements take a second row, after the
		 * row reported. */
		unsigned rows = f->kind == TALLY__KIND_GAUGE ? 2 : 1;

		percpu = arena_take(&s->percpu_arena, &s->percpu_cap,
				    &s->percpu_used, (size_t)rows * nslabs);
		if (!percpu)
			return tally__seg_no_memory(s);
		memset(percpu, 0, nslabs * sizeof(int64_t));
	}
	if (f->kind == TALLY__KIND_GAUGE) {
		rc = gauge_value(s, c, f->mode, chunk, slot, percpu, &out->value);
		if (rc < 0)
			return rc;
	} else if (f->kind != TALLY__KIND_HISTOGRAM) {
		out->value = slot_value(s, c, f->mode, slot, percpu);
		if (f->type == TALLY__TYPE_PGAUGE ||
		    f->type == TALLY__TYPE_FCOUNTER)
			out->sum = slot_value(s, c, f->mode, slot + 1, NULL);
		if (f->type == TALLY__TYPE_CHISTO) {
			/* The sum's whole part in sum, its billionths in
			 * value; then the buckets, whose total is the
			 * count, as the log-linear histograms' below. */
			unsigned nb = r->nslots - 2;
			uint64_t count = 0;
			int64_t *b;

			out->sum = out->value;
			out->value = slot_value(s, c, f->mode, slot + 1, NULL);
			out->buckets_at = s->bucket_used;
			b = arena_take(&s->bucket_arena, &s->bucket_cap,
				       &s->bucket_used, nb);
			if (!b)
				return tally__seg_no_memory(s);
			for (unsigned k = 0; k < nb; k++) {
				b[k] = slot_value(s, c, f->mode, slot + 2 + k,
						  percpu);
				count += (uint64_t)b[k];
			}
			out->count = (int64_t)count;
		}
	} else {
		unsigned nb = r->nslots - 1;
		int64_t *b;

		out->buckets_at = s->bucket_used;
		b = arena_take(&s->bucket_arena, &s->bucket_cap,
			       &s->bucket_used, nb);
		if (!b)
			return tally__seg_no_memory(s);
		out->sum = slot_value(s, c, f->mode, slot, NULL);
		{
			uint64_t count = 0; /* wraps, as the copies do */

			for (unsigned i = 0; i < nb; i++) {
				b[i] = slot_value(s, c, f->mode, slot + 1 + i,
						  percpu);
				count += (uint64_t)b[i];
			}
			out->value = (int64_t)count;
		}
	}
	out->ok = 1;
	return 0;
}

static int emit(struct tally_seg *s, uint32_t id, uint32_t i,
		const struct tally__series *r, const struct result *res,
		unsigned flags, tally_series_fn fn, void *arg)
{
	const struct tally__metric_rec *f = &s->mrecs[r->metric];
	struct tally_series_view v;

	memset(&v, 0, sizeof(v));
	v.id = id;
	v.kind = f->kind;
	v.mode = f->mode;
	v.name = f->name;
	v.help = f->help;
	v.unit = f->unit;
	v.nlabels = r->nlabels;
	v.label_names = s->lnames[i];
	v.label_values = s->lvalues[i];
	if (__builtin_expect(res->long_labels, 0)) {
		/* Checked when the batch was read: parsed again here, into
		 * the arrays of the one series passed on. */
		tally__labels_parse(s->ltext + res->labels_at, r->labels_len,
				    s->long_names, s->long_values,
				    TALLY__LABEL_PAIRS_MAX);
		v.label_names = s->long_names;
		v.label_values = s->long_values;
	}
	v.value = res->value;
	if (f->vtype == TALLY__VT_FLOAT64) {
		v.kind = TALLY_FGAUGE;
		v.fvalue = tally__f64_of(res->value);
		v.value = tally__f64_to_i64(v.fvalue);
	}
	if (flags & TALLY_READ_PERCPU) {
		v.percpu = s->percpu_arena + res->percpu_at;
		v.npercpu = s->hdr.nslabs;
	}
	if (f->kind == TALLY__KIND_HISTOGRAM) {
		v.sum = res->sum;
		v.sub_bits = f->sub_bits;
		v.max_bits = f->max_bits;
		v.nbuckets = r->nslots - 1;
		v.buckets = s->bucket_arena + res->buckets_at;
	}
	if (f->type == TALLY__TYPE_FCOUNTER) {
		/* Billionths, an unsigned sum (layout.h): their whole units
		 * go to the value. */
		uint64_t nanos = (uint64_t)res->sum;

		v.fractional = 1;
		v.value = (int64_t)((uint64_t)res->value +
				    nanos / TALLY__FRAC_SCALE);
		v.frac = (unsigned)(nanos % TALLY__FRAC_SCALE);
		v.fvalue = (double)v.value + v.frac / 1e9;
	}
	if (f->type == TALLY__TYPE_CHISTO) {
		/* The sum: floors, a signed sum, and billionths, an unsigned
		 * one (layout.h), as one exact value. */
		uint64_t nanos = (uint64_t)res->value;

		v.kind = TALLY_HISTOGRAM;
		v.classic = 1;
		v.value = res->count;
		v.sum = (int64_t)((uint64_t)res->sum + nanos / TALLY__FRAC_SCALE);
		v.frac = (unsigned)(nanos % TALLY__FRAC_SCALE);
		v.fsum = (double)v.sum + v.frac / 1e9;
		v.nbounds = tally__metric_tail(f)->nbounds;
		v.bounds = tally__metric_bounds(f)->bound;
		v.summary = v.nbounds == 0 &&
			    (tally__metric_tail(f)->flags & TALLY__TAIL_SUMMARY);
		v.nbuckets = r->nslots - 2;
		v.buckets = s->bucket_arena + res->buckets_at;
	}
	if (f->type == TALLY__TYPE_INFO) {
		/* Pairs that other pairs replaced are 0: not shown. */
		if (v.fvalue != 1.0)
			return 0;
		v.info = 1;
	}
	if (f->type == TALLY__TYPE_ENUM) {
		int rc = tally__es_take(s, &v, f);

		return rc < 0 ? rc : PG_HELD;
	}
	if (f->type == TALLY__TYPE_PGAUGE) {
		int passed, rc;

		rc = tally__pg_take(s, &v, f, v.fvalue, res->sum, fn, arg,
				    &passed);
		if (rc < 0)
			return rc;
		return rc ? rc : passed ? 0 : PG_HELD;
	}
	return fn(&v, arg);
}

/* The file must keep the size it had when it was checked. */
static int check_size(struct tally_seg *s)
{
	struct stat st;

	if (fstat(s->fd, &st) < 0)
		return tally__fail(errno, "%s: %s", s->path, strerror(errno));
	if ((uint64_t)st.st_size != s->hdr.file_size)
		return tally__seg_corrupt(s, "the file is now %lld bytes, not %llu: it "
			       "was truncated or replaced while open",
			       (long long)st.st_size,
			       (unsigned long long)s->hdr.file_size);
	return 0;
}

/*
 * Step 2 of a batch: the values of the records of the first copy that
 * are stable and live.  A record that fails its checks is marked bad
 * (its message kept in @badmsg): corrupt, or copied while a writer
 * changed it, which the second copy tells.
 */
static int compute_batch(struct tally_seg *s, uint32_t first, uint32_t n,
			 const unsigned char *want, unsigned flags,
			 char *badmsg, size_t badlen)
{
	int rc;

	badmsg[0] = 0;
	for (unsigned i = 0; i < CACHE; i++)
		s->cache[i].chunk = UINT64_MAX;
	s->percpu_used = s->bucket_used = s->ltext_used = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct tally__series *r = &s->rec1[i];

		s->res[i].ok = 0;
		s->res[i].bad = 0;
		s->res[i].long_labels = 0;
		if (want && !want[i])
			continue; /* not asked for, not read */
		if ((atomic_load_explicit(&r->seq, memory_order_relaxed) & 1) ||
		    !tally__series_live(r->state))
			continue;
		if (r->metric >= s->hdr.metric_cap) {
			s->res[i].bad = 1;
			if (!badmsg[0])
				snprintf(badmsg, badlen, "%.200s: series %u: "
					 "metric record %u does not exist",
					 s->path, first + i, r->metric);
			continue;
		}
		/* A metric record newer than our copy: read it now. */
		if (r->metric >= s->nmrecs &&
		    (rc = load_mrecs(s, r->metric + 1)) < 0)
			return rc;
		if (r->metric >= s->nmrecs || s->mrecs[r->metric].state != 1)
			continue; /* still being written */
		/* An older definition of its name: not shown (layout.h). */
		if (s->mrecs[r->metric].flags & TALLY__METRIC_SUPERSEDED)
			continue;
		/* A type this reader does not know (a newer minor). */
		if (s->mrecs[r->metric].type > TALLY__TYPE_MAX)
			continue;
		/* A typed series of an untyped metric, or the reverse. */
		if (!s->mrecs[r->metric].type !=
		    (r->state == TALLY__SERIES_LIVE ||
		     r->state == TALLY__SERIES_LONG)) {
			s->res[i].bad = 1;
			tally__seg_corrupt(s, "series %u: state %u does not "
					   "go with its metric's type %u",
					   first + i, r->state,
					   s->mrecs[r->metric].type);
			snprintf(badmsg, badlen, "%s", tally_errmsg());
			continue;
		}
		rc = compute(s, first + i, i, r, flags, &s->res[i]);
		if (rc == -EINVAL) {
			s->res[i].bad = 1;
			if (!badmsg[0])
				snprintf(badmsg, badlen, "%s", tally_errmsg());
			tally__ok();
		} else if (rc < 0) {
			return rc;
		}
	}
	return 0;
}

/*
 * Step 3 for record @i of a batch: report its series if its two copies
 * agree.  Returns 1 when it was passed to @fn, 0 when not, what @fn
 * returned to stop (in *@stop, returning 0), or -errno.
 */
static int emit_record(struct tally_seg *s, uint32_t first, uint32_t i,
		       unsigned flags, tally_series_fn fn, void *arg,
		       const char *badmsg, int *stop)
{
	int same, rc;

	/* refs changes without the seq (layout.h): not compared. */
	s->rec2[i].refs = s->rec1[i].refs;
	same = !memcmp(&s->rec1[i], &s->rec2[i], sizeof(s->rec1[i]));

	/* Corrupt (its two copies agree): it alone is skipped, counted,
	 * and the first one named. */
	if (s->res[i].bad && same && s->bad_series++ == 0) {
		char mine[32];

		/* The batch's message is the first bad record's, which may
		 * have been torn, not this one. */
		snprintf(mine, sizeof(mine), "series %u:", first + i);
		if (strstr(badmsg, mine))
			snprintf(s->bad_series_msg, sizeof(s->bad_series_msg),
				 "%s", badmsg);
		else
			snprintf(s->bad_series_msg, sizeof(s->bad_series_msg),
				 "%.200s: series %u: failed its checks",
				 s->path, first + i);
	}
	if (!s->res[i].ok || !same)
		return 0;
	rc = emit(s, first + i, i, &s->rec1[i], &s->res[i], flags, fn, arg);
	if (rc == PG_HELD)
		return 0; /* combined at the end, or left out */
	if (rc < 0 && s->rec1[i].state >= TALLY__SERIES_TYPED)
		return rc;
	if (rc) {
		*stop = rc;
		return 0;
	}
	return 1;
}

/* Step 3 of a batch: report the series whose two copies agree, those of
 * records @ids (NULL: every record of the batch, in order).  Returns
 * the number reported, or what @fn returned to stop (in *@stop). */
static int emit_batch(struct tally_seg *s, uint32_t first, uint32_t n,
		      const uint32_t *ids, size_t nids, unsigned flags,
		      tally_series_fn fn, void *arg, const char *badmsg,
		      int *stop)
{
	size_t todo = ids ? nids : n;
	int count = 0, rc;

	for (size_t k = 0; k < todo && !*stop; k++) {
		uint32_t i = ids ? ids[k] - first : (uint32_t)k;

		rc = emit_record(s, first, i, flags, fn, arg, badmsg, stop);
		if (rc < 0)
			return rc;
		count += rc;
	}
	return count;
}

/*
 * Steps 1 and 3: copy the records of a batch, [@first, @first + @n) into
 * @to, or those marked in @want only.  Records asked for that lie close
 * together are copied with the gap between them in one read: a read
 * costs about what copying a page does, and this reader keeps nothing
 * of the records in between.
 */
#define GAP_READ (TALLY__PAGE / sizeof(struct tally__series))

static int read_records(struct tally_seg *s, struct tally__series *to,
			uint32_t first, uint32_t n, const unsigned char *want)
{
	const uint64_t rec = sizeof(struct tally__series);
	uint64_t off = s->hdr.series_off + (uint64_t)first * rec;
	uint32_t a = 0, b;

	if (!want)
		return tally__seg_read_at(s, to, n * rec, off);
	while (a < n) {
		int rc;

		while (a < n && !want[a])
			a++;
		if (a == n)
			break;
		/* [a, b]: the records asked for from a on, with gaps of at
		 * most GAP_READ records between them. */
		b = a;
		for (uint32_t j = a + 1; j < n && j - b <= GAP_READ; j++)
			if (want[j])
				b = j;
		rc = tally__seg_read_at(s, to + a, (b - a + 1) * rec,
					off + a * rec);
		if (rc < 0)
			return rc;
		a = b + 1;
	}
	return 0;
}

/*
 * The records [*first, *first + *n) worth reading from @first on: the
 * next run of them whose pages hold data, at most BATCH.  The series
 * table of a large zone is mostly holes, and a record in a hole is all
 * zeros, never live: a header that claims 16 million series used (within
 * the caps, so valid) then costs what the writer really wrote, not 2 GB
 * of reads of zeros on every pass.  The file system is asked
 * (SEEK_DATA/SEEK_HOLE), never trusted to be small: a file with no holes
 * is read whole, as before.  0 when nothing is left to read.
 */
static uint32_t next_run(struct tally_seg *s, uint32_t *first, uint32_t hwm)
{
	const uint64_t rec = sizeof(struct tally__series);
	uint64_t off = s->hdr.series_off + (uint64_t)*first * rec, end;
	uint32_t n = hwm - *first < BATCH ? hwm - *first : BATCH;
	off_t d, h;

	if (*first >= hwm)
		return 0;
	d = lseek(s->fd, (off_t)off, SEEK_DATA);
	if (d < 0)
		return errno == ENXIO ? 0 : n; /* no data left, or cannot tell */
	if ((uint64_t)d > off) {
		uint64_t skip = ((uint64_t)d - off) / rec;

		if (skip >= hwm - *first)
			return 0;
		*first += (uint32_t)skip;
		off += skip * rec;
		n = hwm - *first < BATCH ? hwm - *first : BATCH;
	}
	h = lseek(s->fd, d, SEEK_HOLE);
	if (h > d) {
		end = ((uint64_t)h - off + rec - 1) / rec;
		if (end < n)
			n = (uint32_t)end;
	}
	return n ? n : 1;
}

int tally__walk_begin(struct tally_seg *s, unsigned flags, uint32_t *hwm)
{
	uint32_t nmrec;
	uint64_t gen;
	int rc;

	if (flags & ~TALLY_READ_PERCPU)
		return tally__fail(EINVAL, "unknown flags 0x%x", flags);
	if ((rc = check_size(s)) < 0 ||
	    (rc = tally__seg_read_live(s, &gen, hwm, &nmrec)) < 0)
		return rc;
	/* A metric record was rewritten (help, unit, superseded: format
	 * 2.5): read them all again. */
	if (s->live_metric_changes != s->metric_changes) {
		s->metric_changes = s->live_metric_changes;
		s->nmrecs = 0;
	}
	s->bad_series = 0;
	if ((rc = load_mrecs(s, nmrec)) < 0)
		return rc;
	tally__pg_free(s); /* what a pass that failed left */
	tally__es_free(s);
	return 0;
}

int tally__walk_run(struct tally_seg *s, uint32_t first, uint32_t n,
		    const uint32_t *ids, size_t nids, unsigned flags,
		    tally_series_fn fn, void *arg, char *badmsg, size_t badlen,
		    int *stop)
{
	unsigned char want[BATCH];
	const unsigned char *w = NULL;
	int rc;

	if (ids) {
		memset(want, 0, n);
		for (size_t k = 0; k < nids; k++)
			want[ids[k] - first] = 1;
		w = want;
	}
	if ((rc = read_records(s, s->rec1, first, n, w)) < 0 ||
	    (rc = compute_batch(s, first, n, w, flags, badmsg, badlen)) < 0 ||
	    (rc = read_records(s, s->rec2, first, n, w)) < 0 ||
	    (rc = check_size(s)) < 0)
		return rc;
	return emit_batch(s, first, n, ids, nids, flags, fn, arg, badmsg,
			  stop);
}

int tally__walk_end(struct tally_seg *s, int stop, int count,
		    tally_series_fn fn, void *arg)
{
	if (!stop)
		stop = tally__pg_flush(s, fn, arg, &count);
	if (!stop)
		stop = tally__es_flush(s, fn, arg, &count);
	tally__pg_free(s);
	tally__es_free(s);
	return stop ? stop : count;
}

int tally_seg_foreach(struct tally_seg *s, unsigned flags, tally_series_fn fn,
		      void *arg)
{
	uint32_t hwm, first = 0, n;
	int count = 0, rc, stop = 0;
	char badmsg[256] = "";

	tally__ok();
	if (!s || !fn)
		return tally__fail(EINVAL, "tally_seg_foreach: NULL argument");
	if ((rc = tally__walk_begin(s, flags, &hwm)) < 0)
		return rc;
	for (; !stop && (n = next_run(s, &first, hwm)) > 0; first += n) {
		rc = tally__walk_run(s, first, n, NULL, 0, flags, fn, arg,
				     badmsg, sizeof(badmsg), &stop);
		if (rc < 0)
			return rc;
		count += rc;
	}
	return tally__walk_end(s, stop, count, fn, arg);
}

int tally_seg_skipped(const struct tally_seg *s, const char **msg)
{
	if (!s)
		return tally__fail(EINVAL, "tally_seg_skipped: NULL segment");
	if (msg)
		*msg = s->bad_metrics ? s->bad_metric_msg :
		       s->bad_series ? s->bad_series_msg : "";
	return (int)(s->bad_metrics + s->bad_series);
}
