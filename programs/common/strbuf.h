/*
 * programs/common/strbuf.h: a growing string, and the escapes the programs
 * write (JSON strings, Prometheus label values).
 *
 * Shared by tallystat and tally-exporter.  Running out of memory is fatal
 * in the programs: tp_die() names the file and line and exits with
 * status 1 (the tools report file:line on internal errors).  A caller
 * that is a library inside someone else's process (the Python package's
 * expose(), sums.h) must not exit: it runs in soft mode (tp_soft_begin()),
 * where running out of memory is an error returned.
 */
#ifndef TALLY_PROGRAMS_STRBUF_H
#define TALLY_PROGRAMS_STRBUF_H

#include <stddef.h>

struct tp_buf {
	char *p;    /* NUL-terminated once anything was written; may be NULL */
	size_t len; /* bytes written, without the NUL */
	size_t cap;
	int err;    /* soft mode: -ENOMEM once a write did not fit (that
		       write and those after it were dropped) */
};

/* Print "<program>: FILE:LINE: message" on stderr and exit(1). */
#define TP_DIE(...) tp_die(__FILE__, __LINE__, __VA_ARGS__)
void tp_die(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

/*
 * Soft mode, per thread, nested: between tp_soft_begin() and
 * tp_soft_end(), tp_xmalloc() and its kin return NULL (errno ENOMEM)
 * instead of dying, as do tp_arena_alloc() and its kin (arena.h);
 * tp_strmap_put() returns -ENOMEM; a tp_buf that cannot grow sets its err.
 * Code reached in soft mode checks them and returns -ENOMEM (a string
 * too long for vsnprintf sets err to -EOVERFLOW).  Elsewhere the
 * programs die as before.  tp_soft() tells whether the thread is in it.
 */
void tp_soft_begin(void);
void tp_soft_end(void);
int tp_soft(void);
/* For the tests: the @n-th tp_x*() allocation of this thread in soft mode
 * from now on fails (0: none), as if memory had run out;
 * tp_soft_fail_fired() tells whether it did. */
void tp_soft_fail_at(unsigned long n);
int tp_soft_fail_fired(void);

/* malloc/calloc/realloc/strdup that never return NULL (they TP_DIE),
 * but in soft mode. */
void *tp_xmalloc(size_t n);
void *tp_xcalloc(size_t n, size_t size);
void *tp_xrealloc(void *p, size_t n);
char *tp_xstrdup(const char *s);
/* tp_xresize: the block that @pp points to (a pointer variable's address)
 * reallocated to @n bytes: 0, or in soft mode -ENOMEM with it as it was. */
int tp_xresize(void *pp, size_t n);

void tp_buf_printf(struct tp_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tp_buf_putn(struct tp_buf *b, const char *s, size_t n);
void tp_buf_puts(struct tp_buf *b, const char *s);
void tp_buf_putc(struct tp_buf *b, char c);
/* The string so far ("" when empty); valid until the next write. */
const char *tp_buf_str(const struct tp_buf *b);
/* Forget the contents, keep the memory. */
void tp_buf_reset(struct tp_buf *b);
void tp_buf_free(struct tp_buf *b);
/* Take the string (caller frees; never NULL) and leave @b empty. */
char *tp_buf_take(struct tp_buf *b);

/* @s as a quoted JSON string: ", \ and control characters escaped; the
 * reader guarantees valid UTF-8, which JSON carries as it is. */
void tp_buf_json_str(struct tp_buf *b, const char *s);
/* @s as a Prometheus label value, without the quotes: \, " and newline
 * escaped (text format 0.0.4 and OpenMetrics agree on these three). */
void tp_buf_label_value(struct tp_buf *b, const char *s);
/* One label of a series: @name="@value", the value escaped as above
 * (how every program writes a label, in keys and in expositions). */
void tp_buf_label(struct tp_buf *b, const char *name, const char *value);

#endif /* TALLY_PROGRAMS_STRBUF_H */
