/*
 * index.c: the series of a scrape as places to read them again
 * (index.h).
 *
 * The index is built through tp_snapshot_collect()'s series filter: it
 * sees every series of every segment read, notes its place and answers
 * "do not keep" (or "keep" for a per-process gauge), so the segments are
 * read, skipped and reported exactly as a snapshot reads them.  The
 * filter is not told which segment a series is in, only its
 * tally_seg_info, so a segment is known by its path: the places are
 * given segment numbers in the order read, matched afterwards with the
 * segments the snapshot kept (a segment found corrupt half-way is not
 * among them, and its places are left out as its series are).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "strbuf.h"

static void add_place(struct ex_index *ix, uint32_t rec, uint32_t id)
{
	if (ix->nplaces == ix->cap_places) {
		ix->cap_places = ix->cap_places ? ix->cap_places +
			ix->cap_places / 2 : 4096;
		ix->places = tp_xrealloc(ix->places, ix->cap_places *
					 sizeof(*ix->places));
	}
	ix->places[ix->nplaces].rec = rec;
	ix->places[ix->nplaces].id = id;
	ix->nplaces++;
}

/* A series of the segment at @info, not kept whole, as a series whose
 * process fields are the segment's (what tp_snapshot_collect() puts in
 * each of its series). */
static void from_view(const struct tally_seg_info *info,
		      const struct tally_series_view *v, struct tp_series *s)
{
	tp_series_of_segment(s, info);
	s->dead = !info->alive && !info->in_use ? TP_DEAD : TP_LIVE;
	s->key = (char *)v->name;
	s->name = (char *)v->name;
	s->help = (char *)v->help;
	s->unit = (char *)v->unit;
	s->kind = v->kind;
	s->mode = v->mode;
	s->nlabels = v->nlabels;
	s->label_names = (char **)v->label_names;
	s->label_values = (char **)v->label_values;
	tp_series_set_values(s, v);
	if (v->kind == TALLY_HISTOGRAM) {
		s->buckets = (int64_t *)v->buckets;
		s->bounds = (double *)v->bounds;
	}
}

void ex_index_series(const struct ex_index *ix, uint32_t seg,
		     const struct tally_series_view *v, struct tp_series *s)
{
	from_view(&ix->snap.segs[seg].info, v, s);
}

/* The filter of the collection: note the place of @v; keep only
 * per-process gauges and the states of enums (the reader API's view
 * says which). */
static int note(const struct tally_series_view *v,
		const struct tally_seg_info *info, void *arg)
{
	struct ex_index *ix = arg;
	struct tp_series tmp;
	struct ex_rec *r;
	size_t rec;

	if (!ix->npaths || strcmp(ix->paths[ix->npaths - 1], info->path)) {
		ix->paths = tp_xrealloc(ix->paths, (ix->npaths + 1) *
					sizeof(*ix->paths));
		ix->counts = tp_xrealloc(ix->counts, (ix->npaths + 1) *
					 sizeof(*ix->counts));
		ix->counts[ix->npaths] = 0;
		ix->paths[ix->npaths++] = tp_xstrdup(info->path);
		tp_strmap_free(&ix->cur);
	}
	ix->counts[ix->npaths - 1]++;
	if (v->per_process) {
		/* The segment's number for now, its index in snap.series
		 * once the collection is over. */
		add_place(ix, EX_PLACE_KEPT, (uint32_t)(ix->npaths - 1));
		return 1;
	}
	if (tp_kind_is_gauge(v->kind) && !info->alive && !info->in_use)
		return 0;
	if (v->stateset) {
		/* Which state is current is told over all of them. */
		add_place(ix, EX_PLACE_KEPT, (uint32_t)(ix->npaths - 1));
		return 1;
	}
	rec = tp_strmap_get(&ix->cur, v->name);
	if (rec == (size_t)-1) {
		if (ix->nrecs == ix->cap_recs) {
			ix->cap_recs = ix->cap_recs ? 2 * ix->cap_recs : 64;
			ix->recs = tp_xrealloc(ix->recs, ix->cap_recs *
					       sizeof(*ix->recs));
		}
		rec = ix->nrecs++;
		r = &ix->recs[rec];
		from_view(info, v, &tmp);
		tp_series_copy_to(&ix->mem, &r->first, &tmp, NULL);
		r->seg = (uint32_t)(ix->npaths - 1);
		tp_strmap_put(&ix->cur, r->first.name, rec);
	}
	add_place(ix, (uint32_t)rec, v->id);
	return 0;
}

