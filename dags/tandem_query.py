"""Run a query from Airflow's "Trigger" form: optimise → run (the generator for a bounded
time, or the files of a landing directory) → summary."""

from airflow.sdk import DAG, Param

from airflow_tandem.operators import (
    OptimizeOperator,
    RunQueryOperator,
    SummaryOperator,
    lateness_param,
    quality_params,
)
from runtime.settings import query_names, schedules

QUERIES = query_names()
# The form opens on the first scheduled query, else the first of the folder.
FIRST = next((s.name for s in schedules() if s.name in QUERIES), QUERIES[0] if QUERIES else None)

with DAG(
    dag_id="tandem_query",
    schedule=None,
    catchup=False,
    tags=["tandem"],
    render_template_as_native_obj=True,
    doc_md=__doc__,
    params={
        "query": Param(FIRST, enum=QUERIES,
                       description="A query of the queries folder (TANDEM_QUERIES)."),
        "placement": Param("auto", enum=["auto", "spark", "duckdb", "duckdb-partitioned"],
                           description="auto: the optimiser's plan; spark, duckdb or "
                                       "duckdb-partitioned: every operator on that engine."),
        "rate": Param(1000, type="number", minimum=1, description="Tuples per second."),
        "duration": Param(360, type="number", minimum=1,
                          description="Seconds of event time to generate."),
        "batch": Param(None, type=["null", "number"], minimum=0.001,
                       description="Seconds of event time per micro-batch (empty: one slide)."),
        "source": Param("generator", type="string",
                        description="'generator', or a landing directory of Parquet or CSV "
                                    "files: the run reads the files there and stops."),
        "lateness": lateness_param(),
        **quality_params(),
        "steps": Param("", type="string",
                       description="Rate steps, SECOND:RATE,... (60:40000,120:2000): the "
                                   "rate from that second of event time on."),
        "together": Param([], type="array", items={"type": "string", "enum": QUERIES},
                          description="More queries over the same landing directory, run "
                                      "with this one: DuckDB reads each batch once for all "
                                      "(with the placement above, not the optimise task's)."),
        "adaptive": Param(False, type="boolean",
                          description="Migrate the plan live when the observed rate calls for "
                                      "another one (docs/adaptive.md)."),
    },
):
    optimise = OptimizeOperator(task_id="optimise", query="{{ params.query }}",
                                placement="{{ params.placement }}", rate="{{ params.rate }}",
                                source="{{ params.source }}")
    run = RunQueryOperator(task_id="run", query="{{ params.query }}", rate="{{ params.rate }}",
                           duration="{{ params.duration }}", batch="{{ params.batch }}",
                           lateness="{{ params.lateness }}", plan_task_id="optimise",
                           adaptive="{{ params.adaptive }}", steps="{{ params.steps }}",
                           source="{{ params.source }}", max_error="{{ params.max_error }}",
                           confidence="{{ params.confidence }}",
                           min_recall="{{ params.min_recall }}",
                           disorder="{{ params.disorder }}",
                           together="{{ params.together }}", placement="{{ params.placement }}")
    summary = SummaryOperator(task_id="summary", run_task_id="run")
    optimise >> run >> summary
