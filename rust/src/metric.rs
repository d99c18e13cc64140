//! Named series: counters, gauges and histograms (include/tally/metrics.h)
//! as Rust handles that hold their zone.

use std::ffi::CString;
use std::marker::PhantomData;
use std::os::raw::c_uint;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::add::block_add;
use crate::error::{Error, Result};
use crate::sys;
use crate::zone::{cstring, Zone};

/// How a series' copies are kept (the block modes of tally/block.h).
///
/// ```
/// let zone = tally::Zone::create("mode_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
/// let cold = zone.counter(&tally::Desc::new("cold_total").mode(tally::Mode::Shared));
/// cold.increment(1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// One copy per CPU, updated with one unlocked add in a restartable
    /// sequence (the default).
    #[default]
    PerCpu,
    /// One copy updated with atomic adds: the cheapest memory, for
    /// counters that are rarely hot.
    Shared,
    /// One copy per NUMA node, updated with atomic adds.
    PerNode,
    /// One shared copy until contention is seen, then per-CPU copies.
    Adaptive,
}

impl Mode {
    fn raw(self) -> c_uint {
        match self {
            Mode::PerCpu => sys::TALLY_PERCPU,
            Mode::Shared => sys::TALLY_SHARED,
            Mode::PerNode => sys::TALLY_PERNODE,
            Mode::Adaptive => sys::TALLY_ADAPTIVE,
        }
    }
}

/// What to register: a Prometheus metric name, help, unit, constant
/// labels, the mode and a histogram's layout (struct tally_metric_desc).
///
/// ```
/// let d = tally::Desc::new("http_requests_total")
///     .help("HTTP requests served.")
///     .label("method", "GET");
/// # let _ = d;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    pub(crate) name: String,
    pub(crate) help: Option<String>,
    pub(crate) unit: Option<String>,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) mode: Mode,
    pub(crate) sub_bits: u32,
    pub(crate) max_bits: u32,
}

impl Desc {
    /// A series named `name` (`[a-zA-Z_:][a-zA-Z0-9_:]*`, checked at
    /// registration).
    ///
    /// ```
    /// let _ = tally::Desc::new("jobs_total");
    /// ```
    pub fn new(name: impl Into<String>) -> Desc {
        Desc {
            name: name.into(),
            ..Desc::default()
        }
    }

    /// Its help text (UTF-8, at most 839 bytes).
    ///
    /// ```
    /// let _ = tally::Desc::new("jobs_total").help("Jobs run.");
    /// ```
    pub fn help(mut self, help: impl Into<String>) -> Desc {
        self.help = Some(help.into());
        self
    }

    /// Its unit (`[a-zA-Z0-9_]*`, at most 31 bytes): "seconds",
    /// "nanoseconds", "bytes" ...
    ///
    /// ```
    /// let _ = tally::Desc::new("latency").unit("nanoseconds");
    /// ```
    pub fn unit(mut self, unit: impl Into<String>) -> Desc {
        self.unit = Some(unit.into());
        self
    }

    /// A constant label (name `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with
    /// `__`; any UTF-8 value).
    ///
    /// ```
    /// let _ = tally::Desc::new("jobs_total").label("queue", "0");
    /// ```
    pub fn label(mut self, name: impl Into<String>, value: impl Into<String>) -> Desc {
        self.labels.push((name.into(), value.into()));
        self
    }

    /// The mode of its copies ([`Mode::PerCpu`] by default).
    ///
    /// ```
    /// let _ = tally::Desc::new("cold_total").mode(tally::Mode::Shared);
    /// ```
    pub fn mode(mut self, mode: Mode) -> Desc {
        self.mode = mode;
        self
    }

    /// A histogram's layout: buckets at most 2^-`sub_bits` of their lower
    /// bound wide (1..7, default 3) for values up to 2^`max_bits` - 1
    /// (default 40).
    ///
    /// ```
    /// let _ = tally::Desc::new("size_bytes").buckets(2, 32);
    /// ```
    pub fn buckets(mut self, sub_bits: u32, max_bits: u32) -> Desc {
        self.sub_bits = sub_bits;
        self.max_bits = max_bits;
        self
    }
}

/// A Desc as C strings, alive while the C call uses it.
pub(crate) struct CDesc {
    _strings: Vec<CString>,
    _labels: Vec<sys::tally_label>,
    pub(crate) raw: sys::tally_metric_desc,
}

