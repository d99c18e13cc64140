"""The names of a Python metric's records (tally_metrics/_encoding.py):
each kind is one record of the format under the metric's own name (a
counter's with "_total"), whose kind the reader API says, and a name
that ends like a series of tally 0.3's encoding (":info", ":bucket",
":gauge_livesum"...) is only a name, to the package's reader and to
tally-exporter alike."""
from __future__ import annotations

import prometheus_client
import pytest

import tally_metrics as tally
from tally_metrics import _encoding as enc
from tally_metrics import _native

prometheus_client.disable_created_metrics()


def test_every_series_and_longest_suffix():
    assert enc.every_series("m") == ("m_total",)
    assert enc.LONGEST_SUFFIX == len(":enum_states")
    longest = "m" * (_native.NAME_MAX - enc.LONGEST_SUFFIX)
    tally.Gauge(longest, "doc", registry=None,
                multiprocess_mode="livemostrecent").set(1)
    tally.Enum(longest, "doc", states=["a"], registry=None)
    with pytest.raises(ValueError, match="too long"):
        tally.Counter(longest + "m", "doc", registry=None)


def test_each_metric_is_one_record_of_its_kind(uniq):
    """Every series a metric of each kind registers is under its own
    name, of the kind of the format that says what it is."""
    reg = tally.CollectorRegistry()
    tally.Counter(uniq + "c", "d", registry=reg).inc(0.5)
    tally.Gauge(uniq + "g", "d", registry=reg).set(1)
    for mode in sorted(enc.MULTIPROCESS_MODES - {"mostrecent"}):
        tally.Gauge(uniq + mode, "d", registry=reg,
                    multiprocess_mode=mode).set(1)
    tally.Histogram(uniq + "h", "d", registry=reg).observe(0.5)
    tally.Summary(uniq + "s", "d", registry=reg).observe(0.5)
    tally.Info(uniq + "i", "d", registry=reg).info({"k": "v"})
    tally.Enum(uniq + "e", "d", states=["a"], registry=reg)
    got = {(s[0], s[1]) for s in _native.read(None, reg.zone_name())[0]
           if s[0].startswith(uniq)}
    want = {(uniq + "c_total", _native.TALLY_COUNTER),
            (uniq + "g", _native.TALLY_FGAUGE),
            (uniq + "h", _native.TALLY_HISTOGRAM),
            (uniq + "s", _native.TALLY_SUMMARY),
            (uniq + "i", _native.TALLY_INFO),
            (uniq + "e", _native.TALLY_ENUM)}
    want |= {(uniq + m, _native.TALLY_PGAUGE)
             for m in enc.MULTIPROCESS_MODES - {"mostrecent"}}
    assert got == want
    types = {f.name: f.type for f in tally.read(reg).families
             if f.name.startswith(uniq)}
    assert types[uniq + "c"] == "counter"
    assert types[uniq + "livesum"] == "gauge"
    assert (types[uniq + "h"], types[uniq + "s"], types[uniq + "i"],
            types[uniq + "e"]) == ("histogram", "summary", "info",
                                   "stateset")


def test_c_metrics_named_like_the_old_encoding_are_plain(uniq):
    """Float gauges and counters that C code registers under names of
    tally 0.3's encoding, in a zone of 2.6 or later, with the labels
    that encoding gave them (pid, le): each is shown as it is, under
    its own name, never combined, made cumulative or taken for an info,
    an enum or a fraction."""
    reg = tally.CollectorRegistry()
    zone = reg.zone
    series = [("x:info", ("version",), ("1",), 1.0),
              ("x:enum", ("x",), ("up",), 0.0),
              ("x:gauge_livesum", ("pid",), ("1:2",), 3.0),
              ("x:bucket", ("le",), ("0.5",), 4.0),
              ("x_sum:frac_u", (), (), 250000.0)]
    for name, keys, values, v in series:
        g = _native.GaugeBase()
        g._bind(_native.Family(zone, _native.KIND_GAUGE, uniq + name, "C.",
                               "", keys),
                values)
        g.set(v)
    got = [(f.name, f.type, [(s.name, s.labels, s.value)
                             for s in f.samples])
           for f in tally.read(reg).families if f.name.startswith(uniq)]
    assert got == [(uniq + n, "gauge", [(uniq + n, dict(zip(k, vs)), v)])
                   for n, k, vs, v in series]


@pytest.mark.parametrize("cls, suffix", [
    ("Counter", "_bucket"), ("Counter", "_sum"), ("Counter", ":bucket"),
    ("Counter", ":frac_u"), ("Gauge", "_sum"), ("Gauge", "_info"),
    ("Gauge", "_gauge_all"), ("Gauge", ":gauge_livesum"), ("Gauge", ":info"),
    ("Gauge", ":frac_u"), ("Histogram", "_sum"), ("Histogram", ":bucket"),
    ("Histogram", ":summary"),
    ("Histogram", "_total"), ("Summary", "_sum"), ("Summary", ":enum"),
    ("Info", "_sum"), ("Info", ":enum"), ("Enum", "_bucket")])
def test_suffix_like_names_show_as_prometheus_client(uniq, cls, suffix):
    """A metric whose name ends like a series of tally 0.3's encoding is
    only a name: shown as prometheus_client shows it, byte for byte."""
    name = uniq + suffix
    preg = prometheus_client.CollectorRegistry()
    treg = tally.CollectorRegistry()
    for mod, reg in ((prometheus_client, preg), (tally, treg)):
        kw = {"states": ["a", "b"]} if cls == "Enum" else {}
        m = getattr(mod, cls)(name, "Doc.", ["k"], registry=reg, **kw)
        child = m.labels("v")
        if cls == "Counter":
            child.inc(2.5)
        elif cls == "Gauge":
            child.set(-3)
        elif cls in ("Histogram", "Summary"):
            child.observe(0.3)
        elif cls == "Info":
            child.info({"a": "b"})
        else:
            child.state("b")
    mine = [f for f in tally.read(treg).families
            if f.name.startswith(uniq)]
    expected = prometheus_client.generate_latest(preg).decode()
    assert tally._exposition.format_text(mine) == expected


def test_summary_is_a_summary_of_the_format(uniq):
    """A Summary is one series of the format's summary type (2.7) under
    its name: every reader sees its exact count and sum (0.1 observed ten
    times sums to 1 exactly), and the package shows _count and _sum."""
    reg = tally.CollectorRegistry()
    s = tally.Summary(uniq, "Sizes.", ["k"], registry=reg)
    for _ in range(10):
        s.labels("a").observe(0.1)
    [series] = [x for x in _native.read(None, reg.zone_name())[0]
                if x[0] == uniq]
    name, kind, _help, _unit, labels, count, hist = series
    assert (kind, labels, count) == (_native.TALLY_SUMMARY, (("k", "a"),),
                                     10)
    assert hist[0] == 1.0
    [fam] = [f for f in tally.read(reg).families if f.name == uniq]
    assert fam.type == "summary"
    assert [(x.name, x.labels, x.value) for x in fam.samples] == [
        (uniq + "_count", {"k": "a"}, 10.0), (uniq + "_sum", {"k": "a"}, 1.0)]
