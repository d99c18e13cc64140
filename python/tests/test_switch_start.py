"""TALLY_PROMETHEUS_CLIENT at interpreter start: the .pth line installs
a finder and imports nothing else; the switch engages when the
application imports prometheus_client, whichever way it does."""
from __future__ import annotations

import json
import textwrap

import pytest

from conftest import child_env, run_py

MODULES = textwrap.dedent('''
    import json, sys
    print(json.dumps(sorted(m for m in sys.modules
                            if m.split(".")[0] in ("tally_metrics",
                                                   "prometheus_client",
                                                   "_tally_metrics_switch"))))
''')


@pytest.mark.parametrize("value", ["1", "0", None])
def test_interpreter_start_imports_nothing(tally_dir, value):
    env = child_env(tally_dir)
    env.pop("TALLY_PROMETHEUS_CLIENT", None)
    if value is not None:
        env["TALLY_PROMETHEUS_CLIENT"] = value
    mods = json.loads(run_py(MODULES, env))
    # With the variable, only the finder's own small module (proof that
    # the .pth line ran); without it, not even that.
    assert mods == (["_tally_metrics_switch"] if value == "1" else [])


ENGAGED = textwrap.dedent('''
    import json, sys
    {imp}
    from prometheus_client import Counter, values
    import prometheus_client
    c = Counter("engaged_total", "Engaged.")
    c.inc(2)
    print(json.dumps(dict(
        value_class=values.ValueClass.__name__,
        value=type(c._value).__name__,
        loader=type(prometheus_client.__loader__).__name__,
        spec_loader=type(prometheus_client.__spec__.loader).__name__,
        finders=[type(f).__name__ for f in sys.meta_path],
        get=c._value.get())))
''')


@pytest.mark.parametrize("imp", [
    "import prometheus_client",
    "from prometheus_client import Counter",
    "import prometheus_client.values",
    "from prometheus_client.multiprocess import MultiProcessCollector",
])
def test_switch_engages_at_the_import(tally_dir, imp):
    env = child_env(tally_dir, TALLY_PROMETHEUS_CLIENT="1",
                    TALLY_ZONE="engaged")
    out = json.loads(run_py(ENGAGED.format(imp=imp), env))
    assert out["value_class"] == "TallyValue"
    assert out["value"] == "TallyValue"
    assert out["get"] == 2.0
    # prometheus_client's own loader is back, and the finder is gone.
    assert out["loader"] != "_Loader" and out["spec_loader"] != "_Loader"
    assert "_Finder" not in out["finders"]
