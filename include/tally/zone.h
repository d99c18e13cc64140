/*
 * tally/zone.h: zones, the shared-memory regions that hold per-CPU slots.
 *
 * A zone is a sparse file in $TALLY_DIR (default /dev/shm/tally-<uid>) or an
 * anonymous memory file.  Its slots are grouped in chunks; a chunk holds a
 * page per CPU for the rseq copies, a page per fallback copy and two
 * auxiliary pages, and CPU c's copy of a slot sits c pages after CPU 0's
 * copy.  A page exists only once somebody wrote to it, so a counter costs
 * 8 bytes for each CPU that actually updated it.
 *
 * Every process gets a default zone, created on first use and named after
 * the process, without any set-up call.  The layout of the file is
 * described in docs/FORMAT.md.
 */
#ifndef TALLY_ZONE_H
#define TALLY_ZONE_H

#include <stddef.h>
#include <stdint.h>

#include "tally/api.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tally_zone;

/* Flags for struct tally_zone_opts. */
#define TALLY_ZONE_ANON    0x1u /* no file in $TALLY_DIR: invisible to readers */
#define TALLY_ZONE_PERSIST 0x2u /* keep the file when the last user exits */
#define TALLY_ZONE_SHARED  0x4u /* one zone of this name for every process:
				   attach it, or create it (see below) */

/*
 * Options for tally_zone_create().  A zero-filled structure (or NULL) asks
 * for the defaults.
 *
 * capacity: the number of 64-bit slots the zone can hand out; rounded up
 *           to whole chunks of TALLY_CHUNK_SLOTS.  0 means the default,
 *           $TALLY_ZONE_SLOTS or 4,194,304.  The zone does not grow: once
 *           full, allocation fails with ENOSPC.
 * max_series: the number of named series (tally/metrics.h) the zone
 *           can hold; 0 means 1,048,576.  Each costs 128 bytes of
 *           address space, and memory only once used.
 * flags:    TALLY_ZONE_ANON, TALLY_ZONE_PERSIST, TALLY_ZONE_SHARED.
 */
struct tally_zone_opts {
	size_t capacity;
	size_t max_series;
	unsigned flags;
};

/* Slots per chunk: one page of 8-byte slots, less the last cache line of
 * the chunk's first page, which records the pages reserved for it. */
#define TALLY_CHUNK_SLOTS 504u

/*
 * tally_zone_create: create a zone named @name.
 *
 * @name is 1 to 63 characters of [A-Za-z0-9_.-] and does not start with a
 * dot.  The file is $TALLY_DIR/<name>.<pid>.<id>.tally (<id>: 16 random
 * hex digits; a file that exists is never replaced), created 0600; the
 * directory must be owned by the caller and not writable by others (the
 * default directory is created 0700 when missing).
 *
 * With TALLY_ZONE_SHARED, the zone is one file for every process of the
 * user that asks for it by name, related or not: $TALLY_DIR/<name>.tally.
 * The call attaches it when it exists (then capacity and max_series are
 * the existing zone's, and @opts only serve to create it), and creates it
 * otherwise; two processes starting together get the same zone.  Series
 * registered in it are get-or-create (tally/metrics.h), so every process
 * adds into the same series.  The file stays when its last user exits
 * (normally or killed), dead for readers, until the retention removes it
 * ($TALLY_RETAIN, one hour by default, see tally_dir_expire()); a
 * process that attaches it before then carries on with its values, so
 * that a counter of a pre-fork server never goes backwards when its
 * workers are recycled.  $TALLY_ZONE=<name> makes the default zone of
 * every process that shared zone.
 *
 * Return: the zone, or NULL with errno set:
 *   EINVAL   bad name, capacity or flags (ANON with SHARED);
 *   ENOENT   $TALLY_DIR does not exist (only the default directory is
 *            created);
 *   ENOTDIR  $TALLY_DIR is not a directory (or is a symbolic link);
 *   EPERM    $TALLY_DIR is owned by another user or writable by others;
 *   EEXIST   a zone of that name already exists for this process, or
 *            the shared zone's file was made with another layout
 *            (another format, CPU count, NUMA node count or flags):
 *            tally_errmsg() says which;
 *   ENOSPC, ENOMEM, EMFILE ...  from the system calls that create the file.
 * tally_errmsg() then says what was wrong in one sentence.
 *
 * This API is MT-safe.  Not async-signal-safe.
 */
TALLY_API struct tally_zone *tally_zone_create(const char *name,
				     const struct tally_zone_opts *opts);

/*
 * tally_zone_destroy: unmap a zone and remove its file if this process is
 * its last user (unless TALLY_ZONE_PERSIST or $TALLY_KEEP=1).
 *
 * No thread may use the zone or its blocks during or after the call.
 * Return: 0, or -EINVAL for NULL or the default zone (which lives as long
 * as the process).
 * This API is MT-safe with respect to other zones.
 */
TALLY_API int tally_zone_destroy(struct tally_zone *z);

/*
 * tally_zone_default: the process's default zone, created on first call.
 *
 * Its name is the process name (from /proc/self/comm, with characters
 * outside [A-Za-z0-9_.-] replaced by '_'); with $TALLY_ZONE=<name>, it
 * is the shared zone <name> (TALLY_ZONE_SHARED), which unrelated
 * processes, pre-fork workers among them, share without any code.  After
 * fork() the child keeps using its parent's default zone.
 * Return: the zone, or NULL with errno set as for tally_zone_create().
 * This API is MT-safe.
 */
TALLY_API struct tally_zone *tally_zone_default(void);

/* What a zone really uses, from tally_zone_usage(). */
struct tally_zone_usage {
	uint64_t resident_bytes; /* bytes of memory the file really holds */
	uint64_t mapped_bytes;   /* the size of the mapping (virtual) */
	uint64_t chunks_used;    /* chunks handed out to blocks */
	uint64_t chunks_total;   /* the zone's capacity in chunks */
	uint32_t nslabs;         /* per-CPU copies of each slot */
	uint32_t nnodes;         /* NUMA nodes seen (or forced) */
};

/*
 * tally_zone_usage: fill @u with the zone's real memory use.
 *
 * resident_bytes counts the file's allocated blocks (fstat st_blocks), so
 * it is what the zone costs, not its virtual size.
 * Return: 0, or -EINVAL for NULL arguments, or -errno from fstat.
 * This API is MT-safe.
 */
TALLY_API int tally_zone_usage(struct tally_zone *z, struct tally_zone_usage *u);

/*
 * tally_zone_path: the zone's file name, or "" for an anonymous zone.
 * The string lives as long as the zone.  MT-safe.
 */
TALLY_API const char *tally_zone_path(const struct tally_zone *z);

/*
 * tally_errmsg: a sentence describing why the last tally call made by this
 * thread failed, or "" when it succeeded (a call that succeeds clears the
 * message of an earlier failure; the update calls, which cannot fail,
 * leave it alone).  The string is thread-local and valid until the
 * thread's next tally call.  MT-safe.
 */
TALLY_API const char *tally_errmsg(void);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_ZONE_H */
