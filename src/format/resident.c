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

#include "format/format.h"

/*
 * @off and @len are multiples of the page size.  Runs are widened to whole
 * pages and never overlap or go backwards, whatever the file system
 * answers (one with smaller blocks could report two runs in one page).
 */
int tally__resident_runs(int fd, uint64_t off, uint64_t len,
			 tally__run_fn fn, void *arg)
{
	uint64_t end = off + len, pos = off;

	while (pos < end) {
		off_t d = lseek(fd, (off_t)pos, SEEK_DATA);
		off_t h;
		uint64_t first, last;

		if (d < 0)
			return errno == ENXIO ? 0 : -errno;
		if ((uint64_t)d >= end)
			return 0;
		h = lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			return -errno;
		first = (uint64_t)d & ~(uint64_t)(TALLY__PAGE - 1);
		if (first < pos)
			first = pos;
		last = ((uint64_t)h + TALLY__PAGE - 1) & ~(uint64_t)(TALLY__PAGE - 1);
		if (last <= first)
			last = first + TALLY__PAGE;
		if (last > end)
			last = end;
		fn(first, last - first, arg);
		pos = last;
	}
	return 0;
}
