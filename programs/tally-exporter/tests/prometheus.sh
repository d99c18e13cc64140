#!/usr/bin/env bash
# exporter-prometheus: a real Prometheus (Debian's binary, temporary
# storage, 1 s scrape interval, 127.0.0.1) scrapes the exporter while the
# test writer counts; its HTTP API returns the exact final counter value,
# and histogram_quantile(0.99, ...) falls in the bucket of the value
# observed (5000 lies in tally's octave (4095, 8191]).
. "$(dirname "$0")/lib.sh"
command -v prometheus >/dev/null || fail "prometheus not installed"
final=1234567891
start_writer run 60 "$final"
start_exporter
start_prometheus
got=
for _ in $(seq 60); do
	grep -q '^done' "$writer_out" && got=$(value "test_requests_total{job=\"tally\"}")
	[ "$got" = "$final" ] && break
	sleep 0.5
done
[ "$got" = "$final" ] || { tail -5 "$dir/prom.log"; query 'up'; fail "Prometheus has '$got', want $final"; }
ok "Prometheus: test_requests_total = $got exactly"
q=$(value 'histogram_quantile(0.99, test_latency_ns_bucket{job="tally"})')
python3 -c "import sys; q=float('$q'); sys.exit(0 if 4095 < q <= 8191 else 1)" || fail "p99 = '$q', want (4095, 8191]"
ok "Prometheus: histogram_quantile(0.99) = $q, in (4095, 8191]"
# Prometheus negotiated OpenMetrics, and the scrape was healthy.
[ "$(value 'up{job="tally"}')" = 1 ] || fail "up != 1"
[ "$(value 'scrape_samples_scraped{job="tally"}')" -gt 40 ] || fail "few samples"
ok "Prometheus: up = 1"
