/*
 * lifecycle.c: the one owner of fork and exit.
 *
 * After fork(), the child re-creates the library's process-private locks
 * (a lock another thread of the parent held stays held in the child,
 * where that thread does not exist; what the locks guard stays consistent:
 * a zone enters the registry fully made, in one store) and renews
 * everything that identifies the process or a thread of it: identity
 * (process.c), an unfinished initialisation (config.c), zone use locks
 * (zone.c), thread caches (alloc.c) and fallback copies (add.c); and the
 * locks of the process's families (family.c).
 *
 * Unlike jemalloc, the locks are not taken before fork(): that would make
 * fork() wait for a zone being created, and then resume exactly as the
 * creating thread goes on into malloc() and free(), which some allocators
 * (ThreadSanitizer's among them) do not make safe across fork.  The price:
 * a child forked while another thread creates a zone inherits that zone's
 * descriptor and mapping, unused.  The exit hook gives back the exiting thread's
 * chunks and detaches every zone.  No other file registers a fork or exit
 * hook, and no other file calls these steps: this file sits above all the
 * others, the way process.c sits below them.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

static void child(void)
{
	struct tally__self s;

	tally__self_get(&s); /* keyed on getpid(): renewed here */
	tally__init_postfork_child();
	tally__zone_postfork_child();
	tally__tcache_postfork_child();
	tally__fallback_postfork_child();
	tally__family_postfork_child();
}

static void at_exit(void)
{
	tally__zone_exit_begin();
	tally__tcache_exit();
	tally__zone_exit_end();
}

/*
 * Installed before main() runs, while the process has one thread.  Also
 * called (a no-op then) by tally__init(), so that a static link always
 * pulls this file in, constructor and all.
 */
__attribute__((constructor)) void tally__lifecycle_install(void)
{
	static _Atomic int done;

	if (atomic_exchange(&done, 1))
		return;
	atexit(at_exit);
	pthread_atfork(NULL, NULL, child);
}
