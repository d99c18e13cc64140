/*
 * tally/block.h: blocks of per-CPU 64-bit slots: alloc, free, add, fetch,
 * zero.
 *
 * A block is k signed 64-bit slots (1 <= k <= TALLY_BLOCK_MAX_SLOTS) taken
 * from a zone.  Every mode is updated with the same call, tally_block_add():
 *
 *   TALLY_PERCPU    one copy per CPU; the add is one unlocked add on the
 *                   local CPU's copy inside a restartable sequence (rseq).
 *   TALLY_SHARED    one copy updated with an atomic add: the cheapest
 *                   allocation and memory, for counters that are rarely hot.
 *   TALLY_PERNODE   one copy per NUMA node, updated with atomic adds (the
 *                   CPU comes from the thread's rseq area, else from
 *                   sched_getcpu(), which glibc answers from rseq or the
 *                   vDSO, without a system call); on one node, it costs
 *                   what a shared block costs.
 *   TALLY_ADAPTIVE  starts as one shared atomic copy and switches each slot
 *                   to per-CPU copies once it sees contention (an add that
 *                   finds another write between its read of the word and
 *                   its own, as a failed compare-and-swap does); no add is
 *                   lost while it switches.  Before it switches, an add
 *                   costs about what a shared block's costs.
 *
 * Guarantees (see tally(3)):
 *   - Adds are lossless, whatever the mode, from any thread, from signal
 *     handlers and from processes that inherited the zone across fork().
 *   - tally_block_add() never locks, allocates or sleeps, and enters the
 *     kernel only for a CPU's first add to a chunk, to reserve that CPU's
 *     page (fallocate) where its first store would have faulted it in.
 *   - A full file system never kills a writer: an add whose CPU finds no
 *     room for its page goes, atomically, to the slot's baseline.
 *   - A fetch is the sum of the copies, not a snapshot: adds that race with
 *     it are either in the sum or not, never half in it.
 *   - Zeroing is lossless: an add racing with tally_block_zero() is counted
 *     either in the value it removed or in the value after it.
 */
#ifndef TALLY_BLOCK_H
#define TALLY_BLOCK_H

#include <stdint.h>

#include "tally/zone.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An opaque handle to a block; NULL is never a valid block. */
typedef struct tally_block tally_block;

/* Modes, for tally_block_alloc(). */
#define TALLY_PERCPU   0u
#define TALLY_SHARED   1u
#define TALLY_PERNODE  2u
#define TALLY_ADAPTIVE 3u

/* The largest block: a whole chunk. */
#define TALLY_BLOCK_MAX_SLOTS 504u

/*
 * tally_block_alloc: allocate a block of @nslots zeroed slots from @z (NULL:
 * the default zone) in @mode.
 *
 * The common path takes no lock and makes no system call: each thread owns
 * a chunk per mode and size class and hands blocks out of it.  Its cost does
 * not depend on the number of CPUs.
 * Return: the block, or NULL with errno set:
 *   EINVAL  @nslots is 0 or above TALLY_BLOCK_MAX_SLOTS, or @mode unknown;
 *   ENOSPC  the zone is full, or its file system has no room for the
 *           fixed pages of a new chunk (see SPACE in tally(3));
 *   ENOMEM  no memory for the thread's chunk cache;
 *   EMFILE, ENFILE, ENOLCK ...  the thread's first block of the zone
 *           could not take the lock that marks its chunks as its own
 *           (the process's own description of the zone file could not
 *           be opened, or the lock not taken): without it, a process of
 *           another PID namespace could take them back in use;
 *   and the errors of tally_zone_default() when @z is NULL.
 * This API is MT-safe and safe in a child after fork().  Not
 * async-signal-safe.
 */
TALLY_API tally_block *tally_block_alloc(struct tally_zone *z, unsigned nslots,
			       unsigned mode);

/*
 * tally_block_free: give @b back to @z (NULL: the default zone).
 *
 * Any thread (or a process that inherited the zone) may free a block.
 * When every block of a chunk is free its pages go back to the system,
 * except for the chunks a thread still owns (its current one and up to 16
 * full ones per size class, given back when it exits) and up to 4 free
 * chunks a zone keeps for reuse.
 * Return: 0, or -EINVAL when @b is NULL, not a block of @z, or already
 * free (a double free is detected, and changes nothing).
 * This API is MT-safe and safe after fork().  Not async-signal-safe.
 */
TALLY_API int tally_block_free(struct tally_zone *z, tally_block *b);

/*
 * tally_block_fetch: the value of slot @slot of @b: the sum of its copies
 * minus what tally_block_zero() removed.  Visits only the pages that exist;
 * never creates memory.
 * Return: 0 and *@value, or -EINVAL for a NULL or unknown block, or a slot
 * out of range.
 * This API is MT-safe.  Not async-signal-safe.
 */
