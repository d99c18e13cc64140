"""Counter, Gauge, Histogram, Summary, Info and Enum with
prometheus_client's API, over tally.

Each class derives from a C base (tally_metrics._native) whose update methods
(inc, dec, set, observe) and labels() lookup run in C: an update is one
of libtally's adds into shared memory, so totals are exact across
threads and processes, with or without a GIL.  What is Python here is
construction, checking label values the first time they are seen, and
the helpers (time(), count_exceptions(), track_inprogress()).
"""
from __future__ import annotations

import hashlib
import threading
import time as _time
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple, Type, Union

from . import _encoding as enc
from . import _native, _process
from ._encoding import MULTIPROCESS_MODES
from ._format import INF, float_to_go_string
from ._names import build_full_name, validate_labelnames, validate_unit
from ._registry import REGISTRY, CollectorRegistry
from ._timing import ExceptionCounter, InprogressTracker, Timer

DEFAULT_BUCKETS: Tuple[float, ...] = (
    .005, .01, .025, .05, .075, .1, .25, .5, .75, 1.0, 2.5, 5.0, 7.5, 10.0,
    INF)

_REGISTRY_DEFAULT: Any = object()


def _native_family(zone: _native.Zone, kind: int, base: str, metric: Any,
                   labelnames: Tuple[str, ...], unit: str, **kw: Any
                   ) -> _native.Family:
    """The _native.Family of @metric whose series are named @base."""
    return _native.Family(zone, kind, base, metric._documentation, unit,
                          labelnames, **kw)


