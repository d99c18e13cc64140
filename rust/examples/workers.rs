//! A multi-threaded service whose statistics tallystat and tally-exporter
//! show: worker threads take jobs from queues and record them through
//! the `metrics` macros (into a tally zone, after one line at start-up)
//! and through tally's own handles.
//!
//!   cargo run --release --example workers -- [seconds] [threads]
//!   tallystat 'rs_*' 1            # in another terminal
//!   tally-exporter & curl -s 127.0.0.1:9477/metrics | grep rs_
//!
//! It runs for `seconds` (default 30), then prints its totals and exits;
//! the zone is the process's default zone (named after the program, or
//! the shared zone $TALLY_ZONE).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit,
};
use tally::{Desc, Zone};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(30);
    let threads: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4);

    // The one line: every metrics macro of the program records into the
    // process's tally zone.
    let zone = Zone::default_zone()?;
    tally::recorder::install(zone.clone())?;

    describe_counter!("rs_jobs_total", "Jobs finished, by queue and outcome.");
    describe_histogram!(
        "rs_job_duration_seconds",
        Unit::Seconds,
        "How long a job took."
    );
    describe_gauge!("rs_workers_busy", "Workers running a job now.");
    // A tally counter for the hottest path: the inline add, no call.
    let polls = zone.try_counter(&Desc::new("rs_queue_polls_total").help("Queue polls."))?;
    let sizes = zone.try_histogram_family(
        &Desc::new("rs_job_payload")
            .help("Job payload sizes.")
            .unit("bytes"),
        &["queue"],
    )?;

    println!(
        "pid {}: {} workers for {} s; zone {}",
        std::process::id(),
        threads,
        seconds,
        zone.path()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    std::thread::scope(|s| {
        for w in 0..threads {
            let (stop, polls, sizes) = (&stop, &polls, &sizes);
            s.spawn(move || {
                let queue = format!("q{}", w % 2);
                let ok = counter!("rs_jobs_total", "queue" => queue.clone(), "outcome" => "ok");
                let failed =
                    counter!("rs_jobs_total", "queue" => queue.clone(), "outcome" => "failed");
                let duration = histogram!("rs_job_duration_seconds", "queue" => queue.clone());
                let busy = gauge!("rs_workers_busy");
                let size = sizes.with_labels(&[&queue]);
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ w as u64;
                while !stop.load(Ordering::Relaxed) {
                    polls.increment(1);
                    busy.increment(1.0);
                    let t = Instant::now();
                    // A job: a few thousand rounds of xorshift.
                    let rounds = 1000 + (x % 4000);
                    for _ in 0..rounds {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                    }
                    duration.record(t.elapsed().as_secs_f64());
                    size.observe(x % 65536);
                    if x.is_multiple_of(100) {
                        failed.increment(1)
                    } else {
                        ok.increment(1)
                    }
                    busy.decrement(1.0);
                }
            });
        }
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    println!(
        "{} polls in {:.1} s ({:.1} M/s)",
        polls.value(),
        start.elapsed().as_secs_f64(),
        polls.value() as f64 / start.elapsed().as_secs_f64() / 1e6
    );
    Ok(())
}
