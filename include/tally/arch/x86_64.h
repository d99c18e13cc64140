/*
 * tally/arch/x86_64.h: the per-CPU add as a restartable sequence.
 * Internal: include tally/block.h instead.
 *
 * The sequence runs on the rseq area that glibc registered for the thread
 * (at the thread pointer + __rseq_offset; tally never registers its own):
 *
 *   rseq_cs = &descriptor            (outside the critical section)
 *   1: cpu = rseq->cpu_id            (start)
 *      if (cpu >= rseq_limit) goto fallback
 *      if (!(resv[(cpu & 255) / 32] >> (cpu % 32) & 1)) goto reserve
 *      *(copy0 + cpu * STRIDE) += v  (one unlocked addq: the commit)
 *   2:                               (end)
 *
 * If the thread is preempted, migrated or signalled between 1 and the
 * commit, the kernel moves it to the abort label (4), which is preceded
 * by glibc's x86 signature 0x53053053, and the add starts again.  No other
 * thread can run on this CPU in between, so the unlocked add never races
 * with another rseq add; fallback adds use other copies (see src/core/add.c).
 * A CPU id of -1 or -2 (rseq not registered) compares above any limit.
 * A process that does not use rseq at all (rseq_limit is 0) does not
 * enter the sequence: its threads add to the fallback copy each owns
 * (tally__owner_add, below).
 *
 * The reservation test (a load from the chunk's reservation line, which
 * stays in cache, and a bit test) sends the first add of a CPU to a chunk
 * to the slow path, which reserves that CPU's page in the file before
 * anything writes it: a full file system never kills a writer with SIGBUS.
 */
#ifndef TALLY_ARCH_X86_64_H
#define TALLY_ARCH_X86_64_H

/* It relies on tally/arch/add.h's definitions and settings, which it does
 * not include: include tally/block.h. */
#ifndef TALLY__ARCH_INSIDE_ADD_H
#error "Never include tally/arch/x86_64.h directly; include tally/block.h instead."
#endif

/*
 * What the sequence may write, for the compiler: the copies of one slot
 * of every CPU from CPU 0's (at most TALLY__MAX_CPUS pages from it), as
 * int64_t.  Naming them instead of clobbering "memory" lets the compiler
 * keep the handle, the settings and the caller's own values in registers
 * across an add (a loop of tally_counter_inc() then loads nothing but
 * the CPU id and the reservation word).  Compilers before GCC 11 and
 * Clang 11 have no outputs on asm goto: they get the clobber.
 */
#define TALLY__MAX_CPUS 4096u /* TALLY__MAX_SLABS (src/layout.h) */
typedef int64_t tally__copies[TALLY__MAX_CPUS * (TALLY__STRIDE / 8u)];
typedef uint32_t tally__resv_line[16];
/* Every page of a chunk: the two before CPU 0's copies, then the rseq and
 * fallback copies of every possible slab. */
typedef int64_t tally__chunk_words[(2u + 2u * TALLY__MAX_CPUS) *
				   (TALLY__STRIDE / 8u)];
#if (defined(__clang__) && __clang_major__ >= 11) || \
	(!defined(__clang__) && __GNUC__ >= 11)
#define TALLY__ASM_COPIES(copy0) [copies] "+m"(*(tally__copies *)(copy0))
#define TALLY__ASM_MEMORY
#else
#define TALLY__ASM_COPIES(copy0)
#define TALLY__ASM_MEMORY "memory",
#endif

/*
 * tally__rseq_add: add @v to this CPU's copy of the slot whose CPU 0 copy
 * is @copy0.  Returns 0; TALLY__ADD_FALLBACK when the caller must take the
 * fallback (rseq unusable in this process, or a CPU id beyond the slab
 * count); TALLY__ADD_RESERVE when this CPU's copy is not reserved yet.
 */
