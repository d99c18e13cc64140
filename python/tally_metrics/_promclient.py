"""What the switch (TALLY_PROMETHEUS_CLIENT, use_in_prometheus_client())
takes of prometheus_client, checked before anything is changed.

The switch relies on internals of prometheus_client that its releases
may change.  This module names all of them, checks them, and patches
them in one step: either every one is found as expected and every patch
is made, or the switch is off (Unsupported, an ImportError, says why in
one line) and the application runs on prometheus_client's own values.

The release must be in SUPPORTED (the bounds of the package's
"prometheus-client" extra; its tests run against both ends), and it must
have what the switch replaces:

  values.ValueClass                     every value is made through it,
                                        called as ValueClass(typ,
                                        metric_name, name, labelnames,
                                        labelvalues, help_text, **kw)
  multiprocess.MultiProcessCollector    __init__ and collect: read the zone
  metrics.MetricWrapperBase             __init__ (marks a metric as held in
                                        tally) and collect (makes the
                                        children other processes made)
  registry.CollectorRegistry.collect    one zone read per scrape; the
                                        default registry shows the zone's
                                        other metrics
  registry.REGISTRY                     its per-process collectors
                                        (process, gc, platform) are
                                        unregistered
  metrics.MetricWrapperBase.labels      C equivalents (promclient.c) on
  (on Counter, Gauge, Histogram,        prometheus_client's own classes:
  Summary), metrics.Counter.inc,        the same reads and calls into
  metrics.Histogram.observe             the values; the release's own
                                        method for everything else

and what it reads, each through a function of this module that the rest
of the package calls (the package reads nothing of prometheus_client
elsewhere):

  registry_parts()                      a registry's _lock,
                                        _collector_to_names and
                                        _target_info_metric(), as its
                                        collect() reads them (for
                                        tally.generate_latest() of a
                                        prometheus_client registry;
                                        not checked by check(): a
                                        registry without them is
                                        written by prometheus_client)

  metric_name(), metric_type(),        a metric's _name, _type,
  label_names(), children(),           _labelnames, _metrics (its
  is_parent()                          children by label values) and
                                       _is_parent()
  value_role()                         how the values of a metric are
                                       named: ValueClass(typ, metric_name,
                                       name, ...) with name metric_name
                                       (a gauge), metric_name + "_total"
                                       (a counter), "_sum" and "_count"
                                       (a summary), "_sum" and one
                                       "_bucket" per bound, "le" the last
                                       label (a histogram)
  to_metric()                          core.Metric(name, documentation,
                                       type, unit) with add_sample()

check() runs each of them on probe objects of the release (a counter, a
gauge, a histogram and a summary whose values are made by a recorder in
place of values.ValueClass, in a copy of their _metric_init(); then
their inc(), set() and observe(), which must give the observation to
the _sum value once and make every other value's inc() one that the
switch may ignore); then each C method beside the release's own on the
same probes (the same child, calls and exceptions), so that a release
whose internals differ is refused before anything is patched.
"""
from __future__ import annotations

import importlib
import inspect
import math
import types
from typing import (Any, Callable, Collection, Dict, Iterable, List,
                    Optional, Tuple)

# The releases the switch is tested against: at least the first, below
# the second.  pyproject.toml's "prometheus-client" extra says the same.
SUPPORTED: Tuple[str, str] = ("0.17.0", "0.27")

# The arguments prometheus_client gives ValueClass, in order.
_VALUE_ARGS = ("typ", "metric_name", "name", "labelnames", "labelvalues",
               "help_text")

# The default registry's collectors of the process itself.
_PER_PROCESS = (("process_collector", "PROCESS_COLLECTOR"),
                ("gc_collector", "GC_COLLECTOR"),
                ("platform_collector", "PLATFORM_COLLECTOR"))


class Unsupported(ImportError):
    """This prometheus_client is not one the switch can plug into."""


def _release(text: str) -> Tuple[int, ...]:
    parts = []
    for p in text.split("."):
        digits = ""
        for ch in p:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if digits != p:
            break  # "0.27.0rc1": the release part ends here
    return tuple(parts)


