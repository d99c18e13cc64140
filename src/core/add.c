/*
 * add.c: the out-of-line part of the update path, and tally_block_add()
 * as a real symbol (for FFI, dlsym and -O0 builds).
 *
 * The fallback of a per-CPU add (no rseq: valgrind, old kernels, CPUs
 * beyond the slabs, other architectures, TALLY_NO_RSEQ=1) goes to a
 * *fallback* copy, never to an rseq copy (an rseq add is an unlocked
 * read-modify-write that is only safe because nobody else writes that
 * CPU's copy).  A fallback copy is owned by one thread at a time, in every
 * process that uses the zone, so that its owner adds without a lock:
 *
 *   - in this process, copy f belongs to the thread whose id fb_owner[f]
 *     holds; a thread claims a free copy, or one whose thread is gone
 *     (tgkill says ESRCH), with a compare-and-swap;
 *   - across processes, the process holds a write lock (F_OFD_SETLK) on
 *     byte TALLY__FB_LOCK_BYTE + f of the zone's writers' lock file (the
 *     zone file itself in zones older than format 2.6), through a
 *     description of its own (fbfd), taken at its first add through copy
 *     f in that zone and kept until tally_zone_destroy() or the end of
 *     the process (not at exit(), where other threads may still add: the
 *     kernel lets go of the locks with the last thread); a forked child
 *     opens a description of its own and cannot take its parent's copies;
 *   - in each chunk, the owner writes its token (64 random bits of this
 *     claim, renewed in a forked child) in the copy's page at
 *     TALLY__OWNER_OFF; the inline path adds without a lock only when it
 *     finds its own token there, and tally_zone_destroy() clears the
 *     tokens of the copies the process held before it lets go of them.
 *
 * On x86-64 the owner's add is one addq to memory, which a signal handler
 * of the same thread cannot split; elsewhere it stays a relaxed atomic
 * add.  A thread that finds no copy of its own (more threads than copies,
 * or the copy held by another process) adds atomically to the slot's
 * baseline word instead (subtracted, as a spilled add): slower, still
 * lossless, attributed to no CPU; it looks for a free copy again after
 * FB_RETRY adds, then ever more rarely (fallback_copy()).
 *
 * A copy (rseq or fallback) is written only once its page is reserved in
 * the file (the chunk's reservation line says so, src/layout.h); the first
 * add of a CPU or fallback copy to a chunk reserves it here, and an add
 * that finds no room goes to the slot's baseline word: a full file system
 * costs speed, never a count, never a SIGBUS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

#ifdef TALLY__MAX_CPUS
_Static_assert(TALLY__MAX_CPUS == TALLY__MAX_SLABS,
	       "the inline add names the copies of every possible slab");
#endif

void (tally_block_add)(tally_block *b, unsigned slot, int64_t v)
{
	tally__block_add(b, slot, v);
}

/* A thread that found every fallback copy owned by a living thread
 * makes FB_RETRY adds to the baseline before it looks again, then twice
 * as many each time, up to FB_RETRY_MAX. */
#define FB_RETRY     4096u
#define FB_RETRY_MAX (1u << 20)

/* fb_owner[f]: the thread of this process that owns fallback copy f. */
static _Atomic int32_t fb_owner[TALLY__MAX_SLABS];
static _Atomic uint64_t fb_seed;

/* A token no other claim has, in any process: random, never 0. */
static uint64_t new_token(void)
{
	uint64_t t = atomic_load_explicit(&fb_seed, memory_order_relaxed);

	if (!t) {
		uint64_t r = 0;

		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL) ^
			    (uint64_t)(uintptr_t)&r;
		t = r | 1;
		atomic_store_explicit(&fb_seed, t, memory_order_relaxed);
	}
	/* A counter in the seed's random space: splitmix64 of a sequence. */
	t = atomic_fetch_add_explicit(&fb_seed, 0x9e3779b97f4a7c15ull,
				      memory_order_relaxed);
	t ^= t >> 30;
	t *= 0xbf58476d1ce4e5b9ull;
	t ^= t >> 27;
	t *= 0x94d049bb133111ebull;
	t ^= t >> 31;
	return t ? t : 1;
}

static int thread_gone(int32_t tid)
{
	return syscall(SYS_tgkill, tally__thread.fb_pid, tid, 0) < 0 &&
	       errno == ESRCH;
}

