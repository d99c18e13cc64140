#!/usr/bin/env bash
# check-tally-dump.sh TALLY_DUMP EMPTY_SEGMENT: tally-dump on a segment
# with no series (text and --json: valid JSON, no series, exit 0; a
# sanitized build aborted on qsort(NULL, 0, ...)), and its --help.
. "$(dirname "$0")/lib.sh" tally-dump-test
dump=$1
empty=$2

write_segment "$empty"

out=$("$dump" --dir "$dir" --json) || fail "tally-dump --json: exit $?"
python3 - "$out" "$path" <<'PY' || fail "tally-dump --json: $out"
import json, sys
doc = json.loads(sys.argv[1])
segs = doc["segments"]
assert len(segs) == 1, segs
assert segs[0]["path"] == sys.argv[2], segs
assert segs[0]["series"] == [], segs
PY
out=$("$dump" --dir "$dir") || fail "tally-dump: exit $?"
grep -q ", 0 series$" <<<"$out" || fail "tally-dump text: $out"
out=$("$dump" --help) || fail "tally-dump --help: exit $?"
grep -q "^usage: tally-dump" <<<"$out" || fail "tally-dump --help: $out"
[ $bad -eq 0 ] && echo "tally-dump reads a segment without series"
exit $bad