impl CDesc {
    pub(crate) fn new(d: &Desc, kind: c_uint) -> Result<CDesc> {
        let mut strings = Vec::with_capacity(3 + 2 * d.labels.len());
        let name = cstring("metric name", &d.name)?;
        let help = d.help.as_deref().map(|h| cstring("help", h)).transpose()?;
        let unit = d.unit.as_deref().map(|u| cstring("unit", u)).transpose()?;
        let mut labels = Vec::with_capacity(d.labels.len());
        for (n, v) in &d.labels {
            let cn = cstring("label name", n)?;
            let cv = cstring("label value", v)?;
            labels.push(sys::tally_label {
                name: cn.as_ptr(),
                value: cv.as_ptr(),
            });
            strings.push(cn);
            strings.push(cv);
        }
        let raw = sys::tally_metric_desc {
            kind,
            name: name.as_ptr(),
            help: help.as_ref().map_or(std::ptr::null(), |h| h.as_ptr()),
            unit: unit.as_ref().map_or(std::ptr::null(), |u| u.as_ptr()),
            labels: if labels.is_empty() {
                std::ptr::null()
            } else {
                labels.as_ptr()
            },
            nlabels: labels.len() as c_uint,
            mode: d.mode.raw(),
            hist_sub_bits: d.sub_bits,
            hist_max_bits: d.max_bits,
        };
        strings.push(name);
        strings.extend(help);
        strings.extend(unit);
        // The CStrings' buffers and the labels' vector do not move when
        // their owners move into the struct: the pointers stay valid.
        Ok(CDesc {
            _strings: strings,
            _labels: labels,
            raw,
        })
    }
}

/// One registration of a series: removed (one reference given back)
/// when the last handle made from it goes.
pub(crate) struct Registration {
    /// The handle the C registration filled: a classic histogram's (or
    /// summary's), whose first member is every other kind's handle.
    h: sys::tally_chistogram,
    registered: bool,
    _zone: Option<Zone>,
}

// SAFETY: the C metric calls are MT-safe; the registration is removed
// once, in Drop, when no handle uses it.
unsafe impl Send for Registration {}
unsafe impl Sync for Registration {}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.registered {
            // SAFETY: the last handle of this registration is gone.
            unsafe { sys::tally_metric_remove(&mut self.h.metric) };
        }
    }
}

impl Registration {
    /// The metric of the handle, the first member of a tally_chistogram.
    pub(crate) fn metric(&self) -> *const sys::tally_metric {
        &self.h.metric
    }
}

/// What keeps a handle's series and zone alive (held for its Drop).
#[derive(Clone)]
#[allow(dead_code)]
pub(crate) enum Keep {
    Series(Arc<Registration>),
    Family(Arc<crate::family::FamilyInner>),
}

pub(crate) type RegisterFn = unsafe extern "C" fn(
    *mut sys::tally_zone,
    *const sys::tally_metric_desc,
    *mut sys::tally_handle,
) -> i32;

/// Registers `d` as `kind` in `zone`: the registration (a discarding one
/// when it failed) and the error.
pub(crate) fn register(
    zone: &Zone,
    d: &Desc,
    kind: c_uint,
    f: RegisterFn,
) -> (Arc<Registration>, Option<Error>) {
    // SAFETY: register_with() passes a live zone, description and handle.
    register_with(zone, d, kind, |z, cd, m| unsafe { f(z, cd, m) })
}

/// A C handle that a registration fills: every kind's (tally_metric), or
/// the classic histogram's and summary's (tally_chistogram), which begins
/// with it.  A registration holds the larger one.
pub(crate) trait CHandle {}
impl CHandle for sys::tally_metric {}
impl CHandle for sys::tally_chistogram {}

/// register() through `f`, which calls the C registration of `kind` with
/// a live zone, description and handle.
pub(crate) fn register_with<H: CHandle>(
    zone: &Zone,
    d: &Desc,
    kind: c_uint,
    mut f: impl FnMut(*mut sys::tally_zone, *const sys::tally_metric_desc, *mut H) -> i32,
) -> (Arc<Registration>, Option<Error>) {
    let mut m = sys::tally_chistogram {
        metric: sys::tally_metric::zeroed(),
        bounds: std::ptr::null(),
        nbounds: 0,
    };
    let (rc, err) = match CDesc::new(d, kind) {
        Ok(cd) => {
            let rc = f(zone.as_ptr(), &cd.raw, std::ptr::addr_of_mut!(m).cast());
            (rc, if rc < 0 { Some(Error::last(-rc)) } else { None })
        }
        Err(e) => {
            // A NUL in a string: let the library make its discarding
            // handle and count the failure, as for any bad name.
            let bad = sys::tally_metric_desc {
                kind,
                name: c"".as_ptr(),
                help: std::ptr::null(),
                unit: std::ptr::null(),
                labels: std::ptr::null(),
                nlabels: 0,
                mode: 0,
                hist_sub_bits: 0,
                hist_max_bits: 0,
            };
            f(zone.as_ptr(), &bad, std::ptr::addr_of_mut!(m).cast());
            (-e.errno(), Some(e))
        }
    };
    let reg = Registration {
        h: m,
        registered: rc == 0,
        _zone: Some(zone.clone()),
    };
    (Arc::new(reg), err)
}

/// The value of the series of a handle, or the error of its registration.
///
/// # Safety
///
/// `metric` points at a filled handle that lives until this returns.
pub(crate) unsafe fn fetch_metric(metric: *const sys::tally_metric) -> Result<i64> {
    let mut v = 0i64;
    // SAFETY: as the caller promises.
    let rc = unsafe { sys::tally_metric_fetch(metric, &mut v) };
    if rc < 0 {
        Err(Error::new(-rc, "the series was not registered"))
    } else {
        Ok(v)
    }
}

