"""The WSGI app of test_gunicorn.py: counts requests with tally and
serves /metrics through TallyCollector and prometheus_client."""
import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, \
    generate_latest

import tally_metrics as tally

REQUESTS = tally.Counter("app_requests", "Requests served.", ["path"])
INFLIGHT = tally.Gauge("app_inflight", "Requests in flight.",
                       multiprocess_mode="livesum")
LATENCY = tally.Histogram("app_seconds", "Time to serve.",
                          buckets=[0.001, 0.01, 0.1, 1])

registry = CollectorRegistry()
registry.register(tally.TallyCollector())


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/metrics":
        body = generate_latest(registry)
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
        return [body]
    if path == "/pid":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(os.getpid()).encode()]
    with INFLIGHT.track_inprogress(), LATENCY.time():
        REQUESTS.labels("/").inc()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]
