"""Keep the correlated aggregations (Q1, Q2) up to date over the landing directory: every five
minutes, or as soon as a producer updates the landing Asset, Great Expectations validates the
files that landed (failing rows to the quarantine), then each query reads them (Spark
availableNow, exactly once) into its DuckDB results table, publishes that table as an Asset, and
Great Expectations validates the results. A run that finds no new file ends in seconds."""

from airflow.sdk import DAG, Asset, AssetOrTimeSchedule
from airflow.timetables.trigger import CronTriggerTimetable

from airflow_tandem.operators import (
    MicroBatchOperator,
    ValidateLandingOperator,
    ValidateOperator,
    lateness_param,
)
from columnar.store import schema_name
from runtime import settings
from runtime.microbatch import SCHEDULED, microbatch_name

LANDED = Asset(name="tandem_landing", uri=f"file://{settings.landing_dir().resolve()}")

with DAG(
    dag_id="tandem_microbatch",
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("*/5 * * * *", timezone="UTC"),
                                 assets=LANDED),
    catchup=False,
    max_active_runs=1,  # the checkpoint lock makes overlapping runs safe; this keeps them rare
    tags=["tandem"],
    doc_md=__doc__,
    params={"lateness": lateness_param()},
):
    landed = ValidateLandingOperator(task_id="validate_landing")
    for query in SCHEDULED:
        table = f"{schema_name(microbatch_name(query))}/results"
        results = Asset(name=f"tandem_{query}_results",
                        uri=f"duckdb://{settings.store_path().resolve()}/{table}")
        (landed
         >> MicroBatchOperator(task_id=f"microbatch_{query}", query=query,
                               lateness="{{ params.lateness }}", outlets=[results])
         >> ValidateOperator(task_id=f"validate_{query}", query=query, microbatch=True))
