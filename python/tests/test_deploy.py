"""A deploy that changes a metric's definition, under a real gunicorn:
version 2 of the app (gunicorn_deploy_app.py) changes a help text, or a
type, and comes up either as a restart while the zone of version 1 is
still kept (TALLY_RETAIN) or as a reload (HUP: new workers start while
the old ones drain) under load.  Every worker boots, the unchanged
counter counts every request exactly, and /metrics (parsed by
prometheus_client all along) shows each metric once, as version 2
defines it."""
from __future__ import annotations

import http.client
import os
import signal
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

import tally_metrics as tally
from conftest import child_env
from gunicorn_server import GUNICORN, Gunicorn, get

pytestmark = pytest.mark.skipif(not os.path.exists(GUNICORN),
                                reason="gunicorn is not installed")

ZONE = "deploy-test"
BEFORE = 300   # requests served by version 1
AFTER = 300    # requests served once version 2 runs


class Server(Gunicorn):
    """gunicorn with 2 workers on loopback, bounded in time."""

    def __init__(self, tally_dir, version_file, change):
        self.gate = version_file + ".gate"
        env = child_env(tally_dir, TALLY_ZONE=ZONE,
                        DEPLOY_VERSION_FILE=version_file,
                        DEPLOY_CHANGE=change, DEPLOY_GATE=self.gate)
        super().__init__("gunicorn_deploy_app:app",
                         ["--workers", "2", "--worker-class", "sync",
                          "--graceful-timeout", "25"], env, "/version")

    def versions(self):
        """The version each answering worker runs, a few asks."""
        seen = set()
        for _ in range(8):
            try:
                seen.add(get(self.port, "/version").decode().split()[0])
            except (OSError, http.client.HTTPException):
                pass
        return seen

    def scrape(self):
        """The parsed families of /metrics, by name."""
        text = get(self.port, "/metrics").decode()
        fams = {}
        for f in text_string_to_metric_families(text):
            assert f.name not in fams, f"{f.name} exported twice:\n{text}"
            fams[f.name] = f
        return fams


def _requests(server, n):
    """Serve @n requests, one client; returns the failures (none
    expected)."""
    failed = 0
    for _ in range(n):
        try:
            get(server.port, "/")
        except (OSError, http.client.HTTPException):
            failed += 1
    return failed


def _value(fams, family, sample, labels=None):
    for s in fams[family].samples:
        if s.name == sample and (labels is None or s.labels == labels):
            return s.value
    raise AssertionError(f"no {sample} in {family}")


def _check_v2(fams, change, total, slow=0):
    assert _value(fams, "deploy_requests", "deploy_requests_total",
                  {"path": "/"}) == total
    hits = fams["deploy_hits"]
    assert hits.type == "counter"
    if change == "help":
        assert hits.documentation == "Hits, as version 2 counts them."
        # A help text is no new series: the count goes on.
        assert _value(fams, "deploy_hits", "deploy_hits_total") == \
            total + slow
        assert fams["deploy_size"].type == "counter"
    else:
        assert hits.documentation == "Hits."
        size = fams["deploy_size"]
        assert size.type == "gauge", size
        assert [s.value for s in size.samples] == [2.0]


def _version_file(tmp_path, v):
    p = tmp_path / "version"
    p.write_text(str(v))
    return str(p)


@pytest.mark.parametrize("change", ["help", "type"])
def test_restart_within_retention_with_changed_definition(
        tally_dir, tmp_path, change):
    vf = _version_file(tmp_path, 1)
    server = Server(tally_dir, vf, change)
    try:
        assert _requests(server, BEFORE) == 0
    finally:
        server.stop()
    # The zone is kept for TALLY_RETAIN; version 2 starts on it.
    assert os.path.exists(os.path.join(tally_dir, ZONE + ".tally"))
    _version_file(tmp_path, 2)
    server = Server(tally_dir, vf, change)
    try:
        assert server.versions() == {"2"}
        assert _requests(server, AFTER) == 0
        _check_v2(server.scrape(), change, BEFORE + AFTER)
    finally:
        err = server.stop()
    assert "Worker failed to boot" not in err, err
    # A reader elsewhere, after the server is gone, sees the same.
    res = tally.read(dir=tally_dir, zone=ZONE)
    assert [f.type for f in res.families if f.name == "deploy_size"] == \
        ["gauge" if change == "type" else "counter"]


@pytest.mark.parametrize("change", ["help", "type"])
def test_hup_reload_under_load_with_changed_definition(
        tally_dir, tmp_path, change):
    vf = _version_file(tmp_path, 1)
    server = Server(tally_dir, vf, change)
    ok = [0]
    failed = [0]
    errors = []
    stop = threading.Event()
    lock = threading.Lock()
    deadline = time.monotonic() + 120

    def client():
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                get(server.port, "/")
                with lock:
                    ok[0] += 1
            except (OSError, http.client.HTTPException):
                with lock:
                    failed[0] += 1

    def scraper():
        # Every scrape must parse, with each metric once, during the
        # reload too.
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                server.scrape()
            except (OSError, http.client.HTTPException):
                pass
            except Exception as e:
                errors.append(e)
            time.sleep(0.05)

    slow = []

    def slow_request():
        # Taken by an old worker, which answers once version 2 runs.
        try:
            slow.append(get(server.port, "/slow", timeout=60).decode())
        except (OSError, http.client.HTTPException) as e:
            slow.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(2)]
    threads.append(threading.Thread(target=scraper))
    slow_thread = threading.Thread(target=slow_request)
    try:
        old = set(server.workers())
        for t in threads:
            t.start()
        while ok[0] < BEFORE and time.monotonic() < deadline:
            time.sleep(0.01)
        slow_thread.start()
        time.sleep(0.2)
        _version_file(tmp_path, 2)
        server.proc.send_signal(signal.SIGHUP)
        # The old workers drain and go; new ones serve version 2.
        while time.monotonic() < deadline:
            if server.versions() == {"2"}:
                break
            assert server.proc.poll() is None, "gunicorn halted"
            time.sleep(0.05)
        # Version 2 has redefined its metrics: the old worker holding
        # /slow counts now, then drains and goes.
        open(server.gate, "w").close()
        slow_thread.join(60)
        assert slow and slow[0].startswith("1 "), slow
        while time.monotonic() < deadline:
            now = set(server.workers())
            if now and not (now & old):
                break
            time.sleep(0.05)
        mark = ok[0]
        while ok[0] < mark + AFTER and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert server.proc.poll() is None, "gunicorn halted"
        assert server.versions() == {"2"}
        assert ok[0] >= mark + AFTER, "the load did not finish in time"
        fams = server.scrape()
        # Every request a client saw served was counted, exactly when
        # none failed; so was the old worker's, made after the
        # redefinition into a new child of an unchanged metric.
        assert failed[0] == 0
        _check_v2(fams, change, ok[0], slow=1)
        assert _value(fams, "deploy_requests", "deploy_requests_total",
                      {"path": "/slow"}) == 1
    finally:
        stop.set()
        err = server.stop()
    assert "Worker failed to boot" not in err, err
