//! A recorder for the `metrics` crate: an application that uses the
//! `metrics` macros (`counter!`, `gauge!`, `histogram!`, `describe_*!`)
//! records into a tally zone after one line at start-up:
//!
//! ```no_run
//! let zone = tally::Zone::default_zone()?;
//! tally::recorder::install(zone)?;
//! metrics::counter!("requests_total", "method" => "GET").increment(1);
//! # Ok::<(), tally::Error>(())
//! ```
//!
//! How `metrics` maps onto tally:
//! - a counter is a per-CPU [`Counter`](crate::Counter);
//!   `absolute(n)` raises it to `n` when it is below;
//! - a gauge (an `f64` that is set, increased and decreased) is an
//!   [`FGauge`](crate::FGauge), exact for every double;
//! - a histogram is a per-CPU tally [`Histogram`](crate::Histogram) of
//!   integers: a value described in seconds, milliseconds or
//!   microseconds (by `describe_histogram!` or a name ending in
//!   `_seconds`) is stored in integer nanoseconds with the unit
//!   "nanoseconds" (TALLY_UNIT_NANOSECONDS), which tally-exporter and
//!   `tallystat --human` show in seconds, exactly; any other value is
//!   rounded to an integer; negative values count as 0 and NaN is
//!   dropped;
//! - every distinct set of labels is one series (registration is
//!   get-or-create, so handles of one key share it); names and label
//!   names are made valid for Prometheus the way
//!   metrics-exporter-prometheus does (invalid characters become `_`);
//! - a description (help and unit) applies to the series registered
//!   after it; the first registration of a name fixes its help and unit
//!   for the others, so that a late description never splits a family.
//!
//! A series that cannot be registered (a full zone or file system, a
//! label name tally refuses) gets a handle that discards its updates, as
//! in C: the application runs on, the zone counts the failure for its
//! readers, and [`TallyRecorder::failures`] counts it here.
//!
//! An increment through `metrics::Counter` is one indirect call (the
//! handle is `metrics`' `Arc<dyn CounterFn>`) into tally's inline add;
//! code that wants no call at all registers a [`Counter`](crate::Counter)
//! with [`Zone::try_counter`](crate::Zone::try_counter).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

mod cache;

use crate::error::{Error, Result};
use crate::metric::{Desc, RegisterFn, Registration};
use crate::sys;
use crate::zone::Zone;

/// `metrics::Key` hashes itself to one precomputed u64, and a thread's
/// cache files keys under that u64: use it as is.
#[derive(Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type KeyMap<V> = HashMap<Key, Arc<V>, BuildHasherDefault<PassHasher>>;

const SHARDS: usize = 16;

/// A map of keys to handles in shards, so that threads registering
/// different keys rarely meet on one lock.
struct Shards<V> {
    shards: [RwLock<KeyMap<V>>; SHARDS],
}

impl<V> Shards<V> {
    fn new() -> Self {
        Shards {
            shards: std::array::from_fn(|_| RwLock::new(KeyMap::default())),
        }
    }

    fn get_or_insert(&self, key: &Key, make: impl FnOnce() -> V) -> Arc<V> {
        let shard = &self.shards[(key.get_hash() as usize) % SHARDS];
        // A poisoned lock (a panic elsewhere while it was held) still
        // holds a consistent map: use it rather than panic here.
        if let Some(v) = shard.read().unwrap_or_else(|e| e.into_inner()).get(key) {
            return v.clone();
        }
        let mut w = shard.write().unwrap_or_else(|e| e.into_inner());
        w.entry(key.clone())
            .or_insert_with(|| Arc::new(make()))
            .clone()
    }
}

struct CounterCell {
    c: crate::Counter,
    absolute: Mutex<()>,
}

impl metrics::CounterFn for CounterCell {
    #[inline]
    fn increment(&self, value: u64) {
        self.c.increment(value)
    }

    fn absolute(&self, value: u64) {
        // Raise to `value` when below; the lock orders concurrent
        // absolute() calls so that two of them never both add the gap.
        let _g = self.absolute.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.c.value() as u64;
        if value > cur {
            self.c.increment(value - cur);
        }
    }
}

/// A counter whose increment calls the exported C function
/// tally_block_add() instead of the inline sequence: the other way to
/// implement the fast path, kept for the benchmark's comparison.
struct CallCounterCell {
    c: crate::Counter,
}

impl metrics::CounterFn for CallCounterCell {
    #[inline]
    fn increment(&self, value: u64) {
        self.c.increment_via_call(value)
    }

    fn absolute(&self, _value: u64) {}
}

struct GaugeCell {
    g: crate::FGauge,
}

impl metrics::GaugeFn for GaugeCell {
    fn increment(&self, value: f64) {
        self.g.add(value)
    }
    fn decrement(&self, value: f64) {
        self.g.add(-value)
    }
    fn set(&self, value: f64) {
        self.g.set(value)
    }
}

struct HistogramCell {
    h: crate::Histogram,
    scale: f64,
}

impl HistogramCell {
    #[inline]
    fn value(&self, v: f64) -> Option<u64> {
        if v.is_nan() {
            return None;
        }
        // `as` saturates: negative values give 0, huge ones u64::MAX
        // (counted in the last bucket).
        Some((v * self.scale).round() as u64)
    }
}

