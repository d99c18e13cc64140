"""Reading a zone's series and writing them in Prometheus's formats.

collect() reads every segment of a zone through libtally's reader
(tally._native.read), sums each series over the segments (as
tally-exporter --aggregate does: one value per series, whatever the
number of processes that wrote it), and rebuilds the Python metrics from
the series _native.Family keeps for them (family.c says which):

  <n>_total, <n>_total:frac_u      a counter: integer part + millionths
  <n>:gauge                        a gauge shared by every process
  <n>:gauge_<mode>{pid=...}        a gauge per process, combined by mode
  <n>:gauge_<mode>:set_ns          the time of each process's last set
  <n>:bucket{le=...}, <n>_sum, <n>_sum:frac_u
                                   a histogram: counts per bucket (not
                                   cumulative), the sum
  <n>:summary:bucket{le="+Inf"}, <n>:summary_sum, ...
                                   a summary: its count and sum
  <n>:info{...,pairs}              an Info: 1 for the current pairs
  <n>:enum{...,<n>=state}          an Enum: 1 for the current state

Series that C code registered are shown too (counters, gauges and tally's
own histograms, with one le edge per power of two); integers in a unit of
tally's vocabulary (TALLY_UNIT_NANOSECONDS...) in the base unit, as
tally-exporter shows them: "request_duration_ns" in nanoseconds is
"request_duration_seconds", its edges and sum exact decimals of seconds.
generate_latest() writes text format 0.0.4, or OpenMetrics 1.0.0 with
openmetrics=True, as prometheus_client writes them.
"""
from __future__ import annotations

import re
import struct
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from . import _native, _process
from ._format import (escape_help, escape_help_om, escape_label_value,
                      float_to_go_string)
from ._registry import REGISTRY, CollectorRegistry

CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"
CONTENT_TYPE_OPENMETRICS = \
    "application/openmetrics-text; version=1.0.0; charset=utf-8"

_SCALE = float(_native.FRAC_SCALE)
_FRAC = _native.SFX_FRAC
_BUCKET = _native.SFX_BUCKET
_SETNS = _native.SFX_SETNS
_SUMMARY = _native.SFX_SUMMARY
_INFO = _native.SFX_INFO
_ENUM = _native.SFX_ENUM
_GAUGE_RE = re.compile(r"^(.*):gauge(?:_([a-z]+))?$")

Labels = Tuple[Tuple[str, str], ...]


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


