"""One writer of the exposition: tally.generate_latest() and a
TallyCollector written by tally.generate_latest() give the bytes that
tally-exporter --aggregate --self-metrics=no serves for the same zone,
in text format 0.0.4 and in OpenMetrics, so that a change of a name, an
escape, a suffix, an le bound or a unit on either side fails here.

tally-exporter is $TALLY_EXPORTER or the build tree's; the tests that
need it, curl or promtool are skipped without them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import prometheus_client
import pytest

import tally_metrics as tally
from conftest import child_env, run_py
from test_exporter import EXPORTER, _scrape

# Every kind the package writes, with what a writer may spell
# differently: escapes in help and label values, a unit of tally's
# vocabulary, fractions, negative values, a namespace and a unit suffix,
# a histogram's own bounds, a summary, per-process gauges.
WRITER = r"""
import tally_metrics as tally
reg = tally.CollectorRegistry()
c = tally.Counter("shop_requests", 'Requests "q" \\ and\nnewline.',
                  ["method", "path"], registry=reg)
c.labels("GET", '/a"b\\c\nd').inc(3)
c.labels("POST", "/é").inc(0.25)
tally.Counter("shop_busy", "Busy time.", unit="nanoseconds",
              registry=reg).inc(1_500_000_001)
tally.Counter("sent", "Sent.", namespace="app", subsystem="net",
              unit="bytes", registry=reg).inc(4096)
tally.Gauge("shop_temp", "Temperature.", registry=reg).set(-1.5)
tally.Gauge("shop_big", "Big.", registry=reg).set(1.5e12)
g = tally.Gauge("shop_inprogress", "In progress.", registry=reg,
                multiprocess_mode="livesum")
g.inc(2)
tally.Gauge("shop_max", "Max.", ["q"], registry=reg,
            multiprocess_mode="max").labels("a").set(7.25)
h = tally.Histogram("shop_order_value_dollars", "Order value.", ["shop"],
                    buckets=[0.1, 1, 2.5, 10, 1e7], registry=reg)
for v in (0.05, 1, 7.25, 19.99, 1e8):
    h.labels("a").observe(v)
tally.Histogram("shop_latency_seconds", "Latency.",
                registry=reg).observe(0.3)
