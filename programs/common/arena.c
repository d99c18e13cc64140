/*
 * programs/common/arena.c: the block allocator of arena.h.
 */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

struct tp_arena_chunk {
	struct tp_arena_chunk *next;
	size_t size;
	/* The memory follows, aligned like max_align_t. */
	_Alignas(16) char mem[];
};

/* Chunks grow from 64 KiB to 4 MiB, so that a small snapshot stays small
 * and a large one takes few chunks. */
#define ARENA_MIN (64u << 10)
#define ARENA_MAX (4u << 20)

static void *grow(struct tp_arena *a, size_t n)
{
	size_t size = a->chunks ? a->chunks->size * 2 : ARENA_MIN;
	struct tp_arena_chunk *c;

	if (size > ARENA_MAX)
		size = ARENA_MAX;
	if (size < n)
		size = n;
	if (!(c = tp_xmalloc(sizeof(*c) + size)))
		return NULL; /* soft mode */
	c->size = size;
	a->bytes += size;
	if (n > size / 4 && a->chunks) {
		/* A large request gets a chunk of its own, behind the current
		 * one, whose free part stays in use. */
		c->next = a->chunks->next;
		a->chunks->next = c;
		return c->mem;
	}
	c->next = a->chunks;
	a->chunks = c;
	a->p = c->mem + n;
	a->end = c->mem + size;
	return c->mem;
}

void *tp_arena_alloc(struct tp_arena *a, size_t n)
{
	char *p = a->p;

	n = (n + 7) & ~(size_t)7;
	if (!n)
		n = 8;
	if (p && (size_t)(a->end - p) >= n) {
		a->p = p + n;
		return p;
	}
	return grow(a, n);
}

void *tp_arena_memdup(struct tp_arena *a, const void *src, size_t n)
{
	void *p = tp_arena_alloc(a, n);

	if (n && p)
		memcpy(p, src, n);
	return p;
}

char *tp_arena_strdup(struct tp_arena *a, const char *s)
{
	size_t n;

	if (!s)
		s = "";
	n = strlen(s) + 1;
	return tp_arena_memdup(a, s, n);
}

void tp_arena_free(struct tp_arena *a)
{
	struct tp_arena_chunk *c = a->chunks;

	while (c) {
		struct tp_arena_chunk *next = c->next;

		free(c);
		c = next;
	}
	memset(a, 0, sizeof(*a));
}
