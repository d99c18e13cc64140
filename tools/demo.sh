#!/usr/bin/env bash
# tools/demo.sh BUILD_DIR: what `make demo` shows, in under a minute.
#
# 1. examples/queue-service runs for 5 s: worker threads serving queues fed
#    by an acceptor that opens and closes connections, counting everything
#    with tally in a segment file in shared memory;
# 2. examples/tally-dump, another process, reads that file twice while the
#    service runs: values grow, per-connection series come and go;
# 3. the service exits and prints its own totals; its file is gone;
# 4. a second, short run with TALLY_KEEP=1 leaves its file behind, and what
#    a reader finds in it must equal the totals the service counted itself
#    (requests, bytes, histogram count; nothing in flight, no connection);
# 5. the counter benchmark's quick mode, when bench/tally-bench is built.
#
# Everything happens in a private $TALLY_DIR under /dev/shm, removed at the
# end.  Exits non-zero if any step fails.
set -eEuo pipefail
trap 'echo "demo: FAILED: line $LINENO: $BASH_COMMAND" >&2' ERR

build=${1:?usage: tools/demo.sh BUILD_DIR}
. "$(dirname "$0")/listen.sh"
svc=$build/examples/queue-service
dump=$build/examples/tally-dump
bench=$build/bench/tally-bench

fail() { echo "demo: FAILED: $*" >&2; exit 1; }
heading() { printf '\n== %s\n' "$*"; }

for b in "$svc" "$dump"; do
	[ -x "$b" ] || fail "$b is not built (is add_subdirectory(examples) in CMakeLists.txt?)"
done

dir=$(mktemp -d /dev/shm/tally-demo.XXXXXX)
chmod 700 "$dir"
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export TALLY_DIR=$dir
unset TALLY_KEEP

# Helpers over tally-dump's text output: "  KIND  NAME{LABELS}  VALUE ...".
value() { # KEY FILE: the value of one series
	awk -v k="$1" '$2 == k { v = $3 } END { print (v == "" ? "missing" : v) }' "$2"
}
family_sum() { # NAME FILE: the sum of a family's series
	awk -v n="$1{" 'index($2, n) == 1 { s += $3; f = 1 } END { print (f ? s : "missing") }' "$2"
}
hist_count() { # KEY FILE
	awk -v k="$1" '$2 == k { sub(/^count=/, "", $3); v = $3 } END { print (v == "" ? "missing" : v) }' "$2"
}
conns() { # FILE: the connection series, one per line
	awk 'index($2, "connection_requests_total{") == 1 { print $2 }' "$1" | sort
}
show() { # FILE: a dump, with the connection series cut short
	local n
	n=$(conns "$1" | wc -l)
	grep -v 'connection_requests_total{' "$1" || true
	if [ "$n" -gt 0 ]; then
		echo "  ... and $n connection_requests_total series, for example:"
		grep 'connection_requests_total{' "$1" | head -3 || true
	else
		echo "  (no connection_requests_total series)"
	fi
}
total() { # FIELD FILE: a number from the service's "totals" line
	sed -n "s/.*totals.* $1=\([0-9]*\).*/\1/p" "$2"
}
wait_started() { # PID OUTPUT: wait for its first line (printed once its
	# segment exists), print the segment's path
	local f
	for _ in $(seq 50); do
		f=$(ls "$dir"/queue-service."$1".*.tally 2>/dev/null | head -1)
		grep -q ' segment ' "$2" && [ -n "$f" ] && { echo "$f"; return 0; }
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	cat "$2" >&2
	fail "queue-service (pid $1) did not start"
}

heading "1. queue-service for 5 s: an acceptor thread opens/closes connections and queues requests to 2 workers (eventfd + epoll)"
"$svc" --threads 2 --seconds 5 >"$dir/run1.out" 2>&1 &
pid=$!
seg=$(wait_started "$pid" "$dir/run1.out")
head -1 "$dir/run1.out"

heading "2. tally-dump --pid $pid, from another process, while the service runs"
sleep 1.5
"$dump" --pid "$pid" >"$dir/dump1.txt" || fail "tally-dump (first look)"
show "$dir/dump1.txt"

heading "   2 s later"
sleep 2
"$dump" --pid "$pid" >"$dir/dump2.txt" || fail "tally-dump (second look)"
show "$dir/dump2.txt"
r1=$(family_sum requests_total "$dir/dump1.txt")
r2=$(family_sum requests_total "$dir/dump2.txt")
conns "$dir/dump1.txt" >"$dir/c1"
conns "$dir/dump2.txt" >"$dir/c2"
echo "  -> requests_total (all queues): $r1 -> $r2;" \
	"connection series: $(comm -23 "$dir/c1" "$dir/c2" | wc -l) closed," \
	"$(comm -13 "$dir/c1" "$dir/c2" | wc -l) opened," \
	"$(comm -12 "$dir/c1" "$dir/c2" | wc -l) still open"
