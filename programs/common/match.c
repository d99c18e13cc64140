/*
 * programs/common/match.c: parsing and matching series selectors
 * (match.h).
 */
#define _GNU_SOURCE
#include "match.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "strbuf.h"

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* A quoted value at *pp: the unescaped string, or NULL with @err set. */
static char *parse_value(const char **pp, char *err, size_t errlen)
{
	const char *p = *pp;
	struct tp_buf b = { 0 };
	char q = *p;

	if (q != '"' && q != '\'') {
		tp_fail(err, errlen, "expected a quoted label value at '%s'", p);
		return NULL;
	}
	for (p++; *p && *p != q; p++) {
		if (*p != '\\') {
			tp_buf_putc(&b, *p);
			continue;
		}
		switch (*++p) {
		case 'n':
			tp_buf_putc(&b, '\n');
			break;
		case 't':
			tp_buf_putc(&b, '\t');
			break;
		case '\\':
		case '"':
		case '\'':
			tp_buf_putc(&b, *p);
			break;
		default:
			tp_buf_free(&b);
			tp_fail(err, errlen, "unknown escape '\\%c' in a label "
			     "value", *p ? *p : ' ');
			return NULL;
		}
	}
	if (*p != q) {
		tp_buf_free(&b);
		tp_fail(err, errlen, "unterminated label value");
		return NULL;
	}
	*pp = p + 1;
	return tp_buf_take(&b);
}

static void matcher_free(struct tp_matcher *m)
{
	if (m->op == TP_RE || m->op == TP_NRE)
		regfree(&m->re);
	free(m->label);
	free(m->value);
}

/* One matcher at *pp, appended to @sel. */
static int add_matcher(struct tp_selector *sel, const char **pp, char *err,
		       size_t errlen)
{
	const char *p = skip_ws(*pp), *start = p;
	struct tp_matcher m = { 0 };

	if (!tp_label_name_len(p))
		return tp_fail(err, errlen, "expected a label name at '%s'", p);
	p += tp_label_name_len(p);
	m.label = tp_xmalloc((size_t)(p - start) + 1);
	memcpy(m.label, start, (size_t)(p - start));
	m.label[p - start] = '\0';
	p = skip_ws(p);
	if (p[0] == '=' && p[1] == '~') {
		m.op = TP_RE;
		p += 2;
	} else if (p[0] == '!' && p[1] == '~') {
		m.op = TP_NRE;
		p += 2;
	} else if (p[0] == '!' && p[1] == '=') {
		m.op = TP_NE;
		p += 2;
	} else if (p[0] == '=') {
		m.op = TP_EQ;
		p += 1;
	} else {
		free(m.label);
		return tp_fail(err, errlen, "expected =, !=, =~ or !~ after "
			    "label '%.*s'", (int)(p - start), start);
	}
	p = skip_ws(p);
	m.value = parse_value(&p, err, errlen);
	if (!m.value) {
		free(m.label);
		return -EINVAL;
	}
	if (m.op == TP_RE || m.op == TP_NRE) {
		/* PromQL anchors regular expressions at both ends. */
		struct tp_buf a = { 0 };
		int rc;

		tp_buf_printf(&a, "^(%s)$", m.value);
		rc = regcomp(&m.re, tp_buf_str(&a), REG_EXTENDED | REG_NOSUB);
		tp_buf_free(&a);
		if (rc != 0) {
			char why[128];

			regerror(rc, &m.re, why, sizeof(why));
			tp_fail(err, errlen, "bad regular expression \"%s\" "
			     "for label '%s': %s", m.value, m.label, why);
			free(m.label);
			free(m.value);
			return -EINVAL;
		}
	}
	sel->m = tp_xrealloc(sel->m, (sel->n + 1) * sizeof(*sel->m));
	sel->m[sel->n++] = m;
	*pp = p;
	return 0;
}

int tp_selector_parse(const char *text, struct tp_selector *sel, char *err,
		      size_t errlen)
{
	const char *p = skip_ws(text), *brace = strchr(p, '{');
	size_t nlen = brace ? (size_t)(brace - p) : strlen(p);
	int rc;

	memset(sel, 0, sizeof(*sel));
	while (nlen && (p[nlen - 1] == ' ' || p[nlen - 1] == '\t'))
		nlen--;
	/* The name part: a metric name in which glob characters may
	 * stand for parts. */
	for (size_t i = 0; i < nlen; i++) {
		char c = p[i];

		if (!(isalnum((unsigned char)c) || c == '_' || c == ':' ||
		      strchr("*?[]!-^", c)))
			return tp_fail(err, errlen, "'%c' cannot appear in a "
				    "metric name or glob", c);
	}
	if (nlen) {
		sel->name_glob = tp_xmalloc(nlen + 1);
		memcpy(sel->name_glob, p, nlen);
		sel->name_glob[nlen] = '\0';
	}
	if (!brace) {
		if (!nlen)
			return tp_fail(err, errlen, "empty selector");
		return 0;
	}
	p = skip_ws(brace + 1);
	while (*p != '}') {
		if ((rc = add_matcher(sel, &p, err, errlen)) < 0)
			goto bad;
		p = skip_ws(p);
		if (*p == ',')
			p = skip_ws(p + 1);
		else if (*p != '}') {
			rc = tp_fail(err, errlen, "expected ',' or '}' at '%s'",
				  *p ? p : "the end");
			goto bad;
		}
	}
	p = skip_ws(p + 1);
	if (*p) {
		rc = tp_fail(err, errlen, "unexpected '%s' after '}'", p);
		goto bad;
	}
	if (!sel->name_glob && !sel->n) {
		rc = tp_fail(err, errlen, "empty selector");
		goto bad;
	}
	return 0;
bad:
	tp_selector_free(sel);
	return rc;
}

static int match_one(const struct tp_matcher *m, const char *v)
{
	switch (m->op) {
	case TP_EQ:
		return strcmp(v, m->value) == 0;
	case TP_NE:
		return strcmp(v, m->value) != 0;
	case TP_RE:
		return regexec(&m->re, v, 0, NULL, 0) == 0;
	case TP_NRE:
		return regexec(&m->re, v, 0, NULL, 0) != 0;
	}
	return 0;
}

int tp_selector_match(const struct tp_selector *sel, const char *name,
		      unsigned nlabels, const char *const *names,
		      const char *const *values)
{
	if (sel->name_glob && fnmatch(sel->name_glob, name, 0) != 0)
		return 0;
	for (unsigned i = 0; i < sel->n; i++) {
		const struct tp_matcher *m = &sel->m[i];
		const char *v = "";

		if (strcmp(m->label, "__name__") == 0) {
			v = name;
		} else {
			for (unsigned j = 0; j < nlabels; j++) {
				if (strcmp(names[j], m->label) == 0) {
					v = values[j];
					break;
				}
			}
		}
		if (!match_one(m, v))
			return 0;
	}
	return 1;
}

void tp_selector_free(struct tp_selector *sel)
{
	for (unsigned i = 0; i < sel->n; i++)
		matcher_free(&sel->m[i]);
	free(sel->m);
	free(sel->name_glob);
	memset(sel, 0, sizeof(*sel));
}
