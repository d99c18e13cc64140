/*
 * negotiate.c: which exposition format a scrape's Accept header asks for
 * (text 0.0.4 unless OpenMetrics 1.0.0 has the higher q), and whether its
 * Accept-Encoding allows gzip.  Parameters other than q and version are
 * ignored; a version other than the one served makes the type unwanted.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server.h"

/* The q of one element "type/sub;a=b;q=0.5" (1 when absent), and whether
 * its version parameter, if any, equals @version. */
static double elem_q(const char *e, size_t n, const char *version,
		     int *version_ok)
{
	double q = 1.0;
	const char *p = memchr(e, ';', n), *end = e + n;

	*version_ok = 1;
	while (p && p < end) {
		const char *k = p + 1, *semi;
		size_t kl;

		while (k < end && *k == ' ')
			k++;
		semi = memchr(k, ';', (size_t)(end - k));
		kl = (size_t)((semi ? semi : end) - k);
		if (kl > 2 && strncasecmp(k, "q=", 2) == 0)
			q = strtod(k + 2, NULL);
		else if (kl > 8 && strncasecmp(k, "version=", 8) == 0)
			*version_ok = version && kl - 8 == strlen(version) &&
				      strncmp(k + 8, version, kl - 8) == 0;
		p = semi;
	}
	return q;
}

enum ex_format server_negotiate(const char *accept)
{
	double om = 0, text = 0;
	const char *p = accept;

	if (!accept)
		return EX_TEXT;
	while (*p) {
		const char *comma = strchr(p, ','), *e = p;
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		size_t tl;
		int vok;
		double q;

		while (n && *e == ' ') {
			e++;
			n--;
		}
		tl = strcspn(e, ";,");
		if (tl > n)
			tl = n;
		while (tl && e[tl - 1] == ' ')
			tl--;
		if (tl == 28 && strncasecmp(e, "application/openmetrics-text",
					    28) == 0) {
			q = elem_q(e, n, "1.0.0", &vok);
			if (vok && q > om)
				om = q;
		} else if (tl == 10 && strncasecmp(e, "text/plain", 10) == 0) {
			q = elem_q(e, n, "0.0.4", &vok);
			if (vok && q > text)
				text = q;
		} else if ((tl == 3 && strncmp(e, "*/*", 3) == 0) ||
			   (tl == 6 && strncasecmp(e, "text/*", 6) == 0)) {
			q = elem_q(e, n, NULL, &vok);
			if (q > text)
				text = q;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	return om > 0 && om > text ? EX_OPENMETRICS : EX_TEXT;
}

int server_gzip_ok(const char *ae)
{
	const char *p = ae;

	if (!ae)
		return 0;
	while (*p) {
		const char *comma = strchr(p, ','), *e = p;
		size_t n = comma ? (size_t)(comma - p) : strlen(p), tl;
		int vok;

		while (n && *e == ' ') {
			e++;
			n--;
		}
		tl = strcspn(e, ";, ");
		if (tl > n)
			tl = n;
		if ((tl == 4 && strncasecmp(e, "gzip", 4) == 0) ||
		    (tl == 1 && e[0] == '*'))
			return elem_q(e, n, NULL, &vok) > 0;
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}
