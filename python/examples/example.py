"""The example of python/README.md: three forked workers serve 1,000
requests each into one shared zone, then the parent prints a scrape.

    TALLY_ZONE=shop python python/examples/example.py

Run it twice within an hour and the counts add up: the zone outlives its
processes for TALLY_RETAIN.
"""
import os

import tally_metrics as tally

REQUESTS = tally.Counter("http_requests", "Requests served.",
                         ["method", "code"])
LATENCY = tally.Histogram("http_request_seconds", "Time to serve a request.",
                          buckets=[0.01, 0.1, 1])
BUSY = tally.Gauge("busy_workers", "Workers serving a request.",
                   multiprocess_mode="livesum")


def handle(i):
    """A request: its latency is made up, 0 to 0.198 s."""
    with BUSY.track_inprogress():
        LATENCY.observe((i % 100) * 0.002)
        if i % 1000 == 999:
            REQUESTS.labels("POST", "500").inc()
        else:
            REQUESTS.labels("GET", "200").inc()


def main():
    workers = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            for i in range(1000):
                handle(i)
            os._exit(0)
        workers.append(pid)
    for pid in workers:
        os.waitpid(pid, 0)
    print(tally.generate_latest().decode(), end="")


if __name__ == "__main__":
    main()
