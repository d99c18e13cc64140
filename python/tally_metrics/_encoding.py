"""The series-name encoding: how a Python metric is written as tally
series, and how a reader tells them apart again.

This module is the one owner of the names.  _metrics.py asks it for the
names of a metric's series, tally_metrics._native (family.c) registers the names
it is given, and _read.py decodes the names of a zone's series with it.

A tally series has a name, a kind, labels and one value.  A Python metric
@n is held in the series below; each suffix is the metric's kind, so a
reader can rebuild the metric from the names alone:

  Counter    <n>_total                FCOUNTER  a fractional counter of the
                                                format (2.6): every reader
                                                shows its exact value
                                                (0.3 wrote the fractions
                                                in millionths, as
                                                <n>_total:frac_u)
  Gauge      <n>                      FGAUGE    shared by every process
                                      PGAUGE    with a multiprocess mode:
                                                a per-process gauge of
                                                the format (2.6) whose
                                                record holds the mode;
                                                libtally adds the label
                                                pid, and every reader
                                                combines the processes
                                                as the mode says (earlier
                                                versions wrote
                                                <n>:gauge and
                                                <n>:gauge_<mode>; still
                                                decoded here)
  Histogram  <n>                      CHISTOGRAM a classic histogram of the
                                                format (2.6), its buckets
                                                in its record: every
                                                reader shows its buckets,
                                                _count and _sum (0.3
                                                wrote <n>:bucket{le} per
                                                bound, <n>_sum and
                                                <n>_sum:frac_u; still
                                                decoded here)
  Summary    <n>                      CHISTOGRAM a summary of the format
                                                (2.7): a classic
                                                histogram of no bounds
                                                flagged as a summary;
                                                every reader shows its
                                                _count and _sum (earlier
                                                versions wrote
                                                <n>:summary:bucket,
                                                <n>:summary_sum and
                                                <n>:summary_sum:frac_u;
                                                still decoded here)
  Info       <n>                      INFO      an info metric of the
                                                format (2.8): 1 for the
                                                current pairs (labels),
                                                0 for old ones, which
                                                no reader shows (earlier
                                                versions, and zones older
                                                than 2.8, <n>:info; still
                                                decoded here)
  Enum       <n>                      ENUM      an enum metric of the
                                                format (2.8): one per
                                                state (label <n>), 1 for
                                                the current one (earlier
                                                versions, and zones older
                                                than 2.8, <n>:enum; still
                                                decoded here)

A "_total" ends the name of a counter (prometheus_client's name without
it; tally-exporter and tallystat show the counter as it is), and "_sum"
a histogram's sum (a series named <b>_sum is a sum only when <b>:bucket
exists).  <n>:info_keys is a metric definition without series (the keys
of an Info), and <n>:enum_states one of an Enum's states.  The suffixes
starting with ':' are the encoding's own: a series that C code
registers with one of them is read as the encoding says, and a
Histogram's name may not end with ":summary" (its series would read as
a Summary's).

Series that match nothing above are shown as tally-exporter shows them
(PLAIN): counters, gauges and tally's own histograms registered from C.

Zones written by tally 0.3 held a per-process gauge as FGAUGE series
<n>:gauge_<mode> with a label pid="<pid>:<start>" (and <n>:gauge_<mode>
:set_ns, the time of each process's last set); _read.py still combines
those by the pid's /proc entry, and the C tools (tally-exporter,
tallystat) leave out the dead ones (programs/common/snapshot.c,
series_dead()).  Change the two together.
"""
from __future__ import annotations

from typing import Collection, Iterable, NamedTuple, Optional, Set, Tuple

from . import _native

TOTAL = "_total"
FRAC = ":frac_u"
GAUGE = ":gauge"
SETNS = ":set_ns"
BUCKET = ":bucket"
SUM = "_sum"
SUMMARY = ":summary"
INFO = ":info"
INFO_KEYS = ":info_keys"
ENUM = ":enum"
ENUM_STATES = ":enum_states"

