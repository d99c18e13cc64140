/*
 * webconfig.c: the strict YAML subset of webconfig.h, reading its files
 * without blocking or trusting their size, and basic-auth checks with
 * bcrypt of a bounded cost behind a cache of keyed hashes.
 *
 * Accepted: comments (# at the start of a line or after a space),
 * blank lines, "key:" opening a mapping at column 0, "  key: value"
 * inside it (indentation of spaces, the same for every entry), values
 * plain or in '...' or "..." quotes.  Nothing else.
 */
#define _GNU_SOURCE
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "webconfig.h"

static int fail(char *err, size_t n, const char *path, unsigned line,
		const char *fmt, const char *arg)
{
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, arg ? arg : "");
	snprintf(err, n, "%s:%u: %s", path, line, msg);
	return -EINVAL;
}

/* Strip a trailing comment and spaces; unquote.  Returns NULL if bad. */
static char *scalar(char *v, char **why)
{
	size_t n;

	while (*v == ' ')
		v++;
	if (*v == '"' || *v == '\'') {
		char q = *v++;
		char *end = strchr(v, q);
		char *rest;

		if (!end) {
			*why = "unterminated quoted value";
			return NULL;
		}
		*end = '\0';
		rest = end + 1;
		while (*rest == ' ')
			rest++;
		if (*rest && *rest != '#') {
			*why = "text after a quoted value";
			return NULL;
		}
		if (q == '"' && strchr(v, '\\')) {
			*why = "escapes in double-quoted values are not "
			       "supported (use single quotes)";
			return NULL;
		}
		return v;
	}
	for (char *p = v; *p; p++)
		if (*p == '#' && (p == v || p[-1] == ' ')) {
			*p = '\0';
			break;
		}
	n = strlen(v);
	while (n && v[n - 1] == ' ')
		v[--n] = '\0';
	if (*v == '[' || *v == '{' || *v == '&' || *v == '*' || *v == '!' ||
	    *v == '|' || *v == '>') {
		*why = "flow collections, anchors, tags and block scalars are "
		       "not supported";
		return NULL;
	}
	return v;
}

/*
 * A bcrypt hash as crypt(3) writes it: "$2a$", "$2b$" or "$2y$", two
 * digits of cost, "$", then 53 characters of bcrypt's base64 (22 of salt,
 * 31 of hash).  Returns the cost, or -1 when @h is not such a hash.
 */
