"""Writing a zone's metrics in Prometheus's formats.

generate_latest() writes what _read.read() finds in a zone as text format
0.0.4, or OpenMetrics 1.0.0 with openmetrics=True, as prometheus_client
writes them.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ._format import (escape_help, escape_help_om, escape_label_value,
                      float_to_go_string)
from ._read import MetricFamily, read
from ._registry import CollectorRegistry

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
