#!/usr/bin/env bash
# The Python package's tests, as tools/run-tests.sh runs them: the venv
# build-python/venv (tools/test-venv.sh: made once from the pinned
# tools/test-requirements.txt, reused after, no network then) with
# pytest, prometheus_client, gunicorn and the framework instrumentators
# test_frameworks.py serves (Flask with prometheus_flask_exporter,
# Starlette with starlette-exporter under uvicorn workers): test peers
# only, never dependencies of the package.  The package itself is
# installed into it from the source tree on every run (pip install .
# --no-deps --no-build-isolation: scikit-build-core, pinned there too,
# builds tally_metrics._native with libtally linked in, in build-python/build,
# again only what changed), then pytest, all bounded in time.  The last
# line is pytest's summary.
set -eu
cd "$(dirname "$0")/../.."
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
py=$(tools/test-venv.sh "$PWD/build-python/venv")
timeout 300 "$py" -m pip install -q --no-deps --no-build-isolation \
	--no-index --config-settings=build-dir=build-python/build .
timeout 300 "$py" -m pytest -q -p no:cacheprovider python/tests "$@"