def installed_version() -> Optional[str]:
    """The version of the installed prometheus_client distribution, or
    None when it has no metadata (a copy vendored into the application)."""
    from importlib import metadata
    try:
        return metadata.version("prometheus_client")
    except metadata.PackageNotFoundError:
        return None


def check_version(version: Optional[str]) -> None:
    """Unsupported unless @version is within SUPPORTED."""
    low, high = SUPPORTED
    want = f">={low},<{high}"
    if version is None:
        raise Unsupported(
            f"prometheus_client has no version (supported: {want})")
    v = _release(version)
    if not v or not _release(low) <= v < _release(high):
        raise Unsupported(
            f"prometheus_client {version} is not a supported release "
            f"({want})")


def _need(owner: Any, attr: str, where: str) -> Any:
    if not hasattr(owner, attr):
        raise Unsupported(f"prometheus_client has no {where}.{attr}")
    return getattr(owner, attr)


def check(version: Optional[str] = None) -> Dict[str, Any]:
    """Check the release and every internal the switch uses; return the
    modules and objects to patch.  Unsupported (an ImportError) with a
    one-line reason when anything differs; ImportError when
    prometheus_client is not installed.  Changes nothing."""
    from prometheus_client import metrics, multiprocess, registry, values
    from prometheus_client import core
    check_version(installed_version() if version is None else version)

    value_class = _need(values, "ValueClass", "values")
    try:
        params = inspect.signature(value_class).parameters
    except (TypeError, ValueError):
        params = {}
    if tuple(params)[:len(_VALUE_ARGS)] != _VALUE_ARGS:
        raise Unsupported("prometheus_client's values.ValueClass takes "
                          f"({', '.join(params)}), not "
                          f"({', '.join(_VALUE_ARGS)}, ...)")
    collector = _need(multiprocess, "MultiProcessCollector", "multiprocess")
    base = _need(metrics, "MetricWrapperBase", "metrics")
    for attr in ("__init__", "collect", "_is_parent"):
        _need(base, attr, "metrics.MetricWrapperBase")
    reg_class = _need(registry, "CollectorRegistry", "registry")
    default = _need(registry, "REGISTRY", "registry")
    _need(default, "unregister", "registry.REGISTRY")
    metric = _need(core, "Metric", "core")
    _need(metric, "add_sample", "core.Metric")

    _check_reads(metrics)
    _check_values(metrics)
    fast = _check_fast(metrics)
    _check_to_metric()

    per_process = []
    for mod, attr in _PER_PROCESS:
        try:
            per_process.append(getattr(importlib.import_module(
                "prometheus_client." + mod), attr))
        except (ImportError, AttributeError):
            pass  # a release without it: nothing to leave out
    return dict(values=values, collector=collector, base=base,
                reg_class=reg_class, default=default,
                per_process=per_process, fast=fast)


# --- What the switch reads of prometheus_client's metrics -------------

# The attribute of a prometheus_client metric that says its values are
# tally's (set by the patched MetricWrapperBase.__init__).
_BACKED = "_tally_backed"


def metric_name(metric: Any) -> str:
    """The name of a prometheus_client metric (a counter's without
    "_total")."""
    return metric._name


def metric_type(metric: Any) -> str:
    """"counter", "gauge", "histogram", "summary", "info" or
    "stateset"."""
    return metric._type


def label_names(metric: Any) -> Tuple[str, ...]:
    return tuple(metric._labelnames)


def children(metric: Any) -> Collection[Tuple[str, ...]]:
    """The label values of the children a parent metric has made in this
    process (a view, not a copy: read it under no lock, only to test
    whether a child exists)."""
    return metric._metrics


def is_parent(metric: Any) -> bool:
    """Whether @metric has label names and is not one of their
    children."""
    return bool(metric._is_parent())


def backed(metric: Any) -> bool:
    """Whether @metric was made after the switch (its values are
    tally's)."""
    return getattr(metric, _BACKED, False)


