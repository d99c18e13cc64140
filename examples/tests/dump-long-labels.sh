#!/usr/bin/env bash
# tally-dump-long-labels: tally-dump -j prints a series of 3000 bytes of
# labels exactly (the exporter's test writer, "clash" mode, makes it).
#   dump-long-labels.sh TALLY_DUMP TESTWRITER
set -euo pipefail
dump=$1 writer=$2
dir=$(mktemp -d /dev/shm/tally-dumptest.XXXXXX)
chmod 700 "$dir"
wpid=
trap '[ -n "$wpid" ] && kill "$wpid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
TALLY_DIR=$dir "$writer" clash 30 >"$dir/out" 2>&1 &
wpid=$!
for _ in $(seq 100); do grep -q '^ready' "$dir/out" && break; sleep 0.05; done
grep -q '^ready' "$dir/out" || { cat "$dir/out" >&2; exit 1; }
TALLY_DIR=$dir "$dump" -j --pid "$wpid" >"$dir/dump.json"
python3 - "$dir/dump.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
route = "".join(chr(97 + i % 26) for i in range(3000))
def walk(o):
    if isinstance(o, dict):
        if o.get("name") == "clash_long_total":
            yield o
        for v in o.values():
            yield from walk(v)
    elif isinstance(o, list):
        for v in o:
            yield from walk(v)
found = list(walk(doc))
assert len(found) == 1, found
s = found[0]
assert s["labels"] == {"method": "GET", "route": route}, s["labels"]
assert s["value"] == 15, s
PY
echo "ok: tally-dump -j shows the 3000-byte label set exactly"
