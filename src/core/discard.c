/*
 * discard.c: where the updates of a series that could not be registered
 * go.
 *
 * Statistics must never take a service down: after a failed registration
 * (no directory, a full file system, a limit, a bad name), the handle is
 * still one that every update call accepts, and its updates land in a
 * block of this process's private memory that nobody reads.  The block
 * is shaped like a chunk (tally__geometry's chunk_pages, page 2 holding
 * the handle), with every bit of its reservation line set, so that the
 * inline add, the fallback and every mode's slow path write to it as to
 * any block, without a test of their own.  It is anonymous memory mapped
 * without reserve: pages appear only where an update writes.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "core/core.h"

static _Atomic(char *) discard;

tally_block *tally__discard_block(void)
{
	char *d = atomic_load_explicit(&discard, memory_order_acquire), *old;
	size_t bytes;

	if (d)
		return (tally_block *)(d + tally__page_off(TALLY__PG_COPY0));
	tally__init();
	tally__zone_hooks();
	bytes = (size_t)tally__chunk_pages(tally__env.nslabs) * TALLY__PAGE;
	d = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (d == MAP_FAILED)
		return NULL;
	memset(d + TALLY__RESV_OFF, 0xff, 64); /* every copy "reserved" */
	old = NULL;
	if (!atomic_compare_exchange_strong(&discard, &old, d)) {
		munmap(d, bytes); /* another thread made one first */
		d = old;
	}
	return (tally_block *)(d + tally__page_off(TALLY__PG_COPY0));
}