# The label a per-process gauge adds (its value "<pid>:<start>",
# _process.py), and the one of a histogram's buckets (family.c adds it).
PID_LABEL = "pid"
LE_LABEL = "le"

# prometheus_client's multiprocess modes of a gauge.
MULTIPROCESS_MODES = frozenset((
    "all", "liveall", "min", "livemin", "max", "livemax", "sum", "livesum",
    "mostrecent", "livemostrecent"))

# The combine mode of the format (tally/metrics.h, TALLY_COMBINE_*) of
# each per-process mode: what libtally's readers apply (format 2.6).
COMBINE = {"all": 0, "liveall": 1, "sum": 2, "livesum": 3, "max": 4,
           "livemax": 5, "min": 6, "livemin": 7, "livemostrecent": 9}


# --- Writing ---------------------------------------------------------

def counter(name: str) -> str:
    return name + TOTAL


def gauge(name: str) -> str:
    """A gauge's series, shared or per-process: the metric's own name
    (its record says which, and the mode)."""
    return name


def _per_process_gauge(name: str, mode: str) -> str:
    return f"{name}{GAUGE}_{mode}"


def summary(name: str) -> str:
    return name + SUMMARY


def info(name: str) -> str:
    return name + INFO


def info_keys(name: str) -> str:
    return name + INFO_KEYS


def enum(name: str) -> str:
    return name + ENUM


def enum_states(name: str) -> str:
    """The definition of an Enum's states: a metric definition without
    series, as <n>:info_keys is of an Info's keys."""
    return name + ENUM_STATES


class Parts(NamedTuple):
    """The series names of a _native.Family: @name (for messages), the
    main part, and the companions ("" where the kind has none)."""
    name: str
    main: str
    frac: str
    setns: str
    bucket: str


def parts(kind: int, base: str) -> Parts:
    """The names of the parts of a _native.Family of @kind (KIND_*) whose
    series are named @base (counter(), gauge(), summary() or a
    histogram's own name)."""
    if kind == _native.KIND_COUNTER:
        return Parts(base, base, base + FRAC, "", "")
    if kind == _native.KIND_GAUGE:
        return Parts(base, base, "", base + SETNS, "")
    return Parts(base, base + SUM, base + SUM + FRAC, "", base + BUCKET)


def classic_parts(name: str) -> Parts:
    """The one part of a Histogram: a classic histogram of the format
    (2.6) under the metric's own name."""
    return Parts(name, name, "", "", "")


def every_series(name: str) -> Tuple[str, ...]:
    """Every series name a metric @name may use, whatever its type and
    mode: superseded together when its definition changes."""
    sfx = FRAC
    names = [counter(name), counter(name) + sfx, name + GAUGE,
             name + GAUGE + SETNS,
             name + BUCKET, name + SUM, name + SUM + sfx,
             summary(name) + BUCKET, summary(name) + SUM,
             summary(name) + SUM + sfx,
             info(name), enum(name)]
    for mode in sorted(MULTIPROCESS_MODES):
        names.append(_per_process_gauge(name, mode))
        names.append(_per_process_gauge(name, mode) + SETNS)
    return tuple(names)


# The most the encoding adds to a metric's name (a livemostrecent gauge's
# time of last set): tally's names hold NAME_MAX bytes.
LONGEST_SUFFIX = max(len(s) for s in every_series(""))


def check_name(metric_type: str, name: str) -> None:
    """ValueError when the series of a @metric_type named @name would be
    read as another metric's."""
    if metric_type == "histogram" and name.endswith(SUMMARY):
        raise ValueError(
            f"Invalid metric name: {name} (a histogram's name cannot end "
            f"with {SUMMARY!r}: tally holds a summary's series under it)")
    if metric_type == "gauge" and \
            decode(name, _native.TALLY_FGAUGE, ()).role != MAIN_PLAIN:
        # A gauge's series is its own name, which readers of zones of
        # the earlier encoding would take for another metric's part.
        raise ValueError(
            f"Invalid metric name: {name} (a gauge's name cannot end with "
            f"one of tally's suffixes :gauge, :gauge_<mode>, :info, "
            f":enum, :set_ns, :frac_u, :bucket)")