macro_rules! handle_common {
    ($owned:ident, $borrowed:ident, $what:literal) => {
        // SAFETY: the update calls are MT-safe and async-signal-safe, and
        // the handle keeps its series and zone alive.
        unsafe impl Send for $owned {}
        unsafe impl Sync for $owned {}
        unsafe impl Send for $borrowed<'_> {}
        unsafe impl Sync for $borrowed<'_> {}

        impl std::fmt::Debug for $owned {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($owned)).field("discarding", &self.is_discarding()).finish()
            }
        }

        impl std::fmt::Debug for $borrowed<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($borrowed)).field("discarding", &self.is_discarding()).finish()
            }
        }

        impl $owned {
            pub(crate) fn from_parts(metric: *const sys::tally_metric, keep: Keep) -> $owned {
                // SAFETY: metric points at a filled handle kept by `keep`.
                let m = unsafe { &*metric };
                $owned { block: m.block, metric, sub_bits: m.sub_bits, max_bits: m.max_bits, keep }
            }

            pub(crate) fn from_registration(reg: Arc<Registration>) -> $owned {
                $owned::from_parts(reg.metric(), Keep::Series(reg))
            }

            #[doc = concat!("Whether this ", $what, " discards its updates (its registration failed).")]
            ///
            /// ```
            /// let zone = tally::Zone::create("discard_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
            /// assert!(zone.counter(&tally::Desc::new("bad name")).is_discarding());
            /// ```
            pub fn is_discarding(&self) -> bool {
                self.fetch().is_err()
            }

            fn fetch(&self) -> Result<i64> {
                // SAFETY: the handle is kept alive by self.keep.
                unsafe { fetch_metric(self.metric) }
            }

            #[doc = concat!("A borrowed copy of this ", $what, ", for code that should not hold a reference count.")]
            ///
            /// ```
            /// let zone = tally::Zone::create("borrow_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
            /// let c = zone.counter(&tally::Desc::new("x_total"));
            /// let _b = c.borrow();
            /// ```
            pub fn borrow(&self) -> $borrowed<'_> {
                $borrowed { block: self.block, metric: self.metric, sub_bits: self.sub_bits,
                            max_bits: self.max_bits, _life: PhantomData }
            }
        }

        impl $borrowed<'_> {
            #[doc = concat!("Whether this ", $what, " discards its updates.")]
            pub fn is_discarding(&self) -> bool {
                self.fetch().is_err()
            }

            fn fetch(&self) -> Result<i64> {
                // SAFETY: the lifetime keeps the family (and the handle) alive.
                unsafe { fetch_metric(self.metric) }
            }
        }
    };
}

macro_rules! handle_types {
    ($owned:ident, $borrowed:ident, $what:literal, $doc:literal, $example:literal) => {
        #[doc = $doc]
        ///
        /// Cloning is a reference count; the series' registration is given
        /// back (and the series removed, if it was the last) when the last
        /// clone is dropped.  It holds its zone, so it cannot outlive it.
        /// `Send` and `Sync`: updates are lock-free and MT-safe.
        ///
        /// ```
        #[doc = $example]
        /// ```
        #[derive(Clone)]
        pub struct $owned {
            block: *mut sys::tally_block,
            metric: *const sys::tally_metric,
            #[allow(dead_code)]
            sub_bits: u8,
            #[allow(dead_code)]
            max_bits: u8,
            #[allow(dead_code)]
            keep: Keep,
        }

        #[doc = concat!("A ", $what, " borrowed from a family (or from an owned handle): the same updates, valid while the family lives.")]
        #[derive(Clone, Copy)]
        pub struct $borrowed<'f> {
            // The classic kinds pass their whole handle to C instead.
            #[allow(dead_code)]
            block: *mut sys::tally_block,
            metric: *const sys::tally_metric,
            #[allow(dead_code)]
            sub_bits: u8,
            #[allow(dead_code)]
            max_bits: u8,
            _life: PhantomData<&'f ()>,
        }

        impl<'f> $borrowed<'f> {
            // Families make them; a kind without one (PGauge) does not.
            #[allow(dead_code)]
            pub(crate) fn from_metric(metric: *const sys::tally_metric) -> $borrowed<'f> {
                // SAFETY: metric points at a filled handle living for 'f.
                let m = unsafe { &*metric };
                $borrowed { block: m.block, metric, sub_bits: m.sub_bits, max_bits: m.max_bits,
                            _life: PhantomData }
            }
        }

        handle_common!($owned, $borrowed, $what);
    };
}

