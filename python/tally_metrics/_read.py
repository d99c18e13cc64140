"""Reading a zone: its series, summed over the segments, as the
Prometheus metrics they hold.

read() reads every segment of a zone through libtally's reader
(tally_metrics._native.read), sums each series over the segments (as
tally-exporter --aggregate does: one value per series, whatever the
number of processes that wrote it), and shows each metric as the reader
API's view of its series says, as tally-exporter shows it: its kind, a
per-process gauge's value combined as its mode says, a classic
histogram's bounds, a summary, an info or an enum (stateset) metric.
No name says what a series is: a name with ':' is only a name.

  _sum_segments           one value per series
  _Scrape.__init__        one metric per name, in the order the zone's
                          series were first registered
  _place_series           counters, gauges, info and enum metrics
  _show_tally_histograms  histograms: tally's own, one le per power of
                          two; classic ones, their bounds; summaries

Integers in a unit of tally's vocabulary (TALLY_UNIT_NANOSECONDS...) are
shown in the base unit, as tally-exporter shows them:
"request_duration_ns" in nanoseconds is "request_duration_seconds", its
edges and sum exact decimals of seconds.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from . import _native
from ._format import float_to_go_string
from ._registry import REGISTRY, CollectorRegistry

Labels = Tuple[Tuple[str, str], ...]
Key = Tuple[str, Labels]

_TOTAL = "_total"


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
    return ReadResult(scrape.families(), skipped, nseg)


class _Sums:
    """One value per series of the zone, summed over its segments."""

    def __init__(self) -> None:
        # Per series name: (kind, help, unit) of its first segment.
        self.meta: Dict[str, Tuple[int, str, str]] = {}
        # An int, or a float for a float gauge, a combined per-process
        # gauge, an info, an enum, a counter with a fraction.
        self.values: Dict[Key, Union[int, float]] = {}
        # Histograms: [count, sub_bits, sum, bucket counts, bounds];
        # bounds is None but for a classic histogram (format 2.6), whose
        # sum is a float.
        self.tally_hists: Dict[Key, List[Any]] = {}


def _sum_segments(series: List[Any]) -> _Sums:
    s = _Sums()
    for name, kind, help_, unit, labels, value, hist in series:
        if name not in s.meta:
            s.meta[name] = (kind, help_, unit)
        key = (name, labels)
        if kind in (_native.TALLY_HISTOGRAM, _native.TALLY_SUMMARY):
            if hist is not None:
                _add_tally_histogram(s.tally_hists, key, value, hist)
        elif kind in (_native.TALLY_INFO, _native.TALLY_ENUM):
            # A pair set or a state true in one segment is true (1),
            # as tally-exporter --aggregate shows it.
            s.values[key] = max(s.values.get(key, 0.0), value)
        else:
            s.values[key] = s.values.get(key, 0) + value
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


class _Scrape:
    """The metrics being built, one per series name."""

    def __init__(self, sums: _Sums) -> None:
        # Metrics in the order their series first appear (registration):
        # every name now, each made by the first series placed in it.
        self.fams: Dict[str, Optional[MetricFamily]] = dict.fromkeys(
            sums.meta)

    def family(self, key: str, name: str, typ: str, help_: str,
               unit: str) -> MetricFamily:
        f = self.fams.get(key)
        if f is None:
            f = self.fams[key] = MetricFamily(name, typ, help_, unit)
        return f

    def families(self) -> List[MetricFamily]:
        return [f for f in self.fams.values() if f is not None]


def _place_series(sums: _Sums, scrape: _Scrape) -> None:
    """Each series but histograms into its metric, as its kind says."""
    for (name, labels), v in sums.values.items():
        kind, help_, unit = sums.meta[name]
        if kind == _native.TALLY_INFO:
            # The reader API passes on an info's current pairs only.
            f = scrape.family(name, name, "info", help_, unit)
            if v == 1.0:
                f.samples.append(Sample(name + "_info", dict(labels), v))
        elif kind == _native.TALLY_ENUM:
            f = scrape.family(name, name, "stateset", help_, unit)
            f.samples.append(Sample(name, dict(labels), float(v)))
        else:
            _place_plain(sums, scrape, name, kind, labels, v)


def _place_plain(sums: _Sums, scrape: _Scrape, name: str, kind: int,
                 labels: Labels, v: Any) -> None:
    """A counter or a gauge (shared, or per-process as combined by the
    reader) as tally-exporter shows it: integers in a unit of the
    vocabulary (nanoseconds...) in the base unit; a counter named
    "..._total" as a counter, else untyped."""
    _kind, help_, unit = sums.meta[name]
    shown, unit = _native.unit_name(name, unit)
    scaled = _native.unit_value(int(v), sums.meta[name][2]) \
        if isinstance(v, int) else None
    value = float(scaled if scaled is not None else v)
    if kind == _native.TALLY_COUNTER:
        if shown.endswith(_TOTAL):
            f = scrape.family(name, shown[:-len(_TOTAL)], "counter",
                              help_, unit)
        else:
            f = scrape.family(name, shown, "unknown", help_, unit)
    else:
        f = scrape.family(name, shown, "gauge", help_, unit)
    f.samples.append(Sample(shown, dict(labels), value))


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
