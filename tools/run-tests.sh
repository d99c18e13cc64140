#!/usr/bin/env bash
# Runs every test suite: a normal build, an ASan+UBSan build and a TSan
# build (the library's tests also with TALLY_NO_RSEQ=1, and only so under
# TSan: see test/CMakeLists.txt),
# then a short fuzzing run of the segment reader.  Prints a summary line.
#
# Two lanes run at once once the normal build is there.  The first runs
# the C suites (normal, ASan, TSan), the install, monitoring and Debian
# checks, the fuzzer and last the tests labelled "timing" (how long
# things take: they depend on the machine and its load, run one at a
# time and are reported without failing the run), printing as it goes.
# The second, at a lower priority, builds the ASan and TSan trees ahead
# of the first lane (which waits for them on a lock when it gets there
# first), then runs the Rust stage, then the Python one beside the wheel
# and crate stages (build-lane3.log), into build-lane2.log, printed
# after the first lane.  A C suite waits much of
# its time (servers, children, alarms) and the second lane mostly
# compiles: together they keep both CPUs of a small machine busy.  Each
# stage says its wall and CPU time; the counts of both lanes go through
# build-results.log, summed at the end.
#
# CTest runs each suite's tests in parallel, two jobs a CPU ($TEST_JOBS):
# many tests wait more than they compute (servers, children, alarms).
# Every test works in a directory, on ports and as uids of its own, and
# the tests that need one resource declare it (RESOURCE_LOCK, fixtures).
#
# Last, /dev/shm: a name there that the run made and left (a directory,
# a zone file, the default directory /dev/shm/tally-<uid> or something in
# it) fails the run, named.  Another make test on the machine (another
# clone) has names of its own there until it ends: every run holds a
# shared lock on /dev/shm while it runs, and the check takes it
# exclusively, so that it looks once no run is going.
set -u
cd "$(dirname "$0")/.."
jobs=$(nproc)
test_jobs=${TEST_JOBS:-$((2 * jobs))}
results=build-results.log
: >"$results"

# count PASSED FAILED: add a stage's counts (arithmetic expressions) to
# the results, from either lane.
count() {
	echo "$(($1)) $(($2))" >>"$results"
}

# cpu_s: set $cpu to the CPU seconds that this shell's finished children
# used so far (not in a $(...): a subshell has children of its own).
cpu_s() {
	local f=build-times.$BASHPID.log
	times >"$f"
	cpu=$(tail -1 "$f" | awk '{ n = 0; for (i = 1; i <= 2; i++) {
		split($i, t, /[ms]/); n += t[1] * 60 + t[2] } printf "%d", n }')
}

# timed STAGE ARGS...: run a stage and say how long it took, and how much
# CPU time (both CPUs count: a stage that keeps two busy for 10 s used 20).
# The stage runs without fd 7, the lock on /dev/shm (see st_shm): a
# server a test left running must not hold it for later runs.
timed() {
	local t0 c0
	t0=$(date +%s)
	cpu_s
	c0=$cpu
	"$@" 7<&-
	cpu_s
	echo "  ($(( $(date +%s) - t0 )) s, $(( cpu - c0 )) s of CPU)"
}

# build_of name builddir cmake-args: configure (once) and build.  Both
# lanes may ask for one build: the second waits for the first, on a lock
# in the build directory, and finds nothing left to do.
build_of() {
	local name=$1 dir=$2 args=$3
	mkdir -p "$dir"
	(
		flock 9
		if [ ! -f "$dir/build.ninja" ]; then
			eval "cmake -S . -B \"\$dir\" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
				-DTALLY_WERROR=ON $args" >/dev/null ||
				{ echo "configuring $name failed"; count 0 1; exit 1; }
		fi
		if ! cmake --build "$dir" -j "$jobs" >"$dir.log" 2>&1; then
			tail -40 "$dir.log"; echo "build of $name failed"
			count 0 1; exit 1
		fi
	) 9>"$dir/.run-tests.lock"
}

