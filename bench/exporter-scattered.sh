#!/usr/bin/env bash
# The exporter's scrape over series that lie together in their segments
# and over series scattered among other metrics' series, for several
# exporter binaries in the same run.
#
#   bench/exporter-scattered.sh [BUILD] NAME=EXPORTER...
#
# Two layouts, each written by processes of BUILD's exporter test writer
# into a directory of their own under /dev/shm:
#   sequential   SEQ (default 8x125000): processes x series of one
#                metric each (testwriter many), a metric's records one
#                after the other;
#   interleaved  SPREAD (default 4x200000): processes x series of ten
#                metrics (nine counters and a histogram) registered label
#                set by label set (testwriter spread), so that a metric's
#                records are every tenth.
# Every exporter (NAME=path; the first is the baseline) is started on
# 127.0.0.1:0 over the layout and scraped RUNS times (default 5), the
# exporters in turn, gzip off: the CPU time the exporter process spent
# on the scrape (utime + stime from /proc/<pid>/stat) and the wall time
# of curl.  Each scrape must hold every series (exact count of counter
# samples and histogram counts), or the run fails.  One row per layout
# and exporter: the medians and their ratios to the baseline's.  The host's CPU and load come first;
# times are noisy on a busy machine, the ratios less so.
set -u
cd "$(dirname "$0")/.."
die() { echo "exporter-scattered: $*" >&2; exit 1; }

build=build
case "${1:-}" in *=*|'') ;; *) build=$1; shift ;; esac
[ $# -ge 1 ] || die "usage: $0 [BUILD] NAME=EXPORTER..."
runs=${RUNS:-5}
writer=$build/programs/tally-exporter/tests/exporter-testwriter
[ -x "$writer" ] || die "$writer not built (cmake --build $build)"
names=() paths=()
for a in "$@"; do
	case "$a" in *=*) ;; *) die "expected NAME=EXPORTER, got '$a'" ;; esac
	[ -x "${a#*=}" ] || die "${a#*=} is not an executable"
	names+=("${a%%=*}") paths+=("${a#*=}")
done
. tools/listen.sh
tck=$(getconf CLK_TCK)

work=$(mktemp -d /dev/shm/exporter-scattered.XXXXXX) || die "mktemp failed"
chmod 700 "$work"
pids=()
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# The CPU seconds process $1 has used.
cpu() { awk -v t="$tck" '{ sub(/^.*\) /, ""); print ($12 + $13) / t }' "/proc/$1/stat"; }

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)," \
     "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# ready FILE PID: 0 once the writer PID said "ready" in FILE (at most
# 300 s), 1 when it exited before.
ready() {
	local _
	for _ in $(seq 6000); do
		grep -q '^ready' "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# bench LAYOUT MODE PROCSxSERIES: one layout, every exporter.
bench() {
	local layout=$1 mode=$2 procs=${3%x*} per=${3#*x} dir=$work/$1
	local total=$((procs * per)) ports=() epids=() wpids=() i r w port
	mkdir -m 700 "$dir"
	for ((w = 0; w < procs; w++)); do
		TALLY_DIR=$dir TALLY_ZONE_SERIES=$((per + 64)) \
			"$writer" "$mode" "$per" 86400 >"$dir/ready.$w" &
		pids+=($!) wpids+=($!)
	done
	for ((w = 0; w < procs; w++)); do
		ready "$dir/ready.$w" "${wpids[$w]}" || die "writer $w failed"
	done
	for ((i = 0; i < ${#paths[@]}; i++)); do
		: >"$dir/exporter.$i.log"
		TALLY_DIR=$dir "${paths[$i]}" --listen 127.0.0.1:0 \
			2>"$dir/exporter.$i.log" &
		epids+=($!) pids+=($!)
		port=$(listen_port "$dir/exporter.$i.log" $!) ||
			die "${names[$i]} did not start"
		ports+=("$port")
	done
	for ((r = 0; r < runs; r++)); do
		for ((i = 0; i < ${#paths[@]}; i++)); do
			local c0 c1 wall got
			c0=$(cpu "${epids[$i]}")
			wall=$(curl -s -o "$dir/body" -w '%{time_total}' \
				"http://127.0.0.1:${ports[$i]}/metrics") ||
				die "${names[$i]}: scrape failed"
			c1=$(cpu "${epids[$i]}")
			got=$(grep -c '^\(many_\|spread_[0-8]_total\|spread_9_count\)' \
				"$dir/body")
			[ "$got" -eq "$total" ] ||
				die "${names[$i]}: $got samples, not $total"
			echo "$c0 $c1" | awk '{ print $2 - $1 }' >>"$dir/cpu.$i"
			echo "$wall" >>"$dir/wall.$i"
		done
	done
	local bc bw c wl
	for ((i = 0; i < ${#paths[@]}; i++)); do
		c=$(median <"$dir/cpu.$i") wl=$(median <"$dir/wall.$i")
		[ "$i" -eq 0 ] && bc=$c bw=$wl
		printf '%-12s %-10s %9d series  cpu %6.3f s (x%.2f)  wall %6.3f s (x%.2f)\n' \
			"$layout" "${names[$i]}" "$total" "$c" \
			"$(echo "$c $bc" | awk '{ print ($2 > 0 ? $1 / $2 : 0) }')" \
			"$wl" "$(echo "$wl $bw" | awk '{ print ($2 > 0 ? $1 / $2 : 0) }')"
		summary+=" $layout.${names[$i]}.cpu=$c $layout.${names[$i]}.wall=$wl"
	done
	stop_all
	rm -rf "$dir"
}

summary=
bench sequential many "${SEQ:-8x125000}"
bench interleaved spread "${SPREAD:-4x200000}"
echo "SUMMARY runs=$runs$summary"
