#!/usr/bin/env bash
# check-py03.sh TALLY_DUMP TALLYSTAT TALLY_EXPORTER PY03_SEGMENT: a zone as
# tally 0.3's Python package left it (format 2.5, series of encoded names
# such as order_value_dollars:bucket) is refused by every C reader with
# one line that says what to do, and none of its series is shown as
# garbage: tally-dump and tallystat say it on stderr, tally-exporter in
# its log (once) and in tally_exporter_segments_skipped_total
# {reason="version"}.  The exporter binds 127.0.0.1, lives at most 30 s
# and is stopped by its pid.
. "$(dirname "$0")/lib.sh" tally-py03
dump=$1
tallystat=$2
exporter=$3
py03=$4
what="written by tally 0.3's Python package (series order_value_dollars:bucket), whose encoded names only it read; restart the service with tally 0.4"

write_segment "$py03"

out=$("$dump" --dir "$dir" 2>"$dir/err")
grep -qF "$what" "$dir/err" || fail "tally-dump said: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" = 1 ] || fail "tally-dump: not one line: $(cat "$dir/err")"
grep -q "bucket\|orders" <<<"$out" && fail "tally-dump showed: $out"

out=$("$tallystat" --dir "$dir" 2>"$dir/err")
grep -qF "$what" "$dir/err" || fail "tallystat said: $(cat "$dir/err")"
grep -q "bucket\|orders" <<<"$out" && fail "tallystat showed: $out"

timeout 30 "$exporter" --dir "$dir" --listen 127.0.0.1:0 2>"$dir/log" &
epid=$!
port=$(listen_port "$dir/log" "$epid") ||
	{ cat "$dir/log"; echo "the exporter did not start"; exit 1; }
for _ in 1 2; do
	curl -sS --max-time 10 "http://127.0.0.1:$port/metrics" >"$dir/m.txt" || fail "scrape"
done
grep -q "^order" "$dir/m.txt" && fail "tally-exporter showed: $(grep "^order" "$dir/m.txt")"
grep -q '^tally_exporter_segments_skipped_total{reason="version"} 2$' "$dir/m.txt" ||
	fail "not counted: $(grep skipped_total "$dir/m.txt")"
[ "$(grep -cF "$what" "$dir/log")" = 1 ] || fail "tally-exporter's log: $(cat "$dir/log")"

[ $bad -eq 0 ] && echo "a zone of tally 0.3's Python package is refused by every reader, saying what to do"
exit $bad
