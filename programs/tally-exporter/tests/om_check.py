"""Parse an OpenMetrics exposition with prometheus_client's strict parser
and check the fixture's values exactly.  argv: FILE WRITER_PID."""
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families

text = open(sys.argv[1], encoding="utf-8").read()
pid = sys.argv[2]
fams = {f.name: f for f in text_string_to_metric_families(text)}
def sample(fam, name, **labels):
    for s in fams[fam].samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise SystemExit(f"missing {name} {labels}")
assert fams["fixture_big"].type == "counter"
v = sample("fixture_big", "fixture_big_total", pid=pid)
assert int(v) == 9007199254740992 or int(v) == 9007199254740993, v  # a float64
assert fams["fixture_escapes"].documentation == 'Help with a backslash \\, a "quote" and a\nnewline.', fams["fixture_escapes"].documentation
assert sample("fixture_escapes", "fixture_escapes_total", path='a"b\\c\nd', utf8="café €") == 7
assert fams["fixture_busy_seconds"].unit == "seconds"
assert sample("fixture_in_flight", "fixture_in_flight") == -42
assert fams["fixture_ratio"].type == "gauge"
assert sample("fixture_ratio", "fixture_ratio") == 0.1
assert sample("fixture_coldest", "fixture_coldest") == float("-inf")
h = fams["fixture_latency_ns"]
assert h.type == "histogram" and h.unit == "ns"
assert sample("fixture_latency_ns", "fixture_latency_ns_bucket", le="8191.0") == 1015
assert sample("fixture_latency_ns", "fixture_latency_ns_bucket", le="+Inf") == 1016
assert sample("fixture_latency_ns", "fixture_latency_ns_count") == 1016
assert "tally_exporter_scrape_duration_seconds" in fams
print(f"ok: {len(fams)} families parsed")
