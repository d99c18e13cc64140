"""API parity: the same calls against prometheus_client (one process) and
tally give the same exposition: names, labels, HELP, TYPE, bucket bounds
and values, byte for byte in text format 0.0.4 and once parsed."""
from __future__ import annotations

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

import tally_metrics as tally

prometheus_client.disable_created_metrics()

# Each case: (class name, constructor kwargs, [(labels or None, method,
# args)]).  "NAME" in kwargs is replaced by a unique name.
CASES = [
    ("Counter", dict(documentation="Requests."), [
        (None, "inc", ()), (None, "inc", (3,)), (None, "inc", (0.5,))]),
    ("Counter", dict(name_suffix="_total", documentation="With _total."), [
        (None, "inc", (2,))]),
    ("Counter", dict(documentation="Labelled.", labelnames=["method", "code"]),
     [(("GET", "200"), "inc", ()), (("POST", "500"), "inc", (7,)),
      (("GET", "200"), "inc", (1.25,)), (("GET", "404"), "inc", ())]),
    ("Counter", dict(documentation="Units and namespace.", namespace="app",
                     subsystem="db", unit="bytes"), [(None, "inc", (4096,))]),
    ("Counter", dict(documentation='Esc "help"\\ and\nnewline.',
                     labelnames=["path"]),
     [(('/a"b\\c\nd',), "inc", ())]),
    ("Gauge", dict(documentation="In flight."), [
        (None, "inc", ()), (None, "inc", (5,)), (None, "dec", (2.5,))]),
    ("Gauge", dict(documentation="Set.", labelnames=["queue"]), [
        (("a",), "set", (42,)), (("b",), "set", (-1.5,)),
        (("a",), "inc", (0.25,))]),
    ("Gauge", dict(documentation="Big.", unit="bytes"), [
        (None, "set", (1.5e12,))]),
    ("Histogram", dict(documentation="Default buckets."), [
        (None, "observe", (0.003,)), (None, "observe", (0.2,)),
        (None, "observe", (3,)), (None, "observe", (12,))]),
    ("Histogram", dict(documentation="Own buckets.", labelnames=["route"],
                       buckets=[0.1, 1, 10, 100, 1e7]), [
        (("/",), "observe", (0.05,)), (("/",), "observe", (5,)),
        (("/x",), "observe", (500,)), (("/",), "observe", (1e7,))]),
    ("Histogram", dict(documentation="Negative buckets.",
                       buckets=[-5, 0, 5]), [
        (None, "observe", (-10,)), (None, "observe", (1,))]),
    ("Summary", dict(documentation="Sizes."), [
        (None, "observe", (512,)), (None, "observe", (0.25,))]),
    ("Summary", dict(documentation="Labelled.", labelnames=["route"],
                     unit="bytes"), [
        (("/",), "observe", (3,)), (("/x",), "observe", (-1.5,))]),
    ("Info", dict(documentation="Build."), [
        (None, "info", ({"version": "1.2", "host": "a"},))]),
    ("Info", dict(documentation="Per app.", labelnames=["app"]), [
        (("x",), "info", ({"v": "1"},)), (("x",), "info", ({"v": "2"},)),
        (("y",), "info", ({"v": "3"},))]),
    ("Enum", dict(documentation="State.",
                  states=["starting", "running", "stopped"]), [
        (None, "state", ("running",))]),
    ("Enum", dict(documentation="Never set.", states=["idle", "busy"]), []),
    ("Enum", dict(documentation="Per queue.", labelnames=["q"],
                  states=["a", "b"]), [
        (("x",), "state", ("b",)), (("y",), "state", ("a",))]),
]


def _run(module, registry, cls_name, kwargs, ops, name):
    kw = dict(kwargs)
    suffix = kw.pop("name_suffix", "")
    metric = getattr(module, cls_name)(name + suffix, registry=registry,
                                       **kw)
    for labels, method, args in ops:
        target = metric.labels(*labels) if labels else metric
        getattr(target, method)(*args)


def _parsed(text):
    out = []
    for fam in text_string_to_metric_families(text):
        out.append((fam.name, fam.type, fam.documentation, fam.unit,
                    [(s.name, s.labels, round(s.value, 9))
                     for s in fam.samples]))
    return out


@pytest.mark.parametrize("case", range(len(CASES)))
def test_same_exposition(case, uniq):
    cls_name, kwargs, ops = CASES[case]
    preg = prometheus_client.CollectorRegistry()
    _run(prometheus_client, preg, cls_name, kwargs, ops, uniq)
    treg = tally.CollectorRegistry()
    _run(tally, treg, cls_name, kwargs, ops, uniq)

    expected = prometheus_client.generate_latest(preg).decode()
    got = tally.read(treg)
    mine = [f for f in got.families if f.name.startswith(
        kwargs.get("namespace", uniq))]
    text = tally._exposition.format_text(mine)
    assert _parsed(text) == _parsed(expected)
    assert text == expected

    om_expected = prometheus_client.openmetrics.exposition.generate_latest(
        preg).decode()
    assert tally._exposition.format_openmetrics(mine) == om_expected


def test_collector_through_prometheus_client(uniq):
    """TallyCollector in a prometheus_client registry gives what
    prometheus_client itself gives for the same metrics."""
    preg = prometheus_client.CollectorRegistry()
    treg = tally.CollectorRegistry()
    for mod, reg in ((prometheus_client, preg), (tally, treg)):
        c = mod.Counter(uniq + "c", "C.", ["a"], registry=reg)
        c.labels("x").inc(3)
        h = mod.Histogram(uniq + "h", "H.", buckets=[1, 2], registry=reg)
        h.observe(1.5)
        g = mod.Gauge(uniq + "g", "G.", registry=reg)
        g.set(9)
    creg = prometheus_client.CollectorRegistry()
    creg.register(tally.TallyCollector(treg))
    got = [f for f in _parsed(prometheus_client.generate_latest(creg).decode())
           if f[0].startswith(uniq)]
    assert got == _parsed(prometheus_client.generate_latest(preg).decode())
