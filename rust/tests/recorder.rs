//! The `metrics` recorder: every macro kind, labels, descriptions and
//! units, read back by the reader API from the zone's file.

mod common;

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit,
};
use tally::reader::{Kind, Segment, Series};
use tally::recorder::TallyRecorder;
use tally::{Zone, ZoneOptions};

fn find<'a>(all: &'a [Series], name: &str, labels: &[(&str, &str)]) -> &'a Series {
    all.iter()
        .find(|s| {
            s.name == name
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.label(k) == Some(v))
        })
        .unwrap_or_else(|| panic!("no series {name} {labels:?} in {all:#?}"))
}

/// Every series of `zone`, as a reader sees them in its file.
fn read(zone: &Zone) -> Vec<Series> {
    Segment::open(zone.path().unwrap())
        .unwrap()
        .series()
        .unwrap()
}

#[test]
fn every_macro_kind_with_labels_and_descriptions() {
    let zone = Zone::create("rec_kinds", &ZoneOptions::new()).unwrap();
    let rec = TallyRecorder::new(zone.clone());
    metrics::with_local_recorder(&rec, || {
        describe_counter!("jobs_total", "Jobs run.");
        describe_gauge!("temperature", Unit::Count, "A temperature.");
        describe_histogram!("job_duration_seconds", Unit::Seconds, "How long a job ran.");
        describe_histogram!("payload", Unit::Bytes, "Payload sizes.");

        for i in 0..10u64 {
            counter!("jobs_total", "queue" => "a").increment(i);
            counter!("jobs_total", "queue" => "b", "prio" => "high").increment(1);
        }
        // absolute() raises, never lowers.
        let abs = counter!("abs_total");
        abs.absolute(100);
        abs.absolute(40);
        abs.increment(1);

        gauge!("temperature").set(20.5);
        gauge!("temperature").increment(1.25);
        gauge!("temperature").decrement(0.5);
        gauge!("depth", "pool" => "x").increment(3.0);

        let h = histogram!("job_duration_seconds", "queue" => "a");
        h.record(0.25);
        h.record(1.5);
        h.record_many(0.001, 3);
        histogram!("payload").record(1000.0);
        histogram!("payload").record(3.4);
        histogram!("payload").record(-7.0); // counts as 0
        histogram!("payload").record(f64::NAN); // dropped

        // A name and a label name outside Prometheus' rules are made
        // valid, as metrics-exporter-prometheus makes them.
        counter!("http.requests", "status-code" => "200").increment(7);
    });
    assert_eq!(rec.failures(), 0);

    let all = read(&zone);
    let a = find(&all, "jobs_total", &[("queue", "a")]);
    assert_eq!(
        (a.kind, a.value, a.help.as_str()),
        (Kind::Counter, 45, "Jobs run.")
    );
    let b = find(&all, "jobs_total", &[("queue", "b"), ("prio", "high")]);
    assert_eq!((b.value, b.help.as_str()), (10, "Jobs run."));
    assert_eq!(find(&all, "abs_total", &[]).value, 101);

    let t = find(&all, "temperature", &[]);
    assert_eq!(
        (t.kind, t.fvalue, t.help.as_str(), t.unit.as_str()),
        (Kind::FGauge, 21.25, "A temperature.", "")
    );
    assert_eq!(find(&all, "depth", &[("pool", "x")]).fvalue, 3.0);

    let d = find(&all, "job_duration_seconds", &[("queue", "a")]);
    assert_eq!(d.kind, Kind::Histogram);
    assert_eq!(d.unit, "nanoseconds");
    assert_eq!(d.help, "How long a job ran.");
    assert_eq!(d.value, 5);
    assert_eq!(d.sum, 250_000_000 + 1_500_000_000 + 3 * 1_000_000);

    let p = find(&all, "payload", &[]);
    assert_eq!((p.unit.as_str(), p.value, p.sum), ("bytes", 3, 1003));

    assert_eq!(
        find(&all, "http_requests", &[("status_code", "200")]).value,
        7
    );
}

/// A description that comes after the first registration of a name does
/// not split the family: every series of the name keeps the first help.
#[test]
fn late_description_keeps_one_definition() {
    let zone = Zone::create("rec_late", &ZoneOptions::new()).unwrap();
    let rec = TallyRecorder::new(zone.clone());
    metrics::with_local_recorder(&rec, || {
        counter!("late_total", "k" => "1").increment(1);
        describe_counter!("late_total", "Described late.");
        counter!("late_total", "k" => "2").increment(2);
    });
    assert_eq!(rec.failures(), 0);
    let all = read(&zone);
    assert_eq!(find(&all, "late_total", &[("k", "1")]).value, 1);
    assert_eq!(find(&all, "late_total", &[("k", "2")]).value, 2);
}

/// Handles of one key are one series, also across threads; a series the
/// zone refuses gives a discarding handle and counts a failure.
#[test]
fn handles_share_series_and_failures_discard() {
    let zone = Zone::create("rec_share", &ZoneOptions::new().anonymous()).unwrap();
    let rec = TallyRecorder::new(zone.clone());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                metrics::with_local_recorder(&rec, || {
                    for _ in 0..10_000 {
                        counter!("shared_key_total", "x" => "y").increment(1);
                    }
                })
            });
        }
    });
    let c = zone
        .try_counter(&tally::Desc::new("shared_key_total").label("x", "y"))
        .unwrap();
    assert_eq!(c.value(), 40_000);

    metrics::with_local_recorder(&rec, || {
        // "__" label names are reserved: refused, and the handle discards.
        counter!("refused_total", "__reserved" => "v").increment(1);
        // A gauge under a counter's name: taken, as a new generation of
        // the name (a changed definition is never refused); the counter's
        // handles go on counting their own series.
        gauge!("shared_key_total").set(1.0);
    });
    assert_eq!(rec.failures(), 1);
    c.increment(1);
    assert_eq!(c.value(), 40_001);
}

/// install() sets the global recorder once; a second install is an Err.
#[test]
fn install_once() {
    let zone = Zone::create("rec_install", &ZoneOptions::new().anonymous()).unwrap();
    tally::recorder::install(zone.clone()).unwrap();
    counter!("global_total").increment(5);
    assert_eq!(
        zone.try_counter(&tally::Desc::new("global_total"))
            .unwrap()
            .value(),
        5
    );
    let again = tally::recorder::install(zone).unwrap_err();
    assert_eq!(again.errno(), 16);
}
