"""Reading a zone: its series, summed over the segments, as the
Prometheus metrics they hold.

read() reads every segment of a zone through libtally's reader
(tally_metrics._native.read), sums each series over the segments (as
tally-exporter --aggregate does: one value per series, whatever the
number of processes that wrote it), and rebuilds the Python metrics from
their series (_encoding.py says how they are named), in passes:

  _sum_segments        one value per series (a time of set: the latest)
  _Scrape.__init__     one metric per name, in the order the zone's
                       series were first registered
  _place_series        each series into its metric (or aside, for the
                       passes below, when its samples need them all)
  _show_tally_histograms  tally's own histograms, one le per power of two
  _show_enums          one sample per state
  _show_histograms     cumulative buckets, _count and _sum; a summary's
  _combine_gauges      per-process gauges, combined as their mode says

Series that C code registered are shown too (counters, gauges and tally's
own histograms); integers in a unit of tally's vocabulary
(TALLY_UNIT_NANOSECONDS...) in the base unit, as tally-exporter shows
them: "request_duration_ns" in nanoseconds is "request_duration_seconds",
its edges and sum exact decimals of seconds.
"""
from __future__ import annotations

from itertools import chain
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from . import _encoding as enc
from . import _native, _process
from ._format import float_to_go_string
from ._registry import REGISTRY, CollectorRegistry

_SCALE = float(_native.FRAC_SCALE)

Labels = Tuple[Tuple[str, str], ...]
Key = Tuple[str, Labels]


class Sample(NamedTuple):
    name: str
    labels: Dict[str, str]
    value: float


class MetricFamily:
    """One metric as a scrape shows it: name (a counter's without
    "_total", as prometheus_client's Metric), type, help, unit and
    samples."""

    __slots__ = ("name", "type", "documentation", "unit", "samples")

    def __init__(self, name: str, typ: str, documentation: str,
                 unit: str = "") -> None:
        self.name = name
        self.type = typ
        self.documentation = documentation
        self.unit = unit
        self.samples: List[Sample] = []

    def __repr__(self) -> str:
        return (f"MetricFamily({self.name!r}, {self.type!r}, "
                f"{len(self.samples)} samples)")


class ReadResult(NamedTuple):
    families: List[MetricFamily]
    skipped: List[Tuple[str, str]]  # (path, why) of segments refused
    segments: int


def read(registry: Optional[CollectorRegistry] = None,
         dir: Optional[str] = None, zone: Optional[str] = None,
         all_zones: bool = False) -> ReadResult:
    """The metrics of a zone: @zone names it, else @registry's zone (the
    default zone by default); all_zones=True reads every segment of the
    directory.  @dir: $TALLY_DIR, or the default places
    ($XDG_RUNTIME_DIR/tally and /dev/shm/tally-<uid>), by default."""
    if not all_zones and zone is None:
        zone = (registry or REGISTRY).zone_name()
    series, skipped, nseg = _native.read(dir, None if all_zones else zone)
    sums = _sum_segments(series)
    scrape = _Scrape(sums)
    _place_series(sums, scrape)
    _show_tally_histograms(sums, scrape)
    _show_enums(scrape)
    _show_histograms(scrape)
    _combine_gauges(sums, scrape)
    return ReadResult(scrape.families(), skipped, nseg)


class _Sums:
    """One value per series of the zone, summed over its segments."""

    def __init__(self) -> None:
        # Per series name: (kind, help, unit) of its first segment.
        self.meta: Dict[str, Tuple[int, str, str]] = {}
        self.ints: Dict[Key, int] = {}
        self.floats: Dict[Key, float] = {}
        # tally's own histograms: [count, sub_bits, sum, bucket counts,
        # bounds]; bounds is None but for a classic histogram (format
        # 2.6), whose sum is a float.
        self.tally_hists: Dict[Key, List[Any]] = {}
        # Per series name, what it is (filled once every name is known).
        self.decoded: Dict[str, enc.Series] = {}
        # Fractions (millionths) by (the series they belong to, labels).
        self.fracs: Dict[Key, int] = {}


