"""The series-name encoding (tally/_encoding.py): every kind's names
decode back to the metric that wrote them, the names a metric really
writes are the ones the encoding lists, and names that look like the
encoding's own suffixes are read as they should."""
from __future__ import annotations

import re

import prometheus_client
import pytest

import tally_metrics as tally
from tally_metrics import _encoding as enc
from tally_metrics import _native

prometheus_client.disable_created_metrics()

FGAUGE, COUNTER = _native.TALLY_FGAUGE, _native.TALLY_COUNTER
GAUGE, GAUGE_SET = _native.TALLY_GAUGE, _native.TALLY_GAUGE_SET

# Names with what the encoding's suffixes are made of: colons, "_sum",
# "_bucket", "_total", ":gauge", ":info", ":enum", ":frac_u"...
TRICKY = ["x", "x_bucket", "a_sum", "a_total", "x_count", "col:on",
          ":lead", "x:bucket", "x:frac_u", "x:set_ns", "x:gauge",
          "x:gauge_all", "x:gauge_", "x:info", "x:enum", "x:info_keys",
          "x_sum_sum", "X:Gauge_All"]


def _decode_all(names_kinds):
    """Decode series as a reader does: knowing every name of the zone."""
    hists = enc.histogram_bases(n for n, _ in names_kinds)
    return [enc.decode(n, k, hists) for n, k in names_kinds]


def _written(kind, base, timestamps=False):
    """The series a _native.Family of @kind named @base registers (with
    its fraction), as (name, tally kind)."""
    p = enc.parts(kind, base)
    if kind == _native.KIND_COUNTER:
        return [(p.main, COUNTER), (p.frac, COUNTER)]
    if kind == _native.KIND_GAUGE:
        return [(p.main, FGAUGE)] + ([(p.setns, GAUGE_SET)]
                                     if timestamps else [])
    return [(p.bucket, COUNTER), (p.main, GAUGE), (p.frac, GAUGE)]


@pytest.mark.parametrize("name", TRICKY)
def test_counter_round_trip(name):
    main, frac = _decode_all(_written(_native.KIND_COUNTER,
                                      enc.counter(name)))
    # Shown as tally-exporter shows any counter: "_total" makes it one.
    assert main == enc.Series(enc.MAIN_PLAIN, name + "_total",
                              name + "_total")
    assert frac.role == enc.FRACTION and frac.base == name + "_total"


@pytest.mark.parametrize("name", TRICKY)
def test_gauge_round_trip(name):
    """A gauge's series is its own name, shared or per-process (its
    record says which): read as it is, or refused when a reader would
    take it for a part of the earlier encoding."""
    assert enc.gauge(name) == name
    if enc.decode(name, FGAUGE, ()).role != enc.MAIN_PLAIN:
        with pytest.raises(ValueError, match="cannot end with"):
            enc.check_name("gauge", name)
        return
    enc.check_name("gauge", name)
    for kind in (FGAUGE, _native.TALLY_PGAUGE):
        assert _decode_all([(name, kind)]) == [
            enc.Series(enc.MAIN_PLAIN, name, name)]


@pytest.mark.parametrize("name", TRICKY)
def test_gauge_of_the_earlier_encoding_round_trip(name):
    """Zones written before gauges had their own names: <n>:gauge and
    <n>:gauge_<mode> are still read as gauge <n>."""
    for mode in [None] + sorted(enc.MULTIPROCESS_MODES):
        ts = mode == "livemostrecent"
        series = name + (":gauge" if mode in (None, "mostrecent")
                         else ":gauge_" + mode)
        got = _decode_all(_written(_native.KIND_GAUGE, series, ts))
        want_mode = None if mode in (None, "mostrecent") else mode
        assert got[0] == enc.Series(enc.GAUGE_VALUE, series, name, "gauge",
                                    want_mode)
        if ts:
            assert got[1].role == enc.SET_TIME and got[1].base == series


@pytest.mark.parametrize("name", TRICKY)
@pytest.mark.parametrize("typ", ["histogram", "summary"])
def test_histogram_and_summary_round_trip(name, typ):
    base = enc.summary(name) if typ == "summary" else name
    bucket, main, frac = _decode_all(_written(_native.KIND_HISTOGRAM, base))
    assert bucket == enc.Series(enc.HIST_BUCKET, base, name, typ)
    assert main == enc.Series(enc.HIST_SUM, base, name, typ)
    assert frac.role == enc.FRACTION and frac.base == base + "_sum"


