#!/usr/bin/env bash
# Fuzzes the segment reader for SECONDS (default 60).
#
#   tools/fuzz.sh [SECONDS]
#
# Builds build-fuzz/fuzz-reader (libFuzzer + ASan + UBSan, with clang) from
# src/*/*.c and fuzz/fuzz-reader.c, writes the seed corpus from real segments
# into build-fuzz/corpus (fuzz/gen-corpus.c), and runs the fuzzer on it.  New inputs that reach new code are kept in
# build-fuzz/corpus for the next run.  Exits non-zero on a crash, a leak,
# undefined behaviour or a timeout, and prints the path of the input that
# caused it and the command that replays it.
set -u
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz
cc=${CLANG:-clang}

if ! command -v "$cc" >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "fuzz: installing clang"
		apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				clang libclang-rt-14-dev >/dev/null
	fi
	command -v "$cc" >/dev/null 2>&1 ||
		{ echo "fuzz: $cc not found (apt-get install clang libclang-rt-14-dev)"; exit 1; }
fi

mkdir -p "$out/crashes"
flags="-g -O1 -pthread -Iinclude -Isrc"
echo "fuzz: building $out/fuzz-reader"
"$cc" $flags -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -fno-omit-frame-pointer \
	src/*/*.c fuzz/fuzz-reader.c -o "$out/fuzz-reader" ||
	{ echo "fuzz: build failed (is libclang-rt-14-dev installed?)"; exit 1; }

# The seeds (seed-*) are written again on every run, so that they follow
# the current format; what the fuzzer found (other names) stays.
echo "fuzz: generating the seed corpus"
"$cc" $flags src/*/*.c fuzz/gen-corpus.c -o "$out/gen-corpus" &&
	"$out/gen-corpus" "$out/corpus" ||
	{ echo "fuzz: could not generate the seed corpus"; exit 1; }

# Inputs that once broke a promise (fuzz/regress/, named for what they
# broke) run first, every time.
if [ -n "$(ls fuzz/regress 2>/dev/null)" ]; then
	echo "fuzz: replaying $(ls fuzz/regress | wc -l) input(s) of fuzz/regress"
	"$out/fuzz-reader" -runs=1 fuzz/regress/* >"$out/regress.log" 2>&1 ||
		{ tail -20 "$out/regress.log"; echo "fuzz: FAILED on fuzz/regress"; exit 1; }
fi

before=$(ls "$out/crashes" | wc -l)
echo "fuzz: running for $secs s on $(ls "$out/corpus" | wc -l) inputs"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
"$out/fuzz-reader" -max_total_time="$secs" -max_len=131072 -timeout=20 \
	-rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$out/crashes/" "$out/corpus" 2>&1 |
	tee "$out/last-run.log" |
	grep --line-buffered -vE '^#[0-9]+.*(NEW|REDUCE)|^[[:space:]]*$|# Uses: |^"|dictionary'
rc=${PIPESTATUS[0]}

grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added)' \
	"$out/last-run.log" | sed 's/^/fuzz: /'
grep -E '^#[0-9]+' "$out/last-run.log" | tail -1 | sed 's/^/fuzz: last: /'
after=$(ls "$out/crashes" | wc -l)
if [ "$rc" != 0 ] || [ "$after" != "$before" ]; then
	echo "fuzz: FAILED (exit $rc); crashing input(s):"
	ls -t "$out/crashes"/* 2>/dev/null | head -$((after - before > 0 ? after - before : 1)) |
		while read -r f; do
			echo "  $f"
			echo "  replay: $out/fuzz-reader $f"
		done
	exit 1
fi
echo "fuzz: no crash in $secs s"
