"""A DAG of your own with Tandem's operators (docs/operations.md, "Your own DAGs").

Copy this file into your Airflow DAGs folder, on a machine where Tandem is installed, and change
the paths. It keeps one query of yours up to date over the files that land in a directory:
Great Expectations validates the new files (failing rows go to the quarantine), the query reads
them exactly once into its DuckDB results table (`q_<query>_microbatch.results`), and Great
Expectations validates those results. A second, triggered DAG runs the query once over a
directory's files, with the plan the optimiser chose shown in the `optimise` task's XCom.

Every operator opens Tandem's DuckDB file (`TANDEM_STATE`, default `.tandem`); they share the
Airflow pool `tandem_duckdb` of one slot (`tandem airflow` creates it; elsewhere:
`airflow pools set tandem_duckdb 1 "Tandem's DuckDB file"`).
"""

from datetime import timedelta

from airflow.sdk import DAG

from airflow_tandem.operators import (
    MicroBatchOperator,
    OptimizeOperator,
    RunQueryOperator,
    SummaryOperator,
    ValidateLandingOperator,
    ValidateOperator,
)

QUERY = "/data/tandem/queries/hourly_load.sql"  # its catalog.toml beside it
LANDING = "/data/landing/sensors"  # files land here, named in event-time order

with DAG(dag_id="my_hourly_load", schedule=timedelta(minutes=10), catchup=False,
         max_active_runs=1, tags=["tandem"]):
    (ValidateLandingOperator(task_id="validate_landing", landing=LANDING, query=QUERY)
     >> MicroBatchOperator(task_id="microbatch", query=QUERY, landing=LANDING)
     >> ValidateOperator(task_id="validate", query=QUERY, microbatch=True))

with DAG(dag_id="my_hourly_load_once", schedule=None, catchup=False, tags=["tandem"]):
    (OptimizeOperator(task_id="optimise", query=QUERY, source=LANDING)
     >> RunQueryOperator(task_id="run", query=QUERY, source=LANDING, plan_task_id="optimise")
     >> SummaryOperator(task_id="summary", run_task_id="run"))
