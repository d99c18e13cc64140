//! What the integration tests share: running a test of this binary in a
//! child process (with another environment: TALLY_NO_RSEQ=1, a private
//! TALLY_DIR), pinning threads to CPUs, and temporary directories.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The environment variable that makes a test the child's part.
pub const CHILD: &str = "TALLY_RS_CHILD";

/// Runs test `name` of this test binary alone in a child process with
/// `env` (and CHILD=1) and returns its output; fails when it fails.
pub fn run_child(name: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn the child test");
    assert!(
        out.status.success(),
        "child {name} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether this process is a child started by run_child().
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// What follows `prefix` on the lines of a child's output that hold it
/// (libtest may print "test name ... " before a test's first line).
pub fn lines(out: &Output, prefix: &str) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.find(prefix).map(|i| l[i + prefix.len()..].to_string()))
        .collect()
}

unsafe extern "C" {
    fn sched_setaffinity(pid: i32, size: usize, mask: *const u64) -> i32;
    fn sched_getaffinity(pid: i32, size: usize, mask: *mut u64) -> i32;
    fn getuid() -> u32;
}

/// The CPUs this process may run on.
pub fn cpus() -> Vec<usize> {
    let mut mask = [0u64; 16];
    // SAFETY: a 1024-bit mask, as glibc's cpu_set_t.
    let rc = unsafe { sched_getaffinity(0, std::mem::size_of_val(&mask), mask.as_mut_ptr()) };
    assert_eq!(rc, 0, "sched_getaffinity");
    (0..1024)
        .filter(|c| mask[c / 64] >> (c % 64) & 1 == 1)
        .collect()
}

/// Moves the calling thread to CPU `cpu` (the kernel migrates it at once).
pub fn pin(cpu: usize) {
    let mut mask = [0u64; 16];
    mask[cpu / 64] |= 1 << (cpu % 64);
    // SAFETY: a valid mask; 0 is the calling thread.
    let rc = unsafe { sched_setaffinity(0, std::mem::size_of_val(&mask), mask.as_ptr()) };
    assert_eq!(rc, 0, "sched_setaffinity to CPU {cpu}");
}

/// Lets the calling thread run on any of `cpus` again.
pub fn unpin(cpus: &[usize]) {
    let mut mask = [0u64; 16];
    for c in cpus {
        mask[c / 64] |= 1 << (c % 64);
    }
    // SAFETY: as pin().
    unsafe { sched_setaffinity(0, std::mem::size_of_val(&mask), mask.as_ptr()) };
}

pub fn is_root() -> bool {
    // SAFETY: no arguments.
    unsafe { getuid() == 0 }
}

/// A fresh directory 0700 under the temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        for i in 0..1000u32 {
            let p = base.join(format!("tally-rs-{tag}-{}-{i}", std::process::id()));
            if std::fs::DirBuilder::new().mode(0o700).create(&p).is_ok() {
                return TempDir(p);
            }
        }
        panic!("cannot make a temporary directory");
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
