"""Exact totals: N threads x R increments, multiprocessing (fork and
spawn) and unrelated processes, with no lock in Python."""
from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import threading

import pytest

import tally_metrics as tally
from conftest import child_env, run_py, value_of, segment_names

THREADS, R = 4, 50_000


def test_threads_exact(uniq):
    c = tally.Counter(uniq, "doc", ["t"])
    plain = tally.Counter(uniq + "_p", "doc")
    h = tally.Histogram(uniq + "_h", "doc", buckets=[1, 2])
    g = tally.Gauge(uniq + "_g", "doc")
    barrier = threading.Barrier(THREADS)

    def work():
        child = c.labels("x")
        barrier.wait()
        for _ in range(R):
            child.inc()
            plain.inc(0.5)
            h.observe(1.5)
            g.inc()
            c.labels("y").inc(2)

    ts = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    fam = tally.read().families
    n = THREADS * R
    assert value_of(fam, uniq + "_total", {"t": "x"}) == n
    assert value_of(fam, uniq + "_total", {"t": "y"}) == 2 * n
    assert value_of(fam, uniq + "_p_total") == n / 2
    assert value_of(fam, uniq + "_h_count") == n
    assert value_of(fam, uniq + "_h_sum") == 1.5 * n
    assert value_of(fam, uniq + "_g") == n


def _fork_worker(name, r):
    # The metric objects were made by the parent before fork.
    c = _FORKED[name]
    for _ in range(r):
        c.labels("w").inc()


_FORKED = {}


def test_multiprocessing_fork_exact(uniq):
    _FORKED[uniq] = tally.Counter(uniq, "doc", ["k"])
    _FORKED[uniq].labels("w").inc()          # a child the parent knows
    ctx = mp.get_context("fork")
    ps = [ctx.Process(target=_fork_worker, args=(uniq, R)) for _ in range(4)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(60)
        assert p.exitcode == 0
    assert value_of(tally.read().families, uniq + "_total",
                    {"k": "w"}) == 4 * R + 1


def _spawn_worker(name, r):
    import tally_metrics as t
    c = t.Counter(name, "doc", ["k"])
    for _ in range(r):
        c.labels("w").inc()
    t.Histogram(name + "_h", "doc").observe(0.1)


def test_multiprocessing_spawn_exact(uniq, tally_dir):
    # Spawned children get their own default zone (same process name) in
    # tally_dir; readers sum the zone's segments, dead ones included.
    old = os.environ["TALLY_DIR"]
    os.environ["TALLY_DIR"] = tally_dir
    os.environ["TALLY_KEEP"] = "1"
    os.environ["TALLY_PYTEST_CHILD"] = "1"
    try:
        ctx = mp.get_context("spawn")
        ps = [ctx.Process(target=_spawn_worker, args=(uniq, 20_000))
              for _ in range(3)]
        for p in ps:
            p.start()
        for p in ps:
            p.join(120)
            assert p.exitcode == 0
    finally:
        os.environ["TALLY_DIR"] = old
        del os.environ["TALLY_KEEP"]
        del os.environ["TALLY_PYTEST_CHILD"]
    res = tally.read(dir=tally_dir, all_zones=True)
    assert res.segments == 3
    assert value_of(res.families, uniq + "_total", {"k": "w"}) == 60_000
    assert value_of(res.families, uniq + "_h_count") == 3


CHILD = """
import tally_metrics as tally, sys
name, r = sys.argv[1] if len(sys.argv) > 1 else {name!r}, {r}
c = tally.Counter(name, "doc", ["k"])
h = tally.Histogram(name + "_h", "doc", buckets=[1])
for _ in range(r):
    c.labels("a").inc()
    h.observe(0.5)
print(tally.REGISTRY.zone.path)
"""


def _children(uniq, env, n, r):
    ps = [subprocess.Popen([sys.executable, "-c",
                            CHILD.format(name=uniq, r=r)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True) for _ in range(n)]
    paths = []
    for p in ps:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        paths.append(out.strip())
    return paths


def test_unrelated_processes_summed_by_reader(uniq, tally_dir):
    """Without a shared zone: one segment each (kept with TALLY_KEEP=1),
    summed by the reader."""
    paths = _children(uniq, child_env(tally_dir, TALLY_KEEP=1), 4, 10_000)
    assert len(set(paths)) == 4
    res = tally.read(dir=tally_dir, all_zones=True)
    assert value_of(res.families, uniq + "_total", {"k": "a"}) == 40_000
    assert value_of(res.families, uniq + "_h_bucket",
                    {"le": "1.0"}) == 40_000


def test_unrelated_processes_share_a_zone(uniq, tally_dir):
    """TALLY_ZONE: every process adds into the same series of one file,
    and the counts of exited processes stay."""
    env = child_env(tally_dir, TALLY_ZONE="web")
    paths = _children(uniq, env, 4, 10_000)
    assert set(paths) == {os.path.join(tally_dir, "web.tally")}
    assert segment_names(tally_dir) == ["web.tally"]
    res = tally.read(dir=tally_dir, zone="web")
    assert res.segments == 1
    assert value_of(res.families, uniq + "_total", {"k": "a"}) == 40_000
    # A later process carries on from there.
    _children(uniq, env, 1, 5)
    res = tally.read(dir=tally_dir, zone="web")
    assert value_of(res.families, uniq + "_total", {"k": "a"}) == 40_005


def test_zone_function_picks_a_shared_zone(uniq, tally_dir):
    code = f"""
import tally_metrics as tally
reg = tally.zone("jobs")
c = tally.Counter({uniq!r}, "doc", registry=reg)
c.inc(3)
print(reg.zone.path, tally.generate_latest(reg).decode().count("{uniq}_total 3\\n"))
"""
    env = child_env(tally_dir)
    for _ in range(2):
        out = run_py(code, env)
    path, found = out.split()
    assert path == os.path.join(tally_dir, "jobs.tally")
    assert found == "0"  # the second process saw 6, not 3
    res = tally.read(dir=tally_dir, zone="jobs")
    assert value_of(res.families, uniq + "_total") == 6.0
