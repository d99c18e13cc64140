#!/usr/bin/env bash
# The readers' memory and time at many series: what each tool costs per
# series, above what it costs on an empty directory, in the same run.
#
#   bench/readers-memory.sh [N] [BUILD]     (make bench-readers)
#
# N series (default 1,000,000) are written by 8 processes of
# tallystat-writer --many N/8 into a directory of their own under
# /dev/shm.  Each reader runs on that directory and on an empty one: its
# peak resident memory (VmHWM, from /usr/bin/time -v's maximum resident
# set size, or /proc/<pid>/status for the exporter, which keeps running)
# and its wall time, the medians of RUNS runs (default 3).  One row per
# reader: the fixed cost (empty directory), the peak at N series, the
# bytes per series between the two, and the time.  The readers:
#   tally-dump         one pass, the example reader
#   tallystat          one report since start (text), and -o JSON
#   tallystat 1 2      a since-start report, one interval (the previous
#                      values kept for rates) and the Average: rows, in
#                      text and -o JSON
#   tally-exporter     one scrape of /metrics by a fresh process (gzip
#                      off), its peak after the scrape; and with
#                      --aggregate (the writers share their series:
#                      N/8 sums of 8 processes' series each)
# BASE_EXPORTER=<path> adds the rows of another build's exporter (the
# branch point, say), measured in the same run.
# The reports are checked, not only timed: each must hold the N series
# (exact count of tw_many_total lines, or exporter samples).  The host's
# CPU and load are printed first; timings are noisy on a busy machine,
# bytes per series are not.  A last line "SUMMARY" holds every figure.
# BASE=path/to/another/tallystat adds its rows (one report, text and
# JSON; 1 2, text and JSON), measured in the same run (the figures of a
# build to compare with).
set -u
n=${1:-1000000}
build=${2:-${BUILD:-build}}
runs=${RUNS:-3}
writers=8
cd "$(dirname "$0")/.."
. tools/listen.sh

die() { echo "readers-memory: $*" >&2; exit 1; }
case "$n" in ''|*[!0-9]*) die "N must be a number, got '$n'" ;; esac
[ "$n" -ge "$writers" ] || die "N must be at least $writers"
writer=$build/programs/tallystat/tests/tallystat-writer
tallystat=$build/programs/tallystat/tallystat
dump=$build/examples/tally-dump
exporter=$build/programs/tally-exporter/tally-exporter
for b in "$writer" "$tallystat" "$dump"; do
	[ -x "$b" ] || die "$b not built (cmake --build $build)"
done
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (apt-get install time)"

work=$(mktemp -d /dev/shm/readers-memory.XXXXXX) || die "mktemp failed"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 700 "$work"
full=$work/full
empty=$work/empty
mkdir -m 700 "$full" "$empty"

# The writers: each holds N/8 series (the last one the rest) until killed.
per=$((n / writers))
start=$(date +%s.%N)
for ((w = 0; w < writers; w++)); do
	m=$per
	[ $w -eq $((writers - 1)) ] && m=$((n - per * (writers - 1)))
	TALLY_DIR=$full "$writer" --zone bench$w --comm bench-w$w --many "$m" \
		--seconds 86400 >"$work/ready.$w" &
	pids+=($!)
done
for ((w = 0; w < writers; w++)); do
	for ((i = 0; i < 6000; i++)); do
		grep -q '^ready' "$work/ready.$w" 2>/dev/null && break
		kill -0 "${pids[$w]}" 2>/dev/null || die "writer $w failed"
		sleep 0.05
	done
	grep -q '^ready' "$work/ready.$w" || die "writer $w not ready"
done
filled=$(echo "$(date +%s.%N) - $start" | bc)
shm_kib=$(du -sk "$full" | cut -f1)

# Median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# One run of a command under /usr/bin/time: "<peak KiB> <seconds>" on
# stdout; the command's output in $work/out.
timed() {
	/usr/bin/time -f '%M %e' -o "$work/time" "$@" >"$work/out" 2>"$work/err" ||
		{ cat "$work/err" >&2; die "$* failed"; }
	cat "$work/time"
}

