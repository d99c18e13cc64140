/*
 * space.c: reserving a zone's pages for real before anybody writes them.
 *
 * A segment is a sparse file, mostly on tmpfs.  Storing to a page of a
 * shared mapping that does not exist yet allocates it, and when the file
 * system is full that store kills the process with SIGBUS.  So every page
 * is reserved with fallocate(2) before its first store, at a moment when
 * a failure can still be reported: zone creation (header), chunk hand-out
 * (a chunk's fixed pages), registration (records and index), and the
 * first add of a CPU to a chunk (its copy page, core/add.c).  Reserving
 * allocates the page, so a reservation is memory really used, and it is
 * made only for what is about to be written: nothing is promised ahead,
 * and zones (of this process or of others) never count the same free
 * bytes twice.  When the file system cannot reserve at all (no fallocate),
 * the old behaviour remains: pages appear on first store.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "core/core.h"

#define NOSPACE_RETRY_NS 10000000ull /* 10 ms between retries when full */

int tally__reserve_fd(int fd, uint64_t off, uint64_t len, const char *what,
		      const char *where)
{
	struct statvfs sv;
	int err;

	if (!len || fallocate(fd, 0, (off_t)off, (off_t)len) == 0)
		return 0;
	err = errno;
	if (err == EOPNOTSUPP || err == ENOSYS)
		return 0;
	if (err != ENOSPC)
		return tally__fail(err, "cannot reserve %llu bytes for %s in "
				   "%s: %s", (unsigned long long)len, what,
				   where, strerror(err));
	if (fstatvfs(fd, &sv) < 0)
		sv.f_bavail = 0;
	return tally__fail(ENOSPC, "%s in %s needs %llu bytes and the file "
			   "system has %llu bytes free", what, where,
			   (unsigned long long)len,
			   (unsigned long long)sv.f_bavail * sv.f_frsize);
}

static const char *where(const struct tally_zone *z)
{
	return z->path[0] ? z->path : "(memfd)";
}

int tally__reserve(struct tally_zone *z, uint64_t off, uint64_t len,
		   const char *what)
{
	uint64_t end = (off + len + TALLY__PAGE - 1) & ~(uint64_t)(TALLY__PAGE - 1);
	int rc;

	off &= ~(uint64_t)(TALLY__PAGE - 1);
	rc = tally__reserve_fd(z->fd, off, end - off, what, where(z));
	if (rc == -ENOSPC)
		atomic_fetch_add_explicit(&z->hdr->alloc_refused, 1,
					  memory_order_relaxed);
	return rc;
}

int tally__reserve_at(struct tally_zone *z, const void *addr, size_t len,
		      const char *what)
{
	return tally__reserve(z, (uint64_t)((const char *)addr -
					    (const char *)z->hdr),
			      len, what);
}

void tally__release_at(struct tally_zone *z, const void *addr, size_t len)
{
	uint64_t off = (uint64_t)((const char *)addr - (const char *)z->hdr);
	uint64_t first = (off + TALLY__PAGE - 1) & ~(uint64_t)(TALLY__PAGE - 1);
	uint64_t end = (off + len) & ~(uint64_t)(TALLY__PAGE - 1);

	if (end > first)
		fallocate(z->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)first, (off_t)(end - first));
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * From the update path: reserve the copies that reservation bit @bit of
 * the chunk of @z holding @p stands for, then set the bit.  Under the update
 * path's rules as far as they can be kept: no lock, no allocation; one
 * fallocate per page (the system call that replaces the page fault the
 * first store would have taken anyway).  After a refusal, the zone's
 * adds spill for a while without asking again, so that a full file
 * system costs an atomic add per update, not a system call.
 */
int tally__reserve_copies(struct tally_zone *z, const int64_t *p,
			  unsigned bit)
{
	uint64_t in, chunk, base, t;
	unsigned nslabs;
	_Atomic uint32_t *resv;

	t = now_ns();
	if (t < __atomic_load_n(&z->nospace_until, __ATOMIC_RELAXED))
		return -ENOSPC;
	chunk = tally__chunk_of(z, (uint64_t)((const char *)p - z->chunks), &in);
	base = z->hdr->chunks_off + chunk * z->chunk_bytes;
	nslabs = z->hdr->nslabs;
	for (unsigned c = bit % 256u; c < nslabs; c += 256u) {
		unsigned pg = bit < TALLY__RESV_FALLBACK ?
				      tally__page_rseq(c) :
				      tally__page_fallback(nslabs, c);

		if (fallocate(z->fd, 0, (off_t)(base + tally__page_off(pg)),
			      TALLY__PAGE) < 0 &&
		    errno != EOPNOTSUPP && errno != ENOSYS) {
			__atomic_store_n(&z->nospace_until,
					 t + NOSPACE_RETRY_NS, __ATOMIC_RELAXED);
			atomic_fetch_add_explicit(&z->hdr->copies_refused, 1,
						  memory_order_relaxed);
			return -ENOSPC;
		}
	}
	resv = (_Atomic uint32_t *)(tally__chunk_base(z, (uint32_t)chunk) +
				    TALLY__RESV_OFF);
	atomic_fetch_or_explicit(&resv[bit / 32u], 1u << (bit % 32u),
				 memory_order_release);
	return 0;
}
