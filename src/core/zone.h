/*
 * core/zone.h: what the zone files share (not installed): zone.c's
 * registry and use locks, zone-create.c's creation, zone-attach.c's
 * shared zones and zone-dir.c's checked directory.  All but the registry
 * run under the registry's create lock, one creation at a time.
 */
#ifndef TALLY_CORE_ZONE_H
#define TALLY_CORE_ZONE_H

#include <stdint.h>

#include "core/core.h"

#define MAX_ZONES 64
/* Attempts at attaching or creating a shared zone while others create or
 * remove it at the same moment. */
#define SHARED_TRIES 16

/* The registry (zone.c). */
int tally__zone_register(struct tally_zone *z);
int tally__zone_room(const char *name, unsigned flags);
/* This process's use lock on zone @z's file (and, for its @creator, the
 * creator lock), the file known as @path: 0, or -1 with errno.
 * tally__zone_detach lets go of them, and removes the file when nobody
 * else uses it and it is not kept. */
int tally__zone_take_locks(struct tally_zone *z, int creator,
			   const char *path);
void tally__zone_detach(struct tally_zone *z);
/* Format 2.6 (docs/FORMAT.md): this process's presence lock on the zone
 * file, for a process that did not create it (best effort); the path of
 * the lock file of the zone file @path of inode @ino; closing both. */
void tally__zone_take_presence(struct tally_zone *z, const char *path);
void tally__zone_set_lkpath(struct tally_zone *z, const char *path,
			    uint64_t ino);
void tally__zone_close_locks(struct tally_zone *z);

/* Creation (zone-create.c), under the create lock. */
struct tally_zone *tally__zone_create_locked(const char *name,
					     const struct tally_zone_opts *opts);
struct tally_zone *tally__zone_create_new(const char *name,
					  const struct tally_zone_opts *o,
					  const struct tally__geometry *g,
					  uint64_t nchunks);
int tally__zone_map(struct tally_zone *z, int fd,
		    const struct tally__geometry *g, uint64_t nchunks,
		    unsigned flags);
void tally__zone_shared_path(char *out, size_t n, const char *name);

/* Shared zones (zone-attach.c). */
struct tally_zone *tally__zone_shared_locked(const char *name,
					     const struct tally_zone_opts *o,
					     const struct tally__geometry *g,
					     uint64_t nchunks);

/* The checked directory (zone-dir.c): open while a creation or attach is
 * under way, -1 otherwise. */
extern int tally__zone_dirfd;
const char *tally__zone_base_name(const char *path);
int tally__zone_dir_check(void);
void tally__zone_dir_close(void);

#endif /* TALLY_CORE_ZONE_H */