def value_role(typ: str, metric_name: str, name: str,
               labelnames: Iterable[str], labelvalues: Iterable[str]
               ) -> Tuple[str, Tuple[str, ...], Tuple[str, ...],
                          Optional[float]]:
    """What a value that prometheus_client makes (ValueClass's
    arguments) is to its metric: (role, label names, label values,
    bound), role "value" (a counter's or a gauge's one value), "_sum",
    "_count" (a summary's) or "bucket" (a histogram's, whose bound is
    taken out of the labels).  ValueError for anything else."""
    labelnames = tuple(labelnames)
    labelvalues = tuple(labelvalues)
    if typ in ("counter", "gauge"):
        return "value", labelnames, labelvalues, None
    if typ not in ("histogram", "summary"):
        raise ValueError(f"tally holds no {typ!r} values")
    if name == metric_name + "_bucket" and labelnames[-1:] == ("le",) \
            and len(labelvalues) == len(labelnames):
        return ("bucket", labelnames[:-1], labelvalues[:-1],
                float(labelvalues[-1]))
    role = name[len(metric_name):] if name.startswith(metric_name) else ""
    if role not in ("_sum", "_count"):
        raise ValueError(f"a {typ} value named {name!r} (metric "
                         f"{metric_name!r}) is none tally knows")
    return role, labelnames, labelvalues, None


def make_metric(name: str, documentation: str, typ: str, unit: str
                ) -> Any:
    """A core.Metric to add samples to; without its unit when this
    release refuses the unit for the name."""
    from prometheus_client.core import Metric
    try:
        return Metric(name, documentation, typ, unit)
    except ValueError:
        return Metric(name, documentation, typ)


def to_metric(family: Any) -> Any:
    """A core.Metric of @family (a tally MetricFamily: name,
    documentation, type, unit, samples of name, labels, value)."""
    m = make_metric(family.name, family.documentation, family.type,
                    family.unit)
    for smp in family.samples:
        m.add_sample(smp.name, smp.labels, smp.value)
    return m


# --- The checks of check() --------------------------------------------

def _check_reads(metrics: Any) -> None:
    # A parent metric in no registry: it has labels, so that no value is
    # made (in multiprocess mode a value is a file).
    counter = metrics.Counter("tally_probe", "Probe.", ["a"], registry=None)
    try:
        got = (metric_name(counter), metric_type(counter),
               label_names(counter), is_parent(counter),
               ("x",) in children(counter))
        setattr(counter, _BACKED, True)
        marked = backed(counter)
    except (AttributeError, TypeError) as e:
        raise Unsupported("prometheus_client's metrics.Counter is not as "
                          f"expected ({e})") from None
    want = ("tally_probe", "counter", ("a",), True, False)
    if got != want or not marked:
        raise Unsupported(f"prometheus_client's metrics.Counter reads as "
                          f"{got}, not {want}")


class _Made:
    """A value made by a probe metric: its arguments and what was done
    to it."""

    def __init__(self, made: List["_Made"], typ: str, metric_name: str,
                 name: str, labelnames: Any, labelvalues: Any,
                 help_text: str = "", **kw: Any) -> None:
        self.args = (typ, metric_name, name, labelnames, labelvalues)
        self.kw = kw
        self.calls: List[Tuple[str, float]] = []
        made.append(self)

    def inc(self, amount: float) -> None:
        self.calls.append(("inc", amount))

    def set(self, value: float, timestamp: Optional[float] = None) -> None:
        self.calls.append(("set", value))

    def set_exemplar(self, exemplar: Any) -> None:
        pass

    def get_exemplar(self) -> Any:
        return None

    def get(self) -> float:
        return 0.0


def _probe(metrics: Any, kind: str, **kw: Any) -> Tuple[Any, List[_Made]]:
    """A child of a probe metric of class metrics.@kind whose values are
    _Made ones: its _metric_init() runs, copied, with values.ValueClass
    taken to be _Made (prometheus_client's own module is not changed)."""
    cls = getattr(metrics, kind)
    init = vars(cls).get("_metric_init")
    if not isinstance(init, types.FunctionType):
        raise Unsupported(f"prometheus_client has no metrics.{kind}."
                          "_metric_init")
    made: List[_Made] = []
    scope = dict(init.__globals__)
    scope["values"] = types.SimpleNamespace(
        ValueClass=lambda *a, **k: _Made(made, *a, **k))
    copy = types.FunctionType(init.__code__, scope, init.__name__,
                              init.__defaults__, init.__closure__)
    probe = type("TallyProbe" + kind, (cls,), {"_metric_init": copy})
    child = probe("tally_probe", "Probe.", ["a"], registry=None,
                  **kw).labels("x")
    if not made:
        raise Unsupported(f"prometheus_client's metrics.{kind} makes its "
                          "values otherwise than by values.ValueClass")
    return child, made


