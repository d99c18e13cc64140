/*
 * fetch.c: reading and zeroing slots in the writer's process.
 *
 * A slot's value is the sum of the copies its mode uses minus its
 * baseline.  Only pages that exist are read (see resident.c), so fetching
 * never creates memory.  Zeroing stores the current sum as the new
 * baseline with a compare-and-swap: it writes no other CPU's copy, so it
 * cannot race with the unlocked rseq adds, and every add lands either
 * before the sum it stored (and is in the value removed) or after it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

#define WORDS_PER_PAGE (TALLY__PAGE / sizeof(int64_t))

struct sum_arg {
	const struct tally_zone *z;
	const char *base;       /* chunk start */
	uint64_t file_base;
	unsigned slot;          /* slot index in the chunk */
	unsigned mode;
	uint64_t raw;           /* the copies: wrapping sums */
	uint64_t baseline;
	int64_t *percpu;        /* NULL, or nslabs entries */
};

static void sum_run(uint64_t off, uint64_t len, void *arg)
{
	struct sum_arg *a = arg;
	unsigned nslabs = a->z->hdr->nslabs, nnodes = a->z->hdr->nnodes;
	uint64_t first = (off - a->file_base) / TALLY__PAGE;
	uint64_t n = len / TALLY__PAGE;

	for (uint64_t pg = first; pg < first + n; pg++) {
		const int64_t *w = (const int64_t *)(a->base + pg * TALLY__PAGE) +
				   a->slot;

		tally__fold((unsigned)pg,
			    (uint64_t)__atomic_load_n(w, __ATOMIC_RELAXED),
			    a->mode, nslabs, nnodes, &a->raw, &a->baseline,
			    a->percpu);
	}
}

/* Find @b's zone and chunk, and check @slot. */
static int locate_slot(const tally_block *b, unsigned slot,
		       struct tally__loc *loc)
{
	int rc = tally__locate(NULL, b, loc);

	if (rc < 0)
		return rc;
	if (slot >= loc->nslots)
		return tally__fail(EINVAL, "slot %u is beyond the block's %u "
				   "slots", slot, loc->nslots);
	return 0;
}

static int sum_slot(const tally_block *b, unsigned slot, int64_t *percpu,
		    struct sum_arg *a)
{
	struct tally__loc loc;
	int rc = locate_slot(b, slot, &loc);

	if (rc < 0)
		return rc;
	memset(a, 0, sizeof(*a));
	a->z = loc.z;
	a->base = tally__chunk_base(loc.z, loc.chunk);
	a->file_base = loc.z->hdr->chunks_off +
		       (uint64_t)loc.chunk * loc.z->chunk_bytes;
	a->slot = loc.slot0 + slot;
	a->mode = loc.mode;
	a->percpu = percpu;
	rc = tally__resident_runs(loc.z->fd, a->file_base, loc.z->chunk_bytes,
				  sum_run, a);
	if (rc < 0)
		return tally__fail(-rc, "cannot find the pages of a chunk: %s",
				   strerror(-rc));
	return 0;
}

int tally_block_fetch(const tally_block *b, unsigned slot, int64_t *value)
{
	struct sum_arg a;
	int rc;

	tally__ok();
	if (!value)
		return tally__fail(EINVAL, "tally_block_fetch: NULL value");
	rc = sum_slot(b, slot, NULL, &a);
	if (rc < 0)
		return rc;
	*value = (int64_t)(a.raw - a.baseline);
	return 0;
}

int tally_block_fetch_percpu(const tally_block *b, unsigned slot,
			     int64_t *out, unsigned n)
{
	struct sum_arg a;
	unsigned nslabs = tally__cfg.nslabs;
	int rc;

	tally__ok();
	if (!out)
		return tally__fail(EINVAL, "tally_block_fetch_percpu: NULL out");
	if (n < nslabs)
		return tally__fail(ERANGE, "per-CPU output of %u entries, the "
				   "zone has %u slabs", n, nslabs);
	memset(out, 0, (size_t)nslabs * sizeof(*out));
	rc = sum_slot(b, slot, out, &a);
	return rc < 0 ? rc : (int)nslabs;
}

int tally_block_zero(tally_block *b, unsigned slot, int64_t *removed)
{
	struct tally__loc loc;
	struct sum_arg a;
	int64_t *base, old;
	int rc;

	tally__ok();
	rc = locate_slot(b, slot, &loc);
	if (rc < 0)
		return rc;
	base = (int64_t *)(tally__chunk_base(loc.z, loc.chunk) +
			   tally__page_off(TALLY__PG_BASELINE)) +
	       loc.slot0 + slot;
	/* Per-CPU and adaptive chunks reserved their baselines when they
	 * were handed out; shared and per-node ones reserve them here (a
	 * no-op fallocate once the page exists). */
	if ((loc.mode == TALLY_SHARED || loc.mode == TALLY_PERNODE) &&
	    (rc = tally__reserve_at(loc.z, base, sizeof(*base),
				    "the baselines of a chunk")) < 0)
		return rc;
	/* The baseline page is written below anyway: reading it first is
	 * no extra memory. */
	old = __atomic_load_n(base, __ATOMIC_RELAXED);
	for (;;) {
		rc = sum_slot(b, slot, NULL, &a);
		if (rc < 0)
			return rc;
		if (__atomic_compare_exchange_n(base, &old, (int64_t)a.raw, 0,
						__ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED))
			break;
	}
	if (removed)
		*removed = (int64_t)(a.raw - (uint64_t)old);
	return 0;
}

int tally_block_mode(const tally_block *b)
{
	struct tally__loc loc;
	int rc;

	tally__ok();
	rc = tally__locate(NULL, b, &loc);
	return rc < 0 ? rc : (int)loc.mode;
}

/* The word of an adaptive slot in its chunk's page 1 (reserved with the
 * chunk), or NULL when @loc is not adaptive. */
static int64_t *adaptive_word(const struct tally__loc *loc, unsigned slot)
{
	if (loc->mode != TALLY_ADAPTIVE)
		return NULL;
	return (int64_t *)(tally__chunk_base(loc->z, loc->chunk) +
			   tally__page_off(TALLY__PG_ASHARED)) +
	       loc->slot0 + slot;
}

int tally_block_promote(tally_block *b, unsigned slot)
{
	struct tally__loc loc;
	int64_t *w;
	int rc;

	tally__ok();
	rc = locate_slot(b, slot, &loc);
	if (rc < 0)
		return rc;
	w = adaptive_word(&loc, slot);
	if (!w)
		return tally__fail(EINVAL, "the block is not adaptive: only "
				   "an adaptive slot can be promoted");
	/* What the first failed compare-and-swap of an add does: the value
	 * stays in the word, later adds go to the per-CPU copies. */
	__atomic_fetch_or(w, 1, __ATOMIC_RELAXED);
	return 0;
}

int tally_block_promoted(const tally_block *b, unsigned slot)
{
	struct tally__loc loc;
	off_t off, d;
	int rc;

	tally__ok();
	rc = locate_slot(b, slot, &loc);
	if (rc < 0)
		return rc;
	if (loc.mode != TALLY_ADAPTIVE)
		return 0;
	off = (off_t)(loc.z->hdr->chunks_off +
		      (uint64_t)loc.chunk * loc.z->chunk_bytes +
		      tally__page_off(TALLY__PG_ASHARED));
	d = lseek(loc.z->fd, off, SEEK_DATA);
	if (d != off) /* the shared page does not exist: never added to */
		return 0;
	return (int)(__atomic_load_n(adaptive_word(&loc, slot),
				     __ATOMIC_RELAXED) & 1);
}
