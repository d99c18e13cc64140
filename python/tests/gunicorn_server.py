"""A real gunicorn for the tests: started on a loopback port of its own
(a listening socket this module binds to port 0 and hands over, so that
no other program can take the port between its choice and its use) in
its own session, ready once a path answers, stopped (with every worker it
left) by stop().  test_gunicorn, test_deploy and test_frameworks each
run their app on it; test_gunicorn and test_frameworks drive it with
drive()."""
from __future__ import annotations

import http.client
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

from conftest import HERE

GUNICORN = os.path.join(os.path.dirname(sys.executable), "gunicorn")


def listener():
    """A socket listening on a loopback port the kernel chose: a server
    given it (gunicorn's --bind fd://N) has the port from the start."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        s.listen(128)
    except OSError:
        s.close()
        raise
    return s


def get(port, path, timeout=10.0):
    """The body of GET @path; OSError unless the answer is 200."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise OSError(f"HTTP {r.status}")
        return body
    finally:
        c.close()


def workers(master):
    """The pids of gunicorn master @master's workers."""
    try:
        with open(f"/proc/{master}/task/{master}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class Gunicorn:
    """gunicorn serving @app (a module:variable of this folder) with the
    options @args, on 127.0.0.1:<port>; returns once @ready answers 200,
    or raises with gunicorn's stderr after 30 s or its exit."""

    def __init__(self, app, args, env, ready):
        with listener() as sock:
            self.port = sock.getsockname()[1]
            self.proc = subprocess.Popen(
                [GUNICORN, *args, "--bind", f"fd://{sock.fileno()}",
                 "--timeout", "30", "--chdir", HERE, app],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True, pass_fds=(sock.fileno(),))
        deadline = time.monotonic() + 30
        while True:
            try:
                get(self.port, ready, timeout=2)
                return
            except OSError:
                if self.proc.poll() is not None or \
                        time.monotonic() > deadline:
                    raise RuntimeError("gunicorn did not start: " +
                                       self.stop())
                time.sleep(0.1)

    def workers(self):
        return workers(self.proc.pid)

    def stop(self):
        """SIGTERM, then SIGKILL to the session (workers gunicorn left
        behind included); returns what gunicorn wrote to stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait(5)
        err = ""
        if self.proc.stderr:
            err = self.proc.stderr.read().decode(errors="replace")
            self.proc.stderr.close()
        return err


def drive(server, n, clients, seconds, scrape=None, kill_every=None,
          seed=0, hold_last_for_kills=0):
    """Exactly @n successful GET / to @server from @clients threads, within
    @seconds: each request takes a ticket first, and a failed one gives its
    ticket back and is sent again.  With @scrape (a function reading a
    value from /metrics), its values are collected all along; a scrape cut
    by a killed worker is passed over, any other error fails the run.  With
    @kill_every, a random worker (of a generator seeded with @seed) is
    SIGKILLed every @kill_every seconds; the last request waits until
    @hold_last_for_kills kills were made, so that a fast run still has its
    workers killed.  Returns (failed requests, scraped values, kills)."""
    lock = threading.Lock()
    state = {"ok": 0, "pending": 0, "failed": 0, "kills": 0}
    done = threading.Event()
    scrapes, errors = [], []
    deadline = time.monotonic() + seconds

    def client():
        while not done.is_set() and time.monotonic() < deadline:
            with lock:
                if state["ok"] + state["pending"] >= n:
                    if state["ok"] >= n:
                        return
                    wait = True
                elif (state["kills"] < hold_last_for_kills and
                      state["ok"] + state["pending"] >= n - 1):
                    wait = True
                else:
                    state["pending"] += 1
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
                state["pending"] -= 1
                if success:
                    state["ok"] += 1
                    if state["ok"] >= n:
                        done.set()
                else:
                    state["failed"] += 1

    def scraper():
        while not done.is_set() and time.monotonic() < deadline:
            try:
                scrapes.append(scrape())
            except (OSError, http.client.HTTPException):
                pass  # a worker killed while scraping
            except Exception as e:  # a parse error fails the test
                errors.append(e)
            time.sleep(0.05)

    def killer():
        rng = random.Random(seed)
        while not done.is_set() and time.monotonic() < deadline:
            time.sleep(kill_every)
            ws = server.workers()
            if ws:
                try:
                    os.kill(rng.choice(ws), signal.SIGKILL)
                    with lock:
                        state["kills"] += 1
                except ProcessLookupError:
                    pass

    ts = [threading.Thread(target=client) for _ in range(clients)]
    if scrape:
        ts.append(threading.Thread(target=scraper))
    if kill_every:
        ts.append(threading.Thread(target=killer))
    for t in ts:
        t.start()
    for t in ts:
        t.join(seconds + 30)
    done.set()
    assert not errors, errors
    assert state["ok"] == n, f"only {state['ok']} requests succeeded in time"
    return state["failed"], scrapes, state["kills"]