class _MetricMixin:
    """What every metric class shares (the Python half)."""

    _type: str = ""
    _kind: int = 0
    _reserved_labelnames: Sequence[str] = ()

    _name: str
    _documentation: str
    _labelnames: Tuple[str, ...]
    _labelvalues: Tuple[str, ...]
    _unit: str
    _registry: Optional[CollectorRegistry]

    # prometheus_client's signature, which Counter and Summary keep as it
    # is; the others add their own arguments.
    def __init__(self, name: str, documentation: str,
                 labelnames: Iterable[str] = (), namespace: str = "",
                 subsystem: str = "", unit: str = "",
                 registry: Optional[CollectorRegistry] = _REGISTRY_DEFAULT,
                 _labelvalues: Optional[Sequence[str]] = None) -> None:
        self._setup(name, documentation, labelnames, namespace, subsystem,
                    unit, registry)

    def _setup(self, name: str, documentation: str,
               labelnames: Iterable[str], namespace: str, subsystem: str,
               unit: str, registry: Any) -> None:
        self._name = build_full_name(self._type, name, namespace,
                                     subsystem, validate_unit(unit))
        self._labelnames = validate_labelnames(labelnames,
                                               self._reserved_labelnames,
                                               self._name, self._type)
        self._labelvalues = ()
        if not isinstance(documentation, str):
            raise TypeError("documentation must be a str")
        if "\0" in documentation:
            raise ValueError("documentation holds a NUL character")
        self._documentation = documentation
        self._unit = unit
        if registry is _REGISTRY_DEFAULT:
            registry = REGISTRY
        if registry is not None and not isinstance(registry,
                                                   CollectorRegistry):
            raise TypeError(
                "registry must be a tally.CollectorRegistry (or None); "
                "to serve tally's metrics from a prometheus_client "
                "registry, register tally.TallyCollector() in it")
        self._registry = registry
        self._lock = threading.Lock()
        if registry is not None:
            # Refused before anything is written to the zone.
            registry.check_free(self)
        zone = (registry or REGISTRY).zone
        # The definition of the metric in the zone: when an earlier
        # version of the program defined it otherwise (another type,
        # label names, buckets or mode), the series of that definition
        # are superseded, not shown, and the ones made now are new.
        self._claim(zone)
        self._family_obj = self._make_family(zone)
        if self._labelnames:
            self._init_parent(self._family_obj, len(self._labelnames))
        else:
            self._bind_values(())
        if registry is not None:
            registry.register(self)

    def _claim(self, zone: _native.Zone) -> None:
        _native.claim(zone, self._name, self._definition(),
                      enc.every_series(self._name))

    # Overridden per kind.
    def _make_family(self, zone: _native.Zone) -> _native.Family:
        raise NotImplementedError

    def _definition(self) -> str:
        """What makes two definitions of the metric different series
        (the documentation is not: the newest one is shown)."""
        return "tally-python %s labels=%s" % (self._type,
                                             ",".join(self._labelnames))

    def _extra_values(self) -> Tuple[str, ...]:
        return ()

    def _copy_to_child(self, child: Any) -> None:
        pass

    def _bind_values(self, values: Tuple[str, ...]) -> None:
        self._bind(self._family_obj, values + self._extra_values())

    def _labels_slow(self, *labelvalues: Any, **labelkwargs: Any) -> Any:
        """labels() for what the C lookup did not find: checks as
        prometheus_client does, then makes and caches the child."""
        if not self._labelnames:
            raise ValueError(
                "No label names were set when constructing %s" % self)
        if self._labelvalues:
            raise ValueError(
                "%s already has labels set (%s); can not chain calls to "
                ".labels()" % (self, dict(zip(self._labelnames,
                                              self._labelvalues))))
        if labelvalues and labelkwargs:
            raise ValueError("Can't pass both *args and **kwargs")
        if labelkwargs:
            if sorted(labelkwargs) != sorted(self._labelnames):
                raise ValueError("Incorrect label names")
            values = tuple(str(labelkwargs[n]) for n in self._labelnames)
        else:
            if len(labelvalues) != len(self._labelnames):
                raise ValueError("Incorrect label count")
            values = tuple(str(v) for v in labelvalues)
        for v in values:
            if "\0" in v:
                raise ValueError(f"label value {v!r} holds a NUL "
                                 "character")
        key: Any = values[0] if len(values) == 1 else values
        children: Dict[Any, Any] = self._children
        child = children.get(key)
        if child is not None:
            return child
        with self._lock:
            child = children.get(key)
            if child is None:
                child = type(self).__new__(type(self))
                child._name = self._name
                child._documentation = self._documentation
                child._labelnames = self._labelnames
                child._labelvalues = values
                child._unit = self._unit
                child._registry = self._registry
                child._lock = self._lock
                child._family_obj = self._family_obj
                self._copy_to_child(child)
                child._bind_values(values)
                children[key] = child
        return child

    def remove(self, *labelvalues: Any) -> None:
        """Forget a child in this process (its series stays in the zone
        until the process exits: other processes may still add to it)."""
        if not self._labelnames:
            raise ValueError(
                "No label names were set when constructing %s" % self)
        if len(labelvalues) != len(self._labelnames):
            raise ValueError("Incorrect label count (expected %d, got %s)"
                             % (len(self._labelnames), labelvalues))
        values = tuple(str(v) for v in labelvalues)
        key: Any = values[0] if len(values) == 1 else values
        with self._lock:
            self._children.pop(key, None)

    def clear(self) -> None:
        """Forget every child in this process (see remove())."""
        with self._lock:
            self._children.clear()

    def describe(self) -> list:
        return []

    def collect(self) -> list:
        """The metric as a scrape of its zone shows it now (every
        process's values): a list of one tally.MetricFamily (name, type,
        documentation, unit, samples), with a child's samples only for a
        child, as prometheus_client's collect() gives."""
        from ._read import read
        fams = [f for f in read(self._registry).families
                if f.name == self._name]
        if self._labelvalues and fams:
            want = dict(zip(self._labelnames, self._labelvalues))
            f = fams[0]
            f.samples = [s for s in f.samples
                         if all(s.labels.get(k) == v
                                for k, v in want.items())]
        return fams

    def __repr__(self) -> str:
        return f"{type(self).__module__}.{type(self).__name__}({self._name})"

    def __str__(self) -> str:
        return f"{self._type}:{self._name}"


