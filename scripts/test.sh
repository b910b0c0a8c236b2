#!/usr/bin/env bash
# The test command: installs what is missing, lints, then runs the whole suite (real Spark, real processes).
# Extra arguments go to pytest: a tier (scripts/test.sh tests/unit takes seconds; tests/integration, tests/system),
# a marker (-m "not slow" skips tests/system, -m matrix), or -n 0 to run everything in one process.
# Two pytest workers: most of the time is spent waiting on Spark JVMs and Airflow, so two overlap well. A module
# marked xdist_group (the cluster tests) runs whole on one worker, so its heaviest tests never overlap each other.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/browser.sh
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
