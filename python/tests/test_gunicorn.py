"""A real gunicorn (4 sync workers, max_requests=50) serving an app that
counts with tally, driven with 2,000 requests while /metrics is scraped
through TallyCollector and prometheus_client's parser."""
from __future__ import annotations

import http.client
import os
import random
import signal
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

import tally_metrics as tally
from conftest import child_env
from gunicorn_server import GUNICORN, Gunicorn, get

N_REQUESTS = 2000
CLIENTS = 4

pytestmark = pytest.mark.skipif(not os.path.exists(GUNICORN),
                                reason="gunicorn is not installed")


class Server(Gunicorn):
    def __init__(self, tally_dir):
        super().__init__(
            "gunicorn_app:app",
            ["--workers", "4", "--worker-class", "sync",
             "--max-requests", "50", "--graceful-timeout", "5"],
            child_env(tally_dir, TALLY_ZONE="gunicorn-test"), "/pid")

    def scrape(self):
        text = get(self.port, "/metrics").decode()
        for fam in text_string_to_metric_families(text):
            if fam.name == "app_requests":
                for s in fam.samples:
                    if s.name == "app_requests_total" and \
                            s.labels == {"path": "/"}:
                        return s.value, text
        return 0.0, text


def _drive(server, kill_workers):
    """Send requests until N_REQUESTS succeeded; scrape all along.
    Returns (failed requests, scraped values, final value)."""
    ok = [0]
    failed = [0]
    lock = threading.Lock()
    done = threading.Event()
    scrapes = []
    errors = []
    deadline = time.monotonic() + 150

    pending = [0]

    def client():
        # Each request takes a ticket first, so that exactly N_REQUESTS
        # succeed (a failed one gives its ticket back).
        while not done.is_set() and time.monotonic() < deadline:
            with lock:
                if ok[0] + pending[0] >= N_REQUESTS:
                    if ok[0] >= N_REQUESTS:
                        return
                    wait = True
                else:
                    pending[0] += 1
                    wait = False
            if wait:
                time.sleep(0.01)
                continue
            try:
                get(server.port, "/")
                success = True
            except (OSError, http.client.HTTPException):
                success = False
            with lock:
                pending[0] -= 1
                if success:
                    ok[0] += 1
                    if ok[0] >= N_REQUESTS:
                        done.set()
                else:
                    failed[0] += 1

    def scraper():
        while not done.is_set() and time.monotonic() < deadline:
            try:
                scrapes.append(server.scrape()[0])
            except (OSError, http.client.HTTPException):
                pass  # a worker killed while scraping
            except Exception as e:  # a parse error must fail the test
                errors.append(e)
            time.sleep(0.05)

    def killer():
        rng = random.Random(1)
        while not done.is_set() and time.monotonic() < deadline:
            time.sleep(0.25)
            ws = server.workers()
            if ws:
                try:
                    os.kill(rng.choice(ws), signal.SIGKILL)
                    kills[0] += 1
                except ProcessLookupError:
                    pass

    kills = [0]
    ts = [threading.Thread(target=client) for _ in range(CLIENTS)]
    ts.append(threading.Thread(target=scraper))
    if kill_workers:
        ts.append(threading.Thread(target=killer))
    for t in ts:
        t.start()
    for t in ts:
        t.join(170)
    done.set()
    assert not errors, errors
    assert ok[0] == N_REQUESTS, f"only {ok[0]} requests succeeded in time"
    # The final value, read once the last responses are out.
    final = None
    for _ in range(50):
        try:
            final = server.scrape()[0]
            break
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
    return failed[0], scrapes, final, kills[0]


def test_gunicorn_exact_count_and_monotonic(tally_dir):
    server = Server(tally_dir)
    try:
        failed, scrapes, final, _ = _drive(server, kill_workers=False)
    finally:
        server.stop()
    assert failed == 0
    assert len(scrapes) >= 5
    assert scrapes == sorted(scrapes), "the counter went backwards"
    assert final == N_REQUESTS
    # After the server is gone, a reader elsewhere sees the same.
    res = tally.read(dir=tally_dir, zone="gunicorn-test")
    got = [s.value for f in res.families for s in f.samples
           if s.name == "app_requests_total"]
    assert got == [N_REQUESTS]
    assert [s.value for f in res.families for s in f.samples
            if s.name == "app_seconds_count"] == [N_REQUESTS]


def test_gunicorn_workers_killed(tally_dir):
    """Workers are SIGKILLed during the run.  Rule: every request a client
    saw succeed was counted, and a request whose worker was killed while
    serving it was counted at most once: N_REQUESTS <= final <=
    N_REQUESTS + failed requests.  The counter never goes backwards."""
    server = Server(tally_dir)
    try:
        failed, scrapes, final, kills = _drive(server, kill_workers=True)
    finally:
        server.stop()
    print(f"killed {kills} workers, {failed} requests failed, "
          f"final {final}, {len(scrapes)} scrapes")
    assert kills >= 3
    assert scrapes == sorted(scrapes), "the counter went backwards"
    assert N_REQUESTS <= final <= N_REQUESTS + failed, (final, failed)
