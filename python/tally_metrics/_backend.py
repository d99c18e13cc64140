"""tally as the value store of an unchanged prometheus_client application.

prometheus_client creates every value of its Counter, Gauge, Histogram
and Summary through prometheus_client.values.ValueClass (its multiprocess
mode is a ValueClass that writes a file per process).  use() puts
TallyValue there instead: each value is one of tally's own series, in
the process's default zone ($TALLY_ZONE), so every worker of a pre-fork
server adds into the same series without a lock, and a dead or recycled
worker's counts stay.  It also makes prometheus_client's
MultiProcessCollector read that zone, so that the /metrics view of an
application (or of its framework instrumentator) written for the
multiprocess mode shows the zone's totals unchanged.
prometheus_client's own generate_latest() keeps writing them (in its
spelling, "1.0"); tally.generate_latest() of the same registry writes
the zone with tally-exporter's writer, in C
(_exposition.of_prometheus_client()).

A value maps onto the tally metric of the same definition (a registry
of this module holds one per metric name and kind):

  counter        the tally Counter's child: inc() adds, get() is the
                 zone's total
  gauge          the tally Gauge's child, with the same
                 multiprocess_mode (prometheus_client's default, "all",
                 is a series per process, labelled pid, as there); in a
                 scrape, get() of a mode that combines the processes
                 (sum, max, min and their live forms) is the zone's
                 combined value
  histogram      the tally Histogram's child: the _sum value's inc() is
                 the observation (tally counts the bucket in the same
                 call); the buckets' inc() does nothing
  summary        the tally Summary's child, the same way (_sum observes,
                 _count does nothing)

prometheus_client's Info and Enum hold their values in the process (they
are not supported by its multiprocess mode either).

A worker's own registry shows every child of the zone: before a parent
metric is collected, the children other processes made are made here too
(the zone is read once per scrape), and each value's get() is the zone's;
the default registry also shows the zone's metrics that this process has
not defined (yet).
"""
from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple

from . import _collector, _metrics, _native, _promclient
from ._format import INF
from ._registry import CollectorRegistry

# Environment variable: install the back end when the application imports
# prometheus_client (the tally-prometheus-client.pth file of the package
# reads it and installs the finder of _tally_metrics_switch).
ENV = "TALLY_PROMETHEUS_CLIENT"

_lock = threading.RLock()
_installed = False
# Whether the warning about exemplars was given (once per process).
_exemplar_warned = False
# The tally metrics behind prometheus_client's, by (kind, name, mode).
_parents: Dict[Tuple[str, str, str], Any] = {}
# Histogram and summary children: (name, label values) -> bucket bounds
# met so far, and the tally child once made.
_groups: Dict[Tuple[str, Tuple[str, ...]], "_Group"] = {}


class _Group:
    """The values prometheus_client makes for one histogram (or summary)
    child: its sum, count and buckets.  The tally child is made at the
    first update, once all of them exist (prometheus_client makes them
    together, in _metric_init())."""

    __slots__ = ("bounds", "child", "labelnames", "help")

    def __init__(self, labelnames: Tuple[str, ...], help_text: str) -> None:
        self.bounds: list = []
        self.child: Any = None
        self.labelnames = labelnames
        self.help = help_text


def _registry() -> CollectorRegistry:
    # A registry of its own: prometheus_client already refuses duplicate
    # names in the application's registries; this one only keeps the
    # tally metrics out of tally.REGISTRY's names.
    global _zone_registry
    with _lock:
        if _zone_registry is None:
            _zone_registry = CollectorRegistry(
                zone_name=_zone_name, shared=_zone_name is not None)
        return _zone_registry


_zone_registry: Optional[CollectorRegistry] = None
_zone_name: Optional[str] = None


