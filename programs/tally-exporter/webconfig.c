/*
 * webconfig.c: the strict YAML subset of webconfig.h, and reading its
 * files without blocking or trusting their size.  The checks of a
 * password against the users it lists are authcache.c's.
 *
 * Accepted: comments (# at the start of a line or after a space),
 * blank lines, "key:" opening a mapping at column 0, "  key: value"
 * inside it (indentation of spaces, the same for every entry), values
 * plain or in '...' or "..." quotes.  Nothing else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
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
			cost = auth_bcrypt_cost(val);
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
		rc = auth_prepare(wc, path, err, errlen);
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
