"""Info and Enum are info and enum metrics of the format (2.8), under
their own names: the reader API says what they are (kinds TALLY_INFO and
TALLY_ENUM in _native.read()), and the package's exposition of them is
prometheus_client's, in both formats.  In a shared zone older than 2.8,
whose readers would not show them, they are written in the encoding of
earlier versions (<n>:info, <n>:enum), which those read."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import prometheus_client
import pytest
from prometheus_client.openmetrics.exposition import \
    generate_latest as om_latest

from conftest import child_env
import tally_metrics as tally
from tally_metrics import _native


def _mine(text, uniq):
    return [line for line in text.splitlines() if uniq in line]


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
    assert _mine(ours, uniq) == _mine(theirs, uniq)


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


OLDER_ZONE = textwrap.dedent('''
    import os, sys
    import tally_metrics as tally
    reg = tally.CollectorRegistry(zone_name=sys.argv[1], shared=True)
    tally.Counter("c", "C.", registry=reg).inc()
    # The zone as a libtally of format 2.7 made it.
    with open(os.path.join(os.environ["TALLY_DIR"], sys.argv[1] + ".tally"),
              "r+b") as f:
        f.seek(10)
        f.write((7).to_bytes(2, sys.byteorder))
    tally.Info("old_build", "B.", registry=reg).info({"version": "1"})
    tally.Enum("old_state", "S.", states=["up", "down"],
               registry=reg).state("down")
    from tally_metrics import _native
    print(sorted({(s[0], s[1]) for s in _native.read(None, sys.argv[1])[0]
                  if s[0].startswith("old_")}))
    print(tally.generate_latest(reg).decode())
''')


def test_a_zone_older_than_2_8_gets_the_earlier_encoding(tally_dir, uniq):
    r = subprocess.run([sys.executable, "-c", OLDER_ZONE, uniq],
                       env=child_env(tally_dir), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    kinds, text = r.stdout.split("\n", 1)
    assert kinds == str(sorted({("old_build:info", _native.TALLY_FGAUGE),
                                ("old_state:enum", _native.TALLY_FGAUGE)}))
    assert 'old_build_info{version="1"} 1.0' in text
    assert 'old_state{old_state="down"} 1.0' in text
    assert 'old_state{old_state="up"} 0.0' in text