impl metrics::HistogramFn for HistogramCell {
    #[inline]
    fn record(&self, value: f64) {
        if let Some(v) = self.value(value) {
            self.h.observe(v)
        }
    }

    fn record_many(&self, value: f64, count: usize) {
        if let Some(v) = self.value(value) {
            for _ in 0..count {
                self.h.observe(v)
            }
        }
    }
}

#[derive(Clone, Default)]
struct Described {
    unit: Option<Unit>,
    help: Option<String>,
    /// A series of this name exists: its help and unit are fixed.
    fixed: bool,
}

/// The `metrics::Recorder` of a tally zone.
///
/// ```
/// use metrics::Recorder;
/// let zone = tally::Zone::create("rec_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
/// let rec = tally::recorder::TallyRecorder::new(zone.clone());
/// metrics::with_local_recorder(&rec, || {
///     metrics::describe_counter!("jobs_total", "Jobs run.");
///     metrics::counter!("jobs_total", "queue" => "a").increment(2);
/// });
/// let jobs = zone.try_counter(&tally::Desc::new("jobs_total").help("Jobs run.").label("queue", "a")).unwrap();
/// assert_eq!(jobs.value(), 2);
/// ```
pub struct TallyRecorder {
    zone: Zone,
    counters: Shards<CounterCell>,
    gauges: Shards<GaugeCell>,
    histograms: Shards<HistogramCell>,
    described: Mutex<HashMap<String, Described>>,
    seconds_as_nanoseconds: bool,
    failures: AtomicU64,
    /// This recorder in the threads' caches of counters.
    id: u64,
}

impl Drop for TallyRecorder {
    fn drop(&mut self) {
        cache::recorder_dropped(self.id);
    }
}

impl std::fmt::Debug for TallyRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TallyRecorder")
            .field("zone", &self.zone)
            .finish_non_exhaustive()
    }
}

/// A metric name made valid for Prometheus (`[a-zA-Z_:][a-zA-Z0-9_:]*`),
/// as metrics-exporter-prometheus makes it.
fn sanitize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        let ok = c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit());
        out.push(if ok { c } else { '_' });
    }
    out
}

/// A label name made valid (`[a-zA-Z_][a-zA-Z0-9_]*`).
fn sanitize_label(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        let ok = c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit());
        out.push(if ok { c } else { '_' });
    }
    out
}

