"""Writing a zone's metrics in Prometheus's formats.

generate_latest() writes a zone as text format 0.0.4, or OpenMetrics
1.0.0 with openmetrics=True, with tally-exporter's own writer
(tally_metrics._native.expose(), programs/expose in C): the bytes are
those of a scrape of tally-exporter --aggregate --self-metrics=no over
the same segments, so that the application's /metrics and the exporter
cannot disagree on a name, an escape, a suffix, an le bound or a unit.

format_text() and format_openmetrics() write the metrics of _read.read()
in Python as prometheus_client writes them (its spelling of a float:
"1.0"); they are what TallyCollector's samples look like once
prometheus_client has written them.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ._format import (escape_help, escape_help_om, escape_label_value,
                      float_to_go_string)
from . import _native
from ._read import MetricFamily
from ._registry import REGISTRY, CollectorRegistry

CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"
CONTENT_TYPE_OPENMETRICS = \
    "application/openmetrics-text; version=1.0.0; charset=utf-8"


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
    """The metrics of @registry's zone (the default zone's by default;
    @zone: a zone by name; all_zones=True: every segment of @dir),
    summed over every process that wrote them, as Prometheus text
    (openmetrics=True: OpenMetrics), written by tally-exporter's writer:
    the same bytes as tally-exporter --aggregate --self-metrics=no
    serves for the same segments.  Segments that cannot be read are
    skipped (read() lists them).  Running out of memory while it is
    written raises MemoryError; the process goes on.

    @registry may also be a prometheus_client CollectorRegistry: its
    TallyCollectors (and under the switch the zone of its metrics) are
    then written by tally-exporter's writer and its other collectors by
    prometheus_client, each in the order registered
    (of_prometheus_client(); a registry of another class: all by
    prometheus_client)."""
    if registry is not None and not isinstance(registry, CollectorRegistry):
        return _of_prometheus_client(registry, openmetrics)
    return expose(registry, openmetrics, dir, zone, all_zones)[0]


def expose(registry: Optional[CollectorRegistry] = None,
           openmetrics: bool = False, dir: Optional[str] = None,
           zone: Optional[str] = None, all_zones: bool = False
           ) -> Tuple[bytes, List[Tuple[str, str]]]:
    """generate_latest()'s text, and the (path, why) of the segments
    that could not be read."""
    if not all_zones and zone is None:
        zone = (registry or REGISTRY).zone_name()
    text, skipped, _ = _native.expose(dir, None if all_zones else zone,
                                      openmetrics)
    return text, skipped


def _of_prometheus_client(registry: Any, openmetrics: bool) -> bytes:
    """generate_latest() of a prometheus_client registry: its parts held
    in tally in C, the other collectors by prometheus_client."""
    from . import _promclient
    text = of_prometheus_client(registry, openmetrics)
    if text is None:
        text = _promclient.write_collectors([registry], openmetrics)
        if openmetrics:
            text += b"# EOF\n"
    return text


# Where the patched collect() of the default registry shows the zone's
# metrics that no collector of this process showed: after them all.
_ZONE_LAST = object()


def of_prometheus_client(registry: Any, openmetrics: bool
                         ) -> Optional[bytes]:
    """The exposition of prometheus_client registry @registry, its runs
    of collectors in the order registered: a TallyCollector by
    tally-exporter's writer, and under the switch (_backend.py) the zone
    of its metrics by that writer too, once, for a MultiProcessCollector
    (which reads the zone) and for the metrics of the default registry
    held in tally (whose collect() shows the zone's); every other
    collector by prometheus_client.  The default registry under the
    switch shows the zone even when this process has defined none of its
    metrics (its collect() adds them after its collectors): the zone is
    written there then.  None when @registry is not a plain
    CollectorRegistry of prometheus_client."""
    from . import _backend, _promclient
    from ._collector import TallyCollector
    parts = _promclient.registry_parts(registry)
    if parts is None:
        return None
    default = _backend._installed and \
        registry is _promclient.default_registry()
    out: List[bytes] = []
    others: List[Any] = []
    zone_done = False
    for c in list(parts) + ([_ZONE_LAST] if default else []):
        if isinstance(c, TallyCollector):
            text = c.expose(openmetrics)
        elif c is _ZONE_LAST or _backend.shows_zone(c, default):
            if zone_done:
                continue
            zone_done = True
            text = expose(_backend._registry(), openmetrics)[0]
        else:
            others.append(c)
            continue
        if others:
            out.append(_promclient.write_collectors(others, openmetrics))
            others = []
        out.append(text[:-len(b"# EOF\n")] if openmetrics else text)
    if others:
        out.append(_promclient.write_collectors(others, openmetrics))
    if openmetrics:
        out.append(b"# EOF\n")
    return b"".join(out)
