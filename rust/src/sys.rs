//! The C API of libtally, declared by hand from include/tally/*.h.
//!
//! Every declaration here mirrors a public header; the test
//! `abi_matches_the_headers` (tests/abi.rs) compares the sizes, field
//! offsets and constants of these declarations with those the C compiler
//! computes from the headers (csrc/abi.c), so a header change that is not
//! copied here fails the tests.  Nothing in this module is part of the
//! crate's stable API: use the safe types of the crate root.

#![allow(non_camel_case_types, missing_docs)]

use std::os::raw::{c_char, c_int, c_long, c_uint, c_void};

/// An opaque zone (struct tally_zone).
#[repr(C)]
pub struct tally_zone {
    _private: [u8; 0],
}

/// An opaque block (tally_block).
#[repr(C)]
pub struct tally_block {
    _private: [u8; 0],
}

/// An opaque segment opened by a reader (struct tally_seg).
#[repr(C)]
pub struct tally_seg {
    _private: [u8; 0],
}

pub const TALLY_ZONE_ANON: c_uint = 0x1;
pub const TALLY_ZONE_PERSIST: c_uint = 0x2;
pub const TALLY_ZONE_SHARED: c_uint = 0x4;

pub const TALLY_PERCPU: c_uint = 0;
pub const TALLY_SHARED: c_uint = 1;
pub const TALLY_PERNODE: c_uint = 2;
pub const TALLY_ADAPTIVE: c_uint = 3;

pub const TALLY_COUNTER: c_uint = 1;
pub const TALLY_GAUGE: c_uint = 2;
pub const TALLY_GAUGE_SET: c_uint = 3;
pub const TALLY_HISTOGRAM: c_uint = 4;
pub const TALLY_FGAUGE: c_uint = 5;
pub const TALLY_PGAUGE: c_uint = 6;
pub const TALLY_FCOUNTER: c_uint = 7;
pub const TALLY_CHISTOGRAM: c_uint = 8;
pub const TALLY_SUMMARY: c_uint = 9;

/// The most finite bucket bounds a classic histogram takes (the +Inf
/// bucket comes on top), and the longest help text it may have.
pub const TALLY_CHISTOGRAM_BOUNDS_MAX: usize = 40;
pub const TALLY_CHISTOGRAM_HELP_MAX: usize = 511;

pub const TALLY_NAME_MAX: usize = 127;
pub const TALLY_UNIT_MAX: usize = 31;
pub const TALLY_HELP_MAX: usize = 839;
/// Names and values of a series' labels, in bytes (TALLY_LABEL_PAIRS_MAX
/// pairs at most).
pub const TALLY_LABELS_MAX: usize = 4096;
pub const TALLY_LABEL_PAIRS_MAX: usize = 128;

pub const TALLY_HIST_SUB_BITS_DEFAULT: u32 = 3;
pub const TALLY_HIST_MAX_BITS_DEFAULT: u32 = 40;

pub const TALLY_READ_PERCPU: c_uint = 0x1;

/// tally/arch/add.h: the distance between two CPUs' copies of a slot.
pub const TALLY__STRIDE_SHIFT: u32 = 12;
pub const TALLY__STRIDE: usize = 1 << TALLY__STRIDE_SHIFT;
/// From a chunk's first copy page back to its reservation line.
pub const TALLY__RESV_BACK: usize = 2 * TALLY__STRIDE - 4032;
pub const TALLY__MODE_MASK: usize = 3;
/// tally/arch/add.h: the kernel's rseq ABI as the inline add uses it
/// (the CPU id and critical-section fields of the thread's area, and
/// glibc's x86 signature before an abort handler).
pub const TALLY__RSEQ_CPU_ID_OFF: usize = 4;
pub const TALLY__RSEQ_CS_OFF: usize = 8;
pub const TALLY__RSEQ_SIG: u32 = 0x5305_3053;
/// The page offset of the update path's settings (tally__cfg_t).
pub const TALLY__CFG_PAGE_OFF: usize = 4032;
/// The thread's two adaptive hints, from its stand-in (thread_off).
pub const TALLY__AHINT_OFF: usize = 64;

#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct tally_zone_opts {
    pub capacity: usize,
    pub max_series: usize,
    pub flags: c_uint,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
