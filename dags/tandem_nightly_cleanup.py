"""Every night: purge window state and results older than the retention, compact the DuckDB
file, prune Spark's checkpoint logs, archive the landing files every scheduled query over their
directory has read, refresh the catalog's statistics from them and optimise again (plan changes
are logged with their reason in tandem_log.plans). The report of what was reclaimed is each
task's XCom: one task per landing directory of the scheduled queries."""

from airflow.sdk import DAG

from airflow_tandem.operators import CleanupOperator
from runtime import settings

with DAG(
    dag_id="tandem_nightly_cleanup",
    schedule="@daily",
    catchup=False,
    max_active_runs=1,
    tags=["tandem"],
    doc_md=__doc__,
):
    for n, (landing, queries) in enumerate(settings.scheduled_by_landing().items()):
        CleanupOperator(task_id="cleanup" if n == 0 else f"cleanup_{n + 1}", queries=queries,
                        landing=str(landing), retention_days=1.0)
