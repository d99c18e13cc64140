"""prometheus_client with tally underneath (tally.use_in_prometheus_client()
or TALLY_PROMETHEUS_CLIENT=1), and what tally's classes share with
prometheus_client's: collect(), describe() and the public namespace."""
from __future__ import annotations

import json
import textwrap

import prometheus_client
import pytest

import tally_metrics as tally
from conftest import child_env, run_py

# An unchanged prometheus_client program: its metrics, updated by three
# forked workers and the parent, then its own exposition through
# MultiProcessCollector (what frameworks do in multiprocess mode) and the
# values its objects give.
APP = textwrap.dedent('''
    import json, os, sys
    {switch}
    from prometheus_client import (CollectorRegistry, Counter, Gauge,
                                   Histogram, Summary, generate_latest,
                                   values)
    from prometheus_client.multiprocess import MultiProcessCollector

    C = Counter("app_requests_total", "Requests.", ["method"])
    G = Gauge("app_inflight", "In flight.", multiprocess_mode="livesum")
    H = Histogram("app_latency_seconds", "Latency.", ["route"],
                  buckets=[0.1, 1])
    S = Summary("app_size_bytes", "Sizes.")
    for i in range(3):
        pid = os.fork()
        if pid == 0:
            for _ in range(1000):
                C.labels("GET").inc()
            C.labels("POST%d" % i).inc(0.25)
            H.labels("/").observe(0.05)
            H.labels("/").observe(5)
            S.observe(10)
            G.inc()
            os._exit(0)
        os.waitpid(pid, 0)
    C.labels("GET").inc()
    reg = CollectorRegistry()
    MultiProcessCollector(reg)
    print(json.dumps(dict(
        value_class=values.ValueClass.__name__,
        get=C.labels("GET")._value.get(),
        text=generate_latest(reg).decode(),
        own=generate_latest().decode())))
''')

EXPECTED = """\
# HELP app_inflight In flight.
# TYPE app_inflight gauge
app_inflight 0.0
# HELP app_requests_total Requests.
# TYPE app_requests_total counter
app_requests_total{method="GET"} 3001.0
app_requests_total{method="POST0"} 0.25
app_requests_total{method="POST1"} 0.25
app_requests_total{method="POST2"} 0.25
# HELP app_latency_seconds Latency.
# TYPE app_latency_seconds histogram
app_latency_seconds_bucket{le="0.1",route="/"} 3.0
app_latency_seconds_bucket{le="1.0",route="/"} 3.0
app_latency_seconds_bucket{le="+Inf",route="/"} 6.0
app_latency_seconds_count{route="/"} 6.0
app_latency_seconds_sum{route="/"} 15.15
# HELP app_size_bytes Sizes.
# TYPE app_size_bytes summary
app_size_bytes_count 3.0
app_size_bytes_sum 30.0
"""


def _run_switched(app, how, env):
    """Runs the program @app with prometheus_client switched to tally
    @how: by the environment (TALLY_PROMETHEUS_CLIENT=1) or by one line
    at its top; returns what it printed, as JSON."""
    if how == "environment":
        env["TALLY_PROMETHEUS_CLIENT"] = "1"
        switch = ""
    else:
        switch = "import tally_metrics as tally; tally.use_in_prometheus_client()"
    return json.loads(run_py(app.format(switch=switch), env))


@pytest.mark.parametrize("how", ["environment", "one line"])
def test_unchanged_app_on_tally(how, tally_dir, tmp_path):
    env = child_env(tally_dir, TALLY_ZONE="promclient")
    out = _run_switched(APP, how, env)
    assert out["value_class"] == "TallyValue"
    # get() of a value is the zone's total, every worker's adds in.
    assert out["get"] == 3001.0
    assert out["text"] == EXPECTED
    # The program's own default registry shows the children only the
    # workers made, with the zone's totals.
    own = out["own"].splitlines()
    for line in ('app_requests_total{method="GET"} 3001.0',
                 'app_requests_total{method="POST1"} 0.25',
                 'app_latency_seconds_bucket{le="+Inf",route="/"} 6.0',
                 'app_latency_seconds_sum{route="/"} 15.15',
                 'app_size_bytes_count 3.0'):
        assert line in own, out["own"]
    # The same series, read by tally's own reader.
    res = tally.read(dir=tally_dir, zone="promclient")
    assert [s.value for f in res.families for s in f.samples
            if s.name == "app_requests_total"
            and s.labels == {"method": "GET"}] == [3001.0]