pub struct tally_zone_usage {
    pub resident_bytes: u64,
    pub mapped_bytes: u64,
    pub chunks_used: u64,
    pub chunks_total: u64,
    pub nslabs: u32,
    pub nnodes: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tally_label {
    pub name: *const c_char,
    pub value: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tally_metric_desc {
    pub kind: c_uint,
    pub name: *const c_char,
    pub help: *const c_char,
    pub unit: *const c_char,
    pub labels: *const tally_label,
    pub nlabels: c_uint,
    pub mode: c_uint,
    pub hist_sub_bits: c_uint,
    pub hist_max_bits: c_uint,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tally_metric {
    pub block: *mut tally_block,
    pub zone: *mut tally_zone,
    pub series: u32,
    pub seq: u32,
    pub kind: u8,
    pub sub_bits: u8,
    pub max_bits: u8,
}

impl tally_metric {
    pub const fn zeroed() -> Self {
        tally_metric {
            block: std::ptr::null_mut(),
            zone: std::ptr::null_mut(),
            series: 0,
            seq: 0,
            kind: 0,
            sub_bits: 0,
            max_bits: 0,
        }
    }
}

/// Every kind's handle (tally_counter, tally_gauge, ...) is this struct.
pub type tally_handle = tally_metric;

/// A classic histogram's handle (tally_chistogram): the metric and its
/// bounds in the zone's metric record.  A summary's handle
/// (tally_summary) is the same struct with no bounds.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct tally_chistogram {
    pub metric: tally_metric,
    pub bounds: *const f64,
    pub nbounds: c_uint,
}

pub type tally_summary = tally_chistogram;

/// Every kind's family (tally_counter_family, ...) is one table pointer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct tally_family {
    pub table: *mut c_void,
}

/// tally/arch/add.h: the read-mostly settings of the update path, at
/// page offset 4032 of a page of their own (so that no load of a setting
/// has a slot's page offset: tally/arch/add.h says why).
#[repr(C, align(4096))]
pub struct tally__cfg_t {
    pub pad: [u8; TALLY__CFG_PAGE_OFF],
    pub rseq_off: c_long,
    pub rseq_limit: c_uint,
    pub nslabs: c_uint,
    pub promoted: i64,
    pub nnodes: c_uint,
    pub cpu_node: *const u16,
    pub thread_off: c_long,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tally_open_opts {
    pub allow_uid: c_long,
    pub allow_group: c_int,
}

#[repr(C)]
pub struct tally_seg_info {
    pub path: *const c_char,
    pub pid: c_int,
    pub start_ticks: u64,
    pub created_ns: u64,
    pub proc_name: [c_char; 16],
    pub zone_name: [c_char; 64],
    pub major: c_uint,
    pub minor: c_uint,
    pub nslabs: c_uint,
    pub nnodes: c_uint,
    pub alive: c_int,
    pub in_use: c_int,
    pub file_bytes: u64,
    pub resident_bytes: u64,
    pub series_used: u32,
    pub families: u32,
    pub generation: u64,
    pub capacity_chunks: u64,
    pub chunks_inuse: u64,
    pub chunk_slots: u32,
    pub alloc_refused: u64,
    pub copies_refused: u64,
    pub register_failed: u64,
    pub shared: c_int,
    pub redefinitions: u64,
}

#[repr(C)]
pub struct tally_series_view {
    pub id: u32,
    pub kind: c_uint,
    pub mode: c_uint,
    pub name: *const c_char,
    pub help: *const c_char,
    pub unit: *const c_char,
    pub nlabels: c_uint,
    pub label_names: *const *const c_char,
    pub label_values: *const *const c_char,
    pub value: i64,
    pub percpu: *const i64,
    pub npercpu: c_uint,
    pub sum: i64,
    pub sub_bits: c_uint,
    pub max_bits: c_uint,
    pub nbuckets: c_uint,
    pub buckets: *const i64,
    pub fvalue: f64,
    pub per_process: c_int,
    pub combine: c_uint,
    pub nprocs: c_uint,
    pub fractional: c_int,
    pub frac: c_uint,
    pub classic: c_int,
    pub nbounds: c_uint,
    pub bounds: *const f64,
    pub fsum: f64,
    pub summary: c_int,
    pub info: c_int,
    pub stateset: c_int,
}

/// Declares C functions that share one signature: the metric kinds'
/// registrations and their families' registrations and lookups.
macro_rules! extern_same_signature {
    ($($name:ident),+; $args:tt -> $ret:ty) => {
        unsafe extern "C" {
            $(pub fn $name $args -> $ret;)+
        }
    };
}

extern_same_signature!(
    tally_counter_register,
    tally_gauge_register,
    tally_setgauge_register,
    tally_histogram_register,
    tally_fgauge_register;
    (z: *mut tally_zone, d: *const tally_metric_desc, h: *mut tally_handle) -> c_int
);

extern_same_signature!(
    tally_counter_family_register,
    tally_gauge_family_register,
    tally_setgauge_family_register,
    tally_histogram_family_register,
    tally_fgauge_family_register;
    (
        z: *mut tally_zone,
        d: *const tally_metric_desc,
        label_names: *const *const c_char,
        n: c_uint,
        f: *mut tally_family,
    ) -> c_int
);

extern_same_signature!(
    tally_counter_family_get,
    tally_gauge_family_get,
    tally_setgauge_family_get,
    tally_histogram_family_get,
    tally_fgauge_family_get;
    (
        f: *const tally_family,
        values: *const *const c_char,
        n: c_uint,
        c: *mut *const tally_handle,
    ) -> c_int
);

// A summary's handle is a classic histogram's (tally_summary is
// tally_chistogram).
extern_same_signature!(
    tally_chistogram_family_get,
    tally_summary_family_get;
    (
        f: *const tally_family,
        values: *const *const c_char,
        n: c_uint,
        c: *mut *const tally_chistogram,
    ) -> c_int
);

pub type tally_series_fn =
    unsafe extern "C" fn(v: *const tally_series_view, arg: *mut c_void) -> c_int;

unsafe extern "C" {
    pub static mut tally__cfg: tally__cfg_t;

    pub fn tally_zone_create(name: *const c_char, opts: *const tally_zone_opts) -> *mut tally_zone;
    pub fn tally_zone_destroy(z: *mut tally_zone) -> c_int;
    pub fn tally_zone_default() -> *mut tally_zone;
    pub fn tally_zone_usage(z: *mut tally_zone, u: *mut tally_zone_usage) -> c_int;
    pub fn tally_zone_path(z: *const tally_zone) -> *const c_char;
    pub fn tally_errmsg() -> *const c_char;

    pub fn tally_block_alloc(z: *mut tally_zone, nslots: c_uint, mode: c_uint) -> *mut tally_block;
    pub fn tally_block_free(z: *mut tally_zone, b: *mut tally_block) -> c_int;
    pub fn tally_block_fetch(b: *const tally_block, slot: c_uint, value: *mut i64) -> c_int;
    pub fn tally_block_zero(b: *mut tally_block, slot: c_uint, removed: *mut i64) -> c_int;
    pub fn tally_rseq_active() -> c_int;
    pub fn tally_block_add(b: *mut tally_block, slot: c_uint, v: i64);
    pub fn tally__block_add_slow(b: *mut tally_block, slot: c_uint, v: i64);

    pub fn tally_pgauge_register(
        z: *mut tally_zone,
        d: *const tally_metric_desc,
        combine: c_uint,
        g: *mut tally_handle,
    ) -> c_int;
    pub fn tally_pgauge_set(g: *const tally_handle, v: f64);
    pub fn tally_pgauge_add(g: *const tally_handle, v: f64);
    pub fn tally_pgauge_fetch(g: *const tally_handle, value: *mut f64) -> c_int;
    pub fn tally_metric_remove(m: *mut tally_metric) -> c_int;
    pub fn tally_metric_fetch(m: *const tally_metric, value: *mut i64) -> c_int;
    pub fn tally_fgauge_fetch(g: *const tally_handle, value: *mut f64) -> c_int;

    pub fn tally_family_remove(f: *mut tally_family) -> c_int;

    pub fn tally_chistogram_register(
        z: *mut tally_zone,
        d: *const tally_metric_desc,
        bounds: *const f64,
        nbounds: c_uint,
        h: *mut tally_chistogram,
    ) -> c_int;
    pub fn tally_chistogram_fetch(
        h: *const tally_chistogram,
        count: *mut i64,
        sum: *mut f64,
        buckets: *mut i64,
    ) -> c_int;
    pub fn tally_chistogram_observe(h: *const tally_chistogram, v: f64);
    pub fn tally_summary_register(
        z: *mut tally_zone,
        d: *const tally_metric_desc,
        s: *mut tally_summary,
    ) -> c_int;
    pub fn tally_summary_fetch(s: *const tally_summary, count: *mut i64, sum: *mut f64) -> c_int;
    pub fn tally_summary_observe(s: *const tally_summary, v: f64);
    pub fn tally_chistogram_family_register(
        z: *mut tally_zone,
        d: *const tally_metric_desc,
        bounds: *const f64,
        nbounds: c_uint,
        label_names: *const *const c_char,
        n: c_uint,
        f: *mut tally_family,
    ) -> c_int;
    pub fn tally_summary_family_register(
        z: *mut tally_zone,
        d: *const tally_metric_desc,
        label_names: *const *const c_char,
        n: c_uint,
        f: *mut tally_family,
    ) -> c_int;

    pub fn tally_seg_open(path: *const c_char, opts: *const tally_open_opts) -> *mut tally_seg;
    pub fn tally_seg_close(s: *mut tally_seg);
    pub fn tally_seg_info(s: *mut tally_seg, info: *mut tally_seg_info) -> c_int;
    pub fn tally_seg_foreach(
        s: *mut tally_seg,
        flags: c_uint,
        f: tally_series_fn,
        arg: *mut c_void,
    ) -> c_int;
}

// The crate's own C (csrc/): the ABI table and the C inline add loop.
unsafe extern "C" {
    pub static tally_rs_abi: [u64; 0];
    pub static tally_rs_abi_len: usize;
    pub fn tally_rs_bench_c_inc(c: *const tally_handle, n: u64);
    pub fn tally_rs_bench_c_call(c: *const tally_handle, n: u64);
    pub fn tally_rs_bench_c_family(f: *const tally_family, n: u64);
}
