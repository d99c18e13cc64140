#!/usr/bin/env bash
# exporter-units: the example service's histogram of integer nanoseconds
# (unit "nanoseconds") is exported in seconds: the name ends _seconds,
# le edges and _sum are exact decimals (1 ns is le="0.000000001"), and
# promtool check metrics prints nothing at all on the exporter's output
# of the service (what make demo shows): no error and no lint hint.
. "$(dirname "$0")/lib.sh"
: "${SERVICE:?}"
command -v promtool >/dev/null || fail "promtool not installed (Debian package prometheus)"
TALLY_KEEP=1 timeout 30 "$SERVICE" --threads 2 --seconds 1 >"$dir/svc.out" 2>&1 ||
	{ cat "$dir/svc.out"; fail "queue-service failed"; }
start_exporter
scrape "http://127.0.0.1:$port/metrics" >"$dir/m.txt"
grep '^# TYPE request_duration_seconds histogram$' "$dir/m.txt" >/dev/null ||
	fail "no request_duration_seconds histogram"
grep '_ns[_{ ]' "$dir/m.txt" && fail "a name still ends in _ns"
grep '^request_duration_seconds_bucket{.*le="0.000000001"} ' "$dir/m.txt" >/dev/null ||
	fail "no le=\"0.000000001\" (the 1 ns edge)"
grep '^request_duration_seconds_bucket{.*le="549.755813887"} ' "$dir/m.txt" >/dev/null ||
	fail "no le=\"549.755813887\" (the 2^39 - 1 ns edge)"
# The sum in seconds is the integer sum in nanoseconds with the point
# moved: the service printed neither, so check its form only.
grep -E '^request_duration_seconds_sum\{[^}]*\} [0-9]+(\.[0-9]*[1-9])?$' "$dir/m.txt" >/dev/null ||
	fail "the sum is not an exact decimal"
ok "request_duration_seconds: name, edges and sum in seconds"
out=$(timeout 30 promtool check metrics <"$dir/m.txt" 2>&1) ||
	{ echo "$out"; fail "promtool check metrics failed"; }
[ -z "$out" ] || { echo "$out"; fail "promtool check metrics printed something"; }
ok "promtool check metrics prints nothing"
# OpenMetrics: the UNIT line names the base unit.
scrape -H 'Accept: application/openmetrics-text; version=1.0.0' \
	"http://127.0.0.1:$port/metrics" >"$dir/om.txt"
grep '^# UNIT request_duration_seconds seconds$' "$dir/om.txt" >/dev/null ||
	fail "no UNIT line in seconds"
grep '^request_duration_seconds_bucket{.*le="1.073741823"} ' "$dir/om.txt" >/dev/null ||
	fail "OpenMetrics edges are not in seconds"
ok "OpenMetrics: UNIT seconds, edges in seconds"
