#!/usr/bin/env bash
# exporter-http: the HTTP behaviour and the exact values, with curl:
# formats by Accept, gzip, HEAD, 404/405, exact integers, escapes,
# histograms (cumulative, +Inf == _count), the exporter's own metrics,
# a skipped corrupt segment, the one-line start-up errors, SIGTERM.
. "$(dirname "$0")/lib.sh"

start_writer fixture 60
start_exporter
base=http://127.0.0.1:$port

t=$dir/text.txt
h=$(scrape -D - -o "$t" "$base/metrics")
echo "$h" | grep -qi '^Content-Type: text/plain; version=0.0.4; charset=utf-8' || fail "text content type: $h"
grep -qx 'fixture_big_total{pid="'"$writer_pid"'",process="exporter-testwr"} 9007199254740993' "$t" || fail "exact 2^53+1"
grep -qx 'fixture_in_flight{pid="'"$writer_pid"'",process="exporter-testwr"} -42' "$t" || fail "negative gauge"
grep -qx 'fixture_temperature{pid="'"$writer_pid"'",process="exporter-testwr"} 9223372036854775807' "$t" || fail "INT64_MAX"
grep -qx 'fixture_ratio{pid="'"$writer_pid"'",process="exporter-testwr"} 0.1' "$t" || fail "floating-point gauge 0.1"
grep -qx 'fixture_coldest{pid="'"$writer_pid"'",process="exporter-testwr"} -Inf' "$t" || fail "floating-point gauge -Inf"
grep -qx '# TYPE fixture_ratio gauge' "$t" || fail "TYPE of a floating-point gauge"
grep -qx 'fixture_no_suffix_total{pid="'"$writer_pid"'",process="exporter-testwr"} 3' "$t" || fail "counter without _total"
grep -qF 'fixture_escapes_total{path="a\"b\\c\nd",utf8="café €",pid=' "$t" || fail "label escapes"
grep -qxF '# HELP fixture_escapes_total Help with a backslash \\, a "quote" and a\nnewline.' "$t" || fail "help escapes (text)"
grep -qx '# TYPE fixture_requests_total counter' "$t" || fail "TYPE counter"
# Histogram: 0,1,7,8,9,1000x10,5000x1000,2^41 -> cumulative counts.
lat() { grep "^fixture_latency_ns_bucket{pid=\"$writer_pid\",process=\"exporter-testwr\",le=\"$1\"} " "$t" | awk '{print $2}'; }
[ "$(lat 0)" = 1 ] || fail "le=0: $(lat 0)"
[ "$(lat 1)" = 2 ] || fail "le=1"
[ "$(lat 7)" = 3 ] || fail "le=7"
[ "$(lat 15)" = 5 ] || fail "le=15"
[ "$(lat 1023)" = 15 ] || fail "le=1023: $(lat 1023)"
[ "$(lat 8191)" = 1015 ] || fail "le=8191"
[ "$(lat 549755813887)" = 1015 ] || fail "le=2^39-1"
[ "$(lat +Inf)" = 1016 ] || fail "+Inf"
grep -qx "fixture_latency_ns_count{pid=\"$writer_pid\",process=\"exporter-testwr\"} 1016" "$t" || fail "_count"
grep -qx "fixture_latency_ns_sum{pid=\"$writer_pid\",process=\"exporter-testwr\"} $((0+1+7+8+9+10000+5000000+(1<<41)))" "$t" || fail "_sum"
# Cumulative counts never go down.
grep '^fixture_latency_ns_bucket' "$t" | awk '{ if ($2 < last) exit 1; last = $2 }' || fail "buckets not cumulative"
ok "text format: exact values, escapes, histogram"

# Families never interleaved: each metric name's lines are contiguous.
grep -v '^#' "$t" | sed 's/[{ ].*//; s/_bucket$//; s/_count$//; s/_sum$//' | uniq | sort | uniq -d | grep . && fail "interleaved families"
ok "families not interleaved"

