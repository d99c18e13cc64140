/*
 * failalloc.c: an LD_PRELOAD library of the tests that makes one
 * allocation of tally_metrics._native fail, so that a test can show that
 * running out of memory there is an error raised, never an exit.
 *
 * Once failalloc_arm(n) was called, the malloc, calloc, realloc and
 * strdup calls made directly from the extension (the shared object
 * _native.*.so of the package tally_metrics) are counted, and the n-th
 * returns NULL with errno ENOMEM; failalloc_fired() tells whether it
 * happened.
 * The interpreter's own allocations are never failed: what is tested is
 * the extension, not how Python copes.  failalloc_arm(0) disarms.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

static long armed, counted;
static int fired;
static __thread int inside; /* dladdr() may allocate */

void failalloc_arm(long n)
{
	armed = n;
	counted = 0;
	fired = 0;
}

int failalloc_fired(void)
{
	return fired;
}

/* Is this the allocation to fail?  @caller: the return address. */
static int fail(const void *caller)
{
	Dl_info di;
	int hit = 0;

	if (!armed || inside)
		return 0;
	inside = 1;
	if (dladdr(caller, &di) && di.dli_fname &&
	    strstr(di.dli_fname, "tally_metrics") &&
	    strstr(di.dli_fname, "/_native."))
		hit = ++counted == armed;
	inside = 0;
	if (hit) {
		fired = 1;
		armed = 0;
		errno = ENOMEM;
	}
	return hit;
}

void *malloc(size_t n)
{
	return fail(__builtin_return_address(0)) ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	return fail(__builtin_return_address(0)) ? NULL :
	       __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	return fail(__builtin_return_address(0)) ? NULL :
	       __libc_realloc(p, n);
}

char *strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p;

	if (fail(__builtin_return_address(0)))
		return NULL;
	if ((p = __libc_malloc(n)))
		memcpy(p, s, n);
	return p;
}
