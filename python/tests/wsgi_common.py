"""What the WSGI apps of the gunicorn tests (gunicorn_app.py,
gunicorn_deploy_app.py) share: /metrics, tally's series read through
TallyCollector and written in prometheus_client's text format, and the
plain-text answers of their other paths."""
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, \
    generate_latest

import tally_metrics as tally

registry = CollectorRegistry()
registry.register(tally.TallyCollector())


def metrics(start_response):
    """The answer to GET /metrics: every series of the zone."""
    body = generate_latest(registry)
    start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
    return [body]


def text(start_response, body):
    """A 200 answer of @body (bytes), as text/plain."""
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]