/* Segment numbers of the collection made indexes in snap.segs, kept
 * series' places made indexes in snap.series. */
static void settle(struct ex_index *ix)
{
	uint32_t *at = tp_xmalloc((ix->npaths + 1) * sizeof(*at));
	size_t g = 0, kept = 0;

	for (size_t i = 0; i < ix->npaths; i++) {
		size_t k = g;

		while (k < ix->snap.nsegs &&
		       strcmp(ix->snap.segs[k].path, ix->paths[i]))
			k++;
		at[i] = k < ix->snap.nsegs ? (uint32_t)k : UINT32_MAX;
		if (k < ix->snap.nsegs) {
			/* Every series read from it, as a snapshot counts
			 * them (tally_segment_series), not only those kept. */
			ix->snap.segs[k].nseries = ix->counts[i];
			g = k + 1;
		}
	}
	for (size_t i = 0; i < ix->nrecs; i++)
		ix->recs[i].seg = at[ix->recs[i].seg];
	for (size_t i = 0; i < ix->nplaces; i++) {
		struct ex_place *p = &ix->places[i];

		if (p->rec == EX_PLACE_KEPT) {
			if (at[p->id] == UINT32_MAX)
				p->rec = EX_PLACE_GONE;
			else
				p->id = (uint32_t)kept++;
		} else if (ix->recs[p->rec].seg == UINT32_MAX) {
			p->rec = EX_PLACE_GONE;
		}
	}
	free(at);
	for (size_t i = 0; i < ix->npaths; i++)
		free(ix->paths[i]);
	free(ix->paths);
	free(ix->counts);
	ix->paths = NULL;
	ix->counts = NULL;
	ix->npaths = 0;
	tp_strmap_free(&ix->cur);
}

int ex_index_collect(struct ex_index *ix, const struct tp_collect_opts *opts,
		     char *errbuf, size_t errlen)
{
	struct tp_collect_opts o = *opts;
	int rc;

	o.series_filter = note;
	o.arg = ix;
	o.order = TP_ORDER_READ;
	ix->open_opts = opts->open_opts;
	rc = tp_snapshot_collect(&ix->snap, &o, errbuf, errlen);
	settle(ix);
	if (!ix->places)
		ix->places = tp_xmalloc(sizeof(*ix->places)); /* an index */
	return rc;
}

void ex_index_of_snapshot(struct ex_index *ix, struct tp_snapshot *snap)
{
	memset(ix, 0, sizeof(*ix));
	ix->snap = *snap;
	memset(snap, 0, sizeof(*snap));
}

void ex_index_of_borrowed(struct ex_index *ix, const struct tp_snapshot *snap)
{
	memset(ix, 0, sizeof(*ix));
	ix->snap = *snap;
	ix->borrowed = 1;
}

void ex_index_free(struct ex_index *ix)
{
	if (!ix->borrowed)
		tp_snapshot_free(&ix->snap);
	free(ix->places);
	free(ix->recs);
	tp_arena_free(&ix->mem);
	for (size_t i = 0; i < ix->npaths; i++)
		free(ix->paths[i]);
	free(ix->paths);
	free(ix->counts);
	tp_strmap_free(&ix->cur);
	memset(ix, 0, sizeof(*ix));
}
