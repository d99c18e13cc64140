/*
 * lifecycle.c: the one owner of fork and exit.
 *
 * The fork hooks run in jemalloc's order: before fork() every
 * process-private lock is taken in a fixed order (so that no other thread
 * holds one at the moment of the fork), the parent releases them, and the
 * child re-creates them and renews everything that identifies the process
 * or a thread of it: identity (process.c), an unfinished initialisation
 * (config.c), zone use locks (zone.c), thread caches (alloc.c) and
 * fallback copies (add.c).  The exit hook gives back the exiting thread's
 * chunks and detaches every zone.  No other file registers a fork or exit
 * hook, and no other file calls these steps: this file sits above all the
 * others, the way process.c sits below them.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

static void prepare(void)
{
	tally__zone_prefork();
}

static void parent(void)
{
	tally__zone_postfork_parent();
}

static void child(void)
{
	struct tally__self s;

	tally__self_get(&s); /* keyed on getpid(): renewed here */
	tally__init_postfork_child();
	tally__zone_postfork_child();
	tally__tcache_postfork_child();
	tally__fallback_postfork_child();
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
	pthread_atfork(prepare, parent, child);
}
