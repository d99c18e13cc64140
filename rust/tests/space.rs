//! A full file system: on a 256 KiB tmpfs (mounted in a private mount
//! namespace made by unshare(1), so that it disappears with the child
//! process and no mount is ever left behind), registrations end with
//! ENOSPC and a discarding handle, never a panic, a SIGBUS or an abort,
//! and the counters registered before keep exact totals.  Skipped when
//! not root or without unshare(1).

mod common;
use common::*;

use std::process::Command;

use tally::{Desc, Zone, ZoneOptions};

const ENOSPC: i32 = 28;

#[test]
fn full_file_system_gives_discarding_handles() {
    if is_child() {
        return;
    }
    if !is_root() || Command::new("unshare").arg("--version").output().is_err() {
        println!("skipped: needs root and unshare(1) to mount a private tmpfs");
        return;
    }
    let dir = TempDir::new("space");
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs -o size=256k,mode=0700 tmpfs \"$1\" && exec \"$2\" space_child --exact --nocapture --test-threads=1")
        .arg("sh")
        .arg(dir.path())
        .arg(&exe)
        .env(CHILD, "1")
        .env("TALLY_DIR", dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    if String::from_utf8_lossy(&out.stderr).contains("unshare failed") {
        println!("skipped: cannot make a mount namespace here");
        return;
    }
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = lines(&out, "registered=");
    assert_eq!(got.len(), 1, "{text}");
    assert!(got[0].parse::<usize>().unwrap() > 0);
    println!("{} counters registered before ENOSPC", got[0]);
    assert_eq!(lines(&out, "done"), vec![String::new()], "{text}");
}

#[test]
fn space_child() {
    if !is_child() {
        return;
    }
    let zone = Zone::create("space", &ZoneOptions::new()).unwrap();
    let mut ok = Vec::new();
    let mut err = None;
    for i in 0..200_000 {
        let d = Desc::new("filling_total").label("i", i.to_string());
        match zone.try_counter(&d) {
            Ok(c) => {
                c.increment(1);
                ok.push(c);
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let err = err.expect("a 256 KiB file system never filled");
    assert_eq!(err.errno(), ENOSPC, "{err}");
    // The constructor that does not ask gives a handle that discards.
    let d = zone.counter(&Desc::new("filling_total").label("i", "late"));
    assert!(d.is_discarding());
    let h = zone.histogram(&Desc::new("late_histogram"));
    // The registered counters count exactly from every thread and CPU,
    // even where a CPU finds no room for its copy (its adds spill).
    let cpus = cpus();
    std::thread::scope(|s| {
        for t in 0..2 {
            let (ok, d, h, cpus) = (&ok, &d, &h, &cpus);
            s.spawn(move || {
                pin(cpus[t % cpus.len()]);
                for c in ok.iter() {
                    for _ in 0..100 {
                        c.increment(1);
                        d.increment(1);
                        h.observe(5);
                    }
                }
            });
        }
    });
    for c in &ok {
        assert_eq!(c.value(), 201);
    }
    println!("registered={}", ok.len());
    println!("done");
}
