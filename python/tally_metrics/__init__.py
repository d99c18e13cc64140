"""tally: prometheus_client's Counter, Gauge, Histogram, Summary, Info
and Enum over tally's per-CPU series in shared memory.

Every process of a zone (pre-fork workers, restarted workers, unrelated
programs that name the same shared zone) adds into the same series, in C,
without a lock; a dead worker's counts stay; a scrape reads one value per
series however many processes came and went.

    from tally_metrics import Counter, Histogram, generate_latest, CONTENT_TYPE_LATEST

    REQUESTS = Counter("requests", "Requests served.", ["method"])
    LATENCY = Histogram("request_seconds", "Time to serve a request.")

See python/README.md and docs/python-migration.md.
"""
# No "from __future__ import annotations" here: it would make
# tally.annotations a public name.
from ._backend import use as use_in_prometheus_client
from ._collector import TallyCollector
from ._exposition import (CONTENT_TYPE_LATEST, CONTENT_TYPE_OPENMETRICS,
                          generate_latest)
from ._format import float_to_go_string
from ._metrics import (DEFAULT_BUCKETS, MULTIPROCESS_MODES, Counter, Enum,
                       Gauge, Histogram, Info, Summary)
from ._native import LABEL_PAIRS_MAX, LABELS_MAX, TallyError, Zone
from ._read import MetricFamily, ReadResult, Sample, read
from ._registry import REGISTRY, CollectorRegistry, zone

__version__ = "0.3.0"

__all__ = [
    "CONTENT_TYPE_LATEST", "CONTENT_TYPE_OPENMETRICS", "DEFAULT_BUCKETS",
    "LABELS_MAX", "LABEL_PAIRS_MAX",
    "MULTIPROCESS_MODES", "REGISTRY", "CollectorRegistry", "Counter",
    "Enum", "Gauge", "Histogram", "Info", "MetricFamily", "ReadResult",
    "Sample", "Summary",
    "TallyCollector", "TallyError", "Zone", "float_to_go_string",
    "generate_latest", "read", "use_in_prometheus_client", "zone",
]
