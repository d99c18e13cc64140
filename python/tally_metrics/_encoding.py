"""The names of a Python metric's metric records: the one owner of them.

_metrics.py asks this module for the name of each metric's record, and
tally_metrics._native (family.c) registers the names it is given.  Every
kind is a type of the format, described by its record, so a reader
needs no name to tell what a series is (it reads the record's kind,
mode, bounds, info or stateset through the reader API):

  Counter    <n>_total   FCOUNTER   a fractional counter (format 2.6)
  Gauge      <n>         FGAUGE     shared by every process
                         PGAUGE     with a multiprocess mode: a
                                    per-process gauge (2.6) whose record
                                    holds the mode; libtally adds the
                                    label pid
  Histogram  <n>         CHISTOGRAM a classic histogram (2.6), its
                                    bounds in its record
  Summary    <n>         SUMMARY    a summary (2.7)
  Info       <n>         INFO       an info metric (2.8)
  Enum       <n>         ENUM       an enum metric (2.8), one series per
                                    state (label <n>)

A "_total" ends the name of a counter (prometheus_client's name without
it; every reader shows the counter as it is).  <n>:info_keys is a metric
definition without series (the keys of an Info), and <n>:enum_states
one of an Enum's states: records no reader shows.

Zones older than format 2.6 cannot hold these types: libtally refuses
to write them there, and its reader API refuses such a zone holding the
names tally 0.3's Python package gave its series (docs/VERSIONING.md).
"""
from __future__ import annotations

from typing import Tuple

TOTAL = "_total"
INFO_KEYS = ":info_keys"
ENUM_STATES = ":enum_states"

# The label a per-process gauge's series get (libtally adds it).
PID_LABEL = "pid"

# prometheus_client's multiprocess modes of a gauge.
MULTIPROCESS_MODES = frozenset((
    "all", "liveall", "min", "livemin", "max", "livemax", "sum", "livesum",
    "mostrecent", "livemostrecent"))

# The combine mode of the format (tally/metrics.h, TALLY_COMBINE_*) of
# each per-process mode: what libtally's readers apply (format 2.6).
COMBINE = {"all": 0, "liveall": 1, "sum": 2, "livesum": 3, "max": 4,
           "livemax": 5, "min": 6, "livemin": 7, "livemostrecent": 9}


def counter(name: str) -> str:
    return name + TOTAL


def info_keys(name: str) -> str:
    return name + INFO_KEYS


def enum_states(name: str) -> str:
    """The definition of an Enum's states: a metric definition without
    series, as <n>:info_keys is of an Info's keys."""
    return name + ENUM_STATES


def every_series(name: str) -> Tuple[str, ...]:
    """The series names a metric @name may use besides its own record
    (@name, whose kind, mode, bounds, help and unit are a definition of
    libtally, which keeps its generations): superseded together when
    its definition changes."""
    return (counter(name),)


# The most a record's name adds to a metric's name: tally's names hold
# NAME_MAX bytes.
LONGEST_SUFFIX = max(len(s) for s in (TOTAL, INFO_KEYS, ENUM_STATES))
