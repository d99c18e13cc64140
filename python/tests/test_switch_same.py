"""prometheus_client's labels(), Counter.inc() and Histogram.observe()
under the switch are C methods (promclient.c) that must do what
prometheus_client's own do: the same program, run without the switch,
with it, and with it but prometheus_client's own value class put back
(the C methods alone), gives the same exposition, the same children and
the same exceptions.  python/tests/run.sh runs this
file against the oldest supported release too."""
from __future__ import annotations

import json
import textwrap

import pytest

from conftest import child_env, run_py

SWITCH = "import tally_metrics as tally; tally.use_in_prometheus_client()\n"
# The switch's C methods over prometheus_client's own values.
OWN = ("from prometheus_client import values as own\n"
       "own_class = own.ValueClass\n" + SWITCH +
       "own.ValueClass = own_class\n")
MODES = {"off": "", "on": SWITCH, "own": OWN}

PROGRAM = textwrap.dedent('''
    import json, warnings
    {on}
    from prometheus_client import (CollectorRegistry, Counter, Gauge,
                                   Histogram, Summary, generate_latest)
    reg = CollectorRegistry()
    C = Counter("same_requests_total", "Requests.", ["method", "code"],
                registry=reg)
    N = Counter("same_plain_total", "No labels.", registry=reg)
    G = Gauge("same_inflight", "In flight.", ["route"], registry=reg)
    H = Histogram("same_latency_seconds", "Latency.", ["route"],
                  buckets=[0.5, 1, 2.5], registry=reg)
    P = Histogram("same_plain_seconds", "Plain.", buckets=[1, 2],
                  registry=reg)
    Q = Histogram("same_big_bytes", "Big.", buckets=[1, 2.0 ** 61],
                  registry=reg)
    S = Summary("same_size_bytes", "Sizes.", ["kind"], registry=reg)

    class Code:
        def __str__(self):
            return "418"

    class Bad:
        def __str__(self):
            raise RuntimeError("no str")

    class Sub(str):
        pass

    class Subbed:
        def __str__(self):
            return Sub("419")

    out = []
    warnings.simplefilter("ignore")  # the switch's one about exemplars
    for op in OPS:
        try:
            r = eval(op)
            out.append([op, "=", r if r in (None, True, False) else "?"])
        except Exception as e:
            out.append([op, "!", type(e).__name__, str(e)])
    print(json.dumps(dict(
        out=out,
        text=[line for line in generate_latest(reg).decode().splitlines()
              if "_created" not in line],
        methods=[type(Counter.labels).__name__, type(Counter.inc).__name__,
                 type(Histogram.observe).__name__])))
''')

OPS = [
    # labels(): by position, by keyword in either order, values that are
    # not str (converted with str()), the child stored in _metrics.
    'C.labels("get", "200").inc()',
    'C.labels("get", 200).inc(2)',
    'C.labels(method="get", code=200).inc(0.5)',
    'C.labels(code="200", method="get").inc()',
    'C.labels("post", Code()).inc()',
    'C.labels("post", Subbed()).inc()',
    'C.labels("post", Subbed()) is C.labels("post", "419")',
    'C.labels(None, 1.5).inc()',
    'C.labels(True, b"x").inc(3)',
    'C.labels("get", "200") is C.labels(method="get", code=200) '
    'is C._metrics[("get", "200")]',
    # labels() errors.
    'C.labels("get")',
    'C.labels("get", "200", "x")',
    'C.labels("get", code="200")',
    'C.labels(method="get")',
    'C.labels(method="get", status="200")',
    'C.labels(method="get", code="200", status="x")',
    'C.labels()',
    'C.labels("get", Bad())',
    'C.labels(method="get", code=Bad())',
    'C.labels("get", "200").labels("x", "y")',
    'N.labels("x")',
    'N.labels()',
    # The other kinds' labels().
    'G.labels("/").inc(3)',
    'G.labels(route="/").dec(1)',
    'G.labels("/a").set(7)',
    'S.labels("a").observe(3)',
    'S.labels(kind="a").observe(4)',
    # Counter.inc().
    'N.inc()',
    'N.inc(2)',
    'N.inc(0.25)',
    'N.inc(1, None)',
    'N.inc(amount=3)',
    'N.inc(0)',
    'N.inc(-1)',
    'N.inc("x")',
    'N.inc(1, {"trace_id": "abc"})',
    'N.inc(1, None, 3)',
    'C.inc()',
    # Histogram.observe(): on a bound (inclusive), between, past the
    # last, below the first, ints and a bool, an int past 2**53.
    'P.observe(0.5)',
    'P.observe(1)',
    'P.observe(1.0)',
    'P.observe(2)',
    'P.observe(2.5)',
    'P.observe(3)',
    'P.observe(-1)',
    'P.observe(True)',
    'P.observe(0)',
    'P.observe(amount=1.5)',
    'P.observe(1, None)',
    'P.observe(2, {"trace_id": "abc"})',
    'P.observe()',
    'P.observe("x")',
    'H.observe(1)',
    'H.labels("/").observe(0.5)',
    'H.labels("/").observe(2.5)',
    'H.labels(route="/x").observe(1)',
    'Q.observe(2 ** 60)',
    'Q.observe(2 ** 62)',
]

