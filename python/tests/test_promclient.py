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
        process="process_cpu_seconds_total" in generate_latest().decode())))
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
    ("metrics.Histogram", "_metric_init", None),
    ("values", "ValueClass", "lambda typ, name: None"),
    ("core.Metric", "add_sample", None),
    ("registry.CollectorRegistry", "unregister", None),
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
