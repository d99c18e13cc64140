"""Applications of test_frameworks.py, instrumented by their framework's
exporter and nothing else: no line of tally.  gunicorn serves them with
the tally back end (TALLY_PROMETHEUS_CLIENT=1) or in prometheus_client's
multiprocess mode (PROMETHEUS_MULTIPROC_DIR alone).

  flask_app      Flask + prometheus_flask_exporter (sync workers)
  starlette_app  Starlette + starlette-exporter (uvicorn workers)

Both also define a prometheus_client Info and Enum, which its
multiprocess mode does not serve ("Info metrics do not work in
multiprocess mode"): they stay in each worker, out of the zone, and the
app's /metrics (MultiProcessCollector) and tally-exporter both leave them
out (test_exporter_apps.py).
"""
import os

from prometheus_client import Enum, Info

Info("shop_build", "What was built.").info({"version": "1.2"})
Enum("shop_state", "Where it stands.", states=["up", "down"]).state("up")


def _flask():
    from flask import Flask
    from prometheus_flask_exporter import PrometheusMetrics

    app = Flask(__name__)
    PrometheusMetrics(app)

    @app.route("/")
    def index():
        return "ok\n"

    @app.route("/pid")
    def pid():
        return str(os.getpid())

    return app


def _starlette():
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette_exporter import PrometheusMiddleware, handle_metrics

    async def index(request):
        return PlainTextResponse("ok\n")

    async def pid(request):
        return PlainTextResponse(str(os.getpid()))

    app = Starlette(routes=[Route("/", index), Route("/pid", pid)])
    app.add_middleware(PrometheusMiddleware, app_name="shop")
    app.add_route("/metrics", handle_metrics)
    return app


_which = os.environ.get("FRAMEWORK_APP", "flask")
if _which == "flask":
    flask_app = _flask()
else:
    starlette_app = _starlette()
