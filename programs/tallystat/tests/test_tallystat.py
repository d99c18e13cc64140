#!/usr/bin/env python3
"""tallystat's integration tests: the real program against segments of
tallystat-writer (known values and rates) and of examples/queue-service.

Run by CTest (programs/tallystat/tests/CMakeLists.txt), one test method
per CTest test; the environment names the programs:
  TALLYSTAT, TS_WRITER, TS_SERVICE, TS_SCHEMA_DOC (docs/tallystat-json.md,
  whose ```json block is the schema), TS_VENV (the tests' venv, made by
  tools/test-venv.sh: jsonschema).

Pass or fail does not depend on the machine's speed: a rate is the
interval's value over the interval's length (value == rate x interval),
intervals add up to at least the nominal time (tallystat reads at absolute
deadlines) and at most the time the run took, and histogram quantiles lie
within the bucket of the value observed (the reader's resolution, 2^-3 by
default).  With TS_TIMING=1 (the tallystat-*-timing tests, CTest label
"timing", which tools/run-tests.sh reports without failing) the timings
are checked too: a rate over an interval of about 1 s within 15% of the
writer's (the writer adds in 5 ms steps against the clock), an interval
within 0.25 s of the nominal one.  Everything started here is killed in
tearDown, and every wait has a timeout.
"""
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

TALLYSTAT = os.environ.get("TALLYSTAT", "tallystat")
WRITER = os.environ.get("TS_WRITER", "tallystat-writer")
SERVICE = os.environ.get("TS_SERVICE", "queue-service")
SCHEMA_DOC = os.environ.get("TS_SCHEMA_DOC", "docs/tallystat-json.md")
VENV = os.environ.get("TS_VENV", "")

RATE_TOL = 0.15
# Timings judged (TS_TIMING=1), or only printed.
TIMED = os.environ.get("TS_TIMING") == "1"


# --- The schema ----------------------------------------------------------

def load_schema():
    with open(SCHEMA_DOC) as f:
        text = f.read()
    blocks = re.findall(r"```json\n(.*?)\n```", text, re.S)
    if len(blocks) != 1:
        raise AssertionError("%s: expected one ```json block" % SCHEMA_DOC)
    return json.loads(blocks[0])


