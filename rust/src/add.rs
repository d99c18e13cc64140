//! The update path: tally's inline add (include/tally/arch/x86_64.h)
//! written again with Rust's `asm!`, so that an increment costs what it
//! costs in C: no call, one restartable sequence ending in one unlocked
//! `addq` on this CPU's copy.
//!
//! The sequence is the header's, instruction for instruction, and relies
//! on the same things: glibc registered rseq for the thread and tally
//! found it (`tally__cfg.rseq_limit` is then the slab count, else 0), the
//! critical-section descriptor lies in the `__rseq_cs` section, and the
//! abort handler is preceded by glibc's x86 signature (every offset,
//! signature and shift is a constant of src/sys.rs, which tests/abi.rs
//! checks against include/tally/arch/add.h).  Every
//! case the header sends out of line goes to the library's exported
//! functions: a process without rseq (`TALLY_NO_RSEQ=1`, an old kernel,
//! valgrind) calls `tally_block_add`, whose inline fallback adds to the
//! copy the thread owns; a CPU beyond the slab count, a copy not reserved
//! yet and a value the inline adds do not take call
//! `tally__block_add_slow`, as C code in the library does.  Shared,
//! per-node and adaptive adds are inline, as in C.  Other
//! architectures call `tally_block_add` for every add.

use crate::sys;

// The zone's header holds glibc's robust mutexes, which the library
// built for another C library would take with another layout
// (docs/FORMAT.md, "Header"): the crate refuses such a target.
#[cfg(all(target_os = "linux", not(target_env = "gnu")))]
compile_error!(
    "tally needs a glibc target (target_env = \"gnu\"): a zone's header holds glibc's robust mutexes"
);

