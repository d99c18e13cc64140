"""_promclient: the switch plugs into a supported prometheus_client
release whose internals are as expected, or changes nothing of it and
says so in one line."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import child_env
from tally_metrics import _promclient


@pytest.mark.parametrize("version", [_promclient.SUPPORTED[0], "0.17.1",
                                     "0.26.0", "0.26.99", "0.17.0.post1"])
def test_supported_releases(version):
    _promclient.check_version(version)


@pytest.mark.parametrize("version", ["0.16.0", "0.27.0", "0.27.0rc1",
                                     "1.0.0", "0.9", "", "x.y", None])
def test_other_releases_are_refused(version):
    with pytest.raises(_promclient.Unsupported):
        _promclient.check_version(version)


def test_pyproject_extra_says_the_same():
    path = os.path.join(os.path.dirname(__file__), "..", "..",
                        "pyproject.toml")
    if not os.path.exists(path):
        pytest.skip("not run from the source tree")
    with open(path) as f:
        text = f.read()
    low, high = _promclient.SUPPORTED
    extra = re.search(r'^prometheus-client = \["([^"]*)"\]', text, re.M)
    assert extra and extra.group(1) == f"prometheus_client>={low},<{high}"


def test_installed_release_passes():
    # The release the tests run with is a supported one, and check()
    # finds everything in it (it changes nothing).
    found = _promclient.check()
    assert found["values"].ValueClass.__name__ != "TallyValue"


def run(code, env):
    r = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


# What the application sees of prometheus_client after the switch gave
# up: its own value class, collectors and registry, all unchanged.
UNCHANGED = textwrap.dedent('''
    import json
    from prometheus_client import Counter, REGISTRY, generate_latest
    from prometheus_client import metrics, multiprocess, registry, values
    c = Counter("kept_total", "Kept.")
    c.inc(3)
    print(json.dumps(dict(
        value_class=type(c._value).__name__,
        get=c._value.get(),
        collect=metrics.MetricWrapperBase.collect.__qualname__,
        init=metrics.MetricWrapperBase.__init__.__qualname__,
        reg_collect=registry.CollectorRegistry.collect.__qualname__,
        mp=getattr(multiprocess, "MultiProcessCollector", None) and
           multiprocess.MultiProcessCollector.collect.__qualname__,
        process="process_cpu_seconds_total" in generate_latest().decode(),
        methods=[type(m).__name__ for m in (
            metrics.Counter.labels, metrics.Gauge.labels,
            metrics.Histogram.labels, metrics.Summary.labels,
            metrics.Counter.inc, metrics.Histogram.observe)])))
''')


def assert_unchanged(out, err):
    res = json.loads(out)
    assert res["value_class"] != "TallyValue"
    assert res["get"] == 3.0
    assert res["collect"] == "MetricWrapperBase.collect"
    assert res["init"] == "MetricWrapperBase.__init__"
    assert res["reg_collect"] == "CollectorRegistry.collect"
    assert res["mp"] in (None, "MultiProcessCollector.collect")
    assert res["process"]
    assert res["methods"] == ["function"] * 6
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tally: TALLY_PROMETHEUS_CLIENT is set but")


def test_release_outside_the_range_leaves_it_alone(tally_dir):
    # The version the switch reads, made one it does not support, before
    # the application's import of prometheus_client engages the switch.
    env = child_env(tally_dir, TALLY_PROMETHEUS_CLIENT="1",
                    TALLY_ZONE="outside")
    out, err = run("import tally_metrics._promclient as p\n"
                   "p.installed_version = lambda: '0.99.0'\n" + UNCHANGED,
                   env)
    assert_unchanged(out, err)
    assert "0.99.0 is not a supported release" in err


@pytest.mark.parametrize("owner,attr,other", [
    ("multiprocess", "MultiProcessCollector", None),
    ("metrics.MetricWrapperBase", "_is_parent", None),
    ("metrics.MetricWrapperBase", "_is_parent", "lambda self: False"),
    ("metrics.Histogram", "_metric_init", None),
    ("values", "ValueClass", "lambda typ, name: None"),
    ("core.Metric", "add_sample", None),
    ("core.Metric", "add_sample", "lambda self, *a, **k: None"),
    ("registry.CollectorRegistry", "unregister", None),
    # An observation the _sum value does not get.
    ("metrics.Histogram", "observe",
     "lambda self, amount, exemplar=None: self._buckets[0].inc(1)"),
    # Buckets made before the sum, or named otherwise.
    ("metrics.Histogram", "_metric_init",
     "lambda self: [values.ValueClass(self._type, self._name, "
     "self._name + '_bucket', self._labelnames + ('le',), "
     "self._labelvalues + ('+Inf',), '')]"),
    ("metrics.Summary", "_metric_init",
     "lambda self: setattr(self, '_sum', values.ValueClass(self._type, "
     "self._name, self._name + '_total', self._labelnames, "
     "self._labelvalues, ''))"),
    # Values made otherwise than by values.ValueClass.
    ("metrics.Counter", "_metric_init",
     "lambda self: setattr(self, '_value', values.MutexValue("
     "self._type, self._name, self._name + '_total', self._labelnames, "
     "self._labelvalues, ''))"),
    ("metrics.Gauge", "set", "lambda self, value: None"),
    # What the C methods replace, done otherwise: a labels() that keys
    # its children by the values as given (not their str()), one that
    # returns no child, a Counter.inc() that adds twice the amount, an
    # observe() whose bounds are exclusive.
    ("metrics.MetricWrapperBase", "labels",
     "lambda self, *a, **k: self._metrics[a]"),
    ("metrics.MetricWrapperBase", "labels", "lambda self, *a, **k: None"),
    ("metrics.Counter", "inc",
     "lambda self, amount=1, exemplar=None: self._value.inc(amount * 2)"),
    ("metrics.Histogram", "observe",
     "lambda self, amount, exemplar=None: (self._sum.inc(amount), "
     "self._buckets[[amount < b for b in self._upper_bounds].index(True)]"
     ".inc(1))"),
    ("metrics.Counter", "inc", None),
])
def test_internals_that_differ_leave_it_alone(tally_dir, owner, attr, other):
    # prometheus_client imported without the switch, one internal taken
    # out (or given another signature), the switch asked for as the .pth
    # hook does, then the internal put back for the application to run.
    env = child_env(tally_dir, TALLY_ZONE="differ")
    env.pop("TALLY_PROMETHEUS_CLIENT", None)
    change = (f"delattr(owner, {attr!r})" if other is None
              else f"setattr(owner, {attr!r}, {other})")
    code = textwrap.dedent(f'''
        import os
        from prometheus_client import core, metrics, multiprocess
        from prometheus_client import registry, values
        owner = {owner}
        saved = vars(owner)[{attr!r}]
        {change}
        os.environ["TALLY_PROMETHEUS_CLIENT"] = "1"
        from tally_metrics import _backend
        _backend._from_environment()
        assert not _backend._installed
        setattr(owner, {attr!r}, saved)
    ''') + UNCHANGED
    out, err = run(code, env)
    assert_unchanged(out, err)


# --- Each read of prometheus_client, against the installed release
# (python/tests/run.sh runs this file against the oldest supported one
# too).

def test_reads_of_a_metric():
    from prometheus_client import Counter
    c = Counter("reads", "Reads.", ["a", "b"], registry=None)
    assert _promclient.metric_name(c) == "reads"
    assert _promclient.metric_type(c) == "counter"
    assert _promclient.label_names(c) == ("a", "b")
    assert _promclient.is_parent(c) is True
    assert ("x", "y") not in _promclient.children(c)
    child = c.labels("x", "y")
    assert ("x", "y") in _promclient.children(c)
    assert _promclient.is_parent(child) is False
    assert _promclient.backed(c) is False
    plain = Counter("plain", "Plain.", registry=None)
    assert _promclient.is_parent(plain) is False


def test_c_methods_are_made_not_put():
    # check() makes the C methods from the release's own; only patch()
    # puts them on the classes.
    from prometheus_client import metrics
    fast = _promclient.check()["fast"]
    assert type(fast["labels"]).__name__ == "method_descriptor"
    assert fast["inc"][0] is metrics.Counter
    assert fast["observe"][0] is metrics.Histogram
    assert fast["kinds"] == [metrics.Counter, metrics.Gauge,
                             metrics.Histogram, metrics.Summary]
    for m in (metrics.Counter.labels, metrics.Counter.inc,
              metrics.Histogram.observe):
        assert type(m).__name__ == "function"


@pytest.mark.parametrize("kind", ["Counter", "Gauge", "Histogram",
                                  "Summary"])
def test_a_labels_of_its_own_is_refused(monkeypatch, kind):
    # A release whose kind has a labels() of its own: the C one, which
    # does the base's, would not be it.
    from prometheus_client import metrics
    base = metrics.MetricWrapperBase.labels
    monkeypatch.setattr(getattr(metrics, kind), "labels",
                        lambda self, *a, **k: base(self, *a, **k),
                        raising=False)
    with pytest.raises(_promclient.Unsupported,
                       match=r"labels\(\) of its own"):
        _promclient.check()


def test_c_methods_leave_a_subclass_to_its_own():
    # A subclass may override what the C methods read: they call the
    # release's own method for it, which calls the override.
    from prometheus_client import Counter, Histogram
    fast = _promclient.check()["fast"]
    calls = []

    class Mine(Counter):
        def _raise_if_not_observable(self):
            calls.append("checked")
            super()._raise_if_not_observable()

    class MyHistogram(Histogram):
        def _raise_if_not_observable(self):
            calls.append("observed")
            super()._raise_if_not_observable()

    c = Mine("mine_total", "Mine.", ["a"], registry=None)
    child = fast["labels"](c, "x")
    assert child is c._metrics[("x",)] and type(child) is Mine
    fast["inc"][1](child, 2)
    h = MyHistogram("mine_seconds", "Mine.", registry=None, buckets=[1])
    fast["observe"][1](h, 1)
    assert calls == ["checked", "observed"]
    assert child._value.get() == 2.0
    assert [b.get() for b in h._buckets] == [1.0, 0.0]


@pytest.mark.parametrize("kind,kw,want", [
    ("Counter", {}, [("value", ("a",), ("x",), None)]),
    ("Gauge", {"multiprocess_mode": "max"}, [("value", ("a",), ("x",),
                                             None)]),
    ("Histogram", {"buckets": [0.5, 2]},
     [("_sum", ("a",), ("x",), None), ("bucket", ("a",), ("x",), 0.5),
      ("bucket", ("a",), ("x",), 2.0),
      ("bucket", ("a",), ("x",), float("inf"))]),
])
def test_value_roles_of_each_kind(kind, kw, want):
    from prometheus_client import metrics
    child, made = _promclient._probe(metrics, kind, **kw)
    assert [_promclient.value_role(*v.args) for v in made] == want
    # The values are made by the probe's recorder, not by
    # prometheus_client's own value class, which is left as it was.
    assert all(type(v) is _promclient._Made for v in made)
    from prometheus_client import values
    assert values.ValueClass is not _promclient._Made


def test_value_roles_of_a_summary():
    from prometheus_client import metrics
    child, made = _promclient._probe(metrics, "Summary")
    roles = sorted(_promclient.value_role(*v.args) for v in made)
    assert roles == [("_count", ("a",), ("x",), None),
                     ("_sum", ("a",), ("x",), None)]
    child.observe(3.5)
    by_role = {_promclient.value_role(*v.args)[0]: v.calls for v in made}
    assert by_role == {"_count": [("inc", 1)], "_sum": [("inc", 3.5)]}


@pytest.mark.parametrize("args", [
    ("info", "i", "i", (), ()),
    ("histogram", "h", "h_created", (), ()),
    ("histogram", "h", "h_bucket", ("a",), ("x",)),  # no "le"
    ("summary", "s", "other_sum", (), ()),
])
def test_value_role_refuses_what_it_does_not_know(args):
    with pytest.raises(ValueError):
        _promclient.value_role(*args)


def test_to_metric_keeps_the_unit_or_goes_without():
    from types import SimpleNamespace as NS
    smp = NS(name="lat_seconds_count", labels={"a": "x"}, value=3.0)
    fam = NS(name="lat_seconds", documentation="Lat.", type="summary",
             unit="seconds", samples=[smp])
    m = _promclient.to_metric(fam)
    assert (m.name, m.type, m.documentation, m.unit) == \
        ("lat_seconds", "summary", "Lat.", "seconds")
    assert [tuple(s[:3]) for s in m.samples] == \
        [("lat_seconds_count", {"a": "x"}, 3.0)]
    # A unit the name does not end with: refused by some releases,
    # appended by others; never an error of the scrape.
    m = _promclient.make_metric("lat", "Lat.", "gauge", "bytes")
    assert m.name in ("lat", "lat_bytes") and m.type == "gauge"


def test_no_other_module_imports_prometheus_client():
    import ast
    pkg = os.path.dirname(_promclient.__file__)
    for name in sorted(os.listdir(pkg)):
        if not name.endswith(".py") or name == "_promclient.py":
            continue
        with open(os.path.join(pkg, name)) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            assert not any(m.split(".")[0] == "prometheus_client"
                           for m in mods), (name, node.lineno)
