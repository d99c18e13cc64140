/*
 * tally/arch/generic.h: the update path where tally has no restartable
 * sequence (any architecture but x86-64): every add takes the out-of-line
 * path, a relaxed atomic add on the fallback copy the calling thread owns
 * (or on the slot's baseline when it owns none: src/core/add.c).
 * Internal: include tally/block.h instead.
 */
#ifndef TALLY_ARCH_GENERIC_H
#define TALLY_ARCH_GENERIC_H

static inline int tally__rseq_add(int64_t *copy0, int64_t v)
{
	(void)copy0;
	(void)v;
	return TALLY__ADD_FALLBACK;
}

static inline void tally__block_add(struct tally_block *b, unsigned slot,
				    int64_t v)
{
	tally__block_add_slow(b, slot, v);
}

#endif /* TALLY_ARCH_GENERIC_H */