/// Adds `v` to slot `slot` of block `b`.
///
/// # Safety
/// `b` must be a live block (or the discard block) of a live zone and
/// `slot` below its size.
#[inline(always)]
pub(crate) unsafe fn block_add(b: *mut sys::tally_block, slot: u32, v: i64) {
    unsafe {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            x86_64::block_add(b, slot, v)
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        {
            sys::tally_block_add(b, slot, v)
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod x86_64 {
    use crate::sys;
    use std::sync::atomic::{AtomicI64, Ordering};

    const RESERVE: i32 = -2;
    const FALLBACK: i32 = -1;

    /// The header's tally__rseq_add: 0 when added, FALLBACK when this
    /// thread's CPU is beyond `limit` (or rseq is not registered: the CPU
    /// id is then -1 or -2, above any limit), RESERVE when this CPU's copy
    /// of the chunk is not reserved yet.
    #[inline(always)]
    unsafe fn rseq_add(copy0: *mut i64, v: i64, off: i64, limit: u32) -> i32 {
        unsafe {
            let resv = ((copy0 as usize) & !(sys::TALLY__STRIDE - 1)) - sys::TALLY__RESV_BACK;
            loop {
                // Labels 1-4 as in the header: 1 start, 2 end (after the
                // commit), 3 the descriptor, 4 the abort handler.
                core::arch::asm!(
                    ".pushsection __rseq_cs, \"aw\"",
                    ".balign 32",
                    "3:",
                    ".long 0x0, 0x0",
                    ".quad 1f, (2f - 1f), 4f",
                    ".popsection",
                    ".pushsection __rseq_cs_ptr_array, \"aw\"",
                    ".quad 3b",
                    ".popsection",
                    "leaq 3b(%rip), %rax",
                    "movq %rax, %fs:{cs}({off})",
                    "1:",
                    "movl %fs:{cpu_id}({off}), %eax",
                    "cmpl {limit:e}, %eax",
                    "jae {fallback}",
                    "movzbl %al, %edx",
                    "shrl $5, %edx",
                    "movl ({resv}, %rdx, 4), %edx",
                    "btl %eax, %edx",
                    "jnc {reserve}",
                    "shlq ${shift}, %rax",
                    "addq {v}, ({p}, %rax)",
                    "2:",
                    ".pushsection __rseq_failure, \"ax\"",
                    ".byte 0x0f, 0xb9, 0x3d",
                    ".long {sig}",
                    "4:",
                    "jmp {abort}",
                    ".popsection",
                    off = in(reg) off,
                    limit = in(reg) limit,
                    p = in(reg) copy0,
                    v = in(reg) v,
                    resv = in(reg) resv,
                    cs = const sys::TALLY__RSEQ_CS_OFF,
                    cpu_id = const sys::TALLY__RSEQ_CPU_ID_OFF,
                    shift = const sys::TALLY__STRIDE_SHIFT,
                    sig = const sys::TALLY__RSEQ_SIG,
                    out("rax") _,
                    out("rdx") _,
                    fallback = label { return FALLBACK; },
                    reserve = label { return RESERVE; },
                    abort = label { continue; },
                    options(att_syntax, nostack),
                );
                return 0;
            }
        }
    }

    /// The thread's adaptive hint for `word` (the header's
    /// tally__ahint_get): hint k of its stand-in, k the opposite of bit 3
    /// of the word's address, so that the two never share a page offset.
    /// asm! without `pure` runs at every call: a loop does not keep the
    /// hint in a register.
    #[inline(always)]
    unsafe fn ahint_get(word: *const i64, thread_off: i64) -> (usize, usize) {
        unsafe {
            let k = ((word as usize >> 3) & 1) ^ 1;
            let h: usize;
            core::arch::asm!(
                "movq %fs:{at}({off}, {k}, 8), {h}",
                h = out(reg) h,
                off = in(reg) thread_off,
                k = in(reg) k,
                at = const sys::TALLY__AHINT_OFF,
                options(att_syntax, nostack, readonly, preserves_flags),
            );
            (k, h)
        }
    }

    #[inline(always)]
    unsafe fn ahint_set(k: usize, h: usize, thread_off: i64) {
        unsafe {
            core::arch::asm!(
                "movq {h}, %fs:{at}({off}, {k}, 8)",
                h = in(reg) h,
                off = in(reg) thread_off,
                k = in(reg) k,
                at = const sys::TALLY__AHINT_OFF,
                options(att_syntax, nostack, preserves_flags),
            );
        }
    }

    /// The values the inline adaptive add takes: below 2^31 in magnitude.
    #[inline(always)]
    fn small(v: i64) -> bool {
        (-(1i64 << 31)..(1i64 << 31)).contains(&v)
    }

    /// The header's tally__adaptive_hint_add: an add to a word this
    /// thread found unpromoted at its last add, without reading it first;
    /// the hint goes when the add finds the word promoted or past its
    /// band, and about once in 256 adds.  False when the word is not the
    /// hint or `v` too big.
    #[inline(always)]
    unsafe fn adaptive_hint_add(word: *mut i64, v: i64, thread_off: i64) -> bool {
        unsafe {
            let (k, h) = ahint_get(word, thread_off);
            if h != word as usize || !small(v) {
                return false;
            }
            let prev = (*(word as *const AtomicI64)).fetch_add(v * 2, Ordering::Relaxed);
            let x = (prev as u64).wrapping_add(1 << 62);
            if x & ((1 << 63) | 1) != 0 || ((prev as u64 ^ (prev as u64 >> 8)) & 0x1fe) == 0 {
                ahint_set(k, 0, thread_off);
            }
            true
        }
    }

    /// The header's tally__shared_word_add: the add to an unpromoted
    /// adaptive word whose value `old` was just read; an add that finds
    /// another write since sets the promoted bit (its own add is in the
    /// word), one that finds none leaves the word in the thread's hint.
    #[inline(always)]
    unsafe fn shared_word_add(word: *mut i64, old: i64, v: i64, thread_off: i64) -> bool {
        unsafe {
            if !small(v) || old.checked_add(old).is_none() {
                return false;
            }
            let w = &*(word as *const AtomicI64);
            let prev = w.fetch_add(v * 2, Ordering::Relaxed);
            if prev != old {
                w.fetch_or(1, Ordering::Relaxed);
            } else {
                ahint_set(((word as usize >> 3) & 1) ^ 1, word as usize, thread_off);
            }
            true
        }
    }

    /// The header's tally__pernode_add: one atomic add to the copy of the
    /// node of the CPU in the thread's rseq area (the only copy with one
    /// node).  False when the node cannot be told (no rseq, or a CPU
    /// beyond the slabs).
    #[inline(always)]
    unsafe fn pernode_add(p: *mut i64, v: i64, cfg: *const sys::tally__cfg_t) -> bool {
        unsafe {
            let mut q = p;
            if (*cfg).nnodes > 1 {
                let cpu: u32;
                core::arch::asm!(
                    "movl %fs:{cpu_id}({off}), {cpu:e}",
                    cpu = out(reg) cpu,
                    off = in(reg) (*cfg).rseq_off,
                    cpu_id = const sys::TALLY__RSEQ_CPU_ID_OFF,
                    options(att_syntax, nostack, readonly, preserves_flags),
                );
                if cpu >= (*cfg).rseq_limit {
                    return false;
                }
                let node = *(*cfg).cpu_node.add(cpu as usize) as usize;
                q = p.byte_add(node << sys::TALLY__STRIDE_SHIFT);
            }
            (*(q as *const AtomicI64)).fetch_add(v, Ordering::Relaxed);
            true
        }
    }

    /// The add of every mode, as the header's tally__block_add: an
    /// adaptive slot whose word is the thread's hint is one atomic add; a
    /// per-CPU block (tag 0) and a promoted adaptive slot (tag 3, bit 0
    /// of its shared word a page before CPU 0's copy) take the sequence,
    /// tested with one load and one branch (the word tested is, for
    /// other tags, tally__cfg.promoted, always 1); a shared block is one
    /// atomic add, a per-node block one on its node's copy, an adaptive
    /// slot not promoted one on its word.  The rest (a process without
    /// rseq, a copy not reserved yet, a value the inline paths do not
    /// take) goes out of line.
    #[inline(always)]
    pub(super) unsafe fn block_add(b: *mut sys::tally_block, slot: u32, v: i64) {
        unsafe {
            let h = b as usize;
            let tag = h & sys::TALLY__MODE_MASK;
            let p = ((h - tag) as *mut i64).add(slot as usize);
            let cfg = std::ptr::addr_of!(sys::tally__cfg);
            let adaptive = tag == sys::TALLY_ADAPTIVE as usize;
            let aword = p.byte_sub(sys::TALLY__STRIDE);
            if adaptive && adaptive_hint_add(aword, v, (*cfg).thread_off) {
                return;
            }
            let percpu_like = !(tag ^ (tag >> 1)) & 1;
            let word: *const i64 = if adaptive {
                aword
            } else {
                std::ptr::addr_of!((*cfg).promoted)
            };
            let w = (*(word as *const AtomicI64)).load(Ordering::Relaxed);
            if percpu_like & (w as usize) != 0 {
                let limit = (*cfg).rseq_limit;
                if limit != 0 && rseq_add(p, v, (*cfg).rseq_off, limit) == 0 {
                    return;
                }
            } else if tag == sys::TALLY_SHARED as usize {
                (*(p as *const AtomicI64)).fetch_add(v, Ordering::Relaxed);
                return;
            } else if adaptive {
                if shared_word_add(aword, w, v, (*cfg).thread_off) {
                    return;
                }
            } else if pernode_add(p, v, cfg) {
                return;
            }
            other_add(b, slot, v)
        }
    }

    /// What the inline paths leave: a process without rseq (the
    /// library's own inline add to the fallback copy the thread owns),
    /// and the slow path.
    #[cold]
    #[inline(never)]
    unsafe fn other_add(b: *mut sys::tally_block, slot: u32, v: i64) {
        unsafe {
            if (*std::ptr::addr_of!(sys::tally__cfg)).rseq_limit == 0 {
                sys::tally_block_add(b, slot, v);
            } else {
                sys::tally__block_add_slow(b, slot, v);
            }
        }
    }
}

/// The inline adaptive add (the hint), as C's test-block checks it: a
/// thread that added to an unpromoted word adds to it again without
/// reading it, and once the slot is promoted at most one more of its
/// adds lands in the word; exact throughout.
#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod adaptive_tests {
    use crate::{sys, Desc, Mode, Zone, ZoneOptions};

    unsafe extern "C" {
        fn tally_block_promote(b: *mut sys::tally_block, slot: u32) -> i32;
        fn tally_block_promoted(b: *const sys::tally_block, slot: u32) -> i32;
        fn tally_block_fetch_percpu(
            b: *const sys::tally_block,
            slot: u32,
            out: *mut i64,
            n: u32,
        ) -> i32;
    }

    fn copies(b: *mut sys::tally_block) -> i64 {
        let mut out = vec![0i64; 4096];
        // SAFETY: a live block; out has room for 4096 copies.
        let n = unsafe { tally_block_fetch_percpu(b, 0, out.as_mut_ptr(), 4096) };
        assert!(n > 0);
        out[..n as usize].iter().sum()
    }

    #[test]
    fn add_after_promotion_leaves_the_word() {
        let zone = Zone::create("rs_adaptive_hint", &ZoneOptions::new().anonymous()).unwrap();
        let c = zone
            .try_counter(&Desc::new("hint_total").mode(Mode::Adaptive))
            .unwrap();
        // SAFETY: the handle is alive as long as c.
        let b = unsafe { (*c.raw_handle()).block };
        for _ in 0..1000 {
            c.increment(1);
        }
        // SAFETY: b is a live adaptive block of one slot.
        unsafe {
            assert_eq!(tally_block_promoted(b, 0), 0);
            assert_eq!(copies(b), 0);
            assert_eq!(tally_block_promote(b, 0), 0);
        }
        let word_before = c.value() - copies(b);
        assert_eq!(word_before, 1000);
        for _ in 0..1000 {
            c.increment(1);
        }
        let word_after = c.value() - copies(b);
        assert!(
            word_after - word_before <= 1,
            "{} adds went to the word",
            word_after - word_before
        );
        assert_eq!(c.value(), 2000);
    }
}