class Counter(_MetricMixin, _native.CounterBase):
    """A count that only goes up: prometheus_client's Counter.

    A fractional counter of the format (2.6): integer increments are
    exact over the whole int64 range, fractions to 1e-9 each.

        c = Counter("requests", "Requests served.", ["method"])
        c.labels("GET").inc()
    """

    _type = "counter"
    _kind = _native.KIND_COUNTER

    def _make_family(self, zone: _native.Zone) -> _native.Family:
        return _native_family(zone, _native.KIND_COUNTER,
                              enc.counter(self._name), self,
                              self._labelnames, self._unit)

    def count_exceptions(self, exception: Union[Type[BaseException],
                                                tuple] = Exception
                         ) -> ExceptionCounter:
        """Count the exceptions of type @exception that leave a block or
        a function (a context manager and a decorator)."""
        if not self._bound:
            raise ValueError("counter metric is missing label values")
        return ExceptionCounter(self, exception)

    def reset(self) -> None:
        raise NotImplementedError(
            "tally counters are shared by every process of the zone and "
            "cannot be reset from one of them")


class Gauge(_MetricMixin, _native.GaugeBase):
    """A value that goes up and down: prometheus_client's Gauge.

    multiprocess_mode=None (the default): one series for every process
    of the zone (inc() and dec() from all of them add up; set() from any
    of them is the value).  With one of prometheus_client's modes
    ("all", "liveall", "sum", "livesum", "max", "livemax", "min",
    "livemin", "mostrecent", "livemostrecent") each process has its own
    series (label pid) and readers combine them as the mode says;
    "mostrecent" is one series, where the last set() wins.  A gauge's
    value is a double, exactly as set.
    """

    _type = "gauge"
    _kind = _native.KIND_GAUGE

    def __init__(self, name: str, documentation: str,
                 labelnames: Iterable[str] = (), namespace: str = "",
                 subsystem: str = "", unit: str = "",
                 registry: Optional[CollectorRegistry] = _REGISTRY_DEFAULT,
                 _labelvalues: Optional[Sequence[str]] = None,
                 multiprocess_mode: Optional[str] = None) -> None:
        if multiprocess_mode is not None and \
                multiprocess_mode not in MULTIPROCESS_MODES:
            raise ValueError("Invalid multiprocess mode: " +
                             str(multiprocess_mode))
        self._multiprocess_mode = multiprocess_mode
        self._per_process = multiprocess_mode not in (None, "mostrecent")
        if self._per_process:
            self._reserved_labelnames = (enc.PID_LABEL,)
        self._setup(name, documentation, labelnames, namespace, subsystem,
                    unit, registry)

    def _claim(self, zone: _native.Zone) -> None:
        # The gauge's own record (a per-process gauge of the format with
        # its combine mode, or a shared float gauge, under the metric's
        # name) is its definition: an earlier version's of another type,
        # mode, help or unit is superseded with the series of every name
        # it may have used but this one.
        if self._per_process:
            _native.claim(zone, self._name, self._documentation,
                          enc.every_series(self._name), unit=self._unit,
                          kind=_native.TALLY_PGAUGE,
                          combine=enc.COMBINE[self._multiprocess_mode])
        else:
            _native.claim(zone, self._name, self._documentation,
                          enc.every_series(self._name), unit=self._unit,
                          kind=_native.TALLY_FGAUGE)

    def _make_family(self, zone: _native.Zone) -> _native.Family:
        # A per-process gauge is one of the format (2.6): libtally adds
        # each process's pid label, and every reader combines the
        # processes as the mode says, judging which run by a lock, from
        # any PID namespace.  A shared gauge is a float gauge.  Either
        # is shown under the metric's own name.
        combine = enc.COMBINE[self._multiprocess_mode] \
            if self._per_process else -1
        return _native_family(
            zone, _native.KIND_GAUGE, self._name, self,
            self._labelnames, self._unit, combine=combine)

    def _bind_values(self, values: Tuple[str, ...]) -> None:
        super()._bind_values(values)
        if self._per_process:
            _process.track(self)

    def _rebind_process(self) -> None:
        # After fork: this process's own series.
        self._bind_values(self._labelvalues)

    def _copy_to_child(self, child: Any) -> None:
        child._multiprocess_mode = self._multiprocess_mode
        child._per_process = self._per_process

    def set_to_current_time(self) -> None:
        """Set the gauge to the current Unix time, in seconds."""
        self.set(_time.time())

    def track_inprogress(self) -> InprogressTracker:
        """inc() on entering a block or function, dec() on leaving it."""
        if not self._bound:
            raise ValueError("gauge metric is missing label values")
        return InprogressTracker(self)

    def time(self) -> Timer:
        """Set the gauge to the duration of a block or function, in
        seconds."""
        if not self._bound:
            raise ValueError("gauge metric is missing label values")
        return Timer(self, "set")

    def set_function(self, f: Any) -> None:
        raise NotImplementedError(
            "set_function() needs the value at scrape time in the process "
            "that scrapes; tally readers read shared memory: set() the "
            "value instead")


