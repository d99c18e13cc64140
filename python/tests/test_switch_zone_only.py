"""Under the prometheus_client switch, tally.generate_latest() of the
default registry in a process that has defined none of the zone's
metrics (a gunicorn master serving /metrics, a worker before the first
request of a framework that makes its metrics then) writes the zone's
metrics, as prometheus_client.generate_latest() of the same registry
shows them: the patched collect() of the default registry adds them
after its collectors.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import child_env, run_py
from test_exposition import _parsed

# Process A defines and counts; it stays alive until its stdin closes.
DEFINER = textwrap.dedent(r"""
    import sys
    from prometheus_client import Counter
    Counter("req", "Requests.", ["code"]).labels("200").inc(3)
    print("ready", flush=True)
    sys.stdin.read()
""")

# Process B defines nothing of the zone; @own: a collector of its own.
READER = textwrap.dedent(r"""
    import json, sys
    import prometheus_client as pc
    from prometheus_client.core import GaugeMetricFamily
    import tally_metrics as tally

    class Own:
        def collect(self):
            yield GaugeMetricFamily("own_thing", "Own.", value=4)

    if sys.argv[1] == "own":
        pc.REGISTRY.register(Own())
    print(json.dumps(dict(
        tally=tally.generate_latest(pc.REGISTRY).decode(),
        om=tally.generate_latest(pc.REGISTRY, openmetrics=True).decode(),
        pc=pc.generate_latest(pc.REGISTRY).decode())))
""")


def _read(env, own):
    r = subprocess.run([sys.executable, "-c", READER, own], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_process_without_metrics_writes_the_zone(tally_dir):
    env = child_env(tally_dir, TALLY_PROMETHEUS_CLIENT=1,
                    TALLY_ZONE="zoneonly")
    a = subprocess.Popen([sys.executable, "-c", DEFINER], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert a.stdout.readline() == "ready\n"
        out = _read(env, "none")
        assert 'req_total{code="200"} 3.0\n' in out["pc"]
        assert 'req_total{code="200"} 3\n' in out["tally"]
        assert _parsed(out["tally"]) == _parsed(out["pc"])
        assert out["om"].count("# EOF\n") == 1
        assert 'req_total{code="200"} 3\n' in out["om"]
        # A collector of its own comes first, the zone after it, where
        # the registry's collect() puts it.
        out = _read(env, "own")
        assert out["tally"].startswith("# HELP own_thing Own.\n")
        assert 'req_total{code="200"} 3\n' in out["tally"]
        assert _parsed(out["tally"]) == _parsed(out["pc"])
    finally:
        a.stdin.close()
        a.wait(timeout=30)
    # Without the switch the zone is not the default registry's.
    env.pop("TALLY_PROMETHEUS_CLIENT")
    assert "req_total" not in run_py(
        "import prometheus_client as pc, tally_metrics as tally\n"
        "print(tally.generate_latest(pc.REGISTRY).decode())", env)
