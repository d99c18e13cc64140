#!/usr/bin/env python3
"""tally's Python package against prometheus_client, in one venv and run.

Update costs (timeit, median of --repeat runs, ns per call):
  inc                 Counter.inc()
  child inc           c = Counter(...).labels("a") once; c.inc()
  labels + inc        Counter(...).labels("a").inc() each time
  observe             Histogram.observe(0.3)
for tally, prometheus_client in one process, prometheus_client's
multiprocess mode (PROMETHEUS_MULTIPROC_DIR, measured in a child process,
since prometheus_client picks its mode at import), and prometheus_client
on the tally back end (TALLY_PROMETHEUS_CLIENT=1, in a child process),
with the speed-up of the last against the first two, and
prometheus_client over a value class that does nothing (its own code:
what no value class under it can save).

Scrape costs (median ms): prometheus_client's MultiProcessCollector with
the files of 10, 100 and 1,000 dead workers (each wrote --series series),
against tally.generate_latest() of a shared zone (TALLY_ZONE) holding
10,000 series after 10, 100 and 1,000 worker processes came and went,
and prometheus_client on the tally back end (its MultiProcessCollector
reading the zone) after as many workers.

Each update cost is measured in --rounds rounds, every mode once per
round, one after the other (so that a burst of load elsewhere on the
machine falls on every mode alike); the median of the rounds is shown,
and the lowest and highest ratio of the rounds.

    python bench.py            # about a minute
    python bench.py --micro    # update costs only
    python bench.py --json     # one JSON object
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

TARGETS = {"inc": 60, "child inc": 60, "labels + inc": 250, "observe": 80}
WORKERS = (10, 100, 1000)


def micro(mod, number, repeat):
    """ns per call of each operation with module @mod's metrics."""
    c = mod.Counter("bench_requests", "Requests.", registry=None)
    lc = mod.Counter("bench_by_method", "Requests.", ["method"],
                     registry=None)
    h = mod.Histogram("bench_seconds", "Latency.", registry=None)
    child = lc.labels("a")
    stmts = {
        "inc": ("c.inc()", {"c": c}),
        "child inc": ("child.inc()", {"child": child}),
        "labels + inc": ("lc.labels('a').inc()", {"lc": lc}),
        "observe": ("h.observe(0.3)", {"h": h}),
    }
    out = {}
    for name, (stmt, g) in stmts.items():
        runs = timeit.repeat(stmt, globals=g, number=number, repeat=repeat)
        out[name] = statistics.median(runs) / number * 1e9
    return out


def _in_child(flag, args, timeout, backend=False):
    """Run this script with @flag in a process of its own, with an empty
    PROMETHEUS_MULTIPROC_DIR (@backend: a private TALLY_DIR and the
    tally back end instead); returns the JSON it prints."""
    d = tempfile.mkdtemp(prefix="bench-prom-mp-")
    if backend:
        os.chmod(d, 0o700)
        env = dict(os.environ, TALLY_DIR=d, TALLY_ZONE="bench",
                   TALLY_PROMETHEUS_CLIENT="1")
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    else:
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=d)
    try:
        out = subprocess.run(
            [sys.executable, __file__, flag] + [str(a) for a in args],
            env=env, capture_output=True, text=True, check=True,
            timeout=timeout).stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return json.loads(out)


class _FloorValue:
    """A prometheus_client value whose inc() is a C call that does
    nothing (bool): prometheus_client's own code, the least any value
    class under it can cost."""

    def __init__(self, *args, **kwargs):
        self.inc = bool

    def set(self, value, timestamp=None):
        pass

    def set_exemplar(self, exemplar):
        pass

    def get(self):
        return 0.0


def _floor_micro_child(number, repeat):
    from prometheus_client import values
    values.ValueClass = _FloorValue
    import prometheus_client
    print(json.dumps(micro(prometheus_client, number, repeat)))


def floor_micro(number, repeat):
    """prometheus_client over a value that does nothing, in a process of
    its own."""
    return _in_child("--child-floor-micro", (number, repeat), 300)


def child_micro(number, repeat):
    """prometheus_client multiprocess mode, in a process of its own."""
    return _in_child("--child-micro", (number, repeat), 300)


def backend_micro(number, repeat):
    """prometheus_client on the tally back end, in a process of its own."""
    return _in_child("--child-micro", (number, repeat), 300, backend=True)


def backend_scrape(series, per_worker, repeat):
    """Scrape times of prometheus_client on the tally back end (its
    MultiProcessCollector reads the zone) after N workers came and
    went."""
    return _in_child("--child-backend-scrape", (series, per_worker, repeat),
                     600, backend=True)


