/*
 * programs/common/parse.c: numbers, label names and parse errors,
 * and the report of a bad command line (parse.h).
 */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int tp_parse_ulong(const char **pp, unsigned long lo, unsigned long hi,
		   unsigned long *out)
{
	const char *p = *pp;
	unsigned long v = 0;

	if (!isdigit((unsigned char)*p))
		return -1;
	while (isdigit((unsigned char)*p)) {
		v = v * 10 + (unsigned long)(*p++ - '0');
		if (v > hi)
			return -1;
	}
	if (v < lo)
		return -1;
	*pp = p;
	*out = v;
	return 0;
}

/* ASCII only, whatever the locale (tallystat sets one for widths). */
static int name_char(char c, int first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && c >= '0' && c <= '9');
}

size_t tp_label_name_len(const char *s)
{
	size_t n = 0;

	while (s[n] && name_char(s[n], n == 0))
		n++;
	return n;
}

int tp_bad_usage(const char *prog, const char *hint, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s\n", hint);
	return -1;
}

int tp_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}
