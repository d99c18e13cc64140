#!/usr/bin/env python3
"""check-json.py KIND CMD...: run a tally-bench command with --json and
check that its output is strict JSON (no NaN or Infinity, which Python
accepts by default and other parsers refuse) with the fields that
tally-bench(1) documents for KIND: counter, alloc, metrics, exporter,
oversub, pernode, falseshare, inflight or wakeup.  KIND may be a
comma-separated list for `tally-bench all --json`, whose output is an
array of documents in that order.  Exits 0 when the output passes, 1 (with
the reason) when it does not or when tally-bench failed."""
import json
import subprocess
import sys

# The scenarios that print a bench_doc (bench_print_json): the name of
# their rate, the params they always have and the fields beyond the common
# ones that every row has (each a number or null).
DOC_KINDS = {
    "counter": ("mops", [], []),
    "alloc": ("mrules", [], []),
    "oversub": ("mops",
                ["adds", "repeat", "max_threads", "cpus", "ncpus", "slabs",
                 "memory_counters", "note"],
                ["x_atomic", "vs_1_thread"]),
    "pernode": ("mops",
                ["adds", "flows", "packets_per_flow", "repeat", "cpus",
                 "ncpus", "slabs", "forced_nodes", "real_nodes", "note"],
                ["nodes", "x_percpu"]),
    "falseshare": ("mops",
                   ["adds", "repeat", "threads", "cpus", "note"],
                   ["x_padded", "x_percpu"]),
    "inflight": ("mops",
                 ["requests", "work_rounds", "repeat", "threads", "cpus",
                  "note"],
                 ["accounting_share", "x_none", "x_atomic"]),
    "wakeup": ("mops",
               ["events_per_writer", "writers", "readers", "repeat", "cpus",
                "kernel", "preempt_rt", "res_readable", "cpu_percent",
                "note"],
               ["vcsw_per_kevent", "ivcsw_per_kevent", "res_per_kevent",
                "res_per_s"]),
}
# metrics and exporter print rows of measurements of their own.
ROW_KINDS = ("metrics", "exporter")
COMMON_ROW = ("config", "profile", "threads", "pinned", "slabs", "runs",
              "check", "note")
STATS = ("min", "median", "max", "mean", "stddev", "samples")


def refuse(name):
    raise ValueError("not JSON: %s (a figure not measured must be null)" % name)


def need(cond, what):
    if not cond:
        raise AssertionError(what)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def number_or_null(v):
    return v is None or is_num(v)


def check_targets(doc, keys):
    for t in doc["targets"]:
        for k in keys:
            need(k in t, "target without %r: %r" % (k, t))
        value = t[keys[2]]
        need(number_or_null(value), "target value %r" % (value,))
        if value is None:
            need(t["note"], "a target not measured says why: %r" % t)