static inline __attribute__((always_inline)) int
tally__rseq_add(int64_t *copy0, int64_t v)
{
	const uint32_t *resv = (const uint32_t *)
		(((uintptr_t)copy0 & ~(uintptr_t)(TALLY__STRIDE - 1)) -
		 TALLY__RESV_BACK);

	for (;;) {
		__asm__ __volatile__ goto(
			".pushsection __rseq_cs, \"aw\"\n\t"
			".balign 32\n\t"
			"3:\n\t"
			".long 0x0, 0x0\n\t"
			".quad 1f, (2f - 1f), 4f\n\t"
			".popsection\n\t"
			".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"
			".quad 3b\n\t"
			".popsection\n\t"
			"leaq 3b(%%rip), %%rax\n\t"
			"movq %%rax, %%fs:%c[cs](%[off])\n\t"
			"1:\n\t"
			"movl %%fs:%c[cpu_id](%[off]), %%eax\n\t"
			"cmpl %[limit], %%eax\n\t"
			"jae %l[fallback]\n\t"
			"movzbl %%al, %%edx\n\t"
			"shrl $5, %%edx\n\t"
			"movl (%[resv], %%rdx, 4), %%edx\n\t"
			"btl %%eax, %%edx\n\t"
			"jnc %l[reserve]\n\t"
			"shlq %[shift], %%rax\n\t"
			"addq %[v], (%[p], %%rax)\n\t"
			"2:\n\t"
			".pushsection __rseq_failure, \"ax\"\n\t"
			".byte 0x0f, 0xb9, 0x3d\n\t" /* ud1 <sig>(%rip), %edi */
			".long %c[sig]\n\t"
			"4:\n\t"
			"jmp %l[abort]\n\t"
			".popsection\n\t"
			: TALLY__ASM_COPIES(copy0)
			: [off] "r"(tally__cfg.rseq_off),
			  [limit] "r"(tally__cfg.rseq_limit),
			  [p] "r"(copy0), [v] "er"(v), [resv] "r"(resv),
			  [line] "m"(*(const tally__resv_line *)resv),
			  [shift] "i"(TALLY__STRIDE_SHIFT),
			  [cs] "i"(TALLY__RSEQ_CS_OFF),
			  [cpu_id] "i"(TALLY__RSEQ_CPU_ID_OFF),
			  [sig] "i"(TALLY__RSEQ_SIG)
			: TALLY__ASM_MEMORY "cc", "rax", "rdx"
			: abort, fallback, reserve);
		return 0;
	abort:
		continue;
	}
fallback:
	return TALLY__ADD_FALLBACK;
reserve:
	return TALLY__ADD_RESERVE;
}

/*
 * tally__slow_add: the slow path, called so that the compiler does not see
 * a call.  A call in a loop of adds would make it assume that any memory
 * may have changed, and load the block's handle again on every add (from
 * a tally_counter, say) along with everything computed from it; this
 * statement tells it what the slow path writes: the pages of the block's
 * chunk, %rax, the flags and the vector registers.  The stack pointer first
 * moves below the caller's red zone (where a leaf function keeps values
 * the compiler does not expect a call to overwrite); the return address
 * goes in %rax and tally__block_add_slow_stub (src/core/add.c) keeps the
 * general registers a call would clobber, aligns the stack, calls
 * tally__block_add_slow() and jumps back.  Its unwind table
 * gives the caller's stack pointer as it was before the move, so that
 * debuggers, profilers and thread cancellation unwind through it.  In
 * libtally itself, where the slow path's effects on the zone's state must
 * stay visible to the compiler, it is a plain call.
 */
static inline __attribute__((always_inline)) void
tally__slow_add(struct tally_block *b, int64_t *p, unsigned slot, int64_t v)
{
#ifdef TALLY__IN_LIBRARY
	(void)p;
	tally__block_add_slow(b, slot, v);
#else
	uint64_t s = slot;
	int64_t *page0 = (int64_t *)(((uintptr_t)p &
				      ~(uintptr_t)(TALLY__STRIDE - 1)) -
				     2u * TALLY__STRIDE);

	__asm__ __volatile__(
		"leaq -128(%%rsp), %%rsp\n\t"
		"leaq 1f(%%rip), %%rax\n\t"
		"jmp tally__block_add_slow_stub@PLT\n\t"
		"1:\n\t"
		"leaq 128(%%rsp), %%rsp"
		: [chunk] "+m"(*(tally__chunk_words *)page0)
		: "D"(b), "S"(s), "d"(v)
		: "rax", "cc",
		  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
		  "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
		  "xmm14", "xmm15"
#ifdef __AVX512F__
		, "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21",
		  "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",
		  "xmm28", "xmm29", "xmm30", "xmm31",
		  "k1", "k2", "k3", "k4", "k5", "k6", "k7"
#endif
		);
#endif
}

/*
 * The fallback without rseq (valgrind, old kernels, TALLY_NO_RSEQ=1): when
 * the thread owns a fallback copy (src/core/add.c) and finds its token in the
 * copy's page, nobody else writes that copy, in any process: one unlocked
 * addq, which a signal handler of the same thread cannot split.  The
 * thread's words are read from its rseq stand-in, where rseq_off leads
 * when the process does not use rseq (only then: glibc's area holds
 * other fields there).  Returns 0 when the slow path must decide (no copy
 * yet, its page not reserved, or the token not there: the first add to a
 * chunk, or a copy another process holds).
 */
