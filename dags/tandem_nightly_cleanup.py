"""Every night: purge window state and results older than the retention, compact the DuckDB
file, prune Spark's checkpoint logs, archive the landing files every micro-batch run has read,
refresh the catalog's statistics from them and optimise again (plan changes are logged with
their reason in tandem_log.plans). The report of what was reclaimed is the task's XCom."""

from airflow.sdk import DAG

from airflow_tandem.operators import CleanupOperator
from runtime.microbatch import SCHEDULED

with DAG(
    dag_id="tandem_nightly_cleanup",
    schedule="@daily",
    catchup=False,
    max_active_runs=1,
    tags=["tandem"],
    doc_md=__doc__,
):
    CleanupOperator(task_id="cleanup", queries=list(SCHEDULED), retention_days=1.0)
