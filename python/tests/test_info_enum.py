"""Info and Enum are info and enum metrics of the format (2.8), under
their own names: the reader API says what they are (kinds TALLY_INFO and
TALLY_ENUM in _native.read()), and the package's exposition of them is
prometheus_client's, in both formats.  A shared zone of 2.6 or 2.7
takes them too (its readers skip their series); one older than 2.6,
made by tally 0.3, cannot hold them and refuses them with one line that
says what to do."""
from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading

import prometheus_client
import prometheus_client.openmetrics.parser
import prometheus_client.parser
import pytest
from prometheus_client.openmetrics.exposition import \
    generate_latest as om_latest

from conftest import child_env
import tally_metrics as tally
from tally_metrics import _native


def _mine(text, uniq, openmetrics):
    """The metrics of @text whose names hold @uniq, as prometheus_client's
    parser of the format reads them: name, type, help and samples (name,
    labels, value), whatever the spelling of a value."""
    parse = (prometheus_client.openmetrics.parser.text_string_to_metric_families
             if openmetrics else
             prometheus_client.parser.text_string_to_metric_families)
    return sorted(
        (f.name, f.type, f.documentation,
         sorted((x.name, sorted(x.labels.items()), x.value)
                for x in f.samples))
        for f in parse(text) if uniq in f.name)


@pytest.mark.parametrize("openmetrics", [False, True])
def test_exposition_is_prometheus_clients(uniq, openmetrics):
    reg = tally.CollectorRegistry()
    preg = prometheus_client.CollectorRegistry()
    for lib, r in ((tally, reg), (prometheus_client, preg)):
        i = lib.Info(uniq + "_build", "Build.", registry=r)
        i.info({"version": "1.1"})
        i.info({"version": "1.2", "commit": "abc"}
               if lib is prometheus_client else {"version": "1.2"})
        lab = lib.Info(uniq + "_lab", "L.", ["a"], registry=r)
        lab.labels("x").info({"v": "1", "b": "2"})
        lib.Enum(uniq + "_state", "State.", states=["up", "down"],
                 registry=r).state("down")
        e = lib.Enum(uniq + "_lst", "S.", ["a"], states=["s1", "s2"],
                     registry=r)
        e.labels("q")
    ours = tally.generate_latest(reg, openmetrics=openmetrics).decode()
    theirs = (om_latest if openmetrics else
              prometheus_client.generate_latest)(preg).decode()
    # An Info's keys are fixed in a zone: prometheus_client's second
    # info() above gives one more key, which is not the point here.
    theirs = theirs.replace('commit="abc",', "")
    mine = _mine(ours, uniq, openmetrics)
    assert len(mine) == 4
    assert mine == _mine(theirs, uniq, openmetrics)


def test_the_reader_says_what_they_are(uniq):
    reg = tally.CollectorRegistry()
    tally.Info(uniq + "_i", "I.", registry=reg).info({"k": "v"})
    tally.Enum(uniq + "_e", "E.", states=["a", "b"], registry=reg)
    got = sorted((s[0], s[1], s[4], s[5])
                 for s in _native.read(None, reg.zone_name())[0]
                 if s[0].startswith(uniq))
    assert got == [
        (uniq + "_e", _native.TALLY_ENUM, (((uniq + "_e"), "a"),), 1.0),
        (uniq + "_e", _native.TALLY_ENUM, (((uniq + "_e"), "b"),), 0.0),
        (uniq + "_i", _native.TALLY_INFO, (("k", "v"),), 1.0)]


def test_other_states_are_another_definition(uniq):
    """A new version of the program with other states: the old states'
    series are no longer shown."""
    reg = tally.CollectorRegistry()
    tally.Enum(uniq, "E.", states=["a", "b"], registry=None).state("b")
    tally.Enum(uniq, "E.", states=["a", "c"], registry=None)
    fams = [f for f in tally.read(reg).families if f.name == uniq]
    assert [(s.labels[uniq], s.value) for f in fams for s in f.samples] \
        == [("a", 1.0), ("c", 0.0)]