def _parent(kind: str, name: str, help_text: str,
            labelnames: Sequence[str], mode: str = "",
            buckets: Sequence[float] = ()) -> Any:
    key = (kind, name, mode)
    p = _parents.get(key)
    if p is not None:
        return p
    with _lock:
        p = _parents.get(key)
        if p is None:
            reg = _registry()
            if kind == "counter":
                p = _metrics.Counter(name, help_text, labelnames,
                                     registry=reg)
            elif kind == "gauge":
                p = _metrics.Gauge(name, help_text, labelnames,
                                   registry=reg,
                                   multiprocess_mode=mode or None)
            elif kind == "histogram":
                p = _metrics.Histogram(name, help_text, labelnames,
                                       registry=reg, buckets=buckets)
            else:
                p = _metrics.Summary(name, help_text, labelnames,
                                     registry=reg)
            _parents[key] = p
        return p


def _child(parent: Any, labelvalues: Sequence[str]) -> Any:
    return parent.labels(*labelvalues) if labelvalues else parent


class TallyValue:
    """A value of prometheus_client (values.ValueClass's signature) held
    in a tally series of the default zone."""

    _multiprocess = False

    def __init__(self, typ: str, metric_name: str, name: str,
                 labelnames: Sequence[str], labelvalues: Sequence[str],
                 help_text: str = "", multiprocess_mode: str = "",
                 **kwargs: Any) -> None:
        self._typ = typ
        self._role = "value"
        self._target: Any = None
        # A per-process gauge whose mode combines the processes: the
        # sample a scrape shows for it (see get()).
        self._combined: Optional[Tuple[str, Tuple[Tuple[str, str], ...]]] \
            = None
        self._group: Optional[_Group] = None
        labelnames = tuple(labelnames)
        labelvalues = tuple(labelvalues)
        if typ == "counter":
            self._target = _child(
                _parent("counter", metric_name, help_text, labelnames),
                labelvalues)
        elif typ == "gauge":
            self._target = _child(
                _parent("gauge", metric_name, help_text, labelnames,
                        multiprocess_mode or "all"), labelvalues)
            if (multiprocess_mode or "all") not in ("all", "liveall",
                                                   "mostrecent"):
                self._combined = (metric_name, tuple(sorted(
                    zip(labelnames, labelvalues))))
        elif typ in ("histogram", "summary"):
            # A bucket's label values end with its bound, taken out here.
            self._role, labelnames, labelvalues, bound = \
                _promclient.value_role(typ, metric_name, name, labelnames,
                                       labelvalues)
            key = (metric_name, labelvalues)
            with _lock:
                g = _groups.get(key)
                if g is None:
                    g = _groups[key] = _Group(labelnames, help_text)
                if self._role == "bucket":
                    # A child made again (after remove() or clear(), or
                    # in another registry) has the same bounds: each
                    # keeps the index it had.
                    if bound in g.bounds:
                        self._index = g.bounds.index(bound)
                    else:
                        self._index = len(g.bounds)
                        g.bounds.append(bound)
            self._group = g
            self._metric_name = metric_name
            self._labelvalues = key[1]
        else:
            raise ValueError(f"tally holds no {typ!r} values")
        # prometheus_client calls inc() at every update: the call that
        # does the work is put on the instance, one Python frame less.
        if self._role == "value":
            self.inc = self._target.inc  # type: ignore[method-assign]
        elif self._role != "_sum":
            # A histogram bucket's or a summary count's inc(): the
            # observation was counted by the _sum value's.
            self.inc = _native.ignore  # type: ignore[method-assign]

    def _tally_child(self) -> Any:
        g = self._group
        assert g is not None
        c = g.child
        if c is None:
            with _lock:
                c = g.child
                if c is None:
                    if self._typ == "histogram":
                        bounds = g.bounds if g.bounds else [INF]
                        p = _parent("histogram", self._metric_name, g.help,
                                    g.labelnames, buckets=bounds)
                    else:
                        p = _parent("summary", self._metric_name, g.help,
                                    g.labelnames)
                    c = g.child = _child(p, self._labelvalues)
        return c

    def inc(self, amount: float) -> None:
        role = self._role
        if role == "value":
            self._target.inc(amount)
        elif role == "_sum":
            # prometheus_client's observe(): _sum.inc(amount), then the
            # bucket's (or _count's) inc(1), which tally did here.
            observe = self._tally_child().observe
            self.inc = observe  # type: ignore[method-assign]
            observe(amount)

    def set(self, value: float, timestamp: Optional[float] = None) -> None:
        if self._typ != "gauge":
            # prometheus_client's Counter.reset() comes here.
            raise ValueError(
                f"set() of a {self._typ} value: tally's counters are "
                "shared by every process of the zone and never go "
                "backwards, so Counter.reset() is not supported")
        self._target.set(value)

    def set_exemplar(self, exemplar: Any) -> None:
        # tally's series hold no exemplars (nor does prometheus_client's
        # multiprocess mode): the value is counted, the exemplar is not
        # kept, and the application is told so once.
        global _exemplar_warned
        if not _exemplar_warned:
            _exemplar_warned = True
            warnings.warn(
                "tally: exemplars are not kept under "
                "TALLY_PROMETHEUS_CLIENT (the values are counted)",
                RuntimeWarning, stacklevel=3)

    def get_exemplar(self) -> Any:
        return None

    def get(self) -> float:
        """The zone's value (every process's adds); a per-process
        gauge's value is this process's, as in prometheus_client, except
        in a scrape, where a mode that combines the processes (sum, max,
        min and their live forms) is applied across the zone."""
        role = self._role
        if role == "value":
            if self._combined is not None and getattr(_scrape, "depth", 0):
                # In a scrape, a per-process gauge shows its mode applied
                # across the zone (the sum of the live processes under
                # livesum...), as a multiprocess registry would.
                v = _zone_values().get(self._combined)
                if v is not None:
                    return v
            return float(self._target._get())
        c = self._tally_child()
        if role == "_sum":
            return float(c._get_sum())
        if role == "bucket":
            return float(c._get_bucket(self._index))
        # A summary's _count: its one bucket (+Inf).
        return float(c._get_bucket(0))


