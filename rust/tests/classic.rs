//! Classic histograms and summaries from Rust (formats 2.6 and 2.7):
//! exact bucket counts and sums from several threads, bounds inclusive,
//! what a reader shows, and bad bounds refused.

mod common;
use common::*;

use tally::{Desc, Zone, ZoneOptions};

const THREADS: usize = 4;
/// Rounds of the values of VALUES per thread.
const ROUNDS: usize = 5_000;
const BOUNDS: [f64; 3] = [0.1, 0.5, 1.0];
/// Two values at or below 0.1, two in (0.1, 0.5], two in (0.5, 1.0] and
/// one above 1.0: each bound is among them.
const VALUES: [f64; 7] = [0.05, 0.1, 0.3, 0.5, 0.75, 1.0, 2.0];
/// The sum of VALUES.
const ROUND_SUM: f64 = 4.7;

/// Observes VALUES ROUNDS times from each of THREADS threads into a
/// classic histogram, a child of a classic histogram family, a summary
/// and a child of a summary family, and checks exact totals.
fn exact_totals(zone_name: &str) {
    let zone = Zone::create(zone_name, &ZoneOptions::new().anonymous()).unwrap();
    let h = zone
        .try_classic_histogram(&Desc::new("latency_seconds"), &BOUNDS)
        .unwrap();
    let hf = zone
        .try_classic_histogram_family(&Desc::new("route_latency_seconds"), &BOUNDS, &["route"])
        .unwrap();
    let s = zone.try_summary(&Desc::new("size_bytes")).unwrap();
    let sf = zone
        .try_summary_family(&Desc::new("route_size_bytes"), &["route"])
        .unwrap();
    std::thread::scope(|sc| {
        for _ in 0..THREADS {
            sc.spawn(|| {
                for _ in 0..ROUNDS {
                    for v in VALUES {
                        h.observe(v);
                        hf.with_labels(&["/a"]).observe(v);
                        s.observe(v);
                        sf.with_labels(&["/a"]).observe(v);
                    }
                }
            });
        }
    });
    let rounds = (THREADS * ROUNDS) as i64;
    let n = rounds * VALUES.len() as i64;
    let sum = rounds as f64 * ROUND_SUM;
    let want = vec![2 * rounds, 2 * rounds, 2 * rounds, rounds];
    let child = hf.get(&["/a"]).unwrap();
    for (count, got_sum, buckets) in [
        (h.count(), h.sum(), h.buckets()),
        (child.count(), child.sum(), child.buckets()),
    ] {
        assert_eq!(count, n);
        assert_eq!(buckets, want);
        // The sum is kept in billionths: exact to 10^-9 per observation.
        assert!((got_sum - sum).abs() < 1e-6, "{got_sum} != {sum}");
    }
    let schild = sf.get(&["/a"]).unwrap();
    for (count, got_sum) in [(s.count(), s.sum()), (schild.count(), schild.sum())] {
        assert_eq!(count, n);
        assert!((got_sum - sum).abs() < 1e-6, "{got_sum} != {sum}");
    }
    assert_eq!(h.bounds(), &BOUNDS);
    assert_eq!(child.bounds(), &BOUNDS);
    assert!(!h.is_discarding() && !child.is_discarding());
    assert!(!s.is_discarding() && !schild.is_discarding());
}

/// With rseq, then in a child process where every add takes the fallback
/// (TALLY_NO_RSEQ=1; this process's environment is left untouched).
#[test]
fn exact_totals_from_threads() {
    if is_child() {
        exact_totals("rust_classic_norseq");
        println!("rseq_active={}", tally::rseq_active());
        return;
    }
    exact_totals("rust_classic_rseq");
    let out = run_child("exact_totals_from_threads", &[("TALLY_NO_RSEQ", "1")]);
    assert_eq!(lines(&out, "rseq_active="), vec!["false".to_string()]);
}

/// A value equal to a bound is counted in that bound's bucket; one just
/// above it in the next; a NaN is not counted; +Inf goes in the last.
#[test]
fn bounds_are_inclusive() {
    let zone = Zone::create("rust_classic_incl", &ZoneOptions::new().anonymous()).unwrap();
    let h = zone
        .try_classic_histogram(&Desc::new("x"), &[-1.0, 0.0, 2.5])
        .unwrap();
    for v in [-1.0, 0.0, 2.5, f64::INFINITY, f64::NAN] {
        h.observe(v);
    }
    assert_eq!(h.buckets(), vec![1, 1, 1, 1]);
    h.observe(2.5 + f64::EPSILON * 4.0);
    h.observe(-1.0 - f64::EPSILON);
    assert_eq!(h.buckets(), vec![2, 1, 1, 2]);
    assert_eq!(h.count(), 6);
    // A last bound of +Inf is the +Inf bucket, dropped from the bounds.
    let g = zone
        .try_classic_histogram(&Desc::new("y"), &[1.0, f64::INFINITY])
        .unwrap();
    assert_eq!(g.bounds(), &[1.0]);
    g.observe(1.0);
    g.observe(3.0);
    assert_eq!(g.borrow().buckets(), vec![1, 1]);
}

