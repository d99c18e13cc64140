#!/usr/bin/env python3
"""check-json.py KIND CMD...: run a tally-bench command with --json and
check that its output is strict JSON (no NaN or Infinity, which Python
accepts by default and other parsers refuse) with the fields that
tally-bench(1) documents for KIND (counter, alloc, metrics or exporter)."""
import json
import subprocess
import sys


def refuse(name):
    raise ValueError("not JSON: %s (a figure not measured must be null)" % name)


def need(cond, what):
    if not cond:
        raise AssertionError(what)


def number_or_null(v):
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def check_targets(doc, keys):
    for t in doc["targets"]:
        for k in keys:
            need(k in t, "target without %r: %r" % (k, t))
        value = t[keys[2]]
        need(number_or_null(value), "target value %r" % (value,))
        if value is None:
            need(t["note"], "a target not measured says why: %r" % t)


def check_doc(kind, doc):
    need(doc.get("bench") == kind, "bench is %r, not %r" % (doc.get("bench"), kind))
    need(doc["rows"], "no rows")
    if kind in ("counter", "alloc"):
        rate = "mops" if kind == "counter" else "mrules"
        for k in ("params", "rows", "targets", "summary", "ok"):
            need(k in doc, "no %r" % k)
        need(doc["ok"] is True, "a check failed: %r" % doc["summary"])
        for r in doc["rows"]:
            for k in ("config", "profile", "threads", "pinned", "slabs",
                      "runs", "check", "note"):
                need(k in r, "row without %r: %r" % (k, r))
            if r["runs"]:
                for k in ("ns_per_op", rate):
                    st = r[k]
                    for s in ("min", "median", "max", "mean", "stddev", "samples"):
                        need(s in st, "%s without %r" % (k, s))
                    need(len(st["samples"]) == r["runs"], "samples != runs")
                need(number_or_null(r["ns_per_op_median"]), "ns_per_op_median")
                need(number_or_null(r[rate + "_median"]), rate + "_median")
        check_targets(doc, ("target", "cmp", "measured", "limit", "unit",
                            "status", "note"))
        configs = {r["config"] for r in doc["rows"]}
        if kind == "counter":
            for c in ("thread-local add", "shared atomic", "racy +=",
                      "sched_getcpu atomics", "tally percpu"):
                need(c in configs, "no %r row" % c)
            for r in doc["rows"]:
                if r["config"] == "sched_getcpu atomics":
                    need(r["check"] == "ok" and r["lost"] == 0,
                         "sched_getcpu atomics lost counts: %r" % r)
        else:
            mem = [r for r in doc["rows"] if r["profile"] == "memory"]
            need(mem and all("bytes_per_counter" in r for r in mem),
                 "memory rows without bytes_per_counter")
    else:
        for r in doc["rows"]:
            for k in ("what", "unit", "runs", "min", "median", "max", "values"):
                need(k in r, "row without %r: %r" % (k, r))
        check_targets(doc, ("what", "limit", "value", "met", "note"))


def main():
    kind, cmd = sys.argv[1], sys.argv[2:]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
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
    except (ValueError, KeyError, AssertionError, TypeError) as e:
        print("%s: %s: %s" % (" ".join(cmd), type(e).__name__, e))
        print(p.stdout[:4000])
        return 1
    print("%s: %s ok" % (" ".join(cmd[1:3]), kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