def _roles(made: List[_Made]) -> List[Tuple[Any, ...]]:
    out = []
    for v in made:
        try:
            out.append(value_role(*v.args))
        except (ValueError, IndexError, TypeError):
            out.append(("?",) + v.args)
    return out


def _check_values(metrics: Any) -> None:
    """Each kind makes the values value_role() names, with the
    arguments TallyValue takes, and updates them as the switch counts
    (a histogram's or summary's observation is the _sum value's inc();
    every other value's inc() in it is one the switch ignores)."""
    a, x = ("a",), ("x",)
    want: Dict[str, Any] = {
        "Counter": ({}, [("value", a, x, None)],
                    lambda c: c.inc(2), [[("inc", 2)]]),
        "Gauge": ({"multiprocess_mode": "livesum"}, [("value", a, x, None)],
                  lambda g: (g.inc(2), g.dec(1), g.set(5)),
                  [[("inc", 2), ("inc", -1), ("set", 5.0)]]),
        "Histogram": ({"buckets": [1]},
                      [("_sum", a, x, None), ("bucket", a, x, 1.0),
                       ("bucket", a, x, math.inf)],
                      lambda h: h.observe(0.5),
                      [[("inc", 0.5)], [("inc", 1)], []]),
        "Summary": ({}, None, lambda s: s.observe(0.5), None),
    }
    for kind, (kw, roles, update, calls) in want.items():
        try:
            child, made = _probe(metrics, kind, **kw)
            update(child)
        except Unsupported:
            raise
        except Exception as e:
            raise Unsupported(f"prometheus_client's metrics.{kind} is not "
                              f"as expected ({type(e).__name__}: {e})"
                              ) from None
        got = _roles(made)
        if kind == "Summary":
            # _count and _sum, in either order: the observation is the
            # _sum value's inc() alone.
            by_role = {r[0]: v.calls for r, v in zip(got, made)}
            ok = sorted(by_role) == ["_count", "_sum"] and \
                len(made) == 2 and by_role["_sum"] == [("inc", 0.5)] and \
                by_role["_count"] == [("inc", 1)]
        else:
            ok = got == roles and [v.calls for v in made] == calls
        if kind == "Gauge" and made[0].kw.get("multiprocess_mode") != \
                "livesum":
            ok = False
        if not ok:
            raise Unsupported(
                f"prometheus_client's metrics.{kind} makes and updates "
                f"its values otherwise: {got}, "
                f"{[v.calls for v in made]}")


def _check_to_metric() -> None:
    smp = types.SimpleNamespace(name="tally_probe_total", labels={"a": "x"},
                                value=2.0)
    fam = types.SimpleNamespace(name="tally_probe", documentation="Probe.",
                                type="counter", unit="", samples=[smp])
    try:
        m = to_metric(fam)
        got = (m.name, m.type, m.documentation,
               [tuple(s[:3]) for s in m.samples])
    except Exception as e:
        raise Unsupported(f"prometheus_client's core.Metric is not as "
                          f"expected ({type(e).__name__}: {e})") from None
    want = ("tally_probe", "counter", "Probe.",
            [("tally_probe_total", {"a": "x"}, 2.0)])
    if got != want:
        raise Unsupported(f"prometheus_client's core.Metric makes {got}, "
                          f"not {want}")


# --- The hot methods, in C ---------------------------------------------

# The classes whose labels() the C one replaces, and the method each
# other one replaces (in the class that defines it).
_KINDS = ("Counter", "Gauge", "Histogram", "Summary")
_FAST = (("MetricWrapperBase", "labels"), ("Counter", "inc"),
         ("Histogram", "observe"))
# prometheus_client's own methods that patch() replaced, by (class,
# name): what check() probes when it runs again after the switch.
_replaced: Dict[Tuple[type, str], Any] = {}


def _own(cls: type, name: str) -> Any:
    """prometheus_client's own method @name of @cls (a function)."""
    fn = _replaced.get((cls, name), vars(cls).get(name))
    if not isinstance(fn, types.FunctionType):
        raise Unsupported(f"prometheus_client has no function "
                          f"{cls.__name__}.{name}")
    return fn


