/*
 * resident.c: finding the pages of a file range that exist.
 *
 * Touching a hole of a shared-memory file through a mapping allocates a
 * page, even for a read, so every reader of slots first asks the file
 * which pages hold data.  lseek(SEEK_DATA/SEEK_HOLE) counts pages that
 * were swapped out as data (mincore() would not), and costs two system
 * calls per run of existing pages.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>

#include "internal.h"

int tally__resident_runs(int fd, uint64_t off, uint64_t len,
			 tally__run_fn fn, void *arg)
{
	uint64_t end = off + len, pos = off;

	while (pos < end) {
		off_t d = lseek(fd, (off_t)pos, SEEK_DATA);
		off_t h;

		if (d < 0)
			return errno == ENXIO ? 0 : -errno;
		if ((uint64_t)d >= end)
			return 0;
		h = lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			return -errno;
		if ((uint64_t)h > end)
			h = (off_t)end;
		fn((uint64_t)d, (uint64_t)(h - d), arg);
		pos = (uint64_t)h;
	}
	return 0;
}