def _backend_scrape_child(series, per_worker, repeat):
    from prometheus_client import CollectorRegistry, Counter, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector
    c = Counter("bench_requests", "Requests.", ["route"])
    for i in range(series):
        c.labels(f"/r{i}").inc()
    reg = CollectorRegistry()
    MultiProcessCollector(reg)
    print(json.dumps(_workers_come_and_go(
        c, series, per_worker, repeat, lambda: generate_latest(reg))))


def _workers_come_and_go(c, series, per_worker, repeat, generate):
    """Median times in ms of @repeat scrapes by @generate(), with no worker
    yet ("0") and after each N of WORKERS workers came and went (str(N)):
    each adds to @per_worker of the @series series of counter @c and exits
    (fork: the zone, or the multiprocess directory, is the shared one).
    Every scrape must show all @series series."""
    def scrape():
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            body = generate()
            times.append(time.perf_counter() - t)
        assert body.count(b"\nbench_requests_total{") == series
        return statistics.median(times) * 1e3

    out = {"0": scrape()}
    done = 0
    for n in WORKERS:
        while done < n:
            pid = os.fork()
            if pid == 0:
                try:
                    base = (done * per_worker) % series
                    for i in range(per_worker):
                        c.labels(f"/r{(base + i) % series}").inc()
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            done += 1
        out[str(n)] = scrape()
    return out


def prom_scrape(series, repeat):
    """MultiProcessCollector scrape times with the files of N dead
    workers, each of which wrote @series counter series."""
    return _in_child("--child-prom-scrape", (series, repeat), 600)


def _prom_scrape_child(series, repeat):
    from prometheus_client import CollectorRegistry, Counter, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector
    d = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    c = Counter("bench_requests", "Requests.", ["route"], registry=None)
    for i in range(series):
        c.labels(f"/r{i}").inc()
    src = os.path.join(d, f"counter_{os.getpid()}.db")
    have = 1
    out = {}
    for n in WORKERS:
        while have < n:  # the files dead workers leave, one per pid
            shutil.copyfile(src, os.path.join(d, f"counter_{10**7 + have}.db"))
            have += 1
        reg = CollectorRegistry()
        MultiProcessCollector(reg, path=d)
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            generate_latest(reg)
            times.append(time.perf_counter() - t)
        out[str(n)] = statistics.median(times) * 1e3
    print(json.dumps(out))


def tally_scrape(series, per_worker, repeat):
    d = tempfile.mkdtemp(prefix="bench-tally-")
    os.chmod(d, 0o700)
    env = dict(os.environ, TALLY_DIR=d, TALLY_ZONE="bench")
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child-tally-scrape", str(series),
             str(per_worker), str(repeat)], env=env, capture_output=True,
            text=True, check=True, timeout=600).stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return json.loads(out)


def _tally_scrape_child(series, per_worker, repeat):
    import tally_metrics as tally
    c = tally.Counter("bench_requests", "Requests.", ["route"])
    for i in range(series):
        c.labels(f"/r{i}").inc()
    out = _workers_come_and_go(c, series, per_worker, repeat,
                               tally.generate_latest)
    res = tally.read()
    out["segments"] = res.segments
    out["total"] = sum(s.value for f in res.families for s in f.samples)
    print(json.dumps(out))


def micro_rounds(number, repeat, rounds):
    """@rounds rounds of micro() in every mode, each round all modes one
    after the other: a list of {mode: {operation: ns}}."""
    d = tempfile.mkdtemp(prefix="bench-tally-micro-")
    os.chmod(d, 0o700)
    os.environ["TALLY_DIR"] = d
    out = []
    try:
        import prometheus_client
        import tally_metrics as tally
        for _ in range(rounds):
            out.append({
                "tally": micro(tally, number, repeat),
                "prometheus_client": micro(prometheus_client, number,
                                           repeat),
                "prometheus_client multiprocess": child_micro(number,
                                                              repeat),
                "prometheus_client on tally": backend_micro(number, repeat),
                "prometheus_client's own code": floor_micro(number, repeat),
            })
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return out


def _cpu():
    """The CPU's model name and the number of CPUs."""
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs"


def _print_micro(rows, ratios, ops, spread):
    import platform
    print(f"{'ns per call (median of rounds)':44s}" +
          "".join(f"{o:>14s}" for o in ops))
    for name, r in rows.items():
        print(f"{name:44s}" + "".join(f"{r[o]:14.1f}" for o in ops))
    for name, r in ratios.items():
        print(f"{name:44s}" + "".join(f"{r[o]:13.2f}x" for o in ops))
        each = [f"{spread[name][o][0]:.2f}-{spread[name][o][-1]:.2f}x"
                for o in ops]
        print(f"{'  lowest-highest of the rounds':44s}" +
              "".join(f"{e:>14s}" for e in each))
    print(f"(Python {sys.version.split()[0]}, {platform.machine()}, "
          f"{_cpu()})")