def _outcome(fn: Callable, *args: Any, **kw: Any) -> Any:
    """What @fn(*args, **kw) returns, or its exception's type and text."""
    try:
        return ("=", fn(*args, **kw))
    except Exception as e:
        return ("!", type(e).__name__, str(e))


def _copy(metrics: Any, kind: str, **kw: Any) -> Tuple[Any, List[_Made]]:
    """An object of prometheus_client's own class metrics.@kind (the one
    the C methods take on) with the attributes of _probe()'s child: its
    values are _Made ones."""
    child, made = _probe(metrics, kind, **kw)
    cls = getattr(metrics, kind)
    obj = cls.__new__(cls)
    obj.__dict__.update(vars(child))
    return obj, made


def _check_fast(metrics: Any) -> Dict[str, Any]:
    """prometheus_client's labels(), Counter.inc() and
    Histogram.observe() made in C (promclient.c), each checked to do what
    the release's own does: the same child, the same calls into the
    values, the same exceptions.  The C methods fall back on the
    release's own for everything they do not do themselves, so these
    probes are the calls they do, and the errors at their edges."""
    from . import _native
    base = metrics.MetricWrapperBase
    kinds = [getattr(metrics, k) for k in _KINDS]
    orig = [_own(getattr(metrics, c), n) for c, n in _FAST]
    for k in kinds:
        if getattr(k, "labels") not in (orig[0], _fast_of(k, "labels")):
            raise Unsupported(f"prometheus_client's metrics.{k.__name__} "
                              "has a labels() of its own")
    fast = _native.promclient_methods(base, *kinds, *orig)
    bad = (_check_fast_labels(metrics, kinds, orig[0], fast[0]) or
           _check_fast_updates(metrics, "Counter", {}, orig[1], fast[1], (
               (), (2,), (0.5, None), (-1,), ("x",), (1, {"a": "x"}))) or
           _check_fast_updates(metrics, "Histogram", {"buckets": [1, 2]},
                               orig[2], fast[2], (
               (0.5,), (1,), (1.0,), (1.5,), (3,), (-1,), (2 ** 60,),
               (True,), (float("nan"),), ("x",), (), (0.5, None))))
    if bad:
        raise Unsupported(f"prometheus_client's {bad} is not as expected")
    return dict(kinds=kinds, labels=fast[0], inc=(metrics.Counter, fast[1]),
                observe=(metrics.Histogram, fast[2]))


def _fast_of(cls: type, name: str) -> Any:
    """The C method patch() put on @cls as @name, if it did."""
    return vars(cls).get(name) if (cls, name) in _replaced else None


def _check_fast_labels(metrics: Any, kinds: List[type], orig: Callable,
                       fast: Callable) -> Optional[str]:
    """The C labels() returns the child stored in a parent's _metrics
    (by the str() of each value), as the release's own does, and errs as
    it does; no value is made (the parents are probes in no registry)."""
    calls: List[Tuple[Tuple[Any, ...], Dict[str, Any]]] = [
        (("x", 1), {}), ((), {"b": 1, "a": "x"}), (("x",), {}),
        (("x", 1, 2), {}), (("x",), {"b": 1}), ((), {"a": "x"}),
        ((), {"a": "x", "c": 1}), ((), {})]
    for k in kinds:
        parent = k("tally_probe", "Probe.", ["a", "b"], registry=None)
        child = object()
        parent._metrics[("x", "1")] = child
        for args, kwargs in calls:
            want = _outcome(orig, parent, *args, **kwargs)
            got = _outcome(fast, parent, *args, **kwargs)
            if got != want or (args == ("x", 1) and want != ("=", child)):
                return f"metrics.{k.__name__}.labels() (called with " \
                    f"{args}, {kwargs})"
    return None


