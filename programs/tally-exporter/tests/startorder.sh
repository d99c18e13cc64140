#!/usr/bin/env bash
# exporter-startorder: a sidecar started before the writer.  The exporter
# given a --dir that does not exist yet says so once and serves; the
# writer, given that directory as TALLY_DIR, creates it (mode 0700; its
# parent exists); the exporter's next scrape reads it.  Then the other
# order: the writer first, the exporter after.
. "$(dirname "$0")/lib.sh"

unset TALLY_RETAIN
t=$dir/out.txt
app=$dir/vol/app
mkdir "$dir/vol"

start_exporter --dir "$app"
grep -q "$app does not exist yet" "$exporter_log" ||
	fail "the exporter does not say that it waits: $(cat "$exporter_log")"
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -qx 'tally_exporter_segments_read 0' "$t" || fail "segments read before the writer"
TALLY_DIR=$app start_writer worker 77 60; w=$writer_pid
[ "$(stat -c %a "$app")" = 700 ] || fail "TALLY_DIR made $(stat -c %a "$app"), want 700"
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -q "^worker_requests_total{pid=\"$w\"[^}]*} 77\$" "$t" ||
	fail "the writer's counter is not served: $(grep -c . "$t") lines"
[ "$(grep -c 'does not exist' "$exporter_log")" = 1 ] || fail "said more than once"
stop "$exporter_pid"
ok "exporter first: it waits for --dir, the writer creates it, the next scrape reads it"

start_exporter --dir "$app"
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -q "^worker_requests_total{pid=\"$w\"[^}]*} 77\$" "$t" || fail "writer first: not served"
grep -q 'does not exist' "$exporter_log" && fail "writer first: the exporter says the directory is missing"
stop "$exporter_pid"
stop "$w"
ok "writer first: read at once"
