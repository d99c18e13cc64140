/*
 * hooks.c: the one owner of fork and exit, as a registry of steps.
 *
 * After fork(), the child re-creates the library's process-private locks
 * (a lock another thread of the parent held stays held in the child,
 * where that thread does not exist; what the locks guard stays consistent:
 * a zone enters the registry fully made, in one store) and renews
 * everything that identifies the process or a thread of it.  At exit, the
 * exiting thread's chunks are given back and every zone is detached.
 *
 * Each layer registers its own steps at its first use, into a fixed slot,
 * and the hooks run the slots in the order of enum tally__child_step and
 * enum tally__exit_step (process/process.h) whoever registered first: in the
 * child, identity (process.c, always first), an unfinished initialisation
 * (config.c, registered by tally__init), zone use locks (zone.c), thread
 * caches (alloc.c) and fallback copies (add.c), all three registered by
 * the core at its first zone, and the locks of the label families
 * (family.c, at the first label family); at exit, the zone registry's lock,
 * thread caches, then detaching.  So this file calls no higher layer: the
 * higher ones hand it their steps.  A step is registered before the lock
 * it renews is first taken, so a fork never finds a lock held that its
 * child does not renew.
 *
 * Unlike jemalloc, the locks are not taken before fork(): that would make
 * fork() wait for a zone being created, and then resume exactly as the
 * creating thread goes on into malloc() and free(), which some allocators
 * (ThreadSanitizer's among them) do not make safe across fork.  The price:
 * a child forked while another thread creates a zone inherits that zone's
 * descriptor and mapping, unused.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "process/process.h"

static _Atomic(tally__hook_fn) child_steps[TALLY__CHILD_STEPS];
static _Atomic(tally__hook_fn) exit_steps[TALLY__EXIT_STEPS];

static void run(_Atomic(tally__hook_fn) *steps, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		tally__hook_fn fn = atomic_load(&steps[i]);

		if (fn)
			fn();
	}
}

static void child(void)
{
	struct tally__self s;

	tally__self_get(&s); /* keyed on getpid(): renewed here */
	run(child_steps, TALLY__CHILD_STEPS);
}

static void at_exit(void)
{
	run(exit_steps, TALLY__EXIT_STEPS);
}

/*
 * Installed before main() runs, while the process has one thread (an
 * exit hook installed then runs after those the program installs later,
 * which may still use the library).  Also called (a no-op then) by every
 * registration, so that a static link, which pulls this file in through
 * them, always has the hooks.
 */
__attribute__((constructor)) static void install(void)
{
	static _Atomic int done;

	if (atomic_exchange(&done, 1))
		return;
	atexit(at_exit);
	pthread_atfork(NULL, NULL, child);
}

void tally__hook_child(enum tally__child_step step, tally__hook_fn fn)
{
	install();
	atomic_store(&child_steps[step], fn);
}

void tally__hook_exit(enum tally__exit_step step, tally__hook_fn fn)
{
	install();
	atomic_store(&exit_steps[step], fn);
}
