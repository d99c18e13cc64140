"""The API and its errors, as prometheus_client has them; values read
back through the reader."""
from __future__ import annotations

import math
import time

import pytest

import tally_metrics as tally
from conftest import value_of


def read():
    return tally.read().families


def test_counter_int_and_fraction(uniq):
    c = tally.Counter(uniq, "doc")
    c.inc()
    c.inc(5)
    c.inc(0.25)
    c.inc(amount=0.5, exemplar={"trace": "x"})
    assert value_of(read(), uniq + "_total") == 6.75


def test_counter_total_suffix_and_names(uniq):
    c = tally.Counter(uniq + "_total", "doc", namespace="ns",
                      subsystem="sub", unit="bytes")
    assert c._name == f"ns_sub_{uniq}_bytes"
    c.inc(2)
    assert value_of(read(), f"ns_sub_{uniq}_bytes_total") == 2.0


def test_counter_holds_int64_range(uniq):
    c = tally.Counter(uniq, "doc")
    c.inc(2**62)
    c.inc(2**62 - 1)
    assert value_of(read(), uniq + "_total") == float(2**63 - 1)
    raw = [v for n, k, h, u, lab, v, hist in tally._native.read()[0]
           if n == uniq + "_total"]
    assert raw == [2**63 - 1]
    with pytest.raises(OverflowError):
        c.inc(2**63)


@pytest.mark.parametrize("bad", [-1, -0.5, float("nan"), float("inf")])
def test_counter_refuses_negative_and_non_finite(uniq, bad):
    c = tally.Counter(uniq, "doc")
    with pytest.raises(ValueError):
        c.inc(bad)
    assert value_of(read(), uniq + "_total") == 0.0


@pytest.mark.parametrize("name", ["", "1abc", "a-b", "a b", "é"])
def test_bad_metric_names(name):
    with pytest.raises(ValueError):
        tally.Counter(name, "doc")


@pytest.mark.parametrize("label", ["1a", "a-b", "__x", ""])
def test_bad_label_names(uniq, label):
    with pytest.raises(ValueError):
        tally.Counter(uniq, "doc", [label])


def test_reserved_labels(uniq):
    with pytest.raises(ValueError):
        tally.Histogram(uniq, "doc", ["le"])
    with pytest.raises(ValueError):
        tally.Gauge(uniq, "doc", ["pid"], multiprocess_mode="all")


def test_label_errors(uniq):
    c = tally.Counter(uniq, "doc", ["a", "b"])
    with pytest.raises(ValueError, match="Incorrect label count"):
        c.labels("x")
    with pytest.raises(ValueError, match="Incorrect label names"):
        c.labels(a="x", c="y")
    with pytest.raises(ValueError, match="both"):
        c.labels("x", b="y")
    with pytest.raises(ValueError, match="missing label values"):
        c.inc()
    with pytest.raises(ValueError, match="can not chain"):
        c.labels("x", "y").labels("z", "w")
    with pytest.raises(ValueError, match="No label names"):
        tally.Counter(uniq + "n", "doc").labels("x")


def test_labels_cache_and_kwargs(uniq):
    c = tally.Counter(uniq, "doc", ["a", "b"])
    x = c.labels("1", "2")
    assert c.labels("1", "2") is x
    assert c.labels(a="1", b="2") is x
    assert c.labels(1, 2) is x
    x.inc()
    c.labels(b=2, a=1).inc()
    assert value_of(read(), uniq + "_total", {"a": "1", "b": "2"}) == 2.0


def test_label_values_too_long_is_value_error(uniq):
    c = tally.Counter(uniq, "doc", ["a"])
    with pytest.raises(ValueError):
        c.labels("x" * (tally.LABELS_MAX + 1))


def test_bad_multiprocess_mode(uniq):
    with pytest.raises(ValueError, match="Invalid multiprocess mode"):
        tally.Gauge(uniq, "doc", multiprocess_mode="avg")


def test_gauge_ops(uniq):
    g = tally.Gauge(uniq, "doc")
    g.inc()
    g.inc(2.5)
    g.dec()
    g.dec(0.25)
    assert value_of(read(), uniq) == 2.25
    g.set(-7.125)
    assert value_of(read(), uniq) == -7.125
    before = time.time()
    g.set_to_current_time()
    assert before <= value_of(read(), uniq) <= time.time()
    with g.track_inprogress():
        assert g._get() == pytest.approx(value_of(read(), uniq))
    with g.time():
        time.sleep(0.01)
    assert 0.005 < value_of(read(), uniq) < 5


