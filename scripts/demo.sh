#!/usr/bin/env bash
# The main job: installs everything, migrates a local Airflow (SQLite), then runs the scheduled_streaming
# example DAG twice with local Spark and prints where the checkpoints and output are.
# --ui instead starts a local Airflow (API server, scheduler, DAG processor, triggerer) to try the UI;
# --cluster runs the same demo on a Spark standalone cluster (scripts/spark-cluster.sh) and stops it after;
# --docs serves the documentation site on http://127.0.0.1:8000 (scripts/docs.sh serve).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--docs" ]; then
    exec bash scripts/docs.sh serve
fi
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
export CHECKPOINT_DEMO_HOME="$PWD/demo-output"
export AIRFLOW_HOME="$CHECKPOINT_DEMO_HOME/airflow-home"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[2]"}'
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
if [ "${1:-}" = "--ui" ]; then
    exec .venv/bin/python scripts/ui_demo.py
fi
if [ "${1:-}" = "--cluster" ]; then
    # The same demo on a real Spark standalone cluster (a Master and two Workers on loopback), stopped after.
    export SPARK_CLUSTER_DIR="$CHECKPOINT_DEMO_HOME/spark-cluster"
    trap 'bash scripts/spark-cluster.sh stop' EXIT
    echo "== starting a Spark standalone cluster (logs: $SPARK_CLUSTER_DIR/logs)"
    master="$(bash scripts/spark-cluster.sh start | tail -1)"
    echo "   $master"
    export AIRFLOW_CONN_SPARK_DEFAULT="{\"conn_type\": \"spark\", \"host\": \"${master%:*}\", \"port\": ${master##*:}}"
    # Spark's working folder (the DAGs' working_dir param, $CHECKPOINT_DEMO_HOME/work) must be reachable by
    # every executor: on one machine it is; on a real cluster use a shared filesystem (README, "On a cluster").
fi
mkdir -p "$AIRFLOW_HOME"
echo "== airflow db migrate (AIRFLOW_HOME=$AIRFLOW_HOME)"
airflow db migrate > "$CHECKPOINT_DEMO_HOME/db-migrate.log" 2>&1 || { tail -20 "$CHECKPOINT_DEMO_HOME/db-migrate.log"; exit 1; }
.venv/bin/python scripts/airflow_demo.py