TALLY_API int tally_block_fetch(const tally_block *b, unsigned slot, int64_t *value);

/*
 * tally_block_fetch_percpu: the raw per-CPU copies of slot @slot.
 *
 * @out receives @n values (n >= the zone's slab count, see
 * tally_zone_usage()): out[c] is what was added on CPU c with rseq, plus
 * what the fallback added to copy c (fallback copies belong to threads,
 * one thread each, not to CPUs; the adds of a thread that found no copy
 * of its own are in no out[c]), since the block was allocated
 * (tally_block_zero() records a baseline and does not reset them).  For TALLY_PERNODE, out[n] is node n's copy; for TALLY_SHARED,
 * out[0] holds the only copy; for TALLY_ADAPTIVE, the adds made before
 * promotion are not attributed to a CPU and appear in no out[c].
 * Return: the number of entries written, or -EINVAL (bad block or slot,
 * NULL @out) or -ERANGE (@n too small).
 * This API is MT-safe.
 */
TALLY_API int tally_block_fetch_percpu(const tally_block *b, unsigned slot,
			     int64_t *out, unsigned n);

/*
 * tally_block_zero: reset slot @slot of @b to zero, losslessly.
 *
 * The value removed is stored in *@removed (when not NULL): every add is
 * counted exactly once, in *@removed or in later fetches.  Implemented as
 * a baseline subtracted at read time, so that zeroing never writes to
 * another CPU's copy.
 * Return: 0, or -EINVAL (bad block or slot), or -ENOSPC (the first zero
 * of a TALLY_SHARED or TALLY_PERNODE block of a chunk needs a page for
 * the chunk's baselines, and the file system has no room; nothing
 * changed).
 * This API is MT-safe.
 */
TALLY_API int tally_block_zero(tally_block *b, unsigned slot, int64_t *removed);

/*
 * tally_block_mode: the mode @b was allocated in, or -EINVAL.
 * tally_block_promoted: 1 when slot @slot of an adaptive block has switched
 * to per-CPU copies, 0 when it has not (or the block is not adaptive),
 * -EINVAL for a bad block or slot.  MT-safe.
 * tally_block_promote: switch slot @slot of an adaptive block to per-CPU
 * copies now, as its first contended add would (for a slot known to be
 * hot); its value is kept.  Return 0 (also when it already was), or
 * -EINVAL for a bad block or slot or a block that is not adaptive.
 * MT-safe, lossless against concurrent adds.
 */
TALLY_API int tally_block_mode(const tally_block *b);
TALLY_API int tally_block_promoted(const tally_block *b, unsigned slot);
TALLY_API int tally_block_promote(tally_block *b, unsigned slot);

/*
 * tally_rseq_active: 1 when this thread's adds use restartable sequences,
 * 0 when they take the fallback (no rseq registered by glibc, rseq
 * disabled with GLIBC_TUNABLES=glibc.pthread.rseq=0, valgrind, a CPU
 * beyond the slab count, another architecture, or $TALLY_NO_RSEQ=1).
 * MT-safe, async-signal-safe.
 */
TALLY_API int tally_rseq_active(void);

/*
 * tally_block_add: add @v (signed) to slot @slot of @b.
 *
 * Never locks, allocates or sleeps; makes no system call but the one that
 * reserves a CPU's page at its first add to a chunk, and without rseq
 * those that claim a fallback copy (at a thread's first add, a process's
 * first add to a zone, and, for a thread that found every copy owned,
 * one after 4096 adds, then ever more rarely).  @slot is not
 * checked here: it must be below the block's size.
 * This API is MT-safe, async-signal-safe, and safe after fork().
 */
TALLY_API void (tally_block_add)(tally_block *b, unsigned slot, int64_t v);

/* Out-of-line part of the update path: the fallback without rseq, a
 * CPU's first add to a chunk, pernode adds whose CPU is not known inline,
 * adaptive adds near the edge of the shared word's range, and every add on
 * architectures without an inline path (on x86-64, per-CPU adds and the
 * atomic adds of the other modes are inline). */
TALLY_API void tally__block_add_slow(tally_block *b, unsigned slot, int64_t v);
/* Its entry for the inline path on x86-64 (tally/arch/x86_64.h), which
 * jumps to it with the return address in %rax: not callable from C. */
TALLY_API void tally__block_add_slow_stub(void);

#include "tally/arch/add.h"

#define tally_block_add(b, slot, v) tally__block_add((b), (slot), (v))

#ifdef __cplusplus
}
#endif

#endif /* TALLY_BLOCK_H */
