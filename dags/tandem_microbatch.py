"""Keep the scheduled queries up to date over their landing directories: one DAG per query that
the configuration lists (``TANDEM_SCHEDULE``, tandem.toml's ``[schedule.<query>]``; by default
the correlated aggregations Q1 and Q2), on its cron (every five minutes by default) or as soon as
a producer updates its landing directory's Asset. Great Expectations validates the files that
landed (failing rows to the quarantine), then the query reads them (Spark availableNow, exactly
once) into its DuckDB results table, publishes that table as an Asset, and Great Expectations
validates the results. A run that finds no new file ends in seconds."""

from airflow.sdk import DAG, Asset, AssetOrTimeSchedule
from airflow.timetables.trigger import CronTriggerTimetable

from airflow_tandem.operators import (
    MicroBatchOperator,
    ValidateLandingOperator,
    ValidateOperator,
    landing_asset,
    lateness_param,
)
from columnar.store import schema_name
from runtime import settings
from runtime.microbatch import microbatch_name

for schedule in settings.schedules():
    table = f"{schema_name(microbatch_name(schedule.query))}/results"
    results = Asset(name=f"tandem_{schedule.name}_results",
                    uri=f"duckdb://{settings.store_path().resolve()}/{table}")
    with DAG(
        dag_id=f"tandem_microbatch_{schedule.name}",
        schedule=AssetOrTimeSchedule(
            timetable=CronTriggerTimetable(schedule.cron, timezone="UTC"),
            assets=landing_asset(schedule.landing)),
        catchup=False,
        max_active_runs=1,  # the checkpoint lock makes overlapping runs safe; this keeps them rare
        tags=["tandem"],
        doc_md=__doc__,
        params={"lateness": lateness_param()},
    ):
        landing = str(schedule.landing)
        (ValidateLandingOperator(task_id="validate_landing", landing=landing,
                                 query=schedule.query)
         >> MicroBatchOperator(task_id="microbatch", query=schedule.query, landing=landing,
                               lateness="{{ params.lateness }}", outlets=[results])
         >> ValidateOperator(task_id="validate", query=schedule.query, microbatch=True))