# Errors that come from the value, not from prometheus_client's method:
# tally's refuses a str with a message of its own (the type is the same).
VALUE_ERRORS = {'P.observe("x")'}


def run(mode, tally_dir):
    code = PROGRAM.format(on=MODES[mode])
    env = child_env(tally_dir, TALLY_ZONE="same" + mode)
    return json.loads(run_py(f"OPS = {OPS!r}\n" + code, env))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("same")
    d.chmod(0o700)
    return {m: run(m, str(d)) for m in MODES}


def test_the_switch_puts_the_c_methods_in(runs):
    assert runs["off"]["methods"] == ["function"] * 3
    for mode in ("on", "own"):
        assert runs[mode]["methods"] == ["method_descriptor"] * 3


@pytest.mark.parametrize("mode", ["on", "own"])
def test_same_exposition(runs, mode):
    assert runs[mode]["text"] == runs["off"]["text"]
    # And what it shows is what the program did.
    text = runs["off"]["text"]
    assert 'same_requests_total{code="200",method="get"} 4.5' in text
    assert 'same_requests_total{code="418",method="post"} 1.0' in text
    assert 'same_requests_total{code="419",method="post"} 1.0' in text
    assert 'same_requests_total{code="1.5",method="None"} 1.0' in text
    assert "same_plain_total 8.25" in text
    # le bounds are inclusive: 0.5, 1, 1.0, -1, True, 0 and 1 (with
    # None for its exemplar) in the first bucket; 2, 1.5 and 2 in the
    # second; 2.5 and 3 past it.
    for line in ('same_plain_seconds_bucket{le="1.0"} 7.0',
                 'same_plain_seconds_bucket{le="2.0"} 10.0',
                 'same_plain_seconds_bucket{le="+Inf"} 12.0',
                 "same_plain_seconds_sum 14.5",
                 'same_latency_seconds_bucket{le="0.5",route="/"} 1.0',
                 'same_latency_seconds_bucket{le="1.0",route="/x"} 1.0',
                 'same_big_bytes_bucket{le="2.305843009213694e+18"} 1.0',
                 'same_big_bytes_bucket{le="+Inf"} 2.0'):
        assert line in text


@pytest.mark.parametrize("mode", ["on", "own"])
def test_same_results_and_exceptions(runs, mode):
    for want, got in zip(runs["off"]["out"], runs[mode]["out"]):
        if want[0] in VALUE_ERRORS and mode == "on":
            assert got[:3] == want[:3]
        else:
            assert got == want
    assert len(runs[mode]["out"]) == len(OPS)