/* Make fallback copy @f, of the @n, this thread's, if its owner is still
 * @cur (0: none; or a thread that is gone). */
static int take_copy(unsigned f, unsigned n, int32_t cur)
{
	if (cur != tally__thread.fb_tid &&
	    !atomic_compare_exchange_strong(&fb_owner[f], &cur,
					    tally__thread.fb_tid))
		return 0;
	if (!tally__thread.fb_token)
		tally__thread.fb_token = new_token();
	tally__thread.fb_bit = TALLY__RESV_FALLBACK + f % 256u;
	tally__thread.fb_delta = (n + f) * TALLY__PAGE;
	tally__thread.fb_index = f + 1;
	return 1;
}

int tally__own_fd(struct tally_zone *z)
{
	int fd = atomic_load_explicit(&z->fbfd, memory_order_acquire);

	if (fd < 0) {
		int expected = -1;

		fd = tally__reopen_fd(tally__zone_lock_fd(z),
				     tally__zone_lock_path(z), O_RDWR);
		if (fd < 0)
			return -1;
		if (!atomic_compare_exchange_strong(&z->fbfd, &expected, fd)) {
			close(fd);
			fd = expected;
		}
	}
	return fd;
}

/*
 * The fallback copy of this thread: claimed at its first fallback add,
 * kept while it lives.  Returns the index, or -1 when every copy belongs
 * to a living thread.  A copy nobody owns is taken without a system call;
 * one whose thread is gone (tgkill says ESRCH) takes one a copy.  The
 * thread's first look asks about every owner; a later one, made after
 * FB_RETRY adds or more, about one.  Async-signal-safe: a handler that
 * interrupts a claim of the same thread finds the copy already marked
 * with its thread id and takes the same one.
 */
static int fallback_copy(void)
{
	unsigned n = tally__cfg.nslabs, start, asks;

	if (__builtin_expect(tally__thread.fb_index != 0, 1))
		return (int)tally__thread.fb_index - 1;
	if (tally__thread.fb_later) {
		tally__thread.fb_later--;
		return -1;
	}
	if (!tally__thread.fb_tid) {
		tally__thread.fb_pid = (int32_t)getpid();
		tally__thread.fb_tid = (int32_t)syscall(SYS_gettid);
	}
	start = (unsigned)tally__thread.fb_pid % n;
	for (unsigned i = 0; i < n; i++) {
		unsigned f = (start + i) % n;
		int32_t cur = atomic_load_explicit(&fb_owner[f],
						   memory_order_relaxed);

		if ((cur == 0 || cur == tally__thread.fb_tid) &&
		    take_copy(f, n, cur))
			return (int)f;
	}
	asks = tally__thread.fb_wait ? 1 : n;
	for (unsigned i = 0; i < asks; i++) {
		unsigned f = (start + tally__thread.fb_probe++) % n;
		int32_t cur = atomic_load_explicit(&fb_owner[f],
						   memory_order_relaxed);

		if (cur && cur != tally__thread.fb_tid && thread_gone(cur) &&
		    take_copy(f, n, cur))
			return (int)f;
	}
	if (!tally__thread.fb_wait)
		tally__thread.fb_wait = FB_RETRY;
	else if (tally__thread.fb_wait < FB_RETRY_MAX)
		tally__thread.fb_wait *= 2;
	tally__thread.fb_later = tally__thread.fb_wait;
	return -1;
}

/*
 * In a child after fork(): the only thread is the one that forked; it
 * takes a copy of its own (its parent's copies stay locked by the parent)
 * under a new token, and no other thread of the parent exists here.
 */
void tally__fallback_postfork_child(void)
{
	for (unsigned f = 0; f < TALLY__MAX_SLABS; f++)
		atomic_store_explicit(&fb_owner[f], 0, memory_order_relaxed);
	atomic_store_explicit(&fb_seed, 0, memory_order_relaxed);
	tally__thread.fb_index = 0;
	tally__thread.fb_delta = 0;
	tally__thread.fb_token = 0;
	tally__thread.fb_later = 0;
	tally__thread.fb_wait = 0;
	tally__thread.fb_tid = 0; /* a thread of its own: a new id */
	tally__thread.fb_pid = 0;
}