def _collector_init(self: Any, registry: Any, path: Optional[str] = None
                    ) -> None:
    from ._collector import TallyCollector
    self._tally = TallyCollector(registry=_registry())
    self._path = path
    if registry:
        registry.register(self)


def _collector_collect(self: Any) -> Any:
    return self._tally.collect()


# The zone's families, read once per registry collection (a scrape): see
# _metric_collect().
_scrape = threading.local()


def _zone_families() -> Any:
    fams = getattr(_scrape, "families", None)
    if fams is None:
        from ._read import read
        fams = {}
        for f in read(_registry()).families:
            fams.setdefault(f.name, []).append(f)
        if getattr(_scrape, "depth", 0):
            _scrape.families = fams
    return fams


def _zone_values() -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    """The samples of this scrape's zone read, by name and labels."""
    vals = getattr(_scrape, "values", None)
    if vals is None:
        vals = {}
        for fams in _zone_families().values():
            for f in fams:
                for smp in f.samples:
                    vals[(smp.name, tuple(sorted(smp.labels.items())))] = \
                        smp.value
        if getattr(_scrape, "depth", 0):
            _scrape.values = vals
    return vals


def _sync_children(metric: Any) -> None:
    """Make, in this process, the children of @metric (a parent) that
    other processes made: a worker's own registry then shows every
    child of the zone, each value the zone's (TallyValue.get())."""
    names = _promclient.label_names(metric)
    have = _promclient.children(metric)
    kind = _promclient.metric_type(metric)
    for f in _zone_families().get(_promclient.metric_name(metric), ()):
        if f.type != kind:
            continue
        seen = set()
        for smp in f.samples:
            try:
                values = tuple(smp.labels[n] for n in names)
            except KeyError:
                continue
            if values in seen or values in have:
                continue
            seen.add(values)
            metric.labels(*values)