static inline __attribute__((always_inline)) int
tally__owner_add(int64_t *copy0, int64_t v)
{
	const uint32_t *resv = (const uint32_t *)
		(((uintptr_t)copy0 & ~(uintptr_t)(TALLY__STRIDE - 1)) -
		 TALLY__RESV_BACK);
	uint64_t token;
	uint32_t delta, bit;
	int64_t *q;

	__asm__ __volatile__("movq %%fs:%c[t](%[off]), %[token]\n\t"
			     "movl %%fs:%c[d](%[off]), %[delta]\n\t"
			     "movl %%fs:%c[b](%[off]), %[bit]"
			     : [token] "=&r"(token), [delta] "=&r"(delta),
			       [bit] "=&r"(bit)
			     : [off] "r"(tally__cfg.rseq_off),
			       [t] "i"(TALLY__FB_TOKEN_OFF),
			       [d] "i"(TALLY__FB_DELTA_OFF),
			       [b] "i"(TALLY__FB_BIT_OFF));
	if (!delta ||
	    !((__atomic_load_n(&resv[bit / 32u], __ATOMIC_RELAXED) >>
	       (bit % 32u)) & 1u))
		return 0;
	q = (int64_t *)((char *)copy0 + delta);
	if (__atomic_load_n((const uint64_t *)
			    (((uintptr_t)q & ~(uintptr_t)(TALLY__STRIDE - 1)) +
			     TALLY__OWNER_OFF), __ATOMIC_RELAXED) != token)
		return 0;
	__asm__ __volatile__("addq %[v], %[q]" : [q] "+m"(*q) : [v] "er"(v));
	return 1;
}

/*
 * The thread's adaptive hint for @word: hint k of its stand-in, where k
 * is the opposite of bit 3 of the word's address.  So the hint's address
 * and the word's never have the same low 12 bits: on Intel cores a load
 * with the low 12 bits of a locked add just before it waits for that add
 * to finish (docs/RESULTS.md), and the hint is loaded right after the
 * previous add to the word.  Read and written with asm volatile: another
 * add (or the same in a signal handler) may have changed it, so a loop
 * must not keep it in a register.
 */
static inline __attribute__((always_inline)) uintptr_t
tally__ahint_get(const int64_t *word, uintptr_t *k)
{
	uintptr_t h;

	*k = (((uintptr_t)word >> 3) & 1u) ^ 1u;
	__asm__ __volatile__("movq %%fs:%c[at](%[off], %[k], 8), %[h]"
			     : [h] "=r"(h)
			     : [off] "r"(tally__cfg.thread_off), [k] "r"(*k),
			       [at] "i"(TALLY__AHINT_OFF));
	return h;
}

static inline __attribute__((always_inline)) void
tally__ahint_set(uintptr_t k, uintptr_t h)
{
	__asm__ __volatile__("movq %[h], %%fs:%c[at](%[off], %[k], 8)"
			     :
			     : [off] "r"(tally__cfg.thread_off), [k] "r"(k),
			       [h] "er"(h), [at] "i"(TALLY__AHINT_OFF));
}

/*
 * An adaptive slot that is not promoted: its shared word holds
 * (value << 1) | 0 (src/layout.h).  The add is the word's value, @old
 * (just loaded), then one atomic fetch-and-add of v << 1, which never
 * fails: the add lands in the word whatever happened in between, and a
 * promotion in between keeps the bit (the sum of two even numbers and a
 * 1 is odd).  When the word it added to is not @old, another add (or a
 * promotion) came between the load and the add: the same contention a
 * failed compare-and-swap would have seen, and the same answer: set the
 * promoted bit (an atomic or, which keeps the value), so that later adds
 * go to the per-CPU copies, which readers sum with the word.  No count
 * is lost at any point.  (A fetch-and-add rather than the
 * compare-and-swap of the slow path: after a load, lock xadd costs
 * about what it costs alone, lock cmpxchg more; docs/RESULTS.md has the
 * figures.)
 * The word must never leave its 63 bits, and nothing stops other adds
 * between the load and the add: so the inline add takes only values
 * below 2^31 in magnitude, to a word whose value is within -2^61 ..
 * 2^61 - 1, the band the slow path keeps it in too (it promotes the
 * slot rather than leave it).  The word can then pass the band only by
 * the adds in flight, fewer than 2^30 (one a thread, or one more a
 * signal handler it is nested in), each below 2^32 in the word: it
 * stays within its 63 bits.  Returns 0 when the slow path must add (a
 * bigger value, or a word near the band's edge).
 * An add that found the word as it read it leaves the word in the
 * thread's hint k (tally__adaptive_hint_add).
 */
