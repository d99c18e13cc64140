#!/usr/bin/env bash
# check-dump-types.sh TALLY_DUMP TYPED_SEGMENT: tally-dump shows the typed
# series of format 2.6 by their meaning: a fractional counter as its
# exact decimal (text and --json), a per-process gauge combined by its
# mode; a summary (2.7) as its count and exact sum; an info metric (2.8)
# as its current pairs only, an enum as each state's 0 or 1; the writer exited,
# so its livesum gauge is gone and its sum gauge stays.
. "$(dirname "$0")/lib.sh" tally-dump-types
dump=$1
typed=$2

write_segment "$typed"

out=$("$dump" --dir "$dir") || fail "tally-dump: exit $?"
grep -Eq "counter +paid_total +3\.750000001$" <<<"$out" || fail "fractional counter: $out"
grep -Eq "kept +2$" <<<"$out" || fail "sum gauge: $out"
grep -Eq "summary +order_value_dollars +count=4 sum=2\.55$" <<<"$out" || fail "summary: $out"
grep -q "inflight" <<<"$out" && fail "a gone process's livesum gauge is shown: $out"
grep -Eq "info +build\{version=\"1\.2\"\} +1$" <<<"$out" || fail "info: $out"
grep -q "1\.1" <<<"$out" && fail "replaced pairs of an info are shown: $out"
grep -Eq "stateset +state\{state=\"up\"\} +0$" <<<"$out" || fail "enum up: $out"
grep -Eq "stateset +state\{state=\"down\"\} +1$" <<<"$out" || fail "enum down: $out"
out=$("$dump" --dir "$dir" --json) || fail "tally-dump --json: exit $?"
python3 - "$out" <<'PY' || fail "tally-dump --json: $out"
import json, sys
series = json.loads(sys.argv[1])["segments"][0]["series"]
by = {(s["name"], tuple(s["labels"].items())): s.get("value", s.get("count"))
      for s in series}
assert by == {("paid_total", ()): 3.750000001, ("kept", ()): 2,
              ("request_seconds", ()): 5, ("order_value_dollars", ()): 4,
              ("build", (("version", "1.2"),)): 1,
              ("state", (("state", "up"),)): 0,
              ("state", (("state", "down"),)): 1}, by
kinds = {s["name"]: s["kind"] for s in series}
assert (kinds["build"], kinds["state"]) == ("info", "stateset"), kinds
s = [s for s in series if s["name"] == "order_value_dollars"][0]
assert s["kind"] == "summary" and s["sum"] == 2.55, s
assert "buckets" not in s and "p50" not in s, s
PY
[ $bad -eq 0 ] && echo "tally-dump shows typed series by their meaning"
exit $bad