def _sum_segments(series: List[Any]) -> _Sums:
    s = _Sums()
    for name, kind, help_, unit, labels, value, hist in series:
        if name not in s.meta:
            s.meta[name] = (kind, help_, unit)
        key = (name, labels)
        if kind in (_native.TALLY_HISTOGRAM, _native.TALLY_SUMMARY):
            if hist is not None:
                _add_tally_histogram(s.tally_hists, key, value, hist)
        elif kind in (_native.TALLY_FGAUGE, _native.TALLY_PGAUGE):
            s.floats[key] = s.floats.get(key, 0.0) + value
        elif kind in (_native.TALLY_INFO, _native.TALLY_ENUM):
            # A pair set or a state true in one segment is true (1),
            # as tally-exporter --aggregate shows it.
            s.floats[key] = max(s.floats.get(key, 0.0), value)
        elif enc.is_set_time(name):
            s.ints[key] = max(s.ints.get(key, 0), value)
        else:
            s.ints[key] = s.ints.get(key, 0) + value
    hists = enc.histogram_bases(s.meta)
    for name, (kind, _help, _unit) in s.meta.items():
        s.decoded[name] = enc.decode(name, kind, hists)
    for (name, labels), v in s.ints.items():
        d = s.decoded[name]
        if d.role == enc.FRACTION:
            s.fracs[(d.base, labels)] = v
    return s


def _add_tally_histogram(hists: Dict[Key, List[Any]], key: Key,
                         count: int, hist: Any) -> None:
    """Sums tally's own histograms bucket by bucket over the segments
    that have the same layout (the first segment's)."""
    hsum, sub_bits, _max_bits, counts, bounds = hist
    cur = hists.get(key)
    if cur is None:
        hists[key] = [count, sub_bits, hsum, list(counts), bounds]
        return
    if cur[1] != sub_bits or len(cur[3]) != len(counts) or \
            cur[4] != bounds:
        return
    cur[0] += count
    cur[2] += hsum
    for i, c in enumerate(counts):
        cur[3][i] += c


# A metric's key in _Scrape: a series name, or (HIST, base) for the
# series of a histogram (or a summary) named base.
FamilyKey = Union[str, Tuple[str, str]]
_HIST = "histogram"


def _family_key(d: enc.Series) -> FamilyKey:
    if d.role in (enc.HIST_BUCKET, enc.HIST_SUM):
        return (_HIST, d.base)
    return d.base


class _Scrape:
    """The metrics being built, and what the later passes gather."""

    def __init__(self, sums: _Sums) -> None:
        # Metrics in the order their series first appear (registration):
        # every key now, each made by the first series placed in it.
        self.fams: Dict[FamilyKey, Optional[MetricFamily]] = dict.fromkeys(
            _family_key(d) for d in sums.decoded.values())
        # Histograms: per base, per label set: {le: count}, sum.
        self.hbuckets: Dict[str, Dict[Labels, Dict[str, int]]] = {}
        self.hsum: Dict[str, Dict[Labels, float]] = {}
        # Per-process gauges: per series name, per label set (pid taken
        # out): [(pid value, value)].
        self.pgauges: Dict[str, Dict[Labels, List[Tuple[str, float]]]] = {}
        # Enums: per series name, per label set (the state taken out):
        # [(state, value)] in the order of the states.
        self.enums: Dict[str, Dict[Labels, List[Tuple[str, float]]]] = {}

    def family(self, key: FamilyKey, name: str, typ: str, help_: str,
               unit: str) -> MetricFamily:
        f = self.fams.get(key)
        if f is None:
            f = self.fams[key] = MetricFamily(name, typ, help_, unit)
        return f

    def families(self) -> List[MetricFamily]:
        return [f for f in self.fams.values() if f is not None]


def _without(labels: Labels, name: str) -> Tuple[Labels, Optional[str]]:
    rest = []
    found = None
    for k, v in labels:
        if k == name:
            found = v
        else:
            rest.append((k, v))
    return tuple(rest), found