@pytest.mark.parametrize("name", TRICKY)
def test_info_and_enum_round_trip(name):
    info, enum = _decode_all([(enc.info(name), FGAUGE),
                              (enc.enum(name), FGAUGE)])
    assert info == enc.Series(enc.INFO_PAIRS, name + ":info", name, "info")
    assert enum == enc.Series(enc.ENUM_STATE, name + ":enum", name,
                              "stateset")


def test_names_of_every_kind_in_one_zone():
    """Metrics whose names end like another's series: each decodes to
    its own metric when all are in one zone."""
    zone = []
    for name in ("a", "a_sum", "a:bucket"):
        zone += _written(_native.KIND_HISTOGRAM, name)
        zone += _written(_native.KIND_COUNTER, enc.counter(name))
        zone += _written(_native.KIND_GAUGE, name + ":gauge_all", True)
    got = {n: d for (n, _), d in zip(zone, _decode_all(zone))}
    assert got["a_sum"] == enc.Series(enc.HIST_SUM, "a", "a", "histogram")
    assert got["a_sum_sum"].metric == "a_sum"
    assert got["a:bucket:bucket"].metric == "a:bucket"
    assert got["a:bucket_sum"].metric == "a:bucket"
    assert got["a_sum_total"].role == enc.MAIN_PLAIN
    assert got["a_sum:gauge_all"].metric == "a_sum"


def test_series_of_c_code_are_plain():
    # A C counter "x_sum" is a histogram's sum only when x:bucket exists.
    names = [("x_sum", COUNTER), ("x", GAUGE), ("y:gauge", COUNTER),
             ("y:info", GAUGE), ("busy_ns_total", COUNTER)]
    for (n, _), d in zip(names, _decode_all(names)):
        assert d == enc.Series(enc.MAIN_PLAIN, n, n)
    # The encoding's suffixes are its own, whoever registers them.
    assert enc.decode("z:gauge_sum", FGAUGE, ()).mode == "sum"
    assert enc.decode("z:frac_u", GAUGE, ()).role == enc.FRACTION


_OLD_GAUGE_RE = re.compile(r"^(.*):gauge(?:_([a-z]+))?$")


@pytest.mark.parametrize("name", [
    "g:gauge", "g:gauge_all", "g:gauge_livemostrecent", "g:gauge_other",
    "g:gauge_", "g:gauge_All", "g:gauge_a1", "a:gauge_x:gauge",
    "a:gauge_x:gauge_sum", "a:gauge_x:gauge_B", "gauge", ":gauge",
    ":gauge_sum", "g:gauges", "g_gauge_all"])
def test_gauge_modes_parse_as_before(name):
    """The reader once parsed gauges with this regex: the names it took
    are taken the same way (any lowercase mode)."""
    m = _OLD_GAUGE_RE.match(name)
    d = enc.decode(name, FGAUGE, ())
    if m is None:
        assert d.role == enc.MAIN_PLAIN
    else:
        assert (d.role, d.metric, d.mode) == (enc.GAUGE_VALUE, m.group(1),
                                              m.group(2))


def test_every_series_and_longest_suffix():
    names = enc.every_series("m")
    assert len(set(names)) == len(names) == 32
    assert "m:gauge_mostrecent" in names and "m:gauge" in names
    assert enc.LONGEST_SUFFIX == len(":gauge_livemostrecent:set_ns")
    longest = "m" * (_native.NAME_MAX - enc.LONGEST_SUFFIX)
    tally.Gauge(longest, "doc", registry=None,
                multiprocess_mode="livemostrecent").set(1)
    with pytest.raises(ValueError, match="too long"):
        tally.Counter(longest + "m", "doc", registry=None)