/// A reader of the zone's file shows the classic histogram with its
/// bounds, buckets and sum, and the summary flagged as one.
#[test]
fn a_reader_sees_them() {
    let zone = Zone::create("rust_classic_reader", &ZoneOptions::new()).unwrap();
    let h = zone
        .try_classic_histogram(&Desc::new("latency_seconds").help("Latency."), &BOUNDS)
        .unwrap();
    let s = zone
        .try_summary(&Desc::new("size_bytes").help("Sizes."))
        .unwrap();
    let f = zone.summary_family(&Desc::new("route_size_bytes"), &["route"]);
    for v in VALUES {
        h.observe(v);
        s.observe(v * 2.0);
        f.with_labels(&["/b"]).observe(v);
    }
    let seg = tally::reader::Segment::open(zone.path().unwrap()).unwrap();
    let series = seg.series().unwrap();
    let find = |name: &str| {
        series
            .iter()
            .find(|x| x.name == name)
            .unwrap_or_else(|| panic!("no {name} in {series:?}"))
    };
    let rh = find("latency_seconds");
    assert_eq!(rh.kind, tally::reader::Kind::Histogram);
    assert_eq!(rh.help, "Latency.");
    assert_eq!(rh.bounds, BOUNDS.to_vec());
    assert_eq!(rh.buckets, vec![2, 2, 2, 1]);
    assert_eq!(rh.value, 7);
    assert!(!rh.summary);
    assert!((rh.fsum - ROUND_SUM).abs() < 1e-9, "{}", rh.fsum);
    let rs = find("size_bytes");
    assert!(rs.summary);
    assert!(rs.bounds.is_empty());
    assert_eq!(rs.value, 7);
    assert!((rs.fsum - 2.0 * ROUND_SUM).abs() < 1e-9, "{}", rs.fsum);
    let rf = find("route_size_bytes");
    assert!(rf.summary);
    assert_eq!(rf.label("route"), Some("/b"));
    assert_eq!(rf.value, 7);
}

/// Bounds that are not strictly increasing, not finite or too many are
/// refused with the C library's errno; the non-`try_` constructors give a
/// handle that discards its updates.
#[test]
fn bad_bounds_are_refused() {
    const EINVAL: i32 = 22;
    const E2BIG: i32 = 7;
    let zone = Zone::create("rust_classic_bad", &ZoneOptions::new().anonymous()).unwrap();
    let d = Desc::new("x");
    let many: Vec<f64> = (1..=41).map(f64::from).collect();
    for (bounds, errno) in [
        (&[1.0, 0.5][..], EINVAL),
        (&[0.5, 0.5][..], EINVAL),
        (&[f64::NAN][..], EINVAL),
        (&[0.1, f64::NAN, 1.0][..], EINVAL),
        (&[f64::NEG_INFINITY, 1.0][..], EINVAL),
        (&[f64::INFINITY, 1.0][..], EINVAL),
        (&many[..], E2BIG),
    ] {
        let e = zone.try_classic_histogram(&d, bounds).unwrap_err();
        assert_eq!(e.errno(), errno, "{bounds:?}: {e}");
        assert!(!e.message().is_empty());
        let e = zone
            .try_classic_histogram_family(&d, bounds, &["k"])
            .unwrap_err();
        assert_eq!(e.errno(), errno, "family {bounds:?}: {e}");
        let h = zone.classic_histogram(&d, bounds);
        assert!(h.is_discarding());
        h.observe(1.0);
        assert_eq!((h.count(), h.sum(), h.buckets()), (0, 0.0, vec![]));
        let f = zone.classic_histogram_family(&d, bounds, &["k"]);
        assert!(f.get(&["v"]).is_err());
        assert!(f.with_labels(&["v"]).is_discarding());
    }
    // Forty bounds are accepted.
    assert!(zone.try_classic_histogram(&d, &many[..40]).is_ok());
    // A NUL in the name, and a bad name, for both kinds.
    assert_eq!(
        zone.try_classic_histogram(&Desc::new("a\0b"), &BOUNDS)
            .unwrap_err()
            .errno(),
        EINVAL
    );
    assert!(zone.summary(&Desc::new("bad name")).is_discarding());
    assert!(zone.try_summary(&Desc::new("bad name")).is_err());
    let sf = zone.summary_family(&Desc::new("sf"), &["k"]);
    assert!(sf.get(&["v", "w"]).is_err());
    assert!(sf.get_owned(&["v"]).is_ok());
}
