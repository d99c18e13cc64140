"""Registries: which zone a metric's series go to, and the names taken.

A registry here is a zone (where the series live, and what
generate_latest() reads) plus prometheus_client's check that two metrics
do not expose the same names.  REGISTRY is the process's default zone:
the zone $TALLY_ZONE names, where libtally has shared zones, else one
named after the process.  zone("name") is a registry on the shared zone
of that name, which every process that asks for it attaches.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, Iterable, List, Optional

from . import _native


class CollectorRegistry:
    """The zone metrics register in and the names they take.

    zone_name=None: the process's default zone.  shared=True: the shared
    zone of that name (every process naming it adds into the same
    series).  auto_describe is accepted for prometheus_client's
    signature and ignored.
    """

    def __init__(self, auto_describe: bool = False,
                 zone_name: Optional[str] = None,
                 shared: bool = False) -> None:
        self._zone_name = zone_name
        self._shared = shared
        self._zone: Optional[_native.Zone] = None
        self._lock = threading.Lock()
        self._names: Dict[str, object] = {}

    @property
    def zone(self) -> _native.Zone:
        """The zone, attached (or created) at first use."""
        z = self._zone
        if z is None:
            with self._lock:
                if self._zone is None:
                    if self._shared and self._zone_name and \
                            self._zone_name == os.environ.get("TALLY_ZONE"):
                        # $TALLY_ZONE made it the default zone already.
                        self._zone = _native.Zone()
                    else:
                        self._zone = _native.Zone(self._zone_name,
                                                  shared=self._shared)
                z = self._zone
        return z

    def zone_name(self) -> str:
        """The zone's name as its segments carry it (what readers of
        this registry select)."""
        name = self.zone.zone_name
        return name if name is not None else (self._zone_name or "")

    def check_free(self, metric: object) -> None:
        """Raise ValueError when a metric of this registry already has
        one of @metric's names (register() checks again)."""
        with self._lock:
            self._check_free(_names_of(metric))

    def _check_free(self, names: Iterable[str]) -> None:
        dup = set(self._names).intersection(names)
        if dup:
            raise ValueError(
                "Duplicated timeseries in CollectorRegistry: "
                f"{sorted(dup)}")

    def register(self, metric: object) -> None:
        names = _names_of(metric)
        with self._lock:
            self._check_free(names)
            for n in names:
                self._names[n] = metric

    def metrics(self) -> List[object]:
        """The metrics registered, each once, in the order registered."""
        with self._lock:
            return list({id(m): m for m in self._names.values()}.values())

    def unregister(self, metric: object) -> None:
        with self._lock:
            for n in [n for n, m in self._names.items() if m is metric]:
                del self._names[n]


def _names_of(metric: object) -> Iterable[str]:
    name = getattr(metric, "_name")
    kind = getattr(metric, "_type")
    if kind == "counter":
        return {name, name + "_total", name + "_created"}
    if kind == "histogram":
        return {name, name + "_bucket", name + "_count", name + "_sum",
                name + "_created"}
    if kind == "summary":
        return {name, name + "_count", name + "_sum", name + "_created"}
    if kind == "info":
        return {name + "_info"}
    return {name}


REGISTRY = CollectorRegistry()

_zones: Dict[str, CollectorRegistry] = {}
_zones_lock = threading.Lock()


def zone(name: str) -> CollectorRegistry:
    """The registry of the shared zone @name: pass it as registry= to
    metrics, and to generate_latest() or TallyCollector to read it."""
    with _zones_lock:
        reg = _zones.get(name)
        if reg is None:
            reg = _zones[name] = CollectorRegistry(zone_name=name,
                                                   shared=True)
        return reg
