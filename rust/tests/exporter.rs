//! What tally-exporter and tallystat (the tree's programs, built by CMake
//! in ../build, or named by $TALLY_EXPORTER and $TALLY_TALLYSTAT) show of
//! series recorded through the `metrics` macros: the exposition parsed
//! and compared with the values the crate fetched.  When neither
//! variable is set and ../build has no programs, the test says it
//! skipped; tools/run-tests.sh sets both, so there it cannot skip.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use metrics::{counter, describe_counter, describe_histogram, gauge, histogram, Unit};
use tally::recorder::TallyRecorder;
use tally::{Desc, Zone, ZoneOptions};

fn program(var: &str, rel: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "${var} names {p:?}, which does not exist");
        return Some(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel);
    p.is_file().then_some(p)
}

/// GET /metrics from 127.0.0.1:port, waiting up to 10 s for the server.
fn scrape(port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(mut s) => {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                    .unwrap();
                let mut body = String::new();
                s.read_to_string(&mut body).unwrap();
                let (head, body) = body.split_once("\r\n\r\n").expect("an HTTP response");
                assert!(
                    head.starts_with("HTTP/1.") && head.contains(" 200 "),
                    "{head}"
                );
                return body.to_string();
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("tally-exporter did not answer on port {port}: {e}"),
        }
    }
}

/// The port of the exporter whose stderr is `err`, from its "listening
/// on" line (None when it does not come within 10 s).  Every line goes on
/// to this test's stderr, until the exporter exits.
fn listening_port(err: std::process::ChildStderr) -> Option<u16> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            eprintln!("{line}");
            if let Some(rest) = line.split("listening on http://127.0.0.1:").nth(1) {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                let _ = tx.send(digits.parse::<u16>().ok());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(10)).ok().flatten()
}

/// The samples of a text exposition: "name{labels}" -> value, and the
/// HELP and TYPE lines.
fn parse(text: &str) -> (BTreeMap<String, f64>, BTreeMap<String, String>) {
    let mut samples = BTreeMap::new();
    let mut meta = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some((what, rest)) = rest.split_once(' ') {
                if let Some((name, v)) = rest.split_once(' ') {
                    meta.insert(format!("{what} {name}"), v.to_string());
                }
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample line");
        samples.insert(series.to_string(), value.parse::<f64>().expect("a number"));
    }
    (samples, meta)
}