# The exporter: a fresh process, one scrape, then its peak.
# scrape EXPORTER DIR ARGS...
scrape() {
	local bin=$1 dir=$2 port p kib t
	shift 2
	# Port 0: the kernel's choice, read from the log (tools/listen.sh),
	# never one that another program may take meanwhile.
	"$bin" --listen 127.0.0.1:0 --dir "$dir" "$@" 2>"$work/err" &
	p=$!
	port=$(listen_port "$work/err" "$p") ||
		{ cat "$work/err" >&2; kill $p 2>/dev/null; die "tally-exporter did not start"; }
	t=$(curl -s -o "$work/out" -w '%{time_total}' "http://127.0.0.1:$port/metrics") ||
		{ kill $p; die "the scrape failed"; }
	kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$p/status")
	kill $p
	wait $p 2>/dev/null
	echo "$kib $t"
}

# How many of the bench's series a reader's output holds.
count_series() { grep -c '^[^#]*tw_many_total' "$work/out"; }

# measure NAME WANT CMD...: RUNS runs on each directory; prints the row.
# WANT: the tw_many_total lines the output must hold at N series.
summary="SUMMARY readers-memory series=$n"
measure() {
	local name=$1 want=$2 e f es fs k ts got
	shift 2
	for ((r = 0; r < runs; r++)); do
		if [ "$1" = scrape ]; then
			scrape "$2" "$empty" "${@:3}" >>"$work/e"
			scrape "$2" "$full" "${@:3}" >>"$work/f"
		else
			TALLY_DIR=$empty timed "$@" --dir "$empty" >>"$work/e"
			TALLY_DIR=$full timed "$@" --dir "$full" >>"$work/f"
		fi
		got=$(count_series)
		[ "$got" -eq "$want" ] ||
			die "$name: $got lines of the bench's series, not $want"
	done
	e=$(cut -d' ' -f1 "$work/e" | median)
	f=$(cut -d' ' -f1 "$work/f" | median)
	ts=$(cut -d' ' -f2 "$work/f" | median)
	k=$(echo "($f - $e) * 1024 / $n" | bc)
	printf '%-28s %10s %10s %8s %8s\n' "$name" "$e" "$f" "$k" "$ts"
	summary="$summary $(echo "$name" | tr -c 'a-zA-Z0-9\n' _)_bps=$k"
	rm -f "$work/e" "$work/f"
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo "CPU: ${cpu:-unknown} ($(nproc) CPUs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$n series in $writers processes ($shm_kib KiB in /dev/shm), written in $(printf %.1f "$filled") s; medians of $runs runs"
printf '%-28s %10s %10s %8s %8s\n' reader "empty KiB" "peak KiB" "B/series" seconds
measure "tally-dump" "$n" "$dump"
measure "tallystat" "$n" "$tallystat"
measure "tallystat -o JSON" "$n" "$tallystat" -o JSON
measure "tallystat 1 2 (rates)" "$((3 * n))" "$tallystat" 1 2
measure "tallystat 1 2 -o JSON" "$((3 * n))" "$tallystat" 1 2 -o JSON
if [ -n "${BASE:-}" ]; then
	[ -x "$BASE" ] || die "BASE=$BASE is not an executable"
	measure "base tallystat" "$n" "$BASE"
	measure "base tallystat -o JSON" "$n" "$BASE" -o JSON
	measure "base tallystat 1 2 (rates)" "$((3 * n))" "$BASE" 1 2
	measure "base tallystat 1 2 -o JSON" "$((3 * n))" "$BASE" 1 2 -o JSON
fi
if [ -x "$exporter" ] && command -v curl >/dev/null; then
	measure "tally-exporter scrape" "$n" scrape "$exporter"
	# --aggregate: the writers share their series, so the body holds
	# the last writer's (the most): one sum per series.
	measure "tally-exporter --aggregate" "$((n - per * (writers - 1)))" \
		scrape "$exporter" --aggregate
	# BASE_EXPORTER: another build's exporter, measured in the same run.
	if [ -n "${BASE_EXPORTER:-}" ]; then
		measure "base exporter scrape" "$n" scrape "$BASE_EXPORTER"
		measure "base exporter --aggregate" \
			"$((n - per * (writers - 1)))" scrape "$BASE_EXPORTER" \
			--aggregate
	fi
fi
echo "$summary"
