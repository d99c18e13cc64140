"""Base units: integer series in nanoseconds (microseconds, milliseconds,
kibibytes...) are shown in seconds (bytes) by the Python exposition, as
tally-exporter shows them: the same exact decimals, from libtally's
tally_unit_format() and tally_unit_name()."""
from __future__ import annotations

import pytest

import tally_metrics as tally
from tally_metrics import _native


@pytest.mark.parametrize("v, unit, text", [
    (1, "nanoseconds", "0.000000001"),
    (999_999_999, "nanoseconds", "0.999999999"),
    (2 ** 40, "nanoseconds", "1099.511627776"),
    (-1500, "microseconds", "-0.0015"),
    (250, "milliseconds", "0.25"),
    (3, "kibibytes", "3072"),
    (2 ** 63 - 1, "mebibytes", str((2 ** 63 - 1) * 2 ** 20)),
])
def test_exact_decimals(v, unit, text):
    assert _native.unit_value(v, unit) == text
    # The decimal is the exact quotient, not a float's neighbour.
    from decimal import Decimal
    scale = {"nanoseconds": Decimal("1e-9"), "microseconds": Decimal("1e-6"),
             "milliseconds": Decimal("1e-3"), "kibibytes": 1024,
             "mebibytes": 2 ** 20}[unit]
    assert Decimal(text) == Decimal(v) * scale


def test_other_units_are_left_alone():
    assert _native.unit_value(5, "ns") is None
    assert _native.unit_value(5, "seconds") is None
    assert _native.unit_value(5, None) is None
    assert _native.unit_name("x_ns", "ns") == ("x_ns", "ns")
    assert _native.unit_name("request_duration_ns", "nanoseconds") == \
        ("request_duration_seconds", "seconds")
    assert _native.unit_name("busy_ns_total", "nanoseconds") == \
        ("busy_seconds_total", "seconds")


def test_exposition_in_seconds(uniq):
    reg = tally.CollectorRegistry()
    c = tally.Counter(uniq + "_busy", "Busy time.", unit="nanoseconds",
                      registry=reg)
    c.inc(999_999_999)
    c.inc(2)
    text = tally.generate_latest(reg).decode()
    assert f"# TYPE {uniq}_busy_seconds_total counter\n" in text
    assert f"\n{uniq}_busy_seconds_total 1.000000001\n" in text
    om = tally.generate_latest(reg, openmetrics=True).decode()
    assert f"# UNIT {uniq}_busy_seconds seconds\n" in om