handle_types!(
    Counter,
    CounterRef,
    "counter",
    "A monotonic counter (TALLY_COUNTER): per-CPU adds, exact totals.",
    "let zone = tally::Zone::create(\"counter_doc\", &tally::ZoneOptions::new().anonymous())?;
let c = zone.try_counter(&tally::Desc::new(\"jobs_total\").help(\"Jobs run.\"))?;
c.increment(3);
assert_eq!(c.value(), 3);
# Ok::<(), tally::Error>(())"
);
handle_types!(Gauge, GaugeRef, "gauge",
    "A gauge changed by adds (TALLY_GAUGE): +1 on start, -1 on completion; never read below a value it had.",
    "let zone = tally::Zone::create(\"gauge_doc\", &tally::ZoneOptions::new().anonymous())?;
let g = zone.try_gauge(&tally::Desc::new(\"in_flight\"))?;
g.increment();
g.add(4);
g.decrement();
assert_eq!(g.value(), 4);
# Ok::<(), tally::Error>(())");
handle_types!(
    SetGauge,
    SetGaugeRef,
    "set-gauge",
    "An integer gauge that is set (TALLY_GAUGE_SET): one shared slot.",
    "let zone = tally::Zone::create(\"setgauge_doc\", &tally::ZoneOptions::new().anonymous())?;
let g = zone.try_set_gauge(&tally::Desc::new(\"queue_length\"))?;
g.set(12);
assert_eq!(g.value(), 12);
# Ok::<(), tally::Error>(())"
);
handle_types!(
    FGauge,
    FGaugeRef,
    "floating-point gauge",
    "A floating-point gauge (TALLY_FGAUGE): set or added to, every double held exactly.",
    "let zone = tally::Zone::create(\"fgauge_doc\", &tally::ZoneOptions::new().anonymous())?;
let g = zone.try_fgauge(&tally::Desc::new(\"temperature_celsius\"))?;
g.set(20.5);
g.add(0.25);
assert_eq!(g.value(), 20.75);
# Ok::<(), tally::Error>(())"
);
handle_types!(
    PGauge,
    PGaugeRef,
    "per-process gauge",
    "A per-process floating-point gauge (TALLY_PGAUGE, format 2.6): each process has its own value, and readers combine them as its [`Combine`] mode says, leaving out the processes that are gone under the live modes (judged by a lock, the same from any PID namespace).",
    "let zone = tally::Zone::create(\"pgauge_doc\", &tally::ZoneOptions::new().anonymous())?;
let g = zone.try_pgauge(&tally::Desc::new(\"in_flight\"), tally::Combine::LiveSum)?;
g.add(1.0);
g.add(1.0);
g.add(-1.0);
assert_eq!(g.value(), 1.0);
# Ok::<(), tally::Error>(())"
);
handle_types!(
    Histogram,
    HistogramRef,
    "histogram",
    "A histogram (TALLY_HISTOGRAM): per-CPU log-linear buckets of integer values and their sum.",
    "let zone = tally::Zone::create(\"histogram_doc\", &tally::ZoneOptions::new().anonymous())?;
let h = zone.try_histogram(&tally::Desc::new(\"latency\").unit(\"nanoseconds\"))?;
h.observe(1500);
h.observe(2500);
assert_eq!(h.count(), 2);
# Ok::<(), tally::Error>(())"
);

/// The bucket a histogram puts `v` in (tally_histogram_bucket()).
#[inline(always)]
pub(crate) fn histogram_bucket(v: u64, sub_bits: u32, max_bits: u32) -> u32 {
    if v < (1u64 << sub_bits) {
        return v as u32;
    }
    let e = 63 - v.leading_zeros();
    if e >= max_bits {
        return ((max_bits - sub_bits + 1) << sub_bits) - 1;
    }
    ((e - sub_bits + 1) << sub_bits) + ((v >> (e - sub_bits)) & ((1u64 << sub_bits) - 1)) as u32
}

macro_rules! counter_methods {
    () => {
        /// Adds `n`; one unlocked add on this CPU's copy.  Amounts above
        /// `i64::MAX` wrap as the int64 slot does.
        ///
        /// ```
        /// # let zone = tally::Zone::create("inc_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let c = zone.counter(&tally::Desc::new("x_total"));
        /// c.increment(1);
        /// ```
        #[inline(always)]
        pub fn increment(&self, n: u64) {
            // SAFETY: the block lives as long as the handle.
            unsafe { block_add(self.block, 0, n as i64) }
        }

        /// The same add through the exported C function `tally_block_add`
        /// (a call instead of the inline sequence): for comparison.
        #[doc(hidden)]
        #[inline(always)]
        pub fn increment_via_call(&self, n: u64) {
            // SAFETY: as increment().
            unsafe { sys::tally_block_add(self.block, 0, n as i64) }
        }

        /// The value in this process: the sum of the copies (0 when
        /// discarding).
        ///
        /// ```
        /// # let zone = tally::Zone::create("val_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let c = zone.counter(&tally::Desc::new("x_total"));
        /// assert_eq!(c.value(), 0);
        /// ```
        pub fn value(&self) -> i64 {
            self.fetch().unwrap_or(0)
        }

        #[doc(hidden)]
        pub fn raw_handle(&self) -> *const sys::tally_metric {
            self.metric
        }
    };
}

macro_rules! gauge_methods {
    () => {
        /// Adds `v` (signed): increments and decrements go to two slots,
        /// chosen by the sign without a branch.
        ///
        /// ```
        /// # let zone = tally::Zone::create("gadd_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.gauge(&tally::Desc::new("g"));
        /// g.add(-2);
        /// ```
        #[inline(always)]
        pub fn add(&self, v: i64) {
            // SAFETY: the block lives as long as the handle.
            unsafe { block_add(self.block, ((v as u64) >> 63) as u32, v) }
        }

        /// Adds 1.
        ///
        /// ```
        /// # let zone = tally::Zone::create("ginc_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.gauge(&tally::Desc::new("g"));
        /// g.increment();
        /// assert_eq!(g.value(), 1);
        /// ```
        #[inline(always)]
        pub fn increment(&self) {
            self.add(1)
        }

        /// Subtracts 1.
        ///
        /// ```
        /// # let zone = tally::Zone::create("gdec_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.gauge(&tally::Desc::new("g"));
        /// g.decrement();
        /// assert_eq!(g.value(), -1);
        /// ```
        #[inline(always)]
        pub fn decrement(&self) {
            self.add(-1)
        }

        /// The value in this process (0 when discarding).
        ///
        /// ```
        /// # let zone = tally::Zone::create("gval_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.gauge(&tally::Desc::new("g"));
        /// g.add(5);
        /// assert_eq!(g.value(), 5);
        /// ```
        pub fn value(&self) -> i64 {
            self.fetch().unwrap_or(0)
        }
    };
}

macro_rules! setgauge_methods {
    () => {
        /// Sets the value: one atomic store.
        ///
        /// ```
        /// # let zone = tally::Zone::create("sset_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.set_gauge(&tally::Desc::new("g"));
        /// g.set(7);
        /// ```
        #[inline(always)]
        pub fn set(&self, v: i64) {
            // SAFETY: a set-gauge's one copy is the block's shared slot.
            unsafe {
                (*(((self.block as usize) & !3usize) as *const AtomicI64))
                    .store(v, Ordering::Relaxed)
            }
        }

        /// Adds `v`.
        ///
        /// ```
        /// # let zone = tally::Zone::create("sadd_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.set_gauge(&tally::Desc::new("g"));
        /// g.set(2);
        /// g.add(3);
        /// assert_eq!(g.value(), 5);
        /// ```
        #[inline(always)]
        pub fn add(&self, v: i64) {
            // SAFETY: the block lives as long as the handle.
            unsafe { block_add(self.block, 0, v) }
        }

        /// The value in this process (0 when discarding).
        ///
        /// ```
        /// # let zone = tally::Zone::create("sval_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.set_gauge(&tally::Desc::new("g"));
        /// g.set(9);
        /// assert_eq!(g.value(), 9);
        /// ```
        pub fn value(&self) -> i64 {
            self.fetch().unwrap_or(0)
        }
    };
}

macro_rules! fgauge_methods {
    () => {
        /// Sets the value: one atomic store of the double's bits.
        ///
        /// ```
        /// # let zone = tally::Zone::create("fset_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.fgauge(&tally::Desc::new("g"));
        /// g.set(0.5);
        /// ```
        #[inline(always)]
        pub fn set(&self, v: f64) {
            self.word().store(v.to_bits() as i64, Ordering::Relaxed)
        }

        /// Adds `v` (a compare-and-swap loop: no add is lost).
        ///
        /// ```
        /// # let zone = tally::Zone::create("fadd_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.fgauge(&tally::Desc::new("g"));
        /// g.add(0.5);
        /// g.add(0.25);
        /// assert_eq!(g.value(), 0.75);
        /// ```

        #[inline(always)]
        pub fn add(&self, v: f64) {
            let w = self.word();
            let mut old = w.load(Ordering::Relaxed);
            loop {
                let new = (f64::from_bits(old as u64) + v).to_bits() as i64;
                match w.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => return,
                    Err(cur) => old = cur,
                }
            }
        }

        #[inline(always)]
        fn word(&self) -> &AtomicI64 {
            // SAFETY: an fgauge's one copy is the block's shared slot,
            // 8-byte aligned, alive as long as the handle.
            unsafe { &*(((self.block as usize) & !3usize) as *const AtomicI64) }
        }

        /// The value (0.0 when discarding).
        ///
        /// ```
        /// # let zone = tally::Zone::create("fval_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.fgauge(&tally::Desc::new("g"));
        /// g.set(-1.5);
        /// assert_eq!(g.value(), -1.5);
        /// ```

        pub fn value(&self) -> f64 {
            let mut v = 0f64;
            // SAFETY: the handle is alive.
            let rc = unsafe { sys::tally_fgauge_fetch(self.metric, &mut v) };
            if rc < 0 {
                0.0
            } else {
                v
            }
        }
    };
}

macro_rules! pgauge_methods {
    () => {
        /// Sets this process's value (and, under the mostrecent modes,
        /// the time of its last set).
        ///
        /// ```
        /// # let zone = tally::Zone::create("pset_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.pgauge(&tally::Desc::new("g"), tally::Combine::Max);
        /// g.set(0.5);
        /// assert_eq!(g.value(), 0.5);
        /// ```
        #[inline]
        pub fn set(&self, v: f64) {
            if self.sub_bits < Combine::MostRecent as u8 {
                self.word().store(v.to_bits() as i64, Ordering::Relaxed);
                return;
            }
            // SAFETY: the handle is alive (a discarding one too).
            unsafe { sys::tally_pgauge_set(self.metric as *const sys::tally_handle, v) }
        }

        /// Adds `v` to this process's value (no add is lost).
        ///
        /// ```
        /// # let zone = tally::Zone::create("padd_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let g = zone.pgauge(&tally::Desc::new("g"), tally::Combine::LiveSum);
        /// g.add(0.5);
        /// g.add(0.25);
        /// assert_eq!(g.value(), 0.75);
        /// ```
        #[inline]
        pub fn add(&self, v: f64) {
            if self.sub_bits < Combine::MostRecent as u8 {
                let w = self.word();
                let mut old = w.load(Ordering::Relaxed);
                loop {
                    let new = (f64::from_bits(old as u64) + v).to_bits() as i64;
                    match w.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
                        Ok(_) => return,
                        Err(cur) => old = cur,
                    }
                }
            }
            // SAFETY: as set().
            unsafe { sys::tally_pgauge_add(self.metric as *const sys::tally_handle, v) }
        }

        #[inline(always)]
        fn word(&self) -> &AtomicI64 {
            // SAFETY: a per-process gauge's value is the block's shared
            // slot 0, 8-byte aligned, alive as long as the handle (the
            // mostrecent modes' time of set is slot 1, which the C call
            // stamps).
            unsafe { &*(((self.block as usize) & !3usize) as *const AtomicI64) }
        }

        /// This process's value (0.0 when discarding); readers show the
        /// combined one.
        pub fn value(&self) -> f64 {
            let mut v = 0f64;
            // SAFETY: the handle is alive.
            let rc = unsafe {
                sys::tally_pgauge_fetch(self.metric as *const sys::tally_handle, &mut v)
            };
            if rc < 0 {
                0.0
            } else {
                v
            }
        }
    };
}

macro_rules! histogram_methods {
    () => {
        /// Counts `v` in its bucket and adds it to the sum: two per-CPU
        /// adds.
        ///
        /// ```
        /// # let zone = tally::Zone::create("obs_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let h = zone.histogram(&tally::Desc::new("h"));
        /// h.observe(42);
        /// ```
        #[inline(always)]
        pub fn observe(&self, v: u64) {
            let b = histogram_bucket(v, self.sub_bits as u32, self.max_bits as u32);
            // SAFETY: slot 0 is the sum, slot 1 + b bucket b, within the
            // block the layout sized (a discarding handle's block is a
            // whole chunk).
            unsafe {
                block_add(self.block, 1 + b, 1);
                block_add(self.block, 0, v as i64);
            }
        }

        /// The number of observations in this process (0 when
        /// discarding).
        ///
        /// ```
        /// # let zone = tally::Zone::create("hcount_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let h = zone.histogram(&tally::Desc::new("h"));
        /// h.observe(7);
        /// assert_eq!(h.count(), 1);
        /// ```

        pub fn count(&self) -> i64 {
            self.fetch().unwrap_or(0)
        }

        /// The sum of the observed values in this process.
        ///
        /// ```
        /// # let zone = tally::Zone::create("hsum_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        /// # let h = zone.histogram(&tally::Desc::new("h"));
        /// h.observe(7);
        /// h.observe(8);
        /// assert_eq!(h.sum(), 15);
        /// ```

        pub fn sum(&self) -> i64 {
            let mut v = 0i64;
            if self.is_discarding() {
                return 0;
            }
            // SAFETY: slot 0 of a registered histogram's block is its sum.
            unsafe { sys::tally_block_fetch(self.block, 0, &mut v) };
            v
        }
    };
}

impl Counter {
    counter_methods!();
}
impl CounterRef<'_> {
    counter_methods!();
}
impl Gauge {
    gauge_methods!();
}
impl GaugeRef<'_> {
    gauge_methods!();
}
impl SetGauge {
    setgauge_methods!();
}
impl SetGaugeRef<'_> {
    setgauge_methods!();
}
impl FGauge {
    fgauge_methods!();
}
impl FGaugeRef<'_> {
    fgauge_methods!();
}
impl PGauge {
    pgauge_methods!();
}
impl PGaugeRef<'_> {
    pgauge_methods!();
}
impl Histogram {
    histogram_methods!();
}
impl HistogramRef<'_> {
    histogram_methods!();
}

macro_rules! zone_register {
    ($try:ident, $or:ident, $ty:ident, $kind:expr, $f:path, $what:literal) => {
        #[doc = concat!("Gets or creates the ", $what, " `d`: a series that exists (in this process or another sharing the zone) is the one returned, with one more reference.")]
        ///
        /// A name registered with another definition is not an error:
        /// another help or unit replaces the old one, another kind, mode
        /// or layout is a new generation of the name, the one readers
        /// show (tally(3), DEFINITIONS THAT CHANGE).
        ///
        /// Errors: `EINVAL` for a bad name, label, unit, help or layout;
        /// `E2BIG` for a string over its limit; `ENOSPC` for a full zone
        /// or file system; never a panic.
        ///
        /// ```
        /// let zone = tally::Zone::create("try_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        #[doc = concat!("assert!(zone.", stringify!($try), "(&tally::Desc::new(\"ok_name\")).is_ok());")]
        #[doc = concat!("assert!(zone.", stringify!($try), "(&tally::Desc::new(\"bad name\")).is_err());")]
        /// ```
        pub fn $try(&self, d: &Desc) -> Result<$ty> {
            let (reg, err) = register(self, d, $kind, $f);
            match err {
                None => Ok($ty::from_registration(reg)),
                Some(e) => Err(e),
            }
        }

        #[doc = concat!("The ", $what, " `d`, or, when it cannot be registered, a handle that discards its updates (as in C): a service runs on without the series, and the zone counts the failure for its readers.")]
        ///
        /// ```
        /// let zone = tally::Zone::create("or_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
        #[doc = concat!("let h = zone.", stringify!($or), "(&tally::Desc::new(\"bad name\"));")]
        /// assert!(h.is_discarding());
        /// ```
        pub fn $or(&self, d: &Desc) -> $ty {
            $ty::from_registration(register(self, d, $kind, $f).0)
        }
    };
}

/// How readers combine the values of a [`PGauge`]'s processes for one
/// label set: prometheus_client's multiprocess modes (TALLY_COMBINE_*).
/// `All` and `LiveAll` show each process's value with a `pid` label; the
/// `Live` modes leave out the processes that are gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// Each process's value, with its pid.
    All = 0,
    /// Each live process's value, with its pid.
    LiveAll = 1,
    /// The sum.
    Sum = 2,
    /// The sum over live processes: an in-flight gauge.
    LiveSum = 3,
    /// The largest.
    Max = 4,
    /// The largest of live processes.
    LiveMax = 5,
    /// The smallest.
    Min = 6,
    /// The smallest of live processes.
    LiveMin = 7,
    /// The value set last.
    MostRecent = 8,
    /// The value a live process set last.
    LiveMostRecent = 9,
}

impl Zone {
    /// Gets or creates this process's series of the per-process gauge
    /// `d`, combined by readers as `combine` says (tally_pgauge_register).
    /// A label named `pid` is refused (the library adds it).  A handle
    /// belongs to its process: a child made by fork registers its own.
    ///
    /// Errors: as [`Zone::try_fgauge`], and `EPROTONOSUPPORT` in a zone
    /// made by a libtally older than format 2.6.
    ///
    /// ```
    /// let zone = tally::Zone::create("trypg_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// assert!(zone.try_pgauge(&tally::Desc::new("ok"), tally::Combine::Sum).is_ok());
    /// assert!(zone.try_pgauge(&tally::Desc::new("bad name"), tally::Combine::Sum).is_err());
    /// ```
    pub fn try_pgauge(&self, d: &Desc, combine: Combine) -> Result<PGauge> {
        let (reg, err) = register_pgauge(self, d, combine);
        match err {
            None => Ok(PGauge::from_registration(reg)),
            Some(e) => Err(e),
        }
    }

    /// The per-process gauge `d`, or a handle that discards its updates
    /// when it cannot be registered.
    pub fn pgauge(&self, d: &Desc, combine: Combine) -> PGauge {
        PGauge::from_registration(register_pgauge(self, d, combine).0)
    }
}

/// register() for a per-process gauge, whose registration takes its
/// combine mode besides.
fn register_pgauge(zone: &Zone, d: &Desc, combine: Combine) -> (Arc<Registration>, Option<Error>) {
    let c = combine as c_uint;
    register_with(zone, d, sys::TALLY_PGAUGE, |z, cd, m| {
        // SAFETY: register_with() passes a live zone, description and
        // handle.
        unsafe { sys::tally_pgauge_register(z, cd, c, m) }
    })
}

impl Zone {
    zone_register!(
        try_counter,
        counter,
        Counter,
        sys::TALLY_COUNTER,
        sys::tally_counter_register,
        "counter"
    );
    zone_register!(
        try_gauge,
        gauge,
        Gauge,
        sys::TALLY_GAUGE,
        sys::tally_gauge_register,
        "gauge"
    );
    zone_register!(
        try_set_gauge,
        set_gauge,
        SetGauge,
        sys::TALLY_GAUGE_SET,
        sys::tally_setgauge_register,
        "set-gauge"
    );
    zone_register!(
        try_fgauge,
        fgauge,
        FGauge,
        sys::TALLY_FGAUGE,
        sys::tally_fgauge_register,
        "floating-point gauge"
    );
    zone_register!(
        try_histogram,
        histogram,
        Histogram,
        sys::TALLY_HISTOGRAM,
        sys::tally_histogram_register,
        "histogram"
    );
}

/// The rules above the add, written again here (the histogram's bucket,
/// the gauge's slot by sign, the float gauge's compare-and-swap add),
/// against the C library's exported update functions over edge values:
/// a change on either side fails here.
#[cfg(test)]
mod rules_match_c {
    use super::*;
    use crate::{Desc, Zone, ZoneOptions};

    unsafe extern "C" {
        fn tally_gauge_add(g: *const sys::tally_metric, v: i64);
        fn tally_histogram_observe(h: *const sys::tally_metric, v: u64);
        fn tally_fgauge_add(g: *const sys::tally_metric, v: f64);
    }

    fn slot(b: *mut sys::tally_block, s: u32) -> i64 {
        let mut v = 0i64;
        // SAFETY: b is a live block of the test's zone and s within it.
        assert_eq!(unsafe { sys::tally_block_fetch(b, s, &mut v) }, 0);
        v
    }

    /// Slots `0..n` of the Rust side's block and the C side's are equal;
    /// `what` says which updates they had.
    fn same_slots(
        ours: *mut sys::tally_block,
        theirs: *mut sys::tally_block,
        n: u32,
        what: &str,
    ) {
        for s in 0..n {
            assert_eq!(slot(ours, s), slot(theirs, s), "{what}: slot {s}");
        }
    }

    const INTS: [i64; 12] = [
        0,
        1,
        -1,
        2,
        -2,
        i64::MAX,
        i64::MIN,
        i64::MIN + 1,
        1 << 31,
        -(1 << 31),
        (1 << 31) - 1,
        -(1 << 62),
    ];

    #[test]
    fn gauge_slot_by_sign() {
        let zone = Zone::create("rules_gauge", &ZoneOptions::new().anonymous()).unwrap();
        for (i, &v) in INTS.iter().enumerate() {
            let ours = zone.try_gauge(&Desc::new(format!("g_rust_{i}"))).unwrap();
            let theirs = zone.try_gauge(&Desc::new(format!("g_c_{i}"))).unwrap();
            ours.add(v);
            // SAFETY: theirs is a registered gauge, alive.
            unsafe { tally_gauge_add(theirs.metric, v) };
            same_slots(ours.block, theirs.block, 2, &format!("gauge add {v}"));
        }
    }

    #[test]
    fn histogram_bucket_rule() {
        let zone = Zone::create("rules_hist", &ZoneOptions::new().anonymous()).unwrap();
        let mut values: Vec<u64> = vec![0, 1, 7, 8, 9, 15, 16, 17, u64::MAX, u64::MAX - 1, 1 << 63];
        for e in 0..64u32 {
            let p = 1u64 << e;
            values.extend([p - 1, p, p + 1]);
        }
        for (sub, max) in [
            (3u32, 40u32),
            (1, 2),
            (1, 63),
            (2, 63),
            (4, 20),
            (6, 10),
            (7, 8),
        ] {
            let desc = |who: &str| Desc::new(format!("h_{who}_{sub}_{max}")).buckets(sub, max);
            let ours = zone.try_histogram(&desc("rust")).unwrap();
            let theirs = zone.try_histogram(&desc("c")).unwrap();
            let nbuckets = (max - sub + 1) << sub;
            for &v in &values {
                ours.observe(v);
                // SAFETY: theirs is a registered histogram, alive.
                unsafe { tally_histogram_observe(theirs.metric, v) };
            }
            let what = format!("sub_bits {sub}, max_bits {max}");
            same_slots(ours.block, theirs.block, nbuckets + 1, &what);
        }
    }

    #[test]
    fn float_gauge_add() {
        let zone = Zone::create("rules_fgauge", &ZoneOptions::new().anonymous()).unwrap();
        let edges = [
            0.0,
            -0.0,
            1.5,
            -2.25,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::MIN_POSITIVE / 4.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1e308,
            -1e-310,
        ];
        for (i, &start) in edges.iter().enumerate() {
            for (j, &v) in edges.iter().enumerate() {
                let ours = zone
                    .try_fgauge(&Desc::new(format!("f_rust_{i}_{j}")))
                    .unwrap();
                let theirs = zone.try_fgauge(&Desc::new(format!("f_c_{i}_{j}"))).unwrap();
                ours.set(start);
                theirs.set(start);
                ours.add(v);
                // SAFETY: theirs is a registered float gauge, alive.
                unsafe { tally_fgauge_add(theirs.metric, v) };
                let (a, b) = (ours.value(), theirs.value());
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{start} + {v}: Rust {a}, C {b}"
                );
            }
        }
    }
}
