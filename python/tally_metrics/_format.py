"""Numbers and text as Prometheus's formats write them (the same strings
prometheus_client writes, so that scrapes do not change on migration)."""
from __future__ import annotations

import math

INF = float("inf")
MINUS_INF = float("-inf")


def float_to_go_string(d: float) -> str:
    """A float as Go's strconv writes it (Prometheus's own parser)."""
    d = float(d)
    if d == INF:
        return "+Inf"
    if d == MINUS_INF:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    # Go switches to exponents sooner than Python; only positive values
    # matter for le and quantile.
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def escape_help_om(text: str) -> str:
    return escape_help(text).replace('"', r"\"")


def escape_label_value(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
