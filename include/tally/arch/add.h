/*
 * tally/arch/add.h: the inline update path, tally__block_add(), behind
 * tally_block_add().  Internal: include tally/block.h instead.
 *
 * A handle is the address of CPU 0's copy of the block's first slot; its
 * two low bits hold the mode (copies are 8-byte aligned), so that a
 * per-CPU add needs no lookup.  CPU c's copy of slot s is at
 * (handle + 8 * s) + c * TALLY__STRIDE.
 */
#ifndef TALLY_ARCH_ADD_H
#define TALLY_ARCH_ADD_H

#include <stddef.h>
#include <stdint.h>

#include "tally/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The kernel's rseq ABI (struct rseq, linux/rseq.h) as the inline add
 * uses it: the CPU id and the critical-section pointer of the thread's
 * area, and the signature that must precede an abort handler (glibc's
 * RSEQ_SIG for x86, <sys/rseq.h>; src/process/config.c checks all three
 * against those headers when it has them, and the Rust crate's test
 * checks its copies against these).
 */
#define TALLY__RSEQ_CPU_ID_OFF 4
#define TALLY__RSEQ_CS_OFF     8
#define TALLY__RSEQ_SIG        0x53053053

/* The distance between two CPUs' copies of a slot: one page. */
#define TALLY__STRIDE_SHIFT 12
#define TALLY__STRIDE       (1u << TALLY__STRIDE_SHIFT)
#define TALLY__MODE_MASK    ((uintptr_t)3)
/*
 * A chunk's reservation line (src/layout.h) ends its first page, two pages
 * before the page of CPU 0's copies: bit (cpu & 255) of it says that the
 * rseq copy of CPU cpu was reserved for the chunk.
 */
#define TALLY__RESV_BACK    (2u * TALLY__STRIDE - 4032u)

/*
 * The thread's rseq stand-in (src/process/config.c), where tally__cfg.rseq_off
 * leads when this process does not use rseq, holds after the rseq fields
 * the fallback copy the thread owns (src/core/add.c): its token, the distance
 * from CPU 0's copy to it (0: the thread owns none) and its reservation
 * bit.  A fallback copy's page keeps the token of the thread that may add
 * to it without a lock at TALLY__OWNER_OFF, where rseq copies have nothing.
 */
#define TALLY__FB_TOKEN_OFF 16
#define TALLY__FB_DELTA_OFF 24
#define TALLY__FB_BIT_OFF   28
#define TALLY__OWNER_OFF    4032u
/*
 * The two adaptive hints of the thread's stand-in (at thread_off, below):
 * the words of adaptive slots the thread's last adds found unpromoted and
 * uncontended (tally__adaptive_hint_add in tally/arch/x86_64.h).  The
 * stand-in is 32-byte aligned, so hint k has bit 3 of its address equal
 * to k.
 */
#define TALLY__AHINT_OFF    64

/* tally__rseq_add's answers besides 0 (done). */
#define TALLY__ADD_FALLBACK (-1) /* no rseq here: take the fallback */
#define TALLY__ADD_RESERVE  (-2) /* this CPU's copy is not reserved yet */

/*
 * Read-mostly settings of the update path, written once when the library
 * starts.  rseq_limit is the slab count when this process may use rseq,
 * else 0, so that one unsigned compare of the CPU id sends both "no rseq"
 * and "CPU beyond the slabs" to the fallback.  A per-node add finds its
 * copy with nnodes and cpu_node (the process's NUMA map,
 * src/process/config.c) without leaving the inline path.
 *
 * The settings lie at TALLY__CFG_PAGE_OFF of a page of their own, past
 * the last slot's offset in a page (TALLY_CHUNK_SLOTS * 8): a load of a
 * setting never has the page offset of a copy.  On Intel cores a load
 * whose address has the same low 12 bits as a locked add just before it
 * waits for that add to finish (the store buffer compares the low 12 bits
 * first): a loop of shared or per-node adds to the slot whose offset
 * matches the setting it loads is slower than one of atomic adds
 * (docs/RESULTS.md has the figures), and which slot that is would
 * depend on where the linker put this structure.  The padding makes it
 * 4096-aligned, an alignment a copy relocation keeps too.
 */
#define TALLY__CFG_PAGE_OFF 4032u
struct tally__cfg {
	char pad[TALLY__CFG_PAGE_OFF]; /* never read or written */
	long rseq_off;        /* glibc's __rseq_offset, or that of a stand-in */
	unsigned rseq_limit;  /* CPU ids below this take the rseq path */
	unsigned nslabs;      /* per-CPU copies of every slot */
	int64_t promoted;     /* always 1: the promotion word of the blocks
				 that have none (see tally__block_add) */
	unsigned nnodes;      /* NUMA nodes (or $TALLY_NODES) */
	const uint16_t *cpu_node; /* the node of each CPU below nslabs */
	long thread_off;      /* the thread's stand-in (src/process/config.c),
				 from the thread pointer, with or without
				 rseq: where the adaptive hints are */
} __attribute__((aligned(4096)));
extern TALLY_API struct tally__cfg tally__cfg;

#if defined(__x86_64__) && defined(__linux__) && !defined(TALLY_NO_RSEQ_INLINE)
#define TALLY__ARCH_INSIDE_ADD_H 1
#include "tally/arch/x86_64.h"
#undef TALLY__ARCH_INSIDE_ADD_H
#else
#include "tally/arch/generic.h"
#endif

#ifdef __cplusplus
}
#endif

#endif /* TALLY_ARCH_ADD_H */
