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
 * refusal to start).
 */
#ifndef TALLY_EXPORTER_WEBCONFIG_H
#define TALLY_EXPORTER_WEBCONFIG_H

#include <stddef.h>

struct wc_user {
	char *name, *hash;
};

struct webconfig {
	char *cert_file, *key_file;   /* both or neither */
	char *cert_pem, *key_pem;     /* their contents, read at load */
	struct wc_user *users;
	unsigned nusers;
};

/*
 * wc_parse: parse the YAML text @text (from @path, for messages) into
 * @wc.  Return 0, or -EINVAL with "PATH:LINE: reason" in @err.
 */
int wc_parse(const char *text, const char *path, struct webconfig *wc,
	     char *err, size_t errlen);

/* wc_load: read @path, parse it, and read the certificate and key files.
 * Return 0 or -errno with a one-line message in @err. */
int wc_load(const char *path, struct webconfig *wc, char *err, size_t errlen);

/*
 * wc_check_user: 1 when @user exists and @password matches its bcrypt
 * hash (crypt_r(3)), else 0.  A user that does not exist costs a bcrypt
 * too, so timing does not tell which users exist.  Successful checks are
 * remembered (in memory) so that a scrape every second does not pay a
 * bcrypt each time.  MT-safe.
 */
int wc_check_user(struct webconfig *wc, const char *user,
		  const char *password);

void wc_free(struct webconfig *wc);

#endif /* TALLY_EXPORTER_WEBCONFIG_H */
