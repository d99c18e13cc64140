"""tally-exporter and an unchanged framework application agree: a real
gunicorn serving an app of test_frameworks.py with the prometheus_client
switch (TALLY_PROMETHEUS_CLIENT=1), its workers recycled (--max-requests)
and SIGKILLed while it serves, then the app's own /metrics (its
multiprocess-mode view, MultiProcessCollector, which the switch makes
read the zone) and tally-exporter's exposition of that zone, sample for
sample: names, labels, types, help texts and values.  The exporter's
labels that say which process or zone (pid, process) and the spelling of
a float are set aside, and so are the families of the exporter itself
(tally_*).  The test is skipped without tally-exporter (see
test_exporter.py), promtool, curl or the frameworks."""
from __future__ import annotations

import re
import time

from prometheus_client.parser import text_string_to_metric_families

from test_exporter import _need as _need_exporter
from test_exporter import _scrape
from test_frameworks import N, Server, _drive, framework  # noqa: F401

# The exporter's labels that say which process wrote a series.
OWN_LABELS = ("pid", "process")


def _view(text, exporter):
    """{family: (type, help, {(sample, labels): value})} of an
    exposition; of the exporter's, without its own families and
    labels."""
    out = {}
    for fam in text_string_to_metric_families(text):
        if exporter and fam.name.startswith("tally_"):
            continue
        samples = {}
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            labels = tuple(sorted(
                (k, repr(float(v)) if k == "le" else v)
                for k, v in s.labels.items()
                if not (exporter and k in OWN_LABELS)))
            key = (s.name, labels)
            assert key not in samples, ("two series of one sample", key)
            samples[key] = s.value
        out[fam.name] = (fam.type, fam.documentation, samples)
    return out


# A gauge of requests in flight counts, in the app's own view, the
# request of that view (the exporter's is no request to the app).
IN_FLIGHT = {"flask": (), "starlette": ("starlette_requests_in_progress",)}


def _without_own_request(view, names):
    for name in names:
        typ, doc, samples = view[name]
        view[name] = (typ, doc, {
            (n, labels): v - 1 if dict(labels).get("method") == "GET"
            else v for (n, labels), v in samples.items()})
    return view


def _differences(a, b):
    out = []
    for name in sorted(set(a) | set(b)):
        if a.get(name) is None or b.get(name) is None:
            out.append((name, "only in one", name in a, name in b))
            continue
        if a[name][:2] != b[name][:2]:
            out.append((name, a[name][:2], b[name][:2]))
        sa, sb = a[name][2], b[name][2]
        for key in sorted(set(sa) | set(sb)):
            if sa.get(key) != sb.get(key):
                out.append((key, sa.get(key), sb.get(key)))
    return out


def test_exporter_and_app_agree(framework, tally_dir, tmp_path):
    _need_exporter()
    server = Server(framework, "tally", tally_dir, tmp_path)
    try:
        failed, _scrapes, kills = _drive(server, kill=True, scrape=True)
        # The app counts its own /metrics requests (before the response
        # or after it, by framework): the exporter's scrape, between
        # two of the app's, agrees with one of them once the first one's
        # accounting is done.  A disagreement is one that stays: a few
        # tries, each asserted alike, the last one's differences shown.
        for _ in range(5):
            before = _view(server.metrics(), exporter=False)
            time.sleep(0.5)
            exp = _view(_scrape(tally_dir), exporter=True)
            after = _view(server.metrics(), exporter=False)
            before, after = (_without_own_request(v, IN_FLIGHT[framework])
                             for v in (before, after))
            # Nothing of the Python package's encoding: every metric,
            # gauges with a multiprocess mode too, under its own name.
            assert [n for n in exp if ":" in n] == []
            # prometheus_client's Info and Enum of the app, which its
            # multiprocess mode does not serve: in neither view.
            for view in (before, exp, after):
                assert not {"shop_build", "shop_state"} & set(view)
            diffs = min(_differences(before, exp),
                        _differences(after, exp), key=len)
            if not diffs:
                break
    finally:
        server.stop()
    assert kills >= 2
    assert diffs == []
    # Every request to "/" was counted (the exporter's view equals the
    # app's): by a framework that counts after the response, but for
    # those a killed worker had answered (3 clients at most each time).
    key = (server.sample, tuple(sorted(server.labels.items())))
    got = [samples[key] for _t, _d, samples in exp.values()
           if key in samples]
    lost = 0 if framework == "flask" else 3 * kills
    assert len(got) == 1 and N - lost <= got[0] <= N + failed, \
        (got, lost, failed)
