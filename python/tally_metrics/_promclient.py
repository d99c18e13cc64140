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

and what it reads: a metric's _name, _type, _labelnames, _metrics and
_is_parent(), a histogram's _upper_bounds and _metric_init() (which
makes its _sum value first, then one value per bucket; observe() adds to
_sum before the bucket), and core.Metric(name, documentation, type,
unit) with add_sample().
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Dict, Optional, Tuple

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

    # Parent metrics in no registry show the attributes read.  They have
    # labels, so that no value is made (in multiprocess mode a value is
    # a file).
    counter = metrics.Counter("tally_probe", "Probe.", ["a"], registry=None)
    for attr in ("_name", "_type", "_labelnames", "_metrics"):
        _need(counter, attr, "metrics.Counter")
    hist = metrics.Histogram("tally_probe", "Probe.", ["a"], registry=None,
                             buckets=[1])
    _need(hist, "_upper_bounds", "metrics.Histogram")
    # Its own, not MetricWrapperBase's: the one that makes the values.
    if not callable(vars(metrics.Histogram).get("_metric_init")):
        raise Unsupported(
            "prometheus_client has no metrics.Histogram._metric_init")

    per_process = []
    for mod, attr in _PER_PROCESS:
        try:
            per_process.append(getattr(importlib.import_module(
                "prometheus_client." + mod), attr))
        except (ImportError, AttributeError):
            pass  # a release without it: nothing to leave out
    return dict(values=values, collector=collector, base=base,
                reg_class=reg_class, default=default,
                per_process=per_process)


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
        self._tally_backed = True
        init(self, *args, **kw)
    __init__.__doc__ = init.__doc__
    base.__init__ = __init__
    for c in found["per_process"]:
        try:
            found["default"].unregister(c)
        except KeyError:
            pass  # the application took it out already