[ "$r1" != missing ] && [ "$r2" -gt "$r1" ] || fail "requests_total did not grow"
[ "$(comm -3 "$dir/c1" "$dir/c2" | wc -l)" -gt 0 ] || fail "the connection series did not change"

heading "3. the service exits with its own totals (counted in plain variables)"
rc=0
wait "$pid" || rc=$?
pid=
sed 1d "$dir/run1.out"
[ "$rc" = 0 ] || fail "queue-service exited with status $rc"
if [ -e "$seg" ]; then fail "$seg is still there after a normal exit"; fi
echo "  -> its segment file was removed at exit (TALLY_KEEP unset)"

heading "4. TALLY_KEEP=1, 2 s: the file outlives the process; does the reader agree with the service?"
TALLY_KEEP=1 "$svc" --threads 2 --seconds 2 >"$dir/run2.out" 2>&1 &
pid=$!
rc=0
wait "$pid" || rc=$?
p2=$pid
pid=
cat "$dir/run2.out"
[ "$rc" = 0 ] || fail "queue-service (second run) exited with status $rc"
"$dump" --pid "$p2" >"$dir/dump3.txt" || fail "tally-dump after exit"
show "$dir/dump3.txt"
grep -q ", dead," "$dir/dump3.txt" || fail "the reader does not see the creator as dead"

ok=1
check() { # WHAT SERVICE READER
	local mark=ok
	[ "$2" = "$3" ] || { mark="MISMATCH"; ok=0; }
	printf '  %-46s %14s %14s   %s\n' "$1" "$2" "$3" "$mark"
}
req=$(total requests "$dir/run2.out")
[ -n "$req" ] || fail "no totals line from queue-service"
printf '\n  %-46s %14s %14s\n' "" "service" "reader"
check "requests: completed == sum of requests_total" "$req" \
	"$(family_sum requests_total "$dir/dump3.txt")"
check "bytes: completed == sum of bytes_total" "$(total bytes "$dir/run2.out")" \
	"$(family_sum bytes_total "$dir/dump3.txt")"
check "requests == request_duration_ns count" "$req" \
	"$(hist_count request_duration_ns "$dir/dump3.txt")"
check "requests_in_flight at the end" 0 "$(value requests_in_flight "$dir/dump3.txt")"
check "connections_open at the end" 0 "$(value connections_open "$dir/dump3.txt")"
check "connection series left (opened - closed)" \
	$(($(total connections_opened "$dir/run2.out") - $(total connections_closed "$dir/run2.out"))) \
	"$(conns "$dir/dump3.txt" | wc -l)"
[ "$ok" = 1 ] || fail "the reader's values differ from the service's totals"

heading "   tally-exporter on the same file: base units (integer ns shown as seconds), and promtool check metrics"
exporter=$build/programs/tally-exporter/tally-exporter
if [ -x "$exporter" ] && command -v curl >/dev/null; then
	"$exporter" --listen 127.0.0.1:0 2>"$dir/exporter.log" &
	pid=$!
	port=$(listen_port "$dir/exporter.log" "$pid") ||
		fail "tally-exporter did not start"
	curl -sS --max-time 10 "http://127.0.0.1:$port/metrics" >"$dir/metrics.txt" ||
		fail "scraping tally-exporter"
	kill "$pid"; wait "$pid" 2>/dev/null || true
	pid=
	grep -E '^(# TYPE request_duration|request_duration_seconds_(bucket\{.*le="0.000[0-9]*"|sum|count))' \
		"$dir/metrics.txt" | sed -n '1p;10,12p;$p'
	if command -v promtool >/dev/null; then
		out=$(promtool check metrics <"$dir/metrics.txt" 2>&1) ||
			{ echo "$out"; fail "promtool check metrics"; }
		[ -z "$out" ] || { echo "$out"; fail "promtool check metrics printed hints"; }
		echo "  -> promtool check metrics: nothing to say"
	else
		echo "  (promtool not installed: not checked)"
	fi
else
	echo "  (skipped: $exporter is not built, or no curl)"
fi
rm -f "$dir"/queue-service."$p2".*.tally

heading "5. tally-bench counter --quick"
if [ -x "$bench" ]; then
	timeout 40 "$bench" counter --quick || fail "tally-bench counter --quick"
else
	echo "  (skipped: $bench is not built)"
fi

# Each program shows itself: programs/<name>/demo.sh BUILD, if it has one.
step=6
for d in programs/*/; do
	[ -x "$d/demo.sh" ] || continue
	heading "$step. $(basename "$d")"
	"$d/demo.sh" "$build" || fail "$(basename "$d") demo"
	step=$((step + 1))
done

heading "demo: all steps passed"
