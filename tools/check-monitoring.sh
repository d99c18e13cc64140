#!/usr/bin/env bash
# Checks monitoring/, the alert rules and the dashboard shipped with tally:
# promtool parses the rules (check rules) and runs their cases (test
# rules: each alert fires on one series and not on another); then the
# dashboard is held against the rules and against what BUILD_DIR's
# tally-exporter serves: every query of the dashboard parses (promtool,
# with Grafana's variables filled in), every tally_* name of the rules and
# the dashboard is one the exporter exports or a rule records, and every
# series the rules read is drawn by a panel.  Takes about a second.
set -eu
cd "$(dirname "$0")/.."
. tools/listen.sh
build=${1:-build}
exporter=$build/programs/tally-exporter/tally-exporter
command -v promtool >/dev/null || { echo "monitoring: no promtool (make deps installs prometheus)"; exit 1; }
[ -x "$exporter" ] || { echo "monitoring: $exporter is not built"; exit 1; }
work=$(mktemp -d)
pid=
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

promtool check rules monitoring/tally.rules.yml >"$work/check.log" 2>&1 ||
	{ cat "$work/check.log"; echo "monitoring: promtool check rules failed"; exit 1; }
(cd monitoring && promtool test rules tally.rules.test.yml) >"$work/test.log" 2>&1 ||
	{ cat "$work/test.log"; echo "monitoring: promtool test rules failed"; exit 1; }

# The names the exporter serves: its TYPE lines (a counter's names its
# _total sample in text format 0.0.4), from an empty directory, which
# still lists every tally_exporter_* and tally_segment_* family.
mkdir -m 700 "$work/zones"
timeout 20 "$exporter" --listen 127.0.0.1:0 --dir "$work/zones" 2>"$work/exporter.log" &
pid=$!
port=$(listen_port "$work/exporter.log" "$pid") ||
	{ cat "$work/exporter.log"; echo "monitoring: the exporter did not start"; exit 1; }
url=http://127.0.0.1:$port/metrics
curl -sf "$url" | sed -n 's/^# TYPE \([a-z_:]*\) .*/\1/p' >"$work/exported"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
[ -s "$work/exported" ] || { echo "monitoring: no metrics from $url"; exit 1; }

python3 - monitoring/tally.rules.yml monitoring/dashboard.json "$work/exported" \
	"$work/queries.yml" <<'EOF'
import json, re, sys

rules_path, dash_path, exported_path, queries_path = sys.argv[1:5]
exported = set(open(exported_path).read().split())
fail = []

# The rules file, read line by line (the system Python has no YAML
# module): each expr (one line, or a block after "expr: |"), each record.
recorded, rule_exprs, record_of = set(), [], {}
last_record = None
lines = open(rules_path).read().split("\n")
i = 0
while i < len(lines):
    m = re.match(r"^(\s*)(?:- )?(record|expr): (.*)$", lines[i])
    i += 1
    if not m:
        continue
    if m.group(2) == "record":
        last_record = m.group(3).strip()
        recorded.add(last_record)
        continue
    text = m.group(3).strip()
    if text in ("|", ">"):
        block = []
        while i < len(lines) and (lines[i].strip() == "" or
                                  len(lines[i]) - len(lines[i].lstrip()) > len(m.group(1))):
            block.append(lines[i].strip())
            i += 1
        text = " ".join(block)
    rule_exprs.append(text)
    if last_record:
        record_of[last_record] = text
    last_record = None

def names(expr):
    """The tally metric names an expression reads (recorded tally:...
    names and exported tally_... names)."""
    return set(re.findall(r"\btally[_:][a-z0-9_:]*[a-z0-9_]", expr))

dash = json.load(open(dash_path))
for key in ("uid", "title", "panels", "templating", "schemaVersion"):
    if key not in dash:
        fail.append(f"dashboard: no {key}")
ids, dash_exprs = set(), []
def walk(panels):
    for p in panels:
        if p.get("id") in ids:
            fail.append(f"dashboard: panel id {p.get('id')} twice")
        ids.add(p.get("id"))
        if p.get("type") == "row":
            walk(p.get("panels", []))
            continue
        if not p.get("targets"):
            fail.append(f"dashboard: panel {p.get('title')!r} has no query")
        for t in p.get("targets", []):
            if not t.get("expr") or not t.get("refId"):
                fail.append(f"dashboard: panel {p.get('title')!r}: a target without expr or refId")
            else:
                dash_exprs.append((p.get("title"), t["expr"]))
walk(dash.get("panels", []))
variables = {v["name"] for v in dash.get("templating", {}).get("list", [])}

# Every query parses: Grafana's variables filled in as Grafana would, the
# queries written as recording rules for promtool check rules.
with open(queries_path, "w") as q:
    q.write("groups:\n  - name: dashboard\n    rules:\n")
    for n, (title, e) in enumerate(dash_exprs):
        for v in re.findall(r"\$\{?(\w+)", e):
            if v not in variables and not v.startswith("__"):
                fail.append(f"dashboard: panel {title!r} uses ${v}, not a variable of the dashboard")
        filled = e.replace("$__rate_interval", "5m").replace("$__interval", "1m")
        filled = re.sub(r"\$\{?\w+\}?", ".+", filled)
        q.write(f"      - record: dashboard:query:{n}\n        expr: {json.dumps(filled)}\n")

known = exported | recorded
for where, exprs in (("rules", rule_exprs), ("dashboard", [e for _, e in dash_exprs])):
    for e in exprs:
        for name in names(e) - known:
            fail.append(f"{where}: {name} is neither served by tally-exporter nor recorded by a rule")
# Drawn: named by a panel's query, or read by a recording rule whose
# series a panel draws.
drawn = set()
for _, e in dash_exprs:
    drawn |= names(e)
grew = True
while grew:
    grew = False
    for rec, e in record_of.items():
        if rec in drawn and not names(e) <= drawn:
            drawn |= names(e)
            grew = True
for e in rule_exprs:
    for name in sorted(names(e) - drawn):
        fail.append(f"rules: {name} is alerted on or recorded, but no dashboard panel draws it")
for f in fail:
    print("monitoring:", f)
print(f"monitoring: {len(rule_exprs)} rule expressions, {len(dash_exprs)} dashboard queries, "
      f"{len(exported)} exported names checked")
sys.exit(1 if fail else 0)
EOF
promtool check rules "$work/queries.yml" >"$work/queries.log" 2>&1 ||
	{ cat "$work/queries.log"; echo "monitoring: a dashboard query does not parse"; exit 1; }
echo "monitoring: promtool check and test rules pass; the dashboard's queries parse and name what the exporter serves and the rules record"
