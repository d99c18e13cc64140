#!/usr/bin/env python3
"""What TALLY_PROMETHEUS_CLIENT costs an interpreter that does not use
prometheus_client: `python -c pass` without and with the variable,
alternated in one run (ms, median of --runs each).  The .pth line only
installs a finder with the variable set, so the two should differ by
well under a millisecond; the CPU is printed with the figures.

    python start.py [--python PATH] [--runs 30]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time


def once(py: str, env: dict) -> float:
    t = time.perf_counter()
    subprocess.run([py, "-c", "pass"], env=env, check=True)
    return (time.perf_counter() - t) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    off = dict(os.environ)
    off.pop("TALLY_PROMETHEUS_CLIENT", None)
    on = dict(off, TALLY_PROMETHEUS_CLIENT="1")
    without, with_ = [], []
    for _ in range(args.runs):
        without.append(once(args.python, off))
        with_.append(once(args.python, on))
    a, b = statistics.median(without), statistics.median(with_)
    print(f"python -c pass, median of {args.runs} ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs): without {a:.2f} ms, with "
          f"TALLY_PROMETHEUS_CLIENT=1 {b:.2f} ms, difference {b - a:+.2f} ms")


if __name__ == "__main__":
    main()
