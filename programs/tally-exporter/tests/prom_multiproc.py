#!/usr/bin/env python3
"""prom_multiproc.py: what a scrape costs with prometheus_client's
multiprocess mode, the Python baseline tally-exporter is compared with
(programs/tally-exporter/README.md).

    prom_multiproc.py [--series N] [--procs P] [--exited K]
                      [--exited-series M] [--repeat R]

P processes (multiprocessing, fork) write N counter series in all, as
pre-fork workers do (one file per pid in PROMETHEUS_MULTIPROC_DIR); the
parent times generate_latest() over MultiProcessCollector, the median of
R runs.  Then K more workers write M series each (default 100, as in
`tally-bench exporter`) and exit, their files
staying (prometheus_client keeps a dead worker's counters in its file:
that is how it never goes backwards), and the scrape is timed again.
Prints one JSON object.  Needs the prometheus_client package (the test
venv has it: build/test-venv/bin/python).
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
import time


def worker(n, first, ready):
    from prometheus_client import Counter
    c = Counter("bench_exp_requests", "Requests, per connection.", ["id"])
    for i in range(first, first + n):
        c.labels(str(i)).inc()
    ready.put(os.getpid())


def timed_scrapes(repeat):
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector
    times, size = [], 0
    for _ in range(repeat):
        reg = CollectorRegistry()
        MultiProcessCollector(reg)
        t = time.perf_counter()
        out = generate_latest(reg)
        times.append((time.perf_counter() - t) * 1e3)
        size = len(out)
    return statistics.median(times), size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=100000)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--exited", type=int, default=64)
    ap.add_argument("--exited-series", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="prom-mp.")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = d
    try:
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        per = a.series // a.procs
        ps = [ctx.Process(target=worker, args=(per, i * per, q))
              for i in range(a.procs)]
        for p in ps:
            p.start()
        for p in ps:
            p.join(300)
        base_ms, size = timed_scrapes(a.repeat)
        ks = [ctx.Process(target=worker, args=(a.exited_series, 0, q))
              for _ in range(a.exited)]
        for p in ks:
            p.start()
            p.join(60)
        exited_ms, _ = timed_scrapes(a.repeat)
        print(json.dumps({
            "bench": "prometheus_client multiprocess",
            "series": per * a.procs, "procs": a.procs,
            "scrape_ms": round(base_ms, 1),
            "bytes_per_series": round(size / (per * a.procs), 1),
            "exited": a.exited, "exited_series": a.exited_series,
            "scrape_ms_after_exited": round(exited_ms, 1),
            "files": len(os.listdir(d)),
        }))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
