"""Test set-up: a private TALLY_DIR for this run, set before tally is
imported (libtally reads its environment once), and helpers."""
from __future__ import annotations

import atexit
import itertools
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

# Children that import the test modules (multiprocessing's spawn) keep
# the TALLY_DIR their parent gave them.  The directory goes with the run:
# removed when the process that made it exits (not a forked child).
if not os.environ.get("TALLY_PYTEST_CHILD"):
    _SESSION_DIR = tempfile.mkdtemp(prefix="tally-pytest-")
    os.chmod(_SESSION_DIR, 0o700)
    os.environ["TALLY_DIR"] = _SESSION_DIR
    os.environ.pop("TALLY_ZONE", None)

    def _remove_session_dir(pid=os.getpid()):
        if os.getpid() == pid:
            shutil.rmtree(_SESSION_DIR, ignore_errors=True)

    atexit.register(_remove_session_dir)

import tally_metrics as tally  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
_counter = itertools.count()


@pytest.fixture
def uniq():
    """A metric name no other test uses."""
    return f"t{os.getpid()}_{next(_counter)}"


@pytest.fixture
def tally_dir(tmp_path):
    """A fresh, private directory for the segments of child processes."""
    d = tmp_path / "tally"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    return str(d)


def segment_names(tally_dir):
    """The names in tally_dir but the writers' lock files (format 2.6:
    .tally-lock.<inode>, which only writers open)."""
    return sorted(n for n in os.listdir(tally_dir)
                  if not n.startswith(".tally-lock."))


def child_env(tally_dir, **extra):
    env = dict(os.environ)
    env["TALLY_DIR"] = tally_dir
    env.pop("TALLY_ZONE", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_py(code, env, timeout=60):
    """Run @code in a new interpreter; return its stdout."""
    r = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r.stdout


def value_of(families, sample_name, labels=None):
    """The value of one sample in tally.read() families (None: absent)."""
    for f in families:
        for s in f.samples:
            if s.name == sample_name and (labels is None or
                                          s.labels == labels):
                return s.value
    return None


def only(families, prefix):
    return [f for f in families if f.name.startswith(prefix)]


