#!/usr/bin/env bash
# exporter-aggregate: --aggregate never goes backwards.  Two workers (the
# same series, 1000 and 234 requests) are summed; one exits and its
# segment is removed (TALLY_KEEP unset): the summed counter and histogram
# stay exactly what they were, the gauge drops to the live worker's.  A
# new worker adds to the retired total; when every worker is gone the
# series is still exported with its total.
. "$(dirname "$0")/lib.sh"

start_exporter --aggregate
base=http://127.0.0.1:$port/metrics
t=$dir/out.txt
get() { scrape "$base" >"$t"; }
val() { # series-regexp: its value, or "" when absent
	awk -v re="^$1 " '$0 ~ re { print $NF }' "$t"
}
expect() { # series-regexp want what
	local got
	got=$(val "$1")
	[ "$got" = "$2" ] || fail "$3: $1 = '$got', want $2"
}
gone() { # pid: stop the worker; once it exited, its segment must go
	kill -TERM "$1"
	wait "$1" 2>/dev/null || true   # it exits at once on SIGTERM
	# Normally removed at exit (TALLY_KEEP is unset); a reader's clean-up
	# removes what a dead worker left (the crash case).
	"$WRITER" cleanup >/dev/null || fail "tally_dir_cleanup failed"
	! ls "$dir"/*."$1".*.tally >/dev/null 2>&1 || fail "worker $1: its segment stayed"
}

start_writer worker 1000 60; a=$writer_pid
start_writer worker 234 60; b=$writer_pid
get
expect 'worker_requests_total' 1234 "two workers"
expect 'worker_latency_ns_count' 1236 "histogram count"
expect 'worker_latency_ns_sum' $((1234 * 5000 + 1000 + 234)) "histogram sum"
expect 'worker_latency_ns_bucket\{le="8191"\}' 1236 "bucket le=8191"
expect 'worker_latency_ns_bucket\{le="127"\}' 0 "bucket le=127"
expect 'worker_latency_ns_bucket\{le="255"\}' 1 "bucket le=255 (234)"
expect 'worker_latency_ns_bucket\{le="1023"\}' 2 "bucket le=1023 (234, 1000)"
expect 'worker_up' 2 "gauge, two live workers"
grep -q 'pid=' "$t" && grep -q '^worker_requests_total{' "$t" && fail "pid labels in aggregate mode"
first=$(val worker_requests_total)
ok "two workers summed: requests 1234, latency count 1236, up 2"

gone "$a"
get
second=$(val worker_requests_total)
[ "$second" -ge "$first" ] || fail "the aggregate went backwards: $first -> $second"
expect 'worker_requests_total' 1234 "after worker 1 exited"
expect 'worker_latency_ns_count' 1236 "histogram count after exit"
expect 'worker_latency_ns_sum' $((1234 * 5000 + 1000 + 234)) "histogram sum after exit"
expect 'worker_latency_ns_bucket\{le="1023"\}' 2 "bucket le=1023 (234, and 1000 of the exited worker)"
expect 'worker_latency_ns_bucket\{le="\\+Inf"\}' 1236 "+Inf after exit"
expect 'worker_up' 1 "gauge: live workers only"
expect 'tally_exporter_retired_segments_total' 1 "retired segments"
expect 'tally_exporter_segments_read' 1 "segments read"
ok "worker $a exited, segment removed: requests $first -> $second, exact; up 1"

start_writer worker 10 60; c=$writer_pid
get
expect 'worker_requests_total' 1244 "a new worker adds to the retired total"
expect 'worker_up' 2 "gauge with the new worker"
gone "$b"; gone "$c"
get
expect 'worker_requests_total' 1244 "every worker gone"
expect 'worker_latency_ns_count' 1247 "histogram count, every worker gone"
expect 'tally_exporter_retired_segments_total' 3 "retired segments"
[ -z "$(val worker_up)" ] || fail "a gauge of exited workers is still exported: $(val worker_up)"
# Retired values are per series, not per process.
expect 'tally_exporter_retired_series' 2 "retired series (counter + histogram)"
ok "all workers gone: requests 1244 still exported, gauge gone"

# The same in OpenMetrics (Prometheus's default), and promtool's view.
scrape -H 'Accept: application/openmetrics-text;version=1.0.0' "$base" >"$t"
expect 'worker_requests_total' 1244 "OpenMetrics"
stop "$exporter_pid"
ok "SIGTERM"
