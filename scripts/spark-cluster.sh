#!/usr/bin/env bash
# A real Spark standalone cluster on loopback: a Master and two Workers, each its own JVM, started from the
# pyspark wheel (which ships spark-class but no start-master.sh). Sized for a 2-core machine.
#
#   bash scripts/spark-cluster.sh start    # prints the master URL (spark://127.0.0.1:PORT) as its last line
#   bash scripts/spark-cluster.sh status
#   bash scripts/spark-cluster.sh stop     # stops only what start started
#
# State (pids, logs, worker folders, the master URL) lives in $SPARK_CLUSTER_DIR (default .cache/spark-cluster),
# never in site-packages. Ports are free ones: the Master UI's default 8080 is Airflow's API server's too.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$PWD/.venv/bin/python}"
STATE="${SPARK_CLUSTER_DIR:-$PWD/.cache/spark-cluster}"
WORKERS="${SPARK_CLUSTER_WORKERS:-2}"
WORKER_CORES="${SPARK_CLUSTER_WORKER_CORES:-1}"
WORKER_MEMORY="${SPARK_CLUSTER_WORKER_MEMORY:-1g}"

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
    if alive "$STATE/master.pid"; then
        echo "spark-cluster: already running" >&2
        cat "$STATE/master-url"
        return 0
    fi
    rm -rf "$STATE" && mkdir -p "$STATE/logs"
    export SPARK_HOME
    SPARK_HOME="$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
    # Executors start Python workers with this interpreter; the cluster's files stay in $STATE.
    export PYSPARK_PYTHON="$PYTHON" SPARK_LOG_DIR="$STATE/logs" SPARK_LOCAL_DIRS="$STATE/local" SPARK_NO_DAEMONIZE=1
    local port ui rest
    port="$(free_port)" && ui="$(free_port)" && rest="$(free_port)"
    # The REST server answers a cluster deploy mode driver's state and kills it (spark-submit --status/--kill,
    # apache-airflow-providers-apache-spark and our job operator use it).
    SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=true -Dspark.master.rest.port=$rest" \
    setsid "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
        --host 127.0.0.1 --port "$port" --webui-port "$ui" > "$STATE/logs/master.log" 2>&1 &
    echo $! > "$STATE/master.pid"
    # A free port can be taken by another process before the Master binds it; the Master then moves to the
    # next one. The workers and the readiness check use the ports it reports it bound, not the ones asked for.
    local url="" bound=""
    for _ in $(seq 1 120); do
        url="$(grep -o 'Starting Spark master at spark://[0-9.]*:[0-9]*' "$STATE/logs/master.log" | tail -1 | sed 's/.* at //' || true)"
        bound="$(grep -o "service 'MasterUI' on port [0-9]*" "$STATE/logs/master.log" | tail -1 | awk '{print $NF}' || true)"
        if [ -n "$url" ] && [ -n "$bound" ]; then break; fi
        if ! alive "$STATE/master.pid"; then break; fi
        sleep 0.5
    done
    if [ -z "$url" ] || [ -z "$bound" ]; then
        echo "spark-cluster: the Master did not start within 60 s; logs in $STATE/logs" >&2
        stop
        return 1
    fi
    ui="$bound"
    echo "$url" > "$STATE/master-url"
    echo "http://127.0.0.1:$ui" > "$STATE/master-ui"
    echo "$rest" > "$STATE/master-rest-port"
    for n in $(seq 1 "$WORKERS"); do
        mkdir -p "$STATE/worker-$n"
        setsid "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
            --host 127.0.0.1 --cores "$WORKER_CORES" --memory "$WORKER_MEMORY" --work-dir "$STATE/worker-$n" \
            --webui-port "$(free_port)" "$url" > "$STATE/logs/worker-$n.log" 2>&1 &
        echo $! > "$STATE/worker-$n.pid"
    done
    # Ready when the Master reports every worker alive.
    for _ in $(seq 1 120); do
        if "$PYTHON" - "$ui" "$WORKERS" <<'EOF' 2>/dev/null; then
import json, sys, urllib.request
state = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/json/", timeout=2))
sys.exit(0 if state.get("aliveworkers", 0) >= int(sys.argv[2]) else 1)
EOF
            cat "$STATE/master-url"
            return 0
        fi
        sleep 1
    done
    echo "spark-cluster: workers did not register within 120 s; logs in $STATE/logs" >&2
    stop
    return 1
}

stop() {
    for pidfile in "$STATE"/worker-*.pid "$STATE/master.pid"; do
        [ -f "$pidfile" ] || continue
        if alive "$pidfile"; then
            kill -TERM -- "-$(cat "$pidfile")" 2>/dev/null || kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
        fi
    done
    for pidfile in "$STATE"/worker-*.pid "$STATE/master.pid"; do
        [ -f "$pidfile" ] || continue
        for _ in $(seq 1 20); do alive "$pidfile" || break; sleep 0.5; done
        if alive "$pidfile"; then kill -KILL -- "-$(cat "$pidfile")" 2>/dev/null || true; fi
        rm -f "$pidfile"
    done
}

status() {
    if ! alive "$STATE/master.pid"; then
        echo "spark-cluster: not running"
        return 1
    fi
    echo "master $(cat "$STATE/master-url") (UI $(cat "$STATE/master-ui"), REST port $(cat "$STATE/master-rest-port")), pid $(cat "$STATE/master.pid")"
    for pidfile in "$STATE"/worker-*.pid; do
        if alive "$pidfile"; then echo "$(basename "$pidfile" .pid) pid $(cat "$pidfile")"; fi
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
