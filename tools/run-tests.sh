#!/usr/bin/env bash
# Runs every test suite: a normal build, an ASan+UBSan build and a TSan
# build (each suite also runs with TALLY_NO_RSEQ=1, see test/CMakeLists.txt),
# then a short fuzzing run of the segment reader.  Prints a summary line.
#
# CTest runs each suite's tests in parallel, two jobs a CPU ($TEST_JOBS):
# many tests wait more than they compute (servers, children, alarms).
# Every test works in a directory, on ports and as uids of its own, and
# the tests that need one resource declare it (RESOURCE_LOCK, fixtures).
# The tests labelled "timing" (how long things take: they depend on the
# machine and its load) run after the normal suite, one at a time, and
# are reported without failing the run.
set -u
cd "$(dirname "$0")/.."
jobs=$(nproc)
test_jobs=${TEST_JOBS:-$((2 * jobs))}
failed=0
total_pass=0
total_fail=0

suite() { # name builddir cmake-args env...
	local name=$1 dir=$2 args=$3
	shift 3
	echo "=== $name ($dir)"
	if [ ! -f "$dir/build.ninja" ]; then
		cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			-DTALLY_WERROR=ON $args >/dev/null ||
			{ echo "configuring $name failed"; failed=1; total_fail=$((total_fail + 1)); return; }
	fi
	if ! cmake --build "$dir" -j "$jobs" >"$dir.log" 2>&1; then
		tail -40 "$dir.log"; echo "build of $name failed"
		failed=1; total_fail=$((total_fail + 1)); return
	fi
	local out
	out=$(cd "$dir" && env "$@" ctest --output-on-failure -j "$test_jobs" \
		-LE timing 2>&1)
	echo "$out" | grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|FAIL|Error|error' | sed 's/^/  /'
	local p f
	p=$(echo "$out" | grep -c ' Passed ')
	f=$(echo "$out" | grep -cE '\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run')
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	[ "$f" = 0 ] || { echo "$out" | tail -60; failed=1; }
}

# tally_suite passed failed ok log: adds a suite's counts to the totals;
# a suite that failed (ok is not 1) counts one failure more than it
# reported (it may have failed before counting) and shows its log's end.
tally_suite() {
	total_pass=$((total_pass + $1))
	if [ "$3" = 1 ]; then
		total_fail=$((total_fail + $2))
	else
		tail -60 "$4"
		total_fail=$((total_fail + $2 + 1)); failed=1
	fi
}

# timings builddir: the tests labelled "timing", one at a time; reported,
# never counted as failures.
timings() {
	local dir=$1 out
	[ -f "$dir/CTestTestfile.cmake" ] || return 0
	echo "=== timing ($dir, reported only)"
	# The fixtures they require (test-venv) run with them: not counted.
	out=$(cd "$dir" && ctest --output-on-failure -j 1 -L timing 2>&1 |
		grep -v ' test-venv ')
	echo "$out" | grep -E '^ *[0-9]+/[0-9]+ Test' | sed 's/^/  /'
	echo "$out" | grep -E '^FAIL: |rate [0-9.]+, want' | sed 's/^/    /'
	echo "  timing: $(echo "$out" | grep -c ' Passed ') within their bounds," \
		"$(echo "$out" | grep -cE '\*\*\*Failed|\*\*\*Timeout') not (not a failure of the run)"
}

start=$(date +%s)
suite normal build ""
timings build
suite asan build-asan "-DTALLY_SANITIZE=address -DTALLY_BENCH=OFF" \
	TALLY_TEST_SCALE=4 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
suite tsan build-tsan "-DTALLY_SANITIZE=thread -DTALLY_BENCH=OFF" \
	TALLY_TEST_SCALE=4 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
echo "=== install"
if tools/check-install.sh build >build-install.log 2>&1; then
	sed 's/^/  /' build-install.log; total_pass=$((total_pass + 1))
else
	cat build-install.log; total_fail=$((total_fail + 1)); failed=1
fi
echo "=== monitoring"
# monitoring/: promtool check and test rules, the dashboard against the
# rules and the normal build's exporter (about a second).
if tools/check-monitoring.sh build >build-monitoring.log 2>&1; then
	tail -1 build-monitoring.log | sed 's/^/  /'; total_pass=$((total_pass + 1))
else
	cat build-monitoring.log; total_fail=$((total_fail + 1)); failed=1
fi
echo "=== debian"
# make deb's packages (debian/, about 15 s) and their install check: the
# README's C example against them, the exporter's unit.  Needs debhelper
# and lintian (make deps installs them).
if ! command -v dh >/dev/null || ! command -v lintian >/dev/null; then
	echo "  skipped: no debhelper or lintian (make deps installs them)"
elif tools/build-deb.sh build-deb >build-deb.log 2>&1 &&
	tools/check-deb.sh build-deb >>build-deb.log 2>&1; then
	sed 's/^/  /' build-deb.log; total_pass=$((total_pass + 1))
else
	cat build-deb.log; total_fail=$((total_fail + 1)); failed=1