def check_bench_doc(kind, doc):
    rate, params, fields = DOC_KINDS[kind]
    for k in ("params", "rows", "targets", "summary", "ok"):
        need(k in doc, "no %r" % k)
    need(doc["ok"] is True, "a check failed: %r" % doc["summary"])
    for k in params:
        need(k in doc["params"], "params without %r" % k)
    timed = 0
    for i, r in enumerate(doc["rows"]):
        where = "row %d (%s, %s)" % (i, r.get("config"), r.get("profile"))
        for k in COMMON_ROW + tuple(fields):
            need(k in r, "%s without %r" % (where, k))
        for k in fields:
            need(number_or_null(r[k]), "%s: %r is %r" % (where, k, r[k]))
        if r["runs"]:
            timed += 1
            for k in ("ns_per_op", rate):
                st = r[k]
                for s in STATS:
                    need(s in st, "%s: %s without %r" % (where, k, s))
                need(len(st["samples"]) == r["runs"],
                     "%s: %d samples for %d runs" %
                     (where, len(st["samples"]), r["runs"]))
            need(number_or_null(r["ns_per_op_median"]),
                 "%s: ns_per_op_median" % where)
            need(is_num(r[rate + "_median"]) and r[rate + "_median"] > 0,
                 "%s: %s_median %r" % (where, rate, r[rate + "_median"]))
        if "bytes_per_counter" in r:
            need(number_or_null(r["bytes_per_counter"]),
                 "%s: bytes_per_counter %r" % (where, r["bytes_per_counter"]))
    need(timed, "no timed rows")
    check_targets(doc, ("target", "cmp", "measured", "limit", "unit",
                        "status", "note", "cpu_dependent"))
    for t in doc["targets"]:
        need(t["cpu_dependent"] is None or
             (isinstance(t["cpu_dependent"], str) and t["cpu_dependent"]),
             "cpu_dependent is null or says what of the CPU: %r" % t)
    configs = {r["config"] for r in doc["rows"]}
    if kind == "counter":
        for c in ("thread-local add", "shared atomic", "racy +=",
                  "sched_getcpu atomics", "tally percpu", "tally adaptive",
                  "tally pernode", "tally pernode (2 nodes)",
                  "tally shared (2 nodes)"):
            need(c in configs, "no %r row" % c)
        for r in doc["rows"]:
            if r["config"] == "sched_getcpu atomics":
                need(r["check"] == "ok" and r["lost"] == 0,
                     "sched_getcpu atomics lost counts: %r" % r)
    elif kind in ("alloc", "oversub", "pernode"):
        mem = "memory" if kind != "pernode" else "flows"
        mem = [r for r in doc["rows"] if r["profile"] == mem]
        need(mem and all("bytes_per_counter" in r for r in mem),
             "no memory rows with bytes_per_counter")
    elif kind == "wakeup":
        need(isinstance(doc["params"]["preempt_rt"], bool),
             "preempt_rt is not a boolean")
        for v in doc["params"]["cpu_percent"].values():
            need(number_or_null(v), "cpu_percent %r" % (v,))
        for r in doc["rows"]:
            need(r["res_per_s"] is not None or doc["params"]["note"],
                 "RES is null without a note")


def check_host(doc):
    """Every document says where it ran (bench/host.c)."""
    need("host" in doc, "no 'host' (where the run ran)")
    h = doc["host"]
    for k in ("vendor", "family", "model", "model_name", "kernel"):
        need(isinstance(h.get(k), str) and h[k], "host without %r: %r" % (k, h))
    need(isinstance(h.get("glibc_rseq"), bool), "host glibc_rseq %r" % (h,))
    need(is_num(h.get("cpus")) and h["cpus"] > 0, "host cpus %r" % (h,))
    need(number_or_null(h.get("load1")), "host load1 %r" % (h,))


def check_doc(kind, doc):
    need(doc.get("bench") == kind, "bench is %r, not %r" % (doc.get("bench"), kind))
    check_host(doc)
    need(doc["rows"], "no rows")
    if kind in DOC_KINDS:
        check_bench_doc(kind, doc)
    elif kind in ROW_KINDS:
        for r in doc["rows"]:
            for k in ("what", "unit", "runs", "min", "median", "max", "values"):
                need(k in r, "row without %r: %r" % (k, r))
        check_targets(doc, ("what", "limit", "value", "met", "note"))
    else:
        raise AssertionError("unknown kind %r" % kind)


def main():
    if len(sys.argv) < 3:
        print("usage: check-json.py KIND[,KIND...] TALLY_BENCH ARGS...",
              file=sys.stderr)
        return 1
    kind, cmd = sys.argv[1], sys.argv[2:]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=600)
    if p.returncode != 0:
        print("%s exited %d" % (" ".join(cmd), p.returncode))
        return 1
    try:
        doc = json.loads(p.stdout, parse_constant=refuse)
        docs = doc if isinstance(doc, list) else [doc]
        kinds = kind.split(",")
        need(len(docs) == len(kinds), "%d documents, not %d" % (len(docs), len(kinds)))
        for k, d in zip(kinds, docs):
            check_doc(k, d)
    except (ValueError, KeyError, AssertionError, TypeError, AttributeError) as e:
        print("%s: %s: %s" % (" ".join(cmd), type(e).__name__, e))
        print(p.stdout[:4000])
        return 1
    print("%s: %s ok" % (" ".join(cmd[1:3]), kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
