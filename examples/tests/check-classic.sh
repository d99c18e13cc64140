#!/usr/bin/env bash
# check-classic.sh TALLY_DUMP TALLY_EXPORTER TALLYSTAT TYPED_SEGMENT: a
# classic histogram written from C (format 2.6, prometheus_client's
# default buckets) reads the same in every reader: tally-exporter shows
# cumulative _bucket{le=...}, _count and the exact _sum, and promtool
# check metrics prints nothing on its scrape (0.0.4; OpenMetrics spells
# the bounds as floats); a summary (format 2.7) is TYPE summary with its
# _count and exact _sum, in both formats;
# tally-dump shows the bounds, buckets and sum; tallystat the count and
# the mean, and of a summary its count, mean and sum; of an info metric
# (2.8) its current pairs, of an enum each state's 0 or 1.  The exporter
# binds 127.0.0.1, lives at most 30 s and is stopped by its pid.
. "$(dirname "$0")/lib.sh" tally-classic
dump=$1
exporter=$2
tallystat=$3
typed=$4

write_segment "$typed"

timeout 30 "$exporter" --dir "$dir" --listen 127.0.0.1:0 2>"$dir/log" &
epid=$!
port=$(listen_port "$dir/log" "$epid") ||
	{ cat "$dir/log"; echo "the exporter did not start"; exit 1; }
curl -sS --max-time 10 "http://127.0.0.1:$port/metrics" >"$dir/m.txt" || fail "scrape"
curl -sS --max-time 10 -H 'Accept: application/openmetrics-text; version=1.0.0' \
	"http://127.0.0.1:$port/metrics" >"$dir/om.txt" || fail "scrape (OpenMetrics)"

# 0.003, 0.02, 0.02, 0.7 and 12: cumulative counts, +Inf the count.
want='request_seconds_bucket{le="0.005"} 1
request_seconds_bucket{le="0.01"} 1
request_seconds_bucket{le="0.025"} 3
request_seconds_bucket{le="0.05"} 3
request_seconds_bucket{le="0.075"} 3
request_seconds_bucket{le="0.1"} 3
request_seconds_bucket{le="0.25"} 3
request_seconds_bucket{le="0.5"} 3
request_seconds_bucket{le="0.75"} 4
request_seconds_bucket{le="1"} 4
request_seconds_bucket{le="2.5"} 4
request_seconds_bucket{le="5"} 4
request_seconds_bucket{le="7.5"} 4
request_seconds_bucket{le="10"} 4
request_seconds_bucket{le="+Inf"} 5
request_seconds_count 5
request_seconds_sum 12.743'
got=$(grep '^request_seconds' "$dir/m.txt" | sed 's/{pid="[0-9]*",process="typed-segment",\{0,1\}/{/; s/{}//')
[ "$got" = "$want" ] || fail "exposition: $(diff <(echo "$want") <(echo "$got"))"
grep -q '^# TYPE request_seconds histogram$' "$dir/m.txt" || fail "no histogram TYPE line"
grep -q 'request_seconds_bucket{.*le="10.0"} 4$' "$dir/om.txt" || fail "OpenMetrics le: $(grep request_seconds "$dir/om.txt")"
# The summary: 0.1 three times and 2.25.
want='# TYPE order_value_dollars summary
order_value_dollars_count 4
order_value_dollars_sum 2.55'
for f in m.txt om.txt; do
	got=$(grep 'order_value_dollars' "$dir/$f" | grep -v '^# HELP' | sed 's/{pid="[0-9]*",process="typed-segment",\{0,1\}/{/; s/{}//')
	[ "$got" = "$want" ] || fail "summary in $f: $(diff <(echo "$want") <(echo "$got"))"
done
out=$(promtool check metrics <"$dir/m.txt" 2>&1) || fail "promtool: status $?"
[ -z "$out" ] || fail "promtool printed: $out"

