#!/usr/bin/env bash
# tools/test-venv.sh DIR [REQUIREMENTS]: the Python environment of the tests
# at DIR, made once and reused; prints the path of its python.
#
# DIR is a venv of Debian's Python (what a pip install meets there) with
# exactly the packages of REQUIREMENTS (by default
# tools/test-requirements.txt), installed by their
# pinned versions and hashes (pip install --require-hashes): the same on
# every run, whatever the package index serves that day.  The hash of the
# requirements file is kept in DIR/.requirements; while it matches, the
# venv is used as it is, with no network.  When it does not (a first run,
# a changed file, an install cut short), the venv is made anew.  Runs at
# the same time (CTest in parallel, two build directories) wait for each
# other on DIR.lock, so that one makes it and the others use it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: tools/test-venv.sh DIR [REQUIREMENTS]}
req=$(realpath "${2:-$root/tools/test-requirements.txt}")
py=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
want=$(sha256sum "$req" | cut -d' ' -f1)

ready() {
	[ -x "$dir/bin/python" ] && [ "$(cat "$dir/.requirements" 2>/dev/null)" = "$want" ]
}

mkdir -p "$(dirname "$dir")"
if ! ready; then
	exec 9>"$dir.lock"
	flock 9
	if ! ready; then
		echo "test-venv: making $dir from $req" >&2
		rm -rf "$dir"
		"$py" -m venv "$dir" >&2 ||
			{ echo "test-venv: $py -m venv failed (python3-venv missing?)" >&2; exit 1; }
		PIP_DISABLE_PIP_VERSION_CHECK=1 timeout 300 "$dir/bin/pip" install -q \
			--require-hashes --no-deps -r "$req" >&2 ||
			{ echo "test-venv: pip install -r $req failed" >&2; exit 1; }
		echo "$want" >"$dir/.requirements"
	fi
	flock -u 9
fi
echo "$dir/bin/python"