def _registry_collect(orig: Any, default: Any) -> Any:
    def collect(self: Any) -> Any:
        # One zone read for the whole scrape, whatever the number of
        # metrics (each one's collect() asks for it).
        _scrape.depth = getattr(_scrape, "depth", 0) + 1
        try:
            if self is not default:
                yield from orig(self)
                return
            # The default registry also shows the zone's metrics this
            # process has not defined yet (a framework that makes its
            # metrics at a worker's first request, say).
            seen = set()
            for m in orig(self):
                seen.add(m.name)
                yield m
            for name, fams in _zone_families().items():
                if name not in seen:
                    for f in fams:
                        yield _promclient.to_metric(f)
        finally:
            _scrape.depth -= 1
            if not _scrape.depth:
                _scrape.families = None
                _scrape.values = None
    collect.__doc__ = orig.__doc__
    return collect


def _metric_collect(orig: Any) -> Any:
    def collect(self: Any) -> Any:
        if _promclient.metric_type(self) in _KINDS and \
                _promclient.is_parent(self) and _promclient.backed(self):
            try:
                _sync_children(self)
            except (OSError, ValueError):
                pass  # show what this process has
        return orig(self)
    collect.__doc__ = orig.__doc__
    return collect


_KINDS = ("counter", "gauge", "histogram", "summary")


def shows_zone(c: Any, default: bool) -> bool:
    """Whether collector @c of a prometheus_client registry shows the
    zone, so that a scrape may write the zone in its place: a
    MultiProcessCollector (which reads the zone, _collector_init()),
    or, in the default registry (@default), a metric held in the zone
    (whose collect() shows the zone's children and values)."""
    if not _installed:
        return False
    if isinstance(getattr(c, "_tally", None), _collector.TallyCollector):
        return True
    try:
        return default and _promclient.backed(c) and \
            _promclient.metric_type(c) in _KINDS
    except AttributeError:
        return False


def _renew_lock() -> None:
    # A thread of the parent may have held the lock at fork(): in the
    # child that thread does not exist and would never release it.
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_lock)


def use(zone: Optional[str] = None) -> None:
    """Make prometheus_client store every value it creates from now on
    in tally: its Counter, Gauge, Histogram and Summary, the
    application's and its libraries' (framework instrumentators), and
    make its MultiProcessCollector read the zone.  @zone: the shared
    zone (by default $TALLY_ZONE, else the process's default zone).
    Call it before the application creates its metrics; calling it again
    does nothing.  ImportError when prometheus_client is not installed,
    or is not a release the switch supports (_promclient.SUPPORTED) or
    has internals that differ: then nothing of it is changed.
    This API is MT-safe."""
    global _installed, _zone_name
    with _lock:
        if _installed:
            return
        # Every internal is checked before anything is patched: a
        # prometheus_client the switch does not support is left as it was.
        found = _promclient.check()
        _zone_name = zone
        _promclient.patch(found, TallyValue, _collector_init,
                          _collector_collect, _metric_collect,
                          _registry_collect)
        _installed = True


def _from_environment() -> None:
    """use() when $TALLY_PROMETHEUS_CLIENT is set (not "" or "0"): run by
    _tally_metrics_switch once prometheus_client's module has run."""
    if os.environ.get(ENV, "") not in ("", "0"):
        try:
            use()
        except ImportError as e:
            # No prometheus_client (a program that does not use it), or
            # one tally cannot plug into: say so once, start anyway.
            if "prometheus_client" in sys.modules:
                sys.stderr.write(f"tally: {ENV} is set but {e}; "
                                 "prometheus_client keeps its values\n")
        except Exception as e:  # never stop an interpreter from starting
            sys.stderr.write(f"tally: {ENV} is set but use() failed: "
                             f"{e}\n")