def test_histogram_buckets_cumulative(uniq):
    h = tally.Histogram(uniq, "doc", buckets=[1, 2.5, 10])
    for v in (0.5, 1, 2, 3, 100, -1):
        h.observe(v)
    fam = read()
    assert [(s.labels.get("le"), s.value) for f in fam for s in f.samples
            if s.name == uniq + "_bucket"] == [
        ("1.0", 3.0), ("2.5", 4.0), ("10.0", 5.0), ("+Inf", 6.0)]
    assert value_of(fam, uniq + "_count") == 6.0
    assert value_of(fam, uniq + "_sum") == pytest.approx(105.5)


def test_histogram_errors(uniq):
    with pytest.raises(ValueError, match="sorted"):
        tally.Histogram(uniq, "doc", buckets=[2, 1])
    with pytest.raises(ValueError, match="two buckets"):
        tally.Histogram(uniq, "doc", buckets=[float("inf")])
    h = tally.Histogram(uniq + "b", "doc")
    with pytest.raises(ValueError):
        h.observe(float("nan"))
    with pytest.raises(TypeError):
        h.observe()


def test_time_decorator_and_count_exceptions(uniq):
    h = tally.Histogram(uniq, "doc")
    c = tally.Counter(uniq + "_errors", "doc")

    @h.time()
    def f():
        return 3

    @c.count_exceptions(KeyError)
    def g(k):
        return {}[k]

    assert f() == 3 and f() == 3
    for _ in range(3):
        with pytest.raises(KeyError):
            g("x")
    with pytest.raises(ZeroDivisionError):
        with c.count_exceptions(KeyError):
            1 / 0
    fam = read()
    assert value_of(fam, uniq + "_count") == 2.0
    assert value_of(fam, uniq + "_errors_total") == 3.0


def test_duplicate_in_registry(uniq):
    reg = tally.CollectorRegistry()
    tally.Counter(uniq, "doc", registry=reg)
    with pytest.raises(ValueError, match="Duplicated"):
        tally.Gauge(uniq + "_total", "doc", registry=reg)


def test_foreign_registry_refused(uniq):
    class NotOurs:
        def register(self, m):
            pass
    with pytest.raises(TypeError):
        tally.Counter(uniq, "doc", registry=NotOurs())


def test_same_name_other_definition_is_the_newest(uniq):
    # Outside one registry (which refuses a name twice), a metric defined
    # again otherwise is taken: another help text goes on counting the
    # same series, another type starts new series, shown alone.
    tally.Counter(uniq, "doc", registry=None).inc(2)
    tally.Counter(uniq, "another doc", registry=None).inc(3)
    text = tally.generate_latest().decode()
    assert f"# HELP {uniq}_total another doc\n" in text
    assert f"{uniq}_total 5\n" in text
    tally.Gauge(uniq, "a gauge", registry=None).set(7)
    text = tally.generate_latest().decode()
    assert f"{uniq}_total" not in text
    assert f"# TYPE {uniq} gauge\n{uniq} 7\n" in text


def test_openmetrics_and_content_types(uniq):
    c = tally.Counter(uniq, "doc \"q\"\nline", unit="bytes")
    c.inc()
    om = tally.generate_latest(openmetrics=True).decode()
    assert om.endswith("# EOF\n")
    assert f"# TYPE {uniq}_bytes counter" in om
    assert f"# UNIT {uniq}_bytes bytes" in om
    assert f'# HELP {uniq}_bytes doc \\"q\\"\\nline' in om
    assert tally.CONTENT_TYPE_LATEST.startswith("text/plain; version=0.0.4")
    assert "openmetrics" in tally.CONTENT_TYPE_OPENMETRICS


def test_label_value_escaping(uniq):
    c = tally.Counter(uniq, "doc", ["p"])
    c.labels('a"b\\c\nd').inc()
    text = tally.generate_latest().decode()
    assert f'{uniq}_total{{p="a\\"b\\\\c\\nd"}} 1\n' in text


def test_float_to_go_string():
    f = tally.float_to_go_string
    assert f(1e7) == "1e+07" and f(0.005) == "0.005"
    assert f(float("inf")) == "+Inf" and f(1.0) == "1.0"
    assert math.isnan(float(f(float("nan"))))