static int bcrypt_cost(const char *h)
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
static int wc_prepare(struct webconfig *wc, const char *path, char *err,
		      size_t errlen)
{
	struct crypt_data *cd;
	unsigned char pw[16];
	char salt[64], hex[33];
	const char *h;

	if (getrandom(wc->key, sizeof(wc->key), 0) != sizeof(wc->key) ||
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
	if (!h || h[0] == '*' || strlen(h) >= sizeof(wc->dummy)) {
		free(cd);
		snprintf(err, errlen, "%s: this libcrypt cannot make a bcrypt "
			 "hash of cost %u", path, wc->cost_max);
		return -EINVAL;
	}
	memcpy(wc->dummy, h, strlen(h) + 1);
	free(cd);
	return 0;
}

int wc_parse(const char *text, const char *path, struct webconfig *wc,
	     char *err, size_t errlen)
{
	char *copy = strdup(text), *line;
	enum { NONE, TLS, USERS } sect = NONE;
	int indent = -1, rc = 0;
	unsigned ln = 0, tls_line = 0, users_line = 0;

	memset(wc, 0, sizeof(*wc));
	pthread_mutex_init(&wc->cache_lock, NULL);
	wc->initialized = 1;
	if (!copy) {
		wc_free(wc);
		return -ENOMEM;
	}
	for (char *next = copy; next;) {
		char *why = NULL, *colon, *key, *val;
		int ind = 0;

		line = next;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		ln++;
		if (strchr(line, '\t')) {
			rc = fail(err, errlen, path, ln, "tab character "
				  "(YAML indents with spaces)", NULL);
			goto out;
		}
		if (line[0] && line[strlen(line) - 1] == '\r')
			line[strlen(line) - 1] = '\0';
		while (line[ind] == ' ')
			ind++;
		if (!line[ind] || line[ind] == '#')
			continue;
		if (strcmp(line + ind, "---") == 0 && ind == 0)
			continue;
		key = line + ind;
		colon = strchr(key, ':');
		if (!colon || (colon[1] && colon[1] != ' ')) {
			rc = fail(err, errlen, path, ln, "expected 'key: "
				  "value' or 'key:'", NULL);
			goto out;
		}
		*colon = '\0';
		if (*key == '"' || *key == '\'' || *key == '-' || *key == '?') {
			rc = fail(err, errlen, path, ln, "quoted keys, lists and "
				  "complex keys are not supported", NULL);
			goto out;
		}
		val = scalar(colon + 1, &why);
		if (!val) {
			rc = fail(err, errlen, path, ln, "%s", why);
			goto out;
		}
		if (ind == 0) {
			if (*val) {
				rc = fail(err, errlen, path, ln, "'%s' must "
					  "be a mapping", key);
				goto out;
			}
			if (strcmp(key, "tls_server_config") == 0) {
				sect = TLS;
				tls_line = ln;
			} else if (strcmp(key, "basic_auth_users") == 0) {
				sect = USERS;
				users_line = ln;
			} else {
				rc = fail(err, errlen, path, ln, "unsupported "
					  "setting '%s' (tally-exporter knows "
					  "tls_server_config and "
					  "basic_auth_users)", key);
				goto out;
			}
			indent = -1;
			continue;
		}
		if (sect == NONE) {
			rc = fail(err, errlen, path, ln, "indented line "
				  "outside a mapping", NULL);
			goto out;
		}
		if (indent < 0)
			indent = ind;
		if (ind != indent) {
			rc = fail(err, errlen, path, ln, "inconsistent "
				  "indentation (nested mappings are not "
				  "supported)", NULL);
			goto out;
		}
		if (!*val) {
			rc = fail(err, errlen, path, ln, "'%s' has no value",
				  key);
			goto out;
		}
		if (sect == TLS) {
			char **dst;

			if (strcmp(key, "cert_file") == 0)
				dst = &wc->cert_file;
			else if (strcmp(key, "key_file") == 0)
				dst = &wc->key_file;
			else {
				rc = fail(err, errlen, path, ln, "unsupported "
					  "tls_server_config setting '%s' "
					  "(supported: cert_file, key_file)",
					  key);
				goto out;
			}
			if (*dst) {
				rc = fail(err, errlen, path, ln, "'%s' given "
					  "twice", key);
				goto out;
			}
			*dst = strdup(val);
		} else {
			struct wc_user *u;
			int cost;

			for (unsigned i = 0; i < wc->nusers; i++)
				if (strcmp(wc->users[i].name, key) == 0) {
					rc = fail(err, errlen, path, ln,
						  "user '%s' given twice", key);
					goto out;
				}
			cost = bcrypt_cost(val);
			if (cost < 0) {
				rc = fail(err, errlen, path, ln, "the password "
					  "of '%s' is not a bcrypt hash "
					  "($2y$/$2b$/$2a$, 60 characters)",
					  key);
				goto out;
			}
			if (cost < WC_MIN_COST || cost > WC_MAX_COST) {
				char what[300];

				snprintf(what, sizeof(what), "user '%.60s': "
					 "bcrypt cost %d is outside %d..%d (a "
					 "check of cost %d takes %s; hash the "
					 "password again, e.g. htpasswd -nBC "
					 "10)", key, cost, WC_MIN_COST,
					 WC_MAX_COST, cost, cost < WC_MIN_COST ?
					 "nothing: bcrypt has no such cost" :
					 cost <= 16 ? "seconds" :
					 cost <= 24 ? "minutes to hours" :
					 "days");
				rc = fail(err, errlen, path, ln, "%s", what);
				goto out;
			}
			u = realloc(wc->users, (wc->nusers + 1) * sizeof(*u));
			if (!u) {
				rc = -ENOMEM;
				goto out;
			}
			wc->users = u;
			u[wc->nusers].name = strdup(key);
			u[wc->nusers].hash = strdup(val);
			u[wc->nusers].cost = (unsigned)cost;
			wc->nusers++;
			if (!u[wc->nusers - 1].name ||
			    !u[wc->nusers - 1].hash) {
				rc = -ENOMEM;
				goto out;
			}
			if (wc->nusers == 1 || (unsigned)cost < wc->cost_min)
				wc->cost_min = (unsigned)cost;
			if ((unsigned)cost > wc->cost_max)
				wc->cost_max = (unsigned)cost;
		}
	}
	if (!wc->cert_file != !wc->key_file) {
		rc = fail(err, errlen, path, ln, "tls_server_config needs both "
			  "cert_file and key_file", NULL);
		goto out;
	}
	/* Fail closed: a section that is there but empty, or a file that
	 * sets nothing, would otherwise serve plain HTTP without
	 * authentication to someone who asked for TLS or users. */
	if (tls_line && !wc->cert_file) {
		rc = fail(err, errlen, path, tls_line, "tls_server_config has "
			  "no cert_file and key_file", NULL);
		goto out;
	}
	if (users_line && !wc->nusers) {
		rc = fail(err, errlen, path, users_line, "basic_auth_users "
			  "lists no user", NULL);
		goto out;
	}
	if (!wc->cert_file && !wc->nusers) {
		rc = fail(err, errlen, path, ln ? ln : 1, "sets neither "
			  "tls_server_config nor basic_auth_users (to serve "
			  "plain HTTP without authentication, leave out "
			  "--web.config.file)", NULL);
		goto out;
	}
	if (wc->nusers)
		rc = wc_prepare(wc, path, err, errlen);
out:
	free(copy);
	if (rc)
		wc_free(wc);
	return rc;
}

/*
 * Read the regular file @path whole, without blocking: it is opened
 * O_NONBLOCK (a FIFO opens at once, and is then refused by its type), its
 * type checked on the descriptor, and at most WC_MAX_FILE bytes read (a
 * file that grows while read is cut there and refused).  @what names the
 * file in messages.  @st gets its status.
 */
static char *slurp(const char *path, const char *what, struct stat *st,
		   char *err, size_t errlen, int *rc)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	char *buf = NULL;
	size_t n = 0;
	int e;

	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(e));
		*rc = -e;
		return NULL;
	}
	if (fstat(fd, st) < 0) {
		e = errno;
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(e));
		goto fail;
	}
	if (!S_ISREG(st->st_mode)) {
		e = EINVAL;
		snprintf(err, errlen, "%s %s: not a regular file (%s)", what,
			 path, S_ISDIR(st->st_mode) ? "a directory" :
			 S_ISFIFO(st->st_mode) ? "a FIFO" :
			 S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ?
			 "a device" : S_ISSOCK(st->st_mode) ? "a socket" :
			 "not a file");
		goto fail;
	}
	if (st->st_size > (off_t)WC_MAX_FILE) {
		e = EFBIG;
		snprintf(err, errlen, "%s %s: larger than %u bytes", what, path,
			 WC_MAX_FILE);
		goto fail;
	}
	buf = malloc(WC_MAX_FILE + 2);
	if (!buf) {
		e = ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (;;) {
		ssize_t got = read(fd, buf + n, WC_MAX_FILE + 1 - n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			e = errno;
			snprintf(err, errlen, "%s %s: %s", what, path,
				 strerror(e));
			goto fail;
		}
		if (got == 0)
			break;
		n += (size_t)got;
		if (n > WC_MAX_FILE) {
			e = EFBIG;
			snprintf(err, errlen, "%s %s: larger than %u bytes",
				 what, path, WC_MAX_FILE);
			goto fail;
		}
	}
	close(fd);
	buf[n] = '\0';
	if (memchr(buf, '\0', n)) {
		free(buf);
		snprintf(err, errlen, "%s %s: holds a NUL byte (not text)",
			 what, path);
		*rc = -EINVAL;
		return NULL;
	}
	*rc = 0;
	return buf;
fail:
	free(buf);
	close(fd);
	*rc = -e;
	return NULL;
}

