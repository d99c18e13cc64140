"""tally-exporter over a Python zone: a Histogram is a classic histogram of
the format (2.6), so the exporter shows it under its plain name with the
application's buckets, cumulative, its _count and its exact _sum, as the
package's own exposition does, and promtool check metrics prints nothing
on the scrape.

tally-exporter is $TALLY_EXPORTER or the build tree's
(build/programs/tally-exporter/tally-exporter); the test is skipped
without it or without promtool and curl.  The exporter binds 127.0.0.1,
lives at most 30 s and is stopped by its pid."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import HERE, child_env, run_py

EXPORTER = os.environ.get("TALLY_EXPORTER") or os.path.join(
    HERE, "..", "..", "build", "programs", "tally-exporter", "tally-exporter")

WRITER = """
import tally_metrics as tally
reg = tally.CollectorRegistry()
h = tally.Histogram("shop_order_value_dollars", "What orders were worth.",
                    ["shop"], registry=reg,
                    buckets=[1, 2.5, 10, 25, 100])
for v in (0.5, 1, 7.25, 19.99, 19.99, 1000):
    h.labels("a").observe(v)
lat = tally.Histogram("shop_request_seconds", "Time of a request.",
                      registry=reg)
lat.observe(0.02)
lat.observe(0.3)
tally.Counter("shop_orders", "Orders.", registry=reg).inc(2.5)
print(tally.generate_latest(reg).decode())
"""


def _need():
    if not os.access(EXPORTER, os.X_OK):
        pytest.skip("no tally-exporter at " + EXPORTER)
    for tool in ("promtool", "curl"):
        if not shutil.which(tool):
            pytest.skip(tool + " not installed")


def _scrape(tally_dir):
    log = os.path.join(tally_dir, "..", "exporter.log")
    with open(log, "w") as err:
        p = subprocess.Popen(["timeout", "30", EXPORTER, "--dir", tally_dir,
                              "--listen", "127.0.0.1:0"], stderr=err)
    try:
        port = None
        for _ in range(100):
            with open(log) as f:
                m = re.search(r"listening on https?://127\.0\.0\.1:(\d+)/",
                              f.read())
            if m:
                port = m.group(1)
                break
            time.sleep(0.05)
        assert port, open(log).read()
        return subprocess.run(
            ["curl", "-sS", "--max-time", "10",
             f"http://127.0.0.1:{port}/metrics"], capture_output=True,
            text=True, timeout=20, check=True).stdout
    finally:
        p.terminate()
        p.wait(timeout=10)


def _samples(text, prefix):
    """The samples of @prefix, without the exporter's pid and process
    labels."""
    out = []
    for line in text.splitlines():
        if line.startswith(prefix):
            line = re.sub(r',?pid="\d+",process="[^"]*"', "", line)
            out.append(line.replace("{,", "{").replace("{}", ""))
    return out


def test_exporter_shows_python_histograms_by_their_plain_names(tally_dir):
    _need()
    own = run_py(WRITER, child_env(tally_dir, TALLY_KEEP=1))
    text = _scrape(tally_dir)
    assert _samples(text, "shop_order_value_dollars") == [
        'shop_order_value_dollars_bucket{shop="a",le="1"} 2',
        'shop_order_value_dollars_bucket{shop="a",le="2.5"} 2',
        'shop_order_value_dollars_bucket{shop="a",le="10"} 3',
        'shop_order_value_dollars_bucket{shop="a",le="25"} 5',
        'shop_order_value_dollars_bucket{shop="a",le="100"} 5',
        'shop_order_value_dollars_bucket{shop="a",le="+Inf"} 6',
        'shop_order_value_dollars_count{shop="a"} 6',
        'shop_order_value_dollars_sum{shop="a"} 1048.73',
    ]
    assert "# TYPE shop_order_value_dollars histogram" in text
    assert 'shop_request_seconds_bucket{le="0.025"} 1' in \
        _samples(text, "shop_request_seconds")
    assert "shop_orders_total 2.5" in _samples(text, "shop_orders")
    # Nothing of the encoding of tally 0.3.
    assert ":bucket" not in text and ":frac_u" not in text
    # The package's own exposition has the same buckets and sum.
    assert 'shop_order_value_dollars_bucket{le="25.0",shop="a"} 5.0' in own
    assert 'shop_order_value_dollars_sum{shop="a"} 1048.73' in own
    r = subprocess.run(["promtool", "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")


PY03 = os.path.join(HERE, "..", "..", "build", "examples", "py03-segment")


def test_a_zone_of_tally_03_is_skipped_saying_what_to_do(tally_dir):
    """A zone as tally 0.3's Python package left it (format 2.5, names of
    its encoding) is refused by the reader API, which this package reads
    through: in read().skipped with one line, nothing of it shown."""
    import tally_metrics as tally
    if not os.access(PY03, os.X_OK):
        pytest.skip("no py03-segment at " + PY03)
    subprocess.run([PY03], env=child_env(tally_dir, TALLY_KEEP=1),
                   check=True, capture_output=True, timeout=30)
    r = tally.read(dir=tally_dir, all_zones=True)
    assert r.families == []
    [(path, why)] = r.skipped
    assert "written by tally 0.3's Python package" in why
    assert why.endswith("restart the service with tally 0.4")
    assert "\n" not in why