def _place_series(sums: _Sums, scrape: _Scrape) -> None:
    """Each series into the metric its name says (fractions and times of
    set are read with the series they belong to)."""
    for (name, labels), v in chain(sums.ints.items(), sums.floats.items()):
        kind, help_, unit = sums.meta[name]
        d = sums.decoded[name]
        if d.role in (enc.FRACTION, enc.SET_TIME):
            continue
        if d.role == enc.MAIN_PLAIN:
            _place_plain(sums, scrape, name, kind, labels, v)
            continue
        f = scrape.family(_family_key(d), d.metric, d.type, help_, unit)
        if d.role == enc.HIST_BUCKET:
            rest, le = _without(labels, enc.LE_LABEL)
            per = scrape.hbuckets.setdefault(d.base, {}).setdefault(rest, {})
            per[le or "+Inf"] = per.get(le or "+Inf", 0) + int(v)
        elif d.role == enc.HIST_SUM:
            frac = sums.fracs.get((name, labels), 0)
            scrape.hsum.setdefault(d.base, {})[labels] = \
                int(v) + frac / _SCALE
        elif d.role == enc.INFO_PAIRS:
            if v == 1.0:
                f.samples.append(Sample(d.metric + "_info", dict(labels),
                                        v))
        elif d.role == enc.ENUM_STATE:
            rest, state = _without(labels, d.metric)
            scrape.enums.setdefault(name, {}).setdefault(rest, []).append(
                (state or "", float(v)))
        elif d.mode is None or kind == _native.TALLY_PGAUGE:
            # A shared gauge, or a per-process one that the reader
            # combined as its mode says (format 2.6).
            f.samples.append(Sample(d.metric, dict(labels), float(v)))
        else:
            rest, pid = _without(labels, enc.PID_LABEL)
            scrape.pgauges.setdefault(name, {}).setdefault(rest, []).append(
                (pid or "", float(v)))


def _place_plain(sums: _Sums, scrape: _Scrape, name: str, kind: int,
                 labels: Labels, v: float) -> None:
    """A counter or a gauge as tally-exporter shows it: integers in a unit
    of the vocabulary (nanoseconds...) in the base unit; a counter named
    "..._total" as a counter (with its fraction), else untyped."""
    _kind, help_, unit = sums.meta[name]
    shown, unit = _native.unit_name(name, unit)
    scaled = _native.unit_value(int(v), sums.meta[name][2]) \
        if isinstance(v, int) else None
    if kind == _native.TALLY_COUNTER:
        frac = sums.fracs.get((name, labels), 0)
        value = int(v) + frac / _SCALE if frac else float(v)
        if scaled is not None and not frac:
            value = float(scaled)
        if shown.endswith(enc.TOTAL):
            f = scrape.family(name, shown[:-len(enc.TOTAL)], "counter",
                              help_, unit)
        else:
            f = scrape.family(name, shown, "unknown", help_, unit)
        f.samples.append(Sample(shown, dict(labels), value))
    else:
        f = scrape.family(name, shown, "gauge", help_, unit)
        f.samples.append(Sample(shown, dict(labels), float(
            scaled if scaled is not None else v)))


def _show_tally_histograms(sums: _Sums, scrape: _Scrape) -> None:
    """tally's own histograms: the edges of one bucket per power of two
    (tally-exporter's default), cumulative, in the base unit."""
    for (name, labels), (count, sub_bits, total, counts, bounds) in \
            sums.tally_hists.items():
        kind, help_, unit = sums.meta[name]
        if kind == _native.TALLY_SUMMARY:
            # A summary of the format (2.7): its count and exact sum.
            f = scrape.family(name, name, "summary", help_, unit)
            f.samples.append(Sample(name + "_count", dict(labels),
                                    float(count)))
            f.samples.append(Sample(name + "_sum", dict(labels),
                                    float(total)))
            continue
        if bounds is not None:
            _show_classic(scrape, name, labels, help_, unit, count, total,
                          counts, bounds)
            continue
        shown, base_unit = _native.unit_name(name, unit)
        f = scrape.family(name, shown, "histogram", help_, base_unit)
        acc = 0
        for i, c in enumerate(counts):
            acc += c
            hi = _native.bucket_upper(i, sub_bits)
            if hi & (hi + 1):
                continue  # not 2^k - 1
            # The edge as tally-exporter writes it (an exact decimal),
            # so that both show one series per bucket.
            le = _native.unit_value(hi, unit) or str(hi)
            f.samples.append(Sample(shown + "_bucket",
                                    dict(labels + (("le", le),)),
                                    float(acc)))
        f.samples.append(Sample(shown + "_bucket",
                                dict(labels + (("le", "+Inf"),)),
                                float(count)))
        f.samples.append(Sample(shown + "_count", dict(labels),
                                float(count)))
        sv = _native.unit_value(total, unit)
        f.samples.append(Sample(shown + "_sum", dict(labels),
                                float(sv if sv is not None else total)))


