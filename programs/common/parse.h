/*
 * programs/common/parse.h: the small parsers of the programs' command
 * lines and selectors: whole numbers in a range, Prometheus label names,
 * the one-line reason a parser fails with, and how a bad command line
 * is reported.
 */
#ifndef TALLY_PROGRAMS_PARSE_H
#define TALLY_PROGRAMS_PARSE_H

#include <stddef.h>

/*
 * tp_parse_ulong: a decimal number from @lo to @hi at *@pp (digits only:
 * no sign, no space), advancing *@pp past it.  Return 0, or -1 (nothing
 * moved) when there is no digit or the number is out of range.
 */
int tp_parse_ulong(const char **pp, unsigned long lo, unsigned long hi,
		   unsigned long *out);

/* The length of the label name @s starts with ([a-zA-Z_][a-zA-Z0-9_]*),
 * 0 when it starts with none. */
size_t tp_label_name_len(const char *s);

/* Write the reason into @err (when @errlen) and return -EINVAL. */
int tp_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * tp_bad_usage: a bad command line, as the tools report it: "@prog: "
 * and the message on one line, then @hint (where the rest is: "Try
 * 'prog --help'.") on the next, on stderr.  Return -1; the tools then
 * exit with status 2.
 */
int tp_bad_usage(const char *prog, const char *hint, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* TALLY_PROGRAMS_PARSE_H */
