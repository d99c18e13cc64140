/*
 * ptoken.c: this process's token in a zone, which says to every reader,
 * in any PID namespace, whether the process still runs.
 *
 * A per-process series (a TALLY_PGAUGE's, tally/metrics.h) names its
 * process by a token drawn from the header's next_token, the counter of
 * the chunk owners' tokens, so that no two tokens of a zone are alike.
 * The process holds the write lock of the token's byte
 * (TALLY__OWNER_LOCK_BYTE + token) of the zone file, through a
 * description of its own opened read-write, until it detaches the zone
 * or exits: the kernel lets go of it when the process dies, however it
 * dies, and a reader asks for it with F_OFD_GETLK, which needs no pid.
 * A forked child has a description of its own and takes a token of its
 * own.
 *
 * Readers may open the zone file but only for reading, so they cannot
 * take a write lock: no reader makes a dead process look alive.  A
 * reader can hold read locks on those bytes, which keeps the writer from
 * taking its write lock there; the process then draws another token, and
 * after a few it goes on without the lock: readers take it for gone and
 * leave its gauges out of the "live" modes.  No writer decides anything
 * from these locks (docs/FORMAT.md, "Readers have no power over
 * writers"), so that is all a reader can do.  In a zone older than 2.6,
 * whose chunk owners' tokens are locked in the zone file too, the owners'
 * description (tally__own_fd) holds the token's lock, as it did there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

/* Tokens drawn before the process goes on without a lock. */
#define PTOKEN_TRIES 4

static uint32_t draw(struct tally_zone *z)
{
	uint32_t t;

	do
		t = atomic_fetch_add(&z->hdr->next_token, 1) + 1;
	while (t == 0);
	return t;
}

int tally__process_token(struct tally_zone *z, uint32_t *token)
{
	uint64_t mine = atomic_load_explicit(&z->ptoken, memory_order_acquire);
	uint32_t pid = (uint32_t)getpid(), t = 0;
	int own = z->lkfd < 0, fd, old;

	if (mine && (uint32_t)(mine >> 32) == pid) {
		*token = (uint32_t)mine;
		return 0;
	}
	fd = own ? tally__own_fd(z) : tally__reopen_fd(z->fd, z->path, O_RDWR);
	if (fd < 0)
		return tally__fail(errno, "cannot open the zone file to tell "
				   "readers this process runs: %s",
				   strerror(errno));
	for (int i = 0; i < PTOKEN_TRIES; i++) {
		t = draw(z);
		if (tally__lock_byte(fd, F_WRLCK, TALLY__OWNER_LOCK_BYTE + t,
				     0) == 0)
			break;
	}
	/* Two threads may race here: the first one's token stays, the
	 * other's lock is let go (with its description, when it has one). */
	if (!atomic_compare_exchange_strong(&z->ptoken, &mine,
					    (uint64_t)pid << 32 | t) &&
	    (uint32_t)(mine >> 32) == pid) {
		if (own)
			tally__lock_byte(fd, F_UNLCK,
					 TALLY__OWNER_LOCK_BYTE + t, 0);
		else
			close(fd);
		*token = (uint32_t)mine;
		return 0;
	}
	if (!own) {
		/* A forked child's inherited description is its parent's,
		 * whose lock stays with the parent's descriptor. */
		old = atomic_exchange(&z->ptfd1, fd + 1) - 1;
		if (old >= 0)
			close(old);
	}
	*token = t;
	return 0;
}

void tally__process_token_close(struct tally_zone *z)
{
	int fd = atomic_exchange(&z->ptfd1, 0) - 1;

	if (fd >= 0)
		close(fd);
}
