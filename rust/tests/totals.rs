//! Exact totals: N threads x R adds, the threads moved between CPUs while
//! they add, with rseq and without it (TALLY_NO_RSEQ=1, in a child
//! process: the library reads it once); and a reader in another process
//! sees the values this process fetched.

mod common;
use common::*;

use tally::{Desc, Mode, Zone, ZoneOptions};

const THREADS: usize = 4;
const ROUNDS: u64 = 200_000;

/// Every thread adds ROUNDS times to each handle, moving to another CPU
/// every 1,000 adds; the totals must be exact.
fn exact_totals(tag: &str) {
    let zone = Zone::create(&format!("totals_{tag}"), &ZoneOptions::new().anonymous()).unwrap();
    let percpu = zone.try_counter(&Desc::new("percpu_total")).unwrap();
    let shared = zone
        .try_counter(&Desc::new("shared_total").mode(Mode::Shared))
        .unwrap();
    let adaptive = zone
        .try_counter(&Desc::new("adaptive_total").mode(Mode::Adaptive))
        .unwrap();
    let pernode = zone
        .try_counter(&Desc::new("pernode_total").mode(Mode::PerNode))
        .unwrap();
    let called = zone.try_counter(&Desc::new("called_total")).unwrap();
    let gauge = zone.try_gauge(&Desc::new("in_flight")).unwrap();
    let hist = zone.try_histogram(&Desc::new("sizes")).unwrap();
    let fam = zone
        .try_counter_family(&Desc::new("fam_total"), &["t"])
        .unwrap();
    let cpus = cpus();

    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (percpu, shared, adaptive, pernode, called, gauge, hist, fam, cpus) = (
                &percpu, &shared, &adaptive, &pernode, &called, &gauge, &hist, &fam, &cpus,
            );
            s.spawn(move || {
                let label = (t % 2).to_string();
                let child = fam.get(&[&label]).unwrap();
                for i in 0..ROUNDS {
                    if i % 1000 == 0 {
                        pin(cpus[(t + (i / 1000) as usize) % cpus.len()]);
                    }
                    percpu.increment(1);
                    shared.increment(1);
                    adaptive.increment(1);
                    pernode.increment(1);
                    called.increment_via_call(1);
                    gauge.increment();
                    if i % 2 == 1 {
                        gauge.decrement();
                        gauge.decrement();
                    }
                    hist.observe(i % 1000);
                    child.increment(2);
                }
                unpin(cpus);
            });
        }
    });
    let n = THREADS as i64 * ROUNDS as i64;
    assert_eq!(percpu.value(), n, "per-CPU");
    assert_eq!(shared.value(), n, "shared");
    assert_eq!(adaptive.value(), n, "adaptive");
    assert_eq!(pernode.value(), n, "per-node");
    assert_eq!(called.value(), n, "tally_block_add calls");
    assert_eq!(gauge.value(), 0, "gauge");
    assert_eq!(hist.count(), n, "histogram count");
    let per_thread: i64 = (0..ROUNDS as i64).map(|i| i % 1000).sum();
    assert_eq!(hist.sum(), per_thread * THREADS as i64, "histogram sum");
    assert_eq!(
        fam.get(&["0"]).unwrap().value() + fam.get(&["1"]).unwrap().value(),
        2 * n
    );
}

#[test]
fn exact_totals_with_rseq() {
    if is_child() {
        return;
    }
    exact_totals("rseq");
    // This machine's glibc registers rseq; the inline sequence ran.
    println!("rseq active: {}", tally::rseq_active());
}

/// The same in a process where TALLY_NO_RSEQ=1: every add takes the
/// fallback, and the totals are still exact.
#[test]
fn exact_totals_without_rseq() {
    if is_child() {
        return;
    }
    let out = run_child("no_rseq_child", &[("TALLY_NO_RSEQ", "1")]);
    assert_eq!(lines(&out, "rseq_active="), vec!["false".to_string()]);
    assert_eq!(lines(&out, "done"), vec![String::new()]);
}

#[test]
fn no_rseq_child() {
    if !is_child() {
        return;
    }
    exact_totals("norseq");
    println!("rseq_active={}", tally::rseq_active());
    println!("done");
}

/// With one slab on a machine of several CPUs (TALLY_NSLABS=1), the
/// threads on CPUs beyond it take the slow path out of the sequence
/// (the sequence's CPU test), those on CPU 0 the sequence: still exact.
#[test]
fn exact_totals_with_cpus_beyond_the_slabs() {
    if is_child() {
        return;
    }
    let out = run_child("one_slab_child", &[("TALLY_NSLABS", "1")]);
    assert_eq!(lines(&out, "done"), vec![String::new()]);
}

#[test]
fn one_slab_child() {
    if !is_child() {
        return;
    }
    exact_totals("oneslab");
    println!("done");
}

/// A reader in another process sees the values this process fetched.
#[test]
fn reader_in_another_process_sees_the_same_values() {
    if is_child() {
        return;
    }
    let zone = Zone::create("totals_read", &ZoneOptions::new()).unwrap();
    let c = zone
        .try_counter(&Desc::new("read_total").label("k", "v"))
        .unwrap();
    let g = zone.try_fgauge(&Desc::new("read_ratio")).unwrap();
    let h = zone.try_histogram(&Desc::new("read_sizes")).unwrap();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for i in 0..50_000u64 {
                    c.increment(3);
                    h.observe(i);
                }
            });
        }
    });
    g.set(0.375);
    let path = zone.path().unwrap();
    let out = run_child(
        "reader_child",
        &[("TALLY_RS_SEGMENT", path.to_str().unwrap())],
    );
    let got = lines(&out, "series ");
    let want = vec![
        format!("read_ratio {} 0.375", 0),
        format!("read_sizes {} {}", h.count(), h.sum()),
        format!("read_total k=v {}", c.value()),
    ];
    assert_eq!(c.value(), 3 * 50_000 * THREADS as i64);
    let mut got = got;
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn reader_child() {
    if !is_child() {
        return;
    }
    let path = std::env::var("TALLY_RS_SEGMENT").unwrap();
    let seg = tally::reader::Segment::open(&path).unwrap();
    for s in seg.series().unwrap() {
        match s.kind {
            tally::reader::Kind::Counter => {
                let labels: Vec<String> =
                    s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                println!("series {} {} {}", s.name, labels.join(","), s.value)
            }
            tally::reader::Kind::FGauge => println!("series {} {} {}", s.name, s.value, s.fvalue),
            tally::reader::Kind::Histogram => {
                assert_eq!(s.buckets.iter().sum::<i64>(), s.value);
                println!("series {} {} {}", s.name, s.value, s.sum)
            }
            k => panic!("unexpected kind {k:?}"),
        }
    }
}
