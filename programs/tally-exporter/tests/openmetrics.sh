#!/usr/bin/env bash
# exporter-openmetrics: the OpenMetrics output passes prometheus_client's
# strict parser (from the tests' venv, tools/test-venv.sh), with
# the exact values.
. "$(dirname "$0")/lib.sh"
py=$(venv)
start_writer fixture 60
start_exporter
scrape -H 'Accept: application/openmetrics-text;version=1.0.0' "http://127.0.0.1:$port/metrics" >"$dir/om.txt"
timeout 60 "$py" "$TESTS/om_check.py" "$dir/om.txt" "$writer_pid" || fail "OpenMetrics parser"
# The parser must be able to fail: a histogram without +Inf.
sed '/le="+Inf"/d' "$dir/om.txt" >"$dir/bad.txt"
timeout 60 "$py" "$TESTS/om_check.py" "$dir/bad.txt" "$writer_pid" >/dev/null 2>&1 && fail "the parser accepted a histogram without +Inf"
ok "prometheus_client's OpenMetrics parser"
