/*
 * ptoken.c: this process's token in a zone, which says to every reader,
 * in any PID namespace, whether the process still runs.
 *
 * A per-process series (a TALLY_PGAUGE's, tally/metrics.h) names its
 * process by a token drawn from the header's next_token, the counter of
 * the chunk owners' tokens, so that no two tokens of a zone are alike.
 * The process holds the write lock of the token's byte
 * (TALLY__OWNER_LOCK_BYTE + token) through its own description of the
 * file (tally__own_fd) until it detaches the zone or exits: the kernel
 * lets go of it when the process dies, however it dies, and a reader
 * asks for it with F_OFD_GETLK, which needs no pid.  A forked child has
 * a description of its own and takes a token of its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

int tally__process_token(struct tally_zone *z, uint32_t *token)
{
	uint64_t mine = atomic_load_explicit(&z->ptoken, memory_order_acquire);
	uint32_t pid = (uint32_t)getpid(), t;
	int rc;

	if (mine && (uint32_t)(mine >> 32) == pid) {
		*token = (uint32_t)mine;
		return 0;
	}
	do
		t = atomic_fetch_add(&z->hdr->next_token, 1) + 1;
	while (t == 0);
	if ((rc = tally__token_lock(z, t, 1)) < 0)
		return tally__fail(-rc, "cannot take the lock that tells "
				   "readers this process runs: %s",
				   strerror(-rc));
	/* Two threads may race here: the first one's token stays, the
	 * other's lock is let go. */
	if (!atomic_compare_exchange_strong(&z->ptoken, &mine,
					    (uint64_t)pid << 32 | t) &&
	    (uint32_t)(mine >> 32) == pid) {
		tally__token_lock(z, t, 0);
		t = (uint32_t)mine;
	}
	*token = t;
	return 0;
}
