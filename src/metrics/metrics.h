/*
 * metrics/metrics.h: what the named series layer shares (not installed):
 * registering series in a zone's series table, for the label families
 * of family.c.  The top layer: it may use every layer below.
 */
#ifndef TALLY_METRICS_INTERNAL_H
#define TALLY_METRICS_INTERNAL_H

#include <stdint.h>

#include "core/core.h"

/* Registering series (metrics.c), for the label families of family.c. */
struct tally_metric_desc;
struct tally_metric;
int tally__metric_register(struct tally_zone *z,
			   const struct tally_metric_desc *d, unsigned kind,
			   struct tally_metric *m);
/* _register_in: @pin (record index + 1, 0: none) is the metric record
 * of the label family the series belongs to, as _define made it: its children
 * stay in its generation (metrics.c). */
int tally__metric_register_in(struct tally_zone *z,
			      const struct tally_metric_desc *d, unsigned kind,
			      struct tally_metric *m, uint32_t pin);
/* @combine: a per-process gauge's TALLY_COMBINE_*; of a classic
 * histogram, 1 for a summary (of no bounds). */
int tally__metric_define(struct tally_zone *z,
			 const struct tally_metric_desc *d, unsigned combine,
			 const double *bounds, unsigned nbounds, uint32_t *rec);
/* A classic histogram: its bounds checked (*@nbounds without a last
 * +Inf), then its series registered in the generation @pin, as
 * _register_in (a failure leaves a discarding handle); a summary when
 * @summary is 1 (and @nbounds 0). */
struct tally_chistogram;
int tally__chistogram_check(const struct tally_metric_desc *d,
			    const double *bounds, unsigned *nbounds);
int tally__chistogram_register_in(struct tally_zone *z,
				  const struct tally_metric_desc *d,
				  const double *bounds, unsigned nbounds,
				  struct tally_chistogram *h, uint32_t pin,
				  unsigned summary);
/* A per-process gauge's series of this process (tally_pgauge_register),
 * in the generation @pin as _register_in. */
int tally__pgauge_register_in(struct tally_zone *z,
			      const struct tally_metric_desc *d,
			      unsigned combine, struct tally_metric *m,
			      uint32_t pin);
/* A handle of @kind whose updates go nowhere; _failed also counts the
 * failure in the zone, sets errno and returns @rc. */
void tally__metric_discard(unsigned kind, struct tally_metric *m);
int tally__metric_failed(struct tally_zone *z, unsigned kind,
			 struct tally_metric *m, int rc);

#endif /* TALLY_METRICS_INTERNAL_H */
