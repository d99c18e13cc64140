/*
 * webconfig.c: the strict YAML subset of webconfig.h, and basic-auth
 * checks with bcrypt.
 *
 * Accepted: comments (# at the start of a line or after a space),
 * blank lines, "key:" opening a mapping at column 0, "  key: value"
 * inside it (indentation of spaces, the same for every entry), values
 * plain or in '...' or "..." quotes.  Nothing else.
 */
#define _GNU_SOURCE
#include <crypt.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "webconfig.h"

static int fail(char *err, size_t n, const char *path, unsigned line,
		const char *fmt, const char *arg)
{
	char msg[300];

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

int wc_parse(const char *text, const char *path, struct webconfig *wc,
	     char *err, size_t errlen)
{
	char *copy = strdup(text), *line;
	enum { NONE, TLS, USERS } sect = NONE;
	int indent = -1, rc = 0;
	unsigned ln = 0;

	memset(wc, 0, sizeof(*wc));
	if (!copy)
		return -ENOMEM;
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
			if (strcmp(key, "tls_server_config") == 0)
				sect = TLS;
			else if (strcmp(key, "basic_auth_users") == 0)
				sect = USERS;
			else {
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

			for (unsigned i = 0; i < wc->nusers; i++)
				if (strcmp(wc->users[i].name, key) == 0) {
					rc = fail(err, errlen, path, ln,
						  "user '%s' given twice", key);
					goto out;
				}
			if (strncmp(val, "$2y$", 4) && strncmp(val, "$2b$", 4) &&
			    strncmp(val, "$2a$", 4)) {
				rc = fail(err, errlen, path, ln, "the password "
					  "of '%s' is not a bcrypt hash "
					  "($2y$/$2b$/$2a$)", key);
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
			wc->nusers++;
		}
	}
	if (!wc->cert_file != !wc->key_file) {
		rc = fail(err, errlen, path, ln, "tls_server_config needs both "
			  "cert_file and key_file", NULL);
		goto out;
	}
out:
	free(copy);
	if (rc)
		wc_free(wc);
	return rc;
}

static char *slurp(const char *path, char *err, size_t errlen, int *rc)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f) {
		*rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		size_t got;

		if (cap - n < 4096) {
			cap = cap ? cap * 2 : 8192;
			if (cap > (1u << 20)) {
				*rc = -EFBIG;
				snprintf(err, errlen, "%s: larger than 1 MiB",
					 path);
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = realloc(buf, cap);
			if (!buf) {
				*rc = -ENOMEM;
				fclose(f);
				return NULL;
			}
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	buf[n] = '\0';
	*rc = 0;
	return buf;
}

int wc_load(const char *path, struct webconfig *wc, char *err, size_t errlen)
{
	int rc;
	char *text = slurp(path, err, errlen, &rc);

	if (!text)
		return rc;
	rc = wc_parse(text, path, wc, err, errlen);
	free(text);
	if (rc)
		return rc;
	if (wc->cert_file) {
		wc->cert_pem = slurp(wc->cert_file, err, errlen, &rc);
		if (wc->cert_pem)
			wc->key_pem = slurp(wc->key_file, err, errlen, &rc);
		if (rc) {
			wc_free(wc);
			return rc;
		}
	}
	return 0;
}

/* The remembered good passwords: user index -> password. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static int ct_equal(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	unsigned char d = (unsigned char)(na != nb);

	for (size_t i = 0; i < na && i < nb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

struct cached {
	char *user, *password;
};
static struct cached *cache;
static unsigned ncache;

int wc_check_user(struct webconfig *wc, const char *user,
		  const char *password)
{
	/* A valid bcrypt hash (of a random string) to spend the same time on
	 * unknown users. */
	static const char dummy[] =
		"$2b$10$CwTycUXWue0Thq9StjUM0uJ8DPLKXt1FYlwYpQW5d7P9wU3Bgj9nG";
	const char *hash = dummy;
	struct crypt_data *cd;
	const char *out;
	int ok = 0, known = 0;

	pthread_mutex_lock(&cache_lock);
	for (unsigned i = 0; i < ncache; i++)
		if (strcmp(cache[i].user, user) == 0 &&
		    ct_equal(cache[i].password, password)) {
			pthread_mutex_unlock(&cache_lock);
			return 1;
		}
	pthread_mutex_unlock(&cache_lock);

	for (unsigned i = 0; i < wc->nusers; i++)
		if (strcmp(wc->users[i].name, user) == 0) {
			hash = wc->users[i].hash;
			known = 1;
		}
	cd = calloc(1, sizeof(*cd));
	if (!cd)
		return 0;
	out = crypt_r(password, hash, cd);
	ok = known && out && out[0] != '*' && ct_equal(out, hash);
	free(cd);
	if (ok) {
		pthread_mutex_lock(&cache_lock);
		if (ncache < 64) {
			struct cached *c = realloc(cache, (ncache + 1) *
						   sizeof(*c));
			if (c) {
				cache = c;
				cache[ncache].user = strdup(user);
				cache[ncache].password = strdup(password);
				if (cache[ncache].user && cache[ncache].password)
					ncache++;
			}
		}
		pthread_mutex_unlock(&cache_lock);
	}
	return ok;
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
	memset(wc, 0, sizeof(*wc));
}
