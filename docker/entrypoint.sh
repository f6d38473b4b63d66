#!/usr/bin/env bash
# The project image's entry point: one role per compose service (docker/compose.yaml).
#   spark-master | spark-worker            a Spark standalone master or worker, from pyspark
#   airflow-init                           Airflow's metadata database and Tandem's pool
#   api-server | scheduler | dag-processor | triggerer
#                                          an Airflow 3 component
#   tandem ARGS...                         the CLI (e.g. tandem run q1 --source /tandem/landing)
#   anything else                          run as given
# It runs outside a container as well: the tests start every role on this machine.
set -euo pipefail

: "${PYTHON:=python}"
# The installed pyspark's, linked so that Spark's Python workers import it compiled
# (rowstream/spark_home.py).
SPARK_HOME="${SPARK_HOME:-$("$PYTHON" -c 'from rowstream.spark_home import spark_home; print(spark_home())')}"
export SPARK_HOME

role="${1:-}"
[ $# -gt 0 ] && shift
case "$role" in
  spark-master)
    exec "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
      --host "${SPARK_MASTER_HOST:-0.0.0.0}" --port "${SPARK_MASTER_PORT:-7077}" \
      --webui-port "${SPARK_MASTER_WEBUI_PORT:-8081}" "$@" ;;
  spark-worker)
    : "${TANDEM_SPARK_MASTER:?set TANDEM_SPARK_MASTER to the master, e.g. spark://spark-master:7077}"
    exec "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
      "$TANDEM_SPARK_MASTER" --cores "${SPARK_WORKER_CORES:-2}" \
      --memory "${SPARK_WORKER_MEMORY:-4g}" --webui-port "${SPARK_WORKER_WEBUI_PORT:-8082}" "$@" ;;
  airflow-init)
    exec "$PYTHON" -m airflow_tandem.server init ;;
  api-server|scheduler|dag-processor|triggerer)
    exec "$PYTHON" -m airflow "$role" "$@" ;;
  tandem)
    exec "$PYTHON" -m tandem.cli "$@" ;;
  "")
    echo "usage: entrypoint.sh spark-master|spark-worker|airflow-init|api-server|scheduler|dag-processor|triggerer|tandem ARGS..." >&2
    exit 2 ;;
  *)
    exec "$role" "$@" ;;
esac
