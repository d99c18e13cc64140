"""TallyCollector: a zone's metrics in a prometheus_client registry.

    from prometheus_client import CollectorRegistry, start_http_server
    from tally_metrics import TallyCollector

    registry = CollectorRegistry()
    registry.register(TallyCollector())   # was: MultiProcessCollector(registry)
    start_http_server(8000, registry=registry)

prometheus_client is imported when collect() first runs, never by
importing tally.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

from ._promclient import make_metric, to_metric
from ._read import read
from ._registry import REGISTRY, CollectorRegistry


class TallyCollector:
    """Collects the metrics of a tally zone for prometheus_client.

    registry: the tally registry whose zone is read (the default zone by
    default); zone: a zone name instead; all_zones=True: every segment
    of the directory; dir: the directory ($TALLY_DIR by default).
    Segments that cannot be read are skipped; .skipped lists the last
    collection's (path, why).
    """

    def __init__(self, registry: Optional[CollectorRegistry] = None,
                 zone: Optional[str] = None, dir: Optional[str] = None,
                 all_zones: bool = False) -> None:
        self._registry = registry
        self._zone = zone
        self._dir = dir
        self._all = all_zones
        self.skipped: List[Tuple[str, str]] = []

    def collect(self) -> Iterator[Any]:
        res = read(self._registry, dir=self._dir, zone=self._zone,
                   all_zones=self._all)
        self.skipped = res.skipped
        for f in res.families:
            yield to_metric(f)

    def expose(self, openmetrics: bool = False) -> bytes:
        """The zone's exposition as tally.generate_latest() writes it
        (tally-exporter's writer, in C): what prometheus_client's
        generate_latest() writes of collect(), but in the exporter's
        spelling ("1", not "1.0"), metrics in name order, and many times
        faster.  tally.generate_latest(registry) of a prometheus_client
        registry writes its TallyCollectors with it."""
        from ._exposition import expose
        text, self.skipped = expose(self._registry, openmetrics,
                                    self._dir, self._zone, self._all)
        return text

    def describe(self) -> List[Any]:
        """The metrics this collector will show, without their samples:
        the metrics defined in its tally registry and the families its
        zone holds now.  prometheus_client's registry takes their names
        at register(), so that a metric defined in both libraries (a
        half-migrated application) is refused with prometheus_client's
        "Duplicated timeseries" ValueError instead of served twice."""
        out: Dict[str, Any] = {}
        reg = self._registry
        if reg is None and self._zone is None and not self._all:
            reg = REGISTRY
        if reg is not None:
            for m in reg.metrics():
                typ = "unknown" if m._type == "untyped" else m._type
                out.setdefault(m._name, make_metric(m._name,
                                                    m._documentation,
                                                    typ, m._unit))
        try:
            res = read(self._registry, dir=self._dir, zone=self._zone,
                       all_zones=self._all)
        except OSError:
            res = None
        for f in (res.families if res else ()):
            out.setdefault(f.name, make_metric(f.name, f.documentation,
                                               f.type, f.unit))
        return list(out.values())
