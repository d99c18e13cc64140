#!/usr/bin/env bash
# The Python package's tests, as tools/run-tests.sh runs them: a fresh
# venv under build-python/, `pip install` of the package from the source
# tree (scikit-build-core builds tally_metrics._native with libtally linked in),
# pytest, prometheus_client, gunicorn and the framework instrumentators
# test_frameworks.py serves (Flask with prometheus_flask_exporter,
# Starlette with starlette-exporter under uvicorn workers) from PyPI:
# test peers only, never dependencies of the package; then pytest, all
# bounded in time.  The last line is pytest's summary.
set -eu
cd "$(dirname "$0")/../.."
# Debian's Python when there is one (what a pip install meets there).
py=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
venv=build-python/venv
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
rm -rf "$venv"
"$py" -m venv "$venv"
timeout 150 "$venv/bin/pip" install -q . pytest prometheus_client gunicorn \
	flask prometheus-flask-exporter starlette starlette-exporter uvicorn
timeout 300 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
	python/tests "$@"
