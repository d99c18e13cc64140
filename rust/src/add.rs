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
//! yet, a per-node block and an adaptive slot not promoted call
//! `tally__block_add_slow`, as C code in the library does.  Other
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
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        x86_64::block_add(b, slot, v)
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        sys::tally_block_add(b, slot, v)
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

    /// The add of every mode, as the header's tally__block_add: a
    /// per-CPU block (tag 0) and a promoted adaptive slot (tag 3, bit 0
    /// of its shared word a page before CPU 0's copy) take the sequence,
    /// tested with one load and one branch (the word tested is, for
    /// other tags, tally__cfg.promoted, always 1); the rest goes out of
    /// line, so that the inline part stays small.
    #[inline(always)]
    pub(super) unsafe fn block_add(b: *mut sys::tally_block, slot: u32, v: i64) {
        let h = b as usize;
        let tag = h & sys::TALLY__MODE_MASK;
        let p = ((h - tag) as *mut i64).add(slot as usize);
        let cfg = std::ptr::addr_of!(sys::tally__cfg);
        let percpu_like = !(tag ^ (tag >> 1)) & 1;
        let word: *const i64 = if tag == sys::TALLY_ADAPTIVE as usize {
            p.byte_sub(sys::TALLY__STRIDE)
        } else {
            std::ptr::addr_of!((*cfg).promoted)
        };
        if percpu_like & ((*(word as *const AtomicI64)).load(Ordering::Relaxed) as usize) != 0 {
            let limit = (*cfg).rseq_limit;
            if limit != 0 && rseq_add(p, v, (*cfg).rseq_off, limit) == 0 {
                return;
            }
        }
        other_add(b, p, tag, slot, v)
    }

    /// Everything but a per-CPU add that the sequence made: a shared
    /// block's atomic add; a process without rseq (the library's own
    /// inline add to the fallback copy the thread owns); the slow path.
    #[cold]
    #[inline(never)]
    unsafe fn other_add(b: *mut sys::tally_block, p: *mut i64, tag: usize, slot: u32, v: i64) {
        if tag == sys::TALLY_SHARED as usize {
            (*(p as *const AtomicI64)).fetch_add(v, Ordering::Relaxed);
        } else if (*std::ptr::addr_of!(sys::tally__cfg)).rseq_limit == 0 {
            sys::tally_block_add(b, slot, v);
        } else {
            sys::tally__block_add_slow(b, slot, v);
        }
    }
}
