"""Gauges in pre-fork servers: prometheus_client's multiprocess modes,
from processes that exited and processes that still run."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import tally_metrics as tally
from conftest import child_env

MODES = ["all", "liveall", "sum", "livesum", "max", "livemax", "min",
         "livemin", "mostrecent", "livemostrecent"]

CHILD = """
import sys
import tally_metrics as tally
name, v, stay = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1"
for mode in {modes!r}:
    tally.Gauge(name + "_" + mode, "doc", ["k"],
                multiprocess_mode=mode).labels("x").set(v)
tally.Gauge(name + "_shared", "doc").inc(v)
print("ready", flush=True)
if stay:
    sys.stdin.read()
"""


def _env(tally_dir):
    return child_env(tally_dir, TALLY_ZONE="modes"), "modes"


def test_modes_combine_live_and_dead(uniq, tally_dir):
    env, zone = _env(tally_dir)
    procs = []
    # Set in this order: C (4, stays), B (2, stays), A (1, exits).
    for v, stay in ((4, 1), (2, 1), (1, 0)):
        p = subprocess.Popen([sys.executable, "-c", CHILD.format(modes=MODES),
                              uniq, str(v), str(stay)], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        assert p.stdout.readline().strip() == "ready"
        procs.append(p)
        time.sleep(0.01)
    c, b, a = procs
    try:
        a.wait(30)
        res = tally.read(dir=tally_dir, zone=zone)
        got = {}
        for f in res.families:
            for s in f.samples:
                if s.name.startswith(uniq):
                    key = s.name[len(uniq) + 1:]
                    got.setdefault(key, []).append(
                        (s.labels.get("pid"), s.value))
        pids = {str(c.pid): 4.0, str(b.pid): 2.0, str(a.pid): 1.0}
        assert dict(got["all"]) == pids
        assert dict(got["liveall"]) == {str(c.pid): 4.0, str(b.pid): 2.0}
        assert got["sum"] == [(None, 7.0)]
        assert got["livesum"] == [(None, 6.0)]
        assert got["max"] == [(None, 4.0)] == got["livemax"]
        assert got["min"] == [(None, 1.0)]
        assert got["livemin"] == [(None, 2.0)]
        assert got["mostrecent"] == [(None, 1.0)]
        assert got["livemostrecent"] == [(None, 2.0)]
        assert got["shared"] == [(None, 7.0)]
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(30)


def test_fork_child_gets_its_own_series(uniq):
    g = tally.Gauge(uniq, "doc", multiprocess_mode="all")
    lab = tally.Gauge(uniq + "_l", "doc", ["k"], multiprocess_mode="max")
    g.set(5)
    child_of_label = lab.labels("a")
    child_of_label.set(3)
    pid = os.fork()
    if pid == 0:
        try:
            g.set(7)
            child_of_label.set(9)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    samples = {}
    for f in tally.read().families:
        for s in f.samples:
            if s.name == uniq:
                samples[s.labels["pid"]] = s.value
            if s.name == uniq + "_l":
                samples["max"] = s.value
    assert samples == {str(os.getpid()): 5.0, str(pid): 7.0, "max": 9.0}
    assert g._get() == 5.0


def test_liveness_reads_the_same_from_another_pid_namespace(uniq,
                                                             tally_dir):
    """A worker that runs as pid 1 of a PID namespace of its own (a
    container): here pid 1 is another process, so no pid could tell
    whether it runs; its lock on the zone's file does (format 2.6)."""
    if os.geteuid() != 0:
        import pytest
        pytest.skip("PID namespaces need root here")
    env, zone = _env(tally_dir)
    here = subprocess.Popen([sys.executable, "-c", CHILD.format(modes=MODES),
                             uniq, "2", "1"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    inner = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
         sys.executable, "-c", CHILD.format(modes=MODES), uniq, "5", "1"],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert here.stdout.readline().strip() == "ready"
        assert inner.stdout.readline().strip() == "ready"

        def livesum():
            for f in tally.read(dir=tally_dir, zone=zone).families:
                for s in f.samples:
                    if s.name == uniq + "_livesum":
                        return s.value
            return None
        assert livesum() == 7.0
        inner.kill()  # unshare --kill-child: its pid 1 goes with it
        inner.wait(30)
        for _ in range(300):
            if livesum() == 2.0:
                break
            time.sleep(0.01)
        assert livesum() == 2.0
    finally:
        for p in (here, inner):
            if p.poll() is None:
                p.stdin.close()
                p.kill()
            p.wait(30)
