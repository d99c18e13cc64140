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
#include <stddef.h>
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

/* The sections of the file: each a mapping at column 0. */
enum section { NONE, TLS, USERS };

/* What wc_parse() keeps from line to line. */
struct parse {
	struct webconfig *wc;
	const char *path;
	char *err;
	size_t errlen;
	enum section sect;
	int indent;                /* of the entries of sect; -1: none yet */
	unsigned ln;               /* the line being read, from 1 */
	unsigned tls_line, users_line; /* where each section opened */
};

static int bad(struct parse *p, const char *fmt, const char *arg)
{
	return fail(p->err, p->errlen, p->path, p->ln, fmt, arg);
}

/* "cert_file: PATH" or "key_file: PATH" in tls_server_config. */
static int tls_entry(struct parse *p, const char *key, const char *val)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "cert_file", offsetof(struct webconfig, cert_file) },
		{ "key_file", offsetof(struct webconfig, key_file) },
	};
	char **dst = NULL;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(key, keys[i].key) == 0)
			dst = (char **)((char *)p->wc + keys[i].off);
	if (!dst)
		return bad(p, "unsupported tls_server_config setting '%s' "
			   "(supported: cert_file, key_file)", key);
	if (*dst)
		return bad(p, "'%s' given twice", key);
	*dst = strdup(val);
	return 0;
}

/* The cost of user @key's hash @val, or a negative errno (the reason in
 * p->err) when it is not a bcrypt hash of an accepted cost. */
static int user_cost(struct parse *p, const char *key, const char *val)
{
	int cost = auth_bcrypt_cost(val);
	char what[300];

	if (cost < 0)
		return bad(p, "the password of '%s' is not a bcrypt hash "
			   "($2y$/$2b$/$2a$, 60 characters)", key);
	if (cost >= WC_MIN_COST && cost <= WC_MAX_COST)
		return cost;
	snprintf(what, sizeof(what), "user '%.60s': bcrypt cost %d is outside "
		 "%d..%d (a check of cost %d takes %s; hash the password "
		 "again, e.g. htpasswd -nBC 10)", key, cost, WC_MIN_COST,
		 WC_MAX_COST, cost, cost < WC_MIN_COST ?
		 "nothing: bcrypt has no such cost" :
		 cost <= 16 ? "seconds" :
		 cost <= 24 ? "minutes to hours" : "days");
	return bad(p, "%s", what);
}

/* "USER: HASH" in basic_auth_users. */
static int user_entry(struct parse *p, const char *key, const char *val)
{
	struct webconfig *wc = p->wc;
	struct wc_user *u;
	int cost;

	for (unsigned i = 0; i < wc->nusers; i++)
		if (strcmp(wc->users[i].name, key) == 0)
			return bad(p, "user '%s' given twice", key);
	cost = user_cost(p, key, val);
	if (cost < 0)
		return cost;
	u = realloc(wc->users, (wc->nusers + 1) * sizeof(*u));
	if (!u)
		return -ENOMEM;
	wc->users = u;
	u[wc->nusers].name = strdup(key);
	u[wc->nusers].hash = strdup(val);
	u[wc->nusers].cost = (unsigned)cost;
	wc->nusers++;
	if (!u[wc->nusers - 1].name || !u[wc->nusers - 1].hash)
		return -ENOMEM;
	if (wc->nusers == 1 || (unsigned)cost < wc->cost_min)
		wc->cost_min = (unsigned)cost;
	if ((unsigned)cost > wc->cost_max)
		wc->cost_max = (unsigned)cost;
	return 0;
}

/* The keys of column 0, each opening a mapping whose entries its
 * handler reads. */
static const struct {
	const char *key;
	enum section sect;
	int (*entry)(struct parse *p, const char *key, const char *val);
} sections[] = {
	{ "tls_server_config", TLS, tls_entry },
	{ "basic_auth_users", USERS, user_entry },
};

