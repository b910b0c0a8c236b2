#!/usr/bin/env bash
# The main job: installs everything, then runs the end-to-end demo (local Spark, local files).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/demo.py