s = tally.Summary("shop_size_bytes", "Sizes.", registry=reg)
s.observe(512)
s.observe(-1.5)
print("ok", flush=True)
import sys
sys.stdin.read()  # alive, so that its gauges are current, until the test ends
"""


@pytest.fixture
def zone(tally_dir):
    """A process that wrote WRITER's metrics into @tally_dir, alive
    while the test runs."""
    p = subprocess.Popen(["timeout", "60", os.environ.get(
        "PYTHON", __import__("sys").executable), "-c", WRITER],
        env=child_env(tally_dir), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ok"
        yield tally_dir
    finally:
        p.stdin.close()
        p.wait(timeout=30)


def _need():
    if not os.access(EXPORTER, os.X_OK):
        pytest.skip("no tally-exporter at " + EXPORTER)
    if not shutil.which("curl"):
        pytest.skip("curl not installed")


def test_generate_latest_is_the_exporters_scrape(zone):
    _need()
    tally_dir = zone
    text, om = _scrape(tally_dir, ["--aggregate", "--self-metrics=no"], [
        "text/plain", "application/openmetrics-text; version=1.0.0"])
    mine = tally.generate_latest(dir=tally_dir, all_zones=True)
    mine_om = tally.generate_latest(dir=tally_dir, all_zones=True,
                                    openmetrics=True)
    # Not two empty answers: every metric of the writer is there.
    for line in (b'shop_requests_total{method="GET",path="/a\\"b\\\\c\\nd"} 3',
                 b"# HELP shop_requests_total Requests \"q\" \\\\ and\\n",
                 b"shop_busy_seconds_total 1.500000001\n",
                 b"app_net_sent_bytes_total 4096\n",
                 b'shop_order_value_dollars_bucket{shop="a",le="2.5"} 2\n',
                 b"shop_inprogress 2\n", b"shop_big 1500000000000\n",
                 b'shop_max{q="a"} 7.25\n', b"shop_size_bytes_count 2\n"):
        assert line in text
    assert text == mine
    assert om.endswith(b"# EOF\n") and b"# UNIT shop_busy_seconds" in om
    assert om == mine_om


def test_promtool_accepts_generate_latest(zone):
    if not shutil.which("promtool"):
        pytest.skip("promtool not installed")
    tally_dir = zone
    text = tally.generate_latest(dir=tally_dir, all_zones=True)
    r = subprocess.run(["promtool", "check", "metrics"], input=text,
                       capture_output=True, timeout=30)
    assert (r.returncode, r.stdout + r.stderr) == (0, b"")


def _parsed(text):
    """The metrics of @text, an le bound by its value (the writers spell
    a float differently: "1" and "1.0")."""
    from prometheus_client.parser import text_string_to_metric_families

    def labels(s):
        return sorted((k, float(v) if k == "le" else v)
                      for k, v in s.labels.items())
    return sorted((f.name, f.type, f.documentation,
                   sorted((s.name, labels(s), s.value) for s in f.samples))
                  for f in text_string_to_metric_families(text))


def test_tally_collector_is_written_by_the_exporters_writer(zone):
    """tally.generate_latest() of a prometheus_client registry writes its
    TallyCollector with the exporter's writer and its other collectors
    with prometheus_client, in the order registered; the samples are
    those of prometheus_client's own generate_latest() of the same
    registry."""
    tally_dir = zone
    creg = prometheus_client.CollectorRegistry()
    before = prometheus_client.Counter("own_before", "Before.",
                                       registry=creg)
    before.inc(2)
    coll = tally.TallyCollector(dir=tally_dir, all_zones=True)
    creg.register(coll)
    prometheus_client.Gauge("own_after", "After.", registry=creg).set(5)
    zone = tally.generate_latest(dir=tally_dir, all_zones=True)

    got = tally.generate_latest(creg)
    first = prometheus_client.generate_latest(
        _only(creg, lambda c: c is not coll, stop_at=coll))
    last = prometheus_client.generate_latest(
        _only(creg, lambda c: c is not coll, start_at=coll))
    assert b"own_before_total 2.0\n" in first
    assert got == first + zone + last
    assert _parsed(got.decode()) == _parsed(
        prometheus_client.generate_latest(creg).decode())
    om = tally.generate_latest(creg, openmetrics=True)
    assert om.count(b"# EOF\n") == 1 and om.endswith(b"# EOF\n")
    assert tally.generate_latest(dir=tally_dir, all_zones=True,
                                 openmetrics=True)[:-6] in om
    assert coll.skipped == []


class _only:
    """The collectors of @reg between @start_at and @stop_at that @keep
    keeps, as a registry for prometheus_client.generate_latest()."""

    def __init__(self, reg, keep, start_at=None, stop_at=None):
        self.cs = []
        on = start_at is None
        for c in list(reg._collector_to_names):
            if c is stop_at:
                break
            if on and keep(c):
                self.cs.append(c)
            on = on or c is start_at

    def collect(self):
        for c in self.cs:
            yield from c.collect()


def test_a_registry_without_tally_collector_is_prometheus_clients():
    creg = prometheus_client.CollectorRegistry(target_info={"app": "x"})
    prometheus_client.Counter("plain", "Plain.", registry=creg).inc()
    assert tally.generate_latest(creg) == \
        prometheus_client.generate_latest(creg)


# Under the switch: tally.generate_latest() of the application's own
# registries writes the zone with the exporter's writer, once.
SWITCHED = r"""
import json
import prometheus_client as pc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
import tally_metrics as tally

Counter("sw_requests", "Requests.", ["code"]).labels("200").inc(3)
Histogram("sw_seconds", "Latency.", buckets=[1, 2]).observe(1.5)
Gauge("sw_inflight", "In flight.", multiprocess_mode="livesum").inc()


class Own:
    def collect(self):
        yield GaugeMetricFamily("own_thing", "Own.", value=4)


pc.REGISTRY.register(Own())
mp = CollectorRegistry()
MultiProcessCollector(mp)
print(json.dumps(dict(
    zone=tally.TallyCollector(tally._backend._registry()).expose().decode(),
    default=tally.generate_latest(pc.REGISTRY).decode(),
    default_own=pc.generate_latest(pc.REGISTRY).decode(),
    mp=tally.generate_latest(mp).decode(),
    mp_own=pc.generate_latest(mp).decode(),
    om=tally.generate_latest(pc.REGISTRY, openmetrics=True).decode())))
