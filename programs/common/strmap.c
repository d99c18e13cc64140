/*
 * programs/common/strmap.c: the string map of strmap.h.
 */
#define _GNU_SOURCE
#include "strmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

static uint64_t hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

size_t tp_strmap_get(const struct tp_strmap *m, const char *key)
{
	size_t i;

	if (!m->cap)
		return (size_t)-1;
	for (i = (size_t)hash(key) & (m->cap - 1); m->keys[i];
	     i = (i + 1) & (m->cap - 1))
		if (strcmp(m->keys[i], key) == 0)
			return m->vals[i];
	return (size_t)-1;
}

static void insert(struct tp_strmap *m, const char *key, size_t val)
{
	size_t i;

	for (i = (size_t)hash(key) & (m->cap - 1); m->keys[i];
	     i = (i + 1) & (m->cap - 1)) {
		if (strcmp(m->keys[i], key) == 0) {
			m->vals[i] = val;
			return;
		}
	}
	m->keys[i] = key;
	m->vals[i] = val;
	m->n++;
}

int tp_strmap_put(struct tp_strmap *m, const char *key, size_t val)
{
	/* Keep the load under one half, so that probes stay short. */
	if ((m->n + 1) * 2 > m->cap) {
		struct tp_strmap old = *m;

		m->cap = old.cap ? old.cap * 2 : 64;
		m->keys = tp_xcalloc(m->cap, sizeof(*m->keys));
		m->vals = tp_xcalloc(m->cap, sizeof(*m->vals));
		if (!m->keys || !m->vals) {
			/* Soft mode (strbuf.h): the map stays as it was. */
			free(m->keys);
			free(m->vals);
			*m = old;
			return -ENOMEM;
		}
		m->n = 0;
		for (size_t i = 0; i < old.cap; i++)
			if (old.keys[i])
				insert(m, old.keys[i], old.vals[i]);
		free(old.keys);
		free(old.vals);
	}
	insert(m, key, val);
	return 0;
}

void tp_strmap_free(struct tp_strmap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}
