/*
 * listen.h: the listening socket of --listen.
 */
#ifndef TALLY_EXPORTER_LISTEN_H
#define TALLY_EXPORTER_LISTEN_H

#include <stddef.h>

/*
 * listen_parse: split "HOST:PORT", "[IPV6]:PORT" or ":PORT" into @host
 * (empty for every address) and @port.  Return 0 or -EINVAL with the
 * reason in @err.
 */
int listen_parse(const char *addr, char *host, size_t hostlen,
		 unsigned *port, char *err, size_t errlen);

/*
 * listen_open: a socket bound to @addr and listening, close-on-exec.
 * Return it, or -errno with a one-line message in @err ("cannot listen on
 * 127.0.0.1:9477: address already in use").  @shown gets the address
 * really bound (the port chosen when PORT was 0).
 */
int listen_open(const char *addr, char *err, size_t errlen, char *shown,
		size_t shownlen);

#endif /* TALLY_EXPORTER_LISTEN_H */
