#!/usr/bin/env bash
# Makes the Rust crate tally-metrics as crates.io would get it, and proves
# that it stands alone: copies the C sources, headers and build list it
# compiles (src/build.txt, include/) into rust/libtally/, runs cargo
# package, unpacks the .crate into an empty directory with nothing of the
# tree beside it, and runs cargo test there (warnings as errors).  The
# .crate is left in OUT (default build-crate).  The copy in rust/libtally/
# (ignored by git, but for its README) is removed at the end.  --quick leaves out the doc
# tests (make test runs them in rust/ already), which take most of the
# time.
set -eu
quick=
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
cd "$(dirname "$0")/.."
out=$(mkdir -p "${1:-build-crate}" && cd "${1:-build-crate}" && pwd)
cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
# Cargo from its local cache of the registry first, so that a run after
# the first needs no network; from the registry when the cache lacks
# something.  Every step after a fetch then runs --offline.
cargo_cached() {
	"$cargo" "$@" --offline 2>/dev/null || "$cargo" "$@"
}
stage=rust/libtally
unstage() { rm -rf "$stage/src" "$stage/include"; }
trap unstage EXIT
unstage
mkdir -p "$stage/src"
cp -r include "$stage/"
cp src/build.txt "$stage/src/"
# Every C file and header of src/, whether build.txt lists it or not: a
# header the listed files include must be there.
(cd src && find . -name '*.[ch]' -print0 | xargs -0 cp --parents -t "../$stage/src")
version=$(sed -n 's/^version = "\(.*\)"/\1/p' rust/Cargo.toml | head -1)
(cd rust && cargo_cached package --locked --allow-dirty --no-verify \
	--target-dir "$out/target") >"$out/package.log" 2>&1 ||
	{ cat "$out/package.log"; echo "crate: cargo package failed"; exit 1; }
crate=$out/target/package/tally-metrics-$version.crate
cp "$crate" "$out/"
# Unpacked in the same place each time, so that cargo rebuilds only what
# changed.
alone=$out/alone
rm -rf "$alone"
mkdir -p "$alone"
tar xzf "$crate" -C "$alone"
# Only the crate: no ../src, ../include or ../build next to it.
# The quick run leaves out the doc tests, but builds the example service
# that tests/example.rs runs.  The tests that make zones with files make
# them in a TALLY_DIR of their own, not in the default directory.
tests_dir=$(mktemp -d /dev/shm/tally-crate.XXXXXX)
trap 'unstage; rm -rf "$tests_dir"' EXIT
(cd "$alone/tally-metrics-$version" &&
	export TALLY_WERROR=1 CARGO_TARGET_DIR="$out/target/alone" &&
	export TALLY_DIR=$tests_dir &&
	cargo_cached fetch --locked 2>&1 &&
	{ [ -z "$quick" ] || "$cargo" build --offline --locked --examples 2>&1; } &&
	"$cargo" test --offline --locked ${quick:+--lib --tests} 2>&1) >"$out/test.log" ||
	{ tail -40 "$out/test.log"; echo "crate: cargo test fails in the unpacked crate"; exit 1; }
# A new project as rust/README.md tells its reader to write it: the
# README's [dependencies] lines word for word (crates.io's tally-metrics
# patched to this .crate, which crates.io does not have yet) and its
# `metrics` example in a main(); run, it counts into a zone of its own
# TALLY_DIR.
consumer=$out/consumer
rm -rf "$consumer"
mkdir -p "$consumer/src"
readme_block() { # lang mark
	awk -v lang="$1" -v mark="$2" '
		$0 == "```" lang { inb = 1; buf = ""; next }
		inb && $0 == "```" { inb = 0; if (index(buf, mark)) { printf "%s", buf; exit } next }
		inb { buf = buf $0 "\n" }' rust/README.md
}
deps=$(readme_block toml tally-metrics)
example=$(readme_block rust recorder::install)
[ -n "$deps" ] && [ -n "$example" ] ||
	{ echo "crate: rust/README.md has no toml block with tally-metrics, or no recorder::install example"; exit 1; }
cat >"$consumer/Cargo.toml" <<EOF
[package]
name = "readme-consumer"
version = "0.1.0"
edition = "2021"

$deps

[patch.crates-io]
tally-metrics = { path = "$alone/tally-metrics-$version" }
EOF
cat >"$consumer/src/main.rs" <<EOF
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let elapsed = std::time::Duration::from_millis(3);
$example
    // The zone's file, while the process runs (it is removed at exit).
    for e in std::fs::read_dir(std::env::var("TALLY_DIR")?)? {
        println!("zone file: {}", e?.path().display());
    }
    Ok(())
}
EOF
consumer_dir=$(mktemp -d /dev/shm/tally-crate.XXXXXX)
trap 'unstage; rm -rf "$tests_dir" "$consumer_dir"' EXIT
(cd "$consumer" &&
	export TALLY_DIR=$consumer_dir CARGO_TARGET_DIR="$out/target/alone" &&
	cargo_cached fetch 2>&1 && "$cargo" run --offline --quiet 2>&1) \
	>"$out/consumer.log" ||
	{ cat "$out/consumer.log" "$consumer/Cargo.toml"; echo "crate: rust/README.md's dependency lines and example fail"; exit 1; }
grep -q "^zone file: $consumer_dir/.*\.tally$" "$out/consumer.log" ||
	{ cat "$out/consumer.log"; echo "crate: the README's example made no zone in TALLY_DIR"; exit 1; }

files=$(tar tzf "$crate" | wc -l)
passed=0
for n in $(grep -oE 'test result: ok\. [0-9]+ passed' "$out/test.log" | grep -oE '[0-9]+'); do
	passed=$((passed + n)); done
echo "crate: $(basename "$crate") ($files files, the C sources and headers inside);" \
	"cargo test${quick:+ --lib --tests} in it alone: $passed passed;" \
	"rust/README.md's dependency lines and example build and run against it"