fn is_time(unit: Option<Unit>) -> Option<f64> {
    match unit {
        Some(Unit::Seconds) => Some(1e9),
        Some(Unit::Milliseconds) => Some(1e6),
        Some(Unit::Microseconds) => Some(1e3),
        Some(Unit::Nanoseconds) => Some(1.0),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl TallyRecorder {
    /// A recorder that registers its series in `zone`.
    ///
    /// ```
    /// let zone = tally::Zone::create("rec_new_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// let _rec = tally::recorder::TallyRecorder::new(zone);
    /// ```
    pub fn new(zone: Zone) -> TallyRecorder {
        TallyRecorder {
            zone,
            counters: Shards::new(),
            gauges: Shards::new(),
            histograms: Shards::new(),
            described: Mutex::new(HashMap::new()),
            seconds_as_nanoseconds: true,
            failures: AtomicU64::new(0),
            id: cache::next_id(),
        }
    }

    /// Whether histograms of durations (in seconds, milliseconds or
    /// microseconds) are stored in integer nanoseconds (the default) or
    /// rounded to integers of their own unit.
    ///
    /// ```
    /// let zone = tally::Zone::create("rec_ns_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// let _rec = tally::recorder::TallyRecorder::new(zone).durations_in_nanoseconds(false);
    /// ```
    pub fn durations_in_nanoseconds(mut self, yes: bool) -> TallyRecorder {
        self.seconds_as_nanoseconds = yes;
        self
    }

    /// The zone the series go to.
    ///
    /// ```
    /// let zone = tally::Zone::create("rec_zone_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// let rec = tally::recorder::TallyRecorder::new(zone);
    /// assert!(rec.zone().path().is_none());
    /// ```
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// How many series could not be registered (their handles discard).
    ///
    /// ```
    /// let zone = tally::Zone::create("rec_fail_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// let rec = tally::recorder::TallyRecorder::new(zone);
    /// assert_eq!(rec.failures(), 0);
    /// ```
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    fn describe(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        let mut d = self.described.lock().unwrap_or_else(|e| e.into_inner());
        let e = d.entry(sanitize_name(key.as_str())).or_default();
        if !e.fixed {
            e.unit = unit.or(e.unit);
            e.help = Some(description.into_owned());
        }
    }

    /// The description of a new series of `key`, and a histogram's
    /// scale.
    fn desc(&self, key: &Key, kind: Kind) -> (Desc, f64) {
        let name = sanitize_name(key.name());
        let described = {
            let mut d = self.described.lock().unwrap_or_else(|e| e.into_inner());
            let e = d.entry(name.clone()).or_default();
            e.fixed = true;
            e.clone()
        };
        let mut desc = Desc::new(name.clone());
        if let Some(h) = described.help {
            desc = desc.help(h);
        }
        let mut scale = 1.0;
        let unit = described.unit.or(if name.ends_with("_seconds") {
            Some(Unit::Seconds)
        } else {
            None
        });
        match (kind, is_time(unit)) {
            (Kind::Histogram, Some(s)) if self.seconds_as_nanoseconds => {
                scale = s;
                desc = desc.unit("nanoseconds");
            }
            _ => {
                if let Some(u) = described.unit {
                    if u != Unit::Count {
                        desc = desc.unit(u.as_str());
                    }
                }
            }
        }
        for l in key.labels() {
            desc = desc.label(sanitize_label(l.key()), l.value());
        }
        (desc, scale)
    }

    /// The tally counter behind the `metrics` counter of `key` (the same
    /// series, registered if needed): for a hot loop that wants the
    /// inline add without the indirect call of `metrics::Counter`.
    ///
    /// ```
    /// let zone = tally::Zone::create("rec_handle_doc", &tally::ZoneOptions::new().anonymous()).unwrap();
    /// let rec = tally::recorder::TallyRecorder::new(zone);
    /// let key = metrics::Key::from_parts("hot_total", vec![metrics::Label::new("k", "v")]);
    /// let c = rec.counter(&key);
    /// c.increment(1);
    /// metrics::with_local_recorder(&rec, || metrics::counter!("hot_total", "k" => "v").increment(1));
    /// assert_eq!(c.value(), 2);
    /// ```
    pub fn counter(&self, key: &Key) -> crate::Counter {
        self.counters
            .get_or_insert(key, || self.new_counter(key))
            .c
            .clone()
    }

    fn new_counter(&self, key: &Key) -> CounterCell {
        let (reg, _) = self.register(key, Kind::Counter);
        CounterCell {
            c: crate::Counter::from_registration(reg),
            absolute: Mutex::new(()),
        }
    }

    /// Registers the series of `key` as a `kind` in the zone, counting a
    /// failure; with a histogram's scale.
    fn register(&self, key: &Key, kind: Kind) -> (Arc<Registration>, f64) {
        let (d, scale) = self.desc(key, kind);
        let (c_kind, f): (_, RegisterFn) = match kind {
            Kind::Counter => (sys::TALLY_COUNTER, sys::tally_counter_register),
            Kind::Gauge => (sys::TALLY_FGAUGE, sys::tally_fgauge_register),
            Kind::Histogram => (sys::TALLY_HISTOGRAM, sys::tally_histogram_register),
        };
        let (reg, err) = crate::metric::register(&self.zone, &d, c_kind, f);
        self.failed(err);
        (reg, scale)
    }

    /// A `metrics` counter of `key` whose increment calls tally_block_add().
    #[doc(hidden)]
    pub fn counter_via_call(&self, key: &Key) -> Counter {
        Counter::from_arc(Arc::new(CallCounterCell {
            c: self.counter(key),
        }))
    }

    fn failed(&self, err: Option<Error>) {
        if err.is_some() {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A lookup that missed this thread's cache: the shared map (a read
    /// lock, or the registration), then the cache.
    #[cold]
    #[inline(never)]
    fn register_counter_slow(&self, key: &Key) -> Counter {
        let cell = self.counters.get_or_insert(key, || self.new_counter(key));
        match cache::insert(self.id, key, cell) {
            Ok(t) => Counter::from_arc(t),
            // The thread is exiting: its cache is gone, and its handle
            // is the shared cell's.
            Err(cell) => Counter::from_arc(cell),
        }
    }
}

impl Recorder for TallyRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description)
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description)
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description)
    }

    /// A key this thread looked up before comes from its own cache
    /// (`cache.rs`): the lookup reads the thread's cache and the key only,
    /// and two threads looking up one key write nothing in common.  The first lookup of
    /// a key in a thread goes to the shared map (a read lock, or the
    /// registration) and fills the cache.
    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        match cache::lookup(self.id, key) {
            Some(t) => Counter::from_arc(t),
            None => self.register_counter_slow(key),
        }
    }

    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.gauges.get_or_insert(key, || {
            let (reg, _) = self.register(key, Kind::Gauge);
            GaugeCell {
                g: crate::FGauge::from_registration(reg),
            }
        }))
    }

    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.histograms.get_or_insert(key, || {
            let (reg, scale) = self.register(key, Kind::Histogram);
            HistogramCell {
                h: crate::Histogram::from_registration(reg),
                scale,
            }
        }))
    }
}

/// Installs a [`TallyRecorder`] of `zone` as the global recorder of the
/// `metrics` macros.  Errors: `EBUSY` when a global recorder is set
/// already.
///
/// ```no_run
/// tally::recorder::install(tally::Zone::default_zone()?)?;
/// metrics::counter!("started_total").increment(1);
/// # Ok::<(), tally::Error>(())
/// ```
pub fn install(zone: Zone) -> Result<()> {
    metrics::set_global_recorder(TallyRecorder::new(zone))
        .map_err(|_| Error::new(16, "a global metrics recorder is installed already"))
}