class Histogram(_MetricMixin, _native.HistogramBase):
    """Observations counted in buckets: prometheus_client's Histogram.

    A classic histogram of the format (2.6) under the metric's name,
    with the buckets given (DEFAULT_BUCKETS otherwise) in its record:
    observe() adds one to the bucket and the value to the sum (exact to
    1e-9), and every reader, tally-exporter included, shows the buckets
    cumulative, with +Inf equal to _count.
    """

    _type = "histogram"
    _kind = _native.KIND_HISTOGRAM

    def __init__(self, name: str, documentation: str,
                 labelnames: Iterable[str] = (), namespace: str = "",
                 subsystem: str = "", unit: str = "",
                 registry: Optional[CollectorRegistry] = _REGISTRY_DEFAULT,
                 _labelvalues: Optional[Sequence[str]] = None,
                 buckets: Sequence[Union[float, str]] = DEFAULT_BUCKETS
                 ) -> None:
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError("Buckets not in sorted order")
        if bounds and bounds[-1] != INF:
            bounds.append(INF)
        if len(bounds) < 2:
            raise ValueError("Must have at least two buckets")
        if len(set(bounds)) != len(bounds):
            raise ValueError("Buckets not in sorted order")
        self._upper_bounds = bounds
        self._setup(name, documentation, labelnames, namespace, subsystem,
                    unit, registry)

    def _claim(self, zone: _native.Zone) -> None:
        # The histogram's own record (a classic histogram of the format,
        # under its name) is its definition: an earlier version's of
        # another type, buckets, help or unit is superseded with the
        # series of every name it may have used but this one.
        _native.claim(zone, self._name, self._documentation,
                      enc.every_series(self._name),
                      bounds=tuple(self._upper_bounds), unit=self._unit)

    def _make_family(self, zone: _native.Zone) -> _native.Family:
        # A classic histogram of the format (2.6): every reader shows
        # its buckets, _count and _sum under its own name.
        return _native.Family(
            zone, _native.KIND_HISTOGRAM, self._name, self._documentation,
            self._unit, self._labelnames, buckets=tuple(self._upper_bounds))

    def _definition(self) -> str:
        bounds = ",".join(float_to_go_string(b) for b in self._upper_bounds)
        if len(bounds) > 600:  # the definition must fit in a help text
            bounds = "sha256:" + hashlib.sha256(bounds.encode()).hexdigest()
        return "%s buckets=%s" % (super()._definition(), bounds)

    def _copy_to_child(self, child: Any) -> None:
        child._upper_bounds = self._upper_bounds

    def time(self) -> Timer:
        """Observe the duration of a block or function, in seconds."""
        if not self._bound:
            raise ValueError("histogram metric is missing label values")
        return Timer(self, "observe")


class Summary(_MetricMixin, _native.HistogramBase):
    """The count and the sum of observations: prometheus_client's
    Summary, as its multiprocess mode keeps it (no quantiles).

    A summary of the format (2.7) under the metric's name: the count
    is an exact integer and the sum exact to 1e-9, added by every
    process, and every reader, tally-exporter included, shows _count
    and _sum.
    """

    _type = "summary"
    _kind = _native.KIND_HISTOGRAM

    def _claim(self, zone: _native.Zone) -> None:
        # The summary's own record is its definition, as a Histogram's.
        _native.claim(zone, self._name, self._documentation,
                      enc.every_series(self._name), unit=self._unit,
                      summary=True)

    def _make_family(self, zone: _native.Zone) -> _native.Family:
        return _native.Family(
            zone, _native.KIND_HISTOGRAM, self._name, self._documentation,
            self._unit, self._labelnames, buckets=(INF,), summary=True)

    def time(self) -> Timer:
        """Observe the duration of a block or function, in seconds."""
        if not self._bound:
            raise ValueError("summary metric is missing label values")
        return Timer(self, "observe")


