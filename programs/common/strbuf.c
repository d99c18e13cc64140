/*
 * programs/common/strbuf.c: the growing string of strbuf.h and the
 * programs' allocation helpers.
 */
#define _GNU_SOURCE
#include "strbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tp_die(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: %s:%d: ", program_invocation_short_name, file,
		line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* The depth of soft mode of this thread: each thread writing an
 * exposition decides for itself. */
static _Thread_local unsigned soft;
/* tp_soft_fail_at(): the allocation to fail, and those counted so far. */
static _Thread_local unsigned long fail_at, counted;
static _Thread_local int fired;

void tp_soft_begin(void)
{
	soft++;
}

void tp_soft_end(void)
{
	soft--;
}

int tp_soft(void)
{
	return soft != 0;
}

void tp_soft_fail_at(unsigned long n)
{
	fail_at = n;
	counted = 0;
	fired = 0;
}

int tp_soft_fail_fired(void)
{
	return fired;
}

/* Is this allocation the one tp_soft_fail_at() asked to fail? */
static int injected(void)
{
	if (!soft || !fail_at || ++counted != fail_at)
		return 0;
	fired = 1;
	fail_at = 0;
	errno = ENOMEM;
	return 1;
}

void *tp_xmalloc(size_t n)
{
	void *p = injected() ? NULL : malloc(n ? n : 1);

	if (!p && !soft)
		TP_DIE("out of memory (%zu bytes)", n);
	return p;
}

void *tp_xcalloc(size_t n, size_t size)
{
	void *p = injected() ? NULL : calloc(n ? n : 1, size ? size : 1);

	if (!p && !soft)
		TP_DIE("out of memory (%zu x %zu bytes)", n, size);
	return p;
}

void *tp_xrealloc(void *p, size_t n)
{
	void *q = injected() ? NULL : realloc(p, n ? n : 1);

	if (!q && !soft)
		TP_DIE("out of memory (%zu bytes)", n);
	return q;
}

char *tp_xstrdup(const char *s)
{
	char *p = injected() ? NULL : strdup(s ? s : "");

	if (!p && !soft)
		TP_DIE("out of memory");
	return p;
}

int tp_xresize(void *pp, size_t n)
{
	void *p, *q;

	/* Through memcpy: @pp is the address of a pointer of any type. */
	memcpy(&p, pp, sizeof(p));
	if (!(q = tp_xrealloc(p, n)))
		return -ENOMEM;
	memcpy(pp, &q, sizeof(q));
	return 0;
}

/* Room for @n more bytes and the NUL: 0, or -1 when @b is failed (soft
 * mode: nothing is to be written). */
static int reserve(struct tp_buf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->err)
		return -1;
	if (b->len + n + 1 <= b->cap)
		return 0;
	cap = b->cap * 2 + n + 64;
	if (!(p = tp_xrealloc(b->p, cap))) {
		b->err = -ENOMEM;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void tp_buf_printf(struct tp_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 && !soft)
		TP_DIE("vsnprintf: %s", strerror(errno));
	if (n < 0) {
		b->err = b->err ? b->err : -EOVERFLOW;
		return;
	}
	if (reserve(b, (size_t)n) < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void tp_buf_putn(struct tp_buf *b, const char *s, size_t n)
{
	if (reserve(b, n) < 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void tp_buf_puts(struct tp_buf *b, const char *s)
{
	tp_buf_putn(b, s, strlen(s));
}

void tp_buf_putc(struct tp_buf *b, char c)
{
	if (reserve(b, 1) < 0)
		return;
	b->p[b->len++] = c;
	b->p[b->len] = '\0';
}

const char *tp_buf_str(const struct tp_buf *b)
{
	return b->p ? b->p : "";
}

void tp_buf_reset(struct tp_buf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
}

void tp_buf_free(struct tp_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
	b->err = 0;
}

char *tp_buf_take(struct tp_buf *b)
{
	char *p = b->p ? b->p : tp_xstrdup("");

	b->p = NULL;
	b->len = b->cap = 0;
	return p;
}

void tp_buf_json_str(struct tp_buf *b, const char *s)
{
	tp_buf_putc(b, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			tp_buf_putc(b, '\\');
			tp_buf_putc(b, (char)c);
		} else if (c == '\n') {
			tp_buf_puts(b, "\\n");
		} else if (c == '\t') {
			tp_buf_puts(b, "\\t");
		} else if (c < 0x20 || c == 0x7f) {
			tp_buf_printf(b, "\\u%04x", c);
		} else {
			tp_buf_putc(b, (char)c);
		}
	}
	tp_buf_putc(b, '"');
}

void tp_buf_label(struct tp_buf *b, const char *name, const char *value)
{
	tp_buf_puts(b, name);
	tp_buf_putn(b, "=\"", 2);
	tp_buf_label_value(b, value);
	tp_buf_putc(b, '"');
}

void tp_buf_label_value(struct tp_buf *b, const char *s)
{
	/* Runs without anything to escape are copied at once: label values
	 * are written for every series of a scrape. */
	for (;;) {
		size_t run = strcspn(s, "\\\"\n");

		if (run)
			tp_buf_putn(b, s, run);
		s += run;
		if (!*s)
			return;
		tp_buf_putn(b, *s == '\n' ? "\\n" : *s == '"' ? "\\\"" :
			    "\\\\", 2);
		s++;
	}
}