#[test]
fn exporter_and_tallystat_show_what_the_crate_recorded() {
    let Some(exporter) = program(
        "TALLY_EXPORTER",
        "build/programs/tally-exporter/tally-exporter",
    ) else {
        println!("skipped: no tally-exporter (build the tree with CMake, or set TALLY_EXPORTER)");
        return;
    };
    // The library reads TALLY_DIR from the environment, once: the test
    // runs again in a child process given a directory of its own, rather
    // than change the environment of this one, whose other threads may
    // read it meanwhile.
    if !is_child() {
        let dir = TempDir::new("exporter");
        let path = dir.path().to_str().expect("a UTF-8 temporary path");
        let out = run_child(
            "exporter_and_tallystat_show_what_the_crate_recorded",
            &[("TALLY_DIR", path)],
        );
        print!("{}", String::from_utf8_lossy(&out.stdout));
        return;
    }
    let dir = PathBuf::from(std::env::var_os("TALLY_DIR").expect("TALLY_DIR from the parent"));

    let zone = Zone::create("rs_exporter", &ZoneOptions::new()).unwrap();
    let rec = TallyRecorder::new(zone.clone());
    metrics::with_local_recorder(&rec, || {
        describe_counter!("rs_jobs_total", "Jobs run.");
        describe_histogram!("rs_payload", Unit::Bytes, "Payload sizes.");
    });
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let rec = &rec;
            s.spawn(move || {
                metrics::with_local_recorder(rec, || {
                    let a = counter!("rs_jobs_total", "queue" => "a");
                    let b = counter!("rs_jobs_total", "queue" => "b");
                    let h = histogram!("rs_payload");
                    for i in 0..100_000u64 {
                        a.increment(1);
                        if i % 4 == t {
                            b.increment(3);
                        }
                        h.record((i % 5000) as f64);
                    }
                    gauge!("rs_workers").increment(1.0);
                    counter!("rs_errors_total", "queue" => "a", "kind" => "io").increment(t + 1);
                })
            });
        }
    });
    metrics::with_local_recorder(&rec, || {
        gauge!("rs_workers").decrement(0.5);
        // Durations are kept in integer nanoseconds, which the exporter
        // shows in seconds, exactly.
        let h = histogram!("rs_latency_seconds");
        h.record(0.25);
        h.record(0.000_000_001);
        h.record(1.5);
    });
    gauge!("rs_unused").set(0.0); // no global recorder: a no-op
    let fetch = |d: Desc| zone.try_counter(&d.help("Jobs run.")).unwrap().value();
    let a = fetch(Desc::new("rs_jobs_total").label("queue", "a"));
    let b = fetch(Desc::new("rs_jobs_total").label("queue", "b"));
    assert_eq!((a, b), (200_000, 150_000));

    // On a port the kernel chooses as the exporter binds it (a port
    // picked here and freed could be taken by another program first),
    // learned from its log line "listening on http://127.0.0.1:PORT/".
    let mut child = Command::new(&exporter)
        .args(["--listen", "127.0.0.1:0", "--dir"])
        .arg(&dir)
        .args(["--no-process-labels", "--self-metrics", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tally-exporter");
    let port = listening_port(child.stderr.take().unwrap());
    let Some(port) = port else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("tally-exporter did not say which port it listens on within 10 s");
    };
    let text = std::panic::catch_unwind(|| scrape(port));
    let _ = child.kill();
    let _ = child.wait();
    let text = text.unwrap();
    let (samples, meta) = parse(&text);

    assert_eq!(
        samples.get("rs_jobs_total{queue=\"a\"}"),
        Some(&(a as f64)),
        "{text}"
    );
    assert_eq!(
        samples.get("rs_jobs_total{queue=\"b\"}"),
        Some(&(b as f64)),
        "{text}"
    );
    assert_eq!(
        meta.get("HELP rs_jobs_total").map(String::as_str),
        Some("Jobs run.")
    );
    assert_eq!(
        meta.get("TYPE rs_jobs_total").map(String::as_str),
        Some("counter")
    );
    assert_eq!(samples.get("rs_workers"), Some(&1.5), "{text}");
    assert_eq!(
        samples.get("rs_errors_total{kind=\"io\",queue=\"a\"}"),
        Some(&3.0),
        "{text}"
    );
    assert_eq!(
        meta.get("TYPE rs_workers").map(String::as_str),
        Some("gauge")
    );
    let per_thread: u64 = (0..100_000u64).map(|i| i % 5000).sum();
    assert_eq!(samples.get("rs_payload_count"), Some(&200_000.0), "{text}");
    assert_eq!(
        samples.get("rs_payload_sum"),
        Some(&(2.0 * per_thread as f64)),
        "{text}"
    );
    assert_eq!(
        samples.get("rs_payload_bucket{le=\"+Inf\"}"),
        Some(&200_000.0),
        "{text}"
    );
    // An octave edge: values 0..=1023 of each 5000, 1024 per 5000.
    assert_eq!(
        samples.get("rs_payload_bucket{le=\"1023\"}"),
        Some(&(2.0 * 20.0 * 1024.0)),
        "{text}"
    );
    assert_eq!(
        meta.get("TYPE rs_payload").map(String::as_str),
        Some("histogram")
    );
    assert!(!text.contains("rs_unused"));
    assert_eq!(samples.get("rs_latency_seconds_count"), Some(&3.0), "{text}");
    assert_eq!(samples.get("rs_latency_seconds_sum"), Some(&1.750000001), "{text}");
    assert_eq!(samples.get("rs_latency_seconds_bucket{le=\"+Inf\"}"), Some(&3.0), "{text}");
    // 1 ns falls in the first octave bucket, whose edge is 1 ns: 1e-09 s.
    let first = samples
        .iter()
        .find(|(k, _)| k.starts_with("rs_latency_seconds_bucket{le=\"0.000000001\""))
        .map(|(_, v)| *v);
    assert_eq!(first, Some(1.0), "{text}");

    if let Some(tallystat) = program("TALLY_TALLYSTAT", "build/programs/tallystat/tallystat") {
        let out = Command::new(tallystat)
            .arg("--dir")
            .arg(&dir)
            .arg("rs_jobs_total")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let row = |q: &str| -> Vec<String> {
            text.lines()
                .find(|l| l.contains(&format!("rs_jobs_total{{queue=\"{q}\"}}")))
                .unwrap_or_else(|| panic!("no row for queue {q} in:\n{text}"))
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        assert!(row("a").contains(&a.to_string()), "{text}");
        assert!(row("b").contains(&b.to_string()), "{text}");
    } else {
        println!("skipped tallystat: not built");
    }
}
