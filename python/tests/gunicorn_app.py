"""The WSGI app of test_gunicorn.py: counts requests with tally and
serves /metrics through TallyCollector and prometheus_client."""
import os

import tally_metrics as tally
from wsgi_common import metrics, text

REQUESTS = tally.Counter("app_requests", "Requests served.", ["path"])
INFLIGHT = tally.Gauge("app_inflight", "Requests in flight.",
                       multiprocess_mode="livesum")
LATENCY = tally.Histogram("app_seconds", "Time to serve.",
                          buckets=[0.001, 0.01, 0.1, 1])


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/metrics":
        return metrics(start_response)
    if path == "/pid":
        return text(start_response, str(os.getpid()).encode())
    with INFLIGHT.track_inprogress(), LATENCY.time():
        REQUESTS.labels("/").inc()
    return text(start_response, b"ok\n")
