/*
 * names.c: the rules for metric names, label names, units and text,
 * shared by writers (which refuse bad input) and readers (which refuse
 * corrupt files, so that what they pass on is always well formed).
 *
 * Readers check every label of every series on every pass, so these are
 * table-driven and take a fast path for ASCII.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "format/format.h"

enum { FIRST = 1, REST = 2, COLON = 4 };

/* FIRST: may start a name; REST: may follow; COLON: ':' (metric names). */
static const uint8_t cls[256] = {
	[':'] = COLON,
	['_'] = FIRST | REST,
	['0'] = REST, ['1'] = REST, ['2'] = REST, ['3'] = REST, ['4'] = REST,
	['5'] = REST, ['6'] = REST, ['7'] = REST, ['8'] = REST, ['9'] = REST,
#define L(c) [c] = FIRST | REST, [c - 'a' + 'A'] = FIRST | REST
	L('a'), L('b'), L('c'), L('d'), L('e'), L('f'), L('g'), L('h'),
	L('i'), L('j'), L('k'), L('l'), L('m'), L('n'), L('o'), L('p'),
	L('q'), L('r'), L('s'), L('t'), L('u'), L('v'), L('w'), L('x'),
	L('y'), L('z'),
#undef L
};

/* Prometheus metric names: [a-zA-Z_:][a-zA-Z0-9_:]* */
int tally__valid_metric_name(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (!p || !(cls[*p] & (FIRST | COLON)))
		return 0;
	while (*++p)
		if (!(cls[*p] & (REST | COLON)))
			return 0;
	return 1;
}

/* Label names: [a-zA-Z_][a-zA-Z0-9_]*, and "__" is reserved. */
int tally__valid_label_name(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (!p || !(cls[*p] & FIRST) || (p[0] == '_' && p[1] == '_'))
		return 0;
	while (*++p)
		if (!(cls[*p] & REST))
			return 0;
	return 1;
}

/* Units: [a-zA-Z0-9_]*, possibly empty. */
int tally__valid_unit(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (!(cls[*p] & REST))
			return 0;
	return 1;
}

/* Strict UTF-8: no overlong forms, surrogates or values past U+10FFFF. */
int tally__valid_utf8(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	unsigned char any = 0;

	/* Most text is ASCII: one pass that compilers vectorise. */
	for (size_t i = 0; i < n; i++)
		any |= p[i];
	if (!(any & 0x80))
		return 1;
	while (p < end) {
		unsigned c, len, cp;

		/* ASCII, eight bytes at a time. */
		while (end - p >= 8) {
			uint64_t w;

			memcpy(&w, p, 8);
			if (w & 0x8080808080808080ull)
				break;
			p += 8;
		}
		if (p == end)
			break;
		c = *p;
		if (c < 0x80) {
			p++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			len = 2, cp = c & 0x1f;
		else if ((c & 0xf0) == 0xe0)
			len = 3, cp = c & 0x0f;
		else if ((c & 0xf8) == 0xf0)
			len = 4, cp = c & 0x07;
		else
			return 0;
		if ((size_t)(end - p) < len)
			return 0;
		for (unsigned i = 1; i < len; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (p[i] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		p += len;
	}
	return 1;
}

/*
 * Check the labels of a series record, @len bytes of "name\0value\0"
 * pairs, and point names[i] and values[i] at them.  Returns the number of
 * pairs, or -1 when a name breaks the rules, a value is not UTF-8, a
 * string is not terminated, or there are more than @max pairs.
 */
int tally__labels_parse(const char *buf, size_t len, const char **names,
			const char **values, unsigned max)
{
	const unsigned char *p = (const unsigned char *)buf, *end = p + len;
	unsigned n = 0;

	while (p < end) {
		const unsigned char *name = p, *nul;

		if (n == max || !(cls[*p] & FIRST) ||
		    (p[0] == '_' && p + 1 < end && p[1] == '_'))
			return -1;
		while (++p < end && *p)
			if (!(cls[*p] & REST))
				return -1;
		if (p == end)
			return -1;
		p++;
		nul = memchr(p, 0, (size_t)(end - p));
		if (!nul || !tally__valid_utf8((const char *)p,
					       (size_t)(nul - p)))
			return -1;
		names[n] = (const char *)name;
		values[n] = (const char *)p;
		n++;
		p = nul + 1;
	}
	return (int)n;
}

uint16_t tally__text_settle(char *text, size_t size, int unit)
{
	size_t n = strnlen(text, size - 1);

	while (n && !tally__valid_utf8(text, n))
		n--;
	memset(text + n, 0, size - n);
	if (unit && !tally__valid_unit(text)) {
		n = 0;
		text[0] = '\0';
	}
	return (uint16_t)n;
}
