"""Bad environments and bad files: clear Python exceptions, or a segment
skipped and reported by the reader; never a crash."""
from __future__ import annotations

import errno
import os
import subprocess

import pytest

import tally_metrics as tally
from conftest import child_env, run_py, segment_names

PROBE = """
import tally_metrics as tally
try:
    tally.Counter("x", "doc").inc()
except tally.TallyError as e:
    print("TallyError", e.errno, "|", e)
except Exception as e:
    print("other", type(e).__name__, e)
else:
    print("no error")
"""


def test_missing_tally_dir(tmp_path):
    # A missing TALLY_DIR is created when its parent exists; not here.
    out = run_py(PROBE, child_env(str(tmp_path / "does-not-exist" / "tally")))
    assert out.startswith(f"TallyError {errno.ENOENT} |"), out
    assert "does-not-exist" in out or "TALLY_DIR" in out


def test_tally_dir_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    out = run_py(PROBE, child_env(str(f)))
    assert out.startswith(f"TallyError {errno.ENOTDIR} |"), out


def test_tally_dir_writable_by_others(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o777)
    out = run_py(PROBE, child_env(str(d)))
    assert out.startswith(f"TallyError {errno.EPERM} |"), out


def test_reading_a_missing_dir_raises(tmp_path):
    with pytest.raises(tally.TallyError):
        tally.read(dir=str(tmp_path / "nope"), all_zones=True)


def _good_segment(tally_dir, name):
    run_py(f"""
import tally_metrics as tally
tally.Counter({name!r}, "doc").inc(41)
""", child_env(tally_dir, TALLY_KEEP=1))


def test_bad_files_are_skipped_and_reported(uniq, tally_dir):
    _good_segment(tally_dir, uniq)
    [good] = segment_names(tally_dir)
    bad = {
        "junk.1.0000000000000001.tally": b"not a segment at all" * 10,
        "empty.2.0000000000000002.tally": b"",
    }
    for name, data in bad.items():
        with open(os.path.join(tally_dir, name), "wb") as f:
            f.write(data)
        os.chmod(os.path.join(tally_dir, name), 0o600)
    # A real segment cut short, and one with its header scribbled on.
    with open(os.path.join(tally_dir, good), "rb") as f:
        head = f.read(8192)
    for name, data in (("cut.3.0000000000000003.tally", head[:4096]),
                       ("scribbled.4.0000000000000004.tally",
                        head[:64] + b"\xff" * 512 + head[576:])):
        with open(os.path.join(tally_dir, name), "wb") as f:
            f.write(data)
    os.symlink(os.path.join(tally_dir, good),
               os.path.join(tally_dir, "link.5.0000000000000005.tally"))
    res = tally.read(dir=tally_dir, all_zones=True)
    assert res.segments == 1
    assert [s.value for f in res.families for s in f.samples
            if s.name == uniq + "_total"] == [41.0]
    skipped = {os.path.basename(p): why for p, why in res.skipped}
    assert set(skipped) == set(bad) | {"cut.3.0000000000000003.tally",
                                       "scribbled.4.0000000000000004.tally",
                                       "link.5.0000000000000005.tally"}
    assert all(why for why in skipped.values())
    # generate_latest and TallyCollector skip them the same way.
    text = tally.generate_latest(dir=tally_dir, all_zones=True).decode()
    assert f"{uniq}_total 41\n" in text


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
def test_another_users_segment_is_skipped(uniq, tally_dir):
    _good_segment(tally_dir, uniq)
    [good] = segment_names(tally_dir)
    other = os.path.join(tally_dir, "other.9.0000000000000009.tally")
    subprocess.run(["cp", "--sparse=always", os.path.join(tally_dir, good),
                    other], check=True)
    os.chown(other, 65534, 65534)
    res = tally.read(dir=tally_dir, all_zones=True)
    assert res.segments == 1
    [(path, why)] = res.skipped
    assert path == other and why


def test_a_refused_metric_writes_nothing(uniq, tally_dir):
    # A name taken in the registry by another kind is refused before any
    # series reaches the zone: the exposition keeps one family.
    out = run_py(f"""
import tally_metrics as tally
tally.Counter({uniq!r}, "h").inc(3)
for make in (lambda: tally.Gauge({uniq!r} + "_total", "h"),
             lambda: tally.Histogram({uniq!r}, "h"),
             lambda: tally.Counter({uniq!r}, "h")):
    try:
        make()
    except ValueError as e:
        print("refused", "Duplicated" in str(e))
print(tally.generate_latest().decode())
""", child_env(tally_dir))
    assert out.count("refused True") == 3, out
    assert out.count("# TYPE ") == 1, out
    assert f"{uniq}_total 3\n" in out


