/*
 * authcache.c: the checks of a login against the users of the web
 * config: one bcrypt of a bounded cost (auth_verify()), behind a cache
 * of the recent successes (auth_cached()) kept as keyed hashes, never
 * passwords, so that a scrape with remembered credentials costs no
 * bcrypt.  An unknown user is checked against a dummy hash of the
 * largest configured cost, so that the time a check takes does not tell
 * which users exist.  The queue that keeps these checks off the network
 * threads is auth.c's.
 */
#define _GNU_SOURCE
#include <crypt.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "auth.h"
#include "webconfig.h"

/*
 * A bcrypt hash as crypt(3) writes it: "$2a$", "$2b$" or "$2y$", two
 * digits of cost, "$", then 53 characters of bcrypt's base64 (22 of salt,
 * 31 of hash).  Returns the cost, or -1 when @h is not such a hash.
 */
int auth_bcrypt_cost(const char *h)
{
	static const char b64[] = "./ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789";

	if (strlen(h) != 60 || h[0] != '$' || h[1] != '2' ||
	    (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') || h[3] != '$' ||
	    h[4] < '0' || h[4] > '9' || h[5] < '0' || h[5] > '9' ||
	    h[6] != '$')
		return -1;
	for (const char *p = h + 7; *p; p++)
		if (!strchr(b64, *p))
			return -1;
	return (h[4] - '0') * 10 + (h[5] - '0');
}

/*
 * The dummy hash and the cache keys, once the users are known.  The
 * dummy has the largest cost of the users, so that an unknown user
 * costs what the most expensive known one does.
 */
int auth_prepare(struct webconfig *wc, const char *path, char *err,
		      size_t errlen)
{
	struct auth_cache *ac = &wc->login;
	struct crypt_data *cd;
	unsigned char pw[16];
	char salt[64], hex[33];
	const char *h;

	if (getrandom(ac->key, sizeof(ac->key), 0) != sizeof(ac->key) ||
	    getrandom(pw, sizeof(pw), 0) != sizeof(pw)) {
		snprintf(err, errlen, "%s: no random bytes for the password "
			 "cache: %s", path, strerror(errno));
		return -EIO;
	}
	for (unsigned i = 0; i < sizeof(pw); i++)
		snprintf(hex + 2 * i, 3, "%02x", pw[i]);
	cd = calloc(1, sizeof(*cd));
	if (!cd)
		return -ENOMEM;
	h = crypt_gensalt_rn("$2b$", wc->cost_max, NULL, 0, salt,
			     sizeof(salt));
	if (h)
		h = crypt_r(hex, salt, cd);
	if (!h || h[0] == '*' || strlen(h) >= sizeof(ac->dummy)) {
		free(cd);
		snprintf(err, errlen, "%s: this libcrypt cannot make a bcrypt "
			 "hash of cost %u", path, wc->cost_max);
		return -EINVAL;
	}
	memcpy(ac->dummy, h, strlen(h) + 1);
	free(cd);
	return 0;
}

/*
 * SipHash-2-4 (Aumasson and Bernstein): a keyed hash whose output cannot
 * be predicted or steered to a collision without the key.  Two of them
 * with independent keys give the 128-bit tag of a login.
 */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                        \
	do {                                                            \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                  \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                  \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t siphash(const uint64_t k[2], const unsigned char *in,
			size_t n)
{
	uint64_t v0 = 0x736f6d6570736575ull ^ k[0];
	uint64_t v1 = 0x646f72616e646f6dull ^ k[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ k[0];
	uint64_t v3 = 0x7465646279746573ull ^ k[1];
	uint64_t b = (uint64_t)n << 56, m;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		m = 0;
		for (unsigned j = 0; j < 8; j++)
			m |= (uint64_t)in[i + j] << (8 * j);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (unsigned j = 0; i + j < n; j++)
		b |= (uint64_t)in[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* The tag of "user NUL password" (a user name holds no NUL). */
static int login_tag(const struct webconfig *wc, const char *user,
		     const char *password, uint64_t tag[2])
{
	const struct auth_cache *ac = &wc->login;
	size_t nu = strlen(user), np = strlen(password);
	unsigned char *buf = malloc(nu + np + 1);

	if (!buf)
		return -ENOMEM;
	memcpy(buf, user, nu + 1);
	memcpy(buf + nu + 1, password, np);
	tag[0] = siphash(ac->key, buf, nu + np + 1);
	tag[1] = siphash(ac->key + 2, buf, nu + np + 1);
	memset(buf, 0, nu + np + 1);
	free(buf);
	return 0;
}

int auth_cached(struct webconfig *wc, const char *user, const char *password)
{
	struct auth_cache *ac = &wc->login;
	uint64_t tag[2], hit = 0;

	if (login_tag(wc, user, password, tag) < 0)
		return 0;
	pthread_mutex_lock(&ac->cache_lock);
	for (unsigned i = 0; i < ac->ncache; i++)
		hit |= ((ac->cache[i].tag[0] ^ tag[0]) |
			(ac->cache[i].tag[1] ^ tag[1])) == 0;
	pthread_mutex_unlock(&ac->cache_lock);
	return hit != 0;
}

static int ct_equal(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	unsigned char d = (unsigned char)(na != nb);

	for (size_t i = 0; i < na && i < nb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

int auth_verify(struct webconfig *wc, const char *user, const char *password)
{
	struct auth_cache *ac = &wc->login;
	const char *hash = ac->dummy;
	struct crypt_data *cd;
	const char *out;
	uint64_t tag[2];
	int ok, known = 0;

	if (!wc->nusers)
		return 0;
	for (unsigned i = 0; i < wc->nusers; i++)
		if (strcmp(wc->users[i].name, user) == 0) {
			hash = wc->users[i].hash;
			known = 1;
		}
	cd = calloc(1, sizeof(*cd));
	if (!cd)
		return 0;
	out = crypt_r(password, hash, cd);
	ac->checks++;
	ac->last_cost = auth_bcrypt_cost(hash);
	ok = known && out && out[0] != '*' && ct_equal(out, hash);
	explicit_bzero(cd, sizeof(*cd));
	free(cd);
	if (ok && login_tag(wc, user, password, tag) == 0) {
		/* The oldest entry gives way when the cache is full. */
		pthread_mutex_lock(&ac->cache_lock);
		ac->cache[ac->next_slot].tag[0] = tag[0];
		ac->cache[ac->next_slot].tag[1] = tag[1];
		ac->next_slot = (ac->next_slot + 1) % AUTH_CACHE_SIZE;
		if (ac->ncache < AUTH_CACHE_SIZE)
			ac->ncache++;
		pthread_mutex_unlock(&ac->cache_lock);
	}
	return ok;
}

int auth_check_user(struct webconfig *wc, const char *user,
		    const char *password)
{
	return auth_cached(wc, user, password) ||
	       auth_verify(wc, user, password);
}

void auth_cache_init(struct auth_cache *c)
{
	pthread_mutex_init(&c->cache_lock, NULL);
	c->initialized = 1;
}

void auth_cache_free(struct auth_cache *c)
{
	if (c->initialized)
		pthread_mutex_destroy(&c->cache_lock);
}
