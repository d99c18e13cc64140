"""Label names the exposition reserves, and label sets of realistic
size (up to tally.LABELS_MAX bytes of names and values)."""
from __future__ import annotations

import os

import pytest

import tally_metrics as tally
from tally_metrics import _names
from conftest import child_env, run_py, value_of, segment_names


def test_reserved_names_name_the_metric_and_the_label(uniq):
    with pytest.raises(ValueError, match=f"le.*{uniq}"):
        tally.Histogram(uniq, "doc", ["le"])
    with pytest.raises(ValueError, match=f"__name__.*{uniq}"):
        tally.Counter(uniq, "doc", ["__name__"])
    with pytest.raises(ValueError, match=f"pid.*{uniq}"):
        tally.Gauge(uniq, "doc", ["pid"], multiprocess_mode="all")
    # le means nothing to a counter or a gauge.
    tally.Counter(uniq + "_c", "doc", ["le"]).labels("1").inc()
    tally.Gauge(uniq + "_g", "doc", ["le", "quantile"]).labels("1", "2").set(1)


def test_a_summary_reserves_quantile(uniq):
    """Summary takes its reserved names from RESERVED_FOR."""
    with pytest.raises(ValueError, match=f"quantile.*{uniq}"):
        tally.Summary(uniq, "doc", ["route", "quantile"])
    assert _names.RESERVED_FOR["summary"] == ("quantile",)
    with pytest.raises(ValueError, match="quantile.*lat_seconds"):
        _names.validate_labelnames(["route", "quantile"], (),
                                   "lat_seconds", "summary")
    assert _names.validate_labelnames(["quantile"], (), "x", "histogram") \
        == ("quantile",)


def _route(n):
    return "".join(chr(97 + i % 26) for i in range(n))


def test_long_labels_exported_exactly(uniq):
    route = "/api/v1/organizations/{org_id}/projects/{project_id}/" + \
        _route(3000)
    c = tally.Counter(uniq, "doc", ["method", "route", "code"])
    c.labels("GET", route, "200").inc(7)
    h = tally.Histogram(uniq + "_h", "doc", ["route"], buckets=[1, 2])
    h.labels(route).observe(1)
    text = tally.generate_latest().decode()
    assert f'{uniq}_total{{code="200",method="GET",route="{route}"}} 7\n' \
        in text
    assert f'{uniq}_h_bucket{{route="{route}",le="1"}} 1\n' in text
    res = tally.read()
    assert value_of(res.families, uniq + "_total",
                    {"method": "GET", "route": route, "code": "200"}) == 7
    # 120 labels.
    names = [f"l{i}" for i in range(120)]
    g = tally.Gauge(uniq + "_many", "doc", names)
    g.labels(*[str(i) for i in range(120)]).set(3)
    res = tally.read()
    assert value_of(res.families, uniq + "_many",
                    {n: str(i) for i, n in enumerate(names)}) == 3


def test_labels_past_the_limits_are_refused(uniq):
    c = tally.Counter(uniq, "doc", ["route"])
    with pytest.raises(ValueError, match="4096 bytes"):
        c.labels(_route(tally.LABELS_MAX)).inc()
    with pytest.raises(ValueError, match="too many labels"):
        tally.Counter(uniq + "_many", "doc",
                      [f"l{i}" for i in range(tally.LABEL_PAIRS_MAX)])


def test_long_labels_in_a_shared_zone(uniq, tally_dir):
    """Processes of one shared zone add to one series of long labels."""
    code = f"""
import tally_metrics as tally
c = tally.Counter({uniq!r}, "doc", ["route"])
c.labels({_route(2500)!r}).inc(1000)
"""
    env = child_env(tally_dir, TALLY_ZONE="web")
    for _ in range(3):
        run_py(code, env)
    assert segment_names(tally_dir) == ["web.tally"]
    res = tally.read(dir=tally_dir, zone="web")
    assert value_of(res.families, uniq + "_total",
                    {"route": _route(2500)}) == 3000