def _show_classic(scrape: _Scrape, name: str, labels: Labels, help_: str,
                  unit: str, count: int, total: float, counts: List[int],
                  bounds: Tuple[float, ...]) -> None:
    """A classic histogram of the format (2.6), the Python Histogram's:
    its own bounds as le, spelled as prometheus_client spells them,
    cumulative; then +Inf, _count and the sum (not for negative buckets,
    as prometheus_client)."""
    f = scrape.family(name, name, "histogram", help_, unit)
    acc = 0
    for b, c in zip(bounds, counts):
        acc += c
        f.samples.append(Sample(name + "_bucket",
                                dict(labels + (("le", float_to_go_string(b)),)),
                                float(acc)))
    f.samples.append(Sample(name + "_bucket",
                            dict(labels + (("le", "+Inf"),)), float(count)))
    f.samples.append(Sample(name + "_count", dict(labels), float(count)))
    if not bounds or bounds[0] >= 0:
        f.samples.append(Sample(name + "_sum", dict(labels), float(total)))


def _show_enums(scrape: _Scrape) -> None:
    """One sample per state; of the encoding of earlier versions
    (<n>:enum), before any state(), the first (an enum of the format
    sets it when it is made)."""
    for name, per_labels in scrape.enums.items():
        f = scrape.fams[name]
        assert f is not None
        for labels, states in per_labels.items():
            first = name.endswith(enc.ENUM) and \
                not any(v == 1.0 for _, v in states)
            for i, (state, v) in enumerate(states):
                one = 1.0 if (v == 1.0 or (first and i == 0)) else 0.0
                f.samples.append(Sample(f.name, dict(
                    labels + ((f.name, state),)), one))


def _show_histograms(scrape: _Scrape) -> None:
    """Cumulative buckets, +Inf == _count, then _sum (not for negative
    buckets, as prometheus_client); a summary's _count and _sum."""
    for b, per_labels in scrape.hbuckets.items():
        f = scrape.fams[(_HIST, b)]
        assert f is not None
        sums = scrape.hsum.get(b, {})
        if f.type == "summary":
            for labels, counts in per_labels.items():
                f.samples.append(Sample(f.name + "_count", dict(labels),
                                        float(counts.get("+Inf", 0))))
                f.samples.append(Sample(f.name + "_sum", dict(labels),
                                        sums.get(labels, 0.0)))
            continue
        for labels, counts in per_labels.items():
            bounds = sorted(counts, key=float)
            acc = 0
            for le in bounds:
                acc += counts[le]
                f.samples.append(Sample(b + "_bucket",
                                        dict(labels + (("le", le),)),
                                        float(acc)))
            f.samples.append(Sample(b + "_count", dict(labels), float(acc)))
            if bounds and float(bounds[0]) >= 0:
                f.samples.append(Sample(b + "_sum", dict(labels),
                                        sums.get(labels, 0.0)))


def _combine_gauges(sums: _Sums, scrape: _Scrape) -> None:
    """Per-process gauges, combined as their mode says: "all" keeps one
    sample per process (label pid), the others one value; the "live"
    modes count only the processes that still run."""
    live: Dict[str, bool] = {}
    for name, per_labels in scrape.pgauges.items():
        f = scrape.fams[name]
        assert f is not None
        mode = sums.decoded[name].mode
        assert mode is not None
        for labels, values in per_labels.items():
            if mode.startswith("live"):
                values = [(p, v) for p, v in values
                          if _process.alive(p, live)]
                how = mode[4:]
            else:
                how = mode
            if how == "all":
                for p, v in values:
                    f.samples.append(Sample(f.name, dict(
                        labels + ((enc.PID_LABEL, _process.split_pid(p)),)),
                        v))
            elif values:
                f.samples.append(Sample(f.name, dict(labels), _combined(
                    how, sums, name + enc.SETNS, labels, values)))


def _combined(how: str, sums: _Sums, setns: str, labels: Labels,
              values: List[Tuple[str, float]]) -> float:
    """The one value of per-process gauge values @values ([(pid, value)])
    for mode @how (without "live"): their sum, max or min, or the value
    of the latest set (series @setns keeps each one's time)."""
    vs = [v for _, v in values]
    if how == "sum":
        return sum(vs)
    if how == "max":
        return max(vs)
    if how == "min":
        return min(vs)
    best: Optional[Tuple[int, float]] = None
    for p, v in values:
        t = sums.ints.get((setns, tuple(sorted(
            labels + ((enc.PID_LABEL, p),)))), 0)
        if best is None or t > best[0]:
            best = (t, v)
    return best[1] if best else 0.0
