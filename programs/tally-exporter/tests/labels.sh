#!/usr/bin/env bash
# exporter-labels: label names that clash in the exposition.  The test
# writer's segment is patched as an older library or a crafted file
# would hold it (a histogram with its own "le", a label name twice); it
# also has series with the exporter's own label name (pid), and one of
# 3000 bytes of labels.  No sample of the exporter has a label name twice,
# the clashes are counted, the long series is exported exactly, and a
# real Prometheus (temporary storage, 1 s scrapes, 127.0.0.1) keeps the
# target up and stores the series.
. "$(dirname "$0")/lib.sh"
command -v prometheus >/dev/null || fail "prometheus not installed"
start_writer clash 60
grep -q '^ready' "$writer_out" || { cat "$writer_out" >&2; fail "the writer failed"; }
start_exporter
scrape "http://127.0.0.1:$port/metrics" >"$dir/m.txt"
python3 - "$dir/m.txt" <<'PY' || fail "the exposition is not what it should be"
import re, sys
text = open(sys.argv[1]).read()
pair = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
bad = 0
for line in text.splitlines():
    if line.startswith("#") or "{" not in line:
        continue
    names = [m.group(1) for m in pair.finditer(line[line.index("{"):line.rindex("}")])]
    if len(names) != len(set(names)):
        print("a label name twice:", line[:200]); bad = 1
def has(s):
    if s not in text:
        print("missing:", s[:120]); return 0
    return 1
ok = bad == 0
ok &= has('clash_ok_total{pid="')
ok &= has('clash_pid_total{pid="mine",tally_pid="')
ok &= has('clash_hist_ns_bucket{exported_le="crafted",pid="')
ok &= "clash_dup_total{" not in text and "clash_both_total{" not in text
ok &= has('tally_exporter_label_clashes_total{action="renamed"} 2\n')
ok &= has('tally_exporter_label_clashes_total{action="dropped"} 2\n')
route = "".join(chr(97 + i % 26) for i in range(3000))
ok &= has('clash_long_total{method="GET",route="%s",pid="' % route)
sys.exit(0 if ok else 1)
PY
ok "no label name twice; le renamed exported_le, pid tally_pid; 2 series dropped; 3000 bytes of labels exported"

start_prometheus
up=
for _ in $(seq 60); do
	up=$(value 'up{job="tally"}')
	[ -n "$up" ] && [ -n "$(value 'clash_ok_total{job="tally"}')" ] && break
	sleep 0.5
done
[ "$up" = 1 ] || { tail -5 "$dir/prom.log"; query 'up'; fail "Prometheus: up = '$up'"; }
[ "$(value 'clash_ok_total{job="tally"}')" = 11 ] || fail "clash_ok_total not stored"
[ "$(value 'clash_hist_ns_count{job="tally",exported_le="crafted"}')" = 1 ] ||
	fail "the histogram with exported_le not stored"
[ "$(value 'clash_pid_total{job="tally",pid="mine"}')" = 13 ] || fail "clash_pid_total not stored"
[ "$(value 'clash_long_total{job="tally",method="GET"}')" = 15 ] || fail "clash_long_total not stored"
route=$(python3 -c 'print("".join(chr(97 + i % 26) for i in range(3000)))')
[ "$(value "clash_long_total{route=\"$route\"}")" = 15 ] || fail "the long label value not stored exactly"
ok "Prometheus: up = 1, the renamed series and the 3000-byte label stored"