static inline __attribute__((always_inline)) int
tally__shared_word_add(int64_t *word, int64_t old, int64_t v, uintptr_t k)
{
	int64_t twice_old, prev;

	if (v < -((int64_t)1 << 31) || v >= ((int64_t)1 << 31) ||
	    __builtin_add_overflow(old, old, &twice_old))
		return 0;
	prev = v * 2;
	__asm__ __volatile__("lock xaddq %[prev], %[w]"
			     : [w] "+m"(*word), [prev] "+r"(prev) : : "cc");
	if (__builtin_expect(prev != old, 0))
		__asm__ __volatile__("lock orq $1, %[w]"
				     : [w] "+m"(*word) : : "cc");
	else
		tally__ahint_set(k, (uintptr_t)word);
	return 1;
}

/*
 * The add to an adaptive slot whose word is the thread's hint: the word
 * was unpromoted and within its band after this thread's last add to
 * it, so the add does not read it first (one lock xaddq, as a shared
 * add).  On Intel cores reading the word just after the previous locked
 * add to it costs much more than the add alone (docs/RESULTS.md has
 * the figures): the read
 * waits for that add to finish, and the next add for the read.
 * What the add returns says what the read would have: when the word
 * was promoted meanwhile (the add still counts: readers sum the word
 * with the copies), or near its band's edge, the hint goes, so that the
 * thread's next add reads the word and takes the per-CPU copies or the
 * slow path.  The band argument of tally__shared_word_add holds: a
 * thread adds at most once to a word past the band before it reads it
 * again.  Contention is told as before, by an add that reads the word
 * first and finds another write before its own: the hint also goes
 * after one add in about 256 (when the value it found has equal low two
 * bytes), so that a thread keeps testing for contention while it adds.
 * (Adds of one multiple of 2^16 to a word whose low two bytes differ
 * never drop the hint that way: such a slot is promoted when its
 * threads' hints go for another reason, or stays a shared word.)
 * Returns 0 when
 * the word is not the hint or @v not below 2^31 in magnitude.
 */
static inline __attribute__((always_inline)) int
tally__adaptive_hint_add(int64_t *word, int64_t v)
{
	uintptr_t k;
	int64_t prev;
	uint64_t x;

	if (tally__ahint_get(word, &k) != (uintptr_t)word ||
	    v < -((int64_t)1 << 31) || v >= ((int64_t)1 << 31))
		return 0;
	prev = v * 2;
	__asm__ __volatile__("lock xaddq %[prev], %[w]"
			     : [w] "+m"(*word), [prev] "+r"(prev) : : "cc");
	/* The next locked add waits for these branches: chains of one to
	 * three instructions from prev.  x's bit 63 is set when the word
	 * was past its band, bit 0 when it was promoted; the value's low
	 * byte equals its next byte once in 256 adds of any value below
	 * 2^16, and of most others. */
	x = (uint64_t)prev + ((uint64_t)1 << 62);
	if (__builtin_expect((x & (((uint64_t)1 << 63) | 1u)) != 0, 0) ||
	    __builtin_expect((((uint64_t)prev ^ ((uint64_t)prev >> 8)) &
			      0x1feu) == 0, 0))
		tally__ahint_set(k, 0);
	return 1;
}

/*
 * A per-node add: one atomic add to the copy of the node of the CPU the
 * thread runs on, which is the only copy on a machine of one node.  The
 * CPU id is read from the rseq area outside any sequence: a migration
 * right after it only makes the add go to another node's copy, which is
 * as exact (it is atomic), just farther.  Returns 0 when the slow path
 * must find the node (no rseq in this process, or a CPU beyond the
 * slabs).
 */