def find_jsonschema():
    """jsonschema from the tests' venv (TS_VENV: tools/test-venv.sh made
    it from the pinned requirements), else from the system, else None."""
    if VENV:
        py = os.path.join(VENV, "bin", "python3")
        try:
            site = subprocess.run(
                [py, "-c", "import jsonschema, os; "
                 "print(os.path.dirname(os.path.dirname("
                 "jsonschema.__file__)))"],
                check=True, timeout=30, capture_output=True, text=True)
            sys.path.insert(0, site.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        import jsonschema
        return jsonschema
    except ImportError:
        return None


class MiniValidator:
    """The part of JSON Schema the document uses, for hosts without
    jsonschema: type, enum, const, required, properties,
    additionalProperties, items, min/maxItems, minLength, minimum, pattern,
    $ref, oneOf, allOf, if/then."""

    TYPES = {"object": dict, "array": list, "string": str, "boolean": bool,
             "null": type(None)}

    def __init__(self, schema):
        self.root = schema

    def check(self, v, s, path="$"):
        if "$ref" in s:
            node = self.root
            for part in s["$ref"].lstrip("#/").split("/"):
                node = node[part]
            return self.check(v, node, path)
        errs = []
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(self.is_type(v, t) for t in types):
                return ["%s: %r is not %s" % (path, v, types)]
        if "enum" in s and v not in s["enum"]:
            errs.append("%s: %r not in %s" % (path, v, s["enum"]))
        if "const" in s and v != s["const"]:
            errs.append("%s: %r != %r" % (path, v, s["const"]))
        if isinstance(v, dict):
            for k in s.get("required", []):
                if k not in v:
                    errs.append("%s: %s missing" % (path, k))
            props = s.get("properties", {})
            for k, x in v.items():
                if k in props:
                    errs += self.check(x, props[k], path + "." + k)
                elif s.get("additionalProperties") is False:
                    errs.append("%s: unexpected %s" % (path, k))
                elif isinstance(s.get("additionalProperties"), dict):
                    errs += self.check(x, s["additionalProperties"],
                                       path + "." + k)
        if isinstance(v, list):
            if len(v) < s.get("minItems", 0):
                errs.append("%s: too few items" % path)
            if "maxItems" in s and len(v) > s["maxItems"]:
                errs.append("%s: too many items" % path)
            for i, x in enumerate(v):
                if "items" in s:
                    errs += self.check(x, s["items"], "%s[%d]" % (path, i))
        if isinstance(v, str):
            if len(v) < s.get("minLength", 0):
                errs.append("%s: too short" % path)
            if "pattern" in s and not re.search(s["pattern"], v):
                errs.append("%s: %r does not match %s" % (path, v,
                                                         s["pattern"]))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if "minimum" in s and v < s["minimum"]:
                errs.append("%s: %r < %r" % (path, v, s["minimum"]))
        if "oneOf" in s:
            ok = [x for x in s["oneOf"] if not self.check(v, x, path)]
            if len(ok) != 1:
                errs.append("%s: matches %d of oneOf" % (path, len(ok)))
        for x in s.get("allOf", []):
            errs += self.check(v, x, path)
        if "if" in s and not self.check(v, s["if"], path):
            errs += self.check(v, s.get("then", {}), path)
        return errs

    @staticmethod
    def is_type(v, t):
        if t == "integer":
            return isinstance(v, int) and not isinstance(v, bool)
        if t == "number":
            return isinstance(v, (int, float)) and not isinstance(v, bool)
        return isinstance(v, MiniValidator.TYPES[t])


SCHEMA = load_schema()
JSONSCHEMA = find_jsonschema()


def validate(doc):
    if JSONSCHEMA is not None:
        JSONSCHEMA.validate(doc, SCHEMA,
                            cls=JSONSCHEMA.Draft202012Validator)
    errs = MiniValidator(SCHEMA).check(doc, SCHEMA)
    if errs:
        raise AssertionError("schema: " + "; ".join(errs[:10]))


# --- Histogram buckets, as tally/metrics.h computes them ------------------

def bucket(v, sub=3, maxb=40):
    if v < (1 << sub):
        return v
    e = v.bit_length() - 1
    if e >= maxb:
        return ((maxb - sub + 1) << sub) - 1
    return ((e - sub + 1) << sub) + ((v >> (e - sub)) & ((1 << sub) - 1))


def bucket_bounds(v, sub=3):
    """[lo, hi] of the bucket holding v (a bucket is at most 2^-sub of its
    lower bound wide)."""
    b = bucket(v, sub)
    lo = v
    while lo > 0 and bucket(lo - 1, sub) == b:
        lo -= 1
    hi = v
    while bucket(hi + 1, sub) == b:
        hi += 1
    return lo, hi


def in_bucket(q, v):
    lo, hi = bucket_bounds(v)
    return q is not None and lo - 0.5 <= q <= hi + 0.5


# --- The test case -------------------------------------------------------

class TallystatTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tallystat-test.", dir="/dev/shm")
        os.chmod(self.dir, 0o700)
        self.env = dict(os.environ, TALLY_DIR=self.dir)
        for k in ("TALLY_KEEP", "NO_COLOR", "S_COLORS", "S_TIME_FORMAT"):
            self.env.pop(k, None)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # Helpers.

    def writer(self, zone, comm=None, rate=0, seconds=30, env=None,
               extra=()):
        args = [WRITER, "--zone", zone, "--rate", str(rate), "--seconds",
                str(seconds)] + list(extra)
        if comm:
            args += ["--comm", comm]
        p = subprocess.Popen(args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=env or self.env)
        self.procs.append(p)
        r, _, _ = select.select([p.stdout], [], [], 10)
        self.assertTrue(r, "the writer did not start")
        line = p.stdout.readline().split()
        self.assertEqual(line[0], "ready", line)
        self.ready = line
        return p, int(line[1]), line[2]

    def tallystat(self, *args, timeout=30, env=None):
        return subprocess.run([TALLYSTAT] + list(args), capture_output=True,
                              text=True, timeout=timeout,
                              env=env or self.env)

    def start_tallystat(self, *args):
        p = subprocess.Popen([TALLYSTAT] + list(args), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=self.env)
        self.procs.append(p)
        return p

    def json_of(self, r):
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        validate(doc)
        return doc["sysstat"]["hosts"][0]["statistics"]

    @staticmethod
    def rows(report, series=None, pid=None):
        return [s for s in report["series"]
                if (series is None or s["series"] == series) and
                (pid is None or s["pid"] == pid)]

    def one(self, report, series, pid=None):
        r = self.rows(report, series, pid)
        self.assertEqual(len(r), 1, "%s in %s" % (series, report["series"]))
        return r[0]

    def assertRate(self, got, want, what):
        """A writer adding @want a second: within RATE_TOL of it when
        timed; otherwise it moved (the writer may be starved of CPU for
        a while, never run ahead), and the rate is printed."""
        self.assertIsNotNone(got, what)
        if TIMED:
            self.assertLessEqual(abs(got - want), want * RATE_TOL,
                                 "%s: rate %.1f, want %.1f +- %d%%" %
                                 (what, got, want, RATE_TOL * 100))
        else:
            self.assertGreater(got, 0, what)
            print("%s: rate %.1f (writer %.1f, not judged)" %
                  (what, got, want), file=sys.stderr)

    def assertIntervals(self, reports, n, nominal, wall):
        """The n interval reports' lengths: tallystat reads at absolute
        deadlines, so the first is at least @nominal and all of them add
        up to at least n x @nominal, and to at most @wall, the time the
        run took (printed to the millisecond: 1e-3 of slack).  Timed:
        each within 0.25 s of @nominal as well."""
        iv = [r["interval"] for r in reports[:n]]
        self.assertGreaterEqual(iv[0], nominal - 1e-3, iv)
        self.assertGreaterEqual(sum(iv), n * nominal - 1e-3, iv)
        self.assertLessEqual(sum(iv), wall + 1e-3, (iv, wall))
        for x in iv:
            self.assertGreater(x, 0, iv)
            if TIMED:
                self.assertLess(abs(x - nominal), 0.25, iv)

    # Tests.

    def test_since_start(self):
        """Without an interval: one report, values exact."""
        _, pid, path = self.writer("tw", comm="tw-writer")
        st = self.json_of(self.tallystat("-o", "JSON"))
        self.assertEqual(len(st), 1)
        r = st[0]
        self.assertEqual(r["report"], "since-start")
        self.assertIsNone(r["interval"])
        want = {'tw_requests_total{queue="0"}': 1000,
                'tw_requests_total{queue="1"}': 2000,
                "tw_bytes_total": 123456789012,
                "tw_big_total": 9007199254740993,
                "tw_in_flight": 7, "tw_temperature": -42}
        for k, v in want.items():
            row = self.one(r, k, pid)
            self.assertEqual(row["value"], v, k)
            self.assertIs(type(row["value"]), int, k)
            self.assertEqual(row["process"], "tw-writer")
            self.assertEqual(row["zone"], "tw")
            if row["kind"] == "counter":
                self.assertGreater(row["rate"], 0)
                self.assertFalse(row["reset"])
        h = self.one(r, "tw_latency_ns", pid)
        self.assertEqual((h["count"], h["sum"]), (100000, 100000000))
        self.assertEqual(h["unit"], "nanoseconds")
        for q in ("p50", "p99", "p999", "max"):
            self.assertTrue(in_bucket(h[q], 1000), (q, h[q]))
        # max is the top of the highest bucket used, not the largest
        # observation (1000): the text calls it Max<=.
        self.assertEqual(h["max"], bucket_bounds(1000)[1])
        self.assertGreater(h["max"], 1000)
        self.assertAlmostEqual(h["mean"], 1000.0)
        lng = [s for s in r["series"] if s["name"] == "tw_long_total"][0]
        self.assertEqual(lng["labels"]["gamma"], "c" * 2000)
        load = self.one(r, "tw_load", pid)
        self.assertEqual((load["kind"], load["value"]), ("gauge", 0.625))
        self.assertIs(type(load["value"]), float)
        self.assertEqual(len(self.rows(r)), 9)

        # The same as text: banner, header, exact values, alignment,
        # the long label set cut with an ellipsis.
        t = self.tallystat()
        self.assertEqual(t.returncode, 0, t.stderr)
        lines = t.stdout.splitlines()
        self.assertRegex(lines[0], r"^Linux \S+ \(\S+\) \t\d\d/\d\d/\d{4} "
                         r"\t_\S+_\t\(\d+ CPU\)$")
        head = [i for i, l in enumerate(lines) if re.match(
            r"^\d\d:\d\d:\d\d +PID +Command +Zone +Series +Type +Value +/s$",
            l)]
        self.assertEqual(len(head), 1, t.stdout)
        table = lines[head[0]:lines.index("", head[0])]
        col = table[0].index("Type")
        for l in table[1:]:
            self.assertRegex(l[col:], r"^(counter|gauge) ", l)
        # The zone (tw) differs from the process name: a Zone column.
        big = [l for l in table if "tw_big_total" in l][0]
        self.assertEqual(big.split()[3], "tw")
        self.assertEqual(big.split()[6], "9007199254740993")
        temp = [l for l in table if "tw_temperature" in l][0]
        self.assertEqual(temp.split()[6], "-42")
        load = [l for l in table if "tw_load" in l][0]
        self.assertEqual(load.split()[5:7], ["gauge", "0.625"])
        lng = [l for l in table if "tw_long_total" in l][0]
        self.assertIn("\u2026", lng)
        self.assertNotIn("c" * 20, lng)
        self.assertIn("p99.9", t.stdout)
        self.assertRegex(t.stdout, r"p99\.9 +Max<=\n")
        hist = [l for l in lines if " tw_latency_ns " in l][0]
        self.assertEqual(float(hist.split()[-1]), bucket_bounds(1000)[1])
        self.assertNotIn("\x1b[", t.stdout)   # not a terminal

    def test_selectors(self):
        """-p, -C, --zone, name globs and label matchers."""
        _, a, _ = self.writer("za", comm="tw-alpha")
        _, b, _ = self.writer("zb", comm="tw-beta")

        def keys(*args):
            r = self.json_of(self.tallystat("-o", "JSON", *args))[0]
            return sorted((s["pid"], s["series"]) for s in r["series"])

        q1 = 'tw_requests_total{queue="1"}'
        self.assertEqual(keys(q1), sorted([(a, q1), (b, q1)]))
        self.assertEqual({p for p, _ in keys("-p", str(a))}, {a})
        self.assertEqual({p for p, _ in keys("-p", "%d,%d" % (a, b))},
                         {a, b})
        self.assertEqual({p for p, _ in keys("-C", "alp")}, {a})
        self.assertEqual({p for p, _ in keys("--zone", "zb")}, {b})
        self.assertEqual({p for p, _ in keys("-Z", "z*")}, {a, b})
        ne = {k for _, k in keys('{queue!="1"}')}
        self.assertIn('tw_requests_total{queue="0"}', ne)
        self.assertIn("tw_big_total", ne)
        self.assertNotIn(q1, ne)
        self.assertEqual(len(keys('{queue=~"0|1"}')), 4)
        self.assertEqual(len(keys('{queue=~"1"}', "-p", str(b))), 1)
        self.assertEqual({k for _, k in keys("tw_*_total", "-p", str(a))},
                         {'tw_requests_total{queue="0"}', q1,
                          "tw_bytes_total", "tw_big_total",
                          [k for _, k in keys("tw_long_total")][0]})
        self.assertEqual(keys("nothing_matches"), [])
        # Several selectors are or'ed.
        self.assertEqual({k for _, k in keys("tw_in_flight", "tw_big_total",
                                             "-p", str(a))},
                         {"tw_in_flight", "tw_big_total"})

    def test_rates(self):
        """Interval reports: rates, gauges, quantiles of the interval's
        bucket deltas, per-CPU columns, Average."""
        _, pid, _ = self.writer("tw", rate=2000)
        time.sleep(0.3)
        t0 = time.monotonic()
        st = self.json_of(self.tallystat("-y", "-o", "JSON", "-P", "ALL",
                                         "1", "3", timeout=20))
        wall = time.monotonic() - t0
        self.assertEqual([r["report"] for r in st],
                         ["interval"] * 3 + ["average"])
        self.assertIntervals(st, 3, 1.0, wall)
        q1 = 'tw_requests_total{queue="1"}'
        for r in st[:3]:
            row = self.one(r, q1, pid)
            self.assertRate(row["rate"], 2000, q1)
            # The rate is the value over the interval (both printed to
            # the millisecond / third decimal).
            self.assertLess(abs(row["value"] - row["rate"] * r["interval"]),
                            2 + row["value"] * 1e-3)
            cpus = sum(c["rate"] for c in row["percpu"] if c["rate"])
            self.assertLess(abs(cpus - row["rate"]), 1e-3 * row["rate"] + 1)
            q0 = self.one(r, 'tw_requests_total{queue="0"}', pid)
            self.assertEqual((q0["value"], q0["rate"]), (0, 0))
            self.assertEqual(self.one(r, "tw_in_flight", pid)["value"], 7)
            self.assertEqual(self.one(r, "tw_big_total", pid)["value"], 0)
            h = self.one(r, "tw_latency_ns", pid)
            self.assertRate(h["rate"], 1000, "tw_latency_ns")
            # Since start the median is 1000 (100000 early observations);
            # over the interval it is the 5000 of the recent ones.
            self.assertTrue(in_bucket(h["p50"], 5000), h)
            self.assertTrue(in_bucket(h["p99"], 200000), h)
            self.assertTrue(in_bucket(h["p999"], 200000), h)
            self.assertTrue(in_bucket(h["max"], 200000), h)
        avg = st[3]
        # Each interval is printed to the millisecond: the three rounded
        # ones sum to within 1.5 ms of the exact sum, which the average's
        # rounds to within 0.5 ms.
        self.assertLessEqual(abs(avg["interval"] - sum(r["interval"]
                                                       for r in st[:3])),
                             2e-3 + 1e-9)
        row = self.one(avg, q1, pid)
        self.assertRate(row["rate"], 2000, "average " + q1)
        self.assertEqual(row["value"], sum(self.one(r, q1, pid)["value"]
                                           for r in st[:3]))
        self.assertEqual(self.one(avg, "tw_in_flight", pid)["value"], 7.0)
        self.assertTrue(in_bucket(self.one(avg, "tw_latency_ns",
                                           pid)["p50"], 5000))

        # Text: CPU columns, -z leaves out what did not change.
        t = self.tallystat("-y", "-z", "-P", "ALL", "0.5", "1", timeout=20)
        self.assertEqual(t.returncode, 0, t.stderr)
        self.assertRegex(t.stdout, r"Value +/s +CPU0")
        self.assertIn(q1, t.stdout)
        self.assertNotIn('tw_requests_total{queue="0"}', t.stdout)
        self.assertNotIn("tw_in_flight", t.stdout)
        self.assertIn("Average:", t.stdout)

    def test_late_read(self):
        """A read that comes late (tallystat stopped for a second): that
        report's interval is the time that really passed between the two
        reads, and its rate is still the writer's, not the count of the
        longer gap over the nominal interval."""
        _, pid, _ = self.writer("tw", rate=2000)
        time.sleep(0.3)
        # The JSON envelope's opening is written (and flushed) right after
        # the first read: once it is here, the first interval runs.
        ts = subprocess.Popen([TALLYSTAT, "-y", "-o", "JSON", "0.5", "3"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=self.env)
        self.procs.append(ts)
        r, _, _ = select.select([ts.stdout], [], [], 10)
        self.assertTrue(r, "tallystat wrote nothing")
        first = os.read(ts.stdout.fileno(), 65536)
        # Stop it inside the first interval, for about twice its length.
        time.sleep(0.1)
        os.kill(ts.pid, signal.SIGSTOP)
        time.sleep(1.0)
        os.kill(ts.pid, signal.SIGCONT)
        out, err = ts.communicate(timeout=20)
        self.assertEqual(ts.returncode, 0, err)
        doc = json.loads((first + out).decode())
        validate(doc)
        st = doc["sysstat"]["hosts"][0]["statistics"]
        self.assertEqual([r["report"] for r in st],
                         ["interval"] * 3 + ["average"])
        q1 = 'tw_requests_total{queue="1"}'
        # The interval tallystat was stopped in lasted at least the stop
        # (1 s); the others are about 0.5 s (timed: below 0.9 s).
        late = [r for r in st[:3] if r["interval"] >= 1.0]
        self.assertGreaterEqual(len(late), 1, [r["interval"] for r in st])
        if TIMED:
            self.assertEqual(len([r for r in st[:3] if r["interval"] > 0.9]),
                             1, [r["interval"] for r in st])
        for r in st[:3]:
            row = self.one(r, q1, pid)
            self.assertRate(row["rate"], 2000,
                            "%s over %.3f s" % (q1, r["interval"]))
            self.assertLess(abs(row["value"] - row["rate"] * r["interval"]),
                            2 + row["value"] * 1e-3)
        row = self.one(late[0], q1, pid)
        if TIMED:
            self.assertGreater(row["value"], 2000 * 0.9 * (1 - RATE_TOL))
        self.assertRate(self.one(st[3], q1, pid)["rate"], 2000,
                        "average " + q1)

    def test_aggregate(self):
        """-a sums the same series of several processes."""
        _, a, _ = self.writer("w1", comm="tw-worker", rate=1000)
        _, b, _ = self.writer("w2", comm="tw-worker", rate=1000)
        time.sleep(0.3)
        st = self.json_of(self.tallystat("-a", "-o", "JSON", "1", "2",
                                         timeout=20))
        self.assertEqual([r["report"] for r in st],
                         ["since-start", "interval", "average"])
        row = self.one(st[0], 'tw_requests_total{queue="0"}')
        self.assertIsNone(row["pid"])
        self.assertEqual(sorted(row["pids"]), sorted([a, b]))
        self.assertEqual(row["value"], 2000)
        self.assertEqual(row["process"], "tw-worker")
        self.assertEqual(row["zone"], "*")
        self.assertEqual(self.one(st[0], "tw_in_flight")["value"], 14)
        self.assertEqual(self.one(st[0], "tw_load")["value"], 1.25)
        self.assertEqual(self.one(st[0], "tw_latency_ns")["count"] -
                         200000, self.one(st[0], "tw_latency_ns")["count"] -
                         200000)
        self.assertGreaterEqual(self.one(st[0], "tw_latency_ns")["count"],
                                200000)
        self.assertRate(self.one(st[1], 'tw_requests_total{queue="1"}')[
            "rate"], 2000, "summed")
        self.assertEqual(len(st[1]["series"]), 9)
        t = self.tallystat("-a", "tw_big_total")
        row = [l for l in t.stdout.splitlines() if "tw_big_total" in l][0]
        self.assertEqual(row.split()[1], "-")
        self.assertEqual(row.split()[3], "*")       # the zones differ
        self.assertEqual(row.split()[6], str(2 * 9007199254740993))

    def test_dead(self):
        """Rows of a process killed with SIGKILL are marked dead (JSON
        "dead", a State column in text); with -a its gauges are summed
        apart from the live processes', its counters with them."""
        pk, a, _ = self.writer("w1", comm="tw-worker")
        _, b, _ = self.writer("w2", comm="tw-worker")
        pk.kill()
        pk.wait(timeout=10)
        r = self.json_of(self.tallystat("-o", "JSON"))[0]
        for row in self.rows(r):
            self.assertIs(row["dead"], row["pid"] == a, row)
        self.assertEqual(self.one(r, "tw_in_flight", a)["value"], 7)
        self.assertEqual(self.one(r, "tw_in_flight", b)["value"], 7)

        t = self.tallystat("tw_in_flight", "tw_big_total")
        self.assertEqual(t.returncode, 0, t.stderr)
        lines = t.stdout.splitlines()
        head = [l for l in lines if re.match(
            r"^\d\d:\d\d:\d\d +PID +Command +Zone +State +Series +Type", l)]
        self.assertEqual(len(head), 1, t.stdout)
        rows = [l.split() for l in lines if "tw_" in l]
        self.assertEqual(len(rows), 4, t.stdout)
        for f in rows:
            self.assertEqual(f[4], "dead" if f[1] == str(a) else "live", f)

        # Summed: the live gauge alone, the dead one apart and marked;
        # counters of both, live.
        r = self.json_of(self.tallystat("-a", "-o", "JSON"))[0]
        g = self.rows(r, "tw_in_flight")
        self.assertEqual(sorted((x["dead"], x["value"], x["pids"])
                                for x in g),
                         [(False, 7, [b]), (True, 7, [a])])
        c = self.one(r, 'tw_requests_total{queue="0"}')
        self.assertEqual((c["dead"], c["value"]), (False, 2000))
        self.assertEqual(sorted(c["pids"]), sorted([a, b]))

    def test_dead_forked_child(self):
        """A segment whose creator is gone while a child it forked still
        updates it is not dead: its rows are live, its gauge shown, the
        child's adds counted; once the child is killed, they are dead."""
        p, a, _ = self.writer("fk", rate=1000, extra=["--fork-child"])
        child = int(self.ready[3])

        def kill_child():
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.addCleanup(kill_child)
        p.wait(timeout=10)
        q1 = 'tw_requests_total{queue="1"}'
        # The child adds 1000 a second: polled, at most 10 s.
        for _ in range(200):
            r = self.json_of(self.tallystat("-o", "JSON"))[0]
            if self.one(r, q1, a)["value"] > 2000:
                break
            time.sleep(0.05)
        self.assertGreater(self.one(r, q1, a)["value"], 2000)
        rows = self.rows(r, pid=a)
        self.assertTrue(rows)
        for row in rows:
            self.assertIs(row["dead"], False, row)
        self.assertEqual(self.one(r, "tw_in_flight", a)["value"], 7)
        kill_child()
        # Its locks go with it (it may stay a zombie a while): polled.
        for _ in range(200):
            r = self.json_of(self.tallystat("-o", "JSON"))[0]
            if all(row["dead"] for row in self.rows(r, pid=a)):
                break
            time.sleep(0.05)
        for row in self.rows(r, pid=a):
            self.assertIs(row["dead"], True, row)

    def test_reset(self):
        """A counter zeroed during the run is a reset, not a negative
        rate."""
        self.writer("tw", rate=1000, extra=["--reset-at", "1.3"])
        js = self.start_tallystat("-y", "-o", "JSON", "0.5", "6")
        tx = self.start_tallystat("-y", 'tw_requests_total{queue="1"}',
                                  "0.5", "6")
        out, err = js.communicate(timeout=20)
        self.assertEqual(js.returncode, 0, err)
        doc = json.loads(out)
        validate(doc)
        st = doc["sysstat"]["hosts"][0]["statistics"]
        q1 = 'tw_requests_total{queue="1"}'
        resets = [r for r in st[:-1] if self.one(r, q1)["reset"]]
        self.assertEqual(len(resets), 1, [self.one(r, q1) for r in st])
        self.assertIsNone(self.one(resets[0], q1)["rate"])
        self.assertGreaterEqual(self.one(resets[0], q1)["value"], 0)
        for r in st:
            for s in r["series"]:
                if s["kind"] != "gauge":
                    self.assertTrue(s["rate"] is None or s["rate"] >= 0, s)
                    self.assertGreaterEqual(s.get("value", s.get("count")),
                                            0, s)
        out, err = tx.communicate(timeout=20)
        self.assertEqual(tx.returncode, 0, err)
        self.assertEqual(len(re.findall(r"\breset\b", out)), 1, out)
        self.assertNotRegex(out, r" -\d")

    def test_exit_midrun(self):
        """A process that exits, or appears, during a run gets one line."""
        _, a, _ = self.writer("wa", rate=100)
        _, b, bpath = self.writer("wb", rate=100, extra=["--exit-after",
                                                         "1.0"])
        js = self.start_tallystat("-y", "-o", "JSON", "0.5", "7")
        tx = self.start_tallystat("-y", "tw_big_total", "0.5", "7")
        time.sleep(1.8)
        _, c, _ = self.writer("wc", rate=100)
        out, err = js.communicate(timeout=20)
        self.assertEqual(js.returncode, 0, err)
        self.assertEqual(err, "")
        doc = json.loads(out)
        validate(doc)
        st = doc["sysstat"]["hosts"][0]["statistics"]
        events = [e for r in st for e in r["events"]]
        self.assertEqual([(e["event"], e["pid"]) for e in events],
                         [("exited", b), ("started", c)], events)
        self.assertEqual(events[0]["path"], bpath)
        last = st[-2]
        self.assertEqual({s["pid"] for s in last["series"]}, {a, c})
        # c's series were registered after the previous read: their whole
        # value is the interval's, so the first interval with c shows its
        # counts, not an unknown.
        first_c = [r for r in st if self.rows(r, pid=c)][0]
        self.assertEqual(self.one(first_c, 'tw_requests_total{queue="0"}',
                                  c)["value"], 1000)
        out, err = tx.communicate(timeout=20)
        self.assertEqual(tx.returncode, 0, err)
        self.assertEqual(len(re.findall(r"\bexited\b", out)), 1, out)
        self.assertEqual(len(re.findall(r"\bstarted\b", out)), 1, out)
        self.assertRegex(out, r"\d+:\d+:\d+  %d  \S+  exited" % b)

    def test_corrupt(self):
        """An unreadable segment is named with its reason, once, and
        skipped."""
        _, pid, path = self.writer("tw")
        junk = os.path.join(self.dir, "junk.4242.tally")
        trunc = os.path.join(self.dir, "trunc.4243.tally")
        with open(junk, "wb") as f:
            f.write(os.urandom(8192))
        with open(path, "rb") as f:
            head = f.read(100)
        with open(trunc, "wb") as f:
            f.write(head)
        os.chmod(junk, 0o600)
        os.chmod(trunc, 0o600)
        r = self.tallystat("-o", "JSON", "0.3", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        for p in (junk, trunc):
            self.assertEqual(r.stderr.count(p), 1, r.stderr)
            self.assertRegex(r.stderr, r"tallystat: skipping %s: \S" %
                             re.escape(p))
        doc = json.loads(r.stdout)
        validate(doc)
        st = doc["sysstat"]["hosts"][0]["statistics"]
        skipped = {s["path"]: s["reason"] for s in st[0]["skipped"]}
        self.assertEqual(set(skipped), {junk, trunc})
        self.assertTrue(all(skipped.values()))
        self.assertEqual([s["skipped"] for s in st[1:]], [[]] * (len(st) - 1))
        self.assertEqual(self.one(st[0], "tw_big_total", pid)["value"],
                         9007199254740993)

    def test_service(self):
        """tallystat 1 3 against examples/queue-service: three reports with
        plausible rates."""
        if not os.access(SERVICE, os.X_OK):
            self.skipTest("queue-service is not built")
        rate = 20000
        svc = subprocess.Popen([SERVICE, "--threads", "2", "--seconds", "10",
                                "--rate", str(rate)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env=self.env)
        self.procs.append(svc)
        r, _, _ = select.select([svc.stdout], [], [], 10)
        self.assertTrue(r)
        self.assertIn(" segment ", svc.stdout.readline())
        time.sleep(0.5)
        t = self.tallystat("1", "3", timeout=20)
        self.assertEqual(t.returncode, 0, t.stderr)
        lines = t.stdout.splitlines()
        heads = [i for i, l in enumerate(lines)
                 if re.match(r"^\d\d:\d\d:\d\d +PID +Command +Series +Type", l)]
        self.assertEqual(len(heads), 3, t.stdout[:3000])
        hist = [l for l in lines
                if re.match(r"^\d\d:\d\d:\d\d +PID +Command +Series +Count", l)]
        self.assertEqual(len(hist), 3)
        self.assertEqual(len([l for l in lines if re.match(
            r"^Average: +PID +Command +Series +Type", l)]), 1)
        for n, i in enumerate(heads):
            end = lines.index("", i)
            total = 0.0
            for l in lines[i + 1:end]:
                f = l.split()
                if f[3].startswith("requests_total{"):
                    total += float(f[6])
            # Since start (n == 0) and per interval: the service's rate,
            # give or take what a loaded 2-CPU machine does to it (timed);
            # otherwise it served some.
            self.assertGreater(total, rate * 0.3 if TIMED else 0, (n, total))
            if TIMED:
                self.assertLess(total, rate * 1.5, (n, total))
        dur = [l for l in lines if " request_duration_ns " in l]
        self.assertEqual(len(dur), 4)     # three reports and the average
        for l in dur:
            f = l.split()
            self.assertGreater(float(f[4]), 0)                  # count
            self.assertGreater(float(f[7]), 0)                  # p50
            self.assertLessEqual(float(f[7]), float(f[10]))     # p50 <= max

    def pty_run(self, env, interval="0.3", reports=2):
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve(TALLYSTAT, [TALLYSTAT, interval], env)
            finally:
                os._exit(127)
        out = b""
        deadline = time.time() + 15
        sent = False
        status = None
        try:
            while time.time() < deadline:
                r, _, _ = select.select([fd], [], [], 0.2)
                if r:
                    try:
                        chunk = os.read(fd, 65536)
                    except OSError:
                        break
                    if not chunk:
                        break
                    out += chunk
                heads = len(re.findall(rb"\d\d:\d\d:\d\d(?:\x1b\[0m)?\s+"
                                       rb"(?:\x1b\[\d+m)?PID", out))
                if heads == 0:
                    heads = len(re.findall(rb"PID +Command", out))
                if not sent and out.count(b"PID") >= reports + 1:
                    os.kill(pid, signal.SIGINT)
                    sent = True
        finally:
            if not sent:
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            os.close(fd)
        self.assertTrue(sent, out.decode(errors="replace"))
        return out.decode(errors="replace"), status

    def test_pty(self):
        """On a terminal: colour, and SIGINT prints Average: and exits 0."""
        self.writer("tw", rate=500)
        out, status = self.pty_run(self.env)
        self.assertTrue(os.WIFEXITED(status), status)
        self.assertEqual(os.WEXITSTATUS(status), 0, out)
        self.assertIn("Average:", out)
        tail = out[out.index("Average:"):]
        self.assertIn("tw_requests_total", tail)
        self.assertIn("\x1b[1m", out)           # bold headers on a tty
        env = dict(self.env, NO_COLOR="1")
        out, status = self.pty_run(env)
        self.assertEqual(os.WEXITSTATUS(status), 0, out)
        self.assertIn("Average:", out)
        self.assertNotIn("\x1b[", out)
        env = dict(self.env, S_COLORS="never")
        out, status = self.pty_run(env)
        self.assertNotIn("\x1b[", out)

    def test_bad_args(self):
        """Bad arguments: exit 2, one line saying what, and one with the
        synopsis and a pointer to --help (not the whole usage).  A word
        after the interval (tallystat 1 abc) and a CPU the machine does
        not have (-P) are bad arguments too."""
        ncpu = os.sysconf("SC_NPROCESSORS_CONF")
        for args in (["-P", "x"], ["-P", "3-1"], ["-o", "XML"], ["--bogus"],
                     ["-p", "abc"], ["-p"], ["1", "0"], ["0"], ["1", "2", "3"],
                     ["-C", "("], ["{a=1}"], ["a{b=~\"(\"}"], ["1", "x{"],
                     ["--list", "1"], ["--clean", "-p", "1"], ["-w", "3"],
                     ["--list", "--clean"], ["-x"], ["1", "abc"],
                     ["0.5", "3", "tw_big_total"], ["-P", str(ncpu)],
                     ["-P", "0,%d" % (ncpu + 3)], ["--dir"], ["--width"],
                     ["--zone", ""], ["--allow-uid", "x"], ["-o"]):
            r = self.tallystat(*args, timeout=5)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(r.stdout, "", args)
            lines = r.stderr.splitlines()
            self.assertEqual(len(lines), 2, (args, r.stderr))
            self.assertRegex(lines[0], r"^tallystat: \S", args)
            self.assertIn("Usage: tallystat", lines[1], args)
            self.assertIn("--help", lines[1], args)
        r = self.tallystat("1", "abc", timeout=5)
        self.assertIn("'abc'", r.stderr)
        # A long option (with no letter) without its value is named as it
        # was written.
        for opt in ("--dir", "--allow-uid"):
            r = self.tallystat(opt, timeout=5)
            self.assertEqual(r.returncode, 2, (opt, r.stderr))
            self.assertIn("option '%s' needs a value" % opt, r.stderr)
        r = self.tallystat("-p", timeout=5)
        self.assertIn("option -p needs a value", r.stderr)
        r = self.tallystat("-P", str(ncpu), timeout=5)
        self.assertIn("no CPU %d" % ncpu, r.stderr)
        r = self.tallystat("-P", "0-%d" % (ncpu - 1), timeout=5)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.tallystat("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("Usage: tallystat", r.stdout)
        r = self.tallystat("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^tallystat \d")
        r = self.tallystat("--dir", os.path.join(self.dir, "missing"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("missing", r.stderr)
        self.assertEqual(r.stdout, "")     # fails before the banner

    def test_allow_group(self):
        """A monitoring user in the writer's TALLY_GROUP reads its segments
        with --allow-group (and lists them); without it, the directory of
        another user is refused, naming its owner and the option.  Needs
        root, to play the monitoring user (uid 65534) with setpriv."""
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root and setpriv to play another user")
        gid = None
        for g in range(61300, 61400):
            if subprocess.run(["getent", "group", str(g)],
                              capture_output=True).returncode != 0:
                gid = g
                break
        self.assertIsNotNone(gid, "no free gid in 61300-61399")
        as_monitor = ["setpriv", "--reuid=65534", "--regid=%d" % gid,
                      "--clear-groups", "--"]
        if subprocess.run(as_monitor + ["test", "-x", TALLYSTAT]).returncode:
            self.skipTest("uid 65534 cannot reach " + TALLYSTAT)
        os.chown(self.dir, -1, gid)
        os.chmod(self.dir, 0o750)
        _, pid, path = self.writer(
            "wg", comm="tw-group", env=dict(self.env, TALLY_GROUP=str(gid)))
        st = os.stat(path)
        self.assertEqual((st.st_mode & 0o777, st.st_gid), (0o640, gid))

        def run(*args):
            return subprocess.run(as_monitor + [TALLYSTAT, "--dir", self.dir]
                                  + list(args), capture_output=True,
                                  text=True, timeout=30, env=self.env)
        r = run("tw_big_total")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertRegex(r.stderr, r"owned by uid 0.*--allow-group")
        r = run("--allow-group", "tw_big_total")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tw_big_total", r.stdout)
        self.assertNotIn("skipping", r.stderr)
        r = run("--allow-group", "--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"%d +tw-group +wg +alive" % pid)
        r = run("--allow-uid", "0", "--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"%d +tw-group +wg +alive" % pid)
        r = run("--allow-uid", "x")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--allow-uid", r.stderr)

    def test_dir_errors(self):
        """A selection that keeps nothing says so on stderr (exit 0); a
        relative TALLY_DIR, and a directory the library refuses, end the
        run with one clear line (exit 1) before any output."""
        self.writer("tw")
        r = self.tallystat("nothing_matches_this")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "tallystat: no series matches the "
                         "selectors, -p, -C or --zone given\n")
        self.assertIn("PID", r.stdout)
        r = self.tallystat("-p", "1")
        self.assertIn("no series matches", r.stderr)
        r = self.tallystat("tw_big_total")
        self.assertEqual(r.stderr, "")
        r = self.tallystat()
        self.assertEqual(r.stderr, "")

        r = self.tallystat(env=dict(self.env, TALLY_DIR="relative"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertRegex(r.stderr, r"^tallystat: TALLY_DIR=relative: "
                         r"expected an absolute path[^\n]*\n$")
        r = self.tallystat("--list", env=dict(self.env, TALLY_DIR="rel"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("TALLY_DIR=rel:", r.stderr)

        # A world-writable directory: the library refuses to read it (as
        # writers refuse to create a zone in it); tallystat reports that
        # refusal in one line naming the directory.
        ww = os.path.join(self.dir, "ww")
        os.mkdir(ww)
        os.chmod(ww, 0o777)
        r = self.tallystat(env=dict(self.env, TALLY_DIR=ww))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertRegex(r.stderr, r"^tallystat: .*" + re.escape(ww))

    def test_list_clean(self):
        """--list shows every segment; --clean removes the dead ones and
        names each."""
        _, a, apath = self.writer("wa", comm="tw-alive")
        keep = dict(self.env, TALLY_KEEP="1")
        p, b, bpath = self.writer("wb", comm="tw-dead", env=keep,
                                  extra=["--exit-after", "0.1"])
        p.wait(timeout=10)
        self.assertTrue(os.path.exists(bpath))
        t = self.tallystat("--list")
        self.assertEqual(t.returncode, 0, t.stderr)
        self.assertRegex(t.stdout, r"PID +Command +Zone +State +Series +File "
                         r"+Memory +Path")
        self.assertRegex(t.stdout, r"%d +tw-alive +wa +alive +9 +\S+ +\S+ +%s"
                         % (a, re.escape(apath)))
        self.assertRegex(t.stdout, r"%d +tw-dead +wb +dead +9 " % b)
        st = self.json_of(self.tallystat("--list", "-o", "JSON"))
        segs = {s["pid"]: s for s in st[0]["segments"]}
        self.assertEqual(segs[a]["state"], "alive")
        self.assertEqual(segs[b]["state"], "dead")
        self.assertEqual(segs[a]["series"], 9)
        self.assertGreater(segs[a]["file_bytes"], 0)
        self.assertGreater(segs[a]["resident_bytes"], 0)
        # The zone's counters, as the exporter's tally_segment_* show them.
        for k in ("alloc_refused", "copies_refused", "register_failed",
                  "redefinitions"):
            self.assertEqual(segs[a][k], 0, k)
        # The memory the dead segment holds, to the byte.
        dead = os.stat(bpath).st_blocks * 512
        self.assertRegex(t.stdout, r"\n1 dead segment holds \S+ of memory "
                         r"\(%d bytes\)\n" % dead)
        # The default retention keeps it for post-mortem reading (and
        # stamps it: found dead now, the owner's write permission gone).
        c = self.tallystat("--clean")
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertIn("0 files removed", c.stdout)
        self.assertIn("1 dead segment kept, holding", c.stdout)
        self.assertIn("(%d bytes)" % dead, c.stdout)
        self.assertTrue(os.path.exists(bpath))
        self.assertEqual(os.stat(bpath).st_mode & 0o777, 0o400)
        r = self.tallystat("--clean", env=dict(self.env, TALLY_RETAIN="1x"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("TALLY_RETAIN=1x", r.stderr)
        c = self.tallystat("--clean", env=dict(self.env, TALLY_RETAIN="0"))
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertIn("removed %s (pid %d, tw-dead, zone wb, 9 series): "
                      "its processes are gone" % (bpath, b), c.stdout)
        self.assertIn("1 file removed", c.stdout)
        self.assertNotIn("kept", c.stdout)
        self.assertFalse(os.path.exists(bpath))
        self.assertTrue(os.path.exists(apath))
        c = self.tallystat("--clean", env=dict(self.env, TALLY_RETAIN="0"))
        self.assertIn("0 files removed", c.stdout)
        t = self.tallystat("--list")
        self.assertIn("\n0 dead segments hold 0B of memory (0 bytes)\n",
                      t.stdout)


if __name__ == "__main__":
    unittest.main()