fi
echo "=== python"
if [ -x python/tests/run.sh ]; then
	# The package in a fresh venv (pip install .) and its pytest suite;
	# each pytest test counts in the summary.
	if python/tests/run.sh >build-python.log 2>&1; then py_ok=1; else py_ok=0; fi
	py_sum=$(tail -1 build-python.log)
	echo "  $py_sum"
	p=$(echo "$py_sum" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || true)
	f=0
	for n in $(echo "$py_sum" | grep -oE '[0-9]+ (failed|errors?)' |
		grep -oE '^[0-9]+'); do f=$((f + n)); done
	tally_suite "${p:-0}" "$f" "$py_ok" build-python.log
fi
echo "=== wheel"
# The sdist and, built from it, the manylinux wheel (auditwheel), and the
# package's tests that need only pytest and prometheus_client in a fresh
# venv holding only that wheel (about a minute; make wheel runs them all).
if tools/build-wheel.sh --quick build-wheel >build-wheel.log 2>&1; then
	grep '^wheel:' build-wheel.log | sed 's/^/  /'; total_pass=$((total_pass + 1))
else
	tail -40 build-wheel.log; total_fail=$((total_fail + 1)); failed=1
fi
echo "=== rust"
# The crate in rust/ (built by cargo from this tree's sources): cargo test
# (unit, integration and doc tests; tally-exporter and tallystat of the
# normal build are the programs its exporter test scrapes and runs), the
# integration tests again with TALLY_NO_RSEQ=1 and again with the C
# library built with ASan+UBSan (rust/build.rs: TALLY_RS_SANITIZE; the
# runtime is preloaded, since Rust's own sanitizers need a nightly
# compiler), and clippy with warnings as errors.  Crates come from
# crates.io at the first run (Cargo.lock fixes their versions), from
# cargo's cache after that.
# Debian's own cargo is older than the 1.87 the crate needs (its inline
# add uses asm goto) and Rust is not one of the packages `make deps`
# installs: without a recent enough cargo the step says so and is
# skipped, it does not fail the run.
cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
cargo_minor=$("$cargo" --version 2>/dev/null | sed -nE 's/^cargo 1\.([0-9]+).*/\1/p')
if [ ! -x "$cargo" ] || [ "${cargo_minor:-0}" -lt 87 ]; then
	echo "  skipped: no cargo 1.87 or later (found: $("$cargo" --version 2>/dev/null || echo none)); install Rust with rustup to test rust/"
else
	rs_ok=1
	(
		export TALLY_EXPORTER=$PWD/build/programs/tally-exporter/tally-exporter
		export TALLY_TALLYSTAT=$PWD/build/programs/tallystat/tallystat
		# The C sources compile with warnings as errors, as in CMake.
		export TALLY_WERROR=1
		cd rust &&
			"$cargo" test --locked 2>&1 &&
			TALLY_NO_RSEQ=1 "$cargo" test --locked --tests 2>&1 &&
			(
				export CARGO_TARGET_DIR=target/asan TALLY_RS_SANITIZE=address
				export RUSTFLAGS="-C link-arg=-lasan -C link-arg=-lubsan"
				export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="env LD_PRELOAD=$(gcc -print-file-name=libasan.so)"
				export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
				export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
				# The example service, which tests/example.rs runs.
				"$cargo" build --locked --examples 2>&1 &&
					"$cargo" test --locked --tests 2>&1
			) &&
			"$cargo" clippy --locked --all-targets -- -D warnings 2>&1 &&
			echo "clippy: clean"
	) >build-rust.log || rs_ok=0
	p=0; f=0
	for n in $(grep -oE 'test result: [a-zA-Z]+\. [0-9]+ passed' build-rust.log |
		grep -oE '[0-9]+ passed' | grep -oE '[0-9]+'); do p=$((p + n)); done
	for n in $(grep -oE '; [0-9]+ failed' build-rust.log | grep -oE '[0-9]+'); do
		f=$((f + n)); done
	grep -q '^clippy: clean' build-rust.log && p=$((p + 1))
	echo "  cargo test: $p passed (also with TALLY_NO_RSEQ=1, with ASan, and clippy), $f failed"
	tally_suite "$p" "$f" "$rs_ok" build-rust.log
fi
echo "=== crate"
# The crate as cargo package makes it (C sources and headers inside),
# unpacked alone, its unit and integration tests, and cargo doc without
# warnings (30-45 s; the doc tests ran in rust/ above).
if [ ! -x "$cargo" ] || [ "${cargo_minor:-0}" -lt 87 ]; then
	echo "  skipped: no cargo 1.87 or later"
elif tools/package-crate.sh --quick build-crate >build-crate.log 2>&1 &&
	(cd rust && RUSTDOCFLAGS="-D warnings" "$cargo" doc --no-deps --locked) \
		>>build-crate.log 2>&1; then
	grep '^crate:' build-crate.log | sed 's/^/  /'; echo "  cargo doc: no warnings"
	total_pass=$((total_pass + 2))
else
	tail -40 build-crate.log; total_fail=$((total_fail + 1)); failed=1
fi
if [ -x tools/fuzz.sh ]; then
	echo "=== fuzz (short)"
	if tools/fuzz.sh 30 >build-fuzz.log 2>&1; then
		echo "  fuzz: no crash in 30 s"; total_pass=$((total_pass + 1))
	else
		tail -40 build-fuzz.log; total_fail=$((total_fail + 1)); failed=1
	fi
fi
echo "=== $(( $(date +%s) - start )) s"
echo "tests: $total_pass passed, $total_fail failed"
exit $failed
