"""Metric and label names: the rules and the errors of prometheus_client.

tally's own limits are checked here too, so that a name that tally would
refuse fails with a ValueError that says why, at construction.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence, Tuple

from . import _encoding, _native

METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
METRIC_LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
RESERVED_METRIC_LABEL_NAME_RE = re.compile(r"^__.*$")

def build_full_name(metric_type: str, name: str, namespace: str,
                    subsystem: str, unit: str) -> str:
    """namespace_subsystem_name_unit, as prometheus_client builds it (a
    counter's "_total" is taken off: the exposition adds it back)."""
    if not name:
        raise ValueError("Metric name should not be empty")
    full_name = ""
    if namespace:
        full_name += namespace + "_"
    if subsystem:
        full_name += subsystem + "_"
    full_name += name
    if metric_type == "counter" and full_name.endswith("_total"):
        full_name = full_name[:-6]
    if unit and not full_name.endswith("_" + unit):
        full_name += "_" + unit
    if not METRIC_NAME_RE.match(full_name):
        raise ValueError("Invalid metric name: " + full_name)
    longest = _encoding.LONGEST_SUFFIX
    if len(full_name.encode()) + longest > _native.NAME_MAX:
        raise ValueError(
            f"Metric name too long for tally: {full_name!r} "
            f"(at most {_native.NAME_MAX - longest} bytes)")
    return full_name


# The label names the exposition formats give a kind of metric: a
# histogram's buckets are told apart by "le", a summary's quantiles by
# "quantile", so a metric of that kind cannot have a label of that name
# (tally.Summary and prometheus_client on tally alike).
RESERVED_FOR = {
    "histogram": ("le",),
    "summary": ("quantile",),
}


def validate_labelname(name: str, metric: str = "") -> None:
    of = f" (metric {metric})" if metric else ""
    if not isinstance(name, str) or not METRIC_LABEL_NAME_RE.match(name):
        raise ValueError("Invalid label metric name: " + str(name) + of)
    if RESERVED_METRIC_LABEL_NAME_RE.match(name):
        raise ValueError("Reserved label metric name: " + name + of +
                         ": names starting with __ are Prometheus's own")


def validate_labelnames(labelnames: Iterable[str],
                        reserved: Sequence[str] = (),
                        metric: str = "",
                        metric_type: str = "") -> Tuple[str, ...]:
    """The label names of metric @metric of type @metric_type, checked:
    the Prometheus rules, the names its type reserves (RESERVED_FOR), and
    @reserved (those tally uses itself, such as a per-process gauge's
    pid).  The ValueError names the metric and the label."""
    names = tuple(labelnames)
    by_type = RESERVED_FOR.get(metric_type, ())
    for name in names:
        validate_labelname(name, metric)
        if name in by_type:
            raise ValueError(
                f"Reserved label metric name: {name} (metric {metric}: "
                f"a {metric_type} uses {name} itself in the exposition)")
        if name in reserved:
            raise ValueError(
                f"Reserved label metric name: {name} (metric {metric}: "
                f"tally adds {name} itself)")
    if len(set(names)) != len(names):
        raise ValueError("Duplicate label names in " + repr(names))
    return names


def validate_unit(unit: str) -> str:
    if unit and not re.match(r"^[a-zA-Z0-9_]+$", unit):
        raise ValueError("Invalid unit: " + unit)
    return unit
