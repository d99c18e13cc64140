"""A real gunicorn (4 sync workers, max_requests=50) serving an app that
counts with tally, driven with 2,000 requests while /metrics is scraped
through TallyCollector and prometheus_client's parser."""
from __future__ import annotations

import http.client
import os
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

import tally_metrics as tally
from conftest import child_env
from gunicorn_server import GUNICORN, Gunicorn, drive, get

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
    """Send requests until N_REQUESTS succeeded; scrape all along; with
    @kill_workers, a worker SIGKILLed every 0.25 s.  Returns (failed
    requests, scraped values, final value, kills)."""
    failed, scrapes, kills = drive(
        server, N_REQUESTS, CLIENTS, 150, scrape=lambda: server.scrape()[0],
        kill_every=0.25 if kill_workers else None, seed=1)
    # The final value, read once the last responses are out.
    final = None
    for _ in range(50):
        try:
            final = server.scrape()[0]
            break
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
    return failed, scrapes, final, kills


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
