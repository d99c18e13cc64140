//! Per-CPU counters, gauges and histograms in shared memory, for Rust:
//! a safe binding of libtally (this repository's C library, built and
//! linked statically by the crate) and a recorder for the `metrics`
//! crate.
//!
//! An increment is tally's restartable sequence, inlined: one unlocked
//! add on this CPU's copy, no lock, no atomic, no cache line shared with
//! another CPU, and no count lost.  The series live in a zone's file in
//! `/dev/shm`, where `tallystat` and `tally-exporter` read them from
//! another process.
//!
//! ```
//! use tally::{Desc, Zone, ZoneOptions};
//!
//! let zone = Zone::create("lib_doc", &ZoneOptions::new().anonymous())?;
//! let requests = zone.try_counter_family(
//!     &Desc::new("http_requests_total").help("Requests served."), &["code"])?;
//! let latency = zone.try_histogram(&Desc::new("http_request_duration").unit("nanoseconds"))?;
//!
//! std::thread::scope(|s| {
//!     for _ in 0..2 {
//!         s.spawn(|| {
//!             for _ in 0..1000 {
//!                 requests.with_labels(&["200"]).increment(1);
//!                 latency.observe(125_000);
//!             }
//!         });
//!     }
//! });
//! assert_eq!(requests.get(&["200"])?.value(), 2000);
//! assert_eq!(latency.count(), 2000);
//! # Ok::<(), tally::Error>(())
//! ```
//!
//! Guarantees, as in C (tally(3)): adds are exact and lossless from any
//! thread and from forked processes; a failed registration (a bad name,
//! a full zone or file system) never panics or aborts: the `try_`
//! constructors return `Err`, and the others return a handle that
//! discards its updates.  Handles hold their zone (a reference count), so
//! none can outlive it; every handle and zone is `Send` and `Sync`.

#![warn(missing_docs)]

mod add;
#[macro_use]
mod metric;
mod classic;
mod error;
mod family;
pub mod reader;
#[cfg(feature = "metrics")]
pub mod recorder;
#[doc(hidden)]
pub mod sys;
mod zone;

pub use classic::{ClassicHistogram, ClassicHistogramRef, Summary, SummaryRef};
pub use error::{Error, Result};
pub use family::{
    ClassicHistogramFamily, CounterFamily, FGaugeFamily, GaugeFamily, HistogramFamily,
    SetGaugeFamily, SummaryFamily,
};
pub use metric::{
    Combine, Counter, CounterRef, Desc, FGauge, FGaugeRef, Gauge, GaugeRef, Histogram,
    HistogramRef, Mode, PGauge, PGaugeRef, SetGauge, SetGaugeRef,
};
pub use zone::{rseq_active, Zone, ZoneOptions, ZoneUsage};
