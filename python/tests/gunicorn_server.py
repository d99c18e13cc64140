"""A real gunicorn for the tests: started on a free loopback port in its
own session, ready once a path answers, stopped (with every worker it
left) by stop().  test_gunicorn, test_deploy and test_frameworks each
run their app on it."""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time

from conftest import HERE

GUNICORN = os.path.join(os.path.dirname(sys.executable), "gunicorn")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        self.port = free_port()
        self.proc = subprocess.Popen(
            [GUNICORN, *args, "--bind", f"127.0.0.1:{self.port}",
             "--timeout", "30", "--chdir", HERE, app],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
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
