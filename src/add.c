/*
 * add.c: the out-of-line part of the update path, and tally_block_add()
 * as a real symbol (for FFI, dlsym and -O0 builds).
 *
 * The fallback of a per-CPU add is a relaxed atomic add on a *fallback*
 * copy, never on an rseq copy: an rseq add is an unlocked read-modify-
 * write that is only safe because nobody else writes that CPU's copy, and
 * a locked add from another CPU would race with it and lose counts.  Each
 * thread is given one of the nslabs fallback copies, round robin, so that
 * up to nslabs threads without rseq never share a copy.
 *
 * A copy (rseq or fallback) is written only once its page is reserved in
 * the file (the chunk's reservation line says so, src/layout.h); the first
 * add of a CPU or fallback copy to a chunk reserves it here, and an add
 * that finds no room goes to the slot's baseline word: a full file system
 * costs speed, never a count, never a SIGBUS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>

#include "internal.h"

#ifdef TALLY__MAX_CPUS
_Static_assert(TALLY__MAX_CPUS == TALLY__MAX_SLABS,
	       "the inline add names the copies of every possible slab");
#endif

void (tally_block_add)(tally_block *b, unsigned slot, int64_t v)
{
	tally__block_add(b, slot, v);
}

static __thread unsigned fb_copy __attribute__((tls_model("initial-exec")));
static _Atomic unsigned fb_next;

static unsigned fallback_copy(void)
{
	unsigned c = fb_copy;

	if (__builtin_expect(c == 0, 0)) {
		c = atomic_fetch_add_explicit(&fb_next, 1,
					      memory_order_relaxed) %
			    tally__cfg.nslabs + 1;
		fb_copy = c;
	}
	return c - 1;
}

/* In a child after fork(): the thread takes a fallback copy of its own
 * instead of sharing its parent thread's. */
void tally__fallback_postfork_child(void)
{
	fb_copy = 0;
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

static void fallback_add(int64_t *p, int64_t v)
{
	unsigned f = fallback_copy(), bit = TALLY__RESV_FALLBACK + f % 256u;

	if (!reserved(p, bit) && reserve(p, bit) < 0) {
		spill(p, v);
		return;
	}
	__atomic_fetch_add(tally__slot_in_page(p, tally__page_fallback(
						      tally__cfg.nslabs, f)),
			   v, __ATOMIC_RELAXED);
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
		cpu = (int)fallback_copy();
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
		 * holds the value in 63 bits: a sum that would leave them
		 * promotes the slot too, and the 64-bit copies (which wrap
		 * like int64) take it, so the slot holds the full range. */
		if (!(old & 1)) {
			if (!__builtin_add_overflow(old >> 1, v, &sum) &&
			    sum >= -((int64_t)1 << 62) &&
			    sum < ((int64_t)1 << 62) &&
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
