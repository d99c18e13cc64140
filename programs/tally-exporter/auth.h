/*
 * auth.h: authentication of tally-exporter's scrapes, by the users of the
 * web config (webconfig.h), which holds a struct auth_cache for them.
 *
 * Password checks are split in two so that the server can keep bcrypt off
 * its network threads (authcache.c): auth_cached() is fast (a keyed hash
 * of the presented credentials looked up among the recent successes),
 * auth_verify() is one bcrypt of a bounded cost (WC_MAX_COST).  The
 * server's login queue, which runs auth_verify() on a thread of its own,
 * is auth.c's; the order of that queue, authq.h's.
 */
#ifndef TALLY_EXPORTER_AUTH_H
#define TALLY_EXPORTER_AUTH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct webconfig;

/* Remembered successful logins (keyed hashes, never passwords). */
#define AUTH_CACHE_SIZE 64

struct auth_cached_login {
	uint64_t tag[2];
};

/* What the checks keep for the users of one web config. */
struct auth_cache {
	/* A hash of a random password with cost cost_max, generated at
	 * load: unknown users are checked against it so that they cost
	 * what a known user costs. */
	char dummy[64];
	/* The cache: keys of the keyed hash (random at load), and the
	 * tags of the last AUTH_CACHE_SIZE successful logins. */
	uint64_t key[4];
	pthread_mutex_t cache_lock;
	struct auth_cached_login cache[AUTH_CACHE_SIZE];
	unsigned ncache, next_slot;
	/* The bcrypt checks auth_verify() made and the cost of the last one:
	 * what a login cost, counted rather than timed (by the tests).
	 * Written by the one thread that calls auth_verify(). */
	unsigned long checks;
	int last_cost;
	int initialized;
};

/* auth_cache_init, auth_cache_free: the cache's lock, made and
 * destroyed (free: only when made).  Not MT-safe on one @c. */
void auth_cache_init(struct auth_cache *c);
void auth_cache_free(struct auth_cache *c);

/*
 * auth_bcrypt_cost: the cost of @h when it is a bcrypt hash as crypt(3)
 * writes it ("$2a$", "$2b$" or "$2y$", two digits of cost, "$", 53
 * characters of bcrypt's base64), else -1.
 */
int auth_bcrypt_cost(const char *h);

/*
 * auth_prepare: draw the cache keys of @wc and compute its dummy hash
 * (one bcrypt of wc->cost_max), once its users are known.  0, or a
 * negative errno with "@path: reason" in @err.  Not MT-safe on one @wc.
 */
int auth_prepare(struct webconfig *wc, const char *path, char *err,
		 size_t errlen);

/*
 * auth_cached: 1 when @user and @password are the credentials of one of
 * the last AUTH_CACHE_SIZE successful checks, else 0.  Costs two SipHash
 * computations and a mutex: no bcrypt.  MT-safe.
 */
int auth_cached(struct webconfig *wc, const char *user, const char *password);

/*
 * auth_verify: 1 when @user exists and @password matches its bcrypt hash
 * (crypt_r(3)), else 0; a success is remembered for auth_cached().  An
 * unknown user is checked against a hash of the largest configured cost,
 * so the time taken does not tell which users exist (when all users have
 * the same cost).  Costs one bcrypt: at most WC_MAX_COST.  MT-safe.
 */
int auth_verify(struct webconfig *wc, const char *user, const char *password);

/* auth_check_user: auth_cached() or else auth_verify().  MT-safe. */
int auth_check_user(struct webconfig *wc, const char *user,
		    const char *password);

#endif /* TALLY_EXPORTER_AUTH_H */