def test_nul_characters_are_refused(uniq):
    c = tally.Counter(uniq, "h", ["a"])
    with pytest.raises(ValueError, match="NUL"):
        c.labels("x\x00evil")
    with pytest.raises(ValueError, match="NUL"):
        c.labels(a="x\x00evil")
    with pytest.raises(ValueError, match="NUL"):
        tally.Counter(uniq + "_h", "h\x00x")
    c.labels("x").inc()
    assert "x\x00evil" not in c._children


# Processes sharing a zone may define a metric otherwise (a new version
# of the program, while the zone of the old one is kept): the new
# definition is taken, and readers show it alone, never both.
_DEFINE = """
import sys
import tally_metrics as tally
try:
    {make}
except ValueError as e:
    print("refused", e)
else:
    print("defined")
"""


@pytest.mark.parametrize("first,second,typ,labels", [
    ('tally.Counter(N, "d", ["a"]).labels("x").inc()',
     'tally.Gauge(N, "d", ["a"]).labels("x").set(1)', "gauge", {"a"}),
    ('tally.Counter(N, "d", ["a"]).labels("x").inc()',
     'tally.Counter(N, "d", ["b"]).labels("x").inc()', "counter", {"b"}),
    ('tally.Histogram(N, "d", buckets=[1, 2]).observe(1)',
     'tally.Histogram(N, "d", buckets=[1, 3]).observe(1)', "histogram",
     {"le=1.0", "le=3.0", "le=+Inf", ""}),
    ('tally.Gauge(N, "d", multiprocess_mode="livesum").set(1)',
     'tally.Gauge(N, "d", multiprocess_mode="all").set(1)', "gauge",
     {"pid"}),
    ('tally.Gauge(N, "d").set(1)',
     'tally.Histogram(N, "d").observe(1)', "histogram", None),
    ('tally.Counter(N, "d").inc()',
     'tally.Summary(N, "d").observe(1)', "summary", None),
    ('tally.Enum(N, "d", states=["a", "b"]).state("b")',
     'tally.Enum(N, "d", states=["x", "y"]).state("y")', "stateset", None),
    ('tally.Info(N, "d").info({"k": "1"})',
     'tally.Info(N, "d").info({"j": "2"})', "info", {"j"}),
])
def test_a_changed_definition_is_taken(uniq, tally_dir, first, second,
                                       typ, labels):
    env = child_env(tally_dir, TALLY_ZONE=uniq)
    out = run_py(_DEFINE.format(make=f"N = {uniq!r}; {first}"), env)
    assert out.strip() == "defined", out
    # The same definition again, from another process: the same metric.
    out = run_py(_DEFINE.format(make=f"N = {uniq!r}; {first}"), env)
    assert out.strip() == "defined", out
    out = run_py(_DEFINE.format(make=f"N = {uniq!r}; {second}"), env)
    assert out.strip() == "defined", out
    # Only the new definition is shown, with the new series only.
    res = tally.read(dir=tally_dir, zone=uniq)
    fams = [f for f in res.families if f.name == uniq]
    assert [f.type for f in fams] == [typ], res.families
    if labels is None:
        return
    seen = set()
    for s in fams[0].samples:
        if typ == "histogram":
            seen.add("le=" + s.labels["le"] if "le" in s.labels else "")
        else:
            seen.update(s.labels)
    assert seen == labels, fams[0].samples
    if typ != "histogram":
        assert [s.value for s in fams[0].samples] == [1.0]


def test_another_help_text_is_taken(uniq, tally_dir):
    env = child_env(tally_dir, TALLY_ZONE=uniq)
    make = "c = tally.Counter({n!r}, {doc!r}); c.inc()"
    out = run_py(_DEFINE.format(make=make.format(n=uniq, doc="one")), env)
    assert out.strip() == "defined", out
    out = run_py(_DEFINE.format(make=make.format(n=uniq, doc="two")), env)
    assert out.strip() == "defined", out
    res = tally.read(dir=tally_dir, zone=uniq)
    fams = [f for f in res.families if f.name == uniq]
    assert [(f.documentation, [s.value for s in f.samples])
            for f in fams] == [("two", [2.0])]


def test_refusal_names_metric_and_file(uniq, tally_dir):
    """What libtally still refuses (here: a help text longer than it
    keeps) is a ValueError that names the metric, the zone's file and
    what is wrong."""
    env = child_env(tally_dir, TALLY_ZONE=uniq)
    code = (f"import tally_metrics as tally\n"
            f"try:\n"
            f"    tally.Counter({uniq!r}, 'h' * 2000)\n"
            f"except ValueError as e:\n"
            f"    print(e)\n")
    out = run_py(code, env)
    assert f"metric {uniq}_total" in out, out
    assert os.path.join(tally_dir, uniq + ".tally") in out, out
    assert "help text" in out, out
