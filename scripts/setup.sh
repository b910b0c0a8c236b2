#!/usr/bin/env bash
# Installs everything into ./.venv (idempotent: does nothing when pyproject.toml and this file are unchanged).
# Needs python3 (3.11+) and Java 17 on PATH; everything else comes from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

AIRFLOW_VERSION=3.3.2
PYSPARK_VERSION=4.3.0
PYTHON=${PYTHON:-python3}

if ! command -v java >/dev/null 2>&1; then
    echo "setup: Java is not on PATH; Spark needs Java 17 (e.g. apt-get install openjdk-17-jre-headless)" >&2
    exit 1
fi
stamp=".venv/.installed-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then
    exit 0
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Under a lock: an editable install writes the project's egg-info into this checkout, and another venv's
# install of the runtime (tests/support/spark_installs.py) may run beside this one.
mkdir -p .cache
flock .cache/editable-install.lock \
    .venv/bin/python -m pip install -q "apache-airflow==${AIRFLOW_VERSION}" -e ".[spark,airflow,s3,openlineage,test]"
# apache-airflow-providers-apache-spark depends on pyspark-client (Spark Connect only), whose files
# overwrite pyspark's own Python modules with another version. Put the full pyspark back on top so the
# Python side matches the bundled jars.
.venv/bin/python -m pip install -q --force-reinstall --no-deps "pyspark==${PYSPARK_VERSION}"
.venv/bin/python -c "import pyspark, sys; v = pyspark.__version__; sys.exit(0 if v == '${PYSPARK_VERSION}' else f'pyspark {v} != ${PYSPARK_VERSION}')"
rm -f .venv/.installed-*
touch "$stamp"
echo "setup: .venv ready (apache-airflow ${AIRFLOW_VERSION}, pyspark ${PYSPARK_VERSION})"
