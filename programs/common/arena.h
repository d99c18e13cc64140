/*
 * programs/common/arena.h: a block allocator for what lives exactly as
 * long as one snapshot: the strings and arrays of its series.
 *
 * Rather than several malloc() and free() calls per series, an arena
 * hands out memory from large chunks with a pointer bump and frees every
 * chunk at once.  Nothing is freed alone.
 */
#ifndef TALLY_PROGRAMS_ARENA_H
#define TALLY_PROGRAMS_ARENA_H

#include <stddef.h>

struct tp_arena_chunk;

struct tp_arena {
	struct tp_arena_chunk *chunks; /* the newest first */
	char *p, *end;                 /* the free part of the newest */
	size_t bytes;                  /* taken from malloc, in all */
};

/* @n bytes aligned for any scalar (8 bytes); never NULL (TP_DIE), but in
 * soft mode (strbuf.h): then NULL when out of memory, as for the copies. */
void *tp_arena_alloc(struct tp_arena *a, size_t n);
/* Copies of @n bytes, and of a string (NULL gives ""). */
void *tp_arena_memdup(struct tp_arena *a, const void *src, size_t n);
char *tp_arena_strdup(struct tp_arena *a, const char *s);
/* Release every chunk and zero @a. */
void tp_arena_free(struct tp_arena *a);

#endif /* TALLY_PROGRAMS_ARENA_H */
