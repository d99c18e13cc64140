"""Under the switch (TALLY_PROMETHEUS_CLIENT): a forked child is not
stuck on a lock its parent's thread held, exemplars are not dropped
without a word, and no per-process collector makes a counter go
backwards between scrapes answered by different workers."""
from __future__ import annotations

import json
import textwrap

from conftest import child_env, run_py

SWITCH = "import tally_metrics as tally; tally.use_in_prometheus_client()\n"


def test_backend_lock_renewed_in_forked_child(tally_dir):
    # A thread holds the back end's lock while the main thread forks: the
    # child must be able to take it (and make metrics) all the same.
    out = run_py(SWITCH + textwrap.dedent('''
        import os, threading
        from tally_metrics import _backend
        from prometheus_client import Counter
        held, release = threading.Event(), threading.Event()
        def hold():
            with _backend._lock:
                held.set()
                release.wait()
        t = threading.Thread(target=hold)
        t.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            if not _backend._lock.acquire(timeout=2):
                os._exit(3)
            _backend._lock.release()
            Counter("forked_total", "Made after fork.").inc()
            os._exit(0)
        release.set()
        t.join()
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    '''), child_env(tally_dir, TALLY_ZONE="forklock"))
    assert out.strip() == "0"


def test_exemplars_warn_once(tally_dir):
    out = run_py(SWITCH + textwrap.dedent('''
        import json, warnings
        from prometheus_client import Counter, Histogram
        c = Counter("ex_total", "With exemplars.")
        h = Histogram("ex_seconds", "With exemplars.", buckets=[1])
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            c.inc(exemplar={"trace_id": "a"})
            c.inc(2, exemplar={"trace_id": "b"})
            h.observe(0.5, exemplar={"trace_id": "c"})
            c.inc()
        print(json.dumps(dict(
            warnings=[str(w.message) for w in got],
            categories=[w.category.__name__ for w in got],
            count=c._value.get(), sum=h._sum.get())))
    '''), child_env(tally_dir, TALLY_ZONE="exemplars"))
    res = json.loads(out)
    assert len(res["warnings"]) == 1, res
    assert "exemplars are not kept" in res["warnings"][0]
    assert res["categories"] == ["RuntimeWarning"]
    # The values are counted all the same.
    assert res["count"] == 4.0 and res["sum"] == 0.5


PER_PROCESS = ("process_", "python_gc_", "python_info")


def test_per_process_collectors_left_out(tally_dir):
    code = textwrap.dedent('''
        {switch}
        from prometheus_client import Counter, generate_latest
        Counter("kept_total", "Kept.").inc()
        print(generate_latest().decode())
    ''')
    env = child_env(tally_dir, TALLY_ZONE="perprocess")
    on = run_py(code.format(switch=SWITCH), env).splitlines()
    names = [ln.split("{")[0].split(" ")[0] for ln in on
             if ln and not ln.startswith("#")]
    assert "kept_total" in names
    assert not [n for n in names if n.startswith(PER_PROCESS)], names
    # Without the switch prometheus_client shows them (so the check
    # above is not vacuous on this host).
    off = run_py(code.format(switch=""), env)
    assert "process_cpu_seconds_total" in off
    assert "python_gc_objects_collected_total" in off


def test_updates_call_tally_directly(tally_dir):
    # A value's inc() is tally's C method itself (no Python frame of the
    # switch in between), and the counts stay exact: a histogram's sum
    # value observes once, its buckets' inc() adds nothing more.
    out = run_py(SWITCH + textwrap.dedent('''
        import json
        from prometheus_client import Counter, Gauge, Histogram, Summary
        c = Counter("direct_total", "Direct.", ["m"])
        g = Gauge("direct_inflight", "Direct.", multiprocess_mode="livesum")
        h = Histogram("direct_seconds", "Direct.", buckets=[1, 2])
        s = Summary("direct_bytes", "Direct.")
        for _ in range(1000):
            c.labels("a").inc()
            g.inc(2)
            g.dec()
            h.observe(0.5)
            h.observe(1.5)
            h.observe(9)
            s.observe(3)
        print(json.dumps(dict(
            kinds=[type(v.inc).__name__ for v in
                   (c.labels("a")._value, g._value, h._sum, s._sum)],
            c=c.labels("a")._value.get(), g=g._value.get(),
            buckets=[b.get() for b in h._buckets], hsum=h._sum.get(),
            scount=s._count.get(), ssum=s._sum.get())))
    '''), child_env(tally_dir, TALLY_ZONE="direct"))
    res = json.loads(out)
    assert res["kinds"] == ["builtin_function_or_method"] * 4, res
    assert res["c"] == 1000.0 and res["g"] == 1000.0
    # Per bucket, not cumulative, as prometheus_client keeps them.
    assert res["buckets"] == [1000.0, 1000.0, 1000.0]
    assert res["hsum"] == 11000.0
    assert res["scount"] == 1000.0 and res["ssum"] == 3000.0