def test_without_the_switch_nothing_changes(tally_dir, tmp_path):
    env = child_env(tally_dir, TALLY_ZONE="promclient")
    out = run_py("from prometheus_client import values; "
                 "print(values.ValueClass.__name__)", env)
    assert out.strip() == "MutexValue"


def test_no_annotations_in_the_namespace():
    assert not hasattr(tally, "annotations")
    assert set(tally.__all__) <= set(dir(tally))
    for name in ("Summary", "Info", "Enum", "use_in_prometheus_client"):
        assert name in tally.__all__


def test_collect(uniq):
    reg = tally.CollectorRegistry()
    c = tally.Counter(uniq, "Requests.", ["method"], registry=reg)
    c.labels("GET").inc(2)
    c.labels("PUT").inc()
    fams = c.collect()
    assert [(f.name, f.type) for f in fams] == [(uniq, "counter")]
    assert sorted((s.name, s.labels["method"], s.value)
                  for s in fams[0].samples) == [
        (uniq + "_total", "GET", 2.0), (uniq + "_total", "PUT", 1.0)]
    (child,) = c.labels("PUT").collect()
    assert [(s.labels, s.value) for s in child.samples] == [
        ({"method": "PUT"}, 1.0)]
    h = tally.Histogram(uniq + "_h", "H.", buckets=[1], registry=reg)
    h.observe(0.5)
    (f,) = h.collect()
    assert [(s.name, s.value) for s in f.samples] == [
        (uniq + "_h_bucket", 1.0), (uniq + "_h_bucket", 1.0),
        (uniq + "_h_count", 1.0), (uniq + "_h_sum", 0.5)]


@pytest.mark.parametrize("tally_first", [True, False])
def test_a_metric_in_both_libraries_is_refused(uniq, tally_first):
    """A half-migrated application: the same metric defined with
    prometheus_client and with tally in one registry is refused as
    prometheus_client refuses its own duplicates."""
    reg = tally.CollectorRegistry()
    preg = prometheus_client.CollectorRegistry()
    tally.Counter(uniq + "_requests", "Requests.", registry=reg)
    if tally_first:
        preg.register(tally.TallyCollector(reg))
        with pytest.raises(ValueError, match="Duplicated timeseries"):
            prometheus_client.Counter(uniq + "_requests_total", "Requests.",
                                      registry=preg)
    else:
        prometheus_client.Counter(uniq + "_requests_total", "Requests.",
                                  registry=preg)
        with pytest.raises(ValueError, match="Duplicated timeseries"):
            preg.register(tally.TallyCollector(reg))
    # Different names are fine.
    prometheus_client.Gauge(uniq + "_other", "Other.", registry=preg)


def test_info_keys_are_fixed_in_a_zone(uniq):
    i = tally.Info(uniq, "Build.", registry=tally.CollectorRegistry())
    i.info({"version": "1"})
    with pytest.raises(ValueError, match="takes the keys"):
        i.info({"release": "1"})
    with pytest.raises(ValueError):
        tally.Info(uniq + "_u", "U.", unit="seconds")
    with pytest.raises(ValueError):
        tally.Enum(uniq + "_e", "E.", states=[])
    with pytest.raises(ValueError):
        tally.Summary(uniq + "_s", "S.", ["quantile"])


# A histogram child made again after remove() and clear(), and the same
# histogram in a second registry (as test fixtures do): its buckets keep
# their places, and the exposition still works.
REMADE = textwrap.dedent('''
    import json
    import tally_metrics as tally; tally.use_in_prometheus_client()
    from prometheus_client import CollectorRegistry, Histogram, \\
        generate_latest
    H = Histogram("remade_seconds", "Remade.", ["route"], buckets=[1, 2])
    H.labels("a").observe(0.5)
    H.remove("a")
    H.labels("a").observe(1.5)
    H.clear()
    H.labels("a").observe(5)
    first = generate_latest().decode()
    regs = [CollectorRegistry() for _ in range(2)]
    hs = [Histogram("twice_seconds", "Twice.", buckets=[1],
                    registry=r) for r in regs]
    hs[0].observe(0.5)
    hs[1].observe(3)
    print(json.dumps(dict(first=first,
                          second=generate_latest(regs[1]).decode())))
''')