# remove() and clear() take the child out of _metrics; labels() then
# makes a new one (there is no cache in front of _metrics).  Under
# prometheus_client's own values it counts from zero; under the switch
# its value is the zone's series, which the removal leaves (README).
REMOVE = textwrap.dedent('''
    import json
    {on}
    from prometheus_client import CollectorRegistry, Counter, Histogram
    reg = CollectorRegistry()
    C = Counter("gone_total", "Removed.", ["a"], registry=reg)
    H = Histogram("gone_seconds", "Removed.", ["a"], buckets=[1],
                  registry=reg)
    res = {{}}
    for how in ("remove", "clear", "remove_by_labels"):
        if not hasattr(C, how):
            continue  # remove_by_labels: not in every release
        old, hold = C.labels(how), H.labels(a=how)
        old.inc(5)
        hold.observe(0.5)
        if how == "remove":
            C.remove(how)
            H.remove(how)
        elif how == "clear":
            C.clear()
            H.clear()
        else:
            C.remove_by_labels({{"a": how}})
            H.remove_by_labels({{"a": how}})
        new, hnew = C.labels(how), H.labels(how)
        before = new._value.get()
        new.inc()
        hnew.observe(2)
        res[how] = dict(
            fresh=new is not old and hnew is not hold,
            stored=C._metrics[(how,)] is new and H._metrics[(how,)] is hnew,
            again=C.labels(a=how) is new,
            before=before, after=new._value.get(),
            inf=hnew._buckets[-1].get())
    print(json.dumps(res))
''')


@pytest.mark.parametrize("mode", list(MODES))
def test_removed_child_is_made_anew(tally_dir, mode):
    code = REMOVE.format(on=MODES[mode])
    res = json.loads(run_py(code, child_env(tally_dir, TALLY_ZONE="gone")))
    assert "remove" in res and "clear" in res
    for how, r in res.items():
        assert r["fresh"] and r["stored"] and r["again"], how
        # The zone's series outlives the child under the switch.
        start = 5.0 if mode == "on" else 0.0
        assert (r["before"], r["after"]) == (start, start + 1), how
        assert r["inf"] == 1.0 or mode == "on", how


# Threads that make and use the same children at once: one child per
# label set, every add counted.
THREADS = textwrap.dedent('''
    import json, sys, threading
    {on}
    from prometheus_client import CollectorRegistry, Counter, Histogram
    reg = CollectorRegistry()
    C = Counter("threads_total", "Threads.", ["k", "n"], registry=reg)
    H = Histogram("threads_seconds", "Threads.", ["k"], buckets=[1, 2],
                  registry=reg)
    sys.setswitchinterval(1e-6)
    T, R, K = 8, 3000, 5
    start = threading.Barrier(T)
    seen = [dict() for _ in range(T)]

    def work(t):
        start.wait()
        for i in range(R):
            k = str(i % K)
            child = C.labels(k=k, n=i % K) if i % 2 else C.labels(k, i % K)
            seen[t].setdefault(k, set()).add(id(child))
            child.inc()
            H.labels(k=k).observe(i % 3)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(T)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ids = {{k: set().union(*(s.get(k, set()) for s in seen))
           for k in map(str, range(K))}}
    print(json.dumps(dict(
        one_child={{k: len(v) for k, v in ids.items()}},
        counts={{k: C.labels(k, k)._value.get() for k in ids}},
        buckets={{k: [b.get() for b in H.labels(k)._buckets] for k in ids}},
        sums={{k: H.labels(k)._sum.get() for k in ids}})))
''')


@pytest.mark.parametrize("mode", list(MODES))
def test_threads_share_children_and_lose_no_add(tally_dir, mode):
    code = THREADS.format(on=MODES[mode])
    env = child_env(tally_dir, TALLY_ZONE="threads" + mode)
    res = json.loads(run_py(code, env, timeout=120))
    T, R, K = 8, 3000, 5
    for k in map(str, range(K)):
        assert res["one_child"][k] == 1
        assert res["counts"][k] == T * R / K
        # i % 3 over the i with i % K == k: 0 and 1 in the first
        # bucket (inclusive), 2 in the second.
        obs = [i % 3 for i in range(R) if i % K == int(k)]
        assert res["buckets"][k] == [T * sum(o <= 1 for o in obs),
                                     T * obs.count(2), 0]
        assert res["sums"][k] == T * sum(obs)