# run_suite name builddir env...: the suite's tests but the timing ones.
run_suite() {
	local name=$1 dir=$2
	shift 2
	echo "=== $name ($dir)"
	local out
	out=$(cd "$dir" && env "$@" ctest --output-on-failure -j "$test_jobs" \
		-LE timing 2>&1)
	echo "$out" | grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|FAIL|Error|error' | sed 's/^/  /'
	local p f
	p=$(echo "$out" | grep -c ' Passed ')
	f=$(echo "$out" | grep -cE '\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run')
	count p f
	[ "$f" = 0 ] || { echo "$out" | tail -60; }
}

suite() { # name builddir cmake-args env...
	local name=$1 dir=$2 args=$3
	shift 3
	build_of "$name" "$dir" "$args" || return 0
	run_suite "$name" "$dir" "$@"
}

# tally_suite passed failed ok log: count a suite's results; a suite that
# failed (ok is not 1) counts one failure more than it reported (it may
# have failed before counting) and shows its log's end.
tally_suite() {
	if [ "$3" = 1 ]; then
		count "$1" "$2"
	else
		tail -60 "$4"
		count "$1" "$2 + 1"
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

st_install() {
	echo "=== install"
	if tools/check-install.sh build >build-install.log 2>&1; then
		sed 's/^/  /' build-install.log; count 1 0
	else
		cat build-install.log; count 0 "1"
	fi
}

st_monitoring() {
	echo "=== monitoring"
	# monitoring/: promtool check and test rules, the dashboard against the
	# rules and the normal build's exporter (about a second).
	if tools/check-monitoring.sh build >build-monitoring.log 2>&1; then
		tail -1 build-monitoring.log | sed 's/^/  /'; count 1 0
	else
		cat build-monitoring.log; count 0 "1"
	fi
}

st_debian() {
	echo "=== debian"
	# make deb's packages (debian/, about 15 s) and their install check: the
	# README's C example against them, the exporter's unit.  Needs debhelper
	# and lintian (make deps installs them).
	if ! command -v dh >/dev/null || ! command -v lintian >/dev/null; then
		echo "  skipped: no debhelper or lintian (make deps installs them)"
	elif tools/build-deb.sh build-deb >build-deb.log 2>&1 &&
		tools/check-deb.sh build-deb >>build-deb.log 2>&1; then
		sed 's/^/  /' build-deb.log; count 1 0
	else
		cat build-deb.log; count 0 "1"
	fi
}

st_python() {
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
}

st_wheel() {
	echo "=== wheel"
	# The sdist and, built from it, the manylinux wheel (auditwheel), and the
	# package's tests that need only pytest and prometheus_client in a fresh
	# venv holding only that wheel (about a minute; make wheel runs them all).
	if tools/build-wheel.sh --quick build-wheel >build-wheel.log 2>&1; then
		grep '^wheel:' build-wheel.log | sed 's/^/  /'; count 1 0
	else
		tail -40 build-wheel.log; count 0 "1"
	fi
}

st_rust() {
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
			# The doc tests make zones in $TALLY_DIR, as the crate's
			# users do: in one of this run, not the default directory.
			TALLY_DIR=$(mktemp -d /dev/shm/tally-rust.XXXXXX) || exit 1
			export TALLY_DIR
			trap 'rm -rf "$TALLY_DIR"' EXIT
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
}

st_crate() {
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
		count 2 0
	else
		tail -40 build-crate.log; count 0 "1"
	fi
}

# shm_names: the names in /dev/shm, and in the default directory
# /dev/shm/tally-<uid> (which a run may find there and must leave as it
# found it), one a line, sorted.
shm_names() {
	local d=/dev/shm/tally-$(id -u)
	{
		ls -A /dev/shm
		[ -d "$d" ] && ls -A "$d" | sed "s|^|${d#/dev/shm/}/|"
	} 2>/dev/null | LC_ALL=C sort
}

# shm_in_use NAME: a process has /dev/shm/NAME, or a file below it, open,
# mapped or as its working directory: a test of another run, going on
# (the test harness's own directory, tally-test.<pid>.XXXXXX, while that
# pid runs).
shm_in_use() {
	local p=/dev/shm/$1 pid
	pid=$(echo "$1" | sed -n 's/^tally-test\.\([0-9]*\)\..*/\1/p')
	[ -n "$pid" ] && [ -d "/proc/$pid" ] && return 0
	find /proc/[0-9]*/fd /proc/[0-9]*/cwd -maxdepth 1 \
		\( -lname "$p" -o -lname "$p/*" \) -print -quit 2>/dev/null | grep -q . ||
		grep -qsF "$p/" /proc/[0-9]*/maps
}

# st_shm: what this run left in /dev/shm (names it did not find there at
# its start, $shm_before) fails it.  It waits for the other runs to end
# (their shared locks; at most 20 minutes, else it says it did not look),
# and passes over a name that something still uses, for 10 s, before it
# counts it as left.
st_shm() {
	local left name _
	echo "=== /dev/shm"
	flock -u 7
	if ! flock -x -w 1200 7; then
		echo "  not checked: another make test still runs after 20 minutes"
		return 0
	fi
	for _ in $(seq 10); do
		left=
		for name in $(LC_ALL=C comm -13 <(echo "$shm_before") <(shm_names)); do
			shm_in_use "$name" || left="$left $name"
		done
		[ -z "$left" ] && break
		sleep 1
	done
	for name in $left; do
		[ -e "/dev/shm/$name" ] && echo "  left: $(ls -ld "/dev/shm/$name")"
	done | grep . || { left=; echo "  nothing left"; }
	if [ -z "$left" ]; then count 1 0; else count 0 1; fi
	flock -u 7
}

st_fuzz() {
	if [ -x tools/fuzz.sh ]; then
		echo "=== fuzz (short)"
		if tools/fuzz.sh 30 >build-fuzz.log 2>&1; then
			echo "  fuzz: no crash in 30 s"; count 1 0
		else
			tail -40 build-fuzz.log; count 0 "1"
		fi
	fi
}

# The sanitizer trees carry line tables only (-g1): their reports still
# name function, file and line, and they compile faster than with full
# debugging information.  (build_of reads the arguments as the shell
# would: quotes group words.)
g1="'-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG'"
g1="$g1 '-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG'"
asan_args="-DTALLY_SANITIZE=address -DTALLY_BENCH=OFF $g1"
tsan_args="-DTALLY_SANITIZE=thread -DTALLY_BENCH=OFF $g1"
# The Rust stages' builds (rust/, the packaged crate) likewise: panics and
# backtraces keep their files and lines.
export CARGO_PROFILE_DEV_DEBUG=line-tables-only CARGO_PROFILE_TEST_DEBUG=line-tables-only

# The second lane, at a lower priority: the sanitizer builds (ahead of
# the first lane, which waits for them at need), then what needs the
# normal build's programs but not its tests.  Rust comes before Python:
# a Python test serves the crate's example service beside a C and a
# Python one (python/tests/test_exporter.py).
lane2() {
	renice -n 5 -p $BASHPID >/dev/null 2>&1 || true
	echo "=== builds"
	timed build_of asan build-asan "$asan_args"
	timed build_of tsan build-tsan "$tsan_args"
	timed st_rust
	# The wheel and the crate beside the Python suite: the first lane is
	# about done by then, and each of the three keeps about one CPU busy.
	( timed st_wheel; timed st_crate ) >build-lane3.log 2>&1 &
	local side=$!
	timed st_python
	wait "$side"
	cat build-lane3.log
}

# The lock that tells the runs on this machine apart (st_shm): /dev/shm
# itself, which every user can open, so that no file is made for it.
exec 7</dev/shm
flock -s -w 60 7 || echo "run-tests: /dev/shm stays locked by another run; going on"
shm_before=$(shm_names)

start=$(date +%s)
if build_of normal build "" 7<&-; then
	lane2 >build-lane2.log 2>&1 7<&- &
	lane2_pid=$!
	timed run_suite normal build
else
	lane2_pid=
fi
timed suite asan build-asan "$asan_args" \
	TALLY_TEST_SCALE=4 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
timed suite tsan build-tsan "$tsan_args" \
	TALLY_TEST_SCALE=4 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
timed st_install
timed st_monitoring
timed st_debian
timed st_fuzz
timed timings build
if [ -n "$lane2_pid" ]; then
	wait "$lane2_pid"
	cat build-lane2.log
fi
st_shm
total_pass=0
total_fail=0
while read -r p f; do
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
done <"$results"
echo "=== $(( $(date +%s) - start )) s"
echo "tests: $total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