static inline __attribute__((always_inline)) int
tally__pernode_add(int64_t *copy0, int64_t v)
{
	uintptr_t off = 0;

	if (__builtin_expect(tally__cfg.nnodes > 1, 0)) {
		uint32_t cpu;

		__asm__ __volatile__("movl %%fs:%c[cpu_id](%[off]), %[cpu]"
				     : [cpu] "=r"(cpu)
				     : [off] "r"(tally__cfg.rseq_off),
				       [cpu_id] "i"(TALLY__RSEQ_CPU_ID_OFF));
		if (cpu >= tally__cfg.rseq_limit)
			return 0;
		off = (uintptr_t)tally__cfg.cpu_node[cpu] << TALLY__STRIDE_SHIFT;
	}
	__asm__ __volatile__("lock addq %[v], (%[p], %[off])"
			     : TALLY__ASM_COPIES(copy0)
			     : [p] "r"(copy0), [off] "r"(off), [v] "er"(v)
			     : TALLY__ASM_MEMORY "cc");
	return 1;
}

/*
 * The add of every mode, inline.  A per-CPU block's handle is CPU 0's
 * copy (tag 0).  An adaptive slot (tag 3) whose shared word, one page
 * before CPU 0's copy, says it was promoted (bit 0) adds the same way.
 * One test covers both without a branch on the mode: the tags 0 and 3
 * are those whose two bits are equal, and the word tested is the
 * adaptive slot's shared word, or for the other modes a word that is
 * always 1 (both loop-invariant: a loop of adds keeps one load and one
 * branch more than the sequence itself, whatever the mode).  A shared
 * block (tag 1) is one atomic add on its one copy, nothing else; a
 * per-node block (tag 2) the same on its node's copy; an adaptive slot
 * not promoted one atomic add to its shared word, without reading it
 * first when the thread's hint says it was unpromoted at its last add
 * (tally__adaptive_hint_add: tested first, so that nothing reads the
 * word before the add; the per-CPU path pays one compare of the tag).
 * In a process without rseq (rseq_limit, which the sequence loads
 * anyway, is 0), a thread adds to the fallback copy it owns, if it owns
 * one (tally__owner_add), without the sequence's store.  Everything else
 * (a copy not reserved or not owned yet, an adaptive add near the edge
 * of the shared word's range, a per-node add that cannot tell its node)
 * goes to the slow path, called the way tally__slow_add says.
 */
static inline __attribute__((always_inline)) void
tally__block_add(struct tally_block *b, unsigned slot, int64_t v)
{
	uintptr_t h = (uintptr_t)b, tag = h & TALLY__MODE_MASK;
	int64_t *p = (int64_t *)(h - tag) + slot;
	uintptr_t percpu_like = ~(tag ^ (tag >> 1)) & 1u;
	int64_t *word = p - TALLY__STRIDE / 8u, w;
	uintptr_t k;
	unsigned char both;

	if (tag == TALLY_ADAPTIVE && tally__adaptive_hint_add(word, v))
		return;

	/* A conditional move, which the compiler would make a branch of
	 * (and not hoist out of a loop) if it were written in C. */
	__asm__("cmpq %[adaptive], %[tag]\n\t"
		"cmovneq %[one], %[word]"
		: [word] "+r"(word)
		: [tag] "r"(tag), [adaptive] "i"(TALLY_ADAPTIVE),
		  [one] "r"(&tally__cfg.promoted)
		: "cc");
	/* Bit 0 of both, in one test (percpu_like is 0 or 1) that leaves
	 * the word's value in its register for the adaptive add below. */
	w = __atomic_load_n(word, __ATOMIC_RELAXED);
	__asm__("testq %[pl], %[w]"
		: "=@ccnz"(both)
		: [pl] "r"(percpu_like), [w] "r"(w));
	if (__builtin_expect(both, 1)) {
		if (__builtin_expect(tally__cfg.rseq_limit != 0, 1)) {
			if (__builtin_expect(tally__rseq_add(p, v) == 0, 1))
				return;
		} else if (tally__owner_add(p, v)) {
			return;
		}
	} else if (tag == TALLY_SHARED) {
		/* Not __atomic_fetch_add(): GCC lets no memory access move
		 * across it, so a loop of adds to a tally_counter would
		 * load the counter's handle again on every add. */
		__asm__ __volatile__("lock addq %[v], %[p]"
				     : [p] "+m"(*p) : [v] "er"(v) : "cc");
		return;
	} else if (tag == TALLY_ADAPTIVE) {
		/* Not promoted: w is the word, (value << 1) | 0. */
		k = (((uintptr_t)word >> 3) & 1u) ^ 1u;
		if (__builtin_expect(tally__shared_word_add(word, w, v, k), 1))
			return;
	} else if (__builtin_expect(tally__pernode_add(p, v), 1)) {
		return;
	}
	tally__slow_add(b, p, slot, v);
}

#endif /* TALLY_ARCH_X86_64_H */