/*
 * Does this process hold fallback copy @f of @z?  The first time, it asks
 * for the copy's lock through a description of its own; a copy another
 * process holds is not asked for again.
 */
static int zone_holds(struct tally_zone *z, unsigned f)
{
	uint64_t bit = 1ull << (f % 64);
	int fd;

	if (atomic_load_explicit(&z->fb_held[f / 64], memory_order_acquire) & bit)
		return 1;
	if (atomic_load_explicit(&z->fb_refused[f / 64], memory_order_relaxed) &
	    bit)
		return 0;
	/* Writers of 2.3 and earlier add atomically to any fallback copy
	 * (docs/FORMAT.md): in their zones, nobody owns one. */
	if (z->hdr->minor < TALLY__FMT_MINOR_OWNED_FALLBACK) {
		atomic_fetch_or(&z->fb_refused[f / 64], bit);
		return 0;
	}
	if ((fd = tally__own_fd(z)) < 0)
		return 0;
	if (tally__lock_byte(fd, F_WRLCK, TALLY__FB_LOCK_BYTE + f, 0) < 0) {
		if (errno == EAGAIN || errno == EACCES)
			atomic_fetch_or(&z->fb_refused[f / 64], bit);
		return 0;
	}
	atomic_fetch_or_explicit(&z->fb_held[f / 64], bit, memory_order_release);
	return 1;
}

/* The owner line of fallback copy @f's page, for the slot at @p. */
static _Atomic uint64_t *owner_line(int64_t *p, unsigned f)
{
	int64_t *q = tally__slot_in_page(p, tally__page_fallback(
						    tally__cfg.nslabs, f));

	return (_Atomic uint64_t *)(((uintptr_t)q & ~(uintptr_t)(TALLY__PAGE - 1)) +
				    TALLY__OWNER_OFF);
}

/*
 * tally_zone_destroy(), before the process lets go of its copies' locks:
 * clear its tokens from every chunk, so that none of its threads adds
 * without a lock to a copy that another process may own next.  Pages
 * whose reservation bit is clear do not exist and are left alone.
 */
void tally__fallback_detach(struct tally_zone *z)
{
	uint64_t bumped;
	int fd;

	/* From here on, this process's adds to the zone without rseq take
	 * the locked path (zone_holds() says no). */
	for (unsigned i = 0; i < TALLY__MAX_SLABS / 64; i++)
		atomic_store(&z->fb_refused[i], ~0ull);
	bumped = atomic_load(&z->hdr->chunks_bumped);
	if (bumped > z->nchunks)
		bumped = z->nchunks;
	for (unsigned f = 0; f < tally__env.nslabs; f++) {
		unsigned bit = TALLY__RESV_FALLBACK + f % 256u;

		if (!(atomic_fetch_and(&z->fb_held[f / 64], ~(1ull << (f % 64))) &
		      (1ull << (f % 64))))
			continue;
		for (uint64_t c = 0; c < bumped; c++) {
			int64_t *p = (int64_t *)(tally__chunk_base(z, (uint32_t)c) +
						 tally__page_off(TALLY__PG_COPY0));
			const _Atomic uint32_t *resv = (const _Atomic uint32_t *)
				(tally__chunk_base(z, (uint32_t)c) + TALLY__RESV_OFF);

			if (atomic_load(&resv[bit / 32]) >> (bit % 32) & 1)
				atomic_store_explicit(owner_line(p, f), 0,
						      memory_order_relaxed);
		}
	}
	fd = atomic_exchange(&z->fbfd, -1);
	if (fd >= 0)
		close(fd);
}

/* In a child after fork(): the inherited description holds the parent's
 * locks; the child forgets it (closing its copy changes nothing for the
 * parent) and asks for copies of its own. */
void tally__fallback_zone_postfork(struct tally_zone *z)
{
	int fd = atomic_exchange(&z->fbfd, -1);

	if (fd >= 0)
		close(fd);
	for (unsigned i = 0; i < (tally__env.nslabs + 63) / 64; i++) {
		atomic_store(&z->fb_held[i], 0);
		atomic_store(&z->fb_refused[i], 0);
	}
}

