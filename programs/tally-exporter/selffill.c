/*
 * selffill.c: the server's totals into the exporter's own metrics
 * (selfmetrics.h's struct ex_self), under the scrape lock: what the
 * writer prints after a scrape's series.
 */
#define _GNU_SOURCE
#include <microhttpd.h>
#include <string.h>

#include "selfmetrics.h"
#include "srv.h"

#ifndef TALLY_VERSION
#define TALLY_VERSION "0"
#endif

void self_fill(struct ex_self *self, struct server *s,
	       const struct tp_snapshot *snap, uint64_t t0_ns,
	       uint64_t t1_ns)
{
	s->scrapes++;
	for (size_t i = 0; i < snap->nskipped; i++)
		s->skipped_total[tp_skip_reason(snap->skipped[i].err)]++;
	self->collect_seconds = (double)(t1_ns - t0_ns) / 1e9;
	self->scrapes = s->scrapes;
	self->retired_series = s->retain.ngone;
	self->retired_segments = s->retain.segments_retired;
	memcpy(self->skipped_total, s->skipped_total,
	       sizeof(s->skipped_total));
	self->version = TALLY_VERSION;
	self->mhd_version = MHD_get_version();
	memcpy(self->label_clashes_total, s->label_clashes_total,
	       sizeof(s->label_clashes_total));
	pthread_mutex_lock(&s->conn_lock);
	self->conns_evicted = s->conns_evicted;
	pthread_mutex_unlock(&s->conn_lock);
}

void self_count_result(struct server *s, const struct ex_result *res)
{
	s->label_clashes_total[0] += res->labels_renamed;
	s->label_clashes_total[1] += res->labels_dropped;
}
