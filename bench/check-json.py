#!/usr/bin/env python3
"""check-json.py: run one scenario of tally-bench with --json and check the
document against the fields documented in tally-bench(1).

usage: check-json.py TALLY_BENCH SCENARIO [extra tally-bench arguments]

The JSON must parse strictly (no NaN or Infinity), carry the common fields
(bench, params, rows, targets, summary, ok) and, in every row, the fields of
its scenario; figures not measured are null.  Exits 0 when it does, 1 (with
the reason) when it does not or when tally-bench failed.
"""
import json
import subprocess
import sys

# Fields every row of a scenario has (null allowed where noted in the man
# page), beyond config, profile, threads, pinned, slabs, runs, check, note.
ROW_FIELDS = {
    "oversub": ["x_atomic", "vs_1_thread"],
    "pernode": ["nodes", "x_percpu"],
    "falseshare": ["x_padded", "x_percpu"],
    "inflight": ["accounting_share", "x_none", "x_atomic"],
    "wakeup": ["vcsw_per_kevent", "ivcsw_per_kevent", "res_per_kevent",
               "res_per_s"],
}
PARAMS = {
    "oversub": ["adds", "repeat", "max_threads", "cpus", "ncpus", "slabs",
                "memory_counters", "note"],
    "pernode": ["adds", "flows", "packets_per_flow", "repeat", "cpus",
                "ncpus", "slabs", "forced_nodes", "real_nodes", "note"],
    "falseshare": ["adds", "repeat", "threads", "cpus", "note"],
    "inflight": ["requests", "work_rounds", "repeat", "threads", "cpus",
                 "note"],
    "wakeup": ["events_per_writer", "writers", "readers", "repeat", "cpus",
               "kernel", "preempt_rt", "res_readable", "cpu_percent",
               "note"],
}
COMMON_ROW = ["config", "profile", "threads", "pinned", "slabs", "runs",
              "check", "note"]
TIMED_ROW = ["ns_per_op", "mops", "ns_per_op_median", "mops_median"]


def reject_constant(name):
    raise ValueError("non-standard JSON constant %s" % name)


def fail(msg):
    print("check-json: " + msg, file=sys.stderr)
    sys.exit(1)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ROW_FIELDS:
        fail("usage: check-json.py TALLY_BENCH {%s} [args]" %
             ",".join(ROW_FIELDS))
    exe, scen = sys.argv[1], sys.argv[2]
    cmd = [exe, scen, "--json", "--quiet"] + sys.argv[3:]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        fail("%s exited %d" % (" ".join(cmd), p.returncode))
    try:
        doc = json.loads(p.stdout.decode(), parse_constant=reject_constant)
    except ValueError as e:
        fail("not strict JSON: %s" % e)
    for k in ["bench", "params", "rows", "targets", "summary", "ok"]:
        if k not in doc:
            fail("missing top-level field %r" % k)
    if doc["bench"] != scen:
        fail("bench is %r, not %r" % (doc["bench"], scen))
    if doc["ok"] is not True:
        fail("ok is not true")
    for k in PARAMS[scen]:
        if k not in doc["params"]:
            fail("params lacks %r" % k)
    if not doc["rows"]:
        fail("no rows")
    timed = 0
    for i, r in enumerate(doc["rows"]):
        where = "row %d (%s, %s)" % (i, r.get("config"), r.get("profile"))
        for k in COMMON_ROW + ROW_FIELDS[scen]:
            if k not in r:
                fail("%s lacks %r" % (where, k))
        for k in ROW_FIELDS[scen]:
            if r[k] is not None and not is_num(r[k]):
                fail("%s: %r is neither a number nor null" % (where, k))
        if r["runs"] > 0:
            timed += 1
            for k in TIMED_ROW:
                if k not in r:
                    fail("%s lacks %r" % (where, k))
            if len(r["ns_per_op"]["samples"]) != r["runs"]:
                fail("%s: %d samples for %d runs" %
                     (where, len(r["ns_per_op"]["samples"]), r["runs"]))
            if not is_num(r["mops_median"]) or r["mops_median"] <= 0:
                fail("%s: mops_median %r" % (where, r["mops_median"]))
        if "expected" in r and r["check"] not in ("ok", "-") and \
                not r["check"].startswith("lost"):
            fail("%s: check %r" % (where, r["check"]))
        if "bytes_per_counter" in r and r["bytes_per_counter"] is not None \
                and not is_num(r["bytes_per_counter"]):
            fail("%s: bytes_per_counter %r" % (where, r["bytes_per_counter"]))
    if timed == 0:
        fail("no timed rows")
    if scen in ("oversub", "pernode"):
        if not any("bytes_per_counter" in r for r in doc["rows"]):
            fail("no memory rows")
    if scen == "wakeup":
        if not isinstance(doc["params"]["preempt_rt"], bool):
            fail("preempt_rt is not a boolean")
        for r in doc["rows"]:
            if r["res_per_s"] is None and not doc["params"]["note"]:
                fail("RES is null without a note")
    print("check-json: %s: %d rows, strict JSON, documented fields present"
          % (scen, len(doc["rows"])))


if __name__ == "__main__":
    main()