def test_what_metrics_write_is_what_the_encoding_lists(uniq):
    """Every series a metric of each kind registers is one of
    every_series() of its name, and decodes to it."""
    reg = tally.CollectorRegistry()
    tally.Counter(uniq, "d", registry=reg).inc(0.5)
    tally.Gauge(uniq + "g", "d", registry=reg).set(1)
    for mode in sorted(enc.MULTIPROCESS_MODES):
        tally.Gauge(uniq + mode, "d", registry=reg,
                    multiprocess_mode=mode).set(1)
    tally.Histogram(uniq + "h", "d", registry=reg).observe(0.5)
    tally.Summary(uniq + "s", "d", registry=reg).observe(0.5)
    tally.Info(uniq + "i", "d", registry=reg).info({"k": "v"})
    tally.Enum(uniq + "e", "d", states=["a"], registry=reg)
    series = [(s[0], s[1]) for s in _native.read(None, reg.zone_name())[0]
              if s[0].startswith(uniq)]
    metrics = [uniq, uniq + "g", uniq + "h", uniq + "s", uniq + "i",
               uniq + "e"] + [uniq + m for m in enc.MULTIPROCESS_MODES]
    hists = enc.histogram_bases(n for n, _ in series)
    for name, kind in set(series):
        owner = [m for m in metrics if name in enc.every_series(m)]
        if kind in (_native.TALLY_FGAUGE, _native.TALLY_PGAUGE) and \
                name in metrics:
            # A Gauge, shared or per-process, under its own name.
            assert enc.decode(name, kind, hists).role == enc.MAIN_PLAIN
            continue
        if kind == _native.TALLY_HISTOGRAM:
            # A Histogram is a classic histogram of the format (2.6),
            # under its own name: no name of the encoding.
            assert name == uniq + "h", name
            continue
        if kind == _native.TALLY_SUMMARY:
            # A Summary is a summary of the format (2.7), under its own
            # name.
            assert name == uniq + "s", name
            continue
        if kind in (_native.TALLY_INFO, _native.TALLY_ENUM):
            # An Info and an Enum are info and enum metrics of the
            # format (2.8), under their own names.
            assert name == uniq + ("i" if kind == _native.TALLY_INFO
                                   else "e"), name
            assert enc.decode(name, kind, hists).metric == name
            continue
        assert owner, name
        d = enc.decode(name, kind, hists)
        if d.role not in (enc.FRACTION, enc.SET_TIME, enc.MAIN_PLAIN):
            assert d.metric == owner[0], name


def test_histogram_named_like_a_summary_is_refused(uniq):
    """Its series would be read as a summary's: refused at construction
    (a Summary of that name is not, nor a counter or a gauge)."""
    with pytest.raises(ValueError, match="cannot end with ':summary'"):
        tally.Histogram(uniq + ":summary", "d", registry=None)
    tally.Summary(uniq + ":summary", "d", registry=None).observe(1)
    tally.Counter(uniq + "c:summary", "d", registry=None).inc()
    tally.Gauge(uniq + "g:summary", "d", registry=None).set(1)


@pytest.mark.parametrize("cls, suffix", [
    ("Counter", "_bucket"), ("Counter", "_sum"), ("Counter", ":bucket"),
    ("Counter", ":frac_u"), ("Gauge", "_sum"), ("Gauge", "_info"),
    ("Gauge", "_gauge_all"), ("Histogram", "_sum"), ("Histogram", ":bucket"),
    ("Histogram", "_total"), ("Summary", "_sum"), ("Summary", ":enum"),
    ("Info", "_sum"), ("Info", ":enum"), ("Enum", "_bucket")])
def test_suffix_like_names_show_as_prometheus_client(uniq, cls, suffix):
    """A metric whose name ends like one of the encoding's series is
    shown as prometheus_client shows it, byte for byte."""
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


@pytest.mark.parametrize("suffix", [":gauge", ":gauge_all", ":gauge_x",
                                    ":info", ":enum", ":set_ns", ":frac_u",
                                    ":bucket"])
def test_gauge_named_like_a_part_of_the_encoding_is_refused(uniq, suffix):
    """A gauge's series is its own name: one that readers of the earlier
    encoding would take for a part of another metric is refused at
    construction, before anything is written."""
    with pytest.raises(ValueError, match="cannot end with"):
        tally.Gauge(uniq + suffix, "d", registry=None)
    names = [s[0] for s in _native.read(None, None)[0]]
    assert uniq + suffix not in names


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


def test_gauge_of_an_earlier_build_is_superseded(uniq):
    """A zone where an earlier build of the package wrote a per-process
    gauge as <n>:gauge_livesum (its definition a series-less record
    under <n>): still read as gauge <n> until a process defines the gauge
    anew, whose series, under <n> itself, are then the only ones shown."""
    reg = tally.CollectorRegistry()
    zone = reg.zone
    _native.claim(zone, uniq, "tally-python gauge labels= mode=livesum",
                  enc.every_series(uniq))
    old = _native.GaugeBase()
    old._bind(_native.Family(zone, _native.KIND_GAUGE,
                             enc.parts(_native.KIND_GAUGE,
                                       uniq + ":gauge_livesum"),
                             "Busy.", "", (), combine=3), ())
    old.set(5)
    [fam] = [f for f in tally.read(reg).families if f.name == uniq]
    assert [(s.name, s.value) for s in fam.samples] == [(uniq, 5.0)]
    tally.Gauge(uniq, "Busy.", registry=None,
                multiprocess_mode="livesum").set(2)
    names = {s[0] for s in _native.read(None, reg.zone_name())[0]}
    assert uniq in names and uniq + ":gauge_livesum" not in names
    [fam] = [f for f in tally.read(reg).families if f.name == uniq]
    assert (fam.type, [(s.name, s.value) for s in fam.samples]) == \
        ("gauge", [(uniq, 2.0)])