/* "KEY:" at column 0: a section opens. */
static int open_section(struct parse *p, const char *key, const char *val)
{
	if (*val)
		return bad(p, "'%s' must be a mapping", key);
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
		if (strcmp(key, sections[i].key) == 0) {
			p->sect = sections[i].sect;
			if (p->sect == TLS)
				p->tls_line = p->ln;
			else
				p->users_line = p->ln;
			p->indent = -1;
			return 0;
		}
	return bad(p, "unsupported setting '%s' (tally-exporter knows "
		   "tls_server_config and basic_auth_users)", key);
}

/* "  KEY: VALUE" at indentation @ind: an entry of the open section. */
static int section_entry(struct parse *p, int ind, const char *key,
			 const char *val)
{
	if (p->sect == NONE)
		return bad(p, "indented line outside a mapping", NULL);
	if (p->indent < 0)
		p->indent = ind;
	if (ind != p->indent)
		return bad(p, "inconsistent indentation (nested mappings are "
			   "not supported)", NULL);
	if (!*val)
		return bad(p, "'%s' has no value", key);
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
		if (sections[i].sect == p->sect)
			return sections[i].entry(p, key, val);
	return -EINVAL;
}

/* One line of the file, NUL-terminated in place. */
static int parse_line(struct parse *p, char *line)
{
	char *why = NULL, *colon, *key, *val;
	int ind = 0;

	if (strchr(line, '\t'))
		return bad(p, "tab character (YAML indents with spaces)",
			   NULL);
	if (line[0] && line[strlen(line) - 1] == '\r')
		line[strlen(line) - 1] = '\0';
	while (line[ind] == ' ')
		ind++;
	if (!line[ind] || line[ind] == '#')
		return 0;
	if (strcmp(line + ind, "---") == 0 && ind == 0)
		return 0;
	key = line + ind;
	colon = strchr(key, ':');
	if (!colon || (colon[1] && colon[1] != ' '))
		return bad(p, "expected 'key: value' or 'key:'", NULL);
	*colon = '\0';
	if (*key == '"' || *key == '\'' || *key == '-' || *key == '?')
		return bad(p, "quoted keys, lists and complex keys are not "
			   "supported", NULL);
	val = scalar(colon + 1, &why);
	if (!val)
		return bad(p, "%s", why);
	if (ind == 0)
		return open_section(p, key, val);
	return section_entry(p, ind, key, val);
}

/* After the last line: what the whole file must hold. */
static int parse_end(struct parse *p)
{
	struct webconfig *wc = p->wc;

	if (!wc->cert_file != !wc->key_file)
		return bad(p, "tls_server_config needs both cert_file and "
			   "key_file", NULL);
	/* Fail closed: a section that is there but empty, or a file that
	 * sets nothing, would otherwise serve plain HTTP without
	 * authentication to someone who asked for TLS or users. */
	if (p->tls_line && !wc->cert_file)
		return fail(p->err, p->errlen, p->path, p->tls_line,
			    "tls_server_config has no cert_file and key_file",
			    NULL);
	if (p->users_line && !wc->nusers)
		return fail(p->err, p->errlen, p->path, p->users_line,
			    "basic_auth_users lists no user", NULL);
	if (!wc->cert_file && !wc->nusers)
		return fail(p->err, p->errlen, p->path, p->ln ? p->ln : 1,
			    "sets neither tls_server_config nor "
			    "basic_auth_users (to serve plain HTTP without "
			    "authentication, leave out --web.config.file)",
			    NULL);
	if (wc->nusers)
		return auth_prepare(wc, p->path, p->err, p->errlen);
	return 0;
}

int wc_parse(const char *text, const char *path, struct webconfig *wc,
	     char *err, size_t errlen)
{
	struct parse p = { wc, path, err, errlen, NONE, -1, 0, 0, 0 };
	char *copy = strdup(text);
	int rc = 0;

	memset(wc, 0, sizeof(*wc));
	auth_cache_init(&wc->login);
	if (!copy) {
		wc_free(wc);
		return -ENOMEM;
	}
	for (char *line = copy, *next; line && rc == 0; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		p.ln++;
		rc = parse_line(&p, line);
	}
	if (rc == 0)
		rc = parse_end(&p);
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
	auth_cache_free(&wc->login);
	memset(wc, 0, sizeof(*wc));
}
