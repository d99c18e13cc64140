"""Types of tally._native (the C half of the package)."""
from typing import Any, Dict, List, Optional, Tuple

FRAC_SCALE: int
SFX_FRAC: str
SFX_BUCKET: str
SFX_SUM: str
SFX_SETNS: str
KIND_COUNTER: int
KIND_GAUGE: int
KIND_HISTOGRAM: int
TALLY_COUNTER: int
TALLY_GAUGE: int
TALLY_GAUGE_SET: int
TALLY_FGAUGE: int
TALLY_HISTOGRAM: int
LABELS_MAX: int
NAME_MAX: int

class TallyError(OSError): ...

class Zone:
    def __init__(self, name: Optional[str] = None,
                 shared: bool = False) -> None: ...
    @property
    def path(self) -> Optional[str]: ...
    @property
    def zone_name(self) -> Optional[str]: ...

class Family:
    def __init__(self, zone: Optional[Zone], kind: int, name: str,
                 help: str, unit: str, labelnames: Tuple[str, ...],
                 buckets: Optional[Tuple[float, ...]] = None,
                 bucket_labels: Optional[Tuple[str, ...]] = None,
                 timestamps: bool = False) -> None: ...
    @property
    def bounds(self) -> Tuple[float, ...]: ...
    @property
    def nlabels(self) -> int: ...

class _Base:
    def labels(self, *values: Any, **labelkwargs: Any) -> Any: ...
    def _bind(self, family: Family, values: Tuple[str, ...]) -> None: ...
    def _init_parent(self, family: Family, nuser: int) -> None: ...
    @property
    def _children(self) -> Optional[Dict[Any, Any]]: ...
    @property
    def _family(self) -> Optional[Family]: ...
    @property
    def _bound(self) -> bool: ...

class CounterBase(_Base):
    def inc(self, amount: float = 1, exemplar: Any = None) -> None: ...

class GaugeBase(_Base):
    def inc(self, amount: float = 1) -> None: ...
    def dec(self, amount: float = 1) -> None: ...
    def set(self, value: float) -> None: ...
    def _get(self) -> float: ...

class HistogramBase(_Base):
    def observe(self, amount: float, exemplar: Any = None) -> None: ...

Series = Tuple[str, int, str, str, Tuple[Tuple[str, str], ...], int,
               Optional[Tuple[int, int, int, Tuple[int, ...]]]]

def read(dir: Optional[str] = None, zone: Optional[str] = None
         ) -> Tuple[List[Series], List[Tuple[str, str]], int]: ...