# Own metrics.
grep -qx 'tally_exporter_segments_read 1' "$t" || fail "segments_read"
grep -q '^tally_segment_resident_bytes{pid="'"$writer_pid"'",process="exporter-testwr",zone="exporter-testwr"} [1-9]' "$t" || fail "resident bytes"
grep -q '^tally_segment_capacity_used_ratio{' "$t" || fail "capacity ratio"
grep -q '^tally_segment_alloc_refused_total{pid="'"$writer_pid"'".*} 0' "$t" || fail "alloc_refused"
grep -q '^tally_segment_copies_refused_total{pid="'"$writer_pid"'".*} 0' "$t" || fail "copies_refused"
grep -q '^tally_segment_register_failed_total{pid="'"$writer_pid"'".*} 0' "$t" || fail "register_failed"
grep -q '^tally_segment_redefinitions_total{pid="'"$writer_pid"'".*} 1' "$t" || fail "redefinitions"
# A redefined metric: its newest definition only.
grep -qx '# TYPE fixture_redefined gauge' "$t" || fail "redefined: TYPE"
grep -qx '# HELP fixture_redefined Version 2: a set gauge.' "$t" || fail "redefined: HELP"
[ "$(grep -c '^fixture_redefined' "$t")" = 1 ] || fail "redefined: one sample"
grep -qx 'fixture_redefined{pid="'"$writer_pid"'",process="exporter-testwr"} 9' "$t" || fail "redefined: value"
grep -q '^tally_exporter_scrape_duration_seconds 0\.' "$t" || fail "scrape duration"
grep -q '^tally_exporter_build_info{version="' "$t" || fail "build info"
ok "own metrics"

# OpenMetrics, as Prometheus asks for it.
o=$dir/om.txt
h=$(scrape -D - -o "$o" -H 'Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1' "$base/metrics")
echo "$h" | grep -qi '^Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8' || fail "OM content type: $h"
[ "$(tail -1 "$o")" = "# EOF" ] || fail "OM # EOF"
grep -qx '# TYPE fixture_requests counter' "$o" || fail "OM counter family name"
grep -q '^fixture_requests_total{queue="0",pid=' "$o" || fail "OM _total sample"
grep -qx '# UNIT fixture_busy_seconds seconds' "$o" || fail "OM UNIT"
grep -qx '# UNIT fixture_latency_ns ns' "$o" || fail "OM UNIT ns"
grep -qxF '# HELP fixture_escapes Help with a backslash \\, a \"quote\" and a\nnewline.' "$o" || fail "OM help escapes"
grep -q 'le="8191.0"} 1015$' "$o" || fail "OM le"
ok "OpenMetrics: content type, _total, UNIT, EOF"
# Text wins when preferred, and for a plain client.
scrape -D - -o /dev/null -H 'Accept: text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5' "$base/metrics" | grep -i 'Content-Type: text/plain' >/dev/null || fail "negotiation (text preferred)"

# gzip.
h=$(scrape -D - -o "$dir/gz" -H 'Accept-Encoding: gzip' "$base/metrics")
echo "$h" | grep -qi '^Content-Encoding: gzip' || fail "no gzip"
echo "$h" | grep -qi '^Content-Type: text/plain' || fail "gzip content type"
gunzip -c <"$dir/gz" | grep -q '^fixture_big_total{.*} 9007199254740993$' || fail "gzip body"
h=$(scrape -D - -o /dev/null -H 'Accept-Encoding: gzip;q=0, identity' "$base/metrics")
echo "$h" | grep -qi '^Content-Encoding' && fail "gzip;q=0 was ignored"
ok "gzip"

