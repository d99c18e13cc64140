#!/usr/bin/env bash
# exporter-promtool: promtool check metrics accepts the 0.0.4 output of
# every metric kind, labels needing escapes, and histograms.
. "$(dirname "$0")/lib.sh"
command -v promtool >/dev/null || fail "promtool not installed (Debian package prometheus)"
start_writer fixture 60
start_exporter
scrape "http://127.0.0.1:$port/metrics" >"$dir/m.txt"
grep -q '^fixture_latency_ns_bucket' "$dir/m.txt" || fail "no histogram in the scrape"
# promtool prints lint hints (e.g. about units) with status 0 and real
# errors with status 1 (parse errors, duplicates).
# Status 3 is lint only (names and help style: the fixture has an empty
# help and a _ns name on purpose); 1 is an error.
rc=0
out=$(timeout 30 promtool check metrics <"$dir/m.txt" 2>&1) || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 3 ] || { echo "$out"; fail "promtool check metrics: status $rc"; }
echo "$out" | grep -i 'error' && fail "promtool reported errors"
ok "promtool check metrics (hints: $(echo "$out" | grep -c .))"
# And a deliberately broken exposition fails, so the check can fail.
printf '# TYPE x counter\nx{a="1"} 1\nx{a="1"} 2\n' | timeout 30 promtool check metrics >/dev/null 2>&1 &&
	fail "promtool accepted a duplicate series"
ok "promtool rejects a broken exposition"