out=$("$dump" --dir "$dir") || fail "tally-dump: exit $?"
grep -Eq "histogram +request_seconds +count=5 sum=12.743 buckets=0.005:1 0.01:0 0.025:2 .* 0.75:1 .* 10:0 inf:1 p50=0.02125 " <<<"$out" ||
	fail "tally-dump: $out"
out=$("$dump" --dir "$dir" --json) || fail "tally-dump --json: exit $?"
python3 - "$out" <<'PY' || fail "tally-dump --json: $out"
import json, sys
series = json.loads(sys.argv[1])["segments"][0]["series"]
h = [s for s in series if s["name"] == "request_seconds"][0]
assert h["count"] == 5 and h["sum"] == 12.743, h
assert h["bounds"][0] == 0.005 and h["bounds"][-1] == 10 and len(h["bounds"]) == 14, h
assert h["buckets"] == [1, 0, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1], h
PY
# A summary (format 2.7): its count and mean, no quantiles.
out=$("$tallystat" --dir "$dir" order_value_dollars) || fail "tallystat: exit $?"
grep -Eq "order_value_dollars +4 +[0-9.]+ +0\.6375 +- +- +- +-$" <<<"$out" || fail "tallystat summary: $out"
out=$("$tallystat" --dir "$dir" -o json order_value_dollars) || fail "tallystat -o json: exit $?"
python3 - "$out" <<'PY' || fail "tallystat -o json: $out"
import json, sys
doc = json.loads(sys.argv[1])
[s] = doc["sysstat"]["hosts"][0]["statistics"][0]["series"]
assert (s["kind"], s["count"], s["sum"], s["p50"]) == ("summary", 4, 2.55, None), s
PY
out=$("$tallystat" --dir "$dir" build state) || fail "tallystat: exit $?"
grep -Eq 'build\{version="1\.2"\} +info +1 ' <<<"$out" || fail "tallystat info: $out"
grep -q '1\.1' <<<"$out" && fail "tallystat shows replaced pairs: $out"
out=$("$tallystat" --dir "$dir" -o json build state) || fail "tallystat -o json: exit $?"
python3 - "$out" <<'PY' || fail "tallystat -o json: $out"
import json, sys
doc = json.loads(sys.argv[1])
got = sorted((s["series"], s["kind"], s["value"])
             for s in doc["sysstat"]["hosts"][0]["statistics"][0]["series"])
assert got == [('build{version="1.2"}', "info", 1),
               ('state{state="down"}', "stateset", 1),
               ('state{state="up"}', "stateset", 0)], got
PY
out=$("$tallystat" --dir "$dir" request_seconds) || fail "tallystat: exit $?"
grep -Eq "request_seconds +5 +[0-9.]+ +2\.5486 +0\.02125 +10 +10 +10$" <<<"$out" || fail "tallystat: $out"

# Two processes' histograms of the same bounds, summed (--aggregate):
# the buckets add up, and the billionths of the sums carry exactly.
write_segment "$typed"
kill "$epid" 2>/dev/null; wait "$epid" 2>/dev/null
: >"$dir/log"
timeout 30 "$exporter" --dir "$dir" --aggregate --listen 127.0.0.1:0 2>"$dir/log" &
epid=$!
port=$(listen_port "$dir/log" "$epid") ||
	{ cat "$dir/log"; echo "the exporter did not start"; exit 1; }
curl -sS --max-time 10 "http://127.0.0.1:$port/metrics" >"$dir/a.txt" || fail "scrape (--aggregate)"
for want in 'request_seconds_bucket{le="0.025"} 6' 'request_seconds_bucket{le="+Inf"} 10' \
	'request_seconds_count 10' 'request_seconds_sum 25.486'; do
	grep -qxF "$want" "$dir/a.txt" || fail "--aggregate: no $want: $(grep '^request_seconds' "$dir/a.txt")"
done
out=$(promtool check metrics <"$dir/a.txt" 2>&1) || fail "promtool (--aggregate): status $?"
[ -z "$out" ] || fail "promtool (--aggregate) printed: $out"

[ $bad -eq 0 ] && echo "a classic histogram reads the same in every reader; promtool is silent"
exit $bad
