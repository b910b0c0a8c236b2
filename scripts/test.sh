#!/usr/bin/env bash
# The test command: installs what is missing, lints, then runs the whole suite (real Spark, real processes).
# Extra arguments go to pytest (e.g. scripts/test.sh -m "not slow"; -n 0 runs everything in one process).
# Two pytest workers: most of the time is spent waiting on Spark JVMs and Airflow, so two overlap well.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest -n 2 --dist worksteal "$@"