def _without(labels: Labels, name: str) -> Tuple[Labels, Optional[str]]:
    rest = []
    found = None
    for k, v in labels:
        if k == name:
            found = v
        else:
            rest.append((k, v))
    return tuple(rest), found


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

    # Pass 1: one value per series, summed over the segments.
    meta: Dict[str, Tuple[int, str, str]] = {}
    # tally's own histograms: (name, labels) -> [count, sub_bits, sum,
    # bucket counts].
    chists: Dict[Tuple[str, Labels], List[Any]] = {}
    ints: Dict[Tuple[str, Labels], int] = {}
    floats: Dict[Tuple[str, Labels], float] = {}
    for name, kind, help_, unit, labels, value, hist in series:
        if name not in meta:
            meta[name] = (kind, help_, unit)
        key = (name, labels)
        if kind == _native.TALLY_HISTOGRAM:
            # tally's own histograms (from C): summed bucket by bucket
            # over the segments that have the same layout.
            if hist is None:
                continue
            hsum_, sub_bits, _max_bits, counts = hist
            cur = chists.get(key)
            if cur is None or cur[1] != sub_bits or \
                    len(cur[3]) != len(counts):
                if cur is None:
                    chists[key] = [value, sub_bits, hsum_, list(counts)]
                continue
            cur[0] += value
            cur[2] += hsum_
            for i, c in enumerate(counts):
                cur[3][i] += c
            continue
        if kind == _native.TALLY_FGAUGE:
            floats[key] = floats.get(key, 0.0) + value
        elif name.endswith(_SETNS):
            ints[key] = max(ints.get(key, 0), value)
        else:
            ints[key] = ints.get(key, 0) + value

    hists = {n[:-len(_BUCKET)] for n in meta if n.endswith(_BUCKET)}

    def base_of(name: str) -> Tuple[str, str]:
        """(metric, role) of a series name."""
        if name.endswith(_SETNS):
            return name[:-len(_SETNS)], "setns"
        if name.endswith(_FRAC):
            return name[:-len(_FRAC)], "frac"
        if name.endswith(_BUCKET):
            return name[:-len(_BUCKET)], "bucket"
        if name.endswith("_sum") and name[:-4] in hists:
            return name[:-4], "sum"
        return name, "main"

    fams: Dict[str, MetricFamily] = {}
    # Histograms: per metric, per label set: {le: count}, sum.
    hbuckets: Dict[str, Dict[Labels, Dict[str, int]]] = {}
    hsum: Dict[str, Dict[Labels, float]] = {}
    # Per-process gauges: per tally name, per label set (pid taken out):
    # [(pid value, value)].
    pgauges: Dict[str, Dict[Labels, List[Tuple[str, float]]]] = {}
    fracs: Dict[Tuple[str, Labels], int] = {}
    for (name, labels), v in ints.items():
        if name.endswith(_FRAC):
            fracs[(name[:-len(_FRAC)], labels)] = v

    def family(key: str, name: str, typ: str, help_: str, unit: str
               ) -> MetricFamily:
        f = fams.get(key)
        if f is None:
            f = fams[key] = MetricFamily(name, typ, help_, unit)
        return f

    def hfamily(b: str, help_: str, unit: str) -> MetricFamily:
        """The family of a histogram's (or a summary's) series."""
        if b.endswith(_SUMMARY):
            return family("h:" + b, b[:-len(_SUMMARY)], "summary", help_,
                          unit)
        return family("h:" + b, b, "histogram", help_, unit)

    # Enums: per tally name, per label set (the state taken out):
    # [(state, value)] in the order of the states.
    enums: Dict[str, Dict[Labels, List[Tuple[str, float]]]] = {}

    # Families in the order their series first appear (registration).
    order: Dict[str, None] = {}
    for name in meta:
        b, role = base_of(name)
        if role == "sum" or role == "bucket":
            order.setdefault("h:" + b)
        elif role == "main":
            order.setdefault(name)
        else:
            order.setdefault(b)
    for k in order:
        fams.setdefault(k, None)  # type: ignore[arg-type]

    for (name, labels), v in list(ints.items()) + list(floats.items()):
        kind, help_, unit = meta[name]
        b, role = base_of(name)
        if role == "frac" or role == "setns":
            continue
        if role == "bucket":
            rest, le = _without(labels, "le")
            hfamily(b, help_, unit)
            per = hbuckets.setdefault(b, {}).setdefault(rest, {})
            per[le or "+Inf"] = per.get(le or "+Inf", 0) + int(v)
            continue
        if role == "sum":
            frac = fracs.get((name, labels), 0)
            hsum.setdefault(b, {})[labels] = int(v) + frac / _SCALE
            hfamily(b, help_, unit)
            continue
        if kind == _native.TALLY_FGAUGE and name.endswith(_INFO):
            metric = name[:-len(_INFO)]
            f = family(name, metric, "info", help_, unit)
            if v == 1.0:
                f.samples.append(Sample(metric + "_info", dict(labels), v))
            continue
        if kind == _native.TALLY_FGAUGE and name.endswith(_ENUM):
            metric = name[:-len(_ENUM)]
            family(name, metric, "stateset", help_, unit)
            rest, state = _without(labels, metric)
            enums.setdefault(name, {}).setdefault(rest, []).append(
                (state or "", float(v)))
            continue
        m = _GAUGE_RE.match(name) if kind == _native.TALLY_FGAUGE \
            else None
        if m:
            metric, mode = m.group(1), m.group(2)
            f = family(name, metric, "gauge", help_, unit)
            if mode is None:
                f.samples.append(Sample(metric, dict(labels), float(v)))
            else:
                rest, pid = _without(labels, "pid")
                pgauges.setdefault(name, {}).setdefault(rest, []).append(
                    (pid or "", float(v)))
            continue
        # Integers in a unit of the vocabulary (nanoseconds...) are
        # shown in the base unit, as tally-exporter shows them.
        shown, unit = _native.unit_name(name, unit)
        scaled = _native.unit_value(int(v), meta[name][2]) \
            if kind != _native.TALLY_FGAUGE else None
        if kind == _native.TALLY_COUNTER:
            frac = fracs.get((name, labels), 0)
            value = int(v) + frac / _SCALE if frac else float(v)
            if scaled is not None and not frac:
                value = float(scaled)
            if shown.endswith("_total"):
                f = family(name, shown[:-6], "counter", help_, unit)
            else:
                f = family(name, shown, "unknown", help_, unit)
            f.samples.append(Sample(shown, dict(labels), value))
        else:
            f = family(name, shown, "gauge", help_, unit)
            f.samples.append(Sample(shown, dict(labels), float(
                scaled if scaled is not None else v)))

    # tally's own histograms: the edges of one bucket per power of two
    # (tally-exporter's default), cumulative, in the base unit.
    for (name, labels), (count, sub_bits, total, counts) in chists.items():
        _kind, help_, unit = meta[name]
        shown, base_unit = _native.unit_name(name, unit)
        f = family(name, shown, "histogram", help_, base_unit)
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

    # Enums: one sample per state; before any state(), the first.
    for name, per_labels in enums.items():
        f = fams[name]
        for labels, states in per_labels.items():
            first = not any(v == 1.0 for _, v in states)
            for i, (state, v) in enumerate(states):
                one = 1.0 if (v == 1.0 or (first and i == 0)) else 0.0
                f.samples.append(Sample(f.name, dict(
                    labels + ((f.name, state),)), one))

    # Histograms: cumulative buckets, +Inf == _count.
    for b, per_labels in hbuckets.items():
        f = fams["h:" + b]
        if f.type == "summary":
            for labels, counts in per_labels.items():
                f.samples.append(Sample(f.name + "_count", dict(labels),
                                        float(counts.get("+Inf", 0))))
                f.samples.append(Sample(f.name + "_sum", dict(labels),
                                        hsum.get(b, {}).get(labels, 0.0)))
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
                                        hsum.get(b, {}).get(labels, 0.0)))

    # Per-process gauges, combined as their mode says.
    live: Dict[str, bool] = {}
    for name, per_labels in pgauges.items():
        f = fams[name]
        mode = _GAUGE_RE.match(name).group(2)  # type: ignore[union-attr]
        metric = f.name
        for labels, values in per_labels.items():
            if mode.startswith("live"):
                values = [(p, v) for p, v in values
                          if _process.alive(p, live)]
                kind_ = mode[4:]
            else:
                kind_ = mode
            if kind_ == "all":
                for p, v in values:
                    f.samples.append(Sample(metric, dict(
                        labels + (("pid", _process.split_pid(p)),)), v))
                continue
            if not values:
                continue
            vs = [v for _, v in values]
            if kind_ == "sum":
                value = sum(vs)
            elif kind_ == "max":
                value = max(vs)
            elif kind_ == "min":
                value = min(vs)
            else:  # mostrecent: the latest set among the processes
                best = None
                for p, v in values:
                    t = ints.get((name + _SETNS,
                                  tuple(sorted(labels + (("pid", p),)))), 0)
                    if best is None or t > best[0]:
                        best = (t, v)
                value = best[1] if best else 0.0
            f.samples.append(Sample(metric, dict(labels), value))

    out = [f for f in fams.values() if f is not None]
    return ReadResult(out, skipped, nseg)