def test_histogram_children_made_again(tally_dir):
    env = child_env(tally_dir, TALLY_ZONE="remade")
    out = json.loads(run_py(REMADE, env))
    first = out["first"].splitlines()
    # The zone keeps every observation (its counts never go backwards).
    for line in ('remade_seconds_bucket{le="1.0",route="a"} 1.0',
                 'remade_seconds_bucket{le="2.0",route="a"} 2.0',
                 'remade_seconds_bucket{le="+Inf",route="a"} 3.0'):
        assert line in first, out["first"]
    second = out["second"].splitlines()
    for line in ('twice_seconds_bucket{le="1.0"} 1.0',
                 'twice_seconds_bucket{le="+Inf"} 2.0'):
        assert line in second, out["second"]


def test_counter_reset_says_why(tally_dir):
    env = child_env(tally_dir, TALLY_ZONE="reset")
    out = run_py(textwrap.dedent('''
        import tally_metrics as tally; tally.use_in_prometheus_client()
        from prometheus_client import Counter
        c = Counter("resets_total", "Resets.")
        c.inc()
        # reset() (from prometheus_client 0.18) sets the value to 0.
        for reset in (getattr(c, "reset", None), lambda: c._value.set(0)):
            try:
                if reset:
                    reset()
            except ValueError as e:
                print(e)
        print(c._value.get())
    '''), env)
    lines = out.splitlines()
    assert lines[-1] == "1.0"
    assert "Counter.reset() is not supported" in lines[0]


# Two workers of an unchanged prometheus_client program set a gauge of
# each mode to 1 and 2; the default registry of either, without
# PROMETHEUS_MULTIPROC_DIR, shows the mode applied across the zone while
# both run, and (the parent's) without the one killed under the live
# modes.
MODES_APP = textwrap.dedent('''
    import json, os, signal
    {switch}
    from prometheus_client import Gauge, generate_latest

    G = dict((m, Gauge("app_" + m, "G.", ["k"], multiprocess_mode=m))
             for m in ("livesum", "sum", "max", "livemax", "min", "all"))

    def shown():
        out = {{}}
        for line in generate_latest().decode().splitlines():
            if line.startswith("app_"):
                name, value = line.split(" ")
                out[name.split("{{")[0][4:]] = float(value)
        return out
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for g in G.values():
            g.labels("a").set(2)
        os.write(w, b"r")
        os.read(go_r, 1)
        os.write(w, json.dumps(shown()).encode() + b"\\n")
        signal.pause()
        os._exit(0)
    os.read(r, 1)
    for g in G.values():
        g.labels("a").set(1)
    os.write(go_w, b"g")
    with os.fdopen(r) as f:
        child = json.loads(f.readline())
    both = shown()
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    print(json.dumps(dict(both=both, child=child, one=shown())))
''')


@pytest.mark.parametrize("how", ["environment", "one line"])
def test_default_registry_applies_the_gauge_mode(how, tally_dir):
    env = child_env(tally_dir, TALLY_ZONE="promclient_modes")
    # prometheus_client's own multiprocess mode would combine the
    # workers' files instead: tally's zone alone does it here.
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    out = _run_switched(MODES_APP, how, env)
    assert out["both"] == {"livesum": 3.0, "sum": 3.0, "max": 2.0,
                           "livemax": 2.0, "min": 1.0, "all": 1.0}
    # The other worker's registry: the same combined values (under
    # "all", one series per process: the last line read is shown).
    assert {k: v for k, v in out["child"].items() if k != "all"} == \
        {"livesum": 3.0, "sum": 3.0, "max": 2.0, "livemax": 2.0,
         "min": 1.0}
    assert out["one"] == {"livesum": 1.0, "sum": 3.0, "max": 2.0,
                          "livemax": 1.0, "min": 1.0, "all": 1.0}