int wc_load(const char *path, struct webconfig *wc, char *err, size_t errlen)
{
	struct stat st, fst;
	int rc;
	char *text = slurp(path, "web config", &st, err, errlen, &rc);

	if (!text)
		return rc;
	rc = wc_parse(text, path, wc, err, errlen);
	free(text);
	if (rc)
		return rc;
	wc->world_readable = wc->nusers && (st.st_mode & S_IROTH);
	if (wc->cert_file) {
		wc->cert_pem = slurp(wc->cert_file, "cert_file", &fst, err,
				     errlen, &rc);
		if (wc->cert_pem)
			wc->key_pem = slurp(wc->key_file, "key_file", &fst,
					    err, errlen, &rc);
		if (rc) {
			wc_free(wc);
			return rc;
		}
		wc->key_world_readable = (fst.st_mode & S_IROTH) != 0;
	}
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
	size_t nu = strlen(user), np = strlen(password);
	unsigned char *buf = malloc(nu + np + 1);

	if (!buf)
		return -ENOMEM;
	memcpy(buf, user, nu + 1);
	memcpy(buf + nu + 1, password, np);
	tag[0] = siphash(wc->key, buf, nu + np + 1);
	tag[1] = siphash(wc->key + 2, buf, nu + np + 1);
	memset(buf, 0, nu + np + 1);
	free(buf);
	return 0;
}

