#!/usr/bin/env bash
# exporter-stream: the body is streamed, with the same bytes.
#  1. The exposition of fixed segments (every kind, escapes, clashing
#     labels, a histogram, --aggregate summing two workers), in text,
#     OpenMetrics and gzip, is byte for byte the one in golden/ (pids
#     written PID; the exporter's own metrics, which hold durations, left
#     out), and so are the counts among the exporter's own metrics of a
#     fresh exporter's first scrape (series per segment, series written,
#     conflicts, label clashes), sorted.  With GOLDEN_WRITE=1 it writes
#     golden/ instead (made with the exporter before streaming, so that a
#     change of the bytes fails).
#  2. A large scrape (STREAM_SERIES series, 200,000 by default) is whole
#     in text and in gzip, and the exporter's peak memory (VmHWM) above
#     its idle one stays within STREAM_BYTES_PER_SERIES per series (100
#     by default, the exporter's bound: it keeps a few bytes per series
#     and reads each series again as it writes it).
#     Two scrapes at once take at most 1.2 times that memory.
#  3. A client that reads slowly does not hold back another scrape: while
#     it has read only part of the body, a second scrape is served whole.
. "$(dirname "$0")/lib.sh"

golden=$TESTS/golden
norm() { sed -E 's/(pid="|tally_pid=")[0-9]+(:[0-9]+)?"/\1PID"/g'; }
om='Accept: application/openmetrics-text; version=1.0.0'

start_writer fixture 60
start_writer clash 60
start_writer worker 100 60
TALLY_ZONE=pool start_writer pooled 60
start_exporter
u=http://127.0.0.1:$port/metrics
counts='^tally_segment_series{|^tally_exporter_(series|series_conflicts|series_redefined|segments_read|scrape_records_skipped|label_clashes_total)[ {]'
scrape "$u" | grep -E "$counts" | norm | sort >"$dir/self"
stop "$exporter_pid"
start_exporter --self-metrics=no
u=http://127.0.0.1:$port/metrics
scrape "$u" | norm >"$dir/text"
scrape -H "$om" "$u" | norm >"$dir/om"
scrape -H 'Accept-Encoding: gzip' "$u" | gzip -dc | norm >"$dir/text.gz"
scrape -H 'Accept-Encoding: gzip' -H "$om" "$u" | gzip -dc | norm >"$dir/om.gz"
stop "$exporter_pid"
start_writer worker 7 60
start_exporter --self-metrics=no --aggregate
u=http://127.0.0.1:$port/metrics
scrape "$u" | norm >"$dir/agg"
scrape -H 'Accept-Encoding: gzip' -H "$om" "$u" | gzip -dc | norm >"$dir/agg-om.gz"
stop "$exporter_pid"

if [ "${GOLDEN_WRITE:-}" = 1 ]; then
	mkdir -p "$golden"
	cp "$dir/self" "$golden/self.txt"
	cp "$dir/text" "$golden/expose.txt"
	cp "$dir/om" "$golden/expose.om"
	cp "$dir/agg" "$golden/aggregate.txt"
	cp "$dir/agg-om.gz" "$golden/aggregate.om"
	ok "golden files written in $golden"
	exit 0
fi
same() { # got want what
	cmp -s "$1" "$2" || { diff "$2" "$1" | head -20 >&2; fail "$3: not the golden bytes"; }
}
same "$dir/self" "$golden/self.txt" "the exporter's own counts"
same "$dir/text" "$golden/expose.txt" "text"
same "$dir/om" "$golden/expose.om" "OpenMetrics"
same "$dir/text.gz" "$golden/expose.txt" "text, gzip"
same "$dir/om.gz" "$golden/expose.om" "OpenMetrics, gzip"
same "$dir/agg" "$golden/aggregate.txt" "--aggregate"
same "$dir/agg-om.gz" "$golden/aggregate.om" "--aggregate, OpenMetrics, gzip"
ok "text, OpenMetrics, gzip, --aggregate and the own counts: the golden bytes"

