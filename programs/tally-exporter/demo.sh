#!/usr/bin/env bash
# programs/tally-exporter/demo.sh BUILD_DIR: the exporter in make demo:
# start the example service, start tally-exporter on a free loopback port,
# scrape it (text and OpenMetrics), show a few lines, stop both by PID.
# Under 30 s; exits non-zero when a step fails.
set -eEuo pipefail
trap 'echo "exporter demo: FAILED: line $LINENO: $BASH_COMMAND" >&2' ERR
build=${1:?usage: demo.sh BUILD_DIR}
. "$(dirname "$0")/../../tools/listen.sh"
svc=$build/examples/queue-service
exp=$build/programs/tally-exporter/tally-exporter
fail() { echo "exporter demo: FAILED: $*" >&2; exit 1; }
[ -x "$svc" ] || fail "$svc is not built"
[ -x "$exp" ] || fail "$exp is not built"
dir=$(mktemp -d /dev/shm/tally-expdemo.XXXXXX)
chmod 700 "$dir"
export TALLY_DIR=$dir
unset TALLY_KEEP
spid= epid=
cleanup() {
	for p in $epid $spid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT

"$svc" --threads 2 --seconds 8 >"$dir/svc.out" 2>&1 &
spid=$!
for _ in $(seq 50); do ls "$dir"/*.tally >/dev/null 2>&1 && break; sleep 0.1; done
"$exp" --listen 127.0.0.1:0 2>"$dir/exp.log" &
epid=$!
port=$(listen_port "$dir/exp.log" "$epid") ||
	{ cat "$dir/exp.log" >&2; fail "the exporter did not start"; }
cat "$dir/exp.log"
sleep 1.5
echo "\$ curl -s http://127.0.0.1:$port/metrics   (a few lines)"
curl -sS --max-time 5 "http://127.0.0.1:$port/metrics" >"$dir/scrape.txt"
grep -E '^# (HELP|TYPE) requests_total|^requests_total\{|^request_duration_seconds_bucket\{.*le="(0.000001023|0.000004095|0.000016383|\+Inf)"|^request_duration_seconds_(count|sum)|^tally_exporter_(series|scrape_duration_seconds) |^tally_segment_resident_bytes' "$dir/scrape.txt" | head -16
n=$(grep -c '^requests_total{' "$dir/scrape.txt" || true)
[ "$n" -gt 0 ] || fail "no requests_total in the scrape"
echo "  ... $(grep -vc '^#' "$dir/scrape.txt") samples in $(wc -c <"$dir/scrape.txt") bytes"
echo "\$ curl -s -H 'Accept: application/openmetrics-text;version=1.0.0' ... | tail -1"
ct=$(curl -sS --max-time 5 -o "$dir/om.txt" -w '%{content_type}' -H 'Accept: application/openmetrics-text;version=1.0.0' "http://127.0.0.1:$port/metrics")
echo "  Content-Type: $ct; last line: $(tail -1 "$dir/om.txt")"
[ "$(tail -1 "$dir/om.txt")" = "# EOF" ] || fail "OpenMetrics without # EOF"
kill -TERM "$epid"; wait "$epid"; epid=
kill -TERM "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; spid=
echo "  exporter and service stopped"