/*
 * An add that found no room for its copy: subtracted from the slot's
 * baseline word instead, which is in page 0 of the chunk, reserved when
 * the chunk was handed out.  Readers subtract the baseline, so the add
 * counts like any other (it is just not attributed to a CPU).
 */
static void spill(int64_t *p, int64_t v)
{
	__atomic_fetch_sub(tally__slot_in_page(p, TALLY__PG_BASELINE), v,
			   __ATOMIC_RELAXED);
}

/* Is bit @bit of the reservation line of @p's chunk set? */
static int reserved(const int64_t *p, unsigned bit)
{
	const uint32_t *resv = (const uint32_t *)
		(((uintptr_t)p & ~(uintptr_t)(TALLY__STRIDE - 1)) -
		 TALLY__RESV_BACK);

	return (__atomic_load_n(&resv[bit / 32u], __ATOMIC_ACQUIRE) >>
		(bit % 32u)) & 1u;
}

/* Reserve the copies of reservation bit @bit of @p's chunk. */
static int reserve(const int64_t *p, unsigned bit)
{
	struct tally_zone *z = tally__zone_of(p);

	return z ? tally__reserve_copies(z, p, bit) : -EINVAL;
}

/* The owner's add: one instruction a signal cannot split (x86-64). */
static void owner_add(int64_t *q, int64_t v)
{
#if defined(__x86_64__)
	__asm__ __volatile__("addq %[v], %[q]" : [q] "+m"(*q) : [v] "er"(v));
#else
	__atomic_fetch_add(q, v, __ATOMIC_RELAXED);
#endif
}

static void fallback_add(int64_t *p, int64_t v)
{
	int f = fallback_copy();
	unsigned bit;
	struct tally_zone *z;
	_Atomic uint64_t *line;

	if (f < 0) {
		spill(p, v); /* no copy of its own: the locked add */
		return;
	}
	bit = TALLY__RESV_FALLBACK + (unsigned)f % 256u;
	if (!reserved(p, bit) && reserve(p, bit) < 0) {
		spill(p, v);
		return;
	}
	line = owner_line(p, (unsigned)f);
	if (atomic_load_explicit(line, memory_order_relaxed) !=
	    tally__thread.fb_token) {
		z = tally__zone_of(p);
		if (!z || !zone_holds(z, (unsigned)f)) {
			spill(p, v);
			return;
		}
		atomic_store_explicit(line, tally__thread.fb_token,
				      memory_order_relaxed);
	}
	owner_add(tally__slot_in_page(p, tally__page_fallback(
						 tally__cfg.nslabs, (unsigned)f)),
		  v);
}

/*
 * The rseq add, reserving this CPU's copy when it is not reserved yet.  A
 * thread that keeps migrating to CPUs without a copy gives up after a few
 * tries and spills, rather than reserve the pages of every CPU it visits.
 */
static void percpu_add(int64_t *p, int64_t v)
{
	for (int tries = 0; tries < 4; tries++) {
		int rc = tally__rseq_add(p, v), cpu;

		if (rc == 0)
			return;
		if (rc == TALLY__ADD_FALLBACK) {
			fallback_add(p, v);
			return;
		}
		cpu = sched_getcpu(); /* from rseq: no system call */
		if (cpu < 0 || reserve(p, (unsigned)cpu % 256u) < 0)
			break;
	}
	spill(p, v);
}

static unsigned current_node(void)
{
	int cpu = sched_getcpu(); /* rseq or vDSO: no system call */

	if (cpu < 0 || (unsigned)cpu >= tally__env.nslabs)
		cpu = 0;
	return tally__env.cpu_node[cpu];
}