# --- Reading ---------------------------------------------------------

# What a series is to the reader (Series.role).
MAIN_PLAIN = "plain"     # shown as it is (counters, C series)
FRACTION = "frac"        # the fraction of the series Series.base
SET_TIME = "setns"       # a per-process gauge's time of last set
HIST_BUCKET = "bucket"   # a histogram's or a summary's bucket
HIST_SUM = "sum"         # its sum's integer part
INFO_PAIRS = "info"
ENUM_STATE = "enum"
GAUGE_VALUE = "gauge"    # a Python gauge: shared (mode None) or not


class Series(NamedTuple):
    """A series name decoded: its role; @base, the name its companions
    (fraction, time of set) add their suffix to, or a histogram's or a
    summary's series name without ":bucket" or "_sum"; @metric, the
    Prometheus name of the metric it shows; @type, the metric's type
    ("" for PLAIN series); @mode, a per-process gauge's mode."""
    role: str
    base: str
    metric: str
    type: str = ""
    mode: Optional[str] = None


def is_set_time(name: str) -> bool:
    """Whether series @name is a time of last set (combined with max over
    the segments, not summed)."""
    return name.endswith(SETNS)


def histogram_bases(names: Iterable[str]) -> Set[str]:
    """The histograms (and summaries) that series @names hold: the names
    with a ":bucket" series."""
    return {n[:-len(BUCKET)] for n in names if n.endswith(BUCKET)}


def _gauge_mode(name: str) -> Optional[Tuple[str, Optional[str]]]:
    """(metric, mode) of a gauge's series name <metric>:gauge or
    <metric>:gauge_<mode>, mode any lowercase word; None otherwise."""
    if name.endswith(GAUGE):
        return name[:-len(GAUGE)], None
    i = name.rfind(GAUGE + "_")
    if i < 0:
        return None
    mode = name[i + len(GAUGE) + 1:]
    if not mode or not all("a" <= c <= "z" for c in mode):
        return None
    return name[:i], mode


def _histogram(role: str, base: str) -> Series:
    if base.endswith(SUMMARY):
        return Series(role, base, base[:-len(SUMMARY)], "summary")
    return Series(role, base, base, "histogram")


def decode(name: str, kind: int, histograms: Collection[str]) -> Series:
    """What series @name of tally kind @kind is; @histograms: the
    histogram_bases() of the zone's series."""
    if kind == _native.TALLY_INFO:
        return Series(INFO_PAIRS, name, name, "info")
    if kind == _native.TALLY_ENUM:
        return Series(ENUM_STATE, name, name, "stateset")
    if name.endswith(SETNS):
        return Series(SET_TIME, name[:-len(SETNS)], name[:-len(SETNS)])
    if name.endswith(FRAC):
        return Series(FRACTION, name[:-len(FRAC)], name[:-len(FRAC)])
    if name.endswith(BUCKET):
        return _histogram(HIST_BUCKET, name[:-len(BUCKET)])
    if name.endswith(SUM) and name[:-len(SUM)] in histograms:
        return _histogram(HIST_SUM, name[:-len(SUM)])
    if kind in (_native.TALLY_FGAUGE, _native.TALLY_PGAUGE):
        if name.endswith(INFO):
            return Series(INFO_PAIRS, name, name[:-len(INFO)], "info")
        if name.endswith(ENUM):
            return Series(ENUM_STATE, name, name[:-len(ENUM)], "stateset")
        g = _gauge_mode(name)
        if g is not None:
            return Series(GAUGE_VALUE, name, g[0], "gauge", g[1])
    return Series(MAIN_PLAIN, name, name)
