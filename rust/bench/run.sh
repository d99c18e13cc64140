#!/usr/bin/env bash
# Builds and runs the Rust benchmark (rust/bench): tally's Rust counter
# against tally's C inline add, metrics-exporter-prometheus and the
# prometheus crate, in one run.  Arguments go to the benchmark
# (--quick, --rounds N).  Exit status 1 when a target is missed.
set -euo pipefail
cd "$(dirname "$0")"
cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
"$cargo" build --release --locked -q
exec ./target/release/tally-rs-bench "$@"
