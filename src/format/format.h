/*
 * format/format.h: the rules of the segment format that the writer and
 * the reader both apply (not installed), above the process layer: which
 * names, labels, units and text a segment may hold (names.c), which
 * pages of a file exist (resident.c), and what a slot's value is
 * (tally__fold).  The byte layout itself is layout.h.
 */
#ifndef TALLY_FORMAT_H
#define TALLY_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "process/process.h"
#include "tally/block.h"

/* Page residency (resident.c): call fn for each run of pages of the range
 * [off, off + len) that exist in the file; returns 0 or -errno. */
typedef void (*tally__run_fn)(uint64_t off, uint64_t len, void *arg);
int tally__resident_runs(int fd, uint64_t off, uint64_t len,
			 tally__run_fn fn, void *arg);


/* Name and text rules shared by writers and readers (names.c). */
int tally__valid_utf8(const char *s, size_t n);
int tally__valid_metric_name(const char *s);
int tally__valid_label_name(const char *s);
int tally__valid_unit(const char *s);
/* A text of a metric record (@unit: its unit, else its help) that a
 * writer may have left half rewritten, killed with the record's seq odd:
 * cut to its whole part (up to the first NUL, the last whole UTF-8
 * character; a unit that breaks the unit rule is emptied), zeros after
 * it.  Returns its length.  Readers apply it to their copy of a record
 * whose seq stays odd, the writers' repair to the record itself. */
uint16_t tally__text_settle(char *text, size_t size, int unit);
int tally__labels_parse(const char *buf, size_t len, const char **names,
			const char **values, unsigned max);

/*
 * The one definition of a slot's value (docs/FORMAT.md, "Chunks and
 * values"), used by the writer's fetch and by the reader: fold word @w of
 * page @pg of a chunk into the sums of a slot of a block in @mode.  *sum
 * collects the copies the mode uses, *base the baseline; percpu[c], when
 * not NULL, CPU (or node) c's part.  Wrapping arithmetic: copies of a
 * signed gauge may wrap one by one while their sum does not.
 */
static inline void tally__fold(unsigned pg, uint64_t w, unsigned mode,
			       unsigned nslabs, unsigned nnodes,
			       uint64_t *sum, uint64_t *base, int64_t *percpu)
{
	unsigned c;

	if (pg == TALLY__PG_BASELINE) {
		*base = w;
		return;
	}
	if (pg == TALLY__PG_ASHARED) {
		/* (value << 1) | promoted */
		if (mode == TALLY_ADAPTIVE)
			*sum += (uint64_t)((int64_t)w >> 1);
		return;
	}
	c = pg - TALLY__PG_COPY0;
	if ((mode == TALLY_SHARED && c != 0) ||
	    (mode == TALLY_PERNODE && c >= nnodes))
		return;
	if (c >= nslabs) /* fallback copies follow the rseq copies */
		c -= nslabs;
	*sum += w;
	if (percpu)
		percpu[c] = (int64_t)((uint64_t)percpu[c] + w);
}

#endif /* TALLY_FORMAT_H */