# 2. A large scrape, in a fresh exporter: whole, and within its memory.
n=${STREAM_SERIES:-200000}
per=${STREAM_BYTES_PER_SERIES:-100}
start_writer many "$n" 120
start_exporter
u=http://127.0.0.1:$port/metrics
hwm() { awk '/^VmHWM:/ { print $2 * 1024 }' "/proc/$exporter_pid/status"; }
idle=$(hwm)
scrape --max-time 60 "$u" -o "$dir/big" || fail "large scrape"
scrape --max-time 60 -H 'Accept-Encoding: gzip' "$u" -o "$dir/big.gz" || fail "large scrape, gzip"
peak=$(hwm)
got=$(grep -c '^many_requests_total{' "$dir/big" || true)
[ "$got" = "$n" ] || fail "large scrape: $got series of many_requests_total, want $n"
grep -v '_duration_seconds \|^tally_exporter_scrapes_total \|^tally_exporter_label_clashes_total' "$dir/big" >"$dir/big.a"
gzip -dc "$dir/big.gz" | grep -v '_duration_seconds \|^tally_exporter_scrapes_total \|^tally_exporter_label_clashes_total' >"$dir/big.b"
cmp -s "$dir/big.a" "$dir/big.b" || { diff "$dir/big.a" "$dir/big.b" | head >&2; fail "large scrape: gzip and plain bodies differ"; }
tail -n 1 "$dir/big" | grep -q '^tally_exporter_scrape_duration_seconds ' || fail "large scrape: cut short"
b=$(( (peak - idle) / n ))
echo "large scrape: $n series, idle VmHWM $idle B, peak $peak B: $b B per series (bound $per)"
if [ -n "${STREAM_SANITIZED:-}" ]; then
	echo "memory bound not checked under the $STREAM_SANITIZED sanitizer"
else
	[ "$b" -le "$per" ] || fail "large scrape: $b bytes per series above idle, bound $per"
fi
ok "large scrape whole in text and gzip, $b B per series"

# Two scrapes at once, in a fresh exporter: both whole, and within 1.2x
# the memory of one (the second uses the first one's index).
one=$((peak - idle))
stop "$exporter_pid"
start_exporter
u=http://127.0.0.1:$port/metrics
idle=$(hwm)
scrape --max-time 120 "$u" -o "$dir/two.a" &
two=$!
scrape --max-time 120 "$u" -o "$dir/two.b" || fail "two scrapes at once: the second"
wait "$two" || fail "two scrapes at once: the first"
peak=$(hwm)
for f in "$dir/two.a" "$dir/two.b"; do
	got=$(grep -c '^many_requests_total{' "$f" || true)
	[ "$got" = "$n" ] || fail "two scrapes at once: $got series, want $n"
done
echo "two scrapes at once: $((peak - idle)) B above idle, one: $one B"
if [ -z "${STREAM_SANITIZED:-}" ]; then
	[ $(( (peak - idle) * 10 )) -le $((one * 12)) ] ||
		fail "two scrapes at once: $((peak - idle)) B, more than 1.2x one ($one B)"
fi
ok "two scrapes at once: both whole, $((peak - idle)) B (one: $one B)"

# 3. A slow reader (20 kB/s: minutes for this body) and a normal scrape
# at the same time; the slow one is stopped once the other is served.
curl -sS --limit-rate 20k --max-time 170 -o "$dir/slow" "$u" 2>/dev/null &
slow=$!
pids+=($slow)
for _ in $(seq 200); do
	[ -s "$dir/slow" ] && break
	sleep 0.05
done
[ -s "$dir/slow" ] || fail "the slow client got nothing"
scrape --max-time 120 "$u" -o "$dir/fast" || fail "a scrape beside a slow client"
kill -0 "$slow" 2>/dev/null || fail "the slow client finished first: the body was not long enough"
kill "$slow"
wait "$slow" 2>/dev/null || true
got=$(grep -c '^many_requests_total{' "$dir/fast" || true)
[ "$got" = "$n" ] || fail "the scrape beside a slow client: $got series, want $n"
part=$(stat -c %s "$dir/slow")
full=$(stat -c %s "$dir/fast")
[ "$part" -lt "$full" ] || fail "the slow client read the whole body ($part of $full bytes)"
ok "a slow client ($part of $full bytes read) does not hold back another scrape"
stop "$exporter_pid"
! grep -l 'Sanitizer' "$dir"/exporter.*.log >&2 || fail "a sanitizer spoke (the logs above)"