def test_threads_changing_the_state_leave_one_current(uniq):
    """Threads call state() while the zone is read in a loop: every read
    finds exactly one state current (the value of a state is a stamp,
    and the reader shows the largest, of which there is one), and the
    state set last is the one current at the end."""
    reg = tally.CollectorRegistry()
    states = ["a", "b", "c", "d"]
    e = tally.Enum(uniq, "E.", ["shard"], states=states, registry=reg)
    child = e.labels("x")
    done = threading.Event()

    def change(seed):
        rnd = random.Random(seed)
        while not done.is_set():
            child.state(rnd.choice(states))

    def current():
        return [s[4] for s in _native.read(None, reg.zone_name())[0]
                if s[0] == uniq and s[5] == 1.0]

    threads = [threading.Thread(target=change, args=(i,)) for i in range(3)]
    # Threads switch often, so that state() calls overlap.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    for t in threads:
        t.start()
    try:
        for _ in range(3000):
            assert len(current()) == 1
            # The stamps, read one after another as a reader does: one
            # largest, above 0.
            stamps = [g._get() for g in child._state_gauges]
            assert max(stamps) > 0 and stamps.count(max(stamps)) == 1
        for _ in range(300):
            text = tally.generate_latest(reg).decode()
            assert len([s for s in text.splitlines()
                        if s.startswith(uniq + "{")
                        and float(s.rsplit(" ", 1)[1]) == 1.0]) == 1
    finally:
        done.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(interval)
    child.state("c")
    assert current() == [(("shard", "x"), (uniq, "c"))]


OLDER_ZONE = textwrap.dedent('''
    import os, sys
    import tally_metrics as tally
    from tally_metrics import _native
    reg = tally.CollectorRegistry(zone_name=sys.argv[1], shared=True)
    tally.Counter("c", "C.", registry=reg).inc()
    # The zone as a libtally of format 2.<argv[2]> made it.
    with open(os.path.join(os.environ["TALLY_DIR"], sys.argv[1] + ".tally"),
              "r+b") as f:
        f.seek(10)
        f.write(int(sys.argv[2]).to_bytes(2, sys.byteorder))
    try:
        tally.Info("old_build", "B.", registry=reg).info({"version": "1"})
        tally.Enum("old_state", "S.", states=["up", "down"],
                   registry=reg).state("down")
    except _native.TallyError as e:
        print("refused:", e)
        sys.exit(0)
    print(sorted({(s[0], s[1]) for s in _native.read(None, sys.argv[1])[0]
                  if s[0].startswith("old_")}))
    print(tally.generate_latest(reg).decode())
''')


def _in_zone_of(tally_dir, uniq, minor):
    r = subprocess.run([sys.executable, "-c", OLDER_ZONE, uniq, str(minor)],
                       env=child_env(tally_dir), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("minor", [6, 7])
def test_a_zone_of_2_6_or_2_7_takes_the_formats_own_records(tally_dir, uniq,
                                                           minor):
    """No name of an earlier encoding: the metrics' own records, whose
    series readers of 2.6 and 2.7 skip, and a reader of 2.8 shows."""
    kinds, text = _in_zone_of(tally_dir, uniq, minor).split("\n", 1)
    assert kinds == str(sorted({("old_build", _native.TALLY_INFO),
                                ("old_state", _native.TALLY_ENUM)}))
    assert 'old_build_info{version="1"} 1' in text
    assert 'old_state{old_state="down"} 1' in text
    assert 'old_state{old_state="up"} 0' in text


def test_a_zone_older_than_2_6_refuses_them_saying_what_to_do(tally_dir,
                                                               uniq):
    out = _in_zone_of(tally_dir, uniq, 5)
    assert out.startswith("refused: [Errno 93] cannot define metric "
                          "old_build in zone file ")
    assert "made by tally 0.3 (format 2.5), which cannot hold an info " \
        "metric; stop the zone's processes and remove the file, or run " \
        "them all with tally 0.4" in out
    assert len(out.splitlines()) == 1