class _PyMetric(_MetricMixin):
    """A metric whose updates are made in Python over gauges of its own
    (Info, Enum): labels() is _labels_slow()."""

    def _init_parent(self, family: Any, nuser: int) -> None:
        self._children = {}

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> Any:
        return self._labels_slow(*labelvalues, **labelkwargs)

    def _claim_typed(self, zone: _native.Zone, kind: int) -> None:
        """Claim the metric's own record, of @kind TALLY_INFO or
        TALLY_ENUM (format 2.8), as a Gauge's.  A zone of 2.6 or 2.7
        takes it (its readers skip its series); one older than 2.6, made
        by tally 0.3, cannot hold it: TallyError (EPROTONOSUPPORT), its
        message saying what to do."""
        _native.claim(zone, self._name, self._documentation,
                      enc.every_series(self._name), kind=kind)


class Info(_PyMetric):
    """Key-value pairs: prometheus_client's Info, shared by the zone.

    info(dict) shows <name>_info{pairs} 1 in the exposition; the last
    info() of any process of the zone is the value.  Every info() of a
    metric object must give the same keys (the first one defines them),
    since a tally series has fixed label names; a process that gives
    other keys (a new version) supersedes the pairs of the old ones.
    An info metric of the format (2.8) under the metric's name: every
    reader, tally-exporter included, shows it as <name>_info.
    """

    _type = "info"
    _kind = _native.KIND_GAUGE

    def __init__(self, name: str, documentation: str,
                 labelnames: Iterable[str] = (), namespace: str = "",
                 subsystem: str = "", unit: str = "",
                 registry: Optional[CollectorRegistry] = _REGISTRY_DEFAULT,
                 _labelvalues: Optional[Sequence[str]] = None) -> None:
        if unit:
            raise ValueError("Metric name is of a type that cannot have a "
                             "unit: " + name)
        self._keys: Optional[Tuple[str, ...]] = None
        self._infos: Dict[Any, Any] = {}
        self._current: Any = None
        self._setup(name, documentation, labelnames, namespace, subsystem,
                    unit, registry)

    def _claim(self, zone: _native.Zone) -> None:
        # The info's own record (format 2.8), under its name, is its
        # definition, as a Gauge's; its keys are defined at info().
        self._claim_typed(zone, _native.TALLY_INFO)

    def _make_family(self, zone: _native.Zone) -> _native.Family:
        self._zone_obj = zone
        return None  # type: ignore[return-value]  (made at info())

    def _bind_values(self, values: Tuple[str, ...]) -> None:
        # Nothing to bind before info() gives the keys; mark the object
        # observable (a metric without labels, or a child).
        self._info_values = values

    def _copy_to_child(self, child: Any) -> None:
        child._keys = None
        child._infos = {}
        child._current = None
        child._zone_obj = self._zone_obj
        child._parent = self

    def info(self, val: Dict[str, str]) -> None:
        """Set the pairs (replacing the previous ones)."""
        if self._labelnames and not self._labelvalues:
            raise ValueError("info metric is missing label values")
        if set(self._labelnames).intersection(val.keys()):
            raise ValueError(
                "Overlapping labels for Info metric, metric: %s child: %s"
                % (self._labelnames, val))
        if any(v is None for v in val.values()):
            raise ValueError("Label value cannot be None")
        keys = tuple(sorted(val))
        validate_labelnames(keys)
        owner = getattr(self, "_parent", self)
        with owner._lock:
            if owner._keys is None:
                # Other keys than an earlier version's: its pairs are
                # superseded (its record retired), these start afresh
                # in a new record of the name.
                _native.claim(self._zone_obj, enc.info_keys(self._name),
                              "tally-python info labels=%s keys=%s" % (
                                  ",".join(self._labelnames),
                                  ",".join(keys)),
                              (self._name,))
                owner._keys = keys
                owner._info_family = _native_family(
                    self._zone_obj, _native.KIND_GAUGE, self._name, self,
                    self._labelnames + keys, "", typed=_native.TALLY_INFO)
            if keys != owner._keys:
                raise ValueError(
                    "Info %s takes the keys %s in its zone, not %s"
                    % (self._name, list(owner._keys), list(keys)))
            values = tuple(self._labelvalues) + tuple(
                str(val[k]) for k in keys)
            g = self._infos.get(values)
            if g is None:
                g = _native.GaugeBase()
                g._bind(owner._info_family, values)
                self._infos[values] = g
            # The new pairs first, then the old ones off: a scrape in
            # between shows both rather than none.
            g.set(1.0)
            if self._current is not None and self._current is not g:
                self._current.set(0.0)
            self._current = g