"""


def test_switched_registries_are_written_from_the_zone(tally_dir):
    out = json.loads(run_py(
        SWITCHED, child_env(tally_dir, TALLY_PROMETHEUS_CLIENT=1)))
    zone = out["zone"]
    assert 'sw_requests_total{code="200"} 3\n' in zone
    assert 'sw_seconds_bucket{le="2"} 1\n' in zone
    assert "sw_inflight 1\n" in zone
    # A MultiProcessCollector reads the zone: its registry is the zone.
    assert out["mp"] == zone
    # The default registry: its metrics held in tally are the zone,
    # written once where the first of them was registered; the other
    # collector by prometheus_client, after.
    assert out["default"] == zone + "# HELP own_thing Own.\n" \
        "# TYPE own_thing gauge\nown_thing 4.0\n"
    # The same samples as prometheus_client's own writer gives, but for
    # the _created of its own registry's metrics (a zone's series have
    # no one creation time; its multiprocess mode has none either).
    assert _parsed(out["default"]) == [
        f for f in _parsed(out["default_own"])
        if not f[0].endswith("_created")]
    assert _parsed(out["mp"]) == _parsed(out["mp_own"])
    assert out["om"].count("# EOF\n") == 1 and out["om"].endswith("# EOF\n")


def test_a_directory_that_cannot_be_read_raises(tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(tally.TallyError) as e:
        tally.generate_latest(dir=missing, all_zones=True)
    assert isinstance(e.value, OSError) and e.value.errno == 2
    assert str(e.value).endswith(
        f"cannot read the tally directory: {missing}: "
        "No such file or directory")


# A child that writes its zone's exposition again and again, the n-th
# allocation of the extension failing in the n-th pass (failalloc.c),
# until a pass meets no failure: each pass answers or raises
# MemoryError, the process goes on, a pass that answers answers in full,
# and the passes after give the same bytes as the first.  Then the same
# for tally.read(), which reads through the same reader API.
OOM_CHILD = r"""
import ctypes, sys
import tally_metrics as tally
lib = ctypes.CDLL(None)
lib.failalloc_arm.argtypes = [ctypes.c_long]

def exposition():
    return tally.generate_latest(dir=sys.argv[1], all_zones=True)

def families():
    r = tally.read(dir=sys.argv[1], all_zones=True)
    return r.segments, r.skipped, [
        (f.name, f.type, [(s.name, s.labels, s.value) for s in f.samples])
        for f in r.families]

def passes(read):
    want = read()
    n, raised, differed = 1, 0, []
    while n < 100000:
        lib.failalloc_arm(n)
        try:
            got = read()
        except MemoryError as e:
            assert lib.failalloc_fired(), e
            raised += "tally: out of memory writing the exposition" in str(e)
        else:
            if not lib.failalloc_fired():
                break
            if got != want:
                differed.append(n)
        n += 1
    lib.failalloc_arm(0)
    assert read() == want
    return n, raised, " ".join(map(str, differed)) or "-"

assert b"shop_requests_total" in exposition()
print(*passes(exposition))
print(*passes(families))
"""


def test_exposition_out_of_memory_raises(zone, tmp_path):
    """Out of memory while the exposition is written or the zone read
    (any allocation of the extension, libtally's reader included, one
    at a time) raises MemoryError in the caller, or is got over and the
    answer is whole: never one without a series.  The process keeps
    running and its next exposition is whole."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the allocation-failure library")
    lib = str(tmp_path / "failalloc.so")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", lib, os.path.join(
        os.path.dirname(__file__), "failalloc.c"), "-ldl"], check=True,
        timeout=60)
    env = child_env(zone, LD_PRELOAD=lib)
    r = subprocess.run([os.environ.get("PYTHON", __import__("sys").executable),
                        "-c", OOM_CHILD, zone], env=env, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    expose, read = r.stdout.splitlines()
    passes, raised, differed = expose.split(maxsplit=2)
    # Every allocation of a pass was failed once, and the writer's own
    # failures were raised as its MemoryError.
    assert int(passes) > 20 and int(raised) > 10, r.stdout
    # A pass that answered despite its failed allocation answered in
    # full: never without a series the zone holds.
    assert differed == "-", "expositions that answered short: " + differed
    passes, _, differed = read.split(maxsplit=2)
    assert int(passes) > 10, r.stdout
    assert differed == "-", "reads that answered short: " + differed