def _check_fast_updates(metrics: Any, kind: str, kw: Dict[str, Any],
                        orig: Callable, fast: Callable,
                        calls: Any) -> Optional[str]:
    """The C method @fast makes the same calls into a probe child's
    values (and raises the same errors) as the release's own @orig, for
    each argument tuple of @calls, and refuses a parent as it does."""
    results = []
    for fn in (orig, fast):
        obj, made = _copy(metrics, kind, **kw)
        out = [_outcome(fn, obj, *args) for args in calls]
        parent = getattr(metrics, kind)("tally_probe", "Probe.", ["a"],
                                        registry=None, **kw)
        out.append(_outcome(fn, parent, 1))
        results.append((out, [v.calls for v in made]))
    if results[0] != results[1] or not results[0][1][0]:
        return f"metrics.{kind}.{getattr(fast, '__name__', '?')}()"
    return None


def patch(found: Dict[str, Any], value_class: type,
          collector_init: Callable, collector_collect: Callable,
          metric_collect: Callable[[Any], Any],
          registry_collect: Callable[[Any, Any], Any]) -> None:
    """Put tally in the places check() found.  Nothing here can fail
    half way: every name was checked, and each step is an assignment (an
    unregister that finds nothing is skipped)."""
    found["values"].ValueClass = value_class
    # On the class, so that a MultiProcessCollector imported before the
    # switch (from prometheus_client.multiprocess import ...) reads the
    # zone too.
    collector = found["collector"]
    collector.__init__ = collector_init
    collector.collect = collector_collect
    # A worker's own registry (generate_latest(), start_http_server,
    # make_wsgi_app without MultiProcessCollector) shows the children
    # other workers made too.
    base = found["base"]
    base.collect = metric_collect(base.collect)
    reg_class = found["reg_class"]
    reg_class.collect = registry_collect(reg_class.collect, found["default"])
    init = base.__init__

    def __init__(self: Any, *args: Any, **kw: Any) -> None:
        # Metrics made from now on hold their values in tally.
        setattr(self, _BACKED, True)
        init(self, *args, **kw)
    __init__.__doc__ = init.__doc__
    base.__init__ = __init__
    for c in found["per_process"]:
        try:
            found["default"].unregister(c)
        except KeyError:
            pass  # the application took it out already
    # prometheus_client's hot methods, in C, on its own classes (a
    # subclass inherits them and gets the class's own method through
    # them).
    fast = found["fast"]
    targets = [(k, "labels", fast["labels"]) for k in fast["kinds"]]
    targets += [(fast[n][0], n, fast[n][1]) for n in ("inc", "observe")]
    for cls, name, method in targets:
        if (cls, name) not in _replaced:
            _replaced[(cls, name)] = getattr(cls, name)
        setattr(cls, name, method)


def default_registry() -> Any:
    """prometheus_client.REGISTRY."""
    from prometheus_client import REGISTRY
    return REGISTRY


def registry_parts(registry: Any) -> Optional[List[Any]]:
    """The collectors of prometheus_client registry @registry in the
    order its collect() runs them, after a collector of its target_info
    metric when it has one; None when @registry is not a plain
    CollectorRegistry of prometheus_client (a RestrictedRegistry, a
    registry of its own) or not one whose internals are as expected."""
    from prometheus_client import registry as pr
    if type(registry) is not pr.CollectorRegistry:
        return None
    try:
        with registry._lock:
            collectors = list(registry._collector_to_names)
            ti = registry._target_info_metric() \
                if registry._target_info else None
    except (AttributeError, TypeError):
        return None
    return ([_Metrics([ti])] if ti is not None else []) + collectors


class _Metrics:
    """A collector of metrics already made."""

    def __init__(self, metrics: List[Any]) -> None:
        self._metrics = metrics

    def collect(self) -> List[Any]:
        return self._metrics


class _Collectors:
    """The metrics of several collectors, as a registry yields them."""

    def __init__(self, collectors: List[Any]) -> None:
        self._collectors = collectors

    def collect(self) -> Iterable[Any]:
        for c in self._collectors:
            yield from c.collect()


def write_collectors(collectors: List[Any], openmetrics: bool) -> bytes:
    """The metrics of @collectors as prometheus_client's own
    generate_latest() writes them (openmetrics: its OpenMetrics writer,
    without the final "# EOF")."""
    if openmetrics:
        from prometheus_client.openmetrics import exposition as om
        text = om.generate_latest(_Collectors(collectors))
        return text[:-len(b"# EOF\n")] \
            if text.endswith(b"# EOF\n") else text
    from prometheus_client import exposition
    return exposition.generate_latest(_Collectors(collectors))
