#!/usr/bin/env bash
# exporter-retain: dead writers' segments.  Two writers are killed with
# SIGKILL: the exporter reports what their segments hold
# (tally_exporter_dead_segments, tally_exporter_dead_segment_bytes, equal
# to the files' st_blocks * 512) and, under the default TALLY_RETAIN,
# keeps them for post-mortem reading (their values are still exported).
# With TALLY_RETAIN=0 its first scrape removes them; a bad TALLY_RETAIN
# stops it at start, naming the variable.
. "$(dirname "$0")/lib.sh"

unset TALLY_RETAIN
start_writer worker 1000 60; a=$writer_pid
start_writer worker 234 60; b=$writer_pid
kill -KILL "$a" "$b"
wait "$a" "$b" 2>/dev/null || true
bytes=0
for f in "$dir"/*.tally; do
	bytes=$((bytes + $(stat -c '%b * %B' "$f")))
done
[ "$bytes" -gt 0 ] || fail "no dead segment to report"

start_exporter
t=$dir/out.txt
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -qx 'tally_exporter_dead_segments 2' "$t" || fail "dead segments: $(grep dead_segments "$t")"
grep -qx "tally_exporter_dead_segment_bytes $bytes" "$t" ||
	fail "dead bytes, want $bytes: $(grep dead_segment_bytes "$t")"
grep -qx '# TYPE tally_exporter_dead_segment_bytes gauge' "$t" || fail "TYPE of dead bytes"
grep -q "^worker_requests_total{pid=\"$a\"" "$t" || fail "the dead writer's values (post-mortem) are gone"
[ "$(ls "$dir"/*.tally | wc -l)" = 2 ] || fail "the default retention removed segments"
stop "$exporter_pid"
ok "2 dead segments reported, $bytes bytes, kept by the default retention"

TALLY_RETAIN=0 start_exporter
scrape "http://127.0.0.1:$port/metrics" >"$t"
! ls "$dir"/*.tally >/dev/null 2>&1 || fail "TALLY_RETAIN=0: dead segments stayed"
grep -qx 'tally_exporter_dead_segments 0' "$t" || fail "dead segments after removal"
grep -qx 'tally_exporter_dead_segment_bytes 0' "$t" || fail "dead bytes after removal"
grep -q "removed $dir/.*: its processes are gone" "$exporter_log" || fail "removals not logged"
stop "$exporter_pid"
ok "TALLY_RETAIN=0: removed at the first scrape, and logged"

if TALLY_RETAIN=5x "$EXPORTER" --listen 127.0.0.1:0 2>"$dir/bad.log"; then
	fail "a bad TALLY_RETAIN was accepted"
fi
grep -q 'TALLY_RETAIN=5x' "$dir/bad.log" || fail "bad TALLY_RETAIN: $(cat "$dir/bad.log")"
ok "a bad TALLY_RETAIN stops the exporter at start"