def _labelstr(labels: Dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(
        f'{k}="{escape_label_value(v)}"'
        for k, v in sorted(labels.items())) + "}"


def format_text(families: List[MetricFamily]) -> str:
    """Text format 0.0.4, as prometheus_client.generate_latest writes."""
    out: List[str] = []
    for f in families:
        mname = f.name
        typ = f.type
        if typ == "counter":
            mname = f.name + "_total"
        elif typ == "info":
            mname = f.name + "_info"
            typ = "gauge"
        elif typ == "stateset":
            typ = "gauge"
        elif typ == "unknown":
            typ = "untyped"
        out.append(f"# HELP {mname} {escape_help(f.documentation)}\n")
        out.append(f"# TYPE {mname} {typ}\n")
        for s in f.samples:
            out.append(f"{s.name}{_labelstr(s.labels)} "
                       f"{float_to_go_string(s.value)}\n")
    return "".join(out)


def format_openmetrics(families: List[MetricFamily]) -> str:
    """OpenMetrics 1.0.0 text, as prometheus_client writes it."""
    out: List[str] = []
    for f in families:
        out.append(f"# HELP {f.name} {escape_help_om(f.documentation)}\n")
        out.append(f"# TYPE {f.name} {f.type}\n")
        if f.unit:
            out.append(f"# UNIT {f.name} {f.unit}\n")
        for s in f.samples:
            out.append(f"{s.name}{_labelstr(s.labels)} "
                       f"{float_to_go_string(s.value)}\n")
    out.append("# EOF\n")
    return "".join(out)


def generate_latest(registry: Any = None, openmetrics: bool = False,
                    dir: Optional[str] = None, zone: Optional[str] = None,
                    all_zones: bool = False) -> bytes:
    """The metrics of @registry's zone (the default zone's by default),
    summed over every process that wrote them, as Prometheus text
    (openmetrics=True: OpenMetrics).  Segments that cannot be read are
    skipped (read() lists them)."""
    if registry is not None and not isinstance(registry, CollectorRegistry):
        raise TypeError("generate_latest() reads a tally registry's zone; "
                        "for a prometheus_client registry, use "
                        "prometheus_client.generate_latest")
    res = read(registry, dir=dir, zone=zone, all_zones=all_zones)
    text = format_openmetrics(res.families) if openmetrics \
        else format_text(res.families)
    return text.encode("utf-8")