int wc_cached(struct webconfig *wc, const char *user, const char *password)
{
	uint64_t tag[2], hit = 0;

	if (login_tag(wc, user, password, tag) < 0)
		return 0;
	pthread_mutex_lock(&wc->cache_lock);
	for (unsigned i = 0; i < wc->ncache; i++)
		hit |= ((wc->cache[i].tag[0] ^ tag[0]) |
			(wc->cache[i].tag[1] ^ tag[1])) == 0;
	pthread_mutex_unlock(&wc->cache_lock);
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

int wc_verify(struct webconfig *wc, const char *user, const char *password)
{
	const char *hash = wc->dummy;
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
	wc->checks++;
	wc->last_cost = bcrypt_cost(hash);
	ok = known && out && out[0] != '*' && ct_equal(out, hash);
	explicit_bzero(cd, sizeof(*cd));
	free(cd);
	if (ok && login_tag(wc, user, password, tag) == 0) {
		/* The oldest entry gives way when the cache is full. */
		pthread_mutex_lock(&wc->cache_lock);
		wc->cache[wc->next_slot].tag[0] = tag[0];
		wc->cache[wc->next_slot].tag[1] = tag[1];
		wc->next_slot = (wc->next_slot + 1) % WC_CACHE_SIZE;
		if (wc->ncache < WC_CACHE_SIZE)
			wc->ncache++;
		pthread_mutex_unlock(&wc->cache_lock);
	}
	return ok;
}

int wc_check_user(struct webconfig *wc, const char *user,
		  const char *password)
{
	return wc_cached(wc, user, password) ||
	       wc_verify(wc, user, password);
}

void wc_free(struct webconfig *wc)
{
	free(wc->cert_file);
	free(wc->key_file);
	free(wc->cert_pem);
	free(wc->key_pem);
	for (unsigned i = 0; i < wc->nusers; i++) {
		free(wc->users[i].name);
		free(wc->users[i].hash);
	}
	free(wc->users);
	if (wc->initialized)
		pthread_mutex_destroy(&wc->cache_lock);
	memset(wc, 0, sizeof(*wc));
}
