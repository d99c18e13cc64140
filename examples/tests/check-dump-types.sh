#!/usr/bin/env bash
# check-dump-types.sh TALLY_DUMP TYPED_SEGMENT: tally-dump shows the typed
# series of format 2.6 by their meaning: a fractional counter as its
# exact decimal (text and --json), a per-process gauge combined by its
# mode; the writer exited, so its livesum gauge is gone and its sum gauge
# stays.
. "$(dirname "$0")/lib.sh" tally-dump-types
dump=$1
typed=$2

write_segment "$typed"

out=$("$dump" --dir "$dir") || fail "tally-dump: exit $?"
grep -Eq "counter +paid_total +3\.750000001$" <<<"$out" || fail "fractional counter: $out"
grep -Eq "kept +2$" <<<"$out" || fail "sum gauge: $out"
grep -q "inflight" <<<"$out" && fail "a gone process's livesum gauge is shown: $out"
out=$("$dump" --dir "$dir" --json) || fail "tally-dump --json: exit $?"
python3 - "$out" <<'PY' || fail "tally-dump --json: $out"
import json, sys
series = json.loads(sys.argv[1])["segments"][0]["series"]
by = {s["name"]: s.get("value", s.get("count")) for s in series}
assert by == {"paid_total": 3.750000001, "kept": 2, "request_seconds": 5}, by
PY
[ $bad -eq 0 ] && echo "tally-dump shows typed series by their meaning"
exit $bad
