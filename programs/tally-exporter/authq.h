/*
 * authq.h: the order of tally-exporter's login queue among client
 * addresses (auth.c holds the queue; these choose in it).  A queue is
 * given as the addresses of its logins in the order they came, @n of
 * them, and the address of the login being checked (@running, or NULL).
 * Addresses are AUTHQ_ADDR bytes (family, then the address), compared
 * whole.  @clean (or NULL: none) marks the clean logins: those of a
 * configured user with no recent failure (auth.c), which go first and
 * are never dropped, so that a flood of wrong passwords from any number
 * of addresses cannot keep a right one out.
 */
#ifndef TALLY_EXPORTER_AUTHQ_H
#define TALLY_EXPORTER_AUTHQ_H

#define AUTHQ_ADDR 17

/* How many logins from @a are queued or being checked. */
unsigned authq_count(const unsigned char (*addr)[AUTHQ_ADDR], unsigned n,
		     const unsigned char *running, const unsigned char *a);

/*
 * The login to check next, by its index (@n > 0): the first clean login,
 * if any; else addresses take turns.  The first login from the address
 * with the fewest logins queued goes first; the address of the login
 * checked last (@last, or NULL) goes after every other one.
 */
unsigned authq_next(const unsigned char (*addr)[AUTHQ_ADDR],
		    const unsigned char *clean, unsigned n,
		    const unsigned char *last);

/*
 * The login a full queue drops to make room for one from an address with
 * @same logins in it: the most recently queued of the address with the
 * most logins queued or being checked (the last queued among equals),
 * when that is more than @same; for a clean newcomer (@newcomer_clean),
 * that login whatever @same.  A clean login is never dropped.  Its
 * index, or -1: no room.
 */
int authq_drop(const unsigned char (*addr)[AUTHQ_ADDR],
	       const unsigned char *clean, unsigned n,
	       const unsigned char *running, unsigned same,
	       int newcomer_clean);

#endif
