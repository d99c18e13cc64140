/*
 * programs/common/match.h: series selectors, as PromQL writes them:
 *
 *   requests_total                    a metric name
 *   request*                          a glob on the name (fnmatch(3))
 *   requests_total{queue="3"}         and label matchers:
 *   {queue!="3", conn=~"1.*", x!~"a|b"}
 *
 * Matchers are = (equal), != (not equal), =~ (the value matches a POSIX
 * extended regular expression, anchored at both ends as PromQL anchors
 * it) and !~ (does not).  A label a series does not have has the empty
 * value, so {conn=""} selects the series without a conn label.  The
 * label __name__ matches the metric name.  Values are quoted with " or '
 * and may contain \" \' \\ \n \t.
 */
#ifndef TALLY_PROGRAMS_MATCH_H
#define TALLY_PROGRAMS_MATCH_H

#include <regex.h>
#include <stddef.h>

enum tp_match_op { TP_EQ, TP_NE, TP_RE, TP_NRE };

struct tp_matcher {
	char *label;
	enum tp_match_op op;
	char *value;
	regex_t re;             /* TP_RE, TP_NRE */
};

struct tp_selector {
	char *name_glob;        /* NULL: any name */
	struct tp_matcher *m;
	unsigned n;
};

/*
 * tp_selector_parse: parse @text into @sel.
 * Return: 0, or -EINVAL with a one-line reason in @err (that does not
 * repeat @text).  @sel needs tp_selector_free() only after success.
 */
int tp_selector_parse(const char *text, struct tp_selector *sel, char *err,
		      size_t errlen);

/* tp_selector_match: 1 when the series matches every part, else 0. */
int tp_selector_match(const struct tp_selector *sel, const char *name,
		      unsigned nlabels, const char *const *names,
		      const char *const *values);

void tp_selector_free(struct tp_selector *sel);

#endif /* TALLY_PROGRAMS_MATCH_H */
