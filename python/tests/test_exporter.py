"""tally-exporter over a Python zone: a Histogram is a classic histogram of
the format (2.6), so the exporter shows it under its plain name with the
application's buckets, cumulative, its _count and its exact _sum, as the
package's own exposition does, and promtool check metrics prints nothing
on the scrape.  One exporter over a C, a Python and a Rust service
together: promtool prints nothing, the Python service's Info and Enum
included (info and enum metrics of the format, 2.8, which the exporter
writes as prometheus_client does).

tally-exporter is $TALLY_EXPORTER or the build tree's
(build/programs/tally-exporter/tally-exporter); the test is skipped
without it or without promtool and curl.  The exporter binds 127.0.0.1,
lives at most 30 s and is stopped by its pid."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import HERE, child_env, run_py

EXPORTER = os.environ.get("TALLY_EXPORTER") or os.path.join(
    HERE, "..", "..", "build", "programs", "tally-exporter", "tally-exporter")

WRITER = """
import tally_metrics as tally
reg = tally.CollectorRegistry()
h = tally.Histogram("shop_order_value_dollars", "What orders were worth.",
                    ["shop"], registry=reg,
                    buckets=[1, 2.5, 10, 25, 100])
for v in (0.5, 1, 7.25, 19.99, 19.99, 1000):
    h.labels("a").observe(v)
lat = tally.Histogram("shop_request_seconds", "Time of a request.",
                      registry=reg)
lat.observe(0.02)
lat.observe(0.3)
tally.Counter("shop_orders", "Orders.", registry=reg).inc(2.5)
print(tally.generate_latest(reg).decode())
"""


def _need():
    if not os.access(EXPORTER, os.X_OK):
        pytest.skip("no tally-exporter at " + EXPORTER)
    for tool in ("promtool", "curl"):
        if not shutil.which(tool):
            pytest.skip(tool + " not installed")


def _scrape(tally_dir, args=(), accepts=None):
    """The text of a scrape of tally-exporter (options @args) over
    @tally_dir; with @accepts, the bodies (bytes) of one scrape with each
    of those Accept headers."""
    log = os.path.join(tally_dir, "..", "exporter.log")
    with open(log, "w") as err:
        p = subprocess.Popen(["timeout", "30", EXPORTER, "--dir", tally_dir,
                              *args, "--listen", "127.0.0.1:0"], stderr=err)
    try:
        port = None
        for _ in range(100):
            with open(log) as f:
                m = re.search(r"listening on https?://127\.0\.0\.1:(\d+)/",
                              f.read())
            if m:
                port = m.group(1)
                break
            time.sleep(0.05)
        assert port, open(log).read()
        bodies = [subprocess.run(
            ["curl", "-sS", "--max-time", "10", "-H", "Accept: " + a,
             f"http://127.0.0.1:{port}/metrics"], capture_output=True,
            timeout=20, check=True).stdout for a in accepts or ["*/*"]]
        return bodies if accepts else bodies[0].decode()
    finally:
        p.terminate()
        p.wait(timeout=10)


def _samples(text, prefix):
    """The samples of @prefix, without the exporter's pid and process
    labels."""
    out = []
    for line in text.splitlines():
        if line.startswith(prefix):
            line = re.sub(r',?pid="\d+",process="[^"]*"', "", line)
            out.append(line.replace("{,", "{").replace("{}", ""))
    return out


def test_exporter_shows_python_histograms_by_their_plain_names(tally_dir):
    _need()
    own = run_py(WRITER, child_env(tally_dir, TALLY_KEEP=1))
    text = _scrape(tally_dir)
    assert _samples(text, "shop_order_value_dollars") == [
        'shop_order_value_dollars_bucket{shop="a",le="1"} 2',
        'shop_order_value_dollars_bucket{shop="a",le="2.5"} 2',
        'shop_order_value_dollars_bucket{shop="a",le="10"} 3',
        'shop_order_value_dollars_bucket{shop="a",le="25"} 5',
        'shop_order_value_dollars_bucket{shop="a",le="100"} 5',
        'shop_order_value_dollars_bucket{shop="a",le="+Inf"} 6',
        'shop_order_value_dollars_count{shop="a"} 6',
        'shop_order_value_dollars_sum{shop="a"} 1048.73',
    ]
    assert "# TYPE shop_order_value_dollars histogram" in text
    assert 'shop_request_seconds_bucket{le="0.025"} 1' in \
        _samples(text, "shop_request_seconds")
    assert "shop_orders_total 2.5" in _samples(text, "shop_orders")
    # Nothing of the encoding of tally 0.3.
    assert ":bucket" not in text and ":frac_u" not in text
    # The package's own exposition has the same buckets and sum.
    assert 'shop_order_value_dollars_bucket{shop="a",le="25"} 5' in own
    assert 'shop_order_value_dollars_sum{shop="a"} 1048.73' in own
    r = subprocess.run(["promtool", "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")


ENUMS = """
import sys
import tally_metrics as tally
reg = tally.CollectorRegistry()
e = tally.Enum("job_state", "State of a job.", ["job"], registry=reg,
               states=["queued", "running", "done"])