def main():
    if len(sys.argv) > 1 and sys.argv[1].startswith("--child"):
        what, args = sys.argv[1], [int(a) for a in sys.argv[2:]]
        if what == "--child-micro":
            import prometheus_client
            print(json.dumps(micro(prometheus_client, *args)))
        elif what == "--child-floor-micro":
            _floor_micro_child(*args)
        elif what == "--child-prom-scrape":
            _prom_scrape_child(*args)
        elif what == "--child-tally-scrape":
            _tally_scrape_child(*args)
        elif what == "--child-backend-scrape":
            _backend_scrape_child(*args)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--number", type=int, default=200_000,
                    help="calls per timing run (default 200,000)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="timing runs; the median is shown (default 5)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of the update costs, every mode in each; "
                    "the median is shown (default 3)")
    ap.add_argument("--series", type=int, default=100,
                    help="series each prometheus_client worker wrote")
    ap.add_argument("--tally-series", type=int, default=10_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--micro", action="store_true",
                    help="update costs only (no scrapes)")
    a = ap.parse_args()

    rounds = micro_rounds(a.number, a.repeat, a.rounds)
    ops = list(TARGETS)
    rows = {name: {o: statistics.median(r[name][o] for r in rounds)
                   for o in ops} for name in rounds[0]}
    bases = ("prometheus_client", "prometheus_client multiprocess")
    on = "prometheus_client on tally"
    ratios = {f"on tally vs {b}": {o: rows[b][o] / rows[on][o] for o in ops}
              for b in bases}
    spread = {f"on tally vs {b}": {o: sorted(r[b][o] / r[on][o]
                                             for r in rounds) for o in ops}
              for b in bases}
    if a.micro:
        if a.json:
            print(json.dumps({"update_ns": rows, "speedup": ratios,
                              "speedup_rounds": spread, "rounds": rounds,
                              "python": sys.version.split()[0],
                              "cpu": _cpu()}, indent=1))
        else:
            _print_micro(rows, ratios, ops, spread)
        return 0
    prom = prom_scrape(a.series, a.repeat)
    tal = tally_scrape(a.tally_series, a.series, a.repeat)
    tal_same = tally_scrape(a.series, a.series, a.repeat)
    back = backend_scrape(a.series, a.series, a.repeat)
    result = {"update_ns": rows, "speedup": ratios,
              "speedup_rounds": spread, "targets_ns": TARGETS,
              "scrape_ms": {"prometheus_client multiprocess": prom,
                            "tally": tal, "tally same series": tal_same,
                            "prometheus_client on tally": back},
              "python": sys.version.split()[0], "cpu": _cpu()}
    if a.json:
        print(json.dumps(result, indent=1))
        return 0
    _print_micro(rows, ratios, ops, spread)
    print(f"{'tally target':44s}" + "".join(f"{TARGETS[o]:14d}" for o in ops))
    ok = all(rows["tally"][o] <= TARGETS[o] for o in ops)
    print(f"{'tally within targets':44s}{'yes' if ok else 'NO':>14s}")
    print()
    print(f"{'scrape ms (median)':46s}" +
          "".join(f"{str(n) + ' workers':>14s}" for n in WORKERS))
    print(f"{f'prometheus_client mp, {a.series} series/file':46s}" +
          "".join(f"{prom[str(n)]:14.2f}" for n in WORKERS))
    for t, n_series in ((tal_same, a.series), (tal, a.tally_series)):
        label = f"tally, {n_series} series (0 workers: {t['0']:.2f})"
        print(f"{label:46s}" + "".join(f"{t[str(n)]:14.2f}" for n in WORKERS))
    label = f"prom_client on tally, {a.series} series"
    print(f"{label:46s}" + "".join(f"{back[str(n)]:14.2f}" for n in WORKERS))
    print(f"SUMMARY tally inc {rows['tally']['inc']:.1f} ns child "
          f"{rows['tally']['child inc']:.1f} ns labels+inc "
          f"{rows['tally']['labels + inc']:.1f} ns observe "
          f"{rows['tally']['observe']:.1f} ns; scrape 1000 workers: "
          f"prometheus_client {prom['1000']:.1f} ms, tally "
          f"{tal['1000']:.1f} ms ({tal['segments']} segment), "
          f"prometheus_client on tally {back['1000']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
