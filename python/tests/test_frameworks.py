"""Unchanged prometheus_client applications on tally: a real gunicorn
serving apps instrumented by prometheus_flask_exporter (Flask, sync
workers) and starlette-exporter (Starlette, uvicorn workers), with
--max-requests recycling, once with the tally back end
(TALLY_PROMETHEUS_CLIENT=1, TALLY_ZONE) and once in prometheus_client's
multiprocess mode.  The apps' own /metrics must count every request
exactly, never go backwards when workers are recycled or SIGKILLed, and
show the same exposition in both modes."""
from __future__ import annotations

import http.client
import os
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

import tally_metrics as tally
from conftest import child_env
from gunicorn_server import GUNICORN, Gunicorn, drive, get

N = 300

# framework: (gunicorn app, worker class, the sample that counts
# requests to "/", its labels).  prometheus_flask_exporter counts a
# request before its response is sent; starlette-exporter after it, so
# that a worker killed in between served a request it did not count.
FRAMEWORKS = {
    "flask": ("framework_apps:flask_app", "sync",
              "flask_http_request_duration_seconds_count",
              {"method": "GET", "path": "/", "status": "200"}),
    "starlette": ("framework_apps:starlette_app",
                  "uvicorn.workers.UvicornWorker",
                  "starlette_requests_total",
                  {"app_name": "shop", "method": "GET", "path": "/",
                   "status_code": "200"}),
}


def _need(module):
    try:
        __import__(module)
    except ImportError:
        pytest.skip(f"{module} is not installed")


@pytest.fixture(params=sorted(FRAMEWORKS))
def framework(request):
    if not os.path.exists(GUNICORN):
        pytest.skip("gunicorn is not installed")
    _need({"flask": "prometheus_flask_exporter",
           "starlette": "starlette_exporter"}[request.param])
    if request.param == "starlette":
        _need("uvicorn")
    return request.param


class Server(Gunicorn):
    """gunicorn with 2 workers recycled every 25 requests, in its own
    session, stopped by stop()."""

    def __init__(self, framework, mode, tally_dir, tmp_path,
                 multiproc_dir=True):
        app, worker, self.sample, self.labels = FRAMEWORKS[framework]
        mpdir = tmp_path / f"mp-{mode}"
        mpdir.mkdir()
        # The multiprocess mode's variable stays in both modes: the
        # frameworks choose MultiProcessCollector by it, and the back
        # end makes that collector read the zone.
        env = child_env(tally_dir, FRAMEWORK_APP=framework,
                        PROMETHEUS_MULTIPROC_DIR=str(mpdir))
        if not multiproc_dir:
            del env["PROMETHEUS_MULTIPROC_DIR"]
        if mode == "tally":
            env["TALLY_PROMETHEUS_CLIENT"] = "1"
            env["TALLY_ZONE"] = f"fw-{framework}"
        self.mpdir = str(mpdir)
        super().__init__(app, ["--workers", "2", "--worker-class", worker,
                               "--max-requests", "25",
                               "--graceful-timeout", "5"], env, "/pid")

    def metrics(self):
        for _ in range(50):
            try:
                return get(self.port, "/metrics").decode()
            except (OSError, http.client.HTTPException):
                time.sleep(0.1)  # a worker killed while scraping
        raise RuntimeError("no scrape succeeded")

    def count(self, text=None):
        text = self.metrics() if text is None else text
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name == self.sample and s.labels == self.labels:
                    return s.value
        return 0.0


def _drive(server, kill=False, scrape=False):
    """N successful requests to "/" from 3 clients (a failed one is sent
    again); with @scrape, /metrics read all along; with @kill, a worker
    SIGKILLed every 0.3 s, twice at least.  Returns (failed, scraped
    counts, kills)."""
    def count():
        return server.count(get(server.port, "/metrics", timeout=5).decode())

    return drive(server, N, 3, 60, scrape=count if scrape else None,
                 kill_every=0.3 if kill else None, seed=2,
                 hold_last_for_kills=2 if kill else 0)


def _normal(text):
    """What must not differ between the two modes: per family its name,
    type and help; per sample its name and labels, and the value of every
    counter and count (durations differ from run to run: a bucket's or a
    sum's value is not compared)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        samples = []
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            timed = s.name.endswith(("_bucket", "_sum"))
            samples.append((s.name, tuple(sorted(s.labels.items())),
                            None if timed else s.value))
        out[fam.name] = (fam.type, fam.documentation, sorted(samples))
    return out


def _run(framework, mode, tally_dir, tmp_path):
    server = Server(framework, mode, tally_dir, tmp_path)
    try:
        before = server.count()
        _drive(server)
        text = server.metrics()
    finally:
        server.stop()
    return before, server, text


def test_same_exposition_as_multiprocess_mode(framework, tally_dir,
                                              tmp_path):
    """Recycled workers, exact totals, and the exposition of the
    multiprocess mode, sample for sample."""
    b_t, s_t, text_t = _run(framework, "tally", tally_dir, tmp_path)
    b_m, s_m, text_m = _run(framework, "multiprocess", tally_dir, tmp_path)
    assert s_t.count(text_t) - b_t == N
    assert s_m.count(text_m) - b_m == N
    # Nothing went to the multiprocess directory with the back end.
    assert os.listdir(s_t.mpdir) == []
    assert os.listdir(s_m.mpdir) != []
    assert _normal(text_t) == _normal(text_m)


def test_workers_killed_never_go_backwards(framework, tally_dir, tmp_path):
    """Workers SIGKILLed and recycled while /metrics is scraped: the
    count never goes backwards, every request a client saw succeed is
    counted, and one whose worker was killed while serving it at most
    once."""
    server = Server(framework, "tally", tally_dir, tmp_path)
    try:
        before = server.count()
        failed, scrapes, kills = _drive(server, kill=True, scrape=True)
        final = server.count()
    finally:
        server.stop()
    assert kills >= 2
    assert len(scrapes) >= 3
    assert scrapes == sorted(scrapes), "the count went backwards"
    # Counted after the response (starlette): each kill may take the
    # count of the requests its worker had answered (3 clients at most).
    lost = 0 if framework == "flask" else 3 * kills
    assert N - lost <= final - before <= N + failed, \
        (final, before, failed, kills)
    # The values were in the zone, not in the multiprocess directory, and
    # stay there after the server is gone.
    assert os.listdir(server.mpdir) == []
    res = tally.read(dir=tally_dir, zone=f"fw-{framework}")
    assert [s.value for f in res.families for s in f.samples
            if s.name == server.sample and s.labels == server.labels] == \
        [final]


def test_default_registry_of_a_worker(framework, tally_dir, tmp_path):
    """Without PROMETHEUS_MULTIPROC_DIR the frameworks serve /metrics
    from prometheus_client's default registry, in whichever worker gets
    the scrape: on tally it shows every worker's requests too."""
    server = Server(framework, "tally", tally_dir, tmp_path,
                    multiproc_dir=False)
    try:
        before = server.count()
        _drive(server)
        # Several scrapes: different workers answer them.
        counts = {server.count() for _ in range(6)}
    finally:
        server.stop()
    # The scrape requests themselves are counted under /metrics, not /.
    assert counts == {before + N}, (counts, before)
