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
# The switch's tests against the oldest prometheus_client release it
# supports too (the newest is the one of test-requirements.txt): a venv
# with only that release, made once, which reaches pytest and the package
# just installed through the site directory of the first venv, added
# after its own (so its prometheus_client is the one imported).
old=$(tools/test-venv.sh "$PWD/build-python/venv-prometheus-oldest" \
	tools/test-requirements-prometheus-oldest.txt)
site() { "$1" -c 'import sysconfig; print(sysconfig.get_path("purelib"))'; }
echo "import site; site.addsitedir('$(site "$py")')" \
	>"$(site "$old")/tally-test-peers.pth"
timeout 300 "$old" -m pytest -q -p no:cacheprovider \
	python/tests/test_promclient.py python/tests/test_switch_start.py \
	python/tests/test_switch_correctness.py python/tests/test_switch_same.py \
	python/tests/test_prometheus_client.py python/tests/test_exposition.py \
	>build-python/oldest.log 2>&1 ||
	{ tail -40 build-python/oldest.log; echo "prometheus_client oldest: FAILED"; exit 1; }
timeout 300 "$py" -m pytest -q -p no:cacheprovider python/tests "$@"
