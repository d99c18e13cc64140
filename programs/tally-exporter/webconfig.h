/*
 * webconfig.h: the exporter-toolkit web configuration file
 * (--web.config.file), the subset tally-exporter supports:
 *
 *   tls_server_config:
 *     cert_file: /etc/tally/exporter.crt
 *     key_file: /etc/tally/exporter.key
 *   basic_auth_users:
 *     prometheus: $2y$10$...   # bcrypt hash (htpasswd -nBC 10)
 *
 * The parser is strict: a key it does not know, a tab, a flow mapping, a
 * value it cannot read is an error naming the line, rather than a setting
 * silently ignored (a security setting that is ignored is worse than a
 * refusal to start).  It fails closed: a file that is not a regular file,
 * cannot be read, or sets neither TLS nor users is an error, never a
 * plain-HTTP server without authentication.
 *
 * The checks of a login against its users, and the cache of recent
 * successes this struct holds for them, are auth.h's.
 */
#ifndef TALLY_EXPORTER_WEBCONFIG_H
#define TALLY_EXPORTER_WEBCONFIG_H

#include <stddef.h>

#include "auth.h"

/*
 * The largest bcrypt cost accepted: 2^12 rounds take about 0.2 s on a
 * 2020s x86-64 core, so a wrong password costs a fraction of Prometheus's
 * 10 s scrape timeout even on a slower machine; cost 13 doubles that, and
 * a cost of 31 holds a thread for days.  Cost 4 is bcrypt's minimum.
 */
#define WC_MIN_COST 4
#define WC_MAX_COST 12
/* The largest web config, certificate or key file read. */
#define WC_MAX_FILE (1u << 20)

struct wc_user {
	char *name, *hash;
	unsigned cost;
};

struct webconfig {
	char *cert_file, *key_file;   /* both or neither */
	char *cert_pem, *key_pem;     /* their contents, read at load */
	struct wc_user *users;
	unsigned nusers;
	unsigned cost_min, cost_max;  /* over the users */
	int world_readable;           /* users' hashes readable by others */
	int key_world_readable;       /* the TLS key readable by others */
	struct auth_cache login;      /* the checks of its users (auth.h) */
};

/*
 * wc_parse: parse the YAML text @text (from @path, for messages) into
 * @wc: every hash must be a well-formed bcrypt hash of cost WC_MIN_COST
 * to WC_MAX_COST, and the file must set TLS or users (or both).  With
 * users, also draws the cache keys and computes the dummy hash (one
 * bcrypt of the largest cost).  Return 0, -EINVAL with "PATH:LINE:
 * reason" in @err, or -ENOMEM.  Not MT-safe on one @wc.
 */
int wc_parse(const char *text, const char *path, struct webconfig *wc,
	     char *err, size_t errlen);

/*
 * wc_load: read @path (a regular file of at most WC_MAX_FILE bytes; a
 * directory, FIFO or device is refused without blocking), parse it, and
 * read the certificate and key files the same way.  Sets
 * wc->world_readable when the file holding users' hashes is readable by
 * others, wc->key_world_readable when the TLS key is (the caller warns).
 * Return 0 or a negative errno with a one-line message in @err.  Not
 * MT-safe on one @wc.
 */
int wc_load(const char *path, struct webconfig *wc, char *err, size_t errlen);

/* wc_free: release what wc_parse() or wc_load() allocated.  Not
 * MT-safe on one @wc. */
void wc_free(struct webconfig *wc);

#endif /* TALLY_EXPORTER_WEBCONFIG_H */