class Enum(_PyMetric):
    """Which of a set of states is true: prometheus_client's Enum,
    shared by the zone (the last state() of any process wins; before
    any, the first state).  An enum metric of the format (2.8) under
    the metric's name, one series per state: every reader shows it,
    an OpenMetrics stateset, with exactly one state current."""

    _type = "stateset"
    _kind = _native.KIND_GAUGE

    def __init__(self, name: str, documentation: str,
                 labelnames: Sequence[str] = (), namespace: str = "",
                 subsystem: str = "", unit: str = "",
                 registry: Optional[CollectorRegistry] = _REGISTRY_DEFAULT,
                 _labelvalues: Optional[Sequence[str]] = None,
                 states: Optional[Sequence[str]] = None) -> None:
        if name in labelnames:
            raise ValueError(f"Overlapping labels for Enum metric: {name}")
        if not states:
            raise ValueError(f"No states provided for Enum metric: {name}")
        if unit:
            raise ValueError("Metric name is of a type that cannot have a "
                             "unit: " + name)
        self._states = [str(s) for s in states]
        self._setup(name, documentation, labelnames, namespace, subsystem,
                    unit, registry)

    def _claim(self, zone: _native.Zone) -> None:
        # Other states than an earlier version's retire its record (whose
        # series are those states), then the enum's own record (format
        # 2.8), under its name, is its definition, as a Gauge's.
        self._claim_typed(zone, _native.TALLY_ENUM)
        _native.claim(zone, enc.enum_states(self._name),
                      "tally-python enum labels=%s states=%s" % (
                          ",".join(self._labelnames),
                          ",".join(self._states)),
                      (self._name,))
        # Again: when the states retired the record just claimed, this
        # one makes the new generation the states' series go to.
        self._claim_typed(zone, _native.TALLY_ENUM)

    def _make_family(self, zone: _native.Zone) -> _native.Family:
        return _native_family(zone, _native.KIND_GAUGE, self._name, self,
                              self._labelnames + (self._name,), "",
                              typed=_native.TALLY_ENUM)

    def _copy_to_child(self, child: Any) -> None:
        child._states = self._states

    def _bind_values(self, values: Tuple[str, ...]) -> None:
        # One series per state, registered in the order of the states
        # (the reader shows them in that order).
        gauges = []
        for s in self._states:
            g = _native.GaugeBase()
            g._bind(self._family_obj, values + (s,))
            gauges.append(g)
        self._state_gauges = tuple(gauges)
        # prometheus_client's Enum starts in its first state: libtally
        # sets it unless a process of the zone set a state already.
        _native.enum_set(self._state_gauges, -1)
        self._enum_bound = True

    def _rebind_process(self) -> None:
        pass

    def state(self, state: str) -> None:
        """Make @state the one that is true."""
        if not getattr(self, "_enum_bound", False):
            raise ValueError("stateset metric is missing label values")
        # Each state's value is a stamp, and readers show the state of
        # the largest one: libtally writes one larger than all, under
        # the zone's lock, so that a reader never finds no state or two
        # (docs/FORMAT.md, "Info and enum metrics").
        _native.enum_set(self._state_gauges, self._states.index(state))
