/*
 * authq.c: the order of the login queue among client addresses
 * (authq.h).  Without a server, so that exporter-unit pins each rule and
 * each tie; the queue is short (AUTH_QUEUE logins), so every choice counts
 * the logins of each address again.
 */
#include <string.h>

#include "authq.h"

unsigned authq_count(const unsigned char (*addr)[AUTHQ_ADDR], unsigned n,
		     const unsigned char *running, const unsigned char *a)
{
	unsigned c = 0;

	for (unsigned i = 0; i < n; i++)
		c += memcmp(addr[i], a, AUTHQ_ADDR) == 0;
	if (running)
		c += memcmp(running, a, AUTHQ_ADDR) == 0;
	return c;
}

unsigned authq_next(const unsigned char (*addr)[AUTHQ_ADDR],
		    const unsigned char *clean, unsigned n,
		    const unsigned char *last)
{
	unsigned fewest = ~0u, pick = 0;

	for (unsigned i = 0; i < n; i++)
		if (clean && clean[i])
			return i;
	for (unsigned i = 0; i < n; i++) {
		unsigned c = authq_count(addr, n, NULL, addr[i]);

		/* Above any other address's count, which is at most n. */
		if (last && memcmp(addr[i], last, AUTHQ_ADDR) == 0)
			c += n;
		if (c < fewest) {
			fewest = c;
			pick = i;
		}
	}
	return pick;
}

int authq_drop(const unsigned char (*addr)[AUTHQ_ADDR],
	       const unsigned char *clean, unsigned n,
	       const unsigned char *running, unsigned same,
	       int newcomer_clean)
{
	unsigned most = 0;
	int drop = -1;

	for (unsigned i = 0; i < n; i++) {
		unsigned c = authq_count(addr, n, running, addr[i]);

		if (clean && clean[i])
			continue;
		/* Above any @same, which is at most n + 1. */
		if (newcomer_clean)
			c += n + 2;
		if (c >= most) {
			most = c;
			drop = (int)i;
		}
	}
	return most > same ? drop : -1;
}
