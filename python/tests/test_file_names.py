"""A file of the tally directory whose name is not UTF-8 (file names are
bytes) is skipped and reported like any file that is not a segment:
read() and generate_latest() neither raise nor lose the other segments.
Its path is reported as os.fsdecode() gives it (os.fsencode() of it is
the name), the reason as a str with the undecodable bytes escaped."""
from __future__ import annotations

import os

import tally_metrics as tally
from tally_metrics._exposition import expose
from test_exposition import zone  # noqa: F401 (a fixture)

BAD = b"bad\xff.tally"


def _add_bad_file(d):
    """A copy of the header of a segment of @d under the name BAD: a
    file refused as truncated, with a reason that names it."""
    d = os.fsencode(d)
    seg = [n for n in os.listdir(d) if n.endswith(b".tally")][0]
    with open(os.path.join(d, seg), "rb") as f:
        header = f.read(4096)
    with open(os.path.join(d, BAD), "xb") as f:
        f.write(header)
    return os.fsdecode(os.path.join(d, BAD))


def _check_skipped(skipped, path, named):
    (got, why), = [s for s in skipped if s[0] == path]
    assert os.fsencode(got).endswith(b"/" + BAD)
    assert "truncated" in why, why
    why.encode("utf-8")  # a valid str, printable as it is
    if named:  # read()'s reasons name the file; expose()'s need not
        assert "/bad\\xff.tally: " in why, why


def test_a_file_name_that_is_not_utf8_is_skipped(zone):  # noqa: F811
    want = tally.generate_latest(dir=zone, all_zones=True)
    assert b"shop_requests_total" in want
    want_read = tally.read(dir=zone, all_zones=True)
    path = _add_bad_file(zone)
    assert tally.generate_latest(dir=zone, all_zones=True) == want
    text, skipped = expose(dir=zone, all_zones=True)
    assert text == want
    _check_skipped(skipped, path, False)
    got = tally.read(dir=zone, all_zones=True)
    assert got.skipped != want_read.skipped
    _check_skipped(got.skipped, path, True)
    assert [f.samples for f in got.families] == \
        [f.samples for f in want_read.families]