# Methods and paths.
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
[ "$(code "$base/")" = 200 ] || fail "/"
scrape "$base/" | grep 'href="/metrics"' >/dev/null || fail "index links /metrics"
[ "$(code -I "$base/metrics")" = 200 ] || fail "HEAD"
scrape -I "$base/metrics" | grep -i '^Content-Type: text/plain' >/dev/null || fail "HEAD content type"
[ "$(code "$base/nope")" = 404 ] || fail "404"
[ "$(code "$base/../../etc/passwd" --path-as-is)" = 404 ] || fail "path traversal"
[ "$(code "$base/metrics/")" = 404 ] || fail "/metrics/"
# A decoded %00 would end the path early: /metrics%00.txt is not /metrics.
[ "$(code --path-as-is "$base/metrics%00.txt")" = 404 ] || fail "/metrics%00.txt"
[ "$(code --path-as-is "$base/metrics%00")" = 404 ] || fail "/metrics%00"
[ "$(code --path-as-is "$base/%00/metrics")" = 404 ] || fail "/%00/metrics"
[ "$(code --path-as-is "$base/%6detrics")" = 200 ] || fail "other escapes are still decoded"
# ... nor is a NUL byte sent as such (the status of a raw request).
rawcode() {
	python3 -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(sys.argv[2].encode().replace(b"@", b"\0") + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
print(s.recv(100).split(b" ")[1].decode())' "$port" "$1"
}
[ "$(rawcode 'GET /metrics@.txt')" = 400 ] || fail "/metrics<NUL>.txt"
[ "$(rawcode 'GET /metrics@')" = 400 ] || fail "/metrics<NUL>"
[ "$(rawcode 'GET /metrics?a=1')" = 200 ] || fail "a query"
[ "$(code -X POST -d x "$base/metrics")" = 405 ] || fail "POST"
[ "$(code -X DELETE "$base/metrics")" = 405 ] || fail "DELETE"
ok "HEAD, 404 (also for paths holding %00), 405"

# A corrupt segment, a foreign-looking file and a symlink are skipped and
# counted; the others are still served.
head -c 8192 /dev/urandom >"$dir/junk.1.tally"
ln -s "$dir/junk.1.tally" "$dir/link.2.tally"
scrape "$base/metrics" >"$t"
grep -qx 'tally_exporter_scrape_segments_skipped{reason="corrupt"} 1' "$t" || fail "corrupt not counted: $(grep skipped "$t")"
grep -qx 'tally_exporter_scrape_segments_skipped{reason="symlink"} 1' "$t" || fail "symlink not counted: $(grep skipped "$t")"
grep -q '^fixture_big_total{.*} 9007199254740993$' "$t" || fail "good segment lost"
rm -f "$dir/junk.1.tally" "$dir/link.2.tally"
ok "corrupt segment and symlink skipped and counted"

# One corrupt series record (its labels' length past the record) hides
# only itself: the segment is read, the record counted.
src=$(ls "$dir"/*.tally | head -1)
cp --sparse=always "$src" "$dir/onebad.3.0000000000000001.tally"
python3 - "$dir/onebad.3.0000000000000001.tally" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(96)
    series_off = struct.unpack("<Q", f.read(8))[0]
    f.seek(series_off + 6)
    f.write(struct.pack("<H", 200))
PY
scrape "$base/metrics" >"$t"
grep -qx 'tally_exporter_scrape_records_skipped 1' "$t" || fail "bad record not counted: $(grep records_skipped "$t")"
grep -qx 'tally_exporter_scrape_segments_skipped{reason="corrupt"} 0' "$t" || fail "segment skipped whole for one record"
rm -f "$dir/onebad.3.0000000000000001.tally"
ok "a corrupt record hides only itself, counted"

# Start-up errors: one line each, exit status 1 (2 for bad options).
err() { # expected-status pattern args...
	local want=$1 pat=$2 rc=0 out
	shift 2
	out=$(timeout 10 "$EXPORTER" "$@" 2>&1 >/dev/null) || rc=$?
	[ "$rc" = "$want" ] || fail "'$*': status $rc, want $want ($out)"
	echo "$out" | head -1 | grep -q "$pat" || fail "'$*': message '$out'"
	echo "  $out" | head -1
}
err 1 'address already in use' --listen "127.0.0.1:$port"
err 1 "bad --listen '127.0.0.1:99999'" --listen 127.0.0.1:99999
err 1 "bad --listen 'nohost.invalid:1'" --listen nohost.invalid:1
err 1 "bad --listen .garbage." --listen garbage
ln -s "$dir" "$dir.lnk"
err 1 'symbolic link' --listen 127.0.0.1:0 --dir "$dir.lnk"
rm -f "$dir.lnk"
printf 'tls_server_config:\n  cert_file: /x\n  kee_file: /y\n' >"$dir/bad.yml"
err 1 'bad web config: .*bad.yml:3: unsupported tls_server_config setting' --listen 127.0.0.1:0 --web.config.file "$dir/bad.yml"
err 2 'histogram.buckets' --histogram.buckets 'x=1,a'
"$EXPORTER" --help | grep -q -- '--web.config.file' || fail "--help"
"$EXPORTER" --version | grep -q '^tally-exporter [0-9]' || fail "--version"
ok "one-line start-up errors, --help, --version"

# SIGTERM: a clean exit with status 0.
stop "$exporter_pid" || fail "exporter exit status $? after SIGTERM"
grep -q 'stopping' "$exporter_log" || fail "no stop message"
ok "SIGTERM: clean exit"
