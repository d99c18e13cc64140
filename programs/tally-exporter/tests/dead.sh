#!/usr/bin/env bash
# exporter-dead: a gauge of a process that is gone is never exported as a
# current value; counters and histograms stay.
#   - Own zones: of two workers, one is killed with SIGKILL.  Its gauge is
#     left out, its counter and histogram are still exported (post-mortem,
#     never backwards); --aggregate sums the live worker's gauge only.
#   - A shared zone: one of two workers is killed.  The zone's own gauge
#     stays (the zone is alive, and holds the killed worker's +1, as
#     documented).  Its float gauges named "<n>:gauge_livesum" and
#     "<n>:gauge_all" with a label pid="<pid>:<start>" (what the Python
#     package of 0.3 named a per-process gauge) are plain gauges of a
#     zone of 2.6 or later: no name makes a series per-process (the
#     format's per-process gauges say so in their record), so the killed
#     worker's series stay while the zone lives.  Once both are killed,
#     the zone's gauges go, all of them.
#   - A zone whose creator is gone while a child it forked still updates
#     it: alive, not dead; its gauge is exported and the child's adds
#     counted.  Once the child is killed, the gauge goes.
. "$(dirname "$0")/lib.sh"

unset TALLY_RETAIN
t=$dir/out.txt

start_writer worker 1000 60; a=$writer_pid
start_writer worker 234 60; b=$writer_pid
kill -KILL "$a"
wait "$a" 2>/dev/null || true

start_exporter
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -q "^worker_up{pid=\"$b\"[^}]*} 1\$" "$t" || fail "the live worker's gauge is missing: $(grep worker_up "$t")"
if grep -q "^worker_up{pid=\"$a\"" "$t"; then
	fail "the killed worker's gauge is exported as current: $(grep "^worker_up{pid=\"$a\"" "$t")"
fi
grep -q "^worker_requests_total{pid=\"$a\"[^}]*} 1000\$" "$t" || fail "the killed worker's counter is gone"
grep -q "^worker_latency_ns_count{pid=\"$a\"[^}]*} 1001\$" "$t" || fail "the killed worker's histogram is gone"
stop "$exporter_pid"
ok "own zones: the killed worker's gauge left out, its counter and histogram kept"

start_exporter --aggregate
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -qx 'worker_up 1' "$t" || fail "aggregate gauge, want 1 (live only): $(grep '^worker_up' "$t")"
grep -qx 'worker_requests_total 1234' "$t" || fail "aggregate counter, want 1234: $(grep '^worker_requests_total' "$t")"
stop "$exporter_pid"
stop "$b"
ok "--aggregate: the gauge sums the live worker only, the counter both"

rm -f "$dir"/*.tally
export TALLY_ZONE=pool
start_writer pooled 60; p=$writer_pid
start_writer pooled 60; q=$writer_pid
kill -KILL "$p"
wait "$p" 2>/dev/null || true
start_exporter
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -q '^pool_busy{.*} 2$' "$t" || fail "the live zone's own gauge, want 2: $(grep '^pool_busy' "$t")"
for w in "$p" "$q"; do
	grep -q "^pool_conns:gauge_livesum{pid=\"$w:[0-9]*\"[^}]*} 10\$" "$t" ||
		fail "a gauge named :gauge_livesum is not a plain gauge: $(grep gauge_livesum "$t")"
done
[ "$(grep -c '^pool_seen:gauge_all{' "$t")" = 2 ] || fail "a gauge named :gauge_all is not a plain gauge: $(grep gauge_all "$t")"
kill -KILL "$q"
wait "$q" 2>/dev/null || true
scrape "http://127.0.0.1:$port/metrics" >"$t"
if grep -q '^pool_' "$t"; then
	fail "gauges of a zone nobody uses are exported: $(grep '^pool_' "$t")"
fi
grep -qx 'tally_exporter_dead_segments 1' "$t" || fail "the dead zone is not counted"
stop "$exporter_pid"
ok "shared zone: names with ':' are plain gauges, kept while the zone lives; its gauges go with its last process"

rm -f "$dir"/*.tally
unset TALLY_ZONE
start_writer forked 300 60
read -r _ creator child <"$writer_out"
pids+=("$child")
wait "$creator" 2>/dev/null || true   # gone already: the child saw it
start_exporter
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -q "^worker_up{pid=\"$creator\"[^}]*} 1\$" "$t" ||
	fail "the gauge of a zone a forked child still uses is hidden: $(grep '^worker_up' "$t")"
grep -q "^worker_requests_total{pid=\"$creator\"[^}]*} 600\$" "$t" ||
	fail "the child's adds, want 600: $(grep '^worker_requests_total' "$t")"
grep -qx 'tally_exporter_dead_segments 0' "$t" ||
	fail "a zone in use counted dead: $(grep '^tally_exporter_dead' "$t")"
kill -KILL "$child"
# Not this shell's child (reparented, perhaps a zombie a while): its
# locks go with it; scrape until the exporter sees that, at most 10 s.
for _ in $(seq 200); do
	scrape "http://127.0.0.1:$port/metrics" >"$t"
	grep -qx 'tally_exporter_dead_segments 1' "$t" && break
	sleep 0.05
done
if grep -q '^worker_up' "$t"; then
	fail "the gauge of a zone nobody uses is exported: $(grep '^worker_up' "$t")"
fi
grep -q "^worker_requests_total{pid=\"$creator\"[^}]*} 600\$" "$t" ||
	fail "the counter after the child's death: $(grep '^worker_requests_total' "$t")"
grep -qx 'tally_exporter_dead_segments 1' "$t" || fail "the dead zone is not counted"
stop "$exporter_pid"
ok "creator gone, forked child writing: its gauge exported and its adds counted until the child dies"