for j in range(100):
    e.labels(str(j)).state("running")
    e.labels(str(j)).state("done")
print("ready", flush=True)
sys.stdin.read()
"""


def test_exporter_shows_one_current_state_of_each_enum(tally_dir):
    """An enum of 100 children of 3 states each: more series than the
    exporter reads again at once, so that a child's states fall into
    reads of their own; each child shows its last state, and only it,
    as current."""
    _need()
    # The writer lives while the exporter reads: an exited process's
    # gauges are no current value.
    w = subprocess.Popen([sys.executable, "-c", ENUMS], text=True,
                         env=child_env(tally_dir), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        assert w.stdout.readline() == "ready\n"
        text = _scrape(tally_dir)
    finally:
        w.stdin.close()
        w.wait(timeout=30)
    got = {}
    for line in _samples(text, "job_state{"):
        m = re.fullmatch(r'job_state\{job="(\d+)",job_state="(\w+)"\} '
                         r'(\d+)', line)
        assert m, line
        got.setdefault(m.group(1), {})[m.group(2)] = int(m.group(3))
    want = {"queued": 0, "running": 0, "done": 1}
    assert got == {str(j): want for j in range(100)}


PY03 = os.path.join(HERE, "..", "..", "build", "examples", "py03-segment")


def test_a_zone_of_tally_03_is_skipped_saying_what_to_do(tally_dir):
    """A zone as tally 0.3's Python package left it (format 2.5, names of
    its encoding) is refused by the reader API, which this package reads
    through: in read().skipped with one line, nothing of it shown."""
    import tally_metrics as tally
    if not os.access(PY03, os.X_OK):
        pytest.skip("no py03-segment at " + PY03)
    subprocess.run([PY03], env=child_env(tally_dir, TALLY_KEEP=1),
                   check=True, capture_output=True, timeout=30)
    r = tally.read(dir=tally_dir, all_zones=True)
    assert r.families == []
    [(path, why)] = r.skipped
    assert "written by tally 0.3's Python package" in why
    assert why.endswith("restart the service with tally 0.4")
    assert "\n" not in why


# One tally-exporter over three services of one host, each in its own
# zone: examples/queue-service.c, a Python service (prometheus_client
# through the switch, and tally's own classes) and the Rust crate's
# example rust/examples/workers.rs (built by `cargo build --examples`, or
# $TALLY_RUST_WORKERS).
QUEUE_SERVICE = os.path.join(HERE, "..", "..", "build", "examples",
                             "queue-service")
RUST_ROOT = os.path.join(HERE, "..", "..", "rust", "target")

PY_SERVICE = """
import sys, time
from prometheus_client import Counter, Gauge, Histogram, Summary
import tally_metrics as tally