/* The slow path proper; tally__block_add_slow() keeps errno for it. */
static void add_slow(tally_block *b, unsigned slot, int64_t v)
{
	uintptr_t h = (uintptr_t)b;
	int64_t *p = (int64_t *)(h & ~(uintptr_t)3) + slot;

	switch (h & 3) {
	case TALLY_PERCPU: /* the inline rseq add said no */
		if (tally__cfg.rseq_limit)
			percpu_add(p, v);
		else
			fallback_add(p, v);
		break;
	case TALLY_SHARED:
		__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
		break;
	case TALLY_PERNODE:
		__atomic_fetch_add(tally__slot_in_page(
					   p, tally__page_rseq(current_node())),
				   v, __ATOMIC_RELAXED);
		break;
	case TALLY_ADAPTIVE: {
		int64_t *shared = tally__slot_in_page(p, TALLY__PG_ASHARED);
		int64_t old = __atomic_load_n(shared, __ATOMIC_RELAXED), sum;

		/* While the promoted bit is clear, one try at the shared word;
		 * a failed try is contention: set the bit (the value stays)
		 * and add to the per-CPU copies, which readers sum as well,
		 * so no add is lost at any point of the promotion.  The word
		 * holds the value in 63 bits, of which adds use the band
		 * -2^61 .. 2^61 - 1 (the inline add of tally/arch/x86_64.h
		 * needs the rest for the adds in flight): a sum that would
		 * leave it promotes the slot too, and the 64-bit copies
		 * (which wrap like int64) take it, so the slot holds the
		 * full range.  The x86-64 inline add comes here only for
		 * the values it does not take (or once promoted). */
		if (!(old & 1)) {
			if (!__builtin_add_overflow(old >> 1, v, &sum) &&
			    sum >= -((int64_t)1 << 61) &&
			    sum < ((int64_t)1 << 61) &&
			    __atomic_compare_exchange_n(
				    shared, &old, (int64_t)((uint64_t)sum << 1),
				    0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
				return;
			__atomic_fetch_or(shared, 1, __ATOMIC_RELAXED);
		}
		percpu_add(p, v);
		break;
	}
}
}

#if defined(__x86_64__) && defined(__linux__)
/*
 * What the inline update path jumps to for its slow path (tally__slow_add
 * in tally/arch/x86_64.h), with the stack pointer 128 bytes below the
 * caller's (its red zone), the return address in %rax and the arguments
 * of tally__block_add_slow() in place.  It keeps %rbx and the general
 * registers a call clobbers (so that the inline path clobbers only %rax
 * and the vector registers), aligns the stack for the call and jumps
 * back.  The unwind table says where the return address, the caller's
 * stack pointer and the kept registers are at every instruction.
 */
#define PUSH(r, at) "pushq %" #r "\n\t.cfi_adjust_cfa_offset 8\n\t" \
			 ".cfi_offset %" #r ", " #at "\n\t"
#define POP(r)      "popq %" #r "\n\t.cfi_adjust_cfa_offset -8\n\t" \
			 ".cfi_restore %" #r "\n\t"
__asm__(".text\n\t"
	".globl tally__block_add_slow_stub\n\t"
	".type tally__block_add_slow_stub, @function\n\t"
	".p2align 4\n"
	"tally__block_add_slow_stub:\n\t"
	".cfi_startproc\n\t"
	".cfi_def_cfa %rsp, 128\n\t"  /* CFA: the caller's stack pointer */
	".cfi_register %rip, %rax\n\t"
	PUSH(rax, -136)                /* the return address */
	".cfi_offset %rip, -136\n\t"
	PUSH(rbx, -144) PUSH(rcx, -152) PUSH(rdx, -160) PUSH(rsi, -168)
	PUSH(rdi, -176) PUSH(r8, -184) PUSH(r9, -192) PUSH(r10, -200)
	PUSH(r11, -208)
	"movq %rsp, %rbx\n\t"
	".cfi_def_cfa_register %rbx\n\t"
	"andq $-16, %rsp\n\t"
	"call tally__block_add_slow@PLT\n\t"
	"movq %rbx, %rsp\n\t"
	".cfi_def_cfa_register %rsp\n\t"
	POP(r11) POP(r10) POP(r9) POP(r8) POP(rdi) POP(rsi) POP(rdx)
	POP(rcx) POP(rbx)
	"popq %rax\n\t"
	".cfi_adjust_cfa_offset -8\n\t"
	".cfi_register %rip, %rax\n\t"
	"jmp *%rax\n\t"
	".cfi_endproc\n\t"
	".size tally__block_add_slow_stub, .-tally__block_add_slow_stub\n\t"
	".previous");
#undef PUSH
#undef POP
#endif

/* Async-signal-safe: the system call that reserves a page must not leave
 * errno changed under the code a signal handler interrupted. */
void tally__block_add_slow(tally_block *b, unsigned slot, int64_t v)
{
	int saved = errno;

	add_slow(b, slot, v);
	errno = saved;
}
