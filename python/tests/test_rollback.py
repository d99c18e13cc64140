"""A metric defined again as an earlier version defined it, after a
version that defined it otherwise (a rollback, or two versions taking
turns in a rolling deploy): the earlier definition's series resume their
counts, as a C program's do (test-shared.c,
restart_with_changed_definitions), in one process and across processes
that share a zone."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap

import pytest

from conftest import HERE, child_env, run_py
from test_exporter import EXPORTER, _scrape

# Each case: the two definitions (constructor calls of tally, NAME the
# metric's name) and the update each version makes once per run.
CASES = {
    # Other label names: the one change C cannot see in a record, so
    # the Python package retires the old series (tally_metric_redefine),
    # and the label names of its series bring them back.
    "counter_labels": (
        'tally.Counter(NAME, "Jobs.", ["a"], registry=None)',
        'tally.Counter(NAME, "Jobs.", ["a", "b"], registry=None)',
        "inc(1)"),
    # A gauge's record is its definition (a float gauge, or a
    # per-process gauge with its mode): C's own generations.
    "gauge_mode": (
        'tally.Gauge(NAME, "Busy.", ["a"], registry=None)',
        'tally.Gauge(NAME, "Busy.", ["a"], registry=None, '
        'multiprocess_mode="livesum")',
        "inc(1)"),
    # The gauge is a record of the metric's own name: the counter's
    # series are retired while it is current, and come back after.
    "counter_then_gauge": (
        'tally.Counter(NAME, "Jobs.", ["a"], registry=None)',
        'tally.Gauge(NAME, "Jobs.", ["a"], registry=None)',
        "inc(1)"),
    # A summary's record is its definition too: other label names are
    # shown next to the old ones, which resume.
    "summary_labels": (
        'tally.Summary(NAME, "Lat.", ["a"], registry=None)',
        'tally.Summary(NAME, "Lat.", ["a", "b"], registry=None)',
        "observe(1)"),
    # A histogram's record is its definition: C's own generations.
    "histogram_buckets": (
        'tally.Histogram(NAME, "Lat.", ["a"], buckets=[1, 2], '
        'registry=None)',
        'tally.Histogram(NAME, "Lat.", ["a"], buckets=[1, 5], '
        'registry=None)',
        "observe(1)"),
}

PARAMS = list(CASES)

# One run of a version: define the metric, update its child once per
# count, print what read() shows of the metric (sample name, labels,
# value).
RUN = textwrap.dedent('''
    import json, sys
    import tally_metrics as tally
    NAME = {name!r}
    shown = []
    for version, count in {steps!r}:
        m = {defs!r}[version]
        m = eval(m, dict(tally=tally, NAME=NAME))
        child = m.labels(*["x"] * len(m._labelnames))
        for _ in range(count):
            getattr(child, {update!r}.split("(")[0])(1)
        shown.append(sorted(
            (s.name, sorted(s.labels.items()), s.value)
            for f in tally.read().families if f.name == NAME
            for s in f.samples
            if s.name in (NAME, NAME + "_total", NAME + "_count")))
    print(json.dumps(shown))
''')


def steps_run(name, defs, update, steps, env):
    out = run_py(RUN.format(name=name, defs=defs, update=update,
                            steps=steps), env)
    return [[(n, dict(tuple(p) for p in labels), v) for n, labels, v in s]
            for s in json.loads(out)]


def v1_value(shown):
    # Version 1's series: label a only.
    vals = [v for _, labels, v in shown if labels == {"a": "x"}]
    assert len(vals) == 1, shown
    return vals[0]


@pytest.mark.parametrize("case", PARAMS)
def test_rollback_in_one_process(case, tally_dir):
    v1, v2, update = CASES[case]
    env = child_env(tally_dir, TALLY_ZONE="rollback_one")
    shown = steps_run("r_" + case, {1: v1, 2: v2}, update,
                      [(1, 3), (2, 5), (1, 4)], env)
    assert v1_value(shown[0]) == 3
    assert v1_value(shown[2]) == 7


@pytest.mark.parametrize("case", PARAMS)
def test_rollback_across_processes(case, tally_dir):
    v1, v2, update = CASES[case]
    env = child_env(tally_dir, TALLY_ZONE="rollback_many")
    name = "r_" + case
    defs = {1: v1, 2: v2}
    assert v1_value(steps_run(name, defs, update, [(1, 3)], env)[0]) == 3
    steps_run(name, defs, update, [(2, 5)], env)
    # Version 1 again, twice: its series resume, and go on.
    assert v1_value(steps_run(name, defs, update, [(1, 4)], env)[0]) == 7
    assert v1_value(steps_run(name, defs, update, [(1, 1)], env)[0]) == 8


# Every reader after each version of a case that retires series: tally-
# dump, tallystat and tally-exporter of the build tree (each skipped when
# not built) show one definition of the metric, the current one, with
# its resumed value, never a series of the other definition.
BUILD = os.path.join(HERE, "..", "..", "build")
DUMP = os.path.join(BUILD, "examples", "tally-dump")
TALLYSTAT = os.environ.get("TALLY_TALLYSTAT") or os.path.join(
    BUILD, "programs", "tallystat", "tallystat")
SERIES = r"(r_\w+)(\{[^}]*\})?"


def _labels(text):
    return frozenset(re.findall(r'(\w+)="([^"]*)"', text or ""))


def _shown_by_tools(tally_dir, prefix):
    """{reader: {(kind, series name, labels): value}} of the series
    named @prefix..., as each reader built shows them."""
    shown = {}
    if os.access(DUMP, os.X_OK):
        out = subprocess.run([DUMP, "--dir", tally_dir], check=True,
                             capture_output=True, text=True).stdout
        shown["tally-dump"] = {
            (k, n, _labels(l)): float(v) for k, n, l, v in re.findall(
                r"(counter|gauge)\s+" + SERIES + r"\s+(\S+)", out)}
    if os.access(TALLYSTAT, os.X_OK):
        out = subprocess.run([TALLYSTAT, "--dir", tally_dir, prefix + "*"],
                             check=True, capture_output=True,
                             text=True).stdout
        shown["tallystat"] = {
            (k, n, _labels(l)): float(v) for n, l, k, v in re.findall(
                SERIES + r"\s+(counter|gauge)\s+(\S+)", out)}
    for reader in shown:
        shown[reader] = {key: v for key, v in shown[reader].items()
                         if key[1].startswith(prefix)}
    return shown


def _shown_by_exporter(tally_dir, prefix):
    """The TYPE lines and the samples (pid and process labels left out)
    of tally-exporter's scrape for the metrics named @prefix..."""
    text = _scrape(tally_dir)
    types = [line.split()[2:] for line in text.splitlines()
             if line.startswith("# TYPE " + prefix)]
    samples = {}
    for n, l, v in re.findall(r"^" + SERIES + r" (\S+)$", text, re.M):
        if n.startswith(prefix):
            samples[(n, _labels(l) - {("process", "python")} -
                     {p for p in _labels(l) if p[0] == "pid"})] = float(v)
    return types, samples


