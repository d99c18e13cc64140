#!/usr/bin/env bash
# exporter-incarnations: never two samples with the same labels.  Two
# segments of one pid, process and zone are incarnations of one process
# as Prometheus sees it (a container's pid 1 restarted after a crash, or
# a pid reused): the live one speaks for the label set, else the one
# created last; every scrape parses with promtool and holds no two
# samples alike.
#   - Without root: a dead copy of a live writer's segment (the same pid,
#     process and zone, nobody holding its locks) next to it.
#   - As root: a writer run as pid 1 of a PID namespace, SIGKILLed, then
#     another pid 1 (other series) live next to its dead segment, then
#     killed too: the newer dead one speaks, whole: no series of the
#     first stays under the labels of pid 1.
. "$(dirname "$0")/lib.sh"

unset TALLY_RETAIN
t=$dir/out.txt

# no_duplicates FILE: every sample (name and labels) once, and promtool
# takes the exposition.
no_duplicates() {
	local d rc=0 out
	d=$(grep -v '^#' "$1" | sed 's/ [^ ]*$//' | sort | uniq -d)
	[ -z "$d" ] || fail "samples with the same labels: $(echo "$d" | head -5)"
	command -v promtool >/dev/null || return 0
	# Status 3 is lint hints (units, help); 1 is an exposition it
	# cannot parse.
	out=$(timeout 30 promtool check metrics <"$1" 2>&1) || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 3 ] || fail "promtool check metrics: status $rc: $out"
	echo "$out" | grep -i 'error' && fail "promtool reported errors"
	return 0
}

start_writer worker 222 60; w=$writer_pid
seg=$(ls "$dir"/*."$w".*.tally)
cp -p "$seg" "${seg%.*.tally}.00000000deadbeef.tally"
start_exporter
scrape "http://127.0.0.1:$port/metrics" >"$t"
no_duplicates "$t"
[ "$(grep -c '^tally_segment_resident_bytes{' "$t")" = 1 ] ||
	fail "tally_segment_resident_bytes, want one sample: $(grep '^tally_segment_resident_bytes' "$t")"
grep -q "^worker_up{pid=\"$w\"[^}]*} 1\$" "$t" || fail "the live gauge is missing: $(grep '^worker_up' "$t")"
grep -qx 'tally_exporter_dead_segments 1' "$t" || fail "the dead copy is not counted as dead"
stop "$exporter_pid"
stop "$w"
rm -f "$dir"/*.tally
ok "a dead segment with a live one's labels: one sample per label set, the live one's"

[ "$(id -u)" = 0 ] || { echo "skipped: the pid-1 part needs root (unshare --pid)"; exit 0; }
command -v unshare >/dev/null || fail "unshare (util-linux) not installed"

# as_pid1 ARGS...: the test writer as pid 1 of a new PID namespace;
# sets $ns_pid (unshare's pid) and $pid1 (the writer, as seen here),
# which the test's end kills if it still runs: unshare --fork waits for
# its child and ignores SIGTERM.
pid1=
trap '[ -z "$pid1" ] || kill -KILL "$pid1" 2>/dev/null; cleanup' EXIT
as_pid1() {
	local out=$dir/pid1.$RANDOM.out
	unshare --pid --fork --kill-child -- "$WRITER" "$@" >"$out" 2>&1 &
	ns_pid=$!
	pids+=($ns_pid)
	for _ in $(seq 100); do
		pid1=$(cat /proc/"$ns_pid"/task/"$ns_pid"/children 2>/dev/null || true)
		pid1=${pid1%% *}
		[ -s "$out" ] && [ -n "$pid1" ] && return 0
		sleep 0.05
	done
	cat "$out" >&2
	fail "the writer (pid 1) did not start"
}
# kill_pid1: SIGKILL the pid 1 of $ns_pid's namespace (its only
# process), and wait for unshare.
kill_pid1() {
	kill -KILL "$pid1"
	wait "$ns_pid" 2>/dev/null || true
	pid1=
}

as_pid1 fixture 60; kill_pid1
as_pid1 worker 333 60
[ "$(ls "$dir"/*.1.*.tally | wc -l)" = 2 ] || fail "want two segments of pid 1: $(ls "$dir")"
start_exporter
scrape "http://127.0.0.1:$port/metrics" >"$t"
no_duplicates "$t"
grep -qx 'worker_requests_total{pid="1",process="exporter-testwr"} 333' "$t" ||
	fail "the live pid 1 does not speak: $(grep '^worker_requests_total' "$t")"
grep -q '^worker_up{pid="1"[^}]*} 1$' "$t" || fail "the live pid 1's gauge is missing"
grep -q '^fixture_' "$t" && fail "a series of the dead pid 1 is exported: $(grep -m1 '^fixture_' "$t")"
[ "$(grep -c '^tally_segment_resident_bytes{pid="1"' "$t")" = 1 ] ||
	fail "tally_segment_resident_bytes of pid 1, want one sample"
ok "a dead and a live pid 1 of one zone: one sample per label set, the live one's (333)"
kill_pid1
scrape "http://127.0.0.1:$port/metrics" >"$t"
no_duplicates "$t"
grep -qx 'worker_requests_total{pid="1",process="exporter-testwr"} 333' "$t" ||
	fail "the newer dead pid 1 does not speak: $(grep '^worker_requests_total' "$t")"
grep -q '^worker_up' "$t" && fail "a dead gauge is exported"
grep -q '^fixture_' "$t" && fail "a series of the older dead pid 1 is exported"
grep -qx 'tally_exporter_dead_segments 2' "$t" || fail "want two dead segments counted"
stop "$exporter_pid"
ok "two dead pid 1s of one zone: the one created last speaks (333)"
