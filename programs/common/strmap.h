/*
 * programs/common/strmap.h: a map from strings to indexes (open
 * addressing, FNV-1a), for finding a series of one snapshot in another
 * and for summing series across processes.  The map copies nothing: the
 * keys must outlive it.
 */
#ifndef TALLY_PROGRAMS_STRMAP_H
#define TALLY_PROGRAMS_STRMAP_H

#include <stddef.h>

struct tp_strmap {
	const char **keys; /* NULL: an empty slot */
	size_t *vals;
	size_t n, cap;     /* cap is 0 or a power of two */
};

/* The value of @key, or (size_t)-1 when absent. */
size_t tp_strmap_get(const struct tp_strmap *m, const char *key);
/* Map @key to @val (replacing an earlier value).  Returns 0, or in soft
 * mode (strbuf.h) -ENOMEM with @m as it was. */
int tp_strmap_put(struct tp_strmap *m, const char *key, size_t val);
void tp_strmap_free(struct tp_strmap *m);

#endif /* TALLY_PROGRAMS_STRMAP_H */