@pytest.mark.parametrize("case", ["counter_labels", "counter_then_gauge"])
def test_readers_show_one_definition(case, tally_dir):
    v1, v2, update = CASES[case]
    env = child_env(tally_dir, TALLY_ZONE="rollback_readers")
    name = "r_" + case
    defs = {1: v1, 2: v2}
    a, ab = frozenset({("a", "x")}), frozenset({("a", "x"), ("b", "x")})
    v1_series = ("counter", name + "_total", a)
    v2_series = ("counter", name + "_total", ab) if case == \
        "counter_labels" else ("gauge", name, a)
    has_exporter = os.access(EXPORTER, os.X_OK) and shutil.which("curl")
    for steps, current, value in (([(1, 3)], v1_series, 3),
                                  ([(2, 5)], v2_series, 5),
                                  ([(1, 4)], v1_series, 7)):
        steps_run(name, defs, update, steps, env)
        for reader, shown in _shown_by_tools(tally_dir, name).items():
            assert shown == {current: value}, (reader, steps)
        if not has_exporter:
            continue
        types, samples = _shown_by_exporter(tally_dir, name)
        # A gauge of a process that is gone is not served; a counter is.
        if current[0] == "counter":
            assert types == [[current[1], "counter"]], steps
            assert samples == {current[1:]: value}, steps
        else:
            assert types in ([], [[current[1], "gauge"]]), steps
            assert set(samples) <= {current[1:]}, steps
