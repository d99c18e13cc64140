#!/usr/bin/env python3
"""The Python package's exposition against tally-exporter's scrape of the
same zone, in one run.

One process writes --series series (by default 100,000: 70% counters of
three labels, 20% gauges, 10% histograms of four bounds) into a zone of
its own in a new directory, then, --rounds times, in turn:

  exporter scrape            GET /metrics of tally-exporter --aggregate
                             --self-metrics=no over that directory
                             (urllib, the body read whole)
  tally.generate_latest()    the registry's zone, tally-exporter's writer
  TallyCollector, tally      tally.generate_latest(registry) of a
                             prometheus_client registry holding a
                             TallyCollector: written by the same writer
  TallyCollector, prom.      prometheus_client.generate_latest(registry) of
                             that registry: prometheus_client formats
                             each sample in Python
  Python writer              the package's writer in Python
                             (format_text(read())), the way
                             generate_latest() was written before

and prints each one's median (ms), its ratio to the exporter's median,
the bytes of each (the first two are the same bytes, checked) and the
CPU.  The figures of one run are comparable; those of runs on a busy
machine are noisy, hence the medians.

    python expose.py                      # about a minute
    python expose.py --series 20000 --rounds 9
    python expose.py --json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXPORTER = os.environ.get("TALLY_EXPORTER") or os.path.join(
    ROOT, "build", "programs", "tally-exporter", "tally-exporter")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fill(tally, reg, n):
    """@n series in @reg's zone."""
    nc, ng = n * 7 // 10, n * 2 // 10
    nh = n - nc - ng
    c = tally.Counter("bench_requests", "Requests served.",
                      ["method", "route", "code"], registry=reg)
    for i in range(nc):
        c.labels("GET" if i % 3 else "POST", f"/api/v1/items/{i // 7}",
                 str(200 + i % 7)).inc(i % 13 + 1)
    g = tally.Gauge("bench_queue_depth", "Items queued.", ["queue"],
                    registry=reg)
    for i in range(ng):
        g.labels(f"q{i}").set(i % 100 + 0.5)
    h = tally.Histogram("bench_request_seconds", "Request time.",
                        ["route"], buckets=[0.01, 0.1, 1, 10],
                        registry=reg)
    for i in range(nh):
        h.labels(f"/r{i}").observe((i % 50) / 10)


def start_exporter(d):
    log = os.path.join(d, "..", os.path.basename(d) + ".log")
    err = open(log, "w")
    p = subprocess.Popen(["timeout", "900", EXPORTER, "--dir", d,
                          "--aggregate", "--self-metrics=no",
                          "--listen", "127.0.0.1:0"], stderr=err)
    for _ in range(400):
        with open(log) as f:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/",
                          f.read())
        if m:
            return p, int(m.group(1)), log
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.terminate()
    raise SystemExit("tally-exporter did not start: " + open(log).read())


def scrape(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                 headers={"Accept": "text/plain"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t) * 1e3, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--series", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=7,
                    help="measurements of each; the median is shown")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not os.access(EXPORTER, os.X_OK):
        raise SystemExit(f"no tally-exporter at {EXPORTER} "
                         "(build it, or set $TALLY_EXPORTER)")

    top = tempfile.mkdtemp(prefix="bench-expose-")
    d = os.path.join(top, "tally")
    os.mkdir(d, 0o700)
    # Before tally is imported: libtally reads its environment once.
    os.environ["TALLY_DIR"] = d
    os.environ.pop("TALLY_ZONE", None)
    import prometheus_client
    import tally_metrics as tally
    from tally_metrics._exposition import format_text
    from tally_metrics._read import read

    exporter = None
    try:
        reg = tally.CollectorRegistry()
        fill(tally, reg, a.series)
        preg = prometheus_client.CollectorRegistry()
        preg.register(tally.TallyCollector(reg))
        exporter, port, _ = start_exporter(d)
        ways = {
            "exporter scrape": lambda: scrape(port),
            "tally.generate_latest()": lambda: tally.generate_latest(reg),
            "TallyCollector, tally": lambda: tally.generate_latest(preg),
            "TallyCollector, prom.": lambda: prometheus_client
            .generate_latest(preg),
            "Python writer": lambda: format_text(
                read(reg).families).encode(),
        }
        ms = {k: [] for k in ways}
        size = {}
        same = scrape(port) == tally.generate_latest(reg)
        for _ in range(a.rounds):
            for k, fn in ways.items():
                t, body = timed(fn)
                ms[k].append(t)
                size[k] = len(body)
    finally:
        if exporter:
            exporter.terminate()
            exporter.wait(timeout=30)
        shutil.rmtree(top, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in ms.items()}
    base = med["exporter scrape"]
    res = {"series": a.series, "rounds": a.rounds, "cpu": cpu_model(),
           "ncpu": os.cpu_count(), "python": sys.version.split()[0],
           "same_bytes": same,
           "ms": {k: {"median": med[k], "runs": ms[k],
                      "ratio": med[k] / base, "bytes": size[k]}
                  for k in ways}}
    if a.json:
        print(json.dumps(res, indent=1))
        return 0
    print(f"{'exposition of ' + format(a.series, ',') + ' series':28s}"
          f"{'median ms':>11s}{'x exporter':>12s}{'bytes':>12s}")
    for k in ways:
        print(f"{k:28s}{med[k]:11.1f}{med[k] / base:11.2f}x"
              f"{size[k]:12d}")
    print(f"(median of {a.rounds} rounds; {cpu_model()}, "
          f"{os.cpu_count()} CPUs; Python {res['python']}; "
          f"exporter and generate_latest() bytes "
          f"{'the same' if same else 'DIFFER'})")
    print(f"SUMMARY expose {a.series} series: exporter {base:.1f} ms, "
          f"generate_latest {med['tally.generate_latest()']:.1f} ms "
          f"({med['tally.generate_latest()'] / base:.2f}x), TallyCollector "
          f"{med['TallyCollector, tally']:.1f} ms "
          f"({med['TallyCollector, tally'] / base:.2f}x)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