Counter("py_requests", "Requests.", ["path"]).labels("/").inc(3)
Counter("py_bytes", "Bytes.").inc(0.5)
Gauge("py_inflight", "In flight.", multiprocess_mode="livesum").set(2)
Gauge("py_workers", "Workers.").set(4)
Histogram("py_latency_seconds", "Latency.", buckets=[0.1, 1]).observe(0.3)
Summary("py_size_bytes", "Size.").observe(512)
reg = tally.CollectorRegistry(zone_name="pysvc", shared=True)
tally.Gauge("py_temperature_celsius", "Temperature.", registry=reg).set(21.5)
tally.Info("py_build", "Build.", registry=reg).info({"version": "1.2"})
tally.Enum("py_state", "State.", states=["up", "down"],
           registry=reg).state("up")
print("ready", flush=True)
time.sleep(float(sys.argv[1]))
"""

# The Python service's Info and Enum as the exporter writes them (the
# text format 0.0.4, as prometheus_client writes them), its own labels
# (pid, process) taken out.
PY_INFO_ENUM = [
    "# HELP py_build_info Build.",
    "# TYPE py_build_info gauge",
    'py_build_info{version="1.2"} 1',
    "# HELP py_state State.",
    "# TYPE py_state gauge",
    'py_state{py_state="up"} 1',
    'py_state{py_state="down"} 0',
]


def _rust_workers():
    path = os.environ.get("TALLY_RUST_WORKERS")
    if path:
        return path
    for profile in ("release", "debug"):
        p = os.path.join(RUST_ROOT, profile, "examples", "workers")
        if os.access(p, os.X_OK):
            return p
    pytest.skip("no Rust example service (cd rust && cargo build "
                "--examples, or $TALLY_RUST_WORKERS)")


def _start(cmd, env, ready):
    """Start @cmd in its own session; wait (at most 20 s) for @ready in
    its stdout."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 20
    seen = []
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        if ready(line):
            return p
    p.kill()
    p.wait()
    raise AssertionError(f"{cmd[0]} did not start: {''.join(seen)}")


def test_promtool_on_a_c_a_python_and_a_rust_service(tally_dir):
    _need()
    if not os.access(QUEUE_SERVICE, os.X_OK):
        pytest.skip("no examples/queue-service in build/")
    rust = _rust_workers()
    procs = []
    try:
        procs.append(_start([QUEUE_SERVICE, "--seconds", "20"],
                            child_env(tally_dir, TALLY_ZONE="csvc"),
                            lambda line: True))
        procs.append(_start([sys.executable, "-c", PY_SERVICE, "20"],
                            child_env(tally_dir, TALLY_ZONE="pysvc",
                                      TALLY_PROMETHEUS_CLIENT="1"),
                            lambda line: line.startswith("ready")))
        procs.append(_start([rust, "20", "2"],
                            child_env(tally_dir, TALLY_ZONE="rssvc"),
                            lambda line: True))
        # Every service has recorded something (the C and the Rust one
        # at their first request or job).
        for _ in range(100):
            text = _scrape(tally_dir)
            if all(re.search(rf"^{m}", text, re.M) for m in
                   ("requests_total", "py_requests_total", "rs_jobs_total")):
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    for name in ("requests_total", "py_requests_total", "py_latency_seconds",
                 "rs_jobs_total", "rs_job_duration_seconds"):
        assert re.search(rf"^{name}", text, re.M), name
    got = [re.sub(r',?pid="\d+",process="[^"]*"', "", line).replace("{}", "")
           for line in text.splitlines()
           if re.match(r"(# (HELP|TYPE) )?py_(build_info|state)\b", line)]
    assert got == PY_INFO_ENUM, got
    r = subprocess.run(["promtool", "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout + r.stderr) == (0, ""), \
        (r.returncode, r.stdout + r.stderr)
