//! tally's Rust counter against tally's C inline add and the Rust peers,
//! measured in one run, alternating configurations round by round; each
//! row is the median of the rounds, each target a ratio of two medians
//! of the same run (so that it survives a noisy machine).
//!
//!   1 thread   ns per add:  C inline add (tally_counter_inc in a C loop)
//!              vs tally::Counter::increment (Rust asm! add), the same
//!              through the exported tally_block_add, metrics::Counter
//!              on tally's recorder and on metrics-exporter-prometheus's,
//!              the prometheus crate's IntCounter and its local counter.
//!   2 threads  adds per second, one thread pinned on each of 2 CPUs,
//!              every thread adding to the same counter.
//!   lookup     ns per `counter!(name, labels).increment(1)` of a key
//!              already registered, on one thread and on two at once,
//!              on both recorders and on two floors: a no-op recorder
//!              (the metrics crate's own work) and a recorder returning
//!              a clone of a thread's Arc (the least a live handle
//!              costs); per registration of a new key on both recorders;
//!              tally's family lookup next to them.
//!
//! Usage: tally-rs-bench [--quick] [--rounds N] [--lookups]
//!
//! --lookups measures the lookup rows only.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

use metrics::{counter, Key, KeyName, Level, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::PrometheusBuilder;
use tally::recorder::TallyRecorder;
use tally::{Desc, Zone, ZoneOptions};

extern "C" {
    fn sched_setaffinity(pid: i32, size: usize, mask: *const u64) -> i32;
    fn clock_gettime(clock: i32, ts: *mut [i64; 2]) -> i32;
}

/// This thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID): on a
/// machine shared with other work, the time a thread waited for a CPU is
/// not counted against the configuration it was running.
fn cputime() -> f64 {
    let mut ts = [0i64; 2];
    // SAFETY: a valid timespec; 3 is CLOCK_THREAD_CPUTIME_ID.
    unsafe { clock_gettime(3, &mut ts) };
    ts[0] as f64 * 1e9 + ts[1] as f64
}

fn pin(cpu: usize) {
    let mut mask = [0u64; 16];
    mask[cpu / 64] |= 1 << (cpu % 64);
    // SAFETY: a valid mask for the calling thread.
    unsafe { sched_setaffinity(0, std::mem::size_of_val(&mask), mask.as_ptr()) };
}

/// A batch of the 2-thread runs lasts this long (ns of wall-clock time),
/// in steps of STEP adds: about 300 steps for the fastest add, a few for
/// a contended atomic.
const BATCH_NS: f64 = 300_000.0;
const STEP: u64 = 4_000;

/// One batch of adds of one thread: wall-clock start and end (ns since
/// the run began), the thread's CPU time during it, and its adds.
struct Batch {
    start: f64,
    end: f64,
    cpu: f64,
    adds: u64,
}

/// The rate of the 2-thread run while both threads really ran at once.
///
/// On a machine shared with other work the two threads are often not on
/// their CPUs together, and a shared atomic then costs what it costs on
/// one CPU: the contention the measurement is about never happens.  So a
/// batch counts only when its thread held its CPU all along (CPU time at
/// least 90% of its wall time) and the other thread's batches that
/// overlap it did too, for at least 90% of its span.  The result is the
/// sum over both threads of adds per second in the batches that count,
/// and the share of batches that counted.
fn overlapped_rate(threads: &[Vec<Batch>]) -> (f64, f64) {
    let on_cpu = |b: &Batch| b.cpu >= 0.9 * (b.end - b.start);
    let mut rate = 0.0;
    let (mut counted, mut total) = (0usize, 0usize);
    for (t, mine) in threads.iter().enumerate() {
        let other = &threads[1 - t];
        let (mut adds, mut ns) = (0.0, 0.0);
        for b in mine {
            total += 1;
            if !on_cpu(b) {
                continue;
            }
            let covered: f64 = other
                .iter()
                .filter(|o| on_cpu(o))
                .map(|o| (o.end.min(b.end) - o.start.max(b.start)).max(0.0))
                .sum();
            if covered >= 0.9 * (b.end - b.start) {
                counted += 1;
                adds += b.adds as f64;
                ns += b.end - b.start;
            }
        }
        if ns > 0.0 {
            rate += adds / ns * 1e9;
        }
    }
    (
        if counted > 0 { rate } else { f64::NAN },
        counted as f64 / total.max(1) as f64,
    )
}

fn median(v: &mut [f64]) -> f64 {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One way to add 1, as the benchmark's loops call it.
struct Adders {
    tally: tally::Counter,
    metrics_tally: metrics::Counter,
    metrics_prom: metrics::Counter,
    metrics_call: metrics::Counter,
    prom: prometheus::IntCounter,
    adaptive: tally::Counter,
    pernode: tally::Counter,
}

/// The plain atomic add the shared word modes are held to.
static ATOMIC: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// The configurations measured with one thread only (an adaptive slot
/// would be promoted by two).
const ONE_THREAD_ONLY: usize = 9;

const CONFIGS: [&str; 12] = [
    "C inline add (tally_counter_inc)",
    "tally::Counter::increment (asm!)",
    "tally::Counter via tally_block_add",
    "metrics::Counter, tally recorder",
    "metrics::Counter, metrics-exporter-prometheus",
    "prometheus IntCounter::inc",
    "prometheus local IntCounter::inc",
    "C loop calling tally_block_add",
    "metrics::Counter, tally recorder, tally_block_add",
    "a plain atomic add (AtomicI64::fetch_add)",
    "tally::Counter, adaptive, before promotion",
    "tally::Counter, pernode",
];

/// Runs `add` `n` times.
macro_rules! times {
    ($n:expr, $add:expr) => {
        for _ in 0..$n {
            $add;
        }
    };
}

/// Runs configuration `cfg` for `n` adds on this thread.
#[inline(never)]
fn run(a: &Adders, cfg: usize, n: u64) {
    let n = black_box(n);
    match cfg {
        // SAFETY: a live counter handle.
        0 => unsafe { tally::sys::tally_rs_bench_c_inc(a.tally.raw_handle(), n) },
        1 => times!(n, a.tally.increment(1)),
        2 => times!(n, a.tally.increment_via_call(1)),
        3 => times!(n, a.metrics_tally.increment(1)),
        4 => times!(n, a.metrics_prom.increment(1)),
        5 => times!(n, a.prom.inc()),
        8 => times!(n, a.metrics_call.increment(1)),
        7 => unsafe { tally::sys::tally_rs_bench_c_call(a.tally.raw_handle(), n) },
        9 => {
            let a = black_box(&ATOMIC);
            for _ in 0..n {
                a.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        10 => times!(n, a.adaptive.increment(1)),
        11 => times!(n, a.pernode.increment(1)),
        _ => {
            let local = a.prom.local();
            for _ in 0..n {
                black_box(&local).inc();
            }
            local.flush();
        }
    }
}

/// The recorders of the lookup rows: tally's, metrics-exporter-prometheus's
/// and two floors.
const LOOKUP_RECS: usize = 4;
const LOOKUP_NAMES: [&str; LOOKUP_RECS] = [
    "tally recorder",
    "metrics-exporter-prometheus",
    "no-op recorder (the metrics crate's own work)",
    "handle floor (a thread's Arc, cloned)",
];

/// A counter that does nothing with its increments.
struct NothingCounter;

impl metrics::CounterFn for NothingCounter {
    fn increment(&self, value: u64) {
        black_box(value);
    }
    fn absolute(&self, value: u64) {
        black_box(value);
    }
}

thread_local! {
    static FLOOR_HANDLE: std::sync::Arc<NothingCounter> = std::sync::Arc::new(NothingCounter);
}

/// The least a recorder returning a live handle pays: `metrics::Counter`
/// holds an `Arc`, so each lookup clones one (here a thread's own, with
/// no lookup at all) and the caller drops it, two atomic operations on a
/// line no other thread writes.
struct HandleFloor;

impl Recorder for HandleFloor {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> metrics::Counter {
        FLOOR_HANDLE.with(|h| metrics::Counter::from_arc(h.clone()))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

/// ns (CPU time) per `counter!` of a registered key with labels and its
/// increment, on this thread, through `rec`.
#[inline(never)]
fn lookups(rec: &dyn Recorder, n: u64) -> f64 {
    let t = cputime();
    metrics::with_local_recorder(rec, || {
        for _ in 0..n {
            counter!("bench_lookup_total", "route" => "/api/items", "code" => "200").increment(1);
        }
    });
    (cputime() - t) / n as f64
}

/// The same on 2 threads at once, one pinned on each of CPUs 0 and 1:
/// the mean of their ns per lookup.  Leaves this thread on CPU 0.
fn lookups_two_threads(rec: &(dyn Recorder + Sync), n: u64) -> f64 {
    let barrier = Barrier::new(2);
    let per: Vec<f64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|c| {
                let barrier = &barrier;
                s.spawn(move || {
                    pin(c);
                    barrier.wait();
                    lookups(rec, n)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    pin(0);
    (per[0] + per[1]) / 2.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // Only the lookup rows and their targets.
    let lookups_only = args.iter().any(|a| a == "--lookups");
    let rounds: usize = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 3 } else { 7 });
    let n1: u64 = if quick { 2_000_000 } else { 20_000_000 };
    let n2: u64 = if quick { 2_000_000 } else { 10_000_000 };

    let zone = Zone::create("rs_bench", &ZoneOptions::new().anonymous()).expect("zone");
    let tally_rec = TallyRecorder::new(zone.clone());
    let prom_rec = PrometheusBuilder::new().build_recorder();
    let key = Key::from_name("bench_adds_total");
    let meta = Metadata::new("bench", Level::INFO, None);
    let adders = Adders {
        tally: zone
            .try_counter(&Desc::new("bench_native_total"))
            .expect("counter"),
        metrics_tally: tally_rec.register_counter(&key, &meta),
        metrics_prom: prom_rec.register_counter(&key, &meta),
        metrics_call: tally_rec.counter_via_call(&key),
        prom: prometheus::IntCounter::new("bench_prom_total", "adds").unwrap(),
        adaptive: zone
            .try_counter(&Desc::new("bench_adaptive_total").mode(tally::Mode::Adaptive))
            .expect("counter"),
        pernode: zone
            .try_counter(&Desc::new("bench_pernode_total").mode(tally::Mode::PerNode))
            .expect("counter"),
    };
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "tally-rs-bench: rseq {}, {} CPUs, {} rounds, 1 thread {} adds, 2 threads {} adds each",
        if tally::rseq_active() {
            "active"
        } else {
            "off (fallback)"
        },
        cpus,
        rounds,
        n1,
        n2
    );

    // Warm up: every CPU's copy reserved, every code path faulted in.
    for cfg in 0..CONFIGS.len() {
        run(&adders, cfg, 100_000);
    }

    let mut one: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    let mut two: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    let mut overlap: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    pin(0);
    for r in 0..if lookups_only { 0 } else { rounds } {
        // Alternate the order each round, so that no configuration always
        // runs after the same one.
        let order: Vec<usize> = if r % 2 == 0 {
            (0..CONFIGS.len()).collect()
        } else {
            (0..CONFIGS.len()).rev().collect()
        };
        for &cfg in &order {
            let t = cputime();
            run(&adders, cfg, n1);
            one[cfg].push((cputime() - t) / n1 as f64);
        }
        if cpus >= 2 {
            for &cfg in order.iter().filter(|&&c| c < ONE_THREAD_ONLY) {
                let barrier = Barrier::new(2);
                let epoch = Instant::now();
                let batches: Vec<Vec<Batch>> = std::thread::scope(|s| {
                    let hs: Vec<_> = (0..2)
                        .map(|i| {
                            let (adders, barrier) = (&adders, &barrier);
                            s.spawn(move || {
                                pin(i);
                                barrier.wait();
                                let mut out = Vec::new();
                                let mut done = 0;
                                while done < n2 {
                                    let (w, c) = (epoch.elapsed().as_nanos() as f64, cputime());
                                    let mut adds = 0;
                                    let end = loop {
                                        run(adders, cfg, STEP);
                                        adds += STEP;
                                        let now = epoch.elapsed().as_nanos() as f64;
                                        if done + adds >= n2 || now - w >= BATCH_NS {
                                            break now;
                                        }
                                    };
                                    done += adds;
                                    out.push(Batch {
                                        start: w,
                                        end,
                                        cpu: cputime() - c,
                                        adds,
                                    });
                                }
                                out
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let (rate, share) = overlapped_rate(&batches);
                two[cfg].push(rate);
                overlap[cfg].push(share);
            }
        }
    }

    let m1: Vec<f64> = one.iter_mut().map(|v| median(v)).collect();
    if !lookups_only {
        println!();
        println!("{:<48} {:>12} {:>10}", "1 thread", "ns/add", "vs C add");
        for (i, name) in CONFIGS.iter().enumerate() {
            println!("{:<48} {:>12.2} {:>9.2}x", name, m1[i], m1[i] / m1[0]);
        }
    }
    let m2: Vec<f64> = if cpus >= 2 {
        two.iter_mut().map(|v| median(v)).collect()
    } else {
        vec![0.0; CONFIGS.len()]
    };
    if cpus >= 2 && !lookups_only {
        println!();
        println!(
            "{:<48} {:>12} {:>10} {:>9}",
            "2 threads on 2 CPUs, one counter", "Madds/s", "tally/this", "together"
        );
        for (i, name) in CONFIGS.iter().enumerate().take(ONE_THREAD_ONLY) {
            let together = median(&mut overlap[i]);
            println!(
                "{:<48} {:>12.1} {:>9.2}x {:>8.0}%",
                name,
                m2[i] / 1e6,
                m2[1] / m2[i],
                together * 100.0
            );
        }
    }

    // Lookups and registrations through the macros.
    let nl: u64 = if quick { 200_000 } else { 2_000_000 };
    let nr: u64 = if quick { 5_000 } else { 20_000 };
    let fam = zone
        .try_counter_family(&Desc::new("bench_family_total"), &["route", "code"])
        .unwrap();
    // counter!(existing key) on one thread, then on 2 threads at once (ns
    // per lookup and add per thread, CPU time), on tally's recorder,
    // metrics-exporter-prometheus's and the two floors.
    let noop_rec = metrics::NoopRecorder;
    let floor_rec = HandleFloor;
    let lookup_recs: [&(dyn Recorder + Sync); LOOKUP_RECS] =
        [&tally_rec, &prom_rec, &noop_rec, &floor_rec];
    let mut look1: [Vec<f64>; LOOKUP_RECS] = Default::default();
    let mut look2: [Vec<f64>; LOOKUP_RECS] = Default::default();
    let mut fam_look = [Vec::new(), Vec::new()];
    let mut reg = [Vec::new(), Vec::new()];
    for r in 0..rounds {
        for (i, rec) in lookup_recs.iter().enumerate() {
            look1[i].push(lookups(*rec, nl));
            if cpus >= 2 {
                look2[i].push(lookups_two_threads(*rec, nl));
            }
        }
        let t = cputime();
        for _ in 0..nl {
            fam.with_labels(&[black_box("/api/items"), "200"])
                .increment(1);
        }
        fam_look[0].push((cputime() - t) / nl as f64);
        let t = cputime();
        // SAFETY: a live family.
        unsafe { tally::sys::tally_rs_bench_c_family(fam.raw_family(), nl) };
        fam_look[1].push((cputime() - t) / nl as f64);
        for (i, rec) in [&tally_rec as &dyn Recorder, &prom_rec as &dyn Recorder]
            .into_iter()
            .enumerate()
        {
            let t = cputime();
            metrics::with_local_recorder(rec, || {
                for k in 0..nr {
                    counter!("bench_new_total", "round" => r.to_string(), "id" => k.to_string())
                        .increment(1);
                }
            });
            reg[i].push((cputime() - t) / nr as f64);
        }
    }
    let l1: Vec<f64> = look1.iter_mut().map(|v| median(v)).collect();
    let l2: Vec<f64> = look2.iter_mut().map(|v| median(v)).collect();
    let l: Vec<f64> = fam_look.iter_mut().map(|v| median(v)).collect();
    let g: Vec<f64> = reg.iter_mut().map(|v| median(v)).collect();
    println!();
    println!(
        "{:<48} {:>12} {:>10}",
        "counter!(existing key).increment(1), 1 thread", "ns/op", "prom/this"
    );
    for (i, name) in LOOKUP_NAMES.iter().enumerate() {
        println!("{:<48} {:>12.1} {:>9.2}x", name, l1[i], l1[1] / l1[i]);
    }
    if cpus >= 2 {
        println!(
            "{:<48} {:>12} {:>10}",
            "the same, 2 threads at once (per thread)", "ns/op", "prom/this"
        );
        for (i, name) in LOOKUP_NAMES.iter().enumerate() {
            println!("{:<48} {:>12.1} {:>9.2}x", name, l2[i], l2[1] / l2[i]);
        }
    }
    println!();
    println!(
        "{:<48} {:>12} {:>10}",
        "registration and lookup", "ns/op", "this/next"
    );
    for (name, v, next, next_name) in [
        (
            "tally CounterFamily::with_labels + increment",
            l[0],
            l[1],
            "the same in C (tally_counter_family_get + inc)",
        ),
        (
            "counter!(new key), tally",
            g[0],
            g[1],
            "counter!(new key), metrics-exporter-prometheus",
        ),
    ] {
        println!("{:<48} {:>12.1} {:>9.2}x", name, v, v / next);
        println!("{:<48} {:>12.1} {:>10}", next_name, next, "");
    }

    // The targets, each a ratio of medians of this run: what, the ratio,
    // the comparison, the limit, and whether it needs two CPUs.
    #[rustfmt::skip]
    let targets = [
        ("1 thread: adaptive before promotion / plain atomic add", m1[10] / m1[9], "<=", 1.2, false),
        ("1 thread: pernode, one node / plain atomic add", m1[11] / m1[9], "<=", 1.2, false),
        ("1 thread: tally::Counter::increment / C inline add", m1[1] / m1[0], "<=", 2.0, false),
        ("1 thread: metrics::Counter (tally) / C inline add", m1[3] / m1[0], "<=", 2.0, false),
        ("counter!(existing key), tally: 2 threads / 1 thread (per thread)", l2[0] / l1[0], "<=", 1.2, true),
        ("counter!(existing key), 2 threads: prometheus / tally", l2[1] / l2[0], ">=", 10.0, true),
        ("2 threads: metrics::Counter tally / metrics-exporter-prometheus", m2[3] / m2[4], ">=", 5.0, true),
        ("2 threads: tally::Counter / prometheus IntCounter", m2[1] / m2[5], ">=", 5.0, true),
    ];
    // Not targets.  What the lookup target could reach at best:
    // prometheus against the metrics crate's own work (a recorder that
    // does nothing), and against the least any recorder returning a live
    // handle pays (the two atomic operations of its Arc); and a
    // metrics::Counter (an indirect call) against a counter used
    // directly, where the targets compare like with like.
    #[rustfmt::skip]
    let infos = [
        ("counter!(existing key), 2 threads: prometheus / no-op floor", l2[1] / l2[2]),
        ("counter!(existing key), 2 threads: prometheus / handle floor", l2[1] / l2[3]),
        ("counter!(existing key), 2 threads: tally / handle floor", l2[0] / l2[3]),
        ("2 threads: metrics::Counter tally / prometheus IntCounter", m2[3] / m2[5]),
    ];
    println!();
    let mut ok = true;
    for (what, v, cmp, lim, two) in targets {
        if (two && cpus < 2) || (lookups_only && v.is_nan()) {
            continue;
        }
        let pass = if cmp == "<=" { v <= lim } else { v >= lim };
        ok &= pass;
        println!(
            "TARGET {:<62} {:>7.2} {} {:<4} {}",
            what,
            v,
            cmp,
            lim,
            if pass { "PASS" } else { "FAIL" }
        );
    }
    for (what, v) in infos {
        if cpus >= 2 && !v.is_nan() {
            println!("INFO   {:<62} {:>7.2}", what, v);
        }
    }
    println!(
        "SUMMARY c_ns={:.2} rs_ns={:.2} rs_call_ns={:.2} metrics_tally_ns={:.2} metrics_prom_ns={:.2} prom_ns={:.2} prom_local_ns={:.2} \
         two_tally_Mps={:.1} two_metrics_tally_Mps={:.1} two_metrics_prom_Mps={:.1} two_prom_Mps={:.1} two_prom_local_Mps={:.1} \
         lookup_tally_ns={:.1} lookup_prom_ns={:.1} family_rs_ns={:.1} family_c_ns={:.1} register_tally_ns={:.1} register_prom_ns={:.1} \
         atomic_ns={:.2} adaptive_cold_ns={:.2} pernode_ns={:.2} lookup2_tally_ns={:.1} lookup2_prom_ns={:.1} \
         lookup_noop_ns={:.1} lookup2_noop_ns={:.1} lookup_floor_ns={:.1} lookup2_floor_ns={:.1}",
        m1[0], m1[1], m1[2], m1[3], m1[4], m1[5], m1[6],
        m2[1] / 1e6, m2[3] / 1e6, m2[4] / 1e6, m2[5] / 1e6, m2[6] / 1e6, l1[0], l1[1], l[0], l[1], g[0], g[1],
        m1[9], m1[10], m1[11], l2[0], l2[1], l1[2], l2[2], l1[3], l2[3]
    );
    std::process::exit(if ok { 0 } else { 1 });
}
