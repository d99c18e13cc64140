//! The example service (examples/workers.rs, built by `cargo test`) run
//! for two seconds in a private TALLY_DIR: while it runs, a reader in
//! this process and tallystat (when built) see its series, and its
//! counters match what it prints at exit.

mod common;
use common::*;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tally::reader::{Kind, Segment};

fn example() -> PathBuf {
    // target/<profile>/deps/example-<hash> -> target/<profile>/examples/workers
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("workers")
}

#[test]
fn the_example_service_is_seen_by_readers() {
    let bin = example();
    assert!(bin.is_file(), "{bin:?}: cargo test builds the examples");
    let dir = TempDir::new("example");
    let child = Command::new(&bin)
        .args(["2", "2"])
        .env("TALLY_DIR", dir.path())
        .env_remove("TALLY_ZONE")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();

    // Wait for its zone file and its series.
    let deadline = Instant::now() + Duration::from_secs(10);
    let series = loop {
        let files: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "tally"))
            .collect();
        if let Some(f) = files.first() {
            if let Ok(seg) = Segment::open(f) {
                let s = seg.series().unwrap();
                if s.iter()
                    .any(|s| s.name == "rs_job_duration_seconds" && s.value > 0)
                {
                    break s;
                }
            }
        }
        assert!(Instant::now() < deadline, "no series from the example");
        std::thread::sleep(Duration::from_millis(50));
    };
    let names: std::collections::BTreeSet<&str> = series.iter().map(|s| s.name.as_str()).collect();
    for n in [
        "rs_jobs_total",
        "rs_job_duration_seconds",
        "rs_workers_busy",
        "rs_queue_polls_total",
        "rs_job_payload",
    ] {
        assert!(names.contains(n), "{n} missing from {names:?}");
    }
    let d = series
        .iter()
        .find(|s| s.name == "rs_job_duration_seconds")
        .unwrap();
    assert_eq!((d.kind, d.unit.as_str()), (Kind::Histogram, "nanoseconds"));
    assert_eq!(d.help, "How long a job took.");

    if let Some(tallystat) = std::env::var_os("TALLY_TALLYSTAT")
        .map(PathBuf::from)
        .or_else(|| {
            Some(
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../build/programs/tallystat/tallystat"),
            )
        })
        .filter(|p| p.is_file())
    {
        let out = Command::new(tallystat)
            .arg("--dir")
            .arg(dir.path())
            .arg("rs_*")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("rs_queue_polls_total"),
            "{text}"
        );
    }

    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let polls: u64 = text
        .lines()
        .find_map(|l| {
            l.split_once(" polls in ")
                .map(|(n, _)| n.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no total in {text}"));
    assert!(polls > 0);
}
